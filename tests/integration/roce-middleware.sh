#!/bin/bash
# Middleware across hosts: Debian's unmodified UCX 1.13, libfabric 1.17,
# qperf, Open MPI 4.1 and MPICH 4.0 between two network namespaces joined
# by a veth pair, one daemon in each with a RoCE device on its end
# (netns.sh), as two hosts with RoCE NICs would run them.  Servers (uid $USER1) in A,
# clients (uid $USER2) in B.  UCX finds each side's device by its own
# means (/dev/infiniband, the GID table's RoCE v2 entries) and talks to
# the other side over rc_verbs or ud_verbs on the wire only: UCX_TLS
# names no other way.
#   - ucx_info -d lists rc_verbs and ud_verbs on A's device;
#   - ucx_perftest tag_lat, tag_bw, ucp_put_bw, ucp_get over rc_verbs
#     (with ud_verbs for wireup) and over ud_verbs; each run ends with
#     its "Final:" line, and A's device counts the packets it received;
#   - UCT's own operations: am_lat, am_bw, put_bw, get over rc_verbs and
#     ud_verbs from several SGEs, and rc_verbs' atomics (add_lat, add_mr,
#     fadd, cswap), whose FETCH_ADD and COMPARE_SWAP requests tshark must
#     see on the wire;
#   - UCX's client-server example (tag API), connecting through the RDMA
#     CM;
#   - libfabric's fi_pingpong over verbs;ofi_rxd (UD);
#   - qperf's RC tests through the RDMA CM (-cm1), and by LID: EINVAL;
#   - rsockets: Debian's rstream, riostream (verified) and udpong;
#   - a 2-rank MPI job of tests/mpi/mpi-pingpong.c (every byte checked)
#     with each MPI over UCX's rc_verbs, one rank on each host, started
#     through an ssh of our own that enters the other namespace;
#   - tests/mpi/mpi-coll-rma.c (collectives and one-sided, every value
#     checked) the same way with Open MPI over pml ucx and over mtl ofi
#     (verbs;ofi_rxm), whose provider must advertise A's address.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns.sh"

need_cmd ucx_info ucx_perftest fi_pingpong qperf rstream riostream udpong
is_root || skip "network namespaces need root"
ibvd_init
O=$T/out
mkdir -p "$O"
ITERS=1000
[ -n "$SANITIZERS" ] && ITERS=200

# Both devices have one name: ucx_perftest's server runs the UCT test its
# client asks for, on the device the client names.  UCX opens
# /dev/infiniband/DEV, which the daemons share: B's, started first,
# makes it, A's finds it made.  UCX registers tens of MiB at start, over
# this machine's 8 MiB RLIMIT_MEMLOCK (middleware_conf).
WIRE_DEV_A=rm$$
WIRE_DEV_B=$WIRE_DEV_A
WIRE_CONF_EXTRA='"rlimit_memlock": "ignore", "device_links": true,'
# debug: the CM's MADs in the daemons' logs, for show_cm
WIRE_DAEMON_ARGS="-v -v"
wire_up

check "ucx_info -d lists rc_verbs and ud_verbs on $WIRE_DEV_A:1"
ns_debian "$NSA" "$USER1" "$SOCK_A" ucx_info -d >"$O/info" 2>&1 ||
	{ show ucx_info "$O/info"; fail "ucx_info -d"; }
for tl in rc_verbs ud_verbs; do
	grep -A1 "Transport: $tl\$" "$O/info" | grep -q "Device: $WIRE_DEV_A:1\$" ||
		{ show ucx_info "$O/info"; fail "ucx_info -d lists no $tl on $WIRE_DEV_A:1"; }
done
ok "rc_verbs and ud_verbs on $WIRE_DEV_A:1"

# rcvd_pkts SOCK DEV: what DEV's port took from the wire
rcvd_pkts() {
	SOCK=$1 ibvctl -j statistic show link "$2/1" | "$PYTHON" -c '
import json, sys
print(json.load(sys.stdin)[0]["rcvd_pkts"])'
}

