#!/bin/bash
# A RoCEv2 device bound to a network interface, next to a software device:
# a daemon in a network namespace of its own with a veth pair.  Debian's
# unmodified ibv_devinfo sees it as it sees rxe (Ethernet link layer, LID
# 0, active_mtu from the interface's MTU, GIDs "RoCE v2" made of the MAC
# and the addresses); ibvctl link show names the interface; address
# changes reach a client as IBV_EVENT_GID_CHANGE with stable GID indexes,
# carrier and link changes as IBV_EVENT_PORT_ERR / IBV_EVENT_PORT_ACTIVE
# with the port DOWN in between; an interface that goes away and comes
# back (by name) takes the device with it.  A config naming an interface
# that does not exist, or a bad "peers" CIDR, fails with its position.
. "$(dirname "$0")/lib.sh"

need_cmd ip /usr/bin/ibv_devinfo
is_root || skip "network namespaces need root"
ibvd_init
O=$T/out

# ---- a namespace with a veth pair, removed whatever happens ---------------

NS=ibvd-roce-$$
VA=ivr$$a		# the RoCE device's interface
VB=ivr$$b		# its peer
NS_MADE=""
# The namespace and its veths live on until the daemon in it is gone too
# (ibvd_cleanup kills it).
roce_cleanup() {
	local rc=$?
	[ -n "$NS_MADE" ] && ip netns delete "$NS" 2>/dev/null
	(exit "$rc")
	ibvd_cleanup
}
trap roce_cleanup EXIT

nsip() { ip -n "$NS" "$@"; }

make_veth() {
	nsip link add "$VA" type veth peer name "$VB" || fail "ip link add $VA type veth"
	nsip link set "$VA" up && nsip link set "$VB" up || fail "ip link set up"
	nsip addr add 10.77.0.1/24 dev "$VA" || fail "ip addr add"
}

ip netns add "$NS" 2>"$O/netns.err" || { show "ip netns add" "$O/netns.err"; skip "cannot create a network namespace"; }
NS_MADE=1
nsip link set lo up
make_veth
# The daemon runs in the namespace (ip netns exec keeps the pid); clients
# reach its socket by path from outside.
# With failaddrs.c preloaded: getifaddrs() fails while $FAIL_ADDRS exists.
FAIL_ADDRS=$T/fail-addrs
PRELOAD=$top_builddir/tests/integration/.libs/libfailaddrs.so
[ -r "$PRELOAD" ] || fail "$PRELOAD not built (make check builds it)"
if [ -n "$SANITIZERS" ]; then
	PRELOAD="$(sanitizer_runtime) $PRELOAD"
fi
cat >"$T/bin/ibverbsd-in-ns" <<EOF
#!/bin/sh
exec ip netns exec "$NS" env LD_PRELOAD="$PRELOAD" IBVD_TEST_FAIL_ADDRS="$FAIL_ADDRS" "$IBVERBSD" "\$@"
EOF
chmod 755 "$T/bin/ibverbsd-in-ns"
IBVERBSD=$T/bin/ibverbsd-in-ns

conf=$T/roce.conf
cat >"$conf" <<EOF
{
  "socket": { "path": "$SOCK" },
  "devices": [
    { "name": "ibvd0" },
    { "name": "roce0", "netdev": "$VA", "peers": [ "10.77.0.0/16", "fd00:77::/64" ] }
  ]
}
EOF
daemon_start -c "$conf"
daemon_wait_ready
# The route's hop limit a RoCE packet gets, set after the daemon started
# (it must ask when an AV is made): the namespace's default, not the
# kernel's 64, and a route's hoplimit metric (roce-verbs.c METRIC_IPV4).
ROUTE_TTL=77
METRIC_TTL=9
ROUTE_HOPS6=55
ip netns exec "$NS" sysctl -qw net.ipv4.ip_default_ttl="$ROUTE_TTL" \
	net.ipv6.conf."$VA".hop_limit="$ROUTE_HOPS6" ||
	fail "sysctl ip_default_ttl and $VA's IPv6 hop_limit in $NS"
nsip route add 10.77.0.3/32 dev "$VA" hoplimit "$METRIC_TTL" ||
	fail "a route with a hoplimit metric"
