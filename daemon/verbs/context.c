/*
 * OPEN_DEVICE and the lifetime of device contexts: what a context may
 * hold (its device's limits), and its teardown, children before parents.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "context.h"
#include "core/device.h"
#include "engine/engine.h"
#include "log.h"
#include "query.h"
#include "server/call.h"
#include "server/session.h"
#include "verbs.h"

/* ---- what every handler asks of its context ---------------------------- */

struct ibvd_context *ibvd_call_ctx(const struct ibvd_call *call)
{
	return call->session->ctx;
}

void ibvd_ctx_limits(const struct ibvd_context *ctx, struct ibvd_limits *lim)
{
	const struct ibvd_port *port = ibvd_device_port(ctx->dev, 1);
	Ibvd__DeviceAttr da;
	Ibvd__PortAttr pa;

	/* One source of truth: what QUERY_DEVICE/QUERY_PORT report. */
	ibvd_device_attr(ctx->dev, &da);
	lim->max_mr_size = da.max_mr_size;
	lim->max_qp_wr = (uint32_t)da.max_qp_wr;
	lim->max_sge = (uint32_t)da.max_sge;
	lim->max_cqe = (uint32_t)da.max_cqe;
	lim->max_srq_wr = (uint32_t)da.max_srq_wr;
	lim->max_srq_sge = (uint32_t)da.max_srq_sge;
	lim->max_qp_rd_atom = (uint32_t)da.max_qp_rd_atom;
	lim->max_qp_init_rd_atom = (uint32_t)da.max_qp_init_rd_atom;
	lim->max_mcast_grp = (uint32_t)da.max_mcast_grp;
	lim->max_mcast_qp_attach = (uint32_t)da.max_mcast_qp_attach;
	/* Every port of a device has the same attributes. */
	ibvd_port_attr(ctx->dev, port, &pa);
	lim->max_mtu = pa.max_mtu;
	lim->pkey_tbl_len = pa.pkey_tbl_len;
	lim->gid_tbl_len = (uint32_t)pa.gid_tbl_len;
}

/* The most objects of a kind one context may hold. */
static uint32_t kind_max(const struct ibvd_context *ctx, enum ibvd_obj_kind kind)
{
	Ibvd__DeviceAttr da;

	ibvd_device_attr(ctx->dev, &da);
	switch (kind) {
	case IBVD_OBJ_PD:		return (uint32_t)da.max_pd;
	case IBVD_OBJ_MR:		return (uint32_t)da.max_mr;
	case IBVD_OBJ_MW:		return (uint32_t)da.max_mw;
	case IBVD_OBJ_CQ:		return (uint32_t)da.max_cq;
	case IBVD_OBJ_QP:		return (uint32_t)da.max_qp;
	case IBVD_OBJ_SRQ:		return (uint32_t)da.max_srq;
	case IBVD_OBJ_AH:		return (uint32_t)da.max_ah;
	case IBVD_OBJ_XRCD:		return (uint32_t)da.max_pd;
	case IBVD_OBJ_COMP_CHANNEL:	return IBVD_CTX_MAX_CHANNELS;
	default:			return 0;
	}
}

int ibvd_obj_add(struct ibvd_context *ctx, enum ibvd_obj_kind kind,
		 void *obj, uint32_t *ret_handle)
{
	if (ibvd_handle_count(&ctx->handles, kind) >= kind_max(ctx, kind))
		return -ENOMEM;
	return ibvd_handle_alloc(&ctx->handles, kind, obj, ret_handle);
}

/*
 * The async socket: a SEQPACKET pair, one AsyncEvent per message.  The
 * client end goes out with the reply; ours is write-only, so a client
 * that writes to its end gets EPIPE instead of filling our buffer.
 */
static int async_pair(int *ours, int *theirs)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	if (shutdown(sv[0], SHUT_RD) < 0) {
		int ret = -errno;

		close(sv[0]);
		close(sv[1]);
		return ret;
	}
	*ours = sv[0];
	*theirs = sv[1];
	return 0;
}

