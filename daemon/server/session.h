/*
 * Client sessions: one per accepted connection.
 *
 * A connection starts FRESH.  OPEN_DEVICE turns it into a device context
 * (it then owns every object made through it, until it closes); ADMIN
 * turns it into an ibvctl session; CM_OPEN into a CM session (an
 * rdma_event_channel: its CM ids die with it).  Peer credentials are read
 * once, at accept.  Closing a session destroys everything it owned.
 *
 * fds a client passes us are never closed on the control thread: closing
 * the last reference to a file can block (a TCP socket lingering on unsent
 * data, a FUSE file), so closer threads do it (closer.h).  A session is not
 * read while its uid's closes are backed up.
 */
#ifndef IBVD_SESSION_H
#define IBVD_SESSION_H

#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <protobuf-c/protobuf-c.h>

#include "closer.h"
#include "clients.h"
#include "daemon.h"
#include "tenant/tenant.h"

#define IBVD_SESSION_ANY	(IBVD_SESSION_FRESH | IBVD_SESSION_CONTEXT | \
				 IBVD_SESSION_ADMIN | IBVD_SESSION_CM)
/*
 * Closed from inside its own callback, destroyed when that returns: no
 * request is allowed any more.  Not an enumerator, as no request row or
 * state switch has a use for it.
 */
#define IBVD_SESSION_CLOSED	((enum ibvd_session_state)0)

/*
 * Seconds a fresh or admin connection may stay silent, after connecting or
 * after its last request ($IBVERBSD_IDLE_TIMEOUT); a device context may
 * stay idle as long as it likes.
 */
#define IBVD_SESSION_IDLE_TIMEOUT	30

struct event;

struct ibvd_session {
	TAILQ_ENTRY(ibvd_session) link;
	struct ibvd_daemon *daemon;
	uint64_t id;			/* for logs: "client 7" */
	int fd;
	struct ucred cred;		/* pid (0 if not in our pid ns), uid, gid */
	int privileged;			/* root, or in the admin_group */
	struct ibvd_peer_identity ident; /* cred plus pid start time, cgroup */
	struct ibvd_tenant *tenant;	/* its uid's quota account: outlives
					 * everything the session owns */
	char comm[17];			/* /proc/PID/comm at accept, sanitized */
	enum ibvd_session_state state;
	struct ibvd_context *ctx;	/* when state is CONTEXT */
	struct ibvd_cm *cm;		/* when state is CM */
	struct event *read_ev;
	struct event *idle_ev;		/* armed unless state is CONTEXT or CM */
	int in_callback;		/* closing must wait until we return */
	int closing;
	int paused;			/* its uid's closes are backed up: not read */
};

/* Start the closer threads; call once, before the first session. */
int ibvd_sessions_start(struct ibvd_daemon *d);

/*
 * Set up a session for an accepted socket whose peer is cred (takes
 * ownership of fd); *ret_s (if not NULL) gets it.  -EAGAIN: its uid is at
 * its "session" limit; the client was told so and the socket is closed.
 */
int ibvd_session_new(struct ibvd_daemon *d, int fd, const struct ucred *cred,
		     int privileged, struct ibvd_session **ret_s);

/*
 * Disconnect and destroy the session and all it owns.  From inside the
 * session's own callback the destruction happens when the callback returns.
 */
void ibvd_session_close(struct ibvd_session *s);

/* Close every session and stop the closer threads (shutdown). */
void ibvd_session_close_all(struct ibvd_daemon *d);

/*
 * Send one frame to the client without blocking.  A client whose socket is
 * full is not reading its replies: it is disconnected.  Returns 0,
 * -EMSGSIZE (nothing sent, session intact), or another negative errno
 * (the session is closing).
 */
int ibvd_session_send(struct ibvd_session *s, uint16_t type, uint32_t req_id,
		      const ProtobufCMessage *msg, const int *fds,
		      unsigned int nfds);

/* Idle timeout in seconds (env override for tests). */
unsigned int ibvd_session_idle_timeout(void);

#endif /* IBVD_SESSION_H */
