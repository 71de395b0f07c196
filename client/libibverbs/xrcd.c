/*
 * XRC domains: ibv_open_xrcd and ibv_close_xrcd (verbs_context ops; the
 * close op is called by a header inline without a NULL check).  A domain
 * named by a file is shared with every process that opens the same file:
 * we pass the app's fd to the daemon, which keys the domain by the file it
 * refers to (PROTOCOL.md, OPEN_XRCD); fd -1 asks for a private domain.
 */
#include "config.h"

#include <fcntl.h>
#include <stdlib.h>

#include "ibvd_verbs.h"

static int check_xrcd_attr(const struct ibv_xrcd_init_attr *attr)
{
	uint32_t known = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;

	if (attr->comp_mask & ~known)
		return -EINVAL;
	/* ibv_open_xrcd(3): both are required. */
	if ((attr->comp_mask & known) != known)
		return -EINVAL;
	if (attr->oflags & ~(O_CREAT | O_EXCL))
		return -EINVAL;
	/* Without a file there is nothing to share, so nothing to create. */
	if (attr->fd < 0 && attr->fd != -1)
		return -EBADF;
	return 0;
}

static int open_on_daemon(struct ibv_context *ctx,
			  const struct ibv_xrcd_init_attr *attr,
			  uint32_t *handle)
{
	Ibvd__OpenXrcd req = IBVD__OPEN_XRCD__INIT;
	Ibvd__Handle *reply = NULL;
	int ret;

	req.oflags = (uint32_t)attr->oflags;
	if (attr->fd == -1)
		ret = ibvd_conn_call(ibvc_conn_of(ctx), IBVD_MSG_ALLOC_XRCD, NULL,
				     &ibvd__handle__descriptor,
				     (ProtobufCMessage **)&reply, NULL, NULL);
	else
		ret = ibvd_conn_call_fds(ibvc_conn_of(ctx), IBVD_MSG_OPEN_XRCD,
					 &req.base, &attr->fd, 1,
					 &ibvd__handle__descriptor,
					 (ProtobufCMessage **)&reply, NULL, NULL);
	if (ret < 0)
		return ret;
	*handle = reply->handle;
	ibvd__handle__free_unpacked(reply, NULL);
	return 0;
}

static int open_xrcd(struct ibv_context *ctx, struct ibv_xrcd_init_attr *attr,
		     struct ibvc_xrcd **ret_xrcd)
{
	struct ibvc_xrcd *x;
	int ret;

	ret = check_xrcd_attr(attr);
	if (ret < 0)
		return ret;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	ret = open_on_daemon(ctx, attr, &x->handle);
	if (ret < 0) {
		free(x);
		return ret;
	}
	x->xrcd.context = ctx;
	*ret_xrcd = x;
	return 0;
}

struct ibv_xrcd *ibvc_open_xrcd_op(struct ibv_context *ctx,
				   struct ibv_xrcd_init_attr *attr)
{
	struct ibvc_xrcd *x;
	int ret;

	if (!ctx || !attr)
		return ibvc_null_ret(-EINVAL);
	ret = open_xrcd(ctx, attr, &x);
	return ret < 0 ? ibvc_null_ret(ret) : &x->xrcd;
}

int ibvc_close_xrcd_op(struct ibv_xrcd *xrcd)
{
	struct ibvc_xrcd *x;
	int ret;

	if (!xrcd)
		return EINVAL;
	x = to_ibvc_xrcd(xrcd);
	ret = ibvc_destroy_handle(xrcd->context, IBVD_MSG_CLOSE_XRCD, x->handle);
	if (ret < 0)
		return ibvc_errno_ret(ret);
	free(x);
	return 0;
}
