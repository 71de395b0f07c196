/*
 * stress-helper: thread safety of the data path and the control path.
 *
 * For SECONDS (default 4):
 *   - 4 poster threads: threads 0 and 1 post to the same RC QP (and the
 *     same receive queue of its peer), threads 2 and 3 each to their own;
 *     SEND (some inline), RDMA WRITE and RDMA READ, every WR signaled,
 *     sizes varying from 1 byte to a slot, several WRs per call now and
 *     then;
 *   - 2 poller threads poll the one CQ that every QP uses for sends and
 *     receives, and check each completion: status, opcode, length, and the
 *     data (the received message, the written target, the read buffer);
 *   - 2 churn threads create and destroy PDs, MRs, CQs and QPs (one of them
 *     also whole device contexts, with UD QPs and AHs) on the same context.
 * Then everything posted must have completed exactly once: each send-side
 * WR once, each SEND's message received once, and no completion twice.
 *
 * Prints per-thread counts and "stress: ok ..."; exits 0, or 1 on failure.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vt.h"

#define NPOST		4
#define NPOLL		2
#define NCHURN		2
#define WIN		16		/* slots (WRs in flight) per poster */
#define SLOT		4096		/* bytes per slot */
#define MAXOPS		(1u << 22)	/* per poster: the bitmaps' size */
#define NPAIR		3
#define RSRC_LEN	(64 * 1024)	/* what RDMA READs read */
#define RSRC_SEED	99u
#define MAGIC		0x57e55ull
#define INLINE_WANT	64

/* wr_id: kind (2 bits) | poster (4) | slot (8) | op number (32) */
enum { K_SEND = 1, K_WRITE = 2, K_READ = 3, K_RECV = 0 };
#define WRID(k, t, slot, s) \
	(((uint64_t)(k) << 62) | ((uint64_t)(t) << 56) | ((uint64_t)(slot) << 48) | (uint64_t)(s))
#define WR_K(w)		((unsigned int)((w) >> 62))
#define WR_T(w)		((unsigned int)(((w) >> 56) & 0xf))
#define WR_SLOT(w)	((unsigned int)(((w) >> 48) & 0xff))
#define WR_S(w)		((uint32_t)(w))

/* The header of every SEND message, then the pattern. */
struct msg_hdr {
	uint64_t magic;
	uint32_t sender;
	uint32_t seq;
	uint32_t len;
	uint32_t pad;
};

struct poster {
	unsigned int t;
	struct ibv_qp *qp;		/* sends */
	struct ibv_qp *rqp;		/* the peer: receives */
	uint8_t *src, *rbuf, *tgt, *rd;	/* WIN slots each */
	int busy[WIN];			/* completions still due for the slot */
	uint32_t len[WIN];		/* length of the op in the slot */
	uint32_t seq[WIN];		/* op number in the slot */
	uint64_t *done;			/* bitmap: send-side completions */
	uint64_t *rcvd;			/* bitmap: SENDs received */
	uint8_t *kind;			/* per op: K_* */
	uint32_t nops;			/* ops posted */
	unsigned long nsend, nwrite, nread, ninline, nbatch;
	pthread_t th;
};

static struct vt_dev D;
static struct ibv_cq *CQ;
static struct ibv_mr *MR;		/* everything the posters use */
static uint8_t *RSRC;			/* inside MR */
static struct ibv_qp *QP[NPAIR][2];
static struct poster P[NPOST];
static uint32_t max_inline;

static int stop_posting, stop_polling, stop_churn;
static long outstanding;		/* completions due, all posters */
static unsigned long polled[NPOLL], churned[NCHURN], ctx_churned;

static void relax(unsigned long *spins)
{
	if ((++*spins & 255) == 0)
		sched_yield();	/* 2 CPUs, many threads: let the others run */
}

static uint32_t seed_of(uint32_t sender, uint32_t seq)
{
	return sender * 1000003u + seq;
}

