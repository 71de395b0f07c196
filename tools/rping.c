/*
 * rping: an RDMA ping-pong over a connection set up with the RDMA CM.
 *
 * ibverbsd's own build of the classic librdmacm test, written from its
 * documented behaviour (the AIX/OFED reference in the project's seeds) and
 * speaking the same wire protocol as rdma-core's rping, so that either side
 * can be Debian's /usr/bin/rping.  One ping:
 *
 *	client: SEND  advertisement of its ping buffer (addr, rkey, len)
 *	server: RDMA READ of that buffer, then SEND "go ahead"
 *	client: SEND  advertisement of its pong buffer
 *	server: RDMA WRITE of what it read into the pong buffer, SEND "go ahead"
 *	client: with -V compares the two buffers, with -v prints the pong
 *
 * An advertisement is 16 bytes: a big-endian 64-bit address, 32-bit rkey
 * and 32-bit length; a "go ahead" is 16 bytes of zeros.  Each side checks
 * that every message it receives is exactly 16 bytes.
 *
 * Threads: a CM thread blocks in rdma_get_cm_event and turns events into
 * per-connection state; each connection has a CQ thread blocking in
 * ibv_get_cq_event; the thread that runs the connection (main, or one per
 * connection with -P) waits on the connection's condition variable.  The
 * CM thread is woken for exit by an event of its own: a throw-away id
 * resolving 127.0.0.1.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>

#define DEFAULT_PORT	7174
/* rdma-core's rping uses 64 bytes by default (the OFED 1.4 text says 100):
 * the same default keeps the two compatible without -S. */
#define DEFAULT_SIZE	64
/* rdma-core's rping takes at most 64 KiB - 1; a larger ping would fail
 * a peer running it with a local length error. */
#define MAX_SIZE	65535
#define PING_FMT	"rdma-ping-%d: "
/* The prefix for the largest ping number, plus the NUL. */
#define MIN_SIZE	((int)sizeof("rdma-ping-2147483647: "))
#define RESOLVE_MS	2000
#define SQ_DEPTH	16
#define NRECV		2
#define BACKLOG		8
/* How long a finished connection waits for its DISCONNECTED event and for
 * the flush that ends its CQ thread. */
#define TEARDOWN_MS	10000
/* How long a flush waits for the CM event that explains it. */
#define REASON_MS	1000

/* What a SEND carries: where a buffer is, big-endian. */
struct adv {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
};
_Static_assert(sizeof(struct adv) == 16, "the advertisement is 16 bytes on the wire");

enum {
	WRID_SEND = 1,
	WRID_RDMA = 2,
	WRID_RECV = 16,		/* + index of the receive buffer */
};

/* One connection, client or server side. */
struct conn {
	struct rdma_cm_id *id;
	int num;		/* connection number, for messages */
	struct ibv_pd *pd;
	struct ibv_comp_channel *comp;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	bool own_qp;		/* -q: created with ibv_create_qp */

	struct adv recv_buf[NRECV];
	struct ibv_mr *recv_mr;
	struct adv send_buf[2];	/* [0] ping/go-ahead, [1] pong advertisement */
	struct ibv_mr *send_mr;
	char *data;		/* client: pong (RDMA WRITE sink); server: RDMA READ sink */
	struct ibv_mr *data_mr;
	char *ping;		/* client: the RDMA READ source */
	struct ibv_mr *ping_mr;

	pthread_t cq_thread;
	bool cq_running;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* set by the CM thread */
	bool route_resolved, established, connect_response, disconnected;
	int cm_error;		/* the failing event + 1, or 0 */
	/* set by the CQ thread */
	struct adv advs[NRECV + 1];	/* received, not yet taken */
	unsigned int nadv;
	unsigned int rdma_done;
	unsigned int sends_done;
	unsigned int sends_posted;	/* by the connection's thread */
	bool cq_failed, flushed, cq_exited;
};

static struct {
	bool server, client, verbose, validate, persistent, self_qp;
	int debug;
	int count;
	int size;
	int port;
	struct sockaddr_storage addr, src;
	bool have_addr, have_src;
} opt;

static struct rdma_event_channel *channel;
static struct rdma_cm_id *listen_id;
static pthread_t cm_thread;
static char listen_marker, wake_marker;	/* id contexts that are not connections */

/* Connection requests handed from the CM thread to the server. */
static pthread_mutex_t req_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t req_cond = PTHREAD_COND_INITIALIZER;
static struct conn *req_queue[BACKLOG * 4];
static unsigned int req_n;
static bool req_failed;		/* the listener is unusable */
static unsigned int req_taken;	/* requests the server took (non-persistent: 1) */
static int next_conn_num;

static void dbg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void dbg(const char *fmt, ...)
{
	va_list ap;

	if (!opt.debug)
		return;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
}