# Nobody has the peers roce-verbs.c resolves through the CM (PEER_IPV4,
# METRIC_IPV4): as with the kernel's rdma_cm, an address resolves only
# once its neighbour entry is valid, so theirs are made by hand.
vb_mac=$(nsip -o link show "$VB" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
for a in 10.77.0.2 10.77.0.3; do
	nsip neigh replace "$a" lladdr "$vb_mac" dev "$VA" nud permanent ||
		fail "a neighbour entry for $a"
done
# one that only a lookup from our address finds (roce-verbs.c SOURCE_RULE_IPV4)
nsip rule add from 10.77.0.1 to 10.77.0.4 table 100 &&
	nsip route add 10.77.0.4/32 dev "$VA" table 100 hoplimit 21 ||
	fail "a policy rule and a route with a hoplimit metric"

# fe80:: and the modified EUI-64 of the interface's MAC, as inet_ntop
# (and so ibv_devinfo) writes it.
mac_gid() {
	local mac
	mac=$(nsip -o link show "$VA" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
	"$PYTHON" - "$mac" <<-'EOF'
	import ipaddress, sys
	b = bytes.fromhex(sys.argv[1].replace(":", ""))
	eui = bytes([b[0] ^ 2]) + b[1:3] + b"\xff\xfe" + b[3:6]
	print(ipaddress.IPv6Address(b"\xfe\x80" + bytes(6) + eui))
	EOF
}
va_index() { nsip -o link show "$VA" | cut -d: -f1; }

devinfo() {
	local rc
	run_debian "$USER1" /usr/bin/ibv_devinfo -v "$@" >"$O/devinfo" 2>"$O/devinfo.err"
	rc=$?
	[ "$rc" -eq 0 ] || { show stderr "$O/devinfo.err"; fail "ibv_devinfo -v $* exited with $rc"; }
}

# wait_devinfo REGEX WHAT [DEVICE]: poll ibv_devinfo -v -d DEVICE (roce0)
# until a line matches.
wait_devinfo() {
	local i dev=${3:-roce0}
	for i in $(seq $((50 * TMUL))); do
		devinfo -d "$dev"
		grep -Eq -- "$1" "$O/devinfo" && return 0
		sleep 0.1
	done
	show "ibv_devinfo -v -d $dev" "$O/devinfo"
	fail "$2: no line matching /$1/ within $((5 * TMUL)) s"
}

check "Debian's ibv_devinfo -v shows roce0 as rxe's: Ethernet, LID 0, RoCE v2 GIDs"
gid0=$(mac_gid)
devinfo -d roce0
show "ibv_devinfo -v -d roce0" "$O/devinfo"
expect_grep '^hca_id:	roce0$' "$O/devinfo" "hca_id"
expect_grep '^	transport:			InfiniBand \(0\)$' "$O/devinfo" "transport"
expect_grep '^			state:			PORT_ACTIVE \(4\)$' "$O/devinfo" "state"
expect_grep '^			max_mtu:		4096 \(5\)$' "$O/devinfo" "max_mtu"
expect_grep '^			active_mtu:		1024 \(3\)$' "$O/devinfo" "active_mtu for MTU 1500"
expect_grep '^			port_lid:		0$' "$O/devinfo" "port_lid"
expect_grep '^			link_layer:		Ethernet$' "$O/devinfo" "link_layer"
expect_grep '^			port_cap_flags:		0x00010000$' "$O/devinfo" "port_cap_flags (CM only)"
expect_grep '^			gid_tbl_len:		1024$' "$O/devinfo" "gid_tbl_len as rxe's"
expect_grep '^			phys_state:		LINK_UP \(5\)$' "$O/devinfo" "phys_state"
expect_grep "^			GID\[  0\]:		$gid0, RoCE v2$" "$O/devinfo" "GID[0] from the MAC"
expect_grep '^			GID\[  1\]:		::ffff:10.77.0.1, RoCE v2$' "$O/devinfo" "GID[1] the IPv4 address"
[ "$(grep -c 'GID\[' "$O/devinfo")" -eq 2 ] || fail "roce0: expected exactly 2 GIDs"
speed=$(ip netns exec "$NS" cat "/sys/class/net/$VA/speed" 2>/dev/null)
if [ "$speed" = 10000 ]; then
	expect_grep '^			active_width:		1X \(1\)$' "$O/devinfo" "active_width of a 10G link"
	expect_grep '^			active_speed:		10.0 Gbps \(8\)$' "$O/devinfo" "active_speed of a 10G link"
fi
ok "roce0: Ethernet, PORT_ACTIVE, 1024 (3), GID[0] $gid0, GID[1] ::ffff:10.77.0.1"

check "ibv_devinfo -v asks the daemon for roce0's GID table once, not for each of its 1,024 slots"
# (twice each before: ibv_query_gid and ibv_query_gid_type, 2,048 RPCs,
# which on a loaded machine outlasted the run's timeout)
run_debian "$USER1" strace -f -c -e trace=sendmsg \
	/usr/bin/ibv_devinfo -v -d roce0 >/dev/null 2>"$O/devinfo.strace" ||
	{ show stderr "$O/devinfo.strace"; fail "ibv_devinfo -v under strace failed"; }
rpcs=$(awk '$NF == "sendmsg" { print $4 }' "$O/devinfo.strace")
[ -n "$rpcs" ] && [ "$rpcs" -lt 50 ] ||
	{ show strace "$O/devinfo.strace"; fail "ibv_devinfo -v made ${rpcs:-?} RPCs"; }
ok "$rpcs RPCs"

check "the software device next to it is unchanged: InfiniBand, LID, GIDs without a RoCE type"
devinfo -d ibvd0
expect_grep '^			link_layer:		InfiniBand$' "$O/devinfo" "ibvd0 link_layer"
expect_grep '^			port_lid:		[1-9]' "$O/devinfo" "ibvd0 LID"
expect_grep '^			GID\[  0\]:		fe80:0000:0000:0000:' "$O/devinfo" "ibvd0 GID[0]"
expect_no_grep 'RoCE' "$O/devinfo" "ibvd0 GIDs"
ok "ibvd0 as before"

# mckey on roce0, receiver and sender on this host: the group is IP
# multicast 239.1.2.3 (MGID ::ffff:239.1.2.3, as rdma_cm makes it for
# RoCEv2), the interface a member while the receiver is attached, and the
# sender's datagrams reach the receiver the way a NIC loops them back.
check "multicast on roce0: mckey between two uids, the interface a member of the group meanwhile"
devinfo -d roce0
expect_grep '^	max_mcast_grp:			8192$' "$O/devinfo" "roce0 max_mcast_grp"
# The receiver waits through the sender's start and its 3 s pause (as in
# roce-cm.sh); its output line-buffered, so that the wait below ends once
# it joined (not in a sanitizer build, where the ASan runtime must come
# first in LD_PRELOAD: there the wait takes its 10 s).
UNBUF=()
[ -z "$SANITIZERS" ] && command -v stdbuf >/dev/null 2>&1 && UNBUF=(stdbuf -oL)
TMO=$((3 * TMO)) run_debian "$USER1" "${UNBUF[@]}" /usr/bin/mckey -b 10.77.0.1 -m 239.1.2.3 -C 5 \
	>"$O/mc.recv" 2>&1 &
mpid=$!
for _ in $(seq 100); do
	grep -q '^mckey: joined dgid' "$O/mc.recv" 2>/dev/null &&
		nsip maddr show dev "$VA" | grep -q 'inet  *239\.1\.2\.3$' && break
	pid_running "$mpid" || break
	sleep 0.1
done
nsip maddr show dev "$VA" >"$O/maddr"
expect_grep 'inet  *239\.1\.2\.3$' "$O/maddr" "$VA's groups while mckey receives"
run_debian "$USER2" /usr/bin/mckey -b 10.77.0.1 -m 239.1.2.3 -C 5 -s >"$O/mc.send" 2>&1 ||
	{ show sender "$O/mc.send"; show receiver "$O/mc.recv"; fail "the mckey sender failed"; }
wait_exit "$mpid" 10 || { show receiver "$O/mc.recv"; fail "the mckey receiver still waits"; }
[ "$EXIT_STATUS" -eq 0 ] || { show receiver "$O/mc.recv"; fail "the mckey receiver exited $EXIT_STATUS"; }
for f in "$O/mc.recv" "$O/mc.send"; do
	expect_grep '^mckey: joined dgid: ::ffff:239\.1\.2\.3 ' "$f" "mckey's group"
	expect_grep '^return status 0$' "$f" "mckey"
done
nsip maddr show dev "$VA" >"$O/maddr"
expect_no_grep '239\.1\.2\.3' "$O/maddr" "$VA's groups once mckey is gone"
ok "$(grep -m1 joined "$O/mc.recv"); the receiver took 5 datagrams; $VA left the group afterwards"

# A member that dies leaves with its context: the interface leaves too.
check "a receiver killed while attached: $VA leaves the group"
run_debian "$USER1" /usr/bin/mckey -b 10.77.0.1 -m 239.1.2.4 -C 5 >"$O/mc.kill" 2>&1 &
mpid=$!
for _ in $(seq 100); do
	nsip maddr show dev "$VA" | grep -q 'inet  *239\.1\.2\.4$' && break
	pid_running "$mpid" || break
	sleep 0.1
done
nsip maddr show dev "$VA" | grep -q 'inet  *239\.1\.2\.4$' ||
	{ show receiver "$O/mc.kill"; fail "$VA never joined 239.1.2.4"; }
# This one alone: tests that run beside this one (roce-cm.sh, make -j)
# have mckeys of uid $USER1 too.  $mpid is the shell running run_debian,
# its child timeout(1), whose child is mckey (term_bg in lib.sh).
tpid=$(pgrep -P "$mpid" -x timeout) && pkill -KILL -P "$tpid" -x mckey ||
	fail "no mckey of uid $USER1 to kill"
wait_exit "$mpid" 10 || fail "the killed receiver's shell did not end"
for _ in $(seq 100); do
	nsip maddr show dev "$VA" | grep -q '239\.1\.2\.4' || break
	sleep 0.1
done
nsip maddr show dev "$VA" >"$O/maddr"
expect_no_grep '239\.1\.2\.4' "$O/maddr" "$VA's groups after the receiver died"
ok "killed; $VA left 239.1.2.4"

check "roce0's address vectors as the kernel takes rxe's (roce-verbs-helper)"
TMO=$((TMO * 4)) run_ours "$USER1" env ROCE_VERBS_HOP_LIMIT="$ROUTE_TTL" \
	ROCE_VERBS_HOP_LIMIT6="$ROUTE_HOPS6" \
	"$T/bin/roce-verbs-helper" roce0 >"$O/roce-verbs" 2>&1 ||
	{ show roce-verbs-helper "$O/roce-verbs"; fail "the roce-verbs suite failed"; }
expect_grep '^100%: Checks: [1-9][0-9]*, Failures: 0, Errors: 0$' "$O/roce-verbs" "Check summary"
# its contexts' ring memory, RoCE QPs' transport state included, all given back
expect_no_grep 'unaccounted' "$DAEMON_LOG" "the daemon's log"
ok "$(grep -E '^[0-9]+%: Checks' "$O/roce-verbs")"

# The wire: frames out of $VA arrive on $VB, where a packet socket reads
# them (10.77.0.2 is nobody's: a static neighbour lets them out).
check "UD datagrams leave with their route's TTL, one to a group with its AH's"
# changed again, with the interface long settled: read as each AH is made
ROUTE_TTL=78
ip netns exec "$NS" sysctl -qw net.ipv4.ip_default_ttl="$ROUTE_TTL" ||
	fail "sysctl net.ipv4.ip_default_ttl in $NS"
vb_mac=$(nsip -o link show "$VB" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
for a in 10.77.0.2 10.77.0.3; do
	nsip neigh replace "$a" lladdr "$vb_mac" dev "$VA" nud permanent ||
		fail "a neighbour for $a"
done
rm -f "$O/sniffing"
ip netns exec "$NS" "$PYTHON" - "$VB" 3 "$O/sniffing" >"$O/ttls" 2>&1 <<'EOF' &
import socket, struct, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
s.bind((sys.argv[1], 0))
open(sys.argv[3], "w").close()
s.settimeout(20)
ttls = []
while len(ttls) < int(sys.argv[2]):
    f = s.recv(2048)
    ip = f[14:]
    if ip[9] == 17 and struct.unpack("!H", ip[22:24])[0] == 4791:
        ttls.append(str(ip[8]))
print(" ".join(ttls), flush=True)
EOF
spid=$!
# the datagrams go once its socket is bound (a guessed half second was
# not always enough for python to start on a busy machine)
for _ in $(seq $((TMO * 10))); do
	[ -e "$O/sniffing" ] && break
	pid_running "$spid" || break
	sleep 0.1
done
[ -e "$O/sniffing" ] || { show sniffer "$O/ttls"; fail "the sniffer on $VB did not start"; }
TMO=$((TMO * 2)) run_ours "$USER1" "$T/bin/roce-verbs-helper" roce0 send >"$O/send2" 2>&1 ||
	{ show sender "$O/send2"; fail "roce-verbs-helper send"; }
wait_exit "$spid" 25 || fail "the sniffer on $VB still waits"
[ "$EXIT_STATUS" -eq 0 ] || { show sniffer "$O/ttls"; fail "the sniffer on $VB failed"; }
want="$ROUTE_TTL $METRIC_TTL 3"
[ "$(cat "$O/ttls")" = "$want" ] || { show "TTLs seen" "$O/ttls"; fail "TTLs $(cat "$O/ttls"), not '$want'"; }
nsip neigh del 10.77.0.2 dev "$VA"
nsip neigh del 10.77.0.3 dev "$VA"
ok "TTL $ROUTE_TTL (the namespace's ip_default_ttl, just changed) to 10.77.0.2 and $METRIC_TTL (its route's metric) to 10.77.0.3 (hop limit 1 asked), 3 to 239.1.2.5 (3 asked)"

check "ibvctl link show names the interface, as rdma does for rxe"
ibvctl link show >"$O/link" 2>&1 || { show "ibvctl link show" "$O/link"; fail "ibvctl link show"; }
show "ibvctl link show" "$O/link"
expect_grep '^link ibvd0/1 subnet_prefix fe80:0000:0000:0000 lid [0-9]+ sm_lid 0 lmc 0 state ACTIVE physical_state LINK_UP$' "$O/link" "ibvd0 line"
expect_grep "^link roce0/1 state ACTIVE physical_state LINK_UP netdev $VA\$" "$O/link" "roce0 line"
ibvctl -d link show roce0 >"$O/link-d" 2>&1 || fail "ibvctl -d link show roce0"
expect_grep "^link roce0/1 state ACTIVE physical_state LINK_UP netdev $VA netdev_index $(va_index)\$" "$O/link-d" "-d: netdev_index"
ibvctl -j link show roce0/1 >"$O/link-j" 2>&1 || fail "ibvctl -j link show roce0/1"
expect_grep "\"netdev\":\"$VA\"" "$O/link-j" "-j: netdev"
ibvctl_as "$USER1" link show >"$O/link-u" 2>&1 || { show "ibvctl link show as $USER1" "$O/link-u"; fail "ibvctl link show as $USER1"; }
expect_grep "netdev $VA" "$O/link-u" "link show as uid $USER1"
ok "link roce0/1 ... netdev $VA"

check "MTU 9000: active_mtu 4096"
nsip link set "$VA" mtu 9000 || fail "ip link set mtu 9000"
wait_devinfo '^			active_mtu:		4096 \(5\)$' "active_mtu after MTU 9000"
nsip link set "$VA" mtu 1500
wait_devinfo '^			active_mtu:		1024 \(3\)$' "active_mtu after MTU 1500 again"
ok "9000 -> 4096 (5), 1500 -> 1024 (3)"

# ---- a client sees the changes -------------------------------------------

ctx_start "$USER1" -d roce0
gids() { ctx_cmd gids || fail "gids: $CTX_ANSWER"; }
expect_event() {
	ctx_cmd "event $((10 * TMUL)) $1" || fail "waiting for $1: $CTX_ANSWER"
	case $CTX_ANSWER in "ok event $1 "*" port 1 "*) ;; *) fail "$2: $CTX_ANSWER" ;; esac
}
# expect_gids TABLE WHAT: the client's table is TABLE (" 0=GID,v2 ..."),
# now or within a few seconds (one interface change may take several
# rtnetlink messages, and the events of the first may come before the last).
expect_gids() {
	local i
	for i in $(seq $((50 * TMUL))); do
		gids
		[ "$CTX_ANSWER" = "ok gids$1" ] && return 0
		sleep 0.1
	done
	fail "$2: '$CTX_ANSWER', want 'ok gids$1'"
}

check "ibv_query_gid_table, _ex and ibv_query_gid agree: RoCE v2 entries"
expect_gids " 0=$gid0,v2 1=::ffff:10.77.0.1,v2" "first table"
ok "$CTX_ANSWER"

check "an address added: IBV_EVENT_GID_CHANGE, the new GID at the next index"
ctx_cmd drain
nsip addr add 10.78.0.1/16 dev "$VA" || fail "ip addr add 10.78.0.1/16"
expect_event IBV_EVENT_GID_CHANGE "after ip addr add"
expect_gids " 0=$gid0,v2 1=::ffff:10.77.0.1,v2 2=::ffff:10.78.0.1,v2" "after adding 10.78.0.1"
ok "$CTX_ANSWER"

check "an address removed: IBV_EVENT_GID_CHANGE, the others keep their indexes"
ctx_cmd drain
nsip addr del 10.77.0.1/24 dev "$VA" || fail "ip addr del 10.77.0.1/24"
expect_event IBV_EVENT_GID_CHANGE "after ip addr del"
expect_gids " 0=$gid0,v2 2=::ffff:10.78.0.1,v2" "after removing 10.77.0.1"
ok "$CTX_ANSWER"

check "an IPv6 address takes the lowest free index"
ctx_cmd drain
nsip addr add fd00:77::1/64 dev "$VA" nodad || fail "ip addr add fd00:77::1/64"
expect_event IBV_EVENT_GID_CHANGE "after ip -6 addr add"
expect_gids " 0=$gid0,v2 1=fd00:77::1,v2 2=::ffff:10.78.0.1,v2" "after adding fd00:77::1"
devinfo -d roce0
expect_grep '^			GID\[  1\]:		fd00:77::1, RoCE v2$' "$O/devinfo" "ibv_devinfo GID[1] (IPv6)"
ok "$CTX_ANSWER"

check "the peer goes down: IBV_EVENT_PORT_ERR, PORT_DOWN, POLLING (no carrier)"
ctx_cmd drain
nsip link set "$VB" down
expect_event IBV_EVENT_PORT_ERR "after the peer went down"
ctx_cmd query || fail "query: $CTX_ANSWER"
case $CTX_ANSWER in *" state=1 "*) ;; *) fail "port not DOWN: $CTX_ANSWER" ;; esac
devinfo -d roce0
expect_grep '^			state:			PORT_DOWN \(1\)$' "$O/devinfo" "state without carrier"
expect_grep '^			phys_state:		POLLING \(2\)$' "$O/devinfo" "phys_state without carrier"
ibvctl link show roce0 >"$O/link" 2>&1
expect_grep "^link roce0/1 state DOWN physical_state POLLING netdev $VA\$" "$O/link" "link show without carrier"
ok "PORT_ERR; state DOWN, physical_state POLLING"

