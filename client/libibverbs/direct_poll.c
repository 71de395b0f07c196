/*
 * Polling and arming a CQ with direct QPs (CQ lock; direct_internal.h has
 * the design): a poll first makes the library's completions, then takes
 * them merged with the engine's CQEs so that one QP's completions keep
 * their order, and the engine's only up to the tail it saw first, so a
 * CQE the engine wrote after a ring moved never passes a completion made
 * from that move.  Arming places what came before the arm and tells the
 * rings of it after.
 */
#include "config.h"

#include <stdlib.h>

#include "barrier.h"
#include "direct_internal.h"

void ibvc_direct_poll_begin(struct ibvc_cq *cq, uint32_t *seen)
{
	struct ibvc_qp *qp;

	cq->direct.polling = cq->direct.senders || cq->direct.receivers ||
			     cq->direct.tail != cq->direct.head;
	if (!cq->direct.polling)
		return;
	/* First: no engine CQE written after what follows is taken now. */
	cq->direct.limit = ibvd_observe(&cq->ring.engine->tail);
	*seen = cq->ring.head;
	for (qp = cq->direct.senders; qp; qp = qp->next_sender) {
		ibvc_direct_harvest_sends(cq, qp);
		ibvc_direct_take_back_polling(qp);
	}
	if (cq_armed(cq) && cq_poke_fd(cq) < 0)
		ibvc_direct_leave_to_engine(cq);
	else
		ibvc_direct_place_all(cq, true, false);
	if (!cq_armed(cq))
		ibvc_direct_disarm(cq);
}

/*
 * Publish cq's arm in its receivers' rings (a new token each time), then
 * look: a message that came as we armed is for whoever sleeps on the
 * channel, who looks at the rings, places it and fires
 * (ibvc_direct_take_event), or for a poll, which places and fires.
 */
static void publish_arm(struct ibvc_cq *cq)
{
	bool pending = false;
	struct ibvc_qp *qp;

	for (qp = cq->direct.receivers; qp; qp = qp->next_receiver) {
		struct ibvc_direct *d = qp->direct;

		ibvc_direct_rx_armed(qp, d, true,
				     ibvd_read_once(&cq->ring.client->arm_flags));
		ibvd_full_fence();
		if (ibvd_observe(&d->in.ctl->produced) ==
		    ibvd_read_once(&d->in.ctl->consumed))
			continue;
		if (cq_poke_fd(cq) >= 0)
			pending = true;
		else
			ring_own(qp);
	}
	if (pending)
		ibvc_poke(cq_poke_fd(cq));
}

static bool fifo_pop(struct ibvc_cq *cq, struct ibvd_cqe *cqe)
{
	if (cq->direct.tail == cq->direct.head)
		return false;
	*cqe = cq->direct.fifo[cq->direct.head++ & (cq->direct.cap - 1)].cqe;
	return true;
}

/*
 * The next completion in the order the QPs' requests were posted: the
 * engine's CQEs up to the next local one's mark, then that one; with no
 * local one left, the engine's up to this poll's limit.  A mark past the
 * limit moves the limit: the engine's CQEs below a mark were published
 * before the mark was read, and they come first.
 */
bool ibvc_direct_next(struct ibvc_cq *cq, uint32_t *seen, struct ibvd_cqe *cqe)
{
	if (!cq->direct.polling)
		return ibvc_cq_ring_take(&cq->ring, seen, cqe);
	for (;;) {
		uint32_t end = cq->direct.limit;

		if (cq->direct.tail != cq->direct.head) {
			end = cq->direct.fifo[cq->direct.head &
					      (cq->direct.cap - 1)].mark;
			if ((int32_t)(end - cq->ring.head) <= 0)
				return fifo_pop(cq, cqe);
			if ((int32_t)(end - cq->direct.limit) > 0)
				cq->direct.limit = end;
		}
		*seen = cq->direct.limit;
		if (cq->ring.head == end)
			return fifo_pop(cq, cqe);
		if (ibvc_cq_ring_take_below(&cq->ring, end, cqe))
			return true;
		/* purged ones skipped to the end, or an overrun: stop there */
		if (cq->ring.head != end)
			return fifo_pop(cq, cqe);
	}
}

