#!/bin/bash
# lib.sh's cleanup at a test's exit kills only its own jobs: a pid in
# BG_PIDS that was reaped already (debian_pair's server, once waited for)
# may belong to another program by the time the test ends, and must be
# left alone.  A process of this shell's, not a job of the inner test's,
# stands for such a reused pid.
. "$(dirname "$0")/lib.sh"

ibvd_tmpdir

check "the exit cleanup leaves a listed pid that is not its job"
sleep 60 &
other=$!
BG_PIDS+=("$other")
# The inner test: lib.sh, a job of its own and the stranger's pid listed
# as if it were a reaped one; its EXIT trap is the cleanup under test.
bash -c '
	IBVD_TEST=lib-cleanup-inner
	. "$1"
	ibvd_tmpdir
	sleep 60 &
	echo "$!" >"$3"
	BG_PIDS+=("$!" "$2")
	exit 0
' inner "$top_srcdir/tests/integration/lib.sh" "$other" "$T/out/job" >"$T/out/inner" 2>&1 ||
	{ show inner "$T/out/inner"; fail "the inner test exited $?"; }
job=$(cat "$T/out/job")
pid_running "$other" || fail "the cleanup killed pid $other, which was not its job"
! pid_running "$job" || fail "the cleanup left its own job $job running"
ok "pid $other left running, job $job ended"
kill "$other"
