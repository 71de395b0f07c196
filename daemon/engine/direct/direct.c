/*
 * The engine's part in the direct transport (common/transit.h): the
 * libraries pass SENDs (and RC and UC WRITEs with immediate) between two
 * local QPs through transit rings, and the engine places what they
 * cannot or should not wait for:
 *  - before a direct QP's next SQ WQE runs, the ring it sends on must be
 *    empty (RC order: a WRITE never lands before an earlier SEND), so the
 *    engine places what is still there itself;
 *  - a doorbell on a direct QP asks the same for both of its rings: the
 *    sender rings it after a SEND to a receiver that waits for an event,
 *    the receiver when it armed its CQ with messages waiting, or found
 *    one it will not place itself (a key it does not know, a message
 *    longer than its WQE, a ring that makes no sense);
 *  - what fails fails here, with the statuses a responder gives, and the
 *    sender's library learns it from its SQ's direct_fail_status.
 * The receiving RQ's WQEs are taken under its claim word (ring.h), which
 * the receiver's library takes the same way; the engine never waits for
 * it: a claim it cannot take now it asks again for later.
 */
#include <config.h>

#include <errno.h>
#include <string.h>

#include "barrier.h"
#include "engine/engine.h"
#include "engine/internal.h"

/* Messages placed per call; a QP with more comes back after the others. */
#define DRAIN_BUDGET	64u
/* UC, UD: busy claims waited out (20 us doubling: 0.6 ms) before giving up */
#define DIRECT_LOSSY_CLAIM_WAITS	5u
/* An SRQ's claim held by another engine thread: waited for this long. */
#define SRQ_CLAIM_SPIN_NS	20000u
/* Calls a destroy makes: a full ring's worth, with room for a busy claim. */
#define DIRECT_LAST_TURNS	1024u

static struct ibvd_wq_engine *sq_engine(const struct ibvd_qp *qp)
{
	return qp->sq.engine_page;
}

/* Untrusted, but only the QP's own library writes it (not its peer's). */
static const struct ibvd_wq_client *sq_client(const struct ibvd_qp *qp)
{
	return qp->sq.client_page;
}

/* Is the count in src's header of this pairing? */
static bool sender_current(const struct ibvd_qp *src)
{
	/* Acquire: a new pairing's first count was stored before it. */
	return ibvd_observe(&sq_client(src)->direct_produced_gen) ==
	       src->direct->gen;
}

/*
 * What src's library wrote into its ring, as it says in its SQ's header
 * (a 64-bit count): a UD peer can rewrite the ring's `produced`, to hide
 * src's datagrams (its sends would never complete) or to make a
 * `consumed` it invents look possible.  Nothing yet while the header is
 * of another pairing (the library says it before the ring's, and a
 * pair's rings start empty, at IBVD_TRANSIT_START), or while the pair
 * has no rings but the idle block, which has no cells to read (a library
 * may write its header with the pairing's gen before it asks for them).
 */
static uint64_t sender_produced(const struct ibvd_qp *src)
{
	uint64_t produced;

	if (!src->direct->map || !sender_current(src))
		return IBVD_TRANSIT_START;
	/* Acquire: the fragments below it were written before it. */
	produced = ibvd_observe(&sq_client(src)->direct_produced);
	/* a count before the start is no count: nothing */
	return produced < IBVD_TRANSIT_START ? IBVD_TRANSIT_START : produced;
}

/*
 * Where src's ring is taken up to (a 64-bit count): the receiver's
 * `consumed`, unless what the engine released itself is further, or the
 * receiver's is impossible.  A UD peer can move `consumed` back, to have
 * the engine deliver again and src never see its sends taken.
 */
static uint64_t ring_consumed(const struct ibvd_qp *src,
			      const struct ibvd_transit *ring)
{
	/* Acquire: the receiver's copies out of the cells are done. */
	uint32_t said = ibvd_observe(&ring->ctl->consumed);
	uint64_t ours = ibvd_read_once(&sq_engine(src)->direct_taken);
	uint64_t wide;

	if (!ibvd_transit_widen(sender_produced(src), said, src->direct->ncells,
				&wide))
		return ours;
	return ours > wide ? ours : wide;
}

/* src's ring taken up to `consumed`: the receiver's word, and ours. */
static void ring_release(struct ibvd_qp *src, const struct ibvd_transit *ring,
			 uint32_t consumed)
{
	uint64_t wide;

	if (ibvd_transit_widen(sender_produced(src), consumed,
			       src->direct->ncells, &wide))
		ibvd_publish(&sq_engine(src)->direct_taken, wide);
	ibvd_transit_release(ring, consumed);
}

/* The next fragment of src's ring after `consumed` (ibvd_transit_next). */
static int ring_next(const struct ibvd_qp *src, const struct ibvd_transit *ring,
		     uint32_t consumed, struct ibvd_transit_frag *f,
		     const uint8_t **payload, uint32_t *next)
{
	return ibvd_transit_next_upto(ring, (uint32_t)sender_produced(src),
				      consumed, f, payload, next);
}

