#!/bin/bash
# Differential run of tests/interop/cm-probe.c: the same binary, linked
# against librdmacm.so.1 only, runs
#   - in the guest of tests/interop/rxe (Debian's kernel rdma_cm on rxe0,
#     Debian's rdma-core 44): over 127.0.0.1 and over the guest's address;
#   - on this host against the build's libraries and daemon: the default
#     software device over 127.0.0.1, and a RoCE device on a veth in a
#     namespace (netns.sh's A) over 127.0.0.1 and A's address.
# Each prints one line per call (result, errno) and per event (type,
# status); the outputs go to $top_builddir/interop/cm-probe.*.out and
# the runs over the devices' own addresses are diffed into
# cm-probe.diff.  Not part of make check: the guest alone takes
# 2 to 5 minutes under TCG.  Exits 0 when both sides ran (differences
# are for reading, not failures), 77 skip, 1 if a side did not run.
#
# The guest gets the probe through a second cpio archive appended to
# the initramfs (Linux unpacks them in turn) holding /cm-probe and
# /probe-init, booted with rdinit=/probe-init: the guest image and
# tests/interop/rxe are used as they are.
#
# usage: top_builddir=BUILD tests/interop/cm-probe.sh [--guest-only|--host-only]
set -u
. "$(dirname "$0")/probe.sh"
IBVD_TEST=cm-probe
WIRE_PREFIX=${WIRE_PREFIX:-cmp}
. "$top/tests/integration/netns.sh"

only=${1:-}
is_root || skip "needs root"
need_cmd cc qemu-system-x86_64 cpio gzip
probe_image || skip "no guest image (tests/interop/rxe --image-only)"
ibvd_init
O=$T/out
cc -D_GNU_SOURCE -O1 -Wall -Wextra -o "$T/bin/cm-probe" "$top/tests/interop/cm-probe.c" \
	-lrdmacm -libverbs -lpthread || fail "building cm-probe (librdmacm-dev)"
chmod 755 "$T/bin/cm-probe"

guest() {
	local d=$T/guest
	mkdir -p "$d"
	cp "$T/bin/cm-probe" "$d/cm-probe"
	{
		probe_guest_init 10.81.0.2
		cat <<-'INIT'
		echo "=== guest 127.0.0.1"; /cm-probe 127.0.0.1 20000 2>&1
		echo "=== guest 10.81.0.2"; /cm-probe 10.81.0.2 21000 10.81.0.99 2>&1
		echo "=== end"
		poweroff -f
		INIT
	} >"$d/probe-init"
	# a NIC on a hub of its own: rxe needs a link, the probe no peer
	probe_boot "$d" "$d.console" 900 hubport,id=n0,hubid=0
	grep -v '^\[' "$d.console" >"$IMG/cm-probe.guest.out"
	grep -q '^=== end' "$IMG/cm-probe.guest.out" || { show console "$d.console"; fail "the guest did not finish"; }
}

ours() {
	local out=$IMG/cm-probe.ours.out
	daemon_start -c "$(default_conf)"
	daemon_wait_ready "$SOCK"
	TMO=300
	{
		echo "=== ours soft 127.0.0.1"
		run_ours "$USER1" "$T/bin/cm-probe" 127.0.0.1 22000 2>&1
	} >"$out"
	daemon_stop
	wire_up
	{
		echo "=== ours roce 127.0.0.1"
		NS_TMO=300 ns_debian "$NSA" "$USER1" "$SOCK_A" "$T/bin/cm-probe" 127.0.0.1 23000 2>&1
		echo "=== ours roce $IPA"
		NS_TMO=300 ns_debian "$NSA" "$USER1" "$SOCK_A" "$T/bin/cm-probe" "$IPA" 24000 10.79.0.99 2>&1
		echo "=== end"
	} >>"$out"
}

# section FILE TITLE: the lines of the section whose title has TITLE,
# the device's address written ADDR and the ports as offsets, for diff
section() {
	awk -v h="$2" 'index($0, "=== ") == 1 { on = index($0, h) > 0; next } on' "$1" |
		tr -d '\r' | sed -E 's/10\.(81|79)\.0\.[12]/ADDR/g; s/port=2[0-9]0([0-9][0-9])/port=+\1/g'
}

[ "$only" = --host-only ] || guest
[ "$only" = --guest-only ] || ours
if [ -z "$only" ]; then
	diff <(section "$IMG/cm-probe.guest.out" "guest 10.81") \
	     <(section "$IMG/cm-probe.ours.out" "roce 10.79") >"$IMG/cm-probe.diff"
	log "differences (guest < > ours, RoCE, the devices' own addresses): $IMG/cm-probe.diff"
fi
ok "cm-probe outputs in $IMG/cm-probe.*.out"
