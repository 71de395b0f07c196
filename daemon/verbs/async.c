/*
 * Delivery of asynchronous events to device contexts.
 *
 * Each member of a context has its own async socket.  An event goes at
 * once, without blocking; one its socket has no room for (a client that
 * reads later than its events come: 1,000 QPs of an SRQ moved to ERR,
 * each owing LAST_WQE_REACHED, fill a socket) waits in a queue of the
 * member's, as a kernel's event queue would hold it, and goes when the
 * client has read enough: the control thread watches the socket for room.
 * Engine threads raise events too; they queue under the context's
 * async_lock and wake the control thread through an eventfd, since only
 * the control thread may touch the event loop.  The queue is bounded by
 * what the context owns (a few events per object): past it, a client
 * that does not read loses events, with a log line, and never makes the
 * daemon hold more.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "async.h"
#include "context.h"
#include "core/device.h"
#include "engine/engine.h"
#include "frame.h"
#include "ibverbsd.pb-c.h"
#include "log.h"
#include "tenant/tenant.h"

struct ibvd_async_pending {
	struct ibvd_async_pending *next;
	uint32_t seq;
	uint32_t event_type;
	uint32_t port_num;
	uint32_t handle;
};

/* What one member may have waiting: a floor, and so many per object. */
#define ASYNC_PENDING_MIN		64u
#define ASYNC_PENDING_PER_OBJECT	4u

/* Contexts with events waiting for room, and how the control thread hears. */
static struct {
	pthread_mutex_t lock;
	TAILQ_HEAD(, ibvd_context) contexts;
	struct event_base *base;	/* NULL: not started */
	int wake_fd;
	struct event *wake_ev;
} waiting = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.contexts = TAILQ_HEAD_INITIALIZER(waiting.contexts),
	.wake_fd = -1,
};

/*
 * A dropped event is the client's loss, counted for its uid; the line
 * about it spends its uid's log budget.  Any thread: the context's
 * account outlives it.
 */
static void event_dropped(struct ibvd_context *ctx, uint32_t event_type,
			  int err)
{
	struct ibvd_tenant_dev *account = ctx->handles.charge_owner;

	if (!account)
		return;
	ibvd_tenant_dev_event_dropped(account);
	ibvd_tenant_log(account->tenant, IBVD_LOG_NOTICE,
			"context %u on %s: async event %u dropped: %s",
			ctx->id, ctx->dev->name, event_type,
			err == -EAGAIN ? "client is not reading its events" :
			strerror(-err));
}

static int send_one(int fd, const struct ibvd_async_pending *p)
{
	Ibvd__AsyncEvent ev = IBVD__ASYNC_EVENT__INIT;

	ev.event_type = p->event_type;
	ev.port_num = p->port_num;
	ev.handle = p->handle;
	return ibvd_frame_send(fd, IBVD_MSG_ASYNC_EVENT, p->seq, &ev.base,
			       NULL, 0, MSG_DONTWAIT);
}

/* Queue a copy of ev behind what waits for m (async_lock); false: full. */
static bool member_queue(struct ibvd_context *ctx, struct ibvd_ctx_member *m,
			 const struct ibvd_async_pending *ev)
{
	uint32_t limit = ASYNC_PENDING_MIN + ASYNC_PENDING_PER_OBJECT *
			 ibvd_handle_count(&ctx->handles, IBVD_OBJ_ANY);
	struct ibvd_async_pending *p;

	if (m->npending >= limit)
		return false;
	p = malloc(sizeof(*p));
	if (!p)
		return false;
	*p = *ev;
	p->next = NULL;
	if (m->pending_last)
		m->pending_last->next = p;
	else
		m->pending_first = p;
	m->pending_last = p;
	m->npending++;
	return true;
}

static void member_pop(struct ibvd_ctx_member *m)
{
	struct ibvd_async_pending *p = m->pending_first;

	m->pending_first = p->next;
	if (!p->next)
		m->pending_last = NULL;
	m->npending--;
	free(p);
}

/* Send what waits for m while there is room (async_lock): true if all went. */
static bool member_flush(struct ibvd_context *ctx, struct ibvd_ctx_member *m)
{
	int err;

	while (m->pending_first) {
		err = send_one(m->async_fd, m->pending_first);
		if (err == -EAGAIN)
			return false;
		if (err < 0)
			event_dropped(ctx, m->pending_first->event_type, err);
		member_pop(m);
	}
	return true;
}

