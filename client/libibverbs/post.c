/*
 * The posting side of the data path: ibv_post_send, ibv_post_recv and
 * ibv_post_srq_recv (context ops reached through header inlines).
 *
 * Each call checks every work request the way a NIC's provider does,
 * writes the valid ones into the queue's slots, publishes the new tail
 * once for the whole list, and (for sends) rings the QP's doorbell.  The
 * first request that fails is reported through *bad_wr and nothing after
 * it is posted.  No system call unless the engine is asleep (queue.c).
 */
#include "config.h"

#include <sched.h>
#include <string.h>

#include "barrier.h"
#include "ibvd_verbs.h"

#define SEND_FLAGS_KEPT							\
	(IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED |	\
	 IBV_SEND_INLINE)

/* Room for one more WQE, re-reading the engine's head only when needed. */
bool ibvc_wq_has_room(struct ibvc_wq *wq, uint32_t *head, uint32_t tail)
{
	uint32_t taken;

	if (tail - *head < wq->limit)
		return true;
	/* Acquire: the engine copied those WQEs out before moving head. */
	*head = ibvd_observe(&wq->engine->head);
	/*
	 * A direct QP's RQ is also taken by its library (direct_recv.c), which
	 * keeps its count in our own header: whichever is further.
	 */
	taken = ibvd_observe(&wq->client->direct_head);
	if (taken - *head <= tail - *head)
		*head = taken;
	return tail - *head < wq->limit;
}

/*
 * How long a post waits for a stopped queue's flush that stands still
 * (a receive the engine holds for a message in flight, a daemon gone, a
 * ring the application scribbled over): long enough for an engine pass
 * on a crowded machine, short enough that a flush that never comes costs
 * a looping poster little.
 */
#define FLUSH_WAIT_NS	100000000ull

/*
 * A queue the engine stopped (its QP in ERR, an SQ in SQE) empties by
 * itself: the engine flushes every WQE in it, polled or not (a full CQ
 * drops the completions after IBV_EVENT_CQ_ERR).  A post that finds such
 * a queue full waits for the flush rather than fail or not by timing:
 * Linux's rxe flushes the SQ as it moves to ERR, so a WR posted there is
 * accepted and flushed.  No wait for room that WQEs the engine cannot see
 * hold (this post's own, not yet published), nor past FLUSH_WAIT_NS of a
 * head that does not move: ENOMEM, as for a queue that is not stopped.
 */
static bool room_after_flush(struct ibvc_qp *qp, struct ibvc_wq *wq,
			     uint32_t *head, uint32_t tail)
{
	uint64_t deadline = 0;
	uint32_t seen = *head;

	if (!ibvd_read_once(&wq->engine->error))
		return false;
	ibvc_ring_doorbell(to_ibvc_context(qp->qp.context), qp->doorbell);
	while (!ibvc_wq_has_room(wq, head, tail)) {
		uint64_t now = ibvc_now_ns();

		if (*head == wq->tail || !ibvd_read_once(&wq->engine->error))
			return false;
		if (!deadline || *head != seen) {
			seen = *head;
			deadline = now + FLUSH_WAIT_NS;
		} else if (now > deadline) {
			return false;
		}
		sched_yield();
	}
	return true;
}

/* Room for one more WQE, after the flush of a stopped queue if need be. */
bool ibvc_wq_room(struct ibvc_qp *qp, struct ibvc_wq *wq, uint32_t *head,
		  uint32_t tail)
{
	return ibvc_wq_has_room(wq, head, tail) ||
	       room_after_flush(qp, wq, head, tail);
}

/* ---- sends ------------------------------------------------------------- */

/*
 * IB spec 10.8.2: which opcodes each transport has.  An XRC initiator
 * sends what RC sends; an XRC target sends nothing.
 */
bool ibvc_send_opcode_valid(enum ibv_qp_type type, enum ibv_wr_opcode op)
{
	bool rc = type == IBV_QPT_RC || type == IBV_QPT_XRC_SEND;

	if (type == IBV_QPT_XRC_RECV)
		return false;
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		return true;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return rc || type == IBV_QPT_UC;
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return rc;
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_BIND_MW:
	case IBV_WR_LOCAL_INV:
		return rc || type == IBV_QPT_UC;
	default:
		return false;	/* no TSO here */
	}
}

