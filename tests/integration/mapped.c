/*
 * mapped-helper DIR: MRs on memory the client shares with a file (mapped.sh).
 * (`--big DIR` and `--stuck FILE`: see big() and stuck().)
 *
 * Registers MRs on a memfd, a /dev/shm file, a MAP_SHARED regular file in
 * DIR and, when a hugetlbfs mount with free pages exists, a hugetlbfs file,
 * beside a private one; mapped.sh checks meanwhile that the daemon maps
 * each (ibvctl's tier, its /proc/PID/maps) and unmaps them at
 * deregistration.  Here:
 *   - WRITE, READ, SEND and atomics between every kind and the private
 *     MR, and from one mapped MR into another: the bytes are the file's
 *     (the client sees them through its own mapping);
 *   - the client unmapping its own range changes nothing for the MR;
 *   - a file truncated under an MR: a WRITE into it is REM_ACCESS_ERR, a
 *     WRITE out of it LOC_PROT_ERR, whether short enough for the library
 *     to copy it into the WQE at post, or into the staging block, or not
 *     (a copy that faults leaves the WRITE to the engine), and
 *     the daemon lives on; SENDs out of it and into it, and a WRITE with
 *     immediate into it, which the libraries copy themselves on a
 *     connected pair's rings, fail the same way (their copies recover
 *     from the fault), also in a thread that blocks SIGBUS;
 *   - a rereg to a private range leaves the file alone.
 * Processes meet through files in DIR (vt_put/vt_get).  Exit: 0 pass, 1
 * fail.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <infiniband/verbs.h>

#include "vt.h"

#define LEN	16384u

static const char *dir;
static struct vt_dev D;

/* One MR on shared memory. */
struct backing {
	const char *kind;
	int fd;
	uint8_t *addr;
	size_t len;
	ino_t ino;
	struct ibv_mr *mr;
};

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static void get(const char *name, char *buf, size_t len)
{
	vt_assert(vt_get(dir, name, buf, len, 3 * vt_tmo_ms()),
		  "no %s/%s within %d ms", dir, name, 3 * vt_tmo_ms());
}

/* Size fd to len, map it shared and register it. */
static void backing_map(struct backing *b, size_t len)
{
	struct stat st;

	vt_assert(ftruncate(b->fd, (off_t)len) == 0, "%s: ftruncate: %s",
		  b->kind, strerror(errno));
	b->len = len;
	b->addr = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd, 0);
	vt_assert(b->addr != MAP_FAILED, "%s: mmap: %s", b->kind, strerror(errno));
	vt_assert(fstat(b->fd, &st) == 0, "fstat");
	b->ino = st.st_ino;
	b->mr = ibv_reg_mr(D.pd, b->addr, len, VT_ACCESS_ALL);
	vt_assert(b->mr, "%s: ibv_reg_mr: %s", b->kind, strerror(errno));
}

/* A new file at path (main unlinks it at the end). */
static int open_new(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

	vt_assert(fd >= 0, "open %s: %s", path, strerror(errno));
	return fd;
}

/* A hugetlbfs mount (from /proc/mounts) we can create a file in, or NULL. */
static const char *hugetlbfs_dir(char *buf, size_t len)
{
	FILE *f = fopen("/proc/mounts", "re");
	char dev[256], mnt[256], type[64];
	const char *found = NULL;

	if (!f)
		return NULL;
	while (fscanf(f, "%255s %255s %63s %*[^\n]", dev, mnt, type) == 3) {
		if (strcmp(type, "hugetlbfs") == 0 && access(mnt, W_OK) == 0) {
			snprintf(buf, len, "%s", mnt);
			found = buf;
			break;
		}
	}
	fclose(f);
	return found;
}

