/*
 * The data engine: the threads that play the NIC (DESIGN.md §3.2, §3.4).
 *
 * Engine threads consume the work queues clients fill in shared memory
 * (common/ring.h), move bytes between registered memory of the processes
 * involved and write completions.  Each device context is served by one
 * engine thread, the one serving the fewest contexts when it opens; a
 * thread polls while there is work, spins for a bounded idle budget, then
 * sleeps until a client kicks its context's eventfd or a timer (RNR or
 * transport retry) expires.
 *
 * Fair sharing: a thread serves the QPs with work in turn, each for at
 * most one chunk of data (128 KiB) per turn; longer transfers run a chunk
 * per turn (chunk.c), so no QP holds the thread for long; a tenant's
 * bandwidth limit is a token bucket its QPs pay into (rate.h).
 *
 * This is what the rest of the daemon calls.  All of it runs on the control
 * thread.  The engine knows the object model (core/) and nothing above it:
 * what it has to tell the control side leaves through the events below,
 * and what it needs of a tenant (its bandwidth bucket) is handed in.
 *
 * Layer engine/: it calls core/ and common/ only.  Above it, the control
 * side calls this header; below it, transports plug in through
 * transport.h.  internal.h stays inside the folder.
 */
#ifndef IBVD_ENGINE_H
#define IBVD_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

struct ibvd_context;
struct ibvd_cq;
struct ibvd_eng_rate;
struct ibvd_qp;
struct ibvd_srq;

/*
 * What the engine tells the control side, called from engine threads with
 * ibvd_objects_lock held for reading.  Neither may block or take the
 * objects lock for writing; both must be thread-safe.
 */
struct ibvd_engine_events {
	/* An asynchronous event (enum ibv_event_type) about object `handle`
	 * of ctx: QP, CQ and SRQ errors, SRQ limits, drained SQs. */
	void (*async)(struct ibvd_context *ctx, uint32_t event, uint32_t handle);
	/* cq has a completion channel, and a completion its client armed
	 * for just arrived: the channel fires. */
	void (*completion)(const struct ibvd_cq *cq);
};

#define IBVD_ENGINE_MAX_THREADS	64

/*
 * Start nthreads engine threads (0: one per CPU the daemon may run on,
 * less one, at least one; at most IBVD_ENGINE_MAX_THREADS), reporting
 * through events (which must outlive the engine).  0 or a negative errno.
 */
int ibvd_engine_start(unsigned int nthreads,
		      const struct ibvd_engine_events *events);

/*
 * In-process harnesses (tests/fuzz/): n engines (0: one) as
 * ibvd_engine_start makes them, but no thread runs them; the caller runs
 * their passes on its own thread with ibvd_engine_run_passes, so that
 * what the engine does to a queue is over when that returns.
 */
int ibvd_engine_start_unthreaded(unsigned int n,
				 const struct ibvd_engine_events *events);

/*
 * Unthreaded engines: run a pass of each (doorbells, then due timers)
 * until a round finds no work or max_passes rounds ran; the rounds run.
 * Takes ibvd_objects_lock for reading, as a thread's pass does.
 */
unsigned int ibvd_engine_run_passes(unsigned int max_passes);

/* Stop and join every engine thread; contexts must be gone already. */
void ibvd_engine_stop(void);

/*
 * OPEN_DEVICE: give ctx its context page (doorbells, ring.h) and kick
 * eventfd, and attach it to an engine thread.  rate is the bandwidth
 * bucket of ctx's tenant (core/rate.h), or NULL for none; the engine takes
 * a reference of its own.  On success *page_fd is a sealed memfd of
 * IBVD_CTX_PAGE_SIZE bytes for the reply (the caller closes it after
 * sending) and *kick_fd the eventfd, which stays the engine's (send it, do
 * not close it).  0 or a negative errno.
 */
int ibvd_engine_ctx_open(struct ibvd_context *ctx, struct ibvd_eng_rate *rate,
			 int *page_fd, int *kick_fd);

