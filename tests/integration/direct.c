/*
 * direct-helper: the direct transport (common/transit.h) against a real
 * daemon (direct.sh): SENDs and RDMA WRITEs with immediate between two
 * local RC QPs through transit rings, with every verbs rule the engine
 * keeps.
 *
 * usage: direct-helper			the Check suite (CK_RUN_CASE=NAME
 *					runs one case)
 *        direct-helper pingpong N	N SEND ping-pongs between two QPs of
 *					this process, busy polling; prints
 *					"pingpong: N messages, K received
 *					before their sender's completion"
 *					(K should be 0; DIRECT_RINGS=0:
 *					the QPs must have no rings;
 *					DIRECT_HALFWAY=FILE: halfway it prints
 *					"halfway" and waits for FILE;
 *					DIRECT_PINGPONG=write_imm: RDMA
 *					WRITEs with immediate, not SENDs;
 *					=srq: SENDs into an SRQ; =ud:
 *					datagrams)
 *        direct-helper stream SECONDS [SEED [FLOWS]]
 *					streaming senders and a receiver
 *					that stalls at random, FLOWS pairs
 *					on two shared CQs, every message
 *					checked (direct-stream.c)
 *        direct-helper sigbus|sigsegv app|default|once
 *					after a grant, a fault of the app's
 *					own: its handler runs ("app"), or it
 *					dies of the signal ("default"), or
 *					its SA_RESETHAND handler runs once,
 *					returns, and the fault again kills it
 *					("once")
 *        direct-helper takeback	SENDs that went to the SQ while the
 *					ring was full go on the ring once it
 *					has room; prints "takeback: N
 *					messages" (direct.sh counts the WQEs
 *					the engine ran meanwhile: none)
 *
 * Every case first checks that the pair really has its rings
 * ("ibvd-transit" in /proc/self/maps), so a daemon that quietly stopped
 * pairing QPs fails here instead of passing on the engine's path.
 */
#include "config.h"

#include <check.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "barrier.h"
#include "direct-stream.h"
#include "ibvd_verbs.h"
#include "transit.h"
#include "vt.h"
#include "tests/common/check_run.h"

#define BUF(mr)		((uint8_t *)(mr)->addr)
#define ADDR(mr, off)	((uint64_t)(uintptr_t)(mr)->addr + (uint64_t)(off))
#define QUIET_MS	100
#define LEN		(64 * 1024)

static struct vt_dev D;
static const struct vt_qp_opts DEF;	/* vt's defaults: RC, rnr_retry 7 */

static void check_hook(const char *msg)
{
	ck_abort_msg("%s", msg);
}

static void setup(void)
{
	vt_fail_hook = check_hook;
	vt_open(&D);
}

static void teardown(void)
{
	vt_close(&D);
}

/* DIRECT_RINGS=0: the daemon pairs no QPs ("direct": false). */
static bool expect_rings(void)
{
	const char *v = getenv("DIRECT_RINGS");

	return !v || strcmp(v, "0") != 0;
}


/* A connected pair, a buffer on each side (a: QP 0's, b: QP 1's). */
struct fx {
	struct vt_pair p;
	struct ibv_mr *a, *b;
};

static void fx_init(struct fx *f, const struct vt_qp_opts *o)
{
	vt_pair(&f->p, &D, o, 256);
	f->a = vt_reg(D.pd, LEN, VT_ACCESS_ALL);
	f->b = vt_reg(D.pd, 2 * LEN, VT_ACCESS_ALL);	/* room to look past */
	/* the libraries map the rings at RTR/RTS: both QPs are ours */
	vt_assert((vt_transit_maps() > 0) == expect_rings(),
		  "the pair has %d transit ring mappings", vt_transit_maps());
}

static void fx_free(struct fx *f)
{
	vt_dereg(f->a);
	vt_dereg(f->b);
	vt_pair_free(&f->p);
}

/* ---- what goes through the ring --------------------------------------- */

/* SENDs of every size up to 64 KiB, each checked byte for byte. */
START_TEST(sizes)
{
	static const uint32_t len[] = { 0, 1, 31, 32, 33, 63, 64, 1000, 4096,
					 4097, 30000, LEN };
	struct ibv_wc wc;
	char what[64];
	struct fx f;
	unsigned int i;

	fx_init(&f, NULL);
	for (i = 0; i < VT_ARRAY_SIZE(len); i++) {
		vt_fill(BUF(f.a), len[i], 0, i + 1);
		memset(BUF(f.b), 0, LEN);
		vt_recv(f.p.qp[1], 100 + i, BUF(f.b), LEN, f.b->lkey);
		vt_send(f.p.qp[0], i, IBV_WR_SEND, IBV_SEND_SIGNALED, BUF(f.a),
			len[i], f.a->lkey, 0, 0);
		vt_expect_ok(f.p.rcq[1], &wc, 100 + i, IBV_WC_RECV, "receive");
		ck_assert_msg(wc.byte_len == len[i], "byte_len %u, sent %u",
			      wc.byte_len, len[i]);
		ck_assert_uint_eq(wc.src_qp, f.p.qp[0]->qp_num);
		ck_assert_uint_eq(wc.qp_num, f.p.qp[1]->qp_num);
		ck_assert_uint_eq(wc.wc_flags & IBV_WC_WITH_IMM, 0);
		snprintf(what, sizeof(what), "%u bytes received", len[i]);
		vt_expect_pat(BUF(f.b), len[i], 0, i + 1, what);
		snprintf(what, sizeof(what), "past a message of %u bytes", len[i]);
		vt_expect_byte(BUF(f.b) + len[i], 64, 0, what);
		vt_expect_ok(f.p.scq[0], &wc, i, IBV_WC_SEND, "send");
		ck_assert_uint_eq(wc.byte_len, len[i]);
	}
	fx_free(&f);
}
END_TEST

/* Immediate data, several SGEs on both sides, inline data. */
START_TEST(imm_sgl_inline)
{
	struct ibv_sge s[3], r[2];
	struct ibv_wc wc;
	struct fx f;
	struct vt_qp_opts o = { .max_inline = 256 };

	fx_init(&f, &o);
	vt_fill(BUF(f.a), 3000, 0, 7);
	s[0] = (struct ibv_sge){ ADDR(f.a, 0), 1000, f.a->lkey };
	s[1] = (struct ibv_sge){ ADDR(f.a, 1000), 1000, f.a->lkey };
	s[2] = (struct ibv_sge){ ADDR(f.a, 2000), 1000, f.a->lkey };
	r[0] = (struct ibv_sge){ ADDR(f.b, 0), 1500, f.b->lkey };
	r[1] = (struct ibv_sge){ ADDR(f.b, 1500), 1500, f.b->lkey };
	vt_recv_sgl(f.p.qp[1], 1, r, 2);
	ck_assert_int_eq(vt_post_sgl(f.p.qp[0], 2, IBV_WR_SEND_WITH_IMM,
				     IBV_SEND_SIGNALED, s, 3, 0, 0), 0);
	vt_expect_ok(f.p.rcq[1], &wc, 1, IBV_WC_RECV, "receive with imm");
	ck_assert_uint_eq(wc.byte_len, 3000);
	ck_assert(wc.wc_flags & IBV_WC_WITH_IMM);
	ck_assert_uint_eq(wc.imm_data, htobe32(2 ^ 0x5a5a0000u));
	vt_expect_pat(BUF(f.b), 3000, 0, 7, "gathered, scattered");
	vt_expect_ok(f.p.scq[0], &wc, 2, IBV_WC_SEND, "send with imm");

	/* inline: the buffer may change as soon as post_send returns */
	vt_fill(BUF(f.a), 200, 0, 9);
	vt_recv(f.p.qp[1], 3, BUF(f.b), LEN, f.b->lkey);
	vt_send(f.p.qp[0], 4, IBV_WR_SEND, IBV_SEND_SIGNALED | IBV_SEND_INLINE,
		BUF(f.a), 200, 0, 0, 0);
	memset(BUF(f.a), 0xff, 200);
	vt_expect_ok(f.p.rcq[1], &wc, 3, IBV_WC_RECV, "inline receive");
	vt_expect_pat(BUF(f.b), 200, 0, 9, "inline bytes as they were");
	vt_expect_ok(f.p.scq[0], &wc, 4, IBV_WC_SEND, "inline send");
	fx_free(&f);
}
END_TEST

/*
 * RC order with one-sided operations: a SEND after a WRITE is not seen
 * before the WRITE's bytes; a WRITE after a SEND lands after the SEND's,
 * even for a receiver that watches memory and never polls its CQ.
 */
START_TEST(order_with_writes)
{
	volatile uint8_t *flag;
	struct ibv_wc wc;
	struct fx f;
	unsigned int i;
	long end;

	fx_init(&f, NULL);
	flag = BUF(f.b) + LEN - 1;
	/* many rounds: a race with an engine turn under way shows rarely */
	for (i = 0; i < 400; i++) {
		/* WRITE then SEND */
		vt_fill(BUF(f.a), 4096, 0, 100 + i);
		vt_recv(f.p.qp[1], i, BUF(f.b) + 8192, 64, f.b->lkey);
		vt_send(f.p.qp[0], 1, IBV_WR_RDMA_WRITE, 0, BUF(f.a), 4096,
			f.a->lkey, ADDR(f.b, 0), f.b->rkey);
		vt_send(f.p.qp[0], 2, IBV_WR_SEND, IBV_SEND_SIGNALED,
			BUF(f.a) + 4096, 8, f.a->lkey, 0, 0);
		vt_expect_ok(f.p.rcq[1], &wc, i, IBV_WC_RECV, "SEND after WRITE");
		vt_expect_pat(BUF(f.b), 4096, 0, 100 + i, "the WRITE before the SEND");
		vt_expect_ok(f.p.scq[0], &wc, 2, IBV_WC_SEND, "SEND after WRITE");

		/* SEND then WRITE, watched without polling */
		vt_fill(BUF(f.a) + 16384, 1000, 0, 200 + i);
		*flag = 0;
		vt_recv(f.p.qp[1], 1000 + i, BUF(f.b) + 16384, 1000, f.b->lkey);
		vt_send(f.p.qp[0], 3, IBV_WR_SEND, 0, BUF(f.a) + 16384, 1000,
			f.a->lkey, 0, 0);
		BUF(f.a)[LEN - 1] = (uint8_t)(i % 255 + 1);	/* never 0 */
		vt_send(f.p.qp[0], 4, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED,
			BUF(f.a) + LEN - 1, 1, f.a->lkey, ADDR(f.b, LEN - 1),
			f.b->rkey);
		end = vt_now_ms() + vt_tmo_ms();
		while (*flag != (uint8_t)(i % 255 + 1) && vt_now_ms() < end)
			;
		ck_assert_msg(*flag == (uint8_t)(i % 255 + 1),
			      "round %u: the WRITE never landed", i);
		vt_expect_pat(BUF(f.b) + 16384, 1000, 0, 200 + i,
			      "the SEND's bytes before the WRITE's");
		vt_expect_ok(f.p.rcq[1], &wc, 1000 + i, IBV_WC_RECV, "SEND before WRITE");
		vt_expect_ok(f.p.scq[0], &wc, 4, IBV_WC_RDMA_WRITE, "WRITE after SEND");
	}
	fx_free(&f);
}
END_TEST

/* SENDs wait for receives posted late (rnr_retry 7), in order. */
START_TEST(late_receives)
{
	struct ibv_wc wc;
	struct fx f;
	int i;

	fx_init(&f, NULL);
	for (i = 0; i < 3; i++) {
		vt_fill(BUF(f.a) + 1024 * i, 1024, 0, 30 + i);
		vt_send(f.p.qp[0], 10 + i, IBV_WR_SEND, IBV_SEND_SIGNALED,
			BUF(f.a) + 1024 * i, 1024, f.a->lkey, 0, 0);
	}
	vt_expect_none(f.p.scq[0], QUIET_MS, "SENDs with no receive posted");
	vt_expect_none(f.p.rcq[1], 0, "nothing received yet");
	for (i = 0; i < 3; i++)
		vt_recv(f.p.qp[1], 20 + i, BUF(f.b) + 1024 * i, 1024, f.b->lkey);
	for (i = 0; i < 3; i++) {
		vt_expect_ok(f.p.rcq[1], &wc, 20 + (uint64_t)i, IBV_WC_RECV, "late receive");
		vt_expect_pat(BUF(f.b) + 1024 * i, 1024, 0, 30 + (uint32_t)i, "in order");
	}
	for (i = 0; i < 3; i++)
		vt_expect_ok(f.p.scq[0], &wc, 10 + (uint64_t)i, IBV_WC_SEND, "send");
	vt_expect_state(f.p.qp[0], IBV_QPS_RTS, "sender after the wait");
	fx_free(&f);
}
END_TEST

/*
 * UC: a message that finds no receive posted is dropped, its SEND
 * completes all the same, and the next receive takes the next message.
 */
START_TEST(uc_no_receive_drops)
{
	static const struct vt_qp_opts uc = { .type = IBV_QPT_UC };
	struct ibv_wc wc;
	struct fx f;
	int i;

	fx_init(&f, &uc);
	for (i = 0; i < 3; i++) {
		vt_fill(BUF(f.a) + 1024 * i, 1024, 0, 30 + i);
		vt_send(f.p.qp[0], 10 + i, IBV_WR_SEND, IBV_SEND_SIGNALED,
			BUF(f.a) + 1024 * i, 1024, f.a->lkey, 0, 0);
	}
	/* the receiver's polls take them, with nowhere to put them */
	vt_expect_none(f.p.rcq[1], QUIET_MS, "no receive posted");
	for (i = 0; i < 3; i++)
		vt_expect_ok(f.p.scq[0], &wc, 10 + (uint64_t)i, IBV_WC_SEND,
			     "a dropped SEND");
	vt_recv(f.p.qp[1], 20, BUF(f.b), 1024, f.b->lkey);
	vt_fill(BUF(f.a), 1024, 0, 40);
	vt_send(f.p.qp[0], 13, IBV_WR_SEND, IBV_SEND_SIGNALED, BUF(f.a), 1024,
		f.a->lkey, 0, 0);
	vt_expect_ok(f.p.rcq[1], &wc, 20, IBV_WC_RECV, "the next message");
	vt_expect_pat(BUF(f.b), 1024, 0, 40, "the next message's bytes");
	vt_expect_ok(f.p.scq[0], &wc, 13, IBV_WC_SEND, "its SEND");
	vt_expect_none(f.p.rcq[1], QUIET_MS, "none of the dropped ones");
	vt_expect_state(f.p.qp[1], IBV_QPS_RTS, "the UC receiver after drops");
	fx_free(&f);
}
END_TEST

/* Bind type-2 window mw over all of t (4 KiB) with rkey, on QP 1. */
static void bind_window(struct fx *f, struct ibv_mw *mw, struct ibv_mr *t,
			uint32_t rkey)
{
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_wc wc;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 70;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info.mr = t;
	wr.bind_mw.bind_info.addr = (uintptr_t)t->addr;
	wr.bind_mw.bind_info.length = 4096;
	wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	ck_assert_int_eq(ibv_post_send(f->p.qp[1], &wr, &bad), 0);
	vt_expect_ok(f->p.scq[1], &wc, 70, IBV_WC_BIND_MW, "BIND_MW");
}

/*
 * A SEND with invalidate goes on the ring too; the receiver's library
 * hands it to the engine, which owns the keys: it lands between the
 * SENDs around it, reports the key, and the key is dead after it.
 */
START_TEST(send_inv_in_order)
{
	struct ibv_mw *mw = ibv_alloc_mw(D.pd, IBV_MW_TYPE_2);
	struct ibv_mr *t = vt_reg(D.pd, 4096, VT_ACCESS_ALL | IBV_ACCESS_MW_BIND);
	struct ibv_wc wc;
	uint32_t rkey;
	struct fx f;
	int i;

	ck_assert_ptr_nonnull(mw);
	fx_init(&f, NULL);
	rkey = ibv_inc_rkey(mw->rkey);
	bind_window(&f, mw, t, rkey);
	for (i = 0; i < 3; i++) {
		vt_recv(f.p.qp[1], 20 + (uint64_t)i, BUF(f.b) + 1024 * i, 1024,
			f.b->lkey);
		vt_fill(BUF(f.a) + 1024 * i, 100, 0, 60 + (uint32_t)i);
	}
	vt_send(f.p.qp[0], 10, IBV_WR_SEND, IBV_SEND_SIGNALED, BUF(f.a), 100,
		f.a->lkey, 0, 0);
	vt_send(f.p.qp[0], 11, IBV_WR_SEND_WITH_INV, IBV_SEND_SIGNALED,
		BUF(f.a) + 1024, 100, f.a->lkey, 0, rkey);
	vt_send(f.p.qp[0], 12, IBV_WR_SEND, IBV_SEND_SIGNALED, BUF(f.a) + 2048,
		100, f.a->lkey, 0, 0);
	for (i = 0; i < 3; i++) {
		vt_expect_ok(f.p.rcq[1], &wc, 20 + (uint64_t)i, IBV_WC_RECV,
			     "in posted order");
		ck_assert_uint_eq(wc.byte_len, 100);
		ck_assert_uint_eq(!!(wc.wc_flags & IBV_WC_WITH_INV), i == 1);
		if (i == 1)
			ck_assert_uint_eq(wc.invalidated_rkey, rkey);
		vt_expect_pat(BUF(f.b) + 1024 * i, 100, 0, 60 + (uint32_t)i,
			      "in order");
	}
	for (i = 0; i < 3; i++)
		vt_expect_ok(f.p.scq[0], &wc, 10 + (uint64_t)i, IBV_WC_SEND, "send");
	/* the window is gone */
	vt_send(f.p.qp[0], 13, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, BUF(f.a), 8,
		f.a->lkey, (uintptr_t)t->addr, rkey);
	vt_expect_wc(f.p.scq[0], NULL, 13, IBV_WC_REM_ACCESS_ERR,
		     "a WRITE through the invalidated window");
	fx_free(&f);
	vt_dereg(t);
	ck_assert_int_eq(ibv_dealloc_mw(mw), 0);
}
END_TEST

/* ---- RDMA WRITE with immediate on the ring ------------------------------ */

/* WRITE_WITH_IMM of len bytes from f->a at off to f->b at roff: checked. */
static void write_imm_one(struct fx *f, uint64_t id, uint32_t off,
			  uint32_t roff, uint32_t len, uint32_t seed)
{
	struct ibv_wc wc;

	vt_fill(BUF(f->a) + off, len, 0, seed);
	vt_send(f->p.qp[0], id, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_SEND_SIGNALED,
		BUF(f->a) + off, len, f->a->lkey, ADDR(f->b, roff), f->b->rkey);
	vt_expect_ok(f->p.rcq[1], &wc, id, IBV_WC_RECV_RDMA_WITH_IMM,
		     "WRITE_WITH_IMM at the receiver");
	ck_assert_uint_eq(wc.byte_len, len);
	ck_assert(wc.wc_flags & IBV_WC_WITH_IMM);
	ck_assert_uint_eq(be32toh(wc.imm_data), (uint32_t)id ^ 0x5a5a0000u);
	ck_assert_uint_eq(wc.src_qp, f->p.qp[0]->qp_num);
	vt_expect_pat(BUF(f->b) + roff, len, 0, seed, "the WRITE's bytes");
	vt_expect_ok(f->p.scq[0], &wc, id, IBV_WC_RDMA_WRITE,
		     "WRITE_WITH_IMM at the sender");
}

/*
 * WRITEs with immediate of every size up to 64 KiB land where they were
 * aimed, byte for byte, and consume a receive each, whose buffer they
 * leave alone; the two completions are the verbs' (RECV_RDMA_WITH_IMM
 * with the length and immediate, RDMA_WRITE at the sender).
 */
START_TEST(write_imm_sizes)
{
	static const uint32_t lens[] = { 0, 1, 7, 64, 100, 4095, 4096, 4097,
					  30000, LEN };
	unsigned int i;
	struct fx f;

	fx_init(&f, NULL);
	memset(BUF(f.b), 0xEE, 64);
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		vt_recv(f.p.qp[1], i, BUF(f.b), 64, f.b->lkey);
		write_imm_one(&f, i, 0, LEN - lens[i] / 2, lens[i], 300 + i);
		/* the receive's own buffer is not where the data goes */
		vt_expect_byte(BUF(f.b), 64, 0xEE, "the receive's buffer");
	}
	fx_free(&f);
}
END_TEST

/* In order with the SENDs around it and the WRITEs the engine runs. */
START_TEST(write_imm_in_order)
{
	volatile uint8_t *flag;
	struct ibv_wc wc;
	unsigned int i;
	struct fx f;
	long end;

	fx_init(&f, NULL);
	flag = BUF(f.b) + 2 * LEN - 1;
	for (i = 0; i < 200; i++) {
		vt_recv(f.p.qp[1], 3 * i, BUF(f.b) + LEN, 64, f.b->lkey);
		vt_recv(f.p.qp[1], 3 * i + 1, BUF(f.b) + LEN + 64, 64, f.b->lkey);
		vt_recv(f.p.qp[1], 3 * i + 2, BUF(f.b) + LEN + 128, 64, f.b->lkey);
		vt_fill(BUF(f.a), 2000, 0, 500 + i);
		vt_send(f.p.qp[0], 1, IBV_WR_SEND, 0, BUF(f.a), 64, f.a->lkey, 0, 0);
		vt_send(f.p.qp[0], 3 * i + 1, IBV_WR_RDMA_WRITE_WITH_IMM, 0,
			BUF(f.a), 2000, f.a->lkey, ADDR(f.b, 0), f.b->rkey);
		vt_send(f.p.qp[0], 3, IBV_WR_SEND, 0, BUF(f.a) + 64, 64,
			f.a->lkey, 0, 0);
		/* a WRITE behind them, watched without polling */
		*flag = 0;
		BUF(f.a)[LEN - 1] = (uint8_t)(i % 255 + 1);
		vt_send(f.p.qp[0], 4, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED,
			BUF(f.a) + LEN - 1, 1, f.a->lkey, ADDR(f.b, 2 * LEN - 1),
			f.b->rkey);
		end = vt_now_ms() + vt_tmo_ms();
		while (*flag != (uint8_t)(i % 255 + 1) && vt_now_ms() < end)
			;
		ck_assert_msg(*flag == (uint8_t)(i % 255 + 1),
			      "round %u: the WRITE never landed", i);
		vt_expect_pat(BUF(f.b), 2000, 0, 500 + i,
			      "the WRITE_WITH_IMM's bytes before the WRITE's");
		vt_expect_ok(f.p.rcq[1], &wc, 3 * i, IBV_WC_RECV, "SEND");
		vt_expect_ok(f.p.rcq[1], &wc, 3 * i + 1, IBV_WC_RECV_RDMA_WITH_IMM,
			     "WRITE_WITH_IMM between SENDs");
		ck_assert_uint_eq(wc.byte_len, 2000);
		vt_expect_ok(f.p.rcq[1], &wc, 3 * i + 2, IBV_WC_RECV, "SEND");
		vt_expect_ok(f.p.scq[0], &wc, 4, IBV_WC_RDMA_WRITE, "the WRITE");
	}
	fx_free(&f);
}
END_TEST

/* Sent before any receive is posted: it waits (rnr_retry 7), data too. */
START_TEST(write_imm_late_receive)
{
	struct ibv_wc wc;
	struct fx f;

	fx_init(&f, NULL);
	vt_fill(BUF(f.a), 256, 0, 77);
	vt_send(f.p.qp[0], 5, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_SEND_SIGNALED,
		BUF(f.a), 256, f.a->lkey, ADDR(f.b, 4096), f.b->rkey);
	vt_expect_none(f.p.rcq[1], QUIET_MS, "no receive posted yet");
	vt_expect_none(f.p.scq[0], 0, "not taken yet");
	/* one packet's worth: on a NIC it lands with the receive too */
	vt_expect_byte(BUF(f.b) + 4096, 256, 0, "nothing before the receive");
	vt_recv(f.p.qp[1], 6, BUF(f.b), 64, f.b->lkey);
	vt_expect_ok(f.p.rcq[1], &wc, 6, IBV_WC_RECV_RDMA_WITH_IMM, "late receive");
	vt_expect_pat(BUF(f.b) + 4096, 256, 0, 77, "the WRITE's bytes");
	vt_expect_ok(f.p.scq[0], &wc, 5, IBV_WC_RDMA_WRITE, "sender");
	fx_free(&f);
}
END_TEST

/*
 * The receive comes before the key, as in rxe's responder: a WRITE with
 * immediate by a bad key with no receive posted waits (RNR, retried for
 * ever), whoever looks at it; once a receive is there the key fails it.
 */
START_TEST(write_imm_bad_key_waits_for_receive)
{
	struct ibv_wc wc;
	struct fx f;

	fx_init(&f, NULL);
	vt_send(f.p.qp[0], 3, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_SEND_SIGNALED,
		BUF(f.a), 64, f.a->lkey, ADDR(f.b, 0), f.b->rkey ^ 0x3c3c00u);
	/* long past the sender's 20 us before it asks the engine */
	vt_expect_none(f.p.scq[0], QUIET_MS, "no receive posted yet");
	vt_expect_none(f.p.rcq[1], 0, "no receive posted yet");
	vt_recv(f.p.qp[1], 4, BUF(f.b), 64, f.b->lkey);
	vt_expect_wc(f.p.scq[0], &wc, 3, IBV_WC_REM_ACCESS_ERR, "sender");
	vt_expect_wc(f.p.rcq[1], &wc, 4, IBV_WC_LOC_ACCESS_ERR, "receiver");
	fx_free(&f);
}
END_TEST

/*
 * A WRITE_WITH_IMM the receiver may not take fails as a responder fails
 * it, ring or not: the sender gets REM_ACCESS_ERR, the receive it took
 * completes with LOC_ACCESS_ERR (ibv_poll_cq(3)) as the receiver's QP
 * goes to ERR, and not a byte lands.  bad: 0 a key
 * nobody has, 1 past the MR's end, 2 an MR without remote write, 3 a
 * receiving QP without remote write in its access flags, 4 the same with
 * no bytes (which checks no key, but the QP's rights all the same).
 */
static void write_imm_refused(int bad)
{
	struct vt_qp_opts o1 = { .access = IBV_ACCESS_REMOTE_READ };
	struct ibv_mr *ro = vt_reg(D.pd, 4096, IBV_ACCESS_LOCAL_WRITE |
						IBV_ACCESS_REMOTE_READ);
	uint64_t raddr;
	uint32_t rkey;
	struct ibv_wc wc;
	struct fx f;

	if (bad >= 3) {
		vt_pair2(&f.p, &D, NULL, &o1, 256);
		f.a = vt_reg(D.pd, LEN, VT_ACCESS_ALL);
		f.b = vt_reg(D.pd, 2 * LEN, VT_ACCESS_ALL);
		vt_assert(vt_transit_maps() > 0 || !expect_rings(),
			  "the pair has no transit rings");
	} else {
		fx_init(&f, NULL);
	}
	raddr = bad == 2 ? (uintptr_t)ro->addr : ADDR(f.b, 0);
	rkey = bad == 0 ? f.b->rkey ^ 0x3c3c00u : bad == 2 ? ro->rkey : f.b->rkey;
	if (bad == 1)
		raddr = ADDR(f.b, 2 * LEN - 8);
	vt_fill(BUF(f.a), 64, 0, 9);
	vt_recv(f.p.qp[1], 7, BUF(f.b) + 8192, 64, f.b->lkey);
	vt_send(f.p.qp[0], 8, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_SEND_SIGNALED,
		BUF(f.a), bad == 4 ? 0 : 64, f.a->lkey, raddr, rkey);
	vt_expect_wc(f.p.scq[0], &wc, 8, IBV_WC_REM_ACCESS_ERR, "sender");
	vt_expect_wc(f.p.rcq[1], &wc, 7, IBV_WC_LOC_ACCESS_ERR, "receiver");
	vt_expect_byte(BUF(f.b) + 2 * LEN - 8, 8, 0, "nothing past the MR");
	vt_expect_byte(BUF(f.b), 64, 0, "nothing written");
	vt_expect_byte(BUF(ro), 64, 0, "nothing in the read-only MR");
	fx_free(&f);
	vt_dereg(ro);
}

START_TEST(write_imm_refused_key)
{
	write_imm_refused(0);
}
END_TEST

START_TEST(write_imm_refused_range)
{
	write_imm_refused(1);
}
END_TEST

START_TEST(write_imm_refused_mr_access)
{
	write_imm_refused(2);
}
END_TEST

START_TEST(write_imm_refused_qp_access)
{
	write_imm_refused(3);
}
END_TEST

START_TEST(write_imm_refused_qp_access_empty)
{
	write_imm_refused(4);
}
END_TEST

/*
 * A context shared with ibv_import_device: another member may deregister
 * an MR, which this library's MR table never hears of, so a peer's WRITE
 * by that key must fail as the engine fails it, not land by the table's
 * stale entry.  The other member here is an import of our own context.
 */
/* What that test leaves behind, kept where the leak checker sees it. */
static struct ibv_mr *volatile gone_mr;
static struct ibv_pd *volatile gone_pd;

START_TEST(write_imm_key_gone_elsewhere)
{
	/*
	 * On a PD of their own: the victim's struct keeps its PD in use here
	 * once the other member took the MR away, so that PD stays behind.
	 */
	struct vt_dev own = D;
	struct ibv_context *other;
	struct ibv_mr *victim, *omr;
	struct ibv_pd *opd;
	struct ibv_wc wc;
	struct fx f;
	int fd;

	own.pd = gone_pd = ibv_alloc_pd(D.ctx);
	ck_assert_ptr_nonnull(own.pd);
	victim = gone_mr = vt_reg(own.pd, 4096, VT_ACCESS_ALL);
	vt_pair(&f.p, &own, NULL, 256);
	f.a = vt_reg(own.pd, LEN, VT_ACCESS_ALL);
	f.b = vt_reg(own.pd, LEN, VT_ACCESS_ALL);
	vt_assert((vt_transit_maps() > 0) == expect_rings(),
		  "the pair has %d transit ring mappings", vt_transit_maps());
	fd = dup(D.ctx->cmd_fd);
	ck_assert_int_ge(fd, 0);
	other = ibv_import_device(fd);
	ck_assert_ptr_nonnull(other);
	opd = ibv_import_pd(other, own.pd->handle);
	ck_assert_ptr_nonnull(opd);
	omr = ibv_import_mr(opd, victim->handle);
	ck_assert_ptr_nonnull(omr);
	ck_assert_int_eq(ibv_dereg_mr(omr), 0);
	vt_fill(BUF(f.a), 64, 0, 5);
	vt_recv(f.p.qp[1], 1, BUF(f.b), 64, f.b->lkey);
	vt_send(f.p.qp[0], 2, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_SEND_SIGNALED,
		BUF(f.a), 64, f.a->lkey, (uintptr_t)victim->addr, victim->rkey);
	/* the receiver polls first: its library would place it now */
	vt_expect_wc(f.p.rcq[1], &wc, 1, IBV_WC_LOC_ACCESS_ERR, "receiver");
	vt_expect_wc(f.p.scq[0], &wc, 2, IBV_WC_REM_ACCESS_ERR,
		     "a WRITE by a key another member deregistered");
	vt_expect_byte(victim->addr, 64, 0, "nothing written");
	fx_free(&f);
	ibv_unimport_pd(opd);
	ck_assert_int_eq(ibv_close_device(other), 0);
}
END_TEST

/*
 * Through a memory window's key, which only the daemon knows: the
 * receiver's library leaves it to the engine, which places it.
 */
START_TEST(write_imm_window)
{
	struct ibv_mw *mw = ibv_alloc_mw(D.pd, IBV_MW_TYPE_2);
	struct ibv_mr *t = vt_reg(D.pd, 4096, VT_ACCESS_ALL | IBV_ACCESS_MW_BIND);
	struct ibv_wc wc;
	uint32_t rkey;
	struct fx f;

	ck_assert_ptr_nonnull(mw);
	fx_init(&f, NULL);
	rkey = ibv_inc_rkey(mw->rkey);
	bind_window(&f, mw, t, rkey);
	vt_fill(BUF(f.a), 1000, 0, 33);
	vt_recv(f.p.qp[1], 1, BUF(f.b), 64, f.b->lkey);
	vt_send(f.p.qp[0], 2, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_SEND_SIGNALED,
		BUF(f.a), 1000, f.a->lkey, (uintptr_t)t->addr + 100, rkey);
	vt_expect_ok(f.p.rcq[1], &wc, 1, IBV_WC_RECV_RDMA_WITH_IMM, "receiver");
	vt_expect_pat(BUF(t) + 100, 1000, 0, 33, "through the window");
	vt_expect_ok(f.p.scq[0], &wc, 2, IBV_WC_RDMA_WRITE, "sender");
	fx_free(&f);
	vt_dereg(t);
	ck_assert_int_eq(ibv_dealloc_mw(mw), 0);
}
END_TEST

/*
 * A library that only polls meets its QP's rings too (ring.h,
 * direct_moves).  vt_pair connects QP 0 before QP 1 is past RTR, so QP 0
 * met no pair at its own modifies, and, posting nothing, it would map
 * the rings only at a post: a poll of its receive CQ maps them.
 */
START_TEST(maps_at_poll)
{
	int one = expect_rings() ? 1 : 0;
	struct vt_pair p;
	struct ibv_wc wc;

	vt_pair(&p, &D, NULL, 64);
	vt_assert(vt_transit_maps() == one,
		  "%d transit ring mappings before QP 0 polls, want %d",
		  vt_transit_maps(), one);
	ck_assert_int_eq(ibv_poll_cq(p.rcq[0], 1, &wc), 0);
	vt_assert(vt_transit_maps() == 2 * one,
		  "%d transit ring mappings after QP 0 polled, want %d",
		  vt_transit_maps(), 2 * one);
	vt_pair_free(&p);
}
END_TEST

