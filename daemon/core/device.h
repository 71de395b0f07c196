/*
 * The RDMA devices the daemon serves, as the object model knows them:
 * identity, ports, LIDs, GID tables, and the contexts open on each.
 *
 * A device has a stable identity (name, node GUID, port count, kind and
 * network interface) and an index (ifindex) that is never reused while
 * the daemon runs.  Which devices exist is decided from the config at
 * startup and on reload (devices.h, at the top level); nothing here knows
 * the config.
 *
 * Two kinds (enum ibvd_device_kind):
 * - a software device: InfiniBand link layer, LIDs, GID[0] = fe80::<port
 *   GUID> then every local address (ibvd_port_gids());
 * - a RoCEv2 device bound to a network interface (struct ibvd_roce):
 *   Ethernet link layer, LID 0, one port whose state, MTU and GID table
 *   follow the interface as rxe's do (core/roce.h has the rules,
 *   daemon/netdev_watch.c keeps them current).
 *
 * Who writes what: the control thread builds devices (devices.c) and
 * changes a RoCE device's netdev state, GID table and peers holding
 * ibvd_objects_lock for writing; engine threads and transports read them
 * under the lock held for reading.  The control thread reads without it.
 */
#ifndef IBVD_DEVICE_H
#define IBVD_DEVICE_H

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "objects.h"

struct ibvd_transport;

#define IBVD_DEV_NAME_MAX	64	/* including NUL, like ibv_device.name */
#define IBVD_MAX_DEVICES	16
#define IBVD_MAX_PORTS		8
#define IBVD_MAX_LID		0xBFFF	/* last unicast LID */

#define IBVD_GID_TBL_LEN	16	/* a software port's table */
#define IBVD_ROCE_GID_TBL_LEN	1024	/* a RoCE port's, as rxe's */
#define IBVD_MAX_PEERS		32	/* CIDRs in a RoCE device's "peers" */
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
	/* UD datagrams its QPs refused for their Q_Key (atomic) */
	uint64_t qkey_violations;
	/* times a RoCE port went down (control thread; atomic loads) */
	uint64_t link_downed;
};

TAILQ_HEAD(ibvd_device_list, ibvd_device);

enum ibvd_device_kind {
	IBVD_DEV_SOFT,			/* the daemon's own InfiniBand HCA */
	IBVD_DEV_ROCE,			/* RoCEv2 on a network interface */
};

/*
 * One GID table entry.  In a RoCE table an all-zero raw GID is an empty
 * slot, as in the kernel's tables (ibv_query_gid reads it as zeros).
 */
struct ibvd_gid {
	uint8_t raw[16];		/* network order */
	uint32_t ifindex;		/* netdev it came from, 0 for GID[0]
					 * of a software port */
	uint8_t type;			/* enum ibv_gid_type: IBV_GID_TYPE_IB
					 * (software), IBV_GID_TYPE_ROCE_V2 */
	uint8_t prefix_len;		/* RoCE: of the address's subnet, in
					 * GID form (IPv4 a.b.c.d/n counts
					 * 96 + n); 64 for GID[0] */
};

/*
 * An address block, kept in GID form: IPv4 a.b.c.d/n as ::ffff:a.b.c.d
 * with prefix_len 96 + n, so that one comparison serves both families
 * and GIDs compare directly.  Host bits beyond the prefix are zero.
 */
struct ibvd_cidr {
	uint8_t addr[16];
	uint8_t prefix_len;		/* 0..128 */
};

/*
 * A network interface as a RoCE device last saw it (rtnetlink,
 * daemon/netdev.c).  The binding is by name: if the interface goes away
 * the device stays, with ifindex 0 and its port DOWN, and takes up
 * whichever interface of that name appears later.
 */
struct ibvd_netdev {
	char ifname[IFNAMSIZ];		/* from the config */
	int ifindex;			/* 0: no interface of that name now */
	uint8_t mac[6];			/* zeros if it has none (tun, wg) */
	unsigned int mtu;		/* IP MTU in bytes; kept while absent */
	bool admin_up;			/* IFF_UP */
	bool up;			/* IFF_UP and IFF_LOWER_UP (carrier):
					 * the port is ACTIVE, as rxe's is
					 * while netif_running && carrier */
	unsigned int speed_mbps;	/* /sys/class/net/IF/speed; 0 unknown */
	bool loopback;			/* IFF_LOOPBACK */
	bool noarp;			/* IFF_NOARP: no neighbour to resolve */
};

/* A GID slot's users besides its entry (struct ibvd_roce). */
struct ibvd_gid_hold {
	uint32_t ahs;			/* AHs made with it (verbs/ah.c) */
	uint8_t last[16];		/* the address it last held */
};

/*
 * What a RoCE device adds to a device: what the RoCE transport reads to
 * send (the interface's index and MTU, the source GID's address) and to
 * accept (the GID table's addresses, the peers).
 */
