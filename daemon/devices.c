/*
 * The device set: built from the config at startup and reconciled with it
 * on reload, with identities (GUIDs derived from the machine, or for a
 * RoCE device from its interface's MAC) and LIDs.
 */
#include <config.h>

#include <errno.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "core/roce.h"
#include "devices.h"
#include "netdev.h"
#include "engine/transport.h"
#include "transport/transport.h"
#include "util.h"

/* ---- identity -------------------------------------------------------- */

#define FNV64_OFFSET	0xcbf29ce484222325ull
#define FNV64_PRIME	0x100000001b3ull
/* EUI-64 first octet: bit 1 = locally administered, bit 0 = group. */
#define EUI64_LOCAL	(0x02ull << 56)
#define EUI64_GROUP	(0x01ull << 56)

static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;

	while (len--) {
		h ^= *p++;
		h *= FNV64_PRIME;
	}
	return h;
}

/*
 * FNV-1a changes little in the high bits when only the last bytes differ
 * ("ibvd0", "ibvd1"); a multiply-xorshift finish spreads every input bit
 * over the whole GUID.
 */
static uint64_t mix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

uint64_t ibvd_guid_derive(const char *machine_id, const char *dev_name)
{
	/* The prefix keeps our GUIDs apart from other users of the id. */
	static const char domain[] = "ibverbsd node guid";
	uint64_t h = FNV64_OFFSET;

	h = fnv1a(h, domain, sizeof(domain));
	h = fnv1a(h, machine_id, strlen(machine_id) + 1);
	h = mix64(fnv1a(h, dev_name, strlen(dev_name)));
	return (h & ~EUI64_GROUP) | EUI64_LOCAL;
}

/* First line of path without trailing whitespace; 0 or -errno. */
static int read_first_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return -errno;
	if (!fgets(buf, (int)len, f))
		buf[0] = '\0';
	fclose(f);
	n = strlen(buf);
	while (n && isspace((unsigned char)buf[n - 1]))
		buf[--n] = '\0';
	return n ? 0 : -ENODATA;
}

/* Something that identifies this host and survives reboots. */
static void host_identity(char *buf, size_t len)
{
	if (read_first_line("/etc/machine-id", buf, len) == 0)
		return;
	if (read_first_line("/var/lib/dbus/machine-id", buf, len) == 0)
		return;
	if (gethostname(buf, len) == 0) {
		buf[len - 1] = '\0';
		return;
	}
	snprintf(buf, len, "localhost");
}


/* ---- construction from the config ------------------------------------- */

/*
 * A RoCE device's port, GID table and peers from its interface as it is
 * now (st).  Its node GUID, unless configured, is rxe's: the EUI-64 of
 * the MAC, fixed from here on (the identity must not move under clients);
 * an interface without a MAC gets a derived one like a software device.
 */
static int roce_init(struct ibvd_device *dev, const struct ibvd_config_device *cd,
		     const struct ibvd_netdev_state *st)
{
	static const uint8_t no_mac[6];

	dev->kind = IBVD_DEV_ROCE;
	dev->roce.gids = calloc(IBVD_ROCE_GID_TBL_LEN, sizeof(*dev->roce.gids));
	dev->roce.gid_holds = calloc(IBVD_ROCE_GID_TBL_LEN,
				     sizeof(*dev->roce.gid_holds));
	if (!dev->roce.gids || !dev->roce.gid_holds)
		return -ENOMEM;
	memcpy(dev->roce.peers, cd->peers, sizeof(dev->roce.peers));
	dev->roce.npeers = cd->npeers;
	/* what an interface that is gone for now leaves it (build_one) */
	snprintf(dev->roce.netdev.ifname, sizeof(dev->roce.netdev.ifname),
		 "%s", cd->netdev);
	ibvd_roce_update(&dev->roce, &st->link, st->addrs, st->naddrs);
	if (!cd->guid && memcmp(st->link.mac, no_mac, sizeof(no_mac)) != 0)
		dev->node_guid = ibvd_roce_guid(st->link.mac);
	return 0;
}

