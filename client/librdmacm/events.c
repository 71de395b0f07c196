/*
 * CM events: what the daemon's CmEvent frames (channel.c) mean to the app.
 *
 * rdma_get_cm_event() turns a frame into the struct rdma_cm_event apps
 * read: a CONNECT_REQUEST brings a new rdma_cm_id to life; the internal
 * CONNECT_REPLY (the passive side's answer, CM.md step 5) makes us finish
 * the active side's QP and send the RTU before the app sees ESTABLISHED;
 * private data is zero-padded to the IB message's length.  Each event is
 * counted on its id until acked, which is what rdma_destroy_id() waits for.
 */
#include "config.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cma.h"

/* ---- private data and parameters ------------------------------------------------ */

/*
 * The private data an event shows: what the peer sent, zero-padded to the
 * IB message's length when the event stands for one (pad), else as sent.
 */
static void set_pdata(struct cma_event *ev, const Ibvd__CmConnParam *c,
		      size_t pad, const void **data, uint8_t *len)
{
	size_t n = c ? c->private_data.len : 0;

	if (n > CMA_PDATA_MAX)
		n = CMA_PDATA_MAX;
	if (pad && n > pad)
		n = pad;
	if (n)
		memcpy(ev->private_data, c->private_data.data, n);
	if (pad)
		n = pad;	/* the rest is already zero (calloc) */
	*data = n ? ev->private_data : NULL;
	*len = (uint8_t)(n > 0xff ? 0xff : n);
}

static uint8_t u8(uint32_t v)
{
	return v > 0xff ? 0xff : (uint8_t)v;
}

/*
 * Connection parameters, as the receiver sees them: the daemon already
 * swapped the sender's responder resources and initiator depth, as an
 * IB CM does.
 */
static void fill_conn(struct cma_event *ev, const Ibvd__CmConnParam *c,
		      size_t pad)
{
	struct rdma_conn_param *p = &ev->event.param.conn;

	set_pdata(ev, c, pad, &p->private_data, &p->private_data_len);
	if (!c)
		return;
	p->responder_resources = u8(c->responder_resources);
	p->initiator_depth = u8(c->initiator_depth);
	p->flow_control = u8(c->flow_control);
	p->retry_count = u8(c->retry_count);
	p->rnr_retry_count = u8(c->rnr_retry_count);
	p->srq = c->srq;
	p->qp_num = c->qp_num;
}

static void fill_ud(struct cma_id *cid, struct cma_event *ev,
		    const Ibvd__CmEvent *m, size_t pad)
{
	struct rdma_ud_param *p = &ev->event.param.ud;

	set_pdata(ev, m->conn, pad, &p->private_data, &p->private_data_len);
	if (m->ud) {
		ibvd_ah_attr_from_msg(m->ud->ah_attr, &p->ah_attr);
		p->qp_num = m->ud->qp_num;
		p->qkey = m->ud->qkey;
	} else if (m->conn) {
		p->qp_num = m->conn->qp_num;
		p->qkey = m->conn->qkey;
	}
	/*
	 * Only an event with an address vector (ESTABLISHED, MULTICAST_JOIN)
	 * names a port; a request's and an UNREACHABLE's are all zero, the
	 * port too, as the kernel's.
	 */
	if (m->ud && m->ud->ah_attr && !p->ah_attr.port_num)
		p->ah_attr.port_num = cid->id.port_num;
}

static void mark_established(struct cma_id *cid)
{
	pthread_mutex_lock(&cid->mut);
	cid->established = true;
	pthread_mutex_unlock(&cid->mut);
}

/* ---- one frame ---------------------------------------------------------------------- */

void cma_refuse_request(struct cma_channel *ch, uint32_t handle)
{
	Ibvd__CmReject rej = IBVD__CM_REJECT__INIT;
	Ibvd__CmId req = IBVD__CM_ID__INIT;

	rej.id = handle;
	(void)ibvd_conn_call(&ch->conn, IBVD_MSG_CM_REJECT, &rej.base, NULL,
			     NULL, NULL, NULL);
	req.id = handle;
	(void)ibvd_conn_call(&ch->conn, IBVD_MSG_CM_DESTROY_ID, &req.base, NULL,
			     NULL, NULL, NULL);
}

static int conn_request(struct cma_channel *ch, const Ibvd__CmEvent *m,
			struct cma_event *ev)
{
	const Ibvd__CmConnParam *c = m->conn;
	struct cma_id *listen, *cid;
	uint8_t max_resp, max_init;
	int ret;

