/*
 * rpoll and rselect over any mix of rsocket fds and ordinary fds.
 *
 * An rsocket's readiness is its state, not its fd's: each round takes
 * every rsocket's completions and CM events (without blocking) and
 * derives POLLIN/POLLOUT/POLLHUP/POLLERR as a TCP socket would report
 * them, and polls the ordinary fds without waiting.  Rounds repeat for
 * RS_POLL_SPIN_NS (a reply on its way comes sooner than a wakeup through
 * the daemon's completion channel).  When nothing is ready, it arms the rsockets' CQs and sleeps in one poll() over the
 * ordinary fds and each rsocket's CM and completion channels, then goes
 * round again.  Sleeps are cut into RS_POLL_SLICE_MS slices for the same
 * reason as rs_wait's (cq.c).
 */
#include "config.h"

#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>

#include <rdma/rsocket.h>

#include "rs.h"

#define RS_POLL_SLICE_MS	100
#define RS_POLL_SPIN_NS		50000

static short conn_revents(struct rsocket *rs, short events)
{
	short rev = 0;

	if ((events & POLLIN) && rs_conn_have_rdata(rs))
		rev |= POLLIN;
	if ((events & POLLOUT) && rs_conn_can_send(rs))
		rev |= POLLOUT;
	/* as Linux's: the peer shut its writing (or left), data or not */
	if ((events & POLLRDHUP) && !(rs->state & RS_READABLE))
		rev |= POLLRDHUP;
	/*
	 * A peer that left is, as TCP's FIN, first an end of file to read;
	 * the hangup shows once what it sent before is read.
	 */
	if ((rs->state & RS_DISCONNECTED) && !rs_have_rdata(rs))
		rev |= POLLHUP;
	/*
	 * A broken connection (reset, keepalive or retries failed) is hung
	 * up too, as TCP's after a reset: event loops (libevent, epoll
	 * servers) close on POLLHUP and some never look at POLLERR alone.
	 * The error shows until SO_ERROR takes it, as sk_err's.
	 */
	if (rs->state & RS_ERROR)
		rev |= POLLHUP | (rs->err ? POLLERR : 0);
	return rev;
}

/* What poll(2) would say of a TCP socket in rs's state. */
static short state_revents(struct rsocket *rs, short events)
{
	if (rs->state == RS_LISTENING && rs->orphaned && rs->err)
		return (short)((events & POLLIN) | POLLERR);	/* once: cm.c */
	if (rs->state == RS_LISTENING)
		return rs->req_head ? (events & POLLIN) : 0;
	if (rs->state & RS_OPENING)
		return 0;
	/*
	 * As TCP's after a failed connect: an error only until it is told;
	 * once rconnect told it, an unconnected socket (nothing to read).
	 */
	if ((rs->state & RS_CONNECT_ERROR) && rs->connect_told)
		return (short)((events & POLLOUT) | POLLHUP);
	if (rs->state & RS_CONNECT_ERROR)
		return (short)((events & (POLLIN | POLLOUT | POLLRDHUP)) | POLLHUP |
			       (rs->err ? POLLERR : 0));
	if (rs->state & (RS_CONNECTED | RS_DISCONNECTED | RS_ERROR))
		return conn_revents(rs, events);
	return (short)((events & POLLOUT) | POLLHUP);	/* never connected */
}

/*
 * rs's revents after progress; with arm, also the fds to sleep on (n) and
 * the CQ armed, looked at once more if the arm is new.
 */
