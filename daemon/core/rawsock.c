/*
 * Raw sockets for RoCE devices (rawsock.h).
 */
#include <config.h>

#include <errno.h>
#include <sys/socket.h>

#include "rawsock.h"

static int direct_open(int family, int protocol)
{
	int fd = socket(family, SOCK_RAW | SOCK_CLOEXEC, protocol);

	return fd < 0 ? -errno : fd;
}

/* Set by the control thread before any device opens (or while none does). */
static ibvd_raw_opener opener = direct_open;

void ibvd_rawsock_set_opener(ibvd_raw_opener fn)
{
	opener = fn ? fn : direct_open;
}

int ibvd_rawsock_open(int family, int protocol)
{
	return opener(family, protocol);
}
