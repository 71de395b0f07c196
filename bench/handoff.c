/*
 * bench/handoff.c: what one thread handing the CPU to another costs here.
 *
 * Two processes pass a token back and forth through a shared futex word;
 * whoever waits sleeps in FUTEX_WAIT.  Pinned to one CPU, every pass is a
 * context switch (block, switch, wake); unpinned, the two may run on two
 * CPUs and each pass is a cross-CPU wakeup.  The engine's path pays one
 * of these (or more) per message whenever the CPUs are fewer than the
 * threads that want them: that is the floor under "through the engine"
 * latencies on a small machine (bench/copies, RESULTS-copies.md).
 *
 * Prints "handoff one_cpu_us two_cpus_us": microseconds per pass, the
 * median of 9 batches of 20,000 round trips.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#define ROUNDS	20000u
#define BATCHES	9

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void wait_for(uint32_t *word, uint32_t want)
{
	uint32_t v;

	while ((v = __atomic_load_n(word, __ATOMIC_ACQUIRE)) != want)
		syscall(SYS_futex, word, FUTEX_WAIT, v, NULL, NULL, 0);
}

static void hand_over(uint32_t *word, uint32_t v)
{
	__atomic_store_n(word, v, __ATOMIC_RELEASE);
	syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0) {
		perror("sched_setaffinity");
		exit(1);
	}
}

/* Microseconds per pass of one batch; the child echoes every token. */
static double batch(uint32_t *word)
{
	uint64_t t0;
	pid_t child;
	uint32_t i;
	int status;

	*word = 0;
	child = fork();
	if (child < 0) {
		perror("fork");
		exit(1);
	}
	if (child == 0) {
		/* pinned or not, as the parent is (fork keeps the affinity) */
		for (i = 0; i < ROUNDS; i++) {
			wait_for(word, 2 * i + 1);
			hand_over(word, 2 * i + 2);
		}
		_exit(0);
	}
	t0 = now_ns();
	for (i = 0; i < ROUNDS; i++) {
		hand_over(word, 2 * i + 1);
		wait_for(word, 2 * i + 2);
	}
	t0 = now_ns() - t0;
	if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "handoff: the child failed\n");
		exit(1);
	}
	return (double)t0 / 1e3 / (2.0 * ROUNDS);
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(uint32_t *word, int one_cpu)
{
	double v[BATCHES];
	cpu_set_t all;
	int i;

	if (one_cpu)
		pin(0);
	for (i = 0; i < BATCHES; i++)
		v[i] = batch(word);
	/* Back to every CPU for the next measurement. */
	CPU_ZERO(&all);
	for (i = 0; i < CPU_SETSIZE; i++)
		CPU_SET(i, &all);
	sched_setaffinity(0, sizeof(all), &all);
	qsort(v, BATCHES, sizeof(v[0]), by_value);
	return v[BATCHES / 2];
}

int main(void)
{
	uint32_t *word = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	double one, two;

	if (word == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	one = median(word, 1);
	two = median(word, 0);
	printf("handoff %.3f %.3f\n", one, two);
	return 0;
}