check "the peer comes back: IBV_EVENT_PORT_ACTIVE, PORT_ACTIVE"
ctx_cmd drain
nsip link set "$VB" up
expect_event IBV_EVENT_PORT_ACTIVE "after the peer came back"
ctx_cmd query || fail "query: $CTX_ANSWER"
case $CTX_ANSWER in *" state=4 "*) ;; *) fail "port not ACTIVE: $CTX_ANSWER" ;; esac
ok "PORT_ACTIVE; state ACTIVE"

check "the interface goes down: IBV_EVENT_PORT_ERR, DISABLED; up again: IBV_EVENT_PORT_ACTIVE"
ctx_cmd drain
nsip link set "$VA" down
expect_event IBV_EVENT_PORT_ERR "after ip link set down"
devinfo -d roce0
expect_grep '^			state:			PORT_DOWN \(1\)$' "$O/devinfo" "state when down"
expect_grep '^			phys_state:		DISABLED \(3\)$' "$O/devinfo" "phys_state when down"
ibvctl link show roce0 >"$O/link" 2>&1
expect_grep "^link roce0/1 state DOWN physical_state DISABLED netdev $VA\$" "$O/link" "link show when down"
nsip link set "$VA" up
expect_event IBV_EVENT_PORT_ACTIVE "after ip link set up"
wait_devinfo '^			state:			PORT_ACTIVE \(4\)$' "state after ip link set up"
ok "down: PORT_ERR, DISABLED; up: PORT_ACTIVE"

