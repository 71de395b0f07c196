#!/bin/bash
# A client killed with SIGKILL in the middle of a transfer: Debian's
# ibv_rc_pingpong pairs (server uid 1001, client uid 1002) with a huge -n,
# one side SIGKILLed once the data flows.  The survivor must get an error
# completion and exit with an error promptly (not hang), and the daemon
# must free everything the dead client owned: its open fds, memory and
# (when ibvctl can show them) resource counts return to the baseline.
# Then contexts that end beside another client's 2,000 CM ids: their
# teardowns look at none of those ids (ibvctl daemon status,
# cm_going_looks).
. "$(dirname "$0")/lib.sh"

need_cmd /usr/bin/ibv_rc_pingpong ss pgrep stdbuf
ibvd_init
O=$T/out
conf=$(default_conf) || exit 1
daemon_start -c "$conf"
daemon_wait_ready

nfds() { find "/proc/$DAEMON_PID/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
rss_kb() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$DAEMON_PID/status"; }
# The daemon's own object counts, if ibvctl has them ("" otherwise).
resources() {
	ibvctl -j resource show 2>"$O/res.err" || { show stderr "$O/res.err" >&2; fail "ibvctl -j resource show"; }
}

# prog_pid PID NAME: the process called NAME among PID's descendants (a
# background run_debian is a subshell, timeout(1), then the program).
prog_pid() {
	local p c
	for _ in $(seq 50); do
		p=$1
		for _ in 1 2 3 4 5 6; do
			c=$(pgrep -P "$p" | head -n 1)
			[ -n "$c" ] || break
			if [ "$(cat "/proc/$c/comm" 2>/dev/null)" = "$2" ]; then
				printf '%s\n' "$c"
				return 0
			fi
			p=$c
		done
		sleep 0.1
	done
	return 1
}

# Survivors must fail within this bound (RC retries take well under it);
# the pair's own timeout is well beyond it.
BOUND=$((10 * TMUL))
PAIR_TMO=$((TMO + 2 * BOUND))

# A run that warms the daemon up, so that the baseline is its steady state.
port=$(free_port)
run_debian "$USER1" /usr/bin/ibv_rc_pingpong -p "$port" >"$O/warm.s" 2>&1 &
wpid=$!
BG_PIDS+=("$wpid")
for _ in $(seq 100); do
	[ -n "$(ss -Hltn "sport = :$port")" ] && break
	sleep 0.05
done
run_debian "$USER2" /usr/bin/ibv_rc_pingpong -p "$port" localhost >"$O/warm.c" 2>&1 ||
	{ show server "$O/warm.s"; show client "$O/warm.c"; fail "a plain ibv_rc_pingpong run fails"; }
wait_exit "$wpid" "$TMO" || fail "warm-up server did not exit"

sleep 0.5
fds0=$(nfds)
rss0=$(rss_kb)
res0=$(resources) || exit 1
log "daemon baseline: $fds0 fds, VmRSS $rss0 kB${res0:+, resources $res0}"
[ -n "$res0" ] || fail "ibvctl -j resource show printed nothing"

# one_kill VICTIM ARGS...: VICTIM is server or client.
one_kill() {
	local victim=$1 s c spid cpid vpid survivor sfile t0 t1 rc p serr n
	shift
	port=$(free_port)
	s=$O/$victim$*.server
	c=$O/$victim$*.client
	s=${s// /}
	c=${c// /}
	check "SIGKILL to the $victim of ibv_rc_pingpong${*:+ $*} -n 100000000 mid-transfer"
	# stdbuf: line-buffered, so that "remote address" shows while it runs
	TMO=$PAIR_TMO run_debian "$USER1" stdbuf -oL /usr/bin/ibv_rc_pingpong -p "$port" -n 100000000 "$@" >"$s" 2>&1 &
	spid=$!
	BG_PIDS+=("$spid")
	for _ in $(seq $((TMO * 20))); do
		[ -n "$(ss -Hltn "sport = :$port")" ] && break
		pid_running "$spid" || break
		sleep 0.05
	done
	TMO=$PAIR_TMO run_debian "$USER2" stdbuf -oL /usr/bin/ibv_rc_pingpong -p "$port" -n 100000000 "$@" localhost \
		>"$c" 2>&1 &
	cpid=$!
	BG_PIDS+=("$cpid")
	# the data flows once both have printed the remote address
	for _ in $(seq $((TMO * 10))); do
		grep -q 'remote address' "$s" && grep -q 'remote address' "$c" && break
		{ pid_running "$spid" && pid_running "$cpid"; } || break
		sleep 0.1
	done
	grep -q 'remote address' "$c" ||
		{ show server "$s"; show client "$c"; fail "the pair never connected"; }
	sleep 0.5
	if [ "$victim" = server ]; then
		vpid=$(prog_pid "$spid" ibv_rc_pingpong) || fail "no server process under $spid"
		survivor=$cpid
		sfile=$c
	else
		vpid=$(prog_pid "$cpid" ibv_rc_pingpong) || fail "no client process under $cpid"
		survivor=$spid
		sfile=$s
	fi
	pid_running "$survivor" || { show survivor "$sfile"; fail "the survivor ended before the kill"; }
	log "kill -KILL $vpid ($victim, $(cat "/proc/$vpid/comm" 2>/dev/null))"
	t0=$(date +%s%N)
	kill -KILL "$vpid" || fail "kill $vpid"
	# the survivor's verdict comes after the daemon's clean-up check
	serr=""
	if ! wait_exit "$survivor" "$BOUND"; then
		show survivor "$sfile"
		# it is our job to end it now (and so its side of the objects)
		p=$(prog_pid "$survivor" ibv_rc_pingpong) && kill -KILL "$p"
		wait_exit "$survivor" 5
		serr="the survivor still ran $BOUND s after its peer was killed (hangs)"
	else
		rc=$EXIT_STATUS
		t1=$(date +%s%N)
		show "survivor" "$sfile"
		case $rc in
		0) serr="the survivor exited 0 after its peer died mid-transfer" ;;
		124|137) serr="the survivor was killed by the timeout (hung)" ;;
		*)
			if grep -Eq 'Failed status|poll CQ failed|Completion wasn.t found' "$sfile"; then
				ok "the survivor exited $rc after $(((t1 - t0) / 1000000)) ms: $(grep -m1 -E 'Failed|failed|found' "$sfile")"
			else
				serr="the survivor exited $rc without reporting a failed completion"
			fi ;;
		esac
	fi
	if [ "$victim" = server ]; then
		wait_exit "$spid" 5
	else
		wait_exit "$cpid" 5
	fi
	daemon_alive "after the kill"

	check "the daemon freed what both clients owned"
	t0=$(date +%s%N)
	for _ in $(seq $((100 * TMUL))); do
		n=$(nfds)
		[ "$n" -le "$fds0" ] && [ "$(resources)" = "$res0" ] && break
		sleep 0.1
	done
	t1=$(date +%s%N)
	[ "$n" -le "$fds0" ] ||
		{ ls -l "/proc/$DAEMON_PID/fd"; fail "daemon held $n fds $(((t1 - t0) / 1000000)) ms after both clients ended, $fds0 before"; }
	[ "$(resources)" = "$res0" ] || fail "daemon resources: $(resources), before: $res0"
	rss=$(rss_kb)
	[ "$rss" -le $((rss0 + 16 * 1024)) ] || fail "daemon VmRSS $rss kB, $rss0 kB before"
	ok "$(nfds) fds after $(((t1 - t0) / 1000000)) ms, VmRSS $rss kB${res0:+, resources as before}"
	[ -z "$serr" ] || fail "$serr"
}

