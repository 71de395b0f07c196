/*
 * The direct transport's rings, mapped and let go of (direct_internal.h
 * has the design): a QP maps the rings the daemon made for its pair when
 * it next posts or polls, a UD QP asks for a pair with the QP it sends
 * to, and the rings go when the QP is reset or destroyed, or, on UD,
 * once the peer left and every send on them is completed.  Mapping and
 * unmapping take the QP's direct_lock, then its queue locks and both CQ
 * locks, so nobody sees rings half there.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "barrier.h"
#include "direct_internal.h"
#include "transit.h"

void ibvc_direct_qp_init(struct ibvc_qp *qp)
{
	pthread_mutex_init(&qp->direct_lock, NULL);
}

/*
 * Every lock a poster or poller of qp may hold, in one order: the CQ
 * locks by address (one CQ may be both), then the queue locks.  A poll
 * batch holds its CQ's lock while the application posts (taking a queue
 * lock) from inside it, so the CQs must come first here too.
 */
static void lock_all(struct ibvc_qp *qp)
{
	struct ibvc_cq *a = to_ibvc_cq(qp->qp.send_cq);
	struct ibvc_cq *b = to_ibvc_cq(qp->qp.recv_cq);

	if (a > b) {
		struct ibvc_cq *t = a;

		a = b;
		b = t;
	}
	ibvc_cq_lock(a);
	if (b != a)
		ibvc_cq_lock(b);
	pthread_mutex_lock(&qp->sq.lock);
	if (!qp->qp.srq)		/* an SRQ's posters touch no QP's state */
		pthread_mutex_lock(&qp->rq.lock);
}

static void unlock_all(struct ibvc_qp *qp)
{
	struct ibvc_cq *a = to_ibvc_cq(qp->qp.send_cq);
	struct ibvc_cq *b = to_ibvc_cq(qp->qp.recv_cq);

	if (!qp->qp.srq)
		pthread_mutex_unlock(&qp->rq.lock);
	pthread_mutex_unlock(&qp->sq.lock);
	if (b != a)
		ibvc_cq_unlock(b);
	ibvc_cq_unlock(a);
}

static void unlink_qp(struct ibvc_qp **head, struct ibvc_qp *qp, bool sender)
{
	struct ibvc_qp **p;

	for (p = head; *p; p = sender ? &(*p)->next_sender : &(*p)->next_receiver)
		if (*p == qp) {
			*p = sender ? qp->next_sender : qp->next_receiver;
			return;
		}
}

static int fifo_init(struct ibvc_cq *cq)
{
	uint32_t cap = ibvd_roundup_pow2((uint32_t)cq->cq.cqe + 1);

	if (cq->direct.fifo)
		return 0;
	cq->direct.fifo = calloc(cap, sizeof(*cq->direct.fifo));
	if (!cq->direct.fifo)
		return -ENOMEM;
	cq->direct.cap = cap;
	cq->direct.head = cq->direct.tail = 0;
	return 0;
}

/* Under lock_all: qp's rings are d from now on. */
static int install(struct ibvc_qp *qp, struct ibvc_direct *d)
{
	struct ibvc_cq *scq = to_ibvc_cq(qp->qp.send_cq);
	struct ibvc_cq *rcq = to_ibvc_cq(qp->qp.recv_cq);

	if (fifo_init(scq) < 0 || fifo_init(rcq) < 0)
		return -ENOMEM;
	__atomic_store_n(&qp->direct, d, __ATOMIC_RELEASE);
	__atomic_store_n(&qp->direct_gen, d->gen, __ATOMIC_RELAXED);
	qp->next_sender = scq->direct.senders;
	scq->direct.senders = qp;
	qp->next_receiver = rcq->direct.receivers;
	rcq->direct.receivers = qp;
	/* armed before we knew of the rings: the sender must know it */
	if (cq_armed(rcq))
		ibvc_direct_rx_armed(qp, d, true,
				     ibvd_read_once(&rcq->ring.client->arm_flags));
	return 0;
}

static void direct_free(struct ibvc_direct *d)
{
	ibvc_poke_release(d->peer_poke);
	ibvc_poke_release(d->peer_send_poke);
	pthread_mutex_destroy(&d->wake_lock);
	ibvc_grants_free(d->grants);
	ibvc_unmap(&d->map);
	free(d->sends);
	free(d);
}

static int map_rings(struct ibvc_qp *qp, const Ibvd__QpDirectReply *r, int fd,
		     struct ibvc_direct **ret)
{
	size_t bytes = (size_t)ibvd_transit_pair_bytes(r->ncells);
	struct ibvc_direct *d = calloc(1, sizeof(*d));
	size_t i;
	int err;

