#!/bin/bash
# Per-tenant quotas, the parts beyond quota.sh (issue 5): per-device
# limits on a two-device daemon (each device under, at and over its limit
# for two uids at once, and the all-devices limit across both devices);
# RLIMIT_MEMLOCK next to the memlock quota (a low rlimit refuses first, a
# high one leaves the quota to refuse, CAP_IPC_LOCK skips the rlimit but
# not the quota); group entries matched through any of a client's groups
# (the first group entry in file order, whichever group is primary); the
# bandwidth key accepted and shown by ibvctl limit show.
. "$(dirname "$0")/lib.sh"

ibvd_init
is_root || skip "needs root to run clients as uids $USER1 and $USER2"
need_cmd prlimit groupadd groupdel
O=$T/out
HELPER=$T/bin/quota-helper
[ -x "$HELPER" ] || fail "tests/integration/quota-helper not built"
conf=$T/quota-device.conf
PSZ=$(getconf PAGESIZE)
EAGAIN=11
ENOMEM=12

# A named group of our own for the supplementary-group rule, removed at
# exit whatever happens (ibvd_cleanup reads the test's status from $?).
GRP=ibvdq$$
groupadd "$GRP" || fail "groupadd $GRP"
trap 'rc=$?; groupdel "$GRP" 2>/dev/null; (exit $rc); ibvd_cleanup' EXIT
GRP_GID=$(getent group "$GRP" | cut -d: -f3)
[ -n "$GRP_GID" ] || fail "no gid for $GRP"
GID_B=$((GRP_GID + 50000))	# a second group, by number only

# write_conf LIMITS: the "limits" object's contents.
write_conf() {
	cat >"$conf" <<-EOF
	{
	  "socket": { "path": "$SOCK" },
	  "devices": [ { "name": "ibvd0", "ports": 1, "lid": 1 },
	               { "name": "ibvd1", "ports": 1, "lid": 10 } ],
	  "limits": { $1 }
	}
	EOF
	chmod 644 "$conf"
}

NRELOAD=0
reload_conf() {
	write_conf "$@"
	kill -HUP "$DAEMON_PID"
	NRELOAD=$((NRELOAD + 1))
	for _ in $(seq $((50 * TMUL))); do
		[ "$(grep -c 'configuration reloaded' "$DAEMON_LOG")" -ge "$NRELOAD" ] && break
		sleep 0.1
	done
	[ "$(grep -c 'configuration reloaded' "$DAEMON_LOG")" -ge "$NRELOAD" ] ||
		fail "reload $NRELOAD not logged"
}

# hold NAME UID DEV ARGS...: the helper on DEV keeping what it made; its
# line is left in HELD.
declare -A HOLD_FD HOLD_PID
hold() {
	local name=$1 uid=$2 dev=$3 fd i
	shift 3
	mkfifo "$T/$name.in" && chmod 644 "$T/$name.in" || fail "mkfifo"
	QUOTA_DEV=$dev run_ours "$uid" "$HELPER" "$@" hold <"$T/$name.in" >"$O/$name" 2>&1 &
	BG_PIDS+=("$!")
	HOLD_PID[$name]=$!
	exec {fd}>"$T/$name.in"
	HOLD_FD[$name]=$fd
	for i in $(seq $((TMO * 10))); do
		grep -q '^created' "$O/$name" && break
		pid_running "${HOLD_PID[$name]}" || break
		sleep 0.1
	done
	HELD=$(grep '^created' "$O/$name" | sed 's/ pid .*//')
	[ -n "$HELD" ] || { show "$name" "$O/$name"; fail "$name: no answer"; }
}

release() {
	local fd=${HOLD_FD[$1]}
	exec {fd}>&-
	wait_exit "${HOLD_PID[$1]}" "$TMO" || fail "$1 did not exit"
	rm -f "$T/$1.in"
}

