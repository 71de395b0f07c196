/*
 * What the engine's files share (daemon/engine/).  Nothing outside the
 * engine includes this; the daemon's interface is engine.h.
 *
 * Vocabulary:
 * - the *serving thread* of a QP is the engine thread its context is
 *   attached to; only it runs the QP's send queue (requester side), so the
 *   "engine" fields of struct ibvd_qp need no lock.
 * - the *responder* side (receive queue, SRQ, target memory, CQEs) runs on
 *   whatever thread executes the sender's WQE, under the object's own lock
 *   (objects.h): recv_lock or srq->lock first, then cq->lock.
 * - every engine function runs with ibvd_objects_lock held for reading, so
 *   no object it reaches can be destroyed under it.
 *
 * Functions return 0 or a negative errno, or, where the outcome is a work
 * completion, an enum ibv_wc_status (IBV_WC_SUCCESS is 0).
 */
#ifndef IBVD_ENGINE_INTERNAL_H
#define IBVD_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "core/objects.h"
#include "engine.h"
#include "ring.h"
#include "transport.h"

struct ibvd_engine;

/* ---- tunables ------------------------------------------------------------ */

/* Bounce buffer per thread: big copies go through it in chunks this size. */
#define ENG_BOUNCE_BYTES	(256u << 10)
/* Empty passes an idle thread spins through before it sleeps. */
#define ENG_SPIN_NS		(100u * 1000u)
/* The same when the CPUs have no idle time to spare (engine.c). */
#define ENG_SPIN_CONTENDED_NS	(5u * 1000u)
/* The scheduler slice engine threads ask for (engine.c). */
#define ENG_SLICE_NS		(100u * 1000u)
/* How often that is judged, from /proc/stat. */
#define ENG_LOAD_WINDOW_NS	(50ull * 1000 * 1000)
/*
 * How often a thread that is awake looks at its receive sides (a system
 * call); asleep, an arriving packet wakes it at once.
 */
#define ENG_RX_LOOK_NS		(10u * 1000u)
/*
 * A transfer longer than a chunk runs as several steps of at most that
 * many bytes, one per turn of its QP (chunk.c), so the time one step holds
 * the thread bounds the wait of every other QP's small message: 128 KiB is
 * ~40 us at the engine's ~3.5 GB/s copy rate, against a ~8 us small-message
 * round trip, while its two copy system calls (~1 us) still cost under 3 %
 * of the bandwidth.  IBVERBSD_ENGINE_CHUNK_KB changes it (0: no chunking,
 * for comparison; engine.c).
 */
#define ENG_CHUNK_BYTES		(128u << 10)
/*
 * WQEs and bytes one QP may execute per pass before the next QP's turn:
 * one chunk, so a turn is never longer than one step of a big transfer.
 */
#define ENG_QP_BUDGET_WQES	32u
#define ENG_QP_BUDGET_BYTES	ENG_CHUNK_BYTES
/*
 * What one tenant's QPs may spend in one pass of a thread before the rest
 * of them wait for the next (engine.c, "Fairness between tenants"): four
 * chunks, about 150 us of copying, counting each WQE retired (and each
 * turn) as ENG_WQE_COST bytes, about what its handling costs against a
 * copy.  At most ENG_PASS_TENANTS tenants a pass are counted; more go
 * uncounted.
 */
#define ENG_TENANT_PASS_COST	(4u * ENG_CHUNK_BYTES)
#define ENG_WQE_COST		2048u
#define ENG_PASS_TENANTS	64u
/* The byte budget when chunking is switched off (as before chunking). */
#define ENG_UNCHUNKED_BUDGET_BYTES	(4u << 20)
/* What a destroyed QP's SQ may still move (ibvd_engine_qp_finish_sends). */
#define ENG_FINISH_BYTES		(16u << 20)
/*
 * What all the QPs of a context that goes may still do, shared
 * (ibvd_engine_ctx_finish_sends): a destroyed QP's bytes, and 4,096
 * turns (of ENG_QP_BUDGET_WQES WQEs at most each), a turn each for as
 * many QPs with a last send, those whose front WQE a turn finishes and
 * the shortest queues first (a turn of a long WQE moves a chunk: the
 * bytes last about 128 of those; attach.c).
 */
#define ENG_CTX_FINISH_BYTES		ENG_FINISH_BYTES
#define ENG_CTX_FINISH_TURNS		4096u
/* Ports a context keeps counters for (at least IBVD_MAX_PORTS, counters.c). */
#define ENG_PORTS		8u
/* Size of the GRH a UD receive buffer starts with. */
#define ENG_GRH_BYTES		40u
/* Retry period of a transport retry whose QP timeout is 0 (infinite). */
#define ENG_RETRY_FOREVER_NS	(100ull * 1000 * 1000)
/*
 * Longest a QP waits on its tenant's bandwidth before it asks the bucket
 * again: a limit lifted or raised meanwhile (ibvctl limit set, a reload)
 * then frees it within this, whatever the old rate promised.
 */
