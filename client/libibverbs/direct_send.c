/*
 * The direct transport's sending side (ibv_post_send, SQ lock;
 * direct_internal.h has the design): a SEND (with immediate or
 * invalidate) or an RDMA WRITE with immediate goes on the ring when the
 * engine has finished every earlier WQE of the QP, the receiver has the
 * rings mapped, the message fits the free space and its SGEs are this
 * process's MRs; anything else takes the SQ.  It is remembered until the
 * receiver has taken it (direct_cqe.c completes it then).  Also here:
 * how far the receiver took our ring, as far as we can believe it, and
 * what a sender asleep on its send CQ waits for.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "barrier.h"
#include "direct_internal.h"
#include "transit.h"
#include "util.h"

/*
 * A SEND that does not fit waits while messages are taken (wait_room):
 * past the first interval without one taken the engine is asked to take
 * them, past the second the SEND goes without the ring.
 */
#define DIRECT_ROOM_ASK_NS	20000u
#define DIRECT_ROOM_GIVE_UP_NS	200000u
/* ... and in all: a receiver that lies a cell at a time keeps no one */
#define DIRECT_ROOM_MAX_NS	2000000u
/*
 * UD: after a long wait, SENDs that do not fit take the SQ at once for a
 * while: 1 ms, twice as long after each long wait within a second of the
 * last quiet's start, up to 100 ms.  A peer that keeps its ring full, or
 * frees room a cell at a time, costs a poster at most DIRECT_ROOM_MAX_NS
 * every 100 ms, not every post.
 */
#define DIRECT_ROOM_QUIET_MIN_NS	1000000ull
#define DIRECT_ROOM_QUIET_MAX_NS	100000000ull
#define DIRECT_ROOM_QUIET_RESET_NS	1000000000ull

/* A SEND for the ring, from a work request or from a WQE in the SQ. */
struct ring_msg {
	uint64_t wr_id;
	uint32_t opcode;
	uint32_t send_flags;
	uint32_t imm;			/* network order */
	uint32_t qkey;			/* UD */
	uint8_t sl;			/* UD */
	bool has_grh;			/* UD: grh goes ahead of the bytes */
	struct ibvd_transit_grh grh;
	bool has_rdma;			/* WRITE_WITH_IMM: rdma goes ahead */
	struct ibvd_transit_rdma rdma;
	struct iovec iov[DIRECT_MAX_SGE];
	int iovcnt;
	uint64_t len;			/* the message's bytes */
};

/* What goes ahead of m's bytes on the ring (transit.h). */
static uint32_t ring_info_len(const struct ring_msg *m)
{
	return m->has_grh ? IBVD_TRANSIT_GRH_INFO :
	       m->has_rdma ? IBVD_TRANSIT_RDMA_INFO : 0;
}

/* What m takes of a ring's payload room. */
static uint64_t ring_len(const struct ring_msg *m)
{
	return m->len + ring_info_len(m);
}

/*
 * What goes on a ring.  A SEND with invalidate too: the receiver's
 * library hands it to the engine, which owns the keys, and the messages
 * behind it wait their turn.  An RDMA WRITE with immediate on RC and UC:
 * the receiver polls for its completion anyway, so its library places
 * the data then, in its own MR, checked by the key as a responder would.
 */
