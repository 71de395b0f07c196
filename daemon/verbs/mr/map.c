/*
 * An MR's own mapping of the file behind a client's range (REG_MR_SHARED,
 * DESIGN.md §3.5 tier 1).  The client found its range backed by a file it
 * shares (a MAP_SHARED regular file, a /dev/shm or hugetlbfs file, a
 * memfd) and passed an fd of it: the daemon maps the same bytes, and the
 * engine copies into and out of them with one memcpy instead of going
 * through the client's /proc/self/mem.
 *
 * Why it is safe to take the client's word for it: the daemon maps only
 * what the fd lets it (the client's own open mode decides whether the
 * mapping may be written), only regular files (a device's mmap could do
 * anything), and a file other than the one the client maps at addr only
 * sends the MR's bytes somewhere the client could write anyway.  The
 * mapping belongs to the MR: what the client does to its own mapping
 * afterwards (unmap, remap) changes only the client's view, as with a
 * NIC's pinned pages.  A file truncated under the mapping makes the
 * missing pages SIGBUS, which the engine recovers from (engine/memory.c).
 *
 * Its cost: address space, which the memlock charge of the MR does not
 * bound when memlock is not enforced ("rlimit_memlock": "ignore", a
 * client with CAP_IPC_LOCK or no limit), and the same range registered
 * twice is mapped twice; one of the daemon's map count, which
 * vm.max_map_count (65,530 by default) bounds for everything the daemon
 * maps, rings included, while a one-page MR is cheap in memlock; and, for
 * an MR with remote access, the fd, kept so that the daemon can grant a
 * peer of the same uid the same file (common/lease.h).  So the MRs that
 * have a mapping, and their bytes, are counted: at most
 * IBVD_UID_MAX_MAPPED_MRS and IBVD_UID_MAX_MAPPED_BYTES a uid, and
 * MAPPED_MRS_MAX and MAPPED_BYTES_MAX in all (a quarter of the 128 TiB a
 * process has: the rest is for the contexts' ring arenas, 2 GiB each).
 * Whatever cannot be mapped falls back to the /proc/self/mem tier,
 * silently: the mapping is an optimisation, never a requirement.
 */
#include <config.h>

#include <errno.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "core/objects.h"
#include "frame.h"
#include "log.h"
#include "tenant/tenant.h"
#include "verbs/fdstat.h"
#include "verbs/verbs.h"

#define MAPPED_MRS_MAX		16384u
#define MAPPED_BYTES_MAX	(32ull << 40)

/* MRs with a mapping of their own, daemon-wide (control thread only). */
static unsigned int mapped_mrs;
static uint64_t mapped_bytes;

static int mapped_take(struct ibvd_tenant *t, uint64_t len)
{
	if (mapped_mrs >= MAPPED_MRS_MAX || t->mapped_mrs >= IBVD_UID_MAX_MAPPED_MRS)
		return -EMFILE;
	if (len > MAPPED_BYTES_MAX - mapped_bytes ||
	    len > IBVD_UID_MAX_MAPPED_BYTES - t->mapped_bytes)
		return -ENOMEM;
	mapped_mrs++;
	mapped_bytes += len;
	t->mapped_mrs++;
	t->mapped_bytes += len;
	return 0;
}

static void mapped_give(struct ibvd_tenant *t, uint64_t len)
{
	if (!t)
		return;
	mapped_mrs--;
	mapped_bytes -= len;
	t->mapped_mrs--;
	t->mapped_bytes -= len;
}

/* The alignment mmap needs in this file: its huge page size on hugetlbfs. */
static uint64_t map_align(const struct statx *stx)
{
	uint64_t psz = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t blk = (uint64_t)stx->stx_blksize;

	if (blk > psz && blk <= (1ull << 30) && !(blk & (blk - 1)))
		return blk;
	return psz;
}

int ibvd_mr_map_file(struct ibvd_tenant *t, int fd, uint64_t offset,
		     uint64_t length, bool writable, struct ibvd_mr_mapping *m)
{
	struct statx stx;
	uint64_t align, start, len;
	void *p;
	int ret;

	*m = (struct ibvd_mr_mapping){ 0 };
	/*
	 * The size the kernel has (fdstat.h): a stale one is a truncation
	 * after the check, which the engine survives anyway.
	 */
	ret = ibvd_fd_stat_cached(fd, STATX_TYPE | STATX_SIZE, &stx);
	if (ret < 0)
		return ret;
	if (!S_ISREG(stx.stx_mode))
		return -EINVAL;
	/* The range must lie in the file now: past its end it would fault. */
	if (length > stx.stx_size || offset > stx.stx_size - length)
		return -EINVAL;
	align = map_align(&stx);
	start = offset & ~(align - 1);
	len = (offset - start + length + align - 1) & ~(align - 1);
	if (len > SIZE_MAX || start > (uint64_t)INT64_MAX)
		return -EINVAL;
	ret = mapped_take(t, len);
	if (ret < 0)
		return ret;
	p = mmap(NULL, (size_t)len, PROT_READ | (writable ? PROT_WRITE : 0),
		 MAP_SHARED, fd, (off_t)start);
	if (p == MAP_FAILED) {
		ret = -errno;
		mapped_give(t, len);
		return ret;
	}
	m->counted = t;
	m->map = p;
	m->map_len = (size_t)len;
	m->base = (uint8_t *)p + (offset - start);
	m->writable = writable;
	m->file_offset = start;
	return 0;
}

void ibvd_mr_mapping_drop(struct ibvd_mr_mapping *m)
{
	if (m->map) {
		munmap(m->map, m->map_len);
		mapped_give(m->counted, m->map_len);
	}
	if (m->keeps_fd)
		ibvd_frame_close_fd(m->fd);	/* the client's: may block */
	*m = (struct ibvd_mr_mapping){ 0 };
}

void ibvd_mr_mapping_install(struct ibvd_mr *mr, struct ibvd_mr_mapping *m)
{
	if (mr->map) {
		munmap(mr->map, mr->map_len);
		mapped_give(mr->map_counted, mr->map_len);
	}
	if (mr->map_fd_kept)
		ibvd_frame_close_fd(mr->map_fd);
	mr->map_counted = m->counted;
	mr->map = m->map;
	mr->map_len = m->map_len;
	mr->map_base = m->base;
	mr->map_writable = m->writable;
	mr->map_file_offset = m->file_offset;
	mr->map_fd = m->fd;
	mr->map_fd_kept = m->keeps_fd;
	mr->map_fd_uid = m->fd_uid;
	mr->tier = m->map ? IBVD_MR_TIER_MAPPED : IBVD_MR_TIER_MEMFD;
	*m = (struct ibvd_mr_mapping){ 0 };
}
