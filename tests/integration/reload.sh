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

ctx_stop
daemon_stop
