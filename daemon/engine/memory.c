/*
 * Reaching registered memory (DESIGN.md §3.5, tier 2): every client hands
 * the daemon its /proc/self/mem at ATTACH_MEMORY, and the engine reads and
 * writes MR bytes with pread/pwrite on that fd.  It works for any kind of
 * memory the client mapped, needs no privilege, is bound to the client's
 * mm (PID reuse cannot redirect it) and works while the client is stopped,
 * so one-sided operations never need the target to run.
 *
 * Failures are the client's business, not the daemon's: an unmapped
 * address gives EIO, a dead client reads 0 bytes; either is reported as a
 * fault of the side it happened on, and the caller turns it into a
 * completion status.
 *
 * Transfers go through the thread's bounce buffer in chunks of
 * ENG_BOUNCE_BYTES, small enough to stay in L2 between the read and the
 * write, large enough that the syscall cost is amortised.
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <limits.h>
#include <unistd.h>
#include <sys/uio.h>

#include "internal.h"

/* /proc/PID/mem offsets are addresses; the top half would be negative. */
static bool addr_ok(uint64_t addr, size_t len)
{
	return addr <= (uint64_t)INT64_MAX && len <= (uint64_t)INT64_MAX - addr;
}

int ibvd_eng_mem_read(int fd, uint64_t addr, void *buf, size_t len)
{
	uint8_t *p = buf;

	if (!addr_ok(addr, len))
		return -EFAULT;
	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)addr);

		if (n < 0 && errno == EINTR)
			continue;
		/* 0: the process is gone (its mm was torn down). */
		if (n <= 0)
			return -EFAULT;
		p += n;
		addr += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int ibvd_eng_mem_write(int fd, uint64_t addr, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	if (!addr_ok(addr, len))
		return -EFAULT;
	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)addr);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EFAULT;
		p += n;
		addr += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int ibvd_eng_mem_writev(int fd, uint64_t addr, const struct iovec *iov,
			unsigned int n)
{
	uint64_t total = 0;
	ssize_t done;
	unsigned int i;

	for (i = 0; i < n; i++)
		total += iov[i].iov_len;
	if (!addr_ok(addr, total) || n > IOV_MAX)
		return -EFAULT;
	do
		done = pwritev(fd, iov, (int)n, (off_t)addr);
	while (done < 0 && errno == EINTR);
	if (done < 0)
		return -EFAULT;
	/* Short: the rest one piece at a time, which finds the fault. */
	for (i = 0; i < n; i++) {
		size_t len = iov[i].iov_len, skip;

		skip = (uint64_t)done < len ? (size_t)done : len;
		done -= (ssize_t)skip;
		if (skip < len &&
		    ibvd_eng_mem_write(fd, addr + skip,
				       (const uint8_t *)iov[i].iov_base + skip,
				       len - skip) < 0)
			return -EFAULT;
		addr += len;
	}
	return 0;
}

void ibvd_eng_sgl_private(struct eng_sgl *sgl, const void *buf, uint64_t len)
{
	struct eng_seg *s = &sgl->seg[sgl->n++];

	s->fd = -1;
	s->addr = (uint64_t)(uintptr_t)buf;
	s->len = len;
	sgl->total += len;
}

/* A position in a scatter/gather list. */
struct cursor {
	const struct eng_sgl *sgl;
	unsigned int i;
	uint64_t off;			/* into seg[i] */
};

static void cursor_init(struct cursor *c, const struct eng_sgl *sgl,
			uint64_t skip)
{
	c->sgl = sgl;
	c->i = 0;
	c->off = 0;
	while (c->i < sgl->n && skip >= sgl->seg[c->i].len) {
		skip -= sgl->seg[c->i].len;
		c->i++;
	}
	c->off = skip;
}

/* The piece at the cursor, at most max bytes; advances past it. */
static const struct eng_seg *cursor_next(struct cursor *c, uint64_t max,
					 uint64_t *addr, size_t *len)
{
	const struct eng_seg *s;
	uint64_t left;

	while (c->i < c->sgl->n && c->off == c->sgl->seg[c->i].len) {
		c->i++;
		c->off = 0;
	}
	if (c->i == c->sgl->n)
		return NULL;
	s = &c->sgl->seg[c->i];
	left = s->len - c->off;
	*len = (size_t)(left < max ? left : max);
	*addr = s->addr + c->off;
	c->off += *len;
	return s;
}

/* Fill buf[0, len) from the source cursor. */
static int gather(struct cursor *c, uint8_t *buf, size_t len)
{
	while (len) {
		uint64_t addr;
		size_t n;
		const struct eng_seg *s = cursor_next(c, len, &addr, &n);

		if (!s)
			return -EFAULT;
		if (s->fd < 0)
			memcpy(buf, (const void *)(uintptr_t)addr, n);
		else if (ibvd_eng_mem_read(s->fd, addr, buf, n) < 0)
			return -EFAULT;
		buf += n;
		len -= n;
	}
	return 0;
}

/* Store buf[0, len) at the destination cursor. */
static int scatter(struct cursor *c, const uint8_t *buf, size_t len)
{
	while (len) {
		uint64_t addr;
		size_t n;
		const struct eng_seg *s = cursor_next(c, len, &addr, &n);

		if (!s)
			return -EFAULT;
		if (s->fd < 0)
			memcpy((void *)(uintptr_t)addr, buf, n);
		else if (ibvd_eng_mem_write(s->fd, addr, buf, n) < 0)
			return -EFAULT;
		buf += n;
		len -= n;
	}
	return 0;
}

/*
 * A source that is one private buffer (inline data) needs no bounce: it
 * is written to the destination straight from where it is.
 */
static bool private_source(const struct eng_sgl *src)
{
	return src->n == 1 && src->seg[0].fd < 0;
}

enum eng_copy_result ibvd_eng_copy(struct ibvd_engine *eng,
				   const struct eng_sgl *dst, uint64_t dst_off,
				   const struct eng_sgl *src, uint64_t len)
{
	return ibvd_eng_copy_at(eng, dst, dst_off, src, 0, len);
}

enum eng_copy_result ibvd_eng_copy_at(struct ibvd_engine *eng,
				      const struct eng_sgl *dst, uint64_t dst_off,
				      const struct eng_sgl *src, uint64_t src_off,
				      uint64_t len)
{
	struct cursor in, out;

	cursor_init(&in, src, src_off);
	cursor_init(&out, dst, dst_off);
	if (private_source(src) && src_off <= src->seg[0].len &&
	    len <= src->seg[0].len - src_off)
		return scatter(&out, (const uint8_t *)(uintptr_t)
			       (src->seg[0].addr + src_off),
			       (size_t)len) ? ENG_COPY_DST_FAULT : ENG_COPY_OK;
	while (len) {
		size_t n = len < ENG_BOUNCE_BYTES ? (size_t)len : ENG_BOUNCE_BYTES;

		if (gather(&in, eng->bounce, n) < 0)
			return ENG_COPY_SRC_FAULT;
		if (scatter(&out, eng->bounce, n) < 0)
			return ENG_COPY_DST_FAULT;
		len -= n;
	}
	return ENG_COPY_OK;
}

int ibvd_eng_copy_out(const struct eng_sgl *src, uint64_t off, void *buf,
		      uint64_t len)
{
	struct cursor in;

	cursor_init(&in, src, off);
	return gather(&in, buf, (size_t)len);
}

int ibvd_eng_copy_in(const struct eng_sgl *dst, uint64_t off, const void *buf,
		     uint64_t len)
{
	struct cursor out;

	cursor_init(&out, dst, off);
	return scatter(&out, buf, (size_t)len);
}
