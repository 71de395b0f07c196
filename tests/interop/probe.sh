# The machinery of the probes, sourced by tests/interop/verbs-probe,
# tests/interop/datapath-probe and tests/interop/cm-probe.sh.
#
# probe_image: IMG, tests/interop/rxe's guest image, built if need be.
# probe_guest_init ADDR: the start of a guest's /init on stdout: busybox,
# the mounts, rxe's modules, eth0 with ADDR/24 and rxe0 on it.
# probe_boot DIR CONSOLE SECONDS NETDEV: boots the image with DIR (its
# /probe-init and whatever that runs) appended to the initramfs as a
# second cpio archive (Linux unpacks both), the console into CONSOLE, a
# virtio NIC on the qemu -netdev NETDEV (id n0); qemu's status.
#
# probe_main NAME [ARG...] builds
# tests/interop/NAME.c against libibverbs, runs it in the guest that
# tests/interop/rxe boots (its image, with a second cpio archive appended
# to the initramfs: the probe and an /init that makes rxe0 on a user-mode
# NIC, runs the probe onto the console and powers off), then on an
# ibverbsd RoCE device (on a veth in a namespace) and on a software
# device, and diffs.  Outputs: $top_builddir/interop/NAME/{rxe0,roce0,
# ibvd0}.out, rxe0-roce0.diff and rxe0-ibvd0.diff.  PROBE_TMO: the
# seconds a run on ibverbsd may take (the tests' TMO if unset).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
: "${top_srcdir:=$top}"
: "${top_builddir:=${BUILD_DIR:-$top/build}}"
export top_srcdir top_builddir
. "$top/tests/integration/lib.sh"

probe_image() {
	IMG=$top_builddir/interop
	"$top/tests/interop/rxe" --image-only >/dev/null
}

probe_guest_init() {
	cat <<-EOF
	#!/bin/sh
	export PATH=/usr/sbin:/usr/bin:/sbin:/bin
	/bin/busybox --install -s /bin 2>/dev/null
	mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev
	mkdir -p /tmp; mount -t tmpfs tmpfs /tmp
	for m in \$(cat /modules); do insmod "/lib/modules/\$m.ko"; done
	i=0
	while [ ! -e /sys/class/net/eth0 ] && [ \$i -lt 100 ]; do i=\$((i + 1)); sleep 0.1; done
	ip link set lo up
	ip link set eth0 mtu 1500 up
	ip addr add $1/24 dev eth0
	rdma link add rxe0 type rxe netdev eth0
	ulimit -l unlimited
	EOF
}

probe_boot() {
	local dir=$1 console=$2 secs=$3 netdev=$4
	chmod 755 "$dir/probe-init"
	(cd "$dir" && find . | cpio -o -H newc --quiet | gzip -1) >"$dir.cpio.gz" || fail "cpio"
	cat "$IMG/initramfs.cpio.gz" "$dir.cpio.gz" >"$dir.initrd.gz"
	timeout -k 5 "$secs" qemu-system-x86_64 -accel tcg -m 512 -smp 1 -nodefaults \
		-no-user-config -display none -no-reboot -kernel "$IMG/vmlinuz" \
		-initrd "$dir.initrd.gz" -append "console=ttyS0 quiet panic=-1 rdinit=/probe-init" \
		-serial "file:$console" -netdev "$netdev" -device virtio-net-pci,netdev=n0 \
		>"$dir.qemu.log" 2>&1
}

