/*
 * The RoCEv2 codec (daemon/transport/roce/wire.h) against a real capture
 * of two Linux rxe peers (tests/data/rxe-pair.pcap: rping, ucmatose,
 * udaddy, rdma_client, ib_read_bw, ib_atomic_bw, ib_write_bw,
 * ibv_srq_pingpong and ibv_uc_pingpong between 10.88.1.2 and 10.88.1.3):
 * every packet decodes to what the tools did, encodes back to its bytes,
 * has a valid ICRC, and no truncation of it is read past its end (run
 * under the sanitizer build to see that).
 */
#include <config.h>

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon/transport/roce/wire.h"
#include "tests/unit/capture.h"
#include "tests/common/check_run.h"

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

/* A RoCEv2 packet of the capture, and what parsing its IP header found */
struct cap_pkt {
	const uint8_t *ip;
	size_t len;			/* to the end of the frame */
	struct roce_ip hdr;
	size_t bth;			/* offset of the UDP payload */
	size_t udp_len;
};

#define MAX_ROCE		256

static struct pcap pcap;
static struct {
	size_t nroce;
	struct cap_pkt roce[MAX_ROCE];	/* in capture order */
} cap;

/* The capture, read once per test process (Check forks each test) */
static void load_capture(void)
{
	size_t i;

	if (pcap.file)
		return;
	capture_load("rxe-pair.pcap", &pcap);
	for (i = 0; i < pcap.nip; i++) {
		struct cap_pkt *p = &cap.roce[cap.nroce];

		p->ip = pcap.ip[i].ip;
		p->len = pcap.ip[i].len;
		if (roce_parse_ip(p->ip, p->len, &p->hdr, &p->bth, &p->udp_len) ||
		    p->hdr.dport != ROCE_UDP_PORT)
			continue;
		ck_assert_uint_lt(++cap.nroce, MAX_ROCE);
	}
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

START_TEST(capture_frames)
{
	size_t i, tcp = 0;

	load_capture();
	ck_assert_uint_eq(pcap.frames, 391);
	ck_assert_uint_eq(cap.nroce, 196);
	/* the rest is ARP (no IP) and the TCP the tools swap QPNs over */
	for (i = 0; i < pcap.nip; i++) {
		struct roce_ip ip;
		size_t off, len;

		if (pcap.ip[i].ip[9] != 6)
			continue;
		tcp++;
		ck_assert_int_eq(roce_parse_ip(pcap.ip[i].ip, pcap.ip[i].len, &ip,
					       &off, &len), -EBADMSG);
	}
	ck_assert_uint_eq(tcp, pcap.nip - cap.nroce);
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
		seen[decoded(&cap.roce[i]).opcode]++;
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
		ck_assert_msg(roce_icrc_ok(cap.roce[i].ip, roce_ip_len(&cap.roce[i])),
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
		struct roce_pkt p = decoded(&cap.roce[i]);

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
		struct roce_pkt p = decoded(&cap.roce[i]);

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
		struct roce_pkt p = decoded(&cap.roce[i]);

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
		struct roce_pkt p = decoded(&cap.roce[i]);

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
		struct roce_pkt p = decoded(&cap.roce[i]);

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
		const uint8_t *udp = udp_payload(&cap.roce[i]);
		struct roce_pkt p = decoded(&cap.roce[i]);
		uint8_t buf[ROCE_MAX_HDRS];
		size_t n = roce_encode(&p, buf);

		ck_assert_ptr_eq(p.payload, udp + n);
		ck_assert_uint_eq(n + p.payload_len + p.pad + ROCE_ICRC_LEN,
				  cap.roce[i].udp_len);
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
		const struct cap_pkt *c = &cap.roce[i];
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
		size_t len = roce_ip_len(&cap.roce[i]);
		size_t hdrs = cap.roce[i].bth + ROCE_MAX_HDRS;

		ck_assert_uint_le(len, sizeof(buf));
		memcpy(buf, cap.roce[i].ip, len);
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
		struct roce_pkt p = decoded(&cap.roce[i]);

		if (ROCE_OP_TRANSPORT(p.opcode) != ROCE_OP_UD)
			continue;
		n++;
		ck_assert_uint_eq(cap.roce[i].hdr.sport, roce_udp_sport(p.deth.src_qp));
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
		struct roce_pkt p = decoded(&cap.roce[i]);
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
		struct roce_pkt p = decoded(&cap.roce[i]);
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
		ck_assert_msg(cap.roce[i].hdr.sport == want,
			      "packet %zu to QP %u: port 0x%x, want 0x%x", i,
			      p.dest_qp, cap.roce[i].hdr.sport, want);
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

/*
 * Every truncation of every UDP payload: rejected, or decoded into headers
 * and a payload that fit in what is left.
 */
START_TEST(truncated_udp_payloads)
{
	size_t i, n;

	load_capture();
	for (i = 0; i < cap.nroce; i++) {
		size_t len = cap.roce[i].udp_len;
		int want_hdrs = roce_opcode_hdrs(udp_payload(&cap.roce[i])[0]);

		for (n = 0; n < len; n++) {
			uint8_t *b = exact_copy(udp_payload(&cap.roce[i]), n);
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
		size_t len = roce_ip_len(&cap.roce[i]);

		for (n = 0; n < len; n++) {
			uint8_t *b = exact_copy(cap.roce[i].ip, n);
			struct roce_ip ip;
			size_t off, ulen;

			ck_assert_int_eq(roce_parse_ip(b, n, &ip, &off, &ulen), -EBADMSG);
			ck_assert(!roce_icrc_ok(b, n));
			free(b);
		}
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("roce_capture");
	TCase *tc = tcase_create("rxe-pair");

	tcase_add_test(tc, capture_frames);
	tcase_add_test(tc, capture_opcodes);
	tcase_add_test(tc, capture_icrc);
	tcase_add_test(tc, capture_mads);
	tcase_add_test(tc, capture_ud_imm);
	tcase_add_test(tc, capture_reads);
	tcase_add_test(tc, capture_writes);
	tcase_add_test(tc, capture_atomics);
	tcase_add_test(tc, capture_reencoded);
	tcase_add_test(tc, capture_ip_rebuilt);
	tcase_add_test(tc, capture_byte_flips);
	tcase_add_test(tc, sport_by_qpn);
	tcase_add_test(tc, sport_connected);
	tcase_add_test(tc, truncated_udp_payloads);
	tcase_add_test(tc, truncated_ip_packets);
	suite_add_tcase(s, tc);
	return check_run(s, CK_NORMAL);
}
