#!/bin/bash
# Two hosts on a RoCEv2 wire: two network namespaces joined by a veth
# pair, one daemon in each with a RoCE device on its end.  Debian's
# unmodified programs talk across, between two unprivileged uids (the
# server as uid 1001 in one namespace, the client as uid 1002 in the
# other): ibv_ud/rc/uc/srq_pingpong with -g 1 (the IPv4 GID), with data
# checked (-c) from one packet to 1 MiB (a thousand packets a message),
# and perftest's ib_write_bw, ib_read_bw, ib_atomic_bw and ib_send_lat
# with -x 1 (ib_send_lat also with completion events), and ib_send_bw to
# a multicast group.  Then hostile packets from addresses that are not
# the connected peer, at the QPs of a running pingpong (roce-hostile.py).
# Then the same with 2 % of the RoCE packets into one namespace dropped
# by nftables, ib_read_bw's READs too: the data still arrives whole, and
# the counters show what the wire did (PSN sequence NAKs, READ retries);
# and 4 MiB READs and WRITEs with 15 % lost each way, which time out more
# often than their retry count and still complete.
# Then a peer whose link goes down mid-transfer: its partner's sends end
# with IBV_WC_RETRY_EXC_ERR and the daemons stay up.  Last, one daemon
# restarted without -f (it forks to the background): pingpong again.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns.sh"

for p in ud rc uc srq; do
	need_cmd "/usr/bin/ibv_${p}_pingpong"
done
is_root || skip "network namespaces need root"
ibvd_init
O=$T/out

wire_up

pingpongs() {
	across "UD pingpong, 1 KiB (the port MTU), data checked" "$PP_RE" \
		/usr/bin/ibv_ud_pingpong -g 1 -s 1024 -n 200 -c
	across "UD pingpong, 1 B, completion events" "$PP_RE" \
		/usr/bin/ibv_ud_pingpong -g 1 -s 1 -n 200 -e
	across "RC pingpong, default 4 KiB (4 packets a message)" "$PP_RE" \
		/usr/bin/ibv_rc_pingpong -g 1 -n 500
	across "RC pingpong, 64 KiB, data checked" "$PP_RE" \
		/usr/bin/ibv_rc_pingpong -g 1 -s 65536 -n 100 -c
	across "RC pingpong, 1 MiB (1024 packets a message), data checked" "$PP_RE" \
		/usr/bin/ibv_rc_pingpong -g 1 -s 1048576 -n 10 -c
	across "RC pingpong, completion events" "$PP_RE" \
		/usr/bin/ibv_rc_pingpong -g 1 -n 200 -e
	across "UC pingpong, 4 KiB, data checked" "$PP_RE" \
		/usr/bin/ibv_uc_pingpong -g 1 -n 200 -c
	across "SRQ pingpong (4 QPs on a shared receive queue)" "$PP_RE" \
		/usr/bin/ibv_srq_pingpong -g 1 -n 200
}

perftests() {
	command -v ib_write_bw >/dev/null 2>&1 || { log "perftest is not installed"; return 0; }
	rdma0=$(counter rdma_recvs "$SOCK_A")
	across "ib_write_bw 64 KiB" "$PT_RE" ib_write_bw -d roce0 -x 1 -s 65536 -n 200
	rdma1=$(counter rdma_recvs "$SOCK_A")
	# the server's port counts the WRITEs that came to it, as rxe's does
	[ $((rdma1 - rdma0)) -ge 200 ] ||
		fail "rdma_recvs in A $rdma0 -> $rdma1 after 200 WRITEs"
	across "ib_read_bw 64 KiB" "$PT_RE" ib_read_bw -d roce0 -x 1 -s 65536 -n 200
	across "ib_atomic_bw" "$PT_RE" ib_atomic_bw -d roce0 -x 1 -n 200
	across "ib_send_lat 2 B" "$PT_RE" ib_send_lat -d roce0 -x 1 -n 200
	# one channel for both CQs: the send's event must come before the reply's
	across "ib_send_lat 2 B, completion events" "$PT_RE" \
		ib_send_lat -d roce0 -x 1 -n 500 -e
	# an IPv4 group (IGMP) for the IPv4 GID, as 16 bytes: ::ffff:239.1.2.3
	across "ib_send_bw -g, multicast to 239.1.2.3" "$PT_RE" \
		ib_send_bw -d roce0 -x 1 -c UD -g -M 0:0:0:0:0:0:0:0:0:0:255:255:239:1:2:3 -n 50
}

