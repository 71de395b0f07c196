/*
 * Events to clients: asynchronous events (struct ibv_async_event) sent to
 * contexts over their async socket, completion events on completion
 * channels; the engine raises both through ibvd_verbs_engine_events.
 * Sending never blocks: async events a socket has no room for wait in a
 * bounded queue until the client reads (async.c); beyond it, and for
 * completion events beyond one owed per CQ (channel.c), a client that
 * does not read loses them (with a log line), it never stalls the daemon.
 */
#ifndef IBVD_ASYNC_H
#define IBVD_ASYNC_H

#include <stdint.h>

struct ibvd_context;
struct ibvd_cq;
struct ibvd_device;
struct ibvd_engine_events;

/*
 * Send one AsyncEvent to every member of ctx, or queue it behind a full
 * socket; any thread.  0 or a negative errno (-EAGAIN: dropped, the
 * queue is full too).
 */
int ibvd_async_send(struct ibvd_context *ctx, uint32_t event_type,
		    uint32_t port_num, uint32_t handle);

/*
 * Control thread: queued events go when their sockets have room, watched
 * on base; before any context is made.  0 or a negative errno.
 */
struct event_base;
int ibvd_async_start(struct event_base *base);
void ibvd_async_stop(void);

/*
 * Control thread, async_lock held: member m leaves its context (its queue
 * goes); and ctx itself goes (its place in the queue of contexts that
 * wait).
 */
struct ibvd_ctx_member;
void ibvd_async_member_forget(struct ibvd_ctx_member *m);
void ibvd_async_context_forget(struct ibvd_context *ctx);

/* Send a device event (e.g. IBV_EVENT_DEVICE_FATAL) to every context. */
void ibvd_async_device_event(struct ibvd_device *dev, uint32_t event_type);

/* Send a port event (e.g. IBV_EVENT_LID_CHANGE) to every context. */
void ibvd_async_port_event(struct ibvd_device *dev, uint32_t port_num,
			   uint32_t event_type);

/* Send the CompEvent of cq's completion channel (channel.c; thread-safe). */
void ibvd_channel_fire(const struct ibvd_cq *cq);

/* How the engine's events reach clients: given to ibvd_engine_start(). */
extern const struct ibvd_engine_events ibvd_verbs_engine_events;

#endif /* IBVD_ASYNC_H */
