/*
 * Growable tables of objects by number (keyed.h): chains of intrusive
 * nodes, each linked with a pointer back to what points at it, so that
 * removal needs no search.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>

#include "keyed.h"

#define KEYED_DEFAULT_BITS	10u
#define KEYED_MAX_BITS		22u

static uint32_t bucket_of(uint32_t key, unsigned int bits)
{
	return (key * 0x9E3779B1u) >> (32 - bits);
}

static void link_head(struct ibvd_keyed **head, struct ibvd_keyed *n)
{
	n->next = *head;
	if (n->next)
		n->next->pprev = &n->next;
	n->pprev = head;
	*head = n;
}

/* Twice the buckets once they hold two entries each, if memory allows. */
static int grow(struct ibvd_keyed_table *t)
{
	unsigned int bits = t->b ? t->bits + 1 :
			    (t->min_bits ? t->min_bits : KEYED_DEFAULT_BITS);
	struct ibvd_keyed **b, *n;
	uint32_t i;

	if (t->b && (t->bits >= KEYED_MAX_BITS || t->count < 2u << t->bits))
		return 0;
	b = calloc((size_t)1 << bits, sizeof(*b));
	if (!b)
		return t->b ? 0 : -ENOMEM;
	for (i = 0; t->b && i < 1u << t->bits; i++)
		while ((n = t->b[i])) {
			t->b[i] = n->next;
			link_head(&b[bucket_of(n->key, bits)], n);
		}
	free(t->b);
	t->b = b;
	t->bits = bits;
	return 0;
}

int ibvd_keyed_insert(struct ibvd_keyed_table *t, struct ibvd_keyed *n,
		      uint32_t key)
{
	int ret = grow(t);

	if (ret < 0)
		return ret;
	n->key = key;
	link_head(&t->b[bucket_of(key, t->bits)], n);
	t->count++;
	return 0;
}

void ibvd_keyed_remove(struct ibvd_keyed_table *t, struct ibvd_keyed *n)
{
	*n->pprev = n->next;
	if (n->next)
		n->next->pprev = n->pprev;
	n->next = NULL;
	n->pprev = NULL;
	t->count--;
}

static struct ibvd_keyed *same_key(struct ibvd_keyed *n, uint32_t key)
{
	while (n && n->key != key)
		n = n->next;
	return n;
}

struct ibvd_keyed *ibvd_keyed_find(const struct ibvd_keyed_table *t,
				   uint32_t key)
{
	return t->b ? same_key(t->b[bucket_of(key, t->bits)], key) : NULL;
}

struct ibvd_keyed *ibvd_keyed_next(const struct ibvd_keyed *n)
{
	return same_key(n->next, n->key);
}

void ibvd_keyed_free(struct ibvd_keyed_table *t)
{
	free(t->b);
	t->b = NULL;
	t->bits = 0;
	t->count = 0;
}
