#!/bin/bash
# MPI over ibverbsd (issue 11): Debian's Open MPI 4.1 and MPICH 4.0, as
# uid 1001, every byte between the ranks over ibverbsd: through UCX with
# UCX_TLS=rc_v,self (no shared-memory transport; Open MPI's pml ucx,
# MPICH's ch4:ucx), Open MPI's own shared-memory and TCP paths off (btl
# self, and openib or ofi where named), MPICH kept off shared memory
# between local ranks (MPIR_CVAR_NOLOCAL=1).
#   - a 2-rank job of tests/mpi/mpi-pingpong.c, which checks every byte
#     it receives; the device's packet counter must grow by at least one
#     packet per message;
#   - tests/mpi/mpi-coll-rma.c on 2 and on 4 ranks: allreduce, alltoall
#     and bcast, then put, get and accumulate under fences, put and get
#     under locks, compare_and_swap and fetch_and_op on 64- and 32-bit
#     elements, on a window of MPI_Win_allocate's and one of
#     MPI_Win_create's, every value checked; Open MPI's windows are osc
#     ucx's (--mca osc ucx: Debian's openmpi-mca-params.conf turns it off,
#     and then MPI_Win_allocate takes osc sm, shared memory, and
#     MPI_Win_create finds no component at all), MPICH's its ch4:ucx RMA.
#     Every iteration's puts must show in the packet counter.
#   - Open MPI's openib BTL (pml ob1), which Debian's configuration turns
#     off and which gives up before opening a device unless
#     "<ibv_get_sysfs_path()>/class/infiniband" is a directory: given a
#     SYSFS_PATH that has one, and btl_openib_allow_ib (Open MPI 4 keeps
#     it off InfiniBand ports, for UCX), mpi-pingpong, and mpi-coll-rma
#     over osc rdma, whose atomics on MPI_Win_create's window are the
#     device's (no-cas: osc rdma's MPI_Compare_and_swap passes openib a
#     null target handle, which it dereferences);
#   - Open MPI's ofi BTL on libfabric's verbs;ofi_rxd (UD): mpi-pingpong,
#     and mpi-coll-rma over osc rdma (no-cas, as for openib).  It takes
#     no provider with ofi_rxm in its name, and sends nothing but
#     one-sided operations without btl_ofi_mode 2.  Its datagrams
#     between two local UD QPs may all pass through the direct
#     transport's rings, which the engine never sees (libfabric.sh), so
#     its packets are only reported.
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
# mpi-coll-rma: iterations of COLL_COUNT int64 (512 KiB)
COLL_ITERS=3
COLL_COUNT=65536

daemon_start -c "$(middleware_conf "$DEV")"
daemon_wait_ready

# build NAME MPICC SRC: $T/NAME built from SRC with MPICC
build() {
	"$2" -O2 -Wall -Wextra -Werror -o "$T/$1" "$3" >"$O/$1.cc" 2>&1 ||
		{ show "$2" "$O/$1.cc"; fail "$2 $3 failed"; }
	chmod 755 "$T/$1"
}

# job NAME MPI MPIRUN ARGS...: mpi-pingpong built with MPI's mpicc, run
# with MPIRUN ARGS
job() {
	local name=$1 mpi=$2 mpirun=$3 before after out=$O/$1
	shift 3
	check "$name: a 2-rank ping-pong and bandwidth job over $DEV"
	before=$(sent_pkts "$DEV")
	run_debian "$USER1" env HOME="$T" UCX_TLS=rc_v,self UCX_NET_DEVICES="$DEV:1" \
		"$mpirun" -np 2 "$@" "$T/mpi-pingpong-$mpi" "$LAT_ITERS" "$BW_ITERS" >"$out" 2>&1 ||
		{ show "$name" "$out"; fail "$name: the job failed"; }
	expect_grep "^verified $WANT_BYTES bytes\$" "$out" "$name: every byte checked"
	after=$(sent_pkts "$DEV")
	[ -n "${RINGS_MAY_CARRY:-}" ] || [ $((after - before)) -ge "$MIN_PKTS" ] ||
		fail "$name: $((after - before)) packets through $DEV, fewer than the $MIN_PKTS messages"
	ok "$name: $(grep -E '^(latency 8 |bandwidth)' "$out" | tr '\n' ';') $((after - before)) packets"
}

