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
 * changed in its passes or under the objects lock held for writing.  It
 * names receivers by QP number, looked up at each try, so it holds
 * nothing a destroy must clean.  Datagrams to one receiver keep their
 * order: once one waits, the ones after it wait behind it (recv.c), and
 * a try stops at a receiver's first busy claim.  It is bounded per
 * receive queue, per thread and in bytes; past a bound a datagram waits
 * in its sender's SQ as before, and one parked longer than
 * PARK_HOLD_NS is dropped, as a receiver that stopped for that long
 * loses them.
 */
#include <config.h>

#include <stdlib.h>

#include "internal.h"

/* Parked per thread, per receiving QP, and their bytes per thread. */
#define PARK_MAX		1024u
#define PARK_PER_QP		256u
#define PARK_BYTES		(4u << 20)
/* The longest a datagram waits for its receiver's claim. */
#define PARK_HOLD_NS		500000000ull
/* Tries: 20 us apart, doubling while none places anything, up to 1.3 ms. */
#define PARK_RETRY_NS		20000ull
#define PARK_RETRY_SHIFT_MAX	6u
/* Receivers found busy in one try; past it, every later datagram waits. */
#define PARK_BUSY_SEEN		32u

unsigned int ibvd_eng_park_holds(const struct ibvd_engine *eng, uint32_t qpn)
{
	const struct eng_park *park = &eng->park;
	unsigned int i, n = 0;

	for (i = 0; i < park->n; i++)
		n += park->q[i]->target_qpn == qpn;
	return n;
}

bool ibvd_eng_park_room(struct ibvd_engine *eng, uint32_t qpn, uint32_t len)
{
	struct eng_park *park = &eng->park;

	if (!park->q) {
		park->q = calloc(PARK_MAX, sizeof(*park->q));
		if (!park->q)
			return false;
	}
	return park->n < PARK_MAX && park->bytes + len <= PARK_BYTES &&
	       ibvd_eng_park_holds(eng, qpn) < PARK_PER_QP;
}

void ibvd_eng_park_push(struct ibvd_engine *eng, struct eng_parked *p)
{
	struct eng_park *park = &eng->park;

	/* something new to try: soon */
	if (!park->n || park->retry_at > eng->now + PARK_RETRY_NS)
		park->retry_at = eng->now + PARK_RETRY_NS;
	park->idle_tries = 0;
	park->q[park->n++] = p;
	park->bytes += p->len;
	eng_count(&eng->ud_parked, 1);
}

static bool seen(const uint32_t *qpns, unsigned int n, uint32_t qpn)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		if (qpns[i] == qpn)
			return true;
	return false;
}

/* The next try: soon after one that placed something, later and later if not. */
static void schedule(struct eng_park *park, uint64_t now, bool placed)
{
	unsigned int shift;

	if (placed)
		park->idle_tries = 0;
	else if (park->idle_tries < PARK_RETRY_SHIFT_MAX)
		park->idle_tries++;
	shift = park->idle_tries;
	park->retry_at = now + (PARK_RETRY_NS << shift);
}

/*
 * One datagram's try.  busy: the receivers found busy (or expired) in
 * this try so far, whose later datagrams wait behind their first.
 * Returns true if it leaves the park.
 */
static bool try_one(struct ibvd_engine *eng, const struct eng_parked *p,
		    uint32_t *busy, unsigned int *nbusy, uint32_t *expired,
		    unsigned int *nexpired)
{
	if (seen(expired, *nexpired, p->target_qpn))
		return true;
	if (seen(busy, *nbusy, p->target_qpn) || *nbusy == PARK_BUSY_SEEN)
		return false;
	if (ibvd_eng_ud_unpark(eng, p) == PARK_GONE)
		return true;
	if (eng->now - p->since >= PARK_HOLD_NS) {
		/* it and every later one to that queue go */
		ibvd_eng_ud_park_expired(eng, p);
		if (*nexpired < PARK_BUSY_SEEN)
			expired[(*nexpired)++] = p->target_qpn;
		return true;
	}
	busy[(*nbusy)++] = p->target_qpn;
	return false;
}

unsigned int ibvd_eng_park_run(struct ibvd_engine *eng)
{
	struct eng_park *park = &eng->park;
	uint32_t busy[PARK_BUSY_SEEN], expired[PARK_BUSY_SEEN];
	unsigned int i, kept = 0, nbusy = 0, nexpired = 0;

	if (!park->n || eng->now < park->retry_at)
		return 0;
	for (i = 0; i < park->n; i++) {
		struct eng_parked *p = park->q[i];

		if (try_one(eng, p, busy, &nbusy, expired, &nexpired)) {
			park->bytes -= p->len;
			free(p);
		} else {
			park->q[kept++] = p;
		}
	}
	i = park->n - kept;
	park->n = kept;
	schedule(park, eng->now, i > 0);
	return i;
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
	park->q = NULL;
	park->n = 0;
	park->bytes = 0;
}
