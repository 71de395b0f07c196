#!/bin/bash
# A daemon that stalls past a client's timeout (here SIGSTOP; the context
# client waits 300 ms for the calls made meanwhile, the default 30 s for
# the others, which a loaded machine may answer slowly; a program
# started meanwhile has IBVERBSD_TIMEOUT_MS at 300): the client's creates
# fail with ETIMEDOUT, and what the daemon makes of them once it runs again is
# destroyed when their late replies come, instead of staying charged to
# the tenant until the context closes; an import (ibv_import_dm), which
# makes nothing, is not undone.  A program that starts meanwhile fails
# with ETIMEDOUT and says why.  The context works on afterwards.
. "$(dirname "$0")/lib.sh"

ibvd_init
O=$T/out
conf=$(default_conf) || exit 1
daemon_start -c "$conf"
daemon_wait_ready

ctx_ok() {
	ctx_cmd "$1" || fail "$1: $CTX_ANSWER"
	case $CTX_ANSWER in
	"$2"*) ;;
	*) fail "$1: $CTX_ANSWER" ;;
	esac
}

# counts: "pds cqs qps" the daemon holds on ibvd0 (the one client's)
counts() {
	ibvctl -j resource show >"$O/res" 2>"$O/res.err" ||
		{ show stderr "$O/res.err"; fail "ibvctl -j resource show"; }
	python3 - "$O/res" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
rows = [r for r in doc if r.get("ifname") == "ibvd0"]
if len(rows) != 1:
    sys.exit("no single row for ibvd0 in %s" % doc)
print(rows[0]["pd"], rows[0]["cq"], rows[0]["qp"])
EOF
}

check "creates that time out while the daemon is stopped leave nothing behind once it runs again"
ctx_start "$USER1"
ctx_ok hold "ok hold"
before=$(counts) || fail "$before"
log "held: pd cq qp = $before"

kill -STOP "$DAEMON_PID"
ctx_cmd unanswered
answer=$CTX_ANSWER
kill -CONT "$DAEMON_PID"
[ "$answer" = "ok unanswered" ] || fail "creates of a stopped daemon: $answer (want ETIMEDOUT each)"
ok "alloc_pd, create_cq and create_qp each failed with ETIMEDOUT"

# The daemon, running again, carries the creates out: the undo below has
# something to undo (else equal counts would prove nothing).
read -r pd cq qp <<<"$before"
made=""
for _ in $(seq 50); do
	mid=$(counts) || fail "$mid"
	[ "$mid" = "$((pd + 1)) $((cq + 1)) $((qp + 1))" ] && { made=1; break; }
	sleep 0.1
done
[ -n "$made" ] || fail "the daemon holds pd cq qp = $mid after the stall, want one more of each"
ok "the daemon made them once running: pd cq qp = $mid"

# The first call reads the late replies and sends the destroys; the
# daemon takes requests in order, so the second's reply comes after them.
ctx_ok query "ok query"
ctx_ok query "ok query"
after=$(counts) || fail "$after"
[ "$after" = "$before" ] || fail "the daemon holds pd cq qp = $after for the client, $before before the stall"
ok "pd cq qp = $after, as before the stall"

check "an import that times out leaves the device memory with its owner"
ctx_ok dm "ok dm"
kill -STOP "$DAEMON_PID"
ctx_cmd "unanswered import"
answer=$CTX_ANSWER
kill -CONT "$DAEMON_PID"
[ "$answer" = "ok unanswered import" ] || fail "an import of a stopped daemon: $answer (want ETIMEDOUT)"
ctx_ok query "ok query"
ctx_ok query "ok query"
ctx_ok dmfree "ok dmfree"
ok "the owner freed its DM after the late reply to the import"

check "a program that starts while the daemon is stopped is told so"
debian_env
kill -STOP "$DAEMON_PID"
run_as "$USER1" env IBVERBSD_TIMEOUT_MS=300 "${DEBIAN_ENV[@]}" \
	"$T/tools/ibverbsd-run" /usr/bin/ibv_devices >"$O/devs" 2>"$O/devs.err"
rc=$?
# Not a number: the default (30 s) applies; "1s" once read as 1 ms.
run_as "$USER1" env IBVERBSD_TIMEOUT_MS=1s "${DEBIAN_ENV[@]}" \
	timeout 2 "$T/tools/ibverbsd-run" /usr/bin/ibv_devices >/dev/null 2>"$O/devs1s.err"
rc1s=$?
kill -CONT "$DAEMON_PID"
show stderr "$O/devs.err"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "ibv_devices of a stopped daemon: exit $rc (want a failure, not a hang)"
expect_grep "did not answer in time" "$O/devs.err" "the warning"
expect_grep "Connection timed out" "$O/devs.err" "ibv_devices' perror"
ok "ibv_devices failed with ETIMEDOUT and one line naming the socket"
[ "$rc1s" -eq 124 ] || { show stderr "$O/devs1s.err"; fail "IBVERBSD_TIMEOUT_MS=1s: exit $rc1s in 2 s (want the 30 s default, still waiting)"; }
ok "IBVERBSD_TIMEOUT_MS=1s is not a number of milliseconds: the default applies"

check "the context works on"
ctx_ok loopback "ok loopback 4096 bytes"
ctx_ok release "ok release"
ctx_stop
ok "loopback and release after the stall"
