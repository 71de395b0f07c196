#!/bin/bash
# Fair sharing of the engine (fairness-helper, tests/integration/fairness.c):
#  - transfers longer than a chunk between two processes: RDMA WRITE, READ
#    and SEND, odd sizes, several SGEs, byte-exact;
#  - QPs moved to ERR or destroyed in the middle of 256 MiB transfers: every
#    WQE completes or is flushed on both sides, the daemon lives on;
#  - a small SEND completes while a 256 MiB WRITE on the same engine thread
#    is in progress;
#  - a uid's busy QPs do not starve its later QP, in the same context or
#    another (the share goes round robin, not to the lowest doorbells),
#    also where their turns place SENDs out of direct rings; nor does
#    a uid's many busy contexts starve another uid's QP;
#  - one uid's 64 busy QPs move at most its share of each engine pass,
#    also when what they have the engine copy is SENDs in their direct
#    rings (a second daemon, with the direct transport);
#  - SENDs cut short at either end in the middle (fairness-helper cuts):
#    receiver reset and reconnected, in ERR, an SRQ receiver reset or
#    destroyed, a UC sender reset, a sender fault in the first chunk, a WQE
#    lengthened in the ring between chunks;
#  - a bandwidth limit: uid $USER1 at 20 MB/s needs >= 1.5 s for 40 MB,
#    while uid $USER2, unlimited, moves as much at once in parallel;
#  - a QP waiting on a tiny limit (1 KiB/s) goes on at once when the limit
#    is lifted (ibvctl limit set ... bandwidth=max).
# Timing is only ever asserted as a lower bound for the limited tenant
# (noise only slows it down) and a generous upper bound for the other.
. "$(dirname "$0")/lib.sh"

ibvd_init
O=$T/out
HELPER=$T/bin/fairness-helper
[ -x "$HELPER" ] || fail "tests/integration/fairness-helper not built"
export VT_TMUL=$TMUL
TMO=$((TMO * 3))
# The helpers pin a few hundred MiB, past any RLIMIT_MEMLOCK we could set
# (the daemon honours it as the kernel does): they run with CAP_IPC_LOCK.
is_root || skip "needs root, to give the test uids CAP_IPC_LOCK"

# run_locked UID PROG ARGS...: run_ours with CAP_IPC_LOCK (ambient).
run_locked() {
	local uid=$1
	shift
	(cd "$T" && exec timeout -k 2 "$TMO" setpriv --reuid="$uid" --regid="$uid" \
		--clear-groups --inh-caps=+ipc_lock --ambient-caps=+ipc_lock -- \
		env IBVERBSD_SOCKET="$SOCK" "$T/tools/ibverbsd-run" "$@")
}

# The engine's sharing is the subject: no SEND of these QPs may go library
# to library on the direct transport instead.
conf=$T/ibverbsd.conf
cat >"$conf" <<EOF
{
  "socket": { "path": "$SOCK" },
  "engine": { "threads": 1, "direct": false },
  "devices": [ { "name": "ibvd0", "ports": 1, "lid": 1 } ],
  "limits": { "uid": { "$USER1": { "bandwidth": 20000000 } } }
}
EOF
chmod 644 "$conf"
daemon_start -c "$conf"
daemon_wait_ready

meeting_dir() {
	local d=$O/$1
	{ mkdir -p "$d" && chmod 1777 "$d"; } || fail "mkdir $d"
	printf '%s\n' "$d"
}

check "chunked WRITE, READ and SEND between two processes, then cut short"
d=$(meeting_dir chunks)
# The initiator is the limited uid $USER1: at 20 MB/s its 256 MiB SENDs
# are surely in the middle when it cuts them.
run_locked "$USER2" "$HELPER" target "$d" >"$O/target" 2>&1 &
tpid=$!
BG_PIDS+=("$tpid")
run_locked "$USER1" "$HELPER" initiator "$d" >"$O/initiator" 2>&1
irc=$?
wait_exit "$tpid" "$TMO" || { show target "$O/target"; fail "the target did not finish"; }
show "initiator" "$O/initiator"
show "target" "$O/target"
[ "$irc" -eq 0 ] || fail "the initiator's checks failed (exit $irc)"
[ "$EXIT_STATUS" -eq 0 ] || fail "the target's checks failed (exit $EXIT_STATUS)"
ok "byte-exact across chunks; cut-short WQEs all completed"
daemon_alive "after the chunked transfers"

