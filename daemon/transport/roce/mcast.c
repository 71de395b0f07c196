/*
 * Multicast groups on the wire, as rxe's: a group's MGID is an IP
 * multicast address (IPv4 224/4 as ::ffff:a.b.c.d, IPv6 ff00::/8).  A UD
 * datagram to QPN 0xFFFFFF with that destination GID goes to the address
 * (roce.c), and what arrives there reaches every QP of the device attached
 * to the group (rx.c).
 *
 * The interface takes a group's packets only while the host is a member
 * (IGMP, MLD).  The first of the device's QPs to attach makes it one, with
 * a membership held by an ordinary UDP socket bound to no port, which
 * receives nothing itself: the raw receive socket sees the group's
 * datagrams as it sees every other one for this host.  The last QP to
 * detach ends it.  The kernel bounds the IPv4 memberships of one socket
 * (net.ipv4.igmp_max_memberships, 20 by default), so a socket that is full
 * leads to another.
 *
 * Control thread only.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "core/device.h"
#include "internal.h"
#include "log.h"

/* A socket that holds memberships, and how many. */
struct roce_joinsock {
	struct roce_joinsock *next;
	int family;
	int fd;
	unsigned int groups;
};

/* A group the device's interface is a member of, for `users` QPs. */
struct roce_mgroup {
	struct roce_mgroup *next;
	uint8_t mgid[16];
	unsigned int users;
	struct roce_joinsock *sock;
	int ifindex;			/* the interface it was joined on */
};

static struct roce_mgroup *mgroup_find(const struct roce_dev *rd,
				       const uint8_t mgid[16])
{
	struct roce_mgroup *g;

	for (g = rd->mgroups; g; g = g->next)
		if (!memcmp(g->mgid, mgid, 16))
			return g;
	return NULL;
}

/*
 * Add (IP_ADD_MEMBERSHIP) or drop fd's membership of mgid on interface
 * ifindex (never 0, which would let the kernel pick one by route).
 */
static int membership(int fd, int ifindex, const uint8_t mgid[16], bool add)
{
	struct ipv6_mreq mreq6 = { .ipv6mr_interface = (unsigned int)ifindex };
	struct ip_mreqn mreq = { .imr_ifindex = ifindex };
	uint8_t addr[16];
	int ret;

	roce_gid_to_ip(mgid, addr);
	if (roce_gid_family(mgid) == AF_INET) {
		memcpy(&mreq.imr_multiaddr, addr, 4);
		ret = setsockopt(fd, IPPROTO_IP, add ? IP_ADD_MEMBERSHIP :
						      IP_DROP_MEMBERSHIP,
				 &mreq, sizeof(mreq));
	} else {
		memcpy(&mreq6.ipv6mr_multiaddr, addr, 16);
		ret = setsockopt(fd, IPPROTO_IPV6, add ? IPV6_ADD_MEMBERSHIP :
							IPV6_DROP_MEMBERSHIP,
				 &mreq6, sizeof(mreq6));
	}
	return ret < 0 ? -errno : 0;
}

static int joinsock_open(struct roce_dev *rd, int family,
			 struct roce_joinsock **ret)
{
	struct roce_joinsock *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP);
	if (s->fd < 0) {
		free(s);
		return -errno;
	}
	s->family = family;
	s->next = rd->joinsocks;
	rd->joinsocks = s;
	*ret = s;
	return 0;
}

static void joinsock_unlink(struct roce_dev *rd, struct roce_joinsock *s)
{
	struct roce_joinsock **p;

	for (p = &rd->joinsocks; *p != s; p = &(*p)->next)
		;
	*p = s->next;
	close(s->fd);
	free(s);
}

/*
 * Is a membership refused because its socket holds too many: IPv4's
 * count (igmp_max_memberships, ENOBUFS), or either family's memory for
 * them (optmem_max: ENOBUFS for IPv4, ENOMEM for IPv6)?
 */
static bool socket_full(int err)
{
	return err == -ENOBUFS || err == -ENOMEM;
}

/*
 * Make a socket of rd a member of mgid on interface ifindex: one with
 * room, or a new one.
 */
static int join_somewhere(struct roce_dev *rd, const uint8_t mgid[16],
			  int ifindex, struct roce_joinsock **ret)
{
	int family = roce_gid_family(mgid);
	struct roce_joinsock *s;
	int err;

	for (s = rd->joinsocks; s; s = s->next) {
		if (s->family != family)
			continue;
		err = membership(s->fd, ifindex, mgid, true);
		if (err == 0)
			goto joined;
		if (!socket_full(err))
			return err;
	}
	err = joinsock_open(rd, family, &s);
	if (err < 0)
		return err;
	err = membership(s->fd, ifindex, mgid, true);
	if (err < 0) {
		joinsock_unlink(rd, s);
		return err;
	}
joined:
	s->groups++;
	*ret = s;
	return 0;
}

int roce_mcast_join(struct ibvd_device *dev, const uint8_t mgid[16])
{
	struct roce_dev *rd = dev->transport_priv;
	int ifindex = dev->roce.netdev.ifindex;
	struct roce_mgroup *g;
	int ret;

	/* no interface (it went away): nothing to be a member on */
	if (!rd || ifindex <= 0)
		return -ENODEV;
	if (!roce_gid_is_multicast(mgid))
		return -EINVAL;
	if (roce_gid_family(mgid) == AF_INET6 && rd->rx6_fd < 0)
		return -EAFNOSUPPORT;
	g = mgroup_find(rd, mgid);
	if (g) {
		g->users++;
		return 0;
	}
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	ret = join_somewhere(rd, mgid, ifindex, &g->sock);
	if (ret < 0) {
		free(g);
		return ret;
	}
	g->ifindex = ifindex;
	memcpy(g->mgid, mgid, 16);
	g->users = 1;
	g->next = rd->mgroups;
	rd->mgroups = g;
	return 0;
}

void roce_mcast_leave(struct ibvd_device *dev, const uint8_t mgid[16])
{
	struct roce_dev *rd = dev->transport_priv;
	struct roce_mgroup **p, *g;

	if (!rd)
		return;
	for (p = &rd->mgroups; *p && memcmp((*p)->mgid, mgid, 16); p = &(*p)->next)
		;
	g = *p;
	if (!g || --g->users)
		return;
	*p = g->next;
	/*
	 * On the interface it was joined on: gone since, the kernel dropped
	 * the membership with it, and this fails harmlessly.
	 */
	membership(g->sock->fd, g->ifindex, mgid, false);
	if (--g->sock->groups == 0)
		joinsock_unlink(rd, g->sock);
	free(g);
}

void roce_mcast_rebind(struct roce_dev *rd, int ifindex)
{
	struct roce_mgroup *g;
	int ret;

	for (g = rd->mgroups; g; g = g->next) {
		/* the old interface's entry, if the kernel kept it */
		membership(g->sock->fd, g->ifindex, g->mgid, false);
		ret = membership(g->sock->fd, ifindex, g->mgid, true);
		if (ret < 0)
			log_warn("%s: cannot join a multicast group again on the new interface: %s",
				 rd->ifname, strerror(-ret));
		g->ifindex = ifindex;
	}
}

void roce_mcast_close(struct roce_dev *rd)
{
	struct roce_mgroup *g;

	while ((g = rd->mgroups)) {
		rd->mgroups = g->next;
		free(g);
	}
	while (rd->joinsocks)
		joinsock_unlink(rd, rd->joinsocks);
}
