/*
 * wire-probe: the data path's error paths between two processes, for
 * running one end on Linux's rxe and the other on ibverbsd (or both on
 * one of them) and comparing what each end completes.  The server is
 * the responder (B), the client the requester (A); for each case both
 * make fresh QPs, swap what the other needs over TCP (QPN, GID, MR's
 * address and rkey), the client posts, and each prints one line: its
 * work completions (status; opcode and length for a success) and its
 * QP's state afterwards.  As in datapath-probe.c nothing a device may
 * choose (vendor_err, an error completion's opcode or length) is shown.
 *
 * usage: wire-probe DEVICE server PORT
 *        wire-probe DEVICE client HOST PORT
 * GID index 1 (the IPv4 GID) on both ends.  Linked against
 * libibverbs.so.1 alone, so the one binary runs in rxe's guest too.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "probe-util.h"

#define PORT_NUM	1
#define GID_INDEX	1
#define BUFSZ		8192
#define QKEY		0x11111111
/* long enough for rxe under TCG and for a requester's retries to run out */
#define WAIT_MS		8000
/* how long nothing must come for "nothing" to be believed */
#define QUIET_MS	1000

static struct ibv_context *ctx;
static int sock = -1;
static int server;

/* what one end tells the other about itself, per case */
struct info {
	uint32_t qpn;
	uint32_t rkey;
	uint64_t addr;
	uint8_t gid[16];
};

/* one end of a case */
struct end {
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	char *buf;
	struct info peer;
};

/* a case, as both ends run it */
struct wcase {
	const char *name;
	enum ibv_qp_type type;
	int b_access;		/* the responder's MR's rights (0: all) */
	int rnr_retry;
	int b_recv_len;		/* a receive B posts before the send (0: none) */
	int b_recv_late;	/* B posts its receive this long after the start (ms) */
	int b_destroy;		/* B destroys its QP before A posts */
	enum ibv_wr_opcode op;
	uint32_t len;
	int rkey_delta;		/* A's rkey: B's plus this */
	uint64_t addr_off;	/* A's remote address: B's MR's plus this */
	uint32_t qkey;		/* UD: A's remote Q_Key (0: the right one) */
	int between;		/* the case's post between two good ones */
};

static const int all_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

/* ---- the TCP side channel ------------------------------------------------ */

static int xfer(void *out, void *in, size_t len)
{
	size_t done;
	ssize_t n;

	for (done = 0; done < len; done += (size_t)n) {
		n = write(sock, (char *)out + done, len - done);
		if (n <= 0)
			return -1;
	}
	for (done = 0; done < len; done += (size_t)n) {
		n = read(sock, (char *)in + done, len - done);
		if (n <= 0)
			return -1;
	}
	return 0;
}

/* both ends meet here (a byte each way) */
static int sync_ends(void)
{
	char a = 's', b;

	return xfer(&a, &b, 1);
}

static int tcp_server(const char *port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(atoi(port)) };
	int one = 1, ls = socket(AF_INET, SOCK_STREAM, 0);

	if (ls < 0)
		return -1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (struct sockaddr *)&sin, sizeof(sin)) || listen(ls, 1))
		return -1;
	sock = accept(ls, NULL, NULL);
	close(ls);
	return sock < 0 ? -1 : 0;
}

static int tcp_client(const char *host, const char *port)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai;
	int tries;

	if (getaddrinfo(host, port, &hints, &ai))
		return -1;
	for (tries = 0; tries < 100; tries++) {
		sock = socket(AF_INET, SOCK_STREAM, 0);
		if (sock >= 0 && !connect(sock, ai->ai_addr, ai->ai_addrlen))
			break;
		close(sock);
		sock = -1;
		usleep(100000);
	}
	freeaddrinfo(ai);
	return sock < 0 ? -1 : 0;
}

/* ---- the verbs ----------------------------------------------------------- */

static void ah_to_peer(struct ibv_ah_attr *ah, const struct info *peer)
{
	memset(ah, 0, sizeof(*ah));
	ah->port_num = PORT_NUM;
	ah->is_global = 1;
	ah->grh.sgid_index = GID_INDEX;
	ah->grh.hop_limit = 64;
	memcpy(ah->grh.dgid.raw, peer->gid, 16);
}

