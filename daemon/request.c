/*
 * The request table and the dispatcher that enforces it.
 */
#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "admin.h"
#include "cm.h"
#include "context.h"
#include "device.h"
#include "ibverbsd.pb-c.h"
#include "log.h"
#include "query.h"
#include "request.h"
#include "session.h"
#include "util.h"
#include "verbs.h"

/*
 * Who may send what.  A fresh connection may list devices, open one (and
 * become its context), open a CM session or start administering; queries
 * and verbs objects need a context, CM requests a CM session.
 * Keep the table short and flat: a row is all the dispatcher needs.
 */
static const struct ibvd_request_type request_types[] = {
	{ IBVD_MSG_LIST_DEVICES, "LIST_DEVICES", NULL, 0,
	  IBVD_SESSION_ANY, ibvd_req_list_devices },
	{ IBVD_MSG_OPEN_DEVICE, "OPEN_DEVICE", &ibvd__open_device__descriptor, 0,
	  IBVD_SESSION_FRESH, ibvd_req_open_device },
	{ IBVD_MSG_QUERY_DEVICE, "QUERY_DEVICE", NULL, 0,
	  IBVD_SESSION_CONTEXT, ibvd_req_query_device },
	{ IBVD_MSG_QUERY_PORT, "QUERY_PORT", &ibvd__query_port__descriptor, 0,
	  IBVD_SESSION_CONTEXT, ibvd_req_query_port },
	{ IBVD_MSG_QUERY_GID_TABLE, "QUERY_GID_TABLE",
	  &ibvd__query_gid_table__descriptor, 0,
	  IBVD_SESSION_CONTEXT, ibvd_req_query_gid_table },
	{ IBVD_MSG_QUERY_PKEY, "QUERY_PKEY", &ibvd__query_pkey__descriptor, 0,
	  IBVD_SESSION_CONTEXT, ibvd_req_query_pkey },
	{ IBVD_MSG_ADMIN, "ADMIN", &ibvd__admin_request__descriptor, 0,
	  IBVD_SESSION_FRESH | IBVD_SESSION_ADMIN, ibvd_req_admin },

	/* verbs objects (verbs.h): only on a device context */
#define CTX IBVD_SESSION_CONTEXT
	{ IBVD_MSG_ATTACH_MEMORY, "ATTACH_MEMORY",
	  &ibvd__attach_memory__descriptor, 1, CTX, ibvd_req_attach_memory },
	{ IBVD_MSG_ALLOC_PD, "ALLOC_PD", NULL, 0, CTX, ibvd_req_alloc_pd },
	{ IBVD_MSG_DEALLOC_PD, "DEALLOC_PD", &ibvd__handle__descriptor, 0,
	  CTX, ibvd_req_dealloc_pd },
	{ IBVD_MSG_REG_MR, "REG_MR", &ibvd__reg_mr__descriptor, 0,
	  CTX, ibvd_req_reg_mr },
	{ IBVD_MSG_REREG_MR, "REREG_MR", &ibvd__rereg_mr__descriptor, 0,
	  CTX, ibvd_req_rereg_mr },
	{ IBVD_MSG_DEREG_MR, "DEREG_MR", &ibvd__handle__descriptor, 0,
	  CTX, ibvd_req_dereg_mr },
	{ IBVD_MSG_ALLOC_MW, "ALLOC_MW", &ibvd__alloc_mw__descriptor, 0,
	  CTX, ibvd_req_alloc_mw },
	{ IBVD_MSG_DEALLOC_MW, "DEALLOC_MW", &ibvd__handle__descriptor, 0,
	  CTX, ibvd_req_dealloc_mw },
	{ IBVD_MSG_CREATE_COMP_CHANNEL, "CREATE_COMP_CHANNEL", NULL, 0,
	  CTX, ibvd_req_create_comp_channel },
	{ IBVD_MSG_DESTROY_COMP_CHANNEL, "DESTROY_COMP_CHANNEL",
	  &ibvd__handle__descriptor, 0, CTX, ibvd_req_destroy_comp_channel },
	{ IBVD_MSG_CREATE_CQ, "CREATE_CQ", &ibvd__create_cq__descriptor, 0,
	  CTX, ibvd_req_create_cq },
	{ IBVD_MSG_RESIZE_CQ, "RESIZE_CQ", &ibvd__resize_cq__descriptor, 0,
	  CTX, ibvd_req_resize_cq },
	{ IBVD_MSG_DESTROY_CQ, "DESTROY_CQ", &ibvd__handle__descriptor, 0,
	  CTX, ibvd_req_destroy_cq },
	{ IBVD_MSG_CREATE_QP, "CREATE_QP", &ibvd__create_qp__descriptor, 0,
	  CTX, ibvd_req_create_qp },
	{ IBVD_MSG_MODIFY_QP, "MODIFY_QP", &ibvd__modify_qp__descriptor, 0,
	  CTX, ibvd_req_modify_qp },
	{ IBVD_MSG_QUERY_QP, "QUERY_QP", &ibvd__query_qp__descriptor, 0,
	  CTX, ibvd_req_query_qp },
	{ IBVD_MSG_DESTROY_QP, "DESTROY_QP", &ibvd__handle__descriptor, 0,
	  CTX, ibvd_req_destroy_qp },
	{ IBVD_MSG_CREATE_SRQ, "CREATE_SRQ", &ibvd__create_srq__descriptor, 0,
	  CTX, ibvd_req_create_srq },
	{ IBVD_MSG_MODIFY_SRQ, "MODIFY_SRQ", &ibvd__modify_srq__descriptor, 0,
	  CTX, ibvd_req_modify_srq },
	{ IBVD_MSG_QUERY_SRQ, "QUERY_SRQ", &ibvd__handle__descriptor, 0,
	  CTX, ibvd_req_query_srq },
	{ IBVD_MSG_DESTROY_SRQ, "DESTROY_SRQ", &ibvd__handle__descriptor, 0,
	  CTX, ibvd_req_destroy_srq },
	{ IBVD_MSG_CREATE_AH, "CREATE_AH", &ibvd__create_ah__descriptor, 0,
	  CTX, ibvd_req_create_ah },
	{ IBVD_MSG_DESTROY_AH, "DESTROY_AH", &ibvd__handle__descriptor, 0,
	  CTX, ibvd_req_destroy_ah },
	{ IBVD_MSG_ATTACH_MCAST, "ATTACH_MCAST", &ibvd__mcast__descriptor, 0,
	  CTX, ibvd_req_attach_mcast },
	{ IBVD_MSG_DETACH_MCAST, "DETACH_MCAST", &ibvd__mcast__descriptor, 0,
	  CTX, ibvd_req_detach_mcast },
#undef CTX

	/* the connection manager (cm.h): CM_OPEN makes a CM session */
	{ IBVD_MSG_CM_OPEN, "CM_OPEN", NULL, 0,
	  IBVD_SESSION_FRESH, ibvd_req_cm_open },
#define CM IBVD_SESSION_CM
	{ IBVD_MSG_CM_CREATE_ID, "CM_CREATE_ID", &ibvd__cm_create_id__descriptor,
	  0, CM, ibvd_req_cm_create_id },
	{ IBVD_MSG_CM_DESTROY_ID, "CM_DESTROY_ID", &ibvd__cm_id__descriptor, 0,
	  CM, ibvd_req_cm_destroy_id },
	{ IBVD_MSG_CM_BIND_ADDR, "CM_BIND_ADDR", &ibvd__cm_addr__descriptor, 0,
	  CM, ibvd_req_cm_bind_addr },
	{ IBVD_MSG_CM_RESOLVE_ADDR, "CM_RESOLVE_ADDR", &ibvd__cm_addr__descriptor,
	  0, CM, ibvd_req_cm_resolve_addr },
	{ IBVD_MSG_CM_RESOLVE_ROUTE, "CM_RESOLVE_ROUTE",
	  &ibvd__cm_addr__descriptor, 0, CM, ibvd_req_cm_resolve_route },
	{ IBVD_MSG_CM_LISTEN, "CM_LISTEN", &ibvd__cm_listen__descriptor, 0,
	  CM, ibvd_req_cm_listen },
	{ IBVD_MSG_CM_CONNECT, "CM_CONNECT", &ibvd__cm_connect__descriptor, 0,
	  CM, ibvd_req_cm_connect },
	{ IBVD_MSG_CM_ACCEPT, "CM_ACCEPT", &ibvd__cm_connect__descriptor, 0,
	  CM, ibvd_req_cm_accept },
	{ IBVD_MSG_CM_REJECT, "CM_REJECT", &ibvd__cm_reject__descriptor, 0,
	  CM, ibvd_req_cm_reject },
	{ IBVD_MSG_CM_ESTABLISH, "CM_ESTABLISH", &ibvd__cm_id__descriptor, 0,
	  CM, ibvd_req_cm_establish },
	{ IBVD_MSG_CM_DISCONNECT, "CM_DISCONNECT", &ibvd__cm_id__descriptor, 0,
	  CM, ibvd_req_cm_disconnect },
	{ IBVD_MSG_CM_INIT_QP_ATTR, "CM_INIT_QP_ATTR",
	  &ibvd__cm_init_qp_attr__descriptor, 0, CM, ibvd_req_cm_init_qp_attr },
	{ IBVD_MSG_CM_QUERY, "CM_QUERY", &ibvd__cm_id__descriptor, 0,
	  CM, ibvd_req_cm_query },
	{ IBVD_MSG_CM_SET_OPTION, "CM_SET_OPTION", &ibvd__cm_set_option__descriptor,
	  0, CM, ibvd_req_cm_set_option },
	{ IBVD_MSG_CM_MIGRATE_ID, "CM_MIGRATE_ID", &ibvd__cm_migrate__descriptor,
	  0, CM, ibvd_req_cm_migrate_id },
	{ IBVD_MSG_CM_JOIN_MCAST, "CM_JOIN_MCAST", &ibvd__cm_mcast__descriptor, 0,
	  CM, ibvd_req_cm_join_mcast },
	{ IBVD_MSG_CM_LEAVE_MCAST, "CM_LEAVE_MCAST", &ibvd__cm_mcast__descriptor,
	  0, CM, ibvd_req_cm_leave_mcast },
	{ IBVD_MSG_CM_NOTIFY, "CM_NOTIFY", &ibvd__cm_notify__descriptor, 0,
	  CM, ibvd_req_cm_notify },
#undef CM
};

