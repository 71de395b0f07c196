/*
 * The completion side of the data path: ibv_poll_cq and ibv_req_notify_cq
 * (context ops reached through header inlines).  Plain loads and stores on
 * the CQ ring (ring.h); no system call, but for one sched_yield in an empty
 * poll after the library woke a sleeping engine (queue.c).
 */
#include "config.h"

#include <string.h>

#include "barrier.h"
#include "ibvd_verbs.h"

static void wc_from_cqe(struct ibv_wc *wc, const struct ibvd_cqe *cqe)
{
	wc->wr_id = cqe->wr_id;
	wc->status = (enum ibv_wc_status)cqe->status;
	wc->opcode = (enum ibv_wc_opcode)cqe->opcode;
	wc->vendor_err = cqe->vendor_err;
	wc->byte_len = cqe->byte_len;
	wc->imm_data = cqe->imm_data;
	wc->qp_num = cqe->qp_num;
	wc->src_qp = cqe->src_qp;
	wc->wc_flags = cqe->wc_flags;
	wc->pkey_index = cqe->pkey_index;
	wc->slid = cqe->slid;
	wc->sl = cqe->sl;
	wc->dlid_path_bits = cqe->dlid_path_bits;
}

static bool take_one(struct ibvc_cq_ring *ring, uint32_t *seen,
		     struct ibvd_cqe *cqe)
{
	uint32_t head = ring->head;

	/*
	 * Re-reading the tail only when we caught up with the last one keeps
	 * a batch off the cache line the engine writes for every CQE.
	 */
	if (head == *seen) {
		/* Acquire: the CQEs below the tail are written before it. */
		*seen = ibvd_observe(&ring->engine->tail);
		if (head == *seen)
			return false;
	}
	memcpy(cqe, &ring->slots[head & (ring->nslots - 1)], sizeof(*cqe));
	/*
	 * Every CQE carries its position + 1: a slot that does not is not the
	 * CQE we expect (the engine overran the ring); stop rather than hand
	 * out garbage.
	 */
	if (cqe->seq != head + 1)
		return false;
	ring->head = head + 1;
	return true;
}

/* end: where to stop, or NULL to go as far as the engine's tail. */
static bool take_live(struct ibvc_cq_ring *ring, uint32_t *seen,
		      const uint32_t *end, struct ibvd_cqe *cqe)
{
	bool skipped = false;

	while ((!end || ring->head != *end) && take_one(ring, seen, cqe)) {
		if (!(cqe->flags & IBVD_CQE_PURGED))
			return true;
		skipped = true;	/* its QP was reset since (ring.h) */
	}
	/*
	 * A caller that got nothing releases nothing: hand the skipped slots
	 * back here, or CQs full of purged CQEs would overrun.
	 */
	if (skipped)
		ibvc_cq_ring_release(ring);
	return false;
}

bool ibvc_cq_ring_take(struct ibvc_cq_ring *ring, uint32_t *seen,
		       struct ibvd_cqe *cqe)
{
	return take_live(ring, seen, NULL, cqe);
}

bool ibvc_cq_ring_take_below(struct ibvc_cq_ring *ring, uint32_t end,
			     struct ibvd_cqe *cqe)
{
	uint32_t seen = end;	/* published: no need to read the tail */

	return take_live(ring, &seen, &end, cqe);
}

void ibvc_cq_ring_release(struct ibvc_cq_ring *ring)
{
	/* Release: done reading these slots; the engine may reuse them. */
	ibvd_publish(&ring->client->head, ring->head);
}

bool ibvc_cq_idle(struct ibvc_cq *cq)
{
	/* a purged CQE counts: a poll that skips it finds nothing, as today */
	return ibvd_observe(&cq->ring.engine->tail) == cq->ring.head &&
	       ibvc_direct_cq_idle(cq);
}

/*
 * Under the CQ lock: whether the app's poll is over (false while a batch
 * of ibv_start_poll holds completions it has not released).  An app that
 * polled and then arms may sleep without polling again (UCX's event mode
 * does): what is left in the CQ, and what came in between, must fire its
 * arm (ibvc_cq_missed).
 */
void ibvc_cq_polled(struct ibvc_cq *cq, bool over)
{
	cq->polled = over;
	if (over)
		cq->polled_fired = cq->look_fired;
}

/*
 * Under the CQ lock, before a poll reads the tail: the events fired so
 * far.  One that fires while the poll looks is the app's to take, for
 * what the poll may not have seen: the poll counts as after it, and an
 * arm then fires nothing more for the same completions (ibvc_cq_missed).
 * Acquire: the tail is read after.
 */
void ibvc_cq_look(struct ibvc_cq *cq)
{
	cq->look_fired = __atomic_load_n(&cq->ring.client->fired,
					 __ATOMIC_ACQUIRE);
}

/*
 * An engine CQE not polled yet that fires a solicited-only arm (the
 * library's own: ibvc_direct_solicited_unpolled).
 */
static bool solicited_unpolled(const struct ibvc_cq_ring *ring)
{
	/* Acquire: the CQEs below the tail are written before it. */
	uint32_t tail = ibvd_observe(&ring->engine->tail), i;

	/* a head past the tail, or a lap behind: an overrun, not ours */
	if (tail - ring->head > ring->nslots)
		return false;
	for (i = ring->head; i != tail; i++) {
		const struct ibvd_cqe *cqe = &ring->slots[i & (ring->nslots - 1)];

		if (cqe->seq == i + 1 && (__atomic_load_n(&cqe->flags,
							  __ATOMIC_RELAXED) &
					  IBVD_CQE_SOLICITED))
			return true;
	}
	return false;
}

