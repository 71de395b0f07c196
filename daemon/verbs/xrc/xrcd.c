/*
 * XRC domains: ALLOC_XRCD (private), OPEN_XRCD (shared through a file),
 * CLOSE_XRCD.  The object is in objects.h; what uses it: XRC SRQs
 * (srq.c) and XRC target QPs (xrc/qp.c).
 *
 * A shared domain is keyed by the device and the (st_dev, st_ino) of the
 * file whose fd the client passed: we stat that fd ourselves, so a
 * client can only reach domains of files it could open, as with the
 * kernel's inode-keyed table.  The domain holds its file (an O_PATH fd,
 * as the kernel holds the inode): once the file is unlinked and closed,
 * its inode number could otherwise go to a new file, another uid's, and
 * that file would open this domain.  Those fds are bounded: a uid makes
 * at most IBVD_UID_MAX_SHARED_XRCDS shared domains that live at once,
 * and all of them SHARED_XRCDS_MAX, or opening domains on file after
 * file would take the daemon's fds.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "verbs/context.h"
#include "core/random.h"
#include "frame.h"
#include "ibverbsd.pb-c.h"
#include "server/call.h"
#include "server/closer.h"
#include "tenant/tenant.h"
#include "util.h"
#include "verbs/fdstat.h"
#include "verbs/verbs.h"

/*
 * Shared domains of every device, by file; control thread only.  Any
 * client may ask for the domain of any file it can open, many times a
 * second: one bucket is looked at, whose number mixes the file's identity
 * with a secret, so that no client can pile its files into one.
 */
static struct ibvd_keyed_table shared_xrcds;
static uint32_t shared_key_secret;
static uint32_t next_xrcd_id;

#define SHARED_XRCDS_MAX	65536u
static unsigned int shared_xrcds_held;

static uint32_t shared_key(const struct ibvd_device *dev, const struct stat *st)
{
	uint64_t v = (uint64_t)st->st_ino ^ ((uint64_t)st->st_dev << 29) ^
		     (uint64_t)(uintptr_t)dev;

	if (!shared_key_secret)
		shared_key_secret = ibvd_random32() | 1u;
	v *= 0x9E3779B97F4A7C15ull;
	return (uint32_t)(v >> 32) ^ (uint32_t)v ^ shared_key_secret;
}

static struct ibvd_xrcd *xrcd_find(const struct ibvd_device *dev,
				   const struct stat *st)
{
	struct ibvd_keyed *n;

	for (n = ibvd_keyed_find(&shared_xrcds, shared_key(dev, st)); n;
	     n = ibvd_keyed_next(n)) {
		struct ibvd_xrcd *x = container_of(n, struct ibvd_xrcd, node);

		if (x->dev == dev && x->st_dev == st->st_dev &&
		    x->st_ino == st->st_ino)
			return x;
	}
	return NULL;
}

/*
 * An O_PATH fd of the file fd is open on: it holds the inode, and no
 * more (not the client's open file, whose locks and close are its own).
 */
static int pin_file(int fd)
{
	char path[32];
	int pin;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	pin = open(path, O_PATH | O_CLOEXEC);
	return pin < 0 ? -errno : pin;
}

/* Shared x holds its file, made by payer's uid: 0 or -errno. */
static int pin_take(struct ibvd_xrcd *x, int fd, struct ibvd_tenant *payer)
{
	if (shared_xrcds_held >= SHARED_XRCDS_MAX ||
	    payer->shared_xrcds >= IBVD_UID_MAX_SHARED_XRCDS)
		return -EMFILE;
	x->pin_fd = pin_file(fd);
	if (x->pin_fd < 0)
		return x->pin_fd;
	ibvd_closer_own(x->pin_fd, payer->uid);
	x->pin_payer = payer;
	ibvd_tenant_ref(payer);
	payer->shared_xrcds++;
	shared_xrcds_held++;
	return 0;
}

static void pin_give(struct ibvd_xrcd *x)
{
	if (x->pin_fd < 0)
		return;
	/*
	 * The last hold of an unlinked file: its close frees the inode,
	 * which may take a while (a large file's blocks), so it goes to the
	 * maker's close queue, as the client's own fds do.
	 */
	ibvd_frame_close_fd(x->pin_fd);
	x->pin_fd = -1;
	x->pin_payer->shared_xrcds--;
	shared_xrcds_held--;
	ibvd_tenant_put(x->pin_payer);
	x->pin_payer = NULL;
}

/*
 * A new domain; shared: of the file st describes, which fd is open on,
 * made by payer's uid.
 */
static int xrcd_new(struct ibvd_device *dev, const struct stat *st, int fd,
		    struct ibvd_tenant *payer, struct ibvd_xrcd **ret)
{
	struct ibvd_xrcd *x = calloc(1, sizeof(*x));
	int err;

	if (!x)
		return -ENOMEM;
	x->dev = dev;
	x->pin_fd = -1;
	x->id = ++next_xrcd_id;
	LIST_INIT(&x->tgts);
	if (st) {
		x->shared = true;
		x->st_dev = st->st_dev;
		x->st_ino = st->st_ino;
		err = pin_take(x, fd, payer);
		if (err < 0)
			goto fail;
		err = ibvd_keyed_insert(&shared_xrcds, &x->node,
					shared_key(dev, st));
		if (err < 0)
			goto fail;
	}
	*ret = x;
	return 0;
fail:
	pin_give(x);
	free(x);
	return err;
}

/* Free x once no context holds it and nothing of it is left. */
static void xrcd_maybe_free(struct ibvd_xrcd *x)
{
	if (x->opens || x->users)
		return;
	if (x->shared) {
		ibvd_keyed_remove(&shared_xrcds, &x->node);
		pin_give(x);
	}
	free(x);
}

