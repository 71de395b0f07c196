/*
 * xrc-helper: XRC against a real daemon (xrc.sh), in one process with
 * several device contexts (each its own daemon connection, as separate
 * processes would have).  Two uids sharing a domain through a file, or
 * not when one cannot open it, is xrc.sh's ibv_xsrq_pingpong runs.
 *
 * - XRC domains: private ones, shared ones keyed by the file (two
 *   contexts, same inode: one domain), O_CREAT/O_EXCL, freed at last close
 *   (a later open without O_CREAT is ENOENT);
 * - XRC SRQs: numbers, sends routed by remote_srqn to the right SRQ and
 *   that SRQ's CQ; a number outside the target's domain fails the sender
 *   with a remote error and takes the target to ERR;
 * - ibv_open_qp by number from another context; the target QP outlives
 *   its creator while opened elsewhere;
 * - RDMA WRITE, READ and an atomic through XRC, checked against the PD of
 *   the SRQ the WQE names;
 * - bad arguments: clean errnos, and the objects stay usable.
 *
 * `xrc-helper --takeovers N` is no Check suite: N times, a new context
 * makes a target that one long-lived context opens, and closes with it
 * alive, so that the long-lived one takes each over.  Then it says so and
 * waits for its stdin to close: xrc.sh counts the daemon's ring arenas
 * meanwhile (each closed context's must be gone).  `--listing` and
 * `--unlinked` are xrc.sh's too (see each); `--open FILE` is
 * stuck-stat.sh's.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "vt.h"
#include "tests/common/check_run.h"

#define XRC_FLAGS	(IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS)

static struct vt_dev A, B;
static char FILE_PATH[64];

static void setup(void)
{
	int fd;

	vt_open(&A);
	vt_open(&B);
	snprintf(FILE_PATH, sizeof(FILE_PATH), "/tmp/xrc-helper-%d", (int)getpid());
	fd = open(FILE_PATH, O_RDONLY | O_CREAT, 0444);
	vt_assert(fd >= 0, "creating %s: %s", FILE_PATH, strerror(errno));
	close(fd);
}

static void teardown(void)
{
	unlink(FILE_PATH);
	vt_close(&B);
	vt_close(&A);
}

/* ibv_open_xrcd on FILE_PATH (or private with path NULL): NULL + errno. */
static struct ibv_xrcd *xrcd_open(struct ibv_context *ctx, const char *path,
				  int oflags)
{
	struct ibv_xrcd_init_attr a = { .comp_mask = XRC_FLAGS, .fd = -1,
					.oflags = oflags };
	struct ibv_xrcd *x;
	int err;

	if (path) {
		a.fd = open(path, O_RDONLY);
		vt_assert(a.fd >= 0, "open %s: %s", path, strerror(errno));
	}
	x = ibv_open_xrcd(ctx, &a);
	err = errno;
	/* The daemon keyed the domain by the file: our fd may go. */
	if (a.fd >= 0)
		close(a.fd);
	errno = err;
	return x;
}

static struct ibv_xrcd *xrcd_must(struct ibv_context *ctx, const char *path,
				  int oflags)
{
	struct ibv_xrcd *x = xrcd_open(ctx, path, oflags);

	vt_assert(x, "ibv_open_xrcd: %s", strerror(errno));
	return x;
}

static struct ibv_srq *xsrq(struct vt_dev *d, struct ibv_xrcd *x,
			    struct ibv_cq *cq)
{
	struct ibv_srq_init_attr_ex a = {
		.attr = { .max_wr = 16, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			     IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ,
		.srq_type = IBV_SRQT_XRC, .pd = d->pd, .xrcd = x, .cq = cq,
	};
	struct ibv_srq *srq = ibv_create_srq_ex(d->ctx, &a);

	vt_assert(srq, "XRC SRQ: %s", strerror(errno));
	return srq;
}

static uint32_t srqn(struct ibv_srq *srq)
{
	uint32_t n = 0;

	vt_assert(ibv_get_srq_num(srq, &n) == 0, "ibv_get_srq_num");
	return n;
}

static struct ibv_qp *tgt_qp(struct vt_dev *d, struct ibv_xrcd *x)
{
	struct ibv_qp_init_attr_ex a = {
		.qp_type = IBV_QPT_XRC_RECV,
		.comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = x,
	};
	struct ibv_qp *qp = ibv_create_qp_ex(d->ctx, &a);

	vt_assert(qp, "XRC_RECV QP: %s", strerror(errno));
	return qp;
}

static struct ibv_qp *ini_qp(struct vt_dev *d, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = cq, .recv_cq = cq,
		.cap = { .max_send_wr = 16, .max_send_sge = 1 },
		.qp_type = IBV_QPT_XRC_SEND,
		.comp_mask = IBV_QP_INIT_ATTR_PD, .pd = d->pd,
	};
	struct ibv_qp *qp = ibv_create_qp_ex(d->ctx, &a);

	vt_assert(qp, "XRC_SEND QP: %s", strerror(errno));
	return qp;
}

static void to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};

	vt_assert(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0, "to INIT");
}

static void to_rtr(struct ibv_qp *qp, uint16_t lid, uint32_t dest)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_4096,
		.dest_qp_num = dest, .max_dest_rd_atomic = 4, .min_rnr_timer = 1,
		.ah_attr = { .dlid = lid, .port_num = 1 },
	};

	vt_assert(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV |
				IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				IBV_QP_MAX_DEST_RD_ATOMIC |
				IBV_QP_MIN_RNR_TIMER) == 0, "to RTR");
}

static void to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS, .timeout = 12, .retry_cnt = 3,
		.rnr_retry = 7, .max_rd_atomic = 4,
	};

	vt_assert(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
				IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0,
		  "to RTS");
}

/* Connect initiator ini to target tgt: the target is only INIT -> RTR. */
static void xconnect(struct ibv_qp *ini, struct ibv_qp *tgt, uint16_t lid)
{
	to_init(tgt);
	to_rtr(tgt, lid, ini->qp_num);
	to_init(ini);
	to_rtr(ini, lid, tgt->qp_num);
	to_rts(ini);
}