check "the interface is deleted: PORT_ERR, an empty table; one of that name comes back: PORT_ACTIVE"
ctx_cmd drain
nsip link del "$VA" || fail "ip link del"
expect_event IBV_EVENT_PORT_ERR "after ip link del"
expect_gids "" "table without the interface"
ibvctl -d link show roce0 >"$O/link" 2>&1
expect_grep "^link roce0/1 state DOWN physical_state DISABLED netdev $VA\$" "$O/link" "link show without the interface"
# a reload meanwhile (of the limits, say) keeps the device waiting for it
kill -HUP "$DAEMON_PID"
for _ in $(seq $((50 * TMUL))); do
	grep -Eq "configuration reloaded|reload failed" "$DAEMON_LOG" && break
	sleep 0.1
done
expect_no_grep "reload failed" "$DAEMON_LOG" "a reload while $VA is gone"
expect_grep "configuration reloaded" "$DAEMON_LOG" "a reload while $VA is gone"
make_veth
expect_event IBV_EVENT_PORT_ACTIVE "after the interface came back"
gid0=$(mac_gid)
expect_gids " 0=$gid0,v2 1=::ffff:10.77.0.1,v2" "table of the new interface"
ibvctl -d link show roce0 >"$O/link" 2>&1
expect_grep "^link roce0/1 state ACTIVE physical_state LINK_UP netdev $VA netdev_index $(va_index)\$" "$O/link" "link show with the new interface"
ok "$CTX_ANSWER"

