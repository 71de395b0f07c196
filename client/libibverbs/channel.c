/*
 * Completion channels.  A channel is the client end of a SOCK_SEQPACKET
 * pair whose other end the daemon keeps; the engine sends one CompEvent
 * frame per notification of an armed CQ.  Beside it, once a CQ of the
 * channel receives from a transit ring, the reading end of the channel's
 * wake-up pair (CHANNEL_POKE): a byte there means "look at the rings",
 * from the senders of those rings or from this library, which fires the
 * events of what it places itself (common/transit.h, "Blocking").
 * channel->fd is an epoll instance holding both, so apps can poll() it
 * and make it non-blocking like a kernel channel.
 */
#include "config.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "barrier.h"
#include "ibverbsd.pb-c.h"
#include "ibvd_verbs.h"

static int create_on_daemon(struct ibv_context *ctx,
			    struct ibvc_comp_channel *ch)
{
	Ibvd__Handle *reply = NULL;
	unsigned int nfds = 1;
	int fd = -1, ret;

	ret = ibvd_conn_call(ibvc_conn_of(ctx), IBVD_MSG_CREATE_COMP_CHANNEL,
			     NULL, &ibvd__handle__descriptor,
			     (ProtobufCMessage **)&reply, &fd, &nfds);
	if (ret < 0)
		return ret;
	ch->handle = reply->handle;
	ibvd__handle__free_unpacked(reply, NULL);
	if (nfds != 1) {
		ibvc_destroy_handle(ctx, IBVD_MSG_DESTROY_COMP_CHANNEL,
				    ch->handle);
		return -EPROTO;
	}
	ch->sock = fd;
	return 0;
}

