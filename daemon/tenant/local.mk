# daemon/tenant/: tenants, their limits and what they are charged.
DAEMON_SOURCES += \
	daemon/tenant/tenant.c daemon/tenant/tenant.h
