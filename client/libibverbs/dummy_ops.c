/*
 * Context ops that are not implemented yet.  The header inlines call the
 * hot-path ops without a NULL check (abi.md §2.1), so these fail cleanly
 * with EOPNOTSUPP, in the convention of each op, instead of crashing.
 */
#include "config.h"

#include "ibvd_verbs.h"

int ibvd_post_send_unsupported(struct ibv_qp *qp, struct ibv_send_wr *wr,
			       struct ibv_send_wr **bad_wr)
{
	if (bad_wr)
		*bad_wr = wr;
	return EOPNOTSUPP;
}

int ibvd_post_recv_unsupported(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			       struct ibv_recv_wr **bad_wr)
{
	if (bad_wr)
		*bad_wr = wr;
	return EOPNOTSUPP;
}

int ibvd_post_srq_recv_unsupported(struct ibv_srq *srq,
				   struct ibv_recv_wr *wr,
				   struct ibv_recv_wr **bad_wr)
{
	if (bad_wr)
		*bad_wr = wr;
	return EOPNOTSUPP;
}

/* ibv_poll_cq reports errors as a negative return. */
int ibvd_poll_cq_unsupported(struct ibv_cq *cq, int num_entries,
			     struct ibv_wc *wc)
{
	return -EOPNOTSUPP;
}

int ibvd_req_notify_cq_unsupported(struct ibv_cq *cq, int solicited_only)
{
	return EOPNOTSUPP;
}

struct ibv_mw *ibvd_alloc_mw_unsupported(struct ibv_pd *pd,
					 enum ibv_mw_type type)
{
	return ibvd_null_ret(-EOPNOTSUPP);
}

int ibvd_bind_mw_unsupported(struct ibv_qp *qp, struct ibv_mw *mw,
			     struct ibv_mw_bind *mw_bind)
{
	return EOPNOTSUPP;
}

int ibvd_dealloc_mw_unsupported(struct ibv_mw *mw)
{
	return EOPNOTSUPP;
}

int ibvd_close_xrcd_unsupported(struct ibv_xrcd *xrcd)
{
	return EOPNOTSUPP;
}
