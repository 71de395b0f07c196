/*
 * A RoCE device's sockets, and how an engine thread drains them.
 *
 * Sending: one raw IPv4 socket with IP_HDRINCL per device; the packet is
 * complete when it is handed over (the ICRC covers the IP header), and the
 * kernel routes it and resolves the neighbour.  Receiving: a raw socket of
 * protocol UDP sees a copy of every UDP datagram with its IP header; a
 * classic BPF program keeps those to port 4791.  A UDP socket bound to
 * 4791 stands beside it so that the kernel has a taker for the port and
 * answers no ICMP port-unreachable; its own filter drops everything.
 *
 * IPv6 has the same three sockets, with one difference: a raw IPv6 socket
 * hands over what follows the IPv6 header, never the header, and the ICRC
 * covers it.  Its parts that the ICRC does not mask (addresses, payload
 * length, next header) are all known from the datagram and the ancillary
 * data the socket is asked for (the sender's address, IPV6_PKTINFO's
 * destination), so the header is put back in front of the datagram, with
 * the masked fields the packet came with (IPV6_FLOWINFO, IPV6_HOPLIMIT)
 * for a UD receiver's GRH.  A packet socket (AF_PACKET) would give the
 * header as it was, but beside the IP stack: no netfilter (a firewall's
 * rules would not hold for RoCE), frames to other hosts and our own
 * outgoing ones to sort out.  Sending, IPV6_HDRINCL takes our header as it
 * is; a link-local destination is scoped to the device's interface.  The
 * UDP checksum stays 0 over IPv6 too, as rxe sends it (RoCEv2 receivers
 * ignore it; the ICRC covers the datagram).  A kernel without IPv6 leaves
 * the device IPv4 only.
 *
 * Runs of packets of one message (gso.c) go out as one datagram through
 * an ordinary UDP socket per flow, bound to the flow's source address and
 * port, with UDP_SEGMENT; a flow whose run the kernel refuses (a device
 * without checksum offload) sends packets from then on.  Arriving runs a
 * link left whole are cut back into packets here (roce_gso_split).
 *
 * There is no receive thread: an engine thread drains the receive sockets
 * between its passes (engine/transport.h, struct ibvd_eng_rx), in batches
 * (recvmmsg), and hands each packet to rx.c under its pass's hold of
 * ibvd_objects_lock.  So the thread that takes an ACK is the one that
 * completes the send and sends what the window lets out next.
 */
#include <config.h>

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include "core/objects.h"
#include "core/rawsock.h"
#include "internal.h"
#include "log.h"

/* Packets one receive call takes. */
#define RX_BATCH	16
/* Receive calls per socket in one of the engine's looks (rx_drain). */
#define RX_BUDGET	4
/*
 * Socket buffers: a step of a message is up to 128 packets sent at once
 * (a 128 KiB chunk at MTU 1024), and a packet costs its socket about
 * twice its size; the defaults (~200 KiB) drop part of every such burst.
 */
#define IO_BUFFER_BYTES	(8u << 20)
/* How long a sender waits for room in a full send buffer. */
#define IO_SEND_WAIT_MS	10
#define IPV6_HDR_LEN	40
#define IPV4_UDP_HDRS	28

/* linux/udp.h's: a datagram cut every so many bytes */
#ifndef UDP_SEGMENT
#define UDP_SEGMENT	103
#endif

/* linux/in6.h's, which glibc's headers leave out */
#ifndef IPV6_MULTICAST_ALL
#define IPV6_MULTICAST_ALL	29
#endif
#ifndef IPV6_FLOWINFO
#define IPV6_FLOWINFO	11
#endif

_Static_assert(ROCE_UDP_PORT == IBVD_ROCE_UDP_PORT,
	       "the receiving filter (core/rawsock.c) keeps RoCE's port");

static struct sock_filter drop_all_code[] = {
	BPF_STMT(BPF_RET | BPF_K, 0),
};

static int set_filter(int fd, struct sock_filter *code, unsigned short len)
{
	struct sock_fprog prog = { .len = len, .filter = code };

	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0)
		return -errno;
	return 0;
}

