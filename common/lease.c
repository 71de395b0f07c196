/*
 * Leases on direct access to a peer's memory (lease.h): the library's
 * begin/end around a copy, the daemon's revocation that waits for it.
 */
#include "config.h"

#include <errno.h>
#include <sched.h>

#include "lease.h"
#include "util.h"

_Static_assert(sizeof(struct ibvd_lease) == 2 * 64, "lease");

bool ibvd_lease_begin(struct ibvd_lease *l, uint32_t epoch)
{
	/*
	 * Store (in_use) -> load (epoch), mirrored by the revoker's store
	 * (epoch) -> load (in_use): sequentially consistent, so one of the
	 * two sees the other.
	 */
	__atomic_store_n(&l->in_use, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&l->epoch, __ATOMIC_SEQ_CST) == epoch)
		return true;
	__atomic_store_n(&l->in_use, 0, __ATOMIC_RELEASE);
	return false;
}

void ibvd_lease_end(struct ibvd_lease *l)
{
	/* Release: the copy is done before the revoker may go on. */
	__atomic_store_n(&l->in_use, 0, __ATOMIC_RELEASE);
}

void ibvd_lease_void(struct ibvd_lease *l)
{
	__atomic_fetch_add(&l->epoch, 1, __ATOMIC_SEQ_CST);
}

int ibvd_lease_revoke(struct ibvd_lease *l)
{
	return ibvd_lease_revoke_for(l, IBVD_LEASE_WAIT_NS);
}

int ibvd_lease_revoke_for(struct ibvd_lease *l, uint64_t wait_ns)
{
	ibvd_lease_void(l);
	return ibvd_lease_wait_until(l, ibvd_mono_ns() + wait_ns);
}

int ibvd_lease_wait_until(struct ibvd_lease *l, uint64_t deadline_ns)
{
	/* Acquire: what the copy wrote is done once we see it end. */
	while (__atomic_load_n(&l->in_use, __ATOMIC_SEQ_CST)) {
		if (ibvd_mono_ns() > deadline_ns)
			return -ETIMEDOUT;
		/* a copy is microseconds; its thread may need our CPU */
		sched_yield();
	}
	return 0;
}
