/*
 * Deadlines of QPs waiting to retry the WQE in front of their send queue
 * (RNR NAK, or a transport retry): a binary min-heap per engine thread.
 *
 * A timer names its QP by number, not by pointer, and the QP is looked up
 * again when the timer fires: a QP destroyed while it waited simply is not
 * found, so destruction needs no hook into the engine, and a stale timer
 * (the QP waited again, or was flushed) costs one harmless extra look.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>

#include "internal.h"

static void swap(struct eng_timer *a, struct eng_timer *b)
{
	struct eng_timer t = *a;

	*a = *b;
	*b = t;
}

static void sift_up(struct eng_timer *h, unsigned int i)
{
	while (i > 0) {
		unsigned int parent = (i - 1) / 2;

		if (h[parent].deadline <= h[i].deadline)
			break;
		swap(&h[parent], &h[i]);
		i = parent;
	}
}

static void sift_down(struct eng_timer *h, unsigned int n, unsigned int i)
{
	for (;;) {
		unsigned int l = 2 * i + 1, r = l + 1, m = i;

		if (l < n && h[l].deadline < h[m].deadline)
			m = l;
		if (r < n && h[r].deadline < h[m].deadline)
			m = r;
		if (m == i)
			return;
		swap(&h[m], &h[i]);
		i = m;
	}
}

int ibvd_eng_timer_add(struct eng_timers *t, uint64_t deadline, uint32_t qp_num)
{
	if (t->n == t->cap) {
		unsigned int cap = t->cap ? 2 * t->cap : 64;
		struct eng_timer *h = realloc(t->heap, cap * sizeof(*h));

		if (!h)
			return -ENOMEM;
		t->heap = h;
		t->cap = cap;
	}
	t->heap[t->n].deadline = deadline;
	t->heap[t->n].qp_num = qp_num;
	sift_up(t->heap, t->n++);
	return 0;
}

uint64_t ibvd_eng_timer_next(const struct eng_timers *t)
{
	return t->n ? t->heap[0].deadline : 0;
}

bool ibvd_eng_timer_pop(struct eng_timers *t, uint64_t now, struct eng_timer *out)
{
	if (!t->n || t->heap[0].deadline > now)
		return false;
	*out = t->heap[0];
	t->heap[0] = t->heap[--t->n];
	sift_down(t->heap, t->n, 0);
	return true;
}

void ibvd_eng_timer_free(struct eng_timers *t)
{
	free(t->heap);
	t->heap = NULL;
	t->n = t->cap = 0;
}
