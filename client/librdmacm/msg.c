/*
 * Wire conversions: the daemon's QpAttr/AhAttr and raw socket addresses
 * into the structs apps see.  libibverbs has its own copies of the verbs
 * ones, but they are private to that library (its version script hides
 * them), and librdmacm uses nothing of libibverbs but its public API.
 */
#include "config.h"

#include <string.h>
#include <netinet/in.h>
#include <infiniband/ib.h>

#include "cma.h"

/* The size of a socket address of a family we handle, else 0. */
socklen_t cma_addr_len(const struct sockaddr *addr)
{
	if (!addr)
		return 0;
	switch (addr->sa_family) {
	case AF_INET:
		return sizeof(struct sockaddr_in);
	case AF_INET6:
		return sizeof(struct sockaddr_in6);
	case AF_IB:
		return sizeof(struct sockaddr_ib);
	default:
		return 0;
	}
}

bool cma_sockaddr_from_msg(const ProtobufCBinaryData *b,
			   struct sockaddr_storage *ss)
{
	socklen_t len;

	if (b->len < sizeof(sa_family_t) || b->len > sizeof(*ss))
		return false;
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, b->data, b->len);
	len = cma_addr_len((struct sockaddr *)ss);
	return len != 0 && len <= b->len;
}
