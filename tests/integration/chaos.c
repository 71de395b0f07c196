/*
 * chaos-helper: one worker of the chaos soak (tests/integration/chaos.sh).
 *
 * usage: chaos-helper PORT SECONDS PEER_PORT...
 *
 * A worker is a server and a client at once (two processes: the server is
 * a forked child, so that a kill -9 of the worker's group takes both):
 *
 * server: listens on 127.0.0.1:PORT (RDMA CM) and serves one connection
 *	at a time.  Each connection gets a fresh 64 KiB region (remote
 *	write, read, atomic) with an 8-byte counter at its end, a UD QP, and
 *	receives.  A SEND "wrote SEED OFF LEN" is checked against the region
 *	(the WRITE before it must be there: RC ordering) and answered with
 *	"ack SEED"; UD datagrams are checked byte for byte.
 * client: connects to a random PEER_PORT, and for a few rounds: WRITE a
 *	pattern then SEND "wrote", wait for the ack; READ the range back and
 *	check it; FETCH_AND_ADD 1 and CMP_AND_SWP on the counter, whose old
 *	values must follow exactly; send UD datagrams to the server's UD QP
 *	(through an AH with a GRH on every other connection).
 *	It registers a fresh MR for every connection and deregisters it
 *	after, so memory comes and goes under traffic.
 *
 * Every signaled WR must complete exactly once, in order.  A peer that
 * dies or stops answering ends the connection with an error completion or
 * a CM event: that is the chaos, counted as "lost".  A wrong byte, a wrong
 * atomic result, a duplicated or missing completion, or a wait that
 * outlasts its timeout while the CM says the peer is there, is a failure:
 * the worker prints "chaos: FAIL ..." and exits 1.  At SIGTERM it finishes
 * its round and prints "chaos: ok PORT rounds=... lost=..." per process.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define REGION		(64 * 1024)
#define COUNTER_OFF	(REGION - 8)
#define MSG		256
#define NRECV		16
#define UD_QKEY		0x1234567u
#define UD_PER_ROUND	4
#define ROUNDS		20
/* Longer than any SIGSTOP the soak gives a peer (1 s), with room. */
#define WAIT_MS		15000

enum { OP_WROTE = 1, OP_ACK, OP_BYE };

struct msg {
	uint32_t op;
	uint32_t seed;
	uint32_t off;
	uint32_t len;
};

/* What the server tells the client in the CM's private data. */
struct offer {
	uint64_t addr;
	uint32_t rkey;
	uint32_t ud_qpn;
	uint16_t lid;
	uint16_t pad[3];
} __attribute__((packed));

/* A UD datagram's header; the pattern of seed follows. */
struct dgram {
	uint32_t magic;
	uint32_t seed;
	uint32_t len;
};
#define DGRAM_MAGIC	0xc4a05000u

static volatile sig_atomic_t stopping;
static const char *role = "client";
static int port;
static unsigned long rounds, lost, verified, ud_ok;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void fail(const char *fmt, ...)
{
	va_list ap;

	printf("chaos: FAIL %s %d: ", role, port);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(1);
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static uint8_t pat(uint32_t off, uint32_t seed)
{
	uint64_t x = off * 0x9e3779b97f4a7c15ull + seed * 0xbf58476d1ce4e5b9ull;

	x ^= x >> 29;
	return (uint8_t)(x ^ (x >> 8) ^ seed);
}

static void fill(uint8_t *p, uint32_t len, uint32_t seed)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		p[i] = pat(i, seed);
}

/* Offset of the first wrong byte, or -1. */
static long check(const uint8_t *p, uint32_t len, uint32_t seed)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		if (p[i] != pat(i, seed))
			return i;
	return -1;
}

static void on_term(int sig)
{
	(void)sig;
	stopping = 1;
}

/* ---- a connection's verbs resources ------------------------------------ */

struct conn {
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;	/* the RC QP's sends and receives */
	struct ibv_mr *mr;	/* buf: REGION, 2 * NRECV receive slots, scratch */
	uint8_t *buf;
	struct ibv_qp *ud;
	struct ibv_cq *ud_cq;
	struct ibv_ah *ah;
	uint64_t next_wrid;	/* the next send WR's id: completions in order */
	uint64_t recvs;		/* receive completions so far */
};

