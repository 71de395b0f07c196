/*
 * The addresses of this host: every interface's, in the daemon's network
 * namespace, as GIDs (IPv6 as they are, IPv4 as ::ffff:a.b.c.d).
 *
 * A RoCE packet from one of them was sent on this host, not received from
 * a peer: a local process that may not reach the daemon but through its
 * socket (a tenant with an ordinary UDP socket, bound to another
 * interface's link-local address) would otherwise pass for one of the
 * device's peers, whose "peers" list takes fe80::/64 by default.  A NIC
 * never sees such traffic either: the kernel delivers it over loopback.
 */
#ifndef IBVD_CORE_HOST_ADDRS_H
#define IBVD_CORE_HOST_ADDRS_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Read them again (getifaddrs), at start and when an address comes or
 * goes; takes ibvd_objects_lock for writing to swap them in.  0 or
 * -errno (the old set stays).
 */
int ibvd_host_addrs_refresh(void);

/* Is gid one of them?  Under ibvd_objects_lock (read or write). */
bool ibvd_host_addrs_has(const uint8_t gid[16]);

void ibvd_host_addrs_free(void);

#endif /* IBVD_CORE_HOST_ADDRS_H */
