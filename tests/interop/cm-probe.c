/*
 * cm-probe: what librdmacm's calls and rsockets answer in corner cases,
 * one line per step, for comparing two implementations (ours with the
 * daemon, rdma-core with the kernel's rdma_cm) line by line.  Linked
 * against librdmacm.so.1 only, so the same binary runs on either:
 * tests/interop/cm-probe.sh runs it in tests/interop/rxe's guest and
 * against the build's daemon, and diffs the two.  Every wait has a time
 * limit (a step that gets no event prints "none"), and each case runs in
 * a child of its own, killed after CM_PROBE_LIMIT seconds (default 40):
 * a call that hangs or crashes costs its case only ("killed by signal").
 *
 * usage: cm-probe ADDR PORT [NOHOST]
 *   ADDR    a local IPv4 address of an RDMA device (or 127.0.0.1)
 *   PORT    the first of ~40 ports it uses
 *   NOHOST  an address on ADDR's subnet no host answers (the no-host case)
 * CM_PROBE_CASE=N runs the Nth case only.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <infiniband/ib.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe-util.h"

static const char *addr;
static int port;

#define STEP(name, expr) PROBE_STEP(40, name, expr)

static int case_wanted, case_count;

/* is the next case the one this process runs? (announced if so) */
static int case_begin(const char *name)
{
	if (++case_count == case_wanted) {
		printf("case %s\n", name);
		return 1;
	}
	return 0;
}

static struct sockaddr_in sin_of(const char *a, int p)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons(p) };
	inet_pton(AF_INET, a, &s.sin_addr);
	return s;
}

/* the next event on CH within MS, printed; its type or -1 */
static int next_event(struct rdma_event_channel *ch, int ms, const char *who,
		      struct rdma_cm_id **idp)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	int type;

	if (poll(&pfd, 1, ms) <= 0) {
		printf("  %s event: none\n", who);
		return -1;
	}
	if (rdma_get_cm_event(ch, &ev)) {
		printf("  %s event: get failed %s\n", who, strerrorname_np(errno));
		return -1;
	}
	printf("  %s event: %s status=%d pdlen=%u\n", who, rdma_event_str(ev->event),
	       ev->status, ev->param.conn.private_data_len);
	type = ev->event;
	if (idp)
		*idp = ev->id;
	rdma_ack_cm_event(ev);
	return type;
}

static void drain(struct rdma_event_channel *ch, const char *who, int ms)
{
	while (next_event(ch, ms, who, NULL) >= 0)
		;
}

static struct ibv_qp_init_attr qp_attr(void)
{
	struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	return a;
}

/* a client id with its route resolved to ADDR:P, with a QP if QP */
static struct rdma_cm_id *client(struct rdma_event_channel *ch, int p, int qp)
{
	struct rdma_cm_id *id;
	struct sockaddr_in dst = sin_of(addr, p);
	struct ibv_qp_init_attr a = qp_attr();
	int rc;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		return NULL;
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) ||
	    next_event(ch, 3000, "c", NULL) != RDMA_CM_EVENT_ADDR_RESOLVED)
		return id;
	STEP("rdma_resolve_route", rc = rdma_resolve_route(id, 2000));
	if (rc || next_event(ch, 3000, "c", NULL) != RDMA_CM_EVENT_ROUTE_RESOLVED)
		return id;
	if (qp)
		STEP("rdma_create_qp", rdma_create_qp(id, NULL, &a));
	return id;
}

static struct rdma_cm_id *listener(struct rdma_event_channel *ch, int p)
{
	struct rdma_cm_id *id;
	struct sockaddr_in s = sin_of(addr, p);

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		return NULL;
	STEP("rdma_bind_addr(listener)", rdma_bind_addr(id, (struct sockaddr *)&s));
	STEP("rdma_listen(listener)", rdma_listen(id, 4));
	return id;
}

static void destroy(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->qp)
		rdma_destroy_qp(id);
	rdma_destroy_id(id);
}

/* ibv_modify_qp as a step: -1 and errno (it returns its errno) */
static int modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *qa, int mask)
{
	int r = ibv_modify_qp(qp, qa, mask);

	errno = r;
	return r ? -1 : 0;
}

