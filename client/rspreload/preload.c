/*
 * librspreload.so: an unmodified TCP program on rsockets, by LD_PRELOAD.
 *
 * socket(2) of an AF_INET or AF_INET6 stream socket makes an rsocket
 * instead; every call below on such an fd goes to its r* function, every
 * other fd to the C library (found with dlsym(RTLD_NEXT)).  An rsocket's
 * fd is a real fd (its CM channel's), so fd numbers never clash; which
 * fds are rsockets is a byte per fd here.  poll(2) and select(2) go to
 * rpoll/rselect when any of their fds is an rsocket.
 *
 * Our own libraries call the same symbols for their internal fds (the
 * daemon's sockets, channels, the rsocket's own fd): while an r* call
 * runs (in_rsockets) everything passes straight through.
 *
 * ppoll(2) and pselect(2) too: the signal mask is set around rpoll or
 * rselect rather than atomically with the wait (a signal that comes just
 * before the wait is taken at once; the wait then runs its course), and
 * the timeout is rounded up to whole milliseconds.  recvmmsg(2) and
 * sendmmsg(2) make one rrecvmsg or rsendmsg per entry; preadv2(2) and
 * pwritev2(2) at offset -1 are readv/writev, lseek(2) fails with ESPIPE
 * as on a socket; fstat(2) says S_IFSOCK.  sendfile(2) (and
 * sendfile64, its name under _FILE_OFFSET_BITS=64) to an rsocket reads
 * the file here and writes it to the rsocket.  ioctl(2)
 * FIONBIO sets an rsocket's O_NONBLOCK, FIONREAD says what it holds,
 * SIOCATMARK and sockatmark(3) that it is not at a mark.  epoll(7): see
 * epoll.c; fdopen(3): stdio.c.
 *
 * If rsocket() fails (no daemon, no device) the program gets an ordinary
 * socket.  close_range(2) and closefrom(3) close rsockets in their
 * range as close(2) does.  Not followed: dup(2), dup3(2) and fcntl(2)
 * F_DUPFD of an rsocket fail with ENOTSUP; splice(2) and ioctl SIOCOUTQ
 * fail with EINVAL, the CM channel's epoll fd having neither (so they
 * never touch it); fork(2) leaves the child without the parent's
 * rsockets.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rsocket.h>

#include "preload.h"

static struct {
	int (*socket)(int, int, int);
	int (*bind)(int, const struct sockaddr *, socklen_t);
	int (*listen)(int, int);
	int (*accept)(int, struct sockaddr *, socklen_t *);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *,
			    socklen_t *);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*sendto)(int, const void *, size_t, int,
			  const struct sockaddr *, socklen_t);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	int (*recvmmsg)(int, struct mmsghdr *, unsigned int, int,
			struct timespec *);
	int (*sendmmsg)(int, struct mmsghdr *, unsigned int, int);
	ssize_t (*preadv2)(int, const struct iovec *, int, off_t, int);
	ssize_t (*pwritev2)(int, const struct iovec *, int, off_t, int);
	ssize_t (*preadv64v2)(int, const struct iovec *, int, off64_t, int);
	ssize_t (*pwritev64v2)(int, const struct iovec *, int, off64_t, int);
	off_t (*lseek)(int, off_t, int);
	off64_t (*lseek64)(int, off64_t, int);
	int (*fstat)(int, struct stat *);
	int (*fstat64)(int, struct stat64 *);
	int (*__fxstat)(int, int, struct stat *);
	int (*__fxstat64)(int, int, struct stat64 *);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *,
		     const sigset_t *);
	int (*pselect)(int, fd_set *, fd_set *, fd_set *,
		       const struct timespec *, const sigset_t *);
	ssize_t (*sendfile)(int, int, off_t *, size_t);
	ssize_t (*sendfile64)(int, int, off64_t *, size_t);
	int (*close)(int);
	int (*shutdown)(int, int);
	int (*fcntl)(int, int, ...);
	int (*ioctl)(int, unsigned long, ...);
	int (*sockatmark)(int);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	int (*getpeername)(int, struct sockaddr *, socklen_t *);
	int (*getsockname)(int, struct sockaddr *, socklen_t *);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*close_range)(unsigned int, unsigned int, int);
	void (*closefrom)(int);
	FILE *(*fdopen)(int, const char *);
} real;

static atomic_uchar is_rs[PRELOAD_MAX_FD];
/*
 * Inside an r* call, every call that lands here is our libraries' own, on
 * their internal fds -- among them the rsocket's fd itself, the CM
 * channel our librdmacm polls and fcntl()s: all go to the C library.
 */