/*
 * Under the CQ lock, armed: does it hold completions past the app's last
 * poll that fired no event since (for a solicited-only arm: ones that
 * fire it)?  A NIC's arm names the consumer index the app polled to, and
 * fires at once for CQEs past it; ours fires only for what comes after
 * the arm, so an app that polls, leaves some or finds nothing, and arms
 * would sleep on completions it did not take, or that came between the
 * two.  So would one that re-arms, polls fewer than the CQ holds, and
 * sleeps (perftest's -e with -Q: ibvc_poll_cq_op asks after such a poll).
 * Not when an event fired since that poll: the app is told of those
 * completions already (ibv_rc_pingpong -e re-arms before polling what its
 * event was for, and fails on an event with nothing behind it).
 */
bool ibvc_cq_missed(struct ibvc_cq *cq)
{
	struct ibvd_cq_client *client = cq->ring.client;
	uint32_t fired = __atomic_load_n(&client->fired, __ATOMIC_ACQUIRE);

	if (!cq->cq.channel || !cq->polled || fired != cq->polled_fired ||
	    ibvd_read_once(&client->arm_seq) != fired + 1)
		return false;
	if (ibvd_read_once(&client->arm_flags) == IBVD_ARM_NEXT)
		return !ibvc_cq_idle(cq);
	return solicited_unpolled(&cq->ring) ||
	       ibvc_direct_solicited_unpolled(cq);
}

/*
 * Copy up to num completions out of cq; returns how many (CQ lock held).
 * *left: the poll filled its budget, the CQ is armed and still holds
 * completions for it (ibvc_cq_missed), so the arm is to fire.
 */
static int poll_ring(struct ibvc_cq *cq, int num, struct ibv_wc *wc,
		     bool *left)
{
	uint32_t seen = cq->ring.head;	/* read the tail first thing */
	struct ibvd_cqe cqe;
	int n = 0;

	ibvc_cq_look(cq);
	ibvc_direct_poll_begin(cq, &seen);
	while (n < num && ibvc_direct_next(cq, &seen, &cqe))
		wc_from_cqe(&wc[n++], &cqe);
	ibvc_cq_polled(cq, true);
	if (n)
		ibvc_cq_ring_release(&cq->ring);
	*left = n && n == num && ibvc_cq_missed(cq);
	return n;
}

int ibvc_poll_cq_op(struct ibv_cq *ibcq, int num_entries, struct ibv_wc *wc)
{
	struct ibvc_cq *cq = to_ibvc_cq(ibcq);
	bool left;
	int n;

	/* a budget below 0 polls nothing, as rdma-core's providers count */
	if (num_entries < 0)
		return 0;
	if (num_entries > 0 && !wc)
		return -EINVAL;
	if (ibvc_forked(to_ibvc_context(ibcq->context)))
		return -EIO;
	ibvc_direct_cq_check(cq);
	pthread_mutex_lock(&cq->lock);
	n = poll_ring(cq, num_entries, wc, &left);
	pthread_mutex_unlock(&cq->lock);
	/*
	 * What others did while we gave the CPU away is ours now, not at the
	 * next call: an app that polls its CQ and then reads its CM events
	 * (libfabric's rxm) must not see a peer's disconnect before the
	 * completion of the last SEND that peer took.
	 */
	if (!n && ibvc_yield_to_woken_engine(to_ibvc_context(ibcq->context))) {
		pthread_mutex_lock(&cq->lock);
		n = poll_ring(cq, num_entries, wc, &left);
		pthread_mutex_unlock(&cq->lock);
	}
	if (left)
		ibvc_direct_fire_missed(cq);
	return n;
}

/*
 * Arming is one-shot (ring.h): ask for the event after the engine's last
 * fired one.  An arm for any completion that is still pending is not
 * narrowed to solicited-only by a later request, as on a NIC.
 */
int ibvc_req_notify_cq_op(struct ibv_cq *ibcq, int solicited_only)
{
	struct ibvc_cq *cq = to_ibvc_cq(ibcq);
	struct ibvd_cq_client *client;
	uint32_t fired, flags;
	bool missed;

	if (ibvc_forked(to_ibvc_context(ibcq->context)))
		return ibvc_errno_ret(-EIO);
	flags = solicited_only ? IBVD_ARM_SOLICITED : IBVD_ARM_NEXT;
	ibvc_cq_lock(cq);
	/* First: it may fire the arm this one follows. */
	ibvc_direct_arming(cq);
	client = cq->ring.client;
	fired = __atomic_load_n(&client->fired, __ATOMIC_ACQUIRE);
	if (ibvd_read_once(&client->arm_seq) == fired + 1 &&
	    ibvd_read_once(&client->arm_flags) == IBVD_ARM_NEXT)
		flags = IBVD_ARM_NEXT;
	ibvd_write_once(&client->arm_flags, flags);
	/* Release: the engine that sees the new arm_seq sees its flags too. */
	ibvd_publish(&client->arm_seq, fired + 1);
	/*
	 * Store (arm) -> load (the tail, in the app's next ibv_poll_cq) needs
	 * a full fence: the engine stores a CQE's tail and then loads arm_seq.
	 * Without both fences each side could miss the other's store, and the
	 * app would sleep on a CQE that produced no event.
	 */
	ibvd_full_fence();
	ibvc_direct_armed(cq);
	missed = ibvc_cq_missed(cq);
	ibvc_cq_unlock(cq);
	if (missed)
		ibvc_direct_fire_missed(cq);
	return 0;
}
