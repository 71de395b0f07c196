/*
 * Address handles.  The daemon validates and records each AH; we keep its
 * address vector too, because every UD send WQE carries a copy of it
 * (ring.h struct ibvd_av): the engine never looks an AH up on the fast path.
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ibvd_verbs.h"


static void av_from_attr(struct ibvd_av *av, const struct ibv_ah_attr *a)
{
	memset(av, 0, sizeof(*av));
	if (a->is_global)
		memcpy(av->dgid, a->grh.dgid.raw, sizeof(av->dgid));
	av->flow_label = a->grh.flow_label & 0xFFFFFu;	/* what a GRH holds */
	av->dlid = a->dlid;
	av->is_global = a->is_global;
	av->sgid_index = a->grh.sgid_index;
	av->hop_limit = a->grh.hop_limit;
	av->traffic_class = a->grh.traffic_class;
	av->sl = a->sl;
	av->port_num = a->port_num;
}

static int create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr,
		     struct ibvc_ah **ret_ah)
{
	Ibvd__CreateAh req = IBVD__CREATE_AH__INIT;
	Ibvd__AhAttr m = IBVD__AH_ATTR__INIT;
	Ibvd__CreateAhReply *reply = NULL;
	struct ibvc_ah *ah;
	int ret;

	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return -ENOMEM;
	ibvd_ah_attr_to_msg(attr, &m);
	req.pd = pd->handle;
	req.attr = &m;
	ret = ibvd_conn_call(ibvc_conn_of(pd->context), IBVD_MSG_CREATE_AH,
			     &req.base, &ibvd__create_ah_reply__descriptor,
			     (ProtobufCMessage **)&reply, NULL, NULL);
	if (ret < 0) {
		free(ah);
		return ret;
	}
	ah->ah.context = pd->context;
	ah->ah.pd = pd;
	ah->ah.handle = reply->handle;
	ibvc_pd_hold(pd);
	av_from_attr(&ah->av, attr);
	/* a RoCE route's, which the engine puts on the wire as it is */
	ah->av.hop_limit = (uint8_t)reply->hop_limit;
	ibvd__create_ah_reply__free_unpacked(reply, NULL);
	*ret_ah = ah;
	return 0;
}

struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct ibvc_ah *ah;
	int ret;

	if (!pd || !attr)
		return ibvc_null_ret(-EINVAL);
	ret = create_ah(pd, attr, &ah);
	return ret < 0 ? ibvc_null_ret(ret) : &ah->ah;
}

int ibv_destroy_ah(struct ibv_ah *ah)
{
	int ret;

	if (!ah)
		return EINVAL;
	ret = ibvc_destroy_handle(ah->context, IBVD_MSG_DESTROY_AH, ah->handle);
	if (ret < 0)
		return ibvc_errno_ret(ret);
	ibvc_pd_release(ah->pd);
	free(to_ibvc_ah(ah));
	return 0;
}

/*
 * The WQE carries a copy of the AH's vector, so the engine cannot see
 * whose AH it was: a foreign one is flagged at post (ring.h,
 * IBVD_SEND_FOREIGN_AH) and the engine fails the WQE.  By the daemon's
 * handle, not the pointer: a parent domain carries its PD's, and a PD
 * imported into this context (ibv_import_pd) is another struct for it.
 */
bool ibvc_ah_pd_ok(const struct ibvc_qp *qp, struct ibv_ah *ah)
{
	return ah->pd->handle == qp->qp.pd->handle;
}

/*
 * A RoCEv2 datagram that came over IPv4 has no GRH: its 40 bytes are 20
 * zero bytes, then the IPv4 header (IHL 5, no options, as RoCE sends).
 */
static bool grh_is_ipv4(const struct ibv_grh *grh)
{
	static const uint8_t zeros[20];
	const uint8_t *b = (const uint8_t *)grh;

	return !memcmp(b, zeros, sizeof(zeros)) && b[20] == 0x45;
}

/*
 * The IPv4 header's addresses as GIDs (::ffff:a.b.c.d), its TOS and its
 * TTL in a GRH's places.
 */
