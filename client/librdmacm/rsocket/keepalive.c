/*
 * Keepalives (SO_KEEPALIVE, TCP_KEEPIDLE): a connected rsocket with
 * SO_KEEPALIVE sends an RDMA WRITE of nothing (wr_id RS_CTRL_KEEPALIVE)
 * every TCP_KEEPIDLE seconds, as rdma-core's service thread does.  With
 * no immediate it takes none of the peer's receives: a peer whose app
 * makes no call reposts none, and keepalives that ate them would leave
 * its data to wait on RNR until it did.  The message is what detects a peer that is gone
 * without a word (its host down, its link cut): the RC send to it fails
 * after its retries, and the rsocket reports the error as TCP's keepalive
 * would (ETIMEDOUT/ECONNRESET on the next call, POLLERR|POLLHUP).
 *
 * One thread per process, started with the first keepalive rsocket, sleeps
 * until the earliest one is due.  Lock order: the thread holds ka_lock and
 * only tries each rsocket's lock (an rsocket whose lock is busy is tried
 * again shortly), so the calls that register, holding their rsocket's
 * lock, never wait for it in the other order.  rclose() unregisters before
 * the rsocket is freed; after that the thread never touches it.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "rs.h"

#define KA_BUSY_RETRY_NS	10000000ll	/* a busy rsocket: again in 10 ms */

struct ka_entry {
	struct rsocket *rs;
	int64_t due_ns;			/* CLOCK_MONOTONIC */
};

static pthread_mutex_t ka_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ka_wake;
static struct ka_entry *ka;
static unsigned int nka, cap_ka;
static bool thread_started;

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Send rs's keepalive if it can take one now: 0 sent or not needed, -EBUSY. */
static int send_one(struct rsocket *rs)
{
	if (pthread_mutex_trylock(&rs->lock))
		return -EBUSY;
	/*
	 * The slots of the keepalives sent before come back with their
	 * completions, which an app that makes no call on the rsocket never
	 * takes: without taking them here it would send RS_QP_CTRL_SIZE
	 * keepalives and then none, and a peer gone after those would go
	 * unnoticed however long the connection sat idle.  A failed
	 * keepalive ends the connection here too, so the app's next call,
	 * or its rpoll, hears of it at once.
	 *
	 * The CM's news first, as every call takes them: a peer that left
	 * without a word of its own (its process ended, killed or not, with
	 * the rsocket open) is DISCONNECTED there, an end of file as TCP's
	 * FIN; a keepalive sent to it instead would fail and turn that end
	 * into an error the app reads in place of its end of file.  Taking
	 * them never enters librspreload's fcntl (cma_channel_flags), which
	 * would wait for the lock we hold.
	 */
	if ((rs->state & RS_CONNECTED) && rs->keepalive && !rs_gone(rs))
		rs_progress(rs);
	if ((rs->state & RS_CONNECTED) && rs->keepalive && !rs_gone(rs) &&
	    rs_ctrl_avail(rs)) {
		rs->ctrl_seqno++;
		if (rs_post_write(rs, NULL, 0,
				  rs_msg(RS_OP_CTRL, RS_CTRL_KEEPALIVE),
				  false, 0, 0, 0))
			rs->ctrl_seqno--;
	}
	pthread_mutex_unlock(&rs->lock);
	return 0;
}

/* The due ones sent; the time of the next, or 0 if none. */
static int64_t run_due(void)
{
	int64_t now = mono_ns(), next = 0;
	unsigned int i;

	for (i = 0; i < nka; i++) {
		struct ka_entry *e = &ka[i];

		if (e->due_ns <= now)
			e->due_ns = now + (send_one(e->rs) ? KA_BUSY_RETRY_NS :
					   (int64_t)e->rs->keepidle * 1000000000);
		if (!next || e->due_ns < next)
			next = e->due_ns;
	}
	return next;
}

static void *ka_thread(void *arg)
{
	struct timespec until;
	int64_t next;

	pthread_mutex_lock(&ka_lock);
	for (;;) {
		next = run_due();
		if (!next) {
			pthread_cond_wait(&ka_wake, &ka_lock);
			continue;
		}
		until.tv_sec = next / 1000000000;
		until.tv_nsec = next % 1000000000;
		pthread_cond_timedwait(&ka_wake, &ka_lock, &until);
	}
	pthread_mutex_unlock(&ka_lock);
	return arg;
}

static int start_thread(void)
{
	pthread_condattr_t ca;
	pthread_attr_t ta;
	pthread_t t;
	int ret;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ka_wake, &ca);
	pthread_condattr_destroy(&ca);
	pthread_attr_init(&ta);
	pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
	ret = pthread_create(&t, &ta, ka_thread, NULL);
	pthread_attr_destroy(&ta);
	if (ret)
		return -ret;
	thread_started = true;
	return 0;
}

static int find(const struct rsocket *rs)
{
	unsigned int i;

	for (i = 0; i < nka; i++)
		if (ka[i].rs == rs)
			return (int)i;
	return -1;
}

int rs_keepalive_update(struct rsocket *rs)
{
	int i, ret = 0;

	pthread_mutex_lock(&ka_lock);
	i = find(rs);
	if (!rs->keepalive) {
		if (i >= 0)
			ka[i] = ka[--nka];
		goto out;
	}
	if (!thread_started)
		ret = start_thread();
	if (ret == 0 && i < 0 && nka == cap_ka) {
		unsigned int cap = cap_ka ? 2 * cap_ka : 16;
		struct ka_entry *n = realloc(ka, cap * sizeof(*n));

		if (!n)
			ret = -ENOMEM;
		else {
			ka = n;
			cap_ka = cap;
		}
	}
	if (ret == 0) {
		if (i < 0)
			i = (int)nka++;
		ka[i].rs = rs;
		ka[i].due_ns = mono_ns() + (int64_t)rs->keepidle * 1000000000;
		pthread_cond_signal(&ka_wake);
	}
out:
	pthread_mutex_unlock(&ka_lock);
	return ret;
}

void rs_keepalive_forget(struct rsocket *rs)
{
	int i;

	pthread_mutex_lock(&ka_lock);
	i = find(rs);
	if (i >= 0)
		ka[i] = ka[--nka];
	pthread_mutex_unlock(&ka_lock);
}
