#!/bin/bash
# RoCEv2 over a link that reorders and duplicates.  roce-wire.sh's two
# hosts, but joined by relay-helper instead of a veth: a tap device in
# each namespace, the relay forwarding Ethernet frames between them
# unchanged except that, from a fixed seed, it holds some RoCE frames back
# until later ones have passed them and sends some twice (RC and UC ones:
# a UD datagram sent twice is, by design, two datagrams), ACKs and NAKs
# as well as requests.
#
# Debian's pingpongs and perftest's RC tests run across between two
# unprivileged uids, with data checked where they can (-c): every message
# must arrive once and whole (the programs count their completions and
# check their data); so does our stream test (direct-stream.c), RC and UC.  UC messages are one packet each: a reordered packet
# inside a UC message loses the message, as the IBTA says it must.  Then
# the daemons' counters must show what the link did (duplicate requests
# seen and dropped, PSN sequence NAKs sent and received), and the relay's
# own counts must show it reordered and duplicated frames at all.  An RC
# pingpong over the IPv6 link-local GID goes through the same relay too.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns.sh"

for p in ud rc uc srq; do
	need_cmd "/usr/bin/ibv_${p}_pingpong"
done
is_root || skip "network namespaces need root"
[ -c /dev/net/tun ] || skip "no /dev/net/tun"
ibvd_init
O=$T/out

SEED=${IBVD_RELAY_SEED:-4791}
RELAY_PID=""

# netns.sh's wire, with the relay and two taps in place of the veth pair.
wire_netns() {
	local ns i
	ip netns add "$NSA" 2>"$O/netns.err" || { show "ip netns add" "$O/netns.err"; skip "cannot create a network namespace"; }
	NS_MADE=1
	ip netns add "$NSB" || fail "ip netns add $NSB"
	"$T/bin/relay-helper" -s "$SEED" -r 4 -k 2 -w 5 -d 4 -t rc,uc \
		"$NSA" "$VA" "$NSB" "$VB" >"$O/relay.out" 2>&1 &
	RELAY_PID=$!
	BG_PIDS+=("$RELAY_PID")
	for i in $(seq 100); do
		grep -q '^relay: ready' "$O/relay.out" && break
		pid_running "$RELAY_PID" || break
		sleep 0.05
	done
	if ! grep -q '^relay: ready' "$O/relay.out"; then
		wait_exit "$RELAY_PID" 2
		show relay "$O/relay.out"
		[ "$EXIT_STATUS" = 77 ] && skip "no tap devices here"
		fail "the relay did not start"
	fi
	for ns in "$NSA" "$NSB"; do
		ip -n "$ns" link set lo up || fail "lo up in $ns"
	done
	ip -n "$NSA" link set "$VA" up && ip -n "$NSB" link set "$VB" up || fail "taps up"
	ip -n "$NSA" addr add "$IPA/24" dev "$VA" && ip -n "$NSB" addr add "$IPB/24" dev "$VB" ||
		fail "ip addr add"
}

# counter NAME: the sum of roce0/1's counter NAME in both daemons.
counter() {
	local s n=0 v
	for s in "$SOCK_A" "$SOCK_B"; do
		SOCK=$s ibvctl -j statistic show link roce0/1 >"$O/stat.json" 2>&1 ||
			{ show "statistic show" "$O/stat.json"; fail "ibvctl statistic show link roce0/1"; }
		v=$("$PYTHON" - "$O/stat.json" "$1" <<-'EOF'
		import json, sys
		rows = json.load(open(sys.argv[1]))
		print(sum(int(r.get(sys.argv[2], 0)) for r in rows))
		EOF
		) || fail "reading counter $1"
		n=$((n + v))
	done
	printf '%s\n' "$n"
}

# iterations N: the last run's client reported N iterations (perftest).
iterations() {
	local got
	got=$(grep -E "$PT_RE" "$O/$NRUN.client" | awk '{ print $2 }' | head -n 1)
	[ "$got" = "$1" ] || fail "run #$NRUN: $got iterations, not $1"
}

wire_up

NAMES="duplicate_request out_of_seq_request rcvd_seq_err completer_retry_err"
for c in $NAMES; do
	eval "before_$c=\$(counter $c)"
done

# Each pingpong prints its line only once all its completions came in.
across "RC pingpong, 64 KiB (64 packets a message), data checked" "$PP_RE" \
	/usr/bin/ibv_rc_pingpong -g 1 -s 65536 -n 40 -c
across "RC pingpong, 4 KiB, data checked" "$PP_RE" \
	/usr/bin/ibv_rc_pingpong -g 1 -n 200 -c
across "UC pingpong, 1 KiB (one packet a message), data checked" "$PP_RE" \
	/usr/bin/ibv_uc_pingpong -g 1 -s 1024 -n 200 -c