# counter NAME [SOCKET]: the value of one of roce0/1's counters in
# namespace B's daemon (or the one on SOCKET).
counter() {
	SOCK=${2:-$SOCK_B} ibvctl -j statistic show link roce0/1 >"$O/stat.json" 2>&1 ||
		{ show "statistic show" "$O/stat.json"; fail "ibvctl statistic show link roce0/1"; }
	"$PYTHON" - "$O/stat.json" "$1" <<-'EOF'
	import json, sys
	rows = json.load(open(sys.argv[1]))
	print(sum(int(r.get(sys.argv[2], 0)) for r in rows))
	EOF
}

# paid UID: the bytes uid UID's bandwidth limit in B's daemon was paid.
paid() {
	SOCK=$SOCK_B ibvctl -j limit show current uid "$1" >"$O/paid.json" 2>&1 ||
		{ show "limit show current" "$O/paid.json"; fail "ibvctl limit show current uid $1"; }
	"$PYTHON" -c 'import json, sys
print([r for r in json.load(open(sys.argv[1])) if r["dev"] == "all"][0]["bandwidth"])' "$O/paid.json"
}

# The engine asks a QP with messages in flight for their answers again
# and again; a tenant held to a bandwidth limit pays for a message once
# (before, for every look: half its limit), and for what goes again.
paid_once() {
	local keep port=$((PORT + 500)) got want=$((200 * 65536))

	command -v ib_write_bw >/dev/null 2>&1 || return 0
	check "a bandwidth limit is paid once for each byte sent"
	SOCK=$SOCK_B ibvctl limit set uid "$USER2" bandwidth=1g >"$O/set" 2>&1 ||
		{ show "limit set" "$O/set"; fail "limit set uid $USER2 bandwidth=1g in $NSB"; }
	# a session of uid $USER2 in B keeps its tenant, and what it paid
	ns_debian "$NSB" "$USER2" "$SOCK_B" /usr/bin/ibv_rc_pingpong -g 1 -p "$port" >"$O/keep" 2>&1 &
	keep=$!
	BG_PIDS+=("$keep")
	wait_listen_ns "$NSB" "$port" "$keep" || { show keep "$O/keep"; fail "a held session of uid $USER2"; }
	across "ib_write_bw 64 KiB, held to 1 GiB/s" "$PT_RE" ib_write_bw -d roce0 -x 1 -s 65536 -n 200
	got=$(paid "$USER2")
	[ "$got" -ge "$want" ] && [ "$got" -le $((want + want / 20)) ] ||
		fail "uid $USER2 paid $got bytes for 200 WRITEs of 64 KiB ($want)"
	ok "uid $USER2 paid $got bytes for 200 WRITEs of 64 KiB ($want)"
	kill -TERM "$keep" 2>/dev/null
	wait_exit "$keep" 5
	SOCK=$SOCK_B ibvctl limit set uid "$USER2" bandwidth=max >"$O/set" 2>&1 ||
		{ show "limit set" "$O/set"; fail "limit set uid $USER2 bandwidth=max in $NSB"; }
}

pingpongs
perftests
paid_once

# Two QPs of the same RoCE device: a NIC's loopback, no packet on the wire.
check "both ends on A's roce0: delivered without the wire"
CLIENT_NS=$NSA CLIENT_SOCK=$SOCK_A CLIENT_TO=127.0.0.1
before=$(ip -n "$NSA" -s -j link show "$VA" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["tx"]["packets"])')
across "RC pingpong on one device, data checked" "$PP_RE" \
	/usr/bin/ibv_rc_pingpong -g 1 -s 65536 -n 200 -c
