/*
 * cmapi-helper: the librdmacm API against a real daemon (cm.sh), as an
 * ordinary application built against the system <rdma/rdma_cma.h> and
 * -lrdmacm -libverbs, run through ibverbsd-run so that it loads ours.
 *
 *   cmapi-helper [TEST...]	the Check suite: every case in a process of
 *				its own, both ends of a connection in that one
 *				process on two event channels (or the named
 *				cases only)
 *   cmapi-helper peer listen PORT DIR
 *   cmapi-helper peer connect HOST PORT DIR
 *				one end of a connection for the tests that
 *				kill a process (cm.sh): connect/accept, write
 *				DIR/listen.info or DIR/connect.info
 *				("pid=.. qpn=.. sport=.. dport=.."), then
 *				wait for the connection to end and print
 *				"event: NAME status S after N ms"; the
 *				connecting end takes RDMA_OPTION_ID_ACK_TIMEOUT
 *				from $CMAPI_ACK_TIMEOUT, if set
 *   cmapi-helper peer hold PORT [accept]
 *				a listener that leaves the first request
 *				unanswered (or accepts it, without a QP, and
 *				leaves it so) and prints the next event of it
 *				("event: NAME status S after N ms")
 *   cmapi-helper peer await HOST PORT
 *				a connect, without a QP, that never confirms
 *				a reply: prints its events ("event: NAME
 *				status S after N ms") until one that ends it
 *   cmapi-helper peer abandon HOST PORT MS
 *				a connect whose id is destroyed MS ms later,
 *				unanswered (the requester gives up: REJ)
 *   cmapi-helper peer deaf PORT1 PORT2 GOFILE
 *				listeners on two ports that read no event
 *				until GOFILE exists, then take what came
 *				("deaf: ... alive")
 *   cmapi-helper peer flood HOST PORT N
 *				N connects, each given up at once
 *   cmapi-helper rsocket-probe	prints "rsocket: ok" or "rsocket: ERRNO-TEXT"
 *
 * What is expected comes from the reference (seeds/003: return-value
 * tables, event table, private data zero-padded) and proto/CM.md (REJECTED
 * status 28 for a consumer reject, ADDR_ERROR status -EHOSTUNREACH, IB
 * private-data limits, TIMEWAIT_EXIT, backlog); with nobody listening,
 * REJECTED has the IB CM's "invalid service ID" status 8, as on Linux.  Functions documented as returning -1 with
 * errno or a negative errno value are accepted in either form.
 *
 * Timeouts scale with VT_TMUL (cm.sh passes TMUL).
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <net/if.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/ib.h>
#include <infiniband/verbs.h>
#include <infiniband/sa.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>

#include "vt.h"
#include "tests/common/check_run.h"

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

/* The IB CM's private-data sizes (proto/CM.md, the seed's zero padding). */
#define PDATA_REQ	56
#define PDATA_REP	196
#define PDATA_REJ	148
#define PDATA_SIDR_REQ	180
#define PDATA_SIDR_REP	136
#define PDATA_REQ_IB	92	/* AF_IB: no RDMA CM header in the REQ */
/* REJ reasons: a consumer reject (proto/CM.md), and nobody listening
 * (the IB CM's "invalid service ID", what Linux reports). */
#define REJ_CONSUMER	28	/* IB_CM_REJ_CONSUMER_DEFINED */
#define REJ_NO_LISTENER	8	/* IB_CM_REJ_INVALID_SERVICE_ID */
#define REJ_ECE		35	/* IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED */
#define SIDR_REJECT	2	/* IB_SIDR_REJECT: a SIDR REP's status */
#define UDP_QKEY	0x01234567u
#define TEST_NET_1	"192.0.2.1"	/* RFC 5737: nobody's address */
#define TEST_NET_6	"2001:db8::1"	/* RFC 3849 */

/* Bound for one expected event. */
static int ev_ms(void)
{
	return vt_tmo_ms();
}

/* ---- assertions on librdmacm return values ------------------------------ */

/*
 * The call failed with errno e: -1 and errno (Linux librdmacm), or -e
 * (the seed's "< -1: see errno.h" rule).
 */
#define ck_fails_with(call, e) do {					\
	int r_ = (call);						\
	int en_ = errno;						\
	ck_assert_msg(r_ == -(e) || (r_ == -1 && en_ == (e)),		\
		      "%s: returned %d (errno %d %s), want -1 with errno %s", \
		      #call, r_, en_, strerror(en_), #e);		\
} while (0)

#define ck_ok(call) do {						\
	int r_ = (call);						\
	ck_assert_msg(r_ == 0, "%s: returned %d (errno %d %s)",	\
		      #call, r_, errno, strerror(errno));		\
} while (0)

/* ---- addresses ------------------------------------------------------------ */

static struct sockaddr_storage sa_make(const char *ip, uint16_t port)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, ip, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
	} else if (inet_pton(AF_INET6, ip, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
	} else {
		ck_abort_msg("bad address literal %s", ip);
	}
	return ss;
}

#define SA(ss)	((struct sockaddr *)&(ss))

static uint16_t sa_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return 0;
}

static const char *sa_ip(const struct sockaddr *sa, char *buf, size_t len)
{
	const void *a;

	if (sa->sa_family == AF_INET)
		a = &((const struct sockaddr_in *)sa)->sin_addr;
	else if (sa->sa_family == AF_INET6)
		a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
	else {
		snprintf(buf, len, "(family %d)", sa->sa_family);
		return buf;
	}
	if (!inet_ntop(sa->sa_family, a, buf, (socklen_t)len))
		snprintf(buf, len, "(bad)");
	return buf;
}

static void ck_sa_ip(const struct sockaddr *sa, const char *want, const char *what)
{
	char buf[INET6_ADDRSTRLEN + 16];

	ck_assert_msg(sa, "%s: no address", what);
	ck_assert_msg(!strcmp(sa_ip(sa, buf, sizeof(buf)), want),
		      "%s: address %s, want %s", what, buf, want);
}

/* rdma_get_src_port/rdma_get_dst_port return the port big-endian (__be16). */
static uint16_t src_port(struct rdma_cm_id *id)
{
	return ntohs(rdma_get_src_port(id));
}

static uint16_t dst_port(struct rdma_cm_id *id)
{
	return ntohs(rdma_get_dst_port(id));
}

/* ---- events ------------------------------------------------------------- */

static struct rdma_event_channel *channel(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();

	ck_assert_msg(ch, "rdma_create_event_channel: %s", strerror(errno));
	ck_assert_int_ge(ch->fd, 0);
	return ch;
}

static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n;

	do
		n = poll(&p, 1, ms);
	while (n < 0 && errno == EINTR);
	return n > 0 && (p.revents & POLLIN);
}

/* The next event on ch (unacked), within ms. */
static struct rdma_cm_event *next_event(struct rdma_event_channel *ch, int ms,
					const char *waiting_for)
{
	struct rdma_cm_event *ev = NULL;

	ck_assert_msg(readable(ch->fd, ms), "no CM event within %d ms (waiting for %s)",
		      ms, waiting_for);
	ck_assert_msg(rdma_get_cm_event(ch, &ev) == 0, "rdma_get_cm_event: %s",
		      strerror(errno));
	ck_assert_ptr_nonnull(ev);
	return ev;
}

/* The next event, which must be `want` for `id` (NULL: any id); unacked. */
static struct rdma_cm_event *expect(struct rdma_event_channel *ch,
				    enum rdma_cm_event_type want,
				    struct rdma_cm_id *id)
{
	struct rdma_cm_event *ev = next_event(ch, ev_ms(), rdma_event_str(want));

	ck_assert_msg(ev->event == want, "got %s (status %d), want %s",
		      rdma_event_str(ev->event), ev->status, rdma_event_str(want));
	if (id)
		ck_assert_msg(ev->id == id, "%s for another id", rdma_event_str(want));
	return ev;
}

static void expect_ack(struct rdma_event_channel *ch, enum rdma_cm_event_type want,
		       struct rdma_cm_id *id)
{
	struct rdma_cm_event *ev = expect(ch, want, id);

	ck_assert_int_eq(ev->status, 0);
	ck_ok(rdma_ack_cm_event(ev));
}

static void expect_quiet(struct rdma_event_channel *ch, int ms, const char *what)
{
	struct rdma_cm_event *ev;

	if (!readable(ch->fd, ms))
		return;
	if (rdma_get_cm_event(ch, &ev) == 0)
		ck_abort_msg("%s: unexpected %s (status %d)", what,
			     rdma_event_str(ev->event), ev->status);
	ck_abort_msg("%s: the channel fd is readable, but rdma_get_cm_event: %s",
		     what, strerror(errno));
}

/* Private data of an event: the first n bytes are want, the rest up to
 * full (the IB size) zeros. */
static void ck_pdata(const void *data, uint8_t len, const void *want, size_t n,
		     size_t full, const char *what)
{
	const uint8_t *p = data;
	size_t i;

	ck_assert_msg(data, "%s: no private data", what);
	ck_assert_msg(len == full, "%s: private_data_len %u, want %zu (zero-padded)",
		      what, len, full);
	ck_assert_msg(!memcmp(p, want, n), "%s: private data differs", what);
	for (i = n; i < full; i++)
		ck_assert_msg(!p[i], "%s: padding byte %zu is %#x, want 0", what, i, p[i]);
}

/* ---- ids and connections ------------------------------------------------------ */

static struct rdma_cm_id *new_id(struct rdma_event_channel *ch, void *ctx,
				 enum rdma_port_space ps)
{
	struct rdma_cm_id *id = NULL;

	ck_assert_msg(rdma_create_id(ch, &id, ctx, ps) == 0, "rdma_create_id(ps %#x): %s",
		      ps, strerror(errno));
	ck_assert_ptr_nonnull(id);
	ck_assert_ptr_eq(id->context, ctx);
	if (ch)
		ck_assert_ptr_eq(id->channel, ch);
	ck_assert_int_eq(id->ps, ps);
	return id;
}

/* A listener on ip, port 0 (assigned); returns the port. */
static uint16_t listen_on(struct rdma_cm_id *id, const char *ip, int backlog)
{
	struct sockaddr_storage ss = sa_make(ip, 0);
	uint16_t port;

	ck_assert_msg(rdma_bind_addr(id, SA(ss)) == 0, "rdma_bind_addr %s:0: %s", ip,
		      strerror(errno));
	port = src_port(id);
	ck_assert_msg(port != 0, "binding port 0 assigned no port");
	ck_assert_msg(rdma_listen(id, backlog) == 0, "rdma_listen: %s", strerror(errno));
	return port;
}

/* A port nobody listens on: one the daemon just assigned and took back. */
static uint16_t unused_port(enum rdma_port_space ps)
{
	struct rdma_event_channel *ch = channel();
	struct rdma_cm_id *id = new_id(ch, NULL, ps);
	struct sockaddr_storage ss = sa_make("0.0.0.0", 0);
	uint16_t port;

	ck_ok(rdma_bind_addr(id, SA(ss)));
	port = src_port(id);
	ck_assert_int_ne(port, 0);
	ck_ok(rdma_destroy_id(id));
	rdma_destroy_event_channel(ch);
	return port;
}

/* Address and route resolution of id towards ip:port. */
static void resolve(struct rdma_event_channel *ch, struct rdma_cm_id *id,
		    const char *ip, uint16_t port)
{
	struct sockaddr_storage dst = sa_make(ip, port);

	ck_assert_msg(rdma_resolve_addr(id, NULL, SA(dst), 2000) == 0,
		      "rdma_resolve_addr %s: %s", ip, strerror(errno));
	expect_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED, id);
	ck_assert_msg(id->verbs, "no device after ADDR_RESOLVED (id->verbs NULL)");
	ck_assert_int_eq(id->port_num, 1);
	ck_assert_msg(rdma_resolve_route(id, 2000) == 0, "rdma_resolve_route: %s",
		      strerror(errno));
	expect_ack(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, id);
}

static struct ibv_qp_init_attr qp_attr(enum ibv_qp_type type)
{
	struct ibv_qp_init_attr a = {
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = type,
		.sq_sig_all = 1,
	};

	return a;
}

/* rdma_create_qp with the library's default PD and CQs. */
static void default_qp(struct rdma_cm_id *id, enum ibv_qp_type type)
{
	struct ibv_qp_init_attr a = qp_attr(type);

	ck_assert_msg(rdma_create_qp(id, NULL, &a) == 0, "rdma_create_qp: %s",
		      strerror(errno));
	ck_assert_ptr_nonnull(id->qp);
	ck_assert_ptr_nonnull(id->pd);
	ck_assert_ptr_eq(id->qp->pd, id->pd);
	ck_assert_ptr_nonnull(id->send_cq);
	ck_assert_ptr_nonnull(id->recv_cq);
	ck_assert_ptr_nonnull(id->send_cq_channel);
	ck_assert_ptr_nonnull(id->recv_cq_channel);
	ck_assert_ptr_eq(id->send_cq->cq_context, id);
	ck_assert_ptr_eq(id->recv_cq->cq_context, id);
	ck_assert_ptr_eq(id->qp->send_cq, id->send_cq);
	ck_assert_ptr_eq(id->qp->recv_cq, id->recv_cq);
	ck_assert_int_eq(id->qp->qp_type, type);
	/* Made in one request: INIT already, a UD QP ready to send. */
	ck_assert_int_eq(id->qp->state,
			 type == IBV_QPT_UD ? IBV_QPS_RTS : IBV_QPS_INIT);
}

struct pair {
	struct rdma_event_channel *sch, *cch;	/* server and client channels */
	struct rdma_cm_id *listen, *server, *client;
	uint16_t port;
};

/* A listener (server channel) and a resolved client id (client channel). */
static void pair_prepare(struct pair *p, const char *ip, enum rdma_port_space ps)
{
	memset(p, 0, sizeof(*p));
	p->sch = channel();
	p->cch = channel();
	p->listen = new_id(p->sch, p, ps);
	p->port = listen_on(p->listen, strchr(ip, ':') ? "::" : "0.0.0.0", 8);
	p->client = new_id(p->cch, NULL, ps);
	resolve(p->cch, p->client, ip, p->port);
}

/*
 * The daemon moved qp to RTS (inside rdma_accept, or inside the event that
 * completes rdma_connect) towards peer, with the resources asked (1 each).
 */
static void ck_qp_connected(struct ibv_qp *qp, const struct ibv_qp *peer)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;

	ck_assert_int_eq(qp->state, IBV_QPS_RTS);
	ck_assert_int_eq(ibv_query_qp(qp, &a, IBV_QP_STATE | IBV_QP_DEST_QPN |
				      IBV_QP_MAX_QP_RD_ATOMIC |
				      IBV_QP_MAX_DEST_RD_ATOMIC, &init), 0);
	ck_assert_int_eq(a.qp_state, IBV_QPS_RTS);
	ck_assert_uint_eq(a.dest_qp_num, peer->qp_num);
	ck_assert_uint_eq(a.max_rd_atomic, 1);
	ck_assert_uint_eq(a.max_dest_rd_atomic, 1);
}

/*
 * Connect the pair (RC, QPs by rdma_create_qp), with private data both
 * ways; the server's id is p->server.  One thread drives both ends.
 */
static void pair_connect(struct pair *p, const char *req, const char *rep)
{
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
				      .retry_count = 7, .rnr_retry_count = 7 };
	struct rdma_cm_event *ev;

	default_qp(p->client, IBV_QPT_RC);
	cp.private_data = req;
	cp.private_data_len = req ? (uint8_t)strlen(req) : 0;
	ck_assert_msg(rdma_connect(p->client, &cp) == 0, "rdma_connect: %s", strerror(errno));

	ev = expect(p->sch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	ck_assert_ptr_eq(ev->listen_id, p->listen);
	ck_assert_ptr_ne(ev->id, p->listen);
	ck_assert_ptr_eq(ev->id->context, p);	/* inherited from the listener */
	ck_assert_ptr_eq(ev->id->channel, p->sch);
	ck_assert_msg(ev->id->verbs, "the new id has no device");
	ck_assert_int_eq(ev->id->port_num, 1);
	ck_assert_uint_eq(ev->param.conn.qp_num, p->client->qp->qp_num);
	if (req)
		ck_pdata(ev->param.conn.private_data, ev->param.conn.private_data_len,
			 req, strlen(req), PDATA_REQ, "CONNECT_REQUEST");
	p->server = ev->id;
	ck_ok(rdma_ack_cm_event(ev));

	default_qp(p->server, IBV_QPT_RC);
	cp.private_data = rep;
	cp.private_data_len = rep ? (uint8_t)strlen(rep) : 0;
	ck_assert_msg(rdma_accept(p->server, &cp) == 0, "rdma_accept: %s", strerror(errno));

	ev = expect(p->cch, RDMA_CM_EVENT_ESTABLISHED, p->client);
	ck_assert_int_eq(ev->status, 0);
	if (rep)
		ck_pdata(ev->param.conn.private_data, ev->param.conn.private_data_len,
			 rep, strlen(rep), PDATA_REP, "ESTABLISHED (client)");
	ck_assert_uint_eq(ev->param.conn.qp_num, p->server->qp->qp_num);
	ck_ok(rdma_ack_cm_event(ev));
	expect_ack(p->sch, RDMA_CM_EVENT_ESTABLISHED, p->server);
	ck_qp_connected(p->client->qp, p->server->qp);
	ck_qp_connected(p->server->qp, p->client->qp);
}

static void pair_free(struct pair *p)
{
	if (p->client) {
		if (p->client->qp)
			rdma_destroy_qp(p->client);
		ck_ok(rdma_destroy_id(p->client));
	}
	if (p->server) {
		if (p->server->qp)
			rdma_destroy_qp(p->server);
		ck_ok(rdma_destroy_id(p->server));
	}
	if (p->listen)
		ck_ok(rdma_destroy_id(p->listen));
	rdma_destroy_event_channel(p->cch);
	rdma_destroy_event_channel(p->sch);
}

/*
 * from disconnects: to hears DISCONNECTED and answers with its own
 * rdma_disconnect (the DREP), and only then does from hear its
 * DISCONNECTED, as on the kernel's rdma_cm.
 */
static void disconnect_answered(struct rdma_cm_id *from, struct rdma_event_channel *fch,
				struct rdma_cm_id *to, struct rdma_event_channel *tch)
{
	ck_ok(rdma_disconnect(from));
	expect_ack(tch, RDMA_CM_EVENT_DISCONNECTED, to);
	ck_ok(rdma_disconnect(to));
	expect_ack(fch, RDMA_CM_EVENT_DISCONNECTED, from);
}

/* The client disconnects; both ends hear it; the pair goes. */
static void pair_close(struct pair *p)
{
	disconnect_answered(p->client, p->cch, p->server, p->sch);
	pair_free(p);
}

/*
 * A synchronous id's rdma_disconnect returns with its DISCONNECTED, which
 * waits for the peer's answer: it runs on a thread while `to` answers
 * (after its DISCONNECTED on tch; a synchronous `to`, tch NULL, reads it
 * in its own rdma_disconnect).
 */
struct disconnect_arg {
	struct rdma_cm_id *id;
	int ret;
};

static void *disconnect_thread(void *arg)
{
	struct disconnect_arg *a = arg;

	a->ret = rdma_disconnect(a->id);
	return NULL;
}

static void sync_disconnect_answered(struct rdma_cm_id *from, struct rdma_cm_id *to,
				     struct rdma_event_channel *tch)
{
	struct disconnect_arg a = { .id = from, .ret = -1 };
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, disconnect_thread, &a), 0);
	if (tch)
		expect_ack(tch, RDMA_CM_EVENT_DISCONNECTED, to);
	ck_ok(rdma_disconnect(to));
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_ok(a.ret);
}

/* One SEND from `from` to `to` with the rdma_verbs.h helpers (default PD
 * and CQs, completions through the ids' completion channels). */
static void pair_send(struct rdma_cm_id *from, struct rdma_cm_id *to, const char *msg)
{
	char sbuf[64], rbuf[64];
	struct ibv_mr *smr, *rmr;
	struct ibv_wc wc;

	memset(rbuf, 0, sizeof(rbuf));
	snprintf(sbuf, sizeof(sbuf), "%s", msg);
	rmr = rdma_reg_msgs(to, rbuf, sizeof(rbuf));
	smr = rdma_reg_msgs(from, sbuf, sizeof(sbuf));
	ck_assert_msg(rmr && smr, "rdma_reg_msgs: %s", strerror(errno));
	ck_ok(rdma_post_recv(to, (void *)7, rbuf, sizeof(rbuf), rmr));
	ck_ok(rdma_post_send(from, (void *)9, sbuf, strlen(sbuf) + 1, smr, IBV_SEND_SIGNALED));
	ck_assert_int_eq(rdma_get_send_comp(from, &wc), 1);
	ck_assert_msg(wc.status == IBV_WC_SUCCESS, "send: %s", ibv_wc_status_str(wc.status));
	ck_assert_uint_eq(wc.wr_id, 9);
	ck_assert_int_eq(rdma_get_recv_comp(to, &wc), 1);
	ck_assert_msg(wc.status == IBV_WC_SUCCESS, "recv: %s", ibv_wc_status_str(wc.status));
	ck_assert_uint_eq(wc.wr_id, 7);
	ck_assert_uint_eq(wc.byte_len, strlen(msg) + 1);
	ck_assert_str_eq(rbuf, msg);
	ck_ok(rdma_dereg_mr(smr));
	ck_ok(rdma_dereg_mr(rmr));
}

static struct ibv_device_attr dev_attr(struct rdma_cm_id *id)
{
	struct ibv_device_attr a;

	ck_assert_ptr_nonnull(id->verbs);
	ck_assert_int_eq(ibv_query_device(id->verbs, &a), 0);
	return a;
}

/* ---- event channels ------------------------------------------------------- */

START_TEST(channel_nonblocking)
{
	struct rdma_event_channel *ch = channel();
	struct rdma_cm_id *id = new_id(ch, NULL, RDMA_PS_TCP);
	struct sockaddr_storage lo = sa_make("127.0.0.1", 1);
	struct rdma_cm_event *ev;
	int fl = fcntl(ch->fd, F_GETFL);

	ck_assert_int_ge(fl, 0);
	ck_assert_int_eq(fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK), 0);
	ck_assert_msg(!readable(ch->fd, 0), "a new channel's fd is readable");
	ck_fails_with(rdma_get_cm_event(ch, &ev), EAGAIN);

	ck_ok(rdma_resolve_addr(id, NULL, SA(lo), 2000));
	ck_assert_msg(readable(ch->fd, ev_ms()), "the fd never became readable");
	ck_ok(rdma_get_cm_event(ch, &ev));
	ck_assert_int_eq(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED);
	ck_assert_ptr_eq(ev->id, id);
	ck_ok(rdma_ack_cm_event(ev));
	/* drained: EAGAIN again */
	ck_fails_with(rdma_get_cm_event(ch, &ev), EAGAIN);
	ck_ok(rdma_destroy_id(id));
	rdma_destroy_event_channel(ch);
}
END_TEST

static void on_alarm(int sig)
{
	(void)sig;
}

START_TEST(channel_eintr)
{
	struct rdma_event_channel *ch = channel();
	struct sigaction sa = { .sa_handler = on_alarm };	/* no SA_RESTART */
	struct itimerval it = { .it_value = { .tv_usec = 200000 } };
	struct rdma_cm_event *ev;

	ck_assert_int_eq(sigaction(SIGALRM, &sa, NULL), 0);
	ck_assert_int_eq(setitimer(ITIMER_REAL, &it, NULL), 0);
	ck_fails_with(rdma_get_cm_event(ch, &ev), EINTR);
	rdma_destroy_event_channel(ch);
}
END_TEST

/* ---- ids ------------------------------------------------------------------ */

START_TEST(create_id_port_spaces)
{
	static const enum rdma_port_space ps[] = {
		RDMA_PS_TCP, RDMA_PS_UDP, RDMA_PS_IB, RDMA_PS_IPOIB,
	};
	struct rdma_event_channel *ch = channel();
	struct rdma_cm_id *id;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(ps); i++) {
		id = new_id(ch, &i, ps[i]);
		ck_assert_ptr_null(id->qp);
		ck_ok(rdma_destroy_id(id));
	}
	rdma_destroy_event_channel(ch);
}
END_TEST

/* The rdma_create_id table of the reference: EINVAL for a NULL id,
 * EPROTONOSUPPORT for a port space it does not know. */
START_TEST(create_id_errors)
{
	struct rdma_event_channel *ch = channel();
	struct rdma_cm_id *id = NULL;

	ck_fails_with(rdma_create_id(ch, NULL, NULL, RDMA_PS_TCP), EINVAL);
	ck_fails_with(rdma_create_id(ch, &id, NULL, (enum rdma_port_space)0x7777),
		      EPROTONOSUPPORT);
	rdma_destroy_event_channel(ch);
}
END_TEST

/* A NULL channel: synchronous mode, the id gets a channel of its own. */
START_TEST(sync_mode_resolve)
{
	struct rdma_cm_id *id = new_id(NULL, NULL, RDMA_PS_TCP);
	struct sockaddr_storage lo = sa_make("127.0.0.1", 7000);

	ck_assert_ptr_nonnull(id->channel);
	ck_assert_msg(rdma_resolve_addr(id, NULL, SA(lo), 2000) == 0,
		      "rdma_resolve_addr: %s", strerror(errno));
	ck_assert_msg(id->verbs, "resolve returned without a device");
	ck_assert_int_eq(id->port_num, 1);
	ck_ok(rdma_resolve_route(id, 2000));
	ck_assert_int_eq(id->route.num_paths, 1);
	ck_ok(rdma_destroy_id(id));
}
END_TEST

