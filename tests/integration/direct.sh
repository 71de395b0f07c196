#!/bin/bash
# The direct transport (common/transit.h): SENDs between two RC (or UC) QPs
# of one daemon, and datagrams between two UD QPs, through transit rings
# their libraries share, with no engine thread in between.
#  1. direct-helper's suite (tests/integration/direct.c) as uid $USER1:
#     sizes up to 64 KiB with every byte checked, immediate data, SGE lists
#     and inline data; RC order against RDMA WRITEs both ways (also for a
#     receiver that watches memory and never polls); SENDs waiting for
#     late receives; a receiver that never polls; completion events
#     (solicited-only arms, sleeping senders and receivers, one event per
#     completion as apps that count them expect); the errors the
#     engine makes (too long, bad keys, flush); a receiver's process killed
#     with SENDs in the ring; a sender writing garbage over the rings
#     (on UD it must not stop the receiving QP); UD pairs: sizes to the
#     MTU after the GRH slot, Q_Keys, drops, a third sender; and, as
#     root, a controlled Q_Key forged in the rings by another uid.  One
#     uid's 300 RC pairs: 256 get rings (the per-uid cap), the others
#     the engine.
#  2. Counting, not timing: 20,000 ping-pong SENDs, and as many RDMA
#     WRITEs with immediate, cost the engine fewer than one turn per 100
#     messages through the rings (its "turns" counter, ibvctl statistic
#     show engine), and SENDs at least one per message with "engine": {
#     "direct": false }, which also maps no rings.
#  3. Debian's perftest (ib_send_lat, also with events and over UC and
#     UD, ib_send_bw; many -e runs are direct-events.sh's), ibv_rc_pingpong (-c: data checked; busy polling,
#     with events, 64 KiB), ibv_uc_pingpong and ibv_ud_pingpong between
#     uids $USER1 and $USER2 through the rings.
#  4. Streams of SENDs of mixed sizes, RDMA WRITEs and READs cutting in
#     (into private memory, or shared file memory by grants), on three
#     pairs sharing two CQs, to a receiver that stalls at random
#     (direct-stream.c): SENDs move between the ring and the SQ, receives
#     are placed by the library and by the engine, and every QP's
#     completions come in order with their bytes; also on an SRQ and on
#     UC pairs (which drop what finds no receive); in one process, then
#     between uids $USER1 and $USER2, then with the receiving process
#     killed early (every completion once, successes then errors), and
#     the sending one (what came is whole and in order); and under a
#     bandwidth limit set and lifted meanwhile (SENDs moving between the
#     rings and the engine).
# The transport is on by default ("direct" in ibverbsd.conf(5)); this test
# says which it wants.
. "$(dirname "$0")/lib.sh"

ibvd_init
O=$T/out
HELPER=$T/bin/direct-helper
[ -x "$HELPER" ] || fail "tests/integration/direct-helper not built"
export VT_TMUL=$TMUL

# conf DIRECT: the default config with "engine": { "direct": DIRECT }.
conf() {
	local out="$T/direct-$1.conf"

	"$PYTHON" - "$(default_conf)" "$out" "$1" <<-'EOF' || fail "cannot write $out"
	import json, sys
	src, out, direct = sys.argv[1:4]
	with open(src) as f:
	    cfg = json.load(f)
	cfg.setdefault("engine", {})["direct"] = direct == "true"
	with open(out, "w") as f:
	    json.dump(cfg, f, indent=2)
	EOF
	chmod 644 "$out"
	printf '%s\n' "$out"
}

# engine_count NAME: an engine counter so far ("turns", "wqes"), all
# threads summed.
turns() { engine_count turns; }

daemon_start -c "$(conf true)"
daemon_wait_ready

check "direct-helper's suite as uid $USER1"
TMO=$((TMO * 6)) run_ours "$USER1" "$HELPER" >"$O/suite" 2>&1
rc=$?
show "direct-helper" "$O/suite"
[ "$rc" -eq 0 ] || fail "the direct suite failed (exit $rc): $(grep -cE ':[EF]:' "$O/suite") failing cases"
expect_grep '^100%: Checks: [1-9][0-9]*, Failures: 0, Errors: 0$' "$O/suite" "Check summary"
daemon_alive "after the direct suite"
ok "$(grep -E '^[0-9]+%: Checks' "$O/suite"); $(sed -n 's/^hostile: //p' "$O/suite" | paste -sd ';')"

