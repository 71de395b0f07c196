/*
 * RC and UC on the receive thread: requests arriving at a responder QP,
 * and the answers arriving back at a requester.
 *
 * Responder, as rxe is one (roce-wire.md §4): a packet with the expected
 * PSN is executed; a later one is a gap: RC NAKs it once (PSN sequence
 * error, carrying the expected PSN) and drops the rest until the expected
 * one comes, UC forgets the message it was in; an earlier one is a
 * duplicate: a SEND or WRITE is ACKed again without being executed, a READ
 * or atomic is answered again from the resources kept for it.  An ACK goes
 * out for every packet that asks for one.  A SEND with no receive WQE gets
 * an RNR NAK and moves nothing; a bad key or range a remote access NAK, and
 * the responder QP goes to ERR as the verbs say.
 *
 * Requester side: an ACK up to the step's last PSN, a READ's last response
 * or an atomic's ACK answers the step in flight (rc.c); a NAK answers it
 * with its error; READ data and atomic results land in the requester's
 * buffers as they arrive.
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "core/objects.h"
#include "internal.h"

static bool is_read_or_atomic(uint32_t wr)
{
	return wr == IBV_WR_RDMA_READ || wr == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       wr == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* ---- sending answers ---------------------------------------------------- */

/* The responder's path back: the requester's address, our own. */
static void reply_path(const struct roce_qp *w, const struct roce_ip *ip,
		       struct roce_path *path)
{
	*path = w->path;
	memcpy(path->src, ip->dst, 4);
	memcpy(path->dst, ip->src, 4);
}

static void send_aeth(struct roce_dev *rd, struct ibvd_qp *qp,
		      struct roce_qp *w, const struct roce_ip *ip,
		      uint32_t psn, uint8_t syndrome)
{
	struct roce_path path;
	struct roce_pkt p;

	reply_path(w, ip, &path);
	roce_pkt_init(&p, ROCE_RC_ACKNOWLEDGE);
	p.dest_qp = qp->attr.dest_qp_num & 0xFFFFFFu;
	p.psn = psn & 0xFFFFFFu;
	p.aeth.syndrome = syndrome;
	p.aeth.msn = w->rx.msn & 0xFFFFFFu;
	roce_send_pkt(rd, &path, &p, NULL, 0);
}

/* ---- responder: SEND ----------------------------------------------------- */

static bool op_first(uint8_t op)
{
	op &= 0x1F;
	return op == ROCE_RC_SEND_FIRST || op == ROCE_RC_SEND_ONLY ||
	       op == ROCE_RC_SEND_ONLY_IMM || op == ROCE_RC_SEND_ONLY_INV ||
	       op == ROCE_RC_RDMA_WRITE_FIRST || op == ROCE_RC_RDMA_WRITE_ONLY ||
	       op == ROCE_RC_RDMA_WRITE_ONLY_IMM;
}

static bool op_last(uint8_t op)
{
	op &= 0x1F;
	return op != ROCE_RC_SEND_FIRST && op != ROCE_RC_SEND_MIDDLE &&
	       op != ROCE_RC_RDMA_WRITE_FIRST && op != ROCE_RC_RDMA_WRITE_MIDDLE;
}

static bool op_send(uint8_t op)
{
	op &= 0x1F;
	return op <= ROCE_RC_SEND_ONLY_IMM || op == ROCE_RC_SEND_LAST_INV ||
	       op == ROCE_RC_SEND_ONLY_INV;
}

/* What the responder makes of a request, for the requester. */
enum outcome {
	OUT_OK,
	OUT_RNR,			/* no receive WQE */
	OUT_INV,			/* invalid request: NAK 0x61 */
	OUT_ACCESS,			/* remote access: NAK 0x62 */
	OUT_OP,				/* remote operation: NAK 0x63 */
	OUT_DROP,			/* say nothing (UC, or a broken RQ) */
};

