/*
 * Asynchronous events.  The daemon writes one IBVD_MSG_ASYNC_EVENT frame
 * per event on the context's async socket (context.async_fd, which apps
 * poll and may make non-blocking).  When the daemon goes away the socket
 * reads EOF; that becomes one IBV_EVENT_DEVICE_FATAL, as a kernel device
 * reports a fatal error, and the context is dead from then on.
 */
#include "config.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "ibverbsd.pb-c.h"
#include "ibvd_verbs.h"

/* What the element union of an event names. */
enum event_element {
	ELEMENT_NONE,		/* device events, unknown types */
	ELEMENT_PORT,
	ELEMENT_CQ,
	ELEMENT_QP,
	ELEMENT_SRQ,
	ELEMENT_WQ,
};

static enum event_element element_of(enum ibv_event_type type)
{
	switch (type) {
	case IBV_EVENT_CQ_ERR:
		return ELEMENT_CQ;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		return ELEMENT_QP;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		return ELEMENT_SRQ;
	case IBV_EVENT_WQ_FATAL:
		return ELEMENT_WQ;
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		return ELEMENT_PORT;
	default:
		return ELEMENT_NONE;
	}
}

/* Returns true for the first fatal event of ictx, false afterwards. */
static bool claim_fatal(struct ibvc_context *ictx)
{
	bool first;

	pthread_mutex_lock(&ictx->async_lock);
	first = !ictx->fatal_delivered;
	ictx->fatal_delivered = true;
	pthread_mutex_unlock(&ictx->async_lock);
	return first;
}

static bool fatal_was_delivered(struct ibvc_context *ictx)
{
	bool delivered;

	pthread_mutex_lock(&ictx->async_lock);
	delivered = ictx->fatal_delivered;
	pthread_mutex_unlock(&ictx->async_lock);
	return delivered;
}

/* The daemon closed the async socket: it is gone. */
static int daemon_gone(struct ibvc_context *ictx,
		       struct ibv_async_event *event)
{
	if (!claim_fatal(ictx))
		return -EIO;
	ibvc_context_mark_dead(ictx);
	event->event_type = IBV_EVENT_DEVICE_FATAL;
	event->element.port_num = 0;
	return 1;
}

/* Count one more event handed out for an object, for its destroy's wait. */
static void count_delivery(pthread_mutex_t *mutex, uint32_t *delivered)
{
	pthread_mutex_lock(mutex);
	(*delivered)++;
	pthread_mutex_unlock(mutex);
}

/*
 * Name the object an event's handle refers to: 1 if it is one of ours
 * (counted as delivered, so destroying it waits for the ack), 0 if it is
 * gone (destroyed while the event was queued) and the event is dropped.
 * WQs do not exist here.
 */
static int object_event(struct ibvc_context *ictx, enum event_element kind,
			uint32_t handle, struct ibv_async_event *event)
{
	struct ibvc_cq *cq = NULL;
	struct ibvc_qp *qp = NULL;
	struct ibvc_srq *srq = NULL;

	pthread_mutex_lock(&ictx->obj_lock);
	if (kind == ELEMENT_CQ)
		cq = ibvc_obj_lookup_locked(ictx, handle, IBVC_OBJ_CQ);
	else if (kind == ELEMENT_QP)
		qp = ibvc_obj_lookup_locked(ictx, handle, IBVC_OBJ_QP);
	else if (kind == ELEMENT_SRQ)
		srq = ibvc_obj_lookup_locked(ictx, handle, IBVC_OBJ_SRQ);
	if (cq) {
		count_delivery(&cq->cq.mutex, &cq->async_delivered);
		event->element.cq = &cq->cq;
	} else if (qp) {
		count_delivery(&qp->qp.mutex, &qp->async_delivered);
		event->element.qp = &qp->qp;
	} else if (srq) {
		count_delivery(&srq->srq.mutex, &srq->async_delivered);
		event->element.srq = &srq->srq;
	}
	pthread_mutex_unlock(&ictx->obj_lock);
	return cq || qp || srq;
}

/*
 * Turn the daemon's message into an event: 1 if there is one for the app,
 * 0 if the message is to be dropped.
 */
static int event_from_msg(struct ibvc_context *ictx, const Ibvd__AsyncEvent *m,
			  struct ibv_async_event *event)
{
	enum ibv_event_type type = (enum ibv_event_type)m->event_type;

	event->event_type = type;
	switch (element_of(type)) {
	case ELEMENT_PORT:
		event->element.port_num = (int)m->port_num;
		return 1;
	case ELEMENT_NONE:
		if (type != IBV_EVENT_DEVICE_FATAL)
			return 0;	/* an event type we do not know */
		event->element.port_num = 0;
		return claim_fatal(ictx) ? 1 : 0;
	default:
		return object_event(ictx, element_of(type), m->handle, event);
	}
}

/*
 * Read one frame without blocking: 1 with an event, 0 when the frame was
 * consumed but holds nothing for the app, or a negative errno (-EAGAIN when
 * another thread took the frame we were woken for).
 */
