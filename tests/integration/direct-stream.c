/*
 * direct-helper stream SECONDS [SEED]: a streaming sender against a
 * receiver that is slow at random, on one RC pair of this process, one
 * thread each, for SECONDS.
 *
 * What it is after: message order and payloads while SENDs move between
 * the transit ring, the SQ and back (common/transit.h, "Back from the
 * SQ").  The ring fills whenever the receiver stalls; an RDMA WRITE now
 * and then puts the engine in front of the SENDs behind it; sizes run
 * from a byte (inline) to 64 KiB.  Message n is pattern n over its whole
 * length, and its length and kind follow from n alone, so the receiver
 * checks each completion's order, length, immediate data and every byte
 * without being told anything; the sender checks that its completions
 * come in the order it posted.  A third
 * thread spins meanwhile (crowd(); DIRECT_STREAM_CROWD=0: none).
 *
 * Prints "stream: N sends, W writes (seed S)" and exits 0; any wrong
 * byte, length, order or status fails at once with what was expected.
 */
#include "config.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "direct-stream.h"
#include "vt.h"

#define ST_WINDOW	64		/* SENDs and WRITEs in flight */
#define ST_SLOT		(64 * 1024)	/* one message's buffer */
#define ST_RECVS	32		/* receives the receiver keeps posted */

struct stream {
	struct vt_dev dev;
	struct vt_pair pair;
	struct ibv_mr *src;		/* ST_WINDOW slots, the sender's */
	struct ibv_mr *dst;		/* ST_RECVS slots, the receiver's */
	struct ibv_mr *wdst;		/* where the WRITEs land */
	uint32_t seed;
	long deadline_ms;
	uint64_t sends;			/* set by the sender when it stops */
	bool sender_done;
	uint64_t writes;
};