/* The reference's tables: a NULL id or channel is EINVAL (where librdmacm
 * checks them; the header inlines cannot). */
START_TEST(null_arguments)
{
	struct rdma_event_channel *ch = channel();
	struct rdma_cm_id *id = new_id(ch, NULL, RDMA_PS_TCP);
	struct sockaddr_storage ss = sa_make("127.0.0.1", 0);
	struct rdma_conn_param cp = { 0 };
	struct rdma_cm_event *ev;

	ck_fails_with(rdma_destroy_id(NULL), EINVAL);
	ck_fails_with(rdma_migrate_id(NULL, ch), EINVAL);
	ck_fails_with(rdma_bind_addr(NULL, SA(ss)), EINVAL);
	ck_fails_with(rdma_resolve_addr(NULL, NULL, SA(ss), 100), EINVAL);
	ck_fails_with(rdma_resolve_route(NULL, 100), EINVAL);
	ck_fails_with(rdma_listen(NULL, 1), EINVAL);
	ck_fails_with(rdma_connect(NULL, &cp), EINVAL);
	ck_fails_with(rdma_accept(NULL, &cp), EINVAL);
	ck_fails_with(rdma_reject(NULL, NULL, 0), EINVAL);
	ck_fails_with(rdma_disconnect(NULL), EINVAL);
	ck_fails_with(rdma_get_cm_event(NULL, &ev), EINVAL);
	ck_fails_with(rdma_get_cm_event(ch, NULL), EINVAL);
	ck_fails_with(rdma_ack_cm_event(NULL), EINVAL);
	ck_assert_uint_eq(rdma_get_src_port(NULL), 0);
	ck_assert_uint_eq(rdma_get_dst_port(NULL), 0);
	/* an unbound id has no port yet */
	ck_assert_uint_eq(src_port(id), 0);
	ck_assert_uint_eq(dst_port(id), 0);
	/* rdma_disconnect on an id without a connection */
	ck_fails_with(rdma_disconnect(id), EINVAL);
	ck_ok(rdma_destroy_id(id));
	rdma_destroy_event_channel(ch);
}
END_TEST

/*
 * Memory that is no id of ours (as a destroyed id's becomes once the
 * allocator reuses it: perftest -R retries on ids it destroyed) is
 * refused with EINVAL, not taken for an id's locks and channel.
 */
START_TEST(not_an_id)
{
	static uint64_t junk[512];
	struct rdma_cm_id *id = (struct rdma_cm_id *)junk;
	struct sockaddr_storage ss = sa_make("127.0.0.1", 0);
	struct rdma_conn_param cp = { 0 };
	struct rdma_cm_id *req = NULL;

	memset(junk, 0xa5, sizeof(junk));
	ck_fails_with(rdma_get_request(id, &req), EINVAL);
	ck_assert_ptr_null(req);
	ck_fails_with(rdma_resolve_addr(id, NULL, SA(ss), 100), EINVAL);
	ck_fails_with(rdma_bind_addr(id, SA(ss)), EINVAL);
	ck_fails_with(rdma_connect(id, &cp), EINVAL);
	ck_fails_with(rdma_listen(id, 1), EINVAL);
	ck_fails_with(rdma_destroy_id(id), EINVAL);
	rdma_destroy_qp(id);	/* nothing: it has no QP of ours */
	rdma_destroy_ep(id);
}
END_TEST

START_TEST(event_str)
{
	static const char *const names[] = {
		"RDMA_CM_EVENT_ADDR_RESOLVED", "RDMA_CM_EVENT_ADDR_ERROR",
		"RDMA_CM_EVENT_ROUTE_RESOLVED", "RDMA_CM_EVENT_ROUTE_ERROR",
		"RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
		"RDMA_CM_EVENT_CONNECT_ERROR", "RDMA_CM_EVENT_UNREACHABLE",
		"RDMA_CM_EVENT_REJECTED", "RDMA_CM_EVENT_ESTABLISHED",
		"RDMA_CM_EVENT_DISCONNECTED", "RDMA_CM_EVENT_DEVICE_REMOVAL",
		"RDMA_CM_EVENT_MULTICAST_JOIN", "RDMA_CM_EVENT_MULTICAST_ERROR",
		"RDMA_CM_EVENT_ADDR_CHANGE", "RDMA_CM_EVENT_TIMEWAIT_EXIT",
	};
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(names); i++)
		ck_assert_str_eq(rdma_event_str((enum rdma_cm_event_type)i), names[i]);
	ck_assert_str_eq(rdma_event_str((enum rdma_cm_event_type)ARRAY_SIZE(names)),
			 "UNKNOWN EVENT");
	ck_assert_str_eq(rdma_event_str((enum rdma_cm_event_type)1000), "UNKNOWN EVENT");
	ck_assert_str_eq(rdma_event_str((enum rdma_cm_event_type)-1), "UNKNOWN EVENT");
}
END_TEST

START_TEST(devices)
{
	struct ibv_context **list;
	int n = -1, i;

	list = rdma_get_devices(&n);
	ck_assert_msg(list, "rdma_get_devices: %s", strerror(errno));
	ck_assert_int_ge(n, 1);
	for (i = 0; i < n; i++) {
		ck_assert_ptr_nonnull(list[i]);
		ck_assert_ptr_nonnull(list[i]->device);
		ck_assert_str_ne(ibv_get_device_name(list[i]->device), "");
	}
	ck_assert_ptr_null(list[n]);
	rdma_free_devices(list);
	list = rdma_get_devices(NULL);
	ck_assert_ptr_nonnull(list);
	ck_assert_ptr_nonnull(list[0]);
	rdma_free_devices(list);
}
END_TEST

/* ---- addresses ---------------------------------------------------------------- */

/* Binding id to ip:port fails with want (cma_check_port's verdicts). */
static void bind_fails(struct rdma_cm_id *id, const char *ip, uint16_t port,
		       int want)
{
	struct sockaddr_storage ss = sa_make(ip, port);
	int r = rdma_bind_addr(id, SA(ss)), e = errno;

	ck_assert_msg(r == -want || (r == -1 && e == want),
		      "binding %s port %u: %d (errno %d %s), want %s", ip, port,
		      r, e, strerror(e), strerror(want));
}

START_TEST(bind_port0_and_conflicts)
{
	struct rdma_event_channel *ch = channel();
	struct rdma_cm_id *a = new_id(ch, NULL, RDMA_PS_TCP);
	struct rdma_cm_id *b = new_id(ch, NULL, RDMA_PS_TCP);
	struct rdma_cm_id *u = new_id(ch, NULL, RDMA_PS_UDP);
	struct sockaddr_storage any0 = sa_make("0.0.0.0", 0), ss;
	struct sockaddr_un { sa_family_t f; char path[30]; } un = { AF_UNIX, "x" };
	uint16_t port;
	int r, e;

	ck_ok(rdma_bind_addr(a, SA(any0)));
	port = src_port(a);
	ck_assert_uint_ne(port, 0);
	ck_sa_ip(rdma_get_local_addr(a), "0.0.0.0", "bound wildcard");
	ck_assert_uint_eq(sa_port(rdma_get_local_addr(a)), port);
	/* binding twice */
	ck_fails_with(rdma_bind_addr(a, SA(any0)), EINVAL);
	/*
	 * the same port: wildcard, and a specific address against the
	 * wildcard; a wildcard on either side is EADDRNOTAVAIL, as the
	 * kernel's cma_check_port says (EADDRINUSE is for the same address)
	 */
	bind_fails(b, "0.0.0.0", port, EADDRNOTAVAIL);
	bind_fails(b, "127.0.0.1", port, EADDRNOTAVAIL);
	/* another port space has its own numbers */
	ss = sa_make("0.0.0.0", port);
	ck_ok(rdma_bind_addr(u, SA(ss)));
	ck_assert_uint_eq(src_port(u), port);
	/* a foreign family (the reference: EINVAL; Linux: EAFNOSUPPORT) */
	r = rdma_bind_addr(b, (struct sockaddr *)&un);
	e = errno;
	ck_assert_msg((r == -1 && (e == EINVAL || e == EAFNOSUPPORT)) ||
		      r == -EINVAL || r == -EAFNOSUPPORT,
		      "AF_UNIX bind: %d (%s), want EINVAL or EAFNOSUPPORT", r, strerror(e));
	/* an address that is not ours */
	ss = sa_make(TEST_NET_1, 0);
	r = rdma_bind_addr(b, SA(ss));
	e = errno;
	ck_assert_msg(r == -1 && (e == EADDRNOTAVAIL || e == ENODEV),
		      "binding %s: %d (%s), want EADDRNOTAVAIL or ENODEV", TEST_NET_1, r,
		      strerror(e));
	/* a link-local address with no interface: EINVAL (cma_check_linklocal) */
	ss = sa_make("fe80::1", 0);
	ck_fails_with(rdma_bind_addr(b, SA(ss)), EINVAL);
	/* the port is free again once its id is gone */
	ck_ok(rdma_destroy_id(a));
	ss = sa_make("127.0.0.1", port);
	ck_ok(rdma_bind_addr(b, SA(ss)));
	ck_sa_ip(rdma_get_local_addr(b), "127.0.0.1", "bound loopback");
	/* the same address and port: EADDRINUSE; the wildcard: EADDRNOTAVAIL */
	a = new_id(ch, NULL, RDMA_PS_TCP);
	bind_fails(a, "127.0.0.1", port, EADDRINUSE);
	bind_fails(a, "0.0.0.0", port, EADDRNOTAVAIL);
	ck_ok(rdma_destroy_id(a));
	ck_ok(rdma_destroy_id(b));
	ck_ok(rdma_destroy_id(u));
	rdma_destroy_event_channel(ch);
}
END_TEST

/* Two listeners on one port: the second cannot have it (a wildcard:
 * EADDRNOTAVAIL), with or without REUSEADDR, and the first keeps working. */
START_TEST(two_listeners)
{
	struct rdma_event_channel *ch = channel();
	struct rdma_cm_id *l1 = new_id(ch, NULL, RDMA_PS_TCP);
	struct rdma_cm_id *l2 = new_id(ch, NULL, RDMA_PS_TCP);
	struct rdma_cm_id *l3 = new_id(ch, NULL, RDMA_PS_TCP);
	struct sockaddr_storage ss;
	int one = 1, r, e;
	uint16_t port;

	ck_ok(rdma_set_option(l1, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof(one)));
	port = listen_on(l1, "0.0.0.0", 4);
	ss = sa_make("0.0.0.0", port);
	ck_fails_with(rdma_bind_addr(l2, SA(ss)), EADDRNOTAVAIL);

	ck_ok(rdma_set_option(l3, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof(one)));
	r = rdma_bind_addr(l3, SA(ss));
	e = errno;
	if (r == 0)
		ck_fails_with(rdma_listen(l3, 4), EADDRNOTAVAIL);
	else
		ck_assert_msg(r == -1 && e == EADDRNOTAVAIL,
			      "REUSEADDR bind on a listening port: %d (%s)", r, strerror(e));
	ck_ok(rdma_destroy_id(l3));
	ck_ok(rdma_destroy_id(l2));

	/* the first listener still takes connections */
	{
		struct rdma_event_channel *cch = channel();
		struct rdma_cm_id *c = new_id(cch, NULL, RDMA_PS_TCP);
		struct rdma_cm_event *ev;
		struct rdma_conn_param cp = { .initiator_depth = 1, .responder_resources = 1 };

		resolve(cch, c, "127.0.0.1", port);
		default_qp(c, IBV_QPT_RC);
		ck_ok(rdma_connect(c, &cp));
		ev = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
		ck_assert_ptr_eq(ev->listen_id, l1);
		/* a length with no data sends none, as rdma-core's */
		ck_ok(rdma_reject(ev->id, NULL, 20));
		{
			struct rdma_cm_id *child = ev->id;

			ck_ok(rdma_ack_cm_event(ev));
			ck_ok(rdma_destroy_id(child));
		}
		ev = expect(cch, RDMA_CM_EVENT_REJECTED, c);
		ck_ok(rdma_ack_cm_event(ev));
		rdma_destroy_qp(c);
		ck_ok(rdma_destroy_id(c));
		rdma_destroy_event_channel(cch);
	}
	ck_ok(rdma_destroy_id(l1));
	rdma_destroy_event_channel(ch);
}
END_TEST

/*
 * req, the CONNECT_REQUEST of c's connection, is rejected; c hears
 * REJECTED on cch, and goes with its QP.
 */
static void reject_request(struct rdma_cm_event *req,
			   struct rdma_event_channel *cch, struct rdma_cm_id *c)
{
	struct rdma_cm_id *child = req->id;
	struct rdma_cm_event *ev;

	ck_ok(rdma_reject(child, NULL, 0));
	ck_ok(rdma_ack_cm_event(req));
	ck_ok(rdma_destroy_id(child));
	ev = expect(cch, RDMA_CM_EVENT_REJECTED, c);
	ck_ok(rdma_ack_cm_event(ev));
	rdma_destroy_qp(c);
	ck_ok(rdma_destroy_id(c));
}

/*
 * A listener on 127.0.0.1 takes connections to every address of the host,
 * as the kernel's rdma_cm (cma_match_private_data: a loopback listener
 * matches as the wildcard does): here 127.0.0.2.  It used to take
 * 127.0.0.1 only, and the rest were rejected for want of a listener.
 */
START_TEST(loopback_listener_is_wildcard)
{
	struct rdma_event_channel *ch = channel(), *cch = channel();
	struct rdma_cm_id *l = new_id(ch, NULL, RDMA_PS_TCP);
	struct rdma_cm_id *c = new_id(cch, NULL, RDMA_PS_TCP);
	struct rdma_conn_param cp = { .initiator_depth = 1, .responder_resources = 1 };
	struct rdma_cm_event *ev;
	struct rdma_cm_id *child;
	uint16_t port;

	port = listen_on(l, "127.0.0.1", 4);
	resolve(cch, c, "127.0.0.2", port);
	default_qp(c, IBV_QPT_RC);
	ck_ok(rdma_connect(c, &cp));
	ev = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	ck_assert_ptr_eq(ev->listen_id, l);
	child = ev->id;
	ck_sa_ip(rdma_get_local_addr(child), "127.0.0.2", "the child's own address");
	ck_assert_ptr_nonnull(child->verbs);
	reject_request(ev, cch, c);
	ck_ok(rdma_destroy_id(l));
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(ch);
}
END_TEST

/*
 * A loopback address is the wildcard to a listener, so it is one to the
 * port check too, as the kernel's cma_check_port: a second loopback
 * address, or a specific one, on a port a loopback id holds is
 * EADDRNOTAVAIL.  Allowed, an id listening on 127.0.0.2 took the
 * connections to 127.0.0.1 of a server that listened there after it,
 * with no error to tell the server (another uid's, on a daemon).
 */
START_TEST(loopback_port_is_wildcard_port)
{
	struct rdma_event_channel *ch = channel();
	struct rdma_cm_id *l = new_id(ch, NULL, RDMA_PS_TCP);
	struct rdma_cm_id *b = new_id(ch, NULL, RDMA_PS_TCP);
	struct sockaddr_storage ss;
	uint16_t port;

	port = listen_on(l, "127.0.0.2", 4);
	bind_fails(b, "127.0.0.1", port, EADDRNOTAVAIL);
	/* the same loopback address is still EADDRINUSE (a port that frees) */
	bind_fails(b, "127.0.0.2", port, EADDRINUSE);
	ck_ok(rdma_destroy_id(l));
	/* and the other way round: a loopback id beside a bound one */
	ss = sa_make("127.0.0.1", port);
	ck_ok(rdma_bind_addr(b, SA(ss)));
	l = new_id(ch, NULL, RDMA_PS_TCP);
	bind_fails(l, "127.0.0.3", port, EADDRNOTAVAIL);
	ck_ok(rdma_destroy_id(l));
	ck_ok(rdma_destroy_id(b));
	rdma_destroy_event_channel(ch);
}
END_TEST

/* Every local address resolves to our device, with the path of proto/CM.md. */
static void resolve_local(const struct sockaddr *sa, const char *what)
{
	struct rdma_event_channel *ch = channel();
	struct rdma_cm_id *id = new_id(ch, NULL, RDMA_PS_TCP);
	struct ibv_port_attr pa;
	union ibv_gid gid;
	struct ibv_sa_path_rec *pr;

	ck_assert_msg(rdma_resolve_addr(id, NULL, (struct sockaddr *)sa, 2000) == 0,
		      "rdma_resolve_addr %s: %s", what, strerror(errno));
	expect_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED, id);
	ck_assert_msg(id->verbs, "%s: id->verbs is NULL after ADDR_RESOLVED", what);
	ck_assert_int_eq(id->port_num, 1);
	ck_assert_int_eq(rdma_get_local_addr(id)->sa_family, sa->sa_family);
	ck_assert_int_eq(rdma_get_peer_addr(id)->sa_family, sa->sa_family);
	ck_ok(rdma_resolve_route(id, 2000));
	expect_ack(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, id);
	ck_assert_int_eq(id->route.num_paths, 1);
	pr = id->route.path_rec;
	ck_assert_ptr_nonnull(pr);
	ck_assert_int_eq(ibv_query_port(id->verbs, id->port_num, &pa), 0);
	ck_assert_int_eq(ibv_query_gid(id->verbs, id->port_num, 0, &gid), 0);
	ck_assert_msg(be16toh(pr->slid) == pa.lid && be16toh(pr->dlid) == pa.lid,
		      "%s: path slid %u dlid %u, port LID %u", what, be16toh(pr->slid),
		      be16toh(pr->dlid), pa.lid);
	ck_assert_msg(!memcmp(&pr->sgid, &gid, 16) && !memcmp(&pr->dgid, &gid, 16),
		      "%s: path GIDs are not the port's GID[0]", what);
	ck_assert_uint_eq(be16toh(pr->pkey), 0xffff);
	ck_assert_int_eq(pr->mtu, pa.active_mtu);
	ck_ok(rdma_destroy_id(id));
	rdma_destroy_event_channel(ch);
}

START_TEST(resolve_local_addresses)
{
	struct sockaddr_storage ss;
	struct ifaddrs *ifa, *i;
	char buf[INET6_ADDRSTRLEN + 16];
	int n = 0;

	ss = sa_make("127.0.0.1", 7001);
	resolve_local(SA(ss), "127.0.0.1");
	ss = sa_make("::1", 7001);
	resolve_local(SA(ss), "::1");
	ck_assert_int_eq(getifaddrs(&ifa), 0);
	for (i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET &&
				     i->ifa_addr->sa_family != AF_INET6))
			continue;
		memset(&ss, 0, sizeof(ss));
		memcpy(&ss, i->ifa_addr, i->ifa_addr->sa_family == AF_INET ?
		       sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
		if (ss.ss_family == AF_INET)
			((struct sockaddr_in *)&ss)->sin_port = htons(7001);
		else
			((struct sockaddr_in6 *)&ss)->sin6_port = htons(7001);
		sa_ip(SA(ss), buf, sizeof(buf));
		resolve_local(SA(ss), buf);
		n++;
	}
	freeifaddrs(ifa);
	ck_assert_int_ge(n, 1);
}
END_TEST

/* An address that does not exist: ADDR_ERROR (-EHOSTUNREACH) once the
 * timeout passed; synchronously, EHOSTUNREACH. */
/*
 * What this host's routing table says to ip: -ENETUNREACH (or
 * -EHOSTUNREACH) where it has no route, as on a machine without a
 * default route, else 0.  The kernel's rdma_resolve_addr, and ours,
 * fail at once then; roce-loopback.sh's no_route shows that in a
 * namespace of its own.
 */
