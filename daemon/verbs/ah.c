/*
 * Address handles: CREATE_AH, DESTROY_AH, and the address-vector checks
 * MODIFY_QP shares.  The client copies an AH's vector into each UD WQE
 * (ring.h's struct ibvd_av), so the engine never looks AHs up; the daemon
 * keeps the vector it validated for ibvctl and for symmetry.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "core/device.h"
#include "core/roce.h"
#include "ibverbsd.pb-c.h"
#include "server/call.h"
#include "verbs.h"

#define LID_MULTICAST_MIN	0xC000u
#define LID_PERMISSIVE		0xFFFFu
#define FLOW_LABEL_MAX		0xFFFFFu
#define SL_MAX			15u

static int check_grh(struct ibvd_call *call, const struct ibvd_device *dev,
		     const Ibvd__AhAttr *m, const struct ibvd_port *port)
{
	struct ibvd_gid gid;

	if (m->dgid.len != 16)
		return ibvd_call_error(call, -EINVAL, "dgid must be 16 bytes");
	/*
	 * The flow label is not checked: ibv_global_route's is 32 bits, the
	 * kernel takes any, and the wire carries the low 20 (UCX passes
	 * 0xffffffff).  The other two are 8 bits in the ABI.
	 */
	if (m->hop_limit > 0xff || m->traffic_class > 0xff)
		return ibvd_call_error(call, -EINVAL,
				       "GRH out of range: hop limit %u, "
				       "traffic class %u", m->hop_limit,
				       m->traffic_class);
	/* an AV holds 8 bits of it, as ibv_global_route's uint8_t */
	if (m->sgid_index > 0xff)
		return ibvd_call_error(call, -EINVAL, "GID index %u above 255",
				       m->sgid_index);
	/*
	 * The source GID must exist: the engine puts it in the GRH it sends.
	 * An empty slot of the table is ENODATA, one past it EINVAL, as the
	 * kernel's rdma_get_gid_attr says.
	 */
	if (ibvd_device_gid(dev, port, m->sgid_index, &gid) < 0)
		return ibvd_call_error(call, m->sgid_index <
					     ibvd_device_gid_tbl_len(dev) ?
					     -ENODATA : -EINVAL,
				       "no GID %u on port %u", m->sgid_index,
				       port->num);
	return 0;
}

static int check_dlid(struct ibvd_call *call, const Ibvd__AhAttr *m,
		      bool connected)
{
	if (m->dlid > 0xffff || m->dlid == LID_PERMISSIVE)
		return ibvd_call_error(call, -EINVAL, "bad DLID %#x", m->dlid);
	/* Without a LID, the GID is the route (transport/local.c routes so). */
	if (m->dlid == 0 && !m->is_global)
		return ibvd_call_error(call, -EINVAL, "no DLID and no GRH");
	if (m->dlid >= LID_MULTICAST_MIN && (connected || !m->is_global))
		return ibvd_call_error(call, -EINVAL,
				       "multicast DLID %#x %s", m->dlid,
				       connected ? "on a connected QP" : "without a GRH");
	return 0;
}

/*
 * An Ethernet (RoCE) port's vector, as the kernel takes one for rxe
 * (rdma_check_ah_attr, ib_resolve_eth_dmac): the GRH is the address, so
 * there must be one; a DLID means nothing; the source GID and the
 * destination must be of one IP family, or no route joins them.
 */
static int check_roce(struct ibvd_call *call, const struct ibvd_device *dev,
		      const Ibvd__AhAttr *m, const struct ibvd_port *port)
{
	struct ibvd_gid sgid;
	int ret;

	if (!m->is_global)
		return ibvd_call_error(call, -EINVAL,
				       "a RoCE address vector needs a GRH");
	ret = check_grh(call, dev, m, port);
	if (ret < 0)
		return ret;
	ibvd_device_gid(dev, port, m->sgid_index, &sgid);
	if (ibvd_gid_is_v4(sgid.raw) != ibvd_gid_is_v4(m->dgid.data))
		return ibvd_call_error(call, -EINVAL,
				       "GID %u and the destination are of "
				       "different IP families", m->sgid_index);
	return 0;
}

