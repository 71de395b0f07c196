/*
 * cm-wire: librdmacm's corner cases with the two ends in different
 * processes, so that the server and the client can run on different
 * implementations (the kernel's rdma_cm over rxe in tests/interop/rxe's
 * guest, ibverbsd on the host) and the CM's MADs cross the wire.  One
 * process is one end of one case; it prints a line per call and per
 * event, what both implementations should agree on (types, statuses,
 * private-data lengths and a sum of their bytes, the connection
 * parameters the other end's event carries, ECE).  Linked against
 * librdmacm.so.1 only.  tests/interop/rxe --cm-wire runs every case with
 * the server and the client on each side, and diffs.
 *
 * usage: cm-wire list                      the cases: NUMBER NAME PS
 *        cm-wire server|client CASE ADDR PORT
 *   ADDR  the server's address (the server binds it, the client
 *         connects to it);  PS in the list is the port space the server
 *         listens in (TCP, UDP) or "-" for a case with no server.
 * Every wait has a time limit; the process ends itself after 200 s.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "probe-util.h"

#define STEP(name, expr) PROBE_STEP(36, name, expr)

static struct rdma_event_channel *chan;
static struct sockaddr_in peer;
static time_t start;

/* a private-data pattern of LEN bytes, the same on both ends */
static const void *pattern(int len)
{
	static unsigned char pd[256];

	for (int i = 0; i < len && i < (int)sizeof(pd); i++)
		pd[i] = (unsigned char)(i * 7 + 1);
	return pd;
}

/* a sum of the bytes, so that content and not just length compares */
static unsigned sum(const void *p, int len)
{
	const unsigned char *b = p;
	unsigned s = 0;

	for (int i = 0; p && i < len; i++)
		s = s * 31 + b[i];
	return s;
}

static void print_conn(const struct rdma_conn_param *c)
{
	printf("    conn rr=%u id=%u fc=%u retry=%u rnr=%u srq=%u pdsum(%u)=%08x\n",
	       c->responder_resources, c->initiator_depth, c->flow_control,
	       c->retry_count, c->rnr_retry_count, c->srq, c->private_data_len,
	       sum(c->private_data, c->private_data_len));
}

/* the next event within SECS, printed; its type or -1; *idp its id */
static int event(int secs, struct rdma_cm_id **idp, int show_time)
{
	struct pollfd pfd = { .fd = chan->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	int type;

	if (poll(&pfd, 1, secs * 1000) <= 0) {
		printf("  event: none within %d s\n", secs);
		return -1;
	}
	if (rdma_get_cm_event(chan, &ev)) {
		printf("  event: get failed %s\n", strerrorname_np(errno));
		return -1;
	}
	printf("  event: %s status=%d", rdma_event_str(ev->event), ev->status);
	if (show_time)	/* the kernel's CM gives up after about a minute */
		printf(" after %s s", time(NULL) - start < 30 ? "<30" :
		       time(NULL) - start < 100 ? "30..100" : ">100");
	printf("\n");
	if (ev->id->ps == RDMA_PS_UDP)
		printf("    ud pdsum(%u)=%08x qkey=%s qpn=%s ah_port=%u\n",
		       ev->param.ud.private_data_len,
		       sum(ev->param.ud.private_data, ev->param.ud.private_data_len),
		       ev->param.ud.qkey ? "set" : "0", ev->param.ud.qp_num ? "set" : "0",
		       ev->param.ud.ah_attr.port_num);
	else if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST ||
		 ev->event == RDMA_CM_EVENT_ESTABLISHED ||
		 ev->event == RDMA_CM_EVENT_CONNECT_RESPONSE ||
		 ev->event == RDMA_CM_EVENT_REJECTED)
		print_conn(&ev->param.conn);
	type = ev->event;
	if (idp)
		*idp = ev->id;
	rdma_ack_cm_event(ev);
	return type;
}

static void drain(int secs)
{
	while (event(secs, NULL, 0) >= 0)
		;
}

static int make_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr a = { .qp_type = id->ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };

	return rdma_create_qp(id, NULL, &a);
}

/* ---- the server's side ---- */

