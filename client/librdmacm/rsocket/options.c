/*
 * Socket options, file status flags and names.
 *
 * SOL_SOCKET and IPPROTO_TCP options keep what TCP keeps (SO_RCVBUF and
 * SO_SNDBUF size the buffers, doubled as Linux reports them, while there
 * is no endpoint yet); SOL_RDMA's size the queues and the iomap table.
 * Keepalive (SO_KEEPALIVE, TCP_KEEPIDLE) starts and times the keepalive
 * messages (keepalive.c).  rfcntl() knows F_GETFL and F_SETFL (O_NONBLOCK).
 */
#include "config.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rsocket.h>

#include "rs.h"

#define RS_MAX_IOMAP		0x7F00	/* what rs_scale_encode() can carry */

static int int_arg(const void *optval, socklen_t optlen, int *val)
{
	if (!optval)
		return -EFAULT;
	if (optlen < sizeof(int))
		return -EINVAL;
	memcpy(val, optval, sizeof(*val));
	return 0;
}

/* Buffer and queue sizes: only before the endpoint exists. */
static int set_size(struct rsocket *rs, uint32_t *field, int val, int mul)
{
	if (val <= 0)
		return -EINVAL;
	if (!rs->cq)
		*field = (uint32_t)val * (uint32_t)mul;
	return 0;
}

static int set_socket_opt(struct rsocket *rs, int name, const void *optval,
			  socklen_t optlen)
{
	int val, ret;

	if (name == SO_LINGER) {
		if (!optval)
			return -EFAULT;
		if (optlen < sizeof(struct linger))
			return -EINVAL;
		memcpy(&rs->linger, optval, sizeof(rs->linger));
		return 0;
	}
	ret = int_arg(optval, optlen, &val);
	if (ret)
		return ret;
	switch (name) {
	case SO_REUSEADDR:
		/* The CM may refuse it once bound; TCP keeps it anyway. */
		rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR,
				&val, sizeof(val));
		rs->reuseaddr = val != 0;
		return 0;
	case SO_RCVBUF:
		return set_size(rs, &rs->rbuf_size, val, 2);
	case SO_SNDBUF:
		return set_size(rs, &rs->sbuf_size, val, 2);
	case SO_REUSEPORT:
		/* Kept only: a CM port has one listener. */
		rs->reuseport = val != 0;
		return 0;
	case SO_KEEPALIVE:
		rs->keepalive = val != 0;
		return rs_keepalive_update(rs);
	case SO_OOBINLINE:
		rs->oobinline = val != 0;
		return 0;
	default:
		return -ENOPROTOOPT;
	}
}

/*
 * TCP's options.  Probes and segments have no meaning on a reliable
 * connection: TCP_KEEPCNT, TCP_KEEPINTVL and TCP_MAXSEG are taken as
 * rdma-core's rsockets take them, so that programs tuning them under
 * the preload library go on.  TCP_CORK is kept and reported only: every
 * send goes at once, as after the cork comes out (nginx's tcp_nopush,
 * on in Debian's nginx.conf, fails the response on an error here).
 */
static int set_tcp_opt(struct rsocket *rs, int name, const void *optval,
		       socklen_t optlen)
{
	int val, ret;

	if (name != TCP_NODELAY && name != TCP_KEEPIDLE && name != TCP_KEEPCNT &&
	    name != TCP_KEEPINTVL && name != TCP_MAXSEG && name != TCP_CORK)
		return -ENOPROTOOPT;
	ret = int_arg(optval, optlen, &val);
	if (ret < 0)
		return ret;
	switch (name) {
	case TCP_NODELAY:
		rs->nodelay = val != 0;
		return 0;
	case TCP_CORK:
		rs->cork = val != 0;
		return 0;
	case TCP_KEEPIDLE:
		if (val <= 0)
			return -EINVAL;
		rs->keepidle = val;
		/* the next one is due then */
		return rs->keepalive ? rs_keepalive_update(rs) : 0;
	case TCP_KEEPCNT:
		rs->keepcnt = val;
		return 0;
	case TCP_KEEPINTVL:
		rs->keepintvl = val;
		return 0;
	default:
		return 0;		/* TCP_MAXSEG: the path's MTU decides */
	}
}

