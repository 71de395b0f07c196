/*
 * Memory ordering for the shared queues (ring.h), on C11 atomics.
 *
 * Each use has a name that says what it orders, so a reader can check the
 * protocol without reverse-engineering fences:
 *
 * - ibvd_publish(p, v): a store-release of a counter after the entries it
 *   covers were written ("entries before counter").
 * - ibvd_observe(p): a load-acquire of the other side's counter before the
 *   entries it covers are read ("counter before entries").
 * - ibvd_full_fence(): store->load ordering, which acquire/release do not
 *   give even on x86.  Needed exactly where a side stores "I have work" /
 *   "I am going to sleep" and then loads the other side's flag: without it
 *   both can miss each other and a wakeup is lost.
 * - ibvd_read_once/ibvd_write_once: single untorn accesses with no ordering,
 *   for words the other side may change at any time (e.g. an untrusted
 *   counter the engine only range-checks).
 */
#ifndef IBVD_BARRIER_H
#define IBVD_BARRIER_H

#include <stdint.h>

#define ibvd_publish(p, v)	__atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define ibvd_observe(p)		__atomic_load_n((p), __ATOMIC_ACQUIRE)
#define ibvd_read_once(p)	__atomic_load_n((p), __ATOMIC_RELAXED)
#define ibvd_write_once(p, v)	__atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define ibvd_full_fence()	__atomic_thread_fence(__ATOMIC_SEQ_CST)

/* Set bits in a shared word (doorbells); returns the previous value. */
#define ibvd_fetch_or(p, v)	__atomic_fetch_or((p), (v), __ATOMIC_RELEASE)
/* Take a shared word and leave zero (the engine draining doorbells). */
#define ibvd_take(p)		__atomic_exchange_n((p), 0, __ATOMIC_ACQUIRE)

#endif /* IBVD_BARRIER_H */
