#!/bin/bash
# MRs on shared memory (tier 1, daemon/verbs/mr/map.c): mapped-helper
# (tests/integration/mapped.c) as uid $USER1 registers MRs on a memfd, a
# /dev/shm file, a MAP_SHARED file and a hugetlbfs file if it can have
# one.  Here, meanwhile: ibvctl says each is "tier mapped" (the private
# one "memfd"), the daemon's /proc/PID/maps holds each file, and after
# deregistration none, with the daemon's mappings of files back to what
# they were before the registrations.  The helper checks the data path
# through the mappings, the client's munmap, truncated files and rereg.
. "$(dirname "$0")/lib.sh"

ibvd_init
O=$T/out
mkdir -p "$O"
HELPER=$T/bin/mapped-helper
[ -x "$HELPER" ] || fail "tests/integration/mapped-helper not built"
export VT_TMUL=$TMUL

daemon_start -c "$(default_conf)"
daemon_wait_ready

D=$O/meet
mkdir -p "$D" && chmod 1777 "$D" || fail "mkdir $D"
run_ours "$USER1" "$HELPER" "$D" >"$O/helper" 2>&1 &
HPID=$!
BG_PIDS+=("$HPID")

# await NAME: the helper's file DIR/NAME, or fail with its output.
await() {
	local i
	for i in $(seq $((TMO * 10))); do
		[ -e "$D/$1" ] && return 0
		pid_running "$HPID" || break
		sleep 0.1
	done
	show helper "$O/helper"
	fail "the helper never wrote $1"
}
put() { echo "$2" >"$D/.$1" && chmod 644 "$D/.$1" && mv "$D/.$1" "$D/$1"; }
maps() { cat "/proc/$DAEMON_PID/maps"; }
# file_maps: the daemon's mappings of files (inode not 0): a thread's
# first malloc may add an anonymous arena at any time, which is not ours
file_maps() { maps | awk '$5 != 0'; }
# expect_py FILE EXPR WHAT: EXPR must hold over the JSON `j` in FILE.
expect_py() {
	local v
	v=$("$PYTHON" -c 'import json, sys
j = json.load(open(sys.argv[1]))
print(eval(sys.argv[2]))' "$1" "$2") || { show json "$1"; fail "$3: cannot evaluate $2"; }
	[ "$v" = True ] || { show json "$1"; fail "$3: does not hold: $2"; }
}
# inode_mapped INODE: lines of the daemon's maps for that inode
inode_mapped() { maps | awk -v i="$1" '$5 == i' | wc -l; }

await opened
file_maps >"$O/maps.base"
base=$(wc -l <"$O/maps.base")
put baseline "$base"

await registered
check "each shared-memory MR is mapped by the daemon"
cp "$D/registered" "$O/registered"
n=$(wc -l <"$O/registered")
[ "$n" -ge 3 ] || fail "only $n kinds registered"
ibvctl -j -d resource show mr >"$O/mr.json" 2>&1 || fail "res show mr exited $?"
expect_py "$O/mr.json" "sum(o['tier'] == 'mapped' for o in j) == $n" "$n MRs of tier mapped"
expect_py "$O/mr.json" "sum(o['tier'] == 'memfd' for o in j) == 1" "the private MR, tier memfd"
while read -r kind ino; do
	[ "$(inode_mapped "$ino")" -eq 1 ] || { maps >"$O/maps"; fail "$kind (inode $ino) is not in the daemon's maps once"; }
done <"$O/registered"
ok "$(tr '\n' ' ' <"$O/registered")all of tier mapped, each once in the daemon's maps"
put checked ok

await deregistered
check "deregistration unmaps them"
while read -r kind ino; do
	[ "$(inode_mapped "$ino")" -eq 0 ] || fail "$kind (inode $ino) still in the daemon's maps"
done <"$O/registered"
file_maps >"$O/maps"
now=$(wc -l <"$O/maps")
[ "$now" -eq "$base" ] || {
	diff "$O/maps.base" "$O/maps" | sed 's/^/    | /'
	fail "the daemon has $now mappings of files, $base before"
}
ok "no file left mapped; $now mappings of files, as before ($base)"
put done ok

wait_exit "$HPID" "$TMO" || fail "the helper did not finish"
show helper "$O/helper"
[ "$EXIT_STATUS" -eq 0 ] || fail "the helper failed (exit $EXIT_STATUS)"
expect_grep '^mapped: all passed$' "$O/helper" "the helper's verdict"
# a kind this machine could not give (no hugetlbfs): said as a skip
grep -o 'hugetlbfs: skipped.*' "$O/helper" | while read -r line; do log "SKIP: $line"; done
daemon_alive "after truncated files under MRs"
daemon_stop

# Mappings are capped in bytes too: memlock does not bound them when it
# is not enforced (here "ignore"), and a range registered twice is mapped
# twice.  Three MRs of 1 TiB on one sparse memfd: two are mapped (the
# uid's 2 TiB), the third is copied through /proc/PID/mem; all work.
check "a uid's mappings stop at 2 TiB; past it, MRs still work unmapped"
conf=$(conf_edit "$T/big.conf" "cfg['rlimit_memlock'] = 'ignore'") || exit 1
daemon_start -c "$conf"
daemon_wait_ready
rm -f "$D"/*
run_ours "$USER1" "$HELPER" --big "$D" >"$O/big" 2>&1 &
HPID=$!
BG_PIDS+=("$HPID")
await registered
ibvctl -j -d resource show mr >"$O/big.json" 2>&1 || fail "res show mr exited $?"
expect_py "$O/big.json" "sorted(o['tier'] for o in j if o['mrlen'] == 1 << 40) == ['mapped', 'mapped', 'memfd']" \
	"two MRs of 1 TiB mapped, the third not"
ibvctl -j limit show current uid "$USER1" >"$O/big.limits" 2>&1 || fail "limit show exited $?"
expect_py "$O/big.limits" "j[0]['dev'] == 'all' and j[0]['mapped_bytes'] == 2 << 40 and j[0]['mapped_mrs'] == 2" \
	"ibvctl counts 2 TiB in 2 mapped MRs"
put checked ok
await deregistered
wait_exit "$HPID" "$TMO" || fail "the helper did not finish"
show helper "$O/big"
[ "$EXIT_STATUS" -eq 0 ] || fail "the helper failed (exit $EXIT_STATUS)"
expect_grep '^mapped --big: all passed$' "$O/big" "the helper's verdict"
ibvctl -j limit show current uid "$USER1" >"$O/big.limits" 2>&1 || fail "limit show exited $?"
expect_py "$O/big.limits" "j[0]['mapped_bytes'] == 0 and j[0]['mapped_mrs'] == 0" "nothing counted after"
ok "2 of 3 MRs of 1 TiB mapped, the third through /proc/PID/mem, each written through"
daemon_stop
