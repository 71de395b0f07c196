/*
 * Atomic operations (RC): CMP_AND_SWP and FETCH_AND_ADD on an aligned
 * 64-bit word of the responder's memory, returning the original value
 * into the requester's buffer.
 *
 * The device reports IBV_ATOMIC_HCA: atomics are atomic with respect to
 * each other as this engine executes them (one engine-wide mutex around
 * read-modify-write), not with respect to the CPU of the memory's owner,
 * exactly the guarantee an HCA gives.  Values are in host byte order.
 */
#include <config.h>

#include "internal.h"

pthread_mutex_t ibvd_eng_atomic_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t apply(const struct ibvd_send_wqe *w, uint64_t old)
{
	if (w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
		return old + w->compare_add;
	return old == w->compare_add ? w->swap : old;
}

/* Read-modify-write the word at seg; false if the memory failed. */
static bool rmw(const struct eng_seg *seg, const struct ibvd_send_wqe *w,
		uint64_t *old)
{
	uint64_t new;
	bool ok = false;

	pthread_mutex_lock(&ibvd_eng_atomic_lock);
	if (ibvd_eng_mem_read(seg->fd, seg->addr, old, sizeof(*old)) < 0)
		goto out;
	new = apply(w, *old);
	/* An unsuccessful compare writes nothing, as on a NIC. */
	if (new != *old &&
	    ibvd_eng_mem_write(seg->fd, seg->addr, &new, sizeof(new)) < 0)
		goto out;
	ok = true;
out:
	pthread_mutex_unlock(&ibvd_eng_atomic_lock);
	return ok;
}

enum eng_resp ibvd_eng_atomic(struct ibvd_engine *eng, struct ibvd_qp *src,
			      struct ibvd_qp *target, const struct eng_req *req)
{
	struct eng_sgl remote, result;
	uint64_t old;

	ibvd_eng_count_arrival(src, target, req);
	remote.n = result.n = 0;
	remote.total = result.total = 0;
	/* A misaligned atomic is an invalid request (IB 9.4.5). */
	if (req->w.remote_addr & 7) {
		ibvd_eng_responder_error(target, IBV_EVENT_QP_REQ_ERR);
		return RESP_INV_REQ;
	}
	if (ibvd_eng_rkey_resolve(target, req->w.rkey, req->w.remote_addr,
				  sizeof(old), IBV_ACCESS_REMOTE_ATOMIC, &remote) < 0 ||
	    !rmw(&remote.seg[0], &req->w, &old)) {
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
