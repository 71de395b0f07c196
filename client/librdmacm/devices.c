/*
 * The verbs devices the connection manager works with, as rdma-core's
 * librdmacm keeps them: every device, opened once for the life of the
 * process, the first time the CM needs them.  rdma_get_devices() hands out
 * these contexts and cm_id->verbs points at them too, so they are never
 * closed, and rdma_free_devices() frees only the array.  While ids are on
 * a device, it keeps the PD they all name (id->pd, rdma_create_qp(id,
 * NULL, ...)'s) and, once one needs it, the XRC domain of the XRC targets
 * and SRQs made on them; when the last of those ids goes, both go too, as
 * in rdma-core (one still in use stays the app's, forgotten).
 *
 * A context whose daemon went away is dead for good; as rdma-core drops a
 * device that was removed, a later look for the device opens it again
 * (from a daemon started since) in its place.  The dead context is kept,
 * never closed: ids made on it may still name it.  A forked child treats
 * its parent's contexts so too: they fail with EIO in it (ibverbsd(7)),
 * and the child's own ids get contexts of its own.
 *
 * This is also what makes our librdmacm depend on our libibverbs
 * (DT_NEEDED libibverbs.so.1), so that a program, its librdmacm and any
 * provider library all bind to the one libibverbs in the process.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "cma.h"

/* What each device keeps for the ids on it that name none of their own. */
enum dev_obj {
	DEV_PD,		/* rdma_create_qp(id, NULL, ...)'s PD */
	DEV_XRCD,	/* XRC_RECV ids' XRC domain */
	DEV_NOBJS
};

struct cma_device {
	struct ibv_context *ctx;
	pid_t pid;			/* the process that opened it */
	void *objs[DEV_NOBJS];		/* made the first time needed */
	unsigned int nids;		/* the ids on it (cma_device_hold) */
	bool have_attr;
	uint8_t max_resp;		/* max_qp_rd_atom */
	uint8_t max_init;		/* max_qp_init_rd_atom */
};

static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibv_context **contexts;	/* NULL-terminated once opened */
static struct cma_device *devices;	/* the same, with our extras */
static int ncontexts;
/* dead contexts replaced by new ones, with their PD and XRC domain */
static struct cma_device *dead_devices;
static int ndead;

/*
 * Did the daemon behind ctx go away?  Its end of the async socket is
 * closed then, which a poll sees without a round trip.
 */
static bool dead(const struct ibv_context *ctx)
{
	struct pollfd pfd = { .fd = ctx->async_fd, .events = 0 };

	return poll(&pfd, 1, 0) == 1 &&
	       (pfd.revents & (POLLHUP | POLLERR | POLLNVAL));
}

/* Entry i's context is dead, or a parent's (we are a forked child). */
static bool gone_locked(int i)
{
	return devices[i].pid != getpid() || dead(contexts[i]);
}

/* The entry of a live context of device (or of its name), or -1. */
static int known_locked(struct ibv_device *device)
{
	int i;

	for (i = 0; i < ncontexts; i++)
		if ((contexts[i]->device == device ||
		     strcmp(ibv_get_device_name(contexts[i]->device),
			    ibv_get_device_name(device)) == 0) &&
		    !gone_locked(i))
			return i;
	return -1;
}

/* The entry of a dead context named like device, or -1. */
static int dead_locked(struct ibv_device *device)
{
	int i;

	for (i = 0; i < ncontexts; i++)
		if (strcmp(ibv_get_device_name(contexts[i]->device),
			   ibv_get_device_name(device)) == 0 &&
		    gone_locked(i))
			return i;
	return -1;
}

static bool any_dead_locked(void)
{
	int i;

	for (i = 0; i < ncontexts; i++)
		if (gone_locked(i))
			return true;
	return false;
}

/* Make room for n more devices in both arrays. */
static int grow_locked(int n)
{
	struct ibv_context **c;
	struct cma_device *d;

	c = realloc(contexts, ((size_t)ncontexts + n + 1) * sizeof(*c));
	if (!c)
		return -ENOMEM;
	contexts = c;
	d = realloc(devices, ((size_t)ncontexts + n) * sizeof(*d));
	if (!d)
		return -ENOMEM;
	devices = d;
	return 0;
}

