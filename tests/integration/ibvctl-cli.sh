#!/bin/bash
# ibvctl as a command-line tool, against a daemon with a real workload:
#   (a) bad command lines (ibvctl's and the daemon's checks) exit 1 with
#       one "ibvctl: ..." line and no output; help forms and -V exit 0
#       with usage on stdout; every filter a usage lists is one the daemon
#       takes, and one it does not list is refused;
#   (b) while Debian's ibv_rc_pingpong (uid 1001 server, uid 1002 client)
#       and rping listeners (one per uid) run, `ibvctl -j` of every object
#       and kind parses as a JSON array of flat objects with rdma's keys in
#       rdma's order, the right JSON types, and values that match the
#       workload (its pids, its ports, its QPs, client show's usage);
#   (c) uid 1001 sees only its own objects and processes, never keys, and
#       is refused daemon reload and limit set.
# ibvctl.sh covers dev/link/daemon against ibv_devinfo, ibvctl-resource.sh
# the resource listings and filters in depth; this test does not repeat
# them.
. "$(dirname "$0")/lib.sh"

need_cmd ss /usr/bin/ibv_rc_pingpong /usr/bin/rping
ibvd_init
O=$T/out
[ -x "$T/tools/ibvctl" ] || fail "tools/ibvctl not built"
conf=$(default_conf) || exit 1
# One finite limit and the rest "max", for client show's limit columns.
HCA_HANDLE=4
"$PYTHON" - "$conf" "$HCA_HANDLE" <<'EOF' || fail "cannot add limits to $conf"
import json, sys
cfg = json.load(open(sys.argv[1]))
cfg["limits"] = {"default": {"hca_handle": int(sys.argv[2])}}
json.dump(cfg, open(sys.argv[1], "w"), indent=2)
EOF
daemon_start -c "$conf"
daemon_wait_ready

# expect_py FILE EXPR WHAT: python EXPR over j (FILE's JSON) must hold.
expect_py() {
	"$PYTHON" - "$1" "$2" <<'EOF' || { show json "$1"; fail "$3: does not hold: $2"; }
import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2]) else 1)
EOF
}

# jq_py FILE EXPR: print EXPR over j.
jq_py() {
	"$PYTHON" - "$1" "$2" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
print(eval(sys.argv[2]))
EOF
}

# refused NAME ARGS...: ibvctl ARGS must exit 1 with one "ibvctl: " line
# (then perhaps a usage) on stderr and nothing on stdout.
refused() {
	local name=$1 rc
	shift
	ibvctl "$@" >"$O/$name.out" 2>"$O/$name.err"
	rc=$?
	expect_failed "$rc" "ibvctl $*"
	[ "$rc" -eq 1 ] || { show stderr "$O/$name.err"; fail "ibvctl $*: exit status $rc, not 1"; }
	[ -s "$O/$name.out" ] && { show stdout "$O/$name.out"; fail "ibvctl $*: printed on stdout"; }
	head -n 1 "$O/$name.err" | grep -q '^ibvctl: .' ||
		{ show stderr "$O/$name.err"; fail "ibvctl $*: no 'ibvctl: ...' message first on stderr"; }
	log "ibvctl $* -> 1: $(head -n 1 "$O/$name.err")"
}

# with_usage NAME: the refusal also showed a usage.
with_usage() {
	grep -q '^Usage: ibvctl' "$O/$1.err" || { show stderr "$O/$1.err"; fail "$1: no usage after the message"; }
}

# ---- (a) command lines -------------------------------------------------

check "help, -h, -V: usage or version on stdout, exit 0"
for args in "help" "-h" "--help" "-help" ""; do
	# shellcheck disable=SC2086 # split on purpose
	ibvctl $args >"$O/help.out" 2>"$O/help.err" || fail "'ibvctl $args' exited $?"
	[ -s "$O/help.err" ] && { show stderr "$O/help.err"; fail "'ibvctl $args' wrote on stderr"; }
	grep -q '^Usage: ibvctl \[ OPTIONS \] OBJECT { COMMAND | help }' "$O/help.out" ||
		{ show stdout "$O/help.out"; fail "'ibvctl $args' printed no top-level usage"; }
