/*
 * rdma_getaddrinfo(): resolve a node/service to RDMA addresses.  Names and
 * numbers go through getaddrinfo(3) (AF_INET and AF_INET6; with hints of
 * family AF_IB, an IPv6 address is a GID, made into a struct sockaddr_ib
 * as librdmacm does); which device an address is on is the daemon's business at
 * bind/resolve time, so no route data is produced (ai_route stays empty,
 * as RAI_NOROUTE would ask).  The passive side gets the address as its
 * source, the active side as its destination (plus hints' source).
 *
 * Errors are getaddrinfo's EAI_* codes, as rdma_getaddrinfo(3) lists them,
 * with errno set too; bad arguments are -1 with errno.
 *
 * Allocation rule (rdma_freeaddrinfo): every node and every pointer member
 * in it is a separate malloc() block.
 */
#include "config.h"

#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/ib.h>

#include "cma.h"

/* Port space and QP type from hints, each implied by the other. */
static int rai_types(const struct rdma_addrinfo *hints, int *ps, int *qp_type)
{
	*ps = hints ? hints->ai_port_space : 0;
	*qp_type = hints ? hints->ai_qp_type : 0;
	if (!*ps && !*qp_type) {
		*ps = RDMA_PS_TCP;
		*qp_type = IBV_QPT_RC;
	} else if (!*ps) {
		*ps = *qp_type == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP;
	} else if (!*qp_type) {
		*qp_type = cma_is_ud_ps((enum rdma_port_space)*ps) ?
			   IBV_QPT_UD : IBV_QPT_RC;
	}
	switch (*ps) {
	case RDMA_PS_TCP:
		return *qp_type == IBV_QPT_UD ? EAI_SOCKTYPE : 0;
	case RDMA_PS_UDP:
	case RDMA_PS_IPOIB:
		return *qp_type == IBV_QPT_UD ? 0 : EAI_SOCKTYPE;
	default:
		/*
		 * RDMA_PS_IB takes any IB service, UD too (rdma_create_id(3));
		 * a space we do not know goes through as rdma-core passes it,
		 * for rdma_create_id to judge.
		 */
		return 0;
	}
}

static int copy_addr(struct sockaddr **dst, socklen_t *dst_len,
		     const struct sockaddr *src, socklen_t len)
{
	*dst = malloc(len);
	if (!*dst)
		return EAI_MEMORY;
	memcpy(*dst, src, len);
	*dst_len = len;
	return 0;
}

static struct rdma_addrinfo *new_rai(int flags, int family, int ps,
				     int qp_type)
{
	struct rdma_addrinfo *rai = calloc(1, sizeof(*rai));

	if (!rai)
		return NULL;
	rai->ai_flags = flags;
	rai->ai_family = family;
	rai->ai_port_space = ps;
	rai->ai_qp_type = qp_type;
	return rai;
}

/* The hints' own source for the active side (rdma_getaddrinfo(3)). */
static int hint_src(struct rdma_addrinfo *rai,
		    const struct rdma_addrinfo *hints)
{
	socklen_t len;

	if (!hints || !hints->ai_src_addr || (rai->ai_flags & RAI_PASSIVE))
		return 0;
	len = cma_addr_len(hints->ai_src_addr);
	if (!len)
		return EAI_FAMILY;
	return copy_addr(&rai->ai_src_addr, &rai->ai_src_len,
			 hints->ai_src_addr, len);
}

/* No node, no service: the addresses come from the hints themselves. */
static int from_hints(const struct rdma_addrinfo *hints, int ps, int qp_type,
		      struct rdma_addrinfo **res)
{
	const struct sockaddr *addr = hints->ai_dst_addr ? hints->ai_dst_addr :
				      hints->ai_src_addr;
	struct rdma_addrinfo *rai;
	socklen_t len;
	int ret;

	if (!addr)
		return EAI_NONAME;
	/* the hints' flags, all of them, as rdma-core copies them here */
	rai = new_rai(hints->ai_flags, addr->sa_family, ps, qp_type);
	if (!rai)
		return EAI_MEMORY;
	ret = 0;
	if (hints->ai_dst_addr) {
		len = cma_addr_len(hints->ai_dst_addr);
		ret = len ? copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len,
				      hints->ai_dst_addr, len) : EAI_FAMILY;
	}
	if (ret == 0 && hints->ai_src_addr) {
		len = cma_addr_len(hints->ai_src_addr);
		ret = len ? copy_addr(&rai->ai_src_addr, &rai->ai_src_len,
				      hints->ai_src_addr, len) : EAI_FAMILY;
	}
	if (ret) {
		rdma_freeaddrinfo(rai);
		return ret;
	}
	*res = rai;
	return 0;
}

/*
 * AF_IB addresses come back, as rdma-core makes them, only for a numeric
 * host asked for in that family (RAI_FAMILY), of the AF_INET6 address
 * getaddrinfo(3) is asked for; else whatever family getaddrinfo gives.
 */
static bool asks_ib(const struct rdma_addrinfo *hints)
{
	return hints && hints->ai_family == AF_IB;
}

static bool want_ib(const struct rdma_addrinfo *hints)
{
	return asks_ib(hints) && (hints->ai_flags & RAI_FAMILY) &&
	       (hints->ai_flags & RAI_NUMERICHOST);
}

/*
 * An IPv6 address as the AF_IB one librdmacm makes of it: the address is
 * the GID, the port goes in the service id of the port space.
 */
