# unit tests (core): framing and fd passing (common/frame.c), handle tables
# (daemon/core/handle.c, compiled into the test), the transit ring
# (common/transit.c), the daemon's random numbers (daemon/core/random.c),
# rtnetlink answers (daemon/core/rtnl.c).
check_PROGRAMS += tests/unit/test_frame tests/unit/test_handle \
	tests/unit/test_transit tests/unit/test_random tests/unit/test_rtnl
TESTS += tests/unit/test_frame tests/unit/test_handle tests/unit/test_transit \
	tests/unit/test_random tests/unit/test_rtnl

tests_unit_test_frame_SOURCES = tests/unit/test_frame.c
tests_unit_test_frame_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_frame_LDADD = $(UNIT_LIBS)

tests_unit_test_handle_SOURCES = tests/unit/test_handle.c \
	daemon/core/handle.c daemon/core/handle.h
tests_unit_test_handle_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_handle_LDADD = $(UNIT_LIBS)

# A RoCE device's rules (daemon/core/roce.c): default GID, MTU, speed,
# peer CIDRs, and the GID table as addresses come and go.
check_PROGRAMS += tests/unit/test_roce
TESTS += tests/unit/test_roce
tests_unit_test_roce_SOURCES = tests/unit/test_roce.c \
	daemon/core/roce.c daemon/core/roce.h \
	daemon/core/route.c daemon/core/route.h \
	daemon/core/rtnl.c daemon/core/rtnl.h \
	daemon/core/device.c daemon/core/device.h
tests_unit_test_roce_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_unit_test_roce_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_roce_LDADD = $(UNIT_LIBS)

# rtnetlink answers as daemon/core/rtnl.c reads them.
tests_unit_test_rtnl_SOURCES = tests/unit/test_rtnl.c \
	daemon/core/rtnl.c daemon/core/rtnl.h
tests_unit_test_rtnl_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_unit_test_rtnl_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_rtnl_LDADD = $(UNIT_LIBS)

# The daemon's random numbers (daemon/core/random.c).
tests_unit_test_random_SOURCES = tests/unit/test_random.c \
	daemon/core/random.c daemon/core/random.h
tests_unit_test_random_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_unit_test_random_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_random_LDADD = $(UNIT_LIBS)

tests_unit_test_transit_SOURCES = tests/unit/test_transit.c
tests_unit_test_transit_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_transit_LDADD = $(UNIT_LIBS)

# Whether a client's range is mapped (verbs/mr/maps.c): both ways agree.
check_PROGRAMS += tests/unit/test_maps
TESTS += tests/unit/test_maps
tests_unit_test_maps_SOURCES = tests/unit/test_maps.c daemon/verbs/mr/maps.c
tests_unit_test_maps_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_unit_test_maps_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_maps_LDADD = $(UNIT_LIBS)

# Tables of objects by number (core/keyed.c).
check_PROGRAMS += tests/unit/test_keyed
TESTS += tests/unit/test_keyed
tests_unit_test_keyed_SOURCES = tests/unit/test_keyed.c daemon/core/keyed.c
tests_unit_test_keyed_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_unit_test_keyed_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_keyed_LDADD = $(UNIT_LIBS)
