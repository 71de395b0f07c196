/*
 * datapath-probe: what the data path completes, one line per case, for
 * comparing two providers as verbs-probe.c does for the API's calls.
 * Each case connects a fresh pair of QPs, A and B, on the one device (to
 * its own GID on RoCE), posts, and prints each side's work completions
 * (status; for a success also opcode, byte_len, imm_data, wc_flags and,
 * on UD, whether src_qp is the sender), the QPs' states afterwards, the
 * bytes that landed where it matters and the async events the case
 * raised.  Nothing a device may choose is printed: no vendor_err, no
 * opcode or length of an error completion (the spec leaves them
 * undefined), no limits.
 *
 * usage: datapath-probe [DEVICE]	(default: the first device)
 * tests/interop/datapath-probe builds it, runs it on Linux's rxe and on
 * ibverbsd and diffs.  Linked against libibverbs.so.1 alone.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "probe-util.h"

#define PORT	1
#define BUFSZ	16384
#define QKEY	0x11111111
/* long enough for rxe under TCG; a case stops as soon as all it waits for came */
#define WAIT_MS	4000
/* how long nothing must come for "nothing" to be believed */
#define QUIET_MS 600

static struct ibv_context *ctx;
static struct ibv_port_attr port;
static int gid_index;

struct side {
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
};

struct pair {
	enum ibv_qp_type type;
	struct ibv_pd *pd;
	struct ibv_pd *pd2;	/* another PD, for keys that are not A's or B's */
	struct ibv_srq *srq;	/* B's, when the case asks for one */
	struct ibv_ah *ah;	/* UD: to B's GID */
	struct side a, b;
};

/* what a case wants of its pair beyond the defaults */
struct opts {
	int rnr_retry;
	int min_rnr_timer;
	int sig_all;
	int b_srq;
	int b_rtr_only;		/* leave B in RTR (COMM_EST) */
	int b_mr_access;	/* 0: all of them */
	uint32_t inline_data;
};

static void ah_self(struct ibv_ah_attr *ah)
{
	probe_ah_self(ctx, PORT, &port, gid_index, ah);
}

static struct ibv_qp *make_qp(struct pair *p, struct side *s, struct ibv_srq *srq,
			      const struct opts *o)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = s->cq, .recv_cq = s->cq, .srq = srq, .qp_type = p->type,
		.sq_sig_all = o->sig_all,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2,
			 .max_recv_sge = 2, .max_inline_data = o->inline_data },
	};
	return ibv_create_qp(p->pd, &ia);
}

static int connect_qp(struct ibv_qp *qp, uint32_t dest, const struct opts *o, int rtr_only)
{
	struct ibv_ah_attr ah;

	ah_self(&ah);
	if (probe_qp_to_init(qp, PORT, QKEY) || probe_qp_to_rtr(qp, &ah, dest, o->min_rnr_timer))
		return -1;
	return rtr_only ? 0 : probe_qp_to_rts(qp, 12, o->rnr_retry);
}

static int side_init(struct pair *p, struct side *s, int access)
{
	s->buf = aligned_alloc(4096, BUFSZ);
	s->cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!s->buf || !s->cq)
		return -1;
	memset(s->buf, 0, BUFSZ);
	s->mr = ibv_reg_mr(p->pd, s->buf, BUFSZ, access);
	return s->mr ? 0 : -1;
}

static const int all_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
			      IBV_ACCESS_MW_BIND;

static int pair_up(struct pair *p, enum ibv_qp_type t, const struct opts *o)
{
	memset(p, 0, sizeof(*p));
	p->type = t;
	p->pd = ibv_alloc_pd(ctx);
	p->pd2 = ibv_alloc_pd(ctx);
	if (!p->pd || !p->pd2 || side_init(p, &p->a, all_access) ||
	    side_init(p, &p->b, o->b_mr_access ? o->b_mr_access : all_access))
		return -1;
	if (o->b_srq) {
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };

		p->srq = ibv_create_srq(p->pd, &sa);
		if (!p->srq)
			return -1;
	}
	p->a.qp = make_qp(p, &p->a, NULL, o);
	p->b.qp = make_qp(p, &p->b, p->srq, o);
	if (!p->a.qp || !p->b.qp)
		return -1;
	if (t == IBV_QPT_UD) {
		struct ibv_ah_attr ah;

		ah_self(&ah);
		p->ah = ibv_create_ah(p->pd, &ah);
		if (!p->ah)
			return -1;
	}
	if (connect_qp(p->a.qp, p->b.qp->qp_num, o, 0) ||
	    connect_qp(p->b.qp, p->a.qp->qp_num, o, o->b_rtr_only))
		return -1;
	return 0;
}

static void side_down(struct side *s)
{
	probe_release(s->qp, s->mr, s->cq, s->buf);
}

