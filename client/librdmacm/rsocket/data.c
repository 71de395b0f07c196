/*
 * Moving bytes: rsend/rrecv and their variants, all on two iovec paths.
 *
 * Sending copies into the sbuf ring (or inlines small pieces) and writes
 * each piece with immediate into the current entry of the peer's target
 * SGL; pieces start at RS_OLAP_START and double up to RS_MAX_TRANSFER so
 * that the first bytes leave early and large sends need few completions.
 * Receiving copies out of rbuf in the order the messages were queued.
 * Both return what was moved before an error, else the error, as
 * send(2)/recv(2) do.
 */
#include "config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <rdma/rsocket.h>

#include "rs.h"

#define RS_OLAP_START		2048
#define RS_MAX_TRANSFER		65536
#define RS_INLINE_STAGE		256	/* inline pieces are gathered here */

static void iov_copy_in(struct iov_pos *p, const uint8_t *src, size_t len)
{
	while (len) {
		size_t n = p->iov->iov_len - p->off;

		if (n > len)
			n = len;
		memcpy((uint8_t *)p->iov->iov_base + p->off, src, n);
		src += n;
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
 * The total of an iovec array, as the socket calls check it; buffers
 * that are not touched (a stream's MSG_TRUNC receive) may be NULL.
 */
static ssize_t iov_total(const struct iovec *iov, int cnt, bool untouched)
{
	size_t total = 0;
	int i;

	if (cnt < 0 || cnt > IOV_MAX)
		return -EINVAL;
	if (cnt && !iov)
		return -EFAULT;
	for (i = 0; i < cnt; i++) {
		if (iov[i].iov_len && !iov[i].iov_base && !untouched)
			return -EFAULT;
		if (iov[i].iov_len > (size_t)SSIZE_MAX - total)
			return -EINVAL;
		total += iov[i].iov_len;
	}
	return (ssize_t)total;
}

/*
 * Finish an opening connection first; ENOTCONN if there is none.  A
 * failed attempt goes on: as TCP's, its error is the first read's or
 * send's (take_error), then it is an ended connection.
 */
static int ready(struct rsocket *rs, bool nonblock)
{
	int ret;

	if (rs->state & RS_OPENING) {
		ret = rs_finish_connect(rs, nonblock);
		if (ret)
			return ret;
	}
	if (!(rs->state &
	      (RS_CONNECTED | RS_DISCONNECTED | RS_ERROR | RS_CONNECT_ERROR)))
		return -ENOTCONN;
	return 0;
}

/* ---- sending --------------------------------------------------------------- */

static int write_data(struct rsocket *rs, struct ibv_sge *sgl, int nsge,
		      uint32_t len, int flags)
{
	struct rs_sge *t = &rs->target_sgl[rs->target_sge];
	uint64_t addr = t->addr;
	uint32_t rkey = t->key;

	rs->sseq_no++;
	rs->sqe_avail--;
	rs->sbuf_bytes_avail -= len;
	t->addr += len;
	t->length -= len;
	if (!t->length && ++rs->target_sge == RS_SGL_SIZE)
		rs->target_sge = 0;
	return rs_post_write(rs, sgl, nsge, rs_msg(RS_OP_DATA, len), true, flags,
			     addr, rkey);
}

static int send_piece(struct rsocket *rs, struct iov_pos *p, uint32_t len)
{
	uint8_t inl[RS_INLINE_STAGE];
	struct ibv_sge sgl[2];
	int n;

	if (len <= rs->sq_inline && len <= sizeof(inl)) {
		iov_copy_out(p, inl, len);
		sgl[0].addr = (uintptr_t)inl;
		sgl[0].length = len;
		sgl[0].lkey = 0;
		return write_data(rs, sgl, 1, len, IBV_SEND_INLINE);
	}
	n = rs_sbuf_stage(rs, p, len, sgl);
	return write_data(rs, sgl, n, len, 0);
}

/*
 * The connection's error, once: as TCP's sk_err, the first call that
 * meets it (a read, a send, SO_ERROR) takes it, and the connection is
 * then an ended one, 0 to reads and EPIPE to sends.
 */
static int take_error(struct rsocket *rs)
{
	int err = (rs->state & (RS_ERROR | RS_CONNECT_ERROR)) ? rs->err : 0;

	rs->err = 0;
	return -err;
}

/* Why nothing more can be sent: the peer left, or the connection broke. */
static int send_error(struct rsocket *rs)
{
	int err = take_error(rs);

	return err ? err : -EPIPE;
}

static ssize_t sendv_locked(struct rsocket *rs, const struct iovec *iov,
			    int cnt, size_t total, int flags)
{
	bool nonblock = rs_nonblocking(rs, flags);
	struct iov_pos p = { iov, cnt, 0 };
	uint32_t olen = RS_OLAP_START, xfer;
	size_t left = total;
	int ret;

	if (rs->dg)
		return rs_dgram_sendv(rs, iov, cnt, flags, NULL, 0);

	ret = ready(rs, nonblock);
	if (!ret && !(rs->state & RS_WRITABLE))
		ret = send_error(rs);
	if (!ret && rs->iomap_pending)
		ret = rs_send_iomaps(rs, nonblock);
	while (!ret && left) {
		if (!rs_can_send(rs)) {
			ret = rs_wait(rs, rs_conn_can_send, nonblock);
			if (!ret && !(rs->state & RS_WRITABLE))
				ret = send_error(rs);
			if (ret)
				break;
		}
		xfer = left < olen ? (uint32_t)left : olen;
		if (olen < RS_MAX_TRANSFER)
			olen <<= 1;
		if (xfer > rs->sbuf_bytes_avail)
			xfer = rs->sbuf_bytes_avail;
		if (xfer > rs->target_sgl[rs->target_sge].length)
			xfer = rs->target_sgl[rs->target_sge].length;
		ret = send_piece(rs, &p, xfer);
		if (!ret)
			left -= xfer;
	}
	return ret && left == total ? ret : (ssize_t)(total - left);
}

typedef ssize_t (*iov_op)(struct rsocket *rs, const struct iovec *iov,
			  int cnt, size_t total, int flags);

/* ---- receiving ------------------------------------------------------------- */

/*
 * Copy len bytes of rbuf from off on, wrapping at its end; p NULL: a
 * MSG_TRUNC receive, whose bytes go nowhere.
 */
static void rbuf_copy(struct rsocket *rs, uint32_t off, struct iov_pos *p,
		      uint32_t len)
{
	uint32_t first = rs->rbuf_size - off;

	if (!p)
		return;
	if (first > len)
		first = len;
	iov_copy_in(p, rs->rbuf + off, first);
	if (first < len)
		iov_copy_in(p, rs->rbuf, len - first);
}

/* MSG_PEEK: copy what is queued without consuming it. */
static size_t peek(struct rsocket *rs, struct iov_pos *p, size_t left)
{
	uint32_t head = rs->rmsg_head, off = rs->rbuf_offset, n;
	size_t got = 0;

	while (left && head != rs->rmsg_tail) {
		n = rs->rmsg[head].len;
		if (n > left)
			n = (uint32_t)left;
		rbuf_copy(rs, off, p, n);
		off = (off + n) % rs->rbuf_size;
		got += n;
		left -= n;
		if (++head == rs->rq_size + 1)
			head = 0;
	}
	return got;
}

static size_t consume(struct rsocket *rs, struct iov_pos *p, size_t left)
{
	size_t got = 0;
	uint32_t n;

	while (left && rs_have_rdata(rs)) {
		struct rs_rmsg *m = &rs->rmsg[rs->rmsg_head];

		n = m->len;
		if (n > left)
			n = (uint32_t)left;
		rbuf_copy(rs, rs->rbuf_offset, p, n);
		rs->rbuf_offset = (rs->rbuf_offset + n) % rs->rbuf_size;
		rs->rbuf_bytes_avail += n;
		rs->rbuf_queued -= n;
		m->len -= n;
		if (!m->len) {
			rs->rseq_no++;
			if (++rs->rmsg_head == rs->rq_size + 1)
				rs->rmsg_head = 0;
		}
		got += n;
		left -= n;
	}
	return got;
}

/*
 * Nothing queued and nothing more coming: end of file, or the error; a
 * failed attempt rconnect told of was never a connection (connect.c).
 */
static int recv_end(struct rsocket *rs)
{
	int err = take_error(rs);

	if (!err && rs->connect_told)
		err = -ENOTCONN;
	return err;
}

static ssize_t recvv_locked(struct rsocket *rs, const struct iovec *iov,
			    int cnt, size_t total, int flags)
{
	bool nonblock = rs_nonblocking(rs, flags);
	struct iov_pos p = { iov, cnt, 0 };
	/* MSG_TRUNC: as TCP, the bytes are counted, not copied */
	struct iov_pos *to = flags & MSG_TRUNC ? NULL : &p;
	size_t left = total;
	int ret;

	if (rs->dg)
		return rs_dgram_recvv(rs, iov, cnt, flags, NULL, NULL, NULL);

	ret = ready(rs, nonblock);
	/* nothing to copy: a failed attempt's error is told all the same */
	if (!ret && !total && (rs->state & RS_CONNECT_ERROR))
		ret = recv_end(rs);
	if (ret || !total)
		return ret;
	do {
		if (!rs_have_rdata(rs)) {
			ret = rs_wait(rs, rs_conn_have_rdata, nonblock);
			if (ret)
				break;
			if (!rs_have_rdata(rs)) {
				ret = recv_end(rs);
				break;
			}
		}
		if (flags & MSG_PEEK) {
			left -= peek(rs, to, left);
			break;
		}
		left -= consume(rs, to, left);
	} while (left && (flags & MSG_WAITALL) && (rs->state & RS_READABLE));
	rs_update_credits(rs);
	return ret && left == total ? ret : (ssize_t)(total - left);
}

/* ---- the calls --------------------------------------------------------------- */

static ssize_t ssize_ret(ssize_t ret)
{
	if (ret >= 0)
		return ret;
	errno = (int)-ret;
	return -1;
}

/* What a send or receive names besides its data. */
struct xfer_names {
	const struct sockaddr *to;
	socklen_t tolen;
	struct sockaddr *from;
	socklen_t *fromlen;
	int *msg_flags;		/* rrecvmsg's: MSG_TRUNC for a datagram cut short */
	bool stream_peer;	/* a stream names its peer there (rrecvfrom) */
};

/* A datagram rsocket's send or receive, with its addresses (dgram.c). */
static ssize_t dgram_xfer(struct rsocket *rs, const struct iovec *iov, int cnt,
			  int flags, bool send, const struct xfer_names *n)
{
	ssize_t ret = iov_total(iov, cnt, false);

	if (ret < 0)
		return ret;
	pthread_mutex_lock(&rs->lock);
	ret = send ? rs_dgram_sendv(rs, iov, cnt, flags, n->to, n->tolen) :
		     rs_dgram_recvv(rs, iov, cnt, flags, n->from, n->fromlen,
				    n->msg_flags);
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

static ssize_t stream_xfer(struct rsocket *rs, const struct iovec *iov, int cnt,
			   int flags, bool send, const struct xfer_names *n)
{
	ssize_t total, ret;

	/* A stream socket has its peer; naming one is an error (rdma-core). */
	if (send && (n->to || n->tolen))
		return -EISCONN;
	total = iov_total(iov, cnt, !send && (flags & MSG_TRUNC));
	if (total < 0)
		return total;
	pthread_mutex_lock(&rs->lock);
	ret = send ? sendv_locked(rs, iov, cnt, (size_t)total, flags) :
		     recvv_locked(rs, iov, cnt, (size_t)total, flags);
	pthread_mutex_unlock(&rs->lock);
	/* A stream's data comes from its peer (rdma-core names it too). */
	if (ret >= 0 && n->stream_peer && n->from && n->fromlen)
		*n->fromlen = rs_copy_sockaddr(n->from, *n->fromlen,
					       rdma_get_peer_addr(rs->id));
	return ret;
}

/* Every send and receive call: the rsocket held while it runs. */
static ssize_t xfer(int socket, const struct iovec *iov, int cnt, int flags,
		    bool send, const struct xfer_names *n)
{
	struct rsocket *rs = rs_get(socket);
	ssize_t ret;

	if (!rs)
		return ssize_ret(-EBADF);
	if (flags & MSG_OOB)
		ret = -EOPNOTSUPP;
	else if (rs->dg)
		ret = dgram_xfer(rs, iov, cnt, flags, send, n);
	else
		ret = stream_xfer(rs, iov, cnt, flags, send, n);
	rs_put(rs);
	return ssize_ret(ret);
}

static const struct xfer_names no_names;

ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	struct iovec iov = { (void *)buf, len };

	return xfer(socket, &iov, 1, flags, true, &no_names);
}

ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
		const struct sockaddr *dest_addr, socklen_t addrlen)
{
	struct iovec iov = { (void *)buf, len };
	struct xfer_names n = { .to = dest_addr, .tolen = addrlen };

	return xfer(socket, &iov, 1, flags, true, &n);
}

ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	struct xfer_names n;

	if (!msg)
		return ssize_ret(-EFAULT);
	n = (struct xfer_names){ .to = msg->msg_name,
				 .tolen = msg->msg_namelen };
	return xfer(socket, msg->msg_iov, (int)msg->msg_iovlen, flags, true, &n);
}

ssize_t rwrite(int socket, const void *buf, size_t count)
{
	return rsend(socket, buf, count, 0);
}

ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	return xfer(socket, iov, iovcnt, 0, true, &no_names);
}

ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	struct iovec iov = { buf, len };

	return xfer(socket, &iov, 1, flags, false, &no_names);
}

ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags,
		  struct sockaddr *src_addr, socklen_t *addrlen)
{
	struct iovec iov = { buf, len };
	struct xfer_names n = { .from = src_addr, .fromlen = addrlen,
				.stream_peer = true };

