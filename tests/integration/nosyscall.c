/*
 * nosyscall-helper: the data path makes no system call while the engine is
 * awake (issue 3, DESIGN.md §4).
 *
 * A worker thread sets up an RC loopback pair, warms up, then installs a
 * seccomp filter on itself that reports every system call it makes to the
 * main thread (SECCOMP_RET_USER_NOTIF; the main thread counts and lets the
 * call continue).  While a shared `window` word says so, the worker runs a
 * burst of ibv_post_send (SEND and RDMA WRITE), ibv_post_recv, ibv_poll_cq
 * and ibv_req_notify_cq, keeping work in flight so that the engine never
 * runs out of work and sleeps.  The worker is blocked while its call is
 * reported, so the window word read by the main thread is exact.
 *
 * The counter itself is checked first: three getppid() calls inside a
 * calibration window must be seen as exactly three.
 *
 * A write() of 8 bytes to an eventfd is the kick that wakes a sleeping
 * engine: legitimate when the engine did sleep (a scheduler hiccup longer
 * than its idle budget), and so is one sched_yield after it, which gives
 * the woken engine the CPU (poll.c).  So is a 1-byte send, the poke that
 * delivers a completion event to an armed CQ's channel: when the engine
 * lags, a SEND held back behind a WRITE finds its receive posted before
 * the receiver armed, and whoever places it fires the arm as a NIC would
 * (in a round that keeps up, the receiver arms with nothing posted and
 * takes the SEND in its own poll, which needs no wake-up).  A round that
 * has only kicks, at most as many yields, and pokes is repeated (up to
 * ROUNDS times); any other system call fails at once, and at least one
 * round must make none at all.
 *
 * On a machine with few CPUs the scheduler likes to put the engine thread
 * on the poster's CPU (it wakes where its kicker runs), where it can only
 * run while the poster waits: it then sleeps between any two posts.  The
 * script therefore pins the daemon's engine thread to one CPU and passes
 * another in NOSYS_CPU, where both threads of this program run.
 *
 * usage: nosyscall-helper [ITERATIONS]   (default 12000 per round)
 * Prints one "round N: ..." line per round and "nosyscall: ok ..." at the
 * end; exits 0 on success, 1 on failure, 77 if the kernel has no seccomp
 * user notification.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "vt.h"

#define DEPTH		32	/* SENDs / WRITEs in flight */
#define MSG		256	/* bytes per message */
#define ROUNDS		5
#define MAX_SEEN	64	/* syscalls remembered per window, for the report */
#define ARM_EVERY	64	/* ibv_req_notify_cq once per this many receives */

enum { W_NONE, W_CALIB, W_MEASURE };

struct seen {
	int nr;
	uint64_t args[3];
};

static struct {
	/* worker -> supervisor */
	int listener;			/* the seccomp listener fd, once set */
	int window;			/* W_* */
	/* supervisor's counts, per window kind */
	unsigned long count[3];
	unsigned long kicks;		/* 8-byte writes to an eventfd, W_MEASURE */
	unsigned long yields;		/* sched_yield, W_MEASURE */
	unsigned long pokes;		/* 1-byte sends to a channel, W_MEASURE */
	unsigned int nseen;
	struct seen seen[MAX_SEEN];
} S = { .listener = -1 };

static struct {
	struct vt_dev d;
	struct ibv_comp_channel *ch;
	struct ibv_cq *scq, *rcq, *scq1;
	struct ibv_qp *qp[2];
	struct ibv_mr *src, *dst, *rbuf;
	long iters;
	const volatile uint32_t *sleeping;	/* the context page's engine word */
	unsigned long asleep;			/* posts that found it set */
	unsigned long posts_send, posts_recv, polls, arms, events_armed;
} W;

/* ---- the seccomp counter -------------------------------------------------- */

