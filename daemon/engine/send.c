/*
 * The requester: one turn of a QP's send queue on its serving thread.
 *
 * WQEs execute one at a time, in order, each to completion (or to an RNR
 * or retry wait) before the next starts, so completions come out in
 * posting order and FENCE holds trivially.  The WQE in front is copied
 * from the ring again on every attempt (and checked again); the slot is
 * released to the client only when the WQE is done, so a wait keeps
 * nothing but two retry counters.
 *
 * A turn ends after ENG_QP_BUDGET_WQES WQEs or ENG_QP_BUDGET_BYTES bytes
 * (one chunk), or after one step of a WQE longer than a chunk (chunk.c);
 * a QP with more work rings its own doorbell, so it gets another turn in
 * the next pass, after every other QP that rang.  That round robin is the
 * engine's fairness: a QP never holds its thread for more than about one
 * chunk's copy while others wait.
 *
 * A tenant with a bandwidth limit (rate.c) pays for each step before it
 * runs; when its bucket is empty the QP yields its turn and waits on the
 * thread's timers, like an RNR wait, while the thread serves the others,
 * and asks the bucket again at least every ENG_RATE_RECHECK_NS.
 */
#include <config.h>

#include <string.h>

#include "barrier.h"
#include "core/rate.h"
#include "engine.h"
#include "internal.h"

/* What became of the WQE in front. */
enum step {
	STEP_DONE,			/* completed (or unsignaled success) */
	STEP_PARTIAL,			/* one chunk of it moved; more to come */
	STEP_WAIT,			/* waiting for an RNR, retry or rate timer */
	STEP_FAILED,			/* completed in error; QP left RTS */
};

#define RNR_RETRY_INFINITE	7

static void complete(struct ibvd_qp *qp, const struct eng_req *req,
		     enum ibv_wc_status status)
{
	struct ibvd_cqe cqe;

	if (status == IBV_WC_SUCCESS && !req->signaled)
		return;
	memset(&cqe, 0, sizeof(cqe));
	cqe.wr_id = req->w.wr_id;
	cqe.status = status;
	cqe.opcode = ibvd_eng_wc_opcode(req->w.opcode);
	cqe.byte_len = (uint32_t)req->length;
	cqe.qp_num = qp->qp_num;
	if (ibvd_eng_cq_push(qp->send_cq, qp, &cqe, false) < 0)
		ibvd_eng_qp_error(qp);
}

/* After an error completion the QP leaves RTS (spec 10.8.3). */
static void leave_rts(struct ibvd_qp *qp)
{
	/* UC and UD send errors stop the SQ only; RC errors stop the QP. */
	if (qp->qp_type == IBV_QPT_RC || qp->qp_type == IBV_QPT_XRC_SEND)
		ibvd_eng_qp_error(qp);
	else
		ibvd_eng_qp_sq_error(qp);
}

static enum step failed(enum ibv_wc_status *status, enum ibv_wc_status st)
{
	*status = st;
	return STEP_FAILED;
}

static enum step rnr_nak(struct ibvd_engine *eng, struct ibvd_qp *qp,
			 uint8_t rnr_timer, enum ibv_wc_status *status)
{
	uint64_t wait_ns;

	if (qp->attr.rnr_retry != RNR_RETRY_INFINITE) {
		if (!qp->rnr_left)
			return failed(status, IBV_WC_RNR_RETRY_EXC_ERR);
		qp->rnr_left--;
	}
	wait_ns = ibvd_eng_rnr_ns(rnr_timer);
	/* What was asked for, not what passed: a count tests can hold exact. */
	eng_count(&eng->rnr_wait_us, wait_ns / 1000);
	ibvd_eng_qp_wait(eng, qp, ibvd_eng_now() + wait_ns);
	return STEP_WAIT;
}

bool ibvd_eng_retry_spent(const struct ibvd_qp *qp)
{
	return qp->attr.timeout && !qp->retry_left;
}

void ibvd_eng_retry_refill(struct ibvd_qp *qp)
{
	qp->retry_left = qp->attr.retry_cnt;
	qp->rnr_left = qp->attr.rnr_retry;
}

/*
 * When to ask a QP waiting for its transport's answer again: a local ACK
 * timeout from now, or sooner if the transport asked (ibvd_eng_ask_again_by).
 */
