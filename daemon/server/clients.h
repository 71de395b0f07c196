/*
 * What the layers above the server may read of its clients, without
 * reaching into sessions (ibvctl's client, resource, cm_id and limit
 * commands): a snapshot of a session, made on request, and a walk over
 * all of them.  The session struct itself (session.h) is for the server
 * and for the handlers of a session's own requests.
 */
#ifndef IBVD_CLIENTS_H
#define IBVD_CLIENTS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct ibvd_context;
struct ibvd_daemon;
struct ibvd_session;
struct ibvd_tenant;

enum ibvd_session_state {
	IBVD_SESSION_FRESH	= 1 << 0,
	IBVD_SESSION_CONTEXT	= 1 << 1,	/* has opened a device */
	IBVD_SESSION_ADMIN	= 1 << 2,	/* has sent an ADMIN request */
	IBVD_SESSION_CM		= 1 << 3,	/* has sent CM_OPEN (cm.h) */
};

/* One client connection as the rest of the daemon may see it. */
struct ibvd_client_info {
	const struct ibvd_session *session;	/* names it to other layers */
	uint64_t id;			/* for logs: "client 7" */
	pid_t pid;			/* 0 if not in our pid namespace */
	uid_t uid;
	gid_t gid;
	const char *comm;		/* /proc/PID/comm at accept */
	const char *cgroup;		/* "" if unknown */
	enum ibvd_session_state state;
	bool privileged;		/* root, or in the admin_group */
	const struct ibvd_tenant *tenant;	/* its quota account */
	struct ibvd_context *ctx;	/* its device context, or NULL */
};

/* The snapshot of s (strings point into s: valid while it lives). */
void ibvd_client_info(const struct ibvd_session *s,
		      struct ibvd_client_info *out);

/*
 * Call fn for each session, oldest first, until it returns non-zero;
 * returns that value, or 0.
 */
int ibvd_clients_foreach(const struct ibvd_daemon *d,
			 int (*fn)(const struct ibvd_client_info *c, void *arg),
			 void *arg);

/* s sent an ADMIN request: it is an ibvctl connection from now on. */
void ibvd_client_become_admin(struct ibvd_session *s);

#endif /* IBVD_CLIENTS_H */
