# daemon/verbs/: the verbs request handlers, one file per object family,
# and the device context that owns the objects.
DAEMON_SOURCES += \
	daemon/verbs/verbs.h \
	daemon/verbs/fdstat.h \
	daemon/verbs/context.c daemon/verbs/context.h \
	daemon/verbs/query.c daemon/verbs/query.h \
	daemon/verbs/async.c daemon/verbs/async.h \
	daemon/verbs/rings/arena.c daemon/verbs/rings/arena.h \
	daemon/verbs/rings/rings.c daemon/verbs/rings/direct.c \
	daemon/verbs/rings/lease.c daemon/verbs/rings/staging.c \
	daemon/verbs/mr/mem.c daemon/verbs/mr/maps.c daemon/verbs/mr/maps.h \
	daemon/verbs/pd.c daemon/verbs/import.c daemon/verbs/mr.c daemon/verbs/mr/map.c daemon/verbs/mw.c daemon/verbs/mr/dm.c \
	daemon/verbs/channel.c daemon/verbs/cq.c \
	daemon/verbs/qp.c daemon/verbs/qp_modify.c daemon/verbs/qp_bundle.c \
	daemon/verbs/srq.c \
	daemon/verbs/ah.c daemon/verbs/mcast.c \
	daemon/verbs/xrc/xrcd.c daemon/verbs/xrc/qp.c