/* Where t's receives come from: its own RQ, or its SRQ. */
static struct ibvd_ring *recv_ring(struct ibvd_qp *t)
{
	return t->srq ? &t->srq->ring : &t->rq;
}

static uint32_t *recv_head(struct ibvd_qp *t)
{
	return t->srq ? &t->srq->head : &t->rq_head;
}

/*
 * The claim word of t's receive queue: FREE taken, or what holds it.  An
 * SRQ's may be held by another engine thread delivering to another of
 * its QPs, for one message's copy: that is waited out a moment.
 */
static uint32_t claim_cas(struct ibvd_qp *t, struct ibvd_wq_client *c)
{
	uint64_t until = 0;

	for (;;) {
		uint32_t expect = IBVD_WQ_CLAIM_FREE;
		uint64_t now;

		if (__atomic_compare_exchange_n(&c->claim, &expect,
						IBVD_WQ_CLAIM_ENGINE, false,
						__ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED)) {
			if (t->srq)
				__atomic_store_n(&t->srq->engine_claimed, true,
						 __ATOMIC_RELAXED);
			return IBVD_WQ_CLAIM_FREE;
		}
		/* ENGINE written by the client is no reason to wait */
		if (!t->srq || expect != IBVD_WQ_CLAIM_ENGINE ||
		    !__atomic_load_n(&t->srq->engine_claimed, __ATOMIC_RELAXED))
			return expect;
		now = ibvd_eng_now();
		if (!until)
			until = now + SRQ_CLAIM_SPIN_NS;
		else if (now > until)
			return expect;
		cpu_relax();
	}
}

struct ibvd_qp *ibvd_engine_qp_peer(const struct ibvd_qp *qp)
{
	return ibvd_eng_connected_peer(qp);
}

/* Under the claim: the head the library left, if it could have. */
static int claim_sync(struct ibvd_qp *t, struct ibvd_ring *ring,
		      struct ibvd_wq_client *c)
{
	uint32_t head = ibvd_read_once(&c->direct_head);
	uint32_t tail = ibvd_read_once(&c->tail);
	uint32_t *ours = recv_head(t);
	bool moved = head != *ours;

	/*
	 * The library only ever moves it forward from ours, and not past its
	 * tail (which may be a ring ahead of where we last looked).
	 */
	if ((int32_t)(head - *ours) < 0 || tail - head > ring->nslots)
		return -EPROTO;
	*ours = head;
	/* an SRQ the library took from may have dropped below its limit */
	if (t->srq && moved)
		ibvd_eng_srq_limit_check(t->srq);
	return 0;
}

/* Let go of t's receive queue's claim. */
static void claim_free(struct ibvd_qp *t, struct ibvd_wq_client *c)
{
	if (t->srq)
		__atomic_store_n(&t->srq->engine_claimed, false, __ATOMIC_RELAXED);
	ibvd_publish(&c->claim, IBVD_WQ_CLAIM_FREE);
}

/*
 * Take the claim on t's receive queue (its RQ, or its SRQ) and the head
 * its library left there: 0, -EBUSY (the library holds it), or -EPROTO
 * for a head the library could not have written (the claim is given
 * back).
 */
int ibvd_eng_claim_take(struct ibvd_qp *t)
{
	struct ibvd_ring *ring = recv_ring(t);
	struct ibvd_wq_client *c = ring->client_page;
	/*
	 * The head is its queue lock's: another thread may have just let go
	 * of the claim, or still take from the queue under a claim word its
	 * client freed behind its back.
	 */
	pthread_mutex_t *lock = t->srq ? &t->srq->lock : &t->recv_lock;
	int ret;

	if (claim_cas(t, c) != IBVD_WQ_CLAIM_FREE)
		return -EBUSY;
	pthread_mutex_lock(lock);
	ret = claim_sync(t, ring, c);
	pthread_mutex_unlock(lock);
	if (ret < 0)
		claim_free(t, c);
	return ret;
}

void ibvd_eng_claim_give(struct ibvd_qp *t)
{
	struct ibvd_ring *ring = recv_ring(t);
	struct ibvd_wq_client *c = ring->client_page;
	uint32_t head = *recv_head(t);

	ibvd_write_once(&c->direct_head, head);
	ibvd_publish(&((struct ibvd_wq_engine *)ring->engine_page)->head, head);
	/* Release: the WQEs taken, their CQEs and the head, then the claim. */
	claim_free(t, c);
}

static bool ring_empty(const struct ibvd_qp *src, const struct ibvd_transit *r)
{
	return sender_produced(src) == ring_consumed(src, r);
}

