/*
 * The rtnetlink watcher (netdev_watch.h).  Messages only say which
 * devices to look at again; what changed comes from reading the interface
 * whole (netdev.c), so a lost or reordered message cannot leave a device
 * wrong, and ENOBUFS (the kernel dropped messages) just means "look at
 * all of them".
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include <event2/event.h>
#include <infiniband/verbs.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include "core/device.h"
#include "core/host_addrs.h"
#include "core/objects.h"
#include "core/roce.h"
#include "engine/engine.h"
#include "engine/transport.h"
#include "log.h"
#include "netdev.h"
#include "netdev_watch.h"
#include "server/daemon.h"
#include "verbs/async.h"

/* A burst of address changes fits; past it the kernel says ENOBUFS. */
#define WATCH_RCVBUF		(1 << 20)
/* Datagrams read per wake-up, so that a flood cannot starve clients. */
#define WATCH_MAX_READS		64
/* The host's addresses could not be read: try again, 200 ms doubling to 30 s. */
#define ADDRS_RETRY_MIN_MS	200u
#define ADDRS_RETRY_MAX_MS	30000u

struct ibvd_netdev_watch {
	struct ibvd_daemon *d;
	int fd;
	struct event *ev;
	struct event *addrs_retry;	/* timer: read the addresses again */
	unsigned int addrs_retry_ms;	/* its period; 0: the last read worked */
	uint8_t buf[32768];
};

/* Devices to look at again, gathered over one wake-up. */
struct todo {
	struct ibvd_device *dev[IBVD_MAX_DEVICES];
	unsigned int n;
	bool all;
	bool addrs;		/* some interface's addresses changed */
};

/* ---- one device ------------------------------------------------------------- */

static void log_changes(const struct ibvd_device *dev, int old_ifindex,
			unsigned int changed)
{
	const struct ibvd_netdev *nd = &dev->roce.netdev;

	if (old_ifindex && !nd->ifindex)
		log_notice("device %s: interface %s is gone; waiting for one of that name",
			   dev->name, nd->ifname);
	else if (!old_ifindex && nd->ifindex)
		log_notice("device %s: interface %s is here (index %d)",
			   dev->name, nd->ifname, nd->ifindex);
	if (changed & IBVD_ROCE_PORT_DOWN)
		log_notice("device %s: port 1 DOWN (%s %s)", dev->name, nd->ifname,
			   !nd->ifindex ? "is gone" : nd->admin_up ? "has no carrier" :
			   "is down");
	if (changed & IBVD_ROCE_PORT_UP)
		log_notice("device %s: port 1 ACTIVE (%s is up)", dev->name, nd->ifname);
	if (changed & IBVD_ROCE_GIDS_CHANGED)
		log_info("device %s: GID table changed", dev->name);
	if (changed & IBVD_ROCE_GIDS_FULL)
		log_warn("device %s: %s has more addresses than the GID table's %d slots; some are left out",
			 dev->name, nd->ifname, IBVD_ROCE_GID_TBL_LEN);
}

/* The order rxe's contexts see: the port goes, the table changes, it comes. */
static void send_events(struct ibvd_device *dev, unsigned int changed)
{
	if (changed & IBVD_ROCE_PORT_DOWN) {
		/* rxe's link_downed counts the same moments */
		__atomic_fetch_add(&dev->ports[0].link_downed, 1, __ATOMIC_RELAXED);
		ibvd_async_port_event(dev, 1, IBV_EVENT_PORT_ERR);
	}
	if (changed & IBVD_ROCE_GIDS_CHANGED)
		ibvd_async_port_event(dev, 1, IBV_EVENT_GID_CHANGE);
	if (changed & IBVD_ROCE_PORT_UP)
		ibvd_async_port_event(dev, 1, IBV_EVENT_PORT_ACTIVE);
}

/* Libraries' copies of dev's GID table are stale (query.c there). */
static void gids_changed(struct ibvd_device *dev)
{
	struct ibvd_context *ctx;

	TAILQ_FOREACH(ctx, &dev->contexts, dev_link)
		ibvd_engine_ctx_gids_changed(ctx);
}

/* Did the interface come (back) under an index the sockets do not know? */
static bool moved(int old_ifindex, int ifindex)
{
	return ifindex && ifindex != old_ifindex;
}

/* The transport's sockets follow the interface to its new index. */
static void rebind(struct ibvd_device *dev)
{
	int ret;

	if (!dev->transport->dev_rebind)
		return;
	ret = dev->transport->dev_rebind(dev);
	dev->roce.rebind_pending = ret < 0;
	if (ret < 0)
		log_err("device %s: cannot bind to %s again (index %d): %s; tried again at the interface's next change",
			dev->name, dev->roce.netdev.ifname,
			dev->roce.netdev.ifindex, strerror(-ret));
}

