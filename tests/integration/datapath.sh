#!/bin/bash
# The verbs data path of one process against a real daemon: every opcode,
# flag and completion status on loopback QPs, post errors, the QP state
# machine, CQ/channel/SRQ/AH/multicast objects and the kinds of memory an
# application registers -- the Check program datapath-helper
# (tests/integration/datapath.c), run through ibverbsd-run as uid $USER1.
. "$(dirname "$0")/lib.sh"

ibvd_init
O=$T/out
HELPER=$T/bin/datapath-helper
[ -x "$HELPER" ] || fail "tests/integration/datapath-helper not built"

# Timeouts inside the helper scale like ours; Check's per-case bound too.
export VT_TMUL=$TMUL
RUN_TMO=$((TMO * 6))

daemon_start -c "$(default_conf)"
daemon_wait_ready

check "the data-path suite as uid $USER1"
start=$(date +%s)
TMO=$RUN_TMO run_ours "$USER1" "$HELPER" >"$O/datapath" 2>&1
rc=$?
show "datapath-helper" "$O/datapath"
log "ran in $(($(date +%s) - start)) s"
grep -E '^SKIP: ' "$O/datapath" | while read -r line; do log "$line"; done
case $rc in
0) ;;
124|137) fail "the data-path suite hung (killed after $RUN_TMO s)" ;;
*) fail "the data-path suite failed (exit $rc): $(grep -cE ':[EF]:' "$O/datapath") failing cases" ;;
esac
expect_grep '^100%: Checks: [1-9][0-9]*, Failures: 0, Errors: 0$' "$O/datapath" "Check summary"
daemon_alive "after the data-path suite"
ok "$(grep -E '^[0-9]+%: Checks' "$O/datapath")"
daemon_stop