static int install_filter(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
	};
	struct sock_fprog prog = { .len = 1, .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		vt_fail("prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
			    SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
}

/* Is the worker's fd (the same table: a thread) of the kind /proc names so? */
static int fd_kind_is(int fd, const char *kind)
{
	char path[64], link[128];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return 0;
	link[n] = '\0';
	return strncmp(link, kind, strlen(kind)) == 0;
}

/* Runs in the main thread: receive, count, continue, until the worker is gone. */
static void supervise(void)
{
	struct seccomp_notif_sizes sizes;
	struct seccomp_notif *req;
	struct seccomp_notif_resp *resp;
	struct pollfd pfd;
	int fd;

	while ((fd = __atomic_load_n(&S.listener, __ATOMIC_ACQUIRE)) < 0)
		vt_sleep_ms(1);
	if (fd == -2)
		return;	/* the worker found no seccomp user notification */
	vt_assert(syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) == 0,
		  "SECCOMP_GET_NOTIF_SIZES: %s", strerror(errno));
	req = calloc(1, sizes.seccomp_notif > sizeof(*req) ? sizes.seccomp_notif : sizeof(*req));
	resp = calloc(1, sizes.seccomp_notif_resp > sizeof(*resp) ?
		      sizes.seccomp_notif_resp : sizeof(*resp));
	vt_assert(req && resp, "calloc");

	for (;;) {
		int win, r;

		pfd.fd = fd;
		pfd.events = POLLIN;
		pfd.revents = 0;
		r = poll(&pfd, 1, 1000);
		if (r < 0 && errno == EINTR)
			continue;
		vt_assert(r >= 0, "poll(listener): %s", strerror(errno));
		if (r == 0)
			continue;
		if (pfd.revents & POLLIN) {
			memset(req, 0, sizes.seccomp_notif);
			if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, req) < 0) {
				/* the caller was killed meanwhile */
				if (errno == EINTR || errno == ENOENT)
					continue;
				vt_fail("SECCOMP_IOCTL_NOTIF_RECV: %s", strerror(errno));
			}
			/* The worker is blocked in this call: its window is stable. */
			win = __atomic_load_n(&S.window, __ATOMIC_SEQ_CST);
			S.count[win]++;
			if (win == W_MEASURE) {
				if (req->data.nr == SYS_write && req->data.args[2] == 8 &&
				    fd_kind_is((int)req->data.args[0], "anon_inode:[eventfd]"))
					S.kicks++;
				if (req->data.nr == SYS_sched_yield)
					S.yields++;
				if (req->data.nr == SYS_sendto && req->data.args[2] == 1 &&
				    fd_kind_is((int)req->data.args[0], "socket:["))
					S.pokes++;
				if (S.nseen < MAX_SEEN) {
					S.seen[S.nseen].nr = req->data.nr;
					memcpy(S.seen[S.nseen].args, req->data.args,
					       sizeof(S.seen[0].args));
					S.nseen++;
				}
			}
			memset(resp, 0, sizes.seccomp_notif_resp);
			resp->id = req->id;
			resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
			if (ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, resp) < 0 && errno != ENOENT)
				vt_fail("SECCOMP_IOCTL_NOTIF_SEND: %s", strerror(errno));
			continue;
		}
		if (pfd.revents & (POLLHUP | POLLERR))
			break;	/* no task uses the filter any more */
	}
	free(req);
	free(resp);
	close(fd);
}

/* ---- the data path ------------------------------------------------------- */

/*
 * The engine page of the context (common/ring.h: struct ibvd_ctx_engine,
 * `sleeping` first), found by its memfd's name in /proc/self/maps: only
 * read, for the report.
 */
static const volatile uint32_t *find_sleeping(void)
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	const volatile uint32_t *p = NULL;

	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f)) {
		unsigned long start, end, off;

		if (!strstr(line, "/memfd:ibverbsd-context"))
			continue;
		if (sscanf(line, "%lx-%lx %*s %lx", &start, &end, &off) == 3 && off == 0) {
			p = (const volatile uint32_t *)start;
			break;
		}
	}
	fclose(f);
	return p;
}