#define ENG_RATE_RECHECK_NS	(50ull * 1000 * 1000)

/* ---- memory.c: the bytes of registered memory --------------------------- */

/*
 * Which side of a copy failed, and how: a fault (an address its process
 * does not map, a file that lost its pages), or the process gone, its mm
 * torn down before the daemon tore down its objects.  A responder whose
 * process is gone answers nothing, as a NIC whose host died: its
 * requesters retry, then fail with RETRY_EXC_ERR.
 */
enum eng_copy_result {
	ENG_COPY_OK = 0,
	ENG_COPY_SRC_FAULT,
	ENG_COPY_DST_FAULT,
	ENG_COPY_SRC_GONE,
	ENG_COPY_DST_GONE,
};

/*
 * Copy len bytes from src to dst, starting dst_off bytes into dst, with as
 * few copies as the two sides' tiers allow.  The caller checked both lists
 * are long enough.
 */
enum eng_copy_result ibvd_eng_copy(struct ibvd_engine *eng,
				   const struct eng_sgl *dst, uint64_t dst_off,
				   const struct eng_sgl *src, uint64_t len);
/* The same, starting src_off bytes into src (one chunk of a message). */
enum eng_copy_result ibvd_eng_copy_at(struct ibvd_engine *eng,
				      const struct eng_sgl *dst, uint64_t dst_off,
				      const struct eng_sgl *src, uint64_t src_off,
				      uint64_t len);

/* Append a private buffer as a segment. */
void ibvd_eng_sgl_private(struct eng_sgl *sgl, const void *buf, uint64_t len);

/*
 * Read the 64-bit word at seg into *old and store apply(arg, *old) there
 * unless that is *old: 0, -EFAULT if the memory failed, -ESRCH if its
 * process is gone.  Not atomic by itself: the caller holds
 * ibvd_eng_atomic_lock.
 */
int ibvd_eng_word_rmw(const struct eng_seg *seg,
		      uint64_t (*apply)(const void *arg, uint64_t old),
		      const void *arg, uint64_t *old);

/* ---- wqe.c: copy, then validate ------------------------------------------ */

/*
 * Copy the send WQE at ring slot index `counter` of qp's SQ into req and
 * validate it against qp (type, caps, keys).  Returns IBV_WC_SUCCESS or the
 * status its completion must carry; req->w always holds the header (for
 * wr_id and opcode; zeroes if the queue's stride could not hold one).
 */
enum ibv_wc_status ibvd_eng_send_take(struct ibvd_engine *eng,
				      struct ibvd_qp *qp, uint32_t counter,
				      struct eng_req *req);

/* Copy only the wr_id and opcode of a send WQE (flushing). */
void ibvd_eng_send_peek(const struct ibvd_qp *qp, uint32_t counter,
			uint64_t *wr_id, uint32_t *opcode);

/*
 * Copy the receive WQE at slot `counter` of ring and validate it: at most
 * max_sge SGEs, each in an MR of pd with local write access.
 */
void ibvd_eng_recv_take(const struct ibvd_ring *ring, uint32_t counter,
			uint32_t max_sge, const struct ibvd_pd *pd,
			struct eng_recv *out);

/* ---- mw.c: memory windows ------------------------------------------------ */

/* Execute a BIND_MW WQE of qp: IBV_WC_SUCCESS or IBV_WC_MW_BIND_ERR. */
enum ibv_wc_status ibvd_eng_bind_mw(const struct ibvd_qp *qp,
				    const struct ibvd_send_wqe *w);

/* LOCAL_INV of key by qp: IBV_WC_SUCCESS or IBV_WC_MW_BIND_ERR. */
enum ibv_wc_status ibvd_eng_local_inv(const struct ibvd_qp *qp, uint32_t key);

/*
 * The MR behind window key rkey if the window, bound, lets target's side
 * do `access` on [*raddr, *raddr + len); else NULL.  A zero-based window's
 * *raddr is an offset into it, and becomes the MR's address.
 */
const struct ibvd_mr *ibvd_eng_mw_resolve(const struct ibvd_qp *target,
					  uint32_t rkey, uint64_t *raddr,
					  uint64_t len, uint32_t access);

/* The segment of [iova, iova + len) of mr, in range, to write if `write`. */
void ibvd_eng_seg_of(const struct ibvd_mr *mr, uint64_t iova, uint64_t len,
		     bool write, struct eng_seg *s);

/*
 * Resolve n SGEs (private copies) against pd, for writing if `write`:
 * IBV_WC_SUCCESS or IBV_WC_LOC_PROT_ERR.
 */
enum ibv_wc_status ibvd_eng_sges_resolve(const struct ibvd_sge *sge,
					 unsigned int n,
					 const struct ibvd_pd *pd, bool write,
					 struct eng_sgl *out);

