/*
 * Closer threads: client fds are closed here, from queues per uid.
 *
 * Each queue has at most one of its fds in close() at a time, and the
 * threads take the queues in turn.  A close that blocks for good (a FUSE
 * file whose server holds FLUSH) therefore holds one thread and its own
 * queue, nothing else: when a queue has waited CLOSER_WAIT_MS with no
 * thread free, another thread starts, up to CLOSER_MAX_THREADS (so that
 * many queues must be stuck at once before the rest wait).  A queue grows
 * as needed; once it is CLOSER_BACKED_UP long, its uid's sessions are not
 * read until it is shorter again (session.c), which bounds what a stuck
 * uid holds to one frame per session plus what its closing objects
 * release.
 *
 * Whose an fd is: recorded where it arrived (a frame, a connection, the
 * reopen of a client's file for a grant), else the uid whose request the
 * control thread is serving, else nobody's (a queue of its own, like any
 * uid's).  A handler that takes an fd to close it itself forgets its
 * record (ibvd_closer_forget), so a record is always the current file's.
 *
 * A uid's connections have a queue of their own: their close blocks only
 * on files still in flight in them, which takes a client that sends such
 * files and never has them read; plain connections of a uid whose file
 * closes are stuck are still closed.
 *
 * A socket's linger is taken away before its close (the client's data
 * was never ours to deliver: the connection is reset).
 *
 * A connection whose client is gone before it was served is emptied
 * first, its fds in flight to their queue, and then closed at once: a
 * close that releases no file cannot block, and a uid connecting and
 * closing in a loop would otherwise hold an fd per connection until the
 * closer threads get the CPU (the daemon's fd limit is not far).
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "closer.h"
#include "core/thread.h"
#include "frame.h"
#include "log.h"
#include "util.h"

#define CLOSER_MAX_THREADS	32
/* A queue waiting this long for a thread gets another thread. */
#define CLOSER_WAIT_MS		200
/* A close this long is called stuck in the log. */
#define CLOSER_STUCK_MS		500
/* Queued fds of one uid past which its sessions are not read. */
#define CLOSER_BACKED_UP	1024
/* The threads only call close(): a small stack is plenty. */
#define CLOSER_STACK_SIZE	(256 * 1024)
/* At shutdown, how long to let the threads finish the queues. */
#define CLOSER_STOP_WAIT_S	1
/* Messages read from a gone connection before it goes to its queue instead. */
#define GONE_READ_MAX		8

/* Owners are kept as uid + 1, so that 0 can say "not known". */
#define OWNER_NONE		0u
#define OWNER_OF(uid)		((uint32_t)(uid) + 1u)
#define OWNER_UID(owner)	((uid_t)((owner) - 1u))

/*
 * One owner's files, or its connections: a connection's close blocks only
 * on what is still in flight in it, so plain connections must not wait
 * behind a file whose close never returns.
 */
struct close_queue {
	TAILQ_ENTRY(close_queue) link;
	uint32_t owner;
	bool sockets;
	int *fds;			/* a ring of cap: count fds from head */
	size_t cap, head, count;
	bool closing;			/* one of its fds is in close() now */
	uint64_t ready_since;		/* ns: has an fd and none in close() */
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
	uint64_t queued;		/* fds ever queued */

	/* control thread only */
	bool running;
	bool all_stuck_told;
	uint32_t *owner_of;		/* by fd number */
	size_t owner_cap;
	uint32_t serving;
	bool receiving;			/* in a session's recvmsg() */
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

static struct close_queue *queue_find(uint32_t owner, bool sockets)
{
	struct close_queue *q;

