/*
 * Multicast for UD QPs: the daemon keeps the group membership and the
 * engine fans a send to a group out to every member (DESIGN.md §3.4).
 */
#include "config.h"

#include "ibvd_verbs.h"

static int mcast(struct ibv_qp *qp, uint16_t type, const union ibv_gid *gid,
		 uint16_t lid)
{
	Ibvd__Mcast req = IBVD__MCAST__INIT;

	if (!qp || !gid)
		return -EINVAL;
	req.qp = qp->handle;
	req.gid.data = (uint8_t *)gid->raw;
	req.gid.len = sizeof(gid->raw);
	req.lid = lid;
	return ibvd_conn_call(ibvc_conn_of(qp->context), type, &req.base, NULL,
			      NULL, NULL, NULL);
}

int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return ibvc_errno_ret(mcast(qp, IBVD_MSG_ATTACH_MCAST, gid, lid));
}

int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return ibvc_errno_ret(mcast(qp, IBVD_MSG_DETACH_MCAST, gid, lid));
}
