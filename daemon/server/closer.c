/*
 * Closer threads: client fds are closed here, one queue per uid.
 *
 * Each queue has at most one of its fds in close() at a time, and the
 * threads take the queues in turn.  A close that blocks for good (a FUSE
 * file whose server holds FLUSH) therefore holds one thread and its own
 * uid's later closes, nothing else: when every thread has been in one
 * close for CLOSER_STUCK_MS and another queue waits, another thread
 * starts, up to CLOSER_MAX_THREADS (so that many uids must be stuck at
 * once before the rest wait).  A queue grows as needed; once it is
 * CLOSER_BACKED_UP long, its uid's sessions are not read until it is
 * shorter again (session.c), which bounds what a stuck uid holds to one
 * frame per session plus what its closing objects release.
 *
 * Whose an fd is: recorded where it arrived (a frame, an accepted
 * connection, the reopen of a client's file for a grant), else the uid
 * whose request the control thread is serving, else nobody's (a queue of
 * its own, like any uid's).  A record outlives an fd the daemon closes
 * itself (a handler's /proc/PID/mem); every fd that comes here was
 * recorded afresh when it arrived, so such a record is never read.
 *
 * A socket's linger is taken away before its close (the client's data
 * was never ours to deliver: the connection is reset).
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "closer.h"
#include "frame.h"
#include "log.h"
#include "util.h"

#define CLOSER_MAX_THREADS	32
#define CLOSER_STUCK_MS		500
/* Queued fds of one uid past which its sessions are not read. */
#define CLOSER_BACKED_UP	1024
/* The threads only call close(): a small stack is plenty. */
#define CLOSER_STACK_SIZE	(256 * 1024)
/* At shutdown, how long to let the threads finish the queues. */
#define CLOSER_STOP_WAIT_S	1

/* Owners are kept as uid + 1, so that 0 can say "not known". */
#define OWNER_NONE		0u
#define OWNER_OF(uid)		((uint32_t)(uid) + 1u)
#define OWNER_UID(owner)	((uid_t)((owner) - 1u))

struct close_queue {
	TAILQ_ENTRY(close_queue) link;
	uint32_t owner;
	int *fds;			/* a ring of cap: count fds from head */
	size_t cap, head, count;
	bool closing;			/* one of its fds is in close() now */
};

TAILQ_HEAD(close_queue_list, close_queue);

static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct close_queue_list queues;	/* served ones move to the end */
	pthread_t threads[CLOSER_MAX_THREADS];
	uint64_t busy_since[CLOSER_MAX_THREADS];	/* ns; 0: idle */
	uint32_t busy_owner[CLOSER_MAX_THREADS];
	unsigned int nthreads;
	bool stopping;

	/* control thread only */
	bool running;
	uint32_t *owner_of;		/* by fd number */
	size_t owner_cap;
	uint32_t serving;
	struct event *grow_ev;
} closer = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.wake = PTHREAD_COND_INITIALIZER,
	.queues = TAILQ_HEAD_INITIALIZER(closer.queues),
};