/*
 * The sender's direct SENDs from the first one not taken fail: `st` for
 * that one, flushed after it (its library reads direct_fail_status).
 */
static enum eng_drain drain_failed(struct ibvd_qp *src, enum ibv_wc_status st)
{
	ibvd_publish(&sq_engine(src)->direct_fail_status, st);
	ibvd_eng_qp_error(src);
	return DRAIN_FAILED;
}

/*
 * Nobody takes what src sent on RC: its target QP was destroyed, or
 * cannot receive.  A NIC's requester hears nothing back and fails the
 * SEND once its retries ran out, timeout x (retry_cnt + 1) after; so
 * here, from when the engine first finds it so.  Apps count on that time:
 * ibv_srq_pingpong's sides send more than the other waits for, and the
 * side that finishes first destroys its QPs while the last ones come;
 * each side ends before its own would fail on a NIC.  With timeout 0 (a
 * NIC would retry forever) at once: the daemon knows nobody will answer.
 */
static enum eng_drain unanswered(struct ibvd_qp *src)
{
	uint64_t now = ibvd_eng_now();

	if (!src->attr.timeout)
		return drain_failed(src, IBV_WC_RETRY_EXC_ERR);
	if (!src->unanswered_ns)
		src->unanswered_ns = now + ibvd_eng_timeout_ns(src->attr.timeout) *
					   ((uint64_t)src->attr.retry_cnt + 1);
	if (now < src->unanswered_ns)
		return DRAIN_UNANSWERED;
	src->unanswered_ns = 0;
	return drain_failed(src, IBV_WC_RETRY_EXC_ERR);
}

/*
 * A ring that is not one.  On RC and UC its sender's QP fails: the ring
 * is its connection's, and either end may break a connection.  A UD QP
 * talks to others too, and its peer can write its rings as well as it
 * can, so that would let any local process stop any UD QP: instead the
 * pair stops carrying datagrams (both sides' go through the engine from
 * now on) and what the ring holds is lost, as datagrams may be.
 */
static enum eng_drain drain_garbage(struct ibvd_qp *src,
				    const struct ibvd_transit *ring)
{
	struct ibvd_direct *d = src->direct;
	unsigned int i;

	if (src->qp_type != IBV_QPT_UD)
		return drain_failed(src, IBV_WC_LOC_QP_OP_ERR);
	__atomic_store_n(&d->ud_broken, true, __ATOMIC_RELAXED);
	for (i = 0; i < 2; i++)
		if (d->qp[i])
			ibvd_publish(&sq_engine(d->qp[i])->direct_send_ok, 0);
	/* its sender's datagrams count as sent: it completes them */
	ring_release(src, ring, (uint32_t)sender_produced(src));
	return DRAIN_EMPTY;
}

/*
 * The sender of ring r sleeps on its send CQ: are its SENDs up to `at`
 * done?  As its own library says, not as the ring says: the peer of a UD
 * pair, maybe of another uid, could write that to wake it for nothing.
 */
static void wake_sender_at(struct ibvd_qp *src, uint32_t at)
{
	const struct ibvd_wq_client *c = sq_client(src);
	uint64_t wide;
	uint32_t arm;

	/* a `consumed` the receiver made up, or of another pairing: nothing */
	if (!sender_current(src) ||
	    !ibvd_transit_widen(sender_produced(src), at, src->direct->ncells,
				&wide))
		return;
	if (ibvd_wake_due(&c->direct_sender_waits, &c->direct_wake, at, &arm))
		ibvd_eng_cq_nudge(src->send_cq, arm);
}

/* ... is its SEND taken now? */
static void wake_sender(struct ibvd_qp *src, const struct ibvd_transit *r)
{
	wake_sender_at(src, (uint32_t)ring_consumed(src, r));
}

/*
 * A UC or UD receiver whose library holds its claim for long (it stopped
 * mid-poll, or it never lets go): its sender's messages must not wait
 * behind it for ever, and UC and UD senders never hear what became of
 * theirs.  Only the claim's holder moves `consumed` (that library may be
 * copying out of the cells below it right now, and the sender would
 * write over them), so the ring stays as it is: the sender's library
 * completes its sends up to what the ring holds now (direct_dropped), as
 * if they were taken, and the engine goes on with its SQ.  What the ring
 * holds the receiver takes when it comes back, late, as a datagram may
 * come.
 */
static enum eng_drain lossy_give_up(struct ibvd_qp *src)
{
	uint64_t produced = sender_produced(src);

	ibvd_publish(&sq_engine(src)->direct_dropped, produced);
	wake_sender_at(src, (uint32_t)produced);
	return DRAIN_EMPTY;
}

/*
 * UC, UD: the engine gave up on everything the ring holds already, and
 * its receiver's library still holds its claim.  Once it lets go, what it
 * left (or handed back to us) is placed as any; with no receiver, what
 * the ring holds is dropped.
 */
