/*
 * Connections: listen, connect, accept, reject, establish, disconnect,
 * notify.  The QP attributes that go with them are in qp.c.
 *
 * The daemon plays the IB CM of both ends.  A connect finds the listener
 * and makes the passive id on the listener's session at once (REQ); the
 * two ids are then linked as peers and move through the phases of
 * internal.h together: accept is the REP (the active side's library
 * gets the internal CONNECT_REPLY), establish the RTU, disconnect the
 * DREQ/DREP.  When one end disappears its peer hears what the IB CM would
 * send: a REJ before the connection is established, a DREQ after.
 *
 * The values follow the kernel's RDMA CM and IB CM: each side reports the
 * other's parameters from its own point of view (responder resources and
 * initiator depth swap), the passive side's starting PSN is the daemon's,
 * private data is limited to the IB message and zero-padded for the
 * receiver.
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/sockios.h>

#include <infiniband/verbs.h>

#include "config/config.h"
#include "core/device.h"
#include "cma_hdr.h"
#include "frame.h"
#include "internal.h"
#include "log.h"
#include "server/call.h"
#include "server/closer.h"
#include "server/daemon.h"
#include "server/session.h"
#include "tenant/tenant.h"
#include "util.h"
#include "verbs/query.h"
#include "verbs/verbs.h"

#define PSN_MASK	0xFFFFFFu
#define QPN_MASK	0xFFFFFFu
#define RETRY_MASK	7u		/* 3-bit IB fields */

/* ---- parameters ----------------------------------------------------- */

uint32_t cm_max_rd_atom(const struct ibvd_cm_id *id)
{
	Ibvd__DeviceAttr da;

	ibvd_device_attr(id->dev, &da);
	return (uint32_t)da.max_qp_rd_atom;
}

/* RDMA_MAX_RESP_RES/RDMA_MAX_INIT_DEPTH (0xFF) ask for the device's most. */
static int rd_atom(struct ibvd_call *call, const char *what, uint32_t v,
		   uint32_t max, uint8_t *out)
{
	if (v == RDMA_MAX_RESP_RES)
		v = max;
	if (v > max)
		return ibvd_call_error(call, -EINVAL, "%s %u above the device's %u",
				       what, v, max);
	*out = (uint8_t)v;
	return 0;
}

/* Check a CmConnParam against id's device and the private-data limit. */
static int conn_param(struct ibvd_call *call, const struct ibvd_cm_id *id,
		      const Ibvd__CmConnParam *m, size_t pdata_max,
		      struct cm_conn_param *p)
{
	uint32_t max;
	int ret;

	if (!m)
		return ibvd_call_error(call, -EINVAL, "no connection parameters");
	if (!id->dev)
		return ibvd_call_error(call, -EINVAL, "the id has no device");
	if (m->private_data.len > pdata_max)
		return ibvd_call_error(call, -EINVAL,
				       "%zu bytes of private data, at most %zu",
				       m->private_data.len, pdata_max);
	memset(p, 0, sizeof(*p));
	max = cm_max_rd_atom(id);
	ret = rd_atom(call, "responder_resources", m->responder_resources, max,
		      &p->responder_resources);
	if (ret == 0)
		ret = rd_atom(call, "initiator_depth", m->initiator_depth, max,
			      &p->initiator_depth);
	if (ret < 0)
		return ret;
	/* The IB CM carries these in 1- and 3-bit fields. */
	p->flow_control = m->flow_control ? 1 : 0;
	p->retry_count = (uint8_t)(m->retry_count & RETRY_MASK);
	p->rnr_retry_count = (uint8_t)(m->rnr_retry_count & RETRY_MASK);
	p->srq = m->srq;
	p->qp_num = m->qp_num & QPN_MASK;
	/* as modify_qp: a controlled Q_Key is the privileged's (qp_modify.c) */
	if ((m->qkey & IBVD_QKEY_CONTROLLED) && !ibvd_call_privileged(call))
		return ibvd_call_error(call, -EPERM,
				       "Q_Key %#x is a controlled one: root only",
				       m->qkey);
	p->qkey = m->qkey;
	p->psn = m->psn & PSN_MASK;
	return 0;
}

/* What the receiver of p's message sees: resources and depth swap. */
static struct cm_conn_param seen_by_peer(const struct cm_conn_param *p)
{
	struct cm_conn_param v = *p;

	v.responder_resources = p->initiator_depth;
	v.initiator_depth = p->responder_resources;
	return v;
}

static uint8_t min_u8(uint8_t a, uint8_t b)
{
	return a < b ? a : b;
}

/* ---- links between ids ---------------------------------------------- */

static void link_peers(struct ibvd_cm_id *a, struct ibvd_cm_id *b)
{
	a->peer = b;
	b->peer = a;
}

static void unlink_peers(struct ibvd_cm_id *id)
{
	if (id->peer)
		id->peer->peer = NULL;
	id->peer = NULL;
}

void cm_pending_leave(struct ibvd_cm_id *id)
{
	struct ibvd_cm_id *l = id->listener;

	if (!l)
		return;
	TAILQ_REMOVE(&l->pending, id, pending_link);
	l->npending--;
	l->cm->npending--;
	id->listener = NULL;
}

/* CM_TAKEN frames handled per wakeup: one session does not hold the loop. */
#define CM_TAKEN_BATCH	64