/* The kinds this system has; returns how many. */
static int backings_make(struct backing *b, char *paths[])
{
	char mnt[256], path[512];
	struct stat st;
	void *probe;
	long hps;
	int n = 0;

	b[n].kind = "memfd";
	b[n].fd = memfd_create("ibvd-mapped", MFD_CLOEXEC);
	vt_assert(b[n].fd >= 0, "memfd_create: %s", strerror(errno));
	backing_map(&b[n++], LEN);

	snprintf(path, sizeof(path), "/dev/shm/ibvd-mapped-%d", (int)getpid());
	b[n].kind = "shm";
	b[n].fd = open_new(path);
	backing_map(&b[n++], LEN);
	/* Registered (the library reopened it by its path): nothing to leave. */
	unlink(path);

	snprintf(path, sizeof(path), "%s/file", dir);
	b[n].kind = "file";
	b[n].fd = open_new(path);
	paths[n] = strdup(path);
	backing_map(&b[n++], LEN);

	if (!hugetlbfs_dir(mnt, sizeof(mnt))) {
		say("hugetlbfs: skipped (no writable hugetlbfs mount)");
		return n;
	}
	snprintf(path, sizeof(path), "%s/ibvd-mapped-%d", mnt, (int)getpid());
	b[n].kind = "hugetlbfs";
	b[n].fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	/* hugetlbfs's block size is its huge page size */
	hps = b[n].fd >= 0 && fstat(b[n].fd, &st) == 0 ? (long)st.st_blksize : -1;
	probe = MAP_FAILED;
	if (b[n].fd >= 0 && hps > 0 && ftruncate(b[n].fd, hps) == 0)
		probe = mmap(NULL, (size_t)hps, PROT_READ | PROT_WRITE,
			     MAP_SHARED | MAP_POPULATE, b[n].fd, 0);
	if (probe == MAP_FAILED) {
		say("hugetlbfs: skipped (%s: no huge page to be had: %s)", path,
		    strerror(errno));
		if (b[n].fd >= 0)
			close(b[n].fd);
		unlink(path);
		return n;
	}
	munmap(probe, (size_t)hps);
	paths[n] = strdup(path);
	backing_map(&b[n++], (size_t)hps);
	return n;
}

/* ---- the data path ---------------------------------------------------------- */

static struct vt_pair P;

static void one_sided(struct ibv_qp *qp, struct ibv_cq *cq, uint64_t id,
		      enum ibv_wr_opcode op, void *laddr, uint32_t len,
		      uint32_t lkey, void *raddr, uint32_t rkey,
		      enum ibv_wc_status want, const char *what)
{
	struct ibv_wc wc;

	vt_send(qp, id, op, IBV_SEND_SIGNALED, laddr, len, lkey,
		(uintptr_t)raddr, rkey);
	vt_expect_wc(cq, &wc, id, want, what);
}

/* WRITE priv -> b, b -> next, READ next -> priv; SEND b -> next; atomics. */
static void exercise(struct backing *b, struct backing *next,
		     struct ibv_mr *priv, uint32_t seed)
{
	uint64_t *word = (uint64_t *)(void *)(b->addr + 64);
	uint64_t *result = (uint64_t *)priv->addr;
	struct ibv_wc wc;

	vt_fill(priv->addr, LEN, 0, seed);
	one_sided(P.qp[0], P.scq[0], 1, IBV_WR_RDMA_WRITE, priv->addr, LEN,
		  priv->lkey, b->addr, b->mr->rkey, IBV_WC_SUCCESS, b->kind);
	vt_expect_pat(b->addr, LEN, 0, seed, "WRITE private -> mapped");

	one_sided(P.qp[0], P.scq[0], 2, IBV_WR_RDMA_WRITE, b->addr, LEN,
		  b->mr->lkey, next->addr, next->mr->rkey, IBV_WC_SUCCESS,
		  "mapped -> mapped");
	vt_expect_pat(next->addr, LEN, 0, seed, "WRITE mapped -> mapped");

	memset(priv->addr, 0, LEN);
	one_sided(P.qp[0], P.scq[0], 3, IBV_WR_RDMA_READ, priv->addr, LEN,
		  priv->lkey, next->addr, next->mr->rkey, IBV_WC_SUCCESS,
		  "READ mapped -> private");
	vt_expect_pat(priv->addr, LEN, 0, seed, "READ mapped -> private");