# once UID DEV KIND N [RLIMIT]: one run, its line left in GOT.  RLIMIT
# (prlimit's SOFT:HARD) is set as root before dropping to UID, so that it
# may be above the hard limit we run with.
once() {
	local uid=$1 dev=$2 kind=$3 n=$4 rlim=${5:-}
	(
		if [ -n "$rlim" ]; then
			prlimit --pid "$BASHPID" --memlock="$rlim" || exit 99
		fi
		QUOTA_DEV=$dev run_ours "$uid" "$HELPER" "$kind" "$n"
	) >"$O/once" 2>&1
	GOT=$(grep '^created' "$O/once" | sed 's/ pid .*//')
	[ -n "$GOT" ] || { show once "$O/once"; fail "$uid $dev $kind $n: no answer"; }
}

# once_until WANT ARGS...: a dead client's release reaches the daemon a
# moment after the process is gone: retry briefly before judging.
once_until() {
	local want=$1 i
	shift
	for i in $(seq $((20 * TMUL))); do
		once "$@"
		[ "$GOT" = "$want" ] && return 0
		sleep 0.1
	done
}

# Refusals are logged at most 5 a second: a line the test looks for is
# made first in a second of its own.
new_log_second() {
	sleep 1.1
}

expect() {
	[ "$1" = "$2" ] || fail "$3: got '$1', want '$2'"
	ok "$3: $1"
}

# limit_value UID DEV KEY [max|current]: one value of ibvctl -j limit show.
limit_value() {
	ibvctl -j limit show "${4:-max}" uid "$1" >"$O/limits.json" 2>&1 ||
		{ show "limit show" "$O/limits.json"; fail "ibvctl limit show failed"; }
	"$PYTHON" - "$O/limits.json" "$2" "$3" <<-'EOF'
	import json, sys
	rows = [r for r in json.load(open(sys.argv[1])) if r["dev"] == sys.argv[2]]
	assert len(rows) == 1, rows
	print(rows[0][sys.argv[3]])
	EOF
}

write_conf '"default": { "qp": 5, "hca_handle": 3, "bandwidth": 1048576,
	"devices": { "ibvd0": { "qp": 2 }, "ibvd1": { "qp": 4, "hca_handle": 1 } } }'
daemon_start -c "$conf"
daemon_wait_ready

check "per device: ibvd0 qp 2, ibvd1 qp 4, all devices qp 5; two uids at once"
hold a0 "$USER1" ibvd0 qp 3
expect "$HELD" "created 2 errno $EAGAIN" "uid $USER1 on ibvd0: at its limit 2, the 3rd refused"
hold b0 "$USER2" ibvd0 qp 3
expect "$HELD" "created 2 errno $EAGAIN" "uid $USER2 on ibvd0 at the same time"
hold b1 "$USER2" ibvd1 qp 3
expect "$HELD" "created 3 errno 0" "uid $USER2 on ibvd1: 3, under its limit 4"
new_log_second
once "$USER1" ibvd1 qp 4
expect "$GOT" "created 3 errno $EAGAIN" "uid $USER1 on ibvd1: 3, then all devices' 5 with 2 on ibvd0"
once "$USER2" ibvd0 qp 1
expect "$GOT" "created 0 errno $EAGAIN" "uid $USER2 on ibvd0, another process: over"
expect "$(limit_value "$USER2" all qp current)" 5 "limit show current: uid $USER2 holds 5 QPs in all"
expect "$(limit_value "$USER2" ibvd0 qp current)" 2 "limit show current: 2 of them on ibvd0"
expect "$(limit_value "$USER2" ibvd1 qp current)" 3 "limit show current: 3 on ibvd1"
expect "$(limit_value "$USER2" ibvd1 qp)" 4 "limit show max: ibvd1 qp 4"
expect_grep "uid $USER1: creating a qp refused: qp limit 2 on ibvd0, in use 2" "$DAEMON_LOG" "a device refusal names the device"
expect_grep "uid $USER1: creating a qp refused: qp limit 5, in use 5" "$DAEMON_LOG" "an all-devices refusal names no device"
release a0
release b0
release b1
once_until "created 4 errno $EAGAIN" "$USER1" ibvd1 qp 5
expect "$GOT" "created 4 errno $EAGAIN" "uid $USER1 on ibvd1 once the others exited: its limit 4"

