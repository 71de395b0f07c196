/*
 * RC and UC on the draining thread: requests arriving at a responder QP,
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
 * Requester side: an ACK answers every step in flight (rc.c) up to its
 * PSN, a READ's last response or an atomic's ACK its own step and those
 * before it; a NAK answers its step with its error, or, for a PSN
 * sequence error, has everything from its PSN sent again; READ data and
 * atomic results land in the requester's buffers as they arrive, a READ's
 * responses in order only, a gap in them asking again for the rest.
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
	memcpy(path->src, ip->dst, 16);
	memcpy(path->dst, ip->src, 16);
}

static void wrun_flush_locked(struct roce_dev *rd);

/* An ACK or NAK for psn, saying msn messages were completed. */
static void send_aeth_msn(struct roce_dev *rd, struct ibvd_qp *qp,
			  const struct roce_path *path, uint32_t psn,
			  uint8_t syndrome, uint32_t msn)
{
	struct roce_pkt p;

	roce_pkt_init(&p, roce_op_base(qp) | ROCE_RC_ACKNOWLEDGE);
	p.dest_qp = qp->attr.dest_qp_num & 0xFFFFFFu;
	p.psn = psn & 0xFFFFFFu;
	p.aeth.syndrome = syndrome;
	p.aeth.msn = msn & 0xFFFFFFu;
	roce_send_pkt(rd, path, &p, NULL, 0);
	/* rxe counts every packet it sends, answers too */
	ibvd_eng_port_count(qp, IBVD_PC_SENT_PKTS, 1);
}

static void send_aeth_on(struct roce_dev *rd, struct ibvd_qp *qp,
			 struct roce_qp *w, const struct roce_path *path,
			 uint32_t psn, uint8_t syndrome)
{
	send_aeth_msn(rd, qp, path, psn, syndrome, w->rx.msn);
}

/* ---- ACKs owed until the batch ends ---------------------------------------- */

/* Under the lock of the ACK's QP: the run lands, then the ACK goes. */
static void ack_flush_locked(struct roce_dev *rd)
{
	struct roce_ack_due *a = &rd->ack_due;
	struct ibvd_qp *qp = a->qp;

	if (!qp)
		return;
	if (rd->wrun.qp == qp)
		wrun_flush_locked(rd);
	/* a run that could not land NAKed in the ACK's place */
	if (a->qp != qp)
		return;
	a->qp = NULL;
	send_aeth_msn(rd, qp, &a->path, a->psn, ROCE_AETH_ACK, a->msn);
}

/* flush(rd) under the lock of qp's wire state, if there is a qp. */
static void flush_for(struct roce_dev *rd, struct ibvd_qp *qp,
		      void (*flush)(struct roce_dev *rd))
{
	struct roce_qp *w;

	if (!qp)
		return;
	w = qp->wire;
	pthread_mutex_lock(&w->lock);
	flush(rd);
	pthread_mutex_unlock(&w->lock);
}

void roce_ack_flush(struct roce_dev *rd)
{
	flush_for(rd, rd->ack_due.qp, ack_flush_locked);
}

/*
 * Before anything else qp answers: the data it promises landed, and the
 * ACK it owes went (the draining thread's own; the rest answer at once).
 * False if that failed qp just now: a run that could not land NAKed in
 * the answer's place, and a responder in error sends nothing more.  (A QP
 * the packet at hand failed still NAKs it.)
 */
static bool answer_prior(struct roce_dev *rd, const struct ibvd_qp *qp)
{
	bool could;

	if (roce_rx_self != rd)
		return true;
	could = ibvd_eng_can_receive(eng_qp_state(qp));
	wrun_flush_locked(rd);
	ack_flush_locked(rd);
	return !could || ibvd_eng_can_receive(eng_qp_state(qp));
}

/* An answer promises the data before it landed: what is deferred goes first. */
static void send_aeth(struct roce_dev *rd, struct ibvd_qp *qp,
		      struct roce_qp *w, const struct roce_ip *ip,
		      uint32_t psn, uint8_t syndrome)
{
	struct roce_path path;

	if (!answer_prior(rd, qp))
		return;
	reply_path(w, ip, &path);
	send_aeth_on(rd, qp, w, &path, psn, syndrome);
}

/*
 * The ACK a request asked for: owed until the batch ends when the
 * draining thread has it (a later one of the QP's replaces it), else sent
 * now.
 */
static void ack_request(struct roce_dev *rd, struct ibvd_qp *qp,
			struct roce_qp *w, const struct roce_ip *ip,
			uint32_t psn)
{
	struct roce_ack_due *a = &rd->ack_due;

	/* another QP's ACK is sent before this QP's packets are handled
	 * (roce_rc_rx): this one is never behind it */
	if (roce_rx_self != rd || (a->qp && a->qp != qp)) {
		send_aeth(rd, qp, w, ip, psn, ROCE_AETH_ACK);
		return;
	}
	a->qp = qp;
	reply_path(w, ip, &a->path);
	a->psn = psn;
	a->msn = w->rx.msn;
}

/* ---- payloads that land in one piece ------------------------------------ */

static void read_run_flush(struct ibvd_qp *qp, const struct roce_wrun *r);

/*
 * Data from psn on could not land: an ACK owed for it would say it did
 * (what went before it stays acknowledged: the NAK that follows says so).
 */
static void ack_drop_from(struct roce_dev *rd, const struct ibvd_qp *qp,
			  uint32_t psn)
{
	struct roce_ack_due *a = &rd->ack_due;

	if (a->qp == qp && roce_psn_diff(a->psn, psn) >= 0)
		a->qp = NULL;
}

/*
 * A SEND run lands under its receive queue's lock (held already when
 * rx_send flushes it), while its QP may still receive: one gone to error
 * flushes (or has flushed) the receive WQE, whose buffer is the
 * application's again.  If it cannot land, the message fails at its next
 * packet or its end (rx_send, with land_err); -ECANCELED: its QP failed.
 */
static void send_run_flush(struct roce_dev *rd, struct ibvd_qp *qp,
			   const struct roce_wrun *r)
{
	bool lock = rd->rq_held != qp;
	struct roce_qp *w = qp->wire;
	struct eng_rq rq;
	int ret = -ECANCELED;

	ibvd_eng_rq_of(qp, &rq);
	if (lock)
		pthread_mutex_lock(rq.lock);
	if (ibvd_eng_can_receive(eng_qp_state(qp)))
		ret = ibvd_eng_mem_writev(r->fd, r->addr, r->iov, r->n);
	if (lock)
		pthread_mutex_unlock(rq.lock);
	if (ret < 0) {
		w->rx.land_err = ret;
		ack_drop_from(rd, qp, r->psn);
	}
}

/* Under the lock of the run's QP (the only one it may be for). */
static void wrun_flush_locked(struct roce_dev *rd)
{
	struct roce_wrun *r = &rd->wrun;
	struct ibvd_qp *qp = r->qp;
	int ret;

	if (!qp)
		return;
	r->qp = NULL;
	if (r->kind == ROCE_WRUN_READ) {
		read_run_flush(qp, r);
		return;
	}
	if (r->kind == ROCE_WRUN_SEND) {
		send_run_flush(rd, qp, r);
		return;
	}
	/* a QP failed since the run began (another thread, an earlier run
	 * of its own) lands nothing */
	ret = ibvd_eng_can_receive(eng_qp_state(qp)) ?
	      ibvd_eng_mem_writev(r->fd, r->addr, r->iov, r->n) : -ECANCELED;
	if (ret == 0)
		return;
	ack_drop_from(rd, qp, r->psn);
	/* that QP answers nothing more; nor does a dead process's host */
	if (ret == -ECANCELED || ret == -ESRCH)
		return;
	/* its memory went: the first packet of the run could not land; UC
	 * answers nothing and stays, as for any access error (rx_request) */
	if (qp->qp_type == IBV_QPT_UC)
		return;
	send_aeth_on(rd, qp, qp->wire, &r->reply, r->psn, ROCE_AETH_NAK_ACCESS);
	ibvd_eng_responder_error(qp, IBV_EVENT_QP_ACCESS_ERR);
}

