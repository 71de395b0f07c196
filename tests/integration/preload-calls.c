/*
 * preload-calls: a plain TCP program for librspreload's less common calls
 * (rsockets.sh, case "calls").  Nothing here knows of rsockets.
 *
 *   preload-calls server PORT   empty the environment (as nginx does,
 *                               IBVERBSD_SOCKET gone with the rest), then
 *                               accept one connection on 127.0.0.1:PORT
 *                               on a listener made nonblocking with
 *                               ioctl FIONBIO (as fcntl then says), the
 *                               connection awaited with ppoll;
 *                               check that ppoll refuses a bad timeout
 *                               (EINVAL); then wait for data with ppoll
 *                               and pselect in turn (a signal mask given),
 *                               read to the end (by read(2), recvmmsg(2)
 *                               and preadv2(2) at offset -1 in turn);
 *                               check that lseek(2) and preadv2 at an
 *                               offset fail with ESPIPE, that ioctl
 *                               FIONREAD finds the first data the first
 *                               read gets (EINVAL on the listener), that
 *                               sockatmark(3) says 0; print
 *                               "received BYTES fnv HASH"
 *   preload-calls client PORT FILE   connect (fstat(2), fstatat(2) with
 *                               AT_EMPTY_PATH and statx(2) say S_ISSOCK,
 *                               getsockopt SO_TYPE, SO_DOMAIN and
 *                               SO_PROTOCOL a TCP socket's),
 *                               send FILE whole: its first
 *                               50 bytes by sendmmsg(2) (two entries),
 *                               the next 50 by pwritev2(2) at offset -1
 *                               (at 0 it fails with ESPIPE), then by
 *                               sendfile(2) (with
 *                               an offset to the first half, the file's
 *                               own offset for the rest, by sendfile64
 *                               as a program built with 64-bit file
 *                               offsets calls it: nginx, lighttpd),
 *                               corked with TCP_CORK meanwhile (nginx's
 *                               tcp_nopush), as getsockopt says; print
 *                               "sent BYTES fnv HASH".  Before that,
 *                               fcntl F_DUPFD(_CLOEXEC) and dup3 of the
 *                               socket fail (ENOTSUP, as dup), and a
 *                               dup3 onto another socket's fd leaves an
 *                               ordinary fd there (a write to /dev/null);
 *                               so does a file opened on the fd of a
 *                               socket closed by close_range
 * Exit status 0, or 1 with a message on stderr.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "preload-test.h"

#define FNV_START	0xcbf29ce484222325ull

static int die(const char *what)
{
	fprintf(stderr, "preload-calls: %s: %s\n", what, strerror(errno));
	return 1;
}

static uint64_t fnv(uint64_t h, const unsigned char *p, size_t n)
{
	while (n--) {
		h ^= *p++;
		h *= 0x100000001b3ull;
	}
	return h;
}

/* Wait for fd to be readable: ppoll on even turns, pselect on odd ones. */
static int wait_readable(int fd, unsigned int turn)
{
	struct timespec ten = { .tv_sec = 10 };
	sigset_t mask;
	int n;

	sigemptyset(&mask);
	sigaddset(&mask, SIGUSR1);
	if (turn % 2 == 0) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };

		n = ppoll(&pfd, 1, &ten, &mask);
		if (n == 1 && !(pfd.revents & (POLLIN | POLLHUP)))
			n = -1;
	} else {
		fd_set r;

		FD_ZERO(&r);
		FD_SET(fd, &r);
		n = pselect(fd + 1, &r, NULL, NULL, &ten, &mask);
		if (n == 1 && !FD_ISSET(fd, &r))
			n = -1;
	}
	if (n == 0)
		errno = ETIMEDOUT;
	return n == 1 ? 0 : -1;
}

/*
 * ioctl FIONBIO on the listener: fcntl says O_NONBLOCK, on and off; an
 * accept with no connection yet says EAGAIN, at once, until one comes.
 */
static int nonblocking_accept(int lfd, int *fd)
{
	struct timespec ten = { .tv_sec = 10 };
	struct pollfd pfd = { .fd = lfd, .events = POLLIN };
	int on = 1, off = 0;

	if (ioctl(lfd, FIONBIO, &off) < 0 || (fcntl(lfd, F_GETFL) & O_NONBLOCK) ||
	    ioctl(lfd, FIONBIO, &on) < 0 || !(fcntl(lfd, F_GETFL) & O_NONBLOCK)) {
		fprintf(stderr, "preload-calls: ioctl FIONBIO did not set the socket's O_NONBLOCK\n");
		return 1;
	}
	for (;;) {
		*fd = accept(lfd, NULL, NULL);
		if (*fd >= 0)
			break;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return die("accept");
		if (ppoll(&pfd, 1, &ten, NULL) != 1)
			return die("ppoll on the listener");
	}
	/* the connection is blocking, as accept(2)'s are */
	if (fcntl(*fd, F_GETFL) & O_NONBLOCK) {
		fprintf(stderr, "preload-calls: accept gave a nonblocking connection\n");
		return 1;
	}
	return 0;
}

