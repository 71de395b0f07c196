/*
 * Device and port attributes of an ibverbsd HCA, software or RoCE, and
 * the query requests that return them.
 *
 * The limits are what the daemon promises to accept; they are modest
 * enough to be enforced (quotas come on top) and large enough for
 * perftest, qperf and rdma-core's tests.  Vendor and part ids lie outside
 * every table in perftest and rdma-core, as rxe's do, so tools take their
 * generic paths.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "context.h"
#include "core/device.h"
#include "core/roce.h"
#include "query.h"
#include "ring.h"
#include "server/call.h"
#include "server/session.h"
#include "util.h"
#include "verbs.h"

#define IBVD_VENDOR_ID		0xffffff
#define IBVD_VENDOR_PART_ID	0
#define IBVD_HW_VER		0
#define IBVD_MAX_QP		65536
#define IBVD_MAX_QP_WR		16384
#define IBVD_MAX_CQ		65536
/*
 * A CQ is one ring of a power of two slots, one kept empty, within the
 * context's ring budget (IBVD_CTX_MAX_RING_BYTES, which the largest ring
 * of IBVD_CQ_MAX_SLOTS would fill whole with its header on top).
 */
#define IBVD_MAX_CQE		(IBVD_CQ_MAX_SLOTS / 2 - 1)
#define IBVD_MAX_MR		262144
#define IBVD_MAX_MW		65536
#define IBVD_MAX_MR_SIZE	(1ull << 40)
#define IBVD_MAX_PD		65536
/*
 * Outstanding READs and atomics per QP, as rxe's: perftest gives a QP the
 * peer's value, and a device refuses more than its own, so a RoCE peer
 * with rxe's 128 needs ours to be as large.
 */
#define IBVD_MAX_QP_RD_ATOM	128
#define IBVD_MAX_SRQ		65536
#define IBVD_MAX_SRQ_WR		16384
#define IBVD_MAX_AH		65536
#define IBVD_MAX_MCAST_GRP	8192
#define IBVD_MAX_MCAST_QP_ATTACH 56
#define IBVD_PAGE_SIZE_CAP	0xfffff000ull	/* 4 KiB .. 2 GiB pages */
#define IBVD_LOCAL_CA_ACK_DELAY	15
#define IBVD_ODP_UD_CAPS	(IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | \
				 IBV_ODP_SUPPORT_SRQ_RECV)
#define IBVD_ODP_UC_CAPS	(IBVD_ODP_UD_CAPS | IBV_ODP_SUPPORT_WRITE)
#define IBVD_ODP_RC_CAPS	(IBVD_ODP_UC_CAPS | IBV_ODP_SUPPORT_READ | \
				 IBV_ODP_SUPPORT_ATOMIC)

/*
 * What the engine implements: memory-window binds, LOCAL_INV and
 * SEND_WITH_INV (engine/mw.c) are MEM_MGT_EXTENSIONS; the ports count
 * Q_Key violations and (RoCE; a soft port has one P_Key and no way to
 * send another) P_Key ones; ibv_modify_srq(IBV_SRQ_MAX_WR) resizes
 * (verbs/srq.c).
 */
#define IBVD_DEVICE_CAP_FLAGS	(IBV_DEVICE_BAD_PKEY_CNTR |		\
				 IBV_DEVICE_BAD_QKEY_CNTR |		\
				 IBV_DEVICE_RC_RNR_NAK_GEN |		\
				 IBV_DEVICE_SHUTDOWN_PORT |		\
				 IBV_DEVICE_SRQ_RESIZE |		\
				 IBV_DEVICE_PORT_ACTIVE_EVENT |		\
				 IBV_DEVICE_SYS_IMAGE_GUID |		\
				 IBV_DEVICE_MEM_WINDOW |		\
				 IBV_DEVICE_MEM_WINDOW_TYPE_2B |	\
				 IBV_DEVICE_MEM_MGT_EXTENSIONS |	\
				 IBV_DEVICE_XRC)

