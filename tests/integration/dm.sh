#!/bin/bash
# Device memory (issue 11): the Check program dm-helper
# (tests/integration/dm.c) as uid $USER1 against a real daemon.
. "$(dirname "$0")/lib.sh"

ibvd_init
O=$T/out
mkdir -p "$O"
daemon_start -c "$(default_conf)"
daemon_wait_ready
run_check_suite dm "$USER1"
daemon_alive "after the device-memory suite"
daemon_stop