static int connect_qp(struct end *e, const struct wcase *c)
{
	struct ibv_ah_attr ah;

	ah_to_peer(&ah, &e->peer);
	if (probe_qp_to_init(e->qp, PORT_NUM, QKEY) ||
	    probe_qp_to_rtr(e->qp, &ah, e->peer.qpn, 12))
		return -1;
	return probe_qp_to_rts(e->qp, 14, c->rnr_retry);
}

static int end_up(struct end *e, const struct wcase *c)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = c->type,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	int access = server && c->b_access ? c->b_access : all_access;
	struct info me = { 0 };
	union ibv_gid gid;

	memset(e, 0, sizeof(*e));
	e->buf = aligned_alloc(4096, BUFSZ);
	e->pd = ibv_alloc_pd(ctx);
	e->cq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	if (!e->buf || !e->pd || !e->cq)
		return -1;
	memset(e->buf, server ? 'b' : 'a', BUFSZ);
	e->mr = ibv_reg_mr(e->pd, e->buf, BUFSZ, access);
	ia.send_cq = e->cq;
	ia.recv_cq = e->cq;
	e->qp = ibv_create_qp(e->pd, &ia);
	if (!e->mr || !e->qp || ibv_query_gid(ctx, PORT_NUM, GID_INDEX, &gid))
		return -1;
	me.qpn = htonl(e->qp->qp_num);
	me.rkey = htonl(e->mr->rkey);
	me.addr = htobe64((uintptr_t)e->buf);
	memcpy(me.gid, gid.raw, 16);
	if (xfer(&me, &e->peer, sizeof(me)))
		return -1;
	e->peer.qpn = ntohl(e->peer.qpn);
	e->peer.rkey = ntohl(e->peer.rkey);
	e->peer.addr = be64toh(e->peer.addr);
	if (c->type == IBV_QPT_UD) {
		struct ibv_ah_attr ah;

		ah_to_peer(&ah, &e->peer);
		e->ah = ibv_create_ah(e->pd, &ah);
		if (!e->ah)
			return -1;
	}
	return connect_qp(e, c);
}

static void end_down(struct end *e)
{
	if (e->ah)
		ibv_destroy_ah(e->ah);
	probe_release(e->qp, e->mr, e->cq, e->buf);
	if (e->pd)
		ibv_dealloc_pd(e->pd);
}

static int post_recv(struct end *e, uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)e->buf, len, e->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (e->qp->qp_type == IBV_QPT_UD)
		sge.length += 40;	/* the GRH */
	return ibv_post_recv(e->qp, &wr, &bad);
}

