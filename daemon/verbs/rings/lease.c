/*
 * One-sided direct access (common/lease.h): the daemon grants the library
 * of a QP with transit rings an MR of its peer that lies in shared file
 * memory (QP_REMOTE_MR), and revokes the grants before the MR or the pair
 * changes.  Control thread only.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/objects.h"
#include "frame.h"
#include "ibverbsd.pb-c.h"
#include "lease.h"
#include "log.h"
#include "util.h"
#include "server/call.h"
#include "server/session.h"
#include "verbs/verbs.h"

#define REMOTE_ACCESS	(IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE)

/* A uid whose library held a revoked lease: no grants for this long ... */
#define OFFENCE_BAN_NS		(10 * 1000000000ull)
/* ... twice as long at each offence, up to this */
#define OFFENCE_BAN_MAX_NS	(3600 * 1000000000ull)
/* What a revocation waits for the copies of such a uid (wait_window) */
#define OFFENDER_WAIT_NS	1000000ull

/*
 * Uids whose libraries held a lease to the end of a revocation's wait.
 * That wait holds the control thread with the objects locked: every
 * tenant's requests and every engine pass stall for it.  A context, or a
 * pair, that did it gets no more grants; but contexts are cheap, so the
 * uid too gets none for a while, longer at each offence, in any process
 * (kept when its processes are gone: a new process would clear it).
 * One entry per uid that ever did it.
 */
struct lease_offender {
	uid_t uid;
	unsigned int offences;
	uint64_t until_ns;		/* CLOCK_MONOTONIC: no grants before */
	uint64_t last_since;		/* the revocation it last offended in */
};

static struct lease_offender *offenders;
static size_t noffenders;

static struct lease_offender *offender_of(uid_t uid)
{
	size_t i;

	for (i = 0; i < noffenders; i++)
		if (offenders[i].uid == uid)
			return &offenders[i];
	return NULL;
}

/* uid held a lease to the end of the wait of the revocation of `since`. */
static void note_offence(uid_t uid, uint64_t since)
{
	struct lease_offender *o = offender_of(uid), *grown;
	uint64_t ban = OFFENCE_BAN_NS;
	unsigned int i;

	if (!o) {
		grown = realloc(offenders, (noffenders + 1) * sizeof(*grown));
		if (!grown)
			return;		/* the context's own mark still holds */
		offenders = grown;
		o = &offenders[noffenders++];
		*o = (struct lease_offender){ .uid = uid };
	} else if (o->last_since == since) {
		return;		/* one offence a revocation, however many leases */
	}
	o->last_since = since;
	for (i = 0; i < o->offences && ban < OFFENCE_BAN_MAX_NS; i++)
		ban *= 2;
	if (ban > OFFENCE_BAN_MAX_NS)
		ban = OFFENCE_BAN_MAX_NS;
	o->offences++;
	o->until_ns = ibvd_mono_ns() + ban;
	log_warn("uid %u: no grants of one-sided direct access for %llu s (its libraries held a revoked lease %u times)",
		 (unsigned int)uid, (unsigned long long)(ban / 1000000000ull),
		 o->offences);
}

static bool uid_banned(uid_t uid)
{
	const struct lease_offender *o = offender_of(uid);

	return o && ibvd_mono_ns() < o->until_ns;
}

struct ibvd_lease *ibvd_direct_lease(const struct ibvd_direct *d,
				     unsigned int side)
{
	return ibvd_transit_lease(d->ctl, side);
}

/*
 * Might side's library still be copying under a grant?  Not without a
 * grant since the last revocation; not once that side held its lease
 * to the end of a wait already (lest it hold the control thread at each
 * revocation); and not once its context has no member left (torn down:
 * its connection is closed, so no honest library copies for it).
 */
static bool may_be_copying(const struct ibvd_direct *d, unsigned int side)
{
	const struct ibvd_qp *grantee = d->qp[side];

	if (!d->granted[side] || d->lease_broken[side])
		return false;
	return !grantee || grantee->ctx->nmembers;
}

