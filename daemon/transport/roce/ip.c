/*
 * The IP and UDP headers under the BTH (wire.h), the UDP source ports rxe
 * picks, and the mapping between RoCEv2 GIDs and IP addresses.
 */
#include <config.h>

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "be.h"
#include "wire.h"

#define IPV4_LEN		20
#define IPV6_LEN		40
#define UDP_LEN			8
/* version 4, header length 5 words: no options */
#define IPV4_VER_IHL		0x45
#define IPV4_DF			0x4000
/* more fragments and the fragment offset */
#define IPV4_FRAGMENT		0x3FFF
#define IPV6_FLOW_LABEL		0xFFFFFu

/* ---- parsing --------------------------------------------------------------- */

/* The ones' complement sum of an IPv4 header: 0xFFFF if its checksum is right */
static uint16_t ipv4_sum(const uint8_t *h)
{
	uint32_t sum = 0;
	unsigned int i;

	for (i = 0; i < IPV4_LEN; i += 2)
		sum += get_be16(h + i);
	sum = (sum & 0xFFFF) + (sum >> 16);
	sum = (sum & 0xFFFF) + (sum >> 16);
	return (uint16_t)sum;
}

/* IPv4: r and the length of the IP payload (the UDP datagram), or -EBADMSG */
static int parse_ipv4(const uint8_t *pkt, size_t len, struct roce_ip *r,
		      size_t *datagram)
{
	size_t total;

	if (len < IPV4_LEN || pkt[0] != IPV4_VER_IHL)
		return -EBADMSG;
	total = get_be16(pkt + 2);
	if (total < IPV4_LEN || total > len ||
	    (get_be16(pkt + 6) & IPV4_FRAGMENT) || pkt[9] != IPPROTO_UDP ||
	    ipv4_sum(pkt) != 0xFFFF)
		return -EBADMSG;
	r->family = AF_INET;
	r->tclass = pkt[1];
	r->ip_id = get_be16(pkt + 4);
	r->hop_limit = pkt[8];
	memcpy(r->src, pkt + 12, 4);
	memcpy(r->dst, pkt + 16, 4);
	*datagram = total - IPV4_LEN;
	return 0;
}

static int parse_ipv6(const uint8_t *pkt, size_t len, struct roce_ip *r,
		      size_t *datagram)
{
	uint32_t word0;
	size_t payload;

	if (len < IPV6_LEN)
		return -EBADMSG;
	payload = get_be16(pkt + 4);
	if (payload > len - IPV6_LEN || pkt[6] != IPPROTO_UDP)
		return -EBADMSG;
	word0 = get_be32(pkt);
	r->family = AF_INET6;
	r->tclass = (uint8_t)(word0 >> 20);
	r->flow_label = word0 & IPV6_FLOW_LABEL;
	r->hop_limit = pkt[7];
	memcpy(r->src, pkt + 8, 16);
	memcpy(r->dst, pkt + 24, 16);
	*datagram = payload;
	return 0;
}

/*
 * Parsed into a copy, so that ip is left alone on failure.  A UDP length
 * shorter than the IP payload is refused too: no RoCE sender pads a
 * datagram, and the ICRC would not know where the packet ends.
 */
int roce_parse_ip(const uint8_t *pkt, size_t len, struct roce_ip *ip,
		  size_t *udp_payload, size_t *udp_payload_len)
{
	struct roce_ip r = { 0 };
	const uint8_t *udp;
	size_t datagram;
	int err;

	if (len < 1)
		return -EBADMSG;
	if (pkt[0] >> 4 == 4)
		err = parse_ipv4(pkt, len, &r, &datagram);
	else if (pkt[0] >> 4 == 6)
		err = parse_ipv6(pkt, len, &r, &datagram);
	else
		err = -EBADMSG;
	if (err)
		return err;
	udp = pkt + (r.family == AF_INET ? IPV4_LEN : IPV6_LEN);
	if (datagram < UDP_LEN || get_be16(udp + 4) != datagram)
		return -EBADMSG;
	r.sport = get_be16(udp);
	r.dport = get_be16(udp + 2);
	*ip = r;
	*udp_payload = (size_t)(udp - pkt) + UDP_LEN;
	*udp_payload_len = datagram - UDP_LEN;
	return 0;
}

/* ---- building -------------------------------------------------------------- */

static size_t build_ipv4(const struct roce_ip *ip, size_t datagram, uint8_t *h)
{
	h[0] = IPV4_VER_IHL;
	h[1] = ip->tclass;
	put_be16(h + 2, (uint16_t)(IPV4_LEN + datagram));
	put_be16(h + 4, ip->ip_id);
	put_be16(h + 6, IPV4_DF);
	h[8] = ip->hop_limit;
	h[9] = IPPROTO_UDP;
	put_be16(h + 10, 0);
	memcpy(h + 12, ip->src, 4);
	memcpy(h + 16, ip->dst, 4);
	put_be16(h + 10, (uint16_t)~ipv4_sum(h));
	return IPV4_LEN;
}

void roce_build_ipv6_hdr(const struct roce_ip *ip, size_t datagram,
			 uint8_t *h)
{
	put_be32(h, 6u << 28 | (uint32_t)ip->tclass << 20 |
		 (ip->flow_label & IPV6_FLOW_LABEL));
	put_be16(h + 4, (uint16_t)datagram);
	h[6] = IPPROTO_UDP;
	h[7] = ip->hop_limit;
	memcpy(h + 8, ip->src, 16);
	memcpy(h + 24, ip->dst, 16);
}