ctx_stop
daemon_alive "after the interface changes"

# An interface that leaves the namespace and comes back keeps its index but
# not its groups; the daemon, stopped meanwhile, finds it under the same
# index it knew and must still join again.
check "$VA moved to another namespace and back while the daemon sleeps: the group joined again"
NS2=ibvd-roce2-$$
run_debian "$USER1" /usr/bin/mckey -b 10.77.0.1 -m 239.1.2.6 -C 5 >"$O/mc.move" 2>&1 &
mpid=$!
for _ in $(seq 100); do
	nsip maddr show dev "$VA" | grep -q 'inet  *239\.1\.2\.6$' && break
	pid_running "$mpid" || break
	sleep 0.1
done
nsip maddr show dev "$VA" | grep -q 'inet  *239\.1\.2\.6$' ||
	{ show receiver "$O/mc.move"; fail "$VA never joined 239.1.2.6"; }
idx=$(va_index)
ip netns add "$NS2" || fail "ip netns add $NS2"
kill -STOP "$DAEMON_PID"
nsip link set "$VA" netns "$NS2" && ip -n "$NS2" link set "$VA" netns "$NS" ||
	{ kill -CONT "$DAEMON_PID"; ip netns delete "$NS2"; fail "cannot move $VA to $NS2 and back"; }
