/*
 * The daemon a harness drives in-process, set up as main.c sets it up
 * (tests/fuzz/handlers.c, rings.c): devices from a config text, the
 * engine, sessions and the CM on an event base of its own; reloads are
 * refused.  Aborts if any of it fails.
 */
#ifndef IBVD_FUZZ_FAKE_DAEMON_H
#define IBVD_FUZZ_FAKE_DAEMON_H

#include <stdbool.h>

#include "server/daemon.h"

/*
 * threaded: the engine runs its own thread; else none, and the harness
 * runs its passes (ibvd_engine_run_passes).  The daemon logs at debug
 * level when FUZZ_VERBOSE is set, else errors only.
 */
void fuzz_daemon_setup(struct ibvd_daemon *d, const char *config_text,
		       bool threaded);

#endif /* IBVD_FUZZ_FAKE_DAEMON_H */
