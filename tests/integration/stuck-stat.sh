#!/bin/bash
# The daemon asks no file system about a client's file on the control
# thread where what the kernel has cached will do.  stuckfs-helper mounts
# a FUSE file system for uid $USER1 that caches no attributes and never
# answers the daemon's GETATTRs: a stat() of its file by the daemon would
# wait there for ever, with every tenant waiting behind it (as fstat() on
# NFS waits for the file's dirty pages to be written back).
#   1. uid $USER1 opens a shared XRC domain on the file (OPEN_XRCD, keyed
#      by the file's device and inode): answered;
#   2. the daemon answers uid $USER2 after it, and has asked nothing.
. "$(dirname "$0")/lib.sh"

is_root || skip "needs root (mounts FUSE)"
[ -c /dev/fuse ] || skip "no /dev/fuse"
ibvd_init
O=$T/out

. "$(dirname "$0")/stuckfs.sh"

conf=$(default_conf) || exit 1
daemon_start -c "$conf"
daemon_wait_ready

stuckfs_start getattr

check "uid $USER1 opens a shared XRC domain on a file whose GETATTRs hang"
run_ours "$USER1" "$T/bin/xrc-helper" --open "$FUSE_DIR/f" >"$O/open" 2>&1 ||
	{ show open "$O/open"; show stuckfs "$O/stuckfs"; fail "OPEN_XRCD on the FUSE file was not answered"; }
expect_grep '^opened$' "$O/open" "the domain opened"

check "the daemon answers uid $USER2 after it, having asked the file system nothing"
run_ours "$USER2" "$T/tools/ibv_devinfo" >"$O/devinfo" 2>&1 ||
	{ show devinfo "$O/devinfo"; fail "uid $USER2 not answered"; }
ok "uid $USER2 answered"
for tid in $(sed -n 's/^held .* tid //p' "$O/stuckfs"); do
	log "held: thread $tid ($(cat "/proc/$DAEMON_PID/task/$tid/comm" 2>&1)): $(cat "/proc/$DAEMON_PID/task/$tid/stack" 2>&1 | head -8 | tr '\n' ' ')"
done
expect_no_grep '^held ' "$O/stuckfs" "no GETATTR of the daemon's held"

daemon_alive "at the end"