/* ---- completion.c: CQEs, completion events, async events ---------------- */

/*
 * Write cqe (its seq is filled here) to cq and raise a completion event if
 * the client armed one that this CQE satisfies.  0, or -ENOSPC when the CQ
 * overran (the caller moves its QP to ERR).
 */
int ibvd_eng_cq_push(struct ibvd_cq *cq, struct ibvd_qp *qp,
		     struct ibvd_cqe *cqe, bool solicited);

/*
 * Mark qp's CQEs in cq that the client has not polled yet IBVD_CQE_PURGED
 * (ring.h), but for the receives it took from an SRQ.  Objects lock held
 * for writing, so no engine thread adds any of qp's meanwhile.
 */
void ibvd_eng_cq_purge(struct ibvd_cq *cq, struct ibvd_qp *qp);

/*
 * Send cq's armed event without a CQE of ours: a library has completions
 * of its own there (the direct transport's sends).  _nudge: a successful
 * one, and only if the CQ is still armed with `arm` (what the library
 * asked for); _nudge_failed: a failed one, on whatever arm there is.
 */
void ibvd_eng_cq_nudge(struct ibvd_cq *cq, uint32_t arm);
void ibvd_eng_cq_nudge_failed(struct ibvd_cq *cq);

/* The control side's hooks (engine.h), set once at ibvd_engine_start. */
extern const struct ibvd_engine_events *ibvd_eng_events;

/* Send an asynchronous event about object `handle` to ctx (thread-safe). */
void ibvd_eng_async(struct ibvd_context *ctx, uint32_t event, uint32_t handle);

/* ---- direct.c: the direct transport's rings (common/transit.h) ---------- */

/* What placing a direct QP's ring came to. */
enum eng_drain {
	DRAIN_EMPTY,			/* nothing (left) in it */
	DRAIN_WAIT,			/* the receiver has no WQE: an RNR wait */
	DRAIN_BUSY,			/* its library holds the claim: soon */
	DRAIN_MORE,			/* the budget ran out: another turn */
	DRAIN_FAILED,			/* the sender's QP went to ERR */
	DRAIN_UNANSWERED,		/* nobody takes them: src's retries run */
};

/*
 * Place what src's library left in the ring src sends on, in order, into
 * its peer's RQ (rnr_timer: the receiver's, for DRAIN_WAIT).  requester:
 * src's own turn, which RNR-NAKs a message with no WQE to go to.
 */
enum eng_drain ibvd_eng_direct_drain(struct ibvd_engine *eng,
				     struct ibvd_qp *src, bool requester,
				     uint8_t *rnr_timer);
/* qp's doorbell rang: place what its peer left in the ring to it. */
void ibvd_eng_direct_rung(struct ibvd_engine *eng, struct ibvd_qp *qp);
/*
 * qp is being destroyed: place what its peer left in the ring to it, as
 * far as its posted receives go (a NIC took those on arrival).
 */
void ibvd_eng_direct_take_last(struct ibvd_engine *eng, struct ibvd_qp *qp);
/*
 * The same a turn at a time, for a context's teardown, which charges
 * them to its budget: false if the peer's ring holds nothing for qp,
 * else *end, the most its turns take (what it holds now).
 */
bool ibvd_eng_direct_last_end(const struct ibvd_qp *qp, uint64_t *end);
/*
 * One turn of it (as an engine turn places, a turn's bytes and the first
 * message whole), adding the bytes it placed to *placed: true if there
 * may be more to take up to end.
 */
bool ibvd_eng_direct_take(struct ibvd_engine *eng, struct ibvd_qp *qp,
			  uint64_t end, uint64_t *placed);
/* qp is in ERR: the SENDs its library has in the ring are flushed. */
void ibvd_eng_direct_flush(struct ibvd_qp *qp);
/* qp enters an error state: the pair's grants (common/lease.h) are void. */
void ibvd_eng_direct_void(struct ibvd_qp *qp);
/*
 * qp's peer went away: if SENDs wait in qp's ring, the first of them
 * fails with RETRY_EXC_ERR (they are older than anything in its SQ);
 * true if so.
 */
bool ibvd_eng_direct_break(struct ibvd_qp *qp);
/*
 * The claim on a direct QP's SQ (ring.h), held while the engine runs the
 * SQ and while a WQE is started: the library moves SENDs the engine has
 * not started to the ring only without it.  Taking it skips what the
 * library moved.  false: the library holds it (try later).  Not a direct
 * QP: nothing to take, true.
 */
bool ibvd_eng_sq_claim(struct ibvd_qp *qp);
void ibvd_eng_sq_unclaim(struct ibvd_qp *qp);
/*
 * The claim on a direct QP's RQ (ring.h): take it with the library's head
 * (0, -EBUSY, or -EPROTO for a head the library could not have left), and
 * give it back with the engine's.
 */
