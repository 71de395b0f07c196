/*
 * Memory regions.  The engine reaches the app's memory through the app's
 * own /proc/self/mem, which the context hands to the daemon once, before
 * its first registration (ATTACH_MEMORY, DESIGN.md §3.5): whatever the app
 * registers (heap, stack, file or anonymous mappings, huge pages) stays
 * where it is, and one-sided operations need nothing from the app.
 *
 * ibv_reg_mr is also a macro in verbs.h that picks, at the app's compile
 * time, between ibv_reg_mr@@1.1 and ibv_reg_mr_iova2 (abi.md §5.5): all
 * entry points end in one function and behave the same for iova == addr.
 */
#include "config.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/mman.h>

#include "ibverbsd.pb-c.h"
#include "ibvd_verbs.h"

/* Function-like macros in verbs.h that would rewrite our definitions. */
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

/* The access bits we implement; optional ones are dropped, not refused. */
#define MR_ACCESS_SUPPORTED						\
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |		\
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |		\
	 IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |			\
	 IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB)

/*
 * Send the process's memory to the daemon, once per context: its mem,
 * and its maps for the daemon's registration checks.  Opened here, by the
 * process itself, they need no privilege over it on the daemon's side.
 */
static int attach_memory(struct ibvc_context *ictx)
{
	Ibvd__AttachMemory req = IBVD__ATTACH_MEMORY__INIT;
	int fds[2], ret;

	fds[0] = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	if (fds[0] < 0)
		return -errno;
	fds[1] = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fds[1] < 0) {
		ret = -errno;
		close(fds[0]);
		return ret;
	}
	req.pid = (uint32_t)getpid();
	ret = ibvd_conn_call_fds(&ictx->conn, IBVD_MSG_ATTACH_MEMORY, &req.base,
				 fds, 2, NULL, NULL, NULL, NULL);
	/* The daemon has its own copies now; ours would only leak. */
	close(fds[0]);
	close(fds[1]);
	return ret;
}

static int ensure_memory_attached(struct ibvc_context *ictx)
{
	pthread_mutex_t *mutex = &ictx->vctx.context.mutex;
	int ret = 0;

	pthread_mutex_lock(mutex);
	if (!ictx->mem_attached) {
		ret = attach_memory(ictx);
		ictx->mem_attached = ret == 0;
	}
	pthread_mutex_unlock(mutex);
	return ret;
}

/* Remote write or atomic access needs local write (ibv_reg_mr(3)). */
static int check_access(unsigned int access)
{
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	if (access & ~(MR_ACCESS_SUPPORTED | IBV_ACCESS_OPTIONAL_RANGE))
		return -EINVAL;
	return 0;
}

/*
 * The file behind [addr, addr + length) if the app maps one shared and
 * the MR is pinned (on-demand MRs are never mapped by the daemon): -1
 * otherwise.  REG_MR_SHARED then lets the daemon map it (backing.c).
 */
static int shared_backing(const void *addr, size_t length, unsigned int access,
			  uint64_t *offset)
{
	int fd;

	if (access & IBV_ACCESS_ON_DEMAND)
		return -1;
	if (ibvc_backing_file(addr, length, access & IBV_ACCESS_LOCAL_WRITE,
			      &fd, offset) < 0)
		return -1;
	return fd;
}

static int reg_on_daemon(struct ibvc_mr *imr, uint64_t iova, unsigned int access)
{
	struct ibv_mr *mr = &imr->mr;
	Ibvd__RegMr req = IBVD__REG_MR__INIT;
	Ibvd__RegMrReply *reply = NULL;
	int fd, ret;

	req.pd = mr->pd->handle;
	req.addr = (uintptr_t)mr->addr;
	req.length = mr->length;
	req.iova = iova;
	req.access = access & ~IBV_ACCESS_OPTIONAL_RANGE;
	fd = shared_backing(mr->addr, mr->length, access, &req.file_offset);
	ret = ibvd_conn_call_fds(ibvc_conn_of(mr->context),
				 fd < 0 ? IBVD_MSG_REG_MR : IBVD_MSG_REG_MR_SHARED,
				 &req.base, &fd, fd < 0 ? 0 : 1,
				 &ibvd__reg_mr_reply__descriptor,
				 (ProtobufCMessage **)&reply, NULL, NULL);
	if (fd >= 0)
		close(fd);
	if (ret < 0)
		return ret;
	mr->handle = reply->handle;
	mr->lkey = reply->lkey;
	mr->rkey = reply->rkey;
	ibvd__reg_mr_reply__free_unpacked(reply, NULL);
	return 0;
}

