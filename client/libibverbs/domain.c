/*
 * Thread domains and parent domains (ibv_alloc_td(3),
 * ibv_alloc_parent_domain(3)).
 *
 * A parent domain is a PD in every respect (it carries its PD's daemon
 * handle, so everything that takes a PD takes it) plus a thread domain and
 * the app's allocators.  A thread domain promises that one thread at a
 * time uses what is created with it: a CQ or a QP made on such a parent
 * domain takes no lock to poll or post.  Queue memory comes from the
 * daemon's shared rings, never from our own heap, so the allocators are
 * kept and offered nothing to allocate, as a provider may.
 *
 * Lifetimes as verbs has them: a PD, a thread domain or a parent domain
 * in use (by a parent domain; by the objects made on it) is not freed:
 * EBUSY.
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "ibvd_verbs.h"

#define PARENT_MASK_KNOWN	(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | \
				 IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)

struct ibvc_td {
	struct ibv_td td;		/* must be first */
	atomic_uint users;		/* parent domains on it */
};

static struct ibvc_td *to_ibvc_td(struct ibv_td *td)
{
	return container_of(td, struct ibvc_td, td);
}

struct ibv_td *ibvc_alloc_td_op(struct ibv_context *ctx,
				struct ibv_td_init_attr *attr)
{
	struct ibvc_td *td;

	if (!ctx || !attr || attr->comp_mask)
		return ibvc_null_ret(-EINVAL);
	td = calloc(1, sizeof(*td));
	if (!td)
		return ibvc_null_ret(-ENOMEM);
	td->td.context = ctx;
	return &td->td;
}

int ibvc_dealloc_td_op(struct ibv_td *ibtd)
{
	struct ibvc_td *td;

	if (!ibtd)
		return EINVAL;
	td = to_ibvc_td(ibtd);
	if (atomic_load(&td->users))
		return EBUSY;
	free(td);
	return 0;
}

void ibvc_pd_hold(struct ibv_pd *pd)
{
	atomic_fetch_add(&to_ibvc_pd(pd)->users, 1);
}

void ibvc_pd_release(struct ibv_pd *pd)
{
	struct ibvc_pd *ipd = to_ibvc_pd(pd);

	/* the last hold on a PD that ibv_unimport_pd let go of already */
	if (atomic_fetch_sub(&ipd->users, 1) == IBVC_PD_UNIMPORTED + 1)
		free(ipd);
}

bool ibvc_pd_single_threaded(struct ibv_pd *pd)
{
	return pd && to_ibvc_pd(pd)->td;
}

static int check_parent_attr(struct ibv_context *ctx,
			     const struct ibv_parent_domain_init_attr *attr)
{
	if (!ctx || !attr || !attr->pd || attr->pd->context != ctx ||
	    (attr->td && attr->td->context != ctx) ||
	    (attr->comp_mask & ~PARENT_MASK_KNOWN))
		return -EINVAL;
	/* a parent domain's PD is a real PD, not another parent domain */
	if (to_ibvc_pd(attr->pd)->parent)
		return -EINVAL;
	if ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) &&
	    (!attr->alloc || !attr->free))
		return -EINVAL;
	return 0;
}

struct ibv_pd *ibvc_alloc_parent_domain_op(struct ibv_context *ctx,
					   struct ibv_parent_domain_init_attr *attr)
{
	struct ibvc_pd *pd;
	int ret = check_parent_attr(ctx, attr);

	if (ret < 0)
		return ibvc_null_ret(ret);
	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return ibvc_null_ret(-ENOMEM);
	pd->pd.context = ctx;
	pd->pd.handle = attr->pd->handle;
	pd->parent = to_ibvc_pd(attr->pd);
	if (attr->td) {
		pd->td = to_ibvc_td(attr->td);
		atomic_fetch_add(&pd->td->users, 1);
	}
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) {
		pd->alloc = attr->alloc;
		pd->free = attr->free;
	}
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
		pd->pd_context = attr->pd_context;
	ibvc_pd_hold(attr->pd);
	return &pd->pd;
}

/* ibv_dealloc_pd of a parent domain: nothing of it is on the daemon. */
int ibvc_dealloc_parent_domain(struct ibvc_pd *pd)
{
	if (atomic_load(&pd->users))
		return -EBUSY;
	if (pd->td)
		atomic_fetch_sub(&pd->td->users, 1);
	ibvc_pd_release(&pd->parent->pd);
	free(pd);
	return 0;
}
