/*
 * Reaching registered memory (DESIGN.md §3.5), in two tiers.
 *
 * Tier 2, every MR: each client hands the daemon its /proc/self/mem at
 * ATTACH_MEMORY, and the engine reads and writes MR bytes with
 * pread/pwrite on that fd.  It works for any kind of memory the client
 * mapped, needs no privilege, is bound to the client's mm (PID reuse
 * cannot redirect it) and works while the client is stopped, so
 * one-sided operations never need the target to run.  Its price: the
 * kernel's access_remote_vm goes page by page through a bounce page of
 * its own, so each direction is two copies plus a page-table walk per
 * page.
 *
 * Tier 1, MRs on memory the client shares (verbs/mr/map.c): the MR has
 * its own MAP_SHARED mapping of the same file, and the engine copies
 * with one memcpy: from one mapping into another for two such MRs, or
 * straight between a mapping and the other side's /proc/PID/mem (no
 * bounce through the thread's buffer).  A file truncated under the
 * mapping makes the missing pages raise SIGBUS: each memcpy on a mapping
 * runs under a per-thread recovery point (guarded_copy), and the fault
 * is reported as the fault of the side whose pages it hit.  Mappings are
 * installed and removed under the objects lock held for writing, so they
 * outlive every pass that resolved a key to them.
 *
 * Why not process_vm_readv/writev for private memory, though they copy
 * once each way where /proc/PID/mem copies twice (bench/copies: 64 KiB
 * pieces here, best of three, read 13.1 / write 11.9 GB/s against 8.7 /
 * 11.3, so a two-copy limit of 6.2 GB/s against 4.9): they name the
 * process by PID, and nothing ties a PID to the client across the call.
 *  - A write cannot be proven to land in the client before it lands:
 *    between any check and the syscall the client may die and, with
 *    pid_max as small as 32768 here, its PID go to another process,
 *    which the write would corrupt.  A pidfd (even SO_PEERPIDFD's,
 *    race-free at connect) only tells afterwards.
 *  - A read can be checked afterwards (a pidfd that still shows the
 *    client alive shows the PID was its own throughout), but not against
 *    exec: a client that exec()s keeps its PID, and one that first
 *    clone(CLONE_VM)s a sibling keeps its old mm, its fds and its session
 *    alive, so neither a dead mm nor a closed session would tell the
 *    engine that the PID now runs, say, a setuid program, whose memory a
 *    daemon with CAP_SYS_PTRACE would read and hand to the peer.
 *  - They need ptrace rights over the client: a daemon running as its own
 *    user without CAP_SYS_PTRACE has them over no client at all, so the
 *    path every client gets must not depend on them anyway.
 * /proc/PID/mem is bound to the mm the client opened it on and needs no
 * privilege.  Memory that must move faster belongs in tier 1.
 *
 * Failures are the client's business, not the daemon's: an unmapped
 * address gives EIO, a dead client reads 0 bytes, a truncated file
 * SIGBUS; each is reported as a fault of the side it happened on, and the
 * caller turns it into a completion status.
 *
 * Between two tier-2 sides, transfers go through the thread's bounce
 * buffer in pieces of at most ENG_BOUNCE_BYTES, small enough to stay in
 * L2 between the read and the write, large enough that the syscall cost
 * is amortised.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <limits.h>
#include <unistd.h>
#include <sys/uio.h>

#include "watch/copy_watch.h"
#include "internal.h"

__thread uint64_t *ibvd_eng_mem_calls;

static void count_call(void)
{
	if (ibvd_eng_mem_calls)
		eng_count(ibvd_eng_mem_calls, 1);
}

/* /proc/PID/mem offsets are addresses; the top half would be negative. */
static bool addr_ok(uint64_t addr, size_t len)
{
	return addr <= (uint64_t)INT64_MAX && len <= (uint64_t)INT64_MAX - addr;
}

