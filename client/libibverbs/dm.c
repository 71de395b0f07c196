/*
 * Device memory (ibv_alloc_dm(3)): on a NIC, memory of the adapter that
 * the host reaches only through ibv_memcpy_to_dm/from_dm and that MRs
 * registered with ibv_reg_dm_mr expose, zero-based, to RDMA.  Our adapter
 * is the engine, which reaches this process's memory anyway: device memory
 * is a mapping of a memory file the daemon makes for the allocation, that
 * only these calls touch, and its MRs are ordinary registrations of it
 * whose addresses are offsets (IBV_ACCESS_ZERO_BASED, which the daemon
 * honours for local and remote access).  Each allocation is limited by
 * max_dm_size.  Another process sharing the context (ibv_import_device)
 * imports it by its handle (ibv_import_dm(3)) and maps the same file.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "ibverbsd.pb-c.h"
#include "ibvd_verbs.h"

/* An allocation is page-aligned: the alignment asked for is at most that. */
#define DM_MAX_LOG_ALIGN	12

static pthread_mutex_t dm_lock = PTHREAD_MUTEX_INITIALIZER;

static struct ibvc_dm *to_ibvc_dm(struct ibv_dm *dm)
{
	return container_of(dm, struct ibvc_dm, dm);
}

static bool dm_range_ok(const struct ibvc_dm *dm, uint64_t off, size_t len)
{
	return off <= dm->len && len <= dm->len - off;
}

static int memcpy_to_dm(struct ibv_dm *ibdm, uint64_t off, const void *src,
			size_t len)
{
	struct ibvc_dm *dm = to_ibvc_dm(ibdm);

	if (!dm_range_ok(dm, off, len) || (len && !src))
		return EINVAL;
	memcpy((uint8_t *)dm->base + off, src, len);
	return 0;
}

static int memcpy_from_dm(void *dst, struct ibv_dm *ibdm, uint64_t off,
			  size_t len)
{
	struct ibvc_dm *dm = to_ibvc_dm(ibdm);

	if (!dm_range_ok(dm, off, len) || (len && !dst))
		return EINVAL;
	memcpy(dst, (const uint8_t *)dm->base + off, len);
	return 0;
}

static int dm_limit(struct ibv_context *ctx, uint64_t *max)
{
	struct ibv_device_attr_ex ex;
	int ret = ibvc_query_device_ex_op(ctx, NULL, &ex, sizeof(ex));

	if (ret)
		return -ret;
	*max = ex.max_dm_size;
	return 0;
}

static size_t map_len(size_t len)
{
	long page = sysconf(_SC_PAGESIZE);

	return (len + (size_t)page - 1) & ~((size_t)page - 1);
}

/*
 * The daemon's answer to ALLOC_DM or IMPORT_DM: the memory's fd, mapped
 * into a new ibvc_dm.  The mapping is ours alone to use (memcpy_to/from_dm
 * and our MRs), and, like the adapter's memory, not the child's after fork.
 */
static int dm_map(struct ibv_context *ctx, const Ibvd__DmReply *reply, int fd,
		  struct ibvc_dm **ret_dm)
{
	struct ibvc_dm *dm;
	int ret;

	if (!reply->length || reply->length > SIZE_MAX)
		return -EPROTO;
	dm = calloc(1, sizeof(*dm));
	if (!dm)
		return -ENOMEM;
	dm->len = (size_t)reply->length;
	dm->base = mmap(NULL, map_len(dm->len), PROT_READ | PROT_WRITE,
			MAP_SHARED, fd, 0);
	if (dm->base == MAP_FAILED) {
		ret = -errno;
		free(dm);
		return ret;
	}
	madvise(dm->base, map_len(dm->len), MADV_DONTFORK);
	dm->dm.context = ctx;
	dm->dm.memcpy_to_dm = memcpy_to_dm;
	dm->dm.memcpy_from_dm = memcpy_from_dm;
	dm->dm.handle = reply->handle;
	*ret_dm = dm;
	return 0;
}

/* ALLOC_DM or IMPORT_DM (req), then the mapping of what came back. */
static int dm_request(struct ibv_context *ctx, uint16_t type,
		      const ProtobufCMessage *req, struct ibvc_dm **ret_dm)
{
	Ibvd__DmReply *reply = NULL;
	unsigned int nfds = 1;
	int fd = -1, ret;

	ret = ibvd_conn_call(ibvc_conn_of(ctx), type, req,
			     &ibvd__dm_reply__descriptor,
			     (ProtobufCMessage **)&reply, &fd, &nfds);
	if (ret < 0)
		return ret;
	ret = nfds == 1 ? dm_map(ctx, reply, fd, ret_dm) : -EPROTO;
	if (ret < 0 && type == IBVD_MSG_ALLOC_DM)
		ibvc_destroy_handle(ctx, IBVD_MSG_FREE_DM, reply->handle);
	if (nfds == 1)
		close(fd);
	ibvd__dm_reply__free_unpacked(reply, NULL);
	return ret;
}

