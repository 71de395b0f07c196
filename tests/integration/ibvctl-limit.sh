#!/bin/bash
# ibvctl limit show / limit set against a running daemon: show max and
# show current as JSON, checked against what a held client really uses;
# limit set changes a limit live (a registration that worked is refused
# afterwards, what is already registered stays) and a reload returns to
# the file; per-device and bandwidth keys; an unprivileged uid sees only
# its own uid and may not set; bad command lines fail with a message.
. "$(dirname "$0")/lib.sh"

ibvd_init
is_root || skip "needs root to run clients as uids $USER1 and $USER2"
O=$T/out
HELPER=$T/bin/quota-helper
[ -x "$HELPER" ] || fail "tests/integration/quota-helper not built"
[ -x "$T/tools/ibvctl" ] || fail "tools/ibvctl not built"
PSZ=$(getconf PAGESIZE)
MEMLOCK=$((32 * PSZ))
ENOMEM=12

cat >"$T/limit.conf" <<EOF
{
  "socket": { "path": "$SOCK" },
  "devices": [ { "name": "ibvd0", "lid": 1 }, { "name": "ibvd1", "lid": 10 } ],
  "limits": {
    "default": { "qp": 8, "memlock": $MEMLOCK },
    "uid": { "$USER1": { "pd": 4, "devices": { "ibvd0": { "pd": 3 } } } }
  }
}
EOF
chmod 644 "$T/limit.conf"
daemon_start -c "$T/limit.conf"
daemon_wait_ready

expect() {
	[ "$1" = "$2" ] || fail "$3: got '$1', want '$2'"
	ok "$3: $1"
}

# row FILE UID DEV KEY: one value from a JSON array of limit rows.
row() {
	"$PYTHON" - "$@" <<-'EOF'
	import json, sys
	f, uid, dev, key = sys.argv[1:5]
	rows = [r for r in json.load(open(f))
	        if r["uid"] == int(uid) and r["dev"] == dev]
	if len(rows) != 1:
	    sys.exit(f"{len(rows)} rows for uid {uid} dev {dev}")
	print(rows[0][key])
	EOF
}

# show FILE ARGS...: ibvctl -j limit show ARGS into FILE.
show_json() {
	local f=$1
	shift
	ibvctl -j limit show "$@" >"$f" 2>&1 || { show "limit show $*" "$f"; fail "ibvctl limit show $* failed"; }
}

# hold NAME UID ARGS...: the quota helper keeping what it made.
declare -A HOLD_FD HOLD_PID
hold() {
	local name=$1 uid=$2 fd i
	shift 2
	mkfifo "$T/$name.in" && chmod 644 "$T/$name.in" || fail "mkfifo"
	run_ours "$uid" "$HELPER" "$@" hold <"$T/$name.in" >"$O/$name" 2>&1 &
	BG_PIDS+=("$!")
	HOLD_PID[$name]=$!
	exec {fd}>"$T/$name.in"
	HOLD_FD[$name]=$fd
	for i in $(seq $((TMO * 10))); do
		grep -q '^created' "$O/$name" && break
		sleep 0.1
	done
	HELD=$(grep '^created' "$O/$name" | sed 's/ pid .*//')
	[ -n "$HELD" ] || { show "$name" "$O/$name"; fail "$name: no answer"; }
}

release() {
	local fd=${HOLD_FD[$1]}
	exec {fd}>&-
	wait_exit "${HOLD_PID[$1]}" "$TMO" || fail "$1 did not exit"
}

once() {
	run_ours "$1" "$HELPER" "$2" "$3" >"$O/once" 2>&1
	GOT=$(grep '^created' "$O/once" | sed 's/ pid .*//')
	[ -n "$GOT" ] || { show once "$O/once"; fail "$1 $2 $3: no answer"; }
}

once_until() {
	local i
	for i in $(seq $((20 * TMUL))); do
		once "$2" "$3" "$4"
		[ "$GOT" = "$1" ] && return 0
		sleep 0.1
	done
}

check "limit show current: what a held client of uid $USER1 uses (3 PDs)"
hold p1 "$USER1" pd 3
expect "$HELD" "created 3 errno 0" "uid $USER1 holds 3 PDs"
show_json "$O/cur" current
expect "$(row "$O/cur" "$USER1" all pd)" 3 "all devices: pd"
expect "$(row "$O/cur" "$USER1" all hca_object)" 3 "all devices: hca_object"
expect "$(row "$O/cur" "$USER1" all objects)" 3 "all devices: objects (the daemon's cap counts hca_object)"
expect "$(row "$O/cur" "$USER1" all hca_handle)" 1 "all devices: hca_handle"
expect "$(row "$O/cur" "$USER1" ibvd0 pd)" 3 "ibvd0: pd"
expect "$(row "$O/cur" "$USER1" ibvd1 pd)" 0 "ibvd1: pd"
"$PYTHON" - "$O/cur" <<'EOF' || fail "limit show current rows are not as documented"
import json, sys
names = ["memlock", "hca_handle", "hca_object", "qp", "cq", "mr", "pd",
         "srq", "ah", "cm_id", "session", "comp_channel", "mcast_attach",
         "mcast_join", "bandwidth", "ring_bytes", "direct_pairs", "mapped_mrs", "mapped_bytes",
         "objects", "cm_ports"]
