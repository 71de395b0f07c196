/*
 * Engine threads: the poll / spin / sleep loop, their start and stop.
 *
 * Each thread serves a set of contexts.  A pass takes ibvd_objects_lock for
 * reading (so nothing it reaches can be destroyed under it, and the control
 * thread waits at most one pass to change objects), drains the doorbells
 * of its contexts, runs each rung QP for one turn, and fires due timers.
 * Only rung QPs are looked at: 10,000 idle QPs cost nothing.
 *
 * A thread whose passes find nothing spins for ENG_SPIN_NS (a pause per
 * pass), which keeps ping-pong latency free of wakeups, or only for
 * ENG_SPIN_CONTENDED_NS when the CPUs are crowded (load.c), then sleeps in
 * epoll on its contexts' kick eventfds, with the nearest timer as timeout
 * (doorbell.c explains why no wakeup is lost).  Asleep it costs no CPU.
 */
#include <config.h>

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "barrier.h"
#include "watch/copy_watch.h"
#include "core/thread.h"
#include "engine.h"
#include "internal.h"
#include "log.h"
#include "util.h"

static struct ibvd_engine *engines;
static unsigned int nengines;
static bool threaded;		/* false: ibvd_engine_start_unthreaded */
static uint64_t spin_ns;	/* non-zero: fixed idle budget (spin_fixed) */

uint64_t ibvd_eng_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int ibvd_eng_scratch(struct ibvd_engine *eng, size_t len)
{
	uint8_t *buf;

	if (len <= eng->wqe_buf_len)
		return 0;
	buf = realloc(eng->wqe_buf, len);
	if (!buf)
		return -ENOMEM;
	eng->wqe_buf = buf;
	eng->wqe_buf_len = len;
	return 0;
}

struct ibvd_engine *ibvd_eng_of(const struct ibvd_qp *qp)
{
	const struct ibvd_ectx *ectx = qp->ctx->engine;

	return ectx ? ectx->eng : NULL;
}

void ibvd_eng_qp_ring(struct ibvd_qp *qp)
{
	struct ibvd_ectx *ectx = qp->ctx->engine;

	/* A detached context has no thread to ring; its QPs die soon. */
	if (ectx && ectx->eng && ibvd_eng_db_ring(&ectx->db, qp->doorbell))
		ibvd_eng_wake(ectx->eng);
}

void ibvd_eng_qp_wait(struct ibvd_engine *eng, struct ibvd_qp *qp,
		      uint64_t deadline)
{
	if (ibvd_eng_timer_set(&eng->timers, qp, deadline) < 0) {
		/* No memory for a timer: retry at once rather than never. */
		qp->rnr_deadline_ns = 0;
		ibvd_eng_qp_ring(qp);
		return;
	}
	qp->rnr_deadline_ns = deadline;
}

void ibvd_eng_wake(struct ibvd_engine *eng)
{
	uint64_t one = 1;

	if (!threaded || pthread_equal(pthread_self(), eng->thread))
		return;
	if (write(eng->wake_fd, &one, sizeof(one)) < 0)
		log_warn("engine %u: cannot wake it: %s", eng->index, strerror(errno));
}

static unsigned int look_rx(struct ibvd_engine *eng);

/* ---- one pass ------------------------------------------------------------ */

/*
 * Fairness between tenants.  A QP's turn is bounded (a chunk, send.c), and
 * each rung QP has one turn a pass: a tenant with many busy QPs would make
 * a pass as long as all their turns, and every other tenant's QP, and the
 * control thread waiting for the objects lock, would wait that long.  So
 * a tenant (its bandwidth bucket names it: one per uid) may spend
 * ENG_TENANT_PASS_COST in a pass; its QPs rung after that are rung again
 * for the next pass, which comes at once, after every other tenant's had
 * their turns.  A pass then lasts about that much per busy tenant,
 * however many QPs each has, and the UD datagrams it places from the
 * park (direct/ud_park.c), 64 at most, in no share: their senders' turns
 * paid for copying them in, not out (daemon/LIMITS.md bounds what a
 * tenant gains).
 *
 * Fairness within a tenant.  A pass in a fixed order would give the share
 * to the same QPs each time: a tenant's low doorbell bits, busy for good,
 * would put its higher ones off until they ran dry (an MPI rank streaming
 * to one peer would starve its messages to another).  So each context's
 * drain starts at the bit it put off first in its last pass that put one
 * off (round robin over its QPs), and each pass starts at the context
 * after the one the last pass started at (a tenant's other contexts on
 * the thread).  A rung QP has its turn within about as many passes as
 * its context's busy QPs ahead of it need shares; where the tenant's
 * other contexts spend the share first, a round of the thread's
 * contexts at most for each of those QPs (its context goes first once a
 * round, and its first QP then always has its turn).
 */
