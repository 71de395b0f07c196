/*
 * rsocket-helper: the rsocket API of our librdmacm against a real daemon
 * (rsockets.sh), as an ordinary application built against the system
 * <rdma/rsocket.h> and -lrdmacm, run through ibverbsd-run so that it loads
 * ours.  Every case runs in a process of its own (Check's fork mode); both
 * ends of a connection live in that process: a listener on 127.0.0.1, a
 * client connecting without blocking, and rpoll() driving both until the
 * connection is up.  Bulk transfers use a second thread for one end.
 *
 * What is expected is what the socket calls give for the same misuse
 * (EBADF, EFAULT, EINVAL, ENOTCONN, EISCONN, EPIPE, ECONNREFUSED, ...)
 * and, for rsockets' own calls, rdma-core's rsocket(7).
 *
 *   rsocket-helper [TEST...]	the suite, or the named cases only
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <endian.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include "vt.h"
#include "tests/common/check_run.h"

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#define NOT_AN_RSOCKET	1000	/* an fd number nobody opened */

#define ck_fails_with(call, e) do {					\
	long r_ = (long)(call);						\
	int en_ = errno;						\
	ck_assert_msg(r_ == -1 && en_ == (e),				\
		      "%s: returned %ld (errno %d %s), want -1 with errno %s", \
		      #call, r_, en_, strerror(en_), #e);		\
} while (0)

#define ck_ok(call) do {						\
	long r_ = (long)(call);						\
	ck_assert_msg(r_ >= 0, "%s: returned %ld: %s", #call, r_,	\
		      strerror(errno));					\
} while (0)

/* ---- connections -------------------------------------------------------- */

static void loopback(struct sockaddr_in *sin, uint16_t port)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons(port);
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

static uint16_t local_port(int fd)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);

	ck_ok(rgetsockname(fd, (struct sockaddr *)&sin, &len));
	ck_assert_int_eq(len, sizeof(sin));
	return ntohs(sin.sin_port);
}

/* A listener on 127.0.0.1, a port of the CM's choosing. */
static int listener(uint16_t *port)
{
	struct sockaddr_in sin;
	int fd = rsocket(AF_INET, SOCK_STREAM, 0);

	ck_assert_msg(fd >= 0, "rsocket: %s", strerror(errno));
	loopback(&sin, 0);
	ck_ok(rbind(fd, (struct sockaddr *)&sin, sizeof(sin)));
	ck_ok(rlisten(fd, 8));
	*port = local_port(fd);
	ck_assert_int_ne(*port, 0);
	return fd;
}

static void set_nonblock(int fd, bool on)
{
	ck_ok(rfcntl(fd, F_SETFL, on ? O_NONBLOCK : 0));
}

/* Poll one fd for events until they show (or fail after the bound). */
static short wait_for(int fd, short events)
{
	struct pollfd p = { fd, events, 0 };
	int n = rpoll(&p, 1, vt_tmo_ms());

	ck_assert_msg(n == 1, "rpoll on %d for %#x: %d (%s)", fd, events, n,
		      n < 0 ? strerror(errno) : "timed out");
	return p.revents;
}

/* RDMA_IOMAPSIZE for the next client connect_pair() makes (0: none). */
static uint32_t client_iomap_size;
/* SO_SNDBUF for it (0: the default). */
static int client_sndbuf;
/* RDMA_ROUTE for it (NULL: none). */
static const struct ibv_path_data *client_route;

/*
 * A connected pair: *srv (from raccept) and *cli, both blocking again.
 * The client connects without blocking; rpoll drives both ends.
 */
static void connect_pair(int lfd, uint16_t port, int *srv, int *cli)
{
	struct sockaddr_in sin;
	struct pollfd p[2];
	long end = vt_now_ms() + vt_tmo_ms();
	int err = -1;
	socklen_t len = sizeof(err);

	*srv = -1;
	*cli = rsocket(AF_INET, SOCK_STREAM, 0);
	ck_assert_msg(*cli >= 0, "rsocket: %s", strerror(errno));
	if (client_iomap_size)
		ck_ok(rsetsockopt(*cli, SOL_RDMA, RDMA_IOMAPSIZE,
				  &client_iomap_size, sizeof(client_iomap_size)));
	if (client_sndbuf)
		ck_ok(rsetsockopt(*cli, SOL_SOCKET, SO_SNDBUF, &client_sndbuf,
				  sizeof(client_sndbuf)));
	if (client_route)
		ck_ok(rsetsockopt(*cli, SOL_RDMA, RDMA_ROUTE, client_route,
				  sizeof(*client_route)));
	set_nonblock(*cli, true);
	loopback(&sin, port);
	ck_fails_with(rconnect(*cli, (struct sockaddr *)&sin, sizeof(sin)),
		      EINPROGRESS);
	p[0].fd = lfd;
	p[0].events = POLLIN;
	p[1].fd = *cli;
	p[1].events = POLLOUT;
	while (*srv < 0 || p[1].events) {
		ck_assert_msg(vt_now_ms() < end, "no connection within the bound");
		ck_ok(rpoll(p, 2, 100));
		if (p[0].revents & POLLIN) {
			*srv = raccept(lfd, NULL, NULL);
			ck_assert_msg(*srv >= 0, "raccept: %s", strerror(errno));
			p[0].fd = -1;
		}
		if (p[1].revents & POLLOUT)
			p[1].events = 0;
		ck_assert_msg(!(p[1].revents & POLLERR), "the connect failed");
	}
	ck_ok(rgetsockopt(*cli, SOL_SOCKET, SO_ERROR, &err, &len));
	ck_assert_int_eq(err, 0);
	set_nonblock(*cli, false);
}

static void pair(int *lfd, int *srv, int *cli)
{
	uint16_t port;

	*lfd = listener(&port);
	connect_pair(*lfd, port, srv, cli);
}

static void send_all(int fd, const void *buf, size_t len)
{
	ck_assert_int_eq(rsend(fd, buf, len, 0), (ssize_t)len);
}

static void recv_all(int fd, void *buf, size_t len)
{
	ck_assert_int_eq(rrecv(fd, buf, len, MSG_WAITALL), (ssize_t)len);
}

/* ---- bad descriptors and arguments ------------------------------------- */

START_TEST(bad_fds)
{
	const int fds[] = { -1, NOT_AN_RSOCKET, STDERR_FILENO };
	struct sockaddr_in sin;
	struct iovec iov;
	struct msghdr msg;
	char buf[8];
	socklen_t len;
	int v = 1;
	unsigned int i;

	loopback(&sin, 1);
	iov.iov_base = buf;
	iov.iov_len = sizeof(buf);
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	for (i = 0; i < ARRAY_SIZE(fds); i++) {
		int fd = fds[i];

		len = sizeof(sin);
		ck_fails_with(rbind(fd, (struct sockaddr *)&sin, sizeof(sin)), EBADF);
		ck_fails_with(rlisten(fd, 1), EBADF);
		ck_fails_with(raccept(fd, NULL, NULL), EBADF);
		ck_fails_with(rconnect(fd, (struct sockaddr *)&sin, sizeof(sin)), EBADF);
		ck_fails_with(rshutdown(fd, SHUT_RDWR), EBADF);
		ck_fails_with(rclose(fd), EBADF);
		ck_fails_with(rrecv(fd, buf, sizeof(buf), 0), EBADF);
		ck_fails_with(rrecvfrom(fd, buf, sizeof(buf), 0, NULL, NULL), EBADF);
		ck_fails_with(rrecvmsg(fd, &msg, 0), EBADF);
		ck_fails_with(rsend(fd, buf, sizeof(buf), 0), EBADF);
		ck_fails_with(rsendto(fd, buf, sizeof(buf), 0, NULL, 0), EBADF);
		ck_fails_with(rsendmsg(fd, &msg, 0), EBADF);
		ck_fails_with(rread(fd, buf, sizeof(buf)), EBADF);
		ck_fails_with(rreadv(fd, &iov, 1), EBADF);
		ck_fails_with(rwrite(fd, buf, sizeof(buf)), EBADF);
		ck_fails_with(rwritev(fd, &iov, 1), EBADF);
		ck_fails_with(rgetpeername(fd, (struct sockaddr *)&sin, &len), EBADF);
		ck_fails_with(rgetsockname(fd, (struct sockaddr *)&sin, &len), EBADF);
		ck_fails_with(rsetsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &v, sizeof(v)), EBADF);
		len = sizeof(v);
		ck_fails_with(rgetsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &v, &len), EBADF);
		ck_fails_with(rfcntl(fd, F_GETFL), EBADF);
		ck_fails_with(riomap(fd, buf, sizeof(buf), PROT_WRITE, 0, 0), EBADF);
		ck_fails_with(riounmap(fd, buf, sizeof(buf)), EBADF);
		ck_fails_with((ssize_t)riowrite(fd, buf, sizeof(buf), 0, 0), EBADF);
	}
	/* The standard error stream is untouched by all this. */
	ck_assert_int_ge(fcntl(STDERR_FILENO, F_GETFD), 0);
}
END_TEST

START_TEST(socket_args)
{
	int fd;

	ck_fails_with(rsocket(AF_UNIX, SOCK_STREAM, 0), EAFNOSUPPORT);
	ck_fails_with(rsocket(AF_INET, SOCK_DGRAM, IPPROTO_TCP), EPROTONOSUPPORT);
	ck_fails_with(rsocket(AF_INET, SOCK_RAW, 0), ESOCKTNOSUPPORT);
	ck_fails_with(rsocket(AF_INET, SOCK_STREAM, IPPROTO_UDP), EPROTONOSUPPORT);

	fd = rsocket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		     IPPROTO_TCP);
	ck_assert_msg(fd >= 0, "rsocket: %s", strerror(errno));
	/* A real fd, close-on-exec as asked, and non-blocking. */
	ck_assert_int_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	ck_assert_int_eq(rfcntl(fd, F_GETFL) & O_NONBLOCK, O_NONBLOCK);
	/* IPV6_V6ONLY: the host's default (bindv6only), then as set */
	{
		FILE *f = fopen("/proc/sys/net/ipv6/bindv6only", "r");
		int v = -1, host = 0;
		socklen_t len = sizeof(v);

		if (f) {
			ck_assert_int_eq(fscanf(f, "%d", &host), 1);
			fclose(f);
		}
		ck_ok(rgetsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v, &len));
		ck_assert_int_eq(v, host);
		ck_ok(rsetsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &(int){ !host },
				  sizeof(int)));
		ck_ok(rgetsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v, &len));
		ck_assert_int_eq(v, !host);
	}
	ck_ok(rclose(fd));
	ck_fails_with(rclose(fd), EBADF);
}
END_TEST

START_TEST(bind_args)
{
	struct sockaddr_in sin, got;
	struct sockaddr_in6 sin6;
	socklen_t len = sizeof(got);
	uint16_t port;
	int fd, other, lfd;

	fd = rsocket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	loopback(&sin, 0);
	ck_fails_with(rbind(fd, NULL, sizeof(sin)), EFAULT);
	ck_fails_with(rbind(fd, (struct sockaddr *)&sin, 4), EINVAL);
	/* longer than any address (connect(2)'s EINVAL): nothing copied */
	{
		static char big[4096];

		memcpy(big, &sin, sizeof(sin));
		ck_fails_with(rbind(fd, (struct sockaddr *)big, sizeof(big)), EINVAL);
		ck_fails_with(rconnect(fd, (struct sockaddr *)big, sizeof(big)), EINVAL);
	}
	memset(&sin6, 0, sizeof(sin6));
	sin6.sin6_family = AF_INET6;
	ck_fails_with(rbind(fd, (struct sockaddr *)&sin6, sizeof(sin6)), EAFNOSUPPORT);
	/* Unbound: the wildcard of the socket's family, port 0. */
	ck_ok(rgetsockname(fd, (struct sockaddr *)&got, &len));
	ck_assert_int_eq(got.sin_family, AF_INET);
	ck_assert_int_eq(got.sin_port, 0);
	ck_fails_with(rgetsockname(fd, NULL, &len), EFAULT);
	ck_ok(rbind(fd, (struct sockaddr *)&sin, sizeof(sin)));
	ck_fails_with(rbind(fd, (struct sockaddr *)&sin, sizeof(sin)), EINVAL);
	ck_assert_int_ne(local_port(fd), 0);

	/* A port a listener holds is in use. */
	lfd = listener(&port);
	other = rsocket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(other, 0);
	loopback(&sin, port);
	ck_fails_with(rbind(other, (struct sockaddr *)&sin, sizeof(sin)), EADDRINUSE);
	ck_ok(rclose(other));
	ck_ok(rclose(lfd));
	ck_ok(rclose(fd));
}
END_TEST

START_TEST(listen_accept_args)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int fd, lfd;
	uint16_t port;

	/* listen(2) on an unbound socket picks a port. */
	fd = rsocket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_fails_with(raccept(fd, NULL, NULL), EINVAL);
	ck_ok(rlisten(fd, 4));
	ck_assert_int_ne(local_port(fd), 0);
	ck_ok(rlisten(fd, 16));		/* again: a new backlog only */
	ck_ok(rclose(fd));

	lfd = listener(&port);
	set_nonblock(lfd, true);
	loopback(&sin, port);
	ck_fails_with(raccept(lfd, (struct sockaddr *)&sin, &len), EAGAIN);
	ck_fails_with(raccept(lfd, (struct sockaddr *)&sin, NULL), EFAULT);
	ck_fails_with(rconnect(lfd, (struct sockaddr *)&sin, sizeof(sin)), EINVAL);
	/* Nothing pending: rpoll times out without POLLIN. */
	{
		struct pollfd p = { lfd, POLLIN, 0 };

		ck_assert_int_eq(rpoll(&p, 1, 50), 0);
		ck_assert_int_eq(p.revents, 0);
	}
	ck_ok(rclose(lfd));
}
END_TEST

