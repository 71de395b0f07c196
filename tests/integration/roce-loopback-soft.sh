#!/bin/bash
# A loopback address on a daemon that lists a software device before its
# RoCE one (namespace A of netns.sh, soft0 then the RoCE device): the
# kernel's rdma_cm binds 127.0.0.1 as the wildcard, with no device, and so
# must ours whichever device comes first.  Bound to the software device,
# libfabric's verbs provider (which binds "localhost" to find its
# devices) offered soft0 at 127.0.0.1 alone, and a job across hosts had
# nothing to reach the other host by.  Same-host users of 127.0.0.1 still
# reach the software device: rping -V between two uids.
. "$(dirname "$0")/lib.sh"
WIRE_DEVS_BEFORE='{ "name": "soft0" },'
. "$(dirname "$0")/netns.sh"

need_cmd /usr/bin/rping /usr/bin/fi_info
is_root || skip "network namespaces need root"
ibvd_init
O=$T/out
wire_up

check "libfabric's verbs provider on soft0 + RoCE: A's address, not localhost"
ns_debian "$NSA" "$USER1" "$SOCK_A" fi_info -p "verbs;ofi_rxm" -v >"$O/fi_info" 2>&1 ||
	{ show fi_info "$O/fi_info"; fail "fi_info -p verbs;ofi_rxm"; }
expect_grep "src_addr: fi_sockaddr_in://$IPA:0" "$O/fi_info" "verbs;ofi_rxm's address"
expect_no_grep "src_addr: fi_sockaddr_in://127\." "$O/fi_info" "verbs;ofi_rxm's address"
ok "libfabric's verbs provider on soft0 + RoCE: $IPA, not 127.0.0.1"

port=$(free_port)
check "rping -V over 127.0.0.1 on soft0 + RoCE"
ns_debian "$NSA" "$USER1" "$SOCK_A" prlimit --memlock="$MEMLOCK" \
	rping -s -a 127.0.0.1 -p "$port" -C 3 -V >"$O/s" 2>"$O/s.err" &
spid=$!
BG_PIDS+=("$spid")
cm_listening "$SOCK_A" "$port" "$spid" ||
	{ show server "$O/s.err"; fail "the server never listened on 127.0.0.1 port $port"; }
ns_debian "$NSA" "$USER2" "$SOCK_A" prlimit --memlock="$MEMLOCK" \
	rping -c -a 127.0.0.1 -p "$port" -C 3 -V >"$O/c" 2>"$O/c.err" ||
	{ show client "$O/c.err"; wait_exit "$spid" "$TMO"; show server "$O/s.err"; fail "rping over 127.0.0.1: the client failed"; }
wait_exit "$spid" "$TMO" || fail "the rping server over 127.0.0.1 still runs"
[ "$EXIT_STATUS" -eq 0 ] || { show server "$O/s.err"; fail "the rping server exited with status $EXIT_STATUS"; }
ok "rping -V over 127.0.0.1 on soft0 + RoCE"
