/*
 * The direct transport's receiving side (ibv_poll_cq, receive CQ lock;
 * direct_internal.h has the design): under the RQ's claim (ring.h), the
 * next message goes into the next receive WQE (a WRITE with immediate
 * into the MR its key names, taking the WQE), checked as the engine
 * would; whatever this side will not place (an unknown key, a message
 * longer than its WQE, a ring that makes no sense) is left for the
 * engine, which fails it properly, and so is everything of a QP in error.
 */
#include "config.h"

#include <endian.h>
#include <string.h>

#include "barrier.h"
#include "direct_internal.h"
#include "transit.h"

/* UD: a receive's GRH slot */
#define DIRECT_GRH	40u
/* UD: a GRH's IP version and next header (BTH), as the engine makes it */
#define DIRECT_GRH_VERSION	6u
#define DIRECT_GRH_NEXT_HDR	0x1Bu

/*
 * Where qp's receive WQEs come from: its RQ, or its SRQ, whose claim
 * word and head the daemon keeps for every message (ring.h), so that
 * the libraries of its direct QPs and the engine take turns at it.
 */
struct recv_queue {
	struct ibvc_wq *wq;
	struct ibvc_srq *srq;		/* or NULL */
	uint32_t max_sge;
	struct ibv_pd *pd;
};

static void recv_queue_of(struct ibvc_qp *qp, struct recv_queue *q)
{
	q->srq = qp->qp.srq ? to_ibvc_srq(qp->qp.srq) : NULL;
	q->wq = q->srq ? &q->srq->rq : &qp->rq;
	q->max_sge = q->srq ? q->srq->max_sge : qp->cap.max_recv_sge;
	q->pd = q->srq ? q->srq->srq.pd : qp->qp.pd;
}

/* What this side places: a whole SEND into registered memory it owns. */
static bool wqe_sges(struct ibvc_qp *qp, const struct recv_queue *q,
		     const uint8_t *slot, struct ibvd_sge *sge, uint32_t *nsge,
		     uint64_t *total)
{
	struct ibvd_recv_wqe w;
	uint32_t i;

	memcpy(&w, slot, sizeof(w));
	if (w.num_sge > q->max_sge || w.num_sge > DIRECT_MAX_SGE)
		return false;
	memcpy(sge, slot + IBVD_RECV_WQE_HDR, w.num_sge * sizeof(*sge));
	*total = 0;
	for (i = 0; i < w.num_sge; i++) {
		if (sge[i].length &&
		    !ibvc_mrtab_covers(ctx_of(qp), q->pd, sge[i].lkey,
				       sge[i].addr, sge[i].length,
				       IBVC_MRTAB_WRITE | IBVC_MRTAB_COPY))
			return false;
		*total += sge[i].length;
	}
	*nsge = w.num_sge;
	return true;
}

/* len bytes into the SGEs from byte `skip` of them on (UD: its GRH slot) */
static void scatter(const struct ibvd_sge *sge, uint32_t nsge, uint32_t skip,
		    const uint8_t *src, uint32_t len)
{
	uint32_t i;

	for (i = 0; i < nsge && len; i++) {
		uint32_t room = sge[i].length, n;

		if (skip >= room) {
			skip -= room;
			continue;
		}
		room -= skip;
		n = room < len ? room : len;
		ibvc_copy((uint8_t *)(uintptr_t)sge[i].addr + skip, src, n);
		skip = 0;
		src += n;
		len -= n;
	}
}

struct scattering {
	const struct ibvd_sge *sge;
	uint32_t nsge;
	const uint8_t *grh;		/* UD: into the GRH slot, or NULL */
	uint32_t skip;
	const uint8_t *src;
	uint32_t len;
};

static void scatter_all(void *arg)
{
	const struct scattering *s = arg;

	if (s->grh)
		scatter(s->sge, s->nsge, 0, s->grh, DIRECT_GRH);
	scatter(s->sge, s->nsge, s->skip, s->src, s->len);
}

/*
 * The message into the receive WQE's buffers (guard.c): false if they
 * are a file its owner truncated, for the engine to fail the receive.
 */
