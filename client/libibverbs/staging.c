/*
 * Staging (common/ring.h, "Staging"): the payload of an RDMA WRITE too
 * large to go inline is copied at post time into the QP's staging block,
 * a part of the ring arena the engine maps, so that the engine reads it
 * there instead of from our memory with a system call of its own: one
 * memcpy here, on the poster's CPU, in place of the engine's pread of
 * /proc/PID/mem (bench/RESULTS-copies.md, "Staging").
 *
 * The block is a byte ring, filled in posting order.  Each SQ slot
 * records how far the ring was filled once its WQE was written; when the
 * engine's head passes a slot, everything up to that mark is free again.
 * A WRITE that does not fit now is posted with its SGEs, as without a
 * block: posting never waits for the engine.  A QP asks the daemon for a
 * block once, at its first WRITE that could use one.
 *
 * As with copy_early (post.c), only buffers inside MRs this process
 * registered are copied (ibvc_copyable_sges), and a copy that faults on a
 * file truncated under its MR is posted with its SGEs instead: anything
 * else goes to the engine, which reports it.  The app may not touch a
 * buffer before its completion, so reading it at post changes nothing
 * it can see, unless a READ or an atomic posted before on the QP is
 * still to write it: a WRITE fenced behind a READ sends what the READ
 * brought (IBV_SEND_FENCE).  So nothing is read early while the engine
 * has not retired such a WQE (ibvc_early_read_ok).
 */
#include <config.h>

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "barrier.h"
#include "ibvd_verbs.h"

/*
 * A post waits for room while the engine's head moves, until it stood
 * still this long; it spins the first STAGE_SPIN_NS, then yields.
 */
#define STAGE_WAIT_NS	100000ull
#define STAGE_SPIN_NS	5000ull

/* A WRITE of a QP that has a block, or may get one. */
static bool may_stage(const struct ibvc_qp *qp, uint32_t opcode)
{
	return (opcode == IBV_WR_RDMA_WRITE ||
		opcode == IBV_WR_RDMA_WRITE_WITH_IMM) &&
	       (qp->staging.base || !qp->staging.asked);
}

/*
 * Marks for twice the SQ's slots: a post that fills the SQ writes the
 * mark of slot head - 1 + nslots while reclaim may still want the one of
 * head - 1 (the engine's head as last seen), which must not be the same.
 */
static uint32_t ends_len(const struct ibvc_qp *qp)
{
	return 2 * qp->sq.nslots;
}

/* SQ lock held: ask the daemon for the QP's block, once. */
static void ask(struct ibvc_qp *qp)
{
	struct ibvc_context *ctx = to_ibvc_context(qp->qp.context);
	struct ibvc_staging *s = &qp->staging;
	Ibvd__Handle req = IBVD__HANDLE__INIT;
	Ibvd__QpStagingReply *reply;
	uint32_t *ends;
	uint8_t *base;

	s->asked = true;
	req.handle = qp->qp.handle;
	if (ibvd_conn_call(ibvc_conn_of(qp->qp.context), IBVD_MSG_QP_STAGING,
			   &req.base, &ibvd__qp_staging_reply__descriptor,
			   (ProtobufCMessage **)&reply, NULL, NULL) < 0)
		return;
	base = ibvc_arena_client_block(ctx, reply->offset, reply->bytes);
	ends = calloc(ends_len(qp), sizeof(*ends));
	if (base && ends && reply->bytes &&
	    !(reply->bytes & (reply->bytes - 1))) {
		s->ends = ends;
		s->bytes = reply->bytes;
		s->produced = s->released = 0;
		s->seen_head = ibvd_observe(&qp->sq.engine->head);
		/* Last: posters look at base to know the block is usable. */
		s->base = base;
	} else {
		free(ends);
	}
	ibvd__qp_staging_reply__free_unpacked(reply, NULL);
}

/* Room the engine is done with: up to the mark of the last slot it took. */
static void reclaim(struct ibvc_qp *qp)
{
	struct ibvc_staging *s = &qp->staging;
	/* Acquire: the engine read the data of the WQEs below head. */
	uint32_t head = ibvd_observe(&qp->sq.engine->head);

	if (head == s->seen_head)
		return;
	s->released = s->ends[(head - 1) & (ends_len(qp) - 1)];
	s->seen_head = head;
	s->stalled = false;
}

/* Where len bytes fit in the ring now, contiguous: 0, or -ENOSPC. */
static int room(struct ibvc_staging *s, uint32_t len, uint32_t *offset)
{
	uint32_t pos = s->produced & (s->bytes - 1);
	uint32_t skip = pos + len > s->bytes ? s->bytes - pos : 0;

	if (s->produced - s->released + skip + len > s->bytes)
		return -ENOSPC;
	s->produced += skip;
	*offset = skip ? 0 : pos;
	s->produced += len;
	return 0;
}

