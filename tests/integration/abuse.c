/*
 * abuse-helper: a client that abuses its own objects' shared memory, or
 * its objects, against a real daemon (abuse.sh, which runs it with two
 * engine threads and rlimit_memlock "ignore", for 64 MiB messages).  Only
 * its own work may fail.  Each mode prints one line "MODE: ..." and exits
 * 0, or fails with a message; the daemon must still answer afterwards
 * (most modes end with a query through it).
 *
 *   abuse-helper tgt-sq err|rts
 *	A target QP sends nothing and has no send CQ; its creator writes a
 *	SEND into its one-slot SQ and moves it to ERR (a flush) or to RTS
 *	(a pass).  Nothing may complete anywhere.
 *   abuse-helper srq-gone
 *	A 64 MiB XRC SEND is under way (its first chunk landed) when the
 *	SRQ it consumed a WQE of is destroyed: the SEND fails, nothing
 *	lands on a CQ that went.
 *   abuse-helper srqn-rewrite
 *	The same SEND's WQE, after its first chunk, is rewritten in the SQ
 *	to name another SRQ: the SEND fails with LOC_QP_OP_ERR, the other
 *	SRQ's CQ gets nothing.
 *   abuse-helper opener-closes
 *	A target in ERR waits for its SQ claim, which its creator holds
 *	(in its own shared memory), on its context's engine thread; a second
 *	context, on the other thread, opened it and closes.
 *   abuse-helper srq-claim
 *	An RC receiver on an SRQ holds the SRQ's claim word for ever (as a
 *	library stopped mid-copy would): its peer's SEND, with retry_cnt 0
 *	and rnr_retry 0, fails with RETRY_EXC_ERR after its ACK timeout
 *	instead of waiting for ever.  A control run without the claim
 *	fails with RNR_RETRY_EXC_ERR (the SRQ is empty).
 *   abuse-helper ud-claim
 *	A UD receiver holds its RQ's claim under a flood (ud_claim()).
 *   abuse-helper cq-head-lie
 *	An impossible CQ head, then a resize (cq_head_lie()).
 *   abuse-helper cq-head-reset
 *	Two QPs on a CQ of 2 Mi entries: a RESET of one purges its CQEs and
 *	leaves the other's; then, its head said to be a lap back, 50 RESETs
 *	(abuse.sh counts the slots they look at: purge_slots).
 *   abuse-helper cq-span-xrc
 *	An XRC target's receive CQ changes with the SRQ each message names:
 *	its CQEs in one CQ, then another, whose head is put back; its RESET
 *	looks at that CQ's slots only (abuse.sh counts them: purge_slots).
 *   abuse-helper cq-head-teardown
 *	A child makes 4,000 QPs on a CQ of 2 Mi entries, says its head is a
 *	whole CQ behind its tail, and exits: the context's teardown is
 *	quick, for another context of ours made after (cq_head_teardown()).
 *   abuse-helper ud-claim-brief
 *	A UD receiver holds its RQ's claim 2 ms at a time, as one
 *	preempted mid-copy does: no datagram is lost (ud_claim_brief()).
 *   abuse-helper ud-claim-park
 *	While a UD receiver holds its claim, its sender's datagrams to it
 *	and to another QP all complete, and the held ones land, in order,
 *	once it lets go (ud_claim_park(); abuse.sh counts the engine's
 *	waits and parked datagrams).
 *   abuse-helper ud-park-reset
 *	Datagrams parked for a QP that is then reset never land in it
 *	(ud_park_reset()).
 *   abuse-helper ud-forged-sl
 *	A sender's AH forged to SL 0xAB: the receiver's completions, by
 *	the engine and by the transit ring, say an SL of 0 to 15.
 *   abuse-helper ud-park-share
 *	Five contexts of one uid, each with a receiver holding its claim
 *	and 256 datagrams sent to it at once: they share one account's part
 *	of each engine thread's park (ud_park_share(); abuse.sh counts the
 *	datagrams parked).
 *   abuse-helper ud-park-mcast
 *	A group's datagram to a QP with datagrams parked lands after them
 *	(ud_park_mcast()).
 *   abuse-helper full-sq-destroy
 *	16,384 RDMA WRITEs of 128 KiB (2 GiB) written into an RC QP's SQ
 *	without a doorbell, then the QP destroyed: what the destroy still
 *	runs, on the control thread with every tenant waiting, is bounded
 *	(abuse.sh counts the engine's bytes).
 *   abuse-helper full-sq-exit
 *	160 RC QPs with 256 RDMA WRITEs of 128 KiB (32 MiB) each in their
 *	SQs without a doorbell, and one more with a WRITE of 8 bytes, then
 *	the process exits: what its context's teardown still runs is
 *	bounded for the context, not for each QP (abuse.sh counts the
 *	engine's bytes), and the small WRITE lands all the same
 *	(full_sq_exit()).
 *   abuse-helper full-sq-exit-long
 *	The same with a single WRITE of 1 MiB in each of the 160 SQs: the
 *	small WRITE, as alone in its queue as each of them, still lands.
 *   abuse-helper full-direct-exit
 *	48 direct pairs, each with its transit ring full of 64 KiB SENDs
 *	(960 KiB) towards a child that posted receives for them and never
 *	polls, and one more on which the child sends 8 bytes, then the child
 *	exits: its context's teardown takes 16 MiB of the rings in all, not
 *	each ring whole (abuse.sh counts the engine's direct_bytes; the
 *	parent counts its SENDs taken, the rest failing as to a QP that
 *	went), and the 8 bytes land all the same (full_direct_exit()).
 *   abuse-helper full-direct-exit-held
 *	The same with the child holding the claims of its 48 receive queues
 *	when it exits, as a library that dies mid-copy leaves them: each
 *	costs its QP a turn of the budget a round, and nothing is taken
 *	from the rings; the teardown ends (its turns are bounded), the 8
 *	bytes land, the parent's SENDs all fail.
 *   abuse-helper srq-forged-claim
 *	UD QPs on an SRQ whose claim word the client set to ENGINE, flooded
 *	(srq_forged_claim()).
 *   abuse-helper mcast-fanout [paced]
 *	Datagrams to a group of 32 QPs count 32 times in the sender's turn
 *	(mcast_fanout()), and in the tenant's bandwidth (abuse.sh sets a
 *	limit for "paced" and reads how long they took).
 *   abuse-helper mcast-claims
 *	The same group, each member on an SRQ of its own whose claim word
 *	the client holds for ever: every copy finds a busy claim, and the
 *	engine may wait for one such claim a pass, not for each (abuse.sh
 *	compares the sending thread's claim_timeouts with its passes).
 *   abuse-helper mcast-srq
 *	200 datagrams to a group of two UD QPs on one SRQ: each member
 *	receives every one (mcast_srq()).
 *   abuse-helper mcast-contend
 *	Two contexts multicast 3,000 datagrams each at once to a group of
 *	two plain UD QPs: both receive all 6,000 (mcast_contend()).
 *   abuse-helper err-flush
 *	A QP in error, its SQ filled with 4,096 WQEs at once (err_flush()).
 *   abuse-helper kick-jam
 *	A child makes its context's kick eventfd (one open file, whose
 *	flags it shares with the daemon) blocking with a full counter, then
 *	moves its QP to ERR and back while the engine sleeps: each move
 *	rings the QP's doorbell.  The daemon answers every move, and
 *	another context of ours meanwhile (kick_jam()).
 *   abuse-helper overlap
 *	An RDMA WRITE of 64 KiB within one memfd MR (which the daemon maps)
 *	onto itself 100 bytes further: the bytes land as memmove's would.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "ibvd_verbs.h"
#include "vt.h"

#define LEN	(64u << 20)

static struct ibv_xrcd *xrcd_of(struct vt_dev *d, int fd)
{
	struct ibv_xrcd_init_attr a = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = fd,
		.oflags = O_CREAT,
	};
	struct ibv_xrcd *x = ibv_open_xrcd(d->ctx, &a);

	vt_assert(x, "ibv_open_xrcd: %s", strerror(errno));
	return x;
}

static struct ibv_qp *target_of(struct vt_dev *d, struct ibv_xrcd *x)
{
	struct ibv_qp_init_attr_ex a = {
		.qp_type = IBV_QPT_XRC_RECV,
		.comp_mask = IBV_QP_INIT_ATTR_XRCD,
		.xrcd = x,
	};
	struct ibv_qp *qp = ibv_create_qp_ex(d->ctx, &a);

	vt_assert(qp, "target: %s", strerror(errno));
	return qp;
}

/* A new target to ERR, through INIT: RESET->ERR is no transition. */
static void target_err(struct ibv_qp *tgt)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_INIT, .port_num = 1 };

	vt_assert(!ibv_modify_qp(tgt, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				 IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
		  "target INIT: %s", strerror(errno));
	attr.qp_state = IBV_QPS_ERR;
	vt_assert(!ibv_modify_qp(tgt, &attr, IBV_QP_STATE), "target ERR: %s",
		  strerror(errno));
}

static struct ibv_srq *srq_of(struct vt_dev *d, struct ibv_xrcd *x,
			      struct ibv_cq *cq, uint32_t *num)
{
	struct ibv_srq_init_attr_ex a = {
		.attr = { .max_wr = 4, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			     IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ,
		.srq_type = IBV_SRQT_XRC,
		.pd = d->pd,
		.xrcd = x,
		.cq = cq,
	};
	struct ibv_srq *srq = ibv_create_srq_ex(d->ctx, &a);

	vt_assert(srq && !ibv_get_srq_num(srq, num), "XRC SRQ: %s",
		  strerror(errno));
	return srq;
}

/* tgt to RTR and ini to RTS, connected to each other. */
static void connect_xrc(struct vt_dev *d, struct ibv_qp *ini,
			struct ibv_qp *tgt)
{
	struct ibv_qp_attr init = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	struct ibv_qp_attr rtr = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_4096,
		.max_dest_rd_atomic = 1, .min_rnr_timer = 1,
		.ah_attr = { .dlid = d->port.lid, .port_num = 1 },
	};
	struct ibv_qp_attr rts = {
		.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 3,
		.rnr_retry = 3, .max_rd_atomic = 1,
	};
	int im = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		 IBV_QP_ACCESS_FLAGS;
	int rm = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	int sm = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		 IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;

	vt_assert(!ibv_modify_qp(tgt, &init, im), "target INIT");
	rtr.dest_qp_num = ini->qp_num;
	vt_assert(!ibv_modify_qp(tgt, &rtr, rm), "target RTR");
	vt_assert(!ibv_modify_qp(ini, &init, im), "initiator INIT");
	rtr.dest_qp_num = tgt->qp_num;
	vt_assert(!ibv_modify_qp(ini, &rtr, rm), "initiator RTR");
	vt_assert(!ibv_modify_qp(ini, &rts, sm), "initiator RTS");
}

static const char *const state_names[] = {
	"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR",
};

/* The daemon still answers: a query of qp through it. */
static const char *still_answers(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;

	vt_assert(!ibv_query_qp(qp, &attr, IBV_QP_STATE, &init),
		  "ibv_query_qp after the abuse: %s", strerror(errno));
	return attr.qp_state <= IBV_QPS_ERR ? state_names[attr.qp_state] : "?";
}

static int tgt_sq(const char *how)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
	struct ibvd_send_wqe *w;
	struct ibv_xrcd *x;
	struct ibv_qp *tgt;
	struct ibv_cq *cq;
	struct vt_dev d;
	struct ibvc_qp *q;

	vt_open(&d);
	cq = ibv_create_cq(d.ctx, 8, NULL, NULL, 0);
	vt_assert(cq, "CQ: %s", strerror(errno));
	x = xrcd_of(&d, -1);
	tgt = target_of(&d, x);
	q = (struct ibvc_qp *)tgt;
	w = (struct ibvd_send_wqe *)q->sq.slots;
	memset(w, 0, sizeof(*w));
	w->wr_id = 0x1234;
	w->opcode = IBV_WR_SEND;
	w->send_flags = IBV_SEND_SIGNALED;
	__atomic_store_n(&q->sq.client->tail, 1, __ATOMIC_RELEASE);
	if (!strcmp(how, "rts")) {
		struct ibv_qp *ini;
		struct ibv_qp_init_attr_ex a = {
			.send_cq = cq, .recv_cq = cq,
			.cap = { .max_send_wr = 4, .max_send_sge = 1 },
			.qp_type = IBV_QPT_XRC_SEND,
			.comp_mask = IBV_QP_INIT_ATTR_PD, .pd = d.pd,
		};

		ini = ibv_create_qp_ex(d.ctx, &a);
		vt_assert(ini, "initiator: %s", strerror(errno));
		connect_xrc(&d, ini, tgt);
		attr.qp_state = IBV_QPS_RTS;
		attr.timeout = 14;
		vt_assert(!ibv_modify_qp(tgt, &attr, IBV_QP_STATE |
					 IBV_QP_TIMEOUT | IBV_QP_SQ_PSN),
			  "target RTS: %s", strerror(errno));
	} else {
		target_err(tgt);
	}
	vt_sleep_ms(300);
	vt_expect_none(cq, 100, "the device CQ after the target's SQ was written");
	printf("tgt-sq %s: target %s, nothing completed\n", how,
	       still_answers(tgt));
	return 0;
}

struct big_send {
	struct vt_dev d;
	struct ibv_xrcd *x;
	struct ibv_cq *scq, *cq_a, *cq_b;
	struct ibv_srq *a, *b;
	uint32_t num_a, num_b;
	struct ibv_qp *ini, *tgt;
	struct ibv_mr *src, *dst;
};