static void refresh(struct ibvd_device *dev)
{
	int old_ifindex = dev->roce.netdev.ifindex;
	struct ibvd_netdev_state st;
	unsigned int changed;
	int ret;

	ret = ibvd_netdev_read(dev->roce.netdev.ifname, &st);
	if (ret < 0 && ret != -ENODEV) {
		/* keep what we know; the next message tries again */
		log_warn("device %s: cannot read interface %s: %s", dev->name,
			 dev->roce.netdev.ifname, strerror(-ret));
		goto out;
	}
	/* engine threads and transports read these under the lock */
	ibvd_objects_write_lock();
	changed = ibvd_roce_update(&dev->roce, &st.link, st.addrs, st.naddrs);
	ibvd_objects_write_unlock();
	/* every message: an interface made again changes no GID, its index */
	gids_changed(dev);
	log_changes(dev, old_ifindex, changed);
	if (moved(old_ifindex, dev->roce.netdev.ifindex) ||
	    (dev->roce.rebind_pending && dev->roce.netdev.ifindex))
		rebind(dev);
	send_events(dev, changed);
out:
	ibvd_netdev_state_free(&st);
}

/* ---- which devices a message is about ----------------------------------------- */

static void add_todo(struct todo *t, struct ibvd_device *dev)
{
	unsigned int i;

	for (i = 0; i < t->n; i++)
		if (t->dev[i] == dev)
			return;
	if (t->n < IBVD_MAX_DEVICES)
		t->dev[t->n++] = dev;
}

/* The IFLA_IFNAME of a link message, or NULL. */
static const char *link_name(const struct nlmsghdr *h)
{
	const struct ifinfomsg *ifi = NLMSG_DATA(h);
	const struct rtattr *rta;
	int len = (int)IFLA_PAYLOAD(h);

	for (rta = IFLA_RTA(ifi); RTA_OK(rta, len); rta = RTA_NEXT(rta, len))
		if (rta->rta_type == IFLA_IFNAME && RTA_PAYLOAD(rta) > 0 &&
		    memchr(RTA_DATA(rta), '\0', RTA_PAYLOAD(rta)))
			return RTA_DATA(rta);
	return NULL;
}

/* Which interface index and name h is about (name NULL for addresses). */
static bool message_subject(const struct nlmsghdr *h, int *ifindex,
			    const char **name)
{
	*name = NULL;
	switch (h->nlmsg_type) {
	case RTM_NEWLINK:
	case RTM_DELLINK:
		if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct ifinfomsg)))
			return false;
		*ifindex = ((const struct ifinfomsg *)NLMSG_DATA(h))->ifi_index;
		*name = link_name(h);
		return true;
	case RTM_NEWADDR:
	case RTM_DELADDR:
		if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct ifaddrmsg)))
			return false;
		*ifindex = (int)((const struct ifaddrmsg *)NLMSG_DATA(h))->ifa_index;
		return true;
	default:
		return false;
	}
}

/* h says a link left this namespace (not a bridge port's news). */
static bool link_gone(const struct nlmsghdr *h)
{
	const struct ifinfomsg *ifi = NLMSG_DATA(h);

	return h->nlmsg_type == RTM_DELLINK && ifi->ifi_family == AF_UNSPEC;
}

static void note_message(struct ibvd_netdev_watch *w, const struct nlmsghdr *h,
			 struct todo *t)
{
	struct ibvd_device *dev;
	const char *name;
	int ifindex;

	if (!message_subject(h, &ifindex, &name))
		return;
	/* any interface's: the host's addresses are not only our devices' */
	t->addrs |= h->nlmsg_type == RTM_NEWADDR || h->nlmsg_type == RTM_DELADDR;
	TAILQ_FOREACH(dev, &w->d->devices, link) {
		const struct ibvd_netdev *nd = &dev->roce.netdev;

		if (dev->kind != IBVD_DEV_ROCE)
			continue;
		/* its interface, or a new (or renamed) one of its name */
		if ((nd->ifindex && nd->ifindex == ifindex) ||
		    (name && strcmp(name, nd->ifname) == 0))
			add_todo(t, dev);
		/*
		 * Its interface left: one back under the same index (moved
		 * to another namespace and back before we looked) lost the
		 * sockets' groups all the same, so they are made again.
		 */
		if (nd->ifindex && nd->ifindex == ifindex && link_gone(h))
			dev->roce.rebind_pending = true;
	}
}

/* One datagram: 0, or -ENOBUFS/-errno from the socket, -EAGAIN when drained. */
static int read_one(struct ibvd_netdev_watch *w, struct todo *t)
{
	const struct nlmsghdr *h;
	ssize_t n;
	unsigned int len;

	n = recv(w->fd, w->buf, sizeof(w->buf), MSG_DONTWAIT | MSG_TRUNC);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	if ((size_t)n > sizeof(w->buf)) {
		/* a link with very many VFs: what we missed may be ours */
		t->all = true;
		n = sizeof(w->buf);
	}
	len = (unsigned int)n;
	for (h = (const void *)w->buf; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len))
		note_message(w, h, t);
	return 0;
}