# pair WHAT: the server (uid $USER1) in A, SARGS, once it listens on
# $PORT (PAIR_WAIT: listening_tcp, the default, or listening_cm, a CM
# listener); then the client (uid $USER2) in B, CARGS.  Both must exit
# 0; their outputs in $S and $C.
listening_tcp() { wait_listen_ns "$NSA" "$PORT" "$1"; }
listening_cm() { cm_listening "$SOCK_A" "$PORT" "$1"; }
pair() {
	local what=$1 spid rc_c

	S=$O/$NRUN.server
	C=$O/$NRUN.client
	ns_debian "$NSA" "$USER1" "$SOCK_A" "${SARGS[@]}" >"$S" 2>&1 &
	spid=$!
	BG_PIDS+=("$spid")
	"${PAIR_WAIT:-listening_tcp}" "$spid" ||
		{ show server "$S"; fail "$what: the server never listened"; }
	ns_debian "$NSB" "$USER2" "$SOCK_B" "${CARGS[@]}" >"$C" 2>&1
	rc_c=$?
	server_rc "$spid"
	if [ "$SERVER_RC" -ne 0 ] || [ "$rc_c" -ne 0 ]; then
		show "server (uid $USER1, $NSA)" "$S"
		show "client (uid $USER2, $NSB)" "$C"
		show "A's device" <(SOCK=$SOCK_A ibvctl statistic show link "$WIRE_DEV_A/1")
		fail "$what: server exited $SERVER_RC, client $rc_c"
	fi
	daemon_alive "after $what"
	pid_running "$PID_B" || fail "the daemon in $NSB died after $what"
}

# perftest TLS TEST ARGS...: ucx_perftest TEST across the namespaces.
perftest() {
	local tls=$1 test=$2 before after what
	shift 2
	NRUN=$((NRUN + 1))
	PORT=$((PORT + 1))
	what="ucx_perftest -t $test${*:+ $*} (UCX_TLS=$tls)"
	check "#$NRUN $what"
	before=$(rcvd_pkts "$SOCK_A" "$WIRE_DEV_A")
	SARGS=(env UCX_TLS="$tls" UCX_NET_DEVICES="$WIRE_DEV_A:1"
	       ucx_perftest -p "$PORT" -t "$test" -n "$ITERS" "$@")
	CARGS=(env UCX_TLS="$tls" UCX_NET_DEVICES="$WIRE_DEV_B:1"
	       ucx_perftest -p "$PORT" -t "$test" -n "$ITERS" "$@" "$IPA")
	pair "$what"
	expect_grep "^Final: +$ITERS " "$C" "$what: the client's result"
	after=$(rcvd_pkts "$SOCK_A" "$WIRE_DEV_A")
	[ "$((after - before))" -ge "$ITERS" ] ||
		fail "$what: $WIRE_DEV_A took $((after - before)) packets for $ITERS iterations"
	ok "$what: $(grep '^Final:' "$C" | tr -s ' '); $((after - before)) packets into A"
}

for test in tag_lat tag_bw ucp_put_bw ucp_get; do
	perftest rc_v,self "$test"
done
for test in tag_lat tag_bw ucp_put_bw ucp_get; do
	perftest ud_v,self "$test"
done

# ---- UCT across the two hosts -------------------------------------------
# Each transport's own operations (ucx.sh runs them all on one host):
# active messages and WRITEs from several SGEs, READs of many response
# packets, and rc_verbs' 64-bit atomics, which UCP never uses (ucx.sh says
# why).  The atomics run with tshark on A's veth: our codec must count
# their FETCH_ADD (add_lat's sides add to each other, add_mr and fadd
# from B) and COMPARE_SWAP requests on the wire, each answered.
# uct TL TEST ARGS...: the UCT test TEST on TL of both hosts' devices
uct() {
	local tl=$1 test=$2
	shift 2
	perftest "$tl" "$test" -d "$WIRE_DEV_A:1" -x "$tl" "$@"
}
ITERS=$((ITERS / 2))
uct rc_verbs am_lat -D zcopy
uct rc_verbs am_bw -D zcopy -s 1000,2000,3000
uct rc_verbs put_bw -D zcopy -s 1000,2000,3000
uct rc_verbs get -D bcopy -s 4096
uct rc_verbs get -D zcopy -s 65536
uct ud_verbs am_lat -D zcopy
uct ud_verbs am_bw -D zcopy -s 100,200,300
capture_prepare uct-atomics
capture_start
uct rc_verbs add_lat
uct rc_verbs add_mr
uct rc_verbs fadd
uct rc_verbs cswap
capture_stop
check "the atomics on the wire"
"$CHECK" "$PCAP" >"$O/atomics.out" 2>&1 ||
	{ show "roce-pcap-check" "$O/atomics.out"; fail "roce-pcap-check found bad packets"; }
