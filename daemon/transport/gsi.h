/*
 * QP1's mailbox: management datagrams (the IB CM's MADs) that arrive on
 * any device's QP1 wait here for the connection manager, which runs on
 * the control thread, while the engine threads draining the devices'
 * sockets deliver them.
 * Bounded: at most IBVD_GSI_INBOX_MAX wait, of which IBVD_GSI_SOURCE_MAX
 * from one remote GID, so that a peer that floods QP1 loses its own MADs
 * (counted), not the other peers' connections, nor the daemon's memory.  Sending goes the other way, through the device's
 * transport (struct ibvd_transport.send_mad).
 *
 * Layer transport/: called by the transports' receive paths and by cm/.
 */
#ifndef IBVD_TRANSPORT_GSI_H
#define IBVD_TRANSPORT_GSI_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/transport.h"

/* MADs that may wait, and from one remote GID; beyond, arrivals are dropped. */
#define IBVD_GSI_INBOX_MAX	1024
#define IBVD_GSI_SOURCE_MAX	64

/*
 * The mailbox's eventfd, readable while MADs wait (made on first call;
 * -errno if it cannot be).  The control thread watches it.
 */
int ibvd_gsi_fd(void);

/* Any thread: queue a copy of mad (dropped and counted when full). */
void ibvd_gsi_deliver(const struct ibvd_mad *mad);

/* The control thread: the oldest waiting MAD into *mad, or false. */
bool ibvd_gsi_take(struct ibvd_mad *mad);

/* dev is going: forget the MADs that came through it. */
void ibvd_gsi_purge(const struct ibvd_device *dev);

/* MADs dropped because the mailbox (or their sender's share) was full. */
uint64_t ibvd_gsi_dropped(void);

/* Send mad through its device's transport: 0 or a negative errno. */
int ibvd_gsi_send(const struct ibvd_mad *mad);

#endif /* IBVD_TRANSPORT_GSI_H */
