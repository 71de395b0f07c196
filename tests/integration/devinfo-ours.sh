#!/bin/bash
# Our own ibv_devices and ibv_devinfo (tools/, found first on PATH under
# ibverbsd-run) print exactly what Debian's do for the same devices, with
# every option combination; an unknown device is an error in both.
. "$(dirname "$0")/lib.sh"

need_cmd /usr/bin/ibv_devices /usr/bin/ibv_devinfo
ibvd_init

# Lines allowed to differ between ours and Debian's (ERE, matched against
# diff's -/+ lines).  Each entry must be documented in man/ibverbsd-run.1.
ALLOWED_DIFF=''

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

check "under ibverbsd-run, plain 'ibv_devinfo' and 'ibv_devices' resolve to our tools"
for tool in ibv_devinfo ibv_devices; do
	where=$(run_ours "$USER1" sh -c "command -v $tool") || fail "command -v $tool failed"
	[ "$where" = "$T/tools/$tool" ] || fail "'$tool' resolves to '$where', not $T/tools/$tool"
done
ok "PATH puts IBVERBSD_TOOLDIR first"

# compare NAME ARGS...: ours vs Debian's, stdout and exit status.
compare() {
	local name=$1 rcd rco
	shift
	check "ibv_$name $*: ours = Debian's"
	run_debian "$USER1" "/usr/bin/ibv_$name" "$@" >"$O/deb" 2>"$O/deb.err"
	rcd=$?
	run_ours "$USER1" "ibv_$name" "$@" >"$O/ours" 2>"$O/ours.err"
	rco=$?
	if [ "$rcd" -eq 124 ] || [ "$rco" -eq 124 ]; then
		fail "ibv_$name $* timed out"
	fi
	[ -s "$O/deb" ] || { show "Debian's stderr" "$O/deb.err"; fail "Debian's ibv_$name $* printed nothing"; }
	diff -u "$O/deb" "$O/ours" >"$O/diff"
	# every changed line, blank ones too; not the two file headers
	if [ -n "$ALLOWED_DIFF" ]; then
		tail -n +3 "$O/diff" | grep '^[-+]' | grep -Ev "^[-+]($ALLOWED_DIFF)" >"$O/baddiff"
	else
		tail -n +3 "$O/diff" | grep '^[-+]' >"$O/baddiff"
	fi
	if [ -s "$O/baddiff" ]; then
		show "diff Debian's ours" "$O/diff"
		show "our stderr" "$O/ours.err"
		fail "ibv_$name $*: our output differs from Debian's"
	fi
	[ "$rcd" -eq "$rco" ] || fail "ibv_$name $*: Debian's exits $rcd, ours $rco"
	ok "ibv_$name $*: $(wc -l <"$O/ours") identical lines, exit $rco"
}

compare devices
compare devinfo
compare devinfo -v
compare devinfo -l
compare devinfo -d ibvd0
compare devinfo -d ibvd1 -i 2
compare devinfo -v -d ibvd1 -i 1
compare devinfo -v -i 2
compare devices foo		# Debian's takes no options: arguments are ignored

check "ibv_devinfo -i 300: not a usage error but the device's \"Invalid port\", as Debian's"
run_debian "$USER1" /usr/bin/ibv_devinfo -i 300 >"$O/deb" 2>"$O/deb.err"
rcd=$?
run_ours "$USER1" ibv_devinfo -i 300 >"$O/ours" 2>"$O/ours.err"
rco=$?
[ "$rcd" -eq "$rco" ] || { show "Debian's stderr" "$O/deb.err"; show "our stderr" "$O/ours.err"; fail "Debian's exits $rcd, ours $rco"; }
expect_grep "Invalid port requested for device" "$O/ours.err" "our stderr"
ok "both exit $rco: $(head -n 1 "$O/ours.err")"

check "our ibv_devinfo -d nosuchdev fails and names the device"
run_ours "$USER1" ibv_devinfo -d nosuchdev >"$O/bad" 2>&1
rc=$?
expect_failed "$rc" "ibv_devinfo -d nosuchdev"
expect_grep "nosuchdev" "$O/bad" "-d nosuchdev message"
ok "exit $rc: $(head -n 1 "$O/bad")"

check "our ibv_devinfo with a bad option fails with usage"
run_ours "$USER1" ibv_devinfo --no-such-option >"$O/usage" 2>&1
rc=$?
expect_failed "$rc" "ibv_devinfo --no-such-option"
expect_grep '[Uu]sage' "$O/usage" "usage text"
ok "exit $rc"

daemon_stop
