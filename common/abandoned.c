/*
 * A create whose reply does not come within the timeout fails with
 * ETIMEDOUT, but the daemon (stalled, not gone) may carry it out later:
 * it would then hold an object that nobody knows of, charged to the
 * tenant until the context closes.  The connection remembers such calls,
 * and the late reply, which the next call skips on its way to its own,
 * names the object to destroy.  Nothing waits for those destroys: their
 * replies are skipped like any other stale one.
 */
#include "config.h"

#include <string.h>

#include "abandoned.h"
#include "conn.h"
#include "ibverbsd.pb-c.h"

/* A creating request, the request that undoes it, and its reply's type. */
struct undo {
	uint16_t create;
	uint16_t destroy;
	const ProtobufCMessageDescriptor *reply;
};

/* Every reply here names the new object in field 1 (handle, or id). */
static const struct undo undos[] = {
	{ IBVD_MSG_ALLOC_PD, IBVD_MSG_DEALLOC_PD, &ibvd__handle__descriptor },
	{ IBVD_MSG_REG_MR, IBVD_MSG_DEREG_MR, &ibvd__reg_mr_reply__descriptor },
	{ IBVD_MSG_REG_MR_SHARED, IBVD_MSG_DEREG_MR,
	  &ibvd__reg_mr_reply__descriptor },
	{ IBVD_MSG_ALLOC_MW, IBVD_MSG_DEALLOC_MW,
	  &ibvd__alloc_mw_reply__descriptor },
	{ IBVD_MSG_CREATE_COMP_CHANNEL, IBVD_MSG_DESTROY_COMP_CHANNEL,
	  &ibvd__handle__descriptor },
	{ IBVD_MSG_CREATE_CQ, IBVD_MSG_DESTROY_CQ,
	  &ibvd__create_cq_reply__descriptor },
	{ IBVD_MSG_CREATE_QP, IBVD_MSG_DESTROY_QP,
	  &ibvd__create_qp_reply__descriptor },
	{ IBVD_MSG_OPEN_QP, IBVD_MSG_DESTROY_QP,
	  &ibvd__create_qp_reply__descriptor },
	{ IBVD_MSG_CREATE_SRQ, IBVD_MSG_DESTROY_SRQ,
	  &ibvd__create_srq_reply__descriptor },
	{ IBVD_MSG_CREATE_AH, IBVD_MSG_DESTROY_AH,
	  &ibvd__create_ah_reply__descriptor },
	{ IBVD_MSG_OPEN_XRCD, IBVD_MSG_CLOSE_XRCD, &ibvd__handle__descriptor },
	{ IBVD_MSG_ALLOC_XRCD, IBVD_MSG_CLOSE_XRCD, &ibvd__handle__descriptor },
	{ IBVD_MSG_ALLOC_DM, IBVD_MSG_FREE_DM, &ibvd__dm_reply__descriptor },
	/* not IMPORT_DM: it names a DM its owner holds, and makes nothing */
	{ IBVD_MSG_CM_CREATE_ID, IBVD_MSG_CM_DESTROY_ID,
	  &ibvd__cm_id__descriptor },
};

static const struct undo *undo_of(uint16_t create)
{
	size_t i;

	for (i = 0; i < sizeof(undos) / sizeof(undos[0]); i++)
		if (undos[i].create == create)
			return &undos[i];
	return NULL;
}

void ibvd_abandoned_add(struct ibvd_conn *conn, uint32_t req_id,
			uint16_t type)
{
	struct ibvd_abandoned *slot;

	if (!undo_of(type))
		return;
	/* The oldest goes first: its reply has had the longest to come. */
	slot = &conn->abandoned[conn->abandoned_next++ % IBVD_ABANDONED_MAX];
	slot->req_id = req_id;
	slot->type = type;
}

/* Destroy request type for handle, its reply left to be skipped. */
static void destroy(struct ibvd_conn *conn, uint16_t type, uint32_t handle)
{
	Ibvd__Handle h = IBVD__HANDLE__INIT;
	Ibvd__CmId id = IBVD__CM_ID__INIT;
	const ProtobufCMessage *req = &h.base;

	if (!handle)
		return;
	/* Both are one uint32 in field 1: the same bytes on the wire. */
	h.handle = handle;
	id.id = handle;
	if (type == IBVD_MSG_CM_DESTROY_ID)
		req = &id.base;
	/* Best effort: a daemon that cannot take it frees it with the context. */
	(void)ibvd_frame_send(conn->sock, type, ibvd_conn_next_req_id(conn), req,
			      NULL, 0, 0);
}

static uint32_t new_cq(const Ibvd__NewCqReply *n)
{
	return n && n->cq ? n->cq->handle : 0;
}

static uint32_t new_channel(const Ibvd__NewCqReply *n)
{
	return n ? n->channel : 0;
}

/* The CQs and channels rdma_create_qp had CREATE_QP make with its QP. */
static void destroy_new_cqs(struct ibvd_conn *conn,
			    const Ibvd__CreateQpReply *qp)
{
	uint32_t send = new_cq(qp->new_send_cq), recv = new_cq(qp->new_recv_cq);
	uint32_t send_ch = new_channel(qp->new_send_cq);
	uint32_t recv_ch = new_channel(qp->new_recv_cq);

	destroy(conn, IBVD_MSG_DESTROY_CQ, send);
	if (recv != send)
		destroy(conn, IBVD_MSG_DESTROY_CQ, recv);
	destroy(conn, IBVD_MSG_DESTROY_COMP_CHANNEL, send_ch);
	if (recv_ch != send_ch)
		destroy(conn, IBVD_MSG_DESTROY_COMP_CHANNEL, recv_ch);
}

static void undo_reply(struct ibvd_conn *conn, const struct undo *u,
		       const struct ibvd_frame *frame)
{
	const ProtobufCFieldDescriptor *f;
	ProtobufCMessage *reply;

	if (frame->hdr.type != (u->create | IBVD_REPLY))
		return;		/* an error: nothing was made */
	reply = protobuf_c_message_unpack(u->reply, NULL, frame->hdr.len,
					  frame->payload);
	if (!reply)
		return;
	f = protobuf_c_message_descriptor_get_field(u->reply, 1);
	if (f && f->type == PROTOBUF_C_TYPE_UINT32)
		destroy(conn, u->destroy,
			*(const uint32_t *)((const char *)reply + f->offset));
	if (u->reply == &ibvd__create_qp_reply__descriptor)
		destroy_new_cqs(conn, (const Ibvd__CreateQpReply *)reply);
	protobuf_c_message_free_unpacked(reply, NULL);
}

void ibvd_abandoned_undo_now(struct ibvd_conn *conn, uint16_t type,
			     const struct ibvd_frame *frame)
{
	const struct undo *u = undo_of(type);

	if (u)
		undo_reply(conn, u, frame);
}

bool ibvd_abandoned_undo(struct ibvd_conn *conn,
			 const struct ibvd_frame *frame)
{
	unsigned int i;

	for (i = 0; i < IBVD_ABANDONED_MAX; i++) {
		struct ibvd_abandoned *a = &conn->abandoned[i];

		if (!a->req_id || a->req_id != frame->hdr.req_id)
			continue;
		undo_reply(conn, undo_of(a->type), frame);
		memset(a, 0, sizeof(*a));
		return true;
	}
	return false;
}
