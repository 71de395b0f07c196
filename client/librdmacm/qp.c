/*
 * QPs and SRQs on a cm_id: the CM creates them on id->verbs, with a default
 * PD and CQs when the caller gives none, and drives the QP's states itself.
 * Not implemented yet: creation fails with ENOSYS, destruction has nothing
 * to destroy.
 */
#include "config.h"

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "unsupported.h"

int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
		   struct ibv_qp_init_attr *qp_init_attr)
{
	return unsupported();
}

int rdma_create_qp_ex(struct rdma_cm_id *id,
		      struct ibv_qp_init_attr_ex *qp_init_attr)
{
	return unsupported();
}

void rdma_destroy_qp(struct rdma_cm_id *id)
{
}

int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
		    struct ibv_srq_init_attr *attr)
{
	return unsupported();
}

int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	return unsupported();
}

void rdma_destroy_srq(struct rdma_cm_id *id)
{
}
