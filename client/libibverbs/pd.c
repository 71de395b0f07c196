/*
 * Protection domains: one ALLOC_PD/DEALLOC_PD round trip each.  The daemon
 * refuses to free a PD that MRs, QPs, SRQs or AHs still use (EBUSY); we
 * refuse one that parent domains use (domain.c).
 */
#include "config.h"

#include <stdlib.h>

#include "ibverbsd.pb-c.h"
#include "ibvd_verbs.h"

static int alloc_pd(struct ibv_context *ctx, struct ibv_pd **ret_pd)
{
	Ibvd__Handle *reply = NULL;
	struct ibvc_pd *ipd;
	struct ibv_pd *pd;
	int ret;

	ipd = calloc(1, sizeof(*ipd));
	if (!ipd)
		return -ENOMEM;
	pd = &ipd->pd;
	ret = ibvd_conn_call(ibvc_conn_of(ctx), IBVD_MSG_ALLOC_PD, NULL,
			     &ibvd__handle__descriptor,
			     (ProtobufCMessage **)&reply, NULL, NULL);
	if (ret < 0)
		goto fail;
	pd->context = ctx;
	pd->handle = reply->handle;
	ibvd__handle__free_unpacked(reply, NULL);
	*ret_pd = pd;
	return 0;
fail:
	free(ipd);
	return ret;
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	struct ibv_pd *pd;
	int ret;

	if (!ctx)
		return ibvc_null_ret(-EINVAL);
	ret = alloc_pd(ctx, &pd);
	return ret < 0 ? ibvc_null_ret(ret) : pd;
}

int ibvc_destroy_handle(struct ibv_context *ctx, uint16_t type, uint32_t handle)
{
	Ibvd__Handle req = IBVD__HANDLE__INIT;
	int ret;

	/* not the parent's objects, even where destroys may not fail */
	if (ibvc_forked(to_ibvc_context(ctx)))
		return -EIO;
	req.handle = handle;
	ret = ibvd_conn_call(ibvc_conn_of(ctx), type, &req.base, NULL, NULL,
			     NULL, NULL);
	/*
	 * A dead daemon already freed everything the context owned.  Like
	 * rdma-core on a disassociated device, destroys then fail with EIO
	 * (the object stays valid) unless the app asked for them to succeed.
	 */
	if (ret == -EIO && verbs_allow_disassociate_destroy)
		ret = 0;
	return ret;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct ibvc_pd *ipd;
	int ret;

	if (!pd)
		return EINVAL;
	ipd = to_ibvc_pd(pd);
	if (ipd->parent)
		return ibvc_errno_ret(ibvc_dealloc_parent_domain(ipd));
	/*
	 * The daemon knows the objects on it, not our parent domains; a PD
	 * still in use is refused here as the daemon would, errno included.
	 */
	if (atomic_load(&ipd->users))
		return ibvc_errno_ret(-EBUSY);
	ret = ibvc_destroy_handle(pd->context, IBVD_MSG_DEALLOC_PD, pd->handle);
	if (ret < 0)
		return ibvc_errno_ret(ret);
	free(ipd);
	return 0;
}

/*
 * ibv_import_pd(3): a PD of a shared context, by handle.  The daemon only
 * confirms it exists; ibv_unimport_pd frees our struct, ibv_dealloc_pd
 * (from any process sharing the context) destroys the PD for all.
 */
struct ibv_pd *ibv_import_pd(struct ibv_context *ctx, uint32_t pd_handle)
{
	Ibvd__Handle req = IBVD__HANDLE__INIT;
	struct ibvc_pd *ipd;
	int ret;

	if (!ctx)
		return ibvc_null_ret(-EINVAL);
	ipd = calloc(1, sizeof(*ipd));
	if (!ipd)
		return ibvc_null_ret(-ENOMEM);
	req.handle = pd_handle;
	ret = ibvd_conn_call(ibvc_conn_of(ctx), IBVD_MSG_IMPORT_PD, &req.base,
			     NULL, NULL, NULL, NULL);
	if (ret < 0) {
		free(ipd);
		return ibvc_null_ret(ret);
	}
	ipd->pd.context = ctx;
	ipd->pd.handle = pd_handle;
	return &ipd->pd;
}

void ibv_unimport_pd(struct ibv_pd *pd)
{
	struct ibvc_pd *ipd;

	if (!pd)
		return;
	ipd = to_ibvc_pd(pd);
	/* parent domains are this process's own: nothing to unimport */
	if (ipd->parent)
		return;
	/*
	 * rdma-core's objects never look at their PD again once made, so an
	 * app may unimport the PD before the MRs it imported on it; ours let
	 * go of their hold on it when they go: the last one frees it.
	 */
	if (atomic_fetch_or(&ipd->users, IBVC_PD_UNIMPORTED) == 0)
		free(ipd);
}
