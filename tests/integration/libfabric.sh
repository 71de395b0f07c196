#!/bin/bash
# libfabric over ibverbsd (issue 11): Debian's unmodified libfabric 1.17
# (libfabric-bin) through ibverbsd-run, between uid 1001 (server) and uid
# 1002 (client).  fi_info lists the verbs provider's FI_EP_MSG and
# FI_EP_DGRAM domains and verbs;ofi_rxm's FI_EP_RDM on our device;
# fi_pingpong runs over FI_EP_MSG (rdma_cm, RC) and FI_EP_RDM (ofi_rxm on
# verbs), every buffer checked (-c), both
# sides exit 0.  The device's packet counter counts what the engine moves:
# over RC, 1 MiB SENDs must show there; ofi_rxd's datagrams between two
# local UD QPs may all pass through the direct transport's rings, which
# the engine never sees, so for it the count is only reported.
# LIBFABRIC_RXM_RUNS (default 1) repeats the verbs;ofi_rxm case, with the
# server pinned to CPU 0 at nice 10 when LIBFABRIC_STARVE is set: the long
# form, scripts/libfabric-soak, for the teardown races a starved CPU shows.
. "$(dirname "$0")/lib.sh"

need_cmd fi_info fi_pingpong fi_strerror ss
ibvd_init
is_root || skip "needs root to run clients as uids $USER1 and $USER2"
O=$T/out
mkdir -p "$O"
DEV=ibvd0
ITERS=200
[ -n "$SANITIZERS" ] && ITERS=50

# ofi_rxm sizes its CQs and buffers for many peers (middleware_conf)
daemon_start -c "$(middleware_conf "$DEV")"
daemon_wait_ready

check "fi_info: the verbs provider and verbs;ofi_rxm on $DEV"
run_debian "$USER1" fi_info -p verbs >"$O/info" 2>&1 || { show fi_info "$O/info"; fail "fi_info -p verbs"; }
for want in "verbs $DEV FI_EP_MSG" "verbs $DEV-dgram FI_EP_DGRAM" "verbs;ofi_rxm $DEV FI_EP_RDM"; do
	awk '/^provider:/{p=$2} /^ *domain:/{d=$2} /^ *type:/{print p, d, $2}' "$O/info" |
		grep -qx "$want" || { show fi_info "$O/info"; fail "fi_info lists no '$want'"; }
done
ok "$(awk '/^provider:/{p=$2} /^ *domain:/{d=$2} /^ *type:/{print p "/" d "/" $2}' "$O/info" | sort -u | tr '\n' ' ')"

check "fi_strerror runs on our library"
run_debian "$USER1" fi_strerror 22 >"$O/strerror" 2>&1 || { show fi_strerror "$O/strerror"; fail "fi_strerror 22"; }
expect_grep "Invalid argument" "$O/strerror" "fi_strerror 22"

# pingpong PROVIDER EP: fi_pingpong, server uid 1001, client uid 1002.
# With NEED_ENGINE=1 in its environment the engine must have carried
# packets of it.
pingpong() {
	local prov=$1 ep=$2 port spid rc_s rc_c s c before after what
	s=$O/${prov#*;}-$ep.server
	c=$O/${prov#*;}-$ep.client
	what="fi_pingpong -p '$prov' -e $ep"
	check "$what"
	port=$(free_port) || exit 1
	before=$(sent_pkts "$DEV")
	TMO=$((TMO * 3)) run_debian "$USER1" "${STARVE[@]}" fi_pingpong -p "$prov" -e "$ep" \
		-B "$port" -I "$ITERS" -c >"$s" 2>&1 &
	spid=$!
	BG_PIDS+=("$spid")
	sleep 1
	pid_running "$spid" || { show server "$s"; fail "$what: the server exited"; }
	# six sizes of $ITERS round trips: a minute, as a loaded machine may need
	TMO=$((TMO * 3)) run_debian "$USER2" fi_pingpong -p "$prov" -e "$ep" -P "$port" \
		-I "$ITERS" -c 127.0.0.1 >"$c" 2>&1
	rc_c=$?
	wait_exit "$spid" "$TMO" && rc_s=$EXIT_STATUS || { term_bg "$spid"; rc_s=124; }
	if [ "$rc_s" -ne 0 ] || [ "$rc_c" -ne 0 ]; then
		show "server (uid $USER1)" "$s"
		show "client (uid $USER2)" "$c"
		fail "$what: server exited $rc_s, client $rc_c"
	fi
	# one result line per size, 64 B to 1 MiB: "bytes iters total time MB/sec usec/xfer Mxfers/sec"
	for f in "$s" "$c"; do
		expect_grep "^1m +$ITERS +=" "$f" "$what: the 1 MiB line"
		expect_no_grep "[Ee]rror|mismatch|corrupt" "$f" "$what: no data error"
	done
	after=$(sent_pkts "$DEV")
	[ -z "${NEED_ENGINE:-}" ] || [ "$after" -gt "$before" ] ||
		fail "$what: no packets through the engine of $DEV ($before -> $after)"
	ok "$what: $(grep -E '^(64|1m) ' "$c" | tr -s ' ' | tr '\n' ';') $((after - before)) packets"
}

STARVE=()
NEED_ENGINE=1 pingpong verbs msg
[ -n "${LIBFABRIC_STARVE:-}" ] && STARVE=(taskset -c 0 nice -n 10)
for _ in $(seq "${LIBFABRIC_RXM_RUNS:-1}"); do
	NEED_ENGINE=1 pingpong "verbs;ofi_rxm" rdm
done
STARVE=()
# RDM over UD datagrams, slow (ofi_rxd's own windows): fewer iterations
ITERS=$((ITERS / 5))
pingpong "verbs;ofi_rxd" rdm
daemon_alive "after libfabric"
daemon_stop
