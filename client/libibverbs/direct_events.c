/*
 * Events of what the library places and completes itself (common/
 * transit.h, "Blocking"; direct_internal.h has the design): it fires the
 * CQ's arm for them as the engine fires for its CQEs, tells the senders
 * to a receive CQ of its arm so that they wake whoever sleeps on it, and
 * answers ibv_get_cq_event's looks and the channel's fallback timer.
 */
#include "config.h"

#include <errno.h>
#include <sys/socket.h>

#include "barrier.h"
#include "direct_internal.h"
#include "transit.h"

/*
 * Tell the sender to qp's rings that its receive CQ is armed (arm, of
 * kind IBVD_ARM_*), or no longer: it wakes us (transit.h, "Blocking"),
 * unless no receive is posted for what it sends.
 */
void ibvc_direct_rx_armed(struct ibvc_qp *qp, struct ibvc_direct *d,
			  bool armed, uint32_t kind)
{
	const struct ibvc_wq *wq = qp->qp.srq ? &to_ibvc_srq(qp->qp.srq)->rq :
						&qp->rq;
	struct ibvc_cq *cq = to_ibvc_cq(qp->qp.recv_cq);
	uint32_t arm;

	if (armed) {
		/*
		 * A token of this publication, not the CQ's arm number: a
		 * sender pokes once per token (wake_receiver), and an arm
		 * asked for again while it waits is published again.
		 */
		arm = __atomic_add_fetch(&cq->direct.arm_token, 1, __ATOMIC_RELAXED);
		if (!arm)
			arm = __atomic_add_fetch(&cq->direct.arm_token, 1,
						 __ATOMIC_RELAXED);
		if (cq_poke_fd(cq) < 0)
			kind |= IBVD_TRANSIT_ARM_UNWATCHED;
		if (ibvd_read_once(&wq->client->tail) ==
		    ibvd_read_once(&wq->client->direct_head))
			kind |= IBVD_TRANSIT_ARM_NO_RECV;
		ibvd_write_once(&d->in.ctl->arm_kind, kind);
		/* Release: the sender that sees the arm sees its kind. */
		ibvd_publish(&d->in.ctl->arm_seq, arm);
	} else if (ibvd_read_once(&d->in.ctl->arm_seq)) {
		ibvd_write_once(&d->in.ctl->arm_seq, 0);
	}
}

/* The CQ's event fired: the rings need not ring for it any more. */
void ibvc_direct_disarm(struct ibvc_cq *cq)
{
	struct ibvc_qp *qp;

	for (qp = cq->direct.receivers; qp; qp = qp->next_receiver)
		ibvc_direct_rx_armed(qp, qp->direct, false, 0);
	for (qp = cq->direct.senders; qp; qp = qp->next_sender)
		if (ibvd_read_once(&qp->sq.client->direct_sender_waits))
			ibvc_direct_say_wake(qp, qp->direct, 0, 0);
}

