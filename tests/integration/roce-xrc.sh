#!/bin/bash
# XRC across the RoCEv2 wire: two network namespaces joined by a veth
# pair, one daemon in each with a RoCE device (netns.sh).  XRC requests
# carry an XRCETH that names the target's SRQ; the target takes each
# message into that SRQ, if it is of the target QP's domain.  Debian's
# unmodified ibv_xsrq_pingpong (-g 1, the IPv4 GID) and perftest's
# ib_send_bw, ib_write_bw and ib_read_bw with -c XRC run between uid
# 1001 (server, namespace A) and uid 1002 (client, namespace B).  tshark
# captures the wire meanwhile, and our codec finds every packet good
# (ICRC included) and every one XRC's (opcodes 0xA0 up).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns.sh"

need_cmd ibv_xsrq_pingpong
is_root || skip "network namespaces need root"
ibvd_init
O=$T/out
CAPTURE=""
command -v tshark >/dev/null 2>&1 && command -v ethtool >/dev/null 2>&1 && CAPTURE=1

wire_up
if [ -n "$CAPTURE" ]; then
	capture_prepare xrc
	capture_start
fi

# xrc_files: the XRC domain files the programs open in /tmp (O_CREAT, mode
# 0440): one left by another uid would make open() fail.
xrc_files() {
	rm -f /tmp/xrc_domain /tmp/xrc_domain_server /tmp/xrc_domain_client
}

# xrc_sent: the packets roce0 of B's daemon has sent (its counter).
xrc_sent() {
	SOCK=$SOCK_B ibvctl -j statistic show link roce0/1 >"$O/stat.json" 2>&1 ||
		{ show "statistic show" "$O/stat.json"; fail "ibvctl statistic show"; }
	"$PYTHON" - "$O/stat.json" <<-'PY'
	import json, sys
	print(sum(int(r.get("sent_pkts", 0)) for r in json.load(open(sys.argv[1]))))
	PY
}

# xs_listening PID: until A's daemon lists a listening CM id (rdma_xserver
# listens in RDMA_PS_IB), or PID exits (1).
xs_listening() {
	local i
	for i in $(seq $((TMO * 10))); do
		pid_running "$1" || return 1
		SOCK=$SOCK_A ibvctl -j resource show cm_id 2>/dev/null | "$PYTHON" -c '
import json, sys
sys.exit(0 if any(e.get("state") == "LISTEN" for e in json.load(sys.stdin)) else 1)' &&
			return 0
		sleep 0.1
	done
	return 1
}

XSRQ_RE='^success$'
before=$(xrc_sent)
xrc_files
across "XSRQ pingpong, 4 KiB" "$XSRQ_RE" /usr/bin/ibv_xsrq_pingpong -g 1 -n 200
xrc_files
across "XSRQ pingpong, 64 KiB (many packets a message)" "$XSRQ_RE" \
	/usr/bin/ibv_xsrq_pingpong -g 1 -n 50 -s 65536
xrc_files
across "XSRQ pingpong, completion events" "$XSRQ_RE" \
	/usr/bin/ibv_xsrq_pingpong -g 1 -n 100 -e
after=$(xrc_sent)
[ $((after - before)) -gt 300 ] || fail "B's roce0 sent $((after - before)) packets for the pingpongs"
ok "B's roce0 sent $((after - before)) packets: the pingpongs went over the wire"

if command -v ib_send_bw >/dev/null 2>&1; then
	for prog in ib_send_bw ib_write_bw ib_read_bw; do
		xrc_files
		across "$prog -c XRC 64 KiB" "$PT_RE" $prog -d roce0 -x 1 -c XRC -s 65536 -n 200
	done
	xrc_files
else
	log "perftest is not installed"
fi

# rdma_xserver/rdma_xclient -c x: an XRC connection through the RDMA CM
# (RDMA_PS_IB endpoints of types XRC_RECV and XRC_SEND), the IB CM's REQ
# of transport type XRC; the target's SRQ number in the accept's private
# data, one SEND into it.
if command -v rdma_xserver >/dev/null 2>&1; then
	check "rdma_xserver -c x (A, uid $USER1) and rdma_xclient -c x (B, uid $USER2)"
	PORT=$((PORT + 1))
	ns_debian "$NSA" "$USER1" "$SOCK_A" /usr/bin/rdma_xserver -p "$PORT" -c x \
		>"$O/xs.server" 2>&1 &
	spid=$!
	BG_PIDS+=("$spid")
	xs_listening "$spid" || { show server "$O/xs.server"; fail "rdma_xserver never listened"; }
	ns_debian "$NSB" "$USER2" "$SOCK_B" /usr/bin/rdma_xclient -s "$IPA" -p "$PORT" -c x \
		>"$O/xs.client" 2>&1
	rc=$?
	server_rc "$spid"
	if [ "$rc" -ne 0 ] || [ "$SERVER_RC" -ne 0 ]; then
		show server "$O/xs.server"
		show client "$O/xs.client"
		fail "rdma_xserver/rdma_xclient -c x: server exited $SERVER_RC, client $rc"
	fi
	expect_grep 'rdma_xclient: end 0$' "$O/xs.client" "rdma_xclient -c x"
	expect_grep 'rdma_xserver: end 0$' "$O/xs.server" "rdma_xserver -c x"
	ok "an XRC connection through the CM across the wire"
fi

[ -n "$CAPTURE" ] || { log "no tshark or ethtool: the packets are not looked at"; exit 0; }
capture_stop
check "the wire: every packet parses, with a good ICRC; XRC's opcodes only"
"$CHECK" -l "$PCAP" >"$O/check.out" 2>&1 ||
	{ show "roce-pcap-check" "$O/check.out"; fail "roce-pcap-check found bad packets"; }
grep -v '^[0-9]* [0-9]*$' "$O/check.out" | sed "s/^/$IBVD_TEST: /"
for op in XRC_SEND_FIRST XRC_SEND_MIDDLE XRC_SEND_LAST XRC_ACKNOWLEDGE \
	XRC_RDMA_WRITE_FIRST XRC_RDMA_WRITE_LAST XRC_RDMA_READ_REQUEST \
	XRC_READ_RESPONSE_FIRST XRC_READ_RESPONSE_LAST; do
	grep -Eq "^0x[0-9a-f]{2} $op +[1-9]" "$O/check.out" || fail "no $op packet in the capture"
done
expect_no_grep '^0x[0-9a-f]{2} (RC|UC)_' "$O/check.out" "no RC or UC packet"
ok "$(tail -n 1 "$O/check.out")"
