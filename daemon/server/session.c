/*
 * Client sessions: reading frames, fairness, timeouts, disconnects.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "call.h"
#include "frame.h"
#include "log.h"
#include "notify.h"
#include "session.h"
#include "util.h"

/* ---- the closer thread ------------------------------------------------ */

/*
 * Client fds are closed here, never on the control thread: the last
 * close() of a TCP socket with SO_LINGER and unsent data waits for the
 * linger time, that of a FUSE file for its server.  The queue is bounded;
 * when it is full the fds wait in a backlog on the control thread and the
 * session whose frame brought them is not read until the backlog has
 * drained, so a session holds at most one frame's worth there.
 *
 * A socket's linger is taken away before its close (the client's data
 * was never ours to deliver: the connection is reset).  Closes that
 * block all the same (a FUSE file, or a linger set again by the client
 * between ours and the close) would stop the queue: when every closer
 * thread has been in one close for CLOSER_STUCK_MS, another starts, up
 * to CLOSER_MAX_THREADS.
 */
#define CLOSER_QUEUE_LEN	1024
#define CLOSER_MAX_THREADS	8
#define CLOSER_STUCK_MS		500
/* How often a backlog is moved into the queue again. */
#define CLOSER_RETRY_MS		100
/* At shutdown, how long to let the thread finish the queue. */
#define CLOSER_STOP_WAIT_S	1

static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	int fds[CLOSER_QUEUE_LEN];	/* a ring: count fds from head */
	unsigned int head, count;
	int stopping;
	pthread_t threads[CLOSER_MAX_THREADS];
	uint64_t busy_since[CLOSER_MAX_THREADS];	/* ns; 0: not closing */
	unsigned int nthreads;
	int running;

	/* control thread only */
	struct ibvd_daemon *d;
	int *backlog;
	size_t nbacklog, backlog_cap;
	struct event *retry_ev;
} closer = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.wake = PTHREAD_COND_INITIALIZER,
};

