/*
 * Event channels: a CM session of the daemon (CM_OPEN) with its event
 * socket, and what the app polls.
 *
 * The daemon writes one CmEvent frame per event to the event socket.
 * rdma_migrate_id(3) also moves the events already pending for an id to
 * its new channel, and those are in the old channel's socket by then (the
 * daemon sends later ones to the new session, PROTOCOL.md §10.8): the
 * library takes them out and queues them on the new channel.  So that the
 * app still sees a readable fd exactly when an event is pending,
 * channel->fd is an epoll instance over the event socket and an eventfd
 * that is readable while the channel's local queue is not empty; poll(),
 * O_NONBLOCK and EINTR work on it as on the kernel's rdma_cm file.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "cma.h"
#include "util.h"

struct cma_queued {
	struct cma_queued *next;
	Ibvd__CmEvent *m;
};

/* ---- the local queue (under recv_lock) --------------------------------------- */

static void queue_signal(struct cma_channel *ch, bool pending)
{
	uint64_t v = 1;

	/* Readable exactly while something is queued. */
	if (pending)
		(void)!write(ch->efd, &v, sizeof(v));
	else
		(void)!read(ch->efd, &v, sizeof(v));
}

static void queue_push(struct cma_channel *ch, struct cma_queued *q)
{
	bool was_empty = !ch->qhead;

	q->next = NULL;
	if (ch->qtail)
		ch->qtail->next = q;
	else
		ch->qhead = q;
	ch->qtail = q;
	if (was_empty)
		queue_signal(ch, true);
}

static struct cma_queued *queue_pop(struct cma_channel *ch)
{
	struct cma_queued *q = ch->qhead;

	if (!q)
		return NULL;
	ch->qhead = q->next;
	if (!ch->qhead) {
		ch->qtail = NULL;
		queue_signal(ch, false);
	}
	return q;
}

static void queue_free_all(struct cma_channel *ch)
{
	struct cma_queued *q;

	while ((q = ch->qhead)) {
		ch->qhead = q->next;
		ibvd__cm_event__free_unpacked(q->m, NULL);
		free(q);
	}
	ch->qtail = NULL;
}

/* ---- creation and destruction -------------------------------------------------- */

/*
 * A freed channel's struct stays a while, closed, as a tombstone: rping's
 * event thread acks its last event and calls rdma_get_cm_event() again
 * while main destroys the channel.  The kernel answers that late call with
 * EBADF (its fd is closed), and so does the tombstone (`closing`), rather
 * than the call reading freed memory.  The oldest goes when a new one
 * comes: only a thread stalled across that many destroys could miss it.
 */
#define CHANNEL_TOMBSTONES	16

static pthread_mutex_t tombs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cma_channel *tombs[CHANNEL_TOMBSTONES];
static unsigned int tombs_next;

