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


/* Function-like macros in verbs.h that would rewrite our definitions. */
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

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

/* Completion channels and CQs */

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	return unsupported_ptr();
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	return unsupported();
}

struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe,
			     void *cq_context, struct ibv_comp_channel *channel,
			     int comp_vector)
{
	return unsupported_ptr();
}

int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	return unsupported();
}

int ibv_destroy_cq(struct ibv_cq *cq)
{
	return unsupported();
}

/* Unlike the int verbs, this one reports failure as -1 with errno. */
int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
		     void **cq_context)
{
	errno = EOPNOTSUPP;
	return -1;
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
}

/* Protection domains */

struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	return unsupported_ptr();
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	return unsupported();
}

/* Memory regions */

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			  int access)
{
	return unsupported_ptr();
}

struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
			       uint64_t iova, int access)
{
	return unsupported_ptr();
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
				uint64_t iova, unsigned int access)
{
	return unsupported_ptr();
}

struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
				 size_t length, uint64_t iova, int fd,
				 int access)
{
	return unsupported_ptr();
}

/*
 * ibv_rereg_mr reports failure as a negative enum ibv_rereg_mr_err_code
 * with errno set (pyverbs decodes both), not as a positive errno.
 */
int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr,
		 size_t length, int access)
{
	errno = EOPNOTSUPP;
	return IBV_REREG_MR_ERR_INPUT;
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
	return unsupported();
}

/* Shared receive queues */

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd,
			       struct ibv_srq_init_attr *srq_init_attr)
{
	return unsupported_ptr();
}

int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		   int srq_attr_mask)
{
	return unsupported();
}

int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr)
{
	return unsupported();
}

int ibv_destroy_srq(struct ibv_srq *srq)
{
	return unsupported();
}

/* Queue pairs */

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
			     struct ibv_qp_init_attr *qp_init_attr)
{
	return unsupported_ptr();
}

struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	return unsupported_ptr();
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
	return unsupported();
}

int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
		 struct ibv_qp_init_attr *init_attr)
{
	return unsupported();
}

/*
 * Returns the IBV_QUERY_QP_DATA_IN_ORDER_* guarantees; 0 means "none", the
 * honest answer until the data path says otherwise.
 */
int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op,
			       uint32_t flags)
{
	return 0;
}

int ibv_destroy_qp(struct ibv_qp *qp)
{
	return unsupported();
}

int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	return unsupported();
}

int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	return unsupported();
}

/* Address handles and multicast */

struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	return unsupported_ptr();
}

int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num,
			struct ibv_wc *wc, struct ibv_grh *grh,
			struct ibv_ah_attr *ah_attr)
{
	return unsupported();
}

struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
				     struct ibv_grh *grh, uint8_t port_num)
{
	return unsupported_ptr();
}

int ibv_destroy_ah(struct ibv_ah *ah)
{
	return unsupported();
}

int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return unsupported();
}

int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return unsupported();
}

int ibv_resolve_eth_l2_from_gid(struct ibv_context *context,
				struct ibv_ah_attr *attr,
				uint8_t eth_mac[ETHERNET_LL_SIZE],
				uint16_t *vid)
{
	return unsupported();
}

/* Sharing objects between processes (rdma-core 1.10/1.13) */

struct ibv_context *ibv_import_device(int cmd_fd)
{
	return unsupported_ptr();
}

struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	return unsupported_ptr();
}

void ibv_unimport_pd(struct ibv_pd *pd)
{
}

struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	return unsupported_ptr();
}

void ibv_unimport_mr(struct ibv_mr *mr)
{
}

struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	return unsupported_ptr();
}

void ibv_unimport_dm(struct ibv_dm *dm)
{
}
