/*
 * RC and UC requesters on the wire.
 *
 * The engine hands the transport one step of the message in front of a
 * send queue (all of it, or one chunk of a long one) and asks again until
 * it has an answer.  The first call sends the step's packets, PSNs from
 * the QP's next one, the last of them asking for an ACK, and answers
 * RESP_PENDING; the receive thread records what the responder said
 * (rc_resp.c) and wakes the QP; the next call returns it.  No answer by
 * the QP's local ACK timeout: the step goes again from its first
 * unacknowledged PSN (go-back-N), and the engine spends a retry.  An RNR
 * NAK sends it again after the engine's RNR wait.  UC has no answers: its
 * packets go, and the step is done.
 *
 * A message's packets carry its position in it (FIRST, MIDDLE, LAST,
 * ONLY) whatever the steps: a chunk boundary is invisible on the wire.
 * A READ asks for one step's bytes per request; an atomic is one packet.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/objects.h"
#include "internal.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the QP's wire state ------------------------------------------------- */

static struct roce_qp *roce_qp_new(struct ibvd_qp *qp)
{
	struct roce_qp *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	w->tx.local = calloc(1, sizeof(*w->tx.local));
	w->rx.wqe = calloc(1, sizeof(*w->rx.wqe));
	if (!w->tx.local || !w->rx.wqe) {
		free(w->tx.local);
		free(w->rx.wqe);
		free(w);
		return NULL;
	}
	pthread_mutex_init(&w->lock, NULL);
	roce_qp_path(qp, &w->path);
	w->tx.answer = -1;
	return w;
}

static void roce_qp_free(struct roce_qp *w)
{
	pthread_mutex_destroy(&w->lock);
	free(w->tx.local);
	free(w->rx.wqe);
	free(w);
}

struct roce_qp *roce_qp_of(struct ibvd_qp *qp)
{
	struct roce_qp *w = __atomic_load_n(&qp->wire, __ATOMIC_ACQUIRE);
	struct roce_qp *expected = NULL;

	if (w)
		return w;
	/* The serving thread and the receive thread may both be first. */
	w = roce_qp_new(qp);
	if (!w)
		return NULL;
	if (!__atomic_compare_exchange_n((struct roce_qp **)&qp->wire, &expected,
					 w, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		roce_qp_free(w);
		return expected;
	}
	return w;
}

void roce_rc_forget(struct ibvd_qp *qp)
{
	if (qp->wire)
		roce_qp_free(qp->wire);
	qp->wire = NULL;
}

/* ---- packets of a step ----------------------------------------------------- */

static uint32_t path_mtu(const struct ibvd_qp *qp)
{
	uint32_t mtu = qp->attr.path_mtu;

	/* enum ibv_mtu 1..5 is 256..4096 bytes */
	return 128u << (mtu >= 1 && mtu <= 5 ? mtu : 1);
}

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

/* The opcode of a SEND or WRITE packet by its place in the message. */
static uint8_t data_opcode(uint32_t wr, bool first, bool last, bool uc)
{
	uint8_t base = uc ? ROCE_OP_UC : ROCE_OP_RC;
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
	/* UC speaks the SEND and WRITE opcodes of RC, 0x20 up (no INV) */
	return (uint8_t)(base | op);
}

static void pkt_for(struct roce_pkt *p, uint8_t opcode, const struct ibvd_qp *qp,
		    uint32_t psn)
{
	roce_pkt_init(p, opcode);
	p->dest_qp = qp->attr.dest_qp_num & 0xFFFFFFu;
	p->psn = psn & 0xFFFFFFu;
}

/* Packet k of a SEND or WRITE step. */
static int send_data_pkt(struct roce_dev *rd, struct ibvd_qp *qp,
			 struct roce_qp *w, const struct eng_req *req,
			 uint32_t k, uint32_t mtu)
{
	uint64_t at = (uint64_t)k * mtu;
	uint32_t len = (uint32_t)(req->step - at < mtu ? req->step - at : mtu);
	bool first = req->off == 0 && k == 0;
	bool last = eng_req_last(req) && k + 1 == w->tx.npsn;
	struct roce_pkt p;

	pkt_for(&p, data_opcode(req->w.opcode, first, last,
				qp->qp_type == IBV_QPT_UC),
		qp, roce_psn_add(w->tx.first_psn, k));
	if (p.hdrs & ROCE_HDR_RETH) {
		p.reth.va = req->w.remote_addr;
		p.reth.rkey = req->w.rkey;
		p.reth.len = (uint32_t)req->length;
	}
	if (p.hdrs & ROCE_HDR_IMM)
		p.imm = be32toh(req->w.imm_data);
	if (p.hdrs & ROCE_HDR_IETH)
		p.ieth = req->w.imm_data;
	p.se = last && (req->w.send_flags & IBV_SEND_SOLICITED);
	/* the step's last packet asks for the ACK that ends the wait */
	p.ack_req = k + 1 == w->tx.npsn;
	return roce_send_sgl(rd, &w->path, &p, &req->local, at, len);
}

static void send_read_req(struct roce_dev *rd, struct ibvd_qp *qp,
			  struct roce_qp *w, const struct eng_req *req)
{
	struct roce_pkt p;

	pkt_for(&p, ROCE_RC_RDMA_READ_REQUEST, qp, w->tx.first_psn);
	p.reth.va = req->w.remote_addr + req->off;
	p.reth.rkey = req->w.rkey;
	p.reth.len = (uint32_t)req->step;
	p.ack_req = true;
	roce_send_pkt(rd, &w->path, &p, NULL, 0);
}

static void send_atomic(struct roce_dev *rd, struct ibvd_qp *qp,
			struct roce_qp *w, const struct eng_req *req)
{
	struct roce_pkt p;

