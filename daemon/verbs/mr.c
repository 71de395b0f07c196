/*
 * Memory regions: REG_MR, REREG_MR, DEREG_MR.
 *
 * Registration validates like the kernel (access combinations, sizes, the
 * range mapped with the permissions the access needs), charges the pages
 * spanned to the client process's RLIMIT_MEMLOCK, and gives the MR a
 * random key.  The engine reaches the bytes through the context's
 * /proc/self/mem fd (IBVD_MR_TIER_MEMFD); nothing is pinned or prefaulted,
 * since that fd works on whatever the address maps to when it is used.
 *
 * So every MR is on-demand underneath, and IBV_ACCESS_ON_DEMAND only drops
 * what emulates pinning: the range need not be mapped yet, and nothing is
 * charged to RLIMIT_MEMLOCK or the tenant's memlock quota.  An implicit
 * on-demand MR (address 0, length SIZE_MAX) covers the whole address
 * space.  A page that is not mapped when an operation needs it fails that
 * operation (a protection error), as a NIC's unresolvable fault would.
 *
 * IBV_ACCESS_ZERO_BASED makes the MR's iova 0: local and remote addresses
 * are offsets into it (device memory's MRs, client/libibverbs/dm.c).
 *
 * REG_MR_SHARED and REREG_MR_SHARED are the same with an fd of the file
 * the client's range is a shared mapping of: the MR then gets a mapping
 * of its own (mr/map.c, IBVD_MR_TIER_MAPPED) if it can have one.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "context.h"
#include "frame.h"
#include "ibverbsd.pb-c.h"
#include "log.h"
#include "server/call.h"
#include "server/session.h"
#include "tenant/tenant.h"
#include "util.h"
#include "verbs.h"

/* Access bits a registration may carry; the optional range is ignored. */
#define MR_ACCESS_KNOWN	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | \
			 IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |	    \
			 IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB)

/* Bits that need the pages writable (the kernel pins them for write). */
#define MR_ACCESS_WRITABLE	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
				 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND)

/* Check access flags; returns them without the optional bits. */
static int check_access(struct ibvd_call *call, uint32_t access,
			uint32_t *ret)
{
	access &= ~(uint32_t)IBV_ACCESS_OPTIONAL_RANGE;
	if (access & ~(uint32_t)MR_ACCESS_KNOWN)
		return ibvd_call_error(call, -EINVAL, "unknown access bits %#x",
				       access & ~(uint32_t)MR_ACCESS_KNOWN);
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return ibvd_call_error(call, -EINVAL,
				       "remote write or atomic access needs local write");
	*ret = access;
	return 0;
}

/*
 * Check a range: non-empty, within max_mr_size, no wrap-around.  A
 * zero-based MR (iova 0 whatever the address, as device memory's are)
 * skips the page-offset rule: its offsets are not addresses.
 */
static int check_range(struct ibvd_call *call, uint64_t addr, uint64_t len,
		       uint64_t iova, bool zero_based)
{
	struct ibvd_limits lim;
	uint64_t psz = (uint64_t)sysconf(_SC_PAGESIZE);

	ibvd_ctx_limits(ibvd_call_ctx(call), &lim);
	if (len == 0 || len > lim.max_mr_size)
		return ibvd_call_error(call, -EINVAL,
				       "length %" PRIu64 " outside 1..%" PRIu64,
				       len, lim.max_mr_size);
	if (addr + len < addr || iova + len < iova)
		return ibvd_call_error(call, -EINVAL, "range wraps around");
	/* As the kernel: the iova keeps the address's offset in its page. */
	if (!zero_based && ((addr ^ iova) & (psz - 1)))
		return ibvd_call_error(call, -EINVAL,
				       "iova and address differ in page offset");
	return 0;
}

/* What a registration (or a reregistration) asks for, checked. */
struct mr_spec {
	struct ibvd_pd *pd;
	struct ibvd_mem *mem;	/* the process whose memory it is */
	uint64_t addr, length, iova;
	uint32_t access;
	uint64_t pages;		/* to charge */
};

/* The whole address space, on demand (ibv_reg_mr(3), "implicit ODP"). */
static bool spec_implicit(const struct mr_spec *sp)
{
	return (sp->access & IBV_ACCESS_ON_DEMAND) && sp->addr == 0 &&
	       sp->length == UINT64_MAX;
}

