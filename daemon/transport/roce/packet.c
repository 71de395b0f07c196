/*
 * Putting one packet together and on its way: IP and UDP headers, the
 * transport headers, the payload (from a private buffer, or gathered from
 * registered memory), pad and ICRC; then the wire, or, for one of the
 * device's own addresses, straight into its receive path.
 *
 * Packets go out in batches (struct roce_txq): a message's payload is read
 * from registered memory in one piece, and the batch is handed to the
 * kernel in one system call, which on a software device is most of what a
 * packet costs; a requester puts every packet of one turn in one batch,
 * so that small messages share the call too.  Runs of equal packets of
 * one QP with consecutive PSNs go as a single datagram the kernel cuts
 * (gso.c), which costs the IP stack and the link one packet's work for
 * the whole run: a long message's, or one packet each of many short
 * messages.
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "engine/transport.h"
#include "internal.h"

/*
 * A built packet's identification (IPv4: never 0, which the kernel would
 * replace, and the ICRC covers it) and ICRC, to go out on its own.
 */
static void stamp(struct roce_dev *rd, uint8_t *pkt, size_t len)
{
	if (pkt[0] >> 4 == 4)
		roce_ipv4_set_id(pkt, (uint16_t)(__atomic_add_fetch(
			&rd->ip_id, 1, __ATOMIC_RELAXED) | 1));
	roce_icrc_set(pkt, len);
}

/*
 * Build into buf (ROCE_MAX_PACKET bytes): p's headers and len payload
 * bytes, from data if it is not NULL, else from sgl at offset off, with
 * neither identification nor ICRC (stamp, or a run's).  Returns the
 * packet's length, 0 if sgl's memory failed.
 */