	if (!d)
		return -ENOMEM;
	d->peer_poke = d->peer_send_poke = -1;
	pthread_mutex_init(&d->wake_lock, NULL);
	/*
	 * SENDs in flight, which hold ring room but not SQ room: the SQ's
	 * depth, at least 256 (small messages outrun the receiver), at most
	 * a ring's cells (one each at least).
	 */
	d->sends_cap = ibvd_roundup_pow2(qp->sq.limit > 256 ? qp->sq.limit : 256);
	if (d->sends_cap > r->ncells)
		d->sends_cap = r->ncells;
	d->sends = calloc(d->sends_cap, sizeof(*d->sends));
	err = d->sends ? ibvc_map_fd(fd, bytes, &d->map) : -ENOMEM;
	if (err == 0)
		err = ibvc_map_writable(&d->map, fd, 0, bytes);
	if (err < 0) {
		direct_free(d);
		return err;
	}
	d->gen = r->gen;
	d->peer_qpn = r->peer_qpn;
	d->peer_slid = (uint16_t)r->peer_slid;
	d->peer_sl = (uint8_t)r->peer_sl;
	for (i = 0; i < r->n_peer_gids && i < DIRECT_PEER_GIDS; i++)
		if (r->peer_gids[i].len == sizeof(d->peer_gids[i]))
			memcpy(d->peer_gids[i], r->peer_gids[i].data,
			       sizeof(d->peer_gids[i]));
	d->side = r->side;
	ibvd_transit_pair(d->map.addr, r->ncells, r->side, &d->out, &d->in);
	d->out.copy_in = ibvc_copy;	/* from the app's memory (guard.c) */
	/* the daemon's word, not the ring's, which the peer can write */
	d->produced = r->start;
	d->published = r->start;
	d->own_produced = &qp->sq.client->direct_produced;
	/* a wake said to rings before these is no wake on these */
	ibvd_publish(&qp->sq.client->direct_sender_waits, 0);
	/* the count first: who sees the pairing's gen sees it */
	ibvd_write_once(d->own_produced, d->published);
	ibvd_publish(&qp->sq.client->direct_produced_gen, d->gen);
	*ret = d;
	return 0;
}

/* The wake-up pairs after the rings' fd, as `pokes` says (taken). */
static void take_pokes(struct ibvc_direct *d, uint32_t pokes, int *fds,
		       unsigned int nfds)
{
	unsigned int i = 1;

	if ((pokes & IBVD_DIRECT_POKE_RECV) && i < nfds) {
		d->peer_poke = ibvc_poke_hold(fds[i]);
		fds[i++] = -1;
	}
	if ((pokes & IBVD_DIRECT_POKE_SEND) && i < nfds) {
		d->peer_send_poke = ibvc_poke_hold(fds[i]);
		fds[i++] = -1;
	}
}

/* Ask the daemon for the rings of generation gen and map them. */
static int fetch(struct ibvc_qp *qp, uint32_t gen, struct ibvc_direct **ret)
{
	Ibvd__Handle req = IBVD__HANDLE__INIT;
	Ibvd__QpDirectReply *reply = NULL;
	int fds[3] = { -1, -1, -1 }, err;
	unsigned int nfds = 3;

	req.handle = qp->qp.handle;
	err = ibvd_conn_call(ibvc_conn_of(qp->qp.context), IBVD_MSG_QP_DIRECT,
			     &req.base, &ibvd__qp_direct_reply__descriptor,
			     (ProtobufCMessage **)&reply, fds, &nfds);
	if (err < 0)
		return err;
	if (nfds < 1 || reply->gen != gen || reply->side > 1 ||
	    !ibvd_transit_geometry_ok(reply->ncells))
		err = -EPROTO;
	else
		err = map_rings(qp, reply, fds[0], ret);
	if (err == 0)
		take_pokes(*ret, reply->pokes, fds, nfds);
	while (nfds)
		if (fds[--nfds] >= 0)
			close(fds[nfds]);
	ibvd__qp_direct_reply__free_unpacked(reply, NULL);
	return err;
}

static void detach_locked(struct ibvc_qp *qp)
{
	struct ibvc_direct *d = qp->direct;

	if (!d)
		return;
	lock_all(qp);
	unlink_qp(&to_ibvc_cq(qp->qp.send_cq)->direct.senders, qp, true);
	unlink_qp(&to_ibvc_cq(qp->qp.recv_cq)->direct.receivers, qp, false);
	__atomic_store_n(&qp->direct, NULL, __ATOMIC_RELEASE);
	__atomic_store_n(&qp->direct_gen, 0, __ATOMIC_RELAXED);
	/* no sleep on these rings is any on the next ones */
	ibvd_publish(&qp->sq.client->direct_sender_waits, 0);
	unlock_all(qp);
	direct_free(d);
}