/* One frame from the event socket; false when there is no more to read. */
static bool taken_one(struct ibvd_cm *cm, int fd)
{
	static uint8_t buf[IBVD_FRAME_MAX];
	struct ibvd_cm_id *id;
	struct ibvd_frame f;
	int ret;

	ibvd_closer_receiving(true);
	ret = ibvd_frame_recv(fd, buf, sizeof(buf), &f, MSG_DONTWAIT);
	ibvd_closer_receiving(false);
	if (ret == -EAGAIN)
		return false;
	/* A client that dies with events unread resets the socket: a close. */
	if (ret == 0 || ret == -ECONNRESET) {
		cm_session_kill(cm, NULL);	/* it closed the channel */
		return false;
	}
	if (ret < 0 || f.hdr.type != IBVD_MSG_CM_TAKEN || f.hdr.len || f.nfds) {
		if (ret > 0)
			ibvd_frame_close_fds(&f);
		cm_session_kill(cm, "sent its CM event socket something other "
			       "than CM_TAKEN");
		return false;
	}
	id = ibvd_handle_lookup(&cm->ids, f.hdr.req_id, IBVD_OBJ_CM_ID);
	if (id)
		cm_pending_leave(id);
	return true;
}

/*
 * The library says its app read a connection request (CM_TAKEN, req_id:
 * the new id's handle).  As in the kernel, a request counts against its
 * listener's backlog until it is read, not until it is answered: an app
 * that reads requests in one thread and accepts them in others (rping)
 * takes more at once than its backlog.  Only the ids of this session can
 * be named, so a client frees slots of its own listeners only.
 */
void cm_taken_cb(int fd, short what, void *arg)
{
	struct ibvd_cm *cm = arg;
	unsigned int n;

	(void)what;
	/* fds a hostile client sent along are its uid's to close (closer.h) */
	ibvd_closer_serving(cm->session->cred.uid);
	for (n = 0; n < CM_TAKEN_BATCH && !cm->dead; n++)
		if (!taken_one(cm, fd))
			break;
	ibvd_closer_serving_none();
}

/* TIMEWAIT_EXIT follows a disconnect for an id that had a QP. */
static void start_timewait(struct ibvd_cm_id *id)
{
	if (id->lqpn)
		cm_timer_arm(id, CM_TIMER_TIMEWAIT, CM_TIMEWAIT_MS);
}

/* An error event carrying the full (zero) private data of its message. */
void cm_send_refusal(struct ibvd_cm_id *id, uint32_t event, int32_t status,
		     const uint8_t *pdata, size_t len, size_t full)
{
	struct cm_event ev = {
		.event = event,
		.status = status,
		.pdata = pdata,
		.pdata_len = len,
		.pdata_full = full,
	};

	cm_event_send(id, &ev);
}

/* The active side's request failed: REJ (RC/UC) or SIDR REP (UD). */
void cm_refuse_active(struct ibvd_cm_id *a, int32_t rej_reason,
		      int32_t sidr_status, const uint8_t *pdata, size_t len)
{
	a->phase = CM_PH_CLOSED;
	if (cm_is_ud(a))
		cm_send_refusal(a, RDMA_CM_EVENT_UNREACHABLE, sidr_status, pdata,
				len, CM_PDATA_SIDR_REP);
	else
		cm_send_refusal(a, RDMA_CM_EVENT_REJECTED, rej_reason, pdata,
				len, CM_PDATA_REJ);
}

void cm_send_disconnected(struct ibvd_cm_id *id, int status)
{
	id->phase = CM_PH_CLOSED;
	id->state = CM_DISCONNECT;
	cm_event_simple(id, RDMA_CM_EVENT_DISCONNECTED, status);
	start_timewait(id);
}

/*
 * The other side ended the connection (its DREQ, or its death).  As in
 * the kernel, whose CM sends the DREP when the app calls rdma_disconnect
 * and only then enters timewait, TIMEWAIT_EXIT waits for that call.
 */
void cm_peer_disconnected(struct ibvd_cm_id *id)
{
	id->phase = CM_PH_CLOSED;
	id->state = CM_DISCONNECT;
	id->timewait_owed = true;
	cm_event_simple(id, RDMA_CM_EVENT_DISCONNECTED, 0);
}

/* ---- a local disconnect's DREP ------------------------------------- */

/*
 * As with the kernel's IB CM, a DREQ is answered (its DREP) when the app
 * that heard DISCONNECTED calls rdma_disconnect or destroys its id (its
 * process ending does), not before; only then does the id that
 * disconnected hear DISCONNECTED, so that a program waiting for it before
 * tearing down waits for its peer.  A peer that does neither leaves it
 * waiting until the DREQ's resends would have run out: DISCONNECTED with
 * -ETIMEDOUT (the kernel's IB_CM_DREQ_ERROR), after
 * cm.handshake_timeout_ms, as an unanswered REQ or REP.
 */
static void dreq_wait(struct ibvd_cm_id *a, struct ibvd_cm_id *b)
{
	uint32_t ms = a->cm->session->daemon->cfg->cm_handshake_ms;

	a->drep_from = b;
	b->drep_to = a;
	if (cm_timer_arm(a, CM_TIMER_DREQ, ms) < 0)
		log_warn("cm id %u: no timer for its disconnect; it waits as long as its peer",
			 a->idn);
}

static void dreq_unlink(struct ibvd_cm_id *a)
{
	a->drep_from->drep_to = NULL;
	a->drep_from = NULL;
}

/* b answers the local DREQ it heard, if any: that side's DISCONNECTED. */
static void drep_send(struct ibvd_cm_id *b)
{
	struct ibvd_cm_id *a = b->drep_to;

	if (!a)
		return;
	dreq_unlink(a);
	cm_timer_stop(a);
	cm_send_disconnected(a, 0);
}

void cm_dreq_expired(struct ibvd_cm_id *a)
{
	if (!a->drep_from)
		return;
	dreq_unlink(a);
	cm_send_disconnected(a, -ETIMEDOUT);
}