/* Work requests that carry no data of their own, hence no SGEs. */
static bool is_local_op(enum ibv_wr_opcode op)
{
	return op == IBV_WR_BIND_MW || op == IBV_WR_LOCAL_INV;
}

/* The opcodes whose local SGEs are data for the responder */
static bool carries_data(enum ibv_wr_opcode op)
{
	return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM ||
	       op == IBV_WR_SEND_WITH_INV || op == IBV_WR_RDMA_WRITE ||
	       op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

/* Inline data applies to the opcodes that carry data to the responder. */
static bool is_inline(const struct ibv_send_wr *wr)
{
	return (wr->send_flags & IBV_SEND_INLINE) && carries_data(wr->opcode);
}

/* Total length of the SGEs, in 64 bits: no sum of uint32s overflows it. */
static uint64_t sge_bytes(const struct ibv_sge *sge, int num_sge)
{
	uint64_t total = 0;
	int i;

	for (i = 0; i < num_sge; i++)
		total += sge[i].length;
	return total;
}

/*
 * Posting is allowed from RTS on (RTS, SQD, SQE, ERR: the engine flushes
 * what arrives in ERR), never before.
 */
bool ibvc_sq_state_ok(const struct ibvc_qp *qp)
{
	enum ibv_qp_state s = __atomic_load_n(&qp->qp.state, __ATOMIC_RELAXED);

	return s == IBV_QPS_RTS || s == IBV_QPS_SQD || s == IBV_QPS_SQE ||
	       s == IBV_QPS_ERR;
}

/*
 * ibv_post_send binds type-2 windows only; type 1 goes through
 * ibv_bind_mw, which says so with `type1`.
 */
static bool bind_ok(const struct ibv_send_wr *wr, bool type1)
{
	const struct ibv_mw *mw = wr->bind_mw.mw;

	if (wr->opcode != IBV_WR_BIND_MW)
		return true;
	return mw && mw->type == (type1 ? IBV_MW_TYPE_1 : IBV_MW_TYPE_2);
}

static int check_send_wr(const struct ibvc_qp *qp, const struct ibv_send_wr *wr,
			 bool type1)
{
	if (!ibvc_sq_state_ok(qp) ||
	    !ibvc_send_opcode_valid(qp->qp.qp_type, wr->opcode) ||
	    !bind_ok(wr, type1))
		return -EINVAL;
	if (is_local_op(wr->opcode))
		return 0;
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge ||
	    (wr->num_sge && !wr->sg_list))
		return -EINVAL;
	if (is_inline(wr) &&
	    sge_bytes(wr->sg_list, wr->num_sge) > qp->cap.max_inline_data)
		return -EINVAL;
	if (qp->qp.qp_type == IBV_QPT_UD && !wr->wr.ud.ah)
		return -EINVAL;
	return 0;
}

static void fill_send_header(struct ibvd_send_wqe *h, const struct ibvc_qp *qp,
			     const struct ibv_send_wr *wr)
{
	memset(h, 0, sizeof(*h));
	h->wr_id = wr->wr_id;
	h->opcode = wr->opcode;
	h->send_flags = wr->send_flags & SEND_FLAGS_KEPT;
	h->imm_data = wr->imm_data;
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		h->rkey = wr->wr.rdma.rkey;
		h->remote_addr = wr->wr.rdma.remote_addr;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		h->rkey = wr->wr.atomic.rkey;
		h->remote_addr = wr->wr.atomic.remote_addr;
		h->compare_add = wr->wr.atomic.compare_add;
		h->swap = wr->wr.atomic.swap;
		break;
	case IBV_WR_BIND_MW:
		ibvc_fill_bind(h, wr->bind_mw.mw, wr->bind_mw.rkey,
			       &wr->bind_mw.bind_info);
		break;
	case IBV_WR_LOCAL_INV:
		h->rkey = wr->invalidate_rkey;
		break;
	default:
		break;
	}
	if (qp->qp.qp_type == IBV_QPT_XRC_SEND)
		h->xrc_srqn = wr->qp_type.xrc.remote_srqn;
	if (qp->qp.qp_type == IBV_QPT_UD) {
		h->remote_qpn = wr->wr.ud.remote_qpn;
		h->remote_qkey = wr->wr.ud.remote_qkey;
		h->av = to_ibvc_ah(wr->wr.ud.ah)->av;
		if (!ibvc_ah_pd_ok(qp, wr->wr.ud.ah))
			h->send_flags |= IBVD_SEND_FOREIGN_AH;
	}
}

