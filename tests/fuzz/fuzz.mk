# Fuzz harnesses: tests/fuzz/NAME.c defines LLVMFuzzerTestOneInput and
# becomes the program tests/fuzz/NAME.fuzz, a test of make check.
#
# Configured with --enable-fuzzing (CC=clang), a harness is a libFuzzer
# program (ASan + UBSan, the daemon code it drives instrumented the same
# way) and make check runs it briefly on a fixed seed over its corpus and
# regression inputs (tests/fuzz/short-run; a crash fails the test).
# Otherwise it is built with the ordinary compiler around replay.c, and
# make check replays the same inputs through it.  Long runs:
# tests/fuzz/run NAME [SECONDS|-runs=N] (bench/FUZZING.md).
#
# make fuzz-check: only what the harnesses need, then their tests
# (scripts/test does this in a second build directory).
TEST_EXTENSIONS = .fuzz
FUZZ_TESTS = tests/fuzz/frame.fuzz tests/fuzz/config.fuzz \
	tests/fuzz/ibvctl_args.fuzz tests/fuzz/handlers.fuzz \
	tests/fuzz/roce_wire.fuzz tests/fuzz/cm_mad.fuzz tests/fuzz/rings.fuzz \
	tests/fuzz/transit.fuzz
check_PROGRAMS += $(FUZZ_TESTS)
TESTS += $(FUZZ_TESTS)

if FUZZING
FUZZ_LOG_COMPILER = $(top_srcdir)/tests/fuzz/short-run
FUZZ_COMPILE = $(WARN_CFLAGS) $(FUZZ_CFLAGS)
FUZZ_LINK = -fsanitize=fuzzer,address,undefined
FUZZ_MAIN =
else
FUZZ_COMPILE = $(AM_CFLAGS)
FUZZ_LINK = $(AM_LDFLAGS)
FUZZ_MAIN = tests/fuzz/replay.c
endif
FUZZ_INCLUDES = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon \
	-DFUZZ_SRCDIR='"$(abs_top_srcdir)"'

# The daemon but main.c, and common/, compiled as the harnesses are
# (instrumented when fuzzing); a harness takes the objects it reaches.
check_LIBRARIES = tests/fuzz/libfuzzdaemon.a
tests_fuzz_libfuzzdaemon_a_SOURCES = $(DAEMON_SOURCES) \
	common/frame.c common/conn.c common/log.c common/verbs_msg.c \
	common/transit.c common/lease.c
nodist_tests_fuzz_libfuzzdaemon_a_SOURCES = proto/ibverbsd.pb-c.c
tests_fuzz_libfuzzdaemon_a_CPPFLAGS = $(FUZZ_INCLUDES)
tests_fuzz_libfuzzdaemon_a_CFLAGS = $(FUZZ_COMPILE) \
	$(PROTOBUF_C_CFLAGS) $(LIBEVENT_CFLAGS) $(JANSSON_CFLAGS) \
	$(SYSTEMD_CFLAGS) -pthread
FUZZ_DAEMON_LIBS = tests/fuzz/libfuzzdaemon.a $(PROTOBUF_C_LIBS) \
	$(LIBEVENT_LIBS) $(JANSSON_LIBS) $(SYSTEMD_LIBS) -lpthread

# frame: a frame's header checks and its payload unpacked by its row of
# the request table, as the dispatcher does
tests_fuzz_frame_fuzz_SOURCES = tests/fuzz/frame.c $(FUZZ_MAIN)
tests_fuzz_frame_fuzz_CPPFLAGS = $(FUZZ_INCLUDES) -DFUZZ_TARGET='"frame"'
tests_fuzz_frame_fuzz_CFLAGS = $(FUZZ_COMPILE) $(PROTOBUF_C_CFLAGS)
tests_fuzz_frame_fuzz_LDFLAGS = $(FUZZ_LINK)
tests_fuzz_frame_fuzz_LDADD = $(FUZZ_DAEMON_LIBS)

# config: ibverbsd.conf parsed from text (load and reload parse alike)
tests_fuzz_config_fuzz_SOURCES = tests/fuzz/config.c $(FUZZ_MAIN)
tests_fuzz_config_fuzz_CPPFLAGS = $(FUZZ_INCLUDES) -DFUZZ_TARGET='"config"'
tests_fuzz_config_fuzz_CFLAGS = $(FUZZ_COMPILE) $(JANSSON_CFLAGS)
tests_fuzz_config_fuzz_LDFLAGS = $(FUZZ_LINK)
tests_fuzz_config_fuzz_LDADD = $(FUZZ_DAEMON_LIBS)

# ibvctl_args: ibvctl's command line (tools/ibvctl_grammar.c), argv
# split from the input at NULs
tests_fuzz_ibvctl_args_fuzz_SOURCES = tests/fuzz/ibvctl_args.c \
	tools/ibvctl_grammar.c tools/ibvctl.h $(FUZZ_MAIN)