across "UD pingpong on one device, data checked" "$PP_RE" \
	/usr/bin/ibv_ud_pingpong -g 1 -s 1024 -n 200 -c
after=$(ip -n "$NSA" -s -j link show "$VA" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["tx"]["packets"])')
# 400 messages of up to 64 KiB would be thousands of packets; allow a few
# stray ones (neighbour discovery, IPv6 autoconfiguration)
[ $((after - before)) -lt 50 ] || fail "loopback: $((after - before)) packets left $VA"
ok "loopback: $((after - before)) packets on $VA while 400 messages went between QPs of roce0"
CLIENT_NS=$NSB CLIENT_SOCK=$SOCK_B CLIENT_TO=$IPA

# ---- a hostile wire -------------------------------------------------------

# While an RC pingpong with checked data runs between the daemons, another
# address on B's side (10.79.0.3, not the connected peer) and one outside
# every peer subnet (10.80.0.9) send garbage, mutated captures (some with
# their ICRC made good again) and well-formed packets aimed at the
# pingpong's own QPs.  None of it may reach a QP: the pingpong's data must
# stay whole, and both daemons up.  The pingpong runs long enough (a few
# seconds) to be seen connected and to be running while the packets come:
# 400 iterations took half a second once RC kept a window in flight.  On a
# loaded machine (CI beside other jobs, a 2-CPU host) 4000 may take longer
# than the usual 20 s: the pingpong and the wait for it get 4 times that.
check "hostile packets at both devices under a running pingpong"
ip -n "$NSB" addr add 10.79.0.3/24 dev "$VB" || fail "ip addr add 10.79.0.3"
PORT=$((PORT + 1))
NS_TMO=$((4 * TMO)) ns_debian "$NSA" "$USER1" "$SOCK_A" prlimit --memlock="$MEMLOCK" \
	/usr/bin/ibv_rc_pingpong -g 1 -s 4096 -c -n 4000 -p "$PORT" >"$O/hostile.server" 2>&1 &
spid=$!
BG_PIDS+=("$spid")
wait_listen_ns "$NSA" "$PORT" "$spid" || fail "hostile: the server never listened"
NS_TMO=$((4 * TMO)) ns_debian "$NSB" "$USER2" "$SOCK_B" prlimit --memlock="$MEMLOCK" \
	/usr/bin/ibv_rc_pingpong -g 1 -s 4096 -c -n 4000 -p "$PORT" "$IPA" >"$O/hostile.client" 2>&1 &
cpid=$!
BG_PIDS+=("$cpid")
# the pingpong's QPs, as each daemon lists them once they are connected
rts_qpns() {
	SOCK=$1 ibvctl -j resource show qp 2>/dev/null | "$PYTHON" -c '
import json, sys
print(" ".join(hex(r["lqpn"]) for r in json.load(sys.stdin) if r.get("state") == "RTS"))'
}
qpns=""
for _ in $(seq $((TMO * 10))); do
	qa=$(rts_qpns "$SOCK_A")
	qb=$(rts_qpns "$SOCK_B")
	[ -n "$qa" ] && [ -n "$qb" ] && { qpns="$qa $qb"; break; }
	sleep 0.1
done
[ -n "$qpns" ] || fail "hostile: the pingpong never connected"
pcap=$top_srcdir/tests/data/rxe-pair.pcap
# shellcheck disable=SC2086 # qpns are words
sent1=$(ip netns exec "$NSB" "$PYTHON" "$top_srcdir/tests/integration/roce-hostile.py" \
	"$pcap" 10.79.0.3 "$IPA" 6000 1 $qpns) || fail "hostile: the sender failed"
