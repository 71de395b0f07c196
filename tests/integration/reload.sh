#!/bin/bash
# SIGHUP reload: a device added to the config appears for new clients
# (ibvctl dev show, Debian's ibv_devices) while a client's context opened
# before the reload keeps working; a broken config on reload is logged with
# its file:line:column and the old config stays in force.
. "$(dirname "$0")/lib.sh"

need_cmd /usr/bin/ibv_devices
ibvd_init
O=$T/out
conf=$T/reload.conf

cat >"$conf" <<EOF
{
  "socket": { "path": "$SOCK" },
  "devices": [ { "name": "ibvd0", "ports": 1, "lid": 1 } ]
}
EOF
daemon_start -c "$conf"
daemon_wait_ready

ctx_start "$USER1" -d ibvd0
ctx_cmd query || fail "query before reload: $CTX_ANSWER"
before=$CTX_ANSWER
case $before in "ok query dev=ibvd0 ports=1 port=1 state=4 lid=1") ;; *) fail "before reload: $before" ;; esac

ibvctl dev show >"$O/dev0" 2>&1 || { show "ibvctl dev show" "$O/dev0"; fail "ibvctl dev show failed"; }
expect_grep 'ibvd0' "$O/dev0" "ibvctl dev show before reload"
expect_no_grep 'ibvd1' "$O/dev0" "ibvctl dev show before reload"

check "SIGHUP with a second device added"
cat >"$conf" <<EOF
{
  "socket": { "path": "$SOCK" },
  "devices": [
    { "name": "ibvd0", "ports": 1, "lid": 1 },
    { "name": "ibvd1", "ports": 1, "lid": 20 }
  ]
}
EOF
kill -HUP "$DAEMON_PID"
found=no
for _ in $(seq $((50 * TMUL))); do
	ibvctl dev show >"$O/dev1" 2>&1 && grep -q 'ibvd1' "$O/dev1" && { found=yes; break; }
	sleep 0.1
done
daemon_alive "after SIGHUP"
show "ibvctl dev show after reload" "$O/dev1"
[ "$found" = yes ] || fail "ibvd1 not listed by ibvctl dev show within 5 s of SIGHUP"
expect_grep 'ibvd0' "$O/dev1" "ibvd0 still listed"
ok "ibvctl dev show lists ibvd0 and ibvd1"

run_debian "$USER2" /usr/bin/ibv_devices >"$O/devices" 2>&1 || { show ibv_devices "$O/devices"; fail "ibv_devices failed"; }
expect_grep '^    ibvd1 *	[0-9a-f]{16}$' "$O/devices" "ibv_devices after reload"
ok "a new client (Debian's ibv_devices) sees ibvd1"

check "the context opened before the reload still works, unchanged"
ctx_cmd query || fail "query after reload: $CTX_ANSWER"
[ "$CTX_ANSWER" = "$before" ] || fail "after reload: '$CTX_ANSWER', before: '$before'"
ok "$CTX_ANSWER"

check "SIGHUP with a broken config keeps the old one"
cp "$conf" "$T/good.conf"
cat >"$conf" <<'EOF'
{
  "devices": [
    { "name": "ibvd0", "ports": 1, "lid": 1 }
    { "name": "ibvd2" }
  ]
}
EOF
kill -HUP "$DAEMON_PID"
logged=no
for _ in $(seq $((50 * TMUL))); do
	grep -Eq -- "$conf:[0-9]+:[0-9]+:" "$DAEMON_LOG" && { logged=yes; break; }
	sleep 0.1
done
[ "$logged" = yes ] || { show "daemon log" "$DAEMON_LOG"; fail "no '$conf:LINE:COLUMN:' error in the log within 5 s"; }
ok "logged: $(grep -E -- "$conf:[0-9]+:[0-9]+:" "$DAEMON_LOG" | head -n 1)"
grep -Eq -- "$conf:4:[0-9]+:" "$DAEMON_LOG" || fail "the error is not reported on line 4"
daemon_alive "after a broken reload"
ibvctl dev show >"$O/dev2" 2>&1 || { show "ibvctl dev show" "$O/dev2"; fail "ibvctl dev show failed after a broken reload"; }
expect_grep 'ibvd1' "$O/dev2" "the old config (with ibvd1) stays"
expect_no_grep 'ibvd2' "$O/dev2" "nothing of the broken config"
ctx_cmd query || fail "query after the broken reload: $CTX_ANSWER"
[ "$CTX_ANSWER" = "$before" ] || fail "after the broken reload: '$CTX_ANSWER'"
ok "daemon alive, ibvd0 and ibvd1 still served, the context still works"