struct ibvd_roce {
	struct ibvd_netdev netdev;
	/*
	 * Port 1's GID table, IBVD_ROCE_GID_TBL_LEN slots indexed by GID
	 * index, all of type IBV_GID_TYPE_ROCE_V2: slot 0 the default GID
	 * (fe80::/64 + modified EUI-64 of the MAC), then the interface's
	 * addresses; an entry keeps its index while its address stays
	 * (core/roce.c, ibvd_roce_update()).
	 */
	struct ibvd_gid *gids;
	/*
	 * What else holds each slot (NULL: nothing): a UD AH sends from the
	 * address at its sgid_index whenever it sends, so a slot whose
	 * address went stays out of use while AHs name it, as the kernel
	 * keeps such an entry until its last user goes; the address that
	 * comes back to it is the one it had.
	 */
	struct ibvd_gid_hold *gid_holds;
	/* slots up to the last one in use: what per-packet lookups scan */
	unsigned int ngids;
	/*
	 * The RoCE transport drops packets from addresses outside these
	 * blocks.  npeers 0 means "the interface's own subnets": the blocks
	 * of the table's entries (ibvd_roce_peer_allowed()).
	 */
	struct ibvd_cidr peers[IBVD_MAX_PEERS];
	unsigned int npeers;
	/*
	 * Packets the transport dropped since the device appeared: from an
	 * address outside the peers, with another partition's P_Key
	 * (relaxed atomics: any thread counts, ibvctl reads).
	 */
	uint64_t dropped_not_peer;
	uint64_t dropped_bad_pkey;
	/* datagrams longer than any packet (and not a run to cut) */
	uint64_t dropped_too_long;
	/* the transport could not follow the interface to its new index,
	 * or the interface left (it may come back under the same index,
	 * without the sockets' groups): done at the interface's next
	 * message that finds it here (netdev_watch.c) */
	bool rebind_pending;
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
	/* what carries its QPs' messages (engine/transport.h) */
	const struct ibvd_transport *transport;
	void *transport_priv;		/* the transport's per-device state */
	enum ibvd_device_kind kind;
	bool guid_auto;			/* node_guid derived, not configured */
	struct ibvd_roce roce;		/* IBVD_DEV_ROCE only; zeros else */
};

/* Free a device that no context refers to any more. */
void ibvd_device_free(struct ibvd_device *dev);

struct ibvd_device *ibvd_device_find(const struct ibvd_device_list *devs,
				     const char *name);

/* The port numbered port_num (1-based), or NULL if there is none. */
const struct ibvd_port *ibvd_device_port(const struct ibvd_device *dev,
					 uint32_t port_num);

/*
 * The length of the GID table of dev's ports, as QUERY_PORT reports it:
 * IBVD_GID_TBL_LEN or IBVD_ROCE_GID_TBL_LEN.
 */
unsigned int ibvd_device_gid_tbl_len(const struct ibvd_device *dev);

/*
 * The entry at index in port's GID table (port belongs to dev): 0, or
 * -ENOENT for an empty slot or an index past the table.  Engine threads
 * call it under ibvd_objects_lock.
 */
int ibvd_device_gid(const struct ibvd_device *dev, const struct ibvd_port *port,
		    unsigned int index, struct ibvd_gid *gid);

/*
 * port's GID table as it is now, slot by slot into gids, which holds
 * ibvd_device_gid_tbl_len(dev) entries.  Returns the number of slots up
 * to the last non-empty one; empty slots before it are zeros
 * (ibvd_gid_empty()).
 */
unsigned int ibvd_device_gids(const struct ibvd_device *dev,
			      const struct ibvd_port *port,
			      struct ibvd_gid *gids);

/* An empty slot: the zero GID, which no interface address is. */
bool ibvd_gid_empty(const struct ibvd_gid *gid);

/* GID[0] of a software port, fe80::<port GUID> (network order). */
void ibvd_port_gid0(const struct ibvd_port *port, uint8_t gid[16]);

/*
 * Current GID table of a software port: GID[0] = fe80::<port GUID>, then
 * ::ffff:a.b.c.d for each local IPv4 address, then each local IPv6 address
 * as it is (as ibvd_port_gids_refresh() last read them).  Returns the
 * number of entries (1..IBVD_GID_TBL_LEN).
 */
unsigned int ibvd_port_gids(const struct ibvd_port *port,
			    struct ibvd_gid gids[IBVD_GID_TBL_LEN]);
/*
 * Read the host's addresses again (control thread): 1 if the software
 * ports' tables changed, 0 if not, -errno if they could not be read (the
 * tables stay as they were).
 */
int ibvd_port_gids_refresh(void);

/* "xxxx:xxxx:xxxx:xxxx", as rdma(8) prints GUIDs; buf >= 20 bytes. */
char *ibvd_guid_str(uint64_t guid, char *buf, size_t len);

#endif /* IBVD_DEVICE_H */
