#!/bin/sh
# Fuzz one target with libFuzzer (clang, ASan + UBSan) for a while.
#
# usage: tests/fuzz/run.sh TARGET [SECONDS]     (default 60)
#   TARGET   roce_wire or cm_mad (tests/fuzz/fuzz_TARGET.c)
# Environment:
#   BUILD_DIR  a configured build directory, for config.h (default build/)
#   CLANG      the compiler (default clang)
#   JOBS       parallel fuzzing jobs (default 1)
#
# Seeds come from tests/fuzz/corpus/TARGET (for roce_wire: the first
# RoCEv2 packet of each opcode in tests/data/rxe-pair.pcap, as the IP
# packet ip-* and as the UDP payload udp-*, and an IPv6 packet ip6-*; for
# cm_mad: the first MAD of each attribute there, mad-*, and the private
# data of its REQ and SIDR REQ, cma-*);
# what the fuzzer finds goes to BUILD_DIR/tests/fuzz/TARGET/corpus, crashes
# to .../crashes.  Replay a crash with the make check build:
# BUILD_DIR/tests/fuzz/fuzz_TARGET FILE.  Exits 77 (skipped) without clang.
set -eu

usage() { sed -n '2,/^set -eu/{/^set -eu/d;s/^# \{0,1\}//;p}' "$0"; }
die() { echo "tests/fuzz/run.sh: $*" >&2; exit 1; }

[ $# -ge 1 ] && [ $# -le 2 ] || { usage >&2; exit 2; }
target=$1
seconds=${2:-60}
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$top/build}
clang=${CLANG:-clang}
jobs=${JOBS:-1}

case $target in
roce_wire)
	sources="daemon/transport/roce/wire.c daemon/transport/roce/ip.c
		daemon/transport/roce/icrc.c daemon/transport/roce/crc32.c"
	max_len=4200 ;;
cm_mad)
	sources="daemon/cm/mad.c daemon/cm/cma_hdr.c"
	max_len=300 ;;
*)	die "unknown target '$target'" ;;
esac
command -v "$clang" >/dev/null 2>&1 || { echo "no $clang: skipped"; exit 77; }
[ -f "$build/config.h" ] || die "$build is not configured (scripts/test --build-only)"

work=$build/tests/fuzz/$target
mkdir -p "$work/corpus" "$work/crashes"
cd "$top"
# shellcheck disable=SC2086 # sources are words
"$clang" -g -O1 -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined -Wall -Wextra -Werror \
	-I"$build" -I"$top" -I"$top/daemon" \
	"tests/fuzz/fuzz_$target.c" $sources -o "$work/fuzz_$target"
cd "$work"
# -jobs sends each job's output to fuzz-N.log: only when there are several
parallel=""
[ "$jobs" -le 1 ] || parallel="-jobs=$jobs -workers=$jobs"
# shellcheck disable=SC2086
exec "./fuzz_$target" -max_total_time="$seconds" -max_len="$max_len" \
	-print_final_stats=1 $parallel \
	-artifact_prefix="$work/crashes/" corpus "$top/tests/fuzz/corpus/$target"
