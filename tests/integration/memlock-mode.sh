#!/bin/bash
# "rlimit_memlock" (issue 11): with "enforce" (the default) a client's
# registered memory is held to its own RLIMIT_MEMLOCK, as a kernel RDMA
# stack holds it; with "ignore" only the tenant quotas are.  A 16 MiB MR
# (4096 pages) under an 8 MiB RLIMIT_MEMLOCK: refused with ENOMEM, then
# accepted once the daemon ignores the rlimit, refused again for a uid
# whose memlock quota is smaller, while another uid is not held to it.
# The library warns of a limit of 32 KiB or less (seed 000's "typical
# error messages").
. "$(dirname "$0")/lib.sh"

need_cmd prlimit
ibvd_init
is_root || skip "needs root to run clients as uids $USER1 and $USER2"
O=$T/out
HELPER=$T/bin/quota-helper
[ -x "$HELPER" ] || fail "tests/integration/quota-helper not built"
conf=$T/memlock.conf
PSZ=$(getconf PAGESIZE)
PAGES=$((16 * 1048576 / PSZ))		# 16 MiB
RLIMIT=$((8 * 1048576))
QUOTA=$((12 * 1048576))

# write_conf MODE: the rlimit mode, and a memlock quota for $USER2 only
write_conf() {
	cat >"$conf" <<-EOF
	{
	  "socket": { "path": "$SOCK" },
	  "rlimit_memlock": "$1",
	  "devices": [ { "name": "ibvd0" } ],
	  "limits": { "uid": { "$USER2": { "memlock": $QUOTA } } }
	}
	EOF
	chmod 644 "$conf"
}

# register UID: one MR of $PAGES pages under an 8 MiB RLIMIT_MEMLOCK;
# GOT is the helper's "created K errno E".
register() {
	run_ours "$1" prlimit --memlock="$RLIMIT" "$HELPER" memlock "$PAGES" >"$O/reg" 2>&1
	GOT=$(grep '^created' "$O/reg" | sed 's/ pid .*//')
	[ -n "$GOT" ] || { show helper "$O/reg"; fail "uid $1: no answer"; }
}

expect() {
	[ "$1" = "$2" ] || fail "$3: got '$1', expected '$2'"
	ok "$3: $1"
}

mkdir -p "$O"
# Debian's ibv_devinfo, as rdma-core's own library would be run.
if [ -x /usr/bin/ibv_devinfo ]; then
	check "the library warns of a RLIMIT_MEMLOCK of 32 KiB or less, as rdma-core does (not root)"
	write_conf enforce
	daemon_start -c "$conf"
	daemon_wait_ready
	# devinfo LIMIT OUT [UID]: Debian's ibv_devinfo under RLIMIT_MEMLOCK LIMIT
	devinfo() {
		run_debian "${3:-$USER1}" prlimit --memlock="$1" /usr/bin/ibv_devinfo >"$O/$2" 2>&1 ||
			{ show ibv_devinfo "$O/$2"; fail "ibv_devinfo under a $1-byte RLIMIT_MEMLOCK"; }
		expect_grep "hca_id:" "$O/$2" "ibv_devinfo lists the device"
	}
	devinfo 32768 devinfo-32k
	[ "$(grep -c '^libibverbs: Warning: RLIMIT_MEMLOCK is 32768 bytes\.$' "$O/devinfo-32k")" = 1 ] ||
		{ show ibv_devinfo "$O/devinfo-32k"; fail "not one RLIMIT_MEMLOCK warning at 32 KiB"; }
	devinfo 65536 devinfo-64k
	expect_no_grep "RLIMIT_MEMLOCK" "$O/devinfo-64k" "no warning at 64 KiB"
	devinfo 32768 devinfo-root 0
	expect_no_grep "RLIMIT_MEMLOCK" "$O/devinfo-root" "no warning for root"
	ok "warned at 32 KiB, silent at 64 KiB and for root"
	daemon_stop
	check "no such warning from a daemon that ignores RLIMIT_MEMLOCK"
	write_conf ignore
	daemon_start -c "$conf"
	daemon_wait_ready
	devinfo 32768 devinfo-ignore
	expect_no_grep "RLIMIT_MEMLOCK" "$O/devinfo-ignore" "no warning with \"rlimit_memlock\": \"ignore\""
	ok "silent at 32 KiB when the limit does not apply"
	daemon_stop
fi

check "enforce: 16 MiB under an 8 MiB RLIMIT_MEMLOCK is refused"
write_conf enforce
daemon_start -c "$conf"
daemon_wait_ready
register "$USER1"
expect "$GOT" "created 0 errno 12" "uid $USER1, enforce"
expect_grep "over its RLIMIT_MEMLOCK" "$DAEMON_LOG" "the daemon says why"
daemon_stop

check "ignore: the same registration succeeds; the tenant quota still holds"
write_conf ignore
daemon_start -c "$conf"
daemon_wait_ready
register "$USER1"
expect "$GOT" "created 1 errno 0" "uid $USER1 (no quota), ignore"
register "$USER2"
expect "$GOT" "created 0 errno 12" "uid $USER2 (memlock quota $QUOTA), ignore"
expect_grep "uid $USER2: registering memory refused: memlock limit $QUOTA" "$DAEMON_LOG" "the daemon names the quota"
daemon_alive "after the registrations"
check "a refusal charges nothing: 8 MiB fits uid $USER2's quota after it"
PAGES=$((8 * 1048576 / PSZ))
register "$USER2"
expect "$GOT" "created 1 errno 0" "uid $USER2, 8 MiB after the refused 16 MiB"
daemon_stop
