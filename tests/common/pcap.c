/*
 * A classic pcap reader for tests (pcap.h): the 24-byte file header, then
 * per frame a 16-byte record header (seconds, fraction, captured length,
 * original length) and the frame.
 */
#include <config.h>

#include <errno.h>
#include <stdarg.h>
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

/* -1, with the message in err */
static int error(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int error(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

static uint32_t pcap_u32(const uint8_t *p, bool swap)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return swap ? __builtin_bswap32(v) : v;
}

static int read_file(const char *path, uint8_t **buf, size_t *len,
		     char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	long n;

	if (!f)
		return error(err, errlen, "%s: %s", path, strerror(errno));
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0) {
		fclose(f);
		return error(err, errlen, "%s: cannot seek", path);
	}
	rewind(f);
	*buf = malloc(n ? (size_t)n : 1);
	if (!*buf || fread(*buf, 1, (size_t)n, f) != (size_t)n) {
		fclose(f);
		free(*buf);
		*buf = NULL;
		return error(err, errlen, "%s: cannot read", path);
	}
	fclose(f);
	*len = (size_t)n;
	return 0;
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

/* The file header: sets *swap when the file is in the other byte order */
static int check_header(const uint8_t *file, size_t len, bool *swap,
			char *err, size_t errlen)
{
	uint32_t magic, link;

	if (len < PCAP_HDR_LEN)
		return error(err, errlen, "too short for a pcap header");
	magic = pcap_u32(file, false);
	*swap = magic == __builtin_bswap32(PCAP_MAGIC) ||
		magic == __builtin_bswap32(PCAP_MAGIC_NS);
	magic = pcap_u32(file, *swap);
	if (magic != PCAP_MAGIC && magic != PCAP_MAGIC_NS)
		return error(err, errlen, "not a classic pcap file (magic %08x)",
			     magic);
	link = pcap_u32(file + 20, *swap);
	if (link != LINKTYPE_ETHERNET)
		return error(err, errlen, "link type %u, not Ethernet (1)", link);
	return 0;
}

/* The frames after the file header, into cap */
static int read_frames(struct pcap *cap, size_t len, bool swap,
		       char *err, size_t errlen)
{
	size_t off;

	for (off = PCAP_HDR_LEN; off + PCAP_REC_LEN <= len;) {
		const uint8_t *rec = cap->file + off;
		uint32_t incl = pcap_u32(rec + 8, swap);
		uint32_t orig = pcap_u32(rec + 12, swap);
		struct pcap_ip *p = &cap->ip[cap->nip];

		cap->frames++;
		if (incl != orig)
			return error(err, errlen, "frame %zu: %u of its %u bytes captured",
				     cap->frames, incl, orig);
		if (incl > len - off - PCAP_REC_LEN)
			return error(err, errlen, "frame %zu: cut short by the end of the file",
				     cap->frames);
		p->ip = frame_ip(rec + PCAP_REC_LEN, incl, &p->len);
		p->frame = cap->frames;
		if (p->ip)
			cap->nip++;
		off += PCAP_REC_LEN + incl;
	}
	if (off != len)
		return error(err, errlen, "%zu bytes after the last frame", len - off);
	return 0;
}

int pcap_read(const char *path, struct pcap *cap, char *err, size_t errlen)
{
	size_t len = 0;
	bool swap = false;
	int rc;

	memset(cap, 0, sizeof(*cap));
	if (read_file(path, &cap->file, &len, err, errlen))
		return -1;
	/* no more frames than record headers fit in the file */
	cap->ip = calloc(len / PCAP_REC_LEN + 1, sizeof(*cap->ip));
	if (!cap->ip)
		rc = error(err, errlen, "out of memory");
	else
		rc = check_header(cap->file, len, &swap, err, errlen) ||
		     read_frames(cap, len, swap, err, errlen) ? -1 : 0;
	if (rc)
		pcap_free(cap);
	return rc;
}

void pcap_free(struct pcap *cap)
{
	free(cap->file);
	free(cap->ip);
	memset(cap, 0, sizeof(*cap));
}