static size_t build(const struct roce_path *path, struct roce_pkt *p,
		    const void *data, const struct eng_sgl *sgl, uint64_t off,
		    uint32_t len, uint8_t *buf)
{
	struct roce_ip ip = {
		.family = path->family,
		.tclass = path->tclass,
		.hop_limit = path->hop_limit,
		.sport = path->sport,
		.dport = ROCE_UDP_PORT,
	};
	size_t iph, hdrs, udp_len;

	p->pad = (uint8_t)(-len & 3);
	memcpy(ip.src, path->src, 16);
	memcpy(ip.dst, path->dst, 16);
	hdrs = roce_encode(p, buf + roce_ip_hdrs_len(path->family));
	udp_len = hdrs + len + p->pad + ROCE_ICRC_LEN;
	iph = roce_build_ip(&ip, udp_len, buf);
	if (data)
		memcpy(buf + iph + hdrs, data, len);
	else if (len && ibvd_eng_copy_out(sgl, off, buf + iph + hdrs, len) < 0)
		return 0;
	memset(buf + iph + hdrs + len, 0, p->pad);
	return iph + udp_len;
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

/*
 * How many packets from i on follow packet i in PSN order, of its QP: a
 * receiver cuts a run by that (gso.c).
 */
static unsigned int txq_in_sequence(const struct roce_txq *q, unsigned int i)
{
	unsigned int k = i + 1;

	while (k < q->n && q->qpn[k] == q->qpn[i] &&
	       q->psn[k] == roce_psn_add(q->psn[i], k - i))
		k++;
	return k - i;
}

/* Packets from..to - 1 of q, one by one (a system call for them all). */
static void txq_send_packets(struct roce_txq *q, unsigned int from,
			     unsigned int to)
{
	const uint8_t *pkts[ROCE_TXQ_PKTS];
	unsigned int i;

	for (i = from; i < to; i++) {
		stamp(q->rd, txq_slot(q, i), q->len[i]);
		pkts[i - from] = txq_slot(q, i);
	}
	if (to > from)
		roce_io_send_batch(q->rd, pkts, q->len + from, to - from,
				   q->path->family, q->path->dst);
}

/* Send q's packets, runs of them as one datagram where they make one. */
static void txq_send(struct roce_txq *q)
{
	uint8_t *pkts[ROCE_TXQ_PKTS];
	unsigned int i, run, from = 0;

	for (i = 0; i < q->n; i++)
		pkts[i] = txq_slot(q, i);
	for (i = 0; q->path->family == AF_INET && i < q->n; i += run ? run : 1) {
		run = roce_gso_run_len(q->len + i, txq_in_sequence(q, i));
		if (!run)
			continue;
		/* what comes before it goes first */
		txq_send_packets(q, from, i);
		roce_gso_stamp_run(pkts + i, q->len + i, run);
		from = i;
		if (roce_io_send_run(q->rd, q->path, pkts + i, q->len + i, run) == 0)
			from = i + run;
	}
	txq_send_packets(q, from, q->n);
}

void roce_txq_flush(struct roce_txq *q)
{
	unsigned int i;

	/* as emit: a path that goes nowhere (no family) sends nothing */
	if (!q->n || !q->path->family) {
		q->n = 0;
		return;
	}
	if (roce_is_local(q->rd, q->path->family, q->path->dst)) {
		for (i = 0; i < q->n; i++) {
			stamp(q->rd, txq_slot(q, i), q->len[i]);
			roce_rx_local(q->rd, txq_slot(q, i), q->len[i]);
		}
	} else {
		txq_send(q);
	}
	q->n = 0;
}

void roce_txq_add(struct roce_txq *q, struct roce_pkt *p, const void *data,
		  uint32_t len)
{
	q->qpn[q->n] = p->dest_qp;
	q->psn[q->n] = p->psn;
	q->len[q->n] = build(q->path, p, data, NULL, 0, len, txq_slot(q, q->n));
	if (++q->n == ROCE_TXQ_PKTS)
		roce_txq_flush(q);
}

int roce_send_message(struct roce_txq *q,
		      const struct eng_sgl *sgl, uint64_t base, uint64_t len,
		      uint32_t mtu, uint32_t from, uint32_t npkts,
		      void (*headers)(void *arg, uint32_t k, struct roce_pkt *p),
		      void *arg)
{
	uint8_t stage[ROCE_TXQ_PKTS * ROCE_MAX_PAYLOAD];
	uint32_t k, i, n;
	uint64_t at, bytes;
	int ret = 0;

	for (k = from; k < npkts; k += n) {
		n = npkts - k < ROCE_TXQ_PKTS ? npkts - k : ROCE_TXQ_PKTS;
		at = (uint64_t)k * mtu;
		bytes = len - at < (uint64_t)n * mtu ? len - at : (uint64_t)n * mtu;
		if (bytes &&
		    (ret = ibvd_eng_copy_out(sgl, base + at, stage, bytes)) < 0)
			break;
		for (i = 0; i < n; i++) {
			uint64_t off = (uint64_t)i * mtu;
			struct roce_pkt p;

			headers(arg, k + i, &p);
			roce_txq_add(q, &p, stage + off,
				     (uint32_t)(bytes - off < mtu ? bytes - off : mtu));
		}
	}
	return ret;
}

static void emit(struct roce_dev *rd, const struct roce_path *path,
		 const uint8_t *buf, size_t len)
{
	/* a path that goes nowhere (no family) sends nothing */
	if (!path->family)
		return;
	if (roce_is_local(rd, path->family, path->dst))
		roce_rx_local(rd, buf, len);
	else if (path->no_wait)
		roce_io_send_now(rd, buf, len, path->dst);
	else
		roce_io_send(rd, buf, len, path->dst);
}

int roce_send_pkt(struct roce_dev *rd, const struct roce_path *path,
		  struct roce_pkt *p, const void *data, uint32_t len)
{
	uint8_t buf[ROCE_MAX_PACKET];
	size_t n = build(path, p, data, NULL, 0, len, buf);

	stamp(rd, buf, n);
	emit(rd, path, buf, n);
	return 0;
}

int roce_send_sgl(struct roce_dev *rd, const struct roce_path *path,
		  struct roce_pkt *p, const struct eng_sgl *sgl, uint64_t off,
		  uint32_t len)
{
	uint8_t buf[ROCE_MAX_PACKET];
	size_t n = build(path, p, NULL, sgl, off, len, buf);

	if (!n)
		return -EFAULT;
	stamp(rd, buf, n);
	emit(rd, path, buf, n);
	return 0;
}