	listen = cma_ids_hold(ch, m->listen_id);
	if (!listen) {
		/* The listener is being destroyed: nobody takes the request. */
		cma_refuse_request(ch, m->id);
		return 0;
	}
	ret = cma_id_alloc(ch, listen->id.context, listen->id.ps,
			   listen->id.qp_type, &cid);
	if (ret < 0)
		goto refuse;
	cid->handle = m->id;
	ret = cma_apply_info(cid, m->info);
	/* The request came in on the listener's device. */
	if (ret == 0 && !cid->id.verbs && listen->id.verbs)
		ret = cma_id_set_device(cid, listen->id.verbs,
					listen->id.port_num);
	if (ret == 0 && !cid->id.verbs)
		ret = -ENODEV;
	if (ret == 0)
		ret = cma_device_rd_atom(cid->id.verbs, &max_resp, &max_init);
	if (ret < 0)
		goto free_id;
	if (c) {
		/* What rdma_accept() without parameters answers. */
		cid->responder_resources = u8(c->responder_resources) < max_resp ?
					   u8(c->responder_resources) : max_resp;
		cid->initiator_depth = u8(c->initiator_depth) < max_init ?
				       u8(c->initiator_depth) : max_init;
	}
	cma_ids_add(ch, cid);
	/*
	 * The app reads it now: its listener's backlog may take another
	 * (the kernel frees the slot here too).  Nothing waits for an
	 * answer; if the socket is full, the slot is freed at the answer.
	 */
	(void)ibvd_frame_send(ch->sock, IBVD_MSG_CM_TAKEN, m->id, NULL, NULL,
			      0, MSG_DONTWAIT);
	if (listen->sync) {
		/* A synchronous listener's requests are synchronous too. */
		ret = cma_migrate(cid, NULL, true);
		if (ret < 0) {
			cma_ids_remove(ch, cid);
			goto free_id;
		}
	}
	ev->owner = listen;
	ev->event.id = &cid->id;
	ev->event.listen_id = &listen->id;
	ev->event.event = RDMA_CM_EVENT_CONNECT_REQUEST;
	ev->event.status = m->status;
	if (cma_is_ud(cid))
		fill_ud(cid, ev, m, cma_req_pdata(cid));
	else
		fill_conn(ev, c, cma_req_pdata(cid));
	return 1;
free_id:
	cma_id_free(cid);
refuse:
	cma_refuse_request(ch, m->id);
	cma_id_release(listen);
	return ret;
}

/*
 * The passive side accepted (CM.md step 5).  An id with a QP gets it to
 * RTS and sends the RTU, then the app sees ESTABLISHED; without a QP the
 * app sees CONNECT_RESPONSE and finishes with rdma_establish().  For a QP
 * made with the id the daemon has done both already (m->established), or
 * failed to and ended the connection (m->status).
 */
static int confirmed_reply(struct cma_id *cid, const Ibvd__CmEvent *m,
			   int info_ret, struct cma_event *ev)
{
	Ibvd__CmDisconnect end = IBVD__CM_DISCONNECT__INIT;
	int status = m->status;

	/*
	 * The connection stands in the daemon (the RTU went): one this side
	 * cannot take up ends as rdma_disconnect() would end it.
	 */
	if (status == 0 && info_ret < 0) {
		end.id = cid->handle;
		end.move_qp = cid->id.qp && cid->qp_bundled;
		(void)cma_call(cid, IBVD_MSG_CM_DISCONNECT, &end.base, NULL, NULL);
		status = info_ret;
	}
	if (status < 0) {
		if (cid->id.qp)
			cma_qp_at_err(cid);
		ev->event.event = RDMA_CM_EVENT_CONNECT_ERROR;
		ev->event.status = status;
		return 1;
	}
	/* The app's QP (destroyed, or moved by it meanwhile) keeps its state. */
	if (cid->id.qp)
		cma_qp_reached_rts(cid);
	ev->event.event = RDMA_CM_EVENT_ESTABLISHED;
	mark_established(cid);
	return 1;
}

static int connect_reply(struct cma_channel *ch, const Ibvd__CmEvent *m,
			 struct cma_event *ev)
{
	Ibvd__CmReject rej = IBVD__CM_REJECT__INIT;
	Ibvd__CmEstablish req = IBVD__CM_ESTABLISH__INIT;
	struct cma_id *cid;
	int ret;