/* Receive slots: 0..NRECV-1 for the RC QP, NRECV.. for the UD QP. */
#define RECV_AT(c, i)	((c)->buf + REGION + (size_t)(i) * (MSG + 40))
#define SCRATCH(c)	((c)->buf + REGION + (size_t)2 * NRECV * (MSG + 40))
/* A multiple of the page: aligned_alloc wants its size one of the alignment. */
#define BUF_LEN		((REGION + 2 * NRECV * (MSG + 40) + REGION + 4095) & ~4095)

static int post_recv(struct conn *c, struct ibv_qp *qp, unsigned int slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)RECV_AT(c, slot), .length = MSG + 40,
		.lkey = c->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

static int conn_setup(struct conn *c, bool server)
{
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 16, .max_recv_wr = NRECV, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = 0 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_context *ctx = c->id->verbs;

	c->buf = aligned_alloc(4096, BUF_LEN);
	if (!c->buf)
		return -1;
	memset(c->buf, 0, BUF_LEN);
	c->pd = ibv_alloc_pd(ctx);
	c->scq = c->pd ? ibv_create_cq(ctx, 32, NULL, NULL, 0) : NULL;
	c->rcq = c->scq ? ibv_create_cq(ctx, 32, NULL, NULL, 0) : NULL;
	c->ud_cq = c->rcq ? ibv_create_cq(ctx, 64, NULL, NULL, 0) : NULL;
	c->mr = c->ud_cq ? ibv_reg_mr(c->pd, c->buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE |
				      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				      IBV_ACCESS_REMOTE_ATOMIC) : NULL;
	if (!c->mr)
		return -1;
	qa.send_cq = c->scq;
	qa.recv_cq = c->rcq;
	if (rdma_create_qp(c->id, c->pd, &qa))
		return -1;
	qa.qp_type = IBV_QPT_UD;
	qa.send_cq = qa.recv_cq = c->ud_cq;
	c->ud = ibv_create_qp(c->pd, &qa);
	if (!c->ud)
		return -1;
	{
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = c->id->port_num,
					 .qkey = UD_QKEY };

		if (ibv_modify_qp(c->ud, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				  IBV_QP_PORT | IBV_QP_QKEY))
			return -1;
		a.qp_state = IBV_QPS_RTR;
		if (ibv_modify_qp(c->ud, &a, IBV_QP_STATE))
			return -1;
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = 0;
		if (ibv_modify_qp(c->ud, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
			return -1;
	}
	for (unsigned int i = 0; i < NRECV; i++)
		if (post_recv(c, c->id->qp, i) ||
		    (server && post_recv(c, c->ud, NRECV + i)))
			return -1;
	return 0;
}

static void conn_free(struct conn *c)
{
	if (c->ah)
		ibv_destroy_ah(c->ah);
	if (c->id && c->id->qp)
		rdma_destroy_qp(c->id);
	if (c->ud)
		ibv_destroy_qp(c->ud);
	if (c->mr)
		ibv_dereg_mr(c->mr);
	if (c->ud_cq)
		ibv_destroy_cq(c->ud_cq);
	if (c->rcq)
		ibv_destroy_cq(c->rcq);
	if (c->scq)
		ibv_destroy_cq(c->scq);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	free(c->buf);
	if (c->id)
		rdma_destroy_id(c->id);
	memset(c, 0, sizeof(*c));
}

/* A CM event on ch within ms: 1 (in *ev, to ack), 0 none, -1 error. */
static int cm_event(struct rdma_event_channel *ch, struct rdma_cm_event **ev, int ms)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	int n = poll(&pfd, 1, ms);

	if (n <= 0)
		return n < 0 && errno != EINTR ? -1 : 0;
	return rdma_get_cm_event(ch, ev) ? -1 : 1;
}

/*
 * Handle (and ack) a CM event that came while c is served: true if it
 * says c's peer is gone.  A server takes one connection at a time: a
 * client asking meanwhile is turned away at once (it tries another).
 */
static bool cm_says_gone(struct conn *c, struct rdma_cm_event *ev)
{
	struct rdma_cm_id *id = ev->id;
	int type = ev->event;

	if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
		rdma_reject(id, NULL, 0);
		rdma_ack_cm_event(ev);
		rdma_destroy_id(id);
		return false;
	}
	rdma_ack_cm_event(ev);
	return id == c->id && (type == RDMA_CM_EVENT_DISCONNECTED ||
			       type == RDMA_CM_EVENT_DEVICE_REMOVAL ||
			       type == RDMA_CM_EVENT_TIMEWAIT_EXIT);
}

/*
 * The next completion of cq within WAIT_MS: 1, 0 (timed out), or -1 when
 * the CM reported the peer gone meanwhile (chaos: count it as lost).
 */
