/*
 * The RDMA connection manager: event channels, ids, address and route
 * resolution, connection establishment, multicast, and CM events.  Not
 * implemented yet except rdma_event_str(): every call fails with ENOSYS
 * (see unsupported.h) without touching its arguments.
 */
#include "config.h"

#include <rdma/rdma_cma.h>

#include "unsupported.h"
#include "util.h"

/* Event channels and CM events */

struct rdma_event_channel *rdma_create_event_channel(void)
{
	return unsupported_ptr();
}

void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
}

int rdma_get_cm_event(struct rdma_event_channel *channel,
		      struct rdma_cm_event **event)
{
	return unsupported();
}

int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	return unsupported();
}

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

/* Ids */

int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
		   void *context, enum rdma_port_space ps)
{
	return unsupported();
}

int rdma_destroy_id(struct rdma_cm_id *id)
{
	return unsupported();
}

int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	return unsupported();
}

int rdma_set_option(struct rdma_cm_id *id, int level, int optname,
		    void *optval, size_t optlen)
{
	return unsupported();
}

/* Ports cannot report failure: 0 is "no port". */
__be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return 0;
}

__be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return 0;
}

/* Addresses and routes */

int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	return unsupported();
}

int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
		      struct sockaddr *dst_addr, int timeout_ms)
{
	return unsupported();
}

int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	return unsupported();
}

/* Connections */

int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	return unsupported();
}

int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	return unsupported();
}

int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	return unsupported();
}

int rdma_reject(struct rdma_cm_id *id, const void *private_data,
		uint8_t private_data_len)
{
	return unsupported();
}

int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
		    uint8_t private_data_len)
{
	return unsupported();
}

int rdma_establish(struct rdma_cm_id *id)
{
	return unsupported();
}

int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr,
		      int *qp_attr_mask)
{
	return unsupported();
}

int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	return unsupported();
}

int rdma_disconnect(struct rdma_cm_id *id)
{
	return unsupported();
}

int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	return unsupported();
}

int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	return unsupported();
}

/* Multicast */

int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr,
			void *context)
{
	return unsupported();
}

int rdma_join_multicast_ex(struct rdma_cm_id *id,
			   struct rdma_cm_join_mc_attr_ex *mc_join_attr,
			   void *context)
{
	return unsupported();
}

int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	return unsupported();
}
