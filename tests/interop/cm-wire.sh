# shellcheck shell=bash
# Sourced by tests/interop/rxe --cm-wire once the guest, the namespace and
# the daemon are up (it uses rxe's guest_req, guest_sh, ns_debian,
# wait_listen): every case of tests/interop/cm-wire.c four times, the
# server and the client each on the kernel's rdma_cm in the guest (k)
# or on ibverbsd (o):
#	kk  both in the guest, over its own address
#	ko  the kernel's server, our client: the MADs cross the wire
#	ok  our server, the kernel's client
#	oo  both ours, over the RoCE device's own address
# The outputs go to $IMG/cm-wire/{kk,ko,ok,oo}.out, and each of ko, ok
# and oo is diffed against kk into $IMG/cm-wire/kk-X.diff.  The
# differences are for reading: this exits 0 when every run ran.
# CM_WIRE_CASES: the case numbers to run (default all); CM_WIRE_MODES:
# the pairings (default "kk ko ok oo").

WIRE=$IMG/cm-wire
rm -rf "$WIRE"
mkdir -p "$WIRE" || fail "mkdir $WIRE"
WIRE_BIN=$T/wire/cm-wire
WIRE_PORT=19000

# wire_server SIDE N PORT PS: case N's server on SIDE (k, o), listening
# on PORT in PS ("-": it does not listen); WIRE_SRV its guest id or pid
wire_server() {
	local side=$1 n=$2 port=$3 ps=$4
	if [ "$side" = k ]; then
		WIRE_SRV=ws$n$port
		guest_req 0 run "$WIRE_SRV" "exec /cm-wire server $n $GUEST_IP $port"
		[ "$ps" = - ] || guest_req 40 listen "$WIRE_SRV" "$port 40 $ps"
	else
		TMO=200 ns_debian "$WIRE_BIN" server "$n" "$HOST_IP" "$port" >"$O/wire-s" 2>&1 &
		WIRE_SRV=$!
		BG_PIDS+=("$WIRE_SRV")
		[ "$ps" = - ] || wait_listen "$port" "$ps" "$WIRE_SRV" ||
			echo "  (did not listen on $port)" >>"$O/wire-s"
	fi
}

# wire_server_end SIDE: its output into $O/wire-s
wire_server_end() {
	if [ "$1" = k ]; then
		guest_req 200 wait "$WIRE_SRV" 200
		cp "$O/$WIRE_SRV" "$O/wire-s"
		[ "$ANS_ARG" = 0 ] || echo "  (exit $ANS_ARG)" >>"$O/wire-s"
	else
		if wait_exit "$WIRE_SRV" 200; then
			[ "$EXIT_STATUS" = 0 ] || echo "  (exit $EXIT_STATUS)" >>"$O/wire-s"
		else
			term_bg "$WIRE_SRV"
			wait_exit "$WIRE_SRV" 5
			echo "  (still running after 200 s)" >>"$O/wire-s"
		fi
		BG_PIDS=()
	fi
}

# wire_client SIDE N ADDR PORT: case N's client on SIDE, into $O/wire-c
wire_client() {
	local side=$1 n=$2 addr=$3 port=$4
	if [ "$side" = k ]; then
		guest_sh "wc$n$port" 200 "/cm-wire client $n $addr $port"
		cp "$O/wc$n$port" "$O/wire-c"
		[ "$ANS_ARG" = 0 ] || echo "  (exit $ANS_ARG)" >>"$O/wire-c"
	else
		TMO=200 ns_debian "$WIRE_BIN" client "$n" "$addr" "$port" >"$O/wire-c" 2>&1 ||
			echo "  (exit $?)" >>"$O/wire-c"
	fi
}

# wire_run MODE N NAME PS: one case, server on MODE's first letter
wire_run() {
	local mode=$1 n=$2 name=$3 ps=$4 addr
	WIRE_PORT=$((WIRE_PORT + 1))
	addr=$GUEST_IP
	[ "${mode:0:1}" = o ] && addr=$HOST_IP
	wire_server "${mode:0:1}" "$n" "$WIRE_PORT" "$ps"
	wire_client "${mode:1:1}" "$n" "$addr" "$WIRE_PORT"
	wire_server_end "${mode:0:1}"
	{
		echo "=== $n $name"
		echo "-- server"
		cat "$O/wire-s"
		echo "-- client"
		cat "$O/wire-c"
	} >>"$WIRE/$mode.out"
}

check "cm-wire: librdmacm's corner cases, server and client on either side"
"$WIRE_BIN" list >"$O/wire-list" || fail "cm-wire list"
while read -r n name ps; do
	[[ " ${CM_WIRE_CASES:-$n} " == *" $n "* ]] || continue
	for mode in ${CM_WIRE_MODES:-kk ko ok oo}; do
		log "cm-wire case $n $name, $mode ($(elapsed))"
		wire_run "$mode" "$n" "$name" "$ps"
	done
done <"$O/wire-list"
for mode in ko ok oo; do
	if [ ! -f "$WIRE/kk.out" ] || [ ! -f "$WIRE/$mode.out" ]; then continue; fi
	diff "$WIRE/kk.out" "$WIRE/$mode.out" >"$WIRE/kk-$mode.diff"
done
guest_send poweroff
wait_exit "$QEMU_PID" 30 && QEMU_PID=""
daemon_alive "at the end"
ok "cm-wire outputs and diffs in $WIRE ($(elapsed))"
exit 0
