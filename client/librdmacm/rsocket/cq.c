/*
 * Completions, credits and control messages, and how a call waits.
 *
 * A send's wr_id is its message (rs_msg()), so its completion says what
 * it gives back: a data slot and its bytes of sbuf, or a control slot.
 * A receive is always a write with immediate: data (queued in rmsg for
 * rrecv), new credits (the target SGL entry was written before it), or a
 * control message.  Receives are reposted as they complete.
 *
 * Waiting (rs_wait, and rpoll likewise): take the completion events,
 * progress, test; arm the CQ, and if it was not armed yet, progress and
 * test again (a completion may have come before the arm); then sleep in
 * poll() on the completion channel and the CM channel with the lock
 * released.  Only a thread about to sleep drains the channel, so an armed
 * CQ's event stays there for the sleeper.  Another waiter may still take
 * it first, so the sleep is cut into slices of RS_WAIT_SLICE_MS.
 */
#include "config.h"

#include <endian.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "rs.h"

#define RS_WAIT_SLICE_MS	100
#define RS_CQ_BATCH		16
#define RS_SPIN_NS		50000

bool rs_nonblocking(struct rsocket *rs, int flags)
{
	return (rs->fl_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT);
}

int rs_post_msg(struct rsocket *rs, uint32_t msg)
{
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = msg;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.imm_data = htobe32(msg);
	return -ibv_post_send(rs->id->qp, &wr, &bad);
}

int rs_post_write(struct rsocket *rs, struct ibv_sge *sgl, int nsge,
		  uint32_t wr_data, bool with_imm, int flags, uint64_t addr,
		  uint32_t rkey)
{
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_data;
	wr.sg_list = sgl;
	wr.num_sge = nsge;
	wr.opcode = with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
	wr.send_flags = flags;
	if (with_imm)
		wr.imm_data = htobe32(wr_data);
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	return -ibv_post_send(rs->id->qp, &wr, &bad);
}

bool rs_ctrl_avail(struct rsocket *rs)
{
	return rs->ctrl_seqno != rs->ctrl_max_seqno;
}

bool rs_can_send(struct rsocket *rs)
{
	return rs->sqe_avail && rs->sbuf_bytes_avail >= 2048 &&
	       rs->sseq_no != rs->sseq_comp &&
	       rs->target_sgl[rs->target_sge].length != 0;
}

bool rs_conn_can_send(struct rsocket *rs)
{
	return !(rs->state & RS_WRITABLE) || rs_can_send(rs);
}

bool rs_have_rdata(struct rsocket *rs)
{
	return rs->rmsg && rs->rmsg_head != rs->rmsg_tail;
}

bool rs_conn_have_rdata(struct rsocket *rs)
{
	return rs_have_rdata(rs) || !(rs->state & RS_READABLE);
}

bool rs_all_sends_done(struct rsocket *rs)
{
	return (rs->ctrl_max_seqno - rs->ctrl_seqno) + rs->sqe_avail ==
		       rs->sq_size || !(rs->state & RS_CONNECTED);
}

/* ---- credits ------------------------------------------------------------- */

/* A control slot's bytes in sbuf, for an SGE the QP cannot inline. */
static void *ctrl_buf(struct rsocket *rs)
{
	return rs->sbuf + rs->sbuf_size +
	       (rs->ctrl_seqno % RS_QP_CTRL_SIZE) * sizeof(struct rs_sge);
}

/*
 * Give the peer credits up to rseq_no + rq_size and, when half of rbuf
 * is free, that half as the next entry of its target SGL.
 */
