# shellcheck shell=bash
# Two hosts on a RoCEv2 wire, for the tests that need one (roce-wire.sh,
# roce-capture.sh): two network namespaces joined by a veth pair, one
# daemon in each with a RoCE device roce0 on its end.  Sourced after
# lib.sh; a test does:
#
#	is_root || skip "network namespaces need root"
#	ibvd_init
#	O=$T/out
#	wire_up                 # namespaces, veths, daemons; cleanup on exit
#	across "what" "$PP_RE" /usr/bin/ibv_rc_pingpong -g 1
#
# Namespace A ($NSA, veth $VA, $IPA, daemon on $SOCK_A, $DAEMON_PID) runs
# the servers, B ($NSB, $VB, $IPB, $SOCK_B, $PID_B) the clients.
# capture_prepare, capture_start / capture_stop: tshark on $VA into $PCAP
# meanwhile.

# WIRE_PREFIX names them for a run beside others' (default ibvd / i);
# a veth's name past 15 characters becomes a hash of it (ifname)
NSA=${WIRE_PREFIX:-ibvd}-wa-$$
NSB=${WIRE_PREFIX:-ibvd}-wb-$$
VA=$(ifname "${WIRE_PREFIX:-i}wa$$")
VB=$(ifname "${WIRE_PREFIX:-i}wb$$")
IPA=10.79.0.1
IPB=10.79.0.2
NS_MADE=""
PID_B=""
SOCK_A=""
SOCK_B=""
CLIENT_NS=""
CLIENT_SOCK=""
CLIENT_TO=""
# extra arguments of both daemons (roce-cm.sh: -v -v, the MADs in the log)
WIRE_DAEMON_ARGS=${WIRE_DAEMON_ARGS:-}
IBVERBSD_BUILT=$IBVERBSD

# The namespaces and their veths live on until the daemons in them are
# gone: B's here, A's in ibvd_cleanup.
wire_cleanup() {
	local rc=$?
	# B stops as A does (ibvd_cleanup): SIGTERM, SIGKILL only if it hangs
	if [ -n "$PID_B" ] && kill -TERM "$PID_B" 2>/dev/null; then
		wait_exit "$PID_B" 5 || { kill -KILL "$PID_B"; wait "$PID_B"; } 2>/dev/null
	fi
	if [ -n "$NS_MADE" ]; then
		ip netns delete "$NSA" 2>/dev/null
		ip netns delete "$NSB" 2>/dev/null
	fi
	(exit "$rc")
	ibvd_cleanup
}

# wire_up: the namespaces, the veth pair and a daemon in each.
wire_up() {
	need_cmd ip ss
	trap wire_cleanup EXIT
	wire_netns
	SOCK_A=$T/run/a.sock
	SOCK_B=$T/run/b.sock
	IBVERBSD=$(in_ns_daemon "$NSB")
	daemon_start $WIRE_DAEMON_ARGS -c "$(conf_for b "$VB" "$SOCK_B")"
	daemon_wait_ready "$SOCK_B"
	PID_B=$DAEMON_PID
	IBVERBSD=$(in_ns_daemon "$NSA")
	daemon_start $WIRE_DAEMON_ARGS -c "$(conf_for a "$VA" "$SOCK_A")"
	daemon_wait_ready "$SOCK_A"
	CLIENT_NS=$NSB
	CLIENT_SOCK=$SOCK_B
	CLIENT_TO=$IPA
}

wire_netns() {
	local ns
	ip netns add "$NSA" 2>"$O/netns.err" || { show "ip netns add" "$O/netns.err"; skip "cannot create a network namespace"; }
	NS_MADE=1
	ip netns add "$NSB" || fail "ip netns add $NSB"
	ip link add "$VA" netns "$NSA" type veth peer name "$VB" netns "$NSB" ||
		fail "ip link add $VA type veth"
	for ns in "$NSA" "$NSB"; do
		ip -n "$ns" link set lo up || fail "lo up in $ns"
	done
	ip -n "$NSA" link set "$VA" up && ip -n "$NSB" link set "$VB" up || fail "veth up"
	ip -n "$NSA" addr add "$IPA/24" dev "$VA" && ip -n "$NSB" addr add "$IPB/24" dev "$VB" ||
		fail "ip addr add"
}