static void pair_down(struct pair *p)
{
	if (p->ah)
		ibv_destroy_ah(p->ah);
	side_down(&p->a);
	side_down(&p->b);
	if (p->srq)
		ibv_destroy_srq(p->srq);
	if (p->pd2)
		ibv_dealloc_pd(p->pd2);
	if (p->pd)
		ibv_dealloc_pd(p->pd);
}

/* ---- posting ----------------------------------------------------------- */

static int post_send(struct pair *p, uint64_t wr_id, enum ibv_wr_opcode op, int flags,
		     struct ibv_sge *sge, int nsge, uint64_t raddr, uint32_t rkey)
{
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.send_flags = flags;
	wr.sg_list = sge;
	wr.num_sge = nsge;
	wr.imm_data = htonl(0x12345678);
	if (op == IBV_WR_SEND_WITH_INV)
		wr.invalidate_rkey = rkey;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 1;
		wr.wr.atomic.swap = 2;
	} else if (p->type == IBV_QPT_UD) {
		wr.wr.ud.ah = p->ah;
		wr.wr.ud.remote_qpn = p->b.qp->qp_num;
		wr.wr.ud.remote_qkey = raddr ? (uint32_t)raddr : QKEY;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	errno = 0;
	return ibv_post_send(p->a.qp, &wr, &bad);
}

static struct ibv_sge sge_of(struct side *s, size_t off, uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)s->buf + off, len, s->mr->lkey };

	return sge;
}

static int post_recv_on(struct side *s, struct ibv_srq *srq, uint64_t wr_id, size_t off,
			uint32_t len)
{
	struct ibv_sge sge = sge_of(s, off, len);
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (srq)
		return ibv_post_srq_recv(srq, &wr, &bad);
	return ibv_post_recv(s->qp, &wr, &bad);
}

/* A sends LEN bytes from offset 0 */
static int send_a(struct pair *p, uint64_t wr_id, enum ibv_wr_opcode op, uint32_t len,
		  uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = sge_of(&p->a, 0, len);

	return post_send(p, wr_id, op, IBV_SEND_SIGNALED, &sge, 1, raddr, rkey);
}

/* ---- what happened ----------------------------------------------------- */

static void print_wc(struct pair *p, const struct ibv_wc *wc)
{
	printf(" {id=%llu %s", (unsigned long long)wc->wr_id, ibv_wc_status_str(wc->status));
	if (wc->status == IBV_WC_SUCCESS) {
		printf(" %s len=%u flags=0x%x", probe_wc_opcode_name(wc->opcode), wc->byte_len,
		       wc->wc_flags & ~IBV_WC_IP_CSUM_OK);
		if (wc->wc_flags & IBV_WC_WITH_IMM)
			printf(" imm=0x%08x", wc->imm_data);
		if (wc->wc_flags & IBV_WC_WITH_INV)
			printf(" inv_rkey=%s", wc->invalidated_rkey ? "set" : "0");
		if (p->type == IBV_QPT_UD && wc->opcode & IBV_WC_RECV)
			printf(" src_qp=%s", wc->src_qp == p->a.qp->qp_num ? "A" : "other");
	}
	printf("}");
}

/* poll CQ until WANT completions or MS ms, then QUIET_MS more for extra ones */
static int collect(struct ibv_cq *cq, int want, long ms, struct ibv_wc *wcs, int max)
{
	long end = probe_now_ms() + ms;
	int n = 0, got;

	while (n < max) {
		got = ibv_poll_cq(cq, max - n, wcs + n);
		if (got < 0)
			return n;
		n += got;
		if (n >= want && end > probe_now_ms() + (want ? 100 : QUIET_MS))
			end = probe_now_ms() + (want ? 100 : QUIET_MS);
		if (probe_now_ms() >= end)
			break;
		if (!got)
			usleep(1000);
	}
	return n;
}

static void show_side(struct pair *p, const char *name, struct ibv_cq *cq, int want)
{
	struct ibv_wc wcs[32];
	int n = collect(cq, want, want ? WAIT_MS : QUIET_MS, wcs, 32), i;

	printf(" %s:", name);
	if (!n)
		printf(" none");
	for (i = 0; i < n; i++)
		print_wc(p, &wcs[i]);
}

static int qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return -1;
	return a.qp_state;
}

static const char *ev_element(struct pair *p, struct ibv_async_event *e)
{
	switch (e->event_type) {
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		return e->element.srq == p->srq ? "SRQ" : "srq?";
	case IBV_EVENT_CQ_ERR:
		return "CQ";
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		return e->element.qp == p->a.qp ? "A" : e->element.qp == p->b.qp ? "B" : "qp?";
	default:
		return "dev";
	}
}

