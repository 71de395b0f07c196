/*
 * fairness-helper: the engine's fair sharing (fairness.sh), each role a
 * separate run through ibverbsd-run.  Processes meet through files in DIR
 * (vt_put/vt_get).
 *
 *   target DIR / initiator DIR	(two processes; the initiator's
 *	tenant limited to 20 MB/s, so that its cuts land mid-way) transfers longer than a chunk
 *	between two processes, byte-exact across chunk boundaries, with odd
 *	sizes and several SGEs: RDMA WRITE and READ, and a SEND into a
 *	receive WQE of three SGEs; then QPs moved to ERR or destroyed in the
 *	middle of 256 MiB transfers: every WQE completes (in error or
 *	flushed) on both sides and the engine keeps working.
 *   order			a small SEND on QP B completes while QP A's
 *	256 MiB WRITE on the same engine thread is still in progress.
 *   cuts			(a limited tenant: its 64 MiB SENDs last
 *	seconds) SENDs cut short at either end: the receiver reset and
 *	connected again, moved to ERR, or reset or destroyed with the
 *	receive taken from an SRQ; a UC sender reset; a sender whose memory
 *	faults in the first chunk; a client lengthening its WQE in the ring
 *	between chunks.  Each completion (or its absence) as chunk.c says.
 *   move BYTES			1 MiB RDMA WRITEs in loopback until BYTES
 *	moved; prints "started", then "moved N bytes in MS ms" (the
 *	bandwidth limit).
 *   hog NQP WRITES		NQP loopback pairs in one context, each
 *	keeping two 8 MiB RDMA WRITEs posted, until WRITES have completed:
 *	one tenant with many busy QPs (its share of an engine pass).
 *   hog-direct NQP ROUNDS	NQP direct pairs in one context: each
 *	round fills every sender's transit ring with 64 KiB SENDs to a
 *	receiver that does not poll, and posts an RDMA WRITE behind them,
 *	so that the engine places them all: one tenant's copies out of
 *	rings (its share of a pass all the same).  Prints "ready", waits
 *	for a line on stdin, runs, prints "placed: ...", waits for another.
 *   starve NQP same|split	NQP busy loopback pairs keep eight 1 MiB
 *	WRITEs posted each; a pair made after them (in a second context
 *	with `split`) posts one small WRITE: prints how many busy WRITEs
 *	posted after it completed before it (a starved one waits for all
 *	64 of them).
 *   starve-busy DIR NCTX NQP / starve-other DIR	(two processes, two
 *	uids) NCTX contexts of NQP busy pairs as starve's, and another
 *	tenant's one small WRITE into a page of DIR/page they share: prints
 *	how many busy WRITEs posted after it completed before it landed.
 *   starve-direct NQP same|split	the same with direct pairs whose
 *	turns place SENDs out of their rings: NQP busy pairs each fill
 *	their ring and post a WRITE behind, round after round; a later pair
 *	does a round of one SEND: prints how many busy rounds started after
 *	it ended before it.
 *
 * Exit: 0 pass, 1 fail.
 */
#include "config.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <infiniband/verbs.h>

#include "ring.h"
#include "vt.h"

#define MiB		(1024u * 1024u)
#define CANARY		0xee
#define NQP		3		/* data, ERR in the middle, destroy */
#define BIG		(256u * MiB)	/* what is cut short */
#define AREA		(8u * MiB)

/* Odd sizes, so that no step ends on a page or a chunk boundary. */
#define WRITE_LEN	(5u * MiB + 4097u)
#define READ_LEN	(7u * MiB + 13u)
#define SEND_LEN	(5u * MiB + 1001u)

#define SEED_WRITE	33u
#define SEED_READ	11u
#define SEED_SEND	22u

#define WR_RECV		100u
#define WR_ABORT	200u

static const char *dir;
static struct vt_dev D;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static void get(const char *name, char *buf, size_t len)
{
	vt_assert(vt_get(dir, name, buf, len, 6 * vt_tmo_ms()),
		  "no %s/%s within %d ms", dir, name, 6 * vt_tmo_ms());
}

/* NQP RC QPs on one CQ; their addresses published as PREFIX.N. */
static void make_qps(struct ibv_cq *cq, struct ibv_qp *qp[NQP],
		     struct vt_qp_opts *o, const char *prefix)
{
	char name[32], text[256];
	struct vt_addr a;
	int i;

	memset(o, 0, sizeof(*o));
	o->max_send_sge = 4;
	o->max_recv_sge = 4;
	o->timeout = 14;
	for (i = 0; i < NQP; i++) {
		qp[i] = vt_qp(&D, cq, cq, o);
		vt_qp_addr(&D, qp[i], o, &a);
		vt_addr_str(&a, text, sizeof(text));
		snprintf(name, sizeof(name), "%s.%d", prefix, i);
		vt_put(dir, name, "%s", text);
	}
}

static void connect_qps(struct ibv_qp *qp[NQP], const struct vt_qp_opts *o,
			const char *peer)
{
	char name[32], text[256];
	struct vt_addr a;
	int i;

	for (i = 0; i < NQP; i++) {
		snprintf(name, sizeof(name), "%s.%d", peer, i);
		get(name, text, sizeof(text));
		vt_assert(vt_addr_parse(text, &a) == 0, "bad address '%s'", text);
		vt_connect(&D, qp[i], &a, o);
	}
}

/* The next completion, whatever its wr_id: its wr_id, *status its status. */
static uint64_t wait_any_wc(struct ibv_cq *cq, int *status, const char *what)
{
	struct ibv_wc wc;

	vt_assert(vt_poll(cq, &wc, 1, 3 * vt_tmo_ms()) == 1,
		  "%s: no completion within %d ms", what, 3 * vt_tmo_ms());
	*status = wc.status;
	return wc.wr_id;
}

/* ==== target ================================================================ */

/* The receive SGEs of the SEND: odd sizes with canary gaps between. */
static const uint32_t recv_len[3] = { MiB + 3u, 2u * MiB + 5u, 4u * MiB };
static const uint32_t recv_off[3] = { 0, MiB + 3u + 64u, 3u * MiB + 8u + 128u };

static void check_send(const uint8_t *buf, uint32_t byte_len)
{
	uint64_t msg = 0;
	int i;

	vt_assert(byte_len == SEND_LEN, "RECV byte_len %u, want %u", byte_len, SEND_LEN);
	for (i = 0; i < 3 && msg < SEND_LEN; i++) {
		uint64_t n = SEND_LEN - msg < recv_len[i] ? SEND_LEN - msg : recv_len[i];

		vt_expect_pat(buf + recv_off[i], n, msg, SEED_SEND, "SEND data in its SGE");
		msg += n;
	}
	vt_expect_byte(buf + recv_len[0], 64, CANARY, "gap after SGE 0");
	vt_expect_byte(buf + recv_off[1] + recv_len[1], 64, CANARY, "gap after SGE 1");
	vt_expect_byte(buf + recv_off[2] + (SEND_LEN - recv_len[0] - recv_len[1]),
		       4096, CANARY, "bytes after the message");
}