static uint64_t ask_deadline(const struct ibvd_engine *eng,
			     const struct ibvd_qp *qp)
{
	uint64_t deadline = ibvd_eng_now() + ibvd_eng_timeout_ns(qp->attr.timeout);

	return eng->ask_by_ns && eng->ask_by_ns < deadline ? eng->ask_by_ns :
							     deadline;
}

static enum step no_ack(struct ibvd_engine *eng, struct ibvd_qp *qp,
			enum ibv_wc_status *status)
{
	/* Timeout 0 is "infinite": we keep looking, and never give up. */
	if (ibvd_eng_retry_spent(qp))
		return failed(status, IBV_WC_RETRY_EXC_ERR);
	if (qp->attr.timeout)
		qp->retry_left--;
	ibvd_eng_qp_wait(eng, qp, ask_deadline(eng, qp));
	return STEP_WAIT;
}

/*
 * A direct QP's library holds its RQ's claim (ring.h) for the
 * microseconds of one message's copy, its SQ's while it moves SENDs to
 * the ring, or either as long as its process is stopped mid-call; the
 * waits double from 20 us to 10 ms.
 */
static void claim_wait(struct ibvd_engine *eng, struct ibvd_qp *qp)
{
	uint64_t wait_ns = 20000ull << (qp->claim_waits < 9 ? qp->claim_waits : 9);

	if (qp->claim_waits < UINT8_MAX)
		qp->claim_waits++;
	ibvd_eng_qp_wait(eng, qp, ibvd_eng_now() + wait_ns);
}

/*
 * The receiver's library holds its RQ's claim: for one copy's
 * microseconds, as a rule.  Held for a whole ACK timeout, it is a
 * responder that does not answer, and each timeout spends a retry as
 * no_ack does: a library stopped or hostile mid-call must not hold its
 * peer's WQE beyond the retries the peer asked for.
 */
static enum step claim_busy(struct ibvd_engine *eng, struct ibvd_qp *qp,
			    enum ibv_wc_status *status)
{
	uint64_t now = ibvd_eng_now();

	if (!qp->busy_since_ns) {
		qp->busy_since_ns = now;
	} else if (qp->attr.timeout &&
		   now - qp->busy_since_ns >= ibvd_eng_timeout_ns(qp->attr.timeout)) {
		if (!qp->retry_left)
			return failed(status, IBV_WC_RETRY_EXC_ERR);
		qp->retry_left--;
		qp->busy_since_ns = now;
	}
	claim_wait(eng, qp);
	return STEP_WAIT;
}

static enum step conclude(struct ibvd_engine *eng, struct ibvd_qp *qp,
			  enum eng_resp r, uint8_t rnr_timer,
			  enum ibv_wc_status *status)
{
	qp->awaiting = r == RESP_PENDING;
	if (r != RESP_BUSY) {
		qp->claim_waits = 0;
		qp->busy_since_ns = 0;
	}
	switch (r) {
	case RESP_OK:
		*status = IBV_WC_SUCCESS;
		return STEP_DONE;
	case RESP_RNR:
		return rnr_nak(eng, qp, rnr_timer, status);
	case RESP_NO_ACK:
		return no_ack(eng, qp, status);
	case RESP_INV_REQ:
		return failed(status, IBV_WC_REM_INV_REQ_ERR);
	case RESP_ACCESS:
		return failed(status, IBV_WC_REM_ACCESS_ERR);
	case RESP_OP_ERR:
		return failed(status, IBV_WC_REM_OP_ERR);
	case RESP_LOCAL_FAULT:
		return failed(status, IBV_WC_LOC_PROT_ERR);
	case RESP_PENDING:
		/* The ACK timeout starts: no retry is spent until it fires. */
		ibvd_eng_qp_wait(eng, qp, ask_deadline(eng, qp));
		return STEP_WAIT;
	case RESP_BUSY:
		return claim_busy(eng, qp, status);
	}
	return failed(status, IBV_WC_GENERAL_ERR);
}

/*
 * Over its tenant's bandwidth: true if qp must wait (its timer is set).
 * An unlimited tenant pays one relaxed load here.  A long wait is cut into
 * ENG_RATE_RECHECK_NS pieces, each ending in a new question to the
 * bucket: the limit may be lifted meanwhile.
 */
static bool rate_wait(struct ibvd_engine *eng, struct ibvd_qp *qp,
		      uint64_t bytes)
{
	struct ibvd_eng_rate *rate = qp->ctx->engine->rate;
	uint64_t wait;

	if (!rate)
		return false;
	wait = ibvd_eng_rate_take(rate, bytes, eng->now, ibvd_eng_turn_bytes);
	if (!wait)
		return false;
	if (wait > ENG_RATE_RECHECK_NS)
		wait = ENG_RATE_RECHECK_NS;
	ibvd_eng_qp_wait(eng, qp, eng->now + wait);
	return true;
}

