/*
 * bench/roce-qp-memory.c: RC QPs on a RoCE device, each connected to a
 * peer that never answers and holding messages in flight, so that the
 * daemon keeps what its transport keeps for a QP whose messages wait for
 * an ACK (bench/roce-qp-memory measures the daemon's RSS around it).
 *
 * usage: roce-qp-memory DEVICE PEER_IPV4 GID_INDEX QPS SENDS
 *   QPS QPs of 128 send WRs (one SGE, 64 bytes inline), each moved to
 *   RTS towards PEER_IPV4 from GID_INDEX, with SENDS inline SENDs of 8
 *   bytes posted.  Prints "ready QPS", then waits to be killed.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "../tests/common/open_device.h"

#define SEND_WRS	128

static void die(const char *what)
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

/* INIT, then RTR and RTS towards dgid: a connection nobody answers. */
static void connect_qp(struct ibv_qp *qp, const union ibv_gid *dgid,
		       int gid_index, uint32_t dest_qpn)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest_qpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = *dgid;
	a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
	a.ah_attr.grh.hop_limit = 64;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("RTR");
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 20;		/* 4 s: the messages stay in flight */
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			  IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");
}

int main(int argc, char **argv)
{
	static char payload[8];
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	union ibv_gid dgid = { .raw = { [10] = 0xff, [11] = 0xff } };
	int gid_index, qps, sends, i, k;

	if (argc != 6) {
		fprintf(stderr, "usage: roce-qp-memory DEVICE PEER_IPV4 "
			"GID_INDEX QPS SENDS\n");
		return 2;
	}
	if (inet_pton(AF_INET, argv[2], &dgid.raw[12]) != 1)
		die(argv[2]);
	gid_index = atoi(argv[3]);
	qps = atoi(argv[4]);
	sends = atoi(argv[5]);
	if (sends < 1 || sends > SEND_WRS)
		sends = 1;
	ctx = open_named(argv[1]);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 4096, NULL, NULL, 0);
	if (!pd || !cq)
		die("PD or CQ");
	for (i = 0; i < qps; i++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = SEND_WRS, .max_recv_wr = 1,
				 .max_send_sge = 1, .max_recv_sge = 1,
				 .max_inline_data = 64 },
		};
		struct ibv_sge sge = { (uintptr_t)payload, sizeof(payload), 0 };
		struct ibv_send_wr wr = {
			.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
			.send_flags = IBV_SEND_INLINE,
		}, *bad;
		struct ibv_qp *qp = ibv_create_qp(pd, &ia);

		if (!qp)
			die("ibv_create_qp");
		connect_qp(qp, &dgid, gid_index, 0x100u + (uint32_t)i);
		for (k = 0; k < sends; k++)
			if (ibv_post_send(qp, &wr, &bad))
				die("ibv_post_send");
	}
	printf("ready %d\n", qps);
	fflush(stdout);
	for (;;)
		pause();
}
