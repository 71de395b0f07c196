/*
 * Putting one packet together and on its way: IP and UDP headers, the
 * transport headers, the payload (from a private buffer, or gathered from
 * registered memory), pad and ICRC; then the wire, or, for one of the
 * device's own addresses, straight into its receive path.
 *
 * The packets of a message go out in batches (struct roce_txq): their
 * payload is read from registered memory in one piece, and the batch is
 * handed to the kernel in one system call, which on a software device is
 * most of what a packet costs.
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "engine/transport.h"
#include "internal.h"

/*
 * Build into buf (ROCE_MAX_PACKET bytes): p's headers and len payload
 * bytes, from data if it is not NULL, else from sgl at offset off.
 * Returns the packet's length, 0 if sgl's memory failed.
 */
static size_t build(struct roce_dev *rd, const struct roce_path *path,
		    struct roce_pkt *p, const void *data,
		    const struct eng_sgl *sgl, uint64_t off, uint32_t len,
		    uint8_t *buf)
{
	struct roce_ip ip = {
		.family = path->family,
		.tclass = path->tclass,
		.hop_limit = path->hop_limit,
		.sport = path->sport,
		.dport = ROCE_UDP_PORT,
	};
	size_t iph, hdrs, udp_len, total;

	p->pad = (uint8_t)(-len & 3);
	memcpy(ip.src, path->src, 16);
	memcpy(ip.dst, path->dst, 16);
	/* never 0: the kernel would choose one, and the ICRC covers it */
	if (path->family == AF_INET)
		ip.ip_id = __atomic_add_fetch(&rd->ip_id, 1, __ATOMIC_RELAXED) | 1;
	hdrs = roce_encode(p, buf + roce_ip_hdrs_len(path->family));
	udp_len = hdrs + len + p->pad + ROCE_ICRC_LEN;
	iph = roce_build_ip(&ip, udp_len, buf);
	if (data)
		memcpy(buf + iph + hdrs, data, len);
	else if (len && ibvd_eng_copy_out(sgl, off, buf + iph + hdrs, len) < 0)
		return 0;
	memset(buf + iph + hdrs + len, 0, p->pad);
	total = iph + udp_len;
	roce_icrc_set(buf, total);
	return total;
}

/* Where a built packet lies in the batch that sends it. */
static uint8_t *txq_slot(struct roce_txq *q, unsigned int i)
{
	return q->buf + (size_t)i * ROCE_TXQ_SLOT;
}

void roce_txq_init(struct roce_txq *q, struct roce_dev *rd,
		   const struct roce_path *path)
{
	q->rd = rd;
	q->path = path;
	q->n = 0;
}

void roce_txq_flush(struct roce_txq *q)
{
	const uint8_t *pkts[ROCE_TXQ_PKTS];
	unsigned int i;

	/* as emit: a path that goes nowhere (no family) sends nothing */
	if (!q->n || !q->path->family) {
		q->n = 0;
		return;
	}
	if (roce_is_local(q->rd, q->path->family, q->path->dst)) {
		for (i = 0; i < q->n; i++)
			roce_rx_packet(q->rd, txq_slot(q, i), q->len[i]);
	} else {
		for (i = 0; i < q->n; i++)
			pkts[i] = txq_slot(q, i);
		roce_io_send_batch(q->rd, pkts, q->len, q->n, q->path->family,
				   q->path->dst);
	}
	q->n = 0;
}

void roce_txq_add(struct roce_txq *q, struct roce_pkt *p, const void *data,
		  uint32_t len)
{
	q->len[q->n] = build(q->rd, q->path, p, data, NULL, 0, len,
			     txq_slot(q, q->n));
	if (++q->n == ROCE_TXQ_PKTS)
		roce_txq_flush(q);
}

static void emit(struct roce_dev *rd, const struct roce_path *path,
		 const uint8_t *buf, size_t len)
{
	/* a path that goes nowhere (no family) sends nothing */
	if (!path->family)
		return;
	if (roce_is_local(rd, path->family, path->dst))
		roce_rx_packet(rd, buf, len);
	else
		roce_io_send(rd, buf, len, path->dst);
}

int roce_send_pkt(struct roce_dev *rd, const struct roce_path *path,
		  struct roce_pkt *p, const void *data, uint32_t len)
{
	uint8_t buf[ROCE_MAX_PACKET];
	size_t n = build(rd, path, p, data, NULL, 0, len, buf);

	emit(rd, path, buf, n);
	return 0;
}

int roce_send_sgl(struct roce_dev *rd, const struct roce_path *path,
		  struct roce_pkt *p, const struct eng_sgl *sgl, uint64_t off,
		  uint32_t len)
{
	uint8_t buf[ROCE_MAX_PACKET];
	size_t n = build(rd, path, p, NULL, sgl, off, len, buf);

	if (!n)
		return -EFAULT;
	emit(rd, path, buf, n);
	return 0;
}