/*
 * One RDMA WRITE with nothing else in flight, before any count: the first
 * WRITE to an rkey that finds the pair idle asks the daemon once whether
 * the library may copy into that MR itself (QP_REMOTE_MR; W.dst is private
 * memory, so no), and that one call must not land in a counted round.
 */
static void first_write(void)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc;
	int r;

	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)W.src->addr;
	sge.length = MSG;
	sge.lkey = W.src->lkey;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = (uintptr_t)W.dst->addr;
	wr.wr.rdma.rkey = W.dst->rkey;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	r = ibv_post_send(W.qp[0], &wr, &bad);
	vt_assert(r == 0, "ibv_post_send (first WRITE): %s", strerror(r));
	vt_assert(vt_poll(W.scq, &wc, 1, 5000) == 1 && wc.status == IBV_WC_SUCCESS,
		  "the first WRITE did not complete");
}

static void setup(void)
{
	struct vt_qp_opts o;
	struct vt_addr a[2];
	int i;

	vt_open(&W.d);
	W.ch = ibv_create_comp_channel(W.d.ctx);
	vt_assert(W.ch, "ibv_create_comp_channel: %s", strerror(errno));
	W.scq = ibv_create_cq(W.d.ctx, 4 * DEPTH, NULL, NULL, 0);
	W.scq1 = ibv_create_cq(W.d.ctx, 4 * DEPTH, NULL, NULL, 0);
	W.rcq = ibv_create_cq(W.d.ctx, 4 * DEPTH, NULL, W.ch, 0);
	vt_assert(W.scq && W.scq1 && W.rcq, "ibv_create_cq: %s", strerror(errno));
	memset(&o, 0, sizeof(o));
	o.max_send_wr = 2 * DEPTH;
	o.max_recv_wr = 2 * DEPTH;
	o.max_send_sge = 1;
	o.max_recv_sge = 1;
	W.qp[0] = vt_qp(&W.d, W.scq, W.rcq, &o);
	W.qp[1] = vt_qp(&W.d, W.scq1, W.rcq, &o);
	for (i = 0; i < 2; i++)
		vt_qp_addr(&W.d, W.qp[i], &o, &a[i]);
	vt_connect(&W.d, W.qp[0], &a[1], &o);
	vt_connect(&W.d, W.qp[1], &a[0], &o);
	W.src = vt_reg(W.d.pd, (size_t)DEPTH * MSG, VT_ACCESS_ALL);
	W.dst = vt_reg(W.d.pd, (size_t)DEPTH * MSG, VT_ACCESS_ALL);
	W.rbuf = vt_reg(W.d.pd, (size_t)DEPTH * MSG, VT_ACCESS_ALL);
	vt_fill(W.src->addr, (size_t)DEPTH * MSG, 0, 7);
	first_write();
	W.sleeping = find_sleeping();
}

static void teardown(void)
{
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	unsigned int nev = 0;
	int i, fl;

	/* Events the arms produced: take them, so that destroy does not wait. */
	fl = fcntl(W.ch->fd, F_GETFL);
	vt_assert(fl >= 0 && fcntl(W.ch->fd, F_SETFL, fl | O_NONBLOCK) == 0,
		  "fcntl(channel fd): %s", strerror(errno));
	while (ibv_get_cq_event(W.ch, &ev_cq, &ev_ctx) == 0)
		nev++;
	if (nev)
		ibv_ack_cq_events(W.rcq, nev);
	W.events_armed = nev;
	for (i = 0; i < 2; i++)
		vt_assert(ibv_destroy_qp(W.qp[i]) == 0, "ibv_destroy_qp");
	vt_assert(ibv_destroy_cq(W.scq) == 0, "ibv_destroy_cq");
	vt_assert(ibv_destroy_cq(W.scq1) == 0, "ibv_destroy_cq");
	vt_assert(ibv_destroy_cq(W.rcq) == 0, "ibv_destroy_cq");
	vt_assert(ibv_destroy_comp_channel(W.ch) == 0, "ibv_destroy_comp_channel");
	vt_dereg(W.src);
	vt_dereg(W.dst);
	vt_dereg(W.rbuf);
	vt_close(&W.d);
}

