#!/bin/bash
# Least privilege (ibverbsd(8), SECURITY).
#  1. Started as root with --user 1003: the daemon runs as 1003 with no
#     capability at all (permitted, effective, bounding, ambient) and
#     no_new_privs; its raw-socket broker runs as 1003 with CAP_NET_RAW
#     alone; its leftovers process keeps uid 0 and no capability.  It
#     serves Debian's ibv_rc_pingpong between uids 1001 and 1002, refuses a
#     registration of unmapped memory (the client's maps fd), and a RoCE
#     device in a network namespace still opens its raw sockets (broker).
#  2. SIGTERM: daemon, broker and leftovers end; the socket is gone.
#  3. SIGKILL: the leftovers process removes the socket anyway.
#  4. Started as uid 1003 with only CAP_NET_RAW, as systemd starts it
#     (DynamicUser=, AmbientCapabilities=CAP_NET_RAW): the daemon gives
#     it up, the broker keeps it, the RoCE device works.
#  5. Started without root, a "user" of someone else is refused; an
#     unknown "user" fails the configuration.
. "$(dirname "$0")/lib.sh"

need_cmd ip setpriv ps
ibvd_init
O=$T/out
NS=ibvd-priv-$$
VA=vpa$$
VB=vpb$$

priv_cleanup() {
	local rc=$?
	trap - EXIT
	[ -n "$DAEMON_PID" ] && { kill -KILL "$DAEMON_PID"; wait "$DAEMON_PID"; } 2>/dev/null
	DAEMON_PID=""
	ip netns del "$NS" 2>/dev/null
	(exit "$rc")
	ibvd_cleanup
}
trap priv_cleanup EXIT

# caps PID FIELD: the hex value of FIELD (CapPrm, CapEff, ...) of PID.
caps() { sed -n "s/^$2:[[:space:]]*//p" "/proc/$1/status"; }
uid_of() { awk '/^Uid:/ { print $2 }' "/proc/$1/status"; }
child() { ps -o pid=,comm= --ppid "$1" | awk -v c="$2" '$2 == c { print $1 }'; }
NET_RAW=0000000000002000
NONE=0000000000000000

ip netns add "$NS" 2>"$O/netns.err" || { show "ip netns add" "$O/netns.err"; skip "cannot create a network namespace"; }
ip -n "$NS" link set lo up
ip -n "$NS" link add "$VA" type veth peer name "$VB" || fail "ip link add"
ip -n "$NS" link set "$VA" up && ip -n "$NS" link set "$VB" up || fail "ip link set up"
ip -n "$NS" addr add 10.78.0.1/24 dev "$VA" || fail "ip addr add"
cat >"$T/bin/ibverbsd-in-ns" <<EOT
#!/bin/sh
exec ip netns exec "$NS" "$IBVERBSD" "\$@"
EOT
chmod 755 "$T/bin/ibverbsd-in-ns"
REAL_IBVERBSD=$IBVERBSD
IBVERBSD=$T/bin/ibverbsd-in-ns
conf=$T/priv.conf
cat >"$conf" <<EOT
{
  "socket": { "path": "$SOCK" },
  "device_links": false,
  "devices": [ { "name": "ibvd0" }, { "name": "roce0", "netdev": "$VA" } ]
}
EOT
chmod 644 "$conf"

# check_running EXPECT_UID FIELDS: the daemon and its children as section
# 1 says; FIELDS are the daemon's capability sets that must be empty.  (A
# daemon started without CAP_SETPCAP cannot empty its bounding set; with
# nothing permitted and no_new_privs it can never use it either.)
check_running() {
	local broker
	[ "$(uid_of "$DAEMON_PID")" = "$1" ] || fail "daemon uid $(uid_of "$DAEMON_PID"), expected $1"
	for f in $2; do
		[ "$(caps "$DAEMON_PID" $f)" = $NONE ] || fail "daemon $f is $(caps "$DAEMON_PID" $f)"
	done
	grep -q '^NoNewPrivs:[[:space:]]*1' "/proc/$DAEMON_PID/status" || fail "daemon without no_new_privs"
	broker=$(child "$DAEMON_PID" ibvd-netraw)
	[ -n "$broker" ] || fail "no raw-socket broker (ibvd-netraw) under the daemon"
	[ "$(uid_of "$broker")" = "$1" ] || fail "broker uid $(uid_of "$broker"), expected $1"
	[ "$(caps "$broker" CapPrm)" = $NET_RAW ] || fail "broker CapPrm $(caps "$broker" CapPrm)"
	[ "$(caps "$broker" CapEff)" = $NET_RAW ] || fail "broker CapEff $(caps "$broker" CapEff)"
	[ "$(caps "$broker" CapAmb)" = $NONE ] || fail "broker CapAmb $(caps "$broker" CapAmb)"
	[ "$(ls "/proc/$broker/fd" | wc -l)" -le 4 ] || { ls -l "/proc/$broker/fd"; fail "the broker holds more than stdio and its socket"; }
	BROKER=$broker
}