/*
 * For the batch cases: QP a on an extended CQ, connected to b, which is
 * still in RESET (no pair yet); c (on a's CQ) and d, whose WRITE's
 * completion has opened a batch of a's CQ when batch_open returns.
 */
struct batch_fx {
	struct ibv_cq_ex *cqx;
	struct ibv_cq *cq1;
	struct ibv_qp *qa, *qb;
	struct vt_addr aa;
	struct vt_pair cd;
	struct ibv_mr *m;
};

static void batch_open(struct batch_fx *f)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 64, .wc_flags = IBV_WC_STANDARD_FLAGS,
	};
	struct ibv_poll_cq_attr pa = { .comp_mask = 0 };
	struct vt_addr ab;
	long until;
	int ret;

	f->cqx = ibv_create_cq_ex(D.ctx, &ca);
	ck_assert_ptr_nonnull(f->cqx);
	f->cq1 = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	ck_assert_ptr_nonnull(f->cq1);
	f->m = vt_reg(D.pd, LEN, VT_ACCESS_ALL);
	vt_pair_on(&f->cd, &D, NULL, NULL, ibv_cq_ex_to_cq(f->cqx), f->cq1);
	f->qa = vt_qp(&D, ibv_cq_ex_to_cq(f->cqx), ibv_cq_ex_to_cq(f->cqx), &DEF);
	f->qb = vt_qp(&D, f->cq1, f->cq1, &DEF);
	vt_qp_addr(&D, f->qa, &DEF, &f->aa);
	vt_qp_addr(&D, f->qb, &DEF, &ab);
	vt_connect(&D, f->qa, &ab, &DEF);
	vt_send(f->cd.qp[0], 1, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED,
		BUF(f->m), 8, f->m->lkey, ADDR(f->m, LEN / 2), f->m->rkey);
	until = vt_now_ms() + vt_tmo_ms();
	while ((ret = ibv_start_poll(f->cqx, &pa)) == ENOENT &&
	       vt_now_ms() < until)
		;
	ck_assert_int_eq(ret, 0);
	ck_assert_int_eq(f->cqx->wr_id, 1);
}

static void batch_fx_free(struct batch_fx *f)
{
	ck_assert_int_eq(ibv_destroy_qp(f->qa), 0);
	ck_assert_int_eq(ibv_destroy_qp(f->qb), 0);
	vt_pair_free(&f->cd);
	ck_assert_int_eq(ibv_destroy_cq(ibv_cq_ex_to_cq(f->cqx)), 0);
	ck_assert_int_eq(ibv_destroy_cq(f->cq1), 0);
	vt_dereg(f->m);
}

/*
 * A post from inside an ibv_start_poll batch to a QP whose peer paired
 * with it during the batch (ibv_rc_pingpong -t's server, now and then):
 * the batch holds its CQ's lock, which mapping the rings takes, so that
 * post goes the engine's way and the rings are mapped at end_poll.
 */
START_TEST(post_inside_batch)
{
	int one = expect_rings() ? 1 : 0, maps;
	struct batch_fx f;
	struct ibv_wc wc;

	batch_open(&f);
	maps = vt_transit_maps();		/* c's and d's */
	vt_connect(&D, f.qb, &f.aa, &DEF);	/* the pair forms */
	vt_recv(f.qb, 7, BUF(f.m) + LEN / 2, 64, f.m->lkey);
	vt_send(f.qa, 2, IBV_WR_SEND, IBV_SEND_SIGNALED, BUF(f.m), 8,
		f.m->lkey, 0, 0);
	vt_assert(vt_transit_maps() == maps + one,
		  "%d transit ring mappings inside the batch, want %d",
		  vt_transit_maps(), maps + one);
	ibv_end_poll(f.cqx);
	vt_assert(vt_transit_maps() == maps + 2 * one,
		  "%d transit ring mappings after the batch, want %d",
		  vt_transit_maps(), maps + 2 * one);
	vt_expect_ok(f.cq1, &wc, 7, IBV_WC_RECV, "the SEND posted in the batch");
	vt_expect_ok(ibv_cq_ex_to_cq(f.cqx), &wc, 2, IBV_WC_SEND, "its completion");
	vt_recv(f.qb, 8, BUF(f.m) + LEN / 2, 64, f.m->lkey);
	vt_send(f.qa, 3, IBV_WR_SEND, IBV_SEND_SIGNALED, BUF(f.m), 8,
		f.m->lkey, 0, 0);
	vt_expect_ok(f.cq1, &wc, 8, IBV_WC_RECV, "a SEND after the batch");
	vt_expect_ok(ibv_cq_ex_to_cq(f.cqx), &wc, 3, IBV_WC_SEND, "its completion");
	batch_fx_free(&f);
}
END_TEST

/*
 * Another thread's post maps a QP's rings (its peer paired with it) while
 * this thread holds a batch of the QP's CQ and then posts a receive to
 * it: mapping takes every lock of the QP, which must wait for the batch's
 * CQ lock before it holds the queue locks, or the receive waits for it
 * and it for the batch: both for ever (Check's timeout).
 */
struct batch_poster {
	struct ibv_qp *qp;
	struct ibv_mr *m;
	int done;
};

static void *batch_poster_main(void *arg)
{
	struct batch_poster *b = arg;

	vt_send(b->qp, 4, IBV_WR_SEND, IBV_SEND_SIGNALED, BUF(b->m), 8,
		b->m->lkey, 0, 0);
	__atomic_store_n(&b->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

START_TEST(map_beside_batch)
{
	struct batch_poster b = { 0 };
	struct batch_fx f;
	struct ibv_wc wc;
	pthread_t poster;

	batch_open(&f);
	vt_connect(&D, f.qb, &f.aa, &DEF);	/* the pair forms */
	vt_recv(f.qb, 7, BUF(f.m) + LEN / 2, 64, f.m->lkey);
	b.qp = f.qa;
	b.m = f.m;
	ck_assert_int_eq(pthread_create(&poster, NULL, batch_poster_main, &b), 0);
	vt_sleep_ms(200);			/* it maps, waiting for the batch */
	vt_recv(f.qa, 9, BUF(f.m) + LEN / 4, 64, f.m->lkey);
	ibv_end_poll(f.cqx);
	pthread_join(poster, NULL);
	ck_assert(__atomic_load_n(&b.done, __ATOMIC_ACQUIRE));
	vt_expect_ok(f.cq1, &wc, 7, IBV_WC_RECV, "the other thread's SEND");
	vt_expect_ok(ibv_cq_ex_to_cq(f.cqx), &wc, 4, IBV_WC_SEND, "its completion");
	vt_send(f.qb, 5, IBV_WR_SEND, IBV_SEND_SIGNALED, BUF(f.m), 8,
		f.m->lkey, 0, 0);
	vt_expect_ok(ibv_cq_ex_to_cq(f.cqx), &wc, 9, IBV_WC_RECV,
		     "the receive posted in the batch");
	vt_expect_ok(f.cq1, &wc, 5, IBV_WC_SEND, "the SEND to it");
	batch_fx_free(&f);
}
END_TEST

/* A sender whose receiver never polls still completes (the engine places). */
START_TEST(receiver_never_polls)
{
	struct ibv_wc wc;
	struct fx f;
	int i;

	fx_init(&f, NULL);
	for (i = 0; i < 20; i++) {
		vt_fill(BUF(f.a) + 100 * i, 100, 0, (uint32_t)i);
		vt_recv(f.p.qp[1], (uint64_t)i, BUF(f.b) + 100 * i, 100, f.b->lkey);
		vt_send(f.p.qp[0], (uint64_t)i, IBV_WR_SEND, IBV_SEND_SIGNALED,
			BUF(f.a) + 100 * i, 100, f.a->lkey, 0, 0);
		vt_expect_ok(f.p.scq[0], &wc, (uint64_t)i, IBV_WC_SEND,
			     "send, receiver not polling");
	}
	for (i = 0; i < 20; i++) {
		vt_expect_ok(f.p.rcq[1], &wc, (uint64_t)i, IBV_WC_RECV, "then polled");
		vt_expect_pat(BUF(f.b) + 100 * i, 100, 0, (uint32_t)i, "bytes");
	}
	fx_free(&f);
}
END_TEST

/* ---- one-sided direct access (common/lease.h) ----------------------------- */

#define GRANTED	"ibvd-granted"

/* How many mappings of the granted memfd: ours, plus one per grant. */
static int granted_maps(int *writable)
{
	return vt_memfd_maps(GRANTED, writable, NULL);
}

/* One completion on cq of wr_id, anything but success. */
static void expect_failed(struct ibv_cq *cq, uint64_t wr_id, const char *what)
{
	struct ibv_wc wc;

	ck_assert_msg(vt_poll(cq, &wc, 1, vt_tmo_ms()) == 1, "%s: no completion", what);
	ck_assert_msg(wc.wr_id == wr_id && wc.status != IBV_WC_SUCCESS,
		      "%s: wr_id %llu status %s", what,
		      (unsigned long long)wc.wr_id, vt_status(wc.status));
}

/*
 * WRITEs and READs of every size into an MR on a memfd: the initiator's
 * library maps the file (a second mapping of it shows) and copies itself;
 * every byte checked, completions in order with the right opcodes.
 */
START_TEST(rdma_granted)
{
	static const uint32_t len[] = { 1, 63, 64, 4096, 30000, LEN };
	struct ibv_mr *t;
	struct ibv_wc wc;
	struct fx f;
	unsigned int i;
	int w;

	fx_init(&f, NULL);
	t = vt_reg_memfd(D.pd, LEN, VT_ACCESS_ALL, GRANTED);
	ck_assert_int_eq(granted_maps(NULL), 1);
	for (i = 0; i < VT_ARRAY_SIZE(len); i++) {
		uint32_t off = LEN - len[i];

		vt_fill(BUF(f.a), len[i], 0, 50 + i);
		vt_send(f.p.qp[0], i, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED,
			BUF(f.a), len[i], f.a->lkey, ADDR(t, off), t->rkey);
		vt_expect_ok(f.p.scq[0], &wc, i, IBV_WC_RDMA_WRITE, "WRITE");
		vt_expect_pat(BUF(t) + off, len[i], 0, 50 + i, "written");
		memset(BUF(f.a), 0, len[i]);
		vt_send(f.p.qp[0], 100 + i, IBV_WR_RDMA_READ, IBV_SEND_SIGNALED,
			BUF(f.a), len[i], f.a->lkey, ADDR(t, off), t->rkey);
		vt_expect_ok(f.p.scq[0], &wc, 100 + i, IBV_WC_RDMA_READ, "READ");
		ck_assert_uint_eq(wc.byte_len, len[i]);
		vt_expect_pat(BUF(f.a), len[i], 0, 50 + i, "read back");
	}
	ck_assert_msg(granted_maps(&w) == 2 && w == 2,
		      "the grant maps the file writable once: %d mappings",
		      granted_maps(NULL));
	/* past the MR's end: not the grant's, the engine fails it */
	vt_send(f.p.qp[0], 9, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, BUF(f.a),
		64, f.a->lkey, ADDR(t, LEN - 32), t->rkey);
	vt_expect_wc(f.p.scq[0], &wc, 9, IBV_WC_REM_ACCESS_ERR, "past the end");
	vt_dereg_memfd(t);
	fx_free(&f);
}
END_TEST

/*
 * A READ grant hands out the MR's file opened again read-only.  The
 * client holds a write lease on that file: a plain open would wait for
 * the lease to break (45 s by default, fs.lease-break-time) on the
 * daemon's only control thread, every tenant's requests behind it.
 * The grant is refused at once instead, and the READ goes through the
 * engine.
 */
START_TEST(rdma_grant_of_leased_file)
{
	struct ibv_wc wc;
	struct ibv_mr *t;
	struct fx f;
	long t0, took;
	void *buf;
	int fd;

	fx_init(&f, NULL);
	fd = memfd_create("leased", MFD_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 4096), 0);
	buf = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert(buf != MAP_FAILED);
	vt_fill(buf, 4096, 0, 77);
	t = ibv_reg_mr(D.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE |
		       IBV_ACCESS_REMOTE_READ);
	ck_assert_msg(t, "ibv_reg_mr: %s", strerror(errno));
	/* a lease break signals its holder: SIGIO would end us */
	signal(SIGIO, SIG_IGN);
	ck_assert_msg(fcntl(fd, F_SETLEASE, F_WRLCK) == 0, "F_SETLEASE: %s",
		      strerror(errno));
	t0 = vt_now_ms();
	vt_send(f.p.qp[0], 1, IBV_WR_RDMA_READ, IBV_SEND_SIGNALED, BUF(f.a),
		4096, f.a->lkey, ADDR(t, 0), t->rkey);
	vt_expect_ok(f.p.scq[0], &wc, 1, IBV_WC_RDMA_READ, "READ");
	took = vt_now_ms() - t0;
	vt_expect_pat(BUF(f.a), 4096, 0, 77, "read");
	ck_assert_msg(took < 5000, "the READ took %ld ms with the file leased",
		      took);
	ck_assert_int_eq(fcntl(fd, F_SETLEASE, F_UNLCK), 0);
	signal(SIGIO, SIG_DFL);
	ck_assert_int_eq(ibv_dereg_mr(t), 0);
	munmap(buf, 4096);
	close(fd);
	fx_free(&f);
}
END_TEST

/* RC order as in order_with_writes, the WRITEs into a granted MR. */
START_TEST(rdma_granted_order)
{
	volatile uint8_t *flag;
	struct ibv_mr *t;
	struct ibv_wc wc;
	struct fx f;
	unsigned int i;
	long end;

	fx_init(&f, NULL);
	t = vt_reg_memfd(D.pd, LEN, VT_ACCESS_ALL, GRANTED);
	flag = BUF(t) + LEN - 1;
	for (i = 0; i < 400; i++) {
		/* SEND then WRITE, the receiver watching memory, not polling */
		vt_fill(BUF(f.a), 1000, 0, 300 + i);
		*flag = 0;
		vt_recv(f.p.qp[1], i, BUF(t), 1000, t->lkey);
		vt_send(f.p.qp[0], 1, IBV_WR_SEND, 0, BUF(f.a), 1000,
			f.a->lkey, 0, 0);
		BUF(f.a)[LEN - 1] = (uint8_t)(i % 255 + 1);
		vt_send(f.p.qp[0], 2, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED,
			BUF(f.a) + LEN - 1, 1, f.a->lkey, ADDR(t, LEN - 1),
			t->rkey);
		end = vt_now_ms() + vt_tmo_ms();
		while (*flag != (uint8_t)(i % 255 + 1) && vt_now_ms() < end)
			;
		ck_assert_msg(*flag == (uint8_t)(i % 255 + 1),
			      "round %u: the WRITE never landed", i);
		vt_expect_pat(BUF(t), 1000, 0, 300 + i,
			      "the SEND's bytes before the WRITE's");
		vt_expect_ok(f.p.rcq[1], &wc, i, IBV_WC_RECV, "SEND before WRITE");
		vt_expect_ok(f.p.scq[0], &wc, 2, IBV_WC_RDMA_WRITE, "WRITE after SEND");
		/* WRITE then SEND: the receiver finds the WRITE's bytes */
		vt_fill(BUF(f.a), 4096, 0, 600 + i);
		vt_recv(f.p.qp[1], 1000 + i, BUF(f.b), 64, f.b->lkey);
		vt_send(f.p.qp[0], 3, IBV_WR_RDMA_WRITE, 0, BUF(f.a), 4096,
			f.a->lkey, ADDR(t, 8192), t->rkey);
		vt_send(f.p.qp[0], 4, IBV_WR_SEND, IBV_SEND_SIGNALED, BUF(f.a),
			8, f.a->lkey, 0, 0);
		vt_expect_ok(f.p.rcq[1], &wc, 1000 + i, IBV_WC_RECV, "SEND after WRITE");
		vt_expect_pat(BUF(t) + 8192, 4096, 0, 600 + i, "the WRITE before the SEND");
		vt_expect_ok(f.p.scq[0], &wc, 4, IBV_WC_SEND, "SEND after WRITE");
	}
	ck_assert_int_eq(granted_maps(NULL), 2);
	vt_dereg_memfd(t);
	fx_free(&f);
}
END_TEST

/*
 * Deregistration revokes: the memory stays mapped by its process, but a
 * WRITE with the old key fails (the engine knows no such key) and lands
 * nothing, and the initiator's library let go of its mapping.
 */
START_TEST(rdma_revoked_by_dereg)
{
	struct ibv_mr *t;
	struct ibv_wc wc;
	uint32_t rkey;
	uint8_t *mem;
	struct fx f;

	fx_init(&f, NULL);
	t = vt_reg_memfd(D.pd, LEN, VT_ACCESS_ALL, GRANTED);
	mem = BUF(t);
	rkey = t->rkey;
	vt_fill(BUF(f.a), 4096, 0, 5);
	vt_send(f.p.qp[0], 1, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, BUF(f.a),
		4096, f.a->lkey, ADDR(t, 0), rkey);
	vt_expect_ok(f.p.scq[0], &wc, 1, IBV_WC_RDMA_WRITE, "granted WRITE");
	ck_assert_int_eq(granted_maps(NULL), 2);
	ck_assert_int_eq(ibv_dereg_mr(t), 0);
	memset(mem, 0, LEN);
	vt_send(f.p.qp[0], 2, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, BUF(f.a),
		4096, f.a->lkey, (uint64_t)(uintptr_t)mem, rkey);
	vt_expect_wc(f.p.scq[0], &wc, 2, IBV_WC_REM_ACCESS_ERR, "after dereg");
	vt_expect_byte(mem, LEN, 0, "the deregistered memory");
	ck_assert_msg(granted_maps(NULL) == 1, "the grant still mapped: %d",
		      granted_maps(NULL));
	munmap(mem, LEN);
	fx_free(&f);
}
END_TEST

/*
 * Re-registration revokes too, and a grant follows the MR's access: read
 * only now, the file mapped read-only, a WRITE fails and lands nothing.
 */
START_TEST(rdma_revoked_by_rereg)
{
	struct ibv_mr *t;
	struct ibv_wc wc;
	struct fx f;
	int w;

	fx_init(&f, NULL);
	t = vt_reg_memfd(D.pd, LEN, VT_ACCESS_ALL, GRANTED);
	vt_fill(BUF(f.a), 4096, 0, 6);
	vt_send(f.p.qp[0], 1, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, BUF(f.a),
		4096, f.a->lkey, ADDR(t, 0), t->rkey);
	vt_expect_ok(f.p.scq[0], &wc, 1, IBV_WC_RDMA_WRITE, "granted WRITE");
	ck_assert_int_eq(ibv_rereg_mr(t, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL,
				      0, IBV_ACCESS_LOCAL_WRITE |
				      IBV_ACCESS_REMOTE_READ), 0);
	memset(BUF(f.a), 0, 4096);
	vt_send(f.p.qp[0], 2, IBV_WR_RDMA_READ, IBV_SEND_SIGNALED, BUF(f.a),
		4096, f.a->lkey, ADDR(t, 0), t->rkey);
	vt_expect_ok(f.p.scq[0], &wc, 2, IBV_WC_RDMA_READ, "READ after rereg");
	vt_expect_pat(BUF(f.a), 4096, 0, 6, "read back");
	ck_assert_msg(granted_maps(&w) == 2 && w == 1,
		      "a read-only grant: %d mappings, %d writable",
		      granted_maps(NULL), w);
	vt_fill(BUF(f.a), 4096, 0, 7);
	vt_send(f.p.qp[0], 3, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, BUF(f.a),
		4096, f.a->lkey, ADDR(t, 0), t->rkey);
	vt_expect_wc(f.p.scq[0], &wc, 3, IBV_WC_REM_ACCESS_ERR, "WRITE, read only");
	vt_expect_pat(BUF(t), 4096, 0, 6, "the MR after a refused WRITE");
	vt_dereg_memfd(t);
	fx_free(&f);
}
END_TEST

/* A target QP in error: a WRITE from its peer fails and lands nothing. */
START_TEST(rdma_target_in_error)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	struct ibv_mr *t;
	struct ibv_wc wc;
	struct fx f;

	fx_init(&f, NULL);
	t = vt_reg_memfd(D.pd, LEN, VT_ACCESS_ALL, GRANTED);
	vt_fill(BUF(f.a), 4096, 0, 8);
	vt_send(f.p.qp[0], 1, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, BUF(f.a),
		4096, f.a->lkey, ADDR(t, 0), t->rkey);
	vt_expect_ok(f.p.scq[0], &wc, 1, IBV_WC_RDMA_WRITE, "granted WRITE");
	ck_assert_int_eq(ibv_modify_qp(f.p.qp[1], &a, IBV_QP_STATE), 0);
	memset(BUF(t), 0, LEN);
	vt_send(f.p.qp[0], 2, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, BUF(f.a),
		4096, f.a->lkey, ADDR(t, 0), t->rkey);
	expect_failed(f.p.scq[0], 2, "WRITE to a QP in error");
	vt_expect_byte(BUF(t), LEN, 0, "the target's memory");
	vt_dereg_memfd(t);
	fx_free(&f);
}
END_TEST

/*
 * Private memory is never granted: the engine does the WRITE (the daemon
 * refuses once, the library remembers), and the bytes arrive all the same.
 */
START_TEST(rdma_private_not_granted)
{
	struct ibv_wc wc;
	struct fx f;
	int i;

	fx_init(&f, NULL);
	for (i = 0; i < 3; i++) {
		vt_fill(BUF(f.a), 4096, 0, 10 + (uint32_t)i);
		vt_send(f.p.qp[0], (uint64_t)i, IBV_WR_RDMA_WRITE,
			IBV_SEND_SIGNALED, BUF(f.a), 4096, f.a->lkey,
			ADDR(f.b, 0), f.b->rkey);
		vt_expect_ok(f.p.scq[0], &wc, (uint64_t)i, IBV_WC_RDMA_WRITE,
			     "WRITE to private memory");
		vt_expect_pat(BUF(f.b), 4096, 0, 10 + (uint32_t)i, "written");
	}
	fx_free(&f);
}
END_TEST

/*
 * A library that claims to copy for ever (in_use stuck, as a stopped or
 * lying one would): deregistration waits its bounded while, then goes on
 * (direct.sh finds the daemon's warning), and the daemon serves on.
 */
START_TEST(rdma_lease_held)
{
	struct ibv_mr *t;
	struct ibv_wc wc;
	struct ibvd_lease *lease;
	void *base = NULL;
	struct fx f;

	fx_init(&f, NULL);
	t = vt_reg_memfd(D.pd, LEN, VT_ACCESS_ALL, GRANTED);
	vt_send(f.p.qp[0], 1, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, BUF(f.a),
		64, f.a->lkey, ADDR(t, 0), t->rkey);
	vt_expect_ok(f.p.scq[0], &wc, 1, IBV_WC_RDMA_WRITE, "granted WRITE");
	ck_assert_int_gt(vt_memfd_maps("ibvd-transit", NULL, &base), 0);
	lease = (struct ibvd_lease *)((uint8_t *)base + IBVD_TRANSIT_LEASE_OFF);
	__atomic_store_n(&lease[0].in_use, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&lease[1].in_use, 1, __ATOMIC_SEQ_CST);
	ck_assert_int_eq(ibv_dereg_mr(t), 0);
	__atomic_store_n(&lease[0].in_use, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&lease[1].in_use, 0, __ATOMIC_SEQ_CST);
	/* the pair still works, through the engine or not */
	vt_fill(BUF(f.a), 4096, 0, 11);
	vt_send(f.p.qp[0], 2, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, BUF(f.a),
		4096, f.a->lkey, ADDR(f.b, 0), f.b->rkey);
	vt_expect_ok(f.p.scq[0], &wc, 2, IBV_WC_RDMA_WRITE, "WRITE afterwards");
	vt_expect_pat(BUF(f.b), 4096, 0, 11, "written afterwards");
	fx_free(&f);
	/* nor is this context granted again in a new pair (a RESET's) */
	fx_init(&f, NULL);
	t = vt_reg_memfd(D.pd, LEN, VT_ACCESS_ALL, "ibvd-granted-again");
	vt_fill(BUF(f.a), 4096, 0, 11);
	vt_send(f.p.qp[0], 3, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, BUF(f.a),
		4096, f.a->lkey, ADDR(t, 0), t->rkey);
	vt_expect_ok(f.p.scq[0], &wc, 3, IBV_WC_RDMA_WRITE, "WRITE in a new pair");
	vt_expect_pat(BUF(t), 4096, 0, 11, "written through the engine");
	vt_assert(vt_memfd_maps("ibvd-granted-again", NULL, NULL) == 1,
		  "the new pair was granted the MR (%d mappings)",
		  vt_memfd_maps("ibvd-granted-again", NULL, NULL));
	vt_dereg_memfd(t);
	fx_free(&f);
}
END_TEST

/*
 * After rdma_lease_held, its uid is not granted for a while either, in
 * another context of another process (Check forks each case): contexts
 * are cheap, and each such wait stalls every tenant.  Its WRITEs go
 * through the engine meanwhile.
 */
START_TEST(rdma_lease_offender_elsewhere)
{
	struct ibv_mr *t;
	struct ibv_wc wc;
	struct fx f;

	fx_init(&f, NULL);
	t = vt_reg_memfd(D.pd, LEN, VT_ACCESS_ALL, "ibvd-granted-elsewhere");
	vt_fill(BUF(f.a), 4096, 0, 12);
	vt_send(f.p.qp[0], 1, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, BUF(f.a),
		4096, f.a->lkey, ADDR(t, 0), t->rkey);
	vt_expect_ok(f.p.scq[0], &wc, 1, IBV_WC_RDMA_WRITE, "WRITE elsewhere");
	vt_expect_pat(BUF(t), 4096, 0, 12, "written through the engine");
	vt_assert(vt_memfd_maps("ibvd-granted-elsewhere", NULL, NULL) == 1,
		  "the uid was granted again in another process (%d mappings)",
		  vt_memfd_maps("ibvd-granted-elsewhere", NULL, NULL));
	vt_dereg_memfd(t);
	fx_free(&f);
}
END_TEST

/*
 * The target QP's access flags bound a grant as they bound a responder:
 * a WRITE through a QP without REMOTE_WRITE, or a READ without
 * REMOTE_READ, fails REM_ACCESS_ERR with nothing moved, though the MR
 * allows it; and rights taken away by RTS -> RTS void the grant.
 */
static void qp_rights_refused(enum ibv_wr_opcode op, unsigned int access)
{
	struct vt_qp_opts o1 = { .access = access };
	struct ibv_mr *t;
	struct ibv_wc wc;
	struct fx f;

	vt_pair2(&f.p, &D, NULL, &o1, 256);
	f.a = vt_reg(D.pd, LEN, VT_ACCESS_ALL);
	f.b = vt_reg(D.pd, 2 * LEN, VT_ACCESS_ALL);
	t = vt_reg_memfd(D.pd, LEN, VT_ACCESS_ALL, GRANTED);
	memset(BUF(f.a), 0x5a, 4096);
	vt_send(f.p.qp[0], 1, op, IBV_SEND_SIGNALED, BUF(f.a), 4096, f.a->lkey,
		ADDR(t, 0), t->rkey);
	vt_expect_wc(f.p.scq[0], &wc, 1, IBV_WC_REM_ACCESS_ERR,
		     op == IBV_WR_RDMA_WRITE ? "a WRITE through a QP without REMOTE_WRITE"
					     : "a READ through a QP without REMOTE_READ");
	vt_expect_byte(BUF(t), LEN, 0, "the target's memory");
	vt_expect_byte(BUF(f.a), 4096, 0x5a, "the READ's buffer");
	vt_dereg_memfd(t);
	fx_free(&f);
}

START_TEST(rdma_bound_by_qp_rights)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS,
				 .qp_access_flags = IBV_ACCESS_REMOTE_READ };
	struct ibv_mr *t;
	struct ibv_wc wc;
	struct fx f;

	qp_rights_refused(IBV_WR_RDMA_WRITE, IBV_ACCESS_REMOTE_READ);
	qp_rights_refused(IBV_WR_RDMA_READ, IBV_ACCESS_REMOTE_WRITE);

	fx_init(&f, NULL);
	t = vt_reg_memfd(D.pd, LEN, VT_ACCESS_ALL, GRANTED);
	vt_send(f.p.qp[0], 1, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, BUF(f.a),
		64, f.a->lkey, ADDR(t, 0), t->rkey);
	vt_expect_ok(f.p.scq[0], &wc, 1, IBV_WC_RDMA_WRITE, "a granted WRITE");
	ck_assert_int_gt(granted_maps(NULL), 0);
	ck_assert_int_eq(ibv_modify_qp(f.p.qp[1], &a,
				       IBV_QP_STATE | IBV_QP_ACCESS_FLAGS), 0);
	memset(BUF(f.a), 0x5b, 4096);
	vt_send(f.p.qp[0], 2, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, BUF(f.a),
		4096, f.a->lkey, ADDR(t, 0), t->rkey);
	vt_expect_wc(f.p.scq[0], &wc, 2, IBV_WC_REM_ACCESS_ERR,
		     "a WRITE after the QP lost REMOTE_WRITE");
	vt_expect_byte(BUF(t), LEN, 0, "the target's memory");
	vt_dereg_memfd(t);
	fx_free(&f);
}
END_TEST

/*
 * A grant gives READs only while the target QP has responder resources:
 * SQD -> SQD taking max_dest_rd_atomic to 0 revokes it, and the next READ
 * fails as the engine's responder fails it, grant or no grant before.
 */
START_TEST(rdma_read_needs_responder_resources)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_SQD };
	struct ibv_mr *t;
	struct ibv_wc wc;
	struct fx f;

	fx_init(&f, NULL);
	t = vt_reg_memfd(D.pd, LEN, VT_ACCESS_ALL, GRANTED);
	vt_send(f.p.qp[0], 1, IBV_WR_RDMA_READ, IBV_SEND_SIGNALED, BUF(f.a),
		64, f.a->lkey, ADDR(t, 0), t->rkey);
	vt_expect_ok(f.p.scq[0], &wc, 1, IBV_WC_RDMA_READ, "a granted READ");
	ck_assert_int_gt(granted_maps(NULL), 0);
	ck_assert_int_eq(ibv_modify_qp(f.p.qp[1], &a, IBV_QP_STATE), 0);
	a.max_dest_rd_atomic = 0;
	ck_assert_int_eq(ibv_modify_qp(f.p.qp[1], &a, IBV_QP_STATE |
				       IBV_QP_MAX_DEST_RD_ATOMIC), 0);
	a.qp_state = IBV_QPS_RTS;
	ck_assert_int_eq(ibv_modify_qp(f.p.qp[1], &a, IBV_QP_STATE), 0);
	memset(BUF(f.a), 0x5c, 64);
	vt_send(f.p.qp[0], 2, IBV_WR_RDMA_READ, IBV_SEND_SIGNALED, BUF(f.a),
		64, f.a->lkey, ADDR(t, 0), t->rkey);
	vt_expect_wc(f.p.scq[0], &wc, 2, IBV_WC_REM_INV_REQ_ERR,
		     "a READ from a QP without responder resources");
	vt_expect_byte(BUF(f.a), 64, 0x5c, "the READ's buffer");
	vt_dereg_memfd(t);
	fx_free(&f);
}
END_TEST

/*
 * A path changed at SQD (SQD -> SQD with a new AV) leads where the engine
 * routes it: to a LID nobody has, a SEND is retried until RETRY_EXC_ERR,
 * as a NIC's would be, not carried to the old peer by the pair's ring.
 */
START_TEST(path_changed_at_sqd)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_SQD };
	struct ibv_wc wc;
	struct fx f;

	fx_init(&f, NULL);
	ck_assert_int_eq(ibv_modify_qp(f.p.qp[0], &a, IBV_QP_STATE), 0);
	a.ah_attr.dlid = 0x7777;
	a.ah_attr.port_num = 1;
	ck_assert_int_eq(ibv_modify_qp(f.p.qp[0], &a, IBV_QP_STATE | IBV_QP_AV), 0);
	a.qp_state = IBV_QPS_RTS;
	ck_assert_int_eq(ibv_modify_qp(f.p.qp[0], &a, IBV_QP_STATE), 0);
	vt_recv(f.p.qp[1], 1, BUF(f.b), 64, f.b->lkey);
	vt_send(f.p.qp[0], 2, IBV_WR_SEND, IBV_SEND_SIGNALED, BUF(f.a), 8,
		f.a->lkey, 0, 0);
	vt_expect_wc(f.p.scq[0], &wc, 2, IBV_WC_RETRY_EXC_ERR,
		     "a SEND on a path to nobody");
	ck_assert_int_eq(vt_poll(f.p.rcq[1], &wc, 1, 0), 0);
	fx_free(&f);
}
END_TEST

/* A forked child has no grant: nothing would revoke its mapping. */
START_TEST(rdma_grant_not_inherited)
{
	struct ibv_mr *t;
	struct ibv_wc wc;
	struct fx f;
	int status;
	pid_t pid;

	fx_init(&f, NULL);
	t = vt_reg_memfd(D.pd, LEN, VT_ACCESS_ALL, GRANTED);
	vt_send(f.p.qp[0], 1, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, BUF(f.a),
		64, f.a->lkey, ADDR(t, 0), t->rkey);
	vt_expect_ok(f.p.scq[0], &wc, 1, IBV_WC_RDMA_WRITE, "a granted WRITE");
	ck_assert_int_eq(granted_maps(NULL), 2);	/* the MR's, the grant's */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)		/* the MR's own mapping is inherited, not more */
		_exit(granted_maps(NULL) == 1 ? 0 : 1);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	vt_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "the forked child maps the grant too");
	vt_dereg_memfd(t);
	fx_free(&f);
}
END_TEST

