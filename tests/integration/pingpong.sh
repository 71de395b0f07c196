#!/bin/bash
# Debian's unmodified ibv_rc_pingpong, ibv_uc_pingpong, ibv_ud_pingpong and
# ibv_srq_pingpong (ibverbs-utils) between two unprivileged users: the server
# as uid 1001, the client as uid 1002, each under `prlimit --memlock`,
# through ibverbsd-run against one daemon.  Default options, -e (completion
# events), -t (extended CQs, rc), message sizes from 1 B to 1 MiB (UD: up to the port MTU) and
# -n 10000; -c (the receiver checks the data) where sizes vary.  Both sides
# must exit 0 and print their throughput and latency lines; a compact table
# of the results ends the log.
#
# RLIMIT_MEMLOCK: registered bytes count against it as with the kernel, so
# a 64 KiB limit holds a pingpong buffer of up to 64 KiB.  Larger sizes run
# with a limit just big enough for their buffer, and one extra check shows
# that 1 MiB under the 64 KiB limit is refused like on a real NIC.
. "$(dirname "$0")/lib.sh"

need_cmd ss prlimit
for p in rc uc ud srq; do
	need_cmd "/usr/bin/ibv_${p}_pingpong"
done
ibvd_init
O=$T/out
conf=$(default_conf) || exit 1
daemon_start -c "$conf"
daemon_wait_ready

MEMLOCK=65536
# Polling pingpongs are two spinning processes besides the engine thread
# on what may be 2 CPUs: an iteration can then wait for a scheduler slice
# (milliseconds), and 1000 iterations take seconds.  Generous bounds.
TMO=$((TMO * 3))

# memlock_for ARGS...: the limit for a run: 64 KiB, or the page-rounded
# message size when that is larger.
memlock_for() {
	local size=0 prev=""
	for a in "$@"; do
		[ "$prev" = "-s" ] && size=$a
		prev=$a
	done
	size=$(((size + 4095) / 4096 * 4096))
	if [ "$size" -gt "$MEMLOCK" ]; then
		printf '%s\n' "$size"
	else
		printf '%s\n' "$MEMLOCK"
	fi
}

# Both lines every pingpong prints at the end, per side.
BW_RE='^[0-9]+ bytes in [0-9.]+ seconds = [0-9.]+ Mbit/sec$'
LAT_RE='^[0-9]+ iters in [0-9.]+ seconds = [0-9.]+ usec/iter$'

NRUN=0
ROWS=()

# pp PROG ARGS...: one server/client run of /usr/bin/ibv_PROG_pingpong.
pp() {
	local prog=$1 bin port lim n s c spid rc_s rc_c t0 t1 mbit usec what
	shift
	bin=/usr/bin/ibv_${prog}_pingpong
	NRUN=$((NRUN + 1))
	n=$NRUN
	s=$O/$n.server
	c=$O/$n.client
	port=$(free_port) || exit 1
	lim=$(memlock_for "$@")
	what="$prog${*:+ $*}"
	check "#$n ibv_${prog}_pingpong${*:+ $*} (memlock $lim, port $port)"
	t0=$(date +%s%N)
	run_debian "$USER1" prlimit --memlock="$lim" "$bin" -p "$port" "$@" >"$s" 2>&1 &
	spid=$!
	BG_PIDS+=("$spid")
	if ! wait_tcp_listen "$port" "$spid"; then
		wait_exit "$spid" 1
		show "server" "$s"
		fail "$what: the server never listened on port $port"
	fi
	run_debian "$USER2" prlimit --memlock="$lim" "$bin" -p "$port" "$@" localhost >"$c" 2>&1
	rc_c=$?
	if ! wait_exit "$spid" "$TMO"; then
		term_bg "$spid"
		wait_exit "$spid" 5
		rc_s=124
	else
		rc_s=$EXIT_STATUS
	fi
	t1=$(date +%s%N)
	if [ "$rc_s" -ne 0 ] || [ "$rc_c" -ne 0 ]; then
		show "server (uid $USER1)" "$s"
		show "client (uid $USER2)" "$c"
		case "$rc_s $rc_c" in
		*124*|*137*) fail "$what: hung (server $rc_s, client $rc_c; 124/137 = timeout)" ;;
		esac
		fail "$what: server exited $rc_s, client $rc_c"
	fi
	for f in "$s" "$c"; do
		expect_grep "$BW_RE" "$f" "$what: throughput line"
		expect_grep "$LAT_RE" "$f" "$what: latency line"
		# -c (--chk): the receiver checks every buffer it got
		expect_no_grep 'invalid data' "$f" "$what: data check"
	done
	daemon_alive "after $what"
	mbit=$(sed -nE 's/^[0-9]+ bytes in [0-9.]+ seconds = ([0-9.]+) Mbit\/sec$/\1/p' "$c")
	usec=$(sed -nE 's/^[0-9]+ iters in [0-9.]+ seconds = ([0-9.]+) usec\/iter$/\1/p' "$c")
	ok "$what: $(grep -E "$BW_RE" "$c"); $(grep -E "$LAT_RE" "$c")"
	ROWS+=("$(printf '%-4s %-22s %8s %12s %10s %7s' "$prog" "${*:-(default)}" "$lim" \
		"$mbit" "$usec" "$(((t1 - t0) / 1000000))")")
}