/* the async events that come within MS ms, acknowledged */
static void show_events(struct pair *p, long ms)
{
	struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event e;
	long end = probe_now_ms() + ms;
	int any = 0;

	printf(" events:");
	while (probe_now_ms() < end) {
		if (poll(&pfd, 1, (int)(end - probe_now_ms())) <= 0)
			break;
		if (ibv_get_async_event(ctx, &e))
			break;
		/* the port's and the GID table's are the device's, not the case's */
		if (strcmp(ev_element(p, &e), "dev")) {
			printf(" %s(%s)", ibv_event_type_str(e.event_type), ev_element(p, &e));
			any = 1;
		}
		ibv_ack_async_event(&e);
	}
	if (!any)
		printf(" none");
}

/* the rest of a case's line: completions of both, states, events */
static void finish(struct pair *p, int want_a, int want_b)
{
	show_side(p, "A", p->a.cq, want_a);
	show_side(p, "B", p->b.cq, want_b);
	printf(" qpA=%s qpB=%s", probe_qp_state_name(qp_state(p->a.qp)), probe_qp_state_name(qp_state(p->b.qp)));
	show_events(p, 300);
	printf("\n");
}

static void bytes(const char *label, const char *at, int n)
{
	int i;

	printf(" %s=", label);
	for (i = 0; i < n; i++)
		printf("%02x", (unsigned char)at[i]);
}

/* start a case's line; 0 if the pair is up */
static int begin(struct pair *p, const char *name, enum ibv_qp_type t, const struct opts *o)
{
	static const struct opts none;
	int i;

	printf("%s %s:", probe_qp_type_name(t), name);
	if (pair_up(p, t, o ? o : &none)) {
		printf(" setup failed errno=%d\n", errno);
		pair_down(p);
		return -1;
	}
	for (i = 0; i < BUFSZ; i++)
		p->a.buf[i] = (char)(i + 1);
	return 0;
}

static void posted(const char *what, int rc)
{
	if (rc)
		printf(" %s=%s", what, rc > 0 ? strerror(rc) : strerror(errno));
}

/* ---- the cases --------------------------------------------------------- */

/* A's RDMA OP of 8 bytes at B's buffer + OFF with RKEY; the bytes at B after */
static void remote_op(const char *name, enum ibv_qp_type t, enum ibv_wr_opcode op,
		      int b_access, int rkey_kind, size_t off)
{
	struct opts o = { .b_mr_access = b_access, .rnr_retry = 7, .min_rnr_timer = 1 };
	struct pair p;
	struct ibv_mr *other = NULL;
	uint32_t rkey;

	if (begin(&p, name, t, &o))
		return;
	memset(p.b.buf, 0xbb, 64);
	rkey = p.b.mr->rkey;
	if (rkey_kind == 1)
		rkey = p.b.mr->rkey + 0x1000;
	if (rkey_kind == 2) {
		other = ibv_reg_mr(p.pd2, p.b.buf, BUFSZ, all_access);
		rkey = other ? other->rkey : 0;
	}
	if (op == IBV_WR_RDMA_WRITE_WITH_IMM)
		post_recv_on(&p.b, NULL, 50, 4096, 64);
	posted("post", send_a(&p, 1, op, 8, (uintptr_t)p.b.buf + off, rkey));
	finish(&p, 1, op == IBV_WR_RDMA_WRITE_WITH_IMM && t == IBV_QPT_RC ? 1 : 0);
	if (other)
		ibv_dereg_mr(other);
	bytes("   b", p.b.buf, 8);
	bytes("a", p.a.buf, 8);
	printf("\n");
	pair_down(&p);
}

static void cases_remote(void)
{
	static const struct { enum ibv_wr_opcode op; const char *n; int deny; } ops[] = {
		{ IBV_WR_RDMA_WRITE, "WRITE", IBV_ACCESS_REMOTE_WRITE },
		{ IBV_WR_RDMA_READ, "READ", IBV_ACCESS_REMOTE_READ },
		{ IBV_WR_ATOMIC_FETCH_AND_ADD, "FADD", IBV_ACCESS_REMOTE_ATOMIC },
		{ IBV_WR_ATOMIC_CMP_AND_SWP, "CSWAP", IBV_ACCESS_REMOTE_ATOMIC },
	};
	char name[64];
	size_t i;

	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		snprintf(name, sizeof(name), "%s ok", ops[i].n);
		remote_op(name, IBV_QPT_RC, ops[i].op, 0, 0, 0);
		snprintf(name, sizeof(name), "%s wrong rkey", ops[i].n);
		remote_op(name, IBV_QPT_RC, ops[i].op, 0, 1, 0);
		snprintf(name, sizeof(name), "%s rkey of another PD", ops[i].n);
		remote_op(name, IBV_QPT_RC, ops[i].op, 0, 2, 0);
		/* 8 bytes across its end; an atomic (aligned) just past it */
		snprintf(name, sizeof(name), "%s beyond the MR", ops[i].n);
		remote_op(name, IBV_QPT_RC, ops[i].op, 0, 0, i < 2 ? BUFSZ - 4 : BUFSZ);
		snprintf(name, sizeof(name), "%s without the access right", ops[i].n);
		remote_op(name, IBV_QPT_RC, ops[i].op, all_access & ~ops[i].deny, 0, 0);
	}
	remote_op("FADD misaligned", IBV_QPT_RC, IBV_WR_ATOMIC_FETCH_AND_ADD, 0, 0, 4);
	remote_op("CSWAP misaligned", IBV_QPT_RC, IBV_WR_ATOMIC_CMP_AND_SWP, 0, 0, 4);
	remote_op("WRITE wrong rkey", IBV_QPT_UC, IBV_WR_RDMA_WRITE, 0, 1, 0);
	remote_op("WRITE without the access right", IBV_QPT_UC, IBV_WR_RDMA_WRITE,
		  all_access & ~IBV_ACCESS_REMOTE_WRITE, 0, 0);
	remote_op("WRITE_WITH_IMM wrong rkey", IBV_QPT_RC, IBV_WR_RDMA_WRITE_WITH_IMM, 0, 1, 0);
}