/* A socket's last close resets it rather than linger (ENOTSOCK: not one). */
static void close_at_once(int fd)
{
	static const struct linger reset = { .l_onoff = 1, .l_linger = 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
	close(fd);
}

/* ---- queues (under the lock) ------------------------------------------ */

static struct close_queue *queue_find(uint32_t owner)
{
	struct close_queue *q;

	TAILQ_FOREACH(q, &closer.queues, link)
		if (q->owner == owner)
			return q;
	return NULL;
}

static int queue_grow(struct close_queue *q)
{
	size_t cap = q->cap ? 2 * q->cap : 16, i;
	int *fds = malloc(cap * sizeof(*fds));

	if (!fds)
		return -ENOMEM;
	for (i = 0; i < q->count; i++)
		fds[i] = q->fds[(q->head + i) % q->cap];
	free(q->fds);
	q->fds = fds;
	q->cap = cap;
	q->head = 0;
	return 0;
}

static int queue_push(uint32_t owner, int fd)
{
	struct close_queue *q = queue_find(owner);

	if (!q) {
		q = calloc(1, sizeof(*q));
		if (!q)
			return -ENOMEM;
		q->owner = owner;
		TAILQ_INSERT_TAIL(&closer.queues, q, link);
	}
	if (q->count == q->cap && queue_grow(q) < 0) {
		if (!q->count && !q->closing) {
			TAILQ_REMOVE(&closer.queues, q, link);
			free(q);
		}
		return -ENOMEM;
	}
	q->fds[(q->head + q->count) % q->cap] = fd;
	q->count++;
	return 0;
}

/* The first queue with an fd to close and none in close() already. */
static struct close_queue *queue_next(void)
{
	struct close_queue *q;

	TAILQ_FOREACH(q, &closer.queues, link)
		if (q->count && !q->closing)
			return q;
	return NULL;
}

static void queue_put(struct close_queue *q)
{
	if (q->count || q->closing)
		return;
	TAILQ_REMOVE(&closer.queues, q, link);
	free(q->fds);
	free(q);
}

/* ---- threads ------------------------------------------------------------ */

static void *closer_main(void *arg)
{
	unsigned int slot = (unsigned int)(uintptr_t)arg;
	struct close_queue *q;
	int fd;

	pthread_mutex_lock(&closer.lock);
	for (;;) {
		q = queue_next();
		if (!q) {
			if (closer.stopping)
				break;
			pthread_cond_wait(&closer.wake, &closer.lock);
			continue;
		}
		fd = q->fds[q->head];
		q->head = (q->head + 1) % q->cap;
		q->count--;
		q->closing = true;
		/* the others' turn next */
		TAILQ_REMOVE(&closer.queues, q, link);
		TAILQ_INSERT_TAIL(&closer.queues, q, link);
		closer.busy_since[slot] = ibvd_mono_ns();
		closer.busy_owner[slot] = q->owner;
		pthread_mutex_unlock(&closer.lock);
		close_at_once(fd);
		pthread_mutex_lock(&closer.lock);
		closer.busy_since[slot] = 0;
		q->closing = false;
		queue_put(q);
	}
	pthread_mutex_unlock(&closer.lock);
	return NULL;
}

static int closer_thread_start(void)
{
	pthread_attr_t attr;
	sigset_t all, old;
	int ret;

	ret = -pthread_attr_init(&attr);
	if (ret < 0)
		return ret;
	pthread_attr_setstacksize(&attr, CLOSER_STACK_SIZE);
	/* Signals are the control thread's business. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = -pthread_create(&closer.threads[closer.nthreads], &attr,
			      closer_main, (void *)(uintptr_t)closer.nthreads);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (ret == 0)
		closer.nthreads++;
	return ret;
}

/* Under the lock: the owner of the oldest close in progress, or 0 if none is stuck. */
static uint32_t every_thread_stuck(void)
{
	uint64_t now = ibvd_mono_ns(), stuck_ns = CLOSER_STUCK_MS * 1000000ull;
	uint64_t oldest = now;
	uint32_t owner = OWNER_NONE;
	unsigned int i;

	for (i = 0; i < closer.nthreads; i++) {
		if (!closer.busy_since[i] || now - closer.busy_since[i] < stuck_ns)
			return OWNER_NONE;
		if (closer.busy_since[i] <= oldest) {
			oldest = closer.busy_since[i];
			owner = closer.busy_owner[i] ? closer.busy_owner[i] : UINT32_MAX;
		}
	}
	return owner;
}

/*
 * Under the lock: true while a queue may wait for a thread (look again
 * later).  Starts another thread once every one has been in one close
 * for CLOSER_STUCK_MS.
 */
static bool closer_short_of_threads(void)
{
	uint32_t stuck;
	unsigned int i;

	if (!queue_next() || closer.nthreads >= CLOSER_MAX_THREADS)
		return false;
	for (i = 0; i < closer.nthreads; i++)
		if (!closer.busy_since[i])
			return false;	/* woken: it takes the queue */
	stuck = every_thread_stuck();
	if (stuck == OWNER_NONE)
		return true;
	if (closer_thread_start() < 0)
		return true;
	if (stuck == UINT32_MAX)
		log_warn("an fd has been closing for over %u ms: closer thread %u started",
			 CLOSER_STUCK_MS, closer.nthreads);
	else
		log_warn("uid %u: closing its file has taken over %u ms (a FUSE server not answering?): closer thread %u started",
			 (unsigned int)OWNER_UID(stuck), CLOSER_STUCK_MS,
			 closer.nthreads);
	return true;		/* it may find another stuck queue first */
}

static void closer_watch(void)
{
	struct timeval tv = { 0, CLOSER_STUCK_MS * 1000 };

	if (closer.grow_ev && !evtimer_pending(closer.grow_ev, NULL))
		evtimer_add(closer.grow_ev, &tv);
}

/* Until a thread is free for every waiting queue, look again now and then. */
static void closer_grow_cb(evutil_socket_t unused, short what, void *arg)
{
	bool short_of_threads;

	pthread_mutex_lock(&closer.lock);
	short_of_threads = closer_short_of_threads();
	pthread_mutex_unlock(&closer.lock);
	if (short_of_threads)
		closer_watch();
}

/* ---- the control thread's side ------------------------------------------ */

static uint32_t owner_take(int fd)
{
	uint32_t owner = OWNER_NONE;

	if ((size_t)fd < closer.owner_cap) {
		owner = closer.owner_of[fd];
		closer.owner_of[fd] = OWNER_NONE;
	}
	return owner != OWNER_NONE ? owner : closer.serving;
}

void ibvd_closer_own(int fd, uid_t uid)
{
	size_t cap = closer.owner_cap;
	uint32_t *grown;

	if (fd < 0)
		return;
	if ((size_t)fd >= cap) {
		while ((size_t)fd >= cap)
			cap = cap ? 2 * cap : 1024;
		grown = realloc(closer.owner_of, cap * sizeof(*grown));
		if (!grown)
			return;		/* then it is whoever's we serve */
		memset(grown + closer.owner_cap, 0,
		       (cap - closer.owner_cap) * sizeof(*grown));
		closer.owner_of = grown;
		closer.owner_cap = cap;
	}
	closer.owner_of[fd] = OWNER_OF(uid);
}

void ibvd_closer_serving(uid_t uid)
{
	closer.serving = OWNER_OF(uid);
}

void ibvd_closer_serving_none(void)
{
	closer.serving = OWNER_NONE;
}

void ibvd_close_client_fd(int fd)
{
	uint32_t owner;
	bool short_of_threads = false;
	int ret = -ESRCH;

	if (fd < 0)
		return;
	owner = owner_take(fd);
	if (closer.running) {
		pthread_mutex_lock(&closer.lock);
		ret = queue_push(owner, fd);
		if (ret == 0) {
			pthread_cond_signal(&closer.wake);
			short_of_threads = closer_short_of_threads();
		}
		pthread_mutex_unlock(&closer.lock);
	}
	/* Before start, after stop, or out of memory: rather a blocking close than a leak. */
	if (ret < 0)
		close_at_once(fd);
	if (short_of_threads)
		closer_watch();
}

void ibvd_close_client_socket(int fd)
{
	/*
	 * The client sees the hang-up now, even while its queue waits for
	 * another of its fds; the close itself may release fds still queued.
	 */
	shutdown(fd, SHUT_RDWR);
	ibvd_close_client_fd(fd);
}

bool ibvd_closer_backed_up(uid_t uid)
{
	const struct close_queue *q;
	bool backed_up;

	pthread_mutex_lock(&closer.lock);
	q = queue_find(OWNER_OF(uid));
	backed_up = q && q->count >= CLOSER_BACKED_UP;
	pthread_mutex_unlock(&closer.lock);
	return backed_up;
}

int ibvd_closer_start(struct event_base *base)
{
	int ret;

	closer.grow_ev = evtimer_new(base, closer_grow_cb, NULL);
	if (!closer.grow_ev)
		return -ENOMEM;
	pthread_mutex_lock(&closer.lock);
	ret = closer_thread_start();
	pthread_mutex_unlock(&closer.lock);
	if (ret < 0) {
		event_free(closer.grow_ev);
		closer.grow_ev = NULL;
		return ret;
	}
	closer.running = true;
	ibvd_frame_set_close_hook(ibvd_close_client_fd);
	return 0;
}

/*
 * Let the threads close what is queued, for a moment: one stuck close
 * must not hold up the exit (the kernel closes whatever is left).
 */
void ibvd_closer_stop(void)
{
	struct timespec deadline;
	unsigned int i;

	if (!closer.running)
		return;
	ibvd_frame_set_close_hook(NULL);
	pthread_mutex_lock(&closer.lock);
	closer.stopping = true;
	pthread_cond_broadcast(&closer.wake);
	pthread_mutex_unlock(&closer.lock);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += CLOSER_STOP_WAIT_S;
	for (i = 0; i < closer.nthreads; i++)
		if (pthread_timedjoin_np(closer.threads[i], NULL, &deadline) != 0)
			pthread_detach(closer.threads[i]);
	closer.running = false;
	event_free(closer.grow_ev);
	closer.grow_ev = NULL;
	free(closer.owner_of);
	closer.owner_of = NULL;
	closer.owner_cap = 0;
	/* Queues a stuck thread may still touch are left to the exit. */
}
