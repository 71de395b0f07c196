# Fuzz targets (tests/fuzz/run.sh runs one under libFuzzer with clang).
# make check builds each with the ordinary compiler and replays its seed
# corpus through it (replay.c): the harness keeps building, and its checks
# hold on real packets.
check_PROGRAMS += tests/fuzz/fuzz_roce_wire
TESTS += tests/fuzz/fuzz_roce_wire
tests_fuzz_fuzz_roce_wire_SOURCES = tests/fuzz/fuzz_roce_wire.c \
	tests/fuzz/replay.c \
	daemon/transport/roce/wire.c daemon/transport/roce/wire.h \
	daemon/transport/roce/ip.c daemon/transport/roce/icrc.c \
	daemon/transport/roce/crc32.c daemon/transport/roce/crc32.h \
	daemon/transport/roce/be.h
tests_fuzz_fuzz_roce_wire_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon \
	-DFUZZ_TARGET='"roce_wire"' -DFUZZ_SRCDIR='"$(abs_top_srcdir)"'

EXTRA_DIST += tests/fuzz/run.sh tests/fuzz/corpus
