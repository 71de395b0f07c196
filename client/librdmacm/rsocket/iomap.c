/*
 * riomap/riounmap: regions of ours the peer may riowrite() into.
 *
 * A PROT_WRITE map takes a free entry of the peer's iomap table (its size
 * came in the connection data) and is announced, before the next data we
 * send, by writing the entry (offset, address, key, length) into that
 * table with immediate RS_OP_IOMAP_SGL.  A PROT_NONE map is registered
 * locally only, as rdma-core does.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <rdma/rsocket.h>

#include "rs.h"

/* The lowest entry of the peer's table that no map of ours holds. */
static int free_index(struct rsocket *rs)
{
	struct rs_iomap_mr *m;
	uint32_t i;

	for (i = 0; i < rs->remote_iomap.length; i++) {
		for (m = rs->iomaps; m && m->index != (int)i; m = m->next)
			;
		if (!m)
			return (int)i;
	}
	return -ENOMEM;
}

static int64_t map_locked(struct rsocket *rs, void *buf, size_t len, int prot,
			  off_t offset)
{
	int access = IBV_ACCESS_LOCAL_WRITE;
	struct rs_iomap_mr *m;
	int index = -1;

	/* From raccept() on (the endpoint exists), as rdma-core. */
	if (!rs->cq || !rs->id->pd)
		return -ENOTCONN;
	if (prot & PROT_WRITE) {
		index = free_index(rs);
		if (index < 0)
			return index;
		access |= IBV_ACCESS_REMOTE_WRITE;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->mr = ibv_reg_mr(rs->id->pd, buf, len, access);
	if (!m->mr) {
		int err = errno;

		free(m);
		return -err;
	}
	m->offset = offset == -1 ? (uintptr_t)buf : (uint64_t)offset;
	m->index = index;
	m->next = rs->iomaps;
	rs->iomaps = m;
	if (index >= 0)
		rs->iomap_pending = true;
	return (int64_t)m->offset;
}

off_t riomap(int socket, void *buf, size_t len, int prot, int flags,
	     off_t offset)
{
	struct rsocket *rs;
	int64_t ret;

	if ((prot & ~PROT_WRITE) || flags || !buf || !len ||
	    (offset < 0 && offset != -1))
		return rs_ret(-EINVAL);
	rs = rs_get(socket);
	if (!rs)
		return rs_ret(-EBADF);
	pthread_mutex_lock(&rs->lock);
	ret = map_locked(rs, buf, len, prot, offset);
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	if (ret < 0)
		return rs_ret((int)ret);
	return (off_t)ret;
}

int riounmap(int socket, void *buf, size_t len)
{
	struct rsocket *rs = rs_get(socket);
	struct rs_iomap_mr **pm, *m;
	int ret = -EINVAL;

	if (!rs)
		return rs_ret(-EBADF);
	pthread_mutex_lock(&rs->lock);
	for (pm = &rs->iomaps; (m = *pm); pm = &m->next) {
		if (m->mr->addr == buf && m->mr->length == len) {
			*pm = m->next;
			ibv_dereg_mr(m->mr);
			free(m);
			ret = 0;
			break;
		}
	}
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return rs_ret(ret);
}

static int announce(struct rsocket *rs, struct rs_iomap_mr *m)
{
	struct rs_iomap host, wire;
	struct iovec iov = { &wire, sizeof(wire) };
	struct iov_pos p = { &iov, 1, 0 };
	struct ibv_sge sgl[2];
	int n, flags = 0;

	host.offset = m->offset;
	host.sge.addr = (uintptr_t)m->mr->addr;
	host.sge.key = m->mr->rkey;
	host.sge.length = (uint32_t)m->mr->length;
	rs_iomap_to_peer(&wire, &host, rs->swap);
	if (rs->sq_inline >= sizeof(wire)) {
		sgl[0].addr = (uintptr_t)&wire;
		sgl[0].length = sizeof(wire);
		sgl[0].lkey = 0;
		n = 1;
		flags = IBV_SEND_INLINE;
	} else {
		n = rs_sbuf_stage(rs, &p, sizeof(wire), sgl);
	}
	rs->sseq_no++;
	rs->sqe_avail--;
	rs->sbuf_bytes_avail -= sizeof(wire);
	return rs_post_write(rs, sgl, n, rs_msg(RS_OP_IOMAP_SGL, (uint32_t)m->index),
			     true, flags,
			     rs->remote_iomap.addr + m->index * sizeof(wire),
			     rs->remote_iomap.key);
}

int rs_send_iomaps(struct rsocket *rs, bool nonblock)
{
	struct rs_iomap_mr *m;
	int ret;

	for (;;) {
		/*
		 * From the head each time: a wait for credits lets go of the
		 * lock, and riounmap() may free the entry we were at.
		 */
		for (m = rs->iomaps; m && (m->index < 0 || m->sent); m = m->next)
			;
		if (!m)
			break;
		if (!rs_can_send(rs)) {
			ret = rs_wait(rs, rs_conn_can_send, nonblock);
			if (!ret && !(rs->state & RS_WRITABLE))
				ret = -ECONNRESET;
			if (ret)
				return ret;
			continue;
		}
		ret = announce(rs, m);
		if (ret)
			return ret;
		m->sent = true;
	}
	rs->iomap_pending = false;
	return 0;
}

void rs_free_iomaps(struct rsocket *rs)
{
	struct rs_iomap_mr *m;

	while ((m = rs->iomaps)) {
		rs->iomaps = m->next;
		ibv_dereg_mr(m->mr);
		free(m);
	}
}