/* Port constants missing from <infiniband/verbs.h> (IB spec values). */
#define IB_PHYS_STATE_POLLING	2
#define IB_PHYS_STATE_DISABLED	3
#define IB_PHYS_STATE_LINK_UP	5
#define IB_WIDTH_4X		2
#define IB_SPEED_EDR		32
#define IB_MAX_VL_NUM_VL0	1
#define IBVD_MAX_MSG_SZ		(1u << 30)

void ibvd_device_attr(const struct ibvd_device *dev, Ibvd__DeviceAttr *attr)
{
	ibvd__device_attr__init(attr);
	attr->fw_ver = (char *)PACKAGE_VERSION;
	attr->node_guid = dev->node_guid;
	attr->sys_image_guid = dev->sys_image_guid;
	attr->max_mr_size = IBVD_MAX_MR_SIZE;
	attr->page_size_cap = IBVD_PAGE_SIZE_CAP;
	attr->vendor_id = IBVD_VENDOR_ID;
	attr->vendor_part_id = IBVD_VENDOR_PART_ID;
	attr->hw_ver = IBVD_HW_VER;
	attr->max_qp = IBVD_MAX_QP;
	attr->max_qp_wr = IBVD_MAX_QP_WR;
	attr->device_cap_flags = IBVD_DEVICE_CAP_FLAGS;
	attr->max_sge = IBVD_MAX_SGE;
	attr->max_sge_rd = IBVD_MAX_SGE;
	attr->max_cq = IBVD_MAX_CQ;
	attr->max_cqe = IBVD_MAX_CQE;
	attr->max_mr = IBVD_MAX_MR;
	attr->max_mw = IBVD_MAX_MW;
	attr->max_pd = IBVD_MAX_PD;
	attr->max_qp_rd_atom = IBVD_MAX_QP_RD_ATOM;
	attr->max_qp_init_rd_atom = IBVD_MAX_QP_RD_ATOM;
	attr->max_res_rd_atom = IBVD_MAX_QP_RD_ATOM * IBVD_MAX_QP;
	/* Atomic among the engine's own operations (engine/rdma.c). */
	attr->atomic_cap = IBV_ATOMIC_HCA;
	attr->max_mcast_grp = IBVD_MAX_MCAST_GRP;
	attr->max_mcast_qp_attach = IBVD_MAX_MCAST_QP_ATTACH;
	attr->max_total_mcast_qp_attach =
		IBVD_MAX_MCAST_GRP * IBVD_MAX_MCAST_QP_ATTACH;
	attr->max_ah = IBVD_MAX_AH;
	attr->max_srq = IBVD_MAX_SRQ;
	attr->max_srq_wr = IBVD_MAX_SRQ_WR;
	attr->max_srq_sge = IBVD_MAX_SGE;
	attr->max_pkeys = IBVD_PKEY_TBL_LEN;
	attr->local_ca_ack_delay = IBVD_LOCAL_CA_ACK_DELAY;
	attr->phys_port_cnt = dev->nports;
	attr->device_cap_flags_ex = IBVD_DEVICE_CAP_FLAGS;
	/*
	 * On-demand paging is how the engine always reaches memory (mr.c):
	 * every operation of every transport, and implicit MRs.
	 */
	attr->odp_general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
	attr->odp_rc_caps = IBVD_ODP_RC_CAPS;
	attr->odp_uc_caps = IBVD_ODP_UC_CAPS;
	attr->odp_ud_caps = IBVD_ODP_UD_CAPS;
	/*
	 * The engine stamps each CQE with CLOCK_MONOTONIC in ns (ring.h): a
	 * 64-bit "HCA clock" of 1 GHz, which hca_core_clock gives in kHz.
	 */
	attr->completion_timestamp_mask = UINT64_MAX;
	attr->hca_core_clock = 1000000;
	/* per allocation; device memory is the client's own (client/dm.c) */
	attr->max_dm_size = IBVD_MAX_DM_SIZE;
	/* EE, RDD, MW, FMR, raw QPs: all zero. */
}

