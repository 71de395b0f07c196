# shellcheck shell=bash
# Shared helpers for the integration tests: sourced by every
# tests/integration/*.sh (and by scripts/demo), never run on its own.
#
# A test does:
#	. "$(dirname "$0")/lib.sh"
#	ibvd_init                      # staging dir, traps, prerequisites
#	daemon_start -c "$(default_conf)"; daemon_wait_ready
#	out=$(run_debian 1001 /usr/bin/ibv_devinfo) || fail "..."
#	daemon_stop
#
# Environment (exported by `make check`, see AM_TESTS_ENVIRONMENT):
#	top_srcdir, top_builddir   source and build trees
#	SANITIZERS                 non-empty in an --enable-sanitizers build
#	IBVD_KEEP_TMP=1            keep the staging directory for a post-mortem
#
# Exit codes: 0 pass, 1 fail, 77 skip (only for a missing prerequisite).

set -u

: "${top_srcdir:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
: "${SANITIZERS:=}"
export top_srcdir top_builddir SANITIZERS

IBVD_TEST=$(basename "$0" .sh)
IBVERBSD="$top_builddir/daemon/ibverbsd"
# Unprivileged client uids; they need no passwd entries.
export USER1=1001
export USER2=1002
# ThreadSanitizer: what it cannot see ordered (tsan.supp says why), for
# every instrumented process a test starts; the caller's options stay.
case $SANITIZERS in
*=thread*)
	TSAN_OPTIONS="suppressions=$top_srcdir/tests/integration/tsan.supp${TSAN_OPTIONS:+ $TSAN_OPTIONS}"
	export TSAN_OPTIONS ;;
esac
# Sanitizer builds are several times slower: scale every timeout.
TMUL=1
[ -n "$SANITIZERS" ] && TMUL=3
# Upper bound for one client command.
TMO=$((20 * TMUL))

T=""			# the staging directory, world-readable
SOCK=""			# the current test daemon's socket
DAEMON_PID=""
DAEMON_LOG=""
BG_PIDS=()		# other background processes to reap on exit
IBVD_NLOG=0

log()  { printf '%s: %s\n' "$IBVD_TEST" "$*"; }
check() { printf '%s: checking: %s\n' "$IBVD_TEST" "$*"; }
ok()   { printf '%s: ok: %s\n' "$IBVD_TEST" "$*"; }
fail() { printf '%s: FAIL: %s\n' "$IBVD_TEST" "$*" >&2; exit 1; }
# fail_all: fail from inside a command substitution too, where fail
# would end only the subshell: the test's own shell is told (SIGTERM).
fail_all() { printf '%s: FAIL: %s\n' "$IBVD_TEST" "$*" >&2; kill -TERM "$$"; exit 1; }
skip() { printf '%s: SKIP: %s\n' "$IBVD_TEST" "$*" >&2; exit 77; }

# Show a file (command output) in the log, indented, with a title.
show() {
	printf '%s: --- %s\n' "$IBVD_TEST" "$1"
	sed 's/^/    | /' "$2" 2>/dev/null
}

need_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || skip "'$c' is not installed (scripts/deps installs it)"
	done
}

is_root() { [ "$(id -u)" -eq 0 ]; }