# As root: a receiver whose UD QP holds a controlled Q_Key (root only)
# takes root's datagrams with it from the rings, and none that uid $USER1
# writes into the rings by hand with that Q_Key.  Then a library that
# never ends its copy (rdma_lease_held) is waited for, then left, with a
# word in the log; once: its peer had no grant (and the main suite's
# rdma_lease_held_without_grant's pair none either), so is not waited for.
# Its uid (root here: the main suite's needs its grants) gets none for a
# while after, in other processes too.
check "direct-helper's root cases, the forger as uid $USER1"
TMO=$((TMO * 2)) run_ours 0 "$HELPER" root "$USER1" >"$O/root" 2>&1
rc=$?
show "direct-helper root" "$O/root"
[ "$rc" -eq 0 ] || fail "direct-helper's root cases failed (exit $rc)"
expect_grep '^100%: Checks: [1-9][0-9]*, Failures: 0, Errors: 0$' "$O/root" "Check summary"
expect_grep "still copied under a revoked grant after [0-9]+ ms; going on" \
	"$DAEMON_LOG" "the daemon's warning for a lease held too long"
held=$(grep -cE "still copied under a revoked grant" "$DAEMON_LOG")
[ "$held" -eq 1 ] || fail "$held waits for a lease held too long, want 1 (libraries without a grant were waited for)"
expect_grep "uid 0: no grants of one-sided direct access for 10 s" \
	"$DAEMON_LOG" "the daemon's word on the uid"
ok "$(grep -E '^[0-9]+%: Checks' "$O/root")"

# A process granted its own peer's MR exits with both leases held (as one
# killed mid-copy): its context goes without a wait for libraries that
# are gone, nobody is marked for it, and the daemon serves on.
check "a process leaves with its leases held (uid $USER2)"
run_ours "$USER2" "$HELPER" exit-holding-lease >"$O/exit-lease" 2>&1 ||
	{ show "exit-holding-lease" "$O/exit-lease"; fail "exit-holding-lease failed"; }
expect_grep '^exit-holding-lease: leaving with both leases held$' "$O/exit-lease" "exit-holding-lease"
daemon_alive "after a process left with its leases held"
for _ in $(seq 100); do
	ibvctl -j resource show ctx >"$O/ctx.json" 2>&1 || fail "ibvctl resource show ctx"
	grep -q '[^][[:space:]]' "$O/ctx.json" || break
	sleep 0.1
done
grep -q '[^][[:space:]]' "$O/ctx.json" && { show "contexts" "$O/ctx.json"; fail "the context is still there"; }
held=$(grep -cE "still copied under a revoked grant" "$DAEMON_LOG")
[ "$held" -eq 1 ] || fail "$held waits for a lease held too long, want still 1 (a gone context was waited for)"
! grep -q "uid $USER2: no grants" "$DAEMON_LOG" || fail "uid $USER2 was marked for a context that is gone"
ok "its context went, nobody waited for or marked"

# One context, 8 pairs granted one MR, every lease held, the MR
# deregistered: every lease is voided first and all are waited for
# together, so the revocation waits once (not 8 times 20 ms, with every
# tenant stalled) and the uid offends once, though each of the 8 is
# logged.  Uid 1005: it is barred from grants for a while after.
check "one deregistration against 8 held leases (uid 1005)"
run_ours 1005 "$HELPER" many-leases-held >"$O/many-leases" 2>&1 ||
	{ show "many-leases-held" "$O/many-leases"; fail "many-leases-held failed"; }
expect_grep '^many-leases-held: 8 pairs' "$O/many-leases" "many-leases-held"
daemon_alive "after 8 held leases"
held=$(grep -cE "still copied under a revoked grant" "$DAEMON_LOG")
[ "$held" -eq 9 ] || fail "$((held - 1)) warnings for the 8 held leases, want 8"
expect_grep 'uid 1005: no grants .*held a revoked lease 1 times' "$DAEMON_LOG" "one offence for one revocation"
! grep -q 'uid 1005: no grants .*held a revoked lease 2 times' "$DAEMON_LOG" ||
	fail "one revocation counted as several offences (one wait each?)"
ok "$(sed -n 's/^many-leases-held: //p' "$O/many-leases"); one wait"