check "SENDs cut short in the middle, at either end (uid $USER1, 20 MB/s)"
run_locked "$USER1" "$HELPER" cuts >"$O/cuts" 2>&1
rc=$?
show "cuts" "$O/cuts"
[ "$rc" -eq 0 ] || fail "a cut-short SEND ended wrong (exit $rc)"
ok "every cut ended as chunk.c says"
daemon_alive "after the cuts"

check "a small SEND overtakes a 256 MiB WRITE on the same engine thread"
w0=$(engine_count wqes)
run_locked "$USER2" "$HELPER" order >"$O/order" 2>&1
rc=$?
w=$(($(engine_count wqes) - w0))
show "order" "$O/order"
[ "$rc" -eq 0 ] || fail "the small SEND waited for the big WRITE (exit $rc)"
[ "$w" -ge 2 ] || fail "the engine ran $w WQEs: the SEND did not go through it"
ok "the small SEND completed first, both on the engine ($w WQEs)"

# A pass gives each rung QP one turn of up to a chunk (128 KiB): without a
# share per tenant, a pass with 64 busy QPs of one uid gives all 64 a
# turn, and every other uid's QP (and the daemon's requests) waits for
# them.  Counted, not timed: the turns per pass that gave any.  A uid's
# share (512 KiB, engine.c) is four turns of a chunk.
check "one uid's 64 busy QPs: at most its share of each engine pass"
t0=$(engine_count turns)
p0=$(engine_count busy_passes)
d0=$(engine_count deferred)
run_locked "$USER2" "$HELPER" hog 64 384 >"$O/hog" 2>&1
rc=$?
turns=$(($(engine_count turns) - t0))
passes=$(($(engine_count busy_passes) - p0))
deferred=$(($(engine_count deferred) - d0))
show "hog" "$O/hog"
[ "$rc" -eq 0 ] || fail "the hog failed (exit $rc)"
[ "$passes" -gt 0 ] || fail "no busy engine pass counted"
[ "$deferred" -gt 0 ] || fail "no turn was put off to the next pass ($turns turns in $passes passes)"
[ "$turns" -le $((8 * passes)) ] ||
	fail "$turns turns in $passes passes: more than 8 a pass for one uid (no share per tenant)"
ok "$turns turns in $passes passes; $deferred put off to the next pass"

# Within one uid: a pass that drained a context's doorbells lowest bit
# first every time gave the share to the uid's low-bit QPs while they had
# work; its later QPs waited until they ran dry (an MPI rank streaming to
# one peer starving its messages to another).  8 busy pairs keep eight 1 MiB
# WRITEs posted (a turn a chunk, four spend the share); a pair made after
# them posts one small WRITE, in the same context, then in a second
# context of the process (the pass went through contexts in one order
# too).  Counted, not timed: the busy WRITEs posted after it that complete
# before it.  The busy ones post again until 64 of those completed;
# starved, it waits for all of them.  Served round robin, it waits a few
# passes of 512 KiB, where a 1 MiB WRITE needs 8 turns of its QP: 8
# allowed (a CQ poll of 4 may count a few that completed after it).
for where in same split; do
	check "one uid's busy QPs do not starve its later one ($where context)"
	p0=$(engine_count busy_passes)
	d0=$(engine_count deferred)
	run_locked "$USER2" "$HELPER" starve 8 "$where" >"$O/starve-$where" 2>&1
	rc=$?
	passes=$(($(engine_count busy_passes) - p0))
	deferred=$(($(engine_count deferred) - d0))
	show "starve ($where)" "$O/starve-$where"
	[ "$rc" -eq 0 ] || fail "the starve helper failed (exit $rc)"
	[ "$deferred" -gt 0 ] || fail "no turn was put off ($passes passes): the share was never spent"
	after=$(sed -n 's/^busy WRITEs posted after the small one completed before it: \([0-9]*\) .*/\1/p' \
		"$O/starve-$where")
	[ -n "$after" ] || fail "no count line"
	[ "$after" -le 8 ] ||
		fail "$after busy 1 MiB WRITEs posted after the small WRITE completed before it: its QP was put off in every pass"
	ok "$after busy WRITEs posted after the small one went before it; $passes busy passes, $deferred put off"
