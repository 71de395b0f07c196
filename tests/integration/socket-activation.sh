#!/bin/bash
# Socket activation without systemd: systemd-socket-activate listens, execs
# the daemon (--systemd) on the first connection with LISTEN_FDS and
# LISTEN_FDNAMES=control; that first connection is served, later ones too
# (Debian's ibv_devinfo as an unprivileged uid), and on SIGTERM the daemon
# exits 0 and leaves the inherited socket alone (systemd owns it).
. "$(dirname "$0")/lib.sh"

need_cmd systemd-socket-activate /usr/bin/ibv_devinfo
ibvd_init
O=$T/out
conf=$(default_conf "$T/run/unused.sock") || exit 1

check "systemd-socket-activate --seqpacket -l $SOCK --fdname=control ibverbsd --systemd"
systemd-socket-activate --seqpacket -l "$SOCK" --fdname=control \
	"$IBVERBSD" --systemd -c "$conf" >"$T/daemon1.log" 2>&1 &
DAEMON_PID=$!
DAEMON_LOG=$T/daemon1.log
# The file appears at bind(), before listen(): a connect in between is
# refused.  Wait for the listening flag (__SO_ACCEPTCON, 00010000 in
# /proc/net/unix) without connecting: the first connection is the test.
listening() {
	awk -v p="$SOCK" '$NF == p && $4 == "00010000" { found = 1 } END { exit !found }' /proc/net/unix
}
for _ in $(seq 50); do listening && break; sleep 0.1; done
listening || { show output "$DAEMON_LOG"; fail "systemd-socket-activate is not listening on $SOCK"; }
chmod 666 "$SOCK"

check "the first connection (made before the daemon exists) is served"
timeout $((15 * TMUL)) "$T/bin/badclient-helper" "$SOCK" list >"$O/list" 2>&1 ||
	{ show output "$O/list"; fail "LIST_DEVICES on the first connection failed"; }
show "LIST_DEVICES" "$O/list"
expect_grep '^ibvd0 [0-9a-f]{16} 1$' "$O/list" "first connection"
daemon_alive "after the first connection"
[ "$(cat "/proc/$DAEMON_PID/comm")" = ibverbsd ] || fail "pid $DAEMON_PID is not ibverbsd after activation"
ok "served by ibverbsd (pid $DAEMON_PID)"

check "it listens on the inherited socket, not the config's"
[ ! -e "$T/run/unused.sock" ] || fail "the daemon bound the config's socket too"
run_debian "$USER1" /usr/bin/ibv_devinfo -d ibvd0 >"$O/info" 2>&1 ||
	{ show output "$O/info"; fail "ibv_devinfo through the activated socket failed"; }
expect_grep 'PORT_ACTIVE \(4\)' "$O/info" "ibv_devinfo"
ok "ibv_devinfo as uid $USER1 works through the activated socket"

check "SIGTERM: exit 0, the inherited socket is left to its owner"
daemon_stop
[ -S "$SOCK" ] || fail "the daemon removed the socket it inherited (systemd's RemoveOnStop= owns it)"
ok "socket still there"