static __thread int in_rsockets;

#define RS(fn, ...) ({						\
	__typeof__(fn(__VA_ARGS__)) rs_ret_;			\
	in_rsockets++;						\
	rs_ret_ = fn(__VA_ARGS__);				\
	in_rsockets--;						\
	rs_ret_;						\
})
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

#define LOOKUP(name) (real.name = dlsym(RTLD_NEXT, #name))

static void init_real(void)
{
	LOOKUP(socket); LOOKUP(bind); LOOKUP(listen); LOOKUP(accept);
	LOOKUP(accept4); LOOKUP(connect); LOOKUP(read); LOOKUP(readv);
	LOOKUP(write); LOOKUP(writev); LOOKUP(recv); LOOKUP(recvfrom);
	LOOKUP(recvmsg); LOOKUP(send); LOOKUP(sendto); LOOKUP(sendmsg);
	LOOKUP(recvmmsg); LOOKUP(sendmmsg); LOOKUP(preadv2); LOOKUP(pwritev2);
	LOOKUP(preadv64v2); LOOKUP(pwritev64v2);
	LOOKUP(lseek); LOOKUP(lseek64); LOOKUP(fstat); LOOKUP(fstat64);
	LOOKUP(__fxstat); LOOKUP(__fxstat64); LOOKUP(sockatmark);
	LOOKUP(poll); LOOKUP(select); LOOKUP(ppoll); LOOKUP(pselect);
	LOOKUP(sendfile); LOOKUP(sendfile64); LOOKUP(close); LOOKUP(shutdown);
	LOOKUP(fcntl); LOOKUP(ioctl); LOOKUP(setsockopt); LOOKUP(getsockopt);
	LOOKUP(getpeername); LOOKUP(getsockname); LOOKUP(dup); LOOKUP(dup2);
	LOOKUP(dup3); LOOKUP(close_range); LOOKUP(closefrom);
	LOOKUP(fdopen);
}

static void init(void)
{
	pthread_once(&init_once, init_real);
}

__attribute__((constructor)) static void preload_init(void)
{
	init();
}

static bool rs_fd(int fd)
{
	return !in_rsockets && fd >= 0 && fd < PRELOAD_MAX_FD &&
	       atomic_load(&is_rs[fd]);
}

bool preload_is_rsocket(int fd)
{
	init();
	return rs_fd(fd);
}

int preload_rpoll(struct pollfd *fds, nfds_t n, int timeout)
{
	return RS(rpoll, fds, n, timeout);
}

FILE *preload_real_fdopen(int fd, const char *mode)
{
	init();
	return real.fdopen(fd, mode);
}

/*
 * An r* call that reads (EPOLLIN) or writes (EPOLLOUT) the rsocket fd,
 * told to epoll.c: its EPOLLET readiness may be reported again.
 */
#define RS_IO(dir, fn, fd, ...) ({				\
	__typeof__(fn(fd, __VA_ARGS__)) io_ret_;		\
	io_ret_ = RS(fn, fd, __VA_ARGS__);			\
	ep_rs_io(fd, dir);					\
	io_ret_;						\
})

static void mark(int fd, bool on)
{
	if (fd >= 0 && fd < PRELOAD_MAX_FD)
		atomic_store(&is_rs[fd], on);
}

/* An rsocket made here: marked, or given back if the table cannot name it. */
static int adopt(int fd)
{
	if (fd < 0)
		return fd;
	if (fd >= PRELOAD_MAX_FD) {
		RS(rclose, fd);
		errno = EMFILE;
		return -1;
	}
	mark(fd, true);
	return fd;
}

/*
 * TCP raises SIGPIPE for a write on a connection the peer has left,
 * unless told not to; rsend() only fails with EPIPE.
 */
static ssize_t pipe_signal(ssize_t ret, int flags)
{
	int err = errno;

	if (ret < 0 && err == EPIPE && !(flags & MSG_NOSIGNAL)) {
		raise(SIGPIPE);
		errno = err;
	}
	return ret;
}

static bool wants_rsocket(int domain, int type, int protocol)
{
	int kind = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);

	return (domain == AF_INET || domain == AF_INET6) &&
	       kind == SOCK_STREAM && (!protocol || protocol == IPPROTO_TCP);
}

EXPORT int socket(int domain, int type, int protocol)
{
	int fd, err;

	init();
	if (wants_rsocket(domain, type, protocol)) {
		err = errno;
		fd = adopt(RS(rsocket, domain, type, protocol));
		if (fd >= 0)
			return fd;
		errno = err;	/* no rsockets here: an ordinary socket */
	}
	return real.socket(domain, type, protocol);
}

