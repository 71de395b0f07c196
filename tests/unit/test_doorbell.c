/*
 * The doorbell / sleep protocol of the context page (ring.h,
 * daemon/engine/doorbell.c): no wakeup may ever be lost.
 *
 * An "engine" thread runs the engine's half with the engine's own code
 * (drain, arm, disarm, edge-triggered epoll on never-read eventfds) and a
 * spin budget drawn at random, often zero so that it arms right after
 * every drain.  A client thread posts work the way the client library
 * does (publish a counter, set the doorbell and summary bits, full fence,
 * kick the eventfd if the engine says it may sleep), every other time
 * through ibvd_eng_db_ring (the engine's and control path's own ringing,
 * which wakes the engine through an eventfd of its own),
 * with random pauses that land on every phase of the engine's loop, and
 * waits for the engine to acknowledge.  A lost wakeup shows as a post that
 * is never acknowledged: the engine sleeps with no timeout.
 *
 * IBVD_DOORBELL_SECONDS sets the run time (default 3; the engine
 * engineer's stress run uses hundreds).
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "barrier.h"
#include "daemon/engine/internal.h"
#include "tests/common/check_run.h"

#define NDB		3		/* contexts served by the engine */
/*
 * One client: with several, one client's kick would wake the engine for
 * another's lost one and hide it.
 */
#define NCLIENTS	1
#define BITS_PER_DB	4		/* doorbell bits used per context */
/*
 * A lost wakeup never heals (the engine sleeps with no timeout and nobody
 * else posts), a starved thread on a busy machine does: wait long enough
 * to tell them apart.
 */
#define LOST_NS		(30ull * 1000 * 1000 * 1000)

struct slot {
	uint64_t posted;		/* client: posts so far (the "tail") */
	uint64_t acked;			/* engine: posts it has seen */
};

static struct eng_doorbell dbs[NDB];
static struct eng_doorbell *dbp[NDB];
static struct slot slots[NDB][BITS_PER_DB * 64];
static int epfd, stop_fd, wake_fd;
static bool stop;
static uint64_t max_wait_ns, sleeps, posts;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void pause_ns(uint64_t ns)
{
	uint64_t end = now_ns() + ns;

	while (now_ns() < end)
		;
}

/* ---- the engine side ---------------------------------------------------- */

struct drain_arg {
	unsigned int db;
};

static void seen(uint32_t bit, void *arg)
{
	struct drain_arg *a = arg;
	struct slot *s;

	ck_assert_uint_lt(bit, BITS_PER_DB * 64);
	s = &slots[a->db][bit];
	/* Acquire the tail the bit stands for, acknowledge it. */
	ibvd_publish(&s->acked, ibvd_observe(&s->posted));
}

static unsigned int resume_seed = 7;	/* the engine thread's */

static unsigned int engine_pass(void)
{
	unsigned int i, n = 0;

	for (i = 0; i < NDB; i++) {
		struct drain_arg a = { .db = i };

		/* anywhere: the engine resumes where a tenant's share ran out */
		dbs[i].resume = (uint32_t)rand_r(&resume_seed) % (BITS_PER_DB * 64);
		n += ibvd_eng_db_drain(&dbs[i], seen, &a);
	}
	return n;
}

static void *engine_main(void *arg)
{
	unsigned int seed = 1;
	struct epoll_event ev[4];

	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		uint64_t budget, idle;

		if (engine_pass())
			continue;
		/* Spin a random budget, zero half of the time. */
		budget = rand_r(&seed) % 2 ? 0 : (uint64_t)(rand_r(&seed) % 20000);
		idle = now_ns();
		while (now_ns() - idle < budget && !engine_pass())
			;
		if (now_ns() - idle < budget)
			continue;
		/*
		 * Posts that land between the last drain and the arming are the
		 * ones a broken protocol loses; a real engine can be preempted
		 * right here, so widen that window now and then.
		 */
		if (rand_r(&seed) % 4 == 0)
			pause_ns(rand_r(&seed) % 3000);
		if (!ibvd_eng_db_arm(dbp, NDB))
			continue;
		__atomic_add_fetch(&sleeps, 1, __ATOMIC_RELAXED);
		epoll_wait(epfd, ev, 4, -1);
		ibvd_eng_db_disarm(dbp, NDB);
	}
	return NULL;
}

/* ---- the client side ----------------------------------------------------- */

/* As client/libibverbs/queue.c does it (ring.h). */
static void client_ring(struct eng_doorbell *db, uint32_t bit)
{
	uint32_t word = bit / 64;
	uint64_t one = 1;

	ibvd_fetch_or(&db->client_page->doorbell[word], (uint64_t)1 << (bit % 64));
	ibvd_fetch_or(&db->client_page->summary[word / 64], (uint64_t)1 << (word % 64));
	ibvd_full_fence();
	if (ibvd_read_once(&db->engine_page->sleeping) &&
	    write(db->kick_fd, &one, sizeof(one)) < 0)
		ck_assert_int_eq(errno, EAGAIN);
}

