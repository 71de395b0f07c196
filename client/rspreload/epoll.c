/*
 * epoll(7) over rsockets, for librspreload.
 *
 * An rsocket's fd is its CM channel's: the kernel's epoll would watch
 * that, which says nothing of the data, so a program waiting in
 * epoll_wait on an rsocket would sleep for ever.  Here the rsockets a
 * program adds to an epoll instance never reach the kernel: they are
 * kept per instance (a "set", made at the first rsocket added), with
 * their events and data; every other fd goes to the kernel's instance.
 * epoll_wait on an instance with rsockets is one rpoll over its
 * rsockets, the kernel's epoll fd (readable when it has events) and the
 * set's eventfd (written when epoll_ctl changes the set, so a wait in
 * another thread takes the change at once); then the rsockets' events
 * and the kernel's (epoll_wait without waiting) are reported together.
 *
 * Level-triggered rsockets report while ready.  EPOLLET: a readiness
 * reported is not reported again until the program reads (EPOLLIN,
 * EPOLLRDHUP, EPOLLPRI) or writes (EPOLLOUT) that rsocket, or
 * EPOLL_CTL_MOD; so a program that reads until EAGAIN hears of the next
 * data, as with TCP, though one that reads only some may hear of the
 * rest at once.  A new readiness is reported with the others that still
 * hold, as the kernel's.  A hangup or error is reported once after any
 * I/O.
 * EPOLLONESHOT: after one report the rsocket is silent until
 * EPOLL_CTL_MOD.  EPOLLEXCLUSIVE and EPOLLWAKEUP mean nothing here.
 *
 * Not followed: an epoll instance's rsockets seen through its fd by
 * poll, select or another epoll instance, or through a dup() of that fd
 * (the set is the fd number's); an epoll fd closed other than by close,
 * close_range, closefrom, dup2 or dup3 leaves its set to the next file
 * of that number.  epoll_pwait's signal mask is set around the wait, as
 * ppoll's (preload.c), and epoll_pwait2's timeout is rounded up to a
 * millisecond.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "preload.h"

/*
 * A wait sleeps at most this long at once before it looks at its set
 * again: a change that a waiter missed (another waiter drained the
 * eventfd first) is seen by then.
 */
#define EP_SLICE_MS	500

/* What rpoll can be asked about an rsocket; it says POLLHUP/POLLERR unasked. */
#define EP_ASK		(EPOLLIN | EPOLLOUT | EPOLLPRI | EPOLLRDHUP)
#define EP_ALWAYS	(EPOLLHUP | EPOLLERR)
#define EP_READS	(EPOLLIN | EPOLLPRI | EPOLLRDHUP)

struct ep_item {
	int fd;
	uint32_t events;	/* as the program gave them */
	epoll_data_t data;
	uint32_t fired;		/* EPOLLET: reported, not since read/written */
	unsigned int rd_seq, wr_seq;	/* the rsocket's I/O counts then */
	bool off;		/* EPOLLONESHOT, reported */
};

struct ep_set {
	struct ep_set *next;	/* sets_list */
	int epfd;
	int wakefd;		/* eventfd: epoll_ctl changed the set */
	unsigned int refs;	/* sets_list's, and each call using it */
	pthread_mutex_t lock;	/* everything below */
	struct ep_item *items;
	size_t n, cap;
	size_t next_rs;		/* the rsocket reported first next time */
	bool closed;		/* its epoll fd was closed: waits end */
	atomic_uint turn;	/* maxevents 1, both ready: take turns */
};

static struct {
	int (*epoll_ctl)(int, int, int, struct epoll_event *);
	int (*epoll_wait)(int, struct epoll_event *, int, int);
	int (*epoll_pwait)(int, struct epoll_event *, int, int,
			   const sigset_t *);
	int (*epoll_pwait2)(int, struct epoll_event *, int,
			    const struct timespec *, const sigset_t *);
	int (*close)(int);
} real;

static pthread_once_t real_once = PTHREAD_ONCE_INIT;

static void init_real(void)
{
	real.epoll_ctl = dlsym(RTLD_NEXT, "epoll_ctl");
	real.epoll_wait = dlsym(RTLD_NEXT, "epoll_wait");
	real.epoll_pwait = dlsym(RTLD_NEXT, "epoll_pwait");
	real.epoll_pwait2 = dlsym(RTLD_NEXT, "epoll_pwait2");
	real.close = dlsym(RTLD_NEXT, "close");
}