/* As large as we may (FORCE past rmem_max/wmem_max needs CAP_NET_ADMIN). */
static void grow_buffer(int fd, int force_opt, int opt)
{
	int bytes = IO_BUFFER_BYTES;

	if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof(bytes)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));
}

static int bind_to(int fd, const char *ifname)
{
	if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, ifname,
		       (socklen_t)strlen(ifname)) < 0)
		return -errno;
	return 0;
}

static int set_int(int fd, int level, int opt, int value)
{
	if (setsockopt(fd, level, opt, &value, sizeof(value)) < 0)
		return -errno;
	return 0;
}

/* A raw socket of family and protocol, bound to rd's netdev, into *out. */
static int open_raw(struct roce_dev *rd, int family, int protocol, int *out)
{
	int fd = ibvd_rawsock_open(family, protocol);
	int ret;

	if (fd < 0)
		return fd;
	ret = bind_to(fd, rd->ifname);
	if (ret < 0) {
		close(fd);
		return ret;
	}
	*out = fd;
	return 0;
}

/*
 * The device hands its own multicast datagrams to its members itself
 * (roce.c), as a NIC loops them back: a copy the kernel looped back would
 * come in again as a stranger's.
 */
static int open_tx(struct roce_dev *rd)
{
	int ret = open_raw(rd, AF_INET, IPPROTO_RAW, &rd->tx_fd);

	if (ret == 0)
		ret = set_int(rd->tx_fd, IPPROTO_IP, IP_MULTICAST_LOOP, 0);
	if (ret == 0)
		grow_buffer(rd->tx_fd, SO_SNDBUFFORCE, SO_SNDBUF);
	return ret;
}

static int open_tx6(struct roce_dev *rd)
{
	int ret = open_raw(rd, AF_INET6, IPPROTO_RAW, &rd->tx6_fd);

	if (ret == 0)
		ret = set_int(rd->tx6_fd, IPPROTO_IPV6, IPV6_HDRINCL, 1);
	if (ret == 0)
		ret = set_int(rd->tx6_fd, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, 0);
	if (ret == 0)
		grow_buffer(rd->tx6_fd, SO_SNDBUFFORCE, SO_SNDBUF);
	return ret;
}

/*
 * A raw UDP socket of family on rd's interface, filtered to RoCE's port
 * by whoever opened it (core/rawsock.h), its receive buffer grown; opts
 * (may be NULL) sets what else it needs before it is bound.
 */
static int open_filtered(struct roce_dev *rd, int family,
			 int (*opts)(int fd), int *out)
{
	int fd = ibvd_rawsock_open(family, IPPROTO_UDP);
	int ret = 0;

	if (fd < 0)
		return fd;
	if (opts)
		ret = opts(fd);
	if (ret == 0)
		ret = bind_to(fd, rd->ifname);
	if (ret < 0) {
		close(fd);
		return ret;
	}
	grow_buffer(fd, SO_RCVBUFFORCE, SO_RCVBUF);
	*out = fd;
	return 0;
}

/*
 * The datagrams of the multicast groups the device's interface is a
 * member of come here too, although this socket holds no membership
 * (transport/roce/mcast.c's sockets do): the kernel's default, said
 * explicitly.
 */
static int rx4_opts(int fd)
{
	return set_int(fd, IPPROTO_IP, IP_MULTICAST_ALL, 1);
}

static int open_rx(struct roce_dev *rd)
{
	return open_filtered(rd, AF_INET, rx4_opts, &rd->rx_fd);
}

/*
 * What an IPv6 datagram's header is rebuilt from (rx_ipv6_header); and
 * the groups' datagrams, as for IPv4 (rx4_opts).
 */
static int rx6_opts(int fd)
{
	int ret = set_int(fd, IPPROTO_IPV6, IPV6_MULTICAST_ALL, 1);

	if (ret == 0)
		ret = set_int(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1);

	if (ret == 0)
		ret = set_int(fd, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, 1);
	if (ret == 0)
		ret = set_int(fd, IPPROTO_IPV6, IPV6_FLOWINFO, 1);
	return ret;
}