nsip link set "$VA" up && nsip addr add 10.77.0.1/24 dev "$VA" ||
	{ kill -CONT "$DAEMON_PID"; ip netns delete "$NS2"; fail "cannot bring $VA back up"; }
kill -CONT "$DAEMON_PID"
ip netns delete "$NS2"
[ "$(va_index)" = "$idx" ] || log "$VA came back as index $(va_index), not $idx"
for _ in $(seq $((50 * TMUL))); do
	nsip maddr show dev "$VA" | grep -q 'inet  *239\.1\.2\.6$' && break
	sleep 0.1
done
nsip maddr show dev "$VA" >"$O/maddr"
expect_grep 'inet  *239\.1\.2\.6$' "$O/maddr" "$VA's groups after it came back"
term_bg "$mpid"
wait_exit "$mpid" 10 || fail "the receiver did not end"
ok "index $idx, 239.1.2.6 joined again"

check "the software device's table follows the host's addresses, in a client's copy too"
ctx_start "$USER1" -d ibvd0
gids
case $CTX_ANSWER in *"=::ffff:10.79.0.1,"*) fail "ibvd0 has 10.79.0.1 before it was added: $CTX_ANSWER" ;; esac
nsip addr add 10.79.0.1/16 dev "$VA" || fail "ip addr add 10.79.0.1/16"
for _ in $(seq $((50 * TMUL))); do
	gids
	case $CTX_ANSWER in *"=::ffff:10.79.0.1,"*) break ;; esac
	sleep 0.1