/* rdma_init_qp_attr for INIT, RTR and RTS on id, one step each */
static void qp_attr_steps(struct rdma_cm_id *id, const char *who)
{
	struct ibv_qp_attr qa;
	char n[64];
	int mask;

	for (int st = IBV_QPS_INIT; st <= IBV_QPS_RTS; st++) {
		memset(&qa, 0, sizeof(qa));
		qa.qp_state = st;
		snprintf(n, sizeof(n), "rdma_init_qp_attr(%s, state %d)", who, st);
		STEP(n, rdma_init_qp_attr(id, &qa, &mask));
	}
}

/* a connection up to the server's CONNECT_REQUEST; *req the server's id */
static int conn_to_request(struct rdma_event_channel *sch, struct rdma_event_channel *cch,
			   int p, struct rdma_cm_id **lid, struct rdma_cm_id **cid,
			   struct rdma_cm_id **req)
{
	struct ibv_qp_init_attr a = qp_attr();
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
				      .retry_count = 3, .rnr_retry_count = 3 };

	*lid = listener(sch, p);
	*cid = client(cch, p, 1);
	*req = NULL;
	STEP("rdma_connect", rdma_connect(*cid, &cp));
	if (next_event(sch, 3000, "s", req) != RDMA_CM_EVENT_CONNECT_REQUEST)
		return -1;
	STEP("rdma_create_qp(req)", rdma_create_qp(*req, NULL, &a));
	return 0;
}

static void case_disconnect_early(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel(), *cch = rdma_create_event_channel();
	struct rdma_cm_id *lid, *cid, *req;
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1 };

	if (case_begin("disconnect-before-established (client, after connect)")) {
	lid = listener(sch, port);
	cid = client(cch, port, 1);
	STEP("rdma_connect", rdma_connect(cid, &cp));
	STEP("rdma_disconnect(client, REQ sent)", rdma_disconnect(cid));
	drain(cch, "c", 1500);
	drain(sch, "s", 500);
	destroy(cid);
	destroy(lid);

	}
	if (case_begin("disconnect-before-established (server, after accept)")) {
	if (conn_to_request(sch, cch, port + 1, &lid, &cid, &req) == 0) {
		STEP("rdma_accept", rdma_accept(req, &cp));
		STEP("rdma_disconnect(server, before RTU)", rdma_disconnect(req));
		drain(cch, "c", 1500);
		drain(sch, "s", 1500);
		destroy(req);
	}
	destroy(cid);
	destroy(lid);

	}
	if (case_begin("reject-after-accept")) {
	if (conn_to_request(sch, cch, port + 2, &lid, &cid, &req) == 0) {
		STEP("rdma_accept", rdma_accept(req, &cp));
		STEP("rdma_reject(after accept)", rdma_reject(req, NULL, 0));
		drain(cch, "c", 1500);
		drain(sch, "s", 1500);
		destroy(req);
	}
	destroy(cid);
	destroy(lid);

	}
	if (case_begin("established-then-disconnect")) {
	if (conn_to_request(sch, cch, port + 3, &lid, &cid, &req) == 0) {
		STEP("rdma_accept", rdma_accept(req, &cp));
		next_event(cch, 3000, "c", NULL);
		next_event(sch, 3000, "s", NULL);
		STEP("rdma_disconnect(client)", rdma_disconnect(cid));
		qp_attr_steps(cid, "client, disconnecting");
		STEP("rdma_disconnect(client) again", rdma_disconnect(cid));
		drain(cch, "c", 1000);
		drain(sch, "s", 1000);
		qp_attr_steps(req, "server, DISCONNECTED");
		STEP("rdma_disconnect(server) after DISCONNECTED", rdma_disconnect(req));
		destroy(req);
	}
	destroy(cid);
	destroy(lid);

	}
	if (case_begin("reject-pdata")) {
	if (conn_to_request(sch, cch, port + 4, &lid, &cid, &req) == 0) {
		char pd[256] = "x";
		STEP("rdma_reject(len 149)", rdma_reject(req, pd, 149));
		STEP("rdma_reject(len 148)", rdma_reject(req, pd, 148));
		qp_attr_steps(req, "server, rejecting");
		drain(cch, "c", 1500);
		qp_attr_steps(cid, "client, REJECTED");
		destroy(req);
	}
	destroy(cid);
	destroy(lid);

	}
	if (case_begin("accept-pdata")) {
	if (conn_to_request(sch, cch, port + 5, &lid, &cid, &req) == 0) {
		char pd[256] = "x";
		struct rdma_conn_param big = cp;
		big.private_data = pd;
		big.private_data_len = 197;
		STEP("rdma_accept(pdata 197)", rdma_accept(req, &big));
		big.private_data_len = 196;
		STEP("rdma_accept(pdata 196)", rdma_accept(req, &big));
		drain(cch, "c", 1500);
		drain(sch, "s", 500);
		destroy(req);
	}
	destroy(cid);
	destroy(lid);
	}
	rdma_destroy_event_channel(sch);
	rdma_destroy_event_channel(cch);
}

