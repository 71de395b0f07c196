#!/bin/bash
# ibvctl resource show while a real workload runs: Debian's ibv_srq_pingpong
# (16 RC QPs on an SRQ, with -e, a huge -n) between uid 1001 (server) and
# uid 1002 (client).  Checks the summary and every verbs kind (qp cq mr pd
# ctx srq) in JSON (parsed by python3) and text: counts, rdma's keys in
# rdma's order, filters (values, ranges, lists), -d's extra columns, what a
# non-root uid sees (its own objects only, no keys), bad command lines, and
# that everything is gone once the workload is killed.  Then client show
# for the same workload: usage, cgroup and the tenants' limits.
. "$(dirname "$0")/lib.sh"

need_cmd ss /usr/bin/ibv_srq_pingpong
ibvd_init
O=$T/out
conf=$(default_conf) || exit 1
# Limits far above the workload's, so that client show has numbers and
# "max" to show: uid 1001 gets a memlock limit of its own, 1002 does not.
MEMLOCK1=67108864
"$PYTHON" - "$conf" "$USER1" "$MEMLOCK1" <<'EOF' || fail "cannot add limits to $conf"
import json, sys
path, uid, memlock = sys.argv[1], sys.argv[2], int(sys.argv[3])
cfg = json.load(open(path))
cfg["limits"] = {"default": {"hca_handle": 8, "hca_object": 1000},
                 "uid": {uid: {"memlock": memlock}}}
json.dump(cfg, open(path, "w"), indent=2)
EOF
daemon_start -c "$conf"
daemon_wait_ready

NQP=16		# ibv_srq_pingpong's default -q

# jq_py FILE EXPR: print EXPR (python over `j`, the parsed JSON of FILE).
jq_py() {
	"$PYTHON" - "$1" "$2" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
print(eval(sys.argv[2]))
EOF
}

# expect_py FILE EXPR WHAT: EXPR must hold over `j`.
expect_py() {
	local v
	v=$(jq_py "$1" "$2") || { show json "$1"; fail "$3: cannot evaluate $2"; }
	[ "$v" = True ] || { show json "$1"; fail "$3: does not hold: $2"; }
}

# res ARGS...: ibvctl -j resource show ARGS into $O/r (as root); fails loudly.
res() {
	ibvctl -j resource show "$@" >"$O/r" 2>"$O/r.err" ||
		{ show stderr "$O/r.err"; fail "ibvctl -j resource show $* exited non-zero"; }
}

count() { jq_py "$O/r" 'len(j)'; }

# cgroup_of PID: its cgroup v2 path as the daemon shows it ("-": unknown).
cgroup_of() {
	local cg
	cg=$(sed -n 's/^0:://p' "/proc/$1/cgroup" 2>/dev/null)
	printf '%s\n' "${cg:--}"
}

