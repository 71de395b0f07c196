/*
 * The multicast joins of an id, and its QP's attachments to their groups:
 * the list that the join/leave calls (mcast.c), the join events
 * (events.c), QP destruction (qp.c) and id destruction (cma.c) share.
 * It sits below all of them and calls none: they differ in when they run
 * (a call of the app, an event the app takes), not in what a join is.
 *
 * Only this file touches cid->mcast and cid->mcast_seq, always under the
 * id's op_lock, except cma_mcast_free_all() on an id nobody holds.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cma.h"

/* A join is named to the daemon by its number, which its events echo. */
void cma_mcast_add(struct cma_id *cid, struct cma_mcast *mc)
{
	mc->user = ++cid->mcast_seq;
	mc->next = cid->mcast;
	cid->mcast = mc;
}

struct cma_mcast *cma_mcast_find(struct cma_id *cid, uint64_t user)
{
	struct cma_mcast *mc;

	for (mc = cid->mcast; mc; mc = mc->next)
		if (mc->user == user)
			return mc;
	return NULL;
}

struct cma_mcast *cma_mcast_find_addr(struct cma_id *cid,
				      const struct sockaddr *addr,
				      socklen_t len)
{
	struct cma_mcast *mc;

	for (mc = cid->mcast; mc; mc = mc->next)
		if (mc->addr_len == len && memcmp(&mc->addr, addr, len) == 0)
			return mc;
	return NULL;
}

void cma_mcast_unlink(struct cma_id *cid, struct cma_mcast *mc)
{
	struct cma_mcast **p;

	for (p = &cid->mcast; *p; p = &(*p)->next) {
		if (*p == mc) {
			*p = mc->next;
			return;
		}
	}
}

/*
 * Another join of the id that holds the QP's attachment to mc's group: an
 * id may join a group more than once, as the kernel's lets it; the QP is
 * attached once, and stays so until its last such join is left.
 */
static bool sibling_attached(const struct cma_id *cid,
			     const struct cma_mcast *mc)
{
	const struct cma_mcast *o;

	for (o = cid->mcast; o; o = o->next)
		if (o != mc && o->attached && o->mlid == mc->mlid &&
		    memcmp(&o->mgid, &mc->mgid, sizeof(mc->mgid)) == 0)
			return true;
	return false;
}

int cma_mcast_attach(struct cma_id *cid, struct cma_mcast *mc,
		     const struct ibv_ah_attr *group)
{
	int err;

	mc->mgid = group->grh.dgid;
	mc->mlid = group->dlid;
	/* A send-only member's QP is not attached (join_multicast_ex(3)). */
	if (!cid->id.qp || mc->attached ||
	    mc->join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		return 0;
	if (sibling_attached(cid, mc)) {
		mc->attached = true;
		return 0;
	}
	err = ibv_attach_mcast(cid->id.qp, &mc->mgid, mc->mlid);
	if (err)
		return -err;
	mc->attached = true;
	return 0;
}

/* mc is unlinked: the QP leaves the group unless another join holds it. */
int cma_mcast_detach(struct cma_id *cid, struct cma_mcast *mc)
{
	if (!mc->attached || !cid->id.qp || sibling_attached(cid, mc))
		return 0;
	return -ibv_detach_mcast(cid->id.qp, &mc->mgid, mc->mlid);
}

/* Destroying a QP detaches it from every group. */
void cma_mcast_qp_gone(struct cma_id *cid)
{
	struct cma_mcast *mc;

	for (mc = cid->mcast; mc; mc = mc->next)
		mc->attached = false;
}

void cma_mcast_free_all(struct cma_id *cid)
{
	struct cma_mcast *mc;

	while ((mc = cid->mcast)) {
		cid->mcast = mc->next;
		free(mc);
	}
}
