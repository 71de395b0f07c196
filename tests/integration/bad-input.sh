#!/bin/bash
# Bad input from a client gets an error reply or, for framing violations, a
# disconnect of that client alone: one badclient-helper case at a time
# (see tests/integration/badclient.c for what each case asserts).  After
# every case the daemon is alive, a context held by an unprivileged client
# since before the case still works, a fresh well-behaved client (Debian's
# ibv_devices) works, and ibvctl daemon status answers.  Then: the per-uid
# connection cap, who may administer, client words in error messages,
# connections hung up before their accept (closed unserved), and
# (with daemons of their own) a reply JSON cannot carry and a symlink put
# in place of the socket.
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

# Cases run as an unprivileged uid, except "fds", "sharedmr", "mappedcap" and "cmqp",
# which read the daemon's /proc/PID/fd or maps and so run as the daemon's user.
# fuzz: 40000 random/mutated requests from seed 1 (IBVD_FUZZ_SEED=N for another).
for c in malformed oversized truncated badmagic badversion badlen unknowntype \
	 answers reqid fds attachfds sharedmr mappedcap cmqp direct dm notopen silent idle flood lingerfd fuzz; do
	check "case $c"
	arg=""
	uid=$USER1
	case $c in
	fds|sharedmr|mappedcap|cmqp) arg=$DAEMON_PID; uid=$(id -u) ;;
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
expect_grep "sent its CM event socket something other than CM_TAKEN; disconnecting" "$DAEMON_LOG" \
	"cmqp's frame on the CM event socket is logged"

# An app that exits with a CM event unread resets the event socket (the
# daemon's read fails with ECONNRESET): a close, which logs nothing.
check "case cmreset: an app gone with a CM event unread is not logged as misbehaving"
logged=$(grep -c 'something other than CM_TAKEN' "$DAEMON_LOG")
run_as "$USER1" "$T/bin/badclient-helper" "$SOCK" cmreset >"$O/cmreset" 2>&1 ||
	{ show "badclient cmreset" "$O/cmreset"; fail "case cmreset: badclient-helper failed"; }
show "badclient cmreset" "$O/cmreset"
[ "$(grep -c 'something other than CM_TAKEN' "$DAEMON_LOG")" -eq "$logged" ] ||
	{ show "daemon log" "$DAEMON_LOG"; fail "case cmreset: the reset was logged as a misbehaving client"; }
after_case cmreset

# Log lines a client causes are limited per uid: one uid's flood of
# rejected requests does not silence another's (once, one budget for all).
check "uid $USER1 floods rejected requests; uid $USER2's violation is still logged"
answered=$(grep -c 'sent an answer' "$DAEMON_LOG")
run_as "$USER1" "$T/bin/badclient-helper" "$SOCK" unknownflood 3000 >"$O/unknownflood" 2>&1 &
flood=$!
sleep 1
run_as "$USER2" "$T/bin/badclient-helper" "$SOCK" answers >"$O/answers2" 2>&1 ||
	{ show "badclient answers" "$O/answers2"; fail "answers as uid $USER2"; }
wait "$flood" || { show "badclient unknownflood" "$O/unknownflood"; fail "unknownflood"; }
# the answers case sends three answers, each a line
answered=$(($(grep -c 'sent an answer' "$DAEMON_LOG") - answered))
[ "$answered" -eq 3 ] ||
	{ show "daemon log" "$DAEMON_LOG"; fail "uid $USER2's 3 answers logged $answered times during the flood"; }
ok "$(grep -E 'unknown types' "$O/unknownflood"); uid $USER2's 3 lines logged"

# Rings are the daemon's memory: 256 MiB per context, and 4 GiB for all
# of one uid's (16 contexts' worth); once a context goes, its share comes
# back.
check "uid $USER1's rings: 4 GiB in all contexts together"
run_ours "$USER1" "$T/bin/quota-helper" ringbytes >"$O/ringbytes" 2>&1 ||
	{ show quota-helper "$O/ringbytes"; fail "quota-helper ringbytes failed"; }
