/*
 * Fuzz target: the RoCEv2 codec (daemon/transport/roce/wire.h) on any
 * bytes, taken both as an IP packet and as a UDP payload.  Besides what
 * the sanitizers catch, it holds the codec to its promises, and aborts
 * where one is broken:
 * - a decoded packet accounts for every byte: headers, payload, pad, ICRC;
 *   encoding it again gives back its headers, but for the bits the
 *   decoder ignores (FECN, BECN, reserved);
 * - a parsed IP packet fits in the input, and building its headers again
 *   gives them back, but for what the parser ignores (DF, checksums);
 * - an ICRC set is an ICRC that checks;
 * - a run cut into packets (gso.c, the input as a datagram a link left
 *   whole) gives packets that parse, hold every byte of its UDP payload
 *   in order, and pass the checks above.
 * tests/fuzz/run runs it under libFuzzer; make check runs it on its
 * seed corpus (tests/fuzz/fuzz.mk).
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "transport/roce/internal.h"
#include "transport/roce/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)	do { if (!(cond)) abort(); } while (0)

/* The bytes of a packet's headers as the encoder writes what was decoded */
static void clear_ignored(uint8_t *h, const struct roce_pkt *p)
{
	h[4] = 0;			/* FECN, BECN, reserved */
	h[8] &= 0x80;			/* AckReq; the rest reserved */
	if (p->hdrs & ROCE_HDR_DETH)
		h[ROCE_BTH_LEN + 4] = 0;
	if (p->hdrs & ROCE_HDR_XRCETH)
		h[ROCE_BTH_LEN] = 0;	/* XRCETH: reserved, then the SRQ */
}

/* Whether wire.h's rules say these bytes decode, worked out apart */
static bool decodable(const uint8_t *d, size_t size)
{
	/* RETH, AETH, AtomicETH, AtomicAckETH, ImmDt, IETH, DETH, XRCETH */
	static const size_t len[] = { 16, 4, 28, 8, 4, 4, 8, 4 };
	size_t hl = ROCE_BTH_LEN, bit;
	int hdrs;

	if (size < ROCE_BTH_LEN + ROCE_ICRC_LEN || size > 65535 || (d[1] & 0x0F))
		return false;
	hdrs = roce_opcode_hdrs(d[0]);
	if (hdrs < 0)
		return false;
	for (bit = 0; bit < 8; bit++)
		if (hdrs & 1 << bit)
			hl += len[bit];
	return size >= hl + ROCE_ICRC_LEN &&
	       (size_t)(d[1] >> 4 & 3) <= size - hl - ROCE_ICRC_LEN;
}

static void udp_payload(const uint8_t *data, size_t size)
{
	uint8_t enc[ROCE_MAX_HDRS], want[ROCE_MAX_HDRS];
	struct roce_pkt p;
	size_t hl;
	int err;

	err = roce_decode(data, size, &p);
	CHECK(err == 0 || err == -EBADMSG);
	CHECK((err == 0) == decodable(data, size));
	if (err)
		return;
	CHECK(roce_opcode_hdrs(data[0]) == (int)p.hdrs);
	hl = roce_encode(&p, enc);
	CHECK(hl <= ROCE_MAX_HDRS);
	CHECK(p.payload == data + hl);
	CHECK(hl + p.payload_len + p.pad + ROCE_ICRC_LEN == size);
	memcpy(want, data, hl);
	clear_ignored(want, &p);
	CHECK(memcmp(enc, want, hl) == 0);
}

static void headers_rebuilt(const uint8_t *data, const struct roce_ip *ip,
			    size_t off, size_t udp_len)
{
	uint8_t buf[ROCE_MAX_IP_HDRS];
	size_t ip_len = off - 8;

	CHECK(roce_build_ip(ip, udp_len, buf) == off);
	if (ip->family == AF_INET) {
		CHECK(memcmp(buf, data, 6) == 0);		/* to the ID */
		CHECK(memcmp(buf + 8, data + 8, 2) == 0);	/* TTL, proto */
		CHECK(memcmp(buf + 12, data + 12, 8) == 0);	/* addresses */
	} else {
		CHECK(memcmp(buf, data, ip_len) == 0);
	}
	CHECK(memcmp(buf + ip_len, data + ip_len, 6) == 0);	/* UDP */
}

static void ip_packet(const uint8_t *data, size_t size)
{
	struct roce_ip ip;
	size_t off, udp_len;
	uint8_t *copy;

	(void)roce_icrc_ok(data, size);
	if (roce_parse_ip(data, size, &ip, &off, &udp_len) != 0)
		return;
	CHECK(off == 28 || off == 48);
	CHECK(off + udp_len <= size);
	headers_rebuilt(data, &ip, off, udp_len);
	udp_payload(data + off, udp_len);

	copy = malloc(off + udp_len);
	CHECK(copy);
	memcpy(copy, data, off + udp_len);
	roce_icrc_set(copy, off + udp_len);
	CHECK(roce_icrc_ok(copy, off + udp_len) ==
	      (udp_len >= ROCE_BTH_LEN + ROCE_ICRC_LEN));
	free(copy);
}

/* What cutting a run gave: its packets' UDP payloads, end to end. */
struct cut {
	uint8_t payload[ROCE_GSO_MAX];
	size_t len;
	unsigned int reuses;
};

static void cut_packet(void *arg, const uint8_t *pkt, size_t len)
{
	struct cut *c = arg;
	struct roce_ip ip;
	size_t off, udp_len;

	CHECK(roce_parse_ip(pkt, len, &ip, &off, &udp_len) == 0);
	CHECK(ip.family == AF_INET && off == 28 && off + udp_len == len);
	CHECK(c->len + udp_len <= sizeof(c->payload));
	memcpy(c->payload + c->len, pkt + off, udp_len);
	c->len += udp_len;
	ip_packet(pkt, len);
}

static void cut_reuse(void *arg)
{
	((struct cut *)arg)->reuses++;
}

static void run_cut(const uint8_t *data, size_t size)
{
	static uint8_t out[2 * ROCE_GSO_MAX];
	static struct cut c;
	const struct roce_gso_sink sink = { cut_packet, cut_reuse, &c };
	struct roce_ip ip;
	size_t off, udp_len;

	c.len = 0;
	c.reuses = 0;
	if (roce_gso_split(data, size, out, sizeof(out), &sink) != 0) {
		CHECK(c.len == 0);
		return;
	}
	CHECK(roce_parse_ip(data, size, &ip, &off, &udp_len) == 0);
	CHECK(c.len == udp_len && memcmp(c.payload, data + off, udp_len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	udp_payload(data, size);
	ip_packet(data, size);
	run_cut(data, size);
	return 0;
}