/* Keep the dead device of entry i: ids made on it still name it. */
static void bury_locked(int i)
{
	struct cma_device *d;

	d = realloc(dead_devices, ((size_t)ndead + 1) * sizeof(*d));
	if (!d)
		return;		/* it stays allocated all the same */
	dead_devices = d;
	dead_devices[ndead++] = devices[i];
}

/* Put ctx in entry i or, if i < 0, in a new one (room made already). */
static void place_locked(int i, struct ibv_context *ctx)
{
	if (i < 0) {
		i = ncontexts++;
		contexts[ncontexts] = NULL;
	} else {
		bury_locked(i);
	}
	memset(&devices[i], 0, sizeof(devices[i]));
	devices[i].ctx = ctx;
	devices[i].pid = getpid();
	contexts[i] = ctx;
}

/*
 * Open every device not open yet, or open only as a dead context: all at
 * the first call, and later ones the daemon added since (a CM event may
 * name one).  All or nothing, so that a later call retries after a
 * failure; no devices at all counts as one (ENODEV, as in rdma-core).
 */
static int open_all_locked(void)
{
	struct ibv_context **opened = NULL;
	struct ibv_device **list;
	int n, i, nopened = 0, nnew = 0, ret;
	int *slot = NULL;

	list = ibv_get_device_list(&n);
	if (!list)
		return -errno;
	if (n == 0 && ncontexts == 0) {
		ret = -ENODEV;
		goto out;
	}
	opened = calloc((size_t)n + 1, sizeof(*opened));
	slot = calloc((size_t)n + 1, sizeof(*slot));
	if (!opened || !slot) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (known_locked(list[i]) >= 0)
			continue;
		opened[nopened] = ibv_open_device(list[i]);
		if (!opened[nopened]) {
			ret = -errno;
			goto fail;
		}
		slot[nopened] = dead_locked(list[i]);
		nnew += slot[nopened] < 0;
		nopened++;
	}
	ret = grow_locked(nnew);
	if (ret < 0)
		goto fail;
	contexts[ncontexts] = NULL;
	for (i = 0; i < nopened; i++)
		place_locked(slot[i], opened[i]);
	ret = 0;
	goto out;
fail:
	while (nopened-- > 0)
		ibv_close_device(opened[nopened]);
out:
	free(opened);
	free(slot);
	/* Open contexts keep their devices alive without the list. */
	ibv_free_device_list(list);
	return ret;
}

struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **devs = NULL;
	size_t size;
	int n = 0, ret = 0;

	pthread_mutex_lock(&devices_lock);
	if (!contexts || any_dead_locked())
		ret = open_all_locked();
	if (ret == 0) {
		size = ((size_t)ncontexts + 1) * sizeof(*devs);
		devs = malloc(size);
		if (devs) {
			memcpy(devs, contexts, size);
			n = ncontexts;
		} else {
			ret = -ENOMEM;
		}
	}
	pthread_mutex_unlock(&devices_lock);
	if (num_devices)
		*num_devices = n;
	if (ret < 0)
		errno = -ret;
	return devs;
}

/* Only the array: the contexts in it belong to the CM. */
void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}

static struct cma_device *find_by_name_locked(const char *name)
{
	int i;

	for (i = 0; i < ncontexts; i++)
		if (strcmp(ibv_get_device_name(contexts[i]->device), name) == 0)
			return &devices[i];
	return NULL;
}

/* ctx's entry, live or dead: ids made on a dead one still name it. */
static struct cma_device *find_by_ctx_locked(struct ibv_context *ctx)
{
	int i;

	for (i = 0; i < ncontexts; i++)
		if (devices[i].ctx == ctx)
			return &devices[i];
	for (i = 0; i < ndead; i++)
		if (dead_devices[i].ctx == ctx)
			return &dead_devices[i];
	return NULL;
}

int cma_device_open(const char *name, struct ibv_context **ret_ctx)
{
	struct cma_device *dev;
	int ret = 0;

	pthread_mutex_lock(&devices_lock);
	dev = find_by_name_locked(name);
	if (!dev || dev->pid != getpid() || dead(dev->ctx)) {
		ret = open_all_locked();
		dev = ret < 0 ? NULL : find_by_name_locked(name);
	}
	if (dev)
		*ret_ctx = dev->ctx;
	else if (ret == 0)
		ret = -ENODEV;
	pthread_mutex_unlock(&devices_lock);
	return ret;
}

/*
 * The device's object `which`, made by make() the first time one is
 * asked for, kept while ids are on the device; NULL with *err set if
 * ctx is not one of ours or it cannot be made.
 */