expect_grep '^ringbytes: 6[0-3] CQs in 2[01] contexts, context 2[12] refused its first \(Cannot allocate memory\); after one closed: a CQ$' \
	"$O/ringbytes" "the uid's ring bytes"
daemon_alive "after 4 GiB of rings"
ok "$(sed -n 's/^ringbytes: //p' "$O/ringbytes")"

# One uid holds at most 1024 connections (the built-in "session" limit); root
# and other uids are still served meanwhile, and the library says why it
# fails for that uid.  Root only: otherwise the test shares that uid.
if is_root; then
	CAP=1024
	check "case peruid: $USER1 holds $CAP connections"
	rm -f "$T/peruid.in"
	mkfifo "$T/peruid.in" || fail "mkfifo"
	chmod 644 "$T/peruid.in"
	# (the helper needs more than the default 1024 fds)
	(ulimit -n $((CAP * 4)) && run_as "$USER1" "$T/bin/badclient-helper" "$SOCK" peruid $CAP \
		<"$T/peruid.in" >"$O/peruid" 2>&1) &
	peruid_pid=$!
	BG_PIDS+=("$peruid_pid")
	exec 8>"$T/peruid.in"
	for _ in $(seq $((TMO * 10))); do
		grep -q '^holding ' "$O/peruid" && break
		pid_running "$peruid_pid" || break
		sleep 0.1
	done
	if ! grep -q '^holding ' "$O/peruid"; then
		exec 8>&-
		show "badclient peruid" "$O/peruid"
		fail "case peruid: the helper did not reach the cap"
	fi
	ibvctl daemon status >"$O/status" 2>&1 ||
		{ show "ibvctl daemon status" "$O/status"; fail "root not served while uid $USER1 is at its cap"; }
	run_debian "$USER2" /usr/bin/ibv_devices >"$O/devices" 2>&1 ||
		{ show ibv_devices "$O/devices"; fail "uid $USER2 not served while uid $USER1 is at its cap"; }
	run_debian "$USER1" /usr/bin/ibv_devices >"$O/devices-capped" 2>&1
	expect_failed $? "ibv_devices as uid $USER1 at its cap"
	expect_grep 'too many clients' "$O/devices-capped" "ibv_devices as uid $USER1 at its cap"
	exec 8>&-
	wait_exit "$peruid_pid" "$TMO" || fail "case peruid: the helper did not exit"
	show "badclient peruid" "$O/peruid"
	[ "$EXIT_STATUS" -eq 0 ] || fail "case peruid: badclient-helper exited $EXIT_STATUS"
	ok "the uid at its cap is refused with \"too many clients\"; root and uid $USER2 are served"
	after_case peruid
else
	log "not root: the per-uid cap cannot be checked"
fi

