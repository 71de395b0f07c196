/*
 * Device memory (ibv_alloc_dm(3)): on a NIC, memory of the adapter that
 * the host reaches only through ibv_memcpy_to_dm/from_dm and that MRs
 * registered with ibv_reg_dm_mr expose, zero-based, to RDMA.  Our adapter
 * is the engine, which reaches this process's memory anyway: device memory
 * is a private mapping of ours that only these calls touch, and its MRs
 * are ordinary registrations of it whose addresses are offsets
 * (IBV_ACCESS_ZERO_BASED, which the daemon honours for local and remote
 * access).  Each allocation is limited by max_dm_size.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

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

static int alloc_dm(struct ibv_context *ctx, const struct ibv_alloc_dm_attr *attr,
		    struct ibvc_dm **ret_dm)
{
	struct ibvc_dm *dm;
	uint64_t max;
	int ret;

	if (!ctx || !attr || attr->comp_mask || !attr->length ||
	    attr->log_align_req > DM_MAX_LOG_ALIGN)
		return -EINVAL;
	ret = dm_limit(ctx, &max);
	if (ret < 0)
		return ret;
	if (attr->length > max)
		return -ENOMEM;
	dm = calloc(1, sizeof(*dm));
	if (!dm)
		return -ENOMEM;
	dm->len = attr->length;
	dm->base = mmap(NULL, dm->len, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (dm->base == MAP_FAILED) {
		ret = -errno;
		free(dm);
		return ret;
	}
	/* the adapter's memory is not the child's after fork */
	madvise(dm->base, dm->len, MADV_DONTFORK);
	dm->dm.context = ctx;
	dm->dm.memcpy_to_dm = memcpy_to_dm;
	dm->dm.memcpy_from_dm = memcpy_from_dm;
	*ret_dm = dm;
	return 0;
}

struct ibv_dm *ibvc_alloc_dm_op(struct ibv_context *ctx,
				struct ibv_alloc_dm_attr *attr)
{
	struct ibvc_dm *dm = NULL;
	int ret = alloc_dm(ctx, attr, &dm);

	return ret < 0 ? ibvc_null_ret(ret) : &dm->dm;
}

/* While an MR is registered on it, device memory stays (EBUSY). */
int ibvc_free_dm_op(struct ibv_dm *ibdm)
{
	struct ibvc_dm *dm;
	bool busy;

	if (!ibdm)
		return EINVAL;
	dm = to_ibvc_dm(ibdm);
	pthread_mutex_lock(&dm_lock);
	busy = dm->nmrs > 0;
	pthread_mutex_unlock(&dm_lock);
	if (busy)
		return EBUSY;
	munmap(dm->base, dm->len);
	free(dm);
	return 0;
}

void ibvc_dm_put(struct ibvc_dm *dm)
{
	pthread_mutex_lock(&dm_lock);
	dm->nmrs--;
	pthread_mutex_unlock(&dm_lock);
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
