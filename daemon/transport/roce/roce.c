/*
 * The RoCEv2 transport (engine/transport.h): QPs of a device bound to a
 * netdev reach their peers with IBTA transport packets over UDP port 4791,
 * as Linux rxe and RoCE NICs do.  Addresses are GIDs: a QP's source is the
 * IP address of its GID index, its destination the IP of the path's or the
 * AH's destination GID.
 *
 * A destination that is one of the device's own addresses is a peer on
 * this device: as a NIC's loopback does, its messages never reach the
 * wire.  RC and UC peers there are served by the same-daemon transport;
 * UD datagrams are built and received as packets, so that receivers see
 * what a datagram from the wire brings (its IP header in the GRH slot).
 * A datagram to a multicast group goes both ways: to the wire, and to
 * the group's members on this device (mcast.c).
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/device.h"
#include "core/roce.h"
#include "engine/transport.h"
#include "internal.h"
#include "log.h"
#include "transport/gsi.h"
#include "transport/transport.h"

/* Headroom of a packet being built: IP, UDP, BTH, DETH, ImmDt. */
#define UD_HDRS		(ROCE_MAX_IP_HDRS + ROCE_BTH_LEN + 8 + 4)

static struct roce_dev *roce_of(const struct ibvd_qp *qp)
{
	return qp->ctx->dev->transport_priv;
}

/*
 * The address of GID index i of the QP's port (as struct roce_path keeps
 * it) and its family, or 0 for an empty or absent entry.
 */
static int gid_addr(const struct ibvd_qp *qp, unsigned int i, uint8_t ip[16])
{
	const struct ibvd_device *dev = qp->ctx->dev;
	const struct ibvd_port *port = ibvd_device_port(dev, 1);
	static const uint8_t zero[16];
	struct ibvd_gid gid;

	if (!port || ibvd_device_gid(dev, port, i, &gid) < 0 ||
	    !memcmp(gid.raw, zero, 16))
		return 0;
	roce_gid_to_ip(gid.raw, ip);
	return roce_gid_family(gid.raw);
}

bool roce_is_local(const struct roce_dev *rd, int family, const uint8_t *addr)
{
	uint8_t gid[16];
	unsigned int i;

	if (!rd->dev->roce.gids)
		return false;
	roce_ip_to_gid(family, addr, gid);
	for (i = 0; i < rd->dev->roce.ngids; i++)
		if (!memcmp(rd->dev->roce.gids[i].raw, gid, 16))
			return true;
	return false;
}

/* The destination of a GID-addressed peer is this device itself. */
static bool dgid_local(const struct ibvd_qp *qp, const struct ibvd_av *av)
{
	uint8_t addr[16];

	if (!av->is_global)
		return false;
	roce_gid_to_ip(av->dgid, addr);
	return roce_is_local(roce_of(qp), roce_gid_family(av->dgid), addr);
}

/* ---- RC and UC ---------------------------------------------------------- */

static enum eng_resp roce_send(struct ibvd_engine *eng, struct ibvd_qp *src,
			       const struct eng_req *req, uint8_t *rnr_timer)
{
	if (dgid_local(src, &src->attr.av))
		return ibvd_transport_local.send(eng, src, req, rnr_timer);
	return roce_rc_send(eng, src, req, rnr_timer);
}

void roce_qp_path(const struct ibvd_qp *qp, struct roce_path *path)
{
	const struct ibvd_av *av = &qp->attr.av;
	int family;

	memset(path, 0, sizeof(*path));
	/* a path from an empty GID, or across families, goes nowhere */
	family = gid_addr(qp, av->sgid_index, path->src);
	if (!family || roce_gid_family(av->dgid) != family)
		return;
	path->family = family;
	roce_gid_to_ip(av->dgid, path->dst);
	path->tclass = av->traffic_class;
	path->hop_limit = av->hop_limit;
	path->sport = roce_udp_sport_connected(av->flow_label, qp->qp_num,
					       qp->attr.dest_qp_num);
}

static struct ibvd_qp *roce_peer(const struct ibvd_qp *qp)
{
	return dgid_local(qp, &qp->attr.av) ? ibvd_transport_local.peer(qp) : NULL;
}

/* ---- UD --------------------------------------------------------------- */

/* The port's active MTU in bytes: UD payloads above it never leave. */
static uint32_t port_mtu_bytes(const struct ibvd_qp *qp)
{
	/* enum ibv_mtu: IBV_MTU_256 is 1 */
	return 128u << ibvd_roce_mtu(qp->ctx->dev->roce.netdev.mtu);
}

