#!/bin/bash
# The RDMA CM across hosts: two network namespaces joined by a veth pair,
# one daemon in each with a RoCE device on its end (netns.sh), and
# Debian's unmodified librdmacm programs between two unprivileged uids,
# the server in namespace A, the client in B.  Their connections go
# through the IB CM's MADs on QP1 (REQ/REP/RTU, DREQ/DREP, REJ, SIDR
# REQ/REP for UD) with rdma_cm's private-data header, as two kernels'
# rdma_cm over rxe would exchange them:
#
#   rping -V (data checked), ucmatose (10 RC connections with data),
#   udaddy (UD, SIDR), rdma_server/rdma_client (rdma_create_ep),
#   perftest's ib_send_bw -R;
#   rping -V over IPv6, to a global and to a link-local address;
#   a connect to a port nobody listens on: REJ, "Connection refused";
#   a connect to an address no host answers: no hang, the client fails;
#   a connect given up before its answer: REJ (TIMEOUT), the listener's
#   request REJECTED;
#   hostile MADs at both QP1s under a running rping (roce-mad-hostile.py);
#   then rping and ucmatose again with a third of the MADs into A
#   dropped (the CM's retransmissions); last rping with 2 % of all the
#   RoCE packets into A dropped (RC's retransmissions, READ included).
#
# Every MAD each daemon took is counted by nothing but the outcome: the
# programs' own checks, their exit status, and the cm_ids both daemons
# list afterwards (none left).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns.sh"

for t in rping ucmatose udaddy rdma_server rdma_client; do
	need_cmd "/usr/bin/$t"
done
is_root || skip "network namespaces need root"
ibvd_init
O=$T/out

# Debug logs: each daemon's log shows every MAD it sent and took.
WIRE_DAEMON_ARGS="-v -v"
wire_up

# cm_pair SERVER-OUT CLIENT-OUT PORT: the server (uid $USER1) in A, once
# it listens on PORT, then the client (uid $USER2) in B, niced (see
# cm_across), its exit status in RC_C; the server is left running as SPID.  Arguments in SARGS and
# CARGS.
cm_pair() {
	local s=$1 c=$2 port=$3 spid

	ns_debian "$NSA" "$USER1" "$SOCK_A" prlimit --memlock="$MEMLOCK" \
		"${SARGS[@]}" >"$s" 2>"$s.err" &
	spid=$!
	BG_PIDS+=("$spid")
	if ! cm_listening "$SOCK_A" "$port" "$spid"; then
		wait_exit "$spid" 1
		show server "$s.err"
		fail "the server never listened on port $port"
	fi
	ns_debian "$NSB" "$USER2" "$SOCK_B" nice -n 10 prlimit --memlock="$MEMLOCK" \
		"${CARGS[@]}" >"$c" 2>"$c.err"
	RC_C=$?
	SPID=$spid
}

# port_next ARRAY PORT: the elements of ARRAY (a name) that are PORT become PORT + 1.
port_next() {
	local -n args=$1
	local i

	for i in "${!args[@]}"; do
		if [ "${args[$i]}" = "$2" ]; then
			args[$i]=$(($2 + 1))
		fi
	done
}

