# librdmacm: export table and implementation, one file per part of the API
# (cma.h describes the whole); the rsockets in rsocket/ (rsocket/rs.h).
LIBRDMACM_SOURCES += \
	client/librdmacm/cma.h \
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
	client/librdmacm/rsocket/rs.h \
	client/librdmacm/rsocket/wire.c \
	client/librdmacm/rsocket/table.c \
	client/librdmacm/rsocket/endpoint.c \
	client/librdmacm/rsocket/cm.c \
	client/librdmacm/rsocket/cq.c \
	client/librdmacm/rsocket/iomap.c \
	client/librdmacm/rsocket/connect.c \
	client/librdmacm/rsocket/data.c \
	client/librdmacm/rsocket/dgram.c \
	client/librdmacm/rsocket/keepalive.c \
	client/librdmacm/rsocket/poll.c \
	client/librdmacm/rsocket/options.c