static void *device_object_locked(struct ibv_context *ctx, enum dev_obj which,
				  void *(*make)(struct ibv_context *ctx), int *err)
{
	struct cma_device *dev = find_by_ctx_locked(ctx);
	void *obj = NULL;

	/* Not one of ours: a context the app opened itself. */
	*err = -EINVAL;
	if (dev) {
		if (!dev->objs[which])
			dev->objs[which] = make(ctx);
		obj = dev->objs[which];
		*err = obj ? 0 : -errno;
	}
	return obj;
}

static void *device_object(struct ibv_context *ctx, enum dev_obj which,
			   void *(*make)(struct ibv_context *ctx), int *err)
{
	void *obj;

	pthread_mutex_lock(&devices_lock);
	obj = device_object_locked(ctx, which, make, err);
	pthread_mutex_unlock(&devices_lock);
	return obj;
}

static void *make_pd(struct ibv_context *ctx)
{
	return ibv_alloc_pd(ctx);
}

/* A private XRC domain (no file), as librdmacm opens it. */
static void *make_xrcd(struct ibv_context *ctx)
{
	struct ibv_xrcd_init_attr attr = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = -1,
		.oflags = O_CREAT,
	};

	return ibv_open_xrcd(ctx, &attr);
}

int cma_device_pd(struct ibv_context *ctx, struct ibv_pd **ret_pd)
{
	int err;

	*ret_pd = device_object(ctx, DEV_PD, make_pd, &err);
	return err;
}

/* One more id on ctx's device, which then names its PD (*ret_pd). */
int cma_device_hold(struct ibv_context *ctx, struct ibv_pd **ret_pd)
{
	int err;

	pthread_mutex_lock(&devices_lock);
	*ret_pd = device_object_locked(ctx, DEV_PD, make_pd, &err);
	if (*ret_pd)
		find_by_ctx_locked(ctx)->nids++;
	pthread_mutex_unlock(&devices_lock);
	return err;
}

/*
 * An id leaves ctx's device.  After the last, the PD and XRC domain go;
 * one the app still uses (EBUSY) stays its own, and the next id gets a
 * new one, as rdma-core's does.
 */
void cma_device_drop(struct ibv_context *ctx)
{
	struct ibv_xrcd *xrcd = NULL;
	struct ibv_pd *pd = NULL;
	struct cma_device *dev;

	pthread_mutex_lock(&devices_lock);
	dev = find_by_ctx_locked(ctx);
	if (dev && dev->nids > 0 && --dev->nids == 0) {
		pd = dev->objs[DEV_PD];
		xrcd = dev->objs[DEV_XRCD];
		dev->objs[DEV_PD] = dev->objs[DEV_XRCD] = NULL;
	}
	pthread_mutex_unlock(&devices_lock);
	if (xrcd)
		(void)ibv_close_xrcd(xrcd);
	if (pd)
		(void)ibv_dealloc_pd(pd);
}

/* For XRC_RECV ids' QPs and SRQs when the caller names no domain. */
int cma_device_xrcd(struct ibv_context *ctx, struct ibv_xrcd **ret_xrcd)
{
	int err;

	*ret_xrcd = device_object(ctx, DEV_XRCD, make_xrcd, &err);
	return err;
}

/* A byte, as connection parameters carry them. */
static uint8_t clamp_u8(int v)
{
	return v > 0xff ? 0xff : v < 0 ? 0 : (uint8_t)v;
}

int cma_device_rd_atom(struct ibv_context *ctx, uint8_t *max_resp,
		       uint8_t *max_init)
{
	struct ibv_device_attr attr;
	struct cma_device *dev;
	uint8_t resp = 0, init = 0;
	int ret = 0;

	pthread_mutex_lock(&devices_lock);
	dev = find_by_ctx_locked(ctx);
	if (dev && dev->have_attr) {
		resp = dev->max_resp;
		init = dev->max_init;
	} else {
		ret = -ibv_query_device(ctx, &attr);
		if (ret == 0) {
			resp = clamp_u8(attr.max_qp_rd_atom);
			init = clamp_u8(attr.max_qp_init_rd_atom);
		}
		if (ret == 0 && dev) {
			dev->max_resp = resp;
			dev->max_init = init;
			dev->have_attr = true;
		}
	}
	pthread_mutex_unlock(&devices_lock);
	*max_resp = resp;
	*max_init = init;
	return ret;
}