static void err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void err(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("rping: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- connection state ------------------------------------------------- */

static struct conn *conn_new(void)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (!c) {
		err("out of memory");
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	pthread_mutex_lock(&req_lock);
	c->num = next_conn_num++;
	pthread_mutex_unlock(&req_lock);
	return c;
}

static void conn_free(struct conn *c)
{
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	free(c);
}

static void deadline_in(struct timespec *ts, long ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* Wait (lock held) for a change, until deadline (NULL: forever); 0 or ETIMEDOUT. */
static int conn_wait(struct conn *c, const struct timespec *deadline)
{
	if (!deadline)
		return pthread_cond_wait(&c->cond, &c->lock);
	return pthread_cond_timedwait(&c->cond, &c->lock, deadline);
}

/* Is the connection unusable (an error, or the peer went away)? */
static bool conn_broken(const struct conn *c)
{
	return c->cm_error || c->disconnected || c->cq_failed || c->flushed ||
	       c->cq_exited;
}

/*
 * Wait for a CM milestone (*flag), failing on errors and disconnection.
 * A flush of our receives alone does not end the wait at once: librdmacm
 * moves the QP to the error state while it takes the CM event that says
 * why (a REJECTED, say), before our CM thread has it, so the reason
 * comes just after.
 */
static int wait_cm(struct conn *c, const bool *flag, const char *what)
{
	struct timespec deadline;
	bool flush_seen = false;
	int ret = 0;

	pthread_mutex_lock(&c->lock);
	while (!*flag && !c->cm_error && !c->disconnected && !c->cq_failed) {
		if (!(c->flushed || c->cq_exited)) {
			conn_wait(c, NULL);
			continue;
		}
		if (!flush_seen) {
			deadline_in(&deadline, REASON_MS);
			flush_seen = true;
		}
		if (conn_wait(c, &deadline) == ETIMEDOUT)
			break;
	}
	if (!*flag) {
		if (c->cm_error)
			err("%s failed: %s", what,
			    rdma_event_str((enum rdma_cm_event_type)(c->cm_error - 1)));
		else if (c->disconnected)
			err("%s failed: disconnected", what);
		else
			err("%s failed: completion error", what);
		ret = -1;
	}
	pthread_mutex_unlock(&c->lock);
	return ret;
}

enum wait_result { GOT, PEER_GONE, FAILED };

/*
 * The next received message.  When the peer disconnected, what it sent
 * before may still be on its way through the CQ thread: the QP's error
 * state flushes our receives behind those completions, so wait for the
 * flush before concluding that nothing more came.
 */
static enum wait_result wait_recv(struct conn *c, struct adv *a)
{
	struct ibv_qp_attr err_attr = { .qp_state = IBV_QPS_ERR };
	struct timespec deadline;
	enum wait_result r;
	bool drained = false;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (!c->nadv && !conn_broken(c))
			conn_wait(c, NULL);
		if (c->nadv) {
			*a = c->advs[0];
			memmove(&c->advs[0], &c->advs[1], (c->nadv - 1) * sizeof(c->advs[0]));
			c->nadv--;
			r = GOT;
			break;
		}
		if (c->cq_failed || c->cm_error) {
			r = FAILED;
			break;
		}
		if (drained || c->flushed || c->cq_exited) {
			r = PEER_GONE;
			break;
		}
		pthread_mutex_unlock(&c->lock);
		ibv_modify_qp(c->qp, &err_attr, IBV_QP_STATE);
		deadline_in(&deadline, TEARDOWN_MS);
		pthread_mutex_lock(&c->lock);
		while (!c->flushed && !c->cq_exited && conn_wait(c, &deadline) != ETIMEDOUT)
			;
		drained = true;
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* The completion of the RDMA operation number n (counting from 1). */
static enum wait_result wait_rdma(struct conn *c, unsigned int n)
{
	enum wait_result r = GOT;

	pthread_mutex_lock(&c->lock);
	while (c->rdma_done < n && !conn_broken(c))
		conn_wait(c, NULL);
	if (c->rdma_done < n)
		r = (c->cq_failed || c->cm_error) ? FAILED : PEER_GONE;
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* ---- the CM thread ----------------------------------------------------- */

static void queue_request(struct conn *c)
{
	pthread_mutex_lock(&req_lock);
	req_queue[req_n++] = c;
	pthread_cond_broadcast(&req_cond);
	pthread_mutex_unlock(&req_lock);
}

static void listener_failed(void)
{
	pthread_mutex_lock(&req_lock);
	req_failed = true;
	pthread_cond_broadcast(&req_cond);
	pthread_mutex_unlock(&req_lock);
}

/*
 * A new connection request: a conn for it, handed to the server, or
 * rejected when the server cannot take it.  Returns the id to destroy
 * once the event is acked (a rejected request), or NULL.
 */
static struct rdma_cm_id *on_connect_request(struct rdma_cm_event *ev)
{
	struct conn *c = NULL;
	bool take;

	pthread_mutex_lock(&req_lock);
	take = (opt.persistent || req_taken + req_n == 0) &&
	       req_n < sizeof(req_queue) / sizeof(req_queue[0]);
	pthread_mutex_unlock(&req_lock);
	if (take)
		c = conn_new();
	if (!c) {
		dbg("rejecting a connection request: %s\n",
		    take ? "out of memory" : "busy with a client");
		if (rdma_reject(ev->id, NULL, 0))
			err("rdma_reject: %s", strerror(errno));
		return ev->id;
	}
	c->id = ev->id;
	ev->id->context = c;
	dbg("connection request %d (initiator depth %u, responder resources %u)\n",
	    c->num, ev->param.conn.initiator_depth, ev->param.conn.responder_resources);
	queue_request(c);
	return NULL;
}

static void on_conn_event(struct conn *c, struct rdma_cm_event *ev)
{
	pthread_mutex_lock(&c->lock);
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		pthread_mutex_unlock(&c->lock);
		if (rdma_resolve_route(ev->id, RESOLVE_MS)) {
			err("rdma_resolve_route: %s", strerror(errno));
			pthread_mutex_lock(&c->lock);
			c->cm_error = RDMA_CM_EVENT_ROUTE_ERROR + 1;
			break;
		}
		return;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		c->route_resolved = true;
		break;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		c->connect_response = true;
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		c->established = true;
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
		err("cma event %s, error %d", rdma_event_str(ev->event), ev->status);
		c->cm_error = ev->event + 1;
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		dbg("connection %d: disconnected\n", c->num);
		c->disconnected = true;
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		err("the device was removed (is the ibverbsd daemon gone?)");
		c->cm_error = ev->event + 1;
		break;
	default:
		dbg("connection %d: ignoring %s\n", c->num, rdma_event_str(ev->event));
		break;
	}
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void *cm_main(void *arg)
{
	struct rdma_cm_event *ev;
	struct rdma_cm_id *destroy;
	void *ctx;

	(void)arg;
	for (;;) {
		if (rdma_get_cm_event(channel, &ev)) {
			if (errno == EINTR)
				continue;
			err("rdma_get_cm_event: %s", strerror(errno));
			listener_failed();
			return NULL;
		}
		ctx = ev->id->context;
		dbg("cm event %s on %s (status %d)\n", rdma_event_str(ev->event),
		    ctx == &wake_marker ? "the wake-up id" :
		    ctx == &listen_marker ? "the listener" : "a connection", ev->status);
		destroy = NULL;
		if (ctx == &wake_marker) {
			rdma_ack_cm_event(ev);
			return NULL;
		} else if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			destroy = on_connect_request(ev);
		} else if (ctx == &listen_marker) {
			err("listener: %s (status %d)", rdma_event_str(ev->event), ev->status);
			if (ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL)
				listener_failed();
		} else if (ctx) {
			on_conn_event(ctx, ev);
		}
		rdma_ack_cm_event(ev);
		if (destroy)
			rdma_destroy_id(destroy);
	}
}

/* Make the CM thread return: an event on an id of its own. */
static void cm_thread_stop(void)
{
	struct sockaddr_in lo = { .sin_family = AF_INET };
	struct rdma_cm_id *wake = NULL;

	lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (rdma_create_id(channel, &wake, &wake_marker, RDMA_PS_UDP) ||
	    rdma_resolve_addr(wake, NULL, (struct sockaddr *)&lo, RESOLVE_MS)) {
		dbg("cannot wake the CM thread (%s): cancelling it\n", strerror(errno));
		pthread_cancel(cm_thread);
	}
	pthread_join(cm_thread, NULL);
	if (wake)
		rdma_destroy_id(wake);
}

/* ---- the CQ thread ----------------------------------------------------- */

static int post_recv(struct conn *c, unsigned int i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)&c->recv_buf[i],
		.length = sizeof(c->recv_buf[i]),
		.lkey = c->recv_mr->lkey,
	};
	struct ibv_recv_wr wr = {
		.wr_id = WRID_RECV + i,
		.sg_list = &sge,
		.num_sge = 1,
	}, *bad;

	return ibv_post_recv(c->qp, &wr, &bad);
}

/* Poll everything there is; false when the thread should stop. */
static bool drain_cq(struct conn *c)
{
	struct ibv_wc wc[8];
	bool go_on = true;
	int n, i;

	while ((n = ibv_poll_cq(c->cq, 8, wc)) > 0) {
		pthread_mutex_lock(&c->lock);
		for (i = 0; i < n; i++) {
			if (wc[i].status == IBV_WC_WR_FLUSH_ERR) {
				dbg("connection %d: flushed WR %" PRIu64 "\n", c->num, wc[i].wr_id);
				c->flushed = true;
				go_on = false;
				continue;
			}
			if (wc[i].status != IBV_WC_SUCCESS) {
				err("connection %d: completion of WR %" PRIu64 " failed: %s",
				    c->num, wc[i].wr_id, ibv_wc_status_str(wc[i].status));
				c->cq_failed = true;
				go_on = false;
				continue;
			}
			switch (wc[i].opcode) {
			case IBV_WC_RECV: {
				unsigned int b = (unsigned int)(wc[i].wr_id - WRID_RECV);

				if (b >= NRECV || wc[i].byte_len != sizeof(struct adv)) {
					err("connection %d: received bogus data, size %u",
					    c->num, wc[i].byte_len);
					c->cq_failed = true;
					go_on = false;
					break;
				}
				if (c->nadv < NRECV + 1)
					c->advs[c->nadv++] = c->recv_buf[b];
				if (post_recv(c, b)) {
					err("connection %d: ibv_post_recv failed", c->num);
					c->cq_failed = true;
					go_on = false;
				}
				dbg("connection %d: recv completion\n", c->num);
				break;
			}
			case IBV_WC_RDMA_READ:
			case IBV_WC_RDMA_WRITE:
				dbg("connection %d: rdma %s completion\n", c->num,
				    wc[i].opcode == IBV_WC_RDMA_READ ? "read" : "write");
				c->rdma_done++;
				break;
			case IBV_WC_SEND:
				dbg("connection %d: send completion\n", c->num);
				c->sends_done++;
				break;
			default:
				err("connection %d: unexpected completion opcode %d",
				    c->num, wc[i].opcode);
				c->cq_failed = true;
				go_on = false;
				break;
			}
		}
		pthread_cond_broadcast(&c->cond);
		pthread_mutex_unlock(&c->lock);
	}
	if (n < 0) {
		err("connection %d: ibv_poll_cq failed", c->num);
		go_on = false;
		pthread_mutex_lock(&c->lock);
		c->cq_failed = true;
		pthread_cond_broadcast(&c->cond);
		pthread_mutex_unlock(&c->lock);
	}
	return go_on;
}

static void *cq_main(void *arg)
{
	struct conn *c = arg;
	bool failed = true;
	struct ibv_cq *cq;
	void *ctx;

	for (;;) {
		if (ibv_get_cq_event(c->comp, &cq, &ctx)) {
			err("connection %d: ibv_get_cq_event failed", c->num);
			break;
		}
		ibv_ack_cq_events(cq, 1);
		if (cq != c->cq || ctx != c) {
			err("connection %d: event for an unknown CQ", c->num);
			break;
		}
		if (ibv_req_notify_cq(c->cq, 0)) {
			err("connection %d: ibv_req_notify_cq failed", c->num);
			break;
		}
		if (!drain_cq(c)) {
			failed = false;		/* drain_cq says whether it failed */
			break;
		}
	}
	pthread_mutex_lock(&c->lock);
	/* Not a peer that went away: the device did (the daemon died). */
	c->cq_failed |= failed;
	c->cq_exited = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* ---- verbs resources ----------------------------------------------------- */

static int modify_qp_to(struct conn *c, enum ibv_qp_state state)
{
	struct ibv_qp_attr attr = { .qp_state = state };
	int mask = 0;

	if (rdma_init_qp_attr(c->id, &attr, &mask)) {
		err("rdma_init_qp_attr(%d): %s", state, strerror(errno));
		return -1;
	}
	errno = ibv_modify_qp(c->qp, &attr, mask);
	if (errno) {
		err("ibv_modify_qp(%d): %s", state, strerror(errno));
		return -1;
	}
	return 0;
}

static struct ibv_mr *reg(struct conn *c, void *buf, size_t len, int access,
			  const char *what)
{
	struct ibv_mr *mr = ibv_reg_mr(c->pd, buf, len, access);

	if (!mr)
		err("registering the %s buffer (%zu bytes): %s", what, len, strerror(errno));
	return mr;
}

/* PD, completion channel, CQ, QP and buffers on c->id's device; receives
 * posted.  A -q QP is left in INIT. */
static int setup_verbs(struct conn *c)
{
	struct ibv_qp_init_attr qpa = {
		.cap = {
			.max_send_wr = SQ_DEPTH,
			.max_recv_wr = NRECV,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
		.qp_type = IBV_QPT_RC,
	};
	const int remote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
			   IBV_ACCESS_REMOTE_WRITE;
	unsigned int i;

	if (!c->id->verbs) {
		err("the CM id has no device");
		return -1;
	}
	c->pd = ibv_alloc_pd(c->id->verbs);
	if (!c->pd) {
		err("ibv_alloc_pd: %s", strerror(errno));
		return -1;
	}
	c->comp = ibv_create_comp_channel(c->id->verbs);
	if (!c->comp) {
		err("ibv_create_comp_channel: %s", strerror(errno));
		return -1;
	}
	c->cq = ibv_create_cq(c->id->verbs, SQ_DEPTH * 2 + NRECV, c, c->comp, 0);
	if (!c->cq) {
		err("ibv_create_cq: %s", strerror(errno));
		return -1;
	}
	if (ibv_req_notify_cq(c->cq, 0)) {
		err("ibv_req_notify_cq failed");
		return -1;
	}
	qpa.send_cq = c->cq;
	qpa.recv_cq = c->cq;
	if (opt.self_qp) {
		c->qp = ibv_create_qp(c->pd, &qpa);
		if (!c->qp) {
			err("ibv_create_qp: %s", strerror(errno));
			return -1;
		}
		c->own_qp = true;
		if (modify_qp_to(c, IBV_QPS_INIT))
			return -1;
	} else {
		if (rdma_create_qp(c->id, c->pd, &qpa)) {
			err("rdma_create_qp: %s", strerror(errno));
			return -1;
		}
		c->qp = c->id->qp;
	}
	dbg("connection %d: QP %u\n", c->num, c->qp->qp_num);

	c->recv_mr = reg(c, c->recv_buf, sizeof(c->recv_buf), IBV_ACCESS_LOCAL_WRITE, "receive");
	c->send_mr = reg(c, c->send_buf, sizeof(c->send_buf), 0, "send");
	c->data = calloc(1, (size_t)opt.size);
	if (!c->recv_mr || !c->send_mr || !c->data)
		return -1;
	c->data_mr = reg(c, c->data, (size_t)opt.size, remote, "RDMA");
	if (!c->data_mr)
		return -1;
	if (opt.client) {
		c->ping = calloc(1, (size_t)opt.size);
		if (!c->ping)
			return -1;
		c->ping_mr = reg(c, c->ping, (size_t)opt.size, remote, "ping");
		if (!c->ping_mr)
			return -1;
	}
	for (i = 0; i < NRECV; i++) {
		if (post_recv(c, i)) {
			err("ibv_post_recv failed");
			return -1;
		}
	}
	if (pthread_create(&c->cq_thread, NULL, cq_main, c)) {
		err("cannot start the CQ thread");
		return -1;
	}
	c->cq_running = true;
	return 0;
}

static void init_conn_param(struct conn *c, struct rdma_conn_param *p)
{
	memset(p, 0, sizeof(*p));
	p->responder_resources = 1;
	p->initiator_depth = 1;
	p->retry_count = 7;
	p->rnr_retry_count = 7;
	if (c->own_qp)
		p->qp_num = c->qp->qp_num;
}

/* Disconnect, stop the CQ thread, free everything of c, c itself too. */
static int teardown(struct conn *c)
{
	struct ibv_qp_attr err_attr = { .qp_state = IBV_QPS_ERR };
	struct timespec deadline;
	bool connected = false;
	int ret = 0;

	if (c->qp) {
		/* What we sent last must arrive before the disconnect
		 * flushes it (our last "go ahead", the client's advertisement). */
		deadline_in(&deadline, TEARDOWN_MS);
		pthread_mutex_lock(&c->lock);
		connected = c->established || c->connect_response;
		while (connected && c->sends_done < c->sends_posted && !conn_broken(c) &&
		       conn_wait(c, &deadline) != ETIMEDOUT)
			;
		pthread_mutex_unlock(&c->lock);
		/* rdma_disconnect moves a QP made by rdma_create_qp to the
		 * error state; ours (-q), or one that never got connected,
		 * we move ourselves so that its receives are flushed. */
		if (c->own_qp || !connected)
			ibv_modify_qp(c->qp, &err_attr, IBV_QP_STATE);
		/* Fails harmlessly when the peer disconnected first. */
		if (rdma_disconnect(c->id))
			dbg("connection %d: rdma_disconnect: %s\n", c->num, strerror(errno));
	}
	if (c->qp && connected) {
		deadline_in(&deadline, TEARDOWN_MS);
		pthread_mutex_lock(&c->lock);
		while (!c->disconnected && !c->cm_error &&
		       conn_wait(c, &deadline) != ETIMEDOUT)
			;
		if (!c->disconnected && !c->cm_error) {
			err("connection %d: no DISCONNECTED event within %d ms",
			    c->num, TEARDOWN_MS);
			ret = -1;
		}
		pthread_mutex_unlock(&c->lock);
	}
	if (c->cq_running) {
		/* The QP in the error state flushes our receives, which ends
		 * the thread; cancel it if that never comes. */
		deadline_in(&deadline, TEARDOWN_MS);
		pthread_mutex_lock(&c->lock);
		while (!c->cq_exited && conn_wait(c, &deadline) != ETIMEDOUT)
			;
		pthread_mutex_unlock(&c->lock);
		if (!c->cq_exited) {
			err("connection %d: no flush completion after the disconnect",
			    c->num);
			pthread_cancel(c->cq_thread);
			ret = -1;
		}
		pthread_join(c->cq_thread, NULL);
	}
	if (c->qp) {
		if (c->own_qp)
			ibv_destroy_qp(c->qp);
		else
			rdma_destroy_qp(c->id);
	}
	if (c->ping_mr)
		ibv_dereg_mr(c->ping_mr);
	if (c->data_mr)
		ibv_dereg_mr(c->data_mr);
	if (c->send_mr)
		ibv_dereg_mr(c->send_mr);
	if (c->recv_mr)
		ibv_dereg_mr(c->recv_mr);
	free(c->ping);
	free(c->data);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->comp)
		ibv_destroy_comp_channel(c->comp);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->id)
		rdma_destroy_id(c->id);
	conn_free(c);
	return ret;
}

/* ---- posting ------------------------------------------------------------- */

static int post(struct conn *c, enum ibv_wr_opcode op, void *buf, uint32_t len,
		uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = op == IBV_WR_SEND ? WRID_SEND : WRID_RDMA,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	errno = ibv_post_send(c->qp, &wr, &bad);
	if (errno) {
		err("connection %d: ibv_post_send: %s", c->num, strerror(errno));
		return -1;
	}
	if (op == IBV_WR_SEND)
		c->sends_posted++;
	return 0;
}

static int send_adv(struct conn *c, unsigned int slot, const void *buf,
		    const struct ibv_mr *mr)
{
	struct adv *a = &c->send_buf[slot];

	if (buf) {
		a->addr = htobe64((uint64_t)(uintptr_t)buf);
		a->rkey = htobe32(mr->rkey);
		a->len = htobe32((uint32_t)opt.size);
		dbg("connection %d: advertising addr %p rkey %#x len %d\n",
		    c->num, buf, mr->rkey, opt.size);
	} else {
		memset(a, 0, sizeof(*a));
	}
	return post(c, IBV_WR_SEND, a, sizeof(*a), c->send_mr->lkey, 0, 0);
}

/* ---- the ping-pong --------------------------------------------------------- */

/* The client's ping text: the prefix, then letters A..z cycling from a
 * start that moves on by one each ping. */
static void fill_ping(char *buf, int ping, char *start)
{
	int i = snprintf(buf, (size_t)opt.size, PING_FMT, ping);
	char ch = *start;

	for (; i < opt.size - 1; i++) {
		buf[i] = ch;
		ch = ch == 'z' ? 'A' : (char)(ch + 1);
	}
	buf[opt.size - 1] = '\0';
	*start = *start == 'z' ? 'A' : (char)(*start + 1);
}

static int client_pings(struct conn *c)
{
	char start = 'A';
	struct adv a;
	enum wait_result r;
	int n;

	for (n = 0; !opt.count || n < opt.count; n++) {
		fill_ping(c->ping, n, &start);
		memset(c->data, 0, (size_t)opt.size);
		if (send_adv(c, 0, c->ping, c->ping_mr))
			return -1;
		r = wait_recv(c, &a);
		if (r == GOT) {
			if (send_adv(c, 1, c->data, c->data_mr))
				return -1;
			r = wait_recv(c, &a);
			/* The server read our ping and left before its pong. */
			if (r == PEER_GONE) {
				err("the server disconnected during ping %d", n);
				return -1;
			}
		}
		if (r == PEER_GONE) {
			/* A server that ends its -C count leaves between pings;
			 * one that leaves before the first refused us. */
			if (!opt.count && n == 0) {
				err("the server disconnected before the first ping");
				return -1;
			}
			if (!opt.count) {
				dbg("the server disconnected after %d pings\n", n);
				return 0;
			}
			err("the server disconnected after %d of %d pings", n, opt.count);
			return -1;
		}
		if (r != GOT)
			return -1;
		if (opt.validate && memcmp(c->ping, c->data, (size_t)opt.size)) {
			err("data mismatch in ping %d", n);
			return -1;
		}
		if (opt.verbose)
			printf("ping data: %s\n", c->data);
	}
	dbg("%d pings done\n", n);
	return 0;
}

/*
 * After the last ping, let the client disconnect first.  It may still be
 * handling our last "go ahead", and a client that sees DISCONNECTED before
 * it has printed the last ping treats that as an error (Debian's does).
 * Bounded: a client that never disconnects is disconnected by teardown.
 */
static void wait_client_gone(struct conn *c)
{
	struct timespec deadline;

	deadline_in(&deadline, TEARDOWN_MS);
	pthread_mutex_lock(&c->lock);
	/* A client that sent its next ping's advertisement pings on (its -C
	 * is larger, or none): it will not leave first. */
	while (!c->disconnected && !c->cm_error && !c->nadv &&
	       conn_wait(c, &deadline) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&c->lock);
}

/* The server's RDMA operation number nth, of ping n, done. */
static int server_rdma(struct conn *c, enum ibv_wr_opcode op, uint32_t len,
		       uint64_t addr, uint32_t rkey, unsigned int nth, int n)
{
	if (post(c, op, c->data, len, c->data_mr->lkey, addr, rkey))
		return -1;
	switch (wait_rdma(c, nth)) {
	case GOT:
		return 0;
	case PEER_GONE:
		err("connection %d: the client disconnected during ping %d", c->num, n);
		return -1;
	default:	/* the CM or CQ thread said why */
		return -1;
	}
}

static int server_pings(struct conn *c)
{
	unsigned int rdma = 0;
	struct adv a;
	uint32_t len, rkey;
	uint64_t addr;
	enum wait_result r;
	int n;

	for (n = 0; !opt.count || n < opt.count; n++) {
		r = wait_recv(c, &a);
		if (r == PEER_GONE) {
			dbg("connection %d: the client disconnected after %d pings\n", c->num, n);
			return 0;
		}
		if (r != GOT)
			return -1;
		addr = be64toh(a.addr);
		rkey = be32toh(a.rkey);
		len = be32toh(a.len);
		dbg("connection %d: ping source addr %#" PRIx64 " rkey %#x len %u\n",
		    c->num, addr, rkey, len);
		if (len == 0 || len > (uint32_t)opt.size) {
			err("connection %d: the client's buffer is %u bytes, ours %d (use the same -S)",
			    c->num, len, opt.size);
			return -1;
		}
		memset(c->data, 0, (size_t)opt.size);
		if (server_rdma(c, IBV_WR_RDMA_READ, len, addr, rkey, ++rdma, n))
			return -1;
		if (opt.verbose)
			printf("server ping data: %.*s\n", (int)len, c->data);
		if (send_adv(c, 0, NULL, NULL))
			return -1;

		r = wait_recv(c, &a);
		if (r != GOT) {
			err("connection %d: no pong advertisement from the client", c->num);
			return -1;
		}
		addr = be64toh(a.addr);
		rkey = be32toh(a.rkey);
		/* What was read, up to its NUL (the ping is a C string). */
		len = (uint32_t)strnlen(c->data, len - 1) + 1;
		if (len > be32toh(a.len)) {
			err("connection %d: the client's pong buffer is too small", c->num);
			return -1;
		}
		dbg("connection %d: writing %u bytes to addr %#" PRIx64 " rkey %#x\n",
		    c->num, len, addr, rkey);
		if (server_rdma(c, IBV_WR_RDMA_WRITE, len, addr, rkey, ++rdma, n))
			return -1;
		if (send_adv(c, 0, NULL, NULL))
			return -1;
	}
	dbg("connection %d: %d pings done\n", c->num, n);
	wait_client_gone(c);
	return 0;
}

/* ---- client and server ----------------------------------------------------- */

static void set_port(struct sockaddr_storage *ss, int port)
{
	if (ss->ss_family == AF_INET6)
		((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
	else
		((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
}

static int run_client(void)
{
	struct rdma_conn_param param;
	struct conn *c = conn_new();
	int ret = -1;

	if (!c)
		return -1;
	set_port(&opt.addr, opt.port);
	if (rdma_create_id(channel, &c->id, c, RDMA_PS_TCP)) {
		err("rdma_create_id: %s", strerror(errno));
		c->id = NULL;
		goto out;
	}
	if (rdma_resolve_addr(c->id, opt.have_src ? (struct sockaddr *)&opt.src : NULL,
			      (struct sockaddr *)&opt.addr, RESOLVE_MS)) {
		err("rdma_resolve_addr: %s", strerror(errno));
		goto out;
	}
	if (wait_cm(c, &c->route_resolved, "address and route resolution"))
		goto out;
	dbg("route resolved: device %s port %u\n",
	    ibv_get_device_name(c->id->verbs->device), c->id->port_num);
	if (setup_verbs(c))
		goto out;
	init_conn_param(c, &param);
	if (rdma_connect(c->id, &param)) {
		err("rdma_connect: %s", strerror(errno));
		goto out;
	}
	if (c->own_qp) {
		/* No QP on the id: CONNECT_RESPONSE, then we finish the
		 * QP's transitions and send the RTU ourselves. */
		if (wait_cm(c, &c->connect_response, "connect") ||
		    modify_qp_to(c, IBV_QPS_RTR) || modify_qp_to(c, IBV_QPS_RTS))
			goto out;
		if (rdma_establish(c->id)) {
			err("rdma_establish: %s", strerror(errno));
			goto out;
		}
	} else if (wait_cm(c, &c->established, "connect")) {
		goto out;
	}
	dbg("connected\n");
	ret = client_pings(c);
out:
	if (teardown(c))
		ret = -1;
	return ret;
}

/* Serve one accepted request; frees c. */
static int serve(struct conn *c)
{
	struct rdma_conn_param param;
	int ret = -1;

	if (setup_verbs(c))
		goto out;
	if (c->own_qp && (modify_qp_to(c, IBV_QPS_RTR) || modify_qp_to(c, IBV_QPS_RTS)))
		goto out;
	init_conn_param(c, &param);
	if (rdma_accept(c->id, &param)) {
		err("rdma_accept: %s", strerror(errno));
		goto out;
	}
	if (wait_cm(c, &c->established, "accept"))
		goto out;
	dbg("connection %d established\n", c->num);
	ret = server_pings(c);
out:
	if (teardown(c))
		ret = -1;
	return ret;
}

static void *serve_thread(void *arg)
{
	struct conn *c = arg;
	int num = c->num;

	if (serve(c))
		err("connection %d failed", num);
	return NULL;
}

static struct conn *next_request(void)
{
	struct conn *c = NULL;

	pthread_mutex_lock(&req_lock);
	while (!req_n && !req_failed)
		pthread_cond_wait(&req_cond, &req_lock);
	if (req_n) {
		c = req_queue[0];
		memmove(&req_queue[0], &req_queue[1], (req_n - 1) * sizeof(req_queue[0]));
		req_n--;
		req_taken++;
	}
	pthread_mutex_unlock(&req_lock);
	return c;
}

static int run_server(void)
{
	struct conn *c;
	pthread_attr_t attr;
	pthread_t t;
	int ret;

	if (!opt.have_addr) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&opt.addr;

		sin->sin_family = AF_INET;
		sin->sin_addr.s_addr = htonl(INADDR_ANY);
	}
	set_port(&opt.addr, opt.port);
	if (rdma_create_id(channel, &listen_id, &listen_marker, RDMA_PS_TCP)) {
		err("rdma_create_id: %s", strerror(errno));
		return -1;
	}
	if (rdma_bind_addr(listen_id, (struct sockaddr *)&opt.addr)) {
		err("rdma_bind_addr: %s", strerror(errno));
		return -1;
	}
	if (rdma_listen(listen_id, BACKLOG)) {
		err("rdma_listen: %s", strerror(errno));
		return -1;
	}
	dbg("listening on port %u\n", ntohs(rdma_get_src_port(listen_id)));

	if (!opt.persistent) {
		c = next_request();
		if (!c)
			return -1;
		ret = serve(c);
		return ret;
	}
	/* -P: one thread per connection, until killed. */
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (;;) {
		c = next_request();
		if (!c)
			return -1;
		if (pthread_create(&t, &attr, serve_thread, c)) {
			err("cannot start a connection thread");
			rdma_reject(c->id, NULL, 0);
			rdma_destroy_id(c->id);
			conn_free(c);
		}
	}
}

/* ---- main ------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rping -s [-vVdPq] [-S size] [-C count] [-a address] [-p port]\n"
		"       rping -c [-vVdq] [-S size] [-C count] [-I address] -a address [-p port]\n"
		"  -s          server\n"
		"  -c          client\n"
		"  -a address  server: the address to listen on (default any IPv4; ::0 for IPv6)\n"
		"              client: the server's address\n"
		"  -I address  client: the source address\n"
		"  -p port     port (default %d)\n"
		"  -v          display the ping data\n"
		"  -V          validate the ping data\n"
		"  -d          debug output\n"
		"  -C count    pings per connection (default: unlimited)\n"
		"  -S size     ping size in bytes, %d to %d (default %d)\n"
		"  -P          persistent server: serve clients concurrently until killed\n"
		"  -q          create the QP with ibv_create_qp and move it with rdma_init_qp_attr\n",
		DEFAULT_PORT, MIN_SIZE, MAX_SIZE, DEFAULT_SIZE);
}

static int parse_addr(const char *s, struct sockaddr_storage *ss)
{
	struct addrinfo *res;
	int ret = getaddrinfo(s, NULL, NULL, &res);

	if (ret) {
		err("%s: %s", s, gai_strerror(ret));
		return -1;
	}
	if (res->ai_family != AF_INET && res->ai_family != AF_INET6) {
		err("%s: not an IPv4 or IPv6 address", s);
		freeaddrinfo(res);
		return -1;
	}
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

static int parse_int(const char *s, int min, int max, const char *what, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);	/* decimal, as rdma-core's atoi: "010" is 10 */
	if (errno || end == s || *end || v < min || v > max) {
		err("invalid %s '%s' (valid range is %d to %d)", what, s, min, max);
		return -1;
	}
	*out = (int)v;
	return 0;
}

int main(int argc, char **argv)
{
	int o, ret;

	setvbuf(stdout, NULL, _IOLBF, 0);
	opt.size = DEFAULT_SIZE;
	opt.port = DEFAULT_PORT;
	while ((o = getopt(argc, argv, "scvVdPqa:I:p:C:S:h")) != -1) {
		switch (o) {
		case 's': opt.server = true; break;
		case 'c': opt.client = true; break;
		case 'v': opt.verbose = true; break;
		case 'V': opt.validate = true; break;
		case 'd': opt.debug++; break;
		case 'P': opt.persistent = true; break;
		case 'q': opt.self_qp = true; break;
		case 'a':
			if (parse_addr(optarg, &opt.addr))
				return 2;
			opt.have_addr = true;
			break;
		case 'I':
			if (parse_addr(optarg, &opt.src))
				return 2;
			opt.have_src = true;
			break;
		case 'p':
			if (parse_int(optarg, 0, 65535, "port", &opt.port))
				return 2;
			break;
		case 'C':
			if (parse_int(optarg, 0, INT_MAX, "count", &opt.count))
				return 2;
			break;
		case 'S':
			if (parse_int(optarg, MIN_SIZE, MAX_SIZE, "size", &opt.size))
				return 2;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc || opt.server == opt.client) {
		usage(stderr);
		return 2;
	}
	if (opt.client && !opt.have_addr) {
		err("the client needs the server's address (-a)");
		return 2;
	}
	if (opt.persistent && !opt.server) {
		err("-P is a server option");
		return 2;
	}
	if (opt.have_src && opt.have_addr && opt.src.ss_family != opt.addr.ss_family) {
		err("-I and -a must be of the same address family");
		return 2;
	}
	channel = rdma_create_event_channel();
	if (!channel) {
		err("rdma_create_event_channel: %s", strerror(errno));
		return 1;
	}
	if (pthread_create(&cm_thread, NULL, cm_main, NULL)) {
		err("cannot start the CM thread");
		return 1;
	}
	ret = opt.server ? run_server() : run_client();
	if (listen_id) {
		rdma_destroy_id(listen_id);
		listen_id = NULL;
	}
	cm_thread_stop();
	rdma_destroy_event_channel(channel);
	return ret ? 1 : 0;
}