int ibvd_eng_claim_take(struct ibvd_qp *t);
void ibvd_eng_claim_give(struct ibvd_qp *t);
/*
 * Before taking a WQE of t's RQ: the claim if t is direct.  1 taken, 0 not
 * needed, -EBUSY, or -EPROTO (t went to ERR); unclaim with the same value.
 */
int ibvd_eng_rq_claim(struct ibvd_qp *t);
/* t's SRQ takes the claim for every message delivered into it. */
bool ibvd_eng_srq_claimed(const struct ibvd_qp *t);
/*
 * SRQ limit, srq's lock held: one event when the posted count drops below
 * the armed limit.
 */
void ibvd_eng_srq_limit_check(struct ibvd_srq *srq);
void ibvd_eng_rq_unclaim(struct ibvd_qp *t, int held);
/* What takes a WQE of target's RQ for req, with its claim held. */
typedef enum eng_resp (*eng_delivery)(struct ibvd_engine *eng,
				      struct ibvd_qp *src,
				      struct ibvd_qp *target,
				      const struct eng_req *req);
/* deliver under target's RQ claim: RESP_BUSY while its library holds it. */
enum eng_resp ibvd_eng_rq_claimed(eng_delivery deliver, struct ibvd_engine *eng,
				  struct ibvd_qp *src, struct ibvd_qp *target,
				  const struct eng_req *req);

/* ---- qp_state.c: QP states, flushes, timers, ports ---------------------- */

/* An RC/UC peer (ibvd_transport.peer) able to receive, or NULL. */
struct ibvd_qp *ibvd_eng_connected_peer(const struct ibvd_qp *src);

/*
 * Move qp to ERR (from any thread) and make its serving thread flush it.
 * Returns true if this call made the transition.
 */
bool ibvd_eng_qp_error(struct ibvd_qp *qp);

/*
 * Tell the client, through the queues' engine pages, that qp is in ERR
 * (both queues) or SQE (the SQ): what it posts now is only flushed, so it
 * must ring the doorbell even for receives.
 */
void ibvd_eng_mark_stopped(struct ibvd_qp *qp);

/* UC/UD send-side error: RTS -> SQE (the RQ keeps working). */
void ibvd_eng_qp_sq_error(struct ibvd_qp *qp);

/* Port LID and GID[sgid_index] of qp's port (GID: network order). */
uint16_t ibvd_eng_port_lid(const struct ibvd_qp *qp);
void ibvd_eng_port_gid(const struct ibvd_qp *qp, uint8_t sgid_index,
		       uint8_t gid[16]);

/* The ibv_wc_opcode of a send WQE's completion. */
uint32_t ibvd_eng_wc_opcode(uint32_t wr_opcode);

/*
 * Flush the outstanding WQEs of qp (which is in ERR, or SQE: SQ only),
 * ENG_FLUSH_WQES of each queue in one turn at most, as a turn runs at
 * most ENG_QP_BUDGET_WQES: a client that keeps filling the rings of QPs
 * in error must not hold the thread (and, through the objects lock, the
 * rest of the daemon).  0 when the queue is empty; -EAGAIN when more is
 * left, for another turn; the RQ's -EBUSY when it must wait: a direct
 * QP's library holds its claim (ring.h), or a receive CQE of the QP's
 * waits for its sender's completion (recv.c).
 */
#define ENG_FLUSH_WQES		256u
int ibvd_eng_flush_sq(struct ibvd_qp *qp);
int ibvd_eng_flush_rq(struct ibvd_qp *qp);

/* ---- recv.c: the responder's receive queues ------------------------------ */

/*
 * Under rq->lock: consume the peeked WQE and complete it on target's
 * receive CQ (opcode, byte_len, flags from the caller; source fields from
 * src and av).
 */
struct eng_rcv_info {
	uint32_t opcode;		/* IBV_WC_RECV or IBV_WC_RECV_RDMA_WITH_IMM */
	uint32_t byte_len;
	uint32_t wc_flags;		/* IBV_WC_GRH; WITH_IMM is added here */
	bool solicited;
};
/* A message's receive CQEs wait for its sender's completion (recv.c). */
void ibvd_eng_recv_defer_begin(const struct ibvd_qp *src);
void ibvd_eng_recv_defer_end(const struct ibvd_qp *src);
bool ibvd_eng_recv_deferred(struct ibvd_qp *qp);
bool ibvd_eng_recv_keep_claim(struct ibvd_qp *t);
void ibvd_eng_recv_complete(struct ibvd_qp *target, const struct eng_rq *rq,
			    const struct eng_recv *rwqe,
			    const struct ibvd_qp *src, const struct eng_req *req,
			    const struct eng_rcv_info *info);

/* The CQE alone, for a WQE consumed earlier (a chunked message's). */
void ibvd_eng_recv_cqe(struct ibvd_qp *target, uint64_t wr_id,
		       const struct ibvd_qp *src, const struct eng_req *req,
		       const struct eng_rcv_info *info);

