/*
 * The route a RoCE device's packets take to an address, as far as they
 * depend on it: the hop limit.  The kernel resolves a unicast RoCE
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

#endif /* IBVD_CORE_ROUTE_H */
