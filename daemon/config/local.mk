# daemon/config/: the configuration file, parsed and checked (JSON, with
# line:column errors).  Only startup and reload parse it.
DAEMON_SOURCES += \
	daemon/config/config.c daemon/config/config.h \
	daemon/config/config_pos.c daemon/config/config_pos.h