/* Work requests that act on this side only: no message goes out. */
static bool is_local_op(uint32_t opcode)
{
	return opcode == IBV_WR_BIND_MW || opcode == IBV_WR_LOCAL_INV;
}

static enum ibv_wc_status local_op(struct ibvd_qp *qp,
				   const struct eng_req *req)
{
	if (req->w.opcode == IBV_WR_BIND_MW)
		return ibvd_eng_bind_mw(qp, &req->w);
	return ibvd_eng_local_inv(qp, req->w.rkey);
}

/* First attempt at the WQE in front. */
static void start_wqe(struct ibvd_qp *qp)
{
	/*
	 * Retry budgets count per message, from its first attempt; a
	 * transport whose messages move on between timeouts refills them
	 * (ibvd_eng_retry_refill).
	 */
	qp->rnr_left = qp->attr.rnr_retry;
	qp->retry_left = qp->attr.retry_cnt;
	qp->busy_since_ns = 0;
	qp->no_answer_since_ns = 0;
	qp->wqe_done = 0;
	qp->step_paid = 0;
	/* Defensive: every way out of a message gave its receive WQE back. */
	ibvd_eng_held_abort(qp);
	qp->wqe_started = true;
}

void ibvd_eng_charge_copies(struct ibvd_engine *eng, uint64_t bytes)
{
	eng->copies_charged += bytes;
}

void ibvd_eng_ask_again_by(struct ibvd_engine *eng, uint64_t when_ns)
{
	if (!eng->ask_by_ns || when_ns < eng->ask_by_ns)
		eng->ask_by_ns = when_ns;
}

/*
 * What the transport charged in a send call (eng->copies_charged, zeroed
 * before it): against the turn (*bytes), and the tenant's bandwidth too.
 */
static void charge_copies(struct ibvd_engine *eng, struct ibvd_qp *qp,
			  bool paced, uint64_t *bytes)
{
	*bytes += eng->copies_charged;
	if (paced && eng->copies_charged && qp->ctx->engine->rate)
		ibvd_eng_rate_charge(qp->ctx->engine->rate,
				     eng->copies_charged, eng->now);
}

/*
 * A UD WQE's datagram, sent whole.  One whose receiver's library holds
 * its claim, and that cannot be parked, waits here, as a step does for a
 * busy claim (recv.c).
 */
static enum step step_ud(struct ibvd_engine *eng, struct ibvd_qp *qp,
			 bool paced, const struct eng_req *req, uint64_t *bytes,
			 enum ibv_wc_status *status)
{
	enum eng_ud sent;

	eng->copies_charged = 0;
	*status = IBV_WC_SUCCESS;
	sent = ibvd_eng_transport(qp)->send_ud(eng, qp, req, status);
	charge_copies(eng, qp, paced, bytes);
	if (sent == UD_WAIT) {
		claim_wait(eng, qp);
		return STEP_WAIT;
	}
	qp->claim_waits = 0;
	return sent == UD_SENT ? STEP_DONE : STEP_FAILED;
}

/*
 * Execute the next step of the WQE at sq_head into req (all of it unless
 * it is longer than a chunk); *bytes grows by the step.  paced: honour
 * the tenant's bandwidth limit.
 */
static enum step step_front(struct ibvd_engine *eng, struct ibvd_qp *qp,
			    bool paced, struct eng_req *req, uint64_t *bytes,
			    enum ibv_wc_status *status)
{
	enum ibv_wc_status st;
	uint8_t rnr_timer = 0;
	enum eng_resp r;
	enum step s;

