/*
 * Completion queues.  The daemon carves the CQ ring (ring.h) from the
 * context's ring arena, which we map with only its client half writable:
 * the engine header and the CQEs are the engine's, and polling them needs
 * no system call (poll.c).
 */
#include "config.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "ibverbsd.pb-c.h"
#include "ibvd_verbs.h"

/* The reply's geometry and place become the CQ's ring (under cq->lock). */
static int take_cq_reply(struct ibvc_cq *cq, const Ibvd__CreateCqReply *reply)
{
	struct ibvc_context *ictx = to_ibvc_context(cq->cq.context);
	struct ibvc_cq_ring ring;
	uint32_t n = reply->nslots;
	int ret;

	if (reply->cqe > INT_MAX || reply->cqe > n || !n || (n & (n - 1)) ||
	    n > IBVD_CQ_MAX_SLOTS)
		return -EPROTO;
	ret = ibvc_cq_ring_setup(&ring, ictx, reply->ring, n);
	if (ret < 0)
		return ret;
	cq->ring = ring;
	cq->cq.cqe = (int)reply->cqe;
	return 0;
}

static int create_on_daemon(struct ibvc_cq *cq, int cqe, int comp_vector)
{
	Ibvd__CreateCq req = IBVD__CREATE_CQ__INIT;
	Ibvd__CreateCqReply *reply = NULL;
	struct ibv_context *ctx = cq->cq.context;
	int ret;

	req.cqe = (uint32_t)cqe;
	req.channel = cq->cq.channel ? to_ibvc_channel(cq->cq.channel)->handle : 0;
	req.comp_vector = (uint32_t)comp_vector;
	ret = ibvd_conn_call(ibvc_conn_of(ctx), IBVD_MSG_CREATE_CQ, &req.base,
			     &ibvd__create_cq_reply__descriptor,
			     (ProtobufCMessage **)&reply, NULL, NULL);
	if (ret < 0)
		return ret;
	cq->cq.handle = reply->handle;
	ret = take_cq_reply(cq, reply);
	if (ret < 0)
		ibvc_destroy_handle(ctx, IBVD_MSG_DESTROY_CQ, reply->handle);
	ibvd__create_cq_reply__free_unpacked(reply, NULL);
	return ret;
}

static struct ibvc_cq *cq_new(struct ibv_context *ctx, void *cq_context,
			      struct ibv_comp_channel *channel)
{
	struct ibvc_cq *cq = calloc(1, sizeof(*cq));

	if (!cq)
		return NULL;
	cq->cq.context = ctx;
	cq->cq.channel = channel;
	cq->cq.cq_context = cq_context;
	pthread_mutex_init(&cq->cq.mutex, NULL);
	pthread_cond_init(&cq->cq.cond, NULL);
	pthread_mutex_init(&cq->lock, NULL);
	return cq;
}

static void cq_free(struct ibvc_cq *cq)
{
	ibvc_direct_cq_fini(cq);
	pthread_mutex_destroy(&cq->lock);
	pthread_cond_destroy(&cq->cq.cond);
	pthread_mutex_destroy(&cq->cq.mutex);
	free(cq);
}

static void channel_ref(struct ibv_comp_channel *channel, struct ibvc_cq *cq,
			int delta)
{
	if (!channel)
		return;
	pthread_mutex_lock(&channel->context->mutex);
	channel->refcnt += delta;
	pthread_mutex_unlock(&channel->context->mutex);
	if (delta > 0)
		ibvc_channel_link(channel, cq, true);
}

/* Shared by ibv_create_cq and ibv_create_cq_ex (cq_ex.c). */
int ibvc_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
		   struct ibv_comp_channel *channel, int comp_vector,
		   struct ibvc_cq **ret_cq)
{
	struct ibvc_cq *cq;
	int ret;

	if (cqe < 1 || comp_vector < 0 || comp_vector >= ctx->num_comp_vectors)
		return -EINVAL;
	if (channel && channel->context != ctx)
		return -EINVAL;
	cq = cq_new(ctx, cq_context, channel);
	if (!cq)
		return -ENOMEM;
	ret = create_on_daemon(cq, cqe, comp_vector);
	if (ret < 0)
		goto fail;
	/*
	 * Polled to its start, as a NIC's CQ is at consumer index 0: a first
	 * arm fires at once for completions already in it (ibvc_cq_missed),
	 * as an arm after an empty poll does.
	 */
	ibvc_cq_look(cq);
	ibvc_cq_polled(cq, true);
	ret = ibvc_obj_add(to_ibvc_context(ctx), cq->cq.handle, IBVC_OBJ_CQ, cq);
	if (ret < 0) {
		ibvc_destroy_handle(ctx, IBVD_MSG_DESTROY_CQ, cq->cq.handle);
		goto fail;
	}
	channel_ref(channel, cq, 1);
	*ret_cq = cq;
	return 0;
fail:
	cq_free(cq);
	return ret;
}

