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

/* References: any thread. */
struct ibvd_eng_rate *ibvd_eng_rate_ref(struct ibvd_eng_rate *r);
void ibvd_eng_rate_put(struct ibvd_eng_rate *r);

#endif /* IBVD_ENGINE_RATE_H */
