/*
 * Devices as the object model knows them: ports, LIDs, GUIDs and GID
 * tables.  Which devices exist is decided at startup and on reload
 * (devices.c, from the config); this file only describes them.  A RoCE
 * device's own rules are in roce.c.
 */
#include <config.h>

#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <netpacket/packet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "util.h"

char *ibvd_guid_str(uint64_t guid, char *buf, size_t len)
{
	snprintf(buf, len, "%04x:%04x:%04x:%04x",
		 (unsigned int)(guid >> 48) & 0xffff,
		 (unsigned int)(guid >> 32) & 0xffff,
		 (unsigned int)(guid >> 16) & 0xffff,
		 (unsigned int)guid & 0xffff);
	return buf;
}


void ibvd_device_free(struct ibvd_device *dev)
{
	if (!dev)
		return;
	free(dev->roce.gids);
	free(dev->roce.gid_holds);
	free(dev);
}

struct ibvd_device *ibvd_device_find(const struct ibvd_device_list *devs,
				     const char *name)
{
	struct ibvd_device *dev;

	TAILQ_FOREACH(dev, devs, link)
		if (strcmp(dev->name, name) == 0)
			return dev;
	return NULL;
}

const struct ibvd_port *ibvd_device_port(const struct ibvd_device *dev,
					 uint32_t port_num)
{
	if (port_num < 1 || port_num > dev->nports)
		return NULL;
	return &dev->ports[port_num - 1];
}


/* ---- GID table -------------------------------------------------------- */

static int gid_present(const struct ibvd_gid *gids, unsigned int n,
		       const uint8_t raw[16])
{
	unsigned int i;

	for (i = 0; i < n; i++)
		if (memcmp(gids[i].raw, raw, 16) == 0)
			return 1;
	return 0;
}

/*
 * The index of the interface an address belongs to, from the AF_PACKET
 * entries getifaddrs() lists for every link (if_nametoindex() would cost a
 * socket and an ioctl per address).  An IPv4 address with a label
 * ("eth0:1") belongs to the interface named before the colon.
 */
static uint32_t ifaddr_index(const struct ifaddrs *ifa_list, const char *name)
{
	size_t len = strcspn(name, ":");
	const struct ifaddrs *ifa;

	for (ifa = ifa_list; ifa; ifa = ifa->ifa_next)
		if (ifa->ifa_addr && ifa->ifa_addr->sa_family == AF_PACKET &&
		    strncmp(ifa->ifa_name, name, len) == 0 &&
		    ifa->ifa_name[len] == '\0')
			return (uint32_t)((const struct sockaddr_ll *)
					  (const void *)ifa->ifa_addr)->sll_ifindex;
	return 0;
}

/* Append the addresses of one family; returns the new count. */
static unsigned int add_ip_gids(const struct ifaddrs *ifa_list, int family,
				struct ibvd_gid *gids, unsigned int n,
				unsigned int max)
{
	const struct ifaddrs *ifa;
	uint8_t raw[16];

	for (ifa = ifa_list; ifa && n < max; ifa = ifa->ifa_next) {
		if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != family)
			continue;
		if (family == AF_INET) {
			const struct sockaddr_in *sin = (const void *)ifa->ifa_addr;

			/* IPv4-mapped IPv6: ::ffff:a.b.c.d */
			memset(raw, 0, 10);
			raw[10] = raw[11] = 0xff;
			memcpy(raw + 12, &sin->sin_addr, 4);
		} else {
			const struct sockaddr_in6 *sin6 = (const void *)ifa->ifa_addr;

			memcpy(raw, &sin6->sin6_addr, 16);
		}
		if (gid_present(gids, n, raw))
			continue;
		memcpy(gids[n].raw, raw, 16);
		gids[n].ifindex = ifaddr_index(ifa_list, ifa->ifa_name);
		n++;
	}
	return n;
}

/*
 * The GIDs made of local addresses, the same for every port.  The control
 * thread reads them again when rtnetlink says an address changed
 * (netdev_watch.c); every reader takes this copy, so no query and no
 * engine thread (a UD datagram's GRH) waits for a netlink dump.  The dump
 * lists them in the kernel's order, so their indexes stay put while the
 * addresses do.
 */
