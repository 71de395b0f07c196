/*
 * fork() support.  With kernel verbs, registered pages are pinned and a
 * fork() can leave the parent's DMA going to the child's copy, so rdma-core
 * marked them MADV_DONTFORK once ibv_fork_init() (or RDMAV_FORK_SAFE /
 * IBV_FORK_SAFE in the environment) asked for it, until kernels learned to
 * copy pinned pages at fork; rdma-core then reports IBV_FORK_UNNEEDED and
 * ibv_fork_init() does nothing.  That is our case always: the daemon
 * reaches a process's memory through its own mm (/proc/PID/mem, or the
 * file of shared memory), which after a fork keeps following the parent's
 * pages, whoever writes them first.
 */
#include "config.h"

#include <infiniband/verbs.h>

#include "exports.h"

int ibv_fork_init(void)
{
	return 0;
}

enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
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
