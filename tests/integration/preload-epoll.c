/*
 * preload-epoll: a plain TCP echo pair that waits with epoll(7), for
 * librspreload (rsockets.sh, case "epoll").  Nothing here knows of
 * rsockets.
 *
 *   preload-epoll server PORT   one epoll instance: the listener
 *                               (level-triggered) and a pipe; a byte in
 *                               the pipe reports the pipe alone; epoll_ctl
 *                               ADD twice says EEXIST, MOD of a socket not
 *                               in it ENOENT; the connection is added
 *                               EPOLLIN|EPOLLOUT|EPOLLET|EPOLLRDHUP: its
 *                               writability reported once, not again
 *                               (edge-triggered); then "hello" sent and
 *                               everything read echoed until the peer
 *                               shuts its writing (EPOLLRDHUP); then the
 *                               connection closed while in the instance,
 *                               which reports nothing more of it; print
 *                               "echoed BYTES"
 *   preload-epoll client PORT BYTES   nonblocking connect, its end
 *                               reported as writable; "hello" read; its
 *                               readiness reported again while unread
 *                               (level-triggered); BYTES of a pattern sent
 *                               while reading the echo (one epoll_wait
 *                               for both), the echo compared; shut
 *                               writing; the server's close seen as end
 *                               of file; an epoll_wait with nothing ready
 *                               times out; print "echoed BYTES"
 * Every wait has a timeout: a readiness not reported is an error, not a
 * hang.  Exit status 0, or 1 with a message on stderr.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "preload-test.h"

#define WAIT_MS		20000
#define CHUNK		65536

enum { TAG_LISTENER = 1, TAG_PIPE, TAG_CONN };

static int fail(const char *what)
{
	fprintf(stderr, "preload-epoll: %s: %s\n", what, strerror(errno));
	return 1;
}

static int wrong(const char *what)
{
	fprintf(stderr, "preload-epoll: %s\n", what);
	return 1;
}

static int add(int ep, int op, int fd, uint32_t events, uint64_t tag)
{
	struct epoll_event ev = { .events = events, .data.u64 = tag };

	return epoll_ctl(ep, op, fd, &ev);
}

/* One event (the first of what epoll_wait says), or -1 (timeout: ETIMEDOUT). */
static int wait_one(int ep, int ms, struct epoll_event *ev)
{
	int n = epoll_wait(ep, ev, 1, ms);

	if (n == 0)
		errno = ETIMEDOUT;
	return n == 1 ? 0 : -1;
}

static unsigned char pattern(uint64_t i)
{
	return (unsigned char)((i * 7 + (i >> 9)) & 0xff);
}

/* The listener and the pipe: level-triggered, the pipe alone when it has a byte. */
static int accept_one(int ep, int lfd, int *cfd)
{
	struct epoll_event ev;
	int p[2];
	char c;

	if (pipe2(p, O_NONBLOCK) < 0)
		return fail("pipe");
	if (add(ep, EPOLL_CTL_ADD, p[0], EPOLLIN, TAG_PIPE) < 0)
		return fail("epoll_ctl ADD pipe");
	if (add(ep, EPOLL_CTL_ADD, lfd, EPOLLIN, TAG_LISTENER) < 0)
		return fail("epoll_ctl ADD listener");
	if (add(ep, EPOLL_CTL_ADD, lfd, EPOLLIN, TAG_LISTENER) == 0 || errno != EEXIST)
		return wrong("a second epoll_ctl ADD of the listener did not fail with EEXIST");
	if (epoll_wait(ep, &ev, 1, 0) != 0)
		return wrong("epoll_wait reported an event before anything was ready");
	if (write(p[1], "x", 1) != 1)
		return fail("write pipe");
	if (wait_one(ep, WAIT_MS, &ev) < 0)
		return fail("epoll_wait for the pipe");
	if (ev.data.u64 != TAG_PIPE || !(ev.events & EPOLLIN))
		return wrong("epoll_wait reported something else than the pipe's byte");
	if (read(p[0], &c, 1) != 1)
		return fail("read pipe");
	if (wait_one(ep, WAIT_MS, &ev) < 0)
		return fail("epoll_wait for a connection");
	if (ev.data.u64 != TAG_LISTENER)
		return wrong("epoll_wait reported something else than the listener");
	*cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
	if (*cfd < 0)
		return fail("accept4");
	if (add(ep, EPOLL_CTL_DEL, lfd, 0, 0) < 0)
		return fail("epoll_ctl DEL listener");
	if (add(ep, EPOLL_CTL_MOD, lfd, EPOLLIN, TAG_LISTENER) == 0 || errno != ENOENT)
		return wrong("epoll_ctl MOD of a socket not in the instance did not fail with ENOENT");
	close(p[0]);
	close(p[1]);
	return 0;
}

