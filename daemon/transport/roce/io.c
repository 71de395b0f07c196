/*
 * A RoCE device's sockets and its receive thread.
 *
 * Sending: one raw IPv4 socket with IP_HDRINCL per device; the packet is
 * complete when it is handed over (the ICRC covers the IP header), and the
 * kernel routes it and resolves the neighbour.  Receiving: a raw socket of
 * protocol UDP sees a copy of every UDP datagram with its IP header; a
 * classic BPF program keeps those to port 4791.  A UDP socket bound to
 * 4791 stands beside it so that the kernel has a taker for the port and
 * answers no ICMP port-unreachable; its own filter drops everything.
 *
 * The receive thread takes packets in batches (recvmmsg) and hands each to
 * rx.c with ibvd_objects_lock held for reading, once per batch, as an
 * engine pass does.
 */
#include <config.h>

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include "core/objects.h"
#include "internal.h"
#include "log.h"

/* Packets one receive call takes. */
#define RX_BATCH	16
/*
 * Socket buffers: a step of a message is up to 128 packets sent at once
 * (a 128 KiB chunk at MTU 1024), and a packet costs its socket about
 * twice its size; the defaults (~200 KiB) drop part of every such burst.
 */
#define IO_BUFFER_BYTES	(8u << 20)
/* How long a sender waits for room in a full send buffer. */
#define IO_SEND_WAIT_MS	10

/* Keep IPv4 datagrams whose UDP destination port is 4791. */
static struct sock_filter roce_port_code[] = {
	/* X = IPv4 header length */
	BPF_STMT(BPF_LDX | BPF_B | BPF_MSH, 0),
	/* UDP destination port */
	BPF_STMT(BPF_LD | BPF_H | BPF_IND, 2),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ROCE_UDP_PORT, 0, 1),
	BPF_STMT(BPF_RET | BPF_K, 0x40000),
	BPF_STMT(BPF_RET | BPF_K, 0),
};

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

static int open_tx(struct roce_dev *rd)
{
	int fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
	int ret;

	if (fd < 0)
		return -errno;
	ret = bind_to(fd, rd->ifname);
	if (ret < 0) {
		close(fd);
		return ret;
	}
	grow_buffer(fd, SO_SNDBUFFORCE, SO_SNDBUF);
	rd->tx_fd = fd;
	return 0;
}

static int open_rx(struct roce_dev *rd)
{
	int fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_UDP);
	int ret;

	if (fd < 0)
		return -errno;
	/* The filter first: nothing else may queue before it is in place. */
	ret = set_filter(fd, roce_port_code,
			 sizeof(roce_port_code) / sizeof(roce_port_code[0]));
	if (ret == 0)
		ret = bind_to(fd, rd->ifname);
	if (ret < 0) {
		close(fd);
		return ret;
	}
	grow_buffer(fd, SO_RCVBUFFORCE, SO_RCVBUF);
	rd->rx_fd = fd;
	return 0;
}

static int open_sink(struct roce_dev *rd)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_port = htons(ROCE_UDP_PORT),
		.sin_addr.s_addr = htonl(INADDR_ANY),
	};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP);
	int one = 1, ret;

	if (fd < 0)
		return -errno;
	ret = set_filter(fd, drop_all_code, 1);
	if (ret == 0)
		ret = bind_to(fd, rd->ifname);
	/* Another device's sink may hold the port on another netdev. */
	if (ret == 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
				   sizeof(one)) < 0)
		ret = -errno;
	if (ret == 0 && bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		ret = -errno;
	if (ret < 0) {
		close(fd);
		return ret;
	}
	rd->sink_fd = fd;
	return 0;
}

