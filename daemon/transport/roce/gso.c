/*
 * Runs of RoCE packets as one UDP datagram (Linux's UDP segmentation
 * offload, UDP_SEGMENT), both ways.
 *
 * Sending: the packets of a message step go out in batches (packet.c);
 * within a batch, a run of packets of equal length (the last may be
 * shorter) is handed to the kernel as one datagram to be cut every
 * gso_size bytes (io.c, roce_io_send_run): one trip through the IP stack
 * and the link for the run instead of one per packet.  The ICRC covers the
 * IPv4 header, identification included, so each packet is built with the
 * header its segment will have: DF set, which makes an unconnected
 * socket's datagram take identification 0, and segmentation numbers the
 * segments 0, 1, 2, ... (Linux's inet_gso_segment); total and UDP lengths
 * are each segment's own.  A run is sent so only when it is longer than
 * any single packet (ROCE_GSO_MIN), so a receiver can tell one from a
 * packet.
 *
 * Receiving: a link that does not cut datagrams (a veth between two
 * namespaces passes them whole) delivers the run as one IP packet, and the
 * draining thread cuts it as the kernel would have: segment i gets the
 * header above, and each is then parsed, checked (ICRC included) and
 * handled as if it had come alone.  The segment size is not on the wire.
 * Every segment but the last is a whole packet of one message, so it is
 * the headers of the first one's opcode, one of the five path MTUs of
 * payload and the ICRC; the size whose next segment starts with a BTH for
 * the same QP and the next PSN is taken.  A wrong guess, or a hostile
 * datagram, fails the segments' checks and is dropped as any bad packet.
 * Only IPv4 runs: a raw IPv6 socket receives no header to cut with.
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
	/* too short to tell from a packet: as packets */
	if (k < 2 || IPV4_UDP_LEN + total < ROCE_GSO_MIN)
		return 0;
	return k;
}

/* The size of one segment of the run whose UDP payload is d (len bytes). */
static size_t segment_size(const uint8_t *d, size_t len)
{
	static const size_t mtus[] = { 4096, 2048, 1024, 512, 256 };
	int hdrs = roce_opcode_hdrs_len(d[0]);
	uint32_t psn;
	size_t seg;
	unsigned int i;

	if (hdrs < 0 || len < ROCE_BTH_LEN)
		return 0;
	psn = get_be24(d + BTH_PSN);
	for (i = 0; i < sizeof(mtus) / sizeof(mtus[0]); i++) {
		seg = (size_t)hdrs + mtus[i] + ROCE_ICRC_LEN;
		if (seg + ROCE_BTH_LEN > len)
			continue;
		if (memcmp(d + seg + BTH_DEST_QP, d + BTH_DEST_QP, 3) == 0 &&
		    get_be24(d + seg + BTH_PSN) == ((psn + 1) & 0xFFFFFFu))
			return seg;
	}
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
