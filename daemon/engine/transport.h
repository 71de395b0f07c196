/*
 * Transports: what carries a message from a requester QP to its responder
 * (DESIGN.md, "transports behind one QP interface").  This header is the
 * engine's lower edge; the engine owns it, transports implement it.
 *
 * The engine's requester (send.c) takes the WQE in front of a send queue,
 * checks it and plans its step (a whole message, or one chunk of a long
 * one); the QP's transport carries that step to the responder and brings
 * back what the responder answered (an ACK, an RNR or error NAK, or
 * nothing: RESP_NO_ACK, which the requester retries on its timer).  A UD
 * datagram is sent and forgotten.  Completions, retries, RNR waits, error
 * states and flushes stay the engine's, whatever the transport.
 *
 * The responder side is the engine's too (the declarations below the
 * interface): whatever carried a message, it lands in the target QP's
 * memory and receive queue through these functions.  The same-daemon
 * transport (transport/local.c) calls them directly with the target it
 * routed to; a transport over a wire calls them from its receive path.
 *
 * A QP's transport is its device's (struct ibvd_device.transport), read
 * by ibvd_eng_transport().  Everything here runs on engine threads with
 * ibvd_objects_lock held for reading (engine/internal.h has the locking
 * vocabulary).
 */
#ifndef IBVD_ENGINE_TRANSPORT_H
#define IBVD_ENGINE_TRANSPORT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/uio.h>

#include <infiniband/verbs.h>

#include "core/device.h"
#include "core/objects.h"
#include "engine.h"
#include "ring.h"

struct ibvd_engine;

/* Most SGEs a WQE may carry (the device's max_sge, query.c). */
#define ENG_MAX_SGE		32u
/* Scatter/gather list of one side of a transfer: SGEs plus a GRH slot. */
#define ENG_MAX_SEGS		(ENG_MAX_SGE + 1u)

/* ---- a message ----------------------------------------------------------- */

/*
 * One contiguous piece of a transfer: addr in a client's address space
 * reached through fd (its /proc/PID/mem), or, with fd < 0, engine-private
 * memory at (uintptr_t)addr (inline data, a GRH, an atomic operand).
 * With map set, the same bytes are also at map in the MR's own mapping
 * (tier 1), valid only while the objects lock is held: whoever keeps a
 * segment beyond that clears map, and fd and addr still reach the bytes.
 */
struct eng_seg {
	int fd;
	uint32_t key;			/* of the MR it lies in (fd >= 0) */
	uint64_t addr;
	uint64_t len;
	uint8_t *map;
};

struct eng_sgl {
	unsigned int n;
	uint64_t total;			/* sum of seg[].len, overflow-checked */
	struct eng_seg seg[ENG_MAX_SEGS];
};

/* A send WQE and the local side of its transfer. */
struct eng_req {
	struct ibvd_send_wqe w;		/* private copy of the header */
	struct eng_sgl local;		/* gather (SEND/WRITE) or scatter (READ/atomic) */
	uint64_t length;		/* message length */
	bool signaled;			/* a success completion is wanted */
	/* the bytes this step moves: [off, off + step) of the message */
	uint64_t off;
	uint64_t step;
};

/* A step that is the whole message: the unchunked paths. */
static inline bool eng_req_whole(const struct eng_req *req)
{
	return req->off == 0 && req->step == req->length;
}

/* The step that ends the message. */
static inline bool eng_req_last(const struct eng_req *req)
{
	return req->off + req->step == req->length;
}

/* What the responder side of one message did, as the requester sees it. */
/* What became of a UD datagram, for its sender. */
enum eng_ud {
	UD_SENT,			/* sent, or dropped as a network drops */
	UD_WAIT,			/* a receiver's claim is busy: send again later */
	UD_FAILED,			/* the sender's own fault (a status says) */
};