# on_wire OPCODE: how many packets of OPCODE the capture holds
on_wire() { awk -v op="$1" '$2 == op { print $3; f = 1 } END { if (!f) print 0 }' "$O/atomics.out"; }
fetch_add=$(on_wire RC_FETCH_ADD)
cswap=$(on_wire RC_COMPARE_SWAP)
acks=$(on_wire RC_ATOMIC_ACKNOWLEDGE)
[ "$fetch_add" -ge $((4 * ITERS)) ] && [ "$cswap" -ge "$ITERS" ] &&
	[ "$acks" -ge $((fetch_add + cswap)) ] ||
	{ show "roce-pcap-check" "$O/atomics.out"; fail "$fetch_add FETCH_ADD, $cswap COMPARE_SWAP, $acks ATOMIC_ACKNOWLEDGE for $ITERS iterations"; }
ok "$fetch_add FETCH_ADD, $cswap COMPARE_SWAP, $acks ATOMIC_ACKNOWLEDGE"
ITERS=$((ITERS * 2))

# ---- UCX's client-server API across the two hosts -----------------------
# ucp_client_server, the example Debian ships with libucx-dev, built here:
# its server listens on a sockaddr, which UCX serves through the RDMA CM
# (UCX_SOCKADDR_TLS_PRIORITY starts with rdmacm), its client connects
# to A's address; 20 messages to the server over the tag API.  Not its
# stream or AM modes: their server takes one message per pass (the AM
# handler keeps one), and the client closes its endpoint (FORCE) as soon
# as its sends complete locally, so a server that falls behind, as on
# this host's one daemon too, never counts 20.
UCS_SRC=/usr/share/doc/libucx-dev/examples/ucp_client_server.c
# show_cm: for a connection that failed, each daemon's CM messages (B's
# log first, then A's) and what its clients asked of the CM, in order,
# then each port's counters (a NAK or an error completion on a lane):
# whether the CM or the lanes ended it.
show_cm() {
	local log
	for log in "$T"/daemon*.log; do
		show "${log##*/}: the CM" <(grep -E ": CM [A-Z_]+ (in|out)|: CM_[A-Z_]+ #" "$log")
	done
	show "A's device" <(SOCK=$SOCK_A ibvctl statistic show link "$WIRE_DEV_A/1")
	show "B's device" <(SOCK=$SOCK_B ibvctl statistic show link "$WIRE_DEV_B/1")
}
if [ -f "$UCS_SRC" ]; then
	gcc -O2 -I"${UCS_SRC%/*}" -o "$T/bin/ucp_client_server" "$UCS_SRC" -lucp -lucs \
		>"$O/ucs.cc" 2>&1 || { show gcc "$O/ucs.cc"; fail "cannot build $UCS_SRC"; }
	chmod 755 "$T/bin/ucp_client_server"
	NRUN=$((NRUN + 1))
	PORT=$((PORT + 1))
	check "#$NRUN ucp_client_server -c tag, connected through the RDMA CM"
	S=$O/$NRUN.server
	C=$O/$NRUN.client
	# line-buffered: it serves client after client until stopped
	ns_debian "$NSA" "$USER1" "$SOCK_A" env UCX_TLS=rc_v,self stdbuf -oL \
		"$T/bin/ucp_client_server" -p "$PORT" -c tag -i 20 >"$S" 2>&1 &
	spid=$!
	BG_PIDS+=("$spid")
	cm_listening "$SOCK_A" "$PORT" "$spid" ||
		{ show server "$S"; fail "ucp_client_server never listened through the CM"; }
	ns_debian "$NSB" "$USER2" "$SOCK_B" env UCX_TLS=rc_v,self \
		"$T/bin/ucp_client_server" -a "$IPA" -p "$PORT" -c tag -i 20 \
		>"$C" 2>&1 || { show server "$S"; show client "$C"; show_cm; fail "ucp_client_server -c tag"; }
	# it prints the first and the last of its iterations
	expect_grep "^Client: iteration #20\$" "$C" "ucp_client_server -c tag (client)"
	for _ in $(seq $((TMO * 10))); do
		grep -q "^Server: iteration #20\$" "$S" && break
		sleep 0.1
	done
	term_bg "$spid"
	expect_grep "^Server: iteration #20\$" "$S" "ucp_client_server -c tag (server)"
	expect_no_grep "unable to|failed on iteration" "$S" "ucp_client_server -c tag (server)"
	expect_no_grep "unable to|failed on iteration|ERROR" "$C" "ucp_client_server -c tag (client)"
	ok "ucp_client_server -c tag: 20 messages, the last one received"
