/*
 * Multicast: ATTACH_MCAST, DETACH_MCAST.
 *
 * Groups are daemon-wide by MGID (core/registry.c) and exist while they have
 * members; the engine fans a UD send to IBVD_MCAST_QPN out to every member
 * on the sender's device (objects.h).  On a RoCE device a group is an IP
 * multicast address, which its transport has the netdev take while a QP
 * of the device is attached (transport/roce/mcast.c).  As the kernel
 * checks: UD QPs only; on an InfiniBand (software) port an MGID in
 * ff00::/8 or an IPv4 group's (::ffff:224.0.0.0/4) and an MLID in the
 * multicast range, on an Ethernet (RoCE) one an IP multicast address as
 * the MGID and any MLID (the kernel ignores it there).  An attachment is
 * an (MGID, MLID) pair, as the kernel's uverbs keeps them: attaching a
 * pair the QP has succeeds and changes nothing (ibv_attach_mcast(3) asks
 * for no error); the same MGID with another MLID adds that pair to the
 * membership; detaching a pair the QP does not have is EINVAL and changes
 * nothing; detaching one it has takes the QP out of the group, whatever
 * other MLIDs it named it with (the kernel's devices key on the MGID
 * alone, and so does the engine).
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "context.h"
#include "core/device.h"
#include "core/roce.h"
#include "engine/transport.h"
#include "ibverbsd.pb-c.h"
#include "server/call.h"
#include "tenant/tenant.h"
#include "verbs.h"

#define MLID_MIN	0xC000u
#define MLID_MAX	0xFFFEu		/* 0xFFFF is the permissive LID */

/* The UD QP and MGID a request names, checked. */
static int mcast_args(struct ibvd_call *call, const Ibvd__Mcast *req,
		      struct ibvd_qp **qp)
{
	struct ibvd_context *ctx = ibvd_call_ctx(call);

	*qp = ibvd_handle_lookup(&ctx->handles, req->qp, IBVD_OBJ_QP);
	if (!*qp)
		return ibvd_call_error(call, -EINVAL, "no QP %#x", req->qp);
	if ((*qp)->qp_type != IBV_QPT_UD)
		return ibvd_call_error(call, -EINVAL, "only UD QPs join multicast groups");
	if (req->gid.len != 16)
		return ibvd_call_error(call, -EINVAL, "not a GID");
	/* the transport's join checks the address (wire_join) */
	if (ctx->dev->kind == IBVD_DEV_ROCE)
		return 0;
	/* an IPv4 group's GID too, as the kernel's rdma_is_multicast_addr */
	if (!ibvd_gid_is_multicast(req->gid.data))
		return ibvd_call_error(call, -EINVAL, "not a multicast GID");
	if (req->lid < MLID_MIN || req->lid > MLID_MAX)
		return ibvd_call_error(call, -EINVAL, "not a multicast LID: %#x",
				       req->lid);
	return 0;
}

static struct ibvd_mcast_member *member_of(struct ibvd_qp *qp,
					   const uint8_t mgid[16])
{
	struct ibvd_mcast_member *m;

	LIST_FOREACH(m, &qp->mcast, qp_link)
		if (!memcmp(m->mgid, mgid, 16))
			return m;
	return NULL;
}

static bool has_mlid(const struct ibvd_mcast_member *m, uint16_t mlid)
{
	unsigned int i;

	for (i = 0; i < m->nmlids; i++)
		if (m->mlids[i] == mlid)
			return true;
	return false;
}

/*
 * Another MLID for a membership; the objects lock is held for writing.
 * It is one more attachment, against the context's cap as the first.
 */
static int add_mlid(struct ibvd_call *call, struct ibvd_mcast_member *m,
		    uint16_t mlid)
{
	struct ibvd_context *ctx = m->qp->ctx;
	uint16_t *mlids;

	if (ctx->objs.mcast_members >= IBVD_CTX_MAX_MCAST)
		return ibvd_call_error(call, -ENOMEM, "too many attachments");
	mlids = realloc(m->mlids, (m->nmlids + 1) * sizeof(*mlids));
	if (!mlids)
		return ibvd_call_error(call, -ENOMEM, "no memory");
	mlids[m->nmlids++] = mlid;
	m->mlids = mlids;
	ctx->objs.mcast_members++;
	return 0;
}

/*
 * Attachments count against the uid's mcast_attach limit: groups are the
 * daemon's (max_mcast_grp is daemon-wide), not one tenant's to fill.
 */
