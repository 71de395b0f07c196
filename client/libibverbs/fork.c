/*
 * fork() support.  With kernel verbs, registered pages are pinned and a
 * fork() can leave the parent's DMA going to the child's copy, so rdma-core
 * marks them MADV_DONTFORK once ibv_fork_init() (or RDMAV_FORK_SAFE /
 * IBV_FORK_SAFE in the environment) asks for it.  Our daemon does not DMA
 * into pinned pages; whether a registration tier needs pages kept out of
 * a child is for memory registration to decide.  Here we keep the state
 * that programs (pyverbs) query, and accept the range calls that provider
 * libraries make.
 */
#include "config.h"

#include <stdbool.h>
#include <stdlib.h>

#include <infiniband/verbs.h>

#include "exports.h"

static bool fork_init_called;

static bool fork_safe_requested(void)
{
	return getenv("RDMAV_FORK_SAFE") || getenv("IBV_FORK_SAFE");
}

int ibv_fork_init(void)
{
	__atomic_store_n(&fork_init_called, true, __ATOMIC_RELAXED);
	return 0;
}

enum ibv_fork_status ibv_is_fork_initialized(void)
{
	if (__atomic_load_n(&fork_init_called, __ATOMIC_RELAXED) ||
	    fork_safe_requested())
		return IBV_FORK_ENABLED;
	return IBV_FORK_DISABLED;
}

/* Called by provider libraries around their own buffers: nothing to do. */
int ibv_dontfork_range(void *base, size_t size)
{
	return 0;
}

int ibv_dofork_range(void *base, size_t size)
{
	return 0;
}
