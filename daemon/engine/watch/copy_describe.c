/*
 * What a stuck copy waits for (copy_watch.h): whose memory, which file
 * backs it, and for FUSE the connection whose abort fails it.
 *
 * Looking at a process's mappings may itself wait for the copy: the
 * fault that stands holds that process's mmap lock for reading, a
 * writer (the process calling mmap, or exiting) queues behind it, and
 * on kernels before 6.17 reading /proc/PID/maps queues behind the
 * writer.  So the watchdog never looks itself: it hands the look to a
 * thread of its own, made at start (making one then could wait on the
 * daemon's own mmap lock, for a copy on a mapped MR), and goes on; a
 * look that does not return takes only that thread, and later stuck
 * copies are then reported without their file.
 *
 * A client is known by its /proc/PID/mem fd: ATTACH_MEMORY registers the
 * fd with the pid (the peer credentials', outside any pid namespace the
 * client is in), the uid and its /proc/PID/maps fd, and the last put of
 * its memory removes it before closing them.  A look uses a duplicate of
 * the maps fd made under the table's lock, so a closed and reused number
 * is never read; and pread, so that no offset is shared with the control
 * thread (verbs/mr/mem.c reads the same open file).
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "copy_watch.h"
#include "core/thread.h"
#include "log.h"

#define FUSE_CONNECTIONS	"/sys/fs/fuse/connections"
#define CLIENT_BUCKETS		1024u

/* ---- the clients, by their mem fd ------------------------------------ */

struct client {
	int mem_fd;
	pid_t pid;
	uid_t uid;
	int maps_fd;
	struct client *next;
};

static pthread_mutex_t clients_lock = PTHREAD_MUTEX_INITIALIZER;
static struct client *clients[CLIENT_BUCKETS];

static struct client **bucket(int mem_fd)
{
	return &clients[(unsigned int)mem_fd % CLIENT_BUCKETS];
}

void ibvd_copy_watch_client(int mem_fd, pid_t pid, uid_t uid, int maps_fd)
{
	struct client *c = malloc(sizeof(*c));

	/* without an entry a stuck copy is still reported, by fd */
	if (!c)
		return;
	*c = (struct client){ mem_fd, pid, uid, maps_fd, NULL };
	pthread_mutex_lock(&clients_lock);
	c->next = *bucket(mem_fd);
	*bucket(mem_fd) = c;
	pthread_mutex_unlock(&clients_lock);
}

void ibvd_copy_watch_client_gone(int mem_fd)
{
	struct client **p, *c = NULL;

	pthread_mutex_lock(&clients_lock);
	for (p = bucket(mem_fd); *p; p = &(*p)->next)
		if ((*p)->mem_fd == mem_fd) {
			c = *p;
			*p = c->next;
			break;
		}
	pthread_mutex_unlock(&clients_lock);
	free(c);
}

bool ibvd_copy_client_of(int mem_fd, pid_t *pid, uid_t *uid, int *maps_dup)
{
	const struct client *c;
	bool found = false;

	pthread_mutex_lock(&clients_lock);
	for (c = *bucket(mem_fd); c && !found; c = c->next)
		if (c->mem_fd == mem_fd) {
			*pid = c->pid;
			*uid = c->uid;
			*maps_dup = fcntl(c->maps_fd, F_DUPFD_CLOEXEC, 3);
			found = true;
		}
	pthread_mutex_unlock(&clients_lock);
	return found;
}

/* ---- reading a maps file ---------------------------------------------- */

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

/* The line of the mapping that holds addr in the maps file fd, or false. */
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

/* What a mapping's line says backs it. */
struct backing {
	char path[PATH_MAX];		/* "" for an anonymous mapping */
	unsigned int major, minor;
	unsigned long fuse_conn;	/* 0: not FUSE */
};

static bool parse_backing(const char *line, struct backing *b)
{
	char dir[64];
	struct stat st;
	int off = 0;

	memset(b, 0, sizeof(*b));
	if (sscanf(line, "%*x-%*x %*s %*x %x:%x %*u %n", &b->major,
		   &b->minor, &off) < 2 || !off)
		return false;
	keep_line(b->path, sizeof(b->path), line + off);
	/* a FUSE connection is named by its device, as the kernel's dev_t */
	snprintf(dir, sizeof(dir), FUSE_CONNECTIONS "/%lu",
		 (unsigned long)((b->major << 20) | b->minor));
	if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
		b->fuse_conn = (unsigned long)((b->major << 20) | b->minor);
	return true;
}

/* ---- the looking thread ------------------------------------------------ */

/*
 * The looker sleeps while the word is LOOK_IDLE.  A stop changes the word
 * too, not just the flag: the looker may have seen the flag clear and be
 * on its way into the wait, where only the word is compared, and a wake
 * that came before the wait would be lost (the exit joins the thread).
 */
