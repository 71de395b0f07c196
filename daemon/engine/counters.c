/*
 * Counters the engine keeps for ibvctl statistic show: per device port,
 * under the names rdma(8) prints for rxe, and per engine thread.
 *
 * What a port counter counts here (ibvctl-statistic(8) says the same for
 * users).  The port of a QP is its port_num attribute; the requester's
 * port counts what it sends, the responder's what arrives.
 *
 *   sent_pkts / rcvd_pkts  packets: one per path-MTU segment of a SEND or
 *	RDMA WRITE (a zero-length message is one packet), one per RDMA READ
 *	request and per atomic request, one per UD datagram; the responder
 *	sends READ responses (one per segment) and atomic responses (one).
 *	A packet is received when it reaches a QP on the port that may
 *	receive (UD: once per QP that accepts the Q_Key, multicast members
 *	included).  Every attempt counts again: a SEND retried after an RNR
 *	NAK is sent again.  A message moved in steps (chunk.c) counts the
 *	segments each step starts.  On a software device the engine has no
 *	acknowledgement packets, so ACKs and NAKs are not packets there; a
 *	RoCE device counts every packet it puts on the wire.
 *   rcvd_rnr_err	RNR NAKs the port's requesters got (RC).
 *   send_rnr_err	RNR NAKs the port's responders gave (RC).
 *   retry_exceeded_err	send WQEs completed with IBV_WC_RETRY_EXC_ERR.
 *   retry_rnr_exceeded_err  ... with IBV_WC_RNR_RETRY_EXC_ERR.
 *   send_err		send WQEs completed with any error but a flush.
 *   rdma_sends / rdma_recvs  RDMA WRITE, READ and atomic messages the
 *	port's QPs issued / that arrived at them (each attempt).
 *   duplicate_request, out_of_seq_request, rcvd_seq_err,
 *	completer_retry_err, link_downed: always 0 on a software device,
 *	whose engine moves every message in order without loss and whose
 *	links never go down; a RoCE device counts them on the wire as rxe
 *	does (transport/roce/rc.c, rc_resp.c; link_downed: netdev_watch.c).
 *   ack_deferred: always 0, there for rdma's column set.
 *
 * Storage: each context keeps its own ports' counters (struct ibvd_ectx),
 * bumped with relaxed atomic adds by whichever engine thread executes the
 * message: no lock on the data path, and threads share a cache line only
 * when their traffic meets on one context.  A closing context adds its
 * counts to its device's running totals here (control thread), so a
 * port's counters survive the clients that made them.  Thread counters
 * live in struct ibvd_engine, each written by its own thread only.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "engine.h"
#include "internal.h"
#include "log.h"

_Static_assert(ENG_PORTS >= IBVD_MAX_PORTS, "a context counts every port");

const char *const ibvd_port_counter_names[IBVD_PC_MAX] = {
	[IBVD_PC_SENT_PKTS] = "sent_pkts",
	[IBVD_PC_RCVD_PKTS] = "rcvd_pkts",
	[IBVD_PC_DUPLICATE_REQUEST] = "duplicate_request",
	[IBVD_PC_OUT_OF_SEQ_REQUEST] = "out_of_seq_request",
	[IBVD_PC_RCVD_RNR_ERR] = "rcvd_rnr_err",
	[IBVD_PC_SEND_RNR_ERR] = "send_rnr_err",
	[IBVD_PC_RCVD_SEQ_ERR] = "rcvd_seq_err",
	[IBVD_PC_ACK_DEFERRED] = "ack_deferred",
	[IBVD_PC_RETRY_EXCEEDED_ERR] = "retry_exceeded_err",
	[IBVD_PC_RETRY_RNR_EXCEEDED_ERR] = "retry_rnr_exceeded_err",
	[IBVD_PC_COMPLETER_RETRY_ERR] = "completer_retry_err",
	[IBVD_PC_SEND_ERR] = "send_err",
	[IBVD_PC_LINK_DOWNED] = "link_downed",
	[IBVD_PC_RDMA_SENDS] = "rdma_sends",
	[IBVD_PC_RDMA_RECVS] = "rdma_recvs",
};

const char *const ibvd_engine_counter_names[IBVD_EC_MAX] = {
	[IBVD_EC_PASSES] = "passes",
	[IBVD_EC_TURNS] = "turns",
	[IBVD_EC_WQES] = "wqes",
	[IBVD_EC_BYTES] = "bytes",
	[IBVD_EC_SLEEPS] = "sleeps",
	[IBVD_EC_WAKEUPS] = "wakeups",
	[IBVD_EC_TIMERS] = "timers",
	[IBVD_EC_CROWDED] = "crowded",
	[IBVD_EC_RNR_WAIT_US] = "rnr_wait_us",
	[IBVD_EC_MEM_CALLS] = "mem_calls",
	[IBVD_EC_CLAIM_TIMEOUTS] = "claim_timeouts",
	[IBVD_EC_UD_PARKED] = "ud_parked",
	[IBVD_EC_PURGE_SLOTS] = "purge_slots",
	[IBVD_EC_BUSY_PASSES] = "busy_passes",
	[IBVD_EC_DEFERRED] = "deferred",
	[IBVD_EC_DIRECT_BYTES] = "direct_bytes",
};

/* ---- the data path: any engine thread ------------------------------------ */