void roce_wrun_flush(struct roce_dev *rd)
{
	flush_for(rd, rd->wrun.qp, wrun_flush_locked);
}

/*
 * Take p's payload, bound for fd at addr, into the run instead of writing
 * it now (the draining thread's buffers last until the run is written): a
 * run of its own unless it follows on the run there.  True if it started
 * a new run.
 */
static bool wrun_add(struct roce_dev *rd, struct ibvd_qp *qp,
		     enum roce_wrun_kind kind, uint32_t psn, int fd,
		     uint64_t addr, const struct roce_pkt *p)
{
	struct roce_wrun *r = &rd->wrun;
	bool fresh = !r->qp;

	if (r->qp && (r->kind != kind ||
		      (kind == ROCE_WRUN_READ && r->psn != psn) ||
		      r->fd != fd || r->n == ROCE_WRUN_MAX ||
		      r->addr + r->len != addr)) {
		wrun_flush_locked(rd);
		fresh = true;
	}
	if (fresh) {
		r->qp = qp;
		r->kind = kind;
		r->psn = psn;
		r->fd = fd;
		r->addr = addr;
		r->len = 0;
		r->n = 0;
	}
	r->iov[r->n].iov_base = (void *)p->payload;
	r->iov[r->n].iov_len = p->payload_len;
	r->n++;
	r->len += p->payload_len;
	return fresh;
}

/* Does a packet with this opcode go on with the run there? */
static bool wrun_goes_on(const struct roce_wrun *r, uint8_t opcode)
{
	uint8_t op = ROCE_OP_OPERATION(opcode);

	switch (r->kind) {
	case ROCE_WRUN_READ:
		return op == ROCE_RC_READ_RESPONSE_MIDDLE ||
		       op == ROCE_RC_READ_RESPONSE_LAST;
	case ROCE_WRUN_SEND:
		return op == ROCE_RC_SEND_MIDDLE || op == ROCE_RC_SEND_LAST ||
		       op == ROCE_RC_SEND_LAST_IMM || op == ROCE_RC_SEND_LAST_INV;
	case ROCE_WRUN_WRITE:
		break;
	}
	return op >= ROCE_RC_RDMA_WRITE_FIRST && op <= ROCE_RC_RDMA_WRITE_ONLY &&
	       op != ROCE_RC_RDMA_WRITE_LAST_IMM;
}