# Root or the config's admin group may administer.  By default that is
# a group of its own, ibverbsd-admin, never "rdma", the group Debian gives
# RDMA users and a socket is often opened to: a member of rdma is refused.
# With "admin_group": "rdma" (a reload looks the group up again), a member
# may, the group as primary or as a supplementary group, as the socket's
# peer credentials say.
check "who may run daemon reload"
if is_root && getent group rdma >/dev/null; then
	reload_as() {	# OUT SETPRIV-GROUP-OPTIONS...: daemon reload as $USER1
		local out=$1
		shift
		(cd "$T" && timeout -k 2 "$TMO" setpriv --reuid="$USER1" "$@" -- \
			"$T/bin/badclient-helper" "$SOCK" admin daemon reload) >"$out" 2>&1
	}
	admin_group_reload() {	# GROUP: the config's admin_group, reloaded by root
		"$PYTHON" - "$conf" "$1" <<-'EOF' || fail "cannot rewrite $conf"
		import json, sys
		cfg = json.load(open(sys.argv[1]))
		cfg["admin_group"] = sys.argv[2]
		json.dump(cfg, open(sys.argv[1], "w"), indent=2)
		EOF
		"$T/bin/badclient-helper" "$SOCK" admin daemon reload >"$O/reload-root" 2>&1
		expect_grep '^reply \[\]$' "$O/reload-root" "daemon reload as root (admin_group $1)"
	}
	reload_as "$O/reload-default" --regid="$USER1" --groups=rdma
	# (error 1: EPERM)
	expect_grep "^error 1 .*requires root or group ibverbsd-admin" "$O/reload-default" \
		"daemon reload as uid $USER1 in group rdma, by default"
	admin_group_reload rdma
	reload_as "$O/reload-rdma1" --regid="$USER1" --groups=rdma
	expect_grep '^reply \[\]$' "$O/reload-rdma1" "daemon reload as uid $USER1, rdma supplementary"
	reload_as "$O/reload-rdma2" --regid=rdma --clear-groups
	expect_grep '^reply \[\]$' "$O/reload-rdma2" "daemon reload as uid $USER1, rdma primary"
	run_as "$USER1" "$T/bin/badclient-helper" "$SOCK" admin daemon reload >"$O/reload-user" 2>&1
	expect_grep "^error 1 .*requires root or group rdma" "$O/reload-user" \
		"daemon reload as uid $USER1 without the group"
	# A decimal gid names the group too, as the limits' group rules take it.
	rdma_gid=$(getent group rdma | cut -d: -f3)
	admin_group_reload "$rdma_gid"
	reload_as "$O/reload-gid" --regid="$USER1" --groups=rdma
	expect_grep '^reply \[\]$' "$O/reload-gid" "daemon reload as uid $USER1 in rdma, admin_group \"$rdma_gid\""
	# A group with many members (an LDAP group, say) takes more than a
	# small lookup buffer: still found.  (A stale one of an earlier run
	# that failed goes first.)
	for g in $(grep -o '^ibvd-big-[0-9]*' /etc/group); do groupdel "$g"; done
	big=ibvd-big-$$
	groupadd "$big" || fail "groupadd $big"
	members=$(seq -f 'ibvdmember%04g' 1 800 | paste -sd,)
	sed -i "s/^$big:\([^:]*\):\([^:]*\):\$/$big:\1:\2:$members/" /etc/group
	[ "$(getent group "$big" | wc -c)" -gt 8192 ] || { groupdel "$big"; fail "no 8 KiB group made"; }
	admin_group_reload "$big"
	reload_as "$O/reload-big" --regid="$USER1" --groups="$big"
	groupdel "$big"
	expect_grep '^reply \[\]$' "$O/reload-big" "daemon reload as uid $USER1 in a group of 800 members"
	ok "uid $USER1 in group rdma may not reload by default; with admin_group rdma may (primary or supplementary), and not without it; admin_group \"$rdma_gid\" (rdma's gid) is the same group; so is a group of 800 members"
else
	log "not root or no group rdma: the group check cannot be run"
fi

# A client's words come back in error messages without control characters.
check "control characters in an error message"
run_as "$USER1" "$T/bin/badclient-helper" "$SOCK" admin link show $'ibvd9\n<3>forged\r' \
	>"$O/forged" 2>&1
[ "$(wc -l <"$O/forged")" -eq 1 ] || { show output "$O/forged"; fail "the error message spans lines"; }
expect_grep '^error [0-9]+ unknown device ibvd9\?<3>forged\?$' "$O/forged" "the forged device name"
ok "control characters in the message are replaced"

# A client with no fd number left cannot take a reply's fds: its create
# fails with EMFILE, and the daemon does not keep what it made for it.
check "creates from a client out of fds: EMFILE, and nothing left in the daemon"
# objects: what ibvctl counts for the context client (ctxclient-helper)
objects() {
	ibvctl -j client show uid "$USER2" >"$O/clients" 2>&1 || fail_all "ibvctl client show"
	"$PYTHON" - "$O/clients" <<'EOF' || fail_all "no context client in ibvctl client show"
import json, sys
rows = [r for r in json.load(open(sys.argv[1])) if r["comm"].startswith("ctxclient")]
assert len(rows) == 1, rows
print(rows[0]["objects"])
EOF
}
n0=$(objects)
ctx_cmd nofd
[ "$CTX_ANSWER" = "ok nofd" ] || fail "out of fds: $CTX_ANSWER (want EMFILE for each)"
ctx_cmd query	# the undo's destroys go before this call's reply
n1=$(objects)
[ "$n1" = "$n0" ] || fail "the daemon counts $n1 objects for the client, $n0 before"
ok "ibv_alloc_dm and ibv_create_comp_channel failed with EMFILE; objects $n0 before and after"

