/*
 * Unreliable datagrams: SENDs of at most one MTU to (address vector, QPN,
 * Q_Key), unicast or to every member of a multicast group.
 *
 * A UD sender never learns what became of its message: no such QP, a Q_Key
 * mismatch, no receive WQE or a receive error all drop it silently, and
 * the sender completes successfully.  Only its own faults (lengths, keys,
 * memory) complete in error.
 *
 * The receiver's buffer starts with a 40-byte GRH slot: filled (and
 * IBV_WC_GRH set) when the sender used a global address, left untouched
 * otherwise; byte_len counts it either way.
 */
#include <config.h>

#include <string.h>

#include "internal.h"

/* The port's MTU (query.c: active_mtu IBV_MTU_4096). */
#define ENG_UD_MTU		4096u
#define GRH_NEXT_HDR_BTH	0x1B
#define GRH_IP_VERSION		6u

/* A Q_Key with the high bit set in the WQE means "the QP's own". */
#define QKEY_USE_QP		0x80000000u

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void build_grh(uint8_t grh[ENG_GRH_BYTES], const struct ibvd_qp *src,
		      const struct ibvd_av *av, uint32_t payload)
{
	put_be32(grh, GRH_IP_VERSION << 28 | (uint32_t)av->traffic_class << 20 |
		 (av->flow_label & 0xFFFFFu));
	grh[4] = (uint8_t)(payload >> 8);
	grh[5] = (uint8_t)payload;
	grh[6] = GRH_NEXT_HDR_BTH;
	grh[7] = av->hop_limit;
	ibvd_eng_port_gid(src, av->sgid_index, grh + 8);
	memcpy(grh + 24, av->dgid, 16);
}

/* Does target take a datagram with this Q_Key? */
static bool accepts(const struct ibvd_qp *target, uint32_t qkey)
{
	return target->qp_type == IBV_QPT_UD &&
	       ibvd_eng_can_receive(eng_qp_state(target)) &&
	       target->attr.qkey == qkey;
}

/* Under the receive lock, with a valid WQE peeked: GRH slot, then data. */
static enum ibv_wc_status place(struct ibvd_engine *eng, struct ibvd_qp *src,
				struct ibvd_qp *target, const struct eng_rq *rq,
				const struct eng_recv *rwqe,
				const struct eng_req *req)
{
	const struct ibvd_av *av = &req->w.av;
	struct eng_rcv_info info = {
		.opcode = IBV_WC_RECV,
		.byte_len = (uint32_t)(ENG_GRH_BYTES + req->length),
		.wc_flags = av->is_global ? IBV_WC_GRH : 0,
		.solicited = req->w.send_flags & IBV_SEND_SOLICITED,
	};
	uint8_t grh[ENG_GRH_BYTES];
	struct eng_sgl hdr;
	enum eng_copy_result c = ENG_COPY_OK;

	if (av->is_global) {
		build_grh(grh, src, av, (uint32_t)req->length);
		hdr.n = 0;
		hdr.total = 0;
		ibvd_eng_sgl_private(&hdr, grh, sizeof(grh));
		c = ibvd_eng_copy(eng, &rwqe->sgl, 0, &hdr, sizeof(grh));
	}
	if (c == ENG_COPY_OK)
		c = ibvd_eng_copy(eng, &rwqe->sgl, ENG_GRH_BYTES, &req->local,
				  req->length);
	if (c == ENG_COPY_SRC_FAULT)
		return IBV_WC_LOC_PROT_ERR;	/* the WQE stays posted */
	if (c == ENG_COPY_DST_FAULT)
		ibvd_eng_recv_fail(target, rq, rwqe, IBV_WC_LOC_PROT_ERR);
	else
		ibvd_eng_recv_complete(target, rq, rwqe, src, req, &info);
	return IBV_WC_SUCCESS;
}

/* Deliver to one QP; returns the sender's status (only its own faults). */
static enum ibv_wc_status deliver(struct ibvd_engine *eng, struct ibvd_qp *src,
				  struct ibvd_qp *target,
				  const struct eng_req *req, uint32_t qkey)
{
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	struct eng_recv rwqe;
	struct eng_rq rq;
	int ret;

	if (!accepts(target, qkey))
		return IBV_WC_SUCCESS;
	ibvd_eng_count_arrival(src, target, req);
	ibvd_eng_rq_of(target, &rq);
	pthread_mutex_lock(rq.lock);
	ret = ibvd_eng_rq_peek(&rq, &rwqe);
	if (ret < 0)
		ibvd_eng_rq_broken(target, &rq);
	else if (ret > 0 && rwqe.status != IBV_WC_SUCCESS)
		ibvd_eng_recv_fail(target, &rq, &rwqe, rwqe.status);
	else if (ret > 0 && ENG_GRH_BYTES + req->length > rwqe.sgl.total)
		ibvd_eng_recv_fail(target, &rq, &rwqe, IBV_WC_LOC_LEN_ERR);
	else if (ret > 0)
		st = place(eng, src, target, &rq, &rwqe, req);
	/* ret == 0: no receive WQE, the datagram is dropped. */
	pthread_mutex_unlock(rq.lock);
	return st;
}

/* Every member of the group the destination GID names. */
static enum ibv_wc_status multicast(struct ibvd_engine *eng, struct ibvd_qp *src,
				    const struct eng_req *req, uint32_t qkey)
{
	const struct ibvd_mcast_group *grp;
	const struct ibvd_mcast_member *m;

	if (!req->w.av.is_global)
		return IBV_WC_SUCCESS;
	grp = ibvd_mcast_group_find(req->w.av.dgid);
	if (!grp)
		return IBV_WC_SUCCESS;
	LIST_FOREACH(m, &grp->members, group_link) {
		enum ibv_wc_status st = deliver(eng, src, m->qp, req, qkey);

		if (st != IBV_WC_SUCCESS)
			return st;
	}
	return IBV_WC_SUCCESS;
}

enum ibv_wc_status ibvd_eng_ud_send(struct ibvd_engine *eng,
				    struct ibvd_qp *src,
				    const struct eng_req *req)
{
	uint32_t qkey = req->w.remote_qkey;
	struct ibvd_qp *target;

	if (req->length > ENG_UD_MTU)
		return IBV_WC_LOC_LEN_ERR;
	ibvd_eng_count_request(src, req);
	if (qkey & QKEY_USE_QP)
		qkey = src->attr.qkey;
	if ((req->w.remote_qpn & 0xFFFFFFu) == IBVD_MCAST_QPN)
		return multicast(eng, src, req, qkey);
	target = ibvd_eng_route(src, req->w.remote_qpn, &req->w.av);
	return target ? deliver(eng, src, target, req, qkey) : IBV_WC_SUCCESS;
}
