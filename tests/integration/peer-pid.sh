#!/bin/bash
# A client's pid taken by another process before the daemon reads /proc.
# The daemon learns a client's cgroup from /proc/PID, and the pid is
# SO_PEERCRED's, the one of the process that called connect().  If that
# process exits and another takes its pid before the daemon accepts, /proc
# describes the other one: its cgroup, which the limits' cgroup rules
# would give the connection (a child that inherited the socket keeps it
# open).  The daemon is stopped while a process of uid $USER1 connects,
# hands the socket to its child and exits; a process in a cgroup of its own
# then takes the pid (kernel.ns_last_pid), and the daemon goes on.  The
# socket's peer has exited, so what /proc says of its pid is nobody's
# (SO_PEERPIDFD; a kernel without it keeps the older check, the pid's
# start time, and the test skips): with a rule of the impostor's cgroup in
# the limits, the connection is refused as one whose cgroup is unknown,
# and the uid does not get that rule.
. "$(dirname "$0")/lib.sh"

is_root || skip "needs root: kernel.ns_last_pid, cgroups, uid $USER1"
[ -w /proc/sys/kernel/ns_last_pid ] || skip "kernel.ns_last_pid is not writable"
# the cgroup v2 hierarchy, the one the daemon reads ("0::" in /proc/PID/cgroup)
CG2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
[ -n "$CG2" ] && [ -w "$CG2/cgroup.procs" ] || skip "no cgroup v2 hierarchy to make a cgroup in"
"$PYTHON" -c 'import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
t = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0ibvd-peer-pid-probe-%d" % __import__("os").getpid()); s.listen(1)
t.connect(s.getsockname()); a, _ = s.accept()
a.getsockopt(socket.SOL_SOCKET, 77)' 2>/dev/null || skip "no SO_PEERPIDFD in this kernel"
ibvd_init
O=$T/out
CG=$CG2/ibvd-peer-pid-$$
mkdir "$CG" || fail "cannot make $CG"
peer_cleanup() {
	local rc=$?
	[ -n "$DAEMON_PID" ] && kill -CONT "$DAEMON_PID" 2>/dev/null
	# the holder and the impostor, which outlive their parent
	# shellcheck disable=SC2046 # one pid a line
	[ -s "$O/pids" ] && kill -KILL $(cat "$O/pids") 2>/dev/null
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		rmdir "$CG" 2>/dev/null && break
		sleep 0.1
	done
	(exit "$rc")
	ibvd_cleanup
}
trap peer_cleanup EXIT

# A rule of the impostor's cgroup: without one, a client whose cgroup is
# unknown is served at the default limits, as before.
conf=$(default_conf) || exit 1
"$PYTHON" - "$conf" "/${CG##*/}" <<-'EOF' || fail "cannot write $conf"
	import json, sys
	cfg = json.load(open(sys.argv[1]))
	cfg["limits"] = {"cgroup": {sys.argv[2]: {"qp": 7}}}
	json.dump(cfg, open(sys.argv[1], "w"), indent=2)
	EOF
daemon_start -c "$conf"
daemon_wait_ready

check "a connection whose process exited and whose pid another took"
# take-pid SOCK UID CGROUP PIDFILE: prints the pid the client connected
# from, once the process in CGROUP has it; the holder and the impostor
# sleep until killed (their pids in PIDFILE).
kill -STOP "$DAEMON_PID"
"$PYTHON" - "$SOCK" "$USER1" "$CG" "$O/pids" >"$O/take" 2>&1 <<-'EOF' &
	import os, signal, socket, sys, time
	path, uid, cg, pidfile = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
	pids = []

	def child(run):
	    pid = os.fork()
	    if pid == 0:
	        try:
	            run()
	        finally:
	            os._exit(1)
	    return pid

	def client():
	    os.setgroups([]); os.setgid(uid); os.setuid(uid)
	    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
	    s.connect(path)
	    holder = child(lambda: time.sleep(3600))   # keeps s open
	    os.write(1, b"%d\n" % holder)
	    os._exit(0)

	r, w = os.pipe()
	def run_client():
	    os.dup2(w, 1)
	    client()
	peer = child(run_client)
	os.close(w)
	pids.append(int(os.read(r, 64)))
	def save_pids():
	    with open(pidfile, "w") as f:
	        f.write("\n".join(map(str, pids)) + "\n")
	save_pids()
	os.waitpid(peer, 0)          # reaped: its pid is free

	def impostor():
	    if os.getpid() != peer:
	        os._exit(1)
	    with open(os.path.join(cg, "cgroup.procs"), "w") as f:
	        f.write("0")
	    os.write(w2, b"x")
	    time.sleep(3600)

	r2, w2 = os.pipe()
	for _ in range(50):
	    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
	        f.write(str(peer - 1))
	    pid = child(impostor)
	    if pid == peer:
	        break
	    os.waitpid(pid, 0)        # another process took the pid first
	else:
	    sys.exit("pid %d was always taken by another process" % peer)
	os.read(r2, 1)
	pids.append(peer)
	save_pids()
	print(peer, flush=True)
	signal.pause()
EOF
BG_PIDS+=($!)
for _ in $(seq $((100 * TMUL))); do
	[ -s "$O/take" ] && break
	sleep 0.1
done
kill -CONT "$DAEMON_PID"
peer=$(head -n 1 "$O/take")
case $peer in
''|*[!0-9]*) show take "$O/take"; fail "the pid was not taken" ;;
esac
ok "pid $peer connected as uid $USER1, exited, and now is a process in $CG"
# Refused, as any client of a uid whose cgroup the daemon cannot know
# while the limits have cgroup rules; the impostor's rule is nobody's.
for _ in $(seq $((50 * TMUL))); do
	grep -q "refusing a connection from pid $peer uid $USER1: its cgroup is unknown" "$DAEMON_LOG" && break
	sleep 0.1
done
ibvctl -j limit show uid "$USER1" >"$O/limit" 2>&1 || { show "limit show" "$O/limit"; fail "ibvctl limit show"; }
grep -q "cgroup /${CG##*/}" "$O/limit" &&
	{ show "limit show" "$O/limit"; fail "uid $USER1 was given the rule of the cgroup of the process that took its pid"; }
expect_grep "refusing a connection from pid $peer uid $USER1: its cgroup is unknown" "$DAEMON_LOG" "the daemon's log"
ok "refused: its cgroup is unknown; uid $USER1 has no rule of /${CG##*/}"
