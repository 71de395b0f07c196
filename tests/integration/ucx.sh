#!/bin/bash
# UCX over ibverbsd (issue 11): Debian's unmodified UCX 1.13 (ucx-utils)
# through ibverbsd-run, between uid 1001 (server) and uid 1002 (client).
#   - the daemon makes /dev/infiniband/DEV, which UCX requires, and removes
#     it when it stops; with "device_links": false UCX does not list DEV;
#   - ucx_info -d lists rc_verbs and ud_verbs on DEV:1;
#   - ucx_perftest tag_lat, tag_bw, ucp_put_bw, ucp_get with UCX_TLS=rc_v
#     (rc_verbs with ud_verbs for wireup: UCX 1.13 cannot connect rc_verbs
#     alone) and with ud_v; each run ends with its "Final:" line on both
#     sides.  UCX has no other way between the two processes (UCX_TLS
#     names only rc_v or ud_v, and self).  The device's packet counter
#     counts what the engine moves: RC's one-sided operations must show
#     there, while SENDs between two local QPs may all pass through the
#     direct transport's rings, which the engine never sees (UD wireup
#     and all of an am_lat run can), so for those the count is only
#     reported;
#   - with -E sleep (UCX's event mode: each side polls its CQs, finds them
#     empty, arms them and sleeps in poll() of the non-blocking channel
#     fd) tag_lat and tag_bw finish on rc_verbs and ud_verbs: a completion
#     that comes between that last poll and the arm fires the arm, as a
#     NIC's does, also when UCX arms for solicited completions only
#     (UCX_RC_FC_ENABLE=n).  So do ucp_am_bw above the rendezvous
#     threshold, and the one-sided ucp_put_bw and ucp_get on rc_verbs with
#     -o (the responder does not progress: only the requestor sleeps, for
#     its own completions).  Not ucp_put_bw, ucp_put_lat or ucp_get on
#     rc_verbs without -o: the responder sleeps waiting for a WRITE or
#     READ, which completes nothing on its side, on a NIC as here.  On
#     ud_verbs UCX's async thread also polls the CQs, every
#     UCX_UD_VERBS_ASYNC_TIMER_TICK (100 ms), and wakes the worker asleep
#     on UCX's eventfd only from its handler of the channel: a datagram
#     that comes after the arm fires it though that thread's poll takes
#     it, as a NIC's CQE fires whoever polls it.  tag_lat of messages over
#     ud_verbs' 8 KiB segment with a 1 ms tick hung at every run when the
#     library fired nothing for what a poll placed and took at once (and
#     about one run in three under load with the default tick): it runs
#     here with that tick, for a fifth of the iterations;
#   - UCT, below UCP: each transport's own operations, ucx_perftest -d
#     DEV:1 -x rc_verbs or -x ud_verbs: active messages in every layout
#     (short, bcopy, zcopy from several SGEs) on both, and on rc_verbs
#     WRITEs and READs in every layout and the device's 64-bit atomics
#     (add_lat, add_mr, fadd, cswap), each of which must reach the
#     device's port (rdma_recvs); some of them also with -l, one process
#     whose endpoint is connected to its own interface.  ucx_info -d must
#     give rc_verbs the atomics that atomic_cap HCA stands for.
# UCX registers tens of MiB at start, over this machine's 8 MiB
# RLIMIT_MEMLOCK: the daemon runs with "rlimit_memlock": "ignore".
. "$(dirname "$0")/lib.sh"

need_cmd ucx_info ucx_perftest ss
ibvd_init
is_root || skip "needs root to run clients as uids $USER1 and $USER2"
O=$T/out
mkdir -p "$O"
# A name of our own: other tests' daemons make /dev/infiniband/ibvd0.
DEV=ucx$$
LINK=/dev/infiniband/$DEV
ITERS=1000
UCT_ITERS=500
[ -n "$SANITIZERS" ] && ITERS=300 UCT_ITERS=150

check "without device links UCX does not list $DEV"
daemon_start -c "$(middleware_conf "$DEV" false)"
daemon_wait_ready
[ ! -e "$LINK" ] || fail "$LINK exists with device_links false"
run_debian "$USER1" ucx_info -d >"$O/info-nolink" 2>&1 || { show ucx_info "$O/info-nolink"; fail "ucx_info -d"; }
expect_no_grep "Device: $DEV:1" "$O/info-nolink" "ucx_info -d without $LINK"
ok "not listed"
daemon_stop

check "the daemon makes $LINK; ucx_info -d lists rc_verbs and ud_verbs on it"
daemon_start -c "$(middleware_conf "$DEV")"
daemon_wait_ready
[ -L "$LINK" ] && [ -c "$LINK" ] || fail "$LINK is not a link to a character device"
run_debian "$USER1" ucx_info -d >"$O/info" 2>&1 || { show ucx_info "$O/info"; fail "ucx_info -d"; }
for tl in rc_verbs ud_verbs; do
	grep -A1 "Transport: $tl\$" "$O/info" | grep -q "Device: $DEV:1\$" ||
		{ show ucx_info "$O/info"; fail "ucx_info -d lists no $tl on $DEV:1"; }