/* A 64 MiB SEND from ini into SRQ a's WQE, until its first chunk landed. */
static void big_send_start(struct big_send *s)
{
	struct ibv_qp_init_attr_ex a = {
		.cap = { .max_send_wr = 4, .max_send_sge = 1 },
		.qp_type = IBV_QPT_XRC_SEND,
		.comp_mask = IBV_QP_INIT_ATTR_PD,
	};
	struct ibv_sge sge;
	struct ibv_send_wr wr = {
		.wr_id = 1, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	volatile uint8_t *landed;
	long t0;

	vt_open(&s->d);
	s->x = xrcd_of(&s->d, -1);
	s->cq_a = ibv_create_cq(s->d.ctx, 8, NULL, NULL, 0);
	s->cq_b = ibv_create_cq(s->d.ctx, 8, NULL, NULL, 0);
	s->scq = ibv_create_cq(s->d.ctx, 8, NULL, NULL, 0);
	vt_assert(s->cq_a && s->cq_b && s->scq, "CQs: %s", strerror(errno));
	s->a = srq_of(&s->d, s->x, s->cq_a, &s->num_a);
	s->b = srq_of(&s->d, s->x, s->cq_b, &s->num_b);
	s->tgt = target_of(&s->d, s->x);
	a.send_cq = a.recv_cq = s->scq;
	a.pd = s->d.pd;
	s->ini = ibv_create_qp_ex(s->d.ctx, &a);
	vt_assert(s->ini, "initiator: %s", strerror(errno));
	connect_xrc(&s->d, s->ini, s->tgt);
	s->src = vt_reg(s->d.pd, LEN, VT_ACCESS_ALL);
	s->dst = vt_reg(s->d.pd, LEN, VT_ACCESS_ALL);
	memset(s->src->addr, 0x5a, LEN);
	memset(s->dst->addr, 0, LEN);
	vt_srq_recv(s->a, 0xaaaa, s->dst->addr, LEN, s->dst->lkey);
	sge = (struct ibv_sge){ (uintptr_t)s->src->addr, LEN, s->src->lkey };
	wr.qp_type.xrc.remote_srqn = s->num_a;
	vt_assert(!ibv_post_send(s->ini, &wr, &bad), "post_send: %s",
		  strerror(errno));
	landed = s->dst->addr;
	t0 = vt_now_ms();
	while (!landed[0])
		vt_assert(vt_now_ms() - t0 < vt_tmo_ms(),
			  "the SEND's first chunk never landed");
	vt_assert(!landed[LEN - 1], "the whole 64 MiB landed before we looked");
}

/* The SEND's completion: it must have failed. */
static int big_send_failed(struct big_send *s)
{
	struct ibv_wc wc;

	vt_assert(vt_poll(s->scq, &wc, 1, vt_tmo_ms()) == 1,
		  "no completion for the SEND");
	vt_assert(wc.wr_id == 1 && wc.status != IBV_WC_SUCCESS,
		  "the SEND: wr_id %#llx %s, want a failure",
		  (unsigned long long)wc.wr_id, vt_status(wc.status));
	return wc.status;
}

static int srq_gone(void)
{
	struct big_send s;
	int st;

	big_send_start(&s);
	vt_assert(!ibv_destroy_srq(s.a), "destroy SRQ: %s", strerror(errno));
	st = big_send_failed(&s);
	vt_expect_none(s.cq_a, 100, "the CQ of the SRQ that went");
	printf("srq-gone: the SEND failed with %s; target %s\n", vt_status(st),
	       still_answers(s.tgt));
	return 0;
}

static int srqn_rewrite(void)
{
	struct ibvd_send_wqe *slot;
	struct ibv_wc wc;
	struct big_send s;
	int st;

	big_send_start(&s);
	slot = (struct ibvd_send_wqe *)((struct ibvc_qp *)s.ini)->sq.slots;
	__atomic_store_n(&slot->xrc_srqn, s.num_b, __ATOMIC_RELAXED);
	st = big_send_failed(&s);
	vt_assert(st == IBV_WC_LOC_QP_OP_ERR, "the SEND failed with %s, want %s",
		  vt_status(st), vt_status(IBV_WC_LOC_QP_OP_ERR));
	vt_expect_none(s.cq_b, 100, "the CQ of the SRQ named afterwards");
	/* A's WQE: the message it took was cut short */
	vt_assert(vt_poll(s.cq_a, &wc, 1, vt_tmo_ms()) == 1 &&
		  wc.wr_id == 0xaaaa && wc.status != IBV_WC_SUCCESS,
		  "SRQ A's receive did not fail");
	printf("srqn-rewrite: the SEND failed with %s, A's receive with %s, B's CQ empty; target %s\n",
	       vt_status(st), vt_status(wc.status), still_answers(s.tgt));
	return 0;
}

static int opener_closes(void)
{
	struct ibv_qp_open_attr oa = {
		.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
			     IBV_QP_OPEN_ATTR_TYPE,
		.qp_type = IBV_QPT_XRC_RECV,
	};
	struct ibv_qp *tgt, *opened;
	struct vt_dev c1, c2;
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/tmp/abuse-helper-%d", (int)getpid());
	fd = open(path, O_RDONLY | O_CREAT, 0444);
	vt_assert(fd >= 0, "%s: %s", path, strerror(errno));
	unlink(path);
	vt_open(&c1);
	vt_open(&c2);
	tgt = target_of(&c1, xrcd_of(&c1, fd));
	oa.xrcd = xrcd_of(&c2, fd);
	oa.qp_num = tgt->qp_num;
	opened = ibv_open_qp(c2.ctx, &oa);
	vt_assert(opened, "ibv_open_qp: %s", strerror(errno));
	/* the SQ claim lives in c1's own shared memory */
	__atomic_store_n(&((struct ibvc_qp *)tgt)->sq.client->claim,
			 IBVD_WQ_CLAIM_LIBRARY, __ATOMIC_RELEASE);
	target_err(tgt);
	vt_sleep_ms(200);
	vt_close(&c2);
	vt_sleep_ms(200);
	printf("opener-closes: target %s\n", still_answers(tgt));
	return 0;
}

/* One SEND to an RC QP on an empty SRQ: its status and how long it took. */
static int send_to_srq(bool hold_claim, long *ms)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct vt_qp_opts o[2];
	struct ibv_qp *qp[2];
	struct ibv_cq *cq[2];
	struct vt_addr a[2];
	struct ibv_srq *srq;
	struct vt_dev d[2];
	struct ibv_mr *mr;
	struct ibv_wc wc;
	long t0;
	int i;

	for (i = 0; i < 2; i++) {
		vt_open(&d[i]);
		cq[i] = ibv_create_cq(d[i].ctx, 8, NULL, NULL, 0);
		vt_assert(cq[i], "CQ: %s", strerror(errno));
		memset(&o[i], 0, sizeof(o[i]));
		o[i].rnr_retry = VT_ZERO;
		o[i].retry_cnt = VT_ZERO;
		o[i].timeout = 14;	/* 67 ms */
	}
	srq = ibv_create_srq(d[1].pd, &sa);
	vt_assert(srq, "SRQ: %s", strerror(errno));
	o[1].srq = srq;
	for (i = 0; i < 2; i++) {
		qp[i] = vt_qp(&d[i], cq[i], cq[i], &o[i]);
		vt_qp_addr(&d[i], qp[i], &o[i], &a[i]);
	}
	for (i = 0; i < 2; i++)
		vt_connect(&d[i], qp[i], &a[1 - i], &o[i]);
	if (hold_claim)
		__atomic_store_n(&to_ibvc_srq(srq)->rq.client->claim,
				 IBVD_WQ_CLAIM_LIBRARY, __ATOMIC_RELEASE);
	mr = vt_reg(d[0].pd, 4096, VT_ACCESS_ALL);
	t0 = vt_now_ms();
	vt_send(qp[0], 1, IBV_WR_SEND, IBV_SEND_SIGNALED, mr->addr, 64,
		mr->lkey, 0, 0);
	vt_assert(vt_poll(cq[0], &wc, 1, vt_tmo_ms()) == 1,
		  "%s: no completion for the SEND", hold_claim ? "claim held" : "control");
	*ms = vt_now_ms() - t0;
	/* the objects go with the process */
	return wc.status;
}

static int srq_claim(void)
{
	long ms_control, ms_held;
	int control = send_to_srq(false, &ms_control);
	int held = send_to_srq(true, &ms_held);

	vt_assert(control == IBV_WC_RNR_RETRY_EXC_ERR,
		  "control: %s, want %s", vt_status(control),
		  vt_status(IBV_WC_RNR_RETRY_EXC_ERR));
	vt_assert(held == IBV_WC_RETRY_EXC_ERR, "claim held: %s, want %s",
		  vt_status(held), vt_status(IBV_WC_RETRY_EXC_ERR));
	printf("srq-claim: control %s after %ld ms; claim held: %s after %ld ms\n",
	       vt_status(control), ms_control, vt_status(held), ms_held);
	return 0;
}

/* Datagrams the ud-claim abuser floods its own claimed QP with. */
#define FLOOD_DGRAMS	8192
#define FLOOD_BATCH	64

/*
 * A UD receiver that holds its RQ's claim for ever (Y, paired with X on
 * rings) while a third QP (Z, through the engine: Y has its pair) floods
 * it: every datagram to Y is dropped and every send completes.  The
 * engine must not wait out the claim for each one (50 us of an engine
 * thread each, which other tenants share); abuse.sh counts its waits
 * (claim_timeouts).
 */
/*
 * Three UD QPs of one context: X paired with Y on transit rings (so Y's
 * RQ has a claim its library takes), and Z, whose datagrams to Y go
 * through the engine (Y has its pair).  Y's CQ is cq, Z's zcq.
 */
struct ud_trio {
	struct vt_dev d;
	struct ibv_qp *x, *y, *z;
	struct ibv_cq *cq, *zcq;
	struct ibv_ah *ah;
	struct ibv_mr *mr;
};

static void ud_trio(struct ud_trio *t, uint32_t max_recv_wr, uint32_t mr_len)
{
	struct vt_qp_opts o = { .type = IBV_QPT_UD, .max_send_wr = 256,
				.max_recv_wr = max_recv_wr };
	struct ibv_wc wc;
	int i, maps;

	vt_open(&t->d);
	t->cq = ibv_create_cq(t->d.ctx, (int)max_recv_wr + 64, NULL, NULL, 0);
	t->zcq = ibv_create_cq(t->d.ctx, 512, NULL, NULL, 0);
	vt_assert(t->cq && t->zcq, "CQ: %s", strerror(errno));
	t->x = vt_qp(&t->d, t->cq, t->cq, &o);
	t->y = vt_qp(&t->d, t->cq, t->cq, &o);
	t->z = vt_qp(&t->d, t->zcq, t->zcq, &o);
	vt_connect(&t->d, t->x, NULL, &o);
	vt_connect(&t->d, t->y, NULL, &o);
	vt_connect(&t->d, t->z, NULL, &o);
	t->mr = vt_reg(t->d.pd, mr_len, VT_ACCESS_ALL);
	t->ah = vt_ah(&t->d, t->d.port.lid, NULL);
	/* X's first datagram pairs it with Y; wait until the rings are there */
	for (i = 0, maps = vt_transit_maps(); vt_transit_maps() == maps; i++) {
		vt_assert(i < 100, "X and Y got no transit rings");
		vt_recv(t->y, 1, t->mr->addr, 4096, t->mr->lkey);
		vt_ud_send(t->x, 1, t->ah, t->y->qp_num, VT_QKEY, t->mr->addr, 8,
			   t->mr->lkey, IBV_SEND_SIGNALED);
		vt_sleep_ms(10);
		while (ibv_poll_cq(t->cq, 1, &wc) == 1)
			;
	}
}

static int ud_claim(void)
{
	struct ibv_wc wc[FLOOD_BATCH];
	unsigned long sent = 0, done = 0;
	struct ud_trio t;
	int i, n;

	ud_trio(&t, 64, 4096);
	vt_recv(t.y, 2, t.mr->addr, 4096, t.mr->lkey);
	__atomic_store_n(&to_ibvc_qp(t.y)->rq.client->claim, IBVD_WQ_CLAIM_LIBRARY,
			 __ATOMIC_RELEASE);
	while (done < FLOOD_DGRAMS) {
		for (i = 0; i < FLOOD_BATCH && sent < FLOOD_DGRAMS &&
			    sent - done < 256; i++, sent++)
			vt_ud_send(t.z, sent, t.ah, t.y->qp_num, VT_QKEY,
				   t.mr->addr, 8, t.mr->lkey, IBV_SEND_SIGNALED);
		n = vt_poll(t.zcq, wc, FLOOD_BATCH, vt_tmo_ms());
		vt_assert(n > 0, "Z: no completion after %lu of %d datagrams",
			  done, FLOOD_DGRAMS);
		for (i = 0; i < n; i++)
			vt_assert(wc[i].status == IBV_WC_SUCCESS,
				  "Z's datagram %lu: %s", (unsigned long)wc[i].wr_id,
				  vt_status(wc[i].status));
		done += (unsigned long)n;
	}
	vt_assert(ibv_poll_cq(t.cq, 1, wc) == 0, "Y received with its claim held");
	printf("ud-claim: %d datagrams to a QP holding its claim, all sent\n",
	       FLOOD_DGRAMS);
	/* the objects go with the process */
	return 0;
}

/*
 * Y's library takes its claim for a few milliseconds at a time (as one
 * preempted mid-copy holds it) while Z sends it a burst of datagrams
 * through the engine, then lets it go.  Y has a receive posted for each
 * datagram, so none may be lost: those that find the claim held wait for
 * it, parked in the engine.  Each carries its number, and Y must get them
 * all, in order.
 */
