/*
 * Raw sockets for RoCE devices.  Opening one takes CAP_NET_RAW, which the
 * daemon gives up once it has started (daemon/privilege.c); from then on
 * the top level routes the opening through a small process that kept that
 * one capability (daemon/netraw.c).  A receiving socket (IPPROTO_UDP)
 * comes with its filter in place: RoCE's UDP port only, nothing through
 * the loopback interface; the broker locks it (SO_LOCK_FILTER), so that a
 * daemon taken over cannot read the namespace's other UDP traffic with
 * it.  Everything else about the socket (binding to the interface,
 * buffers) its user sets.
 */
#ifndef IBVD_RAWSOCK_H
#define IBVD_RAWSOCK_H

/* RoCEv2's UDP destination port (IANA), what a receiving socket keeps. */
#define IBVD_ROCE_UDP_PORT	4791

/* Opens a SOCK_RAW | SOCK_CLOEXEC socket: an fd or a negative errno. */
typedef int (*ibvd_raw_opener)(int family, int protocol);

/* NULL restores the direct socket(2) call. */
void ibvd_rawsock_set_opener(ibvd_raw_opener opener);

/*
 * A raw socket of family and protocol, through the opener in place;
 * with IPPROTO_UDP, filtered (above).
 */
int ibvd_rawsock_open(int family, int protocol);

/* Attach the receiving filter of family to fd: 0 or a negative errno. */
int ibvd_rawsock_filter(int fd, int family);

#endif /* IBVD_RAWSOCK_H */
