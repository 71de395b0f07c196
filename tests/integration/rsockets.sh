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
#   calls      a plain TCP program of ours under LD_PRELOAD
#              (preload-calls-helper): the server empties its
#              environment (IBVERBSD_SOCKET too) as nginx does, its
#              listener an rsocket all the same, made
#              nonblocking by ioctl FIONBIO (as Python's setblocking),
#              the server waits with ppoll and
#              pselect, refuses a bad ppoll timeout, reads with read(2),
#              recvmmsg(2) and preadv2(2), lseek(2) fails with ESPIPE,
#              ioctl FIONREAD says what is there, sockatmark(3) 0;
#              the client, its socket S_ISSOCK to fstat(2), fstatat(2)
#              (AT_EMPTY_PATH) and statx(2), and TCP to
#              getsockopt SO_TYPE/SO_DOMAIN/SO_PROTOCOL, sends a
#              file's head with sendmmsg(2) and
#              pwritev2(2), the rest with sendfile(2) and sendfile64 (nginx's and
#              lighttpd's), corked with TCP_CORK (nginx's tcp_nopush);
#              the bytes compared
#   epoll      programs that wait with epoll(7) under LD_PRELOAD: an echo
#              pair of ours (preload-epoll-helper: listener, pipe and
#              connection in one instance, level- and edge-triggered,
#              EEXIST/ENOENT, a closed connection forgotten), and Python
#              asyncio's echo (preload-asyncio.py); the bytes compared
#   fork       a forking server of ours under LD_PRELOAD
#              (preload-fork-helper): the child's write and read on the
#              inherited connection fail with EBADF at once, its close of
#              it and of the listener leaves the parent's connection and
#              the request waiting on the listener to the parent
#   stdio      a pair talking through fdopen(3)'d stdio streams under
#              LD_PRELOAD (preload-stdio-helper): fgets, fprintf, fputs
#              and fflush reach the rsocket, fileno(3) says its fd, fclose
#              closes it (read then fails with EBADF, and a file opened
#              on its number reads as that file)
#   backlog    a burst of 16 connections to a Python server under
#              LD_PRELOAD whose backlog is 1 (preload-backlog.py): none is
#              refused, as TCP refuses none for a full backlog
#   orphan     a Python server under LD_PRELOAD that accepts whenever
#              select(2) says its listener is ready (preload-orphan.py),
#              on a daemon of its own that is then killed: one accept
#              fails, then the listener is quiet (no spin on accept's
#              error), a nonblocking accept says EAGAIN
#   fallback   nc under LD_PRELOAD with no daemon: ordinary TCP sockets
#   keepalive  an idle connected pair with SO_KEEPALIVE and TCP_KEEPIDLE 1
#              (rsocket-helper keepalive_on) sends keepalives each second
#              each way for 8 s, though neither end makes a call (more
#              than its 4 control slots hold); without (keepalive_off)
#              nothing; and a Python pair under LD_PRELOAD
#              (preload-keepalive.py) with them on, idle 3.5 s, then
#              talking (the keepalive thread once hung the process);
#              and a Python server so under LD_PRELOAD reads an end of
#              file, not a reset, from a client that exits without
#              closing its socket
#   udpong     Debian's udpong (datagram rsockets: a UD QP, UDP until the
#              peers know each other's QP numbers): bandwidth runs of 64,
#              1024 and 1500 bytes, nonblocking, blocking and rpoll-driven
#   unresolved a datagram rsocket hears from a source whose address does
#              not resolve (10.99.0.1, a raw datagram over loopback): its
#              calls go on at once (rsocket-helper dgram_unresolvable_source)
#
#   quota      uid 1001 with a qp limit of 2 (rsocket-helper
#              connect_over_qp_limit): an rconnect whose QP the daemon
#              refuses fails with EAGAIN, blocking or not (not
#              EINPROGRESS, nor SO_ERROR 0), and the uid holds no QP after
#
#   rings      rstream and riostream on the direct transport's rings
#              (common/transit.h), which carry rsockets' WRITEs with
#              immediate: every byte verified, and the engine runs few
#              of their work requests
#
# api and rings run on the shipped defaults.  The other cases check that
# port 1 of the device sent packets meanwhile (ibvctl's counters), so the
# bytes went over ibverbsd, not TCP: what the rings carry no engine
# counts, so those run with the rings off ("engine": { "direct": false
# }).  The preload cases also check that no TCP socket was listening on
# the port.  RS_CASES="a b" runs some only.
. "$(dirname "$0")/lib.sh"

