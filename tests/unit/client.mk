# unit tests (client): the string/rate helpers, and the final parts of the
# export tables (compat twins, provider interface, fork, sysfs, kernel
# struct conversions, rdmacm devices/addrinfo), run against the built
# libraries.
check_PROGRAMS += tests/unit/test_strings tests/unit/test_abi
TESTS += tests/unit/test_strings tests/unit/test_abi
tests_unit_test_strings_SOURCES = tests/unit/test_strings.c
tests_unit_test_strings_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_strings_LDADD = client/libibverbs.la client/librdmacm.la \
	$(UNIT_LIBS)
tests_unit_test_abi_SOURCES = tests/unit/test_abi.c
tests_unit_test_abi_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_abi_LDADD = client/libibverbs.la client/librdmacm.la \
	$(UNIT_LIBS)

# The rsocket protocol's formats (client/librdmacm/rsocket/wire.c).
check_PROGRAMS += tests/unit/test_rsocket_wire
TESTS += tests/unit/test_rsocket_wire
tests_unit_test_rsocket_wire_SOURCES = tests/unit/test_rsocket_wire.c \
	client/librdmacm/rsocket/wire.c client/librdmacm/rsocket/rs.h
tests_unit_test_rsocket_wire_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_rsocket_wire_LDADD = $(UNIT_LIBS)

# The library's recovering copies (client/libibverbs/guard.c).
check_PROGRAMS += tests/unit/test_guard
TESTS += tests/unit/test_guard
tests_unit_test_guard_SOURCES = tests/unit/test_guard.c \
	client/libibverbs/guard.c
tests_unit_test_guard_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/client/libibverbs
tests_unit_test_guard_CFLAGS = $(UNIT_CFLAGS) -pthread
tests_unit_test_guard_LDADD = $(UNIT_LIBS)