#define BRIEF_ROUNDS	32u
#define BRIEF_BURST	64u
#define BRIEF_SLOT	64u		/* GRH (40) and the 8-byte number */
#define BRIEF_HOLD_MS	2
#define BRIEF_STRICT_MS	3	/* held no longer: nothing may be lost */
/*
 * Y's receive buffers, after the 4 KiB the pairing's receives used (one
 * may still be posted: wr_id 1, at the MR's start); then Z's numbers.
 */
#define BRIEF_FIRST_WR	16u

static char *brief_slot(struct ud_trio *t, uint64_t wr_id)
{
	if (wr_id < BRIEF_FIRST_WR)
		return t->mr->addr;
	return (char *)t->mr->addr + 4096 + (wr_id - BRIEF_FIRST_WR) * BRIEF_SLOT;
}

static void brief_recv(struct ud_trio *t, uint64_t wr_id)
{
	vt_recv(t->y, wr_id, brief_slot(t, wr_id), BRIEF_SLOT, t->mr->lkey);
}

/*
 * Until Y has `want` datagrams; each must be the next number.  Lenient
 * (the claim was held past what a datagram waits, on a loaded machine):
 * numbers may be missing, in order still, and what came within 200 ms of
 * quiet is all.
 */
static void brief_receive(struct ud_trio *t, unsigned long *got,
			  unsigned long want, bool lenient)
{
	struct ibv_wc wc[BRIEF_BURST];
	uint64_t number;
	long t0 = vt_now_ms();
	int i, n;

	while (*got < want) {
		n = ibv_poll_cq(t->cq, BRIEF_BURST, wc);
		vt_assert(n >= 0, "Y's CQ: %d", n);
		if (n == 0 && lenient && vt_now_ms() - t0 > 200)
			break;
		vt_assert(n > 0 || vt_now_ms() - t0 < vt_tmo_ms(),
			  "Y got %lu of %lu datagrams: the others were lost",
			  *got, want);
		if (n > 0)
			t0 = vt_now_ms();
		for (i = 0; i < n; i++, (*got)++) {
			vt_assert(wc[i].status == IBV_WC_SUCCESS,
				  "Y's receive %lu: %s", *got,
				  vt_status(wc[i].status));
			memcpy(&number, brief_slot(t, wc[i].wr_id) + 40,
			       sizeof(number));
			vt_assert(number == *got || (lenient && number > *got &&
						     number < want),
				  "Y got datagram %llu as its %lu-th",
				  (unsigned long long)number, *got);
			*got = number;
			if (wc[i].wr_id >= BRIEF_FIRST_WR)
				brief_recv(t, wc[i].wr_id);
		}
	}
	*got = want;
}

/* Z's datagrams up to sent complete, the first `early` of them in wc. */
static void brief_sent(struct ud_trio *t, unsigned long *done,
		       unsigned long sent, struct ibv_wc *wc, int early)
{
	int i, n;

	for (n = early; *done + (unsigned long)n < sent; n += i) {
		i = vt_poll(t->zcq, wc + n, (int)(sent - *done) - n, vt_tmo_ms());
		vt_assert(i > 0, "Z: %lu of %lu datagrams completed",
			  *done + (unsigned long)n, sent);
	}
	for (i = 0; i < n; i++)
		vt_assert(wc[i].status == IBV_WC_SUCCESS, "Z's datagram %lu: %s",
			  (unsigned long)wc[i].wr_id, vt_status(wc[i].status));
	*done += (unsigned long)n;
}

/*
 * A datagram that waited out its bound leaves Y's queue held out: until
 * one finds Y's claim free, those that find it busy are dropped at once
 * (recv.c), the next burst's too.  One sent with the claim free must
 * reach Y, and the queue waits again.
 */
static void brief_probe(struct ud_trio *t, uint64_t *number,
			unsigned long *sent, unsigned long *got,
			unsigned long *done)
{
	struct ibv_wc wc;

	*number = *sent;
	vt_ud_send(t->z, *sent, t->ah, t->y->qp_num, VT_QKEY, number, 8,
		   t->mr->lkey, IBV_SEND_SIGNALED);
	(*sent)++;
	brief_receive(t, got, *sent, false);
	brief_sent(t, done, *sent, &wc, 0);
}

static int ud_claim_brief(void)
{
	struct ibv_wc wc[BRIEF_BURST];
	unsigned long sent = 0, done = 0, got = 0;
	unsigned int round, held_up = 0, strict = 0;
	long held_ms;
	uint32_t *claim, expect;
	uint64_t *numbers;
	struct ud_trio t;
	int i, early;

	ud_trio(&t, 2 * BRIEF_BURST, 4096 + 3 * BRIEF_BURST * BRIEF_SLOT);
	for (i = 0; i < (int)BRIEF_BURST; i++)
		brief_recv(&t, BRIEF_FIRST_WR + (uint64_t)i);
	numbers = (uint64_t *)brief_slot(&t, BRIEF_FIRST_WR + BRIEF_BURST);
	claim = &to_ibvc_qp(t.y)->rq.client->claim;
	for (round = 0; round < BRIEF_ROUNDS; round++) {
		expect = IBVD_WQ_CLAIM_FREE;
		vt_assert(__atomic_compare_exchange_n(claim, &expect,
						      IBVD_WQ_CLAIM_LIBRARY, false,
						      __ATOMIC_ACQUIRE,
						      __ATOMIC_RELAXED),
			  "Y's claim is not free (%u)", expect);
		held_ms = vt_now_ms();
		for (i = 0; i < (int)BRIEF_BURST; i++, sent++) {
			numbers[i] = sent;
			vt_ud_send(t.z, sent, t.ah, t.y->qp_num, VT_QKEY,
				   &numbers[i], 8, t.mr->lkey, IBV_SEND_SIGNALED);
		}
		vt_sleep_ms(BRIEF_HOLD_MS);
		vt_assert(ibv_poll_cq(t.cq, 1, wc) == 0,
			  "Y received with its claim held");
		/*
		 * The datagrams are parked and Z's sends complete; one that
		 * found no room would wait in Z's SQ (then it "held up" Z).
		 * Those here count below.
		 */
		early = ibv_poll_cq(t.zcq, 1, wc);
		vt_assert(early >= 0, "Z's CQ: %d", early);
		held_up += early == 0;
		__atomic_store_n(claim, IBVD_WQ_CLAIM_FREE, __ATOMIC_RELEASE);
		held_ms = vt_now_ms() - held_ms;
		/*
		 * Held for the 2 ms asked, nothing may be lost.  Held much
		 * longer (our sleep, on a loaded machine), a datagram may have
		 * waited past the engine's bound, as a receiver stopped that
		 * long loses them.
		 */
		strict += held_ms <= BRIEF_STRICT_MS;
		brief_receive(&t, &got, sent, held_ms > BRIEF_STRICT_MS);
		brief_sent(&t, &done, sent, wc, early);
		if (held_ms > BRIEF_STRICT_MS)
			brief_probe(&t, &numbers[0], &sent, &got, &done);
	}
	printf("ud-claim-brief: %lu datagrams in %u bursts to a QP holding its "
	       "claim %d ms each, in order, none lost in the %u bursts held "
	       "no longer than %d ms (%u bursts held up)\n", sent,
	       BRIEF_ROUNDS, BRIEF_HOLD_MS, strict, BRIEF_STRICT_MS, held_up);
	return 0;
}

/*
 * Y holds its claim while Z sends it PARK_DGRAMS numbered datagrams, then
 * one to X.  A sender never waits for a receiver (the engine parks what
 * finds the claim held): all of Z's sends complete and X has its datagram
 * while Y still holds the claim, and Y gets its datagrams, in order, once
 * it lets go.  Before, Z's SQ waited out Y's claim for 10 ms and then
 * dropped the datagram, and every later one with it.
 */
#define PARK_DGRAMS	16u
#define PARK_STRICT_MS	400	/* held longer, a datagram may expire (500) */

/* Y's library takes its claim, as one that stopped mid-copy holds it. */
static uint32_t *y_claim_take(struct ud_trio *t)
{
	uint32_t *claim = &to_ibvc_qp(t->y)->rq.client->claim;
	uint32_t expect = IBVD_WQ_CLAIM_FREE;

	vt_assert(__atomic_compare_exchange_n(claim, &expect,
					      IBVD_WQ_CLAIM_LIBRARY, false,
					      __ATOMIC_ACQUIRE, __ATOMIC_RELAXED),
		  "Y's claim is not free (%u)", expect);
	return claim;
}

/* Z sends Y PARK_DGRAMS datagrams, each carrying its number. */
static void park_send(struct ud_trio *t, uint64_t *numbers)
{
	unsigned int i;

	for (i = 0; i < PARK_DGRAMS; i++) {
		numbers[i] = i;
		vt_ud_send(t->z, i, t->ah, t->y->qp_num, VT_QKEY, &numbers[i], 8,
			   t->mr->lkey, IBV_SEND_SIGNALED);
	}
}

static int ud_claim_park(void)
{
	struct ibv_wc wc[PARK_DGRAMS + 1];
	uint64_t *numbers;
	unsigned long got = 0;
	uint32_t *claim;
	unsigned int i, done, x_got = 0;
	struct ud_trio t;
	long held_ms;
	int n;

	ud_trio(&t, 2 * BRIEF_BURST, 4096 + 3 * BRIEF_BURST * BRIEF_SLOT);
	for (i = 0; i < PARK_DGRAMS; i++)
		brief_recv(&t, BRIEF_FIRST_WR + i);
	vt_recv(t.x, 2, brief_slot(&t, BRIEF_FIRST_WR + PARK_DGRAMS),
		BRIEF_SLOT, t.mr->lkey);
	numbers = (uint64_t *)brief_slot(&t, BRIEF_FIRST_WR + BRIEF_BURST);
	claim = y_claim_take(&t);
	held_ms = vt_now_ms();
	park_send(&t, numbers);
	numbers[PARK_DGRAMS] = PARK_DGRAMS;
	vt_ud_send(t.z, PARK_DGRAMS, t.ah, t.x->qp_num, VT_QKEY,
		   &numbers[PARK_DGRAMS], 8, t.mr->lkey, IBV_SEND_SIGNALED);
	for (done = 0; done < PARK_DGRAMS + 1; done += (unsigned int)n) {
		n = vt_poll(t.zcq, wc, (int)(PARK_DGRAMS + 1 - done), vt_tmo_ms());
		vt_assert(n > 0, "Z: %u of %u sends completed while Y holds its "
			  "claim", done, PARK_DGRAMS + 1);
		for (i = 0; i < (unsigned int)n; i++)
			vt_assert(wc[i].status == IBV_WC_SUCCESS, "Z's send %lu: %s",
				  (unsigned long)wc[i].wr_id, vt_status(wc[i].status));
	}
	n = vt_poll(t.cq, wc, 1, vt_tmo_ms());
	vt_assert(n == 1 && wc[0].qp_num == t.x->qp_num &&
		  wc[0].status == IBV_WC_SUCCESS,
		  "X did not get its datagram while Y holds its claim (%d, qp %u)",
		  n, n == 1 ? wc[0].qp_num : 0);
	x_got = 1;
	vt_assert(ibv_poll_cq(t.cq, 1, wc) == 0, "Y received with its claim held");
	__atomic_store_n(claim, IBVD_WQ_CLAIM_FREE, __ATOMIC_RELEASE);
	held_ms = vt_now_ms() - held_ms;
	/* held much longer than asked (a loaded machine), some may expire */
	brief_receive(&t, &got, PARK_DGRAMS, held_ms > PARK_STRICT_MS);
	printf("ud-claim-park: %u sends completed and %u datagram to another "
	       "QP received while the receiver held its claim %ld ms; %u "
	       "received in order after (%s)\n", PARK_DGRAMS + 1, x_got,
	       held_ms, PARK_DGRAMS,
	       held_ms > PARK_STRICT_MS ? "lenient" : "strict");
	return 0;
}

/*
 * Y holds its claim while Z sends it PARK_DGRAMS datagrams (parked), then
 * Y is reset and brought back up: what was on its way before the reset
 * never lands, as a NIC drops its buffer on a reset; what Z sends after
 * does.
 */
static int ud_park_reset(void)
{
	struct vt_qp_opts o = { .type = IBV_QPT_UD };
	struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };
	struct ibv_wc wc[PARK_DGRAMS + 1];
	uint32_t *claim;
	uint64_t *numbers, number;
	unsigned int i, done;
	struct ud_trio t;
	int n;

	ud_trio(&t, 2 * BRIEF_BURST, 4096 + 3 * BRIEF_BURST * BRIEF_SLOT);
	for (i = 0; i < PARK_DGRAMS; i++)
		brief_recv(&t, BRIEF_FIRST_WR + i);
	numbers = (uint64_t *)brief_slot(&t, BRIEF_FIRST_WR + BRIEF_BURST);
	claim = y_claim_take(&t);
	park_send(&t, numbers);
	for (done = 0; done < PARK_DGRAMS; done += (unsigned int)n) {
		n = vt_poll(t.zcq, wc, (int)(PARK_DGRAMS - done), vt_tmo_ms());
		vt_assert(n > 0, "Z: %u of %u sends completed", done, PARK_DGRAMS);
	}
	vt_assert(ibv_modify_qp(t.y, &reset, IBV_QP_STATE) == 0,
		  "Y to RESET: %s", strerror(errno));
	__atomic_store_n(claim, IBVD_WQ_CLAIM_FREE, __ATOMIC_RELEASE);
	vt_connect(&t.d, t.y, NULL, &o);
	for (i = 0; i < PARK_DGRAMS; i++)
		brief_recv(&t, BRIEF_FIRST_WR + i);
	/* the engine tries its park every 1.3 ms at most: give it a few */
	vt_sleep_ms(50);
	numbers[PARK_DGRAMS] = 1000;
	vt_ud_send(t.z, PARK_DGRAMS, t.ah, t.y->qp_num, VT_QKEY,
		   &numbers[PARK_DGRAMS], 8, t.mr->lkey, IBV_SEND_SIGNALED);
	do {
		n = vt_poll(t.cq, wc, 1, vt_tmo_ms());
		vt_assert(n == 1, "Y got nothing after its reset");
	} while (wc[0].qp_num != t.y->qp_num);
	vt_assert(wc[0].status == IBV_WC_SUCCESS, "Y's receive: %s",
		  vt_status(wc[0].status));
	memcpy(&number, brief_slot(&t, wc[0].wr_id) + 40, sizeof(number));
	vt_assert(number == 1000, "Y got datagram %llu, sent before its reset",
		  (unsigned long long)number);
	printf("ud-park-reset: %u datagrams parked before a reset dropped, the "
	       "one after it received\n", PARK_DGRAMS);
	return 0;
}

