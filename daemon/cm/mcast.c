/*
 * Multicast joins (rdma_join_multicast/_ex, rdma_leave_multicast).
 *
 * The daemon is the subnet's SA here: a group is (port space, IP multicast
 * address, fabric), its MGID derived from the address (ff12:401b:ffff::/96
 * plus the IPv4 address; an IPv6 or AF_IB multicast address as it is), its
 * MLID a hash of the MGID in the multicast LID range, its Q_Key the first
 * joiner's.  On a RoCE device, as the kernel's rdma_cm makes it for
 * RoCEv2, the MGID is the IP address itself (::ffff:a.b.c.d for IPv4),
 * the MLID 0, the Q_Key RDMA_UDP_QKEY's (every UDP id's), and the address
 * vector a GRH from the id's source GID: what the group's members on
 * other hosts, rxe's among them, send to and take.  IPv6 groups too,
 * which the kernel refuses on RoCEv2 (ENOTSUPP): between ibverbsd hosts
 * they work the same way, over MLD.
 * Joining only answers where the group is; the library then attaches the
 * id's QP with ibv_attach_mcast, which is what makes packets flow.  As
 * the kernel's, a group takes any number of joins: each uid's are bounded
 * by its mcast_join limit, and what a group holds of QPs by the
 * attachments (verbs/mcast.c).
 */
#include <config.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/objects.h"
#include "internal.h"
#include "server/call.h"
#include "server/session.h"

#define MLID_FIRST	0xC001u
#define MLID_LAST	0xFFFEu

struct cm_group {
	LIST_ENTRY(cm_group) link;	/* cm_world.groups */
	uint32_t ps;
	bool roce;			/* an IP multicast group on a network */
	struct sockaddr_storage addr;
	uint8_t mgid[16];
	uint16_t mlid;
	uint32_t qkey;
	unsigned int njoins;		/* every join, send-only too */
};

struct cm_join {
	LIST_ENTRY(cm_join) link;	/* id->joins */
	struct cm_group *group;
};

static void derive_mgid(const struct sockaddr_storage *ss, bool roce,
			uint8_t mgid[16])
{
	static const uint8_t v4_prefix[12] = {
		0xff, 0x12, 0x40, 0x1b, 0xff, 0xff,	/* scope 2, IPv4 sig, pkey */
	};

	/*
	 * IPv6, or an AF_IB (unmapped) group, or any on RoCE: the address is
	 * the MGID.
	 */
	if (roce || ss->ss_family == AF_INET6 || ss->ss_family == AF_IB) {
		cm_addr_to_gid(ss, mgid);
		return;
	}
	memcpy(mgid, v4_prefix, sizeof(v4_prefix));
	memcpy(mgid + 12, &((const struct sockaddr_in *)(const void *)ss)->sin_addr,
	       4);
}

/* FNV-1a of the MGID: every joiner of a group computes the same MLID. */
static uint16_t derive_mlid(const uint8_t mgid[16])
{
	uint32_t h = 2166136261u;
	int i;

	for (i = 0; i < 16; i++) {
		h ^= mgid[i];
		h *= 16777619u;
	}
	return (uint16_t)(MLID_FIRST + h % (MLID_LAST - MLID_FIRST + 1));
}

static struct cm_group *group_find(uint32_t ps, bool roce,
				   const struct sockaddr_storage *ss)
{
	struct cm_group *g;

	LIST_FOREACH(g, &cm_world.groups, link)
		if (g->ps == ps && g->roce == roce && cm_addr_equal(&g->addr, ss))
			return g;
	return NULL;
}

static int group_get(const struct ibvd_cm_id *id,
		     const struct sockaddr_storage *ss, struct cm_group **ret)
{
	bool roce = cm_dev_is_roce(id->dev);
	struct cm_group *g = group_find(id->ps, roce, ss);

	if (g) {
		*ret = g;
		return 0;
	}
	if (cm_world.ngroups >= CM_MAX_GROUPS)
		return -ENOMEM;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->ps = id->ps;
	g->roce = roce;
	g->addr = *ss;
	cm_addr_set_port(&g->addr, 0);
	derive_mgid(ss, roce, g->mgid);
	g->mlid = roce ? 0 : derive_mlid(g->mgid);
	g->qkey = id->qkey;
	LIST_INSERT_HEAD(&cm_world.groups, g, link);
	cm_world.ngroups++;
	*ret = g;
	return 0;
}

static void group_put(struct cm_group *g)
{
	if (g->njoins)
		return;
	LIST_REMOVE(g, link);
	cm_world.ngroups--;
	free(g);
}

static struct cm_join *join_find(const struct ibvd_cm_id *id,
				 const struct sockaddr_storage *ss)
{
	struct cm_join *j;

	LIST_FOREACH(j, &id->joins, link)
		if (cm_addr_equal(&j->group->addr, ss))
			return j;
	return NULL;
}

/* Joins count against the owner's uid: groups are the daemon's to share. */
static struct ibvd_tenant *tenant_of(const struct ibvd_cm_id *id)
{
	return id->cm->session->tenant;
}

static void join_free(struct ibvd_cm_id *id, struct cm_join *j)
{
	ibvd_tenant_uncharge(tenant_of(id), IBVD_LIMIT_MCAST_JOIN, 1);
	LIST_REMOVE(j, link);
	id->njoins--;
	j->group->njoins--;
	group_put(j->group);
	free(j);
}