int ibvd_av_from_msg(struct ibvd_call *call, const struct ibvd_device *dev,
		     const Ibvd__AhAttr *m, bool connected, struct ibvd_av *av)
{
	bool roce = dev->kind == IBVD_DEV_ROCE;
	const struct ibvd_port *port;
	int ret;

	if (!m)
		return ibvd_call_error(call, -EINVAL, "no address vector");
	port = ibvd_device_port(dev, m->port_num);
	if (!port)
		return ibvd_call_error(call, -EINVAL, "no port %u", m->port_num);
	if (m->sl > SL_MAX)
		return ibvd_call_error(call, -EINVAL, "SL %u above 15", m->sl);
	if (roce) {
		ret = check_roce(call, dev, m, port);
	} else {
		ret = check_dlid(call, m, connected);
		if (ret == 0 && m->is_global)
			ret = check_grh(call, dev, m, port);
	}
	if (ret < 0)
		return ret;
	memset(av, 0, sizeof(*av));
	if (m->is_global) {
		memcpy(av->dgid, m->dgid.data, 16);
		av->flow_label = m->flow_label & FLOW_LABEL_MAX;
		av->sgid_index = (uint8_t)m->sgid_index;
		av->hop_limit = (uint8_t)m->hop_limit;
		av->traffic_class = (uint8_t)m->traffic_class;
	}
	av->is_global = m->is_global;
	av->dlid = roce ? 0 : (uint16_t)m->dlid;
	if (roce) {
		struct ibvd_gid sgid;

		ibvd_device_gid(dev, port, m->sgid_index, &sgid);
		av->hop_limit = ibvd_roce_hop_limit(&dev->roce.netdev, sgid.raw,
						    av->dgid, av->hop_limit);
	}
	av->sl = (uint8_t)m->sl;
	av->port_num = (uint8_t)m->port_num;
	return 0;
}

int ibvd_req_create_ah(struct ibvd_call *call)
{
	const Ibvd__CreateAh *req = (const Ibvd__CreateAh *)call->msg;
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	struct ibvd_pd *pd = ibvd_handle_lookup(&ctx->handles, req->pd, IBVD_OBJ_PD);
	Ibvd__CreateAhReply reply = IBVD__CREATE_AH_REPLY__INIT;
	struct ibvd_av av;
	struct ibvd_ah *ah;
	int ret;

	if (!pd)
		return ibvd_call_error(call, -EINVAL, "no PD %#x", req->pd);
	ret = ibvd_av_from_msg(call, ctx->dev, req->attr, false, &av);
	if (ret < 0)
		return ret;
	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return -ENOMEM;
	ah->ctx = ctx;
	ah->pd = pd;
	ah->av = av;
	ret = ibvd_obj_add(ctx, IBVD_OBJ_AH, ah, &ah->handle);
	if (ret < 0) {
		free(ah);
		return ibvd_call_error(call, ret, "too many AHs");
	}
	pd->users++;
	/* it sends from its source GID's slot: no new address there */
	if (ctx->dev->roce.gid_holds && av.is_global) {
		ah->gid_hold = &ctx->dev->roce.gid_holds[av.sgid_index];
		ah->gid_hold->ahs++;
	}
	reply.handle = ah->handle;
	reply.hop_limit = av.hop_limit;
	ret = ibvd_call_reply(call, &reply.base, NULL, 0);
	if (ret < 0 && ibvd_call_ctx(call))
		ibvd_ah_destroy(ah);
	return ret;
}

/* The engine never sees AHs: no lock needed. */
void ibvd_ah_destroy(struct ibvd_ah *ah)
{
	ibvd_handle_remove(&ah->ctx->handles, ah->handle, IBVD_OBJ_AH);
	ah->pd->users--;
	if (ah->gid_hold)
		ah->gid_hold->ahs--;
	free(ah);
}

int ibvd_req_destroy_ah(struct ibvd_call *call)
{
	const Ibvd__Handle *req = (const Ibvd__Handle *)call->msg;
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	struct ibvd_ah *ah = ibvd_handle_lookup(&ctx->handles, req->handle,
						IBVD_OBJ_AH);

	if (!ah)
		return ibvd_call_error(call, -EINVAL, "no AH %#x", req->handle);
	ibvd_ah_destroy(ah);
	return 0;
}