	vt_fill(b->addr, LEN, 0, seed + 1);
	memset(next->addr, 0, LEN);
	vt_recv(P.qp[1], 4, next->addr, LEN, next->mr->lkey);
	vt_send(P.qp[0], 5, IBV_WR_SEND, IBV_SEND_SIGNALED, b->addr, LEN,
		b->mr->lkey, 0, 0);
	vt_expect_ok(P.scq[0], &wc, 5, IBV_WC_SEND, "SEND mapped");
	vt_expect_ok(P.rcq[1], &wc, 4, IBV_WC_RECV, "RECV into mapped");
	vt_expect_pat(next->addr, LEN, 0, seed + 1, "SEND mapped -> mapped");

	*word = 40;
	vt_atomic(P.qp[0], 6, IBV_WR_ATOMIC_FETCH_AND_ADD, result, priv->lkey,
		  (uintptr_t)word, b->mr->rkey, 2, 0);
	vt_expect_ok(P.scq[0], &wc, 6, IBV_WC_FETCH_ADD, "FETCH_ADD on mapped");
	vt_assert(*result == 40 && *word == 42, "%s: fetch-add gave %llu, left %llu",
		  b->kind, (unsigned long long)*result, (unsigned long long)*word);
	vt_atomic(P.qp[0], 7, IBV_WR_ATOMIC_CMP_AND_SWP, result, priv->lkey,
		  (uintptr_t)word, b->mr->rkey, 42, 7);
	vt_expect_ok(P.scq[0], &wc, 7, IBV_WC_COMP_SWAP, "CMP_SWP on mapped");
	vt_assert(*result == 42 && *word == 7, "%s: cmp-swap gave %llu, left %llu",
		  b->kind, (unsigned long long)*result, (unsigned long long)*word);
	say("%s: WRITE, READ, SEND and atomics through the mapping", b->kind);
}

/*
 * The client drops its own mapping: the MR keeps the daemon's, so WRITE
 * and READ still reach the file (seen through a fresh mapping).
 */
static void unmapped_by_client(struct backing *b, struct ibv_mr *priv)
{
	uint8_t *view;

	vt_assert(munmap(b->addr, b->len) == 0, "munmap");
	vt_fill(priv->addr, LEN, 0, 0x77);
	one_sided(P.qp[0], P.scq[0], 10, IBV_WR_RDMA_WRITE, priv->addr, LEN,
		  priv->lkey, b->addr, b->mr->rkey, IBV_WC_SUCCESS,
		  "WRITE after the client's munmap");
	memset(priv->addr, 0, LEN);
	one_sided(P.qp[0], P.scq[0], 11, IBV_WR_RDMA_READ, priv->addr, LEN,
		  priv->lkey, b->addr, b->mr->rkey, IBV_WC_SUCCESS,
		  "READ after the client's munmap");
	vt_expect_pat(priv->addr, LEN, 0, 0x77, "READ back after munmap");
	view = mmap(NULL, b->len, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd, 0);
	vt_assert(view != MAP_FAILED, "mmap: %s", strerror(errno));
	vt_expect_pat(view, LEN, 0, 0x77, "the file after munmap");
	b->addr = view;
	say("%s: the MR works on after the client unmapped its range", b->kind);
}

struct blocked_send {
	struct vt_pair *p;
	struct backing *src;
	struct ibv_mr *priv;
};

/*
 * A thread that blocks SIGBUS cannot survive a fault (the kernel kills
 * the process): its library copies nothing out of a file, the engine
 * does, and fails the SEND.
 */
static void *send_bus_blocked(void *arg)
{
	struct blocked_send *b = arg;
	struct ibv_wc wc;
	sigset_t bus;

	sigemptyset(&bus);
	sigaddset(&bus, SIGBUS);
	vt_assert(pthread_sigmask(SIG_BLOCK, &bus, NULL) == 0, "pthread_sigmask");
	vt_recv(b->p->qp[1], 27, b->priv->addr, LEN, b->priv->lkey);
	vt_send(b->p->qp[0], 27, IBV_WR_SEND, IBV_SEND_SIGNALED, b->src->addr,
		LEN, b->src->mr->lkey, 0, 0);
	vt_expect_wc(b->p->scq[0], &wc, 27, IBV_WC_LOC_PROT_ERR,
		     "SEND out of a truncated file, SIGBUS blocked");
	return NULL;
}