# conf_for NAME NETDEV SOCKET: a daemon's configuration, its RoCE device
# named $WIRE_DEV_A or $WIRE_DEV_B (NAME a or b; default roce0), with the
# members in $WIRE_CONF_EXTRA ('"key": value,' lines) besides, and the
# devices in $WIRE_DEVS_BEFORE ('{ ... },' entries) listed before it.
WIRE_DEV_A=${WIRE_DEV_A:-roce0}
WIRE_DEV_B=${WIRE_DEV_B:-roce0}
WIRE_CONF_EXTRA=${WIRE_CONF_EXTRA:-}
WIRE_DEVS_BEFORE=${WIRE_DEVS_BEFORE:-}
conf_for() {
	local dev=$WIRE_DEV_A
	[ "$1" = b ] && dev=$WIRE_DEV_B
	cat >"$T/$1.conf" <<-EOF
	{
	  "socket": { "path": "$3" },
	  $WIRE_CONF_EXTRA
	  "devices": [ $WIRE_DEVS_BEFORE { "name": "$dev", "netdev": "$2" } ]
	}
	EOF
	chmod 644 "$T/$1.conf"
	printf '%s\n' "$T/$1.conf"
}

in_ns_daemon() {	# NS: a wrapper that starts the daemon in NS
	cat >"$T/bin/ibverbsd-$1" <<-EOF
	#!/bin/sh
	exec ip netns exec "$1" "$IBVERBSD_BUILT" "\$@"
	EOF
	chmod 755 "$T/bin/ibverbsd-$1"
	printf '%s\n' "$T/bin/ibverbsd-$1"
}

# ns_debian NS UID SOCKET PROG ARGS...: a Debian program in NS as UID,
# through ibverbsd-run against SOCKET, within $NS_TMO seconds (default
# $TMO).
ns_debian() {
	local ns=$1 uid=$2
	SOCK=$3
	shift 3
	debian_env
	(cd "$T" && exec ip netns exec "$ns" timeout -k 2 "${NS_TMO:-$TMO}" \
		setpriv --reuid="$uid" --regid="$uid" --clear-groups -- \
		env "${DEBIAN_ENV[@]}" "$T/tools/ibverbsd-run" "$@")
}

# wait_listen_ns NS PORT PID: until something listens on PORT in NS.
wait_listen_ns() {
	local i
	for i in $(seq $((TMO * 20))); do
		[ -n "$(ip netns exec "$1" ss -Hltn "sport = :$2" 2>/dev/null)" ] && return 0
		pid_running "$3" || return 1
		sleep 0.05
	done
	return 1
}

# cm_listening SOCK PORT PID: until the daemon on SOCK lists a LISTEN
# cm_id on PORT (the programs listen through the CM, not on a socket).
cm_listening() {
	local i
	for i in $(seq $((TMO * 10))); do
		pid_running "$3" || return 1
		SOCK=$1 ibvctl -j resource show cm_id 2>/dev/null |
			"$PYTHON" -c '
import json, sys
port = sys.argv[1]
ids = json.load(sys.stdin)
sys.exit(0 if any(e.get("state") == "LISTEN" and
		  str(e.get("src-addr", "")).endswith(":" + port) for e in ids) else 1)
' "$2" && return 0
		sleep 0.1
	done
	return 1
}

MEMLOCK=8388608
NRUN=0
PORT=18600

# server_rc PID: the server's exit status once it ends, in SERVER_RC (124
# when it still runs $TMO s later and is stopped).
server_rc() {
	if wait_exit "$1" "$TMO"; then
		SERVER_RC=$EXIT_STATUS
	else
		kill -TERM "$1" 2>/dev/null
		wait_exit "$1" 5
		SERVER_RC=124
	fi
}