/* What a software port and a RoCE port have in common. */
static void port_attr_common(const struct ibvd_device *dev, Ibvd__PortAttr *attr)
{
	ibvd__port_attr__init(attr);
	attr->max_mtu = IBV_MTU_4096;
	attr->gid_tbl_len = (int32_t)ibvd_device_gid_tbl_len(dev);
	/* no subnet manager, no SM agent: the CM is all a port offers */
	attr->port_cap_flags = IBV_PORT_CM_SUP;
	attr->max_msg_sz = IBVD_MAX_MSG_SZ;
	attr->pkey_tbl_len = IBVD_PKEY_TBL_LEN;
	attr->sm_lid = 0;
	attr->lmc = 0;
	attr->max_vl_num = IB_MAX_VL_NUM_VL0;
}

/*
 * A RoCE port is its interface, as rxe's: ACTIVE while the interface is up
 * with a carrier (physically POLLING when only the carrier is missing),
 * the largest IB MTU that fits the interface's, speed and width from its
 * link speed, LID 0.
 */
static void roce_port_attr(const struct ibvd_netdev *nd, Ibvd__PortAttr *attr)
{
	uint8_t speed, width;

	attr->state = nd->up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
	attr->phys_state = nd->up ? IB_PHYS_STATE_LINK_UP :
			   nd->admin_up ? IB_PHYS_STATE_POLLING :
			   IB_PHYS_STATE_DISABLED;
	attr->active_mtu = ibvd_roce_mtu(nd->mtu);
	ibvd_roce_speed(nd->speed_mbps, &speed, &width);
	attr->active_speed = speed;
	attr->active_width = width;
	attr->lid = 0;
	attr->link_layer = IBV_LINK_LAYER_ETHERNET;
}