enum eng_resp {
	RESP_OK,			/* delivered (or, UC/UD, dropped) */
	RESP_RNR,			/* RC: no receive WQE: RNR NAK */
	RESP_NO_ACK,			/* RC: nobody answered: retry */
	RESP_INV_REQ,			/* REM_INV_REQ_ERR */
	RESP_ACCESS,			/* REM_ACCESS_ERR */
	RESP_OP_ERR,			/* REM_OP_ERR */
	RESP_LOCAL_FAULT,		/* our own memory failed: LOC_PROT_ERR */
	/*
	 * On its way: the answer comes later.  The transport calls
	 * ibvd_eng_answered() when it has it; the requester asks again then,
	 * or at the QP's local ACK timeout, whichever comes first.
	 */
	RESP_PENDING,
	/*
	 * The receiver's library is placing a message into the same RQ
	 * right now (the direct transport's claim, ring.h): ask again in a
	 * moment, no retry spent.
	 */
	RESP_BUSY,
};

/*
 * A datagram that arrived from outside this daemon, as a wire transport's
 * receive path hands it to the responder: everything a UD receive WQE and
 * its completion need, with the payload in the transport's own buffer.
 */
struct eng_datagram {
	uint32_t src_qp;		/* the sender's QPN (DETH) */
	uint32_t qkey;			/* the Q_Key it carried */
	bool solicited;
	bool has_imm;
	uint32_t imm;			/* as the wire carried it (big-endian word) */
	uint8_t grh[40];		/* what the receive buffer starts with */
	uint8_t sl;			/* the completion's SL (roce/rx.c) */
	const uint8_t *payload;
	uint32_t len;
};

/*
 * A management datagram between the QP1s of two hosts: the 256 bytes of
 * one MAD and its addresses.  Local is this device's end (the source of
 * what we send, the destination of what arrived), remote the other host's.
 */
#define IBVD_MAD_LEN		256

struct ibvd_mad {
	struct ibvd_device *dev;
	uint8_t local_gid[16];
	uint8_t remote_gid[16];
	uint32_t remote_qpn;		/* the peer's GSI QP: 1 */
	uint8_t traffic_class;
	uint8_t hop_limit;
	uint8_t data[IBVD_MAD_LEN];
};

/* ---- the interface -------------------------------------------------------- */