for t in rstream riostream rcopy udpong; do
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
conf_engine=$T/engine.conf
"$PYTHON" - "$conf" "$conf_engine" <<-'EOF' || fail "cannot write $conf_engine"
import json, sys
with open(sys.argv[1]) as f:
    cfg = json.load(f)
cfg.setdefault("engine", {})["direct"] = False
with open(sys.argv[2], "w") as f:
    json.dump(cfg, f, indent=2)
EOF
chmod 644 "$conf_engine"
SRV_TMO=$((TMO * 3))
conf_quota=$(conf_edit "$T/quota.conf" "cfg['limits'] = {'uid': {'$USER1': {'qp': 2}}}") || exit 1

# daemon_mode rings|engine|quota: a daemon on the defaults, with the rings
# off, or with uid $USER1's qp limit at 2, started now unless it runs
# already.
MODE=""
daemon_mode() {
	[ "$MODE" = "$1" ] && return 0
	[ -z "$MODE" ] || daemon_stop
	case $1 in
	rings) daemon_start -c "$conf" ;;
	quota) daemon_start -c "$conf_quota" ;;
	*) daemon_start -c "$conf_engine" ;;
	esac
	daemon_wait_ready
	MODE=$1
}

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
# Its fail ends only the command substitution: callers add "|| exit 1".
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
		n=$(moved "$before" "nc ($dir)") || exit 1
		ok "nc ($dir): $(wc -c <"$got") bytes, same sha256, $n packets on $DEV"
	done
}

# pair NAME PROG SRVARGS -- CLIARGS: PROG's server as uid 1001 and client
# as uid 1002 (-s 127.0.0.1) on a fresh port; both must exit 0 and the
# device must have sent packets.
pair() {
	local name=$1 prog=$2 port before n spid rc srv=() cli=()
	shift 2
	while [ "$1" != "--" ]; do srv+=("$1"); shift; done
	shift
	cli=("$@")
	port=$(free_port)
	check "$name: $prog ${srv[*]} (uid $USER1) / $prog -s 127.0.0.1 ${cli[*]} (uid $USER2)"
	before=$(sent_pkts "$DEV")
	bg "$USER1" "$O/$name.srv" -- "/usr/bin/$prog" -p "$port" "${srv[@]}"
	spid=$BG
	wait_listen "$port" "$spid" || { show_out "$name server" "$O/$name.srv"; fail "$name: the server did not listen"; }
	fg "$USER2" "$O/$name.cli" -- "/usr/bin/$prog" -s 127.0.0.1 -p "$port" "${cli[@]}"
	rc=$?
	client_ok "$rc" "$O/$name.cli" "$name client"
	server_done "$spid" "$O/$name.srv" "$name server"
	if [ "$MODE" = rings ]; then
		ok "$name: $(tail -n 1 "$O/$name.cli" | tr -s ' ')"
		return 0
	fi
	n=$(moved "$before" "$name") || exit 1
	ok "$name: $(tail -n 1 "$O/$name.cli" | tr -s ' '), $n packets on $DEV"
}

# Debian's rstream: sizes from 16 bytes to 1 MB; blocking (b), nonblocking
# (n) and rpoll-driven (a) calls; -T v verifies every byte.  (Not below 16:
# rstream's 16-byte sync message reads past a smaller buffer, which ASan
# reports in a sanitizer build; rsocket-helper sends single bytes.)
case_rstream() {
	pair rs-16-b rstream -S 16 -C 1000 -T b -T v -- -S 16 -C 1000 -T b -T v
	pair rs-100-n rstream -S 100 -C 500 -T n -T v -- -S 100 -C 500 -T n -T v
	pair rs-4k-a rstream -S 4096 -C 200 -T a -T v -- -S 4096 -C 200 -T a -T v
	pair rs-64k-b rstream -S 65536 -C 100 -T b -T v -- -S 65536 -C 100 -T b -T v
	pair rs-1m-n rstream -S 1000000 -C 10 -T n -T v -- -S 1000000 -C 10 -T n -T v
	pair rs-lat-a rstream -S 64 -C 1 -I 300 -T a -T v -- -S 64 -C 1 -I 300 -T a -T v
	pair rs-buf rstream -S 100000 -C 20 -B 16384 -T b -T v -- -S 100000 -C 20 -B 16384 -T b -T v
}

