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
#include "tenant/tenant.h"

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

int ibvd_async_send(struct ibvd_context *ctx, uint32_t event_type,
		    uint32_t port_num, uint32_t handle)
{
	Ibvd__AsyncEvent ev = IBVD__ASYNC_EVENT__INIT;
	uint32_t seq;
	unsigned int i;
	int ret = 0, err;

	ev.event_type = event_type;
	ev.port_num = port_num;
	ev.handle = handle;
	/*
	 * req_id numbers the events so that a client can spot a gap.  The
	 * control thread and engine threads may send at once: the counter is
	 * atomic, and one sendmsg on a SEQPACKET socket is one message.
	 * Every process sharing the context hears every event, as they would
	 * from one kernel context: an object another member made is unknown
	 * to the others' libraries, which pass such events over.
	 */
	seq = __atomic_add_fetch(&ctx->async_seq, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&ctx->async_lock);
	for (i = 0; i < ctx->nmembers; i++) {
		err = ibvd_frame_send(ctx->members[i].async_fd,
				      IBVD_MSG_ASYNC_EVENT, seq, &ev.base,
				      NULL, 0, MSG_DONTWAIT);
		if (err < 0) {
			event_dropped(ctx, event_type, err);
			ret = err;
		}
	}
	pthread_mutex_unlock(&ctx->async_lock);
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