pick_port() {
	"$PYTHON" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# ---- the workload --------------------------------------------------------
PORT=$(pick_port) || fail "no free TCP port"
# Long-lived: it is killed at the end of the test.
TMO=$((TMO * 10)) run_debian "$USER1" /usr/bin/ibv_srq_pingpong -e -n 2000000000 -p "$PORT" >"$O/server" 2>&1 &
SPID=$!
BG_PIDS+=("$SPID")
for _ in $(seq $((TMO * 20))); do
	[ -n "$(ss -Hltn "sport = :$PORT" 2>/dev/null)" ] && break
	pid_running "$SPID" || { show server "$O/server"; fail "the server exited"; }
	sleep 0.05
done
TMO=$((TMO * 10)) run_debian "$USER2" /usr/bin/ibv_srq_pingpong -e -n 2000000000 -p "$PORT" localhost >"$O/client" 2>&1 &
CPID=$!
BG_PIDS+=("$CPID")

check "both sides connected: $((2 * NQP)) QPs in RTS"
for _ in $(seq $((TMO * 20))); do
	res qp state RTS
	[ "$(count)" -eq $((2 * NQP)) ] && break
	pid_running "$CPID" || { show client "$O/client"; fail "the client exited"; }
	sleep 0.05
done
[ "$(count)" -eq $((2 * NQP)) ] || { show json "$O/r"; fail "$(count) QPs in RTS, not $((2 * NQP))"; }
ok "$((2 * NQP)) QPs in RTS"

# ---- summary ---------------------------------------------------------------
check "resource show: rdma's summary line and JSON keys"
ibvctl resource show >"$O/sum" 2>&1 || { show output "$O/sum"; fail "ibvctl resource show exited $?"; }
show "ibvctl resource show" "$O/sum"
expect_grep "^[0-9]+: ibvd0: pd 2 cq 2 qp $((2 * NQP)) cm_id 0 mr 2 ctx 2 srq 2\$" "$O/sum" "summary line"
ibvctl res >"$O/sum2" 2>&1 || fail "ibvctl res exited $?"
diff -u "$O/sum" "$O/sum2" || fail "'ibvctl res' differs from 'ibvctl resource show'"
res
expect_py "$O/r" "list(j[0]) == ['ifindex','ifname','pd','cq','qp','cm_id','mr','ctx','srq']" "summary keys"
res ibvd0
expect_py "$O/r" "len(j) == 1 and j[0]['ifname'] == 'ibvd0' and j[0]['qp'] == $((2 * NQP))" "res show ibvd0"
ibvctl_as "$USER2" -j resource show >"$O/sum-u2" 2>&1 || { show output "$O/sum-u2"; fail "uid $USER2: resource show failed"; }
expect_py "$O/sum-u2" "[j[0][k] for k in ('pd','cq','qp','mr','ctx','srq')] == [1,1,$NQP,1,1,1]" "uid $USER2's summary"
ok "$(head -n 1 "$O/sum"); uid $USER2 counts only its own"

# ---- each kind ---------------------------------------------------------------
check "resource show ctx/pd/cq/mr/srq/qp: rdma's keys in order"
res ctx
expect_py "$O/r" "len(j) == 2 and all(list(o) == ['ifindex','ifname','ctxn','pid','comm'] for o in j)" "ctx keys"
PIDS=$(jq_py "$O/r" "' '.join(str(o['pid']) for o in j)")
res pd
expect_py "$O/r" "len(j) == 2 and all(list(o) == ['ifindex','ifname','pdn','users','ctxn','pid','comm'] for o in j)" "pd keys"
expect_py "$O/r" "all(o['users'] == $NQP + 2 for o in j)" "pd users (16 QPs, the MR, the SRQ)"
res cq
expect_py "$O/r" "len(j) == 2 and all(list(o) == ['ifindex','ifname','cqn','cqe','users','ctxn','pid','comm'] for o in j)" "cq keys"
res mr
expect_py "$O/r" "len(j) == 2 and all(list(o) == ['ifindex','ifname','mrn','rkey','lkey','iova','mrlen','pdn','pid','comm'] for o in j)" "mr keys (root)"
expect_py "$O/r" "all(isinstance(o['rkey'], str) and not o['rkey'].startswith('0x') and int(o['rkey'], 16) > 0 for o in j)" "rkey as hex string"
res srq
expect_py "$O/r" "len(j) == 2 and all(list(o) == ['ifindex','ifname','srqn','type','lqpn','pdn','pid','comm'] for o in j)" "srq keys"
expect_py "$O/r" "all(len(o['lqpn']) == $NQP for o in j)" "srq lqpn lists"
res qp
expect_py "$O/r" "len(j) == $((2 * NQP)) and all(list(o) == ['ifindex','ifname','port','lqpn','rqpn','type','state','rq-psn','sq-psn','path-mig-state','pdn','pid','comm'] for o in j)" "qp keys"
expect_py "$O/r" "all(o['type'] == 'RC' and o['port'] == 1 for o in j)" "qp type and port"
# every QP's peer is one of the listed QPs
expect_py "$O/r" "sorted(o['rqpn'] for o in j) == sorted(o['lqpn'] for o in j)" "rqpn pairs"
ok "ctx pd cq mr srq qp rows as rdma prints them"

check "text output: link/dev headers, hex keys with 0x"
ibvctl resource show qp >"$O/qp.txt" 2>&1 || fail "res show qp exited $?"
expect_grep '^link ibvd0/1 lqpn [0-9]+ rqpn [0-9]+ type RC state RTS rq-psn [0-9]+ sq-psn [0-9]+ path-mig-state [A-Z]+ pdn [0-9]+ pid [0-9]+ comm ' "$O/qp.txt" "qp line"
ibvctl resource show mr >"$O/mr.txt" 2>&1 || fail "res show mr exited $?"
expect_grep '^dev ibvd0 mrn [0-9]+ rkey 0x[0-9a-f]+ lkey 0x[0-9a-f]+ iova 0x[0-9a-f]+ mrlen [0-9]+ pdn [0-9]+ pid [0-9]+ comm ' "$O/mr.txt" "mr line"
ibvctl resource show ctx >"$O/ctx.txt" 2>&1 || fail "res show ctx exited $?"
expect_grep '^dev ibvd0 ctxn [0-9]+ pid [0-9]+ comm ' "$O/ctx.txt" "ctx line"
ok "$(head -n 1 "$O/qp.txt")"

# ---- filters -----------------------------------------------------------------
check "filters: lqpn N, ranges, lists, pid, type, state, link, dev"
res qp
LQPNS=$(jq_py "$O/r" "' '.join(str(o['lqpn']) for o in j)")
MIN=$(jq_py "$O/r" "min(o['lqpn'] for o in j)")
MAX=$(jq_py "$O/r" "max(o['lqpn'] for o in j)")
ONE=${LQPNS%% *}
res qp lqpn "$ONE"
expect_py "$O/r" "len(j) == 1 and j[0]['lqpn'] == $ONE" "lqpn $ONE"
res qp lqpn "$MIN-$MAX"
[ "$(count)" -eq $((2 * NQP)) ] || fail "lqpn $MIN-$MAX: $(count) rows"
res qp lqpn "0-$((MIN - 1)),$((MAX + 1))-$((MAX + 100))"
[ "$(count)" -eq 0 ] || fail "lqpn outside $MIN-$MAX: $(count) rows"
res qp lqpn "$MIN,$MAX"
[ "$(count)" -eq 2 ] || fail "lqpn $MIN,$MAX: $(count) rows"
for p in $PIDS; do
	res qp pid "$p"
	expect_py "$O/r" "len(j) == $NQP and all(o['pid'] == $p for o in j)" "qp pid $p"
done
res qp type rc state rts
[ "$(count)" -eq $((2 * NQP)) ] || fail "type rc state rts: $(count) rows"
res qp type UD
[ "$(count)" -eq 0 ] || fail "type UD: $(count) rows"
res qp link ibvd0/1
[ "$(count)" -eq $((2 * NQP)) ] || fail "link ibvd0/1: $(count) rows"
# a port the device does not have is refused, as by link show
ibvctl -j resource show qp link ibvd0/2 >"$O/r" 2>"$O/r.err" && fail "link ibvd0/2 (a one-port device): not refused"
expect_grep 'invalid port ibvd0/2' "$O/r.err" "link ibvd0/2"
res mr dev ibvd0 pid "${PIDS%% *}"
[ "$(count)" -eq 1 ] || fail "mr dev ibvd0 pid: $(count) rows"
res ctx uid "$USER2"
[ "$(count)" -eq 1 ] || fail "ctx uid $USER2: $(count) rows"
res qp
COMM=$(jq_py "$O/r" "j[0]['comm']")
res qp comm "$COMM"
[ "$(count)" -eq $((2 * NQP)) ] || fail "qp comm $COMM: $(count) rows"
res qp comm nosuchprogram
[ "$(count)" -eq 0 ] || fail "qp comm nosuchprogram: $(count) rows"
res srq pid "${PIDS%% *}"
expect_py "$O/r" "len(j) == 1 and len(j[0]['lqpn']) == $NQP" "srq pid ${PIDS%% *}"
ok "lqpn $ONE, $MIN-$MAX, lists, pid, comm, uid, type, state, link and dev select as expected"

check "-d adds uid, cgroup (and the MR's memory tier) after rdma's keys"
ibvctl -j -d resource show mr >"$O/r" 2>&1 || fail "-d res show mr exited $?"
expect_py "$O/r" "all(list(o)[-4:] == ['comm','uid','cgroup','tier'] and o['tier'] in ('mapped','memfd') for o in j)" "-d mr"
expect_py "$O/r" "sorted(o['uid'] for o in j) == sorted([$USER1, $USER2])" "-d mr uids"
for k in qp cq pd ctx srq; do
	ibvctl -j -d resource show "$k" >"$O/r" 2>&1 || fail "-d res show $k exited $?"
	expect_py "$O/r" "len(j) > 0 and all(list(o)[-3:] == ['comm','uid','cgroup'] for o in j)" "-d $k"
done
# the cgroup is the process's cgroup v2 path, as /proc says
for p in $PIDS; do
	expect_py "$O/r" "[o['cgroup'] for o in j if o['pid'] == $p] == ['$(cgroup_of "$p")']" "-d srq cgroup of pid $p"
done
ibvctl -d resource show qp >"$O/qp-d.txt" 2>&1 || fail "-d res show qp (text) exited $?"
expect_grep ' comm [^ ]+ uid [0-9]+ cgroup [^ ]+$' "$O/qp-d.txt" "-d qp text line"
ibvctl resource show qp >"$O/qp.txt" 2>&1 || fail "res show qp exited $?"
expect_no_grep ' (uid|cgroup) ' "$O/qp.txt" "qp line without -d"
ok "uid, cgroup and tier present with -d, absent without"

# ---- visibility ----------------------------------------------------------------
check "uid $USER2 sees only its own objects, and no keys"
for k in ctx pd cq mr srq qp; do
	ibvctl_as "$USER2" -j -d resource show "$k" >"$O/u2.$k" 2>&1 ||
		{ show output "$O/u2.$k"; fail "uid $USER2: res show $k failed"; }
	expect_py "$O/u2.$k" "len(j) > 0 and all(o['uid'] == $USER2 for o in j)" "uid $USER2 res show $k"
done
expect_py "$O/u2.qp" "len(j) == $NQP" "uid $USER2 qp count"
expect_py "$O/u2.mr" "all('rkey' not in o and 'lkey' not in o and 'iova' not in o for o in j)" "no keys for uid $USER2"
ibvctl_as "$USER2" -j resource show ctx uid "$USER1" >"$O/u2.other" 2>&1 || fail "uid $USER2: ctx uid $USER1 failed"
expect_py "$O/u2.other" "j == []" "uid $USER2 asking for uid $USER1's contexts"
ok "uid $USER2: $NQP QPs, one each of the rest, keys hidden"

# ---- client show -------------------------------------------------------------------
check "client show: one row per pingpong process, with what it holds and its limits"
ibvctl -j client show >"$O/r" 2>&1 || { show output "$O/r"; fail "client show exited non-zero"; }
expect_py "$O/r" "len(j) == 2 and all(list(o) == ['pid','uid','gid','comm','cgroup','contexts','hca_handle','objects','hca_object','cm_id','pinned','memlock'] for o in j)" "client keys"
expect_py "$O/r" "all(type(o[k]) is int for o in j for k in ('pid','uid','gid','contexts','objects','cm_id','pinned','hca_handle','hca_object'))" "client integer columns"
# pd + mr + cq + srq + 16 QPs; the buffer is at least a page
expect_py "$O/r" "all(o['contexts'] == 1 and o['objects'] == $NQP + 4 and o['pinned'] >= 4096 for o in j)" "client usage"
expect_py "$O/r" "sorted(o['uid'] for o in j) == sorted([$USER1, $USER2]) and sorted(o['pid'] for o in j) == sorted([$(echo "$PIDS" | tr ' ' ',')])" "client identities"
# the limits of each uid's tenant: the default's, and uid 1001's memlock
expect_py "$O/r" "all(o['hca_handle'] == 8 and o['hca_object'] == 1000 for o in j)" "client hca limits"
expect_py "$O/r" "{o['uid']: o['memlock'] for o in j} == {$USER1: $MEMLOCK1, $USER2: 'max'}" "client memlock limits"
for p in $PIDS; do
	expect_py "$O/r" "[o['cgroup'] for o in j if o['pid'] == $p] == ['$(cgroup_of "$p")']" "client cgroup of pid $p"
done
CG=$(jq_py "$O/r" "j[0]['cgroup']")
for p in $PIDS; do
	ibvctl -j client show pid "$p" >"$O/r" 2>&1 || fail "client show pid $p exited non-zero"
	expect_py "$O/r" "len(j) == 1 and j[0]['pid'] == $p" "client show pid $p"
done
ibvctl -j client show uid "$USER1" >"$O/r" 2>&1 || fail "client show uid exited non-zero"
expect_py "$O/r" "len(j) == 1 and j[0]['uid'] == $USER1" "client show uid $USER1"
if [ "$CG" != - ]; then
	ibvctl -j client show cgroup "$CG" >"$O/r" 2>&1 || fail "client show cgroup $CG exited non-zero"
	expect_py "$O/r" "len(j) >= 1 and all(o['cgroup'].startswith('$CG') for o in j)" "client show cgroup $CG"
	ibvctl -j client show uid "$USER1" cgroup / >"$O/r" 2>&1 || fail "client show uid cgroup exited non-zero"
	expect_py "$O/r" "len(j) == 1 and j[0]['uid'] == $USER1" "client show uid $USER1 cgroup /"
fi
ibvctl -j client show cgroup /no/such/cgroup >"$O/r" 2>&1 || fail "client show cgroup /no/such/cgroup exited non-zero"
expect_py "$O/r" "j == []" "client show cgroup /no/such/cgroup"
ibvctl_as "$USER2" -j client show >"$O/r" 2>&1 || fail "uid $USER2: client show exited non-zero"
expect_py "$O/r" "len(j) == 1 and j[0]['uid'] == $USER2" "uid $USER2 sees only itself"
ibvctl client show >"$O/client.txt" 2>&1 || fail "client show (text) exited non-zero"
show "ibvctl client show" "$O/client.txt"
expect_grep "^pid [0-9]+ uid $USER2 gid [0-9]+ comm [^ ]+ cgroup [^ ]+ contexts 1 hca_handle 8 objects [0-9]+ hca_object 1000 cm_id 0 pinned [0-9]+ memlock max\$" "$O/client.txt" "client line (uid $USER2)"
expect_grep "^pid [0-9]+ uid $USER1 .* pinned [0-9]+ memlock $MEMLOCK1\$" "$O/client.txt" "client line (uid $USER1)"
ok "$(head -n 1 "$O/client.txt")"

# ---- bad command lines -----------------------------------------------------------
check "bad command lines exit non-zero with a message"
for args in "qp lqpn abc" "qp lqpn 5-2" "qp lqpn" "qp bogus 1" "mr rkey 1" \
	    "nosuchdev" "qp link nosuch/1" "qp link ibvd0/0" "c"; do
	# shellcheck disable=SC2086
	ibvctl resource show $args >"$O/bad" 2>&1
	rc=$?
	[ "$rc" -ne 0 ] || { show output "$O/bad"; fail "'resource show $args' exited 0"; }
	[ -s "$O/bad" ] || fail "'resource show $args': no message"
	log "resource show $args -> $rc: $(head -n 1 "$O/bad")"
done
# (statistic show itself: statistic.sh)
ibvctl statistic show link nosuchdev >"$O/bad" 2>&1 && fail "statistic show link nosuchdev exited 0"
expect_grep 'unknown device' "$O/bad" "statistic show link nosuchdev"
for args in "pid abc" "uid" "foo 1" "pid -1" "cgroup" "cgroup user.slice"; do
	# shellcheck disable=SC2086
	ibvctl client show $args >"$O/bad" 2>&1
	rc=$?
	[ "$rc" -ne 0 ] || { show output "$O/bad"; fail "'client show $args' exited 0"; }
	log "client show $args -> $rc: $(head -n 1 "$O/bad")"
done
ok "all refused"

# ---- more rows than a reply holds --------------------------------------------
# The listing stops at 2048 rows rather than build one that cannot be sent
# (on the daemon's control thread); the summary counts without rows.
check "uid $USER1 holds 3000 PDs: resource show pd is refused, the summary counts them"
[ -x "$T/bin/quota-helper" ] || fail "tests/integration/quota-helper not built"
ibvctl limit set uid "$USER1" hca_object=max pd=max >"$O/set" 2>&1 ||
	{ show "limit set" "$O/set"; fail "limit set uid $USER1"; }
rm -f "$T/many.in"
mkfifo "$T/many.in" && chmod 644 "$T/many.in" || fail "mkfifo"
run_ours "$USER1" "$T/bin/quota-helper" pd 3000 hold <"$T/many.in" >"$O/many" 2>&1 &
many=$!
exec 9>"$T/many.in"
for _ in $(seq $((TMO * 10))); do
	grep -q '^created' "$O/many" && break
	sleep 0.1
done
expect_grep '^created 3000 errno 0' "$O/many" "uid $USER1's PDs"
ibvctl resource show pd >"$O/bad" 2>&1 && { show output "$O/bad"; fail "resource show pd of 3000 PDs exited 0"; }
expect_grep 'more rows than one reply holds \([0-9]+ fit\)' "$O/bad" "resource show pd of 3000 PDs"
ibvctl resource show >"$O/sum" 2>&1 || { show output "$O/sum"; fail "ibvctl resource show exited $?"; }
expect_grep '^[0-9]+: ibvd0: pd 300[0-9] ' "$O/sum" "the summary with 3000 more PDs"
exec 9>&-
wait_exit "$many" 5
ok "$(head -n 1 "$O/bad"); $(cat "$O/sum")"

# A listing builds every row of the visible contexts to match its filters,
# on the control thread: a uid's own listing looks at 16,384 objects at
# most (a million PDs made a filter that matched none cost a second a
# request, every tenant waiting); root's has no such bound.
check "uid $USER1 holds 20000 PDs: its filtered listing is refused, root's answers"
rm -f "$T/many.in" "$O"/many.*
mkfifo "$T/many.in" && chmod 644 "$T/many.in" || fail "mkfifo"
# quota-helper makes 4096 objects at most: five processes of 4000
manys=()
for i in 1 2 3 4 5; do
	run_ours "$USER1" "$T/bin/quota-helper" pd 4000 hold <"$T/many.in" >"$O/many.$i" 2>&1 &
	manys+=($!)
done
exec 9>"$T/many.in"
for i in 1 2 3 4 5; do
	for _ in $(seq $((TMO * 10))); do
		grep -q '^created' "$O/many.$i" && break
		sleep 0.1
	done
	expect_grep '^created 4000 errno 0' "$O/many.$i" "uid $USER1's PDs ($i)"
done
ibvctl_as "$USER1" resource show pd pdn 99999999 >"$O/bad" 2>&1 &&
	{ show output "$O/bad"; fail "uid $USER1's resource show pd pdn 99999999 of 20000 PDs exited 0"; }
expect_grep 'more than 16384 objects to look through for one listing' "$O/bad" \
	"uid $USER1's resource show pd pdn 99999999"
ibvctl_as "$USER1" resource show ctx >"$O/ctx" 2>&1 ||
	{ show output "$O/ctx"; fail "uid $USER1's resource show ctx exited non-zero"; }
ibvctl resource show pd pdn 99999999 >"$O/root" 2>&1 ||
	{ show output "$O/root"; fail "root's resource show pd pdn 99999999 exited non-zero"; }
[ ! -s "$O/root" ] || { show output "$O/root"; fail "root's listing of no PD printed rows"; }
exec 9>&-
for many in "${manys[@]}"; do
	wait_exit "$many" 5
done
ok "$(head -n 1 "$O/bad")"

# 1000 rows of CM ids are far fewer than fit by count, and far more JSON
# than a frame holds: the listing stops at the frame's size.
check "uid $USER1 holds 1000 CM ids: resource show cm_id is refused"
ibvctl limit set uid "$USER1" cm_id=max >"$O/set" 2>&1 ||
	{ show "limit set" "$O/set"; fail "limit set uid $USER1 cm_id=max"; }
rm -f "$T/many.in"
mkfifo "$T/many.in" && chmod 644 "$T/many.in" || fail "mkfifo"
run_ours "$USER1" "$T/bin/quota-helper" cm_id 1000 hold <"$T/many.in" >"$O/many" 2>&1 &
many=$!
exec 9>"$T/many.in"
for _ in $(seq $((TMO * 10))); do
	grep -q '^created' "$O/many" && break
	sleep 0.1
done
expect_grep '^created 1000 errno 0' "$O/many" "uid $USER1's CM ids"
ibvctl resource show cm_id >"$O/bad" 2>&1 && { show output "$O/bad"; fail "resource show cm_id of 1000 ids exited 0"; }
expect_grep 'more rows than one reply holds \([0-9]+ fit\)' "$O/bad" "resource show cm_id of 1000 ids"
ibvctl resource show >"$O/sum" 2>&1 || { show output "$O/sum"; fail "ibvctl resource show exited $?"; }
# Another uid's summary and listing look at its own ids only, not at uid
# $USER1's 1000 (each walk snapshotted every id of the daemon before).
looks0=$(status_count cm_listing_looks)
[ -n "$looks0" ] || { show status "$O/status"; fail "no cm_listing_looks in ibvctl daemon status"; }
ibvctl_as "$USER2" resource show >"$O/sum2" 2>&1 ||
	{ show output "$O/sum2"; fail "uid $USER2's resource show exited non-zero"; }
expect_grep ' cm_id 0 ' "$O/sum2" "uid $USER2's summary"
ibvctl_as "$USER2" resource show cm_id >"$O/ids2" 2>&1 ||
	{ show output "$O/ids2"; fail "uid $USER2's resource show cm_id exited non-zero"; }
looks=$(($(status_count cm_listing_looks) - looks0))
[ "$looks" -eq 0 ] || fail "uid $USER2's summary and cm_id listing looked at $looks CM ids of uid $USER1"
exec 9>&-
wait_exit "$many" 5
ok "$(head -n 1 "$O/bad"); uid $USER2's listings looked at none of them"

# 500 processes of one uid, each holding a CM id: client show's rows (one
# per process) are more JSON than a frame holds; the listing is refused
# with a count and a hint, and a filtered one still answers.
NPROC=500
check "uid $USER1 runs $NPROC processes: client show is refused, client show pid N answers"
rm -f "$T/procs.in" "$O/procs"
mkfifo "$T/procs.in" && chmod 644 "$T/procs.in" || fail "mkfifo"
touch "$O/procs" && chmod 666 "$O/procs"
procs=()
# run_as's timeout would kill the first helpers while a slow machine still
# starts the last ones: they hold until the fifo closes, not for $TMO.
for _ in $(seq "$NPROC"); do
	TMO=$((TMO * 10)) run_ours "$USER1" "$T/bin/quota-helper" cm_id 1 hold <"$T/procs.in" >>"$O/procs" 2>&1 &
	procs+=("$!")
done
exec 9>"$T/procs.in"
for _ in $(seq $((TMO * 20))); do
	[ "$(grep -c '^created 1 errno 0' "$O/procs")" -ge "$NPROC" ] && break
	sleep 0.1
done
[ "$(grep -c '^created 1 errno 0' "$O/procs")" -eq "$NPROC" ] ||
	{ show procs "$O/procs"; fail "$NPROC processes holding a CM id each"; }
ibvctl client show >"$O/bad" 2>&1 && { show output "$O/bad"; fail "client show of $NPROC processes exited 0"; }
expect_grep 'more rows than one reply holds \([0-9]+ fit\)' "$O/bad" "client show of $NPROC processes"
one=$(sed -n 's/^created 1 errno 0 pid \([0-9]*\)$/\1/p' "$O/procs" | head -n 1)
[ -n "$one" ] || { show procs "$O/procs"; fail "no pid in quota-helper's output"; }
ibvctl -j client show pid "$one" >"$O/r" 2>&1 || { show output "$O/r"; fail "client show pid $one"; }
expect_py "$O/r" "len(j) == 1 and j[0]['cm_id'] == 1" "client show pid $one"
exec 9>&-
for p in "${procs[@]}"; do
	wait_exit "$p" 10
done
ok "$(head -n 1 "$O/bad")"

# ---- teardown --------------------------------------------------------------------
check "after the workload dies, nothing is left"
# the pingpong processes themselves, as the daemon saw them
# shellcheck disable=SC2086
kill -KILL $PIDS 2>/dev/null
wait_exit "$SPID" 5
wait_exit "$CPID" 5
for _ in $(seq $((TMO * 20))); do
	res
	[ "$(jq_py "$O/r" "sum(j[0][k] for k in ('pd','cq','qp','mr','ctx','srq'))")" -eq 0 ] && break
	sleep 0.05
done
expect_py "$O/r" "all(j[0][k] == 0 for k in ('pd','cq','qp','cm_id','mr','ctx','srq'))" "summary after kill"
ibvctl -j client show >"$O/r" 2>&1 || fail "client show after kill exited non-zero"
expect_py "$O/r" "j == []" "client show after kill"
daemon_alive "after the resource listings"
ok "all counts back to 0"