static bool given_up(struct ibvd_qp *src)
{
	uint64_t dropped = ibvd_read_once(&sq_engine(src)->direct_dropped);
	struct ibvd_qp *target = src->direct->qp[!src->direct_side];
	const struct ibvd_wq_client *c;

	if (src->qp_type == IBV_QPT_RC || !dropped || !target ||
	    dropped != sender_produced(src))
		return false;
	c = recv_ring(target)->client_page;
	return ibvd_read_once(&c->claim) == IBVD_WQ_CLAIM_LIBRARY;
}

static enum ibv_wc_status resp_status(enum eng_resp r)
{
	switch (r) {
	case RESP_INV_REQ:
		return IBV_WC_REM_INV_REQ_ERR;
	case RESP_ACCESS:
		return IBV_WC_REM_ACCESS_ERR;
	case RESP_OP_ERR:
		return IBV_WC_REM_OP_ERR;
	case RESP_LOCAL_FAULT:
		return IBV_WC_LOC_PROT_ERR;
	default:
		return IBV_WC_RETRY_EXC_ERR;
	}
}

/*
 * UD with a GRH: the address it names, copied once out of the ring (the
 * sender may rewrite it meanwhile); the SGID is the sending port's.
 */
static void frag_grh(struct ibvd_av *av, const uint8_t *payload)
{
	struct ibvd_transit_grh g;

	memcpy(&g, payload, sizeof(g));
	av->is_global = 1;
	memcpy(av->dgid, g.dgid, sizeof(av->dgid));
	av->flow_label = g.flow_label & 0xFFFFFu;
	av->sgid_index = g.sgid_index;
	av->hop_limit = g.hop_limit;
	av->traffic_class = g.traffic_class;
}

/*
 * RDMA WRITE with immediate: where it goes, copied once out of the ring
 * (the sender may rewrite it meanwhile); the responder checks the key.
 */
static void frag_rdma(struct ibvd_send_wqe *w, const uint8_t *payload)
{
	struct ibvd_transit_rdma r;

	memcpy(&r, payload, sizeof(r));
	w->remote_addr = r.remote_addr;
	w->rkey = r.rkey;
}

static uint32_t frag_opcode(uint16_t kind)
{
	switch (kind) {
	case IBVD_TRANSIT_SEND:
		return IBV_WR_SEND;
	case IBVD_TRANSIT_SEND_IMM:
		return IBV_WR_SEND_WITH_IMM;
	case IBVD_TRANSIT_SEND_INV:
		return IBV_WR_SEND_WITH_INV;
	default:
		return IBV_WR_RDMA_WRITE_WITH_IMM;
	}
}

/* Does a QP of this type send fragments of this kind? */
static bool frag_kind_ok(uint32_t qp_type, uint16_t kind)
{
	if (kind == IBVD_TRANSIT_SEND || kind == IBVD_TRANSIT_SEND_IMM)
		return true;
	if (kind == IBVD_TRANSIT_SEND_INV)
		return qp_type != IBV_QPT_UD;
	return kind == IBVD_TRANSIT_WRITE_IMM && qp_type != IBV_QPT_UD;
}

/* A fragment as the request it stands for; false if it is no such thing. */
static bool frag_request(const struct ibvd_qp *src,
			 const struct ibvd_transit_frag *f,
			 const uint8_t *payload, struct eng_req *req)
{
	const uint16_t whole = IBVD_TRANSIT_FIRST | IBVD_TRANSIT_LAST;
	bool grh = f->flags & IBVD_TRANSIT_GRH;
	uint32_t len = f->len;

	/* libraries send whole messages only (transit.h, "Producers") */
	if ((f->flags & whole) != whole || !frag_kind_ok(src->qp_type, f->kind) ||
	    (grh && (src->qp_type != IBV_QPT_UD || len < IBVD_TRANSIT_GRH_INFO)))
		return false;
	/*
	 * A controlled Q_Key only as the sender's own, which only root can
	 * give its QP (qp_modify.c): the engine's path asks for it with the
	 * high bit, which the sender's library resolves before the ring.
	 */
	if ((f->qkey & IBVD_QKEY_CONTROLLED) && f->qkey != src->attr.qkey)
		return false;
	memset(req, 0, sizeof(*req));
	req->w.opcode = frag_opcode(f->kind);
	/* SEND_INV: the key to invalidate, where the engine's WQE has it */
	req->w.imm_data = f->imm;
	/* transit.c checked that a WRITE has room for its target */
	if (f->kind == IBVD_TRANSIT_WRITE_IMM) {
		frag_rdma(&req->w, payload);
		payload += IBVD_TRANSIT_RDMA_INFO;
		len -= IBVD_TRANSIT_RDMA_INFO;
	}
	if (f->flags & IBVD_TRANSIT_SOLICITED)
		req->w.send_flags = IBV_SEND_SOLICITED;
	req->w.av.sl = (uint8_t)((f->flags & IBVD_TRANSIT_SL_MASK) >>
				 IBVD_TRANSIT_SL_SHIFT);
	if (grh) {
		frag_grh(&req->w.av, payload);
		payload += IBVD_TRANSIT_GRH_INFO;
		len -= IBVD_TRANSIT_GRH_INFO;
	}
	req->length = len;
	req->step = len;
	if (len)
		ibvd_eng_sgl_private(&req->local, payload, len);
	return true;
}

