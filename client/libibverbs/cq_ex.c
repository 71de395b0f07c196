/*
 * Extended CQs: ibv_create_cq_ex and the ibv_cq_ex poll API
 * (ibv_create_cq_ex(3)): ibv_start_poll, ibv_next_poll and ibv_end_poll
 * walk the CQ one completion at a time, and ibv_wc_read_* report the
 * fields of the current one.  pyverbs and ibv_rc_pingpong -t use it.
 *
 * The CQ itself is an ordinary one (cq.c) whose struct has room for the
 * ibv_cq_ex fields, so ibv_poll_cq, ibv_req_notify_cq, completion events,
 * ibv_resize_cq and ibv_destroy_cq work on it unchanged.  Polling shares
 * the ring consumer of ibv_poll_cq (poll.c): start_poll takes the CQ lock
 * (unless the app promised a single thread), copies each CQE out as it
 * takes it, and end_poll hands the batch's slots back to the engine.
 * The batch holds the CQ lock; the thread that holds it may still arm
 * the CQ, reset or destroy a QP from inside the batch (ibvc_cq_lock skips
 * the lock for it), as a NIC's library lets it.
 */
#include "config.h"

#include "ibvd_verbs.h"

/* ibv_cq_ex_to_cq() is a cast: the ibv_cq fields are its prefix. */
_Static_assert(offsetof(struct ibvc_cq, cq) == 0 &&
	       offsetof(struct ibvc_cq, cq_ex) == 0, "CQ must start our CQ");
_Static_assert(offsetof(struct ibv_cq_ex, comp_mask) == sizeof(struct ibv_cq),
	       "ibv_cq_ex extends ibv_cq");
_Static_assert(offsetof(struct ibv_cq_ex, async_events_completed) ==
	       offsetof(struct ibv_cq, async_events_completed),
	       "ibv_cq_ex begins like ibv_cq");

/*
 * What a CQE carries is what struct ibv_wc carries, plus the engine's
 * timestamp (clock.c); CVLAN, flow tags and tag matching do not exist on
 * our devices.
 */
#define WC_FLAGS_SUPPORTED	((uint64_t)IBV_WC_STANDARD_FLAGS |		\
				 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |		\
				 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
#define COMP_MASK_KNOWN		(IBV_CQ_INIT_ATTR_MASK_FLAGS | \
				 IBV_CQ_INIT_ATTR_MASK_PD)
#define CREATE_FLAGS_KNOWN	(IBV_CREATE_CQ_ATTR_SINGLE_THREADED | \
				 IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN)

static struct ibvc_cq *cqx_to_cq(struct ibv_cq_ex *cqx)
{
	return container_of(cqx, struct ibvc_cq, cq_ex);
}

/* ---- polling ------------------------------------------------------------ */

/*
 * A batch holds the CQ lock, and notes its thread: a post from inside
 * the batch must not take that lock again (ibvc_direct_refresh).  Also
 * with IBV_CREATE_CQ_ATTR_SINGLE_THREADED: that promises one thread on
 * the CQ, but posts to its QPs from other threads change what the batch
 * reads (the direct path's lists and FIFO, a UD pair let go), under this
 * lock; uncontended, it costs the batch two atomic operations.
 */
static void lock(struct ibvc_cq *cq)
{
	pthread_mutex_lock(&cq->lock);
	__atomic_store_n(&cq->batch_thread, (uintptr_t)pthread_self(),
			 __ATOMIC_RELAXED);
}

static void unlock(struct ibvc_cq *cq)
{
	__atomic_store_n(&cq->batch_thread, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&cq->lock);
}

/* Make the next CQE current; false if there is none. */
static bool take(struct ibvc_cq *cq)
{
	if (!ibvc_direct_next(cq, &cq->seen_tail, &cq->cur))
		return false;
	/* Apps read these two straight from the struct. */
	cq->cq_ex.wr_id = cq->cur.wr_id;
	cq->cq_ex.status = (enum ibv_wc_status)cq->cur.status;
	return true;
}