static int target(void)
{
	struct ibv_mr *src, *dst, *rbuf, *big;
	struct ibv_qp *qp[NQP];
	struct ibv_sge sge[3];
	struct ibv_qp_attr a;
	struct vt_qp_opts o;
	struct ibv_cq *cq;
	struct ibv_wc wc;
	unsigned int seen;
	char text[64];
	uint64_t id;
	int i, st;

	vt_open(&D);
	cq = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	vt_assert(cq, "ibv_create_cq");
	src = vt_reg(D.pd, AREA, VT_ACCESS_ALL);
	dst = vt_reg(D.pd, AREA, VT_ACCESS_ALL);
	rbuf = vt_reg(D.pd, AREA, VT_ACCESS_ALL);
	big = vt_reg(D.pd, BIG, VT_ACCESS_ALL);
	vt_fill(src->addr, AREA, 0, SEED_READ);
	memset(dst->addr, CANARY, AREA);
	memset(rbuf->addr, CANARY, AREA);
	make_qps(cq, qp, &o, "t");
	vt_put(dir, "t.mr", "%llx %x %llx %x %llx %x",
	       (unsigned long long)(uintptr_t)src->addr, src->rkey,
	       (unsigned long long)(uintptr_t)dst->addr, dst->rkey,
	       (unsigned long long)(uintptr_t)big->addr, big->rkey);
	connect_qps(qp, &o, "i");
	for (i = 0; i < 3; i++) {
		sge[i].addr = (uintptr_t)rbuf->addr + recv_off[i];
		sge[i].length = recv_len[i];
		sge[i].lkey = rbuf->lkey;
	}
	vt_recv_sgl(qp[0], WR_RECV, sge, 3);
	/* QPs 1 and 2 each get one big SEND that is cut short. */
	for (i = 1; i < NQP; i++)
		vt_recv(qp[i], WR_ABORT + (uint64_t)i, big->addr, BIG, big->lkey);
	vt_put(dir, "t.ready", "1");

	vt_expect_ok(cq, &wc, WR_RECV, IBV_WC_RECV, "the chunked SEND");
	check_send(rbuf->addr, wc.byte_len);
	say("ok: SEND of %u bytes into 3 SGEs", SEND_LEN);
	get("i.written", text, sizeof(text));
	vt_expect_byte(dst->addr, 4096, CANARY, "before the WRITE");
	vt_expect_pat((uint8_t *)dst->addr + 4096, WRITE_LEN, 0, SEED_WRITE, "WRITE data");
	vt_expect_byte((uint8_t *)dst->addr + 4096 + WRITE_LEN, 4096, CANARY, "after the WRITE");
	say("ok: WRITE of %u bytes", WRITE_LEN);
	vt_put(dir, "t.checked", "1");

	/*
	 * The sender's QP went to ERR or away in the middle: a receive it had
	 * taken completes in error at once; one it had not is flushed when we
	 * move to ERR ourselves.  Either way: exactly one completion each.
	 */
	get("i.cut", text, sizeof(text));
	for (i = 1; i < NQP; i++) {
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_ERR;
		vt_assert(ibv_modify_qp(qp[i], &a, IBV_QP_STATE) == 0, "modify to ERR");
	}
	/*
	 * The two QPs share the CQ, and the two cuts race (the ERR is
	 * flushed by the engine, the destroy by the control thread): their
	 * completions may come in either order, but once each.
	 */
	seen = 0;
	for (i = 1; i < NQP; i++) {
		id = wait_any_wc(cq, &st, "the cut-short receive");
		vt_assert(id > WR_ABORT && id < WR_ABORT + NQP &&
			  !(seen & 1u << (id - WR_ABORT)),
			  "cut-short receive: unexpected or second completion of wr_id %llu",
			  (unsigned long long)id);
		seen |= 1u << (id - WR_ABORT);
		vt_assert(st == IBV_WC_REM_ABORT_ERR || st == IBV_WC_WR_FLUSH_ERR ||
			  st == IBV_WC_SUCCESS, "cut-short receive: %s", vt_status(st));
		say("ok: receive %d of a cut-short SEND: %s",
		    (int)(id - WR_ABORT), vt_status(st));
	}
	vt_expect_none(cq, 200, "completions after the cut");
	/* QP 0 serves the initiator's last WRITE: keep it until then. */
	get("i.done", text, sizeof(text));
	vt_expect_pat((uint8_t *)dst->addr + 4096, WRITE_LEN, 0, SEED_WRITE,
		      "WRITE after the cuts");
	for (i = 0; i < NQP; i++)
		vt_assert(ibv_destroy_qp(qp[i]) == 0, "ibv_destroy_qp");
	vt_dereg(src);
	vt_dereg(dst);
	vt_dereg(rbuf);
	vt_dereg(big);
	vt_assert(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
	vt_close(&D);
	return 0;
}

/* ==== initiator ============================================================== */

/* Post a WR whose local side is the area split into three odd SGEs. */
static void post3(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op,
		  struct ibv_mr *mr, uint32_t len, uint64_t raddr, uint32_t rkey)
{
	static const uint32_t gap = 128;
	uint32_t a = len / 3 + 1, b = len / 3 - 7, c = len - a - b;
	struct ibv_sge sge[3] = {
		{ (uintptr_t)mr->addr, a, mr->lkey },
		{ (uintptr_t)mr->addr + a + gap, b, mr->lkey },
		{ (uintptr_t)mr->addr + a + b + 2 * gap, c, mr->lkey },
	};

	vt_assert(vt_post_sgl(qp, wr_id, op, IBV_SEND_SIGNALED, sge, 3, raddr,
			      rkey) == 0, "post %d", op);
}

/* Fill or check the area as post3 lays out a message of len bytes. */
static void layout3(struct ibv_mr *mr, uint32_t len, uint32_t seed, bool check)
{
	uint32_t a = len / 3 + 1, b = len / 3 - 7, c = len - a - b;
	uint8_t *p = mr->addr;

	if (!check) {
		vt_fill(p, a, 0, seed);
		vt_fill(p + a + 128, b, a, seed);
		vt_fill(p + a + b + 256, c, (uint64_t)a + b, seed);
		return;
	}
	vt_expect_pat(p, a, 0, seed, "READ data, SGE 0");
	vt_expect_pat(p + a + 128, b, a, seed, "READ data, SGE 1");
	vt_expect_pat(p + a + b + 256, c, (uint64_t)a + b, seed, "READ data, SGE 2");
}

/*
 * QP 1's SEND (11) and the WRITE behind it (13) flushed; QP 2's SEND (12)
 * nothing, or done if it beat the destroy.  In whatever order they come.
 */
static void cut_completions(struct ibv_cq *cq)
{
	bool seen11 = false, seen13 = false;
	struct ibv_wc wc;

	while (!seen11 || !seen13) {
		vt_assert(vt_poll(cq, &wc, 1, 3 * vt_tmo_ms()) == 1,
			  "a cut-short WQE never completed");
		switch (wc.wr_id) {
		case 11:
			/* 256 MiB at the initiator's 20 MB/s: cut, surely. */
			vt_assert(wc.status == IBV_WC_WR_FLUSH_ERR,
				  "SEND cut by ERR: %s", vt_status(wc.status));
			say("ok: SEND cut by ERR: %s", vt_status(wc.status));
			seen11 = true;
			break;
		case 12:
			vt_assert(wc.status == IBV_WC_SUCCESS,
				  "SEND of a destroyed QP: %s", vt_status(wc.status));
			break;
		case 13:
			vt_assert(wc.status == IBV_WC_WR_FLUSH_ERR,
				  "WRITE behind it: %s", vt_status(wc.status));
			seen13 = true;
			break;
		default:
			vt_fail("completion of wr_id %llu", (unsigned long long)wc.wr_id);
		}
	}
}

static void modify_err(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	vt_assert(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0, "modify to ERR");
}

static int initiator(void)
{
	unsigned long long src_addr, dst_addr, big_addr;
	unsigned int src_rkey, dst_rkey, big_rkey;
	struct ibv_mr *local, *big;
	struct ibv_qp *qp[NQP];
	struct vt_qp_opts o;
	struct ibv_cq *cq;
	struct ibv_wc wc;
	char text[256];

	vt_open(&D);
	cq = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	vt_assert(cq, "ibv_create_cq");
	local = vt_reg(D.pd, AREA + MiB, VT_ACCESS_ALL);
	big = vt_reg(D.pd, BIG, VT_ACCESS_ALL);
	make_qps(cq, qp, &o, "i");
	get("t.mr", text, sizeof(text));
	vt_assert(sscanf(text, "%llx %x %llx %x %llx %x", &src_addr, &src_rkey,
			 &dst_addr, &dst_rkey, &big_addr, &big_rkey) == 6,
		  "bad t.mr '%s'", text);
	connect_qps(qp, &o, "t");
	get("t.ready", text, sizeof(text));

	layout3(local, WRITE_LEN, SEED_WRITE, false);
	post3(qp[0], 1, IBV_WR_RDMA_WRITE, local, WRITE_LEN, dst_addr + 4096, dst_rkey);
	vt_expect_ok(cq, &wc, 1, IBV_WC_RDMA_WRITE, "chunked WRITE");
	vt_put(dir, "i.written", "1");
	memset(local->addr, 0, AREA + MiB);
	post3(qp[0], 2, IBV_WR_RDMA_READ, local, READ_LEN, src_addr, src_rkey);
	vt_expect_ok(cq, &wc, 2, IBV_WC_RDMA_READ, "chunked READ");
	layout3(local, READ_LEN, SEED_READ, true);
	say("ok: READ of %u bytes into 3 SGEs", READ_LEN);
	layout3(local, SEND_LEN, SEED_SEND, false);
	post3(qp[0], 3, IBV_WR_SEND, local, SEND_LEN, 0, 0);
	vt_expect_ok(cq, &wc, 3, IBV_WC_SEND, "chunked SEND");
	get("t.checked", text, sizeof(text));

	/* Cut short: ERR in the middle of a SEND, destroy in the middle of one. */
	vt_send(qp[1], 11, IBV_WR_SEND, IBV_SEND_SIGNALED, big->addr, BIG, big->lkey, 0, 0);
	vt_send(qp[2], 12, IBV_WR_SEND, IBV_SEND_SIGNALED, big->addr, BIG, big->lkey, 0, 0);
	/* and a WRITE behind the SEND on QP 1, which the flush must reach too */
	vt_send(qp[1], 13, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, big->addr, BIG,
		big->lkey, big_addr, big_rkey);
	vt_sleep_ms(5);
	modify_err(qp[1]);
	vt_assert(ibv_destroy_qp(qp[2]) == 0, "destroy a QP in the middle of a SEND");
	cut_completions(cq);
	vt_put(dir, "i.cut", "1");

	/* The engine still works: one more chunked WRITE on QP 0. */
	layout3(local, WRITE_LEN, SEED_WRITE, false);
	post3(qp[0], 4, IBV_WR_RDMA_WRITE, local, WRITE_LEN, dst_addr + 4096, dst_rkey);
	vt_expect_ok(cq, &wc, 4, IBV_WC_RDMA_WRITE, "WRITE after the cuts");
	vt_put(dir, "i.done", "1");
	vt_expect_none(cq, 200, "completions after the cuts");
	vt_assert(ibv_destroy_qp(qp[0]) == 0, "ibv_destroy_qp");
	vt_assert(ibv_destroy_qp(qp[1]) == 0, "ibv_destroy_qp");
	vt_dereg(local);
	vt_dereg(big);
	vt_assert(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
	vt_close(&D);
	return 0;
}

/* ==== order =================================================================== */

/*
 * One context, so one engine thread: A's 256 MiB WRITE is chunked, so B's
 * small SEND gets its turn between two chunks and completes first.  Without
 * chunking the thread would copy all of A before it looked at B.
 */
/*
 * One try: false if it proves nothing (this process was descheduled long
 * enough for the whole WRITE to finish before the SEND was even posted).
 */
static bool order_once(struct vt_pair *a, struct vt_pair *b, struct ibv_mr *from,
		       struct ibv_mr *to, struct ibv_mr *small)
{
	struct ibv_wc wc;

	vt_recv(b->qp[1], 21, (uint8_t *)small->addr + 2048, 64, small->lkey);
	vt_send(a->qp[0], 20, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, from->addr,
		BIG, from->lkey, (uintptr_t)to->addr, to->rkey);
	vt_send(b->qp[0], 22, IBV_WR_SEND, IBV_SEND_SIGNALED, small->addr, 64,
		small->lkey, 0, 0);
	if (ibv_poll_cq(a->scq[0], 1, &wc) == 1) {
		say("the WRITE finished before the SEND was posted: again");
		vt_expect_ok(b->scq[0], &wc, 22, IBV_WC_SEND, "the small SEND");
		vt_expect_ok(b->rcq[1], &wc, 21, IBV_WC_RECV, "the small SEND");
		return false;
	}
	vt_expect_ok(b->rcq[1], &wc, 21, IBV_WC_RECV, "the small SEND");
	vt_expect_ok(b->scq[0], &wc, 22, IBV_WC_SEND, "the small SEND");
	/* or we were preempted past the rest of the copy: again */
	if (ibv_poll_cq(a->scq[0], 1, &wc) == 1) {
		say("the 256 MiB WRITE completed before the small SEND behind it: again");
		return false;
	}
	vt_expect_ok(a->scq[0], &wc, 20, IBV_WC_RDMA_WRITE, "the 256 MiB WRITE");
	return true;
}

static int order(void)
{
	struct ibv_mr *from, *to, *small;
	struct vt_pair a, b;
	int tries;

	vt_open(&D);
	vt_pair(&a, &D, NULL, 0);
	vt_pair(&b, &D, NULL, 0);
	from = vt_reg(D.pd, BIG, VT_ACCESS_ALL);
	to = vt_reg(D.pd, BIG, VT_ACCESS_ALL);
	small = vt_reg(D.pd, 4096, VT_ACCESS_ALL);
	vt_fill(from->addr, BIG, 0, 7);
	vt_fill(small->addr, 64, 0, 8);
	for (tries = 0; tries < 3 && !order_once(&a, &b, from, to, small); tries++)
		;
	vt_assert(tries < 3, "three times the 256 MiB WRITE completed first "
		  "(not run in chunks, or we were descheduled that long)");
	say("ok: the small SEND completed while the 256 MiB WRITE was in progress");
	vt_expect_pat(to->addr, BIG, 0, 7, "the 256 MiB WRITE");
	vt_expect_pat((uint8_t *)small->addr + 2048, 64, 0, 8, "the small SEND");
	vt_pair_free(&a);
	vt_pair_free(&b);
	vt_dereg(from);
	vt_dereg(to);
	vt_dereg(small);
	vt_close(&D);
	return 0;
}

/* ==== cuts ==================================================================== */

#define CUT_LEN		(64u * MiB)	/* 3 s at the limited tenant's 20 MB/s */

static struct ibv_mr *cut_src, *cut_dst;

static void to_state(struct ibv_qp *qp, enum ibv_qp_state st)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = st;
	vt_assert(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0, "modify QP %u to %d",
		  qp->qp_num, st);
}

/* Side `side` of p through RESET and connected again: a new incarnation. */
static void reincarnate(struct vt_pair *p, int side)
{
	struct vt_addr a;

	to_state(p->qp[side], IBV_QPS_RESET);
	vt_qp_addr(p->d, p->qp[1 - side], &p->o[1 - side], &a);
	vt_connect(p->d, p->qp[side], &a, &p->o[side]);
}

static void cut_send(struct ibv_qp *qp, uint64_t wr_id, uint32_t len)
{
	vt_send(qp, wr_id, IBV_WR_SEND, IBV_SEND_SIGNALED, cut_src->addr, len,
		cut_src->lkey, 0, 0);
}

/* The SEND into cut_dst has begun: its first chunk landed. */
static void mid_message(struct ibv_cq *scq)
{
	volatile const uint8_t *first = cut_dst->addr;
	long until = vt_now_ms() + 3 * vt_tmo_ms();

	while (!*first)
		vt_assert(vt_now_ms() < until, "the first chunk never landed");
	vt_expect_none(scq, 20, "a 64 MiB SEND at 20 MB/s, begun");
}

static void cut_begin(struct vt_pair *p, const struct vt_qp_opts *o0,
		      const struct vt_qp_opts *o1)
{
	memset(cut_dst->addr, 0, CUT_LEN);
	vt_pair2(p, &D, o0, o1, 0);
}

/*
 * The receiver is reset and connected again in the middle of a SEND: the
 * old message never reaches the new incarnation (no SUCCESS with the old
 * wr_id, nothing in the new receive); the sender's retries run out.
 */
static void cut_receiver_reset(void)
{
	const struct vt_qp_opts o = { .timeout = 10, .retry_cnt = 2 };
	struct vt_pair p;
	struct ibv_wc wc;

	cut_begin(&p, &o, &o);
	vt_recv(p.qp[1], 31, cut_dst->addr, CUT_LEN, cut_dst->lkey);
	cut_send(p.qp[0], 30, CUT_LEN);
	mid_message(p.scq[0]);
	reincarnate(&p, 1);
	vt_recv(p.qp[1], 32, cut_dst->addr, CUT_LEN, cut_dst->lkey);
	vt_expect_wc(p.scq[0], &wc, 30, IBV_WC_RETRY_EXC_ERR,
		     "a SEND whose receiver was reset half-way");
	vt_expect_none(p.rcq[1], 200, "receives of the reset receiver");
	say("ok: receiver reset half-way: nothing reaches it, the sender retries out");
	vt_pair_free(&p);
}

/*
 * The receiver moves to ERR half-way; the sender (timeout 0) would retry
 * forever: the held receive is flushed at once, before the one behind it.
 */
static void cut_receiver_err(void)
{
	const struct vt_qp_opts o = { .timeout = VT_ZERO };
	struct vt_pair p;
	struct ibv_wc wc;

	cut_begin(&p, &o, &o);
	vt_recv(p.qp[1], 41, cut_dst->addr, CUT_LEN, cut_dst->lkey);
	vt_recv(p.qp[1], 42, cut_dst->addr, CUT_LEN, cut_dst->lkey);
	cut_send(p.qp[0], 40, CUT_LEN);
	mid_message(p.scq[0]);
	to_state(p.qp[1], IBV_QPS_ERR);
	vt_expect_wc(p.rcq[1], &wc, 41, IBV_WC_WR_FLUSH_ERR, "the held receive");
	vt_expect_wc(p.rcq[1], &wc, 42, IBV_WC_WR_FLUSH_ERR, "the receive behind it");
	vt_expect_none(p.scq[0], 200, "the sender (retrying forever)");
	to_state(p.qp[0], IBV_QPS_ERR);
	vt_expect_wc(p.scq[0], &wc, 40, IBV_WC_WR_FLUSH_ERR, "the SEND, flushed");
	vt_expect_none(p.rcq[1], 200, "receives after the flush");
	say("ok: receiver in ERR half-way: its held receive flushed first");
	vt_pair_free(&p);
}

/*
 * Receives taken from an SRQ by a QP reset or destroyed half-way are
 * flushed (the SRQ's client accounts for each); the rest stay posted.
 */
static void cut_srq_receiver(bool destroy)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct vt_qp_opts o = { .timeout = 10, .retry_cnt = 2 }, t = o;
	struct ibv_srq *srq = ibv_create_srq(D.pd, &sa);
	struct vt_pair p;
	struct ibv_wc wc;

	vt_assert(srq, "ibv_create_srq");
	t.srq = srq;
	cut_begin(&p, &o, &t);
	vt_srq_recv(srq, 51, cut_dst->addr, CUT_LEN, cut_dst->lkey);
	vt_srq_recv(srq, 52, cut_dst->addr, CUT_LEN, cut_dst->lkey);
	cut_send(p.qp[0], 50, CUT_LEN);
	mid_message(p.scq[0]);
	if (destroy) {
		vt_assert(ibv_destroy_qp(p.qp[1]) == 0, "destroy the receiver");
		p.qp[1] = NULL;
	} else {
		to_state(p.qp[1], IBV_QPS_RESET);
	}
	vt_expect_wc(p.rcq[1], &wc, 51, IBV_WC_WR_FLUSH_ERR, "the SRQ receive it held");
	vt_expect_wc(p.scq[0], &wc, 50, IBV_WC_RETRY_EXC_ERR, "the SEND");
	vt_expect_none(p.rcq[1], 200, "the other SRQ receive");
	say("ok: SRQ receiver %s half-way: the receive it held flushed",
	    destroy ? "destroyed" : "reset");
	vt_pair_free(&p);
	vt_assert(ibv_destroy_srq(srq) == 0, "ibv_destroy_srq");
}