done
ok "rc_verbs and ud_verbs on $DEV:1"

# UCX takes a verbs device's atomics from atomic_cap: IBV_ATOMIC_HCA, as
# rxe's, gives rc_verbs 64-bit add, fetch-and-add and compare-and-swap
# (all verbs has: no swap, no 32-bit ones).
check "ucx_info -d: rc_verbs on $DEV:1 has the device's 64-bit atomics"
awk -v dev="Device: $DEV:1" '/Transport: |Memory domain: /{ tl = $NF; on = 0; next }
	tl == "rc_verbs" && $0 ~ dev "$" { on = 1; next }
	on && /atomic_/ { sub(/^# */, ""); print }' "$O/info" >"$O/info-atomics"
for op in add fadd cswap; do
	grep -Eq "atomic_$op: +64 bit\$" "$O/info-atomics" ||
		{ show ucx_info "$O/info"; fail "ucx_info -d: rc_verbs on $DEV:1 has no 64-bit $op"; }
done
ok "$(tr -s ' ' <"$O/info-atomics" | tr '\n' ';' | sed 's/;/; /g; s/; $//')"

# rdma_recvs: the RDMA WRITEs, READs and atomics that reached DEV's port
rdma_recvs() {
	ibvctl statistic show link "$DEV/1" | sed -n 's/.* rdma_recvs \([0-9]*\).*/\1/p'
}

# perftest TLS TEST ARGS...: ucx_perftest TEST, server uid 1001, client uid
# 1002, both with UCX_TLS=TLS on DEV:1 (and UCX_ENV, VAR=VALUE words, if
# set).  With NEED_ENGINE=1 in its environment the engine must have
# carried packets of it; with NEED_RDMA=N, N RDMA WRITEs, READs or
# atomics at least must have reached DEV's port.
NRUN=0
perftest() {
	local tls=$1 test=$2 port spid rc_s rc_c s c before after what rdma0 rdma
	shift 2
	NRUN=$((NRUN + 1))
	s=$O/$NRUN.server
	c=$O/$NRUN.client
	what="ucx_perftest -t $test${*:+ $*} (UCX_TLS=$tls${UCX_ENV:+ $UCX_ENV})"
	check "$what"
	port=$(free_port) || exit 1
	before=$(sent_pkts "$DEV")
	rdma0=$(rdma_recvs)
	local env=(env UCX_TLS="$tls" UCX_NET_DEVICES="$DEV:1" ${UCX_ENV:-})
	run_debian "$USER1" "${env[@]}" ucx_perftest -p "$port" -t "$test" -n "$ITERS" "$@" >"$s" 2>&1 &
	spid=$!
	BG_PIDS+=("$spid")
	wait_tcp_listen "$port" "$spid" || { show server "$s"; fail "$what: the server never listened"; }
	run_debian "$USER2" "${env[@]}" ucx_perftest -p "$port" -t "$test" -n "$ITERS" "$@" 127.0.0.1 >"$c" 2>&1
	rc_c=$?
	wait_exit "$spid" "$TMO" && rc_s=$EXIT_STATUS || { term_bg "$spid"; rc_s=124; }
	if [ "$rc_s" -ne 0 ] || [ "$rc_c" -ne 0 ]; then
		show "server (uid $USER1)" "$s"
		show "client (uid $USER2)" "$c"
		fail "$what: server exited $rc_s, client $rc_c"
	fi
	expect_grep "^Final: +$ITERS " "$c" "$what: the client's result"
	after=$(sent_pkts "$DEV")
	[ -z "${NEED_ENGINE:-}" ] || [ "$after" -gt "$before" ] ||
		fail "$what: no packets through the engine of $DEV ($before -> $after)"
	rdma=$(($(rdma_recvs) - rdma0))
	[ "$rdma" -ge "${NEED_RDMA:-0}" ] ||
		fail "$what: $rdma RDMA operations reached $DEV, fewer than $NEED_RDMA"
	ok "$what: $(grep '^Final:' "$c" | tr -s ' '); $((after - before)) packets${NEED_RDMA:+, $rdma RDMA operations}"
}

for test in tag_lat tag_bw; do
	perftest rc_v,self "$test"
done
for test in ucp_put_bw ucp_get; do
	NEED_ENGINE=1 perftest rc_v,self "$test"
done
for test in tag_lat tag_bw ucp_put_bw ucp_get; do
	perftest ud_v,self "$test"
done
perftest rc_v,self tag_lat -E sleep
perftest rc_v,self tag_bw -s 100000 -E sleep
# without flow control UCX arms its receive CQ for solicited completions only
UCX_ENV=UCX_RC_FC_ENABLE=n perftest rc_v,self tag_lat -E sleep
perftest ud_v,self tag_bw -s 100000 -E sleep
ITERS=$((ITERS / 5)) UCX_ENV=UCX_UD_VERBS_ASYNC_TIMER_TICK=1ms \
	perftest ud_v,self tag_lat -s 10000 -E sleep
perftest rc_v,self ucp_am_bw -s 100000 -E sleep
NEED_ENGINE=1 perftest rc_v,self ucp_put_bw -o -E sleep
NEED_ENGINE=1 perftest rc_v,self ucp_get -s 100000 -o -E sleep

# ---- UCT: each transport's own operations ------------------------------
# uct TL TEST ARGS...: the UCT test TEST on transport TL of DEV:1 (UCX_TLS
# plays no part).  ucx_perftest's server runs what its client sends it.
uct() {
	local tl=$1 test=$2
	shift 2
	perftest "$tl" "$test" -d "$DEV:1" -x "$tl" "$@"
}
ITERS=$UCT_ITERS
# active messages in each layout: SENDs, from a copy or from the
# registered buffer itself (iovs of several SGEs)
for layout in short bcopy zcopy; do
	uct rc_verbs am_lat -D "$layout"
	uct ud_verbs am_lat -D "$layout"
done
uct rc_verbs am_bw -D short
uct rc_verbs am_bw -D bcopy -s 4096
uct rc_verbs am_bw -D zcopy -s 1000,2000,3000
uct ud_verbs am_bw -D bcopy -s 4000
uct ud_verbs am_bw -D zcopy -s 100,200,300
# WRITEs and READs: put_lat polls the last byte the peer's WRITE lands
# in; each one reaches the responder's port
NEED_RDMA=$((2 * ITERS)) uct rc_verbs put_lat -D short
NEED_RDMA=$((2 * ITERS)) uct rc_verbs put_lat -D zcopy -s 65536
NEED_RDMA=$ITERS uct rc_verbs put_bw -D bcopy -s 4096
NEED_RDMA=$ITERS uct rc_verbs put_bw -D zcopy -s 1000,2000,3000
NEED_RDMA=$ITERS uct rc_verbs get -D bcopy -s 4096
NEED_RDMA=$ITERS uct rc_verbs get -D zcopy -s 65536
# The device's atomics, which UCP never uses here (it wants 32-bit ones,
# swap, and, or and xor too, on a transport of more than rc_verbs' 256
# endpoints, else it makes its own from active messages).  add_lat's
# sides take turns adding 1 to each other's counter and wait for the sum
# to reach the next value, so a wrong sum never finishes.
NEED_RDMA=$((2 * ITERS)) uct rc_verbs add_lat
NEED_RDMA=$ITERS uct rc_verbs add_mr
NEED_RDMA=$ITERS uct rc_verbs fadd
NEED_RDMA=$ITERS uct rc_verbs cswap

# uct_loopback TL TEST ARGS...: ucx_perftest -l, one process (uid 1001)
# whose endpoint is connected to its own interface: both QPs in one
# context.  NEED_RDMA as in perftest.
uct_loopback() {
	local tl=$1 test=$2 out what rdma0 rdma
	shift 2
	NRUN=$((NRUN + 1))
	out=$O/$NRUN.loopback
	what="ucx_perftest -l -t $test -x $tl${*:+ $*}"
	check "$what"
	rdma0=$(rdma_recvs)
	run_debian "$USER1" env UCX_NET_DEVICES="$DEV:1" timeout -k 2 "$TMO" ucx_perftest -l \
		-t "$test" -n "$ITERS" -d "$DEV:1" -x "$tl" "$@" >"$out" 2>&1 ||
		{ show ucx_perftest "$out"; fail "$what"; }
	expect_grep "^Final: +$ITERS " "$out" "$what"
	rdma=$(($(rdma_recvs) - rdma0))
	[ "$rdma" -ge "${NEED_RDMA:-0}" ] ||
		fail "$what: $rdma RDMA operations reached $DEV, fewer than $NEED_RDMA"
	ok "$what: $(grep '^Final:' "$out" | tr -s ' ')${NEED_RDMA:+; $rdma RDMA operations}"
}
uct_loopback rc_verbs am_bw -D zcopy -s 1000,2000,3000
uct_loopback ud_verbs am_bw -D zcopy -s 100,200,300
NEED_RDMA=$ITERS uct_loopback rc_verbs put_bw -D zcopy -s 1000,2000,3000
NEED_RDMA=$ITERS uct_loopback rc_verbs get -D zcopy -s 65536
NEED_RDMA=$ITERS uct_loopback rc_verbs fadd
NEED_RDMA=$ITERS uct_loopback rc_verbs cswap
daemon_alive "after UCX"

check "the link goes with the daemon"
daemon_stop
[ ! -e "$LINK" ] && [ ! -L "$LINK" ] || fail "$LINK left behind"
ok "$LINK removed"