done
daemon_alive "after the starve checks"

# Across tenants: each has a share of every pass of its own, so another
# uid's QP has its turn in the first pass that finds it rung, wherever
# its context is in the pass's order and however many contexts the busy
# uid has on the thread (a round of them per busy QP ahead bounds the
# wait only within one uid).  Uid $USER2 keeps eight 1 MiB WRITEs posted
# on each of 2 pairs in each of 16 contexts; uid $USER1's one context
# posts a small WRITE into a page of a file the two share.  Counted, not
# timed: $USER2's WRITEs posted after it that complete before its byte
# lands.  A share for all tenants of the pass together, in one order,
# starved it (96 counted: all 64 the cap lets post, and those under way);
# each tenant's own: none, before the round robin within a tenant too.
check "one uid's 16 busy contexts do not starve another uid's one"
d=$(meeting_dir starve-tenant)
p0=$(engine_count busy_passes)
run_locked "$USER2" "$HELPER" starve-busy "$d" 16 2 >"$O/starve-busy" 2>&1 &
bpid=$!
BG_PIDS+=("$bpid")
run_locked "$USER1" "$HELPER" starve-other "$d" >"$O/starve-other" 2>&1
orc=$?
wait_exit "$bpid" "$TMO" || { show "busy uid" "$O/starve-busy"; fail "the busy uid did not end"; }
passes=$(($(engine_count busy_passes) - p0))
show "busy uid $USER2" "$O/starve-busy"
show "other uid $USER1" "$O/starve-other"
[ "$orc" -eq 0 ] || fail "the other uid's helper failed (exit $orc)"
[ "$EXIT_STATUS" -eq 0 ] || fail "the busy uid's helper failed (exit $EXIT_STATUS)"
after=$(sed -n 's/^busy WRITEs posted after the other tenant.s small one completed before it: \([0-9]*\) .*/\1/p' \
	"$O/starve-busy")
[ -n "$after" ] || fail "no count line"
[ "$after" -le 8 ] ||
	fail "$after of uid $USER2's 1 MiB WRITEs posted after uid $USER1's small WRITE completed before it landed"
ok "$after busy WRITEs posted after the other uid's went before it; $passes busy passes"
daemon_alive "after the cross-tenant starve check"

# hold_tenant UID FD: a context client of UID (ctxclient-helper, fed on
# fd FD) keeps the uid's tenant between the helpers' runs: what its
# limiter was paid (limit show current) goes with its last connection.
hold_tenant() {
	mkfifo "$T/hold$1.in" && chmod 644 "$T/hold$1.in" || fail "mkfifo"
	TMO=$((TMO * 10)) run_ours "$1" "$T/bin/ctxclient-helper" <"$T/hold$1.in" >"$O/hold$1" 2>&1 &
	BG_PIDS+=("$!")
	eval "exec $2>\"\$T/hold\$1.in\""
	for _ in $(seq $((TMO * 10))); do
		grep -q '^ready ' "$O/hold$1" && return 0
		sleep 0.1
	done
	show "uid $1's context client" "$O/hold$1"
	fail "uid $1's context client did not open the device"
}