/* OPEN_DEVICE's reply fds, in this order (PROTOCOL.md). */
enum {
	OPEN_FD_ASYNC,			/* client end of the async socket */
	OPEN_FD_CTX_PAGE,		/* context page memfd (ring.h) */
	OPEN_FD_KICK,			/* eventfd that wakes the engine: ours */
	OPEN_FD_RINGS,			/* ring arena memfd (ring.h) */
	OPEN_NFDS,
};

/*
 * A new context with its async socket, its ring arena and its engine part
 * (context page, kick eventfd, serving thread); fds[] gets the reply's
 * descriptors.
 */
static int context_new(struct ibvd_session *s, struct ibvd_device *dev,
		       struct ibvd_tenant_dev *account, int fds[OPEN_NFDS])
{
	struct ibvd_daemon *d = s->daemon;
	struct ibvd_context *ctx = calloc(1, sizeof(*ctx));
	int ret;

	if (!ctx)
		return -ENOMEM;
	ret = async_pair(&ctx->async_fd, &fds[OPEN_FD_ASYNC]);
	if (ret < 0) {
		free(ctx);
		return ret;
	}
	ctx->dev = dev;
	ctx->session = s;
	ret = ibvd_ctx_rings_open(ctx, &fds[OPEN_FD_RINGS]);
	if (ret < 0)
		goto fail_async;
	/* its tenant's bandwidth bucket, shared with the tenant's others */
	ret = ibvd_engine_ctx_open(ctx, s->tenant ? s->tenant->rate : NULL,
				   &fds[OPEN_FD_CTX_PAGE], &fds[OPEN_FD_KICK]);
	if (ret < 0)
		goto fail_rings;
	ctx->id = ++d->next_context_id;
	ibvd_handle_table_init(&ctx->handles, IBVD_MAX_OBJECTS_PER_CONTEXT);
	/* objects count against the device's limits and all devices' */
	ctx->handles.charge = ibvd_tenant_dev_charge_obj;
	ctx->handles.charge_owner = account;
	TAILQ_INSERT_TAIL(&dev->contexts, ctx, dev_link);
	dev->ncontexts++;
	d->ncontexts++;
	s->ctx = ctx;
	s->state = IBVD_SESSION_CONTEXT;
	return 0;
fail_rings:
	close(fds[OPEN_FD_RINGS]);
	ibvd_ctx_rings_close(ctx);
fail_async:
	close(ctx->async_fd);
	close(fds[OPEN_FD_ASYNC]);
	free(ctx);
	return ret;
}

void ibvd_context_free(struct ibvd_context *ctx)
{
	struct ibvd_session *s = ctx->session;
	/* releasing the handle table forgets its hook: keep the account */
	struct ibvd_tenant_dev *account = ctx->handles.charge_owner;

	/*
	 * No engine thread serves the context once detached; then its objects
	 * go, children before parents (other contexts' traffic may still reach
	 * them until then: the objects lock keeps that safe), then the engine's
	 * per-context state.
	 */
	ibvd_engine_ctx_detach(ctx);
	ibvd_objects_free_all(ctx);
	ibvd_ctx_rings_close(ctx);
	ibvd_engine_ctx_free(ctx);
	ibvd_handle_table_release(&ctx->handles);
	close(ctx->async_fd);
	TAILQ_REMOVE(&ctx->dev->contexts, ctx, dev_link);
	ctx->dev->ncontexts--;
	s->daemon->ncontexts--;
	ibvd_tenant_dev_uncharge(account, IBVD_LIMIT_HCA_HANDLE, 1);
	s->ctx = NULL;
	free(ctx);
}