/* A file shrunk to nothing under its MR: errors, not a dead daemon. */
static void truncated(struct backing *dst, struct backing *src,
		      struct ibv_mr *priv)
{
	struct blocked_send blocked;
	struct vt_pair p2;
	pthread_t thread;
	struct ibv_wc wc;

	vt_assert(ftruncate(dst->fd, 0) == 0, "ftruncate: %s", strerror(errno));
	vt_pair(&p2, &D, NULL, 16);
	one_sided(p2.qp[0], p2.scq[0], 20, IBV_WR_RDMA_WRITE, priv->addr, LEN,
		  priv->lkey, dst->addr, dst->mr->rkey, IBV_WC_REM_ACCESS_ERR,
		  "WRITE into a truncated file");
	vt_pair_free(&p2);

	vt_assert(ftruncate(src->fd, 0) == 0, "ftruncate: %s", strerror(errno));
	vt_pair(&p2, &D, NULL, 16);
	one_sided(p2.qp[0], p2.scq[0], 21, IBV_WR_RDMA_WRITE, src->addr, LEN,
		  src->mr->lkey, priv->addr, priv->rkey, IBV_WC_LOC_PROT_ERR,
		  "WRITE out of a truncated file");
	vt_pair_free(&p2);
	/* small enough to go in the WQE: the library's copy faults */
	vt_pair(&p2, &D, NULL, 16);
	one_sided(p2.qp[0], p2.scq[0], 23, IBV_WR_RDMA_WRITE, src->addr, 16,
		  src->mr->lkey, priv->addr, priv->rkey, IBV_WC_LOC_PROT_ERR,
		  "16-byte WRITE out of a truncated file");
	vt_pair_free(&p2);
	/* SENDs: out of the truncated file, and into it */
	vt_pair(&p2, &D, NULL, 16);
	vt_recv(p2.qp[1], 24, priv->addr, LEN, priv->lkey);
	vt_send(p2.qp[0], 24, IBV_WR_SEND, IBV_SEND_SIGNALED, src->addr, LEN,
		src->mr->lkey, 0, 0);
	vt_expect_wc(p2.scq[0], &wc, 24, IBV_WC_LOC_PROT_ERR,
		     "SEND out of a truncated file");
	vt_pair_free(&p2);
	vt_pair(&p2, &D, NULL, 16);
	blocked = (struct blocked_send){ .p = &p2, .src = src, .priv = priv };
	vt_assert(pthread_create(&thread, NULL, send_bus_blocked, &blocked) == 0,
		  "pthread_create");
	pthread_join(thread, NULL);
	vt_pair_free(&p2);
	vt_pair(&p2, &D, NULL, 16);
	vt_recv(p2.qp[1], 25, dst->addr, LEN, dst->mr->lkey);
	vt_send(p2.qp[0], 25, IBV_WR_SEND, IBV_SEND_SIGNALED, priv->addr, LEN,
		priv->lkey, 0, 0);
	vt_expect_wc(p2.rcq[1], &wc, 25, IBV_WC_LOC_PROT_ERR,
		     "SEND into a truncated file (the receive)");
	vt_expect_wc(p2.scq[0], &wc, 25, IBV_WC_REM_OP_ERR,
		     "SEND into a truncated file (the SEND)");
	vt_pair_free(&p2);
	/* placed by the receiver's library as it polls, into its MR */
	vt_pair(&p2, &D, NULL, 16);
	vt_recv(p2.qp[1], 26, priv->addr, LEN, priv->lkey);
	vt_send(p2.qp[0], 26, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_SEND_SIGNALED,
		priv->addr, LEN, priv->lkey, (uintptr_t)dst->addr,
		dst->mr->rkey);
	/* the responder's QP is in error, as after any such NAK */
	vt_expect_wc(p2.rcq[1], &wc, 26, IBV_WC_WR_FLUSH_ERR,
		     "the receive of a WRITE with immediate into a truncated file");
	vt_expect_wc(p2.scq[0], &wc, 26, IBV_WC_REM_ACCESS_ERR,
		     "WRITE with immediate into a truncated file");
	vt_pair_free(&p2);
	/* The daemon is alive and well: the first pair still works. */
	one_sided(P.qp[0], P.scq[0], 22, IBV_WR_RDMA_READ, priv->addr, 8,
		  priv->lkey, priv->addr + 8, priv->rkey, IBV_WC_SUCCESS,
		  "a READ after the faults");
	say("truncated %s and %s: REM_ACCESS_ERR and LOC_PROT_ERR", dst->kind,
	    src->kind);
}

