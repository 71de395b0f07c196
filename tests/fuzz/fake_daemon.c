/* The in-process daemon of the session-driving harnesses (fake_daemon.h). */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <event2/event.h>

#include "cm/cm.h"
#include "config/config.h"
#include "devices.h"
#include "engine/engine.h"
#include "fake_daemon.h"
#include "frame.h"
#include "log.h"
#include "request.h"
#include "server/session.h"
#include "verbs/async.h"
#include "verbs/context.h"

#define CHECK(cond)	do { if (!(cond)) abort(); } while (0)

/* A reload from "ibvctl daemon reload" re-reads nothing here */
static int no_reload(struct ibvd_daemon *d, char *err, size_t errlen)
{
	(void)d;
	snprintf(err, errlen, "no reload in the fuzz harness");
	return -EOPNOTSUPP;
}

void fuzz_daemon_setup(struct ibvd_daemon *d, const char *config_text,
		       bool threaded)
{
	struct ibvd_device_list removed = TAILQ_HEAD_INITIALIZER(removed);
	char err[512];

	ibvd_log_init("fuzz", getenv("FUZZ_VERBOSE") ? IBVD_LOG_DEBUG : IBVD_LOG_ERR);
	d->up.request_find = ibvd_request_type_find;
	d->up.context_leave = ibvd_context_leave;
	d->up.cm_free = ibvd_cm_session_free;
	d->up.cm_context_going = ibvd_cm_context_going;
	d->up.reload = no_reload;
	TAILQ_INIT(&d->devices);
	TAILQ_INIT(&d->sessions);
	d->cfg = ibvd_config_parse(config_text, "fuzz", err, sizeof(err));
	CHECK(d->cfg);
	CHECK(ibvd_devices_apply(&d->devices, &d->ndevices, d->cfg,
				 &d->next_ifindex, &removed, NULL, err,
				 sizeof(err)) == 0);
	d->base = event_base_new();
	d->rxbuf = malloc(IBVD_FRAME_MAX);
	CHECK(d->base && d->rxbuf);
	clock_gettime(CLOCK_MONOTONIC, &d->started);
	CHECK((threaded ? ibvd_engine_start(1, &ibvd_verbs_engine_events) :
	       ibvd_engine_start_unthreaded(1, &ibvd_verbs_engine_events)) == 0);
	CHECK(ibvd_sessions_start(d) == 0);
	CHECK(ibvd_cm_start(d) == 0);
}
