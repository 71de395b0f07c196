/*
 * The RoCEv2 packet codec (daemon/transport/roce/wire.h) on packets made
 * here: the worked example of the wire notes byte for byte, every opcode,
 * each header's layout, pad, malformed BTHs and IP headers, IPv6, GIDs and
 * the CRC-32 under the ICRC.  test_roce_capture.c has real traffic.
 */
#include <config.h>

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon/transport/roce/crc32.h"
#include "daemon/transport/roce/wire.h"
#include "tests/common/check_run.h"

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* ---- the worked example -------------------------------------------------- */

/* roce-wire notes §3: IPv4 RC SEND_ONLY "ABCD", checked with tshark */
static const uint8_t example[] = {
	0x45, 0x00, 0x00, 0x30, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11,
	0xa5, 0x35, 0xc0, 0xa8, 0x01, 0x01, 0xc0, 0xa8, 0x01, 0x02,
	0xc1, 0x23, 0x12, 0xb7, 0x00, 0x1c, 0x00, 0x00,
	0x04, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x00, 0x00, 0x01,
	0x41, 0x42, 0x43, 0x44,
	0xf9, 0xf3, 0x78, 0xde,
};

static struct roce_ip example_ip(void)
{
	struct roce_ip ip = {
		.family = AF_INET,
		.src = { 192, 168, 1, 1 },
		.dst = { 192, 168, 1, 2 },
		.tclass = 0,
		.hop_limit = 64,
		.ip_id = 0x1234,
		.sport = 0xC123,
		.dport = ROCE_UDP_PORT,
	};

	return ip;
}

/*
 * The worked example's packet over ip into buf: an RC SEND_ONLY to QP
 * 0x11, PSN 1, AckReq, payload "ABCD", its ICRC set.  Checks that the IP
 * and UDP headers take iph bytes; returns the packet's length.
 */
static size_t example_build(const struct roce_ip *ip, size_t iph, uint8_t *buf)
{
	struct roce_pkt p;
	size_t n;

	roce_pkt_init(&p, ROCE_RC_SEND_ONLY);
	p.dest_qp = 0x11;
	p.ack_req = true;
	p.psn = 1;
	n = roce_build_ip(ip, ROCE_BTH_LEN + 4 + ROCE_ICRC_LEN, buf);
	ck_assert_uint_eq(n, iph);
	n += roce_encode(&p, buf + n);
	ck_assert_uint_eq(n, iph + ROCE_BTH_LEN);
	memcpy(buf + n, "ABCD", 4);
	n += 4 + ROCE_ICRC_LEN;
	roce_icrc_set(buf, n);
	return n;
}

START_TEST(example_built_byte_for_byte)
{
	struct roce_ip ip = example_ip();
	uint8_t buf[128];
	size_t n = example_build(&ip, 28, buf);

	ck_assert_uint_eq(n, sizeof(example));
	ck_assert_mem_eq(buf, example, sizeof(example));
	ck_assert_uint_eq(roce_icrc(buf, n), 0xDE78F3F9);
}
END_TEST

START_TEST(example_decoded)
{
	struct roce_ip ip, want = example_ip();
	struct roce_pkt p;
	size_t off, len;

	ck_assert_int_eq(roce_parse_ip(example, sizeof(example), &ip, &off, &len), 0);
	ck_assert_int_eq(ip.family, AF_INET);
	ck_assert_mem_eq(ip.src, want.src, 4);
	ck_assert_mem_eq(ip.dst, want.dst, 4);
	ck_assert_uint_eq(ip.tclass, 0);
	ck_assert_uint_eq(ip.hop_limit, 64);
	ck_assert_uint_eq(ip.ip_id, 0x1234);
	ck_assert_uint_eq(ip.sport, 0xC123);
	ck_assert_uint_eq(ip.dport, ROCE_UDP_PORT);
	ck_assert_uint_eq(off, 28);
	ck_assert_uint_eq(len, 20);
	ck_assert(roce_icrc_ok(example, sizeof(example)));

	ck_assert_int_eq(roce_decode(example + off, len, &p), 0);
	ck_assert_uint_eq(p.opcode, ROCE_RC_SEND_ONLY);
	ck_assert(!p.se && !p.mig_req && p.ack_req);
	ck_assert_uint_eq(p.pad, 0);
	ck_assert_uint_eq(p.pkey, 0xFFFF);
	ck_assert_uint_eq(p.dest_qp, 0x11);
	ck_assert_uint_eq(p.psn, 1);
	ck_assert_uint_eq(p.hdrs, 0);
	ck_assert_ptr_eq(p.payload, example + 40);
	ck_assert_uint_eq(p.payload_len, 4);
}
END_TEST

/* ---- the BTH: versions, opcodes, pad ------------------------------------- */

/* A refused packet leaves out alone: every byte of it still 0xA5 */
static void assert_untouched(const struct roce_pkt *p)
{
	const uint8_t *b = (const uint8_t *)p;
	size_t i;

	for (i = 0; i < sizeof(*p); i++)
		ck_assert_uint_eq(b[i], 0xA5);
}