static void send_credits(struct rsocket *rs)
{
	uint32_t half = rs->rbuf_size >> 1;
	uint32_t msg = rs_msg(RS_OP_SGL, (uint16_t)(rs->rseq_no + rs->rq_size));
	struct rs_sge sge, *wire;
	struct ibv_sge ib;
	int flags = 0;

	rs->rseq_comp = (uint16_t)(rs->rseq_no + (rs->rq_size >> 1));
	if (rs->rbuf_bytes_avail < half) {
		rs->ctrl_seqno++;
		rs_post_msg(rs, msg);
		return;
	}
	sge.addr = (uintptr_t)&rs->rbuf[rs->rbuf_free_offset];
	sge.key = rs->rmr->rkey;
	sge.length = half;
	if (rs->sq_inline >= sizeof(sge)) {
		wire = &sge;
		flags = IBV_SEND_INLINE;
		ib.lkey = 0;
	} else {
		wire = ctrl_buf(rs);
		ib.lkey = rs->smr->lkey;
	}
	rs_sge_to_peer(wire, &sge, rs->swap);
	ib.addr = (uintptr_t)wire;
	ib.length = sizeof(*wire);
	rs->ctrl_seqno++;
	rs_post_write(rs, &ib, 1, msg, true, flags,
		      rs->remote_sgl.addr + rs->remote_sge * sizeof(struct rs_sge),
		      rs->remote_sgl.key);
	rs->rbuf_bytes_avail -= half;
	rs->rbuf_free_offset += half;
	if (rs->rbuf_free_offset >= rs->rbuf_size)
		rs->rbuf_free_offset = 0;
	if (++rs->remote_sge >= (int)rs->remote_sgl.length)
		rs->remote_sge = 0;
}

static bool give_credits(struct rsocket *rs)
{
	return (rs->rbuf_bytes_avail >= (rs->rbuf_size >> 1) ||
		(int16_t)(rs->rseq_no - rs->rseq_comp) >= 0) &&
	       rs_ctrl_avail(rs) && (rs->state & RS_CONNECTED);
}

void rs_update_credits(struct rsocket *rs)
{
	if (rs->cq && give_credits(rs))
		send_credits(rs);
}

/* ---- completions --------------------------------------------------------- */

static void recv_ctrl(struct rsocket *rs, uint32_t ctrl)
{
	if (ctrl == RS_CTRL_DISCONNECT) {
		rs->state = RS_DISCONNECTED;
	} else if (ctrl == RS_CTRL_RESET) {
		/*
		 * As TCP's RST: what came before it is still read, then
		 * ECONNRESET.  The CM's disconnect may have been taken
		 * first (rs_progress takes the channel before the CQ).
		 */
		if (rs->state & (RS_CONNECTED | RS_DISCONNECTED)) {
			rs->state = RS_ERROR;
			rs->err = ECONNRESET;
		}
	} else if (ctrl == RS_CTRL_SHUTDOWN) {
		/* The peer sends no more; with our side shut too, it is over. */
		if (rs->state & RS_WRITABLE)
			rs->state &= ~RS_READABLE;
		else
			rs->state = RS_DISCONNECTED;
	}
}

/*
 * A data message of len bytes landed in rbuf.  The peer is not trusted
 * with its length: one the buffer cannot hold beside what is still
 * unread would have a read run past the buffer's end, and 0 would read
 * as the end of the stream (rsend of nothing sends nothing).  Nor with
 * its credits: rmsg holds the rq_size messages they allow, and one more
 * would overrun it (receives are reposted as they complete, read or
 * not), dropping the unread ones without a word.  Each ends the
 * connection instead.
 */
static void data_arrived(struct rsocket *rs, uint32_t len)
{
	uint32_t next = rs->rmsg_tail + 1 == rs->rq_size + 1 ?
			0 : rs->rmsg_tail + 1;

	if (!len || len > rs->rbuf_size - rs->rbuf_queued ||
	    next == rs->rmsg_head) {
		rs->state = RS_ERROR;
		rs->err = ECONNRESET;
		return;
	}
	rs->rbuf_queued += len;
	rs->rmsg[rs->rmsg_tail].op = RS_OP_DATA;
	rs->rmsg[rs->rmsg_tail].len = len;
	rs->rmsg_tail = next;
}