static int next_wc(struct conn *c, struct ibv_cq *cq, struct rdma_event_channel *ch,
		   struct ibv_wc *wc)
{
	long deadline = now_ms() + WAIT_MS;
	struct rdma_cm_event *ev;
	unsigned long spins = 0;
	int n;

	while (now_ms() < deadline) {
		n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			fail("ibv_poll_cq: %d", n);
		if (n == 1)
			return 1;
		if (++spins % 64 == 0 && cm_event(ch, &ev, 1) == 1 &&
		    cm_says_gone(c, ev))
			return -1;
	}
	return 0;
}

/* A send-side completion: the next wr_id, successfully, or "lost" (-1). */
static int expect_send(struct conn *c, struct rdma_event_channel *ch, uint64_t wrid,
		       enum ibv_wc_opcode op, const char *what)
{
	struct ibv_wc wc;
	int r = next_wc(c, c->scq, ch, &wc);

	if (r < 0)
		return -1;
	if (r == 0)
		fail("%s: no completion within %d ms, the peer still connected", what, WAIT_MS);
	if (wc.status != IBV_WC_SUCCESS)
		return -1;	/* the peer died or stopped: the chaos */
	if (wc.wr_id != wrid)
		fail("%s: completion of wr %" PRIu64 ", expected %" PRIu64 " (lost or duplicated)",
		     what, (uint64_t)wc.wr_id, wrid);
	if (wc.opcode != op)
		fail("%s: opcode %d, expected %d", what, wc.opcode, op);
	return 0;
}

/* ---- server ---------------------------------------------------------------- */

/*
 * A datagram's GRH, if it came with one: both ends are on one port, so
 * its SGID and DGID are the port's GID 0 (the client's AH names it).
 */
static bool grh_ok(struct conn *c, const struct ibv_wc *wc)
{
	static union ibv_gid gid;	/* one device, one port: asked once */
	static bool have_gid;
	const uint8_t *grh = RECV_AT(c, wc->wr_id);

	if (!(wc->wc_flags & IBV_WC_GRH))
		return true;
	if (!have_gid &&
	    ibv_query_gid(c->id->verbs, c->id->port_num, 0, &gid) == 0)
		have_gid = true;
	return have_gid && grh[0] >> 4 == 6 && grh[6] == 0x1B &&
	       memcmp(grh + 8, gid.raw, 16) == 0 &&
	       memcmp(grh + 24, gid.raw, 16) == 0;
}

static void serve_ud(struct conn *c)
{
	struct ibv_wc wc;
	const struct dgram *d;

	while (ibv_poll_cq(c->ud_cq, 1, &wc) == 1) {
		if (wc.status != IBV_WC_SUCCESS)
			return;
		d = (const struct dgram *)(RECV_AT(c, wc.wr_id) + 40);
		if (d->magic != DGRAM_MAGIC || d->len > MSG - sizeof(*d) ||
		    wc.byte_len != 40 + sizeof(*d) + d->len ||
		    check((const uint8_t *)(d + 1), d->len, d->seed) >= 0)
			fail("UD datagram %u bytes, magic %#x: not what was sent",
			     wc.byte_len, d->magic);
		if (!grh_ok(c, &wc))
			fail("UD datagram with a GRH that is not the port's");
		ud_ok++;
		if (post_recv(c, c->ud, (unsigned int)wc.wr_id))
			return;
	}
}

/* One RC receive: check a "wrote" and answer it.  0, 1 (bye), -1 lost. */
static int serve_msg(struct conn *c, struct rdma_event_channel *ch, const struct ibv_wc *wc)
{
	struct msg m, *reply = (struct msg *)SCRATCH(c);
	long bad;

	if (wc->status != IBV_WC_SUCCESS)
		return -1;
	if (wc->opcode != IBV_WC_RECV || wc->byte_len != sizeof(m))
		fail("receive: opcode %d, %u bytes", wc->opcode, wc->byte_len);
	memcpy(&m, RECV_AT(c, wc->wr_id), sizeof(m));
	if (post_recv(c, c->id->qp, (unsigned int)wc->wr_id))
		return -1;
	if (m.op == OP_BYE)
		return 1;
	if (m.op != OP_WROTE || m.off > REGION - 8 || m.len > COUNTER_OFF - m.off)
		fail("a message that was never sent: op %u off %u len %u", m.op, m.off, m.len);
	bad = check(c->buf + m.off, m.len, m.seed);
	if (bad >= 0)
		fail("WRITE then SEND: byte %ld of %u at offset %u is wrong (seed %u)",
		     bad, m.len, m.off, m.seed);
	verified++;
	reply->op = OP_ACK;
	reply->seed = m.seed;
	{
		struct ibv_sge sge = { (uintptr_t)reply, sizeof(*reply), c->mr->lkey };
		struct ibv_send_wr wr = { .wr_id = c->next_wrid, .sg_list = &sge,
					  .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED }, *badwr;

		if (ibv_post_send(c->id->qp, &wr, &badwr))
			return -1;
	}
	return expect_send(c, ch, c->next_wrid++, IBV_WC_SEND, "ack");
}