struct pass_share {
	const struct ibvd_eng_rate *tenant;
	/* bytes, ENG_WQE_COST per WQE retired or message placed */
	uint64_t cost;
};

struct pass {
	struct ibvd_engine *eng;
	struct ibvd_context *ctx;
	struct pass_share shares[ENG_PASS_TENANTS];
	unsigned int nshares;
	unsigned int turns;		/* QPs that had a turn */
	unsigned int deferred;		/* QPs rung again for the next pass */
	bool ctx_deferred;		/* ctx had one of them: at first_deferred */
	uint32_t first_deferred;
};

/* The share of qp's tenant in this pass, or NULL: not counted (no room). */
static struct pass_share *share_of(struct pass *p, const struct ibvd_qp *qp)
{
	const struct ibvd_eng_rate *tenant = qp->ctx->engine->rate;
	unsigned int i;

	if (!tenant)
		return NULL;
	for (i = 0; i < p->nshares; i++)
		if (p->shares[i].tenant == tenant)
			return &p->shares[i];
	if (p->nshares == ENG_PASS_TENANTS)
		return NULL;
	p->shares[p->nshares] = (struct pass_share){ .tenant = tenant };
	return &p->shares[p->nshares++];
}

/* The engine's counts a turn's cost is the growth of. */
struct turn_counts {
	uint64_t wqes, direct_bytes, direct_msgs;
};

static struct turn_counts counts_now(const struct ibvd_engine *eng)
{
	return (struct turn_counts){ .wqes = eng->wqes,
				     .direct_bytes = eng->direct_bytes,
				     .direct_msgs = eng->direct_msgs };
}

/*
 * What a turn cost: the bytes its SQ moved, and those it placed out of
 * direct rings (its own ring's SENDs, which go before its next WQE, and
 * its peer's into its receives), no SQ's bytes but the same copies, which
 * a tenant could otherwise have the engine make for it past its share;
 * each WQE and each message placed ENG_WQE_COST, and the turn itself one.
 */
static uint64_t turn_cost(const struct ibvd_engine *eng,
			  const struct turn_counts *before, uint64_t bytes)
{
	uint64_t items = eng->wqes - before->wqes +
			 eng->direct_msgs - before->direct_msgs + 1;

	return bytes + eng->direct_bytes - before->direct_bytes +
	       items * ENG_WQE_COST;
}

/*
 * qp's turn, or a ring for the next pass if its tenant spent its share:
 * then returns true.
 */
static bool take_turn(struct pass *p, struct ibvd_qp *qp)
{
	struct ibvd_engine *eng = p->eng;
	struct pass_share *share = share_of(p, qp);
	struct turn_counts before = counts_now(eng);
	uint64_t bytes;

	/* its last sends ran at its teardown, within their budget */
	if (qp->ctx->engine->going)
		return false;
	if (share && share->cost >= ENG_TENANT_PASS_COST) {
		ibvd_eng_qp_ring(qp);
		p->deferred++;
		return true;
	}
	bytes = ibvd_eng_qp_run(eng, qp, eng->now);
	p->turns++;
	if (share)
		share->cost += turn_cost(eng, &before, bytes);
	return false;
}

static void rung(uint32_t bit, void *arg)
{
	struct pass *p = arg;
	/* Any bit may be rung by a client: only its own QPs' bits find one. */
	struct ibvd_qp *qp = ibvd_qp_by_doorbell(p->ctx, bit);

	if (qp && take_turn(p, qp) && !p->ctx_deferred) {
		p->ctx_deferred = true;
		p->first_deferred = bit;
	}
}

