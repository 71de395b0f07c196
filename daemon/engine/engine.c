/*
 * Engine threads: the poll / spin / sleep loop, and attaching contexts.
 *
 * Each thread serves a set of contexts.  A pass takes ibvd_objects_lock for
 * reading (so nothing it reaches can be destroyed under it, and the control
 * thread waits at most one pass to change objects), drains the doorbells
 * of its contexts, runs each rung QP for one turn, and fires due timers.
 * Only rung QPs are looked at: 10,000 idle QPs cost nothing.
 *
 * A thread whose passes find nothing spins for ENG_SPIN_NS (a pause per
 * pass), which keeps ping-pong latency free of wakeups, then sleeps in
 * epoll on its contexts' kick eventfds, with the nearest timer as timeout
 * (doorbell.c explains why no wakeup is lost).  Asleep it costs no CPU.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "barrier.h"
#include "context.h"
#include "engine.h"
#include "internal.h"
#include "log.h"

static struct ibvd_engine *engines;
static unsigned int nengines;
static unsigned int next_engine;	/* round-robin for new contexts */
static uint64_t spin_ns = ENG_SPIN_NS;	/* idle budget before sleeping */

uint64_t ibvd_eng_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Tell the core we are spinning (lets an SMT sibling or the host run). */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
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
	if (ectx && ectx->eng)
		ibvd_eng_db_ring(&ectx->db, qp->doorbell);
}

void ibvd_eng_qp_wait(struct ibvd_engine *eng, struct ibvd_qp *qp,
		      uint64_t deadline)
{
	if (ibvd_eng_timer_add(&eng->timers, deadline, qp->qp_num) < 0) {
		/* No memory for a timer: retry at once rather than never. */
		qp->rnr_deadline_ns = 0;
		ibvd_eng_qp_ring(qp);
		return;
	}
	qp->rnr_deadline_ns = deadline;
}

/* ---- one pass ------------------------------------------------------------ */

struct pass {
	struct ibvd_engine *eng;
	struct ibvd_context *ctx;
};

static void rung(uint32_t bit, void *arg)
{
	struct pass *p = arg;
	/* Any bit may be rung by a client: only its own QPs' bits find one. */
	struct ibvd_qp *qp = ibvd_qp_by_doorbell(p->ctx, bit);

	if (qp)
		ibvd_eng_qp_run(p->eng, qp, p->eng->now);
}

static unsigned int run_timers(struct ibvd_engine *eng)
{
	struct eng_timer t;
	unsigned int n = 0;

	while (ibvd_eng_timer_pop(&eng->timers, eng->now, &t)) {
		struct ibvd_qp *qp = ibvd_qp_by_num(t.qp_num);

		/* Gone, moved, or waiting for a later deadline: stale. */
		if (!qp || ibvd_eng_of(qp) != eng || !qp->rnr_deadline_ns ||
		    qp->rnr_deadline_ns > eng->now)
			continue;
		ibvd_eng_qp_run(eng, qp, eng->now);
		n++;
	}
	return n;
}

/* Returns true if anything was found to do. */
static bool engine_pass(struct ibvd_engine *eng)
{
	struct pass p = { .eng = eng };
	unsigned int i, n = 0;

	pthread_rwlock_rdlock(&ibvd_objects_lock);
	eng->now = ibvd_eng_now();
	if (eng->armed) {
		ibvd_eng_db_disarm(eng->dbs, eng->nctx);
		eng->armed = false;
	}
	for (i = 0; i < eng->nctx; i++) {
		p.ctx = eng->ectxs[i]->ctx;
		n += ibvd_eng_db_drain(eng->dbs[i], rung, &p);
	}
	n += run_timers(eng);
	pthread_rwlock_unlock(&ibvd_objects_lock);
	eng->passes++;
	return n > 0;
}

/* ---- sleeping ------------------------------------------------------------ */

