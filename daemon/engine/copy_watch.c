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
 * What it reports it finds from the copy's fd (its link names
 * /proc/PID/mem, its owner the uid) and the process's maps: the daemon's
 * own /proc/PID/maps fd of that client when it may not open the file
 * (a daemon that runs as its own user), /proc/self/maps for the daemon's
 * mappings of shared files.  A mapping on a FUSE file system has a
 * connection under /sys/fs/fuse/connections named by its device; writing
 * to its `abort` fails the waiting requests, and with them the copy.
 */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "copy_watch.h"
#include "engine.h"
#include "log.h"

#define MAX_SLOTS	(IBVD_ENGINE_MAX_THREADS + 2)
#define PERIOD_MAX_MS	1000u
#define PERIOD_MIN_MS	10u
#define FUSE_CONNECTIONS	"/sys/fs/fuse/connections"

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

static long futex(uint32_t *word, int op, uint32_t val,
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
		futex(&ibvd_copy_watch_asleep, FUTEX_WAKE_PRIVATE, 1, NULL);
}

void ibvd_copy_watch_thread(const char *name)
{
	unsigned int i = __atomic_fetch_add(&nslots, 1, __ATOMIC_RELAXED);

	if (i >= MAX_SLOTS)
		return;
	snprintf(slots[i].name, sizeof(slots[i].name), "%s", name);
	ibvd_copy_slot = &slots[i];
}

/* ---- what a stuck copy is in ------------------------------------------ */

/* Whether a maps line is of the mapping that holds addr. */
static bool line_holds(const char *line, uint64_t addr)
{
	unsigned long long start, end;

	return sscanf(line, "%llx-%llx", &start, &end) == 2 &&
	       addr >= start && addr < end;
}

/* A line into out, cut to its size. */
static void keep_line(char *out, size_t size, const char *line)
{
	size_t len = strlen(line);

	if (len >= size)
		len = size - 1;
	memcpy(out, line, len);
	out[len] = '\0';
}

/*
 * The mapping of [addr] in a maps file: its line, or false.  With pread,
 * so that no file offset is shared: the control thread reads the same
 * open file of a client (verbs/mr/mem.c).
 */
static bool maps_line(int fd, uint64_t addr, char *line, size_t size)
{
	char buf[8192];
	size_t have = 0;
	off_t at = 0;

	for (;;) {
		ssize_t n = pread(fd, buf + have, sizeof(buf) - 1 - have, at);
		char *p = buf, *nl;

		if (n <= 0)
			break;
		at += n;
		have += (size_t)n;
		buf[have] = '\0';
		while ((nl = strchr(p, '\n'))) {
			*nl = '\0';
			if (line_holds(p, addr)) {
				keep_line(line, size, p);
				return true;
			}
			p = nl + 1;
		}
		have -= (size_t)(p - buf);
		/* a line longer than the buffer: its start is enough */
		if (have == sizeof(buf) - 1) {
			if (line_holds(buf, addr)) {
				keep_line(line, size, buf);
				return true;
			}
			have = 0;
		}
		memmove(buf, p, have);
	}
	return false;
}

/* An fd of ours whose link reads `want` (a client's maps), or -1. */
static int fd_linked_to(const char *want)
{
	char link[PATH_MAX];
	struct dirent *e;
	int found = -1;
	DIR *dir = opendir("/proc/self/fd");

	if (!dir)
		return -1;
	while (found < 0 && (e = readdir(dir))) {
		ssize_t n;

		n = readlinkat(dirfd(dir), e->d_name, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		if (strcmp(link, want) == 0)
			found = atoi(e->d_name);
	}
	closedir(dir);
	return found;
}

/* Process pid's maps: opened (close it), or the client's fd we hold. */
static int open_maps(long pid, bool *ours)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/maps", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	*ours = fd >= 0;
	return fd >= 0 ? fd : fd_linked_to(path);
}

/*
 * From a maps line, what backs it: "PATH (device M:N, FUSE connection C)",
 * and C (or 0) in *conn.
 */
static void describe_mapping(const char *line, char *out, size_t size,
			     unsigned long *conn)
{
	unsigned int major, minor;
	char path[64];
	struct stat st;
	int off = 0;

	*conn = 0;
	if (sscanf(line, "%*x-%*x %*s %*x %x:%x %*u %n", &major, &minor,
		   &off) < 2 || !off) {
		snprintf(out, size, "%s", line);
		return;
	}
	snprintf(path, sizeof(path), FUSE_CONNECTIONS "/%lu",
		 (unsigned long)((major << 20) | minor));
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		*conn = (unsigned long)((major << 20) | minor);
	snprintf(out, size, "%s (device %u:%u%s%s)",
		 line[off] ? line + off : "an anonymous mapping", major, minor,
		 *conn ? ", FUSE connection " : "",
		 *conn ? path + sizeof(FUSE_CONNECTIONS) : "");
}