#define LOOK_IDLE	0u
#define LOOK_HANDED	1u
#define LOOK_STOP	2u

static struct ibvd_copy_look job;
static uint32_t job_word;		/* futex: LOOK_* */
static bool busy;			/* atomic: a look runs or waits */
static bool stopping;
static pthread_t looker;
static bool looker_running;

/* The first of the look's places that a file backs, FUSE first. */
static bool look_up(const struct ibvd_copy_look *l, struct backing *out,
		    const char **whose)
{
	char line[PATH_MAX + 128];
	struct backing b;
	bool found = false;
	unsigned int i;
	int self;

	if (l->maps_fd >= 0 && maps_line(l->maps_fd, l->addr, line, sizeof(line)) &&
	    parse_backing(line, &b) && b.path[0]) {
		*out = b;
		*whose = "the client's";
		found = true;
		if (b.fuse_conn)
			return true;
	}
	self = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	for (i = 0; self >= 0 && i < 2; i++) {
		if (!l->map[i] ||
		    !maps_line(self, (uint64_t)(uintptr_t)l->map[i], line,
			       sizeof(line)) ||
		    !parse_backing(line, &b) || !b.path[0] || b.path[0] != '/')
			continue;
		if (!found || b.fuse_conn) {
			*out = b;
			*whose = "the daemon's mapping of an MR,";
			found = true;
		}
		if (b.fuse_conn)
			break;
	}
	if (self >= 0)
		close(self);
	return found;
}

static void look(const struct ibvd_copy_look *l)
{
	const char *whose = "";
	struct backing b;

	if (!look_up(l, &b, &whose)) {
		ibvd_log(IBVD_LOG_ERR, "%s: the stuck copy's memory is no "
			 "file's that the daemon can see", l->name);
		return;
	}
	if (b.fuse_conn)
		ibvd_log(IBVD_LOG_ERR, "%s: the stuck copy waits for FUSE "
			 "connection %lu: `echo 1 > " FUSE_CONNECTIONS
			 "/%lu/abort` (as root) fails the copy, and the "
			 "daemon goes on; the file, %s: %s (device %u:%u)",
			 l->name, b.fuse_conn, b.fuse_conn, whose, b.path,
			 b.major, b.minor);
	else
		ibvd_log(IBVD_LOG_ERR, "%s: the stuck copy waits for %s file "
			 "%s (device %u:%u): it ends when its file system "
			 "answers", l->name, whose, b.path, b.major, b.minor);
}

static void *looker_main(void *arg)
{
	(void)arg;
	for (;;) {
		uint32_t handed = LOOK_HANDED;

		while (__atomic_load_n(&job_word, __ATOMIC_ACQUIRE) == LOOK_IDLE &&
		       !__atomic_load_n(&stopping, __ATOMIC_ACQUIRE))
			ibvd_copy_futex(&job_word, FUTEX_WAIT_PRIVATE,
					LOOK_IDLE, NULL);
		if (__atomic_load_n(&stopping, __ATOMIC_ACQUIRE))
			break;
		look(&job);
		if (job.maps_fd >= 0)
			close(job.maps_fd);	/* a procfs file: no FLUSH */
		/* a stop during the look keeps its word */
		__atomic_compare_exchange_n(&job_word, &handed, LOOK_IDLE,
					    false, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED);
		__atomic_store_n(&busy, false, __ATOMIC_RELEASE);
	}
	return NULL;
}

bool ibvd_copy_look(const struct ibvd_copy_look *l)
{
	if (!looker_running || __atomic_load_n(&busy, __ATOMIC_ACQUIRE))
		return false;
	__atomic_store_n(&busy, true, __ATOMIC_RELAXED);
	job = *l;
	__atomic_store_n(&job_word, LOOK_HANDED, __ATOMIC_RELEASE);
	ibvd_copy_futex(&job_word, FUTEX_WAKE_PRIVATE, 1, NULL);
	return true;
}

int ibvd_copy_look_start(void)
{
	int ret;

	stopping = false;
	job_word = LOOK_IDLE;
	ret = ibvd_thread_spawn(&looker, NULL, looker_main, NULL,
				"ibvd-copylook");
	if (ret < 0)
		return ret;
	looker_running = true;
	return 0;
}

void ibvd_copy_look_stop(void)
{
	if (!looker_running)
		return;
	__atomic_store_n(&stopping, true, __ATOMIC_RELEASE);
	__atomic_store_n(&job_word, LOOK_STOP, __ATOMIC_RELEASE);
	ibvd_copy_futex(&job_word, FUTEX_WAKE_PRIVATE, 1, NULL);
	/* a look that never returns keeps its thread: not waited for */
	if (__atomic_load_n(&busy, __ATOMIC_ACQUIRE))
		pthread_detach(looker);
	else
		pthread_join(looker, NULL);
	looker_running = false;
}