# shellcheck disable=SC2086
sent2=$(ip netns exec "$NSB" "$PYTHON" "$top_srcdir/tests/integration/roce-hostile.py" \
	"$pcap" 10.80.0.9 "$IPA" 2000 2 $qpns) || fail "hostile: the sender failed"
# shellcheck disable=SC2086
sent3=$(ip netns exec "$NSA" "$PYTHON" "$top_srcdir/tests/integration/roce-hostile.py" \
	"$pcap" "$IPA" "$IPB" 2000 3) || fail "hostile: the sender failed"
for p in "$spid" "$cpid"; do
	wait_exit "$p" $((4 * TMO)) || fail "hostile: the pingpong hung"
	[ "$EXIT_STATUS" -eq 0 ] || { show server "$O/hostile.server"; show client "$O/hostile.client"; fail "hostile: the pingpong failed ($EXIT_STATUS)"; }
done
expect_grep "$PP_RE" "$O/hostile.client" "hostile: pingpong"
expect_no_grep 'invalid data|Failed status' "$O/hostile.server" "hostile: server data"
expect_no_grep 'invalid data|Failed status' "$O/hostile.client" "hostile: client data"
daemon_alive "after hostile packets"
pid_running "$PID_B" || fail "the daemon in $NSB died from hostile packets"
ip -n "$NSB" addr del 10.79.0.3/24 dev "$VB"
ok "hostile: $sent1 + $sent2 + $sent3 packets sent at QPs $qpns; pingpong data whole, daemons up"

# ---- a lossy wire --------------------------------------------------------

if command -v nft >/dev/null 2>&1; then
	check "2 % of the RoCE packets into $NSB dropped (nftables numgen)"
	ip netns exec "$NSB" nft -f - <<-EOF || fail "nft rules"
	table inet ibvdloss {
		chain in {
			type filter hook input priority 0;
			udp dport 4791 @th,64,8 != 0x11 numgen random mod 100 < 2 drop
		}
	}
	EOF
	seq0=$(counter out_of_seq_request)
	# ibv_rc_pingpong ends without a handshake: the server leaves once
	# its last SEND is acknowledged, and if the ACK of the client's last
	# SEND was lost, the client's retries find no QP and run out, on any
	# RC device.  So ACKs (BTH opcode 0x11) pass for this run; perftest
	# syncs before it tears down, and loses ACKs too below.
	across "RC pingpong, 64 KiB, data checked, lossy" "$PP_RE" \
		/usr/bin/ibv_rc_pingpong -g 1 -s 65536 -n 100 -c
	ip netns exec "$NSB" nft flush chain inet ibvdloss in
	ip netns exec "$NSB" nft add rule inet ibvdloss in \
		udp dport 4791 numgen random mod 100 '<' 2 drop ||
		fail "nft rule"
	if command -v ib_write_bw >/dev/null 2>&1; then
		across "ib_write_bw 64 KiB, lossy" "$PT_RE" ib_write_bw -d roce0 -x 1 -s 65536 -n 200
	fi
	# READs of 64 responses each, the client in B reading: most lose
	# one on the way in, and each asks again from the first lost one at
	# once (a whole new READ at every timeout would run out of retries).
	if command -v ib_read_bw >/dev/null 2>&1; then
		retry0=$(counter completer_retry_err)
		across "ib_read_bw 64 KiB, lossy" "$PT_RE" ib_read_bw -d roce0 -x 1 -s 65536 -n 200
		retry1=$(counter completer_retry_err)
		[ "$retry1" -gt "$retry0" ] ||
			fail "no READ retry in $NSB after a lossy ib_read_bw ($retry0 -> $retry1)"
		ok "ib_read_bw: completer_retry_err $retry0 -> $retry1 in $NSB"
	fi
	seq1=$(counter out_of_seq_request)
	drops=$(ip netns exec "$NSB" nft list table inet ibvdloss | grep -c drop)
	[ "$seq1" -gt "$seq0" ] ||
		fail "no out_of_seq_request NAK in $NSB after a lossy run ($seq0 -> $seq1)"
	ok "lossy runs delivered every byte; out_of_seq_request $seq0 -> $seq1 ($drops drop rule)"
	ip netns exec "$NSB" nft delete table inet ibvdloss
	# 4 MiB messages (4,096 packets) with 15 % lost each way time out
	# more often over their life than the 7 retries perftest gives them,
	# and still move on between timeouts: the retries count timeouts in
	# a row, as rxe's do, so every message gets through.
	if command -v ib_read_bw >/dev/null 2>&1; then
		for ns in "$NSA" "$NSB"; do
			ip netns exec "$ns" nft -f - <<-EOF || fail "nft rules in $ns"
			table inet ibvdloss15 {
				chain in {
					type filter hook input priority 0;
					udp dport 4791 numgen random mod 100 < 15 drop
				}
			}
			EOF
		done
		retry0=$(counter completer_retry_err)
		across "ib_read_bw 4 MiB, 15 % lost each way" "$PT_RE" \
			ib_read_bw -d roce0 -x 1 -s 4194304 -n 5
		# B writes to A: A cannot take in more packets than B sent,
		# its go-back-N resends included
		sent0=$(counter sent_pkts)
		rcvd0=$(counter rcvd_pkts "$SOCK_A")
		across "ib_write_bw 4 MiB, 15 % lost each way" "$PT_RE" \
			ib_write_bw -d roce0 -x 1 -s 4194304 -n 5
		sent1=$(counter sent_pkts)
		rcvd1=$(counter rcvd_pkts "$SOCK_A")
		[ $((rcvd1 - rcvd0)) -le $((sent1 - sent0)) ] ||
			fail "A took in $((rcvd1 - rcvd0)) RoCE packets, B counts $((sent1 - sent0)) sent: B's resends are not counted"
		retry1=$(counter completer_retry_err)
		for ns in "$NSA" "$NSB"; do ip netns exec "$ns" nft delete table inet ibvdloss15; done
		ok "4 MiB messages at 15 % loss: completer_retry_err $retry0 -> $retry1 in $NSB; B sent $((sent1 - sent0)) packets of the WRITEs, A took in $((rcvd1 - rcvd0))"
	fi