START_TEST(bad_tver)
{
	uint8_t b[sizeof(example) - 28];
	struct roce_pkt p;
	unsigned int v;

	memcpy(b, example + 28, sizeof(b));
	for (v = 1; v < 16; v++) {
		b[1] = (uint8_t)v;
		memset(&p, 0xA5, sizeof(p));
		ck_assert_int_eq(roce_decode(b, sizeof(b), &p), -EBADMSG);
		assert_untouched(&p);
	}
	b[1] = 0xF0;		/* SE, MigReq, PadCnt 3 around TVer 0: fine */
	ck_assert_int_eq(roce_decode(b, sizeof(b), &p), 0);
	ck_assert(p.se && p.mig_req);
	ck_assert_uint_eq(p.pad, 3);
	ck_assert_uint_eq(p.payload_len, 1);
}
END_TEST

/* The opcodes we speak, and each one's headers (roce-wire notes §2) */
static int want_hdrs(unsigned int op)
{
	static const int rc[0x18] = {
		0, 0, 0, ROCE_HDR_IMM, 0, ROCE_HDR_IMM,
		ROCE_HDR_RETH, 0, 0, ROCE_HDR_IMM, ROCE_HDR_RETH,
		ROCE_HDR_RETH | ROCE_HDR_IMM, ROCE_HDR_RETH,
		ROCE_HDR_AETH, 0, ROCE_HDR_AETH, ROCE_HDR_AETH, ROCE_HDR_AETH,
		ROCE_HDR_AETH | ROCE_HDR_ATOMIC_ACK, ROCE_HDR_ATOMIC,
		ROCE_HDR_ATOMIC, -1, ROCE_HDR_IETH, ROCE_HDR_IETH,
	};

	if (op < 0x18)
		return rc[op];
	if (op >= 0x20 && op <= 0x2B)
		return rc[op - 0x20];
	if (op == 0x64)
		return ROCE_HDR_DETH;
	if (op == 0x65)
		return ROCE_HDR_DETH | ROCE_HDR_IMM;
	/* XRC: RC's operations; its requests with an XRCETH, answers without */
	if (op >= 0xA0 && op < 0xB8 && rc[op - 0xA0] >= 0)
		return rc[op - 0xA0] | ((op >= 0xAD && op <= 0xB2) ? 0 : ROCE_HDR_XRCETH);
	return -1;
}

static size_t want_hdrs_len(int hdrs)
{
	static const size_t len[] = { 16, 4, 28, 8, 4, 4, 8, 4 };
	size_t n = ROCE_BTH_LEN, bit;

	for (bit = 0; bit < 8; bit++)
		if (hdrs & (1 << bit))
			n += len[bit];
	return n;
}

START_TEST(opcodes)
{
	uint8_t b[64] = { 0 };
	struct roce_pkt p;
	unsigned int op;

	for (op = 0; op < 256; op++) {
		int hdrs = want_hdrs(op);
		size_t hl = want_hdrs_len(hdrs);

		b[0] = (uint8_t)op;
		ck_assert_msg(roce_opcode_hdrs((uint8_t)op) == hdrs, "opcode 0x%02x", op);
		if (hdrs < 0) {
			ck_assert_int_eq(roce_decode(b, sizeof(b), &p), -EBADMSG);
			continue;
		}
		/* just long enough: headers and ICRC; one short of that */
		ck_assert_int_eq(roce_decode(b, hl + ROCE_ICRC_LEN, &p), 0);
		ck_assert_uint_eq(p.payload_len, 0);
		ck_assert_uint_eq(p.hdrs, (unsigned int)hdrs);
		ck_assert_int_eq(roce_decode(b, hl + ROCE_ICRC_LEN - 1, &p), -EBADMSG);
		roce_pkt_init(&p, (uint8_t)op);
		ck_assert_uint_eq(p.hdrs, (unsigned int)hdrs);
		ck_assert_uint_eq(p.pkey, ROCE_DEFAULT_PKEY);
		ck_assert_uint_eq(roce_encode(&p, b), hl);
		ck_assert_uint_le(hl, ROCE_MAX_HDRS);
	}
	/* named among those we don't speak: FLUSH, ATOMIC_WRITE, RD, CNP */
	ck_assert_int_eq(roce_opcode_hdrs(0x1C), -1);
	ck_assert_int_eq(roce_opcode_hdrs(0x1D), -1);
	ck_assert_int_eq(roce_opcode_hdrs(0x44), -1);
	ck_assert_int_eq(roce_opcode_hdrs(0x81), -1);
	ck_assert_int_eq(roce_opcode_hdrs(0xE0), -1);
	/* XRC's: SEND ONLY (XRCETH), ACK (AETH alone); RESYNC (0xB5) not */
	ck_assert_int_eq(roce_opcode_hdrs(0xA4), ROCE_HDR_XRCETH);
	ck_assert_int_eq(roce_opcode_hdrs(0xB1), ROCE_HDR_AETH);
	ck_assert_int_eq(roce_opcode_hdrs(0xB5), -1);
}
END_TEST

/* A payload of len bytes, PadCnt pad: decoded, or -EBADMSG */
static int decode_padded(size_t payload, unsigned int pad, struct roce_pkt *p)
{
	uint8_t b[ROCE_BTH_LEN + 8 + ROCE_ICRC_LEN] = { ROCE_RC_SEND_ONLY };

	b[1] = (uint8_t)(pad << 4);
	return roce_decode(b, ROCE_BTH_LEN + payload + ROCE_ICRC_LEN, p);
}