static void recv_done(struct rsocket *rs, const struct ibv_wc *wc)
{
	uint32_t msg;

	/*
	 * A receive fails only when the QP went to error: a peer broke the
	 * protocol (a WRITE with a key it was not given, a SEND into our
	 * zero-byte receives) or the connection is gone.  No CM event may
	 * follow, so the connection ends here.
	 */
	if (wc->status != IBV_WC_SUCCESS) {
		if (rs->state & (RS_CONNECTED | RS_OPENING)) {
			rs->state = RS_ERROR;
			rs->err = ECONNRESET;
		}
		return;
	}
	if (!(wc->wc_flags & IBV_WC_WITH_IMM))
		return;
	msg = be32toh(wc->imm_data);
	switch (rs_msg_op(msg)) {
	case RS_OP_SGL:
		rs->sseq_comp = (uint16_t)rs_msg_data(msg);
		break;
	case RS_OP_CTRL:
		recv_ctrl(rs, rs_msg_data(msg));
		break;
	case RS_OP_DATA:
		data_arrived(rs, rs_msg_data(msg));
		break;
	default:	/* IOMAP_SGL: the table is already written */
		break;
	}
}

static void send_done(struct rsocket *rs, const struct ibv_wc *wc)
{
	uint32_t msg = (uint32_t)wc->wr_id;

	switch (rs_msg_op(msg)) {
	case RS_OP_SGL:
		rs->ctrl_max_seqno++;
		break;
	case RS_OP_CTRL:
		rs->ctrl_max_seqno++;
		if (rs_msg_data(msg) == RS_CTRL_DISCONNECT)
			rs->state = RS_DISCONNECTED;
		break;
	case RS_OP_IOMAP_SGL:
		rs->sqe_avail++;
		rs->sbuf_bytes_avail += sizeof(struct rs_iomap);
		break;
	default:	/* DATA, WRITE: a slot and its bytes */
		rs->sqe_avail++;
		rs->sbuf_bytes_avail += rs_msg_data(msg);
		break;
	}
	/*
	 * Retries spent: the peer went silent (its host down, the path
	 * cut), which TCP reports as ETIMEDOUT, from its retransmissions
	 * or its keepalive probes alike; anything else the peer refused.
	 */
	if (wc->status != IBV_WC_SUCCESS && (rs->state & RS_CONNECTED)) {
		rs->state = RS_ERROR;
		rs->err = wc->status == IBV_WC_RETRY_EXC_ERR ? ETIMEDOUT :
							      ECONNRESET;
	}
}

static void poll_cq(struct rsocket *rs)
{
	struct ibv_wc wc[RS_CQ_BATCH];
	unsigned int recvs = 0;
	int n, i, ret;

	while ((n = ibv_poll_cq(rs->cq, RS_CQ_BATCH, wc)) > 0) {
		for (i = 0; i < n; i++) {
			/*
			 * A failed completion says the QP broke.  When its
			 * peer's process ends, the daemon says DISCONNECTED
			 * before it breaks the QP, so the CM's news goes
			 * first: the end of file TCP reads at a FIN, not the
			 * reset or timeout the flush would make of it.
			 * rs_spin polls the CQ alone and would see the
			 * break first.
			 */
			if (wc[i].status != IBV_WC_SUCCESS &&
			    (rs->state & RS_CONNECTED))
				rs_cm_progress(rs);
			if (wc[i].wr_id & RS_WR_ID_RECV) {
				/* a failed one is not posted again */
				recvs += wc[i].status == IBV_WC_SUCCESS;
				recv_done(rs, &wc[i]);
			} else {
				send_done(rs, &wc[i]);
			}
		}
	}
	/* Data may come before we see ESTABLISHED (accepting): repost then too. */
	if (!(rs->state & (RS_CONNECTED | RS_OPENING)))
		return;
	for (ret = 0; recvs && !ret; recvs--)
		ret = rs_post_recv(rs);
	if (ret) {
		rs->state = RS_ERROR;
		rs->err = -ret;
	}
}

/* Take the completion events the channel holds (it is non-blocking). */
void rs_drain_cq_events(struct rsocket *rs)
{
	struct ibv_cq *cq;
	void *ctx;

	if (!rs->cq)
		return;
	while (!ibv_get_cq_event(rs->cch, &cq, &ctx)) {
		rs->cq_armed = false;
		if (++rs->cq_unacked >= RS_CQ_BATCH) {
			ibv_ack_cq_events(rs->cq, rs->cq_unacked);
			rs->cq_unacked = 0;
		}
	}
}

static void rs_progress_cq(struct rsocket *rs)
{
	if (!rs->cq)
		return;
	rs_update_credits(rs);
	poll_cq(rs);
	rs_update_credits(rs);
}