static void case_misc_ids(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel(), *ch2 = rdma_create_event_channel();
	struct rdma_cm_id *id, *id2;
	struct sockaddr_in s = sin_of(addr, port + 10);
	struct ibv_qp_attr qa;
	int mask;

	if (case_begin("init-qp-attr-before-connect")) {
	id = client(ch, port + 10, 1);
	for (int st = IBV_QPS_INIT; st <= IBV_QPS_RTS; st++) {
		char n[64];
		memset(&qa, 0, sizeof(qa));
		qa.qp_state = st;
		snprintf(n, sizeof(n), "rdma_init_qp_attr(state %d)", st);
		STEP(n, rdma_init_qp_attr(id, &qa, &mask));
		if (mask)
			printf("  mask=0x%x\n", mask);
		mask = 0;
	}
	destroy(id);

	}
	if (case_begin("ud-init-qp-attr")) {
	/* a UD id's answers, each applied to a QP of its own in turn */
	struct sockaddr_in d = sin_of(addr, port + 11);
	struct ibv_pd *pd = NULL;
	struct ibv_cq *cq = NULL;
	struct ibv_qp *qp = NULL;

	rdma_create_id(ch, &id, NULL, RDMA_PS_UDP);
	if (!rdma_resolve_addr(id, NULL, (struct sockaddr *)&d, 2000) &&
	    next_event(ch, 3000, "c", NULL) == RDMA_CM_EVENT_ADDR_RESOLVED &&
	    !rdma_resolve_route(id, 2000) &&
	    next_event(ch, 3000, "c", NULL) == RDMA_CM_EVENT_ROUTE_RESOLVED) {
		struct ibv_qp_init_attr ia = { .cap = { .max_send_wr = 1, .max_recv_wr = 1,
							.max_send_sge = 1, .max_recv_sge = 1 },
					       .qp_type = IBV_QPT_UD };

		pd = ibv_alloc_pd(id->verbs);
		cq = pd ? ibv_create_cq(id->verbs, 4, NULL, NULL, 0) : NULL;
		ia.send_cq = ia.recv_cq = cq;
		qp = cq ? ibv_create_qp(pd, &ia) : NULL;
	}
	for (int st = IBV_QPS_INIT; st <= IBV_QPS_RTS; st++) {
		char n[64];

		memset(&qa, 0, sizeof(qa));
		mask = 0;
		qa.qp_state = st;
		snprintf(n, sizeof(n), "rdma_init_qp_attr(UD, state %d)", st);
		STEP(n, rdma_init_qp_attr(id, &qa, &mask));
		printf("  mask=0x%x state=%d qkey=%s sq_psn=%u\n", mask, qa.qp_state,
		       qa.qkey ? "set" : "0", qa.sq_psn);
		if (qp) {
			snprintf(n, sizeof(n), "ibv_modify_qp(UD, state %d, that)", st);
			STEP(n, modify_qp(qp, &qa, mask));
		}
	}
	if (qp)
		ibv_destroy_qp(qp);
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
	rdma_destroy_id(id);

	}
	if (case_begin("listen-twice")) {
	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	STEP("rdma_listen(unbound, backlog 0)", rdma_listen(id, 0));
	STEP("rdma_listen again", rdma_listen(id, 0));
	STEP("rdma_bind_addr after listen", rdma_bind_addr(id, (struct sockaddr *)&s));
	rdma_destroy_id(id);
	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	STEP("rdma_bind_addr", rdma_bind_addr(id, (struct sockaddr *)&s));
	STEP("rdma_listen(backlog 0)", rdma_listen(id, 0));
	STEP("rdma_listen(backlog 5) again", rdma_listen(id, 5));
	{
		struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1 };
		STEP("rdma_accept(listener)", rdma_accept(id, &cp));
	}
	STEP("rdma_reject(listener)", rdma_reject(id, NULL, 0));
	STEP("rdma_disconnect(listener)", rdma_disconnect(id));
	STEP("rdma_get_request(listener with channel)", rdma_get_request(id, &id2));
	rdma_destroy_id(id);

	}
	if (case_begin("accept-non-request")) {
	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1 };
	STEP("rdma_accept(fresh id)", rdma_accept(id, &cp));
	STEP("rdma_reject(fresh id)", rdma_reject(id, NULL, 0));
	STEP("rdma_disconnect(fresh id)", rdma_disconnect(id));
	STEP("rdma_connect(fresh id)", rdma_connect(id, &cp));
	STEP("rdma_resolve_route(fresh id)", rdma_resolve_route(id, 1000));
	rdma_destroy_id(id);
	id = client(ch, port + 11, 1);
	STEP("rdma_accept(route-resolved id)", rdma_accept(id, &cp));
	destroy(id);

	}
	if (case_begin("get-request-sync")) {
	rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP);
	s = sin_of(addr, port + 12);
	STEP("rdma_bind_addr(sync)", rdma_bind_addr(id, (struct sockaddr *)&s));
	STEP("rdma_listen(sync)", rdma_listen(id, 1));
	STEP("rdma_get_request(sync) nonblocking", ({ fcntl(id->channel->fd, F_SETFL, O_NONBLOCK); rdma_get_request(id, &id2); }));
	rdma_destroy_id(id);

	}
	if (case_begin("migrate")) {
	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	STEP("rdma_migrate_id(to ch2)", rdma_migrate_id(id, ch2));
	STEP("id->channel == ch2", id->channel == ch2);
	STEP("rdma_migrate_id(to NULL)", rdma_migrate_id(id, NULL));
	STEP("id->channel != NULL", id->channel != NULL);
	STEP("rdma_migrate_id(back to ch)", rdma_migrate_id(id, ch));
	{
		struct sockaddr_in d = sin_of(addr, port + 13);
		STEP("rdma_resolve_addr after migrate", rdma_resolve_addr(id, NULL, (struct sockaddr *)&d, 1000));
		next_event(ch, 2000, "c", NULL);
	}
	rdma_destroy_id(id);

	}
	if (case_begin("set-option")) {
	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	{
		uint8_t tos = 32, t8 = 14;
		int one = 1;
		STEP("TOS before bind", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1));
		STEP("TOS len 4", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &one, 4));
		STEP("REUSEADDR before bind", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, 4));
		STEP("AFONLY before bind", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one, 4));
		STEP("ACK_TIMEOUT before bind", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &t8, 1));
		STEP("REUSEADDR len 1", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, 1));
		STEP("bad level", rdma_set_option(id, 99, RDMA_OPTION_ID_TOS, &tos, 1));
		STEP("bad name", rdma_set_option(id, RDMA_OPTION_ID, 99, &tos, 1));
		s = sin_of(addr, port + 14);
		STEP("rdma_bind_addr", rdma_bind_addr(id, (struct sockaddr *)&s));
		STEP("TOS after bind", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1));
		STEP("REUSEADDR after bind", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, 4));
		STEP("AFONLY after bind", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one, 4));
		STEP("ACK_TIMEOUT after bind", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &t8, 1));
		STEP("rdma_listen", rdma_listen(id, 1));
		STEP("TOS after listen", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1));
		STEP("REUSEADDR after listen", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, 4));
		STEP("AFONLY after listen", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one, 4));
	}
	rdma_destroy_id(id);

	}
	if (case_begin("af-mismatch")) {
	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	s = sin_of(addr, 0);
	STEP("rdma_bind_addr(v4)", rdma_bind_addr(id, (struct sockaddr *)&s));
	{
		struct sockaddr_in6 d6 = { .sin6_family = AF_INET6, .sin6_port = htons(port + 15) };
		inet_pton(AF_INET6, "::1", &d6.sin6_addr);
		STEP("rdma_resolve_addr(to ::1)", rdma_resolve_addr(id, NULL, (struct sockaddr *)&d6, 1000));
		next_event(ch, 1500, "c", NULL);
	}
	rdma_destroy_id(id);
	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	{
		struct sockaddr_in6 src6 = { .sin6_family = AF_INET6 };
		struct sockaddr_in d = sin_of(addr, port + 15);
		inet_pton(AF_INET6, "::1", &src6.sin6_addr);
		STEP("rdma_resolve_addr(src ::1, dst v4)", rdma_resolve_addr(id, (struct sockaddr *)&src6, (struct sockaddr *)&d, 1000));
		next_event(ch, 1500, "c", NULL);
	}
	rdma_destroy_id(id);

	}
	if (case_begin("af-ib-loopback")) {
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_IB) == 0) {
		struct sockaddr_ib sib = { .sib_family = AF_IB };
		sib.sib_addr.sib_raw[15] = 1;
		sib.sib_pkey = htons(0xffff);
		STEP("rdma_bind_addr(AF_IB ::1)", rdma_bind_addr(id, (struct sockaddr *)&sib));
		memset(&sib.sib_addr, 0, sizeof(sib.sib_addr));
		STEP("rdma_bind_addr(AF_IB any) again", rdma_bind_addr(id, (struct sockaddr *)&sib));
		rdma_destroy_id(id);
	} else {
		printf("  rdma_create_id(RDMA_PS_IB) failed %s\n", strerrorname_np(errno));
	}
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0) {
		struct sockaddr_ib sib = { .sib_family = AF_IB };
		sib.sib_addr.sib_raw[15] = 1;
		STEP("rdma_bind_addr(AF_IB ::1, PS_TCP)", rdma_bind_addr(id, (struct sockaddr *)&sib));
		rdma_destroy_id(id);
	}
	}
	rdma_destroy_event_channel(ch);
	rdma_destroy_event_channel(ch2);
}