struct ibvd_transport {
	const char *name;
	/*
	 * A device of this transport appears (dev->transport is set) or goes
	 * (no context is left on it), on the control thread: what the
	 * transport keeps per device (sockets, threads) lives in
	 * dev->transport_priv.  0 or a negative errno; NULL hooks: nothing
	 * to do.
	 */
	int (*dev_open)(struct ibvd_device *dev);
	void (*dev_close)(struct ibvd_device *dev);
	/*
	 * The device's network interface was made again, under a new index
	 * (control thread, objects lock not held): what was bound to the old
	 * one sees nothing and sends nowhere.  0 or a negative errno.
	 */
	int (*dev_rebind)(struct ibvd_device *dev);
	/*
	 * RC/UC: carry one step of src's WQE in front (req) to src's
	 * connected peer and return its answer.  *rnr_timer gets the
	 * responder's min_rnr_timer when that answer is RESP_RNR.  A
	 * responder that does not (or no longer) answer is RESP_NO_ACK for
	 * RC; for UC the message is lost, which is RESP_OK.
	 */
	enum eng_resp (*send)(struct ibvd_engine *eng, struct ibvd_qp *src,
			      const struct eng_req *req, uint8_t *rnr_timer);
	/*
	 * UD: send req's datagram to its address vector and QPN (or every
	 * member of a multicast group).  UD_FAILED only for the sender's
	 * own faults (*status); a datagram nobody takes is dropped silently.
	 */
	enum eng_ud (*send_ud)(struct ibvd_engine *eng, struct ibvd_qp *src,
			       const struct eng_req *req,
			       enum ibv_wc_status *status);
	/*
	 * Faults: the QP of this daemon that qp (RC/UC) is connected to,
	 * connected back to it, in whatever state; NULL if there is none or
	 * the peer is not a QP of this daemon.  The engine asks it when a
	 * context dies (its peers' connections break at once instead of
	 * timing out) and when a peer was reported gone.
	 */
	struct ibvd_qp *(*peer)(const struct ibvd_qp *qp);
	/*
	 * RC, UC or XRC qp is about to enter RTR, on the control thread,
	 * objects lock held for writing: make what the transport keeps for
	 * it (qp->wire) and say its size (*bytes), which the caller charges
	 * to qp's context until qp_forget.  0 or a negative errno (qp stays
	 * where it is).  NULL: nothing kept.
	 */
	int (*qp_prepare)(struct ibvd_qp *qp, size_t *bytes);
	/*
	 * qp was reset or is being destroyed, objects lock held for writing:
	 * drop what the transport keeps for it (qp->wire).  NULL: nothing.
	 */
	void (*qp_forget)(struct ibvd_qp *qp);
	/*
	 * qp's primary address (qp->attr's AV) was set, at its RTR or later
	 * (SQD to SQD, keeping its connection), objects lock held for
	 * writing: its packets go to, and come only from, that one.  NULL:
	 * nothing kept.
	 */
	void (*qp_av_changed)(struct ibvd_qp *qp);
	/*
	 * ibv_query_qp: the PSN qp's next new request carries (*sq_psn) and
	 * the one its responder expects (*rq_psn), where the transport keeps
	 * them once they moved from the values set; objects lock held for
	 * writing.  NULL: PSNs stay as set.
	 */
	void (*qp_psns)(const struct ibvd_qp *qp, uint32_t *sq_psn,
			uint32_t *rq_psn);
	/*
	 * RC/UC: the serving thread ended a turn of qp's send queue (what it
	 * retired is completed), or found qp in error; for completions the
	 * transport held back to keep them behind those.  NULL: nothing.
	 */
	void (*turn_done)(struct ibvd_qp *qp);
	/*
	 * QP1: send one management datagram (an IB CM MAD) to another
	 * host's QP1, on the control thread.  0 or a negative errno; NULL:
	 * the device reaches no other host (-EOPNOTSUPP).  What arrives on
	 * QP1 goes to the mailbox of transport/gsi.h.
	 */
	int (*send_mad)(const struct ibvd_mad *mad);
	/*
	 * Multicast: a QP of dev was attached to the group mgid (join) or
	 * detached from it (leave), on the control thread; the device takes
	 * the group's datagrams from the network while any QP of its is
	 * attached.  Join: 0 or a negative errno (-EINVAL: mgid names no
	 * group this transport can reach).  NULL: the group is the daemon's
	 * alone (core/objects.h), nothing to do.
	 */
	int (*mcast_join)(struct ibvd_device *dev, const uint8_t mgid[16]);
	void (*mcast_leave)(struct ibvd_device *dev, const uint8_t mgid[16]);
};

/* The transport of qp (its device's). */
static inline const struct ibvd_transport *
ibvd_eng_transport(const struct ibvd_qp *qp)
{
	return qp->ctx->dev->transport;
}

/* ---- what transports call: the requester side ------------------------------ */

/* Add n to counter c of qp's port (any thread holding the objects lock). */
void ibvd_eng_port_count(const struct ibvd_qp *qp, enum ibvd_port_counter c,
			 uint64_t n);
/* A UD datagram qp refused for its Q_Key: its port's qkey_viol_cntr. */
void ibvd_eng_qkey_violation(const struct ibvd_qp *qp);


/* Durations of the IB encodings: min_rnr_timer and the local ACK timeout. */
uint64_t ibvd_eng_rnr_ns(uint8_t min_rnr_timer);
uint64_t ibvd_eng_timeout_ns(uint8_t timeout);
/* The engine's clock (CLOCK_MONOTONIC, ns): its timers and deadlines. */
uint64_t ibvd_eng_now(void);


/*
 * The answer to qp's message in front arrived (any thread, objects lock
 * held for reading): its serving thread stops waiting and asks the
 * transport again.
 */
void ibvd_eng_answered(struct ibvd_qp *qp);

/*
 * Give qp a turn on its serving thread soon (any thread, objects lock
 * held for reading), with no answer for it: the turn's turn_done.
 */
void ibvd_eng_turn_soon(struct ibvd_qp *qp);

/*
 * A wire transport's receive side: the descriptors its packets arrive on,
 * which an engine thread drains between its passes and sleeps on beside
 * its doorbells.  So one thread does a device's sending and its receiving,
 * and an answer that moves a send queue on is taken up in that thread's
 * next pass, not after a wakeup of another thread (bench/RESULTS-roce.md).
 */
