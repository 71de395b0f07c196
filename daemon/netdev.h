/*
 * A network interface as rtnetlink describes it now: what a RoCE device
 * takes from it (index, flags, MTU, MAC, speed, addresses).  One
 * synchronous query per call, on the control thread: devices.c asks when
 * it builds a RoCE device, netdev_watch.c whenever the kernel says the
 * interface changed.
 */
#ifndef IBVD_NETDEV_H
#define IBVD_NETDEV_H

#include <stddef.h>

#include "core/device.h"

struct ibvd_netdev_state {
	struct ibvd_netdev link;	/* ifindex 0: no interface of that name */
	struct ibvd_cidr *addrs;	/* its addresses with their prefix
					 * lengths, GID form, in the kernel's
					 * order (IPv4 first); malloc'd */
	size_t naddrs;
};

/*
 * Read the interface named ifname into st: 0; -ENODEV when there is no
 * such interface (st->link says so: ifindex 0, the name set); another
 * negative errno when rtnetlink fails (st is then empty).  Free st with
 * ibvd_netdev_state_free() whatever it returned.
 */
int ibvd_netdev_read(const char *ifname, struct ibvd_netdev_state *st);

void ibvd_netdev_state_free(struct ibvd_netdev_state *st);

#endif /* IBVD_NETDEV_H */