START_TEST(pad)
{
	struct roce_pkt p;

	ck_assert_int_eq(decode_padded(8, 3, &p), 0);
	ck_assert_uint_eq(p.payload_len, 5);
	ck_assert_uint_eq(p.pad, 3);
	ck_assert_int_eq(decode_padded(2, 2, &p), 0);
	ck_assert_uint_eq(p.payload_len, 0);
	ck_assert_int_eq(decode_padded(2, 3, &p), -EBADMSG);
	ck_assert_int_eq(decode_padded(0, 1, &p), -EBADMSG);
	ck_assert_int_eq(decode_padded(0, 0, &p), 0);
}
END_TEST

/* No UDP payload is 64 KiB long */
START_TEST(oversized)
{
	static uint8_t b[65536] = { ROCE_RC_SEND_ONLY };
	struct roce_pkt p;

	ck_assert_int_eq(roce_decode(b, sizeof(b) - 1, &p), 0);
	ck_assert_uint_eq(p.payload_len, sizeof(b) - 1 - 16);
	memset(&p, 0xA5, sizeof(p));
	ck_assert_int_eq(roce_decode(b, sizeof(b), &p), -EBADMSG);
	assert_untouched(&p);
}
END_TEST

/* ---- layouts byte for byte -------------------------------------------------- */

/* Field by field: structs have padding, which memcmp would compare too */
static void assert_pkt_eq(const struct roce_pkt *a, const struct roce_pkt *b)
{
	ck_assert_uint_eq(a->opcode, b->opcode);
	ck_assert(a->se == b->se && a->mig_req == b->mig_req &&
		  a->ack_req == b->ack_req);
	ck_assert_uint_eq(a->pad, b->pad);
	ck_assert_uint_eq(a->pkey, b->pkey);
	ck_assert_uint_eq(a->dest_qp, b->dest_qp);
	ck_assert_uint_eq(a->psn, b->psn);
	ck_assert_uint_eq(a->hdrs, b->hdrs);
	ck_assert_uint_eq(a->reth.va, b->reth.va);
	ck_assert_uint_eq(a->reth.rkey, b->reth.rkey);
	ck_assert_uint_eq(a->reth.len, b->reth.len);
	ck_assert_uint_eq(a->aeth.syndrome, b->aeth.syndrome);
	ck_assert_uint_eq(a->aeth.msn, b->aeth.msn);
	ck_assert_uint_eq(a->atomic.va, b->atomic.va);
	ck_assert_uint_eq(a->atomic.rkey, b->atomic.rkey);
	ck_assert_uint_eq(a->atomic.swap_add, b->atomic.swap_add);
	ck_assert_uint_eq(a->atomic.compare, b->atomic.compare);
	ck_assert_uint_eq(a->atomic_ack, b->atomic_ack);
	ck_assert_uint_eq(a->imm, b->imm);
	ck_assert_uint_eq(a->ieth, b->ieth);
	ck_assert_uint_eq(a->deth.qkey, b->deth.qkey);
	ck_assert_uint_eq(a->deth.src_qp, b->deth.src_qp);
	ck_assert_uint_eq(a->xrc_srqn, b->xrc_srqn);
	ck_assert_ptr_eq(a->payload, b->payload);
	ck_assert_uint_eq(a->payload_len, b->payload_len);
}

/* p encoded, checked against the bytes after the BTH */
static void assert_ext(const struct roce_pkt *p, const uint8_t *want, size_t n)
{
	uint8_t b[ROCE_MAX_HDRS + ROCE_ICRC_LEN] = { 0 };
	struct roce_pkt back;

	ck_assert_uint_eq(roce_encode(p, b), ROCE_BTH_LEN + n);
	ck_assert_mem_eq(b + ROCE_BTH_LEN, want, n);
	ck_assert_int_eq(roce_decode(b, ROCE_BTH_LEN + n + ROCE_ICRC_LEN, &back), 0);
	back.payload = p->payload;
	assert_pkt_eq(&back, p);
}

START_TEST(layout_bth)
{
	uint8_t b[ROCE_MAX_HDRS + 8] = { 0 };
	static const uint8_t want[] = {
		0x0A, 0xE0, 0x12, 0x34, 0x00, 0xAB, 0xCD, 0xEF,
		0x80, 0x65, 0x43, 0x21,
	};
	struct roce_pkt p, back;
	size_t n;

	roce_pkt_init(&p, ROCE_RC_RDMA_WRITE_ONLY);
	p.se = p.mig_req = p.ack_req = true;
	p.pad = 2;
	p.pkey = 0x1234;
	p.dest_qp = 0xFFABCDEF;		/* 24 bits on the wire */
	p.psn = 0x87654321;
	n = roce_encode(&p, b);
	ck_assert_mem_eq(b, want, sizeof(want));
	/* two bytes of pad after no payload, and the ICRC */
	ck_assert_int_eq(roce_decode(b, n + 2 + ROCE_ICRC_LEN, &back), 0);
	ck_assert(back.se && back.mig_req && back.ack_req);
	ck_assert_uint_eq(back.pad, 2);
	ck_assert_uint_eq(back.pkey, 0x1234);
	ck_assert_uint_eq(back.dest_qp, 0xABCDEF);
	ck_assert_uint_eq(back.psn, 0x654321);
	ck_assert_uint_eq(back.payload_len, 0);
}
END_TEST

