/*
 * Delivery of asynchronous events to device contexts.
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "async.h"
#include "context.h"
#include "device.h"
#include "frame.h"
#include "ibverbsd.pb-c.h"
#include "log.h"

static struct ibvd_ratelimit dropped_rl = IBVD_RATELIMIT_INIT(10);

int ibvd_async_send(struct ibvd_context *ctx, uint32_t event_type,
		    uint32_t port_num, uint32_t handle)
{
	Ibvd__AsyncEvent ev = IBVD__ASYNC_EVENT__INIT;
	unsigned int missed;
	int ret;

	ev.event_type = event_type;
	ev.port_num = port_num;
	ev.handle = handle;
	/* req_id numbers the events so that a client can spot a gap. */
	ret = ibvd_frame_send(ctx->async_fd, IBVD_MSG_ASYNC_EVENT,
			      ++ctx->async_seq, &ev.base, NULL, 0, MSG_DONTWAIT);
	if (ret < 0 && ibvd_ratelimit_ok(&dropped_rl, &missed))
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