	cid = cma_ids_hold(ch, m->id);
	if (!cid)
		return 0;
	ev->owner = cid;
	ev->event.id = &cid->id;
	fill_conn(ev, m->conn, CMA_PDATA_REP);
	ret = cma_apply_info(cid, m->info);
	if (m->established || m->status < 0)
		return confirmed_reply(cid, m, ret, ev);
	if (!cid->id.qp) {
		ev->event.event = RDMA_CM_EVENT_CONNECT_RESPONSE;
		return 1;
	}
	/* The daemon moves a QP made with the id inside CM_ESTABLISH. */
	req.move_qp = cid->qp_bundled;
	if (ret == 0 && !req.move_qp)
		ret = cma_qp_to(cid, IBV_QPS_RTR, RDMA_MAX_RESP_RES);
	if (ret == 0 && !req.move_qp)
		ret = cma_qp_to(cid, IBV_QPS_RTS, RDMA_MAX_INIT_DEPTH);
	if (ret == 0) {
		req.id = cid->handle;
		ret = cma_call(cid, IBVD_MSG_CM_ESTABLISH, &req.base, NULL,
			       NULL);
	}
	if (ret == 0 && req.move_qp)
		cma_qp_at_rts(cid);
	if (ret < 0) {
		/* As a REJ would: the passive side hears of it too. */
		cma_qp_to_err(cid);
		rej.id = cid->handle;
		(void)cma_call(cid, IBVD_MSG_CM_REJECT, &rej.base, NULL, NULL);
		ev->event.event = RDMA_CM_EVENT_CONNECT_ERROR;
		ev->event.status = ret;
		return 1;
	}
	ev->event.event = RDMA_CM_EVENT_ESTABLISHED;
	mark_established(cid);
	return 1;
}

static int mcast_event(struct cma_id *cid, const Ibvd__CmEvent *m,
		       struct cma_event *ev)
{
	struct rdma_ud_param *p = &ev->event.param.ud;
	struct cma_mcast *mc;
	int ret = 1, err;

	pthread_mutex_lock(&cid->op_lock);
	mc = cma_mcast_find(cid, m->mcast_user);
	if (!mc) {
		/* Left before its event came. */
		ret = 0;
		goto out;
	}
	fill_ud(cid, ev, m, 0);
	/* rdma_join_multicast(3): the join's context comes back here. */
	p->private_data = mc->context;
	p->private_data_len = 0;
	if (ev->event.event != RDMA_CM_EVENT_MULTICAST_JOIN)
		goto out;
	err = cma_mcast_attach(cid, mc, &p->ah_attr);
	if (err < 0) {
		ev->event.event = RDMA_CM_EVENT_MULTICAST_ERROR;
		ev->event.status = err;
	}
out:
	pthread_mutex_unlock(&cid->op_lock);
	return ret;
}

static int plain_event(struct cma_channel *ch, const Ibvd__CmEvent *m,
		       struct cma_event *ev)
{
	struct rdma_cm_event *e = &ev->event;
	bool ud;
	struct cma_id *cid;
	int ret;

	if (m->event > RDMA_CM_EVENT_TIMEWAIT_EXIT)
		return 0;	/* not one we know: nothing to show */
	cid = cma_ids_hold(ch, m->id);
	if (!cid)
		return 0;	/* destroyed or migrated meanwhile */
	ev->owner = cid;
	e->id = &cid->id;
	e->event = (enum rdma_cm_event_type)m->event;
	e->status = m->status;
	ud = cma_is_ud(cid);
	ret = cma_apply_info(cid, m->info);

	switch (e->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		/* The app goes on to use id->verbs: it must be there. */
		if (ret == 0 && !cid->id.verbs)
			ret = cma_query(cid);
		if (ret == 0 && !cid->id.verbs)
			ret = -ENODEV;
		if (ret < 0) {
			e->event = RDMA_CM_EVENT_ADDR_ERROR;
			e->status = ret;
		}
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (ret == 0 && !cid->id.route.path_rec)
			ret = cma_query(cid);
		if (ret < 0) {
			e->event = RDMA_CM_EVENT_ROUTE_ERROR;
			e->status = ret;
		}
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		mark_established(cid);
		/* UD: the SIDR reply; RC: the RTU, which carries nothing. */
		if (ud)
			fill_ud(cid, ev, m, CMA_PDATA_SIDR_REP);
		else
			fill_conn(ev, m->conn, 0);
		break;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		fill_conn(ev, m->conn, CMA_PDATA_REP);
		break;
	case RDMA_CM_EVENT_REJECTED:
		/* as the kernel's rdma_cm: nothing may go out on the QP now */
		(void)cma_qp_to_err(cid);
		fill_conn(ev, m->conn, CMA_PDATA_REJ);
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
		if (ud)
			fill_ud(cid, ev, m, m->conn ? CMA_PDATA_SIDR_REP : 0);
		else
			fill_conn(ev, m->conn, 0);
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		fill_conn(ev, m->conn, 0);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		pthread_mutex_lock(&cid->mut);
		cid->disconnected = true;
		pthread_mutex_unlock(&cid->mut);
		fill_conn(ev, m->conn, 0);
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		/* A reload removed the device: once is enough (removal_event). */
		pthread_mutex_lock(&cid->mut);
		cid->removal_reported = true;
		pthread_mutex_unlock(&cid->mut);
		break;
	case RDMA_CM_EVENT_MULTICAST_JOIN:
	case RDMA_CM_EVENT_MULTICAST_ERROR:
		ret = mcast_event(cid, m, ev);
		if (ret == 0)
			cma_id_release(cid);
		return ret;
	default:
		break;
	}
	return 1;
}

