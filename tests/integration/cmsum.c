/*
 * cmsum-helper: the RDMA CM client/server example of the AIX/OFED
 * reference (seeds/003: "An example using RDMA_CM module"), as an ordinary
 * librdmacm application (system <rdma/rdma_cma.h>, -lrdmacm -libverbs)
 * that cm.sh runs through ibverbsd-run, server and client as two uids.
 *
 *   cmsum-helper server PORT [ADDRESS]
 *	listens on ADDRESS (default the IPv4 wildcard 0.0.0.0; "::" is the
 *	IPv6 one), prints "listening on port PORT" once rdma_listen
 *	returned, accepts one
 *	client with its buffer's address and rkey as private data, waits for
 *	the client's SEND, adds the number the client RDMA-wrote into the
 *	buffer to the one it sent, SENDs the sum back and waits for the
 *	client's disconnect.
 *   cmsum-helper client HOST PORT V1 V2
 *	connects, RDMA-writes V1 into the server's buffer, SENDs V2, and
 *	prints "V1 + V2 = SUM" with the SUM it receives.
 *
 * The flow is the reference's, step by step (resolve address and route,
 * verbs objects on cm_id->verbs, rdma_create_qp, connect with
 * initiator_depth 1 / accept with responder_resources 1, completions by
 * ibv_get_cq_event), with its slips fixed: the buffer address travels as a
 * 64-bit big-endian number, the server's buffer takes the RDMA write at
 * offset 0 and the SEND at offset 4, and both sides tear down as the
 * reference's connection flows say (disconnect, DISCONNECTED, destroy).
 * Every step is bounded: a missing event or completion is a failure.
 *
 * Exit: 0 pass, 1 fail.
 */
#include "config.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>

enum {
	RESOLVE_TIMEOUT_MS = 5000,
	STEP_MS = 20000,	/* bound for any one event or completion */
};

/* The server's buffer, as private data of its accept. */
struct pdata {
	uint64_t buf_va;	/* big-endian */
	uint32_t buf_rkey;	/* big-endian */
} __attribute__((packed));

static const char *role = "cmsum";

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "cmsum-helper %s: ", role);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* The next CM event, which must be `want` (within STEP_MS). */
static struct rdma_cm_event *expect_event(struct rdma_event_channel *ch,
					  enum rdma_cm_event_type want)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	int n;

	do
		n = poll(&pfd, 1, STEP_MS);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		die("no CM event within %d ms (waiting for %s)", STEP_MS, rdma_event_str(want));
	if (rdma_get_cm_event(ch, &ev))
		die("rdma_get_cm_event: %s", strerror(errno));
	if (ev->event != want)
		die("got %s (status %d), want %s", rdma_event_str(ev->event), ev->status,
		    rdma_event_str(want));
	return ev;
}

/* One completion (the CQ is armed), which must be successful. */
static void expect_wc(struct ibv_comp_channel *comp, struct ibv_cq *cq,
		      struct ibv_wc *wc, const char *what)
{
	struct pollfd pfd = { .fd = comp->fd, .events = POLLIN };
	struct ibv_cq *evt_cq;
	void *cq_context;
	int n;

	for (;;) {
		n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			die("ibv_poll_cq failed (%s)", what);
		if (n == 1)
			break;
		do
			n = poll(&pfd, 1, STEP_MS);
		while (n < 0 && errno == EINTR);
		if (n == 0)
			die("no completion within %d ms (%s)", STEP_MS, what);
		if (ibv_get_cq_event(comp, &evt_cq, &cq_context))
			die("ibv_get_cq_event failed (%s)", what);
		if (evt_cq != cq)
			die("event for another CQ (%s)", what);
		ibv_ack_cq_events(cq, 1);
		if (ibv_req_notify_cq(cq, 0))
			die("ibv_req_notify_cq failed (%s)", what);
	}
	if (wc->status != IBV_WC_SUCCESS)
		die("%s completed with %s", what, ibv_wc_status_str(wc->status));
}