#define SHARE_CTXS	5u
#define SHARE_DGRAMS	256u	/* each Z's SQ full */

/*
 * One uid's receivers hold their claims in SHARE_CTXS contexts (spread
 * over the engine threads), and each gets SHARE_DGRAMS datagrams at once
 * from its context's Z: 1,280 in all, more than a thread parks (1,024).
 * Each engine thread parks 256 of them at most, one account's share
 * however many contexts the uid opens, so that other tenants' datagrams
 * to busy receivers still find room; the rest wait in their senders' SQs
 * and are dropped, as for a receiver that holds its claim for ever.
 * Every send completes; abuse.sh counts the datagrams parked (ud_parked)
 * against 256 per thread, if this ran within the time a datagram stays
 * parked (500 ms: none left since, to make room).
 */
static int ud_park_share(void)
{
	static struct ud_trio t[SHARE_CTXS];
	struct ibv_wc wc[64];
	unsigned int c, k, done;
	long ms;
	int n;

	for (c = 0; c < SHARE_CTXS; c++) {
		ud_trio(&t[c], 64, 4096);
		y_claim_take(&t[c]);
	}
	ms = vt_now_ms();
	for (c = 0; c < SHARE_CTXS; c++)
		for (k = 0; k < SHARE_DGRAMS; k++)
			vt_ud_send(t[c].z, k, t[c].ah, t[c].y->qp_num, VT_QKEY,
				   t[c].mr->addr, 8, t[c].mr->lkey,
				   IBV_SEND_SIGNALED);
	for (c = 0; c < SHARE_CTXS; c++)
		for (done = 0; done < SHARE_DGRAMS; done += (unsigned int)n) {
			n = vt_poll(t[c].zcq, wc, 64, vt_tmo_ms());
			vt_assert(n > 0, "context %u's Z: %u of %u sends completed",
				  c, done, SHARE_DGRAMS);
			for (k = 0; k < (unsigned int)n; k++)
				vt_assert(wc[k].status == IBV_WC_SUCCESS,
					  "Z's send %lu: %s",
					  (unsigned long)wc[k].wr_id,
					  vt_status(wc[k].status));
		}
	ms = vt_now_ms() - ms;
	printf("ud-park-share: %u datagrams to %u receivers holding their "
	       "claims, one per context, all sent in %ld ms\n",
	       SHARE_CTXS * SHARE_DGRAMS, SHARE_CTXS, ms);
	return 0;
}

/*
 * A sender forges its AH's service level (the vector its library copies
 * into each WQE; an AH's own sl is checked at creation): 0xAB.  Y's
 * completions, through the engine from Z and on the transit ring from
 * X, say an SL an HCA could give, 0 to 15, whatever a sender wrote.
 */
static int ud_forged_sl(void)
{
	struct ud_trio t;
	struct ibv_qp *from[2];
	struct ibv_wc wc;
	unsigned int i;

	ud_trio(&t, 16, 4096);
	to_ibvc_ah(t.ah)->av.sl = 0xAB;
	from[0] = t.z;
	from[1] = t.x;
	for (i = 0; i < 2; i++) {
		vt_recv(t.y, 100 + i, t.mr->addr, 4096, t.mr->lkey);
		vt_ud_send(from[i], i, t.ah, t.y->qp_num, VT_QKEY,
			   (uint8_t *)t.mr->addr + 2048, 8, t.mr->lkey, 0);
		do
			vt_assert(vt_poll(t.cq, &wc, 1, vt_tmo_ms()) == 1,
				  "Y got no datagram from %s", i ? "X" : "Z");
		while (wc.wr_id != 100 + i);
		vt_assert(wc.status == IBV_WC_SUCCESS, "Y's receive: %s",
			  vt_status(wc.status));
		vt_assert(wc.sl <= 15, "Y's completion from %s says SL %u",
			  i ? "X (ring)" : "Z (engine)", wc.sl);
	}
	printf("ud-forged-sl: an AH forged to SL 0xAB reached Y with SL %u\n",
	       wc.sl);
	return 0;
}

/*
 * Y holds its claim while Z sends it two datagrams (parked) and then one
 * to a group Y is in: Y's copy of the group's datagram lands after the
 * two, not lost for the claim it found held, nor ahead of them.
 */
static int ud_park_mcast(void)
{
	static const union ibv_gid mgid = { .raw = {
		0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x9a, 0xbc } };
	const uint16_t mlid = 0xc0de;
	struct ibv_wc wc[3];
	unsigned long got = 0;
	uint64_t *numbers;
	struct ud_trio t;
	struct ibv_ah *ah;
	uint32_t *claim;
	int i, n;

	ud_trio(&t, 2 * BRIEF_BURST, 4096 + 3 * BRIEF_BURST * BRIEF_SLOT);
	for (i = 0; i < 3; i++)
		brief_recv(&t, BRIEF_FIRST_WR + (uint64_t)i);
	vt_assert(ibv_attach_mcast(t.y, &mgid, mlid) == 0, "attach Y: %s",
		  strerror(errno));
	ah = vt_ah(&t.d, mlid, &mgid);
	numbers = (uint64_t *)brief_slot(&t, BRIEF_FIRST_WR + BRIEF_BURST);
	claim = y_claim_take(&t);
	for (i = 0; i < 3; i++) {
		numbers[i] = (uint64_t)i;
		vt_ud_send(t.z, (uint64_t)i, i < 2 ? t.ah : ah,
			   i < 2 ? t.y->qp_num : 0xffffff, VT_QKEY, &numbers[i],
			   8, t.mr->lkey, IBV_SEND_SIGNALED);
	}
	for (i = 0; i < 3; i += n) {
		n = vt_poll(t.zcq, wc, 3 - i, vt_tmo_ms());
		vt_assert(n > 0, "Z: %d of 3 sends completed", i);
	}
	__atomic_store_n(claim, IBVD_WQ_CLAIM_FREE, __ATOMIC_RELEASE);
	brief_receive(&t, &got, 3, false);
	printf("ud-park-mcast: 2 datagrams and a group's copy received in order "
	       "after a held claim\n");
	return 0;
}

/*
 * 16 UD QPs share a basic SRQ whose claim word their client set to
 * ENGINE, which only an engine thread holding it may write; a 17th QP
 * floods them round robin.  The engine must not spin on the forged word
 * (20 us each, with the 50 us wait behind it), nor wait it out for every
 * QP of the SRQ in turn: once a millisecond for the SRQ at most.
 * abuse.sh compares claim_timeouts with the milliseconds printed.
 */
#define SRQ_FORGED_QPS	16

static int srq_forged_claim(void)
{
	struct vt_qp_opts o = { .type = IBV_QPT_UD, .max_send_wr = 256 };
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 64, .max_sge = 1 } };
	struct ibv_qp *t[SRQ_FORGED_QPS], *z;
	struct ibv_wc wc[FLOOD_BATCH];
	unsigned long sent = 0, done = 0;
	struct ibv_cq *cq, *zcq;
	struct ibv_srq *srq;
	struct ibv_ah *ah;
	struct ibv_mr *mr;
	struct vt_dev d;
	long t0;
	int i, n;

	vt_open(&d);
	cq = ibv_create_cq(d.ctx, 64, NULL, NULL, 0);
	zcq = ibv_create_cq(d.ctx, 512, NULL, NULL, 0);
	srq = ibv_create_srq(d.pd, &sa);
	vt_assert(cq && zcq && srq, "CQ, SRQ: %s", strerror(errno));
	mr = vt_reg(d.pd, 4096, VT_ACCESS_ALL);
	for (i = 0; i < 16; i++)
		vt_srq_recv(srq, 1, mr->addr, 4096, mr->lkey);
	o.srq = srq;
	for (i = 0; i < SRQ_FORGED_QPS; i++) {
		t[i] = vt_qp(&d, cq, cq, &o);
		vt_connect(&d, t[i], NULL, &o);
	}
	o.srq = NULL;
	z = vt_qp(&d, zcq, zcq, &o);
	vt_connect(&d, z, NULL, &o);
	ah = vt_ah(&d, d.port.lid, NULL);
	__atomic_store_n(&to_ibvc_srq(srq)->rq.client->claim, IBVD_WQ_CLAIM_ENGINE,
			 __ATOMIC_RELEASE);
	t0 = vt_now_ms();
	while (done < FLOOD_DGRAMS) {
		for (i = 0; i < FLOOD_BATCH && sent < FLOOD_DGRAMS &&
			    sent - done < 256; i++, sent++)
			vt_ud_send(z, sent, ah, t[sent % SRQ_FORGED_QPS]->qp_num,
				   VT_QKEY, mr->addr, 8, mr->lkey, IBV_SEND_SIGNALED);
		n = vt_poll(zcq, wc, FLOOD_BATCH, vt_tmo_ms());
		vt_assert(n > 0, "no completion after %lu of %d datagrams",
			  done, FLOOD_DGRAMS);
		for (i = 0; i < n; i++)
			vt_assert(wc[i].status == IBV_WC_SUCCESS, "datagram %lu: %s",
				  (unsigned long)wc[i].wr_id, vt_status(wc[i].status));
		done += (unsigned long)n;
	}
	printf("srq-forged-claim: %d datagrams to %d QPs of an SRQ claimed by a forged word in %ld ms\n",
	       FLOOD_DGRAMS, SRQ_FORGED_QPS, vt_now_ms() - t0);
	return 0;
}

/*
 * 64 datagrams of 4 KiB posted at once to a group of 32 QPs: each one is
 * 32 copies, and the sender's turn must count them all (128 KiB, a turn's
 * budget), not one; else a turn of 32 WQEs copies 4 MiB while every other
 * QP of the engine waits.  abuse.sh counts the engine's turns.
 */
#define FANOUT_QPS	32
#define FANOUT_DGRAMS	64

/*
 * Put qp on an SRQ of its own whose claim word stays LIBRARY's, as a
 * library stopped mid-copy would leave it: into o->srq.
 */
static void own_held_srq(struct vt_dev *d, struct vt_qp_opts *o)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };

	o->srq = ibv_create_srq(d->pd, &sa);
	vt_assert(o->srq != NULL, "SRQ: %s", strerror(errno));
	__atomic_store_n(&to_ibvc_srq(o->srq)->rq.client->claim,
			 IBVD_WQ_CLAIM_LIBRARY, __ATOMIC_RELEASE);
}

static int mcast_fanout(bool held_claims)
{
	static const union ibv_gid mgid = { .raw = {
		0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x77, 0x01 } };
	const uint16_t mlid = 0xc077;
	struct vt_qp_opts o = { .type = IBV_QPT_UD, .max_send_wr = FANOUT_DGRAMS };
	struct ibv_send_wr wr[FANOUT_DGRAMS], *bad = NULL;
	struct ibv_qp *member[FANOUT_QPS], *tx;
	struct ibv_sge sge;
	struct ibv_cq *cq;
	struct ibv_ah *ah;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	struct vt_dev d;
	long t0;
	int i;

	vt_open(&d);
	cq = ibv_create_cq(d.ctx, 2 * FANOUT_DGRAMS, NULL, NULL, 0);
	vt_assert(cq != NULL, "CQ: %s", strerror(errno));
	for (i = 0; i < FANOUT_QPS; i++) {
		if (held_claims)
			own_held_srq(&d, &o);
		member[i] = vt_qp(&d, cq, cq, &o);
		vt_connect(&d, member[i], NULL, &o);
		vt_assert(ibv_attach_mcast(member[i], &mgid, mlid) == 0,
			  "attach member %d: %s", i, strerror(errno));
	}
	o.srq = NULL;
	tx = vt_qp(&d, cq, cq, &o);
	vt_connect(&d, tx, NULL, &o);
	mr = vt_reg(d.pd, 4096, VT_ACCESS_ALL);
	ah = vt_ah(&d, mlid, &mgid);
	sge = (struct ibv_sge){ (uintptr_t)mr->addr, 4096, mr->lkey };
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < FANOUT_DGRAMS; i++) {
		wr[i].wr_id = (uint64_t)i;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].sg_list = &sge;
		wr[i].num_sge = 1;
		wr[i].wr.ud.ah = ah;
		wr[i].wr.ud.remote_qpn = 0xffffff;
		wr[i].wr.ud.remote_qkey = VT_QKEY;
		wr[i].next = i + 1 < FANOUT_DGRAMS ? &wr[i + 1] : NULL;
	}
	wr[FANOUT_DGRAMS - 1].send_flags = IBV_SEND_SIGNALED;
	t0 = vt_now_ms();
	vt_assert(ibv_post_send(tx, wr, &bad) == 0, "post: %s", strerror(errno));
	/* paced at 4 MB/s, the 8 MiB of copies take 2 s */
	vt_assert(vt_poll(cq, &wc, 1, vt_tmo_ms() + 10000) == 1, "no completion");
	vt_assert(wc.status == IBV_WC_SUCCESS && wc.wr_id == FANOUT_DGRAMS - 1,
		  "the last datagram: %s", vt_status(wc.status));
	printf("%s: %d datagrams of 4 KiB to a group of %d QPs%s in %ld ms\n",
	       held_claims ? "mcast-claims" : "mcast-fanout", FANOUT_DGRAMS,
	       FANOUT_QPS, held_claims ? " holding their claims" : "",
	       vt_now_ms() - t0);
	return 0;
}