struct ibvd_eng_rx {
	int fd[2];			/* -1: none */
	/*
	 * Take up to a budget of what the fds hold (objects lock held for
	 * reading, on the engine thread); how many packets it took.
	 */
	unsigned int (*drain)(struct ibvd_eng_rx *rx);
	struct ibvd_engine *eng;	/* the engine's: who drains it */
};

/*
 * Control thread, objects lock not held: 0 or a negative errno.  Before
 * the engine threads start, rx waits for them (a daemon that forks to the
 * background starts them after the fork).
 */
int ibvd_eng_rx_attach(struct ibvd_eng_rx *rx);
/* Control thread, lock not held: once it returns, no drain of rx runs. */
void ibvd_eng_rx_detach(struct ibvd_eng_rx *rx);
/*
 * From drain: fd[i] failed for good; it is no longer looked at (a
 * level-triggered error would keep the thread from ever sleeping).
 */
void ibvd_eng_rx_drop_fd(struct ibvd_eng_rx *rx, unsigned int i);
/*
 * Control thread, objects lock held for writing: rx's fds become fd[]'s,
 * and fd[] gets the old ones, no longer watched (the caller closes them).
 * 0, or a negative errno when the new ones cannot be watched.
 */
int ibvd_eng_rx_swap_fds(struct ibvd_eng_rx *rx, int fd[2]);

/*
 * The WQE `counter` of src's send queue, behind the one in front, as the
 * requester will take it when its turn comes (serving thread only): true
 * with *req filled, the whole message as one step, if a transport may send
 * it ahead of its turn: src is an RC QP in RTS, the WQE is posted and
 * valid, no longer than a chunk, neither FENCEd nor a local operation, and
 * src's tenant has no bandwidth limit to pace it by.  Its completion still
 * comes in order, when it reaches the front and the transport answers.
 */
bool ibvd_eng_send_ahead(struct ibvd_engine *eng, struct ibvd_qp *src,
			 uint32_t counter, struct eng_req *req);
/*
 * The inline data of the WQE `counter` of qp's send queue, where its ring
 * holds it (mapped by the daemon, sealed): what a transport that sends
 * the WQE again reads, since the WQE keeps its slot until the requester's
 * head moves past it.  Its length is the inline_len of the header taken
 * (checked against the slot then); the bytes are the client's, which it
 * can spoil only for its own message.
 */
const uint8_t *ibvd_eng_send_inline(const struct ibvd_qp *qp, uint32_t counter);

/* ---- what transports call: the responder side ------------------------------ */

/*
 * The pieces a wire transport's responder is built of: receive queues,
 * keys, memory, errors.  The same-daemon transport needs none of them: it
 * calls the whole operations further down.
 */
/* A receive WQE, copied out of its RQ or SRQ and checked. */
struct eng_recv {
	uint64_t wr_id;
	enum ibv_wc_status status;	/* a bad WQE completes with this */
	struct eng_sgl sgl;
	/* its SGEs as posted, for a chunked message to resolve again */
	unsigned int nsge;
	struct ibvd_sge sge[ENG_MAX_SGE];
};

/* Where a QP's receive WQEs come from: its own RQ or its SRQ. */
struct eng_rq {
	struct ibvd_qp *qp;		/* whose receive queue it is */
	pthread_mutex_t *lock;
	const struct ibvd_ring *ring;
	uint32_t *head;			/* private consumer counter */
	uint32_t max_sge;
	const struct ibvd_pd *pd;
	struct ibvd_srq *srq;		/* NULL: the QP's own RQ */
};

void ibvd_eng_rq_of(struct ibvd_qp *qp, struct eng_rq *rq);

/*
 * Under rq->lock: copy and check the next receive WQE (a WQE the QP kept
 * from a UC message cut short comes first, chunk.c).  1 with *out filled,
 * 0 if the queue is empty, -EPROTO if its tail is impossible.
 */
int ibvd_eng_rq_peek(const struct eng_rq *rq, struct eng_recv *out);

/* Under rq->lock: consume the WQE just peeked (SRQ limit event included). */
void ibvd_eng_rq_consume(const struct eng_rq *rq);

/*
 * Under rq->lock, after a peek: the queue's tail was impossible.  An RQ
 * takes its QP to ERR (QP_FATAL), an SRQ reports SRQ_ERR once.
 */
