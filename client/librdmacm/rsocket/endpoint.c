/*
 * An rsocket's endpoint: its RC QP on the CM id, one CQ for both queues
 * with a completion channel of its own, and the three registered buffers:
 *   sbuf  what rsend() copies out, a ring, plus one slot per control
 *         message for SGL updates the QP cannot send inline
 *   rbuf  where the peer writes, given out a half at a time
 *   tbuf  the target SGL and iomap table, where the peer writes SGEs
 * Sizes follow rdma-core's defaults and rules, so that the credits both
 * sides advertise mean the same thing.
 */
#include "config.h"

#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "rs.h"

#define RS_DEF_SQSIZE		384
#define RS_DEF_RQSIZE		384
#define RS_DEF_INLINE		64
#define RS_DEF_MEM		(1 << 17)
#define RS_SNDLOWAT		2048	/* the smallest message worth a slot */
#define RS_QP_MIN_SIZE		16
#define RS_QP_MAX_SIZE		0xFFFE

void rs_set_defaults(struct rsocket *rs)
{
	rs->sq_size = RS_DEF_SQSIZE;
	rs->rq_size = RS_DEF_RQSIZE;
	rs->sq_inline = RS_DEF_INLINE;
	rs->sbuf_size = RS_DEF_MEM;
	rs->rbuf_size = RS_DEF_MEM;
	rs->target_iomap_size = 0;
	rs->keepidle = 7200;		/* TCP's defaults */
	rs->keepcnt = 9;
	rs->keepintvl = 75;
}

