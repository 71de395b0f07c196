/*
 * Runs of RoCE packets as one UDP datagram (transport/roce/gso.c): which
 * packets of a batch make a run, the identification and ICRC each packet
 * of a run is given, and cutting a run that arrived whole back into
 * exactly those packets, as the kernel's segmentation would have made
 * them.  Hostile datagrams (no BTH where the next segment should start,
 * garbage, IPv6) are refused, and cut packets with a corrupt byte fail
 * their ICRC.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "transport/roce/internal.h"
#include "tests/common/check_run.h"

#define MTU		1024u
#define NPKTS		15u		/* a WRITE's MIDDLE packets and its LAST */
#define MAX_BUILT	(ROCE_GSO_MAX_SEGS + 1)
#define LAST_LEN	300u
#define HDRS		28u		/* IPv4 and UDP */

static uint8_t pkts[MAX_BUILT][ROCE_MAX_PACKET];
static size_t lens[MAX_BUILT];
static uint8_t *ptrs[MAX_BUILT];

/* What a cut handed over, and how often its buffer was to be reused. */
static uint8_t got[64][ROCE_MAX_PACKET];
static size_t got_len[64];
static unsigned int ngot, reuses;

static void take(void *arg, const uint8_t *pkt, size_t len)
{
	(void)arg;
	ck_assert_uint_lt(ngot, 64);
	ck_assert_uint_le(len, ROCE_MAX_PACKET);
	memcpy(got[ngot], pkt, len);
	got_len[ngot++] = len;
}

static void reuse(void *arg)
{
	(void)arg;
	reuses++;
}

static const struct roce_gso_sink sink = { take, reuse, NULL };

/* The sender's address (a test may choose another). */
static uint8_t src_ip[4];

/* Packet k of a WRITE step from PSN 100, built as packet.c builds it. */
static void build(unsigned int k, uint8_t opcode, uint32_t len)
{
	struct roce_ip ip = {
		.family = AF_INET,
		.src = { src_ip[0], src_ip[1], src_ip[2], src_ip[3] },
		.dst = { 10, 0, 0, 2 },
		.hop_limit = 64,
		.sport = 0xC123,
		.dport = ROCE_UDP_PORT,
	};
	struct roce_pkt p;
	size_t hdrs, i;

	roce_pkt_init(&p, opcode);
	p.dest_qp = 0x000abc;
	p.psn = 100 + k;
	hdrs = roce_encode(&p, pkts[k] + HDRS);
	roce_build_ip(&ip, hdrs + len + ROCE_ICRC_LEN, pkts[k]);
	for (i = 0; i < len; i++)
		pkts[k][HDRS + hdrs + i] = (uint8_t)(k * 31 + i);
	lens[k] = HDRS + hdrs + len + ROCE_ICRC_LEN;
	ptrs[k] = pkts[k];
}

static void setup(void)
{
	static const uint8_t ten_0_0_1[4] = { 10, 0, 0, 1 };
	unsigned int k;

	memcpy(src_ip, ten_0_0_1, 4);
	for (k = 0; k + 1 < NPKTS; k++)
		build(k, ROCE_RC_RDMA_WRITE_MIDDLE, MTU);
	build(NPKTS - 1, ROCE_RC_RDMA_WRITE_LAST, LAST_LEN);
	ngot = reuses = 0;
}

/*
 * The run as one datagram that a link left whole: packet 0's headers
 * (identification 0, lengths of the whole), then every packet's UDP
 * payload, as the kernel sends what UDP_SEGMENT was given.
 */
static size_t whole(const unsigned int n, uint8_t *out)
{
	size_t at = HDRS;
	unsigned int k;

	for (k = 0; k < n; k++) {
		memcpy(out + at, pkts[k] + HDRS, lens[k] - HDRS);
		at += lens[k] - HDRS;
	}
	memcpy(out, pkts[0], HDRS);
	roce_ipv4_set_lengths(out, at - HDRS);
	roce_ipv4_set_id(out, 0);
	return at;
}

static uint8_t datagram[ROCE_GSO_MAX];

/* The run stamped and sent whole into datagram; its length. */
static size_t run_whole(void)
{
	roce_gso_stamp_run(ptrs, lens, NPKTS);
	return whole(NPKTS, datagram);
}