# Debian's riostream: riomap on each side, riowrite into it.
case_riostream() {
	pair rio-4k-b riostream -S 4096 -C 100 -T b -T v -- -S 4096 -C 100 -T b -T v
	pair rio-1m-n riostream -S 1000000 -C 10 -T n -T v -- -S 1000000 -C 10 -T n -T v
	pair rio-lat-a riostream -S 100 -C 1 -I 200 -T a -T v -- -S 100 -C 1 -I 200 -T a -T v
}

# Debian's rcopy: a 5 MB file to a server that writes it out.
case_rcopy() {
	local port before n spid
	port=$(free_port)
	head -c $((5 * 1000 * 1000 + 7)) /dev/urandom >"$O/rcopy.data"
	chmod 644 "$O/rcopy.data"
	check "rcopy: server uid $USER1 -p $port, client uid $USER2 copies 5 MB"
	before=$(sent_pkts "$DEV")
	bg "$USER1" "$O/rcopy.srv" -- /usr/bin/rcopy -p "$port"
	spid=$BG
	wait_listen "$port" "$spid" || { show_out "rcopy server" "$O/rcopy.srv"; fail "rcopy: the server did not listen"; }
	fg "$USER2" "$O/rcopy.cli" -- /usr/bin/rcopy "$O/rcopy.data" "127.0.0.1:$O/rcopy.dst" -p "$port"
	client_ok $? "$O/rcopy.cli" "rcopy client"
	kill -TERM "$spid" 2>/dev/null
	wait_exit "$spid" "$TMO" || fail "rcopy server did not stop on SIGTERM"
	[ -f "$O/rcopy.dst" ] || { show_out "rcopy server" "$O/rcopy.srv"; fail "rcopy: no $O/rcopy.dst"; }
	[ "$(sha256sum <"$O/rcopy.dst")" = "$(sha256sum <"$O/rcopy.data")" ] ||
		fail "rcopy: the copy ($(wc -c <"$O/rcopy.dst") bytes) differs from the 5 MB source"
	n=$(moved "$before" rcopy) || exit 1
	ok "rcopy: $(wc -c <"$O/rcopy.dst") bytes, same sha256, $n packets on $DEV"
}

# preload_listen WHAT OUT PORT CMD...: CMD as uid $USER1 under the
# preload library, its output in OUT, until it listens on rsocket PORT
# (and not on TCP); its pid in BG.
preload_listen() {
	local what=$1 out=$2 port=$3
	shift 3
	bg "$USER1" "$out" "$(preload_env)" -- "$@"
	wait_listen "$port" "$BG" || { show_out "$what" "$out"; fail "$what did not listen on rsocket port $port"; }
	no_tcp_listener "$port" "$what"
}

# ppoll, pselect, recvmmsg, sendmmsg, preadv2, pwritev2, lseek, fstat and sendfile under LD_PRELOAD (preload-calls-helper).
case_calls() {
	local port before n spid prog=$T/bin/preload-calls-helper
	[ -x "$prog" ] || fail "tests/integration/preload-calls-helper not built"
	head -c $((2 * 1024 * 1024 + 77)) /dev/urandom >"$O/calls.data"
	chmod 644 "$O/calls.data"
	port=$(free_port)
	check "calls: ppoll, pselect, recvmmsg, preadv2 (server uid $USER1), sendmmsg, pwritev2, sendfile of 2 MiB (client uid $USER2), LD_PRELOAD=librspreload.so"
	before=$(sent_pkts "$DEV")
	preload_listen "preload-calls server" "$O/calls.srv" "$port" "$prog" server "$port"
	spid=$BG
	fg "$USER2" "$O/calls.cli" "$(preload_env)" -- "$prog" client "$port" "$O/calls.data"
	client_ok $? "$O/calls.cli" "preload-calls client"
	server_done "$spid" "$O/calls.srv" "preload-calls server"
	grep -q "^sent $(wc -c <"$O/calls.data") fnv " "$O/calls.cli" ||
		{ show_out "preload-calls client" "$O/calls.cli"; fail "calls: the client did not send the whole file"; }
	[ "$(sed 's/^sent/received/' "$O/calls.cli")" = "$(cat "$O/calls.srv")" ] ||
		{ show_out "preload-calls server" "$O/calls.srv"; fail "calls: the server received other bytes than were sent"; }
	n=$(moved "$before" calls) || exit 1
	ok "calls: $(cat "$O/calls.srv"), $n packets on $DEV"
}

