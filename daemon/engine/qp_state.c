/*
 * QP states as the engine moves them, shared by the requester and
 * responder sides: when a QP may receive, how QPs enter the error states
 * and flush, the IB encodings of the RNR and ACK timers, and the port
 * addresses a QP sends from.
 */
#include <config.h>

#include <string.h>

#include "barrier.h"
#include "core/device.h"
#include "internal.h"

bool ibvd_eng_can_receive(uint32_t state)
{
	return state == IBV_QPS_RTR || state == IBV_QPS_RTS ||
	       state == IBV_QPS_SQD || state == IBV_QPS_SQE;
}

static const struct ibvd_port *qp_port(const struct ibvd_qp *qp)
{
	return ibvd_device_port(qp->ctx->dev, qp->attr.port_num);
}

struct ibvd_qp *ibvd_eng_connected_peer(const struct ibvd_qp *src)
{
	struct ibvd_qp *t = ibvd_eng_transport(src)->peer(src);

	return t && ibvd_eng_can_receive(eng_qp_state(t)) ? t : NULL;
}

static void mark_queues(struct ibvd_qp *qp, bool rq_too)
{
	ibvd_eng_direct_void(qp);
	ibvd_publish(&((struct ibvd_wq_engine *)qp->sq.engine_page)->error, 1);
	if (rq_too && !qp->srq && qp->rq.engine_page)
		ibvd_publish(&((struct ibvd_wq_engine *)qp->rq.engine_page)->error, 1);
}

void ibvd_eng_mark_stopped(struct ibvd_qp *qp)
{
	uint32_t state = eng_qp_state(qp);

	if (state == IBV_QPS_ERR || state == IBV_QPS_SQE)
		mark_queues(qp, state == IBV_QPS_ERR);
}

bool ibvd_eng_qp_error(struct ibvd_qp *qp)
{
	uint32_t old = __atomic_exchange_n(&qp->state, IBV_QPS_ERR, __ATOMIC_RELAXED);

	if (old == IBV_QPS_ERR)
		return false;
	/* The client may look here to know its posts will only be flushed. */
	mark_queues(qp, true);
	ibvd_eng_qp_ring(qp);
	return true;
}

