#!/bin/bash
# XRC on a software device (issue 11): the Check program xrc-helper
# (tests/integration/xrc.c) as uids $USER1 and $USER2 against a real daemon,
# then Debian's unmodified ibv_xsrq_pingpong and perftest's ib_send_bw and
# ib_write_bw with -c XRC between uid $USER1 (server) and $USER2 (client).
# The daemon holds no XRC object afterwards.
. "$(dirname "$0")/lib.sh"

need_cmd ss ibv_xsrq_pingpong ib_send_bw ib_write_bw
ibvd_init
O=$T/out
HELPER=$T/bin/xrc-helper
[ -x "$HELPER" ] || fail "xrc-helper not built"
export VT_TMUL=$TMUL

# A context's doorbells, one per QP, lowered from the page's 16,384:
# takeover_needs_room fills a context with QPs, a request each (and as
# many to destroy them), which on a loaded CI guest ran past its case's
# timeout.  512 are far above what any other case or program here makes.
IBVERBSD_CTX_DOORBELLS=512 daemon_start -c "$(default_conf)"
daemon_wait_ready

if [ -x "$HELPER" ]; then
	check "the XRC suite as uid $USER1"
	# Some cases close a context with its objects alive, as a dying app
	# does: the daemon must free them, the app's own structs are its to
	# leak, which a sanitizer build would otherwise report.
	# A whole suite, as run_check_suite allows.
	TMO=$((TMO * 10)) \
		ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
		run_ours "$USER1" "$HELPER" >"$O/xrc" 2>&1
	rc=$?
	show "xrc-helper" "$O/xrc"
	[ "$rc" -eq 0 ] || fail "the XRC suite failed (exit $rc)"
	expect_grep '^100%: Checks: [1-9][0-9]*, Failures: 0, Errors: 0$' "$O/xrc" "Check summary"
	ok "$(grep -E '^[0-9]+%: Checks' "$O/xrc")"
	nothing_left "after the XRC suite"
	# targets that changed owners left every context's books even
	expect_no_grep 'unaccounted' "$DAEMON_LOG" "the daemon's log"
fi

# A target whose creator closes moves to a context that opened it, and
# its rings with it: a closed context's ring arena (2 GiB of the daemon's
# address space, a memfd) must not stay behind, uncharged, for as long as
# the holder lives.
arenas() { grep -c 'memfd:ibvd-rings' "/proc/$DAEMON_PID/maps"; }
if [ -x "$HELPER" ]; then
	check "XRC targets taken over leave no arena of their creators'"
	before=$(arenas)
	mkfifo "$T/takeovers.in"
	# closing contexts with their objects alive leaks the app's structs
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
		run_ours "$USER1" "$HELPER" --takeovers 40 <"$T/takeovers.in" >"$O/takeovers" 2>&1 &
	tpid=$!
	BG_PIDS+=("$tpid")
	exec 7>"$T/takeovers.in"
	for _ in $(seq $((100 * TMUL))); do
		grep -q 'targets taken over' "$O/takeovers" || ! pid_running "$tpid" || { sleep 0.1; continue; }
		break
	done
	during=$(arenas)
	exec 7>&-
	wait_exit "$tpid" "$TMO" || { term_bg "$tpid"; EXIT_STATUS=124; }
	show "xrc-helper --takeovers" "$O/takeovers"
	[ "$EXIT_STATUS" -eq 0 ] || fail "xrc-helper --takeovers exited $EXIT_STATUS"
	expect_grep '^40 targets taken over$' "$O/takeovers" "all 40 taken over"
	# the holder's two contexts (A and B of the fixture) have one each
	[ "$during" -le $((before + 2)) ] ||
		fail "$during ring arenas with 40 targets taken over (before: $before)"
	ok "ring arenas: $before before, $during with 40 targets taken over"
	nothing_left "after the takeovers"
fi

