#!/bin/bash
# Check an installed ibverbsd: the layout `make install` produced and, unless
# --layout-only, that it works from there with the paths baked in at build
# time (no IBVERBSD_LIBDIR/IBVERBSD_TOOLDIR overrides):
#   as uid 1001: PREFIX/sbin/ibverbsd -f --socket S (the installed default
#   config), then IBVERBSD_SOCKET=S PREFIX/bin/ibverbsd-run
#   /usr/bin/ibv_devinfo -v as uids 1001 and 1002 shows ibvd0 PORT_ACTIVE
#   with a non-zero port_lid; our installed tools and ibvctl agree.
#
# usage: install-check.sh [--layout-only] [--destdir DIR] BUILDDIR
#   BUILDDIR  the configured build tree that was installed (its Makefile
#             gives the directories)
#   DIR       the DESTDIR it was installed into (layout checks only)
# Run by scripts/test; needs root for the uid switches.
set -u
layout_only=no
destdir=""
while [ $# -gt 1 ]; do
	case $1 in
	--layout-only) layout_only=yes; shift ;;
	--destdir) destdir=$2; layout_only=yes; shift 2 ;;
	*) break ;;
	esac
done
[ $# -eq 1 ] || { echo "usage: $0 [--layout-only] [--destdir DIR] BUILDDIR" >&2; exit 2; }
B=$(cd "$1" && pwd) || exit 1
top_builddir=$B
top_srcdir=$(sed -n 's/^abs_top_srcdir = //p' "$B/Makefile")
SANITIZERS=$(sed -n 's/^SANITIZER_CFLAGS = //p' "$B/Makefile")
export top_builddir top_srcdir SANITIZERS
. "$(dirname "$0")/lib.sh"
IBVD_TEST=install-check

# mkvar VAR: a make variable of the build, fully expanded.
mkvar() {
	# shellcheck disable=SC2016 # $(VAR) is make's, not the shell's
	printf 'ibvd-print-var:\n\t@echo $(%s)\n' "$1" |
		make -s --no-print-directory -C "$B" -f Makefile -f - ibvd-print-var
}
prefix=$(mkvar prefix)
bindir=$destdir$(mkvar bindir)
sbindir=$destdir$(mkvar sbindir)
libdir=$destdir$(mkvar libdir)
privlibdir=$destdir$(mkvar ibverbsdlibdir)
tooldir=$destdir$(mkvar ibverbsdtooldir)
confdir=$destdir$(mkvar sysconfdir)/ibverbsd
mandir=$destdir$(mkvar mandir)
unitdir=$(mkvar systemdsystemunitdir)
[ -n "$prefix" ] || fail "cannot read the directories from $B/Makefile"
log "prefix $prefix${destdir:+, DESTDIR $destdir}"

check "installed layout"
for f in "$sbindir/ibverbsd" "$bindir/ibvctl" "$bindir/ibverbsd-run" \
	 "$tooldir/ibv_devices" "$tooldir/ibv_devinfo"; do
	[ -x "$f" ] || fail "missing program $f"
done
for f in "$privlibdir/libibverbs.so.1" "$privlibdir/librdmacm.so.1" \
	 "$privlibdir/rsocket/librspreload.so" \
	 "$confdir/ibverbsd.conf" "$mandir/man8/ibverbsd.8" "$mandir/man8/ibvctl.8" \
	 "$mandir/man5/ibverbsd.conf.5" "$mandir/man1/ibverbsd-run.1"; do
	[ -e "$f" ] || fail "missing $f"
done
if [ -n "$unitdir" ] && [ "$unitdir" != no ]; then
	for f in "$destdir$unitdir/ibverbsd.service" "$destdir$unitdir/ibverbsd.socket"; do
		[ -f "$f" ] || fail "missing unit $f"
	done
	grep -q "^ExecStart=$(mkvar sbindir)/ibverbsd " "$destdir$unitdir/ibverbsd.service" ||
		fail "the installed unit's ExecStart does not run $(mkvar sbindir)/ibverbsd"
fi
# Private: nothing that would shadow Debian's rdma-core or ibverbs-utils.
for f in "$libdir"/libibverbs.so* "$libdir"/librdmacm.so* "$bindir/ibv_devinfo" "$bindir/ibv_devices"; do
	[ ! -e "$f" ] || fail "$f installed outside the private directories"
done
"$PYTHON" -c 'import json,sys; json.load(open(sys.argv[1]))' "$confdir/ibverbsd.conf" ||
	fail "the installed config is not JSON"
# One default socket for the daemon's config, its clients and the unit.
sock=$(mkvar IBVERBSD_DEFAULT_SOCKET)
conf_sock=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["socket"]["path"])' "$confdir/ibverbsd.conf")
[ "$conf_sock" = "$sock" ] || fail "the installed config's socket is $conf_sock, the build's default $sock"
if [ -n "$unitdir" ] && [ "$unitdir" != no ]; then
	grep -qx "ListenSequentialPacket=$sock" "$destdir$unitdir/ibverbsd.socket" ||
		fail "the installed socket unit does not listen on $sock"
