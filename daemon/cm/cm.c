/*
 * The connection manager: CM sessions, ids, options, migration, device
 * removal.  See internal.h for how the CM files divide the work.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "core/device.h"
#include "frame.h"
#include "internal.h"
#include "log.h"
#include "server/call.h"
#include "server/closer.h"
#include "server/session.h"
#include "util.h"
#include "verbs/verbs.h"

struct cm_world cm_world = {
	.sessions = TAILQ_HEAD_INITIALIZER(cm_world.sessions),
	.ids = TAILQ_HEAD_INITIALIZER(cm_world.ids),
};

/* ---- small shared helpers ------------------------------------------- */

struct ibvd_cm *cm_of(const struct ibvd_call *call)
{
	return call->session->cm;
}

struct ibvd_cm_id *cm_id_get(struct ibvd_call *call, uint32_t handle)
{
	struct ibvd_cm *cm = cm_of(call);
	struct ibvd_cm_id *id;

	/* The caller's own table only: other sessions' ids are unreachable. */
	id = cm ? ibvd_handle_lookup(&cm->ids, handle, IBVD_OBJ_CM_ID) : NULL;
	if (!id)
		ibvd_call_error(call, -EINVAL, "no CM id %#x", handle);
	return id;
}

bool cm_is_ud(const struct ibvd_cm_id *id)
{
	return id->qp_type == IBV_QPT_UD;
}

/* RC, or one of XRC's halves: the CM gives them RC's attributes. */
bool cm_is_reliable(const struct ibvd_cm_id *id)
{
	return id->qp_type == IBV_QPT_RC || id->qp_type == IBV_QPT_XRC_SEND ||
	       id->qp_type == IBV_QPT_XRC_RECV;
}

/*
 * Does listener l take a request from an id of type `asked`?  The same
 * type, or an XRC initiator's request to an XRC target's listener, as
 * Linux's RDMA CM matches the REQ's transport to the listener.
 */
bool cm_listener_type_takes(const struct ibvd_cm_id *l, uint32_t asked)
{
	if (l->qp_type == IBV_QPT_XRC_RECV)
		return asked == IBV_QPT_XRC_SEND;
	return l->qp_type == asked;
}

int cm_ps_index(uint32_t ps)
{
	switch (ps) {
	case RDMA_PS_IPOIB:	return 0;
	case RDMA_PS_TCP:	return 1;
	case RDMA_PS_UDP:	return 2;
	case RDMA_PS_IB:	return 3;
	}
	return -1;
}

const char *cm_ps_name(uint32_t ps)
{
	switch (ps) {
	case RDMA_PS_IPOIB:	return "IPoIB";
	case RDMA_PS_TCP:	return "TCP";
	case RDMA_PS_UDP:	return "UDP";
	case RDMA_PS_IB:	return "IB";
	}
	return "?";
}

const char *cm_state_name(enum cm_state state)
{
	static const char *const names[] = {
		[CM_IDLE] = "IDLE",
		[CM_ADDR_QUERY] = "ADDR_QUERY",
		[CM_ADDR_RESOLVED] = "ADDR_RESOLVED",
		[CM_ROUTE_QUERY] = "ROUTE_QUERY",
		[CM_ROUTE_RESOLVED] = "ROUTE_RESOLVED",
		[CM_CONNECT] = "CONNECT",
		[CM_DISCONNECT] = "DISCONNECT",
		[CM_ADDR_BOUND] = "ADDR_BOUND",
		[CM_LISTEN] = "LISTEN",
		[CM_DEVICE_REMOVAL] = "DEVICE_REMOVAL",
		[CM_DESTROYING] = "DESTROYING",
	};

	return (size_t)state < ARRAY_SIZE(names) ? names[state] : "?";
}

struct ibvd_device *cm_default_device(const struct ibvd_cm *cm)
{
	return TAILQ_FIRST(&cm->session->daemon->devices);
}

/* ---- CM sessions ---------------------------------------------------- */