# serves: Debian's ibv_rc_pingpong between uids 1001 and 1002, and the
# RoCE device is up (its raw sockets came from the broker).
serves() {
	local port spid
	port=$(free_port)
	run_debian "$USER1" /usr/bin/ibv_rc_pingpong -n 50 -p "$port" >"$O/pp.s" 2>&1 &
	spid=$!
	BG_PIDS+=("$spid")
	wait_tcp_listen "$port" "$spid" || { show server "$O/pp.s"; fail "pingpong server never listened"; }
	run_debian "$USER2" /usr/bin/ibv_rc_pingpong -n 50 -p "$port" localhost >"$O/pp.c" 2>&1 ||
		{ show client "$O/pp.c"; fail "ibv_rc_pingpong client"; }
	wait_exit "$spid" "$TMO" && [ "$EXIT_STATUS" -eq 0 ] || { show server "$O/pp.s"; fail "ibv_rc_pingpong server"; }
	run_debian "$USER1" /usr/bin/ibv_devinfo -d roce0 >"$O/devinfo" 2>&1 || { show devinfo "$O/devinfo"; fail "ibv_devinfo -d roce0"; }
	expect_grep 'state:[[:space:]]+PORT_ACTIVE' "$O/devinfo" "roce0 port active"
	grep -q "roce0: .*raw" "$DAEMON_LOG" && { show log "$DAEMON_LOG"; fail "roce0 could not open its raw sockets"; }
	return 0
}

# fd 7, root's file, is open in the shell that starts the daemon: once
# uid 1003, the daemon must not hold it.
check "started as root with --user 1003"
: >"$T/root-only" && chmod 600 "$T/root-only"
daemon_start -c "$conf" 7<"$T/root-only"
daemon_wait_ready
check_running 1003 "CapPrm CapEff CapBnd CapAmb CapInh"
held=$(ls -l "/proc/$DAEMON_PID/fd" 2>/dev/null | grep -c "root-only")
[ "$held" = 0 ] || { ls -l "/proc/$DAEMON_PID/fd"; fail "the daemon kept root's fd 7 across the drop"; }
leftovers=$(child "$DAEMON_PID" ibvd-leftovers)
[ -n "$leftovers" ] || fail "no leftovers process under the daemon"
[ "$(uid_of "$leftovers")" = 0 ] || fail "leftovers uid $(uid_of "$leftovers")"
[ "$(caps "$leftovers" CapPrm)" = $NONE ] && [ "$(caps "$leftovers" CapBnd)" = $NONE ] ||
	fail "leftovers keeps capabilities: $(caps "$leftovers" CapPrm) / $(caps "$leftovers" CapBnd)"
serves
ok "uid 1003, no capability, no inherited fd; broker uid 1003 with CAP_NET_RAW only; leftovers uid 0 without capabilities; pingpong and roce0 work"

check "registration of unmapped memory refused (maps fd, not /proc/PID/maps)"
run_as "$USER1" env IBVERBSD_SOCKET="$SOCK" "$T/tools/ibverbsd-run" \
	"$T/bin/ctxclient-helper" -d ibvd0 <<<"regunmapped" >"$O/unmapped" 2>&1
expect_grep '^ok regunmapped EFAULT$' "$O/unmapped" "unmapped registration refused"
ok "EFAULT"

check "SIGTERM: daemon, broker and leftovers end; the socket is gone"
daemon_stop
for p in "$BROKER" "$leftovers"; do
	for i in $(seq 20); do [ -e "/proc/$p" ] || break; sleep 0.1; done
	[ -e "/proc/$p" ] && fail "process $p outlived the daemon"
done
[ -e "$SOCK" ] && fail "$SOCK is still there"
ok "all gone"

check "SIGKILL: the leftovers process removes the socket"
daemon_start -c "$conf"
daemon_wait_ready
daemon_kill
for i in $(seq $((20 * TMUL))); do [ -e "$SOCK" ] || break; sleep 0.1; done
[ -e "$SOCK" ] && fail "$SOCK is still there 2 s after the daemon was killed"
ok "socket removed"

# Run in the foreground from root's terminal (a shell on a pty), the
# daemon, once uid 1003, must not keep that terminal: it could push input
# into root's shell (TIOCSTI).
check "started from a terminal: the daemon lets it go before it becomes uid 1003"
"$PYTHON" - "$IBVERBSD" "$conf" "$T/run/tty.sock" >"$O/tty" 2>&1 <<'EOF' ||
import os, pty, signal, sys, time
daemon, conf, sock = sys.argv[1:4]
pid, master = pty.fork()
if pid == 0:	# a shell on the pty, as root's would be; the daemon its child
    os.execv("/bin/sh", ["sh", "-c", '"$0" -f --user 1003 -c "$1" --socket "$2"; true',
                         daemon, conf, sock])
def stat(p):
    with open("/proc/%d/stat" % p) as f:
        s = f.read()
    return s[s.rindex(")") + 2:].split()	# state ppid pgrp session tty_nr