/* The poll ops are public: they return 0 or a positive errno. */
/* Locked and holding the first completion, or unlocked and empty. */
static bool first_take(struct ibvc_cq *cq)
{
	lock(cq);
	ibvc_cq_look(cq);
	cq->seen_tail = cq->ring.head;	/* read the tail first thing */
	ibvc_direct_poll_begin(cq, &cq->seen_tail);
	if (take(cq)) {
		ibvc_cq_polled(cq, false);
		return true;
	}
	/* No end_poll follows a failed start_poll (ibv_create_cq_ex(3)). */
	ibvc_cq_polled(cq, true);
	unlock(cq);
	return false;
}

static int start_poll(struct ibv_cq_ex *cqx, struct ibv_poll_cq_attr *attr)
{
	struct ibvc_cq *cq = cqx_to_cq(cqx);

	if (attr && attr->comp_mask)
		return EINVAL;
	ibvc_direct_cq_check(cq);
	if (first_take(cq))
		return 0;
	/* as ibv_poll_cq (poll.c): what came while we yielded is ours now */
	if (ibvc_yield_to_woken_engine(to_ibvc_context(cqx->context)) &&
	    first_take(cq))
		return 0;
	return ENOENT;
}

static int next_poll(struct ibv_cq_ex *cqx)
{
	struct ibvc_cq *cq = cqx_to_cq(cqx);

	if (take(cq))
		return 0;
	ibvc_cq_polled(cq, true);
	return ENOENT;
}

static void end_poll(struct ibv_cq_ex *cqx)
{
	struct ibvc_cq *cq = cqx_to_cq(cqx);
	/* ibv_next_poll found the end: the batch left nothing behind */
	bool found_end = cq->polled, left;

	ibvc_cq_polled(cq, true);
	ibvc_cq_ring_release(&cq->ring);
	/*
	 * As ibv_poll_cq when it leaves completions behind (poll.c); not
	 * after the end was found: what the CQ holds came after the batch
	 * looked, and fires the arm as it comes.
	 */
	left = !found_end && ibvc_cq_missed(cq);
	unlock(cq);
	ibvc_direct_batch_ended(cq);
	if (left)
		ibvc_direct_fire_missed(cq);
}

/* ---- the current completion's fields ----------------------------------- */

static enum ibv_wc_opcode read_opcode(struct ibv_cq_ex *cqx)
{
	return (enum ibv_wc_opcode)cqx_to_cq(cqx)->cur.opcode;
}

static uint32_t read_vendor_err(struct ibv_cq_ex *cqx)
{
	return cqx_to_cq(cqx)->cur.vendor_err;
}

static uint32_t read_byte_len(struct ibv_cq_ex *cqx)
{
	return cqx_to_cq(cqx)->cur.byte_len;
}

/* Also ibv_wc_read_invalidated_rkey(): with IBV_WC_WITH_INV it is there. */
static __be32 read_imm_data(struct ibv_cq_ex *cqx)
{
	return (__be32)cqx_to_cq(cqx)->cur.imm_data;
}

static uint32_t read_qp_num(struct ibv_cq_ex *cqx)
{
	return cqx_to_cq(cqx)->cur.qp_num;
}

static uint32_t read_src_qp(struct ibv_cq_ex *cqx)
{
	return cqx_to_cq(cqx)->cur.src_qp;
}

static unsigned int read_wc_flags(struct ibv_cq_ex *cqx)
{
	return cqx_to_cq(cqx)->cur.wc_flags;
}

static uint32_t read_slid(struct ibv_cq_ex *cqx)
{
	return cqx_to_cq(cqx)->cur.slid;
}

static uint8_t read_sl(struct ibv_cq_ex *cqx)
{
	return cqx_to_cq(cqx)->cur.sl;
}

static uint8_t read_dlid_path_bits(struct ibv_cq_ex *cqx)
{
	return cqx_to_cq(cqx)->cur.dlid_path_bits;
}

static uint64_t read_completion_ts(struct ibv_cq_ex *cqx)
{
	return cqx_to_cq(cqx)->cur.timestamp;
}

