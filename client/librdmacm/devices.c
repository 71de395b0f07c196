/*
 * The verbs devices the connection manager works with, as rdma-core's
 * librdmacm keeps them: every device, opened once for the life of the
 * process, the first time the CM needs them.  rdma_get_devices() hands out
 * these contexts (cm_id->verbs will point at them too), so they are never
 * closed, and rdma_free_devices() frees only the array.
 *
 * This is also what makes our librdmacm depend on our libibverbs
 * (DT_NEEDED libibverbs.so.1), so that a program, its librdmacm and any
 * provider library all bind to the one libibverbs in the process.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibv_context **contexts;	/* NULL-terminated once opened */
static int ncontexts;

static void close_all(struct ibv_context **ctxs, int n)
{
	while (n-- > 0)
		ibv_close_device(ctxs[n]);
	free(ctxs);
}

/*
 * Open every device.  All or nothing, so that a later call retries after
 * a failure (no devices counts as one, ENODEV, as in rdma-core).
 */
static int open_all_locked(void)
{
	struct ibv_context **ctxs = NULL;
	struct ibv_device **list;
	int n, i = 0, saved;

	list = ibv_get_device_list(&n);
	if (!list)
		return -1;
	if (n == 0) {
		errno = ENODEV;
		goto fail;
	}
	ctxs = calloc((size_t)n + 1, sizeof(*ctxs));
	if (!ctxs)
		goto fail;
	for (i = 0; i < n; i++) {
		ctxs[i] = ibv_open_device(list[i]);
		if (!ctxs[i])
			goto fail;
	}
	/* Open contexts keep their devices alive without the list. */
	ibv_free_device_list(list);
	contexts = ctxs;
	ncontexts = n;
	return 0;
fail:
	saved = errno;
	if (ctxs)
		close_all(ctxs, i);
	ibv_free_device_list(list);
	errno = saved;
	return -1;
}

struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **devs = NULL;
	size_t size;
	int n = 0;

	pthread_mutex_lock(&devices_lock);
	if (contexts || open_all_locked() == 0) {
		size = ((size_t)ncontexts + 1) * sizeof(*devs);
		devs = malloc(size);
		if (devs) {
			memcpy(devs, contexts, size);
			n = ncontexts;
		}
	}
	pthread_mutex_unlock(&devices_lock);
	if (num_devices)
		*num_devices = n;
	return devs;
}

/* Only the array: the contexts in it belong to the CM. */
void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}