static short check(struct rsocket *rs, short events, bool arm, int fds[2],
		   int *n)
{
	short rev;

	pthread_mutex_lock(&rs->lock);
	if (rs->dg) {
		rev = rs_dgram_revents(rs, events, arm, fds, n);
		pthread_mutex_unlock(&rs->lock);
		return rev;
	}
	rs_drain_cq_events(rs);
	rs_progress(rs);
	rev = state_revents(rs, events);
	if (!rev && arm && rs_arm_cq(rs)) {
		rs_progress(rs);
		rev = state_revents(rs, events);
	}
	*n = arm ? rs_wait_fds(rs, fds) : 0;
	pthread_mutex_unlock(&rs->lock);
	return rev;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * One round: rsockets checked, ordinary fds polled (timeout 0), and, if
 * arm, the sleep set built in sleep_fds (3 entries per fd).  Returns the
 * number of fds with revents.
 */
static int round_once(struct pollfd *fds, nfds_t nfds, bool arm,
		      struct pollfd *sleep_fds, nfds_t *nsleep)
{
	int ready = 0, rsfds[2], n, j;
	nfds_t i;

	*nsleep = 0;
	for (i = 0; i < nfds; i++) {
		struct rsocket *rs = fds[i].fd >= 0 ? rs_get(fds[i].fd) : NULL;

		fds[i].revents = 0;
		if (fds[i].fd < 0)
			continue;
		if (!rs) {
			struct pollfd one = { fds[i].fd, fds[i].events, 0 };

			if (poll(&one, 1, 0) > 0)
				fds[i].revents = one.revents;
			if (arm)
				sleep_fds[(*nsleep)++] = one;
		} else {
			fds[i].revents = check(rs, fds[i].events, arm, rsfds, &n);
			rs_put(rs);
			for (j = 0; j < n; j++) {
				sleep_fds[*nsleep].fd = rsfds[j];
				sleep_fds[*nsleep].events = POLLIN;
				sleep_fds[(*nsleep)++].revents = 0;
			}
		}
		if (fds[i].revents)
			ready++;
	}
	return ready;
}

static int do_rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	/* In nanoseconds: a 1 ms timeout waits 1 ms, not to the next tick. */
	int64_t deadline = timeout > 0 ? now_ns() + timeout * 1000000ll : 0;
	int64_t spin_end;
	struct pollfd *sleep_fds;
	nfds_t nsleep;
	int ready, slice;

	if (nfds && !fds)
		return -EFAULT;
	sleep_fds = calloc(nfds ? 2 * nfds : 1, sizeof(*sleep_fds));
	if (!sleep_fds)
		return -ENOMEM;
	/* As rs_wait: look without sleeping for a little while first. */
	spin_end = now_ns() + RS_POLL_SPIN_NS;
	do {
		ready = round_once(fds, nfds, false, sleep_fds, &nsleep);
	} while (!ready && timeout != 0 && now_ns() < spin_end);
	while (!ready && timeout != 0) {
		ready = round_once(fds, nfds, true, sleep_fds, &nsleep);
		if (ready)
			break;
		slice = RS_POLL_SLICE_MS;
		if (timeout > 0) {
			int64_t left = deadline - now_ns();

			if (left <= 0)
				break;
			/* rounded up: poll(2) waits at least its timeout */
			left = (left + 999999) / 1000000;
			if (left < slice)
				slice = (int)left;
		}
		if (poll(sleep_fds, nsleep, slice) < 0 && errno == EINTR) {
			ready = -EINTR;
			break;
		}
	}
	free(sleep_fds);
	return ready;
}

int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	return rs_ret(do_rpoll(fds, nfds, timeout));
}

/* ---- rselect, on rpoll ---------------------------------------------------- */

static nfds_t fds_from_sets(int nfds, fd_set *r, fd_set *w, fd_set *e,
			    struct pollfd *fds)
{
	nfds_t n = 0;
	int fd;

	for (fd = 0; fd < nfds; fd++) {
		short events = 0;

		if (r && FD_ISSET(fd, r))
			events |= POLLIN;
		if (w && FD_ISSET(fd, w))
			events |= POLLOUT;
		if (e && FD_ISSET(fd, e))
			events |= POLLPRI;
		if (!events)
			continue;
		fds[n].fd = fd;
		fds[n].events = events;
		fds[n++].revents = 0;
	}
	return n;
}

/*
 * select(2)'s view of one descriptor: which of its sets it is in now
 * (bit 0 read, 1 write, 2 exceptions).  Hangups and errors make it
 * readable (and errors writable) if it is watched for that; to one
 * watched for exceptions alone they are nothing.
 */