struct verbs {
	struct ibv_pd *pd;
	struct ibv_comp_channel *comp_chan;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint32_t *buf;
};

/* "Create verbs objects now that we know which device to use". */
static void make_verbs(struct rdma_cm_id *id, struct verbs *v, int access,
		       uint32_t send_wr)
{
	struct ibv_qp_init_attr qp_attr = {
		.cap = {
			.max_send_wr = send_wr,
			.max_send_sge = 1,
			.max_recv_wr = 1,
			.max_recv_sge = 1,
		},
		.qp_type = IBV_QPT_RC,
	};

	if (!id->verbs)
		die("the cm_id has no device context (id->verbs is NULL)");
	v->pd = ibv_alloc_pd(id->verbs);
	if (!v->pd)
		die("ibv_alloc_pd: %s", strerror(errno));
	v->comp_chan = ibv_create_comp_channel(id->verbs);
	if (!v->comp_chan)
		die("ibv_create_comp_channel: %s", strerror(errno));
	v->cq = ibv_create_cq(id->verbs, 2, NULL, v->comp_chan, 0);
	if (!v->cq)
		die("ibv_create_cq: %s", strerror(errno));
	if (ibv_req_notify_cq(v->cq, 0))
		die("ibv_req_notify_cq failed");
	v->buf = calloc(2, sizeof(uint32_t));
	if (!v->buf)
		die("out of memory");
	v->mr = ibv_reg_mr(v->pd, v->buf, 2 * sizeof(uint32_t), access);
	if (!v->mr)
		die("ibv_reg_mr: %s", strerror(errno));
	qp_attr.send_cq = v->cq;
	qp_attr.recv_cq = v->cq;
	if (rdma_create_qp(id, v->pd, &qp_attr))
		die("rdma_create_qp: %s", strerror(errno));
	if (!id->qp)
		die("rdma_create_qp left id->qp NULL");
}

static void free_verbs(struct rdma_cm_id *id, struct verbs *v)
{
	rdma_destroy_qp(id);
	if (ibv_dereg_mr(v->mr))
		die("ibv_dereg_mr failed");
	free(v->buf);
	if (ibv_destroy_cq(v->cq))
		die("ibv_destroy_cq failed");
	if (ibv_destroy_comp_channel(v->comp_chan))
		die("ibv_destroy_comp_channel failed");
	if (ibv_dealloc_pd(v->pd))
		die("ibv_dealloc_pd failed");
}

static void post_recv(struct rdma_cm_id *id, void *addr, uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = sizeof(uint32_t), .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = 0, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(id->qp, &wr, &bad))
		die("ibv_post_recv failed");
}

static void post_send(struct rdma_cm_id *id, uint64_t wr_id, enum ibv_wr_opcode op,
		      unsigned int flags, void *addr, uint32_t lkey,
		      uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = sizeof(uint32_t), .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.opcode = op,
		.send_flags = flags,
		.sg_list = &sge,
		.num_sge = 1,
	}, *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(id->qp, &wr, &bad))
		die("ibv_post_send (wr %" PRIu64 ") failed", wr_id);
}

