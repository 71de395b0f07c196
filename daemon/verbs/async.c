/*
 * Delivery of asynchronous events to device contexts.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>

#include "async.h"
#include "context.h"
#include "core/device.h"
#include "engine/engine.h"
#include "frame.h"
#include "ibverbsd.pb-c.h"
#include "log.h"

/* Engine threads send events too: the rate limit is shared state. */
static struct ibvd_ratelimit dropped_rl = IBVD_RATELIMIT_INIT(10);
static pthread_mutex_t dropped_lock = PTHREAD_MUTEX_INITIALIZER;

static int may_log_drop(unsigned int *missed)
{
	int ok;

	pthread_mutex_lock(&dropped_lock);
	ok = ibvd_ratelimit_ok(&dropped_rl, missed);
	pthread_mutex_unlock(&dropped_lock);
	return ok;
}

int ibvd_async_send(struct ibvd_context *ctx, uint32_t event_type,
		    uint32_t port_num, uint32_t handle)
{
	Ibvd__AsyncEvent ev = IBVD__ASYNC_EVENT__INIT;
	unsigned int missed;
	int ret;

	ev.event_type = event_type;
	ev.port_num = port_num;
	ev.handle = handle;
	/*
	 * req_id numbers the events so that a client can spot a gap.  The
	 * control thread and engine threads may send at once: the counter is
	 * atomic, and one sendmsg on a SEQPACKET socket is one message.
	 */
	ret = ibvd_frame_send(ctx->async_fd, IBVD_MSG_ASYNC_EVENT,
			      __atomic_add_fetch(&ctx->async_seq, 1, __ATOMIC_RELAXED),
			      &ev.base, NULL, 0, MSG_DONTWAIT);
	if (ret < 0 && may_log_drop(&missed))
		log_notice("context %u on %s: async event %u dropped: %s%s",
			   ctx->id, ctx->dev->name, event_type,
			   ret == -EAGAIN ? "client is not reading its events" :
			   strerror(-ret),
			   missed ? " (more not logged)" : "");
	return ret;
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