static int open_rx6(struct roce_dev *rd)
{
	return open_filtered(rd, AF_INET6, rx6_opts, &rd->rx6_fd);
}

static int open_sink(struct roce_dev *rd, int family, int *out)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_port = htons(ROCE_UDP_PORT),
		.sin_addr.s_addr = htonl(INADDR_ANY),
	};
	struct sockaddr_in6 sin6 = {
		.sin6_family = AF_INET6,
		.sin6_port = htons(ROCE_UDP_PORT),
		.sin6_addr = IN6ADDR_ANY_INIT,
	};
	int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP);
	int ret;

	if (fd < 0)
		return -errno;
	ret = set_filter(fd, drop_all_code, 1);
	if (ret == 0)
		ret = bind_to(fd, rd->ifname);
	/* Another device's sink may hold the port on another netdev. */
	if (ret == 0)
		ret = set_int(fd, SOL_SOCKET, SO_REUSEADDR, 1);
	/*
	 * No UDP_GRO here, though it drops everything: a socket that takes
	 * GRO lets the kernel merge the port's arriving packets, and the raw
	 * socket would see merged ones it cannot tell apart.
	 */
	/* The IPv4 sink has IPv4's port; this one IPv6's only. */
	if (ret == 0 && family == AF_INET6)
		ret = set_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1);
	if (ret == 0 && (family == AF_INET6 ?
			 bind(fd, (struct sockaddr *)&sin6, sizeof(sin6)) :
			 bind(fd, (struct sockaddr *)&sin, sizeof(sin))) < 0)
		ret = -errno;
	if (ret < 0) {
		close(fd);
		return ret;
	}
	*out = fd;
	return 0;
}

/*
 * IPv6's sockets; a kernel without IPv6 (no AF_INET6 sockets at all)
 * leaves the device IPv4 only.
 */
static int open_ipv6(struct roce_dev *rd)
{
	int ret = open_tx6(rd);

	if (ret == -EAFNOSUPPORT) {
		log_info("%s: no IPv6 in this kernel: RoCE over IPv4 only",
			 rd->ifname);
		return 0;
	}
	if (ret == 0)
		ret = open_rx6(rd);
	if (ret == 0)
		ret = open_sink(rd, AF_INET6, &rd->sink6_fd);
	return ret;
}

static int send_wait(int fd, const uint8_t *pkt, size_t len,
		     const struct sockaddr *sa, socklen_t salen, bool may_wait)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	bool waited = !may_wait;
	ssize_t n;

	/*
	 * A full send buffer holds the sender back a moment, as a NIC's full
	 * transmit ring does, but never for long: a link without carrier
	 * drains nothing, and an engine thread must not hang on it.  No
	 * neighbour, no route, still full: the packet is lost, as on a wire,
	 * and the retry timer sends it again.
	 */
	for (;;) {
		n = sendto(fd, pkt, len, MSG_DONTWAIT, sa, salen);
		if (n >= 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN || waited)
			return -errno;
		waited = true;
		poll(&pfd, 1, IO_SEND_WAIT_MS);
	}
}

/*
 * The socket and the address (into *sa) that packets of family go out
 * through to dst; the socket is -1 without IPv6.
 */
static int tx_dest(struct roce_dev *rd, int family, const uint8_t *dst,
		   struct sockaddr_storage *sa, socklen_t *salen)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)sa;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)sa;

	memset(sa, 0, sizeof(*sa));
	if (family == AF_INET6) {
		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, dst, 16);
		/* only a link-local destination reads it: our interface's */
		sin6->sin6_scope_id = (uint32_t)rd->dev->roce.netdev.ifindex;
		*salen = sizeof(*sin6);
		return rd->tx6_fd;
	}
	sin->sin_family = AF_INET;
	memcpy(&sin->sin_addr, dst, 4);
	*salen = sizeof(*sin);
	return rd->tx_fd;
}