/* Protocol violations are the client's bug; log them, but not endlessly. */
static struct ibvd_ratelimit violation_rl = IBVD_RATELIMIT_INIT(10);

const struct ibvd_request_type *ibvd_request_type_find(uint16_t type)
{
	size_t i;

	/* A handful of rows: a linear scan beats anything cleverer. */
	for (i = 0; i < ARRAY_SIZE(request_types); i++)
		if (request_types[i].type == type)
			return &request_types[i];
	return NULL;
}

struct ibvd_daemon *ibvd_call_daemon(const struct ibvd_call *call)
{
	return call->session->daemon;
}

int ibvd_call_error(struct ibvd_call *call, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(call->errmsg, sizeof(call->errmsg), fmt, ap);
	va_end(ap);
	/* Client words end up here: no control characters to forge lines. */
	for (char *p = call->errmsg; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return err;
}

int ibvd_call_take_fd(struct ibvd_call *call, unsigned int i)
{
	int fd;

	if (i >= call->frame->nfds)
		return -1;
	fd = call->frame->fds[i];
	call->frame->fds[i] = -1;
	return fd;
}

int ibvd_call_reply(struct ibvd_call *call, const ProtobufCMessage *reply,
		    const int *fds, unsigned int nfds)
{
	int ret;

	ret = ibvd_session_send(call->session, call->type | IBVD_REPLY,
				call->req_id, reply, fds, nfds);
	/* Too big: nothing went out, the handler turns it into an error. */
	if (ret != -EMSGSIZE)
		call->replied = 1;
	return ret;
}

static const char *state_name(enum ibvd_session_state state)
{
	switch (state) {
	case IBVD_SESSION_FRESH:	return "fresh";
	case IBVD_SESSION_CONTEXT:	return "device-context";
	case IBVD_SESSION_ADMIN:	return "admin";
	case IBVD_SESSION_CM:		return "CM";
	}
	return "unknown";
}

static void log_violation(const struct ibvd_call *call)
{
	const struct ibvd_session *s = call->session;
	unsigned int missed;

	if (!ibvd_ratelimit_ok(&violation_rl, &missed))
		return;
	log_notice("client %llu (pid %d %s): rejected request 0x%04x #%u: %s%s",
		   (unsigned long long)s->id, (int)s->cred.pid, s->comm,
		   call->type, call->req_id, call->errmsg,
		   missed ? " (and earlier ones not logged)" : "");
}

/* Check the frame against its row and unpack it; 0 or a negative errno. */
static int call_prepare(struct ibvd_call *call)
{
	struct ibvd_session *s = call->session;
	struct ibvd_frame *frame = call->frame;
	const ProtobufCMessageDescriptor *desc;
	ProtobufCMessage *msg;

	call->rt = ibvd_request_type_find(call->type);
	if (!call->rt)
		return ibvd_call_error(call, -EOPNOTSUPP,
				       "unknown message type 0x%04x", call->type);
	if (frame->nfds != call->rt->nfds)
		return ibvd_call_error(call, -EBADF, "%s takes %u fds, got %u",
				       call->rt->name, call->rt->nfds, frame->nfds);
	if (!(call->rt->states & s->state))
		return ibvd_call_error(call, -EINVAL,
				       "%s is not allowed on a %s connection",
				       call->rt->name, state_name(s->state));
	/* Empty requests still must be well-formed protobuf if non-empty. */
	desc = call->rt->payload ? call->rt->payload : &ibvd__empty__descriptor;
	msg = protobuf_c_message_unpack(desc, NULL, frame->hdr.len, frame->payload);
	if (!msg)
		return ibvd_call_error(call, -EBADMSG, "malformed %s payload",
				       call->rt->name);
	if (call->rt->payload)
		call->msg = msg;
	else
		protobuf_c_message_free_unpacked(msg, NULL);
	return 0;
}

static void close_unclaimed_fds(struct ibvd_frame *frame)
{
	unsigned int i;

	for (i = 0; i < frame->nfds; i++)
		if (frame->fds[i] >= 0)
			ibvd_frame_close_fd(frame->fds[i]);	/* may block: hooked */
	frame->nfds = 0;
}

/* Send the reply the handler did not send: empty on success, else Error. */
static void call_finish(struct ibvd_call *call, int ret)
{
	struct ibvd_session *s = call->session;
	Ibvd__Error err = IBVD__ERROR__INIT;

	if (s->closing || call->replied)
		return;
	if (ret >= 0) {
		ibvd_session_send(s, call->type | IBVD_REPLY, call->req_id,
				  NULL, NULL, 0);
		return;
	}
	if (!call->errmsg[0])
		snprintf(call->errmsg, sizeof(call->errmsg), "%s", strerror(-ret));
	err.errnum = -ret;
	err.message = call->errmsg;
	ibvd_session_send(s, IBVD_MSG_ERROR, call->req_id, &err.base, NULL, 0);
}

void ibvd_request_dispatch(struct ibvd_session *s, struct ibvd_frame *frame)
{
	struct ibvd_call call = {
		.session = s,
		.type = frame->hdr.type,
		.req_id = frame->hdr.req_id,
		.frame = frame,
	};
	int ret;

	ret = call_prepare(&call);
	if (ret < 0) {
		log_violation(&call);
	} else {
		ret = call.rt->handler(&call);
		log_debug("client %llu: %s #%u: %s", (unsigned long long)s->id,
			  call.rt->name, call.req_id,
			  ret < 0 ? (call.errmsg[0] ? call.errmsg : strerror(-ret)) : "ok");
	}
	if (call.msg)
		protobuf_c_message_free_unpacked((ProtobufCMessage *)call.msg, NULL);
	close_unclaimed_fds(frame);
	call_finish(&call, ret);
}
