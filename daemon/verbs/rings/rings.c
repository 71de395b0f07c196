/*
 * Queue memory: the rings of CQs, QPs and SRQs (layout in common/ring.h),
 * carved from their context's ring arena (arena.h), and each context's
 * budget for them.
 */
#include <config.h>

#include <errno.h>
#include <string.h>

#include "barrier.h"
#include "tenant/tenant.h"
#include "verbs/context.h"
#include "verbs/rings/arena.h"
#include "verbs/verbs.h"

size_t ibvd_ring_charge(uint32_t nslots, uint32_t stride)
{
	size_t slots = ibvd_arena_block((size_t)nslots * stride);

	return slots ? 2 * IBVD_RING_HDR + slots : SIZE_MAX;
}

/* The tenant whose ring bytes ctx's count against (its creator's uid). */
static struct ibvd_tenant *ring_tenant(const struct ibvd_context *ctx)
{
	const struct ibvd_tenant_dev *account = ctx->handles.charge_owner;

	return account ? account->tenant : NULL;
}

int ibvd_ctx_ring_charge(struct ibvd_context *ctx, uint64_t bytes)
{
	struct ibvd_tenant *t = ring_tenant(ctx);

	if (bytes > IBVD_CTX_MAX_RING_BYTES ||
	    ctx->objs.ring_bytes + bytes > IBVD_CTX_MAX_RING_BYTES ||
	    (t && t->ring_bytes + bytes > IBVD_UID_MAX_RING_BYTES))
		return -ENOMEM;
	ctx->objs.ring_bytes += bytes;
	if (t)
		t->ring_bytes += bytes;
	return 0;
}

void ibvd_ctx_ring_uncharge(struct ibvd_context *ctx, uint64_t bytes)
{
	struct ibvd_tenant *t = ring_tenant(ctx);

	ctx->objs.ring_bytes -= bytes;
	if (t)
		t->ring_bytes -= bytes;
}

void ibvd_ctx_ring_recharge(struct ibvd_context *ctx, uint64_t bytes)
{
	struct ibvd_tenant *t = ring_tenant(ctx);

	ctx->objs.ring_bytes += bytes;
	if (t)
		t->ring_bytes += bytes;
}

static void ring_point(struct ibvd_ring *r)
{
	r->engine_page = ibvd_arena_ptr(r->arena, r->engine_off);
	r->client_page = ibvd_arena_ptr(r->arena, r->client_off);
	r->slots = ibvd_arena_ptr(r->arena, r->slots_off);
}

int ibvd_ring_alloc(struct ibvd_context *ctx, struct ibvd_ring *r,
		    uint32_t nslots, uint32_t stride, bool engine_slots)
{
	struct ibvd_arena *a = ctx->objs.arena;
	size_t charge = ibvd_ring_charge(nslots, stride);
	int ret;

	memset(r, 0, sizeof(*r));
	if (!a)
		return -ENODEV;
	if (charge == SIZE_MAX)
		return -ENOMEM;
	ret = ibvd_ctx_ring_charge(ctx, charge);
	if (ret < 0)
		return ret;
	ret = ibvd_arena_alloc(a, IBVD_HALF_ENGINE, IBVD_RING_HDR, &r->engine_off);
	if (ret < 0)
		goto fail;
	ret = ibvd_arena_alloc(a, IBVD_HALF_CLIENT, IBVD_RING_HDR, &r->client_off);
	if (ret < 0)
		goto fail_engine;
	ret = ibvd_arena_alloc(a, engine_slots ? IBVD_HALF_ENGINE : IBVD_HALF_CLIENT,
			       (size_t)nslots * stride, &r->slots_off);
	if (ret < 0)
		goto fail_client;
	r->arena = a;
	r->nslots = nslots;
	r->stride = stride;
	ring_point(r);
	return 0;
fail_client:
	ibvd_arena_free(a, r->client_off, IBVD_RING_HDR);
fail_engine:
	ibvd_arena_free(a, r->engine_off, IBVD_RING_HDR);
fail:
	ibvd_ctx_ring_uncharge(ctx, charge);
	return ret;
}

void ibvd_ring_free(struct ibvd_context *ctx, struct ibvd_ring *r)
{
	struct ibvd_arena *a = r->arena;

	if (!a)
		return;
	ibvd_ctx_ring_uncharge(ctx, ibvd_ring_charge(r->nslots, r->stride));
	ibvd_arena_free(a, r->slots_off, (size_t)r->nslots * r->stride);
	ibvd_arena_free(a, r->client_off, IBVD_RING_HDR);
	ibvd_arena_free(a, r->engine_off, IBVD_RING_HDR);
	memset(r, 0, sizeof(*r));
}