/*
 * Lease words held by a library that was never granted anything (either
 * side may write them): its pair's RESET does not wait for it, and it
 * loses no grants for it.
 */
START_TEST(rdma_lease_held_without_grant)
{
	struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };
	struct ibvd_lease *lease;
	struct ibv_mr *t;
	struct ibv_wc wc;
	void *base = NULL;
	struct fx f;

	fx_init(&f, NULL);
	ck_assert_int_gt(vt_memfd_maps("ibvd-transit", NULL, &base), 0);
	lease = (struct ibvd_lease *)((uint8_t *)base + IBVD_TRANSIT_LEASE_OFF);
	__atomic_store_n(&lease[0].in_use, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&lease[1].in_use, 1, __ATOMIC_SEQ_CST);
	ck_assert_int_eq(ibv_modify_qp(f.p.qp[1], &reset, IBV_QP_STATE), 0);
	ck_assert_int_eq(ibv_modify_qp(f.p.qp[0], &reset, IBV_QP_STATE), 0);
	fx_free(&f);
	/* a new pair of this context is granted as before */
	fx_init(&f, NULL);
	t = vt_reg_memfd(D.pd, LEN, VT_ACCESS_ALL, GRANTED);
	vt_send(f.p.qp[0], 1, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, BUF(f.a),
		64, f.a->lkey, ADDR(t, 0), t->rkey);
	vt_expect_ok(f.p.scq[0], &wc, 1, IBV_WC_RDMA_WRITE, "a granted WRITE");
	vt_assert(granted_maps(NULL) > 0, "no grant after a lease held without one");
	vt_dereg_memfd(t);
	fx_free(&f);
}
END_TEST

static int channel_ready(struct ibv_comp_channel *ch, int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };

	return poll(&p, 1, ms) > 0;
}

static void take_event(struct ibv_comp_channel *ch, struct ibv_cq *want,
		       const char *what)
{
	struct ibv_cq *cq;
	void *ctx;

	ck_assert_msg(channel_ready(ch, vt_tmo_ms()), "no completion event: %s", what);
	ck_assert_int_eq(ibv_get_cq_event(ch, &cq, &ctx), 0);
	ck_assert_ptr_eq(cq, want);
	ibv_ack_cq_events(cq, 1);
}

/*
 * An events test's pair: side 0 sends on scq, side 1 receives on rcq,
 * the CQs on one channel or on two (rch), with rings; two MRs.
 */
struct events_fx {
	struct ibv_comp_channel *ch, *rch;
	struct ibv_cq *scq, *rcq;
	struct vt_pair p;
	struct ibv_mr *a, *b;
};

static void events_open(struct events_fx *f, bool two_channels)
{
	f->ch = ibv_create_comp_channel(D.ctx);
	f->rch = two_channels ? ibv_create_comp_channel(D.ctx) : f->ch;
	ck_assert(f->ch && f->rch);
	f->scq = ibv_create_cq(D.ctx, 64, NULL, f->ch, 0);
	f->rcq = ibv_create_cq(D.ctx, 64, NULL, f->rch, 0);
	ck_assert(f->scq && f->rcq);
	vt_pair_on(&f->p, &D, NULL, NULL, f->scq, f->rcq);
	f->a = vt_reg(D.pd, 4096, VT_ACCESS_ALL);
	f->b = vt_reg(D.pd, 4096, VT_ACCESS_ALL);
	ck_assert_msg(vt_transit_maps() > 0, "the pair has no transit rings");
}

static void events_close(struct events_fx *f)
{
	vt_dereg(f->a);
	vt_dereg(f->b);
	vt_pair_free(&f->p);
	ck_assert_int_eq(ibv_destroy_cq(f->scq), 0);
	ck_assert_int_eq(ibv_destroy_cq(f->rcq), 0);
	if (f->rch != f->ch)
		ck_assert_int_eq(ibv_destroy_comp_channel(f->rch), 0);
	ck_assert_int_eq(ibv_destroy_comp_channel(f->ch), 0);
}

/* Events: solicited-only arms wait for a solicited SEND; senders sleep. */
START_TEST(events)
{
	struct events_fx f;
	struct ibv_wc wc;

	events_open(&f, false);

	/* solicited only: an unsolicited SEND raises nothing */
	vt_recv(f.p.qp[1], 1, f.b->addr, 4096, f.b->lkey);
	vt_recv(f.p.qp[1], 2, f.b->addr, 4096, f.b->lkey);
	ck_assert_int_eq(ibv_req_notify_cq(f.rcq, 1), 0);
	vt_send(f.p.qp[0], 3, IBV_WR_SEND, 0, f.a->addr, 8, f.a->lkey, 0, 0);
	ck_assert_msg(!channel_ready(f.ch, QUIET_MS), "event for an unsolicited SEND");
	vt_send(f.p.qp[0], 4, IBV_WR_SEND, IBV_SEND_SOLICITED, f.a->addr, 8,
		f.a->lkey, 0, 0);
	take_event(f.ch, f.rcq, "a solicited SEND");
	vt_expect_ok(f.rcq, &wc, 1, IBV_WC_RECV, "unsolicited");
	vt_expect_ok(f.rcq, &wc, 2, IBV_WC_RECV, "solicited");

	/* a sender asleep on its CQ hears of its SEND, receiver not polling */
	vt_recv(f.p.qp[1], 5, f.b->addr, 4096, f.b->lkey);
	vt_expect_none(f.scq, 0, "send CQ before");
	ck_assert_int_eq(ibv_req_notify_cq(f.scq, 0), 0);
	vt_send(f.p.qp[0], 6, IBV_WR_SEND, IBV_SEND_SIGNALED, f.a->addr, 8,
		f.a->lkey, 0, 0);
	take_event(f.ch, f.scq, "a sleeping sender");
	vt_expect_ok(f.scq, &wc, 6, IBV_WC_SEND, "the sleeping sender's SEND");
	vt_expect_ok(f.rcq, &wc, 5, IBV_WC_RECV, "its receive");

	/* a receiver asleep with a receive posted hears of the next SEND */
	vt_recv(f.p.qp[1], 8, f.b->addr, 4096, f.b->lkey);
	ck_assert_int_eq(ibv_req_notify_cq(f.rcq, 0), 0);
	vt_send(f.p.qp[0], 7, IBV_WR_SEND, 0, f.a->addr, 8, f.a->lkey, 0, 0);
	take_event(f.ch, f.rcq, "a sleeping receiver");
	vt_expect_ok(f.rcq, &wc, 8, IBV_WC_RECV, "the sleeping receiver's");
	events_close(&f);
}
END_TEST

/* No event on ch now: ibv_get_cq_event on the non-blocking fd says so. */
static void expect_no_event(struct ibv_comp_channel *ch, const char *what)
{
	int flags = fcntl(ch->fd, F_GETFL), r, err;
	struct ibv_cq *cq;
	void *ctx;

	ck_assert(flags >= 0 && fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) == 0);
	r = ibv_get_cq_event(ch, &cq, &ctx);
	err = errno;
	ck_assert_msg(r != 0 && err == EAGAIN, "%s: an event (%d, %s)", what, r,
		      strerror(err));
	ck_assert_int_eq(fcntl(ch->fd, F_SETFL, flags), 0);
}

/* The next event on ch must be cq's; it is armed again, as perftest does. */
static void next_event(struct ibv_comp_channel *ch, struct ibv_cq *cq,
		       const char *what)
{
	take_event(ch, cq, what);
	ck_assert_int_eq(ibv_req_notify_cq(cq, 0), 0);
}

/* Exactly one completion in cq now, wr_id's, of opcode op, successful. */
static void poll_once(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_opcode op,
		      const char *what)
{
	struct ibv_wc wc;
	int n = ibv_poll_cq(cq, 1, &wc);

	ck_assert_msg(n == 1, "%s: an event, then %d completions", what, n);
	ck_assert_msg(wc.status == IBV_WC_SUCCESS && wc.opcode == op &&
		      wc.wr_id == wr_id, "%s: status %d opcode %d wr_id %llu",
		      what, wc.status, wc.opcode, (unsigned long long)wc.wr_id);
}

/*
 * The event of an armed CQ on ch, taken as an app that sleeps in its own
 * poll() of the non-blocking fd takes it (UCX): readable, then one
 * ibv_get_cq_event that does not wait.
 */
static void take_event_nonblocking(struct ibv_comp_channel *ch,
				   struct ibv_cq *want, const char *what)
{
	int flags = fcntl(ch->fd, F_GETFL), r, err;
	struct ibv_cq *cq;
	void *ctx;

	ck_assert(flags >= 0 && fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) == 0);
	ck_assert_msg(channel_ready(ch, vt_tmo_ms()), "not readable: %s", what);
	r = ibv_get_cq_event(ch, &cq, &ctx);
	err = errno;
	ck_assert_msg(r == 0, "%s: no event (%s)", what, strerror(err));
	ck_assert_ptr_eq(cq, want);
	ibv_ack_cq_events(cq, 1);
	ck_assert_int_eq(fcntl(ch->fd, F_SETFL, flags), 0);
}

/*
 * Events keep a NIC's timing: a SEND in the ring when the CQ was armed
 * raises no event of that arm once an event told the app of what its
 * CQ holds (a NIC's CQE would have been there before the arm); one that
 * comes later raises it, also when the poll that places it takes it at
 * once (a NIC's CQE fires the arm whoever polls it: UCX's ud_verbs
 * sleeps on the channel while its async thread polls the CQ), and so
 * does one that a poll leaves in the CQ.  A CQ never polled is polled to
 * its start, as a NIC's is at consumer index 0: its first arm fires for a
 * SEND already there.
 */
START_TEST(event_timing)
{
	struct events_fx f;
	uint64_t id;

	events_open(&f, false);
	for (id = 1; id <= 5; id++)
		vt_recv(f.p.qp[1], id, f.b->addr, 4096, f.b->lkey);

	vt_send(f.p.qp[0], 1, IBV_WR_SEND, 0, f.a->addr, 8, f.a->lkey, 0, 0);
	ck_assert_int_eq(ibv_req_notify_cq(f.rcq, 0), 0);
	take_event(f.ch, f.rcq, "a SEND before the first arm of a CQ never polled");
	poll_once(f.rcq, 1, IBV_WC_RECV, "the SEND before the first arm");
	ck_assert_int_eq(ibv_req_notify_cq(f.rcq, 0), 0);

	vt_send(f.p.qp[0], 2, IBV_WR_SEND, 0, f.a->addr, 8, f.a->lkey, 0, 0);
	poll_once(f.rcq, 2, IBV_WC_RECV, "a SEND after the arm");
	take_event_nonblocking(f.ch, f.rcq, "a SEND after the arm that its poll took");
	expect_no_event(f.ch, "one SEND, one event");
	ck_assert_int_eq(ibv_req_notify_cq(f.rcq, 0), 0);

	vt_send(f.p.qp[0], 3, IBV_WR_SEND, 0, f.a->addr, 8, f.a->lkey, 0, 0);
	vt_send(f.p.qp[0], 4, IBV_WR_SEND, 0, f.a->addr, 8, f.a->lkey, 0, 0);
	poll_once(f.rcq, 3, IBV_WC_RECV, "the first of two");
	take_event(f.ch, f.rcq, "a SEND a poll left in the CQ");

	/* the event told of what the CQ holds: a SEND before the arm is quiet */
	vt_send(f.p.qp[0], 5, IBV_WR_SEND, 0, f.a->addr, 8, f.a->lkey, 0, 0);
	ck_assert_int_eq(ibv_req_notify_cq(f.rcq, 0), 0);
	expect_no_event(f.ch, "a SEND that came before the arm");
	poll_once(f.rcq, 4, IBV_WC_RECV, "the one left");
	poll_once(f.rcq, 5, IBV_WC_RECV, "the SEND before the arm");
	vt_expect_none(f.rcq, 0, "after all");
	events_close(&f);
}
END_TEST

/*
 * Side 0 with its send CQ on a completion channel (and its receive CQ
 * too if rcq_events), side 1 on a CQ of its own; connected, with rings.
 */
struct event_pair {
	struct ibv_comp_channel *ch;
	struct ibv_cq *scq, *rcq, *cq1;
	struct ibv_qp *qp[2];
};

static void event_pair_open(struct event_pair *e, bool rcq_events,
			    uint32_t psn)
{
	struct vt_qp_opts o[2] = { { .psn = psn }, { .psn = psn + 0x111 } };
	struct vt_addr addr[2];
	int k;

	e->ch = ibv_create_comp_channel(D.ctx);
	ck_assert_ptr_nonnull(e->ch);
	e->scq = ibv_create_cq(D.ctx, 16, NULL, e->ch, 0);
	e->rcq = ibv_create_cq(D.ctx, 16, NULL, rcq_events ? e->ch : NULL, 0);
	e->cq1 = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	ck_assert(e->scq && e->rcq && e->cq1);
	e->qp[0] = vt_qp(&D, e->scq, e->rcq, &o[0]);
	e->qp[1] = vt_qp(&D, e->cq1, e->cq1, &o[1]);
	for (k = 0; k < 2; k++)
		vt_qp_addr(&D, e->qp[k], &o[k], &addr[k]);
	vt_connect(&D, e->qp[0], &addr[1], &o[0]);
	vt_connect(&D, e->qp[1], &addr[0], &o[1]);
}

static void event_pair_close(struct event_pair *e)
{
	ck_assert_int_eq(ibv_destroy_qp(e->qp[0]), 0);
	ck_assert_int_eq(ibv_destroy_qp(e->qp[1]), 0);
	ck_assert_int_eq(ibv_destroy_cq(e->scq), 0);
	ck_assert_int_eq(ibv_destroy_cq(e->rcq), 0);
	ck_assert_int_eq(ibv_destroy_cq(e->cq1), 0);
	ck_assert_int_eq(ibv_destroy_comp_channel(e->ch), 0);
}

/*
 * One round of a sender asleep on its send CQ (in ibv_get_cq_event, or in
 * its own poll() of the channel's fd) while its receiver, the same
 * thread, takes nothing; with receiver_armed, the receiver's CQ is armed
 * too and its event is taken after.
 */
static void sleeping_sender_round(struct events_fx *f, uint64_t round,
				  bool own_poll, bool receiver_armed)
{
	struct ibv_wc wc;
	struct ibv_cq *cq;
	void *ctx;

	vt_recv(f->p.qp[1], round, f->b->addr, 4096, f->b->lkey);
	if (receiver_armed)
		ck_assert_int_eq(ibv_req_notify_cq(f->rcq, 0), 0);
	ck_assert_int_eq(ibv_req_notify_cq(f->scq, 0), 0);
	vt_send(f->p.qp[0], round, IBV_WR_SEND, IBV_SEND_SIGNALED, f->a->addr,
		8, f->a->lkey, 0, 0);
	if (own_poll) {
		take_event(f->ch, f->scq, "a sender asleep in its own poll()");
	} else {
		/* blocking: a hang here is the Check case's timeout */
		ck_assert_int_eq(ibv_get_cq_event(f->ch, &cq, &ctx), 0);
		ck_assert_ptr_eq(cq, f->scq);
		ibv_ack_cq_events(cq, 1);
	}
	vt_expect_ok(f->scq, &wc, round, IBV_WC_SEND, "the sleeper's SEND");
	if (receiver_armed)
		take_event(f->rch, f->rcq, "the receiver that did not wait");
	vt_expect_ok(f->rcq, &wc, round, IBV_WC_RECV, "its receive");
}

/*
 * A sender asleep in ibv_get_cq_event counts on its receiver's library to
 * wake it once it took the SEND (transit.h, "Blocking"); one that never
 * does (it armed its CQ, then went to do something else: here it is the
 * same thread) leaves the sender to the engine after a moment.  The
 * first round teaches the library where its app sleeps.
 */
START_TEST(sleeper_fallback)
{
	struct events_fx f;
	uint64_t round;

	events_open(&f, true);
	for (round = 0; round < 3; round++)
		sleeping_sender_round(&f, round, false, true);
	ck_assert_msg(!channel_ready(f.ch, QUIET_MS), "the sender's channel, after");
	ck_assert_msg(!channel_ready(f.rch, QUIET_MS), "the receiver's channel, after");
	events_close(&f);
}
END_TEST

/*
 * A sender that slept in ibv_get_cq_event once and then sleeps in its own
 * poll() on the same blocking fd, and back: the library has to wake that
 * poll() to watch for it.
 */
START_TEST(sleeper_moves)
{
	struct events_fx f;
	uint64_t round;

	events_open(&f, true);
	for (round = 0; round < 6; round++)
		sleeping_sender_round(&f, round, round % 2, false);
	events_close(&f);
}
END_TEST

/*
 * A wake-up byte whose reason is gone already (the app's own poll took
 * the message a sender poked for): the channel is readable, and an app
 * that poll()ed it calls a blocking ibv_get_cq_event, as it may with the
 * kernel's channel.  With its sender dead nothing else comes: the call
 * must return an event of the armed CQ, not sleep for ever (direct.sh
 * saw one in about 50 killed senders).
 */
START_TEST(poke_for_nothing)
{
	struct ibvc_comp_channel *ich;
	struct events_fx f;
	struct ibv_cq *cq;
	struct ibv_wc wc;
	void *ctx;
	long t0;

	events_open(&f, true);
	/* a round trip first: the receiver's channel has its pair then */
	vt_recv(f.p.qp[1], 1, f.b->addr, 4096, f.b->lkey);
	vt_send(f.p.qp[0], 2, IBV_WR_SEND, IBV_SEND_SIGNALED, f.a->addr, 8,
		f.a->lkey, 0, 0);
	vt_expect_ok(f.scq, &wc, 2, IBV_WC_SEND, "the SEND");
	vt_expect_ok(f.rcq, &wc, 1, IBV_WC_RECV, "its receive");
	ich = to_ibvc_channel(f.rch);
	ck_assert_msg(ich->poke[1] >= 0, "the receiver's channel has no wake-up pair");
	ck_assert_int_eq(ibv_req_notify_cq(f.rcq, 0), 0);
	ck_assert_int_eq(send(ich->poke[1], "", 1, MSG_DONTWAIT), 1);
	ck_assert_msg(channel_ready(f.rch, vt_tmo_ms()), "the byte made nothing readable");
	t0 = vt_now_ms();
	/* blocking: a hang here is the Check case's timeout */
	ck_assert_int_eq(ibv_get_cq_event(f.rch, &cq, &ctx), 0);
	ck_assert_ptr_eq(cq, f.rcq);
	ibv_ack_cq_events(cq, 1);
	ck_assert_msg(vt_now_ms() - t0 < vt_tmo_ms(), "the event took %ld ms",
		      vt_now_ms() - t0);
	ck_assert_int_eq(ibv_poll_cq(f.rcq, 1, &wc), 0);
	/* the CQ's next arm fires for a real completion, as before */
	ck_assert_int_eq(ibv_req_notify_cq(f.rcq, 0), 0);
	ck_assert_msg(!channel_ready(f.rch, QUIET_MS), "readable after the event");
	vt_recv(f.p.qp[1], 3, f.b->addr, 4096, f.b->lkey);
	vt_send(f.p.qp[0], 4, IBV_WR_SEND, IBV_SEND_SIGNALED, f.a->addr, 8,
		f.a->lkey, 0, 0);
	take_event(f.rch, f.rcq, "a SEND after the unseen poke");
	vt_expect_ok(f.rcq, &wc, 3, IBV_WC_RECV, "its receive");
	vt_expect_ok(f.scq, &wc, 4, IBV_WC_SEND, "the SEND");
	events_close(&f);
}
END_TEST

/* late_round's receiver: posts its receive only after a while. */
struct late_receive {
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint64_t id;
	long ms;
};

static void *late_receive_main(void *arg)
{
	struct late_receive *l = arg;

	vt_sleep_ms(l->ms);
	vt_recv(l->qp, l->id, l->mr->addr, 64, l->mr->lkey);
	return NULL;
}

/*
 * Side 0 sends SEND id and sleeps in ibv_get_cq_event for it; side 1
 * posts the receive for it only ms later: the first event must be the
 * send CQ's, with the SEND's completion.
 */
static void late_round(struct event_pair *e, struct ibv_mr *a,
		       struct ibv_mr *b, uint64_t id, long ms)
{
	struct late_receive l = { .qp = e->qp[1], .mr = b, .id = id, .ms = ms };
	pthread_t thread;
	struct ibv_cq *cq;
	struct ibv_wc wc;
	void *ctx;

	ck_assert_int_eq(pthread_create(&thread, NULL, late_receive_main, &l), 0);
	vt_send(e->qp[0], id, IBV_WR_SEND, IBV_SEND_SIGNALED, a->addr, 8,
		a->lkey, 0, 0);
	/* blocking: a hang here is the Check case's timeout */
	ck_assert_int_eq(ibv_get_cq_event(e->ch, &cq, &ctx), 0);
	ibv_ack_cq_events(cq, 1);
	pthread_join(thread, NULL);
	ck_assert_msg(cq == e->scq, "SEND %llu, taken %ld ms late: the %s CQ's event",
		      (unsigned long long)id, ms, cq == e->rcq ? "receive" : "wrong");
	ck_assert_int_eq(ibv_req_notify_cq(e->scq, 0), 0);
	poll_once(e->scq, id, IBV_WC_SEND, "the late SEND");
	vt_expect_ok(e->cq1, &wc, id, IBV_WC_RECV, "its receive");
}

/*
 * A sender asleep in ibv_get_cq_event (never in its own poll() of the fd)
 * for its SEND, with its receive CQ armed on the same channel, as
 * perftest's -e: once the library knows its app sleeps there, it pokes
 * its own channel at each post, to watch for the sleeper
 * (ibvc_channel_fallback).  That byte stands for no completion: a peer
 * that takes the SEND only after STALE_WAIT_MS (a loaded machine; here
 * no receive posted meanwhile) must bring the send CQ's event, not one
 * of the receive CQ with nothing in it (perftest then polls the wrong
 * CQ, and its count of events drifts: ib_send_lat -e hung once in 210
 * runs under CPU hogs).
 */
START_TEST(late_peer)
{
	struct event_pair e;
	struct ibv_mr *a, *b;

	/* scq, then rcq: the channel looks at rcq first, as perftest's */
	event_pair_open(&e, true, 0x555);
	a = vt_reg(D.pd, 4096, VT_ACCESS_ALL);
	b = vt_reg(D.pd, 4096, VT_ACCESS_ALL);
	ck_assert_msg(vt_transit_maps() > 0, "the pair has no transit rings");
	ck_assert_int_eq(ibv_req_notify_cq(e.scq, 0), 0);
	ck_assert_int_eq(ibv_req_notify_cq(e.rcq, 0), 0);
	/* the first sleep teaches the library where its app sleeps */
	late_round(&e, a, b, 1, 50);
	late_round(&e, a, b, 2, 400);
	/* readable, maybe: a watch poke of the arm; but no event */
	vt_sleep_ms(QUIET_MS);
	expect_no_event(e.ch, "after the late SEND's");

	vt_dereg(a);
	vt_dereg(b);
	event_pair_close(&e);
}
END_TEST

/* A receiver's thread, asleep in a blocking ibv_get_cq_event `want` times. */
struct sleeper {
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	unsigned int want;
	unsigned int events;	/* taken so far (atomic) */
};