static unsigned int run_timers(struct pass *p)
{
	struct ibvd_engine *eng = p->eng;
	struct ibvd_qp *qp;
	unsigned int n = 0;

	while ((qp = ibvd_eng_timer_pop(&eng->timers, eng->now))) {
		/* Flushed or reset since it started to wait: nothing to do. */
		if (!qp->rnr_deadline_ns || qp->rnr_deadline_ns > eng->now)
			continue;
		take_turn(p, qp);
		n++;
	}
	eng_count(&eng->timers_fired, n);
	return n;
}

/* Returns true if anything was found to do. */
static bool engine_pass(struct ibvd_engine *eng)
{
	struct pass p;
	unsigned int i, k, n = 0;

	p.eng = eng;
	p.nshares = 0;
	p.turns = 0;
	p.deferred = 0;

	pthread_rwlock_rdlock(&ibvd_objects_lock);
	eng->now = ibvd_eng_now();
	eng->claim_wait_left = ENG_CLAIM_WAIT_NS;
	if (eng->armed) {
		ibvd_eng_db_disarm(eng->dbs, eng->nctx);
		eng->armed = false;
	}
	for (k = 0; k < eng->nctx; k++) {
		i = (eng->first_ctx + k) % eng->nctx;
		p.ctx = eng->ectxs[i]->ctx;
		p.ctx_deferred = false;
		n += ibvd_eng_db_drain(eng->dbs[i], rung, &p);
		if (p.ctx_deferred)
			eng->dbs[i]->resume = p.first_deferred;
	}
	if (eng->nctx)
		eng->first_ctx = (eng->first_ctx + 1) % eng->nctx;
	n += look_rx(eng);
	n += run_timers(&p);
	n += ibvd_eng_park_run(eng);
	pthread_rwlock_unlock(&ibvd_objects_lock);
	eng_count(&eng->passes, 1);
	eng_count(&eng->busy_passes, p.turns > 0);
	eng_count(&eng->deferred, p.deferred);
	return n > 0;
}

/* ---- receive sides (transport.h) ------------------------------------------ */

/* In an epoll set beside the kick eventfds, which carry 0. */
#define RX_EPOLL_TAG	1u

/*
 * Drain the receive sides with packets waiting, at most every
 * ENG_RX_LOOK_NS while awake and at once after a wakeup.  A side that
 * used its whole budget is looked at again in the next pass.
 */
static unsigned int look_rx(struct ibvd_engine *eng)
{
	struct epoll_event ev[IBVD_MAX_DEVICES];
	unsigned int taken = 0;
	int i, n;

	if (!eng->nrx || (!__atomic_exchange_n(&eng->rx_due, false, __ATOMIC_RELAXED) &&
			  eng->now - eng->rx_looked < ENG_RX_LOOK_NS))
		return 0;
	eng->rx_looked = eng->now;
	n = epoll_wait(eng->rx_epfd, ev, IBVD_MAX_DEVICES, 0);
	for (i = 0; i < n; i++) {
		struct ibvd_eng_rx *rx = ev[i].data.ptr;

		taken += rx->drain(rx);
	}
	/* More may wait: a level-triggered set says so again at once. */
	if (n > 0)
		__atomic_store_n(&eng->rx_due, true, __ATOMIC_RELAXED);
	return taken;
}

/* Where rx waits while no engine runs (before the start, after the stop). */
static struct ibvd_eng_rx *rx_waiting[IBVD_MAX_DEVICES];
static unsigned int nrx_waiting;

static int rx_watch(struct ibvd_engine *eng, struct ibvd_eng_rx *rx, int op)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = rx };
	unsigned int i;

	for (i = 0; i < 2; i++)
		if (rx->fd[i] >= 0 && epoll_ctl(eng->rx_epfd, op, rx->fd[i],
						op == EPOLL_CTL_DEL ? NULL : &ev) < 0)
			return -errno;
	return 0;
}

/* The thread with the lowest count (the lowest index among equals), or NULL. */
static struct ibvd_engine *fewest(unsigned int (*count)(const struct ibvd_engine *))
{
	struct ibvd_engine *best = NULL;
	unsigned int i;

	for (i = 0; i < nengines; i++)
		if (!best || count(&engines[i]) < count(best))
			best = &engines[i];
	return best;
}

static unsigned int rx_count(const struct ibvd_engine *eng)
{
	return eng->nrx;
}

