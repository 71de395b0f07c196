#!/bin/bash
# The data path makes no system call while the engine is awake: after a
# warm-up, a burst of >= 10,000 ibv_post_send / ibv_post_recv / ibv_poll_cq
# (and some ibv_req_notify_cq) on an RC loopback pair, with the posting
# thread's system calls counted by a seccomp user-notification filter
# (nosyscall-helper, tests/integration/nosyscall.c).  Zero calls are
# allowed between the window's marks; engine kicks (an 8-byte eventfd
# write after the engine slept), each with at most one sched_yield after
# it, and event pokes (a 1-byte send that delivers an armed CQ's event
# when the engine lagged) only make a round repeat.
#
# The engine can only stay awake while the poster runs if both have a CPU:
# the daemon's engine thread is pinned to the last CPU, the helper to CPU 0
# (left to itself, the scheduler often stacks them on one CPU, and then the
# engine sleeps between any two posts: see nosyscall.c).  Both run at
# SCHED_FIFO priority 1 when we may set it, so that other load on the
# machine (a parallel `make check`) cannot take their CPUs away for a
# scheduler slice, long enough for the engine to go to sleep meanwhile.
# The helper spins for well under a second, far below the kernel's
# real-time throttling limit (95 % of each second).
. "$(dirname "$0")/lib.sh"

need_cmd taskset nproc
ncpu=$(nproc)
[ "$ncpu" -ge 2 ] || skip "needs 2 CPUs (the engine and the posting thread run at once); have $ncpu"
ibvd_init
O=$T/out
HELPER=$T/bin/nosyscall-helper
[ -x "$HELPER" ] || fail "tests/integration/nosyscall-helper not built"
conf=$(default_conf) || exit 1
daemon_start -c "$conf"
daemon_wait_ready

engine_cpu=$((ncpu - 1))
tids=""
for task in /proc/"$DAEMON_PID"/task/*; do
	case $(cat "$task/comm" 2>/dev/null) in
	ibvd-engine*) tids="$tids ${task##*/}" ;;
	esac
done
[ -n "$tids" ] || fail "no ibvd-engine* thread in daemon $DAEMON_PID"
rt=""
is_root && command -v chrt >/dev/null 2>&1 && rt=1
for tid in $tids; do
	taskset -p -c "$engine_cpu" "$tid" >/dev/null || fail "taskset engine thread $tid"
	if [ -n "$rt" ] && ! chrt -f -p 1 "$tid" 2>"$O/chrt"; then
		log "no real-time priority for the engine ($(cat "$O/chrt")): plain scheduling"
		rt=""
	fi
done
log "engine thread(s)$tids pinned to CPU $engine_cpu${rt:+ at SCHED_FIFO 1}; the helper runs on CPU 0"

check "a burst of posts and polls as uid $USER1 makes no system call"
(
	# inherited through setpriv and exec by the helper
	[ -n "$rt" ] && chrt -f -p 1 "$BASHPID"
	TMO=$((TMO * 3)) run_ours "$USER1" env VT_TMUL="$TMUL" NOSYS_CPU=0 "$HELPER" 20000
) >"$O/nosys" 2>&1
rc=$?
show "nosyscall-helper" "$O/nosys"
case $rc in
0) ;;
77) skip "$(grep -m1 SKIP "$O/nosys")" ;;
124|137) fail "nosyscall-helper hung" ;;
*) fail "nosyscall-helper failed (exit $rc)" ;;
esac
expect_grep '^calibration: 3 getppid\(\) in a window counted as 3$' "$O/nosys" "the counter works"
expect_grep '^round [0-9]+: [0-9]+ posts .* 0 system calls \(0 engine kicks, 0 yields' "$O/nosys" "a clean round"
expect_grep '^nosyscall: ok: ' "$O/nosys" "verdict"
daemon_alive "after the burst"
ok "$(sed -n "s/^nosyscall: ok: //p" "$O/nosys")"
daemon_stop
