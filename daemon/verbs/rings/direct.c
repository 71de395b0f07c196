/*
 * The direct transport's pairs (common/transit.h): when two RC QPs of
 * this daemon are connected to each other, they get one sealed memfd
 * holding a transit ring each way, which their libraries map (QP_DIRECT)
 * to pass SENDs without an engine thread.  Paired at RTR/RTS, dropped by
 * each side at its reset or destroy; freed when both have let go.
 *
 * The file itself is made when a library first asks for it.  Until then
 * the pair's rings and leases are a zeroed block of the daemon's own
 * (idle_ctl) that no library can write: the rings stay empty, and what
 * the engine reads or voids there changes nothing anyone sees.  Unmapping
 * a pair's file once the engine has touched it cost the control thread
 * about 110 us per pair here, so a connection that never sends on the
 * rings is spared that, with the file, its fd and its mapping
 * (bench/RESULTS.md, "where cmtime's connect goes").
 *
 * Everything here runs on the control thread.  Pairs are made and
 * dropped with the objects lock held for writing by the caller; a file
 * made later (QP_DIRECT) takes that lock itself to switch the rings over,
 * so no engine pass sees a pair half made or half gone.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "barrier.h"
#include "core/device.h"
#include "engine/engine.h"
#include "ibverbsd.pb-c.h"
#include "log.h"
#include "server/call.h"
#include "server/session.h"
#include "tenant/tenant.h"
#include "util.h"
#include "verbs/verbs.h"
#include "verbs/rings/arena.h"

/*
 * 1 MiB each way: sixteen 64 KiB messages in flight, which keeps a
 * streaming sender and its receiver copying at once (256 KiB gave
 * ib_send_bw 64 KiB about 5 GB/s, 1 MiB 6-9, bench/RESULTS.md).  The
 * pages cost nothing until used.
 */
#define DIRECT_CELLS	16384u
/*
 * Pairs alive at once, daemon-wide: each costs the daemon a mapping (of
 * vm.max_map_count's 65,530), 2 MiB of shared memory once its rings
 * have wrapped (2 GiB for all), and, until both libraries took it, an
 * fd.  Past this, connections use the engine: slower, never wrong.
 */
#define DIRECT_MAX_PAIRS	1024u
/*
 * A quarter of them per uid (IBVD_UID_MAX_DIRECT_PAIRS), counted against
 * the uid of the QP whose transition (RC, UC) or ask (UD) made the pair:
 * one tenant making pairs among its own QPs, or with any other's UD QPs,
 * cannot take them all.
 */
_Static_assert(IBVD_UID_MAX_DIRECT_PAIRS == DIRECT_MAX_PAIRS / 4,
	       "a quarter of the pairs per uid");

/* The rings and leases of every pair whose file is not made yet. */
static uint8_t idle_ctl[IBVD_TRANSIT_CTL_BYTES]
	__attribute__((aligned(IBVD_CACHELINE)));

static bool direct_enabled;
static uint32_t last_gen;
static unsigned int npairs;
static LIST_HEAD(, ibvd_direct) pairs = LIST_HEAD_INITIALIZER(pairs);

void ibvd_direct_configure(bool enabled)
{
	direct_enabled = enabled;
}

static struct ibvd_wq_engine *sq_engine(const struct ibvd_qp *qp)
{
	return qp->sq.engine_page;
}

static struct ibvd_wq_client *rq_client(const struct ibvd_qp *qp)
{
	return qp->rq.client_page;
}

/* Its own RQ, or a basic SRQ (whose claim the engine always takes). */
static bool receives_pairable(const struct ibvd_qp *qp)
{
	if (qp->srq)
		return qp->srq->srq_type == IBV_SRQT_BASIC &&
		       qp->srq->ring.client_page;
	return qp->rq.client_page;
}