static int check_implicit(struct ibvd_call *call, const struct mr_spec *sp)
{
	if (sp->iova != 0)
		return ibvd_call_error(call, -EINVAL,
				       "an implicit on-demand MR has iova 0");
	return 0;
}

/*
 * Validate spec's range (against the client's mappings too if check_maps,
 * unless on demand) and charge its pages (none on demand), replacing
 * `release` pages of an old registration.
 */
static int spec_admit(struct ibvd_call *call, struct ibvd_mem *mem,
		      struct mr_spec *sp, uint64_t release, bool check_maps)
{
	bool odp = sp->access & IBV_ACCESS_ON_DEMAND;
	int ret;

	/* zero-based: remote addresses are offsets into the MR */
	if (sp->access & IBV_ACCESS_ZERO_BASED)
		sp->iova = 0;
	ret = spec_implicit(sp) ? check_implicit(call, sp) :
	      check_range(call, sp->addr, sp->length, sp->iova,
			  sp->access & IBV_ACCESS_ZERO_BASED);
	if (ret < 0)
		return ret;
	ret = check_maps && !odp ?
	      ibvd_mem_check_range(call, mem, sp->addr, sp->length,
				   sp->access & MR_ACCESS_WRITABLE) : 0;
	if (ret < 0)
		return ret;
	sp->pages = odp ? 0 : ibvd_mem_pages(sp->addr, sp->length);
	return ibvd_mem_charge(call, mem, sp->pages, release);
}

/* The account ctx's objects are charged to. */
static struct ibvd_tenant_dev *ctx_account(const struct ibvd_context *ctx)
{
	return ctx->handles.charge_owner;
}

/*
 * The MR of sp its own mapping of the file that came with the request, at
 * file_offset, if it can have one (not on demand: those are not charged,
 * and the charge is what bounds the daemon's mappings).  No mapping is
 * no error: the engine uses the /proc/self/mem tier then.
 */
static void spec_map(struct ibvd_call *call, const struct mr_spec *sp,
		     uint64_t file_offset, struct ibvd_mr_mapping *m)
{
	int fd = ibvd_call_take_fd(call, 0);
	int ret;

	*m = (struct ibvd_mr_mapping){ 0 };
	if (fd < 0)
		return;
	ret = sp->access & IBV_ACCESS_ON_DEMAND ? -EOPNOTSUPP :
	      ibvd_mr_map_file(ctx_account(ibvd_call_ctx(call))->tenant, fd,
			       file_offset, sp->length,
			       sp->access & IBV_ACCESS_LOCAL_WRITE, m);
	/* remote access may be granted to a peer's library: keep the file */
	if (ret == 0 && (sp->access & (IBV_ACCESS_REMOTE_READ |
				       IBV_ACCESS_REMOTE_WRITE))) {
		m->fd = fd;
		m->keeps_fd = true;
		m->fd_uid = call->session->cred.uid;
	} else {
		ibvd_frame_close_fd(fd);	/* the client's: may block */
	}
	if (ret < 0)
		log_debug("MR range %#" PRIx64 "+%" PRIu64 " not mapped: %s",
			  sp->addr, sp->length, strerror(-ret));
}

static int reply_keys(struct ibvd_call *call, const struct ibvd_mr *mr)
{
	Ibvd__RegMrReply reply = IBVD__REG_MR_REPLY__INIT;

	reply.handle = mr->handle;
	reply.lkey = mr->lkey;
	reply.rkey = mr->rkey;
	return ibvd_call_reply(call, &reply.base, NULL, 0);
}

static struct ibvd_mr *mr_new(struct ibvd_context *ctx, const struct mr_spec *sp)
{
	struct ibvd_mr *mr = calloc(1, sizeof(*mr));

	if (!mr)
		return NULL;
	mr->ctx = ctx;
	mr->pd = sp->pd;
	mr->access = sp->access;
	mr->addr = sp->addr;
	mr->length = sp->length;
	mr->iova = sp->iova;
	mr->pinned = sp->pages * (uint64_t)sysconf(_SC_PAGESIZE);
	mr->tier = IBVD_MR_TIER_MEMFD;
	mr->mem = sp->mem;
	return mr;
}