static struct rdma_cm_id *listener(enum rdma_port_space ps)
{
	struct rdma_cm_id *id;

	if (rdma_create_id(chan, &id, NULL, ps))
		return NULL;
	STEP("rdma_bind_addr", rdma_bind_addr(id, (struct sockaddr *)&peer));
	STEP("rdma_listen", rdma_listen(id, 4));
	return id;
}

/* a CONNECT_REQUEST within 60 s, its id with a QP; NULL if none */
static struct rdma_cm_id *request(void)
{
	struct rdma_cm_id *req = NULL;

	if (event(60, &req, 0) != RDMA_CM_EVENT_CONNECT_REQUEST)
		return NULL;
	STEP("rdma_create_qp(request)", make_qp(req));
	return req;
}

static struct rdma_conn_param conn(int pdlen)
{
	struct rdma_conn_param c = { .responder_resources = 1, .initiator_depth = 1,
				     .retry_count = 3, .rnr_retry_count = 3,
				     .private_data = pattern(pdlen), .private_data_len = pdlen };
	return c;
}

/* ---- the client's side ---- */

static struct rdma_cm_id *client(enum rdma_port_space ps)
{
	struct rdma_cm_id *id;

	if (rdma_create_id(chan, &id, NULL, ps))
		return NULL;
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&peer, 5000) ||
	    event(10, NULL, 0) != RDMA_CM_EVENT_ADDR_RESOLVED ||
	    rdma_resolve_route(id, 5000) ||
	    event(10, NULL, 0) != RDMA_CM_EVENT_ROUTE_RESOLVED) {
		printf("  client setup failed\n");
		return id;
	}
	make_qp(id);
	return id;
}

/* ---- the cases: each a server and a client function ---- */

/*
 * REQ 56, REP 196 and one over.  A failed rdma_accept is not retried:
 * rdma-core moves the QP to RTR before the kernel refuses the length,
 * and a second try fails on that QP (RTR to RTR).
 */
static void s_accept(int pdlen)
{
	struct rdma_cm_id *req;
	struct rdma_conn_param c = conn(pdlen);
	char what[40];

	listener(RDMA_PS_TCP);
	if (!(req = request()))
		return;
	snprintf(what, sizeof(what), "rdma_accept(pdata %d)", pdlen);
	STEP(what, rdma_accept(req, &c));
	event(20, NULL, 0);
	drain(3);
}

static void s_pdata(void) { s_accept(196); }
static void s_pdata_over(void) { s_accept(197); }

static void c_pdata(void)
{
	struct rdma_cm_id *id = client(RDMA_PS_TCP);
	struct rdma_conn_param c = conn(57);

	STEP("rdma_connect(pdata 57)", rdma_connect(id, &c));
	c.private_data_len = 56;
	STEP("rdma_connect(pdata 56)", rdma_connect(id, &c));
	event(30, NULL, 0);
	drain(3);
}

static void s_reject(void)		/* REJ 148 and one over */
{
	struct rdma_cm_id *req;

	listener(RDMA_PS_TCP);
	if (!(req = request()))
		return;
	STEP("rdma_reject(pdata 149)", rdma_reject(req, pattern(149), 149));
	STEP("rdma_reject(pdata 148)", rdma_reject(req, pattern(148), 148));
	drain(3);
}

static void c_connect(void)
{
	struct rdma_cm_id *id = client(RDMA_PS_TCP);
	struct rdma_conn_param c = conn(0);

	STEP("rdma_connect", rdma_connect(id, &c));
	drain(6);
}

static void s_none(void)
{
	printf("  (no server)\n");
}

/* both ends established; then what WHO (1 server, 2 client, 3 both) does */
static struct rdma_cm_id *s_established(void)
{
	struct rdma_cm_id *req;
	struct rdma_conn_param c = conn(0);

	listener(RDMA_PS_TCP);
	if (!(req = request()))
		return NULL;
	STEP("rdma_accept", rdma_accept(req, &c));
	if (event(20, NULL, 0) != RDMA_CM_EVENT_ESTABLISHED)
		return NULL;
	return req;
}

