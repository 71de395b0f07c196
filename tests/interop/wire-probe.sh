# shellcheck shell=bash
# tests/interop/rxe --wire-probe sources this once the guest is up and the
# daemon serves roce0: tests/interop/wire-probe.c (built into the guest's
# initrd as /bin/wire-probe) with its server, the responder, on one end
# and its client, the requester, on the other: rxe0 to roce0, roce0 to
# rxe0, and each to itself (the guest's rxe0 over 127.0.0.1, ours in the
# namespace), so that each case's line on the wire can be set against the
# same case on one implementation.  Outputs in $top_builddir/interop/
# wire-probe/: NAME.requester and NAME.responder for each pairing NAME
# (rxe-rxe, ours-ours, ours-rxe, rxe-ours: requester-responder) and
# by-case.txt, the four requester files and then the four responder files
# side by side.  A difference is a question, not a failure: this reports
# and exits 0.

WP=$T/wire/bin/wire-probe
WOUT=$IMG/wire-probe
WPORT=18790
# every case waits out its quiet time, a few minutes under TCG (ns_debian's
# and wait_listen's limit)
# shellcheck disable=SC2034
TMO=600
mkdir -p "$WOUT" || fail "mkdir $WOUT"

# wire_pair NAME WHERE_REQ WHERE_RESP: the requester and the responder,
# each "guest" or "host"
wire_pair() {
	local name=$1 req=$2 resp=$3 spid
	WPORT=$((WPORT + 1))
	check "wire-probe: $name (requester $req, responder $resp)"
	if [ "$resp" = guest ] && [ "$req" = guest ]; then
		guest_sh "w$WPORT" 900 "/bin/wire-probe rxe0 server $WPORT >/tmp/ws$WPORT 2>&1 & sleep 1; /bin/wire-probe rxe0 client 127.0.0.1 $WPORT; wait; sleep 1; echo ===; cat /tmp/ws$WPORT"
		sed '/^===$/,$d' "$O/w$WPORT" >"$WOUT/$name.requester"
		sed '1,/^===$/d' "$O/w$WPORT" >"$WOUT/$name.responder"
	elif [ "$resp" = guest ]; then
		guest_req 0 run "w$WPORT" "exec /bin/wire-probe rxe0 server $WPORT"
		guest_req 40 listen "w$WPORT" "$WPORT 40"
		[ "$ANS" = listening ] || fail "the probe in the guest does not listen on $WPORT"
		ns_debian "$WP" roce0 client "$GUEST_IP" "$WPORT" >"$WOUT/$name.requester" 2>&1
		guest_req 900 wait "w$WPORT" 900
		cp "$O/w$WPORT" "$WOUT/$name.responder"
	else
		ns_debian "$WP" roce0 server "$WPORT" >"$WOUT/$name.responder" 2>&1 &
		spid=$!
		BG_PIDS+=("$spid")
		wait_listen "$WPORT" - "$spid" || fail "our probe does not listen on $WPORT"
		if [ "$req" = guest ]; then
			guest_sh "w$WPORT" 900 "/bin/wire-probe rxe0 client $HOST_IP $WPORT"
			cp "$O/w$WPORT" "$WOUT/$name.requester"
		else
			ns_debian "$WP" roce0 client "$HOST_IP" "$WPORT" >"$WOUT/$name.requester" 2>&1
		fi
		wait_exit "$spid" 60 || term_bg "$spid"
		BG_PIDS=()
	fi
	ok "$name: $(wc -l <"$WOUT/$name.requester") requester lines, $(wc -l <"$WOUT/$name.responder") responder lines"
}

wire_pair rxe-rxe guest guest
wire_pair ours-ours host host
wire_pair ours-rxe host guest
wire_pair rxe-ours guest host

# side by side: a case's line from each pairing, requester then responder
for side in requester responder; do
	for name in rxe-rxe ours-ours ours-rxe rxe-ours; do
		sed "s/^/$name	/" "$WOUT/$name.$side"
	done | sort -s -t '	' -k2,2 >"$WOUT/$side.all"
done
{
	echo "# requester-responder: each case's line (requester, then responder)"
	cat "$WOUT/requester.all" "$WOUT/responder.all"
} >"$WOUT/by-case.txt"
rm -f "$WOUT/requester.all" "$WOUT/responder.all"
guest_send poweroff
wait_exit "$QEMU_PID" 30 && QEMU_PID=""
daemon_alive "at the end"
ok "wire-probe: outputs in $WOUT ($(elapsed))"
exit 0