/* The thread draining the fewest sides, or NULL if none runs. */
static struct ibvd_engine *rx_pick(void)
{
	return fewest(rx_count);
}

static int rx_join(struct ibvd_engine *eng, struct ibvd_eng_rx *rx)
{
	uint64_t one = 1;
	int ret;

	if (eng->nrx == IBVD_MAX_DEVICES)
		return -ENOSPC;
	/* Once one fd is watched a pass may drain rx: none runs meanwhile. */
	ibvd_objects_write_lock();
	ret = rx_watch(eng, rx, EPOLL_CTL_ADD);
	if (ret < 0) {
		rx_watch(eng, rx, EPOLL_CTL_DEL);
		ibvd_objects_write_unlock();
		return ret;
	}
	eng->rx[eng->nrx++] = rx;
	rx->eng = eng;
	__atomic_store_n(&eng->rx_due, true, __ATOMIC_RELAXED);
	ibvd_objects_write_unlock();
	/* What arrived before it was watched: the next pass takes it. */
	if (threaded && write(eng->wake_fd, &one, sizeof(one)) < 0)
		log_warn("engine %u: cannot wake it: %s", eng->index, strerror(errno));
	return 0;
}

int ibvd_eng_rx_attach(struct ibvd_eng_rx *rx)
{
	struct ibvd_engine *eng = rx_pick();

	rx->eng = NULL;
	if (eng)
		return rx_join(eng, rx);
	if (nrx_waiting == IBVD_MAX_DEVICES)
		return -ENOSPC;
	rx_waiting[nrx_waiting++] = rx;
	return 0;
}

void ibvd_eng_rx_drop_fd(struct ibvd_eng_rx *rx, unsigned int i)
{
	if (rx->eng && rx->fd[i] >= 0)
		epoll_ctl(rx->eng->rx_epfd, EPOLL_CTL_DEL, rx->fd[i], NULL);
	rx->fd[i] = -1;
}

int ibvd_eng_rx_swap_fds(struct ibvd_eng_rx *rx, int fd[2])
{
	unsigned int i;
	int old;

	if (rx->eng)
		rx_watch(rx->eng, rx, EPOLL_CTL_DEL);
	for (i = 0; i < 2; i++) {
		old = rx->fd[i];
		rx->fd[i] = fd[i];
		fd[i] = old;
	}
	return rx->eng ? rx_watch(rx->eng, rx, EPOLL_CTL_ADD) : 0;
}

/* Take rx out of list[*n], if there. */
static void rx_unlist(struct ibvd_eng_rx **list, unsigned int *n,
		      const struct ibvd_eng_rx *rx)
{
	unsigned int i;

	for (i = 0; i < *n; i++) {
		if (list[i] == rx) {
			list[i] = list[--*n];
			return;
		}
	}
}

void ibvd_eng_rx_detach(struct ibvd_eng_rx *rx)
{
	struct ibvd_engine *eng = rx->eng;

	if (!eng) {
		rx_unlist(rx_waiting, &nrx_waiting, rx);
		return;
	}
	/* No pass runs under the write lock: none is draining rx. */
	ibvd_objects_write_lock();
	rx_watch(eng, rx, EPOLL_CTL_DEL);
	rx_unlist(eng->rx, &eng->nrx, rx);
	rx->eng = NULL;
	ibvd_objects_write_unlock();
}

/* The engines started: the sides that waited for them join them. */
static int rx_start_waiting(void)
{
	int ret;

	while (nrx_waiting) {
		ret = rx_join(rx_pick(), rx_waiting[nrx_waiting - 1]);
		if (ret < 0)
			return ret;
		nrx_waiting--;
	}
	return 0;
}

/* An engine going away: its sides wait again (their owners detach them). */
static void rx_leave_all(struct ibvd_engine *eng)
{
	while (eng->nrx) {
		struct ibvd_eng_rx *rx = eng->rx[--eng->nrx];

		rx->eng = NULL;
		if (nrx_waiting < IBVD_MAX_DEVICES)
			rx_waiting[nrx_waiting++] = rx;
	}
}

/* ---- sleeping ------------------------------------------------------------ */