/* Make mr visible: handle, keys, engine registry; the caller may undo. */
static int mr_publish(struct ibvd_context *ctx, struct ibvd_mr *mr)
{
	int ret;

	ret = ibvd_obj_add(ctx, IBVD_OBJ_MR, mr, &mr->handle);
	if (ret < 0)
		return ret;
	ibvd_objects_write_lock();
	ret = ibvd_mr_register(mr);
	ibvd_objects_write_unlock();
	if (ret < 0) {
		ibvd_handle_remove(&ctx->handles, mr->handle, IBVD_OBJ_MR);
		return ret;
	}
	ibvd_mem_get(mr->mem);
	mr->pd->users++;
	return 0;
}

static int reg_mr(struct ibvd_call *call, bool shared)
{
	const Ibvd__RegMr *req = (const Ibvd__RegMr *)call->msg;
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	struct mr_spec sp = { .addr = req->addr, .length = req->length,
			      .iova = req->iova };
	struct ibvd_mr_mapping map = { 0 };
	struct ibvd_mr *mr;
	int ret;

	sp.pd = ibvd_handle_lookup(&ctx->handles, req->pd, IBVD_OBJ_PD);
	if (!sp.pd)
		return ibvd_call_error(call, -EINVAL, "no PD %#x", req->pd);
	sp.mem = ibvd_call_mem(call);
	if (!sp.mem)
		return ibvd_call_error(call, -EPERM, "ATTACH_MEMORY must come first");
	ret = check_access(call, req->access, &sp.access);
	if (ret < 0)
		return ret;
	ret = spec_admit(call, sp.mem, &sp, 0, true);
	if (ret < 0)
		return ret;
	if (shared)
		spec_map(call, &sp, req->file_offset, &map);
	mr = mr_new(ctx, &sp);
	if (mr)
		ibvd_mr_mapping_install(mr, &map);
	ret = mr ? mr_publish(ctx, mr) : -ENOMEM;
	if (ret < 0) {
		ibvd_mem_uncharge(sp.mem, sp.pages);
		ibvd_mr_mapping_drop(&map);
		if (mr)
			ibvd_mr_mapping_install(mr, &map);
		free(mr);
		return ibvd_call_error(call, ret, "cannot create the MR");
	}
	ret = reply_keys(call, mr);
	if (ret < 0 && ibvd_call_ctx(call)) {
		ibvd_objects_write_lock();
		ibvd_mr_destroy(mr);
		ibvd_objects_write_unlock();
	}
	return ret;
}

int ibvd_req_reg_mr(struct ibvd_call *call)
{
	return reg_mr(call, false);
}

int ibvd_req_reg_mr_shared(struct ibvd_call *call)
{
	return reg_mr(call, true);
}

/* The objects lock is held for writing (the engine looks MRs up). */
void ibvd_mr_destroy(struct ibvd_mr *mr)
{
	uint64_t psz = (uint64_t)sysconf(_SC_PAGESIZE);
	struct ibvd_mr_mapping none = { 0 };

	/* no peer's library copies to or from it past here (lease.h) */
	if (mr->granted)
		ibvd_direct_revoke_into(mr->ctx);
	ibvd_mr_unregister(mr);
	ibvd_mr_mapping_install(mr, &none);
	ibvd_handle_remove(&mr->ctx->handles, mr->handle, IBVD_OBJ_MR);
	ibvd_mem_uncharge(mr->mem, mr->pinned / psz);
	ibvd_mem_put(mr->mem);
	mr->pd->users--;
	free(mr);
}

/*
 * EBUSY while a memory window is bound to mr.  Engine threads bind under
 * the read lock, so the answer is final only under the write lock.
 */
static int mr_check_unbound(struct ibvd_call *call, const struct ibvd_mr *mr)
{
	unsigned int n = __atomic_load_n(&mr->mw_binds, __ATOMIC_RELAXED);

	if (n)
		return ibvd_call_error(call, -EBUSY,
				       "MR %#x has %u windows bound",
				       mr->handle, n);
	return 0;
}

int ibvd_req_dereg_mr(struct ibvd_call *call)
{
	const Ibvd__Handle *req = (const Ibvd__Handle *)call->msg;
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	struct ibvd_mr *mr = ibvd_handle_lookup(&ctx->handles, req->handle,
						IBVD_OBJ_MR);
	int ret;

	if (!mr)
		return ibvd_call_error(call, -EINVAL, "no MR %#x", req->handle);
	/*
	 * As rdma-core's providers do: a bound window keeps its MR, so the
	 * engine never finds a window pointing at freed memory.  Under the
	 * write lock no engine thread is binding meanwhile.
	 */
	ibvd_objects_write_lock();
	ret = mr_check_unbound(call, mr);
	if (ret == 0)
		ibvd_mr_destroy(mr);
	ibvd_objects_write_unlock();
	return ret;
}

