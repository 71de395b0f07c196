/*
 * Contexts on engine threads: OPEN_DEVICE attaches a context (its page,
 * its kick eventfd) to the thread serving the fewest contexts; teardown
 * detaches it before its objects die, then breaks the RC connections
 * other contexts had into it, then frees the page.
 *
 * Every change to a thread's context set happens under ibvd_objects_lock
 * held for writing, so a pass (which holds it for reading) never sees a
 * context come or go.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "barrier.h"
#include "core/rate.h"
#include "engine.h"
#include "internal.h"

/* Make room for one more context (objects lock held for writing). */
static int grow(struct ibvd_engine *eng)
{
	unsigned int cap = eng->cap ? 2 * eng->cap : 16;
	struct eng_doorbell **dbs;
	struct ibvd_ectx **ectxs;

	if (eng->nctx < eng->cap)
		return 0;
	dbs = realloc(eng->dbs, cap * sizeof(*dbs));
	if (!dbs)
		return -ENOMEM;
	eng->dbs = dbs;
	ectxs = realloc(eng->ectxs, cap * sizeof(*ectxs));
	if (!ectxs)
		return -ENOMEM;
	eng->ectxs = ectxs;
	eng->cap = cap;
	return 0;
}

static int attach(struct ibvd_ectx *ectx, struct ibvd_engine *eng)
{
	int ret;

	ret = ibvd_eng_watch(eng, ectx->db.kick_fd);
	if (ret < 0)
		return ret;
	ibvd_objects_write_lock();
	ret = grow(eng);
	if (ret == 0) {
		ectx->slot = eng->nctx++;
		eng->dbs[ectx->slot] = &ectx->db;
		eng->ectxs[ectx->slot] = ectx;
		ectx->eng = eng;
		/* If the thread sleeps, the client must kick it from the start. */
		ibvd_write_once(&ectx->db.engine_page->sleeping, eng->armed);
	}
	ibvd_objects_write_unlock();
	if (ret < 0)
		ibvd_eng_unwatch(eng, ectx->db.kick_fd);
	return ret;
}

bool ibvd_engine_ctx_paced(const struct ibvd_context *ctx)
{
	const struct ibvd_ectx *ectx = ctx->engine;

	return ectx && ectx->rate &&
	       ibvd_eng_rate_get_limit(ectx->rate) != IBVD_RATE_UNLIMITED;
}

void ibvd_engine_ctx_gids_changed(struct ibvd_context *ctx)
{
	struct ibvd_ectx *ectx = ctx->engine;

	/* Release: the table the library fetches after this is the new one. */
	if (ectx)
		__atomic_add_fetch(&ectx->db.engine_page->gid_gen, 1,
				   __ATOMIC_RELEASE);
}

int ibvd_engine_ctx_open(struct ibvd_context *ctx, struct ibvd_eng_rate *rate,
			 int *page_fd, int *kick_fd)
{
	struct ibvd_engine *eng = ibvd_eng_pick();
	struct ibvd_ectx *ectx;
	int ret;

	if (!eng)
		return -ENODEV;
	ectx = calloc(1, sizeof(*ectx));
	if (!ectx)
		return -ENOMEM;
	ectx->ctx = ctx;
	/* Its tenant's bandwidth bucket, shared with the tenant's others. */
	if (rate)
		ectx->rate = ibvd_eng_rate_ref(rate);
	ret = ibvd_eng_db_create(&ectx->db, page_fd);
	if (ret < 0)
		goto fail;
	ret = attach(ectx, eng);
	if (ret < 0) {
		close(*page_fd);
		ibvd_eng_db_destroy(&ectx->db);
		goto fail;
	}
	ctx->engine = ectx;
	*kick_fd = ectx->db.kick_fd;
	return 0;
fail:
	ibvd_eng_rate_put(ectx->rate);
	free(ectx);
	return ret;
}

/*
 * Remember the RC peers (in other contexts) of ctx's QPs, so that they can
 * be told after the QPs are gone (ibvd_engine_ctx_free).
 */
