/*
 * The RDMA devices the daemon serves, as the object model knows them:
 * identity, ports, LIDs, GID tables, and the contexts open on each.
 *
 * A device has a stable identity (name, node GUID, port count) and an
 * index (ifindex) that is never reused while the daemon runs.  Which
 * devices exist is decided from the config at startup and on reload
 * (devices.h, at the top level); nothing here knows the config.
 */
#ifndef IBVD_DEVICE_H
#define IBVD_DEVICE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "objects.h"

struct ibvd_transport;

#define IBVD_DEV_NAME_MAX	64	/* including NUL, like ibv_device.name */
#define IBVD_MAX_DEVICES	16
#define IBVD_MAX_PORTS		8
#define IBVD_MAX_LID		0xBFFF	/* last unicast LID */

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

TAILQ_HEAD(ibvd_device_list, ibvd_device);

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
	/* what carries its QPs' messages (engine/transport.h) */
	const struct ibvd_transport *transport;
	void *transport_priv;		/* the transport's per-device state */
};

/* One GID table entry. */
struct ibvd_gid {
	uint8_t raw[16];		/* network order */
	uint32_t ifindex;		/* netdev it came from, 0 for GID[0] */
};

/* Free a device that no context refers to any more. */
void ibvd_device_free(struct ibvd_device *dev);

struct ibvd_device *ibvd_device_find(const struct ibvd_device_list *devs,
				     const char *name);

/* The port numbered port_num (1-based), or NULL if there is none. */
const struct ibvd_port *ibvd_device_port(const struct ibvd_device *dev,
					 uint32_t port_num);

/* GID[0] of a port, fe80::<port GUID> (network order). */
void ibvd_port_gid0(const struct ibvd_port *port, uint8_t gid[16]);

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

#endif /* IBVD_DEVICE_H */