/*
 * The id's device is gone: it hears nothing more of a disconnect (the
 * kernel delivers nothing after DEVICE_REMOVAL), neither the DISCONNECTED
 * it waits for nor the one its answer would give the id it owes.
 */
void cm_conn_device_removed(struct ibvd_cm_id *id)
{
	struct ibvd_cm_id *waiter = id->drep_to;

	if (id->drep_from) {
		dreq_unlink(id);
		cm_timer_stop(id);
	}
	if (waiter) {
		dreq_unlink(waiter);
		cm_timer_stop(waiter);
	}
}

/* y's peer vanished (destroyed, or its process died): what y hears. */
static void peer_lost(struct ibvd_cm_id *y)
{
	switch (y->phase) {
	case CM_PH_REQ_SENT:
		/* The passive id died before answering: REJ, consumer. */
		cm_refuse_active(y, CM_REJ_CONSUMER_DEFINED, CM_SIDR_REJECT, NULL,
				 0);
		break;
	case CM_PH_REQ_RCVD:
		/*
		 * The active side gave up: REJ, timeout (SIDR has none).  The
		 * request still holds its backlog slot until the listener's
		 * app reads it, as an unread request does in the kernel:
		 * otherwise connecting and giving up in a loop would push
		 * events at another user's listener faster than it reads.
		 */
		if (cm_is_ud(y))
			break;	/* its answer will go nowhere: sidr_orphan() */
		y->phase = CM_PH_CLOSED;
		cm_send_refusal(y, RDMA_CM_EVENT_REJECTED, CM_REJ_TIMEOUT, NULL,
				0, CM_PDATA_REJ);
		break;
	case CM_PH_REP_RCVD:
	case CM_PH_REP_SENT:
		y->phase = CM_PH_CLOSED;
		cm_send_refusal(y, RDMA_CM_EVENT_REJECTED,
				CM_REJ_CONSUMER_DEFINED, NULL, 0, CM_PDATA_REJ);
		break;
	case CM_PH_ESTABLISHED:
		cm_peer_disconnected(y);
		break;
	case CM_PH_NONE:
	case CM_PH_CLOSED:
		break;
	}
}

/*
 * ctx goes with its QPs, and the engine breaks the QPs of their RC peers
 * at once (engine/attach.c, break_orphans): their receives flush, a send
 * in flight fails.  Its process is usually ending, and closes its CM
 * sessions after the context or before, in any order; a peer that saw
 * those errors before its DISCONNECTED would read a reset (an rsocket:
 * ECONNRESET, ETIMEDOUT) where its app must read the end of the stream,
 * as a TCP peer reads the FIN of a process that exits.  On a fabric the
 * dead end's DREQ comes long before any retry of the peer's runs out;
 * here each established id of a QP of ctx tells its peer now, before
 * the break, and is left without a peer, as after a DREQ whose reply is
 * lost: its own session's end says nothing more, and a disconnect of its
 * own is answered by its DISCONNECTED alone.
 */
void ibvd_cm_context_going(const struct ibvd_context *ctx)
{
	struct ibvd_keyed *n, *next;
	struct ibvd_cm_id *id, *peer;

	/*
	 * Its own ids only (not every id of the daemon, for each context
	 * that goes: many short-lived ones made that quadratic); they leave
	 * the index, as no QP of ctx will be theirs again.
	 */
	for (n = ibvd_keyed_find(&cm_world.by_qp_ctx, ctx->id); n; n = next) {
		next = ibvd_keyed_next(n);
		id = container_of(n, struct ibvd_cm_id, by_qp_ctx);
		cm_world.going_looks++;
		peer = id->peer;
		if (peer && id->phase == CM_PH_ESTABLISHED &&
		    id->own_qp.ctx == ctx->id && cm_own_qp_alive(id)) {
			unlink_peers(id);
			peer_lost(peer);
		}
		cm_own_qp_forget(id);
	}
}

void cm_conn_abandon(struct ibvd_cm_id *id)
{
	struct ibvd_cm_id *child, *peer = id->peer;

	cm_pending_leave(id);
	/* A listener's requests live on as ids of their own. */
	while ((child = TAILQ_FIRST(&id->pending)))
		cm_pending_leave(child);
	cm_wire_abandon(id);
	/* the end of an id that heard a DREQ answers it, as ib_cm's */
	drep_send(id);
	if (id->drep_from)
		dreq_unlink(id);
	if (peer) {
		unlink_peers(id);
		peer_lost(peer);
	}
}

/* ---- a handshake nobody finishes ------------------------------------ */

/*
 * The other side of a local handshake is alive but does not answer: an
 * app that never accepts nor rejects a request, or never confirms a reply
 * (no rdma_establish).  The kernel's CM resends its REQ or REP for about
 * a minute, then reports UNREACHABLE, -ETIMEDOUT, and sends a REJ with
 * reason timeout, which the other side hears as REJECTED (SIDR has no
 * REJ: a UD request just stops waiting).  The id that waits holds the
 * timer; it only acts if the id still waits when it fires, as an id
 * sends one REQ or one REP in its life.
 */
static void arm_handshake(struct ibvd_cm_id *id)
{
	uint32_t ms = id->cm->session->daemon->cfg->cm_handshake_ms;

	if (cm_timer_arm(id, CM_TIMER_HANDSHAKE, ms) < 0)
		log_warn("cm id %u: no timer for its handshake; it waits as long as its peer",
			    id->idn);
}