	return xfer(socket, &iov, 1, flags, false, &n);
}

ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	struct xfer_names n = { 0 };

	if (!msg)
		return ssize_ret(-EFAULT);
	msg->msg_controllen = 0;
	msg->msg_flags = 0;
	n.msg_flags = &msg->msg_flags;
	if (msg->msg_name) {
		n.from = msg->msg_name;
		n.fromlen = &msg->msg_namelen;
	}
	return xfer(socket, msg->msg_iov, (int)msg->msg_iovlen, flags, false, &n);
}

ssize_t rread(int socket, void *buf, size_t count)
{
	return rrecv(socket, buf, count, 0);
}

ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	return xfer(socket, iov, iovcnt, 0, false, &no_names);
}

/* ---- riowrite ---------------------------------------------------------------- */

/* The peer's map that holds offset, or NULL. */
static const struct rs_iomap *find_iomap(struct rsocket *rs, uint64_t offset)
{
	uint32_t i;

	for (i = 0; i < rs->target_iomap_size && rs->target_iomap; i++) {
		const struct rs_iomap *m = &rs->target_iomap[i];

		if (m->sge.length && offset >= m->offset &&
		    offset - m->offset < m->sge.length)
			return m;
	}
	return NULL;
}

/* A plain RDMA WRITE into the peer's map: no message, no credit. */
static int write_direct(struct rsocket *rs, const struct rs_iomap *m,
			uint64_t offset, struct iov_pos *p, uint32_t len)
{
	uint8_t inl[RS_INLINE_STAGE];
	struct ibv_sge sgl[2];
	int n = 1, flags = 0;

	if (len <= rs->sq_inline && len <= sizeof(inl)) {
		iov_copy_out(p, inl, len);
		sgl[0].addr = (uintptr_t)inl;
		sgl[0].length = len;
		sgl[0].lkey = 0;
		flags = IBV_SEND_INLINE;
	} else {
		n = rs_sbuf_stage(rs, p, len, sgl);
	}
	rs->sqe_avail--;
	rs->sbuf_bytes_avail -= len;
	return rs_post_write(rs, sgl, n, rs_msg(RS_OP_WRITE, len), false, flags,
			     m->sge.addr + (offset - m->offset), m->sge.key);
}

