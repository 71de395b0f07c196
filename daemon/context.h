/*
 * Device contexts: what OPEN_DEVICE makes of a connection.
 *
 * A context belongs to exactly one session and one device.  It owns the
 * daemon end of the async-event socket and the handle table of every
 * object created through it; freeing the context destroys them all.
 */
#ifndef IBVD_CONTEXT_H
#define IBVD_CONTEXT_H

#include <stdint.h>
#include <sys/queue.h>

#include "handle.h"
#include "objects.h"

/* Completion vectors a context reports (the engine wakes through one). */
#define IBVD_NUM_COMP_VECTORS	1

struct ibvd_call;
struct ibvd_device;
struct ibvd_ectx;
struct ibvd_session;

struct ibvd_context {
	TAILQ_ENTRY(ibvd_context) dev_link;	/* in dev->contexts */
	struct ibvd_device *dev;
	struct ibvd_session *session;
	uint32_t id;			/* daemon-wide, for logs and ibvctl */
	int async_fd;			/* our end of the async socket */
	uint32_t async_seq;		/* req_id of the last AsyncEvent */
	struct ibvd_handle_table handles;
	struct ibvd_ctx_objs objs;	/* objects.h: memory, rings, doorbells */
	struct ibvd_ectx *engine;	/* engine/: doorbells, serving thread */
};

/* Destroy the context, everything it owns, and detach it from its session. */
void ibvd_context_free(struct ibvd_context *ctx);

/* Request handler (request.c's table). */
int ibvd_req_open_device(struct ibvd_call *call);

#endif /* IBVD_CONTEXT_H */
