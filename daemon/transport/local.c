/*
 * The same-daemon transport: both QPs are this daemon's, so a message is
 * carried by calling the engine's responder on the target directly, on
 * the requester's engine thread, and the answer is known at once.
 *
 * Addressing (DESIGN.md §3.1): a packet goes to (DLID or DGID, QPN).  The
 * DLID names one port of one device of this daemon; without a DLID, a
 * global address names a port by GID.  A QP number alone is never enough:
 * the QP must sit on the addressed port, as on a fabric.
 */
#include <config.h>

#include <string.h>

#include "core/device.h"
#include "core/objects.h"
#include "core/roce.h"
#include "engine/transport.h"
#include "transport.h"

/* The port's MTU (query.c: active_mtu IBV_MTU_4096). */
#define UD_MTU		4096u
/* A Q_Key with the high bit set in the WQE means "the QP's own". */
#define QKEY_USE_QP	0x80000000u

static const struct ibvd_port *qp_port(const struct ibvd_qp *qp)
{
	return ibvd_device_port(qp->ctx->dev, qp->attr.port_num);
}

/*
 * A GID names port if it is the port's link-local GID; the IP-derived
 * GIDs (::ffff:a.b.c.d, IPv6) are this host's addresses, which every
 * local port carries (core/device.c), so they match any port.  A
 * multicast GID (ff00::/8, or an IPv4 group's, ::ffff:224.0.0.0/4) is no
 * port's: a datagram to it reaches the group's members only, sent to QP
 * 0xFFFFFF (multicast()), never one QP by its number.
 */
static bool gid_names_port(const struct ibvd_port *port, const uint8_t dgid[16])
{
	uint8_t own[16];

	if (ibvd_gid_is_multicast(dgid))
		return false;
	ibvd_port_gid0(port, own);
	if (memcmp(dgid, own, 8) != 0)
		return true;
	return memcmp(dgid + 8, own + 8, 8) == 0;
}

static bool address_reaches(const struct ibvd_qp *t, const struct ibvd_av *av)
{
	const struct ibvd_port *port = qp_port(t);

	if (!port)
		return false;
	if (av->dlid)
		return av->dlid == port->lid;
	return av->is_global && gid_names_port(port, av->dgid);
}

static struct ibvd_qp *route(uint32_t dest_qpn, const struct ibvd_av *av)
{
	struct ibvd_qp *t = ibvd_qp_by_num(dest_qpn & 0xFFFFFFu);

	return t && address_reaches(t, av) ? t : NULL;
}

/* The type of QP a connected QP of this type talks to. */
static uint32_t peer_type(uint32_t type)
{
	if (type == IBV_QPT_XRC_SEND)
		return IBV_QPT_XRC_RECV;
	if (type == IBV_QPT_XRC_RECV)
		return IBV_QPT_XRC_SEND;
	return type;
}

static struct ibvd_qp *local_peer(const struct ibvd_qp *src)
{
	struct ibvd_qp *t = route(src->attr.dest_qp_num, &src->attr.av);

	/*
	 * RC acknowledges to the responder's own destination: a peer not
	 * connected back never acks, which the requester sees as a timeout.
	 * UC is held to the same rule, as its PSN check would drop the
	 * stream of a stranger.
	 */
	if (!t || t->qp_type != peer_type(src->qp_type) ||
	    t->attr.dest_qp_num != src->qp_num)
		return NULL;
	return t;
}

/*
 * RC: nobody answered the step.  A wire's requester learns that only when
 * its ACK timeout runs out, and spends a retry then; so each timeout here
 * is waited out first (RESP_PENDING), and a QP with retry_cnt N fails
 * after N + 1 of them, not at once.
 */
static enum eng_resp unanswered(struct ibvd_engine *eng, struct ibvd_qp *src)
{
	uint64_t now = ibvd_eng_now();
	uint64_t timeout = ibvd_eng_timeout_ns(src->attr.timeout);

	if (!src->no_answer_since_ns)
		src->no_answer_since_ns = now;
	if (now - src->no_answer_since_ns < timeout) {
		/* from when it began, not from each doorbell that asks */
		ibvd_eng_ask_again_by(eng, src->no_answer_since_ns + timeout);
		return RESP_PENDING;
	}
	src->no_answer_since_ns = now;
	return RESP_NO_ACK;
}

