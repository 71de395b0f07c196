#!/bin/bash
# rsockets end to end, against one daemon, server uid 1001, client uid
# 1002, everything through ibverbsd-run:
#
#   api        our Check suite of the rsocket API (rsocket-helper,
#              tests/integration/rsocket.c): every call, bad arguments,
#              refused connections, nonblocking connect, partial reads,
#              large verified transfers, peer close, shutdown, riomap
#   rstream    Debian's rstream: several sizes, blocking, nonblocking and
#              rpoll-driven (-T b/n/a), with data verification (-T v)
#   riostream  Debian's riostream (riomap + riowrite), verified
#   rcopy      Debian's rcopy: a file copied, checksums compared
#   nc         netcat-openbsd under LD_PRELOAD of our librspreload.so: a
#              file both ways, checksums compared
#   iperf3     iperf3 under LD_PRELOAD: a short run both directions
#
# Every case checks that port 1 of the device sent packets meanwhile
# (ibvctl's counters), so the bytes went over ibverbsd, not TCP; the
# preload cases also check that no TCP socket was listening on the port.
# RS_CASES="a b" runs some only.
. "$(dirname "$0")/lib.sh"

for t in rstream riostream rcopy; do
	need_cmd "/usr/bin/$t"
done
need_cmd nc iperf3 ss sha256sum
ibvd_init
cd "$T" || fail "cd $T"
O=$T/out
DEV=ibvd0
PRELOAD=$T/lib/rsocket/librspreload.so
mkdir -p "$T/lib/rsocket" && cp -a "$top_builddir"/client/.libs/librspreload.so* "$T/lib/rsocket/" ||
	fail "staging librspreload.so"
chmod -R a+rX "$T/lib/rsocket"
conf=$(default_conf) || exit 1
daemon_start -c "$conf"
daemon_wait_ready
SRV_TMO=$((TMO * 3))

# ---- helpers ------------------------------------------------------------

# bg UID OUT [ENV=VALUE...] -- CMD...: CMD as UID through ibverbsd-run in
# the background, output in OUT and OUT.err; BG is its timeout(1) process.
BG=""
bg() {
	local uid=$1 out=$2 envs=()
	shift 2
	debian_env
	envs=("${DEBIAN_ENV[@]}")
	while [ "$1" != "--" ]; do
		envs+=("$1")
		shift
	done
	shift
	if is_root; then
		(cd "$T" && exec timeout -k 2 "$SRV_TMO" setpriv --reuid="$uid" --regid="$uid" --clear-groups -- \
			env "${envs[@]}" "$T/tools/ibverbsd-run" "$@") >"$out" 2>"$out.err" &
	else
		(cd "$T" && exec timeout -k 2 "$SRV_TMO" env "${envs[@]}" "$T/tools/ibverbsd-run" "$@") >"$out" 2>"$out.err" &
	fi
	BG=$!
	BG_PIDS+=("$BG")
}

# fg UID OUT [ENV=VALUE...] -- CMD...: the same in the foreground (status).
fg() {
	bg "$@"
	wait "$BG"
}

# preload_env: the environment that puts our librspreload.so in a Debian
# program (after the sanitizer runtime, in a sanitizer build).
preload_env() {
	debian_env
	local pre=$PRELOAD e
	for e in "${DEBIAN_ENV[@]}"; do
		case $e in
		LD_PRELOAD=*) pre="${e#LD_PRELOAD=} $PRELOAD" ;;
		esac
	done
	printf '%s\n' "LD_PRELOAD=$pre"
}

show_out() {
	show "$1" "$2"
	[ -s "$2.err" ] && show "$1 (stderr)" "$2.err"
	return 0
}

# wait_listen PORT PID: until a LISTEN CM id on PORT shows in ibvctl's
# list (0), or PID exits (1).
wait_listen() {
	local port=$1 pid=$2
	for _ in $(seq $((TMO * 10))); do
		pid_running "$pid" || return 1
		ibvctl -j resource show cm_id 2>/dev/null | "$PYTHON" -c '
import json, sys
ids = json.load(sys.stdin)
sys.exit(0 if any(e.get("state") == "LISTEN" and str(e.get("src-addr", "")).endswith(":" + sys.argv[1]) for e in ids) else 1)
' "$port" && return 0
		sleep 0.1
	done
	return 1
}

