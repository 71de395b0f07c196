/*
 * Deadlines of QPs waiting to retry the WQE in front of their send queue
 * (RNR NAK, a transport retry, the tenant's bandwidth): a binary min-heap
 * per engine thread, with at most one timer per QP.
 *
 * A QP's timer is updated in place when it waits again, so the heap never
 * holds more entries than the thread has QPs, however often they wait; the
 * QP remembers its slot (timer_slot) for that.  The heap points at its QPs,
 * so a QP leaves it before it is freed (ibvd_engine_qp_destroy) and a
 * context's QPs leave it when the context is detached from the thread
 * (attach.c).  A timer may outlive the wait it was set for (the QP was
 * flushed or reset meanwhile): when it fires the QP is simply not waiting,
 * which costs one look.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>

#include "internal.h"

/* Put e at slot i and tell its QP. */
static void place(struct eng_timer *h, unsigned int i, struct eng_timer e)
{
	h[i] = e;
	e.qp->timer_slot = i + 1;
}

static void sift_up(struct eng_timer *h, unsigned int i)
{
	struct eng_timer e = h[i];

	while (i > 0) {
		unsigned int parent = (i - 1) / 2;

		if (h[parent].deadline <= e.deadline)
			break;
		place(h, i, h[parent]);
		i = parent;
	}
	place(h, i, e);
}

static void sift_down(struct eng_timer *h, unsigned int n, unsigned int i)
{
	struct eng_timer e = h[i];

	for (;;) {
		unsigned int l = 2 * i + 1, r = l + 1, m = l;

		if (l >= n)
			break;
		if (r < n && h[r].deadline < h[l].deadline)
			m = r;
		if (e.deadline <= h[m].deadline)
			break;
		place(h, i, h[m]);
		i = m;
	}
	place(h, i, e);
}

/* Slot i's deadline changed: restore the heap order around it. */
static void fix(struct eng_timers *t, unsigned int i)
{
	if (i > 0 && t->heap[(i - 1) / 2].deadline > t->heap[i].deadline)
		sift_up(t->heap, i);
	else
		sift_down(t->heap, t->n, i);
}

static int grow(struct eng_timers *t)
{
	unsigned int cap = t->cap ? 2 * t->cap : 64;
	struct eng_timer *h = realloc(t->heap, cap * sizeof(*h));

	if (!h)
		return -ENOMEM;
	t->heap = h;
	t->cap = cap;
	return 0;
}

int ibvd_eng_timer_set(struct eng_timers *t, struct ibvd_qp *qp,
		       uint64_t deadline)
{
	unsigned int i;

	if (qp->timer_slot) {
		i = qp->timer_slot - 1;
		t->heap[i].deadline = deadline;
		fix(t, i);
		return 0;
	}
	if (t->n == t->cap && grow(t) < 0)
		return -ENOMEM;
	i = t->n++;
	place(t->heap, i, (struct eng_timer){ .deadline = deadline, .qp = qp });
	sift_up(t->heap, i);
	return 0;
}

/* Take slot i out of the heap. */
static void remove_at(struct eng_timers *t, unsigned int i)
{
	t->heap[i].qp->timer_slot = 0;
	if (i == --t->n)
		return;
	place(t->heap, i, t->heap[t->n]);
	fix(t, i);
}

void ibvd_eng_timer_cancel(struct eng_timers *t, struct ibvd_qp *qp)
{
	if (qp->timer_slot)
		remove_at(t, qp->timer_slot - 1);
}

uint64_t ibvd_eng_timer_next(const struct eng_timers *t)
{
	return t->n ? t->heap[0].deadline : 0;
}

struct ibvd_qp *ibvd_eng_timer_pop(struct eng_timers *t, uint64_t now)
{
	struct ibvd_qp *qp;

	if (!t->n || t->heap[0].deadline > now)
		return NULL;
	qp = t->heap[0].qp;
	remove_at(t, 0);
	return qp;
}

void ibvd_eng_timer_free(struct eng_timers *t)
{
	free(t->heap);
	t->heap = NULL;
	t->n = t->cap = 0;
}