static struct {
	pthread_mutex_t lock;
	struct ibvd_gid gids[IBVD_GID_TBL_LEN - 1];	/* after GID[0] */
	unsigned int n;
} ip_gids = { .lock = PTHREAD_MUTEX_INITIALIZER };

int ibvd_port_gids_refresh(void)
{
	struct ibvd_gid gids[IBVD_GID_TBL_LEN - 1];
	struct ifaddrs *ifa_list;
	unsigned int n;
	bool changed;

	if (getifaddrs(&ifa_list) < 0)
		return -errno;
	memset(gids, 0, sizeof(gids));
	n = add_ip_gids(ifa_list, AF_INET, gids, 0, ARRAY_SIZE(gids));
	n = add_ip_gids(ifa_list, AF_INET6, gids, n, ARRAY_SIZE(gids));
	freeifaddrs(ifa_list);
	pthread_mutex_lock(&ip_gids.lock);
	changed = n != ip_gids.n || memcmp(gids, ip_gids.gids, sizeof(gids)) != 0;
	if (changed) {
		memcpy(ip_gids.gids, gids, sizeof(gids));
		ip_gids.n = n;
	}
	pthread_mutex_unlock(&ip_gids.lock);
	return changed;
}

void ibvd_port_gid0(const struct ibvd_port *port, uint8_t gid[16])
{
	uint64_t prefix = IBVD_SUBNET_PREFIX, guid = port->guid;
	int i;

	for (i = 7; i >= 0; i--) {
		gid[i] = (uint8_t)prefix;
		gid[8 + i] = (uint8_t)guid;
		prefix >>= 8;
		guid >>= 8;
	}
}

unsigned int ibvd_port_gids(const struct ibvd_port *port,
			    struct ibvd_gid gids[IBVD_GID_TBL_LEN])
{
	unsigned int i, n;

	memset(gids, 0, sizeof(*gids) * IBVD_GID_TBL_LEN);
	ibvd_port_gid0(port, gids[0].raw);
	pthread_mutex_lock(&ip_gids.lock);
	for (i = 0, n = 1; i < ip_gids.n; i++)
		if (memcmp(ip_gids.gids[i].raw, gids[0].raw, 16) != 0)
			gids[n++] = ip_gids.gids[i];
	pthread_mutex_unlock(&ip_gids.lock);
	return n;
}


/* ---- either kind ------------------------------------------------------- */

bool ibvd_gid_empty(const struct ibvd_gid *gid)
{
	static const uint8_t zero[16];

	return memcmp(gid->raw, zero, sizeof(zero)) == 0;
}

unsigned int ibvd_device_gid_tbl_len(const struct ibvd_device *dev)
{
	return dev->kind == IBVD_DEV_ROCE ? IBVD_ROCE_GID_TBL_LEN : IBVD_GID_TBL_LEN;
}

int ibvd_device_gid(const struct ibvd_device *dev, const struct ibvd_port *port,
		    unsigned int index, struct ibvd_gid *gid)
{
	struct ibvd_gid gids[IBVD_GID_TBL_LEN];

	if (dev->kind == IBVD_DEV_ROCE) {
		if (index >= IBVD_ROCE_GID_TBL_LEN ||
		    ibvd_gid_empty(&dev->roce.gids[index]))
			return -ENOENT;
		*gid = dev->roce.gids[index];
		return 0;
	}
	if (index == 0) {
		/* no need to look at the addresses */
		memset(gid, 0, sizeof(*gid));
		ibvd_port_gid0(port, gid->raw);
		return 0;
	}
	if (index >= ibvd_port_gids(port, gids))
		return -ENOENT;
	*gid = gids[index];
	return 0;
}

unsigned int ibvd_device_gids(const struct ibvd_device *dev,
			      const struct ibvd_port *port,
			      struct ibvd_gid *gids)
{
	unsigned int i, n = 0;

	if (dev->kind != IBVD_DEV_ROCE)
		return ibvd_port_gids(port, gids);
	for (i = 0; i < IBVD_ROCE_GID_TBL_LEN; i++) {
		gids[i] = dev->roce.gids[i];
		if (!ibvd_gid_empty(&gids[i]))
			n = i + 1;
	}
	return n;
}