int ibvc_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
		unsigned int access, struct ibv_mr **ret_mr)
{
	struct ibvc_mr *imr;
	struct ibv_mr *mr;
	int ret;

	if (!pd)
		return -EINVAL;
	ret = check_access(access);
	if (ret < 0)
		return ret;
	ret = ensure_memory_attached(to_ibvc_context(pd->context));
	if (ret < 0)
		return ret;
	imr = calloc(1, sizeof(*imr));
	if (!imr)
		return -ENOMEM;
	mr = &imr->mr;
	mr->context = pd->context;
	mr->pd = pd;
	mr->addr = addr;
	mr->length = length;
	imr->access = access;
	ret = reg_on_daemon(imr, iova, access);
	if (ret < 0) {
		free(imr);
		return ret;
	}
	/*
	 * Addressed by iova elsewhere (or, zero-based, by offset): the
	 * direct transport copies only where addresses are this process's.
	 */
	imr->tabled = iova == (uintptr_t)addr && !(access & IBV_ACCESS_ZERO_BASED);
	if (imr->tabled)
		ibvc_mrtab_add(to_ibvc_context(pd->context), mr, access);
	ibvc_pd_hold(pd);
	*ret_mr = mr;
	return 0;
}

static struct ibv_mr *reg_mr_public(struct ibv_pd *pd, void *addr,
				    size_t length, uint64_t iova,
				    unsigned int access)
{
	struct ibv_mr *mr = NULL;
	int ret = ibvc_reg_mr(pd, addr, length, iova, access, &mr);

	return ret < 0 ? ibvc_null_ret(ret) : mr;
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			  int access)
{
	return reg_mr_public(pd, addr, length, (uintptr_t)addr,
			     (unsigned int)access);
}

struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
			       uint64_t iova, int access)
{
	return reg_mr_public(pd, addr, length, iova, (unsigned int)access);
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
				uint64_t iova, unsigned int access)
{
	return reg_mr_public(pd, addr, length, iova, access);
}

/* ---- ibv_rereg_mr ------------------------------------------------------- */

#define REREG_FLAGS							\
	(IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD |	\
	 IBV_REREG_MR_CHANGE_ACCESS)

static int rereg_check(struct ibv_mr *mr, int flags, struct ibv_pd *pd,
		       void *addr, size_t length, int access)
{
	const struct ibvc_mr *imr;

	if (!mr || (flags & ~REREG_FLAGS))
		return -EINVAL;
	imr = container_of(mr, struct ibvc_mr, mr);
	/*
	 * rdma-core takes only MRs it registered (an imported one is
	 * another context's), and no access without CHANGE_ACCESS; the
	 * kernel refuses an MR of device memory (ib_uverbs_rereg_mr).
	 */
	if (imr->dm || imr->imported)
		return -EINVAL;
	if (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))
		return -EINVAL;
	if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!addr || !length))
		return -EINVAL;
	if ((flags & IBV_REREG_MR_CHANGE_PD) && !pd)
		return -EINVAL;
	return 0;
}

/*
 * What rdma-core passes on to the provider and the kernel refuses (no
 * flag, access rights no registration takes): the command's failure,
 * IBV_REREG_MR_ERR_CMD, whatever the provider.
 */
static int rereg_refused(int flags, int access)
{
	if (!flags)
		return -EINVAL;
	if (flags & IBV_REREG_MR_CHANGE_ACCESS)
		return check_access((unsigned int)access);
	return 0;
}