static struct rdma_cm_id *c_established(void)
{
	struct rdma_cm_id *id = client(RDMA_PS_TCP);
	struct rdma_conn_param c = conn(0);

	STEP("rdma_connect", rdma_connect(id, &c));
	if (event(30, NULL, 0) != RDMA_CM_EVENT_ESTABLISHED)
		return NULL;
	return id;
}

static void disconnect_then_drain(struct rdma_cm_id *id, int now)
{
	if (!id)
		return;
	if (now) {
		sleep(2);	/* the other end idle, its ESTABLISHED seen */
		STEP("rdma_disconnect", rdma_disconnect(id));
	}
	if (event(30, NULL, 0) == RDMA_CM_EVENT_DISCONNECTED && !now)
		STEP("rdma_disconnect(after DISCONNECTED)", rdma_disconnect(id));
	drain(5);
	STEP("rdma_destroy_qp+id", (rdma_destroy_qp(id), rdma_destroy_id(id)));
}

static void s_disc_server(void) { disconnect_then_drain(s_established(), 1); }
static void c_disc_server(void) { disconnect_then_drain(c_established(), 0); }
static void s_disc_client(void) { disconnect_then_drain(s_established(), 0); }
static void c_disc_client(void) { disconnect_then_drain(c_established(), 1); }
static void s_disc_both(void) { disconnect_then_drain(s_established(), 1); }
static void c_disc_both(void) { disconnect_then_drain(c_established(), 1); }

static void s_never_accept(void)
{
	listener(RDMA_PS_TCP);
	if (!request())
		return;
	event(130, NULL, 0);
	drain(3);
}

static void c_never_accept(void)
{
	struct rdma_cm_id *id = client(RDMA_PS_TCP);
	struct rdma_conn_param c = conn(0);

	start = time(NULL);
	STEP("rdma_connect", rdma_connect(id, &c));
	event(120, NULL, 1);
}

static void s_killed(void)
{
	if (!s_established())
		return;
	sleep(2);
	printf("  SIGKILL\n");
	fflush(stdout);
	kill(getpid(), SIGKILL);
}

static void c_killed(void)
{
	struct rdma_cm_id *id = c_established();

	if (id)
		drain(30);
}

static void s_params(void)		/* the conn params the other end sees */
{
	struct rdma_cm_id *req;
	struct rdma_conn_param c = { .responder_resources = 2, .initiator_depth = 1,
				     .retry_count = 6, .rnr_retry_count = 5 };

	listener(RDMA_PS_TCP);
	if (!(req = request()))
		return;
	STEP("rdma_accept(rr 2 id 1 rnr 5)", rdma_accept(req, &c));
	event(20, NULL, 0);
	drain(3);
}

static void c_params(void)
{
	struct rdma_cm_id *id = client(RDMA_PS_TCP);
	struct rdma_conn_param c = { .responder_resources = 1, .initiator_depth = 2,
				     .retry_count = 5, .rnr_retry_count = 6 };

	STEP("rdma_connect(rr 1 id 2 retry 5 rnr 6)", rdma_connect(id, &c));
	event(30, NULL, 0);
	drain(3);
}

static void print_ece(struct rdma_cm_id *id)
{
	struct ibv_ece e = { 0 };

	STEP("rdma_get_remote_ece", rdma_get_remote_ece(id, &e));
	printf("    ece vendor=0x%x options=0x%x\n", e.vendor_id, e.options);
}

static void s_ece(void)
{
	struct rdma_cm_id *req;
	struct rdma_conn_param c = conn(0);
	struct ibv_ece e = { .vendor_id = 0x15b3, .options = 0x3 };

	listener(RDMA_PS_TCP);
	if (!(req = request()))
		return;
	print_ece(req);
	STEP("rdma_set_local_ece", rdma_set_local_ece(req, &e));
	STEP("rdma_accept", rdma_accept(req, &c));
	event(20, NULL, 0);
	drain(3);
}

