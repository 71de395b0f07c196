#!/bin/bash
# sd_notify without systemd: a python listener plays systemd's notification
# socket.  With --systemd the daemon sends READY=1 and a STATUS= line once it
# answers, WATCHDOG=1 about every WATCHDOG_USEC/2, RELOADING=1 then READY=1
# again on SIGHUP, STOPPING=1 on SIGTERM (then exits 0).
. "$(dirname "$0")/lib.sh"

ibvd_init
O=$T/out
N=$O/notify
: >"$N"

"$PYTHON" "$T/bin/notify-listen.py" "$T/run/notify" "$N" >"$O/listener.log" 2>&1 &
BG_PIDS+=("$!")
for _ in $(seq 50); do [ -S "$T/run/notify" ] && break; sleep 0.1; done
[ -S "$T/run/notify" ] || { show listener "$O/listener.log"; fail "the notify listener did not start"; }

# n_of REGEX: datagram number of the first line matching REGEX after
# datagram $2 (default 0), or empty.
n_of() {
	awk -v re="$1" -v after="${2:-0}" '$1 > after && substr($0, index($0, " ") + 1) ~ re { print $1; exit }' "$N"
}
wait_for() {
	local re=$1 after=${2:-0} what=$3 n
	for _ in $(seq $((50 * TMUL))); do
		n=$(n_of "$re" "$after")
		[ -n "$n" ] && { printf '%s\n' "$n"; return 0; }
		sleep 0.1
	done
	show "notifications" "$N" >&2
	fail "$what: no /$re/ within $((5 * TMUL)) s"
}

check "--systemd: READY=1 and STATUS= once the daemon answers"
conf=$(default_conf) || exit 1
NOTIFY_SOCKET=$T/run/notify WATCHDOG_USEC=2000000 daemon_start --systemd -c "$conf"
daemon_wait_ready
ready=$(wait_for '^READY=1$' 0 "startup") || exit 1
wait_for '^STATUS=.+' 0 "startup" >/dev/null || exit 1
ok "READY=1 in datagram $ready, $(grep -m1 ' STATUS=' "$N" | cut -d' ' -f2-)"

check "WATCHDOG=1 about every second with WATCHDOG_USEC=2000000"
start=$(tail -n 1 "$N" | cut -d' ' -f1)
sleep 3.5
pings=$(awk -v after="$start" '$1 > after && $2 == "WATCHDOG=1"' "$N" | wc -l)
[ "$pings" -ge 2 ] || { show notifications "$N"; fail "$pings WATCHDOG=1 in 3.5 s, want >= 2 (one per second)"; }
[ "$pings" -le 8 ] || fail "$pings WATCHDOG=1 in 3.5 s: far too often"
ok "$pings watchdog pings in 3.5 s"

check "SIGHUP: RELOADING=1, then READY=1"
last=$(tail -n 1 "$N" | cut -d' ' -f1)
kill -HUP "$DAEMON_PID"
reloading=$(wait_for '^RELOADING=1$' "$last" "SIGHUP") || exit 1
ready2=$(wait_for '^READY=1$' "$((reloading - 1))" "after RELOADING=1") || exit 1
[ "$ready2" -ge "$reloading" ] || fail "READY=1 came before RELOADING=1"
if grep -q "^$reloading MONOTONIC_USEC=[0-9]" "$N"; then
	ok "RELOADING=1 (with MONOTONIC_USEC) in $reloading, READY=1 in $ready2"
else
	ok "RELOADING=1 in $reloading, READY=1 in $ready2 (note: no MONOTONIC_USEC, Type=notify-reload will need it)"
fi
ping_daemon || fail "the daemon does not answer after the reload"
daemon_alive "after SIGHUP"

check "SIGTERM: STOPPING=1, exit 0"
last=$(tail -n 1 "$N" | cut -d' ' -f1)
pid=$DAEMON_PID
daemon_stop
stopping=$(wait_for '^STOPPING=1$' "$last" "SIGTERM") || exit 1
ok "STOPPING=1 in datagram $stopping, daemon $pid exited 0"
show "all notifications" "$N"