static bool scatter_guarded(const struct ibvd_sge *sge, uint32_t nsge,
			    const uint8_t *grh, uint32_t skip,
			    const uint8_t *src, uint32_t len)
{
	struct scattering s = { .sge = sge, .nsge = nsge, .grh = grh,
				.skip = skip, .src = src, .len = len };

	return ibvc_guarded(scatter_all, &s);
}

/*
 * The peer's port table past GID[0] is the host's addresses, as every
 * software port's (core/device.c): read through this context's copy of
 * port 1's (query.c, fetched again only when the daemon's gid_gen moved),
 * once per pair and again after an address came or went, so that a GRH
 * names the SGID the engine would (ibvd_eng_port_gid).  Under the RQ's
 * claim, which orders the receivers of the pair.
 */
static void fresh_peer_gids(struct ibvc_direct *d, const struct ibvc_qp *qp)
{
	struct ibvc_context *ictx = to_ibvc_context(qp->qp.context);
	uint32_t gen = __atomic_load_n(&ictx->db_engine->gid_gen,
				       __ATOMIC_ACQUIRE);
	union ibv_gid g;
	unsigned int i;

	if (d->peer_gids_known && d->peer_gids_gen == gen)
		return;
	for (i = 1; i < DIRECT_PEER_GIDS; i++) {
		if (ibv_query_gid(qp->qp.context, 1, (int)i, &g) != 0)
			memset(&g, 0, sizeof(g));
		memcpy(d->peer_gids[i], g.raw, sizeof(g.raw));
	}
	d->peer_gids_gen = gen;
	d->peer_gids_known = true;
}

/*
 * UD: the GRH of a datagram of len bytes whose address the sender put
 * ahead of it (at info, in the ring: read once), as the engine makes it,
 * with the SGID from the peer's port GID table.
 */
static void make_grh(uint8_t grh[DIRECT_GRH], const struct ibvc_direct *d,
		     const uint8_t *info, uint32_t len, bool imm)
{
	uint16_t paylen = ibvd_ud_grh_paylen(len, imm);
	struct ibvd_transit_grh g;
	uint32_t w;

	memcpy(&g, info, sizeof(g));
	w = htobe32(DIRECT_GRH_VERSION << 28 | (uint32_t)g.traffic_class << 20 |
		    (g.flow_label & 0xFFFFFu));
	memcpy(grh, &w, sizeof(w));
	grh[4] = (uint8_t)(paylen >> 8);
	grh[5] = (uint8_t)paylen;
	grh[6] = DIRECT_GRH_NEXT_HDR;
	grh[7] = g.hop_limit;
	if (g.sgid_index < DIRECT_PEER_GIDS)
		memcpy(grh + 8, d->peer_gids[g.sgid_index], 16);
	else
		memset(grh + 8, 0, 16);
	memcpy(grh + 24, g.dgid, 16);
}

/* len: the message's bytes (info: what of the payload came before them) */
static void recv_cqe(struct ibvd_cqe *cqe, const struct ibvc_qp *qp,
		     const struct ibvc_direct *d, uint64_t wr_id,
		     const struct ibvd_transit_frag *f, uint32_t len)
{
	memset(cqe, 0, sizeof(*cqe));
	cqe->wr_id = wr_id;
	cqe->status = IBV_WC_SUCCESS;
	cqe->opcode = IBV_WC_RECV;
	cqe->byte_len = len;
	cqe->qp_num = qp->qp.qp_num;
	cqe->src_qp = d->peer_qpn;
	cqe->slid = d->peer_slid;
	cqe->sl = d->peer_sl;
	if (qp->qp.qp_type == IBV_QPT_UD) {
		/* the GRH slot counts, filled or not */
		cqe->byte_len += DIRECT_GRH;
		cqe->sl = (uint8_t)((f->flags & IBVD_TRANSIT_SL_MASK) >>
				    IBVD_TRANSIT_SL_SHIFT);
		if (f->flags & IBVD_TRANSIT_GRH)
			cqe->wc_flags = IBV_WC_GRH;
	}
	if (f->kind == IBVD_TRANSIT_WRITE_IMM)
		cqe->opcode = IBV_WC_RECV_RDMA_WITH_IMM;
	if (f->kind == IBVD_TRANSIT_SEND_IMM || f->kind == IBVD_TRANSIT_WRITE_IMM) {
		cqe->imm_data = f->imm;
		cqe->wc_flags |= IBV_WC_WITH_IMM;
	}
}

