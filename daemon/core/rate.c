/*
 * Per-tenant token buckets (rate.h): the object, its references and the
 * engine's take.
 */
#include <config.h>

#include <stdatomic.h>
#include <stdlib.h>

#include "rate.h"

#define NS_PER_SEC		1000000000ull
/* Bandwidth limits: the bucket holds at least this much time's bytes. */
#define BURST_NS		(10ull * 1000 * 1000)
/* bytes * NS_PER_SEC fits in 64 bits below this; takes are a chunk. */
#define MAX_TAKE		(1ull << 33)

struct ibvd_eng_rate {
	atomic_uint refs;
	_Atomic uint64_t bytes_per_sec;
	/* when the bytes sent so far are paid for (ns); 0: new, empty */
	_Atomic uint64_t tat;
	/* bytes taken and charged while a limit was set (ibvctl's view) */
	_Atomic uint64_t paid;
};

struct ibvd_eng_rate *ibvd_eng_rate_new(void)
{
	struct ibvd_eng_rate *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	atomic_init(&r->refs, 1);
	atomic_init(&r->bytes_per_sec, IBVD_RATE_UNLIMITED);
	atomic_init(&r->tat, 0);
	return r;
}

void ibvd_eng_rate_set(struct ibvd_eng_rate *r, uint64_t bytes_per_sec)
{
	/* seq_cst: ibvd_eng_rate_charge's store -> load mirrors this */
	uint64_t old = atomic_exchange(&r->bytes_per_sec, bytes_per_sec);

	/* A new limit starts with an empty bucket, not the old one's debt. */
	if (old != bytes_per_sec)
		atomic_store(&r->tat, 0);
}

/* Nanoseconds bytes take at rate (bytes/s, non-zero), rounded up. */
static uint64_t cost_ns(uint64_t bytes, uint64_t rate)
{
	if (bytes > MAX_TAKE)
		bytes = MAX_TAKE;
	return (bytes * NS_PER_SEC + rate - 1) / rate;
}

/*
 * The burst in ns at rate: 10 ms or one chunk, whichever is more, and at
 * least this take, so that a take bigger than a chunk (chunking switched
 * off) may still go once nothing else is owed.
 */
static uint64_t burst_ns(uint64_t chunk, uint64_t rate, uint64_t cost)
{
	uint64_t burst = cost_ns(chunk, rate);

	if (burst < BURST_NS)
		burst = BURST_NS;
	return burst < cost ? cost : burst;
}

uint64_t ibvd_eng_rate_take(struct ibvd_eng_rate *r, uint64_t bytes,
			    uint64_t now, uint64_t chunk)
{
	uint64_t rate = atomic_load_explicit(&r->bytes_per_sec,
					     memory_order_relaxed);
	uint64_t burst, cost, old, base, next, wait;

	if (rate == IBVD_RATE_UNLIMITED)
		return 0;
	if (!rate)
		rate = 1;	/* "0 B/s" would never send: the slowest there is */
	cost = cost_ns(bytes, rate);
	burst = burst_ns(chunk, rate, cost);
	old = atomic_load_explicit(&r->tat, memory_order_relaxed);
	do {
		/* A new bucket is empty: as if a burst had just been sent. */
		base = old ? (old > now ? old : now) : now + burst;
		next = base + cost;
		wait = 0;
		/* Sent ahead of the rate by at most the burst, this take included. */
		if (next - now > burst) {
			wait = next - now - burst;
			next = base;	/* nothing taken; a new bucket starts */
		}
	} while (next != old &&
		 !atomic_compare_exchange_weak_explicit(&r->tat, &old, next,
							memory_order_relaxed,
							memory_order_relaxed));
	if (!wait)
		atomic_fetch_add_explicit(&r->paid, bytes, memory_order_relaxed);
	return wait;
}

void ibvd_eng_rate_charge(struct ibvd_eng_rate *r, uint64_t bytes,
			  uint64_t now)
{
	uint64_t rate = atomic_load_explicit(&r->bytes_per_sec,
					     memory_order_relaxed);
	uint64_t cost, old, base;

	if (rate == IBVD_RATE_UNLIMITED || !bytes)
		return;
	atomic_fetch_add_explicit(&r->paid, bytes, memory_order_relaxed);
	cost = cost_ns(bytes, rate ? rate : 1);
	old = atomic_load_explicit(&r->tat, memory_order_relaxed);
	do {
		/* a new bucket is empty (ibvd_eng_rate_take): owe from its end */
		base = old ? (old > now ? old : now) : now + BURST_NS;
	} while (!atomic_compare_exchange_weak(&r->tat, &old, base + cost));
	/*
	 * A new limit meanwhile starts empty, not with debt priced at the
	 * old rate (ibvd_eng_rate_set cleared the bucket before or after us).
	 */
	if (atomic_load(&r->bytes_per_sec) != rate)
		atomic_store(&r->tat, 0);
}

uint64_t ibvd_eng_rate_get_limit(const struct ibvd_eng_rate *r)
{
	return atomic_load_explicit(&r->bytes_per_sec, memory_order_relaxed);
}

uint64_t ibvd_eng_rate_paid(const struct ibvd_eng_rate *r)
{
	return atomic_load_explicit(&r->paid, memory_order_relaxed);
}

struct ibvd_eng_rate *ibvd_eng_rate_ref(struct ibvd_eng_rate *r)
{
	atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
	return r;
}

void ibvd_eng_rate_put(struct ibvd_eng_rate *r)
{
	if (r && atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) == 1)
		free(r);
}