static void case_rnr(int rnr_retry)
{
	struct opts o = { .rnr_retry = rnr_retry, .min_rnr_timer = 1 };
	struct pair p;
	char name[64];

	snprintf(name, sizeof(name), "SEND no receive rnr_retry=%d", rnr_retry);
	if (begin(&p, name, IBV_QPT_RC, &o))
		return;
	posted("post", send_a(&p, 1, IBV_WR_SEND, 32, 0, 0));
	if (rnr_retry == 7) {
		/* retries forever: nothing for a while, then the receive lets it in */
		show_side(&p, "A(before recv)", p.a.cq, 0);
		post_recv_on(&p.b, NULL, 60, 0, 64);
	}
	finish(&p, 1, rnr_retry == 7);
	pair_down(&p);
}

static void case_recv_small(enum ibv_qp_type t)
{
	struct opts o = { .rnr_retry = 7, .min_rnr_timer = 1 };
	struct pair p;

	if (begin(&p, "SEND 64 into a 16-byte receive", t, &o))
		return;
	post_recv_on(&p.b, NULL, 70, 0, 16);
	post_recv_on(&p.b, NULL, 71, 64, 64);
	posted("post", send_a(&p, 1, IBV_WR_SEND, 64, 0, 0));
	posted("post2", send_a(&p, 2, IBV_WR_SEND, 8, 0, 0));
	finish(&p, t == IBV_QPT_RC ? 1 : 2, 1);
	pair_down(&p);
}

static void case_imm(enum ibv_qp_type t, enum ibv_wr_opcode op, const char *name, uint32_t len)
{
	struct opts o = { .rnr_retry = 7, .min_rnr_timer = 1 };
	struct pair p;

	if (begin(&p, name, t, &o))
		return;
	post_recv_on(&p.b, NULL, 80, 0, 64);
	if (len)
		posted("post", send_a(&p, 1, op, len, (uintptr_t)p.b.buf + 128, p.b.mr->rkey));
	else
		posted("post", post_send(&p, 1, op, IBV_SEND_SIGNALED, NULL, 0,
					 (uintptr_t)p.b.buf + 128, p.b.mr->rkey));
	finish(&p, 1, 1);
	bytes("   b", p.b.buf, 4);
	bytes("b+128", p.b.buf + 128, 4);
	printf("\n");
	pair_down(&p);
}

static void case_zero(enum ibv_qp_type t, enum ibv_wr_opcode op, const char *name)
{
	struct opts o = { .rnr_retry = 7, .min_rnr_timer = 1 };
	struct pair p;
	int want_b = op == IBV_WR_SEND || op == IBV_WR_RDMA_WRITE_WITH_IMM;

	if (begin(&p, name, t, &o))
		return;
	post_recv_on(&p.b, NULL, 90, 0, 64);
	posted("post", post_send(&p, 1, op, IBV_SEND_SIGNALED, NULL, 0,
				 (uintptr_t)p.b.buf, p.b.mr->rkey));
	finish(&p, 1, want_b);
	pair_down(&p);
}