static void close_once(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void channel_free(struct cma_channel *ch)
{
	struct cma_channel *old;

	close_once(&ch->channel.fd);
	close_once(&ch->efd);
	close_once(&ch->sock);
	ibvd_conn_close(&ch->conn);
	queue_free_all(ch);
	free(ch->buf);
	ch->buf = NULL;
	ch->closing = true;
	pthread_mutex_lock(&tombs_lock);
	old = tombs[tombs_next];
	tombs[tombs_next] = ch;
	tombs_next = (tombs_next + 1) % CHANNEL_TOMBSTONES;
	pthread_mutex_unlock(&tombs_lock);
	if (old) {
		pthread_mutex_destroy(&old->ids_lock);
		pthread_mutex_destroy(&old->recv_lock);
		pthread_rwlock_destroy(&old->take_lock);
		free(old);
	}
}

static int open_session(struct cma_channel *ch)
{
	Ibvd__CmOpenReply *reply = NULL;
	unsigned int nfds = 1;
	int fd = -1, ret;

	ret = ibvd_conn_open(&ch->conn, NULL);
	/* No daemon to talk to is no RDMA CM device, as without rdma_cm. */
	if (ret == -ENOENT || ret == -ECONNREFUSED)
		return -ENODEV;
	if (ret < 0)
		return ret;
	ret = ibvd_conn_call(&ch->conn, IBVD_MSG_CM_OPEN, NULL,
			     &ibvd__cm_open_reply__descriptor,
			     (ProtobufCMessage **)&reply, &fd, &nfds);
	if (ret < 0)
		return ret;
	if (nfds != 1 || reply->token.len > sizeof(ch->token)) {
		if (nfds == 1)
			close(fd);
		ibvd__cm_open_reply__free_unpacked(reply, NULL);
		return -EPROTO;
	}
	memcpy(ch->token, reply->token.data, reply->token.len);
	ch->token_len = reply->token.len;
	ibvd__cm_open_reply__free_unpacked(reply, NULL);
	ch->sock = fd;
	return 0;
}

static int epoll_add(int epfd, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

int cma_channel_create(struct cma_channel **ret_ch)
{
	struct cma_channel *ch;
	int ret;

	ch = calloc(1, sizeof(*ch));
	if (!ch)
		return -ENOMEM;
	ch->channel.fd = -1;
	ch->sock = -1;
	ch->efd = -1;
	ch->conn.sock = -1;
	pthread_rwlock_init(&ch->take_lock, NULL);
	pthread_mutex_init(&ch->recv_lock, NULL);
	pthread_mutex_init(&ch->ids_lock, NULL);
	ch->buf = malloc(IBVD_FRAME_MAX);
	if (!ch->buf) {
		ret = -ENOMEM;
		goto fail;
	}
	ret = open_session(ch);
	if (ret < 0)
		goto fail;
	/* Non-blocking: emptying it (queue_signal) must never wait. */
	ch->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ch->channel.fd = epoll_create1(EPOLL_CLOEXEC);
	if (ch->efd < 0 || ch->channel.fd < 0) {
		ret = -errno;
		goto fail;
	}
	ret = epoll_add(ch->channel.fd, ch->sock);
	if (ret == 0)
		ret = epoll_add(ch->channel.fd, ch->efd);
	if (ret < 0)
		goto fail;
	*ret_ch = ch;
	return 0;
fail:
	channel_free(ch);
	return ret;
}

/*
 * Closing the session makes the daemon destroy what is left on it.
 *
 * Apps destroy a channel while their CM thread still waits on it: rping
 * leaves that thread blocked in rdma_get_cm_event() until it exits, which
 * with the kernel's rdma_cm stays blocked on the file it holds, and must
 * neither wake up with an error (rping would exit with it) nor touch freed
 * memory.  So a channel with waiters is marked and they are woken: each
 * leaves it, the last one frees it, and a blocking call then waits on for
 * ever (events.c).
 */
void cma_channel_destroy(struct cma_channel *ch)
{
	unsigned int waiters;

	pthread_mutex_lock(&ch->recv_lock);
	ch->closing = true;
	waiters = ch->waiters;
	/* Wake them: they see `closing`, and the last one frees ch. */
	if (waiters)
		queue_signal(ch, true);
	pthread_mutex_unlock(&ch->recv_lock);
	if (!waiters)
		channel_free(ch);
}

int cma_channel_enter(struct cma_channel *ch)
{
	int ret = 0;

	pthread_mutex_lock(&ch->recv_lock);
	if (ch->closing)
		ret = -EBADF;
	else
		ch->waiters++;
	pthread_mutex_unlock(&ch->recv_lock);
	return ret;
}

bool cma_channel_leave(struct cma_channel *ch)
{
	bool closing, last;

	pthread_mutex_lock(&ch->recv_lock);
	closing = ch->closing;
	last = --ch->waiters == 0 && closing;
	pthread_mutex_unlock(&ch->recv_lock);
	if (last)
		channel_free(ch);
	return closing;
}

struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct cma_channel *ch;
	int ret;

	ret = cma_channel_create(&ch);
	return ret < 0 ? cma_null_ret(ret) : &ch->channel;
}

void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	if (channel)
		cma_channel_destroy(to_cma_channel(channel));
}

/* ---- reading ------------------------------------------------------------------------ */

/*
 * One frame from the event socket, without blocking, under recv_lock.
 * Returns 1 with *ret_m, 0 for a frame to skip, -EAGAIN for none, -EIO
 * when the daemon is gone (end of file) or the channel is a forked
 * child's copy: the socket is the parent's too, and a frame the child
 * took (destroying an id drains it) would be an event the parent never
 * sees.
 */