static int io_send(struct roce_dev *rd, const uint8_t *pkt, size_t len,
		   const uint8_t *dst, bool may_wait)
{
	struct sockaddr_storage sa;
	socklen_t salen;
	int fd;

	fd = tx_dest(rd, len && pkt[0] >> 4 == 6 ? AF_INET6 : AF_INET, dst,
		     &sa, &salen);
	if (fd < 0)
		return -EAFNOSUPPORT;
	return send_wait(fd, pkt, len, (struct sockaddr *)&sa, salen, may_wait);
}

int roce_io_send(struct roce_dev *rd, const uint8_t *pkt, size_t len,
		 const uint8_t *dst)
{
	return io_send(rd, pkt, len, dst, true);
}

int roce_io_send_now(struct roce_dev *rd, const uint8_t *pkt, size_t len,
		     const uint8_t *dst)
{
	return io_send(rd, pkt, len, dst, false);
}

void roce_io_send_batch(struct roce_dev *rd, const uint8_t *const *pkts,
			const size_t *lens, unsigned int n, int family,
			const uint8_t *dst)
{
	struct sockaddr_storage sa;
	struct pollfd pfd = { .events = POLLOUT };
	struct mmsghdr msgs[ROCE_TXQ_PKTS];
	struct iovec iov[ROCE_TXQ_PKTS];
	unsigned int i, done = 0;
	bool waited = false;
	socklen_t salen;
	int ret;

	pfd.fd = tx_dest(rd, family, dst, &sa, &salen);
	if (pfd.fd < 0)
		return;
	memset(msgs, 0, sizeof(msgs));
	for (i = 0; i < n && i < ROCE_TXQ_PKTS; i++) {
		iov[i].iov_base = (void *)pkts[i];
		iov[i].iov_len = lens[i];
		msgs[i].msg_hdr.msg_name = &sa;
		msgs[i].msg_hdr.msg_namelen = salen;
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	n = i;
	/* As roce_io_send: a full buffer is waited for once, briefly. */
	while (done < n) {
		ret = sendmmsg(pfd.fd, msgs + done, n - done, MSG_DONTWAIT);
		if (ret > 0) {
			done += (unsigned int)ret;
			continue;
		}
		if (ret < 0 && errno == EINTR)
			continue;
		if (ret < 0 && errno == EAGAIN && !waited) {
			waited = true;
			poll(&pfd, 1, IO_SEND_WAIT_MS);
			continue;
		}
		/* lost, as on a wire: the rest of the batch too */
		return;
	}
}

/* ---- runs: one datagram cut into packets ------------------------------- */

/* An unconnected UDP socket for the flow from src:sport, or -errno. */
static int open_flow(struct roce_dev *rd, const uint8_t *src, uint16_t sport)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_port = htons(sport),
	};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP);
	int ret;

	if (fd < 0)
		return -errno;
	memcpy(&sin.sin_addr, src, 4);
	/* nothing is received here: peers send to 4791 */
	ret = set_filter(fd, drop_all_code, 1);
	if (ret == 0)
		ret = bind_to(fd, rd->ifname);
	/* DF: identification 0, as the runs' ICRCs were computed with */
	if (ret == 0)
		ret = set_int(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO);
	if (ret == 0 && bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		ret = -errno;
	if (ret < 0) {
		close(fd);
		return ret;
	}
	grow_buffer(fd, SO_SNDBUFFORCE, SO_SNDBUF);
	return fd;
}

/* The socket of path's flow, made on first use; -1: send packets. */
static int flow_fd(struct roce_dev *rd, const struct roce_path *path)
{
	struct roce_flow *f;
	unsigned int i;
	int fd = -1;

	pthread_mutex_lock(&rd->flows_lock);
	for (i = 0; i < rd->nflows; i++) {
		f = &rd->flows[i];
		if (f->sport == path->sport && !memcmp(f->src, path->src, 4)) {
			fd = f->refused ? -1 : f->fd;
			goto out;
		}
	}
	if (!rd->flows)
		rd->flows = calloc(ROCE_FLOWS, sizeof(*rd->flows));
	/* out of room: the flows beyond send packets */
	if (!rd->flows || rd->nflows == ROCE_FLOWS)
		goto out;
	f = &rd->flows[rd->nflows++];
	memcpy(f->src, path->src, 4);
	f->sport = path->sport;
	/* a port someone else holds: that flow sends packets */
	f->fd = fd = open_flow(rd, path->src, path->sport);
	if (fd < 0)
		f->fd = fd = -1;
out:
	pthread_mutex_unlock(&rd->flows_lock);
	return fd;
}

