/*
 * Memory windows on the data path: BIND_MW and LOCAL_INV as work requests
 * of the QP that posts them, SEND_WITH_INV's invalidation at the
 * responder, and remote access through a window's key (IB spec 10.6.7,
 * 9.4.1.1).
 *
 * Rules this device keeps:
 * - a window, the QP binding it and the MR behind it share one PD;
 * - the MR has IBV_ACCESS_MW_BIND and the window's range lies within it;
 *   the window's remote rights need not be the MR's own (an MR may be
 *   reachable remotely only through windows), but REMOTE_WRITE or
 *   REMOTE_ATOMIC need LOCAL_WRITE on the MR;
 * - a type-1 window may be rebound at any time (length 0 unbinds it); a
 *   type-2 window must be free to bind, is tied to the QP that bound it
 *   (remote access must arrive at that QP), and only invalidation (or
 *   destroying that QP, ../mw.c) frees it; type-1 windows cannot be
 *   invalidated;
 * - the new key keeps the window's index; its low byte is the client's.
 * Any violation completes the WQE with IBV_WC_MW_BIND_ERR.
 *
 * A window's binding changes under its own lock (objects.h): the owner's
 * thread binds, any thread may invalidate (SEND_WITH_INV) or read it.
 */
#include <config.h>

#include "internal.h"
#include "util.h"

#define MW_RIGHTS	(IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | \
			 IBV_ACCESS_REMOTE_ATOMIC)

static bool same_index(uint32_t a, uint32_t b)
{
	return a >> 8 == b >> 8;
}

/* The window named by key, if it belongs to qp's context and PD. */
static struct ibvd_mw *mw_of(const struct ibvd_qp *qp, uint32_t key)
{
	struct ibvd_mw *mw = ibvd_mw_by_index(key);

	if (!mw || mw->ctx != qp->ctx || mw->pd != qp->pd)
		return NULL;
	return mw;
}

/* Is the MR and the range and rights asked for fit for the window? */
static struct ibvd_mr *bind_target(const struct ibvd_qp *qp,
				   const struct ibvd_mw *mw,
				   const struct ibvd_send_wqe *w)
{
	struct ibvd_mr *mr = ibvd_mr_by_lkey(w->mr_lkey);
	uint32_t rights = w->mw_access & ~(uint32_t)(IBV_ACCESS_LOCAL_WRITE |
						     IBV_ACCESS_ZERO_BASED);
	uint32_t writes = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;

	if (!mr || mr->pd != qp->pd || !(mr->access & IBV_ACCESS_MW_BIND))
		return NULL;
	/* zero-based: type 2 only (C10-73), as rxe has it */
	if ((w->mw_access & IBV_ACCESS_ZERO_BASED) && mw->type != IBV_MW_TYPE_2)
		return NULL;
	if (rights & ~(uint32_t)MW_RIGHTS)
		return NULL;
	if (rights & writes && !(mr->access & IBV_ACCESS_LOCAL_WRITE))
		return NULL;
	if (!ibvd_in_range(mr->iova, mr->length, w->remote_addr, w->compare_add))
		return NULL;
	return mr;
}

/* Under mw->lock: point the window at mr (NULL: unbound) with key. */
static void mw_set(struct ibvd_mw *mw, struct ibvd_mr *mr, uint32_t key)
{
	if (mw->mr)
		__atomic_fetch_sub(&mw->mr->mw_binds, 1, __ATOMIC_RELAXED);
	if (mr)
		__atomic_fetch_add(&mr->mw_binds, 1, __ATOMIC_RELAXED);
	mw->mr = mr;
	mw->rkey = key;
}

static bool type1_unbind(const struct ibvd_mw *mw,
			 const struct ibvd_send_wqe *w)
{
	return mw->type == IBV_MW_TYPE_1 && w->compare_add == 0;
}