/* 24-bit fields keep to their 3 bytes: the byte before them stays */
START_TEST(layout_24_bit_fields)
{
	uint8_t b[ROCE_MAX_HDRS];
	struct roce_pkt p;

	roce_pkt_init(&p, ROCE_RC_ACKNOWLEDGE);
	p.aeth.syndrome = ROCE_AETH_ACK;
	p.aeth.msn = 0xFF000001;
	ck_assert_uint_eq(roce_encode(&p, b), ROCE_BTH_LEN + 4);
	ck_assert_mem_eq(b + ROCE_BTH_LEN, "\x1f\x00\x00\x01", 4);

	roce_pkt_init(&p, ROCE_UD_SEND_ONLY);
	p.deth.src_qp = 0xFF000001;
	ck_assert_uint_eq(roce_encode(&p, b), ROCE_BTH_LEN + 8);
	ck_assert_mem_eq(b + ROCE_BTH_LEN + 4, "\x00\x00\x00\x01", 4);
}
END_TEST

/* A packet with every field its headers have set, the others zero */
static struct roce_pkt full(uint8_t opcode)
{
	struct roce_pkt p;

	roce_pkt_init(&p, opcode);
	p.dest_qp = 0x123456;
	p.psn = 0xABCDEF;
	if (p.hdrs & ROCE_HDR_RETH) {
		p.reth.va = 0x0102030405060708;
		p.reth.rkey = 0x11121314;
		p.reth.len = 0x21222324;
	}
	if (p.hdrs & ROCE_HDR_AETH) {
		p.aeth.syndrome = ROCE_AETH_NAK_ACCESS;
		p.aeth.msn = 0x313233;
	}
	if (p.hdrs & ROCE_HDR_ATOMIC) {
		p.atomic.va = 0x4142434445464748;
		p.atomic.rkey = 0x51525354;
		p.atomic.swap_add = 0x6162636465666768;
		p.atomic.compare = 0x7172737475767778;
	}
	if (p.hdrs & ROCE_HDR_ATOMIC_ACK)
		p.atomic_ack = 0x8182838485868788;
	if (p.hdrs & ROCE_HDR_IMM)
		p.imm = 0x91929394;
	if (p.hdrs & ROCE_HDR_IETH)
		p.ieth = 0xA1A2A3A4;
	if (p.hdrs & ROCE_HDR_DETH) {
		p.deth.qkey = 0xB1B2B3B4;
		p.deth.src_qp = 0xB5B6B7;
	}
	if (p.hdrs & ROCE_HDR_XRCETH)
		p.xrc_srqn = 0xC1C2C3;
	return p;
}

START_TEST(layout_reth_imm)
{
	static const uint8_t want[] = {
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
		0x11, 0x12, 0x13, 0x14, 0x21, 0x22, 0x23, 0x24,
		0x91, 0x92, 0x93, 0x94,
	};
	struct roce_pkt p = full(ROCE_RC_RDMA_WRITE_ONLY_IMM);

	assert_ext(&p, want, sizeof(want));
}
END_TEST

/*
 * XRC's: a request's extension headers are RC's after the XRCETH (8
 * reserved bits, the SRQ number), right behind the BTH; an answer's are
 * RC's alone.
 */
START_TEST(layout_xrc_is_rc_after_xrceth)
{
	static const uint8_t xrceth[] = { 0x00, 0xC1, 0xC2, 0xC3 };
	unsigned int op, requests = 0;

	for (op = ROCE_OP_XRC; op < ROCE_OP_XRC + 0x20; op++) {
		uint8_t rc[ROCE_MAX_HDRS], want[ROCE_MAX_HDRS];
		struct roce_pkt p, r;
		size_t n, pre;

		if (roce_opcode_hdrs((uint8_t)op) < 0)
			continue;
		r = full((uint8_t)ROCE_OP_OPERATION(op));
		n = roce_encode(&r, rc) - ROCE_BTH_LEN;
		p = full((uint8_t)op);
		/* answers: READ responses, ACK, atomic ACK (0x0D-0x12) */
		pre = ((op & 0x1F) < 0x0D || (op & 0x1F) > 0x12) ? sizeof(xrceth) : 0;
		memcpy(want, xrceth, pre);
		memcpy(want + pre, rc + ROCE_BTH_LEN, n);
		assert_ext(&p, want, pre + n);
		requests += pre != 0;
	}
	/* SEND x6, WRITE x6, READ request, two atomics, two SENDs with INV */
	ck_assert_uint_eq(requests, 17);
}
END_TEST

START_TEST(layout_atomic)
{
	static const uint8_t want[] = {
		0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48,
		0x51, 0x52, 0x53, 0x54,
		0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68,
		0x71, 0x72, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78,
	};
	struct roce_pkt p = full(ROCE_RC_COMPARE_SWAP);

	assert_ext(&p, want, sizeof(want));
}
END_TEST

START_TEST(layout_atomic_ack)
{
	static const uint8_t want[] = {
		0x62, 0x31, 0x32, 0x33,
		0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88,
	};
	struct roce_pkt p = full(ROCE_RC_ATOMIC_ACKNOWLEDGE);

	assert_ext(&p, want, sizeof(want));
}
END_TEST

START_TEST(layout_deth_imm)
{
	static const uint8_t want[] = {
		0xB1, 0xB2, 0xB3, 0xB4, 0x00, 0xB5, 0xB6, 0xB7,
		0x91, 0x92, 0x93, 0x94,
	};
	struct roce_pkt p = full(ROCE_UD_SEND_ONLY_IMM);

	assert_ext(&p, want, sizeof(want));
}
END_TEST

START_TEST(layout_ieth)
{
	static const uint8_t want[] = { 0xA1, 0xA2, 0xA3, 0xA4 };
	struct roce_pkt p = full(ROCE_RC_SEND_LAST_INV);

	assert_ext(&p, want, sizeof(want));
}
END_TEST