int ibvd_req_open_device(struct ibvd_call *call)
{
	const Ibvd__OpenDevice *req = (const Ibvd__OpenDevice *)call->msg;
	struct ibvd_session *s = call->session;
	Ibvd__OpenDeviceReply reply = IBVD__OPEN_DEVICE_REPLY__INIT;
	struct ibvd_tenant_dev *account;
	Ibvd__DeviceInfo info;
	struct ibvd_device *dev;
	int fds[OPEN_NFDS], ret;

	dev = req->name ? ibvd_device_find(&s->daemon->devices, req->name) : NULL;
	if (!dev)
		return ibvd_call_error(call, -ENODEV, "unknown device %.64s",
				       req->name ? req->name : "");
	account = ibvd_tenant_dev_get(s->tenant, s->daemon->cfg, dev->name);
	if (!account)
		return -ENOMEM;
	/* first: a refused open must not have built anything */
	ret = ibvd_tenant_dev_charge(account, IBVD_LIMIT_HCA_HANDLE, 1,
				     "opening a device");
	if (ret < 0)
		return ibvd_call_error(call, ret, "over the hca_handle limit");
	ret = context_new(s, dev, account, fds);
	if (ret < 0)
		ibvd_tenant_dev_uncharge(account, IBVD_LIMIT_HCA_HANDLE, 1);
	if (ret < 0)
		return ibvd_call_error(call, ret, "cannot create the context: %s",
				       strerror(-ret));
	ibvd_device_info(dev, &info);
	reply.device = &info;
	reply.num_comp_vectors = IBVD_NUM_COMP_VECTORS;
	reply.context_id = s->ctx->id;
	/* If this fails the session is closing and takes the context along. */
	ret = ibvd_call_reply(call, &reply.base, fds, OPEN_NFDS);
	/* The kick eventfd stays open here: the engine polls it. */
	close(fds[OPEN_FD_ASYNC]);
	close(fds[OPEN_FD_CTX_PAGE]);
	close(fds[OPEN_FD_RINGS]);
	if (ret < 0 && s->ctx) {
		/* Nothing was sent: the connection stays fresh. */
		ibvd_context_free(s->ctx);
		s->state = IBVD_SESSION_FRESH;
	}
	if (ret == 0)
		log_debug("client %llu: context %u on %s", (unsigned long long)s->id,
			  s->ctx->id, dev->name);
	return ret;
}

/* ---- context teardown ------------------------------------------------- */

static int destroy_one(uint32_t handle, enum ibvd_obj_kind kind, void *obj,
		       void *arg)
{
	struct ibvd_context *ctx = arg;

	switch (kind) {
	case IBVD_OBJ_QP:		ibvd_qp_release(ctx, handle, obj); break;
	case IBVD_OBJ_SRQ:		ibvd_srq_destroy(obj); break;
	case IBVD_OBJ_AH:		ibvd_ah_destroy(obj); break;
	case IBVD_OBJ_MW:		ibvd_mw_destroy(obj); break;
	case IBVD_OBJ_MR:		ibvd_mr_destroy(obj); break;
	case IBVD_OBJ_CQ:		ibvd_cq_destroy(obj); break;
	case IBVD_OBJ_COMP_CHANNEL:	ibvd_channel_destroy(obj); break;
	case IBVD_OBJ_PD:		ibvd_pd_destroy(obj); break;
	case IBVD_OBJ_XRCD:		ibvd_xrcd_close(ctx, handle, obj); break;
	default:			break;
	}
	return 0;
}

void ibvd_objects_free_all(struct ibvd_context *ctx)
{
	/* Children before parents, so every users count is 0 in its turn. */
	static const enum ibvd_obj_kind order[] = {
		IBVD_OBJ_QP, IBVD_OBJ_SRQ, IBVD_OBJ_AH, IBVD_OBJ_MW,
		IBVD_OBJ_MR, IBVD_OBJ_CQ, IBVD_OBJ_COMP_CHANNEL, IBVD_OBJ_PD,
		IBVD_OBJ_XRCD,
	};
	size_t i;

	/*
	 * One write-locked section for the whole context: the engine waits
	 * once, and never sees a half-destroyed family.
	 */
	ibvd_objects_write_lock();
	for (i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		ibvd_handle_foreach(&ctx->handles, order[i], destroy_one, ctx);
	ibvd_objects_write_unlock();
	if (ctx->objs.mem) {
		ibvd_mem_put(ctx->objs.mem);
		ctx->objs.mem = NULL;
	}
	free(ctx->objs.db_qp);
	ctx->objs.db_qp = NULL;
	ctx->objs.db_qp_len = 0;
	if (ctx->objs.ring_bytes)
		log_err("context %u: %llu ring bytes unaccounted at teardown",
			ctx->id, (unsigned long long)ctx->objs.ring_bytes);
}
