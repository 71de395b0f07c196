#!/bin/bash
# Sharing a device context between processes (issue 11): import-helper
# (tests/integration/import.c).  uid $USER1 opens the device and hands its
# cmd_fd to uid $USER2, which imports the context, a PD and an MR
# (ibv_import_device/pd/mr), works through them beside its own objects,
# and keeps the context after the owner's ibv_close_device.  Then nothing
# of either is left in the daemon.  Last, uid $USER2 registers an MR on a
# file of its own in uid $USER1's context and leaves: uid $USER1's RDMA
# into it works, through the engine, and never brings it that file.
. "$(dirname "$0")/lib.sh"

ibvd_init
O=$T/out
HELPER=$T/bin/import-helper
[ -x "$HELPER" ] || fail "tests/integration/import-helper not built"
export VT_TMUL=$TMUL
mkdir -p "$O"

daemon_start -c "$(default_conf)"
daemon_wait_ready

check "uid $USER2 imports uid $USER1's context, PD and MR"
d=$O/meet
mkdir -p "$d" && chmod 1777 "$d" || fail "mkdir $d"
run_ours "$USER1" "$HELPER" owner "$d" >"$O/owner" 2>&1 &
opid=$!
BG_PIDS+=("$opid")
run_ours "$USER2" "$HELPER" importer "$d" >"$O/importer" 2>&1
irc=$?
wait_exit "$opid" "$TMO" || { show owner "$O/owner"; fail "the owner did not finish"; }
orc=$EXIT_STATUS
show "owner (uid $USER1)" "$O/owner"
show "importer (uid $USER2)" "$O/importer"
[ "$irc" -eq 0 ] || fail "the importer's checks failed (exit $irc)"
[ "$orc" -eq 0 ] || fail "the owner's checks failed (exit $orc)"
ok "imported objects work; bad fds and handles fail cleanly; the context outlived its opener"

check "nothing of the shared context is left"
# left FILE: the objects and contexts every device still has ("" if none)
left() {
	"$PYTHON" -c 'import json, sys
left = ["%s %s %d" % (d["ifname"], k, d[k]) for d in json.load(open(sys.argv[1]))
        for k in ("ctx", "pd", "cq", "qp", "mr", "srq") if d.get(k)]
print(", ".join(left))' "$1"
}
for _ in $(seq $((50 * TMUL))); do
	ibvctl -j resource show >"$O/res" 2>&1 || { show res "$O/res"; fail "ibvctl resource show"; }
	rest=$(left "$O/res") || fail "cannot read ibvctl's JSON"
	[ -z "$rest" ] && break
	sleep 0.1
done
[ -z "$rest" ] || { show "resource show" "$O/res"; fail "left after both processes closed: $rest"; }
ok "no context, PD, CQ, QP, MR or SRQ left"
# 9b5a292: a file grant went to any uid once all the context's processes
# ran as it, so the owner got the importer's file after the importer left.
check "uid $USER2's file in uid $USER1's context, left there: never granted to uid $USER1"
d=$O/grant
mkdir -p "$d" && chmod 1777 "$d" || fail "mkdir $d"
run_ours "$USER1" "$HELPER" grant-owner "$d" >"$O/gowner" 2>&1 &
opid=$!
BG_PIDS+=("$opid")
run_ours "$USER2" "$HELPER" grant-importer "$d" >"$O/gimporter" 2>&1
irc=$?
wait_exit "$opid" "$TMO" || { show owner "$O/gowner"; fail "the owner did not finish"; }
orc=$EXIT_STATUS
show "owner (uid $USER1)" "$O/gowner"
show "importer (uid $USER2)" "$O/gimporter"
[ "$irc" -eq 0 ] || fail "the importer failed (exit $irc)"
[ "$orc" -eq 0 ] || fail "the owner's checks failed (exit $orc)"
ok "$(sed -n 's/^owner: //p' "$O/gowner")"

daemon_alive "after the import test"
daemon_stop