void cm_handshake_expired(struct ibvd_cm_id *id)
{
	struct ibvd_cm_id *peer = id->peer;

	if ((id->phase != CM_PH_REQ_SENT && id->phase != CM_PH_REP_SENT) ||
	    !peer)
		return;
	unlink_peers(id);
	id->phase = CM_PH_CLOSED;
	cm_event_simple(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
	/* An unread request keeps its backlog slot, as in peer_lost() */
	if (cm_is_ud(peer))
		return;
	peer->phase = CM_PH_CLOSED;
	cm_send_refusal(peer, RDMA_CM_EVENT_REJECTED, CM_REJ_TIMEOUT, NULL, 0,
			CM_PDATA_REJ);
}

/* ---- listen --------------------------------------------------------- */

/*
 * A listening session's event socket gets room for bursts of requests
 * from others (internal.h, CM_EVENT_SNDBUF): beyond net.core.wmem_max if
 * the daemon may (CAP_NET_ADMIN), else up to it.  Once per session, and
 * for CM_GROWN_PER_UID sessions of a uid at a time.
 */
void cm_event_room_for_requests(struct ibvd_cm *cm)
{
	struct ibvd_tenant *t = cm->session->tenant;
	int sndbuf = CM_EVENT_SNDBUF;

	if (cm->event_grown || t->cm_grown >= CM_GROWN_PER_UID)
		return;
	cm->event_grown = true;
	t->cm_grown++;
	if (setsockopt(cm->event_fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf,
		       sizeof(sndbuf)) < 0)
		setsockopt(cm->event_fd, SOL_SOCKET, SO_SNDBUF, &sndbuf,
			   sizeof(sndbuf));
}

static int listen_bind(struct ibvd_call *call, struct ibvd_cm_id *id)
{
	struct sockaddr_storage any;
	int ret;

	/* As the kernel: an unbound listener takes 0.0.0.0 and a free port. */
	memset(&any, 0, sizeof(any));
	any.ss_family = AF_INET;
	ret = cm_bind(call, id, &any);
	if (ret == 0)
		id->state = CM_ADDR_BOUND;
	return ret;
}

int ibvd_req_cm_listen(struct ibvd_call *call)
{
	const Ibvd__CmListen *req = (const Ibvd__CmListen *)call->msg;
	struct ibvd_cm_id *id = cm_id_get(call, req->id);
	int ret;

	if (!id)
		return -EINVAL;
	if (id->state == CM_IDLE) {
		ret = listen_bind(call, id);
		if (ret < 0)
			return ret;
	}
	if (id->state != CM_ADDR_BOUND)
		return ibvd_call_error(call, -EINVAL, "the id is %s, not ADDR_BOUND",
				       cm_state_name(id->state));
	ret = cm_check_listen(call, id);
	if (ret < 0)
		return ret;
	cm_event_room_for_requests(id->cm);
	/* Once listening, the port is the listener's alone. */
	id->reuseaddr = false;
	id->backlog = req->backlog > 0 && req->backlog < CM_MAX_BACKLOG ?
		      req->backlog : CM_MAX_BACKLOG;
	id->state = CM_LISTEN;
	cm_port_lead(id);
	return 0;
}

/* ---- connect -------------------------------------------------------- */

/*
 * Has cm's event socket room for one more request of others and what may
 * follow it (its REJ), beside those already admitted and the reserve?
 * Requests come at others' pace; a full socket would have the listener's
 * session closed, every id of it lost (another uid's connect loop could
 * do that to any listener).  So a request that might not fit is refused
 * now, as one past the backlog.
 */
static bool event_room(const struct ibvd_cm *cm)
{
	socklen_t len = sizeof(int);
	int queued = 0, sndbuf = 0;

	if (cm->nqueued)
		return false;	/* full already: its events wait (event.c) */
	if (ioctl(cm->event_fd, SIOCOUTQ, &queued) < 0 ||
	    getsockopt(cm->event_fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, &len) < 0)
		return true;	/* cannot tell: the backlog alone decides */
	return (uint64_t)queued + CM_EVENT_RESERVE +
	       ((uint64_t)cm->npending + 1) * 2 * CM_EVENT_COST <=
	       (uint64_t)sndbuf;
}

bool cm_listener_takes(const struct ibvd_cm_id *l, bool ud)
{
	return cm_is_ud(l) == ud && l->npending < (unsigned int)l->backlog &&
	       event_room(l->cm);
}

struct ibvd_cm_id *cm_child_new(struct ibvd_cm_id *l, struct ibvd_device *dev,
				const struct sockaddr_storage *src,
				const struct sockaddr_storage *dst,
				const struct cm_conn_param *req)
{
	struct ibvd_cm_id *c;
	int err;

	if (!dev)
		return NULL;
	c = cm_id_new(l->cm, l->ps, l->qp_type, 0, &err);
	if (!c)
		return NULL;
	/* Its own address is the one asked for, whatever l is bound to. */
	c->src = *dst;
	c->dst = *src;
	cm_attach_device(c, dev, l->dev == dev ? l->port_num : 1);
	c->slid = c->dlid = cm_port_lid(c);
	cm_route_found(c);
	c->tos = l->tos;
	c->timeout = l->timeout;
	c->timeout_set = l->timeout_set;
	c->state = CM_CONNECT;
	c->phase = CM_PH_REQ_RCVD;
	c->remote = *req;
	c->remote_valid = true;
	/* Until it accepts: the request's values, as the device allows. */
	c->local.responder_resources = min_u8(req->initiator_depth,
					      (uint8_t)cm_max_rd_atom(c));
	c->local.initiator_depth = min_u8(req->responder_resources,
					  (uint8_t)cm_max_rd_atom(c));
	c->local.psn = ibvd_random32() & PSN_MASK;
	c->local.qkey = c->qkey;
	c->listener = l;
	TAILQ_INSERT_TAIL(&l->pending, c, pending_link);
	l->npending++;
	l->cm->npending++;
	return c;
}

/*
 * The private data of id's request: the RDMA CM header takes 36 bytes of
 * it, save for AF_IB ids (the kernel's cma_user_data_offset).
 */
static size_t req_pdata(const struct ibvd_cm_id *id)
{
	bool ib = id->src.ss_family == AF_IB;

	if (cm_is_ud(id))
		return ib ? CM_PDATA_SIDR_REQ_IB : CM_PDATA_SIDR_REQ;
	return ib ? CM_PDATA_REQ_IB : CM_PDATA_REQ;
}

void cm_send_request(struct ibvd_cm_id *c, const struct ibvd_cm_id *l,
		     const uint8_t *pdata, size_t len)
{
	struct cm_conn_param view = seen_by_peer(&c->remote);
	Ibvd__CmUdParam ud = IBVD__CM_UD_PARAM__INIT;
	struct cm_event ev = {
		.event = RDMA_CM_EVENT_CONNECT_REQUEST,
		.listen_id = l->handle,
		.user = l->user,
		.conn = &view,
		.pdata = pdata,
		.pdata_len = len,
		.pdata_full = req_pdata(c),
	};

	/*
	 * A SIDR REQ carries neither the requester's QPN nor its Q_Key: the
	 * kernel's event has the private data alone, the rest zero, as a
	 * request from another host has here.
	 */
	if (cm_is_ud(c))
		ev.ud = &ud;
	cm_event_send(c, &ev);
}

/* After the reply to CM_CONNECT: the REQ reaches a listener, or not. */
static void deliver_request(struct ibvd_cm_id *a,
			    const ProtobufCBinaryData *pdata)
{
	struct ibvd_cm_id *l = cm_find_listener(a->ps, &a->dst), *c = NULL;
	struct ibvd_device *dev;

	if (!l || !cm_listener_type_takes(l, a->qp_type)) {
		cm_refuse_active(a, CM_REJ_INVALID_SERVICE_ID,
				 CM_SIDR_UNSUPPORTED, NULL, 0);
		return;
	}
	/*
	 * A listener on a loopback address takes every address of the host:
	 * the child is on the device the address asked for, not on the one
	 * a software listener's bind gave it.
	 */
	dev = l->dev && !cm_addr_is_wild(&l->src) ? l->dev :
						     cm_addr_device(l->cm, &a->dst);
	if (cm_listener_takes(l, cm_is_ud(a)))
		c = cm_child_new(l, dev, &a->src, &a->dst, &a->local);
	if (!c) {
		/* Backlog full, or the listener's session out of ids. */
		cm_refuse_active(a, CM_REJ_CONSUMER_DEFINED, CM_SIDR_REJECT,
				 NULL, 0);
		return;
	}
	/* What a REQ would bring it (remote.c): the requester's ToS and ACK timeout. */
	c->tos = a->tos;
	if (!c->timeout_set) {
		c->timeout = cm_req_ack_timeout(a);
		c->timeout_set = true;
	}
	link_peers(a, c);
	cm_send_request(c, l, pdata->data, pdata->len);
}

int ibvd_req_cm_connect(struct ibvd_call *call)
{
	const Ibvd__CmConnect *req = (const Ibvd__CmConnect *)call->msg;
	struct ibvd_cm_id *id = cm_id_get(call, req->id);
	struct cm_conn_param p;
	int ret;

	if (!id)
		return -EINVAL;
	if (id->state != CM_ROUTE_RESOLVED)
		return ibvd_call_error(call, -EINVAL, "the id is %s, not ROUTE_RESOLVED",
				       cm_state_name(id->state));
	ret = conn_param(call, id, req->param, req_pdata(id), &p);
	if (ret < 0)
		return ret;
	if (cm_is_ud(id) && !p.qkey)
		p.qkey = id->qkey;
	if (req->move_qp && !cm_is_ud(id) && p.qp_num != cm_own_qp_num(id))
		return ibvd_call_error(call, -EINVAL,
				       "QP %#x is not the one made with the id",
				       p.qp_num);
	id->confirm_reply = req->move_qp && !cm_is_ud(id);
	id->local = p;
	id->lqpn = p.qp_num;
	id->active = true;
	id->state = CM_CONNECT;
	id->phase = CM_PH_REQ_SENT;
	ret = ibvd_call_reply(call, NULL, NULL, 0);
	/* Our session is closing if that failed: no request worth making. */
	if (ret < 0)
		return ret;
	if (cm_dst_is_far(id))
		cm_wire_connect(id, req->param->private_data.data,
				req->param->private_data.len);
	else
		deliver_request(id, &req->param->private_data);
	if (id->phase == CM_PH_REQ_SENT && id->peer)
		arm_handshake(id);
	return 0;
}

/* ---- accept --------------------------------------------------------- */

/* A UD answer (SIDR REP): how a reaches the passive side's port. */
static void accept_ud(struct ibvd_cm_id *c, struct ibvd_cm_id *a,
		      const struct cm_conn_param *p,
		      const ProtobufCBinaryData *pdata)
{
	Ibvd__CmUdParam ud = IBVD__CM_UD_PARAM__INIT;
	Ibvd__AhAttr ah = IBVD__AH_ATTR__INIT;
	uint8_t dgid[16];
	struct cm_event ev = {
		.event = RDMA_CM_EVENT_ESTABLISHED,
		.pdata = pdata->data,
		.pdata_len = pdata->len,
		.pdata_full = CM_PDATA_SIDR_REP,
		.ud = &ud,
	};

	ah.dlid = cm_port_lid(c);
	ah.port_num = a->port_num;
	if (cm_dev_is_roce(a->dev)) {
		cm_path_grh(a, &ah, dgid);
	} else {
		cm_port_gid0(c, dgid);
		ah.is_global = true;
		ah.dgid.data = dgid;
		ah.dgid.len = sizeof(dgid);
		ah.hop_limit = CM_GRH_HOP_LIMIT;
		ah.traffic_class = a->tos;
	}
	ud.ah_attr = &ah;
	ud.qp_num = p->qp_num;
	ud.qkey = p->qkey;
	/* SIDR is one exchange: nothing links the ids afterwards. */
	unlink_peers(c);
	c->phase = CM_PH_CLOSED;
	a->phase = CM_PH_CLOSED;
	cm_event_send(a, &ev);
}

/*
 * The RTU: the active id a (REP_RCVD) and its peer are established.
 * Returns the local peer that is to hear ESTABLISHED once the caller
 * has answered, if there is one still waiting for it (it may have
 * established already, rdma_notify); across hosts the RTU leaves here.
 */
static struct ibvd_cm_id *confirm(struct ibvd_cm_id *a)
{
	struct ibvd_cm_id *p = a->peer;
	bool waits;

	a->phase = CM_PH_ESTABLISHED;
	if (!p) {
		cm_wire_establish(a);
		return NULL;
	}
	waits = p->phase == CM_PH_REP_SENT;
	p->phase = CM_PH_ESTABLISHED;
	return waits ? p : NULL;
}

/*
 * The active side's refusal of a reply (a REJ): the passive side hears
 * REJECTED with pdata and the REJ's reason (the IB CM's "consumer
 * defined" unless rdma_reject_ece's).
 */
static void refuse_reply(struct ibvd_cm_id *a, int32_t reason,
			 const uint8_t *pdata, size_t len)
{
	struct ibvd_cm_id *p = a->peer;

	if (!p) {
		cm_wire_reject(a, (uint16_t)reason, pdata, len);
		a->phase = CM_PH_CLOSED;
		return;
	}
	a->phase = CM_PH_CLOSED;
	unlink_peers(a);
	p->phase = CM_PH_CLOSED;
	cm_send_refusal(p, RDMA_CM_EVENT_REJECTED, reason, pdata, len,
			CM_PDATA_REJ);
}

/*
 * What the active side's library would do on the reply, done here for a
 * QP made with the id (CM_CONNECT's move_qp): RTR and RTS, then the RTU,
 * as the kernel's RDMA CM does for its own consumers.  The library then
 * reports ESTABLISHED without a round trip of its own, and the passive
 * side does not wait for the active process to be scheduled.  A move
 * that fails ends the connection as the library's REJ would: the QP in
 * ERR, the passive side REJECTED, the reply's status the error.
 */
static void confirm_reply(struct ibvd_cm_id *a, struct cm_event *ev)
{
	struct ibvd_call move = { .session = a->cm->session };
	struct ibvd_cm_id *p;
	int ret = cm_qp_move(&move, a, NULL);

	if (ret < 0) {
		/* a client can make this happen at will: its uid's log quota */
		ibvd_tenant_log(a->cm->session->tenant, IBVD_LOG_NOTICE,
				"cm id %u: its QP %#x did not reach RTS: %s",
				a->idn, cm_own_qp_num(a),
				move.errmsg[0] ? move.errmsg : strerror(-ret));
		(void)cm_qp_to_err(&move, a);
		refuse_reply(a, CM_REJ_CONSUMER_DEFINED, NULL, 0);
		ev->status = ret;
		cm_event_send(a, ev);
		return;
	}
	p = confirm(a);
	ev->established = true;
	cm_event_send(a, ev);
	if (p)
		cm_event_simple(p, RDMA_CM_EVENT_ESTABLISHED, 0);
}

void cm_reply_received(struct ibvd_cm_id *a, const struct cm_conn_param *rep,
		       const uint8_t *pdata, size_t len)
{
	struct cm_conn_param view = seen_by_peer(rep);
	struct cm_event ev = {
		.event = IBVD_CM_EVENT_CONNECT_REPLY,
		.conn = &view,
		.pdata = pdata,
		.pdata_len = len,
		.pdata_full = CM_PDATA_REP,
	};

	/* A REP has no retry count field: the event says 0, as the kernel's. */
	view.retry_count = 0;
	a->remote = *rep;
	a->remote_valid = true;
	a->local.responder_resources = view.responder_resources;
	a->local.initiator_depth = view.initiator_depth;
	a->phase = CM_PH_REP_RCVD;
	/* A QP destroyed meanwhile leaves the reply to the library. */
	if (a->confirm_reply && cm_own_qp_alive(a))
		confirm_reply(a, &ev);
	else
		cm_event_send(a, &ev);
}

/* An RC/UC answer (REP): confirmed here or by the active side's library. */
static void accept_rc(struct ibvd_cm_id *c, struct ibvd_cm_id *a,
		      const ProtobufCBinaryData *pdata)
{
	cm_reply_received(a, &c->local, pdata->data, pdata->len);
}

/* Take the accept's values; the PSN stays the one the QP was given. */
static void accept_params(struct ibvd_cm_id *c, const struct cm_conn_param *p)
{
	uint32_t psn = c->local.psn;

	c->local = *p;
	c->local.psn = psn;
	c->lqpn = p->qp_num;
}

/*
 * The QP made with the id goes to RTS before the REP leaves, with the
 * request's attributes and the resources this accept grants, as
 * librdmacm did before the accept; a failure leaves the id as it was, with
 * the request still to accept or reject.
 */
static int accept_move_qp(struct ibvd_call *call, struct ibvd_cm_id *id,
			  const struct cm_conn_param *p)
{
	if (p->qp_num != cm_own_qp_num(id))
		return ibvd_call_error(call, -EINVAL,
				       "QP %#x is not the one made with the id",
				       p->qp_num);
	return cm_qp_move(call, id, p);
}

/*
 * A UD request whose requester is gone: SIDR has no cancel, so the answer
 * succeeds and reaches nobody, as a SIDR REP sent into the fabric would.
 */
static bool sidr_orphan(struct ibvd_cm_id *id)
{
	if (!cm_is_ud(id) || id->phase != CM_PH_REQ_RCVD || id->peer ||
	    id->wire)
		return false;
	cm_pending_leave(id);
	id->phase = CM_PH_CLOSED;
	return true;
}

/*
 * The passive side refuses what it has not yet confirmed (a request, or
 * the one it accepted while the RTU has not come): the requester hears
 * REJECTED (RC/UC) or UNREACHABLE (UD) with pdata.
 */
static void refuse_request(struct ibvd_cm_id *id, int32_t reason,
			   const uint8_t *pdata, size_t len)
{
	struct ibvd_cm_id *peer = id->peer;

	cm_pending_leave(id);
	if (!peer) {
		cm_wire_reject(id, (uint16_t)reason, pdata, len);
		id->phase = CM_PH_CLOSED;
		return;
	}
	unlink_peers(id);
	id->phase = CM_PH_CLOSED;
	cm_refuse_active(peer, reason, CM_SIDR_REJECT, pdata, len);
}

/*
 * An accept whose private data the REP (or SIDR REP) cannot carry fails
 * as the kernel's rdma_accept does once it has sent nothing: it rejects
 * the request (consumer defined, no private data), so a second accept
 * finds nothing to accept.  The library's own checks (resources above
 * the device's, the QP's moves) fail before and leave the request open.
 */
static int accept_unsendable(struct ibvd_call *call, struct ibvd_cm_id *id,
			     const Ibvd__CmConnParam *m)
{
	size_t max = cm_is_ud(id) ? CM_PDATA_SIDR_REP : CM_PDATA_REP;

	if (!m || m->private_data.len <= max)
		return 0;
	refuse_request(id, CM_REJ_CONSUMER_DEFINED, NULL, 0);
	return ibvd_call_error(call, -EINVAL,
			       "%zu bytes of private data, at most %zu: request rejected",
			       m->private_data.len, max);
}

int ibvd_req_cm_accept(struct ibvd_call *call)
{
	const Ibvd__CmConnect *req = (const Ibvd__CmConnect *)call->msg;
	struct ibvd_cm_id *id = cm_id_get(call, req->id), *a;
	struct cm_conn_param p;
	int ret;

	if (!id)
		return -EINVAL;
	if (sidr_orphan(id))
		return 0;
	if (id->phase != CM_PH_REQ_RCVD || (!id->peer && !id->wire))
		return ibvd_call_error(call, -EINVAL,
				       "the id has no request to accept");
	ret = accept_unsendable(call, id, req->param);
	if (ret < 0)
		return ret;
	ret = conn_param(call, id, req->param,
			 cm_is_ud(id) ? CM_PDATA_SIDR_REP : CM_PDATA_REP, &p);
	if (ret < 0)
		return ret;
	if (cm_is_ud(id)) {
		p.qkey = p.qkey ? p.qkey : id->qkey;
		id->qkey = p.qkey;
	}
	if (req->move_qp) {
		ret = accept_move_qp(call, id, &p);
		if (ret < 0)
			return ret;
	}
	a = id->peer;
	cm_pending_leave(id);
	accept_params(id, &p);
	id->phase = CM_PH_REP_SENT;
	/* If the reply failed our session is closing: the peer must hear. */
	ret = ibvd_call_reply(call, NULL, NULL, 0);
	if (!a)
		cm_wire_accept(id, req->param->private_data.data,
			       req->param->private_data.len);
	else if (cm_is_ud(id))
		accept_ud(id, a, &p, &req->param->private_data);
	else
		accept_rc(id, a, &req->param->private_data);
	if (id->phase == CM_PH_REP_SENT && id->peer)
		arm_handshake(id);
	return ret;
}

/* ---- reject, establish, disconnect, notify -------------------------- */

int ibvd_req_cm_reject(struct ibvd_call *call)
{
	const Ibvd__CmReject *req = (const Ibvd__CmReject *)call->msg;
	struct ibvd_cm_id *id = cm_id_get(call, req->id);
	int32_t reason = req->reason ? (int32_t)req->reason :
				       CM_REJ_CONSUMER_DEFINED;
	size_t max;
	int ret;

	if (!id)
		return -EINVAL;
	/* The reasons a consumer may give, as the kernel's ucma allows. */
	if (reason != CM_REJ_CONSUMER_DEFINED &&
	    reason != CM_REJ_VENDOR_OPTION_NOT_SUPPORTED)
		return ibvd_call_error(call, -EINVAL, "no REJ reason %u for a consumer",
				       req->reason);
	if (sidr_orphan(id))
		return 0;
	/*
	 * The passive side refuses a request, or the one it accepted while
	 * the RTU has not come (the IB CM's REJ in REP_SENT: the peer hears
	 * REJECTED, not ESTABLISHED); the active side refuses a reply.
	 */
	if ((id->phase != CM_PH_REQ_RCVD && id->phase != CM_PH_REP_RCVD &&
	     id->phase != CM_PH_REP_SENT) ||
	    (!id->peer && !id->wire))
		return ibvd_call_error(call, -EINVAL, "the id has nothing to reject");
	max = cm_is_ud(id) ? CM_PDATA_SIDR_REP : CM_PDATA_REJ;
	if (req->private_data.len > max)
		return ibvd_call_error(call, -EINVAL,
				       "%zu bytes of private data, at most %zu",
				       req->private_data.len, max);
	/* If the reply failed our session is closing: the peer must hear. */
	ret = ibvd_call_reply(call, NULL, NULL, 0);
	if (id->phase == CM_PH_REP_RCVD) {
		cm_pending_leave(id);
		refuse_reply(id, reason, req->private_data.data,
			     req->private_data.len);
		return ret;
	}
	refuse_request(id, reason, req->private_data.data,
		       req->private_data.len);
	return ret;
}

int ibvd_req_cm_establish(struct ibvd_call *call)
{
	const Ibvd__CmEstablish *req = (const Ibvd__CmEstablish *)call->msg;
	struct ibvd_cm_id *id = cm_id_get(call, req->id), *p;
	int ret;

	if (!id)
		return -EINVAL;
	if (id->phase != CM_PH_REP_RCVD || (!id->peer && !id->wire))
		return ibvd_call_error(call, -EINVAL, "the id has no reply to confirm");
	/* The QP made with the id is ready before the RTU goes. */
	if (req->move_qp) {
		ret = cm_qp_move(call, id, NULL);
		if (ret < 0)
			return ret;
	}
	p = confirm(id);
	/* If the reply failed our session is closing: the peer must hear. */
	ret = ibvd_call_reply(call, NULL, NULL, 0);
	if (p)
		cm_event_simple(p, RDMA_CM_EVENT_ESTABLISHED, 0);
	return ret;
}

static bool connected(enum cm_phase phase)
{
	return phase == CM_PH_REP_RCVD || phase == CM_PH_REP_SENT ||
	       phase == CM_PH_ESTABLISHED;
}

int ibvd_req_cm_disconnect(struct ibvd_call *call)
{
	const Ibvd__CmDisconnect *req = (const Ibvd__CmDisconnect *)call->msg;
	struct ibvd_cm_id *id = cm_id_get(call, req->id), *peer;
	int ret;

	if (!id)
		return -EINVAL;
	/*
	 * A listener bound to a device has an IB CM id of its own
	 * (cma_ib_listen), which no DREQ or DREP can move: the kernel's
	 * rdma_disconnect tries both and answers 0.  A wildcard listener
	 * has none: EINVAL, as for an id never connected.
	 */
	if (id->state == CM_LISTEN && id->dev)
		return req->move_qp ? cm_qp_to_err(call, id) : 0;
	if (id->phase == CM_PH_NONE)
		return ibvd_call_error(call, -EINVAL, "the id was never connected");
	if (req->move_qp) {
		ret = cm_qp_to_err(call, id);
		if (ret < 0)
			return ret;
	}
	/* The peer's DREQ came first: this is our DREP, timewait follows. */
	if (id->timewait_owed) {
		id->timewait_owed = false;
		if (id->wire)
			cm_wire_drep(id);
		drep_send(id);
		start_timewait(id);
	}
	/* Before the REP, or after the end, a DREQ has nothing to do. */
	if (!connected(id->phase))
		return 0;
	peer = id->peer;
	unlink_peers(id);
	/* Across hosts our DISCONNECTED waits for the DREP (remote.c). */
	if (!peer && id->wire)
		cm_wire_disconnect(id);
	id->phase = CM_PH_CLOSED;
	/* If the reply failed our session is closing: the peer must hear. */
	ret = ibvd_call_reply(call, NULL, NULL, 0);
	/* Our DREQ: the peer hears it now, we hear its DREP (dreq_wait). */
	if (peer && connected(peer->phase)) {
		cm_peer_disconnected(peer);
		dreq_wait(id, peer);
	} else if (peer || !id->wire) {
		cm_send_disconnected(id, 0);
	}
	return ret;
}

int ibvd_req_cm_notify(struct ibvd_call *call)
{
	const Ibvd__CmNotify *req = (const Ibvd__CmNotify *)call->msg;
	struct ibvd_cm_id *id = cm_id_get(call, req->id);
	int ret;

	if (!id)
		return -EINVAL;
	/*
	 * As the kernel's IB CM answers it (ib_cm_notify): a connection's
	 * id only; traffic before the RTU (IBV_EVENT_COMM_EST) establishes
	 * the passive side, an established id says EISCONN, any other
	 * state EINVAL; a LID change is nothing to do; other events EINVAL.
	 * A listener bound to a device has an IB CM id of its own
	 * (cma_ib_listen), in no state COMM_EST could move; a wildcard
	 * listener has none.
	 */
	if (id->state == CM_LISTEN && id->dev)
		return req->event == IBV_EVENT_LID_CHANGE ? 0 :
		       ibvd_call_error(call, -EINVAL, "a listener takes no event %u",
				       req->event);
	if (id->phase == CM_PH_NONE)
		return ibvd_call_error(call, -EINVAL, "the id has no connection");
	if (req->event == IBV_EVENT_LID_CHANGE)
		return 0;
	if (req->event != IBV_EVENT_COMM_EST)
		return ibvd_call_error(call, -EINVAL, "event %u is not one to notify",
				       req->event);
	if (id->phase == CM_PH_ESTABLISHED)
		return ibvd_call_error(call, -EISCONN, "the id is established");
	if (id->phase != CM_PH_REP_SENT)
		return ibvd_call_error(call, -EINVAL, "the id is not waiting for an RTU");
	id->phase = CM_PH_ESTABLISHED;
	cm_wire_comm_est(id);
	ret = ibvd_call_reply(call, NULL, NULL, 0);
	cm_event_simple(id, RDMA_CM_EVENT_ESTABLISHED, 0);
	return ret;
}