check "a good config after a broken one is taken again"
cp "$T/good.conf" "$conf"
"$PYTHON" - "$conf" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["devices"].append({"name": "ibvd3", "ports": 1, "lid": 30})
json.dump(c, open(sys.argv[1], "w"))
EOF
kill -HUP "$DAEMON_PID"
found=no
for _ in $(seq $((50 * TMUL))); do
	ibvctl dev show >"$O/dev3" 2>&1 && grep -q 'ibvd3' "$O/dev3" && { found=yes; break; }
	sleep 0.1
done
[ "$found" = yes ] || { show "ibvctl dev show" "$O/dev3"; fail "ibvd3 not listed after the good reload"; }
ok "ibvd3 added"

# refused KEY: `ibvctl daemon reload` fails with KEY in its message, prints
# no usage (the command was right, the file was not), and ibvd3 stays.
refused() {
	if ibvctl daemon reload >"$O/refused" 2>&1; then
		show "ibvctl daemon reload" "$O/refused"
		fail "the reload was taken"
	fi
	show "ibvctl daemon reload" "$O/refused"
	expect_grep "$1" "$O/refused" "the reason"
	expect_no_grep 'Usage' "$O/refused" "no usage for a bad file"
	ibvctl dev show >"$O/dev4" 2>&1 || fail "ibvctl dev show"
	expect_grep 'ibvd3' "$O/dev4" "the running config stays"
}

check "a config others may write, or owned by another uid, is refused"
cp "$conf" "$T/good.conf"
chmod 666 "$conf"
refused 'writable by others'
chmod 644 "$conf"
chown "$USER1" "$conf"
refused "owned by uid $USER1"
chown 0 "$conf"
ibvctl daemon reload >"$O/again" 2>&1 || { show reload "$O/again"; fail "the same file, root's again, is refused"; }
ok "refused with the reason; taken again once root's and 0644"

check "two rules for one uid (1001 and 01001) are refused"
"$PYTHON" - "$conf" "$USER1" <<'EOF2'
import json, sys
c = json.load(open(sys.argv[1]))
u = sys.argv[2]
c["limits"] = {"uid": {u: {"qp": 1}, "0" + u: {"qp": 999}}}
json.dump(c, open(sys.argv[1], "w"))
EOF2
refused "the same uid as .$USER1."
cp "$T/good.conf" "$conf"

# The daemon runs as uid $DAEMON_USER without capabilities (lib.sh): it may
# not give its socket to group daemon.  Before, the mode changed and the group
# did not, and the reload said it was done.
if [ "$DAEMON_USER" != root ]; then
	check "a socket group the daemon may not give refuses the whole reload"
	mode0=$(stat -c '%a %g' "$SOCK")
	"$PYTHON" - "$conf" <<'EOF2'
import json, sys
c = json.load(open(sys.argv[1]))
c["socket"].update({"mode": "0600", "group": "daemon"})
c["devices"].append({"name": "ibvd4"})
json.dump(c, open(sys.argv[1], "w"))
EOF2
	refused "chgrp daemon"
	expect_no_grep 'ibvd4' "$O/dev4" "nothing of the refused config"
	[ "$(stat -c '%a %g' "$SOCK")" = "$mode0" ] ||
		fail "the socket is now $(stat -c '%a %g' "$SOCK"), was $mode0"
	ok "socket still $mode0; ibvd4 not added"
	cp "$T/good.conf" "$conf"
fi