START_TEST(connect_refused)
{
	struct sockaddr_in sin;
	socklen_t len;
	char buf[4];
	short rev;
	int fd, err;
	uint16_t port;

	/* A port that was listened on and is free again: nobody there. */
	fd = listener(&port);
	ck_ok(rclose(fd));
	loopback(&sin, port);

	fd = rsocket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	len = sizeof(sin);
	ck_fails_with(rgetpeername(fd, (struct sockaddr *)&sin, &len), ENOTCONN);
	ck_fails_with(rsend(fd, "x", 1, 0), ENOTCONN);
	ck_fails_with(rrecv(fd, buf, sizeof(buf), 0), ENOTCONN);
	ck_fails_with(rshutdown(fd, SHUT_WR), ENOTCONN);
	ck_fails_with(rconnect(fd, NULL, sizeof(sin)), EFAULT);
	ck_fails_with(rconnect(fd, (struct sockaddr *)&sin, 2), EINVAL);
	ck_fails_with(rconnect(fd, (struct sockaddr *)&sin, sizeof(sin)), ECONNREFUSED);
	ck_ok(rclose(fd));

	/*
	 * Without blocking: EINPROGRESS, then POLLOUT|POLLERR|POLLHUP and
	 * SO_ERROR, as TCP's, on loopback too, where the refusal is back
	 * before rconnect returns (it once failed at once).
	 */
	fd = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ck_assert_int_ge(fd, 0);
	err = rconnect(fd, (struct sockaddr *)&sin, sizeof(sin));
	ck_assert_msg(err == -1 && errno == EINPROGRESS,
		      "nonblocking rconnect: %d (%s), want EINPROGRESS", err,
		      err ? strerror(errno) : "");
	rev = wait_for(fd, POLLOUT);
	ck_assert_msg((rev & (POLLOUT | POLLERR | POLLHUP)) ==
		      (POLLOUT | POLLERR | POLLHUP),
		      "revents %#x, want POLLOUT|POLLERR|POLLHUP", rev);
	err = 0;
	len = sizeof(err);
	ck_ok(rgetsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len));
	ck_assert_int_eq(err, ECONNREFUSED);
	/* Reported once, then cleared: poll says so too (hung up, no error). */
	len = sizeof(err);
	ck_ok(rgetsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len));
	ck_assert_int_eq(err, 0);
	rev = wait_for(fd, POLLOUT);
	ck_assert_msg((rev & POLLHUP) && !(rev & POLLERR),
		      "revents %#x once the error was told", rev);
	ck_ok(rclose(fd));
}
END_TEST

/*
 * What a refused attempt is to the calls after it, as TCP's on this
 * host (loopback, a closed port).  Its error goes to the first call that
 * meets it, a read, a send or SO_ERROR (reads and sends once gave
 * ENOTCONN and left it to SO_ERROR); the socket is then an ended one:
 * reads 0, sends EPIPE, polls POLLIN|POLLOUT|POLLHUP.  Once rconnect
 * told it, it is an unconnected one: reads ENOTCONN, sends EPIPE, polls
 * POLLOUT|POLLHUP (once POLLIN too, which left a reader spinning on 0).
 */
static int refused_fd(const struct sockaddr_in *sin, bool nonblock)
{
	int fd = rsocket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);

	ck_assert_int_ge(fd, 0);
	if (!nonblock) {
		ck_fails_with(rconnect(fd, (const struct sockaddr *)sin,
				       sizeof(*sin)), ECONNREFUSED);
		return fd;
	}
	ck_fails_with(rconnect(fd, (const struct sockaddr *)sin, sizeof(*sin)),
		      EINPROGRESS);
	wait_for(fd, POLLOUT);
	return fd;
}

static void ck_revents(int fd, short want)
{
	struct pollfd p = { fd, POLLIN | POLLOUT, 0 };
	struct timeval tv = { 0, 0 };
	fd_set r, w, e;

	ck_assert_int_eq(rpoll(&p, 1, 0), 1);
	ck_assert_msg(p.revents == want, "revents %#x, want %#x", p.revents,
		      want);
	FD_ZERO(&r);
	FD_ZERO(&w);
	FD_ZERO(&e);
	FD_SET(fd, &r);
	FD_SET(fd, &w);
	FD_SET(fd, &e);
	/* hung up: readable and writable to select, as Linux's, no exception */
	ck_assert_int_eq(rselect(fd + 1, &r, &w, &e, &tv), 2);
	ck_assert(FD_ISSET(fd, &r) && FD_ISSET(fd, &w) && !FD_ISSET(fd, &e));
}

static void ck_so_error(int fd, int want)
{
	socklen_t len = sizeof(int);
	int err = -1;

	ck_ok(rgetsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len));
	ck_assert_int_eq(err, want);
}

#define ENDED	(POLLIN | POLLOUT | POLLHUP)

START_TEST(refused_then_reads_and_sends)
{
	struct sockaddr_in sin;
	char buf[4];
	uint16_t port;
	int fd;

	fd = listener(&port);
	ck_ok(rclose(fd));
	loopback(&sin, port);

	/* A read meets the error first, one of no bytes too. */
	fd = refused_fd(&sin, true);
	ck_revents(fd, ENDED | POLLERR);
	ck_fails_with(rrecv(fd, buf, sizeof(buf), 0), ECONNREFUSED);
	ck_assert_int_eq(rrecv(fd, buf, sizeof(buf), 0), 0);
	ck_assert_int_eq(rrecv(fd, buf, 0, 0), 0);
	ck_fails_with(rsend(fd, "x", 1, MSG_NOSIGNAL), EPIPE);
	ck_assert_int_eq(rrecv(fd, buf, sizeof(buf), 0), 0);
	ck_revents(fd, ENDED);
	ck_so_error(fd, 0);
	ck_ok(rclose(fd));

	fd = refused_fd(&sin, true);
	ck_fails_with(rrecv(fd, buf, 0, 0), ECONNREFUSED);
	ck_assert_int_eq(rrecv(fd, buf, sizeof(buf), 0), 0);
	ck_ok(rclose(fd));

	/* A send does. */
	fd = refused_fd(&sin, true);
	ck_fails_with(rsend(fd, "x", 1, MSG_NOSIGNAL), ECONNREFUSED);
	ck_fails_with(rsend(fd, "x", 1, MSG_NOSIGNAL), EPIPE);
	ck_assert_int_eq(rrecv(fd, buf, sizeof(buf), 0), 0);
	ck_revents(fd, ENDED);
	ck_ok(rclose(fd));

	/* SO_ERROR does. */
	fd = refused_fd(&sin, true);
	ck_so_error(fd, ECONNREFUSED);
	ck_assert_int_eq(rrecv(fd, buf, sizeof(buf), 0), 0);
	ck_fails_with(rsend(fd, "x", 1, MSG_NOSIGNAL), EPIPE);
	ck_revents(fd, ENDED);
	ck_ok(rclose(fd));

	/* rconnect does, without blocking and blocking. */
	fd = refused_fd(&sin, true);
	ck_fails_with(rconnect(fd, (struct sockaddr *)&sin, sizeof(sin)),
		      ECONNREFUSED);
	ck_revents(fd, POLLOUT | POLLHUP);
	ck_fails_with(rrecv(fd, buf, sizeof(buf), 0), ENOTCONN);
	ck_fails_with(rsend(fd, "x", 1, MSG_NOSIGNAL), EPIPE);
	ck_so_error(fd, 0);
	ck_ok(rclose(fd));
	fd = refused_fd(&sin, false);
	ck_revents(fd, POLLOUT | POLLHUP);
	ck_fails_with(rrecv(fd, buf, 0, 0), ENOTCONN);
	ck_fails_with(rrecv(fd, buf, sizeof(buf), 0), ENOTCONN);
	ck_fails_with(rsend(fd, "x", 1, MSG_NOSIGNAL), EPIPE);
	ck_fails_with(rrecv(fd, buf, sizeof(buf), 0), ENOTCONN);
	ck_ok(rclose(fd));
}
END_TEST

START_TEST(connect_and_names)
{
	struct sockaddr_in peer, self;
	socklen_t len;
	int lfd, srv, cli;
	uint16_t port;

	lfd = listener(&port);
	connect_pair(lfd, port, &srv, &cli);
	loopback(&peer, port);
	ck_fails_with(rconnect(cli, (struct sockaddr *)&peer, sizeof(peer)), EISCONN);

	len = sizeof(peer);
	ck_ok(rgetpeername(cli, (struct sockaddr *)&peer, &len));
	ck_assert_int_eq(len, sizeof(peer));
	ck_assert_int_eq(ntohs(peer.sin_port), port);
	ck_assert_int_eq(ntohl(peer.sin_addr.s_addr), INADDR_LOOPBACK);
	/* The server's peer is the client's own name. */
	len = sizeof(self);
	ck_ok(rgetsockname(cli, (struct sockaddr *)&self, &len));
	len = sizeof(peer);
	ck_ok(rgetpeername(srv, (struct sockaddr *)&peer, &len));
	ck_assert_int_eq(peer.sin_port, self.sin_port);
	ck_assert_int_ne(self.sin_port, 0);
	/* A short buffer gets the start and the full length. */
	len = 4;
	memset(&peer, 0, sizeof(peer));
	ck_ok(rgetpeername(cli, (struct sockaddr *)&peer, &len));
	ck_assert_int_eq(len, sizeof(peer));
	ck_assert_int_eq(peer.sin_family, AF_INET);
	ck_assert_int_eq(peer.sin_addr.s_addr, 0);

	send_all(cli, "ping", 4);
	{
		char buf[4];

		recv_all(srv, buf, 4);
		ck_assert(!memcmp(buf, "ping", 4));
	}
	ck_ok(rclose(cli));
	ck_ok(rclose(srv));
	ck_ok(rclose(lfd));
}
END_TEST

START_TEST(partial_reads)
{
	uint8_t data[10000], got[10000];
	struct iovec iov[3];
	size_t off = 0;
	int lfd, srv, cli;
	ssize_t n;

	pair(&lfd, &srv, &cli);
	ck_fails_with(rrecv(srv, got, sizeof(got), MSG_DONTWAIT), EAGAIN);
	vt_fill(data, sizeof(data), 0, 7);
	send_all(cli, data, sizeof(data));

	/* MSG_PEEK shows without taking. */
	wait_for(srv, POLLIN);
	n = rrecv(srv, got, 10, MSG_PEEK);
	ck_assert_int_eq(n, 10);
	vt_expect_pat(got, 10, 0, 7, "peeked bytes");
	/* Small reads take the stream piece by piece, in order. */
	while (off < 3000) {
		n = rrecv(srv, got + off, 100, 0);
		ck_assert_int_ge(n, 1);
		ck_assert_int_le(n, 100);
		off += (size_t)n;
	}
	/* A vector read spreads over its buffers. */
	iov[0].iov_base = got + off;
	iov[0].iov_len = 1;
	iov[1].iov_base = got + off + 1;
	iov[1].iov_len = 0;
	iov[2].iov_base = got + off + 1;
	iov[2].iov_len = 999;
	n = rreadv(srv, iov, 3);
	ck_assert_int_gt(n, 0);
	off += (size_t)n;
	/* Whatever came: the rest with MSG_WAITALL. */
	recv_all(srv, got + off, sizeof(got) - off);
	vt_expect_pat(got, sizeof(got), 0, 7, "the stream");
	ck_fails_with(rrecv(srv, got, sizeof(got), MSG_DONTWAIT), EAGAIN);

	/* rwrite/rread and rrecvfrom (which names the peer) are the same. */
	ck_assert_int_eq(rwrite(cli, "12345", 5), 5);
	wait_for(srv, POLLIN);
	ck_assert_int_eq(rread(srv, got, 2), 2);
	ck_assert(!memcmp(got, "12", 2));
	{
		struct sockaddr_in from;
		socklen_t len = sizeof(from);

		memset(&from, 0, sizeof(from));
		ck_assert_int_eq(rrecvfrom(srv, got, 3, MSG_WAITALL,
					   (struct sockaddr *)&from, &len), 3);
		ck_assert(!memcmp(got, "345", 3));
		ck_assert_int_eq(from.sin_family, AF_INET);
		ck_assert_int_eq(from.sin_port, htons(local_port(cli)));
	}
	ck_ok(rclose(cli));
	ck_ok(rclose(srv));
	ck_ok(rclose(lfd));
}
END_TEST

/* ---- large transfers ----------------------------------------------------- */

#define BIG (24u << 20)

struct sender {
	int fd;
	size_t len;
	uint32_t seed;
	bool vector;
	ssize_t sent;
};

