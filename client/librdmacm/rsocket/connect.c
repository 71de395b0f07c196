/*
 * An rsocket's life: rsocket, rbind, rlisten, raccept, rconnect,
 * rshutdown, rclose.  The steps of a connection happen in cm.c as its
 * events arrive; here the calls start them and, when blocking, wait for
 * them (rs_wait).  Errors are the ones socket(2), bind(2), listen(2),
 * accept(2) and connect(2) give.
 */
#include "config.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/ib.h>
#include <rdma/rsocket.h>

#include "rs.h"

static struct rsocket *rs_alloc(void)
{
	struct rsocket *rs = calloc(1, sizeof(*rs));

	if (!rs)
		return NULL;
	rs->fd = -1;
	rs->owner = rs_table_pid();
	rs->refs = 1;		/* the fd table's, dropped by rclose */
	pthread_mutex_init(&rs->lock, NULL);
	rs_set_defaults(rs);
	return rs;
}

void rs_free(struct rsocket *rs)
{
	rs_keepalive_forget(rs);
	rs_dgram_close(rs);
	rs_free_requests(rs);
	rs_free_iomaps(rs);
	rs_destroy_ep(rs);
	free(rs->route_opt);
	if (rs->id)
		rdma_destroy_id(rs->id);
	if (rs->ch)
		rdma_destroy_event_channel(rs->ch);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
}

/* A CM channel of its own, non-blocking: its fd is the rsocket's name. */
static int open_channel(struct rsocket *rs, int fd_flags)
{
	int flags;

	rs->ch = rdma_create_event_channel();
	if (!rs->ch)
		return -errno;
	rs->fd = rs->ch->fd;
	flags = fcntl(rs->fd, F_GETFL);
	if (flags < 0 || fcntl(rs->fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	if (fd_flags && fcntl(rs->fd, F_SETFD, fd_flags) < 0)
		return -errno;
	return 0;
}

static int check_type(int domain, int type, int protocol)
{
	int kind = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);

	/* AF_IB (GIDs, as the CM takes them) for streams; datagrams are UDP's. */
	if (domain != AF_INET && domain != AF_INET6 &&
	    (domain != AF_IB || kind != SOCK_STREAM))
		return -EAFNOSUPPORT;
	if (kind == SOCK_DGRAM)
		return protocol && protocol != IPPROTO_UDP ? -EPROTONOSUPPORT : 0;
	if (kind != SOCK_STREAM)
		return -ESOCKTNOSUPPORT;
	if (protocol && protocol != IPPROTO_TCP)
		return -EPROTONOSUPPORT;
	return 0;
}

/*
 * IPV6_V6ONLY before it is set: the host's default, which the CM takes
 * for an IPv6 id too (net.ipv6.bindv6only).
 */
static int default_v6only(void)
{
	int fd = open("/proc/sys/net/ipv6/bindv6only", O_RDONLY | O_CLOEXEC);
	char c = '0';

	if (fd < 0)
		return 0;
	if (read(fd, &c, 1) != 1)
		c = '0';
	close(fd);
	return c == '1';
}

static int do_rsocket(int domain, int type, int protocol)
{
	struct rsocket *rs;
	int ret, fd;

	ret = check_type(domain, type, protocol);
	if (ret)
		return ret;
	rs = rs_alloc();
	if (!rs)
		return -ENOMEM;
	rs->domain = domain;
	if (domain == AF_INET6)
		rs->v6only = default_v6only();
	if (type & SOCK_NONBLOCK)
		rs->fl_flags |= O_NONBLOCK;
	if ((type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) == SOCK_DGRAM) {
		ret = rs_dgram_open(rs, type);
	} else {
		ret = open_channel(rs, type & SOCK_CLOEXEC ? FD_CLOEXEC : 0);
		if (!ret && rdma_create_id(rs->ch, &rs->id, rs, RDMA_PS_TCP))
			ret = -errno;
	}
	if (ret) {
		rs_free(rs);
		return ret;
	}
	/* once in the table, another thread may rclose it: rs is not ours */
	fd = rs->fd;
	ret = rs_table_insert(rs);
	if (ret)
		rs_free(rs);
	return ret ? ret : fd;
}

int rsocket(int domain, int type, int protocol)
{
	return rs_ret(do_rsocket(domain, type, protocol));
}

/* An address as bind(2) and connect(2) check it. */
static int check_addr(struct rsocket *rs, const struct sockaddr *addr,
		      socklen_t len)
{
	if (!addr)
		return -EFAULT;
	/* as the kernel's move_addr_to_kernel: we copy at most this much */
	if (len < sizeof(sa_family_t) || len > sizeof(struct sockaddr_storage))
		return -EINVAL;
	if (addr->sa_family != rs->domain)
		return -EAFNOSUPPORT;
	if (addr->sa_family == AF_INET && len < sizeof(struct sockaddr_in))
		return -EINVAL;
	if (addr->sa_family == AF_INET6 && len < sizeof(struct sockaddr_in6))
		return -EINVAL;
	if (addr->sa_family == AF_IB && len < sizeof(struct sockaddr_ib))
		return -EINVAL;
	return 0;
}

static int bind_locked(struct rsocket *rs, const struct sockaddr *addr)
{
	if (rs->state != RS_INIT)
		return -EINVAL;
	if (rdma_bind_addr(rs->id, (struct sockaddr *)addr))
		return -errno;
	rs->state = RS_BOUND;
	return 0;
}

int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rsocket *rs = rs_get(socket);
	int ret;

	if (!rs)
		return rs_ret(-EBADF);
	pthread_mutex_lock(&rs->lock);
	ret = check_addr(rs, addr, addrlen);
	if (!ret)
		ret = rs->dg ? rs_dgram_bind(rs, addr, addrlen) :
			       bind_locked(rs, addr);
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return rs_ret(ret);
}