else
	log "$UCS_SRC not installed (libucx-dev, scripts/deps): not run"
fi

# ---- libfabric across the two hosts -------------------------------------
# fi_pingpong over verbs;ofi_rxd: FI_EP_RDM on the verbs provider's UD
# datagrams, whose names are GIDs and QPNs (not fi_pingpong's MSG or
# ofi_rxm ones: see the top).  Every buffer checked (-c), 64 B to 1 MiB.
check "#$((NRUN + 1)) fi_pingpong -p 'verbs;ofi_rxd' -e rdm"
NRUN=$((NRUN + 1))
PORT=$((PORT + 1))
FI_ITERS=10
before=$(rcvd_pkts "$SOCK_A" "$WIRE_DEV_A")
SARGS=(fi_pingpong -p "verbs;ofi_rxd" -e rdm -B "$PORT" -I "$FI_ITERS" -c)
CARGS=(fi_pingpong -p "verbs;ofi_rxd" -e rdm -P "$PORT" -I "$FI_ITERS" -c "$IPA")
NS_TMO=$((TMO * 3)) pair "fi_pingpong verbs;ofi_rxd"
for f in "$S" "$C"; do
	expect_grep "^1m +$FI_ITERS +=" "$f" "ofi_rxd: the 1 MiB line"
	expect_no_grep "[Ee]rror|mismatch|corrupt" "$f" "ofi_rxd: no data error"
done
after=$(rcvd_pkts "$SOCK_A" "$WIRE_DEV_A")
# 1 MiB each way per iteration, in datagrams of at most 1 KiB
[ $((after - before)) -ge $((FI_ITERS * 1024)) ] ||
	fail "ofi_rxd: $((after - before)) packets into A"
ok "fi_pingpong verbs;ofi_rxd: $(grep -E '^(64|1m) ' "$C" | tr -s ' ' | tr '\n' ';') $((after - before)) packets into A"

# ---- qperf across the two hosts -----------------------------------------
# Debian's qperf, its server in A: the RC tests connected through the
# RDMA CM (-cm1), the ver_ ones checking atomic results.  Without -cm1
# qperf addresses by LID, which a RoCE port refuses as rxe's does: the
# RTR fails with EINVAL, and qperf's message (strerror(errno)) says so.
NRUN=$((NRUN + 1))
PORT=$((PORT + 1))
check "#$NRUN qperf -cm1 between the hosts"
ns_debian "$NSA" "$USER1" "$SOCK_A" qperf -lp "$PORT" >"$O/qperf.server" 2>&1 &
QPID=$!
BG_PIDS+=("$QPID")
wait_listen_ns "$NSA" "$PORT" "$QPID" ||
	{ show qperf "$O/qperf.server"; fail "qperf's server never listened"; }
