/*
 * Completion channels.  A channel is the client end of a SOCK_SEQPACKET
 * pair whose other end the daemon keeps; the engine sends one CompEvent
 * frame per notification of an armed CQ.  channel->fd is that socket, so
 * apps can poll() it and make it non-blocking like a kernel channel.
 */
#include "config.h"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/socket.h>

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
	ch->channel.fd = fd;
	return 0;
}

static void channel_free(struct ibvc_comp_channel *ch)
{
	pthread_mutex_destroy(&ch->recv_lock);
	free(ch->buf);
	free(ch);
}

static int create_channel(struct ibv_context *ctx,
			  struct ibvc_comp_channel **ret_ch)
{
	struct ibvc_comp_channel *ch;
	int ret;

	ch = calloc(1, sizeof(*ch));
	if (!ch)
		return -ENOMEM;
	pthread_mutex_init(&ch->recv_lock, NULL);
	ch->channel.context = ctx;
	ch->channel.fd = -1;
	ret = create_on_daemon(ctx, ch);
	if (ret < 0)
		goto fail;
	*ret_ch = ch;
	return 0;
fail:
	channel_free(ch);
	return ret;
}

int ibvc_channel_adopt(struct ibv_context *ctx, uint32_t handle, int fd,
		       struct ibvc_comp_channel **ret_ch)
{
	struct ibvc_comp_channel *ch;

	ch = calloc(1, sizeof(*ch));
	if (!ch)
		return -ENOMEM;
	pthread_mutex_init(&ch->recv_lock, NULL);
	ch->channel.context = ctx;
	ch->channel.fd = fd;
	ch->handle = handle;
	*ret_ch = ch;
	return 0;
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
	if (channel_in_use(channel))
		return EBUSY;
	ch = to_ibvc_channel(channel);
	ret = ibvc_destroy_handle(channel->context,
				  IBVD_MSG_DESTROY_COMP_CHANNEL, ch->handle);
	if (ret < 0)
		return ibvc_errno_ret(ret);
	close(channel->fd);
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
	ret = ibvd_frame_recv(ch->channel.fd, ch->buf, IBVD_FRAME_MAX, &frame,
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

static int get_cq_event(struct ibvc_comp_channel *ch, struct ibvc_cq **ret_cq)
{
	struct ibvc_context *ictx = to_ibvc_context(ch->channel.context);
	uint32_t handle;
	int ret;

	for (;;) {
		ret = ibvd_wait_readable(ch->channel.fd);
		if (ret < 0)
			return ret;	/* EINTR, or EAGAIN when non-blocking */
		ret = recv_comp_event(ch, &handle);
		if (ret == 0 || ret == -EAGAIN)
			continue;
		if (ret < 0)
			return ret;
		*ret_cq = claim_event(ictx, handle);
		if (*ret_cq)
			return 0;
	}
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
		     void **cq_context)
{
	struct ibvc_cq *icq = NULL;
	int ret;

	if (!channel || !cq || !cq_context)
		return ibvc_minus_one_ret(-EINVAL);
	ret = get_cq_event(to_ibvc_channel(channel), &icq);
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
