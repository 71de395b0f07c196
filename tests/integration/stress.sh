#!/bin/bash
# Thread safety (stress-helper, tests/integration/stress.c): 4 threads post
# to the same QP and to different QPs, 2 threads poll one shared CQ, 2
# threads create and destroy PDs, MRs, CQs, QPs (and contexts) at the same
# time, for a few seconds; every WR must complete exactly once with its
# data intact.  Afterwards the daemon holds no more fds than before.
. "$(dirname "$0")/lib.sh"

ibvd_init
O=$T/out
HELPER=$T/bin/stress-helper
[ -x "$HELPER" ] || fail "tests/integration/stress-helper not built"
conf=$(default_conf) || exit 1
daemon_start -c "$conf"
daemon_wait_ready

nfds() { find "/proc/$DAEMON_PID/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
fds0=$(daemon_fds_settled)

SECS=4
check "stress as uid $USER1 for $SECS s"
TMO=$((TMO + SECS)) run_ours "$USER1" env VT_TMUL="$TMUL" "$HELPER" "$SECS" >"$O/stress" 2>&1
rc=$?
show "stress-helper" "$O/stress"
case $rc in
0) ;;
124|137) fail "stress-helper hung (killed after $((TMO + SECS)) s)" ;;
*) fail "stress-helper failed (exit $rc)" ;;
esac
expect_grep '^stress: ok: [1-9][0-9]* WRs ' "$O/stress" "verdict"
daemon_alive "after the stress run"
ok "$(sed -n 's/^stress: ok: //p' "$O/stress")"

check "the daemon's fds are back to $fds0"
for _ in $(seq 50); do
	[ "$(nfds)" -le "$fds0" ] && break
	sleep 0.1
done
[ "$(nfds)" -le "$fds0" ] || { ls -l "/proc/$DAEMON_PID/fd"; fail "daemon holds $(nfds) fds, $fds0 before"; }
ok "$(nfds) fds"
daemon_stop