static struct ibvd_device *device_new(const struct ibvd_config_device *cd,
				      const char *host_id,
				      const struct ibvd_netdev_state *st)
{
	struct ibvd_device *dev = calloc(1, sizeof(*dev));
	unsigned int i;

	if (!dev)
		return NULL;
	snprintf(dev->name, sizeof(dev->name), "%s", cd->name);
	dev->node_guid = cd->guid ? cd->guid : ibvd_guid_derive(host_id, cd->name);
	dev->guid_auto = !cd->guid;
	if (st && roce_init(dev, cd, st) < 0) {
		ibvd_device_free(dev);
		return NULL;
	}
	dev->sys_image_guid = dev->node_guid;
	dev->nports = cd->ports;
	/* A RoCE device's QPs reach their peers on the wire. */
	dev->transport = dev->kind == IBVD_DEV_ROCE ? &ibvd_transport_roce :
						       &ibvd_transport_local;
	TAILQ_INIT(&dev->contexts);
	for (i = 0; i < dev->nports; i++) {
		struct ibvd_port *port = &dev->ports[i];

		port->num = i + 1;
		port->guid = dev->node_guid + i;
		port->config_lid = cd->lid ? cd->lid + i : 0;
	}
	return dev;
}


/* 0, or -EINVAL with a message if a and b share a configured LID. */
static int check_lid_clash(const struct ibvd_device *a,
			   const struct ibvd_device *b, char *err, size_t errlen)
{
	unsigned int p, q;

	for (p = 0; p < a->nports; p++)
		for (q = 0; q < b->nports; q++)
			if (a->ports[p].config_lid &&
			    a->ports[p].config_lid == b->ports[q].config_lid) {
				snprintf(err, errlen, "devices %s and %s both use LID %u",
					 a->name, b->name, a->ports[p].config_lid);
				return -EINVAL;
			}
	return 0;
}

static int check_lid_range(const struct ibvd_device *dev, char *err, size_t errlen)
{
	unsigned int p;

	for (p = 0; p < dev->nports; p++)
		if (dev->ports[p].config_lid > IBVD_LID_UNICAST_MAX) {
			snprintf(err, errlen, "device %s: port %u: LID %u is not a unicast LID",
				 dev->name, p + 1, dev->ports[p].config_lid);
			return -EINVAL;
		}
	return 0;
}

/*
 * An automatic RoCE GUID: RoCE devices on interfaces that share a MAC (a
 * NIC and its VLANs) share it, as rxe devices do.  Nothing routes by it:
 * a RoCE port is found by its addresses.
 */
static bool mac_guid(const struct ibvd_device *dev)
{
	return dev->kind == IBVD_DEV_ROCE && dev->guid_auto;
}

/*
 * The config parser checks these too; the daemon checks again because
 * two devices clashing would break routing, whoever built the config.
 */
