#!/bin/bash
# The generated systemd units pass `systemd-analyze verify` (with the Exec lines
# pointed at the built daemon, since verify needs the binary), say what the
# daemon relies on (Type=notify, --systemd, reload by SIGHUP, the seqpacket
# socket named "control"), and keep their hardening score.
. "$(dirname "$0")/lib.sh"

need_cmd systemd-analyze
ibvd_init
O=$T/out
svc=$top_builddir/systemd/ibverbsd.service
sck=$top_builddir/systemd/ibverbsd.socket
[ -f "$svc" ] || fail "$svc was not generated"
[ -f "$sck" ] || fail "$sck was not generated"
sbindir=$(sed -n 's/^sbindir = //p' "$top_builddir/Makefile")
prefix=$(sed -n 's/^prefix = //p' "$top_builddir/Makefile")
exec_prefix=$(sed -n 's/^exec_prefix = //p' "$top_builddir/Makefile")
sbindir=${sbindir//\$\{exec_prefix\}/$exec_prefix}
sbindir=${sbindir//\$\{prefix\}/$prefix}

check "ibverbsd.service content"
expect_grep '^Type=notify$' "$svc" "Type"
expect_grep "^ExecStart=$sbindir/ibverbsd( .*)? --systemd( |\$)" "$svc" "ExecStart runs \$(sbindir)/ibverbsd --systemd"
expect_grep "^ExecReload=/bin/kill -HUP \\\$MAINPID\$" "$svc" "ExecReload"
expect_grep '^WatchdogSec=' "$svc" "WatchdogSec"
expect_grep '^Requires=ibverbsd.socket$' "$svc" "Requires"
expect_no_grep '^RuntimeDirectory=ibverbsd$' "$svc" "RuntimeDirectory=ibverbsd deletes the socket's directory on stop"
expect_no_grep '@[a-zA-Z_]+@' "$svc" "unsubstituted @variables@"
ok "Type=notify, ExecStart=$sbindir/ibverbsd --systemd, ExecReload, WatchdogSec"

# ibverbsd(8) SECURITY: no root, one capability, passed on to the broker.
check "ibverbsd.service privileges: a dynamic user, CAP_NET_RAW alone"
expect_grep '^DynamicUser=yes$' "$svc" "DynamicUser"
expect_grep '^CapabilityBoundingSet=CAP_NET_RAW$' "$svc" "CapabilityBoundingSet"
expect_grep '^AmbientCapabilities=CAP_NET_RAW$' "$svc" "AmbientCapabilities"
expect_grep '^NoNewPrivileges=yes$' "$svc" "NoNewPrivileges"
expect_no_grep 'CAP_(IPC_LOCK|SYS_PTRACE|SYS_RESOURCE|SYS_ADMIN)' "$svc" "capabilities the daemon does not need"
expect_no_grep '^LimitMEMLOCK=' "$svc" "LimitMEMLOCK (nothing is pinned)"
ok "DynamicUser=yes, CAP_NET_RAW only"

check "ibverbsd.socket content"
expect_grep '^ListenSequentialPacket=/run/ibverbsd/ibverbsd.sock$' "$sck" "ListenSequentialPacket"
expect_grep '^FileDescriptorName=control$' "$sck" "FileDescriptorName"
expect_no_grep '@[a-zA-Z_]+@' "$sck" "unsubstituted @variables@"
ok "seqpacket socket /run/ibverbsd/ibverbsd.sock named control"

check "systemd-analyze verify --man=no"
mkdir -p "$T/units"
sed -E "s|^(Exec[A-Za-z]*=\\+?)$sbindir/ibverbsd|\\1$IBVERBSD|" "$svc" >"$T/units/ibverbsd.service"
cp "$sck" "$T/units/ibverbsd.socket"
grep -q "^ExecStart=$IBVERBSD " "$T/units/ibverbsd.service" || fail "could not point ExecStart at $IBVERBSD"
(cd "$T/units" && SYSTEMD_LOG_LEVEL=notice systemd-analyze verify --man=no ibverbsd.socket ibverbsd.service) >"$O/verify" 2>&1
rc=$?
show "systemd-analyze verify" "$O/verify"
[ "$rc" -eq 0 ] || fail "systemd-analyze verify exited $rc"
expect_no_grep 'ibverbsd\.(service|socket)' "$O/verify" "verify complains about our units"
ok "verify: clean"

check "systemd-analyze security --offline=yes: exposure at most 2.0"
(cd "$T/units" && systemd-analyze security --offline=yes --no-pager ibverbsd.service) >"$O/security" 2>&1
score=$(sed -n 's/^→ Overall exposure level for ibverbsd.service: \([0-9.]*\).*/\1/p' "$O/security")
[ -n "$score" ] || { show "systemd-analyze security" "$O/security"; fail "no exposure score"; }
awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }' || { show "systemd-analyze security" "$O/security"; fail "exposure $score > 2.0"; }
ok "exposure $score"

# The unit's /dev/infiniband steps, run as it runs them (in a mount
# namespace with a /dev of our own): a start makes the config's links, a
# reload adds the new config's and removes none (the daemon may refuse
# it and keep serving every device), a stop removes them all.
# (a mount namespace and a /dev of our own take root)
is_root || { log "not root: the unit's device-link steps are not run"; exit 0; }
check "the unit's device-link steps: make, add on reload, remove"
step_of() {	# KEY: the --device-links argument of the unit's KEY line
	sed -n "s|^$1=+$sbindir/ibverbsd --device-links \\([a-z]*\\)\$|\\1|p" "$svc"
}
start_step=$(step_of ExecStartPre) reload_step=$(step_of ExecReload) stop_step=$(step_of ExecStopPost)
[ "$start_step/$reload_step/$stop_step" = make/add/remove ] ||
	fail "the unit's steps are '$start_step/$reload_step/$stop_step', not make/add/remove"
grep -A1 "^ExecReload=+.*--device-links" "$svc" | tail -n 1 | grep -q '^ExecReload=/bin/kill -HUP' ||
	fail "the reload's link step is not the one before SIGHUP"
printf '{"devices": [{"name": "ibvd0"}, {"name": "ibvd1"}]}\n' >"$T/two.conf"
printf '{"devices": [{"name": "ibvd0"}]}\n' >"$T/one.conf"
unshare -m --propagation private sh -c '
	mount -t tmpfs none /dev && mknod -m 666 /dev/null c 1 3 || exit 2
	links() { printf "%s:" "$1"; ls /dev/infiniband 2>/dev/null | tr "\n" " "; echo; }
	"$0" -c "$1" --device-links "$3" && links start &&
	"$0" -c "$2" --device-links "$4" && links reload &&
	"$0" -c "$2" --device-links "$5" && links stop &&
	"$0" -c "$2" --device-links bogus 2>&1 | grep -m1 takes' \
	"$IBVERBSD" "$T/two.conf" "$T/one.conf" "$start_step" "$reload_step" "$stop_step" \
	>"$O/links" 2>&1 || { show steps "$O/links"; fail "the link steps failed"; }
expect_grep '^start:ibvd0 ibvd1 $' "$O/links" "links after the start step"
expect_grep '^reload:ibvd0 ibvd1 $' "$O/links" "links after the reload step (ibvd1 kept)"
expect_grep '^stop:$' "$O/links" "links after the stop step"
expect_grep 'takes make, add or remove' "$O/links" "an unknown step"
ok "start: ibvd0 ibvd1; reload to one device: both kept; stop: none"
