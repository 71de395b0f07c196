/*
 * The route a RoCE device's packets take to an address, as far as they
 * depend on it: the hop limit, and the next hop whose neighbour entry
 * the CM waits for.  The kernel resolves a unicast RoCE
 * address vector when it is made (ib_resolve_eth_dmac, at create_ah and
 * at modify_qp) and takes the route's; so does the daemon, on the
 * control thread, every time: a sysctl or a route changed since is seen.
 */
#ifndef IBVD_CORE_ROUTE_H
#define IBVD_CORE_ROUTE_H

#include <stdint.h>

#include "device.h"

/*
 * The hop limit of a packet out of nd from sgid (NULL: any source) to
 * the unicast address dgid (GID forms): the hoplimit metric of the route
 * (policy rules see the source), else the default of the daemon's
 * namespace (net.ipv4.ip_default_ttl; net.ipv6.conf.IF.hop_limit of the
 * route's interface), as ip4_dst_hoplimit and ip6_dst_hoplimit give; 64
 * when none can be read.
 */
uint8_t ibvd_route_hop_limit(const struct ibvd_netdev *nd, const uint8_t sgid[16],
			     const uint8_t dgid[16]);

/*
 * The next hop of a packet out of nd from sgid (NULL: any source) to the
 * unicast address dgid, as the kernel's rdma_cm finds the neighbour to
 * resolve: the route's gateway, else dgid itself (on-link), into hop (GID
 * form), the route's interface into *oif.  0 or a negative errno (the
 * kernel's answer: ENETUNREACH...).
 */
int ibvd_route_next_hop(const struct ibvd_netdev *nd, const uint8_t sgid[16],
			const uint8_t dgid[16], uint8_t hop[16], int *oif);

#endif /* IBVD_CORE_ROUTE_H */