# coll NAME MPI NP MPIRUN ARGS...: mpi-coll-rma built with MPI's mpicc on
# NP ranks.  Each iteration every rank puts COLL_COUNT int64 to its right
# neighbour on each of the two windows, 4 KiB to a packet at most.
coll() {
	local name=$1 mpi=$2 np=$3 mpirun=$4 before after out=$O/$1 min start=$SECONDS
	shift 4
	check "$name: collectives and one-sided on $np ranks over $DEV"
	min=$((COLL_ITERS * 2 * np * COLL_COUNT * 8 / 4096))
	before=$(sent_pkts "$DEV")
	TMO=$((TMO * 3)) run_debian "$USER1" env HOME="$T" UCX_TLS=rc_v,self \
		UCX_NET_DEVICES="$DEV:1" "$mpirun" -np "$np" "$@" \
		"$T/mpi-coll-rma-$mpi" "$COLL_ITERS" "$COLL_COUNT" ${COLL_MODE:+"$COLL_MODE"} >"$out" 2>&1 ||
		{ show "$name" "$out"; fail "$name: the job failed"; }
	expect_grep "^verified: 0 errors, $COLL_ITERS iterations of $COLL_COUNT int64\$" \
		"$out" "$name: every value checked"
	after=$(sent_pkts "$DEV")
	[ -n "${RINGS_MAY_CARRY:-}" ] || [ $((after - before)) -ge "$min" ] ||
		fail "$name: $((after - before)) packets through $DEV, fewer than the $min its puts need"
	ok "$name: $(grep '^verified' "$out"); $((after - before)) packets, $((SECONDS - start)) s"
}

# have MPI MPICC MPIRUN: MPI's programs built, or false when not installed
have() {
	if ! command -v "$2" >/dev/null || ! command -v "$3" >/dev/null; then
		log "$1: $2 or $3 not installed (scripts/deps): not run"
		SKIPPED="$SKIPPED $1"
		return 1
	fi
	build "mpi-pingpong-$1" "$2" "$top_srcdir/tests/mpi/mpi-pingpong.c"
	build "mpi-coll-rma-$1" "$2" "$top_srcdir/tests/mpi/mpi-coll-rma.c"
}

SKIPPED=""
# Open MPI gives a machine a slot per CPU: 4 ranks on 2 CPUs need
# --oversubscribe
OMPI_UCX=(--mca pml ucx --mca pml_ucx_devices any --mca btl self)
if have openmpi mpicc.openmpi mpirun.openmpi; then
	job openmpi openmpi mpirun.openmpi "${OMPI_UCX[@]}"
	coll "openmpi osc ucx" openmpi 2 mpirun.openmpi "${OMPI_UCX[@]}" --mca osc ucx
	coll "openmpi 4 ranks" openmpi 4 mpirun.openmpi --oversubscribe \
		"${OMPI_UCX[@]}" --mca osc ucx
	mkdir -p "$T/sys/class/infiniband"
	chmod -R 755 "$T/sys"
	OPENIB=(-x SYSFS_PATH="$T/sys" --mca pml ob1 --mca btl "self,openib"
		--mca btl_openib_allow_ib true --mca btl_openib_warn_no_device_params_found 0)
	job "openmpi openib" openmpi mpirun.openmpi "${OPENIB[@]}"
	COLL_MODE=no-cas coll "openmpi openib osc rdma" openmpi 2 mpirun.openmpi \
		"${OPENIB[@]}" --mca osc rdma
	OFI=(--mca pml ob1 --mca btl "self,ofi" --mca btl_ofi_mode 2
		--mca btl_ofi_provider_include "verbs;ofi_rxd")
	RINGS_MAY_CARRY=1 job "openmpi btl ofi (verbs;ofi_rxd)" openmpi mpirun.openmpi "${OFI[@]}"
	RINGS_MAY_CARRY=1 COLL_MODE=no-cas coll "openmpi btl ofi osc rdma" openmpi 2 \
		mpirun.openmpi "${OFI[@]}" --mca osc rdma
fi
if have mpich mpicc.mpich mpirun.mpich; then
	job mpich mpich mpirun.mpich -genv MPIR_CVAR_NOLOCAL 1
	coll "mpich rma" mpich 2 mpirun.mpich -genv MPIR_CVAR_NOLOCAL 1
	coll "mpich 4 ranks" mpich 4 mpirun.mpich -genv MPIR_CVAR_NOLOCAL 1
fi
daemon_alive "after MPI"
daemon_stop
[ "$SKIPPED" = " openmpi mpich" ] && skip "neither Open MPI nor MPICH is installed"
[ -z "$SKIPPED" ] || log "not run:$SKIPPED"