/*
 * RDMA_ROUTE: paths to take in place of resolving the route, kept until
 * the connect has resolved the address, which the kernel asks first
 * (rs_connect_event, cm.c).
 */
static int keep_route(struct rsocket *rs, const void *optval, socklen_t optlen)
{
	void *copy;

	if (!optval)
		return -EFAULT;
	if (!optlen)
		return -EINVAL;
	if (rs->state & (RS_OPENING | RS_CONNECTED | RS_LISTENING))
		return -EINVAL;		/* too late to take a route */
	copy = malloc(optlen);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, optval, optlen);
	free(rs->route_opt);
	rs->route_opt = copy;
	rs->route_optlen = optlen;
	return 0;
}

static int set_rdma_opt(struct rsocket *rs, int name, const void *optval,
			socklen_t optlen)
{
	uint32_t val;

	if (name == RDMA_ROUTE)
		return keep_route(rs, optval, optlen);
	if (!optval)
		return -EFAULT;
	if (optlen < sizeof(val))
		return -EINVAL;
	memcpy(&val, optval, sizeof(val));
	if (rs->cq)
		return -EINVAL;	/* the endpoint is made: too late */
	switch (name) {
	case RDMA_SQSIZE:
		rs->sq_size = val;
		return 0;
	case RDMA_RQSIZE:
		rs->rq_size = val;
		return 0;
	case RDMA_INLINE:
		rs->sq_inline = val;
		return 0;
	case RDMA_IOMAPSIZE:
		/* what the peer will be told: larger sizes go in 256s */
		rs->target_iomap_size = rs_scale_decode(rs_scale_encode(
			(uint16_t)(val > RS_MAX_IOMAP ? RS_MAX_IOMAP : val)));
		return 0;
	default:
		return -ENOPROTOOPT;
	}
}

static int set_opt(struct rsocket *rs, int level, int name,
		   const void *optval, socklen_t optlen)
{
	int val, ret;

	switch (level) {
	case SOL_SOCKET:
		return set_socket_opt(rs, name, optval, optlen);
	case IPPROTO_TCP:
		return set_tcp_opt(rs, name, optval, optlen);
	case IPPROTO_IPV6:
		if (name != IPV6_V6ONLY || rs->domain != AF_INET6)
			return -ENOPROTOOPT;
		ret = int_arg(optval, optlen, &val);
		if (!ret && rdma_set_option(rs->id, RDMA_OPTION_ID,
					    RDMA_OPTION_ID_AFONLY, &val,
					    sizeof(val)))
			ret = -errno;
		if (!ret)
			rs->v6only = val != 0;
		return ret;
	case SOL_RDMA:
		return set_rdma_opt(rs, name, optval, optlen);
	default:
		return -ENOPROTOOPT;
	}
}

int rsetsockopt(int socket, int level, int optname, const void *optval,
		socklen_t optlen)
{
	struct rsocket *rs = rs_get(socket);
	int ret;

	if (!rs)
		return rs_ret(-EBADF);
	pthread_mutex_lock(&rs->lock);
	/* A datagram rsocket's options are its UDP socket's. */
	if (rs->dg)
		ret = level == SOL_RDMA ? -ENOPROTOOPT :
		      setsockopt(rs->fd, level, optname, optval, optlen) ? -errno : 0;
	else
		ret = set_opt(rs, level, optname, optval, optlen);
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return rs_ret(ret);
}

/* ---- rgetsockopt ----------------------------------------------------------- */

static int put(void *optval, socklen_t *optlen, const void *val, socklen_t len)
{
	if (*optlen < len)
		len = *optlen;
	memcpy(optval, val, len);
	*optlen = len;
	return 0;
}

static int put_int(void *optval, socklen_t *optlen, int val)
{
	return put(optval, optlen, &val, sizeof(val));
}