static void engine_sleep(struct ibvd_engine *eng)
{
	struct epoll_event ev[16];
	struct timespec ts, *tsp = NULL;
	uint64_t next, now;
	bool may_sleep;

	pthread_rwlock_rdlock(&ibvd_objects_lock);
	may_sleep = ibvd_eng_db_arm(eng->dbs, eng->nctx);
	next = ibvd_eng_timer_next(&eng->timers);
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
	eng->sleeps++;
	/*
	 * Edge-triggered eventfds that nobody reads: every write queues one
	 * event, so a kick made at any time since the last wait wakes us,
	 * and an event can never point at a context freed since.
	 */
	if (epoll_pwait2(eng->epfd, ev, (int)(sizeof(ev) / sizeof(ev[0])), tsp,
			 NULL) < 0 && errno != EINTR)
		log_warn("engine %u: epoll_pwait2: %s", eng->index, strerror(errno));
}

/*
 * Are the CPUs saturated?  Then spinning idle keeps a runnable thread,
 * likely a client polling its CQ for what we just completed, off the CPU
 * it needs (perf-anchors: a third spinner on two CPUs costs whole
 * scheduler slices), and it is better to sleep at once and be kicked.
 * When some CPU has idle time (clients that block in ibv_get_cq_event),
 * spinning costs nobody anything and saves the wakeups.  The verdict comes
 * from the idle share in /proc/stat over the last ENG_LOAD_WINDOW_NS
 * (a 3 us read, at most once per window).
 */
static bool cpus_saturated(struct ibvd_engine *eng)
{
	unsigned long long v[8] = { 0 }, total = 0, idle;
	char buf[256];
	ssize_t n;
	int i;

	if (eng->stat_fd < 0 || eng->now - eng->load_checked < ENG_LOAD_WINDOW_NS)
		return eng->saturated;
	eng->load_checked = eng->now;
	n = pread(eng->stat_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return eng->saturated;
	buf[n] = '\0';
	/* cpu  user nice system idle iowait irq softirq steal */
	if (sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
		   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) < 4)
		return eng->saturated;
	for (i = 0; i < 8; i++)
		total += v[i];
	idle = v[3] + v[4];
	/* Less than a tenth idle (or no sample yet to compare with). */
	eng->saturated = eng->stat_total && total > eng->stat_total &&
			 (idle - eng->stat_idle) * 10 < total - eng->stat_total;
	eng->stat_total = total;
	eng->stat_idle = idle;
	return eng->saturated;
}

static void *engine_main(void *arg)
{
	struct ibvd_engine *eng = arg;
	uint64_t idle_since = 0, budget = 0;

	while (!__atomic_load_n(&eng->stop, __ATOMIC_ACQUIRE)) {
		if (engine_pass(eng)) {
			idle_since = 0;
			continue;
		}
		if (!idle_since) {
			idle_since = eng->now;
			budget = cpus_saturated(eng) ? ENG_SPIN_CONTENDED_NS : spin_ns;
		}
		if (eng->now - idle_since < budget) {
			cpu_relax();
			continue;
		}
		engine_sleep(eng);
		idle_since = 0;
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
	if (eng->epfd >= 0)
		close(eng->epfd);
	if (eng->wake_fd >= 0)
		close(eng->wake_fd);
	if (eng->stat_fd >= 0)
		close(eng->stat_fd);
	free(eng->bounce);
	free(eng->wqe_buf);
	free(eng->dbs);
	free(eng->ectxs);
	ibvd_eng_timer_free(&eng->timers);
}

static int engine_init(struct ibvd_engine *eng, unsigned int index)
{
	eng->index = index;
	eng->epfd = epoll_create1(EPOLL_CLOEXEC);
	eng->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (eng->epfd < 0 || eng->wake_fd < 0)
		return -errno;
	if (epoll_add(eng->epfd, eng->wake_fd) < 0)
		return -errno;
	/* Without it (no procfs) the thread simply never thinks it crowds. */
	eng->stat_fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
	eng->bounce = aligned_alloc(IBVD_PAGE_SIZE, ENG_BOUNCE_BYTES);
	if (!eng->bounce || ibvd_eng_scratch(eng, IBVD_PAGE_SIZE) < 0)
		return -ENOMEM;
	return 0;
}

/* Engine threads take no signals: the control thread's loop handles them. */
static int spawn(struct ibvd_engine *eng)
{
	sigset_t all, old;
	char name[16];
	int ret;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = -pthread_create(&eng->thread, NULL, engine_main, eng);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret == 0) {
		snprintf(name, sizeof(name), "ibvd-engine%u", eng->index);
		pthread_setname_np(eng->thread, name);
	}
	return ret;
}