/*
 * A UC sender reset half-way: the receiver hears nothing and stays RTS;
 * the next message takes the receive the cut one had.
 */
static void cut_uc_sender(void)
{
	const struct vt_qp_opts o = { .type = IBV_QPT_UC };
	struct vt_pair p;
	struct ibv_wc wc;

	cut_begin(&p, &o, &o);
	vt_recv(p.qp[1], 61, cut_dst->addr, CUT_LEN, cut_dst->lkey);
	cut_send(p.qp[0], 60, CUT_LEN);
	mid_message(p.scq[0]);
	reincarnate(&p, 0);
	vt_expect_none(p.rcq[1], 200, "the receiver of a UC message cut short");
	vt_expect_state(p.qp[1], IBV_QPS_RTS, "the receiver of a cut UC message");
	cut_send(p.qp[0], 62, 64);
	vt_expect_ok(p.scq[0], &wc, 62, IBV_WC_SEND, "the next UC SEND");
	vt_expect_ok(p.rcq[1], &wc, 61, IBV_WC_RECV, "the next UC message");
	vt_assert(wc.byte_len == 64, "byte_len %u, want 64", wc.byte_len);
	say("ok: UC sender reset half-way: the next message takes the receive");
	vt_pair_free(&p);
}

/*
 * The sender's own memory faults in the first chunk: its SEND fails, the
 * receiver is untouched, as if the message had never been sent.
 */