# Two pairs of one context granted one MR; the newer one's leases held,
# the older one's library beginning a long copy once the deregistration
# has begun: every lease is voided before any is waited for, so the copy
# finds its grant revoked (or, begun first, is waited for), and never
# runs past the return of ibv_dereg_mr.  Uid 1006 (barred after).
check "a copy that begins during a revocation (uid 1006)"
run_ours 1006 "$HELPER" honest-copy-waited >"$O/honest" 2>&1 ||
	{ show "honest-copy-waited" "$O/honest"; fail "honest-copy-waited failed"; }
expect_grep '^honest-copy-waited: ' "$O/honest" "honest-copy-waited"
ok "$(sed -n 's/^honest-copy-waited: //p' "$O/honest")"

check "one uid's 300 RC pairs: 256 get transit rings, the rest the engine"
# About 4,000 requests (each QP made, connected in three steps and
# destroyed, each pair's rings fetched): 1 to 2 s here, but at the 4.5 ms
# a request limits.sh saw on a loaded CI guest, 18 s, one command's 20 s
# all but gone (it was killed there once, in its destroys).  Three times
# that bound: the count, not the time, is what this checks.
TMO=$((TMO * 3)) run_ours "$USER1" "$HELPER" pair-cap >"$O/pair-cap" 2>&1 ||
	{ show "pair-cap" "$O/pair-cap"; fail "pair-cap failed"; }
daemon_alive "after 300 pairs"
ok "$(sed -n 's/^pair-cap: //p' "$O/pair-cap")"

# perftest's -e: one completion channel for both CQs, one poll per event
# (an event with no completion behind it fails it, or hangs it);
# ibv_rc_pingpong -c checks the data: busy polling, with events, 64 KiB.
# UC pairs go on the rings too.  A UD pair across uids has no wake-up
# pairs (the engine wakes both sides' sleepers): ib_send_lat -c UD -e
# sleeps on its send CQ too.
for t in "ib_send_lat -n 1000" "ib_send_lat -e -n 1000" \
	 "ib_send_lat -e --use-srq -n 1000" "ib_send_bw -n 2000" \
	 "ibv_rc_pingpong -c -n 5000" "ibv_rc_pingpong -c -n 2000 -e" \
	 "ibv_rc_pingpong -c -n 500 -s 65536" "ib_send_lat -c UC -n 1000" \
	 "ibv_uc_pingpong -c -n 2000 -e" "ib_send_lat -c UD -n 1000" \
	 "ib_send_lat -c UD -e -n 1000" "ibv_ud_pingpong -n 2000 -e"; do
	[ -x "/usr/bin/${t%% *}" ] || continue
	check "Debian's $t between uids $USER1 and $USER2"
	# shellcheck disable=SC2086 # words
	line=$(debian_pair $t) || exit 1
	ok "$line"
done

# Sleepers woken by their peers' libraries (common/transit.h, "Blocking"):
# a ping-pong on completion events needs no engine turn per message (one
# each before: the engine placed each SEND for the sleeping receiver and
# sent both events).  The engine still comes in when a sleeper waited
# long or a receive queue was empty when its CQ was armed, hence some
# (ibv_rc_pingpong: 100 to 500 on a quiet machine; a loaded one, whose
# sleepers wake late, more).  Half the old cost is the bound.
for t in "ib_send_lat -e -n 5000" "ibv_rc_pingpong -c -n 5000 -e"; do
	[ -x "/usr/bin/${t%% *}" ] || continue
	check "Debian's $t between uids $USER1 and $USER2: 10,000 SENDs, sleepers woken without the engine"
	t0=$(turns)
	# shellcheck disable=SC2086 # words
	line=$(debian_pair $t) || exit 1
	n=$(($(turns) - t0))
	[ "$n" -lt 5000 ] || fail "$n engine turns for $t's 10,000 SENDs on events"
	ok "$line; $n engine turns"
done

if [ -x /usr/bin/ibv_uc_pingpong ]; then
	check "Debian's ibv_uc_pingpong -c -n 5000 between uids $USER1 and $USER2: 10,000 SENDs on the rings"
	w0=$(engine_count wqes)
	line=$(debian_pair ibv_uc_pingpong -c -n 5000) || exit 1
	n=$(($(engine_count wqes) - w0))
	[ "$n" -lt 100 ] || fail "the engine ran $n WQEs of ibv_uc_pingpong's 10,000 SENDs"
	ok "$line; the engine ran $n WQEs"
fi