static void init(void)
{
	pthread_once(&real_once, init_real);
}

/* sets_lock before any set's lock, never the other way. */
static pthread_mutex_t sets_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ep_set *sets_list;
/* Which fds are epoll fds with a set, and how many sets hold an rsocket. */
static atomic_uchar has_set[PRELOAD_MAX_FD];
static atomic_uint in_sets[PRELOAD_MAX_FD];
/* Each rsocket's reads and writes so far (EPOLLET). */
static atomic_uint rd_seq[PRELOAD_MAX_FD], wr_seq[PRELOAD_MAX_FD];

static bool fd_ok(int fd)
{
	return fd >= 0 && fd < PRELOAD_MAX_FD;
}

void ep_rs_io(int fd, uint32_t dir)
{
	if (!fd_ok(fd))
		return;
	if (dir & EPOLLIN)
		atomic_fetch_add(&rd_seq[fd], 1);
	if (dir & EPOLLOUT)
		atomic_fetch_add(&wr_seq[fd], 1);
}

static void set_put(struct ep_set *s)
{
	bool last;

	pthread_mutex_lock(&sets_lock);
	last = --s->refs == 0;
	pthread_mutex_unlock(&sets_lock);
	if (!last)
		return;
	real.close(s->wakefd);
	pthread_mutex_destroy(&s->lock);
	free(s->items);
	free(s);
}

/* Under sets_lock: epfd's set, held, or NULL. */
static struct ep_set *find_set(int epfd)
{
	struct ep_set *s;

	if (!fd_ok(epfd) || !atomic_load(&has_set[epfd]))
		return NULL;
	for (s = sets_list; s; s = s->next)
		if (s->epfd == epfd) {
			s->refs++;
			return s;
		}
	return NULL;
}

static struct ep_set *get_set(int epfd)
{
	struct ep_set *s;

	/* most epoll fds never had an rsocket: no lock for them */
	if (!fd_ok(epfd) || !atomic_load(&has_set[epfd]))
		return NULL;
	pthread_mutex_lock(&sets_lock);
	s = find_set(epfd);
	pthread_mutex_unlock(&sets_lock);
	return s;
}

/*
 * epfd's set, made if it has none: NULL with errno EBADF or EINVAL if
 * epfd is no epoll fd (as epoll_ctl says), ENOSPC past our table.
 */
static struct ep_set *make_set(int epfd)
{
	struct ep_set *s;
	int wakefd, err;

	s = get_set(epfd);
	if (s)
		return s;
	if (epfd < 0 || !fd_ok(epfd)) {
		errno = epfd < 0 ? EBADF : ENOSPC;
		return NULL;
	}
	wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (wakefd < 0)
		return NULL;
	/* the kernel's word on epfd: ENOENT (not in it) if it is an epoll fd */
	if (real.epoll_ctl(epfd, EPOLL_CTL_DEL, wakefd, NULL) == 0 ||
	    errno != ENOENT) {
		err = errno == ENOENT || errno == 0 ? EINVAL : errno;
		real.close(wakefd);
		errno = err;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		real.close(wakefd);
		errno = ENOMEM;
		return NULL;
	}
	s->epfd = epfd;
	s->wakefd = wakefd;
	s->refs = 2;		/* the list's and the caller's */
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_lock(&sets_lock);
	{
		/* another thread's may have come first */
		struct ep_set *other = find_set(epfd);

		if (other) {
			pthread_mutex_unlock(&sets_lock);
			s->refs = 1;
			set_put(s);
			return other;
		}
	}
	s->next = sets_list;
	sets_list = s;
	atomic_store(&has_set[epfd], 1);
	pthread_mutex_unlock(&sets_lock);
	return s;
}

static struct ep_item *find_item(struct ep_set *s, int fd)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (s->items[i].fd == fd)
			return &s->items[i];
	return NULL;
}

/* Under s->lock. */
static void drop_item(struct ep_set *s, struct ep_item *it)
{
	atomic_fetch_sub(&in_sets[it->fd], 1);
	*it = s->items[--s->n];
}

static void wake(struct ep_set *s)
{
	eventfd_write(s->wakefd, 1);
}

static void item_reset(struct ep_item *it, const struct epoll_event *ev)
{
	it->events = ev->events;
	it->data = ev->data;
	it->fired = 0;
	it->off = false;
	it->rd_seq = atomic_load(&rd_seq[it->fd]);
	it->wr_seq = atomic_load(&wr_seq[it->fd]);
}

