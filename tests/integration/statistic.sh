#!/bin/bash
# ibvctl statistic show: the engine's port counters (rdma's rxe names) and
# engine thread counters, against known workloads.
#
# A daemon with two devices (ibvd0: 2 ports, ibvd1: 1 port) and two engine
# threads.  Between readings of `ibvctl -j statistic show`:
#   - Debian's ibv_rc_pingpong -n 100 -s 4096 -m 1024, server on ibvd0/2
#     (uid 1001), client on ibvd1/1 (uid 1002): each side sends 100 SENDs
#     of 4 path-MTU packets, so both ports send and receive exactly 400
#     packets (plus 4 per RNR NAK, which pingpong should not see), and the
#     idle port ibvd0/1 stays as it was;
#   - perftest's ib_write_bw -n 100 on ibvd0/1: at least 100 rdma_sends,
#     as many rdma_recvs, every packet sent is received, and one call on a
#     client's memory per WRITE (mem_calls), not two, since the sender's
#     library copies each payload into its staging block; then -s 8, whose
#     payloads it puts in the WQEs, and ib_write_lat -s 65536, staged too;
#   - the "status" case of datapath-helper on ibvd1/1: RNR NAKs with
#     rnr_retry 0 and 7, RNR and transport retries exceeded, remote access
#     errors (wrong rkeys): the error counters grow by what those cases do;
#   - engine rows: one per thread, and they grow.
# Then the filters (link DEV, link DEV/PORT, engine) and their errors.
. "$(dirname "$0")/lib.sh"

need_cmd ss /usr/bin/ibv_rc_pingpong
ibvd_init
O=$T/out

cat >"$T/ibverbsd.conf" <<EOF
{
  "socket": { "path": "$SOCK", "mode": "0666" },
  "engine": { "threads": 2 },
  "log": { "level": "info" },
  "devices": [
    { "name": "ibvd0", "ports": 2 },
    { "name": "ibvd1", "ports": 1 }
  ]
}
EOF
chmod 644 "$T/ibverbsd.conf"
daemon_start -c "$T/ibverbsd.conf"
daemon_wait_ready

TMO=$((TMO * 3))
NAMES="sent_pkts rcvd_pkts duplicate_request out_of_seq_request rcvd_rnr_err
send_rnr_err rcvd_seq_err ack_deferred retry_exceeded_err retry_rnr_exceeded_err
completer_retry_err send_err link_downed rdma_sends rdma_recvs"
ENGINE_NAMES="contexts passes turns wqes bytes sleeps wakeups timers crowded rnr_wait_us mem_calls claim_timeouts ud_parked purge_slots busy_passes deferred direct_bytes"

# snap NAME: save `ibvctl -j statistic show` and the engine rows as NAME.
snap() {
	ibvctl -j statistic show >"$O/$1.json" 2>"$O/$1.err" ||
		{ show stderr "$O/$1.err"; fail "statistic show ($1)"; }
	ibvctl -j statistic show engine >"$O/$1.engine.json" 2>"$O/$1.err" ||
		{ show stderr "$O/$1.err"; fail "statistic show engine ($1)"; }
}

# judge BEFORE AFTER PYTHON: run the assertions in PYTHON with d(port,
# name) the delta of a counter between two snapshots ("ibvd0/1"), and
# e(name) the sum of an engine counter's deltas; prints the deltas.
judge() {
	"$PYTHON" - "$O/$1.json" "$O/$2.json" "$O/$1.engine.json" "$O/$2.engine.json" \
		"$3" <<-'EOF'
	import json, sys
	def rows(path, key):
	    with open(path) as f:
	        return {key(r): r for r in json.load(f)}
	port = lambda r: "%s/%d" % (r["ifname"], r["port"])
	b, a = rows(sys.argv[1], port), rows(sys.argv[2], port)
	eb, ea = rows(sys.argv[3], lambda r: r["engine"]), rows(sys.argv[4], lambda r: r["engine"])
	def d(p, n):
	    return a[p][n] - b[p][n]
	def e(n):
	    return sum(ea[i][n] - eb[i].get(n, 0) for i in ea)
	for p in sorted(a):
	    moved = {k: v - b[p][k] for k, v in a[p].items()
	             if isinstance(v, int) and k not in ("ifindex", "port") and v != b[p][k]}
	    print("  %s: %s" % (p, moved or "no change"))
	print("  engines: %s" % {k: e(k) for k in ("turns", "wqes", "bytes", "passes", "rnr_wait_us", "mem_calls")})
	failed = []
	for line in sys.argv[5].strip().splitlines():
	    if not eval(line.strip()):
	        failed.append(line.strip())
	if failed:
	    print("FAILED: " + "; ".join(failed))
	    sys.exit(1)
	EOF
}

