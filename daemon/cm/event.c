/*
 * CM events: CmEvent frames on a session's event socket, and the timers
 * that produce events later (address resolution timeouts, time-wait).
 *
 * An event socket is never waited for.  Events come at others' pace too:
 * a peer's process that exits ends all its connections at once, and each
 * end is an event here.  So what finds the socket full waits in a queue
 * of the session's, sent on as the client reads; a client that lets that
 * queue grow past CM_QUEUE_MIN plus CM_QUEUE_PER_ID events per id of its
 * own (what its ids' peers can make it get at once, bounded by its own
 * quota) is not reading its events and loses its CM session, as a client
 * that does not read its replies loses its connection (session.c).
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
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

#define CM_QUEUE_MIN		256
#define CM_QUEUE_PER_ID		4

/* 0 sent, -EAGAIN no room, or why the session is over (-EPIPE: closed). */
static int send_frame(struct ibvd_cm *cm, const uint8_t *frame, size_t len)
{
	ssize_t n;

	do
		n = send(cm->event_fd, frame, len, MSG_DONTWAIT | MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == ECONNRESET ? -EPIPE : -errno;
	return (size_t)n == len ? 0 : -EIO;
}

static void queued_free(struct cm_queued_event *q)
{
	free(q->frame);
	free(q);
}

/* Take q off its session's queue (and its ids' counts); q stays. */
static void queued_unlink(struct ibvd_cm *cm, struct cm_queued_event *q)
{
	TAILQ_REMOVE(&cm->queued, q, link);
	cm->nqueued--;
	q->id->nqueued--;
	if (q->listener)
		q->listener->nqueued--;
}

static void send_failed(struct ibvd_cm *cm, int err)
{
	char why[96];

	/* The client closed its channel (or exited): a plain goodbye. */
	if (err == -EPIPE) {
		cm_session_kill(cm, NULL);
		return;
	}
	if (err == -EAGAIN) {
		ibvd_tenant_slow_reader(cm->session->tenant);
		snprintf(why, sizeof(why),
			 "not reading its CM events (%u waiting)", cm->nqueued);
	} else {
		snprintf(why, sizeof(why), "CM event not sent: %s",
			 strerror(-err));
	}
	cm_session_kill(cm, why);
}

/* Send what waits while there is room; the write event goes when done. */
static void flush_queued(evutil_socket_t fd, short what, void *arg)
{
	struct ibvd_cm *cm = arg;
	struct cm_queued_event *q;
	int ret;

	while ((q = TAILQ_FIRST(&cm->queued))) {
		ret = send_frame(cm, q->frame, q->len);
		if (ret == -EAGAIN)
			return;
		if (ret < 0) {
			send_failed(cm, ret);
			return;
		}
		queued_unlink(cm, q);
		queued_free(q);
	}
	event_del(cm->write_ev);
}

/* Queue a packed frame (taken) of id's behind what waits. */
static void queue_frame(struct ibvd_cm *cm, uint8_t *frame, size_t len,
			struct ibvd_cm_id *id, struct ibvd_cm_id *listener)
{
	unsigned int limit = CM_QUEUE_MIN + CM_QUEUE_PER_ID *
			     ibvd_handle_count(&cm->ids, IBVD_OBJ_CM_ID);
	struct cm_queued_event *q;

	if (cm->nqueued >= limit) {
		free(frame);
		send_failed(cm, -EAGAIN);
		return;
	}
	q = malloc(sizeof(*q));
	if (!q || (!cm->write_ev &&
		   !(cm->write_ev = event_new(cm->session->daemon->base,
					      cm->event_fd, EV_WRITE | EV_PERSIST,
					      flush_queued, cm)))) {
		free(q);
		free(frame);
		send_failed(cm, -ENOMEM);
		return;
	}
	q->len = len;
	q->frame = frame;
	q->id = id;
	q->listener = listener;
	id->nqueued++;
	if (listener)
		listener->nqueued++;
	TAILQ_INSERT_TAIL(&cm->queued, q, link);
	if (!cm->nqueued++)
		event_add(cm->write_ev, NULL);
}

void cm_events_forget(struct ibvd_cm *cm)
{
	struct cm_queued_event *q;

	while ((q = TAILQ_FIRST(&cm->queued))) {
		queued_unlink(cm, q);
		queued_free(q);
	}
	if (cm->write_ev)
		event_free(cm->write_ev);
	cm->write_ev = NULL;
}

/*
 * Send m, an event of id's (a request to listener, or NULL), on id's
 * session: at once, as a rule; packed to wait only behind a full socket.
 */
static void send_or_queue(struct ibvd_cm_id *id, struct ibvd_cm_id *listener,
			  const ProtobufCMessage *m)
{
	struct ibvd_cm *cm = id->cm;
	uint8_t *frame;
	size_t len;
	int ret;

	if (!cm->nqueued) {
		ret = ibvd_frame_send(cm->event_fd, IBVD_MSG_CM_EVENT,
				      ++cm->event_seq, m, NULL, 0, MSG_DONTWAIT);
		if (ret == 0)
			return;
		if (ret != -EAGAIN) {
			send_failed(cm, ret == -ECONNRESET ? -EPIPE : ret);
			return;
		}
	} else {
		++cm->event_seq;
	}
	/* behind what waits already: events keep their order */
	ret = ibvd_frame_pack(IBVD_MSG_CM_EVENT, cm->event_seq, m, &frame, &len);
	if (ret < 0)
		send_failed(cm, ret);
	else
		queue_frame(cm, frame, len, id, listener);
}

void cm_event_send(struct ibvd_cm_id *id, const struct cm_event *ev)
{
	struct ibvd_cm *cm = id->cm;
	Ibvd__CmEvent m = IBVD__CM_EVENT__INIT;
	Ibvd__CmConnParam conn = IBVD__CM_CONN_PARAM__INIT;
	Ibvd__CmIdInfo info;
	struct cm_info_buf ibuf;
	uint8_t pdata[PDATA_MAX];

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
	m.established = ev->established;
	send_or_queue(id, ev->listen_id ?
		      ibvd_handle_lookup(&cm->ids, ev->listen_id, IBVD_OBJ_CM_ID) :
		      NULL, &m.base);
}

/*
 * The first event after mark in cm's queue that is id's, or a request to
 * it; mark then stands just before it, so that the next look starts
 * there.  Nothing in the queue before the mark is id's: events are added
 * at the tail, and a move adds id's to another session's queue.
 */
static struct cm_queued_event *queued_after(struct ibvd_cm *cm,
					    struct cm_queued_event *mark,
					    const struct ibvd_cm_id *id)
{
	struct cm_queued_event *q;

	for (q = TAILQ_NEXT(mark, link); q; q = TAILQ_NEXT(q, link))
		if (q->id == id || q->listener == id) {
			TAILQ_REMOVE(&cm->queued, mark, link);
			TAILQ_INSERT_BEFORE(q, mark, link);
			return q;
		}
	return NULL;
}

/*
 * Take id's events (and requests to it) off cm's queue into *out, in
 * one walk of the queue: whether there were any.
 */
static bool take_queued(struct ibvd_cm *cm, const struct ibvd_cm_id *id,
			struct cm_queue *out)
{
	struct cm_queued_event *q, *next;
	bool any = false;

	for (q = TAILQ_FIRST(&cm->queued); q && id->nqueued; q = next) {
		next = TAILQ_NEXT(q, link);
		if (q->id != id && q->listener != id)
			continue;
		queued_unlink(cm, q);
		TAILQ_INSERT_TAIL(out, q, link);
		any = true;
	}
	return any;
}

/* child is ending: what else of it was taken goes with it. */
static void forget_taken(struct cm_queue *taken, const struct ibvd_cm_id *child)
{
	struct cm_queued_event *q, *next;

	for (q = TAILQ_FIRST(taken); q; q = next) {
		next = TAILQ_NEXT(q, link);
		if (q->id == child) {
			TAILQ_REMOVE(taken, q, link);
			queued_free(q);
		}
	}
}

void cm_events_drop(struct ibvd_cm_id *id)
{
	struct cm_queue gone = TAILQ_HEAD_INITIALIZER(gone);
	struct ibvd_cm *cm = id->cm;
	struct cm_queued_event *q;
	struct ibvd_cm_id *child;

	/* again if ending a request queued another event of id's */
	while (id->nqueued && take_queued(cm, id, &gone))
		while ((q = TAILQ_FIRST(&gone))) {
			TAILQ_REMOVE(&gone, q, link);
			child = q->listener == id ? q->id : NULL;
			queued_free(q);
			if (!child)
				continue;
			/* its client never heard of it: nobody else would end it */
			forget_taken(&gone, child);
			cm_id_destroy(child);
		}
}

/* Send q (taken off its old session) again on its ids' session now. */
static void requeue(struct cm_queued_event *q)
{
	const size_t hdr = sizeof(struct ibvd_frame_hdr);
	struct ibvd_cm_id *listener;
	Ibvd__CmEvent *m;

	m = ibvd__cm_event__unpack(NULL, q->len - hdr, q->frame + hdr);
	if (!m) {
		send_failed(q->id->cm, -ENOMEM);
		return;
	}
	/*
	 * A listener left in another session is no one's to name here, and
	 * a queue entry must not point into another session's ids: nothing
	 * there would forget it when that listener goes.
	 */
	listener = q->listener && q->listener->cm == q->id->cm ?
		   q->listener : NULL;
	m->id = q->id->handle;
	if (q->listener)
		m->listen_id = listener ? listener->handle : 0;
	send_or_queue(q->id, listener, &m->base);
	ibvd__cm_event__free_unpacked(m, NULL);
}

void cm_events_move(struct ibvd_cm *from, struct ibvd_cm_id *id)
{
	/* a place in from's queue that no event matches (no id) */
	struct cm_queued_event mark = { .id = NULL }, *q;
	struct ibvd_cm_id *child;

	TAILQ_INSERT_HEAD(&from->queued, &mark, link);
	while (id->nqueued && (q = queued_after(from, &mark, id))) {
		child = q->listener == id && q->id->cm == from ? q->id : NULL;
		if (child) {
			/* the request moves with its id, which moves this q */
			if (cm_id_move(child, id->cm) < 0)
				cm_id_destroy(child);
			continue;
		}
		queued_unlink(from, q);
		if (!from->nqueued && from->write_ev)
			event_del(from->write_ev);
		requeue(q);
		queued_free(q);
	}
	TAILQ_REMOVE(&from->queued, &mark, link);
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
	case CM_TIMER_DREQ:
		cm_dreq_expired(id);
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

void cm_timer_stop(struct ibvd_cm_id *id)
{
	if (id->timer)
		evtimer_del(id->timer);
	id->timer_kind = CM_TIMER_NONE;
}

void cm_timer_free(struct ibvd_cm_id *id)
{
	if (id->timer)
		event_free(id->timer);
	id->timer = NULL;
	id->timer_kind = CM_TIMER_NONE;
}