/*
 * The event socket: our end write-only (a client writing to its end gets
 * EPIPE, not our buffer) and non-blocking (a client that stops reading
 * is disconnected, never waited for).
 */
static int event_pair(int *ours, int *theirs)
{
	int sv[2], sndbuf = CM_EVENT_SNDBUF_IDLE, ret;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	/* read too: the library says which requests its app took (CM_TAKEN) */
	if (fcntl(sv[0], F_SETFL, O_NONBLOCK) < 0) {
		ret = -errno;
		close(sv[0]);
		close(sv[1]);
		return ret;
	}
	/* small until the session listens (cm_event_room_for_requests) */
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	*ours = sv[0];
	*theirs = sv[1];
	return 0;
}

/* The token names the session for migration: it must not be guessable. */
static int make_token(uint8_t token[CM_TOKEN_LEN])
{
	size_t got = 0;
	ssize_t n;

	while (got < CM_TOKEN_LEN) {
		n = getrandom(token + got, CM_TOKEN_LEN - got, 0);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0)
			got += (size_t)n;
	}
	return 0;
}

static void cm_close_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ibvd_cm *cm = arg;

	/* From the event loop, not from inside whatever found it full. */
	ibvd_session_close(cm->session);
}

static int cm_new(struct ibvd_session *s, int *theirs)
{
	struct ibvd_cm *cm = calloc(1, sizeof(*cm));
	int ret;

	if (!cm)
		return -ENOMEM;
	ret = make_token(cm->token);
	if (ret < 0)
		goto fail;
	cm->close_ev = evtimer_new(s->daemon->base, cm_close_cb, cm);
	if (!cm->close_ev) {
		ret = -ENOMEM;
		goto fail;
	}
	ret = event_pair(&cm->event_fd, theirs);
	if (ret < 0)
		goto fail;
	cm->taken_ev = event_new(s->daemon->base, cm->event_fd,
				 EV_READ | EV_PERSIST, cm_taken_cb, cm);
	if (!cm->taken_ev || event_add(cm->taken_ev, NULL) < 0) {
		ret = -ENOMEM;
		goto fail_pair;
	}
	cm->session = s;
	TAILQ_INIT(&cm->queued);
	ibvd_handle_table_init(&cm->ids, CM_MAX_IDS_PER_SESSION);
	/* a CM id has no device when it is made: all-devices limits only */
	cm->ids.charge = ibvd_tenant_charge_obj;
	cm->ids.charge_owner = s->tenant;
	TAILQ_INSERT_TAIL(&cm_world.sessions, cm, link);
	s->cm = cm;
	s->state = IBVD_SESSION_CM;
	return 0;
fail_pair:
	if (cm->taken_ev)
		event_free(cm->taken_ev);
	close(cm->event_fd);
	close(*theirs);
fail:
	if (cm->close_ev)
		event_free(cm->close_ev);
	free(cm);
	return ret;
}

static int destroy_one(uint32_t handle, enum ibvd_obj_kind kind, void *obj,
		       void *arg)
{
	cm_id_destroy(obj);
	return 0;
}

void ibvd_cm_session_free(struct ibvd_session *s)
{
	struct ibvd_cm *cm = s->cm;

	if (!cm)
		return;
	/* Its own ids' events would go nowhere: their peers' still matter. */
	cm->dead = true;
	/* first: each id's destroy would look through the queue for its own */
	cm_events_forget(cm);
	ibvd_handle_foreach(&cm->ids, IBVD_OBJ_CM_ID, destroy_one, NULL);
	ibvd_handle_table_release(&cm->ids);
	if (cm->event_grown)
		s->tenant->cm_grown--;
	event_free(cm->taken_ev);
	/* frames with fds may wait in it: its close may release files */
	ibvd_closer_own(cm->event_fd, s->cred.uid);
	ibvd_close_client_socket(cm->event_fd);
	event_free(cm->close_ev);
	TAILQ_REMOVE(&cm_world.sessions, cm, link);
	free(cm);
	s->cm = NULL;
}