static void cut_source_fault(void)
{
	const size_t len = 4 * MiB;
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *gone;
	struct vt_pair p;
	struct ibv_wc wc;

	vt_assert(m != MAP_FAILED, "mmap");
	gone = ibv_reg_mr(D.pd, m, len, IBV_ACCESS_LOCAL_WRITE);
	vt_assert(gone, "ibv_reg_mr");
	vt_assert(munmap(m, len) == 0, "munmap");
	cut_begin(&p, NULL, NULL);
	vt_recv(p.qp[1], 71, cut_dst->addr, CUT_LEN, cut_dst->lkey);
	vt_send(p.qp[0], 70, IBV_WR_SEND, IBV_SEND_SIGNALED, m, (uint32_t)len,
		gone->lkey, 0, 0);
	vt_expect_wc(p.scq[0], &wc, 70, IBV_WC_LOC_PROT_ERR, "a SEND from unmapped memory");
	vt_expect_none(p.rcq[1], 200, "the receiver of a SEND never sent");
	vt_expect_state(p.qp[1], IBV_QPS_RTS, "the receiver of a SEND never sent");
	reincarnate(&p, 0);
	cut_send(p.qp[0], 72, 64);
	vt_expect_ok(p.rcq[1], &wc, 71, IBV_WC_RECV, "the next SEND, in the same receive");
	say("ok: sender fault in the first chunk: the receiver untouched");
	vt_pair_free(&p);
	vt_assert(ibv_dereg_mr(gone) == 0, "ibv_dereg_mr");
}

/* The send WQE with this wr_id in page of our ring arena's client half. */
static struct ibvd_send_wqe *wqe_in_page(uint8_t *page, uint64_t wr_id)
{
	struct ibvd_send_wqe *c;
	size_t off;

	for (off = 0; off + sizeof(*c) <= IBVD_PAGE_SIZE; off += IBVD_CACHELINE) {
		c = (struct ibvd_send_wqe *)(page + off);
		if (c->wr_id == wr_id && c->opcode == IBV_WR_SEND)
			return c;
	}
	return NULL;
}

/*
 * The send WQE with this wr_id in a QP's ring in our memory: the writable
 * part of the context's ring arena, only the pages that are there (mincore:
 * reading the others would fill the file).
 */
static struct ibvd_send_wqe *find_wqe(uint64_t wr_id)
{
	static unsigned char resident[IBVD_ARENA_HALF / IBVD_PAGE_SIZE];
	struct ibvd_send_wqe *w = NULL;
	char line[512], name[256], perms[8];
	FILE *f = fopen("/proc/self/maps", "r");

	vt_assert(f, "/proc/self/maps");
	while (!w && fgets(line, sizeof(line), f)) {
		unsigned long start, end, i;

		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %255s", &start, &end, perms,
			   name) != 4 || strcmp(name, "/memfd:ibvd-rings") != 0 ||
		    perms[1] != 'w' || end - start != IBVD_ARENA_HALF)
			continue;
		vt_assert(mincore((void *)start, end - start, resident) == 0, "mincore");
		for (i = 0; !w && i < (end - start) / IBVD_PAGE_SIZE; i++)
			if (resident[i] & 1)
				w = wqe_in_page((uint8_t *)start + i * IBVD_PAGE_SIZE, wr_id);
	}
	fclose(f);
	vt_assert(w, "no send WQE %llu in our QP rings", (unsigned long long)wr_id);
	return w;
}

/*
 * The client lengthens the SEND in front in its ring between chunks: its
 * own error (LOC_LEN_ERR), not the receiver's; the RC receiver hears the
 * message was cut short.
 */