void cm_mcast_leave_all(struct ibvd_cm_id *id)
{
	struct cm_join *j;

	while ((j = LIST_FIRST(&id->joins)))
		join_free(id, j);
}

/* Check the id and the address of a join; 0 or a negative errno. */
static int join_check(struct ibvd_call *call, const struct ibvd_cm_id *id,
		      const Ibvd__CmMcast *req, struct sockaddr_storage *ss)
{
	int ret;

	if (!cm_is_ud(id))
		return ibvd_call_error(call, -EINVAL, "multicast needs a UD id");
	if (!id->dev || (id->state != CM_ADDR_BOUND &&
			 id->state != CM_ADDR_RESOLVED))
		return ibvd_call_error(call, -EINVAL,
				       "the id is not bound to a device");
	if (req->join_flags != RDMA_MC_JOIN_FLAG_FULLMEMBER &&
	    req->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		return ibvd_call_error(call, -EINVAL, "bad join flags %#x",
				       req->join_flags);
	ret = cm_addr_parse(call, &req->addr, "multicast", ss);
	if (ret < 0)
		return ret;
	if (!cm_addr_is_multicast(ss))
		return ibvd_call_error(call, -EINVAL, "not a multicast address");
	/* A RoCE member sends from its source's GID, of the group's family. */
	if (cm_dev_is_roce(id->dev) && !cm_addr_is_any(&id->src) &&
	    id->src.ss_family != ss->ss_family)
		return ibvd_call_error(call, -EINVAL,
				       "a group of another family than the id's address");
	if (id->njoins >= CM_MAX_JOINS_PER_ID)
		return ibvd_call_error(call, -ENOMEM, "too many groups on one id");
	return 0;
}

/*
 * RoCE: the GID a member sends from, the id's source address's; an id
 * bound to no address takes the first GID of the group's family.
 */
static uint32_t source_gid_index(const struct ibvd_cm_id *id,
				 const uint8_t mgid[16])
{
	uint8_t gid[16];
	int index;

	cm_addr_to_gid(&id->src, gid);
	index = cm_addr_is_any(&id->src) ? -1 : cm_gid_index(id, gid);
	if (index < 0)
		index = cm_gid_index_of_family(id, cm_gid_family(mgid));
	return index < 0 ? 0 : (uint32_t)index;
}

static void send_join(struct ibvd_cm_id *id, const struct cm_group *g,
		      uint64_t user)
{
	Ibvd__CmUdParam ud = IBVD__CM_UD_PARAM__INIT;
	Ibvd__AhAttr ah = IBVD__AH_ATTR__INIT;
	struct cm_event ev = {
		.event = RDMA_CM_EVENT_MULTICAST_JOIN,
		.ud = &ud,
		.mcast_user = user,
	};

	ah.dlid = g->mlid;
	ah.port_num = id->port_num;
	ah.is_global = true;
	ah.dgid.data = (uint8_t *)g->mgid;
	ah.dgid.len = sizeof(g->mgid);
	ah.hop_limit = CM_GRH_HOP_LIMIT;
	ah.traffic_class = id->tos;
	if (g->roce)
		ah.sgid_index = source_gid_index(id, g->mgid);
	ud.ah_attr = &ah;
	ud.qp_num = IBVD_MCAST_QPN;
	ud.qkey = g->qkey;
	cm_event_send(id, &ev);
}

int ibvd_req_cm_join_mcast(struct ibvd_call *call)
{
	const Ibvd__CmMcast *req = (const Ibvd__CmMcast *)call->msg;
	struct ibvd_cm_id *id = cm_id_get(call, req->id);
	struct sockaddr_storage ss;
	struct cm_group *g;
	struct cm_join *j;
	int ret;

	if (!id)
		return -EINVAL;
	ret = join_check(call, id, req, &ss);
	if (ret < 0)
		return ret;
	ret = ibvd_tenant_charge(tenant_of(id), IBVD_LIMIT_MCAST_JOIN, 1,
				 "joining a multicast group");
	if (ret < 0)
		return ibvd_call_error(call, ret, "over the mcast_join limit of uid %u",
				       (unsigned int)tenant_of(id)->uid);
	ret = group_get(id, &ss, &g);
	if (ret < 0) {
		ibvd_call_error(call, ret, "too many multicast groups");
		goto uncharge;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		group_put(g);
		ret = -ENOMEM;
		goto uncharge;
	}
	j->group = g;
	g->njoins++;
	LIST_INSERT_HEAD(&id->joins, j, link);
	id->njoins++;
	ret = ibvd_call_reply(call, NULL, NULL, 0);
	if (ret == 0)
		send_join(id, g, req->user);
	return ret;
uncharge:
	ibvd_tenant_uncharge(tenant_of(id), IBVD_LIMIT_MCAST_JOIN, 1);
	return ret;
}

int ibvd_req_cm_leave_mcast(struct ibvd_call *call)
{
	const Ibvd__CmMcast *req = (const Ibvd__CmMcast *)call->msg;
	struct ibvd_cm_id *id = cm_id_get(call, req->id);
	struct sockaddr_storage ss;
	struct cm_join *j;
	int ret;

	if (!id)
		return -EINVAL;
	ret = cm_addr_parse(call, &req->addr, "multicast", &ss);
	if (ret < 0)
		return ret;
	j = join_find(id, &ss);
	if (!j)
		return ibvd_call_error(call, -EADDRNOTAVAIL, "not joined to that group");
	join_free(id, j);
	return 0;
}