static int check_clashes(struct ibvd_device **fresh, unsigned int n,
			 char *err, size_t errlen)
{
	unsigned int i, j;
	int ret;

	for (i = 0; i < n; i++) {
		ret = check_lid_range(fresh[i], err, errlen);
		for (j = i + 1; j < n && ret == 0; j++) {
			if (strcmp(fresh[i]->name, fresh[j]->name) == 0) {
				snprintf(err, errlen, "device %s is defined twice",
					 fresh[i]->name);
				return -EINVAL;
			}
			if (fresh[i]->node_guid == fresh[j]->node_guid &&
			    !(mac_guid(fresh[i]) && mac_guid(fresh[j]))) {
				snprintf(err, errlen, "devices %s and %s have the same GUID",
					 fresh[i]->name, fresh[j]->name);
				return -EINVAL;
			}
			ret = check_lid_clash(fresh[i], fresh[j], err, errlen);
		}
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* A running RoCE device waits for an interface of that name. */
static bool awaited(const struct ibvd_device_list *devs, const char *ifname)
{
	const struct ibvd_device *dev;

	TAILQ_FOREACH(dev, devs, link)
		if (dev->kind == IBVD_DEV_ROCE &&
		    strcmp(dev->roce.netdev.ifname, ifname) == 0)
			return true;
	return false;
}

/*
 * One device from its config entry; a RoCE device's interface is read now
 * and must exist (the config parser checked it a moment ago), unless a
 * running device waits for it: then it is built as that one is, without.
 */
static int build_one(const struct ibvd_config_device *cd, const char *host_id,
		     const struct ibvd_device_list *devs,
		     struct ibvd_device **dev, char *err, size_t errlen)
{
	struct ibvd_netdev_state st = { .naddrs = 0 };
	int ret = 0;

	if (cd->ports < 1 || cd->ports > IBVD_MAX_PORTS) {
		snprintf(err, errlen, "device %s: %u ports (1..%d)", cd->name,
			 cd->ports, IBVD_MAX_PORTS);
		return -EINVAL;
	}
	if (cd->netdev[0] && cd->ports != 1) {
		snprintf(err, errlen, "device %s: %u ports (a RoCE device has one)",
			 cd->name, cd->ports);
		return -EINVAL;
	}
	if (cd->netdev[0]) {
		ret = ibvd_netdev_read(cd->netdev, &st);
		if (ret == -ENODEV && awaited(devs, cd->netdev))
			ret = 0;
		if (ret < 0) {
			snprintf(err, errlen, "device %s: interface %s: %s",
				 cd->name, cd->netdev, strerror(-ret));
			goto out;
		}
		/*
		 * The receive filters drop what came through loopback (any
		 * local process may send it, from any address): nothing
		 * would ever arrive.
		 */
		if (st.link.loopback) {
			snprintf(err, errlen, "device %s: %s is the loopback interface: "
				 "a RoCE device needs an Ethernet link (a veth will do)",
				 cd->name, cd->netdev);
			ret = -EINVAL;
			goto out;
		}
	}
	*dev = device_new(cd, host_id, cd->netdev[0] ? &st : NULL);
	if (!*dev) {
		snprintf(err, errlen, "out of memory");
		ret = -ENOMEM;
	}
out:
	ibvd_netdev_state_free(&st);
	return ret == -ENODEV ? -EINVAL : ret;
}

static int build_fresh(const struct ibvd_config *cfg,
		       const struct ibvd_device_list *devs,
		       struct ibvd_device **fresh, char *err, size_t errlen)
{
	char host_id[256];
	unsigned int i;
	int ret;

	host_identity(host_id, sizeof(host_id));
	for (i = 0; i < cfg->ndevices; i++) {
		ret = build_one(&cfg->devices[i], host_id, devs, &fresh[i], err, errlen);
		if (ret < 0)
			return ret;
	}
	return check_clashes(fresh, cfg->ndevices, err, errlen);
}

/*
 * An existing device keeps its object (and contexts) if its identity
 * holds: the same GUID, ports, kind and interface.  A RoCE device's
 * automatic GUID is the MAC's of the moment it was made: an interface
 * that got a new MAC since is still the same device.
 */
static int same_identity(const struct ibvd_device *a, const struct ibvd_device *b)
{
	bool mac_guids = a->kind == IBVD_DEV_ROCE && a->guid_auto && b->guid_auto;

	return (a->node_guid == b->node_guid || mac_guids) &&
	       a->nports == b->nports && a->kind == b->kind &&
	       strcmp(a->roce.netdev.ifname, b->roce.netdev.ifname) == 0;
}

/*
 * LIDs: configured ones first, then a kept port keeps its assigned LID if
 * still free, then the lowest free LID for everything else.
 */
struct lid_map {
	unsigned char used[IBVD_LID_UNICAST_MAX + 1];
};

static uint16_t lid_take_free(struct lid_map *map)
{
	unsigned int lid;

	for (lid = 1; lid <= IBVD_LID_UNICAST_MAX; lid++)
		if (!map->used[lid]) {
			map->used[lid] = 1;
			return (uint16_t)lid;
		}
	return 0;	/* cannot happen: far fewer ports than LIDs */
}

static void assign_lids(struct ibvd_device **devs, unsigned int n,
			struct lid_map *map)
{
	uint16_t lid[IBVD_MAX_DEVICES][IBVD_MAX_PORTS] = { { 0 } };
	unsigned int i, p;

	memset(map->used, 0, sizeof(map->used));
	map->used[0] = 1;
	for (i = 0; i < n; i++)
		for (p = 0; p < devs[i]->nports; p++) {
			unsigned int want = devs[i]->ports[p].config_lid;

			if (want) {
				lid[i][p] = (uint16_t)want;
				map->used[want] = 1;
			}
		}
	for (i = 0; i < n; i++)
		for (p = 0; p < devs[i]->nports; p++) {
			uint16_t prev = devs[i]->ports[p].lid;

			if (!lid[i][p] && prev && !map->used[prev]) {
				lid[i][p] = prev;
				map->used[prev] = 1;
			}
		}
	for (i = 0; i < n; i++)
		for (p = 0; p < devs[i]->nports; p++) {
			struct ibvd_port *port = &devs[i]->ports[p];

			/* RoCE ports have LID 0, as on any Ethernet link */
			if (!lid[i][p] && devs[i]->kind != IBVD_DEV_ROCE)
				lid[i][p] = lid_take_free(map);
			port->lid_changed = port->lid && port->lid != lid[i][p];
			port->lid = lid[i][p];
		}
}

/*
 * Take over the new config's LID settings and peers into a kept device;
 * its interface state stays what netdev_watch.c made it.
 */
static void keep_device(struct ibvd_device *old, const struct ibvd_device *fresh)
{
	unsigned int p;

	for (p = 0; p < old->nports; p++)
		old->ports[p].config_lid = fresh->ports[p].config_lid;
	memcpy(old->roce.peers, fresh->roce.peers, sizeof(old->roce.peers));
	old->roce.npeers = fresh->roce.npeers;
}

/*
 * Commit fresh (validated) devices: an existing device with the same
 * identity stays (fresh[i] is then freed by the caller), the others are
 * added; whatever is left of the old list goes to removed.
 */
static void commit_devices(struct ibvd_device_list *devs,
			   struct ibvd_device **fresh, unsigned int n,
			   uint32_t *next_ifindex, struct ibvd_device_list *removed,
			   struct lid_map *map)
{
	struct ibvd_device *result[IBVD_MAX_DEVICES];
	struct ibvd_device *dev;
	unsigned int i;

	for (i = 0; i < n; i++) {
		dev = ibvd_device_find(devs, fresh[i]->name);
		if (dev && same_identity(dev, fresh[i])) {
			keep_device(dev, fresh[i]);
			TAILQ_REMOVE(devs, dev, link);
			result[i] = dev;
		} else {
			fresh[i]->ifindex = (*next_ifindex)++;
			result[i] = fresh[i];
			fresh[i] = NULL;
		}
	}
	while ((dev = TAILQ_FIRST(devs))) {
		TAILQ_REMOVE(devs, dev, link);
		TAILQ_INSERT_TAIL(removed, dev, link);
	}
	assign_lids(result, n, map);
	for (i = 0; i < n; i++)
		TAILQ_INSERT_TAIL(devs, result[i], link);
}

void ibvd_devices_drop(struct ibvd_device *dev)
{
	if (!dev)
		return;
	if (dev->transport_priv && dev->transport->dev_close)
		dev->transport->dev_close(dev);
	ibvd_device_free(dev);
}

/*
 * The transports of the devices that are new (not kept from devs): what
 * may fail (sockets, threads) fails before anything changes.
 */
static int open_transports(const struct ibvd_device_list *devs,
			   struct ibvd_device **fresh, unsigned int n,
			   char *err, size_t errlen)
{
	const struct ibvd_device *old;
	unsigned int i;
	int ret;

	for (i = 0; i < n; i++) {
		old = ibvd_device_find(devs, fresh[i]->name);
		if ((old && same_identity(old, fresh[i])) ||
		    !fresh[i]->transport->dev_open)
			continue;
		ret = fresh[i]->transport->dev_open(fresh[i]);
		if (ret < 0) {
			snprintf(err, errlen, "device %s: %s transport: %s",
				 fresh[i]->name, fresh[i]->transport->name,
				 strerror(-ret));
			return ret;
		}
	}
	return 0;
}

int ibvd_devices_apply(struct ibvd_device_list *devs, unsigned int *ndevs,
		       const struct ibvd_config *cfg, uint32_t *next_ifindex,
		       struct ibvd_device_list *removed,
		       const struct ibvd_devices_last_step *last,
		       char *err, size_t errlen)
{
	struct ibvd_device *fresh[IBVD_MAX_DEVICES] = { NULL };
	unsigned int i, n = cfg->ndevices;
	struct lid_map *map;
	int ret = -ENOMEM;

	if (n > IBVD_MAX_DEVICES) {
		snprintf(err, errlen, "too many devices (%u, at most %d)",
			 n, IBVD_MAX_DEVICES);
		return -EINVAL;
	}
	map = malloc(sizeof(*map));
	if (!map) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	ret = build_fresh(cfg, devs, fresh, err, errlen);
	if (ret == 0)
		ret = open_transports(devs, fresh, n, err, errlen);
	if (ret == 0 && last)
		ret = last->run(last->arg, err, errlen);
	if (ret < 0)
		goto out;
	/*
	 * Everything is checked: from here on nothing fails.  Engine threads
	 * read LIDs and transports read peers of kept devices.
	 */
	ibvd_objects_write_lock();
	commit_devices(devs, fresh, n, next_ifindex, removed, map);
	ibvd_objects_write_unlock();
	*ndevs = n;
out:
	for (i = 0; i < n; i++)
		ibvd_devices_drop(fresh[i]);
	free(map);
	return ret;
}