static void engine_sleep(struct ibvd_engine *eng)
{
	struct epoll_event ev[16];
	struct timespec ts, *tsp = NULL;
	uint64_t next, parked, now;
	bool may_sleep;
	int nev;

	pthread_rwlock_rdlock(&ibvd_objects_lock);
	may_sleep = ibvd_eng_db_arm(eng->dbs, eng->nctx);
	next = ibvd_eng_timer_next(&eng->timers);
	parked = ibvd_eng_park_next(eng);
	if (parked && (!next || parked < next))
		next = parked;
	now = ibvd_eng_now();
	if (may_sleep && next && next <= now) {
		ibvd_eng_db_disarm(eng->dbs, eng->nctx);
		may_sleep = false;
	}
	/* Under the lock: a context attached meanwhile copies this. */
	eng->armed = may_sleep;
	pthread_rwlock_unlock(&ibvd_objects_lock);
	if (!may_sleep)
		return;
	if (next) {
		uint64_t d = next - now;

		ts.tv_sec = (time_t)(d / 1000000000ull);
		ts.tv_nsec = (long)(d % 1000000000ull);
		tsp = &ts;
	}
	eng_count(&eng->sleeps, 1);
	/*
	 * Edge-triggered eventfds that nobody reads: every write queues one
	 * event, so a kick made at any time since the last wait wakes us,
	 * and an event can never point at a context freed since.
	 */
	nev = epoll_pwait2(eng->epfd, ev, (int)(sizeof(ev) / sizeof(ev[0])), tsp,
			   NULL);
	/* A kick or a packet, not the timer, ended the sleep. */
	if (nev > 0)
		eng_count(&eng->wakeups, 1);
	__atomic_store_n(&eng->rx_due, true, __ATOMIC_RELAXED);
	if (nev < 0 && errno != EINTR)
		log_warn("engine %u: epoll_pwait2: %s", eng->index, strerror(errno));
}

/*
 * Ask the scheduler for short slices (EEVDF, Linux 6.12+): a woken engine
 * thread then preempts a client that busy-polls on its CPU at once, rather
 * than at the end of that client's slice, which on a small machine is
 * whole milliseconds per message.  Unprivileged; older kernels ignore or
 * refuse it, which is harmless.
 */
static void short_slices(void)
{
	/* struct sched_attr (sched_setattr(2)); glibc has no wrapper. */
	struct {
		uint32_t size, sched_policy;
		uint64_t sched_flags;
		int32_t sched_nice;
		uint32_t sched_priority;
		uint64_t sched_runtime, sched_deadline, sched_period;
		uint32_t sched_util_min, sched_util_max;
	} attr;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.sched_policy = SCHED_OTHER;
	attr.sched_nice = getpriority(PRIO_PROCESS, 0);
	attr.sched_runtime = ENG_SLICE_NS;
	if (syscall(SYS_sched_setattr, 0, &attr, 0) < 0)
		log_debug("engine: no custom scheduler slice: %s", strerror(errno));
}

/*
 * Between passes the control thread may count WQEs it finished for us
 * (eng_count under the write lock): read the count whole.
 */
static uint64_t wqes_so_far(struct ibvd_engine *eng)
{
	return __atomic_load_n(&eng->wqes, __ATOMIC_RELAXED);
}

/*
 * How long to spin, now that the thread has run out of work; wqes: its
 * WQE count when it last woke up.  A wakeup that was only the control
 * thread's (a QP changed state) ran no WQE and promises no traffic: a
 * client setting up connections, whose every call is a round trip with
 * the control thread, needs that CPU more (cmtime, bench/scale).
 */
static uint64_t idle_budget(struct ibvd_engine *eng, uint64_t wqes)
{
	bool control = __atomic_exchange_n(&eng->control_kick, false,
					   __ATOMIC_RELAXED);

	if (spin_ns)
		return spin_ns;
	if (control && wqes_so_far(eng) == wqes)
		return ENG_SPIN_CONTENDED_NS;
	if (!ibvd_eng_crowded(&eng->load, eng->now))
		return ENG_SPIN_NS;
	eng_count(&eng->crowded, 1);
	return ENG_SPIN_CONTENDED_NS;
}