/* Echo until the peer shuts its writing and all is sent back. */
static int echo(int ep, int fd, uint64_t *total)
{
	static unsigned char buf[4 * CHUNK];
	struct epoll_event ev;
	size_t have = 0, off = 0;
	bool eof = false;
	ssize_t n;

	for (;;) {
		/* edge-triggered: read and write until EAGAIN */
		while (!eof && have < sizeof(buf)) {
			n = read(fd, buf + have, sizeof(buf) - have);
			if (n < 0 && errno == EAGAIN)
				break;
			if (n < 0)
				return fail("read");
			if (n == 0)
				eof = true;
			have += (size_t)n;
			*total += (uint64_t)n;
		}
		while (off < have) {
			n = write(fd, buf + off, have - off);
			if (n < 0 && errno == EAGAIN)
				break;
			if (n < 0)
				return fail("write");
			off += (size_t)n;
		}
		if (off == have)
			off = have = 0;
		if (eof && !have)
			return 0;
		if (wait_one(ep, WAIT_MS, &ev) < 0)
			return fail("epoll_wait while echoing");
		if (ev.data.u64 != TAG_CONN)
			return wrong("epoll_wait reported an unknown fd");
		if ((ev.events & EPOLLRDHUP) && !(ev.events & EPOLLIN))
			return wrong("EPOLLRDHUP without EPOLLIN");
	}
}

static int server(int port)
{
	struct sockaddr_in sin = loopback(port);
	struct epoll_event ev;
	uint64_t total = 0;
	int one = 1, lfd, fd = -1, ep;

	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		return fail("epoll_create1");
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (lfd < 0)
		return fail("socket");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(lfd, 4) < 0)
		return fail("bind/listen");
	if (accept_one(ep, lfd, &fd))
		return 1;
	if (add(ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP, TAG_CONN) < 0)
		return fail("epoll_ctl ADD connection");
	/* the client says nothing before "hello": writable, once */
	if (wait_one(ep, WAIT_MS, &ev) < 0)
		return fail("epoll_wait for the connection's writability");
	if (ev.data.u64 != TAG_CONN || ev.events != EPOLLOUT)
		return wrong("the new connection was not reported writable alone");
	if (epoll_wait(ep, &ev, 1, 300) != 0)
		return wrong("edge-triggered writability reported twice");
	if (write(fd, "hello\n", 6) != 6)
		return fail("write hello");
	if (echo(ep, fd, &total))
		return 1;
	/* closed while in the instance: the instance forgets it */
	close(fd);
	if (epoll_wait(ep, &ev, 1, 100) != 0)
		return wrong("epoll_wait reported a closed connection");
	close(lfd);
	close(ep);
	printf("echoed %llu\n", (unsigned long long)total);
	return 0;
}

static int connect_nb(int port, int ep, int *fdp)
{
	struct sockaddr_in sin = loopback(port);
	struct epoll_event ev;
	socklen_t len = sizeof(int);
	int fd, err = 0;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return fail("socket");
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 && errno != EINPROGRESS)
		return fail("connect");
	if (add(ep, EPOLL_CTL_ADD, fd, EPOLLOUT, TAG_CONN) < 0)
		return fail("epoll_ctl ADD");
	if (wait_one(ep, WAIT_MS, &ev) < 0)
		return fail("epoll_wait for the connect");
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
		errno = err;
		return fail("connect (SO_ERROR)");
	}
	*fdp = fd;
	return 0;
}