/* What op number n is: deterministic, so both threads agree. */
struct st_op {
	bool write;
	bool imm;
	uint32_t len;
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static struct st_op st_op(uint32_t seed, uint64_t n)
{
	static const uint32_t lens[] = { 1, 8, 60, 200, 1000, 4096, 16384,
					 16384, 16384, 40000, 65536 };
	uint64_t r = mix(n * 2654435761u + seed);
	struct st_op op;

	op.write = r % 16 == 0;
	op.imm = (r >> 8) % 4 == 0;
	op.len = lens[(r >> 16) % (sizeof(lens) / sizeof(lens[0]))];
	return op;
}

/* A pause now and then: nothing, a yield, or up to 2 ms asleep. */
static void stall(unsigned int *rs, unsigned int sleep_in)
{
	unsigned int r = (unsigned int)rand_r(rs);

	if (r % sleep_in == 0)
		usleep(r / sleep_in % 2000);
	else if (r % 7 == 0)
		sched_yield();
}

static void *sender(void *arg)
{
	struct stream *st = arg;
	struct vt_pair *p = &st->pair;
	uint64_t n = 0, done = 0, sends = 0;
	unsigned int rs = st->seed ^ 0x5e4d;
	struct ibv_wc wc[16];
	long last = vt_now_ms();

	while (vt_now_ms() < st->deadline_ms || done < n) {
		int i, got;

		if (n - done < ST_WINDOW && vt_now_ms() < st->deadline_ms) {
			struct st_op op = st_op(st->seed, n);
			uint8_t *buf = (uint8_t *)st->src->addr +
				       (n % ST_WINDOW) * ST_SLOT;
			unsigned int flags = IBV_SEND_SIGNALED;

			if (op.write) {
				vt_fill(buf, op.len, 0, (uint32_t)n);
				vt_send(p->qp[0], n, IBV_WR_RDMA_WRITE, flags,
					buf, op.len, st->src->lkey,
					(uint64_t)(uintptr_t)st->wdst->addr,
					st->wdst->rkey);
				st->writes++;
			} else {
				struct ibv_send_wr wr = { 0 }, *bad;
				struct ibv_sge sge;

				vt_fill(buf, op.len, 0, (uint32_t)sends);
				sge = (struct ibv_sge){ (uint64_t)(uintptr_t)buf,
							op.len, st->src->lkey };
				if (op.len <= 64)
					flags |= IBV_SEND_INLINE;
				wr.wr_id = n;
				wr.sg_list = &sge;
				wr.num_sge = 1;
				wr.opcode = op.imm ? IBV_WR_SEND_WITH_IMM
						   : IBV_WR_SEND;
				wr.imm_data = (uint32_t)sends;
				wr.send_flags = flags;
				vt_assert(ibv_post_send(p->qp[0], &wr, &bad) == 0,
					  "post op %llu", (unsigned long long)n);
				sends++;
			}
			n++;
		}
		got = ibv_poll_cq(p->scq[0], 16, wc);
		vt_assert(got >= 0, "poll the send CQ");
		if (got > 0)
			last = vt_now_ms();
		vt_assert(vt_now_ms() - last < vt_tmo_ms(),
			  "send completion %llu: nothing for %d ms",
			  (unsigned long long)done, vt_tmo_ms());
		for (i = 0; i < got; i++, done++)
			vt_assert(wc[i].status == IBV_WC_SUCCESS &&
				  wc[i].wr_id == done,
				  "send completion %llu (%s): wr_id %llu (%s) status %s",
				  (unsigned long long)done,
				  st_op(st->seed, done).write ? "write" : "send",
				  (unsigned long long)wc[i].wr_id,
				  st_op(st->seed, wc[i].wr_id).write ? "write" : "send",
				  vt_status(wc[i].status));
		stall(&rs, 4000);
	}
	__atomic_store_n(&st->sends, sends, __ATOMIC_RELAXED);
	__atomic_store_n(&st->sender_done, true, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * A thread that only spins: with it the sender, the receiver and the
 * engine are more runnable threads than a small machine has CPUs, so the
 * engine comes late at times and a stalled ring is met by both paths.
 */
static void *crowd(void *arg)
{
	const struct stream *st = arg;

	const char *v = getenv("DIRECT_STREAM_CROWD");

	if (v && strcmp(v, "0") == 0)
		return NULL;	/* for soaks: the other mix of timings */
	while (!__atomic_load_n(&st->sender_done, __ATOMIC_ACQUIRE))
		;
	return NULL;
}

static void post_slot(struct stream *st, uint64_t slot)
{
	vt_recv(st->pair.qp[1], slot,
		(uint8_t *)st->dst->addr + slot * ST_SLOT, ST_SLOT,
		st->dst->lkey);
}

/* Send number `k` is op number n: walk the ops to find its length. */
static void check_recv(struct stream *st, const struct ibv_wc *wc,
		       uint64_t k, uint64_t *op_n)
{
	struct st_op op;
	const uint8_t *buf;
	long bad;

	do
		op = st_op(st->seed, (*op_n)++);
	while (op.write);
	vt_assert(wc->status == IBV_WC_SUCCESS,
		  "receive %llu: status %s", (unsigned long long)k,
		  vt_status(wc->status));
	vt_assert(wc->byte_len == op.len,
		  "receive %llu: %u bytes, sent %u", (unsigned long long)k,
		  wc->byte_len, op.len);
	vt_assert(!!(wc->wc_flags & IBV_WC_WITH_IMM) == op.imm &&
		  (!op.imm || wc->imm_data == (uint32_t)k),
		  "receive %llu: immediate data wrong (flags %#x imm %u)",
		  (unsigned long long)k, wc->wc_flags, wc->imm_data);
	buf = (const uint8_t *)st->dst->addr + wc->wr_id * ST_SLOT;
	bad = vt_check(buf, op.len, 0, (uint32_t)k);
	vt_assert(bad < 0, "receive %llu (%u bytes, slot %llu): byte %ld wrong",
		  (unsigned long long)k, op.len,
		  (unsigned long long)wc->wr_id, bad);
}

static void *receiver(void *arg)
{
	struct stream *st = arg;
	unsigned int rs = st->seed ^ 0xa11ce;
	uint64_t k = 0, op_n = 0, slot, next_slot = 0;
	long last = vt_now_ms();
	struct ibv_wc wc;

	for (slot = 0; slot < ST_RECVS; slot++)
		post_slot(st, slot);
	for (;;) {
		int got = ibv_poll_cq(st->pair.rcq[1], 1, &wc);

		vt_assert(got >= 0, "poll the receive CQ");
		if (got == 0) {
			if (__atomic_load_n(&st->sender_done, __ATOMIC_ACQUIRE) &&
			    k == __atomic_load_n(&st->sends, __ATOMIC_RELAXED))
				break;
			vt_assert(vt_now_ms() - last < vt_tmo_ms(),
				  "receive %llu: nothing for %d ms",
				  (unsigned long long)k, vt_tmo_ms());
			continue;
		}
		last = vt_now_ms();
		/* receives complete in the order they were posted */
		vt_assert(wc.wr_id == next_slot,
			  "receive %llu in slot %llu, expected slot %llu",
			  (unsigned long long)k, (unsigned long long)wc.wr_id,
			  (unsigned long long)next_slot);
		next_slot = (next_slot + 1) % ST_RECVS;
		check_recv(st, &wc, k++, &op_n);
		stall(&rs, 200);
		post_slot(st, wc.wr_id);
	}
	return NULL;
}

int direct_stream(unsigned int seconds, uint32_t seed)
{
	struct vt_qp_opts o[2] = {
		{ .max_send_wr = ST_WINDOW, .max_inline = 64 },
		{ .max_recv_wr = ST_RECVS },
	};
	struct stream st = { .seed = seed };
	pthread_t t[3];

	printf("stream: seed %u\n", seed);
	vt_open(&st.dev);
	vt_pair2(&st.pair, &st.dev, &o[0], &o[1], 256);
	/* DIRECT_RINGS=0: the daemon pairs no QPs ("direct": false) */
	vt_assert((vt_transit_maps() > 0) == !getenv("DIRECT_RINGS"),
		  "the pair has %d transit ring maps", vt_transit_maps());
	st.src = vt_reg(st.dev.pd, (size_t)ST_WINDOW * ST_SLOT, VT_ACCESS_ALL);
	st.dst = vt_reg(st.dev.pd, (size_t)ST_RECVS * ST_SLOT, VT_ACCESS_ALL);
	st.wdst = vt_reg(st.dev.pd, ST_SLOT, VT_ACCESS_ALL);
	st.deadline_ms = vt_now_ms() + (long)seconds * 1000;
	vt_assert(pthread_create(&t[1], NULL, receiver, &st) == 0 &&
		  pthread_create(&t[2], NULL, crowd, &st) == 0 &&
		  pthread_create(&t[0], NULL, sender, &st) == 0, "threads");
	pthread_join(t[0], NULL);
	pthread_join(t[2], NULL);
	pthread_join(t[1], NULL);
	printf("stream: %llu sends, %llu writes (seed %u)\n",
	       (unsigned long long)st.sends, (unsigned long long)st.writes,
	       seed);
	vt_dereg(st.src);
	vt_dereg(st.dst);
	vt_dereg(st.wdst);
	vt_pair_free(&st.pair);
	vt_close(&st.dev);
	return 0;
}