void ibvc_direct_detach(struct ibvc_qp *qp)
{
	pthread_mutex_lock(&qp->direct_lock);
	qp->ud_asks = 0;
	qp->ud_asked_qpn = 0;
	detach_locked(qp);
	pthread_mutex_unlock(&qp->direct_lock);
}

/* Its own RQ, or a basic SRQ (transit.h, "SRQs"). */
static bool receives_ok(const struct ibvc_qp *qp)
{
	if (qp->qp.srq)
		return to_ibvc_srq(qp->qp.srq)->srq_type == IBV_SRQT_BASIC;
	return qp->rq.slots;
}

static bool may_be_direct(const struct ibvc_qp *qp)
{
	return (qp->qp.qp_type == IBV_QPT_RC || qp->qp.qp_type == IBV_QPT_UC ||
		qp->qp.qp_type == IBV_QPT_UD) &&
	       receives_ok(qp) && qp->sq.engine;
}

/* Peers of one UD QP it asks rings for, at most: then it stops asking. */
#define DIRECT_UD_ASKS	4u
/* Datagrams to it go to a multicast group, never one QP */
#define DIRECT_MCAST_QPN	0xFFFFFFu

/* Could datagrams through this AH take a pair's ring (ud_dest)? */
static bool ud_ah_ok(struct ibv_ah *ah)
{
	return to_ibvc_ah(ah)->av.dlid != 0;
}

void ibvc_direct_ud_ask(struct ibvc_qp *qp, const struct ibv_send_wr *wr)
{
	Ibvd__QpDirectUd req = IBVD__QP_DIRECT_UD__INIT;
	int err;

	if (qp->qp.qp_type != IBV_QPT_UD || !wr || !wr->wr.ud.ah ||
	    !ud_ah_ok(wr->wr.ud.ah) || direct_of(qp) ||
	    !may_be_direct(qp) || qp->ud_asks >= DIRECT_UD_ASKS ||
	    qp->ud_asked_qpn == wr->wr.ud.remote_qpn + 1 ||
	    (wr->wr.ud.remote_qpn & 0xFFFFFFu) == DIRECT_MCAST_QPN ||
	    !ibvc_sq_state_ok(qp))
		return;
	req.handle = qp->qp.handle;
	req.remote_qpn = wr->wr.ud.remote_qpn;
	/* refused (not local, not free to pair): the engine's way, as before */
	err = ibvd_conn_call(ibvc_conn_of(qp->qp.context), IBVD_MSG_QP_DIRECT_UD,
			     &req.base, NULL, NULL, NULL, NULL);
	if (err == 0) {
		qp->ud_asks = 0;	/* a new budget once this pair is gone */
		return;
	}
	qp->ud_asks++;
	/* paired, perhaps with a peer that just left: ask it again later */
	if (err != -EBUSY)
		qp->ud_asked_qpn = wr->wr.ud.remote_qpn + 1;
}

/*
 * Under direct_lock: a UD pair whose peer left (ibvd_direct_leave set
 * direct_gen back to 0) is let go of once every send put on it is
 * completed here, so the QP may pair again.  Meanwhile its datagrams go
 * through the engine, which takes what the ring still holds; what the
 * peer had left for us in the other ring is lost, as datagrams are.
 */
static void ud_let_go(struct ibvc_qp *qp)
{
	Ibvd__Handle req = IBVD__HANDLE__INIT;
	struct ibvc_direct *d = qp->direct;
	bool done;
	int err;

	/* direct_send_ok went 0 first: no poster adds a send after this */
	if (!d || ibvd_observe(&qp->sq.engine->direct_gen) ||
	    ibvd_observe(&d->sends_head) != ibvd_read_once(&d->sends_tail))
		return;
	lock_all(qp);
	done = d->sends_head == d->sends_tail;
	unlock_all(qp);
	if (!done)
		return;
	req.handle = qp->qp.handle;
	err = ibvd_conn_call(ibvc_conn_of(qp->qp.context),
			     IBVD_MSG_QP_DIRECT_LEAVE, &req.base, NULL, NULL,
			     NULL, NULL);
	/* ENOENT: the daemon let go already (a reset raced with us) */
	if (err < 0 && err != -ENOENT)
		return;
	detach_locked(qp);
	pthread_mutex_lock(&qp->sq.lock);
	qp->ud_asks = 0;
	qp->ud_asked_qpn = 0;
	pthread_mutex_unlock(&qp->sq.lock);
}

/*
 * Is this thread inside an ibv_start_poll batch of one of qp's CQs?  It
 * holds that CQ's lock, which mapping or letting go of rings takes: an
 * app may post from inside a batch (ibv_rc_pingpong -t does), so that
 * waits for the batch's end (ibvc_direct_batch_ended), and the QP keeps
 * its old path till then.
 */