# ---- the rows and their keys --------------------------------------------------------
check "one row per port, rxe's counter names in rxe's order, all 0 at start"
snap start
"$PYTHON" - "$O/start.json" "$NAMES" <<-'EOF' || { show json "$O/start.json"; fail "port rows"; }
import json, sys
rows = json.load(open(sys.argv[1]))
names = sys.argv[2].split()
got = [(r["ifname"], r["port"]) for r in rows]
assert got == [("ibvd0", 1), ("ibvd0", 2), ("ibvd1", 1)], got
for r in rows:
    assert list(r) == ["ifindex", "ifname", "port"] + names, list(r)
    assert all(r[n] == 0 for n in names), r
EOF
ok "3 port rows"

check "engine rows: one per engine thread"
"$PYTHON" - "$O/start.engine.json" "$ENGINE_NAMES" <<-'EOF' || { show json "$O/start.engine.json"; fail "engine rows"; }
import json, sys
rows = json.load(open(sys.argv[1]))
assert [r["engine"] for r in rows] == [0, 1], rows
for r in rows:
    assert list(r) == ["engine"] + sys.argv[2].split(), list(r)
EOF
ok "2 engine rows"

check "text form: link DEV/PORT then name value pairs, as rdma prints it"
ibvctl statistic show link ibvd0/2 >"$O/text" 2>&1 || { show out "$O/text"; fail "statistic show link ibvd0/2"; }
want="link ibvd0/2"
for n in $NAMES; do want="$want $n 0"; done
[ "$(cat "$O/text")" = "$want" ] || { show out "$O/text"; fail "text line is not '$want'"; }
ibvctl statistic show engine >"$O/text" 2>&1 || fail "statistic show engine"
expect_grep '^engine 0 contexts [0-9]+ passes [0-9]+ turns [0-9]+ wqes [0-9]+ bytes [0-9]+ sleeps [0-9]+ wakeups [0-9]+ timers [0-9]+ crowded [0-9]+ rnr_wait_us [0-9]+ mem_calls [0-9]+ claim_timeouts [0-9]+ ud_parked [0-9]+ purge_slots [0-9]+ busy_passes [0-9]+ deferred [0-9]+ direct_bytes [0-9]+$' \
	"$O/text" "engine text line"
ok "$(head -n 1 "$O/text")"

check "an unprivileged user may read the counters"
ibvctl_as "$USER1" statistic show link ibvd1/1 >"$O/user" 2>&1 || { show out "$O/user"; fail "statistic show as uid $USER1"; }
expect_grep '^link ibvd1/1 sent_pkts 0 ' "$O/user" "statistic show as uid $USER1"
ok "uid $USER1 reads them"

