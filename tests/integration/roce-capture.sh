#!/bin/bash
# What two daemons send each other on a RoCEv2 wire, captured and judged
# twice.  The wire of roce-wire.sh (netns.sh); tshark captures on the
# server's veth while Debian's ibv_rc_pingpong (64 KiB and 64 B, data
# checked), ibv_ud_pingpong and perftest's ib_read_bw, ib_write_bw and
# ib_atomic_bw (fetch-and-add and compare-and-swap) run across.  Then:
#   - our codec (roce-pcap-check-helper): every RoCEv2 packet parses, has
#     a good ICRC (which tshark does not verify) and decodes, and each
#     kind of packet those programs make is there;
#   - tshark: decodes every one as InfiniBand, to the opcode we read, and
#     finds none malformed, none with an expert error or warning (its
#     guesses at what the payloads carry turned off).
# The veths cut UDP datagrams themselves here (ethtool: no
# tx-udp-segmentation), as a NIC without that offload would: the runs of
# packets the daemons hand the kernel as one datagram (gso.c) are on the
# wire as the packets they were made of, and our codec checks their ICRCs
# too, which hold only if the daemon foresaw the identification each one
# gets; some 64 KiB messages must have gone so.
# Skipped without tshark or ethtool (scripts/deps installs them).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns.sh"

need_cmd /usr/bin/ibv_rc_pingpong /usr/bin/ibv_ud_pingpong \
	ib_read_bw ib_write_bw ib_atomic_bw tshark ethtool
is_root || skip "network namespaces need root"
ibvd_init
O=$T/out
wire_up
capture_prepare roce

# ---- the capture -------------------------------------------------------

capture_start
across "RC pingpong, 64 KiB, data checked" "$PP_RE" \
	/usr/bin/ibv_rc_pingpong -g 1 -s 65536 -n 20 -c
across "RC pingpong, 64 B, data checked" "$PP_RE" \
	/usr/bin/ibv_rc_pingpong -g 1 -s 64 -n 20 -c
across "UD pingpong, 1 KiB, data checked" "$PP_RE" \
	/usr/bin/ibv_ud_pingpong -g 1 -s 1024 -n 20 -c
across "ib_read_bw 64 KiB" "$PT_RE" ib_read_bw -d roce0 -x 1 -s 65536 -n 20
across "ib_read_bw 64 B" "$PT_RE" ib_read_bw -d roce0 -x 1 -s 64 -n 20
across "ib_write_bw 64 KiB" "$PT_RE" ib_write_bw -d roce0 -x 1 -s 65536 -n 20
across "ib_atomic_bw fetch and add" "$PT_RE" ib_atomic_bw -d roce0 -x 1 -n 20
across "ib_atomic_bw compare and swap" "$PT_RE" \
	ib_atomic_bw -d roce0 -x 1 -n 20 -A CMP_AND_SWAP
# The RDMA CM across: rping's REQ, REP, RTU, DREQ and DREP on QP1.
check "rping across (the IB CM's MADs on the wire)"
ns_debian "$NSA" "$USER1" "$SOCK_A" /usr/bin/rping -s -a "$IPA" -p 7300 -C 3 -V >"$O/rping.server" 2>&1 &
spid=$!
BG_PIDS+=("$spid")
cm_listening "$SOCK_A" 7300 "$spid" || { show server "$O/rping.server"; fail "rping -s never listened"; }
ns_debian "$NSB" "$USER2" "$SOCK_B" /usr/bin/rping -c -a "$IPA" -p 7300 -C 3 -V >"$O/rping.client" 2>&1 ||
	{ show client "$O/rping.client"; fail "rping -c failed"; }
wait_exit "$spid" "$TMO" && [ "$EXIT_STATUS" -eq 0 ] || { show server "$O/rping.server"; fail "rping -s failed"; }
ok "rping across"
capture_stop

# ---- our codec's verdict -----------------------------------------------

check "our codec: every RoCEv2 packet parses, has a good ICRC, decodes"
"$CHECK" -l "$PCAP" >"$O/check.out" 2>&1 ||
	{ show "roce-pcap-check" "$O/check.out"; fail "roce-pcap-check found bad packets"; }
grep -v '^[0-9]* [0-9]*$' "$O/check.out" | sed "s/^/$IBVD_TEST: /"
ok "$(tail -n 1 "$O/check.out")"
runs=$(awk '/runs cut into packets/{print $1}' "$O/check.out")
[ "${runs:-0}" -gt 0 ] || fail "no run of packets sent as one datagram (identification 0)"
ok "$runs runs went as one datagram each and arrived as good packets"

