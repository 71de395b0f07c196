#!/bin/bash
# A client holding a device context when the daemon goes away (SIGKILL, and
# a clean SIGTERM stop) gets IBV_EVENT_DEVICE_FATAL on its async fd, and a
# later ibv_query_port fails with an error instead of hanging, as does a
# GID query the library could answer from its copy.  Debian's
# ibv_asyncwatch sees the event too.  A new daemon can then start on the
# same socket path, and the same client process, without restarting,
# opens the device again and moves data through it, through librdmacm
# too (which must not hand out the dead context).  Objects made before
# the death fail to be destroyed (EIO, as on a device that went away), and
# are destroyed with RDMAV_ALLOW_DISASSOC_DESTROY set (ibv_open_device(3)).
. "$(dirname "$0")/lib.sh"

need_cmd /usr/bin/ibv_asyncwatch
ibvd_init
O=$T/out
conf=$(default_conf) || exit 1

# ctx_ok COMMAND PREFIX: the context client answers COMMAND with a line
# starting with PREFIX.
ctx_ok() {
	ctx_cmd "$1" || fail "$1: $CTX_ANSWER"
	case $CTX_ANSWER in
	"$2"*) ;;
	*) fail "$1: $CTX_ANSWER" ;;
	esac
}

# one_death SIGNAL: start a daemon, a context client waiting for the event,
# send SIGNAL to the daemon, check the client.
one_death() {
	local sig=$1 wpid
	daemon_start -c "$conf"
	daemon_wait_ready

	check "SIG$sig: a client with an open context works before"
	if [ "$sig" = TERM ]; then
		CTX_ENV=RDMAV_ALLOW_DISASSOC_DESTROY=1 ctx_start "$USER1"
	else
		# "0" is unset, as rdma-core reads its variables
		CTX_ENV=RDMAV_ALLOW_DISASSOC_DESTROY=0 ctx_start "$USER1"
	fi
	ctx_ok hold "ok hold"
	ctx_cmd query || fail "query: $CTX_ANSWER"
	case $CTX_ANSWER in
	"ok query dev=ibvd0 ports=1 port=1 state=4 lid="[1-9]*) ok "$CTX_ANSWER" ;;
	*) fail "query before SIG$sig: $CTX_ANSWER" ;;
	esac
	ctx_ok loopback "ok loopback 4096 bytes"
	ctx_ok gids "ok gids 0="	# the library keeps this table
	ctx_ok cm "ok cm"

	# Debian's ibv_asyncwatch on the same device, as the other uid.
	run_debian "$USER2" /usr/bin/ibv_asyncwatch -d ibvd0 >"$O/watch" 2>&1 &
	wpid=$!
	BG_PIDS+=("$wpid")
	for _ in $(seq 50); do
		grep -q 'async event FD' "$O/watch" && break
		sleep 0.1
	done
	expect_grep '^ibvd0: async event FD [0-9]+$' "$O/watch" "ibv_asyncwatch started"

	check "SIG$sig to the daemon: the client, blocked in poll() on its async fd, gets IBV_EVENT_DEVICE_FATAL"
	printf 'fatal %d\n' $((10 * TMUL)) >&7
	sleep 0.3	# let it block in poll()
	if [ "$sig" = KILL ]; then
		kill -KILL "$DAEMON_PID" || fail "kill -KILL"
		daemon_kill
	else
		daemon_stop	# SIGTERM, exit status 0 within 5 s
	fi
	ctx_read || fail "no answer to 'fatal'"
	log "context client -> $CTX_ANSWER"
	case $CTX_ANSWER in
	"ok event IBV_EVENT_DEVICE_FATAL "*) ok "$CTX_ANSWER" ;;
	*) fail "after SIG$sig: $CTX_ANSWER" ;;
	esac

	check "SIG$sig: ibv_query_port afterwards fails promptly"
	ctx_cmd query || fail "query after SIG$sig: $CTX_ANSWER"
	case $CTX_ANSWER in
	"error query: "*" after "[0-9]*" ms")
		ms=${CTX_ANSWER##* after }
		ms=${ms% ms}
		[ "$ms" -lt $((3000 * TMUL)) ] || fail "the failing query took $ms ms"
		ok "$CTX_ANSWER" ;;
	*) fail "query after SIG$sig: $CTX_ANSWER" ;;
	esac

	check "SIG$sig: the GID table read before fails too (not the library's copy)"
	ctx_cmd gids || fail "gids after SIG$sig: $CTX_ANSWER"
	case $CTX_ANSWER in
	"error gids: "*) ok "$CTX_ANSWER" ;;
	*) fail "gids after SIG$sig: $CTX_ANSWER" ;;
	esac

	if [ "$sig" = TERM ]; then
		check "SIG$sig: with RDMAV_ALLOW_DISASSOC_DESTROY, the objects made before are destroyed"
		ctx_ok release "ok release"
	else
		check "SIG$sig: destroying the objects made before fails with EIO, the channel and PD in use (EBUSY)"
		ctx_ok release "error release qp=5 cq=5 ch=16 mr=5 pd=16"
	fi
	ok "$CTX_ANSWER"

	check "SIG$sig: a daemon started again; the same client process opens the device again and works"
	daemon_start -c "$conf"
	daemon_wait_ready
	ctx_ok reopen "ok reopen ibvd0"
	ctx_ok query "ok query dev=ibvd0 ports=1 port=1 state=4 lid="
	ctx_ok loopback "ok loopback 4096 bytes"
	ctx_ok cm "ok cm"	# librdmacm does not hand out the dead context
	ok "verbs and the CM, in the process that saw the old daemon die"
	daemon_stop
	ctx_stop
	ok "ibv_close_device after the daemon's death returned and the client exited 0"

	check "SIG$sig: Debian's ibv_asyncwatch reported IBV_EVENT_DEVICE_FATAL"
	wait_exit "$wpid" "$TMO" || { show ibv_asyncwatch "$O/watch"; fail "ibv_asyncwatch still runs after the daemon died"; }
	show ibv_asyncwatch "$O/watch"
	expect_grep '^  event_type IBV_EVENT_DEVICE_FATAL \(8\), port' "$O/watch" "ibv_asyncwatch event"
	ok "ibv_asyncwatch: event seen, exited $EXIT_STATUS"
}

one_death KILL

check "a new daemon starts on the path a killed daemon left behind"
one_death TERM
