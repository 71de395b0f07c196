# daemon/cm/: the RDMA connection manager (state machines, addresses and
# port spaces, events, multicast joins).
daemon_ibverbsd_SOURCES += \
	daemon/cm/cm.h daemon/cm/internal.h \
	daemon/cm/cm.c daemon/cm/addr.c daemon/cm/conn.c \
	daemon/cm/event.c daemon/cm/mcast.c daemon/cm/info.c