static int post_send(struct end *e, const struct wcase *c, int good)
{
	uint32_t rkey = e->peer.rkey + (good ? 0 : c->rkey_delta);
	uint64_t raddr = e->peer.addr + (good ? 0 : c->addr_off);
	struct ibv_sge sge = { (uintptr_t)e->buf, c->len, e->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 1, .opcode = c->op, .send_flags = IBV_SEND_SIGNALED,
		.sg_list = &sge, .num_sge = 1, .imm_data = htonl(0x12345678),
	}, *bad;

	if (c->op == IBV_WR_SEND_WITH_INV)
		wr.invalidate_rkey = rkey;
	if (c->op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 1;
	} else if (c->type == IBV_QPT_UD) {
		wr.wr.ud.ah = e->ah;
		wr.wr.ud.remote_qpn = e->peer.qpn;
		wr.wr.ud.remote_qkey = c->qkey ? c->qkey : QKEY;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	return ibv_post_send(e->qp, &wr, &bad);
}

/* ---- what happened ------------------------------------------------------- */

static const char *sname(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;

	if (!qp)
		return "destroyed";
	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return "?";
	return probe_qp_state_name(a.qp_state);
}

/* poll until WANT completions (then a little more) or MS ms */
static void show_wcs(struct end *e, int want, long ms)
{
	long end = probe_now_ms() + ms;
	struct ibv_wc wc;
	int n = 0, got;

	for (;;) {
		got = ibv_poll_cq(e->cq, 1, &wc);
		if (got < 0)
			break;
		if (got) {
			n++;
			printf(" {%s", ibv_wc_status_str(wc.status));
			if (wc.status == IBV_WC_SUCCESS)
				printf(" %s len=%u", probe_wc_opcode_name(wc.opcode), wc.byte_len);
			printf("}");
			if (n >= want && end > probe_now_ms() + 200)
				end = probe_now_ms() + 200;
			continue;
		}
		if (probe_now_ms() >= end)
			break;
		usleep(1000);
	}
	if (!n)
		printf(" none");
}

/* ---- the cases ------------------------------------------------------------ */

#define NO_RW (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define NO_RR (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)
#define NO_RA (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static const struct wcase cases[] = {
	{ "write ok", IBV_QPT_RC, 0, 0, 0, 0, 0, IBV_WR_RDMA_WRITE, 64, 0, 0, 0, 0 },
	{ "write bad rkey", IBV_QPT_RC, 0, 0, 0, 0, 0, IBV_WR_RDMA_WRITE, 64, 0x100, 0, 0, 0 },
	{ "write beyond the MR", IBV_QPT_RC, 0, 0, 0, 0, 0, IBV_WR_RDMA_WRITE, 64, 0,
	  BUFSZ - 32, 0, 0 },
	{ "write without REMOTE_WRITE", IBV_QPT_RC, NO_RW, 0, 0, 0, 0, IBV_WR_RDMA_WRITE, 64,
	  0, 0, 0, 0 },
	{ "read bad rkey", IBV_QPT_RC, 0, 0, 0, 0, 0, IBV_WR_RDMA_READ, 64, 0x100, 0, 0, 0 },
	{ "read beyond the MR", IBV_QPT_RC, 0, 0, 0, 0, 0, IBV_WR_RDMA_READ, 64, 0,
	  BUFSZ - 32, 0, 0 },
	{ "read without REMOTE_READ", IBV_QPT_RC, NO_RR, 0, 0, 0, 0, IBV_WR_RDMA_READ, 64,
	  0, 0, 0, 0 },
	{ "atomic bad rkey", IBV_QPT_RC, 0, 0, 0, 0, 0, IBV_WR_ATOMIC_FETCH_AND_ADD, 8,
	  0x100, 0, 0, 0 },
	{ "atomic beyond the MR", IBV_QPT_RC, 0, 0, 0, 0, 0, IBV_WR_ATOMIC_FETCH_AND_ADD, 8,
	  0, BUFSZ, 0, 0 },
	{ "atomic without REMOTE_ATOMIC", IBV_QPT_RC, NO_RA, 0, 0, 0, 0,
	  IBV_WR_ATOMIC_FETCH_AND_ADD, 8, 0, 0, 0, 0 },
	{ "send no receive, rnr_retry 0", IBV_QPT_RC, 0, 0, 0, 0, 0, IBV_WR_SEND, 64, 0, 0, 0, 0 },
	{ "send receive late, rnr_retry 7", IBV_QPT_RC, 0, 7, 0, 500, 0, IBV_WR_SEND, 64, 0,
	  0, 0, 0 },
	{ "send receive too small", IBV_QPT_RC, 0, 0, 16, 0, 0, IBV_WR_SEND, 64, 0, 0, 0, 0 },
	{ "write_with_imm bad rkey", IBV_QPT_RC, 0, 0, 64, 0, 0, IBV_WR_RDMA_WRITE_WITH_IMM,
	  64, 0x100, 0, 0, 0 },
	{ "send_with_inv of an MR's rkey", IBV_QPT_RC, 0, 0, 64, 0, 0, IBV_WR_SEND_WITH_INV,
	  64, 0, 0, 0, 0 },
	{ "write 3 KiB, the end beyond the MR", IBV_QPT_RC, 0, 0, 0, 0, 0, IBV_WR_RDMA_WRITE,
	  3072, 0, BUFSZ - 2048, 0, 0 },
	{ "read 3 KiB, the end beyond the MR", IBV_QPT_RC, 0, 0, 0, 0, 0, IBV_WR_RDMA_READ,
	  3072, 0, BUFSZ - 2048, 0, 0 },
	{ "write good, bad rkey, good", IBV_QPT_RC, 0, 0, 0, 0, 0, IBV_WR_RDMA_WRITE, 64,
	  0x100, 0, 0, 1 },
	{ "read good, bad rkey, good", IBV_QPT_RC, 0, 0, 0, 0, 0, IBV_WR_RDMA_READ, 2048,
	  0x100, 0, 0, 1 },
	{ "atomic good, bad rkey, good", IBV_QPT_RC, 0, 0, 0, 0, 0,
	  IBV_WR_ATOMIC_FETCH_AND_ADD, 8, 0x100, 0, 0, 1 },
	{ "send 3 KiB, receive of 1 KiB", IBV_QPT_RC, 0, 0, 1024, 0, 0, IBV_WR_SEND, 3072, 0,
	  0, 0, 0 },
	{ "send 3 KiB, no receive, rnr_retry 0", IBV_QPT_RC, 0, 0, 0, 0, 0, IBV_WR_SEND, 3072,
	  0, 0, 0, 0 },
	{ "send to a destroyed QP", IBV_QPT_RC, 0, 0, 0, 0, 1, IBV_WR_SEND, 64, 0, 0, 0, 0 },
	{ "ud wrong qkey", IBV_QPT_UD, 0, 0, 64, 0, 0, IBV_WR_SEND, 64, 0, 0, 0x22222222, 0 },
	{ "ud right qkey", IBV_QPT_UD, 0, 0, 64, 0, 0, IBV_WR_SEND, 64, 0, 0, 0, 0 },
};