static int cut(size_t n)
{
	return roce_gso_split(datagram, n, got[63], sizeof(got[63]), &sink);
}

START_TEST(equal_packets_make_a_run)
{
	size_t l[4] = { 1000, 1000, 1000, 1000 };
	size_t big[80];
	unsigned int i;

	ck_assert_uint_eq(roce_gso_run_len(lens, NPKTS), NPKTS);
	/* a longer first packet (a FIRST with its RETH) starts none */
	l[0] = 1016;
	ck_assert_uint_eq(roce_gso_run_len(l, 4), 0);
	/* no longer than one packet may be: packets */
	ck_assert_uint_eq(roce_gso_run_len(l + 1, 3), 0);
	ck_assert_uint_eq(roce_gso_run_len(lens, 1), 0);
	/* the shorter one ends it */
	ck_assert_uint_eq(roce_gso_run_len(lens + 1, NPKTS - 1), NPKTS - 1);
	/* never more than one IPv4 packet holds */
	for (i = 0; i < 80; i++)
		big[i] = 4124;
	ck_assert_uint_eq(roce_gso_run_len(big, 80), (ROCE_GSO_MAX - HDRS) / (4124 - HDRS));
}
END_TEST

START_TEST(a_whole_run_is_cut_into_its_packets)
{
	size_t n = run_whole();
	unsigned int k;

	ck_assert_uint_gt(n, ROCE_MAX_PACKET);
	ck_assert_int_eq(cut(n), 0);
	/* take() copied each one out of the cut buffer: slot 63 is scratch */
	ck_assert_uint_eq(ngot, NPKTS);
	for (k = 0; k < NPKTS; k++) {
		ck_assert_uint_eq(got_len[k], lens[k]);
		ck_assert_mem_eq(got[k], pkts[k], lens[k]);
		ck_assert(roce_icrc_ok(got[k], got_len[k]));
		/* the identification segmentation gives: 0, 1, 2, ... */
		ck_assert_uint_eq(got[k][4] << 8 | got[k][5], k);
	}
	/* eight 1 KiB packets fit the buffer at a time */
	ck_assert_uint_eq(reuses, 1);
}
END_TEST

START_TEST(a_corrupt_byte_fails_its_packet_only)
{
	size_t n = run_whole();
	unsigned int k;

	datagram[HDRS + 3 * (lens[0] - HDRS) + 100] ^= 0x40;
	ck_assert_int_eq(cut(n), 0);
	ck_assert_uint_eq(ngot, NPKTS);
	for (k = 0; k < NPKTS; k++)
		ck_assert(roce_icrc_ok(got[k], got_len[k]) == (k != 3));
}
END_TEST

/*
 * Ten short messages of one packet each, PSNs in a row, as a requester's
 * turn sends them (packet.c): a run no longer than a packet, whose
 * segment size is no MTU's; an immediate's 4 header bytes in place of 4
 * payload bytes keep a packet as long as the others.  Cut back into
 * exactly those packets.
 */
START_TEST(a_run_of_short_messages_is_cut)
{
	unsigned int k;
	size_t n;

	for (k = 0; k < 10; k++) {
		if (k == 4)
			build(k, ROCE_RC_SEND_ONLY_IMM, 4);
		else
			build(k, ROCE_RC_SEND_ONLY, 8);
	}
	ck_assert_uint_eq(lens[4], lens[0]);
	ck_assert_uint_eq(roce_gso_run_len(lens, 10), 10);
	roce_gso_stamp_run(ptrs, lens, 10);
	n = whole(10, datagram);
	ck_assert_uint_le(n, ROCE_MAX_PACKET);
	/* no longer than a packet: its identification 0 says "a run" (io.c) */
	ck_assert(roce_gso_maybe_run(datagram, n));
	ck_assert_int_eq(cut(n), 0);
	ck_assert_uint_eq(ngot, 10);
	for (k = 0; k < 10; k++) {
		ck_assert_uint_eq(got_len[k], lens[k]);
		ck_assert_mem_eq(got[k], pkts[k], lens[k]);
		ck_assert(roce_icrc_ok(got[k], got_len[k]));
	}
}
END_TEST

