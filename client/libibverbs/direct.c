/*
 * The direct transport, the library's side (common/transit.h has the
 * design): SENDs between two RC QPs of the same daemon go through transit
 * rings the two libraries share, with no engine thread in between.
 *
 * - Sending (ibv_post_send, SQ lock): a SEND (with immediate or
 *   invalidate) or an RDMA WRITE with immediate goes on the ring when
 *   the engine has finished every earlier WQE of the QP, the receiver
 *   has the rings mapped, the message fits the free space and its SGEs
 *   are this process's MRs; anything else takes the SQ.  It is
 *   remembered until the receiver has taken it, then completed here.
 * - Receiving (ibv_poll_cq, CQ lock): under the RQ's claim (ring.h), the
 *   next message goes into the next receive WQE (a WRITE with immediate
 *   into the MR its key names, taking the WQE), checked as the engine
 *   would; whatever this side will not place (an unknown key, a message
 *   longer than its WQE, a ring that makes no sense) is left for the
 *   engine, which fails it properly, and so is everything of a QP in
 *   error.
 * - Completions made here wait in the CQ's small FIFO, each with the
 *   engine tail it follows, and come out merged with the engine's CQEs so
 *   that one QP's completions keep their order.  While a CQ has direct
 *   QPs, a poll takes engine CQEs only up to the tail it saw first, so a
 *   CQE the engine wrote after a ring moved never passes a completion
 *   made from that move.
 *
 * Locks: the SQ lock for what posters touch, the CQ lock for what pollers
 * touch; the sends in flight are a single-producer single-consumer ring
 * between the two.  Mapping and unmapping take the QP's direct_lock, then
 * its queue locks and both CQ locks, so nobody sees rings half there.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "barrier.h"
#include "ibvd_verbs.h"
#include "transit.h"
#include "util.h"

#define DIRECT_MAX_SGE	16u
/* UD: a receive's GRH slot */
#define DIRECT_GRH	40u
/* A Q_Key with this bit set means the sending QP's own (verbs.h) */
#define DIRECT_QKEY_OWN	0x80000000u
/* UD: the entries of the peer's port GID table kept (a soft port's all) */
#define DIRECT_PEER_GIDS	16u
/* UD: a GRH's IP version and next header (BTH), as the engine makes it */
#define DIRECT_GRH_VERSION	6u
#define DIRECT_GRH_NEXT_HDR	0x1Bu
/*
 * A receiver that does not poll would hold our SENDs for ever, where a
 * NIC's responder takes them at once: past this the engine places them.
 */
#define DIRECT_STALL_NS	20000u
/*
 * A SEND that does not fit waits while messages are taken (wait_room):
 * past the first interval without one taken the engine is asked to take
 * them, past the second the SEND goes without the ring.
 */
#define DIRECT_ROOM_ASK_NS	20000u
#define DIRECT_ROOM_GIVE_UP_NS	200000u
/* ... and in all: a receiver that lies a cell at a time keeps no one */
#define DIRECT_ROOM_MAX_NS	2000000u
/*
 * UD: after a long wait, SENDs that do not fit take the SQ at once for a
 * while: 1 ms, twice as long after each long wait within a second of the
 * last quiet's start, up to 100 ms.  A peer that keeps its ring full, or
 * frees room a cell at a time, costs a poster at most DIRECT_ROOM_MAX_NS
 * every 100 ms, not every post.
 */
#define DIRECT_ROOM_QUIET_MIN_NS	1000000ull
#define DIRECT_ROOM_QUIET_MAX_NS	100000000ull
#define DIRECT_ROOM_QUIET_RESET_NS	1000000000ull

/*
 * A SEND on the ring, not completed yet, or a WRITE or READ done under a
 * grant (direct_rdma.c), whose completion waits its turn here.
 */
struct ibvc_direct_send {
	uint64_t wr_id;
	uint32_t end;			/* `consumed` once it was taken */
	uint32_t byte_len;
	uint32_t mark;			/* its send CQ's engine tail at posting */
	uint8_t opcode;			/* enum ibv_wc_opcode */
	bool signaled;
};

struct ibvc_direct {
	uint32_t gen;
	struct ibvc_map map;
	struct ibvd_transit out;	/* we send on it */
	uint64_t *own_produced;		/* its cells, in our SQ's header */
	uint64_t published;		/* ... as we last said it there */
	struct ibvd_transit in;		/* we receive from it */
	uint32_t peer_qpn;
	uint16_t peer_slid;
	uint8_t peer_sl;
	/* UD: the SGIDs of the peer's GRHs, by index (zero where none) */
	uint8_t peer_gids[DIRECT_PEER_GIDS][16];
	uint32_t peer_gids_gen;		/* the gid_gen they are current for */
	bool peer_gids_known;		/* ... once read (fresh_peer_gids) */
	unsigned int side;		/* ours in the pair */
	/* posters (SQ lock) */
	uint64_t room_quiet_until;	/* no waiting for room before this */
	uint64_t room_quiet_ns;		/* ... the last such quiet's length */
	uint32_t produced;
	bool produced_now;		/* this post_send list used the ring */
	struct ibvc_grants *grants;	/* the peer's MRs we copy to and from */
	bool done_now;			/* and completed a signalled one so */
	uint32_t done_end;		/* `produced` then */
	/* the sends in flight: posters add at tail, pollers take at head */
	struct ibvc_direct_send *sends;
	uint32_t sends_cap;		/* a power of two */
	uint32_t sends_tail;
	uint32_t sends_head;
	bool fail_reported;		/* pollers: the first failure went out */
	/* what a sender asleep on its send CQ waits for (update_wake) */
	pthread_mutex_t wake_lock;
	uint32_t arm_since;		/* send CQ lock: `consumed` before an arm */
	/* pollers: since when the oldest send waits, and the engine knows */
	uint64_t stall_ns;
	bool stall_rung;
	/* pollers of the receive CQ: the engine must place the next message,
	 * at `consumed` handed_at (a flag: any count may be that one) */
	bool handed;
	uint32_t handed_at;
	/* wake the peer asleep on its receive CQ, on its send CQ (-1: the
	 * engine does) */
	int peer_poke;
	int peer_send_poke;
	/* send CQ lock: `consumed` at the fallback timer's last look */
	uint32_t fallback_seen;
	bool fallback_looked;
	/* one byte per arm that the peer sleeps on: the last we woke */
	uint32_t poked_arm;		/* posters: its receive CQ's */
	uint64_t poked_wake;		/* pollers: its send CQ's `wake` */
	bool solicited_now;		/* this post_send list had one */
};

/* The wake-up pair of cq's channel, if we fire its events (or -1). */
static int cq_poke_fd(const struct ibvc_cq *cq)
{
	return cq->cq.channel ? ibvc_channel_poke_fd(cq->cq.channel) : -1;
}

/*
 * Tell the sender to qp's rings that its receive CQ is armed (arm, of
 * kind IBVD_ARM_*), or no longer: it wakes us (transit.h, "Blocking"),
 * unless no receive is posted for what it sends.
 */
static void rx_armed(struct ibvc_qp *qp, struct ibvc_direct *d, bool armed,
		     uint32_t kind)
{
	const struct ibvc_wq *wq = qp->qp.srq ? &to_ibvc_srq(qp->qp.srq)->rq :
						&qp->rq;
	struct ibvc_cq *cq = to_ibvc_cq(qp->qp.recv_cq);
	uint32_t arm;

	if (armed) {
		/*
		 * A token of this publication, not the CQ's arm number: a
		 * sender pokes once per token (wake_receiver), and an arm a
		 * poll kept (ibvc_direct_poll_end) is published again.
		 */
		arm = __atomic_add_fetch(&cq->direct.arm_token, 1, __ATOMIC_RELAXED);
		if (!arm)
			arm = __atomic_add_fetch(&cq->direct.arm_token, 1,
						 __ATOMIC_RELAXED);
		if (cq_poke_fd(cq) < 0)
			kind |= IBVD_TRANSIT_ARM_UNWATCHED;
		if (ibvd_read_once(&wq->client->tail) ==
		    ibvd_read_once(&wq->client->direct_head))
			kind |= IBVD_TRANSIT_ARM_NO_RECV;
		ibvd_write_once(&d->in.ctl->arm_kind, kind);
		/* Release: the sender that sees the arm sees its kind. */
		ibvd_publish(&d->in.ctl->arm_seq, arm);
	} else if (ibvd_read_once(&d->in.ctl->arm_seq)) {
		ibvd_write_once(&d->in.ctl->arm_seq, 0);
	}
}

void ibvc_direct_qp_init(struct ibvc_qp *qp)
{
	pthread_mutex_init(&qp->direct_lock, NULL);
}

static struct ibvc_direct *direct_of(const struct ibvc_qp *qp)
{
	return __atomic_load_n(&qp->direct, __ATOMIC_ACQUIRE);
}

static struct ibvc_context *ctx_of(const struct ibvc_qp *qp)
{
	return to_ibvc_context(qp->qp.context);
}

static void ring_own(const struct ibvc_qp *qp)
{
	ibvc_ring_doorbell(ctx_of(qp), qp->doorbell);
}

/* ---- mapping ------------------------------------------------------------ */

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

static bool cq_armed(const struct ibvc_cq *cq)
{
	return ibvd_read_once(&cq->ring.client->arm_seq) ==
	       __atomic_load_n(&cq->ring.client->fired, __ATOMIC_ACQUIRE) + 1;
}

