/*
 * roce-pcap-check [-l] FILE: every RoCEv2 packet (IPv4 or IPv6, UDP to
 * port 4791) in a classic pcap capture must parse (roce_parse_ip), carry
 * a good ICRC (roce_icrc_ok) and decode (roce_decode): our codec as the
 * judge of what two daemons sent each other.  Prints how many packets of
 * each opcode there were and every bad one with its frame number (as
 * tshark counts); -l lists "FRAME OPCODE" for each packet first, the
 * opcode in decimal as tshark prints infiniband.bth.opcode, so that a
 * test can compare tshark's reading with ours.  Also counts the IPv4
 * packets of identification 0: the first of each run a daemon sent as one
 * datagram (transport/roce/gso.c) and the kernel cut on its way, as a
 * daemon's single packets never carry 0.
 *
 * Exit status: 0 every packet good, 1 one is not, 2 no capture read.
 */
#include <config.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "daemon/transport/roce/wire.h"
#include "tests/common/pcap.h"

#define IPPROTO_UDP_NUM		17
#define IPV6_HDR_LEN		40
/* Bad packets shown; the count says how many more there were */
#define MAX_SHOWN		20

/* XRC's opcodes are RC's, 0xA0 up */
#define XRC(op)		[ROCE_OP_XRC | ROCE_RC_##op] = "XRC_" #op

static const char *const opcode_names[256] = {
	[ROCE_RC_SEND_FIRST] = "RC_SEND_FIRST",
	[ROCE_RC_SEND_MIDDLE] = "RC_SEND_MIDDLE",
	[ROCE_RC_SEND_LAST] = "RC_SEND_LAST",
	[ROCE_RC_SEND_LAST_IMM] = "RC_SEND_LAST_IMM",
	[ROCE_RC_SEND_ONLY] = "RC_SEND_ONLY",
	[ROCE_RC_SEND_ONLY_IMM] = "RC_SEND_ONLY_IMM",
	[ROCE_RC_RDMA_WRITE_FIRST] = "RC_RDMA_WRITE_FIRST",
	[ROCE_RC_RDMA_WRITE_MIDDLE] = "RC_RDMA_WRITE_MIDDLE",
	[ROCE_RC_RDMA_WRITE_LAST] = "RC_RDMA_WRITE_LAST",
	[ROCE_RC_RDMA_WRITE_LAST_IMM] = "RC_RDMA_WRITE_LAST_IMM",
	[ROCE_RC_RDMA_WRITE_ONLY] = "RC_RDMA_WRITE_ONLY",
	[ROCE_RC_RDMA_WRITE_ONLY_IMM] = "RC_RDMA_WRITE_ONLY_IMM",
	[ROCE_RC_RDMA_READ_REQUEST] = "RC_RDMA_READ_REQUEST",
	[ROCE_RC_READ_RESPONSE_FIRST] = "RC_READ_RESPONSE_FIRST",
	[ROCE_RC_READ_RESPONSE_MIDDLE] = "RC_READ_RESPONSE_MIDDLE",
	[ROCE_RC_READ_RESPONSE_LAST] = "RC_READ_RESPONSE_LAST",
	[ROCE_RC_READ_RESPONSE_ONLY] = "RC_READ_RESPONSE_ONLY",
	[ROCE_RC_ACKNOWLEDGE] = "RC_ACKNOWLEDGE",
	[ROCE_RC_ATOMIC_ACKNOWLEDGE] = "RC_ATOMIC_ACKNOWLEDGE",
	[ROCE_RC_COMPARE_SWAP] = "RC_COMPARE_SWAP",
	[ROCE_RC_FETCH_ADD] = "RC_FETCH_ADD",
	[ROCE_RC_SEND_LAST_INV] = "RC_SEND_LAST_INV",
	[ROCE_RC_SEND_ONLY_INV] = "RC_SEND_ONLY_INV",
	[ROCE_UC_SEND_FIRST] = "UC_SEND_FIRST",
	[ROCE_UC_SEND_MIDDLE] = "UC_SEND_MIDDLE",
	[ROCE_UC_SEND_LAST] = "UC_SEND_LAST",
	[ROCE_UC_SEND_LAST_IMM] = "UC_SEND_LAST_IMM",
	[ROCE_UC_SEND_ONLY] = "UC_SEND_ONLY",
	[ROCE_UC_SEND_ONLY_IMM] = "UC_SEND_ONLY_IMM",
	[ROCE_UC_RDMA_WRITE_FIRST] = "UC_RDMA_WRITE_FIRST",
	[ROCE_UC_RDMA_WRITE_MIDDLE] = "UC_RDMA_WRITE_MIDDLE",
	[ROCE_UC_RDMA_WRITE_LAST] = "UC_RDMA_WRITE_LAST",
	[ROCE_UC_RDMA_WRITE_LAST_IMM] = "UC_RDMA_WRITE_LAST_IMM",
	[ROCE_UC_RDMA_WRITE_ONLY] = "UC_RDMA_WRITE_ONLY",
	[ROCE_UC_RDMA_WRITE_ONLY_IMM] = "UC_RDMA_WRITE_ONLY_IMM",
	[ROCE_UD_SEND_ONLY] = "UD_SEND_ONLY",
	[ROCE_UD_SEND_ONLY_IMM] = "UD_SEND_ONLY_IMM",
	XRC(SEND_FIRST),
	XRC(SEND_MIDDLE),
	XRC(SEND_LAST),
	XRC(SEND_LAST_IMM),
	XRC(SEND_ONLY),
	XRC(SEND_ONLY_IMM),
	XRC(RDMA_WRITE_FIRST),
	XRC(RDMA_WRITE_MIDDLE),
	XRC(RDMA_WRITE_LAST),
	XRC(RDMA_WRITE_LAST_IMM),
	XRC(RDMA_WRITE_ONLY),
	XRC(RDMA_WRITE_ONLY_IMM),
	XRC(RDMA_READ_REQUEST),
	XRC(READ_RESPONSE_FIRST),
	XRC(READ_RESPONSE_MIDDLE),
	XRC(READ_RESPONSE_LAST),
	XRC(READ_RESPONSE_ONLY),
	XRC(ACKNOWLEDGE),
	XRC(ATOMIC_ACKNOWLEDGE),
	XRC(COMPARE_SWAP),
	XRC(FETCH_ADD),
	XRC(SEND_LAST_INV),
	XRC(SEND_ONLY_INV),
};