static int read_event(struct ibvc_context *ictx, void *buf,
		      struct ibv_async_event *event)
{
	int fd = ictx->vctx.context.async_fd;
	Ibvd__AsyncEvent *m;
	struct ibvd_frame frame;
	int ret;

	ret = ibvd_frame_recv(fd, buf, IBVD_FRAME_MAX, &frame, MSG_DONTWAIT);
	if (ret == 0 || ret == -ECONNRESET)
		return daemon_gone(ictx, event);
	/* A malformed frame was consumed (and its fds closed): skip it. */
	if (ret == -EMSGSIZE || ret == -EBADMSG || ret == -EPROTO)
		return 0;
	if (ret < 0)
		return ret;
	ibvd_frame_close_fds(&frame);
	if (frame.hdr.type != IBVD_MSG_ASYNC_EVENT)
		return 0;
	m = ibvd__async_event__unpack(NULL, frame.hdr.len, frame.payload);
	if (!m)
		return 0;
	ret = event_from_msg(ictx, m, event);
	ibvd__async_event__free_unpacked(m, NULL);
	return ret;
}

/* A wait for an event, for its cancellation's cleanup. */
struct event_wait {
	struct ibvc_context *ictx;
	void *buf;
};

static void wait_cancelled(void *arg)
{
	struct event_wait *w = arg;

	free(w->buf);
	ibvc_context_leave(w->ictx);
}

/*
 * The wait is the one point where ibv_get_async_event can be cancelled,
 * as rdma-core's read() can; cancel_state is the app's, and the rest of
 * the call runs with cancellation off.
 */
static int cancellable_wait(struct event_wait *w, int cancel_state)
{
	int ret;

	pthread_cleanup_push(wait_cancelled, w);
	pthread_setcancelstate(cancel_state, NULL);
	/* the daemon's socket alone: SA_RESTART restarts the wait */
	ret = ibvd_wait_readable(w->ictx->vctx.context.async_fd, true);
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	pthread_cleanup_pop(0);
	return ret;
}

static int get_event(struct ibvc_context *ictx, struct ibv_async_event *event,
		     int cancel_state)
{
	struct event_wait w = { .ictx = ictx };
	int ret;

	/* the parent's events: its socket is shared, and they are its own */
	if (ibvc_forked(ictx) || fatal_was_delivered(ictx))
		return -EIO;
	/* Events are rare; a frame buffer per call keeps threads apart. */
	w.buf = malloc(IBVD_FRAME_MAX);
	if (!w.buf)
		return -ENOMEM;
	for (;;) {
		ret = cancellable_wait(&w, cancel_state);
		if (ret < 0)
			break;	/* EINTR, or EAGAIN when non-blocking */
		/* ibv_close_device woke us: its end, not the daemon's */
		if (ibvc_context_closing(ictx)) {
			ret = -EIO;
			break;
		}
		ret = read_event(ictx, w.buf, event);
		/* 0: nothing for the app; -EAGAIN: another thread took it */
		if (ret != 0 && ret != -EAGAIN)
			break;
	}
	free(w.buf);
	return ret < 0 ? ret : 0;
}

int ibv_get_async_event(struct ibv_context *ctx, struct ibv_async_event *event)
{
	struct ibvc_context *ictx;
	int ret, cancel_state;

	if (!ctx || !event)
		return ibvc_minus_one_ret(-EINVAL);
	ictx = to_ibvc_context(ctx);
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
	if (ibvc_context_enter(ictx)) {
		ret = get_event(ictx, event, cancel_state);
		ibvc_context_leave(ictx);
	} else {
		ret = -EIO;
	}
	pthread_setcancelstate(cancel_state, NULL);
	return ibvc_minus_one_ret(ret);
}

/* Count one acknowledged event and wake a destroy waiting for it. */
static void count_ack(pthread_mutex_t *mutex, pthread_cond_t *cond,
		      uint32_t *completed)
{
	pthread_mutex_lock(mutex);
	(*completed)++;
	pthread_cond_signal(cond);
	pthread_mutex_unlock(mutex);
}

/*
 * Destroying a CQ, QP, SRQ or WQ waits until every event delivered for it
 * was acknowledged (ibv_get_async_event(3)); the counters live in the
 * public structs.  Port and device events need no accounting.
 */
void ibv_ack_async_event(struct ibv_async_event *event)
{
	if (!event)
		return;
	switch (element_of(event->event_type)) {
	case ELEMENT_CQ:
		if (event->element.cq)
			count_ack(&event->element.cq->mutex,
				  &event->element.cq->cond,
				  &event->element.cq->async_events_completed);
		break;
	case ELEMENT_QP:
		if (event->element.qp)
			count_ack(&event->element.qp->mutex,
				  &event->element.qp->cond,
				  &event->element.qp->events_completed);
		break;
	case ELEMENT_SRQ:
		if (event->element.srq)
			count_ack(&event->element.srq->mutex,
				  &event->element.srq->cond,
				  &event->element.srq->events_completed);
		break;
	case ELEMENT_WQ:
		if (event->element.wq)
			count_ack(&event->element.wq->mutex,
				  &event->element.wq->cond,
				  &event->element.wq->events_completed);
		break;
	default:
		break;
	}
}