bool ibvc_poke(int fd)
{
	if (fd < 0)
		return false;
	if (send(fd, "", 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1)
		return true;
	/* full: what it holds wakes the reader as well as ours would */
	return errno == EAGAIN || errno == EWOULDBLOCK;
}

/*
 * Under cq->lock, after placing: fire cq's arm for what we placed, as
 * the engine fires for its CQEs (ring.h: the compare-and-swap decides
 * which of us sends the one event).  The event waits in direct.events
 * for ibv_get_cq_event; `wake`: for a sleeper, unless that is the caller.
 */
bool ibvc_direct_fire_arm(struct ibvc_cq *cq, uint32_t arm, bool wake)
{
	uint32_t fired = arm - 1;

	if (cq_poke_fd(cq) < 0 ||
	    !__atomic_compare_exchange_n(&cq->ring.client->fired, &fired, arm,
					 false, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED))
		return false;
	cq->direct.events++;
	ibvc_direct_disarm(cq);
	if (wake)
		ibvc_poke(cq_poke_fd(cq));
	return true;
}

void ibvc_direct_fire(struct ibvc_cq *cq, unsigned int placed, bool wake)
{
	struct ibvd_cq_client *cp = cq->ring.client;

	if (!(placed & PLACED_ANY) || !cq_armed(cq))
		return;
	if (!(ibvd_read_once(&cp->arm_flags) & IBVD_ARM_NEXT) &&
	    !(placed & PLACED_SOLICITED))
		return;
	ibvc_direct_fire_arm(cq, ibvd_read_once(&cp->arm_seq), wake);
}

/*
 * A sender asleep on cq whose SENDs were taken as far as it waited for
 * (ibvc_direct_update_wake): its event, for the arm it slept on only.
 */
bool ibvc_direct_fire_senders(struct ibvc_cq *cq, bool wake)
{
	uint32_t arm, now = ibvd_read_once(&cq->ring.client->arm_seq);
	struct ibvc_qp *qp;

	if (!arm_any(cq))
		return false;
	for (qp = cq->direct.senders; qp; qp = qp->next_sender) {
		if (ibvc_direct_own_wake_due(qp,
				ibvc_direct_sent_taken(qp, qp->direct), &arm) &&
		    arm == now)
			return ibvc_direct_fire_arm(cq, arm, wake);
	}
	return false;
}

/*
 * Under cq->lock: what cq's receivers' rings hold, placed and fired for.
 * `asleep`: for a receiver that sleeps on cq (ibv_get_cq_event), a SEND
 * that waits for a receive is the engine's, which waits as RNR says and
 * places it once one is posted, wherever that comes from (an SRQ's post
 * tells us nothing).  One we could not take because the engine held
 * the receive queue (it may have looked at the ring before the SEND
 * came, and its sender woke us only) we look at again in a moment.
 */
void ibvc_direct_place_all(struct ibvc_cq *cq, bool wake, bool asleep)
{
	unsigned int placed = 0, got;
	struct ibvc_qp *qp;

	for (qp = cq->direct.receivers; qp; qp = qp->next_receiver) {
		got = ibvc_direct_place_received(cq, qp);
		if (asleep && (got & PLACED_NO_WQE))
			ring_own(qp);
		if (asleep && (got & PLACED_BUSY))
			__atomic_store_n(&to_ibvc_channel(cq->cq.channel)->rescan,
					 true, __ATOMIC_RELAXED);
		placed |= got;
	}
	ibvc_direct_fire(cq, placed, wake);
}

/*
 * A sender that waits for its receiver's library: the engine is rung for
 * it when its receiver took nothing from one look to the next, or at once
 * when what it waits for was taken (a receiver of another uid rings the
 * engine to wake it, and one that does not, and moves `consumed` back and
 * forth, must not keep it asleep).
 */
static bool fallback_one(struct ibvc_qp *qp, struct ibvc_direct *d)
{
	struct ibvc_cq *cq = to_ibvc_cq(qp->qp.send_cq);
	uint32_t consumed = ibvc_direct_sent_taken(qp, d), arm;

	/* due, for the arm the CQ sleeps on: the engine sends the event */
	if (ibvc_direct_own_wake_due(qp, consumed, &arm) && cq_armed(cq) &&
	    arm == ibvd_read_once(&cq->ring.client->arm_seq)) {
		d->fallback_looked = false;
		ring_own(qp);
		return false;
	}
	if (!ibvd_read_once(&qp->sq.client->direct_sender_waits) &&
	    d->sends_head == ibvd_observe(&d->sends_tail)) {
		d->fallback_looked = false;
		return false;
	}
	/* only a step forward is progress (a line moved back is none) */
	if (d->fallback_looked &&
	    (int32_t)(consumed - d->fallback_seen) <= 0) {
		d->fallback_looked = false;
		ring_own(qp);
		return false;
	}
	d->fallback_seen = consumed;
	d->fallback_looked = true;
	return true;
}

bool ibvc_direct_fallback(struct ibvc_cq *cq)
{
	struct ibvc_qp *qp;
	bool again = false;

	ibvc_cq_lock(cq);
	for (qp = cq->direct.senders; qp; qp = qp->next_sender)
		if (fallback_one(qp, qp->direct))
			again = true;
	ibvc_cq_unlock(cq);
	return again;
}

/* Would ibvc_direct_harvest_sends make a completion of qp's sends now? */
static bool sends_due(const struct ibvc_qp *qp)
{
	const struct ibvc_direct *d = qp->direct;
	uint32_t head = d->sends_head;

	if (head == ibvd_observe(&d->sends_tail))
		return false;
	if (ibvd_observe(&qp->sq.engine->direct_fail_status))
		return true;
	/* the ring is taken in order: the oldest send says for all */
	return ibvc_direct_taken(d, ibvc_direct_sent_done(qp, d),
				 d->sends[head & (d->sends_cap - 1)].end);
}

bool ibvc_direct_cq_idle(struct ibvc_cq *cq)
{
	const struct ibvc_qp *qp;

	if (cq->direct.tail != cq->direct.head)
		return false;
	for (qp = cq->direct.senders; qp; qp = qp->next_sender)
		if (sends_due(qp))
			return false;
	for (qp = cq->direct.receivers; qp; qp = qp->next_receiver)
		if (ibvd_observe(&qp->direct->in.ctl->produced) !=
		    ibvd_read_once(&qp->direct->in.ctl->consumed))
			return false;
	return true;
}

bool ibvc_direct_take_event(struct ibvc_cq *cq, enum ibvc_event_pass pass,
			    bool take)
{
	bool got;
	bool ours = cq_poke_fd(cq) >= 0;	/* else the engine fires */

	ibvc_cq_lock(cq);
	if (ours && pass == IBVC_EVENTS_OF_SENDS && cq->direct.senders &&
	    cq_armed(cq))
		ibvc_direct_fire_senders(cq, false);
	if (ours && pass == IBVC_EVENTS_OF_RECEIVES && cq->direct.receivers &&
	    cq_armed(cq))
		ibvc_direct_place_all(cq, false, true);
	got = cq->direct.events != 0;
	if (got && take)
		cq->direct.events--;
	ibvc_cq_unlock(cq);
	return got;
}

bool ibvc_direct_has_senders(struct ibvc_cq *cq)
{
	bool senders;

	ibvc_cq_lock(cq);
	senders = cq->direct.senders != NULL;
	ibvc_cq_unlock(cq);
	return senders;
}

void ibvc_direct_keep_event(struct ibvc_cq *cq)
{
	ibvc_cq_lock(cq);
	cq->direct.events++;
	ibvc_cq_unlock(cq);
}

bool ibvc_direct_fire_armed(struct ibvc_cq *cq)
{
	bool got = false;

	ibvc_cq_lock(cq);
	/* a wake-up byte is only ever for a CQ with direct QPs */
	if ((cq->direct.receivers || cq->direct.senders) && cq_armed(cq) &&
	    ibvc_direct_fire_arm(cq, ibvd_read_once(&cq->ring.client->arm_seq),
				 false)) {
		cq->direct.events--;
		got = true;
	}
	ibvc_cq_unlock(cq);
	return got;
}

/*
 * Under qp's RQ lock, which letting go of the rings takes (lock_all): a
 * UD pair let go by a poster or poller on another thread cannot free d
 * under us.
 */
void ibvc_direct_recv_posted(struct ibvc_qp *qp)
{
	struct ibvc_cq *rcq = to_ibvc_cq(qp->qp.recv_cq);
	struct ibvc_direct *d = direct_of(qp);
	uint32_t kind;

	if (!d)
		return;
	/*
	 * its senders wake it from now on (ibvc_direct_rx_armed, which may
	 * re-arm now)
	 */
	kind = __atomic_load_n(&d->in.ctl->arm_kind, __ATOMIC_RELAXED);
	while ((kind & IBVD_TRANSIT_ARM_NO_RECV) &&
	       !__atomic_compare_exchange_n(&d->in.ctl->arm_kind, &kind,
					    kind & ~IBVD_TRANSIT_ARM_NO_RECV,
					    false, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED))
		;
	/* a message that waited for a WQE, for a receiver that sleeps */
	ibvd_full_fence();
	if (!ibvd_read_once(&d->in.ctl->arm_seq) ||
	    ibvd_observe(&d->in.ctl->produced) ==
	    ibvd_read_once(&d->in.ctl->consumed))
		return;
	if (cq_poke_fd(rcq) < 0) {
		ring_own(qp);
		return;
	}
	/*
	 * Placed here, or by the sleeper we wake: a poster inside an
	 * ibv_start_poll batch of that CQ holds its lock already.
	 */
	if (pthread_mutex_trylock(&rcq->lock) != 0) {
		ibvc_poke(cq_poke_fd(rcq));
		return;
	}
	ibvc_direct_place_all(rcq, true, false);
	pthread_mutex_unlock(&rcq->lock);
}

/*
 * An armed CQ whose channel has no wake-up pair (none made, or a peer
 * shut it): we could not fire for what we place and leave, so the
 * engine places what the rings hold, and fires, as for any CQE of its
 * own.  Senders to such an arm ring the engine themselves
 * (IBVD_TRANSIT_ARM_UNWATCHED); we ring for what came before they knew.
 */
void ibvc_direct_leave_to_engine(struct ibvc_cq *cq)
{
	struct ibvc_qp *qp;

	for (qp = cq->direct.receivers; qp; qp = qp->next_receiver)
		if (ibvd_observe(&qp->direct->in.ctl->produced) !=
		    ibvd_read_once(&qp->direct->in.ctl->consumed))
			ring_own(qp);
}
