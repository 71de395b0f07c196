#!/bin/bash
# Privileges are the sender's at each request (ibverbsd(8), PRIVILEGES),
# as the kernel asks a caller's credentials at each call.  A server that
# connects as root (or as a member of the admin group) and then becomes
# another user, as servers do, keeps no privilege on those connections:
# privdrop-helper connects (an rdma_cm channel, a device context, an
# ibvctl connection), then tries an rdma_bind_addr to a port below 1024,
# a controlled Q_Key (modify_qp) and ibvctl's "daemon reload":
#   1. as root: all three allowed;
#   2. after setgroups/setgid/setuid to $USER1: all three refused;
#   3. a child that inherited the ibvctl connection and became $USER1:
#      its reload refused; its parent, still root, on the same
#      connection: all three allowed;
#   4. admin_group "rdma": $USER1 in it may use the Q_Key and reload (not
#      the port: root's alone); once it became $USER2, neither.
. "$(dirname "$0")/lib.sh"

is_root || skip "needs root to connect as root and drop"
need_cmd setpriv
ibvd_init
O=$T/out
EACCES=13
EPERM=1

conf=$(default_conf) || exit 1
if getent group rdma >/dev/null; then
	"$PYTHON" - "$conf" <<-'EOF' || fail "cannot rewrite $conf"
	import json, sys
	cfg = json.load(open(sys.argv[1]))
	cfg["admin_group"] = "rdma"
	json.dump(cfg, open(sys.argv[1], "w"), indent=2)
	EOF
fi
daemon_start -c "$conf"
daemon_wait_ready

# drop OUT MODE PORT UID [SETPRIV-OPTIONS...]: privdrop-helper, as root or
# as setpriv makes it
drop() {
	local out=$1 mode=$2 port=$3 uid=$4
	shift 4
	(cd "$T" && timeout -k 2 "$TMO" setpriv "${@:---reuid=0}" -- \
		env IBVERBSD_SOCKET="$SOCK" "$T/tools/ibverbsd-run" \
		"$T/bin/privdrop-helper" "$SOCK" "$mode" "$port" "$uid") >"$out" 2>&1 ||
		{ show "privdrop-helper $mode" "$out"; fail "privdrop-helper $mode"; }
}
# expect OUT WHO BIND QKEY RELOAD: the errnos WHO saw (0: allowed)
expect() {
	expect_grep "^$2 bind $3\$" "$1" "$2's rdma_bind_addr to a port below 1024"
	expect_grep "^$2 qkey $4\$" "$1" "$2's controlled Q_Key"
	expect_grep "^$2 reload $5\$" "$1" "$2's daemon reload"
}

check "root, as it connected"
drop "$O/stay" stay 1000 "$USER1"
expect "$O/stay" self 0 0 0
ok "the port, the Q_Key and the reload"

check "root that became uid $USER1 after connecting"
drop "$O/drop" drop 1002 "$USER1"
expect "$O/drop" self $EACCES $EPERM $EPERM
ok "refused all three, as the kernel would refuse uid $USER1"

check "a child that inherited root's connection and became uid $USER1"
drop "$O/fork" fork 1004 "$USER1"
expect_grep "^child reload $EPERM\$" "$O/fork" "the child's daemon reload"
expect "$O/fork" parent 0 0 0
ok "the child refused; its parent, still root, allowed on the same connection"

check "a member of the admin group that became another uid"
if ! getent group rdma >/dev/null; then
	log "no group rdma to make the admin group of: not checked"
else
	caps=(--reuid="$USER1" --regid="$USER1" --groups=rdma
	      --inh-caps=+setuid,+setgid --ambient-caps=+setuid,+setgid)
	drop "$O/group" stay 1006 "$USER2" "${caps[@]}"
	expect "$O/group" self $EACCES 0 0
	drop "$O/group-drop" drop 1008 "$USER2" "${caps[@]}"
	expect "$O/group-drop" self $EACCES $EPERM $EPERM
	ok "uid $USER1 in rdma may, until it becomes uid $USER2"
fi
