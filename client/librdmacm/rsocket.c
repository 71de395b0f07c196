/*
 * rsockets: a sockets-like API over RDMA (rstream, riostream, rcopy,
 * udpong).  Not implemented: every call fails cleanly with ENOSYS (-1 and
 * errno; rpoll/rselect too), so those tools exit at once with "rsocket:
 * Function not implemented".  rping, ucmatose, udaddy, mckey and cmtime
 * import rpoll through rdma-core's examples/common.c but never call it
 * unless asked to (their default paths use rdma_get_cm_event), so they
 * are unaffected.
 */
#include "config.h"

#include <rdma/rsocket.h>

#include "unsupported.h"

/* Sockets */

int rsocket(int domain, int type, int protocol)
{
	return unsupported();
}

int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	return unsupported();
}

int rlisten(int socket, int backlog)
{
	return unsupported();
}

int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return unsupported();
}

int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	return unsupported();
}

int rshutdown(int socket, int how)
{
	return unsupported();
}

int rclose(int socket)
{
	return unsupported();
}

/* Data transfer */

ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	return unsupported();
}

ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags,
		  struct sockaddr *src_addr, socklen_t *addrlen)
{
	return unsupported();
}

ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	return unsupported();
}

ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	return unsupported();
}

ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
		const struct sockaddr *dest_addr, socklen_t addrlen)
{
	return unsupported();
}

ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	return unsupported();
}

ssize_t rread(int socket, void *buf, size_t count)
{
	return unsupported();
}

ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	return unsupported();
}

ssize_t rwrite(int socket, const void *buf, size_t count)
{
	return unsupported();
}

ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	return unsupported();
}

/* Readiness */

int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	return unsupported();
}

int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
	    struct timeval *timeout)
{
	return unsupported();
}

/* Names and options */

int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return unsupported();
}

int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return unsupported();
}

int rsetsockopt(int socket, int level, int optname, const void *optval,
		socklen_t optlen)
{
	return unsupported();
}

int rgetsockopt(int socket, int level, int optname, void *optval,
		socklen_t *optlen)
{
	return unsupported();
}

int rfcntl(int socket, int cmd, ...)
{
	return unsupported();
}

/* RDMA-write I/O mapping */

off_t riomap(int socket, void *buf, size_t len, int prot, int flags,
	     off_t offset)
{
	return unsupported();
}

int riounmap(int socket, void *buf, size_t len)
{
	return unsupported();
}

/* Returns a byte count, so failure is (size_t)-1, as in rdma-core. */
size_t riowrite(int socket, const void *buf, size_t count, off_t offset,
		int flags)
{
	return (size_t)unsupported();
}