static int ctl_add(int epfd, int fd, const struct epoll_event *ev)
{
	struct ep_set *s;
	struct ep_item *it;
	int ret = 0;

	s = make_set(epfd);
	if (!s)
		return -errno;
	pthread_mutex_lock(&s->lock);
	if (find_item(s, fd)) {
		ret = -EEXIST;
		goto unlock;
	}
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 8;

		it = realloc(s->items, cap * sizeof(*it));
		if (!it) {
			ret = -ENOMEM;
			goto unlock;
		}
		s->items = it;
		s->cap = cap;
	}
	it = &s->items[s->n++];
	it->fd = fd;
	item_reset(it, ev);
	atomic_fetch_add(&in_sets[fd], 1);
	wake(s);
unlock:
	pthread_mutex_unlock(&s->lock);
	set_put(s);
	return ret;
}

/* MOD or DEL of an rsocket in epfd's set. */
static int ctl_change(int epfd, int op, int fd, const struct epoll_event *ev)
{
	struct ep_set *s = get_set(epfd);
	struct ep_item *it;
	int ret = 0;

	if (!s) {
		/* not ours: the kernel's errors for an fd not in epfd */
		return real.epoll_ctl(epfd, op, fd, (struct epoll_event *)ev) ?
			       -errno : -ENOENT;
	}
	pthread_mutex_lock(&s->lock);
	it = find_item(s, fd);
	if (!it)
		ret = -ENOENT;
	else if (op == EPOLL_CTL_DEL)
		drop_item(s, it);
	else
		item_reset(it, ev);
	wake(s);
	pthread_mutex_unlock(&s->lock);
	set_put(s);
	return ret;
}

EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	int ret;

	init();
	if (!preload_is_rsocket(fd))
		return real.epoll_ctl(epfd, op, fd, ev);
	if (op != EPOLL_CTL_DEL && !ev)
		ret = -EFAULT;
	else if (op == EPOLL_CTL_MOD && (ev->events & EPOLLEXCLUSIVE))
		ret = -EINVAL;
	else if (op == EPOLL_CTL_ADD)
		ret = ctl_add(epfd, fd, ev);
	else if (op == EPOLL_CTL_MOD || op == EPOLL_CTL_DEL)
		ret = ctl_change(epfd, op, fd, ev);
	else
		ret = -EINVAL;
	if (ret < 0) {
		errno = -ret;
		return -1;
	}
	return 0;
}

