#!/bin/bash
# netns.sh's names for a run: its veths' must fit Linux's 15 characters
# (IFNAMSIZ) whatever WIRE_PREFIX a parallel run chooses, and differ
# between the ends and between runs.  Each "run" is a shell of its own
# (its own $$) sourcing netns.sh; as root the longest prefix's wire is
# made for real (wire_netns), which "ip link add" refuses past 15.
. "$(dirname "$0")/lib.sh"

ibvd_tmpdir

# names PREFIX [up]: "VA VB" of a run with WIRE_PREFIX=PREFIX; with up,
# its namespaces and veths made (wire_netns), then removed.
names() {
	WIRE_PREFIX=$1 bash -c '
		IBVD_TEST=wire-names-inner
		. "$1"
		ibvd_tmpdir
		. "$2"
		O=$T/out
		trap wire_cleanup EXIT
		if [ -n "$3" ]; then
			wire_netns
			ip -n "$NSA" link show "$VA" >/dev/null || fail "no $VA in $NSA"
			ip -n "$NSB" link show "$VB" >/dev/null || fail "no $VB in $NSB"
		fi
		echo "$VA $VB"
	' inner "$top_srcdir/tests/integration/lib.sh" "$top_srcdir/tests/integration/netns.sh" "${2:-}"
}

long=ibvd-a-prefix-far-past-fifteen
seen=" "
for prefix in "" ibvd "$long"; do
	check "WIRE_PREFIX '$prefix': veth names fit, unique per end and per run"
	for run in 1 2; do
		read -r va vb < <(names "$prefix") || fail "no names for WIRE_PREFIX '$prefix'"
		for n in "$va" "$vb"; do
			[ -n "$n" ] && [ ${#n} -le 15 ] || fail "veth name '$n' (WIRE_PREFIX '$prefix') is not 1 to 15 characters"
			case $n in *[!A-Za-z0-9_.-]*) fail "veth name '$n' has a character Linux refuses" ;; esac
			case $seen in *" $n "*) fail "veth name '$n' given twice" ;; esac
			seen="$seen$n "
		done
		log "run $run: $va $vb"
	done
	ok "WIRE_PREFIX '$prefix'"
done

if is_root && command -v ip >/dev/null; then
	check "a wire with WIRE_PREFIX '$long' is made"
	names "$long" up >"$T/out/up" 2>&1 || { show "wire_netns" "$T/out/up"; fail "wire_netns with WIRE_PREFIX '$long'"; }
	ok "made and removed: $(cat "$T/out/up")"
fi