/* B binds a type-2 MW, or not; A sends with invalidate of its rkey (or B's MR's) */
static void case_inv(const char *name, int what)
{
	struct opts o = { .rnr_retry = 7, .min_rnr_timer = 1 };
	struct pair p;
	struct ibv_mw *mw = NULL;
	uint32_t rkey;

	if (begin(&p, name, IBV_QPT_RC, &o))
		return;
	rkey = p.b.mr->rkey;
	if (what) {
		struct ibv_send_wr wr = { .wr_id = 99, .opcode = IBV_WR_BIND_MW,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;
		struct ibv_wc wc;
		int k, n = 0;

		mw = ibv_alloc_mw(p.pd, what == 1 ? IBV_MW_TYPE_2 : IBV_MW_TYPE_1);
		if (!mw) {
			printf(" alloc_mw failed\n");
			pair_down(&p);
			return;
		}
		if (what == 1) {
			wr.bind_mw.mw = mw;
			wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
			wr.bind_mw.bind_info.mr = p.b.mr;
			wr.bind_mw.bind_info.addr = (uintptr_t)p.b.buf;
			wr.bind_mw.bind_info.length = 4096;
			wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
			posted("bind", ibv_post_send(p.b.qp, &wr, &bad));
			rkey = wr.bind_mw.rkey;
		} else {
			struct ibv_mw_bind b = { .wr_id = 99, .send_flags = IBV_SEND_SIGNALED,
				.bind_info = { .mr = p.b.mr, .addr = (uintptr_t)p.b.buf,
					       .length = 4096,
					       .mw_access_flags = IBV_ACCESS_REMOTE_WRITE } };

			posted("bind", ibv_bind_mw(p.b.qp, mw, &b));
			rkey = mw->rkey;
		}
		for (k = 0; k < 400 && (n = ibv_poll_cq(p.b.cq, 1, &wc)) == 0; k++)
			usleep(10000);
		printf(" bind: %s", n > 0 ? ibv_wc_status_str(wc.status) : "no completion");
	}
	post_recv_on(&p.b, NULL, 100, 0, 64);
	posted("post", send_a(&p, 1, IBV_WR_SEND_WITH_INV, 16, 0, rkey));
	finish(&p, 1, 1);
	if (mw) {
		/* an invalidated window refuses a write through it */
		printf("RC %s, then WRITE through it:", name);
		posted("post", send_a(&p, 2, IBV_WR_RDMA_WRITE, 8, (uintptr_t)p.b.buf, rkey));
		finish(&p, 1, 0);
		ibv_dealloc_mw(mw);
	}
	pair_down(&p);
}

static void case_inline(enum ibv_qp_type t)
{
	struct opts o = { .rnr_retry = 7, .min_rnr_timer = 1, .inline_data = 64 };
	struct pair p;
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	uint32_t cap;
	struct ibv_sge sge;

	if (begin(&p, "inline SEND of max_inline_data, then of one more", t, &o))
		return;
	ibv_query_qp(p.a.qp, &a, IBV_QP_CAP, &ia);
	cap = ia.cap.max_inline_data;
	post_recv_on(&p.b, NULL, 110, 0, BUFSZ);
	/* 64 bytes (what both gave at least), then one more than the cap */
	sge = sge_of(&p.a, 0, 64);
	sge.lkey = 0xdead;	/* inline: the lkey is not looked at */
	posted("post", post_send(&p, 1, IBV_WR_SEND, IBV_SEND_SIGNALED | IBV_SEND_INLINE,
				 &sge, 1, 0, 0));
	sge = sge_of(&p.a, 0, cap + 1);
	printf(" post(cap+1)=%s",
	       post_send(&p, 2, IBV_WR_SEND, IBV_SEND_SIGNALED | IBV_SEND_INLINE, &sge, 1, 0, 0)
	       ? "refused" : "ok");
	printf(" cap>=64=%d", cap >= 64);
	finish(&p, 1, 1);
	printf("   same=%d\n", !memcmp(p.a.buf, p.b.buf + (t == IBV_QPT_UD ? 40 : 0), 64));
	pair_down(&p);
}

static void case_bad_lkey(int kind)
{
	struct opts o = { .rnr_retry = 7, .min_rnr_timer = 1 };
	struct pair p;
	struct ibv_sge sge;
	struct ibv_mr *mr;

	if (begin(&p, kind ? "SEND from a deregistered MR" : "SEND from an MR of another PD",
		  IBV_QPT_RC, &o))
		return;
	post_recv_on(&p.b, NULL, 120, 0, 64);
	post_recv_on(&p.b, NULL, 121, 0, 64);
	if (kind) {
		mr = ibv_reg_mr(p.pd, p.a.buf, BUFSZ, all_access);
		sge.lkey = mr->lkey;
		ibv_dereg_mr(mr);
	} else {
		mr = ibv_reg_mr(p.pd2, p.a.buf, BUFSZ, all_access);
		sge.lkey = mr->lkey;
	}
	sge.addr = (uintptr_t)p.a.buf;
	sge.length = 16;
	posted("post", post_send(&p, 1, IBV_WR_SEND, IBV_SEND_SIGNALED, &sge, 1, 0, 0));
	posted("post2", send_a(&p, 2, IBV_WR_SEND, 16, 0, 0));
	finish(&p, 2, 0);
	if (!kind)
		ibv_dereg_mr(mr);
	pair_down(&p);
}

/*
 * An unreliable QP's send error: its state after (SQE by the spec, and
 * mlx5's, whose firmware has SQERR2RTS for UC and UD), whether
 * ibv_modify_qp takes it back to RTS, and whether a SEND then goes.
 */
static void case_sqe(enum ibv_qp_type t)
{
	struct opts o = { .rnr_retry = 7, .min_rnr_timer = 1 };
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS };
	struct pair p;
	struct ibv_sge sge;

	if (begin(&p, "bad lkey, then back to RTS", t, &o))
		return;
	post_recv_on(&p.b, NULL, 190, 0, 64);
	sge = sge_of(&p.a, 0, 16);
	sge.lkey ^= 0x55aa00u;
	posted("post", post_send(&p, 1, IBV_WR_SEND, IBV_SEND_SIGNALED, &sge, 1, 0, 0));
	posted("post2", send_a(&p, 2, IBV_WR_SEND, 16, 0, 0));
	finish(&p, 2, 0);
	printf("%s bad lkey, then back to RTS: modify=%s", probe_qp_type_name(t),
	       strerror(ibv_modify_qp(p.a.qp, &a, IBV_QP_STATE)));
	posted("post3", send_a(&p, 3, IBV_WR_SEND, 16, 0, 0));
	finish(&p, 1, 1);
	pair_down(&p);
}

