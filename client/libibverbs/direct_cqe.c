/*
 * The completions the library makes itself (CQ lock; direct_internal.h
 * has the design): they wait in the CQ's small FIFO, each with the
 * engine tail it follows, until a poll merges them with the engine's
 * CQEs (direct_poll.c).  The sends the receiver took become completions
 * here, and a poller of the send CQ moves SENDs waiting in the SQ to the
 * ring.
 */
#include "config.h"

#include <string.h>

#include "barrier.h"
#include "direct_internal.h"
#include "util.h"

/*
 * A receiver that does not poll would hold our SENDs for ever, where a
 * NIC's responder takes them at once: past this the engine places them.
 */
#define DIRECT_STALL_NS	20000u

bool ibvc_direct_fifo_full(const struct ibvc_cq *cq)
{
	return cq->direct.tail - cq->direct.head >= cq->direct.cap;
}

/*
 * Kept in the order of their marks.  One QP's completions are made with
 * marks in order, but those of QPs sharing the CQ are not (a SEND taken
 * late keeps the mark of its post): one with an earlier mark must not
 * wait behind another's later one while the engine's CQEs between the
 * two marks, its own QP's among them, go out first.  Equal marks keep
 * the order they came in.
 */
struct ibvc_local_cqe *ibvc_direct_fifo_push(struct ibvc_cq *cq,
					     const struct ibvd_cqe *cqe,
					     uint32_t mark)
{
	uint32_t mask = cq->direct.cap - 1, at = cq->direct.tail;
	struct ibvc_local_cqe *fifo = cq->direct.fifo;

	for (; at != cq->direct.head &&
	       (int32_t)(fifo[(at - 1) & mask].mark - mark) > 0; at--)
		fifo[at & mask] = fifo[(at - 1) & mask];
	fifo[at & mask].cqe = *cqe;
	/* the engine's clock (ring.h), for a CQ whose reader asks for it */
	if (cq->timestamps)
		fifo[at & mask].cqe.timestamp = ibvd_mono_ns();
	fifo[at & mask].mark = mark;
	/* an error fires a solicited-only arm too (a SEND's: place_one) */
	fifo[at & mask].solicited = cqe->status != IBV_WC_SUCCESS;
	cq->direct.tail++;
	return &fifo[at & mask];
}

static void send_cqe(struct ibvd_cqe *cqe, const struct ibvc_qp *qp,
		     const struct ibvc_direct_send *s, enum ibv_wc_status st)
{
	memset(cqe, 0, sizeof(*cqe));
	cqe->wr_id = s->wr_id;
	cqe->status = st;
	cqe->opcode = s->opcode;
	/* an error's is 0, as the engine's and rxe's flushes say */
	cqe->byte_len = st == IBV_WC_SUCCESS ? s->byte_len : 0;
	cqe->qp_num = qp->qp.qp_num;
}

/* The oldest send waits: after DIRECT_STALL_NS, ask the engine, once. */
static void stalled(struct ibvc_qp *qp, struct ibvc_direct *d, bool moved)
{
	uint64_t now;

	if (moved) {
		d->stall_ns = 0;
		d->stall_rung = false;
		return;
	}
	if (d->stall_rung)
		return;
	now = ibvd_mono_ns();
	if (!d->stall_ns) {
		d->stall_ns = now;
	} else if (now - d->stall_ns > DIRECT_STALL_NS) {
		d->stall_rung = true;
		ring_own(qp);
	}
}

void ibvc_direct_harvest_sends(struct ibvc_cq *cq, struct ibvc_qp *qp)
{
	struct ibvc_direct *d = qp->direct;
	uint32_t tail = ibvd_observe(&d->sends_tail);
	uint32_t head = d->sends_head, first = head;
	uint32_t fail, consumed;

	if (head == tail)
		return;
	fail = ibvd_observe(&qp->sq.engine->direct_fail_status);
	consumed = ibvc_direct_sent_done(qp, d);
	while (head != tail && !ibvc_direct_fifo_full(cq)) {
		const struct ibvc_direct_send *s = &d->sends[head & (d->sends_cap - 1)];
		enum ibv_wc_status st = IBV_WC_SUCCESS;
		struct ibvd_cqe cqe;

		if (!ibvc_direct_taken(d, consumed, s->end)) {
			if (!fail)
				break;
			st = d->fail_reported ? IBV_WC_WR_FLUSH_ERR :
						(enum ibv_wc_status)fail;
			d->fail_reported = true;
		}
		if (st != IBV_WC_SUCCESS || s->signaled) {
			send_cqe(&cqe, qp, s, st);
			ibvc_direct_fifo_push(cq, &cqe, s->mark);
		}
		head++;
	}
	/* Release: done with the entries; posters may reuse them. */
	ibvd_publish(&d->sends_head, head);
	if (head != tail || head != first)
		stalled(qp, d, head != first);
}

/*
 * A poller of the send CQ moves SENDs waiting in the SQ to the ring too
 * (a streaming sender polls far more often than it posts), if no poster
 * holds the SQ: the SQ lock comes before the CQ's, so only a try.
 */
void ibvc_direct_take_back_polling(struct ibvc_qp *qp)
{
	/* the common case, nothing in the SQ: no lock for it */
	if (ibvd_observe(&qp->sq.engine->head) ==
	    ibvd_read_once(&qp->sq.client->tail) ||
	    qp->single_threaded || pthread_mutex_trylock(&qp->sq.lock))
		return;
	ibvc_direct_take_back(qp, qp->sq.tail);
	ibvc_direct_send_done(qp);
	pthread_mutex_unlock(&qp->sq.lock);
}