static int hello(int ep, int fd)
{
	struct epoll_event ev;
	char buf[16];

	if (add(ep, EPOLL_CTL_MOD, fd, EPOLLIN, TAG_CONN) < 0)
		return fail("epoll_ctl MOD");
	if (wait_one(ep, WAIT_MS, &ev) < 0)
		return fail("epoll_wait for hello");
	/* level-triggered: still readable while unread */
	if (wait_one(ep, 0, &ev) < 0 || !(ev.events & EPOLLIN))
		return wrong("level-triggered readability not reported again");
	if (read(fd, buf, 6) != 6 || memcmp(buf, "hello\n", 6))
		return wrong("no hello");
	if (epoll_wait(ep, &ev, 1, 0) != 0)
		return wrong("readable after everything was read");
	return 0;
}

/* Send bytes of the pattern, reading the echo, until all came back. */
static int client_echo(int ep, int fd, uint64_t bytes)
{
	static unsigned char buf[CHUNK];
	uint64_t sent = 0, got = 0, i;
	struct epoll_event ev;
	bool shut = false;
	ssize_t n;
	size_t k;

	if (add(ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLOUT, TAG_CONN) < 0)
		return fail("epoll_ctl MOD IN|OUT");
	while (got < bytes) {
		if (wait_one(ep, WAIT_MS, &ev) < 0)
			return fail("epoll_wait in the transfer");
		if ((ev.events & EPOLLOUT) && sent < bytes) {
			k = bytes - sent < sizeof(buf) ? (size_t)(bytes - sent) : sizeof(buf);
			for (i = 0; i < k; i++)
				buf[i] = pattern(sent + i);
			n = write(fd, buf, k);
			if (n < 0 && errno != EAGAIN)
				return fail("write");
			sent += n > 0 ? (uint64_t)n : 0;
			if (sent == bytes &&
			    add(ep, EPOLL_CTL_MOD, fd, EPOLLIN, TAG_CONN) < 0)
				return fail("epoll_ctl MOD IN");
		}
		if (ev.events & EPOLLIN) {
			n = read(fd, buf, sizeof(buf));
			if (n < 0 && errno != EAGAIN)
				return fail("read");
			if (n == 0)
				return wrong("end of file before the whole echo");
			for (i = 0; n > 0 && i < (uint64_t)n; i++)
				if (buf[i] != pattern(got + i))
					return wrong("the echo differs from what was sent");
			got += n > 0 ? (uint64_t)n : 0;
		}
		if (sent == bytes && !shut) {
			if (shutdown(fd, SHUT_WR) < 0)
				return fail("shutdown");
			shut = true;
		}
	}
	return 0;
}

static int client(int port, uint64_t bytes)
{
	struct epoll_event ev;
	struct timespec t0, t1;
	char c;
	int ep, fd = -1;
	long ms;

	ep = epoll_create(1);
	if (ep < 0)
		return fail("epoll_create");
	if (connect_nb(port, ep, &fd) || hello(ep, fd) || client_echo(ep, fd, bytes))
		return 1;
	if (wait_one(ep, WAIT_MS, &ev) < 0)
		return fail("epoll_wait for the server's close");
	if (read(fd, &c, 1) != 0)
		return wrong("no end of file after the server's close");
	if (add(ep, EPOLL_CTL_DEL, fd, 0, 0) < 0)
		return fail("epoll_ctl DEL");
	close(fd);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (epoll_wait(ep, &ev, 1, 300) != 0)
		return wrong("an empty instance reported an event");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	if (ms < 250)
		return wrong("epoll_wait returned before its timeout");
	close(ep);
	printf("echoed %llu\n", (unsigned long long)bytes);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "server"))
		return server(atoi(argv[2]));
	if (argc == 4 && !strcmp(argv[1], "client"))
		return client(atoi(argv[2]), strtoull(argv[3], NULL, 10));
	fprintf(stderr, "usage: preload-epoll server PORT | client PORT BYTES\n");
	return 2;
}