/* BTH, DETH and ImmDt of src's datagram. */
static void ud_headers(struct ibvd_qp *src, const struct eng_req *req,
		       struct roce_pkt *p)
{
	bool imm = req->w.opcode == IBV_WR_SEND_WITH_IMM;
	uint32_t qkey = req->w.remote_qkey;

	roce_pkt_init(p, imm ? ROCE_UD_SEND_ONLY_IMM : ROCE_UD_SEND_ONLY);
	p->se = req->w.send_flags & IBV_SEND_SOLICITED;
	p->dest_qp = req->w.remote_qpn & 0xFFFFFFu;
	p->psn = src->wire_psn++ & 0xFFFFFFu;
	p->pad = (uint8_t)(-req->length & 3);
	/* IBTA: a Q_Key with the high bit set means the QP's own. */
	if (qkey & 0x80000000u)
		qkey = src->attr.qkey;
	p->deth.qkey = qkey;
	p->deth.src_qp = src->qp_num;
	/* imm_data is stored as the wire carries it. */
	if (imm)
		p->imm = be32toh(req->w.imm_data);
}

/*
 * Build src's datagram into buf: the whole IP packet, ICRC included.
 * Returns its length, or 0 if src's memory failed (*status says).
 */
static size_t ud_build(struct ibvd_qp *src, const struct eng_req *req,
		       int family, const uint8_t sip[16], const uint8_t dip[16],
		       uint8_t *buf, enum ibv_wc_status *status)
{
	struct roce_dev *rd = roce_of(src);
	const struct ibvd_av *av = &req->w.av;
	struct roce_ip ip = { .family = family };
	struct roce_pkt p;
	size_t hdrs, iph, udp_len, total;

	ud_headers(src, req, &p);
	hdrs = roce_encode(&p, buf + roce_ip_hdrs_len(family));
	udp_len = hdrs + req->length + p.pad + ROCE_ICRC_LEN;
	memcpy(ip.src, sip, 16);
	memcpy(ip.dst, dip, 16);
	ip.tclass = av->traffic_class;
	/*
	 * The AH's: the route's for a unicast destination, resolved when the
	 * AH was made (verbs/ah.c), as rxe sends what its AH holds.  A client
	 * that writes another into its WQE changes only its own datagrams.
	 */
	ip.hop_limit = av->hop_limit;
	/* never 0: the kernel would choose one, and the ICRC covers it */
	ip.ip_id = __atomic_add_fetch(&rd->ip_id, 1, __ATOMIC_RELAXED) | 1;
	ip.sport = roce_udp_sport(src->qp_num);
	ip.dport = ROCE_UDP_PORT;
	iph = roce_build_ip(&ip, udp_len, buf);
	if (ibvd_eng_copy_out(&req->local, 0, buf + iph + hdrs, req->length) < 0) {
		*status = IBV_WC_LOC_PROT_ERR;
		return 0;
	}
	total = iph + udp_len;
	memset(buf + iph + hdrs + req->length, 0, p.pad);
	roce_icrc_set(buf, total);
	return total;
}

static enum eng_ud roce_send_ud(struct ibvd_engine *eng, struct ibvd_qp *src,
				const struct eng_req *req,
				enum ibv_wc_status *status)
{
	const struct ibvd_av *av = &req->w.av;
	uint8_t buf[UD_HDRS + ROCE_MAX_PAYLOAD + 3 + ROCE_ICRC_LEN];
	uint8_t sip[16], dip[16];
	size_t len;
	int family;

	(void)eng;
	ibvd_eng_count_request(src, req);
	/*
	 * As rxe: larger than the port's MTU, or with no route of ours (no
	 * GRH, an empty source GID, a destination of the other family), the
	 * datagram is dropped and the send still completes.  Any length
	 * above the MTU, beyond the largest payload too: IBTA C10-93.1.1
	 * wants no error for it, and one would move the QP to SQE.
	 */
	if (req->length > port_mtu_bytes(src) || !av->is_global)
		return UD_SENT;
	/* never above the MTU (4096 at most); buf is sized by it */
	if (req->length > ROCE_MAX_PAYLOAD) {
		*status = IBV_WC_LOC_LEN_ERR;
		return UD_FAILED;
	}
	family = gid_addr(src, av->sgid_index, sip);
	if (!family || roce_gid_family(av->dgid) != family)
		return UD_SENT;
	roce_gid_to_ip(av->dgid, dip);
	len = ud_build(src, req, family, sip, dip, buf, status);
	if (!len)
		return UD_FAILED;	/* ud_build said why */
	/* A group's members on this device take it as the wire's do. */
	if (roce_ip_is_multicast(family, dip)) {
		roce_io_send(roce_of(src), buf, len, dip);
		roce_rx_local(roce_of(src), buf, len);
	} else if (roce_is_local(roce_of(src), family, dip)) {
		roce_rx_local(roce_of(src), buf, len);
	} else {
		roce_io_send(roce_of(src), buf, len, dip);
	}
	return UD_SENT;
}

