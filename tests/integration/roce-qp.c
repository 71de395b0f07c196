/*
 * roce-qp-helper: one RC QP on a RoCE device, connected by hand to an
 * IPv4 address and QP number (0: itself), for roce-responder.py, which
 * plays its peer with packets it makes itself.
 *
 *   roce-qp-helper DEV PEER_IPV4 DEST_QPN MAX_DEST_RD_ATOMIC
 *
 * The QP takes remote WRITEs, READs and atomics into one 1 MiB MR filled
 * with 'B'; path MTU 1024, PSNs from 0 both ways.  It prints
 * "QPN n RKEY r ADDR a LEN l", then answers commands on stdin, each
 * reply ending with a line "ok":
 *   dump OFF LEN   the MR's bytes there, in hex
 *   state          the QP's state (enum ibv_qp_state)
 *   psn            ibv_query_qp's "sq_psn S rq_psn R"
 *   move IPV4      its connection moved to IPV4 (RTS to SQD, the address
 *                  changed in SQD, back to RTS): what an application
 *                  moving a connection to another port or path does
 *   recv OFF LEN   a receive WQE into the MR there ("posted")
 *   poll           the next completion within 5 s: "wc status S opcode O
 *                  flags F len L", or "none"
 *   quit
 * With a fifth argument "srq" the QP takes its receives from an SRQ of 16
 * WQEs, and these commands are answered too:
 *   recv OFF LEN   the WQE goes to the SRQ, its wr_id OFF
 *   wc MS          the next completion within MS ms: "wc wr_id W status S
 *                  opcode O len L", or "none"
 *   arm N          the SRQ's limit armed at N ("armed")
 *   event MS       the next asynchronous event within MS ms: "event T",
 *                  or "none"
 *   unsrq          the SRQ destroyed (ibv_destroy_srq's return value)
 * With "rnr2" instead, the QP's rnr_retry is 2, and
 *   send LEN       a signaled SEND of the MR's first LEN bytes posted
 *                  (ibv_post_send's return value)
 * With "xrc" instead, the QP is an XRC target (XRC_RECV) of a domain whose
 * SRQ of 16 WQEs takes its messages, and so are those of a second target
 * connected to the same peer, QPN DEST_QPN + 1: a second line says
 * "XRC QPN2 n SRQN s".  The commands are those of "srq".
 */
#include "config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "tests/common/open_device.h"

#define MR_LEN		(1u << 20)
#define GID_V4_INDEX	1	/* a RoCE port's IPv4 GID (roce-device.sh) */

static __attribute__((noreturn)) void die(const char *what)
{
	perror(what);
	exit(1);
}

static struct ibv_context *open_named(const char *name)
{
	struct ibv_context *ctx = open_device_named(name);

	if (!ctx)
		die(name);
	return ctx;
}

static void to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX |
				  IBV_QP_ACCESS_FLAGS))
		die("INIT");
}

/* The AV of a connection to IPv4 address peer, into ah. */
static void peer_av(struct ibv_ah_attr *ah, const char *peer)
{
	struct in_addr in;

	if (inet_pton(AF_INET, peer, &in) != 1)
		die(peer);
	memset(ah, 0, sizeof(*ah));
	ah->is_global = 1;
	ah->port_num = 1;
	ah->grh.sgid_index = GID_V4_INDEX;
	ah->grh.hop_limit = 64;
	ah->grh.dgid.raw[10] = 0xff;	/* ::ffff:a.b.c.d */
	ah->grh.dgid.raw[11] = 0xff;
	memcpy(ah->grh.dgid.raw + 12, &in, 4);
}

/* RTS -> SQD, the AV changed in SQD, SQD -> RTS: 0, or -1 (said). */
static int move_to(struct ibv_qp *qp, const char *peer)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_SQD };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE)) {
		perror("SQD");
		return -1;
	}
	peer_av(&a.ah_attr, peer);
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV)) {
		perror("SQD, new AV");
		return -1;
	}
	a.qp_state = IBV_QPS_RTS;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE)) {
		perror("back to RTS");
		return -1;
	}
	return 0;
}

static void to_rts(struct ibv_qp *qp, const char *peer, uint32_t dqpn, int rd,
		   uint8_t rnr_retry)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.dest_qp_num = dqpn ? dqpn : qp->qp_num,
		.max_dest_rd_atomic = (uint8_t)rd,
		.min_rnr_timer = 1,
	};

	peer_av(&a.ah_attr, peer);
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = rnr_retry;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");
}

/* `recv OFF LEN`: one receive WQE into the MR there (its SRQ's, if any). */
static int post_recv_at(struct ibv_qp *qp, const struct ibv_mr *mr,
			unsigned long off, unsigned long len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)mr->addr + off,
			       .length = (uint32_t)len, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = qp->srq ? off : 7, .sg_list = &sge,
				  .num_sge = 1 }, *bad;

	if (qp->srq)
		return ibv_post_srq_recv(qp->srq, &wr, &bad);
	return ibv_post_recv(qp, &wr, &bad);
}