/* Every opcode: all its fields survive encoding and decoding */
START_TEST(round_trip_every_opcode)
{
	unsigned int op;

	for (op = 0; op < 256; op++) {
		uint8_t b[ROCE_MAX_HDRS + 8];
		struct roce_pkt p, back;
		size_t n;

		if (roce_opcode_hdrs((uint8_t)op) < 0)
			continue;
		p = full((uint8_t)op);
		p.pad = 3;
		n = roce_encode(&p, b);
		memcpy(b + n, "\x55\0\0\0\0\0\0", 8);	/* 1 byte, pad, ICRC */
		ck_assert_int_eq(roce_decode(b, n + 8, &back), 0);
		ck_assert_ptr_eq(back.payload, b + n);
		ck_assert_uint_eq(back.payload_len, 1);
		back.payload = NULL;
		back.payload_len = 0;
		assert_pkt_eq(&back, &p);
	}
}
END_TEST

/* ---- IP and UDP headers ------------------------------------------------- */

static struct roce_ip v6_ip(void)
{
	struct roce_ip ip = {
		.family = AF_INET6,
		.src = { 0xfe, 0x80, [8] = 0x50, 0x54, 0, 0xff, 0xfe, 0x88, 1, 2 },
		.dst = { 0x20, 0x01, 0x0d, 0xb8, [15] = 3 },
		.tclass = 0xB8,
		.hop_limit = 7,
		.flow_label = 0xABCDE,
		.sport = 0xC001,
		.dport = ROCE_UDP_PORT,
	};

	return ip;
}

START_TEST(ipv6_built_and_parsed)
{
	struct roce_ip ip = v6_ip(), back;
	static const uint8_t head[8] = {
		0x6B, 0x8A, 0xBC, 0xDE, 0x00, 0x1C, 17, 7
	};
	uint8_t b[68];
	struct roce_pkt p;
	size_t n, off, len;

	n = roce_build_ip(&ip, 20, b);
	ck_assert_uint_eq(n, 48);
	ck_assert_mem_eq(b, head, sizeof(head));
	ck_assert_mem_eq(b + 8, ip.src, 16);
	ck_assert_mem_eq(b + 24, ip.dst, 16);
	ck_assert_mem_eq(b + 40, "\xc0\x01\x12\xb7\x00\x1c\x00\x00", 8);
	roce_pkt_init(&p, ROCE_RC_SEND_ONLY);
	n += roce_encode(&p, b + n);
	memcpy(b + n, "ABCD", 4);
	roce_icrc_set(b, sizeof(b));
	ck_assert(roce_icrc_ok(b, sizeof(b)));

	ck_assert_int_eq(roce_parse_ip(b, sizeof(b), &back, &off, &len), 0);
	ck_assert_uint_eq(off, 48);
	ck_assert_uint_eq(len, 20);
	ck_assert_int_eq(back.family, AF_INET6);
	ck_assert_mem_eq(back.src, ip.src, 16);
	ck_assert_mem_eq(back.dst, ip.dst, 16);
	ck_assert_uint_eq(back.tclass, ip.tclass);
	ck_assert_uint_eq(back.hop_limit, ip.hop_limit);
	ck_assert_uint_eq(back.flow_label, ip.flow_label);
	ck_assert_uint_eq(back.ip_id, 0);
	ck_assert_uint_eq(back.sport, ip.sport);
	ck_assert_uint_eq(back.dport, ip.dport);
}
END_TEST

/*
 * The worked example over IPv6: 2001:db8::1 -> 2001:db8::2, traffic class
 * and flow label 0 and hop limit 64 as rxe sends them, the same UDP, BTH
 * and payload.  Its ICRC (0xCFF63725) was computed apart from this code,
 * with zlib's CRC-32 over the algorithm of the wire notes (§3), which
 * gives the IPv4 example's 0xDE78F3F9 as well.
 */
static const uint8_t example6[] = {
	0x60, 0x00, 0x00, 0x00, 0x00, 0x1c, 0x11, 0x40,
	0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01,
	0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02,
	0xc1, 0x23, 0x12, 0xb7, 0x00, 0x1c, 0x00, 0x00,
	0x04, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x00, 0x00, 0x01,
	0x41, 0x42, 0x43, 0x44,
	0x25, 0x37, 0xf6, 0xcf,
};

START_TEST(ipv6_example_built_byte_for_byte)
{
	struct roce_ip ip = {
		.family = AF_INET6,
		.src = { 0x20, 0x01, 0x0d, 0xb8, [15] = 1 },
		.dst = { 0x20, 0x01, 0x0d, 0xb8, [15] = 2 },
		.hop_limit = 64,
		.sport = 0xC123,
		.dport = ROCE_UDP_PORT,
	};
	uint8_t buf[128];
	size_t n = example_build(&ip, 48, buf);

	ck_assert_uint_eq(roce_ip_hdrs_len(AF_INET6), 48);
	ck_assert_uint_eq(n, sizeof(example6));
	ck_assert_mem_eq(buf, example6, sizeof(example6));
	ck_assert_uint_eq(roce_icrc(buf, n), 0xCFF63725);
	ck_assert(roce_icrc_ok(example6, sizeof(example6)));
}
END_TEST

/*
 * What a receiver of a raw IPv6 socket does: the datagram without its
 * header, the header written again from the addresses and the masked
 * fields as the socket reported them.  Any traffic class, flow label and
 * hop limit give back a packet whose ICRC holds.
 */