# ibvctl lists under each SRQ the QPs of its context that receive into
# it; an XRC target receives into an SRQ of whichever context shares its
# domain, whose handle number may be one of its own context's too.
if [ -x "$HELPER" ]; then
	check "resource show srq: an XRC target is listed under no SRQ of its own context's"
	mkfifo "$T/listing.in"
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
		run_ours "$USER1" "$HELPER" --listing <"$T/listing.in" >"$O/listing" 2>&1 &
	lpid=$!
	BG_PIDS+=("$lpid")
	exec 7>"$T/listing.in"
	for _ in $(seq $((100 * TMUL))); do
		grep -q '^target ' "$O/listing" || ! pid_running "$lpid" || { sleep 0.1; continue; }
		break
	done
	qpn=$(sed -n 's/^target \([0-9]*\) .*/\1/p' "$O/listing")
	[ -n "$qpn" ] || { exec 7>&-; show "xrc-helper --listing" "$O/listing"; fail "no target made"; }
	ibvctl -j resource show srq >"$O/srqs" 2>&1 || { exec 7>&-; show output "$O/srqs"; fail "resource show srq"; }
	cqn=$("$PYTHON" -c 'import json, sys; r = [x["cqn"] for x in json.load(open(sys.argv[1])) if "cqn" in x]; print(r[0] if r else "")' "$O/srqs")
	[ -n "$cqn" ] || { exec 7>&-; show srqs "$O/srqs"; fail "no XRC SRQ listed with its cqn"; }
	ibvctl -j resource show srq cqn "$cqn" >"$O/srqs-cqn" 2>&1 || { exec 7>&-; show output "$O/srqs-cqn"; fail "resource show srq cqn $cqn"; }
	exec 7>&-
	wait_exit "$lpid" "$TMO" || { term_bg "$lpid"; EXIT_STATUS=124; }
	[ "$EXIT_STATUS" -eq 0 ] || { show "xrc-helper --listing" "$O/listing"; fail "xrc-helper --listing exited $EXIT_STATUS"; }
	"$PYTHON" - "$O/srqs" "$qpn" <<-'EOF' || { show srqs "$O/srqs"; fail "target QP $qpn listed under an SRQ of its context"; }
	import json, sys
	rows, qpn = json.load(open(sys.argv[1])), int(sys.argv[2])
	basic = [r for r in rows if r["srqn"] == 0]
	sys.exit(0 if basic and not any(qpn in r.get("lqpn", []) for r in rows) else 1)
	EOF
	ok "target QP $qpn under no SRQ, beside a basic SRQ of the same handle number as the one it receives into"
	# as rdma lists them: an XRC SRQ's type, and the CQ it completes on
	"$PYTHON" - "$O/srqs" <<-'EOF' || { show srqs "$O/srqs"; fail "SRQ types or CQs listed wrong"; }
	import json, sys
	rows = json.load(open(sys.argv[1]))
	xrc = [r for r in rows if r["srqn"] != 0]
	basic = [r for r in rows if r["srqn"] == 0]
	sys.exit(0 if xrc and all(r["type"] == "XRC" and "cqn" in r for r in xrc) and
		 basic and all(r["type"] == "BASIC" and "cqn" not in r for r in basic) else 1)
	EOF
	ok "resource show srq: XRC SRQs as type XRC with their cqn, basic ones as BASIC"
	"$PYTHON" - "$O/srqs" "$O/srqs-cqn" "$cqn" <<-'EOF' || { show "srq cqn $cqn" "$O/srqs-cqn"; fail "resource show srq cqn $cqn listed the wrong SRQs"; }
	import json, sys
	every = json.load(open(sys.argv[1]))
	picked = json.load(open(sys.argv[2]))
	want = [r for r in every if r.get("cqn") == int(sys.argv[3])]
	sys.exit(0 if picked and sorted(map(str, picked)) == sorted(map(str, want)) else 1)
	EOF
	ok "resource show srq cqn $cqn: the XRC SRQs completing on that CQ, no basic one"
	nothing_left "after the listing"
fi