check "per device hca_handle: ibvd1 allows 1 context, ibvd0 the default's 3"
once "$USER1" ibvd1 hca_handle 2
expect "$GOT" "created 1 errno $EAGAIN" "uid $USER1: 2 contexts on ibvd1"
once "$USER1" ibvd0 hca_handle 4
expect "$GOT" "created 3 errno $EAGAIN" "uid $USER1: 4 contexts on ibvd0"

check "per device memlock: ibvd1 4 pages, all devices 16 pages"
reload_conf "\"default\": { \"memlock\": $((16 * PSZ)),
	\"devices\": { \"ibvd1\": { \"memlock\": $((4 * PSZ)) } } }"
once "$USER1" ibvd1 memlock 5
expect "$GOT" "created 0 errno $ENOMEM" "5 pages on ibvd1: over"
once "$USER1" ibvd1 memlock 4
expect "$GOT" "created 1 errno 0" "4 pages on ibvd1: at its limit"
hold m0 "$USER1" ibvd0 memlock 14
expect "$HELD" "created 1 errno 0" "14 pages held on ibvd0"
once "$USER1" ibvd1 memlock 3
expect "$GOT" "created 0 errno $ENOMEM" "3 more pages on ibvd1: over all devices' 16"
once "$USER1" ibvd1 memlock 2
expect "$GOT" "created 1 errno 0" "2 more pages on ibvd1: exactly 16"
expect "$(limit_value "$USER1" ibvd0 memlock current)" $((14 * PSZ)) "limit show current: ibvd0 memlock"
release m0

check "RLIMIT_MEMLOCK and the memlock quota (16 pages): whichever is lower refuses"
reload_conf "\"default\": { \"memlock\": $((16 * PSZ)) }"
LOW=$((4 * PSZ)):$((4 * PSZ))
# as high as we may: raising the hard limit needs CAP_SYS_RESOURCE
HIGH=$(ulimit -H -l)
[ "$HIGH" = unlimited ] || HIGH=$((HIGH * 1024))
[ "$HIGH" = unlimited ] || [ "$HIGH" -gt $((17 * PSZ)) ] ||
	skip "the hard RLIMIT_MEMLOCK ($HIGH bytes) is below the quota under test"
HIGH=$HIGH:$HIGH
new_log_second
once "$USER1" ibvd0 memlock 8 "$LOW"
expect "$GOT" "created 0 errno $ENOMEM" "uid $USER1, rlimit 4 pages, 8 pages (quota 16)"
expect_grep "uid $USER1: registering $((8 * PSZ)) bytes would pin .* over its RLIMIT_MEMLOCK of $((4 * PSZ)) bytes" "$DAEMON_LOG" "refused by the rlimit"
once "$USER1" ibvd0 memlock 4 "$LOW"
expect "$GOT" "created 1 errno 0" "uid $USER1, rlimit 4 pages, 4 pages"
new_log_second
once "$USER1" ibvd0 memlock 17 "$HIGH"
expect "$GOT" "created 0 errno $ENOMEM" "uid $USER1, rlimit $HIGH, 17 pages (quota 16)"
expect_grep "uid $USER1: registering memory refused: memlock limit $((16 * PSZ)), in use [0-9]+, asked $((17 * PSZ))" "$DAEMON_LOG" "refused by the quota"
once "$USER1" ibvd0 memlock 16 "$HIGH"
expect "$GOT" "created 1 errno 0" "uid $USER1, rlimit $HIGH, 16 pages"
# root has CAP_IPC_LOCK: the kernel would skip the rlimit, so do we; the
# quota is ours and applies to root as to anyone
once 0 ibvd0 memlock 8 "$LOW"
expect "$GOT" "created 1 errno 0" "root, rlimit 4 pages, 8 pages: CAP_IPC_LOCK"
once 0 ibvd0 memlock 17 "$HIGH"
expect "$GOT" "created 0 errno $ENOMEM" "root, 17 pages: the quota still applies"