# UD: a QP pairs with the first local UD QP it sends to (it asks at its
# first send, which the engine carries, as it may the first few); with
# -g, through AHs with a GRH, which the receiving library makes.
if [ -x /usr/bin/ibv_ud_pingpong ]; then
	for g in "" "-g 0"; do
		check "Debian's ibv_ud_pingpong -n 5000${g:+ $g} between uids $USER1 and $USER2: 10,000 datagrams on the rings"
		w0=$(engine_count wqes)
		# shellcheck disable=SC2086 # $g is zero or two words
		line=$(debian_pair ibv_ud_pingpong -n 5000 $g) || exit 1
		n=$(($(engine_count wqes) - w0))
		[ "$n" -lt 100 ] || fail "the engine ran $n WQEs of ibv_ud_pingpong${g:+ $g}'s 10,000 SENDs"
		ok "$line; the engine ran $n WQEs"
	done
fi

# udaddy's server posts every receive before its peer sends and never
# posts again, so its library meets the rings only by polling its CQ
# (ring.h, direct_moves; the suite's maps_at_poll and ud_maps_at_poll
# check that).  How many of the client's datagrams take them is a race
# between its burst of 1,000 sends and the server's first poll (1 engine
# WQE here, 1,000 under the sanitizers): reported, not judged.
if [ -x /usr/bin/udaddy ]; then
	check "Debian's udaddy -C 1000 between uids $USER1 and $USER2"
	w0=$(engine_count wqes)
	run_debian "$USER1" /usr/bin/udaddy -C 1000 >"$O/uda.server" 2>&1 &
	spid=$!
	BG_PIDS+=("$spid")
	for _ in $(seq $((100 * TMUL))); do
		ibvctl resource show cm_id 2>/dev/null | grep -q 'state LISTEN ps UDP.*:7174 ' && break
		sleep 0.1
	done
	run_debian "$USER2" /usr/bin/udaddy -s 127.0.0.1 -C 1000 >"$O/uda.client" 2>&1 ||
		{ show client "$O/uda.client"; show server "$O/uda.server"; fail "udaddy client failed"; }
	wait_exit "$spid" "$TMO" || fail "the udaddy server did not finish"
	[ "$EXIT_STATUS" -eq 0 ] || { show server "$O/uda.server"; fail "the udaddy server failed"; }
	expect_grep '^data transfers complete' "$O/uda.client" "udaddy client"
	n=$(($(engine_count wqes) - w0))
	ok "2,000 datagrams, the engine ran $n WQEs"
fi

# One-sided direct access (common/lease.h): WRITEs and READs into a peer's
# MR on shared file memory are its library's own memcpy when both run as
# one uid, and the engine's otherwise.  Counted in the engine's WQEs.
if [ -x /usr/bin/ib_write_lat ]; then
	for t in "ib_write_lat -n 2000 --mmap=@SHM" "ib_read_lat -n 2000 --mmap=@SHM" \
		 "ib_write_bw -s 65536 -n 2000 --mmap=@SHM"; do
		check "Debian's ${t%@SHM}FILE, both as uid $USER1: no WQE for the engine"
		w0=$(engine_count wqes)
		# shellcheck disable=SC2086 # words
		line=$(CLIENT_USER=$USER1 debian_pair $t) || exit 1
		n=$(($(engine_count wqes) - w0))
		[ "$n" -eq 0 ] || fail "the engine ran $n WQEs of ${t%% *}"
		ok "$line; the engine ran $n WQEs"
	done
	check "Debian's ib_write_lat -n 2000 --mmap=FILE between uids $USER1 and $USER2: all by the engine"
	w0=$(engine_count wqes)
	line=$(debian_pair ib_write_lat -n 2000 --mmap=@SHM) || exit 1
	n=$(($(engine_count wqes) - w0))
	[ "$n" -ge 4000 ] || fail "the engine ran only $n WQEs of 2 x 2000 WRITEs between two uids"
	ok "$line; the engine ran $n WQEs"
fi