/* listen(2) on an unbound socket binds it to the wildcard, any port. */
static int bind_any(struct rsocket *rs)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	ss.ss_family = (sa_family_t)rs->domain;
	return bind_locked(rs, (struct sockaddr *)&ss);
}

static int listen_locked(struct rsocket *rs, int backlog)
{
	int ret;

	if (rs->state == RS_LISTENING) {
		rs->backlog = backlog;
		return 0;
	}
	if (rs->state == RS_INIT) {
		ret = bind_any(rs);
		if (ret)
			return ret;
	}
	if (rs->state != RS_BOUND)
		return -EINVAL;
	if (rdma_listen(rs->id, backlog))
		return -errno;
	rs->backlog = backlog;
	rs->state = RS_LISTENING;
	return 0;
}

int rlisten(int socket, int backlog)
{
	struct rsocket *rs = rs_get(socket);
	int ret;

	if (!rs)
		return rs_ret(-EBADF);
	pthread_mutex_lock(&rs->lock);
	ret = rs->dg ? -EOPNOTSUPP : listen_locked(rs, backlog);
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return rs_ret(ret);
}

/* ---- raccept --------------------------------------------------------------- */

static bool have_request(struct rsocket *rs)
{
	return rs->req_head || rs->state != RS_LISTENING;
}

static struct rs_request *pop_request(struct rsocket *rs)
{
	struct rs_request *req = rs->req_head;

	if (req) {
		rs->req_head = req->next;
		if (!rs->req_head)
			rs->req_tail = NULL;
	}
	return req;
}

/* The accepted connection's rsocket: the listener's options, our channel. */
static int accept_request(struct rsocket *ls, struct rs_request *req,
			  struct rsocket **ret_rs)
{
	struct rdma_conn_param param = req->param;
	struct rs_conn_data data;
	struct rsocket *rs = rs_alloc();
	int ret;

	if (!rs)
		return -ENOMEM;
	rs->domain = ls->domain;
	rs->sq_size = ls->sq_size;
	rs->rq_size = ls->rq_size;
	rs->sq_inline = ls->sq_inline;
	rs->sbuf_size = ls->sbuf_size;
	rs->rbuf_size = ls->rbuf_size;
	rs->target_iomap_size = ls->target_iomap_size;
	rs->nodelay = ls->nodelay;
	rs->cork = ls->cork;
	rs->keepalive = ls->keepalive;
	rs->keepidle = ls->keepidle;
	rs->keepcnt = ls->keepcnt;
	rs->keepintvl = ls->keepintvl;
	rs->v6only = ls->v6only;
	ret = open_channel(rs, 0);
	if (!ret && rdma_migrate_id(req->id, rs->ch))
		ret = -errno;
	if (ret)
		goto fail;
	rs->id = req->id;
	rs->id->context = rs;
	req->id = NULL;
	ret = rs_create_ep(rs);
	if (ret)
		goto fail;
	rs_save_conn_data(rs, &req->data);
	rs_format_conn_data(rs, &data);
	param.private_data = &data;
	param.private_data_len = sizeof(data);
	param.rnr_retry_count = 7;
	/*
	 * What the request offered, within what the device can: a remote
	 * REQ may name up to 255, which rdma_accept would refuse (EINVAL)
	 */
	param.responder_resources = RDMA_MAX_RESP_RES;
	param.initiator_depth = RDMA_MAX_INIT_DEPTH;
	if (rdma_accept(rs->id, &param)) {
		ret = -errno;
		goto fail;
	}
	/* Sends wait for ESTABLISHED: the peer's QP is not ready before. */
	rs->state = RS_ACCEPTING;
	/*
	 * The table last: once there, another thread may rclose it by its
	 * fd, so raccept holds a reference of its own until it is done.
	 */
	ret = rs->keepalive ? rs_keepalive_update(rs) : 0;
	if (ret)
		goto fail;
	rs->refs++;
	ret = rs_table_insert(rs);
	if (ret)
		goto fail;
	*ret_rs = rs;
	return 0;
fail:
	if (!req->id && rs->id)
		rdma_reject(rs->id, NULL, 0);
	rs_free(rs);
	return ret;
}