/* Whose memory the copy is in: "pid P (uid U)" and what maps it. */
static void describe_client(int fd, uint64_t addr, char *who,
			    size_t who_size, char *what, size_t what_size,
			    unsigned long *conn)
{
	char path[64], link[PATH_MAX], line[PATH_MAX + 128];
	bool ours = false;
	struct stat st;
	long pid = 0;
	ssize_t n;
	int maps;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n > 0) {
		link[n] = '\0';
		sscanf(link, "/proc/%ld/mem", &pid);
	}
	if (!pid || fstat(fd, &st) < 0) {
		snprintf(who, who_size, "a client's memory (fd %d)", fd);
		snprintf(what, what_size, "a mapping the daemon cannot see");
		*conn = 0;
		return;
	}
	snprintf(who, who_size, "the memory of pid %ld (uid %u)", pid,
		 (unsigned int)st.st_uid);
	maps = open_maps(pid, &ours);
	if (maps >= 0 && maps_line(maps, addr, line, sizeof(line)))
		describe_mapping(line, what, what_size, conn);
	else
		snprintf(what, what_size, "a mapping the daemon cannot read");
	if (ours)
		close(maps);
}

/* The first of the daemon's own mappings in the copy that is a file's. */
static void describe_own(const void *const map[2], char *what, size_t size,
			 unsigned long *conn)
{
	char line[PATH_MAX + 128];
	int maps = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	unsigned int i;

	snprintf(what, size, "a mapping the daemon cannot read");
	*conn = 0;
	for (i = 0; maps >= 0 && i < 2; i++) {
		if (!map[i] || !maps_line(maps, (uint64_t)(uintptr_t)map[i],
					  line, sizeof(line)))
			continue;
		describe_mapping(line, what, size, conn);
		if (*conn)
			break;
	}
	if (maps >= 0)
		close(maps);
}

/* A copy has stood `ms`: say what it waits for and how to free it. */
static void report(const struct ibvd_copy_slot *s, uint64_t seq, uint64_t ms)
{
	char who[128], what[PATH_MAX + 192], remedy[128];
	const void *map[2];
	unsigned long conn;
	uint64_t addr, len;
	int fd;

	fd = __atomic_load_n(&s->fd, __ATOMIC_RELAXED);
	addr = __atomic_load_n(&s->addr, __ATOMIC_RELAXED);
	len = __atomic_load_n(&s->len, __ATOMIC_RELAXED);
	map[0] = __atomic_load_n(&s->map[0], __ATOMIC_RELAXED);
	map[1] = __atomic_load_n(&s->map[1], __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) != seq)
		return;		/* it returned meanwhile */
	if (fd >= 0) {
		describe_client(fd, addr, who, sizeof(who), what,
				sizeof(what), &conn);
	} else {
		snprintf(who, sizeof(who), "a mapped MR");
		describe_own(map, what, sizeof(what), &conn);
	}
	/* The description is of the copy we saw only if it still runs. */
	if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != seq)
		return;
	if (conn)
		snprintf(remedy, sizeof(remedy), "`echo 1 > " FUSE_CONNECTIONS
			 "/%lu/abort` (as root) fails it", conn);
	else
		snprintf(remedy, sizeof(remedy),
			 "it ends when the file system answers");
	ibvd_log(IBVD_LOG_ERR,
		 "%s: a copy of [0x%" PRIx64 ", +%" PRIu64 ") in %s has not "
		 "returned for %" PRIu64 " ms: it waits for %s. The thread's "
		 "other contexts, and every request that creates or destroys "
		 "objects, wait for it; %s",
		 s->name, addr, len, who, ms, what, remedy);
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
		if (!l->reported && ms >= limit_ms) {
			report(&slots[i], seq, ms);
			l->reported = true;
		}
	}
	return busy;
}

/* Whether any mark is in a copy, after every thread passed a fence. */
static bool any_copying(void)
{
	unsigned int i, n = __atomic_load_n(&nslots, __ATOMIC_ACQUIRE);

	syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
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
		futex(&ibvd_copy_watch_asleep, FUTEX_WAIT_PRIVATE, 1, NULL);
}

/* ms, or until a reconfiguration or the stop (0: no time limit). */
static void sleep_period(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	uint32_t word = __atomic_load_n(&wake_word, __ATOMIC_ACQUIRE);

	if (!__atomic_load_n(&stopping, __ATOMIC_ACQUIRE))
		futex(&wake_word, FUTEX_WAIT_PRIVATE, word, ms ? &ts : NULL);
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
	sigset_t all, old;
	int ret;

	stuck_ms = ms;
	stopping = false;
	can_sleep = syscall(SYS_membarrier,
			    MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
	if (!can_sleep)
		log_info("copy watch: no membarrier here; it looks every %u ms",
			 PERIOD_MAX_MS);
	ibvd_copy_watch_thread(caller_name);
	/* signals are the control thread's, as with the engine threads */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(&thread, NULL, watchdog_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret)
		return -ret;
	pthread_setname_np(thread, "ibvd-copywatch");
	running = true;
	return 0;
}

static void poke(void)
{
	__atomic_add_fetch(&wake_word, 1, __ATOMIC_RELEASE);
	futex(&wake_word, FUTEX_WAKE_PRIVATE, 1, NULL);
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
	running = false;
}