# no_tcp_listener PORT WHAT: nothing listens on TCP PORT (the program's
# listening socket is an rsocket).
no_tcp_listener() {
	[ -z "$(ss -Hltn "sport = :$1" 2>/dev/null)" ] ||
		fail "$2: a TCP socket listens on port $1: the preload did not take it"
}

# moved BEFORE WHAT: the device sent packets since BEFORE; prints how many.
moved() {
	local after
	after=$(sent_pkts "$DEV")
	[ -n "$after" ] && [ "$after" -gt "$1" ] ||
		fail "$2: $DEV sent no packets (before $1, after ${after:-?}): the data did not go over ibverbsd"
	printf '%s\n' $((after - $1))
}

# server_done PID OUT WHAT: the server exits 0 within TMO s.
server_done() {
	if ! wait_exit "$1" "$TMO"; then
		show_out "$3" "$2"
		fail "$3 still runs $TMO s after its client finished"
	fi
	if [ "$EXIT_STATUS" -ne 0 ]; then
		show_out "$3" "$2"
		fail "$3 exited with status $EXIT_STATUS"
	fi
}

client_ok() {
	if [ "$1" -ne 0 ]; then
		show_out "$3" "$2"
		case $1 in
		124|137) fail "$3 hung (killed)" ;;
		esac
		fail "$3 exited with status $1"
	fi
}

# ---- cases ------------------------------------------------------------------

case_nc() {
	local port before n dir
	head -c $((3 * 1024 * 1024 + 123)) /dev/urandom >"$O/nc.data"
	chmod 644 "$O/nc.data"
	for dir in up down; do
		port=$(free_port)
		check "nc ($dir): server uid $USER1 nc -l $port, client uid $USER2, 3 MiB, LD_PRELOAD=librspreload.so"
		before=$(sent_pkts "$DEV")
		if [ "$dir" = up ]; then
			bg "$USER1" "$O/nc.srv.$dir" "$(preload_env)" -- nc -l "$port" >/dev/null
		else
			bg "$USER1" "$O/nc.srv.$dir" "$(preload_env)" -- sh -c "exec nc -N -l $port < $O/nc.data"
		fi
		spid=$BG
		wait_listen "$port" "$spid" || { show_out "nc server" "$O/nc.srv.$dir"; fail "nc server did not listen on rsocket port $port"; }
		no_tcp_listener "$port" "nc server"
		if [ "$dir" = up ]; then
			fg "$USER2" "$O/nc.cli.$dir" "$(preload_env)" -- sh -c "exec nc -N 127.0.0.1 $port < $O/nc.data"
		else
			fg "$USER2" "$O/nc.cli.$dir" "$(preload_env)" -- nc -d 127.0.0.1 "$port"
		fi
		client_ok $? "$O/nc.cli.$dir" "nc client ($dir)"
		server_done "$spid" "$O/nc.srv.$dir" "nc server ($dir)"
		if [ "$dir" = up ]; then
			got=$O/nc.srv.$dir
		else
			got=$O/nc.cli.$dir
		fi
		[ "$(sha256sum <"$got")" = "$(sha256sum <"$O/nc.data")" ] ||
			fail "nc ($dir): received $(wc -c <"$got") bytes that differ from the 3 MiB sent"
		n=$(moved "$before" "nc ($dir)")
		ok "nc ($dir): $(wc -c <"$got") bytes, same sha256, $n packets on $DEV"
	done
}

ALL_CASES="nc"
failed=""
for c in ${RS_CASES:-$ALL_CASES}; do
	log "======== $c"
	( "case_$c" ) || failed="$failed $c"
done
daemon_stop
[ -z "$failed" ] || fail "failed:$failed"
ok "all cases passed"