static void cut_lengthened(void)
{
	struct ibvd_sge *sge;
	struct vt_pair p;
	struct ibv_wc wc;

	cut_begin(&p, NULL, NULL);
	vt_recv(p.qp[1], 81, cut_dst->addr, CUT_LEN / 2, cut_dst->lkey);
	cut_send(p.qp[0], 80, CUT_LEN / 2);
	mid_message(p.scq[0]);
	sge = (struct ibvd_sge *)(find_wqe(80) + 1);
	vt_assert(sge->length == CUT_LEN / 2, "SGE length %u", sge->length);
	__atomic_store_n(&sge->length, CUT_LEN / 2 + 4096, __ATOMIC_RELAXED);
	vt_expect_wc(p.scq[0], &wc, 80, IBV_WC_LOC_LEN_ERR, "a SEND lengthened half-way");
	vt_expect_wc(p.rcq[1], &wc, 81, IBV_WC_REM_ABORT_ERR, "its receive");
	say("ok: a SEND lengthened half-way fails as the client's error");
	vt_pair_free(&p);
}

static int cuts(void)
{
	vt_open(&D);
	cut_src = vt_reg(D.pd, CUT_LEN, VT_ACCESS_ALL);
	cut_dst = vt_reg(D.pd, CUT_LEN, VT_ACCESS_ALL);
	memset(cut_src->addr, 0x5a, CUT_LEN);
	cut_receiver_reset();
	cut_receiver_err();
	cut_srq_receiver(false);
	cut_srq_receiver(true);
	cut_uc_sender();
	cut_source_fault();
	cut_lengthened();
	vt_dereg(cut_src);
	vt_dereg(cut_dst);
	vt_close(&D);
	return 0;
}

/* ==== move ==================================================================== */

#define MOVE_DEPTH	8

static int move(unsigned long long bytes)
{
	unsigned long long posted = 0, done = 0;
	struct ibv_mr *from, *to;
	struct vt_pair p;
	struct ibv_wc wc[MOVE_DEPTH];
	uint64_t t0;
	int n, i;

	vt_open(&D);
	vt_pair(&p, &D, NULL, 0);
	from = vt_reg(D.pd, MiB, VT_ACCESS_ALL);
	to = vt_reg(D.pd, MiB, VT_ACCESS_ALL);
	t0 = vt_now_ns();
	say("started");
	while (done < bytes) {
		while (posted < bytes && posted - done < MOVE_DEPTH * (unsigned long long)MiB) {
			vt_send(p.qp[0], posted, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED,
				from->addr, MiB, from->lkey, (uintptr_t)to->addr, to->rkey);
			posted += MiB;
		}
		n = vt_poll(p.scq[0], wc, 1, 60 * vt_tmo_ms());
		vt_assert(n == 1, "no WRITE completed for a long time");
		n += ibv_poll_cq(p.scq[0], MOVE_DEPTH - 1, wc + 1);
		for (i = 0; i < n; i++)
			vt_assert(wc[i].status == IBV_WC_SUCCESS, "WRITE: %s",
				  vt_status(wc[i].status));
		done += (unsigned long long)n * MiB;
	}
	say("moved %llu bytes in %llu ms", done,
	    (unsigned long long)((vt_now_ns() - t0) / 1000000));
	vt_pair_free(&p);
	vt_dereg(from);
	vt_dereg(to);
	vt_close(&D);
	return 0;
}

/* ==== hog ===================================================================== */

#define HOG_LEN		AREA
#define HOG_DEPTH	2		/* WRITEs posted per QP */
#define HOG_MAX_QPS	256

static int hog(unsigned int nqp, unsigned long writes)
{
	static struct vt_pair p[HOG_MAX_QPS];
	struct ibv_wc wc[32];
	unsigned long posted = 0, done = 0;
	struct ibv_mr *from, *to;
	struct ibv_cq *cq;
	unsigned int i, k;
	int n;

	vt_assert(nqp && nqp <= HOG_MAX_QPS, "hog: 1 to %u QPs", HOG_MAX_QPS);
	vt_open(&D);
	cq = ibv_create_cq(D.ctx, (int)(2 * nqp * HOG_DEPTH), NULL, NULL, 0);
	vt_assert(cq, "ibv_create_cq: %m");
	for (i = 0; i < nqp; i++)
		vt_pair_on(&p[i], &D, NULL, NULL, cq, cq);
	from = vt_reg(D.pd, HOG_LEN, VT_ACCESS_ALL);
	to = vt_reg(D.pd, HOG_LEN, VT_ACCESS_ALL);
	for (i = 0; i < nqp; i++)
		for (k = 0; k < HOG_DEPTH; k++, posted++)
			vt_send(p[i].qp[0], i, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED,
				from->addr, HOG_LEN, from->lkey,
				(uintptr_t)to->addr, to->rkey);
	say("started");
	while (done < writes) {
		n = vt_poll(cq, wc, 1, 60 * vt_tmo_ms());
		vt_assert(n == 1, "no WRITE completed for a long time");
		n += ibv_poll_cq(cq, 31, wc + 1);
		for (k = 0; k < (unsigned int)n; k++) {
			vt_assert(wc[k].status == IBV_WC_SUCCESS, "WRITE: %s",
				  vt_status(wc[k].status));
			done++;
			/* the same QP again, while there are WRITEs to go */
			if (posted < writes + nqp * HOG_DEPTH) {
				vt_send(p[wc[k].wr_id].qp[0], wc[k].wr_id,
					IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED,
					from->addr, HOG_LEN, from->lkey,
					(uintptr_t)to->addr, to->rkey);
				posted++;
			}
		}
	}
	/* what is still posted, so that nothing is flushed at the end */
	while (done < posted) {
		n = vt_poll(cq, wc, 1, 60 * vt_tmo_ms());
		vt_assert(n == 1, "no WRITE completed for a long time");
		vt_assert(wc[0].status == IBV_WC_SUCCESS, "WRITE: %s",
			  vt_status(wc[0].status));
		done++;
	}
	say("done: %lu WRITEs of %u bytes", done, HOG_LEN);
	for (i = 0; i < nqp; i++)
		vt_pair_free(&p[i]);
	ibv_destroy_cq(cq);
	vt_dereg(from);
	vt_dereg(to);
	vt_close(&D);
	return 0;
}

/* ==== hog-direct ============================================================= */

/*
 * The same tenant's copies made another way: SENDs a library put in its
 * QP's direct ring (the direct transport, common/transit.h) for a
 * receiver that never polls, which the engine places itself before the
 * WRITE posted behind them may run (RC order).  Those placements are the
 * engine's copies as much as a WQE's, and count in the tenant's share of
 * a pass (fairness.sh counts the engine's direct_bytes per busy pass).
 * fairness.sh says when to start (a line on stdin) and reads the counts
 * between "ready" and "placed".
 */
#define HD_MSGS		14u		/* 64 KiB SENDs and headers a ring holds */
#define HD_LEN		(64u << 10)

static void wait_line(const char *what)
{
	char line[16];

	vt_assert(fgets(line, sizeof(line), stdin), "no line on stdin %s", what);
}

static void hd_post_recvs(struct vt_pair *p, unsigned int nqp,
			  struct ibv_mr *to)
{
	unsigned int i, k;

	for (i = 0; i < nqp; i++)
		for (k = 0; k < HD_MSGS; k++)
			vt_recv(p[i].qp[1], i, to->addr, HD_LEN, to->lkey);
}

/* A round: each ring filled with SENDs, a WRITE behind them; all done. */
static void hd_round(struct vt_pair *p, unsigned int nqp, struct ibv_cq *scq,
		     struct ibv_cq *rcq, struct ibv_mr *from, struct ibv_mr *to)
{
	unsigned int i, k, done;
	struct ibv_wc wc[32];
	int n, j;