static bool in_own_batch(struct ibvc_qp *qp)
{
	struct ibvc_cq *cqs[2] = { to_ibvc_cq(qp->qp.send_cq),
				   to_ibvc_cq(qp->qp.recv_cq) };
	uintptr_t self = (uintptr_t)pthread_self();
	unsigned int i;

	for (i = 0; i < 2; i++)
		if (__atomic_load_n(&cqs[i]->batch_thread, __ATOMIC_RELAXED) ==
		    self) {
			__atomic_store_n(&cqs[i]->direct.refresh_owed, true,
					 __ATOMIC_RELAXED);
			return true;
		}
	return false;
}

void ibvc_direct_refresh(struct ibvc_qp *qp)
{
	struct ibvc_direct *d = NULL, *cur;
	uint32_t gen;

	if (!may_be_direct(qp))
		return;
	gen = ibvd_observe(&qp->sq.engine->direct_gen);
	cur = direct_of(qp);
	if (!gen && cur && qp->qp.qp_type == IBV_QPT_UD) {
		if (in_own_batch(qp))
			return;
		pthread_mutex_lock(&qp->direct_lock);
		ud_let_go(qp);
		pthread_mutex_unlock(&qp->direct_lock);
		return;
	}
	/*
	 * Not cur->gen: a UD let-go on another thread may free cur under us
	 * (it holds direct_lock, we do not yet).
	 */
	if (!gen || __atomic_load_n(&qp->direct_gen, __ATOMIC_RELAXED) == gen ||
	    in_own_batch(qp))
		return;
	pthread_mutex_lock(&qp->direct_lock);
	if (qp->direct && qp->direct->gen == gen)
		goto out;
	detach_locked(qp);
	/* A failure leaves the QP on the engine's path: slower, not wrong. */
	if (fetch(qp, gen, &d) < 0)
		goto out;
	if (qp->qp.recv_cq->channel)
		ibvc_channel_poke_fetch(qp->qp.recv_cq->channel);
	if (qp->qp.send_cq->channel)
		ibvc_channel_poke_fetch(qp->qp.send_cq->channel);
	lock_all(qp);
	if (install(qp, d) < 0) {
		unlock_all(qp);
		direct_free(d);
		goto out;
	}
	unlock_all(qp);
	/* Release: we are on the CQs' lists; the sender may use the ring. */
	ibvd_publish(&d->in.ctl->rx_ready, 1);
out:
	pthread_mutex_unlock(&qp->direct_lock);
}

/* Under the context's object lock: refresh the QPs that use cq. */
static void refresh_qps_of(struct ibvc_context *ictx, struct ibvc_cq *cq,
			   bool senders_too)
{
	uint32_t i;

	for (i = 0; i < ictx->nobjs; i++) {
		struct ibvc_qp *qp = ictx->objs[i].obj;

		if (ictx->objs[i].kind == IBVC_OBJ_QP &&
		    ictx->objs[i].handle && (qp->qp.recv_cq == &cq->cq ||
		    (senders_too && qp->qp.send_cq == &cq->cq)))
			ibvc_direct_refresh(qp);
	}
}

/*
 * A library that only polls (udaddy's receiver posts every receive
 * before its peer sends; an rdma_cm server's QP reaches RTS in the
 * daemon) would otherwise meet its rings only at a post.  Walked under
 * the context's object lock, which a destroy takes before it frees the
 * QP; a QP the daemon destroyed just now gets an error from QP_DIRECT or
 * QP_DIRECT_LEAVE and stays on the engine's path.
 */
void ibvc_direct_cq_moved(struct ibvc_cq *cq)
{
	struct ibvc_context *ictx = to_ibvc_context(cq->cq.context);

	pthread_mutex_lock(&ictx->obj_lock);
	/* First: a move after this load gets a walk of its own. */
	__atomic_store_n(&cq->direct.moves_seen,
			 ibvd_observe(&cq->ring.engine->direct_moves),
			 __ATOMIC_RELAXED);
	refresh_qps_of(ictx, cq, false);
	pthread_mutex_unlock(&ictx->obj_lock);
}

void ibvc_direct_batch_ended(struct ibvc_cq *cq)
{
	struct ibvc_context *ictx = to_ibvc_context(cq->cq.context);

	/* a load first: every end_poll comes here */
	if (!__atomic_load_n(&cq->direct.refresh_owed, __ATOMIC_RELAXED) ||
	    !__atomic_exchange_n(&cq->direct.refresh_owed, false,
				 __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&ictx->obj_lock);
	refresh_qps_of(ictx, cq, true);
	pthread_mutex_unlock(&ictx->obj_lock);
}