/* Sends len bytes of the pattern in uneven pieces (a thread). */
static void *send_pattern(void *arg)
{
	struct sender *s = arg;
	size_t chunk = 100003, off = 0;
	uint8_t *buf = malloc(s->len);
	ssize_t n;

	if (!buf)
		return NULL;
	vt_fill(buf, s->len, 0, s->seed);
	while (off < s->len) {
		size_t len = s->len - off < chunk ? s->len - off : chunk;

		if (s->vector) {
			struct iovec iov[2] = {
				{ buf + off, len / 3 }, { buf + off + len / 3, len - len / 3 }
			};
			n = rwritev(s->fd, iov, 2);
		} else {
			n = rsend(s->fd, buf + off, len, 0);
		}
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	s->sent = (ssize_t)off;
	free(buf);
	return NULL;
}

static void recv_pattern(int fd, size_t len, uint32_t seed)
{
	uint8_t *buf = malloc(len);
	size_t off = 0;
	ssize_t n;

	ck_assert_ptr_nonnull(buf);
	while (off < len) {
		n = rrecv(fd, buf + off, len - off < 77777 ? len - off : 77777, 0);
		ck_assert_msg(n > 0, "rrecv at %zu of %zu: %zd (%s)", off, len, n,
			      n < 0 ? strerror(errno) : "end of file");
		off += (size_t)n;
	}
	vt_expect_pat(buf, len, 0, seed, "the received stream");
	free(buf);
}

/*
 * A stream's MSG_TRUNC receive, as TCP's: the bytes are counted, not
 * copied (the buffer may be NULL); with MSG_PEEK they stay, without it
 * they are gone.  (What the preload library's FIONREAD asks.)
 */
START_TEST(stream_truncating_receive)
{
	uint8_t data[3000], got[3000];
	int lfd, srv, cli;

	pair(&lfd, &srv, &cli);
	vt_fill(data, sizeof(data), 0, 11);
	send_all(cli, data, sizeof(data));
	wait_for(srv, POLLIN);
	/* all of it may not have come at once: wait until it has */
	for (int i = 0; i < 100 && rrecv(srv, got, sizeof(got), MSG_PEEK) < (ssize_t)sizeof(data); i++)
		usleep(10000);
	ck_assert_int_eq(rrecv(srv, NULL, 1 << 20, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT),
			 sizeof(data));
	ck_assert_int_eq(rrecv(srv, NULL, 1000, MSG_TRUNC), 1000);
	ck_assert_int_eq(rrecv(srv, NULL, 1 << 20, MSG_PEEK | MSG_TRUNC), 2000);
	recv_all(srv, got, 2000);
	vt_expect_pat(got, 2000, 1000, 11, "what MSG_TRUNC left");
	ck_fails_with(rrecv(srv, NULL, 1, MSG_DONTWAIT), EFAULT);
	ck_ok(rclose(cli));
	ck_ok(rclose(srv));
	ck_ok(rclose(lfd));
}
END_TEST

START_TEST(large_transfer)
{
	struct sender up, down;
	pthread_t tu, td;
	int lfd, srv, cli;

	pair(&lfd, &srv, &cli);
	/* Both directions at once: credits flow while data does. */
	up = (struct sender){ cli, BIG, 11, false, 0 };
	down = (struct sender){ srv, BIG / 2, 12, true, 0 };
	ck_assert_int_eq(pthread_create(&tu, NULL, send_pattern, &up), 0);
	ck_assert_int_eq(pthread_create(&td, NULL, send_pattern, &down), 0);
	recv_pattern(srv, BIG, 11);
	recv_pattern(cli, BIG / 2, 12);
	pthread_join(tu, NULL);
	pthread_join(td, NULL);
	ck_assert_int_eq(up.sent, BIG);
	ck_assert_int_eq(down.sent, BIG / 2);
	ck_ok(rclose(cli));
	ck_ok(rclose(srv));
	ck_ok(rclose(lfd));
}
END_TEST

/*
 * A send buffer of 4 KiB or less (iperf3 -w 4K) still leaves the send
 * queue slots for data beside those kept for control: data flows.
 */
START_TEST(small_send_buffer)
{
	static const int sizes[] = { 4096, 2048 };
	struct sender up;
	pthread_t tu;
	int lfd, srv, cli;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		client_sndbuf = sizes[i];
		pair(&lfd, &srv, &cli);
		client_sndbuf = 0;
		up = (struct sender){ cli, 1 << 20, 13 + i, false, 0 };
		ck_assert_int_eq(pthread_create(&tu, NULL, send_pattern, &up), 0);
		recv_pattern(srv, 1 << 20, 13 + i);
		pthread_join(tu, NULL);
		ck_assert_int_eq(up.sent, 1 << 20);
		ck_ok(rclose(cli));
		ck_ok(rclose(srv));
		ck_ok(rclose(lfd));
	}
}
END_TEST

/* ---- the end of a connection --------------------------------------------- */

START_TEST(peer_close)
{
	char buf[16];
	short rev;
	int lfd, srv, cli, i;
	ssize_t n = 0;

	pair(&lfd, &srv, &cli);
	send_all(cli, "hello", 5);
	ck_ok(rclose(cli));
	/* What was sent before the close is read first, then end of file. */
	recv_all(srv, buf, 5);
	ck_assert(!memcmp(buf, "hello", 5));
	rev = wait_for(srv, POLLIN);
	ck_assert(rev & POLLIN);
	ck_assert_int_eq(rrecv(srv, buf, sizeof(buf), 0), 0);
	ck_assert_int_eq(rrecv(srv, buf, sizeof(buf), 0), 0);
	rev = wait_for(srv, POLLIN);
	ck_assert_msg(rev & POLLHUP, "revents %#x lack POLLHUP", rev);
	/* Nobody to send to. */
	for (i = 0; i < 3 && n >= 0; i++)
		n = rsend(srv, "x", 1, 0);
	ck_assert_int_eq(n, -1);
	ck_assert_int_eq(errno, EPIPE);
	ck_ok(rclose(srv));
	ck_ok(rclose(lfd));
}
END_TEST

/*
 * SO_LINGER {1, 0} aborts the connection, as TCP's sends a reset: the
 * peer reads what came before, then ECONNRESET (once it read it as an
 * end of file, as after a close), and polls POLLERR|POLLHUP.  As TCP's,
 * the reset is told once (it once stayed: every read ECONNRESET, and
 * SO_ERROR too): then SO_ERROR 0, reads 0 and sends EPIPE.
 */
START_TEST(linger_zero_resets)
{
	static const struct linger now = { 1, 0 };
	char buf[16];
	short rev;
	int lfd, srv, cli, err;
	socklen_t len = sizeof(err);
	ssize_t n;

	pair(&lfd, &srv, &cli);
	send_all(cli, "hello", 5);
	ck_ok(rsetsockopt(cli, SOL_SOCKET, SO_LINGER, &now, sizeof(now)));
	ck_ok(rclose(cli));
	n = rrecv(srv, buf, 5, MSG_WAITALL);
	ck_assert_msg(n == 5 && !memcmp(buf, "hello", 5),
		      "rrecv before the reset: %zd (%s), want the 5 bytes sent",
		      n, n < 0 ? strerror(errno) : "");
	rev = wait_for(srv, POLLIN);
	ck_assert_msg((rev & (POLLIN | POLLERR | POLLHUP)) ==
		      (POLLIN | POLLERR | POLLHUP),
		      "revents %#x, want POLLIN|POLLERR|POLLHUP", rev);
	n = rrecv(srv, buf, sizeof(buf), 0);
	ck_assert_msg(n == -1 && errno == ECONNRESET,
		      "rrecv after the reset: %zd (%s), want ECONNRESET", n,
		      n < 0 ? strerror(errno) : "");
	ck_ok(rgetsockopt(srv, SOL_SOCKET, SO_ERROR, &err, &len));
	ck_assert_int_eq(err, 0);
	n = rrecv(srv, buf, sizeof(buf), 0);
	ck_assert_msg(n == 0, "rrecv after the reset was read: %zd (%s), want 0",
		      n, n < 0 ? strerror(errno) : "");
	n = rsend(srv, "x", 1, MSG_NOSIGNAL);
	ck_assert_msg(n == -1 && errno == EPIPE,
		      "rsend after the reset was read: %zd (%s), want EPIPE", n,
		      n < 0 ? strerror(errno) : "");
	ck_ok(rclose(srv));
	ck_ok(rclose(lfd));
}
END_TEST

START_TEST(shutdown_directions)
{
	char buf[16];
	int lfd, srv, cli;

	pair(&lfd, &srv, &cli);
	ck_fails_with(rshutdown(cli, 42), EINVAL);
	send_all(cli, "last", 4);
	ck_ok(rshutdown(cli, SHUT_WR));
	ck_fails_with(rsend(cli, "x", 1, 0), EPIPE);
	/* The server reads the rest, then end of file ... */
	recv_all(srv, buf, 4);
	ck_assert(!memcmp(buf, "last", 4));
	ck_assert_int_eq(rrecv(srv, buf, sizeof(buf), 0), 0);
	/* ... and can still talk to the client, which still listens. */
	send_all(srv, "reply", 5);
	recv_all(cli, buf, 5);
	ck_assert(!memcmp(buf, "reply", 5));
	/* The server stops reading: its reads end at once. */
	ck_ok(rshutdown(srv, SHUT_RD));
	ck_assert_int_eq(rrecv(srv, buf, sizeof(buf), 0), 0);
	/* Both sides shut: the client sees the end too. */
	ck_ok(rshutdown(srv, SHUT_WR));
	ck_assert_int_eq(rrecv(cli, buf, sizeof(buf), 0), 0);
	ck_ok(rclose(cli));
	ck_ok(rclose(srv));
	ck_ok(rclose(lfd));
}
END_TEST

/* ---- calls from other threads -------------------------------------------- */

/* One blocking call run in a thread: what it returned, and errno. */
struct blocked {
	int fd;
	bool accept;		/* raccept, else rrecv */
	ssize_t ret;
	int err;
	bool done;
};

static void *blocked_run(void *arg)
{
	struct blocked *b = arg;
	char buf[16];

	b->ret = b->accept ? raccept(b->fd, NULL, NULL) :
			     rrecv(b->fd, buf, sizeof(buf), 0);
	b->err = errno;
	__atomic_store_n(&b->done, true, __ATOMIC_RELEASE);
	return NULL;
}

/* Start b's call and give it time to block (it must not have returned). */
static void start_blocked(struct blocked *b, pthread_t *t)
{
	ck_assert_int_eq(pthread_create(t, NULL, blocked_run, b), 0);
	vt_sleep_ms(300);
	ck_assert_msg(!__atomic_load_n(&b->done, __ATOMIC_ACQUIRE),
		      "the call returned %zd (%s) before anything happened",
		      b->ret, strerror(b->err));
}

/* b's call returns within the bound with -1 and errno want. */
static void finish_blocked(struct blocked *b, pthread_t t, int want,
			   const char *what)
{
	long end = vt_now_ms() + vt_tmo_ms();

	while (!__atomic_load_n(&b->done, __ATOMIC_ACQUIRE) && vt_now_ms() < end)
		vt_sleep_ms(5);
	ck_assert_msg(b->done, "%s: the blocked call did not return", what);
	pthread_join(t, NULL);
	ck_assert_msg(b->ret == -1 && b->err == want,
		      "%s: the blocked call gave %zd (%s), want -1 %s", what,
		      b->ret, b->ret < 0 ? strerror(b->err) : "", strerror(want));
}

/*
 * rclose() while another thread is blocked in the rsocket: the blocked
 * call ends with EBADF (it used to run on freed memory), and the peer
 * sees the connection end.
 */
START_TEST(close_while_blocked)
{
	struct blocked b = { 0 };
	char buf[4];
	pthread_t t;
	int lfd, srv, cli;

	pair(&lfd, &srv, &cli);
	b.fd = srv;
	start_blocked(&b, &t);
	ck_ok(rclose(srv));
	finish_blocked(&b, t, EBADF, "rrecv, rclose()d meanwhile");
	ck_assert_int_eq(rrecv(cli, buf, sizeof(buf), 0), 0);
	ck_fails_with(rclose(srv), EBADF);

	b = (struct blocked){ .fd = lfd, .accept = true };
	start_blocked(&b, &t);
	ck_ok(rclose(lfd));
	finish_blocked(&b, t, EBADF, "raccept, rclose()d meanwhile");
	ck_ok(rclose(cli));
}
END_TEST

/* ---- signals ------------------------------------------------------------ */

static void on_usr1(int sig)
{
	(void)sig;
}

struct poker {
	pthread_t target;	/* signalled (SIGUSR1) after 200 ms */
	int fd;			/* then sent "late" after 400 more, if >= 0 */
};

static void *poke(void *arg)
{
	struct poker *p = arg;

	usleep(200000);
	pthread_kill(p->target, SIGUSR1);
	if (p->fd >= 0) {
		usleep(400000);
		send_all(p->fd, "late", 4);
	}
	return NULL;
}

/*
 * A blocking call that a handler with SA_RESTART interrupted goes on, as
 * the kernel restarts recv(2) on TCP (glibc's signal() sets the flag:
 * a SIGCHLD handler must not make a server's accept fail).  Without the
 * flag it fails with EINTR.
 */
START_TEST(restart_after_signal)
{
	struct sigaction sa;
	struct poker p = { .target = pthread_self() };
	char buf[8];
	pthread_t t;
	int lfd, srv, cli, sig;

	/*
	 * Check's runner leaves this process its own handlers (SIGALRM,
	 * SIGTERM..., without SA_RESTART): one of those could be what came,
	 * for all the library knows, so no call would go on.
	 */
	for (sig = 1; sig < NSIG; sig++)
		if (sigaction(sig, NULL, &sa) == 0 && sa.sa_handler != SIG_DFL &&
		    sa.sa_handler != SIG_IGN && !(sa.sa_flags & SA_RESTART))
			signal(sig, SIG_DFL);
	pair(&lfd, &srv, &cli);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	ck_ok(sigaction(SIGUSR1, &sa, NULL));
	p.fd = cli;
	ck_assert_int_eq(pthread_create(&t, NULL, poke, &p), 0);
	ck_assert_int_eq(rrecv(srv, buf, sizeof(buf), 0), 4);
	ck_assert_int_eq(memcmp(buf, "late", 4), 0);
	pthread_join(t, NULL);

	sa.sa_flags = 0;
	ck_ok(sigaction(SIGUSR1, &sa, NULL));
	p.fd = -1;
	ck_assert_int_eq(pthread_create(&t, NULL, poke, &p), 0);
	ck_fails_with(rrecv(srv, buf, sizeof(buf), 0), EINTR);
	pthread_join(t, NULL);
	ck_ok(rclose(cli));
	ck_ok(rclose(srv));
	ck_ok(rclose(lfd));
}
END_TEST

/*
 * rshutdown() of a listener stops it, as TCP's: a blocked raccept ends
 * with EINVAL, a new connection is refused at once, and rlisten() on the
 * same rsocket listens on the same port again.
 */
