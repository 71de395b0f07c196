/*
 * rdma_create_qp in one request (common/cm_qp.h): CREATE_QP asks the
 * daemon to make the id's CQs, each with a channel, and to take the CM
 * id's INIT attributes; here the request gets those asks and the reply's
 * CQs and channels become ours, as ibv_create_cq and
 * ibv_create_comp_channel would have made them.
 */
#include "config.h"

#include <string.h>
#include <unistd.h>

#include "cm_qp.h"
#include "ibvd_verbs.h"

struct ibvd_cm_qp_init *ibvc_bundle_of(struct ibv_qp_init_attr_ex *attr)
{
	struct ibvd_cm_qp_init *ci;

	/* Only what points at itself is ours to read further. */
	if (!(attr->comp_mask & IBVD_QP_INIT_ATTR_CM) ||
	    (void *)attr->xrcd != (void *)attr)
		return NULL;
	ci = (struct ibvd_cm_qp_init *)attr;
	return ci->magic == IBVD_CM_QP_INIT_MAGIC ? ci : NULL;
}

void ibvc_bundle_req(const struct ibvd_cm_qp_init *ci,
		     struct ibvc_bundle_msgs *m, Ibvd__CreateQp *req)
{
	m->send = (Ibvd__NewCq)IBVD__NEW_CQ__INIT;
	m->recv = (Ibvd__NewCq)IBVD__NEW_CQ__INIT;
	m->cm = (Ibvd__CmQpRef)IBVD__CM_QP_REF__INIT;
	if (ci->send_cqe) {
		m->send.cqe = ci->send_cqe;
		m->send.channel = true;
		req->new_send_cq = &m->send;
		req->send_cq = 0;
	}
	if (ci->recv_cqe) {
		m->recv.cqe = ci->recv_cqe;
		m->recv.channel = true;
		req->new_recv_cq = &m->recv;
		req->recv_cq = 0;
	}
	m->cm.token.data = (uint8_t *)ci->token;
	m->cm.token.len = ci->token_len;
	m->cm.id = ci->id;
	req->cm = &m->cm;
}

void ibvc_bundle_fds(const Ibvd__CreateQpReply *r, const int *got,
		     unsigned int ngot, int fds[2])
{
	unsigned int i = 0;

	fds[0] = fds[1] = -1;
	if (r->new_send_cq && i < ngot)
		fds[0] = got[i++];
	if (r->new_recv_cq && i < ngot)
		fds[1] = got[i++];
	while (i < ngot)
		close(got[i++]);
}

/* One side's channel (fd: its socket, taken) and CQ. */
static int take_side(struct ibv_context *ctx, struct ibvd_cm_qp_init *ci,
		     const Ibvd__NewCqReply *r, int *fd,
		     struct ibv_comp_channel **channel, struct ibv_cq **cq)
{
	struct ibvc_comp_channel *ch;
	struct ibvc_cq *icq;
	int ret;

	if (!r->cq || !r->channel || *fd < 0)
		return -EPROTO;
	ret = ibvc_channel_adopt(ctx, r->channel, *fd, &ch);
	if (ret < 0)
		return ret;
	*fd = -1;
	*channel = &ch->channel;
	ret = ibvc_cq_adopt(ctx, ci->cq_context, *channel, r->cq, &icq);
	if (ret < 0)
		return ret;
	*cq = &icq->cq;
	return 0;
}

int ibvc_bundle_take(struct ibv_context *ctx, struct ibvd_cm_qp_init *ci,
		     const Ibvd__CreateQpReply *r, int fds[2])
{
	int ret = 0;

	ci->send_cq = ci->recv_cq = NULL;
	ci->send_channel = ci->recv_channel = NULL;
	if (!r->cm_init || !r->cm_init->attr ||
	    !ci->send_cqe != !r->new_send_cq || !ci->recv_cqe != !r->new_recv_cq)
		return -EPROTO;
	if (r->new_send_cq)
		ret = take_side(ctx, ci, r->new_send_cq, &fds[0], &ci->send_channel,
				&ci->send_cq);
	if (ret == 0 && r->new_recv_cq)
		ret = take_side(ctx, ci, r->new_recv_cq, &fds[1], &ci->recv_channel,
				&ci->recv_cq);
	if (ret < 0)
		return ret;
	memset(&ci->init_attr, 0, sizeof(ci->init_attr));
	ibvd_qp_attr_from_msg(r->cm_init->attr, &ci->init_attr);
	ci->init_mask = (int)r->cm_init->attr_mask;
	return 0;
}

static void drop_side(struct ibv_context *ctx, const Ibvd__NewCqReply *r,
		      int *fd, struct ibv_comp_channel **channel,
		      struct ibv_cq **cq)
{
	if (*cq)
		ibv_destroy_cq(*cq);
	else if (r && r->cq)
		ibvc_destroy_handle(ctx, IBVD_MSG_DESTROY_CQ, r->cq->handle);
	if (*channel)
		ibv_destroy_comp_channel(*channel);
	else if (r && r->channel)
		ibvc_destroy_handle(ctx, IBVD_MSG_DESTROY_COMP_CHANNEL,
				    r->channel);
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
	*cq = NULL;
	*channel = NULL;
}

void ibvc_bundle_drop(struct ibv_context *ctx, struct ibvd_cm_qp_init *ci,
		      const Ibvd__CreateQpReply *r, int fds[2])
{
	/* no reply: what was taken (ci's CQs and channels) goes */
	drop_side(ctx, r ? r->new_send_cq : NULL, &fds[0], &ci->send_channel,
		  &ci->send_cq);
	drop_side(ctx, r ? r->new_recv_cq : NULL, &fds[1], &ci->recv_channel,
		  &ci->recv_cq);
}
