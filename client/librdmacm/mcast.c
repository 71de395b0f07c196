/*
 * Multicast (CM.md "Multicast"): rdma_join_multicast(_ex) and
 * rdma_leave_multicast.  The daemon keeps the groups and answers a join
 * with MULTICAST_JOIN carrying the group's address vector (MGID, MLID) and
 * QKey; when the app takes that event, the id's QP is attached to the
 * group (events.c), and leaving detaches it.  The joins themselves, named
 * to the daemon by a number the events echo, and the QP's attachments are
 * kept on the id by mcast_joins.c.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cma.h"

static int join(struct cma_id *cid, struct sockaddr *addr, uint32_t flags,
		void *context)
{
	Ibvd__CmMcast req = IBVD__CM_MCAST__INIT;
	socklen_t len = cma_addr_len(addr);
	struct cma_mcast *mc;
	int ret;

	if (!len || flags >= RDMA_MC_JOIN_FLAG_RESERVED)
		return -EINVAL;
	/* rdma_join_multicast(3): bound to a device first. */
	if (!cid->id.verbs)
		return -EINVAL;
	mc = calloc(1, sizeof(*mc));
	if (!mc)
		return -ENOMEM;
	mc->context = context;
	memcpy(&mc->addr, addr, len);
	mc->addr_len = len;
	mc->join_flags = flags;
	/* Listed before the request, so that its event finds it. */
	pthread_mutex_lock(&cid->op_lock);
	cma_mcast_add(cid, mc);
	pthread_mutex_unlock(&cid->op_lock);

	req.id = cid->handle;
	req.addr.data = (uint8_t *)&mc->addr;
	req.addr.len = len;
	req.join_flags = flags;
	req.user = mc->user;
	ret = cma_call(cid, IBVD_MSG_CM_JOIN_MCAST, &req.base, NULL, NULL);
	if (ret < 0) {
		pthread_mutex_lock(&cid->op_lock);
		cma_mcast_unlink(cid, mc);
		pthread_mutex_unlock(&cid->op_lock);
		free(mc);
		return ret;
	}
	return cma_sync_wait(cid);
}

int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr,
			void *context)
{
	if (!cma_id_live(id) || !addr)
		return cma_ret(-EINVAL);
	return cma_ret(join(to_cma_id(id), addr,
			    RDMA_MC_JOIN_FLAG_FULLMEMBER, context));
}

int rdma_join_multicast_ex(struct rdma_cm_id *id,
			   struct rdma_cm_join_mc_attr_ex *mc_join_attr,
			   void *context)
{
	uint32_t need = RDMA_CM_JOIN_MC_ATTR_ADDRESS |
			RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;

	if (!cma_id_live(id) || !mc_join_attr || !mc_join_attr->addr)
		return cma_ret(-EINVAL);
	/* a field this library does not know first, as rdma-core's */
	if (mc_join_attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED)
		return cma_ret(-ENOTSUP);
	if ((mc_join_attr->comp_mask & need) != need)
		return cma_ret(-EINVAL);
	return cma_ret(join(to_cma_id(id), mc_join_attr->addr,
			    mc_join_attr->join_flags, context));
}

static int leave(struct cma_id *cid, struct sockaddr *addr)
{
	Ibvd__CmMcast req = IBVD__CM_MCAST__INIT;
	socklen_t len = cma_addr_len(addr);
	struct cma_mcast *mc;
	int ret = 0;

	if (!len)
		return -EINVAL;
	pthread_mutex_lock(&cid->op_lock);
	mc = cma_mcast_find_addr(cid, addr, len);
	if (mc) {
		cma_mcast_unlink(cid, mc);
		ret = cma_mcast_detach(cid, mc);
	}
	pthread_mutex_unlock(&cid->op_lock);
	if (!mc)
		return -EADDRNOTAVAIL;
	req.id = cid->handle;
	req.addr.data = (uint8_t *)&mc->addr;
	req.addr.len = len;
	req.join_flags = mc->join_flags;
	req.user = mc->user;
	/* The group is left whatever the detach said; report the first error. */
	if (ret == 0)
		ret = cma_call(cid, IBVD_MSG_CM_LEAVE_MCAST, &req.base, NULL,
			       NULL);
	else
		(void)cma_call(cid, IBVD_MSG_CM_LEAVE_MCAST, &req.base, NULL,
			       NULL);
	free(mc);
	return ret;
}

int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	if (!cma_id_live(id) || !addr)
		return cma_ret(-EINVAL);
	return cma_ret(leave(to_cma_id(id), addr));
}