void ep_rs_closing(int fd)
{
	struct ep_set *s;
	struct ep_item *it;

	if (!fd_ok(fd) || !atomic_load(&in_sets[fd]))
		return;
	init();
	pthread_mutex_lock(&sets_lock);
	for (s = sets_list; s; s = s->next) {
		pthread_mutex_lock(&s->lock);
		it = find_item(s, fd);
		if (it) {
			drop_item(s, it);
			wake(s);
		}
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_unlock(&sets_lock);
}

void ep_fd_closing(int fd)
{
	struct ep_set **p, *s = NULL;
	size_t i;

	if (!fd_ok(fd) || !atomic_load(&has_set[fd]))
		return;
	init();
	pthread_mutex_lock(&sets_lock);
	for (p = &sets_list; *p; p = &(*p)->next)
		if ((*p)->epfd == fd) {
			s = *p;
			*p = s->next;
			break;
		}
	atomic_store(&has_set[fd], 0);
	pthread_mutex_unlock(&sets_lock);
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	for (i = 0; i < s->n; i++)
		atomic_fetch_sub(&in_sets[s->items[i].fd], 1);
	s->n = 0;
	s->closed = true;
	wake(s);
	pthread_mutex_unlock(&s->lock);
	set_put(s);	/* the list's */
}

/* ---- waiting ------------------------------------------------------------- */

/* Does epfd have rsockets to wait for (else the kernel's epoll_wait)? */
static bool has_rsockets(int epfd)
{
	struct ep_set *s = get_set(epfd);
	bool any;

	if (!s)
		return false;
	pthread_mutex_lock(&s->lock);
	any = s->n > 0;
	pthread_mutex_unlock(&s->lock);
	set_put(s);
	return any;
}

/*
 * Is it watched now, and for which events (*ask: what rpoll is asked;
 * it says EP_ALWAYS unasked)?  Under s->lock.
 */
static bool item_wants(struct ep_item *it, short *ask)
{
	if (it->off)
		return false;
	if (it->events & EPOLLET) {
		if (atomic_load(&rd_seq[it->fd]) != it->rd_seq)
			it->fired &= ~(uint32_t)(EP_READS | EP_ALWAYS);
		if (atomic_load(&wr_seq[it->fd]) != it->wr_seq)
			it->fired &= ~(uint32_t)(EPOLLOUT | EP_ALWAYS);
		/* rpoll says a hangup or an error whether asked or not */
		if (it->fired & EP_ALWAYS)
			return false;
	}
	*ask = (short)(it->events & EP_ASK & ~it->fired);
	return true;
}

/*
 * The sleep set: the set's rsockets, the kernel's epoll fd, the eventfd
 * (last two).  Returns the rsockets' count, the eventfd drained first;
 * or -EBADF (the epoll fd was closed), -ENOMEM.
 */
static int build(struct ep_set *s, struct pollfd **pfd, size_t *cap)
{
	eventfd_t junk;
	size_t i, n = 0;
	short ask;

	pthread_mutex_lock(&s->lock);
	if (s->closed) {
		/* its fd number may be another file's by now */
		pthread_mutex_unlock(&s->lock);
		return -EBADF;
	}
	eventfd_read(s->wakefd, &junk);
	if (*cap < s->n + 2) {
		struct pollfd *p = realloc(*pfd, (s->n + 2) * sizeof(*p));

		if (!p) {
			pthread_mutex_unlock(&s->lock);
			return -ENOMEM;
		}
		*pfd = p;
		*cap = s->n + 2;
	}
	for (i = 0; i < s->n; i++) {
		if (!item_wants(&s->items[i], &ask))
			continue;
		(*pfd)[n].fd = s->items[i].fd;
		(*pfd)[n].events = ask;
		(*pfd)[n++].revents = 0;
	}
	pthread_mutex_unlock(&s->lock);
	(*pfd)[n] = (struct pollfd){ .fd = s->epfd, .events = POLLIN };
	(*pfd)[n + 1] = (struct pollfd){ .fd = s->wakefd, .events = POLLIN };
	return (int)n;
}

/*
 * An edge-triggered rsocket with news: what it reported before and is
 * still so goes with them, as the kernel's epoll reports the whole state
 * at an edge (EPOLLIN with the EPOLLRDHUP of a peer that shut writing).
 */
static uint32_t still_ready(const struct ep_item *it)
{
	struct pollfd one = { .fd = it->fd, .events = (short)(it->events & EP_ASK) };

	if (preload_rpoll(&one, 1, 0) <= 0)
		return 0;
	return (uint32_t)(unsigned short)one.revents & it->fired;
}

/*
 * The rsockets' events rpoll found, as the set has them now (an rsocket
 * changed meanwhile counts as it is now), into out, at most max.
 */
static int collect(struct ep_set *s, const struct pollfd *pfd, int n,
		   struct epoll_event *out, int max)
{
	int k, got = 0, start;

	if (n == 0 || max <= 0)
		return 0;
	pthread_mutex_lock(&s->lock);
	start = (int)(s->next_rs % (size_t)n);
	for (k = 0; k < n && got < max; k++) {
		const struct pollfd *p = &pfd[(start + k) % n];
		struct ep_item *it;
		uint32_t rev;
		short ask;

		if (!p->revents)
			continue;
		it = find_item(s, p->fd);
		if (it && (p->revents & POLLNVAL)) {
			/* closed behind our back: forgotten, as epoll would */
			drop_item(s, it);
			continue;
		}
		if (!it || !item_wants(it, &ask))
			continue;
		rev = (uint32_t)(unsigned short)p->revents &
		      ((it->events & EP_ASK & ~it->fired) | EP_ALWAYS);
		if (!rev)
			continue;
		if (it->fired)
			rev |= still_ready(it);
		out[got].events = rev;
		out[got++].data = it->data;
		if (it->events & EPOLLET) {
			it->fired |= rev;
			it->rd_seq = atomic_load(&rd_seq[it->fd]);
			it->wr_seq = atomic_load(&wr_seq[it->fd]);
		}
		if (it->events & EPOLLONESHOT)
			it->off = true;
	}
	s->next_rs = (size_t)(start + k);
	pthread_mutex_unlock(&s->lock);
	return got;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * epoll_wait on epfd's set s, timeout in ms (negative: none): the count
 * of events, or a negative errno.
 */
static int wait_set(struct ep_set *s, struct epoll_event *evs, int max,
		    int timeout)
{
	int64_t deadline = timeout > 0 ? now_ns() + timeout * 1000000ll : 0;
	struct pollfd *pfd = NULL;
	size_t cap = 0;
	int n, got, k, slice, rs_max, ret;
	bool kernel;

	for (;;) {
		n = build(s, &pfd, &cap);
		if (n < 0) {
			ret = n;
			break;
		}
		slice = timeout < 0 || timeout > EP_SLICE_MS ? EP_SLICE_MS : timeout;
		if (timeout > 0) {
			int64_t left = (deadline - now_ns() + 999999) / 1000000;

			slice = left <= 0 ? 0 : left < slice ? (int)left : slice;
		}
		if (preload_rpoll(pfd, (nfds_t)n + 2, slice) < 0) {
			ret = -errno;
			break;
		}
		kernel = pfd[n].revents != 0;
		/* both ready: the rsockets take half the room, or turns */
		rs_max = max;
		if (kernel) {
			if (max > 1)
				rs_max = max / 2;
			else
				rs_max = (int)(atomic_fetch_add(&s->turn, 1) & 1);
		}
		got = collect(s, pfd, n, evs, rs_max);
		if (kernel && got < max) {
			k = real.epoll_wait(s->epfd, evs + got, max - got, 0);
			if (k < 0 && !got) {
				ret = -errno;
				break;
			}
			got += k > 0 ? k : 0;
		}
		if (got) {
			ret = got;
			break;
		}
		/* an rsocket that rpoll found but the other side of the turn */
		if (kernel && rs_max == 0 && n)
			continue;
		if (timeout == 0 || (timeout > 0 && now_ns() >= deadline)) {
			ret = 0;
			break;
		}
	}
	free(pfd);
	return ret;
}

/*
 * The wait for an epfd known to have rsockets; its set can have gone
 * meanwhile (closed): then the kernel's.
 */
static int wait_rs(int epfd, struct epoll_event *evs, int max, int timeout,
		   const sigset_t *sigmask)
{
	struct ep_set *s;
	sigset_t old;
	int ret, err;

	if (max <= 0 || max > INT_MAX / (int)sizeof(*evs)) {
		errno = EINVAL;
		return -1;
	}
	if (!evs) {
		errno = EFAULT;
		return -1;
	}
	s = get_set(epfd);
	if (!s)
		return real.epoll_pwait(epfd, evs, max, timeout, sigmask);
	/* not atomically with the wait: as ppoll's (preload.c) */
	if (sigmask) {
		ret = pthread_sigmask(SIG_SETMASK, sigmask, &old);
		if (ret) {
			set_put(s);
			errno = ret;
			return -1;
		}
	}
	ret = wait_set(s, evs, max, timeout);
	if (sigmask)
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	set_put(s);
	if (ret < 0) {
		err = -ret;
		errno = err;
		return -1;
	}
	return ret;
}

EXPORT int epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout)
{
	init();
	if (!has_rsockets(epfd))
		return real.epoll_wait(epfd, evs, max, timeout);
	return wait_rs(epfd, evs, max, timeout, NULL);
}

EXPORT int epoll_pwait(int epfd, struct epoll_event *evs, int max,
		       int timeout, const sigset_t *sigmask)
{
	init();
	if (!has_rsockets(epfd))
		return real.epoll_pwait(epfd, evs, max, timeout, sigmask);
	return wait_rs(epfd, evs, max, timeout, sigmask);
}

EXPORT int epoll_pwait2(int epfd, struct epoll_event *evs, int max,
			const struct timespec *ts, const sigset_t *sigmask)
{
	long long ms;

	init();
	if (!has_rsockets(epfd)) {
		if (!real.epoll_pwait2) {
			errno = ENOSYS;
			return -1;
		}
		return real.epoll_pwait2(epfd, evs, max, ts, sigmask);
	}
	if (ts && (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000)) {
		errno = EINVAL;
		return -1;
	}
	ms = -1;
	if (ts) {
		ms = (long long)ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000;
		if (ms > INT_MAX || ts->tv_sec > INT_MAX / 1000)
			ms = INT_MAX;
	}
	return wait_rs(epfd, evs, max, (int)ms, sigmask);
}