# The opcodes of those runs: SEND FIRST/MIDDLE/LAST (64 KiB at MTU 1024)
# and ONLY, ACKs; READ requests and responses of several packets and of
# one; WRITE; both atomics and their ACKs; UD SENDs.
check "every kind of packet the programs make was on the wire"
for op in RC_SEND_FIRST RC_SEND_MIDDLE RC_SEND_LAST RC_SEND_ONLY \
	RC_ACKNOWLEDGE RC_RDMA_READ_REQUEST RC_READ_RESPONSE_FIRST \
	RC_READ_RESPONSE_MIDDLE RC_READ_RESPONSE_LAST RC_READ_RESPONSE_ONLY \
	RC_RDMA_WRITE_FIRST RC_RDMA_WRITE_MIDDLE RC_RDMA_WRITE_LAST \
	RC_FETCH_ADD RC_COMPARE_SWAP RC_ATOMIC_ACKNOWLEDGE UD_SEND_ONLY; do
	grep -Eq "^0x[0-9a-f]{2} $op +[1-9]" "$O/check.out" ||
		fail "no $op packet in the capture"
done
ok "all 17 kinds"

# ---- tshark's -----------------------------------------------------------

# tshark's heuristics for what a payload carries (RPC over RDMA, EoIB,
# SMB Direct...; the names are 4.0's): random bytes pass some of them now
# and then (one SEND in thirty of 8 random bytes, tried) and are then
# "malformed" as that protocol.  The payloads are the programs', the
# headers ours.
NO_HEUR=()
for h in rpcrdma_infiniband smcr_infiniband smb_direct_infiniband nvme_rdma \
	lnet_ib iser_infiniband eth_over_ib sdp_infiniband fc_infiniband mellanox_eoib; do
	NO_HEUR+=(--disable-heuristic "$h")
done

# tshark_read ARGS...: tshark reading the capture, RoCEv2 on 4791 said
# outright (its default, but a preference could move it).
tshark_read() {
	tshark -r "$PCAP" -d udp.port==4791,infiniband "${NO_HEUR[@]}" "$@" \
		2>"$O/tshark.err"
}

check "tshark decodes every RoCEv2 packet as InfiniBand, to our opcode"
tshark_read -Y 'udp.dstport == 4791' -T fields \
	-E separator=/s -e frame.number -e infiniband.bth.opcode \
	>"$O/theirs.opcodes" ||
	{ show "tshark" "$O/tshark.err"; fail "tshark cannot read the capture"; }
grep '^[0-9]* [0-9]*$' "$O/check.out" >"$O/ours.opcodes"
diff "$O/ours.opcodes" "$O/theirs.opcodes" >"$O/opcodes.diff" ||
	{ show "ours <, tshark's >" "$O/opcodes.diff"; fail "tshark reads other opcodes than we do"; }
ok "$(wc -l <"$O/ours.opcodes") packets, each with infiniband.bth.opcode"

check "tshark finds no packet malformed, none with an expert error or warning"
tshark_read -Y '_ws.malformed || _ws.expert.severity >= warning' \
	>"$O/tshark.bad" || { show "tshark" "$O/tshark.err"; fail "tshark cannot read the capture"; }
[ -s "$O/tshark.bad" ] && { show "tshark" "$O/tshark.bad"; fail "tshark finds fault with $(wc -l <"$O/tshark.bad") packets"; }
ok "none"

check "tshark decodes rping's connection: the IB CM's messages, rdma_cm's service ID"
tshark_read -Y 'infiniband.mad.mgmtclass == 0x07' -T fields -E separator=/s \
	-e infiniband.mad.attributeid >"$O/cm.attrs" ||
	{ show "tshark" "$O/tshark.err"; fail "tshark cannot read the capture"; }
for attr in 0x0010 0x0013 0x0014 0x0015 0x0016; do
	grep -qx "$attr" "$O/cm.attrs" || { show "CM attributes" "$O/cm.attrs"; fail "no CM MAD $attr in the capture"; }
done
# TCP port space 0x0106, port 7300 (0x1c84)
tshark_read -Y 'infiniband.mad.attributeid == 0x0010' -T fields \
	-e infiniband.cm.req.serviceid.dport -e infiniband.cm.req.serviceid.protocol >"$O/cm.req" ||
	{ show "tshark" "$O/tshark.err"; fail "tshark cannot read the REQ"; }
grep -Eq '^(0x1c84|7300)\s+(0x06|6)$' "$O/cm.req" || { show "REQ service ID" "$O/cm.req"; fail "tshark reads another service ID in the REQ"; }
ok "REQ, REP, RTU, DREQ, DREP decoded; the REQ's service ID is TCP port 7300"
