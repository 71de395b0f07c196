/*
 * The RoCEv2 packet codec (daemon/transport/roce/wire.h) against the
 * worked example of the wire notes, against a real capture of two Linux
 * rxe peers (tests/data/rxe-pair.pcap: rping, ucmatose, udaddy,
 * rdma_client, ib_read_bw, ib_atomic_bw, ib_write_bw, ibv_srq_pingpong
 * and ibv_uc_pingpong between 10.88.1.2 and 10.88.1.3), and against
 * malformed input.  Run under the sanitizer build, the truncation tests
 * also show that nothing reads past the end of a buffer.
 */
#include <config.h>

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon/transport/roce/crc32.h"
#include "daemon/transport/roce/wire.h"

/* ---- the capture: a classic pcap of Ethernet frames ------------------------- */

#define PCAP_MAGIC		0xA1B2C3D4u	/* microsecond timestamps */
#define PCAP_MAGIC_NS		0xA1B23C4Du
#define LINKTYPE_ETHERNET	1
#define ETH_LEN			14
#define ETH_P_IP		0x0800
#define ETH_P_IPV6		0x86DD
#define ETH_P_8021Q		0x8100
#define MAX_FRAMES		512

/* An IP packet of the capture, and for a RoCEv2 one what parsing found */
struct cap_pkt {
	const uint8_t *ip;
	size_t len;			/* to the end of the frame */
	struct roce_ip hdr;
	size_t bth;			/* offset of the UDP payload */
	size_t udp_len;
};

static struct capture {
	uint8_t *file;
	size_t frames;
	size_t nip;			/* IP packets */
	struct cap_pkt ip[MAX_FRAMES];
	size_t nroce;			/* RoCEv2 packets, in ip[] order */
	struct cap_pkt *roce[MAX_FRAMES];
} cap;

static uint32_t pcap_u32(const uint8_t *p, bool swap)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return swap ? __builtin_bswap32(v) : v;
}

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static uint32_t be24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static uint8_t *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	ck_assert_int_gt(n, 0);
	rewind(f);
	buf = malloc((size_t)n);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* The IP packet in an Ethernet frame (VLAN tags skipped), or NULL */
static const uint8_t *frame_ip(const uint8_t *f, size_t len, size_t *ip_len)
{
	size_t off = ETH_LEN;
	uint16_t type;

	if (len < ETH_LEN)
		return NULL;
	type = be16(f + 12);
	while (type == ETH_P_8021Q && len >= off + 4) {
		type = be16(f + off + 2);
		off += 4;
	}
	if ((type != ETH_P_IP && type != ETH_P_IPV6) || len <= off)
		return NULL;
	*ip_len = len - off;
	return f + off;
}

static void add_frame(const uint8_t *f, size_t len)
{
	struct cap_pkt *p = &cap.ip[cap.nip];

	cap.frames++;
	p->ip = frame_ip(f, len, &p->len);
	if (!p->ip)
		return;
	ck_assert_uint_lt(++cap.nip, MAX_FRAMES);
	if (roce_parse_ip(p->ip, p->len, &p->hdr, &p->bth, &p->udp_len) == 0 &&
	    p->hdr.dport == ROCE_UDP_PORT)
		cap.roce[cap.nroce++] = p;
}

/* $top_srcdir/tests/data/rxe-pair.pcap, read once per test process */
static void load_capture(void)
{
	const char *top = getenv("top_srcdir");
	char path[4096];
	size_t len, off;
	bool swap;
	uint32_t magic;

	if (cap.file)
		return;
	snprintf(path, sizeof(path), "%s/tests/data/rxe-pair.pcap",
		 top && *top ? top : IBVD_TEST_SRCDIR);
	cap.file = read_file(path, &len);
	ck_assert_uint_ge(len, 24);
	magic = pcap_u32(cap.file, false);
	swap = magic == __builtin_bswap32(PCAP_MAGIC) ||
	       magic == __builtin_bswap32(PCAP_MAGIC_NS);
	magic = pcap_u32(cap.file, swap);
	ck_assert(magic == PCAP_MAGIC || magic == PCAP_MAGIC_NS);
	ck_assert_uint_eq(pcap_u32(cap.file + 20, swap), LINKTYPE_ETHERNET);
	for (off = 24; off + 16 <= len;) {
		uint32_t incl = pcap_u32(cap.file + off + 8, swap);

		/* whole frames only: a cut one would not carry its ICRC */
		ck_assert_uint_eq(incl, pcap_u32(cap.file + off + 12, swap));
		ck_assert_uint_le(incl, len - off - 16);
		add_frame(cap.file + off + 16, incl);
		off += 16 + incl;
	}
	ck_assert_uint_eq(off, len);
}