static void send_complete(struct ibvd_qp *qp, struct roce_qp *w,
			  const struct roce_pkt *p, uint64_t wr_id)
{
	struct eng_rcv_done d = {
		.opcode = IBV_WC_RECV,
		.byte_len = (uint32_t)w->rx.done,
		.src_qp = qp->attr.dest_qp_num,
		.solicited = p->se,
	};

	if (p->hdrs & ROCE_HDR_IMM) {
		d.wc_flags |= IBV_WC_WITH_IMM;
		d.imm = htobe32(p->imm);
	}
	if (p->hdrs & ROCE_HDR_IETH) {
		d.wc_flags |= IBV_WC_WITH_INV;
		d.imm = p->ieth;
	}
	ibvd_eng_recv_done(qp, wr_id, &d);
}

/*
 * Under the RQ's lock: the WQE this packet fills.  An RQ's stays posted
 * until the message's last packet (a flush then still finds it); an SRQ's
 * is taken at the first, as other QPs share the queue.
 */
static int send_wqe(struct ibvd_qp *qp, struct roce_qp *w, struct eng_rq *rq,
		    bool first, struct eng_recv *rwqe)
{
	int ret;

	if (rq->srq && !first) {
		if (!w->rx.wqe_held)
			return 0;
		*rwqe = *w->rx.wqe;
		return 1;
	}
	ret = ibvd_eng_rq_peek(rq, rwqe);
	if (ret < 0) {
		ibvd_eng_rq_broken(qp, rq);
		return ret;
	}
	if (ret > 0 && rq->srq) {
		ibvd_eng_rq_consume(rq);
		*w->rx.wqe = *rwqe;
		w->rx.wqe_held = true;
	}
	return ret;
}

static enum outcome rx_send(struct ibvd_qp *qp, struct roce_qp *w,
			    const struct roce_pkt *p)
{
	bool first = op_first(p->opcode), last = op_last(p->opcode);
	enum outcome out = OUT_OK;
	struct eng_recv rwqe;
	struct eng_rq rq;
	int ret;

	if (first != !w->rx.in_msg)
		return OUT_INV;		/* FIRST inside a message, or MIDDLE out */
	ibvd_eng_rq_of(qp, &rq);
	pthread_mutex_lock(rq.lock);
	ret = send_wqe(qp, w, &rq, first, &rwqe);
	if (ret <= 0) {
		out = ret < 0 ? OUT_DROP : OUT_RNR;
		goto out;
	}
	if (first)
		w->rx.done = 0;
	if (rwqe.status != IBV_WC_SUCCESS ||
	    w->rx.done + p->payload_len > rwqe.sgl.total ||
	    ibvd_eng_copy_in(&rwqe.sgl, w->rx.done, p->payload,
			     p->payload_len) < 0) {
		enum ibv_wc_status st = rwqe.status != IBV_WC_SUCCESS ?
					rwqe.status : IBV_WC_LOC_LEN_ERR;

		if (!rq.srq)
			ibvd_eng_recv_fail(qp, &rq, &rwqe, st);
		else
			ibvd_eng_responder_error(qp, 0);
		w->rx.in_msg = w->rx.wqe_held = false;
		out = OUT_OP;
		goto out;
	}
	w->rx.done += p->payload_len;
	w->rx.in_msg = !last;
	if (last) {
		if ((p->hdrs & ROCE_HDR_IETH) && ibvd_eng_remote_inv(qp, p->ieth, true) < 0) {
			out = OUT_OP;
			goto out;
		}
		if (!rq.srq)
			ibvd_eng_rq_consume(&rq);
		w->rx.wqe_held = false;
		send_complete(qp, w, p, rwqe.wr_id);
	}
out:
	pthread_mutex_unlock(rq.lock);
	return out;
}

/* ---- responder: WRITE ----------------------------------------------------- */