/*
 * recvmmsg into two halves of buf, waiting for the first only: the bytes
 * in both (0 at the end: each entry reads 0 there), or -1.  Each entry
 * takes what is there when it comes (the second may get what came after
 * the first), as the kernel's recvmmsg does on a stream socket.
 */
static ssize_t read_mmsg(int fd, unsigned char *buf, size_t len)
{
	struct iovec iov[2] = { { buf, len / 2 }, { buf + len / 2, len - len / 2 } };
	struct mmsghdr mm[2];
	int n, i;
	ssize_t total = 0;

	memset(mm, 0, sizeof(mm));
	for (i = 0; i < 2; i++) {
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	n = recvmmsg(fd, mm, 2, MSG_WAITFORONE, NULL);
	if (n < 0)
		return -1;
	for (i = 0; i < n; i++)
		total += mm[i].msg_len;
	/* the second entry's bytes follow the first's in buf */
	if (n == 2 && mm[1].msg_len)
		memmove(buf + mm[0].msg_len, buf + len / 2, mm[1].msg_len);
	return total;
}

/* Read by read, recvmmsg or preadv2 at offset -1, by turns. */
static ssize_t read_turn(int fd, unsigned char *buf, size_t len, unsigned int turn)
{
	struct iovec iov = { buf, len };

	switch (turn % 4) {
	case 2:
		return read_mmsg(fd, buf, len);
	case 3:
		return preadv2(fd, &iov, 1, -1, 0);
	default:
		return read(fd, buf, len);
	}
}

/* A socket has no file offset: lseek and preadv2 at one say ESPIPE. */
static int no_offset(int fd)
{
	unsigned char b;
	struct iovec iov = { &b, 1 };

	if (lseek(fd, 0, SEEK_CUR) != -1 || errno != ESPIPE) {
		fprintf(stderr, "preload-calls: lseek of a socket did not fail with ESPIPE\n");
		return 1;
	}
	if (preadv2(fd, &iov, 1, 0, 0) != -1 || errno != ESPIPE) {
		fprintf(stderr, "preload-calls: preadv2 of a socket at 0 did not fail with ESPIPE\n");
		return 1;
	}
	return 0;
}

static int server(int port)
{
	struct sockaddr_in sin = loopback(port);
	struct timespec bad = { .tv_nsec = 2000000000 };
	unsigned char buf[65536];
	uint64_t h = FNV_START, total = 0;
	struct pollfd pfd;
	unsigned int turn;
	int one = 1, avail = -1, lfd, fd;
	ssize_t n;

	/* as nginx's workers: nothing of the environment is kept */
	if (clearenv() != 0)
		return die("clearenv");
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		return die("socket");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(lfd, 1) < 0)
		return die("bind/listen");
	if (nonblocking_accept(lfd, &fd))
		return 1;
	pfd.fd = fd;
	pfd.events = POLLIN;
	if (no_offset(fd) != 0)
		return 1;
	if (ppoll(&pfd, 1, &bad, NULL) != -1 || errno != EINVAL) {
		fprintf(stderr, "preload-calls: ppoll took a timeout of 2e9 ns\n");
		return 1;
	}
	if (sockatmark(fd) != 0)
		return die("sockatmark");
	if (ioctl(lfd, FIONREAD, &avail) != -1 || errno != EINVAL) {
		fprintf(stderr, "preload-calls: ioctl FIONREAD of a listener did not fail with EINVAL\n");
		return 1;
	}
	for (turn = 0;; turn++) {
		if (wait_readable(fd, turn) < 0)
			return die(turn % 2 ? "pselect" : "ppoll");
		if (turn == 0 && (ioctl(fd, FIONREAD, &avail) < 0 || avail <= 0)) {
			fprintf(stderr, "preload-calls: ioctl FIONREAD of a readable socket says %d: %s\n",
				avail, strerror(errno));
			return 1;
		}
		n = read_turn(fd, buf, sizeof(buf), turn);
		if (n < 0)
			return die(turn % 4 == 2 ? "recvmmsg" : turn % 4 == 3 ? "preadv2" : "read");
		if (n == 0)
			break;
		/* what FIONREAD found was there for the first read */
		if (turn == 0 && n < (avail < (int)sizeof(buf) ? avail : (int)sizeof(buf))) {
			fprintf(stderr, "preload-calls: ioctl FIONREAD said %d, read got %zd\n", avail, n);
			return 1;
		}
		h = fnv(h, buf, (size_t)n);
		total += (uint64_t)n;
	}
	printf("received %" PRIu64 " fnv %016" PRIx64 "\n", total, h);
	close(fd);
	close(lfd);
	return 0;
}