static int host_route_refusal(const struct sockaddr_storage *dst)
{
	socklen_t len = dst->ss_family == AF_INET ? sizeof(struct sockaddr_in)
						 : sizeof(struct sockaddr_in6);
	int fd = socket(dst->ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int ret = 0;

	ck_assert_msg(fd >= 0, "socket: %s", strerror(errno));
	if (connect(fd, SA(*dst), len) < 0 &&
	    (errno == ENETUNREACH || errno == EHOSTUNREACH))
		ret = -errno;
	close(fd);
	return ret;
}

static void resolve_unreachable(const char *ip)
{
	struct rdma_event_channel *ch = channel();
	struct rdma_cm_id *id = new_id(ch, NULL, RDMA_PS_TCP);
	struct sockaddr_storage dst = sa_make(ip, 7002);
	struct rdma_cm_event *ev;
	const int timeout = 500;
	int refusal = host_route_refusal(&dst);
	long t0, dt;

	if (refusal) {
		ck_fails_with(rdma_resolve_addr(id, NULL, SA(dst), timeout), -refusal);
		printf("resolving %s: %s at once (no route here)\n", ip, strerror(-refusal));
		ck_ok(rdma_destroy_id(id));
		rdma_destroy_event_channel(ch);
		return;
	}
	t0 = vt_now_ms();
	ck_ok(rdma_resolve_addr(id, NULL, SA(dst), timeout));
	ev = next_event(ch, timeout + ev_ms(), "ADDR_ERROR");
	dt = vt_now_ms() - t0;
	ck_assert_msg(ev->event == RDMA_CM_EVENT_ADDR_ERROR, "%s: got %s, want ADDR_ERROR",
		      ip, rdma_event_str(ev->event));
	ck_assert_msg(ev->status == -EHOSTUNREACH, "%s: ADDR_ERROR status %d, want %d",
		      ip, ev->status, -EHOSTUNREACH);
	printf("resolving %s: ADDR_ERROR after %ld ms (timeout %d ms)\n", ip, dt, timeout);
	ck_ok(rdma_ack_cm_event(ev));
	ck_ok(rdma_destroy_id(id));
	rdma_destroy_event_channel(ch);

	id = new_id(NULL, NULL, RDMA_PS_TCP);
	ck_fails_with(rdma_resolve_addr(id, NULL, SA(dst), timeout), EHOSTUNREACH);
	ck_ok(rdma_destroy_id(id));
}

START_TEST(resolve_unreachable4)
{
	resolve_unreachable(TEST_NET_1);
}
END_TEST

START_TEST(resolve_unreachable6)
{
	resolve_unreachable(TEST_NET_6);
}
END_TEST

/*
 * A resolve the daemon refuses (a listener, an id resolved already, a
 * family unlike the id's) leaves the addresses the app reads back as
 * they were: the kernel refuses before it touches them, and librdmacm
 * copies the destination only once the call is taken.
 */
START_TEST(resolve_refused_keeps_addresses)
{
	struct rdma_event_channel *ch = channel();
	struct rdma_cm_id *l = new_id(ch, NULL, RDMA_PS_TCP);
	struct rdma_cm_id *c = new_id(ch, NULL, RDMA_PS_TCP);
	struct sockaddr_storage src = sa_make("127.0.0.9", 999);
	struct sockaddr_storage dst, v6 = sa_make("::1", 7);
	uint16_t port, cport;

	port = listen_on(l, "127.0.0.1", 1);
	dst = sa_make("127.0.0.1", port);
	ck_fails_with(rdma_resolve_addr(l, SA(src), SA(dst), 100), EINVAL);
	ck_sa_ip(rdma_get_local_addr(l), "127.0.0.1", "listener after a refused resolve");
	ck_assert_uint_eq(src_port(l), port);
	ck_assert_uint_eq(dst_port(l), 0);

	resolve(ch, c, "127.0.0.1", port);
	cport = src_port(c);
	ck_fails_with(rdma_resolve_addr(c, NULL, SA(v6), 100), EINVAL);
	ck_fails_with(rdma_resolve_addr(c, SA(src), SA(src), 100), EINVAL);
	ck_sa_ip(rdma_get_peer_addr(c), "127.0.0.1", "resolved id's peer after refused resolves");
	ck_sa_ip(rdma_get_local_addr(c), "127.0.0.1", "resolved id's local after refused resolves");
	ck_assert_uint_eq(dst_port(c), port);
	ck_assert_uint_eq(src_port(c), cport);
	ck_ok(rdma_destroy_id(c));
	ck_ok(rdma_destroy_id(l));
	rdma_destroy_event_channel(ch);
}
END_TEST

START_TEST(getaddrinfo_api)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;
	struct sockaddr_storage dst = sa_make("127.0.0.1", 7475);
	struct rdma_addrinfo own = { .ai_flags = 0 };
	char buf[INET6_ADDRSTRLEN + 16];

	ck_ok(rdma_getaddrinfo("127.0.0.1", "7471", &hints, &res));
	ck_assert_ptr_nonnull(res);
	ck_assert_int_eq(res->ai_family, AF_INET);
	ck_assert_int_eq(res->ai_port_space, RDMA_PS_TCP);
	ck_assert_int_eq(res->ai_qp_type, IBV_QPT_RC);
	ck_assert_ptr_nonnull(res->ai_dst_addr);
	ck_assert_int_eq(res->ai_dst_len, sizeof(struct sockaddr_in));
	ck_sa_ip(res->ai_dst_addr, "127.0.0.1", "ai_dst_addr");
	ck_assert_uint_eq(sa_port(res->ai_dst_addr), 7471);
	rdma_freeaddrinfo(res);

	ck_ok(rdma_getaddrinfo("::1", "7472", &hints, &res));
	ck_assert_int_eq(res->ai_family, AF_INET6);
	ck_sa_ip(res->ai_dst_addr, "::1", "ai_dst_addr (IPv6)");
	ck_assert_uint_eq(sa_port(res->ai_dst_addr), 7472);
	rdma_freeaddrinfo(res);

	/* passive: a source address to bind, the wildcard without a node */
	hints.ai_flags = RAI_PASSIVE;
	ck_ok(rdma_getaddrinfo(NULL, "7473", &hints, &res));
	ck_assert_ptr_nonnull(res->ai_src_addr);
	ck_assert_uint_eq(sa_port(res->ai_src_addr), 7473);
	sa_ip(res->ai_src_addr, buf, sizeof(buf));
	ck_assert_msg(!strcmp(buf, "0.0.0.0") || !strcmp(buf, "::"),
		      "passive ai_src_addr %s, want a wildcard", buf);
	/* one of them: rdma-core converts getaddrinfo's first result only */
	ck_assert_ptr_null(res->ai_next);
	rdma_freeaddrinfo(res);
	ck_ok(rdma_getaddrinfo("127.0.0.1", "7474", &hints, &res));
	ck_sa_ip(res->ai_src_addr, "127.0.0.1", "passive ai_src_addr");
	ck_assert_uint_eq(sa_port(res->ai_src_addr), 7474);
	rdma_freeaddrinfo(res);

	/* UDP port space: UD QPs */
	hints.ai_flags = 0;
	hints.ai_port_space = RDMA_PS_UDP;
	ck_ok(rdma_getaddrinfo("127.0.0.1", "7475", &hints, &res));
	ck_assert_int_eq(res->ai_port_space, RDMA_PS_UDP);
	ck_assert_int_eq(res->ai_qp_type, IBV_QPT_UD);
	rdma_freeaddrinfo(res);

	/*
	 * As rdma-core: a port space we do not know goes through, for
	 * rdma_create_id to judge, with the QP type asked for or RC.
	 */
	hints.ai_port_space = 0x1234;
	ck_ok(rdma_getaddrinfo("127.0.0.1", "7475", &hints, &res));
	ck_assert_int_eq(res->ai_port_space, 0x1234);
	ck_assert_int_eq(res->ai_qp_type, IBV_QPT_RC);
	rdma_freeaddrinfo(res);
	hints.ai_qp_type = IBV_QPT_UD;
	ck_ok(rdma_getaddrinfo("127.0.0.1", "7475", &hints, &res));
	ck_assert_int_eq(res->ai_port_space, 0x1234);
	ck_assert_int_eq(res->ai_qp_type, IBV_QPT_UD);
	rdma_freeaddrinfo(res);
	hints.ai_qp_type = 0;
	hints.ai_port_space = RDMA_PS_TCP;

	/*
	 * A looked-up address keeps RAI_PASSIVE of the hints' flags only, as
	 * rdma-core's; from the hints' own addresses it keeps them all.
	 */
	hints.ai_flags = RAI_NUMERICHOST | RAI_NOROUTE;
	ck_ok(rdma_getaddrinfo("127.0.0.1", "7475", &hints, &res));
	ck_assert_int_eq(res->ai_flags, 0);
	rdma_freeaddrinfo(res);
	hints.ai_flags = RAI_PASSIVE | RAI_NUMERICHOST | RAI_NOROUTE;
	ck_ok(rdma_getaddrinfo("127.0.0.1", "7475", &hints, &res));
	ck_assert_int_eq(res->ai_flags, RAI_PASSIVE);
	rdma_freeaddrinfo(res);
	own.ai_flags = RAI_NOROUTE;
	own.ai_port_space = RDMA_PS_TCP;
	own.ai_dst_addr = SA(dst);
	own.ai_dst_len = sizeof(struct sockaddr_in);
	ck_ok(rdma_getaddrinfo(NULL, NULL, &own, &res));
	ck_assert_int_eq(res->ai_flags, RAI_NOROUTE);
	rdma_freeaddrinfo(res);
	hints.ai_flags = 0;

	/* AF_IB without RAI_FAMILY | RAI_NUMERICHOST: any family will do */
	hints.ai_family = AF_IB;
	ck_ok(rdma_getaddrinfo("127.0.0.1", "7476", &hints, &res));
	ck_assert_int_eq(res->ai_family, AF_INET);
	rdma_freeaddrinfo(res);
	hints.ai_family = 0;

	/* a name that is not a number */
	hints.ai_flags = RAI_NUMERICHOST;
	hints.ai_port_space = RDMA_PS_TCP;
	res = NULL;
	ck_assert_int_ne(rdma_getaddrinfo("no-such-host.invalid", "1", &hints, &res), 0);
	rdma_freeaddrinfo(NULL);	/* harmless, like freeaddrinfo */

	/* nothing to go by: -1 and EINVAL, as rdma-core */
	errno = 0;
	res = (void *)&hints;
	ck_assert_int_eq(rdma_getaddrinfo(NULL, NULL, NULL, &res), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(res);
}
END_TEST

/* ---- connections ---------------------------------------------------------------- */

START_TEST(connect_addresses_and_data)
{
	struct pair p;
	uint16_t csport;

	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	csport = src_port(p.client);
	ck_assert_uint_ne(csport, 0);
	ck_assert_uint_eq(dst_port(p.client), p.port);
	pair_connect(&p, "hello from the client", "hello from the server");

	/* both ends' addresses and ports */
	ck_sa_ip(rdma_get_local_addr(p.client), "127.0.0.1", "client local");
	ck_sa_ip(rdma_get_peer_addr(p.client), "127.0.0.1", "client peer");
	ck_sa_ip(rdma_get_local_addr(p.server), "127.0.0.1", "server local");
	ck_sa_ip(rdma_get_peer_addr(p.server), "127.0.0.1", "server peer");
	ck_assert_uint_eq(src_port(p.client), csport);
	ck_assert_uint_eq(dst_port(p.client), p.port);
	ck_assert_uint_eq(src_port(p.server), p.port);
	ck_assert_uint_eq(dst_port(p.server), csport);
	ck_assert_uint_eq(src_port(p.listen), p.port);
	ck_assert_ptr_eq(p.server->verbs->device, p.client->verbs->device);

	/* the QPs are connected to each other, both ways */
	pair_send(p.client, p.server, "ping over the CM's connection");
	pair_send(p.server, p.client, "pong");

	pair_close(&p);
}
END_TEST

/*
 * As under rdma-core's librdmacm, an id names its device's PD (one per
 * device and process) once it has the device: resolved, bound to a
 * device's address, or made by a connection request.  A wildcard bind
 * has neither.  UCX's rdmacm makes a UD QP on id->pd before the id has
 * any QP of its own.
 */
START_TEST(id_pd)
{
	struct ibv_qp_init_attr qa = qp_attr(IBV_QPT_UD);
	struct rdma_cm_id *any, *bound;
	struct ibv_qp *qp;
	struct pair p;

	ck_ok(rdma_create_id(NULL, &any, NULL, RDMA_PS_TCP));
	listen_on(any, "0.0.0.0", 1);
	ck_assert_ptr_null(any->verbs);
	ck_assert_ptr_null(any->pd);
	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	ck_assert_ptr_nonnull(p.client->pd);
	ck_assert_ptr_eq(p.client->pd->context, p.client->verbs);
	ck_ok(rdma_create_id(NULL, &bound, NULL, RDMA_PS_TCP));
	listen_on(bound, "127.0.0.1", 1);
	ck_assert_ptr_eq(bound->pd, p.client->pd);
	qa.send_cq = qa.recv_cq = ibv_create_cq(p.client->verbs, 4, NULL, NULL, 0);
	ck_assert_ptr_nonnull(qa.send_cq);
	qp = ibv_create_qp(p.client->pd, &qa);
	ck_assert_msg(qp, "ibv_create_qp on id->pd: %s", strerror(errno));
	ck_assert_int_eq(ibv_destroy_qp(qp), 0);
	ck_assert_int_eq(ibv_destroy_cq(qa.send_cq), 0);
	pair_connect(&p, NULL, NULL);
	ck_assert_ptr_eq(p.server->pd, p.client->pd);
	pair_close(&p);
	ck_ok(rdma_destroy_id(bound));
	ck_ok(rdma_destroy_id(any));
}
END_TEST

/*
 * A forked child of a process that uses the CM: the parent's event
 * channel fails with EIO in it at once (its events are the parent's,
 * on a socket the two share), and the child's own ids get device
 * contexts of the child's, on which verbs work.  Before, the child's
 * rdma_get_cm_event read the parent's socket (and blocked), and its ids
 * named the parent's contexts, where every verb failed with EIO.  Exit
 * codes name the step.  The parent's connection is made afterwards.
 */
START_TEST(fork_child_cm)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct sockaddr_storage ss = sa_make("127.0.0.1", 0);
	struct ibv_pd *pd;
	struct pair p;
	int status;
	pid_t pid;

	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	ck_assert_ptr_nonnull(p.client->verbs);
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		alarm(vt_tmo_ms() / 1000 + 1);
		if (rdma_get_cm_event(p.sch, &ev) != -1 || errno != EIO)
			_exit(3);
		ch = rdma_create_event_channel();
		if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
			_exit(4);
		if (rdma_bind_addr(id, SA(ss)))
			_exit(5);
		if (!id->verbs || id->verbs == p.client->verbs)
			_exit(6);
		pd = ibv_alloc_pd(id->verbs);
		if (!pd || ibv_dealloc_pd(pd))
			_exit(7);
		if (rdma_destroy_id(id))
			_exit(8);
		rdma_destroy_event_channel(ch);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "the forked child's CM: status %#x", status);
	pair_connect(&p, NULL, NULL);
	pair_close(&p);
}
END_TEST

/*
 * The device's PD lives while ids are on the device, as rdma-core's
 * librdmacm keeps it: the last id to go deallocates it (a handle no
 * longer there), and the next id on the device gets a new one.
 */
START_TEST(id_pd_goes_with_last_id)
{
	struct rdma_cm_id *a, *b;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	uint32_t handle;

	ck_ok(rdma_create_id(NULL, &a, NULL, RDMA_PS_TCP));
	listen_on(a, "127.0.0.1", 1);
	ck_assert_ptr_nonnull(a->pd);
	ctx = a->verbs;
	handle = a->pd->handle;
	ck_ok(rdma_create_id(NULL, &b, NULL, RDMA_PS_TCP));
	listen_on(b, "127.0.0.1", 1);
	ck_assert_ptr_eq(b->pd, a->pd);
	ck_ok(rdma_destroy_id(a));
	pd = ibv_import_pd(ctx, handle);
	ck_assert_msg(pd, "the PD is gone while an id is on its device: %s",
		      strerror(errno));
	ibv_unimport_pd(pd);
	ck_ok(rdma_destroy_id(b));
	pd = ibv_import_pd(ctx, handle);
	ck_assert_msg(!pd, "the PD outlived the last id on its device");
	ck_ok(rdma_create_id(NULL, &a, NULL, RDMA_PS_TCP));
	listen_on(a, "127.0.0.1", 1);
	ck_assert_ptr_nonnull(a->pd);
	ck_assert_uint_ne(a->pd->handle, handle);
	ck_ok(rdma_destroy_id(a));
}
END_TEST

/*
 * An app may deallocate the PD it gave rdma_create_qp() once the QP is
 * gone, while the id still names it (rping does, before its last events).
 * The library must not look into id->pd when later events name the id's
 * device: here id->pd points at a page that cannot be read.
 */
START_TEST(id_pd_freed_before_events)
{
	struct ibv_pd *kept;
	struct pair p;
	void *gone;

	gone = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(gone, MAP_FAILED);
	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	pair_connect(&p, NULL, NULL);
	rdma_destroy_qp(p.client);
	kept = p.client->pd;
	p.client->pd = gone;
	disconnect_answered(p.server, p.sch, p.client, p.cch);
	ck_assert_ptr_eq(p.client->pd, gone);
	p.client->pd = kept;
	pair_free(&p);
	munmap(gone, 4096);
}
END_TEST

/*
 * rdma_notify as the kernel's IB CM answers it: EINVAL for an id without
 * a connection and for events it does not take, 0 for a LID change,
 * EISCONN for COMM_EST on an established connection (both ends).  A
 * listener on a device takes a LID change (it has an IB CM id), a
 * wildcard one nothing.
 */
START_TEST(notify)
{
	struct rdma_cm_id *idle, *bound;
	struct pair p;

	ck_ok(rdma_create_id(NULL, &idle, NULL, RDMA_PS_TCP));
	errno = 0;
	ck_assert_int_eq(rdma_notify(idle, IBV_EVENT_COMM_EST), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_ok(rdma_destroy_id(idle));
	ck_ok(rdma_create_id(NULL, &bound, NULL, RDMA_PS_TCP));
	listen_on(bound, "127.0.0.1", 1);
	ck_ok(rdma_notify(bound, IBV_EVENT_LID_CHANGE));
	errno = 0;
	ck_assert_int_eq(rdma_notify(bound, IBV_EVENT_COMM_EST), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_ok(rdma_destroy_id(bound));

	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	errno = 0;
	ck_assert_int_eq(rdma_notify(p.listen, IBV_EVENT_LID_CHANGE), -1);
	ck_assert_int_eq(errno, EINVAL);
	pair_connect(&p, NULL, NULL);
	errno = 0;
	ck_assert_int_eq(rdma_notify(p.client, IBV_EVENT_COMM_EST), -1);
	ck_assert_int_eq(errno, EISCONN);
	errno = 0;
	ck_assert_int_eq(rdma_notify(p.server, IBV_EVENT_COMM_EST), -1);
	ck_assert_int_eq(errno, EISCONN);
	ck_ok(rdma_notify(p.client, IBV_EVENT_LID_CHANGE));
	errno = 0;
	ck_assert_int_eq(rdma_notify(p.client, IBV_EVENT_QP_FATAL), -1);
	ck_assert_int_eq(errno, EINVAL);
	/* the connection is as it was */
	pair_send(p.client, p.server, "after the notifications");
	pair_close(&p);
}
END_TEST

/*
 * rdma_disconnect on a listener bound to a device's address is 0 and
 * ends nothing, as the kernel's (its IB CM id has neither a DREQ nor a
 * DREP to send); a wildcard listener has no device: EINVAL.
 */
START_TEST(disconnect_listener)
{
	struct pair p;

	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	ck_fails_with(rdma_disconnect(p.listen), EINVAL);
	pair_free(&p);

	memset(&p, 0, sizeof(p));
	p.sch = channel();
	p.cch = channel();
	p.listen = new_id(p.sch, &p, RDMA_PS_TCP);
	p.port = listen_on(p.listen, "127.0.0.1", 8);
	ck_assert_ptr_nonnull(p.listen->verbs);
	ck_ok(rdma_disconnect(p.listen));
	ck_ok(rdma_disconnect(p.listen));
	expect_quiet(p.sch, 200, "the listener");
	p.client = new_id(p.cch, NULL, RDMA_PS_TCP);
	resolve(p.cch, p.client, "127.0.0.1", p.port);
	pair_connect(&p, NULL, NULL);
	pair_send(p.client, p.server, "through a disconnected listener");
	pair_close(&p);
}
END_TEST

/*
 * The requester's ACK timeout and ToS reach the passive side as a REQ
 * would carry them (the kernel's IB CM: cm_ack_timeout of lifetime 13
 * and the CA's ACK delay 15 is 16), unless the listener set its own.
 */
static unsigned int qp_timeout_of(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;

	ck_assert_int_eq(ibv_query_qp(qp, &a, IBV_QP_TIMEOUT, &init), 0);
	return a.timeout;
}

START_TEST(ack_timeout_passive)
{
	uint8_t t = 14, own = 20;
	struct pair p;

	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	ck_ok(rdma_set_option(p.client, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
			      &t, sizeof(t)));
	pair_connect(&p, NULL, NULL);
	ck_assert_uint_eq(qp_timeout_of(p.client->qp), 14);
	ck_assert_uint_eq(qp_timeout_of(p.server->qp), 16);
	pair_close(&p);

	/* a listener's own wins */
	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	ck_ok(rdma_set_option(p.listen, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
			      &own, sizeof(own)));
	ck_ok(rdma_set_option(p.client, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
			      &t, sizeof(t)));
	pair_connect(&p, NULL, NULL);
	ck_assert_uint_eq(qp_timeout_of(p.server->qp), 20);
	pair_close(&p);
}
END_TEST

START_TEST(connect_ipv6)
{
	struct pair p;

	pair_prepare(&p, "::1", RDMA_PS_TCP);
	pair_connect(&p, NULL, NULL);
	ck_sa_ip(rdma_get_peer_addr(p.server), "::1", "server peer");
	pair_send(p.client, p.server, "over IPv6");
	disconnect_answered(p.server, p.sch, p.client, p.cch);
	pair_free(&p);
}
END_TEST

/* The event parameters of the reference's table: a request carries the
 * client's depths crossed over, its QP number and flow control; a reply
 * its own flow control. */
START_TEST(connect_params)
{
	struct pair p;
	struct ibv_device_attr a;
	struct rdma_conn_param cp = { .retry_count = 7, .rnr_retry_count = 7 };
	struct rdma_cm_event *ev;

	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	a = dev_attr(p.client);
	ck_assert_int_ge(a.max_qp_rd_atom, 1);
	ck_assert_int_ge(a.max_qp_init_rd_atom, 1);
	default_qp(p.client, IBV_QPT_RC);
	/* above the device's limits: EINVAL (0xff means "the maximum") */
	cp.responder_resources = (uint8_t)(a.max_qp_rd_atom + 1);
	cp.initiator_depth = 1;
	if (a.max_qp_rd_atom < 0xfe)
		ck_fails_with(rdma_connect(p.client, &cp), EINVAL);
	cp.responder_resources = 1;
	cp.initiator_depth = (uint8_t)(a.max_qp_init_rd_atom + 1);
	if (a.max_qp_init_rd_atom < 0xfe)
		ck_fails_with(rdma_connect(p.client, &cp), EINVAL);
	/* private data longer than a REQ's 56 bytes: EINVAL */
	{
		char big[PDATA_REQ + 1];

		memset(big, 'x', sizeof(big));
		cp.initiator_depth = 1;
		cp.private_data = big;
		cp.private_data_len = sizeof(big);
		ck_fails_with(rdma_connect(p.client, &cp), EINVAL);
		cp.private_data = NULL;
		cp.private_data_len = 0;
	}

	cp.responder_resources = 1;
	cp.initiator_depth = (uint8_t)(a.max_qp_init_rd_atom >= 2 ? 2 : 1);
	cp.retry_count = 5;
	cp.rnr_retry_count = 6;
	cp.flow_control = 1;
	/* a length with no data sends none (rdma-core copies only both) */
	cp.private_data_len = 10;
	ck_ok(rdma_connect(p.client, &cp));
	ev = expect(p.sch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	ck_assert_uint_eq(ev->param.conn.responder_resources, cp.initiator_depth);
	ck_assert_uint_eq(ev->param.conn.initiator_depth, cp.responder_resources);
	ck_assert_uint_eq(ev->param.conn.qp_num, p.client->qp->qp_num);
	ck_assert_uint_eq(ev->param.conn.rnr_retry_count, 6);
	ck_assert_uint_eq(ev->param.conn.flow_control, 1);
	ck_assert_uint_eq(ev->param.conn.private_data_len == 0 ||
			  ev->param.conn.private_data_len == PDATA_REQ, 1);
	p.server = ev->id;
	ck_ok(rdma_ack_cm_event(ev));

	default_qp(p.server, IBV_QPT_RC);
	/*
	 * accept: the same limits, the request still open after them (the
	 * REP's 196 bytes: accept_private_data_rejects)
	 */
	cp.private_data = NULL;
	cp.initiator_depth = 1;
	cp.responder_resources = (uint8_t)(a.max_qp_rd_atom + 1);
	if (a.max_qp_rd_atom < 0xfe)
		ck_fails_with(rdma_accept(p.server, &cp), EINVAL);
	cp.responder_resources = 1;
	cp.private_data_len = 10;	/* no data: none sent */
	cp.flow_control = 0;	/* the REP's own, not the REQ's */
	ck_ok(rdma_accept(p.server, &cp));
	/* a REP carries no retry count: 0, as cma_set_rep_event_data leaves it */
	ev = expect(p.cch, RDMA_CM_EVENT_ESTABLISHED, p.client);
	ck_assert_uint_eq(ev->param.conn.retry_count, 0);
	ck_assert_uint_eq(ev->param.conn.rnr_retry_count, 6);
	ck_assert_uint_eq(ev->param.conn.flow_control, 0);
	ck_ok(rdma_ack_cm_event(ev));
	expect_ack(p.sch, RDMA_CM_EVENT_ESTABLISHED, p.server);
	pair_send(p.client, p.server, "after the refused attempts");
	pair_close(&p);
}
END_TEST

/* p connected over 127.0.0.1, then disconnected by its server: both heard it. */
static void pair_server_disconnected(struct pair *p)
{
	pair_prepare(p, "127.0.0.1", RDMA_PS_TCP);
	pair_connect(p, NULL, NULL);
	disconnect_answered(p->server, p->sch, p->client, p->cch);
}

/* After DISCONNECTED, ids with a QP get TIMEWAIT_EXIT (proto/CM.md). */
START_TEST(disconnect_timewait)
{
	struct pair p;

	pair_server_disconnected(&p);
	/* the survivor's rdma_disconnect is harmless */
	rdma_disconnect(p.client);
	expect_ack(p.sch, RDMA_CM_EVENT_TIMEWAIT_EXIT, p.server);
	expect_ack(p.cch, RDMA_CM_EVENT_TIMEWAIT_EXIT, p.client);
	/* and the QPs were moved to the error state */
	{
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qia;

		ck_assert_int_eq(ibv_query_qp(p.server->qp, &qa, IBV_QP_STATE, &qia), 0);
		ck_assert_int_eq(qa.qp_state, IBV_QPS_ERR);
		ck_assert_int_eq(ibv_query_qp(p.client->qp, &qa, IBV_QP_STATE, &qia), 0);
		ck_assert_int_eq(qa.qp_state, IBV_QPS_ERR);
	}
	pair_free(&p);
}
END_TEST

/*
 * A disconnect's DISCONNECTED comes with the peer's answer (its DREP: its
 * own rdma_disconnect), not before, as on the kernel's rdma_cm; and the
 * survivor gets TIMEWAIT_EXIT only after that answer: an app that
 * destroys its id at DISCONNECTED never sees one.
 */
START_TEST(disconnect_timewait_owed)
{
	struct pair p;
	struct rdma_cm_event *ev;

	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	pair_connect(&p, NULL, NULL);
	ck_ok(rdma_disconnect(p.server));
	expect_ack(p.cch, RDMA_CM_EVENT_DISCONNECTED, p.client);
	/* more than the daemon's timewait: nothing for either end yet */
	expect_quiet(p.sch, 1500, "the server's DISCONNECTED before the client's answer");
	expect_quiet(p.cch, 0, "TIMEWAIT_EXIT before the survivor's rdma_disconnect");
	ck_ok(rdma_disconnect(p.client));
	ev = expect(p.sch, RDMA_CM_EVENT_DISCONNECTED, p.server);
	ck_assert_int_eq(ev->status, 0);
	ck_ok(rdma_ack_cm_event(ev));
	expect_ack(p.sch, RDMA_CM_EVENT_TIMEWAIT_EXIT, p.server);
	expect_ack(p.cch, RDMA_CM_EVENT_TIMEWAIT_EXIT, p.client);
	pair_free(&p);
}
END_TEST

/* A peer that destroys its id at DISCONNECTED answers the disconnect too. */
START_TEST(disconnect_answered_by_destroy)
{
	struct pair p;

	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	pair_connect(&p, NULL, NULL);
	ck_ok(rdma_disconnect(p.client));
	expect_ack(p.sch, RDMA_CM_EVENT_DISCONNECTED, p.server);
	expect_quiet(p.cch, 300, "the client's DISCONNECTED before the server's answer");
	rdma_destroy_qp(p.server);
	ck_ok(rdma_destroy_id(p.server));
	p.server = NULL;
	expect_ack(p.cch, RDMA_CM_EVENT_DISCONNECTED, p.client);
	pair_free(&p);
}
END_TEST

/*
 * The peer heard our disconnect and neither answers nor goes: our
 * DISCONNECTED comes when the DREQ would have been resent for the last
 * time, after cm.handshake_timeout_ms (CMAPI_HANDSHAKE_MS, as cm.sh's
 * case_handshake_timeout sets it), with -ETIMEDOUT, as the kernel's
 * IB_CM_DREQ_ERROR makes it.  Run only when asked for.
 */
START_TEST(disconnect_unanswered)
{
	const char *env = getenv("CMAPI_HANDSHAKE_MS");
	long ms = env ? atol(env) : 60000, t0, waited;
	struct rdma_cm_event *ev;
	struct pair p;

	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	pair_connect(&p, NULL, NULL);
	t0 = vt_now_ms();
	ck_ok(rdma_disconnect(p.client));
	expect_ack(p.sch, RDMA_CM_EVENT_DISCONNECTED, p.server);
	ev = next_event(p.cch, (int)ms + ev_ms(), "RDMA_CM_EVENT_DISCONNECTED");
	waited = vt_now_ms() - t0;
	ck_assert_msg(ev->event == RDMA_CM_EVENT_DISCONNECTED, "got %s (status %d)",
		      rdma_event_str(ev->event), ev->status);
	ck_assert_int_eq(ev->status, -ETIMEDOUT);
	/* the daemon's timer starts a moment after our t0 */
	ck_assert_msg(waited >= ms - 20, "DISCONNECTED after %ld ms, before the %ld ms timeout",
		      waited, ms);
	ck_ok(rdma_ack_cm_event(ev));
	/* the server's late answer reaches nobody and fails nothing */
	ck_ok(rdma_disconnect(p.server));
	expect_quiet(p.cch, 200, "the client after the late answer");
	pair_free(&p);
}
END_TEST

/*
 * A disconnect waits for its answer when the device goes (cm.sh reloads
 * the daemon without it once we print "ready"): DEVICE_REMOVAL, and
 * nothing after it, neither the DISCONNECTED of the timeout nor a
 * TIMEWAIT_EXIT, as the kernel's.  The ids are left to the exit.
 */
START_TEST(disconnect_device_removed)
{
	const char *env = getenv("CMAPI_HANDSHAKE_MS");
	long ms = env ? atol(env) : 60000;
	struct rdma_cm_event *ev;
	struct pair p;

	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	pair_connect(&p, NULL, NULL);
	ck_ok(rdma_disconnect(p.client));
	expect_ack(p.sch, RDMA_CM_EVENT_DISCONNECTED, p.server);
	printf("ready\n");
	fflush(stdout);
	ev = next_event(p.cch, (int)ms + 10 * ev_ms(), "RDMA_CM_EVENT_DEVICE_REMOVAL");
	ck_assert_msg(ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL, "got %s (status %d)",
		      rdma_event_str(ev->event), ev->status);
	ck_assert_ptr_eq(ev->id, p.client);
	ck_ok(rdma_ack_cm_event(ev));
	expect_quiet(p.cch, (int)ms + 1000, "the client after DEVICE_REMOVAL");
}
END_TEST

/*
 * The server end in a process of its own: it listens on 127.0.0.1 (the
 * port to ready_fd), accepts one request, and once it has heard
 * DISCONNECTED says so on heard_fd and waits to be killed, answering
 * nothing.
 */
static void deaf_server(int ready_fd, int heard_fd)
{
	enum rdma_cm_event_type want[] = { RDMA_CM_EVENT_CONNECT_REQUEST,
					   RDMA_CM_EVENT_ESTABLISHED,
					   RDMA_CM_EVENT_DISCONNECTED };
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_storage ss = sa_make("127.0.0.1", 0);
	struct ibv_qp_init_attr qia = qp_attr(IBV_QPT_RC);
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l = NULL;
	uint16_t port;
	size_t i;

	if (!ch || rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(l, SA(ss)) || rdma_listen(l, 1))
		_exit(1);
	port = src_port(l);
	if (write(ready_fd, &port, sizeof(port)) != sizeof(port))
		_exit(1);
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		if (rdma_get_cm_event(ch, &ev) || ev->event != want[i])
			_exit(1);
		if (want[i] == RDMA_CM_EVENT_CONNECT_REQUEST &&
		    (rdma_create_qp(ev->id, NULL, &qia) || rdma_accept(ev->id, NULL)))
			_exit(1);
		rdma_ack_cm_event(ev);
	}
	if (write(heard_fd, "d", 1) != 1)
		_exit(1);
	for (;;)
		pause();
}

/*
 * The peer heard our DISCONNECTED but neither answers nor destroys its
 * id, then its process dies: its end answers (the kernel's CM sends the
 * DREP as the process's ids go), and our DISCONNECTED comes then.
 */
START_TEST(disconnect_peer_dies)
{
	struct rdma_conn_param cp = { .initiator_depth = 1, .responder_resources = 1 };
	struct rdma_event_channel *cch = channel();
	struct rdma_cm_id *client = new_id(cch, NULL, RDMA_PS_TCP);
	int ready[2], heard[2], status;
	uint16_t port;
	char c;
	pid_t pid;

	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_eq(pipe(heard), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		deaf_server(ready[1], heard[1]);
	ck_assert_msg(readable(ready[0], ev_ms()) &&
		      read(ready[0], &port, sizeof(port)) == sizeof(port),
		      "the server process did not listen");
	resolve(cch, client, "127.0.0.1", port);
	default_qp(client, IBV_QPT_RC);
	ck_ok(rdma_connect(client, &cp));
	expect_ack(cch, RDMA_CM_EVENT_ESTABLISHED, client);
	ck_ok(rdma_disconnect(client));
	ck_assert_msg(readable(heard[0], ev_ms()) && read(heard[0], &c, 1) == 1,
		      "the server process did not hear DISCONNECTED");
	expect_quiet(cch, 300, "DISCONNECTED before the peer answered or died");
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	expect_ack(cch, RDMA_CM_EVENT_DISCONNECTED, client);
	rdma_destroy_qp(client);
	ck_ok(rdma_destroy_id(client));
	rdma_destroy_event_channel(cch);
	close(ready[0]);
	close(ready[1]);
	close(heard[0]);
	close(heard[1]);
}
END_TEST

/* Nobody listens: REJECTED (status 8, invalid service ID), or
 * ECONNREFUSED synchronously. */
/* An RC QP on the resolved id, a request nobody takes: REJECTED, id gone. */
static void ck_connect_refused(struct rdma_event_channel *ch,
			       struct rdma_cm_id *id, const char *what)
{
	struct rdma_conn_param cp = { .initiator_depth = 1,
				      .responder_resources = 1,
				      .retry_count = 7 };
	struct rdma_cm_event *ev;

	default_qp(id, IBV_QPT_RC);
	ck_ok(rdma_connect(id, &cp));
	ev = expect(ch, RDMA_CM_EVENT_REJECTED, id);
	ck_assert_msg(ev->status == REJ_NO_LISTENER,
		      "%s: REJECTED status %d, want %d", what, ev->status,
		      REJ_NO_LISTENER);
	ck_ok(rdma_ack_cm_event(ev));
	rdma_destroy_qp(id);
	ck_ok(rdma_destroy_id(id));
}

START_TEST(connect_no_listener)
{
	struct rdma_event_channel *ch = channel();
	struct rdma_cm_id *id = new_id(ch, NULL, RDMA_PS_TCP);
	struct rdma_conn_param cp = { .initiator_depth = 1, .responder_resources = 1,
				      .retry_count = 7 };
	struct sockaddr_storage dst;
	uint16_t port = unused_port(RDMA_PS_TCP);

	resolve(ch, id, "127.0.0.1", port);
	/* no QP and no parameters: nothing says what to connect (librdmacm) */
	ck_fails_with(rdma_connect(id, NULL), EINVAL);
	ck_connect_refused(ch, id, "no listener");
	rdma_destroy_event_channel(ch);

	/* synchronous mode */
	id = new_id(NULL, NULL, RDMA_PS_TCP);
	dst = sa_make("127.0.0.1", port);
	ck_ok(rdma_resolve_addr(id, NULL, SA(dst), 2000));
	ck_ok(rdma_resolve_route(id, 2000));
	default_qp(id, IBV_QPT_RC);
	ck_fails_with(rdma_connect(id, &cp), ECONNREFUSED);
	rdma_destroy_qp(id);
	ck_ok(rdma_destroy_id(id));
}
END_TEST

/*
 * RDMA_OPTION_IB_PATH: on an id whose address is resolved, a primary
 * bidirectional path record resolves the route (ROUTE_RESOLVED, as the
 * kernel's rdma_set_ib_path); records without one are EINVAL.
 */
START_TEST(ib_path_option)
{
	struct rdma_event_channel *ch = channel();
	struct rdma_cm_id *id = new_id(ch, NULL, RDMA_PS_TCP);
	struct ibv_path_data pd[2] = {
		{ .flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_ALTERNATE |
			   IBV_PATH_FLAG_BIDIRECTIONAL },
		{ .flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY |
			   IBV_PATH_FLAG_BIDIRECTIONAL },
	};
	struct sockaddr_storage dst = sa_make("127.0.0.1",
					      unused_port(RDMA_PS_TCP));

	ck_ok(rdma_resolve_addr(id, NULL, SA(dst), 2000));
	expect_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED, id);
	ck_fails_with(rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH,
				      &pd[0], sizeof(pd[0])), EINVAL);
	ck_ok(rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, pd,
			      sizeof(pd)));
	expect_ack(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, id);
	/* once: the route is there */
	ck_fails_with(rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH,
				      pd, sizeof(pd)), EINVAL);
	ck_connect_refused(ch, id, "no listener, after a path record");
	rdma_destroy_event_channel(ch);
}
END_TEST