QPERF_OK=""
for t in rc_lat rc_bw rc_rdma_write_bw rc_rdma_read_lat ver_rc_compare_swap ver_rc_fetch_add; do
	ns_debian "$NSB" "$USER2" "$SOCK_B" qperf -lp "$PORT" "$IPA" -cm1 -t 1 "$t" \
		>"$O/qperf.$t" 2>&1 || { show "qperf $t" "$O/qperf.$t"; fail "qperf -cm1 $t"; }
	expect_grep "(latency|bw|msg_rate) *= *[0-9.]+ " "$O/qperf.$t" "qperf $t"
	QPERF_OK+="$t $(sed -nE 's/.*(latency|bw|msg_rate) *= *([0-9.]+ [^ ]+).*/\2/p' "$O/qperf.$t"); "
done
ns_debian "$NSB" "$USER2" "$SOCK_B" qperf -lp "$PORT" "$IPA" -t 1 rc_lat >"$O/qperf.lid" 2>&1 &&
	fail "qperf rc_lat by LID worked on a RoCE port"
expect_grep "failed to modify QP to RTR: Invalid argument" "$O/qperf.lid" "qperf by LID"
term_bg "$QPID"
ok "qperf: ${QPERF_OK}by LID: EINVAL"

# ---- rsockets across the two hosts --------------------------------------
# Debian's rstream and riostream (stream rsockets: RC through the RDMA CM,
# WRITEs with immediate; riostream through riomap too), data verified
# (-T v), and udpong (datagram rsockets: UD, addressed with GRHs), its
# server running until stopped.  udpong's datagrams stay within the
# path MTU (1024 here, less rsockets' header): rsend says EMSGSIZE above.
rs_pair() {	# PROG ARGS...: server in A, client in B to $IPA
	local prog=$1
	shift
	NRUN=$((NRUN + 1))
	PORT=$((PORT + 1))
	check "#$NRUN $prog $*"
	SARGS=("$prog" -p "$PORT" "$@")
	CARGS=("$prog" -p "$PORT" "$@" -s "$IPA")
	PAIR_WAIT=listening_cm pair "$prog $*"
	expect_grep '^custom ' "$C" "$prog $*"
	ok "$prog $*: $(grep '^custom' "$C" | tr -s ' ')"
}
rs_pair rstream -T v -S 1048576 -C 20
rs_pair rstream -T n -S 65536 -C 200
rs_pair riostream -T v -S 65536 -C 100

NRUN=$((NRUN + 1))
PORT=$((PORT + 1))
check "#$NRUN udpong -S 64 -C 2000 -T blocking"
ns_debian "$NSA" "$USER1" "$SOCK_A" udpong -b "$IPA" -p "$PORT" >"$O/udpong.server" 2>&1 &
UPID=$!
BG_PIDS+=("$UPID")
for _ in $(seq $((TMO * 10))); do
	[ -n "$(ip netns exec "$NSA" ss -Hlun "sport = :$PORT" 2>/dev/null)" ] && break
	sleep 0.1
done
before=$(rcvd_pkts "$SOCK_A" "$WIRE_DEV_A")
ns_debian "$NSB" "$USER2" "$SOCK_B" udpong -s "$IPA" -p "$PORT" -S 64 -C 2000 -T blocking \
	>"$O/udpong.client" 2>&1 || { show udpong "$O/udpong.client"; fail "udpong"; }
term_bg "$UPID"
# it sends 2000, then asks how many arrived: some must have
expect_grep '^custom +[0-9.]+[kmg]? +[0-9.]*[1-9][0-9.]*[kmg]? ' "$O/udpong.client" "udpong: datagrams arrived"
after=$(rcvd_pkts "$SOCK_A" "$WIRE_DEV_A")
[ $((after - before)) -ge 1000 ] || fail "udpong: $((after - before)) packets into A"
ok "udpong: $(grep '^custom' "$O/udpong.client" | tr -s ' '); $((after - before)) packets into A"

# ---- MPI across the two hosts -------------------------------------------
# mpirun, as root in A, starts each host's launcher daemon (Open MPI's
# orted, MPICH's hydra_pmi_proxy) through $T/bin/rsh-ns, our ssh: in that
# host's namespace, as uid $USER1, on that host's ibverbsd.  The ranks
# are their children: rank 0 in A, rank 1 in B.  Both namespaces share
# one hostname, so the MPIs are kept off shared memory as in mpi.sh.
LAT_ITERS=100
BW_ITERS=20
WANT_BYTES=$((2 * LAT_ITERS * (8 + 4096 + 65536) + BW_ITERS * 1048576))
MIN_PKTS=$((2 * 3 * LAT_ITERS))