int ibvd_req_cm_open(struct ibvd_call *call)
{
	struct ibvd_session *s = call->session;
	Ibvd__CmOpenReply reply = IBVD__CM_OPEN_REPLY__INIT;
	int theirs, ret;

	ret = cm_new(s, &theirs);
	if (ret < 0)
		return ibvd_call_error(call, ret, "cannot open a CM session: %s",
				       strerror(-ret));
	reply.token.data = s->cm->token;
	reply.token.len = CM_TOKEN_LEN;
	ret = ibvd_call_reply(call, &reply.base, &theirs, 1);
	close(theirs);
	if (ret < 0 && !s->closing) {
		/* Nothing went out: the connection stays fresh. */
		ibvd_cm_session_free(s);
		s->state = IBVD_SESSION_FRESH;
	}
	return ret;
}

/* ---- ids ------------------------------------------------------------ */

struct ibvd_cm_id *cm_id_new(struct ibvd_cm *cm, uint32_t ps, uint32_t qp_type,
			     uint64_t user, int *err)
{
	struct ibvd_cm_id *id = calloc(1, sizeof(*id));
	int ret;

	if (!id) {
		*err = -ENOMEM;
		return NULL;
	}
	ret = ibvd_handle_alloc(&cm->ids, IBVD_OBJ_CM_ID, id, &id->handle);
	if (ret < 0) {
		free(id);
		/* A full table is the client's limit: ENOMEM, as the kernel. */
		*err = ret == -ENOSPC ? -ENOMEM : ret;
		return NULL;
	}
	id->cm = cm;
	id->idn = cm_world.next_idn++;
	id->user = user;
	id->ps = ps;
	id->qp_type = qp_type;
	id->state = CM_IDLE;
	id->qkey = RDMA_UDP_QKEY;
	TAILQ_INIT(&id->pending);
	LIST_INIT(&id->joins);
	TAILQ_INSERT_TAIL(&cm_world.ids, id, all_link);
	return id;
}

void cm_id_destroy(struct ibvd_cm_id *id)
{
	id->state = CM_DESTROYING;
	cm_conn_abandon(id);
	cm_mcast_leave_all(id);
	cm_unbind(id);
	cm_timer_free(id);
	/* after the abandon: a REJ or a peer's event is not for it */
	cm_events_drop(id);
	ibvd_handle_remove(&id->cm->ids, id->handle, IBVD_OBJ_CM_ID);
	TAILQ_REMOVE(&cm_world.ids, id, all_link);
	cm_own_qp_forget(id);
	free(id);
}

/* The QP type a port space implies (RDMA_PS_IB: the client's choice). */
static int ps_qp_type(struct ibvd_call *call, uint32_t ps, uint32_t asked,
		      uint32_t *qp_type)
{
	switch (ps) {
	case RDMA_PS_TCP:
		*qp_type = IBV_QPT_RC;
		return 0;
	case RDMA_PS_UDP:
	case RDMA_PS_IPOIB:
		*qp_type = IBV_QPT_UD;
		return 0;
	case RDMA_PS_IB:
		if (asked != IBV_QPT_RC && asked != IBV_QPT_UC &&
		    asked != IBV_QPT_UD && asked != IBV_QPT_XRC_SEND &&
		    asked != IBV_QPT_XRC_RECV)
			return ibvd_call_error(call, -EINVAL,
					       "QP type %u is not RC, UC, UD "
					       "or XRC", asked);
		*qp_type = asked;
		return 0;
	}
	return ibvd_call_error(call, -EPROTONOSUPPORT,
			       "unknown port space %#x", ps);
}

