/*
 * Completions: CQEs into CQ rings, and the events they raise, which leave
 * through the control side's hooks (engine.h, struct ibvd_engine_events).
 *
 * A CQ may be fed by several engine threads at once (a SEND executed on
 * one thread completes on a receiver served by another), so everything
 * here that touches a CQ runs under cq->lock.  The client's consumer
 * counter and arm words are read once and range-checked, never trusted.
 */
#include <config.h>

#include <errno.h>
#include <string.h>

#include "barrier.h"
#include "internal.h"

static struct ibvd_cqe *cq_slot(const struct ibvd_cq *cq, uint32_t counter)
{
	return (struct ibvd_cqe *)(cq->ring.slots +
		(size_t)(counter & (cq->ring.nslots - 1)) * cq->ring.stride);
}

/* Does an armed request of kind `flags` fire for this completion? */
static bool arm_matches(uint32_t flags, const struct ibvd_cqe *cqe,
			bool solicited)
{
	if (flags & IBVD_ARM_NEXT)
		return true;
	return (flags & IBVD_ARM_SOLICITED) &&
	       (solicited || cqe->status != IBV_WC_SUCCESS);
}

/*
 * Under cq->lock, after a CQE was published; `want`: fire only that arm
 * (NULL: whichever is pending).  The arm is read once, here: a caller that
 * looked at it before could see the one the app is about to replace,
 * and fire the new one for a completion it already polled.
 */
