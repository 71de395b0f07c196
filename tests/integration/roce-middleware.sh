#!/bin/bash
# Middleware across hosts: Debian's unmodified UCX 1.13 between two
# network namespaces joined by a veth pair, one daemon in each with a
# RoCE device on its end (netns.sh), as two hosts with RoCE NICs would
# run it.  The server (uid $USER1) in A, the client (uid $USER2) in B;
# UCX finds each side's device by its own means (/dev/infiniband, the
# GID table's RoCE v2 entries) and talks to the other side over
# rc_verbs or ud_verbs on the wire only: UCX_TLS names no other way.
#   - ucx_info -d lists rc_verbs and ud_verbs on A's device;
#   - ucx_perftest tag_lat, tag_bw, ucp_put_bw, ucp_get over rc_verbs
#     (with ud_verbs for wireup) and over ud_verbs; each run ends with
#     its "Final:" line, and A's device counts the packets it received.
# Not libfabric's fi_pingpong: its server asks for no address, so the
# verbs provider (1.17) binds "localhost" and tells the client to
# connect there, which reaches no other host.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns.sh"

need_cmd ucx_info ucx_perftest
is_root || skip "network namespaces need root"
ibvd_init
O=$T/out
mkdir -p "$O"
ITERS=1000
[ -n "$SANITIZERS" ] && ITERS=200

# UCX opens /dev/infiniband/DEV, which each daemon makes: the two
# daemons share /dev, so each device has a name of its own.  UCX
# registers tens of MiB at start, over this machine's 8 MiB
# RLIMIT_MEMLOCK (middleware_conf).
WIRE_DEV_A=rma$$
WIRE_DEV_B=rmb$$
WIRE_CONF_EXTRA='"rlimit_memlock": "ignore", "device_links": true,'
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

# pair WHAT: the server (uid $USER1) in A, SARGS, once it listens on TCP
# $PORT; then the client (uid $USER2) in B, CARGS.  Both must exit 0;
# their outputs in $S and $C.
pair() {
	local what=$1 spid rc_c

	S=$O/$NRUN.server
	C=$O/$NRUN.client
	ns_debian "$NSA" "$USER1" "$SOCK_A" "${SARGS[@]}" >"$S" 2>&1 &
	spid=$!
	BG_PIDS+=("$spid")
	wait_listen_ns "$NSA" "$PORT" "$spid" ||
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