/* The IP packet of a RoCEv2 packet as the ICRC sees it (no frame padding) */
static size_t roce_ip_len(const struct cap_pkt *p)
{
	return p->bth + p->udp_len;
}

static const uint8_t *udp_payload(const struct cap_pkt *p)
{
	return p->ip + p->bth;
}

static struct roce_pkt decoded(const struct cap_pkt *p)
{
	struct roce_pkt pkt;

	ck_assert_int_eq(roce_decode(udp_payload(p), p->udp_len, &pkt), 0);
	return pkt;
}

/* CM MADs: the attribute of a MAD (UD SEND_ONLY to QP1), at MAD byte 16 */
#define MAD_ATTR(pkt)		be16((pkt)->payload + 16)
#define CM_REQ			0x0010
#define CM_REP			0x0013
#define CM_RTU			0x0014
#define CM_DREQ			0x0015
#define CM_DREP			0x0016
#define CM_SIDR_REQ		0x0017
#define CM_SIDR_REP		0x0018
/* CM payload offsets (after the 24-byte MAD header) */
#define CM_DATA			24
#define REQ_SERVICE_ID		8
#define REQ_LOCAL_QPN		32
#define REQ_FLOW_LABEL		88
#define REQ_CMA_SRC_PORT	(140 + 2)	/* rdma_cm's header */
#define REP_LOCAL_QPN		12

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

