#!/bin/bash
# On-demand paging (issue 11): the Check program odp-helper
# (tests/integration/odp.c) as uid $USER1 against a real daemon: the ODP
# capabilities, explicit ODP MRs over memory mapped later or with holes,
# implicit ODP MRs, no memlock charge, ibv_advise_mr and its refusals.
# Then Debian's ib_write_bw, ib_read_bw and ib_send_bw with --odp between
# uids $USER1 and $USER2.
. "$(dirname "$0")/lib.sh"

need_cmd ss ib_write_bw ib_read_bw ib_send_bw
ibvd_init
O=$T/out
mkdir -p "$O"

daemon_start -c "$(default_conf)"
daemon_wait_ready
run_check_suite odp "$USER1"

# perftest PROG: server uid 1001, client uid 1002, both --odp
perftest() {
	local prog=$1 port spid rc_c
	check "$prog --odp"
	port=$(free_port) || exit 1
	run_debian "$USER1" "$prog" -d ibvd0 --odp -n 1000 -p "$port" >"$O/$prog.server" 2>&1 &
	spid=$!
	BG_PIDS+=("$spid")
	wait_tcp_listen "$port" "$spid" || { show server "$O/$prog.server"; fail "$prog: no server"; }
	run_debian "$USER2" "$prog" -d ibvd0 --odp -n 1000 -p "$port" 127.0.0.1 >"$O/$prog.client" 2>&1
	rc_c=$?
	wait_exit "$spid" "$TMO" || { term_bg "$spid"; EXIT_STATUS=124; }
	if [ "$rc_c" -ne 0 ] || [ "$EXIT_STATUS" -ne 0 ]; then
		show server "$O/$prog.server"
		show client "$O/$prog.client"
		fail "$prog --odp: client exited $rc_c, server $EXIT_STATUS"
	fi
	expect_grep '^ *65536 +1000 ' "$O/$prog.client" "$prog --odp: the result line"
	ok "$(grep -E '^ *65536 +1000 ' "$O/$prog.client" | tr -s ' ')"
}
perftest ib_write_bw
perftest ib_read_bw
perftest ib_send_bw
daemon_alive "after ODP"
daemon_stop
