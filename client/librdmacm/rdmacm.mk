# librdmacm: export table and implementation.  One file per part of the
# API; most of it still fails with ENOSYS (unsupported.h).
LIBRDMACM_SOURCES += \
	client/librdmacm/unsupported.h \
	client/librdmacm/cma.c \
	client/librdmacm/devices.c \
	client/librdmacm/qp.c \
	client/librdmacm/ep.c \
	client/librdmacm/addrinfo.c \
	client/librdmacm/rsocket.c