rows = json.load(open(sys.argv[1]))
for r in rows:
    assert list(r) == ["uid", "dev", "rule"] + names, list(r)
    assert all(isinstance(r[k], int) for k in names), r
# per uid: "all" first, then each device
for i in range(0, len(rows), 3):
    assert [r["dev"] for r in rows[i:i + 3]] == ["all", "ibvd0", "ibvd1"], rows
EOF
ok "every row: uid dev rule and every counter, integers, \"all\" first"

check "limit show current: the daemon's own memory a client's CQs cost"
base=$(row "$O/cur" "$USER1" all ring_bytes)
hold c1 "$USER1" cq 2
expect "$HELD" "created 2 errno 0" "uid $USER1 holds 2 CQs"
show_json "$O/cq" current
ring_bytes=$(row "$O/cq" "$USER1" all ring_bytes)
[ "$ring_bytes" -gt "$base" ] 2>/dev/null ||
	fail "ring_bytes over all devices: '$ring_bytes', not above the $base before"
expect "$(row "$O/cq" "$USER1" ibvd0 ring_bytes)" 0 "ibvd0: ring_bytes (counted over all devices)"
release c1
# the daemon sees the socket close a moment after the exit
for _ in $(seq $((50 * TMUL))); do
	show_json "$O/cq0" current
	[ "$(row "$O/cq0" "$USER1" all ring_bytes)" = "$base" ] && break
	sleep 0.1
done
expect "$(row "$O/cq0" "$USER1" all ring_bytes)" "$base" "ring_bytes after that client left"
ok "ring_bytes $base, $ring_bytes with 2 CQs more, $base once their client left"

check "limit show (max): the rules in force"
show_json "$O/max"
expect "$(row "$O/max" "$USER1" all rule)" "uid $USER1" "uid $USER1's rule"
expect "$(row "$O/max" "$USER1" all pd)" 4 "its pd over all devices"
expect "$(row "$O/max" "$USER1" ibvd0 pd)" 3 "its pd on ibvd0"
expect "$(row "$O/max" "$USER1" ibvd1 pd)" max "its pd on ibvd1"
expect "$(row "$O/max" "$USER1" all qp)" 8 "the default's qp, inherited"
expect "$(row "$O/max" "$USER1" all memlock)" "$MEMLOCK" "the default's memlock, inherited"
expect "$(row "$O/max" "$USER1" all bandwidth)" max "bandwidth"
expect "$(row "$O/max" "$USER1" all direct_pairs)" 256 "the daemon's cap on direct pairs"
expect "$(row "$O/max" "$USER1" all objects)" 1048576 "the daemon's cap on objects"
expect "$(row "$O/max" "$USER1" ibvd0 ring_bytes)" max "ring_bytes on a device: not capped there"
show_json "$O/u2" max uid "$USER2"
expect "$(row "$O/u2" "$USER2" all rule)" default "uid $USER2 without sessions: default"
show_json "$O/d1" uid "$USER1" dev ibvd1
expect "$("$PYTHON" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$O/d1")" 1 "dev ibvd1: one row"
once "$USER1" pd 1
expect "$GOT" "created 0 errno 11" "uid $USER1 at its ibvd0 pd 3"
release p1

check "limit set: a registration that worked is refused after it; held memory stays"
hold m1 "$USER2" memlock 8
expect "$HELD" "created 1 errno 0" "uid $USER2 registers 8 pages"
once "$USER2" memlock 8
expect "$GOT" "created 1 errno 0" "8 more pages work (quota 32)"
ibvctl limit set uid "$USER2" memlock=$((4 * PSZ / 1024))k >"$O/set" 2>&1 ||
	{ show "limit set" "$O/set"; fail "ibvctl limit set failed"; }
ok "ibvctl limit set uid $USER2 memlock=$((4 * PSZ / 1024))k"
expect_grep "limit set by uid 0 .*uid $USER2 memlock=$((4 * PSZ / 1024))k; runtime only, a reload or restart returns to" "$DAEMON_LOG" "logged with the admin's uid"
once "$USER2" memlock 1
expect "$GOT" "created 0 errno $ENOMEM" "now 1 page is refused"
show_json "$O/u2" max uid "$USER2"
expect "$(row "$O/u2" "$USER2" all memlock)" $((4 * PSZ)) "limit show max: the new memlock"
expect "$(row "$O/u2" "$USER2" all rule)" "runtime uid $USER2" "limit show: a runtime rule"
expect "$(row "$O/u2" "$USER2" all qp)" 8 "keys it omits still come from the default"
show_json "$O/u2c" current uid "$USER2"
expect "$(row "$O/u2c" "$USER2" all memlock)" $((8 * PSZ)) "the 8 pages held stay registered"
release m1
once_until "created 1 errno 0" "$USER2" memlock 4
expect "$GOT" "created 1 errno 0" "after release: 4 pages, exactly the new limit"
once "$USER2" memlock 5
expect "$GOT" "created 0 errno $ENOMEM" "5 pages: over"

