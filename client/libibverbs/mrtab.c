/*
 * The context's own MRs by lkey, for the direct transport (direct_*.c),
 * which copies between registered memory and a transit ring itself and
 * must check each SGE as the engine would: the key is one of this
 * process's MRs, on the QP's PD, with the access the copy needs, and the
 * range lies inside it.  The same for an RDMA WRITE with immediate that
 * a peer sent on a ring, by its rkey (an MR's rkey is its lkey).  An MR
 * that is not here (imported from another process, on-demand paging) is
 * not an error: the message then goes the engine's way, which knows
 * every MR.
 *
 * Open addressing with linear probing on the key, under one mutex; the
 * table doubles when half full and never shrinks (a context's MR count).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "ibvd_verbs.h"

#define MRTAB_MIN	64u

static uint32_t slot_of(uint32_t lkey, uint32_t cap)
{
	/* keys are random 32-bit values in the daemon: their bits mix well */
	return (lkey * 2654435761u) & (cap - 1);
}

static void put(struct ibvc_mrtab_entry *slots, uint32_t cap,
		const struct ibvc_mrtab_entry *e)
{
	uint32_t i = slot_of(e->lkey, cap);

	while (slots[i].used)
		i = (i + 1) & (cap - 1);
	slots[i] = *e;
}

static int grow(struct ibvc_mrtab *t)
{
	uint32_t cap = t->cap ? 2 * t->cap : MRTAB_MIN, i;
	struct ibvc_mrtab_entry *slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (i = 0; i < t->cap; i++)
		if (t->slots[i].used)
			put(slots, cap, &t->slots[i]);
	free(t->slots);
	t->slots = slots;
	t->cap = cap;
	return 0;
}

static bool kept(const struct ibv_mr *mr, unsigned int access)
{
	/* on-demand MRs may cover memory that is not there */
	return !(access & IBV_ACCESS_ON_DEMAND) && mr->addr;
}

void ibvc_mrtab_add(struct ibvc_context *ictx, const struct ibv_mr *mr,
		    unsigned int access)
{
	struct ibvc_mrtab *t = &ictx->mrs;
	struct ibvc_mrtab_entry e = {
		.used = true, .lkey = mr->lkey, .pd = mr->pd,
		.addr = (uintptr_t)mr->addr, .length = mr->length,
		.access = access,
	};

	if (!kept(mr, access))
		return;
	pthread_mutex_lock(&t->lock);
	/* no room: the MR stays the engine's, which is only slower */
	if (2 * (t->n + 1) <= t->cap || grow(t) == 0) {
		put(t->slots, t->cap, &e);
		t->n++;
	}
	pthread_mutex_unlock(&t->lock);
}

void ibvc_mrtab_remove(struct ibvc_context *ictx, uint32_t lkey)
{
	struct ibvc_mrtab *t = &ictx->mrs;
	uint32_t i, j;

	pthread_mutex_lock(&t->lock);
	if (!t->cap)
		goto out;
	for (i = slot_of(lkey, t->cap); t->slots[i].used; i = (i + 1) & (t->cap - 1))
		if (t->slots[i].lkey == lkey)
			break;
	if (!t->slots[i].used)
		goto out;
	t->slots[i].used = false;
	t->n--;
	/* put back the rest of the cluster, so no probe stops short */
	for (j = (i + 1) & (t->cap - 1); t->slots[j].used; j = (j + 1) & (t->cap - 1)) {
		struct ibvc_mrtab_entry e = t->slots[j];

		t->slots[j].used = false;
		put(t->slots, t->cap, &e);
	}
out:
	pthread_mutex_unlock(&t->lock);
}

/* Under the lock: the entry of key, or NULL. */
static const struct ibvc_mrtab_entry *find(const struct ibvc_mrtab *t,
					   uint32_t key)
{
	uint32_t i;

	if (!t->cap)
		return NULL;
	for (i = slot_of(key, t->cap); t->slots[i].used; i = (i + 1) & (t->cap - 1))
		if (t->slots[i].lkey == key)
			return &t->slots[i];
	return NULL;
}

/* Does e, an MR of pd, hold [addr, addr + len) with every right in access? */
static bool entry_covers(const struct ibvc_mrtab_entry *e,
			 const struct ibv_pd *pd, uint64_t addr, uint64_t len,
			 unsigned int access)
{
	return e && e->pd == pd && addr >= e->addr && len <= e->length &&
	       addr - e->addr <= e->length - len &&
	       (e->access & access) == access;
}

bool ibvc_mrtab_covers(struct ibvc_context *ictx, const struct ibv_pd *pd,
		       uint32_t lkey, uint64_t addr, uint64_t len,
		       unsigned int need)
{
	struct ibvc_mrtab *t = &ictx->mrs;
	const struct ibvc_mrtab_entry *e;
	bool ok;

	/* An unguarded copy could kill the app: the engine's, then. */
	if ((need & IBVC_MRTAB_COPY) && !ibvc_guard_ready())
		return false;
	pthread_mutex_lock(&t->lock);
	e = find(t, lkey);
	ok = entry_covers(e, pd, addr, len, need & IBVC_MRTAB_WRITE ?
			  IBV_ACCESS_LOCAL_WRITE : 0);
	pthread_mutex_unlock(&t->lock);
	return ok;
}

bool ibvc_mrtab_write_in(struct ibvc_context *ictx, const struct ibv_pd *pd,
			 uint32_t rkey, uint64_t addr, const void *src,
			 uint64_t len)
{
	struct ibvc_mrtab *t = &ictx->mrs;
	const struct ibvc_mrtab_entry *e;
	bool ok;

	pthread_mutex_lock(&t->lock);
	e = find(t, rkey);
	ok = entry_covers(e, pd, addr, len, IBV_ACCESS_REMOTE_WRITE) &&
	     ibvc_guard_ready();
	/*
	 * Under the lock: ibv_dereg_mr forgets the MR here first, so an app
	 * that unmaps its memory once that returned never has us copy there.
	 */
	if (ok)
		ok = ibvc_guarded_copy((void *)(uintptr_t)addr, src, len);
	pthread_mutex_unlock(&t->lock);
	return ok;
}

void ibvc_mrtab_fini(struct ibvc_context *ictx)
{
	free(ictx->mrs.slots);
	ictx->mrs.slots = NULL;
	ictx->mrs.cap = ictx->mrs.n = 0;
	pthread_mutex_destroy(&ictx->mrs.lock);
}

bool ibvc_copyable_sges(struct ibvc_qp *qp, const struct ibv_sge *sge,
			int num_sge)
{
	struct ibvc_context *ctx = to_ibvc_context(qp->qp.context);
	int i;

	for (i = 0; i < num_sge; i++)
		if (sge[i].length &&
		    !ibvc_mrtab_covers(ctx, qp->qp.pd, sge[i].lkey, sge[i].addr,
				       sge[i].length, IBVC_MRTAB_COPY))
			return false;
	return true;
}