static void to_err(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

static void case_post_after_err(enum ibv_qp_type t)
{
	struct opts o = { .rnr_retry = 7, .min_rnr_timer = 1 };
	struct pair p;

	if (begin(&p, "posts after ERR", t, &o))
		return;
	to_err(p.a.qp);
	posted("s1", send_a(&p, 1, IBV_WR_SEND, 8, 0, 0));
	posted("r1", post_recv_on(&p.a, NULL, 11, 0, 8));
	posted("s2", send_a(&p, 2, IBV_WR_SEND, 8, 0, 0));
	posted("r2", post_recv_on(&p.a, NULL, 12, 0, 8));
	posted("s3", send_a(&p, 3, IBV_WR_SEND, 8, 0, 0));
	finish(&p, 5, 0);
	pair_down(&p);
}

static void case_err_outstanding(void)
{
	struct opts o = { .rnr_retry = 7, .min_rnr_timer = 31 };
	struct pair p;

	if (begin(&p, "to ERR with work outstanding", IBV_QPT_RC, &o))
		return;
	post_recv_on(&p.a, NULL, 21, 0, 8);
	post_recv_on(&p.a, NULL, 22, 0, 8);
	/* B has no receive: A's sends wait on RNR */
	posted("s1", send_a(&p, 1, IBV_WR_SEND, 8, 0, 0));
	posted("s2", send_a(&p, 2, IBV_WR_SEND, 8, 0, 0));
	usleep(200000);
	to_err(p.a.qp);
	finish(&p, 4, 0);
	pair_down(&p);
}

static void case_unsignaled(void)
{
	struct opts o = { .rnr_retry = 7, .min_rnr_timer = 1 };
	struct pair p;
	struct ibv_sge sge;
	int i;

	if (begin(&p, "3 unsignaled SENDs, then a signaled one", IBV_QPT_RC, &o))
		return;
	for (i = 0; i < 4; i++)
		post_recv_on(&p.b, NULL, 130 + i, 64 * i, 64);
	for (i = 0; i < 4; i++) {
		sge = sge_of(&p.a, 0, 8);
		posted("post", post_send(&p, 1 + i, IBV_WR_SEND, i == 3 ? IBV_SEND_SIGNALED : 0,
					 &sge, 1, 0, 0));
	}
	finish(&p, 1, 4);
	pair_down(&p);
}

static void case_srq(void)
{
	struct opts o = { .rnr_retry = 7, .min_rnr_timer = 1, .b_srq = 1 };
	struct pair p;
	struct ibv_srq_attr sa = { .srq_limit = 4 };
	int i;

	if (begin(&p, "SRQ of 8 armed at 4, 3 SENDs then 2", IBV_QPT_RC, &o))
		return;
	for (i = 0; i < 8; i++)
		post_recv_on(&p.b, p.srq, 140 + i, 64 * i, 64);
	posted("arm", ibv_modify_srq(p.srq, &sa, IBV_SRQ_LIMIT));
	for (i = 0; i < 3; i++)
		posted("post", send_a(&p, 1 + i, IBV_WR_SEND, 8, 0, 0));
	finish(&p, 3, 3);
	printf("RC SRQ, 2 more SENDs:");
	for (i = 0; i < 2; i++)
		posted("post", send_a(&p, 4 + i, IBV_WR_SEND, 8, 0, 0));
	finish(&p, 2, 2);
	memset(&sa, 0, sizeof(sa));
	ibv_query_srq(p.srq, &sa);
	printf("RC SRQ after the event: srq_limit=%u; B to ERR:", sa.srq_limit);
	to_err(p.b.qp);
	finish(&p, 0, 0);
	pair_down(&p);
}

/*
 * An SRQ armed at a limit it is already below: whether the event comes
 * at once or only when a receive is taken, and the limit after.
 */
static void case_srq_below(void)
{
	struct opts o = { .rnr_retry = 7, .min_rnr_timer = 1, .b_srq = 1 };
	struct ibv_srq_attr sa = { .srq_limit = 4 };
	struct pair p;
	int i;

	if (begin(&p, "SRQ holding 2 armed at 4", IBV_QPT_RC, &o))
		return;
	for (i = 0; i < 2; i++)
		post_recv_on(&p.b, p.srq, 200 + i, 64 * i, 64);
	posted("arm", ibv_modify_srq(p.srq, &sa, IBV_SRQ_LIMIT));
	finish(&p, 0, 0);
	memset(&sa, 0, sizeof(sa));
	ibv_query_srq(p.srq, &sa);
	printf("RC SRQ holding 2 armed at 4: srq_limit=%u; a SEND:", sa.srq_limit);
	posted("post", send_a(&p, 1, IBV_WR_SEND, 8, 0, 0));
	finish(&p, 1, 1);
	memset(&sa, 0, sizeof(sa));
	ibv_query_srq(p.srq, &sa);
	printf("RC SRQ holding 1: srq_limit=%u\n", sa.srq_limit);
	pair_down(&p);
}

static void case_ud_qkey(void)
{
	struct pair p;

	if (begin(&p, "SEND to a wrong Q_Key", IBV_QPT_UD, NULL))
		return;
	post_recv_on(&p.b, NULL, 150, 0, 128);
	posted("post", send_a(&p, 1, IBV_WR_SEND, 8, 0x22222222, 0));
	finish(&p, 1, 0);
	pair_down(&p);
}

static void case_ud_big(void)
{
	struct pair p;

	if (begin(&p, "SEND above the path MTU", IBV_QPT_UD, NULL))
		return;
	post_recv_on(&p.b, NULL, 160, 0, BUFSZ);
	posted("post", send_a(&p, 1, IBV_WR_SEND, 8192, 0, 0));
	finish(&p, 1, 0);
	pair_down(&p);
}

static void case_ud_ok(void)
{
	struct pair p;

	if (begin(&p, "SEND_WITH_IMM", IBV_QPT_UD, NULL))
		return;
	post_recv_on(&p.b, NULL, 170, 0, 128);
	posted("post", send_a(&p, 1, IBV_WR_SEND_WITH_IMM, 24, 0, 0));
	finish(&p, 1, 1);
	bytes("   b+40", p.b.buf + 40, 4);
	printf("\n");
	pair_down(&p);
}

static void case_solicited(void)
{
	struct opts o = { .rnr_retry = 7, .min_rnr_timer = 1 };
	struct pair p;
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq, *old;
	struct pollfd pfd;
	struct ibv_sge sge;
	int i;

	if (begin(&p, "solicited-only arm", IBV_QPT_RC, &o))
		return;
	/* B's receives on a CQ with a channel: a B2 on it, with a fresh A */
	cq = ibv_create_cq(ctx, 16, NULL, ch, 0);
	old = p.b.cq;
	{
		struct ibv_qp_init_attr ia = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { 4, 4, 1, 1, 0 } };
		struct ibv_qp *b2 = ibv_create_qp(p.pd, &ia);
		struct ibv_qp *b_saved = p.b.qp;

		ibv_destroy_qp(p.a.qp);
		p.a.qp = make_qp(&p, &p.a, NULL, &o);
		connect_qp(p.a.qp, b2->qp_num, &o, 0);
		connect_qp(b2, p.a.qp->qp_num, &o, 0);
		p.b.qp = b2;
		for (i = 0; i < 3; i++)
			post_recv_on(&p.b, NULL, 180 + i, 0, 64);
		ibv_req_notify_cq(cq, 1);
		sge = sge_of(&p.a, 0, 8);
		posted("post", post_send(&p, 1, IBV_WR_SEND, IBV_SEND_SIGNALED, &sge, 1, 0, 0));
		pfd.fd = ch->fd;
		pfd.events = POLLIN;
		printf(" unsolicited: event=%d", poll(&pfd, 1, 1500) > 0);
		posted("post", post_send(&p, 2, IBV_WR_SEND, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED,
					 &sge, 1, 0, 0));
		printf(" solicited: event=%d", poll(&pfd, 1, WAIT_MS) > 0);
		if (pfd.revents) {
			struct ibv_cq *ecq;
			void *ectx;

			ibv_get_cq_event(ch, &ecq, &ectx);
			ibv_ack_cq_events(ecq, 1);
		}
		p.b.cq = cq;
		finish(&p, 2, 2);
		ibv_destroy_qp(b2);
		p.b.qp = b_saved;
		p.b.cq = old;
	}
	ibv_destroy_cq(cq);
	ibv_destroy_comp_channel(ch);
	pair_down(&p);
}