enum ibv_wc_status ibvd_eng_bind_mw(const struct ibvd_qp *qp,
				    const struct ibvd_send_wqe *w)
{
	struct ibvd_mw *mw = mw_of(qp, w->mw_key);
	struct ibvd_mr *mr = NULL;
	enum ibv_wc_status st = IBV_WC_MW_BIND_ERR;

	/* mw_of matched mw_key's index: no need to read mw->rkey unlocked. */
	if (!mw || !same_index(w->rkey, w->mw_key))
		return IBV_WC_MW_BIND_ERR;
	/* A type 2 window is invalidated, never bound to nothing (o10-37.2.40). */
	if (mw->type == IBV_MW_TYPE_2 && w->compare_add == 0)
		return IBV_WC_MW_BIND_ERR;
	if (!type1_unbind(mw, w)) {
		mr = bind_target(qp, mw, w);
		if (!mr)
			return IBV_WC_MW_BIND_ERR;
	}
	pthread_mutex_lock(&mw->lock);
	if (mw->type == IBV_MW_TYPE_1 || !mw->mr) {
		mw_set(mw, mr, w->rkey);
		mw->access = w->mw_access & MW_RIGHTS;
		mw->addr = w->remote_addr;
		mw->length = w->compare_add;
		mw->zero_based = mr && (w->mw_access & IBV_ACCESS_ZERO_BASED);
		mw->qp_num = qp->qp_num;
		/* the engine's own field of the QP it serves (objects.h) */
		if (mw->type == IBV_MW_TYPE_2)
			__atomic_store_n(&((struct ibvd_qp *)qp)->mw2_bound, 1,
					 __ATOMIC_RELAXED);
		st = IBV_WC_SUCCESS;
	}
	pthread_mutex_unlock(&mw->lock);
	return st;
}

/*
 * Unbind the type-2 window whose current key is key, bound to qp_num (any
 * QP if 0); only check that it could be if !commit.  0 or -EINVAL.
 */
static int invalidate(struct ibvd_mw *mw, uint32_t key, uint32_t qp_num,
		      bool commit)
{
	int ret = -EINVAL;

	if (!mw || mw->type != IBV_MW_TYPE_2)
		return -EINVAL;
	pthread_mutex_lock(&mw->lock);
	if (mw->mr && mw->rkey == key && (!qp_num || mw->qp_num == qp_num)) {
		if (commit)
			mw_set(mw, NULL, key);
		ret = 0;
	}
	pthread_mutex_unlock(&mw->lock);
	return ret;
}

enum ibv_wc_status ibvd_eng_local_inv(const struct ibvd_qp *qp, uint32_t key)
{
	return invalidate(mw_of(qp, key), key, 0, true) ? IBV_WC_MW_BIND_ERR :
							  IBV_WC_SUCCESS;
}

int ibvd_eng_remote_inv(const struct ibvd_qp *target, uint32_t key,
			bool commit)
{
	return invalidate(mw_of(target, key), key, target->qp_num, commit);
}

const struct ibvd_mr *ibvd_eng_mw_resolve(const struct ibvd_qp *target,
					  uint32_t rkey, uint64_t *raddr,
					  uint64_t len, uint32_t access)
{
	struct ibvd_mw *mw = mw_of(target, rkey);
	const struct ibvd_mr *mr = NULL;

	if (!mw)
		return NULL;
	pthread_mutex_lock(&mw->lock);
	if (mw->mr && mw->rkey == rkey && (mw->access & access) == access &&
	    ibvd_in_range(mw->zero_based ? 0 : mw->addr, mw->length, *raddr,
			  len) &&
	    (mw->type == IBV_MW_TYPE_1 || mw->qp_num == target->qp_num)) {
		mr = mw->mr;
		if (mw->zero_based)
			*raddr += mw->addr;	/* in range: no overflow */
	}
	pthread_mutex_unlock(&mw->lock);
	/* Still registered: DEREG_MR waits for the write lock, we hold it
	 * for reading, and it refuses while a window is bound anyway. */
	return mr;
}