# A wall-clock bound alone tells a tenant held to the limit from a free
# one only loosely (noise and sanitizers slow both): the limiter counts
# what it charged each tenant, and only while the tenant has a limit.
check "bandwidth: uid $USER1 limited to 20 MB/s, uid $USER2 unlimited, in parallel"
hold_tenant "$USER1" 8
hold_tenant "$USER2" 9
paid1=$(limit_count current "$USER1" bandwidth) || exit 1
paid2=$(limit_count current "$USER2" bandwidth) || exit 1
run_locked "$USER1" "$HELPER" move 40000000 >"$O/limited" 2>&1 &
lpid=$!
BG_PIDS+=("$lpid")
run_locked "$USER2" "$HELPER" move 40000000 >"$O/free" 2>&1
frc=$?
wait_exit "$lpid" "$TMO" || fail "the limited tenant did not finish within $TMO s"
show "limited (uid $USER1)" "$O/limited"
show "unlimited (uid $USER2)" "$O/free"
[ "$frc" -eq 0 ] || fail "the unlimited tenant failed (exit $frc)"
[ "$EXIT_STATUS" -eq 0 ] || fail "the limited tenant failed (exit $EXIT_STATUS)"
lms=$(sed -n 's/^moved [0-9]* bytes in \([0-9]*\) ms$/\1/p' "$O/limited")
fms=$(sed -n 's/^moved [0-9]* bytes in \([0-9]*\) ms$/\1/p' "$O/free")
{ [ -n "$lms" ] && [ -n "$fms" ]; } || fail "no timing lines"
[ "$lms" -ge 1500 ] || fail "40 MB at 20 MB/s took $lms ms (< 1500)"
[ "$fms" -lt $((1000 * TMUL)) ] || fail "the unlimited tenant took $fms ms: held to the limit?"
paid1=$(($(limit_count current "$USER1" bandwidth) - paid1))
paid2=$(($(limit_count current "$USER2" bandwidth) - paid2))
# what it moved: 1 MiB WRITEs until 40 MB, 39 MiB
lbytes=$(sed -n 's/^moved \([0-9]*\) bytes in .*/\1/p' "$O/limited")
[ "$paid2" -eq 0 ] || fail "the unlimited tenant's sends were charged $paid2 bytes: held to a limit"
[ "$paid1" -ge "$lbytes" ] || fail "the limited tenant was charged $paid1 bytes for its $lbytes"
[ "$paid1" -lt $((2 * lbytes)) ] || fail "the limited tenant was charged $paid1 bytes for its $lbytes: the other's too"
exec 8>&- 9>&-
ok "limited: 40 MB in $lms ms, $paid1 bytes charged; unlimited: 40 MB in $fms ms, none charged"
daemon_alive "after the bandwidth test"

check "lifting a limit frees a QP waiting on it at once"
ibvctl limit set uid "$USER1" bandwidth=1k >"$O/set" 2>&1 ||
	{ show "limit set" "$O/set"; fail "limit set uid $USER1 bandwidth=1k"; }
run_locked "$USER1" "$HELPER" move 1048576 >"$O/slow" 2>&1 &
spid=$!
BG_PIDS+=("$spid")
for i in $(seq $((50 * TMUL))); do
	grep -q '^started$' "$O/slow" && break
	sleep 0.1
done
grep -q '^started$' "$O/slow" || { show "slow" "$O/slow"; fail "the 1 KiB/s tenant never started"; }
sleep 0.5
pid_running "$spid" || { show "slow" "$O/slow"; fail "1 MiB at 1 KiB/s done in 0.5 s"; }
ibvctl limit set uid "$USER1" bandwidth=max >"$O/set" 2>&1 ||
	{ show "limit set" "$O/set"; fail "limit set uid $USER1 bandwidth=max"; }
wait_exit "$spid" $((3 * TMUL)) ||
	{ show "slow" "$O/slow"; fail "still waiting $((3 * TMUL)) s after the limit was lifted"; }
show "slow (uid $USER1)" "$O/slow"
[ "$EXIT_STATUS" -eq 0 ] || fail "the freed tenant failed (exit $EXIT_STATUS)"
ok "freed once the limit was lifted"
daemon_alive "after lifting the limit"
daemon_stop

# The same share for what the engine places out of direct rings: SENDs
# a library left in its QP's transit ring (its receiver does not poll),
# which the engine places itself before the WRITE behind them.  A turn
# places up to a chunk of them; counted as no bytes, a pass gave each of
# the uid's 64 QPs its turn (8 MiB) where its share is 512 KiB, and put
# none off.  Counted, not timed: the bytes the engine placed
# (direct_bytes) and moved per pass that gave a turn, with only this uid
# busy, between the helper's "ready" and "placed" (passes while its
# WRITEs are still being posted give few QPs a turn: the mean is less
# than a full pass's).  A pass may end one turn past the share (a chunk
# of two 64 KiB SENDs): 640 KiB a pass at most; 768 KiB allowed.
check "one uid's 64 direct QPs: what the engine places from their rings counts in its share"
sed 's/"direct": false/"direct": true/' "$conf" >"$T/direct.conf" && chmod 644 "$T/direct.conf" ||
	fail "cannot write $T/direct.conf"