/*
 * Rereg onto private memory: writes land there, not in the file.  Returns
 * that memory, for the caller to free once the MR is gone.
 */
static uint8_t *rereg_private(struct backing *b, struct ibv_mr *priv)
{
	uint8_t *other = aligned_alloc(4096, LEN);

	vt_assert(other, "aligned_alloc");
	memset(other, 0, LEN);
	memset(b->addr, 0x5a, LEN);
	vt_assert(ibv_rereg_mr(b->mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
			       other, LEN, 0) == 0,
		  "ibv_rereg_mr: %s", strerror(errno));
	vt_fill(priv->addr, LEN, 0, 0x33);
	one_sided(P.qp[0], P.scq[0], 30, IBV_WR_RDMA_WRITE, priv->addr, LEN,
		  priv->lkey, other, b->mr->rkey, IBV_WC_SUCCESS,
		  "WRITE after rereg");
	vt_expect_pat(other, LEN, 0, 0x33, "the new private range");
	vt_expect_byte(b->addr, LEN, 0x5a, "the file after rereg");
	say("%s: rereg to private memory leaves the file alone", b->kind);
	return other;
}

/*
 * `mapped-helper --big DIR`: one sparse memfd of 1 TiB, mapped once and
 * registered BIG_MRS times (each is a mapping of the daemon's, 1 TiB of
 * its address space); mapped.sh checks that the uid's 2 TiB cap left
 * the last ones to /proc/PID/mem, and that they all work.
 */
#define BIG_LEN		(1ull << 40)
#define BIG_MRS		3

static int big(void)
{
	struct backing b = { .kind = "sparse memfd" };
	struct ibv_mr *mr[BIG_MRS], *priv;
	char buf[64];
	int i;

	vt_open(&D);
	vt_pair(&P, &D, NULL, 64);
	priv = vt_reg(D.pd, LEN, VT_ACCESS_ALL);
	b.fd = memfd_create("ibvd-big", MFD_CLOEXEC);
	vt_assert(b.fd >= 0, "memfd_create: %s", strerror(errno));
	backing_map(&b, BIG_LEN);
	mr[0] = b.mr;
	for (i = 1; i < BIG_MRS; i++) {
		mr[i] = ibv_reg_mr(D.pd, b.addr, BIG_LEN, VT_ACCESS_ALL);
		vt_assert(mr[i], "MR %d of 1 TiB: %s", i, strerror(errno));
	}
	vt_put(dir, "registered", "%d\n", BIG_MRS);
	get("checked", buf, sizeof(buf));
	/* mapped or not, each MR carries data: a WRITE into each's last page */
	for (i = 0; i < BIG_MRS; i++) {
		uint64_t off = BIG_LEN - 4096 * (uint64_t)(i + 1);

		vt_fill(priv->addr, 64, 0, 0x40 + (uint32_t)i);
		one_sided(P.qp[0], P.scq[0], (uint64_t)i, IBV_WR_RDMA_WRITE,
			  priv->addr, 64, priv->lkey, b.addr + off, mr[i]->rkey,
			  IBV_WC_SUCCESS, "a WRITE through a 1 TiB MR");
		vt_expect_pat(b.addr + off, 64, 0, 0x40 + (uint32_t)i,
			      "a WRITE through a 1 TiB MR");
	}
	for (i = 0; i < BIG_MRS; i++)
		vt_assert(ibv_dereg_mr(mr[i]) == 0, "ibv_dereg_mr");
	munmap(b.addr, BIG_LEN);
	close(b.fd);
	vt_put(dir, "deregistered", "deregistered\n");
	vt_dereg(priv);
	vt_pair_free(&P);
	vt_close(&D);
	say("mapped --big: all passed");
	return 0;
}