/*
 * Context teardown, first step: no engine thread serves ctx any more once
 * this returns (takes ibvd_objects_lock for writing).  Its objects may still
 * be reached by other contexts' traffic until they are destroyed.
 */
void ibvd_engine_ctx_detach(struct ibvd_context *ctx);
/*
 * Context teardown, before the detach: each QP's sends the client posted
 * and the engine has not run yet, and what its direct peer's ring holds
 * for its receives, as ibvd_engine_qp_finish_sends but within one budget
 * for all of them; its thread runs none of its QPs after (takes
 * ibvd_objects_lock for writing).
 */
void ibvd_engine_ctx_finish_sends(struct ibvd_context *ctx);
/*
 * Is ctx's tenant held to a bandwidth limit now?  (Its SENDs must then
 * all pass the engine, which charges them: no direct transport.)
 */
bool ibvd_engine_ctx_paced(const struct ibvd_context *ctx);

/* ctx's device's GID table may have changed: its library's copy is stale. */
void ibvd_engine_ctx_gids_changed(struct ibvd_context *ctx);

/* Context teardown, last step, after every object of ctx is destroyed. */
void ibvd_engine_ctx_free(struct ibvd_context *ctx);

/*
 * The control path changed qp (modify_qp: a new state, an ERR flush, SQD,
 * or a RESET that rewound its queues); make its engine thread look at it.
 * Callable with or without ibvd_objects_lock held for writing.
 */
void ibvd_engine_qp_kick(struct ibvd_qp *qp);

/*
 * MODIFY_QP from RTR to RTS, objects lock held for writing, the new state
 * stored: has the engine anything to do for qp?  Only what waited for RTS
 * (SENDs posted before it, whose doorbell a pass already took while the
 * QP could not send), a dead peer to report, or a direct ring in use.
 */
bool ibvd_engine_qp_rts_work(const struct ibvd_qp *qp);

/*
 * Is srq's claim word taken for every WQE (ring.h), so that the libraries
 * of its direct QPs take from it too, and keep its head in its client
 * header (direct_head)?  Basic SRQs of soft devices.
 */
bool ibvd_engine_srq_claimed(const struct ibvd_srq *srq);

/* The RC/UC peer qp is connected to, if it is this daemon's and can receive. */
struct ibvd_qp *ibvd_engine_qp_peer(const struct ibvd_qp *qp);

/*
 * A UD qp leaves its pair and goes on without a reset (objects lock held
 * for writing): its RQ's WQEs are the engine's alone from now on, from
 * where its library left them, and the claim stays the engine's.  0,
 * -EBUSY while the library holds the claim (mid-copy: ask again), or
 * -EPROTO for a head it could not have written (qp goes to ERR).
 */
int ibvd_engine_rq_reclaim(struct ibvd_qp *qp);

/*
 * DESTROY_QP, objects lock held for writing: send what the client posted
 * and the engine has not run yet, as far as it goes without waiting.
 */
void ibvd_engine_qp_finish_sends(struct ibvd_qp *qp);

/*
 * MODIFY_QP to RESET, objects lock held for writing: the engine forgets
 * what qp was doing (chunk.c): a message it was sending in chunks is
 * aborted at its receiver, a receive WQE it held for one arriving is
 * dropped with its RQ (or flushed, if it came from an SRQ), and messages
 * begun before do not reach it any more.  Its completions the client has
 * not polled yet are purged from its CQs (those of SRQ receives stay).
 */
void ibvd_engine_qp_reset(struct ibvd_qp *qp);
/* qp's AV was set (at its RTR, or SQD to SQD); write lock held. */
void ibvd_engine_qp_av_changed(struct ibvd_qp *qp);
/* qp's PSNs as they are now (ibv_query_qp); write lock held. */
void ibvd_engine_qp_psns(const struct ibvd_qp *qp, uint32_t *sq_psn,
			 uint32_t *rq_psn);
/*
 * qp is about to enter RTR, write lock held: its wire transport's state
 * is made, of *bytes (0: none); 0 or a negative errno.  Unprepare undoes
 * it while qp has not moved yet; later a reset or destroy does.
 */