int ibvc_cq_adopt(struct ibv_context *ctx, void *cq_context,
		  struct ibv_comp_channel *channel,
		  const Ibvd__CreateCqReply *reply, struct ibvc_cq **ret_cq)
{
	struct ibvc_cq *cq;
	int ret;

	cq = cq_new(ctx, cq_context, channel);
	if (!cq)
		return -ENOMEM;
	cq->cq.handle = reply->handle;
	ret = take_cq_reply(cq, reply);
	if (ret == 0)
		ret = ibvc_obj_add(to_ibvc_context(ctx), cq->cq.handle,
				   IBVC_OBJ_CQ, cq);
	if (ret < 0) {
		cq_free(cq);
		return ret;
	}
	channel_ref(channel, cq, 1);
	*ret_cq = cq;
	return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
			     struct ibv_comp_channel *channel, int comp_vector)
{
	struct ibvc_cq *cq;
	int ret;

	if (!ctx)
		return ibvc_null_ret(-EINVAL);
	ret = ibvc_create_cq(ctx, cqe, cq_context, channel, comp_vector, &cq);
	return ret < 0 ? ibvc_null_ret(ret) : &cq->cq;
}

/*
 * The daemon answers RESIZE_CQ with a new ring holding the CQEs we had not
 * polled yet, and its client page says where our head is now.  Holding the
 * CQ lock through the call keeps pollers off both rings meanwhile.
 */
static int resize_cq(struct ibvc_cq *cq, int cqe)
{
	Ibvd__ResizeCq req = IBVD__RESIZE_CQ__INIT;
	Ibvd__CreateCqReply *reply = NULL;
	int ret;

	if (cqe < 1)
		return -EINVAL;
	req.handle = cq->cq.handle;
	req.cqe = (uint32_t)cqe;
	pthread_mutex_lock(&cq->lock);
	ret = ibvd_conn_call(ibvc_conn_of(cq->cq.context), IBVD_MSG_RESIZE_CQ,
			     &req.base, &ibvd__create_cq_reply__descriptor,
			     (ProtobufCMessage **)&reply, NULL, NULL);
	if (ret == 0) {
		ret = take_cq_reply(cq, reply);
		ibvd__create_cq_reply__free_unpacked(reply, NULL);
	}
	pthread_mutex_unlock(&cq->lock);
	return ret;
}

int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	if (!cq)
		return EINVAL;
	return ibvc_errno_ret(resize_cq(to_ibvc_cq(cq), cqe));
}

/*
 * DESTROY_CQ failed (a QP still uses cq): back on its channel, whose
 * sleepers look again.  An event owed to cq meanwhile (ring.h) may have
 * had its look-again frame read while cq was off, by a thread that then
 * slept: the poke wakes it, and a channel without a wake-up pair gets
 * one for that, since nothing else would.
 */
static void relink_after_failed_destroy(struct ibv_comp_channel *channel,
					struct ibvc_cq *cq)
{
	ibvc_channel_link(channel, cq, true);
	if (__atomic_load_n(&cq->ring.client->owed, __ATOMIC_ACQUIRE))
		ibvc_channel_poke_fetch(channel);
	ibvc_poke(ibvc_channel_poke_fd(channel));
}

int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct ibvc_cq *cq;
	int ret;

	if (!ibcq)
		return EINVAL;
	if (ibvc_forked(to_ibvc_context(ibcq->context)))
		return ibvc_errno_ret(-EIO);
	cq = to_ibvc_cq(ibcq);
	/*
	 * Off its channel first: once the daemon frees its ring, the
	 * header's block may be another CQ's, whose owed event (ring.h)
	 * the channel's look at this one would take.
	 */
	if (ibcq->channel)
		ibvc_channel_link(ibcq->channel, cq, false);
	ret = ibvc_destroy_handle(ibcq->context, IBVD_MSG_DESTROY_CQ,
				  ibcq->handle);
	if (ret < 0) {
		if (ibcq->channel)
			relink_after_failed_destroy(ibcq->channel, cq);
		return ibvc_errno_ret(ret);
	}
	/* No event can name it from now on; wait for those handed out. */
	ibvc_obj_remove(to_ibvc_context(ibcq->context), ibcq->handle);
	ibvc_wait_acked(&ibcq->mutex, &ibcq->cond,
			&ibcq->comp_events_completed, &cq->comp_delivered);
	ibvc_wait_acked(&ibcq->mutex, &ibcq->cond,
			&ibcq->async_events_completed, &cq->async_delivered);
	channel_ref(ibcq->channel, cq, -1);
	if (cq->parent_domain)
		ibvc_pd_release(cq->parent_domain);
	cq_free(cq);
	return 0;
}
