/*
 * Per-connection handle tables.
 *
 * Every object a client creates (PD, MR, CQ, QP, ...) is named on the wire by
 * a 32-bit handle that is only meaningful inside the connection that made
 * it.  A handle packs a slot index and the slot's generation:
 *
 *	bits 31..20  generation (1..4095, never 0)
 *	bits 19..0   slot index
 *
 * Freeing a slot bumps its generation, so a stale handle (kept after
 * destroy) or a forged one never resolves to the object now in that slot.
 * A slot whose generation would wrap is retired instead of reused, so no
 * handle value ever names two different objects in the lifetime of a table.
 * Handle 0 is never valid.  Lookups name the kind they expect: a QP handle
 * passed where a CQ is expected is simply not found.
 */
#ifndef IBVD_HANDLE_H
#define IBVD_HANDLE_H

#include <stdint.h>

#define IBVD_HANDLE_INDEX_BITS	20
#define IBVD_HANDLE_INDEX_MASK	((1u << IBVD_HANDLE_INDEX_BITS) - 1)
#define IBVD_HANDLE_GEN_MAX	((1u << (32 - IBVD_HANDLE_INDEX_BITS)) - 1)
/* The most slots one table can ever address. */
#define IBVD_HANDLE_MAX_SLOTS	(IBVD_HANDLE_INDEX_MASK + 1)

/* Object kinds.  IBVD_OBJ_ANY matches every kind in foreach/count only. */
enum ibvd_obj_kind {
	IBVD_OBJ_ANY = 0,
	IBVD_OBJ_PD,
	IBVD_OBJ_MR,
	IBVD_OBJ_MW,
	IBVD_OBJ_CQ,
	IBVD_OBJ_COMP_CHANNEL,
	IBVD_OBJ_QP,
	IBVD_OBJ_SRQ,
	IBVD_OBJ_AH,
	IBVD_OBJ_XRCD,
	IBVD_OBJ_CM_ID,
	IBVD_OBJ_DM,
	IBVD_OBJ_KIND_MAX,
};

struct ibvd_handle_slot {
	void *obj;		/* NULL while the slot is free */
	uint32_t next_free;	/* free-list link, valid while obj == NULL */
	uint16_t gen;		/* generation of the live (or next) handle */
	uint8_t kind;
};

struct ibvd_handle_table {
	struct ibvd_handle_slot *slots;
	uint32_t nslots;	/* slots allocated so far (used or free) */
	uint32_t max_slots;	/* the table never grows beyond this */
	uint32_t nused;
	uint32_t free_head;	/* index of first free slot, or NO_SLOT */
	uint32_t count[IBVD_OBJ_KIND_MAX];	/* live objects per kind */
	/*
	 * Optional quota hook (tenant.h), set after init: asked with +1
	 * before an object is stored, and may refuse with a negative errno
	 * (nothing is stored then); told -1 when one is removed.  Every
	 * object passes through here, so usage cannot drift.
	 */
	int (*charge)(void *owner, enum ibvd_obj_kind kind, int delta);
	void *charge_owner;
};

/*
 * Prepare an empty table that may hold up to max_entries objects
 * (0 or anything above IBVD_HANDLE_MAX_SLOTS means IBVD_HANDLE_MAX_SLOTS).
 * Allocates nothing until the first ibvd_handle_alloc().
 */
void ibvd_handle_table_init(struct ibvd_handle_table *t, uint32_t max_entries);

/*
 * Free the table's storage.  The objects it still points to are the
 * caller's: destroy them first (ibvd_handle_foreach + ibvd_handle_remove).
 * The table is left empty and may be used again.
 */
void ibvd_handle_table_release(struct ibvd_handle_table *t);

/*
 * Store obj (non-NULL) as an object of the given kind.  On success writes the
 * new handle to *ret_handle and returns 0; otherwise returns -EINVAL (bad
 * kind or NULL obj), -ENOMEM, -ENOSPC when the table is full, or the
 * charge hook's refusal.
 */
int ibvd_handle_alloc(struct ibvd_handle_table *t, enum ibvd_obj_kind kind,
		      void *obj, uint32_t *ret_handle);

/* The object named by handle if it is live and of that kind, else NULL. */
void *ibvd_handle_lookup(const struct ibvd_handle_table *t, uint32_t handle,
			 enum ibvd_obj_kind kind);

/*
 * Forget handle (which must be live and of that kind) and return its
 * object, or NULL if there is no such handle.  The handle is dead from now
 * on, even if its slot is reused.
 */
void *ibvd_handle_remove(struct ibvd_handle_table *t, uint32_t handle,
			 enum ibvd_obj_kind kind);

/*
 * Call fn for every live object of the given kind (IBVD_OBJ_ANY: all), in
 * slot order.  fn may remove the handle it is given (or any other); it must
 * not allocate.  A non-zero return from fn stops the walk and is returned.
 */
typedef int (*ibvd_handle_fn)(uint32_t handle, enum ibvd_obj_kind kind,
			      void *obj, void *arg);
int ibvd_handle_foreach(struct ibvd_handle_table *t, enum ibvd_obj_kind kind,
			ibvd_handle_fn fn, void *arg);

/* Number of live objects of that kind (IBVD_OBJ_ANY: all). */
uint32_t ibvd_handle_count(const struct ibvd_handle_table *t,
			   enum ibvd_obj_kind kind);

#endif /* IBVD_HANDLE_H */