static void *engine_main(void *arg)
{
	struct ibvd_engine *eng = arg;
	uint64_t idle_since = 0, budget = 0, woke_wqes = 0;
	char name[24];

	short_slices();
	ibvd_eng_mem_calls = &eng->mem_calls;
	snprintf(name, sizeof(name), "engine thread %u", eng->index);
	ibvd_copy_watch_thread(name);
	while (!__atomic_load_n(&eng->stop, __ATOMIC_ACQUIRE)) {
		if (engine_pass(eng)) {
			idle_since = 0;
			continue;
		}
		if (!idle_since) {
			idle_since = eng->now;
			budget = idle_budget(eng, woke_wqes);
		}
		if (eng->now - idle_since < budget) {
			cpu_relax();
			continue;
		}
		engine_sleep(eng);
		idle_since = 0;
		woke_wqes = wqes_so_far(eng);
	}
	return NULL;
}

/* ---- start and stop ----------------------------------------------------- */

static int epoll_add(int epfd, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

static void engine_free(struct ibvd_engine *eng)
{
	rx_leave_all(eng);
	if (eng->rx_epfd >= 0)
		close(eng->rx_epfd);
	if (eng->epfd >= 0)
		close(eng->epfd);
	if (eng->wake_fd >= 0)
		close(eng->wake_fd);
	ibvd_eng_load_fini(&eng->load);
	free(eng->bounce);
	free(eng->wqe_buf);
	free(eng->dbs);
	free(eng->ectxs);
	ibvd_eng_timer_free(&eng->timers);
	ibvd_eng_park_free(&eng->park);
}

static int engine_init(struct ibvd_engine *eng, unsigned int index)
{
	struct epoll_event rx_ev = { .events = EPOLLIN,
				     .data.u64 = RX_EPOLL_TAG };

	eng->index = index;
	eng->epfd = epoll_create1(EPOLL_CLOEXEC);
	eng->rx_epfd = epoll_create1(EPOLL_CLOEXEC);
	eng->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (eng->epfd < 0 || eng->rx_epfd < 0 || eng->wake_fd < 0)
		return -errno;
	if (epoll_add(eng->epfd, eng->wake_fd) < 0)
		return -errno;
	/* Level-triggered: asleep with packets waiting, we do not sleep. */
	if (epoll_ctl(eng->epfd, EPOLL_CTL_ADD, eng->rx_epfd, &rx_ev) < 0)
		return -errno;
	ibvd_eng_load_init(&eng->load);
	eng->bounce = aligned_alloc(IBVD_PAGE_SIZE, ENG_BOUNCE_BYTES);
	if (!eng->bounce || ibvd_eng_scratch(eng, IBVD_PAGE_SIZE) < 0)
		return -ENOMEM;
	return 0;
}

static int spawn(struct ibvd_engine *eng)
{
	char name[16];

	snprintf(name, sizeof(name), "ibvd-engine%u", eng->index);
	return ibvd_thread_spawn(&eng->thread, NULL, engine_main, eng, name);
}

/*
 * IBVERBSD_ENGINE_SPIN_US fixes the idle budget, saturated CPUs or not
 * (for benchmarking the trade-off).  0 when unset or invalid.
 */
static uint64_t spin_fixed(void)
{
	unsigned long us;

	if (!ibvd_env_number("IBVERBSD_ENGINE_SPIN_US", 0, 1000000, &us))
		return 0;
	return (uint64_t)us * 1000 + 1;
}

/*
 * IBVERBSD_ENGINE_CHUNK_KB sets the chunk size (chunk.c) in KiB, and the
 * turn budget with it; 0 switches chunking off and restores the 4 MiB
 * budget, so that a benchmark can show what chunking changes.
 */
static void chunk_config(void)
{
	const char *v = getenv("IBVERBSD_ENGINE_CHUNK_KB");
	unsigned long kb;

	if (!v || !*v)
		return;
	if (!ibvd_env_number("IBVERBSD_ENGINE_CHUNK_KB", 0, 1ul << 20, &kb)) {
		log_warn("engine: ignoring IBVERBSD_ENGINE_CHUNK_KB=%s", v);
		return;
	}
	ibvd_eng_chunk_bytes = kb ? (uint64_t)kb << 10 : UINT64_MAX;
	ibvd_eng_turn_bytes = kb ? (uint64_t)kb << 10 : ENG_UNCHUNKED_BUDGET_BYTES;
	log_info("engine: chunks of %lu KiB%s", kb, kb ? "" : " (chunking off)");
}

const struct ibvd_engine_events *ibvd_eng_events;

/*
 * "auto" (0): one thread per CPU we may run on, less one for the control
 * thread and the clients themselves, and at least one.  Engine threads
 * spin only while they have work, so an idle one costs nothing.
 */
static unsigned int auto_threads(void)
{
	cpu_set_t set;
	int ncpus = 0;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		ncpus = CPU_COUNT(&set);
	if (ncpus <= 0)
		ncpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpus - 1 > IBVD_ENGINE_MAX_THREADS)
		return IBVD_ENGINE_MAX_THREADS;
	return ncpus > 2 ? (unsigned int)ncpus - 1 : 1;
}

