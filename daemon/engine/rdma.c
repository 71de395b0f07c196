/*
 * The one-sided operations at the responder: RDMA WRITE (with or without
 * immediate), RDMA READ and the atomics (at the end), on its memory, checked against the rkey's MR
 * (protection domain of the target QP, access rights, bounds) and the
 * target QP's own access flags.  The responder's process does not run:
 * its memory is reached through its /proc/PID/mem or the MR's own mapping
 * (memory.c).
 *
 * Errors as an RC responder reports them: a key or bounds violation NAKs
 * with a remote access error and takes the responder QP to ERR with
 * IBV_EVENT_QP_ACCESS_ERR; the receive WQE a WRITE_WITH_IMM took
 * completes with IBV_WC_LOC_ACCESS_ERR first.  UC has no NAKs: a bad
 * write is dropped.
 */
#include <config.h>

#include <errno.h>

#include "internal.h"

static enum eng_resp access_violation(struct ibvd_qp *target, bool uc)
{
	if (uc)
		return RESP_OK;
	ibvd_eng_responder_error(target, IBV_EVENT_QP_ACCESS_ERR);
	return RESP_ACCESS;
}

static enum eng_resp write_data(struct ibvd_engine *eng, struct ibvd_qp *target,
				const struct eng_sgl *dst,
				const struct eng_req *req, bool uc)
{
	switch (ibvd_eng_copy_at(eng, dst, req->off, &req->local, req->off,
				 req->step)) {
	case ENG_COPY_SRC_FAULT:
	case ENG_COPY_SRC_GONE:
		return RESP_LOCAL_FAULT;
	case ENG_COPY_DST_FAULT:
		/* The registered range is no longer mapped by its owner. */
		return access_violation(target, uc);
	case ENG_COPY_DST_GONE:
		return uc ? RESP_OK : RESP_NO_ACK;
	case ENG_COPY_OK:
		break;
	}
	return RESP_OK;
}

/*
 * Under the receive lock, a later step of a chunked WRITE_WITH_IMM (chunk.c):
 * its data goes only while target still holds the message's WQE, and the
 * last step completes that.
 */
static enum eng_resp write_imm_next(struct ibvd_engine *eng,
				    struct ibvd_qp *src, struct ibvd_qp *target,
				    const struct eng_sgl *dst,
				    const struct eng_req *req,
				    const struct eng_rcv_info *info)
{
	bool uc = src->qp_type == IBV_QPT_UC;
	enum eng_resp r;

	/* Nothing to continue (UC dropped the start): as for no responder. */
	if (!ibvd_eng_held(src, target))
		return uc ? RESP_OK : RESP_NO_ACK;
	r = write_data(eng, target, dst, req, uc);
	if (r == RESP_OK && eng_req_last(req))
		ibvd_eng_held_complete(src, target, req, info);
	return r;
}

/*
 * Under the receive lock, with a WQE peeked: the data (of the first step,
 * if chunked) first, then the WQE is consumed, completed or held.
 */
static enum eng_resp write_imm_first(struct ibvd_engine *eng,
				     struct ibvd_qp *src, struct ibvd_qp *target,
				     const struct eng_sgl *dst,
				     const struct eng_rq *rq,
				     const struct eng_recv *rwqe,
				     const struct eng_req *req,
				     const struct eng_rcv_info *info)
{
	enum eng_resp r = write_data(eng, target, dst, req,
				     src->qp_type == IBV_QPT_UC);

	if (r != RESP_OK)
		return r;
	if (!eng_req_last(req))
		return ibvd_eng_hold(src, target, rq, rwqe);
	ibvd_eng_recv_complete(target, rq, rwqe, src, req, info);
	return RESP_OK;
}

/*
 * WRITE_WITH_IMM: the immediate consumes a receive WQE (its buffers are not
 * touched), so the WQE must exist before any data moves, else RNR.  With
 * target's RQ claim held; dst: the range the key names.
 */
static enum eng_resp write_imm_placed(struct ibvd_engine *eng,
				      struct ibvd_qp *src,
				      struct ibvd_qp *target,
				      const struct eng_sgl *dst,
				      const struct eng_req *req)
{
	struct eng_rcv_info info = {
		.opcode = IBV_WC_RECV_RDMA_WITH_IMM,
		.byte_len = (uint32_t)req->length,
		.solicited = req->w.send_flags & IBV_SEND_SOLICITED,
	};
	struct eng_recv rwqe;
	struct eng_rq rq;
	enum eng_resp r;
	int ret;

	ibvd_eng_rq_of(target, &rq);
	pthread_mutex_lock(rq.lock);
	if (req->off) {
		r = write_imm_next(eng, src, target, dst, req, &info);
	} else {
		ret = ibvd_eng_rq_peek(&rq, &rwqe);
		if (ret <= 0)
			r = ibvd_eng_no_recv(src, target, &rq, ret);
		else
			r = write_imm_first(eng, src, target, dst, &rq, &rwqe,
					    req, &info);
	}
	pthread_mutex_unlock(rq.lock);
	return r;
}