/*
 * An RDMA WRITE with immediate of len bytes (after its target, at
 * payload) into this process's memory, checked as the engine's responder
 * checks it (engine/wqe.c): the QP's access flags, then the key, its PD,
 * rights and range; a zero-length one checks no key (IB 9.4.5).  False:
 * the engine places it (a window's key, an MR this process did not
 * register here) or fails it.
 */
static bool write_in(struct ibvc_qp *qp, const uint8_t *payload, uint32_t len)
{
	struct ibvd_transit_rdma r;

	if (!ibvd_read_once(&qp->sq.engine->direct_remote_write))
		return false;
	if (!len)
		return true;
	memcpy(&r, payload, sizeof(r));
	return ibvc_mrtab_write_in(ctx_of(qp), qp->qp.pd, r.rkey, r.remote_addr,
				   payload + IBVD_TRANSIT_RDMA_INFO, len);
}

/*
 * What this side places: a whole SEND into its receive WQE, or a whole
 * WRITE with immediate into its MR (consuming a WQE, whose buffers it
 * leaves alone).  *len: the message's bytes.
 */
static bool placeable(struct ibvc_qp *qp, const struct recv_queue *q,
		      const uint8_t *slot, const struct ibvd_transit_frag *f,
		      const uint8_t *payload, uint32_t skip, uint32_t *len,
		      struct ibvd_sge *sge, uint32_t *nsge)
{
	const uint16_t whole = IBVD_TRANSIT_FIRST | IBVD_TRANSIT_LAST;
	uint64_t total;

	if ((f->flags & whole) != whole)
		return false;
	if (f->kind == IBVD_TRANSIT_WRITE_IMM) {
		/* transit.c checked that it has room for its target */
		*len = f->len - IBVD_TRANSIT_RDMA_INFO;
		*nsge = 0;
		return qp->qp.qp_type != IBV_QPT_UD &&
		       !(f->flags & IBVD_TRANSIT_GRH) &&
		       write_in(qp, payload, *len);
	}
	/* a GRH on RC or UC is nonsense: the engine says so */
	return (f->kind == IBVD_TRANSIT_SEND || f->kind == IBVD_TRANSIT_SEND_IMM) &&
	       (qp->qp.qp_type == IBV_QPT_UD || !(f->flags & IBVD_TRANSIT_GRH)) &&
	       wqe_sges(qp, q, slot, sge, nsge, &total) &&
	       (uint64_t)*len + skip <= total;
}

struct placing {
	struct recv_queue q;
	uint32_t consumed;		/* the ring's, as we move it */
	uint32_t head;			/* the RQ's direct head */
	uint32_t tail;			/* what the app posted */
	uint32_t mark;
	bool hand_off;			/* the next message is the engine's */
	unsigned int placed;		/* PLACED_* */
};

/* Place one message; false when there is nothing more to do now. */
static bool place_one(struct ibvc_cq *cq, struct ibvc_qp *qp,
		      struct ibvc_direct *d, struct placing *p)
{
	struct ibvd_sge sge[DIRECT_MAX_SGE];
	bool ud = qp->qp.qp_type == IBV_QPT_UD;
	uint32_t skip = ud ? DIRECT_GRH : 0, info = 0, len, fires;
	uint8_t grh[DIRECT_GRH];
	struct ibvd_transit_frag f;
	const uint8_t *payload;
	struct ibvc_local_cqe *e;
	struct ibvd_cqe cqe;
	uint32_t next, nsge = 0;
	const uint8_t *slot;
	uint64_t wr_id;
	int ret;