across "UD pingpong, 1 KiB, data checked" "$PP_RE" \
	/usr/bin/ibv_ud_pingpong -g 1 -s 1024 -n 200 -c
across "SRQ pingpong (4 QPs), 4 KiB" "$PP_RE" \
	/usr/bin/ibv_srq_pingpong -g 1 -n 100
if command -v ib_write_bw >/dev/null 2>&1; then
	across "ib_write_bw 64 KiB" "$PT_RE" ib_write_bw -d roce0 -x 1 -s 65536 -n 100
	iterations 100
	across "ib_read_bw 64 KiB" "$PT_RE" ib_read_bw -d roce0 -x 1 -s 65536 -n 100
	iterations 100
	across "ib_atomic_bw" "$PT_RE" ib_atomic_bw -d roce0 -x 1 -n 200
	iterations 200
else
	log "perftest is not installed: no ib_*_bw runs"
fi

# Our stream test through the relay (netns.sh, stream_across): SENDs of
# 1 B to 64 KiB on RC pairs sharing CQs, WRITEs and READs cutting in,
# every byte and each QP's completion order checked; then on UC pairs.
# The relay forwards every frame in user space, so a full window (up to
# 512 packets a QP, each reordering answered by go-back-N) takes longer
# to cross than vt's 16.8 ms ACK timeout: a sender then times out while
# its packets are still queued, and once 8 times in a row on one message
# (RETRY_EXC_ERR, seen in CI).  The stream's senders wait 268 ms instead
# (timeout 16), as a slow path needs; the retries are still counted.
MIX="DIRECT_STREAM_TIMEOUT=16"
stream_across "a stream of mixed SENDs, WRITEs and READs on 3 RC pairs"
# The same with the receiving QPs on one SRQ: each message takes one of
# its WQEs, whatever comes twice or late.
MIX="DIRECT_STREAM_TIMEOUT=16 DIRECT_STREAM_SRQ=1"
stream_across "a stream of mixed SENDs, WRITEs and READs on 3 RC pairs, into an SRQ"
MIX="DIRECT_STREAM_UC=1"
stream_across "a stream of SENDs and WRITEs on 3 UC pairs"
MIX=""

# So far every run was over IPv4, whose ACKs and NAKs are the shortest
# RoCE frames (62 bytes): the relay must have mistreated some of those too.
check "the relay held back or doubled IPv4 ACKs"
n=$(grep -c '^relay: total ' "$O/relay.out")
kill -USR1 "$RELAY_PID"
for _ in $(seq $((TMO * 10))); do
	[ "$(grep -c '^relay: total ' "$O/relay.out")" -gt "$n" ] && break
	sleep 0.1
done
total=$(grep '^relay: total ' "$O/relay.out" | tail -n 1)
acks=$(printf '%s\n' "$total" | sed -n 's/.* acks \([0-9]*\).*/\1/p')
[ "${acks:-0}" -gt 0 ] || fail "no ACK frame mistreated over IPv4: $total"
ok "$acks ACK frames mistreated over IPv4"

# IPv6 through the relay as well: the link-local GID 0 (duplicate address
# detection on the taps was over long ago; waited for if not).
if [ -e /proc/net/if_inet6 ]; then
	for _ in $(seq $((TMO * 10))); do
		[ -z "$(ip -n "$NSA" -6 addr show dev "$VA" tentative)$(ip -n "$NSB" -6 addr show dev "$VB" tentative)" ] && break
		sleep 0.1
	done
	across "RC pingpong over IPv6 (link-local GID 0), 64 KiB, data checked" "$PP_RE" \
		/usr/bin/ibv_rc_pingpong -g 0 -s 65536 -n 20 -c
fi

# What the link did, as the relay counted it.
kill -TERM "$RELAY_PID"
wait_exit "$RELAY_PID" 5 || fail "the relay did not stop"
show relay "$O/relay.out"
total=$(grep '^relay: total ' "$O/relay.out" | tail -n 1)
[ -n "$total" ] || fail "the relay printed no counts"
for N in reordered duplicated; do
	v=$(printf '%s\n' "$total" | sed -n "s/.* $N \([0-9]*\).*/\1/p")
	[ "${v:-0}" -gt 0 ] || fail "the relay $N no frame: $total"
done

# What the daemons saw of it.
summary=""
for c in $NAMES; do
	eval "d=\$(( \$(counter $c) - before_$c ))"
	summary="$summary $c +$d"
	case $c in
	duplicate_request|out_of_seq_request|rcvd_seq_err)
		[ "$d" -gt 0 ] || fail "counter $c did not move ($summary)" ;;
	esac
done
ok "relay:${total#relay: total}"
ok "counters:$summary"
ok "$NRUN runs across a reordering, duplicating link passed"
