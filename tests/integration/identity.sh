#!/bin/bash
# Who a client is, when /proc cannot say: the daemon runs in a pid
# namespace of its own, so every client's pid is 0 to it and /proc tells
# it nothing (as for a client whose process exits before the daemon reads
# /proc).  The kernel still says, at connect(), its uid, gid and
# supplementary groups (SO_PEERCRED, SO_PEERGROUPS); its cgroup only /proc
# knows.  With a "cgroup" rule in the limits:
#   - a uid's first client with no uid or group rule of its own is
#     refused (its tenant would take the default rule, and keep it);
#   - a client in a group with a rule is served: its groups come from the
#     socket, not from /proc;
#   - root is served (ibvctl from anywhere).
. "$(dirname "$0")/lib.sh"

is_root || skip "a pid namespace needs root"
need_cmd unshare setpriv
getent group rdma >/dev/null || skip "no group rdma to make a rule of"
ibvd_init
O=$T/out

conf=$(default_conf) || exit 1
# limits JSON: the configuration's "limits" become JSON.
limits() {
	"$PYTHON" - "$conf" "$1" <<-'EOF' || fail "cannot rewrite $conf"
	import json, sys
	cfg = json.load(open(sys.argv[1]))
	cfg["limits"] = json.loads(sys.argv[2])
	json.dump(cfg, open(sys.argv[1], "w"), indent=2)
	EOF
}
limits '{"cgroup": {"/": {"qp": 1}}, "group": {"rdma": {"qp": 3}}}'
# The daemon is the namespace's first process, unshare's child.  unshare
# ignores SIGTERM while it waits, and --kill-child's signal is lost when
# the daemon drops its privileges (a change of credentials clears it):
# the daemon itself is stopped, and unshare ends with it.
wrapper=$T/ibverbsd-pidns
cat >"$wrapper" <<-EOF
#!/bin/sh
exec unshare --pid --fork --mount-proc --kill-child=SIGTERM "$IBVERBSD" "\$@"
EOF
chmod 755 "$wrapper"
pidns_cleanup() {
	local rc=$? inner
	if [ -n "$DAEMON_PID" ]; then
		inner=$(pgrep -P "$DAEMON_PID" | head -n 1)
		[ -n "$inner" ] && kill -TERM "$inner" 2>/dev/null
	fi
	(exit "$rc")
	ibvd_cleanup
}
trap pidns_cleanup EXIT
IBVERBSD=$wrapper daemon_start -c "$conf"
daemon_wait_ready

need_cmd /usr/bin/ibv_devices
# devices_as OUT SETPRIV-GROUP-OPTIONS...: Debian's ibv_devices as $USER1
devices_as() {
	local out=$1
	shift
	debian_env
	(cd "$T" && timeout -k 2 "$TMO" setpriv --reuid="$USER1" "$@" -- \
		env "${DEBIAN_ENV[@]}" "$T/tools/ibverbsd-run" /usr/bin/ibv_devices) >"$out" 2>&1
}

check "a client whose cgroup the daemon cannot read, no rule of its uid or groups"
devices_as "$O/plain" --regid="$USER1" --clear-groups && {
	show client "$O/plain"
	fail "uid $USER1 was served with an unknown cgroup and cgroup rules"
}
expect_grep "cannot read this client's cgroup" "$O/plain" "ibv_devices' error"
expect_grep "its cgroup is unknown" "$DAEMON_LOG" "the daemon's log"
ok "refused: $(grep -m1 -o "the daemon cannot read this client's cgroup[^\"]*" "$O/plain")"

check "the same uid in group rdma (supplementary), which has a rule"
devices_as "$O/rdma" --regid="$USER1" --groups=rdma ||
	{ show client "$O/rdma"; fail "uid $USER1 in group rdma was refused"; }
expect_grep 'ibvd0' "$O/rdma" "ibv_devices' list"
ok "served: its groups came from the socket"

# More groups than the daemon keeps (64): the kernel still has them all
# at connect(), so those first 64 are taken from the socket too, not from
# /proc, which cannot tell here.
check "the same uid in group rdma and 70 more groups"
many=rdma
for g in $(seq 3000 3069); do many=$many,$g; done
devices_as "$O/many" --regid="$USER1" --groups="$many" ||
	{ show client "$O/many"; fail "uid $USER1 in group rdma and 70 more groups was refused"; }
expect_grep 'ibvd0' "$O/many" "ibv_devices' list"
ok "served: its first 64 groups came from the socket"

check "root is served"
"$T/bin/badclient-helper" "$SOCK" list >"$O/root" 2>&1 ||
	{ show client "$O/root"; fail "root was refused"; }
ok "served"

# A uid served while the limits had no cgroup rule has a tenant whose rule
# was chosen without its cgroup.  Once a reload brings cgroup rules, its
# sessions go on at the rule they had, but it may not open more while its
# cgroup cannot be read: else one session kept open would let it open
# any number at the default limits, where a new uid is refused.
check "a uid served before cgroup rules came, refused new sessions after"
limits '{"group": {"rdma": {"qp": 3}}}'
ibvctl daemon reload >"$O/reload1" 2>&1 || { show reload "$O/reload1"; fail "reload without cgroup rules"; }
ctx_start "$USER2" -d ibvd0
limits '{"cgroup": {"/": {"qp": 1}}, "group": {"rdma": {"qp": 3}}}'
ibvctl daemon reload >"$O/reload2" 2>&1 || { show reload "$O/reload2"; fail "reload with cgroup rules"; }
expect_grep "uid $USER2: its cgroup is unknown, so its cgroup rule too" "$DAEMON_LOG" "the reload's warning"
debian_env
(cd "$T" && timeout -k 2 "$TMO" setpriv --reuid="$USER2" --regid="$USER2" --clear-groups -- \
	env "${DEBIAN_ENV[@]}" "$T/tools/ibverbsd-run" /usr/bin/ibv_devices) >"$O/second" 2>&1 && {
	show client "$O/second"
	fail "uid $USER2 opened another session at the default limits"
}
expect_grep "cannot read this client's cgroup" "$O/second" "ibv_devices' error"
ctx_cmd query || fail "the first session: $CTX_ANSWER"
case $CTX_ANSWER in ok*) ;; *) fail "the first session: $CTX_ANSWER" ;; esac
ok "refused; its first session still answers"

# A session of the same uid whose cgroup the daemon can read (it runs in
# the daemon's pid namespace) gives the tenant its cgroup's rule.
check "a session whose cgroup can be read gives the tenant its rule"
inner=$(pgrep -P "$DAEMON_PID" | head -n 1)
[ -n "$inner" ] || fail "no daemon inside the namespace"
(cd "$T" && timeout -k 2 "$TMO" nsenter -t "$inner" -p -m -- \
	setpriv --reuid="$USER2" --regid="$USER2" --clear-groups -- \
	env "${DEBIAN_ENV[@]}" "$T/tools/ibverbsd-run" /usr/bin/ibv_devices) >"$O/inner" 2>&1 ||
	{ show client "$O/inner"; fail "uid $USER2 in the daemon's pid namespace was refused"; }
ibvctl -j limit show uid "$USER2" >"$O/limit" 2>&1 || { show "limit show" "$O/limit"; fail "ibvctl limit show"; }
expect_grep '"rule": *"cgroup /"' "$O/limit" "uid $USER2's rule"
ok "uid $USER2 now has the rule of cgroup /"
ctx_stop