static int accept_locked(struct rsocket *ls, struct rsocket **ret_rs)
{
	struct rs_request *req;
	int ret;

	for (;;) {
		if (ls->state != RS_LISTENING)
			return -EINVAL;
		if (ls->orphaned && ls->err) {
			ret = -ls->err;	/* once: see orphan(), cm.c */
			ls->err = 0;
			return ret;
		}
		ret = rs_wait(ls, have_request, rs_nonblocking(ls, 0));
		if (ret)
			return ret;
		req = pop_request(ls);
		if (!req)
			continue;
		if (!req->data_ok) {
			/* Not an rsocket: refuse it and wait for the next. */
			rdma_reject(req->id, NULL, 0);
			rdma_destroy_id(req->id);
			free(req);
			continue;
		}
		ret = accept_request(ls, req, ret_rs);
		if (req->id) {
			/* Not taken over: tell the peer rather than let it wait. */
			rdma_reject(req->id, NULL, 0);
			rdma_destroy_id(req->id);
		}
		free(req);
		return ret;
	}
}

int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsocket *ls, *rs = NULL;
	int ret;

	if (addr && !addrlen)
		return rs_ret(-EFAULT);
	ls = rs_get(socket);
	if (!ls)
		return rs_ret(-EBADF);
	pthread_mutex_lock(&ls->lock);
	ret = ls->dg ? -EOPNOTSUPP : accept_locked(ls, &rs);
	pthread_mutex_unlock(&ls->lock);
	rs_put(ls);
	if (ret)
		return rs_ret(ret);
	if (addr)
		*addrlen = rs_copy_sockaddr(addr, *addrlen,
					    rdma_get_peer_addr(rs->id));
	ret = rs->fd;
	rs_put(rs);		/* accept_request's */
	return ret;
}

/* ---- rconnect ------------------------------------------------------------- */

static bool opened(struct rsocket *rs)
{
	return !(rs->state & RS_OPENING);
}

/*
 * How an ended attempt reports to rconnect: its error once, then
 * ENOTCONN.  A failed attempt rconnect has told of is, as TCP's after
 * connect(2) reported the failure, an unconnected socket again (data.c,
 * poll.c), not an ended connection.
 */
static int connect_result(struct rsocket *rs)
{
	int err;

	/* Connected, if maybe already left by the peer: reads tell. */
	if (rs->state & (RS_CONNECTED | RS_DISCONNECTED))
		return 0;
	if (rs->state & RS_CONNECT_ERROR)
		rs->connect_told = true;
	err = rs->err ? rs->err : ENOTCONN;
	rs->err = 0;
	return -err;
}

/*
 * Whatever the attempt became, the read or the write says it: a failed
 * one's error (data.c), or, broken as it opened (an accepted connection
 * whose peer wrote, then reset, before we took ESTABLISHED), what came
 * first, then the reset, as on a TCP socket accepted before its peer's
 * reset.
 */
int rs_finish_connect(struct rsocket *rs, bool nonblock)
{
	return rs_wait(rs, opened, nonblock);
}

static int start_connect(struct rsocket *rs, const struct sockaddr *addr,
			 socklen_t len)
{
	memcpy(&rs->dst, addr, len);
	if (rdma_resolve_addr(rs->id, NULL, (struct sockaddr *)&rs->dst,
			      RS_RESOLVE_MS))
		return -errno;
	rs->state = RS_RESOLVING_ADDR;
	return 0;
}