static int server(const char *port_s, const char *addr_s)
{
	struct rdma_event_channel *cm_channel;
	struct rdma_cm_id *listen_id, *cm_id;
	struct rdma_cm_event *event;
	struct rdma_conn_param conn_param = { 0 };
	struct pdata rep_pdata;
	struct addrinfo hints = {
		.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV,
		.ai_socktype = SOCK_STREAM,
	};
	struct addrinfo *res;
	struct verbs v;
	struct ibv_wc wc;
	uint32_t a, b;
	int n;

	role = "server";
	cm_channel = rdma_create_event_channel();
	if (!cm_channel)
		die("rdma_create_event_channel: %s", strerror(errno));
	if (rdma_create_id(cm_channel, &listen_id, NULL, RDMA_PS_TCP))
		die("rdma_create_id: %s", strerror(errno));
	/* "Bind to local port and listen for connection request" */
	n = getaddrinfo(addr_s, port_s, &hints, &res);
	if (n)
		die("getaddrinfo %s: %s", addr_s, gai_strerror(n));
	if (rdma_bind_addr(listen_id, res->ai_addr))
		die("rdma_bind_addr: %s", strerror(errno));
	freeaddrinfo(res);
	if (rdma_listen(listen_id, 1))
		die("rdma_listen: %s", strerror(errno));
	printf("listening on port %u\n", ntohs(rdma_get_src_port(listen_id)));
	fflush(stdout);

	event = expect_event(cm_channel, RDMA_CM_EVENT_CONNECT_REQUEST);
	cm_id = event->id;
	if (event->listen_id != listen_id)
		die("CONNECT_REQUEST: listen_id is not the listener");
	rdma_ack_cm_event(event);

	make_verbs(cm_id, &v, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
		   IBV_ACCESS_REMOTE_WRITE, 1);
	/* "Post receive before accepting connection": the SEND lands in
	 * buf[1], the client's RDMA write in buf[0]. */
	post_recv(cm_id, &v.buf[1], v.mr->lkey);
	rep_pdata.buf_va = htobe64((uint64_t)(uintptr_t)v.buf);
	rep_pdata.buf_rkey = htobe32(v.mr->rkey);
	conn_param.responder_resources = 1;
	conn_param.private_data = &rep_pdata;
	conn_param.private_data_len = sizeof(rep_pdata);
	if (rdma_accept(cm_id, &conn_param))
		die("rdma_accept: %s", strerror(errno));
	event = expect_event(cm_channel, RDMA_CM_EVENT_ESTABLISHED);
	if (event->id != cm_id)
		die("ESTABLISHED for another id");
	rdma_ack_cm_event(event);

	/* "Wait for receive completion" */
	expect_wc(v.comp_chan, v.cq, &wc, "the client's SEND");
	if (wc.opcode != IBV_WC_RECV || wc.byte_len != sizeof(uint32_t))
		die("receive completion: opcode %d, %u bytes", wc.opcode, wc.byte_len);

	/* "Add two integers and send reply back" */
	a = ntohl(v.buf[0]);
	b = ntohl(v.buf[1]);
	v.buf[0] = htonl(a + b);
	printf("server: %u + %u = %u\n", a, b, a + b);
	fflush(stdout);
	post_send(cm_id, 1, IBV_WR_SEND, IBV_SEND_SIGNALED, &v.buf[0], v.mr->lkey, 0, 0);
	expect_wc(v.comp_chan, v.cq, &wc, "the SEND of the sum");
	if (wc.opcode != IBV_WC_SEND)
		die("send completion has opcode %d", wc.opcode);

	/* The client disconnects once it has the sum. */
	event = expect_event(cm_channel, RDMA_CM_EVENT_DISCONNECTED);
	rdma_ack_cm_event(event);
	rdma_disconnect(cm_id);	/* moves our QP to the error state */
	free_verbs(cm_id, &v);
	if (rdma_destroy_id(cm_id))
		die("rdma_destroy_id (connection): %s", strerror(errno));
	if (rdma_destroy_id(listen_id))
		die("rdma_destroy_id (listener): %s", strerror(errno));
	rdma_destroy_event_channel(cm_channel);
	return 0;
}