/* Post n receives of len bytes, all into buf, to qp or (qp NULL) srq. */
static void post_receives(struct ibv_qp *qp, struct ibv_srq *srq,
			  struct ibv_mr *mr, uint32_t len, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		if (qp)
			vt_recv(qp, (uint64_t)i, mr->addr, len, mr->lkey);
		else
			vt_srq_recv(srq, (uint64_t)i, mr->addr, len, mr->lkey);
	}
}

/* Receive completions of cq for up to ms, counted per member's QPN. */
static void count_received(struct ibv_cq *cq, struct ibv_qp *const *member,
			   int nmember, int *got, int want, int ms)
{
	long until = vt_now_ms() + ms;
	struct ibv_wc wc[32];
	int i, j, n, total = 0;

	while (total < want && vt_now_ms() < until) {
		n = ibv_poll_cq(cq, 32, wc);
		vt_assert(n >= 0, "poll: %d", n);
		for (i = 0; i < n; i++) {
			vt_assert(wc[i].status == IBV_WC_SUCCESS,
				  "a receive: %s", vt_status(wc[i].status));
			for (j = 0; j < nmember; j++)
				got[j] += wc[i].qp_num == member[j]->qp_num;
			total++;
		}
		if (!n)
			vt_sleep_ms(1);
	}
}

#define MCAST_SRQ_DGRAMS	200

/*
 * Two members of a group on one SRQ: every datagram lands twice (an
 * engine thread delivering to the second member must not wait for the
 * SRQ's claim its own first delivery kept, and drop the copy).
 */
static int mcast_srq(void)
{
	static const union ibv_gid mgid = { .raw = {
		0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x77, 0x02 } };
	const uint16_t mlid = 0xc078;
	struct ibv_srq_init_attr sa = {
		.attr = { .max_wr = 2 * MCAST_SRQ_DGRAMS, .max_sge = 1 } };
	struct vt_qp_opts o = { .type = IBV_QPT_UD,
				.max_send_wr = MCAST_SRQ_DGRAMS };
	struct ibv_qp *member[2], *tx;
	struct ibv_cq *rcq, *scq;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	struct vt_dev d;
	int i, got[2] = { 0, 0 };

	vt_open(&d);
	rcq = ibv_create_cq(d.ctx, 4 * MCAST_SRQ_DGRAMS, NULL, NULL, 0);
	scq = ibv_create_cq(d.ctx, 2 * MCAST_SRQ_DGRAMS, NULL, NULL, 0);
	o.srq = ibv_create_srq(d.pd, &sa);
	vt_assert(rcq && scq && o.srq, "CQs and SRQ: %s", strerror(errno));
	mr = vt_reg(d.pd, 8192, VT_ACCESS_ALL);
	post_receives(NULL, o.srq, mr, 4096, 2 * MCAST_SRQ_DGRAMS);
	for (i = 0; i < 2; i++) {
		member[i] = vt_qp(&d, rcq, rcq, &o);
		vt_connect(&d, member[i], NULL, &o);
		vt_assert(ibv_attach_mcast(member[i], &mgid, mlid) == 0,
			  "attach member %d: %s", i, strerror(errno));
	}
	o.srq = NULL;
	tx = vt_qp(&d, scq, scq, &o);
	vt_connect(&d, tx, NULL, &o);
	ah = vt_ah(&d, mlid, &mgid);
	for (i = 0; i < MCAST_SRQ_DGRAMS; i++) {
		vt_ud_send(tx, (uint64_t)i, ah, 0xffffff, VT_QKEY,
			   (uint8_t *)mr->addr + 4096, 8, mr->lkey,
			   IBV_SEND_SIGNALED);
		vt_expect_ok(scq, &wc, (uint64_t)i, IBV_WC_SEND, "a datagram");
	}
	count_received(rcq, member, 2, got, 2 * MCAST_SRQ_DGRAMS, vt_tmo_ms());
	vt_assert(got[0] == MCAST_SRQ_DGRAMS && got[1] == MCAST_SRQ_DGRAMS,
		  "%d datagrams: the members received %d and %d",
		  MCAST_SRQ_DGRAMS, got[0], got[1]);
	printf("mcast-srq: %d datagrams to a group of 2 QPs on one SRQ, all received twice\n",
	       MCAST_SRQ_DGRAMS);
	return 0;
}

#define CONTEND_DGRAMS	3000

struct contender {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct ibv_ah *ah;
	struct ibv_mr *mr;
	char err[128];
};

/* A datagram of 64 bytes to the group: ibv_post_send's value. */
static int post_to_group(const struct contender *c, uint64_t wr_id)
{
	struct ibv_sge sge = { (uintptr_t)c->mr->addr, 64, c->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge,
				  .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.wr.ud.ah = c->ah;
	wr.wr.ud.remote_qpn = 0xffffff;
	wr.wr.ud.remote_qkey = VT_QKEY;
	return ibv_post_send(c->qp, &wr, &bad);
}

/* One context's sender: CONTEND_DGRAMS datagrams to the group, 32 in flight. */
static void *contend_send(void *arg)
{
	struct contender *c = arg;
	struct ibv_wc wc[32];
	int sent = 0, done = 0, i, n;

	while (done < CONTEND_DGRAMS) {
		for (; sent < CONTEND_DGRAMS && sent - done < 32; sent++)
			if (post_to_group(c, (uint64_t)sent) != 0) {
				snprintf(c->err, sizeof(c->err), "post %d", sent);
				return NULL;
			}
		n = vt_poll(c->cq, wc, 32, vt_tmo_ms());
		if (n <= 0) {
			snprintf(c->err, sizeof(c->err), "no completion after %d",
				 done);
			return NULL;
		}
		for (i = 0; i < n; i++)
			if (wc[i].status != IBV_WC_SUCCESS)
				snprintf(c->err, sizeof(c->err), "send: %s",
					 vt_status(wc[i].status));
		done += n;
	}
	return NULL;
}

/*
 * Two contexts (on the two engine threads) multicast at once to a group
 * of two plain UD QPs with room for everything: each member receives
 * every copy.  Their deliveries into one RQ meet: they must wait for
 * each other, not drop.
 */
static int mcast_contend(void)
{
	static const union ibv_gid mgid = { .raw = {
		0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x77, 0x03 } };
	const uint16_t mlid = 0xc079;
	struct vt_qp_opts o = { .type = IBV_QPT_UD, .max_send_wr = 64,
				.max_recv_wr = 2 * CONTEND_DGRAMS };
	struct contender c[2];
	struct ibv_qp *member[2];
	struct ibv_cq *rcq;
	struct ibv_mr *rmr;
	struct vt_dev d[2];
	pthread_t th[2];
	int i, got[2] = { 0, 0 };

	memset(c, 0, sizeof(c));
	vt_open(&d[0]);
	vt_open(&d[1]);
	rcq = ibv_create_cq(d[0].ctx, 4 * CONTEND_DGRAMS + 16, NULL, NULL, 0);
	vt_assert(rcq != NULL, "CQ: %s", strerror(errno));
	rmr = vt_reg(d[0].pd, 4096, VT_ACCESS_ALL);
	for (i = 0; i < 2; i++) {
		member[i] = vt_qp(&d[0], rcq, rcq, &o);
		vt_connect(&d[0], member[i], NULL, &o);
		post_receives(member[i], NULL, rmr, 4096, 2 * CONTEND_DGRAMS);
		vt_assert(ibv_attach_mcast(member[i], &mgid, mlid) == 0,
			  "attach member %d: %s", i, strerror(errno));
	}
	o.max_recv_wr = 4;
	for (i = 0; i < 2; i++) {
		c[i].cq = ibv_create_cq(d[i].ctx, 128, NULL, NULL, 0);
		vt_assert(c[i].cq != NULL, "CQ: %s", strerror(errno));
		c[i].qp = vt_qp(&d[i], c[i].cq, c[i].cq, &o);
		vt_connect(&d[i], c[i].qp, NULL, &o);
		c[i].mr = vt_reg(d[i].pd, 4096, VT_ACCESS_ALL);
		c[i].ah = vt_ah(&d[i], mlid, &mgid);
	}
	for (i = 0; i < 2; i++)
		vt_assert(pthread_create(&th[i], NULL, contend_send, &c[i]) == 0,
			  "thread");
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	vt_assert(!c[0].err[0] && !c[1].err[0], "senders: %s %s", c[0].err,
		  c[1].err);
	count_received(rcq, member, 2, got, 4 * CONTEND_DGRAMS, vt_tmo_ms());
	vt_assert(got[0] == 2 * CONTEND_DGRAMS && got[1] == 2 * CONTEND_DGRAMS,
		  "2 x %d datagrams: the members received %d and %d",
		  CONTEND_DGRAMS, got[0], got[1]);
	printf("mcast-contend: 2 x %d datagrams from two contexts, all received by both members\n",
	       CONTEND_DGRAMS);
	return 0;
}

/* Ring qp's doorbell as the library does (ring.h): bit, summary, kick. */
static void ring_doorbell(struct ibv_qp *qp)
{
	struct ibvc_context *ictx = to_ibvc_context(qp->context);
	uint32_t bit = to_ibvc_qp(qp)->doorbell, word = bit / 64;
	uint64_t one = 1;

	__atomic_fetch_or(&ictx->db_client->doorbell[word], 1ull << (bit % 64),
			  __ATOMIC_RELEASE);
	__atomic_fetch_or(&ictx->db_client->summary[word / 64],
			  1ull << (word % 64), __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&ictx->db_engine->sleeping, __ATOMIC_RELAXED))
		vt_assert(write(ictx->kick_fd, &one, sizeof(one)) == sizeof(one),
			  "kick: %s", strerror(errno));
}

/* Publish n WQEs written into qp's SQ; ring its doorbell if ring. */
static void sq_publish(struct ibv_qp *qp, uint32_t n, bool ring)
{
	struct ibvc_qp *q = to_ibvc_qp(qp);

	q->sq.tail += n;
	__atomic_store_n(&q->sq.client->tail, q->sq.tail, __ATOMIC_RELEASE);
	if (ring)
		ring_doorbell(qp);
}

/* The i-th WQE past qp's SQ tail: an RDMA WRITE of len bytes. */
static void sq_write_wqe(struct ibv_qp *qp, uint32_t i, uint32_t flags,
			 const void *from, uint32_t lkey, uint32_t len,
			 void *to, uint32_t rkey)
{
	struct ibvc_qp *q = to_ibvc_qp(qp);
	struct ibvd_send_wqe *w = ibvc_wq_slot(&q->sq, q->sq.tail + i);
	struct ibvd_sge *sge = (struct ibvd_sge *)(w + 1);

	memset(w, 0, sizeof(*w));
	w->wr_id = i;
	w->opcode = IBV_WR_RDMA_WRITE;
	w->send_flags = flags;
	w->num_sge = 1;
	w->rkey = rkey;
	w->remote_addr = (uintptr_t)to;
	sge->addr = (uintptr_t)from;
	sge->length = len;
	sge->lkey = lkey;
}

#define FULL_SQ_WQES	16384u
#define FULL_SQ_LEN	(128u << 10)

static int full_sq_destroy(void)
{
	struct vt_qp_opts o = { .max_send_wr = FULL_SQ_WQES, .max_recv_wr = 16 };
	struct ibv_mr *src, *dst;
	struct vt_pair p;
	struct vt_dev d;
	uint32_t i, n;

	vt_open(&d);
	vt_pair(&p, &d, &o, 64);
	src = vt_reg(d.pd, FULL_SQ_LEN, VT_ACCESS_ALL);
	dst = vt_reg(d.pd, FULL_SQ_LEN, VT_ACCESS_ALL);
	n = to_ibvc_qp(p.qp[0])->sq.nslots;
	vt_assert(n >= FULL_SQ_WQES, "an SQ of %u slots", n);
	for (i = 0; i < FULL_SQ_WQES; i++)
		sq_write_wqe(p.qp[0], i, 0, src->addr, src->lkey, FULL_SQ_LEN,
			     dst->addr, dst->rkey);
	/* published, but no doorbell: the engine has not looked */
	sq_publish(p.qp[0], FULL_SQ_WQES, false);
	vt_assert(ibv_destroy_qp(p.qp[0]) == 0, "ibv_destroy_qp: %s",
		  strerror(errno));
	p.qp[0] = NULL;
	printf("full-sq-destroy: %u WRITEs of %u KiB in the SQ, QP destroyed\n",
	       FULL_SQ_WQES, FULL_SQ_LEN >> 10);
	return 0;
}

/*
 * A context's teardown runs its QPs' last sends as a destroy does, once
 * for the context: EXIT_QPS QPs with 32 MiB of WRITEs each moved 16 MiB
 * each before, with every tenant waiting; now 16 MiB in all, a turn at a
 * time for each QP, the shortest queues first, so that the last QP's
 * small WRITE, behind them in handle order, lands all the same: with
 * more than 128 of them, a first round of a 128 KiB chunk each spends
 * the budget before it.  The child exits without destroying anything;
 * its parent watches for the small WRITE in shared memory.
 */