/* The kernel refused a run of fd's flow: packets from now on. */
static void flow_refused(struct roce_dev *rd, int fd, int err)
{
	unsigned int i;

	pthread_mutex_lock(&rd->flows_lock);
	for (i = 0; i < rd->nflows; i++) {
		if (rd->flows[i].fd != fd)
			continue;
		if (!rd->flows[i].refused)
			log_info("%s: runs of packets refused (%s): this flow sends them one by one",
				 rd->ifname, strerror(-err));
		/* kept open: another sender may be using it right now */
		rd->flows[i].refused = true;
	}
	pthread_mutex_unlock(&rd->flows_lock);
}

int roce_io_send_run(struct roce_dev *rd, const struct roce_path *path,
		     uint8_t *const *pkts, const size_t *lens, unsigned int n)
{
	union {
		char buf[CMSG_SPACE(sizeof(uint16_t)) + 2 * CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct sockaddr_in to = {
		.sin_family = AF_INET,
		.sin_port = htons(ROCE_UDP_PORT),
	};
	struct iovec iov[ROCE_TXQ_PKTS];
	struct msghdr m = {
		.msg_name = &to,
		.msg_namelen = sizeof(to),
		.msg_iov = iov,
		.msg_control = ctl.buf,
		.msg_controllen = sizeof(ctl.buf),
	};
	struct pollfd pfd = { .events = POLLOUT };
	uint16_t seg = (uint16_t)(lens[0] - IPV4_UDP_HDRS);
	int ttl = path->hop_limit, tos = path->tclass;
	struct cmsghdr *c;
	unsigned int i;
	bool waited = false;

	if (n > ROCE_TXQ_PKTS)
		return -EINVAL;
	pfd.fd = flow_fd(rd, path);
	if (pfd.fd < 0)
		return -ENOTCONN;
	memcpy(&to.sin_addr, path->dst, 4);
	for (i = 0; i < n; i++) {
		iov[i].iov_base = pkts[i] + IPV4_UDP_HDRS;
		iov[i].iov_len = lens[i] - IPV4_UDP_HDRS;
	}
	m.msg_iovlen = n;
	memset(&ctl, 0, sizeof(ctl));
	c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = IPPROTO_UDP;
	c->cmsg_type = UDP_SEGMENT;
	c->cmsg_len = CMSG_LEN(sizeof(seg));
	memcpy(CMSG_DATA(c), &seg, sizeof(seg));
	c = CMSG_NXTHDR(&m, c);
	c->cmsg_level = IPPROTO_IP;
	c->cmsg_type = IP_TTL;
	c->cmsg_len = CMSG_LEN(sizeof(ttl));
	memcpy(CMSG_DATA(c), &ttl, sizeof(ttl));
	c = CMSG_NXTHDR(&m, c);
	c->cmsg_level = IPPROTO_IP;
	c->cmsg_type = IP_TOS;
	c->cmsg_len = CMSG_LEN(sizeof(tos));
	memcpy(CMSG_DATA(c), &tos, sizeof(tos));
	/* as send_wait: a full buffer is waited for once, briefly */
	for (;;) {
		if (sendmsg(pfd.fd, &m, MSG_DONTWAIT) >= 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN && !waited) {
			waited = true;
			poll(&pfd, 1, IO_SEND_WAIT_MS);
			continue;
		}
		break;
	}
	/* lost, as on a wire; or refused: then packets */
	if (errno == EAGAIN || errno == ENOBUFS || errno == EHOSTUNREACH ||
	    errno == ENETUNREACH || errno == ENETDOWN)
		return 0;
	flow_refused(rd, pfd.fd, -errno);
	return -EOPNOTSUPP;
}

/* Room for IPV6_PKTINFO, IPV6_HOPLIMIT and IPV6_FLOWINFO. */
#define RX_CMSG_BYTES	(CMSG_SPACE(sizeof(struct in6_pktinfo)) + \
			 2 * CMSG_SPACE(sizeof(int)))

struct rx_batch {
	struct mmsghdr msgs[RX_BATCH];
	struct iovec iov[RX_BATCH];
	struct sockaddr_in6 from[RX_BATCH];
	uint8_t ctl[RX_BATCH][RX_CMSG_BYTES];
	uint8_t buf[RX_BATCH][IPV6_HDR_LEN + ROCE_GSO_MAX];
	uint8_t cut[2 * ROCE_GSO_MAX];		/* a run's packets */
};

/*
 * Ready for a receive call on an IPv4 socket (the packet from the buffer's
 * start) or an IPv6 one (the datagram after room for its header, with the
 * sender's address and ancillary data).
 */
static void rx_batch_arm(struct rx_batch *b, bool v6)
{
	size_t at = v6 ? IPV6_HDR_LEN : 0;
	unsigned int i;

	memset(b->msgs, 0, sizeof(b->msgs));
	for (i = 0; i < RX_BATCH; i++) {
		struct msghdr *m = &b->msgs[i].msg_hdr;

		b->iov[i].iov_base = b->buf[i] + at;
		b->iov[i].iov_len = sizeof(b->buf[i]) - at;
		m->msg_iov = &b->iov[i];
		m->msg_iovlen = 1;
		if (v6) {
			m->msg_name = &b->from[i];
			m->msg_namelen = sizeof(b->from[i]);
			m->msg_control = b->ctl[i];
			m->msg_controllen = sizeof(b->ctl[i]);
		}
	}
}

/*
 * The IPv6 header of a datagram of len bytes, as it came (io.c's comment
 * at the top), into h; false if the socket did not say where it went.
 */
static bool rx_ipv6_header(struct msghdr *m, size_t len, uint8_t *h)
{
	const struct sockaddr_in6 *from = m->msg_name;
	struct roce_ip ip = { .family = AF_INET6 };
	struct in6_pktinfo pi;
	struct cmsghdr *c;
	bool have_dst = false;
	uint32_t flowinfo;
	int hops;

	if (m->msg_namelen < sizeof(*from) || len > 0xFFFF)
		return false;
	memcpy(ip.src, &from->sin6_addr, 16);
	for (c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level != IPPROTO_IPV6)
			continue;
		if (c->cmsg_type == IPV6_PKTINFO) {
			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			memcpy(ip.dst, &pi.ipi6_addr, 16);
			have_dst = true;
		} else if (c->cmsg_type == IPV6_HOPLIMIT) {
			memcpy(&hops, CMSG_DATA(c), sizeof(hops));
			ip.hop_limit = (uint8_t)hops;
		} else if (c->cmsg_type == IPV6_FLOWINFO) {
			/* traffic class and flow label, in network order */
			memcpy(&flowinfo, CMSG_DATA(c), sizeof(flowinfo));
			flowinfo = ntohl(flowinfo);
			ip.tclass = (uint8_t)(flowinfo >> 20);
			ip.flow_label = flowinfo & 0xFFFFFu;
		}
	}
	roce_build_ipv6_hdr(&ip, len, h);
	return have_dst;
}