/* Tell the control thread that ctx has events waiting (any thread). */
static void wait_for_room(struct ibvd_context *ctx)
{
	uint64_t one = 1;

	pthread_mutex_lock(&waiting.lock);
	if (!ctx->async_waiting) {
		TAILQ_INSERT_TAIL(&waiting.contexts, ctx, async_waiting_link);
		ctx->async_waiting = true;
	}
	pthread_mutex_unlock(&waiting.lock);
	if (waiting.wake_fd >= 0 && write(waiting.wake_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is full, the control thread wakes anyway */
	}
}

int ibvd_async_send(struct ibvd_context *ctx, uint32_t event_type,
		    uint32_t port_num, uint32_t handle)
{
	struct ibvd_async_pending ev = {
		.event_type = event_type, .port_num = port_num, .handle = handle,
	};
	bool queued = false;
	unsigned int i;
	int ret = 0, err;

	/*
	 * req_id numbers the events so that a client can spot a gap.  The
	 * control thread and engine threads may send at once: the counter is
	 * atomic, and one sendmsg on a SEQPACKET socket is one message.
	 * Every process sharing the context hears every event, as they would
	 * from one kernel context: an object another member made is unknown
	 * to the others' libraries, which pass such events over.
	 */
	ev.seq = __atomic_add_fetch(&ctx->async_seq, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&ctx->async_lock);
	for (i = 0; i < ctx->nmembers; i++) {
		struct ibvd_ctx_member *m = &ctx->members[i];

		/* behind what waits already: events keep their order */
		err = m->pending_first ? -EAGAIN : send_one(m->async_fd, &ev);
		if (err == -EAGAIN && member_queue(ctx, m, &ev)) {
			queued = true;
			continue;
		}
		if (err < 0) {
			event_dropped(ctx, event_type, err);
			ret = err;
		}
	}
	/*
	 * Under the lock: once the last member left (member_remove takes
	 * it), nobody puts the context on the list, so that it can go.
	 */
	if (queued)
		wait_for_room(ctx);
	pthread_mutex_unlock(&ctx->async_lock);
	return ret;
}

/* Control thread: a member's socket has room; arg is its context. */
static void room_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ibvd_context *ctx = arg;
	unsigned int i;

	(void)what;
	pthread_mutex_lock(&ctx->async_lock);
	for (i = 0; i < ctx->nmembers; i++) {
		struct ibvd_ctx_member *m = &ctx->members[i];

		if (m->async_fd == fd && member_flush(ctx, m))
			event_del(m->write_ev);
	}
	pthread_mutex_unlock(&ctx->async_lock);
}

/* Control thread: send what ctx's members have waiting, or watch for room. */
static void context_flush(struct ibvd_context *ctx)
{
	unsigned int i;

	pthread_mutex_lock(&ctx->async_lock);
	for (i = 0; i < ctx->nmembers; i++) {
		struct ibvd_ctx_member *m = &ctx->members[i];

		if (member_flush(ctx, m))
			continue;
		if (!m->write_ev)
			m->write_ev = event_new(waiting.base, m->async_fd,
						EV_WRITE | EV_PERSIST, room_cb,
						ctx);
		if (m->write_ev)
			event_add(m->write_ev, NULL);
		else
			while (m->pending_first) {
				event_dropped(ctx, m->pending_first->event_type,
					      -ENOMEM);
				member_pop(m);
			}
	}
	pthread_mutex_unlock(&ctx->async_lock);
}

static void wake_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ibvd_context *ctx;
	uint64_t n;

	(void)what;
	(void)arg;
	if (read(fd, &n, sizeof(n)) < 0) {
		/* EAGAIN: another wake took it; the list says what to do */
	}
	for (;;) {
		pthread_mutex_lock(&waiting.lock);
		ctx = TAILQ_FIRST(&waiting.contexts);
		if (ctx) {
			TAILQ_REMOVE(&waiting.contexts, ctx, async_waiting_link);
			ctx->async_waiting = false;
		}
		pthread_mutex_unlock(&waiting.lock);
		if (!ctx)
			return;
		context_flush(ctx);
	}
}

int ibvd_async_start(struct event_base *base)
{
	waiting.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (waiting.wake_fd < 0)
		return -errno;
	waiting.wake_ev = event_new(base, waiting.wake_fd, EV_READ | EV_PERSIST,
				    wake_cb, NULL);
	if (!waiting.wake_ev || event_add(waiting.wake_ev, NULL) < 0) {
		ibvd_async_stop();
		return -ENOMEM;
	}
	waiting.base = base;
	return 0;
}

void ibvd_async_stop(void)
{
	if (waiting.wake_ev)
		event_free(waiting.wake_ev);
	waiting.wake_ev = NULL;
	if (waiting.wake_fd >= 0)
		close(waiting.wake_fd);
	waiting.wake_fd = -1;
	waiting.base = NULL;
}

void ibvd_async_member_forget(struct ibvd_ctx_member *m)
{
	while (m->pending_first)
		member_pop(m);
	if (m->write_ev)
		event_free(m->write_ev);
	m->write_ev = NULL;
}

void ibvd_async_context_forget(struct ibvd_context *ctx)
{
	pthread_mutex_lock(&waiting.lock);
	if (ctx->async_waiting)
		TAILQ_REMOVE(&waiting.contexts, ctx, async_waiting_link);
	ctx->async_waiting = false;
	pthread_mutex_unlock(&waiting.lock);
}

void ibvd_async_device_event(struct ibvd_device *dev, uint32_t event_type)
{
	struct ibvd_context *ctx;

	TAILQ_FOREACH(ctx, &dev->contexts, dev_link)
		ibvd_async_send(ctx, event_type, 0, 0);
}

void ibvd_async_port_event(struct ibvd_device *dev, uint32_t port_num,
			   uint32_t event_type)
{
	struct ibvd_context *ctx;

	TAILQ_FOREACH(ctx, &dev->contexts, dev_link)
		ibvd_async_send(ctx, event_type, port_num, 0);
}

/* The engine's events (engine.h), thread-safe and never blocking. */
static void engine_async(struct ibvd_context *ctx, uint32_t event,
			 uint32_t handle)
{
	ibvd_async_send(ctx, event, 0, handle);
}

const struct ibvd_engine_events ibvd_verbs_engine_events = {
	.async = engine_async,
	.completion = ibvd_channel_fire,
};
