#!/bin/bash
# RoCEv2 over IPv6 GIDs: roce-wire.sh's two hosts (two namespaces, a veth
# pair, a daemon in each), with an IPv6 address beside the IPv4 one on
# each end.  Debian's pingpongs run across between two unprivileged uids
# with -g naming the IPv6 GIDs: index 0, the link-local default GID (its
# packets scoped to the veth), and the index of the global address, as
# ibv_devinfo lists it; perftest's ib_read_bw and ib_atomic_bw, and
# ib_send_bw to an IPv6 multicast group (MLD).  The exchange of QP
# numbers still goes over IPv4 TCP; the RoCE packets go over IPv6, as
# the count of IPv6 packets B's kernel took in shows.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns.sh"

for p in ud rc uc; do
	need_cmd "/usr/bin/ibv_${p}_pingpong"
done
need_cmd /usr/bin/ibv_devinfo
is_root || skip "network namespaces need root"
ibvd_init
O=$T/out

IP6A=fd79::1
IP6B=fd79::2

wire_up
[ -e /proc/net/if_inet6 ] || skip "no IPv6 in this kernel"
ip -n "$NSA" addr add "$IP6A/64" dev "$VA" nodad &&
	ip -n "$NSB" addr add "$IP6B/64" dev "$VB" nodad || fail "ip -6 addr add"

# Link-local addresses are tentative until duplicate address detection is
# done (a second or two): until then the kernel will not send from them.
check "IPv6 addresses usable on both ends"
for _ in $(seq $((TMO * 10))); do
	[ -z "$(ip -n "$NSA" -6 addr show dev "$VA" tentative)$(ip -n "$NSB" -6 addr show dev "$VB" tentative)" ] && break
	sleep 0.1
done
[ -z "$(ip -n "$NSA" -6 addr show dev "$VA" tentative)" ] || fail "$VA's IPv6 addresses stay tentative"
[ -z "$(ip -n "$NSB" -6 addr show dev "$VB" tentative)" ] || fail "$VB's IPv6 addresses stay tentative"
ok "no tentative address left"

# gid_index NS SOCK ADDR: the GID index of ADDR in NS's roce0, as Debian's
# ibv_devinfo lists the table (the daemon takes addresses in as they come).
gid_index() {
	local i
	for _ in $(seq $((TMO * 10))); do
		ns_debian "$1" "$USER1" "$2" /usr/bin/ibv_devinfo -v >"$O/devinfo" 2>&1
		i=$(sed -n "s/^[[:space:]]*GID\[ *\([0-9]*\)\]:[[:space:]]*$3, RoCE v2\$/\1/p" "$O/devinfo")
		[ -n "$i" ] && { printf '%s\n' "$i"; return 0; }
		sleep 0.1
	done
	show "ibv_devinfo -v in $1" "$O/devinfo"
	return 1
}
GA=$(gid_index "$NSA" "$SOCK_A" "$IP6A") || fail "no GID for $IP6A in $NSA"
GB=$(gid_index "$NSB" "$SOCK_B" "$IP6B") || fail "no GID for $IP6B in $NSB"
# across gives both ends the same arguments, so the same -g index
[ "$GA" = "$GB" ] || fail "the global IPv6 GIDs have indexes $GA and $GB"
ok "GID[$GA] is $IP6A in $NSA and $IP6B in $NSB"

v6_before=$(ip netns exec "$NSB" cat /proc/net/snmp6 | awk '$1 == "Ip6InReceives" { print $2 }')
across "RC pingpong, link-local GID 0, 64 KiB, data checked" "$PP_RE" \
	/usr/bin/ibv_rc_pingpong -g 0 -s 65536 -n 100 -c
across "RC pingpong, global GID $GA, 4 KiB, data checked" "$PP_RE" \
	/usr/bin/ibv_rc_pingpong -g "$GA" -n 200 -c
across "UC pingpong, global GID $GA, data checked" "$PP_RE" \
	/usr/bin/ibv_uc_pingpong -g "$GA" -n 200 -c
across "UD pingpong, link-local GID 0, 1 KiB, data checked" "$PP_RE" \
	/usr/bin/ibv_ud_pingpong -g 0 -s 1024 -n 200 -c
across "UD pingpong, global GID $GA, data checked" "$PP_RE" \
	/usr/bin/ibv_ud_pingpong -g "$GA" -s 1024 -n 200 -c
if command -v ib_read_bw >/dev/null 2>&1; then
	across "ib_read_bw 64 KiB, GID $GA" "$PT_RE" ib_read_bw -d roce0 -x "$GA" -s 65536 -n 100
	across "ib_atomic_bw, GID 0" "$PT_RE" ib_atomic_bw -d roce0 -x 0 -n 100
	# perftest's own group (ff01::, interface-local) never leaves a host:
	# a link-local one, as 16 bytes
	across "ib_send_bw -g, multicast to ff02::5, GID 0" "$PT_RE" \
		ib_send_bw -d roce0 -x 0 -c UD -g -M 255:2:0:0:0:0:0:0:0:0:0:0:0:0:0:5 -n 50
fi
v6_after=$(ip netns exec "$NSB" cat /proc/net/snmp6 | awk '$1 == "Ip6InReceives" { print $2 }')
# 100 x 64 KiB and 200 x 4 KiB RC messages alone are ~7000 packets in
# (data one way, ACKs the other); neighbour discovery is a handful
[ $((v6_after - v6_before)) -gt 5000 ] ||
	fail "only $((v6_after - v6_before)) IPv6 packets reached $NSB"
ok "$((v6_after - v6_before)) IPv6 packets reached $NSB"

# A datagram longer than any RoCE packet (9216 bytes with its IP header;
# the kernels fragment and reassemble it) is no packet: A drops it before
# parsing and counts it in dropped_too_long; one within the size is not.
too_long() {
	SOCK=$SOCK_A ibvctl -j statistic show link roce0/1 | "$PYTHON" -c 'import json, sys
print(json.load(sys.stdin)[0]["dropped_too_long"])'
}
# send_dgram BYTES: one UDP datagram of that many bytes from B to A:4791
send_dgram() {
	ip netns exec "$NSB" "$PYTHON" -c 'import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.sendto(b"\x64" + bytes(int(sys.argv[2]) - 1), (sys.argv[1], 4791))' "$IP6A" "$1" ||
		fail "sending $1 bytes to [$IP6A]:4791"
}
check "an IPv6 datagram longer than any packet: dropped and counted"
c0=$(too_long) || fail "A's counters"
send_dgram 9100
send_dgram 9300
for _ in $(seq $((50 * TMUL))); do
	c1=$(too_long) || fail "A's counters"
	[ "$c1" -gt "$c0" ] && break
	sleep 0.1
done
sleep 0.3
c1=$(too_long) || fail "A's counters"
[ "$c1" -eq $((c0 + 1)) ] ||
	fail "dropped_too_long went from $c0 to $c1 for one datagram too long and one not"
ok "dropped_too_long $c0 -> $c1"
daemon_alive "after a datagram too long"
ok "$NRUN runs over IPv6 GIDs passed"