START_TEST(shutdown_listener)
{
	struct blocked b = { .accept = true };
	struct sockaddr_in sin;
	pthread_t t;
	uint16_t port;
	int srv, cli, fd;
	long start;

	b.fd = listener(&port);
	start_blocked(&b, &t);
	ck_ok(rshutdown(b.fd, SHUT_WR));	/* not for reading: listens on */
	vt_sleep_ms(150);
	ck_assert(!__atomic_load_n(&b.done, __ATOMIC_ACQUIRE));
	ck_ok(rshutdown(b.fd, SHUT_RDWR));
	finish_blocked(&b, t, EINVAL, "raccept, its listener shut down");
	ck_fails_with(raccept(b.fd, NULL, NULL), EINVAL);

	loopback(&sin, port);
	fd = rsocket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	start = vt_now_ms();
	ck_fails_with(rconnect(fd, (struct sockaddr *)&sin, sizeof(sin)),
		      ECONNREFUSED);
	ck_assert_msg(vt_now_ms() - start < 2000,
		      "refused only after %ld ms", vt_now_ms() - start);
	ck_ok(rclose(fd));

	ck_ok(rlisten(b.fd, 8));
	ck_assert_int_eq(local_port(b.fd), port);
	connect_pair(b.fd, port, &srv, &cli);
	send_all(cli, "up", 2);
	ck_ok(rclose(cli));
	ck_ok(rclose(srv));
	ck_ok(rclose(b.fd));
}
END_TEST

/* ---- riomap / riowrite ------------------------------------------------- */

START_TEST(iomap)
{
	static uint8_t target[1 << 20], data[1 << 20];
	uint8_t tail[16];
	uint32_t size = 4;
	uint16_t port;
	int lfd, srv, cli;
	char b;
	off_t off;

	/*
	 * A map is announced into the peer's iomap table, so the writer
	 * needs one: both ends take tables (raccept's from the listener).
	 */
	lfd = rsocket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(lfd, 0);
	ck_ok(rsetsockopt(lfd, SOL_RDMA, RDMA_IOMAPSIZE, &size, sizeof(size)));
	{
		struct sockaddr_in sin;

		loopback(&sin, 0);
		ck_ok(rbind(lfd, (struct sockaddr *)&sin, sizeof(sin)));
		ck_ok(rlisten(lfd, 4));
		port = local_port(lfd);
	}
	client_iomap_size = size;
	connect_pair(lfd, port, &srv, &cli);

	ck_fails_with(riomap(srv, target, sizeof(target), PROT_READ, 0, 0), EINVAL);
	ck_fails_with(riomap(srv, NULL, sizeof(target), PROT_WRITE, 0, 0), EINVAL);
	ck_fails_with(riomap(srv, target, 0, PROT_WRITE, 0, 0), EINVAL);
	ck_fails_with(riomap(srv, target, sizeof(target), PROT_WRITE, 1, 0), EINVAL);
	ck_fails_with(riounmap(srv, data, sizeof(data)), EINVAL);
	/* Nothing mapped by the peer yet: nothing written (rdma-core's 0). */
	ck_assert_int_eq((ssize_t)riowrite(cli, data, 16, 0, 0), 0);

	off = riomap(srv, target, sizeof(target), PROT_WRITE, 0, 4096);
	ck_assert_int_eq(off, 4096);
	/* The map goes out before the server's next message. */
	send_all(srv, "m", 1);
	recv_all(cli, &b, 1);

	vt_fill(data, sizeof(data), 0, 21);
	ck_assert_int_eq((ssize_t)riowrite(cli, data, sizeof(data), 4096, 0),
			 (ssize_t)sizeof(data));
	/* Past the map's end: the part inside is written, then nothing. */
	memcpy(tail, data + sizeof(target) - 8, 8);
	memset(tail + 8, 0, 8);
	ck_assert_int_eq((ssize_t)riowrite(cli, tail, 16, 4096 + sizeof(target) - 8, 0),
			 8);
	ck_assert_int_eq((ssize_t)riowrite(cli, data, 16, 4096 + sizeof(target), 0), 0);
	ck_fails_with((ssize_t)riowrite(cli, data, 16, -5, 0), EINVAL);
	ck_fails_with((ssize_t)riowrite(cli, NULL, 16, 4096, 0), EFAULT);
	/* Writes are ordered before a later message: then the data is there. */
	send_all(cli, "d", 1);
	recv_all(srv, &b, 1);
	vt_expect_pat(target, sizeof(target), 0, 21, "the riowritten map");
	ck_ok(riounmap(srv, target, sizeof(target)));
	ck_fails_with(riounmap(srv, target, sizeof(target)), EINVAL);
	ck_ok(rclose(cli));
	ck_ok(rclose(srv));
	ck_ok(rclose(lfd));
}
END_TEST

/* ---- options ------------------------------------------------------------ */

static int get_int(int fd, int level, int name)
{
	int v = -12345;
	socklen_t len = sizeof(v);

	ck_ok(rgetsockopt(fd, level, name, &v, &len));
	ck_assert_int_eq(len, sizeof(v));
	return v;
}

static void set_int(int fd, int level, int name, int v)
{
	ck_ok(rsetsockopt(fd, level, name, &v, sizeof(v)));
}

START_TEST(options)
{
	struct linger lg = { 1, 7 }, lg2;
	struct ibv_path_data route;
	struct tcp_info info;
	char b;
	socklen_t len;
	uint32_t u = 0;
	int fd, lfd, srv, cli, v = 1;

	fd = rsocket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	set_int(fd, SOL_SOCKET, SO_RCVBUF, 65536);
	ck_assert_int_eq(get_int(fd, SOL_SOCKET, SO_RCVBUF), 131072);
	set_int(fd, SOL_SOCKET, SO_SNDBUF, 32768);
	ck_assert_int_eq(get_int(fd, SOL_SOCKET, SO_SNDBUF), 65536);
	set_int(fd, IPPROTO_TCP, TCP_NODELAY, 1);
	ck_assert_int_eq(get_int(fd, IPPROTO_TCP, TCP_NODELAY), 1);
	set_int(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
	ck_assert_int_eq(get_int(fd, SOL_SOCKET, SO_KEEPALIVE), 1);
	set_int(fd, IPPROTO_TCP, TCP_KEEPIDLE, 30);
	ck_assert_int_eq(get_int(fd, IPPROTO_TCP, TCP_KEEPIDLE), 30);
	/* taken, as rdma-core's rsockets take them; read back as set */
	ck_assert_int_eq(get_int(fd, IPPROTO_TCP, TCP_KEEPCNT), 9);
	set_int(fd, IPPROTO_TCP, TCP_KEEPCNT, 4);
	ck_assert_int_eq(get_int(fd, IPPROTO_TCP, TCP_KEEPCNT), 4);
	set_int(fd, IPPROTO_TCP, TCP_KEEPINTVL, 11);
	ck_assert_int_eq(get_int(fd, IPPROTO_TCP, TCP_KEEPINTVL), 11);
	set_int(fd, IPPROTO_TCP, TCP_MAXSEG, 1400);
	/* kept and read back (nginx's tcp_nopush fails a response without) */
	ck_assert_int_eq(get_int(fd, IPPROTO_TCP, TCP_CORK), 0);
	set_int(fd, IPPROTO_TCP, TCP_CORK, 1);
	ck_assert_int_eq(get_int(fd, IPPROTO_TCP, TCP_CORK), 1);
	set_int(fd, SOL_SOCKET, SO_REUSEADDR, 1);
	ck_assert_int_eq(get_int(fd, SOL_SOCKET, SO_REUSEADDR), 1);
	ck_assert_int_eq(get_int(fd, SOL_SOCKET, SO_TYPE), SOCK_STREAM);
	ck_assert_int_eq(get_int(fd, SOL_SOCKET, SO_ERROR), 0);
	ck_ok(rsetsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)));
	len = sizeof(lg2);
	ck_ok(rgetsockopt(fd, SOL_SOCKET, SO_LINGER, &lg2, &len));
	ck_assert_int_eq(lg2.l_onoff, 1);
	ck_assert_int_eq(lg2.l_linger, 7);
	ck_fails_with(rsetsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, 2), EINVAL);

	for (v = RDMA_SQSIZE; v <= RDMA_IOMAPSIZE; v++) {
		u = 32;
		ck_ok(rsetsockopt(fd, SOL_RDMA, v, &u, sizeof(u)));
		u = 0;
		len = sizeof(u);
		ck_ok(rgetsockopt(fd, SOL_RDMA, v, &u, &len));
		ck_assert_int_eq(u, 32);
	}
	/* the iomap's size as the peer will learn it: past 128, in 256s */
	u = 300;
	ck_ok(rsetsockopt(fd, SOL_RDMA, RDMA_IOMAPSIZE, &u, sizeof(u)));
	len = sizeof(u);
	ck_ok(rgetsockopt(fd, SOL_RDMA, RDMA_IOMAPSIZE, &u, &len));
	ck_assert_int_eq(u, 256);

	/* Bad arguments. */
	v = 1;
	ck_fails_with(rsetsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, NULL, sizeof(v)), EFAULT);
	ck_fails_with(rsetsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &v, 1), EINVAL);
	ck_fails_with(rsetsockopt(fd, SOL_SOCKET, SO_RCVBUF, &(int){ -1 }, sizeof(int)), EINVAL);
	ck_fails_with(rsetsockopt(fd, SOL_SOCKET, SO_BROADCAST, &v, sizeof(v)), ENOPROTOOPT);
	ck_fails_with(rsetsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, "reno", 5), ENOPROTOOPT);
	ck_fails_with(rsetsockopt(fd, 4242, 1, &v, sizeof(v)), ENOPROTOOPT);
	ck_fails_with(rsetsockopt(fd, SOL_RDMA, 99, &u, sizeof(u)), ENOPROTOOPT);
	ck_fails_with(rsetsockopt(fd, SOL_RDMA, RDMA_SQSIZE, &u, 2), EINVAL);
	len = sizeof(v);
	ck_fails_with(rgetsockopt(fd, SOL_SOCKET, SO_BROADCAST, &v, &len), ENOPROTOOPT);
	ck_fails_with(rgetsockopt(fd, SOL_SOCKET, SO_TYPE, NULL, &len), EFAULT);
	ck_fails_with(rgetsockopt(fd, SOL_SOCKET, SO_TYPE, &v, NULL), EFAULT);
	ck_fails_with(rgetsockopt(fd, SOL_RDMA, RDMA_ROUTE, &info, &len), ENOTCONN);

	/* File status flags. */
	ck_assert_int_eq(rfcntl(fd, F_GETFL) & O_NONBLOCK, 0);
	ck_ok(rfcntl(fd, F_SETFL, O_NONBLOCK));
	ck_assert_int_eq(rfcntl(fd, F_GETFL) & O_NONBLOCK, O_NONBLOCK);
	ck_fails_with(rfcntl(fd, F_DUPFD, 0), EINVAL);
	ck_ok(rclose(fd));

	/* Once connected, the queues are fixed; TCP_INFO says established. */
	pair(&lfd, &srv, &cli);
	u = 64;
	ck_fails_with(rsetsockopt(cli, SOL_RDMA, RDMA_SQSIZE, &u, sizeof(u)), EINVAL);
	len = sizeof(info);
	ck_ok(rgetsockopt(cli, IPPROTO_TCP, TCP_INFO, &info, &len));
	ck_assert_int_eq(info.tcpi_state, TCP_ESTABLISHED);
	ck_assert_int_ge(get_int(cli, IPPROTO_TCP, TCP_MAXSEG), 256);

	/*
	 * RDMA_ROUTE: connected, the path it took (too late to give one);
	 * before a connect, the paths a client takes in place of resolving
	 * its route, as rdma-core's rsockets take them.
	 */
	len = sizeof(route);
	ck_ok(rgetsockopt(cli, SOL_RDMA, RDMA_ROUTE, &route, &len));
	route.flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY |
		      IBV_PATH_FLAG_BIDIRECTIONAL;
	ck_fails_with(rsetsockopt(cli, SOL_RDMA, RDMA_ROUTE, &route, sizeof(route)),
		      EINVAL);
	ck_ok(rclose(cli));
	ck_ok(rclose(srv));
	client_route = &route;
	connect_pair(lfd, local_port(lfd), &srv, &cli);
	client_route = NULL;
	send_all(cli, "r", 1);
	recv_all(srv, &b, 1);
	ck_assert_int_eq(b, 'r');
	ck_ok(rclose(cli));
	ck_ok(rclose(srv));
	ck_ok(rclose(lfd));
}
END_TEST

START_TEST(bad_data_args)
{
	struct sockaddr_in sin;
	struct iovec iov = { NULL, 8 };
	struct msghdr msg;
	char buf[8];
	int lfd, srv, cli;

	pair(&lfd, &srv, &cli);
	loopback(&sin, 1);
	ck_fails_with(rsend(cli, NULL, 8, 0), EFAULT);
	ck_fails_with(rrecv(srv, NULL, 8, 0), EFAULT);
	ck_fails_with(rwritev(cli, &iov, 1), EFAULT);
	ck_fails_with(rreadv(srv, &iov, -1), EINVAL);
	ck_fails_with(rreadv(srv, NULL, 1), EFAULT);
	ck_fails_with(rsend(cli, buf, 1, MSG_OOB), EOPNOTSUPP);
	ck_fails_with(rsendto(cli, buf, 1, 0, (struct sockaddr *)&sin, sizeof(sin)), EISCONN);
	ck_fails_with(rsendmsg(cli, NULL, 0), EFAULT);
	ck_fails_with(rrecvmsg(srv, NULL, 0), EFAULT);
	/* Nothing was lost by the refusals: the connection still works. */
	memset(&msg, 0, sizeof(msg));
	iov.iov_base = "abc";
	iov.iov_len = 3;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	ck_assert_int_eq(rsendmsg(cli, &msg, 0), 3);
	iov.iov_base = buf;
	iov.iov_len = sizeof(buf);
	wait_for(srv, POLLIN);
	ck_assert_int_eq(rrecvmsg(srv, &msg, 0), 3);
	ck_assert(!memcmp(buf, "abc", 3));
	ck_assert_int_eq(rsend(cli, buf, 0, 0), 0);
	ck_ok(rclose(cli));
	ck_ok(rclose(srv));
	ck_ok(rclose(lfd));
}
END_TEST

