/*
 * The synchronous endpoint API (rdma_server/rdma_client style): an id with
 * its QP made in one call from an rdma_addrinfo, and blocking accept of
 * connection requests.  Not implemented yet: fails with ENOSYS.
 */
#include "config.h"

#include <rdma/rdma_cma.h>

#include "unsupported.h"

int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res,
		   struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	return unsupported();
}

void rdma_destroy_ep(struct rdma_cm_id *id)
{
}

int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	return unsupported();
}