/* Is a receive WQE posted for qp (its RQ or SRQ)? */
static bool recv_available(struct ibvd_qp *qp)
{
	struct eng_recv rwqe;
	struct eng_rq rq;
	int ret;

	ibvd_eng_rq_of(qp, &rq);
	pthread_mutex_lock(rq.lock);
	ret = ibvd_eng_rq_peek(&rq, &rwqe);
	pthread_mutex_unlock(rq.lock);
	return ret != 0;
}

static enum outcome rx_write(struct ibvd_qp *qp, struct roce_qp *w,
			     const struct roce_pkt *p)
{
	bool first = op_first(p->opcode), last = op_last(p->opcode);
	struct eng_sgl dst = { 0 };

	if (first != !w->rx.in_msg)
		return OUT_INV;
	if (first) {
		w->rx.w_va = p->reth.va;
		w->rx.w_rkey = p->reth.rkey;
		w->rx.w_left = p->reth.len;
		w->rx.done = 0;
	}
	if (p->payload_len > w->rx.w_left ||
	    (last && p->payload_len != w->rx.w_left))
		return OUT_INV;
	/* with immediate: no receive WQE, no data moves (the RNR NAK's
	 * retry brings this packet again) */
	if (last && (p->hdrs & ROCE_HDR_IMM) && !recv_available(qp))
		return OUT_RNR;
	/* checked per packet: the MR may go between two of them */
	if (ibvd_eng_rkey_resolve(qp, w->rx.w_rkey, w->rx.w_va, p->payload_len,
				  IBV_ACCESS_REMOTE_WRITE, &dst) < 0)
		return OUT_ACCESS;
	if (p->payload_len && ibvd_eng_copy_in(&dst, 0, p->payload,
					       p->payload_len) < 0)
		return OUT_ACCESS;
	w->rx.w_va += p->payload_len;
	w->rx.w_left -= p->payload_len;
	w->rx.done += p->payload_len;
	w->rx.in_msg = !last;
	/* WRITE with immediate: a receive WQE takes the immediate */
	if (last && (p->hdrs & ROCE_HDR_IMM)) {
		struct eng_rcv_done d = {
			.opcode = IBV_WC_RECV_RDMA_WITH_IMM,
			.wc_flags = IBV_WC_WITH_IMM,
			.imm = htobe32(p->imm),
			.src_qp = qp->attr.dest_qp_num,
			.solicited = p->se,
		};
		struct eng_recv rwqe;
		struct eng_rq rq;
		int ret;

		ibvd_eng_rq_of(qp, &rq);
		pthread_mutex_lock(rq.lock);
		ret = ibvd_eng_rq_peek(&rq, &rwqe);
		if (ret > 0) {
			ibvd_eng_rq_consume(&rq);
			ibvd_eng_recv_done(qp, rwqe.wr_id, &d);
		} else if (ret < 0) {
			ibvd_eng_rq_broken(qp, &rq);
		}
		pthread_mutex_unlock(rq.lock);
	}
	return OUT_OK;
}

/* ---- responder: READ and atomics ------------------------------------------ */

static struct roce_resource *resource_new(struct roce_qp *w)
{
	struct roce_resource *r = &w->rx.res[w->rx.res_next];

	w->rx.res_next = (w->rx.res_next + 1) % ROCE_RESOURCES;
	memset(r, 0, sizeof(*r));
	r->valid = true;
	return r;
}

static uint8_t read_opcode(uint32_t k, uint32_t n)
{
	if (n == 1)
		return ROCE_RC_READ_RESPONSE_ONLY;
	if (k == 0)
		return ROCE_RC_READ_RESPONSE_FIRST;
	return k + 1 == n ? ROCE_RC_READ_RESPONSE_LAST : ROCE_RC_READ_RESPONSE_MIDDLE;
}

