# unit tests (cm): the IB CM's MADs and rdma_cm's private-data header,
# compiled into the test with the RoCEv2 codec that finds the MADs in the
# capture of two rxe peers (tests/data/rxe-pair.pcap; ROCE_WIRE_SOURCES
# from roce.mk).
CM_MAD_SOURCES = \
	daemon/cm/mad.c daemon/cm/mad.h \
	daemon/cm/cma_hdr.c daemon/cm/cma_hdr.h
check_PROGRAMS += tests/unit/test_cm_mad
TESTS += tests/unit/test_cm_mad

tests_unit_test_cm_mad_SOURCES = tests/unit/test_cm_mad.c \
	tests/unit/capture.c tests/unit/capture.h \
	tests/common/pcap.c tests/common/pcap.h $(CM_MAD_SOURCES) \
	$(ROCE_WIRE_SOURCES)
tests_unit_test_cm_mad_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_unit_test_cm_mad_CFLAGS = $(UNIT_CFLAGS) \
	-DIBVD_TEST_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_cm_mad_LDADD = $(UNIT_LIBS)

# The CM's exchanges with a far peer (daemon/cm/remote.c, compiled into
# the test, which looks at the wires' own state), the rest of the daemon
# stubbed out.
check_PROGRAMS += tests/unit/test_cm_wire
TESTS += tests/unit/test_cm_wire

tests_unit_test_cm_wire_SOURCES = tests/unit/test_cm_wire.c $(CM_MAD_SOURCES)
tests_unit_test_cm_wire_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_unit_test_cm_wire_CFLAGS = $(UNIT_CFLAGS) $(LIBEVENT_CFLAGS)
tests_unit_test_cm_wire_LDADD = $(UNIT_LIBS) $(LIBEVENT_LIBS)
