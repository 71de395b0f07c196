/*
 * A RoCEv2 device's rules (roce.h): how rxe derives its default GID, port
 * MTU, speed and GID table from the network interface, and which peers
 * may reach it.
 */
#include <config.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <infiniband/verbs.h>

#include "roce.h"
#include "route.h"
#include "util.h"

/* IB speed and width encodings of struct ibv_port_attr (IB spec). */
enum {
	IB_SPEED_SDR = 1, IB_SPEED_DDR = 2, IB_SPEED_FDR10 = 8,
	IB_SPEED_EDR = 32, IB_SPEED_HDR = 64, IB_SPEED_NDR = 128,
};
enum { IB_WIDTH_1X = 1, IB_WIDTH_4X = 2, IB_WIDTH_2X = 16 };

/* Bytes 0-11 of an IPv4 address in GID form: ::ffff:0:0/96. */
static const uint8_t v4_mapped[12] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
};
#define V4_MAPPED_PREFIX	96

/* ---- identity ----------------------------------------------------------- */

/*
 * Modified EUI-64 (RFC 4291, appendix A): FF:FE in the middle of the MAC,
 * and the universal/local bit flipped.
 */
static void eui64(const uint8_t mac[6], uint8_t out[8])
{
	out[0] = mac[0] ^ 0x02;
	out[1] = mac[1];
	out[2] = mac[2];
	out[3] = 0xff;
	out[4] = 0xfe;
	out[5] = mac[3];
	out[6] = mac[4];
	out[7] = mac[5];
}

void ibvd_roce_gid0(const uint8_t mac[6], uint8_t gid[16])
{
	memset(gid, 0, 16);
	gid[0] = 0xfe;
	gid[1] = 0x80;
	eui64(mac, gid + 8);
}

uint64_t ibvd_roce_guid(const uint8_t mac[6])
{
	uint8_t b[8];
	uint64_t guid = 0;
	int i;

	eui64(mac, b);
	for (i = 0; i < 8; i++)
		guid = guid << 8 | b[i];
	return guid;
}

/* ---- port attributes ------------------------------------------------------ */

unsigned int ibvd_roce_mtu(unsigned int netdev_mtu)
{
	unsigned int payload = netdev_mtu > IBVD_ROCE_HDR_BYTES ?
			       netdev_mtu - IBVD_ROCE_HDR_BYTES : 0;

	if (payload >= 4096)
		return IBV_MTU_4096;
	if (payload >= 2048)
		return IBV_MTU_2048;
	if (payload >= 1024)
		return IBV_MTU_1024;
	if (payload >= 512)
		return IBV_MTU_512;
	return IBV_MTU_256;
}

/* The kernel's table for RoCE ports whose lane count it does not know. */
static const struct {
	unsigned int max_mbps;
	uint8_t speed, width;
} eth_speeds[] = {
	{ 1000,		IB_SPEED_SDR,	IB_WIDTH_1X },
	{ 10000,	IB_SPEED_FDR10,	IB_WIDTH_1X },
	{ 20000,	IB_SPEED_DDR,	IB_WIDTH_4X },
	{ 25000,	IB_SPEED_EDR,	IB_WIDTH_1X },
	{ 40000,	IB_SPEED_FDR10,	IB_WIDTH_4X },
	{ 50000,	IB_SPEED_EDR,	IB_WIDTH_2X },
	{ 100000,	IB_SPEED_EDR,	IB_WIDTH_4X },
	{ 200000,	IB_SPEED_HDR,	IB_WIDTH_4X },
};

void ibvd_roce_speed(unsigned int mbps, uint8_t *speed, uint8_t *width)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(eth_speeds); i++)
		if (mbps <= eth_speeds[i].max_mbps)
			break;
	if (i == ARRAY_SIZE(eth_speeds)) {
		*speed = IB_SPEED_NDR;
		*width = IB_WIDTH_4X;
		return;
	}
	*speed = eth_speeds[i].speed;
	*width = eth_speeds[i].width;
}

/* ---- address blocks ------------------------------------------------------- */

bool ibvd_gid_is_v4(const uint8_t gid[16])
{
	return memcmp(gid, v4_mapped, sizeof(v4_mapped)) == 0;
}

bool ibvd_gid_is_multicast(const uint8_t gid[16])
{
	return ibvd_gid_is_v4(gid) ? (gid[12] & 0xf0) == 0xe0 : gid[0] == 0xff;
}

uint8_t ibvd_roce_hop_limit(const struct ibvd_netdev *nd, const uint8_t sgid[16],
			    const uint8_t dgid[16], uint8_t asked)
{
	static const uint8_t v4_broadcast[4] = { 255, 255, 255, 255 };

	/* rdma_is_multicast_addr: the limited broadcast counts as a group */
	if (ibvd_gid_is_multicast(dgid) ||
	    (ibvd_gid_is_v4(dgid) && !memcmp(dgid + 12, v4_broadcast, 4)))
		return asked;
	return ibvd_route_hop_limit(nd, sgid, dgid);
}