void ibvd_eng_rq_broken(struct ibvd_qp *target, const struct eng_rq *rq);

/*
 * Under rq->lock: consume the peeked WQE, complete it with `status` and
 * move target to ERR (a responder-side local error).
 */
void ibvd_eng_recv_fail(struct ibvd_qp *target, const struct eng_rq *rq,
			const struct eng_recv *rwqe, enum ibv_wc_status status);

/*
 * A wire transport's responder (RoCE), under qp's receive lock, for a
 * SEND of several packets into an SRQ, whose WQE it takes at the first:
 *  - ibvd_eng_wire_hold: consume rwqe, just peeked from rq, and hold it
 *    (its SGEs as posted) until the message ends; 0, or -ENOMEM (it
 *    stays posted).  Flushes, RESET and destroy complete it with
 *    WR_FLUSH_ERR, as a WQE the engine holds.
 *  - ibvd_eng_wire_held: the WQE held, its SGEs resolved again against pd
 *    (the receiver may have deregistered its MRs since the last packet);
 *    false if none is held.
 *  - ibvd_eng_wire_release: it completed (or failed): qp holds none.
 *  - ibvd_eng_wire_keep: a UC message was cut short; the WQE stays for
 *    the next message, which ibvd_eng_rq_peek and _consume give it.
 */
int ibvd_eng_wire_hold(struct ibvd_qp *qp, const struct eng_rq *rq,
		       const struct eng_recv *rwqe);
bool ibvd_eng_wire_held(const struct ibvd_qp *qp, const struct ibvd_pd *pd,
			struct eng_recv *out);
void ibvd_eng_wire_release(struct ibvd_qp *qp);
void ibvd_eng_wire_keep(struct ibvd_qp *qp);

/*
 * An error CQE (status) for receive WQE wr_id of target, consumed
 * earlier; target's state does not change.
 */
void ibvd_eng_recv_err(struct ibvd_qp *target, uint64_t wr_id,
		       enum ibv_wc_status status);

/*
 * Resolve an rkey for an operation needing `access` (IBV_ACCESS_REMOTE_*)
 * on target's side: the MR must be in target's PD, allow access, and hold
 * [raddr, raddr + len) of its iova range; target's qp_access_flags must
 * allow it too.  Appends one segment to out.  0 or -EACCES.
 */
int ibvd_eng_rkey_resolve(const struct ibvd_qp *target, uint32_t rkey,
			  uint64_t raddr, uint64_t len, uint32_t access,
			  struct eng_sgl *out);

/*
 * SEND_WITH_INV arriving at target invalidates key (only checks that it
 * could, if !commit): 0 or -EINVAL.
 */
int ibvd_eng_remote_inv(const struct ibvd_qp *target, uint32_t key,
			bool commit);

/* A responder-side error on target: its completion, its state, its event. */
void ibvd_eng_responder_error(struct ibvd_qp *target, uint32_t event);

/* Atomics are atomic among the engine's own operations: this orders them. */
extern pthread_mutex_t ibvd_eng_atomic_lock;

/*
 * Read or write exactly len bytes of client memory: 0, -EFAULT, or -ESRCH
 * when the process is gone.
 */
int ibvd_eng_mem_read(int fd, uint64_t addr, void *buf, size_t len);
int ibvd_eng_mem_write(int fd, uint64_t addr, const void *buf, size_t len);
/* The same for n pieces that land one after the other from addr on
 * (0, -EFAULT or -ESRCH too). */
int ibvd_eng_mem_writev(int fd, uint64_t addr, const struct iovec *iov,
			unsigned int n);


/* A receive completion as a wire transport's responder reports it. */
struct eng_rcv_done {
	uint32_t opcode;		/* IBV_WC_RECV or IBV_WC_RECV_RDMA_WITH_IMM */
	uint32_t byte_len;
	uint32_t wc_flags;		/* IBV_WC_GRH, IBV_WC_WITH_IMM, ..._INV */
	uint32_t imm;			/* or the invalidated key */
	uint32_t src_qp;
	uint16_t slid;			/* 0 on RoCE */
	uint8_t sl;
	bool solicited;
};