# rsh_agent: write $T/bin/rsh-ns, called as "rsh-ns [-x] HOST COMMAND...".
# Each host also gets a hostname (a UTS namespace) and a TMPDIR of its
# own: Open MPI's launcher daemons, as uid $USER1 on "one" machine, would
# otherwise meet in the same session and rendezvous files.
rsh_agent() {
	local env h
	debian_env
	env=$(printf '%q ' "${DEBIAN_ENV[@]}" HOME="$T")
	for h in nsa nsb; do
		mkdir -p "$T/tmp-$h" && chown "$USER1" "$T/tmp-$h" || fail "mkdir $T/tmp-$h"
	done
	cat >"$T/bin/rsh-ns" <<-AGENT
	#!/bin/bash
	while [ "\${1#-}" != "\$1" ]; do shift; done
	case \$1 in
	nsa) ns=$NSA; sock=$SOCK_A ;;
	nsb) ns=$NSB; sock=$SOCK_B ;;
	*) echo "rsh-ns: no host \$1" >&2; exit 255 ;;
	esac
	host=\$1
	shift
	exec ip netns exec "\$ns" unshare --uts /bin/sh -c 'hostname "\$0" && exec "\$@"' \\
		"\$host" setpriv --reuid=$USER1 --regid=$USER1 --clear-groups -- \\
		env $env TMPDIR="$T/tmp-\$host" IBVERBSD_SOCKET="\$sock" \\
		$T/tools/ibverbsd-run sh -c "\$*"
	AGENT
	chmod 755 "$T/bin/rsh-ns"
}

# mpi_job NAME MPICC MPIRUN ARGS...: build with MPICC, run MPIRUN ARGS in A
mpi_job() {
	local name=$1 mpicc=$2 mpirun=$3 bin=$T/mpi-pingpong-$1 out=$O/mpi-$1 before after
	shift 3
	if ! command -v "$mpicc" >/dev/null || ! command -v "$mpirun" >/dev/null; then
		log "$name: $mpicc or $mpirun not installed (scripts/deps): not run"
		return
	fi
	NRUN=$((NRUN + 1))
	check "#$NRUN $name: a 2-rank job, one rank on each host"
	"$mpicc" -O2 -Wall -Wextra -Werror -o "$bin" "$top_srcdir/tests/mpi/mpi-pingpong.c" \
		>"$out.cc" 2>&1 || { show "$mpicc" "$out.cc"; fail "$name: $mpicc failed"; }
	chmod 755 "$bin"
	before=$(rcvd_pkts "$SOCK_A" "$WIRE_DEV_A")
	(cd "$T" && ip netns exec "$NSA" timeout -k 2 $((TMO * 3)) env UCX_TLS=rc_v,self \
		"$mpirun" "$@" "$bin" "$LAT_ITERS" "$BW_ITERS") >"$out" 2>&1 ||
		{ show "$name" "$out"; fail "$name: the job failed"; }
	expect_grep "^verified $WANT_BYTES bytes\$" "$out" "$name: every byte checked"
	after=$(rcvd_pkts "$SOCK_A" "$WIRE_DEV_A")
	[ $((after - before)) -ge "$MIN_PKTS" ] ||
		fail "$name: $((after - before)) packets into A, fewer than the $MIN_PKTS messages"
	daemon_alive "after $name"
	pid_running "$PID_B" || fail "the daemon in $NSB died after $name"
	ok "$name: $(grep -E '^(latency 8 |bandwidth)' "$out" | tr '\n' ';') $((after - before)) packets into A"
}

