/*
 * A classic pcap reader for tests (pcap.h): the 24-byte file header, then
 * per frame a 16-byte record header (seconds, fraction, captured length,
 * original length) and the frame.
 */
#include <config.h>

#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pcap.h"

#define PCAP_MAGIC		0xA1B2C3D4u	/* microsecond timestamps */
#define PCAP_MAGIC_NS		0xA1B23C4Du
#define PCAP_HDR_LEN		24
#define PCAP_REC_LEN		16
#define LINKTYPE_ETHERNET	1
#define ETH_LEN			14
#define ETH_P_IP		0x0800
#define ETH_P_IPV6		0x86DD
#define ETH_P_8021Q		0x8100

static uint32_t pcap_u32(const uint8_t *p, bool swap)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return swap ? __builtin_bswap32(v) : v;
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

/* The IP packet in an Ethernet frame, or NULL */
static const uint8_t *frame_ip(const uint8_t *f, size_t len, size_t *ip_len)
{
	size_t off = ETH_LEN;
	unsigned int type;

	if (len < ETH_LEN)
		return NULL;
	type = (unsigned int)f[12] << 8 | f[13];
	while (type == ETH_P_8021Q && len >= off + 4) {
		type = (unsigned int)f[off + 2] << 8 | f[off + 3];
		off += 4;
	}
	if ((type != ETH_P_IP && type != ETH_P_IPV6) || len <= off)
		return NULL;
	*ip_len = len - off;
	return f + off;
}

/* Whether the file is in the other byte order; fails on one that is no pcap */
static bool check_header(const uint8_t *file, size_t len)
{
	uint32_t magic;
	bool swap;

	ck_assert_uint_ge(len, PCAP_HDR_LEN);
	magic = pcap_u32(file, false);
	swap = magic == __builtin_bswap32(PCAP_MAGIC) ||
	       magic == __builtin_bswap32(PCAP_MAGIC_NS);
	magic = pcap_u32(file, swap);
	ck_assert(magic == PCAP_MAGIC || magic == PCAP_MAGIC_NS);
	ck_assert_uint_eq(pcap_u32(file + 20, swap), LINKTYPE_ETHERNET);
	return swap;
}

void pcap_load(const char *name, struct pcap *cap)
{
	const char *top = getenv("top_srcdir");
	char path[4096];
	size_t len, off;
	bool swap;

	snprintf(path, sizeof(path), "%s/tests/data/%s",
		 top && *top ? top : IBVD_TEST_SRCDIR, name);
	memset(cap, 0, sizeof(*cap));
	cap->file = read_file(path, &len);
	swap = check_header(cap->file, len);
	/* no more frames than record headers fit in the file */
	cap->ip = calloc(len / PCAP_REC_LEN, sizeof(*cap->ip));
	ck_assert_ptr_nonnull(cap->ip);
	for (off = PCAP_HDR_LEN; off + PCAP_REC_LEN <= len;) {
		const uint8_t *rec = cap->file + off;
		uint32_t incl = pcap_u32(rec + 8, swap);
		struct pcap_ip *p = &cap->ip[cap->nip];

		ck_assert_uint_eq(incl, pcap_u32(rec + 12, swap));
		ck_assert_uint_le(incl, len - off - PCAP_REC_LEN);
		p->ip = frame_ip(rec + PCAP_REC_LEN, incl, &p->len);
		if (p->ip)
			cap->nip++;
		cap->frames++;
		off += PCAP_REC_LEN + incl;
	}
	ck_assert_uint_eq(off, len);
}