/*
 * recv.c: complete receive WQE wr_id of target (consumed already), and
 * move target to ERR if its receive CQ overran.
 */
void ibvd_eng_recv_done(struct ibvd_qp *target, uint64_t wr_id,
			const struct eng_rcv_done *d);

/*
 * memory.c: the bytes [off, off + len) of a message out of, or into, a
 * scatter/gather list and a private buffer (a packet being built or one
 * that arrived).  0, -EFAULT if the list's memory failed, or -ESRCH if
 * its process is gone.
 */
int ibvd_eng_copy_out(const struct eng_sgl *src, uint64_t off, void *buf,
		      uint64_t len);
int ibvd_eng_copy_in(const struct eng_sgl *dst, uint64_t off, const void *buf,
		     uint64_t len);
/*
 * memory.c: do the bytes [off, off + len) of sgl lie in one piece of a
 * client's memory that only a system call reaches (not mapped into the
 * daemon)?  Then *fd and *addr say where, for ibvd_eng_mem_writev, which
 * lands many such pieces in one call.
 */
bool ibvd_eng_sgl_client_piece(const struct eng_sgl *sgl, uint64_t off,
			       uint64_t len, int *fd, uint64_t *addr);

/*
 * wqe.c: are the local segments of a WQE (req->local) still in MRs of pd,
 * those their keys name, with the same memory (and, for `write`, local
 * write access)?  For what a transport keeps past the turn that resolved
 * it (RoCE's requester, till the answer comes): the MR may have been
 * deregistered since, its process gone and its memory fd's number taken
 * by another's.  Under the objects lock.
 */
bool ibvd_eng_sgl_current(const struct eng_sgl *sgl, const struct ibvd_pd *pd,
			  bool write);

/*
 * recv.c: a datagram from outside arriving at target, a UD QP of this
 * daemon.  It lands as a local one would (GRH slot, then data), or is
 * dropped silently: wrong Q_Key, a QP that may not receive, no receive
 * WQE, too small a buffer (that WQE completes in error).
 */
void ibvd_eng_ud_receive(struct ibvd_qp *target, const struct eng_datagram *dg);

static inline uint32_t eng_qp_state(const struct ibvd_qp *qp)
{
	return __atomic_load_n(&qp->state, __ATOMIC_RELAXED);
}

/* A QP in this state accepts incoming messages (RTR and later, not ERR). */
bool ibvd_eng_can_receive(uint32_t state);

/*
 * send.c: would a RESP_NO_ACK for qp's front now fail it (retry
 * exceeded)?  Then the transport lets nothing of what it has in flight go
 * again or land: the front's error completion is about to be written.
 */
bool ibvd_eng_retry_spent(const struct ibvd_qp *qp);

/*
 * send.c: qp's front is moving again after a timeout; its retry and RNR
 * budgets start over, as rxe's do on every answer that moves things on.
 */
void ibvd_eng_retry_refill(struct ibvd_qp *qp);

/*
 * Before a step of a chunked message to peer: the first step makes peer
 * its responder; a later one is only for that QP, in the incarnation the
 * first step found (false: the responder lost the message to a RESET).
 */
bool ibvd_eng_chunk_responder(struct ibvd_qp *src, const struct ibvd_qp *peer,
			      const struct eng_req *req);

/*
 * recv.c: before an XRC initiator's step reaches target, an XRC target
 * QP: make the SRQ the WQE names (xrc_srqn) target's receive queue, PD and
 * CQ for this message.  False if that SRQ is not one of target's domain:
 * target goes to ERR and the requester gets RESP_INV_REQ.
 */
bool ibvd_eng_xrc_enter(struct ibvd_qp *target, const struct eng_req *req);
/*
 * The same for a message that names SRQ srqn, without the error: false
 * leaves target as it was (a transport with a wire NAKs the request).
 */
bool ibvd_eng_xrc_take(struct ibvd_qp *target, uint32_t srqn);

/* recv.c: deliver a SEND or SEND_WITH_IMM (RC/UC) to target. */
enum eng_resp ibvd_eng_deliver_send(struct ibvd_engine *eng,
				    struct ibvd_qp *src, struct ibvd_qp *target,
				    const struct eng_req *req);