/* A WRITE packet's payload for dst into the run: true if it is there. */
static bool wrun_take(struct roce_dev *rd, struct ibvd_qp *qp,
		      struct roce_qp *w, const struct roce_ip *ip,
		      const struct roce_pkt *p, const struct eng_sgl *dst)
{
	uint64_t addr;
	int fd;

	if (roce_rx_self != rd ||
	    !ibvd_eng_sgl_client_piece(dst, 0, p->payload_len, &fd, &addr))
		return false;
	if (wrun_add(rd, qp, ROCE_WRUN_WRITE, p->psn, fd, addr, p))
		reply_path(w, ip, &rd->wrun.reply);
	return true;
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

static bool op_write(uint8_t op)
{
	op &= 0x1F;
	return op >= ROCE_RC_RDMA_WRITE_FIRST && op <= ROCE_RC_RDMA_WRITE_ONLY_IMM;
}

/*
 * The first packet of an RDMA WRITE, READ or atomic, which rdma_recvs
 * counts (as the engine counts them arriving between its own QPs).
 */
static bool starts_rdma(uint8_t op)
{
	op &= 0x1F;
	return op == ROCE_RC_RDMA_READ_REQUEST || op == ROCE_RC_COMPARE_SWAP ||
	       op == ROCE_RC_FETCH_ADD || (op_write(op) && op_first(op));
}

/*
 * A SEND's or WRITE's packet is as long as the path MTU says (rxe's
 * check_length): a FIRST or MIDDLE exactly the MTU, a LAST at least a
 * byte and at most the MTU, an ONLY at most the MTU.
 */
static bool fills_mtu(const struct ibvd_qp *qp, const struct roce_pkt *p)
{
	uint32_t mtu = roce_path_mtu(qp);

	if (!op_last(p->opcode))
		return p->payload_len == mtu;
	if (!op_first(p->opcode))
		return p->payload_len && p->payload_len <= mtu;
	return p->payload_len <= mtu;
}

/* What the responder makes of a request, for the requester. */
enum outcome {
	OUT_OK,
	OUT_RNR,			/* no receive WQE */
	OUT_INV,			/* invalid request: NAK 0x61 */
	OUT_ACCESS,			/* remote access: NAK 0x62 */
	OUT_OP,				/* remote operation: NAK 0x63 */
	OUT_DROP,			/* say nothing (UC, broken RQ, dead process) */
};

/*
 * Should a receive completion of qp wait for the engine (internal.h,
 * ROCE_HELD_RECVS)?  While a send is answered and not yet completed, and
 * behind what already waits.
 */
static bool must_hold(struct roce_qp *w)
{
	const struct roce_txm *front = w->tx.n ? roce_txm_at(w, 0) : NULL;

	return w->rx.nheld || w->tx.retiring ||
	       (front && front->answer >= 0 && front->answer != RESP_RNR);
}

void roce_rc_held_flush(struct ibvd_qp *qp, struct roce_qp *w)
{
	uint32_t i;

	for (i = 0; i < w->rx.nheld; i++)
		ibvd_eng_recv_done(qp, w->rx.held[i].wr_id, &w->rx.held[i].done);
	__atomic_store_n(&w->rx.nheld, 0, __ATOMIC_RELAXED);
}

/* Complete receive WQE wr_id of qp now, or after its answered sends. */
static void recv_done(struct ibvd_qp *qp, struct roce_qp *w, uint64_t wr_id,
		      const struct eng_rcv_done *d)
{
	if (must_hold(w) && w->rx.nheld < ROCE_HELD_RECVS) {
		w->rx.held[w->rx.nheld] = (struct roce_held_recv){ wr_id, *d };
		__atomic_store_n(&w->rx.nheld, w->rx.nheld + 1, __ATOMIC_RELAXED);
		/* the engine comes round to qp and writes it (rc.c) */
		ibvd_eng_turn_soon(qp);
		return;
	}
	/* full: order among the receives still holds */
	roce_rc_held_flush(qp, w);
	ibvd_eng_recv_done(qp, wr_id, d);
}

static void send_complete(struct ibvd_qp *qp, struct roce_qp *w,
			  const struct roce_pkt *p, uint64_t wr_id)
{
	/* As rxe's: every receive completion has IBV_WC_GRH (its IP header). */
	struct eng_rcv_done d = {
		.opcode = IBV_WC_RECV,
		.byte_len = (uint32_t)w->rx.done,
		.wc_flags = IBV_WC_GRH,
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
	recv_done(qp, w, wr_id, &d);
}

/*
 * Does a SEND (write false) or WRITE packet fit the message in progress?
 * A FIRST or ONLY starts one, a MIDDLE or LAST continues one of its own
 * kind; anything else is an invalid request (rxe's check_op_seq).
 */
static bool continues(const struct roce_qp *w, bool first, bool write)
{
	if (first)
		return !w->rx.in_msg;
	return w->rx.in_msg && w->rx.msg_write == write;
}

/*
 * Under the RQ's lock: the WQE this packet fills.  An RQ's stays posted
 * until the message's last packet (a flush then still finds it); an SRQ's
 * is taken at the first, as other QPs share the queue, and the QP holds
 * it in the engine's responder state (ibvd_eng_wire_hold), where flushes
 * find it.  Each packet resolves its SGEs again: between two packets the
 * receiver may deregister the MR they name.
 */
static int send_wqe(struct ibvd_qp *qp, struct eng_rq *rq, bool first,
		    struct eng_recv *rwqe)
{
	int ret;

	if (rq->srq && !first)
		return ibvd_eng_wire_held(qp, rq->pd, rwqe) ? 1 : 0;
	ret = ibvd_eng_rq_peek(rq, rwqe);
	if (ret < 0) {
		ibvd_eng_rq_broken(qp, rq);
		return ret;
	}
	/* no room to hold it: answered as a NIC out of resources */
	if (ret > 0 && rq->srq && ibvd_eng_wire_hold(qp, rq, rwqe) < 0)
		return 0;
	return ret;
}

/*
 * Under the RQ's lock: the message fails at the responder with status.
 * An RQ's WQE is consumed with that; an SRQ's, held since the first
 * packet, too.  The QP goes to ERR, with the async event (or 0) of the
 * error's kind.
 */
static void send_fail(struct ibvd_qp *qp, struct roce_qp *w,
		      const struct eng_rq *rq, const struct eng_recv *rwqe,
		      enum ibv_wc_status status, uint32_t event)
{
	if (rq->srq)
		ibvd_eng_wire_release(qp);
	else
		ibvd_eng_rq_consume(rq);
	ibvd_eng_recv_err(qp, rwqe->wr_id, status);
	ibvd_eng_responder_error(qp, event);
	w->rx.in_msg = false;
}

/*
 * A UC message longer than its receive WQE is dropped, as rxe's
 * responder drops it (class D; E on an SRQ): an RQ's WQE stays posted,
 * its bytes so far to be written over by the next message; an SRQ's,
 * taken at the first packet, completes with REM_INV_REQ_ERR.  The rest
 * of the message finds none in progress and is dropped too.
 */
static void uc_too_long(struct ibvd_qp *qp, struct roce_qp *w,
			const struct eng_rq *rq, const struct eng_recv *rwqe)
{
	if (rq->srq) {
		ibvd_eng_wire_release(qp);
		ibvd_eng_recv_err(qp, rwqe->wr_id, IBV_WC_REM_INV_REQ_ERR);
	}
	w->rx.in_msg = false;
}

/*
 * A SEND packet's payload into the receive WQE at the message's offset:
 * into the run or written now; at the message's last packet, all of it
 * landed.  0 or < 0.
 */
static int send_data(struct roce_dev *rd, struct ibvd_qp *qp,
		     struct roce_qp *w, const struct eng_recv *rwqe,
		     const struct roce_pkt *p, bool last)
{
	bool mine = roce_rx_self == rd;
	uint64_t addr;
	int fd, ret = 0;

	if (w->rx.land_err)
		return w->rx.land_err;
	if (mine && ibvd_eng_sgl_client_piece(&rwqe->sgl, w->rx.done,
					      p->payload_len, &fd, &addr))
		wrun_add(rd, qp, ROCE_WRUN_SEND, p->psn, fd, addr, p);
	else if (p->payload_len)
		ret = ibvd_eng_copy_in(&rwqe->sgl, w->rx.done, p->payload,
				       p->payload_len);
	if (last && mine)
		wrun_flush_locked(rd);
	return ret < 0 ? ret : w->rx.land_err;
}

/* A message that fails lands nothing more: its buffer is the application's. */
static void send_run_drop(struct roce_dev *rd, const struct ibvd_qp *qp)
{
	if (roce_rx_self == rd && rd->wrun.qp == qp)
		rd->wrun.qp = NULL;
}

static enum outcome rx_send(struct roce_dev *rd, struct ibvd_qp *qp,
			    struct roce_qp *w, const struct roce_pkt *p)
{
	bool first = op_first(p->opcode), last = op_last(p->opcode);
	enum outcome out = OUT_OK;
	struct eng_recv rwqe;
	struct eng_rq rq;
	int ret;

	if (!continues(w, first, false))
		return OUT_INV;
	ibvd_eng_rq_of(qp, &rq);
	pthread_mutex_lock(rq.lock);
	if (roce_rx_self == rd)
		rd->rq_held = qp;
	ret = send_wqe(qp, &rq, first, &rwqe);
	if (ret <= 0) {
		out = ret < 0 ? OUT_DROP : OUT_RNR;
		goto out;
	}
	if (first) {
		w->rx.msg_write = false;
		w->rx.done = 0;
		w->rx.land_err = 0;
	}
	if (rwqe.status == IBV_WC_SUCCESS &&
	    w->rx.done + p->payload_len <= rwqe.sgl.total)
		ret = send_data(rd, qp, w, &rwqe, p, last);
	/* the receiver's process is gone: nobody answers (rx_request); or
	 * its QP failed meanwhile, and the flush completes the WQE */
	if (ret == -ESRCH || ret == -ECANCELED) {
		out = OUT_DROP;
		goto out;
	}
	if (rwqe.status == IBV_WC_SUCCESS && ret >= 0 &&
	    w->rx.done + p->payload_len > rwqe.sgl.total &&
	    qp->qp_type == IBV_QPT_UC) {
		uc_too_long(qp, w, &rq, &rwqe);
		out = OUT_DROP;
		goto out;
	}
	/* the receiver's WQE or memory: its error, NAK remote operational */
	if (rwqe.status != IBV_WC_SUCCESS || ret < 0) {
		send_fail(qp, w, &rq, &rwqe, rwqe.status != IBV_WC_SUCCESS ?
			  rwqe.status : IBV_WC_LOC_PROT_ERR, 0);
		out = OUT_OP;
		goto out;
	}
	/* longer than the WQE: the sender's, NAK invalid request (as rxe) */
	if (w->rx.done + p->payload_len > rwqe.sgl.total) {
		send_fail(qp, w, &rq, &rwqe, IBV_WC_LOC_LEN_ERR,
			  IBV_EVENT_QP_REQ_ERR);
		out = OUT_INV;
		goto out;
	}
	w->rx.done += p->payload_len;
	w->rx.in_msg = !last;
	if (last) {
		/* a key the sender may not invalidate: as the local engine */
		if ((p->hdrs & ROCE_HDR_IETH) && ibvd_eng_remote_inv(qp, p->ieth, true) < 0) {
			send_fail(qp, w, &rq, &rwqe, IBV_WC_MW_BIND_ERR,
				  IBV_EVENT_QP_REQ_ERR);
			out = OUT_INV;
			goto out;
		}
		if (!rq.srq)
			ibvd_eng_rq_consume(&rq);
		ibvd_eng_wire_release(qp);
		send_complete(qp, w, p, rwqe.wr_id);
	}
out:
	if (out != OUT_OK)
		send_run_drop(rd, qp);
	if (roce_rx_self == rd)
		rd->rq_held = NULL;
	pthread_mutex_unlock(rq.lock);
	return out;
}

/* ---- responder: WRITE ----------------------------------------------------- */

/*
 * WRITE with immediate, last packet: the receive WQE that takes the
 * immediate, peeked with rq's lock taken and kept until the WRITE is done
 * (ibvd_eng_rq_consume then), so that no QP sharing an SRQ takes it in
 * between.  OUT_OK, or with none posted OUT_RNR (the lock released).
 */
static enum outcome imm_wqe(struct ibvd_qp *qp, struct eng_rq *rq,
			    struct eng_recv *rwqe)
{
	int ret;

	ibvd_eng_rq_of(qp, rq);
	pthread_mutex_lock(rq->lock);
	ret = ibvd_eng_rq_peek(rq, rwqe);
	if (ret > 0)
		return OUT_OK;
	if (ret < 0)
		ibvd_eng_rq_broken(qp, rq);
	pthread_mutex_unlock(rq->lock);
	return ret < 0 ? OUT_DROP : OUT_RNR;
}

/*
 * A WRITE with immediate refused by its key (its range, or a packet's
 * bytes): the receive WQE it took (imm_wqe, rq's lock taken) completes
 * with LOC_ACCESS_ERR, as the local engine's (engine/rdma.c), before
 * the NAK takes the QP to ERR.
 */
static void imm_refused(struct ibvd_qp *qp, struct eng_rq *rq,
			const struct eng_recv *rwqe)
{
	ibvd_eng_rq_consume(rq);
	ibvd_eng_recv_err(qp, rwqe->wr_id, IBV_WC_LOC_ACCESS_ERR);
	pthread_mutex_unlock(rq->lock);
}

/* The WRITE's data lands at dst: 0, or what answers it. */
static enum outcome write_data(struct roce_dev *rd, struct ibvd_qp *qp,
			       struct roce_qp *w, const struct roce_ip *ip,
			       const struct roce_pkt *p, bool imm_last)
{
	struct eng_sgl dst = { 0 };
	int ret;

	/* checked per packet: the MR may go between two of them */
	if (ibvd_eng_rkey_resolve(qp, w->rx.w_rkey, w->rx.w_va, p->payload_len,
				  IBV_ACCESS_REMOTE_WRITE, &dst) < 0)
		return OUT_ACCESS;
	/* with immediate, the completion follows: it lands now, after the run */
	if (imm_last && roce_rx_self == rd)
		wrun_flush_locked(rd);
	if (!p->payload_len || (!imm_last && wrun_take(rd, qp, w, ip, p, &dst)))
		return OUT_OK;
	ret = ibvd_eng_copy_in(&dst, 0, p->payload, p->payload_len);
	/* the target's process gone: nobody answers */
	if (ret < 0)
		return ret == -ESRCH ? OUT_DROP : OUT_ACCESS;
	return OUT_OK;
}

static bool write_range_ok(const struct ibvd_qp *qp, const struct roce_pkt *p)
{
	struct eng_sgl whole = { 0 };

	return ibvd_eng_rkey_resolve(qp, p->reth.rkey, p->reth.va, p->reth.len,
				     IBV_ACCESS_REMOTE_WRITE, &whole) == 0;
}

static enum outcome rx_write(struct roce_dev *rd, struct ibvd_qp *qp,
			     struct roce_qp *w, const struct roce_ip *ip,
			     const struct roce_pkt *p)
{
	bool first = op_first(p->opcode), last = op_last(p->opcode);
	bool imm_last = last && (p->hdrs & ROCE_HDR_IMM);
	struct eng_recv rwqe;
	struct eng_rq rq;
	enum outcome out;

	if (!continues(w, first, true))
		return OUT_INV;
	/*
	 * The whole range first, as the IBTA's responder (and rxe's
	 * check_rkey) does: no byte of a WRITE that runs past its MR lands.
	 * Each packet checks its own bytes again (write_data).
	 */
	if (first && !write_range_ok(qp, p)) {
		/* WRITE Only with Immediate: its WQE first, as rxe's
		 * responder, then the key (none posted: RNR) */
		if (imm_last && (out = imm_wqe(qp, &rq, &rwqe)) != OUT_OK)
			return out;
		if (imm_last)
			imm_refused(qp, &rq, &rwqe);
		return OUT_ACCESS;
	}
	if (first) {
		w->rx.msg_write = true;
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
	if (imm_last && (out = imm_wqe(qp, &rq, &rwqe)) != OUT_OK)
		return out;
	out = write_data(rd, qp, w, ip, p, imm_last);
	if (out != OUT_OK) {
		/* refused by the key: the WQE completes in error; else (the
		 * target gone) it stays posted */
		if (imm_last && out == OUT_ACCESS)
			imm_refused(qp, &rq, &rwqe);
		else if (imm_last)
			pthread_mutex_unlock(rq.lock);
		return out;
	}
	w->rx.w_va += p->payload_len;
	w->rx.w_left -= p->payload_len;
	w->rx.done += p->payload_len;
	w->rx.in_msg = !last;
	/* WRITE with immediate: the receive WQE takes the immediate */
	if (imm_last) {
		struct eng_rcv_done d = {
			.opcode = IBV_WC_RECV_RDMA_WITH_IMM,
			/* the WRITE's length, as rxe reports it */
			.byte_len = (uint32_t)w->rx.done,
			.wc_flags = IBV_WC_GRH | IBV_WC_WITH_IMM,
			.imm = htobe32(p->imm),
			.src_qp = qp->attr.dest_qp_num,
			.solicited = p->se,
		};

		ibvd_eng_rq_consume(&rq);
		recv_done(qp, w, rwqe.wr_id, &d);
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

/* What a READ's response packets need besides their payload. */
struct read_pkts {
	const struct ibvd_qp *qp;
	const struct roce_qp *w;
	const struct roce_resource *r;
};

/* Headers of response k of a READ (roce_send_message). */
static void read_headers(void *arg, uint32_t k, struct roce_pkt *p)
{
	const struct read_pkts *d = arg;

	roce_pkt_init(p, roce_op_base(d->qp) | read_opcode(k, d->r->npsn));
	p->dest_qp = d->qp->attr.dest_qp_num & 0xFFFFFFu;
	p->psn = roce_psn_add(d->r->psn, k);
	p->aeth.syndrome = ROCE_AETH_ACK;
	p->aeth.msn = d->w->rx.msn & 0xFFFFFFu;
}

/* Send the responses of READ r from its packet `from` on. */
static enum outcome read_respond(struct roce_dev *rd, struct ibvd_qp *qp,
				 struct roce_qp *w, const struct roce_ip *ip,
				 const struct roce_resource *r, uint32_t from)
{
	uint32_t mtu = roce_path_mtu(qp);
	struct read_pkts d = { .qp = qp, .w = w, .r = r };
	struct eng_sgl src = { 0 };
	struct roce_path path;
	struct roce_txq q;
	int ret;

	if (ibvd_eng_rkey_resolve(qp, r->rkey, r->va, r->len,
				  IBV_ACCESS_REMOTE_READ, &src) < 0)
		return OUT_ACCESS;
	if (!answer_prior(rd, qp))
		return OUT_DROP;
	reply_path(w, ip, &path);
	roce_txq_init(&q, rd, &path);
	ret = roce_send_message(&q, &src, 0, r->len, mtu, from, r->npsn,
				read_headers, &d);
	roce_txq_flush(&q);
	ibvd_eng_port_count(qp, IBVD_PC_SENT_PKTS, r->npsn - from);
	/* the target's process gone: nobody answers */
	if (ret < 0)
		return ret == -ESRCH ? OUT_DROP : OUT_ACCESS;
	return OUT_OK;
}

/* The longest READ one request may ask for: rxe's largest message. */
#define ROCE_MAX_READ	(8u << 20)

static enum outcome rx_read(struct roce_dev *rd, struct ibvd_qp *qp,
			    struct roce_qp *w, const struct roce_ip *ip,
			    const struct roce_pkt *p)
{
	uint32_t mtu = roce_path_mtu(qp);
	struct roce_resource *r;

	/*
	 * The draining thread sends a READ's responses at once, holding the
	 * objects lock: a request may ask for at most a message's worth, as
	 * rxe's largest, not for the 2 GiB the header could name; and one
	 * drain answers ROCE_READ_DRAIN_BYTES of them, a peer asking for more
	 * at once asks again (what follows gets a sequence NAK).
	 */
	if (!(qp->attr.access & IBV_ACCESS_REMOTE_READ) ||
	    p->reth.len > ROCE_MAX_READ || !qp->attr.max_dest_rd_atomic)
		return OUT_INV;
	if (p->reth.len > rd->read_budget)
		return OUT_DROP;
	rd->read_budget -= p->reth.len;
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

	if (!answer_prior(rd, qp))
		return;
	reply_path(w, ip, &path);
	roce_pkt_init(&p, roce_op_base(qp) | ROCE_RC_ATOMIC_ACKNOWLEDGE);
	p.dest_qp = qp->attr.dest_qp_num & 0xFFFFFFu;
	p.psn = r->psn;
	p.aeth.syndrome = ROCE_AETH_ACK;
	p.aeth.msn = w->rx.msn & 0xFFFFFFu;
	p.atomic_ack = r->orig;
	roce_send_pkt(rd, &path, &p, NULL, 0);
	ibvd_eng_port_count(qp, IBVD_PC_SENT_PKTS, 1);
}

static enum outcome rx_atomic(struct roce_dev *rd, struct ibvd_qp *qp,
			      struct roce_qp *w, const struct roce_ip *ip,
			      const struct roce_pkt *p)
{
	struct eng_sgl dst = { 0 };
	struct roce_resource *r;
	uint64_t old, val;
	int ret;

	/* no responder resources: rxe's "too many RDMA/atomic requests" */
	if ((p->atomic.va & 7) || !qp->attr.max_dest_rd_atomic)
		return OUT_INV;
	if (ibvd_eng_rkey_resolve(qp, p->atomic.rkey, p->atomic.va, 8,
				  IBV_ACCESS_REMOTE_ATOMIC, &dst) < 0)
		return OUT_ACCESS;
	pthread_mutex_lock(&ibvd_eng_atomic_lock);
	ret = ibvd_eng_mem_read(dst.seg[0].fd, dst.seg[0].addr, &old, 8);
	if (ret < 0) {
		pthread_mutex_unlock(&ibvd_eng_atomic_lock);
		return ret == -ESRCH ? OUT_DROP : OUT_ACCESS;
	}
	if (ROCE_OP_OPERATION(p->opcode) == ROCE_RC_COMPARE_SWAP)
		val = old == p->atomic.compare ? p->atomic.swap_add : old;
	else
		val = old + p->atomic.swap_add;
	if (val != old &&
	    (ret = ibvd_eng_mem_write(dst.seg[0].fd, dst.seg[0].addr, &val, 8)) < 0) {
		pthread_mutex_unlock(&ibvd_eng_atomic_lock);
		return ret == -ESRCH ? OUT_DROP : OUT_ACCESS;
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

/*
 * The newest READ or atomic whose responses hold psn, or NULL.  Newest
 * first: an older one of the same PSNs is from before the 24-bit PSN came
 * round (resource_age retires those long before).
 */
static const struct roce_resource *resource_of(const struct roce_qp *w,
					       uint32_t psn)
{
	unsigned int i;

	for (i = 1; i <= ROCE_RESOURCES; i++) {
		const struct roce_resource *r =
			&w->rx.res[(w->rx.res_next + ROCE_RESOURCES - i) % ROCE_RESOURCES];
		int32_t d = roce_psn_diff(psn, r->psn);

		if (r->valid && d >= 0 && (uint32_t)d < r->npsn)
			return r;
	}
	return NULL;
}

/*
 * Two resources a request: one the expected PSN left more than
 * ROCE_RES_AGE_PSNS behind is retired, so that none is still there when
 * the 24-bit PSN comes round to it again.  Between two looks at the same
 * resource come 64 requests, at most 2^15 PSNs each (an 8 MiB READ at
 * MTU 256): it is retired before it is 2^22 behind, far from 2^23, where
 * PSN distances turn round.  No requester asks again that far back (its
 * window is ROCE_TX_WINDOW).
 */
#define ROCE_RES_AGE_PSNS	(1u << 21)

static void resource_age(struct roce_qp *w)
{
	unsigned int k;

	for (k = 0; k < 2; k++) {
		struct roce_resource *r = &w->rx.res[w->rx.res_aged++ % ROCE_RESOURCES];

		if (r->valid &&
		    roce_psn_diff(w->rx.epsn, r->psn) > (int32_t)ROCE_RES_AGE_PSNS)
			r->valid = false;
	}
}

/*
 * A duplicate READ is answered again from memory, by the draining thread
 * that serves every QP of the device: each QP may have that done for at
 * most ROCE_REPLAY_BURST bytes at once, topped up at ROCE_REPLAY_RATE,
 * and what goes again is paid from the drain's budget as new READs are
 * (one drain of 64 packets could otherwise replay 8 MiB for each of 64
 * QPs with full buckets, under the objects lock).
 * Requesters ask again after a timeout or a NAK, for a few READs at a
 * time, well within it; a peer that asks for one READ thousands of times
 * gets the rest dropped, and asks again after its timeout.  The rate is
 * well below what the thread can copy (a MiB takes it 1 to 4 ms here):
 * a budget refilled as fast as the replays it pays for bounds nothing.
 */
#define ROCE_REPLAY_BURST	(2ull * ROCE_MAX_READ)
#define ROCE_REPLAY_RATE	(64ull << 20)	/* bytes a second */

static bool replay_allowed(struct roce_qp *w, uint64_t len)
{
	uint64_t now = roce_now_ns(), elapsed, add;

	if (!w->rx.replay_ns)
		w->rx.replay_bytes = ROCE_REPLAY_BURST;
	/* a second fills the bucket many times over: no overflow below;
	 * a top-up stamped ahead of now adds nothing until then */
	elapsed = now > w->rx.replay_ns ? now - w->rx.replay_ns : 0;
	if (elapsed > 1000000000ull)
		elapsed = 1000000000ull;
	add = elapsed * ROCE_REPLAY_RATE / 1000000000ull;
	if (elapsed)
		w->rx.replay_ns = now;
	w->rx.replay_bytes = add >= ROCE_REPLAY_BURST - w->rx.replay_bytes ?
			     ROCE_REPLAY_BURST : w->rx.replay_bytes + add;
	if (len > w->rx.replay_bytes)
		return false;
	w->rx.replay_bytes -= len;
	return true;
}

/*
 * The bytes READ r's responses from packet `from` on carry, a packet's
 * worth at least (a zero-length READ's one response costs one too).
 */
static uint64_t replay_bytes(uint32_t mtu, const struct roce_resource *r,
			     uint32_t from)
{
	uint64_t at = (uint64_t)from * mtu;
	uint64_t left = r->len > at ? r->len - at : 0;

	return left > mtu ? left : mtu;
}

/* A duplicate: ACK again, or answer a READ or atomic again. */
static void rx_duplicate(struct roce_dev *rd, struct ibvd_qp *qp,
			 struct roce_qp *w, const struct roce_ip *ip,
			 const struct roce_pkt *p)
{
	uint8_t op = ROCE_OP_OPERATION(p->opcode);
	const struct roce_resource *r;
	uint64_t bytes;
	uint32_t from;

	/*
	 * A SEND or WRITE: ACKed again, whether it asks or not (C9-105, as
	 * rxe): its requester may have lost the ACK that covered it.  One ACK
	 * for the batch's duplicates, as for its new packets: a datagram cut
	 * into 64 of them is not 64 packets back.
	 */
	if (op != ROCE_RC_RDMA_READ_REQUEST && op != ROCE_RC_COMPARE_SWAP &&
	    op != ROCE_RC_FETCH_ADD) {
		ack_request(rd, qp, w, ip, roce_psn_add(w->rx.epsn, 0xFFFFFF));
		return;
	}
	r = resource_of(w, p->psn);
	if (!r || r->atomic != (op != ROCE_RC_RDMA_READ_REQUEST))
		return;
	if (r->atomic) {
		atomic_ack(rd, qp, w, ip, r);
		return;
	}
	/* a READ asked again (from its start or from a later response, as
	 * rxe's requester may) lies within the one answered: else dropped */
	if (p->reth.rkey != r->rkey || p->reth.va < r->va ||
	    p->reth.len > r->len || p->reth.va - r->va > r->len - p->reth.len)
		return;
	from = (uint32_t)roce_psn_diff(p->psn, r->psn);
	/* what goes again, whatever length the request names */
	bytes = replay_bytes(roce_path_mtu(qp), r, from);
	if (roce_rx_self == rd && bytes > rd->read_budget)
		return;		/* asked again after its timeout */
	if (!replay_allowed(w, bytes))
		return;
	if (roce_rx_self == rd)
		rd->read_budget -= bytes;
	read_respond(rd, qp, w, ip, r, from);
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

/*
 * An XRC target takes each request into the SRQ its XRCETH names, which
 * must be of the target's domain; a SEND or WRITE keeps the SRQ of its
 * first packet (a WQE of that SRQ may be held).
 */
static bool xrc_enter(struct ibvd_qp *qp, struct roce_qp *w,
		      const struct roce_pkt *p)
{
	if (w->rx.in_msg && p->xrc_srqn != w->rx.xrc_srqn)
		return false;
	if (!ibvd_eng_xrc_take(qp, p->xrc_srqn))
		return false;
	w->rx.xrc_srqn = p->xrc_srqn;
	return true;
}

static enum outcome execute(struct roce_dev *rd, struct ibvd_qp *qp,
			    struct roce_qp *w, const struct roce_ip *ip,
			    const struct roce_pkt *p)
{
	uint8_t op = ROCE_OP_OPERATION(p->opcode);

	if (qp->qp_type == IBV_QPT_XRC_RECV && !xrc_enter(qp, w, p))
		return OUT_INV;
	if ((op_send(op) || op_write(op)) && !fills_mtu(qp, p))
		return OUT_INV;
	if (op_send(op))
		return rx_send(rd, qp, w, p);
	if (op_write(op))
		return rx_write(rd, qp, w, ip, p);
	/* a READ or atomic inside a SEND or WRITE: out of order */
	if (w->rx.in_msg)
		return OUT_INV;
	if (op == ROCE_RC_RDMA_READ_REQUEST)
		return rx_read(rd, qp, w, ip, p);
	return rx_atomic(rd, qp, w, ip, p);
}

/*
 * A UC message lost packets: what follows of it is dropped.  An SRQ WQE
 * it took waits for the next message, as a UC responder of rxe's reuses
 * it (the engine's local path does the same, chunk.c).
 */
static void uc_cut_short(struct ibvd_qp *qp, struct roce_qp *w)
{
	struct eng_rq rq;

	ibvd_eng_rq_of(qp, &rq);
	pthread_mutex_lock(rq.lock);
	ibvd_eng_wire_keep(qp);
	pthread_mutex_unlock(rq.lock);
	w->rx.in_msg = false;
}

/*
 * UC: how far behind the expected PSN a packet is a copy of one already
 * taken (a link that duplicates), dropped so that no message arrives
 * twice; further behind, it is a sender that started again lower, whose
 * new message begins there (rxe takes any FIRST or ONLY off its PSN, and
 * so takes copies twice).
 */
#define UC_DUP_WINDOW	2048

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
	if (d < 0 && (!uc || d >= -UC_DUP_WINDOW)) {
		ibvd_eng_port_count(qp, IBVD_PC_DUPLICATE_REQUEST, 1);
		/*
		 * XRC: a READ or atomic replayed in its own SRQ's PD, but not
		 * in the middle of a message for another SRQ, whose held WQE
		 * would go with the wrong SRQ's CQ
		 */
		if (!uc && (qp->qp_type != IBV_QPT_XRC_RECV ||
			    xrc_enter(qp, w, p)))
			rx_duplicate(rd, qp, w, ip, p);
		return;
	}
	if (d != 0) {
		/*
		 * UC: a gap, ahead or far behind (a sender that started again
		 * from a lower PSN): the message in progress is lost; a new
		 * one may begin (and takes the SRQ WQE the lost one held, as
		 * rxe's)
		 */
		if (uc) {
			if (w->rx.in_msg)
				uc_cut_short(qp, w);
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
	resource_age(w);
	/* counted whether it then succeeds or is refused, as the engine's */
	if (starts_rdma(op))
		ibvd_eng_port_count(qp, IBVD_PC_RDMA_RECVS, 1);
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
		ack_request(rd, qp, w, ip, p->psn);
}

/* ---- requester: answers ---------------------------------------------------- */

/*
 * The step in flight that PSN psn belongs to, and its place behind the
 * oldest; NULL if none.
 */
static struct roce_txm *txm_of(struct roce_qp *w, uint32_t psn, uint32_t *at)
{
	uint32_t i;

	for (i = 0; i < w->tx.n; i++) {
		struct roce_txm *m = roce_txm_at(w, i);
		int32_t d = roce_psn_diff(psn, m->first_psn);

		if (d >= 0 && (uint32_t)d < m->npsn) {
			*at = i;
			return m;
		}
	}
	return NULL;
}

/* m has its answer; the engine hears of it if m is its front. */
static void answer(struct ibvd_qp *qp, struct roce_qp *w, struct roce_txm *m,
		   enum eng_resp r)
{
	if (m->answer >= 0)
		return;
	m->answer = (int)r;
	/*
	 * An RNR NAK moves nothing on: it spends rnr_retry, and the timeouts
	 * around it still count in a row (else a NAK that comes after the
	 * timeout would give the front both budgets again each time, and a
	 * receiver that never posts would never fail it)
	 */
	if (r != RESP_RNR)
		w->tx.heard_ns = roce_now_ns();
	w->tx.nak_retried = false;
	if (m == roce_txm_at(w, 0))
		ibvd_eng_answered(qp);
}

/*
 * A response of READ m arrived past one still missing: the missing one was
 * lost or is late.  As rxe's completer does, the requester asks again at
 * once (at the engine's next call, rc.c) for the rest from the first
 * missing byte, keeping what came in order, rather than waiting out its
 * timeout and spending a retry.  Once: the responses already on their way
 * past the gap would each ask again, so the next request waits until one
 * of the new request's responses comes in order (past its first, which may
 * be the late one), or for the timeout if they were lost as well.  Only m
 * goes again: the steps behind it need nothing.
 */
static void read_gap(struct ibvd_qp *qp, struct roce_txm *m)
{
	if (m->read_gap)
		return;
	m->read_gap = true;
	m->read_again = true;
	ibvd_eng_port_count(qp, IBVD_PC_COMPLETER_RETRY_ERR, 1);
	ibvd_eng_answered(qp);
}

/*
 * An ACK came past READ or atomic m still without its answer: the
 * responder executed it, and its responses were lost.  A READ asks again
 * at once, as rxe's completer retries at once; what the ACK covers past
 * it is taken once the READ has its bytes (else a WRITE behind it would
 * wait for a timeout to be ACKed again).  An atomic waits for the timeout.
 */
static void answers_lost(struct ibvd_qp *qp, struct roce_qp *w,
			 struct roce_txm *m, uint32_t end)
{
	if (m->w.opcode != IBV_WR_RDMA_READ)
		return;
	read_gap(qp, m);
	if (!w->tx.acked_past || roce_psn_diff(end, w->tx.acked_end) > 0)
		w->tx.acked_end = end;
	w->tx.acked_past = true;
}

/*
 * m's answer is an RNR NAK the engine has not taken yet, and the
 * responder has everything before end, past the PSN it refused: it took
 * that packet since (a copy sent again after the NAK found a receive
 * posted), and the NAK is stale.  A requester held up reads both in one
 * batch, the NAK first; rxe's completer, which acts on each answer as it
 * comes, completes the WQE at the ACK.  So m waits for its answer again
 * and end gives it one.  A stale RNR kept had the engine wait for
 * nothing, and left the window's first unacknowledged PSN past m, so
 * that each timeout of m sent nothing and its retries went at once.
 */
static void rnr_overtaken(struct roce_qp *w, struct roce_txm *m, uint32_t end)
{
	if (m->answer != RESP_RNR || roce_psn_diff(end, w->tx.resend_psn) <= 0)
		return;
	m->answer = -1;
	w->tx.rnr_wait = false;
}

/*
 * The responder has everything before PSN end (an ACK of end - 1, or a
 * NAK or response at end): those steps are answered.  A READ or atomic
 * without its data stops the walk: its responses were lost
 * (answers_lost).
 */
static void acked_before(struct ibvd_qp *qp, struct roce_qp *w, uint32_t end)
{
	uint32_t i;

	for (i = 0; i < w->tx.n; i++) {
		struct roce_txm *m = roce_txm_at(w, i);
		uint32_t m_end = roce_psn_add(m->first_psn, m->npsn);

		if (roce_psn_diff(end, m->first_psn) <= 0)
			break;
		rnr_overtaken(w, m, end);
		if (roce_psn_diff(end, m_end) < 0) {
			/* part of it: the window moves on */
			if (roce_psn_diff(end, w->tx.una_psn) > 0) {
				w->tx.una_psn = end;
				w->tx.heard_ns = roce_now_ns();
				w->tx.nak_retried = false;
			}
			break;
		}
		if (m->answer < 0 && is_read_or_atomic(m->w.opcode)) {
			if (roce_psn_diff(end, m_end) > 0)
				answers_lost(qp, w, m, end);
			break;
		}
		answer(qp, w, m, RESP_OK);
		if (roce_psn_diff(m_end, w->tx.una_psn) > 0)
			w->tx.una_psn = m_end;
	}
}

/* Something must go again from psn: the engine sends it at its next call. */
static void resend(struct ibvd_qp *qp, struct roce_qp *w, uint32_t psn)
{
	w->tx.resend = true;
	w->tx.resend_psn = psn;
	ibvd_eng_answered(qp);
}

static void rx_ack_nak(struct ibvd_qp *qp, struct roce_qp *w,
		   const struct roce_pkt *p)
{
	uint8_t syn = p->aeth.syndrome;
	struct roce_txm *m;
	uint32_t at;

	if (syn == ROCE_AETH_NAK_PSN) {
		/* an RNR NAK's echo: later packets found the responder waiting */
		if (w->tx.rnr_wait)
			return;
		/*
		 * of steps acknowledged since (arriving late, or twice): the
		 * steps in flight have nothing to send again
		 */
		if (roce_psn_diff(p->psn, w->tx.una_psn) < 0 ||
		    roce_psn_diff(p->psn, w->tx.next_psn) >= 0)
			return;
		ibvd_eng_port_count(qp, IBVD_PC_RCVD_SEQ_ERR, 1);
		acked_before(qp, w, p->psn);
		/*
		 * One go-back-N per progress (rxe's completer: one per
		 * completion, its started_retry).  NAKs that move nothing on
		 * would otherwise resend the window for ever, never reaching
		 * the timeout that spends retries, and each have a window's
		 * packets sent for one small packet.
		 */
		if (w->tx.nak_retried)
			return;
		w->tx.nak_retried = true;
		resend(qp, w, p->psn);
		return;
	}
	m = txm_of(w, p->psn, &at);
	if (!m || m->answer >= 0)
		return;
	acked_before(qp, w, p->psn);
	switch (syn) {
	case ROCE_AETH_NAK_INV:
		answer(qp, w, m, RESP_INV_REQ);
		return;
	case ROCE_AETH_NAK_ACCESS:
		answer(qp, w, m, RESP_ACCESS);
		return;
	default:
		answer(qp, w, m, RESP_OP_ERR);
		return;
	}
}

static void rx_ack(struct ibvd_qp *qp, struct roce_qp *w,
		   const struct roce_pkt *p)
{
	uint8_t syn = p->aeth.syndrome;
	struct roce_txm *m;
	uint32_t at;

	switch (ROCE_AETH_KIND(syn)) {
	case 0x00:			/* ACK */
		/*
		 * Only of what was sent (C9-114: a response outside the PSNs
		 * in flight is dropped): one of a PSN not sent yet would
		 * complete everything in flight that never arrived.
		 */
		if (roce_psn_diff(p->psn, w->tx.una_psn) < -1 ||
		    roce_psn_diff(p->psn, w->tx.next_psn) >= 0)
			return;
		acked_before(qp, w, roce_psn_add(p->psn, 1));
		return;
	case ROCE_AETH_RNR_NAK:
		m = txm_of(w, p->psn, &at);
		if (!m || m->answer >= 0 || w->tx.rnr_wait)
			return;
		ibvd_eng_port_count(qp, IBVD_PC_RCVD_RNR_ERR, 1);
		acked_before(qp, w, p->psn);
		w->tx.rnr_timer = syn & 0x1F;
		w->tx.resend_psn = p->psn;
		w->tx.rnr_wait = true;
		answer(qp, w, m, RESP_RNR);
		return;
	default:
		rx_ack_nak(qp, w, p);
		return;
	}
}


/*
 * Is p, response k of READ m (in order), framed as a responder frames it:
 * all but the last a full MTU, the last the rest of the step, its opcode
 * saying which, an AETH an ACK's?  A short FIRST or MIDDLE would leave
 * what came out of step with the PSNs, and no response could ever follow.
 */
static bool read_response_fits(const struct roce_txm *m, uint32_t k,
			       uint32_t mtu, const struct roce_pkt *p)
{
	uint8_t op = ROCE_OP_OPERATION(p->opcode);
	bool last = k + 1 == m->npsn;
	bool says_last = op == ROCE_RC_READ_RESPONSE_LAST ||
			 op == ROCE_RC_READ_RESPONSE_ONLY;

	if (last != says_last)
		return false;
	if ((p->hdrs & ROCE_HDR_AETH) && ROCE_AETH_KIND(p->aeth.syndrome) != 0)
		return false;
	return last ? p->payload_len == m->step - m->got
		    : p->payload_len == mtu;
}

/*
 * A READ run's data lands, if its READ is still waiting for it: a QP
 * gone to error since the packets came flushes the READ (or has), and
 * its buffer is the application's again.
 */
static void read_run_flush(struct ibvd_qp *qp, const struct roce_wrun *r)
{
	struct roce_qp *w = qp->wire;
	struct roce_txm *m;
	uint32_t at;
	int ret;

	m = txm_of(w, r->psn, &at);
	if (!m || m->first_psn != r->psn || m->answer >= 0 ||
	    m->w.opcode != IBV_WR_RDMA_READ ||
	    !ibvd_eng_can_receive(eng_qp_state(qp)))
		return;
	ret = ibvd_eng_mem_writev(r->fd, r->addr, r->iov, r->n);
	if (ret < 0)
		answer(qp, w, m, RESP_LOCAL_FAULT);
}

/* Response p of READ m lands (or is taken into the run): 0 or < 0. */
static int read_data(struct roce_dev *rd, struct ibvd_qp *qp,
		     struct roce_txm *m, const struct roce_pkt *p)
{
	uint64_t off = m->off + m->got, addr;
	struct eng_sgl sgl;
	int fd;

	roce_txm_sgl(m, &sgl);
	if (!ibvd_eng_sgl_current(&sgl, qp->pd, true))
		return -EFAULT;
	if (roce_rx_self == rd &&
	    ibvd_eng_sgl_client_piece(&sgl, off, p->payload_len, &fd, &addr)) {
		wrun_add(rd, qp, ROCE_WRUN_READ, m->first_psn, fd, addr, p);
		return 0;
	}
	return ibvd_eng_copy_in(&sgl, off, p->payload, p->payload_len);
}

static void rx_read_response(struct roce_dev *rd, struct ibvd_qp *qp,
			     struct roce_qp *w, const struct roce_pkt *p)
{
	uint32_t mtu = roce_path_mtu(qp);
	struct roce_txm *m;
	uint32_t at;
	int32_t k;

	m = txm_of(w, p->psn, &at);
	if (!m || m->answer >= 0 || m->w.opcode != IBV_WR_RDMA_READ)
		return;
	/* the responder executed everything before the READ */
	acked_before(qp, w, m->first_psn);
	k = roce_psn_diff(p->psn, m->first_psn);
	if ((uint64_t)k * mtu > m->got) {
		read_gap(qp, m);
		return;
	}
	/* in order only (an earlier one is a duplicate), and whole */
	if ((uint64_t)k * mtu != m->got ||
	    !read_response_fits(m, (uint32_t)k, mtu, p))
		return;
	if (m->got > m->read_from)
		m->read_gap = false;
	w->tx.heard_ns = roce_now_ns();
	if (p->payload_len && read_data(rd, qp, m, p) < 0) {
		answer(qp, w, m, RESP_LOCAL_FAULT);
		return;
	}
	m->got += p->payload_len;
	if (m->got != m->step || (uint32_t)k + 1 != m->npsn)
		return;
	/* the data lands before the completion says so; if it cannot, the
	 * completion says that instead */
	if (roce_rx_self == rd)
		wrun_flush_locked(rd);
	/* a QP that failed meanwhile flushes the READ, whatever landed */
	if (m->answer >= 0 || !ibvd_eng_can_receive(eng_qp_state(qp)))
		return;
	answer(qp, w, m, RESP_OK);
	if (w->tx.acked_past) {
		w->tx.acked_past = false;
		acked_before(qp, w, w->tx.acked_end);
	}
}

static void rx_atomic_ack(struct ibvd_qp *qp, struct roce_qp *w,
			  const struct roce_pkt *p)
{
	struct eng_sgl sgl;
	struct roce_txm *m;
	uint32_t at;

	m = txm_of(w, p->psn, &at);
	if (!m || m->answer >= 0 || !is_read_or_atomic(m->w.opcode) ||
	    m->w.opcode == IBV_WR_RDMA_READ)
		return;
	acked_before(qp, w, m->first_psn);
	roce_txm_sgl(m, &sgl);
	if (!ibvd_eng_sgl_current(&sgl, qp->pd, true) ||
	    ibvd_eng_copy_in(&sgl, 0, &p->atomic_ack, 8) < 0) {
		answer(qp, w, m, RESP_LOCAL_FAULT);
		return;
	}
	answer(qp, w, m, RESP_OK);
}

static void rx_answer(struct roce_dev *rd, struct ibvd_qp *qp,
		      struct roce_qp *w, const struct roce_pkt *p)
{
	uint8_t op = ROCE_OP_OPERATION(p->opcode);

	if (!w->tx.n)
		return;
	if (op == ROCE_RC_ACKNOWLEDGE)
		rx_ack(qp, w, p);
	else if (op == ROCE_RC_ATOMIC_ACKNOWLEDGE)
		rx_atomic_ack(qp, w, p);
	else
		rx_read_response(rd, qp, w, p);
}

/* ---- entry ----------------------------------------------------------------- */

bool roce_is_answer(uint8_t opcode)
{
	uint8_t op = ROCE_OP_OPERATION(opcode);

	return op >= ROCE_RC_READ_RESPONSE_FIRST && op <= ROCE_RC_ATOMIC_ACKNOWLEDGE;
}

void roce_rc_rx(struct roce_dev *rd, struct ibvd_qp *qp,
		const struct roce_ip *ip, const struct roce_pkt *p)
{
	struct roce_qp *w = roce_qp_of(qp);

	/* only from the address the QP is connected to, to its own (rxe's
	 * check_addr) */
	if (!w || w->path.family != ip->family ||
	    memcmp(w->path.dst, ip->src, 16) != 0 ||
	    memcmp(w->path.src, ip->dst, 16) != 0)
		return;
	/* a run of another QP's, or before anything that does not go on with it */
	if (roce_rx_self == rd && rd->wrun.qp &&
	    (rd->wrun.qp != qp || !wrun_goes_on(&rd->wrun, p->opcode)))
		roce_wrun_flush(rd);
	/* another QP's ACK: its lock is not this one */
	if (roce_rx_self == rd && rd->ack_due.qp && rd->ack_due.qp != qp)
		roce_ack_flush(rd);
	/* a run that could not land may have failed this QP just now */
	if (!ibvd_eng_can_receive(eng_qp_state(qp)))
		return;
	ibvd_eng_port_count(qp, IBVD_PC_RCVD_PKTS, 1);
	pthread_mutex_lock(&w->lock);
	if (roce_is_answer(p->opcode))
		rx_answer(rd, qp, w, p);
	else
		rx_request(rd, qp, w, ip, p);
	pthread_mutex_unlock(&w->lock);
}