# ---- ibv_rc_pingpong across two devices ------------------------------------------------
# server_client NAME "SERVER ARGS" "CLIENT ARGS": a TCP-rendezvous pair of
# Debian programs (pingpong, perftest), server as $USER1, client as $USER2.
server_client() {
	local name=$1 sargs=$2 cargs=$3 port spid rc_c
	port=$(free_port)
	# shellcheck disable=SC2086
	run_debian "$USER1" $sargs -p "$port" >"$O/$name.server" 2>&1 &
	spid=$!
	BG_PIDS+=("$spid")
	wait_tcp_listen "$port" "$spid" || { show server "$O/$name.server"; fail "$name: the server never listened"; }
	# shellcheck disable=SC2086
	run_debian "$USER2" $cargs -p "$port" localhost >"$O/$name.client" 2>&1
	rc_c=$?
	wait_exit "$spid" "$TMO" || fail "$name: the server did not exit"
	if [ "$EXIT_STATUS" -ne 0 ] || [ "$rc_c" -ne 0 ]; then
		show server "$O/$name.server"
		show client "$O/$name.client"
		fail "$name: server exited $EXIT_STATUS, client $rc_c"
	fi
}

check "ibv_rc_pingpong -n 100 -s 4096 -m 1024, ibvd0/2 <-> ibvd1/1"
server_client pingpong "/usr/bin/ibv_rc_pingpong -d ibvd0 -i 2 -n 100 -s 4096 -m 1024" \
	"/usr/bin/ibv_rc_pingpong -d ibvd1 -i 1 -n 100 -s 4096 -m 1024"
snap pingpong
judge start pingpong '
	d("ibvd0/2", "sent_pkts") == 400 + 4 * d("ibvd0/2", "rcvd_rnr_err")
	d("ibvd1/1", "sent_pkts") == 400 + 4 * d("ibvd1/1", "rcvd_rnr_err")
	d("ibvd0/2", "rcvd_pkts") == d("ibvd1/1", "sent_pkts")
	d("ibvd1/1", "rcvd_pkts") == d("ibvd0/2", "sent_pkts")
	d("ibvd0/2", "send_rnr_err") == d("ibvd1/1", "rcvd_rnr_err")
	all(d("ibvd0/1", n) == 0 for n in a["ibvd0/1"] if n != "ifname")
	all(d(p, n) == 0 for p in a for n in ("send_err", "rdma_sends", "rdma_recvs", "retry_exceeded_err"))
	e("wqes") >= 200 and e("bytes") >= 200 * 4096 and e("turns") >= 200
' >"$O/judge" 2>&1 || { show deltas "$O/judge"; fail "counters after ibv_rc_pingpong"; }
show deltas "$O/judge"
ok "pingpong counted on both ports, exactly"

# 1 MiB messages take several engine steps each (chunk.c): the steps'
# packets must still add up to 256 per message at a 4096-byte path MTU.
check "ibv_rc_pingpong -n 10 -s 1048576 -m 4096 (messages moved in steps)"
server_client bigpong "/usr/bin/ibv_rc_pingpong -d ibvd0 -i 2 -n 10 -s 1048576 -m 4096" \
	"/usr/bin/ibv_rc_pingpong -d ibvd1 -i 1 -n 10 -s 1048576 -m 4096"
snap bigpong
judge pingpong bigpong '
	d("ibvd0/2", "sent_pkts") >= 2560 and (d("ibvd0/2", "rcvd_rnr_err") > 0 or d("ibvd0/2", "sent_pkts") == 2560)
	d("ibvd1/1", "sent_pkts") >= 2560 and (d("ibvd1/1", "rcvd_rnr_err") > 0 or d("ibvd1/1", "sent_pkts") == 2560)
	d("ibvd0/2", "rcvd_pkts") == d("ibvd1/1", "sent_pkts")
	d("ibvd1/1", "rcvd_pkts") == d("ibvd0/2", "sent_pkts")
	e("bytes") >= 20 * 1048576
' >"$O/judge" 2>&1 || { show deltas "$O/judge"; fail "counters after 1 MiB pingpongs"; }
show deltas "$O/judge"
ok "1 MiB messages counted as 256 packets each"