EXPORT int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	init();
	return rs_fd(fd) ? RS(rbind, fd, addr, len) : real.bind(fd, addr, len);
}

/*
 * The least backlog an rsocket listener is given.  TCP refuses no
 * connection for a full backlog: the kernel drops the SYN and the
 * client sends it again, so a burst past a small backlog (Python's
 * socketserver asks for 5) only waits.  Our CM rejects a request past
 * the backlog at once, which the client would get as ECONNREFUSED; a
 * floor of Linux's old SOMAXCONN lets such a burst wait in the queue
 * instead (the daemon bounds every listener's queue all the same).
 */
#define MIN_BACKLOG	128

EXPORT int listen(int fd, int backlog)
{
	init();
	if (!rs_fd(fd))
		return real.listen(fd, backlog);
	/* 0 or less: the daemon's own bound, the largest */
	if (backlog > 0 && backlog < MIN_BACKLOG)
		backlog = MIN_BACKLOG;
	return RS(rlisten, fd, backlog);
}

EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	int nfd;

	init();
	if (!rs_fd(fd))
		return real.accept4(fd, addr, len, flags);
	if (flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) {
		errno = EINVAL;
		return -1;
	}
	nfd = adopt(RS_IO(EPOLLIN, raccept, fd, addr, len));
	if (nfd < 0)
		return nfd;
	if (flags & SOCK_NONBLOCK)
		RS(rfcntl, nfd, F_SETFL, O_NONBLOCK);
	if (flags & SOCK_CLOEXEC)
		real.fcntl(nfd, F_SETFD, FD_CLOEXEC);
	return nfd;
}

EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	init();
	return rs_fd(fd) ? accept4(fd, addr, len, 0) : real.accept(fd, addr, len);
}

EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	init();
	return rs_fd(fd) ? RS_IO(EPOLLOUT, rconnect, fd, addr, len) : real.connect(fd, addr, len);
}

EXPORT ssize_t read(int fd, void *buf, size_t count)
{
	init();
	return rs_fd(fd) ? RS_IO(EPOLLIN, rread, fd, buf, count) : real.read(fd, buf, count);
}

EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	init();
	return rs_fd(fd) ? RS_IO(EPOLLIN, rreadv, fd, iov, cnt) : real.readv(fd, iov, cnt);
}

EXPORT ssize_t write(int fd, const void *buf, size_t count)
{
	init();
	return rs_fd(fd) ? pipe_signal(RS_IO(EPOLLOUT, rwrite, fd, buf, count), 0) :
			   real.write(fd, buf, count);
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	init();
	return rs_fd(fd) ? pipe_signal(RS_IO(EPOLLOUT, rwritev, fd, iov, cnt), 0) :
			   real.writev(fd, iov, cnt);
}

EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	init();
	return rs_fd(fd) ? RS_IO(EPOLLIN, rrecv, fd, buf, len, flags) :
			   real.recv(fd, buf, len, flags);
}

EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags,
			struct sockaddr *src, socklen_t *srclen)
{
	init();
	return rs_fd(fd) ? RS_IO(EPOLLIN, rrecvfrom, fd, buf, len, flags, src, srclen) :
			   real.recvfrom(fd, buf, len, flags, src, srclen);
}

EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	init();
	return rs_fd(fd) ? RS_IO(EPOLLIN, rrecvmsg, fd, msg, flags) : real.recvmsg(fd, msg, flags);
}

EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	init();
	return rs_fd(fd) ? pipe_signal(RS_IO(EPOLLOUT, rsend, fd, buf, len, flags), flags) :
			   real.send(fd, buf, len, flags);
}

EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
		      const struct sockaddr *dst, socklen_t dstlen)
{
	init();
	if (!rs_fd(fd))
		return real.sendto(fd, buf, len, flags, dst, dstlen);
	/* TCP ignores a destination on a connected socket. */
	return pipe_signal(RS_IO(EPOLLOUT, rsend, fd, buf, len, flags), flags);
}

EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	init();
	return rs_fd(fd) ? pipe_signal(RS_IO(EPOLLOUT, rsendmsg, fd, msg, flags), flags) :
			   real.sendmsg(fd, msg, flags);
}