static bool pairable(const struct ibvd_qp *qp)
{
	uint32_t state = __atomic_load_n(&qp->state, __ATOMIC_ACQUIRE);

	return (qp->qp_type == IBV_QPT_RC || qp->qp_type == IBV_QPT_UC ||
		qp->qp_type == IBV_QPT_UD) &&
	       !qp->direct && receives_pairable(qp) &&
	       qp->ctx->dev->kind == IBVD_DEV_SOFT &&
	       (state == IBV_QPS_RTR || state == IBV_QPS_RTS);
}

static int pair_file(struct ibvd_direct *d)
{
	uint64_t bytes = ibvd_transit_pair_bytes(DIRECT_CELLS);
	int fd = ibvd_memfd_new("ibvd-transit"), ret;
	unsigned int i;
	void *map;

	if (fd < 0)
		return fd;
	if (ftruncate(fd, (off_t)bytes) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		goto fail;
	map = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
		   fd, 0);
	if (map == MAP_FAILED)
		goto fail;
	/* Engine passes read the rings: they move under the write lock. */
	ibvd_objects_write_lock();
	d->fd = fd;
	d->map = map;
	d->map_len = (size_t)bytes;
	d->ctl = map;
	ibvd_transit_pair(map, d->ncells, 0, &d->ring[0], &d->ring[1]);
	for (i = 0; i < 2; i++) {
		d->ring[i].ctl->produced = IBVD_TRANSIT_START;
		d->ring[i].ctl->consumed = IBVD_TRANSIT_START;
	}
	ibvd_objects_write_unlock();
	return 0;
fail:
	ret = -errno;
	close(fd);
	return ret;
}

/*
 * qp's direct_gen changed: a library that only polls qp's receive CQ
 * looks at its QPs' rings when this count moves (ring.h).
 */
static void tell_recv_cq(const struct ibvd_qp *qp)
{
	struct ibvd_cq_engine *ep;

	if (!qp->recv_cq)
		return;
	ep = qp->recv_cq->ring.engine_page;
	ibvd_publish(&ep->direct_moves, ep->direct_moves + 1);
}

/*
 * qp becomes side `side` of d; its RQ's WQEs are taken under the claim
 * from now on (an SRQ's always are).
 */
static void join(struct ibvd_direct *d, struct ibvd_qp *qp, unsigned int side)
{
	struct ibvd_wq_client *rc = rq_client(qp);

	d->qp[side] = qp;
	qp->direct = d;
	qp->direct_side = side;
	if (!qp->srq) {
		ibvd_write_once(&rc->claim, IBVD_WQ_CLAIM_FREE);
		ibvd_write_once(&rc->direct_head, qp->rq_head);
	}
	ibvd_write_once(&sq_engine(qp)->direct_fail_status, 0);
	ibvd_write_once(&sq_engine(qp)->direct_dropped, 0);
	/* nothing taken yet: the rings' counts begin there */
	ibvd_write_once(&sq_engine(qp)->direct_taken, IBVD_TRANSIT_START);
	/* Release: the claim words are set before a library may use them. */
	ibvd_publish(&sq_engine(qp)->direct_gen, d->gen);
	tell_recv_cq(qp);
}

/*
 * The library sends on the ring only from RTS, with RNR retried for ever
 * on RC (the engine cannot count RNR retries of SENDs it never saw; UC
 * has none: a message with no WQE to go to is dropped), and while the
 * peer is there.  The library checks this word after each SEND it
 * puts in the ring, so one that raced with a peer leaving is seen by the
 * engine (ibvd_direct_leave kicks it) or rings for it.  Its library
 * places WRITEs with immediate that came on the ring only while the
 * QP's access flags allow remote writes (remote_write_placeable).
 */
/*
 * May qp's library place a peer's WRITE with immediate itself?  Only by
 * the QP's rights, and only in a context of one process: in one shared
 * by ibv_import_device another member may deregister or re-register an
 * MR, which this library's MR table never hears of, so the engine, which
 * knows every MR, places them.
 */
static uint32_t remote_write_placeable(const struct ibvd_qp *qp)
{
	return (qp->attr.access & IBV_ACCESS_REMOTE_WRITE) &&
	       qp->ctx->nmembers == 1;
}