START_TEST(ipv6_header_rebuilt)
{
	struct roce_ip ip = v6_ip(), got;
	uint8_t b[68] = { 0 }, c[68];
	size_t n, off, len;

	n = roce_build_ip(&ip, 20, b);
	b[n] = ROCE_RC_SEND_ONLY;
	roce_icrc_set(b, sizeof(b));
	ck_assert_int_eq(roce_parse_ip(b, sizeof(b), &got, &off, &len), 0);

	memcpy(c, b, sizeof(c));
	memset(c, 0xEE, 40);
	roce_build_ipv6_hdr(&got, sizeof(b) - 40, c);
	ck_assert_mem_eq(c, b, sizeof(b));

	got.tclass = 0;
	got.flow_label = 0;
	got.hop_limit = 0;
	roce_build_ipv6_hdr(&got, sizeof(b) - 40, c);
	ck_assert(roce_icrc_ok(c, sizeof(c)));
	ck_assert_uint_eq(roce_icrc(c, sizeof(c)), roce_icrc(b, sizeof(b)));

	/* the addresses are covered */
	got.src[15] ^= 1;
	roce_build_ipv6_hdr(&got, sizeof(b) - 40, c);
	ck_assert(!roce_icrc_ok(c, sizeof(c)));
}
END_TEST

/* IPv6: traffic class, flow label and hop limit are outside the ICRC */
START_TEST(ipv6_icrc_variant_fields)
{
	struct roce_ip ip = v6_ip();
	uint8_t b[68] = { 0 }, c[68];
	size_t i, n;

	n = roce_build_ip(&ip, 20, b);
	b[n] = ROCE_RC_SEND_ONLY;
	roce_icrc_set(b, sizeof(b));
	for (i = 0; i < sizeof(b); i++) {
		bool variant = (i >= 1 && i <= 3) || i == 7 || i == 46 ||
			       i == 47 || i == 52;

		memcpy(c, b, sizeof(c));
		c[i] ^= i == 0 ? 0x0F : 0xFF;	/* byte 0: the class's top half */
		ck_assert_msg(roce_icrc_ok(c, sizeof(c)) == (variant || i == 0),
			      "byte %zu", i);
	}
	memcpy(c, b, sizeof(c));
	c[0] ^= 0xF0;			/* the version is covered */
	ck_assert(!roce_icrc_ok(c, sizeof(c)));
}
END_TEST

/* The IPv4 header checksum of b set right */
static void fix_checksum(uint8_t *b)
{
	uint32_t sum = 0;
	size_t i;

	b[10] = b[11] = 0;
	for (i = 0; i < 20; i += 2)
		sum += be16(b + i);
	while (sum >> 16)
		sum = (sum & 0xFFFF) + (sum >> 16);
	b[10] = (uint8_t)(~sum >> 8);
	b[11] = (uint8_t)~sum;
}

/*
 * The worked example with one byte of its IP or UDP header changed, and
 * the header checksum made right again (unless that byte is part of it):
 * each case fails for its own reason.
 */
static int parse_changed(size_t at, uint8_t value)
{
	uint8_t b[sizeof(example)];
	struct roce_ip ip;
	size_t off, len;
	int err;

	memcpy(b, example, sizeof(b));
	b[at] = value;
	if (at != 10 && at != 11)
		fix_checksum(b);
	memset(&ip, 0xA5, sizeof(ip));
	err = roce_parse_ip(b, sizeof(b), &ip, &off, &len);
	if (err)
		ck_assert_uint_eq(ip.dport, 0xA5A5);
	return err;
}

START_TEST(ipv4_malformed)
{
	struct roce_ip ip;
	size_t off, len;

	ck_assert_int_eq(parse_changed(8, 1), 0);		/* TTL: fine */
	ck_assert_int_eq(parse_changed(6, 0), 0);		/* DF: fine */
	ck_assert_int_eq(parse_changed(0, 0x46), -EBADMSG);	/* options */
	ck_assert_int_eq(parse_changed(0, 0x55), -EBADMSG);	/* version 5 */
	ck_assert_int_eq(parse_changed(3, 0x31), -EBADMSG);	/* total > len */
	ck_assert_int_eq(parse_changed(3, 0x13), -EBADMSG);	/* total < 20 */
	ck_assert_int_eq(parse_changed(3, 0x1b), -EBADMSG);	/* < UDP hdr */
	ck_assert_int_eq(parse_changed(6, 0x60), -EBADMSG);	/* MF */
	ck_assert_int_eq(parse_changed(7, 0x01), -EBADMSG);	/* offset */
	ck_assert_int_eq(parse_changed(9, 6), -EBADMSG);	/* TCP */
	ck_assert_int_eq(parse_changed(10, 0xa6), -EBADMSG);	/* checksum */
	ck_assert_int_eq(parse_changed(25, 0x1b), -EBADMSG);	/* UDP length */
	ck_assert_int_eq(parse_changed(25, 0x1d), -EBADMSG);
	ck_assert_int_eq(roce_parse_ip(example, 0, &ip, &off, &len), -EBADMSG);
}
END_TEST

START_TEST(ipv4_frame_padding_ignored)
{
	uint8_t b[sizeof(example) + 6] = { 0 };
	struct roce_ip ip;
	size_t off, len;

	memcpy(b, example, sizeof(example));
	ck_assert_int_eq(roce_parse_ip(b, sizeof(b), &ip, &off, &len), 0);
	ck_assert_uint_eq(off + len, sizeof(example));
}
END_TEST

