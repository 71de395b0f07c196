/*
 * Creating calls a client gave up waiting for (conn.c's timeout), and the
 * undoing of what they made when their replies come late.
 */
#ifndef IBVD_ABANDONED_H
#define IBVD_ABANDONED_H

#include <stdbool.h>
#include <stdint.h>

#include "frame.h"

struct ibvd_conn;

/*
 * The last few calls of a connection that timed out after their request
 * went: a stalled daemon may still carry them out.
 */
#define IBVD_ABANDONED_MAX	16

struct ibvd_abandoned {
	uint32_t req_id;
	uint16_t type;
};

/* Remember that the call req_id of type timed out (if it creates). */
void ibvd_abandoned_add(struct ibvd_conn *conn, uint32_t req_id,
			uint16_t type);

/*
 * A reply that was no call's: if it answers an abandoned create, destroy
 * what it made (requests whose replies are skipped in turn).  Returns
 * true if it was one.  conn->lock held.
 */
bool ibvd_abandoned_undo(struct ibvd_conn *conn,
			 const struct ibvd_frame *frame);

/*
 * The reply to a call of type that the caller cannot take (its fds did
 * not come, or it does not unpack): if the call creates, destroy what the
 * reply names, as for a late one.  conn->lock held.
 */
void ibvd_abandoned_undo_now(struct ibvd_conn *conn, uint16_t type,
			     const struct ibvd_frame *frame);

#endif /* IBVD_ABANDONED_H */