/*
 * Does qp's path still lead to its side of the pair?  A connected QP's
 * path may change at SQD (a new AV): its SENDs then go where the engine
 * routes them, as a NIC's would, and the pair carries only what the peer
 * sends (its own path is its own).
 */
static bool path_to_pair(const struct ibvd_qp *qp, const struct ibvd_qp *peer)
{
	return qp->qp_type == IBV_QPT_UD || ibvd_engine_qp_peer(qp) == peer;
}

void ibvd_direct_update(struct ibvd_qp *qp)
{
	struct ibvd_direct *d = qp->direct;
	uint32_t ok = d && d->qp[!qp->direct_side] &&
		      !__atomic_load_n(&d->ud_broken, __ATOMIC_RELAXED) &&
		      __atomic_load_n(&qp->state, __ATOMIC_ACQUIRE) == IBV_QPS_RTS &&
		      (qp->qp_type != IBV_QPT_RC || qp->attr.rnr_retry == 7) &&
		      !ibvd_engine_ctx_paced(qp->ctx) &&
		      path_to_pair(qp, d->qp[!qp->direct_side]);

	ibvd_publish(&sq_engine(qp)->direct_send_ok, ok);
	ibvd_publish(&sq_engine(qp)->direct_remote_write,
		     remote_write_placeable(qp));
}

static int no_remote_write(uint32_t handle, enum ibvd_obj_kind kind,
			   void *obj, void *arg)
{
	struct ibvd_qp *qp = obj;

	(void)handle, (void)kind, (void)arg;
	if (sq_engine(qp))
		ibvd_publish(&sq_engine(qp)->direct_remote_write, 0);
	return 0;
}

void ibvd_direct_ctx_shared(struct ibvd_context *ctx)
{
	ibvd_handle_foreach(&ctx->handles, IBVD_OBJ_QP, no_remote_write, NULL);
}

/*
 * qp and peer (both pairable, of one type and device) share rings now,
 * counted against the tenant qp's context charges (its creator's uid,
 * whichever process of the context stands for it now).
 */
static int pair_make(struct ibvd_qp *qp, struct ibvd_qp *peer)
{
	const struct ibvd_tenant_dev *account = qp->ctx->handles.charge_owner;
	struct ibvd_tenant *t = account ? account->tenant : NULL;
	struct ibvd_direct *d;

	if (npairs >= DIRECT_MAX_PAIRS || !t ||
	    t->direct_pairs >= IBVD_UID_MAX_DIRECT_PAIRS)
		return -ENOSPC;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->payer = t;
	ibvd_tenant_ref(d->payer);
	d->payer->direct_pairs++;
	d->fd = -1;
	d->ncells = DIRECT_CELLS;
	d->ctl = idle_ctl;
	if (++last_gen == 0)
		last_gen = 1;
	d->gen = last_gen;
	npairs++;
	LIST_INSERT_HEAD(&pairs, d, link);
	/* Empty rings that stay empty: nobody can write idle_ctl. */
	ibvd_transit_pair(idle_ctl, d->ncells, 0, &d->ring[0], &d->ring[1]);
	join(d, qp, 0);
	join(d, peer, 1);
	ibvd_direct_update(qp);
	ibvd_direct_update(peer);
	return 0;
}

void ibvd_direct_pair_try(struct ibvd_qp *qp)
{
	struct ibvd_qp *peer;

	/* UD QPs pair when one asks to (ibvd_req_qp_direct_ud) */
	if (!direct_enabled || !pairable(qp) || qp->qp_type == IBV_QPT_UD)
		return;
	peer = ibvd_engine_qp_peer(qp);
	if (!peer || !pairable(peer) || peer->qp_type != qp->qp_type ||
	    peer->ctx->dev != qp->ctx->dev ||
	    peer->attr.dest_qp_num != qp->qp_num)
		return;
	pair_make(qp, peer);
}

