#!/bin/bash
# A hostile client (uid 1002) writes random bytes into its own rings (WQE
# and CQE slots, counters, client and, where mprotect allows, engine
# pages), its context's doorbell page, and writes and reads its kick
# eventfd, for a few seconds, while posting and polling over the garbage.
# Meanwhile an honest client (uid 1001, another process, two connections)
# runs checked RC transfers: SEND and RDMA WRITE both ways, and keeps a
# canary MR nobody has the rkey of (hostile-helper, hostile.c).
# The daemon must survive, the honest transfers complete with intact data,
# the hostile QPs end in ERR or produce error completions, and the
# daemon's fds and RSS stay bounded and return to their baseline.
. "$(dirname "$0")/lib.sh"

ibvd_init
O=$T/out
HELPER=$T/bin/hostile-helper
[ -x "$HELPER" ] || fail "tests/integration/hostile-helper not built"
conf=$(default_conf) || exit 1
daemon_start -c "$conf"
daemon_wait_ready

nfds() { find "/proc/$DAEMON_PID/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
rss_kb() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$DAEMON_PID/status"; }

# A short honest run first: it warms the daemon up (allocations that stay),
# so the baseline below is the daemon's steady state.
check "an honest run alone, as uid $USER1"
run_ours "$USER1" env VT_TMUL="$TMUL" "$HELPER" honest "$O" 1 >"$O/honest0" 2>&1 ||
	{ show honest "$O/honest0"; fail "the honest client fails even alone"; }
ok "$(sed -n 's/^honest: ok //p' "$O/honest0")"
rm -f "$O/honest.ready"
fds0=$(daemon_fds_settled)
rss0=$(rss_kb)
log "daemon baseline: $fds0 fds, VmRSS $rss0 kB"

FRENZY=4
HONEST=$((FRENZY + 3))
check "hostile client (uid $USER2, ${FRENZY} s) against an honest pair (uid $USER1, ${HONEST} s)"
TMO=$((TMO + HONEST)) run_ours "$USER1" env VT_TMUL="$TMUL" "$HELPER" honest "$O" "$HONEST" \
	>"$O/honest" 2>&1 &
hpid=$!
BG_PIDS+=("$hpid")
for _ in $(seq $((TMO * 10))); do
	[ -e "$O/honest.ready" ] && break
	pid_running "$hpid" || break
	sleep 0.1
done
[ -e "$O/honest.ready" ] || { show honest "$O/honest"; fail "the honest client never got ready"; }
TMO=$((TMO + FRENZY)) run_ours "$USER2" env VT_TMUL="$TMUL" "$HELPER" hostile "$FRENZY" \
	>"$O/hostile" 2>&1 &
xpid=$!
BG_PIDS+=("$xpid")

maxfds=$fds0
maxrss=$rss0
while pid_running "$hpid" || pid_running "$xpid"; do
	daemon_alive "while the hostile client runs"
	n=$(nfds)
	r=$(rss_kb)
	[ "$n" -gt "$maxfds" ] && maxfds=$n
	[ -n "$r" ] && [ "$r" -gt "$maxrss" ] && maxrss=$r
	sleep 0.2
done
wait_exit "$xpid" 1
xrc=$EXIT_STATUS
wait_exit "$hpid" 1
hrc=$EXIT_STATUS
show "hostile client" "$O/hostile"
show "honest client" "$O/honest"
daemon_alive "after the hostile client"
ok "the daemon survived"

check "the honest pair completed with intact data"
[ "$hrc" -eq 0 ] || fail "honest client exited $hrc"
expect_grep '^honest: ok [1-9][0-9]* rounds' "$O/honest" "honest verdict"
ok "$(sed -n 's/^honest: ok //p' "$O/honest")"

# What the hostile client did is what makes the checks above mean
# something: garbage over its rings and doorbells rung on it, for its
# whole run.  (Its own QPs' errors are no evidence: it also posts with
# random keys.)
check "the hostile client wrote its garbage and rang its doorbells, and lived"
case $xrc in
0) ;;
124|137) fail "the hostile client hung (exit $xrc)" ;;
*) fail "the hostile client exited $xrc (a crash in its own library over its garbage?)" ;;
esac
line=$(grep -E '^hostile: [0-9]+ scribbles, [0-9]+ eventfd writes, ' "$O/hostile") ||
	fail "no summary line from the hostile client"
read -r nscr nkick <<<"$(sed -E 's/^hostile: ([0-9]+) scribbles, ([0-9]+) eventfd writes, .*/\1 \2/' <<<"$line")"
[ "$nscr" -ge 1000 ] && [ "$nkick" -gt 0 ] || fail "too little garbage to show anything: $line"
ok "$line"

check "the daemon's fds and memory stayed bounded and came back"
log "fds: baseline $fds0, max $maxfds; VmRSS: baseline $rss0 kB, max $maxrss kB"
[ "$maxfds" -le $((fds0 + 40)) ] || fail "daemon fds peaked at $maxfds (baseline $fds0)"
[ "$maxrss" -le $((rss0 + 256 * 1024)) ] || fail "daemon VmRSS peaked at $maxrss kB (baseline $rss0 kB)"
for _ in $(seq 50); do
	[ "$(nfds)" -le "$fds0" ] && break
	sleep 0.1
done
[ "$(nfds)" -le "$fds0" ] || { ls -l "/proc/$DAEMON_PID/fd"; fail "daemon holds $(nfds) fds after both clients left, $fds0 before"; }
rss1=$(rss_kb)
[ "$rss1" -le $((rss0 + 64 * 1024)) ] || fail "daemon VmRSS $rss1 kB after both left (baseline $rss0 kB)"
ok "fds $fds0 -> max $maxfds -> $(nfds); VmRSS $rss0 -> max $maxrss -> $rss1 kB"

check "the daemon still serves an honest pair afterwards"
rm -f "$O/honest.ready"
run_ours "$USER2" env VT_TMUL="$TMUL" "$HELPER" honest "$O" 1 >"$O/honest2" 2>&1 ||
	{ show honest "$O/honest2"; fail "an honest client fails after the hostile one"; }
ok "$(sed -n 's/^honest: ok //p' "$O/honest2")"
daemon_stop
