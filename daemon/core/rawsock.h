/*
 * Raw sockets for RoCE devices.  Opening one takes CAP_NET_RAW, which the
 * daemon gives up once it has started (daemon/privilege.c); from then on
 * the top level routes the opening through a small process that kept that
 * one capability (daemon/netraw.c).  Everything else about the socket
 * (filters, binding to the interface, buffers) its user sets as before.
 */
#ifndef IBVD_RAWSOCK_H
#define IBVD_RAWSOCK_H

/* Opens a SOCK_RAW | SOCK_CLOEXEC socket: an fd or a negative errno. */
typedef int (*ibvd_raw_opener)(int family, int protocol);

/* NULL restores the direct socket(2) call. */
void ibvd_rawsock_set_opener(ibvd_raw_opener opener);

/* A raw socket of family and protocol, through the opener in place. */
int ibvd_rawsock_open(int family, int protocol);

#endif /* IBVD_RAWSOCK_H */