static int recv_locked(struct cma_channel *ch, Ibvd__CmEvent **ret_m)
{
	struct ibvd_frame frame;
	int ret;

	if (ch->dead || ch->conn.owner != getpid())
		return -EIO;
	ret = ibvd_frame_recv(ch->sock, ch->buf, IBVD_FRAME_MAX, &frame,
			      MSG_DONTWAIT);
	if (ret == 0 || ret == -ECONNRESET) {
		ch->dead = true;
		return -EIO;
	}
	/* A malformed frame was consumed (and its fds closed): skip it. */
	if (ret == -EMSGSIZE || ret == -EBADMSG || ret == -EPROTO)
		return 0;
	if (ret < 0)
		return ret;
	ibvd_frame_close_fds(&frame);
	if (frame.hdr.type != IBVD_MSG_CM_EVENT)
		return 0;
	*ret_m = ibvd__cm_event__unpack(NULL, frame.hdr.len, frame.payload);
	return *ret_m ? 1 : 0;
}

/* The next message: queued ones first, they came out of the socket earlier. */
static int take(struct cma_channel *ch, Ibvd__CmEvent **ret_m)
{
	struct cma_queued *q;
	int ret;

	pthread_rwlock_rdlock(&ch->take_lock);
	pthread_mutex_lock(&ch->recv_lock);
	if (ch->closing) {
		ret = -EBADF;
	} else if ((q = queue_pop(ch))) {
		*ret_m = q->m;
		free(q);
		ret = 1;
	} else {
		ret = recv_locked(ch, ret_m);
	}
	pthread_mutex_unlock(&ch->recv_lock);
	if (ret != 1)
		pthread_rwlock_unlock(&ch->take_lock);
	return ret;
}

/*
 * Events come in bursts while an app sets up connections, a few tens of
 * microseconds apart, and a thread asleep in poll() costs the daemon a
 * wakeup per event (expensive in a virtual machine, cmtime).  So a
 * blocking channel looks for the next event for a while first, yielding
 * the CPU between looks, as the library does for its replies
 * (common/conn.c); a non-blocking one never waits.
 */
#define EVENT_POLL_NS	50000u

/*
 * Cancellation (pthread_cancel(3)) acts in rdma_get_cm_event only where a
 * read() of the kernel's rdma_cm file would take it: while blocked.  Else
 * it could strike in a system call made under a lock (a non-blocking
 * recvmsg, a close of a frame's fds) and leave the lock held for ever.
 * The caller's own setting is kept for those moments.
 */
static __thread int app_cancel_state = PTHREAD_CANCEL_ENABLE;

void cma_cancel_hold(void)
{
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &app_cancel_state);
}

void cma_cancel_release(void)
{
	pthread_setcancelstate(app_cancel_state, NULL);
}

int cma_blocked_wait(int fd)
{
	int held, ret;

	pthread_setcancelstate(app_cancel_state, &held);
	/* an epoll of the daemon's socket and our wake-ups: polled */
	ret = fd < 0 ? pause() : ibvd_wait_readable(fd, false);
	pthread_setcancelstate(held, NULL);
	return ret;
}

/*
 * The channel fd's file status flags, from the kernel itself: an fcntl(2)
 * interposed on ours is not entered.  The fd is also an rsocket's name,
 * and librspreload takes the fcntl of a thread that did not come in
 * through an r* call (the keepalive thread's, rsocket/keepalive.c) for
 * the app's: rfcntl, which waits for the rsocket's lock that thread holds.
 */
int cma_channel_flags(const struct cma_channel *ch)
{
	long flags = syscall(SYS_fcntl, ch->channel.fd, F_GETFL);

	return flags < 0 ? -errno : (int)flags;
}

static int wait_event(struct cma_channel *ch, uint64_t *spin_start)
{
	/* Its mode once per call: a thread in poll() would not see it change. */
	if (!*spin_start) {
		int flags = cma_channel_flags(ch);

		if (flags < 0)
			return flags;
		if (flags & O_NONBLOCK)
			return -EAGAIN;
		*spin_start = ibvd_mono_ns();
	}
	if (ibvd_mono_ns() - *spin_start < EVENT_POLL_NS) {
		sched_yield();
		return 0;
	}
	return cma_blocked_wait(ch->channel.fd);
}

int cma_channel_next(struct cma_channel *ch, Ibvd__CmEvent **ret_m)
{
	uint64_t spin_start = 0;
	int ret;

	for (;;) {
		ret = take(ch, ret_m);
		/* Skipped a frame: look again at once. */
		if (ret == 0)
			continue;
		/* Nothing yet, or another thread took what woke us. */
		if (ret != -EAGAIN)
			return ret;
		ret = wait_event(ch, &spin_start);
		if (ret < 0)
			return ret;
	}
}

void cma_channel_done(struct cma_channel *ch)
{
	pthread_rwlock_unlock(&ch->take_lock);
}

