/*
 * Calls: one request being handled, and what handlers may ask of the
 * server (reply, error, received fds, the daemon).
 *
 * Each message type a client may send has one row in the request table
 * (request.c, above every layer of handlers): its payload type, the number
 * of fds that must come with it, the session states that may send it, and
 * its handler.  The dispatcher enforces the row, unpacks the payload and
 * calls the handler, so handlers only do their verb.
 *
 * Handlers return 0 after replying with ibvd_call_reply() (or without
 * replying: the dispatcher then sends an empty reply), or a negative errno:
 * unless a reply went out already or the session is closing, the
 * dispatcher turns it into an Error reply (positive errnum plus the message
 * set with ibvd_call_error(), or strerror's).  That is where a request's
 * negative errno becomes a wire error; the only other Errors the daemon
 * sends are about a connection, not a request (an unsupported version in
 * session.c, a refused connection in server.c).
 *
 * Layer server/: the listener (server.c), sessions (session.c), calls and
 * their dispatch (call.c), systemd notification (notify.c), the daemon's
 * state (daemon.h).  It calls tenant/, config/ (types only), core/ and
 * common/; what lies above (the request table, freeing a session's
 * context and CM ids, reloading) it reaches through the upcalls main.c
 * sets (struct ibvd_upcalls, daemon.h).  Handlers see the server through
 * this header and their own session (session.h); ibvctl reads the
 * clients through clients.h only.
 */
#ifndef IBVD_CALL_H
#define IBVD_CALL_H

#include <stdbool.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "daemon.h"
#include "frame.h"

struct ibvd_session;
struct ibvd_call;

typedef int (*ibvd_request_fn)(struct ibvd_call *call);

struct ibvd_request_type {
	uint16_t type;			/* enum ibvd_msg_type */
	const char *name;
	const ProtobufCMessageDescriptor *payload;	/* NULL: Empty */
	unsigned int nfds;		/* fds the request must carry */
	unsigned int states;		/* mask of enum ibvd_session_state */
	ibvd_request_fn handler;
};

/* One request being handled. */
struct ibvd_call {
	struct ibvd_session *session;
	const struct ibvd_request_type *rt;
	uint16_t type;
	uint32_t req_id;
	const ProtobufCMessage *msg;	/* unpacked payload, NULL for Empty */
	struct ibvd_frame *frame;	/* received fds: see ibvd_call_take_fd */
	int replied;
	char errmsg[256];
};

/*
 * Handle one received frame (session.c); takes care of its fds in every
 * case.  Its row comes from s->daemon->up.request_find.
 */
void ibvd_call_dispatch(struct ibvd_session *s, struct ibvd_frame *frame);

/*
 * Send the successful reply (type | IBVD_REPLY, same req_id) with nfds fds
 * (the caller keeps its copies).  Returns 0; -EMSGSIZE if the reply does
 * not fit in a frame (the handler may return that as an error); other
 * errors mean the client is gone or not reading and is being disconnected.
 */
int ibvd_call_reply(struct ibvd_call *call, const ProtobufCMessage *reply,
		    const int *fds, unsigned int nfds);

/*
 * Record the message of an error reply and return err (a negative errno),
 * so that handlers can write
 *	return ibvd_call_error(call, -ENODEV, "unknown device %s", name);
 */
int ibvd_call_error(struct ibvd_call *call, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Take ownership of received fd number i (the dispatcher closes the rest). */
int ibvd_call_take_fd(struct ibvd_call *call, unsigned int i);

struct ibvd_daemon *ibvd_call_daemon(const struct ibvd_call *call);

/*
 * May this request use the privileges of root and the admin group
 * (ibverbsd(8), DESCRIPTION)?  Only if its session's peer had them at
 * connect, and the request's sender still has that peer's uid, as the
 * kernel tells for this very message (SCM_CREDENTIALS: its real uid when
 * sent).  A root server that connected and then became another user, or
 * a process handed the connection by one, gets no more than that user
 * would: as with the kernel, which asks the caller's credentials at each
 * call.  The quota owner stays the connect-time uid.
 */
bool ibvd_call_privileged(const struct ibvd_call *call);

/* Root's alone (ports below 1024): root at connect, and root now. */
bool ibvd_call_root(const struct ibvd_call *call);

/* How many requests were dispatched so far (control thread). */
uint64_t ibvd_call_count(void);

#endif /* IBVD_CALL_H */
