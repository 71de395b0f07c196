# The ibverbsd daemon.
sbin_PROGRAMS += daemon/ibverbsd
daemon_ibverbsd_SOURCES = daemon/main.c daemon/config.c daemon/config.h
daemon_ibverbsd_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS) $(LIBEVENT_CFLAGS) \
	$(JANSSON_CFLAGS) $(SYSTEMD_CFLAGS)
daemon_ibverbsd_LDADD = common/libibvd_common.la $(PROTOBUF_C_LIBS) $(LIBEVENT_LIBS) \
	$(JANSSON_LIBS) $(SYSTEMD_LIBS)
