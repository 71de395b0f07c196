/*
 * The per-context map from daemon handles to our CQs, QPs and SRQs.
 *
 * Completion events (on a channel) and async events (on async_fd) name
 * their object by handle; the app wants the ibv_cq/ibv_qp/ibv_srq pointer.
 * A daemon handle packs a slot index in its low bits (daemon/handle.h), so
 * the map is an array indexed by those bits, holding the whole handle to
 * tell a stale one from the live one: O(1), no hashing, and small because
 * the daemon reuses low slots first.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "ibvd_verbs.h"

/* The slot bits of a daemon handle (daemon/handle.h). */
#define HANDLE_INDEX_MASK	((1u << 20) - 1)

static int grow(struct ibvc_context *ictx, uint32_t need)
{
	uint32_t n = ictx->nobjs ? ictx->nobjs : 64;
	struct ibvc_obj_ref *objs;

	while (n < need)
		n *= 2;
	objs = realloc(ictx->objs, n * sizeof(*objs));
	if (!objs)
		return -ENOMEM;
	memset(objs + ictx->nobjs, 0, (n - ictx->nobjs) * sizeof(*objs));
	ictx->objs = objs;
	ictx->nobjs = n;
	return 0;
}

int ibvc_obj_add(struct ibvc_context *ictx, uint32_t handle,
		 enum ibvc_obj_kind kind, void *obj)
{
	uint32_t index = handle & HANDLE_INDEX_MASK;
	int ret = 0;

	if (handle == 0)
		return -EPROTO;
	pthread_mutex_lock(&ictx->obj_lock);
	if (index >= ictx->nobjs)
		ret = grow(ictx, index + 1);
	if (ret == 0) {
		ictx->objs[index].handle = handle;
		ictx->objs[index].kind = kind;
		ictx->objs[index].obj = obj;
	}
	pthread_mutex_unlock(&ictx->obj_lock);
	return ret;
}

void ibvc_obj_remove(struct ibvc_context *ictx, uint32_t handle)
{
	uint32_t index = handle & HANDLE_INDEX_MASK;

	pthread_mutex_lock(&ictx->obj_lock);
	if (index < ictx->nobjs && ictx->objs[index].handle == handle)
		memset(&ictx->objs[index], 0, sizeof(ictx->objs[index]));
	pthread_mutex_unlock(&ictx->obj_lock);
}

void *ibvc_obj_lookup_locked(struct ibvc_context *ictx, uint32_t handle,
			     enum ibvc_obj_kind kind)
{
	uint32_t index = handle & HANDLE_INDEX_MASK;
	const struct ibvc_obj_ref *ref;

	if (handle == 0 || index >= ictx->nobjs)
		return NULL;
	ref = &ictx->objs[index];
	return ref->handle == handle && ref->kind == kind ? ref->obj : NULL;
}

void ibvc_obj_free_all(struct ibvc_context *ictx)
{
	free(ictx->objs);
	ictx->objs = NULL;
	ictx->nobjs = 0;
}

void ibvc_wait_acked(pthread_mutex_t *mutex, pthread_cond_t *cond,
		     const uint32_t *completed, const uint32_t *delivered)
{
	pthread_mutex_lock(mutex);
	while (*completed != *delivered)
		pthread_cond_wait(cond, mutex);
	pthread_mutex_unlock(mutex);
}