/*
 * How long a revocation waits for side's copy.  A side whose context or
 * uid held a lease too long already gets a short wait: its other
 * libraries may be honest (another process of the uid, stopped in a
 * debugger, stalled the first), and a copy that is running ends in a
 * millisecond; but each of its grants made before the offence costs the
 * control thread that wait once, and there may be hundreds.
 */
static uint64_t wait_window(const struct ibvd_direct *d, unsigned int side)
{
	const struct ibvd_qp *grantee = d->qp[side];

	if (uid_banned(d->grantee_uid[side]) ||
	    (grantee && grantee->ctx->lease_broken))
		return OFFENDER_WAIT_NS;
	return IBVD_LEASE_WAIT_NS;
}

void ibvd_direct_lease_void(struct ibvd_direct *d, unsigned int side)
{
	d->revoking[side] = may_be_copying(d, side);
	d->granted[side] = false;
	ibvd_lease_void(ibvd_direct_lease(d, side));
}

/*
 * Wait for side's copy under a voided grant to end: a library that does
 * not end it within its window is the target's own uid (lease.h),
 * logged, and gets no grants from then on (its uid for a while).
 */
void ibvd_direct_lease_settle(struct ibvd_direct *d, unsigned int side,
			      uint64_t since)
{
	uint64_t window = wait_window(d, side);

	if (!d->revoking[side])
		return;
	d->revoking[side] = false;
	if (ibvd_lease_wait_until(ibvd_direct_lease(d, side), since + window) == 0)
		return;
	d->lease_broken[side] = true;
	/* and in the pairs it makes next: a RESET makes a new one */
	if (d->qp[side])
		d->qp[side]->ctx->lease_broken = true;
	note_offence(d->grantee_uid[side], since);
	log_warn("transit pair %u, side %u: its library still copied under a revoked grant after %llu ms; going on, no more grants to it",
		 d->gen, side, (unsigned long long)(window / 1000000));
}

void ibvd_direct_lease_revoke(struct ibvd_direct *d, unsigned int side)
{
	uint64_t since = ibvd_mono_ns();

	ibvd_direct_lease_void(d, side);
	ibvd_direct_lease_settle(d, side, since);
}

static bool state_receives(uint32_t state)
{
	return state == IBV_QPS_RTR || state == IBV_QPS_RTS;
}

/*
 * The fd to give: the MR's own if the peer may write (rights), else the
 * same file opened again read-only, so the grant cannot write what may
 * only be read.  Not blocking: a client holding a write lease on its
 * file would hold a plain open, and this thread, until the lease breaks
 * (fs.lease-break-time, 45 s, past the service's watchdog); EAGAIN then.
 * The caller closes it (ibvd_frame_close_fd: the client's file, whose
 * close goes to uid's queue).
 */
static int grant_fd(const struct ibvd_mr *mr, uint32_t rights, uid_t uid)
{
	char path[64];
	int fd;

	if (rights & IBV_ACCESS_REMOTE_WRITE) {
		fd = fcntl(mr->map_fd, F_DUPFD_CLOEXEC, 3);
		ibvd_closer_own(fd, uid);
	} else {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", mr->map_fd);
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		ibvd_closer_own(fd, uid);
		/* the client maps it: no reason to keep it non-blocking */
		if (fcntl(fd, F_SETFL, 0) < 0) {
			ibvd_frame_close_fd(fd);
			return -EIO;
		}
	}
	return fd < 0 ? -errno : fd;
}

/*
 * What a grant of mr through peer may do: the remote rights both the MR
 * and the QP give (a responder checks the QP's first), or 0 and why not.
 */
static uint32_t grant_rights(const struct ibvd_call *call,
			     const struct ibvd_qp *peer,
			     const struct ibvd_mr *mr, const char **why)
{
	uint32_t rights;

	if (!mr || mr->pd != peer->pd) {
		*why = "no such MR in the peer's PD";
		return 0;
	}
	rights = mr->access & peer->attr.access & REMOTE_ACCESS;
	/* no responder resources: READs and atomics fail (engine/rdma.c) */
	if (!peer->attr.max_dest_rd_atomic)
		rights &= ~(uint32_t)(IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!rights || !mr->map_fd_kept ||
	    ((rights & IBV_ACCESS_REMOTE_WRITE) && !mr->map_writable)) {
		*why = "no remote access to shared file memory";
		return 0;
	}
	/*
	 * A grant gives the whole file: only to the uid whose process passed
	 * it, whoever shares the context now (an importer of another uid may
	 * have registered the MR and left).
	 */
	if (mr->map_fd_uid != call->session->cred.uid) {
		*why = "another uid's file";
		return 0;
	}
	return rights;
}