static int test_and_set(uint64_t *bm, uint32_t i)
{
	uint64_t bit = 1ull << (i % 64);

	return (__atomic_fetch_or(&bm[i / 64], bit, __ATOMIC_ACQ_REL) & bit) != 0;
}

static int is_set(const uint64_t *bm, uint32_t i)
{
	return (__atomic_load_n(&bm[i / 64], __ATOMIC_ACQUIRE) >> (i % 64)) & 1;
}

/* ---- posters ------------------------------------------------------------- */

static void post_recv(struct poster *p, unsigned int slot)
{
	struct ibv_recv_wr wr, *bad = NULL;
	struct ibv_sge sge;
	int r;

	sge.addr = (uintptr_t)(p->rbuf + (size_t)slot * SLOT);
	sge.length = SLOT;
	sge.lkey = MR->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = WRID(K_RECV, p->t, slot, 0);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	r = ibv_post_recv(p->rqp, &wr, &bad);
	vt_assert(r == 0, "poster %u: ibv_post_recv: %s", p->t, strerror(r));
}

/* Prepare op s in its slot; fills wr/sge, returns the kind. */
static unsigned int prepare(struct poster *p, uint32_t s, struct ibv_send_wr *wr,
			    struct ibv_sge *sge)
{
	unsigned int slot = s % WIN, k;
	uint32_t len = 1 + (s * 2654435761u) % SLOT;
	uint8_t *src = p->src + (size_t)slot * SLOT;

	switch (s % 5) {
	case 0: case 1: case 2: k = K_SEND; break;
	case 3: k = K_WRITE; break;
	default: k = K_READ; break;
	}
	memset(wr, 0, sizeof(*wr));
	memset(sge, 0, sizeof(*sge));
	if (k == K_SEND && len < sizeof(struct msg_hdr))
		len = sizeof(struct msg_hdr);
	p->len[slot] = len;
	p->seq[slot] = s;
	p->kind[s] = (uint8_t)k;
	sge->lkey = MR->lkey;
	sge->length = len;
	wr->wr_id = WRID(k, p->t, slot, s);
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->send_flags = IBV_SEND_SIGNALED;
	switch (k) {
	case K_SEND: {
		struct msg_hdr h = { MAGIC, p->t, s, len, 0 };

		memcpy(src, &h, sizeof(h));
		vt_fill(src + sizeof(h), len - sizeof(h), sizeof(h), seed_of(p->t, s));
		sge->addr = (uintptr_t)src;
		wr->opcode = IBV_WR_SEND;
		if (len <= max_inline && s % 2) {
			wr->send_flags |= IBV_SEND_INLINE;
			p->ninline++;
		}
		p->nsend++;
		break;
	}
	case K_WRITE:
		vt_fill(src, len, 0, seed_of(p->t, s));
		sge->addr = (uintptr_t)src;
		wr->opcode = IBV_WR_RDMA_WRITE;
		wr->wr.rdma.remote_addr = (uintptr_t)(p->tgt + (size_t)slot * SLOT);
		wr->wr.rdma.rkey = MR->rkey;
		p->nwrite++;
		break;
	default:
		memset(p->rd + (size_t)slot * SLOT, 0, len);
		sge->addr = (uintptr_t)(p->rd + (size_t)slot * SLOT);
		wr->opcode = IBV_WR_RDMA_READ;
		wr->wr.rdma.remote_addr = (uintptr_t)(RSRC + (s % 16) * 4096);
		wr->wr.rdma.rkey = MR->rkey;
		p->nread++;
		break;
	}
	return k;
}