static int get_socket_opt(struct rsocket *rs, int name, void *optval,
			  socklen_t *optlen)
{
	int err;

	switch (name) {
	case SO_REUSEADDR:
		return put_int(optval, optlen, rs->reuseaddr);
	case SO_REUSEPORT:
		return put_int(optval, optlen, rs->reuseport);
	case SO_KEEPALIVE:
		return put_int(optval, optlen, rs->keepalive);
	case SO_OOBINLINE:
		return put_int(optval, optlen, rs->oobinline);
	case SO_RCVBUF:
		return put_int(optval, optlen, (int)rs->rbuf_size);
	case SO_SNDBUF:
		return put_int(optval, optlen, (int)rs->sbuf_size);
	case SO_LINGER:
		return put(optval, optlen, &rs->linger, sizeof(rs->linger));
	case SO_TYPE:
		return put_int(optval, optlen, SOCK_STREAM);
	case SO_DOMAIN:
		return put_int(optval, optlen, rs->domain);
	case SO_PROTOCOL:
		/* what TCP says; Python's socket(fileno=) asks, and fails without */
		return put_int(optval, optlen, IPPROTO_TCP);
	case SO_ACCEPTCONN:
		return put_int(optval, optlen, rs->state == RS_LISTENING);
	case SO_ERROR:
		err = rs->err;
		rs->err = 0;
		return put_int(optval, optlen, err);
	default:
		return -ENOPROTOOPT;
	}
}

/* The largest message a path carries: its MTU, 2048 without a path. */
static int max_seg(struct rsocket *rs)
{
	if (rs->id->route.num_paths && rs->id->route.path_rec)
		return 1 << (7 + rs->id->route.path_rec->mtu);
	return 2048;
}

/*
 * TCP_INFO: the state and segment sizes; the congestion figures TCP keeps
 * have no meaning here and are 0 (iperf3 reports them).
 */
static int put_tcp_info(struct rsocket *rs, void *optval, socklen_t *optlen)
{
	struct tcp_info info;

	memset(&info, 0, sizeof(info));
	if (rs->state & RS_CONNECTED)
		info.tcpi_state = TCP_ESTABLISHED;
	else if (rs->state == RS_LISTENING)
		info.tcpi_state = TCP_LISTEN;
	else if (rs->state & RS_OPENING)
		info.tcpi_state = TCP_SYN_SENT;
	else
		info.tcpi_state = TCP_CLOSE;
	info.tcpi_snd_mss = (uint32_t)max_seg(rs);
	info.tcpi_rcv_mss = (uint32_t)max_seg(rs);
	return put(optval, optlen, &info, sizeof(info));
}

static int get_rdma_opt(struct rsocket *rs, int name, void *optval,
			socklen_t *optlen)
{
	uint32_t val;

	switch (name) {
	case RDMA_SQSIZE:
		val = rs->sq_size;
		break;
	case RDMA_RQSIZE:
		val = rs->rq_size;
		break;
	case RDMA_INLINE:
		val = rs->sq_inline;
		break;
	case RDMA_IOMAPSIZE:
		val = rs->target_iomap_size;
		break;
	case RDMA_ROUTE:
		if (!rs->id->route.num_paths || !rs->id->route.path_rec)
			return -ENOTCONN;
		if (*optlen < sizeof(struct ibv_path_data))
			return -EINVAL;
		memset(optval, 0, sizeof(struct ibv_path_data));
		memcpy(&((struct ibv_path_data *)optval)->path,
		       rs->id->route.path_rec, sizeof(struct ibv_sa_path_rec));
		*optlen = sizeof(struct ibv_path_data);
		return 0;
	default:
		return -ENOPROTOOPT;
	}
	return put(optval, optlen, &val, sizeof(val));
}