START_TEST(reject_private_data)
{
	struct pair p;
	struct rdma_conn_param cp = { .initiator_depth = 1, .responder_resources = 1 };
	static const char req[] = "may I?";
	static const char rej[] = "no, busy: try port 9";
	char big[PDATA_REJ + 1];
	struct rdma_cm_event *ev;
	struct rdma_cm_id *child;

	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	default_qp(p.client, IBV_QPT_RC);
	cp.private_data = req;
	cp.private_data_len = sizeof(req) - 1;
	ck_ok(rdma_connect(p.client, &cp));
	ev = expect(p.sch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	ck_pdata(ev->param.conn.private_data, ev->param.conn.private_data_len,
		 req, sizeof(req) - 1, PDATA_REQ, "CONNECT_REQUEST");
	child = ev->id;
	ck_ok(rdma_ack_cm_event(ev));

	/* more than a REJ's 148 bytes: EINVAL, and nothing was sent */
	memset(big, 'z', sizeof(big));
	ck_fails_with(rdma_reject(child, big, sizeof(big)), EINVAL);
	expect_quiet(p.cch, 200, "after a refused rdma_reject");

	ck_ok(rdma_reject(child, rej, sizeof(rej) - 1));
	ev = expect(p.cch, RDMA_CM_EVENT_REJECTED, p.client);
	ck_assert_msg(ev->status == REJ_CONSUMER, "REJECTED status %d, want %d",
		      ev->status, REJ_CONSUMER);
	ck_pdata(ev->param.conn.private_data, ev->param.conn.private_data_len,
		 rej, sizeof(rej) - 1, PDATA_REJ, "REJECTED");
	ck_ok(rdma_ack_cm_event(ev));
	/* as the kernel's rdma_cm: a REJ takes the id's QP to ERR */
	{
		struct ibv_qp_init_attr init;
		struct ibv_qp_attr attr;

		ck_ok(ibv_query_qp(p.client->qp, &attr, IBV_QP_STATE, &init));
		ck_assert_int_eq(attr.qp_state, IBV_QPS_ERR);
	}
	ck_ok(rdma_destroy_id(child));
	pair_free(&p);
}
END_TEST

/*
 * An accept whose private data is longer than the reply carries (a REP's
 * 196 bytes, a SIDR REP's 136) fails EINVAL and, as the kernel's
 * rdma_accept once it has failed to send, rejects the request: the
 * requester hears REJECTED 28 with no private data (UNREACHABLE for UD),
 * and a second accept that would fit finds nothing to accept.
 */
START_TEST(accept_private_data_rejects)
{
	struct pair p;
	struct rdma_conn_param cp = { .initiator_depth = 1, .responder_resources = 1 };
	char big[PDATA_REP + 1];
	struct rdma_cm_event *ev;

	memset(big, 'y', sizeof(big));
	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	default_qp(p.client, IBV_QPT_RC);
	ck_ok(rdma_connect(p.client, &cp));
	ev = expect(p.sch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	p.server = ev->id;
	ck_ok(rdma_ack_cm_event(ev));
	default_qp(p.server, IBV_QPT_RC);
	cp.private_data = big;
	cp.private_data_len = sizeof(big);
	ck_fails_with(rdma_accept(p.server, &cp), EINVAL);
	ev = expect(p.cch, RDMA_CM_EVENT_REJECTED, p.client);
	ck_assert_msg(ev->status == REJ_CONSUMER, "REJECTED status %d, want %d",
		      ev->status, REJ_CONSUMER);
	ck_pdata(ev->param.conn.private_data, ev->param.conn.private_data_len,
		 "", 0, PDATA_REJ, "REJECTED");
	ck_ok(rdma_ack_cm_event(ev));
	cp.private_data_len = PDATA_REP;
	ck_fails_with(rdma_accept(p.server, &cp), EINVAL);
	expect_quiet(p.cch, 200, "after the second accept");
	expect_quiet(p.sch, 200, "the refusing side");
	pair_free(&p);

	/* UD: SIDR REP's 136 bytes */
	pair_prepare(&p, "127.0.0.1", RDMA_PS_UDP);
	default_qp(p.client, IBV_QPT_UD);
	cp.private_data = NULL;
	cp.private_data_len = 0;
	ck_ok(rdma_connect(p.client, &cp));
	ev = expect(p.sch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	p.server = ev->id;
	ck_ok(rdma_ack_cm_event(ev));
	default_qp(p.server, IBV_QPT_UD);
	cp.private_data = big;
	cp.private_data_len = 137;
	ck_fails_with(rdma_accept(p.server, &cp), EINVAL);
	ev = expect(p.cch, RDMA_CM_EVENT_UNREACHABLE, p.client);
	ck_ok(rdma_ack_cm_event(ev));
	cp.private_data_len = 136;
	ck_fails_with(rdma_accept(p.server, &cp), EINVAL);
	expect_quiet(p.cch, 200, "after the second UD accept");
	pair_free(&p);
}
END_TEST

/*
 * rdma_reject_ece refuses the peer's ECE options: its REJECTED event's
 * status is the IB CM's "vendor option not supported" (35), not the
 * consumer's 28, so that it may retry without them; the private data
 * goes as rdma_reject's.
 */
START_TEST(reject_ece)
{
	struct pair p;
	struct rdma_conn_param cp = { .initiator_depth = 1, .responder_resources = 1 };
	static const char rej[] = "no ECE here";
	struct rdma_cm_event *ev;
	struct rdma_cm_id *child;
	struct ibv_ece ece;

	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	default_qp(p.client, IBV_QPT_RC);
	ck_ok(rdma_connect(p.client, &cp));
	ev = expect(p.sch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	child = ev->id;
	ck_ok(rdma_ack_cm_event(ev));
	/* no QP on the child: the peer's options are none */
	memset(&ece, 0xff, sizeof(ece));
	ck_ok(rdma_get_remote_ece(child, &ece));
	ck_assert_uint_eq(ece.vendor_id, 0);
	ck_assert_uint_eq(ece.options, 0);
	ck_fails_with(rdma_reject_ece(NULL, NULL, 0), EINVAL);

	ck_ok(rdma_reject_ece(child, rej, sizeof(rej) - 1));
	ev = expect(p.cch, RDMA_CM_EVENT_REJECTED, p.client);
	ck_assert_msg(ev->status == REJ_ECE, "REJECTED status %d, want %d",
		      ev->status, REJ_ECE);
	ck_pdata(ev->param.conn.private_data, ev->param.conn.private_data_len,
		 rej, sizeof(rej) - 1, PDATA_REJ, "REJECTED");
	ck_ok(rdma_ack_cm_event(ev));
	/* answered: a second reject has nothing to refuse */
	ck_fails_with(rdma_reject_ece(child, NULL, 0), EINVAL);
	ck_ok(rdma_destroy_id(child));
	pair_free(&p);
}
END_TEST

/*
 * p connected without QPs up to the requester's CONNECT_RESPONSE: the
 * passive side has accepted, the RTU not come (REP_SENT).
 */
static void pair_accepted(struct pair *p)
{
	struct rdma_conn_param cp = { .initiator_depth = 1, .responder_resources = 1,
				      .retry_count = 7, .qp_num = 0x1234 };
	struct rdma_cm_event *ev;

	pair_prepare(p, "127.0.0.1", RDMA_PS_TCP);
	ck_ok(rdma_connect(p->client, &cp));
	ev = expect(p->sch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	p->server = ev->id;
	ck_ok(rdma_ack_cm_event(ev));
	cp.qp_num = 0x4321;
	ck_ok(rdma_accept(p->server, &cp));
	expect_ack(p->cch, RDMA_CM_EVENT_CONNECT_RESPONSE, p->client);
}

/*
 * The passive side may take back a request it accepted while the RTU has
 * not come (the IB CM's REJ in REP_SENT): the requester, whose QP is its
 * own and who has not called rdma_establish, hears REJECTED with the
 * private data, and has no reply left to confirm.  Once established, a
 * reject is EINVAL.
 */
START_TEST(reject_after_accept)
{
	struct pair p;
	static const char rej[] = "changed my mind";
	struct rdma_cm_event *ev;

	pair_accepted(&p);

	ck_ok(rdma_reject(p.server, rej, sizeof(rej) - 1));
	ev = expect(p.cch, RDMA_CM_EVENT_REJECTED, p.client);
	ck_assert_msg(ev->status == REJ_CONSUMER, "REJECTED status %d, want %d",
		      ev->status, REJ_CONSUMER);
	ck_pdata(ev->param.conn.private_data, ev->param.conn.private_data_len,
		 rej, sizeof(rej) - 1, PDATA_REJ, "REJECTED");
	ck_ok(rdma_ack_cm_event(ev));
	ck_fails_with(rdma_establish(p.client), EINVAL);
	expect_quiet(p.sch, 200, "the rejecting side");
	pair_free(&p);

	/* established: nothing to reject */
	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	pair_connect(&p, NULL, NULL);
	ck_fails_with(rdma_reject(p.server, rej, sizeof(rej) - 1), EINVAL);
	pair_send(p.client, p.server, "after the refused reject");
	pair_close(&p);
}
END_TEST

/*
 * A passive rdma_disconnect after its accept, the RTU not come yet
 * (REP_SENT), ends the connection: both ends hear DISCONNECTED and the
 * requester has no reply left to confirm.  On Linux the IB CM has no
 * DREQ to send before the RTU and the call is lost (ibverbsd(7)).
 */
START_TEST(disconnect_after_accept)
{
	struct pair p;

	pair_accepted(&p);

	ck_ok(rdma_disconnect(p.server));
	expect_ack(p.cch, RDMA_CM_EVENT_DISCONNECTED, p.client);
	ck_fails_with(rdma_establish(p.client), EINVAL);
	ck_ok(rdma_disconnect(p.client));
	expect_ack(p.sch, RDMA_CM_EVENT_DISCONNECTED, p.server);
	expect_quiet(p.sch, 200, "the disconnected server");
	expect_quiet(p.cch, 200, "the disconnected client");
	pair_free(&p);
}
END_TEST

/*
 * Backlog: with rdma_listen(id, 1) and one request waiting (not even
 * retrieved), a second one is REJECTED; once the first is retrieved, its
 * slot is free again, unanswered as it is (the kernel's ucma counts
 * requests not yet read), and a third one arrives; the first still
 * connects.  A backlog of 0 means the default, as on Linux (ucmatose and
 * cmtime listen with 0).
 */
START_TEST(listen_backlog)
{
	struct rdma_event_channel *sch = channel(), *cch = channel();
	struct rdma_cm_id *l = new_id(sch, NULL, RDMA_PS_TCP);
	struct rdma_cm_id *c[6];
	struct rdma_conn_param cp = { .initiator_depth = 1, .responder_resources = 1 };
	struct rdma_cm_event *ev;
	uint16_t port = listen_on(l, "0.0.0.0", 1);
	unsigned int i;

	for (i = 0; i < 3; i++) {
		c[i] = new_id(cch, NULL, RDMA_PS_TCP);
		resolve(cch, c[i], "127.0.0.1", port);
		default_qp(c[i], IBV_QPT_RC);
	}
	ck_ok(rdma_connect(c[0], &cp));
	ck_assert_msg(readable(sch->fd, ev_ms()), "no connection request arrived");
	ck_ok(rdma_connect(c[1], &cp));
	ev = expect(cch, RDMA_CM_EVENT_REJECTED, c[1]);
	ck_assert_msg(ev->status == REJ_CONSUMER, "REJECTED (backlog) status %d, want %d",
		      ev->status, REJ_CONSUMER);
	ck_ok(rdma_ack_cm_event(ev));
	ev = expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	{
		struct rdma_cm_id *child = ev->id, *third;

		ck_ok(rdma_ack_cm_event(ev));
		/* read, not answered: the backlog takes another */
		ck_ok(rdma_connect(c[2], &cp));
		ev = expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
		third = ev->id;
		ck_ok(rdma_ack_cm_event(ev));
		ck_ok(rdma_reject(third, NULL, 0));
		ck_ok(rdma_destroy_id(third));
		ev = expect(cch, RDMA_CM_EVENT_REJECTED, c[2]);
		ck_assert_int_eq(ev->status, REJ_CONSUMER);
		ck_ok(rdma_ack_cm_event(ev));
		default_qp(child, IBV_QPT_RC);
		ck_ok(rdma_accept(child, &cp));
		expect_ack(cch, RDMA_CM_EVENT_ESTABLISHED, c[0]);
		expect_ack(sch, RDMA_CM_EVENT_ESTABLISHED, child);
		disconnect_answered(child, sch, c[0], cch);
		rdma_destroy_qp(child);
		ck_ok(rdma_destroy_id(child));
	}
	for (i = 0; i < 3; i++) {
		rdma_destroy_qp(c[i]);
		ck_ok(rdma_destroy_id(c[i]));
	}
	ck_ok(rdma_destroy_id(l));

	/* backlog 0: six requests, none retrieved, all arrive */
	l = new_id(sch, NULL, RDMA_PS_TCP);
	port = listen_on(l, "0.0.0.0", 0);
	for (i = 0; i < ARRAY_SIZE(c); i++) {
		c[i] = new_id(cch, NULL, RDMA_PS_TCP);
		resolve(cch, c[i], "127.0.0.1", port);
		default_qp(c[i], IBV_QPT_RC);
		ck_ok(rdma_connect(c[i], &cp));
	}
	expect_quiet(cch, 300, "backlog 0 (the default): no request may be rejected");
	for (i = 0; i < ARRAY_SIZE(c); i++) {
		struct rdma_cm_id *child;

		ev = expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
		child = ev->id;
		ck_ok(rdma_ack_cm_event(ev));
		ck_ok(rdma_reject(child, NULL, 0));
		ck_ok(rdma_destroy_id(child));
	}
	for (i = 0; i < ARRAY_SIZE(c); i++) {
		ev = expect(cch, RDMA_CM_EVENT_REJECTED, NULL);
		ck_ok(rdma_ack_cm_event(ev));
	}
	for (i = 0; i < ARRAY_SIZE(c); i++) {
		rdma_destroy_qp(c[i]);
		ck_ok(rdma_destroy_id(c[i]));
	}
	ck_ok(rdma_destroy_id(l));
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(sch);
}
END_TEST

/* An application QP (no rdma_create_qp): CONNECT_RESPONSE, then
 * rdma_init_qp_attr + ibv_modify_qp by the app and rdma_establish. */
START_TEST(connect_app_qp)
{
	struct pair p;
	struct rdma_conn_param cp = { .initiator_depth = 1, .responder_resources = 1,
				      .retry_count = 7, .rnr_retry_count = 7 };
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_init_attr qia = qp_attr(IBV_QPT_RC);
	struct ibv_qp_attr qa;
	struct rdma_cm_event *ev;
	static const enum ibv_qp_state steps[] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS };
	unsigned int i;
	int mask;

	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	pd = ibv_alloc_pd(p.client->verbs);
	ck_assert_ptr_nonnull(pd);
	cq = ibv_create_cq(p.client->verbs, 16, NULL, NULL, 0);
	ck_assert_ptr_nonnull(cq);
	qia.send_cq = qia.recv_cq = cq;
	qp = ibv_create_qp(pd, &qia);
	ck_assert_ptr_nonnull(qp);
	qa.qp_state = IBV_QPS_INIT;
	ck_ok(rdma_init_qp_attr(p.client, &qa, &mask));
	ck_assert_msg(mask & IBV_QP_STATE, "INIT attributes without IBV_QP_STATE");
	ck_assert_int_eq(ibv_modify_qp(qp, &qa, mask), 0);
	cp.qp_num = qp->qp_num;
	ck_ok(rdma_connect(p.client, &cp));

	ev = expect(p.sch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	ck_assert_uint_eq(ev->param.conn.qp_num, qp->qp_num);
	p.server = ev->id;
	ck_ok(rdma_ack_cm_event(ev));
	default_qp(p.server, IBV_QPT_RC);
	cp.qp_num = 0;
	ck_ok(rdma_accept(p.server, &cp));

	ev = expect(p.cch, RDMA_CM_EVENT_CONNECT_RESPONSE, p.client);
	ck_assert_uint_eq(ev->param.conn.qp_num, p.server->qp->qp_num);
	ck_ok(rdma_ack_cm_event(ev));
	for (i = 1; i < ARRAY_SIZE(steps); i++) {
		memset(&qa, 0, sizeof(qa));
		qa.qp_state = steps[i];
		ck_ok(rdma_init_qp_attr(p.client, &qa, &mask));
		ck_assert_int_eq(qa.qp_state, steps[i]);
		if (steps[i] == IBV_QPS_RTR)
			ck_assert_uint_eq(qa.dest_qp_num, p.server->qp->qp_num);
		ck_assert_msg(ibv_modify_qp(qp, &qa, mask) == 0, "ibv_modify_qp to %d",
			      steps[i]);
	}
	ck_ok(rdma_establish(p.client));
	expect_ack(p.sch, RDMA_CM_EVENT_ESTABLISHED, p.server);

	/* the app's QP talks to the server's */
	{
		char sbuf[16] = "app qp", rbuf[16] = "";
		struct ibv_mr *smr = ibv_reg_mr(pd, sbuf, sizeof(sbuf), 0);
		struct ibv_mr *rmr = rdma_reg_msgs(p.server, rbuf, sizeof(rbuf));
		struct ibv_sge sge = { .addr = (uintptr_t)sbuf, .length = 7 };
		struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;
		struct ibv_wc wc;

		ck_assert_ptr_nonnull(smr);
		ck_assert_ptr_nonnull(rmr);
		sge.lkey = smr->lkey;
		ck_ok(rdma_post_recv(p.server, NULL, rbuf, sizeof(rbuf), rmr));
		ck_assert_int_eq(ibv_post_send(qp, &wr, &bad), 0);
		ck_assert_int_eq(rdma_get_recv_comp(p.server, &wc), 1);
		ck_assert_int_eq(wc.status, IBV_WC_SUCCESS);
		ck_assert_str_eq(rbuf, "app qp");
		ck_assert_int_eq(vt_poll(cq, &wc, 1, ev_ms()), 1);
		ck_assert_int_eq(wc.status, IBV_WC_SUCCESS);
		ibv_dereg_mr(smr);
		rdma_dereg_mr(rmr);
	}
	disconnect_answered(p.server, p.sch, p.client, p.cch);
	ck_assert_int_eq(ibv_destroy_qp(qp), 0);
	ck_assert_int_eq(ibv_destroy_cq(cq), 0);
	ck_assert_int_eq(ibv_dealloc_pd(pd), 0);
	pair_free(&p);
}
END_TEST

/*
 * rdma_init_qp_attr before a request: any state gets INIT's attributes
 * (no remote access, the state left as asked), as from the kernel's RDMA
 * CM, which has no IB CM id to ask yet.  With the request out, RTR and
 * RTS wait for the reply; the passive side has them from the request; a
 * listener has none.
 */
START_TEST(init_qp_attr_before_a_request)
{
	static const enum ibv_qp_state states[] = { IBV_QPS_INIT, IBV_QPS_RTR,
						    IBV_QPS_RTS };
	const int init_mask = IBV_QP_STATE | IBV_QP_ACCESS_FLAGS |
			      IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	struct rdma_conn_param cp = { .initiator_depth = 1, .responder_resources = 1 };
	struct rdma_cm_id *bound;
	struct rdma_cm_event *ev;
	struct ibv_qp_attr qa;
	struct pair p;
	unsigned int i;
	int mask;

	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	for (i = 0; i < ARRAY_SIZE(states); i++) {
		memset(&qa, 0xff, sizeof(qa));
		qa.qp_state = states[i];
		mask = 0;
		ck_ok(rdma_init_qp_attr(p.client, &qa, &mask));
		ck_assert_int_eq(mask, init_mask);
		ck_assert_int_eq(qa.qp_state, states[i]);
		ck_assert_uint_eq(qa.qp_access_flags, 0);
		ck_assert_uint_eq(qa.pkey_index, 0);
		ck_assert_uint_eq(qa.port_num, 1);
	}
	default_qp(p.client, IBV_QPT_RC);
	ck_ok(rdma_connect(p.client, &cp));
	qa.qp_state = IBV_QPS_INIT;
	ck_ok(rdma_init_qp_attr(p.client, &qa, &mask));
	ck_assert_int_eq(mask, init_mask);
	ck_assert_uint_eq(qa.qp_access_flags, IBV_ACCESS_REMOTE_WRITE |
			  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	for (i = 1; i < ARRAY_SIZE(states); i++) {
		qa.qp_state = states[i];
		ck_fails_with(rdma_init_qp_attr(p.client, &qa, &mask), EINVAL);
	}

	ev = expect(p.sch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	p.server = ev->id;
	ck_ok(rdma_ack_cm_event(ev));
	qa.qp_state = IBV_QPS_RTR;
	ck_ok(rdma_init_qp_attr(p.server, &qa, &mask));
	ck_assert_msg(mask & IBV_QP_DEST_QPN, "RTR mask %#x without the QPN", mask);
	ck_assert_uint_eq(qa.dest_qp_num, p.client->qp->qp_num);
	qa.qp_state = IBV_QPS_RTS;
	ck_ok(rdma_init_qp_attr(p.server, &qa, &mask));
	ck_assert_msg(mask & IBV_QP_SQ_PSN, "RTS mask %#x without the PSN", mask);
	ck_ok(rdma_reject(p.server, NULL, 0));
	ck_ok(rdma_ack_cm_event(expect(p.cch, RDMA_CM_EVENT_REJECTED, p.client)));
	pair_free(&p);

	ck_ok(rdma_create_id(NULL, &bound, NULL, RDMA_PS_TCP));
	listen_on(bound, "127.0.0.1", 1);
	ck_assert_ptr_nonnull(bound->verbs);
	for (i = 0; i < ARRAY_SIZE(states); i++) {
		qa.qp_state = states[i];
		ck_fails_with(rdma_init_qp_attr(bound, &qa, &mask), EINVAL);
	}
	ck_ok(rdma_destroy_id(bound));

	/* a UD listener has no IB CM id to ask: it answers as any UD id */
	ck_ok(rdma_create_id(NULL, &bound, NULL, RDMA_PS_UDP));
	listen_on(bound, "127.0.0.1", 1);
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_INIT;
	ck_ok(rdma_init_qp_attr(bound, &qa, &mask));
	ck_assert_msg(mask & IBV_QP_QKEY, "a UD listener's INIT mask %#x has no Q_Key",
		      mask);
	ck_assert_uint_eq(qa.qp_state, IBV_QPS_INIT);
	ck_ok(rdma_destroy_id(bound));
}
END_TEST

static const struct rdma_conn_param one_each = {
	.responder_resources = 1, .initiator_depth = 1, .retry_count = 7,
	.rnr_retry_count = 7,
};

/* rdma_init_qp_attr answers no state for id: INIT, RTR and RTS are EINVAL. */
static void ck_no_qp_attr(struct rdma_cm_id *id, const char *who)
{
	static const enum ibv_qp_state states[] = { IBV_QPS_INIT, IBV_QPS_RTR,
						    IBV_QPS_RTS };
	struct ibv_qp_attr qa;
	unsigned int i;
	int mask, r;

	for (i = 0; i < ARRAY_SIZE(states); i++) {
		memset(&qa, 0, sizeof(qa));
		qa.qp_state = states[i];
		mask = 0;
		r = rdma_init_qp_attr(id, &qa, &mask);
		ck_assert_msg(r == -1 && errno == EINVAL,
			      "%s: rdma_init_qp_attr(state %d) returned %d (%s, mask %#x), want EINVAL",
			      who, states[i], r, r ? strerror(errno) : "", mask);
	}
}

/*
 * Once the connection has ended, by a disconnect (either end, from the
 * call on) or a rejection (both ends), rdma_init_qp_attr answers no state
 * and rdma_create_qp, which asks it for INIT, fails: the kernel's IB CM
 * id is in DREQ_SENT, DREQ_RCVD, TIMEWAIT or IDLE, where
 * ib_cm_init_qp_attr answers nothing.
 */
START_TEST(init_qp_attr_after_the_end)
{
	struct ibv_qp_init_attr init = qp_attr(IBV_QPT_RC);
	struct rdma_conn_param cp = one_each;
	struct rdma_cm_event *ev;
	struct ibv_qp_attr qa;
	struct pair p;
	int mask;

	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	pair_connect(&p, NULL, NULL);
	qa.qp_state = IBV_QPS_RTS;
	ck_ok(rdma_init_qp_attr(p.client, &qa, &mask));
	ck_ok(rdma_disconnect(p.client));
	ck_no_qp_attr(p.client, "the disconnecting client");
	expect_ack(p.sch, RDMA_CM_EVENT_DISCONNECTED, p.server);
	ck_no_qp_attr(p.server, "the disconnected server");
	ck_ok(rdma_disconnect(p.server));
	expect_ack(p.cch, RDMA_CM_EVENT_DISCONNECTED, p.client);
	ck_no_qp_attr(p.server, "the server after its own disconnect");
	rdma_destroy_qp(p.client);
	ck_fails_with(rdma_create_qp(p.client, NULL, &init), EINVAL);
	ck_assert_ptr_null(p.client->qp);
	pair_free(&p);

	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	default_qp(p.client, IBV_QPT_RC);
	ck_ok(rdma_connect(p.client, &cp));
	ev = expect(p.sch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	p.server = ev->id;
	ck_ok(rdma_ack_cm_event(ev));
	ck_ok(rdma_reject(p.server, NULL, 0));
	ck_no_qp_attr(p.server, "the rejecting server");
	ck_ok(rdma_ack_cm_event(expect(p.cch, RDMA_CM_EVENT_REJECTED, p.client)));
	ck_no_qp_attr(p.client, "the rejected client");
	pair_free(&p);
}
END_TEST

/* The client asks with a QP rdma_create_qp made (RC), "req" its data. */
static void client_connect(struct pair *p)
{
	struct rdma_conn_param cp = one_each;

	cp.private_data = "req";
	cp.private_data_len = 3;
	default_qp(p->client, IBV_QPT_RC);
	ck_assert_msg(rdma_connect(p->client, &cp) == 0, "rdma_connect: %s", strerror(errno));
}

/* The server takes the request and accepts with a QP of its own, "rep". */
static void server_accept(struct pair *p)
{
	struct rdma_conn_param cp = one_each;
	struct rdma_cm_event *ev;

	ev = expect(p->sch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	p->server = ev->id;
	ck_ok(rdma_ack_cm_event(ev));
	default_qp(p->server, IBV_QPT_RC);
	cp.private_data = "rep";
	cp.private_data_len = 3;
	ck_assert_msg(rdma_accept(p->server, &cp) == 0, "rdma_accept: %s", strerror(errno));
}

/*
 * A pair connected up to the server's ESTABLISHED, the client's events
 * not read yet: the daemon confirmed the reply on the client's behalf.
 */
static void pair_confirmed(struct pair *p)
{
	pair_prepare(p, "127.0.0.1", RDMA_PS_TCP);
	client_connect(p);
	server_accept(p);
	expect_ack(p->sch, RDMA_CM_EVENT_ESTABLISHED, p->server);
}

/*
 * A QP made with the id is finished by the daemon when the reply comes
 * (RTR, RTS, the RTU), as the kernel's RDMA CM does for its own users:
 * the passive side is established before the active process reads its
 * event, and the active side's ESTABLISHED costs it no request.
 */
START_TEST(reply_confirmed_by_the_daemon)
{
	struct ibv_qp_init_attr init;
	struct rdma_cm_event *ev;
	struct ibv_qp_attr a;
	struct pair p;

	pair_confirmed(&p);
	ck_assert_int_eq(ibv_query_qp(p.client->qp, &a, IBV_QP_STATE, &init), 0);
	ck_assert_int_eq(a.qp_state, IBV_QPS_RTS);

	ev = expect(p.cch, RDMA_CM_EVENT_ESTABLISHED, p.client);
	ck_assert_int_eq(ev->status, 0);
	ck_pdata(ev->param.conn.private_data, ev->param.conn.private_data_len,
		 "rep", 3, PDATA_REP, "ESTABLISHED (client)");
	ck_assert_uint_eq(ev->param.conn.qp_num, p.server->qp->qp_num);
	ck_ok(rdma_ack_cm_event(ev));
	ck_qp_connected(p.client->qp, p.server->qp);
	ck_qp_connected(p.server->qp, p.client->qp);
	pair_send(p.client, p.server, "after the daemon's RTU");
	pair_send(p.server, p.client, "and back");
	pair_close(&p);
}
END_TEST

/*
 * The daemon cannot move a QP the app put in ERR: the reply ends the
 * connection as a REJ from the active side would (CONNECT_ERROR here,
 * REJECTED there), with nothing established.
 */
START_TEST(reply_to_a_qp_in_error)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	struct ibv_qp_init_attr init;
	struct rdma_cm_event *ev;
	struct pair p;

	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	client_connect(&p);
	ck_assert_int_eq(ibv_modify_qp(p.client->qp, &a, IBV_QP_STATE), 0);
	server_accept(&p);
	ev = expect(p.cch, RDMA_CM_EVENT_CONNECT_ERROR, p.client);
	ck_assert_int_eq(ev->status, -EINVAL);
	ck_ok(rdma_ack_cm_event(ev));
	ev = expect(p.sch, RDMA_CM_EVENT_REJECTED, p.server);
	ck_assert_int_eq(ev->status, 28);
	ck_ok(rdma_ack_cm_event(ev));
	ck_assert_int_eq(ibv_query_qp(p.client->qp, &a, IBV_QP_STATE, &init), 0);
	ck_assert_int_eq(a.qp_state, IBV_QPS_ERR);
	ck_assert_int_eq(p.client->qp->state, IBV_QPS_ERR);
	expect_quiet(p.cch, 100, "after CONNECT_ERROR");
	expect_quiet(p.sch, 100, "after REJECTED");
	pair_free(&p);
}
END_TEST

/*
 * An app may end the connection before it reads the reply the daemon
 * confirmed: it still reads ESTABLISHED, then DISCONNECTED, and its QP
 * stays in the ERR rdma_disconnect() put it in.
 */
START_TEST(disconnect_before_reading_the_reply)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;
	struct pair p;

	pair_confirmed(&p);
	ck_ok(rdma_disconnect(p.client));
	ck_assert_int_eq(p.client->qp->state, IBV_QPS_ERR);
	expect_ack(p.cch, RDMA_CM_EVENT_ESTABLISHED, p.client);
	ck_assert_int_eq(p.client->qp->state, IBV_QPS_ERR);
	ck_assert_int_eq(ibv_query_qp(p.client->qp, &a, IBV_QP_STATE, &init), 0);
	ck_assert_int_eq(a.qp_state, IBV_QPS_ERR);
	expect_ack(p.sch, RDMA_CM_EVENT_DISCONNECTED, p.server);
	ck_ok(rdma_disconnect(p.server));
	expect_ack(p.cch, RDMA_CM_EVENT_DISCONNECTED, p.client);
	pair_free(&p);
}
END_TEST

/*
 * A QP destroyed before the reply leaves the id without one: the app
 * sees CONNECT_RESPONSE and confirms with rdma_establish(), as for an id
 * that never had a QP.
 */
START_TEST(qp_destroyed_before_the_reply)
{
	struct rdma_cm_event *ev;
	struct pair p;

	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	client_connect(&p);
	rdma_destroy_qp(p.client);
	server_accept(&p);
	ev = expect(p.cch, RDMA_CM_EVENT_CONNECT_RESPONSE, p.client);
	ck_assert_int_eq(ev->status, 0);
	ck_ok(rdma_ack_cm_event(ev));
	expect_quiet(p.sch, 100, "before the client's rdma_establish");
	ck_ok(rdma_establish(p.client));
	expect_ack(p.sch, RDMA_CM_EVENT_ESTABLISHED, p.server);
	pair_close(&p);
}
END_TEST

/* Synchronous connect: rdma_connect returns once ESTABLISHED (a thread
 * plays the server). */
struct accept_arg {
	struct pair *p;
	int ok;
};

static void *accept_one(void *arg)
{
	struct accept_arg *a = arg;
	struct rdma_cm_event *ev;
	struct ibv_qp_init_attr qia = qp_attr(IBV_QPT_RC);

	if (!readable(a->p->sch->fd, ev_ms()) || rdma_get_cm_event(a->p->sch, &ev))
		return NULL;
	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		rdma_ack_cm_event(ev);
		return NULL;
	}
	a->p->server = ev->id;
	rdma_ack_cm_event(ev);
	if (rdma_create_qp(a->p->server, NULL, &qia) || rdma_accept(a->p->server, NULL))
		return NULL;
	if (!readable(a->p->sch->fd, ev_ms()) || rdma_get_cm_event(a->p->sch, &ev))
		return NULL;
	a->ok = ev->event == RDMA_CM_EVENT_ESTABLISHED;
	rdma_ack_cm_event(ev);
	return NULL;
}

START_TEST(sync_mode_connect)
{
	struct pair p;
	struct accept_arg arg = { .p = &p };
	struct sockaddr_storage dst;
	struct rdma_conn_param cp = { .initiator_depth = 1, .responder_resources = 1 };
	pthread_t t;

	memset(&p, 0, sizeof(p));
	p.sch = channel();
	p.cch = channel();	/* unused: the client is synchronous */
	p.listen = new_id(p.sch, NULL, RDMA_PS_TCP);
	p.port = listen_on(p.listen, "0.0.0.0", 4);
	p.client = new_id(NULL, NULL, RDMA_PS_TCP);
	dst = sa_make("127.0.0.1", p.port);
	ck_ok(rdma_resolve_addr(p.client, NULL, SA(dst), 2000));
	ck_ok(rdma_resolve_route(p.client, 2000));
	default_qp(p.client, IBV_QPT_RC);
	ck_assert_int_eq(pthread_create(&t, NULL, accept_one, &arg), 0);
	ck_ok(rdma_connect(p.client, &cp));
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_msg(arg.ok, "the server side did not see ESTABLISHED");
	pair_send(p.client, p.server, "synchronous");
	/* synchronous disconnect: the server sees it and answers */
	sync_disconnect_answered(p.client, p.server, p.sch);
	pair_free(&p);
}
END_TEST

/*
 * XRC through the CM, as Debian's rdma_xserver/rdma_xclient -c x do it:
 * endpoints from rdma_getaddrinfo(RDMA_PS_IB, XRC_RECV / XRC_SEND), the
 * target's id given an XRC SRQ in the device's XRC domain, whose number
 * the accept's private data carries to the initiator.
 */
struct xrc_server {
	struct rdma_cm_id *listen, *id;
	struct ibv_mr *mr;
	char buf[2][32];
	uint32_t srqn;		/* network order, as the private data has it */
	int ok;
};

static void *xrc_accept(void *arg)
{
	struct xrc_server *x = arg;
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct rdma_conn_param cp = { .responder_resources = 1 };
	int i;

	if (rdma_get_request(x->listen, &x->id) || !x->id->qp ||
	    x->id->qp->qp_type != IBV_QPT_XRC_RECV ||
	    rdma_create_srq(x->id, NULL, &sa) || !x->id->srq ||
	    ibv_get_srq_num(x->id->srq, &x->srqn))
		return NULL;
	x->srqn = htobe32(x->srqn);
	x->mr = rdma_reg_msgs(x->id, x->buf, sizeof(x->buf));
	if (!x->mr)
		return NULL;
	for (i = 0; i < 2; i++)
		if (rdma_post_recv(x->id, (void *)(uintptr_t)(i + 1), x->buf[i],
				   sizeof(x->buf[i]), x->mr))
			return NULL;
	cp.private_data = &x->srqn;
	cp.private_data_len = sizeof(x->srqn);
	x->ok = rdma_accept(x->id, &cp) == 0;
	return NULL;
}

static struct rdma_addrinfo *xrc_info(const char *node, const char *port,
				      bool passive)
{
	struct rdma_addrinfo hints = {
		.ai_flags = passive ? RAI_PASSIVE : 0,
		.ai_port_space = RDMA_PS_IB,
		.ai_qp_type = passive ? IBV_QPT_XRC_RECV : IBV_QPT_XRC_SEND,
	}, *res = NULL;

	ck_ok(rdma_getaddrinfo(node, port, &hints, &res));
	ck_assert_int_eq(res->ai_qp_type, hints.ai_qp_type);
	return res;
}

/* Two SENDs through the initiator QP to the target's SRQ. */
static void xrc_send_two(struct rdma_cm_id *client, uint32_t srqn,
			 struct xrc_server *x)
{
	static const char *const msg[2] = { "first to the SRQ", "second" };
	struct ibv_sge sge = { .length = 0 };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED },
			   *bad;
	struct ibv_wc wc;
	int i;

	wr.qp_type.xrc.remote_srqn = srqn;
	for (i = 0; i < 2; i++) {
		wr.wr_id = 10 + i;
		sge.addr = (uintptr_t)msg[i];
		sge.length = (uint32_t)strlen(msg[i]) + 1;
		ck_assert_int_eq(ibv_post_send(client->qp, &wr, &bad), 0);
		ck_assert_int_eq(rdma_get_send_comp(client, &wc), 1);
		ck_assert_msg(wc.status == IBV_WC_SUCCESS, "XRC send: %s",
			      ibv_wc_status_str(wc.status));
		ck_assert_uint_eq(wc.wr_id, 10 + i);
		ck_assert_int_eq(rdma_get_recv_comp(x->id, &wc), 1);
		ck_assert_msg(wc.status == IBV_WC_SUCCESS, "XRC receive: %s",
			      ibv_wc_status_str(wc.status));
		ck_assert_uint_eq(wc.wr_id, i + 1);
		ck_assert_uint_eq(wc.byte_len, strlen(msg[i]) + 1);
		ck_assert_uint_eq(wc.src_qp, client->qp->qp_num);
		ck_assert_str_eq(x->buf[i], msg[i]);
	}
}

/*
 * RDMA_PS_IB "provides for any IB services (UD, UC, RC, XRC, etc.)"
 * (rdma_create_id(3)): with a UD QP its ids connect by SIDR, as the kernel
 * decides by the QP type, with a SIDR REQ's 180 bytes of private data.
 */
struct ib_ud_server {
	struct rdma_cm_id *listen, *id;
	uint8_t pdata_len;
	int ok;
};

static void *ib_ud_accept(void *arg)
{
	struct ib_ud_server *s = arg;

	if (rdma_get_request(s->listen, &s->id))
		return NULL;
	s->pdata_len = s->id->event->param.ud.private_data_len;
	s->ok = s->id->qp && s->id->qp->qp_type == IBV_QPT_UD &&
		rdma_accept(s->id, NULL) == 0 &&
		/* the request stays, for its peer's address (rdma-core) */
		s->id->event && s->id->event->event == RDMA_CM_EVENT_CONNECT_REQUEST;
	return NULL;
}

START_TEST(ps_ib_ud)
{
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE,
				       .ai_port_space = RDMA_PS_IB,
				       .ai_qp_type = IBV_QPT_UD }, *res = NULL;
	struct ibv_qp_init_attr qia = { .cap = { .max_send_wr = 2, .max_send_sge = 1,
						 .max_recv_wr = 2, .max_recv_sge = 1 } };
	struct ib_ud_server s = { .ok = 0 };
	char pdata[100], port[8];
	struct rdma_conn_param cp = { .private_data = pdata,
				      .private_data_len = sizeof(pdata) };
	struct rdma_cm_id *client;
	pthread_t t;

	memset(pdata, 'u', sizeof(pdata));
	snprintf(port, sizeof(port), "%u", unused_port(RDMA_PS_IB));
	ck_ok(rdma_getaddrinfo(NULL, port, &hints, &res));
	ck_assert_int_eq(res->ai_qp_type, IBV_QPT_UD);
	ck_assert_msg(rdma_create_ep(&s.listen, res, NULL, &qia) == 0,
		      "rdma_create_ep (PS_IB, UD, passive): %s", strerror(errno));
	rdma_freeaddrinfo(res);
	ck_ok(rdma_listen(s.listen, 1));
	ck_assert_int_eq(pthread_create(&t, NULL, ib_ud_accept, &s), 0);
	hints.ai_flags = 0;
	res = NULL;
	ck_ok(rdma_getaddrinfo("127.0.0.1", port, &hints, &res));
	ck_assert_msg(rdma_create_ep(&client, res, NULL, &qia) == 0,
		      "rdma_create_ep (PS_IB, UD): %s", strerror(errno));
	rdma_freeaddrinfo(res);
	/* 100 bytes: more than a REQ carries (56), within a SIDR REQ (180) */
	ck_assert_msg(rdma_connect(client, &cp) == 0, "rdma_connect (PS_IB, UD): %s",
		      strerror(errno));
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_msg(s.ok, "the passive side failed: %s", strerror(errno));
	ck_assert_uint_eq(s.pdata_len, PDATA_SIDR_REQ);
	ck_assert_ptr_nonnull(client->event);
	ck_assert_int_eq(client->event->event, RDMA_CM_EVENT_ESTABLISHED);
	ck_assert_uint_eq(client->event->param.ud.qp_num, s.id->qp->qp_num);
	/* a synchronous id is synchronous already: NULL is refused */
	ck_fails_with(rdma_migrate_id(client, NULL), EINVAL);
	rdma_destroy_ep(client);
	rdma_destroy_ep(s.id);
	rdma_destroy_ep(s.listen);
}
END_TEST

START_TEST(xrc_connect)
{
	struct xrc_server x = { .ok = 0 };
	struct rdma_addrinfo *res;
	struct ibv_qp_init_attr qia = { .cap = { .max_send_wr = 2, .max_send_sge = 1,
						 .max_recv_wr = 1, .max_recv_sge = 1,
						 .max_inline_data = 32 },
					.sq_sig_all = 0 };
	struct rdma_cm_id *client;
	struct rdma_conn_param cp = { .initiator_depth = 1, .retry_count = 7,
				      .rnr_retry_count = 7 };
	struct ibv_qp_attr qa;
	int chfd;
	struct ibv_qp_init_attr init;
	char port[8];
	uint32_t srqn;
	pthread_t t;

	snprintf(port, sizeof(port), "%u", unused_port(RDMA_PS_IB));
	res = xrc_info(NULL, port, true);
	ck_assert_msg(rdma_create_ep(&x.listen, res, NULL, &qia) == 0,
		      "rdma_create_ep (XRC_RECV): %s", strerror(errno));
	rdma_freeaddrinfo(res);
	ck_assert_int_eq(x.listen->qp_type, IBV_QPT_XRC_RECV);
	ck_ok(rdma_listen(x.listen, 1));
	ck_assert_int_eq(pthread_create(&t, NULL, xrc_accept, &x), 0);

	res = xrc_info("127.0.0.1", port, false);
	ck_assert_msg(rdma_create_ep(&client, res, NULL, &qia) == 0,
		      "rdma_create_ep (XRC_SEND): %s", strerror(errno));
	rdma_freeaddrinfo(res);
	ck_assert_int_eq(client->qp->qp_type, IBV_QPT_XRC_SEND);
	ck_assert_msg(rdma_connect(client, &cp) == 0, "rdma_connect (XRC): %s",
		      strerror(errno));
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_msg(x.ok, "the XRC target's side failed: %s", strerror(errno));
	ck_assert_ptr_nonnull(client->event);
	ck_assert_int_eq(client->event->param.conn.private_data_len >= 4, 1);
	memcpy(&srqn, client->event->param.conn.private_data, sizeof(srqn));
	ck_assert_uint_eq(srqn, x.srqn);

	/* both halves connected to each other, in RTS */
	ck_assert_int_eq(ibv_query_qp(client->qp, &qa, IBV_QP_STATE | IBV_QP_DEST_QPN,
				      &init), 0);
	ck_assert_int_eq(qa.qp_state, IBV_QPS_RTS);
	ck_assert_uint_eq(qa.dest_qp_num, x.id->qp->qp_num);
	ck_assert_int_eq(ibv_query_qp(x.id->qp, &qa, IBV_QP_STATE | IBV_QP_DEST_QPN,
				      &init), 0);
	ck_assert_int_eq(qa.qp_state, IBV_QPS_RTS);
	ck_assert_uint_eq(qa.dest_qp_num, client->qp->qp_num);

	xrc_send_two(client, be32toh(srqn), &x);
	sync_disconnect_answered(client, x.id, NULL);
	rdma_dereg_mr(x.mr);
	/* the CQ made for the target's SRQ goes with it, its channel too */
	ck_assert_ptr_nonnull(x.id->recv_cq_channel);
	chfd = x.id->recv_cq_channel->fd;
	rdma_destroy_ep(x.id);
	ck_assert_msg(fcntl(chfd, F_GETFD) == -1 && errno == EBADF,
		      "the channel of the XRC SRQ's CQ outlived rdma_destroy_ep");
	rdma_destroy_ep(client);
	rdma_destroy_ep(x.listen);
}
END_TEST

/*
 * A listener takes requests of its own QP type only, as Linux's RDMA CM
 * does: an RC request (RDMA_PS_IB's default) to an XRC target's listener
 * is rejected, and an XRC initiator's to an RC listener.
 */
START_TEST(listener_qp_type)
{
	struct ibv_qp_init_attr qia = qp_attr(IBV_QPT_RC);
	struct rdma_conn_param cp = { .retry_count = 7 };
	struct rdma_event_channel *ch = channel();
	struct rdma_cm_id *listen, *id;
	struct rdma_addrinfo *res;
	char port[8];

	/* RC to XRC */
	snprintf(port, sizeof(port), "%u", unused_port(RDMA_PS_IB));
	res = xrc_info(NULL, port, true);
	ck_ok(rdma_create_ep(&listen, res, NULL, &qia));
	rdma_freeaddrinfo(res);
	ck_ok(rdma_listen(listen, 1));
	id = new_id(ch, NULL, RDMA_PS_IB);
	resolve(ch, id, "127.0.0.1", (uint16_t)atoi(port));
	ck_connect_refused(ch, id, "RC to an XRC listener");
	rdma_destroy_ep(listen);

	/* XRC to RC (a synchronous id: the rejection fails rdma_connect) */
	listen = new_id(ch, NULL, RDMA_PS_IB);
	snprintf(port, sizeof(port), "%u", listen_on(listen, "0.0.0.0", 1));
	res = xrc_info("127.0.0.1", port, false);
	qia.qp_type = 0;
	ck_ok(rdma_create_ep(&id, res, NULL, &qia));
	rdma_freeaddrinfo(res);
	ck_fails_with(rdma_connect(id, &cp), ECONNREFUSED);
	expect_quiet(ch, 100, "an RC listener after an XRC request");
	rdma_destroy_ep(id);
	ck_ok(rdma_destroy_id(listen));
	rdma_destroy_event_channel(ch);
}
END_TEST

/*
 * A passive endpoint made with a PD names it (id->pd), as rdma-core's
 * does: apps register their buffers on listen->pd.
 */
START_TEST(passive_ep_pd)
{
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE,
				       .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_context **devs = rdma_get_devices(NULL);
	struct rdma_cm_id *listen;
	struct ibv_pd *pd;
	char port[8];

	ck_assert_msg(devs && devs[0], "rdma_get_devices: %s", strerror(errno));
	pd = ibv_alloc_pd(devs[0]);
	ck_assert_ptr_nonnull(pd);
	snprintf(port, sizeof(port), "%u", unused_port(RDMA_PS_TCP));
	ck_ok(rdma_getaddrinfo("127.0.0.1", port, &hints, &res));
	ck_ok(rdma_create_ep(&listen, res, pd, NULL));
	rdma_freeaddrinfo(res);
	ck_assert_ptr_eq(listen->pd, pd);
	rdma_destroy_ep(listen);
	ck_assert_int_eq(ibv_dealloc_pd(pd), 0);
	rdma_free_devices(devs);
}
END_TEST

/*
 * An rdma_addrinfo's route and connect data, as rdma-core's
 * rdma_create_ep takes them (its resolver fills them in, an app may too):
 * ai_route is the route, as RDMA_OPTION_IB_PATH makes one, so records
 * without a primary path are EINVAL; ai_connect goes before the app's
 * private data in the id's connect request.
 */
struct pdata_seen {
	struct rdma_event_channel *ch;
	uint8_t data[PDATA_REQ];
	uint8_t len;
	bool ok;
};

/* Take one connection request, keep its private data, reject it. */
static void *reject_one(void *arg)
{
	struct pdata_seen *r = arg;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *child;

	if (!readable(r->ch->fd, ev_ms()) || rdma_get_cm_event(r->ch, &ev))
		return NULL;
	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		r->len = ev->param.conn.private_data_len;
		if (r->len <= sizeof(r->data) && ev->param.conn.private_data)
			memcpy(r->data, ev->param.conn.private_data, r->len);
		child = ev->id;
		r->ok = rdma_reject(child, NULL, 0) == 0;
		rdma_ack_cm_event(ev);
		rdma_destroy_id(child);
		return NULL;
	}
	rdma_ack_cm_event(ev);
	return NULL;
}

START_TEST(ep_route_and_connect_data)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res = NULL;
	struct ibv_qp_init_attr qia = qp_attr(IBV_QPT_RC);
	struct ibv_path_data *path;
	static const char hdr[] = "from res", app[] = "+app";
	char big[PDATA_REQ];
	struct rdma_conn_param cp = { .initiator_depth = 1, .responder_resources = 1,
				      .retry_count = 7 };
	struct pdata_seen seen = { .ok = false };
	struct rdma_cm_id *listen, *id;
	char port[8], want[sizeof(hdr) - 1 + sizeof(app) - 1];
	pthread_t t;

	seen.ch = channel();
	listen = new_id(seen.ch, NULL, RDMA_PS_TCP);
	snprintf(port, sizeof(port), "%u", listen_on(listen, "0.0.0.0", 1));
	ck_ok(rdma_getaddrinfo("127.0.0.1", port, &hints, &res));

	/* a record that is no primary path: no route */
	path = calloc(1, sizeof(*path));
	ck_assert_ptr_nonnull(path);
	path->flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_ALTERNATE |
		      IBV_PATH_FLAG_BIDIRECTIONAL;
	res->ai_route = path;
	res->ai_route_len = sizeof(*path);
	ck_fails_with(rdma_create_ep(&id, res, NULL, &qia), EINVAL);
	path->flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY |
		      IBV_PATH_FLAG_BIDIRECTIONAL;

	res->ai_connect = malloc(sizeof(hdr) - 1);
	ck_assert_ptr_nonnull(res->ai_connect);
	memcpy(res->ai_connect, hdr, sizeof(hdr) - 1);
	res->ai_connect_len = sizeof(hdr) - 1;
	ck_assert_msg(rdma_create_ep(&id, res, NULL, &qia) == 0,
		      "rdma_create_ep with a primary path: %s", strerror(errno));
	rdma_freeaddrinfo(res);

	/*
	 * Both must fit in the request: else EINVAL and nothing is sent (the
	 * listener's first request is the next one's).
	 */
	ck_assert_int_eq(pthread_create(&t, NULL, reject_one, &seen), 0);
	memset(big, 'b', sizeof(big));
	cp.private_data = big;
	cp.private_data_len = PDATA_REQ - (sizeof(hdr) - 1) + 1;
	ck_fails_with(rdma_connect(id, &cp), EINVAL);

	cp.private_data = app;
	cp.private_data_len = sizeof(app) - 1;
	ck_fails_with(rdma_connect(id, &cp), ECONNREFUSED);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_msg(seen.ok, "the listener saw no request");
	memcpy(want, hdr, sizeof(hdr) - 1);
	memcpy(want + sizeof(hdr) - 1, app, sizeof(app) - 1);
	ck_pdata(seen.data, seen.len, want, sizeof(want), PDATA_REQ,
		 "a request with ai_connect");
	rdma_destroy_ep(id);
	ck_ok(rdma_destroy_id(listen));
	rdma_destroy_event_channel(seen.ch);
}
END_TEST

/*
 * AF_IB addressing (ucmatose/udaddy/rstream -f gid): rdma_getaddrinfo
 * with AF_IB hints makes a GID and a service id of a textual IPv6
 * address; a listener on the device's GID 0 takes a connection addressed
 * to it, both ends report AF_IB addresses, and the connected QPs talk.
 */
static void first_gid(char *buf, size_t len, union ibv_gid *gid)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx;

	ck_assert_msg(list && list[0], "no device");
	ctx = ibv_open_device(list[0]);
	ck_assert_ptr_nonnull(ctx);
	ck_assert_int_eq(ibv_query_gid(ctx, 1, 0, gid), 0);
	ck_assert_ptr_nonnull(inet_ntop(AF_INET6, gid->raw, buf, (socklen_t)len));
	ibv_close_device(ctx);
	ibv_free_device_list(list);
}

static struct rdma_addrinfo *ib_info(const char *node, const char *port,
				     bool passive)
{
	struct rdma_addrinfo hints = {
		.ai_flags = RAI_NUMERICHOST | RAI_FAMILY | (passive ? RAI_PASSIVE : 0),
		.ai_family = AF_IB,
		.ai_port_space = RDMA_PS_TCP,
	}, *res = NULL;

	ck_assert_msg(rdma_getaddrinfo(node, port, &hints, &res) == 0,
		      "rdma_getaddrinfo(%s, AF_IB): %s", node ? node : "NULL",
		      strerror(errno));
	ck_assert_int_eq(res->ai_family, AF_IB);
	/* without RAI_FAMILY, the IPv6 address itself (rdma-core's) */
	if (node) {
		struct rdma_addrinfo *in6 = NULL;

		hints.ai_flags &= ~RAI_FAMILY;
		ck_assert_int_eq(rdma_getaddrinfo(node, port, &hints, &in6), 0);
		ck_assert_int_eq(in6->ai_family, AF_INET6);
		rdma_freeaddrinfo(in6);
	}
	return res;
}

static void ck_sib(const struct sockaddr *sa, const union ibv_gid *gid,
		   uint16_t port, const char *what)
{
	const struct sockaddr_ib *sib = (const struct sockaddr_ib *)sa;

	ck_assert_msg(sa->sa_family == AF_IB, "%s: family %d, want AF_IB", what,
		      sa->sa_family);
	ck_assert_msg(!memcmp(sib->sib_addr.sib_raw, gid->raw, 16),
		      "%s: another GID", what);
	ck_assert_msg(be64toh(sib->sib_sid) == (((uint64_t)RDMA_PS_TCP << 16) | port),
		      "%s: service id %#" PRIx64 ", want port %u of RDMA_PS_TCP",
		      what, be64toh(sib->sib_sid), port);
}

START_TEST(af_ib)
{
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
				      .retry_count = 7, .rnr_retry_count = 7 };
	uint16_t port = unused_port(RDMA_PS_TCP);
	struct rdma_event_channel *sch = channel(), *cch = channel();
	struct rdma_cm_id *listen, *client, *server;
	struct rdma_addrinfo *res;
	struct rdma_cm_event *ev;
	char gids[INET6_ADDRSTRLEN], ports[8];
	union ibv_gid gid, other;

	first_gid(gids, sizeof(gids), &gid);
	snprintf(ports, sizeof(ports), "%u", port);

	/* the wildcard GID for a passive side without a node */
	res = ib_info(NULL, ports, true);
	ck_assert_ptr_nonnull(res->ai_src_addr);
	memset(&other, 0, sizeof(other));
	ck_sib(res->ai_src_addr, &other, port, "passive ai_src_addr");
	rdma_freeaddrinfo(res);

	/* a GID no port has: not an address of this host */
	res = ib_info("fe80::dead:beef", ports, true);
	listen = new_id(sch, NULL, RDMA_PS_TCP);
	ck_fails_with(rdma_bind_addr(listen, res->ai_src_addr), EADDRNOTAVAIL);
	rdma_freeaddrinfo(res);

	res = ib_info(gids, ports, true);
	ck_sib(res->ai_src_addr, &gid, port, "passive ai_src_addr");
	ck_ok(rdma_bind_addr(listen, res->ai_src_addr));
	rdma_freeaddrinfo(res);
	ck_ok(rdma_listen(listen, 2));
	ck_sib(rdma_get_local_addr(listen), &gid, port, "the listener's address");
	ck_assert_uint_eq(be16toh(rdma_get_src_port(listen)), port);

	/* AF_IB ids are AFONLY: IPv4 to the same port finds no listener */
	client = new_id(cch, NULL, RDMA_PS_TCP);
	resolve(cch, client, "127.0.0.1", port);
	ck_connect_refused(cch, client, "IPv4 to an AF_IB listener");

	client = new_id(cch, NULL, RDMA_PS_TCP);
	res = ib_info(gids, ports, false);
	ck_sib(res->ai_dst_addr, &gid, port, "active ai_dst_addr");
	ck_ok(rdma_resolve_addr(client, NULL, res->ai_dst_addr, 2000));
	rdma_freeaddrinfo(res);
	expect_ack(cch, RDMA_CM_EVENT_ADDR_RESOLVED, client);
	ck_ok(rdma_resolve_route(client, 2000));
	expect_ack(cch, RDMA_CM_EVENT_ROUTE_RESOLVED, client);
	ck_sib(rdma_get_peer_addr(client), &gid, port, "the client's peer");
	ck_assert_int_eq(rdma_get_local_addr(client)->sa_family, AF_IB);
	default_qp(client, IBV_QPT_RC);
	/*
	 * An AF_IB REQ has no RDMA CM header: all its 92 bytes are the
	 * app's (the kernel's cma_user_data_offset), one more is EINVAL
	 */
	{
		char pdata[PDATA_REQ_IB + 1];

		memset(pdata, 'i', sizeof(pdata));
		cp.private_data = pdata;
		cp.private_data_len = sizeof(pdata);
		ck_fails_with(rdma_connect(client, &cp), EINVAL);
		cp.private_data_len = PDATA_REQ_IB;
		ck_ok(rdma_connect(client, &cp));
		cp.private_data = NULL;
		cp.private_data_len = 0;
	}
	ev = expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	server = ev->id;
	ck_assert_uint_eq(ev->param.conn.private_data_len, PDATA_REQ_IB);
	ck_assert_msg(((const char *)ev->param.conn.private_data)[PDATA_REQ_IB - 1] == 'i',
		      "the AF_IB request's last byte of private data is lost");
	ck_ok(rdma_ack_cm_event(ev));
	ck_sib(rdma_get_local_addr(server), &gid, port, "the server's address");
	ck_assert_int_eq(rdma_get_peer_addr(server)->sa_family, AF_IB);
	default_qp(server, IBV_QPT_RC);
	ck_ok(rdma_accept(server, &cp));
	expect_ack(cch, RDMA_CM_EVENT_ESTABLISHED, client);
	expect_ack(sch, RDMA_CM_EVENT_ESTABLISHED, server);
	pair_send(client, server, "over AF_IB");
	disconnect_answered(client, cch, server, sch);
	rdma_destroy_qp(client);
	rdma_destroy_qp(server);
	ck_ok(rdma_destroy_id(client));
	ck_ok(rdma_destroy_id(server));
	ck_ok(rdma_destroy_id(listen));
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(sch);
}
END_TEST