static struct ibvd_tenant_dev *account_of(const struct ibvd_context *ctx)
{
	return ctx->handles.charge_owner;
}

/*
 * ctx's uid's QPs in grp on ctx's device: max_mcast_qp_attach bounds what
 * a group holds of each uid's, as if each had the device to itself, so
 * that one uid cannot fill a group for the others.
 */
static unsigned int tenant_members(const struct ibvd_mcast_group *grp,
				   const struct ibvd_context *ctx)
{
	const struct ibvd_mcast_member *m;
	unsigned int n = 0;

	LIST_FOREACH(m, &grp->members, group_link)
		n += account_of(m->qp->ctx) == account_of(ctx);
	return n;
}

/* Join; the objects lock is held for writing. */
static int join(struct ibvd_call *call, struct ibvd_qp *qp,
		const uint8_t mgid[16], uint16_t mlid)
{
	struct ibvd_context *ctx = qp->ctx;
	struct ibvd_mcast_group *grp;
	struct ibvd_mcast_member *m;
	struct ibvd_limits lim;
	int ret;

	if (member_of(qp, mgid))
		return 0;
	if (ctx->objs.mcast_members >= IBVD_CTX_MAX_MCAST)
		return ibvd_call_error(call, -ENOMEM, "too many attachments");
	ibvd_ctx_limits(ctx, &lim);
	ret = ibvd_mcast_group_get(mgid, lim.max_mcast_grp, &grp);
	if (ret < 0)
		return ibvd_call_error(call, ret, "too many multicast groups");
	m = tenant_members(grp, ctx) < lim.max_mcast_qp_attach ?
	    calloc(1, sizeof(*m)) : NULL;
	if (m)
		m->mlids = malloc(sizeof(*m->mlids));
	if (!m || !m->mlids) {
		free(m);
		ibvd_mcast_group_put(grp);
		return ibvd_call_error(call, -ENOMEM, "the group is full");
	}
	m->qp = qp;
	memcpy(m->mgid, mgid, 16);
	m->mlids[0] = mlid;
	m->nmlids = 1;
	m->group = grp;
	LIST_INSERT_HEAD(&grp->members, m, group_link);
	LIST_INSERT_HEAD(&qp->mcast, m, qp_link);
	grp->nmembers++;
	ctx->objs.mcast_members++;
	return 0;
}


/*
 * The device of qp takes the group's datagrams from its network, if it
 * has one; on the control thread, before the QP is a member.
 */
static int wire_join(struct ibvd_call *call, struct ibvd_qp *qp,
		     const uint8_t mgid[16])
{
	struct ibvd_device *dev = qp->ctx->dev;
	int ret;

	if (!dev->transport || !dev->transport->mcast_join)
		return 0;
	ret = dev->transport->mcast_join(dev, mgid);
	if (ret == -EINVAL)
		return ibvd_call_error(call, ret, "not a multicast GID on %s "
				       "(an IPv4 224/4 address as ::ffff:a.b.c.d, "
				       "or IPv6 ff00::/8)", dev->name);
	if (ret < 0)
		return ibvd_call_error(call, ret, "%s cannot take the group",
				       dev->name);
	return 0;
}

/*
 * A membership the device is to end on its network: after the objects
 * lock is let go, as the kernel may take its time over it (RTNL) and the
 * engine threads wait for the lock meanwhile.
 */
struct wire_left {
	struct ibvd_device *dev;
	uint8_t mgid[16];
};

static void wire_leave(const struct wire_left *w)
{
	struct ibvd_device *dev = w->dev;

	if (dev->transport && dev->transport->mcast_leave)
		dev->transport->mcast_leave(dev, w->mgid);
}

/*
 * Leave; the objects lock is held for writing.  *w (NULL: now, under the
 * lock) gets what the device still has to leave.
 */
static void leave(struct ibvd_mcast_member *m, struct wire_left *w)
{
	struct ibvd_mcast_group *grp = m->group;
	struct wire_left now = { .dev = m->qp->ctx->dev };

	memcpy(now.mgid, m->mgid, 16);
	if (w)
		*w = now;
	else
		wire_leave(&now);
	if (account_of(m->qp->ctx))
		ibvd_tenant_dev_uncharge(account_of(m->qp->ctx),
					 IBVD_LIMIT_MCAST_ATTACH, m->nmlids);

	LIST_REMOVE(m, group_link);
	LIST_REMOVE(m, qp_link);
	grp->nmembers--;
	m->qp->ctx->objs.mcast_members -= m->nmlids;
	ibvd_mcast_group_put(grp);
	free(m->mlids);
	free(m);
}