#define EXIT_QPS	160u
#define EXIT_WQES	256u
#define EXIT_MARK	0x5a5a1e57c0ffee01ull
/*
 * full-sq-exit-long: a single WRITE of EXIT_LONG in each SQ instead, as
 * many WQEs queued as the small WRITE's QP: sorted by queue length
 * alone (then by handle), the long ones came first and spent the budget.
 */
#define EXIT_LONG	(1u << 20)

static void full_sq_exit_child(volatile uint64_t *mark, bool single)
{
	struct vt_qp_opts o = { .max_send_wr = EXIT_WQES, .max_recv_wr = 16 };
	uint32_t len = single ? EXIT_LONG : FULL_SQ_LEN;
	uint32_t wqes = single ? 1 : EXIT_WQES;
	struct ibv_mr *src, *dst, *small, *shared;
	struct vt_pair p[EXIT_QPS + 1];
	struct vt_dev d;
	uint32_t i, q;

	vt_open(&d);
	/* memfds: the daemon reaches them once the process is gone */
	src = vt_reg_memfd(d.pd, len, VT_ACCESS_ALL, "abuse-exit-src");
	dst = vt_reg_memfd(d.pd, len, VT_ACCESS_ALL, "abuse-exit-dst");
	small = vt_reg_memfd(d.pd, 4096, VT_ACCESS_ALL, "abuse-exit-small");
	*(uint64_t *)small->addr = EXIT_MARK;
	shared = ibv_reg_mr(d.pd, (void *)mark, 4096, VT_ACCESS_ALL);
	vt_assert(shared != NULL, "ibv_reg_mr: %s", strerror(errno));
	for (q = 0; q <= EXIT_QPS; q++)
		vt_pair(&p[q], &d, &o, 64);
	for (q = 0; q < EXIT_QPS; q++) {
		for (i = 0; i < wqes; i++)
			sq_write_wqe(p[q].qp[0], i, 0, src->addr, src->lkey,
				     len, dst->addr, dst->rkey);
		/* published, but no doorbell: the engine has not looked */
		sq_publish(p[q].qp[0], wqes, false);
	}
	sq_write_wqe(p[EXIT_QPS].qp[0], 0, 0, small->addr, small->lkey,
		     sizeof(*mark), (void *)mark, shared->rkey);
	sq_publish(p[EXIT_QPS].qp[0], 1, false);
	_exit(0);
}

static int full_sq_exit(bool single)
{
	long t0 = vt_now_ms();
	volatile uint64_t *mark;
	pid_t pid;
	int st;

	int fd = memfd_create("abuse-exit-mark", MFD_CLOEXEC);

	vt_assert(fd >= 0 && ftruncate(fd, 4096) == 0, "memfd: %s",
		  strerror(errno));
	/*
	 * The child's mapping too, which the daemon reaches by the file: the
	 * child's library finds it among the fds it holds (the child's copy).
	 */
	mark = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	vt_assert(mark != MAP_FAILED, "mmap: %s", strerror(errno));
	pid = fork();
	vt_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0)
		full_sq_exit_child(mark, single);
	close(fd);
	vt_assert(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
		  WEXITSTATUS(st) == 0, "the child failed (status %#x)", st);
	/* the daemon's teardown of the child's context, whenever it comes */
	while (*mark != EXIT_MARK && vt_now_ms() - t0 < vt_tmo_ms())
		usleep(1000);
	vt_assert(*mark == EXIT_MARK,
		  "the last QP's WRITE never landed (%#llx)",
		  (unsigned long long)*mark);
	printf("full-sq-exit%s: %u QPs with %u WRITE%s of %u KiB each and "
	       "one of 8 bytes, the process gone: the 8 bytes landed\n",
	       single ? "-long" : "", EXIT_QPS, single ? 1 : EXIT_WQES,
	       single ? "" : "s", (single ? EXIT_LONG : FULL_SQ_LEN) >> 10);
	return 0;
}

/*
 * The same budget covers the direct rings towards the going context's
 * QPs: DX_PAIRS direct pairs, the parent's side sending, each with a
 * transit ring full of SENDs (DX_MSGS of DX_LEN) towards the child's
 * side, which posted receives for all and never polled; the child exits.
 * Its teardown took each ring whole before, about 45 MiB; now the
 * context's 16 MiB in all, a turn at a time for each QP, so that the
 * child's last small SEND, on its last QP, reaches the parent all the
 * same.  The parent sees its SENDs taken in order and the rest fail, as
 * SENDs to a QP that went do.
 */
#define DX_PAIRS	48u
/* 14 x (64 KiB and a header) fit a ring */
#define DX_MSGS		14u
#define DX_LEN		(64u << 10)
#define DX_SLACK	(1u << 20)	/* past the budget: a turn's excess */
#define DX_SMALL	0x5a5a1e57d1ec7001ull

struct dx_shared {
	struct vt_addr child[DX_PAIRS + 1], parent[DX_PAIRS + 1];
	bool held;	/* the child holds its 48 receivers' claims */
	int step;	/* 1: child's QPs made, 2: parent's connected,
			 * 3: child's connected, 4: parent's SENDs posted */
};

static void dx_wait(volatile struct dx_shared *sh, int step, pid_t child)
{
	long t0 = vt_now_ms();
	int st = 0;

	while (sh->step < step) {
		vt_assert(vt_now_ms() - t0 < vt_tmo_ms(), "waited for step %d",
			  step);
		vt_assert(!child || waitpid(child, &st, WNOHANG) == 0,
			  "the child ended before step %d (status %#x)", step,
			  st);
		usleep(1000);
	}
}

static void dx_qps(struct vt_dev *d, struct ibv_qp **qp, struct vt_addr *a,
		   struct ibv_cq *scq, struct ibv_cq *rcq,
		   const struct vt_qp_opts *o)
{
	uint32_t q;

	for (q = 0; q <= DX_PAIRS; q++) {
		qp[q] = vt_qp(d, scq, rcq, o);
		vt_qp_addr(d, qp[q], o, &a[q]);
	}
}

static void full_direct_exit_child(struct dx_shared *sh)
{
	struct vt_qp_opts o = { .max_send_wr = 16, .max_recv_wr = DX_MSGS + 1 };
	struct ibv_qp *qp[DX_PAIRS + 1];
	struct ibv_cq *scq, *rcq;
	struct ibv_mr *buf;
	struct vt_dev d;
	uint32_t q, i;

	vt_open(&d);
	scq = ibv_create_cq(d.ctx, 64, NULL, NULL, 0);
	rcq = ibv_create_cq(d.ctx, 1024, NULL, NULL, 0);
	vt_assert(scq && rcq, "ibv_create_cq: %s", strerror(errno));
	/* a memfd: the daemon reaches it once the process is gone */
	buf = vt_reg_memfd(d.pd, 4096 + DX_LEN, VT_ACCESS_ALL, "abuse-dx-recv");
	*(uint64_t *)buf->addr = DX_SMALL;
	dx_qps(&d, qp, sh->child, scq, rcq, &o);
	__atomic_store_n(&sh->step, 1, __ATOMIC_RELEASE);
	dx_wait(sh, 2, 0);
	for (q = 0; q <= DX_PAIRS; q++)
		vt_connect(&d, qp[q], &sh->parent[q], &o);
	/* the pairs are made: the receives take the rings (all into one
	 * buffer, as a receiver that never looks at them may) */
	for (q = 0; q < DX_PAIRS; q++)
		for (i = 0; i < DX_MSGS; i++)
			vt_recv(qp[q], i, (uint8_t *)buf->addr + 4096, DX_LEN,
				buf->lkey);
	/* as a library that dies in the middle of a copy leaves them */
	for (q = 0; q < DX_PAIRS && sh->held; q++)
		__atomic_store_n(&to_ibvc_qp(qp[q])->rq.client->claim,
				 IBVD_WQ_CLAIM_LIBRARY, __ATOMIC_RELEASE);
	__atomic_store_n(&sh->step, 3, __ATOMIC_RELEASE);
	dx_wait(sh, 4, 0);
	/* on the ring, no doorbell: the parent waits for no event */
	vt_send(qp[DX_PAIRS], 1, IBV_WR_SEND, 0, buf->addr, 8, buf->lkey, 0, 0);
	vt_assert(vt_transit_maps() == (int)DX_PAIRS + 1,
		  "the child has %d transit ring mappings", vt_transit_maps());
	_exit(0);
}

/* Each QP's SENDs: taken in order, then failed; returns how many taken. */
static uint32_t dx_sends(struct ibv_cq *scq, struct ibv_qp **qp)
{
	uint32_t taken[DX_PAIRS] = { 0 }, failed[DX_PAIRS] = { 0 };
	uint32_t n, q, total = 0;
	struct ibv_wc wc[64];
	int k, j;

	for (n = 0; n < DX_PAIRS * DX_MSGS; n += (uint32_t)k) {
		k = vt_poll(scq, wc, 64, vt_tmo_ms());
		vt_assert(k > 0, "%u of %u SENDs completed", n,
			  DX_PAIRS * DX_MSGS);
		for (j = 0; j < k; j++) {
			q = (uint32_t)(wc[j].wr_id / DX_MSGS);
			vt_assert(q < DX_PAIRS && wc[j].qp_num == qp[q]->qp_num,
				  "a completion of wr_id %llu",
				  (unsigned long long)wc[j].wr_id);
			vt_assert(wc[j].wr_id % DX_MSGS == taken[q] + failed[q],
				  "QP %u: SEND %llu out of order", q,
				  (unsigned long long)wc[j].wr_id % DX_MSGS);
			if (wc[j].status == IBV_WC_SUCCESS) {
				vt_assert(!failed[q], "QP %u: a SEND taken "
					  "after one failed", q);
				taken[q]++;
				continue;
			}
			/* the first nobody took, as a NIC's retries run out */
			vt_assert(wc[j].status == (failed[q] ?
						   IBV_WC_WR_FLUSH_ERR :
						   IBV_WC_RETRY_EXC_ERR),
				  "QP %u: SEND %u %s", q, taken[q] + failed[q],
				  vt_status(wc[j].status));
			failed[q]++;
		}
	}
	for (q = 0; q < DX_PAIRS; q++)
		total += taken[q];
	return total;
}

static int full_direct_exit(bool held)
{
	struct vt_qp_opts o = { .max_send_wr = DX_MSGS + 1, .max_recv_wr = 4 };
	struct ibv_qp *qp[DX_PAIRS + 1];
	struct ibv_cq *scq, *rcq;
	struct dx_shared *sh;
	struct ibv_mr *src, *small;
	struct ibv_wc wc;
	struct vt_dev d;
	uint32_t q, i, taken;
	uint64_t moved;
	long t0;
	pid_t pid;
	int st;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	vt_assert(sh != MAP_FAILED, "mmap: %s", strerror(errno));
	memset(sh, 0, sizeof(*sh));
	sh->held = held;
	pid = fork();
	vt_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0)
		full_direct_exit_child(sh);
	vt_open(&d);
	scq = ibv_create_cq(d.ctx, 1024, NULL, NULL, 0);
	rcq = ibv_create_cq(d.ctx, 64, NULL, NULL, 0);
	vt_assert(scq && rcq, "ibv_create_cq: %s", strerror(errno));
	src = vt_reg(d.pd, DX_LEN, VT_ACCESS_ALL);
	small = vt_reg(d.pd, 4096, VT_ACCESS_ALL);
	dx_qps(&d, qp, sh->parent, scq, rcq, &o);
	dx_wait(sh, 1, pid);
	for (q = 0; q <= DX_PAIRS; q++)
		vt_connect(&d, qp[q], &sh->child[q], &o);
	__atomic_store_n(&sh->step, 2, __ATOMIC_RELEASE);
	dx_wait(sh, 3, pid);
	vt_recv(qp[DX_PAIRS], 1, small->addr, 4096, small->lkey);
	for (q = 0; q < DX_PAIRS; q++)
		for (i = 0; i < DX_MSGS; i++)
			vt_send(qp[q], q * DX_MSGS + i, IBV_WR_SEND,
				IBV_SEND_SIGNALED, src->addr, DX_LEN, src->lkey,
				0, 0);
	vt_assert(vt_transit_maps() == (int)DX_PAIRS + 1,
		  "the parent has %d transit ring mappings", vt_transit_maps());
	/*
	 * All in the rings, none taken.  The send CQ is left alone until the
	 * child's QPs are gone: a poll that finds a SEND stalled asks the
	 * engine to take the ring.
	 */
	__atomic_store_n(&sh->step, 4, __ATOMIC_RELEASE);
	vt_assert(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
		  WEXITSTATUS(st) == 0, "the child failed (status %#x)", st);
	t0 = vt_now_ms();
	/*
	 * The teardown is over once the engine broke every connection; only
	 * then is the receive CQ polled (our library would place the child's
	 * last SEND itself): the teardown placed it, or it is flushed.
	 */
	for (q = 0; q <= DX_PAIRS; q++)
		while (vt_qp_state(qp[q]) != IBV_QPS_ERR) {
			vt_assert(vt_now_ms() - t0 < vt_tmo_ms(), "QP %u: in "
				  "state %d, its peer gone", q,
				  vt_qp_state(qp[q]));
			usleep(1000);
		}
	vt_expect_ok(rcq, &wc, 1, IBV_WC_RECV, "the child's last SEND");
	vt_assert(wc.byte_len == 8 && *(uint64_t *)small->addr == DX_SMALL,
		  "the child's last SEND: %u bytes, %#llx", wc.byte_len,
		  (unsigned long long)*(uint64_t *)small->addr);
	taken = dx_sends(scq, qp);
	moved = (uint64_t)taken * DX_LEN;
	vt_assert(moved <= (16u << 20) + DX_SLACK, "the child's teardown took "
		  "%u SENDs, %llu bytes", taken, (unsigned long long)moved);
	/* nothing goes into a receive queue whose claim a dead library holds */
	vt_assert(!held || !taken, "the child's teardown took %u SENDs past "
		  "claims held", taken);
	printf("full-direct-exit%s: %u direct pairs with %u SENDs of %u KiB "
	       "each in their rings, the receiver gone%s: %u taken (%llu "
	       "bytes), the rest failed, and its last 8 bytes landed\n",
	       held ? "-held" : "", DX_PAIRS, DX_MSGS, DX_LEN >> 10,
	       held ? " holding their claims" : "", taken,
	       (unsigned long long)moved);
	return 0;
}