	TAILQ_FOREACH(q, &closer.queues, link)
		if (q->owner == owner && q->sockets == sockets)
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

static void queue_put(struct close_queue *q)
{
	if (q->count || q->closing)
		return;
	TAILQ_REMOVE(&closer.queues, q, link);
	free(q->fds);
	free(q);
}

static int queue_push(uint32_t owner, bool sockets, int fd)
{
	struct close_queue *q = queue_find(owner, sockets);

	if (!q) {
		q = calloc(1, sizeof(*q));
		if (!q)
			return -ENOMEM;
		q->owner = owner;
		q->sockets = sockets;
		TAILQ_INSERT_TAIL(&closer.queues, q, link);
	}
	if (q->count == q->cap && queue_grow(q) < 0) {
		queue_put(q);
		return -ENOMEM;
	}
	q->fds[(q->head + q->count) % q->cap] = fd;
	closer.queued++;
	if (!q->count++ && !q->closing)
		q->ready_since = ibvd_mono_ns();
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
		q->ready_since = ibvd_mono_ns();
		queue_put(q);
	}
	pthread_mutex_unlock(&closer.lock);
	return NULL;
}

static int closer_thread_start(void)
{
	pthread_attr_t attr;
	int ret;

	ret = -pthread_attr_init(&attr);
	if (ret < 0)
		return ret;
	pthread_attr_setstacksize(&attr, CLOSER_STACK_SIZE);
	ret = ibvd_thread_spawn(&closer.threads[closer.nthreads], &attr,
				closer_main, (void *)(uintptr_t)closer.nthreads,
				NULL);
	pthread_attr_destroy(&attr);
	if (ret == 0)
		closer.nthreads++;
	return ret;
}

/* Under the lock: the slot of the longest close in progress, or -1. */
static int longest_close(void)
{
	int slot = -1;
	unsigned int i;

	for (i = 0; i < closer.nthreads; i++)
		if (closer.busy_since[i] &&
		    (slot < 0 || closer.busy_since[i] < closer.busy_since[slot]))
			slot = (int)i;
	return slot;
}

static void tell_started(uint64_t now)
{
	int slot = longest_close();
	uint64_t ms;

	if (slot < 0)
		return;
	ms = (now - closer.busy_since[slot]) / 1000000u;
	if (ms < CLOSER_STUCK_MS || closer.busy_owner[slot] == OWNER_NONE)
		log_info("closes waiting: closer thread %u started",
			 closer.nthreads);
	else
		log_warn("uid %u: closing its file has taken %llu ms so far (a FUSE server not answering?): closer thread %u started",
			 (unsigned int)OWNER_UID(closer.busy_owner[slot]),
			 (unsigned long long)ms, closer.nthreads);
}

/*
 * Under the lock: true while a queue waits for a thread (look again
 * later).  One that has waited CLOSER_WAIT_MS with no thread free gets
 * another thread.
 */
static bool closer_tend(void)
{
	uint64_t now = ibvd_mono_ns(), oldest = now;
	const struct close_queue *q;
	unsigned int i;

	TAILQ_FOREACH(q, &closer.queues, link)
		if (q->count && !q->closing && q->ready_since < oldest)
			oldest = q->ready_since;
	if (!queue_next())
		return false;
	for (i = 0; i < closer.nthreads; i++)
		if (!closer.busy_since[i])
			return true;	/* woken: it takes one */
	if (now - oldest < CLOSER_WAIT_MS * 1000000ull)
		return true;
	if (closer.nthreads >= CLOSER_MAX_THREADS) {
		if (!closer.all_stuck_told)
			log_warn("all %u closer threads are in closes that do not return: the queues wait",
				 CLOSER_MAX_THREADS);
		closer.all_stuck_told = true;
		return false;
	}
	if (closer_thread_start() == 0)
		tell_started(now);
	return true;
}

static void closer_watch(void)
{
	struct timeval tv = { 0, CLOSER_WAIT_MS * 1000 };

	if (closer.grow_ev && !evtimer_pending(closer.grow_ev, NULL))
		evtimer_add(closer.grow_ev, &tv);
}

/* Until a thread is free for every waiting queue, look again now and then. */
static void closer_grow_cb(evutil_socket_t unused, short what, void *arg)
{
	bool waiting;

	pthread_mutex_lock(&closer.lock);
	waiting = closer_tend();
	pthread_mutex_unlock(&closer.lock);
	if (waiting)
		closer_watch();
}

/* ---- the control thread's side ------------------------------------------ */

/*
 * Whose fd is: its record, unless the kernel has just handed it over in
 * the recvmsg() of the session being served (a record left by an fd of
 * the same number that the daemon closed itself is not this file's).
 */
static uint32_t owner_of(int fd)
{
	uint32_t owner = OWNER_NONE;

	if ((size_t)fd < closer.owner_cap)
		owner = closer.owner_of[fd];
	if (closer.receiving || owner == OWNER_NONE)
		owner = closer.serving;
	return owner;
}

/* Whose fd is, and its record goes (it is being closed). */
static uint32_t owner_take(int fd)
{
	uint32_t owner = owner_of(fd);

	if ((size_t)fd < closer.owner_cap)
		closer.owner_of[fd] = OWNER_NONE;
	return owner;
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

void ibvd_closer_forget(int fd)
{
	if (fd >= 0 && (size_t)fd < closer.owner_cap)
		closer.owner_of[fd] = OWNER_NONE;
}

void ibvd_closer_serving(uid_t uid)
{
	closer.serving = OWNER_OF(uid);
}

void ibvd_closer_serving_none(void)
{
	closer.serving = OWNER_NONE;
}

void ibvd_closer_receiving(bool receiving)
{
	closer.receiving = receiving;
}

static void close_queued(int fd, bool socket)
{
	uint32_t owner;
	bool waiting = false;
	int ret = -ESRCH;

	if (fd < 0)
		return;
	owner = owner_take(fd);
	if (closer.running) {
		pthread_mutex_lock(&closer.lock);
		ret = queue_push(owner, socket, fd);
		if (ret == 0) {
			pthread_cond_signal(&closer.wake);
			waiting = closer_tend();
		}
		pthread_mutex_unlock(&closer.lock);
	}
	/* Before start, after stop, or out of memory: rather a blocking close than a leak. */
	if (ret < 0)
		close_at_once(fd);
	if (waiting)
		closer_watch();
}

void ibvd_close_client_fd(int fd)
{
	close_queued(fd, false);
}

void ibvd_close_client_socket(int fd)
{
	/*
	 * The client sees the hang-up now, even while its queue waits for
	 * another of its fds; the close itself may release fds still queued.
	 */
	shutdown(fd, SHUT_RDWR);
	close_queued(fd, true);
}

/* fds a message read from a gone connection carried: to owner's queue. */
static void queue_received(struct msghdr *mh, uint32_t owner)
{
	struct cmsghdr *c;
	size_t n, i;
	int fd;

	for (c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (owner == OWNER_NONE)
				ibvd_closer_forget(fd);
			else
				ibvd_closer_own(fd, OWNER_UID(owner));
			ibvd_close_client_fd(fd);
		}
	}
}

/*
 * Read what a gone connection still holds; true once it is empty for
 * sure.  Shut down first, so that nothing more comes.  An empty message
 * and the end both read as 0 bytes, but with SO_PASSCRED every message
 * comes with credentials, the end with nothing.  The control buffer
 * holds the most fds a message can carry: the kernel drops those that do
 * not fit, in this thread, and that last close could block.
 */
static bool empty_gone(int fd, uint32_t owner)
{
	static const int on = 1;
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(struct ucred)) +
			 CMSG_SPACE(sizeof(int) * IBVD_KERNEL_SCM_MAX_FD)];
	} cmsg;
	char byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr mh;
	ssize_t n;
	int i;

	if (shutdown(fd, SHUT_RDWR) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) < 0)
		return false;
	for (i = 0; i < GONE_READ_MAX; i++) {
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cmsg.buf;
		mh.msg_controllen = sizeof(cmsg.buf);
		n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0)
			return false;
		if (!mh.msg_controllen && !(mh.msg_flags & MSG_CTRUNC))
			return n == 0;
		queue_received(&mh, owner);
		/* the kernel had no fd number for some (EMFILE) */
		if (mh.msg_flags & MSG_CTRUNC)
			return false;
	}
	return false;	/* more: they go with its close, on its queue */
}