static uint64_t read_completion_wallclock_ns(struct ibv_cq_ex *cqx)
{
	return ibvc_clock_to_wallclock_ns(cqx_to_cq(cqx)->cur.timestamp);
}

/*
 * Every reader is set whatever wc_flags asked for: they cost nothing.  The
 * readers of fields we cannot report stay NULL, as with any provider that
 * was not asked for them; create_cq_ex refused those flags.
 */
static void cq_ex_init(struct ibvc_cq *cq, uint32_t flags)
{
	struct ibv_cq_ex *cqx = &cq->cq_ex;

	cq->single_threaded = flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
	cqx->start_poll = start_poll;
	cqx->next_poll = next_poll;
	cqx->end_poll = end_poll;
	cqx->read_opcode = read_opcode;
	cqx->read_vendor_err = read_vendor_err;
	cqx->read_byte_len = read_byte_len;
	cqx->read_imm_data = read_imm_data;
	cqx->read_qp_num = read_qp_num;
	cqx->read_src_qp = read_src_qp;
	cqx->read_wc_flags = read_wc_flags;
	cqx->read_slid = read_slid;
	cqx->read_sl = read_sl;
	cqx->read_dlid_path_bits = read_dlid_path_bits;
	cqx->read_completion_ts = read_completion_ts;
	cqx->read_completion_wallclock_ns = read_completion_wallclock_ns;
}

/* ---- creation ----------------------------------------------------------- */

static uint32_t create_flags(const struct ibv_cq_init_attr_ex *attr)
{
	return attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS ? attr->flags : 0;
}

/*
 * Unknown bits are EINVAL; known features we lack are EOPNOTSUPP, which
 * callers such as the pyverbs tests take as "skip".
 */
static int check_attr(const struct ibv_cq_init_attr_ex *attr)
{
	uint32_t flags = create_flags(attr);

	if ((attr->comp_mask & ~COMP_MASK_KNOWN) ||
	    (flags & ~CREATE_FLAGS_KNOWN))
		return -EINVAL;
	if (attr->wc_flags & ~WC_FLAGS_SUPPORTED)
		return -EOPNOTSUPP;
	/* a parent domain, as verbs requires, of this context */
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
	    (!attr->parent_domain || !to_ibvc_pd(attr->parent_domain)->parent))
		return -EINVAL;
	/*
	 * An overrun is a CQ error that the engine reports as an async event
	 * (ring.h); it cannot be told to overwrite CQEs instead.
	 */
	if (flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN)
		return -EOPNOTSUPP;
	if (attr->cqe > INT32_MAX || attr->comp_vector > INT32_MAX)
		return -EINVAL;
	return 0;
}

static int create_cq_ex(struct ibv_context *ctx,
			const struct ibv_cq_init_attr_ex *attr,
			struct ibvc_cq **ret_cq)
{
	struct ibvc_cq *cq;
	uint32_t flags;
	int ret;

	if (!ctx || !attr)
		return -EINVAL;
	ret = check_attr(attr);
	if (ret < 0)
		return ret;
	ret = ibvc_create_cq(ctx, (int)attr->cqe, attr->cq_context,
			     attr->channel, (int)attr->comp_vector, &cq);
	if (ret < 0)
		return ret;
	flags = create_flags(attr);
	if (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) {
		cq->parent_domain = attr->parent_domain;
		ibvc_pd_hold(cq->parent_domain);
		/* a thread domain's promise: one thread at a time */
		if (ibvc_pd_single_threaded(cq->parent_domain))
			flags |= IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
	}
	cq->timestamps = attr->wc_flags &
			 (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
			  IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK);
	cq_ex_init(cq, flags);
	*ret_cq = cq;
	return 0;
}

/* verbs_context op behind ibv_create_cq_ex(). */
struct ibv_cq_ex *ibvc_create_cq_ex_op(struct ibv_context *ctx,
				       struct ibv_cq_init_attr_ex *attr)
{
	struct ibvc_cq *cq;
	int ret;

	ret = create_cq_ex(ctx, attr, &cq);
	return ret < 0 ? ibvc_null_ret(ret) : &cq->cq_ex;
}