# ---- RDMA WRITE: perftest -------------------------------------------------------------
if command -v ib_write_bw >/dev/null 2>&1; then
	check "ib_write_bw -n 100 -s 4096 on ibvd0/1"
	server_client write_bw "$(command -v ib_write_bw) -d ibvd0 -i 1 -n 100 -s 4096" \
		"$(command -v ib_write_bw) -d ibvd0 -i 1 -n 100 -s 4096"
	snap write_bw
	judge bigpong write_bw '
		d("ibvd0/1", "rdma_sends") >= 100
		d("ibvd0/1", "rdma_recvs") == d("ibvd0/1", "rdma_sends")
		d("ibvd0/1", "sent_pkts") >= d("ibvd0/1", "rdma_sends")
		d("ibvd0/1", "rcvd_pkts") == d("ibvd0/1", "sent_pkts")
		d("ibvd0/1", "send_err") == 0
		d("ibvd0/2", "sent_pkts") == 0 and d("ibvd1/1", "sent_pkts") == 0
		e("bytes") >= 100 * 4096
		e("wqes") <= e("mem_calls") <= e("wqes") + 10
	' >"$O/judge" 2>&1 || { show deltas "$O/judge"; fail "counters after ib_write_bw"; }
	show deltas "$O/judge"
	# 100 WRITEs of 4 KiB fit the QP's staging block at once: the library
	# copies each into it as it posts (client/libibverbs/staging.c), and the
	# engine only writes the target's memory, one call per WRITE.
	ok "RDMA WRITEs counted, one memory call each (staged)"

	# 8 bytes fit in the WQE: the sender's library copies them in when it
	# posts (client/libibverbs/post.c, copy_early), so the engine only
	# writes the target's memory, one call per WRITE instead of two.
	check "ib_write_bw -n 1000 -s 8: the engine only writes"
	server_client write_small "$(command -v ib_write_bw) -d ibvd0 -i 1 -n 1000 -s 8" \
		"$(command -v ib_write_bw) -d ibvd0 -i 1 -n 1000 -s 8"
	snap write_small
	judge write_bw write_small '
		d("ibvd0/1", "rdma_sends") >= 1000
		e("wqes") >= 1000
		e("wqes") <= e("mem_calls") <= e("wqes") + 10
	' >"$O/judge" 2>&1 || { show deltas "$O/judge"; fail "counters after ib_write_bw -s 8"; }
	show deltas "$O/judge"
	ok "1000 small WRITEs, one memory call each"

	# ib_write_lat has one WRITE of each side in flight: each finds room in
	# its QP's staging block, whatever the load, and costs one call.
	check "ib_write_lat -n 300 -s 65536: staged, the engine only writes"
	server_client write_lat "$(command -v ib_write_lat) -d ibvd0 -i 1 -n 300 -s 65536" \
		"$(command -v ib_write_lat) -d ibvd0 -i 1 -n 300 -s 65536"
	snap write_lat
	judge write_small write_lat '
		e("wqes") >= 600
		e("bytes") >= 600 * 65536
		e("wqes") <= e("mem_calls") <= e("wqes") + 10
	' >"$O/judge" 2>&1 || { show deltas "$O/judge"; fail "counters after ib_write_lat -s 65536"; }
	show deltas "$O/judge"
	ok "600 WRITEs of 64 KiB, one memory call each"
	last=write_lat
else
	log "perftest (ib_write_bw) is not installed: no RDMA WRITE workload"
	last=bigpong
fi

