/*
 * OPEN_DEVICE and the lifetime of device contexts.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "context.h"
#include "device.h"
#include "engine/engine.h"
#include "log.h"
#include "request.h"
#include "session.h"
#include "verbs.h"

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
	OPEN_NFDS,
};

/*
 * A new context with its async socket and its engine part (context page,
 * kick eventfd, serving thread); fds[] gets the reply's descriptors.
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
	ctx->session = s;	/* the engine takes its tenant's bandwidth */
	ret = ibvd_engine_ctx_open(ctx, &fds[OPEN_FD_CTX_PAGE], &fds[OPEN_FD_KICK]);
	if (ret < 0) {
		close(ctx->async_fd);
		close(fds[OPEN_FD_ASYNC]);
		free(ctx);
		return ret;
	}
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