# as UID with primary GID and supplementary GROUPS (comma list)
once_groups() {
	local uid=$1 gid=$2 groups=$3
	(cd "$T" && timeout -k 2 "$TMO" setpriv --reuid="$uid" --regid="$gid" \
		--groups="$groups" -- env IBVERBSD_SOCKET="$SOCK" \
		"$T/tools/ibverbsd-run" "$HELPER" pd 5) >"$O/once" 2>&1
	GOT=$(grep '^created' "$O/once" | sed 's/ pid .*//')
	[ -n "$GOT" ] || { show once "$O/once"; fail "uid $uid groups $groups: no answer"; }
}

check "supplementary groups: group $GRP (pd 1) listed before group $GID_B (pd 2)"
# A tenant (a uid) keeps the identity of its first session: each case
# gets a uid of its own, so that no earlier client's tenant is reused.
reload_conf "\"default\": { \"pd\": 3 }, \"uid\": { \"2005\": { \"pd\": 4 } },
	\"group\": { \"$GRP\": { \"pd\": 1 }, \"$GID_B\": { \"pd\": 2 } }"
once_groups 2001 2001 "$GRP_GID"
expect "$GOT" "created 1 errno $EAGAIN" "uid 2001 with supplementary $GRP: its pd 1"
once_groups 2002 2002 "$GID_B,$GRP_GID"
expect "$GOT" "created 1 errno $EAGAIN" "uid 2002 in both: the first entry in the file"
# sg(1) or newgrp(1) make any of a user's groups primary: that must not
# pick the entry
once_groups 2003 "$GID_B" "$GRP_GID"
expect "$GOT" "created 1 errno $EAGAIN" "uid 2003, primary gid $GID_B: still the first entry in the file"
once_groups 2006 "$GID_B" "$GID_B"
expect "$GOT" "created 2 errno $EAGAIN" "uid 2006, primary gid $GID_B only: its entry"
once_groups 2004 2004 2004
expect "$GOT" "created 3 errno $EAGAIN" "uid 2004 in neither: the default"
once_groups 2005 2005 "$GRP_GID"
expect "$GOT" "created 4 errno $EAGAIN" "uid 2005 in $GRP with a uid entry: the uid's"

check "bandwidth: accepted, shown by limit show, all devices only"
reload_conf '"default": { "bandwidth": 1048576 }, "uid": { "'"$USER2"'": { "bandwidth": "max" } }'
expect "$(limit_value "$USER1" all bandwidth)" 1048576 "uid $USER1 all devices"
expect "$(limit_value "$USER1" ibvd0 bandwidth)" max "uid $USER1 on ibvd0 (not a device limit)"
expect "$(limit_value "$USER2" all bandwidth)" max "uid $USER2's own \"max\""
write_conf '"default": { "devices": { "ibvd0": { "bandwidth": 5 } } }'
kill -HUP "$DAEMON_PID"
for _ in $(seq $((50 * TMUL))); do
	grep -q 'reload failed' "$DAEMON_LOG" && break
	sleep 0.1
done
expect_grep "reload failed.*limits.default.devices.ibvd0.bandwidth: bandwidth limits all devices together" "$DAEMON_LOG" "per-device bandwidth is a config error"
expect "$(limit_value "$USER1" all bandwidth)" 1048576 "the running limits stay"

expect_no_grep "still charged|only [0-9]+ charged" "$DAEMON_LOG" "no accounting errors"
daemon_alive "at the end"