static void rx_cut_packet(void *arg, const uint8_t *pkt, size_t len)
{
	roce_rx_packet(arg, pkt, len);
}

/* The cut packets' WRITE payloads land before their buffer is reused. */
static void rx_cut_reuse(void *arg)
{
	roce_wrun_flush(arg);
}

/*
 * A run a link left whole (gso.c): its packets, one by one; -EBADMSG if
 * it is none (nothing was handled).
 */
static int rx_run(struct roce_dev *rd, struct rx_batch *b, const uint8_t *pkt,
		  size_t len)
{
	const struct roce_gso_sink sink = {
		.packet = rx_cut_packet,
		.reuse = rx_cut_reuse,
		.arg = rd,
	};

	/* the last run's packets may still be pointed at */
	roce_wrun_flush(rd);
	return roce_gso_split(pkt, len, b->cut, sizeof(b->cut), &sink);
}

/*
 * An IPv4 datagram: a run to cut (gso.c), or a packet.  A run's
 * addresses are its packets': one from anywhere but a peer is dropped
 * before the search for its segment size, which costs a few ns a byte.
 */
/* A datagram longer than any packet: dropped, and counted. */
static void rx_too_long(struct roce_dev *rd)
{
	__atomic_fetch_add(&rd->dev->roce.dropped_too_long, 1, __ATOMIC_RELAXED);
}

