/*
 * Tables of objects by a 32-bit number (keyed.c): MRs by key, QPs by
 * number, windows by index, XRC SRQs by number, an XRC target's holds.
 * The object embeds a struct ibvd_keyed and is found by container_of.
 *
 * The tables grow by doubling at two entries per bucket (up to 2^22
 * buckets), so a lookup costs a couple of compares however many objects
 * there are.  Keys that a client or a peer picks must be mixed with a
 * secret first (the caller's business): the bucket is the key's high
 * bits after one multiplication.
 *
 * Layer core/: no locking of its own; the registries hold theirs.
 */
#ifndef IBVD_CORE_KEYED_H
#define IBVD_CORE_KEYED_H

#include <stdint.h>

struct ibvd_keyed {
	struct ibvd_keyed *next;
	struct ibvd_keyed **pprev;	/* what points at this node */
	uint32_t key;
};

struct ibvd_keyed_table {
	struct ibvd_keyed **b;		/* NULL until the first insert */
	unsigned int bits;
	unsigned int min_bits;		/* the first size (0: 10 bits) */
	uint32_t count;
};

/*
 * Add n under key: 0, or -ENOMEM when the table has no buckets yet and
 * none can be had (a table that cannot grow keeps longer chains).
 */
int ibvd_keyed_insert(struct ibvd_keyed_table *t, struct ibvd_keyed *n,
		      uint32_t key);
void ibvd_keyed_remove(struct ibvd_keyed_table *t, struct ibvd_keyed *n);
/* The first node under key, then the next one under the same key. */
struct ibvd_keyed *ibvd_keyed_find(const struct ibvd_keyed_table *t,
				   uint32_t key);
struct ibvd_keyed *ibvd_keyed_next(const struct ibvd_keyed *n);
/* The buckets go; the nodes are the caller's. */
void ibvd_keyed_free(struct ibvd_keyed_table *t);

#endif /* IBVD_CORE_KEYED_H */