void ibvd_eng_port_count(const struct ibvd_qp *qp, enum ibvd_port_counter c,
			 uint64_t n)
{
	struct ibvd_ectx *ectx = qp->ctx->engine;
	unsigned int port = qp->attr.port_num;

	/* port 0: a QP never taken to INIT has no port to charge. */
	if (!ectx || !n || port < 1 || port > ENG_PORTS)
		return;
	__atomic_fetch_add(&ectx->port_ctr[port - 1][c], n, __ATOMIC_RELAXED);
}

void ibvd_eng_qkey_violation(const struct ibvd_qp *qp)
{
	unsigned int port = qp->attr.port_num;
	struct ibvd_device *dev = qp->ctx->dev;

	if (port >= 1 && port <= dev->nports)
		__atomic_fetch_add(&dev->ports[port - 1].qkey_violations, 1,
				   __ATOMIC_RELAXED);
}

/* Path MTU in bytes; UD (no path MTU set) has the port's 4096. */
static uint64_t mtu_bytes(const struct ibvd_qp *qp)
{
	uint32_t m = qp->attr.path_mtu;

	if (m < IBV_MTU_256 || m > IBV_MTU_4096)
		m = IBV_MTU_4096;
	return 128u << m;
}

/* Segments of a message of len bytes that start in [off, off + n). */
static uint64_t segments(uint64_t mtu, uint64_t len, uint64_t off, uint64_t n)
{
	/* A zero-length message is one packet all the same. */
	if (!len)
		return off == 0 ? 1 : 0;
	/* Steps need not fall on MTU boundaries: count segment starts. */
	return (off + n + mtu - 1) / mtu - (off + mtu - 1) / mtu;
}

static bool is_rdma(uint32_t opcode)
{
	switch (opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return true;
	default:
		return false;
	}
}