/*
 * UC, with no receiver to take them (gone, or in error): what the ring
 * holds is dropped, as packets to such a QP are, and its SENDs complete
 * (UC has no acknowledgements to tell the sender otherwise).
 */
static enum eng_drain drop_ring(struct ibvd_qp *src,
				const struct ibvd_transit *ring)
{
	uint32_t consumed = (uint32_t)ring_consumed(src, ring);
	unsigned int n;

	for (n = 0; n < DRAIN_BUDGET; n++) {
		struct ibvd_transit_frag f;
		const uint8_t *payload;
		uint32_t next;
		int ret = ring_next(src, ring, consumed, &f, &payload, &next);

		if (ret == 0)
			break;
		if (ret < 0)
			return drain_garbage(src, ring);
		consumed = next;
	}
	ring_release(src, ring, consumed);
	wake_sender(src, ring);
	return n == DRAIN_BUDGET ? DRAIN_MORE : DRAIN_EMPTY;
}

/* Under the claim: has target a receive WQE posted (its SRQ, if any)? */
static bool rq_has_wqe(struct ibvd_qp *t)
{
	const struct ibvd_wq_client *c = recv_ring(t)->client_page;

	return ibvd_read_once(&c->tail) != *recv_head(t);
}

/* Under the claim: one message of the ring into target. */
static enum eng_resp place_message(struct ibvd_engine *eng,
				   struct ibvd_qp *src, struct ibvd_qp *target,
				   const struct eng_req *req, uint32_t qkey)
{
	enum eng_resp r;

	/*
	 * UD: whatever becomes of a datagram, its sender hears nothing;
	 * one longer than a port's MTU no wire would carry
	 */
	if (src->qp_type == IBV_QPT_UD) {
		if (req->length <= IBVD_TRANSIT_UD_MAX) {
			ibvd_eng_ud_deliver_claimed(eng, src, target, req, qkey);
			eng_count(&eng->direct_bytes, req->length);
			eng_count(&eng->direct_msgs, 1);
		}
		return RESP_OK;
	}
	if (req->w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		r = ibvd_eng_write_imm_claimed(eng, src, target, req);
	else
		r = ibvd_eng_deliver_send_claimed(eng, src, target, req);
	/*
	 * ibvctl statistic shows it, a teardown charges it (direct_take),
	 * and so does the tenant's share of an engine pass (engine.c)
	 */
	if (r == RESP_OK) {
		eng_count(&eng->direct_bytes, req->length);
		eng_count(&eng->direct_msgs, 1);
	}
	return r;
}

/*
 * Under the claim: place what the ring holds, in order.  Only the
 * requester's turn answers "no WQE" with an RNR NAK (counted, and waited
 * out on its timers); another turn just stops there.
 */
static enum eng_drain place_ring(struct ibvd_engine *eng, struct ibvd_qp *src,
				 struct ibvd_qp *target,
				 const struct ibvd_transit *ring,
				 bool requester, uint8_t *rnr_timer)
{
	uint32_t consumed = (uint32_t)ring_consumed(src, ring);
	uint64_t bytes = 0;
	unsigned int n;

	/*
	 * At most DRAIN_BUDGET messages or a turn's bytes (the engine's
	 * chunk, as for WQEs), the first message whole: the other QPs of
	 * this engine thread wait meanwhile.
	 */
	for (n = 0; n < DRAIN_BUDGET && bytes < ibvd_eng_turn_bytes; n++) {
		struct ibvd_transit_frag f;
		const uint8_t *payload;
		struct eng_req req;
		enum eng_resp r;
		uint32_t next;
		int ret;

		ret = ring_next(src, ring, consumed, &f, &payload, &next);
		if (ret == 0)
			return DRAIN_EMPTY;
		/* The sender's own library wrote nonsense: its QP fails. */
		if (ret < 0 || !frag_request(src, &f, payload, &req))
			return drain_garbage(src, ring);
		bytes += req.length;
		/*
		 * RC waits for a WQE; UC drops a message with none, UD only
		 * when its sender asks (the library left it for a moment)
		 */
		if (!requester && src->qp_type != IBV_QPT_UC &&
		    !rq_has_wqe(target))
			return DRAIN_WAIT;
		/* the sender's completion before the receiver's (recv.c) */
		ibvd_eng_recv_defer_begin(src);
		r = place_message(eng, src, target, &req, f.qkey);
		if (r == RESP_OK) {
			consumed = next;
			ring_release(src, ring, consumed);
			wake_sender(src, ring);
		}
		ibvd_eng_recv_defer_end(src);
		if (r == RESP_RNR) {
			*rnr_timer = target->attr.min_rnr_timer;
			return DRAIN_WAIT;
		}
		if (r != RESP_OK)
			return drain_failed(src, resp_status(r));
		/*
		 * Its receive CQ overran and took it down: it takes nothing
		 * more.  UC and UD lose the rest; RC's sender hears nothing,
		 * as from a responder that went away.
		 */
		if (!ibvd_eng_can_receive(eng_qp_state(target)))
			return src->qp_type == IBV_QPT_RC ? unanswered(src) :
							    drop_ring(src, ring);
	}
	return DRAIN_MORE;
}

enum eng_drain ibvd_eng_direct_drain(struct ibvd_engine *eng,
				     struct ibvd_qp *src, bool requester,
				     uint8_t *rnr_timer)
{
	struct ibvd_direct *d = src->direct;
	const struct ibvd_transit *ring;
	struct ibvd_qp *target;
	enum eng_drain res;
	bool lossy;
	int ret;

	if (!d)
		return DRAIN_EMPTY;
	ring = &d->ring[src->direct_side];
	if (ring_empty(src, ring))
		return DRAIN_EMPTY;
	/*
	 * Nothing new since we gave up: a sender that armed its send CQ
	 * since may wait for sends we completed that way (its library
	 * counts from `consumed`, and rings us).
	 */
	if (given_up(src)) {
		wake_sender_at(src, (uint32_t)sender_produced(src));
		return DRAIN_EMPTY;
	}
	/* A sender in error sends nothing more; its library flushes. */
	if (eng_qp_state(src) == IBV_QPS_ERR)
		return DRAIN_FAILED;
	target = d->qp[!src->direct_side];
	/* UC and UD drop what nobody takes; RC's sender hears of it */
	lossy = src->qp_type == IBV_QPT_UC || src->qp_type == IBV_QPT_UD;
	if (!target && lossy)
		return drop_ring(src, ring);
	if (!target || (!lossy && !ibvd_eng_can_receive(eng_qp_state(target))))
		return unanswered(src);
	src->unanswered_ns = 0;
	/*
	 * The target's own SENDs that src's library took come first, as on
	 * a NIC, where a SEND's ACK reaches its sender before the answer the
	 * receiver sends after taking it: an app sleeping on one channel for
	 * both CQs and polling once per event (perftest's -e) must hear of
	 * its SEND before it hears of the answer.
	 */
	wake_sender(target, &d->ring[target->direct_side]);
	ret = ibvd_eng_claim_take(target);
	if (ret == -EBUSY && lossy && src->claim_waits >= DIRECT_LOSSY_CLAIM_WAITS)
		return lossy_give_up(src);
	if (ret == -EBUSY)
		return DRAIN_BUSY;
	if (ret < 0) {
		ibvd_eng_responder_error(target, IBV_EVENT_QP_FATAL);
		return lossy ? drop_ring(src, ring) :
			    drain_failed(src, IBV_WC_REM_OP_ERR);
	}
	/*
	 * A receiver that cannot receive (in error): what its ring holds is
	 * dropped, with its claim held, since its library may have been
	 * placing when the QP failed.
	 */
	if (ibvd_eng_can_receive(eng_qp_state(target)))
		res = place_ring(eng, src, target, ring, requester, rnr_timer);
	else
		res = drop_ring(src, ring);
	ibvd_eng_claim_give(target);
	return res;
}

/*
 * Taken for every QP, not only while it is paired: a WQE the engine
 * started before the pair was made (waiting out an RNR, say) keeps the
 * claim, so the library cannot move it to the ring as well; and SENDs
 * the library moved before the pair came apart stay its own.
 */
bool ibvd_eng_sq_claim(struct ibvd_qp *qp)
{
	struct ibvd_wq_client *c = qp->sq.client_page;
	struct ibvd_wq_engine *e = sq_engine(qp);
	uint32_t expect = IBVD_WQ_CLAIM_FREE;
	uint32_t taken, posted, moved;

	if (!c || qp->sq_claimed)
		return true;
	if (!__atomic_compare_exchange_n(&c->claim, &expect,
					 IBVD_WQ_CLAIM_ENGINE, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return false;
	qp->sq_claimed = true;
	/*
	 * What the library moved to the ring since we last looked: its
	 * completions are the library's, the engine goes on after them (and
	 * the app may have posted a ring's worth past them).  Only a count
	 * that changed says anything (one never written stays 0, however far
	 * the SQ has come); one behind ours or past the tail means nothing.
	 */
	moved = ibvd_read_once(&c->direct_head);
	if (moved == qp->sq_direct_seen || qp->wqe_started)
		return true;
	qp->sq_direct_seen = moved;
	taken = moved - qp->sq_head;
	posted = ibvd_observe(&c->tail) - qp->sq_head;
	if (taken && taken <= posted && posted - taken <= qp->sq.nslots) {
		qp->sq_head += taken;
		ibvd_publish(&e->head, qp->sq_head);
		ibvd_publish(&e->direct_retired, qp->sq_head);
	}
	return true;
}

void ibvd_eng_sq_unclaim(struct ibvd_qp *qp)
{
	struct ibvd_wq_client *c = qp->sq.client_page;

	/* a started WQE keeps it: nothing behind it may pass it */
	if (!qp->sq_claimed || qp->wqe_started)
		return;
	qp->sq_claimed = false;
	/* Release: our head and its WQEs' completions before the claim. */
	ibvd_publish(&c->claim, IBVD_WQ_CLAIM_FREE);
}

/*
 * A basic SRQ's WQEs may be taken by the library of any of its direct
 * QPs: the engine takes its claim for every one, direct or not, so its
 * words never need setting up or tearing down as QPs pair and part.
 * Only on soft devices, where pairs are made: a wire transport's receive
 * path takes WQEs without claims.
 */
bool ibvd_engine_srq_claimed(const struct ibvd_srq *srq)
{
	return srq->srq_type == IBV_SRQT_BASIC &&
	       srq->ctx->dev->kind == IBVD_DEV_SOFT;
}

bool ibvd_eng_srq_claimed(const struct ibvd_qp *t)
{
	return t->srq && ibvd_engine_srq_claimed(t->srq);
}

/* A head the library could not have written: its queue is broken. */
static void claim_broken(struct ibvd_qp *t)
{
	struct eng_rq rq;

	if (!t->srq) {
		ibvd_eng_responder_error(t, IBV_EVENT_QP_FATAL);
		return;
	}
	ibvd_eng_rq_of(t, &rq);
	ibvd_eng_rq_broken(t, &rq);
}

int ibvd_eng_rq_claim(struct ibvd_qp *t)
{
	int ret;

	if (!t->direct && !ibvd_eng_srq_claimed(t))
		return 0;
	ret = ibvd_eng_claim_take(t);
	if (ret == -EPROTO)
		claim_broken(t);
	return ret < 0 ? ret : 1;
}

int ibvd_engine_rq_reclaim(struct ibvd_qp *qp)
{
	int ret;

	/* an SRQ's claim is taken for every message anyway */
	if (qp->srq)
		return 0;
	ret = ibvd_eng_claim_take(qp);
	if (ret == -EPROTO)
		claim_broken(qp);
	return ret;
}

void ibvd_eng_rq_unclaim(struct ibvd_qp *t, int held)
{
	if (held > 0 && !ibvd_eng_recv_keep_claim(t))
		ibvd_eng_claim_give(t);
}

enum eng_resp ibvd_eng_rq_claimed(eng_delivery deliver, struct ibvd_engine *eng,
				  struct ibvd_qp *src, struct ibvd_qp *target,
				  const struct eng_req *req)
{
	int held = ibvd_eng_rq_claim(target);
	enum eng_resp r;

	if (held < 0)
		return held == -EBUSY ? RESP_BUSY : RESP_OP_ERR;
	r = deliver(eng, src, target, req);
	ibvd_eng_rq_unclaim(target, held);
	return r;
}

void ibvd_eng_direct_rung(struct ibvd_engine *eng, struct ibvd_qp *qp)
{
	struct ibvd_direct *d = qp->direct;
	struct ibvd_qp *peer;
	uint8_t rnr_timer;

	if (!d)
		return;
	/* the library took from our SRQ: has it dropped below its limit? */
	if (qp->srq && ibvd_eng_claim_take(qp) == 0)
		ibvd_eng_claim_give(qp);
	/*
	 * Our own ring is placed by run_sq before any WQE, with the waits
	 * that needs; the peer's, from here, as far as it goes now: what
	 * waits for a WQE is the peer's requester's to come back to.
	 */
	peer = d->qp[!qp->direct_side];
	switch (peer ? ibvd_eng_direct_drain(eng, peer, false, &rnr_timer) :
		       DRAIN_EMPTY) {
	case DRAIN_MORE:
		ibvd_eng_qp_ring(qp);
		break;
	case DRAIN_WAIT:
	case DRAIN_UNANSWERED:
		/* a receiver asleep with none posted: the RNR wait is theirs;
		 * one that cannot receive: the peer's retries, on its timer */
		ibvd_eng_qp_ring(peer);
		break;
	default:
		break;
	}
	/*
	 * A sender asleep on its send CQ whose SEND a library took: it
	 * completes it itself once awake.  Ours too (what its receiver has
	 * not taken, run_sq places).
	 */
	if (peer)
		wake_sender(peer, &d->ring[!qp->direct_side]);
	wake_sender(qp, &d->ring[qp->direct_side]);
}

bool ibvd_eng_direct_break(struct ibvd_qp *qp)
{
	struct ibvd_direct *d = qp->direct;
	struct ibvd_wq_engine *e = sq_engine(qp);

	if (!d || ring_empty(qp, &d->ring[qp->direct_side]) ||
	    ibvd_read_once(&e->direct_fail_status))
		return false;
	ibvd_publish(&e->direct_fail_status, IBV_WC_RETRY_EXC_ERR);
	return true;
}

void ibvd_eng_direct_flush(struct ibvd_qp *qp)
{
	struct ibvd_wq_engine *e = sq_engine(qp);

	if (!qp->direct)
		return;
	/* the library flushes its SENDs the receiver has not taken */
	if (!ibvd_read_once(&e->direct_fail_status))
		ibvd_publish(&e->direct_fail_status, IBV_WC_WR_FLUSH_ERR);
	/*
	 * and a sender asleep on its CQ must hear of them, if there are any
	 * (its header's word may be of an earlier pairing)
	 */
	if (ibvd_read_once(&sq_client(qp)->direct_sender_waits) &&
	    !ring_empty(qp, &qp->direct->ring[qp->direct_side]))
		ibvd_eng_cq_nudge_failed(qp->send_cq);
}

void ibvd_eng_direct_void(struct ibvd_qp *qp)
{
	struct ibvd_direct *d = qp->direct;

	/* a WRITE or READ the libraries start from now takes the SQ */
	if (d) {
		/*
		 * Out of RTS, nothing the app posts from now on goes on the
		 * ring: its library puts it in the SQ, which we flush.  The
		 * control path sets this again when the QP is back in RTS.
		 */
		ibvd_publish(&sq_engine(qp)->direct_send_ok, 0);
		ibvd_lease_void(ibvd_transit_lease(d->ctl, 0));
		ibvd_lease_void(ibvd_transit_lease(d->ctl, 1));
	}
}

/* Where src's ring ends now: its produced, or a ring past what is taken. */
static uint64_t last_cells(const struct ibvd_qp *src)
{
	const struct ibvd_direct *d = src->direct;
	uint64_t produced = sender_produced(src);
	uint64_t consumed = ring_consumed(src, &d->ring[src->direct_side]);

	return produced - consumed > d->ncells ? consumed + d->ncells : produced;
}

bool ibvd_eng_direct_last_end(const struct ibvd_qp *qp, uint64_t *end)
{
	struct ibvd_qp *peer = qp->direct ? qp->direct->qp[!qp->direct_side] :
					    NULL;

	if (!peer || ring_empty(peer, &peer->direct->ring[peer->direct_side]))
		return false;
	/*
	 * Only what the peer's ring holds now, at most a ring past what is
	 * taken: the peer's library may go on filling it as fast as we take,
	 * to keep every tenant waiting.  (Not a cap on sender_produced: our
	 * own library may be taking past it meanwhile, and a `consumed` past
	 * the count it is read against would look impossible.)
	 */
	*end = last_cells(peer);
	return true;
}

bool ibvd_eng_direct_take(struct ibvd_engine *eng, struct ibvd_qp *qp,
			  uint64_t end, uint64_t *placed)
{
	struct ibvd_qp *peer = qp->direct ? qp->direct->qp[!qp->direct_side] :
					    NULL;
	uint64_t before = eng->direct_bytes;
	const struct ibvd_transit *ring;
	enum eng_drain res;
	uint8_t rnr_timer;

	if (!peer)
		return false;
	ring = &peer->direct->ring[peer->direct_side];
	res = ibvd_eng_direct_drain(eng, peer, false, &rnr_timer);
	/* the objects lock is held for writing: no pass counts meanwhile */
	*placed += eng->direct_bytes - before;
	/*
	 * DRAIN_MORE placed a turn's worth; a claim our own library holds
	 * (another of its threads polling) is let go of soon.  One its
	 * library held as it died never is: asked again each round, it
	 * costs a turn of the teardown's budget each time, which bounds it
	 * (abuse.sh full-direct-exit-held).
	 */
	return (res == DRAIN_MORE || res == DRAIN_BUSY) &&
	       ring_consumed(peer, ring) < end;
}

void ibvd_eng_direct_take_last(struct ibvd_engine *eng, struct ibvd_qp *qp)
{
	uint64_t end, placed = 0;
	unsigned int turns;

	/*
	 * Bounded, since the control thread waits meanwhile: what the peer's
	 * ring held when we began, and one turn's bytes more.
	 */
	if (!ibvd_eng_direct_last_end(qp, &end))
		return;
	for (turns = 0; turns < DIRECT_LAST_TURNS; turns++)
		if (!ibvd_eng_direct_take(eng, qp, end, &placed))
			break;
}