probe_main() {
	PROBE=$1
	shift
	IBVD_TEST=$PROBE
	for arg in "$@"; do
		case $arg in
		--keep) export IBVD_KEEP_TMP=1 ;;
		-h|--help) sed -n '2,/^set -u/{/^set -u/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
		*) echo "tests/interop/$PROBE: unknown argument '$arg'" >&2; exit 2 ;;
		esac
	done

	is_root || skip "needs root (a network namespace, apt-get download)"
	need_cmd qemu-system-x86_64 cpio gzip ip "${CC:-cc}"
	OUT=$top_builddir/interop/$PROBE

	probe_image || fail "the guest image (tests/interop/rxe --image-only)"
	ibvd_init
	mkdir -p "$OUT" || fail "mkdir $OUT"
	"${CC:-cc}" -O1 -Wall -Wextra -o "$T/bin/probe" "$top/tests/interop/$PROBE.c" -libverbs \
		2>"$T/cc.log" || { show cc "$T/cc.log"; fail "building $PROBE.c (libibverbs-dev?)"; }
	chmod 755 "$T/bin/probe"

	# ---- the guest -------------------------------------------------------------

	G=$T/guest
	mkdir -p "$G/bin"
	cp "$T/bin/probe" "$G/bin/probe"
	{
		probe_guest_init 10.0.2.15
		cat <<-'EOF'
		echo PROBE-BEGIN
		/bin/probe rxe0 2>&1
		echo "PROBE-END $?"
		poweroff -f
		EOF
	} >"$G/probe-init"
	log "guest: booting (TCG) to run the probe on rxe0"
	probe_boot "$G" "$T/console.log" 600 user,id=n0 || { show qemu "$G.qemu.log"; fail "qemu"; }
	tr -d '\r' <"$T/console.log" | sed -n '/^PROBE-BEGIN$/,/^PROBE-END/p' | sed '1d;$d' >"$OUT/rxe0.out"
	grep -q '^PROBE-END 0$' <(tr -d '\r' <"$T/console.log") ||
		{ show "guest console" <(tail -n 30 "$T/console.log"); fail "the probe did not finish in the guest"; }

	# ---- the daemon: a software device, and a RoCE one on a veth ---------------

	# WIRE_PREFIX names the namespace, as tests/interop/rxe's, for a run
	# beside others' (the veths live inside it)
	NS=${WIRE_PREFIX:-ibvd}-probe-$$
	case $NS in
	*[!A-Za-z0-9_-]*) fail "WIRE_PREFIX '$WIRE_PREFIX': letters, digits, _ and - only" ;;
	esac
	VA=ivp$$a
	NS_MADE=""
	probe_cleanup() {
		local rc=$?
		[ -n "$NS_MADE" ] && ip netns delete "$NS" 2>/dev/null
		(exit "$rc")
		ibvd_cleanup
	}
	trap probe_cleanup EXIT
	ip netns add "$NS" 2>/dev/null || skip "cannot create a network namespace"
	NS_MADE=1
	ip -n "$NS" link set lo up
	ip -n "$NS" link add "$VA" type veth peer name "ivp$$b" || fail "ip link add $VA"
	ip -n "$NS" link set "$VA" up && ip -n "$NS" link set "ivp$$b" up || fail "veth up"
	ip -n "$NS" addr add 10.78.0.1/24 dev "$VA" || fail "ip addr add"
	cat >"$T/bin/ibverbsd-in-ns" <<-EOF
	#!/bin/sh
	exec ip netns exec "$NS" "$IBVERBSD" "\$@"
	EOF
	chmod 755 "$T/bin/ibverbsd-in-ns"
	IBVERBSD=$T/bin/ibverbsd-in-ns
	cat >"$T/probe.conf" <<-EOF
	{
	  "socket": { "path": "$SOCK" },
	  "devices": [
	    { "name": "ibvd0" },
	    { "name": "roce0", "netdev": "$VA", "peers": [ "10.78.0.0/16" ] }
	  ]
	}
	EOF
	daemon_start -c "$T/probe.conf"
	daemon_wait_ready
	for dev in roce0 ibvd0; do
		TMO=${PROBE_TMO:-$TMO} run_ours "$USER1" "$T/bin/probe" "$dev" >"$OUT/$dev.out" 2>&1 ||
			fail "$PROBE $dev exited with $? (see $OUT/$dev.out)"
		diff "$OUT/rxe0.out" "$OUT/$dev.out" >"$OUT/rxe0-$dev.diff"
		log "rxe0 and $dev: $(grep -c '^>' "$OUT/rxe0-$dev.diff") lines differ ($OUT/rxe0-$dev.diff)"
	done
	daemon_stop
	ok "outputs in $OUT"

}