START_TEST(example_built_byte_for_byte)
{
	struct roce_ip ip = example_ip();
	struct roce_pkt p;
	uint8_t buf[128];
	size_t n;

	roce_pkt_init(&p, ROCE_RC_SEND_ONLY);
	p.dest_qp = 0x11;
	p.ack_req = true;
	p.psn = 1;
	n = roce_build_ip(&ip, ROCE_BTH_LEN + 4 + ROCE_ICRC_LEN, buf);
	ck_assert_uint_eq(n, 28);
	n += roce_encode(&p, buf + n);
	ck_assert_uint_eq(n, 40);
	memcpy(buf + n, "ABCD", 4);
	n += 4 + ROCE_ICRC_LEN;
	roce_icrc_set(buf, n);
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

/* ---- the capture: what it holds ------------------------------------------ */

START_TEST(capture_frames)
{
	size_t i, tcp = 0;

	load_capture();
	ck_assert_uint_eq(cap.frames, 391);
	ck_assert_uint_eq(cap.nroce, 196);
	/* the rest is ARP (no IP) and the TCP the tools swap QPNs over */
	for (i = 0; i < cap.nip; i++) {
		struct roce_ip ip;
		size_t off, len;

		if (cap.ip[i].ip[9] != 6)
			continue;
		tcp++;
		ck_assert_int_eq(roce_parse_ip(cap.ip[i].ip, cap.ip[i].len, &ip,
					       &off, &len), -EBADMSG);
	}
	ck_assert_uint_eq(tcp, cap.nip - cap.nroce);
}
END_TEST

/*
 * How many packets of each opcode: the census of the capture, which the
 * steps explain.  rping's 5000-byte READ and WRITE at MTU 1024 are 5
 * packets each, ib_read_bw's 8192-byte READs 8, ib_write_bw's 4096-byte
 * WRITEs 4; 18 MADs (REQ/REP/RTU x3, DREQ x4, DREP x3, SIDR_REQ/REP).
 */
static const unsigned int census[256] = {
	[ROCE_RC_SEND_FIRST] = 6,
	[ROCE_RC_SEND_MIDDLE] = 12,
	[ROCE_RC_SEND_LAST] = 6,
	[ROCE_RC_SEND_ONLY] = 14,
	[ROCE_RC_RDMA_WRITE_FIRST] = 7,
	[ROCE_RC_RDMA_WRITE_MIDDLE] = 16,
	[ROCE_RC_RDMA_WRITE_LAST] = 7,
	[ROCE_RC_RDMA_READ_REQUEST] = 7,
	[ROCE_RC_READ_RESPONSE_FIRST] = 7,
	[ROCE_RC_READ_RESPONSE_MIDDLE] = 36,
	[ROCE_RC_READ_RESPONSE_LAST] = 7,
	[ROCE_RC_ACKNOWLEDGE] = 27,
	[ROCE_RC_ATOMIC_ACKNOWLEDGE] = 5,
	[ROCE_RC_FETCH_ADD] = 5,
	[ROCE_UC_SEND_FIRST] = 6,
	[ROCE_UC_SEND_LAST] = 6,
	[ROCE_UD_SEND_ONLY] = 18,
	[ROCE_UD_SEND_ONLY_IMM] = 4,
};

START_TEST(capture_opcodes)
{
	unsigned int seen[256] = { 0 };
	size_t i;

	load_capture();
	for (i = 0; i < cap.nroce; i++)
		seen[decoded(cap.roce[i]).opcode]++;
	for (i = 0; i < 256; i++)
		ck_assert_msg(seen[i] == census[i], "opcode 0x%02zx: %u, want %u",
			      i, seen[i], census[i]);
}
END_TEST

START_TEST(capture_icrc)
{
	size_t i;

	load_capture();
	for (i = 0; i < cap.nroce; i++)
		ck_assert_msg(roce_icrc_ok(cap.roce[i]->ip, roce_ip_len(cap.roce[i])),
			      "packet %zu", i);
}
END_TEST

/* The CM's MADs: UD SEND_ONLY from QP1 to QP1, Q_Key 0x80010000, 256 bytes */
START_TEST(capture_mads)
{
	unsigned int attrs[0x20] = { 0 };
	size_t i;

	load_capture();
	for (i = 0; i < cap.nroce; i++) {
		struct roce_pkt p = decoded(cap.roce[i]);

		if (p.opcode != ROCE_UD_SEND_ONLY)
			continue;
		ck_assert_uint_eq(p.hdrs, ROCE_HDR_DETH);
		ck_assert_uint_eq(p.dest_qp, 1);
		ck_assert_uint_eq(p.deth.qkey, ROCE_GSI_QKEY);
		ck_assert_uint_eq(p.deth.src_qp, 1);
		ck_assert_uint_eq(p.payload_len, 256);
		ck_assert_uint_eq(p.pad, 0);
		/* base version 1, class CM, class version 2, method Send */
		ck_assert_uint_eq(be32(p.payload), 0x01070203);
		ck_assert_uint_lt(MAD_ATTR(&p), 0x20);
		attrs[MAD_ATTR(&p)]++;
	}
	ck_assert_uint_eq(attrs[CM_REQ], 3);
	ck_assert_uint_eq(attrs[CM_REP], 3);
	ck_assert_uint_eq(attrs[CM_RTU], 3);
	ck_assert_uint_eq(attrs[CM_DREQ], 4);
	ck_assert_uint_eq(attrs[CM_DREP], 3);
	ck_assert_uint_eq(attrs[CM_SIDR_REQ], 1);
	ck_assert_uint_eq(attrs[CM_SIDR_REP], 1);
}
END_TEST

/* udaddy: Q_Key 0x01234567, its QPN (19) as immediate data, 100 bytes */
START_TEST(capture_ud_imm)
{
	size_t i, n = 0;

	load_capture();
	for (i = 0; i < cap.nroce; i++) {
		struct roce_pkt p = decoded(cap.roce[i]);

		if (p.opcode != ROCE_UD_SEND_ONLY_IMM)
			continue;
		n++;
		ck_assert_uint_eq(p.hdrs, ROCE_HDR_DETH | ROCE_HDR_IMM);
		ck_assert_uint_eq(p.deth.qkey, 0x01234567);
		ck_assert_uint_eq(p.deth.src_qp, 19);
		ck_assert_uint_eq(p.dest_qp, 19);
		ck_assert_uint_eq(p.imm, 19);
		ck_assert_uint_eq(p.payload_len, 100);
	}
	ck_assert_uint_eq(n, 4);
}
END_TEST

/*
 * READs: responses carry an AETH on FIRST and LAST (ACK, unlimited
 * credits), none in the MIDDLE, and bring back what the requests' RETHs
 * asked for (rping 2 x 5000 bytes, ib_read_bw 5 x 8192).
 */
START_TEST(capture_reads)
{
	uint64_t asked = 0, got = 0;
	size_t i;

	load_capture();
	for (i = 0; i < cap.nroce; i++) {
		struct roce_pkt p = decoded(cap.roce[i]);

		switch (p.opcode) {
		case ROCE_RC_RDMA_READ_REQUEST:
			ck_assert_uint_eq(p.hdrs, ROCE_HDR_RETH);
			ck_assert_uint_eq(p.payload_len, 0);
			ck_assert(p.ack_req);
			asked += p.reth.len;
			break;
		case ROCE_RC_READ_RESPONSE_FIRST:
		case ROCE_RC_READ_RESPONSE_LAST:
			ck_assert_uint_eq(p.hdrs, ROCE_HDR_AETH);
			ck_assert_uint_eq(p.aeth.syndrome, ROCE_AETH_ACK);
			got += p.payload_len;
			break;
		case ROCE_RC_READ_RESPONSE_MIDDLE:
			ck_assert_uint_eq(p.hdrs, 0);
			ck_assert_uint_eq(p.payload_len, 1024);
			got += p.payload_len;
			break;
		}
	}
	ck_assert_uint_eq(asked, 2 * 5000 + 5 * 8192);
	ck_assert_uint_eq(got, asked);
}
END_TEST

/* WRITEs: the FIRST's RETH has the message's length, which the packets carry */
START_TEST(capture_writes)
{
	uint64_t announced = 0, carried = 0;
	size_t i;

	load_capture();
	for (i = 0; i < cap.nroce; i++) {
		struct roce_pkt p = decoded(cap.roce[i]);

		if (p.opcode == ROCE_RC_RDMA_WRITE_FIRST) {
			ck_assert_uint_eq(p.hdrs, ROCE_HDR_RETH);
			ck_assert_uint_eq(p.payload_len, 1024);
			announced += p.reth.len;
		}
		if (p.opcode >= ROCE_RC_RDMA_WRITE_FIRST &&
		    p.opcode <= ROCE_RC_RDMA_WRITE_LAST)
			carried += p.payload_len;
	}
	ck_assert_uint_eq(announced, 2 * 5000 + 5 * 4096);
	ck_assert_uint_eq(carried, announced);
}
END_TEST

/* ib_atomic_bw: FETCH_ADD 1 to 64-byte apart words; each answered with its PSN */
START_TEST(capture_atomics)
{
	uint32_t psn[5];
	size_t i, adds = 0, acks = 0;

	load_capture();
	for (i = 0; i < cap.nroce; i++) {
		struct roce_pkt p = decoded(cap.roce[i]);

		if (p.opcode == ROCE_RC_FETCH_ADD) {
			ck_assert_uint_eq(p.hdrs, ROCE_HDR_ATOMIC);
			ck_assert_uint_eq(p.atomic.swap_add, 1);
			ck_assert_uint_eq(p.atomic.compare, 0);
			ck_assert_uint_eq(p.atomic.rkey, 0x981);
			ck_assert_uint_eq(p.atomic.va & 63, 0);
			ck_assert_uint_eq(p.payload_len, 0);
			ck_assert_uint_lt(adds, 5);
			psn[adds++] = p.psn;
		}
		if (p.opcode == ROCE_RC_ATOMIC_ACKNOWLEDGE) {
			ck_assert_uint_eq(p.hdrs, ROCE_HDR_AETH | ROCE_HDR_ATOMIC_ACK);
			ck_assert_uint_eq(p.aeth.syndrome, ROCE_AETH_ACK);
			ck_assert_uint_eq(p.aeth.msn, acks + 1);
			ck_assert_uint_lt(acks, adds);
			ck_assert_uint_eq(p.psn, psn[acks++]);
		}
	}
	ck_assert_uint_eq(adds, 5);
	ck_assert_uint_eq(acks, 5);
}
END_TEST

/* Decoding then encoding gives back the captured headers, and the payload */
START_TEST(capture_reencoded)
{
	size_t i;

	load_capture();
	for (i = 0; i < cap.nroce; i++) {
		const uint8_t *udp = udp_payload(cap.roce[i]);
		struct roce_pkt p = decoded(cap.roce[i]);
		uint8_t buf[ROCE_MAX_HDRS];
		size_t n = roce_encode(&p, buf);

		ck_assert_ptr_eq(p.payload, udp + n);
		ck_assert_uint_eq(n + p.payload_len + p.pad + ROCE_ICRC_LEN,
				  cap.roce[i]->udp_len);
		ck_assert_msg(memcmp(buf, udp, n) == 0, "packet %zu", i);
	}
}
END_TEST

/* Rebuilding the IP and UDP headers from what was parsed gives them back */
START_TEST(capture_ip_rebuilt)
{
	size_t i;

	load_capture();
	for (i = 0; i < cap.nroce; i++) {
		const struct cap_pkt *c = cap.roce[i];
		uint8_t buf[ROCE_MAX_IP_HDRS];

		ck_assert_int_eq(c->hdr.family, AF_INET);
		ck_assert_uint_eq(roce_build_ip(&c->hdr, c->udp_len, buf), c->bth);
		ck_assert_msg(memcmp(buf, c->ip, c->bth) == 0, "packet %zu", i);
	}
}
END_TEST

/*
 * The ICRC covers every byte but the fields a hop may change: changing
 * one of those keeps it valid, changing any other byte breaks it.  All
 * header bytes, and a sample of the payload and the ICRC itself.
 */
static bool icrc_variant(size_t i, size_t ip_hl)
{
	size_t udp = ip_hl, bth = ip_hl + 8;

	return i == 1 || i == 8 || i == 10 || i == 11 ||	/* TOS TTL csum */
	       i == udp + 6 || i == udp + 7 ||			/* UDP csum */
	       i == bth + 4;					/* FECN BECN */
}

START_TEST(capture_byte_flips)
{
	uint8_t buf[2048];
	size_t i, k;

	load_capture();
	for (i = 0; i < cap.nroce; i++) {
		size_t len = roce_ip_len(cap.roce[i]);
		size_t hdrs = cap.roce[i]->bth + ROCE_MAX_HDRS;

		ck_assert_uint_le(len, sizeof(buf));
		memcpy(buf, cap.roce[i]->ip, len);
		for (k = 0; k < len; k += k < hdrs || k + 4 >= len ? 1 : 37) {
			buf[k] ^= 0x5A;
			ck_assert_msg(roce_icrc_ok(buf, len) == icrc_variant(k, 20),
				      "packet %zu, byte %zu", i, k);
			buf[k] ^= 0x5A;
		}
	}
}
END_TEST

/* ---- UDP source ports ------------------------------------------------------ */

/*
 * UD QPs and QP1 keep the port of their QPN: QP1 0xD872 (udaddy's QP 19
 * 0xD078), both computed by hand from hash_32 and seen in the capture.
 */
START_TEST(sport_by_qpn)
{
	size_t i, n = 0;

	ck_assert_uint_eq(roce_udp_sport(1), 0xD872);
	ck_assert_uint_eq(roce_udp_sport(19), 0xD078);
	ck_assert_uint_eq(roce_udp_sport(0), 0xC000);
	load_capture();
	for (i = 0; i < cap.nroce; i++) {
		struct roce_pkt p = decoded(cap.roce[i]);

		if (ROCE_OP_TRANSPORT(p.opcode) != ROCE_OP_UD)
			continue;
		n++;
		ck_assert_uint_eq(cap.roce[i]->hdr.sport, roce_udp_sport(p.deth.src_qp));
	}
	ck_assert_uint_eq(n, 22);
}
END_TEST

/* A connection's flow label and QPNs, from the CM's REQ and REP */
struct conn {
	uint32_t flow_label, qpn[2];
};

static size_t capture_conns(struct conn *c, size_t max)
{
	size_t i, n = 0;

	for (i = 0; i < cap.nroce; i++) {
		struct roce_pkt p = decoded(cap.roce[i]);
		const uint8_t *cm = p.payload + CM_DATA;

		if (p.opcode != ROCE_UD_SEND_ONLY)
			continue;
		if (MAD_ATTR(&p) == CM_REQ) {
			uint32_t sport = be16(cm + REQ_CMA_SRC_PORT);
			uint32_t dport = be16(cm + REQ_SERVICE_ID + 6);

			ck_assert_uint_lt(n, max);
			c[n].flow_label = be32(cm + REQ_FLOW_LABEL) >> 12;
			c[n++].qpn[0] = be24(cm + REQ_LOCAL_QPN);
			/* rdma_cm's label: the ports of the connection */
			ck_assert_uint_eq(c[n - 1].flow_label,
					  (sport * 31 + dport) & 0xFFFFF);
		} else if (MAD_ATTR(&p) == CM_REP) {
			ck_assert_uint_gt(n, 0);
			c[n - 1].qpn[1] = be24(cm + REP_LOCAL_QPN);
		}
	}
	return n;
}

/*
 * RC and UC QPs take a port from the flow label of their path once they
 * are connected: rdma_cm's (ucmatose, rping, rdma_client: the REQ carries
 * it), or, when it is 0 (perftest and the pingpongs modify their QPs
 * themselves), a label made of both QPNs.  In this capture both ends of
 * every connection got the same QPN, so a packet's DestQP is both.
 */
START_TEST(sport_connected)
{
	struct conn c[8];
	size_t i, k, n, by_cm = 0;

	load_capture();
	n = capture_conns(c, 8);
	ck_assert_uint_eq(n, 3);
	for (i = 0; i < cap.nroce; i++) {
		struct roce_pkt p = decoded(cap.roce[i]);
		uint16_t want;

		if (ROCE_OP_TRANSPORT(p.opcode) == ROCE_OP_UD)
			continue;
		want = roce_udp_sport_connected(0, p.dest_qp, p.dest_qp);
		for (k = 0; k < n; k++) {
			if (c[k].qpn[0] != p.dest_qp)
				continue;
			ck_assert_uint_eq(c[k].qpn[1], p.dest_qp);
			want = roce_udp_sport_connected(c[k].flow_label,
							c[k].qpn[0], c[k].qpn[1]);
			by_cm++;
		}
		ck_assert_msg(cap.roce[i]->hdr.sport == want,
			      "packet %zu to QP %u: port 0x%x, want 0x%x", i,
			      p.dest_qp, cap.roce[i]->hdr.sport, want);
	}
	/* QP 17 (rping) 40 packets, 18 (ucmatose) 8, 20 (rdma_client) 4 */
	ck_assert_uint_eq(by_cm, 52);
	/* by hand: QPNs 21 and 21, flow label 441; and one with the top bits */
	ck_assert_uint_eq(roce_udp_sport_connected(0, 21, 21), 0xC1B9);
	ck_assert_uint_eq(roce_udp_sport_connected(0x81D0C, 17, 17), 0xDD2C);
	ck_assert_uint_eq(roce_udp_sport_connected(0x81D0C, 1, 2),
			  roce_udp_sport_connected(0x81D0C, 3, 4));
	/*
	 * QPNs whose product passes 20 bits: 0x123456 * 0xABCDEF =
	 * 0xC379A59BA4A, ^ >> 20: 0xC379A9AC3EF, ^ >> 40: 0xC379A9AC3E3,
	 * label 0xAC3E3, port 0xC000 | (0x3E3 ^ 0x2B)
	 */
	ck_assert_uint_eq(roce_udp_sport_connected(0, 0x123456, 0xABCDEF), 0xC3C8);
}
END_TEST

/* ---- malformed input ------------------------------------------------------- */

/* A copy of n bytes in a buffer of exactly n, so ASan sees any overread */
static uint8_t *exact_copy(const uint8_t *src, size_t n)
{
	uint8_t *b = malloc(n ? n : 1);

	ck_assert_ptr_nonnull(b);
	memcpy(b, src, n);
	return b;
}

/*
 * Every truncation of every UDP payload: rejected, or decoded into headers
 * and a payload that fit in what is left.
 */
START_TEST(truncated_udp_payloads)
{
	size_t i, n;

	load_capture();
	for (i = 0; i < cap.nroce; i++) {
		size_t len = cap.roce[i]->udp_len;
		int want_hdrs = roce_opcode_hdrs(udp_payload(cap.roce[i])[0]);

		for (n = 0; n < len; n++) {
			uint8_t *b = exact_copy(udp_payload(cap.roce[i]), n);
			struct roce_pkt p;
			uint8_t hdr[ROCE_MAX_HDRS];

			if (roce_decode(b, n, &p) == 0) {
				ck_assert_uint_eq(p.hdrs, (unsigned int)want_hdrs);
				ck_assert_uint_eq(roce_encode(&p, hdr) + p.payload_len +
						  p.pad + ROCE_ICRC_LEN, n);
			}
			free(b);
		}
	}
}
END_TEST

/* Every truncation of every IP packet is refused by the IP parser and the ICRC */
START_TEST(truncated_ip_packets)
{
	size_t i, n;

	load_capture();
	for (i = 0; i < cap.nroce; i++) {
		size_t len = roce_ip_len(cap.roce[i]);

		for (n = 0; n < len; n++) {
			uint8_t *b = exact_copy(cap.roce[i]->ip, n);
			struct roce_ip ip;
			size_t off, ulen;

			ck_assert_int_eq(roce_parse_ip(b, n, &ip, &off, &ulen), -EBADMSG);
			ck_assert(!roce_icrc_ok(b, n));
			free(b);
		}
	}
}
END_TEST

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
	return -1;
}