# fault_handed_on SIG NUMBER ASAN-NAME: after a grant, a fault of the
# app's own kills it as it would have, or runs the app's handler.
fault_handed_on() {
	local sig=$1 num=$2 asan=$3 rc
	check "a fault of the app's own after a grant: the library's $sig handler hands it on"
	run_ours "$USER1" "$HELPER" "$sig" default >"$O/$sig-default" 2>&1
	rc=$?
	if [ -n "${SANITIZERS:-}" ]; then
		# the handler before ours is AddressSanitizer's: it reports the fault
		expect_grep "AddressSanitizer: $asan" "$O/$sig-default" "the sanitizer's $sig report"
	else
		[ "$rc" -eq $((128 + num)) ] || { show "$sig" "$O/$sig-default"; fail "exit $rc, not killed by $sig ($((128 + num)))"; }
	fi
	expect_grep "^$sig: touching\$" "$O/$sig-default" "$sig default"
	! grep -q survived "$O/$sig-default" || fail "the fault was swallowed"
	run_ours "$USER1" "$HELPER" "$sig" app >"$O/$sig-app" 2>&1
	rc=$?
	[ "$rc" -eq 3 ] || { show "$sig" "$O/$sig-app"; fail "exit $rc, not the app's handler's 3"; }
	expect_grep "^$sig: the app's handler\$" "$O/$sig-app" "$sig app"
	# a one-shot handler (SA_RESETHAND) runs once; the fault then kills
	run_ours "$USER1" "$HELPER" "$sig" once >"$O/$sig-once" 2>&1
	rc=$?
	[ "$(grep -c "^fault: the app's one-shot handler\$" "$O/$sig-once")" -eq 1 ] ||
		{ show "$sig" "$O/$sig-once"; fail "the one-shot handler did not run exactly once"; }
	if [ -z "${SANITIZERS:-}" ]; then
		[ "$rc" -eq $((128 + num)) ] || { show "$sig" "$O/$sig-once"; fail "exit $rc after the one-shot handler, not killed by $sig"; }
	fi
	ok "killed by $sig without a handler, the app's handler with one, a one-shot one once"
}
fault_handed_on sigbus 7 BUS
fault_handed_on sigsegv 11 SEGV

N=20000
# pingpong direct|engine [send|write_imm|srq|ud]: the engine turns $N
# ping-pong SENDs (or RDMA WRITEs with immediate, SENDs into an SRQ,
# datagrams) cost.  Its output is the count: what goes wrong goes to stderr.
pingpong() {
	local t0 t1 rings=1 op=${2:-send}
	[ "$1" = engine ] && rings=0
	t0=$(turns)
	TMO=$((TMO * 3)) run_ours "$USER1" env DIRECT_RINGS=$rings DIRECT_PINGPONG="$op" \
		"$HELPER" pingpong "$N" >"$O/pp-$1-$op" 2>&1 ||
		{ show pingpong "$O/pp-$1-$op" >&2; fail "pingpong ($1, $op) failed"; }
	expect_grep "^pingpong: $N messages, 0 received before their sender's completion$" \
		"$O/pp-$1-$op" "pingpong ($1, $op)" >&2
	t1=$(turns)
	echo $((t1 - t0))
}

check "$N SENDs through the rings: fewer than $((N / 100)) engine turns"
n=$(pingpong direct) || exit 1
[ "$n" -lt $((N / 100)) ] || fail "$n engine turns for $N SENDs through the rings"
ok "$n engine turns for $N SENDs"

check "$N RDMA WRITEs with immediate through the rings: fewer than $((N / 100)) engine turns"
n=$(pingpong direct write_imm) || exit 1
[ "$n" -lt $((N / 100)) ] || fail "$n engine turns for $N WRITE_WITH_IMMs through the rings"
ok "$n engine turns for $N WRITE_WITH_IMMs"

check "$N SENDs into an SRQ through the rings: fewer than $((N / 100)) engine turns"
n=$(pingpong direct srq) || exit 1
[ "$n" -lt $((N / 100)) ] || fail "$n engine turns for $N SENDs into an SRQ through the rings"
ok "$n engine turns for $N SENDs into an SRQ"

check "$N datagrams through the rings: fewer than $((N / 100)) engine turns"
n=$(pingpong direct ud) || exit 1
[ "$n" -lt $((N / 100)) ] || fail "$n engine turns for $N datagrams through the rings"
ok "$n engine turns for $N datagrams"

# A tenant held to a bandwidth limit sends every SEND through the engine,
# which charges it, from the moment the limit is set.
check "a bandwidth limit set halfway through: the rest of the SENDs take the engine"
rm -f "$T/go"
t0=$(turns)
run_ours "$USER1" env DIRECT_HALFWAY="$T/go" "$HELPER" pingpong 4000 >"$O/pp-limit" 2>&1 &
ppid=$!
BG_PIDS+=("$ppid")
for _ in $(seq $((100 * TMUL))); do
	grep -q '^halfway$' "$O/pp-limit" && break
	sleep 0.1
done
grep -q '^halfway$' "$O/pp-limit" || { show pingpong "$O/pp-limit"; fail "pingpong never got halfway"; }
t1=$(turns)
ibvctl limit set uid "$USER1" bandwidth=1g >"$O/set" 2>&1 ||
	{ show "limit set" "$O/set"; fail "limit set uid $USER1 bandwidth=1g"; }
touch "$T/go"
wait_exit "$ppid" "$TMO" || fail "pingpong did not finish after the limit was set"
[ "$EXIT_STATUS" -eq 0 ] || { show pingpong "$O/pp-limit"; fail "pingpong under a limit failed"; }
t2=$(turns)
[ $((t1 - t0)) -lt 100 ] || fail "$((t1 - t0)) engine turns for the first 2000 SENDs, before the limit"
[ $((t2 - t1)) -ge 2000 ] || fail "only $((t2 - t1)) engine turns for 2000 SENDs under a limit: did they go past the engine?"
ok "$((t1 - t0)) engine turns before the limit, $((t2 - t1)) after, for 2000 SENDs each"

check "the limit lifted: SENDs take the rings again"
ibvctl limit set uid "$USER1" bandwidth=max >"$O/set" 2>&1 ||
	{ show "limit set" "$O/set"; fail "limit set uid $USER1 bandwidth=max"; }
n=$(pingpong direct) || exit 1
[ "$n" -lt $((N / 100)) ] || fail "$n engine turns for $N SENDs after the limit was lifted"
ok "$n engine turns for $N SENDs"

# A limit set, lifted and set again while a stream runs: its SENDs move
# from the rings to the engine and back, with WRITEs and READs between
# them and three QPs' completions in two CQs; each QP's must stay in
# order, every byte where it belongs.
check "a bandwidth limit set, lifted and set again under a stream"
run_ours "$USER1" "$HELPER" stream 6 "${DIRECT_STREAM_SEED:-$RANDOM}" 3 \
	>"$O/stream-limit" 2>&1 &
spid=$!
BG_PIDS+=("$spid")
for bw in 100m max 1g; do
	sleep 1.5
	ibvctl limit set uid "$USER1" bandwidth=$bw >"$O/set" 2>&1 ||
		{ show "limit set" "$O/set"; fail "limit set uid $USER1 bandwidth=$bw"; }
done
wait_exit "$spid" $((TMO * 3)) || fail "the stream under a limit did not finish"
[ "$EXIT_STATUS" -eq 0 ] || { show stream "$O/stream-limit"; fail "the stream under a changing limit failed"; }
ibvctl limit set uid "$USER1" bandwidth=max >"$O/set" 2>&1 ||
	{ show "limit set" "$O/set"; fail "limit set uid $USER1 bandwidth=max"; }
ok "$(sed -n 's/^stream: //p' "$O/stream-limit" | tail -1)"

check "SENDs that took the SQ while the ring was full go on the ring once it has room"
w0=$(engine_count wqes)
TMO=$((TMO * 3)) run_ours "$USER1" "$HELPER" takeback >"$O/takeback" 2>&1 ||
	{ show takeback "$O/takeback"; fail "takeback failed"; }
expect_grep '^takeback: [0-9]+ messages$' "$O/takeback" "takeback"
n=$(($(engine_count wqes) - w0))
# the stream's 100 SENDs, of which some 37 went to the SQ: none by the engine
[ "$n" -eq 0 ] || fail "the engine ran $n WQEs of the stream"
ok "$(sed -n 's/^takeback: //p' "$O/takeback"), the engine ran $n WQEs"

# stream_counts FILE: $sends, and $one (its WRITEs and READs), from a
# sending end's last line.
stream_counts() {
	local w r

	read -r sends w r < <(sed -nE \
		's/^stream: ([0-9]+) sends, ([0-9]+) writes, ([0-9]+) reads.*/\1 \2 \3/p' "$1")
	one=$((w + r))
}

# Receives placed by the library and by the engine, SENDs moving between
# the ring and the SQ, several QPs' completions in one CQ: each QP's must
# come in order, with their bytes.
# Six mixes: a spinning thread beside them; none; none, with the
# receiver on an extended CQ sleeping on completion events; WRITEs and
# READs into shared file memory, which the library does itself; the
# receiving QPs on one SRQ (the libraries and the engine take turns at
# it; checked by content); UC pairs, which drop what finds no receive
# (gaps allowed, order checked).
for mix in "DIRECT_STREAM_CROWD=1" "DIRECT_STREAM_CROWD=0" \
	   "DIRECT_STREAM_CROWD=0 DIRECT_STREAM_CQ_EX=1 DIRECT_STREAM_EVENTS=1" \
	   "DIRECT_STREAM_CROWD=1 DIRECT_STREAM_GRANTED=1" \
	   "DIRECT_STREAM_CROWD=1 DIRECT_STREAM_SRQ=1" \
	   "DIRECT_STREAM_CROWD=1 DIRECT_STREAM_UC=1"; do
	check "streams on 3 pairs sharing CQs to a receiver that stalls at random, WRITEs and READs cutting in (${mix//DIRECT_STREAM_/})"
	w0=$(engine_count wqes)
	# shellcheck disable=SC2086 # one word per variable
	TMO=$((TMO * 3)) run_ours "$USER1" env $mix \
		"$HELPER" stream "${DIRECT_STREAM_SECS:-5}" "${DIRECT_STREAM_SEED:-$RANDOM}" 3 \
		>"$O/stream" 2>&1 || { show stream "$O/stream"; fail "the stream failed"; }
	expect_grep '^stream: [0-9]+ sends, [0-9]+ writes, [0-9]+ reads \(seed [0-9]+\)$' \
		"$O/stream" "stream"
	case $mix in
	*EVENTS=1*) expect_grep '^stream: [1-9][0-9]* completion events$' "$O/stream" \
			"the receiver slept on its channel" ;;
	esac
	n=$(($(engine_count wqes) - w0))
	stream_counts "$O/stream"
	# WRITEs and READs on private memory are the engine's, on shared file
	# memory mostly the library's; SENDs went on the ring too
	case $mix in
	*GRANTED=1*) least=0 most=$((one + sends - 1)) ;;
	*) least=$one most=$((one + sends - 1)) ;;
	esac
	[ "$n" -ge "$least" ] && [ "$n" -le "$most" ] ||
		fail "the engine ran $n WQEs for $one WRITEs and READs and $sends SENDs"
	ok "$(sed -n 's/^stream: //p' "$O/stream" | tail -1), the engine ran $n WQEs"