static void case_multicast(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct sockaddr_in s = sin_of(addr, 0), m = sin_of("239.1.2.3", 0);
	struct ibv_qp_init_attr a = qp_attr();

	if (case_begin("join-twice")) {
	rdma_create_id(ch, &id, NULL, RDMA_PS_UDP);
	STEP("rdma_join_multicast(unbound)", rdma_join_multicast(id, (struct sockaddr *)&m, NULL));
	next_event(ch, 2000, "c", NULL);
	rdma_destroy_id(id);
	rdma_create_id(ch, &id, NULL, RDMA_PS_UDP);
	STEP("rdma_bind_addr", rdma_bind_addr(id, (struct sockaddr *)&s));
	a.qp_type = IBV_QPT_UD;
	STEP("rdma_create_qp(UD)", rdma_create_qp(id, NULL, &a));
	STEP("rdma_join_multicast", rdma_join_multicast(id, (struct sockaddr *)&m, NULL));
	next_event(ch, 3000, "c", NULL);
	STEP("rdma_join_multicast again", rdma_join_multicast(id, (struct sockaddr *)&m, NULL));
	next_event(ch, 2000, "c", NULL);
	STEP("rdma_leave_multicast", rdma_leave_multicast(id, (struct sockaddr *)&m));
	STEP("rdma_leave_multicast again", rdma_leave_multicast(id, (struct sockaddr *)&m));
	destroy(id);
	}
	rdma_destroy_event_channel(ch);
}