static void rx_ipv4(struct roce_dev *rd, struct rx_batch *b, const uint8_t *pkt,
		    size_t len)
{
	if (roce_gso_maybe_run(pkt, len)) {
		if (!roce_rx_addressed(rd, pkt, len))
			return;
		if (rx_run(rd, b, pkt, len) == 0)
			return;		/* cut */
	}
	if (len > ROCE_MAX_PACKET)
		rx_too_long(rd);
	else
		roce_rx_packet(rd, pkt, len);
}

/*
 * One batch of what fd has queued (objects lock held for reading): how
 * many datagrams it held, or -1 when the socket failed.
 */
static int rx_batch_take(struct roce_dev *rd, int fd, bool v6, struct rx_batch *b)
{
	struct msghdr *m;
	int n, i;

	rx_batch_arm(b, v6);
	n = recvmmsg(fd, b->msgs, RX_BATCH, MSG_DONTWAIT, NULL);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	for (i = 0; i < n; i++) {
		m = &b->msgs[i].msg_hdr;
		/* Truncated: longer than any packet we take. */
		if (m->msg_flags & MSG_TRUNC)
			rx_too_long(rd);
		else if (!v6)
			rx_ipv4(rd, b, b->buf[i], b->msgs[i].msg_len);
		/* IPv6 has no runs: longer than a packet is no packet */
		else if (IPV6_HDR_LEN + b->msgs[i].msg_len > ROCE_MAX_PACKET)
			rx_too_long(rd);
		else if (rx_ipv6_header(m, b->msgs[i].msg_len, b->buf[i]))
			roce_rx_packet(rd, b->buf[i],
				       IPV6_HDR_LEN + b->msgs[i].msg_len);
	}
	/* the batch's buffers are about to be reused; its ACKs go */
	roce_wrun_flush(rd);
	roce_ack_flush(rd);
	return n;
}

__thread struct roce_dev *roce_rx_self;

/*
 * The engine thread's turn at the device's sockets (engine/transport.h):
 * up to RX_BUDGET batches from each, so its doorbells wait little.
 */