/*
 * A UD QP pairs with the first local UD QP it sends to that is free to
 * pair too: one pair per QP, as for RC, so its messages to others keep
 * going through the engine (transit.h, "UD").  Both must be on the same
 * soft device, without an SRQ, the asking QP in RTS and its peer in RTR
 * or RTS (a QP that only receives may stay in RTR).
 */
int ibvd_req_qp_direct_ud(struct ibvd_call *call)
{
	const Ibvd__QpDirectUd *req = (const Ibvd__QpDirectUd *)call->msg;
	struct ibvd_qp *qp = ibvd_call_qp(call, req->handle), *peer;
	int ret;

	if (!qp || qp->qp_type != IBV_QPT_UD)
		return ibvd_call_error(call, -EINVAL, "handle %u is no UD QP",
				       req->handle);
	peer = ibvd_qp_by_num(req->remote_qpn & 0xFFFFFFu);
	if (!direct_enabled || !peer || peer == qp ||
	    peer->qp_type != IBV_QPT_UD || peer->ctx->dev != qp->ctx->dev ||
	    __atomic_load_n(&qp->state, __ATOMIC_ACQUIRE) != IBV_QPS_RTS)
		return ibvd_call_error(call, -ENOENT,
				       "QP %u: no transit rings with QP %u",
				       qp->qp_num, req->remote_qpn);
	/* paired now, perhaps not for long (ibvd_req_qp_direct_leave) */
	if (qp->direct || peer->direct)
		return ibvd_call_error(call, -EBUSY,
				       "QP %u or QP %u has transit rings already",
				       qp->qp_num, peer->qp_num);
	if (!pairable(qp) || !pairable(peer))
		return ibvd_call_error(call, -ENOENT,
				       "QP %u: no transit rings with QP %u",
				       qp->qp_num, req->remote_qpn);
	ibvd_objects_write_lock();
	ret = pair_make(qp, peer);
	ibvd_objects_write_unlock();
	if (ret < 0)
		return ibvd_call_error(call, ret, "QP %u: no transit rings",
				       qp->qp_num);
	return 0;
}

static void pair_free(struct ibvd_direct *d)
{
	if (d->map)
		munmap(d->map, d->map_len);
	if (d->fd >= 0)
		close(d->fd);
	LIST_REMOVE(d, link);
	d->payer->direct_pairs--;
	ibvd_tenant_put(d->payer);
	free(d);
	npairs--;
}

void ibvd_direct_limits_changed(void)
{
	struct ibvd_direct *d;
	unsigned int i;

	ibvd_objects_write_lock();
	LIST_FOREACH(d, &pairs, link)
		for (i = 0; i < 2; i++)
			if (d->qp[i])
				ibvd_direct_update(d->qp[i]);
	ibvd_objects_write_unlock();
}

void ibvd_direct_revoke_into(const struct ibvd_context *ctx)
{
	uint64_t since = ibvd_mono_ns();
	struct ibvd_direct *d;
	unsigned int i;

	LIST_FOREACH(d, &pairs, link)
		for (i = 0; i < 2; i++)
			if (d->qp[!i] && d->qp[!i]->ctx == ctx)
				ibvd_direct_lease_void(d, i);
	LIST_FOREACH(d, &pairs, link)
		for (i = 0; i < 2; i++)
			ibvd_direct_lease_settle(d, i, since);
}