static bool ring_opcode(const struct ibvc_qp *qp, uint32_t opcode)
{
	if (opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		return qp->qp.qp_type == IBV_QPT_RC || qp->qp.qp_type == IBV_QPT_UC;
	return opcode == IBV_WR_SEND || opcode == IBV_WR_SEND_WITH_IMM ||
	       opcode == IBV_WR_SEND_WITH_INV;
}

static uint16_t ring_kind(uint32_t opcode)
{
	switch (opcode) {
	case IBV_WR_SEND:
		return IBVD_TRANSIT_SEND;
	case IBV_WR_SEND_WITH_IMM:
		return IBVD_TRANSIT_SEND_IMM;
	case IBV_WR_SEND_WITH_INV:
		return IBVD_TRANSIT_SEND_INV;
	default:
		return IBVD_TRANSIT_WRITE_IMM;
	}
}

/* WRITE_WITH_IMM: where it goes, ahead of its bytes on the ring. */
static void msg_rdma(struct ring_msg *m, uint64_t remote_addr, uint32_t rkey)
{
	m->has_rdma = m->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
	memset(&m->rdma, 0, sizeof(m->rdma));
	m->rdma.remote_addr = remote_addr;
	m->rdma.rkey = rkey;
}

/* Add one SGE; false if it is not this process's registered memory. */
static bool msg_add(const struct ibvc_qp *qp, struct ring_msg *m,
		    uint64_t addr, uint32_t len, uint32_t lkey, bool keyless)
{
	if (len && !keyless &&
	    !ibvc_mrtab_covers(ctx_of(qp), qp->qp.pd, lkey, addr, len,
			       IBVC_MRTAB_COPY))
		return false;
	m->iov[m->iovcnt].iov_base = (void *)(uintptr_t)addr;
	m->iov[m->iovcnt].iov_len = len;
	m->iovcnt++;
	m->len += len;
	return true;
}

/* UD: what the receiver makes the GRH of (transit.h, "UD"). */
static void grh_info(struct ibvd_transit_grh *g, const struct ibvd_av *av)
{
	memset(g, 0, sizeof(*g));
	memcpy(g->dgid, av->dgid, sizeof(g->dgid));
	g->flow_label = av->flow_label & 0xFFFFFu;
	g->sgid_index = av->sgid_index;
	g->hop_limit = av->hop_limit;
	g->traffic_class = av->traffic_class;
}

/*
 * UD: may a datagram to qpn through av go on the ring?  Only to the peer,
 * by its LID, as the engine would route it; the Q_Key resolved as the
 * engine does, and with a GRH what the receiver makes it of (transit.h,
 * "UD").  Other QP types (av NULL): yes, with none of those.
 */
static bool ud_dest(const struct ibvc_qp *qp, uint32_t qpn,
		    const struct ibvd_av *av, uint32_t qkey, struct ring_msg *m)
{
	const struct ibvc_direct *d = qp->direct;

	m->qkey = 0;
	m->sl = 0;
	m->has_grh = false;
	if (qp->qp.qp_type != IBV_QPT_UD)
		return true;
	if ((qpn & 0xFFFFFFu) != d->peer_qpn || !av->dlid ||
	    av->dlid != d->peer_slid)
		return false;
	m->qkey = (qkey & DIRECT_QKEY_OWN) ?
		  __atomic_load_n(&qp->qkey, __ATOMIC_RELAXED) : qkey;
	m->sl = av->sl;
	m->has_grh = av->is_global;
	if (m->has_grh)
		grh_info(&m->grh, av);
	return true;
}

/* The whole message gathered: no longer than a UD datagram may be. */
static bool msg_size_ok(const struct ibvc_qp *qp, const struct ring_msg *m)
{
	return qp->qp.qp_type != IBV_QPT_UD || m->len <= IBVD_TRANSIT_UD_MAX;
}

/* wr as a ring message; false if it cannot be one. */
static bool msg_from_wr(const struct ibvc_qp *qp, const struct ibv_send_wr *wr,
			struct ring_msg *m)
{
	/* inline data needs no key: the app's buffer, read now */
	bool inline_data = wr->send_flags & IBV_SEND_INLINE;
	const struct ibvd_av *av = qp->qp.qp_type == IBV_QPT_UD ?
				   &to_ibvc_ah(wr->wr.ud.ah)->av : NULL;
	int i;

	/* another PD's AH: the engine fails it */
	if ((av && !ibvc_ah_pd_ok(qp, wr->wr.ud.ah)) ||
	    !ring_opcode(qp, wr->opcode) || (uint32_t)wr->num_sge > DIRECT_MAX_SGE ||
	    !ud_dest(qp, wr->wr.ud.remote_qpn, av, wr->wr.ud.remote_qkey, m))
		return false;
	m->wr_id = wr->wr_id;
	m->opcode = wr->opcode;
	m->send_flags = wr->send_flags;
	m->imm = wr->imm_data;
	msg_rdma(m, wr->wr.rdma.remote_addr, wr->wr.rdma.rkey);
	m->iovcnt = 0;
	m->len = 0;
	for (i = 0; i < wr->num_sge; i++)
		if (!msg_add(qp, m, wr->sg_list[i].addr, wr->sg_list[i].length,
			     wr->sg_list[i].lkey, inline_data))
			return false;
	return msg_size_ok(qp, m);
}

/* The WQE in an SQ slot as a ring message (it is ours: post.c wrote it). */
static bool msg_from_slot(const struct ibvc_qp *qp, const uint8_t *slot,
			  struct ring_msg *m)
{
	const uint8_t *body = slot + IBVD_SEND_WQE_HDR;
	struct ibvd_send_wqe h;
	struct ibvd_sge sge;
	uint32_t i;

	memcpy(&h, slot, sizeof(h));
	/* a staged payload is in the block the engine reads it from */
	if ((h.send_flags & (IBVD_SEND_STAGED | IBVD_SEND_FOREIGN_AH)) ||
	    !ring_opcode(qp, h.opcode) ||
	    !ud_dest(qp, h.remote_qpn, &h.av, h.remote_qkey, m))
		return false;
	m->wr_id = h.wr_id;
	m->opcode = h.opcode;
	m->send_flags = h.send_flags;
	m->imm = h.imm_data;
	msg_rdma(m, h.remote_addr, h.rkey);
	m->iovcnt = 0;
	m->len = 0;
	if (h.send_flags & IBV_SEND_INLINE)
		return h.inline_len <= qp->cap.max_inline_data &&
		       msg_add(qp, m, (uint64_t)(uintptr_t)body, h.inline_len,
			       0, true) && msg_size_ok(qp, m);
	if (h.num_sge > DIRECT_MAX_SGE)
		return false;
	for (i = 0; i < h.num_sge; i++) {
		memcpy(&sge, body + i * sizeof(sge), sizeof(sge));
		if (!msg_add(qp, m, sge.addr, sge.length, sge.lkey, false))
			return false;
	}
	return msg_size_ok(qp, m);
}

/*
 * Has the engine nothing of this SQ left to do, its completions
 * written?  Either it retired every WQE, or it retired every one it
 * started and the library moved the rest to the ring (take_back).
 */
static bool sq_drained(const struct ibvc_qp *qp, uint32_t sq_tail)
{
	/* Acquire: the completions below it are written. */
	uint32_t retired = ibvd_observe(&qp->sq.engine->direct_retired);

	return retired == sq_tail ||
	       (ibvd_read_once(&qp->sq.client->direct_head) == sq_tail &&
		retired == ibvd_observe(&qp->sq.engine->head));
}

/*
 * May requests be done here now: the daemon says so, and there is room
 * to remember one until its completion?
 */
static bool direct_usable(const struct ibvc_qp *qp, const struct ibvc_direct *d)
{
	return ibvd_read_once(&qp->sq.engine->direct_send_ok) &&
	       d->sends_tail - ibvd_observe(&d->sends_head) < d->sends_cap;
}

/* May SENDs go on the ring now (but for their size)?  The receiver must
 * know of the ring too. */
static bool ring_usable(const struct ibvc_qp *qp, const struct ibvc_direct *d)
{
	return direct_usable(qp, d) && ibvd_observe(&d->out.ctl->rx_ready);
}

static bool fits(const struct ibvc_direct *d, uint32_t consumed, uint64_t len)
{
	uint32_t room = ibvd_transit_room(&d->out, d->produced, consumed);

	return room && len <= room;
}

/* A long wait for room: a quiet while (DIRECT_ROOM_QUIET_*). */
static void room_quiet(struct ibvc_direct *d, uint64_t now)
{
	uint64_t last = d->room_quiet_until - d->room_quiet_ns;
	uint64_t quiet = DIRECT_ROOM_QUIET_MIN_NS;

	if (d->room_quiet_until && now - last < DIRECT_ROOM_QUIET_RESET_NS)
		quiet = d->room_quiet_ns * 2;
	if (quiet > DIRECT_ROOM_QUIET_MAX_NS)
		quiet = DIRECT_ROOM_QUIET_MAX_NS;
	d->room_quiet_ns = quiet;
	d->room_quiet_until = now + quiet;
}

/*
 * wait_room's wait: true when room came; false when it did not or cannot
 * come.  *waited: how long it spun (0: not at all).
 */
static bool await_room(const struct ibvc_qp *qp, const struct ibvc_direct *d,
		       uint64_t len, uint32_t *consumed, uint64_t *waited)
{
	uint64_t start = 0, since = 0, now;
	bool asked = false;
	uint32_t c;

	while (!fits(d, *consumed, len)) {
		if (*consumed == d->produced)
			return false;
		now = ibvd_mono_ns();
		if (!start)
			start = now;
		*waited = now - start;
		if (*waited > DIRECT_ROOM_MAX_NS)
			return false;
		c = ibvd_read_once(&d->out.ctl->consumed);
		/* only a step forward, up to what we produced, is progress:
		 * a receiver's line that moves anywhere else keeps no one here */
		if (!since || (c != *consumed && (uint32_t)(c - *consumed) <=
			       (uint32_t)(d->produced - *consumed))) {
			*consumed = c;
			since = now;
			asked = false;
		} else if (!asked && now - since > DIRECT_ROOM_ASK_NS) {
			ring_own(qp);
			asked = true;
			since = now;
		} else if (asked && now - since > DIRECT_ROOM_GIVE_UP_NS) {
			return false;
		}
	}
	return true;
}

/*
 * Room for len bytes, waiting for it while messages are taken: a SEND
 * that took the SQ instead would put every later one behind it on the
 * engine's path (RC order) for as long as the app keeps its SQ busy, as
 * a streaming sender does.  When the receiver takes nothing for a while
 * (it does not poll, it is not running, or it is this very thread) the
 * engine is asked to place what is there; when nothing moves even then
 * (no receive posted), or the empty ring cannot hold the message, or
 * room does not come within DIRECT_ROOM_MAX_NS however it moves, the
 * SEND takes the SQ.  A UD QP's peer is whoever it sends to: after a
 * wait longer than DIRECT_ROOM_GIVE_UP_NS, given up or not, its next
 * SENDs that do not fit take the SQ at once for a while (room_quiet).
 * False: take the SQ; *consumed is the last read.
 */
static bool wait_room(const struct ibvc_qp *qp, struct ibvc_direct *d,
		      uint64_t len, uint32_t *consumed)
{
	bool ud = qp->qp.qp_type == IBV_QPT_UD, room;
	uint64_t waited = 0;

	if (fits(d, *consumed, len))
		return true;
	if (ud && d->room_quiet_until && ibvd_mono_ns() < d->room_quiet_until)
		return false;
	room = await_room(qp, d, len, consumed, &waited);
	if (ud && waited > DIRECT_ROOM_GIVE_UP_NS)
		room_quiet(d, ibvd_mono_ns());
	return room;
}

/*
 * A request the ring or a grant carries: its completion waits until the
 * receiver took what the ring holds up to here (`produced` now).
 */
static bool remember(struct ibvc_qp *qp, struct ibvc_direct *d,
		     uint64_t wr_id, enum ibv_wc_opcode opcode,
		     uint32_t byte_len, unsigned int send_flags, uint32_t mark)
{
	struct ibvc_direct_send *s;

	s = &d->sends[d->sends_tail & (d->sends_cap - 1)];
	s->wr_id = wr_id;
	s->end = d->produced;
	s->byte_len = byte_len;
	s->mark = mark;
	s->opcode = (uint8_t)opcode;
	s->signaled = qp->sq_sig_all || (send_flags & IBV_SEND_SIGNALED);
	/* Release: the pollers see the entry before the new tail. */
	ibvd_publish(&d->sends_tail, d->sends_tail + 1);
	return s->signaled;
}

struct ring_write {
	const struct ibvd_transit *t;
	uint32_t *produced;
	uint32_t consumed;
	const struct ibvd_transit_frag *f;
	const struct iovec *iov;
	int iovcnt;
	int ret;
};

static void ring_write(void *arg)
{
	struct ring_write *w = arg;

	w->ret = ibvd_transit_write(w->t, w->produced, w->consumed, w->f,
				    w->iov, w->iovcnt);
}

/*
 * Write m on the ring (it fits at `consumed` as read) and remember it
 * until the receiver takes it; mark: its send CQ's engine tail, which
 * holds every completion of the QP's earlier WQEs.  The copy from the
 * app's memory is guarded: a file truncated under its MR leaves the
 * SEND to the engine, which fails it (`produced` moves only once the
 * message is written).
 */
static bool ring_put(struct ibvc_qp *qp, struct ibvc_direct *d,
		     const struct ring_msg *m, uint32_t consumed, uint32_t mark)
{
	struct iovec iov[DIRECT_MAX_SGE + 1];
	const struct iovec *from = m->iov;
	struct ibvd_transit_frag f;
	int iovcnt = m->iovcnt;
	struct ring_write w;

	memset(&f, 0, sizeof(f));
	f.kind = ring_kind(m->opcode);
	f.flags = IBVD_TRANSIT_FIRST | IBVD_TRANSIT_LAST;
	if (m->send_flags & IBV_SEND_SOLICITED)
		f.flags |= IBVD_TRANSIT_SOLICITED;
	f.flags |= (uint16_t)((m->sl << IBVD_TRANSIT_SL_SHIFT) &
			      IBVD_TRANSIT_SL_MASK);
	if (m->has_grh)
		f.flags |= IBVD_TRANSIT_GRH;
	if (ring_info_len(m)) {
		iov[0].iov_base = m->has_grh ? (void *)&m->grh : (void *)&m->rdma;
		iov[0].iov_len = ring_info_len(m);
		memcpy(iov + 1, m->iov, (size_t)m->iovcnt * sizeof(*iov));
		from = iov;
		iovcnt++;
	}
	f.qkey = m->qkey;
	f.len = f.msg_len = (uint32_t)ring_len(m);
	f.imm = m->imm;
	f.wr_id = m->wr_id;
	w = (struct ring_write){ .t = &d->out, .produced = &d->produced,
				 .consumed = consumed, .f = &f, .iov = from,
				 .iovcnt = iovcnt, .ret = -EFAULT };
	if (!ibvc_guarded(ring_write, &w) || w.ret < 0)
		return false;
	if (m->send_flags & IBV_SEND_SOLICITED)
		d->solicited_now = true;
	remember(qp, d, m->wr_id, m->has_rdma ? IBV_WC_RDMA_WRITE : IBV_WC_SEND,
		 (uint32_t)m->len, m->send_flags, mark);
	d->produced_now = true;
	return true;
}

static uint32_t send_cq_tail(const struct ibvc_qp *qp)
{
	return ibvd_observe(&to_ibvc_cq(qp->qp.send_cq)->ring.engine->tail);
}

/*
 * A WRITE or READ into the peer's memory by a grant (direct_rdma.c), done
 * now.  RC order: only when the engine has finished every earlier
 * request and the receiver took every SEND before it (a WRITE must not
 * land before an earlier SEND); otherwise the engine does it, after
 * placing those SENDs itself.
 */
static int direct_rdma(struct ibvc_qp *qp, struct ibvc_direct *d,
		       const struct ibv_send_wr *wr)
{
	uint32_t byte_len;

	if (ibvd_read_once(&d->out.ctl->consumed) != d->produced)
		return 0;
	if (!d->grants) {
		d->grants = ibvc_grants_new(ibvd_transit_lease(d->map.addr,
							       d->side));
		if (!d->grants)
			return 0;
	}
	if (!ibvc_grants_rdma(qp, d->grants, d->gen, wr, &byte_len))
		return 0;
	if (remember(qp, d, wr->wr_id, wr->opcode == IBV_WR_RDMA_READ ?
		     IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE, byte_len,
		     wr->send_flags, send_cq_tail(qp))) {
		d->done_now = true;
		d->done_end = d->produced;
	}
	return 1;
}

int ibvc_direct_send(struct ibvc_qp *qp, const struct ibv_send_wr *wr,
		     uint32_t sq_tail)
{
	struct ibvc_direct *d = qp->direct;
	struct ring_msg m;
	uint32_t consumed;

	/*
	 * Drained first: the acquire there orders the read of send_ok after
	 * it, and the engine clears send_ok before it retires a failed WQE,
	 * so nothing goes on the ring behind a failure.
	 */
	if (!d || !sq_drained(qp, sq_tail) || !direct_usable(qp, d))
		return 0;
	/* one-sided: the target's library has no part in it */
	if (wr->opcode == IBV_WR_RDMA_WRITE || wr->opcode == IBV_WR_RDMA_READ)
		return direct_rdma(qp, d, wr);
	if (!ibvd_observe(&d->out.ctl->rx_ready) || !msg_from_wr(qp, wr, &m))
		return 0;
	consumed = ibvd_read_once(&d->out.ctl->consumed);
	if (!wait_room(qp, d, ring_len(&m), &consumed) ||
	    !ring_put(qp, d, &m, consumed, send_cq_tail(qp)))
		return 0;
	return 1;
}

/*
 * What we wrote into our ring, made visible: first in our SQ's header
 * (with the pairing's gen), the count the engine and we go by, then in
 * the ring for the receiver.  A UD peer can rewrite the ring's, to hide
 * what we sent from the engine (our sends would never complete) or to
 * make a `consumed` it invents look possible.
 */
static void publish_produced(struct ibvc_direct *d)
{
	d->published += (uint32_t)(d->produced - (uint32_t)d->published);
	/* Release: the fragments below it were written before it. */
	ibvd_publish(d->own_produced, d->published);
	ibvd_transit_publish(&d->out, d->produced);
}

/*
 * SENDs that went to the SQ (the ring was full, or they queued behind
 * some that were) go on the ring after all when the engine has not
 * started them: otherwise a sender that keeps its SQ busy, as a
 * streaming one does, would never come back to the ring.  Under the SQ's
 * claim (ring.h), which the engine holds while it runs the SQ, from the
 * first WQE it has not taken, in order, as long as each is a SEND the
 * ring takes now; the engine skips them when it next takes the claim.
 */
void ibvc_direct_take_back(struct ibvc_qp *qp, uint32_t sq_tail)
{
	struct ibvc_direct *d = qp->direct;
	struct ibvd_wq_client *c = qp->sq.client;
	const struct ibvd_wq_engine *e = qp->sq.engine;
	uint32_t expect = IBVD_WQ_CLAIM_FREE;
	uint32_t head, from, consumed, mark;
	struct ring_msg m;

	if (!d || ibvd_observe(&e->head) == sq_tail ||
	    ibvd_read_once(&c->direct_head) == sq_tail || !ring_usable(qp, d))
		return;
	if (!__atomic_compare_exchange_n(&c->claim, &expect,
					 IBVD_WQ_CLAIM_LIBRARY, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return;
	head = ibvd_observe(&e->head);
	/* Acquire: the engine's completions before ours are written. */
	if (ibvd_observe(&e->direct_retired) != head)
		goto out;
	mark = send_cq_tail(qp);
	from = ibvd_read_once(&c->direct_head);
	if (from - head > sq_tail - head)
		from = head;		/* the engine took all we took before */
	consumed = ibvd_read_once(&d->out.ctl->consumed);
	while (from != sq_tail && ring_usable(qp, d) &&
	       msg_from_slot(qp, ibvc_wq_slot(&qp->sq, from), &m) &&
	       fits(d, consumed, ring_len(&m)) &&
	       ring_put(qp, d, &m, consumed, mark))
		from++;
	ibvd_write_once(&c->direct_head, from);
	/*
	 * Published before the claim goes: the engine, taking it, skips
	 * these SENDs in the SQ and runs the WQE behind them once it sees
	 * the ring empty, which it must not while they are not in it.
	 */
	if (d->produced_now)
		publish_produced(d);
out:
	/* Release: the ring's records and our head before the claim. */
	ibvd_publish(&c->claim, IBVD_WQ_CLAIM_FREE);
}

/* Can the receiver have taken this much (`consumed`, as it says)? */
static bool possible(const struct ibvc_direct *d, uint32_t consumed)
{
	uint64_t wide;

	/* what we published, not what the ring says: the peer can write it */
	return ibvd_transit_widen(ibvd_read_once(d->own_produced), consumed,
				  d->out.ncells, &wide);
}

/* Is `consumed`, as the receiver says, past `end` (and possible)? */
bool ibvc_direct_taken(const struct ibvc_direct *d, uint32_t consumed,
		       uint32_t end)
{
	if (!possible(d, consumed))
		return false;	/* a receiver's lie: nothing moves */
	return (int32_t)(consumed - end) >= 0;
}

/*
 * How far our ring is taken, as a 64-bit count: the receiver's
 * `consumed`, unless what the engine took itself (direct_taken, its word)
 * is further, or the receiver's is impossible.  A UD peer can move
 * `consumed` back and forth, to keep us from ever seeing our sends taken.
 * `dropped`: UC and UD count as taken, too, what the engine gave up on
 * (ring.h, direct_dropped: a receiver that held its claim too long),
 * while the ring keeps what it holds.
 */
static uint64_t taken_count(const struct ibvc_qp *qp,
			    const struct ibvc_direct *d, bool dropped)
{
	uint64_t published = ibvd_read_once(d->own_produced);
	uint64_t taken = ibvd_observe(&qp->sq.engine->direct_taken), wide, gave;
	uint32_t said = ibvd_observe(&d->out.ctl->consumed);

	if (ibvd_transit_widen(published, said, d->out.ncells, &wide) &&
	    wide > taken)
		taken = wide;
	if (!dropped || qp->qp.qp_type == IBV_QPT_RC)
		return taken;
	gave = ibvd_observe(&qp->sq.engine->direct_dropped);
	return gave > taken && gave <= published ? gave : taken;
}

/* ... for the wake-ups, which the engine sends for what it gave up on */
uint32_t ibvc_direct_sent_taken(const struct ibvc_qp *qp,
				const struct ibvc_direct *d)
{
	return (uint32_t)taken_count(qp, d, false);
}

/* ... for the completions */
uint32_t ibvc_direct_sent_done(const struct ibvc_qp *qp,
			       const struct ibvc_direct *d)
{
	return (uint32_t)taken_count(qp, d, true);
}

/*
 * The end of the first signalled SEND not taken when `consumed` was
 * `since`; false: none.  It may be taken by now: if so, its event is due
 * at once (ibvc_direct_update_wake).
 */
static bool first_untaken(const struct ibvc_direct *d, uint32_t since,
			  uint32_t *end)
{
	/* Acquire: the entries below the tail are written. */
	uint32_t tail = ibvd_observe(&d->sends_tail);
	uint32_t i;

	for (i = ibvd_observe(&d->sends_head); i != tail; i++) {
		const struct ibvc_direct_send *s = &d->sends[i & (d->sends_cap - 1)];

		if (s->signaled && !ibvc_direct_taken(d, since, s->end)) {
			*end = s->end;
			return true;
		}
	}
	return false;
}

/*
 * Say how the send CQ sleeps (IBVD_TRANSIT_WAKE_*, 0 for awake) and, for
 * WAKE_AT, the wake: in the SQ's client header, the copy that we and the
 * engine go by, and in the ring's producer line for the peer's library,
 * which may write that line too (transit.h "Blocking").
 */
void ibvc_direct_say_wake(struct ibvc_qp *qp, struct ibvc_direct *d,
			  uint32_t waits, uint64_t wake)
{
	struct ibvd_wq_client *c = qp->sq.client;

	if (waits == IBVD_TRANSIT_WAKE_AT) {
		__atomic_store_n(&c->direct_wake, wake, __ATOMIC_RELAXED);
		__atomic_store_n(&d->out.ctl->wake, wake, __ATOMIC_RELAXED);
	}
	/* Release: who sees the mode sees the wake. */
	ibvd_publish(&c->direct_sender_waits, waits);
	ibvd_publish(&d->out.ctl->sender_waits, waits);
}

/*
 * Do our SENDs taken up to `consumed` (as the receiver says, if that is
 * possible) complete what the send CQ waits for?
 */
bool ibvc_direct_own_wake_due(const struct ibvc_qp *qp, uint32_t consumed,
			      uint32_t *arm)
{
	const struct ibvd_wq_client *c = qp->sq.client;

	return possible(qp->direct, consumed) &&
	       ibvd_wake_due(&c->direct_sender_waits, &c->direct_wake,
			     consumed, arm);
}

/*
 * The send CQ is armed: tell the engine (through the ring's producer
 * line, transit.h "Blocking") which `consumed` completes the first
 * signalled SEND not taken before the arm, so that it sends the event
 * then, or at once if it was taken since.  `since` is `consumed` as read
 * before the arm or the SENDs' publication, whichever the caller did
 * last: a SEND the receiver (or the engine) takes between that and our
 * look completes on the armed CQ and must fire it, as a NIC's CQE would;
 * one taken before it is a completion the arm did not ask about.  A wake
 * already set for this arm stays: its SEND is the earliest (and if it was
 * taken, its event is on the way).  Posters and arming pollers both come
 * here, under wake_lock.
 */
enum wake_kind ibvc_direct_update_wake(struct ibvc_qp *qp,
				       struct ibvc_direct *d, bool done,
				       uint32_t since)
{
	struct ibvc_cq *cq = to_ibvc_cq(qp->qp.send_cq);
	struct ibvd_wq_client *c = qp->sq.client;
	enum wake_kind kind = WAKE_NONE;
	uint32_t arm, end, was;

	pthread_mutex_lock(&d->wake_lock);
	if (!cq_armed(cq))
		goto out;
	/* solicited only: a send's success fires nothing, its failure does */
	if (!arm_any(cq)) {
		kind = WAKE_ON_FAIL;
		ibvc_direct_say_wake(qp, d, IBVD_TRANSIT_WAKE_ON_FAIL, 0);
		goto out;
	}
	arm = ibvd_read_once(&cq->ring.client->arm_seq);
	was = ibvd_read_once(&c->direct_sender_waits);
	kind = WAKE_AT;
	if (was == IBVD_TRANSIT_WAKE_AT &&
	    (uint32_t)(__atomic_load_n(&c->direct_wake, __ATOMIC_RELAXED) >> 32) ==
	    arm)
		goto out;
	/* a completion made by this post comes first: it is due now */
	if (done)
		end = d->done_end;
	if (done || first_untaken(d, since, &end)) {
		ibvc_direct_say_wake(qp, d, IBVD_TRANSIT_WAKE_AT,
				     (uint64_t)arm << 32 | end);
	} else {
		kind = WAKE_ON_FAIL;
		ibvc_direct_say_wake(qp, d, IBVD_TRANSIT_WAKE_ON_FAIL, 0);
	}
out:
	pthread_mutex_unlock(&d->wake_lock);
	/*
	 * Store (wake) -> load (consumed, in the engine after the caller
	 * rings): a SEND taken while we looked is seen due there.
	 */
	ibvd_full_fence();
	return kind;
}

/*
 * The receiver sleeps on an arm that what we just sent fires: we wake it
 * (once for that arm), or the engine does (false).
 */
static bool wake_receiver(struct ibvc_direct *d)
{
	/* Acquire: the kind was stored before the arm. */
	uint32_t arm = ibvd_observe(&d->out.ctl->arm_seq);
	uint32_t kind = ibvd_read_once(&d->out.ctl->arm_kind);

	if (!arm || arm == d->poked_arm)
		return true;
	/*
	 * A solicited-only arm and an unsolicited SEND: only an error fires
	 * it, which the receive makes, not we; the engine places it and
	 * sees (the receiver's library sleeps).
	 */
	if (kind & (IBVD_TRANSIT_ARM_NO_RECV | IBVD_TRANSIT_ARM_UNWATCHED) ||
	    (!(kind & IBVD_ARM_NEXT) && !d->solicited_now))
		return false;
	if (!ibvc_poke(d->peer_poke))
		return false;
	d->poked_arm = arm;
	return true;
}

/*
 * A sender asleep on its send CQ (ibvc_direct_update_wake's kind): does
 * the engine have to watch for it?  Not when the receiver's library wakes
 * it (ibvc_direct_place_received) and its app sleeps in
 * ibv_get_cq_event, which rings the engine after all if nothing comes of
 * it (channel.c); what is due already we wake it for ourselves.
 */
/*
 * Will the receiver's library wake us once it took what we wait for
 * (ibvc_direct_place_received)?  It has our channel's pair if there is one
 * (QP_DIRECT), or, a UD peer of another uid, rings the engine to wake us
 * instead; and we must sleep in ibv_get_cq_event, which rings the engine
 * after all for a receiver that takes nothing (channel.c).
 */
bool ibvc_direct_peer_wakes_us(struct ibvc_cq *cq)
{
	return cq_poke_fd(cq) >= 0 &&
	       ibvc_channel_fallback(cq->cq.channel) == 0;
}

static bool sleeper_watched(struct ibvc_qp *qp, struct ibvc_direct *d,
			    enum wake_kind kind)
{
	struct ibvc_cq *cq = to_ibvc_cq(qp->qp.send_cq);
	uint32_t arm;

	if (kind == WAKE_NONE)
		return false;
	if (!ibvc_direct_peer_wakes_us(cq))
		return true;
	/*
	 * Due already: ibv_get_cq_event fires it
	 * (ibvc_direct_fire_senders).  Not here: a poller that hands SENDs
	 * back to the ring holds the CQ's lock.
	 */
	if (kind == WAKE_AT &&
	    ibvc_direct_own_wake_due(qp, ibvc_direct_sent_taken(qp, d), &arm))
		ibvc_poke(cq_poke_fd(cq));
	return false;
}

void ibvc_direct_send_done(struct ibvc_qp *qp)
{
	struct ibvc_direct *d = qp->direct;
	bool ring = false, done;
	uint32_t since;

	if (!d || !(d->produced_now || d->done_now))
		return;
	done = d->done_now;
	d->done_now = false;
	/* nothing of this list can be taken before it is published */
	since = ibvc_direct_sent_taken(qp, d);
	if (d->produced_now) {
		d->produced_now = false;
		publish_produced(d);
		/*
		 * Store (produced) -> load (arm_seq, send_ok) needs a full
		 * fence, mirrored by the receiver arming and the daemon
		 * letting go of the pair: whoever stores last sees the
		 * other's store.
		 */
		ibvd_full_fence();
		if (!ibvd_read_once(&qp->sq.engine->direct_send_ok))
			ring = true;
		else
			ring = !wake_receiver(d);
		d->solicited_now = false;
	}
	/*
	 * A sender that sleeps on its CQ: its receiver's library wakes it
	 * once it took what it waits for, or the engine sees to it (and
	 * places the SENDs itself if the receiver does not poll for them, or
	 * sends the event of a WRITE or READ done here).
	 */
	if (sleeper_watched(qp, d, ibvc_direct_update_wake(qp, d, done, since)))
		ring = true;
	if (ring)
		ring_own(qp);
}