/* Are the bits of addr past prefix_len all zero? */
static bool host_bits_clear(const uint8_t addr[16], unsigned int prefix_len)
{
	unsigned int i;

	for (i = prefix_len; i < 128; i++)
		if (addr[i / 8] & (0x80u >> (i % 8)))
			return false;
	return true;
}

void ibvd_cidr_clear_host_bits(struct ibvd_cidr *c)
{
	unsigned int i;

	for (i = c->prefix_len; i < 128; i++)
		c->addr[i / 8] &= (uint8_t)~(0x80u >> (i % 8));
}

/* "/N" with N decimal, no sign, at most three digits: N or -EINVAL. */
static int parse_prefix(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 3 || strspn(s, "0123456789") != n)
		return -EINVAL;
	return atoi(s);
}

int ibvd_cidr_parse(const char *s, struct ibvd_cidr *c)
{
	char addr[INET6_ADDRSTRLEN];
	const char *slash = strchr(s, '/');
	size_t alen = slash ? (size_t)(slash - s) : strlen(s);
	unsigned int max;
	int len;

	if (alen == 0 || alen >= sizeof(addr))
		return -EINVAL;
	memcpy(addr, s, alen);
	addr[alen] = '\0';
	memset(c, 0, sizeof(*c));
	if (inet_pton(AF_INET, addr, c->addr + sizeof(v4_mapped)) == 1) {
		memcpy(c->addr, v4_mapped, sizeof(v4_mapped));
		max = 32;
	} else if (inet_pton(AF_INET6, addr, c->addr) == 1) {
		max = 128;
	} else {
		return -EINVAL;
	}
	len = slash ? parse_prefix(slash + 1) : (int)max;
	if (len < 0)
		return -EINVAL;
	if ((unsigned int)len > max)
		return -ERANGE;
	c->prefix_len = (uint8_t)(len + (max == 32 ? V4_MAPPED_PREFIX : 0));
	return host_bits_clear(c->addr, c->prefix_len) ? 0 : -EDOM;
}

char *ibvd_cidr_str(const struct ibvd_cidr *c, char *buf, size_t len)
{
	char text[INET6_ADDRSTRLEN];

	if (ibvd_gid_is_v4(c->addr) && c->prefix_len >= V4_MAPPED_PREFIX) {
		inet_ntop(AF_INET, c->addr + sizeof(v4_mapped), text, sizeof(text));
		snprintf(buf, len, "%s/%u", text,
			 c->prefix_len - V4_MAPPED_PREFIX);
	} else {
		inet_ntop(AF_INET6, c->addr, text, sizeof(text));
		snprintf(buf, len, "%s/%u", text, c->prefix_len);
	}
	return buf;
}

bool ibvd_cidr_contains(const struct ibvd_cidr *c, const uint8_t addr[16])
{
	unsigned int whole = c->prefix_len / 8, rest = c->prefix_len % 8;
	uint8_t mask;

	if (memcmp(c->addr, addr, whole) != 0)
		return false;
	if (!rest)
		return true;
	mask = (uint8_t)(0xffu << (8 - rest));
	return (c->addr[whole] & mask) == (addr[whole] & mask);
}

bool ibvd_roce_peer_allowed(const struct ibvd_roce *r, const uint8_t addr[16])
{
	struct ibvd_cidr own;
	unsigned int i;

	for (i = 0; i < r->npeers; i++)
		if (ibvd_cidr_contains(&r->peers[i], addr))
			return true;
	if (r->npeers || !r->gids)
		return false;
	/* No "peers": the subnets the interface's addresses are in. */
	for (i = 0; i < r->ngids; i++) {
		if (ibvd_gid_empty(&r->gids[i]))
			continue;
		memcpy(own.addr, r->gids[i].raw, 16);
		own.prefix_len = r->gids[i].prefix_len;
		if (ibvd_cidr_contains(&own, addr))
			return true;
	}
	return false;
}

/* ---- the GID table ---------------------------------------------------------- */

static void set_slot(struct ibvd_gid *slot, const uint8_t raw[16],
		     uint8_t prefix_len, int ifindex)
{
	memcpy(slot->raw, raw, 16);
	slot->prefix_len = prefix_len;
	slot->ifindex = (uint32_t)ifindex;
	slot->type = IBV_GID_TYPE_ROCE_V2;
}

/* The index of the address in addrs, or -1. */
static ssize_t find_addr(const struct ibvd_cidr *addrs, size_t n,
			 const uint8_t raw[16])
{
	size_t i;

	for (i = 0; i < n; i++)
		if (memcmp(addrs[i].addr, raw, 16) == 0)
			return (ssize_t)i;
	return -1;
}

/* The slot holding raw (past slot 0), or -1. */
static int find_slot(const struct ibvd_gid *tbl, const uint8_t raw[16])
{
	int i;

	for (i = 1; i < IBVD_ROCE_GID_TBL_LEN; i++)
		if (memcmp(tbl[i].raw, raw, 16) == 0)
			return i;
	return -1;
}