void ibvd_direct_leave(struct ibvd_qp *qp)
{
	struct ibvd_direct *d = qp->direct;
	struct ibvd_qp *peer;
	uint64_t since;

	if (!d)
		return;
	peer = d->qp[!qp->direct_side];
	/* no library copies to or from either side's memory past here */
	since = ibvd_mono_ns();
	ibvd_direct_lease_void(d, 0);
	ibvd_direct_lease_void(d, 1);
	ibvd_direct_lease_settle(d, 0, since);
	ibvd_direct_lease_settle(d, 1, since);
	d->qp[qp->direct_side] = NULL;
	qp->direct = NULL;
	ibvd_publish(&sq_engine(qp)->direct_send_ok, 0);
	ibvd_publish(&sq_engine(qp)->direct_gen, 0);
	if (!peer) {
		pair_free(d);
		return;
	}
	/*
	 * What the peer sent and we never took fails at the peer, as
	 * retries to a responder that went away do: its engine finds the
	 * ring with nobody behind it.
	 */
	ibvd_direct_update(peer);
	/*
	 * A UD peer talks to others too: its library lets go of the pair
	 * once its sends on it are completed (ibvd_req_qp_direct_leave), and
	 * may pair again.  Published after direct_send_ok, which its library
	 * reads after this: nothing new goes on the ring.
	 */
	if (peer->qp_type == IBV_QPT_UD) {
		ibvd_publish(&sq_engine(peer)->direct_gen, 0);
		tell_recv_cq(peer);
	}
	ibvd_full_fence();
	ibvd_engine_qp_kick(peer);
}

/*
 * A UD QP whose peer left lets go of their pair (its library asks once
 * its own sends on the ring are completed, transit.h "UD").  A library
 * that asks early loses only its own datagrams still in the ring.
 */
int ibvd_req_qp_direct_leave(struct ibvd_call *call)
{
	const Ibvd__Handle *req = (const Ibvd__Handle *)call->msg;
	struct ibvd_qp *qp = ibvd_call_qp(call, req->handle);
	int ret;

	if (!qp || qp->qp_type != IBV_QPT_UD)
		return ibvd_call_error(call, -EINVAL, "handle %u is no UD QP",
				       req->handle);
	if (!qp->direct)
		return ibvd_call_error(call, -ENOENT,
				       "QP %u shares no transit rings",
				       qp->qp_num);
	if (qp->direct->qp[!qp->direct_side])
		return ibvd_call_error(call, -EBUSY,
				       "QP %u's peer still shares its rings",
				       qp->qp_num);
	ibvd_objects_write_lock();
	ret = ibvd_engine_rq_reclaim(qp);
	if (ret == 0)
		ibvd_direct_leave(qp);
	ibvd_objects_write_unlock();
	if (ret < 0)
		return ibvd_call_error(call, ret, "QP %u: its library holds "
				       "its receive queue", qp->qp_num);
	return 0;
}

int ibvd_direct_call_pair(struct ibvd_call *call, uint32_t handle,
			  struct ibvd_qp **qp, struct ibvd_qp **peer)
{
	*qp = ibvd_call_qp(call, handle);
	if (!*qp)
		return -EINVAL;
	/* Pairs change on this thread only: no lock needed to read them. */
	*peer = (*qp)->direct ? (*qp)->direct->qp[!(*qp)->direct_side] : NULL;
	if (!*peer)
		return ibvd_call_error(call, -ENOENT,
				       "QP %u shares no transit rings",
				       (*qp)->qp_num);
	return 0;
}

/*
 * UD: the GID table of the peer's port (a soft port's, pairs are made on
 * soft devices only), from which its datagrams' GRHs take their SGID.
 */
static void peer_gids(Ibvd__QpDirectReply *reply, const struct ibvd_qp *peer,
		      const struct ibvd_port *port,
		      struct ibvd_gid gids[IBVD_GID_TBL_LEN],
		      ProtobufCBinaryData bytes[IBVD_GID_TBL_LEN])
{
	unsigned int i, n = ibvd_device_gids(peer->ctx->dev, port, gids);

	for (i = 0; i < n && i < IBVD_GID_TBL_LEN; i++) {
		bytes[i].data = gids[i].raw;
		bytes[i].len = ibvd_gid_empty(&gids[i]) ? 0 : sizeof(gids[i].raw);
	}
	reply->n_peer_gids = i;
	reply->peer_gids = bytes;
}

/*
 * What wakes the peer when it sleeps on cq: the writing end of that CQ's
 * channel's wake-up pair (channel.c), or -1 (no channel, or no pair to
 * be had: the engine wakes it, as it wakes any).
 */
