#!/bin/bash
# A copy of client memory that does not return is named in the daemon's
# log, with what backs it and how to free it, and freeing it that way
# lets the daemon go on.  stuckfs-helper (read mode) mounts a FUSE file
# system for uid $USER1 whose server never answers the daemon's READs;
# uid $USER1 maps its file privately, registers an MR on the mapping and
# WRITEs into it, so that the engine's write faults the page in through
# a READ that is held:
#   1. within engine.stuck_copy_ms (500 ms here, set by a reload from the
#      default 5 s) the daemon logs the engine thread and the client's pid
#      and uid, and then the FUSE connection (the mount's device), the
#      abort that frees it and the file;
#   2. writing that abort fails the copy: the WRITE completes with an
#      error, the daemon logs that the copy returned, and, with its pid
#      unchanged, serves Debian's ibv_rc_pingpong between two uids.
. "$(dirname "$0")/lib.sh"

is_root || skip "needs root (mounts FUSE)"
[ -c /dev/fuse ] || skip "no /dev/fuse"
ibvd_init
O=$T/out
. "$(dirname "$0")/stuckfs.sh"
FUSECTL=/sys/fs/fuse/connections
CTL_MOUNTED=""
HELPER=""

stuck_cleanup() {
	local rc=$?
	[ -n "$HELPER" ] && kill -KILL "$HELPER" 2>/dev/null
	stuckfs_stop
	[ -n "$CTL_MOUNTED" ] && umount "$FUSECTL" 2>/dev/null
	(exit "$rc")
	ibvd_cleanup
}
trap stuck_cleanup EXIT

conf=$(default_conf) || exit 1
daemon_start -c "$conf"
daemon_wait_ready
conf_edit "$conf" 'cfg.setdefault("engine", {})["stuck_copy_ms"] = 500' >/dev/null || exit 1
ibvctl daemon reload >"$O/reload" 2>&1 || { show reload "$O/reload"; fail "ibvctl daemon reload"; }

# The connections' directory names each FUSE mount by its device: mount
# it for the test if the host has not.
if [ -d "$FUSECTL" ] && ! grep -q " $FUSECTL fusectl " /proc/mounts; then
	mount -t fusectl fusectl "$FUSECTL" 2>/dev/null && CTL_MOUNTED=1
fi

stuckfs_start read
# its device, from the mount table (root may not stat it: no allow_other)
dev=$(awk -v m="$FUSE_DIR" '$5 == m { print $3 }' /proc/self/mountinfo)
[ -n "$dev" ] || fail "$FUSE_DIR is not in /proc/self/mountinfo"
conn=$(( (${dev%%:*} << 20) | ${dev#*:} ))

check "uid $USER1's WRITE into its FUSE mapping stops a copy; the daemon says whose, what and how to free it"
run_ours "$USER1" "$T/bin/mapped-helper" --stuck "$FUSE_DIR/f" >"$O/stuck" 2>&1 &
HELPER=$!
for _ in $(seq $((300 * TMUL))); do
	grep -q 'has not returned for' "$DAEMON_LOG" && break
	pid_running "$HELPER" || break
	sleep 0.1
done
line=$(grep -m 1 'has not returned for' "$DAEMON_LOG") ||
	{ show helper "$O/stuck"; show stuckfs "$O/stuckfs"; show "daemon log" "$DAEMON_LOG"
	  fail "the daemon did not report the stuck copy"; }
grep -q '^held ' "$O/stuckfs" || { show stuckfs "$O/stuckfs"; fail "no READ of the daemon was held"; }
grep -q 'completion:' "$O/stuck" && { show helper "$O/stuck"; fail "the WRITE completed while its copy was held"; }
cpid=$(sed -n 's/^pid //p' "$O/stuck")
[ -n "$cpid" ] || { show helper "$O/stuck"; fail "mapped-helper did not say its pid"; }
for want in "engine thread" "pid $cpid (uid $USER1)"; do
	case $line in
	*"$want"*) ;;
	*) fail "the report does not name '$want': $line" ;;
	esac
done
ms=$(sed -n 's/.*has not returned for \([0-9]*\) ms.*/\1/p' <<<"$line")
[ -n "$ms" ] && [ "$ms" -ge 500 ] && [ "$ms" -lt 5000 ] ||
	fail "reported after '$ms' ms, not within the 500 ms the reload set: $line"
# The look at what backs it, a line of its own soon after.  Under
# sanitizers the client's allocator may map memory during the stall: the
# call waits behind the stuck fault, and a read of the client's mappings
# may wait behind that call (copy_describe.c), so the line may not come.
for _ in $(seq $((50 * TMUL))); do
	grep -q 'the stuck copy' "$DAEMON_LOG" && break
	sleep 0.1
done
what=$(grep -m 1 'the stuck copy' "$DAEMON_LOG")
if [ -z "$what" ]; then
	[ -n "$SANITIZERS" ] || { show "daemon log" "$DAEMON_LOG"; fail "the daemon did not say what the stuck copy waits for"; }
	log "no second line (sanitizers: the client may be mapping memory behind the stuck fault)"
else
	case $what in
	*"$FUSE_DIR/f (device $dev)"*) ;;
	*) fail "the second line does not name the file and its device $dev: $what" ;;
	esac
	if [ -d "$FUSECTL/$conn" ]; then
		case $what in
		*"FUSE connection $conn: \`echo 1 > $FUSECTL/$conn/abort\`"*) ;;
		*) fail "the second line does not name FUSE connection $conn and its abort: $what" ;;
		esac
	else
		log "no $FUSECTL here: the connection is not named, the server's exit aborts it"
	fi
fi
ok "${line#*err: }"
if [ -n "$what" ]; then ok "${what#*err: }"; fi

check "the abort the daemon named fails the copy, and the daemon goes on"
if [ -d "$FUSECTL/$conn" ]; then
	echo 1 >"$FUSECTL/$conn/abort" || fail "cannot abort FUSE connection $conn"
	how="echo 1 > $FUSECTL/$conn/abort"
else
	# no connections' directory here: ending the server aborts it too
	kill -TERM "$STUCKFS"
	wait_exit "$STUCKFS" 10 || fail "stuckfs-helper did not exit"
	STUCKFS=""
	how="the FUSE server's exit"
fi
wait_exit "$HELPER" $((30 * TMUL)) || { show helper "$O/stuck"; fail "the WRITE did not complete after $how"; }
wait "$HELPER"
rc=$?
HELPER=""
[ "$rc" -eq 0 ] || { show helper "$O/stuck"; fail "mapped-helper --stuck exited $rc"; }
status=$(sed -n 's/^completion: //p' "$O/stuck")
case $status in
"" | success | none) show helper "$O/stuck"; fail "after $how the WRITE completed with '$status', not an error" ;;
esac
for _ in $(seq $((30 * TMUL))); do
	grep -q 'the copy that stood returned after' "$DAEMON_LOG" && break
	sleep 0.1
done
grep -q 'the copy that stood returned after' "$DAEMON_LOG" ||
	{ show "daemon log" "$DAEMON_LOG"; fail "the daemon did not log the copy's return"; }
daemon_alive "after the abort"	# the one started above, never restarted
result=$(debian_pair ibv_rc_pingpong -n 200) || exit 1
ok "after $how: the WRITE completed with '$status'; $(grep -o 'the copy that stood returned after [0-9]* ms' "$DAEMON_LOG" | head -n 1); ibv_rc_pingpong: $result"