/* Send the responses of READ r from its packet `from` on. */
static enum outcome read_respond(struct roce_dev *rd, struct ibvd_qp *qp,
				 struct roce_qp *w, const struct roce_ip *ip,
				 const struct roce_resource *r, uint32_t from)
{
	uint32_t mtu = 128u << (qp->attr.path_mtu >= 1 && qp->attr.path_mtu <= 5 ?
				qp->attr.path_mtu : 1);
	struct eng_sgl src = { 0 };
	struct roce_path path;
	uint32_t k;

	if (ibvd_eng_rkey_resolve(qp, r->rkey, r->va, r->len,
				  IBV_ACCESS_REMOTE_READ, &src) < 0)
		return OUT_ACCESS;
	reply_path(w, ip, &path);
	for (k = from; k < r->npsn; k++) {
		uint64_t at = (uint64_t)k * mtu;
		uint32_t len = (uint32_t)(r->len - at < mtu ? r->len - at : mtu);
		struct roce_pkt p;

		roce_pkt_init(&p, read_opcode(k, r->npsn));
		p.dest_qp = qp->attr.dest_qp_num & 0xFFFFFFu;
		p.psn = roce_psn_add(r->psn, k);
		p.aeth.syndrome = ROCE_AETH_ACK;
		p.aeth.msn = w->rx.msn & 0xFFFFFFu;
		if (r->len && roce_send_sgl(rd, &path, &p, &src, at, len) < 0)
			return OUT_ACCESS;
		if (!r->len)
			roce_send_pkt(rd, &path, &p, NULL, 0);
	}
	return OUT_OK;
}

/* The longest READ one request may ask for: rxe's largest message. */
#define ROCE_MAX_READ	(8u << 20)

static enum outcome rx_read(struct roce_dev *rd, struct ibvd_qp *qp,
			    struct roce_qp *w, const struct roce_ip *ip,
			    const struct roce_pkt *p)
{
	uint32_t mtu = 128u << (qp->attr.path_mtu >= 1 && qp->attr.path_mtu <= 5 ?
				qp->attr.path_mtu : 1);
	struct roce_resource *r;

	/*
	 * The receive thread sends a READ's responses at once, holding the
	 * objects lock: a request may ask for at most a message's worth, as
	 * rxe's largest, not for the 2 GiB the header could name.
	 */
	if (!(qp->attr.access & IBV_ACCESS_REMOTE_READ) ||
	    p->reth.len > ROCE_MAX_READ)
		return OUT_INV;
	r = resource_new(w);
	r->psn = p->psn;
	r->npsn = p->reth.len ? (p->reth.len + mtu - 1) / mtu : 1;
	r->va = p->reth.va;
	r->rkey = p->reth.rkey;
	r->len = p->reth.len;
	/* the MSN counts the READ once it is accepted */
	w->rx.msn++;
	return read_respond(rd, qp, w, ip, r, 0);
}

static void atomic_ack(struct roce_dev *rd, struct ibvd_qp *qp,
		       struct roce_qp *w, const struct roce_ip *ip,
		       const struct roce_resource *r)
{
	struct roce_path path;
	struct roce_pkt p;

	reply_path(w, ip, &path);
	roce_pkt_init(&p, ROCE_RC_ATOMIC_ACKNOWLEDGE);
	p.dest_qp = qp->attr.dest_qp_num & 0xFFFFFFu;
	p.psn = r->psn;
	p.aeth.syndrome = ROCE_AETH_ACK;
	p.aeth.msn = w->rx.msn & 0xFFFFFFu;
	p.atomic_ack = r->orig;
	roce_send_pkt(rd, &path, &p, NULL, 0);
}

