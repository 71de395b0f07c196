/*
 * The transit ring (transit.h): writing fragments on the sender's side,
 * reading them back, checked, on the receiver's.  Both sides keep their
 * own counter and the ring's size; the other side's counter, read from
 * shared memory, is only ever compared, never trusted.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "barrier.h"
#include "transit.h"

_Static_assert(sizeof(struct ibvd_transit_frag) == 32, "fragment header");
_Static_assert(sizeof(struct ibvd_transit_ctl) == 2 * 64, "control block");

bool ibvd_transit_geometry_ok(uint32_t ncells)
{
	return ncells >= IBVD_TRANSIT_MIN_CELLS &&
	       ncells <= IBVD_TRANSIT_MAX_CELLS && (ncells & (ncells - 1)) == 0;
}

void ibvd_transit_init(struct ibvd_transit *t, void *ctl, void *cells,
		       uint32_t ncells)
{
	t->ctl = ctl;
	t->cells = cells;
	t->ncells = ncells;
	t->copy_in = NULL;
}

void ibvd_transit_pair(void *base, uint32_t ncells, unsigned int side,
		       struct ibvd_transit *out, struct ibvd_transit *in)
{
	struct ibvd_transit_ctl *ctl = base;
	uint8_t *cells = (uint8_t *)base + IBVD_TRANSIT_CTL_BYTES;
	size_t ring_bytes = (size_t)ncells * IBVD_TRANSIT_CELL;

	side &= 1;
	ibvd_transit_init(out, &ctl[side], cells + side * ring_bytes, ncells);
	ibvd_transit_init(in, &ctl[!side], cells + !side * ring_bytes, ncells);
}

static uint8_t *cell(const struct ibvd_transit *t, uint32_t count)
{
	return t->cells + (size_t)(count & (t->ncells - 1)) * IBVD_TRANSIT_CELL;
}

/* Free cells; 0 when the consumer claims to have taken more than exists. */
static uint32_t free_cells(const struct ibvd_transit *t, uint32_t produced,
			   uint32_t consumed)
{
	uint32_t used = produced - consumed;

	return used > t->ncells ? 0 : t->ncells - used;
}

static uint32_t payload_of(uint32_t cells)
{
	return cells ? cells * IBVD_TRANSIT_CELL - IBVD_TRANSIT_HDR : 0;
}

uint32_t ibvd_transit_room(const struct ibvd_transit *t, uint32_t produced,
			   uint32_t consumed)
{
	uint32_t free = free_cells(t, produced, consumed);
	uint32_t to_end = t->ncells - (produced & (t->ncells - 1));

	if (free <= to_end)
		return payload_of(free);
	/* the tail of the ring, or a PAD over it and the ring's start */
	return payload_of(to_end > free - to_end ? to_end : free - to_end);
}

static void put_header(const struct ibvd_transit *t, uint32_t at,
		       const struct ibvd_transit_frag *f)
{
	struct ibvd_transit_frag h = *f;

	h.seq = at + 1;
	memcpy(cell(t, at), &h, sizeof(h));
}

static void put_payload(const struct ibvd_transit *t, uint8_t *dst,
			const struct iovec *iov, int iovcnt, uint32_t len)
{
	void *(*copy)(void *, const void *, size_t) =
		t->copy_in ? t->copy_in : memcpy;
	int i;

	for (i = 0; i < iovcnt && len; i++) {
		size_t n = iov[i].iov_len < len ? iov[i].iov_len : len;

		copy(dst, iov[i].iov_base, n);
		dst += n;
		len -= (uint32_t)n;
	}
}