static void *sleeper_main(void *arg)
{
	struct sleeper *s = arg;
	struct ibv_cq *cq;
	unsigned int i;
	void *ctx;

	for (i = 0; i < s->want; i++) {
		if (ibv_get_cq_event(s->ch, &cq, &ctx) != 0 || cq != s->cq)
			break;
		ibv_ack_cq_events(cq, 1);
		__atomic_add_fetch(&s->events, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void sleeper_wait(struct sleeper *s, unsigned int n, const char *what)
{
	long end = vt_now_ms() + vt_tmo_ms();

	while (__atomic_load_n(&s->events, __ATOMIC_ACQUIRE) < n &&
	       vt_now_ms() < end)
		vt_sleep_ms(1);
	ck_assert_msg(__atomic_load_n(&s->events, __ATOMIC_ACQUIRE) >= n,
		      "no event: %s", what);
}

/*
 * An error completion fires a solicited-only arm too, as a NIC's does:
 * an unsolicited SEND too long for the receive of a receiver asleep in
 * ibv_get_cq_event (first taught, by one event, that it sleeps there).
 */
START_TEST(solicited_arm_error)
{
	struct sleeper s = { .want = 2 };
	struct events_fx f;
	struct ibv_wc wc;
	pthread_t thread;

	events_open(&f, true);
	s.ch = f.rch;
	s.cq = f.rcq;
	vt_recv(f.p.qp[1], 1, f.b->addr, 4096, f.b->lkey);
	ck_assert_int_eq(ibv_req_notify_cq(f.rcq, 0), 0);
	ck_assert_int_eq(pthread_create(&thread, NULL, sleeper_main, &s), 0);
	vt_sleep_ms(20);
	vt_send(f.p.qp[0], 1, IBV_WR_SEND, 0, f.a->addr, 8, f.a->lkey, 0, 0);
	sleeper_wait(&s, 1, "a receiver asleep, any completion");
	vt_expect_ok(f.rcq, &wc, 1, IBV_WC_RECV, "its receive");

	vt_recv(f.p.qp[1], 2, f.b->addr, 8, f.b->lkey);
	ck_assert_int_eq(ibv_req_notify_cq(f.rcq, 1), 0);
	vt_sleep_ms(20);
	vt_send(f.p.qp[0], 2, IBV_WR_SEND, 0, f.a->addr, 64, f.a->lkey, 0, 0);
	sleeper_wait(&s, 2, "an error completion on a solicited-only arm");
	vt_expect_wc(f.rcq, &wc, 2, IBV_WC_LOC_LEN_ERR, "the receive too short");
	pthread_join(thread, NULL);
	events_close(&f);
}
END_TEST

/* The wake-up pairs' ends this process holds: its stream sockets. */
static int wake_pair_fds(int *fds, int max)
{
	int fd, n = 0, type;
	socklen_t len;

	for (fd = 3; fd < 1024 && n < max; fd++) {
		len = sizeof(type);
		if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 &&
		    type == SOCK_STREAM)
			fds[n++] = fd;
	}
	return n;
}

/* Every byte a stream socket takes without blocking: garbage. */
static void flood(int fd)
{
	char junk[4096];

	memset(junk, 0xa5, sizeof(junk));
	while (send(fd, junk, sizeof(junk), MSG_DONTWAIT | MSG_NOSIGNAL) > 0)
		;
}

/* A receiver asleep, then a sender asleep: each hears of its own. */
static void sleepers_hear(struct events_fx *f, uint64_t id)
{
	struct ibv_qp **qp = f->p.qp;
	struct ibv_wc wc;

	vt_recv(qp[1], id, f->b->addr, 4096, f->b->lkey);
	ck_assert_int_eq(ibv_req_notify_cq(f->rcq, 0), 0);
	vt_send(qp[0], id, IBV_WR_SEND, 0, f->a->addr, 8, f->a->lkey, 0, 0);
	take_event(f->ch, f->rcq, "a sleeping receiver");
	vt_expect_ok(f->rcq, &wc, id, IBV_WC_RECV, "its receive");
	vt_recv(qp[1], id + 1, f->b->addr, 4096, f->b->lkey);
	ck_assert_int_eq(ibv_req_notify_cq(f->scq, 0), 0);
	vt_send(qp[0], id + 1, IBV_WR_SEND, IBV_SEND_SIGNALED, f->a->addr, 8,
		f->a->lkey, 0, 0);
	take_event(f->ch, f->scq, "a sleeping sender");
	vt_expect_ok(f->scq, &wc, id + 1, IBV_WC_SEND, "its SEND");
	vt_expect_ok(f->rcq, &wc, id + 1, IBV_WC_RECV, "its receive");
}

/*
 * A peer that fills the wake-up pair with garbage, then shuts it: the
 * sleepers only wake (for nothing, then never through it), and still
 * hear of their completions, one event each, through the engine at last.
 */
START_TEST(wake_pair_hostile)
{
	int fds[16], n, i;
	struct events_fx f;
	struct ibv_cq *cq;
	void *ctx;

	events_open(&f, false);
	sleepers_hear(&f, 10);
	n = wake_pair_fds(fds, 16);
	vt_assert((n > 0) == expect_rings(), "%d wake-up pair ends", n);

	for (i = 0; i < n; i++)
		flood(fds[i]);
	ck_assert_int_eq(ibv_req_notify_cq(f.rcq, 0), 0);
	/* garbage wakes, but is no event: a non-blocking look finds none */
	ck_assert_int_eq(fcntl(f.ch->fd, F_SETFL, O_NONBLOCK), 0);
	ck_assert_int_eq(ibv_get_cq_event(f.ch, &cq, &ctx), -1);
	ck_assert_int_eq(errno, EAGAIN);
	ck_assert_int_eq(fcntl(f.ch->fd, F_SETFL, 0), 0);
	ck_assert_msg(!channel_ready(f.ch, 0), "drained, the channel still reads");
	for (i = 0; i < 3; i++)
		sleepers_hear(&f, 20 + 2 * i);

	for (i = 0; i < n; i++)
		shutdown(fds[i], SHUT_WR);
	for (i = 0; i < 3; i++)
		sleepers_hear(&f, 40 + 2 * i);
	ck_assert_msg(!channel_ready(f.ch, QUIET_MS), "an event with no completion");
	events_close(&f);
}
END_TEST

/*
 * The wake-up pair carries bytes one way only, to the reading end the
 * channel's owner watches: a byte written into that end would wait in
 * the writing end, which the daemon keeps for the senders for as long as
 * the channel lives, for nobody to read.  It is refused (EPIPE).
 */
START_TEST(wake_pair_one_way)
{
	int fds[16], n, i, refused = 0;
	struct events_fx f;

	events_open(&f, false);
	sleepers_hear(&f, 10);
	n = wake_pair_fds(fds, 16);
	vt_assert((n > 0) == expect_rings(), "%d wake-up pair ends", n);
	for (i = 0; i < n; i++)
		if (send(fds[i], "x", 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
			ck_assert_int_eq(errno, EPIPE);
			refused++;
		}
	/* the reading end, and only it: the writing ends still wake */
	vt_assert(!expect_rings() || refused == 1,
		  "%d of %d ends refused a byte", refused, n);
	for (i = 0; i < 3; i++)
		sleepers_hear(&f, 20 + 2 * i);
	events_close(&f);
}
END_TEST

/*
 * RESET takes a QP's completions out of its CQs, as a NIC's provider
 * cleans them: a receive the library placed and the poll left is gone
 * with the engine's.
 */
START_TEST(reset_forgets_placed_completions)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };
	struct ibv_wc wc;
	struct fx f;

	fx_init(&f, NULL);
	vt_recv(f.p.qp[1], 1, BUF(f.b), 64, f.b->lkey);
	vt_recv(f.p.qp[1], 2, BUF(f.b), 64, f.b->lkey);
	vt_send(f.p.qp[0], 1, IBV_WR_SEND, 0, BUF(f.a), 8, f.a->lkey, 0, 0);
	vt_send(f.p.qp[0], 2, IBV_WR_SEND, 0, BUF(f.a), 8, f.a->lkey, 0, 0);
	vt_expect_ok(f.p.rcq[1], &wc, 1, IBV_WC_RECV, "the first of two");
	ck_assert_int_eq(ibv_modify_qp(f.p.qp[1], &a, IBV_QP_STATE), 0);
	ck_assert_int_eq(ibv_poll_cq(f.p.rcq[1], 1, &wc), 0);
	fx_free(&f);
}
END_TEST

/*
 * A poll takes a SEND that came after the arm, which fires the arm
 * (event_timing); a receiver that then sleeps on its blocking channel,
 * the CQ alone on it, wakes for the next SEND, whose event goes out in
 * place of the first one's (a poll would find nothing behind that one).
 * Twice, and once with the arm asked for again before the sleep.
 */
START_TEST(sleeper_after_a_taken_send)
{
	struct sleeper s = { .want = 3 };
	struct events_fx f;
	pthread_t thread;
	uint64_t id;

	events_open(&f, true);
	s.ch = f.rch;
	s.cq = f.rcq;
	for (id = 1; id <= 6; id++)
		vt_recv(f.p.qp[1], id, f.b->addr, 4096, f.b->lkey);
	for (id = 1; id <= 5; id += 2) {
		ck_assert_int_eq(ibv_req_notify_cq(f.rcq, 0), 0);
		vt_send(f.p.qp[0], id, IBV_WR_SEND, 0, f.a->addr, 8, f.a->lkey, 0, 0);
		poll_once(f.rcq, id, IBV_WC_RECV, "a SEND after the arm, polled");
		if (id == 5)
			ck_assert_int_eq(ibv_req_notify_cq(f.rcq, 0), 0);
		if (id == 1)
			ck_assert_int_eq(pthread_create(&thread, NULL, sleeper_main,
							&s), 0);
		vt_sleep_ms(20);	/* asleep in ibv_get_cq_event */
		vt_send(f.p.qp[0], id + 1, IBV_WR_SEND, 0, f.a->addr, 8,
			f.a->lkey, 0, 0);
		sleeper_wait(&s, (unsigned int)(id + 1) / 2,
			     "the SEND after one a poll took");
		poll_once(f.rcq, id + 1, IBV_WC_RECV, "the SEND that woke it");
	}
	pthread_join(thread, NULL);
	events_close(&f);
}
END_TEST

/*
 * A solicited-only arm on a send CQ: a SEND's success fires nothing, as
 * on the engine's path (only an error would).
 */
START_TEST(solicited_arm_on_send_cq)
{
	struct events_fx f;
	struct ibv_wc wc;

	events_open(&f, true);
	vt_recv(f.p.qp[1], 1, f.b->addr, 4096, f.b->lkey);
	ck_assert_int_eq(ibv_req_notify_cq(f.scq, 1), 0);
	vt_send(f.p.qp[0], 1, IBV_WR_SEND, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED,
		f.a->addr, 8, f.a->lkey, 0, 0);
	vt_expect_ok(f.rcq, &wc, 1, IBV_WC_RECV, "its receive");
	ck_assert_msg(!channel_ready(f.ch, QUIET_MS),
		      "a successful SEND fired a solicited-only send CQ");
	vt_expect_ok(f.scq, &wc, 1, IBV_WC_SEND, "the SEND");
	events_close(&f);
}
END_TEST

/*
 * A peer shut the receiver's wake-up pair, then two SENDs came after the
 * arm: a poll that takes one leaves the other in the CQ, and its event
 * comes all the same (the engine places and fires: the library could
 * not wake a sleeper for it).
 */
START_TEST(arm_without_wake_pair)
{
	struct ibv_send_wr w[2], *bad;
	struct ibv_sge sge;
	struct events_fx f;
	struct ibv_wc wc;
	int fds[16], n, i;

	events_open(&f, true);
	vt_recv(f.p.qp[1], 1, f.b->addr, 4096, f.b->lkey);
	ck_assert_int_eq(ibv_req_notify_cq(f.rcq, 0), 0);
	vt_send(f.p.qp[0], 1, IBV_WR_SEND, 0, f.a->addr, 8, f.a->lkey, 0, 0);
	take_event(f.rch, f.rcq, "before the pair is shut");
	poll_once(f.rcq, 1, IBV_WC_RECV, "the first SEND");
	n = wake_pair_fds(fds, 16);
	for (i = 0; i < n; i++)
		shutdown(fds[i], SHUT_WR);
	expect_no_event(f.rch, "the shut pair");

	vt_recv(f.p.qp[1], 2, f.b->addr, 4096, f.b->lkey);
	vt_recv(f.p.qp[1], 3, f.b->addr, 4096, f.b->lkey);
	ck_assert_int_eq(ibv_req_notify_cq(f.rcq, 0), 0);
	sge = (struct ibv_sge){ .addr = (uintptr_t)f.a->addr, .length = 8,
				.lkey = f.a->lkey };
	memset(w, 0, sizeof(w));
	w[0].wr_id = 2;
	w[0].sg_list = &sge;
	w[0].num_sge = 1;
	w[0].opcode = IBV_WR_SEND;
	w[0].next = &w[1];
	w[1] = w[0];
	w[1].wr_id = 3;
	w[1].next = NULL;
	ck_assert_int_eq(ibv_post_send(f.p.qp[0], w, &bad), 0);
	vt_expect_ok(f.rcq, &wc, 2, IBV_WC_RECV, "the first of two");
	take_event(f.rch, f.rcq, "the SEND left in the armed CQ");
	poll_once(f.rcq, 3, IBV_WC_RECV, "the one left");
	events_close(&f);
}
END_TEST

/*
 * Many pairs between the same two channels: their wake-up pairs cost the
 * process a few descriptors, not two for every QP (client poke.c).
 */
START_TEST(wake_pairs_shared)
{
	enum { NPAIRS = 8 };
	struct events_fx f;
	struct vt_pair more[NPAIRS];
	struct ibv_wc wc;
	int fds[64], n, i;

	events_open(&f, true);
	vt_assert(expect_rings(), "a case for the rings only");
	for (i = 0; i < NPAIRS; i++) {
		vt_pair_on(&more[i], &D, NULL, NULL, f.scq, f.rcq);
		vt_recv(more[i].qp[1], i, f.b->addr, 4096, f.b->lkey);
		vt_send(more[i].qp[0], i, IBV_WR_SEND, IBV_SEND_SIGNALED,
			f.a->addr, 8, f.a->lkey, 0, 0);
		vt_expect_ok(f.scq, &wc, i, IBV_WC_SEND, "a SEND");
		vt_expect_ok(f.rcq, &wc, i, IBV_WC_RECV, "its receive");
	}
	n = wake_pair_fds(fds, 64);
	/* each channel's two ends, and one end of each held for the peers */
	ck_assert_msg(n <= 6, "%d wake-up pair ends for %d pairs", n, NPAIRS + 1);
	for (i = 0; i < NPAIRS; i++)
		vt_pair_free(&more[i]);
	events_close(&f);
}
END_TEST

/*
 * One event per completion, as apps that count them expect (perftest's
 * -e polls once per event): side 0 sleeps on one channel for its own send
 * and receive CQs, side 1 answers each SEND, busy polling.  An event for
 * a SEND the sender saw taken before it armed again, or one raised before
 * its SEND was taken, shows as the wrong CQ's event or an empty poll.
 */
START_TEST(one_event_each)
{
	struct event_pair e;
	struct ibv_comp_channel *ch;
	struct ibv_cq *scq, *rcq, *cq1;
	struct ibv_qp **qp = e.qp;
	struct ibv_mr *a, *b;
	struct ibv_wc wc;
	uint64_t i;

	event_pair_open(&e, true, 0x111);
	ch = e.ch;
	scq = e.scq;
	rcq = e.rcq;
	cq1 = e.cq1;
	a = vt_reg(D.pd, 4096, VT_ACCESS_ALL);
	b = vt_reg(D.pd, 4096, VT_ACCESS_ALL);
	ck_assert_msg(vt_transit_maps() > 0, "the pair has no transit rings");

	ck_assert_int_eq(ibv_req_notify_cq(scq, 0), 0);
	ck_assert_int_eq(ibv_req_notify_cq(rcq, 0), 0);
	vt_recv(qp[1], 0, b->addr, 64, b->lkey);
	for (i = 0; i < 300; i++) {
		vt_recv(qp[0], i, BUF(a) + 64, 64, a->lkey);
		vt_send(qp[0], i, IBV_WR_SEND, IBV_SEND_SIGNALED, a->addr, 8,
			a->lkey, 0, 0);
		vt_expect_ok(cq1, &wc, i, IBV_WC_RECV, "side 1 receives");
		vt_recv(qp[1], i + 1, b->addr, 64, b->lkey);
		next_event(ch, scq, "side 0's SEND");
		poll_once(scq, i, IBV_WC_SEND, "side 0's send CQ");
		vt_send(qp[1], i, IBV_WR_SEND, IBV_SEND_SIGNALED, b->addr, 8,
			b->lkey, 0, 0);
		vt_expect_ok(cq1, &wc, i, IBV_WC_SEND, "side 1's answer");
		next_event(ch, rcq, "side 1's answer");
		poll_once(rcq, i, IBV_WC_RECV, "side 0's receive CQ");
	}
	ck_assert_msg(!channel_ready(ch, QUIET_MS), "an event with no completion");

	vt_dereg(a);
	vt_dereg(b);
	event_pair_close(&e);
}
END_TEST

/*
 * Side 1 of racing_taker: receives side 0's SENDs as fast as it can, on
 * the other CPU, and posts each receive again.
 */
struct taker {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	volatile bool stop;
	int failed;			/* a status, or -1: a post failed */
};

static void *taker_main(void *arg)
{
	struct taker *t = arg;
	struct ibv_sge sge = { .addr = ADDR(t->mr, 0), .length = 64,
			       .lkey = t->mr->lkey };
	struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;
	struct ibv_wc wc;

	while (!t->stop && !t->failed) {
		if (ibv_poll_cq(t->cq, 1, &wc) != 1)
			continue;
		if (wc.status != IBV_WC_SUCCESS)
			t->failed = (int)wc.status;
		else if (ibv_post_recv(t->qp, &wr, &bad))
			t->failed = -1;
	}
	return NULL;
}

/*
 * An armed send CQ fires for a SEND taken after the arm, even when the
 * receiver takes it in the instant between its publication and the
 * sender's library telling the engine what to wait for (perftest's -e,
 * one poll per event, hung on that).  Side 1 busy-polls in a thread, so
 * it often takes the SEND in that instant; each SEND's event must come.
 */
#define RACE_SENDS	30000

START_TEST(racing_taker)
{
	struct taker t = { 0 };
	struct event_pair e;
	struct ibv_mr *a;
	pthread_t thread;
	uint64_t i;
	int k;

	event_pair_open(&e, false, 0x333);
	a = vt_reg(D.pd, 4096, VT_ACCESS_ALL);
	ck_assert_msg(vt_transit_maps() > 0, "the pair has no transit rings");
	for (k = 0; k < 32; k++)
		vt_recv(e.qp[1], (uint64_t)k, BUF(a) + 2048, 64, a->lkey);

	t.qp = e.qp[1];
	t.cq = e.cq1;
	t.mr = a;
	ck_assert_int_eq(pthread_create(&thread, NULL, taker_main, &t), 0);
	for (i = 0; i < RACE_SENDS && !t.failed; i++) {
		ck_assert_int_eq(ibv_req_notify_cq(e.scq, 0), 0);
		vt_send(e.qp[0], i, IBV_WR_SEND, IBV_SEND_SIGNALED, a->addr, 8,
			a->lkey, 0, 0);
		if (!channel_ready(e.ch, vt_tmo_ms()))
			break;
		take_event(e.ch, e.scq, "side 0's SEND");
		poll_once(e.scq, i, IBV_WC_SEND, "side 0's send CQ");
	}
	t.stop = true;
	pthread_join(thread, NULL);
	ck_assert_msg(i == RACE_SENDS, "SEND %llu of %d: no event (side 1: %d)",
		      (unsigned long long)i, RACE_SENDS, t.failed);

	vt_dereg(a);
	event_pair_close(&e);
}
END_TEST

/* ---- UD: one pair per QP, made when it first sends to the other --------- */

static const struct vt_qp_opts UD = { .type = IBV_QPT_UD };

/* A UD pair with its rings: f->p.qp[0] sends to f->p.qp[1] through *ah. */
static void ud_init(struct fx *f, struct ibv_ah **ah)
{
	struct ibv_wc wc;

	vt_pair(&f->p, &D, &UD, 256);
	f->a = vt_reg(D.pd, LEN, VT_ACCESS_ALL);
	f->b = vt_reg(D.pd, 2 * LEN, VT_ACCESS_ALL);
	*ah = vt_ah(&D, D.port.lid, NULL);
	vt_assert(vt_transit_maps() == 0, "UD QPs with rings before a send");
	/* the first datagram asks for the rings and takes the engine */
	vt_recv(f->p.qp[1], 999, BUF(f->b), 64, f->b->lkey);
	vt_ud_send(f->p.qp[0], 999, *ah, f->p.qp[1]->qp_num, VT_QKEY,
		   BUF(f->a), 8, f->a->lkey, IBV_SEND_SIGNALED);
	vt_expect_ok(f->p.rcq[1], &wc, 999, IBV_WC_RECV, "the first datagram");
	vt_expect_ok(f->p.scq[0], &wc, 999, IBV_WC_SEND, "its send");
	/* each library maps them at its next post */
	vt_recv(f->p.qp[1], 998, BUF(f->b), 64, f->b->lkey);
	vt_ud_send(f->p.qp[0], 998, *ah, f->p.qp[1]->qp_num, VT_QKEY,
		   BUF(f->a), 8, f->a->lkey, IBV_SEND_SIGNALED);
	vt_expect_ok(f->p.rcq[1], &wc, 998, IBV_WC_RECV, "the second datagram");
	vt_expect_ok(f->p.scq[0], &wc, 998, IBV_WC_SEND, "its send");
	vt_assert((vt_transit_maps() > 0) == expect_rings(),
		  "the UD pair has %d transit ring mappings", vt_transit_maps());
}

static void ud_free(struct fx *f, struct ibv_ah *ah)
{
	vt_ah_free(ah);
	fx_free(f);
}

/*
 * Datagrams of every size up to the MTU: after the receive's 40-byte GRH
 * slot (left as it was: no GRH on the rings), byte_len counting it, the
 * sender's QPN, immediate data; one past the MTU fails at the sender.
 */
START_TEST(ud_sizes)
{
	static const uint32_t len[] = { 0, 1, 24, 40, 1000, 4056, 4096 };
	struct ibv_ah *ah;
	struct ibv_wc wc;
	struct fx f;
	unsigned int i;

	ud_init(&f, &ah);
	for (i = 0; i < VT_ARRAY_SIZE(len); i++) {
		vt_fill(BUF(f.a), len[i], 0, i + 1);
		memset(BUF(f.b), 0xee, 8192);
		vt_recv(f.p.qp[1], 100 + i, BUF(f.b), 40 + len[i], f.b->lkey);
		vt_ud_send(f.p.qp[0], i, ah, f.p.qp[1]->qp_num, VT_QKEY,
			   BUF(f.a), len[i], f.a->lkey, IBV_SEND_SIGNALED);
		vt_expect_ok(f.p.rcq[1], &wc, 100 + i, IBV_WC_RECV, "datagram");
		ck_assert_uint_eq(wc.byte_len, 40 + len[i]);
		ck_assert_uint_eq(wc.src_qp, f.p.qp[0]->qp_num);
		ck_assert_uint_eq(wc.slid, D.port.lid);
		ck_assert_uint_eq(wc.wc_flags & (IBV_WC_GRH | IBV_WC_WITH_IMM), 0);
		vt_expect_byte(BUF(f.b), 40, 0xee, "the GRH slot");
		vt_expect_pat(BUF(f.b) + 40, len[i], 0, i + 1, "the datagram");
		vt_expect_byte(BUF(f.b) + 40 + len[i], 64, 0xee, "past it");
		vt_expect_ok(f.p.scq[0], &wc, i, IBV_WC_SEND, "its send");
	}
	/* immediate data, and the reverse direction on the same pair */
	vt_recv(f.p.qp[0], 7, BUF(f.a), 1024, f.a->lkey);
	{
		struct ibv_sge sge = { (uintptr_t)BUF(f.b), 100, f.b->lkey };
		struct ibv_send_wr wr = { .wr_id = 8, .sg_list = &sge,
					  .num_sge = 1,
					  .opcode = IBV_WR_SEND_WITH_IMM,
					  .send_flags = IBV_SEND_SIGNALED,
					  .imm_data = htobe32(0xabcd1234) }, *bad;

		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = f.p.qp[0]->qp_num;
		wr.wr.ud.remote_qkey = VT_QKEY;
		ck_assert_int_eq(ibv_post_send(f.p.qp[1], &wr, &bad), 0);
	}
	vt_expect_ok(f.p.rcq[0], &wc, 7, IBV_WC_RECV, "with immediate");
	ck_assert_uint_eq(wc.byte_len, 140);
	ck_assert(wc.wc_flags & IBV_WC_WITH_IMM);
	ck_assert_uint_eq(be32toh(wc.imm_data), 0xabcd1234);
	ck_assert_uint_eq(wc.src_qp, f.p.qp[1]->qp_num);
	vt_expect_ok(f.p.scq[1], &wc, 8, IBV_WC_SEND, "its send");
	/* past the MTU: not sent, and no error (IBTA C10-93.1.1), as before */
	vt_recv(f.p.qp[1], 200, BUF(f.b), 8192, f.b->lkey);
	vt_ud_send(f.p.qp[0], 9, ah, f.p.qp[1]->qp_num, VT_QKEY, BUF(f.a),
		   4097, f.a->lkey, IBV_SEND_SIGNALED);
	vt_expect_ok(f.p.scq[0], &wc, 9, IBV_WC_SEND, "past the MTU");
	vt_expect_none(f.p.rcq[1], QUIET_MS, "nothing past the MTU");
	ud_free(&f, ah);
}
END_TEST

/*
 * A datagram with another Q_Key is dropped, counted in the port's
 * qkey_viol_cntr, and its send completes; a Q_Key with the high bit set
 * is the sending QP's own.
 */
START_TEST(ud_qkey)
{
	struct ibv_ah *ah;
	struct ibv_wc wc;
	uint32_t viol;
	struct fx f;

	ud_init(&f, &ah);
	viol = vt_qkey_viol(D.ctx, 1);
	vt_recv(f.p.qp[1], 1, BUF(f.b), 1024, f.b->lkey);
	vt_ud_send(f.p.qp[0], 2, ah, f.p.qp[1]->qp_num, VT_QKEY + 1,
		   BUF(f.a), 100, f.a->lkey, IBV_SEND_SIGNALED);
	vt_expect_ok(f.p.scq[0], &wc, 2, IBV_WC_SEND, "a wrong Q_Key's send");
	vt_expect_none(f.p.rcq[1], QUIET_MS, "a wrong Q_Key");
	vt_expect_qkey_viol(D.ctx, 1, viol + 1);
	vt_fill(BUF(f.a), 100, 0, 5);
	vt_ud_send(f.p.qp[0], 3, ah, f.p.qp[1]->qp_num, 0x80000000u,
		   BUF(f.a), 100, f.a->lkey, IBV_SEND_SIGNALED);
	vt_expect_ok(f.p.rcq[1], &wc, 1, IBV_WC_RECV, "the QP's own Q_Key");
	vt_expect_pat(BUF(f.b) + 40, 100, 0, 5, "its bytes");
	vt_expect_ok(f.p.scq[0], &wc, 3, IBV_WC_SEND, "its send");
	/* the pair on the rings by now: the receiver's library hands it on */
	vt_recv(f.p.qp[1], 4, BUF(f.b), 1024, f.b->lkey);
	vt_ud_send(f.p.qp[0], 5, ah, f.p.qp[1]->qp_num, VT_QKEY + 1,
		   BUF(f.a), 100, f.a->lkey, IBV_SEND_SIGNALED);
	vt_expect_ok(f.p.scq[0], &wc, 5, IBV_WC_SEND, "a wrong Q_Key's send");
	vt_expect_none(f.p.rcq[1], QUIET_MS, "a wrong Q_Key on the rings");
	vt_expect_qkey_viol(D.ctx, 1, viol + 2);
	ud_free(&f, ah);
}
END_TEST

/*
 * Datagrams that find no receive posted are dropped (after a moment in
 * the ring), their sends complete, and the next receive takes the next
 * datagram.
 */
START_TEST(ud_no_receive_drops)
{
	struct ibv_ah *ah;
	struct ibv_wc wc;
	struct fx f;
	int i;

	ud_init(&f, &ah);
	for (i = 0; i < 3; i++)
		vt_ud_send(f.p.qp[0], 10 + (uint64_t)i, ah, f.p.qp[1]->qp_num,
			   VT_QKEY, BUF(f.a), 512, f.a->lkey,
			   IBV_SEND_SIGNALED);
	for (i = 0; i < 3; i++)
		vt_expect_ok(f.p.scq[0], &wc, 10 + (uint64_t)i, IBV_WC_SEND,
			     "a dropped datagram's send");
	vt_expect_none(f.p.rcq[1], QUIET_MS, "no receive posted");
	vt_recv(f.p.qp[1], 20, BUF(f.b), 1024, f.b->lkey);
	vt_fill(BUF(f.a), 512, 0, 40);
	vt_ud_send(f.p.qp[0], 13, ah, f.p.qp[1]->qp_num, VT_QKEY, BUF(f.a),
		   512, f.a->lkey, IBV_SEND_SIGNALED);
	vt_expect_ok(f.p.rcq[1], &wc, 20, IBV_WC_RECV, "the next datagram");
	vt_expect_pat(BUF(f.b) + 40, 512, 0, 40, "its bytes");
	vt_expect_ok(f.p.scq[0], &wc, 13, IBV_WC_SEND, "its send");
	vt_expect_none(f.p.rcq[1], QUIET_MS, "none of the dropped ones");
	vt_expect_state(f.p.qp[1], IBV_QPS_RTS, "the receiver after drops");
	ud_free(&f, ah);
}
END_TEST

/*
 * A datagram longer than the receive it would take: the library leaves
 * it to the engine, which drops it (as rxe does); the QP stays in RTS and
 * the receive takes the next datagram that fits.
 */
START_TEST(ud_too_long)
{
	struct ibv_ah *ah;
	struct ibv_wc wc;
	struct fx f;

	ud_init(&f, &ah);
	memset(BUF(f.b), 0xee, 4096);
	vt_recv(f.p.qp[1], 1, BUF(f.b), 40 + 16, f.b->lkey);
	vt_fill(BUF(f.a), 64, 0, 30);
	vt_ud_send(f.p.qp[0], 2, ah, f.p.qp[1]->qp_num, VT_QKEY, BUF(f.a), 64,
		   f.a->lkey, IBV_SEND_SIGNALED);
	vt_expect_ok(f.p.scq[0], &wc, 2, IBV_WC_SEND, "a datagram too long");
	vt_expect_none(f.p.rcq[1], QUIET_MS, "a datagram too long");
	vt_expect_byte(BUF(f.b), 4096, 0xee, "the receive buffer");
	vt_expect_state(f.p.qp[1], IBV_QPS_RTS, "the receiver");
	vt_ud_send(f.p.qp[0], 3, ah, f.p.qp[1]->qp_num, VT_QKEY, BUF(f.a), 16,
		   f.a->lkey, IBV_SEND_SIGNALED);
	vt_expect_ok(f.p.rcq[1], &wc, 1, IBV_WC_RECV, "the next datagram");
	vt_expect_pat(BUF(f.b) + 40, 16, 0, 30, "its bytes");
	vt_expect_ok(f.p.scq[0], &wc, 3, IBV_WC_SEND, "its send");
	ud_free(&f, ah);
}
END_TEST

/*
 * A QP paired with one sender still hears from others, through the
 * engine (which takes the RQ's claim as the library does), and the
 * paired sender's datagrams land between them in order of arrival.
 */
START_TEST(ud_third_party)
{
	struct ibv_cq *cq = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	struct ibv_qp *third = vt_qp(&D, cq, cq, &UD);
	struct ibv_ah *ah;
	struct ibv_wc wc;
	struct fx f;
	int i;

	vt_connect(&D, third, NULL, &UD);
	ud_init(&f, &ah);
	for (i = 0; i < 20; i++) {
		struct ibv_qp *from = i % 2 ? third : f.p.qp[0];

		vt_fill(BUF(f.a) + 256 * i, 256, 0, 60 + i);
		vt_recv(f.p.qp[1], 30 + (uint64_t)i, BUF(f.b) + 512 * i, 512,
			f.b->lkey);
		vt_ud_send(from, (uint64_t)i, ah, f.p.qp[1]->qp_num, VT_QKEY,
			   BUF(f.a) + 256 * i, 256, f.a->lkey,
			   IBV_SEND_SIGNALED);
		vt_expect_ok(f.p.rcq[1], &wc, 30 + (uint64_t)i, IBV_WC_RECV,
			     "a datagram");
		ck_assert_uint_eq(wc.src_qp, from->qp_num);
		vt_expect_pat(BUF(f.b) + 512 * i + 40, 256, 0, 60 + i,
			      "its bytes");
		vt_expect_ok(i % 2 ? cq : f.p.scq[0], &wc, (uint64_t)i,
			     IBV_WC_SEND, "its send");
	}
	ud_free(&f, ah);
	ck_assert_int_eq(ibv_destroy_qp(third), 0);
	ck_assert_int_eq(ibv_destroy_cq(cq), 0);
}
END_TEST

/* An AH to our port with a GRH: SGID index, traffic class, flow label. */
static struct ibv_ah *ud_grh_ah(uint8_t sgid_index, uint8_t tclass,
				uint32_t flow)
{
	struct ibv_ah_attr a;
	struct ibv_ah *ah;

	memset(&a, 0, sizeof(a));
	a.dlid = D.port.lid;
	a.port_num = D.port_num;
	a.is_global = 1;
	a.grh.dgid = D.gid;
	a.grh.sgid_index = sgid_index;
	a.grh.hop_limit = 9;
	a.grh.traffic_class = tclass;
	a.grh.flow_label = flow;
	ah = ibv_create_ah(D.pd, &a);
	vt_assert(ah, "ibv_create_ah: %s", strerror(errno));
	return ah;
}

/* A datagram with immediate data (the last of each AH in ud_grh). */
static void ud_send_imm(struct ibv_qp *qp, uint64_t wr_id, struct ibv_ah *ah,
			uint32_t rqpn, const void *addr, uint32_t len,
			uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len,
			       .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
		.imm_data = htobe32(0x1234u),
	}, *bad = NULL;
	int ret;

	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = rqpn;
	wr.wr.ud.remote_qkey = VT_QKEY;
	ret = ibv_post_send(qp, &wr, &bad);
	vt_assert(ret == 0, "ibv_post_send(UD with immediate): %s", strerror(ret));
}

/*
 * Datagrams through an AH with a GRH take the rings too, and the
 * receiver's library makes their GRH byte for byte as the engine does
 * (the first datagram, which asks for the rings, is the engine's): its
 * SGID the sending port's GID at the AH's index, as the daemon gave it,
 * and its PayLen what a sender puts on the wire after a GRH (BTH, DETH,
 * ImmDt, the payload and its pad, ICRC).
 */
START_TEST(ud_grh)
{
	int nidx = 1, i, k;
	union ibv_gid g1;
	uint8_t first[40];
	struct ibv_ah *ah;
	struct ibv_wc wc;
	struct fx f;

	/* a second GID (an address of this host), if the port has one */
	if (ibv_query_gid(D.ctx, D.port_num, 1, &g1) == 0 &&
	    memcmp(g1.raw, (uint8_t[16]){ 0 }, 16) != 0)
		nidx = 2;
	vt_pair(&f.p, &D, &UD, 256);
	f.a = vt_reg(D.pd, LEN, VT_ACCESS_ALL);
	f.b = vt_reg(D.pd, 2 * LEN, VT_ACCESS_ALL);
	for (k = 0; k < nidx; k++) {
		ah = ud_grh_ah((uint8_t)k, (uint8_t)(0x20 + k), 0x12345u + (uint32_t)k);
		for (i = 0; i < 4; i++) {
			vt_fill(BUF(f.a), 300, 0, 70 + i);
			memset(BUF(f.b), 0xee, 1024);
			vt_recv(f.p.qp[1], (uint64_t)i, BUF(f.b), 1024, f.b->lkey);
			if (i == 3)
				ud_send_imm(f.p.qp[0], (uint64_t)i, ah,
					    f.p.qp[1]->qp_num, BUF(f.a), 301,
					    f.a->lkey);
			else
				vt_ud_send(f.p.qp[0], (uint64_t)i, ah,
					   f.p.qp[1]->qp_num, VT_QKEY, BUF(f.a),
					   300, f.a->lkey, IBV_SEND_SIGNALED);
			vt_expect_ok(f.p.rcq[1], &wc, (uint64_t)i, IBV_WC_RECV,
				     "a datagram with a GRH");
			ck_assert(wc.wc_flags & IBV_WC_GRH);
			ck_assert_uint_eq(wc.byte_len, i == 3 ? 341 : 340);
			/* 12 + 8 + 300 + 4; with ImmDt (4) and 301 bytes' pad (3) */
			ck_assert_uint_eq(BUF(f.b)[4] << 8 | BUF(f.b)[5],
					  i == 3 ? 332 : 324);
			ck_assert_uint_eq(wc.src_qp, f.p.qp[0]->qp_num);
			vt_expect_pat(BUF(f.b) + 40, 300, 0, 70 + i, "its bytes");
			vt_expect_ok(f.p.scq[0], &wc, (uint64_t)i, IBV_WC_SEND,
				     "its send");
			if (k == 0 && i == 0)
				memcpy(first, BUF(f.b), 40);
			/* all but the PayLen checked above */
			if (k == 0) {
				ck_assert_mem_eq(BUF(f.b), first, 4);
				ck_assert_mem_eq(BUF(f.b) + 6, first + 6, 34);
			}
			ck_assert_mem_eq(BUF(f.b) + 24, D.gid.raw, 16);	/* DGID */
			ck_assert_uint_eq(BUF(f.b)[7], 9);		/* hop limit */
			ck_assert_uint_eq(BUF(f.b)[1] >> 4 | (BUF(f.b)[0] & 0xf) << 4,
					  0x20 + k);		/* traffic class */
			if (k == 1)
				ck_assert_mem_eq(BUF(f.b) + 8, g1.raw, 16);
			else
				ck_assert_mem_eq(BUF(f.b) + 8, D.gid.raw, 16);
		}
		vt_ah_free(ah);
	}
	vt_assert((vt_transit_maps() > 0) == expect_rings(),
		  "UD QPs with a GRH have %d transit ring mappings",
		  vt_transit_maps());
	fx_free(&f);
}
END_TEST

/* A UD QP in RTS on cq, free to pair. */
static struct ibv_qp *ud_qp(struct ibv_cq *cq)
{
	struct ibv_qp *qp = vt_qp(&D, cq, cq, &UD);

	vt_connect(&D, qp, NULL, &UD);
	return qp;
}

/*
 * UCX's ud_verbs in its event mode: the receive CQ, on a non-blocking
 * channel, is armed; then a datagram comes, and a poll (UCX's async
 * thread's, on its timer) places and takes it before anyone looks at the
 * channel.  The channel must still become readable and give the arm's
 * event, as a NIC's CQE fires the arm whoever polls it: UCX's worker
 * sleeps until that thread's handler of the channel wakes it.
 */
START_TEST(ud_event_of_a_datagram_polled_at_once)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(D.ctx);
	struct ibv_cq *cq0, *cq1;
	struct ibv_mr *a, *b;
	struct vt_pair p;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	uint64_t id;

	ck_assert_ptr_nonnull(ch);
	cq0 = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	cq1 = ibv_create_cq(D.ctx, 64, NULL, ch, 0);
	ck_assert(cq0 && cq1);
	vt_pair_on(&p, &D, &UD, &UD, cq0, cq1);
	a = vt_reg(D.pd, 4096, VT_ACCESS_ALL);
	b = vt_reg(D.pd, 4096, VT_ACCESS_ALL);
	ah = vt_ah(&D, D.port.lid, NULL);
	/* the first datagram pairs them, the second maps the rings */
	for (id = 1; id <= 5; id++) {
		vt_recv(p.qp[1], id, BUF(b), 64, b->lkey);
		if (id > 2)
			ck_assert_int_eq(ibv_req_notify_cq(cq1, 0), 0);
		vt_ud_send(p.qp[0], id, ah, p.qp[1]->qp_num, VT_QKEY, BUF(a),
			   8, a->lkey, IBV_SEND_SIGNALED);
		vt_expect_ok(cq1, &wc, id, IBV_WC_RECV, "the datagram");
		vt_expect_ok(cq0, &wc, id, IBV_WC_SEND, "its send");
		if (id == 2)
			vt_assert((vt_transit_maps() > 0) == expect_rings(),
				  "the UD pair has %d transit ring mappings",
				  vt_transit_maps());
		if (id > 2)
			take_event_nonblocking(ch, cq1,
					       "a datagram after the arm that a poll took");
	}
	expect_no_event(ch, "one event per arm");
	vt_ah_free(ah);
	vt_dereg(a);
	vt_dereg(b);
	vt_pair_free(&p);
	ck_assert_int_eq(ibv_destroy_cq(cq0), 0);
	ck_assert_int_eq(ibv_destroy_cq(cq1), 0);
	ck_assert_int_eq(ibv_destroy_comp_channel(ch), 0);
}
END_TEST

/*
 * A UD receiver that posted its receives first and only polls (udaddy's
 * server) maps the rings at the poll that takes the datagram which
 * paired it; the sender maps them at its next post, and its second
 * datagram lands through them.
 */
START_TEST(ud_maps_at_poll)
{
	int one = expect_rings() ? 1 : 0;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	struct fx f;

	vt_pair(&f.p, &D, &UD, 64);
	f.a = vt_reg(D.pd, LEN, VT_ACCESS_ALL);
	f.b = vt_reg(D.pd, 2 * LEN, VT_ACCESS_ALL);
	ah = vt_ah(&D, D.port.lid, NULL);
	vt_recv(f.p.qp[1], 1, BUF(f.b), 1024, f.b->lkey);
	vt_recv(f.p.qp[1], 2, BUF(f.b) + 1024, 1024, f.b->lkey);
	vt_fill(BUF(f.a), 300, 0, 61);
	vt_ud_send(f.p.qp[0], 1, ah, f.p.qp[1]->qp_num, VT_QKEY, BUF(f.a),
		   100, f.a->lkey, IBV_SEND_SIGNALED);
	vt_expect_ok(f.p.scq[0], &wc, 1, IBV_WC_SEND, "the first send");
	vt_assert(vt_transit_maps() == 0,
		  "%d transit ring mappings before the receiver polls",
		  vt_transit_maps());
	vt_expect_ok(f.p.rcq[1], &wc, 1, IBV_WC_RECV, "the first datagram");
	vt_assert(vt_transit_maps() == one,
		  "%d transit ring mappings after the receiver polled, want %d",
		  vt_transit_maps(), one);
	vt_ud_send(f.p.qp[0], 2, ah, f.p.qp[1]->qp_num, VT_QKEY,
		   BUF(f.a) + 100, 200, f.a->lkey, IBV_SEND_SIGNALED);
	vt_expect_ok(f.p.rcq[1], &wc, 2, IBV_WC_RECV, "the second datagram");
	ck_assert_uint_eq(wc.byte_len, 40 + 200);
	vt_expect_pat(BUF(f.b) + 1024 + 40, 200, 100, 61, "its bytes");
	vt_expect_ok(f.p.scq[0], &wc, 2, IBV_WC_SEND, "the second send");
	vt_assert(vt_transit_maps() == 2 * one,
		  "%d transit ring mappings after the sender's post, want %d",
		  vt_transit_maps(), 2 * one);
	ud_free(&f, ah);
}
END_TEST

