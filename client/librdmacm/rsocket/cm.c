/*
 * The events of an rsocket's CM channel.  Every rsocket has a channel of
 * its own, non-blocking, so the whole connection is driven from here one
 * event at a time, whoever calls (rconnect, rpoll, a blocked rrecv):
 *   ADDR_RESOLVED -> resolve the route; ROUTE_RESOLVED -> the endpoint and
 *   rdma_connect() with our connection data; ESTABLISHED -> the peer's
 *   data, connected.  A listener queues CONNECT_REQUESTs for raccept().
 *   Failures end the attempt with the errno TCP would give (SO_ERROR).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "rs.h"

static void connect_failed(struct rsocket *rs, int err)
{
	rs->state = RS_CONNECT_ERROR;
	rs->err = err;
}

static void route_resolved(struct rsocket *rs)
{
	struct rdma_conn_param param;
	struct rs_conn_data data;
	int ret;

	ret = rs_create_ep(rs);
	if (ret) {
		connect_failed(rs, -ret);
		return;
	}
	rs_format_conn_data(rs, &data);
	memset(&param, 0, sizeof(param));
	param.private_data = &data;
	param.private_data_len = sizeof(data);
	param.flow_control = 1;
	param.retry_count = 7;
	param.rnr_retry_count = 7;
	if (rdma_connect(rs->id, &param)) {
		connect_failed(rs, errno);
		return;
	}
	rs->state = RS_CONNECTING;
}

/*
 * A peer's SGL shorter than the entry our index into it (rs.h,
 * remote_sge) starts at would have it run on for ever; rdma-core's
 * has RS_SGL_SIZE entries, and so must every peer's.
 */
#define RS_PEER_SGL_MAX		256u

static bool conn_data_ok(const struct rdma_cm_event *ev)
{
	const struct rs_conn_data *d = ev->param.conn.private_data;
	uint32_t sgl_len;

	if (!d || ev->param.conn.private_data_len < sizeof(*d) ||
	    d->version != RS_PROTO_VERSION)
		return false;
	sgl_len = be32toh(d->target_sgl.length);
	return sgl_len >= RS_SGL_SIZE && sgl_len <= RS_PEER_SGL_MAX;
}

static void established(struct rsocket *rs, struct rdma_cm_event *ev)
{
	if (rs->state == RS_ACCEPTING) {
		rs->state = RS_CONNECT_RDWR;
		return;
	}
	if (rs->state != RS_CONNECTING)
		return;
	if (!conn_data_ok(ev)) {
		/* Not an rsocket peer: nothing can be sent to it. */
		rdma_disconnect(rs->id);
		connect_failed(rs, ECONNREFUSED);
		return;
	}
	rs_save_conn_data(rs, ev->param.conn.private_data);
	rs->state = RS_CONNECT_RDWR;
}

static void queue_request(struct rsocket *rs, struct rdma_cm_event *ev)
{
	struct rs_request *req = calloc(1, sizeof(*req));

	if (!req || rs->state != RS_LISTENING) {
		free(req);
		rdma_reject(ev->id, NULL, 0);
		rdma_destroy_id(ev->id);
		return;
	}
	req->id = ev->id;
	req->param = ev->param.conn;
	req->param.private_data = NULL;
	req->param.private_data_len = 0;
	req->data_ok = conn_data_ok(ev);
	if (req->data_ok)
		memcpy(&req->data, ev->param.conn.private_data, sizeof(req->data));
	if (rs->req_tail)
		rs->req_tail->next = req;
	else
		rs->req_head = req;
	rs->req_tail = req;
}

/* The end of a connection, from the CM (the peer's own goodbye is in-band). */
static void disconnected(struct rsocket *rs)
{
	if (rs->state & RS_OPENING) {
		connect_failed(rs, ECONNRESET);
		return;
	}
	if (rs->state & RS_CONNECTED)
		rs->state = RS_DISCONNECTED;
}

/* The address is resolved: the route, or the paths RDMA_ROUTE gave. */
static void resolve_route(struct rsocket *rs)
{
	int ret;

	if (rs->route_opt) {
		ret = rdma_set_option(rs->id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH,
				      rs->route_opt, rs->route_optlen);
		free(rs->route_opt);
		rs->route_opt = NULL;
	} else {
		ret = rdma_resolve_route(rs->id, RS_RESOLVE_MS);
	}
	if (ret)
		connect_failed(rs, errno);
	else
		rs->state = RS_RESOLVING_ROUTE;
}

/*
 * The daemon went under a listener.  An error state would leave it ready
 * for ever (POLLERR), and a server that accepts on every readiness
 * (nginx, lighttpd, a select loop) would spin on its accept's error; it
 * stays listening instead, tells of the loss once (EIO, to raccept or
 * SO_ERROR), then is a port nobody connects to, as rdma-core's listener
 * is after a device removal.  What was waiting cannot be accepted now.
 */
static void orphan(struct rsocket *rs)
{
	if (rs->orphaned)
		return;
	rs->orphaned = true;
	rs->err = EIO;
	rs_free_requests(rs);
}

static void handle(struct rsocket *rs, struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		queue_request(rs, ev);
		break;
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rs->state == RS_RESOLVING_ADDR)
			resolve_route(rs);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (rs->state == RS_RESOLVING_ROUTE)
			route_resolved(rs);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		established(rs, ev);
		break;
	case RDMA_CM_EVENT_REJECTED:
		/* connected already: the peer went before our RTU reached it */
		if (rs->state & RS_CONNECTED)
			disconnected(rs);
		else
			connect_failed(rs, ECONNREFUSED);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		connect_failed(rs, EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		connect_failed(rs, ETIMEDOUT);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		disconnected(rs);
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		if (rs->state == RS_LISTENING) {
			orphan(rs);
			break;
		}
		rs->state = RS_ERROR;
		rs->err = EIO;
		break;
	default:
		break;
	}
}

void rs_cm_progress(struct rsocket *rs)
{
	struct rdma_cm_event *ev;

	while (!rdma_get_cm_event(rs->ch, &ev)) {
		/* A request's id is the listener's until raccept() takes it. */
		struct rdma_cm_event copy = *ev;
		uint8_t pdata[sizeof(struct rs_conn_data)];

		if (ev->param.conn.private_data &&
		    ev->param.conn.private_data_len >= sizeof(pdata)) {
			memcpy(pdata, ev->param.conn.private_data, sizeof(pdata));
			copy.param.conn.private_data = pdata;
		} else {
			copy.param.conn.private_data = NULL;
			copy.param.conn.private_data_len = 0;
		}
		rdma_ack_cm_event(ev);
		handle(rs, &copy);
	}
	/* EAGAIN: no more; EIO: the daemon is gone. */
	if (errno != EAGAIN && errno != EINTR && (rs->state & RS_CONNECTED)) {
		rs->state = RS_ERROR;
		rs->err = errno;
	} else if (errno != EAGAIN && errno != EINTR && rs->state == RS_LISTENING) {
		orphan(rs);
	}
}

void rs_free_requests(struct rsocket *rs)
{
	struct rs_request *req;

	while ((req = rs->req_head)) {
		rs->req_head = req->next;
		rdma_reject(req->id, NULL, 0);
		rdma_destroy_id(req->id);
		free(req);
	}
	rs->req_tail = NULL;
}
