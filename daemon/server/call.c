/*
 * The dispatcher: a received frame becomes a call, checked against its
 * row of the request table (which lives above the server, in request.c,
 * and arrives as d->up.request_find), handled, and answered.  And the call
 * API handlers use to reply.
 */
#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "call.h"
#include "ibverbsd.pb-c.h"
#include "log.h"
#include "session.h"
#include "tenant/tenant.h"

struct ibvd_daemon *ibvd_call_daemon(const struct ibvd_call *call)
{
	return call->session->daemon;
}

/*
 * Sent by the uid that connected?  A message the kernel gave no
 * credentials is not; one sent before SO_PASSCRED was set on an imported
 * socket comes as uid 65534 (pid 0), which no privileged session has.
 * Groups cannot be told per message: an admin-group member that leaves
 * the group but keeps its uid keeps its privileges (ibverbsd(8)).
 */
static bool sender_unchanged(const struct ibvd_call *call)
{
	const struct ibvd_frame *f = call->frame;

	return f && f->sender_known && f->sender_uid == call->session->cred.uid;
}

bool ibvd_call_privileged(const struct ibvd_call *call)
{
	return call->session->privileged && sender_unchanged(call);
}

bool ibvd_call_root(const struct ibvd_call *call)
{
	return call->session->cred.uid == 0 && sender_unchanged(call);
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

/*
 * Protocol violations are the client's bug; logged within its uid's
 * budget (tenant.h), so that one uid's flood hides no other's.
 */
static void log_violation(const struct ibvd_call *call)
{
	const struct ibvd_session *s = call->session;

	ibvd_tenant_log(s->tenant, IBVD_LOG_NOTICE,
			"client %llu (pid %d uid %u %s): rejected request 0x%04x #%u: %s",
			(unsigned long long)s->id, (int)s->cred.pid,
			(unsigned int)s->cred.uid, s->comm, call->type,
			call->req_id, call->errmsg);
}

/* Check the frame against its row and unpack it; 0 or a negative errno. */
static int call_prepare(struct ibvd_call *call)
{
	struct ibvd_session *s = call->session;
	struct ibvd_frame *frame = call->frame;
	const ProtobufCMessageDescriptor *desc;
	ProtobufCMessage *msg;

	call->rt = s->daemon->up.request_find(call->type);
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

/* Requests dispatched so far (control thread): loop.c polls while they come. */
static uint64_t calls;

uint64_t ibvd_call_count(void)
{
	return calls;
}

/*
 * Replies and Errors only ever go from us to a client.  One that sends
 * them is answering a session of ours: a socket connected to our own
 * listener, handed to us as an importer's (IMPORT_DEVICE).  Answering
 * back would bounce between the two for ever: it is hung up on.
 */
static bool is_answer(uint16_t type)
{
	return type == IBVD_MSG_ERROR || (type & IBVD_REPLY);
}

static void hang_up_on_answer(struct ibvd_session *s, struct ibvd_frame *frame)
{
	ibvd_tenant_log(s->tenant, IBVD_LOG_NOTICE,
			"client %llu (pid %d uid %u %s): sent an answer (type 0x%04x), "
			"not a request: disconnecting",
			(unsigned long long)s->id, (int)s->cred.pid,
			(unsigned int)s->cred.uid, s->comm, frame->hdr.type);
	close_unclaimed_fds(frame);
	ibvd_session_close(s);
}

void ibvd_call_dispatch(struct ibvd_session *s, struct ibvd_frame *frame)
{
	struct ibvd_call call = {
		.session = s,
		.type = frame->hdr.type,
		.req_id = frame->hdr.req_id,
		.frame = frame,
	};
	int ret;

	calls++;
	if (is_answer(frame->hdr.type)) {
		hang_up_on_answer(s, frame);
		return;
	}
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
