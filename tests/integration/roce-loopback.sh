#!/bin/bash
# The RDMA CM to a loopback address on a daemon whose only device is a
# RoCE one (namespace A of netns.sh): rping -V between two unprivileged
# uids of the same host over 127.0.0.1, then over ::1, its server bound
# there.  A loopback address is no GID of the device: the kernel's
# rdma_cm runs such a path from the device's own GID to itself, and so
# must ours; with the addresses taken for GIDs, the IPv4 accept failed
# (GID 0, IPv6, against an IPv4 destination) and ::1's packets went out
# on the wire to nobody (retries exceeded).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns.sh"

need_cmd /usr/bin/rping
is_root || skip "network namespaces need root"
ibvd_init
O=$T/out
wire_up

# rping_loopback ADDR PORT: rping -V, 3 rounds, server and client in A.
rping_loopback() {
	local addr=$1 port=$2 spid rc
	check "rping -V over $addr on a RoCE-only daemon"
	ns_debian "$NSA" "$USER1" "$SOCK_A" prlimit --memlock="$MEMLOCK" \
		rping -s -a "$addr" -p "$port" -C 3 -V >"$O/s.$port" 2>"$O/s.$port.err" &
	spid=$!
	BG_PIDS+=("$spid")
	if ! cm_listening "$SOCK_A" "$port" "$spid"; then
		show server "$O/s.$port.err"
		fail "the server never listened on $addr port $port"
	fi
	ns_debian "$NSA" "$USER2" "$SOCK_A" prlimit --memlock="$MEMLOCK" \
		rping -c -a "$addr" -p "$port" -C 3 -V >"$O/c.$port" 2>"$O/c.$port.err"
	rc=$?
	if [ "$rc" -ne 0 ]; then
		show client "$O/c.$port.err"
		wait_exit "$spid" "$TMO"
		show server "$O/s.$port.err"
		fail "rping over $addr: the client exited with status $rc"
	fi
	wait_exit "$spid" "$TMO" || fail "the rping server over $addr still runs"
	[ "$EXIT_STATUS" -eq 0 ] || { show server "$O/s.$port.err"; fail "the rping server over $addr exited with status $EXIT_STATUS"; }
	ok "rping -V over $addr on a RoCE-only daemon"
}

rping_loopback 127.0.0.1 "$(free_port)"
rping_loopback ::1 "$(free_port)"
