/*
 * Runs of RoCE packets as one UDP datagram (Linux's UDP segmentation
 * offload, UDP_SEGMENT), both ways.
 *
 * Sending: a requester's packets go out in batches (packet.c); within a
 * batch, a run of packets of one QP with consecutive PSNs and equal
 * lengths (the last may be shorter) is handed to the kernel as one
 * datagram to be cut every gso_size bytes (io.c, roce_io_send_run): one
 * trip through the IP stack and the link for the run instead of one per
 * packet, whether its packets are one message's or one each of many small
 * ones.  The ICRC covers the IPv4 header, identification included, so
 * each packet is built with the header its segment will have: DF set,
 * which makes an unconnected socket's datagram take identification 0, and
 * segmentation numbers the segments 0, 1, 2, ... (Linux's
 * inet_gso_segment); total and UDP lengths are each segment's own.
 *
 * Receiving: a link that does not cut datagrams (a veth between two
 * namespaces passes them whole) delivers the run as one IP packet, and the
 * draining thread cuts it as the kernel would have: segment i gets the
 * header above, and each is then parsed, checked (ICRC included) and
 * handled as if it had come alone.  A datagram longer than any packet is
 * a run; a shorter one is a packet unless its ICRC fails (io.c), and then
 * it may be a run of short packets.  The segment size is not on the wire:
 * the size at whose every multiple a BTH for the same QP and the next PSN
 * starts is taken (segment_size).  A wrong guess, or a hostile datagram,
 * fails the segments' checks and is dropped as any bad packet.  Only IPv4
 * runs: a raw IPv6 socket receives no header to cut with.
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "be.h"
#include "internal.h"

#define IPV4_UDP_LEN	28
#define BTH_DEST_QP	5	/* BTH offsets: the destination QP's 3 bytes */
#define BTH_PSN		9	/* and the PSN's */

void roce_gso_stamp_run(uint8_t *const *pkts, const size_t *lens,
			unsigned int n)
{
	unsigned int k;

	for (k = 0; k < n; k++) {
		roce_ipv4_set_id(pkts[k], (uint16_t)k);
		roce_icrc_set(pkts[k], lens[k]);
	}
}

unsigned int roce_gso_run_len(const size_t *lens, unsigned int n)
{
	size_t total = 0;
	unsigned int k;

	if (n < 2)
		return 0;
	for (k = 0; k < n; k++) {
		if (lens[k] > lens[0] || IPV4_UDP_LEN + total +
		    (lens[k] - IPV4_UDP_LEN) > ROCE_GSO_MAX)
			break;
		total += lens[k] - IPV4_UDP_LEN;
		/* a shorter one ends the run */
		if (lens[k] < lens[0]) {
			k++;
			break;
		}
	}
	/* a run costs a system call of its own: one of a few short packets
	 * would cost more than their trips through the stack */
	if (k < ROCE_GSO_MIN_PKTS && IPV4_UDP_LEN + total <= ROCE_MAX_PACKET)
		return 0;
	return k < 2 ? 0 : k;
}

/*
 * Would the run whose UDP payload is d (len bytes) be cut into segments
 * of seg bytes?  At every seg bytes a BTH for the first one's QP and its
 * next PSN, and a last segment no longer than the others and no shorter
 * than a packet.
 */
static bool cuts_at(const uint8_t *d, size_t len, size_t seg)
{
	uint32_t psn = get_be24(d + BTH_PSN);
	size_t at;
	uint32_t k;

	if (seg < ROCE_BTH_LEN + ROCE_ICRC_LEN || seg >= len)
		return false;
	for (at = seg, k = 1; at < len; at += seg, k++) {
		if (len - at < ROCE_BTH_LEN + ROCE_ICRC_LEN ||
		    roce_opcode_hdrs_len(d[at]) < 0 ||
		    memcmp(d + at + BTH_DEST_QP, d + BTH_DEST_QP, 3) != 0 ||
		    get_be24(d + at + BTH_PSN) != ((psn + k) & 0xFFFFFFu))
			return false;
	}
	return true;
}

/*
 * The size of one segment of the run whose UDP payload is d (len bytes),
 * or 0.  A message's packets but its last carry one of the five path
 * MTUs of payload, so those sizes are tried first; packets of several
 * messages are each as long as the first, which may be any length: the
 * other sizes (RoCE packets are whole 4-byte words) follow, shortest
 * first.  A wrong size that passed (a payload that holds the next BTHs
 * where a shorter segment would end) fails the cut packets' ICRCs.  Each
 * size is refused at its first boundary that does not fit, so the search
 * costs about a compare per word of the datagram.
 */
static size_t segment_size(const uint8_t *d, size_t len)
{
	static const size_t mtus[] = { 4096, 2048, 1024, 512, 256 };
	int hdrs = roce_opcode_hdrs_len(d[0]);
	size_t seg;
	unsigned int i;

	if (hdrs < 0 || len < ROCE_BTH_LEN)
		return 0;
	for (i = 0; i < sizeof(mtus) / sizeof(mtus[0]); i++) {
		seg = (size_t)hdrs + mtus[i] + ROCE_ICRC_LEN;
		if (cuts_at(d, len, seg))
			return seg;
	}
	for (seg = ((size_t)hdrs + ROCE_ICRC_LEN + 3) & ~(size_t)3; seg < len;
	     seg += 4)
		if (cuts_at(d, len, seg))
			return seg;
	return 0;
}

int roce_gso_split(const uint8_t *pkt, size_t len, uint8_t *out,
		   size_t out_len, const struct roce_gso_sink *sink)
{
	struct roce_ip ip;
	size_t off, dlen, seg, at, n, used = 0;
	uint16_t id;
	unsigned int i;

	if (roce_parse_ip(pkt, len, &ip, &off, &dlen) < 0 ||
	    ip.family != AF_INET || off != IPV4_UDP_LEN)
		return -EBADMSG;
	seg = segment_size(pkt + off, dlen);
	if (!seg || IPV4_UDP_LEN + seg > out_len)
		return -EBADMSG;
	id = ip.ip_id;
	for (i = 0, at = 0; at < dlen; i++, at += n) {
		uint8_t *p;

		n = dlen - at < seg ? dlen - at : seg;
		if (used + IPV4_UDP_LEN + n > out_len) {
			sink->reuse(sink->arg);
			used = 0;
		}
		p = out + used;
		used += (IPV4_UDP_LEN + n + 7) & ~(size_t)7;
		memcpy(p, pkt, IPV4_UDP_LEN);
		memcpy(p + IPV4_UDP_LEN, pkt + off + at, n);
		roce_ipv4_set_lengths(p, n);
		roce_ipv4_set_id(p, (uint16_t)(id + i));
		sink->packet(sink->arg, p, IPV4_UDP_LEN + n);
	}
	return 0;
}