static ssize_t iowrite_locked(struct rsocket *rs, const void *buf, size_t count,
			      uint64_t offset, int flags)
{
	bool nonblock = rs_nonblocking(rs, flags);
	struct iovec iov = { (void *)buf, count };
	struct iov_pos p = { &iov, 1, 0 };
	uint32_t olen = RS_OLAP_START, xfer;
	const struct rs_iomap *m;
	size_t left = count;
	int ret;

	ret = ready(rs, nonblock);
	if (!ret && !(rs->state & RS_WRITABLE))
		ret = send_error(rs);
	if (!ret && rs->iomap_pending)
		ret = rs_send_iomaps(rs, nonblock);
	while (!ret && left) {
		m = find_iomap(rs, offset);
		/* the peer mapped nothing there (yet): what was written, as
		 * rdma-core's, even none */
		if (!m)
			break;
		if (!rs_can_send(rs)) {
			ret = rs_wait(rs, rs_conn_can_send, nonblock);
			if (!ret && !(rs->state & RS_WRITABLE))
				ret = send_error(rs);
			if (ret)
				break;
		}
		xfer = left < olen ? (uint32_t)left : olen;
		if (olen < RS_MAX_TRANSFER)
			olen <<= 1;
		if (xfer > rs->sbuf_bytes_avail)
			xfer = rs->sbuf_bytes_avail;
		if (xfer > m->sge.length - (offset - m->offset))
			xfer = (uint32_t)(m->sge.length - (offset - m->offset));
		ret = write_direct(rs, m, offset, &p, xfer);
		if (!ret) {
			left -= xfer;
			offset += xfer;
		}
	}
	return ret && left == count ? ret : (ssize_t)(count - left);
}

size_t riowrite(int socket, const void *buf, size_t count, off_t offset,
		int flags)
{
	struct rsocket *rs;
	ssize_t ret;

	if ((!buf && count) || offset < 0 || count > SSIZE_MAX)
		return (size_t)ssize_ret(buf || !count ? -EINVAL : -EFAULT);
	rs = rs_get(socket);
	if (!rs)
		return (size_t)ssize_ret(-EBADF);
	pthread_mutex_lock(&rs->lock);
	ret = iowrite_locked(rs, buf, count, (uint64_t)offset, flags);
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return (size_t)ssize_ret(ret);
}