/*
 * The slot for a new address raw: the empty one it had last, if AHs may
 * still send from it; else the lowest empty one no AH names; or -1.
 */
static int free_slot(const struct ibvd_gid *tbl,
		     const struct ibvd_gid_hold *holds, const uint8_t raw[16])
{
	int i;

	for (i = 1; holds && i < IBVD_ROCE_GID_TBL_LEN; i++)
		if (holds[i].ahs && ibvd_gid_empty(&tbl[i]) &&
		    memcmp(holds[i].last, raw, 16) == 0)
			return i;
	for (i = 1; i < IBVD_ROCE_GID_TBL_LEN; i++)
		if (ibvd_gid_empty(&tbl[i]) && (!holds || !holds[i].ahs))
			return i;
	return -1;
}

static bool same_gid(const struct ibvd_gid *a, const struct ibvd_gid *b)
{
	return memcmp(a->raw, b->raw, 16) == 0 && a->ifindex == b->ifindex &&
	       a->type == b->type && a->prefix_len == b->prefix_len;
}

/* GID[0] from the MAC, or empty without an interface: changed bits. */
static unsigned int update_gid0(struct ibvd_gid *tbl, const struct ibvd_netdev *nd)
{
	struct ibvd_gid want;

	memset(&want, 0, sizeof(want));
	if (nd->ifindex) {
		ibvd_roce_gid0(nd->mac, want.raw);
		set_slot(&want, want.raw, 64, nd->ifindex);
	}
	if (same_gid(&tbl[0], &want))
		return 0;
	tbl[0] = want;
	return IBVD_ROCE_GIDS_CHANGED;
}

/* Empty the slots whose address went away (all of them without addrs). */
static unsigned int drop_gone(struct ibvd_gid *tbl, struct ibvd_gid_hold *holds,
			      const struct ibvd_cidr *addrs, size_t n)
{
	unsigned int changed = 0;
	int i;

	for (i = 1; i < IBVD_ROCE_GID_TBL_LEN; i++) {
		if (ibvd_gid_empty(&tbl[i]) ||
		    (find_addr(addrs, n, tbl[i].raw) >= 0 &&
		     memcmp(tbl[i].raw, tbl[0].raw, 16) != 0))
			continue;
		if (holds)
			memcpy(holds[i].last, tbl[i].raw, 16);
		memset(&tbl[i], 0, sizeof(tbl[i]));
		changed = IBVD_ROCE_GIDS_CHANGED;
	}
	return changed;
}

/* Give each new address a free slot (free_slot); keep the others in place. */
static unsigned int add_new(struct ibvd_gid *tbl, const struct ibvd_gid_hold *holds,
			    const struct ibvd_cidr *addrs, size_t n, int ifindex)
{
	unsigned int changed = 0;
	size_t i;
	int slot;

	for (i = 0; i < n; i++) {
		if (memcmp(addrs[i].addr, tbl[0].raw, 16) == 0)
			continue;	/* the kernel's EUI-64 link-local one */
		slot = find_slot(tbl, addrs[i].addr);
		if (slot >= 0) {
			/* a new prefix length or ifindex is no new GID */
			tbl[slot].prefix_len = addrs[i].prefix_len;
			tbl[slot].ifindex = (uint32_t)ifindex;
			continue;
		}
		slot = free_slot(tbl, holds, addrs[i].addr);
		if (slot < 0) {
			changed |= IBVD_ROCE_GIDS_FULL;
			continue;
		}
		set_slot(&tbl[slot], addrs[i].addr, addrs[i].prefix_len, ifindex);
		changed |= IBVD_ROCE_GIDS_CHANGED;
	}
	return changed;
}

/* Slots up to the last one in use (0: the table is empty). */
static unsigned int used_slots(const struct ibvd_gid *gids)
{
	unsigned int n = IBVD_ROCE_GID_TBL_LEN;

	while (n && ibvd_gid_empty(&gids[n - 1]))
		n--;
	return n;
}

unsigned int ibvd_roce_update(struct ibvd_roce *r, const struct ibvd_netdev *nd,
			      const struct ibvd_cidr *addrs, size_t naddrs)
{
	bool was_up = r->netdev.up;
	unsigned int changed;

	if (!nd->ifindex)
		naddrs = 0;
	changed = update_gid0(r->gids, nd);
	changed |= drop_gone(r->gids, r->gid_holds, addrs, naddrs);
	changed |= add_new(r->gids, r->gid_holds, addrs, naddrs, nd->ifindex);
	if (nd->ifindex) {
		r->netdev = *nd;
	} else {
		/* keep the name, MAC and MTU: the port still has attributes */
		r->netdev.ifindex = 0;
		r->netdev.admin_up = r->netdev.up = false;
	}
	r->ngids = used_slots(r->gids);
	if (was_up && !r->netdev.up)
		changed |= IBVD_ROCE_PORT_DOWN;
	if (!was_up && r->netdev.up)
		changed |= IBVD_ROCE_PORT_UP;
	return changed;
}