/*
 * The host's addresses could not be read (the daemon out of fds, say):
 * what was read before stays, and they are read again, less and less
 * often, with one warning, not one a try.
 */
static void addrs_unread(struct ibvd_netdev_watch *w, int err)
{
	struct timeval tv;

	if (!w->addrs_retry_ms) {
		log_warn("cannot read the host's addresses: %s; the GID tables and "
			 "the RoCE devices' own-address filter keep what they had "
			 "until a read works", strerror(-err));
		w->addrs_retry_ms = ADDRS_RETRY_MIN_MS;
	} else if (w->addrs_retry_ms < ADDRS_RETRY_MAX_MS) {
		w->addrs_retry_ms *= 2;
		if (w->addrs_retry_ms > ADDRS_RETRY_MAX_MS)
			w->addrs_retry_ms = ADDRS_RETRY_MAX_MS;
	}
	tv.tv_sec = w->addrs_retry_ms / 1000;
	tv.tv_usec = (w->addrs_retry_ms % 1000) * 1000;
	evtimer_add(w->addrs_retry, &tv);
}

/*
 * Any interface's address changed: the software devices' GIDs show them,
 * and RoCE's filter of the host's own addresses.  Libraries keep their
 * tables until told (gids_changed), so what could not be read is read
 * again (addrs_unread), not only at the next change.
 */
static void refresh_host_addrs(struct ibvd_netdev_watch *w)
{
	int filter = ibvd_host_addrs_refresh();
	int gids = ibvd_port_gids_refresh();
	struct ibvd_device *dev;

	if (filter < 0 || gids < 0) {
		addrs_unread(w, filter < 0 ? filter : gids);
	} else if (w->addrs_retry_ms) {
		log_notice("the host's addresses can be read again");
		w->addrs_retry_ms = 0;
		evtimer_del(w->addrs_retry);
	}
	if (gids <= 0)
		return;
	TAILQ_FOREACH(dev, &w->d->devices, link)
		if (dev->kind != IBVD_DEV_ROCE)
			gids_changed(dev);
}

static void addrs_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	refresh_host_addrs(arg);
}

static void refresh_all(struct ibvd_netdev_watch *w)
{
	struct ibvd_device *dev;

	refresh_host_addrs(w);
	TAILQ_FOREACH(dev, &w->d->devices, link)
		if (dev->kind == IBVD_DEV_ROCE)
			refresh(dev);
}

static void readable_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ibvd_netdev_watch *w = arg;
	struct todo t = { .n = 0 };
	unsigned int i;
	int ret = 0;

	(void)fd;
	(void)what;
	for (i = 0; i < WATCH_MAX_READS && ret != -EAGAIN; i++) {
		ret = read_one(w, &t);
		if (ret == -ENOBUFS) {
			log_info("rtnetlink messages were lost; reading every RoCE device's interface again");
			t.all = true;
		} else if (ret < 0 && ret != -EAGAIN && ret != -EINTR) {
			log_warn("rtnetlink: %s", strerror(-ret));
			break;
		}
	}
	if (t.all) {
		refresh_all(w);
		return;
	}
	if (t.addrs)
		refresh_host_addrs(w);
	for (i = 0; i < t.n; i++)
		refresh(t.dev[i]);
}

/* ---- start and stop ----------------------------------------------------------- */

static int open_socket(int *ret_fd)
{
	struct sockaddr_nl sa = {
		.nl_family = AF_NETLINK,
		.nl_groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR,
	};
	int fd, size = WATCH_RCVBUF, ret;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	/* best effort: past it, ENOBUFS makes us read everything again */
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	*ret_fd = fd;
	return 0;
}

int ibvd_netdev_watch_start(struct ibvd_daemon *d, struct ibvd_netdev_watch **ret)
{
	struct ibvd_netdev_watch *w;
	int rc;

	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->d = d;
	w->fd = -1;
	rc = open_socket(&w->fd);
	if (rc < 0)
		goto fail;
	w->ev = event_new(d->base, w->fd, EV_READ | EV_PERSIST, readable_cb, w);
	w->addrs_retry = evtimer_new(d->base, addrs_retry_cb, w);
	if (!w->ev || !w->addrs_retry || event_add(w->ev, NULL) < 0) {
		rc = -ENOMEM;
		goto fail;
	}
	/* what changed between building the devices and subscribing */
	refresh_all(w);
	*ret = w;
	return 0;
fail:
	ibvd_netdev_watch_free(w);
	return rc;
}

void ibvd_netdev_watch_free(struct ibvd_netdev_watch *w)
{
	if (!w)
		return;
	if (w->ev)
		event_free(w->ev);
	if (w->addrs_retry)
		event_free(w->addrs_retry);
	if (w->fd >= 0)
		close(w->fd);
	ibvd_host_addrs_free();
	free(w);
}
