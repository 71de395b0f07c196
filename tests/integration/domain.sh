#!/bin/bash
# Thread and parent domains (issue 11): the Check program domain-helper
# (tests/integration/domain.c) as uid $USER1 against a real daemon.
. "$(dirname "$0")/lib.sh"

ibvd_init
O=$T/out
mkdir -p "$O"
daemon_start -c "$(default_conf)"
daemon_wait_ready
run_check_suite domain "$USER1"
daemon_alive "after the domain suite"
daemon_stop