fi
ok "programs, private libraries in $privlibdir, tools in $tooldir, config (socket $sock), man pages${unitdir:+, units}"
[ "$layout_only" = yes ] && exit 0

# ---- run it from the prefix, as unprivileged uids --------------------------

is_root || skip "needs root to run the daemon and the clients as uids $USER1/$USER2"
ibvd_tmpdir
unset IBVERBSD_LIBDIR IBVERBSD_TOOLDIR
IBVERBSD=$sbindir/ibverbsd
DAEMON_UID=$USER1
chown "$USER1:$USER1" "$T/run"
O=$T/out

run_as "$USER1" test -x "$sbindir/ibverbsd" ||
	fail "uid $USER1 cannot reach $sbindir/ibverbsd: install into a world-readable prefix"

check "ibverbsd-run knows the installed directories"
"$bindir/ibverbsd-run" --help >"$O/help" 2>&1 || fail "ibverbsd-run --help"
grep -qF "$privlibdir" "$O/help" || { show "ibverbsd-run --help" "$O/help"; fail "ibverbsd-run does not use $privlibdir"; }
ok "libraries from $privlibdir"

# The daemon answers when the installed ibvctl gets a status.
ping_daemon() {
	IBVERBSD_SOCKET=$SOCK timeout 5 "$bindir/ibvctl" daemon status >/dev/null 2>&1
}

check "as uid $USER1: $sbindir/ibverbsd -f --socket $SOCK (installed default config)"
daemon_start --socket "$SOCK"
daemon_wait_ready
owner=$(stat -c %u "$SOCK")
[ "$owner" = "$USER1" ] || fail "the socket belongs to uid $owner, not $USER1"
ok "daemon pid $DAEMON_PID serving as uid $USER1"

for uid in "$USER1" "$USER2"; do
	check "as uid $uid: IBVERBSD_SOCKET=S $bindir/ibverbsd-run /usr/bin/ibv_devinfo -v"
	debian_env
	run_as "$uid" env "${DEBIAN_ENV[@]}" "$bindir/ibverbsd-run" /usr/bin/ibv_devinfo -v >"$O/deb.$uid" 2>&1 ||
		{ show output "$O/deb.$uid"; fail "ibv_devinfo -v as uid $uid failed"; }
	expect_grep '^hca_id:	ibvd0$' "$O/deb.$uid" "hca_id"
	expect_grep '^			state:			PORT_ACTIVE \(4\)$' "$O/deb.$uid" "state"
	expect_grep '^			link_layer:		InfiniBand$' "$O/deb.$uid" "link_layer"
	lid=$(field "$O/deb.$uid" port_lid)
	[ "${lid:-0}" -ne 0 ] || fail "port_lid is '$lid'"
	ok "ibvd0 PORT_ACTIVE, port_lid $lid"
done
show "Debian's ibv_devinfo -v through the installed ibverbsd-run" "$O/deb.$USER1"

check "the installed ibv_devinfo (via ibverbsd-run, and directly through its RUNPATH) = Debian's"
run_as "$USER2" env IBVERBSD_SOCKET="$SOCK" "$bindir/ibverbsd-run" sh -c 'command -v ibv_devinfo' >"$O/which" 2>&1
[ "$(cat "$O/which")" = "$tooldir/ibv_devinfo" ] || fail "ibverbsd-run resolves ibv_devinfo to $(cat "$O/which")"
run_as "$USER2" env IBVERBSD_SOCKET="$SOCK" "$bindir/ibverbsd-run" ibv_devinfo -v >"$O/ours" 2>&1 ||
	{ show output "$O/ours"; fail "our ibv_devinfo -v failed"; }
diff -u "$O/deb.$USER1" "$O/ours" || fail "our installed ibv_devinfo -v differs from Debian's"
run_as "$USER2" env IBVERBSD_SOCKET="$SOCK" "$tooldir/ibv_devinfo" -v >"$O/direct" 2>&1 ||
	{ show output "$O/direct"; fail "$tooldir/ibv_devinfo without ibverbsd-run failed"; }
diff -u "$O/deb.$USER1" "$O/direct" || fail "$tooldir/ibv_devinfo without ibverbsd-run differs"
ok "identical"

check "the installed ibvctl as uid $USER2"
run_as "$USER2" env IBVERBSD_SOCKET="$SOCK" "$bindir/ibvctl" link show >"$O/link" 2>&1 ||
	{ show output "$O/link"; fail "ibvctl link show failed"; }
expect_grep "^link ibvd0/1 .*lid $lid .*state ACTIVE" "$O/link" "ibvctl link show"
ok "$(head -n 1 "$O/link")"

daemon_stop
[ ! -e "$SOCK" ] || fail "the socket remains after the daemon stopped"
ok "installed daemon stopped cleanly"
