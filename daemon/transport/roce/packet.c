/*
 * Putting one packet together and on its way: IP and UDP headers, the
 * transport headers, the payload (from a private buffer, or gathered from
 * registered memory), pad and ICRC; then the wire, or, for one of the
 * device's own addresses, straight into its receive path.
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
		.family = AF_INET,
		.tclass = path->tclass,
		.hop_limit = path->hop_limit,
		.sport = path->sport,
		.dport = ROCE_UDP_PORT,
	};
	size_t iph, hdrs, udp_len, total;

	p->pad = (uint8_t)(-len & 3);
	memcpy(ip.src, path->src, 4);
	memcpy(ip.dst, path->dst, 4);
	/* never 0: the kernel would choose one, and the ICRC covers it */
	ip.ip_id = __atomic_add_fetch(&rd->ip_id, 1, __ATOMIC_RELAXED) | 1;
	hdrs = roce_encode(p, buf + 28);
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

static void emit(struct roce_dev *rd, const struct roce_path *path,
		 const uint8_t *buf, size_t len)
{
	if (roce_is_local(rd, path->dst))
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
