/*
 * A route's hop limit (route.h): one RTM_GETROUTE, whose answer carries
 * the route's metrics and its interface; the default from procfs when
 * the route sets none.  About 5 system calls a lookup.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <net/if.h>
#include <sys/socket.h>

#include <linux/rtnetlink.h>

#include "roce.h"
#include "route.h"
#include "rtnl.h"

#define HOP_LIMIT_FALLBACK	64

struct route_answer {
	unsigned int metric;	/* RTAX_HOPLIMIT; 0 when the route has none */
	int oif;		/* its interface; 0 unknown */
	uint8_t gateway[16];	/* RTA_GATEWAY in GID form ... */
	bool has_gateway;	/* ... if the route has one */
};

/* RTA_GATEWAY's address (4 or 16 bytes) in GID form. */
static void parse_gateway(const struct rtattr *rta, struct route_answer *r)
{
	size_t len = RTA_PAYLOAD(rta);

	if (len != 4 && len != 16)
		return;
	memset(r->gateway, 0, sizeof(r->gateway));
	if (len == 4)
		r->gateway[10] = r->gateway[11] = 0xff;
	memcpy(r->gateway + 16 - len, RTA_DATA(rta), len);
	r->has_gateway = true;
}

static void parse_metrics(const struct rtattr *metrics, struct route_answer *r)
{
	const struct rtattr *rta = RTA_DATA(metrics);
	int len = (int)RTA_PAYLOAD(metrics);
	uint32_t v;

	for (; RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
		if (rta->rta_type == RTAX_HOPLIMIT && RTA_PAYLOAD(rta) >= sizeof(v)) {
			memcpy(&v, RTA_DATA(rta), sizeof(v));
			r->metric = v;
		}
	}
}

static int parse_route(const struct nlmsghdr *h, void *arg)
{
	const struct rtmsg *rtm = NLMSG_DATA(h);
	struct route_answer *r = arg;
	const struct rtattr *rta;
	int len;

	if (h->nlmsg_type != RTM_NEWROUTE ||
	    h->nlmsg_len < NLMSG_LENGTH(sizeof(*rtm)))
		return -EPROTO;
	len = (int)RTM_PAYLOAD(h);
	for (rta = RTM_RTA(rtm); RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
		if (rta->rta_type == RTA_METRICS)
			parse_metrics(rta, r);
		else if (rta->rta_type == RTA_OIF && RTA_PAYLOAD(rta) >= sizeof(int))
			memcpy(&r->oif, RTA_DATA(rta), sizeof(int));
		else if (rta->rta_type == RTA_GATEWAY)
			parse_gateway(rta, r);
	}
	return 0;
}

/*
 * The control thread's conversation about routes, kept open: one lookup
 * is then a request and its answer.  A failed one is closed, to be
 * opened anew by the next.
 */
static struct ibvd_rtnl route_nl = { .fd = -1 };

static int route_query(struct nlmsghdr *req, struct route_answer *r)
{
	int ret;

	if (route_nl.fd < 0) {
		ret = ibvd_rtnl_open(&route_nl);
		if (ret < 0)
			return ret;
	}
	ret = ibvd_rtnl_send(&route_nl, req);
	if (ret < 0) {
		ibvd_rtnl_close(&route_nl);
		return ret;
	}
	ret = ibvd_rtnl_recv(&route_nl, false, parse_route, r);
	/* the kernel's own answers (no route, ...) leave it as good as new */
	if (ret == -ETIMEDOUT || ret == -EMSGSIZE || ret == -EPROTO)
		ibvd_rtnl_close(&route_nl);
	return ret;
}

/*
 * Ask the kernel for the route out of nd from sgid (if not NULL) to dgid,
 * as rdma_cm's address resolution does (the interface and the source
 * address bound): 0 or a negative errno.
 */
static int ask_route(const struct ibvd_netdev *nd, const uint8_t sgid[16],
		     const uint8_t dgid[16], struct route_answer *r)
{
	struct {
		struct nlmsghdr h;
		struct rtmsg rtm;
		char attrs[2 * RTA_SPACE(16) + RTA_SPACE(sizeof(int))];
	} req;
	bool v4 = ibvd_gid_is_v4(dgid);
	size_t alen = v4 ? 4 : 16;
	int ret;

	memset(&req, 0, sizeof(req));
	req.h.nlmsg_len = NLMSG_LENGTH(sizeof(req.rtm));
	req.h.nlmsg_type = RTM_GETROUTE;
	req.h.nlmsg_flags = NLM_F_REQUEST;
	req.rtm.rtm_family = v4 ? AF_INET : AF_INET6;
	req.rtm.rtm_dst_len = (unsigned char)(alen * 8);
	ret = ibvd_rtnl_put(&req.h, sizeof(req), RTA_DST, dgid + 16 - alen, alen);
	if (ret == 0 && sgid && ibvd_gid_is_v4(sgid) == v4) {
		req.rtm.rtm_src_len = (unsigned char)(alen * 8);
		ret = ibvd_rtnl_put(&req.h, sizeof(req), RTA_SRC,
				    sgid + 16 - alen, alen);
	}
	if (ret == 0 && nd->ifindex > 0)
		ret = ibvd_rtnl_put(&req.h, sizeof(req), RTA_OIF, &nd->ifindex,
				    sizeof(nd->ifindex));
	return ret < 0 ? ret : route_query(&req.h, r);
}

/* A hop limit (1..255) from a sysctl file, or 0. */
static unsigned int read_hop_limit(const char *path)
{
	char buf[16];
	ssize_t n = -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	long v;

	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	v = strtol(buf, NULL, 10);
	return v >= 1 && v <= 255 ? (unsigned int)v : 0;
}

/* The namespace's default for IPv6 out of interface oif (or nd's). */
static unsigned int default_hop_limit6(const struct ibvd_netdev *nd, int oif)
{
	char name[IF_NAMESIZE], path[96];
	const char *ifname = nd->ifname;
	unsigned int v;

	if (oif > 0 && oif != nd->ifindex && if_indextoname((unsigned int)oif, name))
		ifname = name;
	snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/hop_limit", ifname);
	v = read_hop_limit(path);
	return v ? v : read_hop_limit("/proc/sys/net/ipv6/conf/all/hop_limit");
}

uint8_t ibvd_route_hop_limit(const struct ibvd_netdev *nd, const uint8_t sgid[16],
			     const uint8_t dgid[16])
{
	struct route_answer r = { .metric = 0 };
	unsigned int v;

	/*
	 * No route: the kernel would refuse the AV (ENETUNREACH); here it is
	 * made with the default, as routes may come later, and its packets
	 * go nowhere until they do.
	 */
	if (ask_route(nd, sgid, dgid, &r) == 0 && r.metric >= 1 && r.metric <= 255)
		return (uint8_t)r.metric;
	if (ibvd_gid_is_v4(dgid))
		v = read_hop_limit("/proc/sys/net/ipv4/ip_default_ttl");
	else
		v = default_hop_limit6(nd, r.oif);
	return v ? (uint8_t)v : HOP_LIMIT_FALLBACK;
}

int ibvd_route_next_hop(const struct ibvd_netdev *nd, const uint8_t sgid[16],
			const uint8_t dgid[16], uint8_t hop[16], int *oif)
{
	struct route_answer r = { .metric = 0 };
	int ret = ask_route(nd, sgid, dgid, &r);

	if (ret < 0)
		return ret;
	if (r.oif <= 0)
		return -ENODEV;
	memcpy(hop, r.has_gateway ? r.gateway : dgid, 16);
	*oif = r.oif;
	return 0;
}