/* ---- rpoll and rselect over rsockets and ordinary fds ------------------ */

struct delayed {
	int fd;
	bool rsock;
	long ms;
};

static void *write_later(void *arg)
{
	struct delayed *d = arg;

	vt_sleep_ms(d->ms);
	if (d->rsock)
		rsend(d->fd, "z", 1, 0);
	else if (write(d->fd, "z", 1) != 1)
		abort();
	return NULL;
}

START_TEST(poll_mixed)
{
	struct delayed d;
	struct pollfd p[2];
	pthread_t t;
	int lfd, srv, cli, pfd[2];
	long t0;
	char b;

	pair(&lfd, &srv, &cli);
	ck_ok(pipe(pfd));
	p[0] = (struct pollfd){ pfd[0], POLLIN, 0 };
	p[1] = (struct pollfd){ srv, POLLIN | POLLOUT, 0 };
	/*
	 * The rsocket can send (once the peer's first credits are in: they
	 * may still be on their way just after the connection); nothing is
	 * readable.
	 */
	ck_assert_int_eq(rpoll(p, 2, vt_tmo_ms()), 1);
	ck_assert_int_eq(p[0].revents, 0);
	ck_assert_int_eq(p[1].revents, POLLOUT);
	/* A timeout with nothing to report. */
	p[1].events = POLLIN;
	t0 = vt_now_ms();
	ck_assert_int_eq(rpoll(p, 2, 300), 0);
	ck_assert_int_ge(vt_now_ms() - t0, 250);
	/* Data on the rsocket wakes a sleeping rpoll ... */
	d = (struct delayed){ cli, true, 200 };
	pthread_create(&t, NULL, write_later, &d);
	ck_assert_int_eq(rpoll(p, 2, vt_tmo_ms()), 1);
	ck_assert_int_eq(p[1].revents, POLLIN);
	pthread_join(t, NULL);
	ck_assert_int_eq(rrecv(srv, &b, 1, 0), 1);
	/* ... and so does the pipe. */
	d = (struct delayed){ pfd[1], false, 200 };
	pthread_create(&t, NULL, write_later, &d);
	ck_assert_int_eq(rpoll(p, 2, vt_tmo_ms()), 1);
	ck_assert_int_eq(p[0].revents, POLLIN);
	pthread_join(t, NULL);
	/* Negative fds are skipped. */
	p[0].fd = -1;
	ck_assert_int_eq(rpoll(p, 2, 0), 0);
	ck_fails_with(rpoll(NULL, 2, 0), EFAULT);
	close(pfd[0]);
	close(pfd[1]);
	ck_ok(rclose(cli));
	ck_ok(rclose(srv));
	ck_ok(rclose(lfd));
}
END_TEST

START_TEST(select_mixed)
{
	struct timeval tv;
	fd_set r, w;
	int lfd, srv, cli, pfd[2], nfds;

	pair(&lfd, &srv, &cli);
	ck_ok(pipe(pfd));
	nfds = (srv > pfd[0] ? srv : pfd[0]) + 1;
	FD_ZERO(&r);
	FD_SET(pfd[0], &r);
	FD_SET(srv, &r);
	tv = (struct timeval){ 0, 100000 };
	ck_assert_int_eq(rselect(nfds, &r, NULL, NULL, &tv), 0);
	ck_assert(!FD_ISSET(srv, &r));

	send_all(cli, "q", 1);
	if (write(pfd[1], "p", 1) != 1)
		ck_abort_msg("pipe write");
	/* rselect returns once any is ready: let the byte arrive first. */
	wait_for(srv, POLLIN);
	FD_ZERO(&r);
	FD_SET(pfd[0], &r);
	FD_SET(srv, &r);
	FD_ZERO(&w);
	FD_SET(cli, &w);
	nfds = (nfds > cli ? nfds : cli + 1);
	tv = (struct timeval){ vt_tmo_ms() / 1000, 0 };
	ck_assert_int_eq(rselect(nfds, &r, &w, NULL, &tv), 3);
	ck_assert(FD_ISSET(srv, &r) && FD_ISSET(pfd[0], &r) && FD_ISSET(cli, &w));
	tv = (struct timeval){ -1, 0 };
	ck_fails_with(rselect(nfds, &r, NULL, NULL, &tv), EINVAL);
	ck_fails_with(rselect(-1, &r, NULL, NULL, NULL), EINVAL);
	/* a descriptor not open: EBADF, as select(2), not a busy 0 */
	close(pfd[0]);
	FD_ZERO(&r);
	FD_SET(pfd[0], &r);
	FD_SET(srv, &r);
	ck_fails_with(rselect(nfds, &r, NULL, NULL, NULL), EBADF);
	close(pfd[1]);
	ck_ok(rclose(cli));
	ck_ok(rclose(srv));
	ck_ok(rclose(lfd));
}
END_TEST

/*
 * A hangup is no exception: select(2) watching a descriptor for
 * exceptions alone sleeps through its peer's close, and so must rselect
 * (it once returned 0 at once, as if the time were up).  Here a pipe
 * whose writer closed and an rsocket whose peer closed.
 */
START_TEST(select_hangup_is_no_exception)
{
	int lfd, srv, cli, pfd[2], nfds;
	struct timeval tv;
	long t0, took;
	fd_set e;

	pair(&lfd, &srv, &cli);
	ck_ok(rclose(cli));
	wait_for(srv, POLLIN);
	ck_ok(pipe(pfd));
	close(pfd[1]);
	nfds = (srv > pfd[0] ? srv : pfd[0]) + 1;
	FD_ZERO(&e);
	FD_SET(pfd[0], &e);
	FD_SET(srv, &e);
	tv = (struct timeval){ 0, 300000 };
	t0 = vt_now_ms();
	ck_assert_int_eq(rselect(nfds, NULL, NULL, &e, &tv), 0);
	took = vt_now_ms() - t0;
	ck_assert_msg(took >= 290, "rselect returned 0 after %ld ms of 300", took);
	ck_assert(!FD_ISSET(srv, &e) && !FD_ISSET(pfd[0], &e));
	close(pfd[0]);
	ck_ok(rclose(srv));
	ck_ok(rclose(lfd));
}
END_TEST

/*
 * rselect only reads its timeout, as rdma-core's does (select(2) leaves
 * what is left of it): an app that waits again with the same timeval
 * waits as long again, where a zeroed one would have it spin.
 */
START_TEST(select_keeps_timeout)
{
	int lfd, srv, cli, nfds;
	struct timeval tv;
	long t0, took;
	fd_set r;

	pair(&lfd, &srv, &cli);
	nfds = srv + 1;
	FD_ZERO(&r);
	FD_SET(srv, &r);
	tv = (struct timeval){ 0, 100000 };
	ck_assert_int_eq(rselect(nfds, &r, NULL, NULL, &tv), 0);
	ck_assert_msg(tv.tv_sec == 0 && tv.tv_usec == 100000,
		      "rselect left the timeout at %ld.%06ld s, not 0.1",
		      (long)tv.tv_sec, (long)tv.tv_usec);
	FD_SET(srv, &r);
	t0 = vt_now_ms();
	ck_assert_int_eq(rselect(nfds, &r, NULL, NULL, &tv), 0);
	took = vt_now_ms() - t0;
	ck_assert_msg(took >= 90, "the same timeval again: 0 after %ld ms of 100", took);

	send_all(cli, "q", 1);
	wait_for(srv, POLLIN);
	FD_SET(srv, &r);
	tv = (struct timeval){ 1, 0 };
	ck_assert_int_eq(rselect(nfds, &r, NULL, NULL, &tv), 1);
	ck_assert(FD_ISSET(srv, &r));
	ck_assert(tv.tv_sec == 1 && tv.tv_usec == 0);
	ck_ok(rclose(cli));
	ck_ok(rclose(srv));
	ck_ok(rclose(lfd));
}
END_TEST

/* ---- datagram rsockets ----------------------------------------------------- */

/* A datagram rsocket bound to 127.0.0.1, a port of the kernel's choosing. */
static int dgram(uint16_t *port)
{
	struct sockaddr_in sin;
	int fd = rsocket(AF_INET, SOCK_DGRAM, 0);

	ck_assert_msg(fd >= 0, "rsocket(SOCK_DGRAM): %s", strerror(errno));
	loopback(&sin, 0);
	ck_ok(rbind(fd, (struct sockaddr *)&sin, sizeof(sin)));
	*port = local_port(fd);
	ck_assert_int_ne(*port, 0);
	return fd;
}

/* One datagram of pattern seed, len bytes, from fd to port. */
static void dg_send(int fd, uint16_t port, size_t len, uint32_t seed)
{
	struct sockaddr_in to;
	uint8_t buf[2048];

	loopback(&to, port);
	vt_fill(buf, len, 0, seed);
	ck_assert_int_eq(rsendto(fd, buf, len, 0, (struct sockaddr *)&to, sizeof(to)),
			 (ssize_t)len);
}

/* The next datagram on fd: len bytes of seed, from port. */
static void dg_expect(int fd, uint16_t port, size_t len, uint32_t seed)
{
	struct sockaddr_in from;
	socklen_t flen = sizeof(from);
	uint8_t buf[2048];
	ssize_t n;

	ck_assert(wait_for(fd, POLLIN) & POLLIN);
	n = rrecvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen);
	ck_assert_msg(n == (ssize_t)len, "rrecvfrom: %zd (%s), want %zu", n,
		      n < 0 ? strerror(errno) : "", len);
	ck_assert_int_eq(vt_check(buf, len, 0, seed), -1);
	ck_assert_int_eq(flen, sizeof(from));
	ck_assert_int_eq(ntohs(from.sin_port), port);
	ck_assert_int_eq(from.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
}

/*
 * Datagrams both ways between two rsockets: the first ones go over UDP
 * until each side has the other's QP number, the rest over the UD QP;
 * every byte and every source address checked.
 */
START_TEST(dgram_exchange)
{
	uint16_t pa, pb;
	int a = dgram(&pa), b = dgram(&pb), i;

	for (i = 0; i < 200; i++) {
		size_t len = 1 + (size_t)(i * 37) % 2000;

		dg_send(a, pb, len, (uint32_t)i);
		dg_expect(b, pa, len, (uint32_t)i);
		dg_send(b, pa, len, 1000u + (uint32_t)i);
		dg_expect(a, pb, len, 1000u + (uint32_t)i);
	}
	/* a burst, then all of it in order */
	for (i = 0; i < 32; i++)
		dg_send(a, pb, 100, 5000u + (uint32_t)i);
	for (i = 0; i < 32; i++)
		dg_expect(b, pa, 100, 5000u + (uint32_t)i);
	ck_ok(rclose(a));
	ck_ok(rclose(b));
}
END_TEST

/* rconnect() names the peer of rsend/rrecv; MSG_PEEK; the calls that make no sense. */
START_TEST(dgram_connected)
{
	struct sockaddr_in sin, peer;
	socklen_t len = sizeof(peer);
	uint16_t pa, pb;
	int a = dgram(&pa), b = dgram(&pb);
	char buf[4000], got[16];

	ck_fails_with(rsend(a, "x", 1, 0), EDESTADDRREQ);
	ck_fails_with(rgetpeername(a, (struct sockaddr *)&peer, &len), ENOTCONN);
	ck_fails_with(rlisten(a, 1), EOPNOTSUPP);
	ck_fails_with(raccept(a, NULL, NULL), EOPNOTSUPP);
	ck_fails_with(rsend(a, buf, 1, MSG_OOB), EOPNOTSUPP);
	loopback(&sin, pb);
	ck_ok(rconnect(a, (struct sockaddr *)&sin, sizeof(sin)));
	len = sizeof(peer);
	ck_ok(rgetpeername(a, (struct sockaddr *)&peer, &len));
	ck_assert_int_eq(ntohs(peer.sin_port), pb);
	memset(buf, 'x', sizeof(buf));
	ck_fails_with(rsend(a, buf, sizeof(buf), 0), EMSGSIZE);
	ck_assert_int_eq(rsend(a, "hello", 6, 0), 6);
	ck_assert(wait_for(b, POLLIN) & POLLIN);
	ck_assert_int_eq(rrecv(b, got, sizeof(got), MSG_PEEK), 6);
	ck_assert_int_eq(rrecv(b, got, 3, 0), 3);	/* the rest is cut off */
	ck_assert_int_eq(memcmp(got, "hel", 3), 0);
	ck_fails_with(rrecv(b, got, sizeof(got), MSG_DONTWAIT), EAGAIN);
	set_nonblock(b, true);
	ck_fails_with(rrecvfrom(b, got, sizeof(got), 0, NULL, NULL), EAGAIN);
	ck_assert(wait_for(a, POLLOUT) & POLLOUT);
	ck_ok(rclose(a));
	ck_ok(rclose(b));
}
END_TEST

/*
 * A sender bound to 127.0.0.2 is reported from 127.0.0.2 whether its
 * datagram came over UDP (the first) or the QP (the rest), and answers
 * sent there reach it; before, its QP datagrams named the kernel's
 * source towards the peer (127.0.0.1), where no one listens.
 */
