#!/bin/bash
# Many QPs in one daemon (issue "Same-host data path at memory speed",
# item 6), the short form; bench/scale does the full 65,536.  Three client
# processes at once, two as uid 1001 with 1500 RC QPs each and one as uid
# 1002, whose tenant may hold 300 QPs, asking for 500; every QP has its own
# CQ and goes to INIT.  Then:
#  - uid 1001 gets all of its QPs, uid 1002 exactly 300 and EAGAIN for the
#    next one (the tenant quota still holds at scale);
#  - ibvctl counts them all;
#  - the daemon's map count does not grow with QPs (their rings come from
#    one arena per context), nor its open fds;
#  - destroying them brings ibvctl's counts to 0 with the contexts still
#    open, and once the clients exit the daemon's maps and fds are back to
#    what they were before.
. "$(dirname "$0")/lib.sh"

ibvd_init
is_root || skip "needs root to run clients as uids $USER1 and $USER2"
HELPER=$T/bin/scale-helper
[ -x "$HELPER" ] || fail "tests/integration/scale-helper not built"
O=$T/out
mkdir -p "$O"
chmod 777 "$O"
N1=1500
N2=500
LIMIT2=300

conf=$T/scale.conf
cat >"$conf" <<EOF
{
  "socket": { "path": "$SOCK" },
  "devices": [ { "name": "ibvd0", "ports": 1, "lid": 1 } ],
  "limits": { "uid": { "$USER2": { "qp": $LIMIT2 } } }
}
EOF
chmod 644 "$conf"
daemon_start -c "$conf"
daemon_wait_ready

maps() { wc -l <"/proc/$DAEMON_PID/maps"; }
fds() { ls "/proc/$DAEMON_PID/fd" | wc -l; }
# qps: the QPs ibvctl counts on ibvd0
qps() {
	ibvctl -j resource show >"$O/res" 2>&1 || { show "resource show" "$O/res"; fail "ibvctl resource show failed"; }
	"$PYTHON" -c 'import json, sys
print(sum(d.get("qp", 0) for d in json.load(open(sys.argv[1]))))' "$O/res"
}

base_fds=$(daemon_fds_settled)
base_maps=$(daemon_maps_settled)
log "daemon before: $base_maps maps, $base_fds fds"

# start NAME UID N: a helper reading its go-ahead lines from fifo $O/NAME.in
PIDS=()
start() {
	mkfifo "$O/$1.in"
	chmod 666 "$O/$1.in"
	run_ours "$2" "$HELPER" -n "$3" <"$O/$1.in" >"$O/$1.out" 2>&1 &
	PIDS+=("$!")
	BG_PIDS+=("$!")
}
start a 1001 "$N1"
start b 1001 "$N1"
start c 1002 "$N2"
exec 7>"$O/a.in" 8>"$O/b.in" 9>"$O/c.in"

# wait_line NAME WORD: the helper printed a line starting with WORD
wait_line() {
	local i
	for i in $(seq $((600 * TMUL))); do
		grep -q "^$2 " "$O/$1.out" && return 0
		sleep 0.1
	done
	show "$1" "$O/$1.out"
	fail "client $1 did not print '$2'"
}
for c in a b c; do
	wait_line $c created
done
check "uid $USER1 got all its QPs, uid $USER2 its quota and then EAGAIN"
for c in a b; do
	grep -qx "created $N1 [0-9]*" "$O/$c.out" || { show "$c" "$O/$c.out"; fail "client $c: not $N1 QPs"; }
done
grep -q "^created $LIMIT2 [0-9]* error Resource temporarily unavailable at ibv_create_qp$" "$O/c.out" ||
	{ show c "$O/c.out"; fail "uid $USER2: not $LIMIT2 QPs and EAGAIN from ibv_create_qp"; }
ok "$N1 + $N1 QPs for uid $USER1, $LIMIT2 and EAGAIN for uid $USER2"

total=$((2 * N1 + LIMIT2))
check "ibvctl counts $total QPs"
n=$(qps)
[ "$n" -eq "$total" ] || fail "ibvctl counts $n QPs, not $total"
ok "$n QPs"

check "the daemon's maps and fds do not grow with QPs"
up_maps=$(maps)
up_fds=$(fds)
log "daemon with $total QPs: $up_maps maps, $up_fds fds"
# Per context: its ring arena, its context page; a little slack for the
# allocator's arenas, which do not grow with QPs either (more under ASan,
# whose allocator maps a region per size class as the heap grows).
slack=8
[ -n "$SANITIZERS" ] && slack=64
[ "$up_maps" -le $((base_maps + 3 * 2 + slack)) ] ||
	fail "$up_maps maps with $total QPs, $base_maps before: rings are mapped one by one"
# Per context: its async socket, kick eventfd and session socket, and
# the memfds of its ring arena and context page (kept for a process that
# imports the context, ibv_import_device).
[ "$up_fds" -le $((base_fds + 3 * 5)) ] || fail "$up_fds fds with $total QPs, $base_fds before"
ok "$up_maps maps (before: $base_maps), $up_fds fds (before: $base_fds)"

check "destroying every QP and CQ brings the counts to 0, contexts open"
echo go >&7
echo go >&8
echo go >&9
for c in a b c; do
	wait_line $c destroyed
	grep -q "error" <(grep '^destroyed' "$O/$c.out") && { show "$c" "$O/$c.out"; fail "client $c: a destroy failed"; }
done
n=$(qps)
[ "$n" -eq 0 ] || fail "ibvctl still counts $n QPs"
ok "0 QPs"

check "once the clients are gone, maps and fds are as before"
echo go >&7
echo go >&8
echo go >&9
exec 7>&- 8>&- 9>&-
# a and b made all their QPs (exit 0), c stopped at its quota (exit 1)
want=(0 0 1)
for i in 0 1 2; do
	wait "${PIDS[$i]}"
	st=$?
	[ "$st" -eq "${want[$i]}" ] || fail "scale client $i exited with status $st, want ${want[$i]}"
done
# The daemon closes a client's context when it sees the hang-up.  (ASan's
# allocator keeps the regions it mapped: only there, the slack above.)
max_maps=$base_maps
[ -n "$SANITIZERS" ] && max_maps=$((base_maps + slack))
for i in $(seq 50); do
	[ "$(maps)" -le "$max_maps" ] && [ "$(fds)" -eq "$base_fds" ] && break
	sleep 0.1
done
[ "$(maps)" -le "$max_maps" ] || fail "$(maps) maps after the clients left, $base_maps before"
[ "$(fds)" -eq "$base_fds" ] || fail "$(fds) fds after the clients left, $base_fds before"
ok "$(maps) maps, $(fds) fds"

daemon_stop
