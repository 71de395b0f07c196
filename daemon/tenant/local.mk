# daemon/tenant/: tenants, their limits and what they are charged.
daemon_ibverbsd_SOURCES += \
	daemon/tenant/tenant.c daemon/tenant/tenant.h