static void c_ece(void)
{
	struct rdma_cm_id *id = client(RDMA_PS_TCP);
	struct rdma_conn_param c = conn(0);
	struct ibv_ece e = { .vendor_id = 0x15b3, .options = 0x7 };

	STEP("rdma_set_local_ece", rdma_set_local_ece(id, &e));
	STEP("rdma_connect", rdma_connect(id, &c));
	if (event(30, NULL, 0) == RDMA_CM_EVENT_ESTABLISHED)
		print_ece(id);
	drain(3);
}

static void s_sidr_reject(void)
{
	struct rdma_cm_id *req;

	listener(RDMA_PS_UDP);
	if (!(req = request()))
		return;
	STEP("rdma_reject(UD, pdata 136)", rdma_reject(req, pattern(136), 136));
	drain(3);
}

static void c_sidr(void)
{
	struct rdma_cm_id *id = client(RDMA_PS_UDP);
	struct rdma_conn_param c = { .private_data = pattern(181), .private_data_len = 181 };

	STEP("rdma_connect(UD, pdata 181)", rdma_connect(id, &c));
	c.private_data_len = 180;
	STEP("rdma_connect(UD, pdata 180)", rdma_connect(id, &c));
	drain(6);
}

/* SIDR REP 136 and one over, each once (a failed accept rejects) */
static void s_sidr_accept_len(int pdlen)
{
	struct rdma_cm_id *req;
	struct rdma_conn_param c = { .private_data = pattern(pdlen), .private_data_len = pdlen };
	char what[40];

	listener(RDMA_PS_UDP);
	if (!(req = request()))
		return;
	snprintf(what, sizeof(what), "rdma_accept(UD, pdata %d)", pdlen);
	STEP(what, rdma_accept(req, &c));
	drain(3);
}

static void s_sidr_accept(void) { s_sidr_accept_len(136); }
static void s_sidr_accept_over(void) { s_sidr_accept_len(137); }

static const struct probe_case {
	const char *name, *ps;
	void (*server)(void), (*client)(void);
} cases[] = {
	{ "pdata-max", "TCP", s_pdata, c_pdata },
	{ "accept-pdata-over", "TCP", s_pdata_over, c_connect },
	{ "reject-pdata", "TCP", s_reject, c_connect },
	{ "no-listener", "-", s_none, c_connect },
	{ "disconnect-server", "TCP", s_disc_server, c_disc_server },
	{ "disconnect-client", "TCP", s_disc_client, c_disc_client },
	{ "disconnect-both", "TCP", s_disc_both, c_disc_both },
	{ "never-accept", "TCP", s_never_accept, c_never_accept },
	{ "server-killed", "TCP", s_killed, c_killed },
	{ "conn-params", "TCP", s_params, c_params },
	{ "ece", "TCP", s_ece, c_ece },
	{ "sidr-reject", "UDP", s_sidr_reject, c_sidr },
	{ "sidr-accept", "UDP", s_sidr_accept, c_sidr },
	{ "sidr-accept-over", "UDP", s_sidr_accept_over, c_sidr },
	{ "sidr-no-listener", "-", s_none, c_sidr },
};
#define NCASES (int)(sizeof(cases) / sizeof(cases[0]))

int main(int argc, char **argv)
{
	int k;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && !strcmp(argv[1], "list")) {
		for (k = 0; k < NCASES; k++)
			printf("%d %s %s\n", k + 1, cases[k].name, cases[k].ps);
		return 0;
	}
	if (argc != 5 || (strcmp(argv[1], "server") && strcmp(argv[1], "client")) ||
	    (k = atoi(argv[2])) < 1 || k > NCASES) {
		fprintf(stderr, "usage: cm-wire list | cm-wire server|client CASE ADDR PORT\n");
		return 2;
	}
	peer.sin_family = AF_INET;
	peer.sin_port = htons(atoi(argv[4]));
	if (inet_pton(AF_INET, argv[3], &peer.sin_addr) != 1)
		return 2;
	alarm(200);
	chan = rdma_create_event_channel();
	if (!chan) {
		printf("  rdma_create_event_channel failed %s\n", strerrorname_np(errno));
		return 1;
	}
	if (argv[1][0] == 's')
		cases[k - 1].server();
	else
		cases[k - 1].client();
	printf("  end\n");
	return 0;
}