/* One datagram from `from` to `to`, each with its own CQ, checked. */
static void ud_one(struct fx *f, struct ibv_ah *ah, struct ibv_qp *from,
		   struct ibv_cq *scq, struct ibv_qp *to, struct ibv_cq *rcq,
		   uint64_t id)
{
	struct ibv_wc wc;

	vt_fill(BUF(f->a), 200, 0, (uint32_t)id);
	vt_recv(to, id, BUF(f->b), 1024, f->b->lkey);
	vt_ud_send(from, id, ah, to->qp_num, VT_QKEY, BUF(f->a), 200,
		   f->a->lkey, IBV_SEND_SIGNALED);
	vt_expect_ok(rcq, &wc, id, IBV_WC_RECV, "a datagram");
	ck_assert_uint_eq(wc.src_qp, from->qp_num);
	vt_expect_pat(BUF(f->b) + 40, 200, 0, (uint32_t)id, "its bytes");
	vt_expect_ok(scq, &wc, id, IBV_WC_SEND, "its send");
}

/*
 * A UD QP whose peer left pairs again.  The sender lets go of the dead
 * pair at its next post and pairs with the next QP it sends to; a
 * receiver whose sender left lets go at its next post too, and the new
 * sender, refused while the dead pair was held, asks again.  Each time
 * the new pair's rings are the only ones mapped: two (one per side).
 */
START_TEST(ud_pair_again)
{
	struct ibv_cq *cq = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	struct ibv_cq *cq2 = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	int pairs = expect_rings() ? 2 : 0;
	struct ibv_qp *c, *e;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	struct fx f;
	uint64_t i;

	ud_init(&f, &ah);
	vt_assert(vt_transit_maps() == pairs, "%d transit ring mappings",
		  vt_transit_maps());
	/* the receiver goes; its sender's next peer is c */
	ck_assert_int_eq(ibv_destroy_qp(f.p.qp[1]), 0);
	f.p.qp[1] = NULL;
	c = ud_qp(cq);
	for (i = 0; i < 3; i++)
		ud_one(&f, ah, f.p.qp[0], f.p.scq[0], c, cq, 10 + i);
	vt_assert(vt_transit_maps() == pairs,
		  "the sender did not pair again: %d mappings",
		  vt_transit_maps());
	/* the sender goes now; c's next sender, e, is refused at first */
	vt_recv(c, 20, BUF(f.b), 1024, f.b->lkey);
	ck_assert_int_eq(ibv_destroy_qp(f.p.qp[0]), 0);
	f.p.qp[0] = NULL;
	e = ud_qp(cq2);
	vt_fill(BUF(f.a), 200, 0, 20);
	vt_ud_send(e, 20, ah, c->qp_num, VT_QKEY, BUF(f.a), 200, f.a->lkey,
		   IBV_SEND_SIGNALED);
	vt_expect_ok(cq, &wc, 20, IBV_WC_RECV, "the new sender's first");
	vt_expect_pat(BUF(f.b) + 40, 200, 0, 20, "its bytes");
	vt_expect_ok(cq2, &wc, 20, IBV_WC_SEND, "its send");
	for (i = 0; i < 3; i++)
		ud_one(&f, ah, e, cq2, c, cq, 21 + i);
	vt_assert(vt_transit_maps() == pairs,
		  "the receiver did not pair again: %d mappings",
		  vt_transit_maps());
	ck_assert_int_eq(ibv_destroy_qp(c), 0);
	ck_assert_int_eq(ibv_destroy_qp(e), 0);
	ck_assert_int_eq(ibv_destroy_cq(cq), 0);
	ck_assert_int_eq(ibv_destroy_cq(cq2), 0);
	ud_free(&f, ah);
}
END_TEST

/*
 * A CQ made with completion timestamps gets them on every completion,
 * those the libraries make on the rings too (they once read 0): each
 * between the device clock read before the SENDs and after the polls.
 */
#define STAMPED_MSGS	16

static uint64_t raw_clock_ns(void)
{
	struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };

	ck_assert_int_eq(ibv_query_rt_values_ex(D.ctx, &v), 0);
	return (uint64_t)v.raw_clock.tv_sec * 1000000000ull +
	       (uint64_t)v.raw_clock.tv_nsec;
}

START_TEST(library_completions_stamped)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 4 * STAMPED_MSGS,
		.wc_flags = IBV_WC_STANDARD_FLAGS |
			    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
	};
	struct ibv_poll_cq_attr pa = { 0 };
	struct vt_qp_opts o = { .psn = 0x1234 };
	uint64_t t0, t1, ts[2 * STAMPED_MSGS];
	struct ibv_cq_ex *cqx;
	struct ibv_qp *qp[2];
	struct vt_addr a[2];
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	int i, n = 0, ret;

	cqx = ibv_create_cq_ex(D.ctx, &ca);
	ck_assert_msg(cqx, "ibv_create_cq_ex: %s", strerror(errno));
	cq = ibv_cq_ex_to_cq(cqx);
	mr = vt_reg(D.pd, 4096, VT_ACCESS_ALL);
	for (i = 0; i < 2; i++) {
		qp[i] = vt_qp(&D, cq, cq, &o);
		vt_qp_addr(&D, qp[i], &o, &a[i]);
	}
	vt_connect(&D, qp[0], &a[1], &o);
	vt_connect(&D, qp[1], &a[0], &o);
	t0 = raw_clock_ns();
	for (i = 0; i < STAMPED_MSGS; i++) {
		vt_recv(qp[1], (uint64_t)i, BUF(mr) + 2048, 64, mr->lkey);
		vt_send(qp[0], (uint64_t)i, IBV_WR_SEND, IBV_SEND_SIGNALED,
			BUF(mr), 8, mr->lkey, 0, 0);
	}
	while (n < 2 * STAMPED_MSGS) {
		ret = ibv_start_poll(cqx, &pa);
		if (ret == ENOENT)
			continue;
		ck_assert_int_eq(ret, 0);
		do {
			ck_assert_int_eq(cqx->status, IBV_WC_SUCCESS);
			ts[n++] = ibv_wc_read_completion_ts(cqx);
		} while (n < 2 * STAMPED_MSGS && ibv_next_poll(cqx) == 0);
		ibv_end_poll(cqx);
	}
	t1 = raw_clock_ns();
	ck_assert_msg(!expect_rings() || vt_transit_maps() > 0,
		      "the pair got no rings");
	for (i = 0; i < n; i++)
		ck_assert_msg(ts[i] >= t0 && ts[i] <= t1,
			      "completion %d stamped %llu, outside [%llu, %llu]",
			      i, (unsigned long long)ts[i],
			      (unsigned long long)t0, (unsigned long long)t1);
	ck_assert_int_eq(ibv_destroy_qp(qp[0]), 0);
	ck_assert_int_eq(ibv_destroy_qp(qp[1]), 0);
	ck_assert_int_eq(ibv_destroy_cq(cq), 0);
	vt_dereg(mr);
}
END_TEST

/* ---- SRQs: receivers sharing one, on the rings ------------------------- */

#define SRQ_SLOT	1024u

/* Post receives first..last-1 into srq, SRQ_SLOT bytes each of mr. */
static void srq_post(struct ibv_srq *srq, struct ibv_mr *mr, unsigned int first,
		     unsigned int last)
{
	unsigned int i;

	for (i = first; i < last; i++)
		vt_srq_recv(srq, i, BUF(mr) + (size_t)i * SRQ_SLOT, SRQ_SLOT,
			    mr->lkey);
}

/* A SEND of len bytes on pair q, into the SRQ's WQE `id`, checked. */
static void srq_one(struct vt_pair *q, struct ibv_mr *a, struct ibv_mr *b,
		    unsigned int id, uint32_t len)
{
	struct ibv_wc wc;

	vt_fill(BUF(a), len, 0, 100 + id);
	vt_send(q->qp[0], id, IBV_WR_SEND, IBV_SEND_SIGNALED, BUF(a), len,
		a->lkey, 0, 0);
	vt_expect_ok(q->rcq[1], &wc, id, IBV_WC_RECV, "a SEND into the SRQ");
	ck_assert_uint_eq(wc.qp_num, q->qp[1]->qp_num);
	ck_assert_uint_eq(wc.byte_len, len);
	vt_expect_pat(BUF(b) + (size_t)id * SRQ_SLOT, len, 0, 100 + id,
		      "its bytes");
	vt_expect_ok(q->scq[0], &wc, id, IBV_WC_SEND, "its send");
}

/* Two RC pairs whose receivers share one SRQ; a: senders', b: 64 WQEs' buffers. */
struct srq_fx {
	struct ibv_srq *srq;
	struct vt_pair p[2];
	struct ibv_mr *a, *b;
};

static void srq_fx_init(struct srq_fx *f, uint32_t max_wr)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = max_wr,
						  .max_sge = 1 } };
	struct vt_qp_opts rx = { 0 };

	f->srq = ibv_create_srq(D.pd, &sa);
	ck_assert_ptr_nonnull(f->srq);
	rx.srq = f->srq;
	vt_pair2(&f->p[0], &D, &DEF, &rx, 256);
	vt_pair2(&f->p[1], &D, &DEF, &rx, 256);
	f->a = vt_reg(D.pd, LEN, VT_ACCESS_ALL);
	f->b = vt_reg(D.pd, 64 * SRQ_SLOT, VT_ACCESS_ALL);
	vt_assert((vt_transit_maps() > 0) == expect_rings(),
		  "pairs on an SRQ have %d transit ring mappings",
		  vt_transit_maps());
}

static void srq_fx_free(struct srq_fx *f)
{
	vt_dereg(f->a);
	vt_dereg(f->b);
	vt_pair_free(&f->p[0]);
	vt_pair_free(&f->p[1]);
	ck_assert_int_eq(ibv_destroy_srq(f->srq), 0);
}

/*
 * Two pairs whose receivers share one SRQ have their rings, and SENDs of
 * both land in the SRQ's WQEs in the order taken, each completion on the
 * QP it came to; a WRITE_WITH_IMM takes the next WQE between them (its
 * bytes where its key says); a SEND that finds the SRQ empty waits for a WQE (RNR);
 * the SRQ's limit event comes when the libraries took it below the limit.
 */
START_TEST(srq_shared)
{
	struct ibv_srq_attr limit = { .srq_limit = 5 };
	struct srq_fx f;
	struct ibv_srq *srq;
	struct ibv_mr *a, *b;
	struct vt_pair *p;
	struct ibv_wc wc;
	unsigned int i;

	srq_fx_init(&f, 64);
	srq = f.srq;
	p = f.p;
	a = f.a;
	b = f.b;
	srq_post(srq, b, 0, 16);
	for (i = 0; i < 16; i++)
		srq_one(&p[i % 2], a, b, i, 64 + 37 * i);
	/* a WRITE_WITH_IMM takes WQE 16, a SEND 17 */
	srq_post(srq, b, 16, 18);
	vt_fill(BUF(a), 64, 0, 116);
	vt_send(p[0].qp[0], 16, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_SEND_SIGNALED,
		BUF(a), 64, a->lkey, ADDR(b, 40 * SRQ_SLOT), b->rkey);
	vt_expect_ok(p[0].rcq[1], &wc, 16, IBV_WC_RECV_RDMA_WITH_IMM,
		     "a WRITE_WITH_IMM into the SRQ's QP");
	ck_assert_uint_eq(wc.byte_len, 64);
	vt_expect_pat(BUF(b) + 40 * SRQ_SLOT, 64, 0, 116, "its bytes");
	vt_expect_ok(p[0].scq[0], &wc, 16, IBV_WC_RDMA_WRITE, "its send");
	srq_one(&p[1], a, b, 17, 500);
	/* empty: the SEND waits, then takes the WQE posted after it */
	vt_fill(BUF(a), 300, 0, 118);
	vt_send(p[1].qp[0], 18, IBV_WR_SEND, IBV_SEND_SIGNALED, BUF(a), 300,
		a->lkey, 0, 0);
	vt_expect_none(p[1].rcq[1], QUIET_MS, "a SEND with the SRQ empty");
	srq_post(srq, b, 18, 19);
	vt_expect_ok(p[1].rcq[1], &wc, 18, IBV_WC_RECV, "the SEND, after");
	vt_expect_pat(BUF(b) + 18 * SRQ_SLOT, 300, 0, 118, "its bytes");
	vt_expect_ok(p[1].scq[0], &wc, 18, IBV_WC_SEND, "its send");
	/* 6 posted, limit 5: two SENDs on the rings take it to 4 */
	srq_post(srq, b, 19, 25);
	ck_assert_int_eq(ibv_modify_srq(srq, &limit, IBV_SRQ_LIMIT), 0);
	srq_one(&p[0], a, b, 19, 100);
	vt_expect_no_async(D.ctx, QUIET_MS, "5 posted, limit 5");
	srq_one(&p[1], a, b, 20, 100);
	vt_expect_async(D.ctx, IBV_EVENT_SRQ_LIMIT_REACHED, srq,
			"4 posted, limit 5");
	for (i = 21; i < 25; i++)
		srq_one(&p[i % 2], a, b, i, 200);
	srq_fx_free(&f);
}
END_TEST

/*
 * A receiver asleep on its CQ's channel with its SRQ empty: the SEND
 * waits in the ring, and the receiver's post to the SRQ alone (the
 * sender does nothing more) gets it placed and the event raised.
 */
START_TEST(srq_sleeping_receiver)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_comp_channel *ch = ibv_create_comp_channel(D.ctx);
	struct ibv_srq *srq = ibv_create_srq(D.pd, &sa);
	struct vt_qp_opts rx = { .srq = srq };
	struct ibv_cq *cq0, *cq1;
	struct ibv_mr *a, *b;
	struct vt_pair p;
	struct ibv_wc wc;

	ck_assert(ch && srq);
	cq0 = ibv_create_cq(D.ctx, 16, NULL, NULL, 0);
	cq1 = ibv_create_cq(D.ctx, 16, NULL, ch, 0);
	ck_assert(cq0 && cq1);
	vt_pair_on(&p, &D, &DEF, &rx, cq0, cq1);
	a = vt_reg(D.pd, 4096, VT_ACCESS_ALL);
	b = vt_reg(D.pd, 16 * SRQ_SLOT, VT_ACCESS_ALL);
	srq_post(srq, b, 0, 1);
	vt_send(p.qp[0], 0, IBV_WR_SEND, IBV_SEND_SIGNALED, BUF(a), 64,
		a->lkey, 0, 0);
	vt_expect_ok(cq1, &wc, 0, IBV_WC_RECV, "the first SEND");
	vt_expect_ok(cq0, &wc, 0, IBV_WC_SEND, "its send");
	vt_assert((vt_transit_maps() > 0) == expect_rings(),
		  "the pair has %d transit ring mappings", vt_transit_maps());

	ck_assert_int_eq(ibv_req_notify_cq(cq1, 0), 0);
	vt_fill(BUF(a), 700, 0, 31);
	vt_send(p.qp[0], 1, IBV_WR_SEND, IBV_SEND_SIGNALED, BUF(a), 700,
		a->lkey, 0, 0);
	ck_assert_msg(!channel_ready(ch, QUIET_MS), "an event with the SRQ empty");
	srq_post(srq, b, 1, 2);
	take_event(ch, cq1, "the SRQ's post to a sleeping receiver");
	vt_expect_ok(cq1, &wc, 1, IBV_WC_RECV, "the SEND that waited");
	ck_assert_uint_eq(wc.byte_len, 700);
	vt_expect_pat(BUF(b) + SRQ_SLOT, 700, 0, 31, "its bytes");
	vt_expect_ok(cq0, &wc, 1, IBV_WC_SEND, "its send");

	vt_dereg(a);
	vt_dereg(b);
	vt_pair_free(&p);
	ck_assert_int_eq(ibv_destroy_srq(srq), 0);
	ck_assert_int_eq(ibv_destroy_cq(cq0), 0);
	ck_assert_int_eq(ibv_destroy_cq(cq1), 0);
	ck_assert_int_eq(ibv_destroy_comp_channel(ch), 0);
}
END_TEST

/*
 * ibv_modify_srq(IBV_SRQ_MAX_WR) moves the SRQ's WQEs to new slots: those
 * posted before are taken after it, in order, by the libraries placing
 * from the rings; a size below what is posted is refused, and changes
 * nothing.
 */
START_TEST(srq_resized)
{
	struct ibv_srq_attr attr = { .max_wr = 64 };
	struct srq_fx f;
	struct ibv_srq *srq;
	struct ibv_mr *a, *b;
	struct vt_pair *p;
	unsigned int i;

	srq_fx_init(&f, 16);
	srq = f.srq;
	p = f.p;
	a = f.a;
	b = f.b;
	/* WQEs 10..25 posted, the later ones past the 16 slots' first lap */
	srq_post(srq, b, 0, 16);
	for (i = 0; i < 10; i++)
		srq_one(&p[i % 2], a, b, i, 64 + 13 * i);
	srq_post(srq, b, 16, 26);
	ck_assert_int_eq(ibv_modify_srq(srq, &attr, IBV_SRQ_MAX_WR), 0);
	memset(&attr, 0, sizeof(attr));
	ck_assert_int_eq(ibv_query_srq(srq, &attr), 0);
	ck_assert_uint_ge(attr.max_wr, 64);
	for (i = 10; i < 26; i++)
		srq_one(&p[i % 2], a, b, i, 64 + 13 * i);
	/* 38 posted: room for them only in the new slots */
	srq_post(srq, b, 26, 64);
	attr.max_wr = 32;
	ck_assert_int_eq(ibv_modify_srq(srq, &attr, IBV_SRQ_MAX_WR), EINVAL);
	for (i = 26; i < 44; i++)
		srq_one(&p[i % 2], a, b, i, 100 + i);
	/* 20 posted: it shrinks */
	ck_assert_int_eq(ibv_modify_srq(srq, &attr, IBV_SRQ_MAX_WR), 0);
	memset(&attr, 0, sizeof(attr));
	ck_assert_int_eq(ibv_query_srq(srq, &attr), 0);
	ck_assert_uint_eq(attr.max_wr, 32);
	for (i = 44; i < 64; i++)
		srq_one(&p[i % 2], a, b, i, 100 + i);
	/*
	 * A head in the SRQ's client header that no library could have
	 * written (past the tail) is refused: the counters are broken.
	 * First the last taker's head is in (the engine writes it after
	 * the completions) and its claim free.
	 */
	{
		struct ibvd_wq_client *c = to_ibvc_srq(srq)->rq.client;
		long until = vt_now_ms() + vt_tmo_ms();

		while ((__atomic_load_n(&c->direct_head, __ATOMIC_ACQUIRE) != 64 ||
			__atomic_load_n(&c->claim, __ATOMIC_ACQUIRE) !=
			IBVD_WQ_CLAIM_FREE) && vt_now_ms() < until)
			vt_sleep_ms(1);
		ck_assert_uint_eq(c->direct_head, 64);
		ck_assert_uint_eq(__atomic_load_n(&c->tail, __ATOMIC_ACQUIRE),
				  64);
		__atomic_store_n(&c->direct_head, 64 + 1000, __ATOMIC_RELEASE);
		attr.max_wr = 64;
		ck_assert_int_eq(ibv_modify_srq(srq, &attr, IBV_SRQ_MAX_WR),
				 EPROTO);
		__atomic_store_n(&c->direct_head, 64, __ATOMIC_RELEASE);
		ck_assert_int_eq(ibv_modify_srq(srq, &attr, IBV_SRQ_MAX_WR), 0);
		/*
		 * A placer of ours that holds the claim (as one stopped
		 * mid-copy would) is waited for a second, then EBUSY, and
		 * nothing changed.
		 */
		__atomic_store_n(&c->claim, IBVD_WQ_CLAIM_LIBRARY,
				 __ATOMIC_RELEASE);
		attr.max_wr = 128;
		ck_assert_int_eq(ibv_modify_srq(srq, &attr, IBV_SRQ_MAX_WR),
				 EBUSY);
		memset(&attr, 0, sizeof(attr));
		ck_assert_int_eq(ibv_query_srq(srq, &attr), 0);
		ck_assert_uint_eq(attr.max_wr, 64);
		__atomic_store_n(&c->claim, IBVD_WQ_CLAIM_FREE, __ATOMIC_RELEASE);
		attr.max_wr = 128;
		ck_assert_int_eq(ibv_modify_srq(srq, &attr, IBV_SRQ_MAX_WR), 0);
	}
	vt_expect_none(p[0].rcq[1], QUIET_MS, "nothing more");
	vt_expect_none(p[1].rcq[1], QUIET_MS, "nothing more");
	srq_fx_free(&f);
}
END_TEST

/* The SRQ's tail word, flipped between two values until told to stop. */
struct tail_flip {
	uint32_t *tail;
	uint32_t at, past;
	bool stop;
};

static void *tail_flipper(void *arg)
{
	struct tail_flip *t = arg;

	while (!__atomic_load_n(&t->stop, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(t->tail, t->past, __ATOMIC_RELEASE);
		__atomic_store_n(t->tail, t->at, __ATOMIC_RELEASE);
	}
	return NULL;
}

/*
 * A resize copies the posted WQEs before it takes the objects lock, and
 * under it only what was posted since, which takes a client that moves
 * its SRQ's tail itself: more than IBVD_RING_PRECOPY_LEFT (1,024) of
 * them is EBUSY, so that no client makes the engine wait on a long copy.
 * Here a thread of ours flips the tail 2,000 WQEs ahead and back while
 * we resize, 300 times: some see it move (EBUSY, the SRQ as it was:
 * about one in ten here, none in 3,000 under ASan, so they are counted,
 * not required); none fails otherwise, none takes long (a precopy that
 * followed the tail back copied 2^32 slots, with every client waiting:
 * the case's timeout), and with the tail put back the SRQ works.
 */
START_TEST(srq_resize_tail_moving)
{
	struct ibv_srq_attr attr;
	struct tail_flip flip;
	struct srq_fx f;
	pthread_t th;
	unsigned int i, busy = 0, done = 0;
	int ret;

	srq_fx_init(&f, 4096);
	srq_post(f.srq, f.b, 0, 16);
	for (i = 0; i < 16; i++)
		srq_one(&f.p[i % 2], f.a, f.b, i, 100 + i);
	flip.tail = &to_ibvc_srq(f.srq)->rq.client->tail;
	flip.at = __atomic_load_n(flip.tail, __ATOMIC_ACQUIRE);
	ck_assert_uint_eq(flip.at, 16);
	flip.past = flip.at + 2000;
	flip.stop = false;
	ck_assert_int_eq(pthread_create(&th, NULL, tail_flipper, &flip), 0);
	for (i = 0; i < 300; i++) {
		memset(&attr, 0, sizeof(attr));
		attr.max_wr = i % 2 ? 4096 : 8192;
		ret = ibv_modify_srq(f.srq, &attr, IBV_SRQ_MAX_WR);
		ck_assert_msg(ret == 0 || ret == EBUSY,
			      "a resize under a moving tail: %s", strerror(ret));
		busy += ret == EBUSY;
		done += ret == 0;
	}
	__atomic_store_n(&flip.stop, true, __ATOMIC_RELEASE);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	__atomic_store_n(flip.tail, flip.at, __ATOMIC_RELEASE);
	printf("srq_resize_tail_moving: %u resizes, %u done, %u EBUSY\n", i,
	       done, busy);
	attr.max_wr = 128;
	ck_assert_int_eq(ibv_modify_srq(f.srq, &attr, IBV_SRQ_MAX_WR), 0);
	memset(&attr, 0, sizeof(attr));
	ck_assert_int_eq(ibv_query_srq(f.srq, &attr), 0);
	ck_assert_uint_eq(attr.max_wr, 128);
	srq_post(f.srq, f.b, 16, 48);
	for (i = 16; i < 48; i++)
		srq_one(&f.p[i % 2], f.a, f.b, i, 200 + i);
	vt_expect_none(f.p[0].rcq[1], QUIET_MS, "nothing more");
	vt_expect_none(f.p[1].rcq[1], QUIET_MS, "nothing more");
	srq_fx_free(&f);
}
END_TEST

/*
 * Libraries place into a soft SRQ's WQEs and move the claim's head; the
 * engine's own head catches up only when it next takes the claim, so
 * after a ring's worth placed by a receiver that polls without ringing
 * it is more than a lap behind.  A resize then still finds the WQEs
 * posted (the lap below the tail) and keeps them, in order.
 */
#define LAG_SLOTS	4096u
#define LAG_PLACED	3000u
#define LAG_MORE	900u

/* SEND number n from p's first QP into the SRQ of its second. */
static void srq_send_one(struct vt_pair *p, struct ibv_mr *a, uint32_t n,
			 const char *what)
{
	struct ibv_wc wc;

	vt_send(p->qp[0], n, IBV_WR_SEND, IBV_SEND_SIGNALED, BUF(a), 8,
		a->lkey, 0, 0);
	vt_expect_ok(p->rcq[1], &wc, n, IBV_WC_RECV, what);
	vt_expect_ok(p->scq[0], &wc, n, IBV_WC_SEND, "its send");
}

START_TEST(srq_resized_engine_head_behind)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = LAG_SLOTS,
						  .max_sge = 1 } };
	struct ibv_srq_attr attr = { .max_wr = 2 * LAG_SLOTS };
	struct ibv_srq *srq = ibv_create_srq(D.pd, &sa);
	struct vt_qp_opts rx = { .srq = srq };
	struct ibv_mr *a, *b;
	struct vt_pair p;
	uint32_t i;

	ck_assert_ptr_nonnull(srq);
	vt_pair2(&p, &D, &DEF, &rx, 256);
	a = vt_reg(D.pd, 4096, VT_ACCESS_ALL);
	b = vt_reg(D.pd, 4096, VT_ACCESS_ALL);
	for (i = 0; i < LAG_SLOTS; i++)
		vt_srq_recv(srq, i, BUF(b), 64, b->lkey);
	for (i = 0; i < LAG_PLACED; i++)
		srq_send_one(&p, a, i, "a SEND into the SRQ");
	/* posted again: the tail a lap past the engine's head */
	for (i = LAG_SLOTS; i < LAG_SLOTS + LAG_MORE; i++)
		vt_srq_recv(srq, i, BUF(b), 64, b->lkey);
	ck_assert_int_eq(ibv_modify_srq(srq, &attr, IBV_SRQ_MAX_WR), 0);
	/* the rest posted before the resize, then those posted after it */
	for (i = LAG_PLACED; i < LAG_SLOTS + LAG_MORE; i++)
		srq_send_one(&p, a, i, "a SEND after the resize");
	vt_expect_none(p.rcq[1], QUIET_MS, "nothing more");
	vt_dereg(a);
	vt_dereg(b);
	vt_pair_free(&p);
	ck_assert_int_eq(ibv_destroy_srq(srq), 0);
}
END_TEST

/*
 * An SRQ resized over and over while SENDs stream into it: a sender
 * thread, a receiver thread that polls and posts again, each message
 * checked for its place in the order and its bytes.
 */
#define RESIZE_MSGS	20000u
#define RESIZE_POSTED	16u
/* Resizes the stream lives through: message i waits for i * this / MSGS. */
#define RESIZE_MIN	12u

struct resize_stream {
	struct vt_pair *p;
	struct ibv_srq *srq;
	struct ibv_mr *a, *b;
	char tx_err[160], rx_err[160];	/* each thread's own */
	bool done;			/* atomic: the receiver is through */
	bool failed;			/* atomic: ... and it failed */
	unsigned int resizes;		/* atomic: resizes done so far */
};

/*
 * May message i go?  Paced by the resizes done, so that a fast machine
 * does not finish the stream before the resizes it is there to meet.
 */
static bool resize_paced(struct resize_stream *r, unsigned int i)
{
	return (uint64_t)i * RESIZE_MIN <=
	       (uint64_t)RESIZE_MSGS * __atomic_load_n(&r->resizes, __ATOMIC_ACQUIRE);
}

static void *resize_sender(void *arg)
{
	struct resize_stream *r = arg;
	struct ibv_wc wc[16];
	unsigned int i, outstanding = 0;
	int n, k;

	for (i = 0; i < RESIZE_MSGS || outstanding; ) {
		/* a receiver that gave up leaves our last SENDs waiting */
		if (__atomic_load_n(&r->failed, __ATOMIC_ACQUIRE))
			return NULL;
		if (i < RESIZE_MSGS && outstanding < 64 && resize_paced(r, i)) {
			uint8_t *slot = BUF(r->a) + (size_t)(i % 64) * 64;

			memcpy(slot, &i, sizeof(i));
			if (vt_post(r->p->qp[0], i, IBV_WR_SEND, IBV_SEND_SIGNALED,
				    slot, 64, r->a->lkey, 0, 0) != 0) {
				snprintf(r->tx_err, sizeof(r->tx_err), "post %u",
					 i);
				return NULL;
			}
			i++;
			outstanding++;
		}
		n = ibv_poll_cq(r->p->scq[0], 16, wc);
		for (k = 0; k < n; k++) {
			if (wc[k].status != IBV_WC_SUCCESS) {
				snprintf(r->tx_err, sizeof(r->tx_err),
					 "send %llu: %s",
					 (unsigned long long)wc[k].wr_id,
					 vt_status(wc[k].status));
				return NULL;
			}
			outstanding--;
		}
	}
	return NULL;
}

static void *resize_receiver(void *arg)
{
	struct resize_stream *r = arg;
	uint32_t next = 0, posted = RESIZE_POSTED, got;
	long deadline = vt_now_ms() + 3L * vt_tmo_ms();
	struct ibv_wc wc;
	int n;

	while (next < RESIZE_MSGS && vt_now_ms() < deadline) {
		n = ibv_poll_cq(r->p->rcq[1], 1, &wc);
		if (n <= 0)
			continue;
		memcpy(&got, BUF(r->b) + (size_t)(wc.wr_id % RESIZE_POSTED) *
		       SRQ_SLOT, sizeof(got));
		if (wc.status != IBV_WC_SUCCESS || wc.wr_id != next ||
		    got != next) {
			snprintf(r->rx_err, sizeof(r->rx_err),
				 "receive %u: %s, WQE %llu, message %u", next,
				 vt_status(wc.status),
				 (unsigned long long)wc.wr_id, got);
			break;
		}
		next++;
		if (posted < RESIZE_MSGS) {
			vt_srq_recv(r->srq, posted, BUF(r->b) + (size_t)
				    (posted % RESIZE_POSTED) * SRQ_SLOT,
				    SRQ_SLOT, r->b->lkey);
			posted++;
		}
	}
	if (next < RESIZE_MSGS && !r->rx_err[0])
		snprintf(r->rx_err, sizeof(r->rx_err), "%u of %u received",
			 next, RESIZE_MSGS);
	__atomic_store_n(&r->failed, next < RESIZE_MSGS, __ATOMIC_RELEASE);
	__atomic_store_n(&r->done, true, __ATOMIC_RELEASE);
	return NULL;
}

START_TEST(srq_resized_while_streaming)
{
	/*
	 * Slots of 128 bytes (4 SGEs): every ring of 32 or more is whole
	 * pages, which go back to the kernel when freed and read as zeros,
	 * so a placer left in old slots would not find its WQEs there.
	 */
	static const uint32_t max_wr[] = { 32, 64, 128, 256, 32, 512 };
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 32, .max_sge = 4 } };
	struct ibv_srq *srq = ibv_create_srq(D.pd, &sa);
	struct vt_qp_opts rx = { .srq = srq };
	struct resize_stream r = { 0 };
	struct ibv_srq_attr attr;
	struct vt_pair p;
	pthread_t tx, rxt;
	unsigned int resizes = 0, busy = 0;
	int ret;

	ck_assert_ptr_nonnull(srq);
	vt_pair2(&p, &D, &DEF, &rx, 256);
	r.p = &p;
	r.srq = srq;
	r.a = vt_reg(D.pd, 64 * 64, VT_ACCESS_ALL);
	r.b = vt_reg(D.pd, RESIZE_POSTED * SRQ_SLOT, VT_ACCESS_ALL);
	srq_post(srq, r.b, 0, RESIZE_POSTED);
	ck_assert_int_eq(pthread_create(&rxt, NULL, resize_receiver, &r), 0);
	ck_assert_int_eq(pthread_create(&tx, NULL, resize_sender, &r), 0);
	while (!__atomic_load_n(&r.done, __ATOMIC_ACQUIRE)) {
		memset(&attr, 0, sizeof(attr));
		attr.max_wr = max_wr[(resizes + busy) %
				     (sizeof(max_wr) / sizeof(max_wr[0]))];
		ret = ibv_modify_srq(srq, &attr, IBV_SRQ_MAX_WR);
		/* a placer preempted for a second is not waited for */
		ck_assert_msg(ret == 0 || ret == EBUSY, "resize: %s",
			      strerror(ret));
		if (ret)
			busy++;
		else
			__atomic_store_n(&r.resizes, ++resizes, __ATOMIC_RELEASE);
	}
	pthread_join(rxt, NULL);
	pthread_join(tx, NULL);
	ck_assert_msg(!r.rx_err[0] && !r.tx_err[0], "%s %s (after %u resizes)",
		      r.rx_err, r.tx_err, resizes);
	ck_assert_uint_ge(resizes, RESIZE_MIN);
	vt_dereg(r.a);
	vt_dereg(r.b);
	vt_pair_free(&p);
	ck_assert_int_eq(ibv_destroy_srq(srq), 0);
}
END_TEST

