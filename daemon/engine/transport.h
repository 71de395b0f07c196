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

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "core/device.h"
#include "core/objects.h"
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
 */
struct eng_seg {
	int fd;
	uint64_t addr;
	uint64_t len;
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
enum eng_resp {
	RESP_OK,			/* delivered (or, UC/UD, dropped) */
	RESP_RNR,			/* RC: no receive WQE: RNR NAK */
	RESP_NO_ACK,			/* RC: nobody answered: retry */
	RESP_INV_REQ,			/* REM_INV_REQ_ERR */
	RESP_ACCESS,			/* REM_ACCESS_ERR */
	RESP_OP_ERR,			/* REM_OP_ERR */
	RESP_LOCAL_FAULT,		/* our own memory failed: LOC_PROT_ERR */
};

/* ---- the interface -------------------------------------------------------- */

struct ibvd_transport {
	const char *name;
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
	 * member of a multicast group).  The sender's status: only its own
	 * faults; a datagram nobody takes is dropped silently.
	 */
	enum ibv_wc_status (*send_ud)(struct ibvd_engine *eng,
				      struct ibvd_qp *src,
				      const struct eng_req *req);
	/*
	 * Faults: the QP of this daemon that qp (RC/UC) is connected to,
	 * connected back to it, in whatever state; NULL if there is none or
	 * the peer is not a QP of this daemon.  The engine asks it when a
	 * context dies (its peers' connections break at once instead of
	 * timing out) and when a peer was reported gone.
	 */
	struct ibvd_qp *(*peer)(const struct ibvd_qp *qp);
};

/* The transport of qp (its device's). */
static inline const struct ibvd_transport *
ibvd_eng_transport(const struct ibvd_qp *qp)
{
	return qp->ctx->dev->transport;
}

/* ---- what transports call: the responder side ------------------------------ */

static inline uint32_t eng_qp_state(const struct ibvd_qp *qp)
{
	return __atomic_load_n(&qp->state, __ATOMIC_RELAXED);
}

/* A QP in this state accepts incoming messages (RTR and later, not ERR). */
bool ibvd_eng_can_receive(uint32_t state);


/*
 * Before a step of a chunked message to peer: the first step makes peer
 * its responder; a later one is only for that QP, in the incarnation the
 * first step found (false: the responder lost the message to a RESET).
 */
bool ibvd_eng_chunk_responder(struct ibvd_qp *src, const struct ibvd_qp *peer,
			      const struct eng_req *req);

/* recv.c: deliver a SEND or SEND_WITH_IMM (RC/UC) to target. */
enum eng_resp ibvd_eng_deliver_send(struct ibvd_engine *eng,
				    struct ibvd_qp *src, struct ibvd_qp *target,
				    const struct eng_req *req);

/* rdma.c: RDMA WRITE (+IMM) and READ against target (RC/UC). */
enum eng_resp ibvd_eng_rdma_write(struct ibvd_engine *eng, struct ibvd_qp *src,
				  struct ibvd_qp *target,
				  const struct eng_req *req);
enum eng_resp ibvd_eng_rdma_read(struct ibvd_engine *eng, struct ibvd_qp *src,
				 struct ibvd_qp *target,
				 const struct eng_req *req);

/* rdma.c: CMP_AND_SWP and FETCH_AND_ADD against target (RC). */
enum eng_resp ibvd_eng_atomic(struct ibvd_engine *eng, struct ibvd_qp *src,
			      struct ibvd_qp *target, const struct eng_req *req);

/*
 * recv.c: a UD datagram from src arriving at target with Q_Key qkey: it
 * lands if target takes it; the sender's status (only its own faults:
 * everything else drops the datagram silently).
 */
enum ibv_wc_status ibvd_eng_ud_deliver(struct ibvd_engine *eng,
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