static int note_orphan(uint32_t handle, enum ibvd_obj_kind kind, void *obj,
		       void *arg)
{
	struct ibvd_ectx *ectx = arg;
	struct ibvd_qp *qp = obj, *peer;
	struct eng_orphan *o;

	if (qp->qp_type != IBV_QPT_RC)
		return 0;
	peer = ibvd_eng_transport(qp)->peer(qp);
	if (!peer || peer->ctx == qp->ctx)
		return 0;
	o = realloc(ectx->orphans, (ectx->norphans + 1) * sizeof(*o));
	if (!o)
		return 0;	/* that peer will learn on its next send */
	ectx->orphans = o;
	o[ectx->norphans].survivor = peer->qp_num;
	o[ectx->norphans].dead = qp->qp_num;
	ectx->norphans++;
	return 0;
}

/*
 * The dead QPs are destroyed: break the connections of their peers, which
 * would otherwise wait forever for messages that cannot come (an RC peer
 * with a send outstanding would time out; one only waiting to receive
 * would not).
 */
static void break_orphans(struct ibvd_ectx *ectx)
{
	unsigned int i;

	ibvd_objects_write_lock();
	for (i = 0; i < ectx->norphans; i++) {
		struct ibvd_qp *s = ibvd_qp_by_num(ectx->orphans[i].survivor);

		if (!s || s->qp_type != IBV_QPT_RC ||
		    s->attr.dest_qp_num != ectx->orphans[i].dead ||
		    ibvd_qp_by_num(ectx->orphans[i].dead))
			continue;
		s->peer_gone = true;
		ibvd_eng_qp_ring(s);
	}
	ibvd_objects_write_unlock();
	free(ectx->orphans);
	ectx->orphans = NULL;
	ectx->norphans = 0;
}

/*
 * The thread's timer heap points at QPs: none of ours may stay in it.
 * Only those the context owns: an XRC target it opened waits, if at all,
 * in its owner's thread's heap.
 */
static int drop_timer(uint32_t handle, enum ibvd_obj_kind kind, void *obj,
		      void *arg)
{
	struct ibvd_ectx *ectx = arg;
	struct ibvd_qp *qp = obj;

	if (qp->ctx->engine == ectx)
		ibvd_eng_timer_cancel(&ectx->eng->timers, qp);
	return 0;
}

struct finish_list {
	struct ibvd_finishing *qps;
	size_t n, cap;
};

static int note_finishing(uint32_t handle, enum ibvd_obj_kind kind,
			  void *obj, void *arg)
{
	struct finish_list *l = arg;
	struct ibvd_finishing f;

	if (!ibvd_eng_finish_begin(obj, &f))
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		struct ibvd_finishing *grown = realloc(l->qps,
						       cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		l->qps = grown;
		l->cap = cap;
	}
	l->qps[l->n++] = f;
	return 0;
}

/* A front WQE whose first turn moves a chunk and finishes nothing. */
static bool front_long(const struct ibvd_finishing *f)
{
	return f->front > ibvd_eng_turn_bytes;
}

/*
 * Those whose first turn finishes a WQE first, then the shorter send
 * queues, then the shorter front WQEs; then by handle, for the same
 * order each time.  A long front finishes no WQE in the first round
 * wherever it comes, and a first round that spends the budget leaves
 * no second one.
 */
static int by_queued(const void *a, const void *b)
{
	const struct ibvd_finishing *x = a, *y = b;

	if (front_long(x) != front_long(y))
		return front_long(x) ? 1 : -1;
	if (x->queued != y->queued)
		return x->queued < y->queued ? -1 : 1;
	if (x->front != y->front)
		return x->front < y->front ? -1 : 1;
	return x->qp->handle < y->qp->handle ? -1 : x->qp->handle > y->qp->handle;
}

/*
 * A turn for each QP in order, then again for those that go on, as an
 * engine pass does, until the budget is spent: a QP's small last
 * message, sent or to be received, is not left behind all of the long
 * ones of the QPs before it.
 */
static void finish_round_robin(struct finish_list *l,
			       struct ibvd_finish_budget *budget)
{
	size_t i, kept;

