# The ibverbsd daemon, one folder per layer (daemon/README.md).  Each
# folder lists its own files in its local.mk; the top level holds only
# what ties the layers together: main (argv, signals, start, upcalls), the
# request table, config load and reload, the device set and the network
# interfaces under RoCE devices.
# tests/layers.sh checks that no dependency runs against the layers.
# DAEMON_SOURCES: all but main.c, which the fuzz harnesses link too
# (tests/fuzz/fuzz.mk).
sbin_PROGRAMS += daemon/ibverbsd
daemon_ibverbsd_SOURCES = daemon/main.c $(DAEMON_SOURCES)
DAEMON_SOURCES = \
	daemon/reload.c daemon/reload.h \
	daemon/devices.c daemon/devices.h \
	daemon/devlinks.c daemon/devlinks.h \
	daemon/privilege.c daemon/privilege.h \
	daemon/netraw.c daemon/netraw.h \
	daemon/leftovers.c daemon/leftovers.h \
	daemon/netdev.c daemon/netdev.h \
	daemon/netdev_watch.c daemon/netdev_watch.h \
	daemon/request.c daemon/request.h
# Includes are written from daemon/ ("engine/engine.h"), or bare within
# one folder.
daemon_ibverbsd_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
daemon_ibverbsd_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS) $(LIBEVENT_CFLAGS) \
	$(JANSSON_CFLAGS) $(SYSTEMD_CFLAGS) -pthread
daemon_ibverbsd_LDADD = common/libibvd_common.la $(PROTOBUF_C_LIBS) $(LIBEVENT_LIBS) \
	$(JANSSON_LIBS) $(SYSTEMD_LIBS) -lpthread

include daemon/config/local.mk
include daemon/core/local.mk
include daemon/tenant/local.mk
include daemon/server/local.mk
include daemon/verbs/local.mk
include daemon/cm/local.mk
include daemon/admin/local.mk
include daemon/engine/local.mk
include daemon/transport/local.mk