/*
 * As the daemon's own rings do it (engine.c): the engine's own eventfd,
 * never the client's kick eventfd, wakes a thread that may sleep.
 */
static void daemon_ring(struct eng_doorbell *db, uint32_t bit)
{
	uint64_t one = 1;

	if (ibvd_eng_db_ring(db, bit) && write(wake_fd, &one, sizeof(one)) < 0)
		ck_assert_int_eq(errno, EAGAIN);
}

/* Random pause: mostly short (racing with the engine's arming), some long. */
static void client_pause(unsigned int *seed)
{
	unsigned int r = rand_r(seed) % 100;

	if (r < 40)
		return;
	if (r < 80)
		pause_ns(rand_r(seed) % 5000);
	else if (r < 97)
		pause_ns(rand_r(seed) % 60000);
	else
		usleep(rand_r(seed) % 2000);
}

static void *client_main(void *arg)
{
	unsigned int id = (unsigned int)(uintptr_t)arg, seed = id * 7919 + 1;
	uint64_t end = now_ns() + (uint64_t)atoi(getenv("IBVD_DOORBELL_SECONDS") ?
					       getenv("IBVD_DOORBELL_SECONDS") : "3") *
					  1000000000ull;

	while (now_ns() < end) {
		unsigned int db = rand_r(&seed) % NDB;
		/* Each client owns its own bits, as each queue has one producer. */
		uint32_t bit = (rand_r(&seed) % (BITS_PER_DB * 64 / NCLIENTS)) * NCLIENTS + id;
		struct slot *s = &slots[db][bit];
		uint64_t v = s->posted + 1, t0;

		client_pause(&seed);
		ibvd_publish(&s->posted, v);	/* the "tail", then the bell */
		t0 = now_ns();
		if (v % 2)
			daemon_ring(&dbs[db], bit);
		else
			client_ring(&dbs[db], bit);
		while (ibvd_observe(&s->acked) < v) {
			uint64_t w = now_ns() - t0;

			if (w > LOST_NS)
				ck_abort_msg("lost wakeup: context %u bit %u waited %llu ms",
					     db, bit, (unsigned long long)(w / 1000000));
		}
		t0 = now_ns() - t0;
		if (t0 > __atomic_load_n(&max_wait_ns, __ATOMIC_RELAXED))
			__atomic_store_n(&max_wait_ns, t0, __ATOMIC_RELAXED);
		__atomic_add_fetch(&posts, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

START_TEST(test_no_lost_wakeup)
{
	pthread_t engine, clients[NCLIENTS];
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	uint64_t one = 1;
	unsigned int i;
	int fd;

	epfd = epoll_create1(EPOLL_CLOEXEC);
	stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ck_assert_int_ge(epfd, 0);
	ck_assert_int_eq(epoll_ctl(epfd, EPOLL_CTL_ADD, stop_fd, &ev), 0);
	wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ck_assert_int_ge(wake_fd, 0);
	ck_assert_int_eq(epoll_ctl(epfd, EPOLL_CTL_ADD, wake_fd, &ev), 0);
	for (i = 0; i < NDB; i++) {
		ck_assert_int_eq(ibvd_eng_db_create(&dbs[i], &fd), 0);
		close(fd);
		dbp[i] = &dbs[i];
		ck_assert_int_eq(epoll_ctl(epfd, EPOLL_CTL_ADD, dbs[i].kick_fd, &ev), 0);
	}
	ck_assert_int_eq(pthread_create(&engine, NULL, engine_main, NULL), 0);
	for (i = 0; i < NCLIENTS; i++)
		ck_assert_int_eq(pthread_create(&clients[i], NULL, client_main,
						(void *)(uintptr_t)i), 0);
	for (i = 0; i < NCLIENTS; i++)
		pthread_join(clients[i], NULL);
	__atomic_store_n(&stop, true, __ATOMIC_RELEASE);
	ck_assert_int_eq(write(stop_fd, &one, sizeof(one)), sizeof(one));
	pthread_join(engine, NULL);
	printf("test_doorbell: %llu posts, %llu engine sleeps, max wait %llu us\n",
	       (unsigned long long)posts, (unsigned long long)sleeps,
	       (unsigned long long)(max_wait_ns / 1000));
	ck_assert_uint_gt(posts, 1000);
	ck_assert_uint_gt(sleeps, 100);
	for (i = 0; i < NDB; i++)
		ibvd_eng_db_destroy(&dbs[i]);
	close(epfd);
	close(stop_fd);
	close(wake_fd);
}
END_TEST

/* The page's layout and seals, as the client relies on them. */
START_TEST(test_page)
{
	struct eng_doorbell db;
	int fd;

	ck_assert_int_eq(ibvd_eng_db_create(&db, &fd), 0);
	ck_assert_int_eq(lseek(fd, 0, SEEK_END), IBVD_CTX_PAGE_SIZE);
	/* Sealed: nobody can shrink it under the other's mapping. */
	ck_assert_int_lt(ftruncate(fd, IBVD_PAGE_SIZE), 0);
	ck_assert_int_lt(ftruncate(fd, 4 * IBVD_PAGE_SIZE), 0);
	ck_assert_uint_eq(db.engine_page->sleeping, 0);
	close(fd);
	ibvd_eng_db_destroy(&db);
}
END_TEST

static void drain_count(uint32_t bit, void *arg)
{
	unsigned int *hits = arg;

	hits[bit]++;
}

/* Bits rung at any position come back exactly once. */
START_TEST(test_drain_all_bits)
{
	static unsigned int hits[IBVD_DOORBELL_BITS];
	struct eng_doorbell db;
	uint32_t bit;
	int fd;

	ck_assert_int_eq(ibvd_eng_db_create(&db, &fd), 0);
	close(fd);
	for (bit = 0; bit < IBVD_DOORBELL_BITS; bit += 37)
		ibvd_eng_db_ring(&db, bit);
	ibvd_eng_db_ring(&db, IBVD_DOORBELL_BITS - 1);
	memset(hits, 0, sizeof(hits));
	ck_assert_uint_gt(ibvd_eng_db_drain(&db, drain_count, hits), 400);
	for (bit = 0; bit < IBVD_DOORBELL_BITS; bit++)
		ck_assert_uint_eq(hits[bit], bit % 37 == 0 || bit == IBVD_DOORBELL_BITS - 1);
	ck_assert_uint_eq(ibvd_eng_db_drain(&db, drain_count, hits), 0);
	ibvd_eng_db_destroy(&db);
}
END_TEST

struct order {
	uint32_t bits[IBVD_DOORBELL_BITS];
	unsigned int n;
};

static void drain_order(uint32_t bit, void *arg)
{
	struct order *o = arg;

	o->bits[o->n++] = bit;
}

/*
 * A drain starts at db->resume and goes round: a busy QP's low bit must
 * not come first in every pass (the engine resumes where its tenant's
 * share ran out).  Starts in the middle of a word, on a word's first and
 * last bits, in each summary word, on a bit not rung.
 */
START_TEST(test_drain_from_resume)
{
	static const uint32_t starts[] = { 0, 1, 63, 64, 100, 4095, 4096, 5000,
					   8191, 12288, IBVD_DOORBELL_BITS - 1 };
	static const uint32_t rung_bits[] = { 0, 1, 5, 63, 64, 100, 101, 4095,
					      4096, 4097, 5000, 8000, 12300,
					      IBVD_DOORBELL_BITS - 1 };
	const unsigned int nrung = sizeof(rung_bits) / sizeof(rung_bits[0]);
	static struct order o;
	struct eng_doorbell db;
	unsigned int i, j;
	int fd;

	ck_assert_int_eq(ibvd_eng_db_create(&db, &fd), 0);
	close(fd);
	for (i = 0; i < sizeof(starts) / sizeof(starts[0]); i++) {
		for (j = 0; j < nrung; j++)
			ibvd_eng_db_ring(&db, rung_bits[j]);
		db.resume = starts[i];
		o.n = 0;
		ck_assert_uint_eq(ibvd_eng_db_drain(&db, drain_order, &o), nrung);
		ck_assert_uint_eq(o.n, nrung);
		/* each bit once, in order from the start, round */
		for (j = 0; j < nrung; j++) {
			uint32_t k = (o.bits[j] + IBVD_DOORBELL_BITS - starts[i]) %
				     IBVD_DOORBELL_BITS;

			if (j > 0)
				ck_assert_uint_gt(k, (o.bits[j - 1] + IBVD_DOORBELL_BITS -
						      starts[i]) % IBVD_DOORBELL_BITS);
		}
		ck_assert_uint_eq(ibvd_eng_db_drain(&db, drain_order, &o), 0);
	}
	ibvd_eng_db_destroy(&db);
}
END_TEST

static Suite *doorbell_suite(void)
{
	Suite *s = suite_create("doorbell");
	TCase *tc = tcase_create("protocol");

	tcase_set_timeout(tc, 0);
	tcase_add_test(tc, test_page);
	tcase_add_test(tc, test_drain_all_bits);
	tcase_add_test(tc, test_drain_from_resume);
	tcase_add_test(tc, test_no_lost_wakeup);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(doorbell_suite(), CK_NORMAL);
}