	/*
	 * The shortest queues first, those with a long WQE in front after
	 * all others: a first round of long WQEs (a chunk each) spends the
	 * budget by about 128 such QPs, and a last send alone in its queue,
	 * as a process's final message usually is, would then be left
	 * behind theirs, also when each of them holds a single WQE.
	 */
	if (l->n > 1)
		qsort(l->qps, l->n, sizeof(*l->qps), by_queued);
	while (l->n && budget->turns && budget->bytes) {
		for (i = 0, kept = 0; i < l->n; i++)
			if (ibvd_eng_finish_turn(&l->qps[i], budget))
				l->qps[kept++] = l->qps[i];
		l->n = kept;
	}
}

/*
 * A process that ends right after its last send (a byte, then exit(2)
 * with the socket open, as TCP's peer reads it and then its FIN) rang
 * for it, and a NIC would have put it on the wire; the engine thread
 * may not have come to it yet, and none will once the context is
 * detached.  So its QPs run what they can now, as a DESTROY_QP does,
 * and take what their direct peers' rings hold for their posted
 * receives, but within one budget for them all (ENG_CTX_FINISH_*), not
 * one each: every tenant waits meanwhile, and a context's thousands of
 * QPs with full SQs, or its 256 direct QPs with full rings towards them
 * (a MiB each), would otherwise hold them for gigabytes or 256 MiB.
 * What is left over goes with the QPs, as a destroy's leftovers do: no
 * pass runs them, and the peers' SENDs still in the rings fail as sent
 * to a QP that went (RETRY_EXC_ERR, then flushed).
 */
void ibvd_engine_ctx_finish_sends(struct ibvd_context *ctx)
{
	struct ibvd_finish_budget budget = {
		.turns = ENG_CTX_FINISH_TURNS,
		.bytes = ENG_CTX_FINISH_BYTES,
	};
	struct finish_list l = { 0 };

	if (!ctx->engine || !ctx->engine->eng)
		return;
	ibvd_objects_write_lock();
	/*
	 * Its thread runs none of its QPs from now on (engine.c, take_turn):
	 * what the budget left, which a turn here rings for, would otherwise
	 * run there until the detach, beyond any budget.
	 */
	ctx->engine->going = true;
	/* no pass runs meanwhile: the teardown has a pass's claim allowance */
	ctx->engine->eng->claim_wait_left = ENG_CLAIM_WAIT_NS;
	/* short of memory: those noted so far */
	ibvd_handle_foreach(&ctx->handles, IBVD_OBJ_QP, note_finishing, &l);
	finish_round_robin(&l, &budget);
	ibvd_objects_write_unlock();
	free(l.qps);
}

void ibvd_engine_ctx_detach(struct ibvd_context *ctx)
{
	struct ibvd_ectx *ectx = ctx->engine;
	struct ibvd_engine *eng;

	if (!ectx || !ectx->eng)
		return;
	eng = ectx->eng;
	ibvd_objects_write_lock();
	ibvd_handle_foreach(&ctx->handles, IBVD_OBJ_QP, note_orphan, ectx);
	ibvd_handle_foreach(&ctx->handles, IBVD_OBJ_QP, drop_timer, ectx);
	/* Move the last context into the freed slot. */
	eng->nctx--;
	if (ectx->slot != eng->nctx) {
		eng->dbs[ectx->slot] = eng->dbs[eng->nctx];
		eng->ectxs[ectx->slot] = eng->ectxs[eng->nctx];
		eng->ectxs[ectx->slot]->slot = ectx->slot;
	}
	ectx->eng = NULL;
	ibvd_objects_write_unlock();
	ibvd_eng_unwatch(eng, ectx->db.kick_fd);
}

void ibvd_engine_ctx_free(struct ibvd_context *ctx)
{
	struct ibvd_ectx *ectx = ctx->engine;

	if (!ectx)
		return;
	ibvd_engine_ctx_detach(ctx);
	break_orphans(ectx);
	ibvd_eng_counters_retire(ectx);
	ibvd_eng_db_destroy(&ectx->db);
	ibvd_eng_rate_put(ectx->rate);
	free(ectx);
	ctx->engine = NULL;
}
