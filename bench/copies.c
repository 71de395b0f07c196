/*
 * bench/copies.c: what moving 64 KiB from one process to another costs,
 * the ways the engine can do it (bench/copies runs it).
 *
 * Two children each hold a private 64 KiB buffer, touched, and wait; this
 * process plays the engine with a 64 KiB buffer of its own and copies the
 * source child's buffer into it and from it into the target child's,
 * the same pieces again and again (cache-hot, as perftest's are):
 *
 *   pvm     process_vm_readv from the source, process_vm_writev to the
 *           target (one copy each: the two-copy limit of a private buffer)
 *   procmem pread on the source's /proc/PID/mem, pwrite on the target's
 *           (each a page-sized kernel bounce: two copies each)
 *   memcpy  one memcpy between two MAP_SHARED mappings (memory both sides
 *           share with the engine: one copy in all)
 *
 * Prints "name read_GB/s write_GB/s both_GB/s" per line; "both" is the
 * two steps timed back to back, and 1 / (1/read + 1/write) is what they
 * would give without overlap.  GB/s = 10^9 bytes per second.
 *
 * Then what a message of 8 bytes costs, where the copy is nothing and the
 * system call everything: "syscall NS" for a system call that does no
 * work (getppid) and "procmem8 NS" for an 8-byte pwrite into the target's
 * /proc/PID/mem, which the engine makes for every small RDMA WRITE into
 * private memory: 1 / procmem8 is the most such WRITEs one engine thread
 * can place per second, whatever else it does.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

#define PIECE	(64u << 10)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A child holding buf (touched), waiting to be killed. */
static pid_t holder(uint8_t *buf, int fill)
{
	pid_t pid = fork();

	if (pid == 0) {
		memset(buf, fill, PIECE);
		for (;;)
			pause();
	}
	return pid;
}

struct pair {
	pid_t src, dst;
	uint8_t *src_buf, *dst_buf;	/* same address in the children */
	int src_mem, dst_mem;		/* their /proc/PID/mem */
};

static int pvm_read(struct pair *p, uint8_t *bounce)
{
	struct iovec l = { bounce, PIECE }, r = { p->src_buf, PIECE };

	return process_vm_readv(p->src, &l, 1, &r, 1, 0) == PIECE ? 0 : -1;
}

static int pvm_write(struct pair *p, uint8_t *bounce)
{
	struct iovec l = { bounce, PIECE }, r = { p->dst_buf, PIECE };

	return process_vm_writev(p->dst, &l, 1, &r, 1, 0) == PIECE ? 0 : -1;
}

static int proc_read(struct pair *p, uint8_t *bounce)
{
	return pread(p->src_mem, bounce, PIECE,
		     (off_t)(uintptr_t)p->src_buf) == PIECE ? 0 : -1;
}

static int proc_write(struct pair *p, uint8_t *bounce)
{
	return pwrite(p->dst_mem, bounce, PIECE,
		      (off_t)(uintptr_t)p->dst_buf) == PIECE ? 0 : -1;
}

typedef int (*step_fn)(struct pair *, uint8_t *);

/* GB/s of `iters` rounds of the steps given (either may be NULL). */
static double rate(struct pair *p, uint8_t *bounce, step_fn a, step_fn b,
		   unsigned int iters)
{
	double t0 = now();
	unsigned int i;

	for (i = 0; i < iters; i++) {
		if ((a && a(p, bounce) < 0) || (b && b(p, bounce) < 0)) {
			perror("copy");
			exit(1);
		}
	}
	return (double)PIECE * iters / (now() - t0) / 1e9;
}

static void report(const char *name, struct pair *p, uint8_t *bounce,
		   step_fn rd, step_fn wr, unsigned int iters)
{
	double r, w, both;

	rate(p, bounce, rd, wr, iters / 10);	/* warm up */
	r = rate(p, bounce, rd, NULL, iters);
	w = rate(p, bounce, NULL, wr, iters);
	both = rate(p, bounce, rd, wr, iters);
	printf("%s %.3f %.3f %.3f\n", name, r, w, both);
}

static int open_mem(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	return open(path, O_RDWR | O_CLOEXEC);
}

static void memcpy_report(unsigned int iters)
{
	uint8_t *a = mmap(NULL, PIECE, PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	uint8_t *b = mmap(NULL, PIECE, PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	double t0, t;
	unsigned int i;

	if (a == MAP_FAILED || b == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	memset(a, 1, PIECE);
	memset(b, 2, PIECE);
	t0 = now();
	for (i = 0; i < iters; i++) {
		memcpy(b, a, PIECE);
		__asm__ volatile("" : : "r"(b) : "memory");
	}
	t = (double)PIECE * iters / (now() - t0) / 1e9;
	printf("memcpy %.3f %.3f %.3f\n", t, t, t);
}

/* Nanoseconds per call: a null system call, then an 8-byte remote write. */
static void small_report(struct pair *p, unsigned int iters)
{
	uint64_t word = 42;
	double t0, t1, t2;
	unsigned int i;

	t0 = now();
	for (i = 0; i < iters; i++)
		(void)syscall(SYS_getppid);
	t1 = now();
	for (i = 0; i < iters; i++) {
		/* cycle over the buffer's cache lines, as perftest's writes do */
		off_t at = (off_t)(uintptr_t)p->dst_buf + (off_t)(i % (PIECE / 64)) * 64;

		if (pwrite(p->dst_mem, &word, sizeof(word), at) != sizeof(word)) {
			perror("pwrite");
			exit(1);
		}
	}
	t2 = now();
	printf("syscall %.0f\n", (t1 - t0) * 1e9 / iters);
	printf("procmem8 %.0f\n", (t2 - t1) * 1e9 / iters);
}

int main(int argc, char **argv)
{
	unsigned int iters = argc > 1 ? (unsigned int)atoi(argv[1]) : 50000;
	static uint8_t src_buf[PIECE] __attribute__((aligned(4096)));
	static uint8_t dst_buf[PIECE] __attribute__((aligned(4096)));
	uint8_t *bounce = aligned_alloc(4096, PIECE);
	struct pair p = { .src_buf = src_buf, .dst_buf = dst_buf };

	memset(bounce, 3, PIECE);
	p.src = holder(src_buf, 1);
	p.dst = holder(dst_buf, 2);
	p.src_mem = open_mem(p.src);
	p.dst_mem = open_mem(p.dst);
	if (p.src < 0 || p.dst < 0 || p.src_mem < 0 || p.dst_mem < 0) {
		perror("setup");
		return 1;
	}
	report("pvm", &p, bounce, pvm_read, pvm_write, iters);
	report("procmem", &p, bounce, proc_read, proc_write, iters);
	memcpy_report(iters);
	small_report(&p, iters * 4);
	kill(p.src, SIGKILL);
	kill(p.dst, SIGKILL);
	waitpid(p.src, NULL, 0);
	waitpid(p.dst, NULL, 0);
	return 0;
}