# epoll(7) under LD_PRELOAD: our echo pair, then asyncio's.
case_epoll() {
	local before n bytes=$((1024 * 1024 + 333))
	check "epoll: echo server uid $USER1 and client uid $USER2 waiting in epoll_wait (LT, ET, a pipe), 1 MiB, LD_PRELOAD=librspreload.so"
	before=$(sent_pkts "$DEV")
	preload_pair epoll "echoed $bytes" "" "$bytes" "$T/bin/preload-epoll-helper"
	n=$(moved "$before" epoll) || exit 1
	ok "epoll: $(cat "$O/epoll.cli"), $n packets on $DEV"

	check "epoll: Python asyncio echo, server uid $USER1, client uid $USER2, 1 MiB, LD_PRELOAD=librspreload.so"
	before=$(sent_pkts "$DEV")
	preload_pair asyncio "echoed $bytes" "" "$bytes" "$PYTHON" "$T/bin/preload-asyncio.py"
	n=$(moved "$before" asyncio) || exit 1
	ok "epoll: asyncio $(cat "$O/asyncio.cli"), $n packets on $DEV"
}

# preload_pair NAME WANT SERVER_ARGS CLIENT_ARGS CMD...: "CMD server PORT
# SERVER_ARGS" as uid $USER1 and "CMD client PORT CLIENT_ARGS" as uid
# $USER2, both under LD_PRELOAD on a free port (each ARGS word-split, ""
# for none); the server must print the line WANT.
preload_pair() {
	local name=$1 want=$2 server_words=$3 client_words=$4 port spid rc
	shift 4
	case $1 in
	*/*) [ -x "$1" ] || fail "$1 not built" ;;
	esac
	port=$(free_port)
	# shellcheck disable=SC2086 # the ARGS are words
	preload_listen "$name server" "$O/$name.srv" "$port" "$@" server "$port" $server_words
	spid=$BG
	# shellcheck disable=SC2086
	fg "$USER2" "$O/$name.cli" "$(preload_env)" -- "$@" client "$port" $client_words
	rc=$?
	[ "$rc" -eq 0 ] || show_out "$name server" "$O/$name.srv"
	client_ok "$rc" "$O/$name.cli" "$name client"
	server_done "$spid" "$O/$name.srv" "$name server"
	grep -qx "$want" "$O/$name.srv" ||
		{ show_out "$name server" "$O/$name.srv"; fail "$name: the server did not print '$want'"; }
}

# A forking server under LD_PRELOAD (preload-fork-helper): the child's
# calls on the inherited sockets fail at once, its close takes neither
# the parent's connection nor the request waiting on its listener.
case_fork() {
	check "fork: server uid $USER1 forks a child that closes its sockets, client uid $USER2, LD_PRELOAD=librspreload.so"
	preload_pair fork "server ok" "" "" "$T/bin/preload-fork-helper"
	ok "fork: the child's calls failed with EBADF, the parent went on"
}

# stdio streams on rsockets: fdopen, fgets, fprintf, fclose.
case_stdio() {
	check "stdio: server uid $USER1 and client uid $USER2 talk through fdopen'd streams, LD_PRELOAD=librspreload.so"
	preload_pair stdio "server ok" "" "" "$T/bin/preload-stdio-helper"
	ok "stdio: fgets, fprintf and fclose on rsockets' streams, the fd closed with its stream"
}

# A burst past a small backlog: each connection waits, none is refused.
case_backlog() {
	local n=16
	check "backlog: $n connections at once (uid $USER2) to a server with a backlog of 1 (uid $USER1), LD_PRELOAD=librspreload.so"
	preload_pair backlog "served $n" "$n" "$n" "$PYTHON" "$T/bin/preload-backlog.py"
	ok "backlog: $(cat "$O/backlog.cli"), none refused"
}

# A listener whose daemon dies: told once, then quiet.  The daemon is one
# of this case's own (on $T/run/orphan.sock), so that the others' goes on.
case_orphan() {
	local port spid dpid sock=$T/run/orphan.sock conf2=$T/orphan.conf
	"$PYTHON" - "$conf_engine" "$conf2" "$sock" <<-'EOF' || fail "cannot write $conf2"
	import json, sys
	with open(sys.argv[1]) as f:
	    cfg = json.load(f)
	cfg["socket"]["path"] = sys.argv[3]
	with open(sys.argv[2], "w") as f:
	    json.dump(cfg, f, indent=2)
	EOF
	chmod 644 "$conf2"
	"$IBVERBSD" -f --user "$DAEMON_USER" -c "$conf2" >"$T/daemon-orphan.log" 2>&1 &
	dpid=$!
	BG_PIDS+=("$dpid")
	daemon_wait_ready "$sock" "$dpid"
	port=$(free_port)
	check "orphan: a select-driven server uid $USER1 on rsocket port $port, its daemon killed, LD_PRELOAD=librspreload.so"
	bg "$USER1" "$O/orphan.srv" "$(preload_env)" IBVERBSD_SOCKET="$sock" -- \
		"$PYTHON" "$T/bin/preload-orphan.py" "$port"
	spid=$BG
	for _ in $(seq $((TMO * 10))); do
		grep -qx listening "$O/orphan.srv" 2>/dev/null && break
		pid_running "$spid" || break
		sleep 0.1
	done
	grep -qx listening "$O/orphan.srv" ||
		{ show_out "orphan server" "$O/orphan.srv"; fail "orphan: the server did not listen"; }
	no_tcp_listener "$port" "orphan server"
	kill -KILL "$dpid"
	wait "$dpid" 2>/dev/null
	server_done "$spid" "$O/orphan.srv" "orphan server"
	ok "$(tail -n 1 "$O/orphan.srv")"
}

# iperf3 under LD_PRELOAD: its control and data connections are rsockets.
case_iperf3() {
	local port before n spid dir rc
	for dir in "" -R; do
		port=$(free_port)
		check "iperf3 ${dir:-(client sends)}: server uid $USER1 -s -1 -p $port, client uid $USER2 -t 2, LD_PRELOAD=librspreload.so"
		before=$(sent_pkts "$DEV")
		bg "$USER1" "$O/iperf3.srv$dir" "$(preload_env)" -- iperf3 -s -1 -p "$port"
		spid=$BG
		wait_listen "$port" "$spid" || { show_out "iperf3 server" "$O/iperf3.srv$dir"; fail "iperf3 server did not listen on rsocket port $port"; }
		no_tcp_listener "$port" "iperf3 server"
		fg "$USER2" "$O/iperf3.cli$dir" "$(preload_env)" -- iperf3 -c 127.0.0.1 -p "$port" -t 2 $dir
		rc=$?
		client_ok "$rc" "$O/iperf3.cli$dir" "iperf3 client $dir"
		server_done "$spid" "$O/iperf3.srv$dir" "iperf3 server $dir"
		grep -q 'receiver$' "$O/iperf3.cli$dir" || { show_out "iperf3 client" "$O/iperf3.cli$dir"; fail "iperf3 $dir: no receiver summary"; }
		n=$(moved "$before" "iperf3 $dir") || exit 1
		ok "iperf3 ${dir:-(client sends)}: $(grep 'receiver$' "$O/iperf3.cli$dir" | tr -s ' '), $n packets on $DEV"
	done
}

# Without a daemon the preloaded program still works, on the kernel's TCP.
case_fallback() {
	local port before after spid
	port=$(free_port)
	head -c 100000 /dev/urandom >"$O/fb.data"
	chmod 644 "$O/fb.data"
	check "nc under LD_PRELOAD with no daemon at IBVERBSD_SOCKET: ordinary TCP sockets"
	before=$(sent_pkts "$DEV")
	bg "$USER1" "$O/fb.srv" "$(preload_env)" IBVERBSD_SOCKET="$T/run/nobody.sock" -- nc -l "$port"
	spid=$BG
	wait_tcp_listen "$port" "$spid" || { show_out "nc server" "$O/fb.srv"; fail "no TCP listener on $port"; }
	fg "$USER2" "$O/fb.cli" "$(preload_env)" IBVERBSD_SOCKET="$T/run/nobody.sock" -- \
		sh -c "exec nc -N 127.0.0.1 $port < $O/fb.data"
	client_ok $? "$O/fb.cli" "nc client (no daemon)"
	server_done "$spid" "$O/fb.srv" "nc server (no daemon)"
	cmp -s "$O/fb.srv" "$O/fb.data" || fail "nc over TCP: the data differs"
	after=$(sent_pkts "$DEV")
	[ "$after" = "$before" ] || fail "the device sent packets ($before -> $after) for a TCP transfer"
	ok "no daemon: nc moved $(wc -c <"$O/fb.srv") bytes over TCP, $DEV untouched"
}

# Debian's udpong: the server (uid $USER1) bound to 127.0.0.1 runs until
# killed; the client (uid $USER2) logs in and runs one custom bandwidth
# test per run: it sends -C datagrams, then asks the server how many
# arrived (a datagram may be dropped; none arriving fails).  Not its echo
# tests: udpong resends after 1 ms and reads the reply into the buffer it
# resends, so a single late echo on a loaded host makes it loop for ever.
case_udpong() {
	local port spid before name args n v
	port=$(free_port)
	before=$(sent_pkts "$DEV")
	bg "$USER1" "$O/udp.srv" -- /usr/bin/udpong -b 127.0.0.1 -p "$port"
	spid=$BG
	for _ in $(seq $((TMO * 10))); do
		[ -n "$(ss -Hlun "sport = :$port" 2>/dev/null)" ] && break
		pid_running "$spid" || break
		sleep 0.1
	done
	[ -n "$(ss -Hlun "sport = :$port" 2>/dev/null)" ] ||
		{ show_out "udpong server" "$O/udp.srv"; fail "udpong: the server did not bind UDP port $port"; }
	for v in "1k-n|-S 1024 -C 5000" "64-b|-S 64 -C 5000 -T blocking" \
		 "1500-a|-S 1500 -C 2000 -T async"; do
		name=${v%%|*}
		args=${v#*|}
		check "udpong $name: udpong -s 127.0.0.1 $args (uid $USER2) to udpong -b 127.0.0.1 (uid $USER1)"
		# shellcheck disable=SC2086 # the options are words
		fg "$USER2" "$O/udp.$name" -- /usr/bin/udpong -s 127.0.0.1 -p "$port" $args
		client_ok $? "$O/udp.$name" "udpong $name client"
		expect_grep '^custom +[0-9.]+[kmg]? +[0-9.]*[1-9][0-9.]*[kmg]? ' "$O/udp.$name" "udpong $name: datagrams arrived"
		ok "udpong $name: $(grep '^custom' "$O/udp.$name" | tr -s ' ')"
	done
	kill -TERM "$spid" 2>/dev/null
	n=$(moved "$before" udpong) || exit 1
	ok "udpong: $n packets on $DEV"
}

# ka_packets MODE: KA_N, the device's packets while rsocket-helper
# keepalive_MODE holds its pair idle (between its files ready and done);
# it waits for each count (files counted and counted2).
KA_N=0
ka_packets() {
	local d=$O/ka-$1 hpid before after
	mkdir -p "$d" && chmod 1777 "$d" || fail "mkdir $d"
	run_as "$USER1" env IBVERBSD_SOCKET="$SOCK" KA_DIR="$d" VT_TMUL="$TMUL" \
		"$T/tools/ibverbsd-run" "$T/bin/rsocket-helper" "keepalive_$1" >"$O/ka-$1.out" 2>&1 &
	hpid=$!
	BG_PIDS+=("$hpid")
	for _ in $(seq $((TMO * 10))); do [ -e "$d/ready" ] && break; sleep 0.1; done
	[ -e "$d/ready" ] || { show "keepalive_$1" "$O/ka-$1.out"; fail "keepalive_$1 never got ready"; }
	before=$(sent_pkts "$DEV")
	echo 1 >"$d/counted"
	for _ in $(seq $((TMO * 10))); do [ -e "$d/done" ] && break; sleep 0.1; done
	after=$(sent_pkts "$DEV")
	echo 1 >"$d/counted2"
	wait_exit "$hpid" "$TMO" && [ "$EXIT_STATUS" -eq 0 ] ||
		{ show "keepalive_$1" "$O/ka-$1.out"; fail "keepalive_$1 failed"; }
	KA_N=$((after - before))
}

case_keepalive() {
	local on off
	check "keepalives: an idle connection for 8.2 s, TCP_KEEPIDLE 1, with and without SO_KEEPALIVE"
	ka_packets off
	off=$KA_N
	ka_packets on
	on=$KA_N
	log "packets while idle: $off without keepalives, $on with"
	[ "$off" -le 2 ] || fail "an idle connection without keepalives sent $off packets"
	# about 16; 8 at most if they stop once the 4 control slots of each
	# end are used up
	[ "$on" -ge $((off + 10)) ] || fail "keepalives every second each way sent only $on packets in 8.2 s"
	ok "keepalives: $on packets in 8.2 s idle (without: $off)"

	local port spid rc
	port=$(free_port)
	check "keepalives under LD_PRELOAD: a Python pair idle 3.5 s with SO_KEEPALIVE, TCP_KEEPIDLE 1, then a byte each way"
	preload_listen "keepalive server" "$O/ka-preload.srv" "$port" \
		"$PYTHON" "$T/bin/preload-keepalive.py" server "$port"
	spid=$BG
	fg "$USER2" "$O/ka-preload.cli" "$(preload_env)" -- "$PYTHON" "$T/bin/preload-keepalive.py" client "$port"
	rc=$?
	[ "$rc" -eq 0 ] || show_out "keepalive server" "$O/ka-preload.srv"
	client_ok "$rc" "$O/ka-preload.cli" "keepalive client"
	server_done "$spid" "$O/ka-preload.srv" "keepalive server"
	ok "keepalives under LD_PRELOAD: $(cat "$O/ka-preload.cli"), $(cat "$O/ka-preload.srv")"

	# The keepalive thread once took completions alone: its keepalive
	# went to the peer the CM had already said DISCONNECTED, failed, and
	# the end of file read as ECONNRESET.  Then, about 1 run in 3: the
	# daemon broke the server's QP before it said DISCONNECTED, or the
	# wait's spin took the flush without the CM's news (ECONNRESET,
	# ETIMEDOUT); or the client's byte, rung for, was never run (no byte).
	port=$(free_port)
	check "keepalives under LD_PRELOAD: a client that exits without closing is an end of file to its idle server, not a reset"
	preload_listen "quit server" "$O/ka-quit.srv" "$port" \
		"$PYTHON" "$T/bin/preload-keepalive.py" quit-server "$port"
	spid=$BG
	fg "$USER2" "$O/ka-quit.cli" "$(preload_env)" -- "$PYTHON" "$T/bin/preload-keepalive.py" quit-client "$port"
	rc=$?
	[ "$rc" -eq 0 ] || show_out "quit server" "$O/ka-quit.srv"
	client_ok "$rc" "$O/ka-quit.cli" "quit client"
	server_done "$spid" "$O/ka-quit.srv" "quit server"
	ok "keepalives under LD_PRELOAD: $(cat "$O/ka-quit.srv")"
}

# A raw UDP datagram to 127.0.0.1:PORT from 10.99.0.1:40000 (no route
# here: its resolution fails only after its 2 s timeout), speaking the
# datagram rsockets' UDP header (tag, IPv4, DATA, QP 0x123) with "spoof".
spoof_datagram() {
	"$PYTHON" - "$1" <<-'EOF'
	import socket, struct, sys
	def csum(b):
	    if len(b) % 2:
	        b += b'\0'
	    s = sum(struct.unpack('!%dH' % (len(b) // 2), b))
	    s = (s >> 16) + (s & 0xffff)
	    return ~(s + (s >> 16)) & 0xffff
	src, dst, port = '10.99.0.1', '127.0.0.1', int(sys.argv[1])
	data = struct.pack('!IBBBBI4s', 0x55555555, 4, 0, 16, 0, 0x123,
	                   socket.inet_aton(src)) + b'spoof'
	udp = struct.pack('!HHHH', 40000, port, 8 + len(data), 0) + data
	pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack('!BBH', 0, 17, len(udp))
	udp = udp[:6] + struct.pack('!H', csum(pseudo + udp) or 0xffff) + udp[8:]
	ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
	                 socket.inet_aton(src), socket.inet_aton(dst))
	ip = ip[:10] + struct.pack('!H', csum(ip)) + ip[12:]
	s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
	s.sendto(ip + udp, (dst, 0))
	EOF
}

case_unresolved() {
	local d=$O/unresolved hpid port
	check "a datagram from an address that does not resolve holds no call"
	mkdir -p "$d" && chmod 1777 "$d" || fail "mkdir $d"
	run_as "$USER1" env IBVERBSD_SOCKET="$SOCK" DG_DIR="$d" VT_TMUL="$TMUL" \
		"$T/tools/ibverbsd-run" "$T/bin/rsocket-helper" dgram_unresolvable_source \
		>"$O/unresolved.out" 2>&1 &
	hpid=$!
	BG_PIDS+=("$hpid")
	for _ in $(seq $((TMO * 10))); do [ -s "$d/port" ] && break; sleep 0.1; done
	port=$(cat "$d/port" 2>/dev/null)
	[ -n "$port" ] || { show "rsocket-helper" "$O/unresolved.out"; fail "no port from rsocket-helper"; }
	spoof_datagram "$port" || fail "cannot send the spoofed datagram"
	echo 1 >"$d/sent"
	wait_exit "$hpid" "$TMO" && [ "$EXIT_STATUS" -eq 0 ] ||
		{ show "rsocket-helper" "$O/unresolved.out"; fail "dgram_unresolvable_source failed"; }
	ok "$(grep -E '^[0-9]+%: Checks' "$O/unresolved.out")"
}

case_api() {
	run_check_suite rsocket "$USER1"
}

# The rings carry the data: the engine runs only what they do not take
# (about 400 WQEs here, a connection's first messages among them, before
# its rings are mapped), where the same runs on the engine send about
# 12,000 packets.
case_rings() {
	local w0 w1
	w0=$(engine_count wqes)
	pair ring-16-b rstream -S 16 -C 1000 -T b -T v -- -S 16 -C 1000 -T b -T v
	pair ring-100-n rstream -S 100 -C 500 -T n -T v -- -S 100 -C 500 -T n -T v
	pair ring-64k-a rstream -S 65536 -C 100 -T a -T v -- -S 65536 -C 100 -T a -T v
	pair ring-1m-b rstream -S 1000000 -C 10 -T b -T v -- -S 1000000 -C 10 -T b -T v
	pair ring-rio riostream -S 4096 -C 100 -T b -T v -- -S 4096 -C 100 -T b -T v
	w1=$(engine_count wqes)
	check "the rings carried them: the engine ran fewer than 1,200 WQEs"
	[ $((w1 - w0)) -lt 1200 ] ||
		fail "the engine ran $((w1 - w0)) WQEs of rsockets on the rings"
	ok "the engine ran $((w1 - w0)) WQEs"
}

case_quota() {
	local out=$O/quota.out
	check "rconnect over uid $USER1's qp limit: EAGAIN, nothing kept"
	run_ours "$USER1" "$T/bin/rsocket-helper" connect_over_qp_limit >"$out" 2>&1 ||
		{ show "rsocket-helper" "$out"; fail "connect_over_qp_limit failed"; }
	ibvctl limit show current >"$O/quota.usage" 2>&1 ||
		{ show "limit show current" "$O/quota.usage"; fail "ibvctl limit show current"; }
	if grep -E "^uid $USER1 dev all .* qp [1-9]" "$O/quota.usage"; then
		fail "uid $USER1 still holds QPs"
	fi
	ok "$(grep -E '^[0-9]+%: Checks' "$out")"
}

ALL_CASES="api quota rings rstream riostream rcopy nc iperf3 calls epoll fork stdio backlog orphan fallback udpong unresolved keepalive"
failed=""
for c in ${RS_CASES:-$ALL_CASES}; do
	log "======== $c"
	case $c in
	api|rings|unresolved) daemon_mode rings ;;
	quota) daemon_mode quota ;;
	*) daemon_mode engine ;;
	esac
	( "case_$c" ) || failed="$failed $c"
done
daemon_stop
[ -z "$failed" ] || fail "failed:$failed"
ok "all cases passed"