/* ---- QP1 ------------------------------------------------------------------ */

/*
 * One MAD from QP1 to the peer's GSI QP, as rxe's QP1 sends it: UD
 * SEND_ONLY, the GSI Q_Key, QP1's UDP source port; over the family of its
 * GIDs (an IPv6 one is its own address, an IPv4 one ::ffff:a.b.c.d).
 * Never waiting for room in the socket: the control thread sends it, and
 * a peer whose every REQ earns a reply must not hold every tenant's
 * requests 10 ms a MAD while engine threads fill the device's socket.
 */
static int roce_send_mad(const struct ibvd_mad *mad)
{
	struct roce_dev *rd = mad->dev->transport_priv;
	struct roce_path path = {
		.tclass = mad->traffic_class,
		.hop_limit = mad->hop_limit,
		.sport = roce_udp_sport(1),
		.no_wait = true,
	};
	struct roce_pkt p;
	int family;

	if (!rd)
		return -ENODEV;
	family = roce_gid_family(mad->local_gid);
	if (roce_gid_family(mad->remote_gid) != family ||
	    (family == AF_INET6 && rd->tx6_fd < 0))
		return -EAFNOSUPPORT;
	path.family = family;
	roce_gid_to_ip(mad->local_gid, path.src);
	roce_gid_to_ip(mad->remote_gid, path.dst);
	roce_pkt_init(&p, ROCE_UD_SEND_ONLY);
	p.dest_qp = mad->remote_qpn & 0xFFFFFFu;
	p.psn = __atomic_fetch_add(&rd->gsi_psn, 1, __ATOMIC_RELAXED) & 0xFFFFFFu;
	p.deth.qkey = ROCE_GSI_QKEY;
	p.deth.src_qp = 1;
	return roce_send_pkt(rd, &path, &p, mad->data, IBVD_MAD_LEN);
}

/* ---- devices ------------------------------------------------------------ */

static int roce_dev_open(struct ibvd_device *dev)
{
	struct roce_dev *rd = calloc(1, sizeof(*rd));
	int ret;

	if (!rd)
		return -ENOMEM;
	rd->dev = dev;
	snprintf(rd->ifname, sizeof(rd->ifname), "%s", dev->roce.netdev.ifname);
	ret = roce_io_open(rd);
	if (ret < 0) {
		log_err("%s: RoCE on %s: %s", dev->name, rd->ifname, strerror(-ret));
		free(rd);
		return ret;
	}
	dev->transport_priv = rd;
	return 0;
}

static void roce_dev_close(struct ibvd_device *dev)
{
	struct roce_dev *rd = dev->transport_priv;

	if (!rd)
		return;
	roce_io_close(rd);
	roce_mcast_close(rd);
	/* Detached from its engine: nothing more arrives from dev. */
	ibvd_gsi_purge(dev);
	free(rd);
	dev->transport_priv = NULL;
}

static int roce_dev_rebind(struct ibvd_device *dev)
{
	struct roce_dev *rd = dev->transport_priv;
	int ret;

	if (!rd)
		return 0;
	ret = roce_io_rebind(rd);
	if (ret == 0)
		roce_mcast_rebind(rd, dev->roce.netdev.ifindex);
	return ret;
}

const struct ibvd_transport ibvd_transport_roce = {
	.name = "roce",
	.dev_open = roce_dev_open,
	.dev_close = roce_dev_close,
	.dev_rebind = roce_dev_rebind,
	.send = roce_send,
	.send_ud = roce_send_ud,
	.peer = roce_peer,
	.qp_prepare = roce_rc_prepare,
	.qp_forget = roce_rc_forget,
	.qp_av_changed = roce_rc_av_changed,
	.qp_psns = roce_rc_psns,
	.turn_done = roce_rc_turn_done,
	.send_mad = roce_send_mad,
	.mcast_join = roce_mcast_join,
	.mcast_leave = roce_mcast_leave,
};
