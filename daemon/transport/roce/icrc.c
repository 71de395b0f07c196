/*
 * The invariant CRC of a RoCEv2 packet (wire.h).  It covers what no
 * router may change: a CRC-32 over eight 0xFF bytes (standing in for the
 * InfiniBand LRH), then the IP, UDP and BTH headers with every field a
 * hop may rewrite set to ones (IPv4 TOS, TTL and header checksum; IPv6
 * traffic class, flow label and hop limit; the UDP checksum; BTH byte 4,
 * FECN and BECN), then the rest of the packet up to the ICRC, which goes
 * on the wire least significant byte first.  A packet whose ICRC is wrong
 * is one rxe drops without a word, so this must match it bit for bit.
 */
#include <config.h>

#include <endian.h>
#include <string.h>

#include "crc32.h"
#include "wire.h"

#define IPV4_LEN		20
#define IPV6_LEN		40
#define UDP_LEN			8

/* The CRC register after the eight 0xFF bytes, from all ones: rxe's seed */
#define ICRC_SEED		0xDEBB20E3u

/*
 * The bytes of the IP, UDP and BTH headers of a packet of len bytes, or 0
 * if it is no IPv4 or IPv6 packet with room for them and an ICRC.
 */
static size_t icrc_hdrs_len(const uint8_t *pkt, size_t len)
{
	size_t hl;

	if (len < 1)
		return 0;
	if (pkt[0] >> 4 == 4)
		hl = IPV4_LEN + UDP_LEN + ROCE_BTH_LEN;
	else if (pkt[0] >> 4 == 6)
		hl = IPV6_LEN + UDP_LEN + ROCE_BTH_LEN;
	else
		return 0;
	return len < hl + ROCE_ICRC_LEN ? 0 : hl;
}

/* pkt's first hl bytes into out, the variant fields set to ones */
static void mask_hdrs(const uint8_t *pkt, size_t hl, uint8_t *out)
{
	uint8_t *udp;

	memcpy(out, pkt, hl);
	if (pkt[0] >> 4 == 4) {
		out[1] = 0xFF;				/* TOS */
		out[8] = 0xFF;				/* TTL */
		memset(out + 10, 0xFF, 2);		/* header checksum */
		udp = out + IPV4_LEN;
	} else {
		out[0] |= 0x0F;				/* traffic class, */
		memset(out + 1, 0xFF, 3);		/* flow label */
		out[7] = 0xFF;				/* hop limit */
		udp = out + IPV6_LEN;
	}
	memset(udp + 6, 0xFF, 2);			/* UDP checksum */
	udp[UDP_LEN + 4] = 0xFF;			/* BTH: FECN, BECN */
}

uint32_t roce_icrc(const uint8_t *ip_pkt, size_t len)
{
	uint8_t hdrs[IPV6_LEN + UDP_LEN + ROCE_BTH_LEN];
	size_t hl = icrc_hdrs_len(ip_pkt, len);
	uint32_t reg;

	if (!hl)
		return 0;
	mask_hdrs(ip_pkt, hl, hdrs);
	reg = roce_crc32_update(ICRC_SEED, hdrs, hl);
	reg = roce_crc32_update(reg, ip_pkt + hl, len - hl - ROCE_ICRC_LEN);
	return ~reg;
}

void roce_icrc_set(uint8_t *ip_pkt, size_t len)
{
	uint32_t icrc;

	if (!icrc_hdrs_len(ip_pkt, len))
		return;
	icrc = htole32(roce_icrc(ip_pkt, len));
	memcpy(ip_pkt + len - ROCE_ICRC_LEN, &icrc, ROCE_ICRC_LEN);
}

bool roce_icrc_ok(const uint8_t *ip_pkt, size_t len)
{
	uint32_t icrc;

	if (!icrc_hdrs_len(ip_pkt, len))
		return false;
	memcpy(&icrc, ip_pkt + len - ROCE_ICRC_LEN, ROCE_ICRC_LEN);
	return le32toh(icrc) == roce_icrc(ip_pkt, len);
}