check "limit set: per device, default and bandwidth"
ibvctl limit set default dev ibvd1 qp=2 cq=max >"$O/set" 2>&1 || { show "limit set" "$O/set"; fail "limit set default dev ibvd1"; }
ibvctl limit set default bandwidth=1m >"$O/set" 2>&1 || { show "limit set" "$O/set"; fail "limit set default bandwidth"; }
show_json "$O/u2" uid "$USER2"
expect "$(row "$O/u2" "$USER2" ibvd1 qp)" 2 "the default's ibvd1 qp reaches uid $USER2's rule"
expect "$(row "$O/u2" "$USER2" all bandwidth)" 1048576 "bandwidth=1m"
expect "$(row "$O/u2" "$USER2" ibvd0 qp)" max "ibvd0 untouched"

check "a reload returns to the file"
kill -HUP "$DAEMON_PID"
for _ in $(seq $((50 * TMUL))); do
	grep -q 'configuration reloaded' "$DAEMON_LOG" && break
	sleep 0.1
done
expect_grep 'configuration reloaded' "$DAEMON_LOG" "reloaded"
show_json "$O/u2" uid "$USER2"
expect "$(row "$O/u2" "$USER2" all memlock)" "$MEMLOCK" "memlock from the file again"
expect "$(row "$O/u2" "$USER2" all rule)" default "rule from the file again"
expect "$(row "$O/u2" "$USER2" ibvd1 qp)" max "ibvd1 qp from the file again"
expect "$(row "$O/u2" "$USER2" all bandwidth)" max "bandwidth from the file again"
once_until "created 1 errno 0" "$USER2" memlock 8
expect "$GOT" "created 1 errno 0" "8 pages work again"

check "an unprivileged uid: its own limits only, no limit set"
hold p2 "$USER2" pd 1
ibvctl_as "$USER1" -j limit show >"$O/own" 2>&1 || { show output "$O/own"; fail "limit show as $USER1"; }
"$PYTHON" - "$O/own" "$USER1" <<'EOF' || { show output "$O/own"; fail "uid $USER1 sees other uids' limits"; }
import json, sys
rows = json.load(open(sys.argv[1]))
assert rows and all(r["uid"] == int(sys.argv[2]) for r in rows), rows
EOF
ok "uid $USER1 sees only uid $USER1 (uid $USER2 and root have sessions)"
release p2
ibvctl_as "$USER1" limit set uid "$USER1" qp=100 >"$O/deny" 2>&1
rc=$?
expect_failed "$rc" "limit set as uid $USER1"
expect_grep 'limit set requires root or group ibverbsd-admin' "$O/deny" "limit set refused with a message"
ibvctl_as "$USER1" limit show uid "$USER2" >"$O/deny" 2>&1
expect_failed $? "limit show uid $USER2 as uid $USER1"
expect_grep "limits of uid $USER2 are for root or group ibverbsd-admin only" "$O/deny" "another uid's limits refused"

check "bad command lines exit non-zero with a message"
bad() {
	local want=$1
	shift
	ibvctl limit "$@" >"$O/bad" 2>&1
	expect_failed $? "ibvctl limit $*"
	expect_grep "$want" "$O/bad" "ibvctl limit $*"
}
bad 'unknown key qps' set uid "$USER1" qps=1
bad 'ring_bytes is a fixed cap of the daemon, not a limit' set uid "$USER1" ring_bytes=1
bad 'bad value 1k for qp' set uid "$USER1" qp=1k
bad 'bad value  for memlock' set uid "$USER1" memlock=
bad 'bad value lots for memlock' set uid "$USER1" memlock=lots
bad 'no KEY=VALUE to set' set uid "$USER1"
bad 'expected KEY=VALUE, got qp' set uid "$USER1" qp
bad 'uid x1: expected a decimal uid' set uid x1 qp=1
bad 'no such group "no-such-group-ibvd"' set group no-such-group-ibvd qp=1
bad 'unknown device ibvd9' set default dev ibvd9 qp=1
bad 'bandwidth limits all devices together' set default dev ibvd0 bandwidth=1
bad 'bandwidth must be at least 1, or max' set default bandwidth=0
bad 'bandwidth must be at least 1, or max' set uid "$USER1" bandwidth=0k
bad 'uid needs a value' set uid
bad 'unknown device ibvd9' show dev ibvd9
bad 'unknown filter pid for limit show' show pid 1
bad 'bad uid x' show uid x
show_json "$O/after" uid "$USER1"
expect "$(row "$O/after" "$USER1" all qp)" 8 "refused commands changed nothing"
expect "$(row "$O/after" "$USER1" all bandwidth)" max "no bandwidth of 0 either"
expect_no_grep "still charged|only [0-9]+ charged" "$DAEMON_LOG" "no accounting errors"
daemon_alive "at the end"
