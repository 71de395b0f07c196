/*
 * Fuzz target: the IB CM's MADs (daemon/cm/mad.h) and rdma_cm's header
 * (daemon/cm/cma_hdr.h) on any bytes, taken as a MAD and as private data.
 * Besides what the sanitizers catch, it holds the codecs to their
 * promises, and aborts where one is broken:
 * - a MAD decodes exactly when it is 256 bytes of base version 1 and the
 *   CM class, and gives a message exactly for the attributes mad.h has;
 * - encoding a decoded message gives back its bytes but for the bits an
 *   all-ones message loses (test_cm_mad pins those to the IBTA's reserved
 *   bits), and encoding is stable;
 * - rdma_cm's header decodes exactly when it is long enough with version
 *   0 and IP version 4 or 6, encodes back to its bytes but the reserved
 *   nibble, and goes through socket addresses and back unchanged but for
 *   an IPv4 address's twelve leading bytes, which are zero.
 * tests/fuzz/run runs it under libFuzzer; make check runs it on its
 * seed corpus (tests/fuzz/fuzz.mk).
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cm/cma_hdr.h"
#include "cm/mad.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)	do { if (!(cond)) abort(); } while (0)

static bool known_attr(uint16_t attr)
{
	return attr >= IBCM_ATTR_REQ && attr <= IBCM_ATTR_SIDR_REP;
}

/* The bits of a message of attr that encoding keeps: all ones, through */
static void kept_bits(uint16_t attr, uint8_t map[IBCM_MAD_LEN])
{
	uint8_t ones[IBCM_MAD_LEN];
	struct ibcm_msg m;

	memset(ones, 0xFF, sizeof(ones));
	ones[0] = IBCM_BASE_VERSION;
	ones[1] = IBCM_MGMT_CLASS;
	ones[16] = (uint8_t)(attr >> 8);
	ones[17] = (uint8_t)attr;
	CHECK(ibcm_decode(ones, sizeof(ones), &m) == 0);
	CHECK(ibcm_encode(&m, map) == 0);
	map[0] = map[1] = map[16] = map[17] = 0xFF;
}

static void cma_pdata(const uint8_t *data, size_t size);

static void mad(const uint8_t *data, size_t size)
{
	uint8_t out[IBCM_MAD_LEN], again[IBCM_MAD_LEN], map[IBCM_MAD_LEN];
	struct ibcm_msg m, m2;
	size_t i;
	int err;

	err = ibcm_decode(data, size, &m);
	if (size != IBCM_MAD_LEN || data[0] != IBCM_BASE_VERSION ||
	    data[1] != IBCM_MGMT_CLASS) {
		CHECK(err == -EBADMSG);
		return;
	}
	CHECK(m.hdr.attr_id == (data[16] << 8 | data[17]));
	if (!known_attr(m.hdr.attr_id)) {
		CHECK(err == -EOPNOTSUPP);
		CHECK(ibcm_encode(&m, out) == -EOPNOTSUPP);
		return;
	}
	CHECK(err == 0);
	CHECK(ibcm_encode(&m, out) == 0);
	kept_bits(m.hdr.attr_id, map);
	for (i = 0; i < IBCM_MAD_LEN; i++)
		CHECK(out[i] == (data[i] & map[i]));
	CHECK(ibcm_decode(out, sizeof(out), &m2) == 0);
	CHECK(ibcm_encode(&m2, again) == 0);
	CHECK(memcmp(again, out, sizeof(out)) == 0);

	if (m.hdr.attr_id == IBCM_ATTR_REQ)
		cma_pdata(m.req.pdata, sizeof(m.req.pdata));
	if (m.hdr.attr_id == IBCM_ATTR_SIDR_REQ)
		cma_pdata(m.sidr_req.pdata, sizeof(m.sidr_req.pdata));
}

/* The header's bytes as encoding gives them back after decoding */
static void cma_expected(const uint8_t *data, const struct cma_hdr *h,
			 uint8_t want[CMA_HDR_LEN])
{
	memcpy(want, data, CMA_HDR_LEN);
	want[1] &= 0xF0;
	if (h->ip_version == 4) {
		memset(want + 4, 0, 12);
		memcpy(want + 16, data + 16, 4);
		memset(want + 20, 0, 12);
		memcpy(want + 32, data + 32, 4);
	}
}

static void cma_pdata(const uint8_t *data, size_t size)
{
	uint8_t out[CMA_HDR_LEN], want[CMA_HDR_LEN];
	struct sockaddr_storage src, dst;
	struct cma_hdr h, h2;
	int err;
	bool ok;

	err = cma_hdr_decode(data, size, &h);
	ok = size >= CMA_HDR_LEN && data[0] == 0 &&
	     (data[1] >> 4 == 4 || data[1] >> 4 == 6);
	CHECK(err == (ok ? 0 : -EBADMSG));
	if (err)
		return;
	cma_hdr_encode(&h, out);
	memcpy(want, data, CMA_HDR_LEN);
	want[1] &= 0xF0;
	CHECK(memcmp(out, want, CMA_HDR_LEN) == 0);

	cma_hdr_to_addrs(&h, (uint16_t)(data[0] << 8 | data[1]), &src, &dst);
	CHECK(src.ss_family == dst.ss_family);
	CHECK(cma_hdr_from_addrs(&h2, (struct sockaddr *)&src,
				 (struct sockaddr *)&dst) == 0);
	cma_hdr_encode(&h2, out);
	cma_expected(data, &h, want);
	CHECK(memcmp(out, want, CMA_HDR_LEN) == 0);
}

/* A timeout is a power of two of milliseconds, 1 to 2^23 */
static void timers(const uint8_t *data, size_t size)
{
	uint32_t t;

	if (size < 2)
		return;
	t = ibcm_timeout_ms(data[0]);
	CHECK(t >= 1 && t <= 1u << 23 && (t & (t - 1)) == 0);
	CHECK(ibcm_req_wait_ms(data[0], data[1]) ==
	      2 * t + ibcm_timeout_ms(data[1]));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	mad(data, size);
	cma_pdata(data, size);
	timers(data, size);
	return 0;
}
