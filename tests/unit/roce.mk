# unit tests (transport/roce): the RoCEv2 packet codec, compiled into the
# test, against the worked example of the wire notes, a capture of two
# Linux rxe peers (tests/data/rxe-pair.pcap) and malformed packets.
check_PROGRAMS += tests/unit/test_roce_wire
TESTS += tests/unit/test_roce_wire
tests_unit_test_roce_wire_SOURCES = tests/unit/test_roce_wire.c \
	daemon/transport/roce/wire.c daemon/transport/roce/wire.h \
	daemon/transport/roce/ip.c daemon/transport/roce/icrc.c \
	daemon/transport/roce/crc32.c daemon/transport/roce/crc32.h \
	daemon/transport/roce/be.h
# top_srcdir from the environment wins; the built-in one lets the program
# run by hand from the build tree.
tests_unit_test_roce_wire_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_unit_test_roce_wire_CFLAGS = $(UNIT_CFLAGS) \
	-DIBVD_TEST_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_roce_wire_LDADD = $(UNIT_LIBS)
EXTRA_DIST += tests/data/rxe-pair.pcap
