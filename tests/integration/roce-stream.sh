#!/bin/bash
# Streams across a RoCEv2 wire: direct-helper's stream (direct-stream.c)
# with its two ends in the two network namespaces of netns.sh, a daemon
# in each with a RoCE device on its veth, the receiving end as uid $USER1
# in A, the sending end as uid $USER2 in B.  Three RC pairs sharing two
# CQs carry SENDs of 1 B to 64 KiB (64 packets each at the veth's IB MTU
# of 1024), some with immediate data, some inline, with RDMA WRITEs and
# READs cutting in, to a receiver that stalls at random (so RNR NAKs come
# and go); the receiving end checks each message's order, length,
# immediate data and every byte, the sending end each QP's completion
# order, and both that nothing was lost or came twice.  Also with the
# receiving QPs on one SRQ and both ends sleeping on completion events,
# and on UC pairs (which lose what finds no receive: gaps allowed, order
# and bytes checked); a receiving end slow to connect, which the sending
# end waits for; a UC message too long for its receive, dropped
# (peers-helper's uc_rx and uc_tx).  A SEND, a WRITE and a READ of ~1 MB
# each, longer than the engine's chunk (big_rx, big_tx).  Then RC and UC again with 2 % of the RoCE packets
# into A dropped by nftables, whose retransmissions the counters must
# show.  Last, the receiving process killed mid-stream, three times: the
# sender's QPs end in retry exceeded, as against a host that died;
# then the sending process, and what came must be whole and in order.
# DIRECT_STREAM_SECS sets how long each stream runs (default 4 s),
# DIRECT_STREAM_SEED its seed (netns.sh, stream_across).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns.sh"

is_root || skip "network namespaces need root"
ibvd_init
O=$T/out
wire_up

# counter NAME: a port counter of roce0 in A (the receiving side).
counter() {
	SOCK=$SOCK_A ibvctl statistic show link roce0/1 |
		sed -n "s/.* $1 \([0-9]*\).*/\1/p"
}

# The RC streams' local ACK timeout: 134 ms (exponent 15), not vt's 16.8
# ms, so that 7 retries outlast a second of silence.  Each end's daemon
# shares this 2-CPU machine with whatever runs beside the test (a full
# make check -j2, its busy-polling benchmarks), and there an engine
# thread woken by a packet was seen to wait over 500 ms for a CPU: a
# responder that cannot run says nothing, and 7 retries of 16.8 ms
# (134 ms in all) failed the stream.  The killed-peer rounds keep vt's
# timeout: there the silence is real.
RC_TMO="DIRECT_STREAM_TIMEOUT=15"
MIX=$RC_TMO
stream_across "SENDs, WRITEs and READs on 3 RC pairs across the wire, the receiver stalling"
MIX="$RC_TMO DIRECT_STREAM_SRQ=1 DIRECT_STREAM_EVENTS=1"
stream_across "the same to receivers on an SRQ, both ends sleeping on events"
MIX="DIRECT_STREAM_UC=1"
stream_across "SENDs and WRITEs on 3 UC pairs across the wire"
# A receiving end slow to connect its QPs, as on a crowded machine: the
# sending end waits for it, since until its RTR every packet is dropped
# unanswered, and 1.5 s outlasts the sender's 7 retries of 134 ms.
MIX="$RC_TMO DIRECT_STREAM_RECV_LATE_MS=1500"
DIRECT_STREAM_SECS=1 stream_across "RC pairs whose receiving end connects 1.5 s late"
MIX=""

# uc_end NS UID SOCKET ROLE DIR [srq]: peers-helper's UC roles on roce0.
uc_end() {
	local ns=$1 uid=$2 sock=$3
	shift 3
	(cd "$T" && exec ip netns exec "$ns" timeout -k 2 $((TMO * 2)) \
		setpriv --reuid="$uid" --regid="$uid" --clear-groups -- \
		env IBVERBSD_SOCKET="$sock" VT_DEVICE=roce0 VT_GID_INDEX=1 \
		VT_TMUL="$TMUL" prlimit --memlock="$MEMLOCK" \
		"$T/tools/ibverbsd-run" "$T/bin/peers-helper" "$@")
}

# A UC message too long for its receive (four packets): the responder
# drops it as rxe's does, the next message lands, the QPs go on.
for v in "" srq; do
	check "a UC message too long for its receive across the wire${v:+, the receive from an SRQ}"
	dir=$T/uc-long$v
	mkdir -p "$dir" && chmod 777 "$dir" || fail "mkdir $dir"
	# shellcheck disable=SC2086 # $v is zero or one word
	uc_end "$NSA" "$USER1" "$SOCK_A" uc_rx "$dir" $v >"$O/uc$v.rx" 2>&1 &
	rpid=$!
	BG_PIDS+=("$rpid")
	uc_end "$NSB" "$USER2" "$SOCK_B" uc_tx "$dir" >"$O/uc$v.tx" 2>&1 ||
		{ show "uc_tx (uid $USER2, $NSB)" "$O/uc$v.tx"; show uc_rx "$O/uc$v.rx";
		  fail "the UC sender failed"; }
	wait_exit "$rpid" "$TMO" || fail "the UC receiver did not finish"
	[ "$EXIT_STATUS" -eq 0 ] ||
		{ show "uc_rx (uid $USER1, $NSA)" "$O/uc$v.rx"; fail "the UC receiver's checks failed"; }
	ok "$(sed -n 's/^uc_rx: //p' "$O/uc$v.rx")"
