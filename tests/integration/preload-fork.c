/*
 * preload-fork: a forking TCP server's pattern under librspreload
 * (rsockets.sh, case "fork").  Nothing here knows of rsockets.
 *
 *   preload-fork server PORT   accept one connection on 127.0.0.1:PORT
 *                              and, while the client's second connection
 *                              waits unaccepted, fork: the child's write
 *                              and read on the inherited socket fail at
 *                              once (EBADF: the child has no rsockets of
 *                              the parent's), it closes that socket and
 *                              the listener and exits; then the parent
 *                              talks on the first connection and accepts
 *                              the second; print "server ok"
 *   preload-fork client PORT   connect twice (the second without
 *                              blocking), read each connection's line,
 *                              answer the first; print "client ok"
 * Every wait is bounded (alarm).  Exit status 0, or 1 with a message on
 * stderr.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "preload-test.h"

#define WAIT_S	20	/* any one step, at most */

static int die(const char *what)
{
	fprintf(stderr, "preload-fork: %s: %s\n", what, strerror(errno));
	return 1;
}

/* Read what fd holds up to a newline (at most len - 1 bytes): 0 or -1. */
static int read_line(int fd, char *buf, size_t len)
{
	size_t got = 0;
	ssize_t n;

	while (got + 1 < len) {
		n = read(fd, buf + got, 1);
		if (n <= 0) {
			if (n == 0)
				errno = ECONNRESET;
			return -1;
		}
		if (buf[got++] == '\n')
			break;
	}
	buf[got] = '\0';
	return 0;
}

static int expect_line(int fd, const char *want)
{
	char buf[64];

	if (read_line(fd, buf, sizeof(buf)) < 0)
		return die("read");
	if (strcmp(buf, want)) {
		fprintf(stderr, "preload-fork: read \"%s\", not \"%s\"\n", buf, want);
		return 1;
	}
	return 0;
}

/*
 * The child: the parent's sockets are not its own.  Before the fix a
 * write on a connection still being accepted spun for ever; SIGALRM
 * then ends the child and the parent says so.
 */
static int child(int lfd, int fd)
{
	char c;

	alarm(WAIT_S);
	if (write(fd, "child\n", 6) != -1 || errno != EBADF) {
		fprintf(stderr, "preload-fork: the child's write on an inherited socket: %s\n",
			strerror(errno));
		return 1;
	}
	if (read(fd, &c, 1) != -1 || errno != EBADF) {
		fprintf(stderr, "preload-fork: the child's read on an inherited socket: %s\n",
			strerror(errno));
		return 1;
	}
	if (close(fd) < 0 || close(lfd) < 0)
		return die("the child's close");
	return 0;
}

static int server(int port)
{
	int lfd, fd, fd2, st;
	pid_t pid;

	alarm(3 * WAIT_S);
	fd = accept_loopback(port, &lfd);
	if (fd < 0)
		return die("listen/accept");
	/* the client's second request comes meanwhile, taken by nobody yet */
	sleep(1);
	pid = fork();
	if (pid < 0)
		return die("fork");
	if (pid == 0)
		_exit(child(lfd, fd));
	if (waitpid(pid, &st, 0) != pid)
		return die("waitpid");
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "preload-fork: the child ended with status %#x\n", st);
		return 1;
	}
	/* the child's close took nothing of the parent's */
	if (write(fd, "parent\n", 7) != 7)
		return die("write");
	if (expect_line(fd, "ack\n"))
		return 1;
	fd2 = accept(lfd, NULL, NULL);
	if (fd2 < 0)
		return die("accept of the second connection");
	if (write(fd2, "second\n", 7) != 7)
		return die("write on the second connection");
	if (expect_line(fd2, "bye\n"))
		return 1;
	printf("server ok\n");
	close(fd2);
	close(fd);
	close(lfd);
	return 0;
}

static int client(int port)
{
	struct sockaddr_in sin = loopback(port);
	struct pollfd pfd;
	socklen_t len;
	int fd, fd2, err;

	alarm(3 * WAIT_S);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		return die("connect");
	fd2 = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd2 < 0)
		return die("socket");
	if (connect(fd2, (struct sockaddr *)&sin, sizeof(sin)) < 0 && errno != EINPROGRESS)
		return die("connect of the second connection");
	if (expect_line(fd, "parent\n"))
		return 1;
	if (write(fd, "ack\n", 4) != 4)
		return die("write");
	pfd.fd = fd2;
	pfd.events = POLLOUT;
	if (poll(&pfd, 1, WAIT_S * 1000) != 1)
		return die("poll for the second connection");
	len = sizeof(err);
	if (getsockopt(fd2, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
		errno = err;
		return die("the second connection");
	}
	pfd.events = POLLIN;
	if (poll(&pfd, 1, WAIT_S * 1000) != 1)
		return die("poll for the second connection's data");
	if (expect_line(fd2, "second\n"))
		return 1;
	if (write(fd2, "bye\n", 4) != 4)
		return die("write on the second connection");
	printf("client ok\n");
	close(fd2);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "server"))
		return server(atoi(argv[2]));
	if (argc == 3 && !strcmp(argv[1], "client"))
		return client(atoi(argv[2]));
	fprintf(stderr, "usage: preload-fork server PORT | client PORT\n");
	return 2;
}