START_TEST(dgram_bound_source)
{
	struct sockaddr_in sin, from;
	socklen_t flen;
	uint16_t pb, pc;
	int b = dgram(&pb), c, i;
	char buf[64];

	c = rsocket(AF_INET, SOCK_DGRAM, 0);
	ck_assert_int_ge(c, 0);
	loopback(&sin, 0);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1);
	ck_ok(rbind(c, (struct sockaddr *)&sin, sizeof(sin)));
	pc = local_port(c);
	for (i = 0; i < 6; i++) {
		dg_send(c, pb, 20, (uint32_t)i);
		ck_assert(wait_for(b, POLLIN) & POLLIN);
		flen = sizeof(from);
		ck_assert_int_eq(rrecvfrom(b, buf, sizeof(buf), 0,
					   (struct sockaddr *)&from, &flen), 20);
		ck_assert_int_eq(vt_check(buf, 20, 0, (uint32_t)i), -1);
		ck_assert_msg(from.sin_addr.s_addr == htonl(INADDR_LOOPBACK + 1) &&
			      ntohs(from.sin_port) == pc,
			      "datagram %d reported from %s:%u, sent from 127.0.0.2:%u",
			      i, inet_ntoa(from.sin_addr), ntohs(from.sin_port), pc);
		/* the answer, to where it said it came from */
		ck_assert_int_eq(rsendto(b, buf, 20, 0, (struct sockaddr *)&from, flen), 20);
		ck_assert(wait_for(c, POLLIN) & POLLIN);
		ck_assert_int_eq(rrecv(c, buf, sizeof(buf), 0), 20);
	}
	ck_ok(rclose(c));
	ck_ok(rclose(b));
}
END_TEST

/*
 * A datagram longer than the buffer, as UDP's: the rest is dropped,
 * MSG_TRUNC returns its whole length (with MSG_PEEK, its size before it
 * is read) and rrecvmsg says MSG_TRUNC in msg_flags; the first datagram
 * comes over UDP, the others over the QP.  Before, both were ignored.
 */
START_TEST(dgram_truncation)
{
	struct sockaddr_in from;
	struct iovec iov;
	struct msghdr mh;
	uint16_t pa, pb;
	int a = dgram(&pa), b = dgram(&pb), i;
	uint8_t buf[64];

	for (i = 0; i < 4; i++) {
		dg_send(a, pb, 50, (uint32_t)i);
		ck_assert(wait_for(b, POLLIN) & POLLIN);
		ck_assert_int_eq(rrecv(b, NULL, 0, MSG_PEEK | MSG_TRUNC), 50);
		ck_assert_int_eq(rrecv(b, buf, 10, MSG_TRUNC), 50);
		ck_assert_int_eq(vt_check(buf, 10, 0, (uint32_t)i), -1);

		dg_send(a, pb, 50, 100u + (uint32_t)i);
		ck_assert(wait_for(b, POLLIN) & POLLIN);
		memset(&mh, 0, sizeof(mh));
		iov = (struct iovec){ buf, 10 };
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_name = &from;
		mh.msg_namelen = sizeof(from);
		ck_assert_int_eq(rrecvmsg(b, &mh, 0), 10);
		ck_assert_int_eq(vt_check(buf, 10, 0, 100u + (uint32_t)i), -1);
		ck_assert_int_eq(mh.msg_flags & MSG_TRUNC, MSG_TRUNC);
		ck_assert_int_eq(ntohs(from.sin_port), pa);

		/* one that fits is not cut */
		dg_send(a, pb, 10, 200u + (uint32_t)i);
		ck_assert(wait_for(b, POLLIN) & POLLIN);
		mh.msg_namelen = sizeof(from);
		ck_assert_int_eq(rrecvmsg(b, &mh, 0), 10);
		ck_assert_int_eq(mh.msg_flags & MSG_TRUNC, 0);
		ck_assert_int_eq(vt_check(buf, 10, 0, 200u + (uint32_t)i), -1);
	}
	ck_ok(rclose(a));
	ck_ok(rclose(b));
}
END_TEST

/*
 * A peer that goes away and comes back on the same port (a restarted
 * server) has a new QP; UD tells a sender nothing of the old one gone.
 * Once the peer has been silent a second, the next datagram goes over
 * UDP, which the new rsocket answers with its QP number.  Before, every
 * datagram went on to the old QP, never to arrive.
 */
START_TEST(dgram_peer_restart)
{
	struct sockaddr_in sin;
	uint16_t pa, pb;
	int a = dgram(&pa), b = dgram(&pb), i;

	for (i = 0; i < 3; i++) {
		dg_send(a, pb, 10, (uint32_t)i);
		dg_expect(b, pa, 10, (uint32_t)i);
		dg_send(b, pa, 10, 10u + (uint32_t)i);
		dg_expect(a, pb, 10, 10u + (uint32_t)i);
	}
	ck_ok(rclose(b));
	b = rsocket(AF_INET, SOCK_DGRAM, 0);
	ck_assert_int_ge(b, 0);
	loopback(&sin, pb);
	ck_ok(rbind(b, (struct sockaddr *)&sin, sizeof(sin)));
	vt_sleep_ms(1100);
	for (i = 0; i < 3; i++) {
		dg_send(a, pb, 10, 20u + (uint32_t)i);
		dg_expect(b, pa, 10, 20u + (uint32_t)i);
		dg_send(b, pa, 10, 30u + (uint32_t)i);
		dg_expect(a, pb, 10, 30u + (uint32_t)i);
	}
	ck_ok(rclose(a));
	ck_ok(rclose(b));
}
END_TEST

/*
 * A dual-stack IPv6 rsocket (bound to ::, IPV6_V6ONLY off) and an IPv4
 * one, both ways: the IPv6 one hears the other as IPv4-mapped and speaks
 * to it at that address, as a UDP socket would, over UDP and the QP
 * alike.  Before, each dropped the other's datagrams: the IPv4 header of
 * one came from an IPv6 address, the other sent IPv6 headers.
 */
START_TEST(dgram_dual_stack)
{
	struct sockaddr_in6 six = { .sin6_family = AF_INET6 }, from6;
	uint8_t buf[64];
	socklen_t flen;
	uint16_t p4, p6;
	int d = dgram(&p4), c, off = 0, i;
	char name[INET6_ADDRSTRLEN];

	c = rsocket(AF_INET6, SOCK_DGRAM, 0);
	ck_assert_int_ge(c, 0);
	ck_ok(rsetsockopt(c, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)));
	ck_ok(rbind(c, (struct sockaddr *)&six, sizeof(six)));
	flen = sizeof(six);
	ck_ok(rgetsockname(c, (struct sockaddr *)&six, &flen));
	p6 = ntohs(six.sin6_port);
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &six.sin6_addr);
	for (i = 0; i < 4; i++) {
		dg_send(d, p6, 20, (uint32_t)i);
		ck_assert(wait_for(c, POLLIN) & POLLIN);
		flen = sizeof(from6);
		ck_assert_int_eq(rrecvfrom(c, buf, sizeof(buf), 0,
					   (struct sockaddr *)&from6, &flen), 20);
		ck_assert_int_eq(vt_check(buf, 20, 0, (uint32_t)i), -1);
		ck_assert_int_eq(flen, sizeof(from6));
		ck_assert_msg(from6.sin6_family == AF_INET6 &&
			      !memcmp(&from6.sin6_addr, &six.sin6_addr, 16) &&
			      ntohs(from6.sin6_port) == p4, "datagram %d from %s:%u", i,
			      inet_ntop(AF_INET6, &from6.sin6_addr, name, sizeof(name)),
			      ntohs(from6.sin6_port));
		six.sin6_port = htons(p4);
		vt_fill(buf, 30, 0, 100u + (uint32_t)i);
		ck_assert_int_eq(rsendto(c, buf, 30, 0, (struct sockaddr *)&six,
					 sizeof(six)), 30);
		dg_expect(d, p6, 30, 100u + (uint32_t)i);
	}
	ck_ok(rclose(c));
	ck_ok(rclose(d));
}
END_TEST

/*
 * rsendmsg of a datagram in 20 pieces, the first over UDP, the others on
 * the QP: each arrives whole.  Before, the UDP one failed with EMSGSIZE
 * (more than 8 pieces) and the QP ones went.
 */
START_TEST(dgram_many_pieces)
{
	struct iovec iov[20];
	struct sockaddr_in to;
	struct msghdr mh = { .msg_name = &to, .msg_namelen = sizeof(to),
			     .msg_iov = iov, .msg_iovlen = 20 };
	uint8_t data[200];
	uint16_t pa, pb;
	int a = dgram(&pa), b = dgram(&pb), i, k;

	loopback(&to, pb);
	for (i = 0; i < 4; i++) {
		vt_fill(data, sizeof(data), 0, (uint32_t)i);
		for (k = 0; k < 20; k++)
			iov[k] = (struct iovec){ data + 10 * k, 10 };
		ck_assert_int_eq(rsendmsg(a, &mh, 0), 200);
		dg_expect(b, pa, 200, (uint32_t)i);
		dg_send(b, pa, 1, 0);		/* a learns b's QP number */
		dg_expect(a, pb, 1, 0);
	}
	ck_ok(rclose(a));
	ck_ok(rclose(b));
}
END_TEST

/*
 * A datagram of several calls (MSG_MORE) is refused, over UDP (the first)
 * and the QP alike, and what follows goes alone.  Before, over UDP the
 * kernel held the piece and sent it joined to our next UDP datagram, to
 * whichever peer: the reader got both, with our header between.
 */
START_TEST(dgram_msg_more)
{
	struct sockaddr_in to;
	uint16_t pa, pb;
	int a = dgram(&pa), b = dgram(&pb), i;
	char buf[64];

	loopback(&to, pb);
	for (i = 0; i < 3; i++) {
		ck_fails_with(rsendto(a, "first", 5, MSG_MORE, (struct sockaddr *)&to,
				      sizeof(to)), EOPNOTSUPP);
		dg_send(a, pb, 30, (uint32_t)i);
		dg_expect(b, pa, 30, (uint32_t)i);
		vt_sleep_ms(20);
		ck_fails_with(rrecv(b, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);
		dg_send(b, pa, 1, 0);		/* a learns b's QP number */
		dg_expect(a, pb, 1, 0);
	}
	ck_ok(rclose(a));
	ck_ok(rclose(b));
}
END_TEST

/* Whatever plain UDP brings to an rsocket's port that is not the protocol is dropped. */
START_TEST(dgram_garbage)
{
	static const uint8_t tag[4] = { 0x55, 0x55, 0x55, 0x55 };
	struct sockaddr_in to;
	uint8_t junk[64];
	uint16_t pa, pb;
	int a = dgram(&pa), b = dgram(&pb), u, i;
	char got[16];

	u = socket(AF_INET, SOCK_DGRAM, 0);
	ck_assert_int_ge(u, 0);
	loopback(&to, pb);
	for (i = 0; i < 64; i++) {
		size_t len = (size_t)i % sizeof(junk);

		vt_fill(junk, sizeof(junk), 0, (uint32_t)i);
		if (i % 2)
			memcpy(junk, tag, sizeof(tag));	/* the tag, a bad rest */
		if (i % 4 == 1)
			junk[4] = 6;	/* IPv6 header from an IPv4 sender */
		ck_assert_int_ge(sendto(u, junk, len, 0, (struct sockaddr *)&to,
					sizeof(to)), 0);
	}
	vt_sleep_ms(50);
	ck_fails_with(rrecvfrom(b, got, sizeof(got), MSG_DONTWAIT, NULL, NULL), EAGAIN);
	/* and the real thing still works */
	dg_send(a, pb, 10, 7);
	dg_expect(b, pa, 10, 7);
	close(u);
	ck_ok(rclose(a));
	ck_ok(rclose(b));
}
END_TEST

/*
 * More senders than an rsocket remembers (4,096): the oldest peers are
 * forgotten, what they sent still arrives while the queue has room, and a
 * known peer goes on working.  Each sender is a plain UDP socket speaking
 * the protocol's UDP header (made-up QP numbers).
 */
START_TEST(dgram_many_peers)
{
	struct {
		uint8_t tag[4], version, op, length, reserved;
		uint32_t qpn, addr;
		uint8_t data[8];
	} __attribute__((packed)) h = {
		{ 0x55, 0x55, 0x55, 0x55 }, 4, 0, 16, 0, 0, 0, "peer" };
	struct sockaddr_in to;
	uint16_t pa, pb;
	int a = dgram(&pa), b = dgram(&pb), u, i, got = 0;
	char buf[64];

	loopback(&to, pb);
	h.addr = htonl(INADDR_LOOPBACK);
	for (i = 0; i < 4200; i++) {
		u = socket(AF_INET, SOCK_DGRAM, 0);
		ck_assert_int_ge(u, 0);
		h.qpn = htonl(0x100 + (uint32_t)i);
		ck_assert_int_eq(sendto(u, &h, sizeof(h), 0, (struct sockaddr *)&to,
					sizeof(to)), (ssize_t)sizeof(h));
		close(u);
		/* b reads as it goes, as an app would */
		while (rrecvfrom(b, buf, sizeof(buf), MSG_DONTWAIT, NULL, NULL) == 8)
			got++;
	}
	vt_sleep_ms(50);
	while (rrecvfrom(b, buf, sizeof(buf), MSG_DONTWAIT, NULL, NULL) == 8)
		got++;
	ck_assert_msg(got > 256, "only %d of 4200 datagrams read", got);
	dg_send(a, pb, 100, 9);
	dg_expect(b, pa, 100, 9);
	dg_send(b, pa, 100, 10);
	dg_expect(a, pb, 100, 10);
	ck_ok(rclose(a));
	ck_ok(rclose(b));
}
END_TEST

/*
 * A datagram from a source whose address does not resolve (rsockets.sh
 * sends it, from 10.99.0.1, once this writes $DG_DIR/port): it is read,
 * and the calls go on at once while its path is resolved beside them;
 * before, each such datagram held every call for the resolution's 2 s.
 * Then an rclose while that resolution is still on its way.
 */
START_TEST(dgram_unresolvable_source)
{
	const char *dir = getenv("DG_DIR");
	struct sockaddr_in from;
	socklen_t flen = sizeof(from);
	char buf[64];
	uint16_t pa, pb;
	int a, b;
	long t0, took;
	ssize_t n;

	ck_assert_msg(dir, "DG_DIR names the directory of the markers");
	b = dgram(&pb);
	a = dgram(&pa);
	vt_put(dir, "port", "%u\n", pb);
	ck_assert_msg(vt_get(dir, "sent", buf, sizeof(buf), vt_tmo_ms()),
		      "rsockets.sh never sent the datagram");
	t0 = vt_now_ms();
	ck_assert(wait_for(b, POLLIN) & POLLIN);
	n = rrecvfrom(b, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen);
	ck_assert_int_eq(n, 5);
	ck_assert_int_eq(memcmp(buf, "spoof", 5), 0);
	ck_assert_int_eq(from.sin_addr.s_addr, inet_addr("10.99.0.1"));
	dg_send(a, pb, 10, 7);
	dg_expect(b, pa, 10, 7);
	dg_send(b, pa, 10, 8);
	dg_expect(a, pb, 10, 8);
	took = vt_now_ms() - t0;
	ck_assert_msg(took < 1000, "the calls waited %ld ms for the spoofed source", took);
	ck_ok(rclose(b));
	ck_ok(rclose(a));
}
END_TEST

/* ---- keepalives -------------------------------------------------------------- */

/*
 * An idle connected pair for 8.2 s between the files ready and done in
 * $KA_DIR, with SO_KEEPALIVE and TCP_KEEPIDLE 1 on both ends or without:
 * rsockets.sh counts the device's packets in between (keepalives every
 * second each way, or none).  Neither end makes a call meanwhile, so the
 * keepalives must keep coming past the RS_QP_CTRL_SIZE (4) that the
 * control slots hold until their completions are taken.  Then the
 * connection still works.  Each count is rsockets.sh's to say it made
 * (files counted and counted2): the messages after the idle time are
 * packets too, and an ibvctl on a busy machine may take longer than any
 * pause we could guess.  The keepalives start once the first count is
 * made, so that all of them are counted.
 */
static void keepalive_idle(bool on)
{
	const char *dir = getenv("KA_DIR");
	int lfd, srv, cli, one = 1, v;
	socklen_t len = sizeof(v);
	char c = 'k', buf[8];

	ck_assert_msg(dir, "KA_DIR names the directory of the markers");
	pair(&lfd, &srv, &cli);
	/* the connection's own first messages (credits) are over first */
	send_all(cli, &c, 1);
	recv_all(srv, &c, 1);
	send_all(srv, &c, 1);
	recv_all(cli, &c, 1);
	vt_sleep_ms(300);
	vt_put(dir, "ready", "1\n");
	ck_assert_msg(vt_get(dir, "counted", buf, sizeof(buf), vt_tmo_ms()),
		      "rsockets.sh did not count the packets before");
	if (on) {
		ck_ok(rsetsockopt(cli, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)));
		ck_ok(rsetsockopt(cli, IPPROTO_TCP, TCP_KEEPIDLE, &one, sizeof(one)));
		ck_ok(rsetsockopt(srv, IPPROTO_TCP, TCP_KEEPIDLE, &one, sizeof(one)));
		ck_ok(rsetsockopt(srv, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)));
		ck_ok(rgetsockopt(cli, SOL_SOCKET, SO_KEEPALIVE, &v, &len));
		ck_assert_int_eq(v, 1);
	}
	vt_sleep_ms(8200);
	vt_put(dir, "done", "1\n");
	ck_assert_msg(vt_get(dir, "counted2", buf, sizeof(buf), vt_tmo_ms()),
		      "rsockets.sh did not count the packets after");
	send_all(cli, &c, 1);
	recv_all(srv, &c, 1);
	ck_assert_int_eq(c, 'k');
	ck_ok(rclose(cli));
	ck_ok(rclose(srv));
	ck_ok(rclose(lfd));
}