static unsigned int selected(const struct pollfd *p)
{
	short rev = p->revents;
	unsigned int in = 0;

	if ((p->events & POLLIN) && (rev & (POLLIN | POLLHUP | POLLERR)))
		in |= 1u;
	if ((p->events & POLLOUT) && (rev & (POLLOUT | POLLERR)))
		in |= 2u;
	if ((p->events & POLLPRI) && (rev & POLLPRI))
		in |= 4u;
	return in;
}

static int sets_from_fds(struct pollfd *fds, nfds_t n, fd_set *r, fd_set *w,
			 fd_set *e)
{
	int count = 0;
	unsigned int in;
	nfds_t i;

	if (r)
		FD_ZERO(r);
	if (w)
		FD_ZERO(w);
	if (e)
		FD_ZERO(e);
	for (i = 0; i < n; i++) {
		in = selected(&fds[i]);
		if (in & 1u)
			FD_SET(fds[i].fd, r);
		if (in & 2u)
			FD_SET(fds[i].fd, w);
		if (in & 4u)
			FD_SET(fds[i].fd, e);
		count += (int)__builtin_popcount(in);
	}
	return count;
}

/*
 * rpoll found only what select(2) does not report (a hangup of one
 * watched for exceptions alone): select waits on, so we do, without the
 * descriptors that would keep waking us.  How many are left.
 */
static nfds_t without_unselected(struct pollfd *fds, nfds_t n)
{
	nfds_t i, kept = 0;

	for (i = 0; i < n; i++) {
		if (fds[i].revents)
			continue;
		fds[kept++] = fds[i];
	}
	return kept;
}

/* A select(2) timeout in poll(2)'s milliseconds: longer ones wait as long as poll can. */
static int select_timeout_ms(const struct timeval *tv)
{
	uint64_t ms;

	if (tv->tv_sec >= INT_MAX / 1000)
		return INT_MAX;
	ms = (uint64_t)tv->tv_sec * 1000 + ((uint64_t)tv->tv_usec + 999) / 1000;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* select(2) fails on a descriptor that is not open: EBADF, sets untouched */
static bool any_closed(const struct pollfd *fds, nfds_t n)
{
	nfds_t i;

	for (i = 0; i < n; i++)
		if (fds[i].revents & POLLNVAL)
			return true;
	return false;
}

static bool any_selected(const struct pollfd *fds, nfds_t n)
{
	nfds_t i;

	for (i = 0; i < n; i++)
		if (selected(&fds[i]))
			return true;
	return false;
}

/* What is left until deadline, rounded up to a millisecond (0: none). */
static int ms_left(int64_t deadline)
{
	int64_t left = deadline - now_ns();

	return left <= 0 ? 0 : (int)((left + 999999) / 1000000);
}

/*
 * The timeout is only read: rdma-core's rselect leaves it as it was,
 * unlike select(2), which leaves what is left of it, so an app written
 * for rsockets may wait again with the same one.
 */
static int do_rselect(int nfds, fd_set *r, fd_set *w, fd_set *e,
		      const struct timeval *tv)
{
	struct pollfd *fds;
	int64_t deadline;
	int timeout, ret;
	nfds_t n;

	if (nfds < 0 || nfds > FD_SETSIZE)
		return -EINVAL;
	if (tv && (tv->tv_sec < 0 || tv->tv_usec < 0))
		return -EINVAL;
	timeout = tv ? select_timeout_ms(tv) : -1;
	fds = calloc(nfds ? (size_t)nfds : 1, sizeof(*fds));
	if (!fds)
		return -ENOMEM;
	n = fds_from_sets(nfds, r, w, e, fds);
	deadline = timeout > 0 ? now_ns() + timeout * 1000000ll : 0;
	for (;;) {
		ret = do_rpoll(fds, n, timeout);
		if (ret <= 0)
			break;
		if (any_closed(fds, n)) {
			ret = -EBADF;
			break;
		}
		if (any_selected(fds, n))
			break;
		n = without_unselected(fds, n);
		if (timeout > 0)
			timeout = ms_left(deadline);
		if (timeout == 0)
			break;
	}
	if (ret >= 0)
		ret = sets_from_fds(fds, n, r, w, e);
	free(fds);
	return ret;
}

int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
	    struct timeval *timeout)
{
	return rs_ret(do_rselect(nfds, readfds, writefds, exceptfds, timeout));
}
