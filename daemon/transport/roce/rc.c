/*
 * RC and UC requesters on the wire.
 *
 * The engine hands the transport one step of the message in front of a
 * send queue (all of it, or one chunk of a long one) and asks again until
 * it has an answer.  The first call sends the step's packets, PSNs from
 * the QP's next one, and answers RESP_PENDING; every call then also sends
 * the WQEs the client posted behind it, as far as the window goes
 * (internal.h): an RC requester keeps several messages in flight, as a
 * NIC does, and the engine still completes them one by one, in order, as
 * their answers come.  The draining thread records what the responder said
 * for each (rc_resp.c: an ACK answers every message up to its PSN) and
 * wakes the QP when the front's answer is there or something must go
 * again.  No answer by the QP's local ACK timeout: everything from the
 * first unacknowledged PSN goes again (go-back-N), and the engine spends a
 * retry of the front.  The timeout runs from the front's last sending or
 * the last answer that moved anything in flight on, whichever is later:
 * what a READ asks again for comes behind the responses to the window's
 * other READs, which may take longer than the timeout while they flow.
 * Before it, a window quiet for a while sends its last packet again, a
 * probe that draws an answer if only the tail was lost (watch_quiet).
 * A PSN sequence NAK sends everything from its PSN again at once; an RNR
 * NAK does, after the engine's RNR wait.  UC has no answers: its packets
 * go, and the step is done.
 *
 * A message's packets carry its position in it (FIRST, MIDDLE, LAST,
 * ONLY) whatever the steps: a chunk boundary is invisible on the wire.
 * A READ asks for one step's bytes per request, and when it goes again for
 * the bytes that have not come back in order yet; a gap in its responses
 * has it go again at the next call, without waiting for the timeout
 * (rc_resp.c).  An atomic is one packet; no more READs and atomics are in
 * flight than the QP's max_rd_atomic, what its responder keeps results
 * for.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/objects.h"
#include "internal.h"

uint64_t roce_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the QP's wire state ------------------------------------------------- */

/*
 * Messages qp's requester may keep in flight: what its send queue holds,
 * up to ROCE_TX_SLOTS, for RC, which alone sends ahead of the engine's
 * front (ibvd_eng_send_ahead); an XRC initiator has its front in flight,
 * UC keeps only the one it sends, an XRC target sends nothing (one slot
 * all the same: slot 0 is always there).
 */
static uint32_t tx_slots_of(const struct ibvd_qp *qp)
{
	if (qp->qp_type != IBV_QPT_RC || !qp->sq.nslots)
		return 1;
	return qp->sq.nslots < ROCE_TX_SLOTS ? qp->sq.nslots : ROCE_TX_SLOTS;
}

/* Local segments a slot keeps: as many as a WQE of qp may have. */
static uint32_t tx_segs_of(const struct ibvd_qp *qp)
{
	return qp->cap.max_send_sge ? qp->cap.max_send_sge : 1;
}

/*
 * qp enters RTR (objects lock held for writing): its wire state, in one
 * piece whose size the caller charges (*bytes).  Its path comes with the
 * AV (roce_rc_av_changed).
 */
int roce_rc_prepare(struct ibvd_qp *qp, size_t *bytes)
{
	uint32_t nslots = tx_slots_of(qp), nsegs = tx_segs_of(qp);
	size_t slot = sizeof(struct roce_txm) + nsegs * sizeof(struct eng_seg);
	size_t size = sizeof(struct roce_qp) + nslots * slot;
	struct roce_qp *w;

	if (qp->wire)
		return -EBUSY;	/* a caller's bug: RTR twice without a reset */
	/* the slots are written before they are read (take_req) */
	w = malloc(size);
	if (!w)
		return -ENOMEM;
	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->lock, NULL);
	w->tx.nslots = nslots;
	w->tx.slot_bytes = slot;
	w->tx.seg_room = nsegs;
	__atomic_store_n(&qp->wire, w, __ATOMIC_RELEASE);
	*bytes = size;
	return 0;
}