/*
 * recv.c: what an RC/UC requester hears when target has no receive WQE to
 * take (peek_ret from ibvd_eng_rq_peek: < 0 the RQ is broken and the
 * responder errs; 0 it is empty: RC RNR NAK, UC silent drop).  Called with
 * the RQ's lock held.
 */
enum eng_resp ibvd_eng_no_recv(struct ibvd_qp *src, struct ibvd_qp *target,
			       struct eng_rq *rq, int peek_ret);

/* ---- chunk.c: messages that take several turns ----------------------------- */

/*
 * The responder's context of a chunked SEND or WRITE_WITH_IMM (struct
 * ibvd_qp's `inbound`, the target's, under its receive lock): the receive
 * WQE the first step consumed, and the message it belongs to.  Its SGEs
 * are kept as posted and resolved again at every step: between turns the
 * objects lock is released and the receiver may deregister its MRs.
 */
struct eng_inbound {
	bool active;			/* a receive WQE is held */
	/* its message: sender (compared only) and the sender's number for
	 * it; src NULL: a UC message was cut short, the WQE waits for the
	 * next one; src the QP itself: a wire transport's message
	 * (ibvd_eng_wire_hold, transport.h) */
	const struct ibvd_qp *src;
	uint32_t src_qpn;
	uint32_t seq;
	uint64_t wr_id;
	unsigned int nsge;
	struct ibvd_sge sge[ENG_MAX_SGE];
};

/* Current chunk size in bytes (UINT64_MAX: chunking off) and turn budget. */
extern uint64_t ibvd_eng_chunk_bytes;
extern uint64_t ibvd_eng_turn_bytes;

/*
 * Set req->off and req->step for the next step of src's WQE in front:
 * IBV_WC_SUCCESS, or the status that fails the WQE (the client rewrote
 * its length or opcode in the ring after the first step).
 */
enum ibv_wc_status ibvd_eng_chunk_plan(struct ibvd_qp *src,
				       struct eng_req *req);

/*
 * Under rq->lock, once the first step's bytes are in rwqe (peeked from
 * rq): consume it and hold it at target for src's message.  RESP_OK, or
 * what a NIC out of resources answers (the WQE stays posted).
 */
enum eng_resp ibvd_eng_hold(struct ibvd_qp *src, struct ibvd_qp *target,
			    const struct eng_rq *rq, const struct eng_recv *rwqe);

/*
 * Under target's receive lock: the WQE target holds for src's message in
 * front, or NULL if it holds none (flushed, or the first step took none).
 */
struct eng_inbound *ibvd_eng_held(const struct ibvd_qp *src,
				  const struct ibvd_qp *target);

/* Under the lock, last step: it completes (byte_len = the message). */
void ibvd_eng_held_complete(struct ibvd_qp *src, struct ibvd_qp *target,
			    const struct eng_req *req,
			    const struct eng_rcv_info *info);

/*
 * Under the lock: the data could not be placed (status for the receiver,
 * e.g. LOC_PROT_ERR): it completes with that and target goes to ERR.
 */
void ibvd_eng_held_fail(struct ibvd_qp *src, struct ibvd_qp *target,
			enum ibv_wc_status status);

/*
 * src gives its message in front up (its WQE failed or was flushed, src
 * was reset or destroyed), no receive lock held.  A WQE its responder
 * holds for it: RC completes it with REM_ABORT_ERR and the responder goes
 * to ERR (WR_FLUSH_ERR if it is there already); UC keeps it for the next
 * message.  src's record of the message is cleared.
 */
void ibvd_eng_held_abort(struct ibvd_qp *src);

/*
 * Responder side, under qp's receive lock: the WQE qp holds, if any,
 * completes with WR_FLUSH_ERR (`flush`) or is forgotten, and qp no longer
 * holds one.  Before the rest of a flush, which is posted later.
 */
void ibvd_eng_inbound_flush(struct ibvd_qp *qp, bool flush);

/*
 * RESET or destroy, objects lock held for writing: qp gives up the message
 * in front (ibvd_eng_held_abort) and forgets a WQE it holds as responder
 * (one taken from an SRQ completes with WR_FLUSH_ERR).
 */
void ibvd_eng_chunk_forget(struct ibvd_qp *qp);

/* Under rq->lock: the WQE qp kept (UC) into *out, if there is one. */
bool ibvd_eng_kept_peek(const struct ibvd_qp *qp, const struct ibvd_pd *pd,
			struct eng_recv *out);
/* Under rq->lock: consume the kept WQE just peeked, if that is what it was. */
bool ibvd_eng_kept_take(struct ibvd_qp *qp);

/* ---- send.c: the requester ------------------------------------------------ */

/*
 * Run qp's send queue (and flushes) for one turn of the serving thread;
 * returns the bytes the turn moved from the SQ.
 */
uint64_t ibvd_eng_qp_run(struct ibvd_engine *eng, struct ibvd_qp *qp,
			 uint64_t now);

