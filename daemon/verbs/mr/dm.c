/*
 * Device memory: ALLOC_DM, FREE_DM, IMPORT_DM.
 *
 * On a NIC, device memory is the adapter's; every process that shares
 * the context (ibv_import_device) may import an allocation by its handle
 * and reach the same bytes (ibv_import_dm(3)).  Ours is a sealed memfd
 * that we make and hand to whoever allocates or imports it: each maps it
 * and copies in and out itself (client/libibverbs/dm.c).  We keep the fd
 * so that the memory outlives its allocator's mapping while the context
 * lives, and close it when the allocation is freed; a process that still
 * has it mapped keeps its pages, as device memory used after
 * ibv_free_dm would be undefined but harmless here.  Its pages are
 * charged to whoever touches them; an allocation is at most
 * max_dm_size, and a context holds IBVD_CTX_MAX_DMS of them (32: each
 * is a daemon fd, LIMITS.md).
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "ibverbsd.pb-c.h"
#include "ring.h"
#include "server/call.h"
#include "verbs/context.h"
#include "verbs/rings/arena.h"
#include "verbs/verbs.h"

/* A sealed memfd of len bytes rounded up to pages: nobody resizes it. */
static int dm_file(uint64_t len)
{
	return ibvd_memfd_sealed("ibvd-dm", (len + IBVD_PAGE_SIZE - 1) &
				 ~(uint64_t)(IBVD_PAGE_SIZE - 1));
}

void ibvd_dm_destroy(struct ibvd_dm *dm)
{
	ibvd_handle_remove(&dm->ctx->handles, dm->handle, IBVD_OBJ_DM);
	close(dm->fd);
	free(dm);
}

static int dm_reply(struct ibvd_call *call, const struct ibvd_dm *dm)
{
	Ibvd__DmReply reply = IBVD__DM_REPLY__INIT;

	reply.handle = dm->handle;
	reply.length = dm->length;
	return ibvd_call_reply(call, &reply.base, &dm->fd, 1);
}

int ibvd_req_alloc_dm(struct ibvd_call *call)
{
	const Ibvd__AllocDm *req = (const Ibvd__AllocDm *)call->msg;
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	struct ibvd_dm *dm;
	int ret;

	if (!req->length || req->length > IBVD_MAX_DM_SIZE)
		return ibvd_call_error(call, req->length ? -ENOMEM : -EINVAL,
				       "device memory of %llu bytes (at most %u)",
				       (unsigned long long)req->length,
				       IBVD_MAX_DM_SIZE);
	dm = calloc(1, sizeof(*dm));
	if (!dm)
		return -ENOMEM;
	dm->ctx = ctx;
	dm->length = req->length;
	dm->fd = dm_file(dm->length);
	if (dm->fd < 0) {
		ret = dm->fd;
		free(dm);
		return ibvd_call_error(call, ret, "no memory file for device memory");
	}
	ret = ibvd_obj_add(ctx, IBVD_OBJ_DM, dm, &dm->handle);
	if (ret < 0) {
		close(dm->fd);
		free(dm);
		return ibvd_call_error(call, ret, "too many device memory allocations");
	}
	ret = dm_reply(call, dm);
	/* A failed send closed the session and its context, dm included. */
	if (ret < 0 && ibvd_call_ctx(call))
		ibvd_dm_destroy(dm);
	return ret;
}

static struct ibvd_dm *dm_find(struct ibvd_call *call)
{
	const Ibvd__Handle *req = (const Ibvd__Handle *)call->msg;

	return ibvd_handle_lookup(&ibvd_call_ctx(call)->handles, req->handle,
				  IBVD_OBJ_DM);
}

int ibvd_req_free_dm(struct ibvd_call *call)
{
	struct ibvd_dm *dm = dm_find(call);

	if (!dm)
		return ibvd_call_error(call, -EINVAL, "no device memory %#x",
				       ((const Ibvd__Handle *)call->msg)->handle);
	ibvd_dm_destroy(dm);
	return 0;
}

int ibvd_req_import_dm(struct ibvd_call *call)
{
	struct ibvd_dm *dm = dm_find(call);

	if (!dm)
		return ibvd_call_error(call, -EINVAL, "no device memory %#x",
				       ((const Ibvd__Handle *)call->msg)->handle);
	return dm_reply(call, dm);
}
