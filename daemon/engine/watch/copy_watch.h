/*
 * Copies of client memory that do not return (copy_watch.c).
 *
 * The engine reaches registered memory through the kernel, which cannot
 * be told to give up: a page of a FUSE file whose server stops answering,
 * or of a network file system that is gone, stops the thread that copies
 * it until the server answers or goes away (daemon/README.md, "A copy
 * that does not return").  Each thread that copies client memory marks the
 * copy it is in; a watchdog thread looks at the marks and, once one has
 * stood for the configured time, logs whose memory it is, and then what
 * backs it and how to free it (for FUSE: the connection to abort;
 * copy_describe.c).  The marks cost the copier a few stores; the watchdog
 * sleeps while nobody copies.
 */
#ifndef IBVD_COPY_WATCH_H
#define IBVD_COPY_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One thread's mark (copy_watch.c); written by that thread only. */
struct ibvd_copy_slot {
	uint64_t seq;			/* odd while a copy runs */
	int fd;				/* the client's /proc/PID/mem, or -1 */
	uint64_t addr, len;		/* in that process */
	const void *map[2];		/* the daemon's side(s): a mapped MR's
					 * pages, or a buffer of its own */
	char name[24];			/* "engine thread 0", "control thread" */
} __attribute__((aligned(64)));

/* The calling thread's mark, NULL where nothing watches (harnesses). */
extern __thread struct ibvd_copy_slot *ibvd_copy_slot;
/* Non-zero while the watchdog sleeps until a copy begins. */
extern uint32_t ibvd_copy_watch_asleep;

void ibvd_copy_watch_wake(void);

/*
 * Start the watchdog (a thread), reporting copies that stood stuck_ms
 * (0: none reported), and give the calling thread a mark: 0 or a negative
 * errno.  Before any copy; stop after the last one.
 */
int ibvd_copy_watch_start(unsigned int stuck_ms, const char *caller_name);
/* A new threshold (a reload). */
void ibvd_copy_watch_configure(unsigned int stuck_ms);
void ibvd_copy_watch_stop(void);

/* A mark for the calling thread (an engine thread at its start). */
void ibvd_copy_watch_thread(const char *name);

/*
 * A client's memory fd, as ATTACH_MEMORY took it (control thread): its
 * pid (outside any pid namespace), uid and /proc/PID/maps fd.  Gone
 * before those fds are closed.
 */
void ibvd_copy_watch_client(int mem_fd, pid_t pid, uid_t uid, int maps_fd);
void ibvd_copy_watch_client_gone(int mem_fd);

/* ---- between copy_watch.c and copy_describe.c only -------------------- */

struct timespec;

/* futex(2) on a private word: timeout NULL waits for ever. */
long ibvd_copy_futex(uint32_t *word, int op, uint32_t val,
		     const struct timespec *timeout);

/* mem_fd's client: its pid, uid and a duplicate of its maps fd (or -1). */
bool ibvd_copy_client_of(int mem_fd, pid_t *pid, uid_t *uid, int *maps_dup);

/* A look at what backs a stuck copy, by the looking thread. */
struct ibvd_copy_look {
	char name[24];			/* the copying thread's */
	int maps_fd;			/* the client's (a duplicate), or -1 */
	uint64_t addr;			/* in the client */
	const void *map[2];		/* in the daemon */
};

/* Hand l over (its maps_fd becomes the looker's); false if it is busy. */
bool ibvd_copy_look(const struct ibvd_copy_look *l);
int ibvd_copy_look_start(void);
void ibvd_copy_look_stop(void);

/*
 * Around each system call or memcpy on client memory.  The seq store and
 * the load of `asleep` need no fence between them: the watchdog, before
 * it sleeps, makes every thread pass one (membarrier), so either it sees
 * this mark or we see it asleep.
 */
static inline void ibvd_copy_begin(int fd, uint64_t addr, uint64_t len,
				   const void *a, const void *b)
{
	struct ibvd_copy_slot *s = ibvd_copy_slot;

	if (!s)
		return;
	/* this copy's fields after the last one's end (its seq) */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&s->fd, fd, __ATOMIC_RELAXED);
	__atomic_store_n(&s->addr, addr, __ATOMIC_RELAXED);
	__atomic_store_n(&s->len, len, __ATOMIC_RELAXED);
	__atomic_store_n(&s->map[0], a, __ATOMIC_RELAXED);
	__atomic_store_n(&s->map[1], b, __ATOMIC_RELAXED);
	/* Release: a watchdog that sees the odd seq sees the fields. */
	__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELEASE);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&ibvd_copy_watch_asleep, __ATOMIC_RELAXED))
		ibvd_copy_watch_wake();
}

static inline void ibvd_copy_end(void)
{
	struct ibvd_copy_slot *s = ibvd_copy_slot;

	if (s)
		__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELEASE);
}

#endif /* IBVD_COPY_WATCH_H */
