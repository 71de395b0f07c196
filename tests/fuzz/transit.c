/*
 * Fuzz target: the direct transport's transit ring (common/transit.c) as
 * a receiver reads it, whatever a hostile sender wrote; and the sender's
 * writer against the reader.  Besides what the sanitizers catch, it holds
 * the ring to its promises, and aborts where one is broken:
 * - reading: the input is the ring's memory (64 cells) and its counters;
 *   each fragment ibvd_transit_next hands out lies inside the ring and
 *   inside what was produced, is a known kind with known flags, and moves
 *   `consumed` forward; garbage is -EPROTO, never a wild pointer;
 * - writing: the input's remaining bytes are message sizes and how many
 *   the receiver takes between writes (up to 128 messages); every message
 *   written comes back in order with its bytes, ibvd_transit_room says
 *   exactly whether the next fits, and a PAD is never handed out.
 * tests/fuzz/run runs it under libFuzzer; make check runs it on its seed
 * corpus (tests/fuzz/fuzz.mk).
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)	do { if (!(cond)) abort(); } while (0)

#define NCELLS	64u
#define BYTES	(NCELLS * IBVD_TRANSIT_CELL)

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* The input's first bytes as a ring a hostile sender wrote. */
static void read_garbage(const uint8_t *data, size_t size)
{
	static uint8_t cells[BYTES], sink[BYTES];
	struct ibvd_transit_ctl ctl;
	struct ibvd_transit t;
	uint32_t consumed, produced;
	unsigned int n;

	if (size < 8)
		return;
	consumed = get32(data);
	produced = get32(data + 4);
	memset(cells, 0, sizeof(cells));
	memcpy(cells, data + 8, size - 8 < BYTES ? size - 8 : BYTES);
	memset(&ctl, 0, sizeof(ctl));
	ctl.produced = produced;
	ibvd_transit_init(&t, &ctl, cells, NCELLS);
	for (n = 0; n < 2 * NCELLS; n++) {
		struct ibvd_transit_frag f;
		const uint8_t *payload;
		uint32_t next;
		int ret = ibvd_transit_next(&t, consumed, &f, &payload, &next);

		CHECK(ret == 0 || ret == 1 || ret == -EPROTO);
		if (ret != 1)
			break;
		CHECK(payload >= cells + IBVD_TRANSIT_HDR);
		CHECK(f.len <= BYTES && payload + f.len <= cells + BYTES);
		CHECK(next - consumed > 0 && next - consumed <= produced - consumed);
		CHECK(f.kind > IBVD_TRANSIT_PAD && f.kind <= IBVD_TRANSIT_WRITE_IMM);
		CHECK(!(f.flags & ~IBVD_TRANSIT_FLAGS));
		memcpy(sink, payload, f.len);	/* every byte: ASan checks */
		consumed = next;
	}
}

/* Message sizes from the input, written and read back in order. */
static void write_read(const uint8_t *data, size_t size)
{
	static uint8_t cells[BYTES], msg[BYTES], want[BYTES];
	struct ibvd_transit_ctl ctl;
	struct ibvd_transit t;
	uint32_t produced, consumed, sent = 0, got = 0;
	size_t i;

	if (size < 4)
		return;
	memset(&ctl, 0, sizeof(ctl));
	memset(cells, 0, sizeof(cells));
	/* start anywhere, the counters' wrap included */
	produced = consumed = get32(data);
	ibvd_transit_init(&t, &ctl, cells, NCELLS);
	/* 128 messages go round the 64-cell ring several times: enough */
	for (i = 4; i + 1 < size && i < 4 + 2 * 128; i += 2) {
		uint32_t len = data[i] | (uint32_t)(data[i + 1] & 0x0f) << 8;
		unsigned int take = data[i + 1] >> 4;
		uint32_t room = ibvd_transit_room(&t, produced, consumed);
		struct ibvd_transit_frag f = {
			.kind = IBVD_TRANSIT_SEND,
			.flags = IBVD_TRANSIT_FIRST | IBVD_TRANSIT_LAST,
			.len = len, .msg_len = len, .wr_id = sent,
		};
		struct iovec iov = { msg, len };
		int ret;

		memset(msg, (int)(sent & 0xff), len);
		ret = ibvd_transit_write(&t, &produced, consumed, &f, &iov, 1);
		if (ibvd_transit_frag_cells(len) > NCELLS)
			CHECK(ret == -EINVAL);	/* never fits this ring */
		else
			CHECK(ret == (room && len <= room ? 0 : -EAGAIN));
		if (ret == 0)
			sent++;
		ibvd_transit_publish(&t, produced);
		while (take--) {
			const uint8_t *payload;
			uint32_t next;

			ret = ibvd_transit_next(&t, consumed, &f, &payload, &next);
			CHECK(ret >= 0);
			if (ret == 0) {
				CHECK(got == sent && consumed == produced);
				break;
			}
			CHECK(f.kind == IBVD_TRANSIT_SEND && f.wr_id == got);
			memset(want, (int)(got & 0xff), f.len);
			CHECK(memcmp(payload, want, f.len) == 0);
			consumed = next;
			ibvd_transit_release(&t, consumed);
			got++;
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	read_garbage(data, size);
	write_read(data, size);
	return 0;
}
