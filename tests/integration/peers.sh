#!/bin/bash
# Data-path tests between processes (peers-helper, tests/integration/peers.c):
#  - tenancy: uid $USER2 holds keys of uid $USER1's memory, some given and
#    some not; the given ones work, forged lkeys/rkeys get LOC_PROT_ERR or
#    REM_ACCESS_ERR and never a byte of the victim's memory;
#  - one-sided WRITE/READ/atomics into a process stopped with SIGSTOP;
#  - a UC message too long for its receive: dropped, the QP goes on;
#  - registration against the client's own RLIMIT_MEMLOCK (prlimit).
. "$(dirname "$0")/lib.sh"

ibvd_init
need_cmd prlimit
O=$T/out
HELPER=$T/bin/peers-helper
[ -x "$HELPER" ] || fail "tests/integration/peers-helper not built"
export VT_TMUL=$TMUL

daemon_start -c "$(default_conf)"
daemon_wait_ready

# meeting_dir NAME: a directory both uids can write.
meeting_dir() {
	local d=$O/$1
	mkdir -p "$d" || fail "mkdir $d"
	chmod 1777 "$d" || fail "chmod $d"
	printf '%s\n' "$d"
}

# pair_run NAME ROLE1 UID1 ROLE2 UID2: ROLE1 in the background, ROLE2 in
# the foreground.  Sets PAIR_PID (ROLE1's pid) and PAIR_RC2 (ROLE2's status).
pair_run() {
	local name=$1 r1=$2 u1=$3 r2=$4 u2=$5 d
	d=$(meeting_dir "$name")
	run_ours "$u1" "$HELPER" "$r1" "$d" >"$O/$name.$r1" 2>&1 &
	PAIR_PID=$!
	BG_PIDS+=("$PAIR_PID")
	run_ours "$u2" "$HELPER" "$r2" "$d" >"$O/$name.$r2" 2>&1
	PAIR_RC2=$?
}

check "tenancy: uid $USER2 against uid $USER1's memory"
pair_run tenancy victim "$USER1" attacker "$USER2"
wait_exit "$PAIR_PID" "$TMO" || { show victim "$O/tenancy.victim"; fail "the victim did not finish"; }
show "attacker (uid $USER2)" "$O/tenancy.attacker"
show "victim (uid $USER1)" "$O/tenancy.victim"
[ "$PAIR_RC2" -eq 0 ] || fail "the attacker's checks failed (exit $PAIR_RC2)"
[ "$EXIT_STATUS" -eq 0 ] || fail "the victim's checks failed (exit $EXIT_STATUS)"
ok "given keys work; forged lkeys and rkeys fail; the victim's memory is intact"
daemon_alive "after the tenancy test"

check "one-sided operations into a stopped process"
d=$(meeting_dir stopped)
run_ours "$USER1" "$HELPER" target "$d" >"$O/stopped.target" 2>&1 &
tpid=$!
BG_PIDS+=("$tpid")
run_ours "$USER2" "$HELPER" initiator "$d" >"$O/stopped.initiator" 2>&1
irc=$?
# The target stopped itself; whatever happened, let it go on.
if [ -s "$d/target" ]; then
	read -r _ _ _ _ target_pid <"$d/target"
	kill -CONT "$target_pid" 2>/dev/null
fi
wait_exit "$tpid" "$TMO" || { show target "$O/stopped.target"; fail "the target did not finish after SIGCONT"; }
show "initiator (uid $USER2)" "$O/stopped.initiator"
show "target (uid $USER1)" "$O/stopped.target"
[ "$irc" -eq 0 ] || fail "the initiator failed (exit $irc)"
[ "$EXIT_STATUS" -eq 0 ] || fail "the target's checks failed (exit $EXIT_STATUS)"
ok "WRITE, READ and atomics completed while the target was stopped"
daemon_alive "after the SIGSTOP test"

# uc_pair NAME [srq]: peers-helper's uc_rx (uid $USER1) and uc_tx ($USER2);
# UC_SAID: what the receiver found.
uc_pair() {
	local d rpid
	d=$(meeting_dir "$1")
	run_ours "$USER1" "$HELPER" uc_rx "$d" ${2:+"$2"} >"$O/$1.rx" 2>&1 &
	rpid=$!
	BG_PIDS+=("$rpid")
	run_ours "$USER2" "$HELPER" uc_tx "$d" >"$O/$1.tx" 2>&1 ||
		{ show "uc_tx (uid $USER2)" "$O/$1.tx"; show "uc_rx" "$O/$1.rx"; fail "$1: the sender failed"; }
	wait_exit "$rpid" "$TMO" || { show uc_rx "$O/$1.rx"; fail "$1: the receiver did not finish"; }
	[ "$EXIT_STATUS" -eq 0 ] || { show "uc_rx (uid $USER1)" "$O/$1.rx"; fail "$1: the receiver's checks failed"; }
	UC_SAID=$(sed -n 's/^uc_rx: //p' "$O/$1.rx")
}

check "a UC message too long for its receive between two uids: dropped, the QP goes on"
uc_pair uc-long
ok "$UC_SAID"
check "the same with the receive from an SRQ"
uc_pair uc-long-srq srq
ok "$UC_SAID"
daemon_alive "after the UC messages too long"

check "RLIMIT_MEMLOCK 65536: 128 KiB refused (ENOMEM), up to 64 KiB in total registered"
run_ours "$USER1" prlimit --memlock=65536 -- "$HELPER" memlock limited >"$O/memlock" 2>&1
rc=$?
show "memlock limited" "$O/memlock"
[ "$rc" -eq 0 ] || fail "registration under RLIMIT_MEMLOCK 65536 (exit $rc)"
ok "RLIMIT_MEMLOCK 65536 is honoured"

check "RLIMIT_MEMLOCK unlimited: 8 MiB registered"
# Raise ours (root with CAP_SYS_RESOURCE may) for the client to inherit.
if (ulimit -l unlimited) 2>/dev/null; then
	ulimit -l unlimited
	run_ours "$USER1" "$HELPER" memlock unlimited >"$O/memlock-unl" 2>&1
	rc=$?
	show "memlock unlimited" "$O/memlock-unl"
	[ "$rc" -eq 0 ] || fail "registration with RLIMIT_MEMLOCK unlimited (exit $rc)"
	ok "unlimited RLIMIT_MEMLOCK registers 8 MiB"
else
	log "SKIP (this case only): RLIMIT_MEMLOCK cannot be raised to unlimited here" \
		"(hard limit $(ulimit -H -l) KiB, no CAP_SYS_RESOURCE)"
fi

daemon_alive "at the end"
daemon_stop