static void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Room for len bytes, waiting a little for the engine if the block is
 * full of WQEs it can see.  Waiting is worth it: the engine frees a
 * message's room in about the time of its copy, and a WRITE posted with
 * SGEs instead costs it a read of our memory through the kernel, slower
 * than our memcpy and its cache-hot read of the block together
 * (bench/RESULTS-copies.md, "Staging").  No wait when the room is held by
 * WQEs of this post, which the engine cannot see before it returns, nor
 * while the engine stands still at the head where it last let a wait run
 * out (a WRITE with immediate waiting for a receive, a paced tenant, a
 * chunked giant).
 */
static int make_room(struct ibvc_qp *qp, uint32_t len, uint32_t *off)
{
	struct ibvc_staging *s = &qp->staging;
	uint64_t start, deadline;

	reclaim(qp);
	if (room(s, len, off) == 0)
		return 0;
	if (s->unpublished || s->stalled)
		return -ENOSPC;
	start = now_ns();
	deadline = start + STAGE_WAIT_NS;
	do {
		uint32_t head = s->seen_head;
		uint64_t now;

		reclaim(qp);
		if (room(s, len, off) == 0)
			return 0;
		now = now_ns();
		if (s->seen_head != head)
			deadline = now + STAGE_WAIT_NS;
		/* an engine thread on our CPU gets it */
		if (now - start > STAGE_SPIN_NS)
			sched_yield();
		else
			relax();
	} while (now_ns() < deadline);
	s->stalled = true;	/* until the head moves */
	return -ENOSPC;
}

struct stage_copy {
	uint8_t *dst;
	const struct ibv_sge *sge;
	int num_sge;
};

static void stage_copy(void *arg)
{
	const struct stage_copy *c = arg;
	uint8_t *dst = c->dst;
	int i;

	for (i = 0; i < c->num_sge; i++) {
		ibvc_copy(dst, (const void *)(uintptr_t)c->sge[i].addr,
			  c->sge[i].length);
		dst += c->sge[i].length;
	}
}

bool ibvc_stage(struct ibvc_qp *qp, struct ibvd_send_wqe *wqe,
		const struct ibv_sge *sge, int num_sge)
{
	struct ibvc_staging *s = &qp->staging;
	struct ibvd_staged body;
	struct stage_copy c;
	uint64_t total = 0;
	uint32_t off, produced;
	int i;

	if (!may_stage(qp, wqe->opcode))
		return false;
	for (i = 0; i < num_sge; i++)
		total += sge[i].length;
	if (total <= qp->cap.max_inline_data ||
	    !ibvc_copyable_sges(qp, sge, num_sge) || !ibvc_early_read_ok(qp))
		return false;
	if (!s->asked)
		ask(qp);
	/* Half the block at most, so that one message never holds it all. */
	if (!s->base || total > s->bytes / 2)
		return false;
	produced = s->produced;
	if (make_room(qp, (uint32_t)total, &off) < 0)
		return false;
	c = (struct stage_copy){ .dst = s->base + off, .sge = sge,
				 .num_sge = num_sge };
	if (!ibvc_guarded(stage_copy, &c)) {
		s->produced = produced;	/* nothing of it was published */
		return false;
	}
	s->unpublished = true;
	body.offset = off;
	body.length = (uint32_t)total;
	memcpy((uint8_t *)wqe + IBVD_SEND_WQE_HDR, &body, sizeof(body));
	wqe->send_flags = (wqe->send_flags & ~(uint32_t)IBV_SEND_INLINE) |
			  IBVD_SEND_STAGED;
	wqe->num_sge = 0;
	wqe->inline_len = 0;
	return true;
}

void ibvc_stage_mark(struct ibvc_qp *qp, uint32_t sq_counter, uint32_t opcode)
{
	struct ibvc_staging *s = &qp->staging;

	if (opcode == IBV_WR_RDMA_READ || opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	    opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		s->reads_pending = true;
		s->reads_until = sq_counter + 1;
	}
	if (s->base)
		s->ends[sq_counter & (ends_len(qp) - 1)] = s->produced;
}

bool ibvc_early_read_ok(struct ibvc_qp *qp)
{
	struct ibvc_staging *s = &qp->staging;

	if (!s->reads_pending)
		return true;
	/* Acquire: the engine is done with the WQEs below head. */
	if ((int32_t)(ibvd_observe(&qp->sq.engine->head) - s->reads_until) < 0)
		return false;
	s->reads_pending = false;
	return true;
}

void ibvc_stage_published(struct ibvc_qp *qp)
{
	qp->staging.unpublished = false;
}

void ibvc_stage_reset(struct ibvc_qp *qp)
{
	struct ibvc_staging *s = &qp->staging;

	pthread_mutex_lock(&qp->sq.lock);
	s->reads_pending = false;
	if (!s->base) {
		pthread_mutex_unlock(&qp->sq.lock);
		return;
	}
	memset(s->ends, 0, ends_len(qp) * sizeof(*s->ends));
	s->produced = s->released = 0;
	s->seen_head = ibvd_observe(&qp->sq.engine->head);
	pthread_mutex_unlock(&qp->sq.lock);
}

void ibvc_stage_free(struct ibvc_qp *qp)
{
	free(qp->staging.ends);
	memset(&qp->staging, 0, sizeof(qp->staging));
}