/* The kernel's cap on a recvmmsg/sendmmsg vector (UIO_MAXIOV). */
#define MMSG_MAX	1024u

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * recvmmsg(2) on an rsocket: one rrecvmsg per entry, as the kernel makes
 * one recvmsg per entry of a stream socket, or the call would reach the
 * CM channel's fd (ENOTSOCK).  As the kernel: an error after some
 * entries ends the call with their count; MSG_WAITFORONE waits for the
 * first only; the timeout is looked at after each entry and left with
 * what remains of it.
 */
static int rs_recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen,
		       int flags, struct timespec *tmo)
{
	int64_t end = 0, left;
	unsigned int i;
	ssize_t n;

	if (tmo) {
		if (tmo->tv_sec < 0 || tmo->tv_nsec < 0 || tmo->tv_nsec >= 1000000000) {
			errno = EINVAL;
			return -1;
		}
		end = mono_ns() + (int64_t)tmo->tv_sec * 1000000000 + tmo->tv_nsec;
	}
	if (vlen > MMSG_MAX)
		vlen = MMSG_MAX;
	for (i = 0; i < vlen; i++) {
		n = RS_IO(EPOLLIN, rrecvmsg, fd, &vec[i].msg_hdr, flags & ~MSG_WAITFORONE);
		if (n < 0) {
			if (i == 0)
				return -1;
			break;
		}
		vec[i].msg_len = (unsigned int)n;
		if (flags & MSG_WAITFORONE)
			flags |= MSG_DONTWAIT;
		if (tmo && mono_ns() >= end) {
			i++;
			break;
		}
	}
	if (tmo) {
		left = end - mono_ns();
		if (left < 0)
			left = 0;
		tmo->tv_sec = left / 1000000000;
		tmo->tv_nsec = left % 1000000000;
	}
	return (int)i;
}

EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags,
		    struct timespec *tmo)
{
	init();
	return rs_fd(fd) ? rs_recvmmsg(fd, vec, vlen, flags, tmo) :
			   real.recvmmsg(fd, vec, vlen, flags, tmo);
}

/* sendmmsg(2) on an rsocket: one rsendmsg per entry, as recvmmsg above. */
EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags)
{
	unsigned int i;
	ssize_t n;

	init();
	if (!rs_fd(fd))
		return real.sendmmsg(fd, vec, vlen, flags);
	if (vlen > MMSG_MAX)
		vlen = MMSG_MAX;
	for (i = 0; i < vlen; i++) {
		n = RS_IO(EPOLLOUT, rsendmsg, fd, &vec[i].msg_hdr, flags);
		if (n < 0) {
			if (i == 0)
				return (int)pipe_signal(-1, flags);
			break;
		}
		vec[i].msg_len = (unsigned int)n;
	}
	return (int)i;
}

/*
 * preadv2(2) and pwritev2(2) of a socket: offset -1 reads or writes as
 * readv/writev do (RWF_NOWAIT as MSG_DONTWAIT), any other fails as the
 * kernel fails it on a socket, which has no file offset; else the call
 * would reach the CM channel's fd.  0, or -1 with errno set.
 */
static int rs_rwf(off_t offset, int flags)
{
	if (offset < -1)
		errno = EINVAL;
	else if (offset != -1)
		errno = ESPIPE;
	else if (flags & ~(RWF_HIPRI | RWF_DSYNC | RWF_SYNC | RWF_NOWAIT | RWF_APPEND))
		errno = EOPNOTSUPP;
	else
		return 0;
	return -1;
}

/* preadv2 (out false) or pwritev2 (out true) of an rsocket. */
static ssize_t rs_rwv2(int fd, const struct iovec *iov, int cnt,
		       off64_t offset, int flags, bool out)
{
	struct msghdr msg = { .msg_iov = (struct iovec *)iov };
	int msg_flags = flags & RWF_NOWAIT ? MSG_DONTWAIT : 0;

	/* of the offset, only its class matters (-1, below, 0 and above) */
	if (rs_rwf(offset == -1 ? -1 : offset < -1 ? -2 : 0, flags) < 0)
		return -1;
	if (cnt < 0) {
		errno = EINVAL;
		return -1;
	}
	msg.msg_iovlen = (size_t)cnt;
	if (!out)
		return RS_IO(EPOLLIN, rrecvmsg, fd, &msg, msg_flags);
	return pipe_signal(RS_IO(EPOLLOUT, rsendmsg, fd, &msg, msg_flags), 0);
}

EXPORT ssize_t preadv2(int fd, const struct iovec *iov, int cnt, off_t offset,
		       int flags)
{
	init();
	return rs_fd(fd) ? rs_rwv2(fd, iov, cnt, offset, flags, false) :
			   real.preadv2(fd, iov, cnt, offset, flags);
}