void rs_progress(struct rsocket *rs)
{
	rs_cm_progress(rs);
	rs_progress_cq(rs);
}

bool rs_arm_cq(struct rsocket *rs)
{
	if (!rs->cq || rs->cq_armed)
		return false;
	if (ibv_req_notify_cq(rs->cq, 0))
		return false;
	rs->cq_armed = true;
	return true;
}

int rs_wait_fds(struct rsocket *rs, int fds[2])
{
	int n = 0;

	/* an orphaned listener's channel is hung up: it would wake us at once */
	if (!rs->orphaned)
		fds[n++] = rs->ch->fd;
	if (rs->cq)
		fds[n++] = rs->cch->fd;
	return n;
}

/*
 * A fault's signal comes to the thread that faults, never to one asleep
 * in poll(): its handler (a sanitizer's, a runtime's) cannot be the one
 * that interrupted us.
 */
static bool fault_signal(int sig)
{
	return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL ||
	       sig == SIGFPE || sig == SIGTRAP;
}

bool rs_restart_after_signal(void)
{
	struct sigaction sa;
	int sig;

	for (sig = 1; sig < NSIG; sig++) {
		/* glibc's own signals answer EINVAL */
		if (fault_signal(sig) || sigaction(sig, NULL, &sa) < 0)
			continue;
		if (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN)
			continue;
		if (!(sa.sa_flags & SA_RESTART))
			return false;
	}
	return true;
}

static int sleep_on(struct rsocket *rs, int ms)
{
	struct pollfd pfd[2];
	int fds[2], n, i, ret;

	n = rs_wait_fds(rs, fds);
	for (i = 0; i < n; i++) {
		pfd[i].fd = fds[i];
		pfd[i].events = POLLIN;
		pfd[i].revents = 0;
	}
	pthread_mutex_unlock(&rs->lock);
	ret = poll(pfd, (nfds_t)n, ms);
	pthread_mutex_lock(&rs->lock);
	return ret < 0 && errno == EINTR && !rs_restart_after_signal() ? -EINTR : 0;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * Poll the CQ alone for up to RS_SPIN_NS: a reply that is on its way
 * arrives well within it, and a sleep costs a round trip through the
 * daemon's completion channel (rdma-core polls likewise, polling_time).
 */
static bool rs_spin(struct rsocket *rs, rs_test_fn test)
{
	int64_t end = now_ns() + RS_SPIN_NS;

	if (!rs->cq)
		return false;
	do {
		rs_update_credits(rs);
		poll_cq(rs);
		rs_update_credits(rs);
		if (test(rs))
			return true;
	} while (now_ns() < end);
	return false;
}

/* A poll's timeout: a wait slice, or what is left before deadline. */
static int slice_ms(int64_t deadline)
{
	int64_t left;

	if (!deadline)
		return RS_WAIT_SLICE_MS;
	left = (deadline - now_ns() + 999999) / 1000000;
	return left < RS_WAIT_SLICE_MS ? (int)(left > 0 ? left : 0) :
					 RS_WAIT_SLICE_MS;
}

int rs_wait_until(struct rsocket *rs, rs_test_fn test, int64_t deadline)
{
	bool spun = false;
	int ret;

	for (;;) {
		if (rs_gone(rs))
			return -EBADF;
		rs_drain_cq_events(rs);
		rs_progress(rs);
		if (test(rs))
			return 0;
		if (deadline < 0 || (deadline && now_ns() >= deadline))
			return deadline < 0 ? -EAGAIN : -ETIMEDOUT;
		if (!spun) {
			spun = true;
			if (rs_spin(rs, test))
				return 0;
		}
		/* Newly armed: look again, a completion may have come first. */
		if (rs_arm_cq(rs))
			continue;
		ret = sleep_on(rs, slice_ms(deadline));
		if (ret)
			return ret;
	}
}

int rs_wait(struct rsocket *rs, rs_test_fn test, bool nonblock)
{
	return rs_wait_until(rs, test, nonblock ? -1 : 0);
}

int64_t rs_deadline_ms(int64_t ms)
{
	return now_ns() + ms * 1000000;
}
