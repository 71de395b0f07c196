# daemon/admin/: the ibvctl service, one file per ibvctl object.
DAEMON_SOURCES += \
	daemon/admin/admin.c daemon/admin/admin.h \
	daemon/admin/args.c daemon/admin/args.h \
	daemon/admin/res.c daemon/admin/res.h \
	daemon/admin/cm_id.c \
	daemon/admin/client.c \
	daemon/admin/limit.c daemon/admin/limit.h \
	daemon/admin/stat.c daemon/admin/stat.h