# The socket's settings are a reload's last step that may fail: a reload
# refused for anything else leaves the socket file untouched (before, its
# mode and group were changed first and put back, which a daemon without
# privileges cannot always do for the group).
check "a reload refused for a device leaves the socket untouched"
sock0=$(stat -c '%a %g %z' "$SOCK")
"$PYTHON" - "$conf" <<'EOF2'
import json, sys
c = json.load(open(sys.argv[1]))
c["socket"].update({"mode": "0600"})
c["devices"].append({"name": "roce9", "netdev": "lo"})
json.dump(c, open(sys.argv[1], "w"))
EOF2
refused "lo is the loopback interface"
[ "$(stat -c '%a %g %z' "$SOCK")" = "$sock0" ] ||
	fail "the socket is now $(stat -c '%a %g %z' "$SOCK"), was $sock0"
ok "socket still $sock0"
cp "$T/good.conf" "$conf"

ctx_stop
daemon_stop

# group "" after a group: back to the group the socket was made with, not
# the last one silently kept (whose members kept their access); refused
# when the daemon may no longer give it that one.  A daemon that becomes
# nobody may give the socket to nogroup, a group with a name.
if [ "$DAEMON_USER" != root ]; then
	check "group \"\" after a group: the socket's first group again, or refused"
	main_user=$DAEMON_USER
	DAEMON_USER=nobody
	daemon_start -c "$conf"
	daemon_wait_ready
	DAEMON_USER=$main_user
	made=$(stat -c '%g' "$SOCK")
	for g in nogroup ""; do
		"$PYTHON" - "$conf" "$g" <<'EOF2'
import json, sys
c = json.load(open(sys.argv[1]))
c["socket"].update({"group": sys.argv[2]})
json.dump(c, open(sys.argv[1], "w"))
EOF2
		if [ -n "$g" ] || [ "$made" = 65534 ]; then
			ibvctl daemon reload >"$O/group" 2>&1 ||
				{ show reload "$O/group"; fail "group \"$g\" refused"; }
		else
			refused "chgrp $made"
		fi
		[ "$(stat -c '%g' "$SOCK")" = 65534 ] ||
			fail "after group \"$g\", the socket's group is $(stat -c '%g' "$SOCK")"
	done
	ok "made with group $made; nogroup taken; \"\" then asks for $made again"
	daemon_stop
	cp "$T/good.conf" "$conf"
fi

# Without -c the daemon reads SYSCONFDIR/ibverbsd/ibverbsd.conf, or runs on
# the built-in defaults if there is none.  A file that goes away after
# start (an editor or an upgrade replacing it) must not turn a reload into
# the defaults, which lift every limit.  The daemon sees a directory of
# ours there, in a mount namespace of its own.
sys_conf=$(grep -ao '/[[:alnum:]/._-]*/ibverbsd/ibverbsd\.conf' "$IBVERBSD" | head -n 1)
etc_dir=$(dirname "$(dirname "$sys_conf")")
if [ -z "$sys_conf" ] || [ ! -d "$etc_dir" ]; then
	fail "no $etc_dir to stand in for: the missing-file reload cannot be checked"
fi
check "a reload while $sys_conf is missing keeps the running config"
mkdir -p "$T/etc/ibverbsd"
cp "$T/good.conf" "$T/etc/ibverbsd/ibverbsd.conf"
chmod 755 "$T/etc" "$T/etc/ibverbsd"
cat >"$T/bin/ibverbsd-etc" <<EOT
#!/bin/sh
exec unshare -m --propagation private sh -c 'mount --bind "\$0" "\$1" && shift && exec "\$@"' "$T/etc" "$etc_dir" "$IBVERBSD" "\$@"
EOT
chmod 755 "$T/bin/ibverbsd-etc"
REAL_IBVERBSD=$IBVERBSD
IBVERBSD=$T/bin/ibverbsd-etc
daemon_start --socket "$SOCK"
daemon_wait_ready
IBVERBSD=$REAL_IBVERBSD
ibvctl dev show >"$O/dev4" 2>&1 || fail "ibvctl dev show"
expect_grep 'ibvd3' "$O/dev4" "the file's devices at start"
mv "$T/etc/ibverbsd/ibverbsd.conf" "$T/etc/ibverbsd/moved"
refused 'cannot open'
mv "$T/etc/ibverbsd/moved" "$T/etc/ibverbsd/ibverbsd.conf"
ibvctl daemon reload >"$O/again" 2>&1 || { show reload "$O/again"; fail "the file back, the reload is refused"; }
ok "refused while the file was gone; taken once it is back"
daemon_stop