static void serve_conn(struct conn *c, struct rdma_event_channel *ch)
{
	struct ibv_wc wc;
	int r;

	for (;;) {
		serve_ud(c);
		r = next_wc(c, c->rcq, ch, &wc);
		if (r <= 0) {	/* a client that went away or stopped for good */
			lost++;
			return;
		}
		r = serve_msg(c, ch, &wc);
		if (r) {
			if (r < 0)
				lost++;
			serve_ud(c);
			return;
		}
	}
}

static int accept_conn(struct conn *c, struct rdma_event_channel *ch)
{
	struct offer o = { 0 };
	struct rdma_conn_param p = { .responder_resources = 4, .initiator_depth = 4,
				     .rnr_retry_count = 7, .retry_count = 7 };
	struct ibv_port_attr pa;
	struct rdma_cm_event *ev;

	if (conn_setup(c, true) || ibv_query_port(c->id->verbs, c->id->port_num, &pa))
		return -1;
	o.addr = (uintptr_t)c->buf;
	o.rkey = c->mr->rkey;
	o.ud_qpn = c->ud->qp_num;
	o.lid = pa.lid;
	p.private_data = &o;
	p.private_data_len = sizeof(o);
	if (rdma_accept(c->id, &p))
		return -1;
	for (;;) {
		struct rdma_cm_id *id;
		int type;

		if (cm_event(ch, &ev, WAIT_MS) != 1)
			return -1;
		id = ev->id;
		type = ev->event;
		if (id != c->id) {
			cm_says_gone(c, ev);	/* someone else: turned away */
			continue;
		}
		rdma_ack_cm_event(ev);
		return type == RDMA_CM_EVENT_ESTABLISHED ? 0 : -1;
	}
}

static void run_server(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *listen_id;
	struct rdma_cm_event *ev;
	long deadline = now_ms() + WAIT_MS;
	struct conn c;

	role = "server";
	if (!ch || rdma_create_id(ch, &listen_id, NULL, RDMA_PS_TCP))
		fail("rdma_create_id: %s", strerror(errno));
	/*
	 * A worker restarted after a kill -9 may find its port still held
	 * until the daemon has seen the old one's connection close.
	 */
	while (rdma_bind_addr(listen_id, (struct sockaddr *)&sin)) {
		if (errno != EADDRINUSE || now_ms() > deadline)
			fail("cannot bind port %d: %s", port, strerror(errno));
		usleep(100000);
	}
	if (rdma_listen(listen_id, 8))
		fail("cannot listen on port %d: %s", port, strerror(errno));
	while (!stopping) {
		if (cm_event(ch, &ev, 200) != 1)
			continue;
		if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
			rdma_ack_cm_event(ev);
			continue;
		}
		memset(&c, 0, sizeof(c));
		c.id = ev->id;
		rdma_ack_cm_event(ev);
		if (accept_conn(&c, ch) == 0) {
			serve_conn(&c, ch);
			rounds++;
		} else {
			lost++;
		}
		rdma_disconnect(c.id);
		conn_free(&c);
	}
	printf("chaos: ok server %d connections=%lu verified=%lu ud=%lu lost=%lu\n",
	       port, rounds, verified, ud_ok, lost);
	rdma_destroy_id(listen_id);
	rdma_destroy_event_channel(ch);
}

/* ---- client ---------------------------------------------------------------- */

static int post1(struct conn *c, enum ibv_wr_opcode op, void *addr, uint32_t len,
		 uint64_t raddr, uint64_t cmp_add, uint64_t swap, const struct offer *o)
{
	struct ibv_sge sge = { (uintptr_t)addr, len, c->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = c->next_wrid, .sg_list = &sge,
				  .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = o->rkey;
		wr.wr.atomic.compare_add = cmp_add;
		wr.wr.atomic.swap = swap;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = o->rkey;
	}
	return ibv_post_send(c->id->qp, &wr, &bad);
}

