/*
 * Queue memory: the memfds that hold the shared rings of CQs, QPs and SRQs
 * (layout in common/ring.h), and each context's budget for them.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/mman.h>

#include "context.h"
#include "verbs.h"

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL	0x0008u		/* Linux 6.3 */
#endif

size_t ibvd_page_align(size_t len)
{
	return (len + IBVD_PAGE_SIZE - 1) & ~(size_t)(IBVD_PAGE_SIZE - 1);
}

static int memfd_new(const char *name)
{
	int fd;

	/* Nothing here is ever executed; newer kernels want that said. */
	fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL);
	if (fd < 0 && errno == EINVAL)
		fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	return fd < 0 ? -errno : fd;
}

int ibvd_ring_memfd(struct ibvd_context *ctx, const char *name, size_t len,
		    int *ret_fd, void **ret_map)
{
	void *map;
	int fd, ret;

	len = ibvd_page_align(len);
	if (len > IBVD_CTX_MAX_RING_BYTES ||
	    ctx->objs.ring_bytes + len > IBVD_CTX_MAX_RING_BYTES)
		return -ENOMEM;
	fd = memfd_new(name);
	if (fd < 0)
		return fd;
	if (ftruncate(fd, (off_t)len) < 0)
		goto fail_errno;
	/*
	 * The client gets this fd: sealed, it can never shrink the file under
	 * our mapping (SIGBUS in the daemon) nor grow it, nor lift the seals.
	 */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		goto fail_errno;
	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		goto fail_errno;
	ctx->objs.ring_bytes += len;
	*ret_fd = fd;
	*ret_map = map;
	return 0;
fail_errno:
	ret = -errno;
	close(fd);
	return ret;
}

void ibvd_ring_unmap(struct ibvd_context *ctx, void *map, size_t len)
{
	if (!map)
		return;
	len = ibvd_page_align(len);
	munmap(map, len);
	ctx->objs.ring_bytes -= len;
}

void ibvd_ring_init(struct ibvd_ring *r, void *base, uint32_t nslots,
		    uint32_t stride)
{
	uint8_t *p = base;

	r->map = base;
	r->map_len = ibvd_page_align(ibvd_ring_bytes(nslots, stride));
	r->nslots = nslots;
	r->stride = stride;
	r->engine_page = p + IBVD_RING_ENGINE_PAGE;
	r->client_page = p + IBVD_RING_CLIENT_PAGE;
	r->slots = p + IBVD_RING_SLOTS;
}