void ibvc_direct_arming(struct ibvc_cq *cq)
{
	struct ibvc_qp *qp;

	/*
	 * What came before the arm is placed before it: on a NIC its CQE
	 * would be there already, and fire no event of this arm.  An app
	 * that polls after it gets its event only for what comes later
	 * (ibv_rc_pingpong -e -t counts on that), whoever takes it.
	 */
	ibvc_direct_place_all(cq, true, false);
	for (qp = cq->direct.senders; qp; qp = qp->next_sender)
		qp->direct->arm_since = ibvc_direct_sent_taken(qp, qp->direct);
}

/*
 * cq was armed with completions in it that the app has not seen and that
 * fired nothing (ibvc_cq_missed): the arm fires now, as a NIC's would.
 * The event is the library's, through the channel's wake-up pair, which a
 * channel without direct QPs fetches here (not under the CQ lock: the
 * fetch takes the channel's, which comes first).
 */
/*
 * Under the CQ lock: a completion of ours not polled yet that fires a
 * solicited-only arm (ibvc_cq_missed).
 */
bool ibvc_direct_solicited_unpolled(const struct ibvc_cq *cq)
{
	uint32_t i;

	for (i = cq->direct.head; i != cq->direct.tail; i++)
		if (cq->direct.fifo[i & (cq->direct.cap - 1)].solicited)
			return true;
	return false;
}

void ibvc_direct_fire_missed(struct ibvc_cq *cq)
{
	if (cq_poke_fd(cq) < 0)
		ibvc_channel_poke_fetch(cq->cq.channel);
	ibvc_cq_lock(cq);
	if (ibvc_cq_missed(cq))
		ibvc_direct_fire_arm(cq,
				     ibvd_read_once(&cq->ring.client->arm_seq),
				     true);
	ibvc_cq_unlock(cq);
}

void ibvc_direct_armed(struct ibvc_cq *cq)
{
	enum wake_kind kind;
	struct ibvc_qp *qp;

	publish_arm(cq);
	for (qp = cq->direct.senders; qp; qp = qp->next_sender) {
		struct ibvc_direct *d = qp->direct;

		/*
		 * The engine sends the event once the SEND is taken, and takes
		 * them itself if the receiver does not: it is told of both,
		 * unless the receiver's library wakes us (sleeper_watched).
		 * Taken already: the event is ours to send.
		 */
		kind = ibvc_direct_update_wake(qp, d, false, d->arm_since);
		if (kind == WAKE_AT && ibvc_direct_fire_senders(cq, true))
			break;
		if (kind != WAKE_AT &&
		    d->sends_head == ibvd_observe(&d->sends_tail))
			continue;
		if (!ibvc_direct_peer_wakes_us(cq))
			ring_own(qp);
	}
}

/*
 * As the engine's CQEs of a destroyed QP are (IBVD_CQE_PURGED), and as a
 * NIC's provider cleans its CQ: an app that closes a connection and then
 * drains the CQ (libfabric's rxm) must not meet the QP again.  Kept in
 * order; the CQ lock keeps pollers out.
 */
void ibvc_direct_cq_forget(struct ibvc_cq *cq, uint32_t qp_num)
{
	uint32_t i, keep, mask;

	ibvc_cq_lock(cq);
	mask = cq->direct.cap - 1;
	keep = cq->direct.head;
	for (i = cq->direct.head; cq->direct.fifo && i != cq->direct.tail; i++)
		if (cq->direct.fifo[i & mask].cqe.qp_num != qp_num)
			cq->direct.fifo[keep++ & mask] = cq->direct.fifo[i & mask];
	cq->direct.tail = keep;
	ibvc_cq_unlock(cq);
}

void ibvc_direct_cq_fini(struct ibvc_cq *cq)
{
	free(cq->direct.fifo);
	cq->direct.fifo = NULL;
}