else
	log "nftables is not installed: no lossy runs"
fi

# ---- a link that goes down -----------------------------------------------

check "the link goes down under a transfer: retries run out, the daemons stay"
# Both sides send in turn; whichever has a message in flight when the link
# goes sees its retries run out (the other may wait for a receive, as on
# any fabric, and is stopped here).
ns_debian "$NSA" "$USER1" "$SOCK_A" prlimit --memlock="$MEMLOCK" \
	/usr/bin/ibv_rc_pingpong -g 1 -s 65536 -n 100000 -p 18599 >"$O/down.server" 2>&1 &
spid=$!
BG_PIDS+=("$spid")
wait_listen_ns "$NSA" 18599 "$spid" || fail "down: the server never listened"
sent0=$(counter sent_pkts)
ns_debian "$NSB" "$USER2" "$SOCK_B" prlimit --memlock="$MEMLOCK" \
	/usr/bin/ibv_rc_pingpong -g 1 -s 65536 -n 100000 -p 18599 "$IPA" >"$O/down.client" 2>&1 &
cpid=$!
BG_PIDS+=("$cpid")
# Down once the transfer is on the wire (a message's 64 packets out of
# B), not after a second's guess: a client slow to start on a busy
# machine found the link down in its TCP exchange, no retries to run out.
for i in $(seq $((TMO * 10))); do
	[ "$(counter sent_pkts)" -ge $((sent0 + 64)) ] && break
	pid_running "$cpid" || break
	sleep 0.1
done
[ "$(counter sent_pkts)" -ge $((sent0 + 64)) ] ||
	{ show "server" "$O/down.server"; show "client" "$O/down.client"; fail "down: the transfer never started"; }