/* Inline data is copied now: the app may reuse its buffers on return. */
static uint32_t copy_inline(uint8_t *dst, const struct ibv_sge *sge, int num_sge)
{
	uint32_t off = 0;
	int i;

	for (i = 0; i < num_sge; i++) {
		ibvc_copy(dst + off, (const void *)(uintptr_t)sge[i].addr,
			  sge[i].length);
		off += sge[i].length;
	}
	return off;
}

static void copy_sges(struct ibvd_sge *dst, const struct ibv_sge *sge,
		      int num_sge)
{
	int i;

	for (i = 0; i < num_sge; i++) {
		dst[i].addr = sge[i].addr;
		dst[i].length = sge[i].length;
		dst[i].lkey = sge[i].lkey;
	}
}

/*
 * A small payload in this process's registered memory is copied into the
 * WQE now, as if posted inline: the engine would otherwise read it from
 * our memory with a syscall of its own, which costs more than the copy
 * (bench/RESULTS.md, "Small payloads copied at post").  The app may not
 * touch a buffer before its completion, so when it is read changes
 * nothing it can see, unless a READ or atomic before it on the QP may
 * still write it (ibvc_early_read_ok).  A key, range or PD the library
 * does not know stays an SGE, and the engine reports it as before; so
 * does a file truncated under its MR (the copy is guarded: guard.c).
 * True with the payload in body and its length in *len.
 */
struct early_copy {
	uint8_t *body;
	const struct ibv_send_wr *wr;
	uint32_t len;
};

static void copy_early_sges(void *arg)
{
	struct early_copy *c = arg;

	c->len = copy_inline(c->body, c->wr->sg_list, c->wr->num_sge);
}

static bool copy_early(struct ibvc_qp *qp, const struct ibv_send_wr *wr,
		       uint8_t *body, uint32_t *len)
{
	uint64_t total = sge_bytes(wr->sg_list, wr->num_sge);
	struct early_copy c = { .body = body, .wr = wr };

	if (!carries_data(wr->opcode) || !total ||
	    total > qp->cap.max_inline_data ||
	    !ibvc_copyable_sges(qp, wr->sg_list, wr->num_sge) ||
	    !ibvc_early_read_ok(qp) || !ibvc_guarded(copy_early_sges, &c))
		return false;
	*len = c.len;
	return true;
}

static void write_send_wqe(struct ibvc_qp *qp, void *slot,
			   const struct ibv_send_wr *wr)
{
	struct ibvd_send_wqe *wqe = slot;
	uint8_t *body = (uint8_t *)slot + IBVD_SEND_WQE_HDR;

	fill_send_header(wqe, qp, wr);
	if (is_local_op(wr->opcode)) {
		wqe->send_flags &= ~(uint32_t)IBV_SEND_INLINE;
	} else if (is_inline(wr)) {
		wqe->inline_len = copy_inline(body, wr->sg_list, wr->num_sge);
	} else if (copy_early(qp, wr, body, &wqe->inline_len)) {
		wqe->send_flags |= IBV_SEND_INLINE;
	} else if (!ibvc_stage(qp, wqe, wr->sg_list, wr->num_sge)) {
		wqe->send_flags &= ~(uint32_t)IBV_SEND_INLINE;
		wqe->num_sge = (uint32_t)wr->num_sge;
		copy_sges((struct ibvd_sge *)body, wr->sg_list, wr->num_sge);
	}
}

static int post_send_locked(struct ibvc_qp *qp, struct ibv_send_wr *wr,
			    struct ibv_send_wr **bad_wr, bool type1)
{
	struct ibvc_wq *sq = &qp->sq;
	uint32_t tail = sq->tail, head = tail - sq->limit;
	int ret = 0;