void ibvd_close_gone_socket(int fd)
{
	if (fd < 0)
		return;
	if (!empty_gone(fd, owner_of(fd))) {
		ibvd_close_client_socket(fd);
		return;
	}
	ibvd_closer_forget(fd);
	close_at_once(fd);
}

static bool queue_backed_up(uint32_t owner, bool sockets)
{
	const struct close_queue *q = queue_find(owner, sockets);

	return q && q->count >= CLOSER_BACKED_UP;
}

bool ibvd_closer_backed_up(uid_t uid)
{
	bool backed_up;

	pthread_mutex_lock(&closer.lock);
	backed_up = queue_backed_up(OWNER_OF(uid), false) ||
		    queue_backed_up(OWNER_OF(uid), true);
	pthread_mutex_unlock(&closer.lock);
	return backed_up;
}

void ibvd_closer_status(struct ibvd_closer_status *st)
{
	uint64_t now = ibvd_mono_ns(), stuck_ns = CLOSER_STUCK_MS * 1000000ull;
	const struct close_queue *q;
	unsigned int i;

	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&closer.lock);
	st->threads = closer.nthreads;
	st->queued = closer.queued;
	TAILQ_FOREACH(q, &closer.queues, link)
		st->waiting += q->count;
	for (i = 0; i < closer.nthreads; i++)
		if (closer.busy_since[i] && now - closer.busy_since[i] >= stuck_ns)
			st->stuck++;
	pthread_mutex_unlock(&closer.lock);
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