int ibvd_transit_write(const struct ibvd_transit *t, uint32_t *produced,
		       uint32_t consumed, const struct ibvd_transit_frag *f,
		       const struct iovec *iov, int iovcnt)
{
	uint32_t at = *produced;
	uint32_t free = free_cells(t, at, consumed);
	uint32_t to_end = t->ncells - (at & (t->ncells - 1));
	uint32_t need;

	if (f->kind <= IBVD_TRANSIT_PAD || f->kind > IBVD_TRANSIT_WRITE_IMM ||
	    (f->flags & ~IBVD_TRANSIT_FLAGS) ||
	    f->len > (uint64_t)t->ncells * IBVD_TRANSIT_CELL)
		return -EINVAL;
	need = ibvd_transit_frag_cells(f->len);
	if (need > t->ncells)
		return -EINVAL;
	if (need > to_end) {
		/* A PAD over the rest, then the fragment at the start. */
		if ((uint64_t)to_end + need > free)
			return -EAGAIN;
		put_header(t, at, &(struct ibvd_transit_frag){
			.kind = IBVD_TRANSIT_PAD });
		at += to_end;
	} else if (need > free) {
		return -EAGAIN;
	}
	put_payload(t, cell(t, at) + IBVD_TRANSIT_HDR, iov, iovcnt, f->len);
	put_header(t, at, f);
	*produced = at + need;
	return 0;
}

void ibvd_transit_publish(const struct ibvd_transit *t, uint32_t produced)
{
	/* Release: the fragments below `produced` are written. */
	ibvd_publish(&t->ctl->produced, produced);
}

static bool frag_valid(const struct ibvd_transit *t, uint32_t at,
		       uint32_t avail, const struct ibvd_transit_frag *f)
{
	uint32_t pos = at & (t->ncells - 1);
	uint32_t cells;

	if (f->seq != at + 1 || f->kind <= IBVD_TRANSIT_PAD ||
	    f->kind > IBVD_TRANSIT_WRITE_IMM || (f->flags & ~IBVD_TRANSIT_FLAGS))
		return false;
	if (f->len > (uint64_t)avail * IBVD_TRANSIT_CELL)
		return false;
	cells = ibvd_transit_frag_cells(f->len);
	if (cells > avail || pos + cells > t->ncells)
		return false;
	/* a WRITE is whole, with its target; a first part says its size */
	if (f->kind == IBVD_TRANSIT_WRITE_IMM &&
	    (f->len < IBVD_TRANSIT_RDMA_INFO ||
	     (f->flags & (IBVD_TRANSIT_FIRST | IBVD_TRANSIT_LAST)) !=
	     (IBVD_TRANSIT_FIRST | IBVD_TRANSIT_LAST)))
		return false;
	return !(f->flags & IBVD_TRANSIT_FIRST) || f->len <= f->msg_len;
}

int ibvd_transit_next(const struct ibvd_transit *t, uint32_t consumed,
		      struct ibvd_transit_frag *f, const uint8_t **payload,
		      uint32_t *next)
{
	/* Acquire: the fragments below `produced` were written before it. */
	return ibvd_transit_next_upto(t, ibvd_observe(&t->ctl->produced),
				      consumed, f, payload, next);
}

int ibvd_transit_next_upto(const struct ibvd_transit *t, uint32_t produced,
			   uint32_t consumed, struct ibvd_transit_frag *f,
			   const uint8_t **payload, uint32_t *next)
{
	uint32_t avail = produced - consumed;
	uint32_t at = consumed;

	if (avail == 0)
		return 0;
	/*
	 * `consumed` ahead of `produced` by a lap at most: taken, by the
	 * engine, up to what the producer has told it but not yet the ring
	 * (its header first, then the ring), or a lie: nothing yet, either way
	 */
	if (consumed - produced <= t->ncells)
		return 0;
	if (avail > t->ncells)
		return -EPROTO;
	/* One copy of the header: the producer may rewrite it meanwhile. */
	memcpy(f, cell(t, at), sizeof(*f));
	if (f->kind == IBVD_TRANSIT_PAD) {
		uint32_t to_end = t->ncells - (at & (t->ncells - 1));

		if (f->seq != at + 1 || to_end > avail)
			return -EPROTO;
		if (to_end == avail)
			return 0;	/* a PAD is always followed; wait */
		at += to_end;
		avail -= to_end;
		memcpy(f, cell(t, at), sizeof(*f));
	}
	if (!frag_valid(t, at, avail, f))
		return -EPROTO;
	*payload = cell(t, at) + IBVD_TRANSIT_HDR;
	*next = at + ibvd_transit_frag_cells(f->len);
	return 1;
}

void ibvd_transit_release(const struct ibvd_transit *t, uint32_t consumed)
{
	/* Release: done reading the cells below `consumed`. */
	ibvd_publish(&t->ctl->consumed, consumed);
}