	ibvc_direct_ud_ask(qp, wr);
	ibvc_direct_take_back(qp, tail);
	for (; wr; wr = wr->next) {
		ret = check_send_wr(qp, wr, type1);
		/*
		 * A SEND in a direct ring has left the SQ, as one a NIC has
		 * sent: it holds ring room, not SQ room, until the receiver
		 * takes it (a NIC frees the slot at the ACK, app polling or not).
		 */
		if (ret == 0 && !ibvc_wq_room(qp, sq, &head, tail))
			ret = -ENOMEM;
		if (ret < 0) {
			*bad_wr = wr;
			break;
		}
		if (ibvc_direct_send(qp, wr, tail))
			continue;
		write_send_wqe(qp, ibvc_wq_slot(sq, tail), wr);
		ibvc_stage_mark(qp, tail, wr->opcode);
		tail++;
	}
	/* The ring first: the engine runs no WQE of ours while it holds any. */
	ibvc_direct_send_done(qp);
	ibvc_stage_published(qp);
	if (tail == sq->tail)
		return ret;
	sq->tail = tail;
	/* Release: the WQEs are written before the engine sees tail. */
	ibvd_publish(&sq->client->tail, tail);
	ibvc_ring_doorbell(to_ibvc_context(qp->qp.context), qp->doorbell);
	return ret;
}

/* A queue's lock, unless the QP's thread domain makes it needless. */
static void wq_lock(const struct ibvc_qp *qp, struct ibvc_wq *wq)
{
	if (!qp->single_threaded)
		pthread_mutex_lock(&wq->lock);
}

static void wq_unlock(const struct ibvc_qp *qp, struct ibvc_wq *wq)
{
	if (!qp->single_threaded)
		pthread_mutex_unlock(&wq->lock);
}

int ibvc_post_send_op(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr)
{
	struct ibvc_qp *qp = to_ibvc_qp(ibqp);
	int ret;

	if (ibvc_forked(to_ibvc_context(ibqp->context))) {
		*bad_wr = wr;
		return ibvc_errno_ret(-EIO);
	}
	ibvc_direct_refresh(qp);
	wq_lock(qp, &qp->sq);
	ret = post_send_locked(qp, wr, bad_wr, false);
	wq_unlock(qp, &qp->sq);
	return ibvc_errno_ret(ret);
}

void ibvc_fill_bind(struct ibvd_send_wqe *h, const struct ibv_mw *mw,
		    uint32_t rkey, const struct ibv_mw_bind_info *info)
{
	h->mw_key = mw ? mw->rkey : 0;
	h->rkey = rkey;
	h->mr_lkey = info->mr ? info->mr->lkey : 0;
	h->remote_addr = info->addr;
	h->compare_add = info->length;
	h->mw_access = info->mw_access_flags;
}

/*
 * ibv_bind_mw (type 1): a BIND_MW work request on qp's send queue, as
 * providers post it.  The key's low byte moves on at each bind, so the
 * window's old key stops working once the engine executes it; the app
 * sees the new key in mw->rkey as soon as the request is posted.
 */
int ibvc_bind_mw_op(struct ibv_qp *ibqp, struct ibv_mw *mw,
		    struct ibv_mw_bind *mw_bind)
{
	struct ibvc_qp *qp = to_ibvc_qp(ibqp);
	struct ibv_send_wr wr = {
		.wr_id = mw_bind->wr_id,
		.opcode = IBV_WR_BIND_MW,
		.send_flags = mw_bind->send_flags,
	}, *bad;
	int ret;

	/* Type 1 windows are addressed by virtual address only (C10-73). */
	if (mw_bind->bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED)
		return EINVAL;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = mw_bind->bind_info;
	pthread_mutex_lock(&qp->sq.lock);
	ret = post_send_locked(qp, &wr, &bad, true);
	pthread_mutex_unlock(&qp->sq.lock);
	if (ret == 0)
		mw->rkey = wr.bind_mw.rkey;
	return ibvc_errno_ret(ret);
}

/* ---- receives ---------------------------------------------------------- */

