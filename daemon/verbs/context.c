/*
 * OPEN_DEVICE and the lifetime of device contexts: what a context may
 * hold (its device's limits), and its teardown, children before parents.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

#include "async.h"
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

/* The member entry of session s in its context, or NULL. */
static struct ibvd_ctx_member *member_of(struct ibvd_context *ctx,
					 const struct ibvd_session *s)
{
	unsigned int i;

	for (i = 0; i < ctx->nmembers; i++)
		if (ctx->members[i].session == s)
			return &ctx->members[i];
	return NULL;
}

struct ibvd_mem *ibvd_call_mem(const struct ibvd_call *call)
{
	struct ibvd_ctx_member *m = member_of(ibvd_call_ctx(call), call->session);

	return m ? m->mem : NULL;
}

void ibvd_call_set_mem(const struct ibvd_call *call, struct ibvd_mem *mem)
{
	struct ibvd_ctx_member *m = member_of(ibvd_call_ctx(call), call->session);

	if (m)
		m->mem = mem;
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
	case IBVD_OBJ_DM:		return IBVD_CTX_MAX_DMS;
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

/*
 * Make session s a member of ctx, with its own async socket: the client
 * end goes to *async_client.  -EMFILE when the context has all the members
 * it may have.
 */
static int member_add(struct ibvd_context *ctx, struct ibvd_session *s,
		      int *async_client)
{
	struct ibvd_ctx_member *m;
	int ours = -1, ret;

	if (ctx->nmembers == IBVD_CTX_MAX_MEMBERS)
		return -EMFILE;
	ret = async_pair(&ours, async_client);
	if (ret < 0)
		return ret;
	pthread_mutex_lock(&ctx->async_lock);
	m = &ctx->members[ctx->nmembers++];
	*m = (struct ibvd_ctx_member){ .session = s, .async_fd = ours };
	pthread_mutex_unlock(&ctx->async_lock);
	ctx->session = ctx->members[0].session;
	s->ctx = ctx;
	s->state = IBVD_SESSION_CONTEXT;
	if (ctx->nmembers == 2)
		ibvd_direct_ctx_shared(ctx);
	return 0;
}

/* Forget member m: its memory reference and its async socket. */
static void member_remove(struct ibvd_context *ctx, struct ibvd_ctx_member *m)
{
	struct ibvd_session *s = m->session;

	if (m->mem)
		ibvd_mem_put(m->mem);
	pthread_mutex_lock(&ctx->async_lock);
	ibvd_async_member_forget(m);
	close(m->async_fd);
	*m = ctx->members[--ctx->nmembers];
	pthread_mutex_unlock(&ctx->async_lock);
	ctx->session = ctx->nmembers ? ctx->members[0].session : NULL;
	s->ctx = NULL;
}

/* The fds an OPEN_DEVICE or IMPORT_DEVICE reply carries, in this order. */
static void reply_fds(const struct ibvd_context *ctx, int async_client,
		      int fds[IBVD_OPEN_NFDS])
{
	fds[IBVD_OPEN_FD_ASYNC] = async_client;
	fds[IBVD_OPEN_FD_CTX_PAGE] = ctx->page_fd;
	fds[IBVD_OPEN_FD_KICK] = ctx->kick_fd;
	fds[IBVD_OPEN_FD_RINGS] = ctx->rings_fd;
}

/*
 * A new context with its ring arena and its engine part (context page,
 * kick eventfd, serving thread), s its first member; *async_client gets
 * the client end of s's async socket.
 */
static int context_new(struct ibvd_session *s, struct ibvd_device *dev,
		       struct ibvd_tenant_dev *account, int *async_client)
{
	struct ibvd_daemon *d = s->daemon;
	struct ibvd_context *ctx = calloc(1, sizeof(*ctx));
	int ret;

	if (!ctx)
		return -ENOMEM;
	pthread_mutex_init(&ctx->async_lock, NULL);
	ctx->dev = dev;
	ctx->page_fd = ctx->rings_fd = ctx->kick_fd = -1;
	ret = ibvd_ctx_rings_open(ctx, &ctx->rings_fd);
	if (ret < 0)
		goto fail;
	/* its tenant's bandwidth bucket, shared with the tenant's others */
	ret = ibvd_engine_ctx_open(ctx, s->tenant ? s->tenant->rate : NULL,
				   &ctx->page_fd, &ctx->kick_fd);
	if (ret < 0)
		goto fail_rings;
	ret = member_add(ctx, s, async_client);
	if (ret < 0)
		goto fail_engine;
	ctx->id = ++d->next_context_id;
	ibvd_handle_table_init(&ctx->handles, IBVD_MAX_OBJECTS_PER_CONTEXT);
	/* objects count against the device's limits and all devices' */
	ctx->handles.charge = ibvd_tenant_dev_charge_obj;
	ctx->handles.charge_owner = account;
	/*
	 * The account's tenant (and the rate bucket the engine was given)
	 * must live as long as the context, which may outlive the session
	 * that opened it (a member that imported it stays).
	 */
	ibvd_tenant_ref(account->tenant);
	TAILQ_INSERT_TAIL(&dev->contexts, ctx, dev_link);
	dev->ncontexts++;
	d->ncontexts++;
	return 0;
fail_engine:
	ibvd_engine_ctx_detach(ctx);
	ibvd_engine_ctx_free(ctx);
	close(ctx->page_fd);
fail_rings:
	close(ctx->rings_fd);
	ibvd_ctx_rings_close(ctx);
fail:
	pthread_mutex_destroy(&ctx->async_lock);
	free(ctx);
	return ret;
}

/* Destroy ctx and everything it owns; its members are gone already. */
static void context_destroy(struct ibvd_context *ctx, struct ibvd_daemon *d)
{
	/* releasing the handle table forgets its hook: keep the account */
	struct ibvd_tenant_dev *account = ctx->handles.charge_owner;

	/*
	 * What its QPs were rung for first, then the end of their
	 * connections, then the engine breaks the peers' QPs
	 * (ibvd_engine_ctx_free): as a peer reads TCP's last data, its FIN,
	 * then nothing.
	 */
	ibvd_engine_ctx_finish_sends(ctx);
	if (d->up.cm_context_going)
		d->up.cm_context_going(ctx);
	/*
	 * No engine thread serves the context once detached; then its objects
	 * go, children before parents (other contexts' traffic may still reach
	 * them until then: the objects lock keeps that safe), then the engine's
	 * per-context state.
	 */
	ibvd_engine_ctx_detach(ctx);
	ibvd_async_context_forget(ctx);
	ibvd_objects_free_all(ctx);
	ibvd_ctx_rings_close(ctx);
	ibvd_engine_ctx_free(ctx);
	ibvd_handle_table_release(&ctx->handles);
	close(ctx->page_fd);
	close(ctx->rings_fd);
	TAILQ_REMOVE(&ctx->dev->contexts, ctx, dev_link);
	ctx->dev->ncontexts--;
	d->ncontexts--;
	ibvd_tenant_dev_uncharge(account, IBVD_LIMIT_HCA_HANDLE, 1);
	ibvd_tenant_put(account->tenant);
	pthread_mutex_destroy(&ctx->async_lock);
	free(ctx);
}

const struct ibvd_session *ibvd_context_stand_in(const struct ibvd_context *ctx)
{
	const struct ibvd_tenant_dev *account = ctx->handles.charge_owner;
	unsigned int i;

	for (i = 0; account && i < ctx->nmembers; i++)
		if (ctx->members[i].session->tenant == account->tenant)
			return ctx->members[i].session;
	return ctx->session;
}

void ibvd_context_leave(struct ibvd_session *s)
{
	struct ibvd_context *ctx = s->ctx;
	struct ibvd_ctx_member *m = member_of(ctx, s);

	if (m)
		member_remove(ctx, m);
	s->ctx = NULL;
	/* The objects are the context's: they stay while a member does. */
	if (!ctx->nmembers)
		context_destroy(ctx, s->daemon);
}

int ibvd_context_join(struct ibvd_context *ctx, struct ibvd_session *s,
		      int fds[IBVD_OPEN_NFDS])
{
	int async_client, ret;

	ret = member_add(ctx, s, &async_client);
	if (ret < 0)
		return ret;
	reply_fds(ctx, async_client, fds);
	return 0;
}

void ibvd_context_reply_info(const struct ibvd_context *ctx,
			     Ibvd__OpenDeviceReply *reply, Ibvd__DeviceInfo *info)
{
	ibvd_device_info(ctx->dev, info);
	reply->device = info;
	reply->num_comp_vectors = IBVD_NUM_COMP_VECTORS;
	reply->context_id = ctx->id;
}

int ibvd_req_open_device(struct ibvd_call *call)
{
	const Ibvd__OpenDevice *req = (const Ibvd__OpenDevice *)call->msg;
	struct ibvd_session *s = call->session;
	Ibvd__OpenDeviceReply reply = IBVD__OPEN_DEVICE_REPLY__INIT;
	struct ibvd_tenant_dev *account;
	Ibvd__DeviceInfo info;
	struct ibvd_device *dev;
	int fds[IBVD_OPEN_NFDS], async_client, ret;

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
	ret = context_new(s, dev, account, &async_client);
	if (ret < 0)
		ibvd_tenant_dev_uncharge(account, IBVD_LIMIT_HCA_HANDLE, 1);
	if (ret < 0)
		return ibvd_call_error(call, ret, "cannot create the context: %s",
				       strerror(-ret));
	ibvd_context_reply_info(s->ctx, &reply, &info);
	reply_fds(s->ctx, async_client, fds);
	/* If this fails the session is closing and takes the context along. */
	ret = ibvd_call_reply(call, &reply.base, fds, IBVD_OPEN_NFDS);
	/* The others stay open here: the context keeps them for importers. */
	close(async_client);
	if (ret < 0 && s->ctx) {
		/* Nothing was sent: the connection stays fresh. */
		ibvd_context_leave(s);
		s->state = IBVD_SESSION_FRESH;
	}
	if (ret == 0)
		log_debug("client %llu: context %u on %s", (unsigned long long)s->id,
			  s->ctx->id, dev->name);
	return ret;
}

/* ---- context teardown ------------------------------------------------- */

/*
 * The objects lock is let go between objects once it was held this long
 * or for this many: held for a whole context (65,536 QPs and their CQs,
 * ~0.2 s), every engine thread of every tenant would wait that long.
 * Each object goes whole, children before parents, so what other
 * contexts' traffic can still reach in between (this one's engine
 * threads let it go already) is what a client destroying them one by one
 * would leave.
 */
#define TEARDOWN_HOLD_NS	1000000ull
#define TEARDOWN_BATCH		256u

struct teardown {
	struct ibvd_context *ctx;
	unsigned int done;
	uint64_t since;		/* ns, when the lock was taken */
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void teardown_breathe(struct teardown *t)
{
	if (++t->done % TEARDOWN_BATCH && mono_ns() - t->since < TEARDOWN_HOLD_NS)
		return;
	/* readers waiting now get the lock before we have it again */
	ibvd_objects_write_unlock();
	ibvd_objects_write_lock();
	t->since = mono_ns();
}

static int destroy_one(uint32_t handle, enum ibvd_obj_kind kind, void *obj,
		       void *arg)
{
	struct teardown *t = arg;
	struct ibvd_context *ctx = t->ctx;

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
	case IBVD_OBJ_DM:		ibvd_dm_destroy(obj); break;
	default:			break;
	}
	teardown_breathe(t);
	return 0;
}

void ibvd_objects_free_all(struct ibvd_context *ctx)
{
	/*
	 * Children before parents, so every users count is 0 in its turn.
	 * Windows first: each QP's destroy looks for the type-2 windows
	 * bound to it among those that are left (ibvd_mw_qp_gone), which
	 * would make a context of many QPs and windows quadratic.
	 */
	static const enum ibvd_obj_kind order[] = {
		IBVD_OBJ_MW, IBVD_OBJ_QP, IBVD_OBJ_SRQ, IBVD_OBJ_AH,
		IBVD_OBJ_MR, IBVD_OBJ_CQ, IBVD_OBJ_COMP_CHANNEL, IBVD_OBJ_PD,
		IBVD_OBJ_XRCD, IBVD_OBJ_DM,
	};
	struct teardown t = { .ctx = ctx };
	size_t i;

	ibvd_mcast_detach_ctx(ctx);
	/* its memory goes at once with the arena, after the lock */
	ibvd_ctx_rings_closing(ctx);
	ibvd_objects_write_lock();
	ctx->tearing_down = true;
	t.since = mono_ns();
	for (i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		ibvd_handle_foreach(&ctx->handles, order[i], destroy_one, &t);
	ibvd_objects_write_unlock();
	free(ctx->objs.db_qp);
	ctx->objs.db_qp = NULL;
	ctx->objs.db_qp_len = 0;
	if (ctx->objs.ring_bytes)
		log_err("context %u: %llu ring bytes unaccounted at teardown",
			ctx->id, (unsigned long long)ctx->objs.ring_bytes);
}