/*
 * A run of more packets than Linux ever cuts a datagram into is no run:
 * 65 short SENDs, each whole and good, as one datagram, are refused
 * before any is handled (a datagram of 4,000 would be 4,000 packets).
 */
START_TEST(no_more_segments_than_linux_makes)
{
	unsigned int k;
	size_t n;

	for (k = 0; k < MAX_BUILT; k++)
		build(k, ROCE_RC_SEND_ONLY, 8);
	roce_gso_stamp_run(ptrs, lens, MAX_BUILT);
	n = whole(MAX_BUILT, datagram);
	ck_assert_int_eq(cut(n), -EBADMSG);
	ck_assert_uint_eq(ngot, 0);
	/* one fewer cuts (its packets go to a sink that holds 63) */
	roce_gso_stamp_run(ptrs, lens, 63);
	n = whole(63, datagram);
	ck_assert_int_eq(cut(n), 0);
	ck_assert_uint_eq(ngot, 63);
}
END_TEST

/*
 * Three short packets make no run unless together longer than a packet
 * (a run costs a system call of its own); four do.
 */
START_TEST(a_few_short_packets_make_no_run)
{
	size_t l[4] = { 52, 52, 52, 52 };

	ck_assert_uint_eq(roce_gso_run_len(l, 3), 0);
	ck_assert_uint_eq(roce_gso_run_len(l, 4), 4);
	l[3] = 48;
	ck_assert_uint_eq(roce_gso_run_len(l, 4), 4);
}
END_TEST

/*
 * A size whose first boundary fits is not enough: every segment must
 * start with the next PSN's BTH, and the last be no longer than the
 * others.
 */
START_TEST(every_boundary_must_fit)
{
	unsigned int k;
	size_t n;

	for (k = 0; k < 6; k++)
		build(k, ROCE_RC_SEND_ONLY, 8);
	roce_gso_stamp_run(ptrs, lens, 6);
	n = whole(6, datagram);
	/* the fourth packet's PSN off by one */
	datagram[HDRS + 3 * (lens[0] - HDRS) + 11] ^= 1;
	ck_assert_int_eq(cut(n), -EBADMSG);
	datagram[HDRS + 3 * (lens[0] - HDRS) + 11] ^= 1;
	ck_assert_int_eq(cut(n), 0);
	ck_assert_uint_eq(ngot, 6);
	/* a last packet longer than the others: no size cuts it */
	ngot = 0;
	build(5, ROCE_RC_SEND_ONLY, 12);
	roce_gso_stamp_run(ptrs, lens, 6);
	n = whole(6, datagram);
	ck_assert_int_eq(cut(n), -EBADMSG);
	ck_assert_uint_eq(ngot, 0);
}
END_TEST

/*
 * Each packet of a run ends with its own CRC, so whether the whole passes
 * as one packet depends on its headers and shape only: from this source
 * address, ten 8-byte SENDs always do (whatever their payloads and PSNs).
 * Taken as one packet, it would be a SEND of 224 bytes of the others'
 * headers; its identification says it is a run, and it cuts.
 */
START_TEST(a_short_run_that_passes_as_a_packet)
{
	static const uint8_t src[4] = { 115, 67, 216, 23 };
	unsigned int k;
	size_t n;

	memcpy(src_ip, src, 4);
	for (k = 0; k < 10; k++)
		build(k, ROCE_RC_SEND_ONLY, 8);
	roce_gso_stamp_run(ptrs, lens, 10);
	n = whole(10, datagram);
	ck_assert(roce_icrc_ok(datagram, n));
	ck_assert(roce_gso_maybe_run(datagram, n));
	ck_assert_int_eq(cut(n), 0);
	ck_assert_uint_eq(ngot, 10);
	for (k = 0; k < 10; k++)
		ck_assert_mem_eq(got[k], pkts[k], lens[k]);
}
END_TEST

/*
 * A packet of ours (an odd identification) is never tried as a run; one
 * with identification 0 (a kernel's rxe may send one) is tried, does not
 * cut, and io.c takes it as the packet it is.
 */