int roce_io_send(struct roce_dev *rd, const uint8_t *pkt, size_t len,
		 const uint8_t dst[4])
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct pollfd pfd = { .fd = rd->tx_fd, .events = POLLOUT };
	bool waited = false;
	ssize_t n;

	memcpy(&sin.sin_addr, dst, 4);
	/*
	 * A full send buffer holds the sender back a moment, as a NIC's full
	 * transmit ring does, but never for long: a link without carrier
	 * drains nothing, and an engine thread must not hang on it.  No
	 * neighbour, no route, still full: the packet is lost, as on a wire,
	 * and the retry timer sends it again.
	 */
	for (;;) {
		n = sendto(rd->tx_fd, pkt, len, MSG_DONTWAIT,
			   (struct sockaddr *)&sin, sizeof(sin));
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

void roce_io_send_batch(struct roce_dev *rd, const uint8_t *const *pkts,
			const size_t *lens, unsigned int n, const uint8_t dst[4])
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct pollfd pfd = { .fd = rd->tx_fd, .events = POLLOUT };
	struct mmsghdr msgs[ROCE_TXQ_PKTS];
	struct iovec iov[ROCE_TXQ_PKTS];
	unsigned int i, done = 0;
	bool waited = false;
	int ret;

	memcpy(&sin.sin_addr, dst, 4);
	memset(msgs, 0, sizeof(msgs));
	for (i = 0; i < n && i < ROCE_TXQ_PKTS; i++) {
		iov[i].iov_base = (void *)pkts[i];
		iov[i].iov_len = lens[i];
		msgs[i].msg_hdr.msg_name = &sin;
		msgs[i].msg_hdr.msg_namelen = sizeof(sin);
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	n = i;
	/* As roce_io_send: a full buffer is waited for once, briefly. */
	while (done < n) {
		ret = sendmmsg(rd->tx_fd, msgs + done, n - done, MSG_DONTWAIT);
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

struct rx_batch {
	struct mmsghdr msgs[RX_BATCH];
	struct iovec iov[RX_BATCH];
	uint8_t buf[RX_BATCH][ROCE_MAX_PACKET];
};

static void rx_batch_init(struct rx_batch *b)
{
	unsigned int i;

	memset(b->msgs, 0, sizeof(b->msgs));
	for (i = 0; i < RX_BATCH; i++) {
		b->iov[i].iov_base = b->buf[i];
		b->iov[i].iov_len = sizeof(b->buf[i]);
		b->msgs[i].msg_hdr.msg_iov = &b->iov[i];
		b->msgs[i].msg_hdr.msg_iovlen = 1;
	}
}

/* Take what is queued, one batch at a time; false when the socket failed. */
static bool rx_drain(struct roce_dev *rd, struct rx_batch *b)
{
	int n, i;

	for (;;) {
		n = recvmmsg(rd->rx_fd, b->msgs, RX_BATCH, MSG_DONTWAIT, NULL);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		pthread_rwlock_rdlock(&ibvd_objects_lock);
		for (i = 0; i < n; i++)
			/* Truncated: longer than any packet we take. */
			if (!(b->msgs[i].msg_hdr.msg_flags & MSG_TRUNC))
				roce_rx_packet(rd, b->buf[i], b->msgs[i].msg_len);
		/* the batch's buffers are about to be reused */
		roce_wrun_flush(rd);
		pthread_rwlock_unlock(&ibvd_objects_lock);
		if (n < RX_BATCH)
			return true;
	}
}

__thread struct roce_dev *roce_rx_self;

static void *rx_main(void *arg)
{
	struct roce_dev *rd = arg;
	struct rx_batch *b = malloc(sizeof(*b));
	struct pollfd pfd[2] = {
		{ .fd = rd->rx_fd, .events = POLLIN },
		{ .fd = rd->stop_fd, .events = POLLIN },
	};

	if (!b) {
		log_err("%s: no memory for the receive thread", rd->ifname);
		return NULL;
	}
	rx_batch_init(b);
	roce_rx_self = rd;
	for (;;) {
		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			break;
		if (pfd[1].revents)
			break;
		if (pfd[0].revents && !rx_drain(rd, b)) {
			log_err("%s: receiving RoCE packets: %s", rd->ifname,
				strerror(errno));
			break;
		}
	}
	free(b);
	return NULL;
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

	rd->tx_fd = rd->rx_fd = rd->sink_fd = rd->stop_fd = -1;
	ret = open_tx(rd);
	if (ret == 0)
		ret = open_rx(rd);
	if (ret == 0)
		ret = open_sink(rd);
	if (ret == 0) {
		rd->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (rd->stop_fd < 0)
			ret = -errno;
	}
	if (ret == 0)
		ret = -pthread_create(&rd->rx_thread, NULL, rx_main, rd);
	if (ret < 0) {
		roce_io_close(rd);
		return ret;
	}
	rd->rx_running = true;
	pthread_setname_np(rd->rx_thread, "ibvd-roce-rx");
	return 0;
}

void roce_io_close(struct roce_dev *rd)
{
	uint64_t one = 1;

	if (rd->rx_running) {
		if (write(rd->stop_fd, &one, sizeof(one)) < 0)
			log_err("%s: stopping the receive thread: %s", rd->ifname,
				strerror(errno));
		pthread_join(rd->rx_thread, NULL);
		rd->rx_running = false;
	}
	close_fd(&rd->tx_fd);
	close_fd(&rd->rx_fd);
	close_fd(&rd->sink_fd);
	close_fd(&rd->stop_fd);
}