static void case_errors(const char *nohost)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1, .retry_count = 1 };

	if (case_begin("refused")) {
	id = client(ch, port + 20, 1);
	STEP("rdma_connect(no listener)", rdma_connect(id, &cp));
	drain(ch, "c", 3000);
	STEP("rdma_connect again", rdma_connect(id, &cp));
	drain(ch, "c", 2000);
	destroy(id);

	}
	if (case_begin("unreachable")) {
	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	{
		struct sockaddr_in d = sin_of("198.51.100.7", port + 21);
		STEP("rdma_resolve_addr(no route)", rdma_resolve_addr(id, NULL, (struct sockaddr *)&d, 1000));
		drain(ch, "c", 3000);
	}
	rdma_destroy_id(id);

	}
	if (case_begin("no-host")) {
	if (nohost) {
		rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
		struct sockaddr_in d = sin_of(nohost, port + 22);
		STEP("rdma_resolve_addr(nobody, 500 ms)", rdma_resolve_addr(id, NULL, (struct sockaddr *)&d, 500));
		drain(ch, "c", 8000);
		rdma_destroy_id(id);
	}
	}
	rdma_destroy_event_channel(ch);
}

static void print_ai(struct rdma_addrinfo *ai)
{
	char h[64] = "-";
	for (; ai; ai = ai->ai_next) {
		struct sockaddr *sa = ai->ai_src_addr ? ai->ai_src_addr : ai->ai_dst_addr;
		if (sa && sa->sa_family == AF_INET)
			inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr, h, sizeof(h));
		else if (sa && sa->sa_family == AF_INET6)
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)sa)->sin6_addr, h, sizeof(h));
		printf("  ai flags=0x%x family=%d qp_type=%d ps=%d src=%s dst=%s addr=%s port=%d\n",
		       ai->ai_flags, ai->ai_family, ai->ai_qp_type, ai->ai_port_space,
		       ai->ai_src_addr ? "y" : "n", ai->ai_dst_addr ? "y" : "n", h,
		       sa && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6) ?
		       ntohs(((struct sockaddr_in *)sa)->sin_port) : -1);
	}
}

