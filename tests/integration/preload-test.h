/*
 * What the plain TCP programs that rsockets.sh runs under librspreload
 * (preload-*.c) share.  Nothing here knows of rsockets: they are the
 * unmodified programs the preload must carry.
 */
#ifndef IBVERBSD_TESTS_PRELOAD_TEST_H
#define IBVERBSD_TESTS_PRELOAD_TEST_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

/* 127.0.0.1:port */
static inline struct sockaddr_in loopback(int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };

	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return sin;
}

/* A socket listening on 127.0.0.1:port (backlog 4), or -1 with errno. */
static inline int listen_loopback(int port)
{
	struct sockaddr_in sin = loopback(port);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    listen(fd, 4) < 0) {
		int err = errno;

		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

/*
 * The first connection to a new listener on 127.0.0.1:port, or -1 with
 * errno; the listener stays open in *listener for the caller.
 */
static inline int accept_loopback(int port, int *listener)
{
	int fd;

	*listener = listen_loopback(port);
	if (*listener < 0)
		return -1;
	fd = accept(*listener, NULL, NULL);
	if (fd < 0) {
		int err = errno;

		close(*listener);
		*listener = -1;
		errno = err;
	}
	return fd;
}

#endif