/* The key checked: dst, the range it names in target's memory. */
static bool write_target(struct ibvd_qp *src, struct ibvd_qp *target,
			 const struct eng_req *req, struct eng_sgl *dst)
{
	ibvd_eng_count_arrival(src, target, req);
	dst->n = 0;
	dst->total = 0;
	return ibvd_eng_rkey_resolve(target, req->w.rkey, req->w.remote_addr,
				     req->length, IBV_ACCESS_REMOTE_WRITE,
				     dst) == 0;
}

/*
 * An RC WRITE_WITH_IMM's first step refused by its key, with target's RQ
 * claim held: the receive WQE it takes completes with LOC_ACCESS_ERR
 * ("a protection error ... during the processing of a RDMA Write with
 * Immediate", ibv_poll_cq(3)), as rxe's responder completes it rather
 * than leaving it to the flush, before the QP goes to ERR.
 */
static enum eng_resp write_imm_refused(struct ibvd_qp *src,
				       struct ibvd_qp *target,
				       const struct eng_req *req)
{
	bool uc = src->qp_type == IBV_QPT_UC;
	struct eng_recv rwqe;
	struct eng_rq rq;

	if (!uc && !req->off) {
		ibvd_eng_rq_of(target, &rq);
		pthread_mutex_lock(rq.lock);
		if (ibvd_eng_rq_peek(&rq, &rwqe) > 0) {
			ibvd_eng_rq_consume(&rq);
			ibvd_eng_recv_err(target, rwqe.wr_id,
					  IBV_WC_LOC_ACCESS_ERR);
		}
		pthread_mutex_unlock(rq.lock);
	}
	return access_violation(target, uc);
}

/*
 * With target's RQ claim held.  As rxe's responder, the receive WQE comes
 * before the key: with none posted the answer is RNR whatever the key
 * (its requester retries, and the key is checked once a WQE is there).
 */
static enum eng_resp write_imm_claimed(struct ibvd_engine *eng,
				       struct ibvd_qp *src,
				       struct ibvd_qp *target,
				       const struct eng_req *req)
{
	struct eng_sgl dst;
	struct eng_recv rwqe;
	struct eng_rq rq;
	enum eng_resp r = RESP_OK;
	int ret = 1;

	if (!req->off) {
		ibvd_eng_rq_of(target, &rq);
		pthread_mutex_lock(rq.lock);
		ret = ibvd_eng_rq_peek(&rq, &rwqe);
		if (ret <= 0)
			r = ibvd_eng_no_recv(src, target, &rq, ret);
		pthread_mutex_unlock(rq.lock);
	}
	if (ret <= 0)
		return r;
	if (!write_target(src, target, req, &dst))
		return write_imm_refused(src, target, req);
	return write_imm_placed(eng, src, target, &dst, req);
}