/* The registration mr would have after a REREG_MR, from its flags. */
static int rereg_spec(struct ibvd_call *call, const Ibvd__ReregMr *req,
		      const struct ibvd_mr *mr, struct mr_spec *sp)
{
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	int ret;

	if (!req->flags || (req->flags & ~(uint32_t)IBV_REREG_MR_FLAGS_SUPPORTED))
		return ibvd_call_error(call, -EINVAL, "bad rereg flags %#x",
				       req->flags);
	sp->pd = mr->pd;
	sp->addr = mr->addr;
	sp->length = mr->length;
	sp->iova = mr->iova;
	sp->access = mr->access;
	if (req->flags & IBV_REREG_MR_CHANGE_PD) {
		sp->pd = ibvd_handle_lookup(&ctx->handles, req->pd, IBVD_OBJ_PD);
		if (!sp->pd)
			return ibvd_call_error(call, -EINVAL, "no PD %#x", req->pd);
	}
	if (req->flags & IBV_REREG_MR_CHANGE_ACCESS) {
		ret = check_access(call, req->access, &sp->access);
		if (ret < 0)
			return ret;
	}
	sp->mem = mr->mem;
	if ((req->flags & IBV_REREG_MR_CHANGE_TRANSLATION) &&
	    ibvd_call_mem(call) != mr->mem)
		return ibvd_call_error(call, -EPERM,
				       "MR %#x is in the memory of another process "
				       "sharing the context", mr->handle);
	if (req->flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		sp->addr = req->addr;
		sp->length = req->length;
		sp->iova = req->addr;	/* ibv_rereg_mr has no separate iova */
	}
	return 0;
}

/*
 * Whether a rereg to sp keeps mr's mapping: not with a new range (that
 * brings its own fd, or none), nor on demand, nor when the MR becomes
 * writable and the mapping is not.
 */
static bool rereg_keeps_map(const struct ibvd_mr *mr, const struct mr_spec *sp,
			    uint32_t flags)
{
	if (!mr->map || (flags & IBV_REREG_MR_CHANGE_TRANSLATION))
		return false;
	if (sp->access & IBV_ACCESS_ON_DEMAND)
		return false;
	return !(sp->access & IBV_ACCESS_LOCAL_WRITE) || mr->map_writable;
}

static int rereg_mr(struct ibvd_call *call, bool shared)
{
	const Ibvd__ReregMr *req = (const Ibvd__ReregMr *)call->msg;
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	uint64_t psz = (uint64_t)sysconf(_SC_PAGESIZE);
	struct ibvd_mr *mr = ibvd_handle_lookup(&ctx->handles, req->handle,
						IBVD_OBJ_MR);
	struct ibvd_mr_mapping map = { 0 };
	struct mr_spec sp;
	bool keep_map;
	int ret;

	if (!mr)
		return ibvd_call_error(call, -EINVAL, "no MR %#x", req->handle);
	ret = rereg_spec(call, req, mr, &sp);
	if (ret == 0)
		ret = mr_check_unbound(call, mr);
	if (ret < 0)
		return ret;
	/*
	 * A new range, or new access that may need writable pages, is checked
	 * against the mappings as a registration is; a new PD alone is not.
	 * Charging replaces the old pages, so a failure leaves the MR as it
	 * was.
	 */
	ret = spec_admit(call, mr->mem, &sp, mr->pinned / psz,
			 req->flags & (IBV_REREG_MR_CHANGE_TRANSLATION |
				       IBV_REREG_MR_CHANGE_ACCESS));
	if (ret < 0)
		return ret;
	keep_map = rereg_keeps_map(mr, &sp, req->flags);
	if (shared && (req->flags & IBV_REREG_MR_CHANGE_TRANSLATION))
		spec_map(call, &sp, req->file_offset, &map);
	ibvd_objects_write_lock();
	if (mr_check_unbound(call, mr) < 0) {
		ibvd_objects_write_unlock();
		ibvd_mr_mapping_drop(&map);
		/* Bound since the first check: undo spec_admit's charge. */
		ibvd_mem_restore(mr->mem, mr->pinned / psz, sp.pages);
		return ibvd_call_error(call, -EBUSY, "MR %#x got a window bound",
				       req->handle);
	}
	/* grants of the old registration end before it changes */
	if (mr->granted)
		ibvd_direct_revoke_into(mr->ctx);
	mr->granted = false;
	mr->pd->users--;
	sp.pd->users++;
	mr->pd = sp.pd;
	mr->addr = sp.addr;
	mr->length = sp.length;
	mr->iova = sp.iova;
	mr->access = sp.access;
	mr->pinned = sp.pages * psz;
	/* The old mapping goes before the engine can see the new range. */
	if (!keep_map)
		ibvd_mr_mapping_install(mr, &map);
	ibvd_objects_write_unlock();
	/* Keys stay: a NIC may change them, ours need not. */
	return reply_keys(call, mr);
}

