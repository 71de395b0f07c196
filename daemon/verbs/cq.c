/*
 * Completion queues: CREATE_CQ, RESIZE_CQ, DESTROY_CQ.
 *
 * A CQ is one ring of nslots 64-byte CQEs in its context's ring arena (ring.h).
 * Counters are free-running and no slot is wasted, so a CQ of nslots
 * slots holds nslots completions: the reported cqe is nslots, the
 * requested count rounded up to a power of two.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "barrier.h"
#include "context.h"
#include "ibverbsd.pb-c.h"
#include "server/call.h"
#include "verbs.h"

/* Slots for cqe completions, or 0 if the device cannot make that CQ. */
static uint32_t cq_slots(const struct ibvd_context *ctx, uint32_t cqe)
{
	struct ibvd_limits lim;
	uint32_t n;

	ibvd_ctx_limits(ctx, &lim);
	if (cqe < 1 || cqe > lim.max_cqe)
		return 0;
	n = ibvd_roundup_pow2(cqe);
	return n <= IBVD_CQ_MAX_SLOTS ? n : 0;
}

/* A new, empty CQ ring: its slots are the engine's. */
static int cq_ring_new(struct ibvd_context *ctx, uint32_t nslots,
		       struct ibvd_ring *ring)
{
	return ibvd_ring_alloc(ctx, ring, nslots, IBVD_CQE_SIZE, true);
}

void ibvd_cq_to_msg(const struct ibvd_cq *cq, Ibvd__CreateCqReply *m,
		    Ibvd__RingPlace *place)
{
	ibvd_ring_place(&cq->ring, place);
	m->handle = cq->handle;
	m->cqe = cq->cqe;
	m->nslots = cq->ring.nslots;
	m->ring = place;
}

static int reply_cq(struct ibvd_call *call, const struct ibvd_cq *cq)
{
	Ibvd__CreateCqReply reply = IBVD__CREATE_CQ_REPLY__INIT;
	Ibvd__RingPlace place;

	ibvd_cq_to_msg(cq, &reply, &place);
	return ibvd_call_reply(call, &reply.base, NULL, 0);
}

static int cq_args(struct ibvd_call *call, const Ibvd__CreateCq *req,
		   uint32_t *nslots, struct ibvd_comp_channel **ch)
{
	struct ibvd_context *ctx = ibvd_call_ctx(call);

	*nslots = cq_slots(ctx, req->cqe);
	if (!*nslots)
		return ibvd_call_error(call, -EINVAL, "cqe %u out of range",
				       req->cqe);
	if (req->comp_vector >= IBVD_NUM_COMP_VECTORS)
		return ibvd_call_error(call, -EINVAL, "no completion vector %u",
				       req->comp_vector);
	*ch = NULL;
	if (req->channel) {
		*ch = ibvd_handle_lookup(&ctx->handles, req->channel,
					 IBVD_OBJ_COMP_CHANNEL);
		if (!*ch)
			return ibvd_call_error(call, -EINVAL,
					       "no completion channel %#x",
					       req->channel);
	}
	return 0;
}

int ibvd_cq_new(struct ibvd_call *call, const Ibvd__CreateCq *req,
		struct ibvd_comp_channel *ch, struct ibvd_cq **ret_cq)
{
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	struct ibvd_comp_channel *named;
	struct ibvd_cq *cq;
	uint32_t nslots;
	int ret;

	ret = cq_args(call, req, &nslots, &named);
	if (ret < 0)
		return ret;
	if (!ch)
		ch = named;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	ret = cq_ring_new(ctx, nslots, &cq->ring);
	if (ret < 0) {
		free(cq);
		return ibvd_call_error(call, ret, "cannot create the CQ ring");
	}
	cq->ctx = ctx;
	cq->cqe = nslots;
	cq->channel = ch;
	pthread_mutex_init(&cq->lock, NULL);
	ret = ibvd_obj_add(ctx, IBVD_OBJ_CQ, cq, &cq->handle);
	if (ret < 0) {
		ibvd_ring_free(ctx, &cq->ring);
		pthread_mutex_destroy(&cq->lock);
		free(cq);
		return ibvd_call_error(call, ret, "too many CQs");
	}
	if (ch)
		ibvd_channel_cqs(ch, 1);
	*ret_cq = cq;
	return 0;
}

