/*
 * Per-tenant bandwidth: a token bucket shared by every engine thread that
 * serves one of the tenant's contexts.
 *
 * The control thread owns the object through the tenant (tenant.c makes it
 * with the tenant, sets its rate whenever the tenant's limits change, and
 * drops it with the tenant); each engine context attached to the tenant
 * holds a reference of its own, so an engine thread never sees it freed.
 * The rate is read by engine threads without the control thread's help:
 * ibvd_eng_rate_set() is an atomic store.
 *
 * The bucket is one atomic word, a "theoretical arrival time" (the
 * generic cell rate algorithm, an exact token bucket): sending b bytes
 * pushes it b / rate later; a sender may go if that leaves it at most the
 * burst ahead of now.  The burst is 10 ms worth of bytes or one chunk,
 * whichever is more, so a limit never splits a chunk, and a tenant idle
 * for a while may send that much at once, and no more.  A new bucket, and
 * one whose limit changed, starts empty: a tenant that comes back with a
 * new bucket (a new session) or a new limit gets no burst for it, only
 * the rate.  Engine threads take from it with a compare-and-swap: no
 * lock, no control thread.
 */
#ifndef IBVD_ENGINE_RATE_H
#define IBVD_ENGINE_RATE_H

#include <stdint.h>

#define IBVD_RATE_UNLIMITED	UINT64_MAX

struct ibvd_eng_rate;

/* A bucket with no limit (IBVD_RATE_UNLIMITED); NULL: out of memory. */
struct ibvd_eng_rate *ibvd_eng_rate_new(void);

/* Bytes per second from now on; IBVD_RATE_UNLIMITED lifts the limit. */
void ibvd_eng_rate_set(struct ibvd_eng_rate *r, uint64_t bytes_per_sec);
uint64_t ibvd_eng_rate_get_limit(const struct ibvd_eng_rate *r);

/*
 * Engine side: may bytes (at most one chunk) be sent at now (CLOCK_MONOTONIC
 * ns, or any clock that never goes back)?  0: yes, and they are charged;
 * else the ns until they could go at the present rate (the caller may ask
 * again sooner: a limit may be lifted meanwhile).  An unlimited bucket
 * costs one relaxed load.  chunk is the engine's chunk size (the burst's
 * floor).
 */
uint64_t ibvd_eng_rate_take(struct ibvd_eng_rate *r, uint64_t bytes,
			    uint64_t now, uint64_t chunk);

/*
 * Engine side: bytes already sent without a take (the copies a multicast
 * send made beyond the one it took for), charged as debt: the tenant's
 * next take waits until they are paid for.
 */
void ibvd_eng_rate_charge(struct ibvd_eng_rate *r, uint64_t bytes,
			  uint64_t now);

/*
 * The bytes taken and charged so far while a limit was set: what the
 * limit has seen of the tenant's traffic (an unlimited bucket counts
 * nothing, to stay one load).
 */
uint64_t ibvd_eng_rate_paid(const struct ibvd_eng_rate *r);

/* References: any thread. */
struct ibvd_eng_rate *ibvd_eng_rate_ref(struct ibvd_eng_rate *r);
void ibvd_eng_rate_put(struct ibvd_eng_rate *r);

#endif /* IBVD_ENGINE_RATE_H */