static enum outcome rx_atomic(struct roce_dev *rd, struct ibvd_qp *qp,
			      struct roce_qp *w, const struct roce_ip *ip,
			      const struct roce_pkt *p)
{
	struct eng_sgl dst = { 0 };
	struct roce_resource *r;
	uint64_t old, val;

	if (p->atomic.va & 7)
		return OUT_INV;
	if (ibvd_eng_rkey_resolve(qp, p->atomic.rkey, p->atomic.va, 8,
				  IBV_ACCESS_REMOTE_ATOMIC, &dst) < 0)
		return OUT_ACCESS;
	pthread_mutex_lock(&ibvd_eng_atomic_lock);
	if (ibvd_eng_mem_read(dst.seg[0].fd, dst.seg[0].addr, &old, 8) < 0) {
		pthread_mutex_unlock(&ibvd_eng_atomic_lock);
		return OUT_ACCESS;
	}
	if (p->opcode == ROCE_RC_COMPARE_SWAP)
		val = old == p->atomic.compare ? p->atomic.swap_add : old;
	else
		val = old + p->atomic.swap_add;
	if (val != old &&
	    ibvd_eng_mem_write(dst.seg[0].fd, dst.seg[0].addr, &val, 8) < 0) {
		pthread_mutex_unlock(&ibvd_eng_atomic_lock);
		return OUT_ACCESS;
	}
	pthread_mutex_unlock(&ibvd_eng_atomic_lock);
	r = resource_new(w);
	r->atomic = true;
	r->psn = p->psn;
	r->npsn = 1;
	r->orig = old;
	w->rx.msn++;
	atomic_ack(rd, qp, w, ip, r);
	return OUT_OK;
}

/* ---- responder: PSNs ------------------------------------------------------ */

/* A duplicate: ACK again, or answer a READ or atomic again. */
static void rx_duplicate(struct roce_dev *rd, struct ibvd_qp *qp,
			 struct roce_qp *w, const struct roce_ip *ip,
			 const struct roce_pkt *p)
{
	uint8_t op = p->opcode & 0x1F;
	unsigned int i;

	if (op != ROCE_RC_RDMA_READ_REQUEST && op != ROCE_RC_COMPARE_SWAP &&
	    op != ROCE_RC_FETCH_ADD) {
		if (p->ack_req)
			send_aeth(rd, qp, w, ip, roce_psn_add(w->rx.epsn, 0xFFFFFF),
				  ROCE_AETH_ACK);
		return;
	}
	for (i = 0; i < ROCE_RESOURCES; i++) {
		const struct roce_resource *r = &w->rx.res[i];
		int32_t d = roce_psn_diff(p->psn, r->psn);

		if (!r->valid || d < 0 || (uint32_t)d >= r->npsn)
			continue;
		if (r->atomic)
			atomic_ack(rd, qp, w, ip, r);
		else
			read_respond(rd, qp, w, ip, r, (uint32_t)d);
		return;
	}
}

static void rx_nak(struct roce_dev *rd, struct ibvd_qp *qp, struct roce_qp *w,
		   const struct roce_ip *ip, const struct roce_pkt *p,
		   enum outcome out)
{
	switch (out) {
	case OUT_RNR:
		send_aeth(rd, qp, w, ip, p->psn,
			  ROCE_AETH_RNR_NAK | (qp->attr.min_rnr_timer & 0x1F));
		ibvd_eng_port_count(qp, IBVD_PC_SEND_RNR_ERR, 1);
		break;
	case OUT_INV:
		send_aeth(rd, qp, w, ip, p->psn, ROCE_AETH_NAK_INV);
		ibvd_eng_responder_error(qp, IBV_EVENT_QP_REQ_ERR);
		break;
	case OUT_ACCESS:
		send_aeth(rd, qp, w, ip, p->psn, ROCE_AETH_NAK_ACCESS);
		ibvd_eng_responder_error(qp, IBV_EVENT_QP_ACCESS_ERR);
		break;
	case OUT_OP:
		send_aeth(rd, qp, w, ip, p->psn, ROCE_AETH_NAK_OP);
		break;
	default:
		break;
	}
}