static int engines_start(unsigned int nthreads,
			 const struct ibvd_engine_events *events)
{
	unsigned int i;
	int ret;

	ibvd_eng_events = events;
	if (!nthreads)
		nthreads = auto_threads();
	spin_ns = spin_fixed();
	chunk_config();
	engines = calloc(nthreads, sizeof(*engines));
	if (!engines)
		return -ENOMEM;
	for (i = 0; i < nthreads; i++) {
		engines[i].epfd = engines[i].rx_epfd = engines[i].wake_fd = -1;
		engines[i].load.stat_fd = engines[i].load.loadavg_fd = -1;
		ret = engine_init(&engines[i], i);
		if (ret == 0 && threaded)
			ret = spawn(&engines[i]);
		if (ret < 0) {
			engine_free(&engines[i]);
			nengines = i;
			ibvd_engine_stop();
			return ret;
		}
	}
	nengines = nthreads;
	log_info("%u engine thread%s", nthreads, nthreads == 1 ? "" : "s");
	ret = rx_start_waiting();
	if (ret < 0) {
		ibvd_engine_stop();
		return ret;
	}
	return 0;
}

int ibvd_engine_start(unsigned int nthreads,
		      const struct ibvd_engine_events *events)
{
	threaded = true;
	return engines_start(nthreads, events);
}

int ibvd_engine_start_unthreaded(unsigned int nengines_wanted,
				 const struct ibvd_engine_events *events)
{
	threaded = false;
	return engines_start(nengines_wanted ? nengines_wanted : 1, events);
}

unsigned int ibvd_engine_run_passes(unsigned int max_passes)
{
	unsigned int i, n = 0;
	bool busy = true;

	while (busy && n < max_passes) {
		busy = false;
		for (i = 0; i < nengines; i++)
			busy |= engine_pass(&engines[i]);
		n++;
	}
	return n;
}

void ibvd_engine_stop(void)
{
	uint64_t one = 1;
	unsigned int i;

	for (i = 0; i < nengines && threaded; i++) {
		__atomic_store_n(&engines[i].stop, true, __ATOMIC_RELEASE);
		if (write(engines[i].wake_fd, &one, sizeof(one)) < 0)
			log_warn("engine %u: cannot wake it: %s", i, strerror(errno));
	}
	for (i = 0; i < nengines; i++) {
		if (threaded)
			pthread_join(engines[i].thread, NULL);
		log_debug("engine %u: %llu passes, %llu WQEs, %llu sleeps, "
			  "%llu crowded idle periods", i,
			  (unsigned long long)engines[i].passes,
			  (unsigned long long)engines[i].wqes,
			  (unsigned long long)engines[i].sleeps,
			  (unsigned long long)engines[i].crowded);
		engine_free(&engines[i]);
	}
	free(engines);
	engines = NULL;
	nengines = 0;
}

unsigned int ibvd_engine_threads(void)
{
	return nengines;
}

struct ibvd_engine *ibvd_eng_nth(unsigned int index)
{
	return index < nengines ? &engines[index] : NULL;
}

static unsigned int ctx_count(const struct ibvd_engine *eng)
{
	return eng->nctx;
}

/*
 * The thread serving the fewest contexts (the lowest index among equals),
 * so contexts stay spread when others close.  The control thread calls
 * it, and only the control thread changes nctx.
 */
struct ibvd_engine *ibvd_eng_pick(void)
{
	return fewest(ctx_count);
}

int ibvd_eng_watch(struct ibvd_engine *eng, int fd)
{
	return epoll_add(eng->epfd, fd);
}

