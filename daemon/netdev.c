/*
 * Reading a network interface through rtnetlink (netdev.h): its link
 * (RTM_GETLINK by name) and its addresses (an RTM_GETADDR dump, kept to
 * that interface), in one conversation (core/rtnl.h).
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <net/if.h>
#include <sys/socket.h>

#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>

#include "core/rtnl.h"
#include "netdev.h"

/* <linux/if.h>, which clashes with <net/if.h>: the carrier is on. */
#ifndef IFF_LOWER_UP
#define IFF_LOWER_UP	0x10000
#endif

/* ---- the link ----------------------------------------------------------- */

static int parse_link(const struct nlmsghdr *h, void *arg)
{
	struct ibvd_netdev *nd = arg;
	const struct ifinfomsg *ifi = NLMSG_DATA(h);
	const struct rtattr *rta;
	uint32_t mtu;
	int len;

	if (h->nlmsg_type != RTM_NEWLINK ||
	    h->nlmsg_len < NLMSG_LENGTH(sizeof(*ifi)))
		return -EPROTO;
	nd->ifindex = ifi->ifi_index;
	nd->admin_up = ifi->ifi_flags & IFF_UP;
	nd->loopback = ifi->ifi_flags & IFF_LOOPBACK;
	nd->noarp = ifi->ifi_flags & IFF_NOARP;
	/* rxe's test: running and the carrier on */
	nd->up = nd->admin_up && (ifi->ifi_flags & IFF_LOWER_UP);
	len = (int)IFLA_PAYLOAD(h);
	for (rta = IFLA_RTA(ifi); RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
		if (rta->rta_type == IFLA_MTU && RTA_PAYLOAD(rta) >= sizeof(mtu)) {
			memcpy(&mtu, RTA_DATA(rta), sizeof(mtu));
			nd->mtu = mtu;
		} else if (rta->rta_type == IFLA_ADDRESS &&
			   RTA_PAYLOAD(rta) == sizeof(nd->mac)) {
			memcpy(nd->mac, RTA_DATA(rta), sizeof(nd->mac));
		}
	}
	return 0;
}

static int read_link(struct ibvd_rtnl *nl, struct ibvd_netdev *nd)
{
	struct {
		struct nlmsghdr h;
		struct ifinfomsg ifi;
		char attrs[RTA_SPACE(IFNAMSIZ)];
	} req;
	int ret;

	memset(&req, 0, sizeof(req));
	req.h.nlmsg_len = NLMSG_LENGTH(sizeof(req.ifi));
	req.h.nlmsg_type = RTM_GETLINK;
	req.h.nlmsg_flags = NLM_F_REQUEST;
	req.ifi.ifi_family = AF_UNSPEC;
	ret = ibvd_rtnl_put(&req.h, sizeof(req), IFLA_IFNAME, nd->ifname,
			    strlen(nd->ifname) + 1);
	if (ret == 0)
		ret = ibvd_rtnl_send(nl, &req.h);
	return ret < 0 ? ret : ibvd_rtnl_recv(nl, false, parse_link, nd);
}

/* ---- its addresses -------------------------------------------------------- */

