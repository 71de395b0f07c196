/*
 * Staging blocks (common/ring.h, "Staging"): where a QP's library copies
 * an RDMA WRITE's payload at post time, so that the engine reads it from
 * the ring arena it maps rather than from the client's memory through a
 * system call.  The engine's copy into the target is then the only one
 * through the kernel: per byte, one memcpy in the client and one pwrite
 * in the engine, against a pread and a pwrite.
 *
 * A block is carved from the client half of the QP's context's arena on
 * the library's first ask, counted with the context's rings, and goes
 * with the QP.  A context's blocks together stay under a share of its
 * ring budget, so that staging never takes room its queues need; a QP
 * refused one keeps posting SGEs, which the engine reads as before.
 */
#include <config.h>

#include <errno.h>

#include "config/config.h"
#include "core/device.h"
#include "server/call.h"
#include "verbs/context.h"
#include "verbs/rings/arena.h"
#include "verbs/verbs.h"

/* Bytes per QP (a power of two), 0 for none: the config's engine.staging. */
static uint32_t staging_bytes = IBVD_STAGING_DEFAULT;

void ibvd_staging_configure(uint32_t bytes)
{
	staging_bytes = bytes ? (uint32_t)ibvd_arena_block(bytes) : 0;
}

/*
 * RC and UC QPs of software devices.  A RoCE requester reads a message
 * again for each retransmission, its inline data from the WQE's slot
 * (transport/roce/rc.c, keep_req): staged bytes are not kept for it.
 */
static bool stages(const struct ibvd_qp *qp)
{
	return (qp->qp_type == IBV_QPT_RC || qp->qp_type == IBV_QPT_UC) &&
	       qp->ctx->dev->kind == IBVD_DEV_SOFT;
}

static int grant(struct ibvd_qp *qp, uint32_t bytes)
{
	struct ibvd_context *ctx = qp->ctx;
	uint64_t off;
	int ret;

	if (ctx->objs.staging_bytes + bytes > IBVD_CTX_MAX_STAGING_BYTES ||
	    ibvd_ctx_ring_charge(ctx, bytes) < 0)
		return -ENOSPC;
	ret = ibvd_arena_alloc(ctx->objs.arena, IBVD_HALF_CLIENT, bytes, &off);
	if (ret < 0) {
		ibvd_ctx_ring_uncharge(ctx, bytes);
		return ret == -ENOMEM ? -ENOSPC : ret;
	}
	ctx->objs.staging_bytes += bytes;
	/* The engine reads these under the objects lock. */
	ibvd_objects_write_lock();
	qp->staging.off = off;
	qp->staging.bytes = bytes;
	qp->staging.base = ibvd_arena_ptr(ctx->objs.arena, off);
	ibvd_objects_write_unlock();
	return 0;
}

int ibvd_req_qp_staging(struct ibvd_call *call)
{
	const Ibvd__Handle *req = (const Ibvd__Handle *)call->msg;
	Ibvd__QpStagingReply reply = IBVD__QP_STAGING_REPLY__INIT;
	struct ibvd_qp *qp = ibvd_call_qp(call, req->handle);
	uint32_t bytes = staging_bytes;
	int ret;

	if (!qp)
		return -EINVAL;
	if (!qp->staging.bytes) {
		if (!bytes || !stages(qp) || !qp->ctx->objs.arena)
			return ibvd_call_error(call, -EOPNOTSUPP,
					       "QP %u: no staging", qp->qp_num);
		ret = grant(qp, bytes);
		if (ret < 0)
			return ibvd_call_error(call, ret,
					       "QP %u: no staging block",
					       qp->qp_num);
	}
	reply.offset = qp->staging.off;
	reply.bytes = qp->staging.bytes;
	return ibvd_call_reply(call, &reply.base, NULL, 0);
}

void ibvd_staging_free(struct ibvd_qp *qp)
{
	struct ibvd_context *ctx = qp->ctx;

	if (!qp->staging.bytes)
		return;
	ibvd_arena_free(ctx->objs.arena, qp->staging.off, qp->staging.bytes);
	ctx->objs.staging_bytes -= qp->staging.bytes;
	ibvd_ctx_ring_uncharge(ctx, qp->staging.bytes);
	qp->staging.bytes = 0;
	qp->staging.base = NULL;
}