/* `wc MS`: the next completion within MS ms, with its wr_id. */
static void wc_within(struct ibv_qp *qp, unsigned long ms)
{
	struct ibv_wc wc;
	unsigned long i;
	int n = 0;

	for (i = 0; i <= ms && !(n = ibv_poll_cq(qp->recv_cq, 1, &wc)); i++)
		usleep(1000);
	if (n <= 0) {
		printf("none\n");
		return;
	}
	printf("wc wr_id %llu status %d opcode %d len %u\n",
	       (unsigned long long)wc.wr_id, wc.status, wc.opcode, wc.byte_len);
}

/* `event MS`: the next asynchronous event within MS ms. */
static void event_within(struct ibv_context *ctx, unsigned long ms)
{
	struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;

	if (poll(&pfd, 1, (int)ms) != 1 || ibv_get_async_event(ctx, &ev)) {
		printf("none\n");
		return;
	}
	printf("event %d\n", ev.event_type);
	ibv_ack_async_event(&ev);
}

/* `poll`: the next completion within 5 s, or "none". */
static void poll_one(struct ibv_qp *qp)
{
	struct ibv_wc wc;
	int i, n = 0;

	for (i = 0; i < 5000 && !(n = ibv_poll_cq(qp->recv_cq, 1, &wc)); i++)
		usleep(1000);
	if (n <= 0) {
		printf("none\n");
		return;
	}
	printf("wc status %d opcode %d flags %#x len %u\n", wc.status, wc.opcode,
	       wc.wc_flags, wc.byte_len);
}

static void serve(struct ibv_qp *qp, const struct ibv_mr *mr)
{
	const unsigned char *buf = mr->addr;
	char line[128], cmd[16], peer[64];
	unsigned long off, len, i;

	while (fgets(line, sizeof(line), stdin)) {
		off = len = 0;
		if (sscanf(line, "%15s %lu %lu", cmd, &off, &len) < 1)
			continue;
		if (!strcmp(cmd, "dump") && off <= MR_LEN && len <= MR_LEN - off) {
			for (i = 0; i < len; i++)
				printf("%02x", buf[off + i]);
			printf("\n");
		} else if (!strcmp(cmd, "state")) {
			struct ibv_qp_init_attr ia;
			struct ibv_qp_attr a;

			if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
				die("ibv_query_qp");
			printf("%d\n", a.qp_state);
		} else if (!strcmp(cmd, "psn")) {
			struct ibv_qp_init_attr ia;
			struct ibv_qp_attr a;

			if (ibv_query_qp(qp, &a, IBV_QP_SQ_PSN | IBV_QP_RQ_PSN, &ia))
				die("ibv_query_qp");
			printf("sq_psn %u rq_psn %u\n", a.sq_psn, a.rq_psn);
		} else if (!strcmp(cmd, "move") &&
			   sscanf(line, "%*s %63s", peer) == 1) {
			printf("%s\n", move_to(qp, peer) ? "refused" : "moved");
		} else if (!strcmp(cmd, "recv") && off <= MR_LEN && len <= MR_LEN - off) {
			printf("%s\n", post_recv_at(qp, mr, off, len) ? "refused" : "posted");
		} else if (!strcmp(cmd, "poll")) {
			poll_one(qp);
		} else if (!strcmp(cmd, "wc") && off <= 60000) {
			wc_within(qp, off);
		} else if (!strcmp(cmd, "event") && off <= 60000) {
			event_within(qp->context, off);
		} else if (!strcmp(cmd, "send") && off <= MR_LEN) {
			struct ibv_sge sge = { .addr = (uintptr_t)mr->addr,
					       .length = (uint32_t)off, .lkey = mr->lkey };
			struct ibv_send_wr wr = { .wr_id = 5, .sg_list = &sge, .num_sge = 1,
						  .opcode = IBV_WR_SEND,
						  .send_flags = IBV_SEND_SIGNALED }, *bad;

			printf("%d\n", ibv_post_send(qp, &wr, &bad));
		} else if (!strcmp(cmd, "unsrq") && qp->srq) {
			printf("%d\n", ibv_destroy_srq(qp->srq));
			qp->srq = NULL;
		} else if (!strcmp(cmd, "arm") && qp->srq) {
			struct ibv_srq_attr sa = { .srq_limit = (uint32_t)off };

			printf("%s\n", ibv_modify_srq(qp->srq, &sa, IBV_SRQ_LIMIT) ?
			       "refused" : "armed");
		} else if (!strcmp(cmd, "quit")) {
			return;
		}
		printf("ok\n");
		fflush(stdout);
	}
}