int ibvd_req_create_cq(struct ibvd_call *call)
{
	const Ibvd__CreateCq *req = (const Ibvd__CreateCq *)call->msg;
	struct ibvd_cq *cq;
	int ret;

	ret = ibvd_cq_new(call, req, NULL, &cq);
	if (ret < 0)
		return ret;
	/* No QP uses it yet, so the engine cannot see it: no lock needed. */
	ret = reply_cq(call, cq);
	if (ret < 0 && ibvd_call_ctx(call))
		ibvd_cq_destroy(cq);
	return ret;
}

/* Does the slot of counter value c hold the CQE written at c? */
static bool slot_written_at(const struct ibvd_ring *r, uint32_t c)
{
	const struct ibvd_cqe *cqe = (const struct ibvd_cqe *)
		(r->slots + (size_t)(c & (r->nslots - 1)) * IBVD_CQE_SIZE);

	return ibvd_read_once(&cqe->seq) == c + 1;
}

/*
 * The bulk of a resize, without the objects lock (ibvd_ring_precopy).
 * Only the control thread changes or frees a CQ's ring, so `from` stays; the engine only
 * appends (at counters from the tail it published) and writes a slot
 * again only a lap later, once the client's head has passed it, which
 * the library does not move while it resizes.  So what is copied here
 * stays valid, and cq_move under the lock adds what came meanwhile.
 */
static void cq_precopy(const struct ibvd_cq *cq, struct ibvd_ring *to,
		       struct ibvd_ring_copied *done)
{
	const struct ibvd_ring *from = &cq->ring;
	uint32_t head = ibvd_read_once(&((const struct ibvd_cq_client *)
					 from->client_page)->head);
	/* ours, not the engine header's, which a client can write */
	uint32_t tail = ibvd_observe(&cq->tail), n = tail - head;

	/* an impossible head: nothing worth copying (cq_move says so) */
	if (n > from->nslots)
		n = 0;
	/* more than fits: cq_move refuses, unless the client polls first */
	if (n > to->nslots)
		n = to->nslots;
	done->lo = tail - n;
	done->hi = done->lo;
	ibvd_ring_precopy(from, to, &cq->tail, tail, done);
}

/*
 * Move the completions the client has not consumed to `to`, at the same
 * counter values, so its head and every CQE's seq stay valid: those the
 * precopy did not (`done`).  Called with the objects lock held for
 * writing and cq->lock.  -EINVAL if they do not fit.
 */
static int cq_move(struct ibvd_cq *cq, struct ibvd_ring *to,
		   const struct ibvd_ring_copied *done)
{
	const struct ibvd_ring *from = &cq->ring;
	const struct ibvd_cq_client *oc = from->client_page;
	const struct ibvd_cq_engine *oe = from->engine_page;
	struct ibvd_cq_client *nc = to->client_page;
	struct ibvd_cq_engine *ne = to->engine_page;
	uint32_t head = ibvd_read_once(&oc->head);
	uint32_t n = cq->tail - head;

	/*
	 * An impossible head (the client's word) only costs it completions:
	 * all of them, not a whole ring's worth copied under the objects
	 * lock.  A head within a lap of the tail must also name a slot
	 * written there (a new CQ's head put one lap back names empty ones).
	 * One behind what the precopy began with was moved back since, which
	 * no library does: the same, or the client could make us copy a lap
	 * under the lock after all.
	 */
	if (n > from->nslots ||
	    (n && (!slot_written_at(from, head) ||
		   !slot_written_at(from, cq->tail - 1)))) {
		n = 0;
		head = cq->tail;
	}
	if (n > to->nslots)
		return -EINVAL;
	if (n > cq->tail - done->lo) {
		n = 0;
		head = cq->tail;
	}
	/* the head is now at or past done->lo: copy from where it is */
	if (cq->tail - head < cq->tail - done->hi)
		ibvd_ring_slots_copy(from, to, head, cq->tail);
	else
		ibvd_ring_slots_copy(from, to, done->hi, cq->tail);
	nc->head = head;
	nc->arm_seq = ibvd_read_once(&oc->arm_seq);
	nc->arm_flags = ibvd_read_once(&oc->arm_flags);
	nc->fired = ibvd_read_once(&oc->fired);
	nc->owed = ibvd_read_once(&oc->owed);
	ne->direct_moves = ibvd_read_once(&oe->direct_moves);
	ne->overflow = ibvd_read_once(&oe->overflow);
	ibvd_publish(&ne->tail, cq->tail);
	return 0;
}

