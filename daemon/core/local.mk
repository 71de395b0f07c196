# daemon/core/: the object model every layer shares: verbs objects and
# the registries the engine looks them up in, handle tables, devices and
# their ports (and the rules of RoCE ones, how their raw sockets are
# opened, the hop limit and the next hop of a route and that hop's
# neighbour entry, from rtnetlink), the token bucket
# of a tenant's bandwidth, the host's own addresses.
DAEMON_SOURCES += \
	daemon/core/objects.h daemon/core/registry.c \
	daemon/core/keyed.c daemon/core/keyed.h \
	daemon/core/random.c daemon/core/random.h \
	daemon/core/handle.c daemon/core/handle.h \
	daemon/core/device.c daemon/core/device.h \
	daemon/core/roce.c daemon/core/roce.h \
	daemon/core/rawsock.c daemon/core/rawsock.h \
	daemon/core/rtnl.c daemon/core/rtnl.h \
	daemon/core/route.c daemon/core/route.h \
	daemon/core/neigh.c daemon/core/neigh.h \
	daemon/core/rate.c daemon/core/rate.h \
	daemon/core/thread.c daemon/core/thread.h \
	daemon/core/host_addrs.c daemon/core/host_addrs.h