# ifname NAME: NAME as a network interface's name, which Linux limits to
# 15 characters (IFNAMSIZ less its NUL) of no '/', ':' nor space: NAME
# itself when it fits, else "i" and 14 hex digits of its SHA-256, so a
# long WIRE_PREFIX still gives each run (its PID in NAME) its own names.
ifname() {
	case $1 in
	*[!A-Za-z0-9_.-]*) ;;
	?*) [ ${#1} -le 15 ] && { printf '%s\n' "$1"; return; } ;;
	esac
	printf 'i%.14s\n' "$(printf '%s' "$1" | sha256sum)"
}

# Python for our helper scripts: Debian's, not a per-user shim.
PYTHON=/usr/bin/python3
[ -x "$PYTHON" ] || PYTHON=python3

# A libtool wrapper script stands in for a program linked against an
# uninstalled library; the real binary is in .libs/.
real_binary() {
	local f=$1 real
	if [ "$(head -c 2 "$f" 2>/dev/null)" = '#!' ] &&
	   grep -q 'temporary wrapper script' "$f" 2>/dev/null; then
		real="$(dirname "$f")/.libs/$(basename "$f")"
		[ -f "$real" ] || fail "$f is a libtool wrapper without $real"
		f=$real
	fi
	printf '%s\n' "$f"
}

# ibvd_init: prerequisites, the staging directory and the exit trap.
#
# The build tree may be private (/root is 0700) while clients must run as
# other uids, so the client libraries, tools and helpers are copied into a
# world-readable directory $T:
#	$T/lib    client/.libs/lib*.so*       (IBVERBSD_LIBDIR)
#	$T/tools  tools/ executables          (IBVERBSD_TOOLDIR)
#	$T/bin    test helper programs
#	$T/run    sockets
ibvd_init() {
	local f name found

	[ -x "$IBVERBSD" ] || fail "daemon not built: $IBVERBSD"
	ls "$top_builddir"/client/.libs/libibverbs.so.1 >/dev/null 2>&1 ||
		fail "client library not built: $top_builddir/client/.libs/libibverbs.so.1"
	ibvd_tmpdir
	mkdir -p "$T/lib" "$T/tools" "$T/bin" || fail "mkdir in $T"
	chmod 755 "$T/lib" "$T/tools" "$T/bin"

	cp -a "$top_builddir"/client/.libs/lib*.so* "$T/lib/" || fail "staging client libraries"
	for name in ibverbsd-run ibvctl ibv_devices ibv_devinfo rping; do
		found=""
		for f in "$top_builddir/tools/$name" "$top_srcdir/tools/$name"; do
			[ -f "$f" ] && [ -x "$f" ] && { found=$f; break; }
		done
		[ -n "$found" ] || continue
		cp "$(real_binary "$found")" "$T/tools/$name" || fail "staging $name"
	done
	for f in "$top_builddir"/tests/integration/*-helper "$top_srcdir"/tests/integration/*.py; do
		[ -f "$f" ] || continue
		cp "$(real_binary "$f")" "$T/bin/$(basename "$f")" || fail "staging $f"
	done
	chmod -R a+rX "$T/lib" "$T/tools" "$T/bin"
	[ -x "$T/tools/ibverbsd-run" ] || fail "tools/ibverbsd-run not built"
	# TSan's runtime crashes the shells (dash and bash alike): the staged
	# ibverbsd-run, a shell script, preloads it into its COMMAND only,
	# first, before what the caller preloads (librspreload.so).
	case $SANITIZERS in
	*=thread*)
		sed -i 's|^exec "\$@"$|exec env LD_PRELOAD="$TSAN_RUNTIME${LD_PRELOAD:+ $LD_PRELOAD}" "$@"|' \
			"$T/tools/ibverbsd-run" || fail "staging ibverbsd-run" ;;
	esac

	IBVERBSD_LIBDIR=$T/lib
	IBVERBSD_TOOLDIR=$T/tools
	export IBVERBSD_LIBDIR IBVERBSD_TOOLDIR
	SOCK=$T/run/ibverbsd.sock
	unset IBVERBSD_SOCKET NOTIFY_SOCKET LISTEN_FDS LISTEN_PID LISTEN_FDNAMES WATCHDOG_USEC WATCHDOG_PID
	log "staging in $T (build tree $top_builddir${SANITIZERS:+, sanitizers})"
}

# ibvd_tmpdir: just the world-readable $T (with run/ and out/) and the trap.
ibvd_tmpdir() {
	need_cmd timeout setpriv mktemp
	T=$(mktemp -d "/tmp/ibvd-$IBVD_TEST.XXXXXX") || fail "mktemp"
	trap ibvd_cleanup EXIT
	trap 'exit 129' HUP
	trap 'exit 130' INT
	trap 'exit 143' TERM
	chmod 755 "$T"
	mkdir -p "$T/run" "$T/out" || fail "mkdir in $T"
	chmod 755 "$T/run"
	chmod 1777 "$T/out"
	SOCK=$T/run/ibverbsd.sock
}

ibvd_cleanup() {
	local rc=$? p f live
	trap - EXIT
	exec 7>&-
	# Clients run under timeout(1), which passes SIGTERM on (not SIGKILL).
	# Only jobs still ours: a pid reaped already may be anyone's now.
	live=" $(jobs -p | tr '\n' ' ') "
	for p in "${BG_PIDS[@]}"; do
		case $live in *" $p "*) term_bg "$p" ;; esac
	done
	# The daemon as daemon_stop stops it, SIGKILL only if it hangs: no
	# "Killed" job report from bash at the end of a run that passed.
	if [ -n "$DAEMON_PID" ] && kill -TERM "$DAEMON_PID" 2>/dev/null; then
		wait_exit "$DAEMON_PID" 5 ||
			{ kill -KILL "$DAEMON_PID"; wait "$DAEMON_PID"; } 2>/dev/null
	fi
	# The same jobs only: a pid reaped before (debian_pair's server) may
	# be another program's by now, on a busy machine within seconds.
	for p in "${BG_PIDS[@]}"; do
		case $live in *" $p "*) ;; *) continue ;; esac
		wait_exit "$p" 2 || { kill -KILL "$p"; wait "$p"; } 2>/dev/null
	done
	# Every test checks the tenants' accounts: a tenant's last reference
	# logs what it still had charged, and a release of more than was
	# charged is logged too.
	if [ "$rc" -eq 0 ] && [ -n "$T" ] &&
	   grep -E 'still charged at the end|, only [0-9]+ charged' "$T"/daemon*.log 2>/dev/null; then
		printf '%s: FAIL: %s\n' "$IBVD_TEST" "a daemon's accounts did not balance (above)" >&2
		rc=1
	fi
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ -n "$T" ]; then
		for f in "$T"/daemon*.log; do
			[ -s "$f" ] && show "$(basename "$f") (last 40 lines)" <(tail -n 40 "$f")
		done
	fi
	if [ -n "$T" ] && [ -z "${IBVD_KEEP_TMP:-}" ]; then
		rm -rf "$T"
	elif [ -n "$T" ]; then
		log "kept $T"
	fi
	exit "$rc"
}

# ---- configurations ----------------------------------------------------

# The shipped default configuration (etc/ibverbsd.conf).
shipped_conf() {
	local f
	for f in "$top_srcdir/etc/ibverbsd.conf" "$top_builddir/etc/ibverbsd.conf"; do
		[ -f "$f" ] && { printf '%s\n' "$f"; return 0; }
	done
	fail "etc/ibverbsd.conf not found in $top_srcdir or $top_builddir"
}

# default_conf [SOCKET]: a copy of the shipped configuration with its socket
# path changed to SOCKET (default $SOCK); prints the copy's path.
default_conf() {
	local out="$T/ibverbsd.conf" src
	src=$(shipped_conf) || exit 1
	"$PYTHON" - "$src" "$out" "${1:-$SOCK}" <<-'EOF' || fail "cannot rewrite $src"
	import json, sys
	src, out, sock = sys.argv[1:4]
	with open(src) as f:
	    cfg = json.load(f)
	cfg.setdefault("socket", {})["path"] = sock
	with open(out, "w") as f:
	    json.dump(cfg, f, indent=2)
	    f.write("\n")
	EOF
	chmod 644 "$out"
	printf '%s\n' "$out"
}

# middleware_conf DEV [LINKS]: a configuration for middleware tests, one
# software device DEV, "device_links" LINKS (default true), and no
# RLIMIT_MEMLOCK emulation: UCX, libfabric and MPI register tens of MiB at
# start, over this machine's 8 MiB limit.  Prints its path.
middleware_conf() {
	local out="$T/middleware.conf"
	cat >"$out" <<-EOF
	{
	  "socket": { "path": "$SOCK" },
	  "rlimit_memlock": "ignore",
	  "device_links": ${2:-true},
	  "devices": [ { "name": "$1" } ]
	}
	EOF
	chmod 644 "$out"
	printf '%s\n' "$out"
}

# ---- the daemon --------------------------------------------------------

# daemon_start ARGS...: start the daemon ($IBVERBSD, the built one unless
# changed) in the foreground (-f) in the background of this shell; its
# output goes to $DAEMON_LOG.  As uid $DAEMON_UID from the start if set
# (setpriv, no capabilities); otherwise, run by root, it binds its socket
# and opens its devices as root, then becomes uid $DAEMON_USER (default
# 1003; IBVD_DAEMON_USER=root keeps it root) with no capability, as
# ibverbsd(8) SECURITY describes: every test runs against that daemon.
DAEMON_UID=""
DAEMON_USER=${IBVD_DAEMON_USER:-1003}
daemon_start() {
	local as=()
	IBVD_NLOG=$((IBVD_NLOG + 1))
	DAEMON_LOG="$T/daemon$IBVD_NLOG.log"
	if is_root && [ -z "$DAEMON_UID" ] && [ "$DAEMON_USER" != root ]; then
		as=(--user "$DAEMON_USER")
	fi
	log "starting${DAEMON_UID:+ as uid $DAEMON_UID}: $IBVERBSD -f ${as[*]} $*"
	if [ -n "$DAEMON_UID" ] && is_root; then
		setpriv --reuid="$DAEMON_UID" --regid="$DAEMON_UID" --clear-groups \
			--inh-caps=-all --bounding-set=-all -- \
			"$IBVERBSD" -f "$@" >"$DAEMON_LOG" 2>&1 &
	else
		"$IBVERBSD" -f "${as[@]}" "$@" >"$DAEMON_LOG" 2>&1 &
	fi
	DAEMON_PID=$!
}

# settled_count CMD...: CMD's output (a count), once it has held for 0.3 s
# (5 s at most).
settled_count() {
	local n last=-1 same=0 i
	for i in $(seq 50); do
		n=$("$@")
		if [ "$n" -eq "$last" ]; then
			same=$((same + 1))
			[ "$same" -ge 3 ] && break
		else
			same=0
			last=$n
		fi
		sleep 0.1
	done
	printf '%s\n' "$n"
}

# The open fds and the maps of process PID.
pid_fd_count() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
pid_map_count() { wc -l <"/proc/$1/maps" 2>/dev/null || echo 0; }

# daemon_fds_settled [PID]: the daemon's open fds, counted once the count
# has held for 0.3 s (5 s at most).  After requests the control thread fills
# a pool of spare socket pairs while it is idle (daemon/verbs/channel.c), so
# a baseline counted right after the first requests may miss part of it.
daemon_fds_settled() {
	settled_count pid_fd_count "${1:-$DAEMON_PID}"
}

# daemon_maps_settled [PID]: the daemon's maps, counted the same way (its
# threads' stacks come as they start, shortly after it is ready).
daemon_maps_settled() {
	settled_count pid_map_count "${1:-$DAEMON_PID}"
}

# True while PID exists and is not a zombie.
pid_running() {
	[ -e "/proc/$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

# ping [SOCKET]: one LIST_DEVICES round trip on a fresh connection.
ping_daemon() {
	timeout "$((5 * TMUL))" "$T/bin/badclient-helper" "${1:-$SOCK}" ping >/dev/null 2>&1
}

# daemon_wait_ready [SOCKET] [PID]: poll until the daemon answers (or fail
# when it exits or does not answer within 10 s).
daemon_wait_ready() {
	local sock=${1:-$SOCK} pid=${2:-$DAEMON_PID} i rc
	for i in $(seq $((100 * TMUL))); do
		if ! pid_running "$pid"; then
			wait "$pid"; rc=$?
			DAEMON_PID=""
			fail "daemon exited with status $rc before answering on $sock"
		fi
		[ -S "$sock" ] && ping_daemon "$sock" && { log "daemon $pid ready on $sock"; return 0; }
		sleep 0.1
	done
	fail "daemon $pid did not answer on $sock within $((10 * TMUL)) s"
}

# stream_kill_round WHO DIR LAUNCH DELAY [MIX]: a stream of direct-helper
# (direct-stream.c) in two processes whose WHO end (recv or send) is
# killed DELAY seconds after both ends wrote their addresses to DIR; the
# other end expects it (DIRECT_STREAM_PEER_DIES=1) and must end well: a
# sender with every flow failed, a receiver with what came before.
# LAUNCH SIDE DIR MIX runs one end (the variables in MIX set for it);
# the outputs are $O/stream-kill.recv and .send.
stream_kill_round() {
	local who=$1 dir=$2 launch=$3 delay=$4 mix=${5:-} other=send pid_who pid_other

	[ "$who" = send ] && other=recv
	mkdir -p "$dir" && chmod 777 "$dir" || fail "mkdir $dir"
	"$launch" "$other" "$dir" "$mix DIRECT_STREAM_PEER_DIES=1" >"$O/stream-kill.$other" 2>&1 &
	pid_other=$!
	"$launch" "$who" "$dir" "$mix" >"$O/stream-kill.$who" 2>&1 &
	pid_who=$!
	BG_PIDS+=("$pid_other" "$pid_who")
	# both ends wrote their addresses: neither waits for a dead one
	for _ in $(seq $((100 * TMUL))); do
		[ -f "$dir/send-addrs" ] && [ -f "$dir/recv-addrs" ] && break
		sleep 0.05
	done
	sleep "$delay"
	kill -9 "$(cat "$dir/$who-pid")" 2>/dev/null ||
		{ show "$who end" "$O/stream-kill.$who"; show "$other end" "$O/stream-kill.$other";
		  fail "the $who end ended before it was killed ($mix)"; }
	wait_exit "$pid_who" "$TMO" || fail "the killed $who end did not go"
	echo 1 >"$dir/send-dead"
	wait_exit "$pid_other" "$TMO" || fail "the $other end did not finish after its peer died"
	[ "$EXIT_STATUS" -eq 0 ] ||
		{ show "$other end" "$O/stream-kill.$other"; fail "the $other end failed ($mix)"; }
	case $who in
	recv)	expect_grep '^stream: every flow failed after the peer died' \
			"$O/stream-kill.send" "errors at the sender" ;;
	send)	expect_grep '^stream: [0-9]+ received before the sender died' \
			"$O/stream-kill.recv" "the receiving end's count" ;;
	esac
}

# wait_exit PID SECONDS: wait for a child to exit; sets EXIT_STATUS, or
# returns 1 if it is still running after SECONDS.
wait_exit() {
	local pid=$1 i
	for i in $(seq $(($2 * 10))); do
		pid_running "$pid" || break
		sleep 0.1
	done
	pid_running "$pid" && return 1
	wait "$pid"
	EXIT_STATUS=$?
	return 0
}

# daemon_stop: SIGTERM; the daemon must exit with status 0 within 5 s.
daemon_stop() {
	local pid=$DAEMON_PID
	[ -n "$pid" ] || fail "daemon_stop: no daemon"
	kill -TERM "$pid" 2>/dev/null || fail "daemon $pid is gone before SIGTERM"
	if ! wait_exit "$pid" $((5 * TMUL)); then
		{ kill -KILL "$pid"; wait "$pid"; } 2>/dev/null
		DAEMON_PID=""
		fail "daemon $pid did not exit within $((5 * TMUL)) s of SIGTERM"
	fi
	DAEMON_PID=""
	[ "$EXIT_STATUS" -eq 0 ] || fail "daemon exited with status $EXIT_STATUS after SIGTERM"
	log "daemon $pid stopped (status 0)"
}

# daemon_kill: SIGKILL and reap, no checks.
daemon_kill() {
	{ kill -KILL "$DAEMON_PID"; wait "$DAEMON_PID"; } 2>/dev/null
	DAEMON_PID=""
}

daemon_alive() {
	if [ -z "$DAEMON_PID" ] || ! pid_running "$DAEMON_PID"; then
		fail "the daemon died (${1:-})"
	fi
}

# conf_edit OUT STATEMENT...: the default config with each Python
# statement run on it (`cfg`), written to OUT; prints OUT.
conf_edit() {
	local out=$1
	shift
	"$PYTHON" - "$(default_conf)" "$out" "$@" <<-'EOF' || fail "cannot write $out"
	import json, sys
	src, out = sys.argv[1:3]
	with open(src) as f:
	    cfg = json.load(f)
	for statement in sys.argv[3:]:
	    exec(statement)
	with open(out, "w") as f:
	    json.dump(cfg, f, indent=2)
	EOF
	chmod 644 "$out"
	printf '%s\n' "$out"
}

# nothing_left WHEN: the daemon holds no QP, SRQ or context once every
# client went.
nothing_left() {
	local kind out
	for kind in qp srq ctx; do
		out=$T/res-$kind.json
		ibvctl -j resource show "$kind" >"$out" 2>&1 ||
			{ show "resource show $kind" "$out"; fail "ibvctl resource show $kind"; }
		if grep -q '[^][[:space:]]' "$out"; then
			show "resource show $kind" "$out"
			fail "$1: ${kind}s left in the daemon"
		fi
	done
	ok "$1: no QP, SRQ or context left"
}

# run_check_suite NAME UID: the Check program $T/bin/NAME-helper as UID;
# every case must pass.  Its output is in $O/NAME.
run_check_suite() {
	local name=$1 uid=$2 helper=$T/bin/$1-helper rc
	[ -x "$helper" ] || fail "tests/integration/$name-helper not built"
	check "the $name suite as uid $uid"
	# a whole suite, not one command: 19 rsocket cases take 15 s alone,
	# and a loaded machine doubles that
	TMO=$((TMO * 10)) VT_TMUL=$TMUL run_ours "$uid" "$helper" >"$O/$name" 2>&1
	rc=$?
	show "$name-helper" "$O/$name"
	[ "$rc" -eq 0 ] || fail "the $name suite failed (exit $rc)"
	expect_grep '^100%: Checks: [1-9][0-9]*, Failures: 0, Errors: 0$' "$O/$name" "Check summary"
	ok "$(grep -E '^[0-9]+%: Checks' "$O/$name")"
}

# ---- TCP rendezvous -------------------------------------------------------

# free_port: a TCP port nobody listens on or is connected from now (the
# kernel picks it; the program given it binds it a moment later), never
# one this test handed out before.
USED_PORTS=" "
free_port() {
	local p
	for _ in $(seq 20); do
		p=$("$PYTHON" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])') || fail "cannot pick a free TCP port"
		case $USED_PORTS in
		*" $p "*) continue ;;
		esac
		USED_PORTS="$USED_PORTS$p "
		printf '%s\n' "$p"
		return 0
	done
	fail "no unused TCP port after 20 tries"
}

# wait_tcp_listen PORT PID: until something listens on TCP PORT (0), or
# PID exits first (1).
wait_tcp_listen() {
	local port=$1 pid=$2
	for _ in $(seq $((TMO * 20))); do
		[ -n "$(ss -Hltn "sport = :$port" 2>/dev/null)" ] && return 0
		pid_running "$pid" || return 1
		sleep 0.05
	done
	return 1
}

# ---- clients -------------------------------------------------------------

# run_as UID CMD...: run CMD as UID/GID (no supplementary groups), in $T,
# bounded by $TMO seconds.  Without root, runs as the current user.
run_as() {
	local uid=$1
	shift
	if is_root; then
		(cd "$T" && exec timeout -k 2 "$TMO" setpriv --reuid="$uid" --regid="$uid" --clear-groups -- "$@")
	else
		(cd "$T" && exec timeout -k 2 "$TMO" "$@")
	fi
}

# term_bg PID...: SIGTERM jobs started as `run_as ... &` (or run_ours,
# run_debian): such a PID is the shell running the function, which dies
# alone and passes nothing on, so its child, timeout(1), which does, is
# signalled first.
term_bg() {
	local p
	for p in "$@"; do
		pkill -TERM -P "$p" 2>/dev/null
		kill -TERM "$p" 2>/dev/null
	done
}

# sanitizer_runtime: the runtimes a sanitizer build's code needs loaded
# first (space-separated paths; nothing in a plain build).
sanitizer_runtime() {
	case $SANITIZERS in
	"")	;;
	*=thread*) gcc -print-file-name=libtsan.so ;;
	*)	echo "$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)" ;;
	esac
}

# Environment for Debian's unmodified binaries: in a sanitizer build our
# library needs its sanitizer's runtime loaded first, and their leaks are
# not ours.
debian_env() {
	DEBIAN_ENV=(IBVERBSD_SOCKET="$SOCK")
	case $SANITIZERS in
	"")	;;
	*=thread*)	# through ibverbsd-run (ibvd_init)
		DEBIAN_ENV+=("TSAN_RUNTIME=$(sanitizer_runtime)") ;;
	*)	DEBIAN_ENV+=("LD_PRELOAD=$(sanitizer_runtime)" "ASAN_OPTIONS=detect_leaks=0") ;;
	esac
}

# run_debian UID PROG ARGS...: PROG (e.g. /usr/bin/ibv_devinfo) through
# ibverbsd-run as UID against $SOCK.
run_debian() {
	local uid=$1
	shift
	debian_env
	run_as "$uid" env "${DEBIAN_ENV[@]}" "$T/tools/ibverbsd-run" "$@"
}

# debian_pair PROG ARGS...: Debian's PROG, server uid $USER1, client uid
# $CLIENT_USER ($USER2 unless set) (-p: a free port); both must exit 0.
# With -R or -z (perftest's connection, or its exchange, through the CM)
# the client starts once the server's CM id listens, else once its TCP
# port does.
# "@SHM" in ARGS: a 2 MiB file of each side's own (mkshm).  Prints the
# client's result line (perftest's numbers, ibv_rc_pingpong's "iters in").
# Both sides' output is line-buffered (stdbuf), so that one killed at its
# timeout still shows what it printed (not in a sanitizer build, where the
# sanitizer's runtime must come first in LD_PRELOAD).
debian_pair() {
	local prog=$1 port spid rc cuser=${CLIENT_USER:-$USER2} a wait=wait_tcp_listen
	local -a sargs=() cargs=() unbuf=()
	shift
	[ -z "$SANITIZERS" ] && command -v stdbuf >/dev/null 2>&1 && unbuf=(stdbuf -oL -eL)
	for a in "$@"; do
		case $a in
		-R|-z)	sargs+=("$a"); cargs+=("$a"); wait=wait_cm_listen ;;
		*@SHM)	sargs+=("${a%@SHM}$T/shm-server"); cargs+=("${a%@SHM}$T/shm-client") ;;
		*)	sargs+=("$a"); cargs+=("$a") ;;
		esac
	done
	mkshm "$T/shm-server" "$USER1"
	mkshm "$T/shm-client" "$cuser"
	port=$(free_port) || exit 1
	run_debian "$USER1" "${unbuf[@]}" "/usr/bin/$prog" -p "$port" "${sargs[@]}" >"$T/out/pair.server" 2>&1 &
	spid=$!
	BG_PIDS+=("$spid")
	"$wait" "$port" "$spid" || { show server "$T/out/pair.server" >&2; fail "$prog $*: no server"; }
	run_debian "$cuser" "${unbuf[@]}" "/usr/bin/$prog" -p "$port" "${cargs[@]}" localhost >"$T/out/pair.client" 2>&1
	rc=$?
	wait "$spid" || { show server "$T/out/pair.server" >&2; show client "$T/out/pair.client" >&2
			  fail "$prog $*: server failed (client exit $rc)"; }
	[ "$rc" -eq 0 ] || { show client "$T/out/pair.client" >&2; fail "$prog $*: client failed ($rc)"; }
	grep -E '^ *[0-9]+ +[0-9]+ |iters in' "$T/out/pair.client" | tail -1
}

# mkshm PATH USER: a 2 MiB file for USER to map shared (perftest's
# --mmap), in the test's own directory: shared file memory as /dev/shm's.
mkshm() {
	dd if=/dev/zero of="$1" bs=1M count=2 status=none && chown "$2" "$1" ||
		fail "cannot make $1"
}

# wait_cm_listen PORT PID: until a CM id of the daemon listens on PORT (0),
# or PID exits first (1): a server that takes connections through the CM
# (perftest's -R) has no TCP port to wait for.
wait_cm_listen() {
	local port=$1 pid=$2
	for _ in $(seq $((TMO * 20))); do
		ibvctl -j resource show cm_id 2>/dev/null | "$PYTHON" -c '
import json, sys
try:
    ids = json.load(sys.stdin)
except ValueError:
    sys.exit(1)
sys.exit(0 if any(e.get("state") == "LISTEN" and
                  str(e.get("src-addr", "")).endswith(":" + sys.argv[1])
                  for e in ids) else 1)' "$port" && return 0
		pid_running "$pid" || return 1
		sleep 0.05
	done
	return 1
}

# run_ours UID PROG ARGS...: our own program (already sanitizer-linked).
run_ours() {
	local uid=$1
	shift
	run_as "$uid" env IBVERBSD_SOCKET="$SOCK" "$T/tools/ibverbsd-run" "$@"
}

# ibvctl ARGS...: the built ibvctl against $SOCK, as root.
ibvctl() {
	[ -x "$T/tools/ibvctl" ] || fail "tools/ibvctl not built"
	(cd "$T" && IBVERBSD_SOCKET="$SOCK" LD_LIBRARY_PATH="$T/lib" \
		timeout -k 2 "$TMO" "$T/tools/ibvctl" "$@")
}

# limit_count WHAT UID KEY: KEY of uid UID's "all" row of ibvctl limit
# show WHAT (fail_all: it runs in $(...)).
limit_count() {
	ibvctl -j limit show "$1" uid "$2" >"$O/show" 2>&1 ||
		{ show "limit show $1" "$O/show"; fail_all "ibvctl limit show $1"; }
	"$PYTHON" -c 'import json, sys
rows = [r for r in json.load(open(sys.argv[1])) if r["dev"] == "all"]
print(rows[0][sys.argv[2]])' "$O/show" "$3"
}

# status_count KEY: KEY's number in ibvctl daemon status (its output left
# in $O/status; fail_all: it runs in $(...)).
status_count() {
	ibvctl daemon status >"$O/status" 2>&1 || { show status "$O/status"; fail_all "ibvctl daemon status"; }
	sed -n "s/.*\<$1 \([0-9]*\).*/\1/p" "$O/status"
}

# sent_pkts DEV: the packets port 1 of DEV has sent (ibvctl's counter)
sent_pkts() {
	ibvctl statistic show link "$1/1" | sed -n 's/.* sent_pkts \([0-9]*\) .*/\1/p'
}

# engine_count NAME: an engine counter summed over the engine threads
# (ibvctl statistic show engine: wqes, turns, ...).  A counter that is not
# there, or ibvctl failing, fails the test: a 0 would pass every bound.
engine_count() {
	local out
	out=$(ibvctl statistic show engine 2>&1) || fail_all "ibvctl statistic show engine: $out"
	awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) { n += $(i + 1); seen = 1 } }
		END { if (!seen) exit 1; printf "%.0f\n", n }' <<<"$out" ||
		fail_all "no engine counter '$1' in: $out"
}

