/*
 * Turns on the control thread (turns.h).
 *
 * libevent runs the read callbacks of every readable session in each pass
 * of the loop, and handling a frame in its callback gave each session a
 * turn: a uid with thirty busy sessions had thirty turns for another
 * uid's one.  The callbacks now only queue sessions by uid; the turns are
 * handed out here, after the pass.  A session not served keeps its
 * socket readable (the events are level-triggered), so it costs a
 * callback in the next pass but no syscall; and a uid alone pays nothing
 * at all for the queue.
 *
 * Each uid also keeps, in its counters, the most turns other uids had
 * while one of its sessions had a frame waiting (turns_waited_max): a
 * uid's flood shows there in the other uids' rows.
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/queue.h>

#include "session.h"
#include "turns.h"
#include "util.h"

/*
 * How long a uid alone on the daemon goes on being served in one round:
 * then the loop looks again, and accepts whoever connected meanwhile.
 * Draining all its ready sessions in one go would have a newcomer of
 * another uid wait for thirty listings of a uid's thirty loops (a
 * second); 1 ms of cheap requests is dozens of them for one pass.
 */
#define ALONE_ROUND_NS	1000000u

/* One uid's sessions with a frame waiting, and its place in the rounds. */
struct ibvd_turns {
	struct ibvd_tenant *tenant;	/* whose (one per uid) */
	unsigned int sessions;		/* its sessions: references */
	TAILQ_HEAD(, ibvd_session) ready; /* in the order they became ready */
	int queued;			/* in ready_uids */
	uint64_t round;			/* the last round it had a turn in */
	uint64_t wait_from;		/* turns given when it began to wait */
	TAILQ_ENTRY(ibvd_turns) link;	/* all_uids */
	TAILQ_ENTRY(ibvd_turns) ready_link; /* ready_uids */
};

static TAILQ_HEAD(, ibvd_turns) all_uids = TAILQ_HEAD_INITIALIZER(all_uids);
static TAILQ_HEAD(, ibvd_turns) ready_uids =
	TAILQ_HEAD_INITIALIZER(ready_uids);
static unsigned int nuids;
static uint64_t rounds;
static uint64_t turns_given;	/* all uids', ever */
static uint64_t round_start;	/* turns_given when the last round ended */

int ibvd_turns_join(struct ibvd_session *s)
{
	struct ibvd_turns *t;

	TAILQ_FOREACH(t, &all_uids, link)
		if (t->tenant == s->tenant)
			goto found;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->tenant = s->tenant;
	TAILQ_INIT(&t->ready);
	TAILQ_INSERT_TAIL(&all_uids, t, link);
	nuids++;
found:
	t->sessions++;
	s->turns = t;
	return 0;
}

void ibvd_turns_unready(struct ibvd_session *s)
{
	struct ibvd_turns *t = s->turns;

	if (!s->ready)
		return;
	TAILQ_REMOVE(&t->ready, s, ready_link);
	s->ready = 0;
	if (TAILQ_EMPTY(&t->ready) && t->queued) {
		TAILQ_REMOVE(&ready_uids, t, ready_link);
		t->queued = 0;
	}
}

void ibvd_turns_leave(struct ibvd_session *s)
{
	struct ibvd_turns *t = s->turns;

	if (!t)
		return;
	ibvd_turns_unready(s);
	s->turns = NULL;
	if (--t->sessions)
		return;
	TAILQ_REMOVE(&all_uids, t, link);
	nuids--;
	free(t);
}

void ibvd_turns_ready(struct ibvd_session *s)
{
	struct ibvd_turns *t = s->turns;

	if (s->ready)
		return;
	TAILQ_INSERT_TAIL(&t->ready, s, ready_link);
	s->ready = 1;
	if (!t->queued) {
		TAILQ_INSERT_TAIL(&ready_uids, t, ready_link);
		t->queued = 1;
		/* it waits since the pass that saw its socket readable */
		t->wait_from = round_start;
	}
}

/* t's turn: the most others had while it waited, then its next session. */
static struct ibvd_session *take_turn(struct ibvd_turns *t)
{
	struct ibvd_tenant_counters *c = &t->tenant->counters;
	struct ibvd_session *s = TAILQ_FIRST(&t->ready);
	uint64_t waited = turns_given - t->wait_from;

	if (waited > c->turns_waited_max)
		c->turns_waited_max = waited;
	turns_given++;
	t->wait_from = turns_given;
	ibvd_turns_unready(s);
	/* the rest of its sessions wait behind the others' */
	if (!TAILQ_EMPTY(&t->ready)) {
		TAILQ_REMOVE(&ready_uids, t, ready_link);
		TAILQ_INSERT_TAIL(&ready_uids, t, ready_link);
	}
	return s;
}

/* Has the round had all its turns, now that a uid comes round again? */
static bool round_over(uint64_t start)
{
	/* a uid alone has the round's time: no other uid to share with */
	return nuids > 1 || ibvd_mono_ns() - start >= ALONE_ROUND_NS;
}

void ibvd_turns_serve(void)
{
	uint64_t start = nuids == 1 && !TAILQ_EMPTY(&ready_uids) ?
			 ibvd_mono_ns() : 0;
	struct ibvd_turns *t;

	rounds++;
	/*
	 * Round robin until a uid comes round again.  Serving may close
	 * sessions of any uid, so the list is read afresh for each turn; it
	 * queues none (only read events do), so the round ends.
	 */
	while ((t = TAILQ_FIRST(&ready_uids))) {
		if (t->round == rounds && round_over(start))
			break;
		t->round = rounds;
		ibvd_session_serve(take_turn(t));
	}
	round_start = turns_given;
}