	/* on the rings: the receiver waits for no event, nothing rings */
	for (i = 0; i < nqp; i++)
		for (k = 0; k < HD_MSGS; k++)
			vt_send(p[i].qp[0], i, IBV_WR_SEND, 0, from->addr,
				HD_LEN, from->lkey, 0, 0);
	/* the WRITEs ring the engine, which empties each ring first */
	for (i = 0; i < nqp; i++)
		vt_send(p[i].qp[0], i, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED,
			from->addr, 8, from->lkey, (uintptr_t)to->addr,
			to->rkey);
	for (done = 0; done < nqp; done += (unsigned int)n) {
		n = vt_poll(scq, wc, 32, 6 * vt_tmo_ms());
		vt_assert(n > 0, "%u of %u WRITEs completed", done, nqp);
		for (j = 0; j < n; j++)
			vt_assert(wc[j].status == IBV_WC_SUCCESS &&
				  wc[j].opcode == IBV_WC_RDMA_WRITE,
				  "WRITE: %s", vt_status(wc[j].status));
	}
	/* what the engine placed (the rings are empty: the library has
	 * nothing left to place itself) */
	for (done = 0; done < nqp * HD_MSGS; done += (unsigned int)n) {
		n = vt_poll(rcq, wc, 32, 6 * vt_tmo_ms());
		vt_assert(n > 0, "%u of %u SENDs received", done,
			  nqp * HD_MSGS);
		for (j = 0; j < n; j++)
			vt_assert(wc[j].status == IBV_WC_SUCCESS &&
				  wc[j].byte_len == HD_LEN, "receive: %s, "
				  "%u bytes", vt_status(wc[j].status),
				  wc[j].byte_len);
	}
}

static int hog_direct(unsigned int nqp, unsigned int rounds)
{
	static struct vt_pair p[HOG_MAX_QPS];
	struct vt_qp_opts o = { .max_send_wr = HD_MSGS + 2,
				.max_recv_wr = HD_MSGS };
	struct ibv_mr *from, *to;
	struct ibv_cq *scq, *rcq;
	unsigned int i, r;

	vt_assert(nqp && nqp <= HOG_MAX_QPS, "hog-direct: 1 to %u QPs",
		  HOG_MAX_QPS);
	vt_open(&D);
	scq = ibv_create_cq(D.ctx, (int)nqp, NULL, NULL, 0);
	rcq = ibv_create_cq(D.ctx, (int)(nqp * HD_MSGS), NULL, NULL, 0);
	vt_assert(scq && rcq, "ibv_create_cq: %m");
	for (i = 0; i < nqp; i++)
		vt_pair_on(&p[i], &D, &o, &o, scq, rcq);
	vt_assert(vt_transit_maps() > 0, "no transit ring mapped");
	from = vt_reg(D.pd, HD_LEN, VT_ACCESS_ALL);
	to = vt_reg(D.pd, HD_LEN, VT_ACCESS_ALL);
	hd_post_recvs(p, nqp, to);
	say("ready");
	wait_line("to start");
	for (r = 0; r < rounds; r++) {
		if (r)
			hd_post_recvs(p, nqp, to);
		hd_round(p, nqp, scq, rcq, from, to);
	}
	say("placed: %u rounds of %u SENDs of %u bytes on %u QPs", rounds,
	    HD_MSGS, HD_LEN, nqp);
	wait_line("to end");
	for (i = 0; i < nqp; i++)
		vt_pair_free(&p[i]);
	ibv_destroy_cq(scq);
	ibv_destroy_cq(rcq);
	vt_dereg(from);
	vt_dereg(to);
	vt_close(&D);
	return 0;
}

/* ==== starve ================================================================= */

/*
 * Within one tenant: a pass that served a context's doorbell bits lowest
 * first every time gave the tenant's share to its low-bit QPs while they
 * had work, and put its higher ones off until they ran dry.  NQP busy
 * pairs keep eight 1 MiB WRITEs posted each (a turn a chunk: four of them
 * spend the share); then a pair made after them (higher doorbell bits;
 * in a second context of the process with `split`) posts one small
 * WRITE.  Counted, not timed: the busy WRITEs posted after it that
 * complete before it.  The busy pairs post again until STARVE_CAP of
 * those completed, so a starved WRITE completes only once they stop,
 * after all STARVE_CAP; one served in its turn, a few passes of the
 * share later, sees hardly any (each needs 8 turns of its QP).
 */
#define STARVE_LEN	MiB
#define STARVE_DEPTH	8
#define STARVE_CAP	64u
#define STARVE_MAX_QPS	32u
#define STARVE_LATE	(~0ull)
#define STARVE_AFTER	(1ull << 32)	/* wr_id: posted after the small one */

static int starve(unsigned int nqp, bool split)
{
	static struct vt_pair p[STARVE_MAX_QPS];
	struct vt_dev D2, *late_dev = split ? &D2 : &D;
	struct ibv_mr *from, *to, *small;
	struct vt_pair late;
	struct ibv_cq *cq;
	struct ibv_wc wc[4];
	unsigned int i, k, posted = 0, done = 0, after = 0, warm;
	bool late_posted = false, late_done = false;
	int n, j;

	vt_assert(nqp && nqp <= STARVE_MAX_QPS, "starve: 1 to %u QPs", STARVE_MAX_QPS);
	vt_open(&D);
	if (split)
		vt_open(&D2);
	cq = ibv_create_cq(D.ctx, (int)(2 * nqp * STARVE_DEPTH), NULL, NULL, 0);
	vt_assert(cq, "ibv_create_cq: %m");
	for (i = 0; i < nqp; i++)
		vt_pair_on(&p[i], &D, NULL, NULL, cq, cq);
	vt_pair(&late, late_dev, NULL, 16);
	from = vt_reg(D.pd, STARVE_LEN, VT_ACCESS_ALL);
	to = vt_reg(D.pd, STARVE_LEN, VT_ACCESS_ALL);
	small = vt_reg(late_dev->pd, 8192, VT_ACCESS_ALL);
	for (i = 0; i < nqp; i++)
		for (k = 0; k < STARVE_DEPTH; k++, posted++)
			vt_send(p[i].qp[0], i, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED,
				from->addr, STARVE_LEN, from->lkey,
				(uintptr_t)to->addr, to->rkey);
	/* busy for a while: the engine's passes in their steady order */
	warm = 2 * nqp * STARVE_DEPTH;
	while (!late_done || done < posted) {
		if (done >= warm && !late_posted) {
			vt_send(late.qp[0], STARVE_LATE, IBV_WR_RDMA_WRITE,
				IBV_SEND_SIGNALED, small->addr, 4096, small->lkey,
				(uintptr_t)small->addr + 4096, small->rkey);
			late_posted = true;
		}
		/* the small one first: what completes after it is not counted */
		if (late_posted && !late_done) {
			n = ibv_poll_cq(late.scq[0], 1, wc);
			vt_assert(n >= 0, "ibv_poll_cq: %d", n);
			if (n == 1) {
				vt_assert(wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == STARVE_LATE,
					  "the small WRITE: %s", vt_status(wc[0].status));
				late_done = true;
			}
		}
		n = done < posted ? ibv_poll_cq(cq, 4, wc) : 0;
		vt_assert(n >= 0, "ibv_poll_cq: %d", n);
		for (j = 0; j < n; j++) {
			vt_assert(wc[j].status == IBV_WC_SUCCESS, "WRITE: %s",
				  vt_status(wc[j].status));
			done++;
			if ((wc[j].wr_id & STARVE_AFTER) && !late_done)
				after++;
			/* again, until the cap: the same QP always has more */
			if (late_done || after >= STARVE_CAP)
				continue;
			i = (unsigned int)wc[j].wr_id;
			vt_send(p[i].qp[0], i | (late_posted ? STARVE_AFTER : 0),
				IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED,
				from->addr, STARVE_LEN, from->lkey,
				(uintptr_t)to->addr, to->rkey);
			posted++;
		}
		vt_assert(late_done || done < posted,
			  "the small WRITE never completed, the others all did");
	}
	say("busy WRITEs posted after the small one completed before it: %u of %u bytes (cap %u)",
	    after, STARVE_LEN, STARVE_CAP);
	for (i = 0; i < nqp; i++)
		vt_pair_free(&p[i]);
	vt_pair_free(&late);
	ibv_destroy_cq(cq);
	vt_dereg(from);
	vt_dereg(to);
	vt_dereg(small);
	if (split)
		vt_close(&D2);
	vt_close(&D);
	return 0;
}

/* ==== starve-direct ========================================================== */