/* An XRC target of domain xrcd, its messages into srq, connected to peer. */
static struct ibv_qp *xrc_target(struct ibv_context *ctx, struct ibv_xrcd *xrcd,
				 const char *peer, uint32_t dqpn)
{
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_XRC_RECV,
		.comp_mask = IBV_QP_INIT_ATTR_XRCD,
		.xrcd = xrcd,
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	struct ibv_qp *qp = ibv_create_qp_ex(ctx, &ia);

	if (!qp)
		die("ibv_create_qp_ex XRC_RECV");
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX |
				  IBV_QP_ACCESS_FLAGS))
		die("XRC INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.min_rnr_timer = 1;
	peer_av(&a.ah_attr, peer);
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("XRC RTR");
	return qp;
}

/* `xrc`: two targets and their domain's SRQ, served as "srq" is. */
static int xrc_main(char **argv)
{
	struct ibv_xrcd_init_attr xa = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = -1,
		.oflags = O_CREAT,
	};
	struct ibv_srq_init_attr_ex sa = {
		.attr = { .max_wr = 16, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			     IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ,
		.srq_type = IBV_SRQT_XRC,
	};
	uint32_t dqpn = (uint32_t)strtoul(argv[3], NULL, 0), srqn;
	struct ibv_context *ctx = open_named(argv[1]);
	struct ibv_qp *t1, *t2, view = { 0 };
	struct ibv_xrcd *xrcd;
	struct ibv_mr *mr;
	unsigned char *buf;

	sa.pd = ibv_alloc_pd(ctx);
	sa.cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	xrcd = ibv_open_xrcd(ctx, &xa);
	buf = mmap(NULL, MR_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!sa.pd || !sa.cq || !xrcd || buf == MAP_FAILED)
		die("xrc setup");
	memset(buf, 'B', MR_LEN);
	sa.xrcd = xrcd;
	mr = ibv_reg_mr(sa.pd, buf, MR_LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	view.srq = mr ? ibv_create_srq_ex(ctx, &sa) : NULL;
	if (!view.srq || ibv_get_srq_num(view.srq, &srqn))
		die("ibv_reg_mr/ibv_create_srq_ex");
	t1 = xrc_target(ctx, xrcd, argv[2], dqpn);
	t2 = xrc_target(ctx, xrcd, argv[2], dqpn + 1);
	printf("QPN %u RKEY %u ADDR %llu LEN %u\n", t1->qp_num, mr->rkey,
	       (unsigned long long)(uintptr_t)buf, MR_LEN);
	printf("XRC QPN2 %u SRQN %u\n", t2->qp_num, srqn);
	fflush(stdout);
	/* serve() sees the SRQ and its CQ through a QP-shaped view */
	view.context = ctx;
	view.recv_cq = sa.cq;
	view.qp_num = t1->qp_num;
	serve(&view, mr);
	ibv_destroy_qp(t2);
	ibv_destroy_qp(t1);
	if (view.srq)
		ibv_destroy_srq(view.srq);
	ibv_dereg_mr(mr);
	ibv_close_xrcd(xrcd);
	ibv_destroy_cq(sa.cq);
	ibv_dealloc_pd(sa.pd);
	ibv_close_device(ctx);
	return 0;
}

int main(int argc, char **argv)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	unsigned char *buf;

	if (argc != 5 && (argc != 6 || (strcmp(argv[5], "srq") && strcmp(argv[5], "xrc") &&
					strcmp(argv[5], "rnr2")))) {
		fprintf(stderr, "usage: roce-qp-helper DEV PEER_IPV4 DEST_QPN MAX_DEST_RD_ATOMIC "
			"[srq|xrc|rnr2]\n");
		return 2;
	}
	if (argc == 6 && !strcmp(argv[5], "xrc"))
		return xrc_main(argv);
	ctx = open_named(argv[1]);
	pd = ibv_alloc_pd(ctx);
	ia.send_cq = ia.recv_cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	buf = mmap(NULL, MR_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!pd || !ia.send_cq || buf == MAP_FAILED)
		die("setup");
	memset(buf, 'B', MR_LEN);
	mr = ibv_reg_mr(pd, buf, MR_LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (argc == 6 && !strcmp(argv[5], "srq")) {
		struct ibv_srq_init_attr sia = { .attr = { .max_wr = 16, .max_sge = 1 } };

		ia.srq = ibv_create_srq(pd, &sia);
		if (!ia.srq)
			die("ibv_create_srq");
	}
	qp = mr ? ibv_create_qp(pd, &ia) : NULL;
	if (!qp)
		die("ibv_reg_mr/ibv_create_qp");
	to_init(qp);
	to_rts(qp, argv[2], (uint32_t)strtoul(argv[3], NULL, 0), atoi(argv[4]),
	       argc == 6 && !strcmp(argv[5], "rnr2") ? 2 : 7);
	printf("QPN %u RKEY %u ADDR %llu LEN %u\n", qp->qp_num, mr->rkey,
	       (unsigned long long)(uintptr_t)buf, MR_LEN);
	fflush(stdout);
	serve(qp, mr);
	ibv_destroy_qp(qp);
	if (ia.srq)
		ibv_destroy_srq(ia.srq);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(ia.send_cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}
