#!/bin/bash
# MPI over ibverbsd (issue 11): Debian's Open MPI 4.1 (pml ucx) and MPICH
# 4.0 (ch4:ucx) run a 2-rank job of tests/mpi/mpi-pingpong.c, built here
# with each one's mpicc, as uid 1001, every byte between the ranks over
# ibverbsd: UCX_TLS=rc_v,self (no shared-memory transport), Open MPI's own
# shared-memory and TCP paths off (--mca btl self), MPICH kept off shared
# memory between local ranks (MPIR_CVAR_NOLOCAL=1).  The program checks
# every byte it receives; the device's packet counter must grow by at least
# one packet per message.
. "$(dirname "$0")/lib.sh"

ibvd_init
is_root || skip "needs root to run the job as uid $USER1"
O=$T/out
mkdir -p "$O"
# UCX looks for /dev/infiniband/DEV: a name other tests' daemons do not use
DEV=mpi$$
LAT_ITERS=200
BW_ITERS=50
# both ranks check: 8 B, 4 KiB and 64 KiB each way per iteration, then
# the bandwidth test's 1 MiB messages once
WANT_BYTES=$((2 * LAT_ITERS * (8 + 4096 + 65536) + BW_ITERS * 1048576))
MIN_PKTS=$((2 * 3 * LAT_ITERS))
SRC=$top_srcdir/tests/mpi/mpi-pingpong.c

daemon_start -c "$(middleware_conf "$DEV")"
daemon_wait_ready

# job NAME MPICC MPIRUN ARGS...: build with MPICC, run with MPIRUN ARGS
job() {
	local name=$1 mpicc=$2 mpirun=$3 bin before after out
	shift 3
	if ! command -v "$mpicc" >/dev/null || ! command -v "$mpirun" >/dev/null; then
		log "$name: $mpicc or $mpirun not installed (scripts/deps): not run"
		SKIPPED="$SKIPPED $name"
		return
	fi
	check "$name: a 2-rank ping-pong and bandwidth job over $DEV"
	bin=$T/mpi-pingpong-$name
	out=$O/$name
	"$mpicc" -O2 -Wall -Wextra -Werror -o "$bin" "$SRC" >"$out.cc" 2>&1 ||
		{ show "$mpicc" "$out.cc"; fail "$name: $mpicc failed"; }
	chmod 755 "$bin"
	before=$(sent_pkts "$DEV")
	run_debian "$USER1" env HOME="$T" UCX_TLS=rc_v,self UCX_NET_DEVICES="$DEV:1" \
		"$mpirun" -np 2 "$@" "$bin" "$LAT_ITERS" "$BW_ITERS" >"$out" 2>&1 ||
		{ show "$name" "$out"; fail "$name: the job failed"; }
	expect_grep "^verified $WANT_BYTES bytes\$" "$out" "$name: every byte checked"
	after=$(sent_pkts "$DEV")
	[ $((after - before)) -ge "$MIN_PKTS" ] ||
		fail "$name: $((after - before)) packets through $DEV, fewer than the $MIN_PKTS messages"
	ok "$name: $(grep -E '^(latency 8 |bandwidth)' "$out" | tr '\n' ';') $((after - before)) packets"
}

SKIPPED=""
job openmpi mpicc.openmpi mpirun.openmpi \
	--mca pml ucx --mca pml_ucx_devices any --mca btl self --mca osc '^ucx'
job mpich mpicc.mpich mpirun.mpich -genv MPIR_CVAR_NOLOCAL 1
daemon_alive "after MPI"
daemon_stop
[ "$SKIPPED" = " openmpi mpich" ] && skip "neither Open MPI nor MPICH is installed"
[ -z "$SKIPPED" ] || log "not run:$SKIPPED"
