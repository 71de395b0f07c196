/*
 * A client's connection to the daemon: connect, then synchronous calls.
 * Used by libibverbs (one per device context), librdmacm, ibvctl and tests.
 */
#ifndef IBVD_CONN_H
#define IBVD_CONN_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include <protobuf-c/protobuf-c.h>

#include "abandoned.h"
#include "frame.h"

struct ibvd_conn {
	int sock;
	uint32_t next_req_id;
	/*
	 * Bounds each blocking step on its own: connect, sending a request,
	 * waiting for its reply (so a call may take up to twice this);
	 * <= 0 waits forever.  $IBVERBSD_TIMEOUT_MS, default 30 s.
	 */
	int timeout_ms;
	int dead;		/* the daemon went away: every call fails */
	/*
	 * The process the connection is for: a child that inherited it
	 * through fork() shares the socket, and the two would read each
	 * other's replies; its calls fail with EIO instead.
	 */
	pid_t owner;
	pthread_mutex_t lock;	/* one call in flight per connection */
	uint8_t *buf;		/* IBVD_FRAME_MAX bytes for replies */
	/* Error.message of the last error reply ("" if none): ibvctl shows it. */
	char err_msg[256];
	/* creates that timed out, whose late replies undo them */
	struct ibvd_abandoned abandoned[IBVD_ABANDONED_MAX];
	unsigned int abandoned_next;
};

/*
 * The socket clients use: $IBVERBSD_SOCKET (as the process started with
 * it if it is gone from the environment since), else the configured
 * default.
 */
const char *ibvd_socket_path(void);

/*
 * Connect to the daemon at path (NULL: ibvd_socket_path()).
 * Returns 0 or a negative errno (-ENOENT/-ECONNREFUSED: no daemon there,
 * -EACCES: not allowed to use the socket, -ETIMEDOUT: the daemon does not
 * accept connections).
 */
int ibvd_conn_open(struct ibvd_conn *conn, const char *path);

/* Close and free; safe on a connection whose open failed. */
/* A connection on sock, already connected (takes it, unless it fails). */
int ibvd_conn_adopt(struct ibvd_conn *conn, int sock);

void ibvd_conn_close(struct ibvd_conn *conn);

/*
 * Send a request and wait for its reply.  req may be NULL (empty payload).
 * On success *reply holds the unpacked reply (free it with
 * protobuf_c_message_free_unpacked(*reply, NULL)); reply may be NULL when
 * the caller wants no payload.  Up to *nfds fds that came with the reply are
 * stored in fds and *nfds updated (fds may be NULL when none are expected;
 * surplus fds are closed).
 * Returns 0, the negated errno of an error reply (its message is then in
 * conn->err_msg; also of an Error with req_id 0, which the daemon sends
 * before closing a connection it refuses), -EIO when the daemon is gone
 * (and from then on), -ETIMEDOUT when the request could not be sent or no
 * reply came within the timeout, or -EPROTO for a malformed reply.
 */
int ibvd_conn_call(struct ibvd_conn *conn, uint16_t type,
		   const ProtobufCMessage *req,
		   const ProtobufCMessageDescriptor *reply_desc,
		   ProtobufCMessage **reply, int *fds, unsigned int *nfds);

/*
 * ibvd_conn_call() for the few requests that carry fds (ATTACH_MEMORY):
 * req_fds are sent with the request and stay the caller's to close.
 */
int ibvd_conn_call_fds(struct ibvd_conn *conn, uint16_t type,
		       const ProtobufCMessage *req, const int *req_fds,
		       unsigned int nreq_fds,
		       const ProtobufCMessageDescriptor *reply_desc,
		       ProtobufCMessage **reply, int *fds, unsigned int *nfds);

/*
 * Wait for the reply to a request sent some other way, as req_id
 * (IMPORT_DEVICE goes out on the context's connection; its reply comes on
 * the importer's new one).
 */
int ibvd_conn_await(struct ibvd_conn *conn, uint32_t req_id, uint16_t type,
		    const ProtobufCMessageDescriptor *reply_desc,
		    ProtobufCMessage **reply, int *fds, unsigned int *nfds);

/* The id of the connection's next request (conn->lock held). */
uint32_t ibvd_conn_next_req_id(struct ibvd_conn *conn);

/* Hand from's connection over to to; from is left closed and empty. */
void ibvd_conn_move(struct ibvd_conn *to, struct ibvd_conn *from);

#endif /* IBVD_CONN_H */