# ibvctl_as UID ARGS...
ibvctl_as() {
	local uid=$1
	shift
	[ -x "$T/tools/ibvctl" ] || fail "tools/ibvctl not built"
	run_as "$uid" env IBVERBSD_SOCKET="$SOCK" LD_LIBRARY_PATH="$T/lib" "$T/tools/ibvctl" "$@"
}

# ---- a client holding a device context (ctxclient-helper) ---------------
#
# ctx_start UID [-d DEV]: start it through ibverbsd-run; commands go to it on
# fd 7, its answers are lines in $T/ctx.out.  $CTX_ENV: NAME=VALUE words
# for its environment.
# ctx_cmd CMD: send one command line; the answer line is left in
# $CTX_ANSWER (returns 1 if none arrives within $TMO s).
CTX_PID=""
CTX_LINES=0
CTX_ANSWER=""
ctx_start() {
	local uid=$1
	shift
	rm -f "$T/ctx.in" "$T/ctx.out"
	mkfifo "$T/ctx.in" || fail "mkfifo"
	chmod 644 "$T/ctx.in"
	: >"$T/ctx.out"
	# it lives as long as the test: a longer bound than one command's
	# shellcheck disable=SC2086 # CTX_ENV: words on purpose
	TMO=$((TMO * 10)) run_as "$uid" env IBVERBSD_SOCKET="$SOCK" ${CTX_ENV:-} "$T/tools/ibverbsd-run" \
		"$T/bin/ctxclient-helper" "$@" <"$T/ctx.in" >"$T/ctx.out" 2>&1 &
	CTX_PID=$!
	BG_PIDS+=("$CTX_PID")
	exec 7>"$T/ctx.in"
	CTX_LINES=0
	ctx_read || fail "context client did not start"
	case $CTX_ANSWER in
	"ready "*) log "context client: $CTX_ANSWER" ;;
	*) show "context client output" "$T/ctx.out"; fail "context client did not open the device: $CTX_ANSWER" ;;
	esac
}