static void case_fence(void)
{
	struct opts o = { .rnr_retry = 7, .min_rnr_timer = 1 };
	struct pair p;
	struct ibv_sge sge;

	if (begin(&p, "READ then fenced SEND of what it read", IBV_QPT_RC, &o))
		return;
	memset(p.b.buf + 256, 0x5c, 8);
	memset(p.a.buf + 512, 0, 8);
	post_recv_on(&p.b, NULL, 190, 1024, 64);
	sge = sge_of(&p.a, 512, 8);
	posted("read", post_send(&p, 1, IBV_WR_RDMA_READ, IBV_SEND_SIGNALED, &sge, 1,
				 (uintptr_t)p.b.buf + 256, p.b.mr->rkey));
	posted("send", post_send(&p, 2, IBV_WR_SEND, IBV_SEND_SIGNALED | IBV_SEND_FENCE, &sge, 1,
				 0, 0));
	finish(&p, 2, 1);
	bytes("   b+1024", p.b.buf + 1024, 8);
	printf("\n");
	pair_down(&p);
}

static void case_comm_est(void)
{
	struct opts o = { .rnr_retry = 7, .min_rnr_timer = 1, .b_rtr_only = 1 };
	struct pair p;

	if (begin(&p, "SEND to B in RTR", IBV_QPT_RC, &o))
		return;
	post_recv_on(&p.b, NULL, 200, 0, 64);
	posted("post", send_a(&p, 1, IBV_WR_SEND, 8, 0, 0));
	finish(&p, 1, 1);
	pair_down(&p);
}