/* IBVERBSD_ENGINE_SPIN_US overrides the idle budget (benchmarking). */
static uint64_t spin_budget(void)
{
	const char *v = getenv("IBVERBSD_ENGINE_SPIN_US");
	char *end;
	unsigned long us;

	if (!v || !*v)
		return ENG_SPIN_NS;
	us = strtoul(v, &end, 10);
	if (*end || us > 1000000)
		return ENG_SPIN_NS;
	return (uint64_t)us * 1000;
}

int ibvd_engine_start(unsigned int nthreads)
{
	unsigned int i;
	int ret;

	if (!nthreads)
		nthreads = 1;
	spin_ns = spin_budget();
	engines = calloc(nthreads, sizeof(*engines));
	if (!engines)
		return -ENOMEM;
	for (i = 0; i < nthreads; i++) {
		engines[i].epfd = engines[i].wake_fd = engines[i].stat_fd = -1;
		ret = engine_init(&engines[i], i);
		if (ret == 0)
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
	return 0;
}

void ibvd_engine_stop(void)
{
	uint64_t one = 1;
	unsigned int i;

	for (i = 0; i < nengines; i++) {
		__atomic_store_n(&engines[i].stop, true, __ATOMIC_RELEASE);
		if (write(engines[i].wake_fd, &one, sizeof(one)) < 0)
			log_warn("engine %u: cannot wake it: %s", i, strerror(errno));
	}
	for (i = 0; i < nengines; i++) {
		pthread_join(engines[i].thread, NULL);
		log_debug("engine %u: %llu passes, %llu WQEs, %llu sleeps", i,
			  (unsigned long long)engines[i].passes,
			  (unsigned long long)engines[i].wqes,
			  (unsigned long long)engines[i].sleeps);
		engine_free(&engines[i]);
	}
	free(engines);
	engines = NULL;
	nengines = 0;
}

/* ---- contexts ----------------------------------------------------------- */

/* Make room for one more context (objects lock held for writing). */
static int grow(struct ibvd_engine *eng)
{
	unsigned int cap = eng->cap ? 2 * eng->cap : 16;
	struct eng_doorbell **dbs;
	struct ibvd_ectx **ectxs;

	if (eng->nctx < eng->cap)
		return 0;
	dbs = realloc(eng->dbs, cap * sizeof(*dbs));
	if (!dbs)
		return -ENOMEM;
	eng->dbs = dbs;
	ectxs = realloc(eng->ectxs, cap * sizeof(*ectxs));
	if (!ectxs)
		return -ENOMEM;
	eng->ectxs = ectxs;
	eng->cap = cap;
	return 0;
}

static int attach(struct ibvd_ectx *ectx, struct ibvd_engine *eng)
{
	int ret;

	ret = epoll_add(eng->epfd, ectx->db.kick_fd);
	if (ret < 0)
		return ret;
	ibvd_objects_write_lock();
	ret = grow(eng);
	if (ret == 0) {
		ectx->slot = eng->nctx++;
		eng->dbs[ectx->slot] = &ectx->db;
		eng->ectxs[ectx->slot] = ectx;
		ectx->eng = eng;
		/* If the thread sleeps, the client must kick it from the start. */
		ibvd_write_once(&ectx->db.engine_page->sleeping, eng->armed);
	}
	ibvd_objects_write_unlock();
	if (ret < 0)
		epoll_ctl(eng->epfd, EPOLL_CTL_DEL, ectx->db.kick_fd, NULL);
	return ret;
}

int ibvd_engine_ctx_open(struct ibvd_context *ctx, int *page_fd, int *kick_fd)
{
	struct ibvd_ectx *ectx;
	int ret;

	if (!nengines)
		return -ENODEV;
	ectx = calloc(1, sizeof(*ectx));
	if (!ectx)
		return -ENOMEM;
	ectx->ctx = ctx;
	ret = ibvd_eng_db_create(&ectx->db, page_fd);
	if (ret < 0)
		goto fail;
	ret = attach(ectx, &engines[next_engine++ % nengines]);
	if (ret < 0) {
		close(*page_fd);
		ibvd_eng_db_destroy(&ectx->db);
		goto fail;
	}
	ctx->engine = ectx;
	*kick_fd = ectx->db.kick_fd;
	return 0;
fail:
	free(ectx);
	return ret;
}

/*
 * Remember the RC peers (in other contexts) of ctx's QPs, so that they can
 * be told after the QPs are gone (ibvd_engine_ctx_free).
 */
static int note_orphan(uint32_t handle, enum ibvd_obj_kind kind, void *obj,
		       void *arg)
{
	struct ibvd_ectx *ectx = arg;
	struct ibvd_qp *qp = obj, *peer;
	struct eng_orphan *o;

	if (qp->qp_type != IBV_QPT_RC)
		return 0;
	peer = ibvd_eng_route(qp, qp->attr.dest_qp_num, &qp->attr.av);
	if (!peer || peer->ctx == qp->ctx || peer->qp_type != IBV_QPT_RC ||
	    peer->attr.dest_qp_num != qp->qp_num)
		return 0;
	o = realloc(ectx->orphans, (ectx->norphans + 1) * sizeof(*o));
	if (!o)
		return 0;	/* that peer will learn on its next send */
	ectx->orphans = o;
	o[ectx->norphans].survivor = peer->qp_num;
	o[ectx->norphans].dead = qp->qp_num;
	ectx->norphans++;
	return 0;
}

/*
 * The dead QPs are destroyed: break the connections of their peers, which
 * would otherwise wait forever for messages that cannot come (an RC peer
 * with a send outstanding would time out; one only waiting to receive
 * would not).
 */
static void break_orphans(struct ibvd_ectx *ectx)
{
	unsigned int i;

	ibvd_objects_write_lock();
	for (i = 0; i < ectx->norphans; i++) {
		struct ibvd_qp *s = ibvd_qp_by_num(ectx->orphans[i].survivor);

		if (!s || s->qp_type != IBV_QPT_RC ||
		    s->attr.dest_qp_num != ectx->orphans[i].dead ||
		    ibvd_qp_by_num(ectx->orphans[i].dead))
			continue;
		s->peer_gone = true;
		ibvd_eng_qp_ring(s);
	}
	ibvd_objects_write_unlock();
	free(ectx->orphans);
	ectx->orphans = NULL;
	ectx->norphans = 0;
}

void ibvd_engine_ctx_detach(struct ibvd_context *ctx)
{
	struct ibvd_ectx *ectx = ctx->engine;
	struct ibvd_engine *eng;

	if (!ectx || !ectx->eng)
		return;
	eng = ectx->eng;
	ibvd_objects_write_lock();
	ibvd_handle_foreach(&ctx->handles, IBVD_OBJ_QP, note_orphan, ectx);
	/* Move the last context into the freed slot. */
	eng->nctx--;
	if (ectx->slot != eng->nctx) {
		eng->dbs[ectx->slot] = eng->dbs[eng->nctx];
		eng->ectxs[ectx->slot] = eng->ectxs[eng->nctx];
		eng->ectxs[ectx->slot]->slot = ectx->slot;
	}
	ectx->eng = NULL;
	ibvd_objects_write_unlock();
	epoll_ctl(eng->epfd, EPOLL_CTL_DEL, ectx->db.kick_fd, NULL);
}

void ibvd_engine_ctx_free(struct ibvd_context *ctx)
{
	struct ibvd_ectx *ectx = ctx->engine;

	if (!ectx)
		return;
	ibvd_engine_ctx_detach(ctx);
	break_orphans(ectx);
	ibvd_eng_db_destroy(&ectx->db);
	free(ectx);
	ctx->engine = NULL;
}

void ibvd_engine_qp_kick(struct ibvd_qp *qp)
{
	/*
	 * Before MODIFY_QP's reply: once the app knows the QP is in ERR, its
	 * receive posts must already see that they need the doorbell.
	 */
	ibvd_eng_mark_stopped(qp);
	ibvd_eng_qp_ring(qp);
}