int ibvd_req_rereg_mr(struct ibvd_call *call)
{
	return rereg_mr(call, false);
}

int ibvd_req_rereg_mr_shared(struct ibvd_call *call)
{
	return rereg_mr(call, true);
}

/* Largest sg_list one ADVISE_MR takes: it is only checked, never kept. */
#define ADVISE_MAX_SGES	4096

/* What the kernel counts as an MR that may be written (ib_access_writable). */
#define MR_WRITABLE	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND)

/*
 * One range of an ADVISE_MR: in an on-demand MR of this context's pd
 * (EFAULT, as ibv_advise_mr(3) answers an invalid lkey or a range out of
 * the MR's bounds), which must be writable to be prefetched for writing
 * (EPERM, as the kernel answers).
 */
static int advise_sge(struct ibvd_call *call, const struct ibvd_pd *pd,
		      uint32_t advice, const Ibvd__Sge *sge)
{
	/* The control thread is the registry's only writer: no lock needed. */
	const struct ibvd_mr *mr = ibvd_mr_by_lkey(sge->lkey);

	if (!mr || mr->ctx != ibvd_call_ctx(call) || mr->pd != pd)
		return ibvd_call_error(call, -EFAULT,
				       "lkey %#x is not an MR of this PD", sge->lkey);
	if (!(mr->access & IBV_ACCESS_ON_DEMAND))
		return ibvd_call_error(call, -EFAULT,
				       "MR %#x is not on demand", sge->lkey);
	/* lkey addresses are in the MR's iova space (engine/wqe.c) */
	if (!ibvd_in_range(mr->iova, mr->length, sge->addr, sge->length))
		return ibvd_call_error(call, -EFAULT,
				       "range %#" PRIx64 "+%u outside MR %#x",
				       sge->addr, sge->length, sge->lkey);
	if (advice == IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
	    !(mr->access & MR_WRITABLE))
		return ibvd_call_error(call, -EPERM,
				       "MR %#x is not writable: no PREFETCH_WRITE",
				       sge->lkey);
	return 0;
}

/*
 * ibv_advise_mr: every range must lie in an on-demand MR of the PD, as
 * the kernel checks.  Prefetching is then the client's own business (it
 * faults in the pages of its address space, client/libibverbs/mr.c): the
 * engine needs nothing prepared.
 */
int ibvd_req_advise_mr(struct ibvd_call *call)
{
	const Ibvd__AdviseMr *req = (const Ibvd__AdviseMr *)call->msg;
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	const struct ibvd_pd *pd = ibvd_handle_lookup(&ctx->handles, req->pd,
						      IBVD_OBJ_PD);
	size_t i;
	int ret;

	if (!pd)
		return ibvd_call_error(call, -EINVAL, "no PD %#x", req->pd);
	if (req->advice > IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return ibvd_call_error(call, -EINVAL, "unknown advice %u",
				       req->advice);
	if (req->flags & ~(uint32_t)IB_UVERBS_ADVISE_MR_FLAG_FLUSH)
		return ibvd_call_error(call, -EINVAL, "unknown flags %#x",
				       req->flags);
	if (!req->n_sges || req->n_sges > ADVISE_MAX_SGES)
		return ibvd_call_error(call, -EINVAL, "%zu ranges, not 1..%u",
				       req->n_sges, ADVISE_MAX_SGES);
	for (i = 0; i < req->n_sges; i++) {
		ret = advise_sge(call, pd, req->advice, req->sges[i]);
		if (ret < 0)
			return ret;
	}
	return 0;
}