static int process(struct cma_channel *ch, const Ibvd__CmEvent *m,
		   struct cma_event **ret_ev)
{
	struct cma_event *ev;
	int ret;

	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return -ENOMEM;
	switch (m->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		ret = conn_request(ch, m, ev);
		break;
	case IBVD_CM_EVENT_CONNECT_REPLY:
		ret = connect_reply(ch, m, ev);
		break;
	default:
		ret = plain_event(ch, m, ev);
		break;
	}
	if (ret <= 0) {
		free(ev);
		return ret;
	}
	*ret_ev = ev;
	return 1;
}

/* ---- getting events ------------------------------------------------------------- */

/*
 * The daemon is gone: every id of the channel hears DEVICE_REMOVAL once
 * (rdma_get_cm_event(3): destroy the id), then the channel has no more
 * events to give (ENODEV).
 */
static bool claim_removal(struct cma_id *cid)
{
	bool claimed = false;

	pthread_mutex_lock(&cid->mut);
	if (!cid->removal_reported) {
		cid->removal_reported = true;
		cid->events_delivered++;
		claimed = true;
	}
	pthread_mutex_unlock(&cid->mut);
	return claimed;
}

static int removal_event(struct cma_channel *ch, struct cma_event **ret_ev)
{
	struct cma_id *cid = NULL, *c;
	struct cma_event *ev;
	unsigned int b;

	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return -ENOMEM;
	pthread_mutex_lock(&ch->ids_lock);
	for (b = 0; b < CMA_ID_BUCKETS && !cid; b++)
		for (c = ch->ids[b]; c && !cid; c = c->hnext)
			if (claim_removal(c))
				cid = c;
	pthread_mutex_unlock(&ch->ids_lock);
	if (!cid) {
		free(ev);
		return -ENODEV;
	}
	ev->owner = cid;
	ev->event.id = &cid->id;
	ev->event.event = RDMA_CM_EVENT_DEVICE_REMOVAL;
	*ret_ev = ev;
	return 0;
}

static int get_event(struct cma_channel *ch, struct cma_event **ret_ev)
{
	Ibvd__CmEvent *m = NULL;
	int ret;

	/* a forked child's copy: the events on its socket are the parent's */
	if (ch->conn.owner != getpid())
		return -EIO;
	for (;;) {
		if (cma_channel_dead(ch))
			return removal_event(ch, ret_ev);
		ret = cma_channel_next(ch, &m);
		if (ret == -EIO)
			continue;	/* the daemon is gone: see above */
		if (ret < 0)
			return ret;
		ret = process(ch, m, ret_ev);
		cma_channel_done(ch);
		ibvd__cm_event__free_unpacked(m, NULL);
		if (ret != 0)
			return ret < 0 ? ret : 0;
	}
}

/*
 * The channel was destroyed while this thread waited on it.  A thread
 * blocked in read() on the kernel's rdma_cm file when another one closes
 * it stays blocked: the file lives until the read returns, and no event
 * comes any more.  Programs count on that without knowing it: rping
 * destroys the channel its event thread waits on, and that thread exits
 * the process with -1 on any error, racing main's return 0.  So this
 * thread waits on too, in a cancellation point, as the read would.
 */
static _Noreturn void wait_forever(void)
{
	for (;;)
		cma_blocked_wait(-1);
}

/* Cancelled while blocked: this thread waits no more. */
static void left_by_cancel(void *ch)
{
	cma_channel_leave(ch);
}