/*
 * What the last sends of a QP that goes (DESTROY_QP), or the last
 * messages of all the QPs of a context that goes (their SQs' and the
 * peers' direct rings towards them), may still do on the control thread,
 * every tenant waiting: turns left and bytes left to move.
 */
struct ibvd_finish_budget {
	uint64_t turns;
	uint64_t bytes;
};

/* A QP that goes, with last messages to finish. */
struct ibvd_finishing {
	struct ibvd_qp *qp;
	uint64_t last_end;	/* the peer's direct ring, taken up to here */
	uint32_t head0;		/* its SQ head before its first turn */
	uint32_t queued;	/* WQEs in its SQ then (turn order) */
	uint64_t front;		/* bytes its front WQE had left then */
	bool taking;		/* the peer's direct ring has more for it */
	bool sending;		/* its SQ may run on */
	bool first;		/* no turn yet */
};

/*
 * Before qp's last turns (objects lock held for writing): what they are
 * to do, the peer's direct ring's SENDs it has receives for, and its SQ
 * towards a peer that takes what it sends now; false: nothing.
 */
bool ibvd_eng_finish_begin(struct ibvd_qp *qp, struct ibvd_finishing *f);
/*
 * One of f's last turns, charged to budget: a turn's placing from the
 * peer's direct ring, then a turn of its SQ; false when the QP is done
 * or must wait.
 */
bool ibvd_eng_finish_turn(struct ibvd_finishing *f,
			  struct ibvd_finish_budget *budget);

/* ---- doorbell.c: the context page ------------------------------------------ */

/* A context page as its engine thread sees it. */
struct eng_doorbell {
	void *map;			/* IBVD_CTX_PAGE_SIZE bytes */
	struct ibvd_ctx_engine *engine_page;
	struct ibvd_ctx_client *client_page;	/* untrusted */
	int kick_fd;			/* eventfd the client writes */
	/* The engine's: the bit the next drain reports first (round robin). */
	uint32_t resume;
};

/* A sealed memfd holding a fresh context page, mapped; and the eventfd. */
int ibvd_eng_db_create(struct eng_doorbell *db, int *page_fd);
void ibvd_eng_db_destroy(struct eng_doorbell *db);

/*
 * Take every rung bit of db (atomic exchanges: a bit set during the scan
 * stays for the next one) and call fn(bit, arg) for each, in order from
 * db->resume round to the bit before it; returns how many.
 */
unsigned int ibvd_eng_db_drain(struct eng_doorbell *db,
			       void (*fn)(uint32_t bit, void *arg), void *arg);

/*
 * Ring `bit` the way a client does (engine or control thread making a QP's
 * serving thread look at it); true if that thread may sleep, when the
 * caller wakes it through its own eventfd (ibvd_eng_wake), never the
 * client's kick eventfd (doorbell.c).
 */
bool ibvd_eng_db_ring(struct eng_doorbell *db, uint32_t bit);

/*
 * The engine half of the sleep protocol (ring.h): set `sleeping` in every
 * page, full fence, then look for doorbells.  Returns true if none rang
 * (the caller may block; the pages stay marked), false after clearing the
 * marks again if work arrived.
 */
bool ibvd_eng_db_arm(struct eng_doorbell *const *dbs, unsigned int n);

/* Clear `sleeping` in every page (the thread is awake again). */
void ibvd_eng_db_disarm(struct eng_doorbell *const *dbs, unsigned int n);

/* ---- timer.c: deadlines of QPs waiting for RNR, a retry or the rate ------- */

struct eng_timer {
	uint64_t deadline;		/* CLOCK_MONOTONIC ns */
	struct ibvd_qp *qp;		/* its timer_slot points back here */
};

struct eng_timers {
	struct eng_timer *heap;
	unsigned int n, cap;
};

/* ---- direct/ud_park.c: datagrams waiting for a receiver's claim ---------- */

/*
 * A UD datagram to a local QP whose library held its receive claim (recv.c):
 * what the receive will say, taken from the sender when it was parked (the
 * sender may be gone by the time it lands), and its bytes.
 */
struct eng_parked {
	uint64_t since;			/* ns, when it was parked */
	uint32_t target_qpn;		/* looked up again at each try */
	uint32_t target_gen;		/* its incarnation then */
	uint32_t qkey;
	struct eng_rcv_done done;	/* the receive's completion */
	bool global;			/* grh fills the GRH slot */
	uint8_t grh[ENG_GRH_BYTES];
	uint32_t len;
	uint8_t payload[];
};

/* An engine thread's parked datagrams, oldest first (that thread's only). */
struct eng_park {
	struct eng_parked **q;
	struct eng_park_key {		/* q[i]'s, scanned without q[i] */
		uint32_t qpn;
		const void *owner;	/* its receiver's account, compared only */
	} *keys;
	unsigned int n;
	uint64_t bytes;			/* their payloads */
	uint64_t retry_at;		/* ns: the next try, while n > 0 */
	unsigned int idle_tries;	/* tries in a row that placed nothing */
};