/*
 * What the network answered a connection attempt, not what failed here:
 * TCP's non-blocking connect(2) reports it later (EINPROGRESS, then
 * POLLOUT|POLLERR and SO_ERROR), even on loopback, where the refusal is
 * back before connect returns; an app may take an error at once for one
 * of its own (a bad address) and not try the next one, or report it
 * differently.  A local failure (EAGAIN: the daemon refused the QP over
 * the uid's limit) fails at once, as TCP's do.
 */
static bool peer_error(int err)
{
	return err == ECONNREFUSED || err == ETIMEDOUT ||
	       err == EHOSTUNREACH || err == ECONNRESET;
}

static int connect_locked(struct rsocket *rs, const struct sockaddr *addr,
			  socklen_t len)
{
	bool nonblock = rs_nonblocking(rs, 0), started = false;
	int ret;

	if (rs->state & RS_CONNECTED)
		return -EISCONN;
	if (rs->state == RS_LISTENING)
		return -EINVAL;
	if (rs->state & RS_OPENING) {
		if (nonblock)
			return -EALREADY;
	} else if (rs->state == RS_INIT || rs->state == RS_BOUND) {
		ret = start_connect(rs, addr, len);
		if (ret)
			return ret;
		started = true;
	} else {
		return connect_result(rs);
	}
	/*
	 * Only the wait's EAGAIN means "still under way": an attempt that
	 * ended with EAGAIN (the daemon refused its QP or CQ over the uid's
	 * limit) must not read as EINPROGRESS, which would leave the app
	 * waiting for a connection that failed, and reading SO_ERROR 0.
	 */
	ret = rs_wait(rs, opened, nonblock);
	if (ret)
		return ret == -EAGAIN ? -EINPROGRESS : ret;
	if (nonblock && started && (rs->state & RS_CONNECT_ERROR) &&
	    peer_error(rs->err))
		return -EINPROGRESS;
	return connect_result(rs);
}

int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rsocket *rs = rs_get(socket);
	int ret;

	if (!rs)
		return rs_ret(-EBADF);
	pthread_mutex_lock(&rs->lock);
	ret = check_addr(rs, addr, addrlen);
	if (!ret)
		ret = rs->dg ? rs_dgram_connect(rs, addr, addrlen) :
			       connect_locked(rs, addr, addrlen);
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return rs_ret(ret);
}

/* ---- rshutdown, rclose ------------------------------------------------------ */

static bool ctrl_ready(struct rsocket *rs)
{
	return rs_ctrl_avail(rs) || !(rs->state & RS_CONNECTED);
}

/* The control message that tells the peer what is left of us, if any. */
static int shutdown_ctrl(struct rsocket *rs, int how)
{
	if (how == SHUT_RDWR) {
		rs->state &= ~(RS_READABLE | RS_WRITABLE);
		return RS_CTRL_DISCONNECT;
	}
	if (how == SHUT_WR) {
		rs->state &= ~RS_WRITABLE;
		return rs->state & RS_READABLE ? RS_CTRL_SHUTDOWN :
						 RS_CTRL_DISCONNECT;
	}
	rs->state &= ~RS_READABLE;
	return rs->state & RS_WRITABLE ? -1 : RS_CTRL_DISCONNECT;
}

/*
 * A listener shut for reading stops listening, as TCP's does: requests,
 * waiting or new, are refused, and raccept() gives EINVAL, also in a
 * thread already blocked in it.  Its CM id is replaced by one bound to
 * the same address, so that rlisten() starts it again.
 */
static int stop_listening(struct rsocket *rs)
{
	struct sockaddr_storage addr;
	struct rdma_cm_id *id;

	/* first what may fail: until then it listens on, as it was */
	if (rdma_create_id(rs->ch, &id, rs, RDMA_PS_TCP))
		return -errno;
	rs->state = RS_BOUND;
	rs_cm_progress(rs);		/* refuses what came meanwhile */
	rs_free_requests(rs);
	rs_copy_sockaddr((struct sockaddr *)&addr, sizeof(addr),
			 rdma_get_local_addr(rs->id));
	rdma_destroy_id(rs->id);
	rs->id = id;
	if (rdma_bind_addr(id, (struct sockaddr *)&addr))
		rs->state = RS_INIT;	/* the address was taken meanwhile */
	return 0;
}

/*
 * SO_LINGER 0: the peer is told of an abort, which it reports as TCP
 * reports a reset (ECONNRESET, POLLERR|POLLHUP), where the disconnect
 * alone reads as a close.  The message must have landed before the
 * disconnect flushes our queue; a peer that takes none (it posts no
 * receives) holds us RS_RESET_WAIT_MS at most, then hears the
 * disconnect alone.
 */