static void grh_from_ipv4(const struct ibv_grh *grh, struct ibv_grh *out)
{
	const uint8_t *ip = (const uint8_t *)grh + 20;

	memset(out, 0, sizeof(*out));
	out->sgid.raw[10] = out->sgid.raw[11] = 0xff;
	out->dgid.raw[10] = out->dgid.raw[11] = 0xff;
	memcpy(out->sgid.raw + 12, ip + 12, 4);
	memcpy(out->dgid.raw + 12, ip + 16, 4);
	out->version_tclass_flow = htonl((uint32_t)ip[1] << 20);
	out->hop_limit = ip[8];
}

/* A GRH's next header when a BTH follows it (InfiniBand) */
#define GRH_NEXT_HDR_BTH	0x1B

/* Is gid a multicast group's: ff00::/8, or ::ffff: and 224/4? */
static bool gid_is_multicast(const union ibv_gid *gid)
{
	static const uint8_t v4_mapped[12] = { [10] = 0xff, [11] = 0xff };

	if (!memcmp(gid->raw, v4_mapped, sizeof(v4_mapped)))
		return (gid->raw[12] & 0xf0) == 0xe0;
	return gid->raw[0] == 0xff;
}

/*
 * The reply path to the sender of wc (ibv_init_ah_from_wc(3)): its LID,
 * and with a GRH its GID as destination, our GID it was sent to as source,
 * its traffic class, flow label and hop limit (an IPv4 header's TOS and
 * TTL).  As rdma-core's, a datagram sent to a multicast group has no
 * reply path from one of our GIDs: EINVAL.
 */
static int init_ah_from_wc(struct ibv_context *ctx, uint8_t port_num,
			   const struct ibv_wc *wc, const struct ibv_grh *grh,
			   struct ibv_ah_attr *ah_attr)
{
	struct ibv_grh v4;
	uint32_t flow_class;
	int index;

	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	if (!(wc->wc_flags & IBV_WC_GRH))
		return 0;
	if (!grh)
		return -EINVAL;
	if (grh_is_ipv4(grh)) {
		grh_from_ipv4(grh, &v4);
		grh = &v4;
	} else if (grh->next_hdr != IPPROTO_UDP && grh->next_hdr != GRH_NEXT_HDR_BTH) {
		/* RoCEv2 over IPv6 carries UDP, a GRH of InfiniBand a BTH */
		return -EPROTONOSUPPORT;
	}
	if (gid_is_multicast(&grh->dgid))
		return -EINVAL;
	index = ibvc_find_gid_index(ctx, port_num, &grh->dgid);
	if (index < 0)
		return index;
	ah_attr->is_global = 1;
	ah_attr->grh.dgid = grh->sgid;
	ah_attr->grh.sgid_index = (uint8_t)index;
	flow_class = ntohl(grh->version_tclass_flow);
	ah_attr->grh.flow_label = flow_class & 0xfffff;
	ah_attr->grh.traffic_class = (flow_class >> 20) & 0xff;
	ah_attr->grh.hop_limit = grh->hop_limit;
	return 0;
}

/* As rdma-core's: 0, or -1 with errno set. */
int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num,
			struct ibv_wc *wc, struct ibv_grh *grh,
			struct ibv_ah_attr *ah_attr)
{
	if (!context || !wc || !ah_attr)
		return ibvc_minus_one_ret(-EINVAL);
	return ibvc_minus_one_ret(init_ah_from_wc(context, port_num, wc, grh,
						  ah_attr));
}

struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
				     struct ibv_grh *grh, uint8_t port_num)
{
	struct ibv_ah_attr attr;
	struct ibvc_ah *ah;
	int ret;

	if (!pd || !wc)
		return ibvc_null_ret(-EINVAL);
	ret = init_ah_from_wc(pd->context, port_num, wc, grh, &attr);
	if (ret == 0)
		ret = create_ah(pd, &attr, &ah);
	return ret < 0 ? ibvc_null_ret(ret) : &ah->ah;
}