	st = ibvd_eng_send_take(eng, qp, qp->sq_head, req);
	if (st != IBV_WC_SUCCESS)
		return failed(status, st);
	if (!qp->wqe_started)
		start_wqe(qp);
	st = ibvd_eng_chunk_plan(qp, req);
	if (st != IBV_WC_SUCCESS)
		return failed(status, st);
	/*
	 * A step tried again (a busy claim, an RNR wait, a timeout) or asked
	 * again for its answer paid when first tried: only what it grew by
	 * since pays (its WQE is the client's to rewrite meanwhile).
	 */
	if (paced && req->step > qp->step_paid) {
		if (rate_wait(eng, qp, req->step - qp->step_paid))
			return STEP_WAIT;
		qp->step_paid = req->step;
	}
	*bytes += req->step;
	if (is_local_op(req->w.opcode)) {
		*status = local_op(qp, req);
		return *status == IBV_WC_SUCCESS ? STEP_DONE : STEP_FAILED;
	}
	if (qp->qp_type == IBV_QPT_UD)
		return step_ud(eng, qp, paced, req, bytes, status);
	/* asked again for an answer: the request was counted when it went */
	if (!qp->awaiting)
		ibvd_eng_count_request(qp, req);
	/*
	 * Apart: as one call's arguments, rnr_timer could be read before
	 * send() sets it (C leaves the order open; GCC reads it first), and
	 * every RNR NAK waited 655 ms, the timer value 0's.
	 */
	eng->copies_charged = 0;
	eng->ask_by_ns = 0;
	r = ibvd_eng_transport(qp)->send(eng, qp, req, &rnr_timer);
	charge_copies(eng, qp, paced, bytes);
	s = conclude(eng, qp, r, rnr_timer, status);
	if (s == STEP_DONE && !eng_req_last(req)) {
		qp->wqe_done += req->step;
		qp->step_paid = 0;
		return STEP_PARTIAL;
	}
	return s;
}

/*
 * The WQE in front is finished: give its slot back first, then complete
 * it, so that a client that sees the completion always finds the room
 * it left (perftest posts the next WQE as soon as it polls one).
 */
static void retire(struct ibvd_engine *eng, struct ibvd_qp *qp,
		   const struct eng_req *req, enum ibv_wc_status status)
{
	qp->sq_head++;
	qp->wqe_started = false;
	qp->wqe_done = 0;
	/* Failed half-way: the receiver's held WQE completes in error. */
	ibvd_eng_held_abort(qp);
	ibvd_eng_count_retired(eng, qp, req, status);
	/* Release: we are done with the slots below the new head. */
	ibvd_publish(&((struct ibvd_wq_engine *)qp->sq.engine_page)->head, qp->sq_head);
	/*
	 * A failure stops the SQ before its completion is seen: a library
	 * that sees it, or the SQ drained, then posts behind it to the SQ,
	 * which is flushed, never to the peer's ring.
	 */
	if (status != IBV_WC_SUCCESS)
		leave_rts(qp);
	complete(qp, req, status);
	/* Release: the completion is written (a direct library waits for it). */
	ibvd_publish(&((struct ibvd_wq_engine *)qp->sq.engine_page)->direct_retired,
		     qp->sq_head);
}

bool ibvd_eng_send_ahead(struct ibvd_engine *eng, struct ibvd_qp *src,
			 uint32_t counter, struct eng_req *req)
{
	const struct ibvd_wq_client *cp = src->sq.client_page;
	struct ibvd_eng_rate *rate = src->ctx->engine->rate;
	uint32_t posted = ibvd_observe(&cp->tail) - src->sq_head;

	/*
	 * Paced tenants pay per step at the front; SQD starts nothing new;
	 * a chunked front is still the engine's to step through.
	 */
	if (src->qp_type != IBV_QPT_RC || eng_qp_state(src) != IBV_QPS_RTS ||
	    src->wqe_done || (rate && ibvd_eng_rate_get_limit(rate) !=
				   IBVD_RATE_UNLIMITED))
		return false;
	if (posted > src->sq.nslots || counter - src->sq_head >= posted ||
	    counter == src->sq_head)
		return false;
	if (ibvd_eng_send_take(eng, src, counter, req) != IBV_WC_SUCCESS ||
	    is_local_op(req->w.opcode) || (req->w.send_flags & IBV_SEND_FENCE) ||
	    req->length > ibvd_eng_chunk_bytes)
		return false;
	req->off = 0;
	req->step = req->length;
	return true;
}

/* The SQ's tail went impossible: the QP cannot be trusted any further. */
static void sq_fatal(struct ibvd_qp *qp)
{
	if (ibvd_eng_qp_error(qp))
		ibvd_eng_async(qp->ctx, IBV_EVENT_QP_FATAL, qp->handle);
}

/* SQD with nothing in flight: the SQ is drained. */
static void sq_drained(struct ibvd_qp *qp)
{
	if (qp->drained_sent)
		return;
	qp->drained_sent = true;	/* QUERY_QP's sq_draining goes 0 */
	if (qp->attr.en_sqd_async_notify)
		ibvd_eng_async(qp->ctx, IBV_EVENT_SQ_DRAINED, qp->handle);
}

