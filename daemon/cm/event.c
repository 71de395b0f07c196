/*
 * CM events: CmEvent frames on a session's event socket, and the timers
 * that produce events later (address resolution timeouts, time-wait).
 *
 * An event socket is never waited for: a client that lets it fill up is
 * not reading its events and loses its CM session, as a client that does
 * not read its replies loses its connection (session.c).
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "frame.h"
#include "internal.h"
#include "log.h"
#include "server/session.h"

void cm_session_kill(struct ibvd_cm *cm, const char *why)
{
	const struct ibvd_session *s = cm->session;
	struct timeval now = { 0, 0 };

	if (cm->dead)
		return;
	cm->dead = true;
	if (why)
		ibvd_tenant_log(s->tenant, IBVD_LOG_NOTICE,
				"client %llu (pid %d uid %u %s): %s; disconnecting",
				(unsigned long long)s->id, (int)s->cred.pid,
				(unsigned int)s->cred.uid, s->comm, why);
	else
		log_debug("client %llu: closed its event channel",
			  (unsigned long long)s->id);
	/*
	 * Closing now would destroy its ids (and tell their peers) in the
	 * middle of whatever request is sending this event; the loop closes
	 * it as soon as that request is done.
	 */
	evtimer_add(cm->close_ev, &now);
}

/* The largest private data of any CM message (CM_PDATA_DREQ). */
#define PDATA_MAX	256

static void fill_conn(const struct cm_event *ev, Ibvd__CmConnParam *m,
		      uint8_t pdata[PDATA_MAX])
{
	const struct cm_conn_param *c = ev->conn;
	size_t full = ev->pdata_full < PDATA_MAX ? ev->pdata_full : PDATA_MAX;
	size_t len = ev->pdata_len < full ? ev->pdata_len : full;

	if (c) {
		m->responder_resources = c->responder_resources;
		m->initiator_depth = c->initiator_depth;
		m->flow_control = c->flow_control;
		m->retry_count = c->retry_count;
		m->rnr_retry_count = c->rnr_retry_count;
		m->srq = c->srq;
		m->qp_num = c->qp_num;
		m->qkey = c->qkey;
		m->psn = c->psn;
	}
	/* The receiver sees the whole IB field, zero beyond what was sent. */
	memset(pdata, 0, full);
	if (len)
		memcpy(pdata, ev->pdata, len);
	m->private_data.data = pdata;
	m->private_data.len = full;
}

void cm_event_send(struct ibvd_cm_id *id, const struct cm_event *ev)
{
	struct ibvd_cm *cm = id->cm;
	Ibvd__CmEvent m = IBVD__CM_EVENT__INIT;
	Ibvd__CmConnParam conn = IBVD__CM_CONN_PARAM__INIT;
	Ibvd__CmIdInfo info;
	struct cm_info_buf ibuf;
	uint8_t pdata[PDATA_MAX];
	char why[96];
	int ret;

	if (cm->dead || cm->session->closing)
		return;
	m.event = ev->event;
	m.status = ev->status;
	m.id = id->handle;
	m.listen_id = ev->listen_id;
	m.user = ev->user ? ev->user : id->user;
	if (ev->conn || ev->pdata_full) {
		fill_conn(ev, &conn, pdata);
		m.conn = &conn;
	}
	m.ud = (Ibvd__CmUdParam *)ev->ud;
	cm_fill_info(id, &info, &ibuf);
	m.info = &info;
	m.mcast_user = ev->mcast_user;
	ret = ibvd_frame_send(cm->event_fd, IBVD_MSG_CM_EVENT, ++cm->event_seq,
			      &m.base, NULL, 0, MSG_DONTWAIT);
	if (ret == 0)
		return;
	/* The client closed its channel (or exited): a plain goodbye. */
	if (ret == -EPIPE || ret == -ECONNRESET) {
		cm_session_kill(cm, NULL);
		return;
	}
	if (ret == -EAGAIN) {
		ibvd_tenant_slow_reader(cm->session->tenant);
		snprintf(why, sizeof(why),
			 "not reading its CM events (event socket full)");
	} else
		snprintf(why, sizeof(why), "CM event not sent: %s", strerror(-ret));
	cm_session_kill(cm, why);
}

void cm_event_simple(struct ibvd_cm_id *id, uint32_t event, int32_t status)
{
	struct cm_event ev = { .event = event, .status = status };

	cm_event_send(id, &ev);
}

/* ---- timers --------------------------------------------------------- */

static void cm_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ibvd_cm_id *id = arg;
	enum cm_timer_kind kind = id->timer_kind;

	id->timer_kind = CM_TIMER_NONE;
	switch (kind) {
	case CM_TIMER_ADDR:
		cm_addr_timeout(id);
		break;
	case CM_TIMER_TIMEWAIT:
		cm_event_simple(id, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0);
		break;
	case CM_TIMER_HANDSHAKE:
		cm_handshake_expired(id);
		break;
	case CM_TIMER_NONE:
		break;
	}
}

int cm_timer_arm(struct ibvd_cm_id *id, enum cm_timer_kind kind, uint32_t ms)
{
	struct timeval tv = {
		.tv_sec = ms / 1000,
		.tv_usec = (ms % 1000) * 1000,
	};

	if (!id->timer) {
		id->timer = evtimer_new(id->cm->session->daemon->base,
					cm_timer_cb, id);
		if (!id->timer)
			return -ENOMEM;
	}
	id->timer_kind = kind;
	return evtimer_add(id->timer, &tv) < 0 ? -ENOMEM : 0;
}

void cm_timer_free(struct ibvd_cm_id *id)
{
	if (id->timer)
		event_free(id->timer);
	id->timer = NULL;
	id->timer_kind = CM_TIMER_NONE;
}
