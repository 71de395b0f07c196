#!/bin/bash
# ibvctl against a running daemon: dev show / link show in text and JSON
# (-j, -j -p) agree with each other and with Debian's ibv_devinfo; daemon
# status/version/reload; an unprivileged uid may look but not reload; a bad
# command line exits non-zero with usage.
. "$(dirname "$0")/lib.sh"

need_cmd /usr/bin/ibv_devinfo
ibvd_init
O=$T/out
[ -x "$T/tools/ibvctl" ] || fail "tools/ibvctl not built"

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

# What Debian's tool says, to compare with.
run_debian "$USER1" /usr/bin/ibv_devinfo -d ibvd0 >"$O/devinfo" 2>&1 || { show output "$O/devinfo"; fail "ibv_devinfo failed"; }
guid=$(field "$O/devinfo" node_guid)
[ -n "$guid" ] || fail "no node_guid from ibv_devinfo"

errno_of() { "$PYTHON" -c "import errno; print(errno.$1)"; }

# json_check FILE PYTHON-EXPR: FILE holds JSON, EXPR (over `j`) must hold.
json_check() {
	"$PYTHON" - "$1" "$2" <<'EOF'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(f"not JSON: {e}")
if not eval(sys.argv[2]):
    sys.exit(f"does not hold: {sys.argv[2]}")
EOF
}

check "ibvctl dev show: rdma's 'IDX: NAME: node_type ca ... node_guid ...' lines"
ibvctl dev show >"$O/dev" 2>&1 || { show output "$O/dev"; fail "ibvctl dev show exited $?"; }
show "ibvctl dev show" "$O/dev"
expect_grep '^[0-9]+: ibvd0: node_type ca .*node_guid [0-9a-f]{4}(:[0-9a-f]{4}){3}' "$O/dev" "ibvd0 line"
expect_grep '^[0-9]+: ibvd1: node_type ca ' "$O/dev" "ibvd1 line"
grep '^[0-9]*: ibvd0:' "$O/dev" | grep -q "node_guid $guid" || fail "ibvctl's node_guid for ibvd0 is not ibv_devinfo's $guid"
ok "2 devices; ibvd0 node_guid $guid as ibv_devinfo says"

check "ibvctl dev (default command show) and abbreviations print the same"
ibvctl dev >"$O/dev-default" 2>&1 || fail "ibvctl dev exited $?"
diff -u "$O/dev" "$O/dev-default" || fail "'ibvctl dev' differs from 'ibvctl dev show'"
ibvctl de sh >"$O/dev-abbrev" 2>&1 || { show output "$O/dev-abbrev"; fail "ibvctl de sh exited non-zero"; }
diff -u "$O/dev" "$O/dev-abbrev" || fail "'ibvctl de sh' differs from 'ibvctl dev show'"
ibvctl dev show ibvd1 >"$O/dev1" 2>&1 || fail "ibvctl dev show ibvd1 exited $?"
if [ "$(wc -l <"$O/dev1")" -ne 1 ] || ! grep -q ' ibvd1: ' "$O/dev1"; then
	show output "$O/dev1"
	fail "dev show ibvd1 is not one ibvd1 line"
fi
ok "same output; 'dev show ibvd1' filters"

check "ibvctl -j dev show: a JSON array of flat objects"
ibvctl -j dev show >"$O/dev.json" 2>&1 || { show output "$O/dev.json"; fail "ibvctl -j dev show exited non-zero"; }
show "ibvctl -j dev show" "$O/dev.json"
[ "$(wc -l <"$O/dev.json")" -eq 1 ] || fail "-j without -p should be one line"
hexguid=${guid//:/}
json_check "$O/dev.json" "isinstance(j, list) and len(j) == 2 and all(isinstance(o, dict) for o in j)" ||
	fail "-j dev show is not a 2-element array of objects"
json_check "$O/dev.json" "[o['ifname'] for o in j] == ['ibvd0', 'ibvd1'] and all(o['node_type'] == 'ca' for o in j) and isinstance(j[0]['ifindex'], int)" ||
	fail "-j dev show: ifname/node_type/ifindex"
json_check "$O/dev.json" "j[0]['node_guid'].replace(':', '') == '$hexguid'" ||
	fail "-j dev show: node_guid of ibvd0 is not $guid"
ok "2 objects, ifname/ifindex/node_type/node_guid"

check "ibvctl -j -p dev show: pretty, same data"
ibvctl -j -p dev show >"$O/dev.pretty" 2>&1 || { show output "$O/dev.pretty"; fail "ibvctl -j -p dev show exited non-zero"; }
[ "$(wc -l <"$O/dev.pretty")" -gt 2 ] || { show output "$O/dev.pretty"; fail "-p output is not multi-line"; }
"$PYTHON" -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); sys.exit(a != b)' \
	"$O/dev.json" "$O/dev.pretty" || fail "-j -p carries different data from -j"
ok "$(wc -l <"$O/dev.pretty") lines, same data"