int ibvd_ring_copy(struct ibvd_context *to, const struct ibvd_ring *r,
		   struct ibvd_ring *copy)
{
	bool engine_slots = r->slots_off < IBVD_ARENA_CLIENT;
	int ret;

	memset(copy, 0, sizeof(*copy));
	if (!r->arena)
		return 0;
	ret = ibvd_ring_alloc(to, copy, r->nslots, r->stride, engine_slots);
	if (ret < 0)
		return ret;
	memcpy(copy->engine_page, r->engine_page, IBVD_RING_HDR);
	memcpy(copy->client_page, r->client_page, IBVD_RING_HDR);
	memcpy(copy->slots, r->slots, (size_t)r->nslots * r->stride);
	return 0;
}

void ibvd_ring_slots_copy(const struct ibvd_ring *from,
			  const struct ibvd_ring *to, uint32_t lo, uint32_t hi)
{
	uint32_t c;

	for (c = lo; c != hi; c++)
		memcpy(to->slots + (size_t)(c & (to->nslots - 1)) * to->stride,
		       from->slots + (size_t)(c & (from->nslots - 1)) * from->stride,
		       from->stride);
}

/* Rounds of copying ahead of the lock: new slots may keep coming. */
#define PRECOPY_ROUNDS	4

void ibvd_ring_precopy(const struct ibvd_ring *from, const struct ibvd_ring *to,
		       const uint32_t *tail_word, uint32_t tail,
		       struct ibvd_ring_copied *done)
{
	unsigned int round;

	for (round = 0; round < PRECOPY_ROUNDS; round++) {
		/*
		 * Past what fits, or back behind what was copied (a client
		 * moving its own tail): the caller judges the counters at
		 * rest.  Copying from done->hi round to such a tail would
		 * take up to 2^32 slots.
		 */
		if (tail - done->lo > to->nslots ||
		    tail - done->lo < done->hi - done->lo)
			break;
		ibvd_ring_slots_copy(from, to, done->hi, tail);
		done->hi = tail;
		tail = ibvd_observe(tail_word);
		if (tail - done->hi <= IBVD_RING_PRECOPY_LEFT)
			break;
	}
}

/* The part of a ring's charge its slots make (its headers make the rest). */
static size_t slots_charge(uint32_t nslots, uint32_t stride)
{
	size_t charge = ibvd_ring_charge(nslots, stride);

	return charge == SIZE_MAX ? charge : charge - 2 * IBVD_RING_HDR;
}

int ibvd_ring_new_slots(struct ibvd_context *ctx, const struct ibvd_ring *r,
			uint32_t nslots, struct ibvd_ring *to)
{
	enum ibvd_arena_half h = r->slots_off >= IBVD_ARENA_CLIENT ?
				 IBVD_HALF_CLIENT : IBVD_HALF_ENGINE;
	size_t charge = slots_charge(nslots, r->stride);
	int ret;

	if (charge == SIZE_MAX)
		return -ENOMEM;
	ret = ibvd_ctx_ring_charge(ctx, charge);
	if (ret < 0)
		return ret;
	*to = *r;
	ret = ibvd_arena_alloc(r->arena, h, (size_t)nslots * r->stride,
			       &to->slots_off);
	if (ret < 0) {
		ibvd_ctx_ring_uncharge(ctx, charge);
		return ret;
	}
	to->nslots = nslots;
	ring_point(to);
	return 0;
}

void ibvd_ring_free_slots(struct ibvd_context *ctx, struct ibvd_ring *r)
{
	ibvd_ctx_ring_uncharge(ctx, slots_charge(r->nslots, r->stride));
	ibvd_arena_free(r->arena, r->slots_off, (size_t)r->nslots * r->stride);
	r->slots = NULL;
}

void ibvd_ring_place(const struct ibvd_ring *r, Ibvd__RingPlace *place)
{
	ibvd__ring_place__init(place);
	place->engine = r->engine_off;
	place->client = r->client_off;
	place->slots = r->slots_off;
}

int ibvd_ctx_rings_open(struct ibvd_context *ctx, int *ret_fd)
{
	return ibvd_arena_new(&ctx->objs.arena, ret_fd);
}

void ibvd_ctx_rings_closing(struct ibvd_context *ctx)
{
	ibvd_arena_closing(ctx->objs.arena);
}

void ibvd_ctx_rings_close(struct ibvd_context *ctx)
{
	ibvd_arena_put(ctx->objs.arena);
	ctx->objs.arena = NULL;
}
