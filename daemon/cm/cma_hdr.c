/*
 * rdma_cm's private-data header, service IDs and RoCEv2 flow labels
 * (cma_hdr.h).
 */
#include <config.h>

#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "cma_hdr.h"
#include "transport/roce/be.h"

#define HDR_IP_VERSION_SHIFT	4
#define HDR_SRC_IP		4
#define HDR_DST_IP		20
/* An IPv4 address: the last 4 of the 16 bytes */
#define HDR_V4			12

#define FLOW_LABEL_MASK		0xFFFFF

int cma_hdr_decode(const uint8_t *pdata, size_t len, struct cma_hdr *h)
{
	if (len < CMA_HDR_LEN)
		return -EBADMSG;
	h->version = pdata[0];
	h->ip_version = pdata[1] >> HDR_IP_VERSION_SHIFT;
	if (h->version != CMA_HDR_VERSION ||
	    (h->ip_version != 4 && h->ip_version != 6))
		return -EBADMSG;
	h->src_port = get_be16(pdata + 2);
	memcpy(h->src_ip, pdata + HDR_SRC_IP, 16);
	memcpy(h->dst_ip, pdata + HDR_DST_IP, 16);
	return 0;
}

void cma_hdr_encode(const struct cma_hdr *h, uint8_t pdata[CMA_HDR_LEN])
{
	pdata[0] = h->version;
	pdata[1] = (uint8_t)(h->ip_version << HDR_IP_VERSION_SHIFT);
	put_be16(pdata + 2, h->src_port);
	memcpy(pdata + HDR_SRC_IP, h->src_ip, 16);
	memcpy(pdata + HDR_DST_IP, h->dst_ip, 16);
}

/* An address into its 16 bytes of the header; its port, or -1 */
static int addr_put(const struct sockaddr *sa, uint8_t ip[16])
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
	const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;

	memset(ip, 0, 16);
	switch (sa->sa_family) {
	case AF_INET:
		memcpy(ip + HDR_V4, &sin->sin_addr, 4);
		return ntohs(sin->sin_port);
	case AF_INET6:
		memcpy(ip, &sin6->sin6_addr, 16);
		return ntohs(sin6->sin6_port);
	}
	return -1;
}

int cma_hdr_from_addrs(struct cma_hdr *h, const struct sockaddr *src,
		       const struct sockaddr *dst)
{
	int port;

	if (src->sa_family != dst->sa_family)
		return -EAFNOSUPPORT;
	memset(h, 0, sizeof(*h));
	port = addr_put(src, h->src_ip);
	if (port < 0)
		return -EAFNOSUPPORT;
	(void)addr_put(dst, h->dst_ip);
	h->version = CMA_HDR_VERSION;
	h->ip_version = src->sa_family == AF_INET ? 4 : 6;
	h->src_port = (uint16_t)port;
	return 0;
}

static void addr_get(int ip_version, const uint8_t ip[16], uint16_t port,
		     struct sockaddr_storage *ss)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (ip_version == 4) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		memcpy(&sin->sin_addr, ip + HDR_V4, 4);
	} else {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		memcpy(&sin6->sin6_addr, ip, 16);
	}
}

void cma_hdr_to_addrs(const struct cma_hdr *h, uint16_t dst_port,
		      struct sockaddr_storage *src,
		      struct sockaddr_storage *dst)
{
	addr_get(h->ip_version, h->src_ip, h->src_port, src);
	addr_get(h->ip_version, h->dst_ip, dst_port, dst);
}

uint64_t cma_service_id(enum rdma_port_space ps, uint16_t port)
{
	return (uint64_t)ps << 16 | port;
}

uint16_t cma_service_ps(uint64_t service_id)
{
	return (uint16_t)(service_id >> 16);
}

uint16_t cma_service_port(uint64_t service_id)
{
	return (uint16_t)service_id;
}

bool cma_service_id_ok(uint64_t service_id)
{
	if (service_id >> 32)
		return false;
	switch (cma_service_ps(service_id)) {
	case RDMA_PS_IPOIB:
	case RDMA_PS_TCP:
	case RDMA_PS_UDP:
	case RDMA_PS_IB:
		return true;
	}
	return false;
}

uint32_t cma_flow_label(uint16_t src_port, uint16_t dst_port)
{
	return ((uint32_t)src_port * 31 + dst_port) & FLOW_LABEL_MASK;
}
