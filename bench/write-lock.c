/*
 * bench/write-lock.c: what one tenant's control requests cost another
 * tenant's data path (bench/write-lock runs it).  Modes:
 *
 *   victim SECONDS        RDMA READs of 8 bytes between two QPs of its own,
 *                         one at a time; prints per second "READS N WORST_US"
 *   resizer NQP SECONDS   fills one CQ with NQP x FILL completions it never
 *                         polls, then resizes it to the same size in a loop
 *   exiter NQP            the same CQ, filled, then exits with it alive
 *
 * A resize copies what the CQ holds and a teardown frees what the context
 * holds; done with the daemon's objects lock held for writing, every
 * engine thread waits, and the victim's READs with it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define FILL	16383		/* completions per QP, a QP's whole SQ */

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static uint16_t lid;

static void die(const char *what)
{
	fprintf(stderr, "write-lock: %s: %s\n", what, strerror(errno));
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void open_device(void)
{
	struct ibv_device **list;
	struct ibv_port_attr port;
	int n;

	list = ibv_get_device_list(&n);
	if (!list || n < 1)
		die("no device");
	ctx = ibv_open_device(list[0]);
	if (!ctx)
		die("ibv_open_device");
	ibv_free_device_list(list);
	pd = ibv_alloc_pd(ctx);
	if (!pd || ibv_query_port(ctx, 1, &port))
		die("PD or port");
	lid = port.lid;
}

static struct ibv_qp *rc_qp(struct ibv_cq *scq, struct ibv_cq *rcq, int depth)
{
	struct ibv_qp_init_attr a = {
		.send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = (uint32_t)depth, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);

	if (!qp)
		die("ibv_create_qp");
	return qp;
}

/* RESET -> INIT -> RTR -> RTS towards dest, READs and WRITEs allowed. */
static void rc_connect(struct ibv_qp *qp, uint32_t dest)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.dlid = lid;
	a.ah_attr.port_num = 1;
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
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			  IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");
}

static struct ibv_mr *buffer(void)
{
	void *buf = calloc(1, 4096);
	struct ibv_mr *mr;

	mr = buf ? ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE |
			      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE) : NULL;
	if (!mr)
		die("MR");
	return mr;
}

static void post(struct ibv_qp *qp, enum ibv_wr_opcode op, struct ibv_mr *mr,
		 uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)mr->addr, len, mr->lkey };
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = len ? 1 : 0, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { (uintptr_t)mr->addr + 64, mr->rkey },
	}, *bad;

	if (ibv_post_send(qp, &wr, &bad))
		die("ibv_post_send");
}

static int victim(double seconds)
{
	struct ibv_cq *cq;
	struct ibv_qp *a, *b;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	double end, second, t, worst = 0;
	long reads = 0;
	int n;

	open_device();
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!cq)
		die("CQ");
	a = rc_qp(cq, cq, 16);
	b = rc_qp(cq, cq, 16);
	rc_connect(a, b->qp_num);
	rc_connect(b, a->qp_num);
	mr = buffer();
	end = now_s() + seconds;
	second = now_s() + 1;
	while ((t = now_s()) < end) {
		post(a, IBV_WR_RDMA_READ, mr, 8);
		while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
			;
		if (n < 0 || wc.status != IBV_WC_SUCCESS)
			die("READ completion");
		t = now_s() - t;
		worst = t > worst ? t : worst;
		reads++;
		if (now_s() >= second) {
			printf("READS %ld %.0f\n", reads, worst * 1e6);
			fflush(stdout);
			reads = 0;
			worst = 0;
			second += 1;
		}
	}
	return 0;
}

/* One CQ holding nqp x FILL completions of WRITEs without data. */
static struct ibv_cq *full_cq(int nqp)
{
	struct ibv_cq *cq, *other;
	struct ibv_qp *a, *b;
	struct ibv_mr *mr;
	int i, j;

	open_device();
	cq = ibv_create_cq(ctx, nqp * FILL, NULL, NULL, 0);
	other = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!cq || !other)
		die("CQ");
	mr = buffer();
	for (i = 0; i < nqp; i++) {
		a = rc_qp(cq, other, FILL + 1);
		b = rc_qp(other, other, 1);
		rc_connect(a, b->qp_num);
		rc_connect(b, a->qp_num);
		for (j = 0; j < FILL; j++)
			post(a, IBV_WR_RDMA_WRITE, mr, 0);
	}
	/* the engine writes them meanwhile (~0.5 M a second); nobody polls */
	sleep(4);
	return cq;
}

static int resizer(int nqp, double seconds)
{
	struct ibv_cq *cq = full_cq(nqp);
	double end = now_s() + seconds;
	long n = 0;

	printf("FILLED %d\n", nqp * FILL);
	fflush(stdout);
	for (; now_s() < end; n++)
		if (ibv_resize_cq(cq, nqp * FILL))
			die("ibv_resize_cq");
	printf("RESIZES %ld\n", n);
	return 0;
}

static int exiter(int nqp)
{
	full_cq(nqp);
	printf("FILLED %d\n", nqp * FILL);
	fflush(stdout);
	return 0;		/* everything left to the daemon */
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "victim"))
		return victim(atof(argv[2]));
	if (argc == 4 && !strcmp(argv[1], "resizer"))
		return resizer(atoi(argv[2]), atof(argv[3]));
	if (argc == 3 && !strcmp(argv[1], "exiter"))
		return exiter(atoi(argv[2]));
	fprintf(stderr, "usage: write-lock victim S | resizer NQP S | exiter NQP\n");
	return 2;
}