START_TEST(ipv6_malformed)
{
	struct roce_ip ip = v6_ip(), out;
	uint8_t b[68] = { 0 };
	size_t off, len;

	roce_build_ip(&ip, 20, b);
	ck_assert_int_eq(roce_parse_ip(b, sizeof(b), &out, &off, &len), 0);
	ck_assert_int_eq(roce_parse_ip(b, sizeof(b) - 1, &out, &off, &len), -EBADMSG);
	b[6] = 0;			/* hop-by-hop options header */
	ck_assert_int_eq(roce_parse_ip(b, sizeof(b), &out, &off, &len), -EBADMSG);
	b[6] = 17;
	b[5] = 0x1b;			/* payload length != UDP length */
	ck_assert_int_eq(roce_parse_ip(b, sizeof(b), &out, &off, &len), -EBADMSG);
	b[5] = 0x04;			/* shorter than a UDP header */
	b[45] = 0x04;
	ck_assert_int_eq(roce_parse_ip(b, sizeof(b), &out, &off, &len), -EBADMSG);
}
END_TEST

/* ---- GIDs ------------------------------------------------------------------ */

START_TEST(gids)
{
	/* the server's GIDs 0 and 1 in the capture */
	static const uint8_t link_local[16] = {
		0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0x88, 1, 2
	};
	static const uint8_t v4[16] = {
		[10] = 0xff, 0xff, 10, 88, 1, 2
	};
	uint8_t addr[16], gid[16];

	ck_assert_int_eq(roce_gid_family(link_local), AF_INET6);
	ck_assert_int_eq(roce_gid_family(v4), AF_INET);
	roce_gid_to_ip(v4, addr);
	ck_assert_mem_eq(addr, "\x0a\x58\x01\x02\0\0\0\0\0\0\0\0\0\0\0\0", 16);
	roce_ip_to_gid(AF_INET, addr, gid);
	ck_assert_mem_eq(gid, v4, 16);
	roce_gid_to_ip(link_local, addr);
	ck_assert_mem_eq(addr, link_local, 16);
	roce_ip_to_gid(AF_INET6, addr, gid);
	ck_assert_mem_eq(gid, link_local, 16);
	/* ::ffff:0:0/96 only: ::a.b.c.d (IPv4-compatible) is an IPv6 GID */
	memcpy(gid, v4, 16);
	gid[10] = 0;
	ck_assert_int_eq(roce_gid_family(gid), AF_INET6);
	/* nor is an address that merely has ffff in the same place */
	memcpy(gid, v4, 16);
	gid[0] = 0xfe;
	ck_assert_int_eq(roce_gid_family(gid), AF_INET6);
}
END_TEST

/* ---- CRC-32 ---------------------------------------------------------------- */

/* One bit at a time: the definition */
static uint32_t crc32_bitwise(uint32_t reg, const uint8_t *p, size_t n)
{
	unsigned int bit;

	while (n--) {
		reg ^= *p++;
		for (bit = 0; bit < 8; bit++)
			reg = reg >> 1 ^ (reg & 1 ? 0xEDB88320u : 0);
	}
	return reg;
}

/* Addresses no peer's packet can carry (rx drops them before "peers"). */
START_TEST(implausible_addresses)
{
	static const struct {
		int family;
		const char *src, *dst;
		bool ok;
	} cases[] = {
		{ AF_INET, "10.79.0.2", "10.79.0.1", true },
		{ AF_INET, "0.0.0.0", "10.79.0.1", false },
		{ AF_INET, "127.0.0.1", "10.79.0.1", false },
		{ AF_INET, "224.0.0.1", "10.79.0.1", false },
		{ AF_INET, "255.255.255.255", "10.79.0.1", false },
		{ AF_INET6, "fd79::2", "fd79::1", true },
		{ AF_INET6, "fe80::5054:ff:fe12:3456", "fe80::1", true },
		{ AF_INET6, "::ffff:10.79.0.2", "fd79::1", false },
		{ AF_INET6, "fd79::2", "::ffff:10.79.0.1", false },
		{ AF_INET6, "::10.79.0.2", "fd79::1", false },
		{ AF_INET6, "::", "fd79::1", false },
		{ AF_INET6, "::1", "fd79::1", false },
		{ AF_INET6, "ff02::1", "fd79::1", false },
	};
	struct roce_ip ip;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(&ip, 0, sizeof(ip));
		ip.family = cases[i].family;
		ck_assert_int_eq(inet_pton(ip.family, cases[i].src, ip.src), 1);
		ck_assert_int_eq(inet_pton(ip.family, cases[i].dst, ip.dst), 1);
		ck_assert_msg(roce_ip_addrs_plausible(&ip) == cases[i].ok,
			      "%s -> %s", cases[i].src, cases[i].dst);
	}
}
END_TEST

START_TEST(crc32_check_value)
{
	ck_assert_uint_eq(~roce_crc32_update(~0u, (const uint8_t *)"123456789", 9),
			  0xCBF43926);
	ck_assert_uint_eq(roce_crc32_update(0x12345678, NULL, 0), 0x12345678);
}
END_TEST