ctx_read() {
	local i
	CTX_ANSWER=""
	for i in $(seq $((TMO * 10))); do
		if [ "$(wc -l <"$T/ctx.out")" -gt "$CTX_LINES" ]; then
			CTX_LINES=$((CTX_LINES + 1))
			CTX_ANSWER=$(sed -n "${CTX_LINES}p" "$T/ctx.out")
			return 0
		fi
		# one more look after it exited: it may have just written
		if ! pid_running "$CTX_PID" && [ "$i" -gt 1 ]; then
			[ "$(wc -l <"$T/ctx.out")" -gt "$CTX_LINES" ] && continue
			break
		fi
		sleep 0.1
	done
	show "context client output" "$T/ctx.out"
	return 1
}

ctx_cmd() {
	log "context client <- $*"
	printf '%s\n' "$*" >&7 2>/dev/null || { CTX_ANSWER="(context client is gone)"; return 1; }
	ctx_read || { CTX_ANSWER="(no answer to '$*')"; return 1; }
	log "context client -> $CTX_ANSWER"
}

# ctx_stop: quit; the client must exit 0.
ctx_stop() {
	printf 'quit\n' >&7
	exec 7>&-
	wait_exit "$CTX_PID" "$TMO" || fail "context client did not exit after quit"
	[ "$EXIT_STATUS" -eq 0 ] || { show "context client output" "$T/ctx.out"; fail "context client exited with status $EXIT_STATUS"; }
}