static int send_ud(struct conn *c, const struct offer *o, uint32_t seed)
{
	struct dgram *d = (struct dgram *)(SCRATCH(c) + 1024);
	uint32_t len = 1 + seed % (MSG - sizeof(*d));
	struct ibv_sge sge = { (uintptr_t)d, sizeof(*d) + len, c->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = seed, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;
	long deadline = now_ms() + WAIT_MS;
	int n;

	d->magic = DGRAM_MAGIC;
	d->seed = seed;
	d->len = len;
	fill((uint8_t *)(d + 1), len, seed);
	wr.wr.ud.ah = c->ah;
	wr.wr.ud.remote_qpn = o->ud_qpn;
	wr.wr.ud.remote_qkey = UD_QKEY;
	if (ibv_post_send(c->ud, &wr, &bad))
		return -1;
	do
		n = ibv_poll_cq(c->ud_cq, 1, &wc);
	while (n == 0 && now_ms() < deadline);
	if (n != 1)
		fail("UD send: no completion within %d ms", WAIT_MS);
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != seed)
		fail("UD send: status %s, wr %" PRIu64, ibv_wc_status_str(wc.status),
		     (uint64_t)wc.wr_id);
	return 0;
}

/*
 * The server's UD QP by its LID; every other connection with a GRH too
 * (to the port's GID 0), so datagrams take both forms through the rings.
 */
static struct ibv_ah *server_ah(struct conn *c, const struct offer *o)
{
	struct ibv_ah_attr aa = { .dlid = o->lid, .port_num = c->id->port_num };

	if (random() & 1) {
		aa.is_global = 1;
		aa.grh.hop_limit = 1;
		if (ibv_query_gid(c->id->verbs, aa.port_num, 0, &aa.grh.dgid))
			return NULL;
	}
	return ibv_create_ah(c->pd, &aa);
}

/* One round: write+send, ack, read back, two atomics, UD.  0 or -1 (lost). */
static int round_trip(struct conn *c, struct rdma_event_channel *ch,
		      const struct offer *o, uint64_t *counter)
{
	uint32_t seed = (uint32_t)random();
	uint32_t off = (seed % 48) * 1024, len = 1 + seed % 8192;
	uint8_t *src = SCRATCH(c) + 4096, *back = src + 16384;
	struct msg *m = (struct msg *)SCRATCH(c);
	uint64_t *res = (uint64_t *)(SCRATCH(c) + 2048);
	struct ibv_wc wc;
	int r;

	fill(src, len, seed);
	memset(back, 0, len);
	*m = (struct msg){ .op = OP_WROTE, .seed = seed, .off = off, .len = len };
	if (post1(c, IBV_WR_RDMA_WRITE, src, len, o->addr + off, 0, 0, o) ||
	    expect_send(c, ch, c->next_wrid++, IBV_WC_RDMA_WRITE, "WRITE") ||
	    post1(c, IBV_WR_SEND, m, sizeof(*m), 0, 0, 0, o) ||
	    expect_send(c, ch, c->next_wrid++, IBV_WC_SEND, "SEND"))
		return -1;
	r = next_wc(c, c->rcq, ch, &wc);
	if (r == 0)
		fail("no ack within %d ms, the server still connected", WAIT_MS);
	if (r < 0 || wc.status != IBV_WC_SUCCESS)
		return -1;
	if (wc.opcode != IBV_WC_RECV || ((struct msg *)RECV_AT(c, wc.wr_id))->op != OP_ACK ||
	    ((struct msg *)RECV_AT(c, wc.wr_id))->seed != seed)
		fail("the ack does not answer seed %u", seed);
	if (post_recv(c, c->id->qp, (unsigned int)wc.wr_id) ||
	    post1(c, IBV_WR_RDMA_READ, back, len, o->addr + off, 0, 0, o) ||
	    expect_send(c, ch, c->next_wrid++, IBV_WC_RDMA_READ, "READ"))
		return -1;
	if (check(back, len, seed) >= 0)
		fail("READ back: byte %ld of %u is wrong", check(back, len, seed), len);
	if (post1(c, IBV_WR_ATOMIC_FETCH_AND_ADD, res, 8, o->addr + COUNTER_OFF, 1, 0, o) ||
	    expect_send(c, ch, c->next_wrid++, IBV_WC_FETCH_ADD, "FETCH_AND_ADD"))
		return -1;
	if (*res != *counter)
		fail("FETCH_AND_ADD returned %" PRIu64 ", expected %" PRIu64, *res, *counter);
	(*counter)++;
	if (post1(c, IBV_WR_ATOMIC_CMP_AND_SWP, res, 8, o->addr + COUNTER_OFF,
		  *counter, *counter + 1000, o) ||
	    expect_send(c, ch, c->next_wrid++, IBV_WC_COMP_SWAP, "CMP_AND_SWP"))
		return -1;
	if (*res != *counter)
		fail("CMP_AND_SWP returned %" PRIu64 ", expected %" PRIu64, *res, *counter);
	*counter += 1000;
	for (int i = 0; i < UD_PER_ROUND; i++)
		if (send_ud(c, o, (uint32_t)random()))
			return -1;
	verified++;
	return 0;
}