# A connection whose client closed before saying anything is closed
# unserved: no session, none of its /proc reads.  Else a uid connecting and
# closing in a loop fills the listen backlog with connections that each
# cost the control thread a session's set-up, and another uid's connect
# waits about a second behind them.  The daemon is stopped while they
# queue, so every one has hung up by its accept; the ping queued after
# them is answered once they all went.  Counted: the daemon's read
# syscalls (a session reads five /proc files) and its hung_up counter.
# Nor do they go through the closer threads' queue (closes_queued): each
# would hold an fd there until a closer thread gets the CPU, and a flood
# of them took the daemon to its fd limit.  A first one that left an
# empty message with an fd (a pipe's) is emptied: the fd is closed (on the
# queue), the connection is not served either.
HUNG=300
check "$HUNG connections closed before the daemon accepts them: closed unserved, not queued"
# daemon_reads: read syscalls of the daemon (all its threads) so far
daemon_reads() { sed -n 's/^syscr: //p' "/proc/$DAEMON_PID/io"; }
# connected_while_stopped LINE FILE PID: once PID's client prints LINE
# in FILE (its connections made), the stopped daemon goes on.
connected_while_stopped() {
	for _ in $(seq $((100 * TMUL))); do
		grep -q "^$1\$" "$2" && break
		pid_running "$3" || break
		sleep 0.1
	done
	kill -CONT "$DAEMON_PID"
	grep -q "^$1\$" "$2" || { show connects "$2"; fail "connecting $HUNG times failed"; }
}
hung0=$(status_count hung_up)
queued0=$(status_count closes_queued)
reads0=$(daemon_reads)
# the client stays until its connections are all accepted: /proc has it
{ mkfifo "$T/hold" && chmod 666 "$T/hold"; } || fail "mkfifo $T/hold"
kill -STOP "$DAEMON_PID" || fail "cannot stop the daemon"
run_as "$USER1" "$PYTHON" - "$SOCK" "$HUNG" "$T/hold" >"$O/hung" 2>&1 <<'EOF' &
import array, os, select, socket, sys
r, w = os.pipe()
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
s.sendmsg([b""], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [w]))])
s.close()
os.close(w)
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(sys.argv[1])
    s.close()
print("closed", flush=True)
open(sys.argv[3]).read()
gone = select.select([r], [], [], 10)[0] and os.read(r, 1) == b""
print("pipe closed" if gone else "pipe still open", flush=True)
EOF
hold_pid=$!
BG_PIDS+=("$hold_pid")
exec 8<>"$T/hold"
connected_while_stopped closed "$O/hung" "$hold_pid"
ping_daemon || fail "no answer after the $HUNG connections"
reads=$(($(daemon_reads) - reads0))
hung=$(($(status_count hung_up) - ${hung0:-0}))
queued=$(($(status_count closes_queued) - ${queued0:-0}))
[ "$reads" -lt "$HUNG" ] ||
	fail "the daemon made $reads read syscalls for $HUNG connections gone before their accept (a session set up for each)"
[ "$hung" -eq "$((HUNG + 1))" ] || { show status "$O/status"; fail "hung_up went up by $hung, not $((HUNG + 1))"; }
# the pipe's fd and the few sessions of ping and ibvctl
[ -n "$queued0" ] && [ "$queued" -lt 30 ] ||
	{ show status "$O/status"; fail "closes_queued went up by $queued for $HUNG hung-up connections"; }
exec 8>&-
wait_exit "$hold_pid" "$TMO" || fail "the connecting client did not exit"
grep -q '^pipe closed$' "$O/hung" || { show client "$O/hung"; fail "the fd the first connection left was not closed"; }
ok "$HUNG hung-up connections: hung_up +$hung, closes_queued +$queued, $reads read syscalls in all"

