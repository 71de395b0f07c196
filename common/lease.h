/*
 * One-sided direct access (DESIGN.md §5, item 3): an RDMA WRITE or READ
 * between two connected local QPs whose target MR lies in memory its
 * process shares with a file (a memfd, a /dev/shm or hugetlbfs file, a
 * MAP_SHARED regular file) is done by the initiator's library itself,
 * with one memcpy into or out of its own mapping of that file.  This
 * header is the contract that makes the mapping revocable.
 *
 * Who may.  The daemon grants an initiator a target MR (QP_REMOTE_MR)
 * only when the initiator runs as the target's uid: such a process can
 * already write the target's memory (ptrace, /proc/PID/mem, the file
 * itself), so a library that ignored a revocation would gain nothing it
 * did not have.  Between uids Linux offers no way to take a mapping back
 * from a process that will not give it up, so those pairs keep the
 * engine's path.  Private memory is never granted: only what the target
 * itself mapped shared qualifies, and only MRs with remote access.
 *
 * The lease.  Each side of a direct pair has one lease word pair in the
 * pair's memfd (transit.h): `epoch`, which only the daemon and the engine
 * move, and `in_use`, which only that side's library sets while it copies.
 * A grant carries the epoch it was made at.  The library copies under a
 * grant only between
 *	in_use = 1; full fence; epoch == the grant's? ... copy ...; in_use = 0
 * and the daemon revokes with
 *	epoch += 1; full fence; wait while in_use
 * so either the library sees the new epoch and copies nothing, or the
 * daemon sees it copying and waits for the end: after the revocation
 * returns no byte moves under an older grant.  The engine voids a pair's
 * leases without waiting when a QP of it enters an error state (what was
 * in flight then completes as a request before the error would).
 *
 * What revokes.  Deregistering or re-registering a granted MR, either QP
 * leaving the pair (reset, destroy, its process gone), and a change of
 * the target QP's access flags (a grant gives the rights both the MR and
 * that QP give) revoke every lease into the MR's or the QP's context; the
 * daemon returns only then.  A side granted nothing since its last
 * revocation is not waited for.  The sides one request revokes are all
 * voided first, then waited for together, so that each copy gets the
 * whole wait.  A library that holds `in_use` for longer than a copy can
 * take (stopped mid-copy, or lying; an honest one copying a large range
 * of a slow file can too) is waited for IBVD_LEASE_WAIT_NS, then logged
 * and left: it is the target's own uid.  That side is not waited for
 * again, so that it cannot hold up the daemon's control thread (every
 * tenant's requests) more than once; its context gets no grants from then
 * on, in any pair, nor does its uid, in any process, for 10 s, twice as
 * long at each offence up to an hour (contexts are cheap).  Their grants
 * made before are still waited for, a millisecond: enough for a copy that
 * runs, and each such side costs it once.
 *
 * What a grant gives.  An fd of the MR's whole backing file, not only
 * the MR's range, and a mapping that a library ignoring its revocation
 * keeps: the argument above (the same uid can write it anyway) holds
 * unless the target is protected from its own uid (non-dumpable, Yama's
 * ptrace_scope above 0).  ibverbsd(7) says so.
 */
#ifndef IBVD_LEASE_H
#define IBVD_LEASE_H

#include <stdbool.h>
#include <stdint.h>

/* One side's lease: a cache line for each writer. */
struct ibvd_lease {
	uint32_t epoch;		/* the daemon's and the engine's */
	uint8_t pad0[60];
	uint32_t in_use;	/* the initiator library's */
	uint8_t pad1[60];
};

/* The longest a revocation waits for a copy in progress. */
#define IBVD_LEASE_WAIT_NS	20000000ull	/* 20 ms */

/* The library: may it copy under a grant of `epoch`?  If so, it must
 * call ibvd_lease_end when done. */
bool ibvd_lease_begin(struct ibvd_lease *l, uint32_t epoch);
void ibvd_lease_end(struct ibvd_lease *l);

/* The engine: void every grant of l, without waiting. */
void ibvd_lease_void(struct ibvd_lease *l);
/*
 * The daemon: void every grant of l and wait until no copy under one is
 * in progress, at most IBVD_LEASE_WAIT_NS.  0, or -ETIMEDOUT.
 */
int ibvd_lease_revoke(struct ibvd_lease *l);
/* The same, waiting at most wait_ns. */
int ibvd_lease_revoke_for(struct ibvd_lease *l, uint64_t wait_ns);
/*
 * The wait alone, for a lease already voided: until no copy is in
 * progress (0) or CLOCK_MONOTONIC passes deadline_ns (-ETIMEDOUT).
 */
int ibvd_lease_wait_until(struct ibvd_lease *l, uint64_t deadline_ns);

#endif /* IBVD_LEASE_H */