done
daemon_alive "after the UC messages too long"

# Messages longer than the engine's chunk (128 KiB) go in steps: each
# step's packets carry, or take in, its own bytes.
check "a SEND, a WRITE and a READ of ~1 MB each across the wire"
dir=$T/big
mkdir -p "$dir" && chmod 777 "$dir" || fail "mkdir $dir"
uc_end "$NSA" "$USER1" "$SOCK_A" big_rx "$dir" >"$O/big.rx" 2>&1 &
rpid=$!
BG_PIDS+=("$rpid")
uc_end "$NSB" "$USER2" "$SOCK_B" big_tx "$dir" >"$O/big.tx" 2>&1 ||
	{ show "big_tx (uid $USER2, $NSB)" "$O/big.tx"; show big_rx "$O/big.rx"
	  fail "the sender of long messages failed"; }
wait_exit "$rpid" "$TMO" || fail "the receiver of long messages did not finish"
[ "$EXIT_STATUS" -eq 0 ] ||
	{ show "big_rx (uid $USER1, $NSA)" "$O/big.rx"; fail "the long messages' checks failed"; }
ok "$(sed -n 's/^big_rx: //p' "$O/big.rx"); $(sed -n 's/^big_tx: //p' "$O/big.tx")"

if command -v nft >/dev/null 2>&1; then
	seq0=$(counter out_of_seq_request)
	dup0=$(counter duplicate_request)
	ip netns exec "$NSA" nft -f - <<-EOF || fail "nft rules"
	table inet ibvdloss {
		chain in {
			type filter hook input priority 0;
			udp dport 4791 numgen random mod 100 < 2 drop
		}
	}
	EOF
	MIX=$RC_TMO
	stream_across "RC with 2 % of the packets into $NSA dropped"
	MIX="DIRECT_STREAM_UC=1"
	stream_across "UC with 2 % of the packets into $NSA dropped"
	MIX=""
	seq1=$(counter out_of_seq_request)
	dup1=$(counter duplicate_request)
	ip netns exec "$NSA" nft delete table inet ibvdloss
	check "the receiving side saw the losses"
	[ "$((seq1 + dup1))" -gt "$((seq0 + dup0))" ] ||
		fail "out_of_seq_request $seq0 -> $seq1, duplicate_request $dup0 -> $dup1: no retransmission seen"
	ok "out_of_seq_request $seq0 -> $seq1, duplicate_request $dup0 -> $dup1"
else
	log "nftables is not installed: no lossy stream"
fi

# stream_wire SIDE DIR MIX: one end of the stream, the receiving one in A.
stream_wire() {
	if [ "$1" = recv ]; then
		MIX=$3 stream_end "$NSA" "$USER1" "$SOCK_A" recv "$2" "$seed"
	else
		MIX=$3 stream_end "$NSB" "$USER2" "$SOCK_B" send "$2" "$seed"
	fi
}

# The receiving process killed mid-stream: its daemon tears its QPs down,
# and what the sender has in flight meets a host that does not answer:
# each QP's completions are successes, then errors, the first of them a
# retry exceeded (or a flush, when nothing was in flight), never an
# error a responder sends (direct-stream.c, check_send_wc).
check "the receiving end killed mid-stream, 3 rounds"
for round in 1 2 3; do
	seed=$((${DIRECT_STREAM_SEED:-$RANDOM} + round))
	stream_kill_round recv "$T/stream-kill-$round" stream_wire "0.$((round * 3))"
	daemon_alive "after a receiving end was killed"
	pid_running "$PID_B" || fail "the daemon in $NSB died"
done
ok "$(sed -n 's/^stream: every flow failed after the peer died //p' "$O/stream-kill.send")"

# The sending process killed instead: what reached the receiver must be
# whole and in order (a message cut short by its sender's death must not
# complete), and receives may only be flushed after it.
check "the sending end killed mid-stream, 2 rounds"
for round in 1 2; do
	seed=$((${DIRECT_STREAM_SEED:-$RANDOM} + round))
	stream_kill_round send "$T/stream-killsend-$round" stream_wire "0.$((round * 4))"
	daemon_alive "after a sending end was killed"
done
ok "$(sed -n 's/^stream: //p' "$O/stream-kill.recv" | tail -1)"