tests_fuzz_ibvctl_args_fuzz_CPPFLAGS = $(FUZZ_INCLUDES) -I$(top_srcdir)/tools \
	-DFUZZ_TARGET='"ibvctl_args"'
tests_fuzz_ibvctl_args_fuzz_CFLAGS = $(FUZZ_COMPILE)
tests_fuzz_ibvctl_args_fuzz_LDFLAGS = $(FUZZ_LINK)

# handlers: every request handler in-process, behind a real session
tests_fuzz_handlers_fuzz_SOURCES = tests/fuzz/handlers.c \
	tests/fuzz/fake_daemon.c tests/fuzz/fake_daemon.h $(FUZZ_MAIN)
tests_fuzz_handlers_fuzz_CPPFLAGS = $(FUZZ_INCLUDES) -DFUZZ_TARGET='"handlers"'
tests_fuzz_handlers_fuzz_CFLAGS = $(FUZZ_COMPILE) $(PROTOBUF_C_CFLAGS) \
	$(LIBEVENT_CFLAGS) $(JANSSON_CFLAGS) -pthread
tests_fuzz_handlers_fuzz_LDFLAGS = $(FUZZ_LINK)
tests_fuzz_handlers_fuzz_LDADD = $(FUZZ_DAEMON_LIBS)

# rings: the shared rings as the engine reads them (WQEs, tails,
# doorbells, CQ heads), the engine run synchronously on them
tests_fuzz_rings_fuzz_SOURCES = tests/fuzz/rings.c \
	tests/fuzz/fake_daemon.c tests/fuzz/fake_daemon.h $(FUZZ_MAIN)
tests_fuzz_rings_fuzz_CPPFLAGS = $(FUZZ_INCLUDES) -DFUZZ_TARGET='"rings"'
tests_fuzz_rings_fuzz_CFLAGS = $(FUZZ_COMPILE) $(PROTOBUF_C_CFLAGS) \
	$(LIBEVENT_CFLAGS) $(JANSSON_CFLAGS) -pthread
tests_fuzz_rings_fuzz_LDFLAGS = $(FUZZ_LINK)
tests_fuzz_rings_fuzz_LDADD = $(FUZZ_DAEMON_LIBS)

# roce_wire: RoCEv2 packets (ROCE_WIRE_SOURCES: tests/unit/roce.mk), runs cut
tests_fuzz_roce_wire_fuzz_SOURCES = tests/fuzz/roce_wire.c \
	daemon/transport/roce/gso.c $(ROCE_WIRE_SOURCES) $(FUZZ_MAIN)
tests_fuzz_roce_wire_fuzz_CPPFLAGS = $(FUZZ_INCLUDES) -DFUZZ_TARGET='"roce_wire"'
tests_fuzz_roce_wire_fuzz_CFLAGS = $(FUZZ_COMPILE)
tests_fuzz_roce_wire_fuzz_LDFLAGS = $(FUZZ_LINK)

# cm_mad: the IB CM's MADs, rdma_cm's header (CM_MAD_SOURCES: tests/unit/cm.mk)
tests_fuzz_cm_mad_fuzz_SOURCES = tests/fuzz/cm_mad.c \
	$(CM_MAD_SOURCES) $(FUZZ_MAIN)
tests_fuzz_cm_mad_fuzz_CPPFLAGS = $(FUZZ_INCLUDES) -DFUZZ_TARGET='"cm_mad"'
tests_fuzz_cm_mad_fuzz_CFLAGS = $(FUZZ_COMPILE)
tests_fuzz_cm_mad_fuzz_LDFLAGS = $(FUZZ_LINK)

# transit: the direct transport's rings (common/transit.c) as a receiver
# reads what a hostile sender wrote, and the writer against the reader
tests_fuzz_transit_fuzz_SOURCES = tests/fuzz/transit.c common/transit.c \
	$(FUZZ_MAIN)
tests_fuzz_transit_fuzz_CPPFLAGS = $(FUZZ_INCLUDES) -DFUZZ_TARGET='"transit"'
tests_fuzz_transit_fuzz_CFLAGS = $(FUZZ_COMPILE)
tests_fuzz_transit_fuzz_LDFLAGS = $(FUZZ_LINK)

# Only the harnesses and their tests, not the rest of the tree
# (check-TESTS would first build every check program).
fuzz-check: $(BUILT_SOURCES)
	$(MAKE) $(AM_MAKEFLAGS) check-TESTS TESTS='$(FUZZ_TESTS)' \
		check_PROGRAMS='$(FUZZ_TESTS)' check_SCRIPTS=
.PHONY: fuzz-check

EXTRA_DIST += tests/fuzz/run tests/fuzz/short-run tests/fuzz/corpus \
	tests/fuzz/regressions
