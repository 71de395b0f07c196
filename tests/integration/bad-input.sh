#!/bin/bash
# Bad input from a client gets an error reply or, for framing violations, a
# disconnect of that client alone: one badclient-helper case at a time
# (see tests/integration/badclient.c for what each case asserts).  After
# every case the daemon is alive, a context held by an unprivileged client
# since before the case still works, a fresh well-behaved client (Debian's
# ibv_devices) works, and ibvctl daemon status answers.
. "$(dirname "$0")/lib.sh"

need_cmd /usr/bin/ibv_devices
ibvd_init
O=$T/out
IDLE=2

# A short idle timeout so the "idle" case need not wait the default 30 s.
conf=$(default_conf) || exit 1
IBVERBSD_IDLE_TIMEOUT=$IDLE daemon_start -c "$conf"
daemon_wait_ready

ctx_start "$USER2"
ctx_cmd query || fail "context client: $CTX_ANSWER"

# after_case NAME: the checks that follow every case.
after_case() {
	daemon_alive "after case $1"
	ctx_cmd query || fail "after case $1, the held context: $CTX_ANSWER"
	case $CTX_ANSWER in
	"ok query dev=ibvd0 "*"state=4"*) ;;
	*) fail "after case $1, the held context: $CTX_ANSWER" ;;
	esac
	run_debian "$USER1" /usr/bin/ibv_devices >"$O/devices" 2>&1 ||
		{ show ibv_devices "$O/devices"; fail "after case $1, ibv_devices failed"; }
	expect_grep '^    ibvd0 *	[0-9a-f]{16}$' "$O/devices" "after case $1, ibv_devices"
	ibvctl daemon status >"$O/status" 2>&1 ||
		{ show "ibvctl daemon status" "$O/status"; fail "after case $1, ibvctl daemon status failed"; }
	ok "case $1; then the daemon, a held context, ibv_devices and ibvctl all fine"
}

# Cases run as an unprivileged uid, except "fds", which reads the daemon's
# /proc/PID/fd and so runs as the daemon's user.
# fuzz: 40000 random/mutated requests from seed 1 (IBVD_FUZZ_SEED=N for another).
for c in malformed oversized truncated badmagic badversion badlen unknowntype \
	 reqid fds notopen silent idle flood fuzz; do
	check "case $c"
	arg=""
	uid=$USER1
	case $c in
	fds) arg=$DAEMON_PID; uid=$(id -u) ;;
	idle) arg=$IDLE ;;
	fuzz) arg="40000 ${IBVD_FUZZ_SEED:-1}" ;;
	esac
	# shellcheck disable=SC2086 # $arg is zero or more words
	run_as "$uid" "$T/bin/badclient-helper" "$SOCK" "$c" $arg >"$O/$c" 2>&1
	rc=$?
	show "badclient $c" "$O/$c"
	[ "$rc" -eq 0 ] || fail "case $c: badclient-helper exited $rc"
	after_case "$c"
done

ctx_stop
daemon_stop