static int peer_poke(const struct ibvd_cq *cq)
{
	return cq && cq->channel ? ibvd_channel_poke(cq->channel) : -1;
}

/*
 * Are the peer's wake-up pairs for this caller?  A UD pair is made by
 * one side alone (ibvd_req_qp_direct_ud), with any local UD QP: a peer
 * of another uid keeps its pairs, which would let the caller wake that
 * uid's channels at will, and go on doing so after the pair ends; the
 * engine wakes it instead, as it wakes any.  RC and UC pairs are made by
 * both sides' connections.
 */
static bool pokes_for(const struct ibvd_call *call, const struct ibvd_qp *qp,
		      const struct ibvd_qp *peer)
{
	const struct ibvd_tenant_dev *account = peer->ctx->handles.charge_owner;

	return qp->qp_type != IBV_QPT_UD ||
	       (account && account->tenant->uid == call->session->cred.uid);
}

/* The rings' fd, then the peer's wake-up pairs that there are. */
static unsigned int reply_fds(Ibvd__QpDirectReply *reply,
			      const struct ibvd_qp *qp,
			      const struct ibvd_qp *peer, bool pokes,
			      int fds[3])
{
	unsigned int n = 0;

	fds[n++] = qp->direct->fd;
	if (!pokes)
		return n;
	if ((fds[n] = peer_poke(peer->recv_cq)) >= 0) {
		reply->pokes |= IBVD_DIRECT_POKE_RECV;
		n++;
	}
	if ((fds[n] = peer_poke(peer->send_cq)) >= 0) {
		reply->pokes |= IBVD_DIRECT_POKE_SEND;
		n++;
	}
	return n;
}

int ibvd_req_qp_direct(struct ibvd_call *call)
{
	const Ibvd__Handle *req = (const Ibvd__Handle *)call->msg;
	Ibvd__QpDirectReply reply = IBVD__QP_DIRECT_REPLY__INIT;
	ProtobufCBinaryData gid_bytes[IBVD_GID_TBL_LEN];
	struct ibvd_gid gids[IBVD_GID_TBL_LEN];
	const struct ibvd_port *port;
	struct ibvd_qp *qp, *peer;
	unsigned int nfds;
	int fds[3], ret;

	ret = ibvd_direct_call_pair(call, req->handle, &qp, &peer);
	if (ret < 0)
		return ret;
	reply.gen = qp->direct->gen;
	reply.ncells = qp->direct->ncells;
	reply.start = IBVD_TRANSIT_START;
	reply.side = qp->direct_side;
	reply.peer_qpn = peer->qp_num;
	port = ibvd_device_port(peer->ctx->dev, peer->attr.port_num);
	reply.peer_slid = port ? port->lid : 0;
	reply.peer_sl = peer->attr.av.sl;
	if (port && qp->qp_type == IBV_QPT_UD)
		peer_gids(&reply, peer, port, gids, gid_bytes);
	if (qp->direct->fetched & (1u << qp->direct_side))
		return ibvd_call_error(call, -ENOENT,
				       "QP %u took its transit rings already",
				       qp->qp_num);
	if (!qp->direct->map) {
		ret = pair_file(qp->direct);
		/* the engine carries their messages as before */
		if (ret < 0)
			return ibvd_call_error(call, ret,
					       "QPs %u and %u: no transit rings",
					       qp->qp_num, peer->qp_num);
	}
	nfds = reply_fds(&reply, qp, peer, pokes_for(call, qp, peer), fds);
	ret = ibvd_call_reply(call, &reply.base, fds, nfds);
	if (ret < 0)
		return ret;
	/* Each side maps them once: the fd is not kept for nothing. */
	qp->direct->fetched |= 1u << qp->direct_side;
	if (qp->direct->fetched == 3) {
		close(qp->direct->fd);
		qp->direct->fd = -1;
	}
	return 0;
}
