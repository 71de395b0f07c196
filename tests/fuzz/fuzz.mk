# Fuzz targets (tests/fuzz/run.sh runs one under libFuzzer with clang).
# make check builds each with the ordinary compiler and replays its seed
# corpus through it (replay.c): the harness keeps building, and its checks
# hold on real packets.
check_PROGRAMS += tests/fuzz/fuzz_roce_wire
TESTS += tests/fuzz/fuzz_roce_wire
# ROCE_WIRE_SOURCES: tests/unit/roce.mk
tests_fuzz_fuzz_roce_wire_SOURCES = tests/fuzz/fuzz_roce_wire.c \
	tests/fuzz/replay.c $(ROCE_WIRE_SOURCES)
tests_fuzz_fuzz_roce_wire_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon \
	-DFUZZ_TARGET='"roce_wire"' -DFUZZ_SRCDIR='"$(abs_top_srcdir)"'

check_PROGRAMS += tests/fuzz/fuzz_cm_mad
TESTS += tests/fuzz/fuzz_cm_mad
# CM_MAD_SOURCES: tests/unit/cm.mk
tests_fuzz_fuzz_cm_mad_SOURCES = tests/fuzz/fuzz_cm_mad.c \
	tests/fuzz/replay.c $(CM_MAD_SOURCES)
tests_fuzz_fuzz_cm_mad_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon \
	-DFUZZ_TARGET='"cm_mad"' -DFUZZ_SRCDIR='"$(abs_top_srcdir)"'

EXTRA_DIST += tests/fuzz/run.sh tests/fuzz/corpus