/* Where off_t is 32 bits, the 64-bit offset goes to the C library whole. */
EXPORT ssize_t preadv64v2(int fd, const struct iovec *iov, int cnt,
			  off64_t offset, int flags)
{
	init();
	if (rs_fd(fd))
		return rs_rwv2(fd, iov, cnt, offset, flags, false);
	return real.preadv64v2(fd, iov, cnt, offset, flags);
}

EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t offset,
			int flags)
{
	init();
	return rs_fd(fd) ? rs_rwv2(fd, iov, cnt, offset, flags, true) :
			   real.pwritev2(fd, iov, cnt, offset, flags);
}

EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt,
			   off64_t offset, int flags)
{
	init();
	if (rs_fd(fd))
		return rs_rwv2(fd, iov, cnt, offset, flags, true);
	return real.pwritev64v2(fd, iov, cnt, offset, flags);
}

/*
 * lseek(2) of a socket fails with ESPIPE; the CM channel's fd (an epoll
 * instance) would say 0, and a program that asks whether its fd seeks
 * (stdio, Python's io) would take the rsocket for a file.
 */
EXPORT off_t lseek(int fd, off_t offset, int whence)
{
	init();
	if (rs_fd(fd)) {
		errno = ESPIPE;
		return -1;
	}
	return real.lseek(fd, offset, whence);
}

EXPORT off64_t lseek64(int fd, off64_t offset, int whence)
{
	init();
	if (rs_fd(fd)) {
		errno = ESPIPE;
		return -1;
	}
	return real.lseek64(fd, offset, whence);
}

/*
 * fstat(2) of an rsocket: the CM channel's fd is an epoll instance, whose
 * mode has no file type; a socket's is S_IFSOCK, rwx for all, and
 * programs look (S_ISSOCK: libuv's handle guess, inetd-style servers).
 * __fxstat and __fxstat64: what programs built before glibc 2.33 call.
 */
#define SOCK_MODE	(S_IFSOCK | 0777)

static int as_socket(int fd, int ret, mode_t *mode)
{
	if (ret == 0 && rs_fd(fd))
		*mode = SOCK_MODE;
	return ret;
}

static int no_stat(void)
{
	errno = ENOSYS;
	return -1;
}

EXPORT int fstat(int fd, struct stat *st)
{
	init();
	return real.fstat ? as_socket(fd, real.fstat(fd, st), &st->st_mode) : no_stat();
}

EXPORT int fstat64(int fd, struct stat64 *st)
{
	init();
	return real.fstat64 ? as_socket(fd, real.fstat64(fd, st), &st->st_mode) : no_stat();
}

EXPORT int __fxstat(int ver, int fd, struct stat *st);
EXPORT int __fxstat(int ver, int fd, struct stat *st)
{
	init();
	return real.__fxstat ? as_socket(fd, real.__fxstat(ver, fd, st), &st->st_mode) :
			       no_stat();
}

EXPORT int __fxstat64(int ver, int fd, struct stat64 *st);
EXPORT int __fxstat64(int ver, int fd, struct stat64 *st)
{
	init();
	return real.__fxstat64 ? as_socket(fd, real.__fxstat64(ver, fd, st), &st->st_mode) :
				 no_stat();
}

/*
 * The _FORTIFY_SOURCE entry points a program calls instead of read(2),
 * recv(2), recvfrom(2) and poll(2) when it knows its buffer's size.
 */
void __chk_fail(void) __attribute__((noreturn));

EXPORT ssize_t __read_chk(int fd, void *buf, size_t count, size_t buflen);
EXPORT ssize_t __read_chk(int fd, void *buf, size_t count, size_t buflen)
{
	if (count > buflen)
		__chk_fail();
	return read(fd, buf, count);
}

EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen,
			  int flags);
EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen,
			  int flags)
{
	if (len > buflen)
		__chk_fail();
	return recv(fd, buf, len, flags);
}

EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen,
			      int flags, struct sockaddr *src,
			      socklen_t *srclen);
EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen,
			      int flags, struct sockaddr *src,
			      socklen_t *srclen)
{
	if (len > buflen)
		__chk_fail();
	return recvfrom(fd, buf, len, flags, src, srclen);
}

static bool any_rs_pollfd(const struct pollfd *fds, nfds_t n)
{
	nfds_t i;

	for (i = 0; fds && i < n; i++)
		if (rs_fd(fds[i].fd))
			return true;
	return false;
}

EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	init();
	return any_rs_pollfd(fds, n) ? RS(rpoll, fds, n, timeout) :
				       real.poll(fds, n, timeout);
}

EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);
EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n)
		__chk_fail();
	return poll(fds, n, timeout);
}

static bool any_rs_set(int nfds, fd_set *r, fd_set *w, fd_set *e)
{
	int fd;

	for (fd = 0; fd < nfds && fd < FD_SETSIZE; fd++) {
		if (!rs_fd(fd))
			continue;
		if ((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) ||
		    (e && FD_ISSET(fd, e)))
			return true;
	}
	return false;
}

EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e,
		  struct timeval *tv)
{
	init();
	return any_rs_set(nfds, r, w, e) ? RS(rselect, nfds, r, w, e, tv) :
					   real.select(nfds, r, w, e, tv);
}

/* A ppoll/pselect timeout as rpoll's milliseconds, rounded up; -1: none. */
static int timeout_ms(const struct timespec *ts)
{
	long long ms;

	if (!ts)
		return -1;
	ms = (long long)ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

/*
 * ppoll's and pselect's signal mask, in force for the wait (not
 * atomically: see the top): 0, or an errno value.
 */
static int mask_enter(const sigset_t *sigmask, sigset_t *old)
{
	return sigmask ? pthread_sigmask(SIG_SETMASK, sigmask, old) : 0;
}

static void mask_leave(const sigset_t *sigmask, const sigset_t *old)
{
	int err = errno;

	if (sigmask)
		pthread_sigmask(SIG_SETMASK, old, NULL);
	errno = err;
}

static bool bad_timespec(const struct timespec *ts)
{
	return ts && (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000);
}

EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts,
		 const sigset_t *sigmask)
{
	sigset_t old;
	int ret;

	init();
	if (!any_rs_pollfd(fds, n))
		return real.ppoll(fds, n, ts, sigmask);
	if (bad_timespec(ts)) {
		errno = EINVAL;
		return -1;
	}
	ret = mask_enter(sigmask, &old);
	if (ret) {
		errno = ret;
		return -1;
	}
	ret = RS(rpoll, fds, n, timeout_ms(ts));
	mask_leave(sigmask, &old);
	return ret;
}

EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts,
			const sigset_t *sigmask, size_t fdslen);
EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts,
			const sigset_t *sigmask, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n)
		__chk_fail();
	return ppoll(fds, n, ts, sigmask);
}

EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e,
		   const struct timespec *ts, const sigset_t *sigmask)
{
	struct timeval tv, *tvp = NULL;
	sigset_t old;
	int ret;

	init();
	if (!any_rs_set(nfds, r, w, e))
		return real.pselect(nfds, r, w, e, ts, sigmask);
	if (bad_timespec(ts)) {
		errno = EINVAL;
		return -1;
	}
	if (ts) {
		tv.tv_sec = ts->tv_sec;
		tv.tv_usec = (ts->tv_nsec + 999) / 1000;
		if (tv.tv_usec == 1000000) {
			tv.tv_sec++;
			tv.tv_usec = 0;
		}
		tvp = &tv;
	}
	ret = mask_enter(sigmask, &old);
	if (ret) {
		errno = ret;
		return -1;
	}
	ret = RS(rselect, nfds, r, w, e, tvp);
	mask_leave(sigmask, &old);
	return ret;
}

/* Bytes sendfile moves through its buffer at a time. */
#define SENDFILE_CHUNK	(64u << 10)

/*
 * sendfile to an rsocket: the file read here (from *offset, which moves,
 * or from in_fd's own offset), written with rwrite until count bytes, the
 * file's end, or the rsocket takes no more (nonblocking).  As sendfile:
 * the bytes moved, or -1 if none could be and errno says why.  The
 * offset is 64 bits wide for sendfile and sendfile64 alike.
 */
static ssize_t rs_sendfile(int out_fd, int in_fd, off64_t *offset, size_t count)
{
	static __thread char buf[SENDFILE_CHUNK];
	size_t done = 0;

	while (done < count) {
		size_t want = count - done < sizeof(buf) ? count - done : sizeof(buf);
		ssize_t got, put;

		got = offset ? pread64(in_fd, buf, want, *offset) :
			       real.read(in_fd, buf, want);
		if (got <= 0) {
			if (got < 0 && done == 0)
				return -1;
			break;
		}
		put = RS_IO(EPOLLOUT, rwrite, out_fd, buf, (size_t)got);
		if (put < 0) {
			if (done == 0) {
				/* nothing went: the file's offset stays */
				if (!offset)
					lseek64(in_fd, -got, SEEK_CUR);
				return -1;
			}
			put = 0;
		}
		/* what the rsocket did not take stays in the file */
		if (!offset && put < got)
			lseek64(in_fd, put - got, SEEK_CUR);
		if (offset)
			*offset += put;
		done += (size_t)put;
		if (put < got)
			break;
	}
	return (ssize_t)done;
}

EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	off64_t off;
	ssize_t ret;

	init();
	if (!rs_fd(out_fd))
		return real.sendfile(out_fd, in_fd, offset, count);
	if (!offset)
		return rs_sendfile(out_fd, in_fd, NULL, count);
	off = *offset;
	ret = rs_sendfile(out_fd, in_fd, &off, count);
	*offset = (off_t)off;
	return ret;
}

/*
 * What a program built with 64-bit file offsets calls (nginx and
 * lighttpd are): the same on an rsocket, or the kernel's sendfile would
 * take the rsocket's fd for the CM channel's.
 */
EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset, size_t count)
{
	init();
	if (rs_fd(out_fd))
		return rs_sendfile(out_fd, in_fd, offset, count);
	if (!real.sendfile64) {
		errno = ENOSYS;
		return -1;
	}
	return real.sendfile64(out_fd, in_fd, offset, count);
}

/*
 * An rsocket of the program's goes: out of the epoll instances it is in
 * first (the kernel's epoll forgets a closed file), or they would watch
 * whatever file takes its number next.
 */
static int close_rsocket(int fd)
{
	mark(fd, false);
	ep_rs_closing(fd);
	return RS(rclose, fd);
}

EXPORT int close(int fd)
{
	init();
	if (rs_fd(fd))
		return close_rsocket(fd);
	if (!in_rsockets)
		ep_fd_closing(fd);	/* an epoll fd: its rsockets go */
	return real.close(fd);
}

/*
 * close_range(2) and closefrom(3) close rsockets' fds too: each rsocket in
 * the range is closed first, as close() closes one, or its mark would stay
 * on the fd number for whatever file takes it next; so are the rsockets
 * of an epoll fd in the range forgotten.
 */
static void close_rsockets(unsigned int first, unsigned int last)
{
	unsigned int fd;

	for (fd = first; fd <= last && fd < PRELOAD_MAX_FD; fd++) {
		if (rs_fd((int)fd))
			close_rsocket((int)fd);
		else
			ep_fd_closing((int)fd);
	}
}

EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	init();
	/* CLOSE_RANGE_CLOEXEC closes nothing now; exec starts us afresh */
	if (!(flags & CLOSE_RANGE_CLOEXEC) && first <= last)
		close_rsockets(first, last);
	if (!real.close_range) {
		errno = ENOSYS;
		return -1;
	}
	return real.close_range(first, last, flags);
}

EXPORT void closefrom(int lowfd)
{
	init();
	if (lowfd >= 0)
		close_rsockets((unsigned int)lowfd, ~0u);
	if (real.closefrom)
		real.closefrom(lowfd);
}

EXPORT int shutdown(int fd, int how)
{
	init();
	return rs_fd(fd) ? RS(rshutdown, fd, how) : real.shutdown(fd, how);
}

static int do_fcntl(int fd, int cmd, uintptr_t arg)
{
	if (rs_fd(fd) && (cmd == F_GETFL || cmd == F_SETFL))
		return RS(rfcntl, fd, cmd, (int)arg);
	if (rs_fd(fd) && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)) {
		/*
		 * As dup(): a copy would be the CM channel's fd, unmarked,
		 * and the program's reads and writes on it would go there.
		 */
		errno = ENOTSUP;
		return -1;
	}
	/* F_GETFD/F_SETFD and the rest: the rsocket's fd is a real one. */
	return real.fcntl(fd, cmd, arg);
}

EXPORT int fcntl(int fd, int cmd, ...)
{
	uintptr_t arg;
	va_list ap;

	init();
	va_start(ap, cmd);
	arg = va_arg(ap, uintptr_t);
	va_end(ap);
	return do_fcntl(fd, cmd, arg);
}

EXPORT int fcntl64(int fd, int cmd, ...)
{
	uintptr_t arg;
	va_list ap;

	init();
	va_start(ap, cmd);
	arg = va_arg(ap, uintptr_t);
	va_end(ap);
	return do_fcntl(fd, cmd, arg);
}