	pkt_for(&p, req->w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ?
		ROCE_RC_COMPARE_SWAP : ROCE_RC_FETCH_ADD, qp, w->tx.first_psn);
	p.atomic.va = req->w.remote_addr;
	p.atomic.rkey = req->w.rkey;
	if (req->w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
		p.atomic.compare = req->w.compare_add;
		p.atomic.swap_add = req->w.swap;
	} else {
		p.atomic.swap_add = req->w.compare_add;
	}
	p.ack_req = true;
	roce_send_pkt(rd, &w->path, &p, NULL, 0);
}

/* Send the step from PSN from on; 0 or -EFAULT (our own memory failed). */
static int transmit(struct roce_dev *rd, struct ibvd_qp *qp, struct roce_qp *w,
		    const struct eng_req *req, uint32_t from)
{
	uint32_t mtu = path_mtu(qp), k;
	int32_t skip = roce_psn_diff(from, w->tx.first_psn);

	w->tx.sent_ns = now_ns();
	if (is_read(req->w.opcode)) {
		/* responses come again from the first */
		w->tx.got = 0;
		send_read_req(rd, qp, w, req);
		return 0;
	}
	if (is_atomic(req->w.opcode)) {
		send_atomic(rd, qp, w, req);
		return 0;
	}
	for (k = skip > 0 ? (uint32_t)skip : 0; k < w->tx.npsn; k++)
		if (send_data_pkt(rd, qp, w, req, k, mtu) < 0)
			return -EFAULT;
	return 0;
}

/* ---- one call of the engine ------------------------------------------------- */

static bool same_step(const struct roce_qp *w, const struct ibvd_qp *qp,
		      const struct eng_req *req)
{
	return w->tx.active && w->tx.head == qp->sq_head && w->tx.off == req->off;
}

/* A new step: PSNs, where READ and atomic data go, and out it goes. */
static enum eng_resp start_step(struct roce_dev *rd, struct ibvd_qp *qp,
				struct roce_qp *w, const struct eng_req *req)
{
	if (!w->tx.started) {
		w->tx.next_psn = qp->attr.sq_psn & 0xFFFFFFu;
		w->tx.started = true;
	}
	w->tx.active = true;
	w->tx.head = qp->sq_head;
	w->tx.off = req->off;
	w->tx.first_psn = w->tx.next_psn;
	w->tx.npsn = step_psns(req, path_mtu(qp));
	w->tx.next_psn = roce_psn_add(w->tx.next_psn, w->tx.npsn);
	w->tx.answer = -1;
	w->tx.resend = false;
	w->tx.resend_psn = w->tx.first_psn;
	w->tx.opcode = req->w.opcode;
	w->tx.length = req->step;
	w->tx.got = 0;
	*w->tx.local = req->local;
	if (transmit(rd, qp, w, req, w->tx.first_psn) < 0) {
		w->tx.active = false;
		return RESP_LOCAL_FAULT;
	}
	/* UC: nothing comes back, the packets are the whole story */
	if (qp->qp_type == IBV_QPT_UC) {
		w->tx.active = false;
		return RESP_OK;
	}
	return RESP_PENDING;
}

/* The answer recorded for the step in flight, or RESP_PENDING. */
static enum eng_resp take_answer(struct roce_qp *w, uint8_t *rnr_timer)
{
	enum eng_resp r = (enum eng_resp)w->tx.answer;

	w->tx.answer = -1;
	switch (r) {
	case RESP_RNR:
		*rnr_timer = w->tx.rnr_timer;
		w->tx.resend = true;
		return r;
	case RESP_NO_ACK:
		/* a PSN NAK: go again at once from where the responder is */
		w->tx.resend = true;
		return RESP_PENDING;
	default:
		w->tx.active = false;
		return r;
	}
}

enum eng_resp roce_rc_send(struct ibvd_engine *eng, struct ibvd_qp *src,
			   const struct eng_req *req, uint8_t *rnr_timer)
{
	struct roce_dev *rd = src->ctx->dev->transport_priv;
	struct roce_qp *w = roce_qp_of(src);
	enum eng_resp r = RESP_PENDING;
	bool timed_out;

	(void)eng;
	if (!w)
		return RESP_NO_ACK;	/* no memory: as if nobody answered */
	pthread_mutex_lock(&w->lock);
	if (!same_step(w, src, req)) {
		r = start_step(rd, src, w, req);
		goto out;
	}
	if (w->tx.answer >= 0) {
		r = take_answer(w, rnr_timer);
		if (r != RESP_PENDING || !w->tx.resend)
			goto out;
	}
	/* a NAK's resend goes at once and spends nothing; a timeout a retry */
	timed_out = !w->tx.resend &&
		    now_ns() - w->tx.sent_ns >= ibvd_eng_timeout_ns(src->attr.timeout);
	if (w->tx.resend || timed_out) {
		w->tx.resend = false;
		if (timed_out)
			ibvd_eng_port_count(src, IBVD_PC_COMPLETER_RETRY_ERR, 1);
		if (transmit(rd, src, w, req, w->tx.resend_psn) < 0) {
			w->tx.active = false;
			r = RESP_LOCAL_FAULT;
			goto out;
		}
		r = timed_out ? RESP_NO_ACK : RESP_PENDING;
	}
out:
	pthread_mutex_unlock(&w->lock);
	return r;
}
