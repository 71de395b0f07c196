/*
 * CREATE_QP's bundle: what librdmacm's rdma_create_qp needs besides the
 * QP, in the same request.  Without CQs of its own the id gets a send and
 * a receive CQ, each with a completion channel, and a connected QP goes to
 * INIT with its CM id's attributes.  One at a time these are seven round
 * trips (two channels, two CQs, CREATE_QP, CM_INIT_QP_ATTR, MODIFY_QP);
 * a round trip costs more than all the work in them together.
 *
 * Everything is made, or nothing: a failure anywhere undoes what came
 * before and answers the one error, as the separate requests would have.
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "context.h"
#include "ibverbsd.pb-c.h"
#include "server/call.h"
#include "verbs.h"

struct ibvd_verbs_cm ibvd_verbs_cm;

static void side_undo(struct ibvd_qp_bundle_side *s)
{
	if (s->cq)
		ibvd_cq_destroy(s->cq);
	/* the reply never went: the client's end is still ours */
	if (s->channel && s->theirs >= 0)
		ibvd_channel_unmake(s->channel, s->theirs);
	else if (s->channel)
		ibvd_channel_destroy(s->channel);
	else if (s->theirs >= 0)
		close(s->theirs);
	s->cq = NULL;
	s->channel = NULL;
	s->theirs = -1;
}

static int side_make(struct ibvd_call *call, const Ibvd__NewCq *want,
		     struct ibvd_qp_bundle_side *s)
{
	Ibvd__CreateCq req = IBVD__CREATE_CQ__INIT;
	int ret;

	if (!want)
		return 0;
	if (want->channel) {
		ret = ibvd_channel_new(call, &s->channel, &s->theirs);
		if (ret < 0)
			return ret;
	}
	req.cqe = want->cqe;
	req.comp_vector = want->comp_vector;
	ret = ibvd_cq_new(call, &req, s->channel, &s->cq);
	if (ret < 0)
		side_undo(s);
	return ret;
}

int ibvd_qp_bundle_make(struct ibvd_call *call, const Ibvd__CreateQp *req,
			struct ibvd_qp_bundle *b, Ibvd__CreateQp *named)
{
	int ret;

	memset(b, 0, sizeof(*b));
	b->send.theirs = b->recv.theirs = -1;
	*named = *req;
	if ((req->new_send_cq && req->send_cq) ||
	    (req->new_recv_cq && req->recv_cq))
		return ibvd_call_error(call, -EINVAL,
				       "a CQ both named and to be made");
	if ((req->new_send_cq || req->new_recv_cq) &&
	    (req->qp_type == IBV_QPT_XRC_RECV || req->qp_type == IBV_QPT_XRC_SEND))
		return ibvd_call_error(call, -EINVAL,
				       "CQs are made with RC, UC and UD QPs only");
	ret = side_make(call, req->new_send_cq, &b->send);
	if (ret == 0)
		ret = side_make(call, req->new_recv_cq, &b->recv);
	if (ret < 0) {
		ibvd_qp_bundle_undo(b);
		return ret;
	}
	if (b->send.cq)
		named->send_cq = b->send.cq->handle;
	if (b->recv.cq)
		named->recv_cq = b->recv.cq->handle;
	return 0;
}

int ibvd_qp_bundle_init(struct ibvd_call *call, const Ibvd__CreateQp *req,
			struct ibvd_qp *qp, struct ibvd_qp_bundle *b)
{
	int ret;

	if (!req->cm)
		return 0;
	if (!ibvd_verbs_cm.qp_init)
		return ibvd_call_error(call, -EOPNOTSUPP, "no connection manager");
	b->init_attr = (Ibvd__QpAttr)IBVD__QP_ATTR__INIT;
	ret = ibvd_verbs_cm.qp_init(call, req->cm, qp, &b->init_attr,
				    &b->init_mask);
	if (ret < 0)
		return ret;
	b->init_attr.qp_state = IBV_QPS_INIT;
	b->init_mask |= IBV_QP_STATE;
	b->has_init = true;
	return ibvd_qp_modify(call, qp, &b->init_attr, b->init_mask);
}

/* In the CQs' absence the QP holds them no more: undo after the QP. */
void ibvd_qp_bundle_undo(struct ibvd_qp_bundle *b)
{
	side_undo(&b->send);
	side_undo(&b->recv);
}

static void side_to_msg(struct ibvd_qp_bundle_side *s, Ibvd__NewCqReply *m,
			Ibvd__CreateCqReply *cq, Ibvd__RingPlace *place,
			Ibvd__NewCqReply **slot, struct ibvd_qp_bundle *b)
{
	if (!s->cq)
		return;
	*m = (Ibvd__NewCqReply)IBVD__NEW_CQ_REPLY__INIT;
	*cq = (Ibvd__CreateCqReply)IBVD__CREATE_CQ_REPLY__INIT;
	ibvd_cq_to_msg(s->cq, cq, place);
	m->cq = cq;
	m->channel = s->channel ? s->channel->handle : 0;
	*slot = m;
	if (s->theirs >= 0)
		b->fds[b->nfds++] = s->theirs;
}

void ibvd_qp_bundle_to_msg(struct ibvd_qp_bundle *b, Ibvd__CreateQpReply *m)
{
	side_to_msg(&b->send, &b->send_msg, &b->send_cq, &b->send_place,
		    &m->new_send_cq, b);
	side_to_msg(&b->recv, &b->recv_msg, &b->recv_cq, &b->recv_place,
		    &m->new_recv_cq, b);
	if (!b->has_init)
		return;
	b->init_msg = (Ibvd__CmInitQpAttrReply)IBVD__CM_INIT_QP_ATTR_REPLY__INIT;
	b->init_msg.attr_mask = b->init_mask;
	b->init_msg.attr = &b->init_attr;
	m->cm_init = &b->init_msg;
}

/* The reply went out (or failed): our copies of the client's fds go. */
void ibvd_qp_bundle_sent(struct ibvd_qp_bundle *b)
{
	if (b->send.theirs >= 0)
		close(b->send.theirs);
	if (b->recv.theirs >= 0)
		close(b->recv.theirs);
	b->send.theirs = b->recv.theirs = -1;
}