/*
 * `mapped-helper --stuck FILE`: an RDMA WRITE of 4 KiB into an MR on a
 * private mapping of FILE that nothing here has touched, so that the
 * engine's write faults the page in through FILE's file system
 * (stuck-copy.sh: a FUSE server that holds the daemon's READs).  Prints
 * "pid PID" first, before the copy can stand (a call that maps memory,
 * as a sanitizer's allocator may make in printf, then waits behind the
 * stuck fault), "posted", then the WRITE's completion ("completion: STATUS") when it
 * comes, within 120 s.  Exit: 0 once a completion came, 1 if none.
 */
#define STUCK_LEN	65536u

static int stuck(const char *path)
{
	struct ibv_mr *src, *mr;
	struct ibv_wc wc;
	void *map;
	int fd, n;

	say("pid %d", (int)getpid());
	fd = open(path, O_RDONLY);
	vt_assert(fd >= 0, "open %s: %s", path, strerror(errno));
	map = mmap(NULL, STUCK_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	vt_assert(map != MAP_FAILED, "mmap %s: %s", path, strerror(errno));
	vt_open(&D);
	vt_pair(&P, &D, NULL, 64);
	mr = ibv_reg_mr(D.pd, map, STUCK_LEN,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	vt_assert(mr, "ibv_reg_mr on %s: %s", path, strerror(errno));
	src = vt_reg(D.pd, 4096, VT_ACCESS_ALL);
	memset(src->addr, 0x5a, 4096);
	vt_send(P.qp[0], 1, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, src->addr,
		4096, src->lkey, (uint64_t)(uintptr_t)map + 8192, mr->rkey);
	say("posted");
	n = vt_poll(P.scq[0], &wc, 1, 120000);
	say("completion: %s", n == 1 ? ibv_wc_status_str(wc.status) : "none");
	vt_dereg(src);
	vt_assert(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
	vt_pair_free(&P);
	vt_close(&D);
	munmap(map, STUCK_LEN);
	close(fd);
	return n == 1 ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct backing b[4];
	char *paths[4] = { NULL };
	struct ibv_mr *priv;
	char buf[512], list[512] = "";
	uint8_t *reregged;
	int n, i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && strcmp(argv[1], "--big") == 0) {
		dir = argv[2];
		return big();
	}
	if (argc == 3 && strcmp(argv[1], "--stuck") == 0)
		return stuck(argv[2]);
	if (argc != 2) {
		fprintf(stderr, "usage: %s [--big] DIR | --stuck FILE\n", argv[0]);
		return 2;
	}
	dir = argv[1];
	vt_open(&D);
	vt_pair(&P, &D, NULL, 64);
	priv = vt_reg(D.pd, LEN, VT_ACCESS_ALL);
	vt_put(dir, "opened", "opened\n");
	get("baseline", buf, sizeof(buf));

	n = backings_make(b, paths);
	for (i = 0; i < n; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list),
			 "%s %lu\n", b[i].kind, (unsigned long)b[i].ino);
	vt_put(dir, "registered", "%s", list);
	get("checked", buf, sizeof(buf));

	for (i = 0; i < n; i++)
		exercise(&b[i], &b[(i + 1) % n], priv, 0x10 + (uint32_t)i);
	unmapped_by_client(&b[0], priv);
	truncated(&b[1], &b[2], priv);
	reregged = rereg_private(&b[0], priv);

	for (i = 0; i < n; i++) {
		vt_assert(ibv_dereg_mr(b[i].mr) == 0, "ibv_dereg_mr");
		close(b[i].fd);
		if (paths[i])
			unlink(paths[i]);
		free(paths[i]);
	}
	free(reregged);
	vt_put(dir, "deregistered", "deregistered\n");
	get("done", buf, sizeof(buf));
	vt_dereg(priv);
	vt_pair_free(&P);
	vt_close(&D);
	say("mapped: all passed");
	return 0;
}