size_t roce_build_ip(const struct roce_ip *ip, size_t udp_payload_len,
		     uint8_t *buf)
{
	size_t datagram = UDP_LEN + udp_payload_len;
	size_t hl;
	uint8_t *udp;

	if (ip->family == AF_INET)
		hl = build_ipv4(ip, datagram, buf);
	else {
		roce_build_ipv6_hdr(ip, datagram, buf);
		hl = IPV6_LEN;
	}
	udp = buf + hl;
	put_be16(udp, ip->sport);
	put_be16(udp + 2, ip->dport);
	put_be16(udp + 4, (uint16_t)datagram);
	put_be16(udp + 6, 0);
	return hl + UDP_LEN;
}

static void ipv4_resum(uint8_t *h)
{
	put_be16(h + 10, 0);
	put_be16(h + 10, (uint16_t)~ipv4_sum(h));
}

void roce_ipv4_set_id(uint8_t *pkt, uint16_t id)
{
	put_be16(pkt + 4, id);
	ipv4_resum(pkt);
}

void roce_ipv4_set_lengths(uint8_t *pkt, size_t udp_payload_len)
{
	put_be16(pkt + 2, (uint16_t)(IPV4_LEN + UDP_LEN + udp_payload_len));
	put_be16(pkt + IPV4_LEN + 4, (uint16_t)(UDP_LEN + udp_payload_len));
	ipv4_resum(pkt);
}

size_t roce_ip_hdrs_len(int family)
{
	return (family == AF_INET ? IPV4_LEN : IPV6_LEN) + UDP_LEN;
}

/* ---- UDP source ports ------------------------------------------------------ */

/* The lowest port of the range rxe draws source ports from */
#define SPORT_BASE		0xC000
#define SPORT_BITS		14

/* Linux's hash_32(v, bits): multiply by the golden ratio, keep the top bits */
static uint32_t hash_32(uint32_t v, unsigned int bits)
{
	return v * 0x61C88647u >> (32 - bits);
}

uint16_t roce_udp_sport(uint32_t qpn)
{
	return (uint16_t)(SPORT_BASE + (hash_32(qpn, SPORT_BITS) & 0x3FFF));
}

/* A flow label made of both ends' QP numbers (Linux rdma_calc_flow_label) */
static uint32_t qpn_flow_label(uint32_t qpn, uint32_t dest_qpn)
{
	uint64_t v = (uint64_t)qpn * dest_qpn;

	v ^= v >> 20;
	v ^= v >> 40;
	return (uint32_t)v & IPV6_FLOW_LABEL;
}

/* The 20 bits of the flow label folded into the 14 of the port range */
uint16_t roce_udp_sport_connected(uint32_t flow_label, uint32_t qpn,
				  uint32_t dest_qpn)
{
	uint32_t fl = flow_label & IPV6_FLOW_LABEL;

	if (!fl)
		fl = qpn_flow_label(qpn, dest_qpn);
	return (uint16_t)(SPORT_BASE | ((fl & 0x3FFF) ^ fl >> SPORT_BITS));
}

/* ---- GIDs ------------------------------------------------------------------ */

static const uint8_t v4_mapped[12] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF
};

int roce_gid_family(const uint8_t gid[16])
{
	return memcmp(gid, v4_mapped, sizeof(v4_mapped)) ? AF_INET6 : AF_INET;
}

void roce_gid_to_ip(const uint8_t gid[16], uint8_t addr[16])
{
	if (roce_gid_family(gid) == AF_INET) {
		memset(addr, 0, 16);
		memcpy(addr, gid + 12, 4);
	} else {
		memcpy(addr, gid, 16);
	}
}

void roce_ip_to_gid(int family, const uint8_t *addr, uint8_t gid[16])
{
	if (family == AF_INET) {
		memcpy(gid, v4_mapped, sizeof(v4_mapped));
		memcpy(gid + 12, addr, 4);
	} else {
		memcpy(gid, addr, 16);
	}
}

bool roce_ip_is_multicast(int family, const uint8_t *addr)
{
	return family == AF_INET ? (addr[0] & 0xF0) == 0xE0 : addr[0] == 0xFF;
}

bool roce_gid_is_multicast(const uint8_t gid[16])
{
	uint8_t addr[16];

	roce_gid_to_ip(gid, addr);
	return roce_ip_is_multicast(roce_gid_family(gid), addr);
}

static bool v6_has_v4(const uint8_t *a)
{
	static const uint8_t zero[12];

	/* ::a.b.c.d (deprecated, still an IPv4 address) or ::ffff:a.b.c.d */
	return memcmp(a, zero, 10) == 0 &&
	       ((a[10] == 0 && a[11] == 0) || (a[10] == 0xff && a[11] == 0xff));
}

bool roce_ip_addrs_plausible(const struct roce_ip *ip)
{
	const uint8_t *s = ip->src;

	if (ip->family == AF_INET)
		/* 0/8, 127/8, and 224/4 and above (multicast, reserved, broadcast) */
		return s[0] != 0 && s[0] != 127 && s[0] < 224;
	/* :: and ::1 are IPv4-compatible in form; ff00::/8 is multicast */
	return s[0] != 0xff && !v6_has_v4(s) && !v6_has_v4(ip->dst);
}
