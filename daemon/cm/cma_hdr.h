/*
 * What rdma_cm puts into the IB CM's messages (mad.h) when it connects IP
 * addresses: the header at the start of a REQ's and a SIDR REQ's private
 * data, the service ID made of a port space and a port, and the flow
 * label of a RoCEv2 path.  Pure functions, as Linux's rdma_cm lays these
 * out.
 *
 *   0  version (0) | 1  IP version << 4 | 2  source port (the active side's)
 *   4  source IP (16) | 20  destination IP (16) | 36  the user's data
 *
 * An IPv4 address takes the last 4 of its 16 bytes after 12 zero bytes,
 * unlike a RoCE GID's ::ffff:a.b.c.d.  The destination port is not in the
 * header: it is the low 16 bits of the service ID.
 */
#ifndef IBVD_CM_CMA_HDR_H
#define IBVD_CM_CMA_HDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <rdma/rdma_cma.h>

#define CMA_HDR_LEN		36
#define CMA_HDR_VERSION		0

/* The header in host order; the addresses as on the wire */
struct cma_hdr {
	uint8_t version;		/* CMA_HDR_VERSION */
	uint8_t ip_version;		/* 4 or 6 */
	uint16_t src_port;
	uint8_t src_ip[16];
	uint8_t dst_ip[16];
};

/*
 * Decode the first CMA_HDR_LEN of len bytes of private data: 0, or
 * -EBADMSG when they are fewer, the version is not 0 or the IP version
 * neither 4 nor 6.  The reserved low nibble of byte 1 is ignored.
 */
int cma_hdr_decode(const uint8_t *pdata, size_t len, struct cma_hdr *h);

/* Write h into the first CMA_HDR_LEN bytes of pdata */
void cma_hdr_encode(const struct cma_hdr *h, uint8_t pdata[CMA_HDR_LEN]);

/*
 * The header of a connection from src to dst (both AF_INET or both
 * AF_INET6): 0, or -EAFNOSUPPORT.  dst's port goes into the service ID.
 */
int cma_hdr_from_addrs(struct cma_hdr *h, const struct sockaddr *src,
		       const struct sockaddr *dst);

/*
 * The active side's address (src, with src_port) and the passive side's
 * (dst, with dst_port, from the service ID) of a decoded header.
 */
void cma_hdr_to_addrs(const struct cma_hdr *h, uint16_t dst_port,
		      struct sockaddr_storage *src,
		      struct sockaddr_storage *dst);

/* Service IDs: (port space << 16) + port, e.g. TCP port 7174 0x1061c06 */
uint64_t cma_service_id(enum rdma_port_space ps, uint16_t port);
/* The port space of a service ID (0x0106 TCP ...; not checked) */
uint16_t cma_service_ps(uint64_t service_id);
uint16_t cma_service_port(uint64_t service_id);
/* Whether a service ID is rdma_cm's: a known port space, top bits 0 */
bool cma_service_id_ok(uint64_t service_id);

/*
 * rdma_cm's flow label of a RoCEv2 path, made of the active side's port
 * and the destination port so that connections between two hosts spread
 * over ECMP routes (the UDP source port is their entropy):
 * (src_port * 31 + dst_port) & 0xFFFFF.  The REQ carries it, and both
 * sides' QPs take their UDP source port from it.
 */
uint32_t cma_flow_label(uint16_t src_port, uint16_t dst_port);

#endif /* IBVD_CM_CMA_HDR_H */
