/*
 * The watchdog of copies that do not return (copy_watch.h).
 *
 * A thread of its own, since the threads it watches may all be stopped:
 * the engine thread in the copy, and with it the control thread, which
 * waits for the objects lock that thread holds.  It takes no lock of
 * theirs.  Every period it reads each mark as a seqlock: a copy whose
 * seq is odd and the same as at its last look has stood at least that
 * long.  A period with no copy at all puts it to sleep until the next
 * copy begins (its copier wakes it), so an idle daemon has no timer.
 *
 * It reports at once what was recorded without looking at the copy's
 * memory (the client's pid and uid, by the copy's fd), and leaves what
 * backs the memory to copy_describe.c, whose look may wait as long as
 * the copy.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "copy_watch.h"
#include "core/thread.h"
#include "engine/engine.h"
#include "log.h"

#define MAX_SLOTS	(IBVD_ENGINE_MAX_THREADS + 2)
#define PERIOD_MAX_MS	1000u
#define PERIOD_MIN_MS	10u

__thread struct ibvd_copy_slot *ibvd_copy_slot;
uint32_t ibvd_copy_watch_asleep;

static struct ibvd_copy_slot slots[MAX_SLOTS];
static unsigned int nslots;		/* atomic: slots handed out */
static unsigned int stuck_ms;		/* atomic */
static uint32_t wake_word;		/* futex: bumped to end a timed wait */
static bool stopping;			/* atomic */
static bool can_sleep;			/* membarrier works here */
static pthread_t thread;
static bool running;

/* What the watchdog remembers of a mark between two looks. */
struct look {
	uint64_t seq;
	uint64_t since_ns;		/* when it first saw that seq */
	bool reported;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

long ibvd_copy_futex(uint32_t *word, int op, uint32_t val,
		     const struct timespec *timeout)
{
	return syscall(SYS_futex, word, op, val, timeout, NULL, 0);
}

void ibvd_copy_watch_wake(void)
{
	uint32_t one = 1;

	if (__atomic_compare_exchange_n(&ibvd_copy_watch_asleep, &one, 0,
					false, __ATOMIC_RELAXED,
					__ATOMIC_RELAXED))
		ibvd_copy_futex(&ibvd_copy_watch_asleep, FUTEX_WAKE_PRIVATE, 1,
				NULL);
}

void ibvd_copy_watch_thread(const char *name)
{
	unsigned int i = __atomic_fetch_add(&nslots, 1, __ATOMIC_RELAXED);

	if (i >= MAX_SLOTS)
		return;
	snprintf(slots[i].name, sizeof(slots[i].name), "%s", name);
	ibvd_copy_slot = &slots[i];
}

/* ---- reporting -------------------------------------------------------- */

/*
 * A copy has stood `ms`: say whose memory it is at once, from what was
 * recorded without touching it, and hand the look at what backs it to
 * the looking thread (copy_describe.c).  Whether it was said.
 */
static bool report(const struct ibvd_copy_slot *s, uint64_t seq, uint64_t ms)
{
	struct ibvd_copy_look l = { .maps_fd = -1 };
	char who[96];
	uint64_t len;
	pid_t pid;
	uid_t uid;
	int fd;

	fd = __atomic_load_n(&s->fd, __ATOMIC_RELAXED);
	l.addr = __atomic_load_n(&s->addr, __ATOMIC_RELAXED);
	len = __atomic_load_n(&s->len, __ATOMIC_RELAXED);
	l.map[0] = __atomic_load_n(&s->map[0], __ATOMIC_RELAXED);
	l.map[1] = __atomic_load_n(&s->map[1], __ATOMIC_RELAXED);
	if (fd >= 0 && ibvd_copy_client_of(fd, &pid, &uid, &l.maps_fd))
		snprintf(who, sizeof(who), "the memory of pid %d (uid %u)",
			 (int)pid, (unsigned int)uid);
	else if (fd >= 0)
		snprintf(who, sizeof(who), "a client's memory (fd %d)", fd);
	else
		snprintf(who, sizeof(who), "a mapped MR");
	/* all of that is this copy's only if it still runs */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) != seq) {
		if (l.maps_fd >= 0)
			close(l.maps_fd);	/* a procfs file: no FLUSH */
		return false;
	}
	ibvd_log(IBVD_LOG_ERR,
		 "%s: a copy of [0x%" PRIx64 ", +%" PRIu64 ") in %s has not "
		 "returned for %" PRIu64 " ms; the thread's other contexts, "
		 "and every request that creates or destroys objects, wait "
		 "for it", s->name, l.addr, len, who, ms);
	snprintf(l.name, sizeof(l.name), "%s", s->name);
	if (!ibvd_copy_look(&l) && l.maps_fd >= 0)
		close(l.maps_fd);
	return true;
}

/* ---- the watchdog ------------------------------------------------------ */