/*
 * The burst: operation i is a SEND (even i, with a receive posted first)
 * or an RDMA WRITE (odd i), in slot i % DEPTH.  No call here may make a
 * system call on its own (no vt_poll: it sleeps now and then).
 */
static void burst(long n)
{
	struct ibv_wc wc[DEPTH];
	long posted = 0, sdone = 0, rposted = 0, rdone = 0;
	unsigned long idle = 0;
	long deadline = 0;
	int r, k;

	while (sdone < n || rdone < rposted) {
		/* fill the pipeline */
		while (posted < n && posted - sdone < DEPTH) {
			struct ibv_send_wr wr, *bad;
			struct ibv_sge sge;
			uint32_t slot = (uint32_t)(posted % DEPTH);

			memset(&wr, 0, sizeof(wr));
			if (!(posted & 1)) {
				struct ibv_recv_wr rw, *rbad;
				struct ibv_sge rs;

				rs.addr = (uintptr_t)W.rbuf->addr + slot * MSG;
				rs.length = MSG;
				rs.lkey = W.rbuf->lkey;
				memset(&rw, 0, sizeof(rw));
				rw.wr_id = (uint64_t)posted;
				rw.sg_list = &rs;
				rw.num_sge = 1;
				r = ibv_post_recv(W.qp[1], &rw, &rbad);
				vt_assert(r == 0, "ibv_post_recv #%ld: %s", posted, strerror(r));
				W.posts_recv++;
				rposted++;
				wr.opcode = IBV_WR_SEND;
			} else {
				wr.opcode = IBV_WR_RDMA_WRITE;
				wr.wr.rdma.remote_addr = (uintptr_t)W.dst->addr + slot * MSG;
				wr.wr.rdma.rkey = W.dst->rkey;
			}
			if (W.sleeping && *W.sleeping)
				W.asleep++;
			sge.addr = (uintptr_t)W.src->addr + slot * MSG;
			sge.length = MSG;
			sge.lkey = W.src->lkey;
			wr.wr_id = (uint64_t)posted;
			wr.sg_list = &sge;
			wr.num_sge = 1;
			wr.send_flags = IBV_SEND_SIGNALED;
			r = ibv_post_send(W.qp[0], &wr, &bad);
			vt_assert(r == 0, "ibv_post_send #%ld: %s", posted, strerror(r));
			W.posts_send++;
			posted++;
		}
		/* completions */
		r = ibv_poll_cq(W.scq, DEPTH, wc);
		W.polls++;
		vt_assert(r >= 0, "ibv_poll_cq(send): %d", r);
		for (k = 0; k < r; k++) {
			vt_assert(wc[k].status == IBV_WC_SUCCESS && wc[k].wr_id == (uint64_t)sdone,
				  "send completion wr_id %llu status %s, want wr_id %ld success",
				  (unsigned long long)wc[k].wr_id, vt_status(wc[k].status), sdone);
			sdone++;
		}
		if (r > 0)
			idle = 0;
		r = ibv_poll_cq(W.rcq, DEPTH, wc);
		W.polls++;
		vt_assert(r >= 0, "ibv_poll_cq(recv): %d", r);
		for (k = 0; k < r; k++) {
			vt_assert(wc[k].status == IBV_WC_SUCCESS && wc[k].byte_len == MSG &&
				  wc[k].opcode == IBV_WC_RECV,
				  "recv completion wr_id %llu status %s byte_len %u opcode %d",
				  (unsigned long long)wc[k].wr_id, vt_status(wc[k].status),
				  wc[k].byte_len, wc[k].opcode);
			rdone++;
			if (rdone % ARM_EVERY == 0) {
				vt_assert(ibv_req_notify_cq(W.rcq, 0) == 0, "ibv_req_notify_cq");
				W.arms++;
			}
		}
		if (r > 0)
			idle = 0;
		/*
		 * Stuck?  Look at the clock only after many empty polls: it is
		 * the vDSO, but a clock source without one would be a syscall.
		 */
		if (++idle == (1ul << 22)) {
			idle = 0;
			if (!deadline)
				deadline = vt_now_ms() + vt_tmo_ms();
			else
				vt_assert(vt_now_ms() < deadline,
					  "stuck: %ld/%ld sends and %ld/%ld receives completed",
					  sdone, n, rdone, rposted);
		}
	}
	W.iters += n;
}

