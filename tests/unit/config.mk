# unit tests (config): the config parser against good and bad files and
# strings, and every man page through groff with warnings as errors.
check_PROGRAMS += tests/unit/test_config
TESTS += tests/unit/test_config tests/unit/check-man
tests_unit_test_config_SOURCES = tests/unit/test_config.c daemon/config/config.c \
	daemon/config/config.h daemon/config/config_pos.c daemon/config/config_pos.h \
	daemon/tenant/tenant.c daemon/tenant/tenant.h \
	daemon/core/rate.c daemon/core/rate.h \
	daemon/core/roce.c daemon/core/roce.h \
	daemon/core/route.c daemon/core/route.h \
	daemon/core/rtnl.c daemon/core/rtnl.h \
	daemon/core/device.c daemon/core/device.h
# top_srcdir from the environment wins; the built-in one lets the program
# run by hand from the build tree.
tests_unit_test_config_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_unit_test_config_CFLAGS = $(UNIT_CFLAGS) $(JANSSON_CFLAGS) \
	-DIBVD_TEST_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_config_LDADD = $(UNIT_LIBS) $(JANSSON_LIBS)
EXTRA_DIST += tests/unit/check-man \
	tests/unit/config/good-full.conf \
	tests/unit/config/good-minimal.conf \
	tests/unit/config/good-multi.conf \
	tests/unit/config/bad-syntax.conf \
	tests/unit/config/bad-trailing.conf \
	tests/unit/config/bad-duplicate.conf \
	tests/unit/config/bad-unknown-key.conf \
	tests/unit/config/bad-lid.conf \
	tests/unit/config/bad-overlap.conf \
	tests/unit/config/bad-guid.conf

# the /dev/infiniband links (daemon/devlinks.c), in a temporary directory
check_PROGRAMS += tests/unit/test_devlinks
TESTS += tests/unit/test_devlinks
tests_unit_test_devlinks_SOURCES = tests/unit/test_devlinks.c \
	daemon/devlinks.c daemon/devlinks.h \
	daemon/config/config.c daemon/config/config.h \
	daemon/config/config_pos.c daemon/config/config_pos.h \
	daemon/core/roce.c daemon/core/roce.h \
	daemon/core/route.c daemon/core/route.h \
	daemon/core/rtnl.c daemon/core/rtnl.h \
	daemon/core/device.c daemon/core/device.h
tests_unit_test_devlinks_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_unit_test_devlinks_CFLAGS = $(UNIT_CFLAGS) $(JANSSON_CFLAGS)
tests_unit_test_devlinks_LDADD = $(UNIT_LIBS) $(JANSSON_LIBS)

# the raw-socket broker and the privilege drop (daemon/netraw.c,
# privilege.c), in forked children; skipped without root
check_PROGRAMS += tests/unit/test_netraw
TESTS += tests/unit/test_netraw
tests_unit_test_netraw_SOURCES = tests/unit/test_netraw.c \
	daemon/netraw.c daemon/netraw.h \
	daemon/privilege.c daemon/privilege.h \
	daemon/leftovers.c daemon/leftovers.h \
	daemon/devlinks.c daemon/devlinks.h \
	daemon/core/rawsock.c daemon/core/rawsock.h
tests_unit_test_netraw_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_unit_test_netraw_CFLAGS = $(UNIT_CFLAGS) -pthread
tests_unit_test_netraw_LDADD = $(UNIT_LIBS) -lpthread