check "ibvctl link show: ACTIVE ports with their LIDs"
ibvctl link show >"$O/link" 2>&1 || { show output "$O/link"; fail "ibvctl link show exited non-zero"; }
show "ibvctl link show" "$O/link"
[ "$(grep -c '^link ' "$O/link")" -eq 3 ] || fail "expected 3 'link DEV/PORT' lines"
expect_grep '^link ibvd0/1 .*lid 1 .*state ACTIVE physical_state LINK_UP' "$O/link" "ibvd0/1"
expect_grep '^link ibvd1/1 .*lid 10 .*state ACTIVE' "$O/link" "ibvd1/1"
expect_grep '^link ibvd1/2 .*lid 11 .*state ACTIVE' "$O/link" "ibvd1/2"
ibvctl link show ibvd1/2 >"$O/link12" 2>&1 || fail "ibvctl link show ibvd1/2 exited non-zero"
if [ "$(wc -l <"$O/link12")" -ne 1 ] || ! grep -q '^link ibvd1/2 ' "$O/link12"; then
	show output "$O/link12"
	fail "link show ibvd1/2 is not one line"
fi
ok "3 ports ACTIVE, LIDs 1 10 11; DEV/PORT filter"

check "ibvctl -j link show"
ibvctl -j link show >"$O/link.json" 2>&1 || { show output "$O/link.json"; fail "ibvctl -j link show exited non-zero"; }
show "ibvctl -j link show" "$O/link.json"
json_check "$O/link.json" "len(j) == 3 and [(o['ifname'], o['port'], o['lid'], o['state']) for o in j] == [('ibvd0', 1, 1, 'ACTIVE'), ('ibvd1', 1, 10, 'ACTIVE'), ('ibvd1', 2, 11, 'ACTIVE')]" ||
	fail "-j link show: ifname/port/lid/state"
ok "ifname, port, lid, state"

check "ibvctl daemon status / version"
ibvctl daemon status >"$O/status" 2>&1 || { show output "$O/status"; fail "daemon status exited non-zero"; }
show "ibvctl daemon status" "$O/status"
[ -s "$O/status" ] || fail "daemon status printed nothing"
ibvctl -j daemon status >"$O/status.json" 2>&1 || fail "-j daemon status exited non-zero"
json_check "$O/status.json" "isinstance(j, (list, dict)) and len(j) > 0" || fail "-j daemon status is not JSON"
grep -qw "$DAEMON_PID" "$O/status" || fail "daemon status does not show the daemon's pid $DAEMON_PID"
version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$top_builddir/config.h")
ibvctl daemon version >"$O/version" 2>&1 || fail "daemon version exited non-zero"
grep -qF "$version" "$O/version" || { show output "$O/version"; fail "daemon version does not say $version"; }
ok "status names pid $DAEMON_PID; version $version"

check "unprivileged uid $USER1: may show, may not reload"
ibvctl_as "$USER1" dev show >"$O/dev-user" 2>&1 || { show output "$O/dev-user"; fail "dev show as uid $USER1 failed"; }
diff -u "$O/dev" "$O/dev-user" || fail "dev show as uid $USER1 differs from root's"
ibvctl_as "$USER1" daemon reload >"$O/reload-user" 2>&1
rc=$?
show "daemon reload as $USER1" "$O/reload-user"
if is_root; then
	expect_failed "$rc" "daemon reload as uid $USER1"
	grep -Eqi 'not permitted|permission|denied|requires root' "$O/reload-user" || fail "the refusal does not say why"
	# The daemon itself must refuse, whatever ibvctl checks: a raw request.
	run_as "$USER1" "$T/bin/badclient-helper" "$SOCK" admin daemon reload >"$O/raw-reload" 2>&1
	show "raw ADMIN daemon reload as $USER1" "$O/raw-reload"
	grep -Eq "^error ($(errno_of EPERM)|$(errno_of EACCES)) " "$O/raw-reload" ||
		fail "the daemon does not refuse a raw ADMIN 'daemon reload' from uid $USER1 with EPERM/EACCES"
	run_as "$USER1" "$T/bin/badclient-helper" "$SOCK" admin dev show >"$O/raw-show" 2>&1
	grep -q '^reply \[' "$O/raw-show" || { show "raw ADMIN dev show" "$O/raw-show"; fail "raw ADMIN 'dev show' from uid $USER1 refused"; }
	ok "dev show allowed; reload refused by ibvctl (exit $rc) and by the daemon"
else
	log "not root: the uid-based refusal cannot be checked"
fi
daemon_alive "after the refused reload"

check "daemon reload as root"
ibvctl daemon reload >"$O/reload" 2>&1 || { show output "$O/reload"; fail "daemon reload as root exited non-zero"; }
ping_daemon || fail "the daemon does not answer after reload"
ibvctl dev show >"$O/dev-after" 2>&1 || fail "dev show failed after the reload"
diff -u "$O/dev" "$O/dev-after" || fail "dev show changed across a reload of the same config"
ok "reloaded, same devices"

check "bad command lines: non-zero exit and usage on stderr"
for args in "frobnicate" "dev frobnicate" "-x dev show" "link show ibvd0/9" "dev show nosuchdev"; do
	# shellcheck disable=SC2086 # split on purpose
	ibvctl $args >"$O/bad.out" 2>"$O/bad.err"
	rc=$?
	expect_failed "$rc" "ibvctl $args"
	[ -s "$O/bad.err" ] || fail "'ibvctl $args' printed no error"
	log "ibvctl $args -> exit $rc: $(head -n 1 "$O/bad.err")"
done
for args in "frobnicate" "-x dev show"; do
	# shellcheck disable=SC2086
	ibvctl $args >/dev/null 2>"$O/bad.err"
	grep -qi 'usage' "$O/bad.err" || { show stderr "$O/bad.err"; fail "'ibvctl $args' shows no usage"; }
done
ok "all refused"

daemon_stop