void ibvd_eng_unwatch(struct ibvd_engine *eng, int fd)
{
	epoll_ctl(eng->epfd, EPOLL_CTL_DEL, fd, NULL);
}

/* A wire transport's state of qp goes with its messages. */
static void transport_forget(struct ibvd_qp *qp)
{
	const struct ibvd_transport *t = ibvd_eng_transport(qp);

	if (t && t->qp_forget)
		t->qp_forget(qp);
	qp->answered = 0;
}

int ibvd_engine_qp_prepare(struct ibvd_qp *qp, size_t *bytes)
{
	const struct ibvd_transport *t = ibvd_eng_transport(qp);

	*bytes = 0;
	if (!t || !t->qp_prepare || qp->qp_type == IBV_QPT_UD ||
	    qp->qp_type == IBV_QPT_RAW_PACKET)
		return 0;
	return t->qp_prepare(qp, bytes);
}

void ibvd_engine_qp_unprepare(struct ibvd_qp *qp)
{
	transport_forget(qp);
}

void ibvd_engine_qp_av_changed(struct ibvd_qp *qp)
{
	const struct ibvd_transport *t = ibvd_eng_transport(qp);

	if (t && t->qp_av_changed)
		t->qp_av_changed(qp);
}

void ibvd_engine_qp_psns(const struct ibvd_qp *qp, uint32_t *sq_psn,
			 uint32_t *rq_psn)
{
	const struct ibvd_transport *t = ibvd_eng_transport(qp);

	*sq_psn = qp->attr.sq_psn;
	*rq_psn = qp->attr.rq_psn;
	if (t && t->qp_psns)
		t->qp_psns(qp, sq_psn, rq_psn);
}

void ibvd_engine_qp_reset(struct ibvd_qp *qp)
{
	/* First: forgetting a chunked receive may flush its SRQ WQE. */
	ibvd_eng_chunk_forget(qp);
	transport_forget(qp);
	qp->incarnation++;
	ibvd_eng_cq_purge(qp->send_cq, qp);
	if (qp->recv_cq != qp->send_cq)
		ibvd_eng_cq_purge(qp->recv_cq, qp);
}

void ibvd_engine_qp_destroy(struct ibvd_qp *qp)
{
	struct ibvd_engine *eng = ibvd_eng_of(qp);

	ibvd_eng_chunk_forget(qp);
	transport_forget(qp);
	/*
	 * Its CQEs go with it, as a NIC's provider cleans its CQs: an app
	 * that closes a connection and then drains the CQ (libfabric's rxm)
	 * must not meet the QP again.  An SRQ's receives stay (their WQEs
	 * are the SRQ's).
	 */
	ibvd_eng_cq_purge(qp->send_cq, qp);
	if (qp->recv_cq != qp->send_cq)
		ibvd_eng_cq_purge(qp->recv_cq, qp);
	/* The heap points at qp (a detached context's QPs left it already). */
	if (eng)
		ibvd_eng_timer_cancel(&eng->timers, qp);
	free(qp->inbound);
	qp->inbound = NULL;
}

void ibvd_engine_xrc_owner_leaves(struct ibvd_qp *tgt)
{
	struct ibvd_engine *eng = ibvd_eng_of(tgt);

	if (eng)
		ibvd_eng_timer_cancel(&eng->timers, tgt);
}

void ibvd_engine_xrc_owner_came(struct ibvd_qp *tgt)
{
	ibvd_eng_qp_ring(tgt);
}

void ibvd_eng_answered(struct ibvd_qp *qp)
{
	__atomic_store_n(&qp->answered, 1, __ATOMIC_RELEASE);
	ibvd_eng_qp_ring(qp);
}

void ibvd_eng_turn_soon(struct ibvd_qp *qp)
{
	ibvd_eng_qp_ring(qp);
}

void ibvd_engine_qp_kick(struct ibvd_qp *qp)
{
	/*
	 * Before MODIFY_QP's reply: once the app knows the QP is in ERR, its
	 * receive posts must already see that they need the doorbell.
	 */
	struct ibvd_ectx *ectx = qp->ctx->engine;

	ibvd_eng_mark_stopped(qp);
	if (ectx && ectx->eng)
		__atomic_store_n(&ectx->eng->control_kick, true, __ATOMIC_RELAXED);
	ibvd_eng_qp_ring(qp);
}