done
case $CTX_ANSWER in
*"=::ffff:10.79.0.1,ib"*) ;;
*) fail "ibvd0's table without 10.79.0.1 after it was added: $CTX_ANSWER" ;;
esac
ctx_stop
ok "$CTX_ANSWER"

check "addresses that cannot be read: one warning, the old table kept, then caught up"
touch "$FAIL_ADDRS"
nsip addr add 10.81.0.1/24 dev "$VA" || fail "ip addr add 10.81.0.1/24"
for _ in $(seq $((50 * TMUL))); do
	grep -q "cannot read the host's addresses" "$DAEMON_LOG" && break
	sleep 0.1
done
grep -q "cannot read the host's addresses" "$DAEMON_LOG" ||
	fail "no warning while the addresses cannot be read"
sleep 1.5	# retries at 0.2, 0.6 and 1.4 s: warned once all the same
warned=$(grep -c "cannot read the host's addresses" "$DAEMON_LOG")
[ "$warned" -eq 1 ] || fail "$warned warnings for one failure that lasts"
devinfo -d ibvd0
expect_no_grep ':ffff:0a51:0001$' "$O/devinfo" "ibvd0 while its addresses cannot be read"
rm -f "$FAIL_ADDRS"
wait_devinfo '^			GID\[ +[0-9]+\]:		0000:0000:0000:0000:0000:ffff:0a51:0001$' \
	"ibvd0 once the addresses can be read again" ibvd0
