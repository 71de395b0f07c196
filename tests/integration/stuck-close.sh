#!/bin/bash
# A client's file whose close never returns holds up that client's uid
# only.  stuckfs-helper mounts a FUSE file system for uid $USER1 whose
# server never answers the daemon's FLUSH, so the daemon's close of that
# file blocks (uninterruptibly) until the server goes away:
#   1. uid $USER1 passes 10 fds of it, 600 ms apart;
#   2. uid $USER2 passes a memfd on each of 200 connections, and uid
#      $USER1 makes 200 plain connections: each answered within 1 s, and
#      all closed (the daemon's fd count comes back down);
#   3. uid $USER1 keeps passing fds until its requests go unanswered (its
#      closes backed up, its sessions not read, nor dropped as idle, with
#      an idle timeout of 2 s), while uid $USER2 is still served and its
#      fds closed;
#   4. the FUSE server exits: the held closes return, uid $USER1's waiting
#      request is answered, and the daemon's fds are back to where they were.
. "$(dirname "$0")/lib.sh"

is_root || skip "needs root (mounts FUSE)"
[ -c /dev/fuse ] || skip "no /dev/fuse"
ibvd_init
O=$T/out
IDLE=2

. "$(dirname "$0")/stuckfs.sh"

conf=$(default_conf) || exit 1
IBVERBSD_IDLE_TIMEOUT=$IDLE daemon_start -c "$conf"
daemon_wait_ready

stuckfs_start

# held: how many of the daemon's FLUSHes the server holds now.
held() { grep -c '^held ' "$O/stuckfs"; }

base=$(daemon_fds_settled)
log "the daemon has $base fds"

check "uid $USER1 passes 10 fds whose close blocks"
run_as "$USER1" "$T/bin/badclient-helper" "$SOCK" stuckfds "$FUSE_DIR/f" 10 >"$O/stuckfds" 2>&1 ||
	{ show stuckfds "$O/stuckfds"; fail "stuckfds"; }
[ "$(held)" -ge 1 ] || { show stuckfs "$O/stuckfs"; fail "no FLUSH of the daemon held"; }
ok "$(tail -n 2 "$O/stuckfds" | head -n 1); the server holds $(held) of the daemon's closes"

# closes_done WHAT MAX: the daemon's fds settle at most MAX above the base.
closes_done() {
	local n
	n=$(daemon_fds_settled)
	[ "$n" -le $((base + $2)) ] ||
		{ show "daemon log" "$DAEMON_LOG"; fail "$1: the daemon has $n fds, $base before (at most $2 more expected)"; }
	log "$1: the daemon has $n fds ($base before)"
}

check "uid $USER2's fds and uid $USER1's plain connections are closed meanwhile"
run_as "$USER2" "$T/bin/badclient-helper" "$SOCK" closeburst 200 "$TMUL" >"$O/closeburst" 2>&1 ||
	{ show closeburst "$O/closeburst"; fail "closeburst while uid $USER1's closes are stuck"; }
run_as "$USER1" "$T/bin/badclient-helper" "$SOCK" connects 200 "$TMUL" >"$O/connects" 2>&1 ||
	{ show connects "$O/connects"; fail "uid $USER1's connections while its closes are stuck"; }
# uid $USER1's 10 files wait in its queue; a spare socket pair or two
closes_done "after 200 connections of each uid" 16
ok "uid $USER2: $(tail -n 2 "$O/closeburst" | head -n 1); uid $USER1: $(tail -n 2 "$O/connects" | head -n 1)"

check "uid $USER1 floods until its sessions are paused; uid $USER2 is still served"
TMO=$((TMO * 3)) run_as "$USER1" "$T/bin/badclient-helper" "$SOCK" stuckflood "$FUSE_DIR/f" "$TMUL" >"$O/stuckflood" 2>&1 &
flood=$!
for _ in $(seq $((600 * TMUL))); do
	grep -q 'stuckflood: paused: ' "$O/stuckflood" && break
	pid_running "$flood" || break
	sleep 0.1
done
grep -q 'stuckflood: paused: ' "$O/stuckflood" ||
	{ wait "$flood"; show stuckflood "$O/stuckflood"; fail "uid $USER1's requests were never paused"; }
sent=$(sed -n 's/.*stuckflood: paused: .*(\([0-9]*\) fds sent).*/\1/p' "$O/stuckflood")
# it is paused only once 1,024 of its fds wait (10 of them from before)
[ "$sent" -ge $((1024 - 10)) ] ||
	{ show stuckflood "$O/stuckflood"; fail "paused after only $sent fds"; }
run_as "$USER2" "$T/bin/badclient-helper" "$SOCK" closeburst 100 "$TMUL" >"$O/closeburst2" 2>&1 ||
	{ show closeburst "$O/closeburst2"; fail "closeburst while uid $USER1 is paused"; }
closes_done "after uid $USER2's 100 more connections" $((sent + 32))
ok "$(grep -o 'paused: .*' "$O/stuckflood"); $(tail -n 2 "$O/closeburst2" | head -n 1)"
grep -q "uid $USER1: closing its file has taken" "$DAEMON_LOG" ||
	{ show "daemon log" "$DAEMON_LOG"; fail "the daemon did not say whose close is stuck"; }
[ "$(status_count closes_stuck)" -ge 1 ] && [ "$(status_count closes_waiting)" -ge 1000 ] ||
	{ show status "$O/status"; fail "ibvctl daemon status does not show the stuck closes"; }
log "ibvctl daemon status: $(cat "$O/status")"
# a paused session is not idle: twice the idle timeout, and still there
sleep $((2 * IDLE))

check "the FUSE server exits: the held closes return, nothing is lost"
kill -TERM "$STUCKFS"
wait_exit "$STUCKFS" 10 || fail "stuckfs-helper did not exit"
STUCKFS=""
wait "$flood" || { show stuckflood "$O/stuckflood"; fail "stuckflood"; }
closes_done "after the FUSE server exited" 2
[ "$(status_count closes_stuck)" -eq 0 ] && [ "$(status_count closes_waiting)" -eq 0 ] ||
	{ show status "$O/status"; fail "ibvctl daemon status still shows closes waiting"; }
ok "$(grep 'after the pause' "$O/stuckflood"); the daemon's fds are back to $base"
daemon_alive "at the end"