static void case_srq_last_wqe(void)
{
	struct opts o = { .rnr_retry = 7, .min_rnr_timer = 1, .b_srq = 1 };
	struct pair p;

	if (begin(&p, "SRQ QP to ERR", IBV_QPT_RC, &o))
		return;
	post_recv_on(&p.b, p.srq, 210, 0, 64);
	to_err(p.b.qp);
	finish(&p, 0, 0);
	pair_down(&p);
}

int main(int argc, char **argv)
{
	struct ibv_device **list;

	setvbuf(stdout, NULL, _IOLBF, 0);
	ctx = probe_open("datapath-probe", argc > 1 ? argv[1] : NULL, PORT, &port, &list);
	if (!ctx)
		return 1;
	fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK);
	if (port.link_layer == IBV_LINK_LAYER_ETHERNET)
		gid_index = probe_ipv4_gid(ctx, PORT, &port);

	cases_remote();
	case_rnr(0);
	case_rnr(7);
	case_recv_small(IBV_QPT_RC);
	case_recv_small(IBV_QPT_UC);
	case_recv_small(IBV_QPT_UD);
	case_imm(IBV_QPT_RC, IBV_WR_SEND_WITH_IMM, "SEND_WITH_IMM", 16);
	case_imm(IBV_QPT_RC, IBV_WR_RDMA_WRITE_WITH_IMM, "WRITE_WITH_IMM", 16);
	case_imm(IBV_QPT_UC, IBV_WR_RDMA_WRITE_WITH_IMM, "WRITE_WITH_IMM", 16);
	case_imm(IBV_QPT_RC, IBV_WR_RDMA_WRITE_WITH_IMM, "WRITE_WITH_IMM of 0 bytes", 0);
	case_zero(IBV_QPT_RC, IBV_WR_SEND, "SEND of 0 bytes");
	case_zero(IBV_QPT_RC, IBV_WR_RDMA_WRITE, "WRITE of 0 bytes");
	case_zero(IBV_QPT_RC, IBV_WR_RDMA_READ, "READ of 0 bytes");
	case_zero(IBV_QPT_UD, IBV_WR_SEND, "SEND of 0 bytes");
	case_inv("SEND_WITH_INV of an MR", 0);
	case_inv("SEND_WITH_INV of a type-2 MW", 1);
	case_inv("SEND_WITH_INV of a type-1 MW", 2);
	case_inline(IBV_QPT_RC);
	case_inline(IBV_QPT_UD);
	case_bad_lkey(0);
	case_bad_lkey(1);
	case_post_after_err(IBV_QPT_RC);
	case_post_after_err(IBV_QPT_UD);
	case_err_outstanding();
	case_unsignaled();
	case_srq();
	case_srq_below();
	case_srq_last_wqe();
	case_ud_ok();
	case_ud_qkey();
	case_ud_big();
	case_solicited();
	case_fence();
	case_comm_est();
	case_sqe(IBV_QPT_UC);
	case_sqe(IBV_QPT_UD);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("done\n");
	return 0;
}
