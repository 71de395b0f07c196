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
 * a run; a shorter one with identification 0 may be a run of short
 * packets, and is taken for one if it cuts (io.c).  The segment size is
 * not on the wire: the size at whose every multiple a BTH for the same QP
 * and the next PSN starts, and whose first segment passes its ICRC, is
 * taken (segment_size).  A hostile datagram fails the segments' checks
 * and is dropped as any bad packet.  Only IPv4 runs: a raw IPv6 socket
 * receives no header to cut with.
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

	if (seg < ROCE_BTH_LEN + ROCE_ICRC_LEN || seg >= len ||
	    (len + seg - 1) / seg > ROCE_GSO_MAX_SEGS)
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
 * Is seg the segment size of the run pkt (IPv4 and UDP headers, then d)?
 * Its first segment, built in buf as segmentation made it (identification
 * id), passes its ICRC.
 */
static bool first_segment_ok(const uint8_t *pkt, size_t seg, uint16_t id,
			     uint8_t *buf)
{
	memcpy(buf, pkt, IPV4_UDP_LEN + seg);
	roce_ipv4_set_lengths(buf, seg);
	roce_ipv4_set_id(buf, id);
	return roce_icrc_ok(buf, IPV4_UDP_LEN + seg);
}

/* ICRCs a search may compute: a hostile datagram pays for a few only. */
#define GSO_SIZE_TRIES	4u

/* A search for the segment size of the run pkt (len bytes of UDP payload). */
struct size_search {
	const uint8_t *pkt;
	size_t len;
	uint16_t id;
	uint8_t *buf;		/* scratch: a segment is built here */
	size_t buf_len;
	unsigned int tries;
};

/* Is seg the size?  Its boundaries fit, and its first segment's ICRC. */
static bool size_fits(struct size_search *s, size_t seg)
{
	if (s->tries == GSO_SIZE_TRIES || seg >= s->len ||
	    IPV4_UDP_LEN + seg > s->buf_len ||
	    !cuts_at(s->pkt + IPV4_UDP_LEN, s->len, seg))
		return false;
	if (first_segment_ok(s->pkt, seg, s->id, s->buf))
		return true;
	s->tries++;
	return false;
}

/*
 * The size of one segment of the run pkt, whose UDP payload is len
 * bytes, or 0; buf (buf_len bytes) is scratch.  A message's packets but
 * its last carry one of the five path MTUs of payload, so those sizes are
 * tried first; packets of several messages are each as long as the first,
 * which may be any length: the other sizes (RoCE packets are whole 4-byte
 * words) follow, shortest first.  A size whose boundaries all fit is
 * taken once the first segment's ICRC says so: a payload holding the next
 * BTHs where a shorter segment would end does not make the run cut wrong
 * (and so lost again at every retransmission), nor does a packet that
 * only looks like a run (io.c).  Each size is refused at its first
 * boundary that does not fit, so the search costs about a compare per
 * word of the datagram, and at most GSO_SIZE_TRIES ICRCs.
 */
static size_t segment_size(const uint8_t *pkt, size_t len, uint16_t id,
			   uint8_t *buf, size_t buf_len)
{
	static const size_t mtus[] = { 4096, 2048, 1024, 512, 256 };
	struct size_search s = { pkt, len, id, buf, buf_len, 0 };
	size_t seg;
	unsigned int i;
	int hdrs;

	if (len < ROCE_BTH_LEN ||
	    (hdrs = roce_opcode_hdrs_len(pkt[IPV4_UDP_LEN])) < 0)
		return 0;
	for (i = 0; i < sizeof(mtus) / sizeof(mtus[0]); i++) {
		seg = (size_t)hdrs + mtus[i] + ROCE_ICRC_LEN;
		if (size_fits(&s, seg))
			return seg;
	}
	for (seg = ((size_t)hdrs + ROCE_ICRC_LEN + 3) & ~(size_t)3;
	     seg < len && s.tries < GSO_SIZE_TRIES; seg += 4)
		if (size_fits(&s, seg))
			return seg;
	return 0;
}

/*
 * A run of short packets is no longer than a packet, and its ICRC cannot
 * tell it from one: each of its packets ends with its own CRC, so whether
 * the whole passes as a packet depends only on its headers and shape,
 * and for some flows it always does.  Its identification can: 0, which a
 * run's datagram has (DF on an unconnected socket) and no packet of ours
 * (packet.c stamps them odd).
 */
bool roce_gso_maybe_run(const uint8_t *pkt, size_t len)
{
	return len > ROCE_MAX_PACKET ||
	       (len >= IPV4_UDP_LEN && pkt[4] == 0 && pkt[5] == 0);
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
	id = ip.ip_id;
	seg = segment_size(pkt, dlen, id, out, out_len);
	if (!seg)
		return -EBADMSG;
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