static size_t want_hdrs_len(int hdrs)
{
	static const size_t len[] = { 16, 4, 28, 8, 4, 4, 8 };
	size_t n = ROCE_BTH_LEN, bit;

	for (bit = 0; bit < 7; bit++)
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
	/* named among those we don't speak: FLUSH, ATOMIC_WRITE, RD, CNP, XRC */
	ck_assert_int_eq(roce_opcode_hdrs(0x1C), -1);
	ck_assert_int_eq(roce_opcode_hdrs(0x1D), -1);
	ck_assert_int_eq(roce_opcode_hdrs(0x44), -1);
	ck_assert_int_eq(roce_opcode_hdrs(0x81), -1);
	ck_assert_int_eq(roce_opcode_hdrs(0xA4), -1);
	ck_assert_int_eq(roce_opcode_hdrs(0xE0), -1);
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
	TCase *cap_tc = tcase_create("capture");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, example_built_byte_for_byte);
	tcase_add_test(tc, example_decoded);
	tcase_add_test(tc, bad_tver);
	tcase_add_test(tc, opcodes);
	tcase_add_test(tc, pad);
	tcase_add_test(tc, oversized);
	tcase_add_test(tc, layout_bth);
	tcase_add_test(tc, layout_24_bit_fields);
	tcase_add_test(tc, layout_reth_imm);
	tcase_add_test(tc, layout_atomic);
	tcase_add_test(tc, layout_atomic_ack);
	tcase_add_test(tc, layout_deth_imm);
	tcase_add_test(tc, layout_ieth);
	tcase_add_test(tc, round_trip_every_opcode);
	tcase_add_test(tc, ipv6_built_and_parsed);
	tcase_add_test(tc, ipv6_icrc_variant_fields);
	tcase_add_test(tc, ipv4_malformed);
	tcase_add_test(tc, ipv4_frame_padding_ignored);
	tcase_add_test(tc, ipv6_malformed);
	tcase_add_test(tc, gids);
	tcase_add_test(tc, crc32_check_value);
	tcase_add_test(tc, crc32_lengths_alignments);
	tcase_add_test(tc, crc32_icrc_seed);
	suite_add_tcase(s, tc);

	tcase_add_test(cap_tc, capture_frames);
	tcase_add_test(cap_tc, capture_opcodes);
	tcase_add_test(cap_tc, capture_icrc);
	tcase_add_test(cap_tc, capture_mads);
	tcase_add_test(cap_tc, capture_ud_imm);
	tcase_add_test(cap_tc, capture_reads);
	tcase_add_test(cap_tc, capture_writes);
	tcase_add_test(cap_tc, capture_atomics);
	tcase_add_test(cap_tc, capture_reencoded);
	tcase_add_test(cap_tc, capture_ip_rebuilt);
	tcase_add_test(cap_tc, capture_byte_flips);
	tcase_add_test(cap_tc, sport_by_qpn);
	tcase_add_test(cap_tc, sport_connected);
	tcase_add_test(cap_tc, truncated_udp_payloads);
	tcase_add_test(cap_tc, truncated_ip_packets);
	suite_add_tcase(s, cap_tc);

	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
