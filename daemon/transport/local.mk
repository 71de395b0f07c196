# daemon/transport/: what carries messages between QPs for the engine
# (engine/transport.h is the interface).
DAEMON_SOURCES += \
	daemon/transport/transport.h \
	daemon/transport/local.c \
	daemon/transport/gsi.h \
	daemon/transport/gsi.c

include daemon/transport/roce/local.mk