/*
 * A thread blocked in rdma_get_cm_event when another thread destroys the
 * channel stays blocked, as a read() of the kernel's rdma_cm file does:
 * rping's event thread exits the process with -1 on any error while its
 * main thread destroys that channel and returns 0.  The waiter can still
 * be cancelled, and the channel's descriptors are closed all the same.
 */
struct waiter_arg {
	struct rdma_event_channel *ch;
	int started, returned;
	int ret, err;
};

static void *waiter_thread(void *arg)
{
	struct waiter_arg *w = arg;
	struct rdma_cm_event *ev;

	__atomic_store_n(&w->started, 1, __ATOMIC_SEQ_CST);
	w->ret = rdma_get_cm_event(w->ch, &ev);
	w->err = errno;
	__atomic_store_n(&w->returned, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	ck_assert_msg(d, "/proc/self/fd: %s", strerror(errno));
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

START_TEST(destroyed_under_waiter)
{
	int fds = open_fds();
	struct waiter_arg w = { .ch = channel() };
	pthread_t t;
	void *res;

	ck_assert_int_gt(open_fds(), fds);
	ck_assert_int_eq(pthread_create(&t, NULL, waiter_thread, &w), 0);
	/* in the call (a thread not yet there would get EBADF), then past
	 * the library's look for a coming event: asleep in poll() */
	while (!__atomic_load_n(&w.started, __ATOMIC_SEQ_CST))
		vt_sleep_ms(1);
	vt_sleep_ms(100);
	rdma_destroy_event_channel(w.ch);
	vt_sleep_ms(300L * vt_tmul());
	ck_assert_msg(!__atomic_load_n(&w.returned, __ATOMIC_SEQ_CST),
		      "rdma_get_cm_event returned %d (%s) when its channel was destroyed",
		      w.ret, strerror(w.err));
	ck_assert_int_eq(open_fds(), fds);
	ck_assert_int_eq(pthread_cancel(t), 0);
	ck_assert_int_eq(pthread_join(t, &res), 0);
	ck_assert_msg(res == PTHREAD_CANCELED, "the waiter was not cancelled");
}
END_TEST

/*
 * A call on a channel destroyed just before fails with EBADF, as a read()
 * of the kernel's closed file does (rping's event thread may make it),
 * and touches no freed memory (the sanitizer builds would say).
 */
START_TEST(get_event_after_destroy)
{
	struct rdma_event_channel *ch = channel();
	struct rdma_cm_event *ev;

	rdma_destroy_event_channel(ch);
	errno = 0;
	ck_assert_int_eq(rdma_get_cm_event(ch, &ev), -1);
	ck_assert_int_eq(errno, EBADF);
}
END_TEST

/*
 * Events the daemon sent an id that is then destroyed go with it, as the
 * kernel drops them: the channel's fd is not left readable for nothing
 * (an app that poll()s and then reads would block), and the other ids'
 * events stay.  A listener's requests go too, refused at once.
 */
START_TEST(destroyed_ids_events_gone)
{
	struct rdma_event_channel *ch = channel(), *cch = channel();
	struct rdma_cm_id *a = new_id(ch, NULL, RDMA_PS_TCP);
	struct rdma_cm_id *b = new_id(ch, NULL, RDMA_PS_TCP);
	struct sockaddr_storage dst = sa_make("127.0.0.1", 7005), any;
	struct rdma_conn_param cp = { .initiator_depth = 1,
				      .responder_resources = 1,
				      .retry_count = 7 };
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c;
	uint16_t port;

	ck_ok(rdma_resolve_addr(a, NULL, SA(dst), 2000));
	ck_assert_msg(readable(ch->fd, ev_ms()), "no ADDR_RESOLVED");
	ck_ok(rdma_destroy_id(a));
	expect_quiet(ch, 200, "a destroyed id's event");

	a = new_id(ch, NULL, RDMA_PS_TCP);
	ck_ok(rdma_resolve_addr(a, NULL, SA(dst), 2000));
	ck_ok(rdma_resolve_addr(b, NULL, SA(dst), 2000));
	vt_sleep_ms(200);		/* both events in */
	ck_ok(rdma_destroy_id(a));
	expect_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED, b);
	expect_quiet(ch, 200, "the other id's event taken");
	ck_ok(rdma_destroy_id(b));

	/* a listener with a request waiting */
	port = unused_port(RDMA_PS_TCP);
	any = sa_make("127.0.0.1", port);
	l = new_id(ch, NULL, RDMA_PS_TCP);
	ck_ok(rdma_bind_addr(l, SA(any)));
	ck_ok(rdma_listen(l, 4));
	c = new_id(cch, NULL, RDMA_PS_TCP);
	resolve(cch, c, "127.0.0.1", port);
	default_qp(c, IBV_QPT_RC);
	ck_ok(rdma_connect(c, &cp));
	ck_assert_msg(readable(ch->fd, ev_ms()), "no CONNECT_REQUEST");
	ck_ok(rdma_destroy_id(l));
	expect_quiet(ch, 200, "a destroyed listener's request");
	ev = expect(cch, RDMA_CM_EVENT_REJECTED, c);
	ck_ok(rdma_ack_cm_event(ev));
	rdma_destroy_qp(c);
	ck_ok(rdma_destroy_id(c));
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(ch);
}
END_TEST

/* rdma_destroy_id waits until every event reported on the id is acked. */
struct destroy_arg {
	struct rdma_cm_id *id;
	volatile int done;
	int ret;
};

static void *destroy_thread(void *arg)
{
	struct destroy_arg *d = arg;

	d->ret = rdma_destroy_id(d->id);
	__atomic_store_n(&d->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

START_TEST(destroy_waits_for_ack)
{
	struct rdma_event_channel *ch = channel();
	struct destroy_arg d = { 0 };
	struct sockaddr_storage lo = sa_make("127.0.0.1", 7003);
	struct rdma_cm_event *ev;
	pthread_t t;
	long t0;

	d.id = new_id(ch, NULL, RDMA_PS_TCP);
	ck_ok(rdma_resolve_addr(d.id, NULL, SA(lo), 2000));
	ev = expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, d.id);
	ck_assert_int_eq(pthread_create(&t, NULL, destroy_thread, &d), 0);
	vt_sleep_ms(300L * vt_tmul());
	ck_assert_msg(!__atomic_load_n(&d.done, __ATOMIC_SEQ_CST),
		      "rdma_destroy_id returned while an event was not acked");
	t0 = vt_now_ms();
	ck_ok(rdma_ack_cm_event(ev));
	while (!__atomic_load_n(&d.done, __ATOMIC_SEQ_CST) && vt_now_ms() - t0 < ev_ms())
		vt_sleep_ms(5);
	ck_assert_msg(__atomic_load_n(&d.done, __ATOMIC_SEQ_CST),
		      "rdma_destroy_id still blocked %d ms after the ack", ev_ms());
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(d.ret, 0);
	rdma_destroy_event_channel(ch);
}
END_TEST

/* ---- migration and options ------------------------------------------------------ */

START_TEST(migrate)
{
	struct rdma_event_channel *ch1 = channel(), *ch2 = channel();
	struct rdma_cm_id *id = new_id(ch1, NULL, RDMA_PS_TCP);
	struct sockaddr_storage lo = sa_make("127.0.0.1", 7004);

	ck_ok(rdma_migrate_id(id, ch2));
	ck_assert_ptr_eq(id->channel, ch2);
	ck_ok(rdma_resolve_addr(id, NULL, SA(lo), 2000));
	expect_ack(ch2, RDMA_CM_EVENT_ADDR_RESOLVED, id);
	expect_quiet(ch1, 100, "the old channel after migration");
	/* and back, with the id in use */
	ck_ok(rdma_migrate_id(id, ch1));
	ck_assert_ptr_eq(id->channel, ch1);
	ck_ok(rdma_resolve_route(id, 2000));
	expect_ack(ch1, RDMA_CM_EVENT_ROUTE_RESOLVED, id);
	expect_quiet(ch2, 100, "the second channel after migrating back");
	/* the emptied channel can go */
	rdma_destroy_event_channel(ch2);
	ck_ok(rdma_destroy_id(id));
	rdma_destroy_event_channel(ch1);
}
END_TEST

/*
 * A NULL channel makes an id synchronous, on a private channel of its own,
 * as rdma-core's: its calls then wait for their events, which stay in
 * id->event.  Moving it to a shared channel again acks that event and
 * makes it asynchronous; a synchronous id has no use for NULL (EINVAL).
 */
START_TEST(migrate_to_private_channel)
{
	struct rdma_event_channel *ch = channel();
	struct rdma_cm_id *id = new_id(ch, NULL, RDMA_PS_TCP);
	struct sockaddr_storage lo = sa_make("127.0.0.1", 7004);

	ck_ok(rdma_migrate_id(id, NULL));
	ck_assert_ptr_nonnull(id->channel);
	ck_assert_ptr_ne(id->channel, ch);
	ck_ok(rdma_resolve_addr(id, NULL, SA(lo), 2000));
	ck_assert_ptr_nonnull(id->event);
	ck_assert_int_eq(id->event->event, RDMA_CM_EVENT_ADDR_RESOLVED);
	expect_quiet(ch, 100, "the shared channel after a move to a private one");
	ck_fails_with(rdma_migrate_id(id, NULL), EINVAL);

	ck_ok(rdma_migrate_id(id, ch));
	ck_assert_ptr_eq(id->channel, ch);
	ck_assert_ptr_null(id->event);
	ck_ok(rdma_resolve_route(id, 2000));
	expect_ack(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, id);
	ck_ok(rdma_destroy_id(id));
	rdma_destroy_event_channel(ch);
}
END_TEST

/* The reference: migration "moves any pending events" to the new channel. */
START_TEST(migrate_pending_event)
{
	struct rdma_event_channel *ch1 = channel(), *ch2 = channel();
	struct rdma_cm_id *id = new_id(ch1, NULL, RDMA_PS_TCP);
	struct sockaddr_storage lo = sa_make("127.0.0.1", 7005);

	ck_ok(rdma_resolve_addr(id, NULL, SA(lo), 2000));
	ck_assert_msg(readable(ch1->fd, ev_ms()), "no event");
	ck_ok(rdma_migrate_id(id, ch2));
	expect_ack(ch2, RDMA_CM_EVENT_ADDR_RESOLVED, id);
	expect_quiet(ch1, 100, "the old channel after migrating a pending event");
	ck_ok(rdma_destroy_id(id));
	rdma_destroy_event_channel(ch1);
	rdma_destroy_event_channel(ch2);
}
END_TEST

/*
 * A listener migrated with a request waiting takes the request along, as
 * the kernel's: it comes on the new channel, its id there, and the
 * accept works (it was refused before).
 */
START_TEST(migrate_listener_pending)
{
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
				      .retry_count = 7, .rnr_retry_count = 7 };
	struct rdma_event_channel *n = channel();
	struct rdma_cm_event *ev;
	struct pair p;

	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	default_qp(p.client, IBV_QPT_RC);
	ck_ok(rdma_connect(p.client, &cp));
	ck_assert_msg(readable(p.sch->fd, ev_ms()), "no CONNECT_REQUEST");
	ck_ok(rdma_migrate_id(p.listen, n));
	expect_quiet(p.sch, 200, "the listener's old channel");
	ev = expect(n, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	ck_assert_ptr_eq(ev->listen_id, p.listen);
	ck_assert_ptr_eq(ev->id->channel, n);
	p.server = ev->id;
	ck_ok(rdma_ack_cm_event(ev));
	default_qp(p.server, IBV_QPT_RC);
	ck_ok(rdma_accept(p.server, &cp));
	expect_ack(p.cch, RDMA_CM_EVENT_ESTABLISHED, p.client);
	expect_ack(n, RDMA_CM_EVENT_ESTABLISHED, p.server);
	rdma_destroy_event_channel(p.sch);
	p.sch = n;
	pair_send(p.client, p.server, "accepted after the listener moved");
	pair_close(&p);
}
END_TEST

/* A connected pair migrated to new channels keeps working. */
START_TEST(migrate_connected)
{
	struct pair p;
	struct rdma_event_channel *n1 = channel(), *n2 = channel();

	pair_prepare(&p, "127.0.0.1", RDMA_PS_TCP);
	pair_connect(&p, NULL, NULL);
	ck_ok(rdma_migrate_id(p.server, n1));
	ck_ok(rdma_migrate_id(p.listen, n1));
	ck_ok(rdma_migrate_id(p.client, n2));
	rdma_destroy_event_channel(p.sch);
	rdma_destroy_event_channel(p.cch);
	p.sch = n1;
	p.cch = n2;
	pair_send(p.client, p.server, "after migration");
	pair_close(&p);
}
END_TEST

START_TEST(set_option)
{
	struct rdma_event_channel *ch = channel();
	struct rdma_cm_id *a = new_id(ch, NULL, RDMA_PS_TCP);
	struct rdma_cm_id *b = new_id(ch, NULL, RDMA_PS_TCP);
	uint8_t tos = 32, ack_timeout = 14;
	int one = 1;
	uint32_t four = 32;
	struct sockaddr_storage ss;
	uint16_t port;

	ck_ok(rdma_set_option(a, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos)));
	ck_ok(rdma_set_option(a, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
			      &ack_timeout, sizeof(ack_timeout)));
	ck_ok(rdma_set_option(a, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one, sizeof(one)));
	ck_ok(rdma_set_option(a, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof(one)));
	ck_fails_with(rdma_set_option(a, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &four,
				      sizeof(four)), EINVAL);
	ck_fails_with(rdma_set_option(a, RDMA_OPTION_ID, 99, &one, sizeof(one)), ENOSYS);
	ck_fails_with(rdma_set_option(a, 99, 0, &one, sizeof(one)), ENOSYS);
	/* a path record: not on an id without a resolved address */
	{
		struct ibv_path_data pd = { .flags = IBV_PATH_FLAG_GMP |
				IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_BIDIRECTIONAL };

		ck_fails_with(rdma_set_option(a, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH,
					      &pd, sizeof(pd) - 1), EINVAL);
		ck_fails_with(rdma_set_option(a, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH,
					      &pd, sizeof(pd)), EINVAL);
	}

	/* REUSEADDR on both: two non-listening ids share an address */
	ck_ok(rdma_set_option(b, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof(one)));
	ss = sa_make("127.0.0.1", 0);
	ck_ok(rdma_bind_addr(a, SA(ss)));
	port = src_port(a);
	ss = sa_make("127.0.0.1", port);
	ck_ok(rdma_bind_addr(b, SA(ss)));
	ck_assert_uint_eq(src_port(b), port);
	/* AFONLY while bound is still fine (as on Linux), once listening too late */
	ck_ok(rdma_set_option(b, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one, sizeof(one)));
	ck_ok(rdma_destroy_id(a));
	ck_ok(rdma_destroy_id(b));
	a = new_id(ch, NULL, RDMA_PS_TCP);
	listen_on(a, "0.0.0.0", 1);
	ck_fails_with(rdma_set_option(a, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one,
				      sizeof(one)), EINVAL);
	ck_ok(rdma_destroy_id(a));
	/* ACK_TIMEOUT is for RC ids */
	a = new_id(ch, NULL, RDMA_PS_UDP);
	ck_fails_with(rdma_set_option(a, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
				      &ack_timeout, sizeof(ack_timeout)), EINVAL);
	ck_ok(rdma_destroy_id(a));
	rdma_destroy_event_channel(ch);
}
END_TEST

/*
 * A listener on a port many ids are bound to (REUSEADDR, the other
 * family) before and after it listened: a request finds it, one for the
 * bound ids' address finds none.
 */
#define REUSE_IDS	100

START_TEST(listener_among_bound_ids)
{
	static struct rdma_cm_id *bound[2 * REUSE_IDS];
	struct rdma_event_channel *ch = channel(), *cch = channel();
	struct rdma_conn_param cp = { .initiator_depth = 1,
				      .responder_resources = 1,
				      .retry_count = 7 };
	struct rdma_cm_id *l = NULL, *c;
	struct rdma_cm_event *ev;
	struct sockaddr_storage ss, six;
	uint16_t port = unused_port(RDMA_PS_TCP);
	int one = 1;
	unsigned int i;

	ss = sa_make("127.0.0.1", port);
	for (i = 0; i < 2 * REUSE_IDS; i++) {
		if (i == REUSE_IDS) {
			l = new_id(ch, NULL, RDMA_PS_TCP);
			ck_ok(rdma_set_option(l, RDMA_OPTION_ID,
					      RDMA_OPTION_ID_AFONLY, &one,
					      sizeof(one)));
			six = sa_make("::1", port);
			ck_ok(rdma_bind_addr(l, SA(six)));
			ck_ok(rdma_listen(l, 4));
		}
		bound[i] = new_id(ch, NULL, RDMA_PS_TCP);
		ck_ok(rdma_set_option(bound[i], RDMA_OPTION_ID,
				      RDMA_OPTION_ID_REUSEADDR, &one, sizeof(one)));
		ck_ok(rdma_bind_addr(bound[i], SA(ss)));
	}
	/* the bound ids' address: nobody listens there */
	c = new_id(cch, NULL, RDMA_PS_TCP);
	resolve(cch, c, "127.0.0.1", port);
	default_qp(c, IBV_QPT_RC);
	ck_ok(rdma_connect(c, &cp));
	ev = expect(cch, RDMA_CM_EVENT_REJECTED, c);
	ck_ok(rdma_ack_cm_event(ev));
	rdma_destroy_qp(c);
	ck_ok(rdma_destroy_id(c));
	/* the listener's: its request comes */
	c = new_id(cch, NULL, RDMA_PS_TCP);
	resolve(cch, c, "::1", port);
	default_qp(c, IBV_QPT_RC);
	ck_ok(rdma_connect(c, &cp));
	reject_request(expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL), cch, c);
	for (i = 0; i < 2 * REUSE_IDS; i++)
		ck_ok(rdma_destroy_id(bound[i]));
	ck_ok(rdma_destroy_id(l));
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(ch);
}
END_TEST

