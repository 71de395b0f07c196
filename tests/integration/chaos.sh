#!/bin/bash
# The chaos soak: nine chaos-helper workers (tests/integration/chaos.c) of
# three uids (1001, 1002, 1004), each a server and a client, move verified
# RC WRITE/SEND/READ/atomics and UD datagrams between each other through
# one daemon for CHAOS_SECONDS (default 30; scripts/chaos-soak runs it for
# minutes) while a chaos loop kill -9s and restarts workers, SIGSTOPs and
# SIGCONTs them, opens device contexts and abandons them mid-request
# (kill -9 of a client opening, registering and moving data), and sends
# the daemon SIGHUP.  Then:
#  - no worker saw a wrong byte, a wrong atomic result, a lost or
#    duplicated completion, or a wait beyond its timeout ("chaos: FAIL");
#  - the daemon still serves, holds no client, and every tenant's usage
#    (ibvctl limit show current) is 0 again;
#  - its fd count is back to the baseline taken after a warm-up, and its
#    RSS within 4 MiB of it (under ASan, whose quarantine keeps freed
#    memory, LeakSanitizer at the stop checks instead);
#  - it stops cleanly (under --sanitizers: with nothing reported).
# CHAOS_SEED fixes the chaos loop's choices (default: the pid).
. "$(dirname "$0")/lib.sh"

need_cmd pkill
ibvd_init
O=$T/out
HELPER=$T/bin/chaos-helper
[ -x "$HELPER" ] || fail "tests/integration/chaos-helper not built"
SECS=${CHAOS_SECONDS:-30}
RANDOM=${CHAOS_SEED:-$$}
log "seed $RANDOM, $SECS s"
conf=$(default_conf) || exit 1
daemon_start -c "$conf"
daemon_wait_ready

UIDS=(1001 1002 1004)
NW=9
BASE=$(free_port)
PORTS=()
for i in $(seq 0 $((NW - 1))); do PORTS+=($((BASE + 1 + i))); done
declare -A WPID

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$DAEMON_PID/status"; }

# settled: the daemon holds no client (ibvctl client show, left in
# $O/clients) and no close of what they left waits for its closer
# threads.  It learns of a client's exit when the kernel closes its
# sockets, and closes what it held after that, on its own threads; and
# a client the chaos abandoned while it started (killed before it was
# exec'd) runs its loopback to the end on its own.  A loaded machine
# may take a while for all that: this waits for it, 20 s at most (a
# client or a close that never goes still fails).
settled() {
	local end=$((SECONDS + 20 * TMUL))
	while :; do
		ibvctl -j client show >"$O/clients" 2>&1 || { show out "$O/clients"; fail "client show"; }
		"$PYTHON" -c 'import json,sys; sys.exit(len(json.load(open(sys.argv[1]))) != 0)' "$O/clients" &&
			[ "$(status_count closes_waiting)" = 0 ] && return 0
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.1
	done
}

# worker I SECONDS: start worker I (port PORTS[I], uid by I) in the background.
worker() {
	local i=$1 port=${PORTS[$1]} peers=()
	for p in "${PORTS[@]}"; do [ "$p" != "$port" ] && peers+=("$p"); done
	TMO=$(($2 + 60)) run_ours "${UIDS[$((i % 3))]}" "$HELPER" "$port" "$2" "${peers[@]}" \
		>>"$O/worker$i" 2>&1 &
	WPID[$i]=$!
	BG_PIDS+=("$!")
}

# catches_term PID: PID has its SIGTERM handler installed.
catches_term() {
	local mask
	mask=$(awk '/^SigCgt:/ { print $2 }' "/proc/$1/status" 2>/dev/null)
	[ -n "$mask" ] && (((0x$mask >> 14) & 1))
}