/* Ask the daemon; on success apply what changed to the app's view of mr. */
static int rereg_on_daemon(struct ibv_mr *mr, int flags, struct ibv_pd *pd,
			   void *addr, size_t length, int access)
{
	struct ibvc_mr *imr = container_of(mr, struct ibvc_mr, mr);
	Ibvd__ReregMr req = IBVD__REREG_MR__INIT;
	Ibvd__RegMrReply *reply = NULL;
	unsigned int new_access = (flags & IBV_REREG_MR_CHANGE_ACCESS) ?
				  (unsigned int)access : imr->access;
	int fd = -1, ret;

	req.handle = mr->handle;
	req.flags = (uint32_t)flags;
	req.pd = (flags & IBV_REREG_MR_CHANGE_PD) ? pd->handle : 0;
	req.addr = (uintptr_t)addr;
	req.length = length;
	req.access = (uint32_t)access & ~IBV_ACCESS_OPTIONAL_RANGE;
	/* A new range may be shared memory too (the old mapping goes). */
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION)
		fd = shared_backing(addr, length, new_access, &req.file_offset);
	/*
	 * Forgotten first: a peer's WRITE the library places (direct_recv.c)
	 * never goes by the old key, range or rights once the daemon's
	 * change is made.
	 */
	ibvc_mrtab_remove(to_ibvc_context(mr->context), mr->lkey);
	ret = ibvd_conn_call_fds(ibvc_conn_of(mr->context),
				 fd < 0 ? IBVD_MSG_REREG_MR : IBVD_MSG_REREG_MR_SHARED,
				 &req.base, &fd, fd < 0 ? 0 : 1,
				 &ibvd__reg_mr_reply__descriptor,
				 (ProtobufCMessage **)&reply, NULL, NULL);
	if (fd >= 0)
		close(fd);
	if (ret < 0) {
		/* unchanged: the daemon refused */
		if (!imr->dm && imr->tabled)
			ibvc_mrtab_add(to_ibvc_context(mr->context), mr,
				       imr->access);
		return ret;
	}
	imr->access = new_access;
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		ibvc_pd_hold(pd);
		ibvc_pd_release(mr->pd);
		mr->pd = pd;
	}
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		mr->addr = addr;
		mr->length = length;
	}
	mr->lkey = reply->lkey;
	mr->rkey = reply->rkey;
	ibvd__reg_mr_reply__free_unpacked(reply, NULL);
	/* a new range is addressed by its address (the daemon's iova) */
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION)
		imr->tabled = true;
	if (imr->access & IBV_ACCESS_ZERO_BASED)
		imr->tabled = false;
	if (!imr->dm && imr->tabled)
		ibvc_mrtab_add(to_ibvc_context(mr->context), mr, imr->access);
	return 0;
}

/*
 * ibv_rereg_mr reports failure as a negative enum ibv_rereg_mr_err_code
 * with errno set (pyverbs decodes both), not as a positive errno.
 */
int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr,
		 size_t length, int access)
{
	int ret = rereg_check(mr, flags, pd, addr, length, access);

	if (ret < 0) {
		errno = -ret;
		return IBV_REREG_MR_ERR_INPUT;
	}
	ret = rereg_refused(flags, access);
	if (ret == 0)
		ret = rereg_on_daemon(mr, flags, pd, addr, length, access);
	if (ret < 0) {
		errno = -ret;
		return IBV_REREG_MR_ERR_CMD;
	}
	return 0;
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct ibvc_mr *imr;
	int ret;

	if (!mr)
		return EINVAL;
	ibvc_mrtab_remove(to_ibvc_context(mr->context), mr->lkey);
	ret = ibvc_destroy_handle(mr->context, IBVD_MSG_DEREG_MR, mr->handle);
	if (ret < 0)
		return ibvc_errno_ret(ret);
	ibvc_pd_release(mr->pd);
	imr = container_of(mr, struct ibvc_mr, mr);
	if (imr->dm)
		ibvc_dm_put(imr->dm);
	free(imr);
	return 0;
}

/* ---- ibv_import_mr --------------------------------------------------------- */

/*
 * ibv_import_mr(3): an MR of a shared context, by handle, on pd.  Its
 * addr is not ours to know (NULL, as the man page says); its keys and
 * length are.  Its memory stays the registering process's: our work
 * requests address it by iova, as a NIC would.
 */
struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	Ibvd__ImportMr req = IBVD__IMPORT_MR__INIT;
	Ibvd__ImportMrReply *reply = NULL;
	struct ibvc_mr *imr;
	int ret;

	if (!pd)
		return ibvc_null_ret(-EINVAL);
	imr = calloc(1, sizeof(*imr));
	if (!imr)
		return ibvc_null_ret(-ENOMEM);
	req.handle = mr_handle;
	req.pd = pd->handle;
	ret = ibvd_conn_call(ibvc_conn_of(pd->context), IBVD_MSG_IMPORT_MR,
			     &req.base, &ibvd__import_mr_reply__descriptor,
			     (ProtobufCMessage **)&reply, NULL, NULL);
	if (ret < 0) {
		free(imr);
		return ibvc_null_ret(ret);
	}
	imr->mr.context = pd->context;
	imr->mr.pd = pd;
	imr->mr.handle = mr_handle;
	imr->mr.lkey = reply->lkey;
	imr->mr.rkey = reply->rkey;
	imr->mr.length = (size_t)reply->length;
	imr->access = reply->access;
	imr->imported = true;
	ibvd__import_mr_reply__free_unpacked(reply, NULL);
	ibvc_pd_hold(pd);
	return &imr->mr;
}

void ibv_unimport_mr(struct ibv_mr *mr)
{
	if (!mr)
		return;
	ibvc_pd_release(mr->pd);
	free(container_of(mr, struct ibvc_mr, mr));
}

/* ---- ibv_advise_mr -------------------------------------------------------- */

/* Populate [addr, addr + len) of our own address space (Linux 5.14+). */
static int populate(uint64_t addr, uint32_t len, bool write)
{
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ	22
#define MADV_POPULATE_WRITE	23
#endif
	uint64_t psz = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t start = addr & ~(psz - 1);
	uint64_t end = (addr + len + psz - 1) & ~(psz - 1);

	if (!len)
		return 0;
	if (madvise((void *)(uintptr_t)start, end - start,
		    write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) < 0)
		return -errno;
	return 0;
}

static int advise_on_daemon(struct ibv_pd *pd, uint32_t advice, uint32_t flags,
			    const struct ibv_sge *sg_list, uint32_t num_sge)
{
	Ibvd__AdviseMr req = IBVD__ADVISE_MR__INIT;
	Ibvd__Sge *sges, **ptrs;
	uint32_t i;
	int ret;

	sges = calloc(num_sge, sizeof(*sges));
	ptrs = calloc(num_sge, sizeof(*ptrs));
	if (!sges || !ptrs) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = 0; i < num_sge; i++) {
		ibvd__sge__init(&sges[i]);
		sges[i].addr = sg_list[i].addr;
		sges[i].length = sg_list[i].length;
		sges[i].lkey = sg_list[i].lkey;
		ptrs[i] = &sges[i];
	}
	req.pd = pd->handle;
	req.advice = advice;
	req.flags = flags;
	req.n_sges = num_sge;
	req.sges = ptrs;
	ret = ibvd_conn_call(ibvc_conn_of(pd->context), IBVD_MSG_ADVISE_MR,
			     &req.base, NULL, NULL, NULL, NULL);
out:
	free(ptrs);
	free(sges);
	return ret;
}

/*
 * The daemon checks that every range lies in an on-demand MR of pd; the
 * prefetch is then ours to do, in our own address space: the engine
 * reads and writes whatever is mapped when it needs it, so faulting the
 * pages in now is all a prefetch can save.  It stays advice: a range that
 * cannot be populated fails the call only when the app asked to wait
 * (IBV_ADVISE_MR_FLAG_FLUSH).
 */
int ibvc_advise_mr_op(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
		      uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge)
{
	bool write = advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE;
	uint32_t i;
	int ret;

	if (!pd || !num_sge || !sg_list)
		return EINVAL;
	ret = advise_on_daemon(pd, (uint32_t)advice, flags, sg_list, num_sge);
	if (ret < 0)
		return ibvc_errno_ret(ret);
	/* NO_FAULT maps only what is present: nothing to do here. */
	if (advice == IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return 0;
	for (i = 0; i < num_sge; i++) {
		ret = populate(sg_list[i].addr, sg_list[i].length, write);
		if (ret < 0 && (flags & IBV_ADVISE_MR_FLAG_FLUSH))
			return ibvc_errno_ret(ret);
	}
	return 0;
}
