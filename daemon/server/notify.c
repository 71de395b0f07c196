/*
 * sd_notify wrappers and the watchdog timer.
 */
#include <config.h>

#include <stdlib.h>
#include <time.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>

#include "daemon.h"
#include "log.h"
#include "notify.h"

/* systemctl status needs no more than one STATUS update a second. */
#define STATUS_MIN_INTERVAL_SEC	1

struct ibvd_notify {
	struct ibvd_daemon *d;
	int ready;			/* STATUS only between READY and STOPPING */
	int status_dirty;		/* a change arrived while throttled */
	struct event *status_ev;
	struct event *watchdog_ev;
};

static const char *plural(unsigned int n)
{
	return n == 1 ? "" : "s";
}

static void send_status(struct ibvd_notify *n, const char *prefix)
{
	const struct ibvd_daemon *d = n->d;

	sd_notifyf(0, "%sSTATUS=Serving %u client%s on %u device%s",
		   prefix, d->nsessions, plural(d->nsessions),
		   d->ndevices, plural(d->ndevices));
}

static void status_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ibvd_notify *n = arg;
	struct timeval tv = { STATUS_MIN_INTERVAL_SEC, 0 };

	if (!n->status_dirty || !n->ready)
		return;
	n->status_dirty = 0;
	send_status(n, "");
	evtimer_add(n->status_ev, &tv);
}

static void watchdog_cb(evutil_socket_t fd, short what, void *arg)
{
	sd_notify(0, "WATCHDOG=1");
}

/* Ping the watchdog at half its interval, as sd_watchdog_enabled(3) says. */
static int start_watchdog(struct ibvd_notify *n)
{
	uint64_t usec;
	struct timeval tv;

	if (sd_watchdog_enabled(0, &usec) <= 0)
		return 0;
	usec /= 2;
	tv.tv_sec = (time_t)(usec / 1000000);
	tv.tv_usec = (suseconds_t)(usec % 1000000);
	n->watchdog_ev = event_new(n->d->base, -1, EV_PERSIST, watchdog_cb, n);
	if (!n->watchdog_ev || event_add(n->watchdog_ev, &tv) < 0)
		return -1;
	log_debug("watchdog: pinging every %llu ms", (unsigned long long)usec / 1000);
	return 0;
}

struct ibvd_notify *ibvd_notify_new(struct ibvd_daemon *d)
{
	struct ibvd_notify *n;

	if (!d->systemd && !getenv("NOTIFY_SOCKET"))
		return NULL;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->d = d;
	n->status_ev = evtimer_new(d->base, status_cb, n);
	if (!n->status_ev || start_watchdog(n) < 0) {
		ibvd_notify_free(n);
		return NULL;
	}
	return n;
}

void ibvd_notify_free(struct ibvd_notify *n)
{
	if (!n)
		return;
	if (n->status_ev)
		event_free(n->status_ev);
	if (n->watchdog_ev)
		event_free(n->watchdog_ev);
	free(n);
}

void ibvd_notify_ready(struct ibvd_notify *n)
{
	if (!n)
		return;
	n->ready = 1;
	send_status(n, "READY=1\n");
}

void ibvd_notify_status(struct ibvd_notify *n)
{
	struct timeval tv = { STATUS_MIN_INTERVAL_SEC, 0 };

	if (!n || !n->ready)
		return;
	if (evtimer_pending(n->status_ev, NULL)) {
		n->status_dirty = 1;
		return;
	}
	send_status(n, "");
	evtimer_add(n->status_ev, &tv);
}

void ibvd_notify_reloading(struct ibvd_notify *n)
{
	struct timespec now;

	if (!n)
		return;
	/* systemd >= 253 (Type=notify-reload) wants the time of the reload. */
	clock_gettime(CLOCK_MONOTONIC, &now);
	sd_notifyf(0, "RELOADING=1\nSTATUS=Reloading configuration\nMONOTONIC_USEC=%llu",
		   (unsigned long long)now.tv_sec * 1000000ull +
		   (unsigned long long)now.tv_nsec / 1000);
}

void ibvd_notify_stopping(struct ibvd_notify *n)
{
	if (!n)
		return;
	n->ready = 0;
	sd_notify(0, "STOPPING=1\nSTATUS=Shutting down");
}

void ibvd_notify_failure(int err, const char *message)
{
	sd_notifyf(0, "ERRNO=%d\nSTATUS=%s", err, message);
}
