/*
 * Per-connection, generation-checked handle tables (see handle.h).
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "handle.h"

#define NO_SLOT		UINT32_MAX
#define FIRST_SLOTS	16u
/* A slot whose generation ran out: never handed out again. */
#define GEN_RETIRED	0

static uint32_t handle_make(uint32_t index, uint16_t gen)
{
	return (uint32_t)gen << IBVD_HANDLE_INDEX_BITS | index;
}

void ibvd_handle_table_init(struct ibvd_handle_table *t, uint32_t max_entries)
{
	memset(t, 0, sizeof(*t));
	if (max_entries == 0 || max_entries > IBVD_HANDLE_MAX_SLOTS)
		max_entries = IBVD_HANDLE_MAX_SLOTS;
	t->max_slots = max_entries;
	t->free_head = NO_SLOT;
}

void ibvd_handle_table_release(struct ibvd_handle_table *t)
{
	uint32_t max_slots = t->max_slots, n;
	int kind;

	/* objects the caller leaked still must not stay charged */
	for (kind = IBVD_OBJ_ANY + 1; t->charge && kind < IBVD_OBJ_KIND_MAX; kind++)
		for (n = t->count[kind]; n; n--)
			t->charge(t->charge_owner, (enum ibvd_obj_kind)kind, -1);
	free(t->slots);
	ibvd_handle_table_init(t, max_slots);
}

/* Add slots (doubling, up to max_slots) and put them on the free list. */
static int table_grow(struct ibvd_handle_table *t)
{
	struct ibvd_handle_slot *slots;
	uint32_t want, i;

	if (t->nslots >= t->max_slots)
		return -ENOSPC;
	want = t->nslots ? t->nslots * 2 : FIRST_SLOTS;
	if (want > t->max_slots || want < t->nslots)
		want = t->max_slots;
	slots = realloc(t->slots, (size_t)want * sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	/* Push in reverse so the lowest new index is handed out first. */
	for (i = want; i-- > t->nslots;) {
		slots[i].obj = NULL;
		slots[i].gen = 1;
		slots[i].kind = IBVD_OBJ_ANY;
		slots[i].next_free = t->free_head;
		t->free_head = i;
	}
	t->slots = slots;
	t->nslots = want;
	return 0;
}

int ibvd_handle_alloc(struct ibvd_handle_table *t, enum ibvd_obj_kind kind,
		      void *obj, uint32_t *ret_handle)
{
	struct ibvd_handle_slot *slot;
	uint32_t index;
	int ret;

	if (!obj || kind <= IBVD_OBJ_ANY || kind >= IBVD_OBJ_KIND_MAX)
		return -EINVAL;
	if (t->free_head == NO_SLOT) {
		ret = table_grow(t);
		if (ret < 0)
			return ret;
	}
	/* last, so that a refusal leaves nothing to undo */
	if (t->charge) {
		ret = t->charge(t->charge_owner, kind, 1);
		if (ret < 0)
			return ret;
	}
	index = t->free_head;
	slot = &t->slots[index];
	t->free_head = slot->next_free;
	slot->obj = obj;
	slot->kind = kind;
	slot->next_free = NO_SLOT;
	t->nused++;
	t->count[kind]++;
	*ret_handle = handle_make(index, slot->gen);
	return 0;
}

/* The live slot named by handle with that kind, or NULL. */
static struct ibvd_handle_slot *slot_find(const struct ibvd_handle_table *t,
					  uint32_t handle,
					  enum ibvd_obj_kind kind)
{
	uint32_t index = handle & IBVD_HANDLE_INDEX_MASK;
	uint32_t gen = handle >> IBVD_HANDLE_INDEX_BITS;
	struct ibvd_handle_slot *slot;

	if (gen == GEN_RETIRED || index >= t->nslots)
		return NULL;
	slot = &t->slots[index];
	if (!slot->obj || slot->gen != gen || slot->kind != kind)
		return NULL;
	return slot;
}

void *ibvd_handle_lookup(const struct ibvd_handle_table *t, uint32_t handle,
			 enum ibvd_obj_kind kind)
{
	struct ibvd_handle_slot *slot = slot_find(t, handle, kind);

	return slot ? slot->obj : NULL;
}

void *ibvd_handle_remove(struct ibvd_handle_table *t, uint32_t handle,
			 enum ibvd_obj_kind kind)
{
	struct ibvd_handle_slot *slot = slot_find(t, handle, kind);
	void *obj;

	if (!slot)
		return NULL;
	obj = slot->obj;
	slot->obj = NULL;
	slot->kind = IBVD_OBJ_ANY;
	t->nused--;
	t->count[kind]--;
	if (t->charge)
		t->charge(t->charge_owner, kind, -1);
	if (slot->gen == IBVD_HANDLE_GEN_MAX) {
		slot->gen = GEN_RETIRED;
		return obj;
	}
	slot->gen++;
	slot->next_free = t->free_head;
	t->free_head = (uint32_t)(slot - t->slots);
	return obj;
}

int ibvd_handle_foreach(struct ibvd_handle_table *t, enum ibvd_obj_kind kind,
			ibvd_handle_fn fn, void *arg)
{
	/*
	 * At most as many as live now: a walk for a kind the table holds
	 * few of (MWs, on every QP's destroy) stops early.
	 */
	uint32_t i, left = ibvd_handle_count(t, kind);
	int ret;

	/* Index-based so that fn may remove entries while we walk. */
	for (i = 0; i < t->nslots && left; i++) {
		struct ibvd_handle_slot *slot = &t->slots[i];

		if (!slot->obj)
			continue;
		if (kind != IBVD_OBJ_ANY && slot->kind != kind)
			continue;
		left--;
		ret = fn(handle_make(i, slot->gen), slot->kind, slot->obj, arg);
		if (ret)
			return ret;
	}
	return 0;
}

uint32_t ibvd_handle_count(const struct ibvd_handle_table *t,
			   enum ibvd_obj_kind kind)
{
	if (kind == IBVD_OBJ_ANY)
		return t->nused;
	if (kind >= IBVD_OBJ_KIND_MAX)
		return 0;
	return t->count[kind];
}
