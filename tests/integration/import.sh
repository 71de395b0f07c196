#!/bin/bash
# Sharing a device context between processes (issue 11): import-helper
# (tests/integration/import.c).  uid $USER1 opens the device and hands its
# cmd_fd to uid $USER2, which imports the context, a PD and an MR
# (ibv_import_device/pd/mr), works through them beside its own objects,
# and keeps the context after the owner's ibv_close_device.  Then nothing
# of either is left in the daemon.  Last, uid $USER2 registers an MR on a
# file of its own in uid $USER1's context and leaves: uid $USER1's RDMA
# into it works, through the engine, and never brings it that file.  And
# when a context's creator leaves it to an importer of its own uid and one
# of another, ibvctl client show counts its objects under its own uid's.
. "$(dirname "$0")/lib.sh"

ibvd_init
O=$T/out
HELPER=$T/bin/import-helper
[ -x "$HELPER" ] || fail "tests/integration/import-helper not built"
export VT_TMUL=$TMUL
mkdir -p "$O"

daemon_start -c "$(default_conf)"
daemon_wait_ready

# meet NAME PREFIX: import-helper PREFIXowner as uid $USER1 and
# PREFIXimporter as uid $USER2, meeting in $O/NAME; both must succeed.
# Their output: $O/NAME.owner, $O/NAME.importer.
meet() {
	local d=$O/$1 irc orc opid
	mkdir -p "$d" && chmod 1777 "$d" || fail "mkdir $d"
	run_ours "$USER1" "$HELPER" "${2}owner" "$d" >"$d.owner" 2>&1 &
	opid=$!
	BG_PIDS+=("$opid")
	run_ours "$USER2" "$HELPER" "${2}importer" "$d" >"$d.importer" 2>&1
	irc=$?
	wait_exit "$opid" "$TMO" || { show owner "$d.owner"; fail "the owner did not finish"; }
	orc=$EXIT_STATUS
	show "owner (uid $USER1)" "$d.owner"
	show "importer (uid $USER2)" "$d.importer"
	[ "$irc" -eq 0 ] || fail "the importer's checks failed (exit $irc)"
	[ "$orc" -eq 0 ] || fail "the owner's checks failed (exit $orc)"
}

check "uid $USER2 imports uid $USER1's context, PD and MR"
meet meet ""
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
meet grant grant-
ok "$(sed -n 's/^owner: //p' "$O/grant.owner")"

# 65fe400: a context's objects stay charged to its creator's uid when it
# leaves; ibvctl's row for them was the first member left, of any uid.
check "the creator leaves: its context's objects show under its own uid's importer"
d=$O/standin
mkdir -p "$d/a" "$d/b" && chmod 1777 "$d" "$d/a" "$d/b" || fail "mkdir $d"
run_ours "$USER1" "$HELPER" standin-owner "$d" >"$O/sowner" 2>&1 &
opid=$!
BG_PIDS+=("$opid")
run_ours "$USER1" "$HELPER" standin-importer "$d" a >"$O/simp-a" 2>&1 &
apid=$!
BG_PIDS+=("$apid")
run_ours "$USER2" "$HELPER" standin-importer "$d" b >"$O/simp-b" 2>&1 &
bpid=$!
BG_PIDS+=("$bpid")
wait_exit "$opid" "$TMO" || { show owner "$O/sowner"; fail "the owner did not finish"; }
[ "$EXIT_STATUS" -eq 0 ] || { show owner "$O/sowner"; fail "the owner failed (exit $EXIT_STATUS)"; }
# the rows of the importers a and b, once the owner's is gone
rows() {
	"$PYTHON" - "$O/clients" "$(cat "$d/closed")" "$(cat "$d/a/joined")" \
		"$(cat "$d/b/joined")" <<-'EOF'
	import json, sys
	rows = {r["pid"]: r for r in json.load(open(sys.argv[1]))}
	if int(sys.argv[2]) in rows:
	    sys.exit(1)
	print(" ".join("%s:%s" % (rows[int(p)]["uid"], rows[int(p)]["objects"])
	               if int(p) in rows else "none" for p in sys.argv[3:]))
	EOF
}
for _ in $(seq $((50 * TMUL))); do
	ibvctl -j client show >"$O/clients" 2>&1 || { show out "$O/clients"; fail "client show"; }
	rows=$(rows) && break
	sleep 0.1
done
echo 1 >"$d/end"
[ -n "$rows" ] || { show clients "$O/clients"; fail "the owner's row stays after it exited"; }
for p in "$apid" "$bpid"; do
	wait_exit "$p" "$TMO" || fail "an importer did not finish"
	[ "$EXIT_STATUS" -eq 0 ] || { show a "$O/simp-a"; show b "$O/simp-b"; fail "an importer failed"; }
done
read -r row_a row_b <<<"$rows"
[ "${row_a%%:*}" = "$USER1" ] && [ "${row_a#*:}" -ge 4 ] && [ "$row_b" = "$USER2:0" ] ||
	{ show clients "$O/clients"; fail "rows uid:objects of uid $USER1's importer $row_a, of uid $USER2's $row_b: want the objects under uid $USER1"; }
ok "uid $USER1's importer $row_a, uid $USER2's $row_b (uid:objects)"

daemon_alive "after the import test"
daemon_stop