/* WQEs posted and not taken, or -1 for an impossible tail. */
static int64_t sq_depth(const struct ibvd_qp *qp)
{
	const struct ibvd_wq_client *cp = qp->sq.client_page;
	uint32_t n;

	/* A target sends nothing, whatever its creator wrote in its SQ. */
	if (qp->qp_type == IBV_QPT_XRC_RECV)
		return 0;
	/* Acquire: the WQEs below the tail are written. */
	n = ibvd_observe(&cp->tail) - qp->sq_head;
	return n > qp->sq.nslots ? -1 : (int64_t)n;
}

bool ibvd_engine_qp_rts_work(const struct ibvd_qp *qp)
{
	/*
	 * No pass runs now (the write lock).  A pass that took a doorbell
	 * rung before our lock left the WQE in the SQ, where sq_depth sees
	 * it: the client stored the tail before ringing.  A doorbell rung
	 * later is taken by a pass that starts after our unlock, and so sees
	 * RTS.  Either way nothing posted is left behind unrun.
	 */
	if (qp->direct && qp->direct->map)
		return true;
	return sq_depth(qp) != 0 || qp->peer_gone || qp->rnr_deadline_ns ||
	       qp->awaiting || qp->wqe_started;
}

/*
 * A direct QP runs no WQE while its library's SENDs are still in the ring
 * it sends on (RC order, transit.h): place them first, or wait.
 */
static bool direct_clear(struct ibvd_engine *eng, struct ibvd_qp *qp)
{
	uint8_t rnr_timer = 0;
	uint64_t wait_ns;

	switch (ibvd_eng_direct_drain(eng, qp, true, &rnr_timer)) {
	case DRAIN_EMPTY:
		qp->claim_waits = 0;
		return true;
	case DRAIN_WAIT:
		/* direct SENDs are made only with rnr_retry 7: no budget */
		wait_ns = ibvd_eng_rnr_ns(rnr_timer);
		eng_count(&eng->rnr_wait_us, wait_ns / 1000);
		ibvd_eng_qp_wait(eng, qp, ibvd_eng_now() + wait_ns);
		return false;
	case DRAIN_BUSY:
		claim_wait(eng, qp);
		return false;
	case DRAIN_MORE:
		ibvd_eng_qp_ring(qp);
		return false;
	case DRAIN_UNANSWERED:
		ibvd_eng_qp_wait(eng, qp, qp->unanswered_ns);
		return false;
	case DRAIN_FAILED:
		return false;
	}
	return false;
}

/* Returns the bytes it moved. */
static uint64_t run_sq_claimed(struct ibvd_engine *eng, struct ibvd_qp *qp,
			       bool paced)
{
	enum ibv_wc_status status;
	struct eng_req req;
	uint64_t bytes = 0;
	unsigned int n;
	int64_t depth = 0;
	uint32_t after;

	/* also with nothing in the SQ: a doorbell may ask for the ring */
	if (qp->direct && !direct_clear(eng, qp))
		return 0;
	for (n = 0; n < ENG_QP_BUDGET_WQES && bytes < ibvd_eng_turn_bytes; n++) {
		uint32_t state = eng_qp_state(qp);
		enum step s;

		if (state != IBV_QPS_RTS && state != IBV_QPS_SQD)
			break;
		depth = sq_depth(qp);
		if (depth < 0) {
			sq_fatal(qp);
			return bytes;
		}
		/* SQD: finish what is in flight, start nothing new. */
		if (!depth || (state == IBV_QPS_SQD && !qp->wqe_started)) {
			if (state == IBV_QPS_SQD)
				sq_drained(qp);
			break;
		}
		/*
		 * Before each new WQE, not only at the turn's start: the
		 * library may have put SENDs in the ring since the last look
		 * (and then posted this WQE behind them).
		 */
		if (qp->direct && !qp->wqe_started && !direct_clear(eng, qp))
			return bytes;
		ibvd_eng_recv_defer_begin(qp);
		s = step_front(eng, qp, paced, &req, &bytes, &status);
		if (s != STEP_WAIT && s != STEP_PARTIAL)
			retire(eng, qp, &req, status);
		/* the receiver's CQE after ours (recv.c, "deferred") */
		ibvd_eng_recv_defer_end(qp);
		if (s == STEP_WAIT || s == STEP_PARTIAL)
			break;
		depth--;
		if (s == STEP_FAILED)
			break;
	}
	/* More to do: come back after the others (SQD finishes its WQE). */
	after = eng_qp_state(qp);
	if (depth > 0 && !qp->rnr_deadline_ns &&
	    (after == IBV_QPS_RTS || (after == IBV_QPS_SQD && qp->wqe_started)))
		ibvd_eng_qp_ring(qp);
	return bytes;
}