# ---- errors: RNR, retries, wrong rkeys (datapath-helper's status case) ----------------
HELPER=$T/bin/datapath-helper
[ -x "$HELPER" ] || fail "datapath-helper not built"
if true; then
	check "datapath-helper's status case on ibvd1/1 (RNR, retry and access errors)"
	export VT_TMUL=$TMUL
	TMO=$((TMO * 2)) run_ours "$USER1" env VT_DEVICE=ibvd1 CK_RUN_CASE=status \
		"$HELPER" >"$O/status" 2>&1 || { show datapath "$O/status"; fail "the status case failed"; }
	snap status
	# rnr_retry_exc (SEND, WRITE_WITH_IMM): rnr_retry 0, one RNR NAK each;
	# rnr_retry_infinite: at least one more; rnr_timer_honoured: 7 (rnr_retry
	# 6) and a third RNR_RETRY_EXC_ERR; retry_exc: RETRY_EXC_ERR;
	# rem_access_err: 6 refused WRITE/READ/atomic (wrong rkey, ...).
	# Every RNR NAK that did not end a WQE was waited out at the
	# responder's min_rnr_timer, 1 (0.01 ms) in all of them: the waits
	# the engine scheduled add up exactly (an engine that read the timer
	# before the responder gave it waited 655 ms each: issue 12's stall).
	judge "$last" status '
		d("ibvd1/1", "rcvd_rnr_err") >= 3 + 7
		e("rnr_wait_us") == 10 * (d("ibvd1/1", "rcvd_rnr_err") - d("ibvd1/1", "retry_rnr_exceeded_err"))
		d("ibvd1/1", "send_rnr_err") == d("ibvd1/1", "rcvd_rnr_err")
		d("ibvd1/1", "retry_rnr_exceeded_err") == 3
		d("ibvd1/1", "retry_exceeded_err") >= 1
		d("ibvd1/1", "send_err") >= 6 + 3 + 1
		d("ibvd1/1", "rdma_recvs") >= 6
		all(d(p, n) == 0 for p in a for n in ("duplicate_request", "out_of_seq_request", "rcvd_seq_err", "ack_deferred", "completer_retry_err", "link_downed"))
		all(d("ibvd0/1", n) == 0 for n in a["ibvd0/1"] if n != "ifname")
	' >"$O/judge" 2>&1 || { show deltas "$O/judge"; fail "error counters after the status case"; }
	show deltas "$O/judge"
	ok "RNR, retry and access errors counted"
	last=status
else
	log "datapath-helper not built: no error workload"
fi

check "engine threads keep counting"
judge start "$last" '
	e("passes") > 0 and e("turns") > 0 and e("sleeps") > 0
' >"$O/judge" 2>&1 || { show deltas "$O/judge"; fail "engine counters"; }
ok "$(tail -n 1 "$O/judge")"

# ---- filters --------------------------------------------------------------------------
check "filters: link DEV, link DEV/PORT, engine"
ibvctl -j statistic show link ibvd0 >"$O/f" || fail "link ibvd0"
"$PYTHON" -c 'import json,sys; r=json.load(open(sys.argv[1])); assert [(x["ifname"],x["port"]) for x in r]==[("ibvd0",1),("ibvd0",2)], r' "$O/f" ||
	{ show out "$O/f"; fail "statistic show link ibvd0"; }
ibvctl -j statistic show link ibvd1/1 >"$O/f" || fail "link ibvd1/1"
"$PYTHON" -c 'import json,sys; r=json.load(open(sys.argv[1])); assert [(x["ifname"],x["port"]) for x in r]==[("ibvd1",1)], r' "$O/f" ||
	{ show out "$O/f"; fail "statistic show link ibvd1/1"; }
ok "link ibvd0 (2 rows), link ibvd1/1 (1 row)"

check "bad filters exit non-zero with a message"
for args in "link ibvd0/3:invalid port" "link ibvd0/0:invalid port" "link ibvd0/x:invalid port" \
	    "link nosuch/1:unknown device" "link nosuch:unknown device" "link:link takes" \
	    "engine 1:engine takes" "bogus:unknown statistic filter"; do
	words=${args%%:*}
	want=${args#*:}
	# shellcheck disable=SC2086
	ibvctl statistic show $words >"$O/bad" 2>&1
	rc=$?
	expect_failed "$rc" "statistic show $words"
	expect_grep "$want" "$O/bad" "statistic show $words"
	log "statistic show $words -> $rc: $(head -n 1 "$O/bad")"
done
ok "bad filters refused"

daemon_alive "at the end"
daemon_stop
ok "statistic show"
