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
 */
#include "config.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define MR_LEN		(1u << 20)
#define GID_V4_INDEX	1	/* a RoCE port's IPv4 GID (roce-device.sh) */

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static struct ibv_context *open_named(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int i;

	for (i = 0; list && list[i] && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
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

static void to_rts(struct ibv_qp *qp, const char *peer, uint32_t dqpn, int rd)
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
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");
}

/* `recv OFF LEN`: one receive WQE into the MR there. */
static int post_recv_at(struct ibv_qp *qp, const struct ibv_mr *mr,
			unsigned long off, unsigned long len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)mr->addr + off,
			       .length = (uint32_t)len, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(qp, &wr, &bad);
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
		} else if (!strcmp(cmd, "quit")) {
			return;
		}
		printf("ok\n");
		fflush(stdout);
	}
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

	if (argc != 5) {
		fprintf(stderr, "usage: roce-qp-helper DEV PEER_IPV4 DEST_QPN MAX_DEST_RD_ATOMIC\n");
		return 2;
	}
	ctx = open_named(argv[1]);
	pd = ibv_alloc_pd(ctx);
	ia.send_cq = ia.recv_cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	buf = mmap(NULL, MR_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!pd || !ia.send_cq || buf == MAP_FAILED)
		die("setup");
	memset(buf, 'B', MR_LEN);
	mr = ibv_reg_mr(pd, buf, MR_LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	qp = mr ? ibv_create_qp(pd, &ia) : NULL;
	if (!qp)
		die("ibv_reg_mr/ibv_create_qp");
	to_init(qp);
	to_rts(qp, argv[2], (uint32_t)strtoul(argv[3], NULL, 0), atoi(argv[4]));
	printf("QPN %u RKEY %u ADDR %llu LEN %u\n", qp->qp_num, mr->rkey,
	       (unsigned long long)(uintptr_t)buf, MR_LEN);
	fflush(stdout);
	serve(qp, mr);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(ia.send_cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}
