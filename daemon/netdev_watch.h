/*
 * Following the interfaces under RoCE devices while the daemon runs: an
 * rtnetlink socket in the link and address groups, on the control
 * thread's event loop.  When the kernel says something changed about a
 * device's interface (its index, or a link of its name), the device reads
 * the interface again (netdev.h), takes it in (core/roce.h) and tells its
 * contexts: IBV_EVENT_PORT_ERR when the port leaves ACTIVE, then
 * IBV_EVENT_GID_CHANGE when its GID table changed, IBV_EVENT_PORT_ACTIVE
 * when the port comes back.
 */
#ifndef IBVD_NETDEV_WATCH_H
#define IBVD_NETDEV_WATCH_H

struct ibvd_daemon;
struct ibvd_netdev_watch;

/*
 * Start watching for d's RoCE devices, whichever they are now or after a
 * reload, and read every one once more (for what changed since the
 * device set was built).  0 or a negative errno.
 */
int ibvd_netdev_watch_start(struct ibvd_daemon *d, struct ibvd_netdev_watch **ret);

void ibvd_netdev_watch_free(struct ibvd_netdev_watch *w);

#endif /* IBVD_NETDEV_WATCH_H */