void ibvd_mcast_detach_all(struct ibvd_qp *qp)
{
	struct ibvd_mcast_member *m;

	while ((m = LIST_FIRST(&qp->mcast)))
		leave(m, NULL);
}

struct ctx_leaving {
	struct wire_left *left;
	unsigned int n, cap;
};

static int detach_qp(uint32_t handle, enum ibvd_obj_kind kind, void *obj,
		     void *arg)
{
	struct ctx_leaving *l = arg;
	struct ibvd_qp *qp = obj;
	struct ibvd_mcast_member *m;

	(void)handle;
	(void)kind;
	while ((m = LIST_FIRST(&qp->mcast)) && l->n < l->cap)
		leave(m, &l->left[l->n++]);
	return 0;
}

void ibvd_mcast_detach_ctx(struct ibvd_context *ctx)
{
	struct ctx_leaving l = { .cap = ctx->objs.mcast_members };
	unsigned int i;

	if (!l.cap)
		return;
	/* Without the memory, ibvd_qp_destroy leaves them under the lock. */
	l.left = calloc(l.cap, sizeof(*l.left));
	if (!l.left)
		return;
	ibvd_objects_write_lock();
	ibvd_handle_foreach(&ctx->handles, IBVD_OBJ_QP, detach_qp, &l);
	ibvd_objects_write_unlock();
	for (i = 0; i < l.n; i++)
		wire_leave(&l.left[i]);
	free(l.left);
}

int ibvd_req_attach_mcast(struct ibvd_call *call)
{
	const Ibvd__Mcast *req = (const Ibvd__Mcast *)call->msg;
	struct ibvd_mcast_member *m;
	struct ibvd_tenant_dev *account;
	struct ibvd_qp *qp;
	int ret;

	ret = mcast_args(call, req, &qp);
	if (ret < 0)
		return ret;
	/* attaching twice changes nothing, and charges nothing */
	m = member_of(qp, req->gid.data);
	if (m && has_mlid(m, (uint16_t)req->lid))
		return 0;
	account = account_of(qp->ctx);
	if (account) {
		ret = ibvd_tenant_dev_charge(account, IBVD_LIMIT_MCAST_ATTACH, 1,
					     "attaching a QP to a multicast group");
		if (ret < 0)
			return ibvd_call_error(call, ret,
					       "over the mcast_attach limit of uid %u",
					       (unsigned int)account->tenant->uid);
	}
	/* The QP is in the group already: one more name for its membership. */
	if (m) {
		ibvd_objects_write_lock();
		ret = add_mlid(call, m, (uint16_t)req->lid);
		ibvd_objects_write_unlock();
		goto uncharge;
	}
	ret = wire_join(call, qp, req->gid.data);
	if (ret < 0)
		goto uncharge;
	ibvd_objects_write_lock();
	ret = join(call, qp, req->gid.data, (uint16_t)req->lid);
	ibvd_objects_write_unlock();
	if (ret < 0) {
		struct wire_left w = { .dev = qp->ctx->dev };

		memcpy(w.mgid, req->gid.data, 16);
		wire_leave(&w);
	}
uncharge:
	if (ret < 0 && account)
		ibvd_tenant_dev_uncharge(account, IBVD_LIMIT_MCAST_ATTACH, 1);
	return ret;
}

int ibvd_req_detach_mcast(struct ibvd_call *call)
{
	const Ibvd__Mcast *req = (const Ibvd__Mcast *)call->msg;
	struct ibvd_mcast_member *m;
	struct wire_left w;
	struct ibvd_qp *qp;
	int ret;

	ret = mcast_args(call, req, &qp);
	if (ret < 0)
		return ret;
	m = member_of(qp, req->gid.data);
	if (!m)
		return ibvd_call_error(call, -EINVAL, "the QP is not in that group");
	if (!has_mlid(m, (uint16_t)req->lid))
		return ibvd_call_error(call, -EINVAL, "the QP is in that group, "
				       "but not attached with MLID %#x",
				       (unsigned int)req->lid);
	ibvd_objects_write_lock();
	leave(m, &w);
	ibvd_objects_write_unlock();
	wire_leave(&w);
	return 0;
}