/* Into buf (read) or out of it, in as many calls as the kernel wants. */
static int mem_rw(int fd, uint64_t addr, uint8_t *p, size_t len, bool write)
{
	if (!addr_ok(addr, len))
		return -EFAULT;
	while (len) {
		ssize_t n;

		count_call();
		/* p may be a mapped MR's pages: the wait may be on either */
		ibvd_copy_begin(fd, addr, len, p, NULL);
		n = write ? pwrite(fd, p, len, (off_t)addr) :
			    pread(fd, p, len, (off_t)addr);
		ibvd_copy_end();
		if (n < 0 && errno == EINTR)
			continue;
		/* 0: the process is gone (its mm was torn down). */
		if (n <= 0)
			return n ? -EFAULT : -ESRCH;
		p += n;
		addr += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int ibvd_eng_mem_read(int fd, uint64_t addr, void *buf, size_t len)
{
	return mem_rw(fd, addr, buf, len, false);
}

int ibvd_eng_mem_write(int fd, uint64_t addr, const void *buf, size_t len)
{
	/* pwrite only reads it */
	return mem_rw(fd, addr, (uint8_t *)(uintptr_t)buf, len, true);
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
	do {
		count_call();
		ibvd_copy_begin(fd, addr, total, n ? iov[0].iov_base : NULL,
				n > 1 ? iov[n - 1].iov_base : NULL);
		done = pwritev(fd, iov, (int)n, (off_t)addr);
		ibvd_copy_end();
	} while (done < 0 && errno == EINTR);
	if (done < 0)
		return -EFAULT;
	if (done == 0 && total)
		return -ESRCH;		/* the process is gone */
	/* Short: the rest one piece at a time, which finds the fault. */
	for (i = 0; i < n; i++) {
		size_t len = iov[i].iov_len, skip;

		skip = (uint64_t)done < len ? (size_t)done : len;
		done -= (ssize_t)skip;
		if (skip < len) {
			int ret = ibvd_eng_mem_write(fd, addr + skip,
					(const uint8_t *)iov[i].iov_base + skip,
					len - skip);

			if (ret < 0)
				return ret;
		}
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
	s->map = NULL;
	sgl->total += len;
}

/* ---- copies on mappings that may SIGBUS ---------------------------------- */

/*
 * The recovery point of this thread's copy in progress, and its fault.
 * Volatile: memcpy is a builtin the compiler knows does not read
 * bus_jump, so it would drop the store before it as dead.
 */
static __thread sigjmp_buf *volatile bus_jump;
static __thread const void *volatile bus_addr;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (!bus_jump) {
		/* Not ours: die of it as if we had no handler. */
		signal(sig, SIG_DFL);
		if (si->si_code <= 0)
			raise(sig);	/* sent, not a fault */
		return;			/* the access faults again */
	}
	bus_addr = si->si_addr;
	siglongjmp(*bus_jump, 1);
}

static void sigbus_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	/* No mask to restore on the way out: sigsetjmp need not save it. */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
}

static pthread_once_t sigbus_once = PTHREAD_ONCE_INIT;
static __thread bool bus_ready;

/*
 * The handler, and SIGBUS unblocked in this thread: threads that serve
 * the data path start with every signal blocked, and a fault signal that
 * is blocked kills the process whatever the handler.
 */
static void sigbus_ready(void)
{
	sigset_t bus;

	pthread_once(&sigbus_once, sigbus_install);
	sigemptyset(&bus);
	sigaddset(&bus, SIGBUS);
	pthread_sigmask(SIG_UNBLOCK, &bus, NULL);
	bus_ready = true;
}

static bool within(const void *p, const void *start, size_t len)
{
	uintptr_t a = (uintptr_t)p, s = (uintptr_t)start;

	return a >= s && a - s < len;
}

/*
 * memcpy that survives a mapping whose file lost the pages: ENG_COPY_OK,
 * or the side whose pages faulted.
 */
static enum eng_copy_result guarded_copy(void *dst, const void *src, size_t n)
{
	sigjmp_buf jump;

	if (!bus_ready)
		sigbus_ready();
	if (sigsetjmp(jump, 0)) {
		bus_jump = NULL;
		ibvd_copy_end();
		return within(bus_addr, dst, n) ? ENG_COPY_DST_FAULT :
						  ENG_COPY_SRC_FAULT;
	}
	bus_jump = &jump;
	ibvd_copy_begin(-1, 0, n, dst, src);
	/* a WRITE within one mapped MR may overlap its own source */
	memmove(dst, src, n);
	ibvd_copy_end();
	bus_jump = NULL;
	return ENG_COPY_OK;
}

/* ---- scatter/gather lists ------------------------------------------------- */

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

/* The contiguous piece at the cursor, at most max bytes, not consumed. */
struct piece {
	int fd;				/* < 0: at ptr */
	uint64_t addr;			/* in the client, for fd */
	uint8_t *ptr;			/* engine-private or mapped; else NULL */
	size_t len;
};

static bool cursor_peek(struct cursor *c, uint64_t max, struct piece *p)
{
	const struct eng_seg *s;
	uint64_t left;

	while (c->i < c->sgl->n && c->off == c->sgl->seg[c->i].len) {
		c->i++;
		c->off = 0;
	}
	if (c->i == c->sgl->n)
		return false;
	s = &c->sgl->seg[c->i];
	left = s->len - c->off;
	p->len = (size_t)(left < max ? left : max);
	p->addr = s->addr + c->off;
	p->fd = s->fd;
	if (s->fd < 0)
		p->ptr = (uint8_t *)(uintptr_t)p->addr;
	else
		p->ptr = s->map ? s->map + c->off : NULL;
	return true;
}

static void cursor_skip(struct cursor *c, size_t n)
{
	c->off += n;
}

/* Fill buf[0, len) from the source cursor. */
static int gather(struct cursor *c, uint8_t *buf, size_t len)
{
	struct piece p;
	int ret;

	while (len) {
		if (!cursor_peek(c, len, &p))
			return -EFAULT;
		if (p.ptr && guarded_copy(buf, p.ptr, p.len) != ENG_COPY_OK)
			return -EFAULT;
		if (!p.ptr && (ret = ibvd_eng_mem_read(p.fd, p.addr, buf, p.len)))
			return ret;
		cursor_skip(c, p.len);
		buf += p.len;
		len -= p.len;
	}
	return 0;
}

/* Store buf[0, len) at the destination cursor. */
static int scatter(struct cursor *c, const uint8_t *buf, size_t len)
{
	struct piece p;
	int ret;

	while (len) {
		if (!cursor_peek(c, len, &p))
			return -EFAULT;
		if (p.ptr && guarded_copy(p.ptr, buf, p.len) != ENG_COPY_OK)
			return -EFAULT;
		if (!p.ptr && (ret = ibvd_eng_mem_write(p.fd, p.addr, buf, p.len)))
			return ret;
		cursor_skip(c, p.len);
		buf += p.len;
		len -= p.len;
	}
	return 0;
}

/*
 * One piece through the thread's bounce buffer (n <= ENG_BOUNCE_BYTES):
 * the way for two tier-2 sides, and the way to tell which side failed
 * when a direct copy did.
 */
static enum eng_copy_result bounce_piece(struct ibvd_engine *eng,
					 const struct piece *dst,
					 const struct piece *src, size_t n)
{
	int ret;

	if (src->ptr) {
		if (guarded_copy(eng->bounce, src->ptr, n) != ENG_COPY_OK)
			return ENG_COPY_SRC_FAULT;
	} else if ((ret = ibvd_eng_mem_read(src->fd, src->addr, eng->bounce, n))) {
		return ret == -ESRCH ? ENG_COPY_SRC_GONE : ENG_COPY_SRC_FAULT;
	}
	if (dst->ptr) {
		if (guarded_copy(dst->ptr, eng->bounce, n) != ENG_COPY_OK)
			return ENG_COPY_DST_FAULT;
	} else if ((ret = ibvd_eng_mem_write(dst->fd, dst->addr, eng->bounce, n))) {
		return ret == -ESRCH ? ENG_COPY_DST_GONE : ENG_COPY_DST_FAULT;
	}
	return ENG_COPY_OK;
}

/*
 * n bytes from src to dst, with one copy wherever a side is addressable:
 * memcpy between two, pwrite from or pread into one.  A direct copy that
 * fails is redone through the bounce buffer, which names the side.
 */
static enum eng_copy_result copy_piece(struct ibvd_engine *eng,
				       const struct piece *dst,
				       const struct piece *src, size_t n)
{
	if (src->ptr && dst->ptr)
		return guarded_copy(dst->ptr, src->ptr, n);
	if (src->ptr && ibvd_eng_mem_write(dst->fd, dst->addr, src->ptr, n) == 0)
		return ENG_COPY_OK;
	if (dst->ptr && ibvd_eng_mem_read(src->fd, src->addr, dst->ptr, n) == 0)
		return ENG_COPY_OK;
	return bounce_piece(eng, dst, src, n);
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
	struct piece s, d;
	enum eng_copy_result r;
	size_t n;

	cursor_init(&in, src, src_off);
	cursor_init(&out, dst, dst_off);
	while (len) {
		n = len < ENG_BOUNCE_BYTES ? (size_t)len : ENG_BOUNCE_BYTES;
		if (!cursor_peek(&in, n, &s))
			return ENG_COPY_SRC_FAULT;
		if (!cursor_peek(&out, s.len, &d))
			return ENG_COPY_DST_FAULT;
		n = d.len;
		r = copy_piece(eng, &d, &s, n);
		if (r != ENG_COPY_OK)
			return r;
		cursor_skip(&in, n);
		cursor_skip(&out, n);
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

bool ibvd_eng_sgl_client_piece(const struct eng_sgl *sgl, uint64_t off,
			       uint64_t len, int *fd, uint64_t *addr)
{
	struct cursor c;
	struct piece p;

	cursor_init(&c, sgl, off);
	if (!len || !cursor_peek(&c, len, &p) || p.len != len || p.ptr)
		return false;
	*fd = p.fd;
	*addr = p.addr;
	return true;
}

int ibvd_eng_word_rmw(const struct eng_seg *seg,
		      uint64_t (*apply)(const void *arg, uint64_t old),
		      const void *arg, uint64_t *old)
{
	uint64_t new;

	if (seg->map) {
		if (guarded_copy(old, seg->map, sizeof(*old)) != ENG_COPY_OK)
			return -EFAULT;
	} else {
		int ret = ibvd_eng_mem_read(seg->fd, seg->addr, old, sizeof(*old));

		if (ret < 0)
			return ret;
	}
	new = apply(arg, *old);
	/* An unsuccessful compare writes nothing, as on a NIC. */
	if (new == *old)
		return 0;
	if (seg->map)
		return guarded_copy(seg->map, &new, sizeof(new)) == ENG_COPY_OK ?
		       0 : -EFAULT;
	return ibvd_eng_mem_write(seg->fd, seg->addr, &new, sizeof(new));
}