# Fewer 1 MiB iterations in a sanitizer build (each byte is checked there).
BIG_N=()
[ -n "$SANITIZERS" ] && BIG_N=(-n 200)

for prog in rc uc srq; do
	pp "$prog"
	pp "$prog" -e
	pp "$prog" -s 1
	pp "$prog" -s 4096 -c
	pp "$prog" -s 65536 -c
	pp "$prog" -s 1048576 -c "${BIG_N[@]}"
	pp "$prog" -e -n 10000
done
# -n 10000 polling, once (see TMO above for why not for each program)
pp rc -n 10000
# -t: completions through ibv_create_cq_ex's poll API.  With -e, an event
# whose ibv_start_poll finds nothing is a failure there.  A completion
# that lands between the arm and the poll fires an event the poll takes,
# as on a NIC, and through the rings that is often; ibv_get_cq_event drops
# such an event on a blocking channel with one CQ when a fresher one comes
# within 100 ms, and hands it out only if none does, so it runs the
# default 1,000.
pp rc -t
pp rc -e -t
# UD: one message per MTU packet; the port's MTU is 4096 and
# ibv_ud_pingpong refuses sizes above it.
pp ud
pp ud -e
pp ud -s 1
pp ud -s 4096 -c
pp ud -e -n 10000 -c

check "ibv_ud_pingpong refuses a size above the port MTU (the limit above is the real one)"
run_debian "$USER1" /usr/bin/ibv_ud_pingpong -p "$(free_port)" -s 4097 >"$O/ud-big" 2>&1
expect_failed $? "ibv_ud_pingpong -s 4097"
expect_grep 'Requested size larger than port MTU' "$O/ud-big" "ibv_ud_pingpong -s 4097"
ok "-s 4097: $(head -n 1 "$O/ud-big")"

check "RLIMIT_MEMLOCK is honoured: a 1 MiB buffer under --memlock=$MEMLOCK cannot be registered"
run_debian "$USER1" prlimit --memlock="$MEMLOCK" /usr/bin/ibv_rc_pingpong \
	-p "$(free_port)" -s 1048576 >"$O/memlock" 2>&1
expect_failed $? "ibv_rc_pingpong -s 1048576 under --memlock=$MEMLOCK"
expect_grep "Couldn't register MR" "$O/memlock" "ibv_rc_pingpong -s 1048576 under --memlock=$MEMLOCK"
ok "$(head -n 1 "$O/memlock")"

daemon_alive "after all runs"
daemon_stop

printf '%s: summary (client side; server uid %s, client uid %s)\n' "$IBVD_TEST" "$USER1" "$USER2"
printf '    %-4s %-22s %8s %12s %10s %7s\n' prog options memlock Mbit/sec usec/iter wall_ms
for r in "${ROWS[@]}"; do
	printf '    %s\n' "$r"
done
ok "$NRUN pingpong runs passed"
