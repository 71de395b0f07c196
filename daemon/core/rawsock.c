/*
 * Raw sockets for RoCE devices (rawsock.h).
 */
#include <config.h>

#include <errno.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <linux/filter.h>

#include "rawsock.h"

/*
 * The loopback interface's index in every network namespace (the
 * kernel's LOOPBACK_IFINDEX).
 */
#define LOOPBACK_IFINDEX	1

/*
 * Both filters first drop what came through the loopback interface: a
 * datagram one of the host's own processes sent to the device's address.
 * Such a sender picks its source address freely (IPV6_FREEBIND needs no
 * privilege), so the source cannot tell it from a peer; a device's own
 * packets to itself never take that way, and a NIC does not see its
 * host's loopback traffic either.
 */
#define DROP_LOOPBACK(drop_offset) \
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SKF_AD_OFF + SKF_AD_IFINDEX), \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, LOOPBACK_IFINDEX, drop_offset, 0)

/* Keep IPv4 datagrams whose UDP destination port is RoCE's. */
static struct sock_filter roce_port_code[] = {
	DROP_LOOPBACK(4),
	/* X = IPv4 header length */
	BPF_STMT(BPF_LDX | BPF_B | BPF_MSH, 0),
	/* UDP destination port */
	BPF_STMT(BPF_LD | BPF_H | BPF_IND, 2),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IBVD_ROCE_UDP_PORT, 0, 1),
	BPF_STMT(BPF_RET | BPF_K, 0x40000),
	BPF_STMT(BPF_RET | BPF_K, 0),
};

/* IPv6: a raw socket's data starts at the UDP header. */
static struct sock_filter roce_port6_code[] = {
	DROP_LOOPBACK(3),
	BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 2),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IBVD_ROCE_UDP_PORT, 0, 1),
	BPF_STMT(BPF_RET | BPF_K, 0x40000),
	BPF_STMT(BPF_RET | BPF_K, 0),
};

int ibvd_rawsock_filter(int fd, int family)
{
	struct sock_fprog prog = {
		.len = family == AF_INET6 ? sizeof(roce_port6_code) / sizeof(roce_port6_code[0]) :
					    sizeof(roce_port_code) / sizeof(roce_port_code[0]),
		.filter = family == AF_INET6 ? roce_port6_code : roce_port_code,
	};

	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0)
		return -errno;
	return 0;
}

static int direct_open(int family, int protocol)
{
	int fd = socket(family, SOCK_RAW | SOCK_CLOEXEC, protocol);
	int ret;

	if (fd < 0)
		return -errno;
	/* The filter first: nothing else may queue before it is in place. */
	if (protocol == IPPROTO_UDP) {
		ret = ibvd_rawsock_filter(fd, family);
		if (ret < 0) {
			close(fd);
			return ret;
		}
	}
	return fd;
}

/* Set by the control thread before any device opens (or while none does). */
static ibvd_raw_opener opener = direct_open;

void ibvd_rawsock_set_opener(ibvd_raw_opener fn)
{
	opener = fn ? fn : direct_open;
}

int ibvd_rawsock_open(int family, int protocol)
{
	return opener(family, protocol);
}
