/*
 * The control thread's loop: libevent's, with a short poll after each
 * burst of requests.
 *
 * A client setting up connections makes one call after another, each a
 * round trip, and a control thread that goes to sleep in epoll between
 * them pays a wakeup per call: two context switches, which in a virtual
 * machine cost more than handling the request.  So after handling
 * requests the thread keeps looking for more without sleeping, for
 * CONTROL_POLL_NS after the last one, yielding the CPU between looks so
 * that whoever is runnable (the client it waits for, on a small machine)
 * runs.  With the library polling for its reply the same way
 * (common/conn.c), a burst runs with no wakeups at all: 3,000 CQs and
 * QPs created and destroyed in 0.51 s instead of 0.90 (bench/scale).
 * An idle daemon sleeps as before: nothing polls without requests.
 *
 * A look that finds no request may do a piece of the caller's idle work
 * instead of yielding: what a later request would otherwise make on its
 * own time (verbs/channel.c's spare sockets).  The poll lasts until that
 * work is all done, so the daemon is in the same state after every burst.
 */
#include <config.h>

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#include <event2/event.h>

#include "call.h"
#include "server.h"
#include "util.h"

#define CONTROL_POLL_NS	50000u

/* Did the last turn of the loop end it (an error, no events, a break)? */
static bool ended(struct event_base *base, int ret)
{
	return ret != 0 || event_base_got_break(base) ||
	       event_base_got_exit(base);
}

/* Requests keep coming: poll for them until none came for a while. */
static int poll_more(struct event_base *base, bool (*idle_work)(void))
{
	uint64_t seen = ibvd_call_count(), last = ibvd_mono_ns();
	int ret;

	while (ibvd_mono_ns() - last < CONTROL_POLL_NS) {
		/* Idle work done counts as activity: it ends finished. */
		if (idle_work && idle_work())
			last = ibvd_mono_ns();
		else
			sched_yield();
		ret = event_base_loop(base, EVLOOP_NONBLOCK);
		if (ended(base, ret))
			return ret < 0 ? -1 : 1;
		if (ibvd_call_count() != seen) {
			seen = ibvd_call_count();
			last = ibvd_mono_ns();
		}
	}
	return 0;
}

int ibvd_server_run(struct event_base *base, bool (*idle_work)(void))
{
	uint64_t before;
	int ret;

	for (;;) {
		before = ibvd_call_count();
		ret = event_base_loop(base, EVLOOP_ONCE);
		if (ended(base, ret))
			return ret < 0 ? -1 : 0;
		if (ibvd_call_count() == before)
			continue;
		ret = poll_more(base, idle_work);
		if (ret)
			return ret < 0 ? -1 : 0;
	}
}