# cm_across WHAT PORT SERVER-EXPECT CLIENT-EXPECT SERVER-ARGS... -- CLIENT-ARGS...:
# the server (uid $USER1) in A, then the client (uid $USER2) in B; both
# must exit 0 and print what they must (extended regexes).  perftest's -R
# connects its data QPs with no sync after its first connection: its
# client's REQ may come before its server listens again, and is refused
# ("REJECTED; error: 8", no listener) as by any rdma_cm.  The server
# waits for the RC ACK of its last handshake message, the client only for
# the message, so on a busy machine the client often wins.  Such a
# refusal has the pair run again, on the next port, up to $CM_TRIES
# times in all; each earlier try's output stays beside the last one's
# (.try1, ...).  The client is niced so that the server more often wins.
# Debian's perftest (4.5-0.17) dies of SIGSEGV in its own retry:
# rdma_cm_client_connection destroys its cm_ids and frees their array,
# then resolves the freed ids again (a core shows rdma_resolve_addr
# called with a freed id).
CM_TRIES=5
cm_across() {
	local what=$1 port=$2 sre=$3 cre=$4 s c rc_c rc_s try=1
	local -a SARGS=() CARGS=()
	shift 4
	while [ $# -gt 0 ] && [ "$1" != -- ]; do SARGS+=("$1"); shift; done
	shift
	CARGS=("$@")
	NRUN=$((NRUN + 1))
	s=$O/$NRUN.server
	c=$O/$NRUN.client
	check "#$NRUN $what"
	cm_pair "$s" "$c" "$port"
	while [ "$RC_C" -ne 0 ] && [ "${SARGS[0]}" = ib_send_bw ] &&
	      [ "$try" -lt "$CM_TRIES" ] &&
	      grep -q 'RDMA_CM_EVENT_REJECTED; error: 8\.' "$c.err"; do
		log "$what: try $try: the client's data REQ came before the server's second listen (no listener: REJ, client exit $RC_C); again, on port $((port + 1))"
		for f in "$s" "$s.err" "$c" "$c.err"; do mv "$f" "$f.try$try"; done
		# SPID is the shell around timeout, which passes TERM on
		pkill -TERM -P "$SPID" 2>/dev/null
		wait_exit "$SPID" 5 || fail "$what: the server of try $try did not stop"
		# the last server's ids may outlive it a moment: another port
		port_next SARGS "$port"
		port_next CARGS "$port"
		port=$((port + 1))
		try=$((try + 1))
		cm_pair "$s" "$c" "$port"
	done
	rc_c=$RC_C
	server_rc "$SPID"
	rc_s=$SERVER_RC
	if [ "$rc_s" -ne 0 ] || [ "$rc_c" -ne 0 ]; then
		wire_state >"$O/state" 2>&1
		show "the daemons' QPs and counters" "$O/state"
		show_tail "server (uid $USER1, $NSA)" "$s"
		show_tail "server's stderr" "$s.err"
		show_tail "client (uid $USER2, $NSB)" "$c"
		show_tail "client's stderr" "$c.err"
		fail "$what: server exited $rc_s, client $rc_c"
	fi
	expect_grep "$sre" "$s" "$what (server)"
	expect_grep "$cre" "$c" "$what (client)"
	expect_no_grep 'mismatch|error|failed' "$c.err" "$what (client)"
	daemon_alive "after $what"
	pid_running "$PID_B" || fail "the daemon in $NSB died after $what"
	ok "$what"
}

# show_tail WHAT FILE: its last lines, cut short (rping prints whole pings).
show_tail() {
	tail -n 20 "$2" | cut -c1-200 >"$2.tail"
	show "$1" "$2.tail"
}

# What both daemons say of their QPs and their port's counters.
wire_state() {
	local sock
	for sock in "$SOCK_A" "$SOCK_B"; do
		echo "== $sock"
		SOCK=$sock ibvctl resource show qp
		SOCK=$sock ibvctl statistic show link roce0/1
	done
}

# rping_across WHAT PORT COUNT SIZE [ADDR]: rping -v -V to A's ADDR
# (default $IPA), and every ping's data on both sides exactly what rping
# sends.
rping_across() {
	local what=$1 port=$2 count=$3 size=$4 addr=${5:-$IPA} n
	cm_across "$what" "$port" '^server ping data: ' '^ping data: ' \
		/usr/bin/rping -s -a "$addr" -p "$port" -v -V -C "$count" -S "$size" -- \
		/usr/bin/rping -c -a "$addr" -p "$port" -v -V -C "$count" -S "$size"
	n=$(grep -ac '^ping data: ' "$O/$NRUN.client")
	[ "$n" -eq "$count" ] || fail "$what: the client printed $n pings, not $count"
	n=$(grep -ac '^server ping data: ' "$O/$NRUN.server")
	[ "$n" -eq "$count" ] || fail "$what: the server printed $n pings, not $count"
	expected_pings "$count" "$size" "ping data: " >"$O/$NRUN.want"
	grep -a '^ping data: ' "$O/$NRUN.client" | cmp -s - "$O/$NRUN.want" ||
		fail "$what: the client's ping data is not rping's pattern"
}

# No cm_id left in either daemon once the programs are gone.
no_ids_left() {
	local sock n
	for sock in "$SOCK_A" "$SOCK_B"; do
		n=$(SOCK=$sock ibvctl -j resource show cm_id | "$PYTHON" -c 'import json,sys; print(len(json.load(sys.stdin)))')
		[ "$n" -eq 0 ] || { SOCK=$sock ibvctl resource show cm_id; fail "$n cm_ids left on $sock after $1"; }
	done
}

rping_across "rping -V, 10 pings of 64 B" 7001 10 64
rping_across "rping -V, 100 pings of 1000 B" 7002 100 1000

cm_across "ucmatose: 10 RC connections with data" 7003 \
	'^data transfers complete' '^data transfers complete' \
	/usr/bin/ucmatose -c 10 -p 7003 -- \
	/usr/bin/ucmatose -c 10 -p 7003 -s "$IPA"
expect_grep '^return status 0$' "$O/$NRUN.client" "ucmatose client"

cm_across "udaddy: UD through SIDR REQ/REP" 7174 \
	'^data transfers complete' '^data transfers complete' \
	/usr/bin/udaddy -- \
	/usr/bin/udaddy -s "$IPA"
expect_grep '^return status 0$' "$O/$NRUN.client" "udaddy client"

# mckey_across WHAT GROUP ADDR-A ADDR-B: a receiver in A (uid $USER1) and
# one in B (uid $USER1 too), each bound to its own address, then a sender in
# B (uid $USER2): its 10 datagrams to the group reach A over the wire (A's
# interface a member of the group while its receiver is attached) and B's
# receiver as a NIC loops them back.  Every program exits 0, which for a
# receiver means it took all 10.
mckey_across() {
	local what=$1 group=$2 a=$3 b=$4 ra=$O/mc.$2.a rb=$O/mc.$2.b s=$O/mc.$2.s
	local pa pb
	check "mckey across: $what"
	# the receivers wait through the sender's start and its 3 s pause
	NS_TMO=$((3 * TMO)) ns_debian "$NSA" "$USER1" "$SOCK_A" /usr/bin/mckey -m "$group" \
		-b "$a" -C 10 >"$ra" 2>&1 &
	pa=$!
	NS_TMO=$((3 * TMO)) ns_debian "$NSB" "$USER1" "$SOCK_B" /usr/bin/mckey -m "$group" \
		-b "$b" -C 10 >"$rb" 2>&1 &
	pb=$!
	BG_PIDS+=("$pa" "$pb")
	for _ in $(seq $((TMO * 10))); do
		ip -n "$NSA" maddr show dev "$VA" | grep -qw "$group" &&
			ip -n "$NSB" maddr show dev "$VB" | grep -qw "$group" && break
		pid_running "$pa" && pid_running "$pb" || break
		sleep 0.1
	done
	ip -n "$NSA" maddr show dev "$VA" >"$O/maddr"
	expect_grep " $group\$" "$O/maddr" "$VA's groups while its receiver waits"
	ns_debian "$NSB" "$USER2" "$SOCK_B" /usr/bin/mckey -m "$group" -b "$b" -C 10 -s >"$s" 2>&1 ||
		{ show sender "$s"; fail "$what: the sender failed"; }
	for p in "$pa:$ra" "$pb:$rb"; do
		wait_exit "${p%%:*}" 10 || { wire_state >"$O/state" 2>&1; show state "$O/state"
			show receiver "${p#*:}"; fail "$what: a receiver still waits"; }
		[ "$EXIT_STATUS" -eq 0 ] || { show receiver "${p#*:}"; fail "$what: a receiver exited $EXIT_STATUS"; }
	done
	for f in "$ra" "$rb" "$s"; do
		expect_grep '^return status 0$' "$f" "$what"
	done
	ip -n "$NSA" maddr show dev "$VA" >"$O/maddr"
	expect_no_grep " $group\$" "$O/maddr" "$VA's groups once its receiver is gone"
	ok "$what: $(grep -m1 joined "$ra"); both receivers took 10 datagrams"
}
mckey_across "IPv4 group 239.79.0.1" 239.79.0.1 "$IPA" "$IPB"
expect_grep '^mckey: joined dgid: ::ffff:239\.79\.0\.1 ' "$O/mc.239.79.0.1.a" "the group's MGID"

# Hostile packets at a group address while a receiver in A waits on the
# group: random bytes, the reference capture's packets mutated, forged
# packets of every opcode to QPN 0xFFFFFF and to the receiver's own QPN;
# then well-formed datagrams with the group's Q_Key that must not land
# either: to the receiver's QPN at the group address, to QPN 0xFFFFFF at
# 224.0.0.1 (a group A's interface is in, but no QP of A's), from a
# source outside A's peers.  A counts none of them received (rcvd_pkts),
# then exactly the one good datagram sent last, stays up, and the
# receiver takes the sender's datagrams and exits 0.
check "hostile packets at a group address, a receiver attached"
ip -n "$NSB" route add 224.0.0.0/4 dev "$VB" || fail "a multicast route in $NSB"
NS_TMO=$((3 * TMO)) ns_debian "$NSA" "$USER1" "$SOCK_A" /usr/bin/mckey -m 239.79.0.3 \
	-b "$IPA" -C 10 >"$O/mch.r" 2>&1 &
mpid=$!
BG_PIDS+=("$mpid")
for _ in $(seq $((TMO * 10))); do
	ip -n "$NSA" maddr show dev "$VA" | grep -qw 239.79.0.3 && break
	pid_running "$mpid" || break
	sleep 0.1
done
ip -n "$NSA" maddr show dev "$VA" | grep -qw 239.79.0.3 ||
	{ show receiver "$O/mch.r"; fail "$VA never joined 239.79.0.3"; }
mqpn=$(SOCK=$SOCK_A ibvctl -j resource show qp | "$PYTHON" -c '
import json, sys
print(" ".join(hex(r["lqpn"]) for r in json.load(sys.stdin) if r.get("type") == "UD" and r.get("comm") == "mckey"))')
[ -n "$mqpn" ] || fail "the receiver's QP is not listed"
# A's counters: the drops (the QP1 check below expects exact counts) and
# the datagrams its QPs took
a_counts() {
	SOCK=$SOCK_A ibvctl -j statistic show link roce0/1 | "$PYTHON" -c 'import json, sys
row = json.load(sys.stdin)[0]
print(row["dropped_bad_pkey"], row["dropped_not_peer"], row["rcvd_pkts"])'
}
read -r pk0 np0 rx0 < <(a_counts) || fail "A's counters"
# shellcheck disable=SC2086 # mqpn: words
sent=$(ip netns exec "$NSB" "$PYTHON" "$top_srcdir/tests/integration/roce-hostile.py" \
	"$top_srcdir/tests/data/rxe-pair.pcap" "$IPB" 239.79.0.3 2000 5 0xffffff $mqpn) ||
	fail "the hostile sender failed"
[ "$sent" -ge 1500 ] || fail "only $sent hostile packets left $NSB"
ud_at() {	# SRC DST QPN: one datagram with the group's Q_Key (RDMA_UDP_QKEY)
	ip netns exec "$NSB" "$PYTHON" "$top_srcdir/tests/integration/roce-hostile.py" \
		--ud "$1" "$2" "$3" 0x01234567 >/dev/null || fail "sending a datagram $1 -> $2"
}
ud_at "$IPB" 239.79.0.3 "${mqpn%% *}"
ud_at "$IPB" 224.0.0.1 0xffffff
ud_at 192.0.2.7 239.79.0.3 0xffffff
ud_at "$IPB" 239.79.0.3 0xffffff
for _ in $(seq 50); do
	read -r pk1 np1 rx1 < <(a_counts) || fail "A's counters"
	[ "$rx1" -gt "$rx0" ] && break
	sleep 0.1
done
[ "$((rx1 - rx0))" -eq 1 ] ||
	fail "A's QPs took $((rx1 - rx0)) datagrams of the hostile ones, not the last one alone"
[ "$np1" -gt "$np0" ] || fail "the datagram from 192.0.2.7 was not counted as from outside A's peers"
# A run (one datagram the receiver cuts, gso.c) from outside the peers is
# refused by its own headers, once, before any search for its segments:
# 8 good packets in it would count 8.
ip netns exec "$NSB" "$PYTHON" "$top_srcdir/tests/integration/roce-hostile.py" \
	--run 192.0.2.7 "$IPA" 0xffffff 0x01234567 8 >/dev/null || fail "sending a run from 192.0.2.7"
for _ in $(seq 50); do
	read -r _ np2 _ < <(a_counts) || fail "A's counters"
	[ "$np2" -gt "$np1" ] && break
	sleep 0.1
done
sleep 0.3
read -r _ np2 _ < <(a_counts) || fail "A's counters"
[ "$((np2 - np1))" -eq 1 ] ||
	fail "a run of 8 from outside A's peers counted $((np2 - np1)) in dropped_not_peer, not 1"
# the sender binds no address: the group's route in B leaves by $VB, so
# its id is roce0's, as the kernel's rdma_cm would pick rxe's
ns_debian "$NSB" "$USER2" "$SOCK_B" /usr/bin/mckey -m 239.79.0.3 -C 10 -s -o >"$O/mch.s" 2>&1 ||
	{ show sender "$O/mch.s"; fail "the sender after the hostile packets"; }
expect_grep '^mckey: joined dgid: ::ffff:239\.79\.0\.3 ' "$O/mch.s" "the unbound sender's group (roce0's)"
wait_exit "$mpid" 10 || { show receiver "$O/mch.r"; fail "the receiver still waits"; }
[ "$EXIT_STATUS" -eq 0 ] || { show receiver "$O/mch.r"; fail "the receiver exited $EXIT_STATUS"; }
expect_grep '^return status 0$' "$O/mch.r" "the receiver"
daemon_alive "after hostile packets at a group"
read -r pk1 np1 rx1 < <(a_counts) || fail "A's counters"
MC_PKEY_DROPS=$((pk1 - pk0))
MC_PEER_DROPS=$((np1 - np0))
ok "$sent hostile packets and 3 stray datagrams at 239.79.0.3 and 224.0.0.1 (QPNs 0xffffff $mqpn): none taken, the good one taken; then the sender's"

cm_across "rdma_server and rdma_client (rdma_create_ep)" 7005 \
	'^rdma_server: end 0$' '^rdma_client: end 0$' \
	/usr/bin/rdma_server -p 7005 -- \
	/usr/bin/rdma_client -s "$IPA" -p 7005

if command -v ib_send_bw >/dev/null 2>&1; then
	cm_across "perftest over the RDMA CM: ib_send_bw -R" 7030 \
		'^ *65536 +200 ' '^ *65536 +200 ' \
		ib_send_bw -R -d roce0 -s 65536 -n 200 -p 7030 -- \
		ib_send_bw -R -d roce0 -s 65536 -n 200 -p 7030 "$IPA"
fi

# RDMA_OPTION_ID_ACK_TIMEOUT across hosts: the requester's QP takes it,
# and its REQ announces the local ACK timeout the kernel's IB CM would
# (cm_ack_timeout of lifetime 13 and the CA's ACK delay 15: 16), which
# the passive QP takes.
check "an ACK timeout asked for (14): the active QP's 14, the REQ's 16 for the passive one"
mkdir -p "$O/acktmo"
ns_debian "$NSA" "$USER1" "$SOCK_A" "$T/bin/cmapi-helper" peer listen 7060 "$O/acktmo" \
	>"$O/acktmo/listen.out" 2>&1 &
lpid=$!
BG_PIDS+=("$lpid")
cm_listening "$SOCK_A" 7060 "$lpid" || { show listener "$O/acktmo/listen.out"; fail "the listener never listened"; }
ns_debian "$NSB" "$USER2" "$SOCK_B" env CMAPI_ACK_TIMEOUT=14 "$T/bin/cmapi-helper" peer connect \
	"$IPA" 7060 "$O/acktmo" >"$O/acktmo/connect.out" 2>&1 &
cpid=$!
BG_PIDS+=("$cpid")
for _ in $(seq $((TMO * 10))); do
	grep -q '^established' "$O/acktmo/listen.out" && grep -q '^established' "$O/acktmo/connect.out" && break
	sleep 0.1
done
expect_grep '^established: .* timeout 14$' "$O/acktmo/connect.out" "the active QP's ACK timeout"
expect_grep '^established: .* timeout 16$' "$O/acktmo/listen.out" "the passive QP's ACK timeout"
term_bg "$cpid"
wait_exit "$cpid" 10 || fail "the connecting peer did not stop"
wait_exit "$lpid" 10 || { show listener "$O/acktmo/listen.out"; fail "the listener did not see the end"; }
ok "active timeout 14, passive 16"

# The survivor of a connection whose other end died (its DREQ across)
# gets DISCONNECTED, and TIMEWAIT_EXIT only after its own rdma_disconnect,
# as on the kernel's rdma_cm, whose CM sends the DREP then (nothing for
# 1.5 s, longer than the daemon's 1 s timewait).
check "a DREQ across: the survivor's TIMEWAIT_EXIT waits for its rdma_disconnect"
mkdir -p "$O/tw" && chmod 777 "$O/tw"	# both uids write their .info there
ns_debian "$NSA" "$USER1" "$SOCK_A" env CMAPI_TIMEWAIT=1500 "$T/bin/cmapi-helper" peer listen 7061 \
	"$O/tw" >"$O/tw/listen.out" 2>&1 &
lpid=$!
BG_PIDS+=("$lpid")
cm_listening "$SOCK_A" 7061 "$lpid" || { show listener "$O/tw/listen.out"; fail "the listener never listened"; }
ns_debian "$NSB" "$USER2" "$SOCK_B" "$T/bin/cmapi-helper" peer connect "$IPA" 7061 "$O/tw" \
	>"$O/tw/connect.out" 2>&1 &
cpid=$!
BG_PIDS+=("$cpid")
for _ in $(seq $((TMO * 10))); do
	grep -q '^established' "$O/tw/listen.out" && grep -q '^established' "$O/tw/connect.out" && break
	sleep 0.1
done
term_bg "$cpid"
wait_exit "$cpid" 10 || fail "the connecting peer did not stop"
wait_exit "$lpid" "$TMO" || { show listener "$O/tw/listen.out"; fail "the listener did not see the end"; }
expect_grep '^event: RDMA_CM_EVENT_DISCONNECTED ' "$O/tw/listen.out" "the survivor's DISCONNECTED"
expect_grep '^before rdma_disconnect: quiet$' "$O/tw/listen.out" "no TIMEWAIT_EXIT before rdma_disconnect"
expect_grep '^after rdma_disconnect: RDMA_CM_EVENT_TIMEWAIT_EXIT$' "$O/tw/listen.out" "TIMEWAIT_EXIT after it"
ok "DISCONNECTED, then TIMEWAIT_EXIT only after the survivor's rdma_disconnect"

# The side that disconnects hears DISCONNECTED when the other answers
# (the DREP goes with that side's own rdma_disconnect, 1.5 s after its
# DISCONNECTED here), not when the DREQ arrives, as with the kernel's CM.
check "a disconnect across: DISCONNECTED waits for the peer's rdma_disconnect (its DREP)"
mkdir -p "$O/drep" && chmod 777 "$O/drep"
ns_debian "$NSA" "$USER1" "$SOCK_A" env CMAPI_TIMEWAIT=1500 "$T/bin/cmapi-helper" peer listen 7062 \
	"$O/drep" >"$O/drep/listen.out" 2>&1 &
lpid=$!
BG_PIDS+=("$lpid")
cm_listening "$SOCK_A" 7062 "$lpid" || { show listener "$O/drep/listen.out"; fail "the listener never listened"; }
ns_debian "$NSB" "$USER2" "$SOCK_B" env CMAPI_DISCONNECT=1 "$T/bin/cmapi-helper" peer connect "$IPA" 7062 \
	"$O/drep" >"$O/drep/connect.out" 2>&1 &
cpid=$!
BG_PIDS+=("$cpid")
wait_exit "$cpid" "$TMO" || { show connector "$O/drep/connect.out"; fail "the disconnecting peer did not end"; }
wait_exit "$lpid" "$TMO" || { show listener "$O/drep/listen.out"; fail "the listener did not end"; }
expect_grep '^before rdma_disconnect: quiet$' "$O/drep/listen.out" "the listener's wait before its answer"
ms=$(sed -n 's/^event: RDMA_CM_EVENT_DISCONNECTED status 0 after \([0-9]*\) ms$/\1/p' "$O/drep/connect.out")
[ -n "$ms" ] || { show connector "$O/drep/connect.out"; fail "the connector heard no DISCONNECTED, status 0"; }
[ "$ms" -ge 1450 ] || fail "the connector heard DISCONNECTED after $ms ms, before the listener's answer (1500 ms)"
ok "DISCONNECTED after $ms ms, with the listener's rdma_disconnect"

# hold_listener PORT OUT: uid $USER1's listener on A that holds each
# request it hears of (cmapi-helper peer hold), its output in OUT; HPID.
hold_listener() {
	ns_debian "$NSA" "$USER1" "$SOCK_A" "$T/bin/cmapi-helper" peer hold "$1" >"$2" 2>&1 &
	HPID=$!
	BG_PIDS+=("$HPID")
	cm_listening "$SOCK_A" "$1" "$HPID" || { show hold "$2"; fail "the holding listener never listened"; }
}

hold_listener_stop() {
	pkill -TERM -P "$HPID" 2>/dev/null
	wait_exit "$HPID" 5 || fail "the listener did not stop"
}

# A requester that gives up before any answer (its id destroyed in
# REQ_SENT) sends a REJ of its REQ, reason TIMEOUT, naming only its own
# comm ID and its CA GUID (ARI): the request at the listener ends
# REJECTED with that reason, as through the kernel's CM.
check "a connect given up before its answer: the listener's request is REJECTED"
hold_listener 7040 "$O/hold"
ns_debian "$NSB" "$USER2" "$SOCK_B" "$T/bin/cmapi-helper" peer abandon "$IPA" 7040 500 \
	>"$O/abandon" 2>&1 || { show abandon "$O/abandon"; fail "the abandoning client failed"; }
wait_exit "$HPID" "$TMO" || { show hold "$O/hold"; fail "the listener never heard of the abandoned request"; }
show "listener" "$O/hold"
expect_grep '^event: RDMA_CM_EVENT_CONNECT_REQUEST$' "$O/hold" "the listener's request"
expect_grep '^event: RDMA_CM_EVENT_REJECTED status 4 after ' "$O/hold" "the request given up"
ok "a connect given up before its answer: the listener's request ended REJECTED (TIMEOUT)"

# have_gid NS SOCK ADDR: until NS's roce0 lists ADDR's GID, as Debian's
# ibv_devinfo shows the table; false (and the table shown) if it never does.
have_gid() {
	for _ in $(seq $((TMO * 10))); do
		ns_debian "$1" "$USER1" "$2" /usr/bin/ibv_devinfo -v >"$O/devinfo" 2>&1
		grep -q "[[:space:]]$3, RoCE v2\$" "$O/devinfo" && return 0
		sleep 0.1
	done
	show "ibv_devinfo -v in $1" "$O/devinfo"
	return 1
}

# The same over IPv6: a global address on each end (as roce-ipv6.sh), so
# that the CM resolves the route to A's, its MADs go between the two IPv6
# GIDs with the addresses in rdma_cm's header, and so do the connection's
# packets, as the count of IPv6 packets B's kernel took in shows; then
# between the link-local addresses.
if [ -e /proc/net/if_inet6 ]; then
	IP6A=fd79::1
	IP6B=fd79::2
	ip -n "$NSA" addr add "$IP6A/64" dev "$VA" nodad &&
		ip -n "$NSB" addr add "$IP6B/64" dev "$VB" nodad || fail "ip -6 addr add"
	check "IPv6 addresses usable, and GIDs of both devices"
	for _ in $(seq $((TMO * 10))); do
		[ -z "$(ip -n "$NSA" -6 addr show dev "$VA" tentative)$(ip -n "$NSB" -6 addr show dev "$VB" tentative)" ] && break
		sleep 0.1
	done
	[ -z "$(ip -n "$NSA" -6 addr show dev "$VA" tentative)$(ip -n "$NSB" -6 addr show dev "$VB" tentative)" ] ||
		fail "IPv6 addresses stay tentative"
	# the daemons take addresses in as they come (rtnetlink)
	have_gid "$NSA" "$SOCK_A" "$IP6A" && have_gid "$NSB" "$SOCK_B" "$IP6B" ||
		fail "an IPv6 address without its GID"
	ok "$IP6A in $NSA and $IP6B in $NSB, both in their device's GID table"
	v6_before=$(ip netns exec "$NSB" cat /proc/net/snmp6 | awk '$1 == "Ip6InReceives" { print $2 }')
	rping_across "rping -V over IPv6 ($IP6A), 50 pings of 1000 B" 7008 50 1000 "$IP6A"
	v6_after=$(ip netns exec "$NSB" cat /proc/net/snmp6 | awk '$1 == "Ip6InReceives" { print $2 }')
	# each ping brings B the server's READ request, WRITE and two SENDs
	[ $((v6_after - v6_before)) -ge 200 ] ||
		fail "only $((v6_after - v6_before)) IPv6 packets reached $NSB"
	ok "$((v6_after - v6_before)) IPv6 packets reached $NSB"
	# and to A's link-local address, scoped to each end's own interface
	lla=$(ip -n "$NSA" -6 addr show dev "$VA" scope link |
		sed -n 's/.*inet6 \(fe80::[0-9a-f:]*\)\/64.*/\1/p')
	[ -n "$lla" ] || fail "no link-local address on $VA"
	have_gid "$NSA" "$SOCK_A" "$lla" || fail "no GID for $lla in $NSA"
	cm_across "rping -V over IPv6 link-local ($lla), 10 pings of 64 B" 7018 \
		'^server ping data: ' '^ping data: ' \
		/usr/bin/rping -s -a "$lla%$VA" -p 7018 -v -V -C 10 -S 64 -- \
		/usr/bin/rping -c -a "$lla%$VB" -p 7018 -v -V -C 10 -S 64
	n=$(grep -ac '^ping data: ' "$O/$NRUN.client")
	[ "$n" -eq 10 ] || fail "over IPv6 link-local: the client printed $n pings, not 10"

	mckey_across "IPv6 group ff0e::79:1" ff0e::79:1 "$IP6A" "$IP6B"

	# A's "peers" take fe80::/64 (its interface's subnets), and any
	# process of A's host may send from such an address: an ordinary UDP
	# socket bound to another interface's link-local address, or one
	# with IPV6_FREEBIND bound to an address nobody has.  Looped back on
	# the host, neither is a peer's packet, and the daemon never sees
	# them: a MAD of theirs with a bad P_Key would count in
	# dropped_bad_pkey (or, from a host address, dropped_not_peer).  The
	# same MAD from B, sent after them, counts and shows they were read.
	check "datagrams from A's own host are no peer's: never seen"
	ip -n "$NSA" link add "ivd$$" type veth peer name "ive$$" &&
		ip -n "$NSA" link set "ivd$$" up && ip -n "$NSA" link set "ive$$" up &&
		ip -n "$NSA" addr add fe80::77/64 dev "ivd$$" nodad ||
		fail "another interface in $NSA"
	llb=$(ip -n "$NSB" -6 addr show dev "$VB" scope link |
		sed -n 's/.*inet6 \(fe80::[0-9a-f:]*\)\/64.*/\1/p')
	[ -n "$llb" ] || fail "no link-local address on $VB"
	drops() {
		SOCK=$SOCK_A ibvctl -j statistic show link roce0/1 | "$PYTHON" -c 'import json, sys
row = json.load(sys.stdin)[0]
print(row["dropped_not_peer"], row["dropped_bad_pkey"])'
	}
	local6() {	# NS FROM FROM-IF TO-IF [freebind]
		ip netns exec "$1" setpriv --reuid="$USER2" --regid="$USER2" --clear-groups -- \
			"$PYTHON" "$top_srcdir/tests/integration/roce-mad-hostile.py" \
			local6 "$2" "$3" "$lla" "$4" 0x1234 ${5:-} 2>"$O/ll.err" ||
			{ show sender "$O/ll.err"; fail "the sender from $2"; }
	}
	c0=$(drops) || fail "A's drop counters"
	local6 "$NSA" fe80::77 "ivd$$" "$VA"
	local6 "$NSA" fe80::dead "$VA" "$VA" freebind
	local6 "$NSB" "$llb" "$VB" "$VB"
	for _ in $(seq 50); do
		c1=$(drops) || fail "A's drop counters"
		[ "${c1#* }" -gt "${c0#* }" ] && break
		sleep 0.1
	done
	ip -n "$NSA" link del "ivd$$"
	[ "${c1% *}" -eq "${c0% *}" ] && [ "${c1#* }" -eq $((${c0#* } + 1)) ] ||
		fail "dropped_not_peer went from ${c0% *} to ${c1% *}, dropped_bad_pkey from ${c0#* } to ${c1#* } (B's only: +1)"
	LL_DROPS=1
	ok "uid $USER2's MADs from fe80::77 (another interface) and fe80::dead (IPV6_FREEBIND) to $lla: unseen; B's counted"
fi

check "rdma_client towards a port nobody listens on: REJ, connection refused"
ns_debian "$NSB" "$USER2" "$SOCK_B" /usr/bin/rdma_client -s "$IPA" -p 7006 >"$O/refused" 2>&1
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { show client "$O/refused"; fail "rdma_client towards no listener exited $rc"; }
expect_grep 'Connection refused' "$O/refused" "rdma_client towards no listener"
ok "rdma_client: $(grep -m1 'Connection refused' "$O/refused")"

check "rping towards an address nobody has: the client fails, no hang"
ns_debian "$NSB" "$USER2" "$SOCK_B" /usr/bin/rping -c -a 10.79.1.1 -p 7007 -C 1 >"$O/nohost" 2>&1
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { show client "$O/nohost"; fail "rping towards nobody exited $rc"; }
ok "rping towards nobody exited $rc"

no_ids_left "the programs above"

# QP1 takes a MAD only as rxe's GSI QP does: in the default partition (a
# full or limited member's P_Key) and from the peer's own QP1, where the
# answer goes.  A request for a port nobody listens on is answered (REJ or
# SIDR REP) when it is one; else it is dropped without a word.
check "QP1 answers only MADs with the default P_Key, from QP1; drops are counted"
probe() {	# WANT PKEY SRC-QP [SRC-ADDRESS]
	ip netns exec "$NSB" "$PYTHON" "$top_srcdir/tests/integration/roce-mad-hostile.py" \
		probe "${4:-$IPB}" "$IPA" "$2" "$3" 7011 >"$O/probe" 2>&1 ||
		{ show probe "$O/probe"; fail "the probe failed"; }
	case $1 in
	answer)	expect_grep '^answer: attr 0x001[28] to QP 0x000001$' "$O/probe" \
			"the answer to a MAD with P_Key $2 from QP $3" ;;
	none)	expect_grep '^no answer$' "$O/probe" "a MAD with P_Key $2 from QP $3" ;;
	esac
}
probe answer 0xFFFF 1
probe answer 0x7FFF 1
probe none 0x1234 1
probe none 0x0000 1
probe none 0xFFFF 0x123456
# from outside A's peers (its own subnet): dropped before anything
probe none 0xFFFF 1 192.0.2.1
SOCK=$SOCK_A ibvctl -j statistic show link roce0/1 >"$O/drops" 2>&1 ||
	{ show "statistic show" "$O/drops"; fail "ibvctl statistic show link roce0/1"; }
# (plus B's bad P_Key of the IPv6 check above, when it ran)
# and those of the hostile packets at a group
"$PYTHON" - "$O/drops" "$((2 + ${LL_DROPS:-0} + MC_PKEY_DROPS))" "$((1 + MC_PEER_DROPS))" <<-'EOF' || { show "statistic show" "$O/drops"; fail "A's drop counters"; }
import json, sys
row = json.load(open(sys.argv[1]))[0]
sys.exit(0 if row["dropped_bad_pkey"] == int(sys.argv[2]) and
         row["dropped_not_peer"] == int(sys.argv[3]) else 1)
EOF
ok "P_Key 0xFFFF and 0x7FFF from QP1 answered; P_Key 0x1234 and 0x0000, and source QP 0x123456, dropped; A counted 2 bad P_Keys and 1 packet from outside its peers"

# A REQ's rdma_cm header names its source: the passive side's path and the
# app's peer address are made of it.  One naming another host than the
# packet's source would aim the connection's traffic there: it is refused
# (REJ), and the listener never hears of it.
check "a REQ whose rdma_cm header names another source is refused"
hold_listener 7041 "$O/hold2"
ip netns exec "$NSB" "$PYTHON" "$top_srcdir/tests/integration/roce-mad-hostile.py" \
	probe "$IPB" "$IPA" 0xFFFF 1 7041 10.79.0.77 >"$O/probe" 2>&1 ||
	{ show probe "$O/probe"; fail "the probe failed"; }
show probe "$O/probe"
expect_grep '^answer: attr 0x0012 to QP 0x000001$' "$O/probe" "a REJ"
sleep 0.2
expect_no_grep '^event:' "$O/hold2" "the listener"
hold_listener_stop
ok "REJ for a header naming 10.79.0.77 from $IPB; the listener heard nothing"

# A peer that resends its REQ names the same comm ID, 0 included: the
# resend finds the request already made (an MRA while the listener
# decides) and never makes a second one.
check "a REQ resent with comm ID 0 is one request: the resend gets an MRA"
hold_listener 7042 "$O/hold3"
ip netns exec "$NSB" "$PYTHON" "$top_srcdir/tests/integration/roce-mad-hostile.py" \
	resend "$IPB" "$IPA" 7042 0 >"$O/resend" 2>&1 ||
	{ show resend "$O/resend"; fail "the resending peer failed"; }
show resend "$O/resend"
expect_grep '^answer: attr 0x0011 remote comm ID 0x00000000$' "$O/resend" "an MRA to the resent REQ"
n=$(grep -c '^event: RDMA_CM_EVENT_CONNECT_REQUEST$' "$O/hold3")
[ "$n" -eq 1 ] || { show hold "$O/hold3"; fail "the listener heard of $n requests, not 1"; }
hold_listener_stop
ok "REQ with comm ID 0 sent twice: one request at the listener, an MRA to the resend"

# Hostile MADs at both QP1s while an rping runs: garbage, mutated
# captures, requests for ports nobody listens on, and answers naming
# random comm IDs, all with good ICRCs and sent from the connected peer's
# own address.  The rping's data stays whole, both daemons stay up, and
# none of it leaves an id behind.
check "hostile MADs at both daemons' QP1 under a running rping"
pcap=$top_srcdir/tests/data/rxe-pair.pcap
ip netns exec "$NSB" "$PYTHON" "$top_srcdir/tests/integration/roce-mad-hostile.py" \
	"$pcap" "$IPB" "$IPA" 20000 1 7009 >"$O/hostile.a" 2>&1 &
h1=$!
ip netns exec "$NSA" "$PYTHON" "$top_srcdir/tests/integration/roce-mad-hostile.py" \
	"$pcap" "$IPA" "$IPB" 20000 2 7009 >"$O/hostile.b" 2>&1 &
h2=$!
BG_PIDS+=("$h1" "$h2")
rping_across "rping -V under hostile MADs, 300 pings" 7009 300 64
for p in "$h1" "$h2"; do
	wait_exit "$p" "$TMO" || fail "the hostile MAD sender hung"
	[ "$EXIT_STATUS" -eq 0 ] || { show sender "$O/hostile.a"; show sender "$O/hostile.b"; fail "the hostile MAD sender failed"; }
done
no_ids_left "hostile MADs"
ok "hostile MADs: $(cat "$O/hostile.a") at A and $(cat "$O/hostile.b") at B; rping whole, no id left"

# A third of the MADs into A dropped (QP1's packets: BTH destination QP
# 1, 24 bits at bit 104 of the UDP datagram): every exchange still ends,
# through the CM's retransmissions (REQ, REP, DREQ resent; a resent REP
# answered with the RTU again, a resent DREQ with the DREP).
need_cmd nft
ip netns exec "$NSA" nft -f - <<-EOF || fail "nft in $NSA"
table inet ibvdcm {
	chain in {
		type filter hook input priority 0;
		udp dport 4791 @th,104,24 1 numgen random mod 3 == 0 counter drop
	}
}
EOF
# Each lost MAD costs its sender a retransmission timeout (4.6 s, from
# the CM response timeout rdma_cm announces): room for several in a row.
TMO=$((TMO * 4))
for i in 1 2 3; do
	rping_across "rping -V with a third of the MADs into A lost (run $i)" $((7010 + i)) 20 64
done
cm_across "ucmatose with a third of the MADs into A lost" 7020 \
	'^data transfers complete' '^data transfers complete' \
	stdbuf -oL /usr/bin/ucmatose -c 3 -p 7020 -- \
	/usr/bin/ucmatose -c 3 -p 7020 -s "$IPA"
drops=$(ip netns exec "$NSA" nft list table inet ibvdcm | grep -o 'packets [0-9]*' | head -n 1 | cut -d' ' -f2)
[ "${drops:-0}" -gt 0 ] || fail "nftables dropped no MAD: the loss case tested nothing"
ok "nftables dropped $drops MADs on the way into A"
ip netns exec "$NSA" nft delete table inet ibvdcm

no_ids_left "the lossy runs"

# 2 % of the RC requests and READ responses into A dropped (BTH opcodes
# below 0x11, the ACK: 8 bits at bit 64 of the UDP datagram), under
# rping's READs, WRITEs and SENDs both ways: every ping's data whole,
# every loss recovered by a retransmission, which the requester counts:
# a lost request when the responder NAKs the gap after it
# (rcvd_seq_err), a lost READ response when a later one shows the gap,
# the last one at the ACK timeout, 0.5 s with rdma_cm's timeout 17
# (completer_retry_err).  ACKs and MADs pass: a lost ACK may need no
# retransmission at all (a later one covers it), and a lost MAD is the
# CM's to resend, which the case above covers.  TMO stays four times the
# default, as the lossy MADs above set it.
ip netns exec "$NSA" nft -f - <<-EOF || fail "nft in $NSA"
table inet ibvdloss {
	chain in {
		type filter hook input priority 0;
		udp dport 4791 @th,64,8 < 0x11 numgen random mod 100 < 2 counter drop
	}
}
EOF
retries() {
	local sock n=0
	for sock in "$SOCK_A" "$SOCK_B"; do
		n=$((n + $(SOCK=$sock ibvctl -j statistic show link roce0/1 | "$PYTHON" -c '
import json, sys
print(sum(int(r.get("completer_retry_err", 0)) + int(r.get("rcvd_seq_err", 0))
          for r in json.load(sys.stdin)))')))
	done
	echo "$n"
}
retry0=$(retries)
# A run of packets is one datagram (gso.c), so a ping's requests into A
# are a few datagrams: 50 pings may pass 2 % untouched (about 1 in 50
# runs); up to two more rounds then, until the loss case tests something.
for round in 0 1 2; do
	rping_across "rping -V, 50 pings of 4000 B, 2 % of the packets into A lost" $((7090 + round)) 50 4000
	drops=$(ip netns exec "$NSA" nft list table inet ibvdloss | grep -o 'packets [0-9]*' | head -n 1 | cut -d' ' -f2)
	[ "${drops:-0}" -gt 0 ] && break
done
retry1=$(retries)
[ "${drops:-0}" -gt 0 ] || fail "nftables dropped no packet in 3 rounds: the loss case tested nothing"
[ "$retry1" -gt "$retry0" ] || fail "$drops packets lost and no retry ($retry0 -> $retry1)"
ok "rping through $drops lost packets: completer_retry_err + rcvd_seq_err $retry0 -> $retry1"
ip netns exec "$NSA" nft delete table inet ibvdloss
no_ids_left "the lossy rping"
ok "$NRUN connections across the wire passed"