/* RC/UC: the connected peer's answer to one step. */
static enum eng_resp peer_answer(struct ibvd_engine *eng, struct ibvd_qp *src,
				 const struct eng_req *req, uint8_t *rnr_timer)
{
	struct ibvd_qp *peer = local_peer(src);

	if (peer && !ibvd_eng_can_receive(eng_qp_state(peer)))
		peer = NULL;
	/* A responder reset since the message began knows nothing of it. */
	if (!eng_req_whole(req) && !ibvd_eng_chunk_responder(src, peer, req))
		peer = NULL;
	/* Nobody answers: RC retries, UC's packets are lost. */
	if (!peer)
		return src->qp_type == IBV_QPT_UC ? RESP_OK : RESP_NO_ACK;
	*rnr_timer = peer->attr.min_rnr_timer;
	/* XRC: each message names the SRQ, PD and CQ it lands in. */
	if (peer->qp_type == IBV_QPT_XRC_RECV && !ibvd_eng_xrc_enter(peer, req))
		return RESP_INV_REQ;
	switch (req->w.opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_SEND_WITH_INV:
		return ibvd_eng_deliver_send(eng, src, peer, req);
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return ibvd_eng_rdma_write(eng, src, peer, req);
	case IBV_WR_RDMA_READ:
		return ibvd_eng_rdma_read(eng, src, peer, req);
	default:
		return ibvd_eng_atomic(eng, src, peer, req);
	}
}

/* RC/UC: the connected peer executes the step as it arrives. */
static enum eng_resp local_send(struct ibvd_engine *eng, struct ibvd_qp *src,
				const struct eng_req *req, uint8_t *rnr_timer)
{
	enum eng_resp r = peer_answer(eng, src, req, rnr_timer);

	if (r == RESP_NO_ACK)
		return unanswered(eng, src);
	src->no_answer_since_ns = 0;
	return r;
}

/*
 * Every member of the group the destination GID names (none waits), but
 * those on RoCE devices: their groups are on their networks.
 */
static enum eng_ud multicast(struct ibvd_engine *eng, struct ibvd_qp *src,
			     const struct eng_req *req, uint32_t qkey,
			     enum ibv_wc_status *status)
{
	const struct ibvd_mcast_group *grp;
	const struct ibvd_mcast_member *m;
	bool first = true;

	if (!req->w.av.is_global)
		return UD_SENT;
	/*
	 * A unicast DLID takes the packet to that one port, where no QP has
	 * number 0xFFFFFF: only a multicast LID (or none, the GRH routing
	 * here) makes it a group's.
	 */
	if (req->w.av.dlid && req->w.av.dlid <= IBVD_LID_UNICAST_MAX)
		return UD_SENT;
	grp = ibvd_mcast_group_find(req->w.av.dgid);
	if (!grp)
		return UD_SENT;
	LIST_FOREACH(m, &grp->members, group_link) {
		if (m->qp->ctx->dev->kind == IBVD_DEV_ROCE)
			continue;
		/* A NIC loops a group's datagram back to its sender too. */
		if (m->qp == src && src->block_self_mcast)
			continue;
		if (!first)
			ibvd_eng_charge_copies(eng, req->length);
		first = false;
		if (ibvd_eng_ud_deliver(eng, src, m->qp, req, qkey, true,
					status) == UD_FAILED)
			return UD_FAILED;
	}
	return UD_SENT;
}

static enum eng_ud local_send_ud(struct ibvd_engine *eng, struct ibvd_qp *src,
				 const struct eng_req *req,
				 enum ibv_wc_status *status)
{
	uint32_t qkey = req->w.remote_qkey;
	struct ibvd_qp *target;

	/*
	 * Longer than the port's MTU: no packet, and no error either
	 * (IBTA C10-93.1.1); the send completes, as rxe's and the RoCE
	 * device's do, and the send queue goes on.
	 */
	if (req->length > UD_MTU)
		return UD_SENT;
	/* once, not again for each try of a datagram that waited (recv.c) */
	if (!src->busy_since_ns)
		ibvd_eng_count_request(src, req);
	if (qkey & QKEY_USE_QP)
		qkey = src->attr.qkey;
	if ((req->w.remote_qpn & 0xFFFFFFu) == IBVD_MCAST_QPN)
		return multicast(eng, src, req, qkey, status);
	target = route(req->w.remote_qpn, &req->w.av);
	return target ? ibvd_eng_ud_deliver(eng, src, target, req, qkey, false,
					    status) :
			UD_SENT;
}

const struct ibvd_transport ibvd_transport_local = {
	.name = "local",
	.send = local_send,
	.send_ud = local_send_ud,
	.peer = local_peer,
};
