# daemon/cm/: the RDMA connection manager (state machines, addresses and
# port spaces, events, multicast joins), and the IB CM's MADs with
# rdma_cm's header in them, for connections across hosts.
DAEMON_SOURCES += \
	daemon/cm/cm.h daemon/cm/internal.h \
	daemon/cm/cm.c daemon/cm/addr.c daemon/cm/conn.c daemon/cm/qp.c \
	daemon/cm/event.c daemon/cm/mcast.c daemon/cm/info.c \
	daemon/cm/remote.c \
	daemon/cm/mad.h daemon/cm/mad.c daemon/cm/cma_hdr.h daemon/cm/cma_hdr.c
