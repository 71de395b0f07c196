#!/bin/bash
# A RoCE QP's responder against a peer that writes its own packets
# (roce-responder.py, as root in namespace B, raw sockets) while
# roce-qp-helper holds the QP in namespace A's daemon as uid $USER1:
#   write_past  a WRITE whose RETH runs past its MR lands nothing
#   write_imm_key  a WRITE with immediate and a wrong rkey: NAKed, and
#               the receive its immediate takes completes LOC_ACCESS_ERR
#   write_imm_order  the receive comes before the key (none: RNR NAK);
#               a First refused by its key is NAKed, no receive taken
#   no_rd       max_dest_rd_atomic 0 refuses READs and atomics
#   dup_read    2,000 copies of one 1 MiB READ are not all answered again
#               (each is 1 MiB of work for the thread every QP shares)
#   spoof_self  a packet forged from the device's own address, at a QP
#               connected to itself, is dropped and counted: the answer
#               would come back to the QP whose lock it is sent under
#   moved       a QP moved to another peer address (SQD, new AV, RTS)
#               takes packets from the new address only
#   srq_dup     SENDs into an SRQ over a link that loses and duplicates:
#               each message takes one WQE, its copies none, and the
#               SRQ's limit event comes once, when a message takes it
#               below the limit
#   srq_rnr     an empty SRQ: RNR NAK, then the message lands once
#   xrc_srq     two XRC targets into one SRQ, their messages interleaved,
#               with packets lost and sent twice: one WQE each, whole
#   rnr_late    the QP's requester (rnr_retry 2) against RNR NAKs that
#               each come after its ACK timeout: RNR_RETRY_EXC_ERR still
#   xrc_gone    that SRQ destroyed with a message half in: what follows
#               is NAKed, the daemon goes on
# and the responder's packets count in sent_pkts.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns.sh"

is_root || skip "network namespaces need root"
ibvd_init
O=$T/out
trap wire_cleanup EXIT
wire_netns
# IPv4 takes a packet from one of its own addresses only if asked to
ip netns exec "$NSA" sysctl -qw net.ipv4.conf.all.accept_local=1 \
	"net.ipv4.conf.$VA.accept_local=1" || fail "sysctl accept_local"
SOCK_A=$T/run/a.sock
IBVERBSD=$(in_ns_daemon "$NSA")
daemon_start -c "$(conf_for a "$VA" "$SOCK_A")"
daemon_wait_ready "$SOCK_A"

# counter NAME: roce0/1's counter NAME in A's daemon
counter() {
	SOCK=$SOCK_A ibvctl -j statistic show link roce0/1 >"$O/stat.json" 2>&1 ||
		{ show "statistic show" "$O/stat.json"; fail "ibvctl statistic show link roce0/1"; }
	"$PYTHON" - "$O/stat.json" "$1" <<-'EOF'
	import json, sys
	print(sum(int(r.get(sys.argv[2], 0)) for r in json.load(open(sys.argv[1]))))
	EOF
}

# a second address of B's, for a QP to move away from
IPB2=10.79.0.3
ip -n "$NSB" addr add "$IPB2/24" dev "$VB" || fail "ip addr add $IPB2"

responder() {	# CASE WHAT
	check "$2"
	ip netns exec "$NSB" env TMO="$TMO" timeout -k 2 $((TMO * 4)) \
		"$PYTHON" "$top_srcdir/tests/integration/roce-responder.py" "$1" "$NSA" \
		"$SOCK_A" "$USER1" "$T/tools/ibverbsd-run" "$T/bin/roce-qp-helper" \
		"$IPA" "$IPB" "$IPB2" >"$O/$1" 2>&1 || { show "$1" "$O/$1"; fail "$2"; }
	daemon_alive "after $1"
	ok "$(grep -v '^ok$' "$O/$1" | tail -1)"
}

# counter_went NAME BEFORE DELTA WHAT: counter NAME moved from BEFORE by
# exactly DELTA, which is WHAT (a check); its value is left in NOW.
NOW=0
counter_went() {
	NOW=$(counter "$1")
	check "$4"
	[ "$NOW" -eq $(($2 + $3)) ] || fail "$1 went from $2 to $NOW, not by $3"
	ok "$1 $2 -> $NOW"
}

sent0=$(counter sent_pkts)
responder write_past "a WRITE running past its MR: NAKed at its first packet, nothing lands"
responder no_rd "max_dest_rd_atomic 0: READ and FETCH_ADD NAKed, memory untouched"
counter_went sent_pkts "$sent0" 3 "the responder's three NAKs count in sent_pkts"
sent1=$NOW

# A 1 MiB READ at MTU 1024 is 1,024 responses, counted in sent_pkts: the
# first one's, then each answered again.  A QP's budget for those is 16
# MiB at once, topped up at 64 MiB/s (rc_resp.c), while the daemon works
# through the 2,000 (a few ms each on a busy machine): far fewer than
# 500 are answered, where all of them were without it.
responder dup_read "2,000 duplicates of a 1 MiB READ: a few answered again"
sent2=$(counter sent_pkts)
replays=$(( (sent2 - sent1 - 1024) / 1024 ))
check "the duplicates answered again: at least one, fewer than 500"
[ $(( (sent2 - sent1) % 1024 )) -eq 0 ] || fail "sent_pkts went up by $((sent2 - sent1)), not by whole READs"
[ "$replays" -ge 1 ] && [ "$replays" -lt 500 ] ||
	fail "$replays of 2,000 duplicate 1 MiB READs were answered again"
ok "$replays of 2,000 answered again"

responder send_grh "a SEND from the wire: its receive completion says IBV_WC_GRH, as rxe's"
responder write_imm_key "a WRITE with immediate and a wrong rkey: NAKed, its receive LOC_ACCESS_ERR"
responder write_imm_order "a WRITE with immediate: its receive before its key, a refused First NAKed before any"

forged0=$(counter dropped_not_peer)
responder spoof_self "a packet forged from the device's own address: dropped, the daemon answers on"
counter_went dropped_not_peer "$forged0" 1 "the forged packet counts in dropped_not_peer"

responder moved "a QP moved to another address in SQD: packets from the old one dropped"

dup0=$(counter duplicate_request)
responder srq_dup "SENDs into an SRQ, lost and duplicated packets: one WQE a message, one limit event"
responder srq_rnr "a SEND into an empty SRQ: RNR NAK, then it lands once"
responder xrc_srq "two XRC targets into one SRQ, packets lost and duplicated: one WQE a message"
# srq_dup sends 5 copies; xrc_srq 6: A's first, B's first two, then all of B again
counter_went duplicate_request "$dup0" 11 "the copies count in duplicate_request"
responder rnr_late "RNR NAKs after each ACK timeout: rnr_retry 2 still runs out"
responder xrc_gone "an XRC SRQ destroyed with a message half in: the rest NAKed, the daemon unharmed"
daemon_stop