/* Does any completion fire cq's arm, or only a solicited one (or an error)? */
static bool arm_any(const struct ibvc_cq *cq)
{
	return ibvd_read_once(&cq->ring.client->arm_flags) & IBVD_ARM_NEXT;
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
		rx_armed(qp, d, true, ibvd_read_once(&rcq->ring.client->arm_flags));
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

/* ---- sending (SQ lock) ---------------------------------------------------- */

/* A SEND for the ring, from a work request or from a WQE in the SQ. */
struct ring_msg {
	uint64_t wr_id;
	uint32_t opcode;
	uint32_t send_flags;
	uint32_t imm;			/* network order */
	uint32_t qkey;			/* UD */
	uint8_t sl;			/* UD */
	bool has_grh;			/* UD: grh goes ahead of the bytes */
	struct ibvd_transit_grh grh;
	bool has_rdma;			/* WRITE_WITH_IMM: rdma goes ahead */
	struct ibvd_transit_rdma rdma;
	struct iovec iov[DIRECT_MAX_SGE];
	int iovcnt;
	uint64_t len;			/* the message's bytes */
};

/* What goes ahead of m's bytes on the ring (transit.h). */
static uint32_t ring_info_len(const struct ring_msg *m)
{
	return m->has_grh ? IBVD_TRANSIT_GRH_INFO :
	       m->has_rdma ? IBVD_TRANSIT_RDMA_INFO : 0;
}

/* What m takes of a ring's payload room. */
static uint64_t ring_len(const struct ring_msg *m)
{
	return m->len + ring_info_len(m);
}

/*
 * What goes on a ring.  A SEND with invalidate too: the receiver's
 * library hands it to the engine, which owns the keys, and the messages
 * behind it wait their turn.  An RDMA WRITE with immediate on RC and UC:
 * the receiver polls for its completion anyway, so its library places
 * the data then, in its own MR, checked by the key as a responder would.
 */
static bool ring_opcode(const struct ibvc_qp *qp, uint32_t opcode)
{
	if (opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		return qp->qp.qp_type == IBV_QPT_RC || qp->qp.qp_type == IBV_QPT_UC;
	return opcode == IBV_WR_SEND || opcode == IBV_WR_SEND_WITH_IMM ||
	       opcode == IBV_WR_SEND_WITH_INV;
}

static uint16_t ring_kind(uint32_t opcode)
{
	switch (opcode) {
	case IBV_WR_SEND:
		return IBVD_TRANSIT_SEND;
	case IBV_WR_SEND_WITH_IMM:
		return IBVD_TRANSIT_SEND_IMM;
	case IBV_WR_SEND_WITH_INV:
		return IBVD_TRANSIT_SEND_INV;
	default:
		return IBVD_TRANSIT_WRITE_IMM;
	}
}

/* WRITE_WITH_IMM: where it goes, ahead of its bytes on the ring. */
static void msg_rdma(struct ring_msg *m, uint64_t remote_addr, uint32_t rkey)
{
	m->has_rdma = m->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
	memset(&m->rdma, 0, sizeof(m->rdma));
	m->rdma.remote_addr = remote_addr;
	m->rdma.rkey = rkey;
}

/* Add one SGE; false if it is not this process's registered memory. */
static bool msg_add(const struct ibvc_qp *qp, struct ring_msg *m,
		    uint64_t addr, uint32_t len, uint32_t lkey, bool keyless)
{
	if (len && !keyless &&
	    !ibvc_mrtab_covers(ctx_of(qp), qp->qp.pd, lkey, addr, len,
			       IBVC_MRTAB_COPY))
		return false;
	m->iov[m->iovcnt].iov_base = (void *)(uintptr_t)addr;
	m->iov[m->iovcnt].iov_len = len;
	m->iovcnt++;
	m->len += len;
	return true;
}

/* UD: what the receiver makes the GRH of (transit.h, "UD"). */
static void grh_info(struct ibvd_transit_grh *g, const struct ibvd_av *av)
{
	memset(g, 0, sizeof(*g));
	memcpy(g->dgid, av->dgid, sizeof(g->dgid));
	g->flow_label = av->flow_label & 0xFFFFFu;
	g->sgid_index = av->sgid_index;
	g->hop_limit = av->hop_limit;
	g->traffic_class = av->traffic_class;
}

/*
 * UD: may a datagram to qpn through av go on the ring?  Only to the peer,
 * by its LID, as the engine would route it; the Q_Key resolved as the
 * engine does, and with a GRH what the receiver makes it of (transit.h,
 * "UD").  Other QP types (av NULL): yes, with none of those.
 */
static bool ud_dest(const struct ibvc_qp *qp, uint32_t qpn,
		    const struct ibvd_av *av, uint32_t qkey, struct ring_msg *m)
{
	const struct ibvc_direct *d = qp->direct;

	m->qkey = 0;
	m->sl = 0;
	m->has_grh = false;
	if (qp->qp.qp_type != IBV_QPT_UD)
		return true;
	if ((qpn & 0xFFFFFFu) != d->peer_qpn || !av->dlid ||
	    av->dlid != d->peer_slid)
		return false;
	m->qkey = (qkey & DIRECT_QKEY_OWN) ?
		  __atomic_load_n(&qp->qkey, __ATOMIC_RELAXED) : qkey;
	m->sl = av->sl;
	m->has_grh = av->is_global;
	if (m->has_grh)
		grh_info(&m->grh, av);
	return true;
}

/* The whole message gathered: no longer than a UD datagram may be. */
static bool msg_size_ok(const struct ibvc_qp *qp, const struct ring_msg *m)
{
	return qp->qp.qp_type != IBV_QPT_UD || m->len <= IBVD_TRANSIT_UD_MAX;
}

/* wr as a ring message; false if it cannot be one. */
static bool msg_from_wr(const struct ibvc_qp *qp, const struct ibv_send_wr *wr,
			struct ring_msg *m)
{
	/* inline data needs no key: the app's buffer, read now */
	bool inline_data = wr->send_flags & IBV_SEND_INLINE;
	const struct ibvd_av *av = qp->qp.qp_type == IBV_QPT_UD ?
				   &to_ibvc_ah(wr->wr.ud.ah)->av : NULL;
	int i;

	/* another PD's AH: the engine fails it */
	if ((av && !ibvc_ah_pd_ok(qp, wr->wr.ud.ah)) ||
	    !ring_opcode(qp, wr->opcode) || (uint32_t)wr->num_sge > DIRECT_MAX_SGE ||
	    !ud_dest(qp, wr->wr.ud.remote_qpn, av, wr->wr.ud.remote_qkey, m))
		return false;
	m->wr_id = wr->wr_id;
	m->opcode = wr->opcode;
	m->send_flags = wr->send_flags;
	m->imm = wr->imm_data;
	msg_rdma(m, wr->wr.rdma.remote_addr, wr->wr.rdma.rkey);
	m->iovcnt = 0;
	m->len = 0;
	for (i = 0; i < wr->num_sge; i++)
		if (!msg_add(qp, m, wr->sg_list[i].addr, wr->sg_list[i].length,
			     wr->sg_list[i].lkey, inline_data))
			return false;
	return msg_size_ok(qp, m);
}

/* The WQE in an SQ slot as a ring message (it is ours: post.c wrote it). */
static bool msg_from_slot(const struct ibvc_qp *qp, const uint8_t *slot,
			  struct ring_msg *m)
{
	const uint8_t *body = slot + IBVD_SEND_WQE_HDR;
	struct ibvd_send_wqe h;
	struct ibvd_sge sge;
	uint32_t i;

	memcpy(&h, slot, sizeof(h));
	/* a staged payload is in the block the engine reads it from */
	if ((h.send_flags & (IBVD_SEND_STAGED | IBVD_SEND_FOREIGN_AH)) ||
	    !ring_opcode(qp, h.opcode) ||
	    !ud_dest(qp, h.remote_qpn, &h.av, h.remote_qkey, m))
		return false;
	m->wr_id = h.wr_id;
	m->opcode = h.opcode;
	m->send_flags = h.send_flags;
	m->imm = h.imm_data;
	msg_rdma(m, h.remote_addr, h.rkey);
	m->iovcnt = 0;
	m->len = 0;
	if (h.send_flags & IBV_SEND_INLINE)
		return h.inline_len <= qp->cap.max_inline_data &&
		       msg_add(qp, m, (uint64_t)(uintptr_t)body, h.inline_len,
			       0, true) && msg_size_ok(qp, m);
	if (h.num_sge > DIRECT_MAX_SGE)
		return false;
	for (i = 0; i < h.num_sge; i++) {
		memcpy(&sge, body + i * sizeof(sge), sizeof(sge));
		if (!msg_add(qp, m, sge.addr, sge.length, sge.lkey, false))
			return false;
	}
	return msg_size_ok(qp, m);
}

/*
 * Has the engine nothing of this SQ left to do, its completions
 * written?  Either it retired every WQE, or it retired every one it
 * started and the library moved the rest to the ring (take_back).
 */
static bool sq_drained(const struct ibvc_qp *qp, uint32_t sq_tail)
{
	/* Acquire: the completions below it are written. */
	uint32_t retired = ibvd_observe(&qp->sq.engine->direct_retired);

	return retired == sq_tail ||
	       (ibvd_read_once(&qp->sq.client->direct_head) == sq_tail &&
		retired == ibvd_observe(&qp->sq.engine->head));
}

/*
 * May requests be done here now: the daemon says so, and there is room
 * to remember one until its completion?
 */
static bool direct_usable(const struct ibvc_qp *qp, const struct ibvc_direct *d)
{
	return ibvd_read_once(&qp->sq.engine->direct_send_ok) &&
	       d->sends_tail - ibvd_observe(&d->sends_head) < d->sends_cap;
}

/* May SENDs go on the ring now (but for their size)?  The receiver must
 * know of the ring too. */
static bool ring_usable(const struct ibvc_qp *qp, const struct ibvc_direct *d)
{
	return direct_usable(qp, d) && ibvd_observe(&d->out.ctl->rx_ready);
}

static bool fits(const struct ibvc_direct *d, uint32_t consumed, uint64_t len)
{
	uint32_t room = ibvd_transit_room(&d->out, d->produced, consumed);

	return room && len <= room;
}

/* A long wait for room: a quiet while (DIRECT_ROOM_QUIET_*). */
static void room_quiet(struct ibvc_direct *d, uint64_t now)
{
	uint64_t last = d->room_quiet_until - d->room_quiet_ns;
	uint64_t quiet = DIRECT_ROOM_QUIET_MIN_NS;

	if (d->room_quiet_until && now - last < DIRECT_ROOM_QUIET_RESET_NS)
		quiet = d->room_quiet_ns * 2;
	if (quiet > DIRECT_ROOM_QUIET_MAX_NS)
		quiet = DIRECT_ROOM_QUIET_MAX_NS;
	d->room_quiet_ns = quiet;
	d->room_quiet_until = now + quiet;
}

/*
 * wait_room's wait: true when room came; false when it did not or cannot
 * come.  *waited: how long it spun (0: not at all).
 */
static bool await_room(const struct ibvc_qp *qp, const struct ibvc_direct *d,
		       uint64_t len, uint32_t *consumed, uint64_t *waited)
{
	uint64_t start = 0, since = 0, now;
	bool asked = false;
	uint32_t c;

	while (!fits(d, *consumed, len)) {
		if (*consumed == d->produced)
			return false;
		now = ibvd_mono_ns();
		if (!start)
			start = now;
		*waited = now - start;
		if (*waited > DIRECT_ROOM_MAX_NS)
			return false;
		c = ibvd_read_once(&d->out.ctl->consumed);
		/* only a step forward, up to what we produced, is progress:
		 * a receiver's line that moves anywhere else keeps no one here */
		if (!since || (c != *consumed && (uint32_t)(c - *consumed) <=
			       (uint32_t)(d->produced - *consumed))) {
			*consumed = c;
			since = now;
			asked = false;
		} else if (!asked && now - since > DIRECT_ROOM_ASK_NS) {
			ring_own(qp);
			asked = true;
			since = now;
		} else if (asked && now - since > DIRECT_ROOM_GIVE_UP_NS) {
			return false;
		}
	}
	return true;
}

/*
 * Room for len bytes, waiting for it while messages are taken: a SEND
 * that took the SQ instead would put every later one behind it on the
 * engine's path (RC order) for as long as the app keeps its SQ busy, as
 * a streaming sender does.  When the receiver takes nothing for a while
 * (it does not poll, it is not running, or it is this very thread) the
 * engine is asked to place what is there; when nothing moves even then
 * (no receive posted), or the empty ring cannot hold the message, or
 * room does not come within DIRECT_ROOM_MAX_NS however it moves, the
 * SEND takes the SQ.  A UD QP's peer is whoever it sends to: after a
 * wait longer than DIRECT_ROOM_GIVE_UP_NS, given up or not, its next
 * SENDs that do not fit take the SQ at once for a while (room_quiet).
 * False: take the SQ; *consumed is the last read.
 */
static bool wait_room(const struct ibvc_qp *qp, struct ibvc_direct *d,
		      uint64_t len, uint32_t *consumed)
{
	bool ud = qp->qp.qp_type == IBV_QPT_UD, room;
	uint64_t waited = 0;

	if (fits(d, *consumed, len))
		return true;
	if (ud && d->room_quiet_until && ibvd_mono_ns() < d->room_quiet_until)
		return false;
	room = await_room(qp, d, len, consumed, &waited);
	if (ud && waited > DIRECT_ROOM_GIVE_UP_NS)
		room_quiet(d, ibvd_mono_ns());
	return room;
}

/*
 * A request the ring or a grant carries: its completion waits until the
 * receiver took what the ring holds up to here (`produced` now).
 */
static bool remember(struct ibvc_qp *qp, struct ibvc_direct *d,
		     uint64_t wr_id, enum ibv_wc_opcode opcode,
		     uint32_t byte_len, unsigned int send_flags, uint32_t mark)
{
	struct ibvc_direct_send *s;

	s = &d->sends[d->sends_tail & (d->sends_cap - 1)];
	s->wr_id = wr_id;
	s->end = d->produced;
	s->byte_len = byte_len;
	s->mark = mark;
	s->opcode = (uint8_t)opcode;
	s->signaled = qp->sq_sig_all || (send_flags & IBV_SEND_SIGNALED);
	/* Release: the pollers see the entry before the new tail. */
	ibvd_publish(&d->sends_tail, d->sends_tail + 1);
	return s->signaled;
}

struct ring_write {
	const struct ibvd_transit *t;
	uint32_t *produced;
	uint32_t consumed;
	const struct ibvd_transit_frag *f;
	const struct iovec *iov;
	int iovcnt;
	int ret;
};

static void ring_write(void *arg)
{
	struct ring_write *w = arg;

	w->ret = ibvd_transit_write(w->t, w->produced, w->consumed, w->f,
				    w->iov, w->iovcnt);
}

/*
 * Write m on the ring (it fits at `consumed` as read) and remember it
 * until the receiver takes it; mark: its send CQ's engine tail, which
 * holds every completion of the QP's earlier WQEs.  The copy from the
 * app's memory is guarded: a file truncated under its MR leaves the
 * SEND to the engine, which fails it (`produced` moves only once the
 * message is written).
 */
static bool ring_put(struct ibvc_qp *qp, struct ibvc_direct *d,
		     const struct ring_msg *m, uint32_t consumed, uint32_t mark)
{
	struct iovec iov[DIRECT_MAX_SGE + 1];
	const struct iovec *from = m->iov;
	struct ibvd_transit_frag f;
	int iovcnt = m->iovcnt;
	struct ring_write w;

	memset(&f, 0, sizeof(f));
	f.kind = ring_kind(m->opcode);
	f.flags = IBVD_TRANSIT_FIRST | IBVD_TRANSIT_LAST;
	if (m->send_flags & IBV_SEND_SOLICITED)
		f.flags |= IBVD_TRANSIT_SOLICITED;
	f.flags |= (uint16_t)((m->sl << IBVD_TRANSIT_SL_SHIFT) &
			      IBVD_TRANSIT_SL_MASK);
	if (m->has_grh)
		f.flags |= IBVD_TRANSIT_GRH;
	if (ring_info_len(m)) {
		iov[0].iov_base = m->has_grh ? (void *)&m->grh : (void *)&m->rdma;
		iov[0].iov_len = ring_info_len(m);
		memcpy(iov + 1, m->iov, (size_t)m->iovcnt * sizeof(*iov));
		from = iov;
		iovcnt++;
	}
	f.qkey = m->qkey;
	f.len = f.msg_len = (uint32_t)ring_len(m);
	f.imm = m->imm;
	f.wr_id = m->wr_id;
	w = (struct ring_write){ .t = &d->out, .produced = &d->produced,
				 .consumed = consumed, .f = &f, .iov = from,
				 .iovcnt = iovcnt, .ret = -EFAULT };
	if (!ibvc_guarded(ring_write, &w) || w.ret < 0)
		return false;
	if (m->send_flags & IBV_SEND_SOLICITED)
		d->solicited_now = true;
	remember(qp, d, m->wr_id, m->has_rdma ? IBV_WC_RDMA_WRITE : IBV_WC_SEND,
		 (uint32_t)m->len, m->send_flags, mark);
	d->produced_now = true;
	return true;
}

static uint32_t send_cq_tail(const struct ibvc_qp *qp)
{
	return ibvd_observe(&to_ibvc_cq(qp->qp.send_cq)->ring.engine->tail);
}

/*
 * A WRITE or READ into the peer's memory by a grant (direct_rdma.c), done
 * now.  RC order: only when the engine has finished every earlier
 * request and the receiver took every SEND before it (a WRITE must not
 * land before an earlier SEND); otherwise the engine does it, after
 * placing those SENDs itself.
 */
static int direct_rdma(struct ibvc_qp *qp, struct ibvc_direct *d,
		       const struct ibv_send_wr *wr)
{
	uint32_t byte_len;

	if (ibvd_read_once(&d->out.ctl->consumed) != d->produced)
		return 0;
	if (!d->grants) {
		d->grants = ibvc_grants_new(ibvd_transit_lease(d->map.addr,
							       d->side));
		if (!d->grants)
			return 0;
	}
	if (!ibvc_grants_rdma(qp, d->grants, d->gen, wr, &byte_len))
		return 0;
	if (remember(qp, d, wr->wr_id, wr->opcode == IBV_WR_RDMA_READ ?
		     IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE, byte_len,
		     wr->send_flags, send_cq_tail(qp))) {
		d->done_now = true;
		d->done_end = d->produced;
	}
	return 1;
}

int ibvc_direct_send(struct ibvc_qp *qp, const struct ibv_send_wr *wr,
		     uint32_t sq_tail)
{
	struct ibvc_direct *d = qp->direct;
	struct ring_msg m;
	uint32_t consumed;

	/*
	 * Drained first: the acquire there orders the read of send_ok after
	 * it, and the engine clears send_ok before it retires a failed WQE,
	 * so nothing goes on the ring behind a failure.
	 */
	if (!d || !sq_drained(qp, sq_tail) || !direct_usable(qp, d))
		return 0;
	/* one-sided: the target's library has no part in it */
	if (wr->opcode == IBV_WR_RDMA_WRITE || wr->opcode == IBV_WR_RDMA_READ)
		return direct_rdma(qp, d, wr);
	if (!ibvd_observe(&d->out.ctl->rx_ready) || !msg_from_wr(qp, wr, &m))
		return 0;
	consumed = ibvd_read_once(&d->out.ctl->consumed);
	if (!wait_room(qp, d, ring_len(&m), &consumed) ||
	    !ring_put(qp, d, &m, consumed, send_cq_tail(qp)))
		return 0;
	return 1;
}

/*
 * What we wrote into our ring, made visible: first in our SQ's header
 * (with the pairing's gen), the count the engine and we go by, then in
 * the ring for the receiver.  A UD peer can rewrite the ring's, to hide
 * what we sent from the engine (our sends would never complete) or to
 * make a `consumed` it invents look possible.
 */
static void publish_produced(struct ibvc_direct *d)
{
	d->published += (uint32_t)(d->produced - (uint32_t)d->published);
	/* Release: the fragments below it were written before it. */
	ibvd_publish(d->own_produced, d->published);
	ibvd_transit_publish(&d->out, d->produced);
}

/*
 * SENDs that went to the SQ (the ring was full, or they queued behind
 * some that were) go on the ring after all when the engine has not
 * started them: otherwise a sender that keeps its SQ busy, as a
 * streaming one does, would never come back to the ring.  Under the SQ's
 * claim (ring.h), which the engine holds while it runs the SQ, from the
 * first WQE it has not taken, in order, as long as each is a SEND the
 * ring takes now; the engine skips them when it next takes the claim.
 */
void ibvc_direct_take_back(struct ibvc_qp *qp, uint32_t sq_tail)
{
	struct ibvc_direct *d = qp->direct;
	struct ibvd_wq_client *c = qp->sq.client;
	const struct ibvd_wq_engine *e = qp->sq.engine;
	uint32_t expect = IBVD_WQ_CLAIM_FREE;
	uint32_t head, from, consumed, mark;
	struct ring_msg m;

	if (!d || ibvd_observe(&e->head) == sq_tail ||
	    ibvd_read_once(&c->direct_head) == sq_tail || !ring_usable(qp, d))
		return;
	if (!__atomic_compare_exchange_n(&c->claim, &expect,
					 IBVD_WQ_CLAIM_LIBRARY, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return;
	head = ibvd_observe(&e->head);
	/* Acquire: the engine's completions before ours are written. */
	if (ibvd_observe(&e->direct_retired) != head)
		goto out;
	mark = send_cq_tail(qp);
	from = ibvd_read_once(&c->direct_head);
	if (from - head > sq_tail - head)
		from = head;		/* the engine took all we took before */
	consumed = ibvd_read_once(&d->out.ctl->consumed);
	while (from != sq_tail && ring_usable(qp, d) &&
	       msg_from_slot(qp, ibvc_wq_slot(&qp->sq, from), &m) &&
	       fits(d, consumed, ring_len(&m)) &&
	       ring_put(qp, d, &m, consumed, mark))
		from++;
	ibvd_write_once(&c->direct_head, from);
	/*
	 * Published before the claim goes: the engine, taking it, skips
	 * these SENDs in the SQ and runs the WQE behind them once it sees
	 * the ring empty, which it must not while they are not in it.
	 */
	if (d->produced_now)
		publish_produced(d);
out:
	/* Release: the ring's records and our head before the claim. */
	ibvd_publish(&c->claim, IBVD_WQ_CLAIM_FREE);
}

/* Can the receiver have taken this much (`consumed`, as it says)? */
static bool possible(const struct ibvc_direct *d, uint32_t consumed)
{
	uint64_t wide;

	/* what we published, not what the ring says: the peer can write it */
	return ibvd_transit_widen(ibvd_read_once(d->own_produced), consumed,
				  d->out.ncells, &wide);
}

/* Is `consumed`, as the receiver says, past `end` (and possible)? */
static bool taken(const struct ibvc_direct *d, uint32_t consumed, uint32_t end)
{
	if (!possible(d, consumed))
		return false;	/* a receiver's lie: nothing moves */
	return (int32_t)(consumed - end) >= 0;
}

/*
 * How far our ring is taken, as a 64-bit count: the receiver's
 * `consumed`, unless what the engine took itself (direct_taken, its word)
 * is further, or the receiver's is impossible.  A UD peer can move
 * `consumed` back and forth, to keep us from ever seeing our sends taken.
 * `dropped`: UC and UD count as taken, too, what the engine gave up on
 * (ring.h, direct_dropped: a receiver that held its claim too long),
 * while the ring keeps what it holds.
 */
static uint64_t taken_count(const struct ibvc_qp *qp,
			    const struct ibvc_direct *d, bool dropped)
{
	uint64_t published = ibvd_read_once(d->own_produced);
	uint64_t taken = ibvd_observe(&qp->sq.engine->direct_taken), wide, gave;
	uint32_t said = ibvd_observe(&d->out.ctl->consumed);

	if (ibvd_transit_widen(published, said, d->out.ncells, &wide) &&
	    wide > taken)
		taken = wide;
	if (!dropped || qp->qp.qp_type == IBV_QPT_RC)
		return taken;
	gave = ibvd_observe(&qp->sq.engine->direct_dropped);
	return gave > taken && gave <= published ? gave : taken;
}

/* ... for the wake-ups, which the engine sends for what it gave up on */
static uint32_t sent_taken(const struct ibvc_qp *qp,
			   const struct ibvc_direct *d)
{
	return (uint32_t)taken_count(qp, d, false);
}

/* ... for the completions */
static uint32_t sent_done(const struct ibvc_qp *qp, const struct ibvc_direct *d)
{
	return (uint32_t)taken_count(qp, d, true);
}

/*
 * The end of the first signalled SEND not taken when `consumed` was
 * `since`; false: none.  It may be taken by now: if so, its event is due
 * at once (update_wake).
 */
static bool first_untaken(const struct ibvc_direct *d, uint32_t since,
			  uint32_t *end)
{
	/* Acquire: the entries below the tail are written. */
	uint32_t tail = ibvd_observe(&d->sends_tail);
	uint32_t i;

	for (i = ibvd_observe(&d->sends_head); i != tail; i++) {
		const struct ibvc_direct_send *s = &d->sends[i & (d->sends_cap - 1)];

		if (s->signaled && !taken(d, since, s->end)) {
			*end = s->end;
			return true;
		}
	}
	return false;
}

enum wake_kind { WAKE_NONE, WAKE_ON_FAIL, WAKE_AT };

/*
 * Say how the send CQ sleeps (IBVD_TRANSIT_WAKE_*, 0 for awake) and, for
 * WAKE_AT, the wake: in the SQ's client header, the copy that we and the
 * engine go by, and in the ring's producer line for the peer's library,
 * which may write that line too (transit.h "Blocking").
 */
static void say_wake(struct ibvc_qp *qp, struct ibvc_direct *d,
		     uint32_t waits, uint64_t wake)
{
	struct ibvd_wq_client *c = qp->sq.client;

	if (waits == IBVD_TRANSIT_WAKE_AT) {
		__atomic_store_n(&c->direct_wake, wake, __ATOMIC_RELAXED);
		__atomic_store_n(&d->out.ctl->wake, wake, __ATOMIC_RELAXED);
	}
	/* Release: who sees the mode sees the wake. */
	ibvd_publish(&c->direct_sender_waits, waits);
	ibvd_publish(&d->out.ctl->sender_waits, waits);
}

/*
 * Do our SENDs taken up to `consumed` (as the receiver says, if that is
 * possible) complete what the send CQ waits for?
 */
static bool own_wake_due(const struct ibvc_qp *qp, uint32_t consumed,
			 uint32_t *arm)
{
	const struct ibvd_wq_client *c = qp->sq.client;

	return possible(qp->direct, consumed) &&
	       ibvd_wake_due(&c->direct_sender_waits, &c->direct_wake,
			     consumed, arm);
}

/*
 * The send CQ is armed: tell the engine (through the ring's producer
 * line, transit.h "Blocking") which `consumed` completes the first
 * signalled SEND not taken before the arm, so that it sends the event
 * then, or at once if it was taken since.  `since` is `consumed` as read
 * before the arm or the SENDs' publication, whichever the caller did
 * last: a SEND the receiver (or the engine) takes between that and our
 * look completes on the armed CQ and must fire it, as a NIC's CQE would;
 * one taken before it is a completion the arm did not ask about.  A wake
 * already set for this arm stays: its SEND is the earliest (and if it was
 * taken, its event is on the way).  Posters and arming pollers both come
 * here, under wake_lock.
 */
static enum wake_kind update_wake(struct ibvc_qp *qp, struct ibvc_direct *d,
				  bool done, uint32_t since)
{
	struct ibvc_cq *cq = to_ibvc_cq(qp->qp.send_cq);
	struct ibvd_wq_client *c = qp->sq.client;
	enum wake_kind kind = WAKE_NONE;
	uint32_t arm, end, was;

	pthread_mutex_lock(&d->wake_lock);
	if (!cq_armed(cq))
		goto out;
	/* solicited only: a send's success fires nothing, its failure does */
	if (!arm_any(cq)) {
		kind = WAKE_ON_FAIL;
		say_wake(qp, d, IBVD_TRANSIT_WAKE_ON_FAIL, 0);
		goto out;
	}
	arm = ibvd_read_once(&cq->ring.client->arm_seq);
	was = ibvd_read_once(&c->direct_sender_waits);
	kind = WAKE_AT;
	if (was == IBVD_TRANSIT_WAKE_AT &&
	    (uint32_t)(__atomic_load_n(&c->direct_wake, __ATOMIC_RELAXED) >> 32) ==
	    arm)
		goto out;
	/* a completion made by this post comes first: it is due now */
	if (done)
		end = d->done_end;
	if (done || first_untaken(d, since, &end)) {
		say_wake(qp, d, IBVD_TRANSIT_WAKE_AT, (uint64_t)arm << 32 | end);
	} else {
		kind = WAKE_ON_FAIL;
		say_wake(qp, d, IBVD_TRANSIT_WAKE_ON_FAIL, 0);
	}
out:
	pthread_mutex_unlock(&d->wake_lock);
	/*
	 * Store (wake) -> load (consumed, in the engine after the caller
	 * rings): a SEND taken while we looked is seen due there.
	 */
	ibvd_full_fence();
	return kind;
}

/*
 * The receiver sleeps on an arm that what we just sent fires: we wake it
 * (once for that arm), or the engine does (false).
 */
static bool wake_receiver(struct ibvc_direct *d)
{
	/* Acquire: the kind was stored before the arm. */
	uint32_t arm = ibvd_observe(&d->out.ctl->arm_seq);
	uint32_t kind = ibvd_read_once(&d->out.ctl->arm_kind);

	if (!arm || arm == d->poked_arm)
		return true;
	/*
	 * A solicited-only arm and an unsolicited SEND: only an error fires
	 * it, which the receive makes, not we; the engine places it and
	 * sees (the receiver's library sleeps).
	 */
	if (kind & (IBVD_TRANSIT_ARM_NO_RECV | IBVD_TRANSIT_ARM_UNWATCHED) ||
	    (!(kind & IBVD_ARM_NEXT) && !d->solicited_now))
		return false;
	if (!ibvc_poke(d->peer_poke))
		return false;
	d->poked_arm = arm;
	return true;
}

/*
 * A sender asleep on its send CQ (update_wake's kind): does the engine
 * have to watch for it?  Not when the receiver's library wakes it
 * (place_received) and its app sleeps in ibv_get_cq_event, which rings
 * the engine after all if nothing comes of it (channel.c); what is due
 * already we wake it for ourselves.
 */
/*
 * Will the receiver's library wake us once it took what we wait for
 * (place_received)?  It has our channel's pair if there is one
 * (QP_DIRECT), or, a UD peer of another uid, rings the engine to wake us
 * instead; and we must sleep in ibv_get_cq_event, which rings the engine
 * after all for a receiver that takes nothing (channel.c).
 */
static bool peer_wakes_us(struct ibvc_cq *cq)
{
	return cq_poke_fd(cq) >= 0 &&
	       ibvc_channel_fallback(cq->cq.channel) == 0;
}

static bool sleeper_watched(struct ibvc_qp *qp, struct ibvc_direct *d,
			    enum wake_kind kind)
{
	struct ibvc_cq *cq = to_ibvc_cq(qp->qp.send_cq);
	uint32_t arm;

	if (kind == WAKE_NONE)
		return false;
	if (!peer_wakes_us(cq))
		return true;
	/*
	 * Due already: ibv_get_cq_event fires it (fire_senders).  Not here:
	 * a poller that hands SENDs back to the ring holds the CQ's lock.
	 */
	if (kind == WAKE_AT &&
	    own_wake_due(qp, sent_taken(qp, d), &arm))
		ibvc_poke(cq_poke_fd(cq));
	return false;
}

void ibvc_direct_send_done(struct ibvc_qp *qp)
{
	struct ibvc_direct *d = qp->direct;
	bool ring = false, done;
	uint32_t since;

	if (!d || !(d->produced_now || d->done_now))
		return;
	done = d->done_now;
	d->done_now = false;
	/* nothing of this list can be taken before it is published */
	since = sent_taken(qp, d);
	if (d->produced_now) {
		d->produced_now = false;
		publish_produced(d);
		/*
		 * Store (produced) -> load (arm_seq, send_ok) needs a full
		 * fence, mirrored by the receiver arming and the daemon
		 * letting go of the pair: whoever stores last sees the
		 * other's store.
		 */
		ibvd_full_fence();
		if (!ibvd_read_once(&qp->sq.engine->direct_send_ok))
			ring = true;
		else
			ring = !wake_receiver(d);
		d->solicited_now = false;
	}
	/*
	 * A sender that sleeps on its CQ: its receiver's library wakes it
	 * once it took what it waits for, or the engine sees to it (and
	 * places the SENDs itself if the receiver does not poll for them, or
	 * sends the event of a WRITE or READ done here).
	 */
	if (sleeper_watched(qp, d, update_wake(qp, d, done, since)))
		ring = true;
	if (ring)
		ring_own(qp);
}

/* ---- completions made here (CQ lock) --------------------------------- */

static bool fifo_full(const struct ibvc_cq *cq)
{
	return cq->direct.tail - cq->direct.head >= cq->direct.cap;
}

/*
 * Kept in the order of their marks.  One QP's completions are made with
 * marks in order, but those of QPs sharing the CQ are not (a SEND taken
 * late keeps the mark of its post): one with an earlier mark must not
 * wait behind another's later one while the engine's CQEs between the
 * two marks, its own QP's among them, go out first.  Equal marks keep
 * the order they came in.
 */
static struct ibvc_local_cqe *fifo_push(struct ibvc_cq *cq,
					 const struct ibvd_cqe *cqe,
					 uint32_t mark)
{
	uint32_t mask = cq->direct.cap - 1, at = cq->direct.tail;
	struct ibvc_local_cqe *fifo = cq->direct.fifo;

	for (; at != cq->direct.head &&
	       (int32_t)(fifo[(at - 1) & mask].mark - mark) > 0; at--)
		fifo[at & mask] = fifo[(at - 1) & mask];
	fifo[at & mask].cqe = *cqe;
	/* the engine's clock (ring.h), for a CQ whose reader asks for it */
	if (cq->timestamps)
		fifo[at & mask].cqe.timestamp = ibvd_mono_ns();
	fifo[at & mask].mark = mark;
	fifo[at & mask].unfired = 0;
	/* an error fires a solicited-only arm too (a SEND's: place_one) */
	fifo[at & mask].solicited = cqe->status != IBV_WC_SUCCESS;
	cq->direct.tail++;
	return &fifo[at & mask];
}

static void send_cqe(struct ibvd_cqe *cqe, const struct ibvc_qp *qp,
		     const struct ibvc_direct_send *s, enum ibv_wc_status st)
{
	memset(cqe, 0, sizeof(*cqe));
	cqe->wr_id = s->wr_id;
	cqe->status = st;
	cqe->opcode = s->opcode;
	/* an error's is 0, as the engine's and rxe's flushes say */
	cqe->byte_len = st == IBV_WC_SUCCESS ? s->byte_len : 0;
	cqe->qp_num = qp->qp.qp_num;
}

/* The oldest send waits: after DIRECT_STALL_NS, ask the engine, once. */
static void stalled(struct ibvc_qp *qp, struct ibvc_direct *d, bool moved)
{
	uint64_t now;

	if (moved) {
		d->stall_ns = 0;
		d->stall_rung = false;
		return;
	}
	if (d->stall_rung)
		return;
	now = ibvd_mono_ns();
	if (!d->stall_ns) {
		d->stall_ns = now;
	} else if (now - d->stall_ns > DIRECT_STALL_NS) {
		d->stall_rung = true;
		ring_own(qp);
	}
}

static void harvest_sends(struct ibvc_cq *cq, struct ibvc_qp *qp)
{
	struct ibvc_direct *d = qp->direct;
	uint32_t tail = ibvd_observe(&d->sends_tail);
	uint32_t head = d->sends_head, first = head;
	uint32_t fail, consumed;

	if (head == tail)
		return;
	fail = ibvd_observe(&qp->sq.engine->direct_fail_status);
	consumed = sent_done(qp, d);
	while (head != tail && !fifo_full(cq)) {
		const struct ibvc_direct_send *s = &d->sends[head & (d->sends_cap - 1)];
		enum ibv_wc_status st = IBV_WC_SUCCESS;
		struct ibvd_cqe cqe;

		if (!taken(d, consumed, s->end)) {
			if (!fail)
				break;
			st = d->fail_reported ? IBV_WC_WR_FLUSH_ERR :
						(enum ibv_wc_status)fail;
			d->fail_reported = true;
		}
		if (st != IBV_WC_SUCCESS || s->signaled) {
			send_cqe(&cqe, qp, s, st);
			fifo_push(cq, &cqe, s->mark);
		}
		head++;
	}
	/* Release: done with the entries; posters may reuse them. */
	ibvd_publish(&d->sends_head, head);
	if (head != tail || head != first)
		stalled(qp, d, head != first);
}

/*
 * A poller of the send CQ moves SENDs waiting in the SQ to the ring too
 * (a streaming sender polls far more often than it posts), if no poster
 * holds the SQ: the SQ lock comes before the CQ's, so only a try.
 */
static void take_back_polling(struct ibvc_qp *qp)
{
	/* the common case, nothing in the SQ: no lock for it */
	if (ibvd_observe(&qp->sq.engine->head) ==
	    ibvd_read_once(&qp->sq.client->tail) ||
	    qp->single_threaded || pthread_mutex_trylock(&qp->sq.lock))
		return;
	ibvc_direct_take_back(qp, qp->sq.tail);
	ibvc_direct_send_done(qp);
	pthread_mutex_unlock(&qp->sq.lock);
}

/* ---- receiving (receive CQ lock) ------------------------------------------- */

/*
 * Where qp's receive WQEs come from: its RQ, or its SRQ, whose claim
 * word and head the daemon keeps for every message (ring.h), so that
 * the libraries of its direct QPs and the engine take turns at it.
 */
struct recv_queue {
	struct ibvc_wq *wq;
	struct ibvc_srq *srq;		/* or NULL */
	uint32_t max_sge;
	struct ibv_pd *pd;
};

static void recv_queue_of(struct ibvc_qp *qp, struct recv_queue *q)
{
	q->srq = qp->qp.srq ? to_ibvc_srq(qp->qp.srq) : NULL;
	q->wq = q->srq ? &q->srq->rq : &qp->rq;
	q->max_sge = q->srq ? q->srq->max_sge : qp->cap.max_recv_sge;
	q->pd = q->srq ? q->srq->srq.pd : qp->qp.pd;
}

/* What this side places: a whole SEND into registered memory it owns. */
static bool wqe_sges(struct ibvc_qp *qp, const struct recv_queue *q,
		     const uint8_t *slot, struct ibvd_sge *sge, uint32_t *nsge,
		     uint64_t *total)
{
	struct ibvd_recv_wqe w;
	uint32_t i;

	memcpy(&w, slot, sizeof(w));
	if (w.num_sge > q->max_sge || w.num_sge > DIRECT_MAX_SGE)
		return false;
	memcpy(sge, slot + IBVD_RECV_WQE_HDR, w.num_sge * sizeof(*sge));
	*total = 0;
	for (i = 0; i < w.num_sge; i++) {
		if (sge[i].length &&
		    !ibvc_mrtab_covers(ctx_of(qp), q->pd, sge[i].lkey,
				       sge[i].addr, sge[i].length,
				       IBVC_MRTAB_WRITE | IBVC_MRTAB_COPY))
			return false;
		*total += sge[i].length;
	}
	*nsge = w.num_sge;
	return true;
}

/* len bytes into the SGEs from byte `skip` of them on (UD: its GRH slot) */
static void scatter(const struct ibvd_sge *sge, uint32_t nsge, uint32_t skip,
		    const uint8_t *src, uint32_t len)
{
	uint32_t i;

	for (i = 0; i < nsge && len; i++) {
		uint32_t room = sge[i].length, n;

		if (skip >= room) {
			skip -= room;
			continue;
		}
		room -= skip;
		n = room < len ? room : len;
		ibvc_copy((uint8_t *)(uintptr_t)sge[i].addr + skip, src, n);
		skip = 0;
		src += n;
		len -= n;
	}
}

struct scattering {
	const struct ibvd_sge *sge;
	uint32_t nsge;
	const uint8_t *grh;		/* UD: into the GRH slot, or NULL */
	uint32_t skip;
	const uint8_t *src;
	uint32_t len;
};

static void scatter_all(void *arg)
{
	const struct scattering *s = arg;

	if (s->grh)
		scatter(s->sge, s->nsge, 0, s->grh, DIRECT_GRH);
	scatter(s->sge, s->nsge, s->skip, s->src, s->len);
}

/*
 * The message into the receive WQE's buffers (guard.c): false if they
 * are a file its owner truncated, for the engine to fail the receive.
 */
static bool scatter_guarded(const struct ibvd_sge *sge, uint32_t nsge,
			    const uint8_t *grh, uint32_t skip,
			    const uint8_t *src, uint32_t len)
{
	struct scattering s = { .sge = sge, .nsge = nsge, .grh = grh,
				.skip = skip, .src = src, .len = len };

	return ibvc_guarded(scatter_all, &s);
}

/*
 * The peer's port table past GID[0] is the host's addresses, as every
 * software port's (core/device.c): read through this context's copy of
 * port 1's (query.c, fetched again only when the daemon's gid_gen moved),
 * once per pair and again after an address came or went, so that a GRH
 * names the SGID the engine would (ibvd_eng_port_gid).  Under the RQ's
 * claim, which orders the receivers of the pair.
 */
static void fresh_peer_gids(struct ibvc_direct *d, const struct ibvc_qp *qp)
{
	struct ibvc_context *ictx = to_ibvc_context(qp->qp.context);
	uint32_t gen = __atomic_load_n(&ictx->db_engine->gid_gen,
				       __ATOMIC_ACQUIRE);
	union ibv_gid g;
	unsigned int i;

	if (d->peer_gids_known && d->peer_gids_gen == gen)
		return;
	for (i = 1; i < DIRECT_PEER_GIDS; i++) {
		if (ibv_query_gid(qp->qp.context, 1, (int)i, &g) != 0)
			memset(&g, 0, sizeof(g));
		memcpy(d->peer_gids[i], g.raw, sizeof(g.raw));
	}
	d->peer_gids_gen = gen;
	d->peer_gids_known = true;
}

/*
 * UD: the GRH of a datagram of len bytes whose address the sender put
 * ahead of it (at info, in the ring: read once), as the engine makes it,
 * with the SGID from the peer's port GID table.
 */
static void make_grh(uint8_t grh[DIRECT_GRH], const struct ibvc_direct *d,
		     const uint8_t *info, uint32_t len, bool imm)
{
	uint16_t paylen = ibvd_ud_grh_paylen(len, imm);
	struct ibvd_transit_grh g;
	uint32_t w;

	memcpy(&g, info, sizeof(g));
	w = htobe32(DIRECT_GRH_VERSION << 28 | (uint32_t)g.traffic_class << 20 |
		    (g.flow_label & 0xFFFFFu));
	memcpy(grh, &w, sizeof(w));
	grh[4] = (uint8_t)(paylen >> 8);
	grh[5] = (uint8_t)paylen;
	grh[6] = DIRECT_GRH_NEXT_HDR;
	grh[7] = g.hop_limit;
	if (g.sgid_index < DIRECT_PEER_GIDS)
		memcpy(grh + 8, d->peer_gids[g.sgid_index], 16);
	else
		memset(grh + 8, 0, 16);
	memcpy(grh + 24, g.dgid, 16);
}

/* len: the message's bytes (info: what of the payload came before them) */
static void recv_cqe(struct ibvd_cqe *cqe, const struct ibvc_qp *qp,
		     const struct ibvc_direct *d, uint64_t wr_id,
		     const struct ibvd_transit_frag *f, uint32_t len)
{
	memset(cqe, 0, sizeof(*cqe));
	cqe->wr_id = wr_id;
	cqe->status = IBV_WC_SUCCESS;
	cqe->opcode = IBV_WC_RECV;
	cqe->byte_len = len;
	cqe->qp_num = qp->qp.qp_num;
	cqe->src_qp = d->peer_qpn;
	cqe->slid = d->peer_slid;
	cqe->sl = d->peer_sl;
	if (qp->qp.qp_type == IBV_QPT_UD) {
		/* the GRH slot counts, filled or not */
		cqe->byte_len += DIRECT_GRH;
		cqe->sl = (uint8_t)((f->flags & IBVD_TRANSIT_SL_MASK) >>
				    IBVD_TRANSIT_SL_SHIFT);
		if (f->flags & IBVD_TRANSIT_GRH)
			cqe->wc_flags = IBV_WC_GRH;
	}
	if (f->kind == IBVD_TRANSIT_WRITE_IMM)
		cqe->opcode = IBV_WC_RECV_RDMA_WITH_IMM;
	if (f->kind == IBVD_TRANSIT_SEND_IMM || f->kind == IBVD_TRANSIT_WRITE_IMM) {
		cqe->imm_data = f->imm;
		cqe->wc_flags |= IBV_WC_WITH_IMM;
	}
}

/*
 * An RDMA WRITE with immediate of len bytes (after its target, at
 * payload) into this process's memory, checked as the engine's responder
 * checks it (engine/wqe.c): the QP's access flags, then the key, its PD,
 * rights and range; a zero-length one checks no key (IB 9.4.5).  False:
 * the engine places it (a window's key, an MR this process did not
 * register here) or fails it.
 */
static bool write_in(struct ibvc_qp *qp, const uint8_t *payload, uint32_t len)
{
	struct ibvd_transit_rdma r;

	if (!ibvd_read_once(&qp->sq.engine->direct_remote_write))
		return false;
	if (!len)
		return true;
	memcpy(&r, payload, sizeof(r));
	return ibvc_mrtab_write_in(ctx_of(qp), qp->qp.pd, r.rkey, r.remote_addr,
				   payload + IBVD_TRANSIT_RDMA_INFO, len);
}

/*
 * What this side places: a whole SEND into its receive WQE, or a whole
 * WRITE with immediate into its MR (consuming a WQE, whose buffers it
 * leaves alone).  *len: the message's bytes.
 */
static bool placeable(struct ibvc_qp *qp, const struct recv_queue *q,
		      const uint8_t *slot, const struct ibvd_transit_frag *f,
		      const uint8_t *payload, uint32_t skip, uint32_t *len,
		      struct ibvd_sge *sge, uint32_t *nsge)
{
	const uint16_t whole = IBVD_TRANSIT_FIRST | IBVD_TRANSIT_LAST;
	uint64_t total;

	if ((f->flags & whole) != whole)
		return false;
	if (f->kind == IBVD_TRANSIT_WRITE_IMM) {
		/* transit.c checked that it has room for its target */
		*len = f->len - IBVD_TRANSIT_RDMA_INFO;
		*nsge = 0;
		return qp->qp.qp_type != IBV_QPT_UD &&
		       !(f->flags & IBVD_TRANSIT_GRH) &&
		       write_in(qp, payload, *len);
	}
	/* a GRH on RC or UC is nonsense: the engine says so */
	return (f->kind == IBVD_TRANSIT_SEND || f->kind == IBVD_TRANSIT_SEND_IMM) &&
	       (qp->qp.qp_type == IBV_QPT_UD || !(f->flags & IBVD_TRANSIT_GRH)) &&
	       wqe_sges(qp, q, slot, sge, nsge, &total) &&
	       (uint64_t)*len + skip <= total;
}

struct placing {
	struct recv_queue q;
	uint32_t consumed;		/* the ring's, as we move it */
	uint32_t head;			/* the RQ's direct head */
	uint32_t tail;			/* what the app posted */
	uint32_t mark;
	bool hand_off;			/* the next message is the engine's */
	unsigned int placed;		/* PLACED_* */
};

#define PLACED_ANY		1u
#define PLACED_SOLICITED	2u
#define PLACED_NO_WQE		4u	/* RC: one waits for a receive */
#define PLACED_BUSY		8u	/* the engine holds the claim */

/* Place one message; false when there is nothing more to do now. */
static bool place_one(struct ibvc_cq *cq, struct ibvc_qp *qp,
		      struct ibvc_direct *d, struct placing *p)
{
	struct ibvd_sge sge[DIRECT_MAX_SGE];
	bool ud = qp->qp.qp_type == IBV_QPT_UD;
	uint32_t skip = ud ? DIRECT_GRH : 0, info = 0, len, fires;
	uint8_t grh[DIRECT_GRH];
	struct ibvd_transit_frag f;
	const uint8_t *payload;
	struct ibvc_local_cqe *e;
	struct ibvd_cqe cqe;
	uint32_t next, nsge = 0;
	const uint8_t *slot;
	uint64_t wr_id;
	int ret;

	ret = ibvd_transit_next(&d->in, p->consumed, &f, &payload, &next);
	if (ret == 0 || fifo_full(cq))
		return false;
	/*
	 * No WQE: on RC the message waits (RNR); UC drops it; a UD datagram
	 * waits until its sender asks the engine to take it, which drops it
	 * (a NIC's receive buffer holds a datagram about as long).  UD drops
	 * one longer than any port's MTU, which no wire would carry (its
	 * sender chose it: only its own is lost), and leaves one for another
	 * Q_Key to the engine, which drops it too and counts it on the port
	 * (qkey_viol_cntr), where the library could not be trusted to.  A
	 * controlled Q_Key goes to the engine too: only the daemon knows
	 * whether the sender's QP holds it (else any uid could speak as
	 * root's management agents by writing the ring).
	 */
	if (p->head == p->tail) {
		if (qp->qp.qp_type != IBV_QPT_UC || ret < 0)
			return false;
		p->consumed = next;
		return true;
	}
	if (ud && ret > 0 && (f.flags & IBVD_TRANSIT_GRH))
		info = IBVD_TRANSIT_GRH_INFO;
	if (ud && ret > 0 && (f.len < info ||
			      f.len - info > IBVD_TRANSIT_UD_MAX)) {
		p->consumed = next;
		return true;
	}
	if (ud && ret > 0 &&
	    (f.qkey != __atomic_load_n(&qp->qkey, __ATOMIC_RELAXED) ||
	     (f.qkey & DIRECT_QKEY_OWN))) {
		p->hand_off = true;
		return false;
	}
	len = ret > 0 ? f.len - info : 0;
	slot = ibvc_wq_slot(p->q.wq, p->head);
	memcpy(&wr_id, slot, sizeof(wr_id));
	if (ret < 0 || !placeable(qp, &p->q, slot, &f, payload, skip, &len,
				  sge, &nsge)) {
		p->hand_off = true;
		return false;
	}
	if (info) {
		fresh_peer_gids(d, qp);
		make_grh(grh, d, payload, len, f.kind == IBVD_TRANSIT_SEND_IMM);
	}
	if (!scatter_guarded(sge, nsge, info ? grh : NULL, skip,
			     payload + info, len)) {
		p->hand_off = true;
		return false;
	}
	recv_cqe(&cqe, qp, d, wr_id, &f, len);
	fires = PLACED_ANY;
	if (f.flags & IBVD_TRANSIT_SOLICITED)
		fires |= PLACED_SOLICITED;
	/* in a poll, it fires only if left in the CQ (ibvc_direct_poll_end) */
	e = fifo_push(cq, &cqe, p->mark);
	if (fires & PLACED_SOLICITED)
		e->solicited = true;
	if (cq->direct.deferring) {
		e->unfired = fires;
		cq->direct.unfired++;
	} else {
		p->placed |= fires;
	}
	p->head++;
	p->consumed = next;
	return true;
}

/*
 * Under the claim, before anything under it is read: is the SRQ's slots
 * moving (ibv_modify_srq)?  Then the engine places (its doorbell) until
 * they have.  The resize sets the flag, then waits to see the claim free
 * once: either it waits for us, or we see the flag (both sides
 * sequentially consistent).  Acquire: a clear flag after a resize comes
 * with the new slots.
 */
static bool srq_resizing(const struct recv_queue *q)
{
	return q->srq && __atomic_load_n(&q->srq->resizing, __ATOMIC_SEQ_CST);
}

/*
 * An SRQ we took from has dropped below the limit its owner armed: the
 * engine raises the event (it looks at the SRQ when our doorbell rings).
 */
static bool srq_below_limit(const struct placing *p)
{
	uint32_t limit;

	if (!p->q.srq)
		return false;
	limit = ibvd_read_once(&p->q.wq->engine->srq_limit);
	return limit && p->tail - p->head < limit;
}

/*
 * Is qp's receiving stopped (the engine's from now on)?  A QP on an SRQ
 * has no RQ header of its own to say it is in error: its SQ's says so
 * (for UC and UD also in SQE, when the engine could still place: it
 * does so, only slower), and the SRQ's that the SRQ is broken.
 */
static bool recv_stopped(const struct ibvc_qp *qp, const struct recv_queue *q)
{
	return ibvd_read_once(&q->wq->engine->error) ||
	       (q->srq && ibvd_read_once(&qp->sq.engine->error));
}

/*
 * Does the sender want its event now that we took up to `consumed`?
 * Store (consumed) -> load (its wake) needs a full fence, mirrored by
 * the sender's store (wake) -> fence -> load (consumed) when it arms: one
 * of us sees the other's, and wakes it, or fires itself.
 */
static bool sender_due(const struct ibvc_direct *d, uint32_t consumed,
		       uint32_t *arm)
{
	ibvd_full_fence();
	return ibvd_transit_wake_due(d->in.ctl, consumed, arm);
}

/* Its `wake` is due: we wake the sender (once for it), or the engine does. */
static bool wake_sender(struct ibvc_direct *d)
{
	uint64_t wake = __atomic_load_n(&d->in.ctl->wake, __ATOMIC_RELAXED);

	if (wake == d->poked_wake)
		return true;
	if (!ibvc_poke(d->peer_send_poke))
		return false;
	d->poked_wake = wake;
	return true;
}

static unsigned int place_received(struct ibvc_cq *cq, struct ibvc_qp *qp)
{
	struct ibvc_direct *d = qp->direct;
	uint32_t expect = IBVD_WQ_CLAIM_FREE, start, arm, from, budget;
	struct ibvd_wq_client *rc;
	struct placing p;

	recv_queue_of(qp, &p.q);
	rc = p.q.wq->client;
	start = ibvd_read_once(&d->in.ctl->consumed);
	if (ibvd_observe(&d->in.ctl->produced) == start ||
	    recv_stopped(qp, &p.q) || (d->handed && d->handed_at == start))
		return 0;
	/* Sequentially consistent, against an SRQ's resize (srq_resizing). */
	if (!__atomic_compare_exchange_n(&rc->claim, &expect,
					 IBVD_WQ_CLAIM_LIBRARY, false,
					 __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		return PLACED_BUSY;
	if (srq_resizing(&p.q)) {
		ibvd_publish(&rc->claim, IBVD_WQ_CLAIM_FREE);
		ring_own(qp);
		return PLACED_BUSY;
	}
	/* After the claim: the engine's CQEs made under it are below this. */
	p.mark = ibvd_observe(&cq->ring.engine->tail);
	p.consumed = ibvd_read_once(&d->in.ctl->consumed);
	p.head = ibvd_read_once(&rc->direct_head);
	/* Acquire: the WQEs below the published tail are written. */
	p.tail = ibvd_observe(&rc->tail);
	p.hand_off = false;
	p.placed = 0;
	start = p.consumed;
	from = p.head;
	/*
	 * At most a ring's worth of messages a call: a sender that keeps
	 * writing ones that are dropped (no WQE for UC, a wrong Q_Key for UD)
	 * keeps no poller of ours here.
	 */
	if (p.tail - p.head <= p.q.wq->nslots)
		for (budget = d->in.ncells; budget && place_one(cq, qp, d, &p);
		     budget--)
			;
	if (!p.hand_off && p.head == p.tail && qp->qp.qp_type == IBV_QPT_RC &&
	    ibvd_observe(&d->in.ctl->produced) != p.consumed)
		p.placed |= PLACED_NO_WQE;
	ibvd_write_once(&rc->direct_head, p.head);
	ibvd_transit_release(&d->in, p.consumed);
	/* Release: the WQEs, the head and `consumed` before the claim. */
	ibvd_publish(&rc->claim, IBVD_WQ_CLAIM_FREE);
	d->handed = p.hand_off;
	d->handed_at = p.consumed;
	if (p.hand_off || (p.head != from && srq_below_limit(&p)))
		ring_own(qp);
	else if (p.consumed != start && sender_due(d, p.consumed, &arm) &&
		 !wake_sender(d))
		ring_own(qp);
	return p.placed;
}

/* ---- events of what we place (transit.h, "Blocking") --------------------- */

/* The CQ's event fired: the rings need not ring for it any more. */
static void disarm(struct ibvc_cq *cq)
{
	struct ibvc_qp *qp;

	for (qp = cq->direct.receivers; qp; qp = qp->next_receiver)
		rx_armed(qp, qp->direct, false, 0);
	for (qp = cq->direct.senders; qp; qp = qp->next_sender)
		if (ibvd_read_once(&qp->sq.client->direct_sender_waits))
			say_wake(qp, qp->direct, 0, 0);
}

bool ibvc_poke(int fd)
{
	if (fd < 0)
		return false;
	if (send(fd, "", 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1)
		return true;
	/* full: what it holds wakes the reader as well as ours would */
	return errno == EAGAIN || errno == EWOULDBLOCK;
}

/*
 * Under cq->lock, after placing: fire cq's arm for what we placed, as
 * the engine fires for its CQEs (ring.h: the compare-and-swap decides
 * which of us sends the one event).  The event waits in direct.events
 * for ibv_get_cq_event; `wake`: for a sleeper, unless that is the caller.
 */
static bool fire_arm(struct ibvc_cq *cq, uint32_t arm, bool wake)
{
	uint32_t fired = arm - 1;

	if (cq_poke_fd(cq) < 0 ||
	    !__atomic_compare_exchange_n(&cq->ring.client->fired, &fired, arm,
					 false, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED))
		return false;
	cq->direct.events++;
	disarm(cq);
	if (wake)
		ibvc_poke(cq_poke_fd(cq));
	return true;
}

static void fire(struct ibvc_cq *cq, unsigned int placed, bool wake)
{
	struct ibvd_cq_client *cp = cq->ring.client;

	if (!(placed & PLACED_ANY) || !cq_armed(cq))
		return;
	if (!(ibvd_read_once(&cp->arm_flags) & IBVD_ARM_NEXT) &&
	    !(placed & PLACED_SOLICITED))
		return;
	fire_arm(cq, ibvd_read_once(&cp->arm_seq), wake);
}

/*
 * A sender asleep on cq whose SENDs were taken as far as it waited for
 * (update_wake): its event, for the arm it slept on only.
 */
static bool fire_senders(struct ibvc_cq *cq, bool wake)
{
	uint32_t arm, now = ibvd_read_once(&cq->ring.client->arm_seq);
	struct ibvc_qp *qp;

	if (!arm_any(cq))
		return false;
	for (qp = cq->direct.senders; qp; qp = qp->next_sender) {
		if (own_wake_due(qp, sent_taken(qp, qp->direct), &arm) &&
		    arm == now)
			return fire_arm(cq, arm, wake);
	}
	return false;
}

/*
 * Under cq->lock: what cq's receivers' rings hold, placed and fired for.
 * `asleep`: for a receiver that sleeps on cq (ibv_get_cq_event), a SEND
 * that waits for a receive is the engine's, which waits as RNR says and
 * places it once one is posted, wherever that comes from (an SRQ's post
 * tells us nothing).  One we could not take because the engine held
 * the receive queue (it may have looked at the ring before the SEND
 * came, and its sender woke us only) we look at again in a moment.
 */
static void place_all(struct ibvc_cq *cq, bool wake, bool asleep)
{
	unsigned int placed = 0, got;
	struct ibvc_qp *qp;

	for (qp = cq->direct.receivers; qp; qp = qp->next_receiver) {
		got = place_received(cq, qp);
		if (asleep && (got & PLACED_NO_WQE))
			ring_own(qp);
		if (asleep && (got & PLACED_BUSY))
			__atomic_store_n(&to_ibvc_channel(cq->cq.channel)->rescan,
					 true, __ATOMIC_RELAXED);
		placed |= got;
	}
	fire(cq, placed, wake);
}

/*
 * A sender that waits for its receiver's library: the engine is rung for
 * it when its receiver took nothing from one look to the next, or at once
 * when what it waits for was taken (a receiver of another uid rings the
 * engine to wake it, and one that does not, and moves `consumed` back and
 * forth, must not keep it asleep).
 */
static bool fallback_one(struct ibvc_qp *qp, struct ibvc_direct *d)
{
	struct ibvc_cq *cq = to_ibvc_cq(qp->qp.send_cq);
	uint32_t consumed = sent_taken(qp, d), arm;

	/* due, for the arm the CQ sleeps on: the engine sends the event */
	if (own_wake_due(qp, consumed, &arm) && cq_armed(cq) &&
	    arm == ibvd_read_once(&cq->ring.client->arm_seq)) {
		d->fallback_looked = false;
		ring_own(qp);
		return false;
	}
	if (!ibvd_read_once(&qp->sq.client->direct_sender_waits) &&
	    d->sends_head == ibvd_observe(&d->sends_tail)) {
		d->fallback_looked = false;
		return false;
	}
	/* only a step forward is progress (a line moved back is none) */
	if (d->fallback_looked &&
	    (int32_t)(consumed - d->fallback_seen) <= 0) {
		d->fallback_looked = false;
		ring_own(qp);
		return false;
	}
	d->fallback_seen = consumed;
	d->fallback_looked = true;
	return true;
}

bool ibvc_direct_fallback(struct ibvc_cq *cq)
{
	struct ibvc_qp *qp;
	bool again = false;

	ibvc_cq_lock(cq);
	for (qp = cq->direct.senders; qp; qp = qp->next_sender)
		if (fallback_one(qp, qp->direct))
			again = true;
	ibvc_cq_unlock(cq);
	return again;
}

/* Would harvest_sends make a completion of qp's sends now? */
static bool sends_due(const struct ibvc_qp *qp)
{
	const struct ibvc_direct *d = qp->direct;
	uint32_t head = d->sends_head;

	if (head == ibvd_observe(&d->sends_tail))
		return false;
	if (ibvd_observe(&qp->sq.engine->direct_fail_status))
		return true;
	/* the ring is taken in order: the oldest send says for all */
	return taken(d, sent_done(qp, d),
		     d->sends[head & (d->sends_cap - 1)].end);
}

bool ibvc_direct_cq_idle(struct ibvc_cq *cq)
{
	const struct ibvc_qp *qp;

	if (cq->direct.tail != cq->direct.head)
		return false;
	for (qp = cq->direct.senders; qp; qp = qp->next_sender)
		if (sends_due(qp))
			return false;
	for (qp = cq->direct.receivers; qp; qp = qp->next_receiver)
		if (ibvd_observe(&qp->direct->in.ctl->produced) !=
		    ibvd_read_once(&qp->direct->in.ctl->consumed))
			return false;
	return true;
}

bool ibvc_direct_take_event(struct ibvc_cq *cq, enum ibvc_event_pass pass,
			    bool take)
{
	bool got;
	bool ours = cq_poke_fd(cq) >= 0;	/* else the engine fires */

	ibvc_cq_lock(cq);
	if (ours && pass == IBVC_EVENTS_OF_SENDS && cq->direct.senders &&
	    cq_armed(cq))
		fire_senders(cq, false);
	if (ours && pass == IBVC_EVENTS_OF_RECEIVES && cq->direct.receivers &&
	    cq_armed(cq))
		place_all(cq, false, true);
	got = cq->direct.events != 0;
	if (got && take)
		cq->direct.events--;
	ibvc_cq_unlock(cq);
	return got;
}

bool ibvc_direct_has_senders(struct ibvc_cq *cq)
{
	bool senders;

	ibvc_cq_lock(cq);
	senders = cq->direct.senders != NULL;
	ibvc_cq_unlock(cq);
	return senders;
}

void ibvc_direct_keep_event(struct ibvc_cq *cq)
{
	ibvc_cq_lock(cq);
	cq->direct.events++;
	ibvc_cq_unlock(cq);
}

bool ibvc_direct_fire_armed(struct ibvc_cq *cq)
{
	bool got = false;

	ibvc_cq_lock(cq);
	/* a wake-up byte is only ever for a CQ with direct QPs */
	if ((cq->direct.receivers || cq->direct.senders) && cq_armed(cq) &&
	    fire_arm(cq, ibvd_read_once(&cq->ring.client->arm_seq), false)) {
		cq->direct.events--;
		got = true;
	}
	ibvc_cq_unlock(cq);
	return got;
}

/*
 * Under qp's RQ lock, which letting go of the rings takes (lock_all): a
 * UD pair let go by a poster or poller on another thread cannot free d
 * under us.
 */
void ibvc_direct_recv_posted(struct ibvc_qp *qp)
{
	struct ibvc_cq *rcq = to_ibvc_cq(qp->qp.recv_cq);
	struct ibvc_direct *d = direct_of(qp);
	uint32_t kind;

	if (!d)
		return;
	/* its senders wake it from now on (rx_armed, which may re-arm now) */
	kind = __atomic_load_n(&d->in.ctl->arm_kind, __ATOMIC_RELAXED);
	while ((kind & IBVD_TRANSIT_ARM_NO_RECV) &&
	       !__atomic_compare_exchange_n(&d->in.ctl->arm_kind, &kind,
					    kind & ~IBVD_TRANSIT_ARM_NO_RECV,
					    false, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED))
		;
	/* a message that waited for a WQE, for a receiver that sleeps */
	ibvd_full_fence();
	if (!ibvd_read_once(&d->in.ctl->arm_seq) ||
	    ibvd_observe(&d->in.ctl->produced) ==
	    ibvd_read_once(&d->in.ctl->consumed))
		return;
	if (cq_poke_fd(rcq) < 0) {
		ring_own(qp);
		return;
	}
	/*
	 * Placed here, or by the sleeper we wake: a poster inside an
	 * ibv_start_poll batch of that CQ holds its lock already.
	 */
	if (pthread_mutex_trylock(&rcq->lock) != 0) {
		ibvc_poke(cq_poke_fd(rcq));
		return;
	}
	place_all(rcq, true, false);
	pthread_mutex_unlock(&rcq->lock);
}

/*
 * An armed CQ whose channel has no wake-up pair (none made, or a peer
 * shut it): we could not fire for what we place and leave, so the
 * engine places what the rings hold, and fires, as for any CQE of its
 * own.  Senders to such an arm ring the engine themselves
 * (IBVD_TRANSIT_ARM_UNWATCHED); we ring for what came before they knew.
 */
static void leave_to_engine(struct ibvc_cq *cq)
{
	struct ibvc_qp *qp;

	for (qp = cq->direct.receivers; qp; qp = qp->next_receiver)
		if (ibvd_observe(&qp->direct->in.ctl->produced) !=
		    ibvd_read_once(&qp->direct->in.ctl->consumed))
			ring_own(qp);
}

/* ---- polling and arming (CQ lock) -------------------------------------- */

void ibvc_direct_poll_begin(struct ibvc_cq *cq, uint32_t *seen)
{
	struct ibvc_qp *qp;

	cq->direct.polling = cq->direct.senders || cq->direct.receivers ||
			     cq->direct.tail != cq->direct.head;
	if (!cq->direct.polling)
		return;
	/* First: no engine CQE written after what follows is taken now. */
	cq->direct.limit = ibvd_observe(&cq->ring.engine->tail);
	*seen = cq->ring.head;
	for (qp = cq->direct.senders; qp; qp = qp->next_sender) {
		harvest_sends(cq, qp);
		take_back_polling(qp);
	}
	cq->direct.deferring = true;
	if (cq_armed(cq) && cq_poke_fd(cq) < 0)
		leave_to_engine(cq);
	else
		place_all(cq, true, false);
	cq->direct.deferring = false;
	if (!cq_armed(cq))
		disarm(cq);
}

/*
 * Publish cq's arm in its receivers' rings (a new token each time), then
 * look: a message that came as we armed is for whoever sleeps on the
 * channel, who looks at the rings, places it and fires
 * (ibvc_direct_take_event); a poll of ours that takes it first leaves no
 * event behind.
 */
static void publish_arm(struct ibvc_cq *cq)
{
	bool pending = false;
	struct ibvc_qp *qp;

	for (qp = cq->direct.receivers; qp; qp = qp->next_receiver) {
		struct ibvc_direct *d = qp->direct;

		rx_armed(qp, d, true, ibvd_read_once(&cq->ring.client->arm_flags));
		ibvd_full_fence();
		if (ibvd_observe(&d->in.ctl->produced) ==
		    ibvd_read_once(&d->in.ctl->consumed))
			continue;
		if (cq_poke_fd(cq) >= 0)
			pending = true;
		else
			ring_own(qp);
	}
	if (pending)
		ibvc_poke(cq_poke_fd(cq));
}

/*
 * The poll is over: what it placed and left in the CQ fires the arm, as
 * a NIC's CQE that came after the arm.  What it placed and took fired
 * nothing, and the arm stays: its senders, which woke us once for the
 * arm they saw (wake_receiver), must see it published again, or a
 * sleeper would not hear of their next message.
 */
void ibvc_direct_poll_end(struct ibvc_cq *cq)
{
	uint32_t mask = cq->direct.cap - 1, i, fires = 0;

	if (cq->direct.unfired) {
		for (i = cq->direct.head; i != cq->direct.tail; i++) {
			fires |= cq->direct.fifo[i & mask].unfired;
			cq->direct.fifo[i & mask].unfired = 0;
		}
		cq->direct.unfired = 0;
		fire(cq, fires, true);
	}
	if (cq->direct.absorbed) {
		cq->direct.absorbed = false;
		if (cq_armed(cq))
			publish_arm(cq);
	}
}

static bool fifo_pop(struct ibvc_cq *cq, struct ibvd_cqe *cqe)
{
	struct ibvc_local_cqe *e;

	if (cq->direct.tail == cq->direct.head)
		return false;
	e = &cq->direct.fifo[cq->direct.head++ & (cq->direct.cap - 1)];
	if (e->unfired) {
		cq->direct.unfired--;
		cq->direct.absorbed = true;
	}
	*cqe = e->cqe;
	return true;
}

/*
 * The next completion in the order the QPs' requests were posted: the
 * engine's CQEs up to the next local one's mark, then that one; with no
 * local one left, the engine's up to this poll's limit.  A mark past the
 * limit moves the limit: the engine's CQEs below a mark were published
 * before the mark was read, and they come first.
 */
bool ibvc_direct_next(struct ibvc_cq *cq, uint32_t *seen, struct ibvd_cqe *cqe)
{
	if (!cq->direct.polling)
		return ibvc_cq_ring_take(&cq->ring, seen, cqe);
	for (;;) {
		uint32_t end = cq->direct.limit;

		if (cq->direct.tail != cq->direct.head) {
			end = cq->direct.fifo[cq->direct.head &
					      (cq->direct.cap - 1)].mark;
			if ((int32_t)(end - cq->ring.head) <= 0)
				return fifo_pop(cq, cqe);
			if ((int32_t)(end - cq->direct.limit) > 0)
				cq->direct.limit = end;
		}
		*seen = cq->direct.limit;
		if (cq->ring.head == end)
			return fifo_pop(cq, cqe);
		if (ibvc_cq_ring_take_below(&cq->ring, end, cqe))
			return true;
		/* purged ones skipped to the end, or an overrun: stop there */
		if (cq->ring.head != end)
			return fifo_pop(cq, cqe);
	}
}

void ibvc_direct_arming(struct ibvc_cq *cq)
{
	struct ibvc_qp *qp;

	/*
	 * What came before the arm is placed before it: on a NIC its CQE
	 * would be there already, and fire no event of this arm.  An app
	 * that polls after it gets its event only for what comes later, not
	 * for what its poll takes (ibv_rc_pingpong -e -t counts on that).
	 */
	place_all(cq, true, false);
	for (qp = cq->direct.senders; qp; qp = qp->next_sender)
		qp->direct->arm_since = sent_taken(qp, qp->direct);
}

/*
 * cq was armed with completions in it that the app has not seen and that
 * fired nothing (ibvc_cq_missed): the arm fires now, as a NIC's would.
 * The event is the library's, through the channel's wake-up pair, which a
 * channel without direct QPs fetches here (not under the CQ lock: the
 * fetch takes the channel's, which comes first).
 */
/*
 * Under the CQ lock: a completion of ours not polled yet that fires a
 * solicited-only arm (ibvc_cq_missed).
 */
bool ibvc_direct_solicited_unpolled(const struct ibvc_cq *cq)
{
	uint32_t i;

	for (i = cq->direct.head; i != cq->direct.tail; i++)
		if (cq->direct.fifo[i & (cq->direct.cap - 1)].solicited)
			return true;
	return false;
}

void ibvc_direct_fire_missed(struct ibvc_cq *cq)
{
	if (cq_poke_fd(cq) < 0)
		ibvc_channel_poke_fetch(cq->cq.channel);
	ibvc_cq_lock(cq);
	if (ibvc_cq_missed(cq))
		fire_arm(cq, ibvd_read_once(&cq->ring.client->arm_seq), true);
	ibvc_cq_unlock(cq);
}

void ibvc_direct_armed(struct ibvc_cq *cq)
{
	enum wake_kind kind;
	struct ibvc_qp *qp;

	publish_arm(cq);
	for (qp = cq->direct.senders; qp; qp = qp->next_sender) {
		struct ibvc_direct *d = qp->direct;

		/*
		 * The engine sends the event once the SEND is taken, and takes
		 * them itself if the receiver does not: it is told of both,
		 * unless the receiver's library wakes us (sleeper_watched).
		 * Taken already: the event is ours to send.
		 */
		kind = update_wake(qp, d, false, d->arm_since);
		if (kind == WAKE_AT && fire_senders(cq, true))
			break;
		if (kind != WAKE_AT &&
		    d->sends_head == ibvd_observe(&d->sends_tail))
			continue;
		if (!peer_wakes_us(cq))
			ring_own(qp);
	}
}

/*
 * As the engine's CQEs of a destroyed QP are (IBVD_CQE_PURGED), and as a
 * NIC's provider cleans its CQ: an app that closes a connection and then
 * drains the CQ (libfabric's rxm) must not meet the QP again.  Kept in
 * order; the CQ lock keeps pollers out.
 */
void ibvc_direct_cq_forget(struct ibvc_cq *cq, uint32_t qp_num)
{
	uint32_t i, keep, mask;

	ibvc_cq_lock(cq);
	mask = cq->direct.cap - 1;
	keep = cq->direct.head;
	for (i = cq->direct.head; cq->direct.fifo && i != cq->direct.tail; i++)
		if (cq->direct.fifo[i & mask].cqe.qp_num != qp_num)
			cq->direct.fifo[keep++ & mask] = cq->direct.fifo[i & mask];
	cq->direct.tail = keep;
	ibvc_cq_unlock(cq);
}

void ibvc_direct_cq_fini(struct ibvc_cq *cq)
{
	free(cq->direct.fifo);
	cq->direct.fifo = NULL;
}
