/*
 * Ring arenas (arena.h): one memfd per device context, carved into the
 * blocks that hold its queues.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "verbs/rings/arena.h"
#include "log.h"

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL	0x0008u		/* Linux 6.3 */
#endif

int ibvd_memfd_new(const char *name)
{
	int fd;

	/* Nothing here is ever executed; newer kernels want that said. */
	fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL);
	if (fd < 0 && errno == EINVAL)
		fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	return fd < 0 ? -errno : fd;
}

/*
 * Sealed, a client that maps the file can never shrink it under our
 * mapping (SIGBUS in the daemon) nor grow it, nor lift the seals.
 */
int ibvd_memfd_sealed(const char *name, uint64_t size)
{
	int fd = ibvd_memfd_new(name), ret;

	if (fd < 0)
		return fd;
	if (ftruncate(fd, (off_t)size) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	return fd;
}

/*
 * The whole arena at once: a file that size costs nothing until its
 * pages are touched (memfds are not charged against overcommit).
 */
static int arena_file(int *ret_fd)
{
	int fd = ibvd_memfd_sealed("ibvd-rings", IBVD_ARENA_BYTES);

	if (fd < 0)
		return fd;
	*ret_fd = fd;
	return 0;
}

int ibvd_arena_new(struct ibvd_arena **ret, int *ret_fd)
{
	struct ibvd_arena *a = calloc(1, sizeof(*a));
	void *map;
	int fd = -1, ret_err;

	if (!a)
		return -ENOMEM;
	ret_err = arena_file(&fd);
	if (ret_err < 0)
		goto fail;
	map = mmap(NULL, IBVD_ARENA_BYTES, PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_NORESERVE, fd, 0);
	if (map == MAP_FAILED) {
		ret_err = -errno;
		close(fd);
		goto fail;
	}
	a->base = map;
	a->refs = 1;
	*ret = a;
	*ret_fd = fd;
	return 0;
fail:
	free(a);
	return ret_err;
}

void ibvd_arena_put(struct ibvd_arena *a)
{
	unsigned int h, o;

	if (!a || --a->refs)
		return;
	/*
	 * The pages go now, whoever else holds the file: the client may keep
	 * its fd (or /proc/PID/map_files) past its context, and what the
	 * engine wrote there is the daemon's memory.  One call for all, as
	 * a closing arena gave back none of its blocks one by one.
	 */
	if (madvise(a->base, IBVD_ARENA_BYTES, MADV_REMOVE) < 0)
		log_warn("ring arena: its pages stay until its file closes: %s",
			 strerror(errno));
	munmap(a->base, IBVD_ARENA_BYTES);
	for (h = 0; h < 2; h++)
		for (o = 0; o < IBVD_ARENA_ORDERS; o++)
			free(a->free[h][o].off);
	free(a);
}

void ibvd_arena_closing(struct ibvd_arena *a)
{
	if (a)
		a->closing = true;
}

size_t ibvd_arena_block(size_t len)
{
	size_t b = IBVD_ARENA_MIN_BLOCK;

	if (len == 0 || len > IBVD_ARENA_MAX_BLOCK)
		return 0;
	while (b < len)
		b <<= 1;
	return b;
}

static unsigned int order_of(size_t block)
{
	return (unsigned int)(__builtin_ctzll(block) -
			      __builtin_ctz(IBVD_ARENA_MIN_BLOCK));
}

static uint64_t half_start(enum ibvd_arena_half h)
{
	return h == IBVD_HALF_ENGINE ? IBVD_ARENA_ENGINE : IBVD_ARENA_CLIENT;
}

/* A never-used block from the top of half h, aligned to its size (a page at most). */
static int carve(struct ibvd_arena *a, enum ibvd_arena_half h, size_t block,
		 uint64_t *off)
{
	uint64_t align = block < IBVD_PAGE_SIZE ? block : IBVD_PAGE_SIZE;
	uint64_t at = (a->top[h] + align - 1) & ~(align - 1);

	if (at > IBVD_ARENA_HALF || block > IBVD_ARENA_HALF - at)
		return -ENOMEM;
	a->top[h] = at + block;
	*off = half_start(h) + at;
	return 0;
}

int ibvd_arena_alloc(struct ibvd_arena *a, enum ibvd_arena_half h,
		     size_t len, uint64_t *off)
{
	size_t block = ibvd_arena_block(len);
	struct ibvd_arena_free *f;
	int ret;

	if (!block)
		return -EINVAL;
	f = &a->free[h][order_of(block)];
	if (f->n) {
		*off = f->off[--f->n];
		/*
		 * Blocks of a page or more were given back to the kernel when
		 * freed and read as zeros; smaller ones share a page.
		 */
		if (block < IBVD_PAGE_SIZE)
			memset(a->base + *off, 0, block);
	} else {
		ret = carve(a, h, block, off);
		if (ret < 0)
			return ret;
	}
	a->refs++;
	return 0;
}

static int push_free(struct ibvd_arena_free *f, uint64_t off)
{
	uint64_t *grown;
	uint32_t cap;

	if (f->n == f->cap) {
		cap = f->cap ? 2 * f->cap : 16;
		grown = realloc(f->off, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		f->off = grown;
		f->cap = cap;
	}
	f->off[f->n++] = off;
	return 0;
}

void ibvd_arena_free(struct ibvd_arena *a, uint64_t off, size_t len)
{
	size_t block = ibvd_arena_block(len);
	enum ibvd_arena_half h = off >= IBVD_ARENA_CLIENT ? IBVD_HALF_CLIENT :
							      IBVD_HALF_ENGINE;

	if (a->closing) {
		ibvd_arena_put(a);
		return;
	}
	/*
	 * The memory goes back now (it reads as zeros from then on); the
	 * offset waits for the next queue.  A block that cannot go back is
	 * zeroed, as ibvd_arena_alloc expects.
	 */
	if (block >= IBVD_PAGE_SIZE &&
	    madvise(a->base + off, block, MADV_REMOVE) < 0)
		memset(a->base + off, 0, block);
	/* Out of memory for the list: that block's space is not reused. */
	if (push_free(&a->free[h][order_of(block)], off) < 0)
		log_warn("ring arena: a %zu-byte block is lost to reuse", block);
	ibvd_arena_put(a);
}
