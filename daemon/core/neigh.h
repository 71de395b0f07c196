/*
 * A next hop's neighbour entry (the kernel's ARP or ND cache), which the
 * kernel's rdma_cm waits for before an address resolves
 * (addr_resolve_neigh): the daemon reads it and, while it is not valid,
 * makes the kernel resolve it with a datagram.  Both work unprivileged,
 * in the daemon's network namespace, on the control thread.
 */
#ifndef IBVD_CORE_NEIGH_H
#define IBVD_CORE_NEIGH_H

#include <stdbool.h>
#include <stdint.h>

/*
 * The state (NUD_*) of the entry of addr (GID form) on interface ifindex:
 * >= 0, -ENOENT when there is none, or another negative errno (a kernel
 * before 4.20 answers no single-entry RTM_GETNEIGH: EOPNOTSUPP).
 */
int ibvd_neigh_state(int ifindex, const uint8_t addr[16]);

/* Does a state give a link-layer address (NUD_VALID)? */
bool ibvd_neigh_valid(int state);
/* Did resolving it fail (NUD_FAILED)? */
bool ibvd_neigh_failed(int state);
/* No entry, or one nothing resolves (NUD_NONE): it takes a packet. */
bool ibvd_neigh_absent(int state);

/*
 * Have the kernel resolve addr on ifindex: an empty UDP datagram to it,
 * on the discard port, which starts ARP or ND as any packet would (and
 * waits in the entry's queue until it is resolved).  0 or < 0.
 */
int ibvd_neigh_prompt(int ifindex, const uint8_t addr[16]);

#endif /* IBVD_CORE_NEIGH_H */