done
cp "$O/help.out" "$O/top-usage"
OBJECTS="dev link resource statistic client limit daemon"
for obj in $OBJECTS; do
	grep -qw "$obj" "$O/top-usage" || fail "the top-level usage does not list $obj"
	for args in "$obj help" "help $obj" "${obj:0:3} he"; do
		# shellcheck disable=SC2086
		ibvctl $args >"$O/help.out" 2>"$O/help.err" || fail "'ibvctl $args' exited $?"
		[ -s "$O/help.err" ] && { show stderr "$O/help.err"; fail "'ibvctl $args' wrote on stderr"; }
		grep -q "^Usage: ibvctl $obj " "$O/help.out" ||
			{ show stdout "$O/help.out"; fail "'ibvctl $args' is not $obj's usage"; }
	done
	cp "$O/help.out" "$O/usage.$obj"
done
version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$top_builddir/config.h")
for args in -V --version -Version "-V dev show"; do
	# shellcheck disable=SC2086
	ibvctl $args >"$O/v.out" 2>&1 || fail "'ibvctl $args' exited $?"
	grep -qx "ibvctl utility, ibverbsd-$version" "$O/v.out" || { show output "$O/v.out"; fail "'ibvctl $args': not the version line"; }
done
ok "help forms exit 0 with usage on stdout; -V says $version"

check "every object's usage lists its commands"
for c in show help; do
	for obj in dev link resource statistic client; do
		grep -qw "$c" "$O/usage.$obj" || fail "$obj's usage does not list '$c'"
	done
done
for c in status version reload help; do
	grep -qw "$c" "$O/usage.daemon" || fail "daemon's usage does not list '$c'"
done
for c in show set help; do
	grep -qw "$c" "$O/usage.limit" || fail "limit's usage does not list '$c'"
done
ok "dev link resource statistic client: show help; daemon: status version reload help; limit: show set help"

check "bad command lines: exit 1, one 'ibvctl:' line, usage where the line is at fault"
refused unknown-object frobnicate; with_usage unknown-object
refused unknown-command dev frobnicate; with_usage unknown-command
grep -q '^Usage: ibvctl dev ' "$O/unknown-command.err" || fail "an unknown dev command shows the top usage, not dev's"
refused ambiguous-object d show
grep -q 'ambiguous' "$O/ambiguous-object.err" || fail "'d' is not called ambiguous"
refused ambiguous-kind resource show c
refused unknown-option -x dev show; with_usage unknown-option
refused unknown-long-option --frobnicate dev show; with_usage unknown-long-option
refused socket-no-arg -s; with_usage socket-no-arg
refused socket-empty -s "" dev show
refused help-extra help dev extra
refused help-unknown help frobnicate
refused unknown-filter resource show qp bogus 1; with_usage unknown-filter
refused unknown-client-filter client show bogus 1; with_usage unknown-client-filter
refused unknown-client-word client show bogus
grep -q 'unknown filter bogus' "$O/unknown-client-word.err" || fail "client show bogus: not an unknown filter"
refused bad-value resource show qp lqpn abc; with_usage bad-value
refused bad-range resource show qp lqpn 9-2
refused huge-value resource show mr mrlen 18446744073709551616
refused negative-value resource show qp lqpn -1
refused huge-cm-value resource show cm_id src-port 99999999999999999999999
refused huge-link-port resource show qp link ibvd0/99999999999999999999
refused link-port-256 resource show qp link ibvd0/256
refused filter-no-value resource show cq cqn
refused bad-client-value client show pid abc
refused bad-cgroup client show cgroup user.slice
refused too-many dev show ibvd0 extra; with_usage too-many
refused too-many-daemon daemon status extra
refused unknown-device dev show nosuchdev
grep -q 'nosuchdev' "$O/unknown-device.err" || fail "the unknown device is not named"
refused unknown-link link show nosuchdev/1
refused unknown-port link show ibvd0/9
refused unknown-res-device resource show nosuchdev
# every listing judges its dev and link filters alike
refused unknown-cm-device resource show cm_id dev nosuchdev
grep -q 'unknown device nosuchdev' "$O/unknown-cm-device.err" || fail "cm_id dev nosuchdev: not an unknown device"
refused port-past-device resource show qp link ibvd0/9
refused cm-port-past-device resource show cm_id link ibvd0/9
refused plus-port link show ibvd0/+1
refused plus-link-port resource show qp link ibvd0/+1
refused plus-stat-port statistic show link ibvd0/+1
refused no-daemon -s "$T/run/nothing-here.sock" dev show
grep -q 'cannot connect' "$O/no-daemon.err" || fail "no daemon: no 'cannot connect'"
ok "all refused with exit 1"

