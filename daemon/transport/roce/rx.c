/*
 * An arriving RoCEv2 packet: checked as rxe checks one (IP and UDP
 * lengths, ICRC, BTH version, an opcode we speak, the default P_Key, a
 * destination QP of this device that may take it), then handed to the
 * engine's responder.
 * Everything else is dropped without a word, as a NIC drops what is not
 * for it: the network is hostile, and an answer would be an amplifier.
 */
#include <config.h>

#include <endian.h>
#include <string.h>
#include <sys/socket.h>

#include "core/device.h"
#include "core/host_addrs.h"
#include "core/objects.h"
#include "core/roce.h"
#include "engine/transport.h"
#include "internal.h"
#include "transport/gsi.h"

/* A UD QP of rd's device that a datagram to qpn may reach, or NULL. */
static struct ibvd_qp *ud_target(const struct roce_dev *rd, uint32_t qpn)
{
	struct ibvd_qp *qp = ibvd_qp_by_num(qpn);

	if (!qp || qp->ctx->dev != rd->dev || qp->qp_type != IBV_QPT_UD)
		return NULL;
	return qp;
}

/*
 * The 40 bytes a UD receive buffer starts with: the IPv6 header as it
 * arrived, or for IPv4 20 zero bytes then the IPv4 header (consumers find
 * it at offset 20).
 */
static void ud_grh(const uint8_t *pkt, int family, uint8_t grh[40])
{
	if (family == AF_INET6) {
		memcpy(grh, pkt, 40);
		return;
	}
	memset(grh, 0, 20);
	memcpy(grh + 20, pkt, 20);
}

/*
 * QP1: one MAD to QP1 with the GSI Q_Key, as rxe's GSI QP takes them, for
 * the connection manager (the mailbox of transport/gsi.h).
 */
static void rx_gsi(struct roce_dev *rd, const struct roce_ip *ip,
		   const struct roce_pkt *p)
{
	struct ibvd_mad mad;

	/*
	 * From the sender's QP1 too: CM MADs come from its GSI QP, and our
	 * answers go back to the QP named here; no other QP of the peer's is
	 * its CM.
	 */
	if (p->opcode != ROCE_UD_SEND_ONLY || p->deth.qkey != ROCE_GSI_QKEY ||
	    p->deth.src_qp != ROCE_GSI_QPN || p->payload_len != IBVD_MAD_LEN)
		return;
	memset(&mad, 0, sizeof(mad));
	mad.dev = rd->dev;
	/* IPv6 addresses are their GIDs, IPv4 ones ::ffff:a.b.c.d */
	roce_ip_to_gid(ip->family, ip->dst, mad.local_gid);
	roce_ip_to_gid(ip->family, ip->src, mad.remote_gid);
	mad.remote_qpn = p->deth.src_qp;
	mad.traffic_class = ip->tclass;
	mad.hop_limit = ip->hop_limit;
	memcpy(mad.data, p->payload, IBVD_MAD_LEN);
	ibvd_gsi_deliver(&mad);
}

/*
 * A RoCE frame carries no SL.  In a UD receive completion's SL a RoCE NIC
 * (mlx5) reports instead how the packet came: bit 3 for a UDP header
 * (RoCEv2), bits 0-2 the network header, 1 IPv6 and 2 IPv4.  UCX's UD
 * transport reads it to find the destination address in the GRH slot, and
 * drops what it cannot match.
 */
#define WC_SL_ROCE_V2		0x8
#define WC_SL_IPV6		0x1
#define WC_SL_IPV4		0x2

/* What a UD packet brings a receiver. */
static void ud_datagram(const uint8_t *pkt, const struct roce_ip *ip,
			const struct roce_pkt *p, struct eng_datagram *dg)
{
	memset(dg, 0, sizeof(*dg));
	dg->src_qp = p->deth.src_qp;
	dg->qkey = p->deth.qkey;
	dg->solicited = p->se;
	if (p->hdrs & ROCE_HDR_IMM) {
		dg->has_imm = true;
		/* the CQE holds the word as the wire carried it */
		dg->imm = htobe32(p->imm);
	}
	ud_grh(pkt, ip->family, dg->grh);
	dg->sl = WC_SL_ROCE_V2 |
		 (ip->family == AF_INET ? WC_SL_IPV4 : WC_SL_IPV6);
	dg->payload = p->payload;
	dg->len = p->payload_len;
}

static void rx_ud(struct roce_dev *rd, const uint8_t *pkt,
		  const struct roce_ip *ip, const struct roce_pkt *p)
{
	struct eng_datagram dg;
	struct ibvd_qp *target;

	if (p->dest_qp == 1) {
		rx_gsi(rd, ip, p);
		return;
	}
	/* QP0 is InfiniBand's subnet management: nothing on RoCE. */
	if (p->dest_qp == 0)
		return;
	target = ud_target(rd, p->dest_qp);
	if (!target)
		return;
	ud_datagram(pkt, ip, p, &dg);
	ibvd_eng_ud_receive(target, &dg);
}

/*
 * A datagram to a multicast address: for QPN 0xFFFFFF only, to every QP
 * of this device attached to the group of that address.  own: the
 * device's own, which reaches its sender too unless the sender asked not
 * to be looped back (IBV_QP_CREATE_BLOCK_SELF_MCAST_LB).
 */