# Each scenario in a subshell: a failing one (fail exits) does not stop
# the others; the verdict comes at the end.
failed=()
for args in "client" "server" "client -e" "server -e" "server -s 65536"; do
	# shellcheck disable=SC2086 # words
	( one_kill $args ) || failed+=("SIGKILL to the $args")
done

# Contexts that end while another client holds many CM ids: each
# teardown looks at its own context's ids (none here), not at every id
# of the daemon (cm_going_looks; 20 x 2,000 before).
check "20 contexts end beside 2,000 CM ids of another client"
ctx_start "$USER1"
ctx_cmd cmids 2000 && [ "$CTX_ANSWER" = "ok cmids 2000" ] || fail "cmids: $CTX_ANSWER"
looks0=$(status_count cm_going_looks)
[ -n "$looks0" ] || { show status "$O/status"; fail "no cm_going_looks in ibvctl daemon status"; }
for _ in $(seq 20); do
	echo quit | run_ours "$USER2" "$T/bin/ctxclient-helper" >"$O/short" 2>&1 ||
		{ show "a short-lived context" "$O/short"; fail "a short-lived context client failed"; }
done
# their teardowns done: only the holder's context left
for _ in $(seq $((TMO * 10))); do
	[ "$(status_count contexts)" = 1 ] && break
	sleep 0.1
done
[ "$(status_count contexts)" = 1 ] || { show status "$O/status"; fail "the short-lived contexts stayed"; }
looks=$(($(status_count cm_going_looks) - looks0))
[ "$looks" -eq 0 ] || fail "20 teardowns looked at $looks CM ids of other contexts"
ctx_stop
ok "20 teardowns looked at $looks CM ids"

daemon_alive "at the end"
daemon_stop
[ ${#failed[@]} -eq 0 ] || fail "${#failed[@]} scenario(s) failed: $(printf '[%s] ' "${failed[@]}")"
ok "all scenarios passed"