int cma_get_event(struct cma_channel *ch, struct cma_event **ret_ev)
{
	int ret;

	bool blocking;

	cma_cancel_hold();
	ret = cma_channel_enter(ch);
	if (ret == 0) {
		/* Read while we hold it: once left, ch may be gone. */
		blocking = !(cma_channel_flags(ch) & O_NONBLOCK);
		pthread_cleanup_push(left_by_cancel, ch);
		ret = get_event(ch, ret_ev);
		pthread_cleanup_pop(0);
		if (cma_channel_leave(ch)) {
			/* Destroyed under us: what we got has nowhere to go. */
			if (ret == 0)
				cma_ack_event(*ret_ev);
			/* A non-blocking read returns; a blocking one would not. */
			if (blocking)
				wait_forever();
			ret = -EBADF;
		}
	}
	cma_cancel_release();
	return ret;
}

int rdma_get_cm_event(struct rdma_event_channel *channel,
		      struct rdma_cm_event **event)
{
	struct cma_event *ev;
	int ret;

	if (!channel || !event)
		return cma_ret(-EINVAL);
	ret = cma_get_event(to_cma_channel(channel), &ev);
	if (ret < 0)
		return cma_ret(ret);
	*event = &ev->event;
	return 0;
}

int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	if (!event)
		return cma_ret(-EINVAL);
	cma_ack_event((struct cma_event *)event);
	return 0;
}

/* ---- synchronous mode ----------------------------------------------------------------- */

/* What a failed event means to the call that waited for it. */
static int event_errno(const struct rdma_cm_event *e)
{
	switch (e->event) {
	case RDMA_CM_EVENT_REJECTED:
		return -ECONNREFUSED;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return -ENODEV;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_MULTICAST_ERROR:
		if (e->status)
			return e->status < 0 ? e->status : -e->status;
		return -EIO;
	default:
		if (e->status)
			return e->status < 0 ? e->status : -e->status;
		return 0;
	}
}

int cma_sync_wait(struct cma_id *cid)
{
	struct cma_event *ev;
	int ret;

	if (!cid->sync)
		return 0;
	do {
		cma_put_event(cid);
		ret = cma_get_event(cid->ch, &ev);
		if (ret < 0)
			return ret;
		cid->id.event = &ev->event;
		/* What a finished connection left behind answers no call. */
	} while (ev->event.event == RDMA_CM_EVENT_TIMEWAIT_EXIT);
	return event_errno(&ev->event);
}

/* ---- names --------------------------------------------------------------------------- */

/* The names programs print (rping, ucmatose, perftest, qperf). */
const char *rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const names[] = {
		[RDMA_CM_EVENT_ADDR_RESOLVED] = "RDMA_CM_EVENT_ADDR_RESOLVED",
		[RDMA_CM_EVENT_ADDR_ERROR] = "RDMA_CM_EVENT_ADDR_ERROR",
		[RDMA_CM_EVENT_ROUTE_RESOLVED] = "RDMA_CM_EVENT_ROUTE_RESOLVED",
		[RDMA_CM_EVENT_ROUTE_ERROR] = "RDMA_CM_EVENT_ROUTE_ERROR",
		[RDMA_CM_EVENT_CONNECT_REQUEST] = "RDMA_CM_EVENT_CONNECT_REQUEST",
		[RDMA_CM_EVENT_CONNECT_RESPONSE] = "RDMA_CM_EVENT_CONNECT_RESPONSE",
		[RDMA_CM_EVENT_CONNECT_ERROR] = "RDMA_CM_EVENT_CONNECT_ERROR",
		[RDMA_CM_EVENT_UNREACHABLE] = "RDMA_CM_EVENT_UNREACHABLE",
		[RDMA_CM_EVENT_REJECTED] = "RDMA_CM_EVENT_REJECTED",
		[RDMA_CM_EVENT_ESTABLISHED] = "RDMA_CM_EVENT_ESTABLISHED",
		[RDMA_CM_EVENT_DISCONNECTED] = "RDMA_CM_EVENT_DISCONNECTED",
		[RDMA_CM_EVENT_DEVICE_REMOVAL] = "RDMA_CM_EVENT_DEVICE_REMOVAL",
		[RDMA_CM_EVENT_MULTICAST_JOIN] = "RDMA_CM_EVENT_MULTICAST_JOIN",
		[RDMA_CM_EVENT_MULTICAST_ERROR] = "RDMA_CM_EVENT_MULTICAST_ERROR",
		[RDMA_CM_EVENT_ADDR_CHANGE] = "RDMA_CM_EVENT_ADDR_CHANGE",
		[RDMA_CM_EVENT_TIMEWAIT_EXIT] = "RDMA_CM_EVENT_TIMEWAIT_EXIT",
	};

	if ((unsigned int)event >= ARRAY_SIZE(names))
		return "UNKNOWN EVENT";
	return names[event];
}
