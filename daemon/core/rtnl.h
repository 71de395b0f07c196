/*
 * One rtnetlink conversation: a socket that lives for one query (a
 * request, then its answer message by message).  The daemon asks the
 * kernel this way about an interface (netdev.c) and about the route to
 * an address (route.c), always on the control thread: the answers share
 * one buffer.
 */
#ifndef IBVD_CORE_RTNL_H
#define IBVD_CORE_RTNL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/netlink.h>

struct ibvd_rtnl {
	int fd;
	uint32_t seq;
};

/* Called for each message of an answer; a negative errno stops the read. */
typedef int (*ibvd_rtnl_msg_fn)(const struct nlmsghdr *h, void *arg);

/* A socket bound to the kernel's rtnetlink: 0 or a negative errno. */
int ibvd_rtnl_open(struct ibvd_rtnl *nl);
void ibvd_rtnl_close(struct ibvd_rtnl *nl);

/*
 * Append attribute type with len bytes of data to the request h, whose
 * buffer holds cap bytes: 0, or -EMSGSIZE when it does not fit.
 */
int ibvd_rtnl_put(struct nlmsghdr *h, size_t cap, unsigned short type,
		  const void *data, size_t len);

/* Send the request h (its sequence number is set here): 0 or < 0. */
int ibvd_rtnl_send(struct ibvd_rtnl *nl, struct nlmsghdr *h);

/*
 * Read the answer to the last request, passing each of its messages to
 * fn (all of a dump's, else the first): 0, the kernel's error, or
 * -ETIMEDOUT when it does not answer within a second.
 */
int ibvd_rtnl_recv(struct ibvd_rtnl *nl, bool dump, ibvd_rtnl_msg_fn fn,
		   void *arg);

#endif /* IBVD_CORE_RTNL_H */
