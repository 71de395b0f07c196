/*
 * rdma_create_qp in one request: what our librdmacm asks of our
 * libibverbs, which builds the QP's objects (CreateQp's bundle in
 * ibverbsd.proto).  Neither library may export a symbol rdma-core's does
 * not, so the ask travels through the public ibv_create_qp_ex(): a
 * comp_mask bit no rdma-core release defines, on an ibv_qp_init_attr_ex
 * that is the first member of struct ibvd_cm_qp_init and whose xrcd field
 * (meaningless without IBV_QP_INIT_ATTR_XRCD) points at itself, then a
 * magic number.  Nothing beyond the caller's struct is read unless that
 * pointer says it is ours, so an application that sets the bit gets
 * EOPNOTSUPP as before.
 */
#ifndef IBVD_CM_QP_H
#define IBVD_CM_QP_H

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#define IBVD_QP_INIT_ATTR_CM	(1u << 31)
#define IBVD_CM_QP_INIT_MAGIC	0x4d435149u	/* "IQCM" */
#define IBVD_CM_TOKEN_MAX	16

struct ibvd_cm_qp_init {
	struct ibv_qp_init_attr_ex ex;	/* must be first; send_cq/recv_cq
					 * NULL on the sides to make, xrcd
					 * = this struct */
	uint32_t magic;
	/* in: the CM id whose INIT attributes the QP takes */
	uint8_t token[IBVD_CM_TOKEN_MAX];	/* its session's (CM_OPEN) */
	uint32_t token_len;
	uint32_t id;				/* its handle there */
	/* in: CQs to make, each with a channel of its own; cqe 0: none */
	uint32_t send_cqe, recv_cqe;
	void *cq_context;
	/* out */
	struct ibv_cq *send_cq, *recv_cq;
	struct ibv_comp_channel *send_channel, *recv_channel;
	struct ibv_qp_attr init_attr;	/* what INIT took (the qkey of UD) */
	int init_mask;
};

#endif /* IBVD_CM_QP_H */
