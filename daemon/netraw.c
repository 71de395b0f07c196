/*
 * The raw-socket broker: the one part of ibverbsd that keeps a privilege.
 *
 * RoCE devices send and receive through raw IP sockets
 * (transport/roce/io.c), and only CAP_NET_RAW opens those.  Before the
 * daemon gives up its capabilities (privilege.c) it forks this small
 * process, which keeps CAP_NET_RAW and nothing else, closes every fd but
 * its end of a socket pair, and answers one question: "a raw socket of
 * this family and protocol", for the four kinds RoCE uses (IPv4 or IPv6,
 * IPPROTO_RAW or IPPROTO_UDP).  The socket goes back with SCM_RIGHTS; the
 * daemon filters, binds and uses it itself, in its own network namespace,
 * which the broker shares.  Anything else is refused.  The broker exits
 * when the daemon closes the pair or dies (PR_SET_PDEATHSIG).
 *
 * Requests come from the control thread only (devices are set up there),
 * but a lock keeps each request with its answer all the same.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "core/rawsock.h"
#include "log.h"
#include "netraw.h"

/* The broker's end of the pair, after the fork. */
#define BROKER_FD	3

struct netraw_req {
	int32_t family;
	int32_t protocol;
};

struct netraw_rep {
	int32_t err;		/* 0: the fd comes with it; else an errno */
};

static int daemon_fd = -1;
static pid_t broker_pid;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- the broker ---------------------------------------------------------- */

static bool allowed(const struct netraw_req *r)
{
	return (r->family == AF_INET || r->family == AF_INET6) &&
	       (r->protocol == IPPROTO_RAW || r->protocol == IPPROTO_UDP);
}

static void reply(int sock, int err, int fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct netraw_rep rep = { .err = err };
	struct iovec iov = { .iov_base = &rep, .iov_len = sizeof(rep) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;

	if (fd >= 0) {
		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof(ctl.buf);
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	while (sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

/*
 * The socket asked for.  A receiving one gets RoCE's filter, locked: the
 * daemon cannot take it off to read the namespace's other UDP traffic.
 */
static int open_locked(const struct netraw_req *r)
{
	int fd = socket(r->family, SOCK_RAW | SOCK_CLOEXEC, r->protocol);
	int one = 1, ret = 0;

	if (fd < 0)
		return -errno;
	if (r->protocol == IPPROTO_UDP) {
		ret = ibvd_rawsock_filter(fd, r->family);
		if (ret == 0 && setsockopt(fd, SOL_SOCKET, SO_LOCK_FILTER, &one,
					   sizeof(one)) < 0)
			ret = -errno;
	}
	if (ret < 0) {
		close(fd);
		return ret;
	}
	return fd;
}

static void __attribute__((noreturn)) serve(int sock)
{
	struct netraw_req req;
	ssize_t n;
	int fd;

	for (;;) {
		n = recv(sock, &req, sizeof(req), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0);	/* the daemon is gone */
		if (n != (ssize_t)sizeof(req) || !allowed(&req)) {
			reply(sock, EPERM, -1);
			continue;
		}
		fd = open_locked(&req);
		reply(sock, fd < 0 ? -fd : 0, fd);
		if (fd >= 0)
			close(fd);
	}
}

/* Only its end of the pair, stdin, stdout and stderr stay open. */
static int keep_only(int sock)
{
	if (sock != BROKER_FD) {
		if (dup2(sock, BROKER_FD) < 0)
			return -errno;
		close(sock);
	}
	if (syscall(SYS_close_range, BROKER_FD + 1, ~0U, 0) < 0)
		return -errno;
	return 0;
}

static void __attribute__((noreturn)) broker_main(int sock, pid_t parent,
						  const struct ibvd_identity *to)
{
	sigset_t none;
	int ret;

	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != parent)
		_exit(0);
	prctl(PR_SET_NAME, "ibvd-netraw", 0, 0, 0);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGHUP, SIG_IGN);	/* the daemon's reload signal */
	ret = keep_only(sock);
	if (ret == 0)
		ret = ibvd_privilege_restrict(to, CAP_NET_RAW);
	if (ret < 0) {
		log_err("raw-socket broker: %s", strerror(-ret));
		_exit(1);
	}
	/* A change of uid clears the death signal (commit_creds): again. */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != parent)
		_exit(0);
	serve(BROKER_FD);
}

/* ---- the daemon's side --------------------------------------------------- */

static int recv_fd(int sock, int *err)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct netraw_rep rep;
	struct iovec iov = { .iov_base = &rep, .iov_len = sizeof(rep) };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf),
	};
	struct cmsghdr *cm;
	ssize_t n;
	int fd = -1;

	do
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n != (ssize_t)sizeof(rep))
		return -EPROTO;
	for (cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
		    cm->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	*err = rep.err;
	if (rep.err && fd >= 0) {
		close(fd);
		fd = -1;
	}
	return fd < 0 && !rep.err ? -EPROTO : fd;
}

static int netraw_open(int family, int protocol)
{
	struct netraw_req req = { .family = family, .protocol = protocol };
	int fd, err = 0;

	pthread_mutex_lock(&lock);
	if (daemon_fd < 0) {
		fd = -EPERM;
	} else if (send(daemon_fd, &req, sizeof(req), MSG_NOSIGNAL) < 0) {
		fd = -errno;
	} else {
		fd = recv_fd(daemon_fd, &err);
		if (err)
			fd = -err;
	}
	pthread_mutex_unlock(&lock);
	if (fd < 0)
		log_debug("raw socket (family %d, protocol %d) from the broker: %s",
			  family, protocol, strerror(-fd));
	return fd;
}

int ibvd_netraw_start(const struct ibvd_identity *to)
{
	pid_t parent = getpid(), pid;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return -errno;
	}
	if (pid == 0) {
		close(sv[0]);
		broker_main(sv[1], parent, to);
	}
	close(sv[1]);
	daemon_fd = sv[0];
	broker_pid = pid;
	ibvd_rawsock_set_opener(netraw_open);
	return 0;
}

void ibvd_netraw_stop(void)
{
	int status;

	if (daemon_fd < 0)
		return;
	ibvd_rawsock_set_opener(NULL);
	close(daemon_fd);
	daemon_fd = -1;
	while (waitpid(broker_pid, &status, 0) < 0 && errno == EINTR)
		;
	broker_pid = 0;
}
