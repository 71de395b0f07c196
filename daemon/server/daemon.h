/*
 * The daemon's state, which the server runs and request handlers read:
 * its config, devices, sessions, event loop.  Only shared types and
 * forward declarations live here; each object family has its own header
 * (core/device.h, session.h, ...).  Loading and reloading the config is
 * the top level's (reload.h): handlers reach it through d->reload.
 *
 * Threading: everything below is owned by the control thread, which runs
 * one libevent loop.  No locks.
 */
#ifndef IBVD_DAEMON_H
#define IBVD_DAEMON_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <sys/queue.h>

#include "config/config.h"
#include "core/device.h"
#include "core/objects.h"

struct event_base;
struct ibvd_config;
struct ibvd_server;
struct ibvd_netdev_watch;
struct ibvd_notify;
struct ibvd_session;
struct ibvd_device;
struct ibvd_context;
struct ibvd_request_type;
struct ibvd_daemon;

TAILQ_HEAD(ibvd_session_list, ibvd_session);

/*
 * Connections beyond IBVD_MAX_SESSIONS are refused ("too many clients").
 * One uid may hold its "session" limit of them (1024 unless the config
 * says otherwise), and the last IBVD_SESSIONS_RESERVED are kept for root
 * and the admin group (the config's "admin_group"), which the per-uid limit
 * does not apply to either.
 */
#define IBVD_MAX_SESSIONS	4096
#define IBVD_SESSIONS_RESERVED	64


/*
 * Objects one device context may hold (PDs, MRs, CQs, QPs, ... together):
 * the size limit of its handle table.
 */
#define IBVD_MAX_OBJECTS_PER_CONTEXT 65536

/*
 * What the server calls above itself, set by main.c before it starts: the
 * server knows sessions and frames, not the handlers nor what sessions
 * come to own.
 */
struct ibvd_upcalls {
	/* the request table's row for a message type (request.c) */
	const struct ibvd_request_type *(*request_find)(uint16_t type);
	/* a session leaves its device context, the last one frees it
	 * (verbs/context.c) */
	void (*context_leave)(struct ibvd_session *s);
	/* free a session's CM ids, if it has any (cm/cm.c) */
	void (*cm_free)(struct ibvd_session *s);
	/* a context is about to go with its QPs: the CM ends their
	 * connections first (cm/conn.c) */
	void (*cm_context_going)(const struct ibvd_context *ctx);
	/* re-read and apply the config (reload.c), for "ibvctl daemon reload" */
	int (*reload)(struct ibvd_daemon *d, char *err, size_t errlen);
};

struct ibvd_daemon {
	struct event_base *base;
	struct ibvd_config *cfg;	/* current configuration */

	/* command line */
	const char *config_arg;		/* -c FILE, or NULL */
	const char *socket_arg;		/* --socket PATH, or NULL */
	unsigned int verbosity;		/* number of -v */
	int systemd;			/* --systemd */

	struct ibvd_server *server;
	char *socket_path;		/* the socket actually served */

	struct ibvd_device_list devices;
	unsigned int ndevices;
	uint32_t next_ifindex;		/* device indexes are never reused */

	struct ibvd_session_list sessions;
	unsigned int nsessions;
	unsigned int ncontexts;
	uint64_t next_session_id;
	uint32_t next_context_id;

	struct ibvd_upcalls up;

	struct ibvd_notify *notify;
	/* the top level's: RoCE devices' interfaces (netdev_watch.c) */
	struct ibvd_netdev_watch *netdev_watch;
	struct timespec started;	/* CLOCK_MONOTONIC */
	uint8_t *rxbuf;			/* IBVD_FRAME_MAX bytes, one frame at a time */
};

/* The config file in use, or "(built-in)". */
static inline const char *ibvd_daemon_config_name(const struct ibvd_daemon *d)
{
	return d->cfg && d->cfg->path ? d->cfg->path : "(built-in)";
}

/* Seconds since the daemon started. */
static inline uint64_t ibvd_daemon_uptime(const struct ibvd_daemon *d)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)(now.tv_sec - d->started.tv_sec);
}

#endif /* IBVD_DAEMON_H */