check "output that cannot be written is an error"
if [ -w /dev/full ]; then
	ibvctl dev show >/dev/full 2>"$O/full.err"
	rc=$?
	expect_failed "$rc" "ibvctl dev show >/dev/full"
	grep -q '^ibvctl: cannot write' "$O/full.err" || { show stderr "$O/full.err"; fail "no write error reported"; }
	ok "exit $rc: $(head -n 1 "$O/full.err")"
else
	log "no /dev/full: skipped"
fi

check "-p without -j is ignored, as in rdma"
ibvctl dev show >"$O/dev" 2>&1 || fail "dev show exited $?"
ibvctl -p dev show >"$O/dev-p" 2>&1 || fail "-p dev show exited $?"
diff -u "$O/dev" "$O/dev-p" || fail "-p changes text output"
ibvctl -jp dev show >"$O/dev-jp" 2>&1 || fail "-jp dev show exited $?"
[ "$(wc -l <"$O/dev-jp")" -gt 1 ] || fail "-jp is not pretty JSON"
ok "same text; -jp bundles"

check "every filter in resource's usage is one the daemon takes, and only those"
# the "where FILTER" table: "       KIND   key key ..." with continuation lines
"$PYTHON" - "$O/usage.resource" >"$O/filters" <<'EOF' || fail "cannot read resource's usage"
import sys
kinds = ("qp", "cq", "mr", "pd", "ctx", "srq", "cm_id")
table, kind = {}, None
for line in open(sys.argv[1]):
    words = line.split()
    if line.startswith("where"):
        table = {}
        continue
    if not line.startswith("       ") or not words:
        kind = None
        continue
    if words[0] in kinds:
        kind = words[0]
        table[kind] = words[1:]
    elif kind and line.startswith("              "):
        table[kind] += words
for k in kinds:
    print(k, " ".join(table.get(k, [])))
EOF
show "filters by kind" "$O/filters"
while read -r kind keys; do
	[ -n "$keys" ] || fail "resource's usage lists no filters for $kind"
	for key in $keys; do
		ibvctl -j resource show "$kind" "$key" 1 >"$O/f.out" 2>"$O/f.err" ||
			{ show stderr "$O/f.err"; fail "resource show $kind $key 1: refused, but the usage lists it"; }
	done
	for key in bogus rkey; do
		ibvctl resource show "$kind" "$key" 1 >/dev/null 2>"$O/f.err" &&
			fail "resource show $kind $key 1 accepted, but the usage does not list it"
	done
done <"$O/filters"
for f in "pid 1" "uid 0" "cgroup /"; do
	grep -q "${f%% *} " "$O/usage.client" || fail "client's usage does not list '${f%% *}'"
	# shellcheck disable=SC2086
	ibvctl -j client show $f >/dev/null 2>"$O/f.err" || { show stderr "$O/f.err"; fail "client show $f refused"; }
done
ok "$(wc -w <"$O/filters") words; each listed filter taken, unlisted ones refused"

# ---- (b) the workload ---------------------------------------------------

