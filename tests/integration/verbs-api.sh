#!/bin/bash
# Every libibverbs entry point implemented so far, against a real daemon:
# the Check program verbs-api-helper (tests/integration/verbs-api.c), an
# ordinary verbs application run through ibverbsd-run as an unprivileged
# uid.  Then its death mode: it holds contexts on both devices while the
# daemon is SIGKILLed and checks the fatal event, EIO and failing queries.
. "$(dirname "$0")/lib.sh"

ibvd_init
O=$T/out
HELPER=$T/bin/verbs-api-helper
[ -x "$HELPER" ] || fail "tests/integration/verbs-api-helper not built"

# The devices verbs-api.c expects.
cat >"$T/two.conf" <<EOF
{
  "socket": { "path": "$SOCK" },
  "devices": [
    { "name": "ibvd0", "ports": 1, "lid": 1 },
    { "name": "ibvd1", "ports": 2, "lid": 10 }
  ]
}
EOF
chmod 644 "$T/two.conf"

# The Check program runs many cases, each in its own process.
RUN_TMO=$((TMO * 3))

check "the API suite as uid $USER1"
daemon_start -c "$T/two.conf"
daemon_wait_ready
TMO=$RUN_TMO run_ours "$USER1" "$HELPER" >"$O/api" 2>&1
rc=$?
show "verbs-api-helper" "$O/api"
case $rc in
0) ;;
124|137) fail "the API suite hung (killed after $RUN_TMO s)" ;;
*) fail "the API suite failed (exit $rc)" ;;
esac
expect_grep '^100%: Checks: [1-9][0-9]*, Failures: 0, Errors: 0$' "$O/api" "Check summary"
daemon_alive "after the API suite"
ok "$(grep -E '^[0-9]+%: Checks' "$O/api")"
daemon_stop

check "death mode: the daemon is SIGKILLed under open contexts"
daemon_start -c "$T/two.conf"
daemon_wait_ready
ready=$O/death.ready
TMO=$RUN_TMO run_ours "$USER1" "$HELPER" death "$ready" >"$O/death" 2>&1 &
hpid=$!
BG_PIDS+=("$hpid")
for _ in $(seq $((TMO * 10))); do
	[ -e "$ready" ] && break
	pid_running "$hpid" || break
	sleep 0.1
done
[ -e "$ready" ] || { show "verbs-api-helper death" "$O/death"; fail "the helper never got ready"; }
sleep 0.3	# let it block in ibv_get_async_event
daemon_alive "before SIGKILL"
daemon_kill	# SIGKILL and reap
wait_exit "$hpid" "$TMO" || { show "verbs-api-helper death" "$O/death"; fail "the helper still runs $TMO s after the daemon died"; }
show "verbs-api-helper death" "$O/death"
[ "$EXIT_STATUS" -eq 0 ] || fail "death mode failed (exit $EXIT_STATUS)"
expect_grep '^100%: Checks: 1, Failures: 0, Errors: 0$' "$O/death" "Check summary"
ok "one IBV_EVENT_DEVICE_FATAL per context, then EIO; queries fail at once; close returns 0"