/* ---- UD and multicast --------------------------------------------------------------- */

/*
 * A UD event with no address vector (a request, UNREACHABLE): qp_num,
 * qkey and ah_attr are all zero, its port too, as the kernel's.
 */
static void ck_ud_nothing(const struct rdma_ud_param *ud, const char *what)
{
	struct ibv_ah_attr zero = { 0 };

	ck_assert_msg(ud->qp_num == 0 && ud->qkey == 0,
		      "%s: qp_num %#x qkey %#x, want 0", what, ud->qp_num, ud->qkey);
	ck_assert_msg(!memcmp(&ud->ah_attr, &zero, sizeof(zero)),
		      "%s: an address vector (dlid %#x port %u)", what,
		      ud->ah_attr.dlid, ud->ah_attr.port_num);
}

START_TEST(ud_sidr)
{
	struct pair p;
	struct rdma_conn_param cp = { 0 };
	struct rdma_cm_event *ev;
	struct ibv_port_attr pa;
	static const char req[] = "ud hello";
	struct rdma_cm_id *child;

	pair_prepare(&p, "127.0.0.1", RDMA_PS_UDP);
	default_qp(p.client, IBV_QPT_UD);
	cp.private_data = req;
	cp.private_data_len = sizeof(req) - 1;
	ck_ok(rdma_connect(p.client, &cp));
	ev = expect(p.sch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	ck_assert_ptr_nonnull(ev->param.ud.private_data);
	ck_assert_msg(!memcmp(ev->param.ud.private_data, req, sizeof(req) - 1),
		      "UD request private data differs");
	/* A SIDR REQ has no QPN, Q_Key or path: zero, as the kernel's event. */
	ck_ud_nothing(&ev->param.ud, "the UD request");
	p.server = ev->id;
	ck_ok(rdma_ack_cm_event(ev));
	default_qp(p.server, IBV_QPT_UD);
	ck_ok(rdma_accept(p.server, NULL));
	ev = expect(p.cch, RDMA_CM_EVENT_ESTABLISHED, p.client);
	ck_assert_uint_eq(ev->param.ud.qp_num, p.server->qp->qp_num);
	ck_assert_uint_eq(ev->param.ud.qkey, UDP_QKEY);
	ck_assert_int_eq(ibv_query_port(p.client->verbs, 1, &pa), 0);
	ck_assert_uint_eq(ev->param.ud.ah_attr.dlid, pa.lid);
	ck_assert_uint_eq(ev->param.ud.ah_attr.port_num, 1);
	/* a datagram through an AH made from the event */
	{
		struct ibv_ah *ah = ibv_create_ah(p.client->pd, &ev->param.ud.ah_attr);
		char sbuf[32] = "datagram", rbuf[40 + 32];
		struct ibv_mr *smr, *rmr;
		struct ibv_wc wc;
		uint32_t rqpn = ev->param.ud.qp_num, qkey = ev->param.ud.qkey;

		ck_assert_msg(ah, "ibv_create_ah from ESTABLISHED's ah_attr: %s", strerror(errno));
		ck_ok(rdma_ack_cm_event(ev));
		memset(rbuf, 0, sizeof(rbuf));
		smr = rdma_reg_msgs(p.client, sbuf, sizeof(sbuf));
		rmr = rdma_reg_msgs(p.server, rbuf, sizeof(rbuf));
		ck_assert_ptr_nonnull(smr);
		ck_assert_ptr_nonnull(rmr);
		ck_ok(rdma_post_recv(p.server, NULL, rbuf, sizeof(rbuf), rmr));
		ck_ok(rdma_post_ud_send(p.client, NULL, sbuf, 9, smr, IBV_SEND_SIGNALED, ah, rqpn));
		(void)qkey;
		ck_assert_int_eq(rdma_get_send_comp(p.client, &wc), 1);
		ck_assert_int_eq(wc.status, IBV_WC_SUCCESS);
		ck_assert_int_eq(rdma_get_recv_comp(p.server, &wc), 1);
		ck_assert_int_eq(wc.status, IBV_WC_SUCCESS);
		ck_assert_uint_eq(wc.byte_len, 40 + 9);
		ck_assert_str_eq(rbuf + 40, "datagram");
		ck_assert_uint_eq(wc.src_qp, p.client->qp->qp_num);
		rdma_dereg_mr(smr);
		rdma_dereg_mr(rmr);
		ck_assert_int_eq(ibv_destroy_ah(ah), 0);
	}
	/* a rejected UD request: UNREACHABLE */
	rdma_destroy_qp(p.client);
	ck_ok(rdma_destroy_id(p.client));
	p.client = new_id(p.cch, NULL, RDMA_PS_UDP);
	resolve(p.cch, p.client, "127.0.0.1", p.port);
	default_qp(p.client, IBV_QPT_UD);
	ck_ok(rdma_connect(p.client, &cp));
	ev = expect(p.sch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	child = ev->id;
	ck_ok(rdma_ack_cm_event(ev));
	ck_ok(rdma_reject(child, NULL, 0));
	ck_ok(rdma_destroy_id(child));
	ev = expect(p.cch, RDMA_CM_EVENT_UNREACHABLE, p.client);
	ck_assert_int_eq(ev->status, SIDR_REJECT);
	ck_assert_uint_eq(ev->param.ud.private_data_len, PDATA_SIDR_REP);
	ck_ud_nothing(&ev->param.ud, "UNREACHABLE after a SIDR reject");
	ck_ok(rdma_ack_cm_event(ev));
	pair_free(&p);
}
END_TEST

/* A datagram to the group (ah_attr, qpn, qkey) from `from` reaches `to`. */
static void group_datagram(struct rdma_cm_id *from, struct rdma_cm_id *to,
			   struct ibv_ah_attr *ah_attr, uint32_t qpn, uint32_t qkey)
{
	struct ibv_ah *ah = ibv_create_ah(from->pd, ah_attr);
	char sbuf[32] = "to the group", rbuf[40 + 32] = "";
	struct ibv_mr *smr = rdma_reg_msgs(from, sbuf, sizeof(sbuf));
	struct ibv_mr *rmr = rdma_reg_msgs(to, rbuf, sizeof(rbuf));
	struct ibv_sge sge = { .addr = (uintptr_t)sbuf, .length = 13 };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;

	ck_assert_ptr_nonnull(ah);
	ck_assert_ptr_nonnull(smr);
	ck_assert_ptr_nonnull(rmr);
	sge.lkey = smr->lkey;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = qkey;
	ck_ok(rdma_post_recv(to, NULL, rbuf, sizeof(rbuf), rmr));
	ck_assert_int_eq(ibv_post_send(from->qp, &wr, &bad), 0);
	ck_assert_int_eq(rdma_get_send_comp(from, &wc), 1);
	ck_assert_int_eq(wc.status, IBV_WC_SUCCESS);
	ck_assert_int_eq(rdma_get_recv_comp(to, &wc), 1);
	ck_assert_int_eq(wc.status, IBV_WC_SUCCESS);
	ck_assert_str_eq(rbuf + 40, "to the group");
	rdma_dereg_mr(smr);
	rdma_dereg_mr(rmr);
	ibv_destroy_ah(ah);
}

START_TEST(multicast)
{
	struct rdma_event_channel *ch = channel();
	struct rdma_cm_id *id[2];
	struct sockaddr_storage src = sa_make("127.0.0.1", 0);
	struct sockaddr_storage mc = sa_make("239.1.2.3", 0);
	struct rdma_cm_event *ev;
	struct ibv_ah_attr ah_attr[2];
	uint32_t qpn[2], qkey[2];
	unsigned int i;

	for (i = 0; i < 2; i++) {
		id[i] = new_id(ch, NULL, RDMA_PS_UDP);
		ck_ok(rdma_bind_addr(id[i], SA(src)));
		ck_ok(rdma_resolve_addr(id[i], SA(src), SA(mc), 2000));
		expect_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED, id[i]);
		default_qp(id[i], IBV_QPT_UD);
		if (i == 0) {
			/* a field the library does not know, then a missing one */
			struct rdma_cm_join_mc_attr_ex x = {
				.comp_mask = RDMA_CM_JOIN_MC_ATTR_RESERVED |
					     RDMA_CM_JOIN_MC_ATTR_ADDRESS |
					     RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
				.join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER,
				.addr = SA(mc),
			};

			ck_fails_with(rdma_join_multicast_ex(id[i], &x, NULL), ENOTSUP);
			x.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS;
			ck_fails_with(rdma_join_multicast_ex(id[i], &x, NULL), EINVAL);
		}
		ck_ok(rdma_join_multicast(id[i], SA(mc), &id[i]));
		ev = expect(ch, RDMA_CM_EVENT_MULTICAST_JOIN, id[i]);
		ck_assert_int_eq(ev->status, 0);
		ck_assert_uint_eq(ev->param.ud.qp_num, 0xffffff);
		ck_assert_msg(ev->param.ud.ah_attr.is_global, "multicast AH without GRH");
		ck_assert_uint_eq(ev->param.ud.ah_attr.grh.dgid.raw[0], 0xff);
		ck_assert_msg(ev->param.ud.ah_attr.dlid >= 0xc000, "MLID %#x",
			      ev->param.ud.ah_attr.dlid);
		ah_attr[i] = ev->param.ud.ah_attr;
		qpn[i] = ev->param.ud.qp_num;
		qkey[i] = ev->param.ud.qkey;
		ck_ok(rdma_ack_cm_event(ev));
	}
	ck_assert_msg(!memcmp(&ah_attr[0].grh.dgid, &ah_attr[1].grh.dgid, 16) &&
		      ah_attr[0].dlid == ah_attr[1].dlid, "one group, two MGIDs/MLIDs");
	/* a datagram to the group from id[0] reaches id[1] */
	group_datagram(id[0], id[1], &ah_attr[0], qpn[0], qkey[0]);
	/*
	 * id[1] joins the group again, as the kernel's rdma_cm lets it (a
	 * second MULTICAST_JOIN); leaving once leaves its QP attached for
	 * the join that remains, the second leave is the last.
	 */
	ck_ok(rdma_join_multicast(id[1], SA(mc), NULL));
	ev = expect(ch, RDMA_CM_EVENT_MULTICAST_JOIN, id[1]);
	ck_assert_int_eq(ev->status, 0);
	ck_ok(rdma_ack_cm_event(ev));
	ck_ok(rdma_leave_multicast(id[1], SA(mc)));
	group_datagram(id[0], id[1], &ah_attr[0], qpn[0], qkey[0]);
	(void)qkey[1];
	(void)qpn[1];
	for (i = 0; i < 2; i++) {
		ck_ok(rdma_leave_multicast(id[i], SA(mc)));
		ck_fails_with(rdma_leave_multicast(id[i], SA(mc)), EADDRNOTAVAIL);
		rdma_destroy_qp(id[i]);
		ck_ok(rdma_destroy_id(id[i]));
	}
	rdma_destroy_event_channel(ch);
}
END_TEST

/* ---- events that wait in the daemon ------------------------------------------------ */

/*
 * Events that find a channel's socket full wait in the daemon's queue
 * (daemon/cm/event.c): 12,000 ADDR_RESOLVED fill it well past the socket
 * (and stay within the ports a uid may hold, IBVD_UID_MAX_CM_PORTS).
 * The last id's event is at the queue's tail.
 */
#define BURST_IDS	12000

static struct rdma_cm_id **burst(struct rdma_event_channel *ch)
{
	struct sockaddr_storage dst = sa_make("127.0.0.1", 7005);
	struct rdma_cm_id **ids = calloc(BURST_IDS, sizeof(*ids));
	int i;

	ck_assert_ptr_nonnull(ids);
	for (i = 0; i < BURST_IDS; i++) {
		ids[i] = new_id(ch, NULL, RDMA_PS_TCP);
		ck_ok(rdma_resolve_addr(ids[i], NULL, SA(dst), 2000));
	}
	return ids;
}

/*
 * Read ch (made non-blocking) until it is quiet: every event an
 * ADDR_RESOLVED of none but `gone`, each id once; and never readable for
 * nothing (an event of an id the library no longer has).
 */
static int drain_burst(struct rdma_event_channel *ch, struct rdma_cm_id **ids,
		       struct rdma_cm_id *gone)
{
	struct rdma_cm_event *ev;
	int n = 0;

	ck_assert_int_eq(fcntl(ch->fd, F_SETFL, O_NONBLOCK), 0);
	/*
	 * All that are due, however slowly a daemon starved of CPU sends
	 * them (cm.sh runs it at nice 19); then 300 ms of quiet for any more.
	 */
	while (readable(ch->fd, n < BURST_IDS - 1 ? ev_ms() : 300 * vt_tmul())) {
		if (rdma_get_cm_event(ch, &ev) != 0)
			ck_abort_msg("after %d events the channel is readable, but "
				     "rdma_get_cm_event: %s", n, strerror(errno));
		ck_assert_int_eq(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED);
		ck_assert_msg(ev->id != gone, "an event of the id that went");
		ck_assert_ptr_null(ev->id->context);
		ev->id->context = ids;	/* seen */
		ck_ok(rdma_ack_cm_event(ev));
		n++;
	}
	return n;
}

static void burst_free(struct rdma_cm_id **ids)
{
	int i;

	for (i = 0; i < BURST_IDS; i++)
		if (ids[i])
			ck_ok(rdma_destroy_id(ids[i]));
	free(ids);
}

/* Migrated: its event is on the new channel at once, not read from the old. */
START_TEST(migrate_queued_events)
{
	struct rdma_event_channel *ch = channel(), *ch2 = channel();
	struct rdma_cm_id **ids = burst(ch), *last = ids[BURST_IDS - 1];

	vt_sleep_ms(200);	/* every event made */
	ck_ok(rdma_migrate_id(last, ch2));
	expect_ack(ch2, RDMA_CM_EVENT_ADDR_RESOLVED, last);
	ck_assert_int_eq(drain_burst(ch, ids, last), BURST_IDS - 1);
	burst_free(ids);
	rdma_destroy_event_channel(ch2);
	rdma_destroy_event_channel(ch);
}
END_TEST

/* Destroyed: its event goes, and nobody else's. */
START_TEST(destroy_queued_events)
{
	struct rdma_event_channel *ch = channel();
	struct rdma_cm_id **ids = burst(ch), *last = ids[BURST_IDS - 1];

	vt_sleep_ms(200);
	ck_ok(rdma_destroy_id(last));
	ids[BURST_IDS - 1] = NULL;
	ck_assert_int_eq(drain_burst(ch, ids, last), BURST_IDS - 1);
	burst_free(ids);
	rdma_destroy_event_channel(ch);
}
END_TEST

/* Whether a thread's done flag is set within ev_ms(). */
static bool done_in_time(volatile int *done)
{
	long t0 = vt_now_ms();

	while (!__atomic_load_n(done, __ATOMIC_SEQ_CST) && vt_now_ms() - t0 < ev_ms())
		vt_sleep_ms(5);
	return __atomic_load_n(done, __ATOMIC_SEQ_CST);
}

/*
 * Migrated onto a channel another thread already waits on: the daemon
 * sends the moved event there before rdma_migrate_id returns, and the
 * waiting thread must get it, not drop it as an unknown id's.
 */
struct waiter {
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	volatile int done;
	int ret;
};

static void *wait_thread(void *arg)
{
	struct waiter *w = arg;

	w->ret = rdma_get_cm_event(w->ch, &w->ev);
	__atomic_store_n(&w->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

START_TEST(migrate_to_waiting_channel)
{
	struct rdma_event_channel *ch = channel();
	struct waiter w = { .ch = channel() };
	struct rdma_cm_id **ids = burst(ch), *last = ids[BURST_IDS - 1];
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, wait_thread, &w), 0);
	vt_sleep_ms(200);	/* every event made; the thread waits */
	ck_ok(rdma_migrate_id(last, w.ch));
	ck_assert_msg(done_in_time(&w.done),
		      "the thread waiting on the new channel got nothing in %d ms",
		      ev_ms());
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(w.ret, 0);
	ck_assert_int_eq(w.ev->event, RDMA_CM_EVENT_ADDR_RESOLVED);
	ck_assert_ptr_eq(w.ev->id, last);
	ck_ok(rdma_ack_cm_event(w.ev));
	ck_assert_int_eq(drain_burst(ch, ids, last), BURST_IDS - 1);
	burst_free(ids);
	rdma_destroy_event_channel(w.ch);
	rdma_destroy_event_channel(ch);
}
END_TEST

/*
 * A thread holds an event of X and reads the channel again before it
 * acks (rdma-core allows it); another migrates X meanwhile.  The reader
 * gets Y's event and acks X's, and then the migration ends.
 */
struct migrate_arg {
	struct rdma_cm_id *id;
	struct rdma_event_channel *to;
	volatile int done;
	int ret;
};

static void *migrate_thread(void *arg)
{
	struct migrate_arg *m = arg;

	m->ret = rdma_migrate_id(m->id, m->to);
	__atomic_store_n(&m->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

START_TEST(migrate_while_event_held)
{
	struct rdma_event_channel *ch = channel();
	struct sockaddr_storage dst = sa_make("127.0.0.1", 7005);
	struct migrate_arg m = { .to = channel() };
	struct rdma_cm_id *y = new_id(ch, NULL, RDMA_PS_TCP);
	struct rdma_cm_event *ex;
	pthread_t t;

	m.id = new_id(ch, NULL, RDMA_PS_TCP);
	ck_ok(rdma_resolve_addr(m.id, NULL, SA(dst), 2000));
	ex = expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, m.id);
	ck_assert_int_eq(pthread_create(&t, NULL, migrate_thread, &m), 0);
	vt_sleep_ms(200);
	ck_assert_msg(!__atomic_load_n(&m.done, __ATOMIC_SEQ_CST),
		      "rdma_migrate_id returned while an event was not acked");
	ck_ok(rdma_resolve_addr(y, NULL, SA(dst), 2000));
	/* a deadlock would hang here: the check timeout ends it */
	expect_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED, y);
	ck_ok(rdma_ack_cm_event(ex));
	ck_assert_msg(done_in_time(&m.done),
		      "rdma_migrate_id still blocked %d ms after the ack", ev_ms());
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(m.ret, 0);
	ck_assert_ptr_eq(m.id->channel, m.to);
	ck_ok(rdma_destroy_id(m.id));
	ck_ok(rdma_destroy_id(y));
	rdma_destroy_event_channel(m.to);
	rdma_destroy_event_channel(ch);
}
END_TEST

/* ---- the suite ---------------------------------------------------------------------- */

struct test {
	const char *name;
	const TTest *fn;
	bool asked_only;	/* cm.sh runs it alone, the daemon slowed */
};

static Suite *api_suite(int argc, char **argv)
{
#define T(f)	{ #f, f, false }
#define T_ALONE(f)	{ #f, f, true }
	const struct test tests[] = {
		T(channel_nonblocking), T(channel_eintr),
		T(create_id_port_spaces), T(create_id_errors), T(sync_mode_resolve),
		T(null_arguments), T(event_str), T(devices),
		T(bind_port0_and_conflicts), T(two_listeners), T(loopback_listener_is_wildcard),
		T(loopback_port_is_wildcard_port), T(listener_among_bound_ids),
		T(resolve_local_addresses), T(resolve_unreachable4), T(resolve_unreachable6),
		T(resolve_refused_keeps_addresses),
		T(getaddrinfo_api),
		T(not_an_id),
		T(connect_addresses_and_data), T(notify), T(disconnect_listener), T(id_pd), T(id_pd_goes_with_last_id), T(fork_child_cm), T(id_pd_freed_before_events), T(ack_timeout_passive), T(connect_ipv6), T(connect_params),
		T(disconnect_timewait), T(disconnect_timewait_owed),
		T(disconnect_answered_by_destroy), T(disconnect_peer_dies),
		T_ALONE(disconnect_unanswered), T_ALONE(disconnect_device_removed),
		T(connect_no_listener), T(ib_path_option),
		T(reject_private_data), T(accept_private_data_rejects), T(reject_ece), T(reject_after_accept), T(disconnect_after_accept),
		T(listen_backlog), T(connect_app_qp), T(init_qp_attr_before_a_request), T(init_qp_attr_after_the_end),
		T(reply_confirmed_by_the_daemon),
		T(reply_to_a_qp_in_error), T(disconnect_before_reading_the_reply),
		T(qp_destroyed_before_the_reply),
		T(sync_mode_connect),
		T(destroy_waits_for_ack), T(destroyed_under_waiter),
		T(get_event_after_destroy), T(destroyed_ids_events_gone),
		T(migrate), T(migrate_to_private_channel), T(migrate_pending_event), T(migrate_listener_pending),
		T(migrate_connected), T_ALONE(migrate_queued_events),
		T_ALONE(destroy_queued_events), T_ALONE(migrate_to_waiting_channel), T(migrate_while_event_held), T(set_option),
		T(ud_sidr), T(multicast), T(ps_ib_ud), T(xrc_connect), T(listener_qp_type),
		T(passive_ep_pd), T(ep_route_and_connect_data), T(af_ib),
	};
#undef T
#undef T_ALONE
	Suite *s = suite_create("cmapi");
	TCase *tc = tcase_create("cm");
	unsigned int i;
	int j, n = 0;

	tcase_set_timeout(tc, 60 * vt_tmul());
	for (i = 0; i < ARRAY_SIZE(tests); i++) {
		bool want = argc == 0 && !tests[i].asked_only;

		for (j = 0; j < argc; j++)
			want |= !strcmp(argv[j], tests[i].name);
		if (want) {
			tcase_add_test(tc, tests[i].fn);
			n++;
		}
	}
	if (!n) {
		fprintf(stderr, "cmapi-helper: no such test\n");
		exit(2);
	}
	suite_add_tcase(s, tc);
	return s;
}

/* ---- two-process roles (cm.sh) ---------------------------------------------------- */

static void put_info(const char *dir, const char *name, struct rdma_cm_id *id)
{
	char path[4096], tmp[4200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.info", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f) {
		perror(tmp);
		exit(1);
	}
	fprintf(f, "pid=%d qpn=%u sport=%u dport=%u\n", (int)getpid(), id->qp->qp_num,
		src_port(id), dst_port(id));
	fclose(f);
	chmod(tmp, 0644);
	if (rename(tmp, path)) {
		perror(path);
		exit(1);
	}
}

#define PEER_FAIL(...) do { fprintf(stderr, "cmapi-helper peer: " __VA_ARGS__); \
	fputc('\n', stderr); exit(1); } while (0)

