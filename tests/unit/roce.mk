# unit tests (transport/roce): the RoCEv2 packet codec, compiled into each
# test: on packets made in the test (test_roce_wire) and on a capture of
# two Linux rxe peers (test_roce_capture, tests/data/rxe-pair.pcap, read
# by tests/common/pcap.c).
ROCE_WIRE_SOURCES = \
	daemon/transport/roce/wire.c daemon/transport/roce/wire.h \
	daemon/transport/roce/ip.c daemon/transport/roce/icrc.c \
	daemon/transport/roce/crc32.c daemon/transport/roce/crc32.h \
	daemon/transport/roce/be.h
check_PROGRAMS += tests/unit/test_roce_wire tests/unit/test_roce_capture
TESTS += tests/unit/test_roce_wire tests/unit/test_roce_capture

tests_unit_test_roce_wire_SOURCES = tests/unit/test_roce_wire.c \
	$(ROCE_WIRE_SOURCES)
tests_unit_test_roce_wire_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_unit_test_roce_wire_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_roce_wire_LDADD = $(UNIT_LIBS)

# top_srcdir from the environment wins; the built-in one lets the program
# run by hand from the build tree.
tests_unit_test_roce_capture_SOURCES = tests/unit/test_roce_capture.c \
	tests/unit/capture.c tests/unit/capture.h \
	tests/common/pcap.c tests/common/pcap.h $(ROCE_WIRE_SOURCES)
tests_unit_test_roce_capture_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_unit_test_roce_capture_CFLAGS = $(UNIT_CFLAGS) \
	-DIBVD_TEST_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_roce_capture_LDADD = $(UNIT_LIBS)
EXTRA_DIST += tests/data/rxe-pair.pcap

# RC requester and responder (rc.c, rc_resp.c, packet.c) with the engine
# and the sockets stubbed in the test: what goes out is kept as IP
# packets, and the test hands each one to the other QP, or loses it.
check_PROGRAMS += tests/unit/test_roce_rc
TESTS += tests/unit/test_roce_rc
tests_unit_test_roce_rc_SOURCES = tests/unit/test_roce_rc.c \
	daemon/transport/roce/rc.c daemon/transport/roce/rc_resp.c \
	daemon/transport/roce/packet.c daemon/transport/roce/gso.c \
	daemon/transport/roce/internal.h daemon/engine/chunk.c \
	$(ROCE_WIRE_SOURCES)
tests_unit_test_roce_rc_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_unit_test_roce_rc_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_roce_rc_LDADD = $(UNIT_LIBS)

# Runs of packets as one datagram (gso.c): what a run is, its packets'
# identifications and ICRCs, and cutting one back into its packets,
# hostile ones included.
check_PROGRAMS += tests/unit/test_roce_gso
TESTS += tests/unit/test_roce_gso
tests_unit_test_roce_gso_SOURCES = tests/unit/test_roce_gso.c \
	daemon/transport/roce/gso.c daemon/transport/roce/internal.h \
	$(ROCE_WIRE_SOURCES)
tests_unit_test_roce_gso_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_unit_test_roce_gso_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_roce_gso_LDADD = $(UNIT_LIBS)

# QP1's mailbox (transport/gsi.c): bounded in all and per sender.
check_PROGRAMS += tests/unit/test_gsi
TESTS += tests/unit/test_gsi
tests_unit_test_gsi_SOURCES = tests/unit/test_gsi.c daemon/transport/gsi.c \
	daemon/core/random.c daemon/core/keyed.c
tests_unit_test_gsi_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_unit_test_gsi_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_gsi_LDADD = $(UNIT_LIBS)