static unsigned int rx_drain(struct ibvd_eng_rx *rx)
{
	struct roce_dev *rd = (struct roce_dev *)((char *)rx -
						  offsetof(struct roce_dev, rx));
	unsigned int taken = 0, i, k;
	int n;

	roce_rx_self = rd;
	rd->read_budget = ROCE_READ_DRAIN_BYTES;
	for (i = 0; i < 2; i++) {
		if (rx->fd[i] < 0)
			continue;
		for (k = 0; k < RX_BUDGET; k++) {
			n = rx_batch_take(rd, rx->fd[i], rx->fd[i] == rd->rx6_fd,
					  rd->rx_batch);
			if (n < 0) {
				/* a socket that failed is looked at no more */
				log_err("%s: receiving RoCE packets: %s", rd->ifname,
					strerror(errno));
				ibvd_eng_rx_drop_fd(rx, i);
			}
			if (n <= 0)
				break;
			taken += (unsigned int)n;
			if (n < RX_BATCH)
				break;
		}
	}
	roce_rx_self = NULL;
	return taken;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int roce_io_open(struct roce_dev *rd)
{
	int ret;

	rd->tx_fd = rd->rx_fd = rd->sink_fd = -1;
	rd->tx6_fd = rd->rx6_fd = rd->sink6_fd = -1;
	pthread_mutex_init(&rd->flows_lock, NULL);
	ret = open_tx(rd);
	if (ret == 0)
		ret = open_rx(rd);
	if (ret == 0)
		ret = open_sink(rd, AF_INET, &rd->sink_fd);
	if (ret == 0)
		ret = open_ipv6(rd);
	if (ret == 0) {
		rd->rx_batch = malloc(sizeof(*rd->rx_batch));
		if (!rd->rx_batch)
			ret = -ENOMEM;
	}
	if (ret == 0) {
		rd->rx.fd[0] = rd->rx_fd;
		rd->rx.fd[1] = rd->rx6_fd;
		rd->rx.drain = rx_drain;
		ret = ibvd_eng_rx_attach(&rd->rx);
	}
	if (ret < 0) {
		roce_io_close(rd);
		return ret;
	}
	rd->rx_attached = true;
	return 0;
}

/*
 * Swap the sockets of a and b (not the flows: those are made on use):
 * 0, or a negative errno when a's new rx sockets cannot be watched.
 */
static int swap_fds(struct roce_dev *a, struct roce_dev *b)
{
	int *fa[] = { &a->tx_fd, &a->sink_fd, &a->tx6_fd, &a->sink6_fd };
	int *fb[] = { &b->tx_fd, &b->sink_fd, &b->tx6_fd, &b->sink6_fd };
	int rx[2] = { b->rx_fd, b->rx6_fd };
	unsigned int i;
	int t, ret;

	for (i = 0; i < sizeof(fa) / sizeof(fa[0]); i++) {
		t = *fa[i];
		*fa[i] = *fb[i];
		*fb[i] = t;
	}
	ret = ibvd_eng_rx_swap_fds(&a->rx, rx);
	b->rx_fd = a->rx_fd;
	b->rx6_fd = a->rx6_fd;
	a->rx_fd = a->rx.fd[0];
	a->rx6_fd = a->rx.fd[1];
	return ret;
}

int roce_io_rebind(struct roce_dev *rd)
{
	struct roce_dev fresh = { .dev = rd->dev };
	unsigned int i;
	int ret;

	memcpy(fresh.ifname, rd->ifname, sizeof(fresh.ifname));
	fresh.tx_fd = fresh.rx_fd = fresh.sink_fd = -1;
	fresh.tx6_fd = fresh.rx6_fd = fresh.sink6_fd = -1;
	/* made beside the old ones: they are bound to another interface */
	ret = open_tx(&fresh);
	if (ret == 0)
		ret = open_rx(&fresh);
	if (ret == 0)
		ret = open_sink(&fresh, AF_INET, &fresh.sink_fd);
	if (ret == 0 && rd->tx6_fd >= 0)
		ret = open_ipv6(&fresh);
	if (ret == 0) {
		/* no pass runs under the write lock: none sends or drains */
		ibvd_objects_write_lock();
		ret = swap_fds(rd, &fresh);
		pthread_mutex_lock(&rd->flows_lock);
		for (i = 0; i < rd->nflows; i++)
			close_fd(&rd->flows[i].fd);
		rd->nflows = 0;
		pthread_mutex_unlock(&rd->flows_lock);
		ibvd_objects_write_unlock();
	}
	/* the old ones, or what was made of the new ones */
	close_fd(&fresh.tx_fd);
	close_fd(&fresh.rx_fd);
	close_fd(&fresh.sink_fd);
	close_fd(&fresh.tx6_fd);
	close_fd(&fresh.rx6_fd);
	close_fd(&fresh.sink6_fd);
	return ret;
}

void roce_io_close(struct roce_dev *rd)
{
	unsigned int i;

	if (rd->rx_attached) {
		ibvd_eng_rx_detach(&rd->rx);
		rd->rx_attached = false;
	}
	free(rd->rx_batch);
	rd->rx_batch = NULL;
	close_fd(&rd->tx_fd);
	close_fd(&rd->rx_fd);
	close_fd(&rd->sink_fd);
	close_fd(&rd->tx6_fd);
	close_fd(&rd->rx6_fd);
	close_fd(&rd->sink6_fd);
	for (i = 0; i < rd->nflows; i++)
		close_fd(&rd->flows[i].fd);
	free(rd->flows);
	rd->flows = NULL;
	rd->nflows = 0;
	pthread_mutex_destroy(&rd->flows_lock);
}