/*
 * starve's case where what a turn does is place SENDs out of direct rings
 * (hog-direct's rounds, charged to the share all the same): NQP busy
 * direct pairs each go round and round, their sender's ring filled with
 * HD_MSGS SENDs of 64 KiB to a receiver that does not poll and an RDMA
 * WRITE behind them, which the engine runs once it has placed them all
 * (two a turn: seven turns a round).  Their receivers' CQ is not polled
 * meanwhile (a library polling it places what its rings hold itself, and
 * the engine finds the claim taken): each has receives posted for
 * SD_ROUNDS rounds, the most it runs.  Then a pair made after them (in a
 * second context with `split`) does one round of a single SEND and its
 * WRITE: a turn.  Counted, not timed: the busy rounds started after it
 * that end before it.  The busy pairs start rounds until STARVE_CAP of
 * those ended, so a starved round ends only once they stop; one served in
 * its turn, within a few passes, sees none (each needs seven turns of its
 * QP).
 */
#define SD_ROUNDS	24u

static void sd_round(struct vt_pair *p, uint64_t wr_id, unsigned int msgs,
		     struct ibv_mr *from, struct ibv_mr *to)
{
	unsigned int k;

	for (k = 0; k < msgs; k++)
		vt_send(p->qp[0], wr_id, IBV_WR_SEND, 0, from->addr, HD_LEN,
			from->lkey, 0, 0);
	vt_send(p->qp[0], wr_id, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED,
		from->addr, 8, from->lkey, (uintptr_t)to->addr, to->rkey);
}

/* Has the late pair's round ended?  Its WRITE's completion, checked. */
static bool sd_late_done(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	int n = ibv_poll_cq(cq, 1, &wc);

	vt_assert(n >= 0, "ibv_poll_cq: %d", n);
	if (n == 0)
		return false;
	vt_assert(wc.status == IBV_WC_SUCCESS && wc.wr_id == STARVE_LATE,
		  "the late round's WRITE: %s", vt_status(wc.status));
	return true;
}

static int starve_direct(unsigned int nqp, bool split)
{
	static struct vt_pair p[STARVE_MAX_QPS];
	struct vt_qp_opts o = { .max_send_wr = HD_MSGS + 2,
				.max_recv_wr = SD_ROUNDS * HD_MSGS };
	struct vt_dev D2, *late_dev = split ? &D2 : &D;
	struct ibv_mr *from, *to, *late_from, *late_to;
	unsigned int rounds[STARVE_MAX_QPS] = { 0 };
	unsigned int i, k, started = 0, ended = 0, after = 0, warm;
	bool late_started = false, late_done = false;
	struct ibv_cq *scq, *rcq, *lcq[2];
	struct vt_pair late;
	struct ibv_wc wc[4];
	int n, j;

	vt_assert(nqp && nqp <= STARVE_MAX_QPS, "starve-direct: 1 to %u QPs",
		  STARVE_MAX_QPS);
	vt_open(&D);
	if (split)
		vt_open(&D2);
	scq = ibv_create_cq(D.ctx, (int)nqp, NULL, NULL, 0);
	rcq = ibv_create_cq(D.ctx, (int)(nqp * SD_ROUNDS * HD_MSGS), NULL,
			    NULL, 0);
	lcq[0] = ibv_create_cq(late_dev->ctx, 4, NULL, NULL, 0);
	lcq[1] = ibv_create_cq(late_dev->ctx, 4, NULL, NULL, 0);
	vt_assert(scq && rcq && lcq[0] && lcq[1], "ibv_create_cq: %m");
	for (i = 0; i < nqp; i++)
		vt_pair_on(&p[i], &D, &o, &o, scq, rcq);
	vt_pair_on(&late, late_dev, &o, &o, lcq[0], lcq[1]);
	vt_assert(vt_transit_maps() >= (int)nqp + 1,
		  "%d transit rings mapped for %u pairs", vt_transit_maps(),
		  nqp + 1);
	from = vt_reg(D.pd, HD_LEN, VT_ACCESS_ALL);
	to = vt_reg(D.pd, HD_LEN, VT_ACCESS_ALL);
	late_from = vt_reg(late_dev->pd, HD_LEN, VT_ACCESS_ALL);
	late_to = vt_reg(late_dev->pd, HD_LEN, VT_ACCESS_ALL);
	for (i = 0; i < nqp; i++) {
		for (k = 0; k < SD_ROUNDS * HD_MSGS; k++)
			vt_recv(p[i].qp[1], i, to->addr, HD_LEN, to->lkey);
		sd_round(&p[i], i, HD_MSGS, from, to);
		rounds[i]++;
		started++;
	}
	vt_recv(late.qp[1], STARVE_LATE, late_to->addr, HD_LEN, late_to->lkey);
	/* busy for a while: the engine's passes in their steady order */
	warm = 2 * nqp;
	while (!late_done || ended < started) {
		if (ended >= warm && !late_started) {
			sd_round(&late, STARVE_LATE, 1, late_from, late_to);
			late_started = true;
		}
		/* the late one first: what ends after it is not counted */
		if (late_started && !late_done)
			late_done = sd_late_done(lcq[0]);
		n = ended < started ? ibv_poll_cq(scq, 4, wc) : 0;
		vt_assert(n >= 0, "ibv_poll_cq: %d", n);
		for (j = 0; j < n; j++) {
			vt_assert(wc[j].status == IBV_WC_SUCCESS &&
				  wc[j].opcode == IBV_WC_RDMA_WRITE,
				  "a busy round's WRITE: %s", vt_status(wc[j].status));
			ended++;
			if ((wc[j].wr_id & STARVE_AFTER) && !late_done)
				after++;
			/* again, until the cap: the same QP always has more */
			i = (unsigned int)wc[j].wr_id;
			if (late_done || after >= STARVE_CAP ||
			    rounds[i] == SD_ROUNDS)
				continue;
			sd_round(&p[i], i | (late_started ? STARVE_AFTER : 0),
				 HD_MSGS, from, to);
			rounds[i]++;
			started++;
		}
		vt_assert(late_done || ended < started,
			  "the late round never ended, the others all did");
	}
	vt_assert(vt_poll(lcq[1], wc, 1, vt_tmo_ms()) == 1 &&
		  wc[0].status == IBV_WC_SUCCESS && wc[0].byte_len == HD_LEN,
		  "the late SEND was not received");
	say("busy rounds started after the late one ended before it: %u of %u SENDs of %u bytes (cap %u)",
	    after, HD_MSGS, HD_LEN, STARVE_CAP);
	for (i = 0; i < nqp; i++)
		vt_pair_free(&p[i]);
	vt_pair_free(&late);
	ibv_destroy_cq(scq);
	ibv_destroy_cq(rcq);
	ibv_destroy_cq(lcq[0]);
	ibv_destroy_cq(lcq[1]);
	vt_dereg(from);
	vt_dereg(to);
	vt_dereg(late_from);
	vt_dereg(late_to);
	if (split)
		vt_close(&D2);
	vt_close(&D);
	return 0;
}

/* ==== starve-busy / starve-other ============================================= */

/*
 * Across tenants: one uid's many contexts on the thread, busy, and
 * another uid's single context with one small WRITE.  Each tenant has a
 * share of its own in every pass, so the other's QP has its turn in the
 * first pass that finds it rung, wherever its context is in the pass
 * order and however many contexts the busy uid has.  The two processes
 * share a page of a file in DIR: the other tenant's WRITE lands in it
 * (its MR is that mapping), after which its library says it posted it.
 * The busy side keeps STARVE_DEPTH 1 MiB WRITEs posted on each of its
 * pairs and counts its WRITEs posted after it saw that word that complete
 * while the landing byte is still 0: read after their completion, so a
 * count never includes one that completed after the small WRITE landed
 * (the engine wrote the byte before any later completion).  The busy
 * pairs post again until STARVE_CAP of those, so a starved WRITE lands
 * only once they stop, after all of them.
 */
struct starve_page {
	uint32_t posted;	/* the other tenant posted its WRITE */
	uint32_t done;		/* and saw it complete */
	uint8_t pad[56];
	uint8_t landing[64];	/* what its WRITE writes */
};

#define STARVE_CTXS	16u

static struct starve_page *starve_page(bool create)
{
	char path[4096];
	void *map;
	int fd;