static struct rdma_cm_event *peer_event(struct rdma_event_channel *ch, int ms)
{
	struct rdma_cm_event *ev;

	if (!readable(ch->fd, ms))
		PEER_FAIL("no CM event within %d ms", ms);
	if (rdma_get_cm_event(ch, &ev))
		PEER_FAIL("rdma_get_cm_event: %s", strerror(errno));
	return ev;
}

/*
 * "post": one receive on the connection once it is up, which makes the
 * library fetch the QP's direct rings (the daemon makes their file then).
 */
static struct ibv_mr *peer_post_recv(struct rdma_cm_id *conn)
{
	static char buf[64];
	struct ibv_mr *mr = rdma_reg_msgs(conn, buf, sizeof(buf));

	if (!mr || rdma_post_recv(conn, NULL, buf, sizeof(buf), mr))
		PEER_FAIL("reg/post_recv: %s", strerror(errno));
	printf("posted a receive\n");
	return mr;
}

static unsigned int qp_timeout(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;

	if (ibv_query_qp(qp, &a, IBV_QP_TIMEOUT, &init))
		PEER_FAIL("ibv_query_qp: %s", strerror(errno));
	return a.timeout;
}

static int peer(int argc, char **argv)
{
	bool post = argc > 0 && !strcmp(argv[argc - 1], "post");
	bool server;
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp = { .initiator_depth = 1, .responder_resources = 1,
				      .retry_count = 7, .rnr_retry_count = 7 };
	struct ibv_qp_init_attr qia = qp_attr(IBV_QPT_RC);
	struct rdma_cm_id *id, *conn;
	struct rdma_cm_event *ev;
	struct sockaddr_storage ss;
	struct ibv_mr *mr = NULL;
	const char *dir;
	long t0;

	argc -= post;
	server = argc == 3 && !strcmp(argv[0], "listen");
	if (!(server || (argc == 4 && !strcmp(argv[0], "connect"))))
		PEER_FAIL("usage: peer listen PORT DIR [post] | peer connect HOST PORT DIR [post]");
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		PEER_FAIL("channel/id: %s", strerror(errno));
	if (server) {
		dir = argv[2];
		ss = sa_make("0.0.0.0", (uint16_t)atoi(argv[1]));
		if (rdma_bind_addr(id, SA(ss)) || rdma_listen(id, 4))
			PEER_FAIL("bind/listen: %s", strerror(errno));
		printf("listening on port %u\n", src_port(id));
		ev = peer_event(ch, 600000);
		if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST)
			PEER_FAIL("got %s", rdma_event_str(ev->event));
		conn = ev->id;
		rdma_ack_cm_event(ev);
		if (rdma_create_qp(conn, NULL, &qia) || rdma_accept(conn, &cp))
			PEER_FAIL("create_qp/accept: %s", strerror(errno));
	} else {
		dir = argv[3];
		ss = sa_make(argv[1], (uint16_t)atoi(argv[2]));
		conn = id;
		if (getenv("CMAPI_ACK_TIMEOUT")) {
			uint8_t t = (uint8_t)atoi(getenv("CMAPI_ACK_TIMEOUT"));

			if (rdma_set_option(id, RDMA_OPTION_ID,
					    RDMA_OPTION_ID_ACK_TIMEOUT, &t, sizeof(t)))
				PEER_FAIL("ACK_TIMEOUT: %s", strerror(errno));
		}
		if (rdma_resolve_addr(id, NULL, SA(ss), 2000))
			PEER_FAIL("resolve_addr: %s", strerror(errno));
		ev = peer_event(ch, ev_ms());
		if (ev->event != RDMA_CM_EVENT_ADDR_RESOLVED)
			PEER_FAIL("got %s", rdma_event_str(ev->event));
		rdma_ack_cm_event(ev);
		if (rdma_resolve_route(id, 2000))
			PEER_FAIL("resolve_route: %s", strerror(errno));
		ev = peer_event(ch, ev_ms());
		if (ev->event != RDMA_CM_EVENT_ROUTE_RESOLVED)
			PEER_FAIL("got %s", rdma_event_str(ev->event));
		rdma_ack_cm_event(ev);
		if (rdma_create_qp(id, NULL, &qia) || rdma_connect(id, &cp))
			PEER_FAIL("create_qp/connect: %s", strerror(errno));
	}
	ev = peer_event(ch, ev_ms());
	if (ev->event != RDMA_CM_EVENT_ESTABLISHED)
		PEER_FAIL("got %s (status %d), want ESTABLISHED", rdma_event_str(ev->event),
			  ev->status);
	rdma_ack_cm_event(ev);
	if (post)
		mr = peer_post_recv(conn);
	printf("established: qpn %u sport %u dport %u timeout %u\n",
	       conn->qp->qp_num, src_port(conn), dst_port(conn), qp_timeout(conn->qp));
	put_info(dir, server ? "listen" : "connect", conn);

	/*
	 * until the connection ends: the peer dies, or the daemon does; or,
	 * CMAPI_DISCONNECT set, we end it, and the time printed is our
	 * DISCONNECTED's, which waits for the peer's answer (its DREP)
	 */
	t0 = vt_now_ms();
	if (getenv("CMAPI_DISCONNECT") && rdma_disconnect(conn))
		PEER_FAIL("rdma_disconnect: %s", strerror(errno));
	ev = peer_event(ch, 600000);
	printf("event: %s status %d after %ld ms\n", rdma_event_str(ev->event), ev->status,
	       vt_now_ms() - t0);
	rdma_ack_cm_event(ev);
	/*
	 * CMAPI_TIMEWAIT=MS: the peer ended it, so TIMEWAIT_EXIT waits for
	 * our own rdma_disconnect (the DREP), as on the kernel's rdma_cm:
	 * nothing in MS (longer than the daemon's timewait), then it.
	 */
	if (getenv("CMAPI_TIMEWAIT")) {
		if (readable(ch->fd, atoi(getenv("CMAPI_TIMEWAIT")))) {
			ev = peer_event(ch, 0);
			printf("before rdma_disconnect: %s\n", rdma_event_str(ev->event));
			rdma_ack_cm_event(ev);
		} else {
			printf("before rdma_disconnect: quiet\n");
		}
		rdma_disconnect(conn);
		ev = peer_event(ch, ev_ms());
		printf("after rdma_disconnect: %s\n", rdma_event_str(ev->event));
		rdma_ack_cm_event(ev);
	}
	/* the library and the daemon must still be usable for teardown
	 * (the daemon may be gone: DEVICE_REMOVAL) */
	rdma_disconnect(conn);
	if (mr)
		rdma_dereg_mr(mr);
	rdma_destroy_qp(conn);
	rdma_destroy_id(conn);
	if (conn != id)
		rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	printf("done\n");
	return 0;
}