struct census {
	size_t roce, bad;
	size_t run_starts;		/* IPv4 identification 0: a run's first */
	size_t opcodes[256];
};

static bool list;

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* The ICRC as stored, least significant byte first */
static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[1] << 8 | p[0];
}

/*
 * Whether an IP packet is UDP to port 4791, read without the codec so
 * that a RoCEv2 packet the codec rejects is still counted as one.
 */
static bool is_roce(const uint8_t *ip, size_t len)
{
	size_t udp;

	if (len >= 20 && ip[0] >> 4 == 4 && ip[9] == IPPROTO_UDP_NUM)
		udp = (size_t)(ip[0] & 0x0F) * 4;
	else if (len >= IPV6_HDR_LEN && ip[0] >> 4 == 6 &&
		 ip[6] == IPPROTO_UDP_NUM)
		udp = IPV6_HDR_LEN;
	else
		return false;
	return len >= udp + 4 && be16(ip + udp + 2) == ROCE_UDP_PORT;
}

static void bad(struct census *c, size_t frame, const char *why)
{
	if (c->bad++ < MAX_SHOWN)
		printf("frame %zu: %s\n", frame, why);
}

/* Parse, check and decode one RoCEv2 packet, counting it */
static void check_packet(struct census *c, const struct pcap_ip *p)
{
	struct roce_ip hdr;
	struct roce_pkt pkt;
	size_t bth, udp_len, ip_len;
	char why[128];

	c->roce++;
	if (roce_parse_ip(p->ip, p->len, &hdr, &bth, &udp_len)) {
		bad(c, p->frame, "roce_parse_ip rejects its IP or UDP header");
		return;
	}
	/* the ICRC ends the UDP datagram, before any Ethernet padding */
	ip_len = bth + udp_len;
	if (!roce_icrc_ok(p->ip, ip_len)) {
		snprintf(why, sizeof(why), "bad ICRC: 0x%08x stored, 0x%08x computed",
			 le32(p->ip + ip_len - ROCE_ICRC_LEN),
			 roce_icrc(p->ip, ip_len));
		bad(c, p->frame, why);
		return;
	}
	if (roce_decode(p->ip + bth, udp_len, &pkt)) {
		snprintf(why, sizeof(why), "roce_decode rejects opcode 0x%02x in %zu bytes of UDP payload",
			 p->ip[bth], udp_len);
		bad(c, p->frame, why);
		return;
	}
	c->opcodes[pkt.opcode]++;
	if (hdr.family == AF_INET && hdr.ip_id == 0)
		c->run_starts++;
	if (list)
		printf("%zu %u\n", p->frame, pkt.opcode);
}

static void print_census(const struct census *c, const struct pcap *cap)
{
	unsigned int op;

	for (op = 0; op < 256; op++) {
		if (c->opcodes[op])
			printf("0x%02x %-24s %zu\n", op,
			       opcode_names[op] ? opcode_names[op] : "?",
			       c->opcodes[op]);
	}
	printf("%zu runs cut into packets on the way\n", c->run_starts);
	printf("%zu frames, %zu RoCEv2 packets, %zu bad\n", cap->frames,
	       c->roce, c->bad);
}

int main(int argc, char **argv)
{
	static struct census census;
	struct pcap cap;
	char err[256];
	size_t i;
	int opt;

	while ((opt = getopt(argc, argv, "l")) == 'l')
		list = true;
	if (opt != -1 || optind != argc - 1) {
		fprintf(stderr, "usage: roce-pcap-check [-l] FILE\n");
		return 2;
	}
	if (pcap_read(argv[optind], &cap, err, sizeof(err))) {
		fprintf(stderr, "roce-pcap-check: %s: %s\n", argv[optind], err);
		return 2;
	}
	for (i = 0; i < cap.nip; i++) {
		if (is_roce(cap.ip[i].ip, cap.ip[i].len))
			check_packet(&census, &cap.ip[i]);
	}
	print_census(&census, &cap);
	pcap_free(&cap);
	return census.bad ? 1 : 0;
}