static void write_recv_wqe(void *slot, const struct ibv_recv_wr *wr)
{
	struct ibvd_recv_wqe *wqe = slot;

	wqe->wr_id = wr->wr_id;
	wqe->num_sge = (uint32_t)wr->num_sge;
	wqe->pad = 0;
	copy_sges((struct ibvd_sge *)((uint8_t *)slot + IBVD_RECV_WQE_HDR),
		  wr->sg_list, wr->num_sge);
}

/*
 * Post a list of receive WQEs to a receive ring, a QP's (qp) or an SRQ's
 * (NULL: never flushed); returns 0 or a negative errno with *bad_wr set,
 * and whether anything was published.
 */
static int post_recv_locked(struct ibvc_qp *qp, struct ibvc_wq *rq,
			    uint32_t max_sge, struct ibv_recv_wr *wr,
			    struct ibv_recv_wr **bad_wr, bool *published)
{
	uint32_t tail = rq->tail, head = tail - rq->limit;
	int ret = 0;

	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > max_sge ||
		    (wr->num_sge && !wr->sg_list))
			ret = -EINVAL;
		else if (!(qp ? ibvc_wq_room(qp, rq, &head, tail) :
			   ibvc_wq_has_room(rq, &head, tail)))
			ret = -ENOMEM;
		if (ret < 0) {
			*bad_wr = wr;
			break;
		}
		write_recv_wqe(ibvc_wq_slot(rq, tail), wr);
		tail++;
	}
	*published = tail != rq->tail;
	if (*published) {
		rq->tail = tail;
		/* Release: the WQEs are written before the engine sees tail. */
		ibvd_publish(&rq->client->tail, tail);
	}
	return ret;
}

/*
 * The engine takes receive WQEs when a message arrives and needs no
 * doorbell for them, except on a queue it stopped (QP in error): what is
 * posted there must be flushed, so tell it.
 */
static void recv_rang(struct ibvc_qp *qp)
{
	/*
	 * Store (tail) -> load (error) needs a full fence: the engine stores
	 * the error word, fences, then flushes up to the tail it loads.  So
	 * either it flushes our WQEs, or we see the word and ring.
	 */
	ibvd_full_fence();
	if (ibvd_read_once(&qp->rq.engine->error))
		ibvc_ring_doorbell(to_ibvc_context(qp->qp.context),
				   qp->doorbell);
}

/* Receives may be posted from INIT on; RESET queues do not exist yet. */
static bool rq_state_ok(const struct ibvc_qp *qp)
{
	enum ibv_qp_state s = __atomic_load_n(&qp->qp.state, __ATOMIC_RELAXED);

	return s != IBV_QPS_RESET;
}

int ibvc_post_recv_op(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr)
{
	struct ibvc_qp *qp = to_ibvc_qp(ibqp);
	bool published;
	int ret;

	if (ibvc_forked(to_ibvc_context(ibqp->context))) {
		*bad_wr = wr;
		return ibvc_errno_ret(-EIO);
	}
	/* XRC QPs, like those with an SRQ, have no receive queue. */
	if (ibqp->srq || !qp->rq.slots || !rq_state_ok(qp)) {
		*bad_wr = wr;
		return EINVAL;
	}
	ibvc_direct_refresh(qp);
	wq_lock(qp, &qp->rq);
	ret = post_recv_locked(qp, &qp->rq, qp->cap.max_recv_sge, wr, bad_wr,
			       &published);
	if (published)
		ibvc_direct_recv_posted(qp);
	wq_unlock(qp, &qp->rq);
	if (published)
		recv_rang(qp);
	return ibvc_errno_ret(ret);
}

int ibvc_post_srq_recv_op(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad_wr)
{
	struct ibvc_srq *srq = to_ibvc_srq(ibsrq);
	bool published;
	int ret;

	if (ibvc_forked(to_ibvc_context(ibsrq->context))) {
		*bad_wr = wr;
		return ibvc_errno_ret(-EIO);
	}
	pthread_mutex_lock(&srq->rq.lock);
	ret = post_recv_locked(NULL, &srq->rq, srq->max_sge, wr, bad_wr,
			       &published);
	pthread_mutex_unlock(&srq->rq.lock);
	return ibvc_errno_ret(ret);
}