static int add_addr(struct ibvd_netdev_state *st, size_t *cap,
		    const struct ibvd_cidr *c)
{
	struct ibvd_cidr *grown;

	if (st->naddrs == *cap) {
		*cap = *cap ? *cap * 2 : 8;
		grown = realloc(st->addrs, *cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		st->addrs = grown;
	}
	st->addrs[st->naddrs++] = *c;
	return 0;
}

struct addr_read {
	struct ibvd_netdev_state *st;
	size_t cap;
};

/* An address in GID form: IPv4 as ::ffff:a.b.c.d/96+n. */
static bool addr_to_cidr(const struct ifaddrmsg *ifa, const void *raw,
			 size_t len, struct ibvd_cidr *c)
{
	memset(c, 0, sizeof(*c));
	if (ifa->ifa_family == AF_INET && len == 4) {
		c->addr[10] = c->addr[11] = 0xff;
		memcpy(c->addr + 12, raw, 4);
		c->prefix_len = (uint8_t)(96 + ifa->ifa_prefixlen);
		return ifa->ifa_prefixlen <= 32;
	}
	if (ifa->ifa_family == AF_INET6 && len == 16) {
		memcpy(c->addr, raw, 16);
		c->prefix_len = ifa->ifa_prefixlen;
		return ifa->ifa_prefixlen <= 128;
	}
	return false;
}

static int parse_addr(const struct nlmsghdr *h, void *arg)
{
	struct addr_read *r = arg;
	const struct ifaddrmsg *ifa = NLMSG_DATA(h);
	const struct rtattr *rta, *local = NULL, *address = NULL;
	struct ibvd_cidr c;
	int len;

	if (h->nlmsg_type != RTM_NEWADDR ||
	    h->nlmsg_len < NLMSG_LENGTH(sizeof(*ifa)) ||
	    (int)ifa->ifa_index != r->st->link.ifindex)
		return 0;
	len = (int)IFA_PAYLOAD(h);
	for (rta = IFA_RTA(ifa); RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
		if (rta->rta_type == IFA_LOCAL)
			local = rta;
		else if (rta->rta_type == IFA_ADDRESS)
			address = rta;
	}
	/* IFA_ADDRESS is the far end's on a point-to-point link */
	if (local)
		address = local;
	if (!address || !addr_to_cidr(ifa, RTA_DATA(address),
				      RTA_PAYLOAD(address), &c))
		return 0;
	return add_addr(r->st, &r->cap, &c);
}

static int read_addrs(struct ibvd_rtnl *nl, struct ibvd_netdev_state *st)
{
	struct {
		struct nlmsghdr h;
		struct ifaddrmsg ifa;
	} req;
	struct addr_read r = { .st = st };
	int ret;

	memset(&req, 0, sizeof(req));
	req.h.nlmsg_len = NLMSG_LENGTH(sizeof(req.ifa));
	req.h.nlmsg_type = RTM_GETADDR;
	req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	/* every family, IPv4 first: the order rxe discovers them in */
	req.ifa.ifa_family = AF_UNSPEC;
	ret = ibvd_rtnl_send(nl, &req.h);
	return ret < 0 ? ret : ibvd_rtnl_recv(nl, true, parse_addr, &r);
}

/* ---- the rest --------------------------------------------------------------- */

/* Mb/s from sysfs, 0 when unknown (no carrier, virtual links, no file). */
static unsigned int read_speed(const char *ifname)
{
	char path[64];
	int mbps = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/net/%s/speed", ifname);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fscanf(f, "%d", &mbps) != 1 || mbps < 0)
		mbps = 0;
	fclose(f);
	return (unsigned int)mbps;
}

void ibvd_netdev_state_free(struct ibvd_netdev_state *st)
{
	free(st->addrs);
	st->addrs = NULL;
	st->naddrs = 0;
}

int ibvd_netdev_read(const char *ifname, struct ibvd_netdev_state *st)
{
	struct ibvd_rtnl nl;
	int ret;

	memset(st, 0, sizeof(*st));
	snprintf(st->link.ifname, sizeof(st->link.ifname), "%s", ifname);
	ret = ibvd_rtnl_open(&nl);
	if (ret < 0)
		return ret;
	ret = read_link(&nl, &st->link);
	if (ret == 0)
		ret = read_addrs(&nl, st);
	ibvd_rtnl_close(&nl);
	if (ret < 0) {
		ibvd_netdev_state_free(st);
		memset(&st->link, 0, sizeof(st->link));
		snprintf(st->link.ifname, sizeof(st->link.ifname), "%s", ifname);
		return ret;
	}
	st->link.speed_mbps = read_speed(ifname);
	return 0;
}