static void gai(const char *name, const char *node, const char *svc, int flags, int family)
{
	struct rdma_addrinfo hints = { .ai_flags = flags, .ai_family = family,
				       .ai_port_space = RDMA_PS_TCP }, *res = NULL;
	int r;

	errno = 0;
	r = rdma_getaddrinfo(node, svc, &hints, &res);
	printf("  rdma_getaddrinfo(%s) -> %d errno=%s\n", name, r, r ? strerrorname_np(errno) ?: "?" : "-");
	if (!r) {
		print_ai(res);
		rdma_freeaddrinfo(res);
	}
}

static void case_getaddrinfo(void)
{
	char p[16];
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP }, *res;
	struct rdma_cm_id *id;

	snprintf(p, sizeof(p), "%d", port + 25);
	if (case_begin("getaddrinfo")) {
	gai("ADDR passive", addr, p, RAI_PASSIVE, 0);
	gai("NULL passive", NULL, p, RAI_PASSIVE, 0);
	gai("NULL active", NULL, p, 0, 0);
	gai("localhost numeric", "localhost", p, RAI_NUMERICHOST, 0);
	gai("localhost", "localhost", p, 0, 0);
	gai("ADDR family AF_INET6", addr, p, RAI_FAMILY, AF_INET6);
	gai("ADDR family AF_INET", addr, p, RAI_FAMILY, AF_INET);
	gai("ADDR AF_INET6 hint", addr, p, 0, AF_INET6);
	gai("ADDR no svc", addr, NULL, 0, 0);
	gai("ADDR svc name", addr, "http", 0, 0);
	gai("::1 passive", "::1", p, RAI_PASSIVE, 0);

	}
	if (case_begin("create-ep")) {
	if (rdma_getaddrinfo(addr, p, &hints, &res) == 0) {
		int rc;

		STEP("rdma_create_ep(passive, no qp)", rc = rdma_create_ep(&id, res, NULL, NULL));
		if (!rc) {
			STEP("id->channel == NULL", id->channel == NULL);
			STEP("rdma_listen", rdma_listen(id, 0));
			rdma_destroy_ep(id);
		}
		rdma_freeaddrinfo(res);
	}
	hints.ai_flags = 0;
	if (rdma_getaddrinfo(addr, p, &hints, &res) == 0) {
		int rc;

		STEP("rdma_create_ep(active, no listener)", rc = rdma_create_ep(&id, res, NULL, NULL));
		if (!rc) {
			STEP("rdma_connect(sync, refused)", rdma_connect(id, NULL));
			rdma_destroy_ep(id);
		}
		rdma_freeaddrinfo(res);
	}
	}
}

/* ---- rsockets ---- */

static int rs_listener(int p, int type)
{
	struct sockaddr_in s = sin_of(addr, p);
	int fd = rsocket(AF_INET, type, 0);
	int one = 1;

	rsetsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (rbind(fd, (struct sockaddr *)&s, sizeof(s)) || (type == SOCK_STREAM && rlisten(fd, 4)))
		printf("  listener setup failed %s\n", strerrorname_np(errno));
	return fd;
}

static void *acceptor(void *arg)
{
	int lfd = *(int *)arg;
	long fd = raccept(lfd, NULL, NULL);
	return (void *)fd;
}

static int sockerr(int fd)
{
	int e = -1;
	socklen_t l = sizeof(e);
	if (rgetsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l))
		return -errno;
	return e;
}

static void rs_pair(int p, int *cfd, int *sfd, int *lfd)
{
	struct sockaddr_in s = sin_of(addr, p);
	pthread_t t;
	void *r;

	*lfd = rs_listener(p, SOCK_STREAM);
	pthread_create(&t, NULL, acceptor, lfd);
	*cfd = rsocket(AF_INET, SOCK_STREAM, 0);
	STEP("rconnect", rconnect(*cfd, (struct sockaddr *)&s, sizeof(s)));
	pthread_join(t, &r);
	*sfd = (int)(long)r;
	printf("  raccept -> %s\n", *sfd >= 0 ? "fd" : "fail");
}