# A shared domain holds its file, as the kernel holds its inode: once the
# file is unlinked and closed, its inode number would otherwise go to the
# next new file, another uid's too, which would then open this domain.
if [ -x "$HELPER" ]; then
	check "a shared XRC domain holds its file, unlinked, until its last close"
	mkfifo "$T/unlinked.in"
	run_ours "$USER1" "$HELPER" --unlinked <"$T/unlinked.in" >"$O/unlinked" 2>&1 &
	upid=$!
	BG_PIDS+=("$upid")
	exec 7>"$T/unlinked.in"
	wait_line() {	# REGEX: until the helper printed it, or died
		for _ in $(seq $((100 * TMUL))); do
			grep -q "$1" "$O/unlinked" || ! pid_running "$upid" || { sleep 0.1; continue; }
			break
		done
		grep -q "$1" "$O/unlinked" ||
			{ exec 7>&-; show "xrc-helper --unlinked" "$O/unlinked"; fail "xrc-helper --unlinked printed no '$1'"; }
	}
	# the daemon's O_PATH fds (flags 010000000) on the unlinked file: the
	# client's own, passed with the call, is not one, whenever the closer
	# threads close it
	held() {
		local fd flags n=0
		for fd in $(find "/proc/$DAEMON_PID/fd" -lname "$upath (deleted)" 2>/dev/null); do
			flags=$(sed -n 's/^flags:[[:space:]]*//p' "/proc/$DAEMON_PID/fdinfo/${fd##*/}" 2>/dev/null)
			[ -n "$flags" ] && (( (8#$flags) & 8#10000000 )) && n=$((n + 1))
		done
		echo "$n"
	}
	wait_line '^held '
	upath=$(sed -n 's/^held //p' "$O/unlinked")
	n_held=$(held)
	echo >&7
	wait_line '^closed$'
	# the domain's own fd goes to its maker's close queue: soon
	for _ in $(seq $((50 * TMUL))); do
		[ "$(held)" -eq 0 ] && break
		sleep 0.1
	done
	n_closed=$(held)
	exec 7>&-
	wait_exit "$upid" "$TMO" || { term_bg "$upid"; EXIT_STATUS=124; }
	[ "$EXIT_STATUS" -eq 0 ] || { show "xrc-helper --unlinked" "$O/unlinked"; fail "xrc-helper --unlinked exited $EXIT_STATUS"; }
	[ "$n_held" -eq 1 ] || fail "the daemon held $n_held O_PATH fds of the domain's unlinked file, not 1"
	[ "$n_closed" -eq 0 ] || fail "the daemon still held $n_closed O_PATH fds of the file after the domain's last close"
	ok "the daemon held the unlinked $upath while the domain lived, and let go at its close"
	nothing_left "after the unlinked domain"
fi

# xsrq ARGS...: ibv_xsrq_pingpong server (uid 1001) and client (uid 1002).
# Each opens its XRC domain through /tmp/xrc_domain (O_CREAT, mode 0440):
# the client, another uid, cannot open the server's file and so works in a
# private domain, as it would on a NIC.  None is left before or after.
xsrq() {
	local port spid rc_c what="ibv_xsrq_pingpong${*:+ $*}"
	check "$what"
	[ -n "${XSRQ_KEEP:-}" ] || rm -f /tmp/xrc_domain
	port=$(free_port) || exit 1
	run_debian "$USER1" ibv_xsrq_pingpong -p "$port" "$@" >"$O/xsrq.server" 2>&1 &
	spid=$!
	BG_PIDS+=("$spid")
	wait_tcp_listen "$port" "$spid" || { show server "$O/xsrq.server"; fail "$what: no server"; }
	run_debian "$USER2" ibv_xsrq_pingpong -p "$port" "$@" localhost >"$O/xsrq.client" 2>&1
	rc_c=$?
	wait_exit "$spid" "$TMO" || { term_bg "$spid"; EXIT_STATUS=124; }
	[ -n "${XSRQ_KEEP:-}" ] || rm -f /tmp/xrc_domain
	if [ "$rc_c" -ne 0 ] || [ "$EXIT_STATUS" -ne 0 ]; then
		show server "$O/xsrq.server"
		show client "$O/xsrq.client"
		fail "$what: client exited $rc_c, server $EXIT_STATUS"
	fi
	show client "$O/xsrq.client"
	ok "$what"
}
xsrq
xsrq -n 1000 -s 4096
xsrq -n 200 -s 65536
xsrq -e -n 200
# A domain file both uids can read (root's, 0444): one domain, both sides.
shared_xsrq() {
	rm -f /tmp/xrc_domain
	install -m 0444 /dev/null /tmp/xrc_domain
	XSRQ_KEEP=1 xsrq -n 500
	expect_no_grep "Couldn't create the file" "$O/xsrq.client" "the client opened the shared file"
	expect_no_grep "Couldn't create the file" "$O/xsrq.server" "the server opened the shared file"
	rm -f /tmp/xrc_domain
	ok "both uids in one XRC domain"
}
shared_xsrq

# perftest PROG: server uid 1001, client uid 1002, -c XRC.  perftest keeps
# each side's XRC domain in a file of its own, /tmp/xrc_domain_server and
# /tmp/xrc_domain_client (open O_CREAT, mode 0440): one left by another uid
# would make open() fail, so none is left before or after.
XRC_FILES=(/tmp/xrc_domain_server /tmp/xrc_domain_client)
perftest() {
	local prog=$1 port spid rc_c
	check "$prog -c XRC"
	rm -f "${XRC_FILES[@]}"
	port=$(free_port) || exit 1
	run_debian "$USER1" "$prog" -d ibvd0 -c XRC -n 1000 -p "$port" >"$O/$prog.server" 2>&1 &
	spid=$!
	BG_PIDS+=("$spid")
	wait_tcp_listen "$port" "$spid" || { show server "$O/$prog.server"; fail "$prog: no server"; }
	run_debian "$USER2" "$prog" -d ibvd0 -c XRC -n 1000 -p "$port" 127.0.0.1 >"$O/$prog.client" 2>&1
	rc_c=$?
	wait_exit "$spid" "$TMO" || { term_bg "$spid"; EXIT_STATUS=124; }
	rm -f "${XRC_FILES[@]}"
	if [ "$rc_c" -ne 0 ] || [ "$EXIT_STATUS" -ne 0 ]; then
		show server "$O/$prog.server"
		show client "$O/$prog.client"
		fail "$prog -c XRC: client exited $rc_c, server $EXIT_STATUS"
	fi
	expect_grep '^ *65536 +1000 ' "$O/$prog.client" "$prog -c XRC: the result line"
	ok "$(grep -E '^ *65536 +1000 ' "$O/$prog.client" | tr -s ' ')"
}
perftest ib_send_bw
perftest ib_write_bw

daemon_alive "after XRC"

nothing_left "after everything"
daemon_stop