int ibvd_req_cm_create_id(struct ibvd_call *call)
{
	const Ibvd__CmCreateId *req = (const Ibvd__CmCreateId *)call->msg;
	Ibvd__CmId reply = IBVD__CM_ID__INIT;
	struct ibvd_cm_id *id;
	uint32_t qp_type = 0;
	int ret;

	ret = ps_qp_type(call, req->ps, req->qp_type, &qp_type);
	if (ret < 0)
		return ret;
	id = cm_id_new(cm_of(call), req->ps, qp_type, req->user, &ret);
	if (!id)
		return ibvd_call_error(call, ret, "too many CM ids");
	reply.id = id->handle;
	/* On failure the session is closing and takes the id along. */
	return ibvd_call_reply(call, &reply.base, NULL, 0);
}

int ibvd_req_cm_destroy_id(struct ibvd_call *call)
{
	const Ibvd__CmId *req = (const Ibvd__CmId *)call->msg;
	struct ibvd_cm_id *id = cm_id_get(call, req->id);

	if (!id)
		return -EINVAL;
	cm_id_destroy(id);
	return 0;
}

/* ---- options -------------------------------------------------------- */

/* An option value of exactly `size` bytes (EINVAL otherwise, as rdma-core). */
static int opt_value(struct ibvd_call *call, const ProtobufCBinaryData *v,
		     size_t size, uint32_t *out)
{
	uint8_t u8;
	int i;

	if (v->len != size)
		return ibvd_call_error(call, -EINVAL, "option value of %zu bytes, want %zu",
				       v->len, size);
	if (size == sizeof(u8)) {
		memcpy(&u8, v->data, sizeof(u8));
		*out = u8;
	} else {
		memcpy(&i, v->data, sizeof(i));
		*out = (uint32_t)i;
	}
	return 0;
}

/* The kernel's rules for when each option may change. */
static int set_id_option(struct ibvd_call *call, struct ibvd_cm_id *id,
			 int optname, uint32_t v)
{
	switch (optname) {
	case RDMA_OPTION_ID_TOS:
		id->tos = (uint8_t)v;
		return 0;
	case RDMA_OPTION_ID_REUSEADDR:
		if (!((v && id->state != CM_LISTEN) || id->state == CM_IDLE))
			return ibvd_call_error(call, -EINVAL,
					       "REUSEADDR cannot change now");
		id->reuseaddr = v != 0;
		return 0;
	case RDMA_OPTION_ID_AFONLY:
		if (id->state != CM_IDLE && id->state != CM_ADDR_BOUND)
			return ibvd_call_error(call, -EINVAL,
					       "AFONLY only before listening or resolving");
		id->afonly = v != 0;
		id->afonly_set = true;
		return 0;
	case RDMA_OPTION_ID_ACK_TIMEOUT:
		if (id->qp_type != IBV_QPT_RC)
			return ibvd_call_error(call, -EINVAL,
					       "ACK_TIMEOUT is for RC ids");
		id->timeout = (uint8_t)v;
		id->timeout_set = true;
		return 0;
	}
	return ibvd_call_error(call, -ENOSYS, "unknown option %d", optname);
}

int ibvd_req_cm_set_option(struct ibvd_call *call)
{
	const Ibvd__CmSetOption *req = (const Ibvd__CmSetOption *)call->msg;
	struct ibvd_cm_id *id = cm_id_get(call, req->id);
	size_t size;
	uint32_t v = 0;
	int ret;

	if (!id)
		return -EINVAL;
	/* RDMA_OPTION_IB_PATH is the library's: a route resolution here */
	if (req->level != RDMA_OPTION_ID)
		return ibvd_call_error(call, -ENOSYS, "option level %d not supported",
				       req->level);
	size = req->optname == RDMA_OPTION_ID_TOS ||
	       req->optname == RDMA_OPTION_ID_ACK_TIMEOUT ? sizeof(uint8_t) :
							     sizeof(int);
	if (req->optname < 0 || req->optname > RDMA_OPTION_ID_ACK_TIMEOUT)
		return ibvd_call_error(call, -ENOSYS, "unknown option %d",
				       req->optname);
	ret = opt_value(call, &req->value, size, &v);
	if (ret < 0)
		return ret;
	return set_id_option(call, id, req->optname, v);
}