/* One look at every mark; whether any copy ran since the last. */
static bool look_all(struct look *looks, uint64_t now, unsigned int limit_ms)
{
	unsigned int i, n = __atomic_load_n(&nslots, __ATOMIC_ACQUIRE);
	bool busy = false;

	for (i = 0; i < n && i < MAX_SLOTS; i++) {
		struct look *l = &looks[i];
		uint64_t seq = __atomic_load_n(&slots[i].seq, __ATOMIC_ACQUIRE);
		uint64_t ms;

		if (seq != l->seq) {
			if (l->reported)
				ibvd_log(IBVD_LOG_NOTICE, "%s: the copy that "
					 "stood returned after %" PRIu64 " ms",
					 slots[i].name,
					 (now - l->since_ns) / 1000000);
			l->seq = seq;
			l->since_ns = now;
			l->reported = false;
			busy = true;
			continue;
		}
		if (!(seq & 1))
			continue;
		busy = true;
		ms = (now - l->since_ns) / 1000000;
		if (!l->reported && ms >= limit_ms)
			l->reported = report(&slots[i], seq, ms);
	}
	return busy;
}

/*
 * Whether any mark is in a copy, after every thread passed a fence; as
 * good as yes when the fence failed (a copier may not have seen us).
 */
static bool any_copying(void)
{
	unsigned int i, n = __atomic_load_n(&nslots, __ATOMIC_ACQUIRE);

	if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0))
		return true;
	for (i = 0; i < n && i < MAX_SLOTS; i++)
		if (__atomic_load_n(&slots[i].seq, __ATOMIC_ACQUIRE) & 1)
			return true;
	return false;
}

/* Until a copy begins (or a reconfiguration, or the stop). */
static void sleep_until_copy(void)
{
	__atomic_store_n(&ibvd_copy_watch_asleep, 1, __ATOMIC_RELAXED);
	if (any_copying() || __atomic_load_n(&stopping, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&ibvd_copy_watch_asleep, 0, __ATOMIC_RELAXED);
		return;
	}
	while (__atomic_load_n(&ibvd_copy_watch_asleep, __ATOMIC_ACQUIRE))
		ibvd_copy_futex(&ibvd_copy_watch_asleep, FUTEX_WAIT_PRIVATE, 1,
				NULL);
}

/* ms, or until a reconfiguration or the stop (0: no time limit). */
static void sleep_period(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	uint32_t word = __atomic_load_n(&wake_word, __ATOMIC_ACQUIRE);

	if (!__atomic_load_n(&stopping, __ATOMIC_ACQUIRE))
		ibvd_copy_futex(&wake_word, FUTEX_WAIT_PRIVATE, word,
				ms ? &ts : NULL);
}

static unsigned int period_ms(unsigned int limit_ms)
{
	unsigned int p = limit_ms / 2;

	if (p > PERIOD_MAX_MS)
		return PERIOD_MAX_MS;
	return p < PERIOD_MIN_MS ? PERIOD_MIN_MS : p;
}

static void *watchdog_main(void *arg)
{
	static struct look looks[MAX_SLOTS];

	(void)arg;
	while (!__atomic_load_n(&stopping, __ATOMIC_ACQUIRE)) {
		unsigned int limit = __atomic_load_n(&stuck_ms, __ATOMIC_RELAXED);

		/* switched off: copies do not wake us, a new setting does */
		if (!limit) {
			sleep_period(0);
			continue;
		}
		if (!look_all(looks, now_ns(), limit) && can_sleep)
			sleep_until_copy();
		else
			sleep_period(period_ms(limit));
	}
	return NULL;
}

int ibvd_copy_watch_start(unsigned int ms, const char *caller_name)
{
	int ret;

	stuck_ms = ms;
	stopping = false;
	can_sleep = syscall(SYS_membarrier,
			    MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
	if (!can_sleep)
		log_info("copy watch: no membarrier here; it looks every "
			 "half its limit, at most every %u ms", PERIOD_MAX_MS);
	ibvd_copy_watch_thread(caller_name);
	ret = ibvd_copy_look_start();
	if (ret < 0)
		return ret;
	ret = ibvd_thread_spawn(&thread, NULL, watchdog_main, NULL,
				"ibvd-copywatch");
	if (ret < 0) {
		ibvd_copy_look_stop();
		return ret;
	}
	running = true;
	return 0;
}

static void poke(void)
{
	__atomic_add_fetch(&wake_word, 1, __ATOMIC_RELEASE);
	ibvd_copy_futex(&wake_word, FUTEX_WAKE_PRIVATE, 1, NULL);
	ibvd_copy_watch_wake();
}

void ibvd_copy_watch_configure(unsigned int ms)
{
	__atomic_store_n(&stuck_ms, ms, __ATOMIC_RELAXED);
	poke();
}

void ibvd_copy_watch_stop(void)
{
	if (!running)
		return;
	__atomic_store_n(&stopping, true, __ATOMIC_RELEASE);
	poke();
	pthread_join(thread, NULL);
	ibvd_copy_look_stop();
	running = false;
}
