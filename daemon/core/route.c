/*
 * A route's hop limit (route.h): one RTM_GETROUTE, whose answer carries
 * the route's metrics and its interface; the default from procfs when
 * the route sets none.
 */
#include <config.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
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
};

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
	}
	return 0;
}

/* Ask the kernel for the route out of nd to dgid: 0 or a negative errno. */
static int ask_route(const struct ibvd_netdev *nd, const uint8_t dgid[16],
		     struct route_answer *r)
{
	struct {
		struct nlmsghdr h;
		struct rtmsg rtm;
		char attrs[RTA_SPACE(16) + RTA_SPACE(sizeof(int))];
	} req;
	bool v4 = ibvd_gid_is_v4(dgid);
	struct ibvd_rtnl nl;
	int ret;

	memset(&req, 0, sizeof(req));
	req.h.nlmsg_len = NLMSG_LENGTH(sizeof(req.rtm));
	req.h.nlmsg_type = RTM_GETROUTE;
	req.h.nlmsg_flags = NLM_F_REQUEST;
	req.rtm.rtm_family = v4 ? AF_INET : AF_INET6;
	req.rtm.rtm_dst_len = v4 ? 32 : 128;
	ret = ibvd_rtnl_put(&req.h, sizeof(req), RTA_DST, v4 ? dgid + 12 : dgid,
			    v4 ? 4 : 16);
	/* out of the device's interface, as the kernel binds rxe's lookups */
	if (ret == 0 && nd->ifindex > 0)
		ret = ibvd_rtnl_put(&req.h, sizeof(req), RTA_OIF, &nd->ifindex,
				    sizeof(nd->ifindex));
	if (ret < 0)
		return ret;
	ret = ibvd_rtnl_open(&nl);
	if (ret < 0)
		return ret;
	ret = ibvd_rtnl_send(&nl, &req.h);
	if (ret == 0)
		ret = ibvd_rtnl_recv(&nl, false, parse_route, r);
	ibvd_rtnl_close(&nl);
	return ret;
}

/* A hop limit (1..255) from a sysctl file, or 0. */
static unsigned int read_hop_limit(const char *path)
{
	int v = 0;
	FILE *f = fopen(path, "re");

	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = 0;
		fclose(f);
	}
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

uint8_t ibvd_route_hop_limit(const struct ibvd_netdev *nd, const uint8_t dgid[16])
{
	struct route_answer r = { 0, 0 };
	unsigned int v;

	/* no route: the packet goes nowhere, and the default is as good */
	if (ask_route(nd, dgid, &r) == 0 && r.metric >= 1 && r.metric <= 255)
		return (uint8_t)r.metric;
	if (ibvd_gid_is_v4(dgid))
		v = read_hop_limit("/proc/sys/net/ipv4/ip_default_ttl");
	else
		v = default_hop_limit6(nd, r.oif);
	return v ? (uint8_t)v : HOP_LIMIT_FALLBACK;
}
