/*
 * The daemon's top-level state, shared by its modules.  Only shared types
 * and forward declarations live here; each object family has its own
 * header (device.h, session.h, ...).
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

#include "log.h"		/* struct ibvd_ratelimit */

struct event_base;
struct ibvd_config;
struct ibvd_server;
struct ibvd_notify;
struct ibvd_session;
struct ibvd_device;
struct ibvd_context;

TAILQ_HEAD(ibvd_session_list, ibvd_session);
TAILQ_HEAD(ibvd_device_list, ibvd_device);
TAILQ_HEAD(ibvd_context_list, ibvd_context);

/*
 * Connections beyond IBVD_MAX_SESSIONS are refused ("too many clients").
 * One uid may hold IBVD_MAX_SESSIONS_PER_UID of them, and the last
 * IBVD_SESSIONS_RESERVED are kept for root and the admin group, which the
 * per-uid cap does not apply to either.
 */
#define IBVD_MAX_SESSIONS	4096
#define IBVD_MAX_SESSIONS_PER_UID 1024
#define IBVD_SESSIONS_RESERVED	64

/* The group whose members may administer the daemon like root, if it exists. */
#define IBVD_ADMIN_GROUP	"rdma"

/*
 * Objects one device context may hold (PDs, MRs, CQs, QPs, ... together):
 * the size limit of its handle table.
 */
#define IBVD_MAX_OBJECTS_PER_CONTEXT 65536

/* Where the daemon looks for its config when -c is not given. */
#define IBVD_DEFAULT_CONFIG	SYSCONFDIR "/ibverbsd/ibverbsd.conf"

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

	struct ibvd_notify *notify;
	struct timespec started;	/* CLOCK_MONOTONIC */
	uint8_t *rxbuf;			/* IBVD_FRAME_MAX bytes, one frame at a time */
};

/* The config file in use, or "(built-in)". */
const char *ibvd_daemon_config_name(const struct ibvd_daemon *d);

/* Seconds since the daemon started. */
uint64_t ibvd_daemon_uptime(const struct ibvd_daemon *d);

/* Recompute the log level from the config and -v (main.c). */
void ibvd_daemon_apply_log_level(const struct ibvd_daemon *d);

/*
 * Load the configuration the way startup does (-c FILE, else the default
 * file if it exists, else the built-in defaults) (main.c).  NULL on error,
 * with a one-line message in err.
 */
struct ibvd_config *ibvd_daemon_load_config(const struct ibvd_daemon *d,
					    char *err, size_t errlen);

/*
 * Re-read the configuration and apply it (SIGHUP, "daemon reload").
 * Returns 0, or a negative errno with a message in err; on error the old
 * configuration stays in force (reload.c).
 */
int ibvd_daemon_reload(struct ibvd_daemon *d, char *err, size_t errlen);

#endif /* IBVD_DAEMON_H */