def kids(p):
    with open("/proc/%d/task/%d/children" % (p, p)) as f:
        return [int(c) for c in f.read().split()]
for _ in range(100):
    if os.path.exists(sock):
        break
    time.sleep(0.1)
time.sleep(0.5)
d = [c for c in kids(pid)]
assert len(d) == 1, "the shell's children: %s" % d
d = d[0]
procs = [d] + kids(d)	# the daemon, its broker and leftovers
ttys = {p: int(stat(p)[4]) for p in procs}
shell = int(stat(pid)[4])
print("shell tty_nr", shell, "daemon, broker, leftovers:", ttys)
os.kill(d, signal.SIGTERM)
os.waitpid(pid, 0)
assert shell != 0, "the shell has no terminal: nothing shown"
assert len(procs) == 3, "not the daemon, its broker and leftovers: %s" % procs
assert all(t == 0 for t in ttys.values()), "a process kept the terminal: %s" % ttys
EOF
	{ show output "$O/tty"; fail "the daemon kept root's terminal"; }
show output "$O/tty"
ok "$(grep -o 'daemon, broker, leftovers.*' "$O/tty")"

# Clients hand the daemon their memory: no other user may be able to put
# a socket of theirs where ours is.  A directory on the way must be
# root's or the daemon's, and not writable by others without the sticky
# bit; one the daemon makes is 0755 whatever the umask.
check "a socket directory another user owns or may rewrite is refused"
for kind in owned open; do
	dir=$T/$kind
	mkdir "$dir" || fail "mkdir $dir"
	if [ "$kind" = owned ]; then chown 1004 "$dir"; else chmod 0777 "$dir"; fi
	timeout 20 "$IBVERBSD" -f --user 1003 -c "$conf" --socket "$dir/s.sock" >"$O/dir-$kind" 2>&1 &&
		{ show log "$O/dir-$kind"; fail "the daemon started with its socket in $dir ($kind)"; }
	[ ! -e "$dir/s.sock" ] || fail "a socket was made in $dir"
done
expect_grep "belongs to uid 1004, neither root nor us" "$O/dir-owned" "a directory of uid 1004"
expect_grep "writable by others without the sticky bit" "$O/dir-open" "a 0777 directory"
umask_was=$(umask)
umask 077
daemon_start -c "$conf" --socket "$T/um/new/s.sock"
umask "$umask_was"
daemon_wait_ready "$T/um/new/s.sock"
[ "$(stat -c %a "$T/um/new")" = 755 ] && [ "$(stat -c %a "$T/um")" = 755 ] ||
	fail "directories made under umask 077: $(stat -c %a "$T/um") $(stat -c %a "$T/um/new"), want 755"
daemon_stop
ok "refused: $(grep -o 'belongs to uid 1004.*' "$O/dir-owned" | head -n 1); made under umask 077: 755"

check "started as uid 1003 with CAP_NET_RAW alone (as systemd starts it)"
chown 1003 "$T/run"
IBVD_NLOG=$((IBVD_NLOG + 1))
DAEMON_LOG="$T/daemon$IBVD_NLOG.log"
ip netns exec "$NS" setpriv --reuid=1003 --regid=1003 --clear-groups \
	--inh-caps=-all,+net_raw --ambient-caps=+net_raw --bounding-set=-all,+net_raw -- \
	"$REAL_IBVERBSD" -f -c "$conf" >"$DAEMON_LOG" 2>&1 &
DAEMON_PID=$!
daemon_wait_ready
check_running 1003 "CapPrm CapEff CapAmb CapInh"
[ -z "$(child "$DAEMON_PID" ibvd-leftovers)" ] || fail "a leftovers process without root"
serves
daemon_stop
chown 0 "$T/run"
ok "the daemon dropped CAP_NET_RAW, the broker kept it, roce0 works"

check "unprivileged with someone else's \"user\": refused"
chown 1003 "$T/run"
IBVERBSD=$REAL_IBVERBSD DAEMON_UID=1003 daemon_start -c "$(default_conf)" --user 1004
wait_exit "$DAEMON_PID" $((5 * TMUL)) || fail "still running"
DAEMON_PID=""
[ "$EXIT_STATUS" -ne 0 ] || fail "exited 0"
chown 0 "$T/run"
expect_grep 'cannot become user 1004: not started as root' "$DAEMON_LOG" "the reason"
ok "$(grep -o 'cannot become.*' "$DAEMON_LOG" | head -n 1)"

check "an unknown \"user\" fails the configuration"
sed 's/"device_links"/"user": "no-such-user-ibvd", "device_links"/' "$conf" >"$T/bad.conf"
chmod 644 "$T/bad.conf"
timeout $((10 * TMUL)) "$IBVERBSD" -f -c "$T/bad.conf" >"$O/bad.log" 2>&1 && fail "started with an unknown user"
expect_grep 'no such user "no-such-user-ibvd"' "$O/bad.log" "config error"
ok "$(grep -o 'no such user.*' "$O/bad.log")"
