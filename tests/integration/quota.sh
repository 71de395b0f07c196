#!/bin/bash
# Per-tenant quotas (issue 5): for every limit kind, two uids at once get
# exactly their limit each, the next request is refused (EAGAIN for counts,
# ENOMEM for memlock) and succeeds again once the holder exits or is
# killed with SIGKILL (usage back to zero); a reload changes limits live
# and a uid entry beats the default; a cgroup prefix entry applies to a
# client in a cgroup the test makes; random churn with kill -9 leaves no
# usage behind; refusals are logged with uid and limit.
. "$(dirname "$0")/lib.sh"

ibvd_init
is_root || skip "needs root to run clients as uids $USER1 and $USER2"
O=$T/out
HELPER=$T/bin/quota-helper
[ -x "$HELPER" ] || fail "tests/integration/quota-helper not built"
conf=$T/quota.conf
PSZ=$(getconf PAGESIZE)
MEMLOCK=$((16 * PSZ))		# 16 pages
EAGAIN=11
ENOMEM=12

# write_conf DEFAULT_LIMITS [UID2_LIMITS [CGROUP_ENTRIES]]: JSON objects'
# contents
write_conf() {
	cat >"$conf" <<-EOF
	{
	  "socket": { "path": "$SOCK" },
	  "devices": [ { "name": "ibvd0", "ports": 1, "lid": 1 } ],
	  "limits": {
	    "default": { $1 },
	    "uid": { "$USER2": { ${2:-} } },
	    "cgroup": { ${3:-} }
	  }
	}
	EOF
	chmod 644 "$conf"
}

COUNTS='"hca_handle": 2, "pd": 3, "mr": 3, "cq": 3, "qp": 3, "srq": 3, "ah": 3, "cm_id": 3'
write_conf "$COUNTS, \"memlock\": $MEMLOCK"
daemon_start -c "$conf"
daemon_wait_ready

# hold NAME UID ARGS...: run the helper with ARGS keeping what it made;
# waits for its line, left in HELD (its stdin's fd in HOLD_FD[NAME]).
NH=0
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
		grep -Eq '^(created|churned)' "$O/$name" && break
		pid_running "${HOLD_PID[$name]}" || break
		sleep 0.1
	done
	HELD=$(grep -E '^(created|churned)' "$O/$name" | sed 's/ pid .*//')
	[ -n "$HELD" ] || { show "$name" "$O/$name"; fail "$name: no answer"; }
}

# release NAME: close its stdin; it exits and the daemon releases all.
release() {
	local fd=${HOLD_FD[$1]}
	exec {fd}>&-
	wait_exit "${HOLD_PID[$1]}" "$TMO" || fail "$1 did not exit"
}

# killed NAME: SIGKILL the helper itself (not the wrappers around it).
killed() {
	local pid fd=${HOLD_FD[$1]}
	pid=$(sed -En 's/^(created|churned) .* pid //p' "$O/$1")
	kill -KILL "$pid" || fail "kill -9 $pid"
	exec {fd}>&-
	wait_exit "${HOLD_PID[$1]}" "$TMO"
}

# once UID KIND N: run it without holding; the line is left in GOT.
once() {
	run_ours "$1" "$HELPER" "$2" "$3" >"$O/once" 2>&1
	GOT=$(grep '^created' "$O/once" | sed 's/ pid .*//')
	[ -n "$GOT" ] || { show once "$O/once"; fail "$1 $2 $3: no answer"; }
}

# once_until WANT UID KIND N: the daemon sees a dead client's socket close
# a moment after the process is gone: retry briefly before judging.
once_until() {
	local i
	for i in $(seq $((20 * TMUL))); do
		once "$2" "$3" "$4"
		[ "$GOT" = "$1" ] && return 0
		sleep 0.1
	done
}

expect() {
	[ "$1" = "$2" ] || fail "$3: got '$1', want '$2'"
	ok "$3: $1"
}

for kind in hca_handle pd mr cq qp srq ah cm_id; do
	lim=3
	[ $kind = hca_handle ] && lim=2
	check "$kind: limit $lim per uid, two uids at once"
	hold a1 "$USER1" $kind $((lim + 1))
	expect "$HELD" "created $lim errno $EAGAIN" "uid $USER1, $((lim + 1)) ${kind}s"
	hold b1 "$USER2" $kind $((lim + 1))
	expect "$HELD" "created $lim errno $EAGAIN" "uid $USER2 at the same time"
	once "$USER1" $kind 1
	# hca_handle: the helper itself needs no context for these two kinds
	expect "$GOT" "created 0 errno $EAGAIN" "uid $USER1, one more, another process"
	if [ $kind = qp ] || [ $kind = cm_id ]; then
		killed a1
		how="kill -9"
	else
		release a1
		how="exit"
	fi
	release b1
	once_until "created $lim errno 0" "$USER1" $kind $lim
	expect "$GOT" "created $lim errno 0" "uid $USER1 after $how of its holder"
	rm -f "$T/a1.in" "$T/b1.in"
done

