#!/bin/bash
# rsockets across hosts (netns.sh: two namespaces, a RoCE device in each):
# a peer gone without a word is found by keepalives.  A Python pair under
# librspreload (preload-keepalive.py watch-*), server in A, client in B,
# with SO_KEEPALIVE, TCP_KEEPIDLE 2, TCP_KEEPINTVL 1, TCP_KEEPCNT 2, talks
# once and sits idle; B's daemon is then stopped (SIGSTOP: its host as
# good as down, nothing answers).  The server must see the connection end
# with ETIMEDOUT and POLLERR|POLLHUP, as TCP's keepalive reports a dead
# peer, within TCP_KEEPIDLE + the QP's retries (about 4 s here) + slack:
# 12 s.  (Once the keepalive thread hung the process under the preload,
# and a failed keepalive read as ECONNRESET.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns.sh"

is_root || skip "network namespaces need root"
need_cmd python3
ibvd_init
O=$T/out
mkdir -p "$O"
wire_up
mkdir -p "$T/lib/rsocket" && cp -a "$top_builddir"/client/.libs/librspreload.so* "$T/lib/rsocket/" ||
	fail "staging librspreload.so"
chmod -R a+rX "$T/lib/rsocket"
PRELOAD=$T/lib/rsocket/librspreload.so
PORT=7000
BOUND_S=12

# in_ns NS SOCKET OUT UID PROG...: PROG under the preload in NS, in the
# background (BG its pid).
in_ns() {
	local ns=$1 sock=$2 out=$3 uid=$4 pre=$PRELOAD e
	shift 4
	debian_env
	for e in "${DEBIAN_ENV[@]}"; do
		case $e in LD_PRELOAD=*) pre="${e#LD_PRELOAD=} $PRELOAD" ;; esac
	done
	(cd "$T" && exec ip netns exec "$ns" timeout -k 2 $((TMO * 4)) \
		setpriv --reuid="$uid" --regid="$uid" --clear-groups -- \
		env "${DEBIAN_ENV[@]}" LD_PRELOAD="$pre" IBVERBSD_SOCKET="$sock" \
		"$T/tools/ibverbsd-run" "$@") >"$out" 2>"$out.err" &
	BG=$!
	BG_PIDS+=("$BG")
}

check "keepalives find a peer whose host went silent within $BOUND_S s"
in_ns "$NSA" "$SOCK_A" "$O/srv" "$USER1" "$PYTHON" "$T/bin/preload-keepalive.py" watch-server "$IPA" "$PORT"
spid=$BG
cm_listening "$SOCK_A" "$PORT" "$spid" || { show "server" "$O/srv.err"; fail "the server did not listen"; }
in_ns "$NSB" "$SOCK_B" "$O/cli" "$USER2" "$PYTHON" "$T/bin/preload-keepalive.py" watch-client "$IPA" "$PORT"
cpid=$BG
for _ in $(seq $((TMO * 10))); do
	grep -q connected "$O/srv" && grep -q connected "$O/cli" && break
	sleep 0.1
done
grep -q connected "$O/srv" && grep -q connected "$O/cli" ||
	{ show "server" "$O/srv.err"; show "client" "$O/cli.err"; fail "the pair did not connect"; }
kill -STOP "$PID_B" || fail "cannot stop B's daemon"
wait_exit "$spid" $((BOUND_S * 3))
kill -CONT "$PID_B"
show "server" "$O/srv"
show "server (stderr)" "$O/srv.err"
wait_exit "$cpid" "$TMO"
line=$(grep '^ended' "$O/srv") || fail "the server never saw its connection end"
read -r _ _ took _ _ rev _ err <<<"$line"
[ "$err" -eq 110 ] || fail "the read after a silent peer failed with errno $err, want ETIMEDOUT (110)"
[ $((rev & 0x18)) -eq $((0x18)) ] || fail "revents $rev after a silent peer, want POLLERR|POLLHUP"
"$PYTHON" -c "import sys; sys.exit(0 if float(sys.argv[1]) <= $BOUND_S else 1)" "$took" ||
	fail "the silent peer was found after $took s, want $BOUND_S s at most"
ok "a silent peer found after $took s: revents $rev, ETIMEDOUT"