/* Datagrams parked for QP number qpn on this thread. */
unsigned int ibvd_eng_park_holds(const struct ibvd_engine *eng, uint32_t qpn);

/* Is there room for one more of len bytes, for a receiver of account owner? */
bool ibvd_eng_park_room(struct ibvd_engine *eng, const void *owner,
			uint32_t len);

/* Keep p (room checked): the thread tries to place it from its next pass. */
void ibvd_eng_park_push(struct ibvd_engine *eng, struct eng_parked *p,
			const void *owner);

/*
 * Try the parked datagrams whose time has come, in order: returns how
 * many were placed or dropped.
 */
unsigned int ibvd_eng_park_run(struct ibvd_engine *eng);

/* When the thread must look at its parked datagrams again: ns, or 0. */
uint64_t ibvd_eng_park_next(const struct ibvd_engine *eng);

void ibvd_eng_park_free(struct eng_park *park);

/*
 * recv.c, for direct/ud_park.c: place p in t (its receiver, looked up)
 * under t's claim.  PARK_BUSY: the claim is still held; PARK_GONE:
 * placed, or dropped as a datagram is (a state or Q_Key it does not take,
 * no receive).
 */
enum eng_unpark {
	PARK_GONE,
	PARK_BUSY,
};
enum eng_unpark ibvd_eng_ud_unpark(struct ibvd_engine *eng, struct ibvd_qp *t,
				   const struct eng_parked *p);

/* recv.c: a datagram for t waited too long; t's queue is held out. */
void ibvd_eng_ud_park_expired(struct ibvd_engine *eng, struct ibvd_qp *t);

/* Wake eng's thread if the caller is another (engine.c). */
void ibvd_eng_wake(struct ibvd_engine *eng);

/*
 * Set qp's one timer to deadline, earlier or later than before: 0, or
 * -ENOMEM (qp then has no timer).
 */
int ibvd_eng_timer_set(struct eng_timers *t, struct ibvd_qp *qp,
		       uint64_t deadline);
/* qp has no timer any more (it may have had none). */
void ibvd_eng_timer_cancel(struct eng_timers *t, struct ibvd_qp *qp);
/* Earliest deadline, or 0 if none. */
uint64_t ibvd_eng_timer_next(const struct eng_timers *t);
/* Remove and return a QP whose timer is due at now, or NULL. */
struct ibvd_qp *ibvd_eng_timer_pop(struct eng_timers *t, uint64_t now);
void ibvd_eng_timer_free(struct eng_timers *t);

/* ---- load.c: may an idle thread spin? --------------------------------------- */

struct eng_load {
	int stat_fd;			/* /proc/stat, or -1 */
	int loadavg_fd;			/* /proc/loadavg, or -1 */
	unsigned long ncpus;
	bool busy;			/* no idle CPU time in the last window */
	uint64_t checked;		/* when `busy` was judged */
	unsigned long long total, idle;	/* /proc/stat then */
};

void ibvd_eng_load_init(struct eng_load *l);
void ibvd_eng_load_fini(struct eng_load *l);

/*
 * Would spinning now keep another runnable thread off a CPU?  now is
 * CLOCK_MONOTONIC ns; cheap enough to ask once per idle period.
 */
bool ibvd_eng_crowded(struct eng_load *l, uint64_t now);

/* ---- engine.c, attach.c: threads and the contexts they serve ---------------- */

/* An RC connection into a dying context: (survivor, dead) QP numbers. */
struct eng_orphan {
	uint32_t survivor;
	uint32_t dead;
};

/* Per-context engine state (struct ibvd_context's `engine`). */
struct ibvd_ectx {
	struct ibvd_context *ctx;
	struct ibvd_eng_rate *rate;	/* its tenant's bandwidth (a reference) */
	struct ibvd_engine *eng;	/* serving thread; NULL once detached */
	struct eng_doorbell db;
	unsigned int slot;		/* index in eng->dbs */
	bool going;			/* torn down: no turns (write lock) */
	/* teardown: peers in other contexts to tell once our QPs are gone */
	struct eng_orphan *orphans;
	unsigned int norphans;
	/* counters.c: its ports' counters, relaxed atomic adds from any thread */
	uint64_t port_ctr[ENG_PORTS][IBVD_PC_MAX];
};

struct ibvd_engine {
	pthread_t thread;
	unsigned int index;
	int epfd;
	int wake_fd;			/* eventfd: stop, control-path kicks */
	struct eng_load load;		/* is spinning idle fair? */
	bool stop;			/* atomic */
	bool armed;			/* pages say "sleeping" (objects lock) */

	/* contexts served; changed under the objects lock held for writing */
	struct eng_doorbell **dbs;
	struct ibvd_ectx **ectxs;
	unsigned int nctx, cap;
	unsigned int first_ctx;		/* the next pass drains it first */