int ibvd_engine_qp_prepare(struct ibvd_qp *qp, size_t *bytes);
void ibvd_engine_qp_unprepare(struct ibvd_qp *qp);

/*
 * qp is being destroyed (DESTROY_QP or its context's teardown), objects
 * lock held for writing: what ibvd_engine_qp_reset does, and the engine's
 * per-QP state is freed.
 */
void ibvd_engine_qp_destroy(struct ibvd_qp *qp);

/*
 * The SRQ XRC target tgt took its last message's receive WQE from is
 * destroyed (objects lock held for writing): a WQE tgt holds for a
 * message still arriving went with it, and the rest of the message finds
 * no SRQ.
 */
void ibvd_engine_xrc_srq_gone(struct ibvd_qp *tgt);

/*
 * XRC target tgt changes owner (objects lock held for writing): it leaves
 * the old context's thread before (its timer, if it waits) and is rung
 * in the new one's after.
 */
void ibvd_engine_xrc_owner_leaves(struct ibvd_qp *tgt);
void ibvd_engine_xrc_owner_came(struct ibvd_qp *tgt);

/*
 * Counters (counters.c), read for ibvctl statistic show; what each one
 * counts in this engine is in counters.c and ibvctl-statistic(8).
 *
 * Per device port, with rdma's rxe counter names, in rxe's order.
 */
enum ibvd_port_counter {
	IBVD_PC_SENT_PKTS,
	IBVD_PC_RCVD_PKTS,
	IBVD_PC_DUPLICATE_REQUEST,
	IBVD_PC_OUT_OF_SEQ_REQUEST,
	IBVD_PC_RCVD_RNR_ERR,
	IBVD_PC_SEND_RNR_ERR,
	IBVD_PC_RCVD_SEQ_ERR,
	IBVD_PC_ACK_DEFERRED,
	IBVD_PC_RETRY_EXCEEDED_ERR,
	IBVD_PC_RETRY_RNR_EXCEEDED_ERR,
	IBVD_PC_COMPLETER_RETRY_ERR,
	IBVD_PC_SEND_ERR,
	IBVD_PC_LINK_DOWNED,
	IBVD_PC_RDMA_SENDS,
	IBVD_PC_RDMA_RECVS,
	IBVD_PC_MAX
};

/* Per engine thread. */
enum ibvd_engine_counter {
	IBVD_EC_PASSES,
	IBVD_EC_TURNS,
	IBVD_EC_WQES,
	IBVD_EC_BYTES,
	IBVD_EC_SLEEPS,
	IBVD_EC_WAKEUPS,
	IBVD_EC_TIMERS,
	IBVD_EC_CROWDED,
	IBVD_EC_RNR_WAIT_US,
	IBVD_EC_MEM_CALLS,
	IBVD_EC_CLAIM_TIMEOUTS,
	IBVD_EC_UD_PARKED,
	IBVD_EC_PURGE_SLOTS,
	IBVD_EC_BUSY_PASSES,
	IBVD_EC_DEFERRED,
	IBVD_EC_DIRECT_BYTES,
	IBVD_EC_MAX
};

struct ibvd_device;

extern const char *const ibvd_port_counter_names[IBVD_PC_MAX];
extern const char *const ibvd_engine_counter_names[IBVD_EC_MAX];

/*
 * Port port_num of dev since the daemon started (or since the device
 * appeared): its contexts now open and every one closed before.
 */
void ibvd_engine_port_counters(const struct ibvd_device *dev,
			       unsigned int port_num, uint64_t out[IBVD_PC_MAX]);

/* The number of engine threads running. */
unsigned int ibvd_engine_threads(void);

/*
 * Engine thread `index` (< ibvd_engine_threads()): its counters and the
 * number of contexts it serves now.
 */
void ibvd_engine_thread_counters(unsigned int index, uint64_t out[IBVD_EC_MAX],
				 unsigned int *contexts);

#endif /* IBVD_ENGINE_H */