/* ---- errors, which the engine makes ------------------------------------ */

/* Longer than the receive WQE: the responder's length error. */
START_TEST(too_long)
{
	struct ibv_wc wc;
	struct fx f;

	fx_init(&f, NULL);
	vt_recv(f.p.qp[1], 1, BUF(f.b), 16, f.b->lkey);
	vt_send(f.p.qp[0], 2, IBV_WR_SEND, IBV_SEND_SIGNALED, BUF(f.a), 64,
		f.a->lkey, 0, 0);
	vt_expect_wc(f.p.rcq[1], &wc, 1, IBV_WC_LOC_LEN_ERR, "receiver");
	vt_expect_wc(f.p.scq[0], &wc, 2, IBV_WC_REM_INV_REQ_ERR, "sender");
	vt_expect_byte(BUF(f.b) + 16, 48, 0, "nothing past the WQE");
	fx_free(&f);
}
END_TEST

/* A receive WQE with a key the receiver does not own. */
START_TEST(bad_receive_key)
{
	struct ibv_wc wc;
	struct fx f;

	fx_init(&f, NULL);
	vt_recv(f.p.qp[1], 1, BUF(f.b), 64, f.b->lkey ^ 0x55aa00u);
	vt_send(f.p.qp[0], 2, IBV_WR_SEND, IBV_SEND_SIGNALED, BUF(f.a), 64,
		f.a->lkey, 0, 0);
	vt_expect_wc(f.p.rcq[1], &wc, 1, IBV_WC_LOC_PROT_ERR, "receiver");
	vt_expect_wc(f.p.scq[0], &wc, 2, IBV_WC_REM_OP_ERR, "sender");
	vt_expect_byte(BUF(f.b), 64, 0, "nothing written");
	fx_free(&f);
}
END_TEST

/* A send SGE outside the sender's MR fails locally, on the engine's path. */
START_TEST(bad_send_key)
{
	struct ibv_wc wc;
	struct fx f;

	fx_init(&f, NULL);
	vt_recv(f.p.qp[1], 1, BUF(f.b), 64, f.b->lkey);
	vt_send(f.p.qp[0], 2, IBV_WR_SEND, IBV_SEND_SIGNALED, BUF(f.a) + LEN - 8,
		64, f.a->lkey, 0, 0);
	vt_expect_wc(f.p.scq[0], &wc, 2, IBV_WC_LOC_PROT_ERR, "sender");
	vt_expect_none(f.p.rcq[1], QUIET_MS, "nothing received");
	fx_free(&f);
}
END_TEST

/*
 * A SEND that fails takes its QP out of RTS (RC to ERR, UC to SQE): what
 * the app posts after it, even once the failed one is complete, is
 * flushed and must not reach the peer through the ring (IB 10.8.3).
 */
START_TEST(send_after_error)
{
	static const struct vt_qp_opts uc = { .type = IBV_QPT_UC };
	struct ibv_wc wc;
	struct fx f;

	fx_init(&f, _i ? &uc : NULL);
	/* one SEND through the ring first: the pair is in use */
	vt_recv(f.p.qp[1], 1, BUF(f.b), 64, f.b->lkey);
	vt_send(f.p.qp[0], 2, IBV_WR_SEND, IBV_SEND_SIGNALED, BUF(f.a), 8,
		f.a->lkey, 0, 0);
	vt_expect_ok(f.p.scq[0], &wc, 2, IBV_WC_SEND, "first SEND");
	vt_expect_ok(f.p.rcq[1], &wc, 1, IBV_WC_RECV, "its receive");
	vt_recv(f.p.qp[1], 3, BUF(f.b), 64, f.b->lkey);
	vt_send(f.p.qp[0], 4, IBV_WR_SEND, IBV_SEND_SIGNALED, BUF(f.a), 8,
		f.a->lkey ^ 0x55aa00u, 0, 0);
	vt_expect_wc(f.p.scq[0], &wc, 4, IBV_WC_LOC_PROT_ERR, "SEND with a bad key");
	vt_expect_state(f.p.qp[0], _i ? IBV_QPS_SQE : IBV_QPS_ERR,
			"sender after its error");
	vt_send(f.p.qp[0], 5, IBV_WR_SEND, IBV_SEND_SIGNALED, BUF(f.a), 8,
		f.a->lkey, 0, 0);
	vt_expect_wc(f.p.scq[0], &wc, 5, IBV_WC_WR_FLUSH_ERR,
		     "SEND posted after the error");
	vt_expect_none(f.p.rcq[1], QUIET_MS, "nothing received");
	fx_free(&f);
}
END_TEST

/* A sender moved to ERR: its SENDs nobody took are flushed, in order. */
START_TEST(flush)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	struct ibv_wc wc;
	struct fx f;
	int i;

	fx_init(&f, NULL);
	for (i = 0; i < 4; i++)
		vt_send(f.p.qp[0], 40 + (uint64_t)i, IBV_WR_SEND, 0, BUF(f.a),
			8, f.a->lkey, 0, 0);
	vt_expect_none(f.p.scq[0], QUIET_MS, "unsignaled SENDs waiting");
	ck_assert_int_eq(ibv_modify_qp(f.p.qp[0], &a, IBV_QP_STATE), 0);
	for (i = 0; i < 4; i++)
		vt_expect_wc(f.p.scq[0], &wc, 40 + (uint64_t)i,
			     IBV_WC_WR_FLUSH_ERR, "flushed");
	vt_expect_none(f.p.scq[0], QUIET_MS, "after the flush");
	fx_free(&f);
}
END_TEST

/*
 * The receiver destroys its QP with SENDs in the ring it never took: they
 * fail as retries to a responder that went away do, once the sender's
 * timeout x (retry_cnt + 1) ran out (here 67 ms x 2), not before.
 */
START_TEST(receiver_gone)
{
	struct vt_qp_opts o;
	struct ibv_wc wc;
	struct fx f;
	long t0;
	int i;

	memset(&o, 0, sizeof(o));
	o.timeout = 14;		/* 4.096 us << 14: about 67 ms */
	o.retry_cnt = 1;
	fx_init(&f, &o);
	for (i = 0; i < 3; i++)
		vt_send(f.p.qp[0], 50 + (uint64_t)i, IBV_WR_SEND,
			IBV_SEND_SIGNALED, BUF(f.a), 8, f.a->lkey, 0, 0);
	vt_expect_none(f.p.scq[0], QUIET_MS, "SENDs with no receive posted");
	t0 = vt_now_ms();
	ck_assert_int_eq(ibv_destroy_qp(f.p.qp[1]), 0);
	f.p.qp[1] = NULL;
	vt_expect_wc(f.p.scq[0], &wc, 50, IBV_WC_RETRY_EXC_ERR,
		     "the first after the receiver's QP went");
	ck_assert_msg(vt_now_ms() - t0 >= 120, "failed %ld ms after, before "
		      "its retries could run out", vt_now_ms() - t0);
	ck_assert_uint_eq(wc.byte_len, 0);	/* as the engine's errors */
	vt_expect_wc(f.p.scq[0], &wc, 51, IBV_WC_WR_FLUSH_ERR, "then flushed");
	ck_assert_uint_eq(wc.byte_len, 0);
	vt_expect_wc(f.p.scq[0], &wc, 52, IBV_WC_WR_FLUSH_ERR, "then flushed");
	vt_expect_state(f.p.qp[0], IBV_QPS_ERR, "the sender");
	fx_free(&f);
}
END_TEST

/*
 * The receiver's CQ overruns: its QP fails with the message that overran
 * it, and nothing after that is placed.  The next SEND goes unanswered
 * (RETRY_EXC_ERR once its retries ran out), the rest are flushed, as on
 * the engine's path and rxe's; no receive buffer past the failure is
 * written.
 */
START_TEST(receive_cq_overrun)
{
	struct ibv_cq *scq = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	struct ibv_cq *rcq = ibv_create_cq(D.ctx, 2, NULL, NULL, 0);
	struct ibv_wc wc[16];
	struct vt_qp_opts o;
	struct ibv_mr *a, *b;
	struct vt_pair p;
	int n, i, k, placed = 0;

	ck_assert_ptr_nonnull(scq);
	ck_assert_ptr_nonnull(rcq);
	memset(&o, 0, sizeof(o));
	o.timeout = 14;		/* about 67 ms */
	o.retry_cnt = 1;
	vt_pair_on(&p, &D, &o, &o, scq, rcq);
	a = vt_reg(D.pd, LEN, VT_ACCESS_ALL);
	b = vt_reg(D.pd, LEN, VT_ACCESS_ALL);
	n = rcq->cqe + 3;
	ck_assert_int_le(n, (int)VT_ARRAY_SIZE(wc));
	for (i = 0; i < n; i++)
		vt_recv(p.qp[1], 100 + (uint64_t)i, BUF(b) + 64 * i, 64, b->lkey);
	for (i = 0; i < n; i++) {
		memset(BUF(a) + 8 * i, 0xa0 + i, 8);
		vt_send(p.qp[0], (uint64_t)i, IBV_WR_SEND, IBV_SEND_SIGNALED,
			BUF(a) + 8 * i, 8, a->lkey, 0, 0);
	}
	k = vt_poll(scq, wc, n, 5000);
	ck_assert_int_eq(k, n);
	for (i = 0; i < n && wc[i].status == IBV_WC_SUCCESS; i++)
		ck_assert_uint_eq(wc[i].wr_id, (uint64_t)i);
	placed = i;
	ck_assert_msg(placed <= rcq->cqe + 1, "%d SENDs completed well into a "
		      "receive CQ of %d", placed, rcq->cqe);
	ck_assert_msg(placed < n, "every SEND succeeded past the overrun");
	ck_assert_msg(wc[placed].status == IBV_WC_RETRY_EXC_ERR,
		      "SEND %d after the overrun: %s", placed,
		      ibv_wc_status_str(wc[placed].status));
	for (i = placed + 1; i < n; i++)
		ck_assert_msg(wc[i].status == IBV_WC_WR_FLUSH_ERR,
			      "SEND %d: %s", i, ibv_wc_status_str(wc[i].status));
	vt_expect_state(p.qp[1], IBV_QPS_ERR, "the receiver");
	for (i = placed; i < n; i++)
		vt_expect_byte(BUF(b) + 64 * i, 8, 0, "a receive past the failure");
	vt_expect_async(D.ctx, IBV_EVENT_CQ_ERR, rcq, "the overrun CQ");
	vt_dereg(a);
	vt_dereg(b);
	vt_pair_free(&p);
	ck_assert_int_eq(ibv_destroy_cq(rcq), 0);
	ck_assert_int_eq(ibv_destroy_cq(scq), 0);
}
END_TEST

/* ---- other processes ------------------------------------------------------ */

/* One end of a pair in a child process; its address through a pipe. */
struct remote {
	pid_t pid;
	int to_child, from_child;
};

static void send_addr(int fd, const struct vt_addr *a)
{
	ck_assert_int_eq(write(fd, a, sizeof(*a)), (ssize_t)sizeof(*a));
}

static void recv_addr(int fd, struct vt_addr *a)
{
	ck_assert_int_eq(read(fd, a, sizeof(*a)), (ssize_t)sizeof(*a));
}

/*
 * The child: open the device, a QP connected to the parent's, post
 * `recvs` receives (which maps the rings), say "ready", then run fn.
 */
/* The QPs child_end and parent_end make (the hostile case runs on UC too). */
static const struct vt_qp_opts *end_opts = &DEF;
/* In the child: the parent's QP (a UD child addresses it by hand). */
static struct vt_addr child_peer;
/* in the child: the pipe its parent's words come down */
static int child_down = -1;
/* In the parent: the child's QP (the same, the other way). */
static struct vt_addr parent_peer;

static void child_end(struct remote *r, int recvs,
		      void (*fn)(struct vt_dev *, struct ibv_qp *, struct ibv_mr *))
{
	int down[2], up[2];

	ck_assert_int_eq(pipe(down), 0);
	ck_assert_int_eq(pipe(up), 0);
	r->pid = fork();
	ck_assert_int_ge(r->pid, 0);
	if (r->pid == 0) {
		struct vt_dev d;
		struct vt_addr mine, theirs;
		struct ibv_cq *cq;
		struct ibv_qp *qp;
		struct ibv_mr *mr;
		char ok = 'r';
		int i;

		vt_open(&d);
		cq = ibv_create_cq(d.ctx, 64, NULL, NULL, 0);
		qp = vt_qp(&d, cq, cq, end_opts);
		vt_qp_addr(&d, qp, end_opts, &mine);
		send_addr(up[1], &mine);
		recv_addr(down[0], &theirs);
		vt_connect(&d, qp, &theirs, end_opts);
		child_peer = theirs;
		child_down = down[0];
		mr = vt_reg(d.pd, LEN, VT_ACCESS_ALL);
		for (i = 0; i < recvs; i++)
			vt_recv(qp, (uint64_t)i, mr->addr, LEN, mr->lkey);
		ck_assert_int_eq(write(up[1], &ok, 1), 1);
		fn(&d, qp, mr);
		_exit(0);
	}
	close(down[0]);
	close(up[1]);
	r->to_child = down[1];
	r->from_child = up[0];
}

static struct ibv_qp *parent_end(struct remote *r, struct ibv_cq *cq)
{
	struct vt_addr mine, theirs;
	struct ibv_qp *qp = vt_qp(&D, cq, cq, end_opts);
	char ok;

	vt_qp_addr(&D, qp, end_opts, &mine);
	recv_addr(r->from_child, &theirs);
	send_addr(r->to_child, &mine);
	vt_connect(&D, qp, &theirs, end_opts);
	parent_peer = theirs;
	ck_assert_int_eq(read(r->from_child, &ok, 1), 1);
	return qp;
}

static void wait_forever(struct vt_dev *d, struct ibv_qp *qp, struct ibv_mr *mr)
{
	(void)d, (void)qp, (void)mr;
	for (;;)
		pause();
}

/* The receiver's process dies with our SENDs in the ring: they fail. */
START_TEST(peer_killed)
{
	struct ibv_cq *cq = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	struct ibv_mr *a = vt_reg(D.pd, 4096, VT_ACCESS_ALL);
	struct remote r;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	int i, st;

	child_end(&r, 1, wait_forever);
	qp = parent_end(&r, cq);
	/* the first is taken (the engine places it: the child never polls) */
	vt_send(qp, 1, IBV_WR_SEND, IBV_SEND_SIGNALED, a->addr, 8, a->lkey, 0, 0);
	vt_expect_ok(cq, &wc, 1, IBV_WC_SEND, "taken by the child");
	ck_assert_msg(vt_transit_maps() > 0, "the pair has no transit rings");
	for (i = 0; i < 3; i++)
		vt_send(qp, 2 + (uint64_t)i, IBV_WR_SEND, IBV_SEND_SIGNALED,
			a->addr, 8, a->lkey, 0, 0);
	vt_expect_none(cq, QUIET_MS, "no receive for them");
	kill(r.pid, SIGKILL);
	ck_assert_int_eq(waitpid(r.pid, &st, 0), r.pid);
	vt_expect_wc(cq, &wc, 2, IBV_WC_RETRY_EXC_ERR, "the first after the death");
	vt_expect_wc(cq, &wc, 3, IBV_WC_WR_FLUSH_ERR, "then flushed");
	vt_expect_wc(cq, &wc, 4, IBV_WC_WR_FLUSH_ERR, "then flushed");
	vt_expect_state(qp, IBV_QPS_ERR, "the sender");
	ck_assert_int_eq(ibv_destroy_qp(qp), 0);
	vt_dereg(a);
	ck_assert_int_eq(ibv_destroy_cq(cq), 0);
}
END_TEST

/* ---- a hostile sender ------------------------------------------------------ */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dull;
}

/* Every transit mapping of this process, made writable, gets garbage. */
static void scribble_rings(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long start, end, i;

		if (!strstr(line, "/memfd:ibvd-transit") ||
		    sscanf(line, "%lx-%lx", &start, &end) != 2)
			continue;
		mprotect((void *)start, end - start, PROT_READ | PROT_WRITE);
		for (i = 0; i < 2000; i++) {
			uint64_t v = rnd();
			/* counters and headers often, anywhere else sometimes */
			unsigned long off = i % 2 ? (rnd() % 4096) & ~3ul :
					    rnd() % (end - start - 8);

			memcpy((void *)(start + off), &v, 1 + rnd() % 8);
		}
	}
	fclose(f);
}

/*
 * The child: honest messages first, then garbage in the ring for a
 * while.  On RC and UC every other one is an RDMA WRITE with immediate
 * of no bytes (which needs no key), so the garbage hits those too.
 */
static void hostile_sender(struct vt_dev *d, struct ibv_qp *qp, struct ibv_mr *mr)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge = { (uintptr_t)mr->addr, 512, mr->lkey };
	struct ibv_ah *ah[2] = { NULL, NULL };
	unsigned long n = 0;
	long end;
	char go;

	/* not before the parent has counted its mappings */
	if (read(child_down, &go, 1) != 1)
		_exit(1);
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_SEND;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	/*
	 * UD: to the parent's QP, which the first send asks rings with;
	 * every other datagram with a GRH, whose makings go ahead of its
	 * bytes in the ring (garbage there too)
	 */
	if (qp->qp_type == IBV_QPT_UD) {
		ah[0] = vt_ah(d, child_peer.lid, NULL);
		ah[1] = vt_ah(d, child_peer.lid, &d->gid);
		wr.wr.ud.remote_qpn = child_peer.qpn;
		wr.wr.ud.remote_qkey = VT_QKEY;
		wr.wr.ud.ah = ah[0];
	}
	/*
	 * One honest message, taken before any garbage: a UC receiver drops
	 * a garbled one without a word, and a busy machine may not run the
	 * parent between a post and the next scribble.
	 */
	if (ibv_post_send(qp, &wr, &bad) || read(child_down, &go, 1) != 1)
		_exit(1);
	end = vt_now_ms() + 1500;
	while (vt_now_ms() < end) {
		if (qp->qp_type == IBV_QPT_UD) {
			wr.wr.ud.ah = ah[n % 2];
		} else {
			wr.opcode = n % 2 ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_SEND;
			wr.num_sge = n % 2 ? 0 : 1;
		}
		n++;
		ibv_post_send(qp, &wr, &bad);	/* fails once the SQ is full */
		scribble_rings();
	}
	_exit(0);
}

/*
 * A sender that writes garbage over the rings it shares with us corrupts
 * at most what it sends: our process lives, our other connection (an
 * honest pair of our own) moves checked data all along, and memory of
 * ours outside the hostile QP's receive buffers is never written.
 */
static void hostile_sender_run(void)
{
	struct ibv_cq *cq = ibv_create_cq(D.ctx, 512, NULL, NULL, 0);
	struct ibv_mr *rx = vt_reg(D.pd, LEN, VT_ACCESS_ALL);
	struct ibv_mr *canary = vt_reg(D.pd, LEN, VT_ACCESS_ALL);
	struct ibv_wc wc[16];
	struct remote r;
	struct ibv_qp *qp;
	struct fx f;
	unsigned long rounds = 0, garbage = 0, errors = 0;
	int maps_before;
	long end;
	int st, n, i;

	memset(canary->addr, 0xc5, LEN);
	child_end(&r, 0, hostile_sender);
	qp = parent_end(&r, cq);
	fx_init(&f, NULL);
	maps_before = vt_transit_maps();
	vt_recv(qp, ~0ull, rx->addr, LEN, rx->lkey);	/* for the honest one */
	ck_assert_int_eq(write(r.to_child, "g", 1), 1);
	/* 2 s of garbage from the honest message's arrival (10 s to come) */
	end = vt_now_ms() + 10000;
	while (vt_now_ms() < end) {
		struct ibv_recv_wr rwr = { .wr_id = rounds }, *bad;
		struct ibv_sge sge = { (uintptr_t)rx->addr, LEN, rx->lkey };

		rwr.sg_list = &sge;
		rwr.num_sge = 1;
		ibv_post_recv(qp, &rwr, &bad);	/* fails once in ERR: fine */
		n = ibv_poll_cq(cq, 16, wc);
		ck_assert_int_ge(n, 0);
		if (n > 0 && !garbage) {
			ck_assert_int_eq(write(r.to_child, "s", 1), 1);
			end = vt_now_ms() + 2000;
		}
		for (i = 0; i < n; i++) {
			garbage++;
			ck_assert_uint_eq(wc[i].qp_num, qp->qp_num);
			if (wc[i].status != IBV_WC_SUCCESS)
				errors++;
			else
				ck_assert_uint_le(wc[i].byte_len, LEN);
		}
		/* the honest pair, checked */
		vt_fill(BUF(f.a), 2048, 0, (uint32_t)rounds);
		vt_recv(f.p.qp[1], rounds, BUF(f.b), 2048, f.b->lkey);
		vt_send(f.p.qp[0], rounds, IBV_WR_SEND, IBV_SEND_SIGNALED,
			BUF(f.a), 2048, f.a->lkey, 0, 0);
		vt_expect_ok(f.p.rcq[1], &wc[0], rounds, IBV_WC_RECV, "honest");
		vt_expect_pat(BUF(f.b), 2048, 0, (uint32_t)rounds, "honest bytes");
		vt_expect_ok(f.p.scq[0], &wc[0], rounds, IBV_WC_SEND, "honest send");
		rounds++;
	}
	/*
	 * The hostile side really ran: its rings were mapped here, to be
	 * scribbled on, its messages reached us, and it was not cut short.
	 */
	vt_assert(vt_transit_maps() > maps_before || !expect_rings(),
		  "the hostile QP never got rings");
	ck_assert_uint_gt(garbage, 0);
	/*
	 * UD: our QP, which others may send to, lived through it all: it got
	 * the datagrams that made sense, and no error.
	 */
	if (end_opts == &UD) {
		ck_assert_uint_eq(errors, 0);
		vt_expect_state(qp, IBV_QPS_RTS, "our UD QP after the garbage");
	}
	ck_assert_int_eq(waitpid(r.pid, &st, 0), r.pid);
	vt_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "the hostile sender ended with status %#x", st);
	vt_expect_byte(canary->addr, LEN, 0xc5, "memory nobody sends to");
	printf("hostile: %lu honest rounds; %lu completions from the hostile QP (%lu errors)\n",
	       rounds, garbage, errors);
	ck_assert_uint_gt(rounds, 10);
	fx_free(&f);
	ibv_destroy_qp(qp);
	vt_dereg(rx);
	vt_dereg(canary);
	ck_assert_int_eq(ibv_destroy_cq(cq), 0);
}

START_TEST(hostile_sender_ring)
{
	hostile_sender_run();
}
END_TEST

/* The same on UC, whose receiver drops what finds no receive. */
START_TEST(hostile_sender_ring_uc)
{
	static const struct vt_qp_opts uc = { .type = IBV_QPT_UC };

	end_opts = &uc;
	hostile_sender_run();
	end_opts = &DEF;
}
END_TEST

/*
 * The same on UD: a sender that asks for rings only to write garbage
 * there (both rings: ours to it as well) must not stop our QP, which
 * others may be sending to.
 */
START_TEST(hostile_sender_ring_ud)
{
	end_opts = &UD;
	hostile_sender_run();
	end_opts = &DEF;
}
END_TEST

/* ---- a sender's header that speaks of rings nobody has ------------------ */

/*
 * The pairing's rings are made when the first of its libraries asks for
 * them; until then the engine has only the idle block, which has no
 * cells.  A library can write its SQ header with the pairing's gen and
 * any count before that (or never ask): the engine must find nothing to
 * read, not read cells that are not there.  Our libraries are made to
 * believe they hold the next pairing's rings (its gen guessed from a
 * pairing made just before, in this daemon of the test's own), so that
 * neither asks, and everything goes through the engine's SQ path, which
 * looks at the ring first.
 */
START_TEST(header_before_rings)
{
	struct ibv_wc wc;
	struct fx first, f;
	uint32_t gen;
	uint64_t i;
	int side;

	if (!expect_rings())
		return;
	fx_init(&first, NULL);
	gen = ibvd_observe(&to_ibvc_qp(first.p.qp[0])->sq.engine->direct_gen);
	ck_assert_uint_ne(gen, 0);
	fx_free(&first);
	memset(&f, 0, sizeof(f));
	f.a = vt_reg(D.pd, LEN, VT_ACCESS_ALL);
	f.b = vt_reg(D.pd, 2 * LEN, VT_ACCESS_ALL);
	f.p.d = &D;
	for (side = 0; side < 2; side++) {
		f.p.scq[side] = ibv_create_cq(D.ctx, 256, NULL, NULL, 0);
		f.p.rcq[side] = ibv_create_cq(D.ctx, 256, NULL, NULL, 0);
		ck_assert(f.p.scq[side] && f.p.rcq[side]);
		f.p.o[side].psn = side ? 0xabcde : 0x1234;
		f.p.qp[side] = vt_qp(&D, f.p.scq[side], f.p.rcq[side],
				     &f.p.o[side]);
		/* "have them already": the library never asks */
		__atomic_store_n(&to_ibvc_qp(f.p.qp[side])->direct_gen,
				 gen + 1, __ATOMIC_RELAXED);
	}
	{
		struct vt_addr a[2];

		vt_qp_addr(&D, f.p.qp[0], &f.p.o[0], &a[0]);
		vt_qp_addr(&D, f.p.qp[1], &f.p.o[1], &a[1]);
		vt_connect(&D, f.p.qp[0], &a[1], &f.p.o[0]);
		vt_connect(&D, f.p.qp[1], &a[0], &f.p.o[1]);
	}
	for (side = 0; side < 2; side++) {
		struct ibvc_qp *q = to_ibvc_qp(f.p.qp[side]);

		ck_assert_msg(ibvd_observe(&q->sq.engine->direct_gen) == gen + 1,
			      "the pair's gen is %u, not the %u guessed",
			      ibvd_observe(&q->sq.engine->direct_gen), gen + 1);
		/* a count far past anything sent, of this pairing */
		ibvd_write_once(&q->sq.client->direct_produced,
				(uint64_t)IBVD_TRANSIT_START + 1000 + side);
		ibvd_publish(&q->sq.client->direct_produced_gen, gen + 1);
	}
	ck_assert_int_eq(vt_transit_maps(), 0);
	for (i = 0; i < 64; i++) {
		int from = (int)(i % 2);
		struct ibv_mr *src = from ? f.b : f.a, *dst = from ? f.a : f.b;

		vt_fill(BUF(src), 3000, 0, (uint32_t)i);
		vt_recv(f.p.qp[!from], i, BUF(dst), LEN, dst->lkey);
		vt_send(f.p.qp[from], i, i % 4 < 2 ? IBV_WR_SEND :
			IBV_WR_SEND_WITH_IMM, IBV_SEND_SIGNALED, BUF(src), 3000,
			src->lkey, 0, 0);
		vt_expect_ok(f.p.rcq[!from], &wc, i, IBV_WC_RECV, "a SEND");
		ck_assert_uint_eq(wc.byte_len, 3000);
		vt_expect_pat(BUF(dst), 3000, 0, (uint32_t)i, "its bytes");
		vt_expect_ok(f.p.scq[from], &wc, i, IBV_WC_SEND, "its sender's");
	}
	/* a WRITE after them all, in order */
	vt_fill(BUF(f.a), LEN, 0, 77);
	vt_send(f.p.qp[0], 100, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, BUF(f.a),
		LEN, f.a->lkey, ADDR(f.b, 0), f.b->rkey);
	vt_expect_ok(f.p.scq[0], &wc, 100, IBV_WC_RDMA_WRITE, "a WRITE");
	vt_expect_pat(BUF(f.b), LEN, 0, 77, "its bytes");
	ck_assert_int_eq(vt_transit_maps(), 0);
	for (side = 0; side < 2; side++)
		vt_expect_state(f.p.qp[side], IBV_QPS_RTS, "a QP of the pair");
	fx_free(&f);
}
END_TEST

/* ---- what a receiver left after the engine gave up on it ----------------- */