# ---- small assertions -------------------------------------------------------

# expect_failed RC WHAT: a command that must fail did: non-zero, not killed
# by our timeout (124, or 137 after -k).
expect_failed() {
	case $1 in
	0) fail "$2: exit status 0, want a failure" ;;
	124|137) fail "$2: killed by the timeout (hung)" ;;
	esac
}

# expect_grep REGEX FILE WHAT: FILE must contain a line matching REGEX (ERE).
expect_grep() {
	grep -Eq -- "$1" "$2" || { show "$(basename "$2")" "$2"; fail "$3: no line matching /$1/"; }
}

expect_no_grep() {
	! grep -Eq -- "$1" "$2" || { show "$(basename "$2")" "$2"; fail "$3: unexpected line matching /$1/"; }
}

# field FILE KEY: the value of 'KEY: value' in ibv_devinfo output (first).
field() {
	sed -n "s/^[[:space:]]*$2:[[:space:]]*//p" "$1" | head -n 1
}

# expected_pings COUNT SIZE PREFIX: the lines rping -v prints for pings
# 0..COUNT-1 of SIZE bytes: "rdma-ping-N: " then letters A..z cycling from
# A+N (mod 58), up to SIZE-1 characters.
expected_pings() {
	"$PYTHON" - "$@" <<-'EOF'
	import sys
	count, size, prefix = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
	for n in range(count):
	    s = "rdma-ping-%d: " % n
	    c = 65 + n % 58
	    while len(s) < size - 1:
	        s += chr(c)
	        c = 65 if c == 122 else c + 1
	    print(prefix + s[:size - 1])
	EOF
}
