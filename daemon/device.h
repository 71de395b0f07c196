/*
 * The software RDMA devices the daemon serves, built from the config.
 *
 * A device has a stable identity (name, node GUID, port count) and an
 * index (ifindex) that is never reused while the daemon runs.  Reloading the
 * config keeps a device object, with its open contexts, as long as its name,
 * GUID and port count stay the same; anything else is a removal plus an
 * addition.
 */
#ifndef IBVD_DEVICE_H
#define IBVD_DEVICE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "config.h"		/* daemon/config.h */
#include "ibverbsd.h"
#include "ibverbsd.pb-c.h"

#define IBVD_GID_TBL_LEN	16
#define IBVD_PKEY_TBL_LEN	1
#define IBVD_DEFAULT_PKEY	0xffff
#define IBVD_LID_UNICAST_MAX	0xbfff	/* 0xc000.. are multicast LIDs */
/* The default GID prefix, fe80::/64, as the 64-bit subnet prefix. */
#define IBVD_SUBNET_PREFIX	0xfe80000000000000ull

struct ibvd_port {
	unsigned int num;		/* 1-based */
	uint16_t lid;
	unsigned int config_lid;	/* 0: assigned by the daemon */
	int lid_changed;		/* set by ibvd_devices_apply() */
	uint64_t guid;			/* port GUID = node GUID + num - 1 */
};

struct ibvd_device {
	TAILQ_ENTRY(ibvd_device) link;
	char name[IBVD_DEV_NAME_MAX];
	uint32_t ifindex;
	uint64_t node_guid;		/* host byte order */
	uint64_t sys_image_guid;
	unsigned int nports;
	struct ibvd_port ports[IBVD_MAX_PORTS];
	struct ibvd_context_list contexts;
	unsigned int ncontexts;
};

/* One GID table entry. */
struct ibvd_gid {
	uint8_t raw[16];		/* network order */
	uint32_t ifindex;		/* netdev it came from, 0 for GID[0] */
};

/*
 * Make devs match cfg.  Devices that keep their identity stay in devs
 * (their contexts untouched; a port whose LID moved gets lid_changed set);
 * devices that disappear or change identity are moved to removed, which
 * the caller must drain (their contexts are still attached); new devices
 * get fresh indexes from *next_ifindex.  On error (-EINVAL, -ENOMEM) writes
 * a message to err and changes nothing.
 */
int ibvd_devices_apply(struct ibvd_device_list *devs, unsigned int *ndevs,
		       const struct ibvd_config *cfg, uint32_t *next_ifindex,
		       struct ibvd_device_list *removed,
		       char *err, size_t errlen);

/* Free a device that no context refers to any more. */
void ibvd_device_free(struct ibvd_device *dev);

struct ibvd_device *ibvd_device_find(const struct ibvd_device_list *devs,
				     const char *name);

/* The port numbered port_num (1-based), or NULL if there is none. */
const struct ibvd_port *ibvd_device_port(const struct ibvd_device *dev,
					 uint32_t port_num);

/* Fill a DeviceInfo (strings point into dev). */
void ibvd_device_info(const struct ibvd_device *dev, Ibvd__DeviceInfo *info);

/*
 * Node GUID of a device without a configured one: an FNV-1a hash of the
 * machine id (/etc/machine-id, /var/lib/dbus/machine-id, else the host
 * name) and the device name, marked as a locally administered EUI-64.
 * Stable across restarts on one host, different between hosts.
 */
uint64_t ibvd_guid_derive(const char *machine_id, const char *dev_name);

/*
 * Current GID table of a port: GID[0] = fe80::<port GUID>, then
 * ::ffff:a.b.c.d for each local IPv4 address, then each local IPv6 address
 * as it is (addresses as read at most a second ago).  Returns the number
 * of entries (1..IBVD_GID_TBL_LEN).
 */
unsigned int ibvd_port_gids(const struct ibvd_port *port,
			    struct ibvd_gid gids[IBVD_GID_TBL_LEN]);

/* "xxxx:xxxx:xxxx:xxxx", as rdma(8) prints GUIDs; buf >= 20 bytes. */
char *ibvd_guid_str(uint64_t guid, char *buf, size_t len);

/* Request handler (request.c's table). */
struct ibvd_call;
int ibvd_req_list_devices(struct ibvd_call *call);

#endif /* IBVD_DEVICE_H */