/*
 * A direct QP's library may move SENDs the engine has not started from
 * the SQ to the ring (the SQ's claim, ring.h): the engine holds the claim
 * while it runs the SQ and while a WQE is started.
 */
static uint64_t run_sq(struct ibvd_engine *eng, struct ibvd_qp *qp,
		       bool paced)
{
	uint64_t bytes;

	if (!ibvd_eng_sq_claim(qp)) {
		claim_wait(eng, qp);
		return 0;
	}
	bytes = run_sq_claimed(eng, qp, paced);
	ibvd_eng_sq_unclaim(qp);
	return bytes;
}

/* ERR: flush everything; an SRQ user hears its last WQE was reached. */
static void run_error(struct ibvd_engine *eng, struct ibvd_qp *qp)
{
	int sq, rq;

	ibvd_eng_mark_stopped(qp);
	/*
	 * Store (error word) -> load (tails, in the flushes): with the
	 * client's store (tail) -> fence -> load (error word), a WQE posted
	 * now is either flushed here or rung for the next pass.
	 */
	ibvd_full_fence();
	/* before the SQ's CQEs: a poller that sees them sees this */
	ibvd_eng_direct_flush(qp);
	/* what the library moved to the ring is its own to complete */
	if (!ibvd_eng_sq_claim(qp)) {
		claim_wait(eng, qp);
		return;
	}
	sq = ibvd_eng_flush_sq(qp);
	ibvd_eng_sq_unclaim(qp);
	rq = ibvd_eng_flush_rq(qp);
	if (rq == -EBUSY) {
		claim_wait(eng, qp);
		return;
	}
	/* a turn's share flushed: the rest at the next turn */
	if (sq < 0 || rq < 0) {
		ibvd_eng_qp_ring(qp);
		return;
	}
	qp->claim_waits = 0;
	qp->flush_pending = false;
	qp->peer_gone = false;
	if (qp->srq && !qp->last_wqe_sent) {
		qp->last_wqe_sent = true;
		ibvd_eng_async(qp->ctx, IBV_EVENT_QP_LAST_WQE_REACHED, qp->handle);
	}
}

/* A state the engine does not own any more: forget per-state memory. */
static void left_error_states(struct ibvd_qp *qp, uint32_t state)
{
	struct ibvd_wq_engine *sq = qp->sq.engine_page;

	if (state != IBV_QPS_SQD)
		qp->drained_sent = false;
	qp->last_wqe_sent = false;
	if (ibvd_read_once(&sq->error) && state != IBV_QPS_SQE)
		ibvd_publish(&sq->error, 0);
	if (!qp->srq && qp->rq.engine_page) {
		struct ibvd_wq_engine *rq = qp->rq.engine_page;

		if (ibvd_read_once(&rq->error))
			ibvd_publish(&rq->error, 0);
	}
	if (state == IBV_QPS_RESET || state == IBV_QPS_INIT) {
		qp->rnr_deadline_ns = 0;
		qp->awaiting = false;
		qp->wqe_started = false;
		qp->wqe_done = 0;
		qp->peer_gone = false;
	}
}

/*
 * The RC peer's context died (engine.c): with nobody left to answer, the
 * WQE in front fails as if its retries ran out, and the QP goes to ERR,
 * flushing the rest and every receive, which nothing will ever fill.
 */
static void break_connection_claimed(struct ibvd_engine *eng,
				     struct ibvd_qp *qp)
{
	enum ibv_wc_status st;
	struct eng_req req;
	int64_t depth = sq_depth(qp);

	if (depth < 0) {
		sq_fatal(qp);
		return;
	}
	/* SENDs in a direct ring came first: they take the retry error */
	if (ibvd_eng_direct_break(qp)) {
		ibvd_eng_qp_error(qp);
		return;
	}
	if (depth > 0 && (qp->wqe_started || eng_qp_state(qp) == IBV_QPS_RTS)) {
		st = ibvd_eng_send_take(eng, qp, qp->sq_head, &req);
		retire(eng, qp, &req, st != IBV_WC_SUCCESS ? st : IBV_WC_RETRY_EXC_ERR);
	}
	ibvd_eng_qp_error(qp);
}

