/*
 * The raw-socket broker (netraw.c): a child process that keeps
 * CAP_NET_RAW after the daemon has dropped it, and opens raw sockets for
 * RoCE devices on request.
 */
#ifndef IBVD_NETRAW_H
#define IBVD_NETRAW_H

#include "privilege.h"

/*
 * Fork the broker, which becomes to (NULL: stays who it is) keeping only
 * CAP_NET_RAW, and route core's raw sockets through it.  0 or a negative
 * errno.
 */
int ibvd_netraw_start(const struct ibvd_identity *to);

/* Close the pair (the broker exits) and reap it. */
void ibvd_netraw_stop(void);

#endif /* IBVD_NETRAW_H */