static enum outcome execute(struct roce_dev *rd, struct ibvd_qp *qp,
			    struct roce_qp *w, const struct roce_ip *ip,
			    const struct roce_pkt *p)
{
	uint8_t op = p->opcode & 0x1F;

	if (op_send(op))
		return rx_send(qp, w, p);
	if (op >= ROCE_RC_RDMA_WRITE_FIRST && op <= ROCE_RC_RDMA_WRITE_ONLY_IMM)
		return rx_write(qp, w, p);
	if (op == ROCE_RC_RDMA_READ_REQUEST)
		return rx_read(rd, qp, w, ip, p);
	return rx_atomic(rd, qp, w, ip, p);
}

static void rx_request(struct roce_dev *rd, struct ibvd_qp *qp,
		       struct roce_qp *w, const struct roce_ip *ip,
		       const struct roce_pkt *p)
{
	bool uc = qp->qp_type == IBV_QPT_UC;
	uint8_t op = p->opcode & 0x1F;
	enum outcome out;
	int32_t d;

	if (!w->rx.started) {
		w->rx.epsn = qp->attr.rq_psn & 0xFFFFFFu;
		w->rx.started = true;
	}
	d = roce_psn_diff(p->psn, w->rx.epsn);
	if (d < 0) {
		ibvd_eng_port_count(qp, IBVD_PC_DUPLICATE_REQUEST, 1);
		if (!uc)
			rx_duplicate(rd, qp, w, ip, p);
		return;
	}
	if (d > 0) {
		/* UC: the message in progress is lost; a new one may begin */
		if (uc) {
			w->rx.in_msg = false;
			if (!op_first(op))
				return;
			w->rx.epsn = p->psn;
		} else {
			if (!w->rx.nak_sent) {
				send_aeth(rd, qp, w, ip, w->rx.epsn, ROCE_AETH_NAK_PSN);
				ibvd_eng_port_count(qp, IBVD_PC_OUT_OF_SEQ_REQUEST, 1);
			}
			w->rx.nak_sent = true;
			return;
		}
	}
	w->rx.nak_sent = false;
	out = execute(rd, qp, w, ip, p);
	if (out != OUT_OK) {
		if (!uc)
			rx_nak(rd, qp, w, ip, p, out);
		return;
	}
	if (op == ROCE_RC_RDMA_READ_REQUEST) {
		w->rx.epsn = roce_psn_add(w->rx.epsn,
					  w->rx.res[(w->rx.res_next + ROCE_RESOURCES - 1) %
						    ROCE_RESOURCES].npsn);
		return;
	}
	w->rx.epsn = roce_psn_add(w->rx.epsn, 1);
	if (op == ROCE_RC_COMPARE_SWAP || op == ROCE_RC_FETCH_ADD)
		return;
	if (op_last(op))
		w->rx.msn++;
	if (!uc && p->ack_req)
		send_aeth(rd, qp, w, ip, p->psn, ROCE_AETH_ACK);
}

/* ---- requester: answers ---------------------------------------------------- */

static void answer(struct ibvd_qp *qp, struct roce_qp *w, enum eng_resp r)
{
	w->tx.answer = (int)r;
	ibvd_eng_answered(qp);
}

static void rx_ack(struct ibvd_qp *qp, struct roce_qp *w,
		   const struct roce_pkt *p)
{
	uint32_t last = roce_psn_add(w->tx.first_psn, w->tx.npsn - 1);
	uint8_t syn = p->aeth.syndrome;
	int32_t to_first = roce_psn_diff(p->psn, w->tx.first_psn);

	switch (ROCE_AETH_KIND(syn)) {
	case 0x00:			/* ACK */
		if (to_first < 0)
			return;		/* of an earlier step */
		if (roce_psn_diff(p->psn, last) >= 0) {
			if (is_read_or_atomic(w->tx.opcode))
				answer(qp, w, RESP_NO_ACK);	/* its response was lost */
			else
				answer(qp, w, RESP_OK);
		} else {
			w->tx.resend_psn = roce_psn_add(p->psn, 1);
		}
		return;
	case ROCE_AETH_RNR_NAK:
		ibvd_eng_port_count(qp, IBVD_PC_RCVD_RNR_ERR, 1);
		w->tx.rnr_timer = syn & 0x1F;
		w->tx.resend_psn = p->psn;
		answer(qp, w, RESP_RNR);
		return;
	default:
		break;
	}
	switch (syn) {
	case ROCE_AETH_NAK_PSN:
		ibvd_eng_port_count(qp, IBVD_PC_RCVD_SEQ_ERR, 1);
		w->tx.resend_psn = p->psn;
		answer(qp, w, RESP_NO_ACK);
		return;
	case ROCE_AETH_NAK_INV:
		answer(qp, w, RESP_INV_REQ);
		return;
	case ROCE_AETH_NAK_ACCESS:
		answer(qp, w, RESP_ACCESS);
		return;
	default:
		answer(qp, w, RESP_OP_ERR);
		return;
	}
}