static uint32_t clamp_u32(uint32_t v, uint32_t lo, uint32_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/*
 * Queue sizes within the device's limits, then queues and buffers matched
 * so that each slot can carry RS_SNDLOWAT bytes (rdma-core's rule).  A
 * buffer is never so small that its queue falls below RS_QP_MIN_SIZE: a
 * send queue must keep RS_QP_CTRL_SIZE slots for control messages and
 * have some for data (SO_SNDBUF of 4 KiB, iperf3 -w 4K, left it none).
 */
static void size_queues(struct rsocket *rs)
{
	struct ibv_device_attr attr;
	uint32_t max = RS_QP_MAX_SIZE;

	if (!ibv_query_device(rs->id->verbs, &attr) && attr.max_qp_wr > 0 &&
	    (uint32_t)attr.max_qp_wr < max)
		max = (uint32_t)attr.max_qp_wr;
	rs->sq_size = clamp_u32(rs->sq_size, RS_QP_MIN_SIZE, max);
	rs->rq_size = clamp_u32(rs->rq_size, RS_QP_MIN_SIZE, max);
	if (rs->rbuf_size < RS_QP_MIN_SIZE * RS_SNDLOWAT)
		rs->rbuf_size = RS_QP_MIN_SIZE * RS_SNDLOWAT;
	if (rs->sbuf_size < RS_QP_MIN_SIZE * RS_SNDLOWAT)
		rs->sbuf_size = RS_QP_MIN_SIZE * RS_SNDLOWAT;

	if (rs->rq_size > rs->rbuf_size / RS_SNDLOWAT)
		rs->rq_size = rs->rbuf_size / RS_SNDLOWAT;
	else
		rs->rbuf_size = rs->rq_size * RS_SNDLOWAT;
	if (rs->sq_size > rs->sbuf_size / RS_SNDLOWAT)
		rs->sq_size = rs->sbuf_size / RS_SNDLOWAT;
	else
		rs->sbuf_size = rs->sq_size * RS_SNDLOWAT;
}

static int create_cq(struct rsocket *rs)
{
	int flags;

	rs->cch = ibv_create_comp_channel(rs->id->verbs);
	if (!rs->cch)
		return -errno;
	/* Waits sleep in poll() (rs_wait): the channel is only drained. */
	flags = fcntl(rs->cch->fd, F_GETFL);
	if (flags < 0 || fcntl(rs->cch->fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	rs->cq = ibv_create_cq(rs->id->verbs, (int)(rs->sq_size + rs->rq_size),
			       rs, rs->cch, 0);
	if (!rs->cq)
		return -errno;
	return 0;
}

static int create_qp(struct rsocket *rs)
{
	struct ibv_qp_init_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.qp_context = rs;
	attr.send_cq = rs->cq;
	attr.recv_cq = rs->cq;
	attr.qp_type = IBV_QPT_RC;
	attr.sq_sig_all = 1;
	attr.cap.max_send_wr = rs->sq_size;
	attr.cap.max_recv_wr = rs->rq_size;
	attr.cap.max_send_sge = 2;
	attr.cap.max_recv_sge = 1;
	attr.cap.max_inline_data = rs->sq_inline;
	if (rdma_create_qp(rs->id, NULL, &attr))
		return -errno;
	rs->sq_inline = attr.cap.max_inline_data;
	return 0;
}

static int reg(struct rsocket *rs, void *buf, size_t len, int access,
	       struct ibv_mr **mr)
{
	*mr = ibv_reg_mr(rs->id->pd, buf, len, access);
	return *mr ? 0 : -errno;
}

static int create_bufs(struct rsocket *rs)
{
	const int remote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	size_t slen = rs->sbuf_size + RS_QP_CTRL_SIZE * sizeof(struct rs_sge);
	size_t tlen = RS_SGL_SIZE * sizeof(struct rs_sge) +
		      rs->target_iomap_size * sizeof(struct rs_iomap);
	int ret;

	rs->rmsg = calloc(rs->rq_size + 1, sizeof(*rs->rmsg));
	rs->sbuf = malloc(slen);
	rs->rbuf = malloc(rs->rbuf_size);
	rs->tbuf = calloc(1, tlen);
	if (!rs->rmsg || !rs->sbuf || !rs->rbuf || !rs->tbuf)
		return -ENOMEM;
	ret = reg(rs, rs->sbuf, slen, IBV_ACCESS_LOCAL_WRITE, &rs->smr);
	if (!ret)
		ret = reg(rs, rs->rbuf, rs->rbuf_size, remote, &rs->rmr);
	if (!ret)
		ret = reg(rs, rs->tbuf, tlen, remote, &rs->tmr);
	if (ret)
		return ret;
	rs->target_sgl = rs->tbuf;
	if (rs->target_iomap_size)
		rs->target_iomap = (struct rs_iomap *)(rs->target_sgl + RS_SGL_SIZE);
	return 0;
}

/* rdma-core's starting point: half the receive buffer is the peer's. */
static void init_counters(struct rsocket *rs)
{
	rs->sbuf_head = 0;
	rs->sbuf_bytes_avail = rs->sbuf_size;
	rs->rmsg_head = rs->rmsg_tail = 0;
	rs->rbuf_offset = 0;
	rs->rbuf_queued = 0;
	rs->rbuf_free_offset = rs->rbuf_size >> 1;
	rs->rbuf_bytes_avail = rs->rbuf_size >> 1;
	rs->ctrl_seqno = 0;
	rs->ctrl_max_seqno = RS_QP_CTRL_SIZE;
	rs->sqe_avail = rs->sq_size - RS_QP_CTRL_SIZE;
	rs->rseq_no = 0;
	rs->rseq_comp = (uint16_t)(rs->rq_size >> 1);
	rs->sseq_no = 0;
	rs->target_sge = 0;
}

void iov_copy_out(struct iov_pos *p, uint8_t *dst, size_t len)
{
	while (len) {
		size_t n = p->iov->iov_len - p->off;

		if (n > len)
			n = len;
		memcpy(dst, (const uint8_t *)p->iov->iov_base + p->off, n);
		dst += n;
		len -= n;
		p->off += n;
		if (p->off == p->iov->iov_len) {
			p->iov++;
			p->cnt--;
			p->off = 0;
		}
	}
}

/*
 * The sbuf ring: sends copy in at sbuf_head; completions, which come in
 * order, give the bytes back (sbuf_bytes_avail), so len never overruns
 * what is still in flight when the caller checked sbuf_bytes_avail.
 */
int rs_sbuf_stage(struct rsocket *rs, struct iov_pos *p, uint32_t len,
		  struct ibv_sge sgl[2])
{
	uint32_t first = rs->sbuf_size - rs->sbuf_head;
	int n = 1;

	if (first > len)
		first = len;
	sgl[0].addr = (uintptr_t)rs->sbuf + rs->sbuf_head;
	sgl[0].length = first;
	sgl[0].lkey = rs->smr->lkey;
	iov_copy_out(p, rs->sbuf + rs->sbuf_head, first);
	if (first < len) {
		sgl[1].addr = (uintptr_t)rs->sbuf;
		sgl[1].length = len - first;
		sgl[1].lkey = rs->smr->lkey;
		iov_copy_out(p, rs->sbuf, len - first);
		n = 2;
	}
	rs->sbuf_head = (rs->sbuf_head + len) % rs->sbuf_size;
	return n;
}

int rs_post_recv(struct rsocket *rs)
{
	struct ibv_recv_wr wr, *bad;

	/* Writes with immediate carry no receive data: no SGE. */
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = RS_WR_ID_RECV;
	wr.num_sge = 0;
	return -ibv_post_recv(rs->id->qp, &wr, &bad);
}

int rs_create_ep(struct rsocket *rs)
{
	uint32_t i;
	int ret;

	size_queues(rs);
	ret = create_cq(rs);
	if (!ret)
		ret = create_qp(rs);
	if (!ret)
		ret = create_bufs(rs);
	if (ret)
		goto fail;
	init_counters(rs);
	for (i = 0; i < rs->rq_size; i++) {
		ret = rs_post_recv(rs);
		if (ret)
			goto fail;
	}
	return 0;
fail:
	rs_destroy_ep(rs);
	return ret;
}

static void dereg(struct ibv_mr **mr)
{
	if (*mr)
		ibv_dereg_mr(*mr);
	*mr = NULL;
}

void rs_destroy_ep(struct rsocket *rs)
{
	if (rs->id && rs->id->qp)
		rdma_destroy_qp(rs->id);
	if (rs->cq) {
		if (rs->cq_unacked)
			ibv_ack_cq_events(rs->cq, rs->cq_unacked);
		ibv_destroy_cq(rs->cq);
	}
	if (rs->cch)
		ibv_destroy_comp_channel(rs->cch);
	rs->cq = NULL;
	rs->cch = NULL;
	rs->cq_unacked = 0;
	rs->cq_armed = false;
	dereg(&rs->smr);
	dereg(&rs->rmr);
	dereg(&rs->tmr);
	free(rs->sbuf);
	free(rs->rbuf);
	free(rs->tbuf);
	free(rs->rmsg);
	rs->sbuf = rs->rbuf = NULL;
	rs->tbuf = NULL;
	rs->rmsg = NULL;
	rs->target_sgl = NULL;
	rs->target_iomap = NULL;
}

void rs_format_conn_data(struct rsocket *rs, struct rs_conn_data *conn)
{
	memset(conn, 0, sizeof(*conn));
	conn->version = RS_PROTO_VERSION;
	conn->flags = RS_CONN_FLAG_IOMAP |
		      (__BYTE_ORDER == __BIG_ENDIAN ? RS_CONN_FLAG_NET : 0);
	conn->credits = htobe16((uint16_t)rs->rq_size);
	conn->target_iomap_size = rs_scale_encode(rs->target_iomap_size);
	conn->target_sgl.addr = htobe64((uintptr_t)rs->target_sgl);
	conn->target_sgl.length = htobe32(RS_SGL_SIZE);
	conn->target_sgl.key = htobe32(rs->tmr->rkey);
	conn->data_buf.addr = htobe64((uintptr_t)rs->rbuf);
	conn->data_buf.length = htobe32(rs->rbuf_size >> 1);
	conn->data_buf.key = htobe32(rs->rmr->rkey);
}

void rs_save_conn_data(struct rsocket *rs, const struct rs_conn_data *conn)
{
	bool peer_net = conn->flags & RS_CONN_FLAG_NET;

	rs->remote_sgl.addr = be64toh(conn->target_sgl.addr);
	rs->remote_sgl.length = be32toh(conn->target_sgl.length);
	rs->remote_sgl.key = be32toh(conn->target_sgl.key);
	rs->remote_sge = 1;
	rs->swap = peer_net != (__BYTE_ORDER == __BIG_ENDIAN);
	memset(&rs->remote_iomap, 0, sizeof(rs->remote_iomap));
	if (conn->flags & RS_CONN_FLAG_IOMAP) {
		rs->remote_iomap.addr = rs->remote_sgl.addr +
			sizeof(struct rs_sge) * rs->remote_sgl.length;
		rs->remote_iomap.length = rs_scale_decode(conn->target_iomap_size);
		rs->remote_iomap.key = rs->remote_sgl.key;
	}
	rs->target_sgl[0].addr = be64toh(conn->data_buf.addr);
	rs->target_sgl[0].length = be32toh(conn->data_buf.length);
	rs->target_sgl[0].key = be32toh(conn->data_buf.key);
	rs->sseq_comp = be16toh(conn->credits);
}