enum eng_resp ibvd_eng_rdma_write(struct ibvd_engine *eng, struct ibvd_qp *src,
				  struct ibvd_qp *target,
				  const struct eng_req *req)
{
	bool uc = src->qp_type == IBV_QPT_UC;
	struct eng_sgl dst;

	if (req->w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		return ibvd_eng_rq_claimed(write_imm_claimed, eng, src,
					   target, req);
	if (!write_target(src, target, req, &dst))
		return access_violation(target, uc);
	return write_data(eng, target, &dst, req, uc);
}

enum eng_resp ibvd_eng_write_imm_claimed(struct ibvd_engine *eng,
					 struct ibvd_qp *src,
					 struct ibvd_qp *target,
					 const struct eng_req *req)
{
	return write_imm_claimed(eng, src, target, req);
}

/*
 * A responder that gave no resources for READs and atomics
 * (max_dest_rd_atomic 0) refuses them, as rxe does ("too many RDMA or
 * atomic requests"): an invalid request, and the responder errs.
 */
static bool no_rd_atomic(struct ibvd_qp *target)
{
	if (target->attr.max_dest_rd_atomic)
		return false;
	ibvd_eng_responder_error(target, IBV_EVENT_QP_REQ_ERR);
	return true;
}

enum eng_resp ibvd_eng_rdma_read(struct ibvd_engine *eng, struct ibvd_qp *src,
				 struct ibvd_qp *target,
				 const struct eng_req *req)
{
	struct eng_sgl remote;

	ibvd_eng_count_arrival(src, target, req);
	if (no_rd_atomic(target))
		return RESP_INV_REQ;
	remote.n = 0;
	remote.total = 0;
	if (ibvd_eng_rkey_resolve(target, req->w.rkey, req->w.remote_addr,
				  req->length, IBV_ACCESS_REMOTE_READ, &remote) < 0)
		return access_violation(target, false);
	/* Here the local buffers are the destination. */
	switch (ibvd_eng_copy_at(eng, &req->local, req->off, &remote, req->off,
				 req->step)) {
	case ENG_COPY_SRC_FAULT:
		return access_violation(target, false);
	case ENG_COPY_SRC_GONE:
		return RESP_NO_ACK;
	case ENG_COPY_DST_FAULT:
	case ENG_COPY_DST_GONE:
		return RESP_LOCAL_FAULT;
	case ENG_COPY_OK:
		break;
	}
	ibvd_eng_count_response(src, target, req);
	return RESP_OK;
}

/* ---- atomics -------------------------------------------------------------- */

/*
 * Atomic operations (RC): CMP_AND_SWP and FETCH_AND_ADD on an aligned
 * 64-bit word of the responder's memory, returning the original value
 * into the requester's buffer.
 *
 * The device reports IBV_ATOMIC_HCA: atomics are atomic with respect to
 * each other as this engine executes them (one engine-wide mutex around
 * read-modify-write, whichever tier reaches the word), not with respect to
 * the CPU of the memory's owner, exactly the guarantee an HCA gives.
 * Values are in host byte order.
 */
pthread_mutex_t ibvd_eng_atomic_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t apply(const void *arg, uint64_t old)
{
	const struct ibvd_send_wqe *w = arg;

	if (w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
		return old + w->compare_add;
	return old == w->compare_add ? w->swap : old;
}

/* Read-modify-write the word at seg: 0, -EFAULT, or -ESRCH (gone). */
static int rmw(const struct eng_seg *seg, const struct ibvd_send_wqe *w,
	       uint64_t *old)
{
	int ret;

	pthread_mutex_lock(&ibvd_eng_atomic_lock);
	ret = ibvd_eng_word_rmw(seg, apply, w, old);
	pthread_mutex_unlock(&ibvd_eng_atomic_lock);
	return ret;
}

enum eng_resp ibvd_eng_atomic(struct ibvd_engine *eng, struct ibvd_qp *src,
			      struct ibvd_qp *target, const struct eng_req *req)
{
	struct eng_sgl remote, result;
	uint64_t old;
	int ret;

	ibvd_eng_count_arrival(src, target, req);
	remote.n = result.n = 0;
	remote.total = result.total = 0;
	if (no_rd_atomic(target))
		return RESP_INV_REQ;
	/* A misaligned atomic is an invalid request (IB 9.4.5). */
	if (req->w.remote_addr & 7) {
		ibvd_eng_responder_error(target, IBV_EVENT_QP_REQ_ERR);
		return RESP_INV_REQ;
	}
	ret = ibvd_eng_rkey_resolve(target, req->w.rkey, req->w.remote_addr,
				    sizeof(old), IBV_ACCESS_REMOTE_ATOMIC, &remote);
	/* and the word itself: a zero-based window may sit anywhere */
	if (ret == 0 && (remote.seg[0].addr & 7)) {
		ibvd_eng_responder_error(target, IBV_EVENT_QP_REQ_ERR);
		return RESP_INV_REQ;
	}
	if (ret == 0)
		ret = rmw(&remote.seg[0], &req->w, &old);
	if (ret == -ESRCH)
		return RESP_NO_ACK;	/* the responder's process is gone */
	if (ret < 0) {
		ibvd_eng_responder_error(target, IBV_EVENT_QP_ACCESS_ERR);
		return RESP_ACCESS;
	}
	ibvd_eng_count_response(src, target, req);
	ibvd_eng_sgl_private(&result, &old, sizeof(old));
	/* The requester's buffer is at least 8 bytes (wqe.c). */
	if (ibvd_eng_copy(eng, &req->local, 0, &result, sizeof(old)) != ENG_COPY_OK)
		return RESP_LOCAL_FAULT;
	return RESP_OK;
}
