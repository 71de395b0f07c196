/*
 * Context ops we do not implement (XRC domains).  Header
 * inlines call some of them without a NULL check (abi.md §2.1), so these
 * fail cleanly with EOPNOTSUPP, in the convention of each op, instead of
 * crashing.
 */
#include "config.h"

#include "ibvd_verbs.h"

int ibvc_close_xrcd_unsupported(struct ibv_xrcd *xrcd)
{
	return EOPNOTSUPP;
}