/*
 * A QP in error whose client fills its SQ, 4,096 WQEs at once: the
 * engine flushes them a share a turn, not all in one (abuse.sh counts
 * the turns), and every one completes, in order, as flushed.
 */
#define ERR_FLUSH_WQES	4096u

static int err_flush(void)
{
	struct vt_qp_opts o = { .max_send_wr = ERR_FLUSH_WQES, .max_recv_wr = 16 };
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	struct ibv_wc wc[64];
	struct ibv_mr *buf;
	struct vt_pair p;
	struct vt_dev d;
	uint32_t i, done = 0;
	int n, k;

	vt_open(&d);
	vt_pair(&p, &d, &o, ERR_FLUSH_WQES + 64);
	buf = vt_reg(d.pd, 4096, VT_ACCESS_ALL);
	vt_assert(ibv_modify_qp(p.qp[0], &a, IBV_QP_STATE) == 0, "to ERR: %s",
		  strerror(errno));
	for (i = 0; i < ERR_FLUSH_WQES; i++)
		sq_write_wqe(p.qp[0], i, 0, buf->addr, buf->lkey, 64, buf->addr,
			     buf->rkey);
	sq_publish(p.qp[0], ERR_FLUSH_WQES, true);
	while (done < ERR_FLUSH_WQES) {
		n = vt_poll(p.scq[0], wc, 64, vt_tmo_ms());
		vt_assert(n > 0, "%u of %u WQEs flushed", done, ERR_FLUSH_WQES);
		for (k = 0; k < n; k++, done++)
			vt_assert(wc[k].status == IBV_WC_WR_FLUSH_ERR &&
				  wc[k].wr_id == done, "completion %u: wr_id %llu, %s",
				  done, (unsigned long long)wc[k].wr_id,
				  vt_status(wc[k].status));
	}
	printf("err-flush: %u WQEs of a QP in error, all flushed in order\n",
	       ERR_FLUSH_WQES);
	return 0;
}

#define OVERLAP_LEN	(64u << 10)
#define OVERLAP_SHIFT	100u

static int overlap(void)
{
	struct vt_qp_opts o = { 0 };
	unsigned char *want, *buf;
	struct ibv_mr *mr;
	struct vt_pair p;
	struct vt_dev d;
	struct ibv_wc wc;
	uint32_t i;

	vt_open(&d);
	vt_pair(&p, &d, &o, 64);
	mr = vt_reg_memfd(d.pd, 1 << 20, VT_ACCESS_ALL, "abuse-overlap");
	buf = mr->addr;
	want = malloc(1 << 20);
	vt_assert(want != NULL, "malloc");
	for (i = 0; i < 1 << 20; i++)
		buf[i] = (unsigned char)(i * 7 + i / 251);
	memcpy(want, buf, 1 << 20);
	memmove(want + OVERLAP_SHIFT, want, OVERLAP_LEN);
	/* straight into the ring: the engine's path, not the library's */
	sq_write_wqe(p.qp[0], 0, IBV_SEND_SIGNALED, buf, mr->lkey, OVERLAP_LEN,
		     buf + OVERLAP_SHIFT, mr->rkey);
	sq_publish(p.qp[0], 1, true);
	vt_assert(vt_poll(p.scq[0], &wc, 1, vt_tmo_ms()) == 1, "no completion");
	vt_assert(wc.status == IBV_WC_SUCCESS, "the WRITE: %s",
		  vt_status(wc.status));
	vt_assert(memcmp(buf, want, 1 << 20) == 0,
		  "the MR is not what memmove would have made of it");
	printf("overlap: a WRITE onto its own source landed as memmove's\n");
	free(want);
	return 0;
}

/*
 * A client writes an impossible head into its CQ (past the tail, then a
 * whole lap behind it on a CQ that never had a completion), then resizes
 * it: the resize keeps nothing (the lie costs the liar its completions),
 * where it copied a whole ring's worth of slots under the daemon's
 * objects lock.  The CQ works on.
 */
static int cq_head_lie(void)
{
	struct vt_qp_opts o = { 0 };
	struct ibvc_cq *c;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct vt_pair p;
	struct ibv_wc wc;
	struct vt_dev d;
	uint32_t tail, lie;
	int i;

	vt_open(&d);
	cq = ibv_create_cq(d.ctx, 1 << 16, NULL, NULL, 0);
	vt_assert(cq, "CQ: %s", strerror(errno));
	c = to_ibvc_cq(cq);
	for (i = 0; i < 2; i++) {
		tail = __atomic_load_n(&c->ring.engine->tail, __ATOMIC_ACQUIRE);
		lie = i == 0 ? tail + 1 : tail - c->ring.nslots;
		__atomic_store_n(&c->ring.client->head, lie, __ATOMIC_RELEASE);
		vt_assert(ibv_resize_cq(cq, 1 << (17 + i)) == 0, "resize: %s",
			  strerror(errno));
		vt_assert(c->ring.head == __atomic_load_n(&c->ring.engine->tail,
							  __ATOMIC_ACQUIRE),
			  "the resize after head %s kept %u CQEs of a CQ that had none",
			  i == 0 ? "tail + 1" : "tail - slots",
			  c->ring.engine->tail - c->ring.head);
		vt_assert(ibv_poll_cq(cq, 1, &wc) == 0, "a CQE after the resize");
	}
	/* and it works on: a WRITE's completion */
	vt_pair_on(&p, &d, &o, &o, cq, cq);
	mr = vt_reg(d.pd, 4096, VT_ACCESS_ALL);
	vt_send(p.qp[0], 7, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, mr->addr, 8,
		mr->lkey, (uint64_t)(uintptr_t)mr->addr + 64, mr->rkey);
	vt_expect_ok(cq, &wc, 7, IBV_WC_RDMA_WRITE, "WRITE after the resize");
	printf("cq-head-lie: a resize after an impossible head kept nothing, "
	       "and the CQ works on\n");
	return 0;
}

#define TEARDOWN_QPS	4000
#define TEARDOWN_CQE	(2u << 20)

/* The child of cq_head_teardown: its objects, its lie, and gone. */
static void teardown_lie(void)
{
	struct ibv_qp_init_attr a = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibvc_cq *c;
	struct ibv_cq *cq;
	struct vt_dev d;
	uint32_t tail;
	int i;

	vt_open(&d);
	cq = ibv_create_cq(d.ctx, TEARDOWN_CQE - 1, NULL, NULL, 0);
	vt_assert(cq, "CQ of %u: %s", TEARDOWN_CQE - 1, strerror(errno));
	a.send_cq = a.recv_cq = cq;
	for (i = 0; i < TEARDOWN_QPS; i++)
		vt_assert(ibv_create_qp(d.pd, &a), "QP %d: %s", i, strerror(errno));
	c = to_ibvc_cq(cq);
	tail = __atomic_load_n(&c->ring.engine->tail, __ATOMIC_ACQUIRE);
	__atomic_store_n(&c->ring.client->head, tail - c->ring.nslots,
			 __ATOMIC_RELEASE);
	_exit(0);
}

/* qp to RESET, or through INIT back to it. */
static void to_reset(struct ibv_qp *qp, bool via_init)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };

	if (via_init)
		vt_assert(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0,
			  "to INIT: %s", strerror(errno));
	a.qp_state = IBV_QPS_RESET;
	vt_assert(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0, "to RESET: %s",
		  strerror(errno));
}

/*
 * A RESET looked at every CQ slot the client's head said it had not
 * polled: with its head a lap back, each RESET of any QP of a 2 Mi-entry
 * CQ walked 2 Mi slots with the objects lock held for writing.  Only the
 * QP's own CQEs since its last purge are looked at now.
 */
static int cq_head_reset(void)
{
	struct vt_qp_opts o = { 0 };
	struct ibv_wc wc[4];
	struct ibvc_cq *c;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct vt_pair p;
	struct vt_dev d;
	uint32_t tail;
	int i, n;

	vt_open(&d);
	cq = ibv_create_cq(d.ctx, TEARDOWN_CQE - 1, NULL, NULL, 0);
	vt_assert(cq, "CQ: %s", strerror(errno));
	vt_pair_on(&p, &d, &o, &o, cq, cq);
	mr = vt_reg(d.pd, 4096, VT_ACCESS_ALL);
	for (i = 0; i < 3; i++)
		vt_send(p.qp[i == 1], (uint64_t)i, IBV_WR_RDMA_WRITE,
			IBV_SEND_SIGNALED, mr->addr, 8, mr->lkey,
			(uint64_t)(uintptr_t)mr->addr + 64, mr->rkey);
	c = to_ibvc_cq(cq);
	for (i = 0; i < 1000 && __atomic_load_n(&c->ring.engine->tail,
						 __ATOMIC_ACQUIRE) -
			       c->ring.head < 3; i++)
		usleep(1000);
	to_reset(p.qp[0], false);
	n = ibv_poll_cq(cq, 4, wc);
	vt_assert(n == 1 && wc[0].wr_id == 1 && wc[0].qp_num == p.qp[1]->qp_num,
		  "after QP 0's RESET: %d CQEs, the first of QP %u (want QP 1's)",
		  n, n > 0 ? wc[0].qp_num : 0);
	tail = __atomic_load_n(&c->ring.engine->tail, __ATOMIC_ACQUIRE);
	__atomic_store_n(&c->ring.client->head, tail - c->ring.nslots,
			 __ATOMIC_RELEASE);
	for (i = 0; i < 50; i++)
		to_reset(p.qp[0], true);
	printf("cq-head-reset: a RESET purged its QP's 2 CQEs and left the "
	       "other's; then 50 RESETs with the head a lap back\n");
	return 0;
}

/* n signaled WRITEs of 8 bytes on p's QP 0, each polled from cq. */
static void writes_on(struct vt_pair *p, struct ibv_cq *cq, struct ibv_mr *mr,
		      int n)
{
	struct ibv_wc wc;
	int i;

	for (i = 0; i < n; i++) {
		vt_send(p->qp[0], (uint64_t)i, IBV_WR_RDMA_WRITE,
			IBV_SEND_SIGNALED, mr->addr, 8, mr->lkey,
			(uint64_t)(uintptr_t)mr->addr + 64, mr->rkey);
		vt_expect_ok(cq, &wc, (uint64_t)i, IBV_WC_RDMA_WRITE, "a WRITE");
	}
}

/* One SEND of ini through its target into the SRQ numbered srqn. */
static void send_into(struct ibv_qp *ini, struct ibv_cq *scq, struct ibv_mr *mr,
		      uint32_t srqn)
{
	struct ibv_sge sge = { (uintptr_t)mr->addr, 8, mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 9, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	struct ibv_wc wc;

	wr.qp_type.xrc.remote_srqn = srqn;
	vt_assert(!ibv_post_send(ini, &wr, &bad), "post_send: %s",
		  strerror(errno));
	vt_expect_ok(scq, &wc, 9, IBV_WC_SEND, "a SEND to the target");
}

/*
 * The target's CQE in CQ a at counter 1,000, then one in CQ b at 0, then
 * 1,100 more in b, polled, and b's head put back to 0.  With one span for
 * both CQs, [1000, 1) of b: the RESET walked 2^32 slots.
 */
static int cq_span_xrc(void)
{
	struct vt_qp_opts o = { 0 };
	struct ibv_qp_init_attr_ex a = {
		.cap = { .max_send_wr = 4, .max_send_sge = 1 },
		.qp_type = IBV_QPT_XRC_SEND,
		.comp_mask = IBV_QP_INIT_ATTR_PD,
	};
	struct ibv_cq *cq_a, *cq_b, *scq;
	struct vt_pair pa, pb;
	struct ibv_qp *tgt, *ini;
	struct ibv_srq *sa, *sb;
	struct ibv_xrcd *x;
	struct ibv_mr *mr;
	uint32_t na, nb;
	struct vt_dev d;

	vt_open(&d);
	x = xrcd_of(&d, -1);
	cq_a = ibv_create_cq(d.ctx, 4096, NULL, NULL, 0);
	cq_b = ibv_create_cq(d.ctx, 4096, NULL, NULL, 0);
	scq = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
	vt_assert(cq_a && cq_b && scq, "CQs: %s", strerror(errno));
	sa = srq_of(&d, x, cq_a, &na);
	sb = srq_of(&d, x, cq_b, &nb);
	mr = vt_reg(d.pd, 4096, VT_ACCESS_ALL);
	vt_srq_recv(sa, 1, mr->addr, 64, mr->lkey);
	vt_srq_recv(sb, 2, mr->addr, 64, mr->lkey);
	tgt = target_of(&d, x);
	a.send_cq = a.recv_cq = scq;
	a.pd = d.pd;
	ini = ibv_create_qp_ex(d.ctx, &a);
	vt_assert(ini, "initiator: %s", strerror(errno));
	connect_xrc(&d, ini, tgt);
	vt_pair_on(&pa, &d, &o, &o, cq_a, cq_a);
	vt_pair_on(&pb, &d, &o, &o, cq_b, cq_b);
	writes_on(&pa, cq_a, mr, 1000);
	send_into(ini, scq, mr, na);
	send_into(ini, scq, mr, nb);
	{
		struct ibv_wc wc;

		vt_expect_ok(cq_b, &wc, 2, IBV_WC_RECV, "the target's receive in b");
	}
	writes_on(&pb, cq_b, mr, 1100);
	{
		struct ibvc_cq *c = to_ibvc_cq(cq_b);
		uint32_t tail = __atomic_load_n(&c->ring.engine->tail,
						__ATOMIC_ACQUIRE);

		__atomic_store_n(&c->ring.client->head, tail - 1101,
				 __ATOMIC_RELEASE);
	}
	to_reset(tgt, false);
	printf("cq-span-xrc: the target's CQEs in two CQs, then its RESET\n");
	return 0;
}

/*
 * Every QP of a context torn down had its CQs walked for its CQEs, as
 * far as the client's head said: 4,000 walks of 2 Mi slots (512 GiB of
 * reads) on the control thread, every tenant waiting.  The CQs go too.
 */
static int cq_head_teardown(void)
{
	struct vt_dev d;
	long t0, ms;
	pid_t pid;
	int st;

	pid = fork();
	vt_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0)
		teardown_lie();
	vt_assert(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
		  WEXITSTATUS(st) == 0, "the child failed (status %#x)", st);
	t0 = vt_now_ms();
	/* the daemon at the child's teardown, not before */
	usleep(300 * 1000);
	vt_open(&d);
	ms = vt_now_ms() - t0;
	vt_assert(ms < vt_tmo_ms(), "a context opened %ld ms after the child's exit",
		  ms);
	vt_close(&d);
	printf("cq-head-teardown: %d QPs on a CQ of %u with its head a lap "
	       "back: a new context %ld ms after its exit\n", TEARDOWN_QPS,
	       TEARDOWN_CQE, ms);
	return 0;
}