static void notify(struct ibvd_cq *cq, const struct ibvd_cqe *cqe,
		   bool solicited, const uint32_t *want)
{
	struct ibvd_cq_client *cp = cq->ring.client_page;
	uint32_t arm, fired;

	if (!cq->channel)
		return;
	/*
	 * Store (CQE, tail) -> load (arm_seq) needs a full fence, mirrored by
	 * the client's store (arm_seq) -> fence -> load (CQEs) in
	 * ibv_req_notify_cq + ibv_poll_cq: either it sees this CQE when it
	 * polls after arming, or we see its arm here.
	 */
	ibvd_full_fence();
	/* Acquire: arm_flags was written before arm_seq. */
	arm = ibvd_observe(&cp->arm_seq);
	fired = __atomic_load_n(&cp->fired, __ATOMIC_RELAXED);
	if (arm != fired + 1 || (want && arm != *want))
		return;
	if (!arm_matches(ibvd_read_once(&cp->arm_flags), cqe, solicited))
		return;
	/* the library may fire this arm for a message it placed (ring.h) */
	if (!__atomic_compare_exchange_n(&cp->fired, &fired, arm, false,
					 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return;
	/*
	 * One event per arm: the hook sends it without blocking, and loses
	 * it only if the app stops reading events, as it would be for an
	 * app that never calls ibv_get_cq_event.
	 */
	ibvd_eng_events->completion(cq);
}

/* Under cq->lock: the CQ has no room (or its head is impossible). */
static bool cq_full(const struct ibvd_cq *cq)
{
	uint32_t head = ibvd_read_once(&((struct ibvd_cq_client *)
					 cq->ring.client_page)->head);

	/* A head past the tail wraps to a huge count: an overrun as well. */
	return cq->tail - head >= cq->ring.nslots;
}

/* qp's span of CQEs in cq (objects.h): its send CQ's, or its receive CQ's. */
static struct ibvd_cqe_span *span_in(struct ibvd_qp *qp,
				     const struct ibvd_cq *cq)
{
	return &qp->cqe_span[cq == qp->send_cq ? 0 : 1];
}

int ibvd_eng_cq_push(struct ibvd_cq *cq, struct ibvd_qp *qp,
		     struct ibvd_cqe *cqe, bool solicited)
{
	struct ibvd_cqe_span *span;
	struct ibvd_cq_engine *ep;
	struct ibvd_cqe *slot;
	bool overran = false;

	/* An XRC target has no send CQ, nor a receive CQ once its SRQ went. */
	if (!cq)
		return -EINVAL;
	ep = cq->ring.engine_page;
	pthread_mutex_lock(&cq->lock);
	if (cq->overflowed)
		goto full;
	if (cq_full(cq)) {
		cq->overflowed = true;
		overran = true;
		ibvd_publish(&ep->overflow, 1);
		goto full;
	}
	slot = cq_slot(cq, cq->tail);
	/* the "HCA clock" of ibv_create_cq_ex's timestamps (query.c) */
	cqe->timestamp = ibvd_eng_now();
	cqe->seq = 0;
	memcpy(slot, cqe, offsetof(struct ibvd_cqe, seq));
	/* The slot may hold a purged CQE of an earlier lap. */
	__atomic_store_n(&slot->flags,
			 arm_matches(IBVD_ARM_SOLICITED, cqe, solicited) ?
			 IBVD_CQE_SOLICITED : 0, __ATOMIC_RELAXED);
	/* Fields before seq: a poller that sees the new seq sees the CQE. */
	__atomic_store_n(&slot->seq, cq->tail + 1, __ATOMIC_RELEASE);
	span = span_in(qp, cq);
	if (span->cq != cq) {
		span->cq = cq;
		span->lo = cq->tail;
	}
	span->hi = cq->tail + 1;
	/* Release: a resize's precopy reads it without the lock (cq.c). */
	ibvd_publish(&cq->tail, cq->tail + 1);
	ibvd_publish(&ep->tail, cq->tail);
	notify(cq, cqe, solicited, NULL);
	pthread_mutex_unlock(&cq->lock);
	return 0;
full:
	pthread_mutex_unlock(&cq->lock);
	if (overran)
		ibvd_eng_async(cq->ctx, IBV_EVENT_CQ_ERR, cq->handle);
	return -ENOSPC;
}

/*
 * An event without a CQE of ours (the library made the completion), for
 * that arm only when one is named (a later arm waits for a later one).
 */
static void nudge(struct ibvd_cq *cq, const uint32_t *arm)
{
	/* as a failed completion: it wakes a solicited-only arm too */
	struct ibvd_cqe failed = { .status = IBV_WC_GENERAL_ERR };
	struct ibvd_cqe done = { .status = IBV_WC_SUCCESS };

	pthread_mutex_lock(&cq->lock);
	if (!arm)
		notify(cq, &failed, false, NULL);
	else
		notify(cq, &done, false, arm);
	pthread_mutex_unlock(&cq->lock);
}

void ibvd_eng_cq_nudge(struct ibvd_cq *cq, uint32_t arm)
{
	nudge(cq, &arm);
}

void ibvd_eng_cq_nudge_failed(struct ibvd_cq *cq)
{
	nudge(cq, NULL);
}

/*
 * Receive completions of a QP on an SRQ stay: the WQE came from the SRQ,
 * and its completion is the app's only news that the buffer is free.
 */
static bool purgeable(const struct ibvd_cqe *cqe, const struct ibvd_qp *qp)
{
	return cqe->qp_num == qp->qp_num &&
	       !(qp->srq && (cqe->opcode & IBV_WC_RECV));
}

void ibvd_eng_cq_purge(struct ibvd_cq *cq, struct ibvd_qp *qp)
{
	struct ibvd_engine *eng = ibvd_eng_of(qp);
	struct ibvd_cqe_span *span;
	struct ibvd_cq_client *cp;
	uint32_t head, from, c;

	/* XRC: a target QP has no send CQ (nor a receive one before its
	 * first message), an initiator no receive CQ */
	if (!cq)
		return;
	/*
	 * A CQ of a context being torn down goes too, after its QPs: no
	 * walk for each of them (up to 65,536 QPs, each through up to a
	 * whole CQ, the client's head deciding how far, with the control
	 * thread and, in turns, every engine thread waiting).
	 */
	if (cq->ctx->tearing_down)
		return;
	cp = cq->ring.client_page;
	pthread_mutex_lock(&cq->lock);
	span = span_in(qp, cq);
	head = ibvd_read_once(&cp->head);
	/*
	 * An impossible head (the client's word) costs only the client: its
	 * CQ is broken anyway, and walking all of a huge CQ's slots under
	 * the objects lock would cost everyone.  Nor does a possible one
	 * decide the walk: only the CQEs pushed for qp since its last purge
	 * can be its own (a head a lap back made every RESET of any QP walk
	 * the whole CQ).
	 */
	if (span->cq != cq || cq->tail - head > cq->ring.nslots ||
	    cq->tail - span->hi > cq->tail - head) {
		span->cq = NULL;
		pthread_mutex_unlock(&cq->lock);
		return;
	}
	/*
	 * The later of the head and the span's start, measured back from
	 * its end (between the head and the tail): a lap at most, even when
	 * the counters went round since the span began.
	 */
	from = span->hi - span->lo < span->hi - head ? span->lo : head;
	span->cq = NULL;
	if (eng)
		__atomic_fetch_add(&eng->purge_slots, span->hi - from,
				   __ATOMIC_RELAXED);
	for (c = from; c != span->hi; c++) {
		struct ibvd_cqe *slot = cq_slot(cq, c);

		if (purgeable(slot, qp))
			__atomic_store_n(&slot->flags, IBVD_CQE_PURGED,
					 __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&cq->lock);
}

void ibvd_eng_async(struct ibvd_context *ctx, uint32_t event, uint32_t handle)
{
	ibvd_eng_events->async(ctx, event, handle);
}