	ret = ibvd_transit_next(&d->in, p->consumed, &f, &payload, &next);
	if (ret == 0 || ibvc_direct_fifo_full(cq))
		return false;
	/*
	 * No WQE: on RC the message waits (RNR); UC drops it; a UD datagram
	 * waits until its sender asks the engine to take it, which drops it
	 * (a NIC's receive buffer holds a datagram about as long).  UD drops
	 * one longer than any port's MTU, which no wire would carry (its
	 * sender chose it: only its own is lost), and leaves one for another
	 * Q_Key to the engine, which drops it too and counts it on the port
	 * (qkey_viol_cntr), where the library could not be trusted to.  A
	 * controlled Q_Key goes to the engine too: only the daemon knows
	 * whether the sender's QP holds it (else any uid could speak as
	 * root's management agents by writing the ring).
	 */
	if (p->head == p->tail) {
		if (qp->qp.qp_type != IBV_QPT_UC || ret < 0)
			return false;
		p->consumed = next;
		return true;
	}
	if (ud && ret > 0 && (f.flags & IBVD_TRANSIT_GRH))
		info = IBVD_TRANSIT_GRH_INFO;
	if (ud && ret > 0 && (f.len < info ||
			      f.len - info > IBVD_TRANSIT_UD_MAX)) {
		p->consumed = next;
		return true;
	}
	if (ud && ret > 0 &&
	    (f.qkey != __atomic_load_n(&qp->qkey, __ATOMIC_RELAXED) ||
	     (f.qkey & DIRECT_QKEY_OWN))) {
		p->hand_off = true;
		return false;
	}
	len = ret > 0 ? f.len - info : 0;
	slot = ibvc_wq_slot(p->q.wq, p->head);
	memcpy(&wr_id, slot, sizeof(wr_id));
	if (ret < 0 || !placeable(qp, &p->q, slot, &f, payload, skip, &len,
				  sge, &nsge)) {
		p->hand_off = true;
		return false;
	}
	if (info) {
		fresh_peer_gids(d, qp);
		make_grh(grh, d, payload, len, f.kind == IBVD_TRANSIT_SEND_IMM);
	}
	if (!scatter_guarded(sge, nsge, info ? grh : NULL, skip,
			     payload + info, len)) {
		p->hand_off = true;
		return false;
	}
	recv_cqe(&cqe, qp, d, wr_id, &f, len);
	fires = PLACED_ANY;
	if (f.flags & IBVD_TRANSIT_SOLICITED)
		fires |= PLACED_SOLICITED;
	/*
	 * It fires the arm even if the poll that placed it takes it: it came
	 * after the arm (what came before, the arm placed), as a NIC's CQE
	 * that fires whoever polls it, and another thread may sleep on the
	 * channel for it (UCX's worker, while its async thread polls).
	 */
	e = ibvc_direct_fifo_push(cq, &cqe, p->mark);
	if (fires & PLACED_SOLICITED)
		e->solicited = true;
	p->placed |= fires;
	p->head++;
	p->consumed = next;
	return true;
}

/*
 * Under the claim, before anything under it is read: is the SRQ's slots
 * moving (ibv_modify_srq)?  Then the engine places (its doorbell) until
 * they have.  The resize sets the flag, then waits to see the claim free
 * once: either it waits for us, or we see the flag (both sides
 * sequentially consistent).  Acquire: a clear flag after a resize comes
 * with the new slots.
 */
static bool srq_resizing(const struct recv_queue *q)
{
	return q->srq && __atomic_load_n(&q->srq->resizing, __ATOMIC_SEQ_CST);
}

/*
 * An SRQ we took from has dropped below the limit its owner armed: the
 * engine raises the event (it looks at the SRQ when our doorbell rings).
 */
static bool srq_below_limit(const struct placing *p)
{
	uint32_t limit;

	if (!p->q.srq)
		return false;
	limit = ibvd_read_once(&p->q.wq->engine->srq_limit);
	return limit && p->tail - p->head < limit;
}

/*
 * Is qp's receiving stopped (the engine's from now on)?  A QP on an SRQ
 * has no RQ header of its own to say it is in error: its SQ's says so
 * (for UC and UD also in SQE, when the engine could still place: it
 * does so, only slower), and the SRQ's that the SRQ is broken.
 */