/*
 * sendfile all of count bytes, from *offset or (NULL) the file's own; the
 * latter by sendfile64, what _FILE_OFFSET_BITS=64 makes of sendfile.
 */
static int send_all(int out, int in, off_t *offset, size_t count)
{
	while (count) {
		ssize_t n = offset ? sendfile(out, in, offset, count) :
				     sendfile64(out, in, NULL, count);

		if (n <= 0) {
			if (n == 0)
				errno = EPIPE;
			return -1;
		}
		count -= (size_t)n;
	}
	return 0;
}

/*
 * close_range(2) over a socket closes it as close(2) does: a file opened
 * later on its fd number is an ordinary one (files are opened until one
 * gets that number: the lower free ones come first).
 */
static int close_range_socket(void)
{
	int s3 = socket(AF_INET, SOCK_STREAM, 0), held[64], n = 0, ret = 1;

	if (s3 < 0)
		return die("socket");
	if (close_range((unsigned int)s3, (unsigned int)s3, 0) < 0)
		return die("close_range");
	while (n < 64) {
		held[n] = open("/dev/null", O_WRONLY);
		if (held[n] < 0) {
			die("/dev/null");
			goto out;
		}
		if (held[n++] >= s3)
			break;
	}
	if (!n || held[n - 1] != s3) {
		fprintf(stderr, "preload-calls: no file got the closed socket's fd %d\n", s3);
		goto out;
	}
	if (write(s3, "x", 1) != 1) {
		die("write to a file on a socket's fd after close_range");
		goto out;
	}
	ret = 0;
out:
	while (n > 0)
		close(held[--n]);
	return ret;
}

/* The dup family on a socket: what dup(2) does, and dup3 onto one. */
static int dups(int fd)
{
	int s2, nul, ret = -1;

	if (fcntl(fd, F_DUPFD, 0) >= 0 || errno != ENOTSUP ||
	    fcntl(fd, F_DUPFD_CLOEXEC, 0) >= 0 || errno != ENOTSUP) {
		fprintf(stderr, "preload-calls: fcntl F_DUPFD of the socket did not fail with ENOTSUP\n");
		return -1;
	}
	nul = open("/dev/null", O_WRONLY);
	if (nul < 0)
		return die("/dev/null");
	if (dup3(fd, nul, 0) >= 0 || errno != ENOTSUP) {
		fprintf(stderr, "preload-calls: dup3 of the socket did not fail with ENOTSUP\n");
		goto out;
	}
	s2 = socket(AF_INET, SOCK_STREAM, 0);
	if (s2 < 0) {
		die("socket");
		goto out;
	}
	if (dup3(nul, s2, O_CLOEXEC) != s2) {
		die("dup3 onto a socket");
		close(s2);
		goto out;
	}
	/* s2 is /dev/null now */
	if (write(s2, "x", 1) != 1) {
		die("write after dup3 onto a socket");
		close(s2);
		goto out;
	}
	close(s2);
	ret = close_range_socket();
out:
	close(nul);
	return ret;
}

/* TCP_CORK on or off, as nginx's tcp_nopush does: getsockopt agrees. */
static int cork(int fd, int on)
{
	socklen_t len = sizeof(int);
	int val = -1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof(on)) < 0)
		return die("setsockopt TCP_CORK");
	if (getsockopt(fd, IPPROTO_TCP, TCP_CORK, &val, &len) < 0)
		return die("getsockopt TCP_CORK");
	if (len != sizeof(int) || !val != !on) {
		fprintf(stderr, "preload-calls: TCP_CORK set to %d reads %d\n", on, val);
		return 1;
	}
	return 0;
}

#define HEAD	100	/* bytes sent by sendmmsg, then pwritev2 */

/*
 * The file's first HEAD bytes: 20 and 30 by sendmmsg in two entries, the
 * rest by pwritev2 at offset -1 (at 0 it says ESPIPE, sending nothing).
 */
