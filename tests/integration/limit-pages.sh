#!/bin/bash
# ibvctl limit show with more tenants than one reply frame holds: the
# daemon answers in pages of whole tenants, ibvctl asks for each, and the
# listing (text and -j) is one list of every tenant, each once, in uid
# order.  A daemon with 16 devices makes each tenant 17 rows (about
# 6.5 KB of JSON); 14 uids holding a connection fill more than one page.
. "$(dirname "$0")/lib.sh"

is_root || skip "needs root to connect as other uids"
ibvd_init
O=$T/out
conf=$(default_conf) || exit 1
"$PYTHON" - "$conf" <<'PY' || fail "cannot add devices to $conf"
import json, sys
cfg = json.load(open(sys.argv[1]))
cfg["devices"] = [{"name": "ibvd%d" % i, "ports": 1} for i in range(16)]
json.dump(cfg, open(sys.argv[1], "w"), indent=2)
PY
daemon_start -c "$conf"
daemon_wait_ready

UIDS=$(seq 3001 3014)

check "14 uids hold a connection each"
for u in $UIDS; do
	setpriv --reuid="$u" --regid="$u" --clear-groups -- "$PYTHON" -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
time.sleep(600)' "$SOCK" &
	BG_PIDS+=("$!")
	sleep 0.2; pid_running "$!" || fail "the holder of uid $u exited"
done
# they are tenants once the daemon has their connections
up=""
for _ in $(seq 100); do
	ibvctl -j limit show uid 3014 >"$O/probe" 2>"$O/probe.err" &&
		grep -q '"uid":3014,"dev":"all"' "$O/probe" &&
		grep -q '"hca_handle":"max"' "$O/probe" && { up=1; break; }
	sleep 0.1
done
[ -n "$up" ] || { show probe "$O/probe"; fail "uid 3014 is no tenant after 10 s"; }
ok "connections up"

check "limit show -j: every tenant once, whole, in uid order, over several pages"
ibvctl -j limit show >"$O/all.json" 2>"$O/all.err" ||
	{ show stderr "$O/all.err"; fail "ibvctl -j limit show failed"; }
"$PYTHON" - "$O/all.json" "$UIDS" <<'PY' || { show json "$O/all.json"; fail "the listing is not every tenant once"; }
import json, sys
rows = json.load(open(sys.argv[1]))
want = [0] + [int(u) for u in sys.argv[2].split()]
uids = [r["uid"] for r in rows if r["dev"] == "all"]
assert uids == want, "uids %s, want %s" % (uids, want)
for u in want:
    devs = [r["dev"] for r in rows if r["uid"] == u]
    assert devs == ["all"] + ["ibvd%d" % i for i in range(16)], (u, devs)
assert not any("more_after" in r for r in rows), "a page marker is left"
size = len(json.dumps(rows, separators=(",", ":")))
assert size > 65536, "the listing (%d bytes) fits one frame: no paging shown" % size
print("%d rows, %d bytes" % (len(rows), size))
PY
ok "$(wc -c <"$O/all.json") bytes of JSON, uid 0 and the 14 uids, 17 rows each"

check "limit show (text) and limit show current: one line per row"
ibvctl limit show >"$O/all.txt" 2>"$O/all.txt.err" || { show stderr "$O/all.txt.err"; fail "ibvctl limit show failed"; }
[ "$(wc -l <"$O/all.txt")" -eq $((15 * 17)) ] || fail "$(wc -l <"$O/all.txt") lines, want $((15 * 17))"
ibvctl limit show current >"$O/cur.txt" 2>"$O/cur.err" || { show stderr "$O/cur.err"; fail "ibvctl limit show current failed"; }
[ "$(wc -l <"$O/cur.txt")" -eq $((15 * 17)) ] || fail "current: $(wc -l <"$O/cur.txt") lines, want $((15 * 17))"
ok "255 lines each"

check "a filter still narrows the pages: uid 3007, dev ibvd3"
ibvctl -j limit show uid 3007 >"$O/one.json" 2>&1 || fail "limit show uid 3007"
expect_grep '"uid":3007' "$O/one.json" "uid 3007's rows"
[ "$(grep -o '"dev":' "$O/one.json" | wc -l)" -eq 17 ] || { show json "$O/one.json"; fail "uid 3007: not 17 rows"; }
ibvctl -j limit show dev ibvd3 >"$O/dev.json" 2>&1 || fail "limit show dev ibvd3"
[ "$(grep -o '"dev":"ibvd3"' "$O/dev.json" | wc -l)" -eq 15 ] || { show json "$O/dev.json"; fail "dev ibvd3: not 15 rows"; }
ok "17 rows for one uid, 15 for one device"

daemon_stop