/* A request left unanswered, then what becomes of it. */
static int peer_hold(const char *port, bool accept)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_storage ss = sa_make("0.0.0.0", (uint16_t)atoi(port));
	struct rdma_conn_param cp = { .qp_num = 0x5678 };
	struct rdma_cm_id *id, *child;
	struct rdma_cm_event *ev;
	long t0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(id, SA(ss)) || rdma_listen(id, 4))
		PEER_FAIL("listen: %s", strerror(errno));
	printf("listening on port %u\n", src_port(id));
	ev = peer_event(ch, 600000);
	printf("event: %s\n", rdma_event_str(ev->event));
	if (accept && (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST ||
		       rdma_accept(ev->id, &cp)))
		PEER_FAIL("accept: %s", strerror(errno));
	t0 = vt_now_ms();
	rdma_ack_cm_event(ev);
	ev = peer_event(ch, 600000);
	printf("event: %s status %d after %ld ms\n", rdma_event_str(ev->event),
	       ev->status, vt_now_ms() - t0);
	child = ev->id;
	rdma_ack_cm_event(ev);
	if (child != id)
		rdma_destroy_id(child);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}

/* A new id on ch, its address and route to host:port resolved. */
static struct rdma_cm_id *peer_resolved(struct rdma_event_channel *ch,
					const char *host, const char *port)
{
	struct sockaddr_storage ss = sa_make(host, (uint16_t)atoi(port));
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	int i;

	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(id, NULL, SA(ss), 2000))
		PEER_FAIL("resolve_addr: %s", strerror(errno));
	for (i = 0; i < 2; i++) {
		ev = peer_event(ch, ev_ms());
		if (ev->event != (i ? RDMA_CM_EVENT_ROUTE_RESOLVED :
				      RDMA_CM_EVENT_ADDR_RESOLVED))
			PEER_FAIL("got %s", rdma_event_str(ev->event));
		rdma_ack_cm_event(ev);
		if (!i && rdma_resolve_route(id, 2000))
			PEER_FAIL("resolve_route: %s", strerror(errno));
	}
	return id;
}

/* A connect that never confirms a reply (no QP, no rdma_establish). */
static int peer_await(const char *host, const char *port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp = { .qp_num = 0x4321 };
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	bool more = true;
	long t0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	id = peer_resolved(ch, host, port);
	/* before the request: the daemon's timer cannot start earlier */
	t0 = vt_now_ms();
	if (rdma_connect(id, &cp))
		PEER_FAIL("connect: %s", strerror(errno));
	while (more) {
		ev = peer_event(ch, 600000);
		printf("event: %s status %d after %ld ms\n",
		       rdma_event_str(ev->event), ev->status, vt_now_ms() - t0);
		more = ev->event == RDMA_CM_EVENT_CONNECT_RESPONSE;
		rdma_ack_cm_event(ev);
	}
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}

/* A connect given up before any answer: the id destroyed ms later. */
static int peer_abandon(const char *host, const char *port, const char *ms)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp = { .qp_num = 0x4321, .retry_count = 7,
				      .rnr_retry_count = 7 };
	struct rdma_cm_id *id;

	setvbuf(stdout, NULL, _IOLBF, 0);
	id = peer_resolved(ch, host, port);
	if (rdma_connect(id, &cp))
		PEER_FAIL("connect: %s", strerror(errno));
	vt_sleep_ms(atoi(ms));
	if (rdma_destroy_id(id))
		PEER_FAIL("destroy_id: %s", strerror(errno));
	printf("abandoned\n");
	rdma_destroy_event_channel(ch);
	return 0;
}

/*
 * A listener on two ports that reads no event while others connect and
 * give up, until the script says they are done (gofile appears), then
 * takes what came: its session must still be there (no DEVICE_REMOVAL,
 * a new id works).  A file, not a fixed sleep: the floods take 1-10 s
 * depending on the machine.
 */
static int peer_deaf(const char *port1, const char *port2, const char *gofile)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	const char *ports[2] = { port1, port2 };
	unsigned int requests = 0, rejected = 0, other = 0, i;
	struct rdma_cm_id *id[2], *probe;
	struct rdma_cm_event *ev;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 0; i < 2; i++) {
		struct sockaddr_storage ss = sa_make("0.0.0.0",
						     (uint16_t)atoi(ports[i]));

		if (!ch || rdma_create_id(ch, &id[i], NULL, RDMA_PS_TCP) ||
		    rdma_bind_addr(id[i], SA(ss)) || rdma_listen(id[i], 0))
			PEER_FAIL("listen: %s", strerror(errno));
	}
	printf("listening on port %u\n", src_port(id[0]));
	for (i = 0; access(gofile, F_OK); i++) {
		if (i == 120000)
			PEER_FAIL("no %s after 10 minutes", gofile);
		vt_sleep_ms(5);
	}
	while (readable(ch->fd, 500)) {
		if (rdma_get_cm_event(ch, &ev))
			PEER_FAIL("rdma_get_cm_event: %s", strerror(errno));
		if (ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL)
			PEER_FAIL("DEVICE_REMOVAL after %u requests: the session was closed",
				  requests);
		requests += ev->event == RDMA_CM_EVENT_CONNECT_REQUEST;
		rejected += ev->event == RDMA_CM_EVENT_REJECTED;
		other += ev->event != RDMA_CM_EVENT_CONNECT_REQUEST &&
			 ev->event != RDMA_CM_EVENT_REJECTED;
		rdma_ack_cm_event(ev);
	}
	if (rdma_create_id(ch, &probe, NULL, RDMA_PS_TCP))
		PEER_FAIL("a new id after the flood: %s", strerror(errno));
	rdma_destroy_id(probe);
	printf("deaf: %u requests, %u rejected, %u other events; alive\n",
	       requests, rejected, other);
	for (i = 0; i < 2; i++)
		rdma_destroy_id(id[i]);
	rdma_destroy_event_channel(ch);
	return 0;
}

/* n connects to host:port, each given up at once (its id destroyed). */
static int peer_flood(const char *host, const char *port, const char *n)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_storage ss = sa_make(host, (uint16_t)atoi(port));
	struct rdma_conn_param cp = { .qp_num = 0x4321 };
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	int i, k, sent = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 0; ch && i < atoi(n); i++) {
		if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
		    rdma_resolve_addr(id, NULL, SA(ss), 2000))
			PEER_FAIL("resolve_addr: %s", strerror(errno));
		for (k = 0; k < 2; k++) {
			ev = peer_event(ch, ev_ms());
			rdma_ack_cm_event(ev);
			if (!k && rdma_resolve_route(id, 2000))
				PEER_FAIL("resolve_route: %s", strerror(errno));
		}
		sent += rdma_connect(id, &cp) == 0;
		if (rdma_destroy_id(id))
			PEER_FAIL("destroy_id: %s", strerror(errno));
	}
	printf("flood: %d connects\n", sent);
	if (ch)
		rdma_destroy_event_channel(ch);
	return 0;
}

/*
 * A listener on port that accepts every request and reads its events at
 * once, until n connections have come and gone (DISCONNECTED); it fails
 * on DEVICE_REMOVAL (its session closed), and takes one more connection
 * at the end (its listener still there).
 */
static int peer_accept_all(const char *port, const char *n)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_storage ss = sa_make("0.0.0.0", (uint16_t)atoi(port));
	unsigned int want = (unsigned int)atoi(n) + 1, est = 0, gone = 0;
	struct rdma_conn_param cp = { .responder_resources = 1,
				      .initiator_depth = 1 };
	struct rdma_cm_id *l, *last = NULL;
	struct rdma_cm_event *ev;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!ch || rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(l, SA(ss)) || rdma_listen(l, 128))
		PEER_FAIL("listen: %s", strerror(errno));
	printf("listening on port %u\n", src_port(l));
	while (est < want) {
		struct rdma_cm_id *id;
		enum rdma_cm_event_type type;

		/* a whole peer's worth of ends may take a while to come */
		ev = peer_event(ch, 4 * ev_ms());
		id = ev->id;
		type = ev->event;
		rdma_ack_cm_event(ev);
		switch (type) {
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			/* no QP: parameters, or librdmacm says EINVAL */
			if (rdma_accept(id, &cp))
				PEER_FAIL("accept: %s", strerror(errno));
			break;
		case RDMA_CM_EVENT_ESTABLISHED:
			last = id;
			if (++est == want - 1)
				printf("established %u\n", est);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
			gone++;
			rdma_destroy_id(id);
			if (gone == want - 1)
				printf("disconnected %u\n", gone);
			break;
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			PEER_FAIL("DEVICE_REMOVAL after %u connections, %u gone: the session was closed",
				  est, gone);
		default:
			PEER_FAIL("%s", rdma_event_str(type));
		}
	}
	printf("accept-all: %u connections, %u gone; alive\n", est, gone);
	rdma_destroy_id(last);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
	return 0;
}

/* n connections to host:port (no QPs), then an exit with all of them up. */
static int peer_connect_exit(const char *host, const char *port, const char *n)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_storage ss = sa_make(host, (uint16_t)atoi(port));
	struct rdma_conn_param cp = { .qp_num = 0x4321, .retry_count = 7 };
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	int i, k;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 0; ch && i < atoi(n); i++) {
		if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
		    rdma_resolve_addr(id, NULL, SA(ss), 2000))
			PEER_FAIL("resolve_addr: %s", strerror(errno));
		for (k = 0; k < 2; k++) {
			rdma_ack_cm_event(peer_event(ch, ev_ms()));
			if (!k && rdma_resolve_route(id, 2000))
				PEER_FAIL("resolve_route: %s", strerror(errno));
		}
		if (rdma_connect(id, &cp))
			PEER_FAIL("connect: %s", strerror(errno));
		ev = peer_event(ch, ev_ms());
		if (ev->event != RDMA_CM_EVENT_CONNECT_RESPONSE)
			PEER_FAIL("connection %d: %s status %d", i,
				  rdma_event_str(ev->event), ev->status);
		rdma_ack_cm_event(ev);
		if (rdma_establish(id))
			PEER_FAIL("establish: %s", strerror(errno));
		/* how far a slow run got, should it be killed */
		if ((i + 1) % 1000 == 0)
			printf("connect-exit: %d up\n", i + 1);
	}
	printf("connect-exit: %d connections up\n", i);
	_exit(0);	/* all at once: the daemon ends them */
}

static int rsocket_probe(void)
{
	int fd = rsocket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0) {
		printf("rsocket: %s\n", strerror(errno));
		return 0;
	}
	printf("rsocket: ok\n");
	rclose(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "peer") &&
	    !strcmp(argv[2], "hold"))
		return peer_hold(argv[3], argc == 5 && !strcmp(argv[4], "accept"));
	if (argc == 5 && !strcmp(argv[1], "peer") && !strcmp(argv[2], "await"))
		return peer_await(argv[3], argv[4]);
	if (argc == 6 && !strcmp(argv[1], "peer") && !strcmp(argv[2], "abandon"))
		return peer_abandon(argv[3], argv[4], argv[5]);
	if (argc == 6 && !strcmp(argv[1], "peer") && !strcmp(argv[2], "deaf"))
		return peer_deaf(argv[3], argv[4], argv[5]);
	if (argc == 6 && !strcmp(argv[1], "peer") && !strcmp(argv[2], "flood"))
		return peer_flood(argv[3], argv[4], argv[5]);
	if (argc == 5 && !strcmp(argv[1], "peer") && !strcmp(argv[2], "accept-all"))
		return peer_accept_all(argv[3], argv[4]);
	if (argc == 6 && !strcmp(argv[1], "peer") && !strcmp(argv[2], "connect-exit"))
		return peer_connect_exit(argv[3], argv[4], argv[5]);
	if (argc > 1 && !strcmp(argv[1], "peer"))
		return peer(argc - 2, argv + 2);
	if (argc > 1 && !strcmp(argv[1], "rsocket-probe"))
		return rsocket_probe();
	return check_run(api_suite(argc - 1, argv + 1), CK_VERBOSE);
}