	snprintf(path, sizeof(path), "%s/page", dir);
	fd = open(path, create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR, 0666);
	vt_assert(fd >= 0, "open %s: %m", path);
	vt_assert(!create || (fchmod(fd, 0666) == 0 &&
			      ftruncate(fd, 4096) == 0), "%s: %m", path);
	map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	vt_assert(map != MAP_FAILED, "mmap %s: %m", path);
	close(fd);
	return map;
}

static void busy_post(struct vt_pair *p, uint64_t wr_id, struct ibv_mr *from,
		      struct ibv_mr *to)
{
	vt_send(p->qp[0], wr_id, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED,
		from->addr, STARVE_LEN, from->lkey, (uintptr_t)to->addr,
		to->rkey);
}

static int starve_busy(unsigned int nctx, unsigned int nqp)
{
	static struct vt_pair p[STARVE_CTXS][STARVE_MAX_QPS];
	static struct vt_dev dev[STARVE_CTXS];
	struct ibv_mr *from[STARVE_CTXS], *to[STARVE_CTXS];
	struct ibv_cq *cq[STARVE_CTXS];
	struct starve_page *page = starve_page(true);
	unsigned int c, i, k, posted = 0, done = 0, after = 0, warm;
	bool ready = false, stop = false;
	struct ibv_wc wc[4];
	int n, j;

	vt_assert(nctx && nctx <= STARVE_CTXS && nqp && nqp <= STARVE_MAX_QPS,
		  "starve-busy: 1 to %u contexts of 1 to %u QPs", STARVE_CTXS,
		  STARVE_MAX_QPS);
	for (c = 0; c < nctx; c++) {
		vt_open(&dev[c]);
		cq[c] = ibv_create_cq(dev[c].ctx, (int)(2 * nqp * STARVE_DEPTH),
				      NULL, NULL, 0);
		vt_assert(cq[c], "ibv_create_cq: %m");
		for (i = 0; i < nqp; i++)
			vt_pair_on(&p[c][i], &dev[c], NULL, NULL, cq[c], cq[c]);
		from[c] = vt_reg(dev[c].pd, STARVE_LEN, VT_ACCESS_ALL);
		to[c] = vt_reg(dev[c].pd, STARVE_LEN, VT_ACCESS_ALL);
		for (i = 0; i < nqp; i++)
			for (k = 0; k < STARVE_DEPTH; k++, posted++)
				busy_post(&p[c][i], i, from[c], to[c]);
	}
	warm = 2 * nctx * nqp * STARVE_DEPTH;
	while (!stop || done < posted) {
		if (done >= warm && !ready) {
			vt_put(dir, "ready", "%u\n", warm);
			ready = true;
		}
		stop = __atomic_load_n(&page->done, __ATOMIC_ACQUIRE) ||
		       after >= STARVE_CAP;
		for (c = 0; c < nctx; c++) {
			n = ibv_poll_cq(cq[c], 4, wc);
			vt_assert(n >= 0, "ibv_poll_cq: %d", n);
			for (j = 0; j < n; j++) {
				vt_assert(wc[j].status == IBV_WC_SUCCESS,
					  "WRITE: %s", vt_status(wc[j].status));
				done++;
				if ((wc[j].wr_id & STARVE_AFTER) &&
				    !__atomic_load_n(&page->landing[0],
						     __ATOMIC_ACQUIRE))
					after++;
				if (stop)
					continue;
				i = (unsigned int)wc[j].wr_id;
				busy_post(&p[c][i],
					  i | (__atomic_load_n(&page->posted,
							       __ATOMIC_ACQUIRE) ?
					       STARVE_AFTER : 0),
					  from[c], to[c]);
				posted++;
			}
		}
		vt_assert(ready || done < posted, "the busy WRITEs all completed");
	}
	/* stopped at the cap: a starved WRITE goes now */
	for (k = 0; !__atomic_load_n(&page->done, __ATOMIC_ACQUIRE); k++) {
		vt_assert(k < 600u * (unsigned int)vt_tmo_ms() / 100u,
			  "the other tenant's WRITE is still not done");
		vt_sleep_ms(10);
	}
	say("busy WRITEs posted after the other tenant's small one completed before it: %u of %u bytes (cap %u, %u contexts of %u pairs)",
	    after, STARVE_LEN, STARVE_CAP, nctx, nqp);
	for (c = 0; c < nctx; c++) {
		for (i = 0; i < nqp; i++)
			vt_pair_free(&p[c][i]);
		ibv_destroy_cq(cq[c]);
		vt_dereg(from[c]);
		vt_dereg(to[c]);
		vt_close(&dev[c]);
	}
	return 0;
}

static int starve_other(void)
{
	struct starve_page *page;
	struct ibv_mr *small, *landing;
	struct vt_pair late;
	struct ibv_wc wc;
	char buf[32];

	get("ready", buf, sizeof(buf));
	page = starve_page(false);
	vt_open(&D);
	vt_pair(&late, &D, NULL, 16);
	small = vt_reg(D.pd, 4096, VT_ACCESS_ALL);
	memset(small->addr, 0xa5, 64);
	landing = ibv_reg_mr(D.pd, page, 4096, VT_ACCESS_ALL);
	vt_assert(landing, "ibv_reg_mr on the shared page: %m");
	vt_send(late.qp[0], STARVE_LATE, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED,
		small->addr, sizeof(page->landing), small->lkey,
		(uintptr_t)page->landing, landing->rkey);
	__atomic_store_n(&page->posted, 1, __ATOMIC_RELEASE);
	vt_assert(vt_poll(late.scq[0], &wc, 1, 60 * vt_tmo_ms()) == 1,
		  "the small WRITE never completed");
	vt_assert(wc.status == IBV_WC_SUCCESS && wc.wr_id == STARVE_LATE,
		  "the small WRITE: %s", vt_status(wc.status));
	vt_assert(page->landing[0] == 0xa5, "the small WRITE did not land");
	__atomic_store_n(&page->done, 1, __ATOMIC_RELEASE);
	say("the small WRITE completed");
	vt_pair_free(&late);
	ibv_dereg_mr(landing);
	vt_dereg(small);
	vt_close(&D);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && strcmp(argv[1], "target") == 0) {
		dir = argv[2];
		return target();
	}
	if (argc == 3 && strcmp(argv[1], "initiator") == 0) {
		dir = argv[2];
		return initiator();
	}
	if (argc == 2 && strcmp(argv[1], "order") == 0)
		return order();
	if (argc == 2 && strcmp(argv[1], "cuts") == 0)
		return cuts();
	if (argc == 3 && strcmp(argv[1], "move") == 0)
		return move(strtoull(argv[2], NULL, 10));
	if (argc == 4 && strcmp(argv[1], "hog") == 0)
		return hog((unsigned int)strtoul(argv[2], NULL, 10),
			   strtoul(argv[3], NULL, 10));
	if (argc == 4 && strcmp(argv[1], "hog-direct") == 0)
		return hog_direct((unsigned int)strtoul(argv[2], NULL, 10),
				  (unsigned int)strtoul(argv[3], NULL, 10));
	if (argc == 4 && strcmp(argv[1], "starve-direct") == 0)
		return starve_direct((unsigned int)strtoul(argv[2], NULL, 10),
				     strcmp(argv[3], "split") == 0);
	if (argc == 5 && strcmp(argv[1], "starve-busy") == 0) {
		dir = argv[2];
		return starve_busy((unsigned int)strtoul(argv[3], NULL, 10),
				   (unsigned int)strtoul(argv[4], NULL, 10));
	}
	if (argc == 3 && strcmp(argv[1], "starve-other") == 0) {
		dir = argv[2];
		return starve_other();
	}
	if (argc == 4 && strcmp(argv[1], "starve") == 0)
		return starve((unsigned int)strtoul(argv[2], NULL, 10),
			      strcmp(argv[3], "split") == 0);
	fprintf(stderr, "usage: fairness-helper target|initiator DIR | order | cuts | "
		"move BYTES | hog NQP WRITES | hog-direct NQP ROUNDS | "
		"starve NQP same|split | starve-direct NQP same|split | "
		"starve-busy DIR NCTX NQP | starve-other DIR\n");
	return 2;
}