# A uid at its session limit connecting in a loop: each connection is
# refused before the /proc reads of its peer (which stays, so /proc has
# it), not after.  The limit: what uid $USER2's context client holds.
# Counted as above: the daemon's read syscalls, and the refusals.
check "$HUNG connections over the uid's session limit: refused before /proc is read"
held=$(limit_count current "$USER2" session)
ibvctl limit set uid "$USER2" session="$held" >"$O/set" 2>&1 ||
	{ show "limit set" "$O/set"; fail "limit set uid $USER2 session=$held"; }
refused0=$(limit_count refused "$USER2" session)
reads0=$(daemon_reads)
kill -STOP "$DAEMON_PID" || fail "cannot stop the daemon"
run_as "$USER2" "$PYTHON" - "$SOCK" "$HUNG" "$T/hold" >"$O/over" 2>&1 <<'EOF' &
import socket, sys
conns = []
for _ in range(int(sys.argv[2])):
    conns.append(socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET))
    conns[-1].connect(sys.argv[1])
print("connected", flush=True)
open(sys.argv[3]).read()
EOF
over_pid=$!
BG_PIDS+=("$over_pid")
exec 8<>"$T/hold"
connected_while_stopped connected "$O/over" "$over_pid"
ping_daemon || fail "no answer after the $HUNG connections"
reads=$(($(daemon_reads) - reads0))
refused=$(($(limit_count refused "$USER2" session) - refused0))
exec 8>&-
wait_exit "$over_pid" "$TMO" || fail "the connecting client did not exit"
ibvctl limit set uid "$USER2" session=max >"$O/set" 2>&1 ||
	{ show "limit set" "$O/set"; fail "limit set uid $USER2 session=max"; }
[ "$refused" -eq "$HUNG" ] || fail "$refused connections refused at the session limit ($held), not $HUNG"
[ "$reads" -lt "$HUNG" ] ||
	fail "the daemon made $reads read syscalls for $HUNG connections over their uid's session limit"
ctx_cmd query || fail "the context client after the refusals: $CTX_ANSWER"
ok "$HUNG connections refused at the session limit ($held): $reads read syscalls in all"

ctx_stop
daemon_stop

# A socket path that is not UTF-8 cannot go into JSON: daemon status says
# so, once, instead of "out of memory" twice.
check "a reply JSON cannot carry"
bad_sock=$T/run/$'\xff'.sock
daemon_start -c "$conf" --socket "$bad_sock"
daemon_wait_ready "$bad_sock"
ibvctl -s "$bad_sock" daemon status >"$O/status-bad" 2>&1
expect_failed $? "daemon status with a non-UTF-8 socket path"
[ "$(wc -l <"$O/status-bad")" -eq 1 ] || { show output "$O/status-bad"; fail "want exactly one line of error"; }
expect_grep '^ibvctl: cannot encode the reply: ' "$O/status-bad" "daemon status with a non-UTF-8 socket path"
ok "one error line: $(cat "$O/status-bad")"
daemon_stop

# The daemon changes the mode of its own socket file only: a symlink put in
# its place (to a file the daemon's user may change) is left alone, and the
# reload that asked for the change is refused as a whole.
check "a symlink in place of the socket"
sym_sock=$T/run/sym.sock
conf=$(default_conf "$sym_sock") || exit 1
daemon_start -c "$conf"
daemon_wait_ready "$sym_sock"
: >"$T/victim"
chmod 600 "$T/victim"
rm -f "$sym_sock"
ln -s "$T/victim" "$sym_sock"
sed -i 's/"mode": "0666"/"mode": "0660"/' "$conf"
grep -q '"0660"' "$conf" || fail "cannot change the socket mode in $conf"
kill -HUP "$DAEMON_PID"
for _ in $(seq 50); do
	grep -q 'reload failed' "$DAEMON_LOG" && break
	sleep 0.1
done
expect_grep 'reload failed, keeping the running configuration: socket permissions: .*sym.sock' \
	"$DAEMON_LOG" "reload with a symlink as the socket"
[ "$(stat -c %a "$T/victim")" = 600 ] || fail "the symlink's target got mode $(stat -c %a "$T/victim")"
daemon_stop
ok "the reload is refused rather than chmod through the symlink; its target keeps mode 600"