static void case_rsockets(void)
{
	struct sockaddr_in s = sin_of(addr, port + 30);
	int fd, cfd, sfd, lfd;
	char buf[64];

	if (case_begin("rs-refused-twice")) {
	fd = rsocket(AF_INET, SOCK_STREAM, 0);
	STEP("rconnect(no listener)", rconnect(fd, (struct sockaddr *)&s, sizeof(s)));
	printf("  SO_ERROR=%d\n", sockerr(fd));
	STEP("rconnect again", rconnect(fd, (struct sockaddr *)&s, sizeof(s)));
	STEP("rconnect third", rconnect(fd, (struct sockaddr *)&s, sizeof(s)));
	STEP("rsend after refused", rsend(fd, "x", 1, 0));
	STEP("rrecv after refused", rrecv(fd, buf, 1, 0));
	rclose(fd);

	}
	if (case_begin("rs-never-connected")) {
	fd = rsocket(AF_INET, SOCK_STREAM, 0);
	STEP("rsend", rsend(fd, "x", 1, 0));
	STEP("rrecv", rrecv(fd, buf, 1, 0));
	STEP("rshutdown(SHUT_RDWR)", rshutdown(fd, SHUT_RDWR));
	STEP("rshutdown(SHUT_WR)", rshutdown(fd, SHUT_WR));
	printf("  SO_ERROR=%d\n", sockerr(fd));
	STEP("rgetpeername", ({ struct sockaddr_in a; socklen_t l = sizeof(a); rgetpeername(fd, (struct sockaddr *)&a, &l); }));
	rclose(fd);

	}
	if (case_begin("rs-nonblocking-refused")) {
	fd = rsocket(AF_INET, SOCK_STREAM, 0);
	rfcntl(fd, F_SETFL, O_NONBLOCK);
	STEP("rconnect(nonblocking, no listener)", rconnect(fd, (struct sockaddr *)&s, sizeof(s)));
	{
		struct pollfd pfd = { .fd = fd, .events = POLLOUT | POLLIN };
		STEP("rpoll", rpoll(&pfd, 1, 3000));
		printf("  revents=0x%x\n", pfd.revents);
	}
	printf("  SO_ERROR=%d\n", sockerr(fd));
	printf("  SO_ERROR=%d\n", sockerr(fd));
	STEP("rconnect again", rconnect(fd, (struct sockaddr *)&s, sizeof(s)));
	rclose(fd);

	}
	if (case_begin("rs-nonblocking-connect")) {
	lfd = rs_listener(port + 31, SOCK_STREAM);
	fd = rsocket(AF_INET, SOCK_STREAM, 0);
	rfcntl(fd, F_SETFL, O_NONBLOCK);
	s = sin_of(addr, port + 31);
	STEP("rconnect(nonblocking)", rconnect(fd, (struct sockaddr *)&s, sizeof(s)));
	STEP("rconnect(nonblocking) again", rconnect(fd, (struct sockaddr *)&s, sizeof(s)));
	{
		pthread_t t;
		void *r;
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		pthread_create(&t, NULL, acceptor, &lfd);
		STEP("rpoll", rpoll(&pfd, 1, 3000));
		printf("  revents=0x%x\n", pfd.revents);
		pthread_join(t, &r);
		printf("  SO_ERROR=%d\n", sockerr(fd));
		STEP("rconnect after connected", rconnect(fd, (struct sockaddr *)&s, sizeof(s)));
		rclose((int)(long)r);
	}
	rclose(fd);
	rclose(lfd);

	}
	if (case_begin("rs-peer-close")) {
	rs_pair(port + 32, &cfd, &sfd, &lfd);
	STEP("rsend(server)", rsend(sfd, "abc", 3, 0));
	STEP("rclose(server)", rclose(sfd));
	usleep(300000);
	STEP("rrecv(client) data", rrecv(cfd, buf, sizeof(buf), 0));
	STEP("rrecv(client) eof", rrecv(cfd, buf, sizeof(buf), 0));
	STEP("rrecv(client) eof again", rrecv(cfd, buf, sizeof(buf), 0));
	printf("  SO_ERROR=%d\n", sockerr(cfd));
	STEP("rsend(client)", rsend(cfd, "x", 1, MSG_NOSIGNAL));
	STEP("rsend(client) again", rsend(cfd, "x", 1, MSG_NOSIGNAL));
	printf("  SO_ERROR=%d\n", sockerr(cfd));
	rclose(cfd);
	rclose(lfd);

	}
	if (case_begin("rs-shutdown")) {
	rs_pair(port + 33, &cfd, &sfd, &lfd);
	STEP("rshutdown(client, SHUT_WR)", rshutdown(cfd, SHUT_WR));
	STEP("rshutdown(client, SHUT_WR) again", rshutdown(cfd, SHUT_WR));
	STEP("rsend(client) after SHUT_WR", rsend(cfd, "x", 1, MSG_NOSIGNAL));
	STEP("rrecv(server)", rrecv(sfd, buf, sizeof(buf), 0));
	STEP("rsend(server)", rsend(sfd, "ab", 2, 0));
	usleep(200000);
	STEP("rrecv(client) after own SHUT_WR", rrecv(cfd, buf, sizeof(buf), 0));
	STEP("rshutdown(client, SHUT_RD)", rshutdown(cfd, SHUT_RD));
	STEP("rrecv(client) after SHUT_RD", rrecv(cfd, buf, sizeof(buf), MSG_DONTWAIT));
	STEP("rshutdown(client, SHUT_RDWR)", rshutdown(cfd, SHUT_RDWR));
	STEP("rshutdown(client, 7)", rshutdown(cfd, 7));
	STEP("rrecv(server) again", rrecv(sfd, buf, sizeof(buf), 0));
	STEP("rsend(server) after peer RDWR", rsend(sfd, "x", 1, MSG_NOSIGNAL));
	printf("  SO_ERROR(server)=%d\n", sockerr(sfd));
	rclose(cfd);
	rclose(sfd);
	rclose(lfd);

	}
	if (case_begin("rs-dgram-bind")) {
	fd = rsocket(AF_INET, SOCK_DGRAM, 0);
	s = sin_of("127.0.0.1", port + 34);
	STEP("rsocket(SOCK_DGRAM)", fd);
	STEP("rbind(127.0.0.1)", rbind(fd, (struct sockaddr *)&s, sizeof(s)));
	rclose(fd);
	fd = rsocket(AF_INET, SOCK_DGRAM, 0);
	s = sin_of(addr, port + 35);
	STEP("rbind(ADDR)", rbind(fd, (struct sockaddr *)&s, sizeof(s)));
	STEP("rsendto(self)", rsendto(fd, "hi", 2, 0, (struct sockaddr *)&s, sizeof(s)));
	{
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		STEP("rpoll", rpoll(&pfd, 1, 2000));
		STEP("rrecvfrom", rrecvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT, NULL, NULL));
	}
	rclose(fd);
	fd = rsocket(AF_INET, SOCK_DGRAM, 0);
	s = sin_of("0.0.0.0", port + 36);
	STEP("rbind(0.0.0.0)", rbind(fd, (struct sockaddr *)&s, sizeof(s)));
	rclose(fd);
	}
}