static int watch(int epfd, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* The context's list of its channels (ibvc_channels_orphan). */
static void channel_list(struct ibvc_comp_channel *ch, bool add)
{
	struct ibvc_context *ictx = to_ibvc_context(ch->channel.context);

	pthread_mutex_lock(&ictx->obj_lock);
	if (add)
		LIST_INSERT_HEAD(&ictx->channels, ch, ctx_link);
	else
		LIST_REMOVE(ch, ctx_link);
	pthread_mutex_unlock(&ictx->obj_lock);
}

void ibvc_channels_orphan(struct ibvc_context *ictx)
{
	struct ibvc_comp_channel *ch;

	pthread_mutex_lock(&ictx->obj_lock);
	LIST_FOREACH(ch, &ictx->channels, ctx_link) {
		pthread_mutex_lock(&ch->recv_lock);
		ch->orphaned = true;
		ch->cqs = NULL;		/* their rings go with the context */
		pthread_mutex_unlock(&ch->recv_lock);
		/* a thread asleep on it wakes to the end of the stream */
		if (ch->sock >= 0)
			shutdown(ch->sock, SHUT_RDWR);
	}
	LIST_INIT(&ictx->channels);
	pthread_mutex_unlock(&ictx->obj_lock);
}

static bool orphaned(struct ibvc_comp_channel *ch)
{
	bool ret;

	pthread_mutex_lock(&ch->recv_lock);
	ret = ch->orphaned;
	pthread_mutex_unlock(&ch->recv_lock);
	return ret;
}

static void channel_free(struct ibvc_comp_channel *ch)
{
	int i;

	if (!orphaned(ch))
		channel_list(ch, false);
	for (i = 0; i < 2; i++)
		if (ch->poke[i] >= 0)
			close(ch->poke[i]);
	if (ch->sock >= 0)
		close(ch->sock);
	if (ch->channel.fd >= 0)
		close(ch->channel.fd);
	pthread_mutex_destroy(&ch->recv_lock);
	free(ch->buf);
	free(ch);
}

static int channel_new(struct ibv_context *ctx,
		       struct ibvc_comp_channel **ret_ch)
{
	struct ibvc_comp_channel *ch = calloc(1, sizeof(*ch));
	int ret;

	if (!ch)
		return -ENOMEM;
	pthread_mutex_init(&ch->recv_lock, NULL);
	ch->channel.context = ctx;
	ch->sock = ch->poke[0] = ch->poke[1] = -1;
	ch->channel.fd = epoll_create1(EPOLL_CLOEXEC);
	channel_list(ch, true);
	if (ch->channel.fd < 0) {
		ret = -errno;
		channel_free(ch);
		return ret;
	}
	*ret_ch = ch;
	return 0;
}

static int create_channel(struct ibv_context *ctx,
			  struct ibvc_comp_channel **ret_ch)
{
	struct ibvc_comp_channel *ch;
	int ret;

	ret = channel_new(ctx, &ch);
	if (ret < 0)
		return ret;
	ret = create_on_daemon(ctx, ch);
	if (ret == 0) {
		ret = watch(ch->channel.fd, ch->sock);
		if (ret < 0)
			ibvc_destroy_handle(ctx, IBVD_MSG_DESTROY_COMP_CHANNEL,
					    ch->handle);
	}
	if (ret < 0) {
		channel_free(ch);
		return ret;
	}
	*ret_ch = ch;
	return 0;
}

int ibvc_channel_adopt(struct ibv_context *ctx, uint32_t handle, int fd,
		       struct ibvc_comp_channel **ret_ch)
{
	struct ibvc_comp_channel *ch;
	int ret;

	ret = channel_new(ctx, &ch);
	if (ret < 0)
		return ret;
	ch->handle = handle;
	ret = watch(ch->channel.fd, fd);
	if (ret < 0) {
		channel_free(ch);
		return ret;
	}
	ch->sock = fd;
	*ret_ch = ch;
	return 0;
}

/*
 * The wake-up pair, fetched once, by the first QP with transit rings and
 * a CQ on the channel: until then (and if it cannot be had) the engine
 * places and fires for sleepers, as for any.
 */
void ibvc_channel_poke_fetch(struct ibv_comp_channel *channel)
{
	struct ibvc_comp_channel *ch = to_ibvc_channel(channel);
	Ibvd__Handle req = IBVD__HANDLE__INIT;
	int fds[2] = { -1, -1 };
	unsigned int nfds = 2;
	int ret;

	if (__atomic_load_n(&ch->poke[1], __ATOMIC_ACQUIRE) >= 0)
		return;
	pthread_mutex_lock(&ch->recv_lock);
	if (ch->poke[1] >= 0)
		goto out;
	req.handle = ch->handle;
	ret = ibvd_conn_call(ibvc_conn_of(channel->context),
			     IBVD_MSG_CHANNEL_POKE, &req.base, NULL, NULL,
			     fds, &nfds);
	if (ret < 0 || nfds != 2 || watch(channel->fd, fds[0]) < 0)
		goto out;
	ch->poke[0] = fds[0];
	/* Release: whoever sees the writing end, sees the reader watched. */
	__atomic_store_n(&ch->poke[1], fds[1], __ATOMIC_RELEASE);
	fds[0] = fds[1] = -1;
out:
	pthread_mutex_unlock(&ch->recv_lock);
	while (nfds)
		if (fds[--nfds] >= 0)
			close(fds[nfds]);
}

int ibvc_channel_poke_fd(struct ibv_comp_channel *channel)
{
	struct ibvc_comp_channel *ch = to_ibvc_channel(channel);

	if (__atomic_load_n(&ch->poke_dead, __ATOMIC_ACQUIRE))
		return -1;
	return __atomic_load_n(&ch->poke[1], __ATOMIC_ACQUIRE);
}

/* The pokes' pipe is set once, by any thread (ibvc_channel_poke_fetch). */
static bool has_pokes(const struct ibvc_comp_channel *ch)
{
	return __atomic_load_n(&ch->poke[1], __ATOMIC_ACQUIRE) >= 0;
}

/*
 * How long a sleeping sender waits for its receiver's library before the
 * engine takes its SENDs (a receiver that armed its CQ and then blocked
 * on something else), in ms.  Only a sender that sleeps in our own
 * ibv_get_cq_event can be seen to: an app with a non-blocking fd, which
 * sleeps in its own poll(), has the engine watch for it, as before; one
 * that slept here once and then sleeps in its own poll() of the blocking
 * fd is poked in (ibvc_channel_fallback).
 */
#define FALLBACK_MS	1

/*
 * The byte of a watch poke (ibvc_channel_fallback), beside the 0 of the
 * others (ibvc_poke): it only brings the app in to watch, and stands for
 * no completion.  A blocking ibv_get_cq_event that finds only these at
 * entry owes the app no event (unseen_poke_event): the library pokes so
 * at every post of a sender asleep here, and an app that never poll()s
 * the fd and counts one completion per event (perftest's -e) would get
 * an event of the wrong CQ whenever its peer is late.
 */
#define WATCH_BYTE	'w'

static void watch_poke(struct ibv_comp_channel *channel)
{
	int fd = ibvc_channel_poke_fd(channel);
	const char byte = WATCH_BYTE;

	/* full: what it holds wakes the app as well as ours would */
	if (fd >= 0)
		(void)send(fd, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

int ibvc_channel_fallback(struct ibv_comp_channel *channel)
{
	struct ibvc_comp_channel *ch = to_ibvc_channel(channel);

	if (!__atomic_load_n(&ch->sleeps_here, __ATOMIC_RELAXED))
		return -1;
	/*
	 * One asleep already waits without a timeout: it must look again.
	 * None in ibv_get_cq_event: the app sleeps in its own poll() of the
	 * fd (it may move there any time), which must bring it in to watch.
	 */
	if (!__atomic_exchange_n(&ch->watching, true, __ATOMIC_SEQ_CST) ||
	    !__atomic_load_n(&ch->waiters, __ATOMIC_SEQ_CST))
		watch_poke(channel);
	return 0;
}

/*
 * Under recv_lock, nothing for FALLBACK_MS: the engine sees to sleepers
 * whose receivers took nothing meanwhile; we stop watching when none
 * waits.
 */
static void fallback_look(struct ibvc_comp_channel *ch)
{
	bool again = false;
	struct ibvc_cq *cq;

	/* First: a sender that asks after this store pokes us to look. */
	__atomic_store_n(&ch->watching, false, __ATOMIC_SEQ_CST);
	for (cq = ch->cqs; cq; cq = cq->next_on_channel)
		if (ibvc_direct_fallback(cq))
			again = true;
	if (again)
		__atomic_store_n(&ch->watching, true, __ATOMIC_RELEASE);
}

/* ms to wait for: `want` (-1: for ever), cut to a deadline (0: none). */
static int wait_ms(int want, uint64_t deadline)
{
	uint64_t now, left;

	if (!deadline)
		return want;
	now = ibvd_mono_ns();
	left = deadline > now ? (deadline - now + 999999) / 1000000 : 0;
	return want >= 0 && (uint64_t)want < left ? want : (int)left;
}

static void leave_context(struct ibvc_comp_channel *ch,
			  struct ibvc_context *ictx);

/* A thread cancelled in its sleep: what its call would have undone. */
static void wait_cancelled(void *arg)
{
	struct ibvc_comp_channel *ch = arg;

	__atomic_sub_fetch(&ch->waiters, 1, __ATOMIC_RELEASE);
	leave_context(ch, to_ibvc_context(ch->channel.context));
}

/*
 * The sleep is the one point where ibv_get_cq_event can be cancelled, as
 * rdma-core's read() can: nowhere that holds a lock.  cancel_state is
 * the app's; the rest of the call runs with cancellation off.
 */
static int cancellable_poll(struct ibvc_comp_channel *ch, struct pollfd *pfd,
			    int ms, int cancel_state)
{
	int n, err;

	pthread_cleanup_push(wait_cancelled, ch);
	pthread_setcancelstate(cancel_state, NULL);
	n = poll(pfd, 1, ms);
	err = errno;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	pthread_cleanup_pop(0);
	errno = err;
	return n;
}

/*
 * wait_channel's sleep: 0 when readable or a rescan is due, -ETIMEDOUT at
 * the deadline (CLOCK_MONOTONIC ns, 0: none), or -errno.
 */
static int wait_watching(struct ibvc_comp_channel *ch, struct pollfd *pfd,
			 uint64_t deadline, int cancel_state)
{
	int n;

	for (;;) {
		bool watching = __atomic_load_n(&ch->watching, __ATOMIC_SEQ_CST);
		bool rescan = __atomic_load_n(&ch->rescan, __ATOMIC_ACQUIRE);

		/*
		 * poll, not a blocking recv on the daemon's socket, which
		 * would restart under SA_RESTART as rdma-core's read does: a
		 * wake-up pair may come beside the socket while we wait, and
		 * a recv would not hear it.  So any signal ends this wait.
		 */
		n = cancellable_poll(ch, pfd,
				     wait_ms(watching || rescan ? FALLBACK_MS : -1,
					     deadline), cancel_state);
		if (n != 0)
			return n < 0 ? -errno : 0;
		/* after a last look: what came just now is no timeout */
		if (deadline && ibvd_mono_ns() >= deadline)
			return -ETIMEDOUT;
		/* the engine held a receive queue we had to look at: again */
		if (__atomic_exchange_n(&ch->rescan, false, __ATOMIC_ACQ_REL))
			return 0;
		pthread_mutex_lock(&ch->recv_lock);
		fallback_look(ch);
		pthread_mutex_unlock(&ch->recv_lock);
	}
}

/*
 * As ibvd_wait_readable, with a look at the senders every FALLBACK_MS
 * while some of them count on their receivers' libraries to wake them,
 * and back to the rings after as long when one of them was busy; until
 * the deadline (wait_watching).
 */
static int wait_channel(struct ibvc_comp_channel *ch, uint64_t deadline,
			int cancel_state)
{
	struct pollfd pfd = { .fd = ch->channel.fd, .events = POLLIN };
	int flags = fcntl(ch->channel.fd, F_GETFL), n;

	if (flags < 0)
		return -errno;
	if (flags & O_NONBLOCK) {
		/* the app sleeps in its own poll(): the engine watches */
		__atomic_store_n(&ch->sleeps_here, false, __ATOMIC_RELAXED);
		n = poll(&pfd, 1, 0);
		return n < 0 ? -errno : n == 0 ? -EAGAIN : 0;
	}
	if (has_pokes(ch))
		__atomic_store_n(&ch->sleeps_here, true, __ATOMIC_RELAXED);
	/* Store (waiters) -> load (watching), mirrored by the senders. */
	__atomic_add_fetch(&ch->waiters, 1, __ATOMIC_SEQ_CST);
	n = wait_watching(ch, &pfd, deadline, cancel_state);
	__atomic_sub_fetch(&ch->waiters, 1, __ATOMIC_RELEASE);
	return n;
}

/* CQs of the channel, for the look at their rings (CQ create, destroy). */
void ibvc_channel_link(struct ibv_comp_channel *channel, struct ibvc_cq *cq,
		       bool add)
{
	struct ibvc_comp_channel *ch = to_ibvc_channel(channel);
	struct ibvc_cq **p;

	pthread_mutex_lock(&ch->recv_lock);
	if (add) {
		cq->next_on_channel = ch->cqs;
		ch->cqs = cq;
	} else {
		for (p = &ch->cqs; *p; p = &(*p)->next_on_channel)
			if (*p == cq) {
				*p = cq->next_on_channel;
				break;
			}
	}
	pthread_mutex_unlock(&ch->recv_lock);
}

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx)
{
	struct ibvc_comp_channel *ch;
	int ret;

	if (!ctx)
		return ibvc_null_ret(-EINVAL);
	ret = create_channel(ctx, &ch);
	return ret < 0 ? ibvc_null_ret(ret) : &ch->channel;
}

/*
 * A thread still asleep in ibv_get_cq_event on a channel being destroyed
 * (the app's race; rdma-core's would sleep on in read): woken at the end
 * of its stream, and waited for, since it looks at the channel when it
 * wakes.
 */
static void wait_users_gone(struct ibvc_comp_channel *ch)
{
	unsigned int users;

	/* under recv_lock: no wait starts after this */
	pthread_mutex_lock(&ch->recv_lock);
	ch->closing = true;
	users = __atomic_load_n(&ch->users, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&ch->recv_lock);
	if (!users)
		return;
	shutdown(ch->sock, SHUT_RDWR);
	ibvc_wait_none_inside(&ch->users);
}

/* CQs hold the channel through refcnt, under the context mutex. */
static bool channel_in_use(struct ibv_comp_channel *channel)
{
	pthread_mutex_t *mutex = &channel->context->mutex;
	bool busy;

	pthread_mutex_lock(mutex);
	busy = channel->refcnt != 0;
	pthread_mutex_unlock(mutex);
	return busy;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct ibvc_comp_channel *ch;
	int ret;

	if (!channel)
		return EINVAL;
	ch = to_ibvc_channel(channel);
	/* its context was closed: nothing to ask, nothing holds it */
	if (orphaned(ch)) {
		channel_free(ch);
		return 0;
	}
	if (channel_in_use(channel))
		return EBUSY;
	ret = ibvc_destroy_handle(channel->context,
				  IBVD_MSG_DESTROY_COMP_CHANNEL, ch->handle);
	if (ret < 0)
		return ibvc_errno_ret(ret);
	wait_users_gone(ch);
	channel_free(ch);
	return 0;
}

/* ---- events -------------------------------------------------------------- */

/*
 * Take one frame without blocking.  Returns 1 with *handle set, 0 for a
 * frame to skip, -EAGAIN when another thread took the frame we were woken
 * for, -EIO when the daemon is gone.
 */
static int recv_comp_event(struct ibvc_comp_channel *ch, uint32_t *handle)
{
	struct ibvd_frame frame;
	Ibvd__CompEvent *m;
	int ret;

	pthread_mutex_lock(&ch->recv_lock);
	/*
	 * The frame buffer comes with the first event: librdmacm makes two
	 * channels per QP it creates, most of which never see one.
	 */
	if (!ch->buf && !(ch->buf = malloc(IBVD_FRAME_MAX))) {
		ret = -ENOMEM;
		goto out;
	}
	ret = ibvd_frame_recv(ch->sock, ch->buf, IBVD_FRAME_MAX, &frame,
			      MSG_DONTWAIT);
	if (ret == 0 || ret == -ECONNRESET) {
		ret = -EIO;
		goto out;
	}
	/* A malformed frame was consumed (and its fds closed): skip it. */
	if (ret == -EMSGSIZE || ret == -EBADMSG || ret == -EPROTO) {
		ret = 0;
		goto out;
	}
	if (ret < 0)
		goto out;
	ibvd_frame_close_fds(&frame);
	if (frame.hdr.type != IBVD_MSG_COMP_EVENT) {
		ret = 0;
		goto out;
	}
	m = ibvd__comp_event__unpack(NULL, frame.hdr.len, frame.payload);
	ret = m && m->cq ? 1 : 0;
	if (m) {
		*handle = m->cq;
		ibvd__comp_event__free_unpacked(m, NULL);
	}
out:
	pthread_mutex_unlock(&ch->recv_lock);
	return ret;
}

/*
 * The CQ an event names, counted as delivered so that ibv_destroy_cq waits
 * for its ack; NULL if the CQ is gone (events queued before its destroy).
 */
static struct ibvc_cq *claim_event(struct ibvc_context *ictx, uint32_t handle)
{
	struct ibvc_cq *cq;

	pthread_mutex_lock(&ictx->obj_lock);
	cq = ibvc_obj_lookup_locked(ictx, handle, IBVC_OBJ_CQ);
	if (cq) {
		pthread_mutex_lock(&cq->cq.mutex);
		cq->comp_delivered++;
		pthread_mutex_unlock(&cq->cq.mutex);
	}
	pthread_mutex_unlock(&ictx->obj_lock);
	return cq;
}

static void count_delivered(struct ibvc_cq *cq)
{
	pthread_mutex_lock(&cq->cq.mutex);
	cq->comp_delivered++;
	pthread_mutex_unlock(&cq->cq.mutex);
}

/* An event that went after all: not the app's to ack. */
static void uncount_delivered(struct ibvc_cq *cq)
{
	pthread_mutex_lock(&cq->cq.mutex);
	cq->comp_delivered--;
	pthread_cond_signal(&cq->cq.cond);
	pthread_mutex_unlock(&cq->cq.mutex);
}

/*
 * Under recv_lock: the pair's bytes, gone; whether there were any but
 * watch pokes (WATCH_BYTE).
 */
static bool drain_pokes(struct ibvc_comp_channel *ch)
{
	char drain[64];
	ssize_t n = -1, i;
	bool some = false;

	while (ch->poke[0] >= 0 &&
	       (n = recv(ch->poke[0], drain, sizeof(drain), MSG_DONTWAIT)) > 0)
		for (i = 0; i < n && !some; i++)
			some = drain[i] != WATCH_BYTE;
	if (n != 0)
		return some;
	/*
	 * Shut by a sender: the engine places and fires for us from now on
	 * (the writing end stays open for those who loaded it just now).
	 * What we fired already is still handed out.
	 */
	epoll_ctl(ch->channel.fd, EPOLL_CTL_DEL, ch->poke[0], NULL);
	close(ch->poke[0]);
	ch->poke[0] = -1;
	__atomic_store_n(&ch->poke_dead, true, __ATOMIC_RELEASE);
	return some;
}

/*
 * Under recv_lock, an event taken: the bytes that came meanwhile go (the
 * channel is not readable for nothing), and one goes back for another
 * thread asleep on the channel if another event waits.
 */
static void settle(struct ibvc_comp_channel *ch)
{
	enum ibvc_event_pass pass;
	struct ibvc_cq *cq;

	if (!has_pokes(ch))
		return;
	drain_pokes(ch);
	for (pass = IBVC_EVENTS_FIRED; pass <= IBVC_EVENTS_OF_RECEIVES; pass++)
		for (cq = ch->cqs; cq; cq = cq->next_on_channel)
			if (ibvc_direct_take_event(cq, pass, false)) {
				ibvc_poke(ibvc_channel_poke_fd(&ch->channel));
				return;
			}
}

/*
 * Under recv_lock: the first CQ of the channel with an event of the
 * library's, after its looks (the passes' order: FIRED, then SENDS,
 * then RECEIVES); `senders`: only CQs that complete SENDs on rings.
 */
static struct ibvc_cq *first_event(struct ibvc_comp_channel *ch, bool senders)
{
	enum ibvc_event_pass pass;
	struct ibvc_cq *cq;

	for (pass = IBVC_EVENTS_FIRED; pass <= IBVC_EVENTS_OF_RECEIVES; pass++)
		for (cq = ch->cqs; cq; cq = cq->next_on_channel)
			if ((!senders || ibvc_direct_has_senders(cq)) &&
			    ibvc_direct_take_event(cq, pass, false))
				return cq;
	return NULL;
}

static bool frame_waiting(const struct ibvc_comp_channel *ch)
{
	struct pollfd pfd = { .fd = ch->sock, .events = POLLIN };

	return poll(&pfd, 1, 0) > 0;
}

/*
 * Under recv_lock, an event for `cq` that only receives: it may be the
 * answer to a SEND of ours whose completion came while we looked, and
 * on a NIC the SEND's ACK comes before any answer (perftest's -e counts
 * on it: one channel for both CQs, one poll of the CQ an event names).
 * So a sender's event the library has now goes first; NULL: a frame of
 * the daemon's waits, which may be that one.
 */
static struct ibvc_cq *senders_first(struct ibvc_comp_channel *ch,
				     struct ibvc_cq *cq)
{
	struct ibvc_cq *sender;

	if (ibvc_direct_has_senders(cq))
		return cq;
	sender = first_event(ch, true);
	if (sender)
		return sender;
	return frame_waiting(ch) ? NULL : cq;
}

/*
 * The bytes of the wake-up pair only say "look": drain them, then look
 * at every CQ of the channel (the library's events, and what the rings
 * of armed ones hold).  A byte that comes after the drain wakes us
 * again.  *poked: whether there were bytes but watch pokes.  NULL with
 * *frame: read the daemon's frame first (senders_first).
 */
static struct ibvc_cq *take_library_event(struct ibvc_comp_channel *ch,
					  bool *poked, bool *frame)
{
	struct ibvc_cq *got;

	*frame = false;
	if (!has_pokes(ch))
		return NULL;
	*poked = drain_pokes(ch);
	got = first_event(ch, false);
	if (!got)
		return NULL;
	got = senders_first(ch, got);
	if (!got) {
		*frame = true;
		return NULL;
	}
	ibvc_direct_take_event(got, IBVC_EVENTS_FIRED, true);
	count_delivered(got);
	settle(ch);
	return got;
}

static bool on_channel(const struct ibvc_comp_channel *ch,
		       const struct ibvc_cq *cq)
{
	const struct ibvc_cq *c;

	for (c = ch->cqs; c && c != cq; c = c->next_on_channel)
		;
	return c != NULL;
}

/*
 * Under recv_lock, the daemon's event for cq: one of a sender the library
 * has goes first (senders_first), and cq's waits as one of the library's.
 * Not for a CQ being destroyed (off the channel already): only the event
 * handed out keeps it alive, so it is kept before it is uncounted.
 */
static struct ibvc_cq *frame_after_senders(struct ibvc_comp_channel *ch,
					   struct ibvc_cq *cq)
{
	struct ibvc_cq *sender;

	if (!has_pokes(ch) || ibvc_direct_has_senders(cq) ||
	    !on_channel(ch, cq))
		return cq;
	sender = first_event(ch, true);
	if (!sender)
		return cq;
	ibvc_direct_take_event(sender, IBVC_EVENTS_FIRED, true);
	count_delivered(sender);
	ibvc_direct_keep_event(cq);
	uncount_delivered(cq);
	return sender;
}

static bool cq_idle(struct ibvc_cq *cq)
{
	bool idle;

	ibvc_cq_lock(cq);
	idle = ibvc_cq_idle(cq);
	ibvc_cq_unlock(cq);
	return idle;
}

/* Is cq the only CQ of its channel? */
static bool alone_on_channel(struct ibvc_comp_channel *ch, struct ibvc_cq *cq)
{
	bool alone;

	pthread_mutex_lock(&ch->recv_lock);
	alone = ch->cqs == cq && !cq->next_on_channel;
	pthread_mutex_unlock(&ch->recv_lock);
	return alone;
}

/*
 * An event whose completion the app's poll took already: it came after
 * the app armed and before it polled.  A NIC sends those too, and apps
 * that sleep on one channel for several CQs count on them (perftest's
 * -e re-arms the CQ an event names and polls another one), as do apps
 * that poll() a non-blocking fd and then read the event it promised.
 * But apps that block on a channel with one CQ read an event as "a poll
 * finds something" (ibv_rc_pingpong -e -t fails otherwise), and with the
 * engine running beside the app the window is wider than on a NIC.  For
 * those only, such an event goes if a fresher one comes, and the arm it
 * used comes back, so the next completion fires as the app expects
 * (drop_stale); what came before the re-arm is there for the second look,
 * which then keeps it.  Not looked at: a single-threaded CQ (its one
 * thread is the app's promise, and the app's to wake), and one whose
 * batch this thread is in (it holds it).
 */
static bool event_stale(struct ibvc_comp_channel *ch, struct ibvc_cq *cq)
{
	uint32_t flags;
	int fl;

	if (cq->single_threaded || !alone_on_channel(ch, cq) ||
	    __atomic_load_n(&cq->batch_thread, __ATOMIC_RELAXED) ==
	    (uintptr_t)pthread_self() || !cq_idle(cq))
		return false;
	/* last: a system call, for the rare event that may be stale */
	fl = fcntl(ch->channel.fd, F_GETFL);
	if (fl >= 0 && (fl & O_NONBLOCK))
		return false;
	flags = ibvd_read_once(&cq->ring.client->arm_flags);
	ibvc_req_notify_cq_op(&cq->cq, !(flags & IBVD_ARM_NEXT));
	return cq_idle(cq);
}

/*
 * How long a blocking ibv_get_cq_event that dropped a stale event waits
 * for another before it hands that one out after all, in ms: an app that
 * poll()ed the fd before calling (direct-stream's sleepers do) must not
 * sleep in here for a completion that may never come.
 */
#define STALE_WAIT_MS	100

/*
 * A stale event on a blocking channel: drop it (true) if the channel has
 * another within STALE_WAIT_MS, else hand it out (false).
 */
static bool drop_stale(struct ibvc_comp_channel *ch)
{
	struct pollfd pfd = { .fd = ch->channel.fd, .events = POLLIN };

	return poll(&pfd, 1, STALE_WAIT_MS) > 0;
}

/*
 * A poke says "look", and the look may find that the app's own poll of
 * the CQ took what it was for: the channel was readable, and there is
 * no event.  An app that poll()s the fd and then calls a blocking
 * ibv_get_cq_event counts on one, as the kernel's channel promises; if
 * none comes within STALE_WAIT_MS, it gets one for an armed CQ of the
 * channel, without a completion, as it would for a stale event
 * (event_stale).  Only at entry: a thread that slept in here was woken
 * by us, not by its own poll.
 */
static struct ibvc_cq *unseen_poke_event(struct ibvc_comp_channel *ch)
{
	struct ibvc_cq *cq;

	pthread_mutex_lock(&ch->recv_lock);
	for (cq = ch->cqs; cq; cq = cq->next_on_channel)
		if (ibvc_direct_fire_armed(cq))
			break;
	if (cq)
		count_delivered(cq);
	pthread_mutex_unlock(&ch->recv_lock);
	return cq;
}

/*
 * Under recv_lock: take cq's owed mark.  A look without the CQ lock
 * first (a resize's old header stays mapped in the arena), then under
 * it, which holds off a resize moving the mark to the new header.  Only
 * if the lock is free: a thread in a poll batch of cq holds it and may
 * want recv_lock; the channel's sleepers look again in FALLBACK_MS.
 */
static bool owed_taken(struct ibvc_comp_channel *ch, struct ibvc_cq *cq)
{
	bool owed;

	if (!__atomic_load_n(&cq->ring.client->owed, __ATOMIC_RELAXED))
		return false;
	if (ibvc_cq_batch_held(cq) || pthread_mutex_trylock(&cq->lock)) {
		__atomic_store_n(&ch->rescan, true, __ATOMIC_RELEASE);
		return false;
	}
	owed = __atomic_load_n(&cq->ring.client->owed, __ATOMIC_RELAXED) &&
	       __atomic_exchange_n(&cq->ring.client->owed, 0, __ATOMIC_ACQ_REL);
	pthread_mutex_unlock(&cq->lock);
	return owed;
}

/*
 * An event the daemon owes a CQ of the channel (ring.h): its frame did
 * not fit.  Taken before the frames, whose being unread keeps the fd
 * readable until then; NULL if none is owed.
 */
static struct ibvc_cq *take_owed_event(struct ibvc_comp_channel *ch)
{
	struct ibvc_cq *cq;

	pthread_mutex_lock(&ch->recv_lock);
	for (cq = ch->cqs; cq; cq = cq->next_on_channel)
		if (owed_taken(ch, cq))
			break;
	if (cq) {
		count_delivered(cq);
		/* a poke may have woken us for it: not readable for nothing */
		settle(ch);
	}
	pthread_mutex_unlock(&ch->recv_lock);
	return cq;
}

static int get_cq_event(struct ibvc_comp_channel *ch, struct ibvc_cq **ret_cq,
			int cancel_state)
{
	struct ibvc_context *ictx = to_ibvc_context(ch->channel.context);
	bool entry = true, poked = false, frame;
	uint64_t deadline = 0;
	uint32_t handle;
	int ret;

	for (;;) {
		*ret_cq = take_owed_event(ch);
		if (*ret_cq)
			return 0;
		ret = recv_comp_event(ch, &handle);
		if (ret == 1) {
			*ret_cq = claim_event(ictx, handle);
			if (!*ret_cq)
				continue;
			pthread_mutex_lock(&ch->recv_lock);
			*ret_cq = frame_after_senders(ch, *ret_cq);
			settle(ch);
			pthread_mutex_unlock(&ch->recv_lock);
			if (event_stale(ch, *ret_cq) && drop_stale(ch)) {
				uncount_delivered(*ret_cq);
				continue;
			}
			return 0;
		}
		if (ret == 0)
			continue;
		if (ret < 0 && ret != -EAGAIN)
			return ret;
		pthread_mutex_lock(&ch->recv_lock);
		*ret_cq = take_library_event(ch, &poked, &frame);
		pthread_mutex_unlock(&ch->recv_lock);
		if (frame)
			continue;
		if (*ret_cq && (!event_stale(ch, *ret_cq) || !drop_stale(ch)))
			return 0;
		if (*ret_cq) {
			uncount_delivered(*ret_cq);
			continue;
		}
		if (entry && poked)
			deadline = ibvd_mono_ns() + STALE_WAIT_MS * 1000000ull;
		entry = false;
		ret = wait_channel(ch, deadline, cancel_state);
		if (ret == -ETIMEDOUT) {
			deadline = 0;
			*ret_cq = unseen_poke_event(ch);
			if (*ret_cq)
				return 0;
			continue;
		}
		if (ret < 0)
			return ret;	/* EINTR, or EAGAIN when non-blocking */
	}
}

/*
 * The context for a wait on ch, held until ibvc_context_leave; NULL once
 * it was closed (the channel is the app's still, its context is not).
 */
static struct ibvc_context *enter_context(struct ibvc_comp_channel *ch)
{
	struct ibvc_context *ictx = NULL;

	pthread_mutex_lock(&ch->recv_lock);
	if (!ch->orphaned && !ch->closing) {
		ictx = to_ibvc_context(ch->channel.context);
		if (ibvc_context_enter(ictx))
			__atomic_add_fetch(&ch->users, 1, __ATOMIC_RELAXED);
		else
			ictx = NULL;
	}
	pthread_mutex_unlock(&ch->recv_lock);
	return ictx;
}

static void leave_context(struct ibvc_comp_channel *ch,
			  struct ibvc_context *ictx)
{
	/* Release: done with the channel before its destroy sees 0. */
	__atomic_sub_fetch(&ch->users, 1, __ATOMIC_RELEASE);
	ibvc_context_leave(ictx);
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
		     void **cq_context)
{
	struct ibvc_comp_channel *ch;
	struct ibvc_context *ictx;
	struct ibvc_cq *icq = NULL;
	int ret, cancel_state;

	if (!channel || !cq || !cq_context)
		return ibvc_minus_one_ret(-EINVAL);
	ch = to_ibvc_channel(channel);
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
	/* NULL: closed, its context gone; or a forked child's copy */
	ictx = enter_context(ch);
	if (ictx && !ibvc_forked(ictx)) {
		ret = get_cq_event(ch, &icq, cancel_state);
		leave_context(ch, ictx);
	} else {
		if (ictx)
			leave_context(ch, ictx);
		ret = -EIO;
	}
	pthread_setcancelstate(cancel_state, NULL);
	if (ret < 0)
		return ibvc_minus_one_ret(ret);
	*cq = &icq->cq;
	*cq_context = icq->cq.cq_context;
	return 0;
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	if (!cq || !nevents)
		return;
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}