START_TEST(keepalive_on)
{
	keepalive_idle(true);
}
END_TEST

START_TEST(keepalive_off)
{
	keepalive_idle(false);
}
END_TEST

/* ---- the suite ------------------------------------------------------------ */

/* ---- a peer that lies about its messages' lengths ---------------------------- */

/*
 * rsocket's connection private data (rdma-core's protocol, version 1):
 * where the peer may write its data and our target SGL, big-endian.
 */
struct liar_sge {
	uint64_t addr;
	uint32_t key;
	uint32_t length;
};

struct liar_conn_data {
	uint8_t version;
	uint8_t flags;
	uint16_t credits;
	uint8_t reserved[3];
	uint8_t target_iomap_size;
	struct liar_sge target_sgl;
	struct liar_sge data_buf;
};

struct liar {
	uint16_t port;
	uint32_t claim;		/* the data length it announces */
	bool bad_key;		/* its WRITE names a key it was not given */
	bool mute;		/* posts no receives, sends nothing */
	bool bad_sgl;		/* announces a target SGL of sgl_len entries */
	uint32_t sgl_len;	/* and expects to be rejected */
	uint32_t flood;		/* sends this many 1-byte messages, credits
				 * or not (claim unused) */
	bool sent;
	bool cut;		/* mute: heard that we disconnected */
};

static struct rdma_cm_event *liar_event(struct rdma_event_channel *ch,
					enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;

	ck_assert_msg(rdma_get_cm_event(ch, &ev) == 0, "liar: get_cm_event: %s",
		      strerror(errno));
	ck_assert_msg(ev->event == want, "liar: %s, want %s",
		      rdma_event_str(ev->event), rdma_event_str(want));
	return ev;
}

/*
 * Connects as an rsocket peer would, by hand, then sends one data message
 * of no bytes whose immediate claims l->claim bytes.
 */
static void *liar_run(void *arg)
{
	static uint8_t target[4096], data[1 << 16];
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 16,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct liar_conn_data mine = { .version = 1 }, theirs;
	struct rdma_conn_param cp = {
		.private_data = &mine, .private_data_len = sizeof(mine),
		.responder_resources = 1, .initiator_depth = 1,
		.retry_count = 7, .rnr_retry_count = 7,
	};
	struct ibv_recv_wr rwr = { .wr_id = 1 }, *bad_r;
	struct ibv_send_wr swr = {
		.opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad_s;
	struct liar *l = arg;
	struct rdma_cm_event *ev;
	struct sockaddr_in sin;
	struct rdma_cm_id *id;
	struct ibv_mr *tmr, *dmr;
	struct ibv_wc wc;
	int i;

	loopback(&sin, l->port);
	ck_assert(ch && !rdma_create_id(ch, &id, NULL, RDMA_PS_TCP));
	ck_ok(rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, vt_tmo_ms()));
	rdma_ack_cm_event(liar_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	ck_ok(rdma_resolve_route(id, vt_tmo_ms()));
	rdma_ack_cm_event(liar_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	ck_ok(rdma_create_qp(id, NULL, &qa));
	tmr = ibv_reg_mr(id->pd, target, sizeof(target),
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	dmr = ibv_reg_mr(id->pd, data, sizeof(data),
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ck_assert(tmr && dmr);
	for (i = 0; i < 16 && !l->mute; i++)
		ck_ok(ibv_post_recv(id->qp, &rwr, &bad_r));
	mine.credits = htobe16(16);
	mine.target_sgl = (struct liar_sge){ htobe64((uintptr_t)target),
					     htobe32(tmr->rkey), htobe32(2) };
	mine.data_buf = (struct liar_sge){ htobe64((uintptr_t)data),
					   htobe32(dmr->rkey), htobe32(sizeof(data)) };
	if (l->bad_sgl)
		mine.target_sgl.length = htobe32(l->sgl_len);
	ck_ok(rdma_connect(id, &cp));
	if (l->bad_sgl) {
		rdma_ack_cm_event(liar_event(ch, RDMA_CM_EVENT_REJECTED));
		__atomic_store_n(&l->cut, true, __ATOMIC_RELEASE);
		goto out;
	}
	ev = liar_event(ch, RDMA_CM_EVENT_ESTABLISHED);
	ck_assert_uint_ge(ev->param.conn.private_data_len, sizeof(theirs));
	memcpy(&theirs, ev->param.conn.private_data, sizeof(theirs));
	rdma_ack_cm_event(ev);
	if (l->mute) {
		rdma_ack_cm_event(liar_event(ch, RDMA_CM_EVENT_DISCONNECTED));
		__atomic_store_n(&l->cut, true, __ATOMIC_RELEASE);
		goto out;
	}
	swr.wr.rdma.remote_addr = be64toh(theirs.data_buf.addr);
	swr.wr.rdma.rkey = be32toh(theirs.data_buf.key);
	if (l->bad_key) {
		/* bytes to land, or the key would not be looked at */
		static struct ibv_sge sge;

		sge = (struct ibv_sge){ (uintptr_t)data, 64, dmr->lkey };
		swr.sg_list = &sge;
		swr.num_sge = 1;
		swr.wr.rdma.rkey ^= 0x5A5A5A5Au;
	}
	if (l->flood) {
		static struct ibv_sge one;
		long end = vt_now_ms() + vt_tmo_ms();
		uint32_t n;

		one = (struct ibv_sge){ (uintptr_t)data, 1, dmr->lkey };
		swr.sg_list = &one;
		swr.num_sge = 1;
		swr.imm_data = htobe32(1);	/* op 0: data, 1 byte */
		/* until done, or the reader stops taking them (RNR for ever) */
		for (n = 0; n < l->flood && vt_now_ms() < end; n++) {
			ck_ok(ibv_post_send(id->qp, &swr, &bad_s));
			while (ibv_poll_cq(id->send_cq, 1, &wc) == 0 &&
			       vt_now_ms() < end)
				;
			swr.wr.rdma.remote_addr++;
		}
		__atomic_store_n(&l->sent, true, __ATOMIC_RELEASE);
		vt_sleep_ms(vt_tmo_ms());
		goto out;	/* the flood may take its whole time: tidy up */
	}
	swr.imm_data = htobe32(l->claim & 0x1FFFFFFF);	/* op 0: data */
	ck_ok(ibv_post_send(id->qp, &swr, &bad_s));
	while (ibv_poll_cq(id->send_cq, 1, &wc) == 0)
		;
	ck_assert_msg((wc.status == IBV_WC_SUCCESS) == !l->bad_key,
		      "the liar's WRITE: %s", ibv_wc_status_str(wc.status));
	__atomic_store_n(&l->sent, true, __ATOMIC_RELEASE);
	/* stay connected while the reader looks */
	vt_sleep_ms(vt_tmo_ms());
	return NULL;
out:
	rdma_destroy_qp(id);
	ibv_dereg_mr(tmr);
	ibv_dereg_mr(dmr);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return NULL;
}

/*
 * The liar l connects and sends; what we accepted from it must end with
 * ECONNRESET at our next rrecv into buf (len bytes), after rpoll heard of
 * it if poll_first.
 */
static void liar_resets(struct liar *l, char *buf, size_t len, bool poll_first,
			const char *what)
{
	pthread_t t;
	ssize_t got;
	int lfd = listener(&l->port), fd;

	ck_assert_int_eq(pthread_create(&t, NULL, liar_run, l), 0);
	fd = raccept(lfd, NULL, NULL);
	ck_assert_msg(fd >= 0, "raccept: %s", strerror(errno));
	while (!__atomic_load_n(&l->sent, __ATOMIC_ACQUIRE))
		vt_sleep_ms(1);
	/*
	 * As TCP's after a reset: an error and a hangup, which event loops
	 * that close on POLLHUP alone (libevent's, many epoll servers) need.
	 */
	if (poll_first) {
		short rev = wait_for(fd, POLLIN);

		ck_assert_msg((rev & (POLLERR | POLLHUP)) == (POLLERR | POLLHUP),
			      "%s: revents %#x, want POLLERR|POLLHUP", what, rev);
	}
	got = rrecv(fd, buf, len, 0);
	ck_assert_msg(got == -1 && errno == ECONNRESET,
		      "%s: rrecv gave %zd (%s), want -1 ECONNRESET", what, got,
		      got < 0 ? strerror(errno) : "");
	pthread_detach(t);
	rclose(fd);
	rclose(lfd);
}

/*
 * A data message is as long as the peer says, and the peer is not
 * trusted: a length past what our receive buffer holds (which had rrecv
 * copy from beyond it), or of no bytes (which read as the end of the
 * stream), ends the connection with ECONNRESET.
 */
START_TEST(peer_lies_about_lengths)
{
	static const uint32_t claims[] = { 1u << 20, 278528, 0 };
	static char buf[2 << 20];
	char what[64];
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(claims); i++) {
		struct liar l = { .claim = claims[i] };

		snprintf(what, sizeof(what), "a message claiming %u bytes", claims[i]);
		liar_resets(&l, buf, sizeof(buf), false, what);
	}
}
END_TEST

/*
 * A peer that WRITEs with a key it was not given puts our QP in error
 * (as a NIC's responder does): a reader hears ECONNRESET, where it once
 * spun for ever on its receives, flushed and posted again.
 */
START_TEST(peer_writes_with_a_bad_key)
{
	struct liar l = { .claim = 64, .bad_key = true };
	static char buf[4096];

	liar_resets(&l, buf, sizeof(buf), true, "after a bad-key WRITE");
}
END_TEST

/*
 * A peer may have as many messages unread at our end as the credits we
 * gave it, our receive queue's size, and our queue of unread messages
 * holds that many.  One that sends on regardless (its messages land
 * while we repost receives without reading) ends the connection with
 * ECONNRESET, where its messages once overran the queue: the unread ones
 * were lost without a word and the stream went on with the wrong bytes.
 */
START_TEST(peer_overruns_its_credits)
{
	struct liar l = { .flood = 1000 };
	int lfd = listener(&l.port), fd;
	long end = vt_now_ms() + 2 * vt_tmo_ms();
	static char buf[1 << 16];
	struct pollfd p;
	size_t total = 0;
	ssize_t got;
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, liar_run, &l), 0);
	fd = raccept(lfd, NULL, NULL);
	ck_assert_msg(fd >= 0, "raccept: %s", strerror(errno));
	/* rpoll reposts our receives as the messages land; nothing is read */
	while (!__atomic_load_n(&l.sent, __ATOMIC_ACQUIRE)) {
		ck_assert_msg(vt_now_ms() < end, "the flood did not end");
		p = (struct pollfd){ fd, POLLIN, 0 };
		ck_assert_int_ge(rpoll(&p, 1, 10), 0);
	}
	while ((got = rrecv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		total += (size_t)got;
	ck_assert_msg(got == -1 && errno == ECONNRESET,
		      "after %zu bytes rrecv gave %zd (%s), want -1 ECONNRESET",
		      total, got, got < 0 ? strerror(errno) : "");
	ck_assert_uint_le(total, 1000);
	pthread_detach(t);
	rclose(fd);
	rclose(lfd);
}
END_TEST

/*
 * A mute peer (it posts no receives) takes none of our messages: the
 * sender's QP retries them for ever (RNR).  rclose waits for them as long
 * as SO_LINGER says, or RS_CLOSE_WAIT_MS (5 s) without it, then cuts the
 * connection, where it once waited for ever; SO_LINGER 0 cuts it once
 * its reset has waited RS_RESET_WAIT_MS (1 s) in vain.  The peer hears
 * the disconnect either way.
 */
static void close_on_mute_peer(const struct linger *lg, long min_ms)
{
	struct liar l = { .mute = true };
	int lfd = listener(&l.port), fd;
	long t0, took;
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, liar_run, &l), 0);
	fd = raccept(lfd, NULL, NULL);
	ck_assert_msg(fd >= 0, "raccept: %s", strerror(errno));
	if (lg)
		ck_ok(rsetsockopt(fd, SOL_SOCKET, SO_LINGER, lg, sizeof(*lg)));
	ck_assert_int_eq(rsend(fd, "goodbye", 7, 0), 7);
	t0 = vt_now_ms();
	ck_ok(rclose(fd));
	took = vt_now_ms() - t0;
	ck_assert_msg(took >= min_ms && took <= min_ms + vt_tmo_ms(),
		      "rclose with linger %s %d took %ld ms, want %ld ms",
		      lg ? "on" : "off", lg ? lg->l_linger : 0, took, min_ms);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert(__atomic_load_n(&l.cut, __ATOMIC_ACQUIRE));
	rclose(lfd);
}

START_TEST(close_on_a_mute_peer)
{
	static const struct linger now = { 1, 0 }, one_second = { 1, 1 };

	close_on_mute_peer(&now, 1000);
	close_on_mute_peer(&one_second, 1000);
	close_on_mute_peer(NULL, 5000);
}
END_TEST

/*
 * A peer whose target SGL has no entries, or more than any rsocket
 * makes, is refused at accept (our index into it would run on for
 * ever); raccept waits on for a real one.
 */
START_TEST(peer_names_a_bad_sgl)
{
	static const uint32_t lens[] = { 0, 1, 257, 0xFFFFFFFFu };
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(lens); i++) {
		struct liar l = { .bad_sgl = true, .sgl_len = lens[i] };
		int lfd = listener(&l.port);
		pthread_t t;

		set_nonblock(lfd, true);
		ck_assert_int_eq(pthread_create(&t, NULL, liar_run, &l), 0);
		while (!__atomic_load_n(&l.cut, __ATOMIC_ACQUIRE)) {
			ck_assert_msg(raccept(lfd, NULL, NULL) == -1 &&
				      errno == EAGAIN,
				      "SGL of %u entries: raccept gave a socket (%s)",
				      lens[i], strerror(errno));
			vt_sleep_ms(1);
		}
		ck_assert_int_eq(pthread_join(t, NULL), 0);
		rclose(lfd);
	}
}
END_TEST

