/*
 * Context ops we do not implement (memory windows, XRC domains).  Header
 * inlines call some of them without a NULL check (abi.md §2.1), so these
 * fail cleanly with EOPNOTSUPP, in the convention of each op, instead of
 * crashing.
 */
#include "config.h"

#include "ibvd_verbs.h"

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