daemon_start -c "$T/direct.conf"
daemon_wait_ready
mkfifo "$T/hogd.in" && chmod 644 "$T/hogd.in" || fail "mkfifo"
run_locked "$USER2" "$HELPER" hog-direct 64 4 <"$T/hogd.in" >"$O/hogd" 2>&1 &
hpid=$!
BG_PIDS+=("$hpid")
exec 8>"$T/hogd.in"
for _ in $(seq $((TMO * 10))); do
	grep -q '^ready$' "$O/hogd" && break
	pid_running "$hpid" || break
	sleep 0.1
done
grep -q '^ready$' "$O/hogd" || { show "hog-direct" "$O/hogd"; fail "the direct hog never got ready"; }
p0=$(engine_count busy_passes)
d0=$(engine_count direct_bytes)
b0=$(engine_count bytes)
f0=$(engine_count deferred)
echo go >&8
for _ in $(seq $((TMO * 10))); do
	grep -q '^placed' "$O/hogd" && break
	pid_running "$hpid" || break
	sleep 0.1
done
passes=$(($(engine_count busy_passes) - p0))
placed=$(($(engine_count direct_bytes) - d0))
moved=$(($(engine_count bytes) - b0))
deferred=$(($(engine_count deferred) - f0))
echo end >&8
exec 8>&-
wait_exit "$hpid" "$TMO" || { show "hog-direct" "$O/hogd"; fail "the direct hog did not end"; }
show "hog-direct" "$O/hogd"
[ "$EXIT_STATUS" -eq 0 ] || fail "the direct hog failed (exit $EXIT_STATUS)"
# 4 rounds of 14 SENDs of 64 KiB on 64 QPs: 224 MiB, all placed by the engine
[ "$placed" -ge $((4 * 14 * 64 * 65536)) ] ||
	fail "the engine placed $placed bytes from the rings: did the library take them?"
[ "$passes" -gt 0 ] || fail "no busy engine pass counted"
per=$(((placed + moved) / passes))
[ "$deferred" -gt 0 ] ||
	fail "no turn was put off to the next pass ($placed bytes placed in $passes passes): the placing went uncounted"
[ "$per" -le $((768 << 10)) ] ||
	fail "$placed bytes placed and $moved moved in $passes passes: $per a pass for one uid, past its share"
ok "$placed bytes placed and $moved moved in $passes passes: $per a pass; $deferred put off"
daemon_alive "after the direct hog"

# starve's case where a turn's work is placing SENDs out of direct rings
# (what the share counts for them, as above): 32 busy direct pairs go
# round and round, a ring of 14 SENDs of 64 KiB and a WRITE behind them
# (seven turns a round); a pair made after them, in the same context and
# then in a second one, does a round of one SEND and its WRITE (a turn).
# Counted, not timed: the busy rounds started after it that end before
# it.  Served lowest doorbell first, the busy pairs kept the share and
# all 64 rounds started after it went first (76 to 86 counted); round
# robin, it has its turn within a round of the busy QPs' turns, about
# nine passes, where a round needs seven turns of its QP: 8 allowed.
for where in same split; do
	check "one uid's busy direct pairs do not starve its later one ($where context)"
	d0=$(engine_count direct_bytes)
	f0=$(engine_count deferred)
	run_locked "$USER2" "$HELPER" starve-direct 32 "$where" >"$O/starve-direct-$where" 2>&1
	rc=$?
	placed=$(($(engine_count direct_bytes) - d0))
	deferred=$(($(engine_count deferred) - f0))
	show "starve-direct ($where)" "$O/starve-direct-$where"
	[ "$rc" -eq 0 ] || fail "the starve-direct helper failed (exit $rc)"
	# the 64 rounds before it, at least, placed by the engine
	[ "$placed" -ge $((64 * 14 * 65536)) ] ||
		fail "the engine placed $placed bytes from the rings: did the library take them?"
	[ "$deferred" -gt 0 ] || fail "no turn was put off: the share was never spent"
	after=$(sed -n 's/^busy rounds started after the late one ended before it: \([0-9]*\) .*/\1/p' \
		"$O/starve-direct-$where")
	[ -n "$after" ] || fail "no count line"
	[ "$after" -le 8 ] ||
		fail "$after busy rounds started after the late one ended before it: its QP was put off in every pass"
	ok "$after busy rounds started after the late one ended before it; $placed bytes placed, $deferred turns put off"
done
daemon_alive "after the direct starve checks"
daemon_stop
