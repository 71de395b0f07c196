#!/bin/bash
# The RDMA CM to a loopback address on a daemon whose only device is a
# RoCE one (namespace A of netns.sh): rping -V between two unprivileged
# uids of the same host over 127.0.0.1, then over ::1, its server bound
# there.  A loopback address is no GID of the device: the kernel's
# rdma_cm runs such a path from the device's own GID to itself, and so
# must ours; with the addresses taken for GIDs, the IPv4 accept failed
# (GID 0, IPv6, against an IPv4 destination) and ::1's packets went out
# on the wire to nobody (retries exceeded).  Then a client in B bound to
# 127.0.0.1 toward A: the kernel's routing gives a loopback source no route
# out, and its rdma_resolve_addr fails at once with EINVAL; resolved, the
# request named 127.0.0.1 as its source to A, which rejected it: rping
# learnt only at connect (RDMA_CM_EVENT_REJECTED).  Then B resolving an
# address it has no route to: ENETUNREACH at once, as the kernel's.  Last,
# B resolving an address of its subnet that no host has (no ARP reply):
# ADDR_ERROR, ETIMEDOUT once the timeout has passed, as the kernel's; and
# A's, with B's neighbour cache emptied first: resolved once ARP answers.
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

# resolve_fails TAG ADDR WANT WHAT [RPING ARGS...]: Debian's rping from B
# toward ADDR gives up, neither hanging nor succeeding, and its stderr
# has the line WANT (ok "WHAT").
resolve_fails() {
	local tag=$1 addr=$2 want=$3 what=$4 rc
	shift 4
	check "${what%%:*}"
	NS_TMO=$((10 * TMUL)) ns_debian "$NSB" "$USER2" "$SOCK_B" prlimit --memlock="$MEMLOCK" \
		rping -c "$@" -a "$addr" -p "$(free_port)" -C 1 >"$O/$tag" 2>"$O/$tag.err"
	rc=$?
	[ "$rc" -ne 0 ] || fail "rping to $addr exited 0"
	[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] ||
		{ show client "$O/$tag.err"; fail "rping to $addr hung"; }
	grep -q -- "$want" "$O/$tag.err" ||
		{ show client "$O/$tag.err"; fail "rping to $addr: no '$want'"; }
	ok "$what"
}

# A loopback source toward A's address: rdma_resolve_addr fails at once
# with EINVAL, as the kernel's, no server needed.
resolve_fails far "$IPA" 'rdma_resolve_addr: Invalid argument' \
	"a loopback source resolving another host's address: EINVAL at once" -I 127.0.0.1

# An address no route leads to (B has none but its subnet's): the
# kernel's rdma_resolve_addr fails at once with ENETUNREACH, what its
# routing said; ours waited out the timeout for an ADDR_ERROR
# (EHOSTUNREACH), as for an address that does not answer.
resolve_fails noroute 198.51.100.7 'rdma_resolve_addr: Network is unreachable' \
	"resolving an address with no route to it: ENETUNREACH at once"

# An address of B's subnet that no host has: the kernel's rdma_cm waits
# for the next hop's neighbour entry until the app's timeout (rping's
# 2000 ms) and gives ADDR_ERROR, ETIMEDOUT; ours resolved it at once, and
# rping's connect went to nobody.
NOHOST=10.79.0.99
resolve_fails nohost "$NOHOST" 'cma event RDMA_CM_EVENT_ADDR_ERROR, error -110' \
	"resolving an address of the subnet that no host has: ADDR_ERROR, ETIMEDOUT"

# The real peer, B knowing no neighbour: the resolution waits for A's ARP
# reply, then rping runs.
peer_unknown() {
	local port spid rc
	check "resolving the peer's address with an empty neighbour cache"
	port=$(free_port)
	ns_debian "$NSA" "$USER1" "$SOCK_A" prlimit --memlock="$MEMLOCK" \
		rping -s -a "$IPA" -p "$port" -C 1 -V >"$O/ps" 2>"$O/ps.err" &
	spid=$!
	BG_PIDS+=("$spid")
	cm_listening "$SOCK_A" "$port" "$spid" ||
		{ show server "$O/ps.err"; fail "the server never listened on $IPA port $port"; }
	ip -n "$NSB" neigh flush dev "$VB" || fail "ip neigh flush dev $VB"
	ip -n "$NSB" neigh show "$IPA" dev "$VB" | grep -qv FAILED &&
		fail "B still has a neighbour entry for $IPA"
	ns_debian "$NSB" "$USER2" "$SOCK_B" prlimit --memlock="$MEMLOCK" \
		rping -c -a "$IPA" -p "$port" -C 1 -V >"$O/pc" 2>"$O/pc.err"
	rc=$?
	[ "$rc" -eq 0 ] || { show client "$O/pc.err"; fail "rping to $IPA exited $rc"; }
	wait_exit "$spid" "$TMO" || fail "the rping server on $IPA still runs"
	[ "$EXIT_STATUS" -eq 0 ] || { show server "$O/ps.err"; fail "the rping server exited with status $EXIT_STATUS"; }
	ok "resolving the peer's address with an empty neighbour cache"
}
peer_unknown