check "memlock: $MEMLOCK bytes per uid"
once "$USER1" memlock 17
expect "$GOT" "created 0 errno $ENOMEM" "17 pages at once"
hold a1 "$USER1" memlock 16
expect "$HELD" "created 1 errno 0" "uid $USER1, 16 pages"
hold b1 "$USER2" memlock 16
expect "$HELD" "created 1 errno 0" "uid $USER2, 16 pages at the same time"
once "$USER1" memlock 1
expect "$GOT" "created 0 errno $ENOMEM" "uid $USER1, one more page"
killed a1
release b1
once_until "created 1 errno 0" "$USER1" memlock 16
expect "$GOT" "created 1 errno 0" "uid $USER1, 16 pages after kill -9"
rm -f "$T/a1.in" "$T/b1.in"
expect_grep "uid $USER1: registering memory refused: memlock limit $MEMLOCK" "$DAEMON_LOG" "the refusal is logged"
expect_grep "uid $USER1: creating a qp refused: qp limit 3" "$DAEMON_LOG" "the refusal is logged"

check "reload: new limits apply live, a uid entry beats the default"
hold a1 "$USER1" pd 2
expect "$HELD" "created 2 errno 0" "uid $USER1 holds 2 PDs across the reload"
write_conf '"pd": 10, "hca_object": 4' '"hca_object": 1'
kill -HUP "$DAEMON_PID"
for _ in $(seq $((50 * TMUL))); do
	grep -q 'configuration reloaded' "$DAEMON_LOG" && break
	sleep 0.1
done
daemon_alive "after SIGHUP"
once "$USER1" pd 5
expect "$GOT" "created 2 errno $EAGAIN" "uid $USER1: hca_object 4 with 2 held"
once "$USER2" pd 5
expect "$GOT" "created 1 errno $EAGAIN" "uid $USER2: its own hca_object 1"
release a1
once_until "created 4 errno $EAGAIN" "$USER1" pd 5
expect "$GOT" "created 4 errno $EAGAIN" "uid $USER1 after its holder exited"
once "$USER1" mw 5
expect "$GOT" "created 3 errno $EAGAIN" "uid $USER1: memory windows are hca_objects (4, one PD)"
once "$USER1" xrcd 5
expect "$GOT" "created 4 errno $EAGAIN" "uid $USER1: XRC domains are hca_objects"

# reload_conf ARGS...: write_conf ARGS, SIGHUP, wait for the log line.
NRELOAD=1
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

check "cgroup prefix: a client in a cgroup the test made"
cg2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
name=ibvd-quota-$$
if [ -z "$cg2" ] || ! mkdir "$cg2/$name" 2>/dev/null || ! mkdir "$cg2/$name/a"; then
	log "SKIP (part): cannot create a cgroup v2 group${cg2:+ under $cg2}"
else
	reload_conf '"pd": 3' '' "\"/$name/\": { \"pd\": 1 }, \"/$name/a/b/\": { \"pd\": 2 }"
	# the subshell moves itself; the client it starts inherits the cgroup
	( echo "$BASHPID" >"$cg2/$name/a/cgroup.procs" &&
	  run_ours "$USER1" "$HELPER" pd 5 ) >"$O/once" 2>&1
	GOT=$(grep '^created' "$O/once" | sed 's/ pid .*//')
	rmdir "$cg2/$name/a" "$cg2/$name"
	expect "$GOT" "created 1 errno $EAGAIN" "uid $USER1 in /$name/a: the /$name/ entry's pd 1"
	once_until "created 3 errno $EAGAIN" "$USER1" pd 5
	expect "$GOT" "created 3 errno $EAGAIN" "uid $USER1 outside it: the default's pd 3"
fi

check "usage never drifts: random churn, exits and kill -9, two uids at once"
reload_conf "$COUNTS, \"memlock\": $MEMLOCK, \"hca_object\": 12"
for i in $(seq 6); do
	hold c1 "$USER1" churn 1000 "$i"
	[ "${HELD#churned 1000 }" != "$HELD" ] || fail "churn $i: $HELD"
	hold c2 "$USER2" churn 1000 "$((i + 100))"
	[ "${HELD#churned 1000 }" != "$HELD" ] || fail "churn $i: $HELD"
	if [ $((i % 2)) -eq 1 ]; then
		killed c1
		killed c2
	else
		release c1
		release c2
	fi
	rm -f "$T/c1.in" "$T/c2.in"
done
ok "12 processes of 1000 random creations and destructions, half killed"
for u in "$USER1" "$USER2"; do
	for kind in pd cq mr qp srq ah cm_id; do
		once_until "created 3 errno 0" "$u" $kind 3
		expect "$GOT" "created 3 errno 0" "uid $u gets its whole $kind limit again"
	done
	once_until "created 1 errno 0" "$u" memlock 16
	expect "$GOT" "created 1 errno 0" "uid $u gets its whole memlock limit again"
done
expect_no_grep "still charged|only [0-9]+ charged" "$DAEMON_LOG" "no accounting errors"

daemon_alive "at the end"