/* ---- migration ------------------------------------------------------ */

/* The live session with that token (compared in full, whatever matches). */
struct ibvd_cm *cm_session_by_token(const uint8_t *token)
{
	struct ibvd_cm *cm;
	uint8_t diff;
	size_t i;

	TAILQ_FOREACH(cm, &cm_world.sessions, link) {
		for (diff = 0, i = 0; i < CM_TOKEN_LEN; i++)
			diff |= cm->token[i] ^ token[i];
		if (!diff && !cm->dead)
			return cm;
	}
	return NULL;
}

/* Move id from its session to `to`; its handle changes. */
int cm_id_move(struct ibvd_cm_id *id, struct ibvd_cm *to)
{
	struct ibvd_cm *from = id->cm;
	uint32_t handle;
	int ret;

	ret = ibvd_handle_alloc(&to->ids, IBVD_OBJ_CM_ID, id, &handle);
	if (ret < 0)
		return ret == -ENOSPC ? -ENOMEM : ret;
	ibvd_handle_remove(&id->cm->ids, id->handle, IBVD_OBJ_CM_ID);
	/* a listener's requests are counted in its session's event room */
	id->cm->npending -= id->npending;
	to->npending += id->npending;
	id->cm = to;
	id->handle = handle;
	if (id->state == CM_LISTEN)
		cm_event_room_for_requests(to);
	/* what waits for it in the old session's queue follows it */
	cm_events_move(from, id);
	return 0;
}

int ibvd_req_cm_migrate_id(struct ibvd_call *call)
{
	const Ibvd__CmMigrate *req = (const Ibvd__CmMigrate *)call->msg;
	struct ibvd_cm *to = cm_of(call), *from;
	Ibvd__CmId reply = IBVD__CM_ID__INIT;
	struct ibvd_cm_id *id;
	int ret;

	if (req->token.len != CM_TOKEN_LEN)
		return ibvd_call_error(call, -EINVAL, "token must be %d bytes",
				       CM_TOKEN_LEN);
	from = cm_session_by_token(req->token.data);
	if (!from)
		return ibvd_call_error(call, -EINVAL, "no CM session with that token");
	/* A token alone is not enough: the ids are their uid's. */
	if (from->session->cred.uid != call->session->cred.uid)
		return ibvd_call_error(call, -EPERM,
				       "the id belongs to another user");
	id = ibvd_handle_lookup(&from->ids, req->id, IBVD_OBJ_CM_ID);
	if (!id)
		return ibvd_call_error(call, -EINVAL, "no CM id %#x there", req->id);
	if (from != to) {
		ret = cm_id_move(id, to);
		if (ret < 0)
			return ibvd_call_error(call, ret, "too many CM ids");
	}
	reply.id = id->handle;
	return ibvd_call_reply(call, &reply.base, NULL, 0);
}

/* ---- device removal ------------------------------------------------- */

void ibvd_cm_device_removed(struct ibvd_device *dev)
{
	struct ibvd_cm_id *id;

	cm_wire_device_removed(dev);
	TAILQ_FOREACH(id, &cm_world.ids, all_link) {
		if (id->dev != dev)
			continue;
		/* Nothing may reach the freed device through the id. */
		cm_wire_forget(id);
		cm_conn_device_removed(id);
		id->dev = NULL;
		id->port_num = 0;
		id->route_valid = false;
		id->state = CM_DEVICE_REMOVAL;
		cm_event_simple(id, RDMA_CM_EVENT_DEVICE_REMOVAL, 0);
	}
}

int ibvd_cm_start(struct ibvd_daemon *d)
{
	return cm_wire_start(d->base);
}

void ibvd_cm_stop(void)
{
	cm_wire_stop();
}

uint64_t ibvd_cm_going_looks(void)
{
	return cm_world.going_looks;
}