static int send_head(int fd, int in)
{
	unsigned char head[HEAD];
	struct iovec iov[2] = { { head, 20 }, { head + 20, 30 } };
	struct iovec rest = { head + 50, HEAD - 50 };
	struct mmsghdr mm[2];
	int i;

	if (pread(in, head, HEAD, 0) != HEAD)
		return die("pread");
	memset(mm, 0, sizeof(mm));
	for (i = 0; i < 2; i++) {
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	if (sendmmsg(fd, mm, 2, 0) != 2)
		return die("sendmmsg");
	if (mm[0].msg_len != 20 || mm[1].msg_len != 30) {
		fprintf(stderr, "preload-calls: sendmmsg sent %u and %u bytes\n",
			mm[0].msg_len, mm[1].msg_len);
		return 1;
	}
	if (pwritev2(fd, &rest, 1, 0, 0) != -1 || errno != ESPIPE) {
		fprintf(stderr, "preload-calls: pwritev2 of a socket at 0 did not fail with ESPIPE\n");
		return 1;
	}
	if (pwritev2(fd, &rest, 1, -1, 0) != HEAD - 50)
		return die("pwritev2");
	return 0;
}

/* What a program that gets only an fd asks of it (Python's socket(fileno=)). */
static int tcp_kind(int fd)
{
	static const struct { int name, want; const char *what; } q[] = {
		{ SO_TYPE, SOCK_STREAM, "SO_TYPE" },
		{ SO_DOMAIN, AF_INET, "SO_DOMAIN" },
		{ SO_PROTOCOL, IPPROTO_TCP, "SO_PROTOCOL" },
	};
	socklen_t len;
	unsigned int i;
	int val;

	for (i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
		len = sizeof(val);
		val = -1;
		if (getsockopt(fd, SOL_SOCKET, q[i].name, &val, &len) < 0)
			return die(q[i].what);
		if (len != sizeof(val) || val != q[i].want) {
			fprintf(stderr, "preload-calls: %s is %d, not %d\n", q[i].what, val, q[i].want);
			return 1;
		}
	}
	return 0;
}

/* fstat, fstatat of the fd itself and statx: a socket's mode. */
static int socket_kind(int fd)
{
	struct statx stx = { 0 };
	struct stat st;

	if (fstat(fd, &st) < 0)
		return die("fstat of the socket");
	if (!S_ISSOCK(st.st_mode)) {
		fprintf(stderr, "preload-calls: fstat of a socket says mode %o\n", (unsigned int)st.st_mode);
		return 1;
	}
	if (fstatat(fd, "", &st, AT_EMPTY_PATH) < 0)
		return die("fstatat of the socket");
	if (!S_ISSOCK(st.st_mode)) {
		fprintf(stderr, "preload-calls: fstatat of a socket says mode %o\n", (unsigned int)st.st_mode);
		return 1;
	}
	if (statx(fd, "", AT_EMPTY_PATH, STATX_TYPE, &stx) < 0)
		return die("statx of the socket");
	if (!(stx.stx_mask & STATX_TYPE) || !S_ISSOCK(stx.stx_mode)) {
		fprintf(stderr, "preload-calls: statx of a socket says mode %o\n", (unsigned int)stx.stx_mode);
		return 1;
	}
	return 0;
}

static int client(int port, const char *path)
{
	struct sockaddr_in sin = loopback(port);
	unsigned char buf[65536];
	uint64_t h = FNV_START;
	struct stat st;
	off_t off = HEAD;
	size_t half;
	ssize_t n;
	int fd, in;

	in = open(path, O_RDONLY);
	if (in < 0 || fstat(in, &st) < 0)
		return die(path);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		h = fnv(h, buf, (size_t)n);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		return die("connect");
	if (socket_kind(fd) != 0)
		return 1;
	if (fstat(in, &st) < 0)
		return die(path);
	if (tcp_kind(fd) != 0)
		return 1;
	if (dups(fd) != 0)
		return 1;
	if (cork(fd, 1) != 0)
		return 1;
	if (send_head(fd, in) != 0)
		return 1;
	half = (size_t)st.st_size / 2;
	/* to the first half by offset (the file's own stays), the rest by it */
	if (send_all(fd, in, &off, half - HEAD) < 0)
		return die("sendfile with an offset");
	if (lseek(in, off, SEEK_SET) != off ||
	    send_all(fd, in, NULL, (size_t)st.st_size - half) < 0)
		return die("sendfile");
	if (lseek(in, 0, SEEK_CUR) != st.st_size) {
		fprintf(stderr, "preload-calls: the file's offset is not at its end\n");
		return 1;
	}
	if (cork(fd, 0) != 0)
		return 1;
	printf("sent %jd fnv %016" PRIx64 "\n", (intmax_t)st.st_size, h);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "server"))
		return server(atoi(argv[2]));
	if (argc == 4 && !strcmp(argv[1], "client"))
		return client(atoi(argv[2]), argv[3]);
	fprintf(stderr, "usage: preload-calls server PORT | client PORT FILE\n");
	return 2;
}
