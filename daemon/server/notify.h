/*
 * systemd service notifications (sd_notify): READY, STATUS, WATCHDOG,
 * RELOADING, STOPPING.  Active with --systemd or when $NOTIFY_SOCKET is
 * set; otherwise every call is a no-op.  All functions accept NULL.
 */
#ifndef IBVD_NOTIFY_H
#define IBVD_NOTIFY_H

struct ibvd_daemon;
struct ibvd_notify;

/* Set up notifications and the watchdog timer (needs d->base). */
struct ibvd_notify *ibvd_notify_new(struct ibvd_daemon *d);
void ibvd_notify_free(struct ibvd_notify *n);

/* Listening and devices up (also after a reload): READY=1 + STATUS. */
void ibvd_notify_ready(struct ibvd_notify *n);

/* Clients or devices changed: STATUS, at most once a second. */
void ibvd_notify_status(struct ibvd_notify *n);

/* Start of a reload: RELOADING=1 + MONOTONIC_USEC. */
void ibvd_notify_reloading(struct ibvd_notify *n);

/* Start of a clean shutdown: STOPPING=1. */
void ibvd_notify_stopping(struct ibvd_notify *n);

/* Fatal error before exit: ERRNO= + STATUS= (err is a positive errno). */
void ibvd_notify_failure(int err, const char *message);

#endif /* IBVD_NOTIFY_H */