/* Does the request carry the data (SEND, WRITE) or ask for it (READ, atomic)? */
static bool carries_data(uint32_t opcode)
{
	return opcode != IBV_WR_RDMA_READ &&
	       opcode != IBV_WR_ATOMIC_CMP_AND_SWP &&
	       opcode != IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* Request packets of this step of req, sent by src. */
static uint64_t request_packets(const struct ibvd_qp *src,
				const struct eng_req *req)
{
	if (carries_data(req->w.opcode))
		return segments(mtu_bytes(src), req->length, req->off, req->step);
	/* READ and atomic requests: one packet, at the first step. */
	return req->off == 0 ? 1 : 0;
}

void ibvd_eng_count_request(const struct ibvd_qp *src,
			    const struct eng_req *req)
{
	ibvd_eng_port_count(src, IBVD_PC_SENT_PKTS, request_packets(src, req));
	if (req->off == 0 && is_rdma(req->w.opcode))
		ibvd_eng_port_count(src, IBVD_PC_RDMA_SENDS, 1);
}

void ibvd_eng_count_arrival(const struct ibvd_qp *src,
			    const struct ibvd_qp *target,
			    const struct eng_req *req)
{
	ibvd_eng_port_count(target, IBVD_PC_RCVD_PKTS, request_packets(src, req));
	if (req->off == 0 && is_rdma(req->w.opcode))
		ibvd_eng_port_count(target, IBVD_PC_RDMA_RECVS, 1);
}

void ibvd_eng_count_response(const struct ibvd_qp *src,
			     const struct ibvd_qp *target,
			     const struct eng_req *req)
{
	uint64_t n = 1;		/* an atomic's answer */

	if (req->w.opcode == IBV_WR_RDMA_READ)
		n = segments(mtu_bytes(src), req->length, req->off, req->step);
	ibvd_eng_port_count(target, IBVD_PC_SENT_PKTS, n);
	ibvd_eng_port_count(src, IBVD_PC_RCVD_PKTS, n);
}

void ibvd_eng_count_rnr(const struct ibvd_qp *src, const struct ibvd_qp *target)
{
	ibvd_eng_port_count(target, IBVD_PC_SEND_RNR_ERR, 1);
	ibvd_eng_port_count(src, IBVD_PC_RCVD_RNR_ERR, 1);
}

void ibvd_eng_count_retired(struct ibvd_engine *eng, const struct ibvd_qp *qp,
			    const struct eng_req *req, enum ibv_wc_status status)
{
	eng_count(&eng->wqes, 1);
	if (status == IBV_WC_SUCCESS) {
		eng_count(&eng->bytes, req->length);
		return;
	}
	if (status == IBV_WC_WR_FLUSH_ERR)
		return;
	ibvd_eng_port_count(qp, IBVD_PC_SEND_ERR, 1);
	if (status == IBV_WC_RETRY_EXC_ERR)
		ibvd_eng_port_count(qp, IBVD_PC_RETRY_EXCEEDED_ERR, 1);
	else if (status == IBV_WC_RNR_RETRY_EXC_ERR)
		ibvd_eng_port_count(qp, IBVD_PC_RETRY_RNR_EXCEEDED_ERR, 1);
}

/* ---- totals of closed contexts: control thread ------------------------- */

/* A device's counts from contexts that closed, by its never-reused index. */
struct retired {
	uint32_t ifindex;
	uint64_t ctr[ENG_PORTS][IBVD_PC_MAX];
};

/*
 * One entry per device that ever had a context close: a device removed
 * by a reload leaves its entry behind, a few hundred bytes.
 */
static struct retired *retired;
static size_t nretired;

static struct retired *retired_find(uint32_t ifindex)
{
	size_t i;

	for (i = 0; i < nretired; i++)
		if (retired[i].ifindex == ifindex)
			return &retired[i];
	return NULL;
}

static struct retired *retired_get(uint32_t ifindex)
{
	struct retired *r = retired_find(ifindex), *grown;

	if (r)
		return r;
	grown = realloc(retired, (nretired + 1) * sizeof(*retired));
	if (!grown)
		return NULL;
	retired = grown;
	r = &retired[nretired++];
	memset(r, 0, sizeof(*r));
	r->ifindex = ifindex;
	return r;
}

void ibvd_eng_counters_retire(const struct ibvd_ectx *ectx)
{
	struct retired *r = retired_get(ectx->ctx->dev->ifindex);
	unsigned int p, c;

	if (!r) {
		log_warn("engine: out of memory: the counters of context %u are lost",
			 ectx->ctx->id);
		return;
	}
	/* The context's QPs are gone: nobody adds to these any more. */
	for (p = 0; p < ENG_PORTS; p++)
		for (c = 0; c < IBVD_PC_MAX; c++)
			r->ctr[p][c] += __atomic_load_n(&ectx->port_ctr[p][c],
							__ATOMIC_RELAXED);
}

void ibvd_engine_port_counters(const struct ibvd_device *dev,
			       unsigned int port_num, uint64_t out[IBVD_PC_MAX])
{
	const struct retired *r = retired_find(dev->ifindex);
	const struct ibvd_context *ctx;
	unsigned int c, p = port_num - 1;

	memset(out, 0, IBVD_PC_MAX * sizeof(out[0]));
	if (port_num < 1 || port_num > ENG_PORTS)
		return;
	for (c = 0; r && c < IBVD_PC_MAX; c++)
		out[c] = r->ctr[p][c];
	TAILQ_FOREACH(ctx, &dev->contexts, dev_link) {
		const struct ibvd_ectx *ectx = ctx->engine;

		for (c = 0; ectx && c < IBVD_PC_MAX; c++)
			out[c] += __atomic_load_n(&ectx->port_ctr[p][c],
						  __ATOMIC_RELAXED);
	}
	/* the device's own, not a context's */
	if (port_num <= dev->nports)
		out[IBVD_PC_LINK_DOWNED] +=
			__atomic_load_n(&dev->ports[p].link_downed, __ATOMIC_RELAXED);
}

void ibvd_engine_thread_counters(unsigned int index, uint64_t out[IBVD_EC_MAX],
				 unsigned int *contexts)
{
	const struct ibvd_engine *eng = ibvd_eng_nth(index);

	memset(out, 0, IBVD_EC_MAX * sizeof(out[0]));
	*contexts = 0;
	if (!eng)
		return;
	/* Written by that thread alone; a relaxed load sees a whole value. */
	out[IBVD_EC_PASSES] = __atomic_load_n(&eng->passes, __ATOMIC_RELAXED);
	out[IBVD_EC_TURNS] = __atomic_load_n(&eng->turns, __ATOMIC_RELAXED);
	out[IBVD_EC_WQES] = __atomic_load_n(&eng->wqes, __ATOMIC_RELAXED);
	out[IBVD_EC_BYTES] = __atomic_load_n(&eng->bytes, __ATOMIC_RELAXED);
	out[IBVD_EC_SLEEPS] = __atomic_load_n(&eng->sleeps, __ATOMIC_RELAXED);
	out[IBVD_EC_WAKEUPS] = __atomic_load_n(&eng->wakeups, __ATOMIC_RELAXED);
	out[IBVD_EC_TIMERS] = __atomic_load_n(&eng->timers_fired, __ATOMIC_RELAXED);
	out[IBVD_EC_CROWDED] = __atomic_load_n(&eng->crowded, __ATOMIC_RELAXED);
	out[IBVD_EC_RNR_WAIT_US] = __atomic_load_n(&eng->rnr_wait_us,
						   __ATOMIC_RELAXED);
	out[IBVD_EC_MEM_CALLS] = __atomic_load_n(&eng->mem_calls,
						 __ATOMIC_RELAXED);
	out[IBVD_EC_CLAIM_TIMEOUTS] = __atomic_load_n(&eng->claim_timeouts,
						      __ATOMIC_RELAXED);
	out[IBVD_EC_UD_PARKED] = __atomic_load_n(&eng->ud_parked,
						 __ATOMIC_RELAXED);
	out[IBVD_EC_BUSY_PASSES] = __atomic_load_n(&eng->busy_passes,
						   __ATOMIC_RELAXED);
	out[IBVD_EC_DEFERRED] = __atomic_load_n(&eng->deferred, __ATOMIC_RELAXED);
	out[IBVD_EC_DIRECT_BYTES] = __atomic_load_n(&eng->direct_bytes,
						    __ATOMIC_RELAXED);
	/* the control thread's, with this thread stopped (write lock) */
	out[IBVD_EC_PURGE_SLOTS] = __atomic_load_n(&eng->purge_slots,
						   __ATOMIC_RELAXED);
	/* Changed only by this (the control) thread, under the write lock. */
	*contexts = eng->nctx;
}
