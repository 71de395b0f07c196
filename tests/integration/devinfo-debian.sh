#!/bin/bash
# Debian's unmodified ibv_devices and ibv_devinfo, run through ibverbsd-run
# as unprivileged uids, see the daemon's devices as real RDMA devices:
# names, non-zero distinct GUIDs, PORT_ACTIVE ports with distinct non-zero
# LIDs (lid, lid+1, ... per device), InfiniBand link layer; -d/-i/-l work and
# an unknown device is an error.
. "$(dirname "$0")/lib.sh"

need_cmd /usr/bin/ibv_devices /usr/bin/ibv_devinfo
ibvd_init

# Two devices: ibvd0 with 1 port (LID 1), ibvd1 with 2 ports (LIDs 10, 11).
cat >"$T/two.conf" <<EOF
{
  "socket": { "path": "$SOCK" },
  "devices": [
    { "name": "ibvd0", "ports": 1, "lid": 1 },
    { "name": "ibvd1", "ports": 2, "lid": 10 }
  ]
}
EOF
daemon_start -c "$T/two.conf"
daemon_wait_ready

O=$T/out

check "ibv_devices as uid $USER1 lists ibvd0 and ibvd1 with non-zero, distinct GUIDs"
run_debian "$USER1" /usr/bin/ibv_devices >"$O/devices" 2>"$O/devices.err" ||
	{ show stderr "$O/devices.err"; fail "ibv_devices exited with $?"; }
show "ibv_devices" "$O/devices"
expect_grep '^    device          	   node GUID$' "$O/devices" "ibv_devices header"
expect_grep '^    ------          	----------------$' "$O/devices" "ibv_devices header"
g0=$(sed -n 's/^    ibvd0 *\t\([0-9a-f]\{16\}\)$/\1/p' "$O/devices")
g1=$(sed -n 's/^    ibvd1 *\t\([0-9a-f]\{16\}\)$/\1/p' "$O/devices")
[ -n "$g0" ] || fail "ibv_devices: no 'ibvd0<TAB>16 hex digits' row"
[ -n "$g1" ] || fail "ibv_devices: no 'ibvd1<TAB>16 hex digits' row"
[ "$g0" != 0000000000000000 ] || fail "ibvd0 has a zero node GUID"
[ "$g1" != 0000000000000000 ] || fail "ibvd1 has a zero node GUID"
[ "$g0" != "$g1" ] || fail "ibvd0 and ibvd1 share node GUID $g0"
[ "$(wc -l <"$O/devices")" -eq 4 ] || fail "ibv_devices: expected 2 header lines + 2 devices"
[ ! -s "$O/devices.err" ] || { show stderr "$O/devices.err"; fail "ibv_devices wrote to stderr"; }
ok "ibv_devices: ibvd0 $g0, ibvd1 $g1"

check "ibv_devinfo -v -d ibvd0 as uid $USER1: device and port fields"
run_debian "$USER1" /usr/bin/ibv_devinfo -v -d ibvd0 >"$O/v0" 2>"$O/v0.err" ||
	{ show stderr "$O/v0.err"; fail "ibv_devinfo -v -d ibvd0 exited with $?"; }
show "ibv_devinfo -v -d ibvd0" "$O/v0"
expect_grep '^hca_id:	ibvd0$' "$O/v0" "hca_id"
expect_grep '^	transport:			InfiniBand \(0\)$' "$O/v0" "transport"
guid=$(field "$O/v0" node_guid)
[ "$guid" = "${g0:0:4}:${g0:4:4}:${g0:8:4}:${g0:12:4}" ] ||
	fail "ibv_devinfo node_guid '$guid' differs from ibv_devices' $g0"
expect_grep '^	sys_image_guid:			[0-9a-f]{4}(:[0-9a-f]{4}){3}$' "$O/v0" "sys_image_guid"
expect_grep '^	phys_port_cnt:			1$' "$O/v0" "phys_port_cnt"
expect_grep '^		port:	1$' "$O/v0" "port 1"
expect_grep '^			state:			PORT_ACTIVE \(4\)$' "$O/v0" "port state"
expect_grep '^			link_layer:		InfiniBand$' "$O/v0" "link_layer"
expect_grep '^			phys_state:		LINK_UP \(5\)$' "$O/v0" "phys_state"
lid=$(field "$O/v0" port_lid)
[ "$lid" = 1 ] || fail "ibvd0 port 1: port_lid is '$lid', the config says 1"
expect_grep '^			GID\[  0\]:		fe80:0000:0000:0000:' "$O/v0" "GID[0] is link-local fe80::"
gid0=$(sed -n 's/^[[:space:]]*GID\[  0\]:[[:space:]]*\(fe80:0000:0000:0000:[0-9a-f:]*\).*/\1/p' "$O/v0")
[ "${gid0#fe80:0000:0000:0000:}" = "$guid" ] ||
	fail "GID[0] $gid0 is not fe80::NODE_GUID ($guid)"
