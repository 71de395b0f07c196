# daemon/server/: the listener, client sessions and their frames, the call
# API request handlers use, systemd notification.
DAEMON_SOURCES += \
	daemon/server/daemon.h \
	daemon/server/call.c daemon/server/call.h \
	daemon/server/clients.c daemon/server/clients.h \
	daemon/server/closer.c daemon/server/closer.h \
	daemon/server/server.c daemon/server/server.h \
	daemon/server/loop.c \
	daemon/server/session.c daemon/server/session.h \
	daemon/server/notify.c daemon/server/notify.h
