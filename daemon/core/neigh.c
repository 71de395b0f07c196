/*
 * Neighbour entries (neigh.h): one RTM_GETNEIGH for an entry, on a
 * conversation kept open as route.c's; a datagram to start resolving one.
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <linux/neighbour.h>
#include <linux/rtnetlink.h>

#include "neigh.h"
#include "roce.h"
#include "rtnl.h"

/* RFC 863's discard port: nothing answers there but an ICMP error. */
#define NEIGH_PROMPT_PORT	9

static int parse_neigh(const struct nlmsghdr *h, void *arg)
{
	const struct ndmsg *ndm = NLMSG_DATA(h);
	int *state = arg;

	if (h->nlmsg_type != RTM_NEWNEIGH ||
	    h->nlmsg_len < NLMSG_LENGTH(sizeof(*ndm)))
		return -EPROTO;
	*state = ndm->ndm_state;
	return 0;
}

/* As route.c's: closed when it fails, opened anew by the next query. */
static struct ibvd_rtnl neigh_nl = { .fd = -1 };

static int neigh_query(struct nlmsghdr *req, int *state)
{
	int ret;

	if (neigh_nl.fd < 0) {
		ret = ibvd_rtnl_open(&neigh_nl);
		if (ret < 0)
			return ret;
	}
	ret = ibvd_rtnl_send(&neigh_nl, req);
	if (ret < 0) {
		ibvd_rtnl_close(&neigh_nl);
		return ret;
	}
	ret = ibvd_rtnl_recv(&neigh_nl, false, parse_neigh, state);
	if (ret == -ETIMEDOUT || ret == -EMSGSIZE || ret == -EPROTO)
		ibvd_rtnl_close(&neigh_nl);
	return ret;
}

int ibvd_neigh_state(int ifindex, const uint8_t addr[16])
{
	struct {
		struct nlmsghdr h;
		struct ndmsg ndm;
		char attrs[RTA_SPACE(16)];
	} req;
	bool v4 = ibvd_gid_is_v4(addr);
	size_t alen = v4 ? 4 : 16;
	int ret, state = -ENOENT;

	memset(&req, 0, sizeof(req));
	req.h.nlmsg_len = NLMSG_LENGTH(sizeof(req.ndm));
	req.h.nlmsg_type = RTM_GETNEIGH;
	req.h.nlmsg_flags = NLM_F_REQUEST;
	req.ndm.ndm_family = v4 ? AF_INET : AF_INET6;
	req.ndm.ndm_ifindex = ifindex;
	ret = ibvd_rtnl_put(&req.h, sizeof(req), NDA_DST, addr + 16 - alen, alen);
	if (ret == 0)
		ret = neigh_query(&req.h, &state);
	return ret < 0 ? ret : state;
}

/* The kernel's NUD_VALID: the states that hold a link-layer address. */
#define NEIGH_VALID_STATES	(NUD_PERMANENT | NUD_NOARP | NUD_REACHABLE | \
				 NUD_PROBE | NUD_STALE | NUD_DELAY)

bool ibvd_neigh_valid(int state)
{
	return state >= 0 && (state & NEIGH_VALID_STATES);
}

bool ibvd_neigh_failed(int state)
{
	return state == NUD_FAILED;
}

bool ibvd_neigh_absent(int state)
{
	return state == -ENOENT || state == NUD_NONE;
}

int ibvd_neigh_prompt(int ifindex, const uint8_t addr[16])
{
	struct sockaddr_in6 to6 = { .sin6_family = AF_INET6,
				    .sin6_port = htons(NEIGH_PROMPT_PORT) };
	struct sockaddr_in to4 = { .sin_family = AF_INET,
				   .sin_port = htons(NEIGH_PROMPT_PORT) };
	bool v4 = ibvd_gid_is_v4(addr);
	const struct sockaddr *to = v4 ? (const void *)&to4 : (const void *)&to6;
	socklen_t len = v4 ? sizeof(to4) : sizeof(to6);
	int fd, ret = 0;

	memcpy(&to4.sin_addr, addr + 12, 4);
	memcpy(&to6.sin6_addr, addr, 16);
	/* a link-local next hop (an IPv6 router's) is on this interface */
	to6.sin6_scope_id = (uint32_t)ifindex;
	fd = socket(v4 ? AF_INET : AF_INET6,
		    SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* queued in the entry while it resolves: the send itself succeeds */
	if (sendto(fd, NULL, 0, 0, to, len) < 0)
		ret = -errno;
	close(fd);
	return ret;
}