	struct eng_timers timers;	/* this thread's (or write lock) */
	uint8_t *bounce;		/* ENG_BOUNCE_BYTES */
	uint8_t *wqe_buf;		/* scratch copy of one send WQE */
	size_t wqe_buf_len;
	uint64_t now;			/* CLOCK_MONOTONIC ns at the pass start */
	/* the control thread rang a QP (a state change), not a client */
	bool control_kick;		/* atomic */

	/* receive sides drained here (transport.h); under the write lock */
	int rx_epfd;			/* epoll over their fds, in epfd */
	struct ibvd_eng_rx *rx[IBVD_MAX_DEVICES];
	unsigned int nrx;
	uint64_t rx_looked;		/* when they were last looked at */
	bool rx_due;			/* atomic: look at the next pass */

	/* statistics, this thread's only */
	uint64_t passes, wqes, sleeps, crowded;
	uint64_t rnr_wait_us;		/* RNR NAK waits scheduled, summed */
	/* the same, counters.c; all of them read by the control thread */
	uint64_t turns, bytes, wakeups, timers_fired;
	uint64_t busy_passes;		/* passes that gave a QP a turn (engine.c) */
	uint64_t deferred;		/* turns put off to the next pass (engine.c) */
	/* bytes of messages it placed out of direct rings (direct/direct.c;
	 * also the control thread's, write lock held) */
	uint64_t direct_bytes;
	uint64_t direct_msgs;		/* and how many (a pass's shares) */
	uint64_t mem_calls;		/* system calls on clients' memory */
	uint64_t claim_timeouts;	/* UD receive claims waited out (recv.c) */
	/* CQ slots a RESET or destroy of one of its QPs looked at for the
	 * QP's CQEs (completion.c; the control thread, write lock held) */
	uint64_t purge_slots;
	uint64_t ud_parked;		/* datagrams parked (direct/ud_park.c) */
	struct eng_park park;		/* direct/ud_park.c */
	/* ns this pass may still spend waiting for UD receive claims (recv.c) */
	uint64_t claim_wait_left;
	uint64_t copies_charged;	/* this step's extra copies (send.c) */
	uint64_t ask_by_ns;		/* this step's earlier ask, 0: none (send.c) */
};

/*
 * What one pass (or one destroy's last sends) may spend in all spinning
 * for libraries' UD receive claims (recv.c, ud_claim_spin).
 */
#define ENG_CLAIM_WAIT_NS	50000u

/* The thread for a new context (serving the fewest), or NULL if none runs. */
struct ibvd_engine *ibvd_eng_pick(void);

/* Add or remove a kick eventfd in eng's epoll set: 0 or a negative errno. */
int ibvd_eng_watch(struct ibvd_engine *eng, int fd);
void ibvd_eng_unwatch(struct ibvd_engine *eng, int fd);

/* Make sure the scratch WQE buffer holds len bytes: 0 or -ENOMEM. */
int ibvd_eng_scratch(struct ibvd_engine *eng, size_t len);

/* The thread serving qp's context, or NULL (context being torn down). */
struct ibvd_engine *ibvd_eng_of(const struct ibvd_qp *qp);

/* Make qp's serving thread look at it (see ibvd_eng_db_ring). */
void ibvd_eng_qp_ring(struct ibvd_qp *qp);

/* Wait for qp's RNR or retry deadline (serving thread only). */
void ibvd_eng_qp_wait(struct ibvd_engine *eng, struct ibvd_qp *qp,
		      uint64_t deadline);

/* Engine thread index, or NULL past the last (control thread). */
struct ibvd_engine *ibvd_eng_nth(unsigned int index);

/* ---- counters.c: what ibvctl statistic show reads ------------------------ */

/*
 * Add n to one of a thread's own counters.  Only that thread writes them
 * (or the control thread holding the objects lock for writing, when no
 * pass runs), but the control thread reads them at any time: a relaxed
 * store keeps each value whole without a locked instruction.
 */
static inline void eng_count(uint64_t *c, uint64_t n)
{
	__atomic_store_n(c, *c + n, __ATOMIC_RELAXED);
}

/*
 * The running engine thread's mem_calls (NULL on other threads): the
 * memory calls (memory.c) count themselves, deep under callers that have
 * no engine at hand.
 */
extern __thread uint64_t *ibvd_eng_mem_calls;

/* Tell the core we are spinning (lets an SMT sibling or the host run). */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

/* A send WQE of qp retired with status (thread and port counters). */
void ibvd_eng_count_retired(struct ibvd_engine *eng, const struct ibvd_qp *qp,
			    const struct eng_req *req, enum ibv_wc_status status);

/* Context teardown (control thread): keep its counts in its device's. */
void ibvd_eng_counters_retire(const struct ibvd_ectx *ectx);

#endif /* IBVD_ENGINE_INTERNAL_H */
