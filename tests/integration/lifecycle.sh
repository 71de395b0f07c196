#!/bin/bash
# Daemon start and stop: the socket it creates (mode from the config),
# SIGTERM and SIGINT exit 0 and remove it; a stale socket file is replaced;
# a socket in use by a live daemon is not stolen; a bad config at startup
# exits non-zero with a file:line:column message and leaves no socket.
. "$(dirname "$0")/lib.sh"

ibvd_init
conf=$(default_conf) || exit 1

check "start: the socket exists with the config's mode 0666"
daemon_start -c "$conf"
daemon_wait_ready
[ -S "$SOCK" ] || fail "$SOCK is not a socket"
mode=$(stat -c %a "$SOCK")
[ "$mode" = 666 ] || fail "socket mode is $mode, the config says 0666"
ok "socket $SOCK, mode $mode"

check "SIGTERM: exit status 0 and the socket is removed"
daemon_stop
[ ! -e "$SOCK" ] || fail "$SOCK is still there after SIGTERM"
ok "socket removed"

check "SIGINT: exit status 0 and the socket is removed"
daemon_start -c "$conf"
daemon_wait_ready
kill -INT "$DAEMON_PID"
wait_exit "$DAEMON_PID" $((5 * TMUL)) || fail "no exit within 5 s of SIGINT"
DAEMON_PID=""
[ "$EXIT_STATUS" -eq 0 ] || fail "exit status $EXIT_STATUS after SIGINT"
[ ! -e "$SOCK" ] || fail "$SOCK is still there after SIGINT"
ok "SIGINT: exit 0, socket removed"

check "a stale socket file (nobody listening) is replaced"
"$PYTHON" -c 'import socket,sys; socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET).bind(sys.argv[1])' "$SOCK" ||
	fail "cannot create a stale socket"
daemon_start -c "$conf"
daemon_wait_ready
ok "started over the stale socket"

check "a second daemon on the same socket exits non-zero and the first keeps serving"
first=$DAEMON_PID
first_log=$DAEMON_LOG
daemon_start -c "$conf"
second=$DAEMON_PID
wait_exit "$second" $((5 * TMUL)) || { kill -KILL "$second"; fail "the second daemon is still running"; }
[ "$EXIT_STATUS" -ne 0 ] || fail "the second daemon exited 0"
show "second daemon's output" "$DAEMON_LOG"
grep -qF -- "$SOCK" "$DAEMON_LOG" || fail "the second daemon's error does not name $SOCK"
DAEMON_PID=$first
DAEMON_LOG=$first_log
ping_daemon || fail "the first daemon no longer answers"
[ -S "$SOCK" ] || fail "the second daemon removed the first one's socket"
ok "second daemon: exit $EXIT_STATUS; first still serves"
daemon_stop

# bad_startup NAME LINE REGEX: the config $T/NAME must make the daemon exit
# non-zero within 5 s with a NAME:LINE:COL: message matching REGEX.
bad_startup() {
	local name=$1 line=$2 re=$3
	check "bad config at startup: $name"
	rm -f "$SOCK"
	daemon_start -c "$T/$name" --socket "$SOCK"
	wait_exit "$DAEMON_PID" $((5 * TMUL)) || { daemon_kill; fail "$name: the daemon is still running"; }
	DAEMON_PID=""
	show "output" "$DAEMON_LOG"
	[ "$EXIT_STATUS" -ne 0 ] || fail "$name: exit status 0"
	grep -Eq -- "$T/$name:$line:[0-9]+: .*$re" "$DAEMON_LOG" ||
		fail "$name: no '$T/$name:$line:COLUMN: ...$re' message"
	[ ! -e "$SOCK" ] || fail "$name: a socket was left at $SOCK"
	ok "$name: exit $EXIT_STATUS, $(grep -F -- "$T/$name:" "$DAEMON_LOG" | head -n 1)"
}

cat >"$T/syntax.conf" <<'EOF'
{
  "devices": [
    { "name": "ibvd0", "ports": 1 },,
    { "name": "ibvd1" }
  ]
}
EOF
bad_startup syntax.conf 3 ''

cat >"$T/unknown-key.conf" <<'EOF'
{
  "devices": [
    { "name": "ibvd0", "ports": 1 }
  ],
  "bogus": true
}
EOF
bad_startup unknown-key.conf 5 'bogus'

cat >"$T/bad-lid.conf" <<'EOF'
{
  "devices": [
    { "name": "ibvd0",
      "ports": 1,
      "lid": 70000 }
  ]
}
EOF
bad_startup bad-lid.conf 5 'lid'

check "a config file that does not exist"
daemon_start -c "$T/missing.conf" --socket "$SOCK"
wait_exit "$DAEMON_PID" $((5 * TMUL)) || { daemon_kill; fail "the daemon is still running"; }
DAEMON_PID=""
[ "$EXIT_STATUS" -ne 0 ] || fail "exit status 0 with a missing config"
grep -qF -- "$T/missing.conf" "$DAEMON_LOG" || { show output "$DAEMON_LOG"; fail "the error does not name the file"; }
ok "missing config: exit $EXIT_STATUS"

check "an unknown option"
daemon_start --no-such-option
wait_exit "$DAEMON_PID" $((5 * TMUL)) || { daemon_kill; fail "the daemon is still running"; }
DAEMON_PID=""
show "output" "$DAEMON_LOG"
[ "$EXIT_STATUS" -ne 0 ] || fail "exit status 0 with an unknown option"
grep -qi 'usage' "$DAEMON_LOG" || fail "no usage message for an unknown option"
ok "unknown option: exit $EXIT_STATUS"