static uint32_t saturated32(uint64_t v)
{
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

void ibvd_port_attr(const struct ibvd_device *dev, const struct ibvd_port *port,
		    Ibvd__PortAttr *attr)
{
	port_attr_common(dev, attr);
	attr->qkey_viol_cntr = saturated32(
		__atomic_load_n(&port->qkey_violations, __ATOMIC_RELAXED));
	if (dev->kind == IBVD_DEV_ROCE) {
		roce_port_attr(&dev->roce.netdev, attr);
		attr->bad_pkey_cntr = saturated32(
			__atomic_load_n(&dev->roce.dropped_bad_pkey, __ATOMIC_RELAXED));
		return;
	}
	attr->state = IBV_PORT_ACTIVE;
	attr->active_mtu = IBV_MTU_4096;
	attr->lid = port->lid;
	attr->active_width = IB_WIDTH_4X;
	attr->active_speed = IB_SPEED_EDR;
	attr->phys_state = IB_PHYS_STATE_LINK_UP;
	attr->link_layer = IBV_LINK_LAYER_INFINIBAND;
}

static struct ibvd_device *call_device(const struct ibvd_call *call)
{
	/* The request table admits queries only on a context. */
	return call->session->ctx->dev;
}

/* The port a request names, or NULL after recording an EINVAL message. */
static const struct ibvd_port *call_port(struct ibvd_call *call,
					 uint32_t port_num)
{
	const struct ibvd_device *dev = call_device(call);
	const struct ibvd_port *port = ibvd_device_port(dev, port_num);

	if (!port)
		ibvd_call_error(call, -EINVAL, "%s has no port %u",
				dev->name, port_num);
	return port;
}

int ibvd_req_query_device(struct ibvd_call *call)
{
	Ibvd__DeviceAttr attr;

	ibvd_device_attr(call_device(call), &attr);
	return ibvd_call_reply(call, &attr.base, NULL, 0);
}

int ibvd_req_query_port(struct ibvd_call *call)
{
	const Ibvd__QueryPort *req = (const Ibvd__QueryPort *)call->msg;
	const struct ibvd_port *port = call_port(call, req->port_num);
	Ibvd__PortAttr attr;

	if (!port)
		return -EINVAL;
	ibvd_port_attr(call_device(call), port, &attr);
	return ibvd_call_reply(call, &attr.base, NULL, 0);
}

/* The message form of a table's non-empty slots; -ENOMEM. */
struct gid_reply {
	Ibvd__GidTable table;
	struct ibvd_gid *gids;
	Ibvd__GidEntry *entries;
	Ibvd__GidEntry **ptrs;
};

static int gid_reply_build(const struct ibvd_device *dev,
			   const struct ibvd_port *port, struct gid_reply *r)
{
	unsigned int len = ibvd_device_gid_tbl_len(dev), i, n, used = 0;

	r->gids = calloc(len, sizeof(*r->gids));
	r->entries = calloc(len, sizeof(*r->entries));
	r->ptrs = calloc(len, sizeof(*r->ptrs));
	if (!r->gids || !r->entries || !r->ptrs)
		return -ENOMEM;
	n = ibvd_device_gids(dev, port, r->gids);
	for (i = 0; i < n; i++) {
		Ibvd__GidEntry *e = &r->entries[used];

		if (ibvd_gid_empty(&r->gids[i]))
			continue;
		ibvd__gid_entry__init(e);
		e->index = i;
		e->gid.data = r->gids[i].raw;
		e->gid.len = sizeof(r->gids[i].raw);
		e->gid_type = r->gids[i].type;
		e->ndev_ifindex = r->gids[i].ifindex;
		r->ptrs[used++] = e;
	}
	ibvd__gid_table__init(&r->table);
	r->table.port_num = port->num;
	r->table.gid_tbl_len = len;
	r->table.n_entries = used;
	r->table.entries = r->ptrs;
	return 0;
}

static void gid_reply_free(struct gid_reply *r)
{
	free(r->gids);
	free(r->entries);
	free(r->ptrs);
}

int ibvd_req_query_gid_table(struct ibvd_call *call)
{
	const Ibvd__QueryGidTable *req = (const Ibvd__QueryGidTable *)call->msg;
	const struct ibvd_port *port = call_port(call, req->port_num);
	struct gid_reply r = { .gids = NULL };
	int ret;

	if (!port)
		return -EINVAL;
	ret = gid_reply_build(call_device(call), port, &r);
	if (ret == 0)
		ret = ibvd_call_reply(call, &r.table.base, NULL, 0);
	gid_reply_free(&r);
	return ret;
}

int ibvd_req_query_pkey(struct ibvd_call *call)
{
	const Ibvd__QueryPkey *req = (const Ibvd__QueryPkey *)call->msg;
	const struct ibvd_port *port = call_port(call, req->port_num);
	Ibvd__Pkey pkey = IBVD__PKEY__INIT;

	if (!port)
		return -EINVAL;
	if (req->index >= IBVD_PKEY_TBL_LEN)
		return ibvd_call_error(call, -EINVAL, "P_Key index %u out of range (table has %d)",
				       req->index, IBVD_PKEY_TBL_LEN);
	pkey.pkey = IBVD_DEFAULT_PKEY;
	return ibvd_call_reply(call, &pkey.base, NULL, 0);
}

void ibvd_device_info(const struct ibvd_device *dev, Ibvd__DeviceInfo *info)
{
	ibvd__device_info__init(info);
	info->name = (char *)dev->name;
	info->node_guid = dev->node_guid;
	info->node_type = IBV_NODE_CA;
	info->transport_type = IBV_TRANSPORT_IB;
	info->index = dev->ifindex;
	info->phys_port_cnt = dev->nports;
}


/* ---- LIST_DEVICES ----------------------------------------------------- */

int ibvd_req_list_devices(struct ibvd_call *call)
{
	struct ibvd_daemon *d = ibvd_call_daemon(call);
	Ibvd__ListDevicesReply reply = IBVD__LIST_DEVICES_REPLY__INIT;
	Ibvd__DeviceInfo infos[IBVD_MAX_DEVICES];
	Ibvd__DeviceInfo *ptrs[IBVD_MAX_DEVICES];
	struct ibvd_device *dev;
	size_t n = 0;

	TAILQ_FOREACH(dev, &d->devices, link) {
		if (n == ARRAY_SIZE(infos))
			break;
		ibvd_device_info(dev, &infos[n]);
		ptrs[n] = &infos[n];
		n++;
	}
	reply.n_devices = n;
	reply.devices = ptrs;
	reply.memlock_enforced = d->cfg->rlimit_memlock_enforce;
	return ibvd_call_reply(call, &reply.base, NULL, 0);
}