done

# The same between two processes of two uids: each library sees one end.
# Both sleep on completion events when they have nothing to do.
check "streams on 3 pairs from uid $USER1 to uid $USER2, WRITEs and READs cutting in, events"
xdir=$T/stream-x
mkdir -p "$xdir" && chmod 777 "$xdir" || fail "mkdir $xdir"
seed=${DIRECT_STREAM_SEED:-$RANDOM}
TMO=$((TMO * 3)) run_ours "$USER2" env DIRECT_STREAM_EVENTS=1 \
	DIRECT_STREAM_SIDE=recv DIRECT_STREAM_DIR="$xdir" \
	"$HELPER" stream "${DIRECT_STREAM_SECS:-5}" "$seed" 3 >"$O/stream-recv" 2>&1 &
rpid=$!
BG_PIDS+=("$rpid")
TMO=$((TMO * 3)) run_ours "$USER1" env DIRECT_STREAM_EVENTS=1 \
	DIRECT_STREAM_SIDE=send DIRECT_STREAM_DIR="$xdir" \
	"$HELPER" stream "${DIRECT_STREAM_SECS:-5}" "$seed" 3 >"$O/stream-send" 2>&1 ||
	{ show sender "$O/stream-send"; show receiver "$O/stream-recv"; fail "the sending end failed"; }