void ibvd_eng_qp_sq_error(struct ibvd_qp *qp)
{
	uint32_t old = eng_qp_state(qp);

	while (old == IBV_QPS_RTS || old == IBV_QPS_SQD) {
		if (__atomic_compare_exchange_n(&qp->state, &old, IBV_QPS_SQE, false,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			mark_queues(qp, false);
			ibvd_eng_qp_ring(qp);
			return;
		}
	}
}

void ibvd_eng_responder_error(struct ibvd_qp *target, uint32_t event)
{
	if (ibvd_eng_qp_error(target) && event)
		ibvd_eng_async(target->ctx, event, target->handle);
}

/* IB spec table of the RNR NAK timer field, in microseconds. */
static const uint32_t rnr_us[32] = {
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960,
	1280, 1920, 2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
	40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
};

uint64_t ibvd_eng_rnr_ns(uint8_t min_rnr_timer)
{
	return (uint64_t)rnr_us[min_rnr_timer & 31] * 1000;
}

/* Local ACK timeout: 4.096 us * 2^timeout; 0 means wait forever. */
uint64_t ibvd_eng_timeout_ns(uint8_t timeout)
{
	if (!timeout)
		return ENG_RETRY_FOREVER_NS;
	return 4096ull << (timeout > 31 ? 31 : timeout);
}

uint16_t ibvd_eng_port_lid(const struct ibvd_qp *qp)
{
	const struct ibvd_port *port = qp_port(qp);

	return port ? port->lid : 0;
}

void ibvd_eng_port_gid(const struct ibvd_qp *qp, uint8_t sgid_index,
		       uint8_t gid[16])
{
	const struct ibvd_port *port = qp_port(qp);
	struct ibvd_gid entry;

	memset(gid, 0, 16);
	/* The entries follow the host's addresses: ask each time. */
	if (port && ibvd_device_gid(qp->ctx->dev, port, sgid_index, &entry) == 0)
		memcpy(gid, entry.raw, 16);
}

uint32_t ibvd_eng_wc_opcode(uint32_t wr_opcode)
{
	switch (wr_opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	case IBV_WR_BIND_MW:
		return IBV_WC_BIND_MW;
	case IBV_WR_LOCAL_INV:
		return IBV_WC_LOCAL_INV;
	default:
		return IBV_WC_SEND;
	}
}

/* The number of WQEs between head and the client's tail, or -1 if absurd. */
static int64_t queue_depth(const struct ibvd_ring *r, uint32_t head)
{
	uint32_t tail = ibvd_observe(&((struct ibvd_wq_client *)r->client_page)->tail);
	uint32_t n = tail - head;

	return n > r->nslots ? -1 : (int64_t)n;
}

/* At most a turn's flush of a queue n deep: how many, and if that is all. */
static int64_t flush_share(int64_t n, int *ret)
{
	*ret = n > ENG_FLUSH_WQES ? -EAGAIN : 0;
	return n > ENG_FLUSH_WQES ? ENG_FLUSH_WQES : n;
}

int ibvd_eng_flush_sq(struct ibvd_qp *qp)
{
	/* A target has no send CQ: what its SQ holds is nobody's WQE. */
	int64_t n = qp->qp_type == IBV_QPT_XRC_RECV ? 0 :
		    queue_depth(&qp->sq, qp->sq_head);
	struct ibvd_cqe cqe;
	int ret;

	qp->rnr_deadline_ns = 0;
	qp->awaiting = false;
	qp->wqe_started = false;
	qp->wqe_done = 0;
	/* A chunked message in front: its receiver's WQE completes too. */
	ibvd_eng_held_abort(qp);
	/* An absurd tail (the QP went to ERR for it) names nothing to flush. */
	for (n = flush_share(n, &ret); n > 0; n--) {
		uint32_t opcode;

		memset(&cqe, 0, sizeof(cqe));
		ibvd_eng_send_peek(qp, qp->sq_head, &cqe.wr_id, &opcode);
		cqe.status = IBV_WC_WR_FLUSH_ERR;
		cqe.opcode = ibvd_eng_wc_opcode(opcode);
		cqe.qp_num = qp->qp_num;
		/* Flushed WQEs complete even if unsignaled; a full CQ drops them. */
		ibvd_eng_cq_push(qp->send_cq, qp, &cqe, false);
		qp->sq_head++;
	}
	ibvd_publish(&((struct ibvd_wq_engine *)qp->sq.engine_page)->head, qp->sq_head);
	return ret;
}

/*
 * An SRQ's WQEs are not ours to flush, but the one we took for a message
 * is.  -EBUSY while a CQE of ours waits for its sender's completion
 * (recv.c): it goes before LAST_WQE_REACHED.  It is held back under the
 * SRQ's lock, so a delivery that took a WQE before we look here is seen.
 */
static int flush_srq_taken(struct ibvd_qp *qp)
{
	int ret = -EBUSY;

	pthread_mutex_lock(&qp->srq->lock);
	if (!ibvd_eng_recv_deferred(qp)) {
		ibvd_eng_inbound_flush(qp, true);
		ret = 0;
	}
	pthread_mutex_unlock(&qp->srq->lock);
	return ret;
}

int ibvd_eng_flush_rq(struct ibvd_qp *qp)
{
	struct ibvd_cqe cqe;
	int64_t n;
	int held, ret;

	if (qp->srq)
		return flush_srq_taken(qp);
	if (!qp->rq.slots)
		return 0;
	/* A direct QP's library may be taking a WQE right now: later. */
	held = ibvd_eng_rq_claim(qp);
	if (held == -EBUSY)
		return -EBUSY;
	pthread_mutex_lock(&qp->recv_lock);
	/* A taken WQE's CQE waits for its sender's completion: it goes first. */
	if (ibvd_eng_recv_deferred(qp)) {
		pthread_mutex_unlock(&qp->recv_lock);
		ibvd_eng_rq_unclaim(qp, held);
		return -EBUSY;
	}
	/* The WQE a chunked message holds was taken first: it goes first. */
	ibvd_eng_inbound_flush(qp, true);
	for (n = flush_share(queue_depth(&qp->rq, qp->rq_head), &ret); n > 0; n--) {
		struct ibvd_recv_wqe w;

		memset(&cqe, 0, sizeof(cqe));
		memcpy(&w, qp->rq.slots + (size_t)(qp->rq_head & (qp->rq.nslots - 1)) *
		       qp->rq.stride, sizeof(w.wr_id));
		cqe.wr_id = w.wr_id;
		cqe.status = IBV_WC_WR_FLUSH_ERR;
		cqe.opcode = IBV_WC_RECV;
		cqe.qp_num = qp->qp_num;
		ibvd_eng_cq_push(qp->recv_cq, qp, &cqe, false);
		qp->rq_head++;
	}
	ibvd_publish(&((struct ibvd_wq_engine *)qp->rq.engine_page)->head, qp->rq_head);
	pthread_mutex_unlock(&qp->recv_lock);
	ibvd_eng_rq_unclaim(qp, held);
	return ret;
}
