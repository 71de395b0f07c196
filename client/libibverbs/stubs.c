/*
 * Public verbs that are exported (Debian's programs import them and are
 * linked BIND_NOW, so they must exist) but not implemented yet.  Each fails
 * the way its man page says a failure looks, with EOPNOTSUPP: int verbs
 * return it, creators return NULL with errno set.  Never touch arguments,
 * so garbage or NULL is harmless.  Implementations move out of this file
 * into their own (pd.c, mr.c, cq.c, qp.c, ...) as they are written.
 */
#include "config.h"

#include <errno.h>

#include <infiniband/verbs.h>

static int unsupported(void)
{
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}

static void *unsupported_ptr(void)
{
	errno = EOPNOTSUPP;
	return NULL;
}

/* Memory regions */

struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
				 size_t length, uint64_t iova, int fd,
				 int access)
{
	return unsupported_ptr();
}

/* Queue pairs */

/*
 * Returns the IBV_QUERY_QP_DATA_IN_ORDER_* guarantees; 0 means "none", the
 * honest answer until the data path says otherwise.
 */
int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op,
			       uint32_t flags)
{
	return 0;
}

int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	return unsupported();
}

int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	return unsupported();
}

/* Address resolution (RoCE only) */

int ibv_resolve_eth_l2_from_gid(struct ibv_context *context,
				struct ibv_ah_attr *attr,
				uint8_t eth_mac[ETHERNET_LL_SIZE],
				uint16_t *vid)
{
	return unsupported();
}