int ibvd_req_qp_remote_mr(struct ibvd_call *call)
{
	const Ibvd__QpRemoteMr *req = (const Ibvd__QpRemoteMr *)call->msg;
	Ibvd__QpRemoteMrReply reply = IBVD__QP_REMOTE_MR_REPLY__INIT;
	struct ibvd_qp *qp, *peer;
	const char *why = NULL;
	struct ibvd_mr *mr;
	uint32_t rights, epoch;
	int fd, ret;

	/* Pairs and MRs change on this thread only: no lock to read them. */
	ret = ibvd_direct_call_pair(call, req->handle, &qp, &peer);
	if (ret < 0)
		return ret;
	/*
	 * The epoch before the states: an engine thread that moves either QP
	 * to ERR after we looked voids the leases after, so the grant is
	 * void too (read after, it would carry the voided epoch as valid).
	 */
	epoch = __atomic_load_n(&ibvd_direct_lease(qp->direct,
						   qp->direct_side)->epoch,
				__ATOMIC_SEQ_CST);
	/* as a NIC's responder would take the request (an error voids) */
	if (__atomic_load_n(&qp->state, __ATOMIC_ACQUIRE) != IBV_QPS_RTS ||
	    !state_receives(__atomic_load_n(&peer->state, __ATOMIC_ACQUIRE)))
		return ibvd_call_error(call, -ENOTCONN,
				       "QP %u or its peer %u is not connected",
				       qp->qp_num, peer->qp_num);
	/* Its library's lease lives in the rings' file: it maps them first. */
	if (!qp->direct->map)
		return ibvd_call_error(call, -ENOENT,
				       "QP %u has not mapped its transit rings",
				       qp->qp_num);
	if (qp->direct->lease_broken[qp->direct_side] || qp->ctx->lease_broken ||
	    uid_banned(qp->ctx->session->cred.uid))
		return ibvd_call_error(call, -EPERM,
				       "QP %u's library held its lease too long",
				       qp->qp_num);
	/*
	 * One answer for every refusal: which keys exist in a peer's PD, and
	 * what they give, is not the asker's to learn (another uid's QP may
	 * be the peer), and the engine does what a refused key asks.
	 */
	mr = ibvd_mr_by_rkey(req->rkey);
	rights = grant_rights(call, peer, mr, &why);
	if (!rights) {
		log_debug("QP %u: no grant of key %#x: %s", qp->qp_num,
			  req->rkey, why);
		return ibvd_call_error(call, -EPERM,
				       "key %#x: no direct access through QP %u",
				       req->rkey, qp->qp_num);
	}
	fd = grant_fd(mr, rights, call->session->cred.uid);
	if (fd < 0)
		return ibvd_call_error(call, fd, "MR of key %#x: %s", req->rkey,
				       "cannot open its file again");
	reply.gen = qp->direct->gen;
	reply.epoch = epoch;
	reply.access = (mr->access & ~REMOTE_ACCESS) | rights;
	reply.iova = mr->iova;
	reply.length = mr->length;
	reply.file_offset = mr->map_file_offset;
	reply.map_len = mr->map_len;
	reply.delta = (uint64_t)(mr->map_base - (uint8_t *)mr->map);
	/* from here on, changing the MR or the peer's rights revokes first */
	mr->granted = true;
	qp->direct->granted[qp->direct_side] = true;
	qp->direct->grantee_uid[qp->direct_side] = call->session->cred.uid;
	ret = ibvd_call_reply(call, &reply.base, &fd, 1);
	ibvd_frame_close_fd(fd);
	return ret;
}
