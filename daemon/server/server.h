/*
 * The listening socket: inherited from systemd (socket activation) or
 * bound by the daemon itself, and the accept loop with its connection cap.
 */
#ifndef IBVD_SERVER_H
#define IBVD_SERVER_H

#include <stdbool.h>

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ibvd_daemon;
struct ibvd_server;

/*
 * Get the listening socket: the one systemd passed (preferring the fd
 * named "control"), else bind path ourselves: create its directory (0755)
 * if missing, replace a stale socket file only if nobody answers on it,
 * then apply mode and group (NULL or "": leave the group alone).
 * Call before daemonizing so that errors reach the terminal.
 * Returns 0 or a negative errno with a message in err.
 */
int ibvd_server_open(struct ibvd_server **ret_srv, const char *path,
		     mode_t mode, const char *group, char *err, size_t errlen);

/* Start accepting into d's event loop. */
int ibvd_server_start(struct ibvd_server *srv, struct ibvd_daemon *d);

/* Path of the socket served (for an inherited one, as the kernel says). */
const char *ibvd_server_path(const struct ibvd_server *srv);

/* Connections whose peer hung up before sending anything: never served
 * (srv may be NULL: a daemon not listening yet has none). */
uint64_t ibvd_server_hung_up(const struct ibvd_server *srv);

/* Whether the socket came from systemd. */
int ibvd_server_activated(const struct ibvd_server *srv);

/* The config's admin group, looked up again (at a reload). */
void ibvd_server_lookup_admin(struct ibvd_server *srv);

/*
 * Re-apply mode and group after a reload; no group (NULL or "") is the
 * one the socket was made with.  A socket that came from systemd
 * belongs to the .socket unit and is left alone.  A step that fails
 * undoes the others.
 */
int ibvd_server_set_access(struct ibvd_server *srv, mode_t mode,
			   const char *group, char *err, size_t errlen);

/* Stop listening; remove the socket file if we created it.  NULL is fine. */
void ibvd_server_free(struct ibvd_server *srv);

struct event_base;
/*
 * loop.c: run the control thread's event loop until it is broken or
 * exited (event_base_dispatch, with a short poll after requests).  0, or
 * -1 if libevent failed.  idle_work (may be NULL) runs in that poll, while
 * no request is waiting; it returns false when it had nothing to do.
 */
int ibvd_server_run(struct event_base *base, bool (*idle_work)(void));

#endif /* IBVD_SERVER_H */