/* A socket's last close resets it rather than linger (ENOTSOCK: not one). */
static void close_at_once(int fd)
{
	static const struct linger reset = { .l_onoff = 1, .l_linger = 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
	close(fd);
}

static void *closer_main(void *arg)
{
	unsigned int slot = (unsigned int)(uintptr_t)arg;
	int fd;

	pthread_mutex_lock(&closer.lock);
	for (;;) {
		while (!closer.count && !closer.stopping)
			pthread_cond_wait(&closer.wake, &closer.lock);
		if (!closer.count)
			break;
		fd = closer.fds[closer.head];
		closer.head = (closer.head + 1) % CLOSER_QUEUE_LEN;
		closer.count--;
		closer.busy_since[slot] = ibvd_mono_ns();
		pthread_mutex_unlock(&closer.lock);
		close_at_once(fd);
		pthread_mutex_lock(&closer.lock);
		closer.busy_since[slot] = 0;
	}
	pthread_mutex_unlock(&closer.lock);
	return NULL;
}

static int closer_thread_start(void)
{
	sigset_t all, old;
	int ret;

	/* Signals are the control thread's business. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = -pthread_create(&closer.threads[closer.nthreads], NULL,
			      closer_main, (void *)(uintptr_t)closer.nthreads);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret == 0)
		closer.nthreads++;
	return ret;
}

/* Under the lock: another thread if every one is stuck in a close. */
static void closer_grow_if_stuck(void)
{
	uint64_t now = ibvd_mono_ns(), stuck_ns = CLOSER_STUCK_MS * 1000000ull;
	unsigned int i;

	if (closer.nthreads >= CLOSER_MAX_THREADS)
		return;
	for (i = 0; i < closer.nthreads; i++)
		if (!closer.busy_since[i] || now - closer.busy_since[i] < stuck_ns)
			return;
	if (closer_thread_start() == 0)
		log_warn("a client's fd has been closing for over %u ms: closer thread %u started",
			 CLOSER_STUCK_MS, closer.nthreads);
}

/* Queue fd for the threads: 0, or -EAGAIN when the queue is full. */
static int closer_push(int fd)
{
	int ret = -EAGAIN;

	pthread_mutex_lock(&closer.lock);
	closer_grow_if_stuck();
	if (closer.count < CLOSER_QUEUE_LEN) {
		closer.fds[(closer.head + closer.count) % CLOSER_QUEUE_LEN] = fd;
		closer.count++;
		pthread_cond_signal(&closer.wake);
		ret = 0;
	}
	pthread_mutex_unlock(&closer.lock);
	return ret;
}

static void closer_schedule_retry(void)
{
	struct timeval tv = { 0, CLOSER_RETRY_MS * 1000 };

	if (closer.retry_ev && !evtimer_pending(closer.retry_ev, NULL))
		evtimer_add(closer.retry_ev, &tv);
}

void ibvd_close_client_fd(int fd)
{
	int *grown;
	size_t cap;

	if (fd < 0)
		return;
	if (closer.running && !closer.nbacklog && closer_push(fd) == 0)
		return;
	if (!closer.running) {
		close_at_once(fd);	/* before start or after stop */
		return;
	}
	if (closer.nbacklog == closer.backlog_cap) {
		cap = closer.backlog_cap ? 2 * closer.backlog_cap : 256;
		grown = realloc(closer.backlog, cap * sizeof(*grown));
		if (!grown) {
			/* Rather a close that may block than a leak. */
			close_at_once(fd);
			return;
		}
		closer.backlog = grown;
		closer.backlog_cap = cap;
	}
	closer.backlog[closer.nbacklog++] = fd;
	closer_schedule_retry();
}

void ibvd_close_client_socket(int fd)
{
	/*
	 * The client sees the hang-up now, even while the closer is stuck
	 * on another fd; the close itself may release fds still queued.
	 */
	shutdown(fd, SHUT_RDWR);
	ibvd_close_client_fd(fd);
}

/* Move the backlog into the queue; then read the paused sessions again. */
static void closer_retry_cb(evutil_socket_t unused, short what, void *arg)
{
	struct ibvd_session *s;
	size_t done = 0;

	while (done < closer.nbacklog && closer_push(closer.backlog[done]) == 0)
		done++;
	memmove(closer.backlog, closer.backlog + done,
		(closer.nbacklog - done) * sizeof(*closer.backlog));
	closer.nbacklog -= done;
	if (closer.nbacklog) {
		closer_schedule_retry();
		return;
	}
	TAILQ_FOREACH(s, &closer.d->sessions, link)
		if (s->paused && !s->closing) {
			s->paused = 0;
			event_add(s->read_ev, NULL);
		}
}

int ibvd_sessions_start(struct ibvd_daemon *d)
{
	int ret;

	closer.d = d;
	closer.retry_ev = evtimer_new(d->base, closer_retry_cb, NULL);
	if (!closer.retry_ev)
		return -ENOMEM;
	ret = closer_thread_start();
	if (ret < 0) {
		event_free(closer.retry_ev);
		closer.retry_ev = NULL;
		return ret;
	}
	closer.running = 1;
	ibvd_frame_set_close_hook(ibvd_close_client_fd);
	return 0;
}

/*
 * Let the thread close what is queued, for a moment: one stuck close must
 * not hold up the exit (the kernel closes whatever is left).
 */
static void closer_stop(void)
{
	struct timespec deadline;
	unsigned int i;

	if (!closer.running)
		return;
	ibvd_frame_set_close_hook(NULL);
	pthread_mutex_lock(&closer.lock);
	closer.stopping = 1;
	pthread_cond_broadcast(&closer.wake);
	pthread_mutex_unlock(&closer.lock);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += CLOSER_STOP_WAIT_S;
	for (i = 0; i < closer.nthreads; i++)
		if (pthread_timedjoin_np(closer.threads[i], NULL, &deadline) != 0)
			pthread_detach(closer.threads[i]);
	closer.running = 0;
	/* What never made it into the queue is left to the exit, too. */
	free(closer.backlog);
	closer.nbacklog = 0;
	closer.backlog = NULL;
	closer.backlog_cap = 0;
	event_free(closer.retry_ev);
	closer.retry_ev = NULL;
}

unsigned int ibvd_session_idle_timeout(void)
{
	/* Read once: it is re-armed after every busy wakeup. */
	static unsigned int secs;
	const char *env;
	unsigned long n;
	char *end;

	if (secs)
		return secs;
	secs = IBVD_SESSION_IDLE_TIMEOUT;
	env = getenv("IBVERBSD_IDLE_TIMEOUT");
	if (env && *env) {
		n = strtoul(env, &end, 10);
		if (!*end && n > 0 && n <= 86400)
			secs = (unsigned int)n;
	}
	return secs;
}

/* The peer names itself; keep its name printable before it reaches a log. */
static void read_comm(pid_t pid, char *comm, size_t len)
{
	char path[64];
	FILE *f;
	size_t n = 0;

	snprintf(comm, len, "?");
	if (pid <= 0)
		return;
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(comm, (int)len, f))
		n = strcspn(comm, "\n");
	fclose(f);
	comm[n] = '\0';
	for (char *p = comm; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			*p = '?';
	if (!n)
		snprintf(comm, len, "?");
}

/* ---- sessions ---------------------------------------------------------- */

/* Its uid's log budget: one uid's broken clients cannot hide another's. */
static void log_drop(const struct ibvd_session *s, const char *why)
{
	ibvd_tenant_log(s->tenant, IBVD_LOG_NOTICE,
			"client %llu (pid %d uid %u %s): %s; disconnecting",
			(unsigned long long)s->id, (int)s->cred.pid,
			(unsigned int)s->cred.uid, s->comm, why);
}

static void session_destroy(struct ibvd_session *s)
{
	struct ibvd_daemon *d = s->daemon;

	if (s->ctx)
		s->daemon->up.context_leave(s);
	/*
	 * CM ids go here, not in ibvd_session_close(): a handler of this
	 * session may still hold one, and the session's own events stop as
	 * soon as it is closing.
	 */
	d->up.cm_free(s);
	event_free(s->read_ev);
	event_free(s->idle_ev);
	ibvd_close_client_socket(s->fd);
	TAILQ_REMOVE(&d->sessions, s, link);
	d->nsessions--;
	log_debug("client %llu: closed", (unsigned long long)s->id);
	ibvd_tenant_uncharge(s->tenant, IBVD_LIMIT_SESSION, 1);
	ibvd_tenant_put(s->tenant);
	free(s);
	ibvd_notify_status(d->notify);
}

void ibvd_session_close(struct ibvd_session *s)
{
	/*
	 * Release the device context now, so nothing outlives its device
	 * (reload frees removed devices right after closing their sessions);
	 * only the session itself waits for its callback to return.
	 */
	if (s->ctx)
		s->daemon->up.context_leave(s);
	if (s->in_callback) {
		/* No request may find a context session without its context. */
		s->state = IBVD_SESSION_CLOSED;
		s->closing = 1;
		event_del(s->read_ev);
		event_del(s->idle_ev);
		return;
	}
	session_destroy(s);
}

void ibvd_session_close_all(struct ibvd_daemon *d)
{
	struct ibvd_session *s;

	while ((s = TAILQ_FIRST(&d->sessions)))
		session_destroy(s);
	closer_stop();
}

int ibvd_session_send(struct ibvd_session *s, uint16_t type, uint32_t req_id,
		      const ProtobufCMessage *msg, const int *fds,
		      unsigned int nfds)
{
	char why[128];
	int ret;

	if (s->closing)
		return -EPIPE;
	ret = ibvd_frame_send(s->fd, type, req_id, msg, fds, nfds, MSG_DONTWAIT);
	if (ret == 0)
		return 0;
	if (ret == -EMSGSIZE) {
		log_warn("client %llu: %s reply does not fit in a frame",
			 (unsigned long long)s->id, ibvd_msg_type_name(type));
		return ret;
	}
	if (ret == -EAGAIN) {
		ibvd_tenant_slow_reader(s->tenant);
		log_drop(s, "not reading its replies (socket full)");
	} else if (ret != -EPIPE && ret != -ECONNRESET) {
		snprintf(why, sizeof(why), "send failed: %s", strerror(-ret));
		log_drop(s, why);
	}
	ibvd_session_close(s);
	return ret;
}

/* recv failed or EOF: say why (unless it is a plain goodbye) and close. */
static void session_lost(struct ibvd_session *s, int ret,
			 const struct ibvd_frame *frame)
{
	if (ret == 0 || ret == -ECONNRESET) {
		log_debug("client %llu: disconnected", (unsigned long long)s->id);
	} else if (ret == -EPROTO) {
		/* A newer or older client: tell it why before hanging up. */
		ibvd_frame_send_error(s->fd, frame->hdr.req_id, EPROTO,
				      "unsupported protocol version",
				      MSG_DONTWAIT);
		log_drop(s, "unsupported protocol version");
	} else if (ret == -EBADMSG) {
		log_drop(s, "malformed frame (short header, bad magic or length)");
	} else if (ret == -EMSGSIZE) {
		log_drop(s, "frame too large or too many fds");
	} else {
		log_drop(s, strerror(-ret));
	}
	ibvd_session_close(s);
}

/*
 * A fresh or admin connection holds nothing worth keeping: it is dropped
 * once silent for the idle timeout (counted from its last frame), so that
 * idle connections cannot pile up to the connection caps.  A device
 * context or a CM session (a server waiting for connections) is the
 * client's to keep.
 */
static void session_arm_idle(struct ibvd_session *s)
{
	struct timeval idle = { .tv_sec = ibvd_session_idle_timeout() };

	if (s->state == IBVD_SESSION_CONTEXT || s->state == IBVD_SESSION_CM)
		evtimer_del(s->idle_ev);
	else
		evtimer_add(s->idle_ev, &idle);
}

/* The backlog grew under this session's frame: read it again later. */
static void session_pause(struct ibvd_session *s)
{
	s->paused = 1;
	event_del(s->read_ev);
}

static void session_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ibvd_session *s = arg;
	struct ibvd_frame frame;
	unsigned int handled = 0;
	size_t backlog;
	int ret;

	s->in_callback = 1;
	/* At most a burst per wakeup; the event fires again if more wait. */
	while (handled < IBVD_SESSION_BURST && !s->closing) {
		backlog = closer.nbacklog;
		ret = ibvd_frame_recv(s->fd, s->daemon->rxbuf, IBVD_FRAME_MAX,
				      &frame, MSG_DONTWAIT);
		if (ret == -EAGAIN)
			break;
		if (ret <= 0) {
			session_lost(s, ret, &frame);
			break;
		}
		ibvd_call_dispatch(s, &frame);
		handled++;
		if (closer.nbacklog > backlog && !s->closing) {
			session_pause(s);
			break;
		}
	}
	if (handled && !s->closing)
		session_arm_idle(s);
	s->in_callback = 0;
	if (s->closing)
		session_destroy(s);
}

static void session_idle_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ibvd_session *s = arg;
	char why[64];

	snprintf(why, sizeof(why), "silent for %u s",
		 ibvd_session_idle_timeout());
	log_drop(s, why);
	ibvd_session_close(s);
}