static int connect_to(struct conn *c, struct rdma_event_channel *ch, int peer,
		      struct offer *o)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)peer),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct rdma_conn_param p = { .responder_resources = 4, .initiator_depth = 4,
				     .rnr_retry_count = 7, .retry_count = 7 };
	struct rdma_cm_event *ev;
	int want[] = { RDMA_CM_EVENT_ADDR_RESOLVED, RDMA_CM_EVENT_ROUTE_RESOLVED };
	int ok = 0;

	if (rdma_create_id(ch, &c->id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&sin, 2000))
		return -1;
	for (int step = 0; step < 2; step++) {
		if (cm_event(ch, &ev, WAIT_MS) != 1)
			return -1;
		ok = (int)ev->event == want[step];
		rdma_ack_cm_event(ev);
		if (!ok || (step == 0 && rdma_resolve_route(c->id, 2000)))
			return -1;
	}
	if (conn_setup(c, false) || rdma_connect(c->id, &p))
		return -1;
	if (cm_event(ch, &ev, WAIT_MS) != 1)
		return -1;
	ok = ev->event == RDMA_CM_EVENT_ESTABLISHED &&
	     ev->param.conn.private_data_len >= sizeof(*o);
	if (ok)
		memcpy(o, ev->param.conn.private_data, sizeof(*o));
	rdma_ack_cm_event(ev);
	if (!ok)
		return -1;
	c->ah = server_ah(c, o);
	return c->ah ? 0 : -1;
}

static void run_client(int npeers, char **peers, long end_ms)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct offer o;
	struct conn c;
	uint64_t counter;
	int i;

	if (!ch)
		fail("rdma_create_event_channel: %s", strerror(errno));
	while (!stopping && now_ms() < end_ms) {
		memset(&c, 0, sizeof(c));
		if (connect_to(&c, ch, atoi(peers[random() % npeers]), &o) < 0) {
			lost++;	/* a peer that is dead, stopped or restarting */
			conn_free(&c);
			usleep(50000);
			continue;
		}
		counter = 0;
		for (i = 0; i < ROUNDS && !stopping; i++)
			if (round_trip(&c, ch, &o, &counter) < 0) {
				lost++;
				break;
			}
		if (i == ROUNDS || stopping) {
			struct msg *m = (struct msg *)SCRATCH(&c);

			*m = (struct msg){ .op = OP_BYE };
			if (post1(&c, IBV_WR_SEND, m, sizeof(*m), 0, 0, 0, &o) == 0)
				expect_send(&c, ch, c.next_wrid++, IBV_WC_SEND, "bye");
		}
		rounds++;
		rdma_disconnect(c.id);
		conn_free(&c);
	}
	printf("chaos: ok client %d connections=%lu rounds=%lu lost=%lu\n", port,
	       rounds, verified, lost);
	rdma_destroy_event_channel(ch);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_term };
	long end_ms;
	pid_t server, r;
	int status;

	if (argc < 4) {
		fprintf(stderr, "usage: %s PORT SECONDS PEER_PORT...\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	port = atoi(argv[1]);
	end_ms = now_ms() + atol(argv[2]) * 1000L;
	sigaction(SIGTERM, &sa, NULL);
	srandom((unsigned int)getpid());
	server = fork();
	if (server < 0)
		fail("fork: %s", strerror(errno));
	if (server == 0) {
		run_server();
		return 0;
	}
	run_client(argc - 3, argv + 3, end_ms);
	kill(server, SIGTERM);
	while ((r = waitpid(server, &status, 0)) < 0 && errno == EINTR)
		;
	if (r != server || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail("the server ended badly (wait status %#x)", r == server ? status : -1);
	return 0;
}
