/*
 * rtnetlink queries (rtnl.h): a request, its answer read into one
 * buffer, each message handed to the caller.
 */
#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "rtnl.h"

/*
 * The kernel answers at once; the bound only keeps a kernel that does
 * not from stalling the control thread.
 */
#define RTNL_TIMEOUT_MS	1000
/* Dump parts are at most this big when we offer this much (max_recvmsg_len). */
#define RTNL_BUF_BYTES	32768

/* Control thread only: one query at a time. */
static uint8_t rtnl_buf[RTNL_BUF_BYTES] __attribute__((aligned(NLMSG_ALIGNTO)));

int ibvd_rtnl_open(struct ibvd_rtnl *nl)
{
	struct timeval tv = { .tv_sec = RTNL_TIMEOUT_MS / 1000,
			      .tv_usec = RTNL_TIMEOUT_MS % 1000 * 1000 };
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	int ret;

	nl->seq = 0;
	nl->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (nl->fd < 0)
		return -errno;
	if (setsockopt(nl->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    bind(nl->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		ret = -errno;
		close(nl->fd);
		nl->fd = -1;
		return ret;
	}
	return 0;
}

void ibvd_rtnl_close(struct ibvd_rtnl *nl)
{
	if (nl->fd >= 0)
		close(nl->fd);
	nl->fd = -1;
}

int ibvd_rtnl_put(struct nlmsghdr *h, size_t cap, unsigned short type,
		  const void *data, size_t len)
{
	size_t at = NLMSG_ALIGN(h->nlmsg_len), room = NLA_ALIGN(NLA_HDRLEN + len);
	struct nlattr *a;

	if (NLA_HDRLEN + len > UINT16_MAX || at + room > cap)
		return -EMSGSIZE;
	a = (struct nlattr *)((char *)h + at);
	memset(a, 0, room);
	a->nla_type = type;
	a->nla_len = (uint16_t)(NLA_HDRLEN + len);
	memcpy((char *)a + NLA_HDRLEN, data, len);
	h->nlmsg_len = (uint32_t)(at + room);
	return 0;
}

int ibvd_rtnl_send(struct ibvd_rtnl *nl, struct nlmsghdr *h)
{
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };

	h->nlmsg_seq = ++nl->seq;
	if (sendto(nl->fd, h, h->nlmsg_len, 0, (struct sockaddr *)&kernel,
		   sizeof(kernel)) < 0)
		return -errno;
	return 0;
}

/*
 * One datagram of the answer: 1 when it is complete, 0 for more, or < 0
 * (-EPROTO for bytes that make no message: the kernel sends whole ones).
 */
static int parse_part(struct ibvd_rtnl *nl, unsigned int len, bool dump,
		      ibvd_rtnl_msg_fn fn, void *arg)
{
	const struct nlmsghdr *h;
	int ret;

	for (h = (const void *)rtnl_buf; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
		if (h->nlmsg_seq != nl->seq)
			continue;	/* not ours, or late */
		if (h->nlmsg_type == NLMSG_DONE)
			return 1;
		if (h->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *e = NLMSG_DATA(h);

			if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
				return -EPROTO;
			return e->error ? e->error : 1;
		}
		ret = fn(h, arg);
		if (ret < 0)
			return ret;
		if (!dump)
			return 1;
	}
	return len ? -EPROTO : 0;
}

int ibvd_rtnl_recv(struct ibvd_rtnl *nl, bool dump, ibvd_rtnl_msg_fn fn,
		   void *arg)
{
	ssize_t n;
	int ret = 0;

	do {
		/* MSG_TRUNC: the datagram's whole length, to tell a cut one */
		n = recv(nl->fd, rtnl_buf, sizeof(rtnl_buf), MSG_TRUNC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		if ((size_t)n > sizeof(rtnl_buf))
			return -EMSGSIZE;
		ret = parse_part(nl, (unsigned int)n, dump, fn, arg);
	} while (n < 0 || ret == 0);
	return ret < 0 ? ret : 0;
}