/*
 * ioctl(2) FIONBIO, how some programs (Python's setblocking()) make a
 * socket nonblocking: on an rsocket it is O_NONBLOCK by rfcntl, or the
 * flag would land on the CM channel's fd and the rsocket stay blocking.
 */
static int rs_fionbio(int fd, const int *on)
{
	int fl;

	if (!on) {
		errno = EFAULT;
		return -1;
	}
	fl = RS(rfcntl, fd, F_GETFL, 0);
	if (fl < 0)
		return -1;
	fl = *on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
	return RS(rfcntl, fd, F_SETFL, fl) < 0 ? -1 : 0;
}

/*
 * ioctl(2) FIONREAD (SIOCINQ): the bytes an rsocket holds for reading, as
 * a MSG_PEEK | MSG_TRUNC receive counts them, copying nothing (the CM
 * channel's fd would say EINVAL); a listener's is EINVAL, as TCP's.  Not
 * a read: an EPOLLET readiness is not reported again for it.
 */
static int rs_fionread(int fd, int *avail)
{
	socklen_t len = sizeof(int);
	int listening = 0;
	ssize_t got;

	if (!avail) {
		errno = EFAULT;
		return -1;
	}
	if (RS(rgetsockopt, fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 &&
	    listening) {
		errno = EINVAL;
		return -1;
	}
	/* nothing yet, the end, or an error its next read reports: 0 */
	got = RS(rrecv, fd, NULL, INT_MAX, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);
	*avail = got > 0 ? (int)got : 0;
	return 0;
}

/* An rsocket has no urgent data (MSG_OOB is EOPNOTSUPP): never at the mark. */
static int rs_atmark(int *at)
{
	if (!at) {
		errno = EFAULT;
		return -1;
	}
	*at = 0;
	return 0;
}

EXPORT int ioctl(int fd, unsigned long request, ...)
{
	void *arg;
	va_list ap;

	init();
	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (rs_fd(fd) && request == FIONBIO)
		return rs_fionbio(fd, arg);
	if (rs_fd(fd) && request == FIONREAD)
		return rs_fionread(fd, arg);
	if (rs_fd(fd) && request == SIOCATMARK)
		return rs_atmark(arg);
	return real.ioctl(fd, request, arg);
}

/* sockatmark(3): the C library's ioctl is its own, not the one above. */
EXPORT int sockatmark(int fd)
{
	int at;

	init();
	if (!rs_fd(fd))
		return real.sockatmark(fd);
	return rs_atmark(&at) < 0 ? -1 : at;
}

EXPORT int setsockopt(int fd, int level, int name, const void *val,
		      socklen_t len)
{
	init();
	return rs_fd(fd) ? RS(rsetsockopt, fd, level, name, val, len) :
			   real.setsockopt(fd, level, name, val, len);
}

EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	init();
	return rs_fd(fd) ? RS(rgetsockopt, fd, level, name, val, len) :
			   real.getsockopt(fd, level, name, val, len);
}

EXPORT int getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	init();
	return rs_fd(fd) ? RS(rgetpeername, fd, addr, len) :
			   real.getpeername(fd, addr, len);
}

EXPORT int getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	init();
	return rs_fd(fd) ? RS(rgetsockname, fd, addr, len) :
			   real.getsockname(fd, addr, len);
}

EXPORT int dup(int fd)
{
	init();
	if (rs_fd(fd)) {
		errno = ENOTSUP;	/* one rsocket, one fd */
		return -1;
	}
	return real.dup(fd);
}

/*
 * Before dup2 or dup3 of oldfd onto newfd: 0, or -1 with errno ENOTSUP if
 * oldfd is an rsocket (one rsocket, one fd).  Both close what newfd was:
 * an rsocket there goes first, or its mark would stay on whatever fd
 * newfd then is (and an epoll fd's rsockets are forgotten).  oldfd == newfd closes nothing (dup3 says EINVAL).
 */
static int dup_onto(int oldfd, int newfd)
{
	if (rs_fd(oldfd)) {
		errno = ENOTSUP;
		return -1;
	}
	if (rs_fd(newfd) && oldfd != newfd)
		close_rsocket(newfd);
	else if (oldfd != newfd)
		ep_fd_closing(newfd);
	return 0;
}

EXPORT int dup2(int oldfd, int newfd)
{
	init();
	return dup_onto(oldfd, newfd) ? -1 : real.dup2(oldfd, newfd);
}

EXPORT int dup3(int oldfd, int newfd, int flags)
{
	init();
	return dup_onto(oldfd, newfd) ? -1 : real.dup3(oldfd, newfd, flags);
}