static int get_opt(struct rsocket *rs, int level, int name, void *optval,
		   socklen_t *optlen)
{
	switch (level) {
	case SOL_SOCKET:
		return get_socket_opt(rs, name, optval, optlen);
	case IPPROTO_TCP:
		if (name == TCP_NODELAY)
			return put_int(optval, optlen, rs->nodelay);
		if (name == TCP_CORK)
			return put_int(optval, optlen, rs->cork);
		if (name == TCP_KEEPIDLE)
			return put_int(optval, optlen, rs->keepidle);
		if (name == TCP_KEEPCNT)
			return put_int(optval, optlen, rs->keepcnt);
		if (name == TCP_KEEPINTVL)
			return put_int(optval, optlen, rs->keepintvl);
		if (name == TCP_MAXSEG)
			return put_int(optval, optlen, max_seg(rs));
		if (name == TCP_INFO)
			return put_tcp_info(rs, optval, optlen);
		return -ENOPROTOOPT;
	case IPPROTO_IPV6:
		if (name != IPV6_V6ONLY || rs->domain != AF_INET6)
			return -ENOPROTOOPT;
		return put_int(optval, optlen, rs->v6only);
	case SOL_RDMA:
		return get_rdma_opt(rs, name, optval, optlen);
	default:
		return -ENOPROTOOPT;
	}
}

int rgetsockopt(int socket, int level, int optname, void *optval,
		socklen_t *optlen)
{
	struct rsocket *rs;
	int ret;

	if (!optval || !optlen)
		return rs_ret(-EFAULT);
	rs = rs_get(socket);
	if (!rs)
		return rs_ret(-EBADF);
	pthread_mutex_lock(&rs->lock);
	if (rs->dg)
		ret = level == SOL_RDMA ? -ENOPROTOOPT :
		      getsockopt(rs->fd, level, optname, optval, optlen) ? -errno : 0;
	else
		ret = get_opt(rs, level, optname, optval, optlen);
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return rs_ret(ret);
}

/* ---- rfcntl ----------------------------------------------------------------- */

int rfcntl(int socket, int cmd, ...)
{
	struct rsocket *rs = rs_get(socket);
	va_list ap;
	int ret = 0, arg;

	if (!rs)
		return rs_ret(-EBADF);
	pthread_mutex_lock(&rs->lock);
	switch (cmd) {
	case F_GETFL:
		ret = O_RDWR | rs->fl_flags;
		break;
	case F_SETFL:
		va_start(ap, cmd);
		arg = va_arg(ap, int);
		va_end(ap);
		rs->fl_flags = arg & O_NONBLOCK;
		break;
	default:
		ret = -EINVAL;
		break;
	}
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return rs_ret(ret);
}

/* ---- names ------------------------------------------------------------------ */

static int copy_name(struct rsocket *rs, const struct sockaddr *src,
		     struct sockaddr *addr, socklen_t *addrlen)
{
	struct sockaddr_storage any;

	if (!addr || !addrlen)
		return -EFAULT;
	if (!src || (src->sa_family != AF_INET && src->sa_family != AF_INET6 &&
		     src->sa_family != AF_IB)) {
		memset(&any, 0, sizeof(any));
		any.ss_family = (sa_family_t)rs->domain;
		src = (struct sockaddr *)&any;
	}
	*addrlen = rs_copy_sockaddr(addr, *addrlen, src);
	return 0;
}

int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsocket *rs = rs_get(socket);
	int ret;

	if (!rs)
		return rs_ret(-EBADF);
	pthread_mutex_lock(&rs->lock);
	if (rs->dg)
		ret = !addr || !addrlen ? -EFAULT :
		      rs_dgram_getpeername(rs, addr, addrlen);
	else if (!(rs->state & (RS_CONNECTED | RS_DISCONNECTED)) &&
		 rs->state != RS_ACCEPTING)
		ret = -ENOTCONN;
	else
		ret = copy_name(rs, rdma_get_peer_addr(rs->id), addr, addrlen);
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return rs_ret(ret);
}

int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsocket *rs = rs_get(socket);
	int ret;

	if (!rs)
		return rs_ret(-EBADF);
	pthread_mutex_lock(&rs->lock);
	if (rs->dg)
		ret = !addr || !addrlen ? -EFAULT :
		      rs_dgram_getsockname(rs, addr, addrlen);
	else
		ret = copy_name(rs, rdma_get_local_addr(rs->id), addr, addrlen);
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return rs_ret(ret);
}