static void rx_read_response(struct ibvd_qp *qp, struct roce_qp *w,
			     const struct roce_pkt *p)
{
	int32_t k = roce_psn_diff(p->psn, w->tx.first_psn);
	uint32_t mtu = 128u << (qp->attr.path_mtu >= 1 && qp->attr.path_mtu <= 5 ?
				qp->attr.path_mtu : 1);

	/* in order only: a gap waits for the timeout's new request */
	if (w->tx.opcode != IBV_WR_RDMA_READ || k < 0 ||
	    (uint64_t)k * mtu != w->tx.got || w->tx.got + p->payload_len > w->tx.length)
		return;
	if (p->payload_len &&
	    ibvd_eng_copy_in(w->tx.local, w->tx.got, p->payload, p->payload_len) < 0) {
		answer(qp, w, RESP_LOCAL_FAULT);
		return;
	}
	w->tx.got += p->payload_len;
	if (w->tx.got == w->tx.length && (uint32_t)k + 1 == w->tx.npsn)
		answer(qp, w, RESP_OK);
}

static void rx_atomic_ack(struct ibvd_qp *qp, struct roce_qp *w,
			  const struct roce_pkt *p)
{
	if (!is_read_or_atomic(w->tx.opcode) || w->tx.opcode == IBV_WR_RDMA_READ ||
	    p->psn != w->tx.first_psn)
		return;
	if (ibvd_eng_copy_in(w->tx.local, 0, &p->atomic_ack, 8) < 0) {
		answer(qp, w, RESP_LOCAL_FAULT);
		return;
	}
	answer(qp, w, RESP_OK);
}

static void rx_answer(struct ibvd_qp *qp, struct roce_qp *w,
		      const struct roce_pkt *p)
{
	uint8_t op = p->opcode;

	if (!w->tx.active || w->tx.answer >= 0)
		return;
	if (op == ROCE_RC_ACKNOWLEDGE)
		rx_ack(qp, w, p);
	else if (op == ROCE_RC_ATOMIC_ACKNOWLEDGE)
		rx_atomic_ack(qp, w, p);
	else
		rx_read_response(qp, w, p);
}

/* ---- entry ----------------------------------------------------------------- */

static bool is_answer(uint8_t op)
{
	return op >= ROCE_RC_READ_RESPONSE_FIRST && op <= ROCE_RC_ATOMIC_ACKNOWLEDGE;
}

void roce_rc_rx(struct roce_dev *rd, struct ibvd_qp *qp,
		const struct roce_ip *ip, const struct roce_pkt *p)
{
	struct roce_qp *w = roce_qp_of(qp);

	/* only from the address the QP is connected to */
	if (!w || memcmp(w->path.dst, ip->src, 4) != 0)
		return;
	ibvd_eng_port_count(qp, IBVD_PC_RCVD_PKTS, 1);
	pthread_mutex_lock(&w->lock);
	if (is_answer(p->opcode))
		rx_answer(qp, w, p);
	else
		rx_request(rd, qp, w, ip, p);
	pthread_mutex_unlock(&w->lock);
}