START_TEST(a_packet_is_no_run)
{
	build(0, ROCE_RC_SEND_ONLY, 8);
	roce_ipv4_set_id(pkts[0], 7);
	roce_icrc_set(pkts[0], lens[0]);
	ck_assert(!roce_gso_maybe_run(pkts[0], lens[0]));
	roce_ipv4_set_id(pkts[0], 0);
	roce_icrc_set(pkts[0], lens[0]);
	ck_assert(roce_gso_maybe_run(pkts[0], lens[0]));
	memcpy(datagram, pkts[0], lens[0]);
	ck_assert_int_eq(cut(lens[0]), -EBADMSG);
	/* a datagram of headers only */
	ck_assert_int_eq(cut(HDRS), -EBADMSG);
	ck_assert_uint_eq(ngot, 0);
}
END_TEST

/*
 * Payloads that hold BTHs of the next PSNs at every 272 bytes (what an
 * MTU of 256 would make): the boundaries of that size all fit, but its
 * first segment fails its ICRC, and the run is cut at its true size.
 * Taken, the wrong size would lose the run at every retransmission.
 */
START_TEST(a_wrong_size_is_not_taken)
{
	const size_t udp = ROCE_BTH_LEN + 1000 + ROCE_ICRC_LEN, fake = 272;
	unsigned int k, j;
	size_t n;

	for (k = 0; k < 8; k++)
		build(k, ROCE_RC_SEND_ONLY, 1000);
	for (j = 1; j * fake < 8 * udp; j++) {
		size_t at = j * fake % udp;
		uint8_t *b = pkts[j * fake / udp] + HDRS + at;

		ck_assert(at >= ROCE_BTH_LEN && at + ROCE_BTH_LEN <= udp - ROCE_ICRC_LEN);
		b[0] = ROCE_RC_SEND_ONLY;
		b[5] = 0x00, b[6] = 0x0a, b[7] = 0xbc;		/* QP 0xabc */
		b[9] = 0, b[10] = 0, b[11] = (uint8_t)(100 + j);	/* PSN */
	}
	roce_gso_stamp_run(ptrs, lens, 8);
	n = whole(8, datagram);
	ck_assert_int_eq(cut(n), 0);
	ck_assert_uint_eq(ngot, 8);
	for (k = 0; k < 8; k++) {
		ck_assert_uint_eq(got_len[k], lens[k]);
		ck_assert(roce_icrc_ok(got[k], got_len[k]));
	}
}
END_TEST

START_TEST(hostile_datagrams_are_refused)
{
	size_t n = run_whole();

	/* the second packet's PSN is not the first's next */
	datagram[HDRS + (lens[0] - HDRS) + 11] ^= 1;
	ck_assert_int_eq(cut(n), -EBADMSG);
	/* nor its QP */
	datagram[HDRS + (lens[0] - HDRS) + 11] ^= 1;
	datagram[HDRS + (lens[0] - HDRS) + 7] ^= 1;
	ck_assert_int_eq(cut(n), -EBADMSG);
	/* garbage, an opcode we don't speak, a length the header denies */
	memset(datagram + HDRS, 0xEE, n - HDRS);
	ck_assert_int_eq(cut(n), -EBADMSG);
	ck_assert_int_eq(cut(HDRS + 4), -EBADMSG);
	memset(datagram, 0x60, 64);
	ck_assert_int_eq(cut(n), -EBADMSG);
	ck_assert_uint_eq(ngot, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("roce_gso");
	TCase *tc = tcase_create("runs");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, equal_packets_make_a_run);
	tcase_add_test(tc, a_whole_run_is_cut_into_its_packets);
	tcase_add_test(tc, a_corrupt_byte_fails_its_packet_only);
	tcase_add_test(tc, hostile_datagrams_are_refused);
	tcase_add_test(tc, a_run_of_short_messages_is_cut);
	tcase_add_test(tc, no_more_segments_than_linux_makes);
	tcase_add_test(tc, a_few_short_packets_make_no_run);
	tcase_add_test(tc, every_boundary_must_fit);
	tcase_add_test(tc, a_short_run_that_passes_as_a_packet);
	tcase_add_test(tc, a_packet_is_no_run);
	tcase_add_test(tc, a_wrong_size_is_not_taken);
	suite_add_tcase(s, tc);
	return check_run(s, CK_NORMAL);
}