static void ib_from_in6(const struct sockaddr_in6 *in6, int ps,
			struct sockaddr_ib *sib)
{
	memset(sib, 0, sizeof(*sib));
	sib->sib_family = AF_IB;
	sib->sib_pkey = htobe16(0xFFFF);
	sib->sib_flowinfo = in6->sin6_flowinfo;
	memcpy(sib->sib_addr.sib_raw, &in6->sin6_addr, 16);
	sib->sib_sid = htobe64(((uint64_t)ps << 16) | ntohs(in6->sin6_port));
	sib->sib_sid_mask = htobe64(RDMA_IB_IP_PS_MASK | RDMA_IB_IP_PORT_MASK);
	sib->sib_scope_id = in6->sin6_scope_id;
}

/* One rdma_addrinfo for one address getaddrinfo(3) found. */
static int from_ai(const struct rdma_addrinfo *hints, const struct addrinfo *ai,
		   int ps, int qp_type, struct rdma_addrinfo **ret)
{
	const struct sockaddr *addr = ai->ai_addr;
	socklen_t len = ai->ai_addrlen;
	struct rdma_addrinfo *rai;
	struct sockaddr_ib sib;
	int err;

	if (want_ib(hints)) {
		ib_from_in6((const struct sockaddr_in6 *)(const void *)addr, ps,
			    &sib);
		addr = (const struct sockaddr *)&sib;
		len = sizeof(sib);
	}
	/*
	 * Of the hints' flags a looked-up address keeps RAI_PASSIVE only,
	 * as rdma-core's: the others asked how to look it up.
	 */
	rai = new_rai(hints ? hints->ai_flags & RAI_PASSIVE : 0,
		      addr->sa_family, ps, qp_type);
	if (!rai)
		return EAI_MEMORY;
	if (rai->ai_flags & RAI_PASSIVE) {
		err = copy_addr(&rai->ai_src_addr, &rai->ai_src_len, addr, len);
	} else {
		err = copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, addr, len);
		if (!err)
			err = hint_src(rai, hints);
		if (!err && ai->ai_canonname) {
			rai->ai_dst_canonname = strdup(ai->ai_canonname);
			if (!rai->ai_dst_canonname)
				err = EAI_MEMORY;
		}
	}
	if (err) {
		rdma_freeaddrinfo(rai);
		return err;
	}
	*ret = rai;
	return 0;
}

/*
 * One result, of getaddrinfo's first address, as rdma-core answers: a
 * passive lookup without a node would otherwise give both wildcards, and
 * an app binding each would collide with itself on the port.
 */
static int resolve(const char *node, const char *service,
		   const struct rdma_addrinfo *hints, int ps, int qp_type,
		   struct rdma_addrinfo **res)
{
	struct addrinfo h, *ai = NULL, *a;
	struct rdma_addrinfo *rai = NULL;
	int err;

	memset(&h, 0, sizeof(h));
	/* AF_IB is made of IPv6 addresses; without RAI_FAMILY, any will do */
	h.ai_family = want_ib(hints) ? AF_INET6 :
		      asks_ib(hints) ? AF_UNSPEC :
		      hints ? hints->ai_family : AF_UNSPEC;
	h.ai_socktype = qp_type == IBV_QPT_UD ? SOCK_DGRAM : SOCK_STREAM;
	if (hints && (hints->ai_flags & RAI_PASSIVE))
		h.ai_flags |= AI_PASSIVE;
	if (hints && (hints->ai_flags & RAI_NUMERICHOST))
		h.ai_flags |= AI_NUMERICHOST;
	if (node && !(h.ai_flags & AI_NUMERICHOST))
		h.ai_flags |= AI_CANONNAME;
	err = getaddrinfo(node, service, &h, &ai);
	if (err)
		return err;
	for (a = ai; a; a = a->ai_next)
		if (a->ai_family == AF_INET || a->ai_family == AF_INET6)
			break;
	err = a ? from_ai(hints, a, ps, qp_type, &rai) : EAI_NONAME;
	freeaddrinfo(ai);
	if (err)
		return err;
	*res = rai;
	return 0;
}

/* errno to go with an EAI_* code (its man page promises errno set). */
static void set_errno(int err)
{
	switch (err) {
	case EAI_SYSTEM:
		break;		/* getaddrinfo set it */
	case EAI_MEMORY:
		errno = ENOMEM;
		break;
	case EAI_FAMILY:
		errno = EAFNOSUPPORT;
		break;
	case EAI_BADFLAGS:
	case EAI_SOCKTYPE:
	case EAI_SERVICE:
		errno = EINVAL;
		break;
	case EAI_AGAIN:
		errno = EAGAIN;
		break;
	default:
		errno = ENOENT;	/* no such name or address */
		break;
	}
}

int rdma_getaddrinfo(const char *node, const char *service,
		     const struct rdma_addrinfo *hints,
		     struct rdma_addrinfo **res)
{
	int ps, qp_type, err;

	/* Callers that free on every path must not free garbage. */
	if (!res)
		return cma_ret(-EINVAL);
	*res = NULL;
	/* nothing to go by: -1 and EINVAL, as rdma-core (not an EAI_ code) */
	if (!node && !service && !hints)
		return cma_ret(-EINVAL);
	err = rai_types(hints, &ps, &qp_type);
	if (!err) {
		if (node || service)
			err = resolve(node, service, hints, ps, qp_type, res);
		else
			err = from_hints(hints, ps, qp_type, res);
	}
	if (err)
		set_errno(err);
	return err;
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
