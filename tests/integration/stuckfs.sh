# Sourced by the tests that hold the daemon in a FUSE file system
# (stuck-close.sh, stuck-copy.sh, stuck-stat.sh), after lib.sh and ibvd_init: a mount of
# stuckfs-helper for uid $USER1 in $FUSE_DIR whose server holds what the
# daemon asks of it.  Its output goes to $O/stuckfs.
FUSE_DIR=$T/fuse
STUCKFS=""

# stuckfs_stop: the server first (its exit ends whatever it holds), then
# what is left of its mount.
stuckfs_stop() {
	if [ -n "$STUCKFS" ]; then
		kill -TERM "$STUCKFS" 2>/dev/null
		wait_exit "$STUCKFS" 5 || { kill -KILL "$STUCKFS"; wait "$STUCKFS"; } 2>/dev/null
	fi
	STUCKFS=""
	umount -l "$FUSE_DIR" 2>/dev/null
}

# stuckfs_cleanup: at exit, the server first (its exit ends whatever of
# the daemon it holds), then the rest; a test with more to undo sets a
# trap of its own.
stuckfs_cleanup() {
	local rc=$?
	stuckfs_stop
	(exit "$rc")
	ibvd_cleanup
}
trap stuckfs_cleanup EXIT

# stuckfs_start [read]: mount it, holding the daemon's FLUSHes (or, with
# "read", its READs); skips the test where FUSE cannot be mounted.
stuckfs_start() {
	local rc
	mkdir -p "$FUSE_DIR" && chmod 755 "$FUSE_DIR" || fail "mkdir $FUSE_DIR"
	"$T/bin/stuckfs-helper" "$FUSE_DIR" "$USER1" "$DAEMON_PID" "$@" >"$O/stuckfs" 2>&1 &
	STUCKFS=$!
	for _ in $(seq $((50 * TMUL))); do
		grep -q '^mounted$' "$O/stuckfs" && break
		pid_running "$STUCKFS" || break
		sleep 0.1
	done
	grep -q '^mounted$' "$O/stuckfs" && return 0
	wait "$STUCKFS"
	rc=$?
	STUCKFS=""
	show stuckfs "$O/stuckfs"
	[ "$rc" -eq 77 ] && skip "FUSE cannot be mounted here"
	fail "stuckfs-helper did not mount (exit $rc)"
}
