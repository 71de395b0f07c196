#!/bin/bash
# The shipped etc/ibverbsd.conf, used as is with only --socket added, gives
# a working daemon whose device Debian's ibv_devinfo sees as the config
# describes.  A copy with the socket path changed in the file works too.
. "$(dirname "$0")/lib.sh"

need_cmd /usr/bin/ibv_devinfo
ibvd_init
conf=$(shipped_conf) || exit 1
O=$T/out

# What the shipped config promises: the first device's name, ports, lid.
read -r name ports lid < <("$PYTHON" - "$conf" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))["devices"][0]
print(d["name"], d.get("ports", 1), d.get("lid", 0))
EOF
) || fail "cannot read $conf"
log "shipped config: device $name, $ports port(s), lid $lid"

verify() {
	check "ibv_devinfo as uid $USER1 shows $name with $ports active port(s)"
	run_debian "$USER1" /usr/bin/ibv_devinfo -d "$name" >"$O/info" 2>&1 ||
		{ show output "$O/info"; fail "ibv_devinfo -d $name exited with $?"; }
	expect_grep "^hca_id:	$name\$" "$O/info" "hca_id"
	expect_grep "^	phys_port_cnt:			$ports\$" "$O/info" "phys_port_cnt"
	[ "$(grep -c 'PORT_ACTIVE (4)' "$O/info")" -eq "$ports" ] || fail "not $ports PORT_ACTIVE port(s)"
	got=$(field "$O/info" port_lid)
	if [ "$lid" -ne 0 ]; then
		[ "$got" = "$lid" ] || fail "port_lid is '$got', the config says $lid"
	else
		[ "${got:-0}" -ne 0 ] || fail "port_lid is zero"
	fi
	ok "$name: $ports port(s), port_lid $got"
}

check "ibverbsd -f -c $conf --socket $SOCK"
sys_sock=$(sed -n 's/.*"path": *"\([^"]*\)".*/\1/p' "$conf" | head -n 1)
had_sys_sock=no
[ -e "$sys_sock" ] && had_sys_sock=yes
daemon_start -c "$conf" --socket "$SOCK"
daemon_wait_ready
verify
if [ "$had_sys_sock" = no ] && [ -e "$sys_sock" ]; then
	fail "--socket was given, yet the daemon created the config's $sys_sock"
fi
daemon_stop
[ ! -e "$SOCK" ] || fail "$SOCK still exists after the daemon stopped"

check "a copy of the shipped config with only socket.path changed"
copy=$(default_conf "$T/run/copy.sock") || exit 1
SOCK=$T/run/copy.sock
daemon_start -c "$copy"
daemon_wait_ready
verify
daemon_stop