rsh_agent
# Each orted would bind its rank to core 0 of this one machine.
mpi_job openmpi mpicc.openmpi mpirun.openmpi --allow-run-as-root \
	--mca plm_rsh_agent "$T/bin/rsh-ns" --mca plm_rsh_no_tree_spawn 1 \
	--mca oob_tcp_if_include "${IPA%.*}.0/24" --bind-to none \
	--host nsa:1,nsb:1 -np 2 -x UCX_TLS \
	--mca pml ucx --mca pml_ucx_devices any --mca btl self --mca osc '^ucx'
mpi_job mpich mpicc.mpich mpiexec.hydra -launcher ssh \
	-launcher-exec "$T/bin/rsh-ns" -iface "$VA" -hosts nsa,nsb -n 2 -ppn 1 \
	-genv MPIR_CVAR_NOLOCAL 1

# ---- Open MPI's collectives and one-sided across the two hosts ----------
# tests/mpi/mpi-coll-rma.c (allreduce, alltoall, bcast; put, get and
# accumulate under fences, put and get under locks, fetch_and_op, every
# value checked), one rank on each host, over pml ucx (osc ucx: its puts
# and gets are the NIC's READs and WRITEs), then over libfabric: mtl ofi
# on verbs;ofi_rxm, whose connections go through the RDMA CM to the
# address each rank's provider advertises.  That address is its device's
# interface's only if binding "localhost" gives an id no device, as the
# kernel's rdma_cm does (with one, every connection went to 127.0.0.1).
check "#$((NRUN + 1)) libfabric's verbs provider advertises A's address, not localhost"
NRUN=$((NRUN + 1))
ns_debian "$NSA" "$USER1" "$SOCK_A" fi_info -p "verbs;ofi_rxm" -v >"$O/fi_info" 2>&1 ||
	{ show fi_info "$O/fi_info"; fail "fi_info -p verbs;ofi_rxm"; }
expect_grep "src_addr: fi_sockaddr_in://$IPA:0" "$O/fi_info" "verbs;ofi_rxm's address"
expect_no_grep "src_addr: fi_sockaddr_in://127\." "$O/fi_info" "verbs;ofi_rxm's address"
ok "verbs;ofi_rxm on $WIRE_DEV_A: $IPA"

# coll_job NAME MPIRUN-ARGS...: mpi-coll-rma across the hosts
coll_job() {
	local name=$1 out=$O/coll-$1
	shift
	NRUN=$((NRUN + 1))
	check "#$NRUN $name: collectives and one-sided, one rank on each host"
	(cd "$T" && ip netns exec "$NSA" timeout -k 2 $((TMO * 3)) env UCX_TLS=rc_v,self \
		mpirun.openmpi --allow-run-as-root --mca plm_rsh_agent "$T/bin/rsh-ns" \
		--mca plm_rsh_no_tree_spawn 1 --mca oob_tcp_if_include "${IPA%.*}.0/24" \
		--bind-to none --host nsa:1,nsb:1 -np 2 -x UCX_TLS --mca btl self \
		--mca osc ucx "$@" "$T/mpi-coll-rma" 5 65536) >"$out" 2>&1 ||
		{ show "$name" "$out"; fail "$name: the job failed"; }
	expect_grep "^verified: 0 errors, 5 iterations of 65536 int64\$" "$out" "$name: every value checked"
	daemon_alive "after $name"
	pid_running "$PID_B" || fail "the daemon in $NSB died after $name"
	ok "$name: $(grep '^verified' "$out")"
}
if command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null; then
	mpicc.openmpi -O2 -Wall -Wextra -Werror -o "$T/mpi-coll-rma" \
		"$top_srcdir/tests/mpi/mpi-coll-rma.c" >"$O/coll.cc" 2>&1 ||
		{ show mpicc "$O/coll.cc"; fail "mpicc.openmpi mpi-coll-rma.c"; }
	chmod 755 "$T/mpi-coll-rma"
	coll_job "openmpi pml ucx" --mca pml ucx --mca pml_ucx_devices any
	coll_job "openmpi mtl ofi (verbs;ofi_rxm)" --mca pml cm --mca mtl ofi \
		--mca mtl_ofi_provider_include "verbs;ofi_rxm"
else
	log "Open MPI not installed (scripts/deps): collectives and one-sided not run"
fi
