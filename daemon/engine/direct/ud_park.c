/*
 * Parked datagrams: UD datagrams to a local QP whose library holds its
 * receive claim (recv.c) when they come.  A NIC keeps a packet in its
 * buffer while the host is slow and its sender never waits; so here the
 * engine copies the datagram out of the sender's memory, completes the
 * sender's WQE, and places it when the claim is next free.  Before, the
 * sender's whole SQ waited for it (up to 10 ms a datagram), so a receiver
 * that let go of its claim just before each bound slowed every datagram
 * its senders sent, to anyone, to a hundred a second.
 *
 * The park is the engine thread's own (each sends its own QPs'), read and
 * changed in its passes or under the objects lock held for writing (a
 * destroy's last sends, which then wake the thread).  It names receivers
 * by QP number and incarnation, looked up at each try, so it holds
 * nothing a destroy or a reset must clean.  Datagrams to one QP keep
 * their order: once one waits, the ones after it park behind it (recv.c),
 * and a try goes no further for a receive queue than its first busy
 * claim.  Bounded per thread (count and bytes) and per receiving account
 * (a uid on a device, however many contexts it opens), so one tenant's
 * held claims fill a part of it only; past a bound a
 * datagram waits in its sender's SQ as before.  One parked longer than
 * PARK_HOLD_NS is dropped, as a receiver stopped that long loses them.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>

#include "engine/internal.h"

/* Parked per thread, and for one receiving account; their bytes. */
#define PARK_MAX		1024u
#define PARK_PER_OWNER		256u
#define PARK_BYTES		(4u << 20)
/* The longest a datagram waits for its receiver's claim. */
#define PARK_HOLD_NS		500000000ull
/* Tries: 20 us apart, doubling while none places anything, up to 1.3 ms. */
#define PARK_RETRY_NS		20000ull
#define PARK_RETRY_SHIFT_MAX	6u
/* Placed per pass: the rest wait for the next one (it comes at once). */
#define PARK_RUN_MAX		64u
/* Receive queues found busy in one run; past it, the rest wait. */
#define PARK_BUSY_SEEN		32u

/* What one run saw: queues found busy, QPs whose datagrams expired. */
struct park_run {
	uint64_t now;
	uintptr_t busy[PARK_BUSY_SEEN];
	uint32_t expired[PARK_BUSY_SEEN];
	unsigned int nbusy, nexpired, placed;
};

static int park_alloc(struct eng_park *park)
{
	park->q = calloc(PARK_MAX, sizeof(*park->q));
	park->keys = calloc(PARK_MAX, sizeof(*park->keys));
	if (park->q && park->keys)
		return 0;
	free(park->q);
	free(park->keys);
	park->q = NULL;
	park->keys = NULL;
	return -ENOMEM;
}

unsigned int ibvd_eng_park_holds(const struct ibvd_engine *eng, uint32_t qpn)
{
	const struct eng_park *park = &eng->park;
	unsigned int i, n = 0;

	for (i = 0; i < park->n; i++)
		n += park->keys[i].qpn == qpn;
	return n;
}

bool ibvd_eng_park_room(struct ibvd_engine *eng, const void *owner,
			uint32_t len)
{
	struct eng_park *park = &eng->park;
	unsigned int i, mine = 0;

	if (!park->q && park_alloc(park) < 0)
		return false;
	if (park->n >= PARK_MAX || park->bytes + len > PARK_BYTES)
		return false;
	for (i = 0; i < park->n; i++)
		mine += park->keys[i].owner == owner;
	return mine < PARK_PER_OWNER;
}

void ibvd_eng_park_push(struct ibvd_engine *eng, struct eng_parked *p,
			const void *owner)
{
	struct eng_park *park = &eng->park;
	uint64_t now = ibvd_eng_now();

	/* something new to try: soon */
	if (!park->n || park->retry_at > now + PARK_RETRY_NS)
		park->retry_at = now + PARK_RETRY_NS;
	park->idle_tries = 0;
	park->keys[park->n].qpn = p->target_qpn;
	park->keys[park->n].owner = owner;
	park->q[park->n++] = p;
	park->bytes += p->len;
	eng_count(&eng->ud_parked, 1);
	/* a destroy's last sends, on the control thread: the owner may sleep */
	ibvd_eng_wake(eng);
}