static void *poster_main(void *arg)
{
	struct poster *p = arg;
	unsigned long spins = 0;
	uint32_t s = 0;

	while (!__atomic_load_n(&stop_posting, __ATOMIC_ACQUIRE)) {
		struct ibv_send_wr wr[3], *bad = NULL;
		struct ibv_sge sge[3];
		unsigned int n, i, k, slot;
		int r, ready = 1;

		vt_assert(s + 3 < MAXOPS, "poster %u: more than %u ops", p->t, MAXOPS);
		/* 1 WR per call mostly, sometimes a list of 2 or 3 */
		n = s % 7 == 0 ? 3 : s % 11 == 0 ? 2 : 1;
		for (i = 0; i < n; i++)
			if (__atomic_load_n(&p->busy[(s + i) % WIN], __ATOMIC_ACQUIRE))
				ready = 0;
		if (!ready) {
			relax(&spins);
			continue;
		}
		for (i = 0; i < n; i++) {
			slot = (s + i) % WIN;
			k = prepare(p, s + i, &wr[i], &sge[i]);
			wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
			p->busy[slot] = k == K_SEND ? 2 : 1;
			__atomic_add_fetch(&outstanding, k == K_SEND ? 2 : 1, __ATOMIC_ACQ_REL);
			/* The receive first: there is always one for each SEND. */
			if (k == K_SEND)
				post_recv(p, slot);
		}
		r = ibv_post_send(p->qp, &wr[0], &bad);
		vt_assert(r == 0, "poster %u: ibv_post_send of %u WRs (op %u): %s", p->t, n, s,
			  strerror(r));
		if (n > 1)
			p->nbatch++;
		s += n;
		__atomic_store_n(&p->nops, s, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* ---- pollers ---------------------------------------------------------------- */

static void slot_done(struct poster *p, unsigned int slot)
{
	int left = __atomic_sub_fetch(&p->busy[slot], 1, __ATOMIC_ACQ_REL);

	vt_assert(left >= 0, "poster %u slot %u: more completions than due", p->t, slot);
}

static void check_wc(const struct ibv_wc *wc)
{
	unsigned int k = WR_K(wc->wr_id), t = WR_T(wc->wr_id), slot = WR_SLOT(wc->wr_id);
	uint32_t s = WR_S(wc->wr_id);
	struct poster *p;

	vt_assert(wc->status == IBV_WC_SUCCESS,
		  "completion wr_id 0x%llx (kind %u poster %u op %u) status %s (%d) vendor_err %u",
		  (unsigned long long)wc->wr_id, k, t, s, vt_status(wc->status), wc->status,
		  wc->vendor_err);
	vt_assert(t < NPOST && slot < WIN, "completion with a wr_id we never used: 0x%llx",
		  (unsigned long long)wc->wr_id);
	p = &P[t];
	if (k == K_RECV) {
		struct msg_hdr h;
		const uint8_t *buf = p->rbuf + (size_t)slot * SLOT;

		vt_assert(wc->opcode == IBV_WC_RECV, "receive completion opcode %d", wc->opcode);
		memcpy(&h, buf, sizeof(h));
		vt_assert(h.magic == MAGIC && h.sender < NPOST && wc->byte_len == h.len,
			  "received message in poster %u slot %u: magic 0x%llx sender %u len %u, byte_len %u",
			  t, slot, (unsigned long long)h.magic, h.sender, h.len, wc->byte_len);
		/* threads 0 and 1 share a receive queue; the others their own */
		vt_assert(h.sender == t || (h.sender < 2 && t < 2),
			  "poster %u's receive buffer got a message from poster %u", t, h.sender);
		vt_assert(h.seq < __atomic_load_n(&P[h.sender].nops, __ATOMIC_ACQUIRE) + 3,
			  "message from poster %u op %u: never posted", h.sender, h.seq);
		vt_expect_pat(buf + sizeof(h), h.len - sizeof(h), sizeof(h),
			      seed_of(h.sender, h.seq), "received message");
		vt_assert(!test_and_set(P[h.sender].rcvd, h.seq),
			  "poster %u op %u received twice", h.sender, h.seq);
		slot_done(p, slot);
		return;
	}
	vt_assert(p->seq[slot] == s, "poster %u slot %u: completion for op %u, slot holds op %u",
		  t, slot, s, p->seq[slot]);
	vt_assert(p->kind[s] == k, "poster %u op %u: completion kind %u, posted kind %u",
		  t, s, k, p->kind[s]);
	switch (k) {
	case K_SEND:
		vt_assert(wc->opcode == IBV_WC_SEND, "SEND completion opcode %d", wc->opcode);
		break;
	case K_WRITE:
		vt_assert(wc->opcode == IBV_WC_RDMA_WRITE, "WRITE completion opcode %d", wc->opcode);
		vt_expect_pat(p->tgt + (size_t)slot * SLOT, p->len[slot], 0, seed_of(t, s),
			      "RDMA WRITE target");
		break;
	default:
		vt_assert(wc->opcode == IBV_WC_RDMA_READ, "READ completion opcode %d", wc->opcode);
		vt_expect_pat(p->rd + (size_t)slot * SLOT, p->len[slot], (s % 16) * 4096,
			      RSRC_SEED, "RDMA READ result");
		break;
	}
	vt_assert(!test_and_set(p->done, s), "poster %u op %u completed twice", t, s);
	slot_done(p, slot);
}

static void *poller_main(void *arg)
{
	unsigned int id = (unsigned int)(uintptr_t)arg;
	unsigned long spins = 0;
	struct ibv_wc wc[8];
	int n, i;

	while (!__atomic_load_n(&stop_polling, __ATOMIC_ACQUIRE)) {
		n = ibv_poll_cq(CQ, (int)VT_ARRAY_SIZE(wc), wc);
		vt_assert(n >= 0, "poller %u: ibv_poll_cq: %d", id, n);
		if (n == 0) {
			relax(&spins);
			continue;
		}
		for (i = 0; i < n; i++)
			check_wc(&wc[i]);
		polled[id] += (unsigned long)n;
		__atomic_sub_fetch(&outstanding, n, __ATOMIC_ACQ_REL);
	}
	return NULL;
}

/* ---- churn ------------------------------------------------------------------ */

static void churn_objects(struct ibv_context *ctx, unsigned int i, int ud)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_ah *ah = NULL;
	size_t len = 4096 * (1 + i % 4);
	void *buf;
	int r;

	pd = ibv_alloc_pd(ctx);
	vt_assert(pd, "churn: ibv_alloc_pd: %s", strerror(errno));
	buf = malloc(len);
	vt_assert(buf, "malloc");
	memset(buf, (int)i, len);
	mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	vt_assert(mr, "churn: ibv_reg_mr: %s", strerror(errno));
	cq = ibv_create_cq(ctx, 16 + (int)(i % 64), NULL, NULL, 0);
	vt_assert(cq, "churn: ibv_create_cq: %s", strerror(errno));
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = ud ? IBV_QPT_UD : IBV_QPT_RC;
	ia.cap.max_send_wr = 8;
	ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(pd, &ia);
	vt_assert(qp, "churn: ibv_create_qp: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	if (ud)
		a.qkey = VT_QKEY;
	else
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	r = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS));
	vt_assert(r == 0, "churn: modify QP to INIT: %s", strerror(r));
	if (ud) {
		struct ibv_ah_attr aa;

		memset(&aa, 0, sizeof(aa));
		aa.dlid = D.port.lid;
		aa.port_num = 1;
		ah = ibv_create_ah(pd, &aa);
		vt_assert(ah, "churn: ibv_create_ah: %s", strerror(errno));
	}
	if (ah)
		vt_assert(ibv_destroy_ah(ah) == 0, "churn: ibv_destroy_ah");
	r = ibv_destroy_qp(qp);
	vt_assert(r == 0, "churn: ibv_destroy_qp: %s", strerror(r));
	r = ibv_destroy_cq(cq);
	vt_assert(r == 0, "churn: ibv_destroy_cq: %s", strerror(r));
	r = ibv_dereg_mr(mr);
	vt_assert(r == 0, "churn: ibv_dereg_mr: %s", strerror(r));
	vt_expect_byte(buf, len, (uint8_t)i, "churn: a deregistered buffer");
	free(buf);
	r = ibv_dealloc_pd(pd);
	vt_assert(r == 0, "churn: ibv_dealloc_pd: %s", strerror(r));
}

static void *churn_main(void *arg)
{
	unsigned int id = (unsigned int)(uintptr_t)arg, i = 0;

	while (!__atomic_load_n(&stop_churn, __ATOMIC_ACQUIRE)) {
		if (id == 1 && i % 8 == 7) {
			/* a whole context of its own, opened and closed */
			struct vt_dev d2;

			vt_open(&d2);
			churn_objects(d2.ctx, i, 1);
			vt_close(&d2);
			ctx_churned++;
		} else {
			churn_objects(D.ctx, i, id == 1 && i % 2);
		}
		i++;
		churned[id] = i;
	}
	return NULL;
}

/* ---- main ------------------------------------------------------------------- */

static void setup(void)
{
	size_t per = (size_t)4 * WIN * SLOT, total = NPOST * per + RSRC_LEN;
	struct vt_qp_opts o;
	struct vt_addr a[2];
	uint8_t *base;
	unsigned int i, j;

	vt_open(&D);
	CQ = ibv_create_cq(D.ctx, 1024, NULL, NULL, 0);
	vt_assert(CQ, "ibv_create_cq: %s", strerror(errno));
	MR = vt_reg(D.pd, total, VT_ACCESS_ALL);
	base = MR->addr;
	RSRC = base + NPOST * per;
	vt_fill(RSRC, RSRC_LEN, 0, RSRC_SEED);

	memset(&o, 0, sizeof(o));
	o.max_send_wr = 4 * WIN;
	o.max_recv_wr = 4 * WIN;
	o.max_send_sge = 1;
	o.max_recv_sge = 1;
	o.max_inline = INLINE_WANT;
	for (i = 0; i < NPAIR; i++) {
		for (j = 0; j < 2; j++) {
			struct ibv_qp_init_attr ia;
			struct ibv_qp_attr qa;

			QP[i][j] = vt_qp(&D, CQ, CQ, &o);
			vt_qp_addr(&D, QP[i][j], &o, &a[j]);
			vt_assert(ibv_query_qp(QP[i][j], &qa, IBV_QP_CAP, &ia) == 0, "ibv_query_qp");
			max_inline = ia.cap.max_inline_data;
		}
		vt_connect(&D, QP[i][0], &a[1], &o);
		vt_connect(&D, QP[i][1], &a[0], &o);
	}
	for (i = 0; i < NPOST; i++) {
		struct poster *p = &P[i];
		uint8_t *b = base + i * per;
		unsigned int pair = i < 2 ? 0 : i - 1;

		p->t = i;
		p->qp = QP[pair][0];
		p->rqp = QP[pair][1];
		p->src = b;
		p->rbuf = b + WIN * SLOT;
		p->tgt = b + 2 * WIN * SLOT;
		p->rd = b + 3 * WIN * SLOT;
		p->done = calloc(MAXOPS / 64, sizeof(uint64_t));
		p->rcvd = calloc(MAXOPS / 64, sizeof(uint64_t));
		p->kind = calloc(MAXOPS, 1);
		vt_assert(p->done && p->rcvd && p->kind, "calloc");
	}
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 4.0;
	pthread_t pollers[NPOLL], churners[NCHURN];
	unsigned long total = 0, sends = 0;
	long deadline, left;
	unsigned int i;
	uint32_t s;
	int r;

	setvbuf(stdout, NULL, _IOLBF, 0);
	vt_assert(secs > 0 && secs < 600, "SECONDS: %s", argv[1]);
	setup();
	printf("stress: %d posters (0 and 1 on one QP), %d pollers on one CQ, %d churners, "
	       "%.1f s, max_inline %u\n", NPOST, NPOLL, NCHURN, secs, max_inline);

	for (i = 0; i < NPOLL; i++) {
		r = pthread_create(&pollers[i], NULL, poller_main, (void *)(uintptr_t)i);
		vt_assert(r == 0, "pthread_create: %s", strerror(r));
	}
	for (i = 0; i < NCHURN; i++) {
		r = pthread_create(&churners[i], NULL, churn_main, (void *)(uintptr_t)i);
		vt_assert(r == 0, "pthread_create: %s", strerror(r));
	}
	for (i = 0; i < NPOST; i++) {
		r = pthread_create(&P[i].th, NULL, poster_main, &P[i]);
		vt_assert(r == 0, "pthread_create: %s", strerror(r));
	}
	vt_sleep_ms((long)(secs * 1000));
	__atomic_store_n(&stop_posting, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&stop_churn, 1, __ATOMIC_RELEASE);
	for (i = 0; i < NPOST; i++)
		pthread_join(P[i].th, NULL);

	/* Everything posted completes, within the usual bound. */
	deadline = vt_now_ms() + vt_tmo_ms();
	while ((left = __atomic_load_n(&outstanding, __ATOMIC_ACQUIRE)) > 0) {
		vt_assert(vt_now_ms() < deadline,
			  "%ld completions still missing %d ms after the posters stopped",
			  left, vt_tmo_ms());
		vt_sleep_ms(1);
	}
	vt_assert(left == 0, "%ld more completions than posted", -left);
	__atomic_store_n(&stop_polling, 1, __ATOMIC_RELEASE);
	for (i = 0; i < NPOLL; i++)
		pthread_join(pollers[i], NULL);
	for (i = 0; i < NCHURN; i++)
		pthread_join(churners[i], NULL);
	vt_expect_none(CQ, 100, "the shared CQ after the drain");

	/* exactly once: every op done, every SEND received, nothing beyond */
	for (i = 0; i < NPOST; i++) {
		struct poster *p = &P[i];

		for (s = 0; s < p->nops; s++) {
			vt_assert(is_set(p->done, s), "poster %u op %u (kind %u) never completed",
				  i, s, p->kind[s]);
			vt_assert(is_set(p->rcvd, s) == (p->kind[s] == K_SEND),
				  "poster %u op %u (kind %u): received %d", i, s, p->kind[s],
				  is_set(p->rcvd, s));
		}
		for (; s < p->nops + 64 && s < MAXOPS; s++)
			vt_assert(!is_set(p->done, s) && !is_set(p->rcvd, s),
				  "poster %u op %u: completed but never posted", i, s);
		for (s = 0; s < WIN; s++)
			vt_assert(p->busy[s] == 0, "poster %u slot %u: %d completions due", i, s,
				  p->busy[s]);
		printf("poster %u: %u ops (%lu SEND of which %lu inline, %lu WRITE, %lu READ; "
		       "%lu multi-WR posts)\n", i, p->nops, p->nsend, p->ninline, p->nwrite,
		       p->nread, p->nbatch);
		total += p->nops;
		sends += p->nsend;
		vt_assert(p->nops > 0, "poster %u posted nothing", i);
	}
	for (i = 0; i < NPOLL; i++) {
		printf("poller %u: %lu completions\n", i, polled[i]);
		vt_assert(polled[i] > 0, "poller %u polled nothing", i);
	}
	for (i = 0; i < NCHURN; i++) {
		printf("churn %u: %lu PD+MR+CQ+QP cycles\n", i, churned[i]);
		vt_assert(churned[i] > 0, "churn thread %u did nothing", i);
	}
	printf("churn 1: %lu of them in a context of their own\n", ctx_churned);

	for (i = 0; i < NPAIR; i++) {
		vt_assert(vt_qp_state(QP[i][0]) == IBV_QPS_RTS &&
			  vt_qp_state(QP[i][1]) == IBV_QPS_RTS, "pair %u left RTS", i);
		vt_assert(ibv_destroy_qp(QP[i][0]) == 0 && ibv_destroy_qp(QP[i][1]) == 0,
			  "ibv_destroy_qp");
	}
	vt_assert(ibv_destroy_cq(CQ) == 0, "ibv_destroy_cq");
	vt_dereg(MR);
	vt_close(&D);
	for (i = 0; i < NPOST; i++) {
		free(P[i].done);
		free(P[i].rcvd);
		free(P[i].kind);
	}
	printf("stress: ok: %lu WRs (%lu SENDs) each completed exactly once, data intact\n",
	       total, sends);
	return 0;
}
