# The ibverbsd daemon.  One file per concept; handlers live with their
# object family and are listed in request.c's table.
sbin_PROGRAMS += daemon/ibverbsd
daemon_ibverbsd_SOURCES = \
	daemon/ibverbsd.h \
	daemon/main.c \
	daemon/config.c daemon/config.h \
	daemon/config_pos.c daemon/config_pos.h \
	daemon/reload.c \
	daemon/notify.c daemon/notify.h \
	daemon/server.c daemon/server.h \
	daemon/session.c daemon/session.h \
	daemon/tenant.c daemon/tenant.h \
	daemon/request.c daemon/request.h \
	daemon/handle.c daemon/handle.h \
	daemon/device.c daemon/device.h \
	daemon/context.c daemon/context.h \
	daemon/query.c daemon/query.h \
	daemon/async.c daemon/async.h \
	daemon/admin.c daemon/admin.h \
	daemon/verbs.h daemon/objects.c daemon/objects.h \
	daemon/rings.c daemon/mem.c \
	daemon/pd.c daemon/mr.c daemon/mw.c daemon/channel.c daemon/cq.c \
	daemon/qp.c daemon/qp_modify.c daemon/srq.c daemon/ah.c daemon/mcast.c \
	daemon/cm.h daemon/cm_internal.h daemon/cm.c daemon/cm_addr.c \
	daemon/cm_conn.c daemon/cm_event.c daemon/cm_mcast.c daemon/cm_admin.c \
	daemon/res_admin.c daemon/res_admin.h daemon/client_admin.c \
	daemon/stat_admin.c daemon/stat_admin.h \
	daemon/limit_admin.c daemon/limit_admin.h
daemon_ibverbsd_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS) $(LIBEVENT_CFLAGS) \
	$(JANSSON_CFLAGS) $(SYSTEMD_CFLAGS)
daemon_ibverbsd_LDADD = common/libibvd_common.la $(PROTOBUF_C_LIBS) $(LIBEVENT_LIBS) \
	$(JANSSON_LIBS) $(SYSTEMD_LIBS)

# The engine: threads, WQE execution, memory access.
include daemon/engine/local.mk