static bool seen_queue(const struct park_run *r, uintptr_t queue)
{
	unsigned int i;

	for (i = 0; i < r->nbusy; i++)
		if (r->busy[i] == queue)
			return true;
	return false;
}

static bool seen_expired(const struct park_run *r, uint32_t qpn)
{
	unsigned int i;

	for (i = 0; i < r->nexpired; i++)
		if (r->expired[i] == qpn)
			return true;
	return false;
}

/* The next try: soon after one that placed something, later and later if not. */
static void schedule(struct eng_park *park, const struct park_run *r)
{
	if (r->placed == PARK_RUN_MAX) {
		park->retry_at = r->now;	/* more to place: the next pass */
		return;
	}
	if (r->placed)
		park->idle_tries = 0;
	else if (park->idle_tries < PARK_RETRY_SHIFT_MAX)
		park->idle_tries++;
	park->retry_at = r->now + (PARK_RETRY_NS << park->idle_tries);
}

/* p expired: it goes, and with it its QP's later ones in this run. */
static void expire(struct ibvd_engine *eng, struct ibvd_qp *t,
		   const struct eng_parked *p, struct park_run *r)
{
	ibvd_eng_ud_park_expired(eng, t);
	if (r->nexpired < PARK_BUSY_SEEN)
		r->expired[r->nexpired++] = p->target_qpn;
}

/* One datagram's try: true if it leaves the park (placed or dropped). */
static bool try_one(struct ibvd_engine *eng, const struct eng_parked *p,
		    struct park_run *r)
{
	struct ibvd_qp *t = ibvd_qp_by_num(p->target_qpn);
	uintptr_t queue;

	/* gone, or reset since: what was on its way before never lands */
	if (!t || t->incarnation != p->target_gen)
		return true;
	if (seen_expired(r, p->target_qpn)) {
		eng_count(&eng->claim_timeouts, 1);
		return true;
	}
	/* an SRQ's QPs share its claim */
	queue = t->srq ? (uintptr_t)t->srq : (uintptr_t)t;
	if (!seen_queue(r, queue) && r->nbusy < PARK_BUSY_SEEN &&
	    r->placed < PARK_RUN_MAX) {
		if (ibvd_eng_ud_unpark(eng, t, p) == PARK_GONE) {
			r->placed++;
			return true;
		}
		r->busy[r->nbusy++] = queue;
	}
	/* tried or not (a busy queue, a full run), its time may be up */
	if (r->now > p->since && r->now - p->since >= PARK_HOLD_NS) {
		expire(eng, t, p, r);
		return true;
	}
	return false;
}

unsigned int ibvd_eng_park_run(struct ibvd_engine *eng)
{
	struct eng_park *park = &eng->park;
	struct park_run r = { .now = ibvd_eng_now() };
	unsigned int i, kept = 0, gone;

	if (!park->n || r.now < park->retry_at)
		return 0;
	for (i = 0; i < park->n; i++) {
		struct eng_parked *p = park->q[i];

		if (try_one(eng, p, &r)) {
			park->bytes -= p->len;
			free(p);
		} else {
			park->keys[kept] = park->keys[i];
			park->q[kept++] = p;
		}
	}
	gone = park->n - kept;
	park->n = kept;
	schedule(park, &r);
	return gone;
}

uint64_t ibvd_eng_park_next(const struct ibvd_engine *eng)
{
	return eng->park.n ? eng->park.retry_at : 0;
}

void ibvd_eng_park_free(struct eng_park *park)
{
	unsigned int i;

	for (i = 0; i < park->n; i++)
		free(park->q[i]);
	free(park->q);
	free(park->keys);
	park->q = NULL;
	park->keys = NULL;
	park->n = 0;
	park->bytes = 0;
}