# across WHAT EXPECT PROG ARGS...: PROG ARGS as the server in A (uid
# $USER1), PROG ARGS $IPA as the client in B (uid $USER2); both must exit
# 0 and both outputs must match EXPECT (an extended regex).  The client's
# side can be changed (CLIENT_NS, CLIENT_SOCK, CLIENT_TO; wire_up sets
# them to B's).
across() {
	local what=$1 expect=$2 try
	shift 2
	NRUN=$((NRUN + 1))
	check "#$NRUN $what"
	# perftest times itself with the CPU's cycle counter, whose rate it
	# first measures; on a crowded machine that measurement can fail
	# ("Can't produce a report", nothing of ours involved): once more then.
	for try in 1 2; do
		across_once "$what" "$@" && break
		[ "$try" -eq 1 ] && grep -q "Can't produce a report" "$O/$NRUN.server" "$O/$NRUN.client" ||
			across_failed "$what"
		log "$what: perftest could not calibrate its clock; once more"
	done
	expect_grep "$expect" "$O/$NRUN.server" "$what (server)"
	expect_grep "$expect" "$O/$NRUN.client" "$what (client)"
	expect_no_grep 'invalid data|Failed status' "$O/$NRUN.server" "$what (server)"
	expect_no_grep 'invalid data|Failed status' "$O/$NRUN.client" "$what (client)"
	daemon_alive "after $what"
	pid_running "$PID_B" || fail "the daemon in $NSB died after $what"
	ok "$what: $(grep -E "$expect" "$O/$NRUN.client" | head -n 1)"
}

# One run of across's programs; 1 if either side failed (RC_S, RC_C).
across_once() {
	local what=$1 s=$O/$NRUN.server c=$O/$NRUN.client spid
	shift
	PORT=$((PORT + 1))
	ns_debian "$NSA" "$USER1" "$SOCK_A" prlimit --memlock="$MEMLOCK" \
		"$@" -p "$PORT" >"$s" 2>&1 &
	spid=$!
	BG_PIDS+=("$spid")
	if ! wait_listen_ns "$NSA" "$PORT" "$spid"; then
		wait_exit "$spid" 1
		show server "$s"
		fail "$what: the server never listened on port $PORT"
	fi
	ns_debian "$CLIENT_NS" "$USER2" "$CLIENT_SOCK" prlimit --memlock="$MEMLOCK" \
		"$@" -p "$PORT" "$CLIENT_TO" >"$c" 2>&1
	RC_C=$?
	server_rc "$spid"
	RC_S=$SERVER_RC
	[ "$RC_S" -eq 0 ] && [ "$RC_C" -eq 0 ]
}

across_failed() {
	show "server (uid $USER1, $NSA)" "$O/$NRUN.server"
	show "client (uid $USER2, $NSB)" "$O/$NRUN.client"
	fail "$1: server exited $RC_S, client $RC_C"
}

# What Debian's pingpongs and perftest print on success
PP_RE='^[0-9]+ iters in [0-9.]+ seconds = [0-9.]+ usec/iter$'
PT_RE='^ *[0-9]+ +[0-9]+ +[0-9.]+'

# direct-helper's stream (direct-stream.c) across the wire: its
# receiving end in A as uid $USER1, its sending end in B as uid $USER2.
# DIRECT_STREAM_SECS sets how long (default 4 s), DIRECT_STREAM_SEED the
# seed.
#
# stream_end NS UID SOCKET SIDE DIR SEED: one end of the stream, in NS as
# UID, on roce0's IPv4 GID (index 1), with the variables in $MIX.  No
# transit rings on a wire (DIRECT_RINGS=0 tells the stream not to expect
# them).
MIX=""
stream_end() {
	local ns=$1 uid=$2 sock=$3 side=$4 dir=$5 seed=$6

	# shellcheck disable=SC2086 # one word per variable
	(cd "$T" && exec ip netns exec "$ns" timeout -k 2 $((TMO * 3)) \
		setpriv --reuid="$uid" --regid="$uid" --clear-groups -- \
		env $MIX IBVERBSD_SOCKET="$sock" VT_DEVICE=roce0 VT_GID_INDEX=1 \
		VT_TMUL="$TMUL" DIRECT_RINGS=0 DIRECT_STREAM_SIDE="$side" \
		DIRECT_STREAM_DIR="$dir" prlimit --memlock="$MEMLOCK" \
		"$T/tools/ibverbsd-run" "$T/bin/direct-helper" stream \
		"${DIRECT_STREAM_SECS:-4}" "$seed" 3)
}