static int session_events(struct ibvd_session *s)
{
	struct timeval idle = { .tv_sec = ibvd_session_idle_timeout() };
	struct event_base *base = s->daemon->base;

	s->read_ev = event_new(base, s->fd, EV_READ | EV_PERSIST,
			       session_read_cb, s);
	s->idle_ev = evtimer_new(base, session_idle_cb, s);
	if (!s->read_ev || !s->idle_ev)
		return -ENOMEM;
	if (event_add(s->read_ev, NULL) < 0 || evtimer_add(s->idle_ev, &idle) < 0)
		return -ENOMEM;
	return 0;
}

/*
 * One of its uid's "session" limit; root and the admin group are counted
 * but never refused, so that they can always look at what is going on.
 * Over the limit the client is told why (EAGAIN, as the server's own
 * "too many clients") before the connection closes.
 */
static int charge_session(struct ibvd_session *s)
{
	const struct ibvd_daemon *d = s->daemon;
	int ret;

	/*
	 * The daemon's own cap, its last slots kept for root and the admin
	 * group, as accept applies it (server.c): also for a session made
	 * otherwise (IMPORT_DEVICE's socket).
	 */
	if (d->nsessions >= IBVD_MAX_SESSIONS ||
	    (!s->privileged &&
	     d->nsessions >= IBVD_MAX_SESSIONS - IBVD_SESSIONS_RESERVED)) {
		ibvd_frame_send_error(s->fd, 0, EAGAIN, "too many clients",
				      MSG_DONTWAIT);
		return -EAGAIN;
	}
	if (s->privileged) {
		ibvd_tenant_charge_always(s->tenant, IBVD_LIMIT_SESSION, 1);
		return 0;
	}
	ret = ibvd_tenant_charge(s->tenant, IBVD_LIMIT_SESSION, 1, "connecting");
	if (ret < 0)
		ibvd_frame_send_error(s->fd, 0, EAGAIN,
				      "too many clients of this uid",
				      MSG_DONTWAIT);
	return ret;
}