/* the requester's half: post, show its completion and state */
static void run_requester(struct end *e, const struct wcase *c)
{
	int posts = c->between ? 3 : 1, i;

	for (i = 0; i < posts; i++) {
		if (post_send(e, c, c->between && i != 1)) {
			printf(" post failed: %s", strerror(errno));
			return;
		}
	}
	show_wcs(e, posts, WAIT_MS);
	printf(" | A %s", sname(e->qp));
}

/* the responder's half: whatever came, after the requester is done */
static void run_responder(struct end *e, const struct wcase *c)
{
	int want = c->b_recv_len || c->b_recv_late;

	if (c->b_recv_late) {
		usleep(c->b_recv_late * 1000);
		post_recv(e, 64);
	}
	/* the requester tells when it is done */
	sync_ends();
	show_wcs(e, want, want ? 2000 : QUIET_MS);
	printf(" | B %s", sname(e->qp));
}

static int run_case(const struct wcase *c)
{
	struct end e;
	int rc = 0;

	printf("%-34s %s:", c->name, server ? "B (responder)" : "A (requester)");
	if (end_up(&e, c)) {
		printf(" setup failed: %s\n", strerror(errno));
		rc = -1;
		goto out;
	}
	if (server && c->b_recv_len)
		post_recv(&e, c->b_recv_len);
	if (server && c->b_destroy) {
		ibv_destroy_qp(e.qp);
		e.qp = NULL;
	}
	if (sync_ends()) {
		rc = -1;
		goto out;
	}
	if (server) {
		run_responder(&e, c);
	} else {
		run_requester(&e, c);
		sync_ends();
	}
	printf("\n");
out:
	fflush(stdout);
	/* neither end tears down before the other is done with the case */
	if (!rc && sync_ends())
		rc = -1;
	end_down(&e);
	return rc;
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	size_t i;
	int n;

	if (argc < 4 || (strcmp(argv[2], "server") && strcmp(argv[2], "client")) ||
	    (!strcmp(argv[2], "client") && argc < 5)) {
		fprintf(stderr, "usage: %s DEVICE server PORT | DEVICE client HOST PORT\n",
			argv[0]);
		return 2;
	}
	server = !strcmp(argv[2], "server");
	setvbuf(stdout, NULL, _IOLBF, 0);
	list = ibv_get_device_list(&n);
	for (i = 0; list && (int)i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx) {
		fprintf(stderr, "%s: no device %s\n", argv[0], argv[1]);
		return 1;
	}
	if (server ? tcp_server(argv[3]) : tcp_client(argv[3], argv[4])) {
		fprintf(stderr, "%s: the TCP connection: %s\n", argv[0], strerror(errno));
		return 1;
	}
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (run_case(&cases[i]))
			return 1;
	return 0;
}