static int alloc_dm(struct ibv_context *ctx, const struct ibv_alloc_dm_attr *attr,
		    struct ibvc_dm **ret_dm)
{
	Ibvd__AllocDm req = IBVD__ALLOC_DM__INIT;
	uint64_t max = 0;
	int ret;

	if (!ctx || !attr || attr->comp_mask || !attr->length ||
	    attr->log_align_req > DM_MAX_LOG_ALIGN)
		return -EINVAL;
	ret = dm_limit(ctx, &max);
	if (ret < 0)
		return ret;
	if (attr->length > max)
		return -ENOMEM;
	req.length = attr->length;
	return dm_request(ctx, IBVD_MSG_ALLOC_DM, &req.base, ret_dm);
}

struct ibv_dm *ibvc_alloc_dm_op(struct ibv_context *ctx,
				struct ibv_alloc_dm_attr *attr)
{
	struct ibvc_dm *dm = NULL;
	int ret = alloc_dm(ctx, attr, &dm);

	return ret < 0 ? ibvc_null_ret(ret) : &dm->dm;
}

static void dm_unmap(struct ibvc_dm *dm)
{
	munmap(dm->base, map_len(dm->len));
	free(dm);
}

/*
 * While an MR is registered on it, device memory stays (EBUSY).  Freed
 * through an import, it is freed for every process, as the kernel's
 * handle would be: the others' mappings stay theirs until they let go.
 */
int ibvc_free_dm_op(struct ibv_dm *ibdm)
{
	struct ibvc_dm *dm;
	bool busy;
	int ret;

	if (!ibdm)
		return EINVAL;
	dm = to_ibvc_dm(ibdm);
	pthread_mutex_lock(&dm_lock);
	busy = dm->nmrs > 0;
	pthread_mutex_unlock(&dm_lock);
	if (busy)
		return ibvc_errno_ret(-EBUSY);
	ret = ibvc_destroy_handle(ibdm->context, IBVD_MSG_FREE_DM, ibdm->handle);
	if (ret < 0)
		return ibvc_errno_ret(ret);
	dm_unmap(dm);
	return 0;
}

/* ibv_import_dm(3): device memory of a shared context, by handle. */
struct ibv_dm *ibv_import_dm(struct ibv_context *ctx, uint32_t dm_handle)
{
	Ibvd__Handle req = IBVD__HANDLE__INIT;
	struct ibvc_dm *dm = NULL;
	int ret;

	if (!ctx)
		return ibvc_null_ret(-EINVAL);
	req.handle = dm_handle;
	ret = dm_request(ctx, IBVD_MSG_IMPORT_DM, &req.base, &dm);
	return ret < 0 ? ibvc_null_ret(ret) : &dm->dm;
}

/*
 * ibv_unimport_dm(3): this process lets go; the memory stays the
 * context's.  MRs still on it keep the mapping until the last goes.
 */
void ibv_unimport_dm(struct ibv_dm *ibdm)
{
	struct ibvc_dm *dm;
	bool busy;

	if (!ibdm)
		return;
	dm = to_ibvc_dm(ibdm);
	pthread_mutex_lock(&dm_lock);
	busy = dm->nmrs > 0;
	dm->let_go = true;
	pthread_mutex_unlock(&dm_lock);
	if (!busy)
		dm_unmap(dm);
}

void ibvc_dm_put(struct ibvc_dm *dm)
{
	bool last;

	pthread_mutex_lock(&dm_lock);
	last = --dm->nmrs == 0 && dm->let_go;
	pthread_mutex_unlock(&dm_lock);
	if (last)
		dm_unmap(dm);
}

static int reg_dm_mr(struct ibv_pd *pd, struct ibvc_dm *dm, uint64_t off,
		     size_t len, unsigned int access, struct ibv_mr **ret_mr)
{
	struct ibvc_mr *imr;
	int ret;

	/* ibv_reg_dm_mr(3): device memory is only ever zero-based */
	if (!pd || !(access & IBV_ACCESS_ZERO_BASED) || !len ||
	    !dm_range_ok(dm, off, len))
		return -EINVAL;
	ret = ibvc_reg_mr(pd, (uint8_t *)dm->base + off, len, 0, access, ret_mr);
	if (ret < 0)
		return ret;
	/* as other providers report a zero-based MR: addresses from 0 */
	(*ret_mr)->addr = NULL;
	imr = container_of(*ret_mr, struct ibvc_mr, mr);
	imr->dm = dm;
	pthread_mutex_lock(&dm_lock);
	dm->nmrs++;
	pthread_mutex_unlock(&dm_lock);
	return 0;
}

struct ibv_mr *ibvc_reg_dm_mr_op(struct ibv_pd *pd, struct ibv_dm *ibdm,
				 uint64_t dm_offset, size_t length,
				 unsigned int access)
{
	struct ibv_mr *mr = NULL;
	int ret = ibdm ? reg_dm_mr(pd, to_ibvc_dm(ibdm), dm_offset, length,
				   access, &mr) : -EINVAL;

	return ret < 0 ? ibvc_null_ret(ret) : mr;
}