static void break_connection(struct ibvd_engine *eng, struct ibvd_qp *qp)
{
	if (!ibvd_eng_sq_claim(qp)) {
		qp->peer_gone = true;	/* again after the wait */
		claim_wait(eng, qp);
		return;
	}
	break_connection_claimed(eng, qp);
	ibvd_eng_sq_unclaim(qp);
}

/* The bytes the front WQE of qp's queued ones has still to move. */
static uint64_t front_left(struct ibvd_engine *eng, struct ibvd_qp *qp,
			   uint32_t queued)
{
	struct eng_req req;

	/* one that fails moves nothing */
	if (!queued ||
	    ibvd_eng_send_take(eng, qp, qp->sq_head, &req) != IBV_WC_SUCCESS)
		return 0;
	if (!qp->wqe_started)
		return req.length;
	return req.length > qp->wqe_done ? req.length - qp->wqe_done : 0;
}

/*
 * A NIC puts what it is rung for on the wire at once, and takes what
 * arrives for a posted receive at once, so apps destroy a QP right after
 * their last post or receive: UD datagrams sent unsignaled (mckey -s
 * does), the last SEND on a connection whose peer has already said its
 * last word (libfabric's verbs;ofi_rxm "fin", with FI_INJECT, then the
 * close), or a peer's last message the app never polled for.  What the
 * engine has not run yet would silently never be sent, and the peer's
 * SENDs left in the direct ring would fail at the peer.  Do both now, as
 * far as they go without waiting: the peer's ring into our posted
 * receives, our ring's SENDs (run_sq places them), then the SQ, when the
 * peer is this daemon's.  A SEND the peer has no receive for goes with
 * the QP, as it would on a NIC told to destroy it.  The objects
 * lock is held for writing, so no pass is running this QP.
 */
bool ibvd_eng_finish_begin(struct ibvd_qp *qp, struct ibvd_finishing *f)
{
	struct ibvd_engine *eng = ibvd_eng_of(qp);
	int64_t depth;

	if (!eng || qp->qp_type == IBV_QPT_XRC_RECV)
		return false;
	depth = sq_depth(qp);
	*f = (struct ibvd_finishing){ .qp = qp, .head0 = qp->sq_head,
				      .first = true };
	f->queued = depth > 0 ? (uint32_t)depth : 0;
	f->front = front_left(eng, qp, f->queued);
	f->taking = qp->direct && ibvd_eng_can_receive(eng_qp_state(qp)) &&
		    ibvd_eng_direct_last_end(qp, &f->last_end);
	/*
	 * Only towards a peer that takes them now: UD's are taken or dropped
	 * of its own, and one whose peer is gone (or on the wire, where
	 * nothing would retransmit) would only fail its sends.
	 */
	f->sending = qp->qp_type == IBV_QPT_UD || ibvd_eng_connected_peer(qp);
	return f->taking || f->sending;
}

static void charge(struct ibvd_finish_budget *budget, uint64_t moved)
{
	budget->bytes -= moved < budget->bytes ? moved : budget->bytes;
}

/* A turn's placing of what the peer's direct ring holds for f's QP. */
static bool take_turn(struct ibvd_finishing *f,
		      struct ibvd_finish_budget *budget)
{
	uint64_t placed = 0;
	bool more;

	if (!budget->turns || !budget->bytes)
		return false;
	budget->turns--;
	more = ibvd_eng_direct_take(ibvd_eng_of(f->qp), f->qp, f->last_end,
				    &placed);
	charge(budget, placed);
	return more;
}

/*
 * Each turn that goes on retired a WQE or moved part of a long one.
 * Every tenant's requests and every engine pass wait meanwhile (the
 * objects lock is held for writing), so what runs here is bounded: a
 * ring's worth of WQEs since head0 for the QP, and the budget's turns
 * and bytes for all that share it (its own direct ring's SENDs, which
 * run_sq places first, among them), whatever another client thread
 * adds, and paced as the QP's sends always are (a destroy is no way past
 * a bandwidth limit).  Waits (RNR, a claim the library holds, an ACK,
 * the rate) end it too.  False: the QP has no more turns.
 */
static bool send_turn(struct ibvd_finishing *f,
		      struct ibvd_finish_budget *budget)
{
	struct ibvd_qp *qp = f->qp;
	struct ibvd_engine *eng = ibvd_eng_of(qp);
	uint64_t done, moved, placed;
	int64_t depth;