static int client(const char *host, const char *port_s, const char *v1, const char *v2)
{
	struct rdma_event_channel *cm_channel;
	struct rdma_cm_id *cm_id;
	struct rdma_cm_event *event;
	struct rdma_conn_param conn_param = { 0 };
	struct pdata server_pdata;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res, *t;
	struct verbs v;
	struct ibv_wc wc;
	uint32_t a, b;
	int n, err = -1;

	role = "client";
	cm_channel = rdma_create_event_channel();
	if (!cm_channel)
		die("rdma_create_event_channel: %s", strerror(errno));
	if (rdma_create_id(cm_channel, &cm_id, NULL, RDMA_PS_TCP))
		die("rdma_create_id: %s", strerror(errno));
	n = getaddrinfo(host, port_s, &hints, &res);
	if (n)
		die("getaddrinfo %s: %s", host, gai_strerror(n));

	/* "Resolve server address and route" */
	for (t = res; t; t = t->ai_next) {
		err = rdma_resolve_addr(cm_id, NULL, t->ai_addr, RESOLVE_TIMEOUT_MS);
		if (!err)
			break;
	}
	if (err)
		die("rdma_resolve_addr: %s", strerror(errno));
	freeaddrinfo(res);
	rdma_ack_cm_event(expect_event(cm_channel, RDMA_CM_EVENT_ADDR_RESOLVED));
	if (rdma_resolve_route(cm_id, RESOLVE_TIMEOUT_MS))
		die("rdma_resolve_route: %s", strerror(errno));
	rdma_ack_cm_event(expect_event(cm_channel, RDMA_CM_EVENT_ROUTE_RESOLVED));

	make_verbs(cm_id, &v, IBV_ACCESS_LOCAL_WRITE, 2);
	conn_param.initiator_depth = 1;
	conn_param.retry_count = 7;

	/* "Connect to server" */
	if (rdma_connect(cm_id, &conn_param))
		die("rdma_connect: %s", strerror(errno));
	event = expect_event(cm_channel, RDMA_CM_EVENT_ESTABLISHED);
	if (!event->param.conn.private_data ||
	    event->param.conn.private_data_len < sizeof(server_pdata))
		die("ESTABLISHED carries %u bytes of private data, want >= %zu",
		    event->param.conn.private_data_len, sizeof(server_pdata));
	memcpy(&server_pdata, event->param.conn.private_data, sizeof(server_pdata));
	rdma_ack_cm_event(event);

	/* "Prepost receive" */
	post_recv(cm_id, &v.buf[0], v.mr->lkey);

	/* "Write/send two integers to be added" */
	a = (uint32_t)strtoul(v1, NULL, 0);
	b = (uint32_t)strtoul(v2, NULL, 0);
	v.buf[0] = htonl(a);
	v.buf[1] = htonl(b);
	post_send(cm_id, 1, IBV_WR_RDMA_WRITE, 0, &v.buf[0], v.mr->lkey,
		  be64toh(server_pdata.buf_va), be32toh(server_pdata.buf_rkey));
	post_send(cm_id, 2, IBV_WR_SEND, IBV_SEND_SIGNALED, &v.buf[1], v.mr->lkey, 0, 0);

	/* "Wait for receive completion" (the SEND's completes first) */
	for (;;) {
		expect_wc(v.comp_chan, v.cq, &wc, "the sum");
		if (wc.wr_id == 0)
			break;
		if (wc.wr_id != 2 || wc.opcode != IBV_WC_SEND)
			die("unexpected completion: wr_id %" PRIu64 ", opcode %d",
			    wc.wr_id, wc.opcode);
	}
	if (wc.opcode != IBV_WC_RECV || wc.byte_len != sizeof(uint32_t))
		die("receive completion: opcode %d, %u bytes", wc.opcode, wc.byte_len);
	printf("%u + %u = %u\n", a, b, ntohl(v.buf[0]));
	fflush(stdout);

	/* Tear down as the client flow does. */
	if (rdma_disconnect(cm_id))
		die("rdma_disconnect: %s", strerror(errno));
	rdma_ack_cm_event(expect_event(cm_channel, RDMA_CM_EVENT_DISCONNECTED));
	free_verbs(cm_id, &v);
	if (rdma_destroy_id(cm_id))
		die("rdma_destroy_id: %s", strerror(errno));
	rdma_destroy_event_channel(cm_channel);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "server"))
		return server(argv[2], argc == 4 ? argv[3] : "0.0.0.0");
	if (argc == 6 && !strcmp(argv[1], "client"))
		return client(argv[2], argv[3], argv[4], argv[5]);
	fprintf(stderr, "usage: cmsum-helper server PORT [ADDRESS]\n"
			"       cmsum-helper client HOST PORT V1 V2\n");
	return 2;
}