# term_worker I: SIGTERM to worker I's processes once they catch it.  A
# worker the chaos has just restarted may still be in setpriv or the
# dynamic loader: SIGTERM there would kill it before it could print its
# verdicts (or miss it, and it would run on for its whole time).
term_worker() {
	local i=$1 pids p ready
	for _ in $(seq $((100 * TMUL))); do
		pid_running "${WPID[$i]}" || return 0
		pids=$(pgrep -f "^$HELPER ${PORTS[$i]} ")
		ready=${pids:+1}
		for p in $pids; do catches_term "$p" || ready=; done
		if [ -n "$ready" ]; then
			kill -TERM $pids 2>/dev/null
			return 0
		fi
		sleep 0.1
	done
	fail "worker $i never caught SIGTERM"
}

# stop_workers: SIGTERM to every worker; each must finish and exit.
stop_workers() {
	local i
	for i in "${!WPID[@]}"; do term_worker "$i"; done
	for i in "${!WPID[@]}"; do
		wait_exit "${WPID[$i]}" $((30 * TMUL)) || fail "worker $i did not stop within $((30 * TMUL)) s"
	done
	WPID=()
}

# Workers print their verdicts and nothing else: any other line (a
# "chaos: FAIL", a sanitizer's report) fails the test.  A worker killed by
# the chaos prints nothing; one stopped at the end prints both verdicts.
# (bash's own notice of a worker the chaos killed is not the worker's.)
check_logs() {
	local f other
	for f in "$O"/worker*; do
		other=$(grep -v '^chaos: ok ' "$f" | grep -Ev ': line [0-9]+: +[0-9]+ Killed ')
		if [ -n "$other" ]; then
			show "$(basename "$f")" "$f"
			fail "$(basename "$f"): $(head -n 1 <<<"$other")"
		fi
		[ "$(tail -n 2 "$f" | grep -c '^chaos: ok \(client\|server\) ')" -eq 2 ] ||
			{ show "$(basename "$f")" "$f"; fail "$(basename "$f"): no verdicts at the end"; }
	done
}

# ---- warm-up and baseline ------------------------------------------------------
check "warm-up: $NW workers for 3 s, then the baseline"
for i in $(seq 0 $((NW - 1))); do worker "$i" 3; done
sleep 4
stop_workers
check_logs
settled || { show clients "$O/clients"; show status "$O/status"; fail "the warm-up's clients did not go"; }
fds0=$(daemon_fds_settled)
rss0=$(rss_kb)
ok "baseline: $fds0 fds, RSS $rss0 kB"
rm -f "$O"/worker*

# ---- the soak ------------------------------------------------------------------
check "$NW workers of uids ${UIDS[*]} for $SECS s under chaos"
for i in $(seq 0 $((NW - 1))); do worker "$i" $((SECS + 30)); done
declare -A N
end=$((SECONDS + SECS))
while [ "$SECONDS" -lt "$end" ]; do
	sleep "0.$((3 + RANDOM % 5))"
	i=$((RANDOM % NW))
	port=${PORTS[$i]}
	case $((RANDOM % 6)) in
	0)	# kill -9 a worker (client and server), restart it; one restarted
		# just now may still be in timeout or setpriv: wait for the helper
		for _ in $(seq $((50 * TMUL))); do
			pgrep -f "^$HELPER $port " >/dev/null && break
			pid_running "${WPID[$i]}" || break
			sleep 0.02
		done
		pkill -KILL -f "^$HELPER $port " 2>/dev/null
		wait "${WPID[$i]}" 2>/dev/null
		sleep 0.3
		worker "$i" $((end - SECONDS + 30))
		N[kill]=$((${N[kill]:-0} + 1)) ;;
	1|2)	# stop a worker for up to a second
		pkill -STOP -f "^$HELPER $port " 2>/dev/null
		sleep "0.$((1 + RANDOM % 9))"
		pkill -CONT -f "^$HELPER $port " 2>/dev/null
		N[stop]=$((${N[stop]:-0} + 1)) ;;
	3)	# a client killed while it opens, registers or moves data
		run_ours "${UIDS[$((RANDOM % 3))]}" "$T/bin/ctxclient-helper" \
			<<<"loopback" >/dev/null 2>&1 &
		p=$!
		disown
		sleep "0.0$((RANDOM % 10))"
		pkill -KILL -P "$p" 2>/dev/null
		pkill -KILL -f "$T/bin/ctxclient-helper" 2>/dev/null
		N[abandon]=$((${N[abandon]:-0} + 1)) ;;
	4)	# reload
		kill -HUP "$DAEMON_PID"
		N[reload]=$((${N[reload]:-0} + 1)) ;;
	5)	# a second opened and dropped at once (no request at all)
		timeout 1 "$T/bin/badclient-helper" "$SOCK" ping >/dev/null 2>&1 &
		disown
		pkill -KILL -f "badclient-helper $SOCK ping" 2>/dev/null
		N[drop]=$((${N[drop]:-0} + 1)) ;;
	esac
	daemon_alive || fail "the daemon died under chaos"