	if (!budget->turns || !budget->bytes)
		return false;
	/* a ring's worth of WQEs, however many a turn retires (a head put
	 * back by a claim's sync ends it too) */
	if (eng_qp_state(qp) != IBV_QPS_RTS ||
	    qp->sq_head - f->head0 >= qp->sq.nslots)
		return false;
	depth = sq_depth(qp);
	if (depth < 0 || (depth == 0 && (!f->first || !qp->direct)))
		return false;
	done = qp->wqe_done;
	budget->turns--;
	/* the objects lock is held for writing: no pass counts meanwhile */
	placed = eng->direct_bytes;
	moved = run_sq(eng, qp, true);
	charge(budget, moved + eng->direct_bytes - placed);
	return sq_depth(qp) < depth || qp->wqe_done != done;
}

bool ibvd_eng_finish_turn(struct ibvd_finishing *f,
			  struct ibvd_finish_budget *budget)
{
	if (f->taking)
		f->taking = take_turn(f, budget);
	if (f->sending)
		f->sending = send_turn(f, budget);
	f->first = false;
	return f->taking || f->sending;
}

void ibvd_engine_qp_finish_sends(struct ibvd_qp *qp)
{
	struct ibvd_finish_budget budget = {
		.bytes = ENG_FINISH_BYTES,
		.turns = qp->sq.nslots + ENG_FINISH_BYTES / ibvd_eng_turn_bytes,
	};
	struct ibvd_finishing f;

	if (!ibvd_eng_finish_begin(qp, &f))
		return;
	/*
	 * A destroy's take from the peer's ring has its own bound (what it
	 * holds now, direct.c), apart from the SQ's budget.
	 */
	if (f.taking)
		ibvd_eng_direct_take_last(ibvd_eng_of(qp), qp);
	f.taking = false;
	/* no pass runs meanwhile: this destroy has a pass's claim allowance */
	ibvd_eng_of(qp)->claim_wait_left = ENG_CLAIM_WAIT_NS;
	while (ibvd_eng_finish_turn(&f, &budget))
		;
}

static void turn_done(struct ibvd_qp *qp)
{
	const struct ibvd_transport *t = ibvd_eng_transport(qp);

	if (t->turn_done)
		t->turn_done(qp);
}

/* Bytes the turn moved from the SQ (0 for a flush, a wait, an SQE). */
static uint64_t qp_turn(struct ibvd_engine *eng, struct ibvd_qp *qp,
			uint64_t now)
{
	uint32_t state = eng_qp_state(qp);

	eng_count(&eng->turns, 1);
	if (state == IBV_QPS_ERR) {
		/* what the transport held completes before the flush */
		turn_done(qp);
		run_error(eng, qp);
		return 0;
	}
	left_error_states(qp, state);
	if (qp->direct && ibvd_eng_can_receive(state))
		ibvd_eng_direct_rung(eng, qp);
	if (state == IBV_QPS_SQE) {
		if (ibvd_eng_sq_claim(qp)) {
			if (ibvd_eng_flush_sq(qp) < 0)
				ibvd_eng_qp_ring(qp);
			ibvd_eng_sq_unclaim(qp);
		} else {
			claim_wait(eng, qp);
		}
		return 0;
	}
	if (state != IBV_QPS_RTS && state != IBV_QPS_SQD)
		return 0;
	if (qp->peer_gone) {
		qp->peer_gone = false;
		if (!ibvd_eng_connected_peer(qp)) {
			qp->rnr_deadline_ns = 0;
			break_connection(eng, qp);
			return 0;
		}
	}
	/*
	 * A waiting QP moves when its timer says so, or its answer came; one
	 * that awaits only an answer also when rung, so that its transport
	 * sends what the client posted since, with the front in flight.
	 */
	if (qp->rnr_deadline_ns) {
		if (now < qp->rnr_deadline_ns &&
		    !__atomic_exchange_n(&qp->answered, 0, __ATOMIC_ACQUIRE) &&
		    !qp->awaiting)
			return 0;
		qp->rnr_deadline_ns = 0;
		ibvd_eng_timer_cancel(&eng->timers, qp);
	}
	return run_sq(eng, qp, true);
}

uint64_t ibvd_eng_qp_run(struct ibvd_engine *eng, struct ibvd_qp *qp,
			 uint64_t now)
{
	uint64_t bytes = qp_turn(eng, qp, now);

	turn_done(qp);
	return bytes;
}
