# unit tests (core): framing and fd passing (common/frame.c), handle tables
# (daemon/core/handle.c, compiled into the test).
check_PROGRAMS += tests/unit/test_frame tests/unit/test_handle
TESTS += tests/unit/test_frame tests/unit/test_handle

tests_unit_test_frame_SOURCES = tests/unit/test_frame.c
tests_unit_test_frame_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_frame_LDADD = $(UNIT_LIBS)

tests_unit_test_handle_SOURCES = tests/unit/test_handle.c \
	daemon/core/handle.c daemon/core/handle.h
tests_unit_test_handle_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_handle_LDADD = $(UNIT_LIBS)