static void run_cases(const char *nohost)
{
	case_disconnect_early();
	case_misc_ids();
	case_multicast();
	case_errors(nohost);
	case_getaddrinfo();
	case_rsockets();
}

/*
 * Each case in a child of its own with a time limit: a call that hangs
 * (a library waiting for an event that never comes) costs that case
 * only, and the next starts from a clean process.
 */
int main(int argc, char **argv)
{
	const char *only = getenv("CM_PROBE_CASE");
	int limit = getenv("CM_PROBE_LIMIT") ? atoi(getenv("CM_PROBE_LIMIT")) : 40;

	if (argc < 3) {
		fprintf(stderr, "usage: cm-probe ADDR PORT [NOHOST]\n");
		return 2;
	}
	addr = argv[1];
	port = atoi(argv[2]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int k = only ? atoi(only) : 1;; k++) {
		int status;
		pid_t pid = fork();

		if (pid == 0) {
			case_wanted = k;
			alarm(limit);
			run_cases(argc > 3 ? argv[3] : NULL);
			_exit(case_count < k ? 3 : 0);
		}
		waitpid(pid, &status, 0);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
			break;
		if (WIFSIGNALED(status))
			printf("  killed by signal %d\n", WTERMSIG(status));
		if (only)
			break;
	}
	puts("done");
	return 0;
}