int ibvd_session_new(struct ibvd_daemon *d, int fd, const struct ucred *cred,
		     int privileged, struct ibvd_session **ret_s)
{
	struct ibvd_session *s = calloc(1, sizeof(*s));
	int ret;

	if (!s) {
		ibvd_close_client_socket(fd);
		return -ENOMEM;
	}
	s->daemon = d;
	s->fd = fd;
	s->id = ++d->next_session_id;
	s->state = IBVD_SESSION_FRESH;
	s->cred = *cred;
	s->privileged = privileged;
	read_comm(s->cred.pid, s->comm, sizeof(s->comm));
	s->ident.pid = cred->pid;
	s->ident.uid = cred->uid;
	s->ident.gid = cred->gid;
	ibvd_peer_identity_read(&s->ident, "/proc");
	s->tenant = ibvd_tenant_get(d->cfg, &s->ident);
	if (!s->tenant) {
		ret = -ENOMEM;
		goto fail;
	}
	ret = charge_session(s);
	if (ret < 0)
		goto fail;
	ret = session_events(s);
	if (ret < 0)
		goto fail_charged;
	TAILQ_INSERT_TAIL(&d->sessions, s, link);
	d->nsessions++;
	log_debug("client %llu: connected: pid %d uid %u gid %u comm %s cgroup %s%s",
		  (unsigned long long)s->id, (int)s->cred.pid,
		  (unsigned int)s->cred.uid, (unsigned int)s->cred.gid, s->comm,
		  s->ident.cgroup[0] ? s->ident.cgroup : "?",
		  privileged ? " (admin)" : "");
	ibvd_notify_status(d->notify);
	if (ret_s)
		*ret_s = s;
	return 0;
fail_charged:
	ibvd_tenant_uncharge(s->tenant, IBVD_LIMIT_SESSION, 1);
fail:
	if (s->read_ev)
		event_free(s->read_ev);
	if (s->idle_ev)
		event_free(s->idle_ev);
	ibvd_close_client_socket(fd);
	if (s->tenant)
		ibvd_tenant_put(s->tenant);
	free(s);
	return ret;
}
