/*
 * Per-tenant token buckets (rate.h): the object and its references.
 */
#include <config.h>

#include <stdatomic.h>
#include <stdlib.h>

#include "rate.h"

struct ibvd_eng_rate {
	atomic_uint refs;
	_Atomic uint64_t bytes_per_sec;
};

struct ibvd_eng_rate *ibvd_eng_rate_new(void)
{
	struct ibvd_eng_rate *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	atomic_init(&r->refs, 1);
	atomic_init(&r->bytes_per_sec, IBVD_RATE_UNLIMITED);
	return r;
}

void ibvd_eng_rate_set(struct ibvd_eng_rate *r, uint64_t bytes_per_sec)
{
	atomic_store_explicit(&r->bytes_per_sec, bytes_per_sec,
			      memory_order_relaxed);
}

uint64_t ibvd_eng_rate_get_limit(const struct ibvd_eng_rate *r)
{
	return atomic_load_explicit(&r->bytes_per_sec, memory_order_relaxed);
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