expect_grep '^	max_qp:[[:space:]]+[1-9][0-9]*$' "$O/v0" "-v: max_qp"
expect_grep '^	atomic_cap:[[:space:]]+ATOMIC_HCA \(1\)$' "$O/v0" "-v: atomic_cap"
expect_grep '^	max_pkeys:[[:space:]]+[1-9]' "$O/v0" "-v: max_pkeys"
ok "ibvd0: PORT_ACTIVE, port_lid 1, InfiniBand, GID[0] fe80::$guid"

check "ibv_devinfo -d ibvd1 as uid $USER2: two ports, LIDs 10 and 11"
run_debian "$USER2" /usr/bin/ibv_devinfo -d ibvd1 >"$O/d1" 2>"$O/d1.err" ||
	{ show stderr "$O/d1.err"; fail "ibv_devinfo -d ibvd1 exited with $?"; }
show "ibv_devinfo -d ibvd1" "$O/d1"
expect_grep '^hca_id:	ibvd1$' "$O/d1" "hca_id"
expect_no_grep '^hca_id:	ibvd0$' "$O/d1" "-d ibvd1 must not show ibvd0"
expect_grep '^	phys_port_cnt:			2$' "$O/d1" "phys_port_cnt"
[ "$(grep -c 'PORT_ACTIVE (4)' "$O/d1")" -eq 2 ] || fail "ibvd1: expected 2 PORT_ACTIVE ports"
lids=$(sed -n 's/^[[:space:]]*port_lid:[[:space:]]*//p' "$O/d1" | tr '\n' ' ')
[ "$lids" = "10 11 " ] || fail "ibvd1 port_lids are '$lids', expected '10 11'"
ok "ibvd1: 2 ports, LIDs 10 11"

check "ibv_devinfo -d ibvd1 -i 2: port 2 only"
run_debian "$USER1" /usr/bin/ibv_devinfo -d ibvd1 -i 2 >"$O/i2" 2>&1 ||
	{ show output "$O/i2"; fail "ibv_devinfo -d ibvd1 -i 2 exited with $?"; }
expect_grep '^		port:	2$' "$O/i2" "-i 2"
expect_no_grep '^		port:	1$' "$O/i2" "-i 2 must not show port 1"
[ "$(field "$O/i2" port_lid)" = 11 ] || fail "-i 2: port_lid is not 11"
ok "-i 2 shows port 2 (LID 11) only"

check "ibv_devinfo -l lists both devices"
run_debian "$USER1" /usr/bin/ibv_devinfo -l >"$O/l" 2>&1 ||
	{ show output "$O/l"; fail "ibv_devinfo -l exited with $?"; }
show "ibv_devinfo -l" "$O/l"
expect_grep '^2 HCAs found:$' "$O/l" "-l count"
expect_grep '^	ibvd0$' "$O/l" "-l ibvd0"
expect_grep '^	ibvd1$' "$O/l" "-l ibvd1"
ok "-l: 2 HCAs"

check "ibv_devinfo (no options) shows both devices, three active ports"
run_debian "$USER2" /usr/bin/ibv_devinfo >"$O/all" 2>&1 ||
	{ show output "$O/all"; fail "ibv_devinfo exited with $?"; }
[ "$(grep -c '^hca_id:' "$O/all")" -eq 2 ] || fail "expected 2 hca_id blocks"
[ "$(grep -c 'PORT_ACTIVE (4)' "$O/all")" -eq 3 ] || fail "expected 3 PORT_ACTIVE ports"
ok "2 devices, 3 active ports"

check "the two uids see the same thing at the same time"
run_debian "$USER1" /usr/bin/ibv_devinfo -v >"$O/u1" 2>&1 &
p1=$!
run_debian "$USER2" /usr/bin/ibv_devinfo -v >"$O/u2" 2>&1 &
p2=$!
wait "$p1" || fail "ibv_devinfo -v as $USER1 failed"
wait "$p2" || fail "ibv_devinfo -v as $USER2 failed"
diff -u "$O/u1" "$O/u2" || fail "ibv_devinfo -v output differs between uid $USER1 and $USER2"
ok "identical output for uids $USER1 and $USER2"

check "ibv_devinfo -d nosuchdev fails and names the device"
run_debian "$USER1" /usr/bin/ibv_devinfo -d nosuchdev >"$O/bad" 2>&1
rc=$?
[ "$rc" -ne 0 ] || fail "ibv_devinfo -d nosuchdev exited 0"
[ "$rc" -ne 124 ] || fail "ibv_devinfo -d nosuchdev timed out"
expect_grep "IB device 'nosuchdev' wasn't found" "$O/bad" "-d nosuchdev message"
ok "-d nosuchdev: exit $rc"

daemon_stop