static void roce_qp_free(struct roce_qp *w)
{
	pthread_mutex_destroy(&w->lock);
	free(w);
}

/* Under the objects write lock: no packet of qp is being handled. */
void roce_rc_av_changed(struct ibvd_qp *qp)
{
	struct roce_qp *w = qp->wire;

	if (w)
		roce_qp_path(qp, &w->path);
}

void roce_rc_psns(const struct ibvd_qp *qp, uint32_t *sq_psn,
		  uint32_t *rq_psn)
{
	struct roce_qp *w = qp->wire;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	if (w->tx.started)
		*sq_psn = w->tx.next_psn;
	if (w->rx.started)
		*rq_psn = w->rx.epsn;
	pthread_mutex_unlock(&w->lock);
}

void roce_rc_forget(struct ibvd_qp *qp)
{
	if (qp->wire)
		roce_qp_free(qp->wire);
	qp->wire = NULL;
}

/* ---- packets of a step ----------------------------------------------------- */

static bool is_read(uint32_t op)
{
	return op == IBV_WR_RDMA_READ;
}

static bool is_atomic(uint32_t op)
{
	return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

static bool is_write(uint32_t op)
{
	return op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

/* PSNs a step takes: one per packet, a READ one per response packet. */
static uint32_t step_psns(const struct eng_req *req, uint32_t mtu)
{
	if (is_atomic(req->w.opcode) || !req->step)
		return 1;
	return (uint32_t)((req->step + mtu - 1) / mtu);
}

/*
 * The operation of a SEND or WRITE packet by its place in the message
 * (pkt_for adds the transport).
 */
static uint8_t data_opcode(uint32_t wr, bool first, bool last, bool uc)
{
	bool write = is_write(wr);
	bool imm = wr == IBV_WR_SEND_WITH_IMM || wr == IBV_WR_RDMA_WRITE_WITH_IMM;
	/* UC has no SEND with invalidate: it goes as a plain SEND */
	bool inv = wr == IBV_WR_SEND_WITH_INV && !uc;
	uint8_t op;

	if (first && last)
		op = write ? (imm ? ROCE_RC_RDMA_WRITE_ONLY_IMM : ROCE_RC_RDMA_WRITE_ONLY) :
		     inv ? ROCE_RC_SEND_ONLY_INV :
		     imm ? ROCE_RC_SEND_ONLY_IMM : ROCE_RC_SEND_ONLY;
	else if (first)
		op = write ? ROCE_RC_RDMA_WRITE_FIRST : ROCE_RC_SEND_FIRST;
	else if (last)
		op = write ? (imm ? ROCE_RC_RDMA_WRITE_LAST_IMM : ROCE_RC_RDMA_WRITE_LAST) :
		     inv ? ROCE_RC_SEND_LAST_INV :
		     imm ? ROCE_RC_SEND_LAST_IMM : ROCE_RC_SEND_LAST;
	else
		op = write ? ROCE_RC_RDMA_WRITE_MIDDLE : ROCE_RC_SEND_MIDDLE;
	return op;
}

/* A packet of step m's for operation op, in qp's transport. */
static void pkt_for(struct roce_pkt *p, uint8_t op, const struct ibvd_qp *qp,
		    const struct roce_txm *m, uint32_t psn)
{
	roce_pkt_init(p, (uint8_t)(roce_op_base(qp) | op));
	p->dest_qp = qp->attr.dest_qp_num & 0xFFFFFFu;
	p->psn = psn & 0xFFFFFFu;
	if (p->hdrs & ROCE_HDR_XRCETH)
		p->xrc_srqn = m->w.xrc_srqn & 0xFFFFFFu;
}

/* Does step m end its message? */
static bool txm_last(const struct roce_txm *m)
{
	return m->off + m->step == m->length;
}

/* Is the k-th of npsn packets one that asks for an ACK? */
static bool asks_ack(uint32_t k, uint32_t npsn)
{
	return k + 1 == npsn || (k + 1) % ROCE_ACK_EVERY == 0;
}

/* What packet k of a SEND or WRITE step needs besides its payload. */
struct data_pkts {
	const struct ibvd_qp *qp;
	const struct roce_txm *m;
};

/* Headers of packet k of a SEND or WRITE step (roce_send_message). */
static void data_headers(void *arg, uint32_t k, struct roce_pkt *p)
{
	const struct data_pkts *d = arg;
	const struct roce_txm *m = d->m;
	bool first = m->off == 0 && k == 0;
	bool last = txm_last(m) && k + 1 == m->npsn;

	pkt_for(p, data_opcode(m->w.opcode, first, last,
			       d->qp->qp_type == IBV_QPT_UC),
		d->qp, m, roce_psn_add(m->first_psn, k));
	if (p->hdrs & ROCE_HDR_RETH) {
		p->reth.va = m->w.remote_addr;
		p->reth.rkey = m->w.rkey;
		p->reth.len = (uint32_t)m->length;
	}
	if (p->hdrs & ROCE_HDR_IMM)
		p->imm = be32toh(m->w.imm_data);
	if (p->hdrs & ROCE_HDR_IETH)
		p->ieth = m->w.imm_data;
	p->se = last && (m->w.send_flags & IBV_SEND_SOLICITED);
	p->ack_req = asks_ack(k, d->m->npsn);
}

/*
 * Packets from..npsn - 1 of a SEND or WRITE step, from sgl (its
 * segments); 0 or -EFAULT.
 */
static int send_data(struct roce_txq *q, struct ibvd_qp *qp,
		     const struct roce_txm *m, const struct eng_sgl *sgl,
		     uint32_t from, uint32_t mtu)
{
	struct data_pkts d = { .qp = qp, .m = m };

	return roce_send_message(q, sgl, m->off, m->step, mtu, from, m->npsn,
				 data_headers, &d);
}

/*
 * A READ request for what has not arrived yet: the whole step at first,
 * its remainder when it goes again (the responses in order so far are
 * kept, the rest is asked for with the PSN it takes in the step).
 */
static void send_read_req(struct roce_txq *q, struct ibvd_qp *qp,
			  const struct roce_txm *m, uint32_t mtu)
{
	struct roce_pkt p;

	pkt_for(&p, ROCE_RC_RDMA_READ_REQUEST, qp, m,
		roce_psn_add(m->first_psn, (uint32_t)(m->got / mtu)));
	p.reth.va = m->w.remote_addr + m->off + m->got;
	p.reth.rkey = m->w.rkey;
	p.reth.len = (uint32_t)(m->step - m->got);
	p.ack_req = true;
	roce_txq_add(q, &p, NULL, 0);
}

static void send_atomic(struct roce_txq *q, struct ibvd_qp *qp,
			const struct roce_txm *m)
{
	struct roce_pkt p;

	pkt_for(&p, m->w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ?
		ROCE_RC_COMPARE_SWAP : ROCE_RC_FETCH_ADD, qp, m, m->first_psn);
	p.atomic.va = m->w.remote_addr;
	p.atomic.rkey = m->w.rkey;
	if (m->w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
		p.atomic.compare = m->w.compare_add;
		p.atomic.swap_add = m->w.swap;
	} else {
		p.atomic.swap_add = m->w.compare_add;
	}
	p.ack_req = true;
	roce_txq_add(q, &p, NULL, 0);
}

/*
 * Put step m from PSN from on into q; 0 or -EFAULT (our own memory
 * failed).
 */
static int transmit(struct roce_txq *q, struct ibvd_qp *qp,
		    struct roce_txm *m, uint32_t from)
{
	uint32_t mtu = roce_path_mtu(qp);
	int32_t skip = roce_psn_diff(from, m->first_psn);

	struct eng_sgl sgl;

	m->sent_ns = roce_now_ns();
	if (is_read(m->w.opcode)) {
		m->read_again = false;
		m->read_from = m->got;
		send_read_req(q, qp, m, mtu);
		return 0;
	}
	if (is_atomic(m->w.opcode)) {
		send_atomic(q, qp, m);
		return 0;
	}
	/* a retransmission reads what the keys still name, or fails */
	roce_txm_sgl(m, &sgl);
	if (!ibvd_eng_sgl_current(&sgl, qp->pd, false))
		return -EFAULT;
	return send_data(q, qp, m, &sgl, skip > 0 ? (uint32_t)skip : 0, mtu);
}

/* ---- the window -------------------------------------------------------------- */

/*
 * Step req into slot m, as the engine gave it: false if its segments do
 * not fit (a WQE has no more than the QP's max_send_sge).
 */
static bool take_req(const struct roce_qp *w, struct roce_txm *m,
		     const struct eng_req *req)
{
	if (req->local.n > w->tx.seg_room)
		return false;
	m->seg = (struct eng_seg *)(m + 1);
	m->w = req->w;
	m->length = req->length;
	m->off = req->off;
	m->step = req->step;
	m->nseg = req->local.n;
	m->total = req->local.total;
	memcpy(m->seg, req->local.seg, m->nseg * sizeof(m->seg[0]));
	return true;
}

/*
 * Keep req (WQE head) in m for retransmissions.  Its inline data lives in
 * the engine's scratch buffer only for this call: a retransmission reads
 * it where the WQE's slot holds it (ibvd_eng_send_inline).  Memory of our
 * own is inline data only: anything else in req is not kept (false).  An
 * MR's mapping may be gone by the next retransmission (the objects lock
 * is released between turns): kept segments reach memory through fd only,
 * and only while their MRs are still there (ibvd_eng_sgl_current).
 */
static bool keep_req(const struct ibvd_qp *qp, struct roce_qp *w,
		     struct roce_txm *m, uint32_t head,
		     const struct eng_req *req)
{
	unsigned int i;

	if (!take_req(w, m, req))
		return false;
	for (i = 0; i < m->nseg; i++) {
		struct eng_seg *s = &m->seg[i];

		s->map = NULL;
		if (s->fd >= 0)
			continue;
		if (!(m->w.send_flags & IBV_SEND_INLINE) ||
		    (m->w.send_flags & IBVD_SEND_STAGED) || m->nseg != 1 ||
		    s->len != m->w.inline_len ||
		    s->len > qp->sq.stride - IBVD_SEND_WQE_HDR)
			return false;
		s->addr = (uint64_t)(uintptr_t)ibvd_eng_send_inline(qp, head);
	}
	return true;
}

static bool reads_back(uint32_t op)
{
	return is_read(op) || is_atomic(op);
}

/* Give up everything in flight (the engine's front is not ours any more). */
static void forget_all(struct roce_qp *w)
{
	w->tx.n = 0;
	w->tx.rd_atomic = 0;
	w->tx.resend = false;
	w->tx.rnr_wait = false;
	w->tx.acked_past = false;
	w->tx.una_psn = w->tx.next_psn;
}

/* The step in front is done: the next one is the engine's front. */
static void pop_front(struct roce_qp *w)
{
	struct roce_txm *m = roce_txm_at(w, 0);
	uint32_t end = roce_psn_add(m->first_psn, m->npsn);

	if (reads_back(m->w.opcode))
		w->tx.rd_atomic--;
	if (roce_psn_diff(end, w->tx.una_psn) > 0)
		w->tx.una_psn = end;
	w->tx.first = (w->tx.first + 1) % w->tx.nslots;
	w->tx.n--;
}

/* READs and atomics a requester may have in flight (max_rd_atomic). */
static uint32_t rd_atomic_max(const struct ibvd_qp *qp)
{
	return qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1;
}

/* May req go now, behind what is in flight? */
static bool fits(const struct ibvd_qp *qp, const struct roce_qp *w,
		 const struct eng_req *req, uint32_t npsn)
{
	if (!w->tx.n)
		return true;
	if (w->tx.n >= w->tx.nslots ||
	    roce_psn_diff(roce_psn_add(w->tx.next_psn, npsn), w->tx.una_psn) >
	    (int32_t)ROCE_TX_WINDOW)
		return false;
	return !reads_back(req->w.opcode) || w->tx.rd_atomic < rd_atomic_max(qp);
}

/*
 * Put req (WQE head) in flight behind the others and send it: 0,
 * -EAGAIN if it must wait for room, -EFAULT if our own memory failed.
 */
static int launch(struct roce_txq *q, struct ibvd_qp *qp, struct roce_qp *w,
		  uint32_t head, const struct eng_req *req)
{
	uint32_t npsn = step_psns(req, roce_path_mtu(qp));
	struct roce_txm *m = roce_txm_at(w, w->tx.n);

	if (!fits(qp, w, req, npsn) || !keep_req(qp, w, m, head, req))
		return -EAGAIN;
	if (!w->tx.started) {
		w->tx.next_psn = qp->attr.sq_psn & 0xFFFFFFu;
		w->tx.una_psn = w->tx.next_psn;
		w->tx.started = true;
	}
	m->head = head;
	m->first_psn = w->tx.next_psn;
	m->npsn = npsn;
	m->answer = -1;
	m->got = 0;
	m->read_again = m->read_gap = false;
	if (transmit(q, qp, m, m->first_psn) < 0)
		return -EFAULT;
	w->tx.next_psn = roce_psn_add(w->tx.next_psn, npsn);
	if (reads_back(req->w.opcode))
		w->tx.rd_atomic++;
	w->tx.n++;
	return 0;
}

/*
 * Send the WQEs posted behind the last one in flight, while the window
 * has room.  A chunked message's steps stay the engine's, one at a time.
 */
static void send_ahead(struct ibvd_engine *eng, struct roce_txq *q,
		       struct ibvd_qp *qp, struct roce_qp *w)
{
	struct roce_txm *last;
	struct eng_req req;

	while (w->tx.n && w->tx.n < w->tx.nslots) {
		last = roce_txm_at(w, w->tx.n - 1);
		if (!txm_last(last) ||
		    !ibvd_eng_send_ahead(eng, qp, last->head + 1, &req) ||
		    launch(q, qp, w, last->head + 1, &req) < 0)
			return;
	}
}

/*
 * Step m went again from its PSN skip on: its packets count as sent, as
 * rxe counts every packet it puts on the wire.  (The engine counted each
 * step's packets once, when it first went; a timeout's resend it counts
 * again as the front's next try.)
 */
static void count_again(const struct ibvd_qp *qp, const struct roce_txm *m,
			uint32_t skip)
{
	ibvd_eng_port_count(qp, IBVD_PC_SENT_PKTS,
			    reads_back(m->w.opcode) ? 1 : m->npsn - skip);
}

/* The payload bytes of step m that go again from its PSN skip on. */
static uint64_t sent_again(const struct roce_txm *m, uint32_t skip,
			   uint32_t mtu)
{
	uint64_t before = (uint64_t)skip * mtu;

	if (reads_back(m->w.opcode))
		return 0;	/* a request: the bytes come back to us */
	return m->step > before ? m->step - before : 0;
}

/*
 * Send everything in flight again from PSN from on (go-back-N).  What
 * goes again is charged to the sender's turn and tenant, as what went
 * first was: a peer's NAKs cannot have it send more than it pays for.
 * counted: the engine counts this sending as its front's next try.
 */
static int resend_from(struct ibvd_engine *eng, struct roce_txq *q,
		       struct ibvd_qp *qp, struct roce_qp *w, uint32_t from,
		       bool counted)
{
	uint32_t mtu = roce_path_mtu(qp);
	uint64_t bytes = 0;
	uint32_t i;
	int ret = 0;

	for (i = 0; i < w->tx.n; i++) {
		struct roce_txm *m = roce_txm_at(w, i);
		int32_t d = roce_psn_diff(from, m->first_psn);

		/* answered already, or wholly before the PSN */
		if (m->answer >= 0 || d >= (int32_t)m->npsn)
			continue;
		if (transmit(q, qp, m, d > 0 ? from : m->first_psn) < 0) {
			ret = -EFAULT;
			break;
		}
		if (!counted)
			count_again(qp, m, d > 0 ? (uint32_t)d : 0);
		bytes += sent_again(m, d > 0 ? (uint32_t)d : 0, mtu);
	}
	ibvd_eng_charge_copies(eng, bytes);
	return ret;
}

/*
 * The READs in flight whose responses had a gap (rc_resp.c) ask again for
 * their remainder, and only they: what follows them needs nothing.
 */
static void read_again(struct roce_txq *q, struct ibvd_qp *qp,
		       struct roce_qp *w)
{
	uint32_t i;

	for (i = 0; i < w->tx.n; i++) {
		struct roce_txm *m = roce_txm_at(w, i);

		/* a READ's transmit reads no memory of ours: it cannot fail */
		if (m->read_again && m->answer < 0) {
			(void)transmit(q, qp, m, m->first_psn);
			count_again(qp, m, 0);
		}
	}
}

/* ---- a quiet window ---------------------------------------------------------- */

/*
 * Where the front's ACK timeout runs from: its last sending or the last
 * answer that moved anything in flight on, whichever is later.
 */
static uint64_t front_since(struct roce_qp *w)
{
	const struct roce_txm *front = roce_txm_at(w, 0);

	return front->sent_ns > w->tx.heard_ns ? front->sent_ns : w->tx.heard_ns;
}

/*
 * A lost packet in the middle of the window is found at once: the
 * responder NAKs the gap when the packets behind it come.  A lost last
 * packet (or the ACK of it) has nothing behind it, and only the local ACK
 * timeout would find it: 67 ms at perftest's timeout, half a second at
 * rdma_cm's, for one packet.  So when the window has been quiet a
 * sixteenth of the timeout (not under a millisecond: a busy host's peer
 * may take that long; a timeout of 2 ms or less is its own probe), its
 * last unanswered packet goes again, once per quiet: the responder ACKs
 * it if it had it (a duplicate), takes it if that was the lost one, or
 * NAKs the gap before it (unless it NAKed that gap already: then the
 * timeout it is).  Any of these answers moves things on without a
 * timeout, and a probe spends no retry and leaves the timeout where it
 * was.  One that was not needed costs a packet and an ACK, and is paid
 * for as every packet sent again is.
 */
#define ROCE_PROBE_MIN_NS	1000000ull

/* The quiet a probe waits for; 0: none (the timeout is as short). */
static uint64_t probe_delay(uint64_t timeout_ns)
{
	uint64_t delay = timeout_ns / 16;

	if (delay < ROCE_PROBE_MIN_NS)
		delay = ROCE_PROBE_MIN_NS;
	return delay < timeout_ns / 2 ? delay : 0;
}

/*
 * Since when the window has been quiet: the last sending of anything in
 * it, or the last answer that moved it on; and its last unanswered step
 * (NULL: none).
 */
static uint64_t quiet_since(struct roce_qp *w, struct roce_txm **tail)
{
	uint64_t since = w->tx.heard_ns;
	uint32_t i;

	*tail = NULL;
	for (i = 0; i < w->tx.n; i++) {
		struct roce_txm *m = roce_txm_at(w, i);

		if (m->sent_ns > since)
			since = m->sent_ns;
		if (m->answer < 0)
			*tail = m;
	}
	return since;
}

/*
 * Send tail's last packet (a READ: its request for what has not come).
 * A probe leaves the step's sending time as it was, sent or not: the
 * timeout runs on, and reports memory of ours that is gone.
 */
static void probe(struct ibvd_engine *eng, struct roce_txq *q,
		  struct ibvd_qp *qp, struct roce_txm *tail)
{
	uint64_t sent_ns = tail->sent_ns;
	uint32_t skip = tail->npsn - 1;
	int ret;

	ret = transmit(q, qp, tail, roce_psn_add(tail->first_psn, skip));
	tail->sent_ns = sent_ns;
	if (ret < 0)
		return;
	count_again(qp, tail, skip);
	ibvd_eng_charge_copies(eng, sent_again(tail, skip, roce_path_mtu(qp)));
	ibvd_eng_port_count(qp, IBVD_PC_COMPLETER_RETRY_ERR, 1);
}

/*
 * The front's answer is pending: probe the window's tail if it has been
 * quiet long enough, and have the engine ask again at the probe's time or
 * the front's timeout, whichever comes first.
 */
static void watch_quiet(struct ibvd_engine *eng, struct roce_txq *q,
			struct ibvd_qp *qp, struct roce_qp *w)
{
	uint64_t timeout = ibvd_eng_timeout_ns(qp->attr.timeout);
	uint64_t delay = probe_delay(timeout), quiet, due;
	struct roce_txm *tail;

	if (!w->tx.n)
		return;
	ibvd_eng_ask_again_by(eng, front_since(w) + timeout);
	quiet = quiet_since(w, &tail);
	/* a READ that asked again past a gap waits for the timeout (rc_resp.c) */
	if (!delay || !tail || w->tx.probed_quiet == quiet || tail->read_gap)
		return;
	due = quiet + delay;
	if (roce_now_ns() < due) {
		ibvd_eng_ask_again_by(eng, due);
		return;
	}
	w->tx.probed_quiet = quiet;
	probe(eng, q, qp, tail);
}

/* ---- one call of the engine ------------------------------------------------- */

static bool is_front(struct roce_qp *w, const struct ibvd_qp *qp,
		     const struct eng_req *req)
{
	const struct roce_txm *m = roce_txm_at(w, 0);

	return w->tx.n && m->head == qp->sq_head && m->off == req->off;
}

/* The answer recorded for the step in front. */
static enum eng_resp take_answer(struct roce_qp *w, struct roce_txm *m,
				 uint8_t *rnr_timer)
{
	enum eng_resp r = (enum eng_resp)m->answer;

	m->answer = -1;
	if (r == RESP_RNR) {
		/* after the engine's wait, everything from its PSN goes again */
		*rnr_timer = w->tx.rnr_timer;
		w->tx.resend = true;
		return r;
	}
	pop_front(w);
	/* its completion is the engine's to write now: held ones wait */
	w->tx.retiring = true;
	return r;
}

/* UC: the packets are the whole story; nothing is kept. */
static enum eng_resp uc_send(struct roce_txq *q, struct ibvd_qp *qp,
			     struct roce_qp *w, const struct eng_req *req)
{
	struct roce_txm *m = roce_txm_at(w, 0);

	if (!w->tx.started) {
		w->tx.next_psn = qp->attr.sq_psn & 0xFFFFFFu;
		w->tx.started = true;
	}
	if (!take_req(w, m, req))
		return RESP_LOCAL_FAULT;
	m->first_psn = w->tx.next_psn;
	m->npsn = step_psns(req, roce_path_mtu(qp));
	w->tx.next_psn = roce_psn_add(w->tx.next_psn, m->npsn);
	return transmit(q, qp, m, m->first_psn) < 0 ? RESP_LOCAL_FAULT : RESP_OK;
}

static enum eng_resp front_step(struct ibvd_engine *eng, struct roce_txq *q,
				struct ibvd_qp *qp, struct roce_qp *w,
				const struct eng_req *req, uint8_t *rnr_timer)
{
	struct roce_txm *m;
	bool timed_out;
	uint32_t from, i;

	if (!is_front(w, qp, req)) {
		forget_all(w);
		return launch(q, qp, w, qp->sq_head, req) < 0 ?
		       RESP_LOCAL_FAULT : RESP_PENDING;
	}
	m = roce_txm_at(w, 0);
	if (m->answer >= 0)
		return take_answer(w, m, rnr_timer);
	/* a NAK's resend goes at once and spends nothing; a timeout a retry */
	timed_out = !w->tx.resend && roce_now_ns() - front_since(w) >=
				     ibvd_eng_timeout_ns(qp->attr.timeout);
	if (!w->tx.resend && !timed_out)
		return RESP_PENDING;
	/*
	 * The retries count timeouts in a row, as rxe counts them: an
	 * answer that moved anything on since the last timeout gives the
	 * front its whole budget again.  A long message over a lossy path
	 * may time out more often than retry_cnt and still be moving.
	 */
	if (timed_out) {
		if (w->tx.heard_ns != w->tx.heard_at_timeout_ns)
			ibvd_eng_retry_refill(qp);
		w->tx.heard_at_timeout_ns = w->tx.heard_ns;
	}
	if (timed_out && ibvd_eng_retry_spent(qp)) {
		/*
		 * The engine fails the front now: nothing goes again, and
		 * no late response of the window lands once its error
		 * completion is written (the QP leaves RTS only after).
		 */
		ibvd_eng_port_count(qp, IBVD_PC_COMPLETER_RETRY_ERR, 1);
		forget_all(w);
		return RESP_NO_ACK;
	}
	from = w->tx.resend ? w->tx.resend_psn : w->tx.una_psn;
	w->tx.resend = false;
	w->tx.rnr_wait = false;
	if (timed_out) {
		ibvd_eng_port_count(qp, IBVD_PC_COMPLETER_RETRY_ERR, 1);
		/* a READ's gap may ask again once more */
		for (i = 0; i < w->tx.n; i++)
			roce_txm_at(w, i)->read_gap = false;
	}
	if (resend_from(eng, q, qp, w, from, timed_out) < 0)
		return RESP_LOCAL_FAULT;
	return timed_out ? RESP_NO_ACK : RESP_PENDING;
}

/* An answer in front that the engine has still to take. */
static bool front_answered(struct roce_qp *w)
{
	return w->tx.n && roce_txm_at(w, 0)->answer >= 0 &&
	       roce_txm_at(w, 0)->answer != RESP_RNR;
}

void roce_rc_turn_done(struct ibvd_qp *qp)
{
	struct roce_qp *w = __atomic_load_n(&qp->wire, __ATOMIC_ACQUIRE);
	uint32_t state = eng_qp_state(qp);

	/*
	 * Only this thread sets retiring, and the draining thread holds a
	 * completion only while it is set or with the QP rung: no lock
	 * needed to see there is nothing to do, the common case.
	 */
	if (!w || (!w->tx.retiring &&
		   !__atomic_load_n(&w->rx.nheld, __ATOMIC_RELAXED)))
		return;
	pthread_mutex_lock(&w->lock);
	w->tx.retiring = false;
	if (!front_answered(w) ||
	    (state != IBV_QPS_RTS && state != IBV_QPS_SQD))
		roce_rc_held_flush(qp, w);
	pthread_mutex_unlock(&w->lock);
}

enum eng_resp roce_rc_send(struct ibvd_engine *eng, struct ibvd_qp *src,
			   const struct eng_req *req, uint8_t *rnr_timer)
{
	struct roce_dev *rd = src->ctx->dev->transport_priv;
	struct roce_qp *w = roce_qp_of(src);
	struct roce_txq q;
	enum eng_resp r;

	if (!w)
		return RESP_NO_ACK;	/* not made at RTR: never here */
	pthread_mutex_lock(&w->lock);
	/* every packet of this call, in PSN order, in as few system calls */
	roce_txq_init(&q, rd, &w->path);
	if (src->qp_type == IBV_QPT_UC) {
		r = uc_send(&q, src, w, req);
	} else {
		r = front_step(eng, &q, src, w, req, rnr_timer);
		if (r == RESP_PENDING) {
			read_again(&q, src, w);
			send_ahead(eng, &q, src, w);
		}
		/* what a timeout sent again may lose its tail too */
		if (r == RESP_PENDING || r == RESP_NO_ACK)
			watch_quiet(eng, &q, src, w);
	}
	roce_txq_flush(&q);
	pthread_mutex_unlock(&w->lock);
	return r;
}