int ibvd_req_resize_cq(struct ibvd_call *call)
{
	const Ibvd__ResizeCq *req = (const Ibvd__ResizeCq *)call->msg;
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	struct ibvd_cq *cq = ibvd_handle_lookup(&ctx->handles, req->handle,
						IBVD_OBJ_CQ);
	struct ibvd_ring ring, old;
	struct ibvd_ring_copied copied;
	uint32_t nslots;
	int ret;

	if (!cq)
		return ibvd_call_error(call, -EINVAL, "no CQ %#x", req->handle);
	nslots = cq_slots(ctx, req->cqe);
	if (!nslots)
		return ibvd_call_error(call, -EINVAL, "cqe %u out of range", req->cqe);
	ret = cq_ring_new(ctx, nslots, &ring);
	if (ret < 0)
		return ibvd_call_error(call, ret, "cannot create the CQ ring");
	cq_precopy(cq, &ring, &copied);
	ibvd_objects_write_lock();
	pthread_mutex_lock(&cq->lock);
	old = cq->ring;
	ret = cq_move(cq, &ring, &copied);
	if (ret == 0) {
		cq->ring = ring;
		cq->cqe = nslots;
	}
	pthread_mutex_unlock(&cq->lock);
	ibvd_objects_write_unlock();
	if (ret < 0) {
		ibvd_ring_free(ctx, &ring);
		return ibvd_call_error(call, ret,
				       "cqe %u is less than the completions in the CQ",
				       req->cqe);
	}
	ibvd_ring_free(ctx, &old);
	return reply_cq(call, cq);
}

/* The objects lock is held for writing, unless no QP ever used cq. */
void ibvd_cq_destroy(struct ibvd_cq *cq)
{
	ibvd_handle_remove(&cq->ctx->handles, cq->handle, IBVD_OBJ_CQ);
	if (cq->channel)
		ibvd_channel_cqs(cq->channel, -1);
	ibvd_ring_free(cq->ctx, &cq->ring);
	pthread_mutex_destroy(&cq->lock);
	free(cq);
}

int ibvd_req_destroy_cq(struct ibvd_call *call)
{
	const Ibvd__Handle *req = (const Ibvd__Handle *)call->msg;
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	struct ibvd_cq *cq = ibvd_handle_lookup(&ctx->handles, req->handle,
						IBVD_OBJ_CQ);

	if (!cq)
		return ibvd_call_error(call, -EINVAL, "no CQ %#x", req->handle);
	if (cq->users)
		return ibvd_call_error(call, -EBUSY, "CQ %#x is used by %u QPs",
				       req->handle, cq->users);
	/*
	 * No QP reaches it any more, so no engine pass can; the lock keeps
	 * the rule simple anyway: lifetimes change under it (objects.h).
	 */
	ibvd_objects_write_lock();
	ibvd_cq_destroy(cq);
	ibvd_objects_write_unlock();
	return 0;
}