/* Take t's receive claim as its library would, and hold it. */
static void claim_hold(struct ibv_qp *t)
{
	uint32_t *claim = &to_ibvc_qp(t)->rq.client->claim;
	long until = vt_now_ms() + vt_tmo_ms();
	uint32_t expect;

	do {
		expect = IBVD_WQ_CLAIM_FREE;
		if (__atomic_compare_exchange_n(claim, &expect,
						IBVD_WQ_CLAIM_LIBRARY, false,
						__ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			return;
		vt_sleep_ms(1);
	} while (vt_now_ms() < until);
	ck_abort_msg("the receive claim stayed %u", expect);
}

/*
 * A UD receiver whose library holds its claim too long: the engine gives
 * up on what the ring holds, and the sender's sends complete
 * (direct_dropped).  When the library lets go without taking them, the
 * datagrams are the engine's to place as any, at its next look at the
 * ring (here: the sender's datagram to a third QP, which goes through
 * its SQ): they must not wait there until the sender sends on the ring
 * again.  The engine's own mark, direct_taken, shows who took them:
 * the receiver does not poll before they are placed.
 */
START_TEST(ud_left_after_give_up)
{
	struct ibv_cq *cq = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	struct ibv_qp *third = vt_qp(&D, cq, cq, &UD);
	const struct ibvd_wq_engine *e;
	const struct ibvd_wq_client *c;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	uint64_t produced, taken, i;
	long until;
	struct fx f;

	if (!expect_rings())
		return;
	vt_connect(&D, third, NULL, &UD);
	ud_init(&f, &ah);
	e = to_ibvc_qp(f.p.qp[0])->sq.engine;
	c = to_ibvc_qp(f.p.qp[0])->sq.client;
	for (i = 0; i < 3; i++)
		vt_recv(f.p.qp[1], 10 + i, BUF(f.b) + 512 * i, 512, f.b->lkey);
	claim_hold(f.p.qp[1]);
	taken = ibvd_observe(&e->direct_taken);
	for (i = 0; i < 3; i++) {
		vt_fill(BUF(f.a) + 256 * i, 256, 0, 40 + (uint32_t)i);
		vt_ud_send(f.p.qp[0], i, ah, f.p.qp[1]->qp_num, VT_QKEY,
			   BUF(f.a) + 256 * i, 256, f.a->lkey,
			   IBV_SEND_SIGNALED);
	}
	/* given up on: the sends complete, the ring still holds them */
	for (i = 0; i < 3; i++)
		vt_expect_ok(f.p.scq[0], &wc, i, IBV_WC_SEND, "a send given up on");
	produced = ibvd_observe(&c->direct_produced);
	ck_assert_uint_eq(ibvd_observe(&e->direct_dropped), produced);
	ck_assert_uint_eq(ibvd_observe(&e->direct_taken), taken);
	ck_assert_uint_gt(produced, taken);
	/* the library lets go, having taken nothing */
	__atomic_store_n(&to_ibvc_qp(f.p.qp[1])->rq.client->claim,
			 IBVD_WQ_CLAIM_FREE, __ATOMIC_RELEASE);
	vt_recv(third, 50, BUF(f.b) + 4096, 512, f.b->lkey);
	vt_ud_send(f.p.qp[0], 3, ah, third->qp_num, VT_QKEY, BUF(f.a), 64,
		   f.a->lkey, IBV_SEND_SIGNALED);
	vt_expect_ok(cq, &wc, 50, IBV_WC_RECV, "the third QP's datagram");
	vt_expect_ok(f.p.scq[0], &wc, 3, IBV_WC_SEND, "its send");
	until = vt_now_ms() + vt_tmo_ms();
	while (ibvd_observe(&e->direct_taken) != produced && vt_now_ms() < until)
		vt_sleep_ms(1);
	ck_assert_msg(ibvd_observe(&e->direct_taken) == produced,
		      "the engine took the ring to %llu, not %llu",
		      (unsigned long long)ibvd_observe(&e->direct_taken),
		      (unsigned long long)produced);
	for (i = 0; i < 3; i++) {
		vt_expect_ok(f.p.rcq[1], &wc, 10 + i, IBV_WC_RECV,
			     "a datagram left in the ring");
		ck_assert_uint_eq(wc.byte_len, 40 + 256);
		vt_expect_pat(BUF(f.b) + 512 * i + 40, 256, 0, 40 + (uint32_t)i,
			      "its bytes");
	}
	vt_expect_none(f.p.rcq[1], QUIET_MS, "nothing more");
	ud_free(&f, ah);
	ck_assert_int_eq(ibv_destroy_qp(third), 0);
	ck_assert_int_eq(ibv_destroy_cq(cq), 0);
}
END_TEST

/* ---- a UD receiver stopped while it holds its claim ---------------------- */

#define STOP_SLOTS	64		/* the receiver's receives (a UD QP's default) */
#define STOP_DGRAM	4000		/* bytes: 8 of number, then its pattern */
#define STOP_SLOT	8192		/* a receive's buffer */
#define STOP_MS		2500		/* at least this long */
#define STOP_SENDS	1000		/* and at least this many */

/*
 * The child: keep STOP_SLOTS receives posted and check every datagram as
 * it completes (its number, then the pattern of that number); exits 1 at
 * the first wrong byte, 0 with at least one datagram once its parent has
 * sent its last (a word down child_down): the sender goes on until it
 * has sent STOP_SENDS, however slow a loaded machine makes it, so the
 * receiver's end is the sender's, not a clock's.
 */
static void stopped_receiver(struct vt_dev *d, struct ibv_qp *qp,
			     struct ibv_mr *unused)
{
	struct ibv_mr *mr = vt_reg(d->pd, (size_t)STOP_SLOTS * STOP_SLOT,
				   VT_ACCESS_ALL);
	struct ibv_wc wc[16];
	struct pollfd done = { .fd = child_down, .events = POLLIN };
	unsigned long got = 0;
	uint64_t slot;
	int n, i;

	(void)unused;
	for (slot = 0; slot < STOP_SLOTS; slot++)
		vt_recv(qp, slot, BUF(mr) + slot * STOP_SLOT, STOP_SLOT, mr->lkey);
	while (poll(&done, 1, 0) == 0) {
		n = ibv_poll_cq(qp->recv_cq, 16, wc);
		if (n < 0)
			_exit(2);
		for (i = 0; i < n; i++) {
			const uint8_t *buf = BUF(mr) + wc[i].wr_id * STOP_SLOT;
			uint64_t num;

			if (wc[i].status != IBV_WC_SUCCESS ||
			    wc[i].byte_len != 40 + STOP_DGRAM)
				_exit(3);
			memcpy(&num, buf + 40, sizeof(num));
			if (vt_check(buf + 48, STOP_DGRAM - 8, 0, (uint32_t)num) >= 0)
				_exit(1);
			got++;
			vt_recv(qp, wc[i].wr_id, (void *)buf, STOP_SLOT, mr->lkey);
		}
	}
	_exit(got ? 0 : 4);
}

/*
 * A UD receiver whose process stops while its library holds its claim
 * (in the middle of a poll) must not make the engine move its ring under
 * it: only the claim's holder may, or the sender writes over cells the
 * receiver is still copying from, and it gets torn datagrams.  The
 * engine gives up waiting instead (ud_give_up): the sender's sends
 * complete, the ring stays.  We stop and continue the receiver every
 * millisecond or so, sending all along; each datagram it gets must be
 * whole.
 */
START_TEST(ud_receiver_stopped)
{
	struct ibv_cq *cq = ibv_create_cq(D.ctx, 512, NULL, NULL, 0);
	struct ibv_mr *src = vt_reg(D.pd, (size_t)64 * STOP_DGRAM, VT_ACCESS_ALL);
	struct ibv_wc wc[16];
	struct ibv_ah *ah;
	struct remote r;
	struct ibv_qp *qp;
	bool busy[64] = { false };	/* a send of that buffer not complete */
	uint64_t num = 0;
	unsigned long stops = 0;
	long end, give_up, next = 0;
	bool stopped = false;
	int st, n, i;

	end_opts = &UD;
	child_end(&r, 0, stopped_receiver);
	qp = parent_end(&r, cq);
	ah = vt_ah(&D, parent_peer.lid, NULL);
	end = vt_now_ms() + STOP_MS;
	give_up = end + 40 * 1000;	/* within the case's 60 s */
	while ((vt_now_ms() < end || num < STOP_SENDS) &&
	       vt_now_ms() < give_up) {
		uint8_t *buf = BUF(src) + (num % 64) * STOP_DGRAM;

		struct ibv_sge sge = { (uintptr_t)buf, STOP_DGRAM, src->lkey };
		struct ibv_send_wr wr = { .wr_id = num, .sg_list = &sge,
					  .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = parent_peer.qpn;
		wr.wr.ud.remote_qkey = VT_QKEY;
		/* a buffer still sending, or a full SQ: later */
		if (!busy[num % 64]) {
			memcpy(buf, &num, sizeof(num));
			vt_fill(buf + 8, STOP_DGRAM - 8, 0, (uint32_t)num);
			if (ibv_post_send(qp, &wr, &bad) == 0)
				busy[num++ % 64] = true;
		}
		n = ibv_poll_cq(cq, 16, wc);
		ck_assert_int_ge(n, 0);
		for (i = 0; i < n; i++) {
			ck_assert_int_eq(wc[i].status, IBV_WC_SUCCESS);
			busy[wc[i].wr_id % 64] = false;
		}
		if (vt_now_ms() >= next) {
			ck_assert_int_eq(kill(r.pid, stopped ? SIGCONT : SIGSTOP), 0);
			stops += !stopped;
			stopped = !stopped;
			/* stopped for long enough to fill the ring many times */
			next = vt_now_ms() + (stopped ? 2 + (long)(rnd() % 6) :
					       1 + (long)(rnd() % 2));
		}
	}
	if (stopped)
		kill(r.pid, SIGCONT);
	ck_assert_int_eq(write(r.to_child, "d", 1), 1);
	/* the datagrams took the rings (the first asked for them) */
	vt_assert((vt_transit_maps() > 0) == expect_rings(),
		  "the sender has %d transit ring mappings", vt_transit_maps());
	ck_assert_int_eq(waitpid(r.pid, &st, 0), r.pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "the receiver %s %d after %lu datagrams sent, %lu stops",
		      WIFEXITED(st) ? "exited" : "died of signal",
		      WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
		      (unsigned long)num, stops);
	ck_assert_uint_ge(num, STOP_SENDS);
	ck_assert_int_eq(ibv_destroy_ah(ah), 0);
	ck_assert_int_eq(ibv_destroy_qp(qp), 0);
	vt_dereg(src);
	ck_assert_int_eq(ibv_destroy_cq(cq), 0);
	end_opts = &DEF;
}
END_TEST

/* ---- the counting workload ---------------------------------------------- */

/* DIRECT_HALFWAY=FILE: say so, and wait for FILE (the shell's turn). */
static void halfway(void)
{
	const char *file = getenv("DIRECT_HALFWAY");
	int ms;

	if (!file)
		return;
	printf("halfway\n");
	for (ms = 0; access(file, F_OK) != 0; ms += 10) {
		vt_assert(ms < vt_tmo_ms(), "%s never came", file);
		vt_sleep_ms(10);
	}
}

/*
 * DIRECT_PINGPONG=write_imm: the ping-pong is of RDMA WRITEs with
 * immediate; =srq: of SENDs into one SRQ both QPs receive from; =ud: of
 * datagrams between two UD QPs.
 */
static bool pingpong_is(const char *what)
{
	const char *v = getenv("DIRECT_PINGPONG");

	return v && strcmp(v, what) == 0;
}

static void pingpong_recv(struct fx *f, struct ibv_srq *srq, int to,
			  unsigned long i)
{
	if (srq)
		vt_srq_recv(srq, i, BUF(f->b), 64, f->b->lkey);
	else
		vt_recv(f->p.qp[to], i, BUF(f->b), 64, f->b->lkey);
}

/*
 * Is the SEND's completion there once its receive is?  On a NIC the
 * responder's ACK is on its way before its app can see the message, and
 * apps that sleep on one channel for both CQs count on the order
 * (perftest's -e): one look at the send CQ, right after the receive.
 */
static bool sent_before_received(struct ibv_cq *scq, unsigned long i,
				 enum ibv_wc_opcode opcode)
{
	struct ibv_wc wc;
	int n = ibv_poll_cq(scq, 1, &wc);

	vt_assert(n >= 0, "ibv_poll_cq: %d", n);
	if (n == 0) {
		vt_expect_ok(scq, &wc, i, opcode, "pingpong");
		return false;
	}
	vt_assert(wc.status == IBV_WC_SUCCESS && wc.wr_id == i &&
		  wc.opcode == opcode, "message %lu: send completion %s, wr_id %llu",
		  i, ibv_wc_status_str(wc.status), (unsigned long long)wc.wr_id);
	return true;
}

/* Message i from QP `from` of the pair: a datagram if ah, else a SEND or a WRITE. */
static void pingpong_send(struct fx *f, struct ibv_ah *ah, bool writes,
			  int from, unsigned long i, uint64_t at)
{
	if (ah)
		vt_ud_send(f->p.qp[from], i, ah, f->p.qp[!from]->qp_num,
			   VT_QKEY, BUF(f->a), 8, f->a->lkey,
			   IBV_SEND_SIGNALED);
	else
		vt_send(f->p.qp[from], i, writes ? IBV_WR_RDMA_WRITE_WITH_IMM :
			IBV_WR_SEND, IBV_SEND_SIGNALED, BUF(f->a), 8,
			f->a->lkey, at, f->b->rkey);
}

static int pingpong(unsigned long n)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	bool writes = pingpong_is("write_imm");
	unsigned long i, early = 0;
	struct ibv_srq *srq = NULL;
	struct ibv_ah *ah = NULL;
	struct vt_qp_opts rx = { 0 };
	struct ibv_wc wc;
	struct fx f;

	vt_open(&D);
	if (pingpong_is("srq")) {
		srq = ibv_create_srq(D.pd, &sa);
		vt_assert(srq != NULL, "ibv_create_srq: %s", strerror(errno));
		rx.srq = srq;
	}
	if (pingpong_is("ud"))
		ud_init(&f, &ah);
	else
		fx_init(&f, &rx);
	for (i = 0; i < n; i++) {
		int from = (int)(i & 1), to = !from;
		/* both QPs write into b, each at its own place */
		uint64_t at = ADDR(f.b, 4096 + 64 * (uint64_t)from);
		/* a datagram lands after its 40-byte GRH slot */
		const uint8_t *got = writes ? (const uint8_t *)(uintptr_t)at :
				     BUF(f.b) + (ah ? 40 : 0);

		if (i == n / 2)
			halfway();

		pingpong_recv(&f, srq, to, i);
		memcpy(BUF(f.a), &i, sizeof(i));
		pingpong_send(&f, ah, writes, from, i, at);
		vt_expect_ok(f.p.rcq[to], &wc, i, writes ?
			     IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV, "pingpong");
		vt_assert(memcmp(got, &i, sizeof(i)) == 0,
			  "message %lu: wrong bytes", i);
		if (!sent_before_received(f.p.scq[from], i, writes ?
					  IBV_WC_RDMA_WRITE : IBV_WC_SEND))
			early++;
	}
	if (ah)
		ud_free(&f, ah);
	else
		fx_free(&f);
	if (srq)
		vt_assert(ibv_destroy_srq(srq) == 0, "ibv_destroy_srq");
	vt_close(&D);
	printf("pingpong: %lu messages, %lu received before their sender's completion\n",
	       n, early);
	return 0;
}

/* ---- run as root: a Q_Key that only root's QPs may hold --------------------- */

#define CONTROLLED_QKEY	0x80010000u	/* the GSI's */

static const struct vt_qp_opts UD_CONTROLLED = {
	.type = IBV_QPT_UD, .qkey = CONTROLLED_QKEY
};

/* The uid the forger runs as (direct-helper root UID). */
static uid_t forger_uid;

/* The ring pair mapped here that a fragment went out on: out, and in. */
static bool sent_ring(struct ibvd_transit *out, struct ibvd_transit *in)
{
	FILE *f = fopen("/proc/self/maps", "r");
	unsigned long start, end;
	char line[512];
	bool found = false;

	while (f && !found && fgets(line, sizeof(line), f)) {
		uint32_t ncells;
		unsigned int side;

		if (!strstr(line, "/memfd:ibvd-transit ") ||
		    sscanf(line, "%lx-%lx", &start, &end) != 2)
			continue;
		ncells = (uint32_t)((end - start - IBVD_TRANSIT_CTL_BYTES) /
				    (2 * IBVD_TRANSIT_CELL));
		/* the control page is mapped read-only; it is ours to change */
		if (mprotect((void *)start, IBVD_TRANSIT_CTL_BYTES,
			     PROT_READ | PROT_WRITE))
			break;
		for (side = 0; side < 2 && !found; side++) {
			ibvd_transit_pair((void *)start, ncells, side, out, in);
			found = __atomic_load_n(&out->ctl->produced,
						__ATOMIC_ACQUIRE) != 0;
		}
	}
	if (f)
		fclose(f);
	return found;
}

/* A whole datagram written into out by hand, with the Q_Key we like. */
static void forge_datagram(struct ibvd_transit *out, uint32_t qkey,
			   const void *bytes, uint32_t len)
{
	uint32_t p = __atomic_load_n(&out->ctl->produced, __ATOMIC_ACQUIRE);
	uint32_t at = p & (out->ncells - 1);
	struct ibvd_transit_frag h = {
		.seq = p + 1, .kind = IBVD_TRANSIT_SEND,
		.flags = IBVD_TRANSIT_FIRST | IBVD_TRANSIT_LAST,
		.len = len, .msg_len = len, .qkey = qkey,
	};
	uint8_t *cell = out->cells + (size_t)at * IBVD_TRANSIT_CELL;

	if (at + ibvd_transit_frag_cells(len) > out->ncells)
		_exit(6);	/* a few datagrams in: never at the end */
	memcpy(cell + IBVD_TRANSIT_HDR, bytes, len);
	memcpy(cell, &h, sizeof(h));
	__atomic_store_n(&out->ctl->produced, p + ibvd_transit_frag_cells(len),
			 __ATOMIC_RELEASE);
}

static void child_fail(const char *msg)
{
	fprintf(stderr, "forger: %s\n", msg);
	_exit(3);
}

/*
 * The forger, as forger_uid: two honest datagrams to the parent's QP
 * (their Q_Key its own, so refused), which pair the QPs on rings; then one
 * written into the ring by hand with the parent's controlled Q_Key.
 */
/* What the exit codes of the children below (forger, waker) say. */
static const char *const child_why[] = {
	[3] = "a vt check failed (its stderr says which)",
	[4] = "could not become the other uid",
	[5] = "no ring carried its honest datagrams",
	[6] = "the ring was at its end", [7] = "pipe",
	[8] = "the pairing gave it the parent's wake-up pair",
	[9] = "the parent's datagram never came on the ring",
	[10] = "what the parent sent was taken from the ring it held",
};

static const char *child_exit(int st)
{
	if (!WIFEXITED(st))
		return "killed";
	if ((size_t)WEXITSTATUS(st) < VT_ARRAY_SIZE(child_why) &&
	    child_why[WEXITSTATUS(st)])
		return child_why[WEXITSTATUS(st)];
	return "?";
}

/*
 * Wait for the child's next word on `up` (non-blocking), failing if it
 * exits first; polling `cq` meanwhile if there is one, so that our
 * library reads the rings (`none`: and finds nothing).
 */
static void child_says(int up, pid_t pid, struct ibv_cq *cq, bool none)
{
	struct ibv_wc wc;
	char c;
	int st;

	while (read(up, &c, 1) != 1) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			ck_abort_msg("the child exited %d: %s", WEXITSTATUS(st),
				     child_exit(st));
		if (!cq)
			vt_sleep_ms(1);
		else if (none)
			ck_assert_int_eq(ibv_poll_cq(cq, 1, &wc), 0);
		else
			ck_assert_int_ge(ibv_poll_cq(cq, 1, &wc), 0);
	}
}

/* The child's end, which must be an exit(0). */
static void child_done(pid_t pid)
{
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child: %s",
		      child_exit(st));
}

/* A child of another uid (forger, waker, scribbler) and our pipe ends. */
struct child {
	pid_t pid;
	int up;		/* it says, we read (non-blocking) */
	int down;	/* we say */
};

typedef void child_fn(const struct vt_addr *to, int up, int down, int arg);

static void child_start(struct child *c, child_fn *fn, const struct vt_addr *to,
			int arg)
{
	int up[2], down[2];

	ck_assert_int_eq(pipe(up), 0);
	ck_assert_int_eq(pipe(down), 0);
	c->pid = fork();
	ck_assert_int_ge(c->pid, 0);
	if (c->pid == 0)
		fn(to, up[1], down[0], arg);
	close(up[1]);
	close(down[0]);
	c->up = up[0];
	c->down = down[1];
	ck_assert_int_eq(fcntl(c->up, F_SETFL, O_NONBLOCK), 0);
}

/* Tell the child to end ("x"), and see that it did, well. */
static void child_finish(struct child *c)
{
	ck_assert_int_eq(write(c->down, "x", 1), 1);
	child_done(c->pid);
	close(c->up);
	close(c->down);
}

/* The forger's end: a UD QP of forger_uid's, paired with `to` on rings. */
struct forger_end {
	struct vt_dev d;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	struct ibvd_transit out;	/* ours to `to` */
	struct ibvd_transit in;		/* `to`'s to us */
	int sockets_got;		/* socket fds the pairing brought */
};

/* Sockets among our fds: the wake-up pairs a QP_DIRECT reply brings are. */
static int socket_fds(void)
{
	char path[64], target[64];
	int fd, n = 0;

	for (fd = 0; fd < 1024; fd++) {
		ssize_t len;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		len = readlink(path, target, sizeof(target) - 1);
		if (len > 0 && strncmp(target, "socket:", 7) == 0 &&
		    (size_t)len < sizeof(target))
			n++;
	}
	return n;
}

/*
 * Become forger_uid and send honest datagrams to `to` (with our own
 * Q_Key) until one goes on the rings: the first asks for them, later
 * ones go there once both libraries mapped them.
 */
static void forger_pair(struct forger_end *e, const struct vt_addr *to)
{
	struct ibv_wc wc;
	int i;

	vt_fail_hook = child_fail;
	if (setgroups(0, NULL) || setresgid(forger_uid, forger_uid, forger_uid) ||
	    setresuid(forger_uid, forger_uid, forger_uid) ||
	    prctl(PR_SET_DUMPABLE, 1))	/* a changed uid clears it */
		_exit(4);
	vt_open(&e->d);
	e->cq = ibv_create_cq(e->d.ctx, 16, NULL, NULL, 0);
	e->qp = vt_qp(&e->d, e->cq, e->cq, &UD);
	vt_connect(&e->d, e->qp, NULL, &UD);
	e->mr = vt_reg(e->d.pd, 4096, VT_ACCESS_ALL);
	e->ah = vt_ah(&e->d, to->lid, NULL);
	e->sockets_got = -socket_fds();
	for (i = 0; !sent_ring(&e->out, &e->in); i++) {
		if (i == 40)
			_exit(5);
		vt_ud_send(e->qp, (uint64_t)i, e->ah, to->qpn, 0x80000000u,
			   e->mr->addr, 64, e->mr->lkey, IBV_SEND_SIGNALED);
		vt_expect_ok(e->cq, &wc, (uint64_t)i, IBV_WC_SEND,
			     "an honest send");
		vt_sleep_ms(20);
	}
	e->sockets_got += socket_fds();
}

static void forger(const struct vt_addr *to, int up, int down, int unused)
{
	static const char forged[] = "forged: a controlled Q_Key";
	struct forger_end e;
	char c = 'f';

	forger_pair(&e, to);
	forge_datagram(&e.out, CONTROLLED_QKEY, forged, sizeof(forged));
	if (write(up, &c, 1) != 1 || read(down, &c, 1) != 1)
		_exit(7);
	_exit(0);
}

/*
 * A datagram's Q_Key on the rings is the sender's word: one with the
 * controlled bit is delivered only if the sending QP holds that Q_Key,
 * which only root can give it.  Root's own such datagrams get through
 * (the engine checks them for the receiver's library); another uid's,
 * written into the ring by hand, are refused and never complete.
 */
START_TEST(ud_controlled_qkey_forged)
{
	struct ibv_cq *cq = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	struct ibv_cq *scq = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	struct ibv_mr *mr = vt_reg(D.pd, 16 * 4096, VT_ACCESS_ALL);
	struct ibv_qp *rx, *tx;
	struct vt_addr to;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	struct child c;
	uint32_t viol;
	int i;

	ck_assert_msg(geteuid() == 0, "direct-helper root runs as root");
	rx = vt_qp(&D, cq, cq, &UD_CONTROLLED);
	vt_connect(&D, rx, NULL, &UD_CONTROLLED);
	tx = vt_qp(&D, scq, scq, &UD_CONTROLLED);
	vt_connect(&D, tx, NULL, &UD_CONTROLLED);
	vt_qp_addr(&D, rx, &UD_CONTROLLED, &to);
	ah = vt_ah(&D, to.lid, NULL);
	for (i = 0; i < 16; i++)
		vt_recv(rx, 100 + (uint64_t)i, BUF(mr) + i * 4096, 4096, mr->lkey);
	viol = vt_qkey_viol(D.ctx, 1);
	child_start(&c, forger, &to, 0);
	/* polling meanwhile: our library reads the rings as it polls */
	child_says(c.up, c.pid, cq, true);
	vt_expect_none(cq, QUIET_MS * 3, "a datagram forged with root's Q_Key");
	child_finish(&c);
	/* its honest ones refused for their Q_Key; our QP unharmed */
	ck_assert_uint_ge(vt_qkey_viol(D.ctx, 1), viol + 1);
	vt_expect_state(rx, IBV_QPS_RTS, "the receiving QP");
	/*
	 * root's QP with the controlled Q_Key: delivered, also on the rings
	 * (once the forger's pair is gone: one pair per QP)
	 */
	for (i = 0; i < 5; i++) {
		vt_fill(BUF(mr) + 15 * 4096, 64, 0, (uint32_t)i);
		vt_ud_send(tx, (uint64_t)i, ah, rx->qp_num, 0x80000000u,
			   BUF(mr) + 15 * 4096, 64, mr->lkey, IBV_SEND_SIGNALED);
		vt_expect_ok(cq, &wc, 100 + (uint64_t)i, IBV_WC_RECV,
			     "root's datagram with its controlled Q_Key");
		ck_assert_uint_eq(wc.src_qp, tx->qp_num);
		vt_expect_pat(BUF(mr) + i * 4096 + 40, 64, 0, (uint32_t)i,
			      "root's datagram");
		vt_expect_ok(scq, &wc, (uint64_t)i, IBV_WC_SEND, "root's send");
		vt_sleep_ms(20);
	}
	ck_assert_msg(vt_transit_maps() > 0, "root's pair has no rings");
	ibv_destroy_ah(ah);
	ibv_destroy_qp(tx);
	ibv_destroy_qp(rx);
	vt_dereg(mr);
	ck_assert_int_eq(ibv_destroy_cq(scq), 0);
	ck_assert_int_eq(ibv_destroy_cq(cq), 0);
}
END_TEST

/* How many arms of the parent's send CQ the waker tries (tokens count up). */
#define WAKER_ARMS	8u

/*
 * The waker, as forger_uid, once paired with the parent's UD QP: for
 * each guess of its send CQ's arm, it writes in the parent's ring that
 * the parent sleeps on that arm until its SENDs are taken as far as they
 * are now, and in its own that the parent's receiver has no wake-up pair
 * to watch, so that its library rings the engine for each datagram it
 * sends, and the engine looks at the parent's wake.  The pairing gave
 * it none of the parent's wake-up pairs, to write to instead.
 */
static void waker(const struct vt_addr *to, int up, int down, int unused)
{
	struct forger_end e;
	struct ibv_wc wc;
	uint32_t arm;
	char c = 'p';

	forger_pair(&e, to);
	/* the parent's send CQ has a channel: its wake-up pair is not ours */
	if (e.sockets_got != 0)
		_exit(8);
	if (write(up, &c, 1) != 1 || read(down, &c, 1) != 1)
		_exit(7);
	/* down to 1 (our first arm's), which stays for our library to see */
	for (arm = WAKER_ARMS; arm >= 1; arm--) {
		uint32_t consumed = __atomic_load_n(&e.in.ctl->consumed,
						    __ATOMIC_ACQUIRE);

		__atomic_store_n(&e.in.ctl->wake, (uint64_t)arm << 32 | consumed,
				 __ATOMIC_RELAXED);
		__atomic_store_n(&e.in.ctl->sender_waits, IBVD_TRANSIT_WAKE_AT,
				 __ATOMIC_RELEASE);
		__atomic_store_n(&e.out.ctl->arm_kind,
				 IBVD_ARM_NEXT | IBVD_TRANSIT_ARM_UNWATCHED,
				 __ATOMIC_RELAXED);
		__atomic_store_n(&e.out.ctl->arm_seq, 1000 + arm,
				 __ATOMIC_RELEASE);
		vt_ud_send(e.qp, arm, e.ah, to->qpn, 0x80000000u, e.mr->addr,
			   64, e.mr->lkey, IBV_SEND_SIGNALED);
		vt_expect_ok(e.cq, &wc, arm, IBV_WC_SEND, "a send the engine takes");
	}
	c = 'w';
	if (write(up, &c, 1) != 1 || read(down, &c, 1) != 1)
		_exit(7);
	_exit(0);
}

/*
 * A UD pair's other end, of another uid, can write every word of the
 * rings it shares with us, ours too: that our send CQ sleeps, and on
 * what.  Neither the engine nor our library may believe it: an event
 * stands for a completion (we sent nothing here), and a woken sleeper
 * that finds none may never sleep again (one poll per event).  Both go
 * by our library's own copy, in our SQ's client header.
 */
/*
 * Our end against such a child: a UD QP whose send CQ has a channel (its
 * receive CQ none), 16 receives posted.
 */
struct ud_end {
	struct ibv_comp_channel *ch;
	struct ibv_cq *rcq, *scq;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct vt_addr addr;
};

static void ud_end_open(struct ud_end *u)
{
	int i;

	u->ch = ibv_create_comp_channel(D.ctx);
	ck_assert_ptr_nonnull(u->ch);
	u->rcq = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	u->scq = ibv_create_cq(D.ctx, 64, NULL, u->ch, 0);
	ck_assert(u->rcq && u->scq);
	u->mr = vt_reg(D.pd, 16 * 4096, VT_ACCESS_ALL);
	u->qp = vt_qp(&D, u->scq, u->rcq, &UD);
	vt_connect(&D, u->qp, NULL, &UD);
	vt_qp_addr(&D, u->qp, &UD, &u->addr);
	for (i = 0; i < 16; i++)
		vt_recv(u->qp, (uint64_t)i, BUF(u->mr) + i * 4096, 4096,
			u->mr->lkey);
}

/* ... unharmed by what the child did, and gone. */
static void ud_end_close(struct ud_end *u)
{
	vt_expect_state(u->qp, IBV_QPS_RTS, "our UD QP");
	ck_assert_int_eq(ibv_destroy_qp(u->qp), 0);
	vt_dereg(u->mr);
	ck_assert_int_eq(ibv_destroy_cq(u->scq), 0);
	ck_assert_int_eq(ibv_destroy_cq(u->rcq), 0);
	ck_assert_int_eq(ibv_destroy_comp_channel(u->ch), 0);
}

START_TEST(ud_peer_wakes_nothing)
{
	struct ibv_cq *cq;
	struct ud_end u;
	struct child c;
	void *ctx;

	ud_end_open(&u);
	ck_assert_int_eq(ibv_req_notify_cq(u.scq, 0), 0);
	child_start(&c, waker, &u.addr, 0);
	/* polling meanwhile: our library maps the rings as it polls */
	child_says(c.up, c.pid, u.rcq, false);
	/* no more polling: what the waker sends now, the engine takes */
	ck_assert_int_eq(write(c.down, "g", 1), 1);
	child_says(c.up, c.pid, NULL, false);
	ck_assert_msg(!channel_ready(u.ch, QUIET_MS * 3),
		      "our send CQ's event, and we sent nothing");
	/* nor does our library fire it when we look */
	ck_assert_int_eq(fcntl(u.ch->fd, F_SETFL, O_NONBLOCK), 0);
	ck_assert_int_eq(ibv_get_cq_event(u.ch, &cq, &ctx), -1);
	ck_assert_int_eq(errno, EAGAIN);
	child_finish(&c);
	ud_end_close(&u);
}
END_TEST


/*
 * What the scribbler writes over the parent's ring once the parent's
 * datagram is in it: `produced` back to what it was (the datagram
 * hidden from the engine), a `consumed` past it (impossible), or
 * `consumed` put back below it all along (its receive queue free, so
 * that the engine takes it, and the ring says it never did); or, after
 * its library took more than a ring's worth itself (so that the engine's
 * own mark is more than a lap behind), a `consumed` past it.
 */
enum scribble { SCRIBBLE_HIDE, SCRIBBLE_PAST, SCRIBBLE_BACK, SCRIBBLE_LAPPED };

/* SCRIBBLE_LAPPED: datagrams of 4,000 bytes first, 64 cells each */
#define LAPPED_DGRAMS	320
#define LAPPED_LEN	4000u

/*
 * The scribbler's library takes what the parent sends, with 8 receives
 * posted ahead (one buffer for all), until the parent says it is done
 * and the ring is empty.  Some may be dropped (a datagram may: its
 * sender's completion came when the engine gave up on a claim we held
 * for long), but our library takes well over a ring's worth itself.
 */
static void take_lap(struct forger_end *e, int down)
{
	bool done = false;
	struct ibv_wc wc;
	int posted;
	char c;

	for (posted = 0; posted < 8; posted++)
		vt_recv(e->qp, (uint64_t)posted, e->mr->addr, 4096, e->mr->lkey);
	if (fcntl(down, F_SETFL, O_NONBLOCK))
		_exit(7);
	while (!done || __atomic_load_n(&e->in.ctl->consumed, __ATOMIC_ACQUIRE) !=
			__atomic_load_n(&e->in.ctl->produced, __ATOMIC_ACQUIRE)) {
		if (ibv_poll_cq(e->cq, 1, &wc) == 1 && (wc.opcode & IBV_WC_RECV))
			vt_recv(e->qp, (uint64_t)posted++, e->mr->addr, 4096,
				e->mr->lkey);
		if (!done && read(down, &c, 1) == 1)
			done = true;
	}
	if (fcntl(down, F_SETFL, 0))
		_exit(7);
}

/*
 * Before the parent may send: hold our receive queue's claim (but to put
 * back) and say where the ring's `produced` stands.  Read later, it may
 * already count the parent's datagram, which would then never seem to
 * come.
 */
static uint32_t hold_ring(struct forger_end *e, enum scribble how)
{
	if (how != SCRIBBLE_BACK)
		__atomic_store_n(&to_ibvc_qp(e->qp)->rq.client->claim,
				 IBVD_WQ_CLAIM_LIBRARY, __ATOMIC_RELEASE);
	return __atomic_load_n(&e->in.ctl->produced, __ATOMIC_ACQUIRE);
}

/*
 * The scribbler, as forger_uid, paired with the parent's UD QP: it holds
 * its own receive queue's claim (as a library stopped mid-copy does), so
 * that nobody takes the parent's datagram (but to put back), tells the
 * parent its QP number, waits for that datagram, and rewrites the
 * parent's ring.
 */
static void scribbler(const struct vt_addr *to, int up, int down, int how)
{
	char c, said[1 + sizeof(uint32_t)] = "q";
	struct forger_end e;
	uint32_t p0, p;
	long until;

	forger_pair(&e, to);
	/* one write: our QP's number comes with the word */
	memcpy(said + 1, &e.qp->qp_num, sizeof(e.qp->qp_num));
	if (how != SCRIBBLE_LAPPED)
		p0 = hold_ring(&e, how);
	if (write(up, said, sizeof(said)) != (ssize_t)sizeof(said))
		_exit(7);
	if (how == SCRIBBLE_LAPPED) {
		take_lap(&e, down);
		p0 = hold_ring(&e, how);
		c = 't';
		if (write(up, &c, 1) != 1)
			_exit(7);
	}
	until = vt_now_ms() + vt_tmo_ms();
	do
		p = __atomic_load_n(&e.in.ctl->produced, __ATOMIC_ACQUIRE);
	while (p == p0 && vt_now_ms() < until);
	if (p == p0)
		_exit(9);
	if (how == SCRIBBLE_HIDE)
		__atomic_store_n(&e.in.ctl->produced, p0, __ATOMIC_RELEASE);
	else if (how == SCRIBBLE_PAST || how == SCRIBBLE_LAPPED)
		__atomic_store_n(&e.in.ctl->consumed, p + 0x1000,
				 __ATOMIC_RELEASE);
	c = 's';
	if (write(up, &c, 1) != 1)
		_exit(7);
	if (how == SCRIBBLE_BACK) {
		if (fcntl(down, F_SETFL, O_NONBLOCK))
			_exit(7);
		while (read(down, &c, 1) != 1)
			__atomic_store_n(&e.in.ctl->consumed, p0,
					 __ATOMIC_RELEASE);
		_exit(0);
	}
	if (read(down, &c, 1) != 1)
		_exit(7);
	_exit(0);
}

/*
 * A UD peer of another uid rewrites the counts of the ring our datagram
 * to it is in.  None may cost us: the engine goes by what our library
 * says it wrote, not by the ring, so it still sees the datagram, gives up
 * on the peer that holds its claim, and our send completes, once; an
 * impossible `consumed` completes nothing before that, nor fires our send
 * CQ: when its event comes, the completion is there; and once the engine
 * took the datagram, a `consumed` moved back does not hide that from us.
 */
static void ud_peer_rewrites(enum scribble how)
{
	struct pollfd pfd = { .events = POLLIN };
	struct ibv_cq *cq;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	struct ud_end u;
	struct child c;
	int fired = 0, i;
	uint32_t qpn;
	void *ctx;
	long end;

	ud_end_open(&u);
	child_start(&c, scribbler, &u.addr, how);
	child_says(c.up, c.pid, u.rcq, false);
	ck_assert_int_eq(read(c.up, &qpn, sizeof(qpn)), (ssize_t)sizeof(qpn));
	ah = vt_ah(&D, u.addr.lid, NULL);
	for (i = 0; how == SCRIBBLE_LAPPED && i < LAPPED_DGRAMS; i++) {
		vt_ud_send(u.qp, 1000 + (uint64_t)i, ah, qpn, 0x80000000u,
			   BUF(u.mr), LAPPED_LEN, u.mr->lkey, IBV_SEND_SIGNALED);
		vt_expect_ok(u.scq, &wc, 1000 + (uint64_t)i, IBV_WC_SEND,
			     "a datagram the peer's library takes");
	}
	if (how == SCRIBBLE_LAPPED) {
		ck_assert_int_eq(write(c.down, "d", 1), 1);
		child_says(c.up, c.pid, NULL, false);
	}
	vt_ud_send(u.qp, 77, ah, qpn, 0x80000000u, BUF(u.mr), 64, u.mr->lkey,
		   IBV_SEND_SIGNALED);
	child_says(c.up, c.pid, NULL, false);
	/* asleep on our send CQ: the event comes with the completion */
	ck_assert_int_eq(ibv_req_notify_cq(u.scq, 0), 0);
	ck_assert_int_eq(fcntl(u.ch->fd, F_SETFL, O_NONBLOCK), 0);
	pfd.fd = u.ch->fd;
	for (end = vt_now_ms() + vt_tmo_ms(); !fired && vt_now_ms() < end;) {
		ck_assert_int_ge(poll(&pfd, 1, 10), 0);
		if (ibv_get_cq_event(u.ch, &cq, &ctx) == 0)
			fired++;
	}
	ck_assert_msg(fired, "no event, and so no completion, for our send");
	ck_assert_msg(ibv_poll_cq(u.scq, 1, &wc) == 1,
		      "an event with no completion behind it");
	ck_assert_uint_eq(wc.wr_id, 77);
	ck_assert_msg(wc.status == IBV_WC_SUCCESS, "our send: %s",
		      ibv_wc_status_str(wc.status));
	ibv_ack_cq_events(u.scq, 1);
	vt_expect_none(u.scq, QUIET_MS, "a second completion of our send");
	child_finish(&c);
	ibv_destroy_ah(ah);
	ud_end_close(&u);
}

