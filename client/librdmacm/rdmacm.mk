# librdmacm: export table and implementation, one file per part of the API
# (cma.h describes the whole).  rsockets still fail with ENOSYS
# (unsupported.h).
LIBRDMACM_SOURCES += \
	client/librdmacm/cma.h \
	client/librdmacm/unsupported.h \
	client/librdmacm/cma.c \
	client/librdmacm/channel.c \
	client/librdmacm/events.c \
	client/librdmacm/addr.c \
	client/librdmacm/conn.c \
	client/librdmacm/qp.c \
	client/librdmacm/ep.c \
	client/librdmacm/mcast.c \
	client/librdmacm/mcast_joins.c \
	client/librdmacm/msg.c \
	client/librdmacm/devices.c \
	client/librdmacm/addrinfo.c \
	client/librdmacm/rsocket.c
