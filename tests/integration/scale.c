/*
 * scale-helper: many RC QPs, each with its own CQ, from one ordinary verbs
 * program (system headers, -libverbs, run through ibverbsd-run), for
 * scale.sh and bench/scale.
 *
 * usage: scale-helper [-d DEVICE] [-n QPS] [-c CQE] [-w WRS]
 *
 * Opens DEVICE (default: the first), allocates a PD, then creates QPS
 * (default 1000) pairs of a CQ of CQE entries (default 128) and an RC QP
 * of WRS send and receive WRs (default 64, one SGE) on it, and moves each
 * QP to INIT.  It stops at the first failure and says so, keeping what it
 * has.  Then it prints
 *	created N USEC [error ERRNO-NAME at CALL]
 * (N pairs, USEC microseconds for all of them), waits for a line on
 * stdin, destroys every QP and CQ, prints
 *	destroyed N USEC
 * waits for another line (so the caller can look at the daemon with the
 * context still open), and exits 0 if all QPS were created, 1 if not.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "tests/common/open_device.h"

struct opts {
	const char *device;
	unsigned long nqps;
	int cqe;
	uint32_t wrs;
};

struct pair {
	struct ibv_cq *cq;
	struct ibv_qp *qp;
};

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	int c;

	o->device = NULL;
	o->nqps = 1000;
	o->cqe = 128;
	o->wrs = 64;
	while ((c = getopt(argc, argv, "d:n:c:w:")) != -1) {
		switch (c) {
		case 'd': o->device = optarg; break;
		case 'n': o->nqps = strtoul(optarg, NULL, 0); break;
		case 'c': o->cqe = atoi(optarg); break;
		case 'w': o->wrs = (uint32_t)strtoul(optarg, NULL, 0); break;
		default: return -1;
		}
	}
	return o->nqps && o->cqe > 0 && o->wrs ? 0 : -1;
}

static int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_INIT;
	attr.port_num = 1;
	attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	return ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

/* One CQ, one QP on it, INIT: 0, or the errno with *call naming the verb. */
static int make_pair(struct ibv_context *ctx, struct ibv_pd *pd,
		     const struct opts *o, struct pair *p, const char **call)
{
	struct ibv_qp_init_attr ia;
	int ret;

	*call = "ibv_create_cq";
	p->cq = ibv_create_cq(ctx, o->cqe, NULL, NULL, 0);
	if (!p->cq)
		return errno ? errno : EIO;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = p->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = o->wrs;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	*call = "ibv_create_qp";
	p->qp = ibv_create_qp(pd, &ia);
	if (!p->qp) {
		ret = errno ? errno : EIO;
		ibv_destroy_cq(p->cq);
		return ret;
	}
	*call = "ibv_modify_qp";
	ret = to_init(p->qp);
	if (ret) {
		ibv_destroy_qp(p->qp);
		ibv_destroy_cq(p->cq);
	}
	return ret;
}

static int wait_line(void)
{
	char line[64];

	return fgets(line, sizeof(line), stdin) ? 0 : -1;
}

int main(int argc, char **argv)
{
	const char *call = "";
	struct ibv_context *ctx;
	struct opts o;
	struct pair *pairs;
	struct ibv_pd *pd;
	unsigned long n = 0, i;
	int err = 0, bad = 0;
	double t0;

	if (parse_opts(argc, argv, &o) < 0) {
		fprintf(stderr, "usage: scale-helper [-d DEVICE] [-n QPS] [-c CQE] [-w WRS]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	pairs = calloc(o.nqps, sizeof(*pairs));
	ctx = open_device_named(o.device);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (!pairs || !pd) {
		printf("error setup: %s\n", strerror(errno ? errno : ENODEV));
		return 2;
	}
	t0 = now_us();
	while (n < o.nqps && !err) {
		err = make_pair(ctx, pd, &o, &pairs[n], &call);
		if (!err)
			n++;
	}
	printf("created %lu %.0f", n, now_us() - t0);
	if (err)
		printf(" error %s at %s", strerror(err), call);
	printf("\n");
	wait_line();
	t0 = now_us();
	for (i = n; i-- > 0;) {
		bad |= ibv_destroy_qp(pairs[i].qp);
		bad |= ibv_destroy_cq(pairs[i].cq);
	}
	printf("destroyed %lu %.0f%s\n", n, now_us() - t0,
	       bad ? " error: a destroy failed" : "");
	wait_line();
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(pairs);
	return err || bad ? 1 : 0;
}