done
stop_workers
check_logs
summary=$(cat "$O"/worker* | awk '
	/^chaos: ok client/ { for (i = 1; i <= NF; i++) if (split($i, kv, "=") == 2) c[kv[1]] += kv[2] }
	/^chaos: ok server/ { for (i = 1; i <= NF; i++) if (split($i, kv, "=") == 2) s[kv[1]] += kv[2] }
	END { printf "clients: %d rounds verified, %d connections, %d lost; servers: %d writes verified, %d UD datagrams verified, %d lost",
	      c["rounds"], c["connections"], c["lost"], s["verified"], s["ud"], s["lost"] }')
log "chaos: kill ${N[kill]:-0}, stop ${N[stop]:-0}, abandon ${N[abandon]:-0}, reload ${N[reload]:-0}, drop ${N[drop]:-0}"
rounds=$(sed -n 's/^clients: \([0-9]*\) rounds.*/\1/p' <<<"$summary")
[ "${rounds:-0}" -ge $((SECS / 3)) ] || { log "$summary"; fail "only ${rounds:-0} verified rounds in $SECS s"; }
ok "$summary"

# ---- nothing lost, nothing leaked -------------------------------------------------
check "the daemon holds no client and every tenant's usage is 0"
settled || { show clients "$O/clients"; show status "$O/status"; fail "clients are still connected"; }
for u in "${UIDS[@]}"; do
	ibvctl -j limit show current uid "$u" >"$O/usage$u" 2>&1 || { show out "$O/usage$u"; fail "limit show current uid $u"; }
	"$PYTHON" - "$O/usage$u" <<-'EOF' || { show "usage" "$O/usage$u"; fail "uid $u still holds something"; }
	import json, sys
	for r in json.load(open(sys.argv[1])):
	    held = {k: v for k, v in r.items() if k not in ("uid", "dev", "rule") and v}
	    assert not held, (r["dev"], held)
	EOF
done
ok "no client; uids ${UIDS[*]}: every counter 0 on every device"

check "the daemon's fds and memory are back to the baseline"
fds1=$(daemon_fds_settled)
rss1=$(rss_kb)
[ "$fds1" -eq "$fds0" ] || { ls -l "/proc/$DAEMON_PID/fd"; fail "fds: $fds0 before, $fds1 after"; }
# ASan keeps freed memory in quarantine: there LeakSanitizer, at the stop
# below, is the leak check.
if [ -z "${SANITIZERS:-}" ]; then
	[ "$rss1" -le $((rss0 + 4096)) ] || fail "RSS: $rss0 kB before, $rss1 kB after"
fi
ok "fds $fds0 -> $fds1, RSS $rss0 -> $rss1 kB"

check "the daemon still serves and stops cleanly"
ping_daemon || fail "no answer"
daemon_stop
ok "stopped"