static const char *sysname(int nr)
{
	switch (nr) {
	case SYS_write: return "write";
	case SYS_read: return "read";
	case SYS_futex: return "futex";
	case SYS_sched_yield: return "sched_yield";
	case SYS_nanosleep: return "nanosleep";
	case SYS_clock_nanosleep: return "clock_nanosleep";
	case SYS_clock_gettime: return "clock_gettime";
	case SYS_getpid: return "getpid";
	case SYS_getppid: return "getppid";
	case SYS_mmap: return "mmap";
	case SYS_munmap: return "munmap";
	case SYS_ioctl: return "ioctl";
	case SYS_sendto: return "sendto";
	case SYS_sendmsg: return "sendmsg";
	case SYS_recvmsg: return "recvmsg";
	case SYS_poll: return "poll";
	case SYS_ppoll: return "ppoll";
	case SYS_epoll_wait: return "epoll_wait";
	default: return "?";
	}
}

static long niters = 12000;
static int result = 1;		/* exit status decided by the worker */

static void *worker(void *arg)
{
	int fd, round, clean = 0;

	(void)arg;
	setup();
	/* Warm-up, also first-touches everything the burst uses. */
	burst(2000);
	W.asleep = 0;
	burst(niters);
	printf("unfiltered: %ld iterations; the engine was asleep at %lu of %ld sends%s\n",
	       niters, W.asleep, niters, W.sleeping ? "" : " (context page not found)");

	fd = install_filter();
	if (fd < 0) {
		int e = errno;

		printf("nosyscall: SKIP: seccomp user notification unavailable: %s\n",
		       strerror(e));
		__atomic_store_n(&S.listener, -2, __ATOMIC_RELEASE);
		result = 77;
		teardown();
		return NULL;
	}
	/*
	 * From here on each of our system calls waits until the main thread
	 * has taken it: no need to wait for it to get ready (and no spinning,
	 * which would starve it when both run at SCHED_FIFO on one CPU).
	 */
	__atomic_store_n(&S.listener, fd, __ATOMIC_RELEASE);

	/* The counter sees what it must. */
	__atomic_store_n(&S.window, W_CALIB, __ATOMIC_SEQ_CST);
	syscall(SYS_getppid);
	syscall(SYS_getppid);
	syscall(SYS_getppid);
	__atomic_store_n(&S.window, W_NONE, __ATOMIC_SEQ_CST);
	/* The store above and the check below: no syscall in between. */
	if (S.count[W_CALIB] != 3) {
		printf("nosyscall: FAIL: the counter saw %lu system calls for 3 getppid()\n",
		       S.count[W_CALIB]);
		result = 1;
		goto out;
	}
	printf("calibration: 3 getppid() in a window counted as %lu\n", S.count[W_CALIB]);

	for (round = 1; round <= ROUNDS; round++) {
		unsigned long before, polls, arms, i;
		uint64_t t0, t1;

		burst(200);	/* the engine is awake now */
		S.count[W_MEASURE] = 0;
		S.kicks = 0;
		S.yields = 0;
		S.pokes = 0;
		S.nseen = 0;
		W.asleep = 0;
		before = W.posts_send + W.posts_recv;
		polls = W.polls;
		arms = W.arms;
		t0 = vt_now_ns();
		__atomic_store_n(&S.window, W_MEASURE, __ATOMIC_SEQ_CST);
		burst(niters);
		__atomic_store_n(&S.window, W_NONE, __ATOMIC_SEQ_CST);
		t1 = vt_now_ns();
		printf("round %d: %lu posts (send+recv), %lu polls, %lu arms in %.1f ms: "
		       "%lu system calls (%lu engine kicks, %lu yields to it, %lu event "
		       "pokes; engine seen asleep at %lu sends)\n",
		       round, W.posts_send + W.posts_recv - before, W.polls - polls,
		       W.arms - arms, (double)(t1 - t0) / 1e6, S.count[W_MEASURE], S.kicks,
		       S.yields, S.pokes, W.asleep);
		for (i = 0; i < S.nseen; i++)
			printf("  syscall %d (%s) args 0x%llx 0x%llx 0x%llx\n", S.seen[i].nr,
			       sysname(S.seen[i].nr), (unsigned long long)S.seen[i].args[0],
			       (unsigned long long)S.seen[i].args[1],
			       (unsigned long long)S.seen[i].args[2]);
		/* a kick may be followed by one yield to the engine it woke */
		if (S.count[W_MEASURE] != S.kicks + S.yields + S.pokes ||
		    S.yields > S.kicks) {
			printf("nosyscall: FAIL: round %d: %lu system calls besides %lu engine "
			       "kicks, %lu yields and %lu event pokes\n", round,
			       S.count[W_MEASURE] - S.kicks - S.yields - S.pokes, S.kicks,
			       S.yields, S.pokes);
			result = 1;
			goto out;
		}
		if (S.count[W_MEASURE] == 0) {
			clean = round;
			break;
		}
		printf("round %d: the engine slept or lagged (kicked %lu times, %lu event "
		       "pokes): again\n", round, S.kicks, S.pokes);
	}
	if (!clean) {
		printf("nosyscall: FAIL: every one of %d rounds made system calls (engine kicks)\n",
		       ROUNDS);
		result = 1;
		goto out;
	}
	printf("nosyscall: ok: round %d: %ld iterations, %lu ibv_post_send + %lu ibv_post_recv "
	       "+ %lu ibv_poll_cq + %lu ibv_req_notify_cq in all, 0 system calls in the window\n",
	       clean, niters, W.posts_send, W.posts_recv, W.polls, W.arms);
	result = 0;
out:
	fflush(stdout);
	return NULL;
}

/* Pin the calling thread (and threads it creates) to $NOSYS_CPU, if set. */
static void pin(void)
{
	const char *v = getenv("NOSYS_CPU");
	cpu_set_t set;
	int r;

	if (!v || !*v)
		return;
	CPU_ZERO(&set);
	CPU_SET(atoi(v), &set);
	r = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	vt_assert(r == 0, "pthread_setaffinity_np(cpu %s): %s", v, strerror(r));
}

int main(int argc, char **argv)
{
	pthread_t th;
	int r;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1)
		niters = atol(argv[1]);
	vt_assert(niters >= 10000 && niters % 2 == 0,
		  "ITERATIONS must be even and >= 10000 (got %ld)", niters);
	pin();
	r = pthread_create(&th, NULL, worker, NULL);
	vt_assert(r == 0, "pthread_create: %s", strerror(r));
	supervise();
	r = pthread_join(th, NULL);
	vt_assert(r == 0, "pthread_join: %s", strerror(r));
	if (result != 77)
		teardown();
	if (result == 0)
		printf("nosyscall: %lu completion events from the armed CQ\n", W.events_armed);
	return result;
}