/* The same, with target's RQ claim already held (direct.c). */
enum eng_resp ibvd_eng_deliver_send_claimed(struct ibvd_engine *eng,
					    struct ibvd_qp *src,
					    struct ibvd_qp *target,
					    const struct eng_req *req);

/* rdma.c: RDMA WRITE (+IMM) and READ against target (RC/UC). */
enum eng_resp ibvd_eng_rdma_write(struct ibvd_engine *eng, struct ibvd_qp *src,
				  struct ibvd_qp *target,
				  const struct eng_req *req);
/* A WRITE_WITH_IMM with target's RQ claim already held (direct.c). */
enum eng_resp ibvd_eng_write_imm_claimed(struct ibvd_engine *eng,
					 struct ibvd_qp *src,
					 struct ibvd_qp *target,
					 const struct eng_req *req);
enum eng_resp ibvd_eng_rdma_read(struct ibvd_engine *eng, struct ibvd_qp *src,
				 struct ibvd_qp *target,
				 const struct eng_req *req);

/* rdma.c: CMP_AND_SWP and FETCH_AND_ADD against target (RC). */
enum eng_resp ibvd_eng_atomic(struct ibvd_engine *eng, struct ibvd_qp *src,
			      struct ibvd_qp *target, const struct eng_req *req);

/*
 * send.c: a transport that copied a step's bytes more than once (a datagram to
 * each member of a group), or sent bytes again (a retransmission): the
 * extra bytes count against the sender's turn and its tenant's bandwidth
 * as if it had sent them, or one turn could copy a group's worth.
 */
void ibvd_eng_charge_copies(struct ibvd_engine *eng, uint64_t bytes);

/*
 * send.c: a transport whose send() answers RESP_PENDING wants to be asked
 * again by when_ns (ibvd_eng_now's clock) even if no answer comes, rather
 * than a whole local ACK timeout from now: to probe a quiet peer, or to
 * time out from when the step last went.  The earliest of a call's asks
 * holds; an answer still rings the QP at once (ibvd_eng_answered).
 */
void ibvd_eng_ask_again_by(struct ibvd_engine *eng, uint64_t when_ns);

/*
 * recv.c: a UD datagram from src arriving at target with Q_Key qkey: it
 * lands if target takes it; UD_FAILED only for the sender's own faults
 * (*status: everything else drops the datagram silently).  While
 * target's library holds its receive claim, the datagram is parked
 * (direct/ud_park.c) and src's WQE completes; only when the park has no
 * room for it, or target is src's peer on transit rings, UD_WAIT: it
 * waits in src's SQ, and the send is made again later.  A member's copy of a
 * multicast datagram (member) does neither (members that took it would
 * get it twice): it is dropped after a bounded spin.
 */
enum eng_ud ibvd_eng_ud_deliver(struct ibvd_engine *eng, struct ibvd_qp *src,
				struct ibvd_qp *target, const struct eng_req *req,
				uint32_t qkey, bool member,
				enum ibv_wc_status *status);
/* The same, with target's RQ claim held (or target without rings). */
enum ibv_wc_status ibvd_eng_ud_deliver_claimed(struct ibvd_engine *eng,
					       struct ibvd_qp *src,
					       struct ibvd_qp *target,
					       const struct eng_req *req,
					       uint32_t qkey);

/*
 * The events of one message, at the step of it that req describes:
 * request: src sent it (packets, rdma_sends);
 * arrival: it reached target, a QP that may receive (packets, rdma_recvs);
 * response: target answered a READ or atomic with data;
 * rnr: target had no receive WQE and sent src an RNR NAK.
 */
void ibvd_eng_count_request(const struct ibvd_qp *src,
			    const struct eng_req *req);
void ibvd_eng_count_arrival(const struct ibvd_qp *src,
			    const struct ibvd_qp *target,
			    const struct eng_req *req);
void ibvd_eng_count_response(const struct ibvd_qp *src,
			     const struct ibvd_qp *target,
			     const struct eng_req *req);
void ibvd_eng_count_rnr(const struct ibvd_qp *src, const struct ibvd_qp *target);

#endif /* IBVD_ENGINE_TRANSPORT_H */