static void rx_mcast(struct roce_dev *rd, const uint8_t *pkt,
		     const struct roce_ip *ip, const struct roce_pkt *p,
		     bool own)
{
	const struct ibvd_mcast_member *m;
	const struct ibvd_mcast_group *grp;
	struct eng_datagram dg;
	uint8_t mgid[16];

	if (p->dest_qp != IBVD_MCAST_QPN)
		return;
	roce_ip_to_gid(ip->family, ip->dst, mgid);
	grp = ibvd_mcast_group_find(mgid);
	if (!grp)
		return;
	ud_datagram(pkt, ip, p, &dg);
	LIST_FOREACH(m, &grp->members, group_link) {
		if (m->qp->ctx->dev != rd->dev)
			continue;
		if (own && m->qp->qp_num == p->deth.src_qp &&
		    m->qp->block_self_mcast)
			continue;
		ibvd_eng_ud_receive(m->qp, &dg);
	}
}

/*
 * Is src one of the device's peers: in its "peers", and not an address
 * of this host (core/host_addrs.h)?
 */
static bool peer_allowed(const struct roce_dev *rd, int family,
			 const uint8_t *src)
{
	uint8_t gid[16];

	roce_ip_to_gid(family, src, gid);
	return ibvd_roce_peer_allowed(&rd->dev->roce, gid) &&
	       !ibvd_host_addrs_has(gid);
}

/* The type of QP a connected packet is for. */
static uint32_t connected_type(const struct roce_pkt *p)
{
	switch (ROCE_OP_TRANSPORT(p->opcode)) {
	case ROCE_OP_RC:
		return IBV_QPT_RC;
	case ROCE_OP_UC:
		return IBV_QPT_UC;
	default:
		/* XRC: requests go to a target, answers to an initiator */
		return roce_is_answer(p->opcode) ? IBV_QPT_XRC_SEND :
						   IBV_QPT_XRC_RECV;
	}
}

/*
 * An RC, UC or XRC packet: for a QP of this device of that type, able to
 * receive, connected to the address it came from.
 */
static void rx_connected(struct roce_dev *rd, const struct roce_ip *ip,
			 const struct roce_pkt *p)
{
	uint32_t type = connected_type(p);
	struct ibvd_qp *qp = ibvd_qp_by_num(p->dest_qp);

	if (!qp || qp->ctx->dev != rd->dev || qp->qp_type != type ||
	    !ibvd_eng_can_receive(eng_qp_state(qp)))
		return;
	roce_rc_rx(rd, qp, ip, p);
}

/*
 * The default partition's P_Key, full or limited member: the only one
 * our ports have (rxe's check_keys drops the rest).
 */
static bool pkey_ok(uint16_t pkey)
{
	return (pkey & ROCE_PKEY_MASK) == (ROCE_DEFAULT_PKEY & ROCE_PKEY_MASK);
}

static void count_drop(uint64_t *counter)
{
	__atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

/*
 * Only what was sent to one of this device's addresses, or to a group
 * (the kernel passes on only those of groups the netdev takes), from a
 * peer: whether ip is such, counting a refused source.
 */
static bool addressed(struct roce_dev *rd, const struct roce_ip *ip,
		      bool own, bool *mcast)
{
	*mcast = roce_ip_is_multicast(ip->family, ip->dst);
	if (!*mcast && !roce_is_local(rd, ip->family, ip->dst))
		return false;
	/*
	 * What this device sends to its own addresses never leaves it
	 * (emit): from the wire, such a source is forged.  Its RC and UC
	 * peers on this device use the local transport, so no packet of
	 * theirs comes here at all; an answer to a forged one would come
	 * back here while its QP's lock is held.
	 */
	if (!roce_ip_addrs_plausible(ip) ||
	    (!own && (roce_is_local(rd, ip->family, ip->src) ||
		      !peer_allowed(rd, ip->family, ip->src)))) {
		count_drop(&rd->dev->roce.dropped_not_peer);
		return false;
	}
	return true;
}

bool roce_rx_addressed(struct roce_dev *rd, const uint8_t *pkt, size_t len)
{
	size_t off, udp_len;
	struct roce_ip ip;
	bool mcast;

	return roce_parse_ip(pkt, len, &ip, &off, &udp_len) == 0 &&
	       ip.dport == ROCE_UDP_PORT && addressed(rd, &ip, false, &mcast);
}

/* own: sent by this device to one of its own addresses, not from the wire */
static void rx(struct roce_dev *rd, const uint8_t *pkt, size_t len, bool own)
{
	size_t off, udp_len;
	struct roce_ip ip;
	struct roce_pkt p;
	bool mcast;

	if (roce_parse_ip(pkt, len, &ip, &off, &udp_len) < 0 ||
	    ip.dport != ROCE_UDP_PORT || !addressed(rd, &ip, own, &mcast))
		return;
	if (!roce_icrc_ok(pkt, off + udp_len))
		return;
	if (roce_decode(pkt + off, udp_len, &p) < 0)
		return;
	if (!pkey_ok(p.pkey)) {
		count_drop(&rd->dev->roce.dropped_bad_pkey);
		return;
	}
	switch (ROCE_OP_TRANSPORT(p.opcode)) {
	case ROCE_OP_UD:
		if (mcast)
			rx_mcast(rd, pkt, &ip, &p, own);
		else
			rx_ud(rd, pkt, &ip, &p);
		break;
	case ROCE_OP_RC:
	case ROCE_OP_UC:
	case ROCE_OP_XRC:
		if (!own && !mcast)
			rx_connected(rd, &ip, &p);
		break;
	default:
		break;
	}
}

void roce_rx_packet(struct roce_dev *rd, const uint8_t *pkt, size_t len)
{
	rx(rd, pkt, len, false);
}

void roce_rx_local(struct roce_dev *rd, const uint8_t *pkt, size_t len)
{
	rx(rd, pkt, len, true);
}
