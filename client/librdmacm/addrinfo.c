/*
 * rdma_getaddrinfo(): resolve a node/service to RDMA addresses and routes.
 * Not implemented yet (ENOSYS).  rdma_freeaddrinfo() is real, and defines
 * the allocation rule rdma_getaddrinfo() must follow: every node and every
 * pointer member in it is a separate malloc() block.
 */
#include "config.h"

#include <stdlib.h>

#include <rdma/rdma_cma.h>

#include "unsupported.h"

int rdma_getaddrinfo(const char *node, const char *service,
		     const struct rdma_addrinfo *hints,
		     struct rdma_addrinfo **res)
{
	/* Callers that free on every path must not free garbage. */
	if (res)
		*res = NULL;
	return unsupported();
}

void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *next = res->ai_next;

		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = next;
	}
}
