#!/bin/bash
# Without a daemon, programs fail fast and clearly: Debian's ibv_devices and
# ibv_devinfo exit non-zero within a few seconds with exactly one line from
# libibverbs naming the socket plus the tool's own error; same for a stale
# socket file (a daemon that died), and for ibvctl.
. "$(dirname "$0")/lib.sh"

need_cmd /usr/bin/ibv_devices /usr/bin/ibv_devinfo
ibvd_init
O=$T/out

# expect_clean_failure WHAT TOOL_ERROR_REGEX CMD...: run CMD, which must
# fail within 5 s with 2 stderr lines: libibverbs' (naming $SOCK) + the tool's.
expect_clean_failure() {
	local what=$1 tool_re=$2 t0 t1 rc ms n
	shift 2
	check "$what"
	t0=$(date +%s%N)
	"$@" >"$O/out" 2>"$O/err"
	rc=$?
	t1=$(date +%s%N)
	ms=$(((t1 - t0) / 1000000))
	show "stderr" "$O/err"
	expect_failed "$rc" "$what (after $ms ms)"
	[ "$ms" -lt $((5000 * TMUL)) ] || fail "$what: took $ms ms"
	n=$(grep -c -F -- "$SOCK" "$O/err")
	[ "$n" -eq 1 ] || fail "$what: $n stderr lines name $SOCK, want exactly 1"
	grep -F -- "$SOCK" "$O/err" | grep -q 'libibverbs' ||
		fail "$what: the line naming the socket does not say it is from libibverbs"
	expect_grep "$tool_re" "$O/err" "$what: the tool's own error"
	n=$(wc -l <"$O/err")
	[ "$n" -eq 2 ] || fail "$what: $n stderr lines, want 2 (libibverbs' + the tool's)"
	ok "$what: exit $rc after $ms ms"
}

SOCK=$T/run/nonexistent.sock
expect_clean_failure "ibv_devices, no socket file" '^Failed to get IB devices list' \
	run_debian "$USER1" /usr/bin/ibv_devices
expect_clean_failure "ibv_devinfo, no socket file" '^Failed to get IB devices list' \
	run_debian "$USER1" /usr/bin/ibv_devinfo
expect_clean_failure "our ibv_devinfo, no socket file" '^Failed to get IB devices list' \
	run_ours "$USER1" ibv_devinfo

# A socket file nobody listens on (what a killed daemon leaves behind).
SOCK=$T/run/stale.sock
"$PYTHON" -c 'import socket,sys; s=socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.bind(sys.argv[1])' "$SOCK" ||
	fail "cannot create a stale socket"
chmod 666 "$SOCK"
[ -S "$SOCK" ] || fail "no stale socket at $SOCK"
expect_clean_failure "ibv_devices, stale socket" '^Failed to get IB devices list' \
	run_debian "$USER2" /usr/bin/ibv_devices

check "ibvctl dev show without a daemon"
SOCK=$T/run/nonexistent.sock
if [ -x "$T/tools/ibvctl" ]; then
	ibvctl dev show >"$O/out" 2>"$O/err"
	rc=$?
	show "stderr" "$O/err"
	expect_failed "$rc" "ibvctl dev show"
	grep -qF -- "$SOCK" "$O/err" || fail "ibvctl's error does not name $SOCK"
	[ ! -s "$O/out" ] || fail "ibvctl printed to stdout without a daemon"
	ok "ibvctl: exit $rc"
else
	fail "tools/ibvctl not built"
fi