wait_exit "$rpid" "$TMO" || fail "the receiving end did not finish"
[ "$EXIT_STATUS" -eq 0 ] || { show receiver "$O/stream-recv"; fail "the receiving end failed"; }
sends=$(sed -nE 's/^stream: ([0-9]+) sends.*/\1/p' "$O/stream-send")
got=$(sed -nE 's/^stream: ([0-9]+) received.*/\1/p' "$O/stream-recv")
[ -n "$sends" ] && [ "$sends" -gt 0 ] && [ "$got" = "$sends" ] ||
	fail "sent ${sends:-?}, received ${got:-?}"
ok "$(sed -n 's/^stream: //p' "$O/stream-send" | tail -1); all received"

# stream_local SIDE DIR MIX: one end of a 3 s stream, the sending end as
# uid $USER1, the receiving one as $USER2.
stream_local() {
	local uid=$USER1

	[ "$1" = recv ] && uid=$USER2
	# shellcheck disable=SC2086 # one word per variable
	run_ours "$uid" env $3 DIRECT_STREAM_SIDE="$1" DIRECT_STREAM_DIR="$2" \
		"$HELPER" stream 3 "$seed" 3
}

# The receiving process killed early, as the pairs form and fill: each
# QP's completions at the sender are successes, then errors, in order,
# each once (a SEND the engine had started before its QP was paired
# completed twice: the library took it to the ring as well).
check "the receiving end killed mid-stream: every completion once, in order, errors last"
# Two spinners crowd the CPUs, so that pairs form while the engine is late
# (the duplicate above showed in 4 rounds of 10 with them, none without).
spinners=()
for _ in 1 2; do
	timeout $((40 * TMUL)) sh -c 'while :; do :; done' &
	spinners+=("$!")
	BG_PIDS+=("$!")