# stream_across WHAT: one stream from B to A; both ends must agree.
stream_across() {
	local what=$1 dir seed rpid sends got

	[ -x "$T/bin/direct-helper" ] || fail "tests/integration/direct-helper not built"
	NRUN=$((NRUN + 1))
	check "#$NRUN $what"
	dir=$T/stream-$NRUN
	mkdir -p "$dir" && chmod 777 "$dir" || fail "mkdir $dir"
	seed=${DIRECT_STREAM_SEED:-$RANDOM}
	stream_end "$NSA" "$USER1" "$SOCK_A" recv "$dir" "$seed" >"$O/$NRUN.recv" 2>&1 &
	rpid=$!
	BG_PIDS+=("$rpid")
	stream_end "$NSB" "$USER2" "$SOCK_B" send "$dir" "$seed" >"$O/$NRUN.send" 2>&1 ||
		{ show "sending end (uid $USER2, $NSB)" "$O/$NRUN.send";
		  show "receiving end" "$O/$NRUN.recv"; fail "$what: the sending end failed"; }
	wait_exit "$rpid" "$TMO" || fail "$what: the receiving end did not finish"
	[ "$EXIT_STATUS" -eq 0 ] ||
		{ show "receiving end (uid $USER1, $NSA)" "$O/$NRUN.recv"; fail "$what: the receiving end failed"; }
	sends=$(sed -nE 's/^stream: ([0-9]+) sends.*/\1/p' "$O/$NRUN.send")
	got=$(sed -nE 's/^stream: ([0-9]+) received.*/\1/p' "$O/$NRUN.recv")
	[ -n "$sends" ] && [ "$sends" -gt 0 ] && [ "$got" = "$sends" ] ||
		fail "$what: sent ${sends:-?}, received ${got:-?}"
	daemon_alive "after $what"
	pid_running "$PID_B" || fail "the daemon in $NSB died after $what"
	case $MIX in
	*UC=1*) ok "$what: $(sed -n 's/^stream: UC, //p' "$O/$NRUN.recv")" ;;
	*) ok "$what: $(sed -n 's/^stream: //p' "$O/$NRUN.send" | tail -1), all received" ;;
	esac
}

# capture_prepare NAME (after wire_up): $PCAP for the capture, $CHECK our
# codec's reader of it; the veths cut runs of packets sent as one
# datagram themselves (no tx-udp-segmentation), as a NIC without that
# offload would, so that the capture holds each packet as it was made.
capture_prepare() {
	PCAP=$O/$1.pcap
	CHECK=$T/bin/roce-pcap-check-helper
	[ -x "$CHECK" ] || fail "roce-pcap-check-helper not built"
	ip netns exec "$NSA" ethtool -K "$VA" tx-udp-segmentation off >/dev/null &&
		ip netns exec "$NSB" ethtool -K "$VB" tx-udp-segmentation off >/dev/null ||
		fail "ethtool -K tx-udp-segmentation off"
}

# capture_start: tshark on A's veth, RoCEv2 only, into $PCAP as classic
# pcap (what our reader reads); returns once it is capturing.
CAP_PID=""
capture_start() {
	local i
	ip netns exec "$NSA" tshark -i "$VA" -f "udp port 4791" -F pcap \
		-w "$PCAP" >"$O/capture.log" 2>&1 &
	CAP_PID=$!
	BG_PIDS+=("$CAP_PID")
	for i in $(seq $((TMO * 10))); do
		grep -q '^Capturing on' "$O/capture.log" && return 0
		pid_running "$CAP_PID" || break
		sleep 0.1
	done
	show "tshark" "$O/capture.log"
	fail "tshark did not start capturing on $VA"
}

# capture_stop: SIGINT, as at a terminal, so that tshark writes out what
# it has; the last packets are a moment in the kernel's buffer first.
capture_stop() {
	sleep 0.5
	kill -INT "$CAP_PID"
	# SIGTERM stops it the same clean way, if a loaded machine kept it
	# from acting on the SIGINT in time.
	if ! wait_exit "$CAP_PID" $((10 * TMUL)); then
		log "tshark still runs 10 s after SIGINT: SIGTERM"
		kill -TERM "$CAP_PID"
		wait_exit "$CAP_PID" "$TMO" || fail "tshark did not stop on SIGINT nor SIGTERM"
	fi
	[ "$EXIT_STATUS" -eq 0 ] || { show "tshark" "$O/capture.log"; fail "tshark exited $EXIT_STATUS"; }
	log "capture: $(grep -E 'captured|dropped' "$O/capture.log" | tr '\n' ' ')"
}
