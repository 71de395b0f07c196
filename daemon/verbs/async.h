/*
 * Events to clients: asynchronous events (struct ibv_async_event) sent to
 * contexts over their async socket, completion events on completion
 * channels; the engine raises both through ibvd_verbs_engine_events.  Sending never blocks: a client that does not read its
 * events loses them (with a log line), it never stalls the daemon.
 */
#ifndef IBVD_ASYNC_H
#define IBVD_ASYNC_H

#include <stdint.h>

struct ibvd_context;
struct ibvd_cq;
struct ibvd_device;
struct ibvd_engine_events;

/* Send one AsyncEvent; 0 or a negative errno (-EAGAIN: dropped). */
int ibvd_async_send(struct ibvd_context *ctx, uint32_t event_type,
		    uint32_t port_num, uint32_t handle);

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