expect_grep "the host's addresses can be read again" "$DAEMON_LOG" "the daemon's notice"
ok "warned once; ::ffff:10.81.0.1 in ibvd0's table once reads worked"

check "SIGHUP naming a missing interface keeps the running configuration"
cp "$conf" "$T/good.conf"
sed -i "s/\"netdev\": \"$VA\"/\"netdev\": \"nosuch$$\"/" "$conf"
kill -HUP "$DAEMON_PID"
logged=no
for _ in $(seq $((50 * TMUL))); do
	grep -q "reload failed" "$DAEMON_LOG" && { logged=yes; break; }
	sleep 0.1
done
[ "$logged" = yes ] || { show "daemon log" "$DAEMON_LOG"; fail "no 'reload failed' in the log"; }
expect_grep "$conf:[0-9]+:[0-9]+: devices\[1\]\.netdev: no such network interface \"nosuch$$\"" "$DAEMON_LOG" "reload error"
ibvctl link show roce0 >"$O/link" 2>&1 || fail "roce0 gone after a failed reload"
ok "roce0 stays"
daemon_stop

# ---- configs the daemon refuses ---------------------------------------------

# start_fails CONF REGEX WHAT: the daemon exits non-zero at start with REGEX.
start_fails() {
	local rc
	timeout $((10 * TMUL)) "$IBVERBSD" -f -c "$1" >"$O/bad.log" 2>&1
	rc=$?
	expect_failed "$rc" "$3"
	expect_grep "$2" "$O/bad.log" "$3"
	ok "$3: $(grep -E -- "$2" "$O/bad.log" | head -n 1)"
}

check "an interface that does not exist is an error at start, with its position"
cat >"$T/bad1.conf" <<EOF
{
  "socket": { "path": "$SOCK" },
  "devices": [ { "name": "ibvd0" },
               { "name": "roce0", "netdev": "nosuch$$" } ]
}
EOF
start_fails "$T/bad1.conf" "$T/bad1.conf:4:35: devices\[1\]\.netdev: no such network interface \"nosuch$$\"" "missing interface"

check "the loopback interface is refused"
cat >"$T/badlo.conf" <<EOF
{
  "socket": { "path": "$SOCK" },
  "devices": [ { "name": "roce0", "netdev": "lo" } ]
}
EOF
start_fails "$T/badlo.conf" "device roce0: lo is the loopback interface" "a RoCE device on lo"

check "a bad peers CIDR is an error at start, with its position"
cat >"$T/bad2.conf" <<EOF
{
  "socket": { "path": "$SOCK" },
  "devices": [ { "name": "roce0", "netdev": "$VA",
                 "peers": [ "10.77.0.0/16", "10.77.0.1/8" ] } ]
}
EOF
start_fails "$T/bad2.conf" "$T/bad2.conf:4:45: devices\[0\]\.peers\[1\]: \"10.77.0.1/8\" has host bits set: the block is \"10.0.0.0/8\"" "host bits in a CIDR"
cat >"$T/bad3.conf" <<EOF
{
  "socket": { "path": "$SOCK" },
  "devices": [ { "name": "roce0", "netdev": "$VA", "peers": [ "10.77.0.0/40" ] } ]
}
EOF
start_fails "$T/bad3.conf" "$T/bad3.conf:3:[0-9]+: devices\[0\]\.peers\[0\]: prefix length" "prefix past the address"

# A device's own addresses need no "peers" entry: a datagram between two
# of its QPs never was on the wire (RC was taken already; UD was dropped).
check "UD between two QPs of roce0 whose \"peers\" name only others"
cat >"$T/own.conf" <<EOF2
{
  "socket": { "path": "$SOCK" },
  "devices": [ { "name": "roce0", "netdev": "$VA", "peers": [ "10.99.0.0/16" ] } ]
}
EOF2
nsip addr replace 10.77.0.1/24 dev "$VA" && nsip link set "$VA" up ||
	fail "cannot give $VA its address back"
daemon_start -c "$T/own.conf"
daemon_wait_ready
wait_devinfo '^			GID\[ *[0-9]+\]:		::ffff:10\.77\.0\.1, RoCE v2$' "the IPv4 GID"
idx=$(sed -n 's/^			GID\[ *\([0-9]*\)\]:		::ffff:10\.77\.0\.1, RoCE v2$/\1/p' "$O/devinfo")
line=$(TMO=$((10 * TMUL)) debian_pair ibv_ud_pingpong -d roce0 -g "$idx" -n 100) || exit 1
ok "ibv_ud_pingpong -g $idx: $line"
daemon_stop