bool cma_channel_dead(struct cma_channel *ch)
{
	bool dead;

	pthread_mutex_lock(&ch->recv_lock);
	dead = ch->dead;
	pthread_mutex_unlock(&ch->recv_lock);
	return dead;
}

/* ---- taking events out: migration, destruction ------------------------------------ */

/* Everything in ch's socket read into its queue, under recv_lock. */
static void drain_socket(struct cma_channel *ch)
{
	struct cma_queued *q;
	Ibvd__CmEvent *m;
	int ret;

	for (;;) {
		ret = recv_locked(ch, &m);
		if (ret == 0)
			continue;
		if (ret < 0)
			break;
		q = malloc(sizeof(*q));
		if (!q) {
			/* Out of memory: this one is lost, as a full socket's. */
			ibvd__cm_event__free_unpacked(m, NULL);
			continue;
		}
		q->m = m;
		queue_push(ch, q);
	}
}

typedef bool (*event_match_fn)(const Ibvd__CmEvent *m, uint32_t handle);

/*
 * ch's socket read into its queue, then up to max of the queued events
 * that match handle taken out, in order; the eventfd follows the queue.
 */
static struct cma_queued *take_events(struct cma_channel *ch,
				      event_match_fn match, uint32_t handle,
				      unsigned int max)
{
	struct cma_queued *taken = NULL, **ttail = &taken, **p, *q;
	bool was_empty;

	pthread_mutex_lock(&ch->recv_lock);
	drain_socket(ch);
	was_empty = !ch->qhead;
	ch->qtail = NULL;
	for (p = &ch->qhead; (q = *p);) {
		if (max && match(q->m, handle)) {
			*p = q->next;
			q->next = NULL;
			*ttail = q;
			ttail = &q->next;
			max--;
		} else {
			ch->qtail = q;
			p = &q->next;
		}
	}
	if (!ch->qhead && !was_empty)
		queue_signal(ch, false);
	pthread_mutex_unlock(&ch->recv_lock);
	return taken;
}

/* The id's own events; requests to a listener are its children's. */
static bool id_event(const Ibvd__CmEvent *m, uint32_t handle)
{
	return m->id == handle && m->event != RDMA_CM_EVENT_CONNECT_REQUEST;
}

static bool request_to(const Ibvd__CmEvent *m, uint32_t handle)
{
	return m->event == RDMA_CM_EVENT_CONNECT_REQUEST &&
	       m->listen_id == handle;
}

static bool id_or_request_to(const Ibvd__CmEvent *m, uint32_t handle)
{
	return id_event(m, handle) || request_to(m, handle);
}

/*
 * After CM_MIGRATE_ID: the events of from's id old_handle still in from's
 * socket go to to's queue as to's id new_handle, in order; the other
 * ids' events stay pending in from's queue (its fd stays readable).  A
 * listener's requests are cma_channel_take_request's.
 */
void cma_channel_move_events(struct cma_channel *from, uint32_t old_handle,
			     struct cma_channel *to, uint32_t new_handle)
{
	struct cma_queued *q, *moved = take_events(from, id_event, old_handle,
						   UINT_MAX);

	pthread_mutex_lock(&to->recv_lock);
	while ((q = moved)) {
		moved = q->next;
		q->m->id = new_handle;
		queue_push(to, q);
	}
	pthread_mutex_unlock(&to->recv_lock);
}

Ibvd__CmEvent *cma_channel_take_request(struct cma_channel *ch,
					 uint32_t listen_handle)
{
	struct cma_queued *q = take_events(ch, request_to, listen_handle, 1);
	Ibvd__CmEvent *m;

	if (!q)
		return NULL;
	m = q->m;
	free(q);
	return m;
}

int cma_channel_put(struct cma_channel *ch, Ibvd__CmEvent *m)
{
	struct cma_queued *q = malloc(sizeof(*q));

	if (!q)
		return -ENOMEM;
	q->m = m;
	pthread_mutex_lock(&ch->recv_lock);
	queue_push(ch, q);
	pthread_mutex_unlock(&ch->recv_lock);
	return 0;
}

void cma_channel_forget_id(struct cma_channel *ch, uint32_t handle,
			   void (*refuse)(struct cma_channel *, uint32_t))
{
	struct cma_queued *q, *gone = take_events(ch, id_or_request_to, handle,
						  UINT_MAX);

	while ((q = gone)) {
		gone = q->next;
		if (q->m->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			refuse(ch, q->m->id);
		ibvd__cm_event__free_unpacked(q->m, NULL);
		free(q);
	}
}