/* One WR naming remote_srqn; returns ibv_post_send's value. */
static int xpost(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op,
		 struct ibv_mr *mr, uint32_t len, uint32_t srqn,
		 uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { (uintptr_t)mr->addr, len, mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	wr.qp_type.xrc.remote_srqn = srqn;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 1;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	return ibv_post_send(qp, &wr, &bad);
}

/* A domain's SENDing and receiving ends in one context. */
struct xends {
	struct ibv_cq *sc, *rc;		/* the initiator's, the SRQ's */
	struct ibv_srq *srq;
	struct ibv_mr *s, *r;		/* what is sent, where it lands */
};

static void xends_open(struct xends *e, struct vt_dev *d, struct ibv_xrcd *x)
{
	e->sc = ibv_create_cq(d->ctx, 16, NULL, NULL, 0);
	e->rc = ibv_create_cq(d->ctx, 16, NULL, NULL, 0);
	ck_assert(e->sc && e->rc);
	e->srq = xsrq(d, x, e->rc);
	e->s = vt_reg(d->pd, 4096, VT_ACCESS_ALL);
	e->r = vt_reg(d->pd, 4096, VT_ACCESS_ALL);
}

static void xends_close(struct xends *e)
{
	ck_assert_int_eq(ibv_destroy_srq(e->srq), 0);
	vt_dereg(e->r);
	vt_dereg(e->s);
	ck_assert_int_eq(ibv_destroy_cq(e->rc), 0);
	ck_assert_int_eq(ibv_destroy_cq(e->sc), 0);
}

/*
 * Connect ini to target tgt and SEND len bytes of pattern seed through
 * it into e's SRQ: delivered whole, by tgt.
 */
static void deliver_through(const struct xends *e, struct ibv_qp *ini,
			    struct ibv_qp *tgt, uint16_t lid, uint32_t len,
			    uint32_t seed, const char *what)
{
	struct ibv_wc wc;

	xconnect(ini, tgt, lid);
	vt_srq_recv(e->srq, 5, e->r->addr, 4096, e->r->lkey);
	vt_fill(e->s->addr, len, 0, seed);
	ck_assert_int_eq(xpost(ini, 4, IBV_WR_SEND, e->s, len, srqn(e->srq),
			       0, 0), 0);
	vt_expect_ok(e->sc, &wc, 4, IBV_WC_SEND, what);
	vt_expect_ok(e->rc, &wc, 5, IBV_WC_RECV, what);
	ck_assert_uint_eq(wc.qp_num, tgt->qp_num);
	vt_expect_pat(e->r->addr, len, 0, seed, what);
}

/* ---- domains ----------------------------------------------------------- */

START_TEST(xrcd_private)
{
	struct ibv_xrcd *x1 = xrcd_must(A.ctx, NULL, 0);
	struct ibv_xrcd *x2 = xrcd_must(A.ctx, NULL, 0);

	ck_assert_ptr_eq(x1->context, A.ctx);
	ck_assert_ptr_ne(x1, x2);
	ck_assert_int_eq(ibv_close_xrcd(x1), 0);
	ck_assert_int_eq(ibv_close_xrcd(x2), 0);
}
END_TEST

START_TEST(xrcd_shared_rules)
{
	struct ibv_xrcd *xa, *xb;

	/* Nobody has it yet: without O_CREAT there is nothing to open. */
	ck_assert_ptr_null(xrcd_open(A.ctx, FILE_PATH, 0));
	ck_assert_int_eq(errno, ENOENT);
	xa = xrcd_must(A.ctx, FILE_PATH, O_CREAT | O_EXCL);
	/* It exists now: O_EXCL refuses, plain opens share it. */
	ck_assert_ptr_null(xrcd_open(B.ctx, FILE_PATH, O_CREAT | O_EXCL));
	ck_assert_int_eq(errno, EEXIST);
	xb = xrcd_must(B.ctx, FILE_PATH, 0);
	ck_assert_int_eq(ibv_close_xrcd(xa), 0);
	/* B still holds it. */
	ck_assert_int_eq(ibv_close_xrcd(xrcd_must(A.ctx, FILE_PATH, 0)), 0);
	ck_assert_int_eq(ibv_close_xrcd(xb), 0);
	/* The last close freed it. */
	ck_assert_ptr_null(xrcd_open(A.ctx, FILE_PATH, 0));
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

/*
 * Many files, many domains: each is found again by its own file (not a
 * neighbour's), from either context, and is gone with its last close.
 */
#define MANY_DOMAINS	300

START_TEST(xrcd_many_files)
{
	static struct ibv_xrcd *xa[MANY_DOMAINS];
	char path[96];
	unsigned int i;
	int fd;

	for (i = 0; i < MANY_DOMAINS; i++) {
		snprintf(path, sizeof(path), "%s.%u", FILE_PATH, i);
		fd = open(path, O_RDONLY | O_CREAT, 0444);
		vt_assert(fd >= 0, "creating %s: %s", path, strerror(errno));
		close(fd);
		xa[i] = xrcd_must(A.ctx, path, O_CREAT | O_EXCL);
	}
	for (i = 0; i < MANY_DOMAINS; i++) {
		struct ibv_xrcd *xb;

		snprintf(path, sizeof(path), "%s.%u", FILE_PATH, i);
		/* A's own: O_EXCL refuses; B's open finds it, not a new one */
		ck_assert_ptr_null(xrcd_open(B.ctx, path, O_CREAT | O_EXCL));
		ck_assert_int_eq(errno, EEXIST);
		xb = xrcd_must(B.ctx, path, 0);
		ck_assert_int_eq(ibv_close_xrcd(xb), 0);
		ck_assert_int_eq(ibv_close_xrcd(xa[i]), 0);
		ck_assert_ptr_null(xrcd_open(B.ctx, path, 0));
		ck_assert_int_eq(errno, ENOENT);
		unlink(path);
	}
}
END_TEST

/*
 * Each shared domain holds its file in the daemon: a uid makes at most
 * 1024 that live at once (IBVD_UID_MAX_SHARED_XRCDS), the next is EMFILE,
 * and one closed makes room.  Opening a domain that exists costs nothing.
 */
#define UID_SHARED_DOMAINS	1024

START_TEST(xrcd_shared_capped)
{
	static struct ibv_xrcd *xa[UID_SHARED_DOMAINS + 1];
	struct ibv_xrcd *again;
	char path[96];
	unsigned int i;
	int fd;

	for (i = 0; i <= UID_SHARED_DOMAINS; i++) {
		snprintf(path, sizeof(path), "%s.%u", FILE_PATH, i);
		fd = open(path, O_RDONLY | O_CREAT, 0444);
		vt_assert(fd >= 0, "creating %s: %s", path, strerror(errno));
		close(fd);
		xa[i] = xrcd_open(A.ctx, path, O_CREAT);
		if (i < UID_SHARED_DOMAINS)
			vt_assert(xa[i], "domain %u: %s", i, strerror(errno));
	}
	ck_assert_ptr_null(xa[UID_SHARED_DOMAINS]);
	ck_assert_int_eq(errno, EMFILE);
	/* one that exists opens all the same, from either context */
	snprintf(path, sizeof(path), "%s.%u", FILE_PATH, 0);
	again = xrcd_must(B.ctx, path, O_CREAT);
	ck_assert_int_eq(ibv_close_xrcd(again), 0);
	ck_assert_int_eq(ibv_close_xrcd(xa[0]), 0);
	snprintf(path, sizeof(path), "%s.%u", FILE_PATH, UID_SHARED_DOMAINS);
	xa[UID_SHARED_DOMAINS] = xrcd_must(A.ctx, path, O_CREAT);
	for (i = 1; i <= UID_SHARED_DOMAINS; i++) {
		ck_assert_int_eq(ibv_close_xrcd(xa[i]), 0);
		snprintf(path, sizeof(path), "%s.%u", FILE_PATH, i);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s.%u", FILE_PATH, 0);
	unlink(path);
}
END_TEST

/*
 * One domain for both contexts: an SRQ of A's is reached through a target
 * QP B made, and its number is visible through B's handle on the domain.
 */
START_TEST(xrcd_shared_delivery)
{
	struct ibv_xrcd *xa = xrcd_must(A.ctx, FILE_PATH, O_CREAT);
	struct ibv_xrcd *xb = xrcd_must(B.ctx, FILE_PATH, 0);
	struct ibv_cq *cqa = ibv_create_cq(A.ctx, 16, NULL, NULL, 0);
	struct ibv_cq *cqb = ibv_create_cq(B.ctx, 16, NULL, NULL, 0);
	struct ibv_srq *srq = xsrq(&A, xa, cqa);
	struct ibv_qp *tgt = tgt_qp(&B, xb), *ini = ini_qp(&B, cqb);
	struct ibv_mr *ra = vt_reg(A.pd, 4096, VT_ACCESS_ALL);
	struct ibv_mr *sb = vt_reg(B.pd, 4096, VT_ACCESS_ALL);
	struct ibv_wc wc;

	xconnect(ini, tgt, A.port.lid);
	vt_srq_recv(srq, 7, ra->addr, 4096, ra->lkey);
	vt_fill(sb->addr, 100, 0, 5);
	ck_assert_int_eq(xpost(ini, 1, IBV_WR_SEND, sb, 100, srqn(srq), 0, 0), 0);
	vt_expect_ok(cqb, &wc, 1, IBV_WC_SEND, "send across contexts");
	vt_expect_ok(cqa, &wc, 7, IBV_WC_RECV, "receive in A's SRQ");
	ck_assert_uint_eq(wc.byte_len, 100);
	vt_expect_pat(ra->addr, 100, 0, 5, "data");
	ck_assert_int_eq(ibv_destroy_qp(ini), 0);
	ck_assert_int_eq(ibv_destroy_qp(tgt), 0);
	ck_assert_int_eq(ibv_destroy_srq(srq), 0);
	vt_dereg(ra);
	vt_dereg(sb);
	ck_assert_int_eq(ibv_destroy_cq(cqa), 0);
	ck_assert_int_eq(ibv_destroy_cq(cqb), 0);
	ck_assert_int_eq(ibv_close_xrcd(xa), 0);
	ck_assert_int_eq(ibv_close_xrcd(xb), 0);
}
END_TEST

/* ---- SRQs and routing ---------------------------------------------------- */

/* Two SRQs with a CQ each behind one target: remote_srqn picks the SRQ. */
START_TEST(route_by_srqn)
{
	struct ibv_xrcd *x = xrcd_must(A.ctx, NULL, 0);
	struct ibv_cq *c1 = ibv_create_cq(A.ctx, 16, NULL, NULL, 0);
	struct ibv_cq *c2 = ibv_create_cq(A.ctx, 16, NULL, NULL, 0);
	struct ibv_cq *sc = ibv_create_cq(A.ctx, 16, NULL, NULL, 0);
	struct ibv_srq *s1 = xsrq(&A, x, c1), *s2 = xsrq(&A, x, c2);
	struct ibv_qp *tgt = tgt_qp(&A, x), *ini = ini_qp(&A, sc);
	struct ibv_mr *r1 = vt_reg(A.pd, 4096, VT_ACCESS_ALL);
	struct ibv_mr *r2 = vt_reg(A.pd, 4096, VT_ACCESS_ALL);
	struct ibv_mr *s = vt_reg(A.pd, 4096, VT_ACCESS_ALL);
	struct ibv_wc wc;
	struct ibv_srq *basic;
	struct ibv_srq_init_attr battr = { .attr = { .max_wr = 1, .max_sge = 1 } };
	uint32_t n;

	ck_assert_uint_ne(srqn(s1), 0);
	ck_assert_uint_ne(srqn(s1), srqn(s2));
	/* A basic SRQ has no number senders could name. */
	basic = ibv_create_srq(A.pd, &battr);
	ck_assert_ptr_nonnull(basic);
	ck_assert_int_eq(ibv_get_srq_num(basic, &n), EOPNOTSUPP);
	ck_assert_int_eq(ibv_destroy_srq(basic), 0);

	xconnect(ini, tgt, A.port.lid);
	vt_srq_recv(s1, 11, r1->addr, 4096, r1->lkey);
	vt_srq_recv(s2, 22, r2->addr, 4096, r2->lkey);
	vt_fill(s->addr, 64, 0, 2);
	ck_assert_int_eq(xpost(ini, 2, IBV_WR_SEND, s, 64, srqn(s2), 0, 0), 0);
	vt_expect_ok(sc, &wc, 2, IBV_WC_SEND, "send to SRQ 2");
	vt_expect_ok(c2, &wc, 22, IBV_WC_RECV, "SRQ 2's CQ");
	ck_assert_uint_eq(wc.qp_num, tgt->qp_num);
	ck_assert_uint_eq(wc.src_qp, ini->qp_num);
	vt_expect_pat(r2->addr, 64, 0, 2, "SRQ 2's buffer");
	vt_expect_none(c1, 50, "SRQ 1 untouched");
	/*
	 * Resized, SRQ 1 keeps the receive posted to it, takes one posted
	 * after, and its number still routes.
	 */
	{
		struct ibv_srq_attr ra = { .max_wr = 100 };

		ck_assert_int_eq(ibv_modify_srq(s1, &ra, IBV_SRQ_MAX_WR), 0);
		memset(&ra, 0, sizeof(ra));
		ck_assert_int_eq(ibv_query_srq(s1, &ra), 0);
		ck_assert_uint_ge(ra.max_wr, 100);
		vt_srq_recv(s1, 12, (uint8_t *)r1->addr + 2048, 2048, r1->lkey);
	}
	vt_fill(s->addr, 64, 0, 1);
	ck_assert_int_eq(xpost(ini, 1, IBV_WR_SEND_WITH_IMM, s, 64, srqn(s1), 0, 0), 0);
	vt_expect_ok(sc, &wc, 1, IBV_WC_SEND, "send to SRQ 1");
	vt_expect_ok(c1, &wc, 11, IBV_WC_RECV, "SRQ 1's CQ");
	ck_assert(wc.wc_flags & IBV_WC_WITH_IMM);
	vt_expect_pat(r1->addr, 64, 0, 1, "SRQ 1's buffer");
	vt_fill(s->addr, 32, 0, 3);
	ck_assert_int_eq(xpost(ini, 3, IBV_WR_SEND, s, 32, srqn(s1), 0, 0), 0);
	vt_expect_ok(sc, &wc, 3, IBV_WC_SEND, "second send to SRQ 1");
	vt_expect_ok(c1, &wc, 12, IBV_WC_RECV, "the receive posted after");
	vt_expect_pat((uint8_t *)r1->addr + 2048, 32, 0, 3, "its buffer");

	ck_assert_int_eq(ibv_destroy_qp(ini), 0);
	ck_assert_int_eq(ibv_destroy_qp(tgt), 0);
	ck_assert_int_eq(ibv_destroy_srq(s1), 0);
	ck_assert_int_eq(ibv_destroy_srq(s2), 0);
	vt_dereg(r1);
	vt_dereg(r2);
	vt_dereg(s);
	ck_assert_int_eq(ibv_destroy_cq(c1), 0);
	ck_assert_int_eq(ibv_destroy_cq(c2), 0);
	ck_assert_int_eq(ibv_destroy_cq(sc), 0);
	ck_assert_int_eq(ibv_close_xrcd(x), 0);
}
END_TEST

/* QPs made in d until it has no doorbell left: how many, in *qps. */
static unsigned int fill_doorbells(struct vt_dev *d, struct ibv_cq *cq,
				   struct ibv_qp **qps, unsigned int max)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	unsigned int n;

	for (n = 0; n < max; n++) {
		qps[n] = ibv_create_qp(d->pd, &a);
		if (!qps[n])
			break;
	}
	vt_assert(n < max && errno == ENOMEM,
		  "%u QPs, then %s: not out of doorbells", n, strerror(errno));
	return n;
}

/*
 * A target whose owner goes moves to a holder that has room for its
 * doorbell (its context's all taken by QPs of its own: no room; xrc.sh
 * lowers them to 512 from 16,384, IBVERBSD_CTX_DOORBELLS), the
 * next one in line; with none left that has room it is destroyed, and
 * the holders' handles with it.  Nothing moves half-way: the full holder
 * keeps its handle while another takes over, and the QP works there.
 */
START_TEST(takeover_needs_room)
{
	enum { MAX_QPS = 20000 };
	struct vt_dev C, E;
	struct ibv_qp_open_attr oa = {
		.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
			     IBV_QP_OPEN_ATTR_TYPE,
		.qp_type = IBV_QPT_XRC_RECV,
	};
	struct ibv_qp **qps = calloc(MAX_QPS, sizeof(*qps));
	struct ibv_cq *bcq = ibv_create_cq(B.ctx, 16, NULL, NULL, 0);
	struct ibv_xrcd *xb = xrcd_must(B.ctx, FILE_PATH, O_CREAT), *xc, *xe;
	struct ibv_qp *tgt, *at_b, *at_e, *ini;
	struct xends e;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	unsigned int n, i;

	ck_assert(qps && bcq);
	vt_open(&C);
	vt_open(&E);
	xc = xrcd_must(C.ctx, FILE_PATH, 0);
	xe = xrcd_must(E.ctx, FILE_PATH, 0);
	tgt = tgt_qp(&C, xc);
	oa.qp_num = tgt->qp_num;
	oa.xrcd = xe;
	at_e = ibv_open_qp(E.ctx, &oa);
	oa.xrcd = xb;
	at_b = ibv_open_qp(B.ctx, &oa);	/* the later holder: asked first */
	ck_assert(at_e && at_b);
	n = fill_doorbells(&B, bcq, qps, MAX_QPS);
	printf("takeover_needs_room: %u QPs fill a context's doorbells\n", n);

	/* C goes: B has no room, E takes the target over */
	ck_assert_int_eq(ibv_close_xrcd(xc), 0);
	ck_assert_int_eq(ibv_close_device(C.ctx), 0);
	ck_assert_int_eq(ibv_query_qp(at_b, &qa, IBV_QP_STATE, &qia), 0);
	ck_assert_int_eq(qa.qp_state, IBV_QPS_RESET);
	xends_open(&e, &E, xe);
	ini = ini_qp(&E, e.sc);
	deliver_through(&e, ini, at_e, E.port.lid, 300, 11,
			"a SEND to the target E took over");

	/* E goes too: B, the last holder, still has no room: destroyed */
	ck_assert_int_eq(ibv_destroy_qp(ini), 0);
	xends_close(&e);
	ck_assert_int_eq(ibv_close_xrcd(xe), 0);
	ck_assert_int_eq(ibv_close_device(E.ctx), 0);
	ck_assert_int_eq(ibv_query_qp(at_b, &qa, IBV_QP_STATE, &qia), EINVAL);
	ck_assert_ptr_null(ibv_open_qp(B.ctx, &oa));
	ck_assert_int_eq(errno, ENOENT);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(ibv_destroy_qp(qps[i]), 0);
	free(qps);
	ck_assert_int_eq(ibv_destroy_cq(bcq), 0);
	ck_assert_int_eq(ibv_close_xrcd(xb), 0);
}
END_TEST

/*
 * Back to RESET, both ends, before and after traffic: a target QP has no
 * send CQ and an initiator no receive CQ (the daemon once dereferenced
 * them there; found by the handlers fuzz harness), and a reset pair can be
 * connected again.
 */
static void to_reset(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

	ck_assert_int_eq(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	vt_expect_state(qp, IBV_QPS_RESET, "after the reset");
}

START_TEST(reset_both_ends)
{
	struct ibv_xrcd *x = xrcd_must(A.ctx, NULL, 0);
	struct ibv_cq *rc = ibv_create_cq(A.ctx, 16, NULL, NULL, 0);
	struct ibv_cq *sc = ibv_create_cq(A.ctx, 16, NULL, NULL, 0);
	struct ibv_srq *srq = xsrq(&A, x, rc);
	struct ibv_qp *tgt = tgt_qp(&A, x), *ini = ini_qp(&A, sc);
	struct ibv_mr *r = vt_reg(A.pd, 4096, VT_ACCESS_ALL);
	struct ibv_mr *s = vt_reg(A.pd, 4096, VT_ACCESS_ALL);
	struct ibv_wc wc;
	int round;

	xconnect(ini, tgt, A.port.lid);
	to_reset(tgt);
	to_reset(ini);
	for (round = 0; round < 2; round++) {
		xconnect(ini, tgt, A.port.lid);
		vt_srq_recv(srq, 10 + (uint64_t)round, r->addr, 4096, r->lkey);
		vt_fill(s->addr, 64, 0, (uint32_t)round);
		ck_assert_int_eq(xpost(ini, 1, IBV_WR_SEND, s, 64, srqn(srq), 0, 0), 0);
		vt_expect_ok(sc, &wc, 1, IBV_WC_SEND, "send after a reset");
		vt_expect_ok(rc, &wc, 10 + (uint64_t)round, IBV_WC_RECV, "its receive");
		vt_expect_pat(r->addr, 64, 0, (uint32_t)round, "the SRQ's buffer");
		to_reset(tgt);
		to_reset(ini);
	}
	ck_assert_int_eq(ibv_destroy_qp(ini), 0);
	ck_assert_int_eq(ibv_destroy_qp(tgt), 0);
	ck_assert_int_eq(ibv_destroy_srq(srq), 0);
	vt_dereg(r);
	vt_dereg(s);
	ck_assert_int_eq(ibv_destroy_cq(rc), 0);
	ck_assert_int_eq(ibv_destroy_cq(sc), 0);
	ck_assert_int_eq(ibv_close_xrcd(x), 0);
}
END_TEST

/* An SRQ of another domain (or none at all): remote error, target in ERR. */
START_TEST(wrong_srqn)
{
	struct ibv_xrcd *x = xrcd_must(A.ctx, NULL, 0);
	struct ibv_xrcd *other = xrcd_must(A.ctx, NULL, 0);
	struct ibv_cq *rc = ibv_create_cq(A.ctx, 16, NULL, NULL, 0);
	struct ibv_cq *sc = ibv_create_cq(A.ctx, 16, NULL, NULL, 0);
	struct ibv_srq *mine = xsrq(&A, x, rc), *theirs = xsrq(&A, other, rc);
	struct ibv_qp *tgt = tgt_qp(&A, x), *ini = ini_qp(&A, sc);
	struct ibv_mr *r = vt_reg(A.pd, 4096, VT_ACCESS_ALL);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	struct ibv_wc wc;

	xconnect(ini, tgt, A.port.lid);
	vt_srq_recv(theirs, 9, r->addr, 4096, r->lkey);
	ck_assert_int_eq(xpost(ini, 3, IBV_WR_SEND, r, 8, srqn(theirs), 0, 0), 0);
	vt_expect_wc(sc, &wc, 3, IBV_WC_REM_INV_REQ_ERR, "SRQ of another domain");
	vt_expect_none(rc, 50, "no receive anywhere");
	ck_assert_int_eq(ibv_query_qp(tgt, &qa, IBV_QP_STATE, &qi), 0);
	ck_assert_int_eq(qa.qp_state, IBV_QPS_ERR);
	/* Both SRQs are whole: the one we posted to still holds its WQE. */
	ck_assert_int_eq(ibv_destroy_qp(ini), 0);
	ck_assert_int_eq(ibv_destroy_qp(tgt), 0);
	ck_assert_int_eq(ibv_destroy_srq(mine), 0);
	ck_assert_int_eq(ibv_destroy_srq(theirs), 0);
	vt_dereg(r);
	ck_assert_int_eq(ibv_destroy_cq(rc), 0);
	ck_assert_int_eq(ibv_destroy_cq(sc), 0);
	ck_assert_int_eq(ibv_close_xrcd(x), 0);
	ck_assert_int_eq(ibv_close_xrcd(other), 0);
}
END_TEST

/* ---- target QPs shared by contexts -------------------------------------- */

START_TEST(open_qp_outlives_creator)
{
	struct vt_dev C;
	struct ibv_xrcd *xa, *xb = xrcd_must(B.ctx, FILE_PATH, O_CREAT);
	struct ibv_cq *rc = ibv_create_cq(B.ctx, 16, NULL, NULL, 0);
	struct ibv_cq *sc = ibv_create_cq(B.ctx, 16, NULL, NULL, 0);
	struct ibv_srq *srq = xsrq(&B, xb, rc);
	struct ibv_qp_open_attr oa = {
		.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
			     IBV_QP_OPEN_ATTR_TYPE,
		.qp_type = IBV_QPT_XRC_RECV, .xrcd = xb,
	};
	struct ibv_qp *tgt, *opened, *ini;
	struct ibv_mr *r = vt_reg(B.pd, 4096, VT_ACCESS_ALL);
	struct ibv_mr *s = vt_reg(B.pd, 4096, VT_ACCESS_ALL);
	uint32_t qpn;

	/* C makes the target in the shared domain, B opens it by number. */
	vt_open(&C);
	xa = xrcd_must(C.ctx, FILE_PATH, 0);
	tgt = tgt_qp(&C, xa);
	qpn = tgt->qp_num;
	oa.qp_num = qpn;
	opened = ibv_open_qp(B.ctx, &oa);
	ck_assert_ptr_nonnull(opened);
	ck_assert_uint_eq(opened->qp_num, qpn);
	ck_assert_int_eq(opened->qp_type, IBV_QPT_XRC_RECV);
	/* its creator moves it: the opener cannot tell (ibv_cmd_open_qp) */
	ck_assert_int_eq(opened->state, IBV_QPS_UNKNOWN);
	/* Not a target of this domain, or not a target at all: ENOENT. */
	oa.qp_num = qpn ^ 1;
	ck_assert_ptr_null(ibv_open_qp(B.ctx, &oa));
	ck_assert_int_eq(errno, ENOENT);
	oa.qp_num = qpn;
	oa.qp_type = IBV_QPT_RC;
	ck_assert_ptr_null(ibv_open_qp(B.ctx, &oa));
	ck_assert_int_eq(errno, EINVAL);

	/* The creator goes: its context closes with the QP still in it. */
	ck_assert_int_eq(ibv_close_xrcd(xa), 0);
	ck_assert_int_eq(ibv_close_device(C.ctx), 0);

	/* B drives the QP it opened: connect and deliver through it. */
	ini = ini_qp(&B, sc);
	{
		const struct xends e = { sc, rc, srq, s, r };

		deliver_through(&e, ini, opened, B.port.lid, 200, 9,
				"a SEND through the opened QP");
	}
	ck_assert_uint_eq(opened->qp_num, qpn);

	/* Closing the last handle destroys it: its number is gone. */
	ck_assert_int_eq(ibv_destroy_qp(opened), 0);
	oa.qp_type = IBV_QPT_XRC_RECV;
	ck_assert_ptr_null(ibv_open_qp(B.ctx, &oa));
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(ibv_destroy_qp(ini), 0);
	ck_assert_int_eq(ibv_destroy_srq(srq), 0);
	vt_dereg(r);
	vt_dereg(s);
	ck_assert_int_eq(ibv_destroy_cq(rc), 0);
	ck_assert_int_eq(ibv_destroy_cq(sc), 0);
	ck_assert_int_eq(ibv_close_xrcd(xb), 0);
}
END_TEST

/*
 * A target opened many times by two contexts made alike, so that their
 * handles on it share numbers: each handle lets go of its own context's
 * hold, whatever the other context holds under the same number.  The
 * creator lets go of all of them and closes; the other context then owns
 * the QP (its rings too) and SENDs go through it; its last handle ends it.
 */
#define MANY_OPENS	600

START_TEST(open_qp_many_times)
{
	static struct ibv_qp *in_c[MANY_OPENS], *in_d[MANY_OPENS];
	struct vt_dev C, D;
	struct ibv_xrcd *xb = xrcd_must(B.ctx, FILE_PATH, O_CREAT), *xc, *xd;
	struct ibv_qp_open_attr oa = {
		.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
			     IBV_QP_OPEN_ATTR_TYPE,
		.qp_type = IBV_QPT_XRC_RECV,
	};
	unsigned int i;

	vt_open(&C);
	vt_open(&D);
	xc = xrcd_must(C.ctx, FILE_PATH, 0);
	xd = xrcd_must(D.ctx, FILE_PATH, 0);
	in_c[0] = tgt_qp(&C, xc);
	oa.qp_num = in_c[0]->qp_num;
	for (i = 0; i < MANY_OPENS; i++) {
		if (i) {
			oa.xrcd = xc;
			in_c[i] = ibv_open_qp(C.ctx, &oa);
			ck_assert_ptr_nonnull(in_c[i]);
		}
		oa.xrcd = xd;
		in_d[i] = ibv_open_qp(D.ctx, &oa);
		ck_assert_ptr_nonnull(in_d[i]);
	}
	/* the creator's: from the middle out, its first handle last */
	for (i = MANY_OPENS / 2; i < MANY_OPENS; i++)
		ck_assert_int_eq(ibv_destroy_qp(in_c[i]), 0);
	for (i = 0; i < MANY_OPENS / 2; i++)
		ck_assert_int_eq(ibv_destroy_qp(in_c[MANY_OPENS / 2 - 1 - i]), 0);
	ck_assert_int_eq(ibv_close_xrcd(xc), 0);
	ck_assert_int_eq(ibv_close_device(C.ctx), 0);
	/* D owns it now: SENDs from B's initiator land through it */
	{
		struct ibv_cq *rc = ibv_create_cq(B.ctx, 16, NULL, NULL, 0);
		struct ibv_cq *sc = ibv_create_cq(B.ctx, 16, NULL, NULL, 0);
		struct ibv_srq *srq = xsrq(&B, xb, rc);
		struct ibv_mr *r = vt_reg(B.pd, 4096, VT_ACCESS_ALL);
		struct ibv_mr *sm = vt_reg(B.pd, 4096, VT_ACCESS_ALL);
		struct ibv_qp *ini = ini_qp(&B, sc);
		const struct xends e = { sc, rc, srq, sm, r };

		deliver_through(&e, ini, in_d[MANY_OPENS / 2], D.port.lid, 50,
				11, "a SEND through the other context's handle");
		ck_assert_int_eq(ibv_destroy_qp(ini), 0);
		/* D's, oldest first; the QP goes with the last */
		for (i = 0; i < MANY_OPENS; i++)
			ck_assert_int_eq(ibv_destroy_qp(in_d[i]), 0);
		ck_assert_int_eq(ibv_destroy_srq(srq), 0);
		vt_dereg(r);
		vt_dereg(sm);
		ck_assert_int_eq(ibv_destroy_cq(rc), 0);
		ck_assert_int_eq(ibv_destroy_cq(sc), 0);
	}
	oa.xrcd = xb;
	ck_assert_ptr_null(ibv_open_qp(B.ctx, &oa));
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(ibv_close_xrcd(xd), 0);
	ck_assert_int_eq(ibv_close_device(D.ctx), 0);
	ck_assert_int_eq(ibv_close_xrcd(xb), 0);
}
END_TEST

/* ---- one-sided operations ------------------------------------------------- */

START_TEST(rdma_through_xrc)
{
	struct ibv_xrcd *x = xrcd_must(B.ctx, NULL, 0);
	struct ibv_pd *pd2 = ibv_alloc_pd(B.ctx);
	struct ibv_cq *rc = ibv_create_cq(B.ctx, 16, NULL, NULL, 0);
	struct ibv_cq *sc = ibv_create_cq(A.ctx, 16, NULL, NULL, 0);
	struct ibv_srq *srq = xsrq(&B, x, rc);
	struct ibv_qp *tgt = tgt_qp(&B, x), *ini = ini_qp(&A, sc);
	struct ibv_mr *tmr = vt_reg(B.pd, 8192, VT_ACCESS_ALL);
	struct ibv_mr *other = vt_reg(pd2, 4096, VT_ACCESS_ALL);
	struct ibv_mr *lmr = vt_reg(A.pd, 8192, VT_ACCESS_ALL);
	uint64_t taddr = (uintptr_t)tmr->addr;
	struct ibv_wc wc;

	xconnect(ini, tgt, B.port.lid);
	vt_fill(lmr->addr, 4096, 0, 3);
	ck_assert_int_eq(xpost(ini, 1, IBV_WR_RDMA_WRITE, lmr, 4096, srqn(srq),
			       taddr, tmr->rkey), 0);
	vt_expect_ok(sc, &wc, 1, IBV_WC_RDMA_WRITE, "RDMA WRITE");
	vt_expect_pat(tmr->addr, 4096, 0, 3, "written");
	vt_fill((uint8_t *)tmr->addr + 4096, 4096, 0, 4);
	ck_assert_int_eq(xpost(ini, 2, IBV_WR_RDMA_READ, lmr, 4096, srqn(srq),
			       taddr + 4096, tmr->rkey), 0);
	vt_expect_ok(sc, &wc, 2, IBV_WC_RDMA_READ, "RDMA READ");
	vt_expect_pat(lmr->addr, 4096, 0, 4, "read");
	*(uint64_t *)tmr->addr = 41;
	ck_assert_int_eq(xpost(ini, 3, IBV_WR_ATOMIC_FETCH_AND_ADD, lmr, 8,
			       srqn(srq), taddr, tmr->rkey), 0);
	vt_expect_ok(sc, &wc, 3, IBV_WC_FETCH_ADD, "FETCH_ADD");
	ck_assert_uint_eq(*(uint64_t *)lmr->addr, 41);
	ck_assert_uint_eq(*(uint64_t *)tmr->addr, 42);
	vt_expect_none(rc, 50, "one-sided: no receive completion");
	/* An MR of another PD than the named SRQ's: remote access error. */
	ck_assert_int_eq(xpost(ini, 4, IBV_WR_RDMA_WRITE, lmr, 64, srqn(srq),
			       (uintptr_t)other->addr, other->rkey), 0);
	vt_expect_wc(sc, &wc, 4, IBV_WC_REM_ACCESS_ERR, "rkey of another PD");

	ck_assert_int_eq(ibv_destroy_qp(ini), 0);
	ck_assert_int_eq(ibv_destroy_qp(tgt), 0);
	ck_assert_int_eq(ibv_destroy_srq(srq), 0);
	vt_dereg(tmr);
	vt_dereg(other);
	vt_dereg(lmr);
	ck_assert_int_eq(ibv_dealloc_pd(pd2), 0);
	ck_assert_int_eq(ibv_destroy_cq(rc), 0);
	ck_assert_int_eq(ibv_destroy_cq(sc), 0);
	ck_assert_int_eq(ibv_close_xrcd(x), 0);
}
END_TEST

/* ---- bad arguments ------------------------------------------------------- */

START_TEST(bad_arguments)
{
	struct ibv_xrcd_init_attr xa = { .comp_mask = XRC_FLAGS, .fd = -1 };
	struct ibv_xrcd *x = xrcd_must(A.ctx, NULL, 0);
	struct ibv_cq *cq = ibv_create_cq(A.ctx, 16, NULL, NULL, 0);
	struct ibv_srq_init_attr_ex sa = {
		.attr = { .max_wr = 4, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			     IBV_SRQ_INIT_ATTR_XRCD,
		.srq_type = IBV_SRQT_XRC, .pd = A.pd, .xrcd = x,
	};
	struct ibv_qp_init_attr_ex qa = {
		.qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = A.pd,
	};
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_XRC_RECV,
		.cap = { .max_send_wr = 1, .max_send_sge = 1 },
	};
	struct ibv_srq *srq;
	struct ibv_qp *tgt, *ini;
	struct ibv_recv_wr rwr = { .wr_id = 1 }, *rbad;
	struct ibv_mr *m = vt_reg(A.pd, 4096, VT_ACCESS_ALL);
	struct ibv_wc wc[2];

	/* Domains: unknown mask bits, bad oflags, a bad fd. */
	xa.comp_mask |= IBV_XRCD_INIT_ATTR_RESERVED;
	ck_assert_ptr_null(ibv_open_xrcd(A.ctx, &xa));
	ck_assert_int_eq(errno, EINVAL);
	xa.comp_mask = XRC_FLAGS;
	xa.oflags = O_TRUNC;
	ck_assert_ptr_null(ibv_open_xrcd(A.ctx, &xa));
	ck_assert_int_eq(errno, EINVAL);
	xa.oflags = 0;
	xa.fd = 1000;
	ck_assert_ptr_null(ibv_open_xrcd(A.ctx, &xa));
	ck_assert_int_eq(errno, EBADF);
	/* O_PATH: no right to the file, so none to its domain (as fdget) */
	xa.fd = open(".", O_PATH | O_CLOEXEC);
	ck_assert_int_ge(xa.fd, 0);
	xa.oflags = O_CREAT;
	ck_assert_ptr_null(ibv_open_xrcd(A.ctx, &xa));
	ck_assert_int_eq(errno, EBADF);
	close(xa.fd);
	xa.oflags = 0;
	/* SRQs: XRC without a CQ; tag matching is not there. */
	ck_assert_ptr_null(ibv_create_srq_ex(A.ctx, &sa));
	ck_assert_int_eq(errno, EINVAL);
	sa.comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
	sa.cq = cq;
	sa.srq_type = IBV_SRQT_TM;
	ck_assert_ptr_null(ibv_create_srq_ex(A.ctx, &sa));
	ck_assert_int_eq(errno, EOPNOTSUPP);
	sa.srq_type = IBV_SRQT_XRC;
	srq = ibv_create_srq_ex(A.ctx, &sa);
	ck_assert_ptr_nonnull(srq);
	/* QPs: a target without its domain, or through ibv_create_qp. */
	ck_assert_ptr_null(ibv_create_qp_ex(A.ctx, &qa));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(ibv_create_qp(A.pd, &ia));
	ck_assert_int_eq(errno, EINVAL);
	/* a target's qp_ex would have no send queue: even no ops are refused */
	qa.comp_mask = IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	qa.xrcd = x;
	qa.send_ops_flags = 0;
	ck_assert_ptr_null(ibv_create_qp_ex(A.ctx, &qa));
	ck_assert_int_eq(errno, EOPNOTSUPP);
	/* an RC QP on an XRC SRQ: its domain's messages are not the RC's */
	ia.qp_type = IBV_QPT_RC;
	ia.srq = srq;
	ck_assert_ptr_null(ibv_create_qp(A.pd, &ia));
	ck_assert_int_eq(errno, EINVAL);
	ia.srq = NULL;
	tgt = tgt_qp(&A, x);
	ini = ini_qp(&A, cq);
	/* Nothing is posted to a target; an initiator has no receive queue. */
	ck_assert_int_eq(xpost(tgt, 1, IBV_WR_SEND, m, 8, srqn(srq), 0, 0), EINVAL);
	ck_assert_int_eq(ibv_post_recv(ini, &rwr, &rbad), EINVAL);
	/* The last close of a domain in use is refused, and nothing is lost. */
	ck_assert_int_eq(ibv_close_xrcd(x), EBUSY);
	xconnect(ini, tgt, A.port.lid);
	vt_srq_recv(srq, 8, m->addr, 4096, m->lkey);
	ck_assert_int_eq(xpost(ini, 6, IBV_WR_SEND, m, 8, srqn(srq), 0, 0), 0);
	/* One CQ for both ends: the receive may complete first. */
	ck_assert_int_eq(vt_poll(cq, wc, 2, vt_tmo_ms()), 2);
	ck_assert_int_eq(wc[0].status, IBV_WC_SUCCESS);
	ck_assert_int_eq(wc[1].status, IBV_WC_SUCCESS);
	ck_assert_uint_eq(wc[0].wr_id + wc[1].wr_id, 6 + 8);
	ck_assert_int_eq(ibv_destroy_qp(ini), 0);
	ck_assert_int_eq(ibv_destroy_qp(tgt), 0);
	/* The SRQ holds its CQ. */
	ck_assert_int_eq(ibv_destroy_cq(cq), EBUSY);
	ck_assert_int_eq(ibv_destroy_srq(srq), 0);
	vt_dereg(m);
	ck_assert_int_eq(ibv_destroy_cq(cq), 0);
	ck_assert_int_eq(ibv_close_xrcd(x), 0);
}
END_TEST

START_TEST(device_cap)
{
	ck_assert(A.attr.device_cap_flags & IBV_DEVICE_XRC);
}
END_TEST

/* A context that dies with XRC objects frees them all (the script checks). */
START_TEST(teardown_with_objects)
{
	struct vt_dev C;
	struct ibv_xrcd *x;
	struct ibv_cq *cq;

	vt_open(&C);
	x = xrcd_must(C.ctx, FILE_PATH, O_CREAT);
	cq = ibv_create_cq(C.ctx, 16, NULL, NULL, 0);
	xsrq(&C, x, cq);
	tgt_qp(&C, x);
	ini_qp(&C, cq);
	/* Everything is still there when the device closes. */
	ck_assert_int_eq(ibv_close_device(C.ctx), 0);
	/* The domain went with its only context. */
	ck_assert_ptr_null(xrcd_open(A.ctx, FILE_PATH, 0));
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

static Suite *xrc_suite(void)
{
	Suite *s = suite_create("xrc");
	TCase *tc = tcase_create("xrc");

	tcase_set_timeout(tc, 30.0 * vt_tmul());
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, device_cap);
	tcase_add_test(tc, xrcd_private);
	tcase_add_test(tc, xrcd_shared_rules);
	tcase_add_test(tc, xrcd_many_files);
	tcase_add_test(tc, xrcd_shared_capped);
	tcase_add_test(tc, xrcd_shared_delivery);
	tcase_add_test(tc, route_by_srqn);
	tcase_add_test(tc, wrong_srqn);
	tcase_add_test(tc, reset_both_ends);
	tcase_add_test(tc, open_qp_outlives_creator);
	tcase_add_test(tc, open_qp_many_times);
	tcase_add_test(tc, takeover_needs_room);
	tcase_add_test(tc, rdma_through_xrc);
	tcase_add_test(tc, bad_arguments);
	tcase_add_test(tc, teardown_with_objects);
	suite_add_tcase(s, tc);
	return s;
}

static int takeovers(int n)
{
	struct ibv_qp_open_attr oa = {
		.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
			     IBV_QP_OPEN_ATTR_TYPE,
		.qp_type = IBV_QPT_XRC_RECV,
	};
	struct ibv_xrcd *xc;
	struct vt_dev C;
	char c;
	int i;

	setup();
	oa.xrcd = xrcd_must(B.ctx, FILE_PATH, O_CREAT);
	for (i = 0; i < n; i++) {
		vt_open(&C);
		xc = xrcd_must(C.ctx, FILE_PATH, 0);
		oa.qp_num = tgt_qp(&C, xc)->qp_num;
		vt_assert(ibv_open_qp(B.ctx, &oa), "round %d: ibv_open_qp: %s",
			  i, strerror(errno));
		/* C's target and domain are alive as it goes: B takes over */
		vt_assert(ibv_close_device(C.ctx) == 0, "round %d: close", i);
	}
	printf("%d targets taken over\n", n);
	while (read(0, &c, 1) > 0)
		;
	unlink(FILE_PATH);
	return 0;
}

/*
 * A target QP of B's receiving into A's XRC SRQ, while B has a basic SRQ
 * under the same handle number as A's SRQ (xrc.sh lists the SRQs with
 * ibvctl: the target belongs under no SRQ of B's).  Prints "target QPN
 * srq-handle H" and waits for stdin to close.
 */
static int listing(void)
{
	struct ibv_srq_init_attr basic = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_xrcd *xa, *xb;
	struct ibv_cq *cqa, *cqb;
	struct ibv_srq *srq, *same = NULL;
	struct ibv_qp *tgt, *ini;
	struct ibv_mr *ra, *sb;
	struct ibv_wc wc;
	int i;
	char c;

	setup();
	xa = xrcd_must(A.ctx, FILE_PATH, O_CREAT);
	xb = xrcd_must(B.ctx, FILE_PATH, 0);
	cqa = ibv_create_cq(A.ctx, 16, NULL, NULL, 0);
	cqb = ibv_create_cq(B.ctx, 16, NULL, NULL, 0);
	vt_assert(cqa && cqb, "CQs");
	srq = xsrq(&A, xa, cqa);
	/* B's basic SRQs until one has the number A's XRC SRQ has */
	for (i = 0; i < 64 && !same; i++) {
		struct ibv_srq *b = ibv_create_srq(B.pd, &basic);

		vt_assert(b, "a basic SRQ: %s", strerror(errno));
		if (b->handle == srq->handle)
			same = b;
	}
	vt_assert(same, "no basic SRQ of B's has handle %#x", srq->handle);
	tgt = tgt_qp(&B, xb);
	ini = ini_qp(&B, cqb);
	ra = vt_reg(A.pd, 4096, VT_ACCESS_ALL);
	sb = vt_reg(B.pd, 4096, VT_ACCESS_ALL);
	xconnect(ini, tgt, A.port.lid);
	vt_srq_recv(srq, 7, ra->addr, 4096, ra->lkey);
	vt_fill(sb->addr, 64, 0, 3);
	vt_assert(xpost(ini, 1, IBV_WR_SEND, sb, 64, srqn(srq), 0, 0) == 0, "post");
	vt_expect_ok(cqb, &wc, 1, IBV_WC_SEND, "send across contexts");
	vt_expect_ok(cqa, &wc, 7, IBV_WC_RECV, "receive in A's SRQ");
	printf("target %u srq-handle %u\n", tgt->qp_num, srq->handle);
	while (read(0, &c, 1) > 0)
		;
	unlink(FILE_PATH);
	return 0;
}

/*
 * A shared domain whose file was unlinked and closed: the daemon holds
 * the file until the domain's last close, so that its inode number goes
 * to no other file (another uid's, which would open this domain).
 * Prints "held PATH" and waits for a line on stdin; then closes the
 * domain, prints "closed" and waits for stdin to close (xrc.sh looks at
 * the daemon's fds meanwhile).
 */
static int unlinked(void)
{
	struct ibv_xrcd *x;
	char c;

	setup();
	x = xrcd_must(A.ctx, FILE_PATH, O_CREAT);
	vt_assert(unlink(FILE_PATH) == 0, "unlink: %s", strerror(errno));
	printf("held %s\n", FILE_PATH);
	while (read(0, &c, 1) > 0 && c != '\n')
		;
	vt_assert(ibv_close_xrcd(x) == 0, "ibv_close_xrcd: %s", strerror(errno));
	printf("closed\n");
	while (read(0, &c, 1) > 0)
		;
	vt_close(&B);
	vt_close(&A);
	return 0;
}

/*
 * --open FILE: a shared domain of FILE, opened and closed; prints
 * "opened" (stuck-stat.sh: FILE on a file system that never answers the
 * daemon's questions about it).
 */
static int open_on(const char *path)
{
	struct ibv_xrcd_init_attr attr = {
		.comp_mask = XRC_FLAGS,
		.oflags = O_CREAT,
	};
	struct ibv_xrcd *x;

	attr.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (attr.fd < 0) {
		perror(path);
		return 1;
	}
	vt_open(&A);
	x = ibv_open_xrcd(A.ctx, &attr);
	if (!x) {
		perror("ibv_open_xrcd");
		return 1;
	}
	printf("opened\n");
	ibv_close_xrcd(x);
	close(attr.fd);
	vt_close(&A);
	return 0;
}

int main(int argc, char **argv)
{
	/* each case as it ends: a helper killed by its timeout still says */
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && strcmp(argv[1], "--takeovers") == 0)
		return takeovers(atoi(argv[2]));
	if (argc == 2 && strcmp(argv[1], "--listing") == 0)
		return listing();
	if (argc == 2 && strcmp(argv[1], "--unlinked") == 0)
		return unlinked();
	if (argc == 3 && strcmp(argv[1], "--open") == 0)
		return open_on(argv[2]);
	return check_run(xrc_suite(), CK_VERBOSE);
}