/*
 * A client keeps its ring arena's file (through /proc/self/map_files, as
 * root may; a client of its own could keep OPEN_DEVICE's fd) and closes
 * its context after the engine wrote KEEP_CQES completions into a CQ of
 * that size: the daemon gives the arena's pages back all the same, for
 * what the engine wrote there is the daemon's memory.  Before, a context
 * torn down gave its blocks back one by one; for a while, not at all.
 */
#define KEEP_CQES	65536u
#define KEEP_BATCH	512u

static int arena_file_open(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512], path[600];
	int fd = -1;

	vt_assert(f, "/proc/self/maps: %s", strerror(errno));
	while (fd < 0 && fgets(line, sizeof(line), f)) {
		if (!strstr(line, "ibvd-rings"))
			continue;
		*strchr(line, ' ') = '\0';
		snprintf(path, sizeof(path), "/proc/self/map_files/%s", line);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		vt_assert(fd >= 0, "open %s: %s", path, strerror(errno));
	}
	fclose(f);
	vt_assert(fd >= 0, "no ring arena in /proc/self/maps");
	return fd;
}

static long long file_bytes(int fd)
{
	struct stat st;

	vt_assert(fstat(fd, &st) == 0, "fstat: %s", strerror(errno));
	return (long long)st.st_blocks * 512;
}

static int keep_rings(void)
{
	struct vt_qp_opts o = { .max_send_wr = KEEP_BATCH };
	struct ibv_wc wc[64];
	struct ibv_cq *cq, *cq1;
	long long held, left;
	struct ibv_mr *mr;
	struct vt_pair p;
	struct vt_dev d;
	unsigned int i, done = 0;
	long t0;
	int fd, n;

	vt_open(&d);
	cq = ibv_create_cq(d.ctx, KEEP_CQES, NULL, NULL, 0);
	cq1 = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
	vt_assert(cq && cq1, "CQ: %s", strerror(errno));
	vt_pair_on(&p, &d, &o, &o, cq, cq1);
	mr = vt_reg(d.pd, 4096, VT_ACCESS_ALL);
	fd = arena_file_open();
	while (done < KEEP_CQES) {
		for (i = 0; i < KEEP_BATCH; i++)
			vt_send(p.qp[0], done + i, IBV_WR_RDMA_WRITE,
				IBV_SEND_SIGNALED, mr->addr, 8, mr->lkey,
				(uintptr_t)mr->addr + 64, mr->rkey);
		for (i = 0; i < KEEP_BATCH; i += (unsigned int)n) {
			n = vt_poll(cq, wc, 64, vt_tmo_ms());
			vt_assert(n > 0, "%u of %u completions", done + i, KEEP_CQES);
		}
		done += KEEP_BATCH;
	}
	held = file_bytes(fd);
	vt_assert(held >= (long long)KEEP_CQES * 64,
		  "the arena holds %lld bytes with %u CQEs written", held, KEEP_CQES);
	/* gone with its objects, as a dying app's are */
	vt_assert(ibv_close_device(d.ctx) == 0, "ibv_close_device");
	t0 = vt_now_ms();
	while ((left = file_bytes(fd)) >= 1 << 20 && vt_now_ms() - t0 < vt_tmo_ms())
		vt_sleep_ms(10);
	vt_assert(left < 1 << 20, "the arena still holds %lld bytes after the "
		  "context closed (%lld before)", left, held);
	printf("keep-rings: the kept arena file held %lld bytes, %lld after the "
	       "context closed\n", held, left);
	close(fd);
	return 0;
}

/*
 * kick-jam: the kick eventfd came to the client over SCM_RIGHTS, so it is
 * one open file with the daemon's: clearing O_NONBLOCK there clears it
 * for the daemon too, and a counter one short of its maximum makes every
 * write of 1 wait for a read that never comes (the engine never reads
 * it).  The daemon, ringing a doorbell of a sleeping engine on the
 * control thread (a MODIFY_QP) or on an engine thread, waited there for
 * ever, every tenant with it.
 */
#define KICK_MOVES	20

/* The context's kick eventfd made blocking, its counter full. */
static void kick_jam_fd(struct ibv_context *ctx)
{
	int fd = to_ibvc_context(ctx)->kick_fd, fl = fcntl(fd, F_GETFL);
	uint64_t full = UINT64_MAX - 1, v;

	vt_assert(fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0,
		  "fcntl: %s", strerror(errno));
	/* empty first (or the write would not fit), then full */
	(void)!read(fd, &v, sizeof(v));
	vt_assert(write(fd, &full, sizeof(full)) == sizeof(full),
		  "filling the kick eventfd: %s", strerror(errno));
	vt_assert(fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == 0, "fcntl: %s",
		  strerror(errno));
}

static void kick_jam_child(int ready)
{
	struct vt_qp_opts o = { 0 };
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };
	struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT };
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct vt_dev d;
	unsigned int i;
	char c = 'r';

	vt_open(&d);
	cq = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
	vt_assert(cq != NULL, "ibv_create_cq: %s", strerror(errno));
	qp = vt_qp(&d, cq, cq, &o);
	init.port_num = d.port_num;
	kick_jam_fd(d.ctx);
	vt_assert(write(ready, &c, 1) == 1, "ready: %s", strerror(errno));
	for (i = 0; i < KICK_MOVES; i++) {
		/* let the engine fall asleep: the daemon rings it then */
		vt_sleep_ms(20);
		vt_assert(ibv_modify_qp(qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0,
			  "to INIT: %s", strerror(errno));
		vt_assert(ibv_modify_qp(qp, &err, IBV_QP_STATE) == 0,
			  "to ERR: %s", strerror(errno));
		vt_assert(ibv_modify_qp(qp, &reset, IBV_QP_STATE) == 0,
			  "to RESET: %s", strerror(errno));
	}
	c = 'd';
	vt_assert(write(ready, &c, 1) == 1, "done: %s", strerror(errno));
	_exit(0);
}

/* A byte from fd within ms, or 0. */
static char byte_within(int fd, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char c = 0;

	if (poll(&pfd, 1, ms) == 1 && read(fd, &c, 1) != 1)
		c = 0;
	return c;
}

static void on_alarm(int sig)
{
	static const char msg[] = "kick-jam: the daemon stopped answering "
				  "another context\n";

	(void)sig;
	(void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
	_exit(1);
}

static int kick_jam(void)
{
	struct ibv_device_attr attr;
	struct vt_dev other;
	int pipefd[2], st;
	pid_t pid;
	char c;

	vt_assert(pipe(pipefd) == 0, "pipe: %s", strerror(errno));
	pid = fork();
	vt_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		close(pipefd[0]);
		kick_jam_child(pipefd[1]);
	}
	close(pipefd[1]);
	c = byte_within(pipefd[0], vt_tmo_ms());
	vt_assert(c == 'r', "the child did not get ready");
	/* while the child's moves go on: a jammed daemon answers nobody */
	vt_sleep_ms(100);
	signal(SIGALRM, on_alarm);
	alarm((unsigned int)(vt_tmo_ms() / 1000));
	vt_open(&other);
	vt_assert(ibv_query_device(other.ctx, &attr) == 0,
		  "ibv_query_device: %s", strerror(errno));
	alarm(0);
	c = byte_within(pipefd[0], vt_tmo_ms());
	if (c != 'd')
		kill(pid, SIGKILL);
	vt_assert(waitpid(pid, &st, 0) == pid, "waitpid: %s", strerror(errno));
	vt_assert(c == 'd' && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "the child's %u moves of its QP did not all return (status %#x)",
		  KICK_MOVES, st);
	vt_close(&other);
	printf("kick-jam: %u doorbells rung past a blocking, full kick "
	       "eventfd; another context served meanwhile\n", 2 * KICK_MOVES);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "tgt-sq"))
		return tgt_sq(argv[2]);
	if (argc == 2 && !strcmp(argv[1], "srq-gone"))
		return srq_gone();
	if (argc == 2 && !strcmp(argv[1], "keep-rings"))
		return keep_rings();
	if (argc == 2 && !strcmp(argv[1], "srqn-rewrite"))
		return srqn_rewrite();
	if (argc == 2 && !strcmp(argv[1], "opener-closes"))
		return opener_closes();
	if (argc == 2 && !strcmp(argv[1], "srq-claim"))
		return srq_claim();
	if (argc == 2 && !strcmp(argv[1], "ud-claim"))
		return ud_claim();
	if (argc == 2 && !strcmp(argv[1], "ud-claim-brief"))
		return ud_claim_brief();
	if (argc == 2 && !strcmp(argv[1], "ud-claim-park"))
		return ud_claim_park();
	if (argc == 2 && !strcmp(argv[1], "ud-park-reset"))
		return ud_park_reset();
	if (argc == 2 && !strcmp(argv[1], "ud-park-share"))
		return ud_park_share();
	if (argc == 2 && !strcmp(argv[1], "ud-forged-sl"))
		return ud_forged_sl();
	if (argc == 2 && !strcmp(argv[1], "ud-park-mcast"))
		return ud_park_mcast();
	if (argc == 2 && !strcmp(argv[1], "cq-head-lie"))
		return cq_head_lie();
	if (argc == 2 && !strcmp(argv[1], "cq-head-reset"))
		return cq_head_reset();
	if (argc == 2 && !strcmp(argv[1], "cq-span-xrc"))
		return cq_span_xrc();
	if (argc == 2 && !strcmp(argv[1], "cq-head-teardown"))
		return cq_head_teardown();
	if (argc == 2 && !strcmp(argv[1], "full-sq-destroy"))
		return full_sq_destroy();
	if (argc == 2 && !strcmp(argv[1], "full-sq-exit"))
		return full_sq_exit(false);
	if (argc == 2 && !strcmp(argv[1], "full-sq-exit-long"))
		return full_sq_exit(true);
	if (argc == 2 && !strcmp(argv[1], "full-direct-exit"))
		return full_direct_exit(false);
	if (argc == 2 && !strcmp(argv[1], "full-direct-exit-held"))
		return full_direct_exit(true);
	if (argc == 2 && !strcmp(argv[1], "overlap"))
		return overlap();
	if (argc == 2 && !strcmp(argv[1], "kick-jam"))
		return kick_jam();
	if (argc == 2 && !strcmp(argv[1], "err-flush"))
		return err_flush();
	if (argc == 2 && !strcmp(argv[1], "srq-forged-claim"))
		return srq_forged_claim();
	if ((argc == 2 || (argc == 3 && !strcmp(argv[2], "paced"))) &&
	    !strcmp(argv[1], "mcast-fanout"))
		return mcast_fanout(false);
	if (argc == 2 && !strcmp(argv[1], "mcast-claims"))
		return mcast_fanout(true);
	if (argc == 2 && !strcmp(argv[1], "mcast-srq"))
		return mcast_srq();
	if (argc == 2 && !strcmp(argv[1], "mcast-contend"))
		return mcast_contend();
	fprintf(stderr, "usage: abuse-helper tgt-sq err|rts | srq-gone | srqn-rewrite | opener-closes | srq-claim | ud-claim | ud-claim-brief | ud-claim-park | ud-park-reset | ud-park-share | ud-forged-sl | ud-park-mcast | full-sq-destroy | full-sq-exit | full-sq-exit-long | full-direct-exit | full-direct-exit-held | overlap | kick-jam | srq-forged-claim | mcast-fanout [paced] | mcast-claims | mcast-srq | mcast-contend | err-flush\n");
	return 2;
}