static bool recv_stopped(const struct ibvc_qp *qp, const struct recv_queue *q)
{
	return ibvd_read_once(&q->wq->engine->error) ||
	       (q->srq && ibvd_read_once(&qp->sq.engine->error));
}

/*
 * Does the sender want its event now that we took up to `consumed`?
 * Store (consumed) -> load (its wake) needs a full fence, mirrored by
 * the sender's store (wake) -> fence -> load (consumed) when it arms: one
 * of us sees the other's, and wakes it, or fires itself.
 */
static bool sender_due(const struct ibvc_direct *d, uint32_t consumed,
		       uint32_t *arm)
{
	ibvd_full_fence();
	return ibvd_transit_wake_due(d->in.ctl, consumed, arm);
}

/* Its `wake` is due: we wake the sender (once for it), or the engine does. */
static bool wake_sender(struct ibvc_direct *d)
{
	uint64_t wake = __atomic_load_n(&d->in.ctl->wake, __ATOMIC_RELAXED);

	if (wake == d->poked_wake)
		return true;
	if (!ibvc_poke(d->peer_send_poke))
		return false;
	d->poked_wake = wake;
	return true;
}

unsigned int ibvc_direct_place_received(struct ibvc_cq *cq, struct ibvc_qp *qp)
{
	struct ibvc_direct *d = qp->direct;
	uint32_t expect = IBVD_WQ_CLAIM_FREE, start, arm, from, budget;
	struct ibvd_wq_client *rc;
	struct placing p;

	recv_queue_of(qp, &p.q);
	rc = p.q.wq->client;
	start = ibvd_read_once(&d->in.ctl->consumed);
	if (ibvd_observe(&d->in.ctl->produced) == start ||
	    recv_stopped(qp, &p.q) || (d->handed && d->handed_at == start))
		return 0;
	/* Sequentially consistent, against an SRQ's resize (srq_resizing). */
	if (!__atomic_compare_exchange_n(&rc->claim, &expect,
					 IBVD_WQ_CLAIM_LIBRARY, false,
					 __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		return PLACED_BUSY;
	if (srq_resizing(&p.q)) {
		ibvd_publish(&rc->claim, IBVD_WQ_CLAIM_FREE);
		ring_own(qp);
		return PLACED_BUSY;
	}
	/* After the claim: the engine's CQEs made under it are below this. */
	p.mark = ibvd_observe(&cq->ring.engine->tail);
	p.consumed = ibvd_read_once(&d->in.ctl->consumed);
	p.head = ibvd_read_once(&rc->direct_head);
	/* Acquire: the WQEs below the published tail are written. */
	p.tail = ibvd_observe(&rc->tail);
	p.hand_off = false;
	p.placed = 0;
	start = p.consumed;
	from = p.head;
	/*
	 * At most a ring's worth of messages a call: a sender that keeps
	 * writing ones that are dropped (no WQE for UC, a wrong Q_Key for UD)
	 * keeps no poller of ours here.
	 */
	if (p.tail - p.head <= p.q.wq->nslots)
		for (budget = d->in.ncells; budget && place_one(cq, qp, d, &p);
		     budget--)
			;
	if (!p.hand_off && p.head == p.tail && qp->qp.qp_type == IBV_QPT_RC &&
	    ibvd_observe(&d->in.ctl->produced) != p.consumed)
		p.placed |= PLACED_NO_WQE;
	ibvd_write_once(&rc->direct_head, p.head);
	ibvd_transit_release(&d->in, p.consumed);
	/* Release: the WQEs, the head and `consumed` before the claim. */
	ibvd_publish(&rc->claim, IBVD_WQ_CLAIM_FREE);
	d->handed = p.hand_off;
	d->handed_at = p.consumed;
	if (p.hand_off || (p.head != from && srq_below_limit(&p)))
		ring_own(qp);
	else if (p.consumed != start && sender_due(d, p.consumed, &arm) &&
		 !wake_sender(d))
		ring_own(qp);
	return p.placed;
}