pick_port() {
	"$PYTHON" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# under ANCESTOR PID...: the first PID that descends from ANCESTOR (the
# programs run under a subshell and timeout(1), which $! names).
under() {
	local anc=$1 p q
	shift
	for p in "$@"; do
		q=$p
		while [ -n "$q" ] && [ "$q" -gt 1 ]; do
			[ "$q" -eq "$anc" ] && { printf '%s\n' "$p"; return 0; }
			q=$(awk '/^PPid:/ { print $2 }' "/proc/$q/status" 2>/dev/null)
		done
	done
	return 1
}

# res_json NAME ARGS...: ibvctl -j ARGS into $O/NAME.json (as root).
res_json() {
	local name=$1
	shift
	ibvctl -j "$@" >"$O/$name.json" 2>"$O/$name.err" ||
		{ show stderr "$O/$name.err"; fail "ibvctl -j $* exited non-zero"; }
}

PP_PORT=$(pick_port) || fail "no free TCP port"
TMO=$((TMO * 10)) run_debian "$USER1" /usr/bin/ibv_rc_pingpong -e -n 2000000000 -p "$PP_PORT" >"$O/pp-server" 2>&1 &
PP_S=$!
BG_PIDS+=("$PP_S")
for _ in $(seq $((TMO * 20))); do
	[ -n "$(ss -Hltn "sport = :$PP_PORT" 2>/dev/null)" ] && break
	pid_running "$PP_S" || { show server "$O/pp-server"; fail "ibv_rc_pingpong server exited"; }
	sleep 0.05
done
TMO=$((TMO * 10)) run_debian "$USER2" /usr/bin/ibv_rc_pingpong -e -n 2000000000 -p "$PP_PORT" localhost >"$O/pp-client" 2>&1 &
PP_C=$!
BG_PIDS+=("$PP_C")

# rping servers that wait for a client that never comes: a LISTEN cm_id each.
RP1=$(pick_port) || fail "no free TCP port"
RP2=$RP1
while [ "$RP2" = "$RP1" ]; do
	RP2=$(pick_port) || fail "no free TCP port"
done
TMO=$((TMO * 10)) run_debian "$USER1" /usr/bin/rping -s -a 127.0.0.1 -p "$RP1" >"$O/rping1" 2>&1 &
RP_1=$!
BG_PIDS+=("$RP_1")
TMO=$((TMO * 10)) run_debian "$USER2" /usr/bin/rping -s -a 127.0.0.1 -p "$RP2" >"$O/rping2" 2>&1 &
RP_2=$!
BG_PIDS+=("$RP_2")

check "the workload is up: 2 RC QPs in RTS, 2 listening cm_ids"
for _ in $(seq $((TMO * 20))); do
	res_json qp resource show qp state RTS
	res_json cm resource show cm_id state LISTEN
	[ "$(jq_py "$O/qp.json" 'len(j)')" -eq 2 ] && [ "$(jq_py "$O/cm.json" 'len(j)')" -eq 2 ] && break
	for p in "$PP_S" "$PP_C" "$RP_1" "$RP_2"; do
		pid_running "$p" || { show pingpong-server "$O/pp-server"; show pingpong-client "$O/pp-client"; show rping1 "$O/rping1"; show rping2 "$O/rping2"; fail "a workload process exited"; }
	done
	sleep 0.05
done
expect_py "$O/qp.json" "len(j) == 2" "2 QPs in RTS"
expect_py "$O/cm.json" "len(j) == 2" "2 LISTEN cm_ids"
# The programs as the daemon sees them, each under the job that started it.
# shellcheck disable=SC2046 # a list of pids
set -- $(jq_py "$O/qp.json" "' '.join(str(o['pid']) for o in j)") $(jq_py "$O/cm.json" "' '.join(str(o['pid']) for o in j)")
PID_S=$(under "$PP_S" "$@") && PID_C=$(under "$PP_C" "$@") && PID_R1=$(under "$RP_1" "$@") && PID_R2=$(under "$RP_2" "$@") ||
	fail "the pids the daemon lists ($*) are not the workload's"
PIDS1="$PID_S,$PID_R1"		# uid 1001's, as a python tuple's items
log "uid $USER1: pingpong $PID_S rping $PID_R1; uid $USER2: pingpong $PID_C rping $PID_R2"
ok "up"

# The schema of every listing, as rdma(8) orders keys: [key, type, required]
# with type int, str, hex (a string of hex digits, no 0x), ints (a list of
# int), lim (an int or "max").  Keys are checked present-in-order against
# this list; anything else is an error.
cat >"$O/schema.py" <<'EOF'
import json, re, sys
I, S, H, L, M = "int", "str", "hex", "ints", "lim"
dev = [("ifindex", I, 1), ("ifname", S, 1)]
owner = [("pid", I, 1), ("comm", S, 1)]
details = [("uid", I, 0), ("cgroup", S, 0)]
schemas = {
    "dev": dev + [("node_type", S, 1), ("fw", S, 0), ("node_guid", S, 1),
                  ("sys_image_guid", S, 1)],
    "link": dev + [("port", I, 1), ("subnet_prefix", S, 0), ("lid", I, 0),
                   ("sm_lid", I, 0), ("lmc", I, 0), ("state", S, 1),
                   ("physical_state", S, 1), ("netdev", S, 0)],
    "summary": dev + [(k, I, 1) for k in
                      ("pd", "cq", "qp", "cm_id", "mr", "ctx", "srq")],
    "qp": dev + [("port", I, 0), ("lqpn", I, 1), ("rqpn", I, 0),
                 ("type", S, 1), ("state", S, 1), ("rq-psn", I, 0),
                 ("sq-psn", I, 1), ("path-mig-state", S, 0), ("pdn", I, 0)]
          + owner + details,
    "cq": dev + [("cqn", I, 1), ("cqe", I, 1), ("users", I, 1),
                 ("poll-ctx", S, 0), ("ctxn", I, 0)] + owner + details,
    "mr": dev + [("mrn", I, 1), ("rkey", H, 0), ("lkey", H, 0),
                 ("iova", H, 0), ("mrlen", I, 1), ("pdn", I, 0)]
          + owner + details + [("tier", S, 0)],
    "pd": dev + [("pdn", I, 1), ("local_dma_lkey", H, 0), ("users", I, 1),
                 ("unsafe_global_rkey", H, 0), ("ctxn", I, 0)]
          + owner + details,
    "ctx": dev + [("ctxn", I, 1)] + owner + details,
    "srq": dev + [("srqn", I, 1), ("type", S, 1), ("lqpn", L, 0),
                  ("pdn", I, 0), ("cqn", I, 0)] + owner + details,
    "cm_id": [("ifindex", I, 0), ("ifname", S, 0), ("port", I, 0),
              ("cm-idn", I, 1), ("lqpn", I, 0), ("qp-type", S, 1),
              ("state", S, 1), ("ps", S, 1), ("pid", I, 1), ("comm", S, 1),
              ("src-addr", S, 0), ("dst-addr", S, 0)],
    "client": [("pid", I, 1), ("uid", I, 1), ("gid", I, 1), ("comm", S, 1),
               ("cgroup", S, 1), ("contexts", I, 1), ("hca_handle", M, 1),
               ("objects", I, 1), ("hca_object", M, 1), ("cm_id", I, 1),
               ("pinned", I, 1), ("memlock", M, 1)],
}

def typed(v, t):
    isint = type(v) is int
    if t == I:
        return isint
    if t == S:
        return type(v) is str and v != ""
    if t == H:
        return type(v) is str and re.fullmatch(r"[0-9a-f]+", v) is not None
    if t == L:
        return type(v) is list and all(type(e) is int for e in v)
    return isint and v >= 0 or v == "max"

def check(kind, path):
    j = json.load(open(path))
    if type(j) is not list:
        return "not a JSON array"
    schema = schemas[kind]
    order = [k for k, _, _ in schema]
    for n, o in enumerate(j):
        if type(o) is not dict:
            return f"element {n} is not an object"
        for k, t, req in schema:
            if req and k not in o:
                return f"element {n}: no {k}"
            if k in o and not typed(o[k], t):
                return f"element {n}: {k} = {o[k]!r} is not {t}"
        extra = [k for k in o if k not in order]
        if extra:
            return f"element {n}: unexpected keys {extra}"
        if [k for k in order if k in o] != list(o):
            return f"element {n}: keys not in rdma's order: {list(o)}"
    return None

err = check(sys.argv[1], sys.argv[2])
if err:
    sys.exit(f"{sys.argv[1]}: {err}")
EOF

# schema KIND FILE WHAT
schema() {
	"$PYTHON" "$O/schema.py" "$1" "$2" 2>"$O/schema.err" ||
		{ show json "$2"; fail "$3: $(cat "$O/schema.err")"; }
}

check "ibvctl -j of every object and kind: rdma's keys, order and JSON types"
res_json dev dev show;			schema dev "$O/dev.json" "dev show"
res_json link link show;		schema link "$O/link.json" "link show"
res_json summary resource show;		schema summary "$O/summary.json" "resource show"
for k in qp cq mr pd ctx srq cm_id; do
	res_json "$k" resource show "$k";	schema "$k" "$O/$k.json" "resource show $k"
	res_json "$k-d" -d resource show "$k";	schema "$k" "$O/$k-d.json" "-d resource show $k"
done
res_json client client show;		schema client "$O/client.json" "client show"
# what the schema allows but this daemon must show
expect_py "$O/dev.json" "all(__import__('re').fullmatch('[0-9a-f]{4}(:[0-9a-f]{4}){3}', o['node_guid']) for o in j)" "dev GUIDs"
expect_py "$O/mr.json" "all(k in o for o in j for k in ('rkey', 'lkey', 'iova'))" "root sees MR keys"
expect_py "$O/qp-d.json" "all(list(o)[-3:] == ['comm', 'uid', 'cgroup'] for o in j)" "-d qp: uid, cgroup last"
expect_py "$O/qp.json" "all('uid' not in o and 'cgroup' not in o for o in j)" "no uid/cgroup without -d"
ok "dev link summary qp cq mr pd ctx srq cm_id client"

check "the listings agree with the workload"
expect_py "$O/qp.json" "sorted(o['pid'] for o in j) == sorted([$PID_S, $PID_C])" "qp pids are the pingpongs'"
expect_py "$O/qp.json" "all(o['type'] == 'RC' and o['state'] == 'RTS' and o['comm'] == 'ibv_rc_pingpong' for o in j)" "qp type/state/comm"
expect_py "$O/qp.json" "sorted(o['rqpn'] for o in j) == sorted(o['lqpn'] for o in j)" "the two QPs are each other's peers"
expect_py "$O/ctx.json" "sorted(o['pid'] for o in j if o['comm'] == 'ibv_rc_pingpong') == sorted([$PID_S, $PID_C])" "ctx pids"
expect_py "$O/mr-d.json" "{o['pid']: o['uid'] for o in j if o['pid'] in ($PID_S, $PID_C)} == {$PID_S: $USER1, $PID_C: $USER2}" "-d mr uids"
expect_py "$O/srq.json" "j == []" "no SRQ in rc_pingpong"
expect_py "$O/cm_id.json" "sorted((o['pid'], o['src-addr']) for o in j if o['state'] == 'LISTEN') == sorted([($PID_R1, '127.0.0.1:$RP1'), ($PID_R2, '127.0.0.1:$RP2')])" "cm_id listeners: pids and ports"
expect_py "$O/cm_id.json" "all(o['ps'] == 'TCP' and o['comm'] == 'rping' for o in j)" "cm_id ps/comm"
expect_py "$O/summary.json" "sum(o['qp'] for o in j) == 2 and sum(o['cm_id'] for o in j) == 2" "summary counts"
expect_py "$O/client.json" "[(o['contexts'], o['cm_id'], o['pinned'] > 0, o['objects'] >= 4) for o in j if o['pid'] in ($PID_S, $PID_C)] == [(1, 0, True, True)] * 2" "client show: the pingpongs hold a context, objects, pinned memory"
expect_py "$O/client.json" "[o['cm_id'] for o in j if o['pid'] in ($PID_R1, $PID_R2)] == [1, 1]" "client show: each rping holds its listener"
expect_py "$O/client.json" "all(o['hca_handle'] == $HCA_HANDLE and o['hca_object'] == 'max' and o['memlock'] == 'max' for o in j)" "client show: the limits"
expect_py "$O/client.json" "{o['pid']: o['uid'] for o in j} == {$PID_S: $USER1, $PID_R1: $USER1, $PID_C: $USER2, $PID_R2: $USER2}" "client show: the processes"
ok "pids, peers, listeners, usage and limits as the workload has them"

# ---- (c) an unprivileged uid ---------------------------------------------

check "uid $USER1 sees only its own objects and processes, without keys"
for k in qp cq mr pd ctx srq cm_id; do
	for d in "" -d; do
		ibvctl_as "$USER1" -j $d resource show "$k" >"$O/u1.$k$d" 2>"$O/u1.err" ||
			{ show stderr "$O/u1.err"; fail "uid $USER1: $d resource show $k failed"; }
		schema "$k" "$O/u1.$k$d" "uid $USER1: $d resource show $k"
		expect_py "$O/u1.$k$d" "all(o['pid'] in ($PIDS1) for o in j)" "uid $USER1: $d resource show $k: only its own pids"
	done
	expect_py "$O/u1.$k-d" "all(o.get('uid', $USER1) == $USER1 for o in j)" "uid $USER1: -d resource show $k: uid"
	# everything of its own that root sees
	expect_py "$O/u1.$k" "len(j) == len([o for o in json.load(open('$O/$k.json')) if o['pid'] in ($PIDS1)])" "uid $USER1: resource show $k: all its own"
done
expect_py "$O/u1.qp" "len(j) == 1 and j[0]['pid'] == $PID_S" "uid $USER1: its QP"
expect_py "$O/u1.cm_id" "len(j) == 1 and j[0]['pid'] == $PID_R1" "uid $USER1: its listener"
expect_py "$O/u1.mr" "len(j) > 0 and all(k not in o for o in j for k in ('rkey', 'lkey', 'iova'))" "uid $USER1: no MR keys"
expect_py "$O/u1.pd" "all(k not in o for o in j for k in ('local_dma_lkey', 'unsafe_global_rkey'))" "uid $USER1: no PD keys"
expect_py "$O/u1.qp-d" "all(list(o)[-3:] == ['comm', 'uid', 'cgroup'] for o in j)" "uid $USER1: -d adds uid, cgroup"
# naming another uid's objects finds nothing
for f in "qp pid $PID_C" "cm_id pid $PID_R2" "ctx uid $USER2"; do
	# shellcheck disable=SC2086
	ibvctl_as "$USER1" -j resource show $f >"$O/u1.other" 2>&1 || fail "uid $USER1: resource show $f failed"
	expect_py "$O/u1.other" "j == []" "uid $USER1: resource show $f"
done
ibvctl_as "$USER1" -j resource show >"$O/u1.sum" 2>&1 || fail "uid $USER1: resource show failed"
schema summary "$O/u1.sum" "uid $USER1: resource show"
expect_py "$O/u1.sum" "sum(o['qp'] for o in j) == 1 and sum(o['cm_id'] for o in j) == 1" "uid $USER1: summary counts its own"
ibvctl_as "$USER1" -j client show >"$O/u1.client" 2>&1 || fail "uid $USER1: client show failed"
schema client "$O/u1.client" "uid $USER1: client show"
expect_py "$O/u1.client" "sorted(o['pid'] for o in j) == sorted([$PIDS1]) and all(o['uid'] == $USER1 for o in j)" "uid $USER1: client show"
ibvctl_as "$USER1" -j client show pid "$PID_C" >"$O/u1.other" 2>&1 || fail "uid $USER1: client show pid failed"
expect_py "$O/u1.other" "j == []" "uid $USER1: client show pid $PID_C (uid $USER2's)"
ok "only pids $PIDS1, no keys, -d columns"

check "uid $USER1 may not reload or set limits"
if is_root; then
	ibvctl_as "$USER1" daemon reload >"$O/u1.reload" 2>"$O/u1.reload.err"
	rc=$?
	expect_failed "$rc" "daemon reload as uid $USER1"
	[ -s "$O/u1.reload" ] && fail "daemon reload as uid $USER1 printed on stdout"
	grep -Eq '^ibvctl: .*(root|rdma|permitted)' "$O/u1.reload.err" ||
		{ show stderr "$O/u1.reload.err"; fail "the reload refusal does not say why"; }
	ibvctl_as "$USER1" limit set uid "$USER1" hca_handle=100 >"$O/u1.limit" 2>"$O/u1.limit.err"
	rc=$?
	expect_failed "$rc" "limit set as uid $USER1"
	[ -s "$O/u1.limit" ] && fail "limit set as uid $USER1 printed on stdout"
	grep -Eq '^ibvctl: .*(root|rdma|permitted)' "$O/u1.limit.err" ||
		{ show stderr "$O/u1.limit.err"; fail "the limit set refusal does not say why"; }
	# and nothing changed: the default's hca_handle is still in force
	ibvctl -j client show pid "$PID_S" >"$O/r" 2>&1 || fail "client show pid $PID_S failed"
	expect_py "$O/r" "[o['hca_handle'] for o in j] == [$HCA_HANDLE]" "limits after the refused limit set"
	ok "refused: $(head -n 1 "$O/u1.reload.err") / $(head -n 1 "$O/u1.limit.err")"
else
	log "not root: the uid-based refusal cannot be checked"
fi
daemon_alive "after the refusals"

# ---- (d) names a tenant chooses -------------------------------------------

# client_shown PATTERN PID PIDOUT OUT: wait until ibvctl client show (in
# OUT) has a line matching PATTERN, while the job PID (output PIDOUT) runs.
client_shown() {
	for _ in $(seq $((TMO * 20))); do
		ibvctl client show >"$4" 2>&1 || fail "client show failed"
		grep -q -- "$1" "$4" && return 0
		pid_running "$2" || { show "its output" "$3"; fail "the process for /$1/ exited"; }
		sleep 0.05
	done
	show output "$4"
	fail "no client matching /$1/"
}
# A cgroup's name is its creator's (a delegated subtree's owner): an
# escape sequence in it is printed as \xHH, never sent to the terminal.
CG2=$(findmnt -n -o TARGET -t cgroup2 | head -n 1)
CG_NAME=$'ibvd-esc\e[31m\e]0;x\a\xc2\x9b'
if is_root && [ -n "$CG2" ] && mkdir "$CG2/$CG_NAME" 2>/dev/null; then
	check "a cgroup name with control bytes: printed escaped"
	RP3=$(pick_port) || fail "no free TCP port"
	# the subshell moves itself into the cgroup; rping inherits it
	(echo "$BASHPID" >"$CG2/$CG_NAME/cgroup.procs" &&
		TMO=$((TMO * 10)) run_debian "$USER1" /usr/bin/rping -s -a 127.0.0.1 -p "$RP3") >"$O/rping3" 2>&1 &
	RP_3=$!
	BG_PIDS+=("$RP_3")
	client_shown 'ibvd-esc' "$RP_3" "$O/rping3" "$O/esc"
	"$PYTHON" -c 'import sys
b = open(sys.argv[1], "rb").read()
sys.exit(1 if any(c < 0x20 and c != 0x0a or c == 0x7f for c in b) or b"\xc2\x9b" in b else 0)' "$O/esc" ||
		{ cat -v "$O/esc"; fail "a control byte reached the output"; }
	expect_grep 'cgroup /ibvd-esc\\x1b\[31m\\x1b\]0;x\\x07\\xc2\\x9b' "$O/esc" "the name, escaped"
	ibvctl -j client show >"$O/esc.json" 2>&1 || fail "client show -j failed"
	pid3=$(jq_py "$O/esc.json" "' '.join(str(o['pid']) for o in j if o['cgroup'].startswith('/ibvd-esc'))")
	[ -n "$pid3" ] || fail "no pid in the cgroup"
	kill "$pid3"
	wait "$RP_3" 2>/dev/null
	rmdir "$CG2/$CG_NAME" 2>/dev/null
	ok "$(grep -o 'cgroup /ibvd-esc[^ ]*' "$O/esc")"
else
	log "no cgroup2 to make a cgroup in: the escaping is not checked"
fi

# A process's name is its own to choose: one with spaces is quoted, so
# that the line still splits into its key-value pairs.
check "a process named 'x uid 0 pid 1': its comm printed quoted"
SPACED="$T/bin/x uid 0 pid 1"
cp /usr/bin/rping "$SPACED" && chmod 755 "$SPACED" || fail "cannot copy rping"
RP4=$(pick_port) || fail "no free TCP port"
TMO=$((TMO * 10)) run_debian "$USER1" "$SPACED" -s -a 127.0.0.1 -p "$RP4" >"$O/rping4" 2>&1 &
RP_4=$!
BG_PIDS+=("$RP_4")
client_shown 'x uid 0' "$RP_4" "$O/rping4" "$O/spaced"
expect_grep 'comm "x uid 0 pid 1"' "$O/spaced" "the name, quoted"
expect_no_grep 'comm x uid' "$O/spaced" "the name, unquoted"
pkill -f -- "-p $RP4" 2>/dev/null
wait "$RP_4" 2>/dev/null
# a quote of its own: quoted too, the quote escaped
QUOTED="$T/bin/q\"x"
cp /usr/bin/rping "$QUOTED" && chmod 755 "$QUOTED" || fail "cannot copy rping"
TMO=$((TMO * 10)) run_debian "$USER1" "$QUOTED" -s -a 127.0.0.1 -p "$RP4" >"$O/rping5" 2>&1 &
RP_5=$!
BG_PIDS+=("$RP_5")
client_shown 'q.x' "$RP_5" "$O/rping5" "$O/quoted"
expect_grep 'comm "q\\x22x"' "$O/quoted" "a name with a quote"
pkill -f -- "-p $RP4" 2>/dev/null
wait "$RP_5" 2>/dev/null
ok "comm \"x uid 0 pid 1\" and comm \"q\\x22x\""

# Nothing else changed the workload meanwhile.  The programs themselves
# are signalled: $PP_S and the others are the shells of run_debian, which
# would die alone and leave the programs running.
for p in "$PID_S" "$PID_C" "$PID_R1" "$PID_R2"; do
	pid_running "$p" || fail "a workload process died during the test"
done
for p in "$PID_S" "$PID_C" "$PID_R1" "$PID_R2"; do
	kill -TERM "$p" 2>/dev/null
done
for p in "$PP_S" "$PP_C" "$RP_1" "$RP_2"; do
	wait_exit "$p" 5 || fail "a workload process outlived SIGTERM"
done
daemon_stop
