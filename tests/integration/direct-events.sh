#!/bin/bash
# Completion events through the direct transport: Debian's ib_send_lat -e
# -n 1000 between uids $USER1 and $USER2, DIRECT_EVENT_RUNS runs (default
# 3; scripts/events-soak runs hundreds), every other one receiving into an
# SRQ.  perftest's -e sleeps on one channel for both CQs and polls once per
# event, so one lost event hangs it, one extra event makes it poll an
# empty CQ and drift until it hangs, and an answer's event before its
# SEND's fails it.  Its own file so that a soak reaches this loop and
# nothing else of direct.sh can fail it.
. "$(dirname "$0")/lib.sh"

ibvd_init
need_cmd ib_send_lat

# The shipped configuration: the direct transport is on by default.
daemon_start -c "$(default_conf)"
daemon_wait_ready

runs=${DIRECT_EVENT_RUNS:-3}
check "Debian's ib_send_lat -e -n 1000, $runs runs, with and without --use-srq"
for i in $(seq "$runs"); do
	srq=""
	[ $((i % 2)) -eq 0 ] && srq=--use-srq
	# shellcheck disable=SC2086 # $srq is zero or one word
	debian_pair ib_send_lat -e -n 1000 $srq >/dev/null || exit 1
done
ok "$runs runs of 1,000 ping-pongs on events, none failed"
daemon_stop