done
for round in 1 2 3 4 5; do
	# a fresh daemon each round: its engine asleep as the pairs form
	daemon_stop
	daemon_start -c "$(conf true)"
	daemon_wait_ready
	seed=$((${DIRECT_STREAM_SEED:-$RANDOM} + round))
	stream_kill_round recv "$T/stream-kill-$round" stream_local "0.$((round % 5))"
done
ok "5 rounds: $(sed -n 's/^stream: every flow failed after the peer died //p' "$O/stream-kill.send")"

# The sending process killed instead, beside the same spinners: what the
# receiver got must be whole and in order (a message half written into
# the ring when its writer died must not show), and receives may only be
# flushed after it; on the rings, with events, and on an SRQ.
check "the sending end killed mid-stream: what came is whole and in order"
killsend_mixes=(DIRECT_STREAM_CROWD=1 DIRECT_STREAM_EVENTS=1 DIRECT_STREAM_SRQ=1)
for round in 1 2 3; do
	daemon_stop
	daemon_start -c "$(conf true)"
	daemon_wait_ready
	seed=$((${DIRECT_STREAM_SEED:-$RANDOM} + round))
	stream_kill_round send "$T/stream-killsend-$round" stream_local \
		"0.$((round * 3))" "${killsend_mixes[round - 1]}"
	daemon_alive "after a sending end was killed"
done
kill "${spinners[@]}" 2>/dev/null
ok "3 rounds: $(sed -n 's/^stream: //p' "$O/stream-kill.recv" | tail -1)"
daemon_stop

# pingpong also looks at the sender's CQ once as each message arrives:
# its completion must be there, as a NIC's ACK is on its way before the
# responder's app sees the message (the engine pushed the receive CQE
# first, and an answer could overtake it: 573 of 20,000 SENDs and 14,296
# of 20,000 WRITEs with immediate before the receive CQE waited; into an
# SRQ, 0 to 9,522 of 20,000 in six runs before it waited there too).
check "\"direct\": false: the engine carries them, one turn each at least, each sender's completion before its receive"
daemon_start -c "$(conf false)"
daemon_wait_ready
n=$(pingpong engine) || exit 1
[ "$n" -ge "$N" ] || fail "only $n engine turns for $N SENDs without rings: did they go direct?"
pingpong engine write_imm >/dev/null || exit 1
pingpong engine srq >/dev/null || exit 1
ok "$n engine turns for $N SENDs; $N WRITEs with immediate; $N SENDs into an SRQ"

check "\"direct\": false: the streams on the engine alone, in order"
w0=$(engine_count wqes)
TMO=$((TMO * 3)) run_ours "$USER1" env DIRECT_RINGS=0 "$HELPER" stream 3 \
	"${DIRECT_STREAM_SEED:-$RANDOM}" 3 >"$O/stream-engine" 2>&1 ||
	{ show stream "$O/stream-engine"; fail "the stream on the engine failed"; }
stream_counts "$O/stream-engine"
n=$(($(engine_count wqes) - w0))
[ -n "$sends" ] && [ "$n" -eq $((sends + one)) ] ||
	fail "the engine ran $n WQEs for ${sends:-?} SENDs and $((one)) WRITEs and READs"
ok "$(sed -n 's/^stream: //p' "$O/stream-engine" | tail -1), every one by the engine"
daemon_stop