void ibvd_xrcd_use(struct ibvd_xrcd *x, int d)
{
	x->users += d;
	if (d < 0)
		xrcd_maybe_free(x);
}

struct ibvd_xrcd *ibvd_call_xrcd(struct ibvd_call *call, uint32_t handle)
{
	struct ibvd_xrcd *x = ibvd_handle_lookup(&ibvd_call_ctx(call)->handles,
						 handle, IBVD_OBJ_XRCD);

	if (!x)
		ibvd_call_error(call, -EINVAL, "no XRC domain %#x", handle);
	return x;
}

/* Give x a handle in the caller's context and reply with it. */
static int xrcd_reply(struct ibvd_call *call, struct ibvd_xrcd *x)
{
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	Ibvd__Handle reply = IBVD__HANDLE__INIT;
	int ret;

	ret = ibvd_obj_add(ctx, IBVD_OBJ_XRCD, x, &reply.handle);
	if (ret < 0) {
		xrcd_maybe_free(x);
		return ibvd_call_error(call, ret, "too many XRC domains");
	}
	x->opens++;
	ret = ibvd_call_reply(call, &reply.base, NULL, 0);
	/* A failed send closed the session: its context let go of x. */
	if (ret < 0 && ibvd_call_ctx(call))
		ibvd_xrcd_close(ctx, reply.handle, x);
	return ret;
}

int ibvd_req_alloc_xrcd(struct ibvd_call *call)
{
	struct ibvd_xrcd *x;
	int ret = xrcd_new(ibvd_call_ctx(call)->dev, NULL, -1, NULL, &x);

	if (ret < 0)
		return ret;
	return xrcd_reply(call, x);
}

/* The uid ctx's objects are charged to. */
static struct ibvd_tenant *xrcd_payer(const struct ibvd_context *ctx)
{
	const struct ibvd_tenant_dev *account = ctx->handles.charge_owner;

	return account->tenant;
}

/*
 * The domain the file (st, open as fd) names, as oflags ask: found,
 * made, or an error.
 */
static int xrcd_lookup(struct ibvd_call *call, const struct stat *st, int fd,
		       uint32_t oflags, struct ibvd_xrcd **ret)
{
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	struct ibvd_xrcd *x = xrcd_find(ctx->dev, st);
	int err;

	if (x && (oflags & O_CREAT) && (oflags & O_EXCL))
		return ibvd_call_error(call, -EEXIST, "the XRC domain exists");
	if (!x && !(oflags & O_CREAT))
		return ibvd_call_error(call, -ENOENT, "no XRC domain for that file");
	if (!x) {
		err = xrcd_new(ctx->dev, st, fd, xrcd_payer(ctx), &x);
		if (err == -EMFILE)
			return ibvd_call_error(call, err,
					       "too many shared XRC domains (%u a uid, %u in all)",
					       IBVD_UID_MAX_SHARED_XRCDS, SHARED_XRCDS_MAX);
		if (err < 0)
			return ibvd_call_error(call, err,
					       "cannot hold the domain's file");
	}
	*ret = x;
	return 0;
}

/*
 * What names the domain of fd's file: its device and inode, as the kernel
 * has them (fdstat.h; they never change), in a struct stat.
 */
static int file_id(int fd, struct stat *st)
{
	struct statx stx;
	int ret;

	ret = ibvd_fd_stat_cached(fd, STATX_INO, &stx);
	if (ret < 0)
		return ret;
	*st = (struct stat){
		.st_dev = makedev(stx.stx_dev_major, stx.stx_dev_minor),
		.st_ino = stx.stx_ino,
	};
	return 0;
}

int ibvd_req_open_xrcd(struct ibvd_call *call)
{
	const Ibvd__OpenXrcd *req = (const Ibvd__OpenXrcd *)call->msg;
	struct ibvd_xrcd *x = NULL;
	struct stat st;
	int fd, ret;

	if (req->oflags & ~(uint32_t)(O_CREAT | O_EXCL))
		return ibvd_call_error(call, -EINVAL, "oflags %#x", req->oflags);
	fd = ibvd_call_take_fd(call, 0);
	ret = file_id(fd, &st);
	/*
	 * An O_PATH fd needs no right to the file, only to its directories:
	 * the kernel takes none (fdget), so neither do we, or the domain of
	 * a file one may not open would be anyone's.
	 */
	if (ret == 0 && (fcntl(fd, F_GETFL) & O_PATH))
		ret = -EBADF;
	if (ret < 0) {
		ibvd_frame_close_fd(fd);
		return ibvd_call_error(call, ret, "cannot stat the domain's file");
	}
	ret = xrcd_lookup(call, &st, fd, req->oflags, &x);
	ibvd_frame_close_fd(fd);	/* the client's: its close may block */
	if (ret < 0)
		return ret;
	return xrcd_reply(call, x);
}

void ibvd_xrcd_close(struct ibvd_context *ctx, uint32_t handle,
		     struct ibvd_xrcd *x)
{
	ibvd_handle_remove(&ctx->handles, handle, IBVD_OBJ_XRCD);
	x->opens--;
	xrcd_maybe_free(x);
}

int ibvd_req_close_xrcd(struct ibvd_call *call)
{
	const Ibvd__Handle *req = (const Ibvd__Handle *)call->msg;
	struct ibvd_xrcd *x = ibvd_call_xrcd(call, req->handle);

	if (!x)
		return -EINVAL;
	/* As the kernel: the last close of a domain still in use fails. */
	if (x->opens == 1 && x->users)
		return ibvd_call_error(call, -EBUSY,
				       "XRC domain %#x still has %u SRQs and QPs",
				       req->handle, x->users);
	ibvd_xrcd_close(ibvd_call_ctx(call), req->handle, x);
	return 0;
}
