/*
 * The rules of a RoCEv2 device, as Linux's rxe follows them: the default
 * GID made of the MAC, the port MTU that fits the interface's MTU, link
 * speed and width from the interface's speed, the GID table kept in step
 * with the interface's addresses, and the peer subnets that may reach it.
 * Pure functions on core's types (device.h); who feeds them the
 * interface's state is daemon/netdev_watch.c.
 */
#ifndef IBVD_ROCE_H
#define IBVD_ROCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"

/*
 * Headers a RoCEv2 packet carries inside the interface's MTU, as rxe
 * counts them (RXE_MAX_HDR_LENGTH): IPv6 40, UDP 8, BTH 12, the largest
 * extension headers 16, ICRC 4.
 */
#define IBVD_ROCE_HDR_BYTES	80

/* fe80::/64 + the modified EUI-64 of mac: the default GID, GID[0]. */
void ibvd_roce_gid0(const uint8_t mac[6], uint8_t gid[16]);

/* The modified EUI-64 of mac as a GUID (host order), rxe's node GUID. */
uint64_t ibvd_roce_guid(const uint8_t mac[6]);

/*
 * enum ibv_mtu of the largest IB MTU that fits netdev_mtu with the
 * headers: 1500 -> IBV_MTU_1024, 9000 -> IBV_MTU_4096.  Never below
 * IBV_MTU_256 (rxe would report 0, which is no MTU at all).
 */
unsigned int ibvd_roce_mtu(unsigned int netdev_mtu);

/*
 * IB speed and width (the ibv_port_attr values) for an Ethernet link of
 * mbps Mb/s, as the kernel maps them for RoCE ports: 1000 -> 1X SDR,
 * 10000 -> 1X FDR10, 25000 -> 1X EDR, 100000 -> 4X EDR.  0 (unknown)
 * counts as 1000, as the kernel's fallback does.
 */
void ibvd_roce_speed(unsigned int mbps, uint8_t *speed, uint8_t *width);

/*
 * "10.0.0.0/8", "fd00::/64", or a bare address (one host) into c: 0,
 * -EINVAL for anything else, -ERANGE for a prefix longer than the
 * family's address, -EDOM when host bits are set beyond the prefix
 * ("10.0.0.1/8" is a typo for a host or for its subnet; c holds it as
 * written).
 */
int ibvd_cidr_parse(const char *s, struct ibvd_cidr *c);

/* Clear c's host bits: what "10.0.0.1/8" (-EDOM above) probably meant. */
void ibvd_cidr_clear_host_bits(struct ibvd_cidr *c);

/* c as written ("10.0.0.0/8", IPv4 blocks as IPv4); buf >= 64 bytes. */
char *ibvd_cidr_str(const struct ibvd_cidr *c, char *buf, size_t len);

/* Is addr (16 bytes, GID form) inside c? */
bool ibvd_cidr_contains(const struct ibvd_cidr *c, const uint8_t addr[16]);

/*
 * May a packet from addr (16 bytes, GID form: IPv4 as ::ffff:a.b.c.d)
 * reach r's device: inside one of its peers, or without peers inside the
 * subnet of one of its GID table's entries.  Under ibvd_objects_lock.
 */
bool ibvd_roce_peer_allowed(const struct ibvd_roce *r, const uint8_t addr[16]);

/* Is gid an IPv4 address's (::ffff:a.b.c.d)?  Else it is IPv6's. */
bool ibvd_gid_is_v4(const uint8_t gid[16]);
/* Does gid name a multicast group: 224/4 as ::ffff:, or ff00::/8? */
bool ibvd_gid_is_multicast(const uint8_t gid[16]);
/*
 * The hop limit a RoCE packet out of nd to dgid carries: a unicast one
 * the route's, whatever was asked, as the kernel resolves rxe's AVs
 * (ib_resolve_unicast_gid_dmac), from the source GID sgid; a group's
 * (or 255.255.255.255's) what was asked.  It asks the kernel (route.h):
 * control thread only, when an AV is made.
 */
uint8_t ibvd_roce_hop_limit(const struct ibvd_netdev *nd, const uint8_t sgid[16],
			    const uint8_t dgid[16], uint8_t asked);

/* What ibvd_roce_update() changed (bits). */
#define IBVD_ROCE_GIDS_CHANGED	0x1u	/* IBV_EVENT_GID_CHANGE */
#define IBVD_ROCE_PORT_UP	0x2u	/* the port became ACTIVE */
#define IBVD_ROCE_PORT_DOWN	0x4u	/* the port left ACTIVE */
#define IBVD_ROCE_GIDS_FULL	0x8u	/* addresses left out: no free slot */

/*
 * Take in the interface as it is now: nd (ifindex 0: there is none of
 * that name; the last MTU and MAC are kept) and its addresses in the
 * kernel's order (IPv4 first), each with its prefix length, in GID form.
 * The table changes as the kernel's GID cache does: GID[0] follows the
 * MAC; an address that stays keeps its index, one that went leaves its
 * slot empty, a new one takes the lowest free slot no AH names (or its
 * own, empty but named, if it comes back); an address equal to
 * GID[0] (the EUI-64 link-local one) adds nothing.  Without an interface
 * the table is empty.  The caller holds ibvd_objects_lock for writing.
 * Returns IBVD_ROCE_* bits.
 */
unsigned int ibvd_roce_update(struct ibvd_roce *r, const struct ibvd_netdev *nd,
			      const struct ibvd_cidr *addrs, size_t naddrs);

#endif /* IBVD_ROCE_H */