static void send_reset(struct rsocket *rs)
{
	int64_t deadline = rs_deadline_ms(RS_RESET_WAIT_MS);

	if (rs_wait_until(rs, ctrl_ready, deadline) ||
	    !(rs->state & RS_CONNECTED))
		return;
	rs->ctrl_seqno++;
	if (rs_post_msg(rs, rs_msg(RS_OP_CTRL, RS_CTRL_RESET))) {
		rs->ctrl_seqno--;
		return;
	}
	rs_wait_until(rs, rs_all_sends_done, deadline);
}

/*
 * deadline as rs_wait_until's: rshutdown waits for ever, as rdma-core;
 * rclose as long as close_deadline says.  A wait that times out cuts
 * the connection, and a negative deadline cuts it at once.
 */
static int shutdown_locked(struct rsocket *rs, int how, int64_t deadline)
{
	int ctrl, ret = 0;

	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return -EINVAL;
	if (rs->state == RS_LISTENING)
		return how == SHUT_WR ? 0 : stop_listening(rs);
	if (!(rs->state & (RS_CONNECTED | RS_DISCONNECTED)))
		return -ENOTCONN;
	if ((rs->state & RS_CONNECTED) && deadline < 0) {
		send_reset(rs);
		rs->state = RS_DISCONNECTED;	/* SO_LINGER 0: no goodbye */
	} else if (rs->state & RS_CONNECTED) {
		ctrl = shutdown_ctrl(rs, how);
		if (ctrl < 0)
			return 0;
		/* Blocking even on a non-blocking socket, as rdma-core. */
		ret = rs_wait_until(rs, ctrl_ready, deadline);
		if (!ret && (rs->state & RS_CONNECTED)) {
			rs->ctrl_seqno++;
			ret = rs_post_msg(rs, rs_msg(RS_OP_CTRL, (uint32_t)ctrl));
		}
		if (!ret && (rs->state & RS_CONNECTED))
			ret = rs_wait_until(rs, rs_all_sends_done, deadline);
	}
	if (ret == -ETIMEDOUT)
		rs->state = RS_DISCONNECTED;
	if (rs->state & RS_DISCONNECTED)
		rdma_disconnect(rs->id);
	return ret;
}

/*
 * How long rclose waits for the peer to take what is still on its way
 * (our last data, then the message that we are gone): SO_LINGER's time
 * when it is on (0: not at all, the peer is told of a reset, as TCP's
 * RST, and the connection cut: send_reset), else RS_CLOSE_WAIT_MS.  rdma-core waits for ever, so a peer
 * that posts no more receives held the closing thread for good.  Our
 * data goes within the peer's credits, so it has landed whatever the
 * peer does; the last message may wait for a peer program that makes no
 * rsocket call meanwhile (its library reposts receives only then).
 */
static int64_t close_deadline(const struct rsocket *rs)
{
	if (!rs->linger.l_onoff)
		return rs_deadline_ms(RS_CLOSE_WAIT_MS);
	if (rs->linger.l_linger <= 0)
		return -1;
	return rs_deadline_ms((int64_t)rs->linger.l_linger * 1000);
}

int rshutdown(int socket, int how)
{
	struct rsocket *rs = rs_get(socket);
	int ret;

	if (!rs)
		return rs_ret(-EBADF);
	pthread_mutex_lock(&rs->lock);
	/* A datagram rsocket has no connection to shut down (as UDP's). */
	ret = rs->dg ? (how < SHUT_RD || how > SHUT_RDWR ? -EINVAL : 0) :
		       shutdown_locked(rs, how, 0);
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return rs_ret(ret);
}

int rclose(int socket)
{
	struct rsocket *rs = rs_get_inherited(socket);

	if (!rs)
		return rs_ret(-EBADF);
	/* A second rclose racing this one finds it gone from here on. */
	if (!rs_table_remove(rs)) {
		rs_put(rs);
		return rs_ret(-EBADF);
	}
	pthread_mutex_lock(&rs->lock);
	rs->closing = true;
	rs->closer = pthread_self();
	/*
	 * A forked child's copy says nothing to the peer: the connection
	 * is the parent's.  Freeing it closes the child's fds alone.
	 */
	if ((rs->state & RS_CONNECTED) && rs->owner == rs_table_pid())
		shutdown_locked(rs, SHUT_RDWR, close_deadline(rs));
	/* Calls blocked in it return EBADF within a wait slice. */
	rs->closed = true;
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);		/* ours */
	rs_put(rs);		/* the table's: freed once the blocked calls leave */
	return 0;
}