downed0=$(counter link_downed)
ip -n "$NSB" link set "$VB" down
for i in $(seq $((TMO * 10))); do
	grep -Eq 'retry counter exceeded' "$O/down.server" "$O/down.client" && break
	sleep 0.1
done
term_bg "$spid" "$cpid"
wait_exit "$spid" 5
wait_exit "$cpid" 5
if ! grep -Eq 'retry counter exceeded' "$O/down.server" "$O/down.client"; then
	show "server" "$O/down.server"
	show "client" "$O/down.client"
	fail "down: no side saw its retries run out"
fi
daemon_alive "after the link went down"
pid_running "$PID_B" || fail "the daemon in $NSB died when its link went down"
# as rxe's: the port's going down counts once
for i in $(seq $((TMO * 10))); do
	[ "$(counter link_downed)" -gt "$downed0" ] && break
	sleep 0.1
done
downed1=$(counter link_downed)
[ "$downed1" -eq $((downed0 + 1)) ] || fail "link_downed $downed0 -> $downed1 in $NSB, not one more"
ok "down: $(grep -hE 'retry counter exceeded' "$O/down.server" "$O/down.client" | head -n 1)"

check "the link comes back: a new connection works"
ip -n "$NSB" link set "$VB" up
sleep 1
across "RC pingpong after the link came back" "$PP_RE" /usr/bin/ibv_rc_pingpong -g 1 -n 100

# A device's sockets are bound to its interface's index: one made again
# under the same name has another, and the sockets must follow it.
check "the veth is deleted and made again: a new connection works"
ip -n "$NSA" link del "$VA" || fail "ip link del $VA"
ip link add "$VA" netns "$NSA" type veth peer name "$VB" netns "$NSB" ||
	fail "ip link add $VA type veth, again"
ip -n "$NSA" link set "$VA" up && ip -n "$NSB" link set "$VB" up || fail "veth up, again"
ip -n "$NSA" addr add "$IPA/24" dev "$VA" && ip -n "$NSB" addr add "$IPB/24" dev "$VB" ||
	fail "ip addr add, again"
for _ in $(seq $((50 * TMUL))); do
	[ "$(grep -c "interface $VA is here" "$DAEMON_LOG")" -ge 1 ] && break
	sleep 0.1
done
expect_grep "device roce0: interface $VA is here" "$DAEMON_LOG" "A's daemon found the new interface"
sleep 1
across "RC pingpong on the interface made again" "$PP_RE" /usr/bin/ibv_rc_pingpong -g 1 -n 100
across "UD pingpong on the interface made again" "$PP_RE" /usr/bin/ibv_ud_pingpong -g 1 -s 1024 -n 100

# Its threads start after the fork (a thread does not survive one): the
# device's sockets must still be drained.
check "B's daemon started without -f, in the background: packets still reach it"
kill -TERM "$PID_B"
wait_exit "$PID_B" "$((5 * TMUL))" || fail "the daemon in $NSB did not stop"
PID_B=""
bg_as=()
if [ "$DAEMON_USER" != root ]; then bg_as=(--user "$DAEMON_USER"); fi
ip netns exec "$NSB" "$IBVERBSD_BUILT" "${bg_as[@]}" -c "$T/b.conf" 2>"$O/bg.log" ||
	{ show "the daemon in the background" "$O/bg.log"; fail "ibverbsd without -f did not start"; }
# The daemon, not the session leader its double fork leaves for a moment
# (nor its broker, which it forks later: a higher pid).
PID_B=$(pgrep -f -- "$IBVERBSD_BUILT.* -c $T/b.conf\$" | xargs -r ps -o pid=,sid= -p |
	awk '$1 != $2 { print $1 }' | sort -n | head -n 1)
[ -n "$PID_B" ] || fail "no daemon in the background after ibverbsd without -f"
daemon_wait_ready "$SOCK_B" "$PID_B"
across "RC pingpong to a daemon in the background" "$PP_RE" /usr/bin/ibv_rc_pingpong -g 1 -n 100

ok "$NRUN runs across the wire passed"
