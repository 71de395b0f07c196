/*
 * Device contexts: OPEN_DEVICE makes one of a connection; struct
 * ibvd_context itself is part of the object model (core/objects.h).
 */
#ifndef IBVD_CONTEXT_H
#define IBVD_CONTEXT_H

#include "core/objects.h"

#include "ibverbsd.pb-c.h"

struct ibvd_call;
struct ibvd_session;

/* OPEN_DEVICE's and IMPORT_DEVICE's reply fds, in this order (PROTOCOL.md). */
enum {
	IBVD_OPEN_FD_ASYNC,		/* client end of the member's async socket */
	IBVD_OPEN_FD_CTX_PAGE,		/* context page memfd (ring.h) */
	IBVD_OPEN_FD_KICK,		/* eventfd that wakes the engine */
	IBVD_OPEN_FD_RINGS,		/* ring arena memfd (ring.h) */
	IBVD_OPEN_NFDS,
};

/*
 * Session s stops using its context (it closes).  The last member to
 * leave destroys the context and everything it owns.
 */
void ibvd_context_leave(struct ibvd_session *s);

/*
 * Make session s (fresh) a member of ctx (IMPORT_DEVICE); fds[] gets what
 * its reply carries: the client end of its own async socket (the caller
 * closes it after the reply) and the context's shared fds (not to close).
 * -EMFILE when ctx has IBVD_CTX_MAX_MEMBERS already.
 */
int ibvd_context_join(struct ibvd_context *ctx, struct ibvd_session *s,
		      int fds[IBVD_OPEN_NFDS]);

/*
 * The member that stands for ctx in ibvctl's rows: the first of the uid
 * its objects are charged to (its creator's), else the first of all (the
 * creator and its uid's importers have all left).
 */
const struct ibvd_session *ibvd_context_stand_in(const struct ibvd_context *ctx);

/* The OpenDeviceReply fields that describe ctx; info backs reply->device. */
void ibvd_context_reply_info(const struct ibvd_context *ctx,
			     Ibvd__OpenDeviceReply *reply, Ibvd__DeviceInfo *info);

/* Request handler (request.c's table). */
int ibvd_req_open_device(struct ibvd_call *call);

#endif /* IBVD_CONTEXT_H */