/* Every length and alignment up to a few words, and split updates */
START_TEST(crc32_lengths_alignments)
{
	uint8_t buf[160];
	size_t i, off, n, cut;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 151 + 7);
	for (off = 0; off < 8; off++) {
		for (n = 0; n + off <= 150; n++) {
			uint32_t want = crc32_bitwise(~0u, buf + off, n);

			ck_assert_uint_eq(roce_crc32_update(~0u, buf + off, n), want);
			cut = n / 3;
			ck_assert_uint_eq(roce_crc32_update(roce_crc32_update(~0u,
				buf + off, cut), buf + off + cut, n - cut), want);
		}
	}
}
END_TEST

/*
 * Every way crc32.c has (the portable ones everywhere, folding where the
 * CPU runs it; elsewhere roce_crc32_clmul is the sliced way again)
 * against one bit at a time: random bytes, every length to 300 at every
 * alignment to 15, a few large buffers, and each continued from a CRC of
 * a first part cut anywhere, by itself or by another way.
 */
static uint32_t (*const crc32_ways[])(uint32_t, const uint8_t *, size_t) = {
	roce_crc32_update, roce_crc32_bytewise, roce_crc32_sliced,
	roce_crc32_clmul,
};
#define N_CRC32_WAYS	(sizeof(crc32_ways) / sizeof(crc32_ways[0]))

static uint64_t crc32_rand_state = 0x9E3779B97F4A7C15u;

/* xorshift64: the same bytes on every run */
static uint8_t crc32_rand(void)
{
	crc32_rand_state ^= crc32_rand_state << 13;
	crc32_rand_state ^= crc32_rand_state >> 7;
	crc32_rand_state ^= crc32_rand_state << 17;
	return (uint8_t)(crc32_rand_state >> 32);
}

START_TEST(crc32_every_way)
{
	static uint8_t buf[70000 + 16];
	static const size_t large[] = { 1024, 4096 + 7, 9000, 65536, 70000 };
	size_t i, off, n, w, v, cut;
	uint32_t seed, want;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = crc32_rand();
	for (off = 0; off < 16; off++) {
		for (n = 0; n <= 300; n++) {
			seed = n & 1 ? ~0u : 0xDEBB20E3u ^ (uint32_t)off;
			want = crc32_bitwise(seed, buf + off, n);
			for (w = 0; w < N_CRC32_WAYS; w++)
				ck_assert_uint_eq(crc32_ways[w](seed, buf + off, n),
						  want);
			/* continued: the first part by one way, the rest by another */
			cut = (n * 7 + off) % (n + 1);
			for (w = 0; w < N_CRC32_WAYS; w++) {
				v = (w + 1 + n) % N_CRC32_WAYS;
				ck_assert_uint_eq(crc32_ways[v](crc32_ways[w](seed,
					buf + off, cut), buf + off + cut, n - cut),
					want);
			}
		}
	}
	for (i = 0; i < sizeof(large) / sizeof(large[0]); i++) {
		for (off = 0; off < 16; off += 5) {
			n = large[i];
			want = crc32_bitwise(~0u, buf + off, n);
			for (w = 0; w < N_CRC32_WAYS; w++)
				ck_assert_uint_eq(crc32_ways[w](~0u, buf + off, n),
						  want);
			for (cut = 0; cut <= n; cut += n / 3 + 13)
				ck_assert_uint_eq(roce_crc32_clmul(
					roce_crc32_update(~0u, buf + off, cut),
					buf + off + cut, n - cut), want);
		}
	}
	/* which ways ran, for whoever reads the log */
	printf("crc32_every_way: folding with PCLMULQDQ %s\n",
		       roce_crc32_clmul_usable() ? "tested" : "not on this CPU");
}
END_TEST

/* The register after the eight 0xFF bytes is rxe's seed */
START_TEST(crc32_icrc_seed)
{
	static const uint8_t ff[8] = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff
	};

	ck_assert_uint_eq(roce_crc32_update(~0u, ff, 8), 0xDEBB20E3);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("roce_wire");
	TCase *tc = tcase_create("codec");

	tcase_add_test(tc, example_built_byte_for_byte);
	tcase_add_test(tc, implausible_addresses);
	tcase_add_test(tc, example_decoded);
	tcase_add_test(tc, bad_tver);
	tcase_add_test(tc, opcodes);
	tcase_add_test(tc, pad);
	tcase_add_test(tc, oversized);
	tcase_add_test(tc, layout_bth);
	tcase_add_test(tc, layout_24_bit_fields);
	tcase_add_test(tc, layout_reth_imm);
	tcase_add_test(tc, layout_xrc_is_rc_after_xrceth);
	tcase_add_test(tc, layout_atomic);
	tcase_add_test(tc, layout_atomic_ack);
	tcase_add_test(tc, layout_deth_imm);
	tcase_add_test(tc, layout_ieth);
	tcase_add_test(tc, round_trip_every_opcode);
	tcase_add_test(tc, ipv6_built_and_parsed);
	tcase_add_test(tc, ipv6_icrc_variant_fields);
	tcase_add_test(tc, ipv6_example_built_byte_for_byte);
	tcase_add_test(tc, ipv6_header_rebuilt);
	tcase_add_test(tc, ipv4_malformed);
	tcase_add_test(tc, ipv4_frame_padding_ignored);
	tcase_add_test(tc, ipv6_malformed);
	tcase_add_test(tc, gids);
	tcase_add_test(tc, crc32_check_value);
	tcase_add_test(tc, crc32_lengths_alignments);
	tcase_add_test(tc, crc32_icrc_seed);
	tcase_add_test(tc, crc32_every_way);
	suite_add_tcase(s, tc);

	return check_run(s, CK_NORMAL);
}