/*
 * The squatter, as forger_uid, paired with the parent's UD QP: it holds
 * its receive queue's claim (as a library stopped mid-copy does), then
 * tells the parent its QP number, and keeps the claim until the parent
 * is done, so that what the parent sends stays in the ring: nothing was
 * taken from it meanwhile.  (Claimed after it spoke, preempted between,
 * the engine took the first datagrams, and the ring was full for fewer
 * of the parent's posts than the case means to count.)
 */
static void squatter(const struct vt_addr *to, int up, int down, int unused)
{
	char c, said[1 + sizeof(uint32_t)] = "q";
	struct forger_end e;
	uint32_t taken;

	(void)unused;
	forger_pair(&e, to);
	/* nobody takes what the parent sends: not us, nor the engine */
	__atomic_store_n(&to_ibvc_qp(e.qp)->rq.client->claim,
			 IBVD_WQ_CLAIM_LIBRARY, __ATOMIC_SEQ_CST);
	taken = __atomic_load_n(&e.in.ctl->consumed, __ATOMIC_ACQUIRE);
	memcpy(said + 1, &e.qp->qp_num, sizeof(e.qp->qp_num));
	if (write(up, said, sizeof(said)) != (ssize_t)sizeof(said) ||
	    fcntl(down, F_SETFL, O_NONBLOCK))
		_exit(7);
	while (read(down, &c, 1) != 1)
		vt_sleep_ms(1);
	if (__atomic_load_n(&e.in.ctl->consumed, __ATOMIC_ACQUIRE) != taken)
		_exit(10);
	_exit(0);
}

#define SQUAT_DGRAMS	600
#define SQUAT_LEN	4000u
/*
 * CPU time a post spent: a wait for room spins (about 220 us before it
 * gives up), a post that does not wait takes a few us; the thread's CPU
 * clock leaves out the time it was preempted.
 */
#define SQUAT_SLOW_NS	100000u

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * A UD peer of another uid keeps the ring our datagrams to it go on
 * full: it holds its receive queue's claim, so that neither its library
 * nor the engine takes them.  A post that finds no room waits for some
 * (wait_room), gives up and takes the SQ; after that the next posts take
 * the SQ at once for a while, so that the peer cannot cost every post
 * that wait.  The 256 datagrams that fill the ring go on it, the 344
 * after them find it full: all of them waited before (342 counted), a
 * handful now (one per quiet, which doubles from 1 ms to 100 ms).  The
 * posts that spun are counted by their thread's CPU time, which on a
 * guest whose host is busy also counts the time the host took (up to 34
 * in a CI run): at most a tenth of them may.  Every datagram completes.
 */
START_TEST(ud_peer_keeps_our_ring_full)
{
	uint64_t t0, dt, begin, elapsed_ms;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	struct ud_end u;
	struct child c;
	int i, slow = 0;
	uint32_t qpn;

	ud_end_open(&u);
	child_start(&c, squatter, &u.addr, 0);
	child_says(c.up, c.pid, u.rcq, false);
	ck_assert_int_eq(read(c.up, &qpn, sizeof(qpn)), (ssize_t)sizeof(qpn));
	ah = vt_ah(&D, u.addr.lid, NULL);
	begin = vt_now_ns();
	for (i = 0; i < SQUAT_DGRAMS; i++) {
		t0 = thread_cpu_ns();
		vt_ud_send(u.qp, (uint64_t)i, ah, qpn, 0x80000000u, BUF(u.mr),
			   SQUAT_LEN, u.mr->lkey, IBV_SEND_SIGNALED);
		dt = thread_cpu_ns() - t0;
		slow += dt > SQUAT_SLOW_NS;
		vt_expect_ok(u.scq, &wc, (uint64_t)i, IBV_WC_SEND,
			     "a datagram to the squatter");
	}
	elapsed_ms = (vt_now_ns() - begin) / 1000000u;
	printf("hostile: %d datagrams to a ring kept full in %lu ms, %d posts waited\n",
	       SQUAT_DGRAMS, (unsigned long)elapsed_ms, slow);
	ck_assert_msg(slow <= SQUAT_DGRAMS / 10,
		      "%d of %d posts to a full ring waited in %lu ms",
		      slow, SQUAT_DGRAMS, (unsigned long)elapsed_ms);
	child_finish(&c);
	ibv_destroy_ah(ah);
	ud_end_close(&u);
}
END_TEST

START_TEST(ud_peer_hides_our_datagram)
{
	ud_peer_rewrites(SCRIBBLE_HIDE);
}
END_TEST

START_TEST(ud_peer_takes_too_much)
{
	ud_peer_rewrites(SCRIBBLE_PAST);
}
END_TEST

START_TEST(ud_peer_moves_consumed_back)
{
	ud_peer_rewrites(SCRIBBLE_BACK);
}
END_TEST

START_TEST(ud_peer_takes_too_much_later)
{
	ud_peer_rewrites(SCRIBBLE_LAPPED);
}
END_TEST

/* ---- the suite ------------------------------------------------------------- */

static TCase *new_case(Suite *s, const char *name)
{
	TCase *tc = tcase_create(name);

	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	suite_add_tcase(s, tc);
	return tc;
}

static Suite *direct_suite(void)
{
	Suite *s = suite_create("direct");
	TCase *tc;

	tc = new_case(s, "ring");
	tcase_add_test(tc, sizes);
	tcase_add_test(tc, imm_sgl_inline);
	tcase_add_test(tc, order_with_writes);
	tcase_add_test(tc, late_receives);
	tcase_add_test(tc, uc_no_receive_drops);
	tcase_add_test(tc, send_inv_in_order);
	tcase_add_test(tc, write_imm_sizes);
	tcase_add_test(tc, write_imm_in_order);
	tcase_add_test(tc, write_imm_late_receive);
	tcase_add_test(tc, write_imm_bad_key_waits_for_receive);
	tcase_add_test(tc, write_imm_refused_key);
	tcase_add_test(tc, write_imm_refused_range);
	tcase_add_test(tc, write_imm_refused_mr_access);
	tcase_add_test(tc, write_imm_refused_qp_access);
	tcase_add_test(tc, write_imm_refused_qp_access_empty);
	tcase_add_test(tc, write_imm_window);
	tcase_add_test(tc, write_imm_key_gone_elsewhere);
	tcase_add_test(tc, maps_at_poll);
	tcase_add_test(tc, post_inside_batch);
	tcase_add_test(tc, map_beside_batch);
	tcase_add_test(tc, receiver_never_polls);
	tcase_add_test(tc, events);
	tcase_add_test(tc, event_timing);
	tcase_add_test(tc, one_event_each);
	tcase_add_test(tc, sleeper_fallback);
	tcase_add_test(tc, solicited_arm_error);
	tcase_add_test(tc, sleeper_moves);
	tcase_add_test(tc, poke_for_nothing);
	tcase_add_test(tc, wake_pair_hostile);
	tcase_add_test(tc, wake_pair_one_way);
	tcase_add_test(tc, reset_forgets_placed_completions);
	tcase_add_test(tc, sleeper_after_a_taken_send);
	tcase_add_test(tc, solicited_arm_on_send_cq);
	tcase_add_test(tc, arm_without_wake_pair);
	tcase_add_test(tc, wake_pairs_shared);
	tc = new_case(s, "late");
	tcase_add_test(tc, late_peer);
	tc = new_case(s, "race");
	tcase_add_test(tc, racing_taker);
	tc = new_case(s, "granted");
	tcase_add_test(tc, rdma_granted);
	tcase_add_test(tc, rdma_granted_order);
	tcase_add_test(tc, rdma_grant_of_leased_file);
	tcase_add_test(tc, rdma_revoked_by_dereg);
	tcase_add_test(tc, rdma_revoked_by_rereg);
	tcase_add_test(tc, rdma_target_in_error);
	tcase_add_test(tc, rdma_private_not_granted);
	tcase_add_test(tc, rdma_read_needs_responder_resources);
	tcase_add_test(tc, path_changed_at_sqd);
	tcase_add_test(tc, rdma_grant_not_inherited);
	tcase_add_test(tc, rdma_lease_held_without_grant);
	tcase_add_test(tc, rdma_bound_by_qp_rights);
	tc = new_case(s, "errors");
	tcase_add_test(tc, too_long);
	tcase_add_test(tc, bad_receive_key);
	tcase_add_test(tc, bad_send_key);
	tcase_add_loop_test(tc, send_after_error, 0, 2);
	tcase_add_test(tc, flush);
	tcase_add_test(tc, receiver_gone);
	tcase_add_test(tc, receive_cq_overrun);
	tcase_add_test(tc, peer_killed);
	tcase_add_test(tc, hostile_sender_ring);
	tcase_add_test(tc, hostile_sender_ring_uc);
	tcase_add_test(tc, hostile_sender_ring_ud);
	tcase_add_test(tc, header_before_rings);
	tc = new_case(s, "ud");
	tcase_add_test(tc, ud_sizes);
	tcase_add_test(tc, ud_qkey);
	tcase_add_test(tc, ud_no_receive_drops);
	tcase_add_test(tc, ud_too_long);
	tcase_add_test(tc, ud_third_party);
	tcase_add_test(tc, ud_grh);
	tcase_add_test(tc, ud_pair_again);
	tcase_add_test(tc, library_completions_stamped);
	tcase_add_test(tc, ud_maps_at_poll);
	tcase_add_test(tc, ud_event_of_a_datagram_polled_at_once);
	tcase_add_test(tc, ud_receiver_stopped);
	tcase_add_test(tc, ud_left_after_give_up);
	tc = new_case(s, "srq");
	tcase_add_test(tc, srq_shared);
	tcase_add_test(tc, srq_sleeping_receiver);
	tcase_add_test(tc, srq_resized);
	tcase_add_test(tc, srq_resized_while_streaming);
	tcase_add_test(tc, srq_resized_engine_head_behind);
	tcase_add_test(tc, srq_resize_tail_moving);
	return s;
}

/*
 * A stream that found the ring full comes back to it.  The receiver has
 * no receive posted (and a responder RNR timer of 491 ms, so the engine
 * waits that long before it looks again): the first SENDs fill the ring,
 * the rest wait a moment each for room, then take the SQ.  Then the
 * receiver posts and polls, the sender polls, and the SENDs in the SQ go
 * on the ring after all: direct.sh checks that the engine ran none of
 * them.  Every message is checked, in order.
 */
#define TB_MSGS		100
#define TB_LEN		(16 * 1024)

static int takeback(void)
{
	struct vt_qp_opts o[2] = { { .max_send_wr = 128 },
				   { .max_recv_wr = 128, .min_rnr_timer = 31 } };
	struct ibv_mr *src, *dst;
	struct vt_pair p;
	struct ibv_wc wc;
	int i, sent = 0, got = 0;

	vt_open(&D);
	vt_pair2(&p, &D, &o[0], &o[1], 256);
	vt_assert(vt_transit_maps() > 0, "the pair has no transit rings");
	src = vt_reg(D.pd, (size_t)TB_MSGS * TB_LEN, VT_ACCESS_ALL);
	dst = vt_reg(D.pd, (size_t)TB_MSGS * TB_LEN, VT_ACCESS_ALL);
	vt_fill(BUF(src), (size_t)TB_MSGS * TB_LEN, 0, 77);
	for (i = 0; i < TB_MSGS; i++)
		vt_send(p.qp[0], (uint64_t)i, IBV_WR_SEND, IBV_SEND_SIGNALED,
			BUF(src) + (size_t)i * TB_LEN, TB_LEN, src->lkey, 0, 0);
	/*
	 * Let the engine take the SQ's doorbell first and meet the empty RQ
	 * (then it waits its RNR timer): looking while the receiver's library
	 * held its RQ to post, it would come back in 20 us, find the ring
	 * drained and run the SQ's front itself, which is right but not what
	 * this case is about (seen with the sanitizers' slower libraries).
	 */
	usleep(50 * 1000);
	for (i = 0; i < TB_MSGS; i++)
		vt_recv(p.qp[1], (uint64_t)i, BUF(dst) + (size_t)i * TB_LEN,
			TB_LEN, dst->lkey);
	/* well before the engine's RNR timer: only the libraries move */
	while (sent < TB_MSGS || got < TB_MSGS) {
		if (got < TB_MSGS && ibv_poll_cq(p.rcq[1], 1, &wc) == 1) {
			vt_assert(wc.status == IBV_WC_SUCCESS &&
				  wc.wr_id == (uint64_t)got && wc.byte_len == TB_LEN,
				  "receive %d: status %d wr_id %llu", got, wc.status,
				  (unsigned long long)wc.wr_id);
			got++;
		}
		if (sent < TB_MSGS && ibv_poll_cq(p.scq[0], 1, &wc) == 1) {
			vt_assert(wc.status == IBV_WC_SUCCESS &&
				  wc.wr_id == (uint64_t)sent,
				  "send %d: status %d wr_id %llu", sent, wc.status,
				  (unsigned long long)wc.wr_id);
			sent++;
		}
	}
	vt_expect_pat(BUF(dst), (size_t)TB_MSGS * TB_LEN, 0, 77, "the stream");
	vt_dereg(src);
	vt_dereg(dst);
	vt_pair_free(&p);
	vt_close(&D);
	printf("takeback: %d messages\n", TB_MSGS);
	return 0;
}

/*
 * In a process of its own: a connected pair on D whose QP 0 was granted
 * *t, an MR of GRANTED (a WRITE from *a went through the grant).
 */
static void granted_pair(struct vt_pair *p, struct ibv_mr **a,
			 struct ibv_mr **t)
{
	struct ibv_wc wc;

	vt_open(&D);
	vt_pair(p, &D, NULL, 16);
	*a = vt_reg(D.pd, 4096, VT_ACCESS_ALL);
	*t = vt_reg_memfd(D.pd, 4096, VT_ACCESS_ALL, GRANTED);
	vt_send(p->qp[0], 1, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED,
		BUF(*a), 64, (*a)->lkey, ADDR(*t, 0), (*t)->rkey);
	vt_expect_ok(p->scq[0], &wc, 1, IBV_WC_RDMA_WRITE, "granted WRITE");
	vt_assert(vt_memfd_maps(GRANTED, NULL, NULL) == 2, "no grant was made");
}

/*
 * The library's SIGBUS and SIGSEGV handlers (guard.c) hand on every fault
 * that is not its copy's: after a granted WRITE, this process touches a
 * page of a file it shrank itself (SIGBUS) or a page it protected
 * (SIGSEGV).  With "app" it had a handler of its own first, which must be
 * the one called (it prints and exits 3); without, the process must die
 * of the signal as it would have (direct.sh checks).
 */
static void app_on_fault(int sig)
{
	static const char bus[] = "sigbus: the app's handler\n";
	static const char segv[] = "sigsegv: the app's handler\n";
	const char *msg = sig == SIGBUS ? bus : segv;
	size_t len = sig == SIGBUS ? sizeof(bus) - 1 : sizeof(segv) - 1;

	if (write(STDOUT_FILENO, msg, len) < 0)
		_exit(4);
	_exit(3);
}

/* A one-shot handler (SA_RESETHAND) that returns: the access faults again. */
static void app_once(int sig)
{
	static const char msg[] = "fault: the app's one-shot handler\n";

	(void)sig;
	if (write(STDOUT_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(4);
}

static int fault_elsewhere(int sig, const char *mode)
{
	const char *name = sig == SIGBUS ? "sigbus" : "sigsegv";
	struct ibv_mr *a, *t;
	struct sigaction sa;
	struct vt_pair p;
	volatile uint8_t *page;
	int fd;

	if (strcmp(mode, "app") == 0)
		signal(sig, app_on_fault);
	if (strcmp(mode, "once") == 0) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = app_once;
		sa.sa_flags = SA_RESETHAND;
		sigemptyset(&sa.sa_mask);
		sigaction(sig, &sa, NULL);
	}
	granted_pair(&p, &a, &t);
	fd = memfd_create("ibvd-shrunk", MFD_CLOEXEC);
	vt_assert(fd >= 0 && ftruncate(fd, 4096) == 0, "memfd");
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	vt_assert(page != MAP_FAILED, "mmap");
	if (sig == SIGBUS)
		vt_assert(ftruncate(fd, 0) == 0, "ftruncate");
	else
		vt_assert(mprotect((void *)page, 4096, PROT_NONE) == 0, "mprotect");
	printf("%s: touching\n", name);
	fflush(stdout);
	page[0] = 1;
	printf("%s: survived\n", name);
	return 0;
}

/*
 * direct-helper exit-holding-lease: a process granted its peer's MR (both
 * QPs its own) leaves with both libraries' leases held, as one killed
 * mid-copy would: the daemon tears the context down without waiting for
 * a library that is gone, and serves on (direct.sh).
 */
static int exit_holding_lease(void)
{
	struct ibvd_lease *lease;
	struct ibv_mr *a, *t;
	void *base = NULL;
	struct vt_pair p;

	granted_pair(&p, &a, &t);
	vt_assert(vt_memfd_maps("ibvd-transit", NULL, &base) > 0, "no transit rings");
	lease = (struct ibvd_lease *)((uint8_t *)base + IBVD_TRANSIT_LEASE_OFF);
	__atomic_store_n(&lease[0].in_use, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&lease[1].in_use, 1, __ATOMIC_SEQ_CST);
	printf("exit-holding-lease: leaving with both leases held\n");
	_exit(0);
}

/* Set in_use to v in both leases of every transit file this process maps. */
static int hold_all_leases(uint32_t v)
{
	FILE *f = fopen("/proc/self/maps", "r");
	unsigned long start, off;
	char line[512];
	int n = 0;

	vt_assert(f, "/proc/self/maps: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		struct ibvd_lease *lease;

		if (!strstr(line, "/memfd:ibvd-transit ") ||
		    sscanf(line, "%lx-%*x %*4s %lx", &start, &off) != 2 || off)
			continue;
		lease = (struct ibvd_lease *)(start + IBVD_TRANSIT_LEASE_OFF);
		__atomic_store_n(&lease[0].in_use, v, __ATOMIC_SEQ_CST);
		__atomic_store_n(&lease[1].in_use, v, __ATOMIC_SEQ_CST);
		n++;
	}
	fclose(f);
	return n;
}

/*
 * direct-helper many-leases-held: 8 pairs of one context granted the
 * same MR, every library's lease held, then the MR deregistered: one
 * revocation waits IBVD_LEASE_WAIT_NS in all, not that for each pair
 * (direct.sh counts the daemon's warnings: one).
 */
#define HELD_PAIRS	8

static int many_leases_held(void)
{
	struct vt_pair p[HELD_PAIRS];
	struct ibv_mr *a, *t;
	struct ibv_wc wc;
	unsigned int i;
	long t0;
	int held;

	vt_open(&D);
	a = vt_reg(D.pd, 4096, VT_ACCESS_ALL);
	t = vt_reg_memfd(D.pd, 4096, VT_ACCESS_ALL, GRANTED);
	for (i = 0; i < HELD_PAIRS; i++) {
		vt_pair(&p[i], &D, NULL, 16);
		vt_send(p[i].qp[0], i, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED,
			BUF(a), 64, a->lkey, ADDR(t, 0), t->rkey);
		vt_expect_ok(p[i].scq[0], &wc, i, IBV_WC_RDMA_WRITE, "granted WRITE");
	}
	vt_assert(vt_memfd_maps(GRANTED, NULL, NULL) == 1 + HELD_PAIRS,
		  "%d grants, want %d", vt_memfd_maps(GRANTED, NULL, NULL) - 1,
		  HELD_PAIRS);
	/* each QP's library maps its pair's file: two mappings a pair */
	held = hold_all_leases(1);
	vt_assert(held == 2 * HELD_PAIRS, "%d transit mappings, want %d", held,
		  2 * HELD_PAIRS);
	t0 = vt_now_ms();
	vt_assert(ibv_dereg_mr(t) == 0, "dereg: %s", strerror(errno));
	printf("many-leases-held: %d pairs' leases held, the deregistration took %ld ms\n",
	       HELD_PAIRS, vt_now_ms() - t0);
	hold_all_leases(0);
	for (i = 0; i < HELD_PAIRS; i++)
		vt_pair_free(&p[i]);
	vt_dereg(a);
	vt_close(&D);
	return 0;
}

/*
 * The transit file mapped at offset 0 whose inode is not `skip`: its
 * first mapping's address, and its inode in *ino.
 */
static void *transit_file_other(unsigned long skip, unsigned long *ino)
{
	FILE *f = fopen("/proc/self/maps", "r");
	unsigned long start, off;
	void *found = NULL;
	char line[512];

	vt_assert(f, "/proc/self/maps: %s", strerror(errno));
	while (!found && fgets(line, sizeof(line), f)) {
		if (strstr(line, "/memfd:ibvd-transit ") &&
		    sscanf(line, "%lx-%*x %*4s %lx %*s %lu", &start, &off,
			   ino) == 3 && !off && *ino != skip)
			found = (void *)start;
	}
	fclose(f);
	vt_assert(found, "no transit file but inode %lu", skip);
	return found;
}

/* A library of an honest pair that begins a copy during a revocation. */
struct honest_copy {
	struct ibvd_lease *lease;	/* its pair's two leases */
	uint32_t epoch[2];		/* as granted */
	const uint32_t *held_epoch;	/* the held pair's: its void starts it */
	uint32_t held_was;
	bool begun;
	long end_ms;
};

static void *honest_copier(void *arg)
{
	struct honest_copy *h = arg;
	long give_up = vt_now_ms() + vt_tmo_ms();
	unsigned int i;
	bool valid = false;

	while (__atomic_load_n(h->held_epoch, __ATOMIC_SEQ_CST) == h->held_was &&
	       vt_now_ms() < give_up)
		sched_yield();
	usleep(2000);
	for (i = 0; i < 2; i++)
		__atomic_store_n(&h->lease[i].in_use, 1, __ATOMIC_SEQ_CST);
	for (i = 0; i < 2; i++)
		valid |= __atomic_load_n(&h->lease[i].epoch, __ATOMIC_SEQ_CST) ==
			 h->epoch[i];
	if (valid) {
		/*
		 * Begun before the revocation voided our grant (its control
		 * thread preempted between the voids): a copy that lasts
		 * until the void, and a quarter of the wait longer.  A
		 * revocation that waits for copies in progress waits for it;
		 * one that voided it without a wait has returned before.
		 * (A copy of a fixed 40 ms, longer than the wait, failed
		 * the case whenever it began.)
		 */
		h->begun = true;
		for (i = 0; i < 2; i++)
			while (__atomic_load_n(&h->lease[i].epoch, __ATOMIC_SEQ_CST) ==
			       h->epoch[i] && vt_now_ms() < give_up)
				sched_yield();
		usleep(IBVD_LEASE_WAIT_NS / 4000);
		h->end_ms = vt_now_ms();
	}
	for (i = 0; i < 2; i++)
		__atomic_store_n(&h->lease[i].in_use, 0, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * direct-helper honest-copy-waited: two pairs of one context granted the
 * same MR; the newer pair's libraries hold their leases for ever, and
 * the older pair's library begins a copy under its grant once the
 * deregistration of the MR has begun.  A revocation voids every lease
 * before it waits for any: the copy must not begin, or must end before
 * ibv_dereg_mr returns.  (Voided one after another, the older pair was
 * voided only after the held one's wait, and not waited for at all.)
 */
static int honest_copy_waited(void)
{
	struct vt_pair p[2];
	struct honest_copy h = { 0 };
	struct ibvd_lease *held;
	unsigned long ino_a, ino_b;
	struct ibv_mr *a, *t;
	struct ibv_wc wc;
	pthread_t copier;
	long returned;
	unsigned int i;

	vt_open(&D);
	a = vt_reg(D.pd, 4096, VT_ACCESS_ALL);
	t = vt_reg_memfd(D.pd, 4096, VT_ACCESS_ALL, GRANTED);
	for (i = 0; i < 2; i++) {
		vt_pair(&p[i], &D, NULL, 16);
		vt_send(p[i].qp[0], i, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED,
			BUF(a), 64, a->lkey, ADDR(t, 0), t->rkey);
		vt_expect_ok(p[i].scq[0], &wc, i, IBV_WC_RDMA_WRITE, "granted WRITE");
		if (i == 0)
			h.lease = (struct ibvd_lease *)((uint8_t *)transit_file_other(0, &ino_a) +
							IBVD_TRANSIT_LEASE_OFF);
	}
	held = (struct ibvd_lease *)((uint8_t *)transit_file_other(ino_a, &ino_b) +
				     IBVD_TRANSIT_LEASE_OFF);
	for (i = 0; i < 2; i++) {
		h.epoch[i] = __atomic_load_n(&h.lease[i].epoch, __ATOMIC_SEQ_CST);
		__atomic_store_n(&held[i].in_use, 1, __ATOMIC_SEQ_CST);
	}
	h.held_epoch = &held[0].epoch;
	h.held_was = __atomic_load_n(&held[0].epoch, __ATOMIC_SEQ_CST);
	vt_assert(pthread_create(&copier, NULL, honest_copier, &h) == 0,
		  "pthread_create");
	vt_assert(ibv_dereg_mr(t) == 0, "dereg: %s", strerror(errno));
	returned = vt_now_ms();
	pthread_join(copier, NULL);
	vt_assert(!h.begun || h.end_ms <= returned,
		  "a copy under a revoked grant ended %ld ms after ibv_dereg_mr returned",
		  h.end_ms - returned);
	printf("honest-copy-waited: the copy %s\n",
	       h.begun ? "ended before the deregistration returned" :
			 "found its grant revoked");
	for (i = 0; i < 2; i++)
		__atomic_store_n(&held[i].in_use, 0, __ATOMIC_SEQ_CST);
	for (i = 0; i < 2; i++)
		vt_pair_free(&p[i]);
	vt_dereg(a);
	vt_close(&D);
	return 0;
}

/*
 * direct-helper pair-cap: one uid's 300 RC pairs in one process, sharing
 * one CQ.  A quarter of the daemon's 1024 transit pairs may be one uid's
 * (verbs/rings/direct.c): the first 256 pairs get rings, the rest go
 * through the engine, and each SEND arrives either way.  Two pairs freed
 * give the next new pair its rings.
 */
#define CAP_PAIRS	300
#define CAP_PER_UID	256

static void cap_pair(struct ibv_cq *cq, struct ibv_qp *qp[2])
{
	struct vt_qp_opts o = { .psn = 0x1234 };
	struct vt_addr a[2];
	int i;

	for (i = 0; i < 2; i++) {
		qp[i] = vt_qp(&D, cq, cq, &o);
		vt_qp_addr(&D, qp[i], &o, &a[i]);
	}
	vt_connect(&D, qp[0], &a[1], &o);
	vt_connect(&D, qp[1], &a[0], &o);
}

/* One SEND from qp[0] to qp[1], and both its completions. */
static void cap_send(struct ibv_cq *cq, struct ibv_qp *qp[2], struct ibv_mr *mr,
		     uint64_t n)
{
	struct ibv_wc wc[2];
	int got = 0, k;

	vt_recv(qp[1], n, BUF(mr) + 64, 64, mr->lkey);
	vt_send(qp[0], n, IBV_WR_SEND, IBV_SEND_SIGNALED, BUF(mr), 8, mr->lkey,
		0, 0);
	while (got < 2) {
		k = vt_poll(cq, wc + got, 2 - got, vt_tmo_ms());
		vt_assert(k > 0, "pair %llu: %d of 2 completions",
			  (unsigned long long)n, got);
		got += k;
	}
	for (k = 0; k < 2; k++)
		vt_assert(wc[k].status == IBV_WC_SUCCESS && wc[k].wr_id == n,
			  "pair %llu: %s", (unsigned long long)n,
			  vt_status(wc[k].status));
}

static int pair_cap(void)
{
	static struct ibv_qp *qp[CAP_PAIRS + 1][2];
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	int i, maps, freed, again;

	vt_open(&D);
	cq = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	vt_assert(cq, "ibv_create_cq: %s", strerror(errno));
	mr = vt_reg(D.pd, 4096, VT_ACCESS_ALL);
	for (i = 0; i < CAP_PAIRS; i++) {
		cap_pair(cq, qp[i]);
		cap_send(cq, qp[i], mr, (uint64_t)i);
	}
	/* a pair's file is mapped by one side or both once used */
	maps = vt_transit_maps();
	vt_assert(maps >= CAP_PER_UID && maps <= 2 * CAP_PER_UID,
		  "%d pairs: %d transit mappings, want %d to %d", CAP_PAIRS,
		  maps, CAP_PER_UID, 2 * CAP_PER_UID);
	for (i = 0; i < 2; i++) {
		vt_assert(ibv_destroy_qp(qp[i][0]) == 0 &&
			  ibv_destroy_qp(qp[i][1]) == 0, "destroy: %s",
			  strerror(errno));
	}
	freed = vt_transit_maps();
	cap_pair(cq, qp[CAP_PAIRS]);
	cap_send(cq, qp[CAP_PAIRS], mr, CAP_PAIRS);
	again = vt_transit_maps();
	vt_assert(again > freed, "a new pair after two were freed: %d transit "
		  "mappings, as before it", again);
	printf("pair-cap: %d pairs of one uid, %d transit mappings; "
	       "%d after two pairs went, %d with a new one\n", CAP_PAIRS, maps,
	       freed, again);
	for (i = 2; i <= CAP_PAIRS; i++)
		vt_assert(ibv_destroy_qp(qp[i][0]) == 0 &&
			  ibv_destroy_qp(qp[i][1]) == 0, "destroy: %s",
			  strerror(errno));
	vt_assert(ibv_destroy_cq(cq) == 0, "destroy CQ");
	vt_dereg(mr);
	vt_close(&D);
	return 0;
}

/*
 * direct-helper root OTHER_UID, as root: what needs root, and what keeps
 * its uid from grants for a while (after the main suite, which needs
 * them).
 */
static Suite *root_suite(void)
{
	Suite *s = suite_create("direct-root");
	TCase *tc = new_case(s, "root");

	tcase_add_test(tc, ud_controlled_qkey_forged);
	tcase_add_test(tc, ud_peer_wakes_nothing);
	tcase_add_test(tc, ud_peer_hides_our_datagram);
	tcase_add_test(tc, ud_peer_takes_too_much);
	tcase_add_test(tc, ud_peer_moves_consumed_back);
	tcase_add_test(tc, ud_peer_keeps_our_ring_full);
	tcase_add_test(tc, ud_peer_takes_too_much_later);
	tcase_add_test(tc, rdma_lease_held);
	tcase_add_test(tc, rdma_lease_offender_elsewhere);
	return s;
}

int main(int argc, char **argv)
{
	Suite *suite;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && strcmp(argv[1], "pingpong") == 0)
		return pingpong(strtoul(argv[2], NULL, 0));
	if (argc == 2 && strcmp(argv[1], "takeback") == 0)
		return takeback();
	if (argc >= 3 && argc <= 5 && strcmp(argv[1], "stream") == 0)
		return direct_stream((unsigned int)strtoul(argv[2], NULL, 0),
				     argc >= 4 ? (uint32_t)strtoul(argv[3], NULL, 0)
					       : (uint32_t)getpid(),
				     argc >= 5 ? (unsigned int)strtoul(argv[4], NULL, 0)
					       : 2);
	if (argc == 3 && strcmp(argv[1], "sigbus") == 0)
		return fault_elsewhere(SIGBUS, argv[2]);
	if (argc == 3 && strcmp(argv[1], "sigsegv") == 0)
		return fault_elsewhere(SIGSEGV, argv[2]);
	if (argc == 2 && strcmp(argv[1], "exit-holding-lease") == 0)
		return exit_holding_lease();
	if (argc == 2 && strcmp(argv[1], "pair-cap") == 0)
		return pair_cap();
	if (argc == 2 && strcmp(argv[1], "honest-copy-waited") == 0)
		return honest_copy_waited();
	if (argc == 2 && strcmp(argv[1], "many-leases-held") == 0)
		return many_leases_held();
	if (argc == 3 && strcmp(argv[1], "root") == 0) {
		forger_uid = (uid_t)strtoul(argv[2], NULL, 0);
		suite = root_suite();
	} else if (argc == 1) {
		suite = direct_suite();
	} else {
		fprintf(stderr, "usage: direct-helper [pingpong N | takeback | stream SECONDS [SEED [FLOWS]] | sigbus app|default | exit-holding-lease | many-leases-held | honest-copy-waited | root OTHER_UID]\n");
		return 2;
	}
	return check_run(suite, CK_VERBOSE);
}