/*
 * Run with a qp limit of 2 for this uid (rsockets.sh quota): a pair takes
 * both, so the next rconnect's QP is refused.  That is the attempt's
 * error, EAGAIN, and never EINPROGRESS (a blocking rconnect gave it, and
 * a non-blocking one then SO_ERROR 0, a connection that was not there).
 * Without blocking it may also come as POLLERR and SO_ERROR.  Told by
 * rconnect, it leaves an unconnected socket, as a TCP connect(2) that
 * failed here (no local port): sends EPIPE, reads ENOTCONN.  Once the
 * pair is closed a new one connects: the refused attempts kept nothing.
 */
START_TEST(connect_over_qp_limit)
{
	struct sockaddr_in sin;
	int lfd, srv, cli, fd, err;
	socklen_t len;
	uint16_t port;
	char buf[4];
	short rev;

	lfd = listener(&port);
	connect_pair(lfd, port, &srv, &cli);
	loopback(&sin, port);

	fd = rsocket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_fails_with(rconnect(fd, (struct sockaddr *)&sin, sizeof(sin)), EAGAIN);
	ck_fails_with(rsend(fd, "x", 1, MSG_NOSIGNAL), EPIPE);
	ck_fails_with(rrecv(fd, buf, sizeof(buf), 0), ENOTCONN);
	ck_ok(rclose(fd));

	fd = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(rconnect(fd, (struct sockaddr *)&sin, sizeof(sin)), -1);
	if (errno == EINPROGRESS) {
		rev = wait_for(fd, POLLOUT);
		ck_assert_msg(rev & POLLERR, "revents %#x lack POLLERR", rev);
		err = 0;
		len = sizeof(err);
		ck_ok(rgetsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len));
		ck_assert_int_eq(err, EAGAIN);
	} else {
		ck_assert_int_eq(errno, EAGAIN);
	}
	ck_ok(rclose(fd));

	ck_ok(rclose(cli));
	ck_ok(rclose(srv));
	connect_pair(lfd, port, &srv, &cli);
	send_all(cli, "abc", 3);
	recv_all(srv, buf, 3);
	ck_assert_int_eq(memcmp(buf, "abc", 3), 0);
	ck_ok(rclose(cli));
	ck_ok(rclose(srv));
	ck_ok(rclose(lfd));
}
END_TEST

/*
 * A hostile sender with a UD QP of its own: it asks a datagram rsocket's
 * QP number the protocol's way (a UDP datagram with its own, answered by
 * a control one), then sends to that QP datagrams whose headers name
 * another peer's address, a made-up one, an IPv6 one, or nothing sound.
 * The rsocket reads only what came from the QP of a peer it knows at the
 * address named: the probe (from the attacker's own UDP address) and the
 * real peer's; before, the forged ones came out as from 8.8.8.8 or from
 * the real peer.
 */
START_TEST(dgram_forged_source)
{
	struct {
		uint8_t tag[4], version, op, length, reserved;
		uint32_t qpn, addr;
		char data[5];
	} __attribute__((packed)) probe = {
		{ 0x55, 0x55, 0x55, 0x55 }, 4, 0, 16, 0, 0, 0, "probe" }, answer;
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 8, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_send_wr wr = { .opcode = IBV_WR_SEND, .num_sge = 1,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct ibv_ah_attr aa = { 0 };
	struct sockaddr_in to, from;
	struct rdma_cm_id *id;
	struct ibv_port_attr pattr;
	struct ibv_sge sge;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	static uint8_t pkt[64];
	socklen_t flen;
	uint32_t qpn;
	uint16_t pa, pb;
	int a = dgram(&pa), b = dgram(&pb), u, i;
	char buf[64];
	ssize_t n;

	/* a and b know each other, on their QPs */
	for (i = 0; i < 3; i++) {
		dg_send(a, pb, 10, (uint32_t)i);
		dg_expect(b, pa, 10, (uint32_t)i);
		dg_send(b, pa, 10, (uint32_t)i);
		dg_expect(a, pb, 10, (uint32_t)i);
	}

	loopback(&to, pb);
	ck_assert(ch && !rdma_create_id(ch, &id, NULL, RDMA_PS_UDP));
	ck_ok(rdma_resolve_addr(id, NULL, (struct sockaddr *)&to, vt_tmo_ms()));
	rdma_ack_cm_event(liar_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	ck_ok(rdma_resolve_route(id, vt_tmo_ms()));
	rdma_ack_cm_event(liar_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	ck_ok(rdma_create_qp(id, NULL, &qa));
	aa.dlid = be16toh(id->route.path_rec->dlid);
	aa.port_num = id->port_num;
	ck_ok(ibv_query_port(id->verbs, id->port_num, &pattr));
	if (pattr.link_layer == IBV_LINK_LAYER_ETHERNET || !aa.dlid) {
		aa.is_global = 1;
		aa.grh.dgid = id->route.path_rec->dgid;
		aa.grh.hop_limit = 64;
	}
	ah = ibv_create_ah(id->pd, &aa);
	mr = ibv_reg_mr(id->pd, pkt, sizeof(pkt), 0);
	ck_assert(ah && mr);

	u = socket(AF_INET, SOCK_DGRAM, 0);
	ck_assert_int_ge(u, 0);
	probe.qpn = htonl(id->qp->qp_num);
	probe.addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(sendto(u, &probe, sizeof(probe), 0, (struct sockaddr *)&to,
				sizeof(to)), (ssize_t)sizeof(probe));
	ck_assert(wait_for(b, POLLIN) & POLLIN);	/* b reads, and answers */
	ck_assert_int_eq(rrecv(b, buf, sizeof(buf), 0), 5);
	ck_assert_int_eq(recv(u, &answer, sizeof(answer), 0), 16);
	qpn = ntohl(answer.qpn) & 0xFFFFFF;

	for (i = 0; i < 6; i++) {
		uint16_t port = htons(pa);

		memset(pkt, 0, sizeof(pkt));
		pkt[0] = 4;
		pkt[1] = 8;
		memcpy(pkt + 2, &port, 2);
		memcpy(pkt + 4, &probe.addr, 4);	/* a's address, a's port */
		memcpy(pkt + 8, "forged", 6);
		sge = (struct ibv_sge){ (uintptr_t)pkt, 14, mr->lkey };
		if (i == 1)
			inet_pton(AF_INET, "8.8.8.8", pkt + 4);
		if (i == 2) {			/* IPv6 to an IPv4 rsocket */
			pkt[0] = 6;
			pkt[1] = 24;
			memset(pkt + 4, 0, 20);
			memcpy(pkt + 24, "forged", 6);
			sge.length = 30;
		}
		if (i == 3)
			pkt[1] = 200;		/* longer than it is */
		if (i == 4)
			sge.length = 3;		/* shorter than a header */
		if (i == 5)
			sge.length = 0;
		wr.sg_list = &sge;
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = qpn;
		wr.wr.ud.remote_qkey = RDMA_UDP_QKEY;
		ck_ok(ibv_post_send(id->qp, &wr, &bad));
		while (ibv_poll_cq(id->send_cq, 1, &wc) == 0)
			;
		ck_assert_int_eq(wc.status, IBV_WC_SUCCESS);
	}
	vt_sleep_ms(200);
	/* the real a's datagram is the next thing b reads */
	dg_send(a, pb, 10, 77);
	ck_assert(wait_for(b, POLLIN) & POLLIN);
	flen = sizeof(from);
	n = rrecvfrom(b, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen);
	ck_assert_msg(n == 10 && vt_check(buf, 10, 0, 77) == -1,
		      "b read %zd bytes '%.6s' from %s:%u, not a's datagram", n, buf,
		      inet_ntoa(from.sin_addr), ntohs(from.sin_port));
	ck_assert_int_eq(ntohs(from.sin_port), pa);
	ck_fails_with(rrecv(b, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);
	/* and b still answers a */
	dg_send(b, pa, 10, 78);
	dg_expect(a, pb, 10, 78);

	close(u);
	ibv_destroy_ah(ah);
	ibv_dereg_mr(mr);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	ck_ok(rclose(a));
	ck_ok(rclose(b));
}
END_TEST

struct test {
	const char *name;
	const TTest *fn;
	bool named_only;	/* runs only when asked for by name */
};

static Suite *rsocket_suite(int argc, char **argv)
{
#define T(f)	{ #f, f, false }
	const struct test tests[] = {
		T(bad_fds), T(socket_args), T(bind_args), T(listen_accept_args),
		T(connect_refused), T(refused_then_reads_and_sends),
		T(connect_and_names), T(partial_reads),
		T(stream_truncating_receive),
		T(large_transfer), T(peer_close), T(linger_zero_resets),
		T(shutdown_directions),
		T(iomap), T(options), T(bad_data_args), T(poll_mixed),
		T(select_mixed), T(select_hangup_is_no_exception), T(select_keeps_timeout),
		T(dgram_exchange), T(dgram_connected), T(dgram_bound_source),
		T(dgram_truncation), T(dgram_forged_source), T(dgram_peer_restart),
		T(dgram_dual_stack), T(dgram_many_pieces),
		T(dgram_msg_more),
		T(dgram_garbage), T(dgram_many_peers), T(peer_lies_about_lengths),
		T(peer_writes_with_a_bad_key), T(small_send_buffer),
		T(close_while_blocked), T(shutdown_listener),
		T(restart_after_signal),
		T(close_on_a_mute_peer), T(peer_names_a_bad_sgl),
		T(peer_overruns_its_credits),
		{ "keepalive_on", keepalive_on, true },
		{ "keepalive_off", keepalive_off, true },
		{ "dgram_unresolvable_source", dgram_unresolvable_source, true },
		{ "connect_over_qp_limit", connect_over_qp_limit, true },
	};
#undef T
	Suite *s = suite_create("rsocket");
	TCase *tc = tcase_create("rsocket");
	unsigned int i;
	int j, n = 0;

	tcase_set_timeout(tc, 60 * vt_tmul());
	for (i = 0; i < ARRAY_SIZE(tests); i++) {
		bool want = argc == 0 && !tests[i].named_only;

		for (j = 0; j < argc; j++)
			want |= !strcmp(argv[j], tests[i].name);
		if (want) {
			tcase_add_test(tc, tests[i].fn);
			n++;
		}
	}
	if (!n) {
		fprintf(stderr, "rsocket-helper: no such test\n");
		exit(2);
	}
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	return check_run(rsocket_suite(argc - 1, argv + 1), CK_VERBOSE);
}
