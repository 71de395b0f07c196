/*
 * direct-helper stream SECONDS [SEED [FLOWS]]: streaming senders against
 * a receiver that is slow at random, for SECONDS.  FLOWS (default 2) RC
 * pairs of this process share one send CQ and one receive CQ, as apps
 * and middleware share a CQ among their connections; one thread posts on
 * every flow and polls the send CQ, another polls the receive CQ.
 *
 * What it is after: each QP's completion order and payloads while SENDs
 * move between the transit ring, the SQ and back (common/transit.h,
 * "Back from the SQ"), and while the library's completions of several
 * QPs merge with the engine's in one CQ.  The ring fills whenever the
 * receiver stalls; an RDMA WRITE now and then puts the engine in front
 * of the SENDs behind it, and so does an RDMA READ; sizes run from a
 * byte (inline) to 64 KiB.  On RC without an SRQ some of the messages
 * are RDMA WRITEs with immediate instead of SENDs, of up to 4 KiB, each
 * into a slot of its own in an area of the receiver's (on a wire their
 * first packets land before a receive is there to take the last one, so
 * not into the receive buffers), checked when their receive completes.
 * With DIRECT_STREAM_GRANTED=1 the WRITEs and
 * READs target shared file memory, which the library reaches itself
 * while the ring is empty (a grant, common/lease.h).
 * Message n of a flow is pattern n over its whole length, and its length
 * and kind follow from the flow's seed and n alone, so the receiver
 * checks each completion's order, length, immediate data and every byte
 * without being told anything; the sender checks that each QP's
 * completions come in the order it posted.  A third thread spins
 * meanwhile (crowd(); DIRECT_STREAM_CROWD=0: none).  The receiver polls
 * with ibv_poll_cq, or with ibv_start_poll on an extended CQ
 * (DIRECT_STREAM_CQ_EX=1).  With DIRECT_STREAM_EVENTS=1 the receiver
 * sleeps on a completion channel whenever its CQ is empty, and the
 * sender whenever its windows are full and its CQ empty; a completion
 * that must come (something is in flight) must raise its event.
 *
 * Two processes: DIRECT_STREAM_SIDE=send or recv with DIRECT_STREAM_DIR
 * runs one end (the same SECONDS, SEED and FLOWS on both); the ends
 * trade their QPs' addresses and the WRITEs' target in files there, and
 * the sender writes how many SENDs each flow sent when it is done.  The
 * receiving end writes its pid there too: with DIRECT_STREAM_PEER_DIES=1
 * the sender expects it to be killed, and each QP's completions to be
 * successes, then errors, in order, every flow failing in the end.  The
 * other way round, DIRECT_STREAM_PEER_DIES=1 at the receiving end: the
 * sender writes its pid, the test kills it and then writes "send-dead";
 * what the receiver got until then must be whole and in order, and
 * receives may only be flushed after it.
 *
 * The sending end starts once the receiving end's QPs are connected (it
 * writes "recv-ready"), as the CM's RTU orders it: a packet that comes
 * before its responder's RTR is dropped unanswered, and a receiving end
 * slower than the sender's retries to get there (7 local ACK timeouts,
 * 134 ms, on a crowded machine) would fail the stream.  A sender that
 * expects its peer killed does not wait: it may die before that.
 * DIRECT_STREAM_RECV_LATE_MS=N: the receiving end connects N ms late.
 *
 * DIRECT_STREAM_TIMEOUT=N: the senders' local ACK timeout exponent (vt's
 * default otherwise: 12, 16.8 ms), for a slow link whose round trip under
 * a full window is longer than that (roce-relay.sh).
 *
 * DIRECT_STREAM_UC=1: UC pairs.  UC drops a message that finds no
 * receive posted, so the receiver expects gaps: every SEND carries its
 * number as immediate data, each flow's numbers must rise, and what
 * came is checked as before; no READs (UC has none).
 *
 * DIRECT_STREAM_SRQ=1: the receiving QPs share one SRQ, whose receives go
 * to messages in arrival order, whatever their flow; the checks are then
 * by content (each flow's messages in order), not by slot.  The
 * receivers' libraries place into the SRQ from their rings, taking turns
 * with the engine and with each other.
 *
 * Prints "stream: N sends, W writes, R reads (seed S)" (the receiving
 * end: "stream: N received (seed S)") and exits 0; any wrong byte,
 * length, order or status fails at once with what was expected.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "direct-stream.h"
#include "vt.h"

#define ST_WINDOW	16		/* SENDs and WRITEs in flight, per flow */
#define ST_SLOT		(64 * 1024)	/* one message's buffer */
#define ST_RECVS	16		/* receives kept posted, per flow */
#define ST_MAX_FLOWS	8
#define ST_FLOW_SHIFT	56		/* wr_id: flow << 56 | number */
#define ST_MEMFD	"ibvd-stream"	/* the WRITEs' target, when granted */
/*
 * WRITEs with immediate: slots of the area they land in, by their number
 * among the flow's messages.  A flow's messages the receiver has not
 * checked yet are at most its window (posted, not complete) and its
 * receives (taken, not yet polled): fewer than the slots, so none lands
 * on one not checked yet.
 */
#define ST_WIMM_SLOTS	48
#define ST_WIMM_SLOT	4096

struct flow {
	struct ibv_qp *qp[2];		/* sender, receiver (NULL: not ours) */
	struct ibv_mr *src;		/* ST_WINDOW slots, the sender's */
	struct ibv_mr *dst;		/* ST_RECVS slots, the receiver's */
	struct ibv_mr *wdst;		/* where the WRITEs land */
	uint64_t waddr;			/* wdst as the sender knows it */
	uint32_t wrkey;
	struct ibv_mr *wimm;		/* where WRITEs with immediate land */
	uint64_t iaddr;			/* wimm as the sender knows it */
	uint32_t irkey;
	uint32_t seed;
	/* the sender's thread */
	uint64_t posted, done, sends, writes, reads;
	enum ibv_wc_status failed;	/* the first error (peer_dies) */
	/* the receiver's thread */
	uint64_t received, op_n, next_slot;
	uint64_t dropped;		/* UC: SENDs that never came */
	bool flushed;			/* sender_dies: a receive was flushed */
};

struct stream {
	struct vt_dev dev;
	struct ibv_cq *scq, *rcq;
	struct ibv_cq_ex *rcq_ex;	/* DIRECT_STREAM_CQ_EX=1: rcq's */
	/* DIRECT_STREAM_EVENTS=1: both threads sleep on completion events */
	struct ibv_comp_channel *channel, *schannel;
	bool armed, sarmed;
	uint64_t events, sevents;	/* taken from the channels */
	bool granted;			/* DIRECT_STREAM_GRANTED=1 */
	/* DIRECT_STREAM_SIDE: this process is one end, files in `dir` */
	enum { BOTH, SEND_SIDE, RECV_SIDE } side;
	const char *dir;
	bool peer_dies;			/* DIRECT_STREAM_PEER_DIES=1, sender */
	bool sender_dies;		/* DIRECT_STREAM_PEER_DIES=1, receiver */
	bool sender_dead;		/* "send-dead" seen */
	struct ibv_srq *srq;		/* DIRECT_STREAM_SRQ=1 */
	bool uc;			/* DIRECT_STREAM_UC=1 */
	struct flow flow[ST_MAX_FLOWS];
	unsigned int nflows;
	uint32_t seed;
	long deadline_ms;
	bool sender_done;		/* flows' sends are final */
};

/* What op number n of a flow is: deterministic, so both threads agree. */
struct st_op {
	/* RDMA_WRITE, RDMA_READ, a SEND or RDMA_WRITE_WITH_IMM */
	enum ibv_wr_opcode kind;
	bool imm;
	uint32_t len;
};

static bool one_sided(struct st_op op)
{
	return op.kind == IBV_WR_RDMA_WRITE || op.kind == IBV_WR_RDMA_READ;
}

static const char *op_name(struct st_op op)
{
	return op.kind == IBV_WR_RDMA_WRITE ? "write" :
	       op.kind == IBV_WR_RDMA_READ ? "read" :
	       op.kind == IBV_WR_RDMA_WRITE_WITH_IMM ? "write_imm" : "send";
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

/* UC pairs (DIRECT_STREAM_UC=1): set before any thread starts. */
static bool st_uc;
/* WRITEs with immediate among the SENDs (RC, no SRQ): the same. */
static bool st_write_imm;

static struct st_op st_op(uint32_t seed, uint64_t n)
{
	static const uint32_t lens[] = { 1, 8, 60, 200, 1000, 4096, 16384,
					 16384, 16384, 40000, 65536 };
	uint64_t r = mix(n * 2654435761u + seed);
	struct st_op op;

	op.imm = st_uc || (r >> 8) % 4 == 0 || (st_write_imm && r % 8 == 2);
	op.kind = r % 16 == 0 ? IBV_WR_RDMA_WRITE :
		  r % 32 == 1 ? (st_uc ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ) :
		  st_write_imm && r % 8 == 2 ? IBV_WR_RDMA_WRITE_WITH_IMM :
		  op.imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
	op.len = lens[(r >> 16) % (sizeof(lens) / sizeof(lens[0]))];
	if (op.kind == IBV_WR_RDMA_WRITE_WITH_IMM && op.len > ST_WIMM_SLOT)
		op.len = ST_WIMM_SLOT;
	return op;
}

static uint64_t wr_id(unsigned int f, uint64_t n)
{
	return (uint64_t)f << ST_FLOW_SHIFT | n;
}

static unsigned int wr_flow(uint64_t id)
{
	return (unsigned int)(id >> ST_FLOW_SHIFT);
}

static uint64_t wr_num(uint64_t id)
{
	return id & ((1ull << ST_FLOW_SHIFT) - 1);
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

struct sleeper {
	struct ibv_cq *cq;
	struct ibv_comp_channel *channel;
	bool *armed;
	uint64_t *events;
	const char *what;
};

/*
 * Nothing to poll: arm, and poll once more before sleeping (what came
 * between the last poll and the arm raises no event); then sleep on the
 * channel.  `due`: a completion must come (something is in flight), so
 * its event must too, within the test's bound; otherwise 100 ms at most.
 */
static void sleep_on(const struct sleeper *s, bool due)
{
	struct pollfd pfd = { s->channel->fd, POLLIN, 0 };
	struct ibv_cq *cq;
	struct ibv_wc wc;
	void *ctx;

	if (!*s->armed) {
		vt_assert(ibv_req_notify_cq(s->cq, 0) == 0, "ibv_req_notify_cq");
		*s->armed = true;
		return;
	}
	if (poll(&pfd, 1, due ? vt_tmo_ms() : 100) <= 0) {
		vt_assert(!due, "%s: no event for %d ms, and %s", s->what,
			  vt_tmo_ms(), ibv_poll_cq(s->cq, 1, &wc) ?
			  "a completion is there" : "no completion");
		return;
	}
	vt_assert(ibv_get_cq_event(s->channel, &cq, &ctx) == 0 && cq == s->cq,
		  "%s: ibv_get_cq_event", s->what);
	ibv_ack_cq_events(cq, 1);
	*s->armed = false;
	(*s->events)++;
}

/* Post the flow's next op. */
static void post_op(struct flow *fl, unsigned int f)
{
	struct st_op op = st_op(fl->seed, fl->posted);
	uint8_t *buf = (uint8_t *)fl->src->addr +
		       (fl->posted % ST_WINDOW) * ST_SLOT;
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_sge sge;

	vt_fill(buf, op.len, 0, (uint32_t)(one_sided(op) ? fl->posted : fl->sends));
	sge = (struct ibv_sge){ (uint64_t)(uintptr_t)buf, op.len,
				fl->src->lkey };
	wr.wr_id = wr_id(f, fl->posted);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.opcode = op.kind;
	if (one_sided(op)) {
		/* a READ reads what the WRITEs left there into our slot */
		wr.wr.rdma.remote_addr = fl->waddr;
		wr.wr.rdma.rkey = fl->wrkey;
		if (op.kind == IBV_WR_RDMA_WRITE)
			fl->writes++;
		else
			fl->reads++;
	} else {
		wr.imm_data = (uint32_t)fl->sends;
		/* a WRITE with immediate: into its own slot */
		wr.wr.rdma.remote_addr = fl->iaddr +
					 fl->sends % ST_WIMM_SLOTS * ST_WIMM_SLOT;
		wr.wr.rdma.rkey = fl->irkey;
		if (op.len <= 64)
			wr.send_flags |= IBV_SEND_INLINE;
		/* read by the receiver's thread to know what must come */
		__atomic_store_n(&fl->sends, fl->sends + 1, __ATOMIC_RELEASE);
	}
	vt_assert(ibv_post_send(fl->qp[0], &wr, &bad) == 0,
		  "flow %u: post op %llu", f, (unsigned long long)fl->posted);
	fl->posted++;
}

static void check_send_wc(struct stream *st, const struct ibv_wc *wc)
{
	unsigned int f = wr_flow(wc->wr_id);
	struct flow *fl;

	vt_assert(f < st->nflows, "send completion of no flow: wr_id %#llx",
		  (unsigned long long)wc->wr_id);
	fl = &st->flow[f];
	/*
	 * A receiving end killed on purpose: each QP's completions are
	 * successes, then errors, in order.  The first says why: a peer
	 * that died answers nothing, so retries run out, as on a NIC; or,
	 * when nothing was in flight as the daemon saw it die, the QP went
	 * to ERR with it and everything is flushed.  Never an error the
	 * peer would have sent (remote access, remote operation).
	 */
	if (st->peer_dies && wc->status != IBV_WC_SUCCESS && !fl->failed) {
		fl->failed = wc->status;
		vt_assert(wc->status == IBV_WC_RETRY_EXC_ERR ||
			  wc->status == IBV_WC_WR_FLUSH_ERR,
			  "flow %u: the first error after the peer died: %s", f,
			  vt_status(wc->status));
	}
	vt_assert((wc->status == IBV_WC_SUCCESS ||
		   (st->peer_dies && fl->failed)) &&
		  !(wc->status == IBV_WC_SUCCESS && fl->failed) &&
		  wr_num(wc->wr_id) == fl->done,
		  "flow %u: send completion %llu (%s): got %llu (%s) status %s",
		  f, (unsigned long long)fl->done,
		  op_name(st_op(fl->seed, fl->done)),
		  (unsigned long long)wr_num(wc->wr_id),
		  op_name(st_op(fl->seed, wr_num(wc->wr_id))),
		  vt_status(wc->status));
	fl->done++;
}

static bool flows_idle(const struct stream *st)
{
	unsigned int f;

	for (f = 0; f < st->nflows; f++)
		if (st->flow[f].done != st->flow[f].posted)
			return false;
	return true;
}

/* ---- two processes: what one end tells the other, in files -------------- */

static void put_sends(const struct stream *st)
{
	char line[ST_MAX_FLOWS * 24] = "", *p = line;
	unsigned int f;

	for (f = 0; f < st->nflows; f++)
		p += sprintf(p, "%llu ", (unsigned long long)st->flow[f].sends);
	vt_put(st->dir, "sends", "%s\n", line);
}

/* The receiver, idle: has the sender said how many it sent? */
static void get_sends(struct stream *st)
{
	char buf[ST_MAX_FLOWS * 24];
	unsigned long long n;
	unsigned int f;
	char *p = buf;
	int used;

	if (st->sender_done || !vt_exists(st->dir, "sends") ||
	    !vt_get(st->dir, "sends", buf, sizeof(buf), 0))
		return;
	for (f = 0; f < st->nflows; f++, p += used) {
		vt_assert(sscanf(p, "%llu%n", &n, &used) == 1, "the sends file");
		st->flow[f].sends = n;
	}
	__atomic_store_n(&st->sender_done, true, __ATOMIC_RELEASE);
}

/* Our QPs' addresses (and the receiver's WRITE target) for the other end. */
static void put_addrs(const struct stream *st, const struct vt_addr *a)
{
	char text[ST_MAX_FLOWS * 128] = "", *p = text;
	unsigned int f;

	for (f = 0; f < st->nflows; f++) {
		const struct flow *fl = &st->flow[f];

		vt_addr_str(&a[f], p, 80);
		p += strlen(p);
		p += sprintf(p, " %llu %u %llu %u\n",
			     (unsigned long long)fl->waddr, fl->wrkey,
			     (unsigned long long)fl->iaddr, fl->irkey);
	}
	vt_put(st->dir, st->side == SEND_SIDE ? "send-addrs" : "recv-addrs",
	       "%s", text);
}

static void get_addrs(struct stream *st, struct vt_addr *a)
{
	const char *name = st->side == SEND_SIDE ? "recv-addrs" : "send-addrs";
	char text[ST_MAX_FLOWS * 128], *line = text, *nl;
	unsigned long long waddr, iaddr;
	unsigned int f, rkey, irkey;

	vt_assert(vt_get(st->dir, name, text, sizeof(text), vt_tmo_ms()),
		  "no %s from the other end", name);
	for (f = 0; f < st->nflows; f++, line = nl + 1) {
		nl = strchr(line, '\n');
		vt_assert(nl, "%s: %u lines for %u flows", name, f, st->nflows);
		*nl = '\0';
		vt_assert(vt_addr_parse(line, &a[f]) == 0, "%s: %s", name, line);
		/* the address's four words, then ours */
		vt_assert(sscanf(line, "%*u %*u %*u %*s %llu %u %llu %u", &waddr,
				 &rkey, &iaddr, &irkey) == 4, "%s: %s", name, line);
		if (st->side == SEND_SIDE) {
			st->flow[f].waddr = waddr;
			st->flow[f].wrkey = rkey;
			st->flow[f].iaddr = iaddr;
			st->flow[f].irkey = irkey;
		}
	}
}

static bool windows_full(const struct stream *st)
{
	unsigned int f;

	for (f = 0; f < st->nflows; f++)
		if (st->flow[f].posted - st->flow[f].done < ST_WINDOW &&
		    vt_now_ms() < st->deadline_ms)
			return false;
	return !flows_idle(st);
}

/* Every window full, nothing polled: what is in flight must complete. */
static void sender_sleep(struct stream *st)
{
	const struct sleeper s = { st->scq, st->schannel, &st->sarmed,
				   &st->sevents, "send CQ" };

	sleep_on(&s, true);
}

static void *sender(void *arg)
{
	struct stream *st = arg;
	unsigned int rs = st->seed ^ 0x5e4d;
	long last = vt_now_ms();
	struct ibv_wc wc[16];

	while (vt_now_ms() < st->deadline_ms || !flows_idle(st)) {
		unsigned int f;
		int i, got;

		for (f = 0; f < st->nflows; f++) {
			struct flow *fl = &st->flow[f];

			if (fl->posted - fl->done < ST_WINDOW && !fl->failed &&
			    vt_now_ms() < st->deadline_ms)
				post_op(fl, f);
		}
		got = ibv_poll_cq(st->scq, 16, wc);
		vt_assert(got >= 0, "poll the send CQ");
		if (got > 0)
			last = vt_now_ms();
		else if (st->schannel && windows_full(st))
			sender_sleep(st);
		vt_assert(vt_now_ms() - last < vt_tmo_ms(),
			  "send completions: nothing for %d ms", vt_tmo_ms());
		for (i = 0; i < got; i++)
			check_send_wc(st, &wc[i]);
		stall(&rs, 4000);
	}
	if (st->side == SEND_SIDE)
		put_sends(st);
	__atomic_store_n(&st->sender_done, true, __ATOMIC_RELEASE);
	return NULL;
}

static bool env_on(const char *name)
{
	const char *v = getenv(name);

	return v && strcmp(v, "1") == 0;
}

/* A number in the environment; 0 if unset. */
static int env_int(const char *name)
{
	const char *v = getenv(name);

	return v ? atoi(v) : 0;
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

/*
 * Receive buffer `slot` of flow f's buffers, which the SRQ (if any) may
 * give to a message of any flow: wr_id names the buffer, not the flow.
 */
static uint8_t *slot_buf(const struct stream *st, uint64_t id)
{
	return (uint8_t *)st->flow[wr_flow(id)].dst->addr +
	       wr_num(id) * ST_SLOT;
}

static void post_slot(const struct stream *st, unsigned int f, uint64_t slot)
{
	const struct flow *fl = &st->flow[f];
	uint64_t id = wr_id(f, slot);

	if (st->srq)
		vt_srq_recv(st->srq, id, slot_buf(st, id), ST_SLOT,
			    fl->dst->lkey);
	else
		vt_recv(fl->qp[1], id, slot_buf(st, id), ST_SLOT, fl->dst->lkey);
}

/* Whose message a receive completion holds: its QP's flow. */
static unsigned int recv_flow(const struct stream *st, const struct ibv_wc *wc)
{
	unsigned int f;

	if (!st->srq)
		f = wr_flow(wc->wr_id);
	else
		for (f = 0; f < st->nflows; f++)
			if (st->flow[f].qp[1]->qp_num == wc->qp_num)
				break;
	vt_assert(f < st->nflows, "receive of no flow: wr_id %#llx qp %u",
		  (unsigned long long)wc->wr_id, wc->qp_num);
	return f;
}

/*
 * A sending end killed on purpose: the receives still posted may be
 * flushed (the QP put in error), and then nothing more may succeed.
 * Returns true if wc is such a flush.
 */
static bool flushed(const struct stream *st, struct flow *fl, unsigned int f,
		    const struct ibv_wc *wc)
{
	vt_assert(wc->status == IBV_WC_SUCCESS ||
		  (st->sender_dies && wc->status == IBV_WC_WR_FLUSH_ERR),
		  "flow %u: receive %llu: status %s", f,
		  (unsigned long long)fl->received, vt_status(wc->status));
	vt_assert(wc->status != IBV_WC_SUCCESS || !fl->flushed,
		  "flow %u: receive %llu succeeded after a flush", f,
		  (unsigned long long)fl->received);
	if (wc->status == IBV_WC_SUCCESS)
		return false;
	fl->flushed = true;
	return true;
}

/* The flow's next SEND: its length and kind from the ops it follows. */
static void check_recv(const struct stream *st, struct flow *fl,
		       unsigned int f, const struct ibv_wc *wc)
{
	uint64_t k = fl->received, slot = wr_num(wc->wr_id);
	const uint8_t *buf;
	struct st_op op;
	long bad;

	/* UC: the SENDs between the last one and this one were dropped */
	if (st->uc && (wc->wc_flags & IBV_WC_WITH_IMM) &&
	    wc->imm_data > (uint32_t)k) {
		for (; k < wc->imm_data; k++, fl->dropped++)
			do
				op = st_op(fl->seed, fl->op_n++);
			while (one_sided(op));
		fl->received = k;
	}
	do
		op = st_op(fl->seed, fl->op_n++);
	while (one_sided(op));
	/* receives complete in the order they were posted (an SRQ's: any) */
	vt_assert(st->srq || slot == fl->next_slot,
		  "flow %u: receive %llu in slot %llu, expected slot %llu", f,
		  (unsigned long long)k, (unsigned long long)slot,
		  (unsigned long long)fl->next_slot);
	fl->next_slot = (fl->next_slot + 1) % ST_RECVS;
	vt_assert(wc->byte_len == op.len,
		  "flow %u: receive %llu: %u bytes, sent %u", f,
		  (unsigned long long)k, wc->byte_len, op.len);
	vt_assert(wc->opcode == (op.kind == IBV_WR_RDMA_WRITE_WITH_IMM ?
				 IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV),
		  "flow %u: receive %llu: opcode %d for a %s", f,
		  (unsigned long long)k, wc->opcode, op_name(op));
	vt_assert(!!(wc->wc_flags & IBV_WC_WITH_IMM) == op.imm &&
		  (!op.imm || wc->imm_data == (uint32_t)k),
		  "flow %u: receive %llu: immediate data wrong (flags %#x imm %u)",
		  f, (unsigned long long)k, wc->wc_flags, wc->imm_data);
	buf = op.kind == IBV_WR_RDMA_WRITE_WITH_IMM ?
	      (uint8_t *)fl->wimm->addr + k % ST_WIMM_SLOTS * ST_WIMM_SLOT :
	      slot_buf(st, wc->wr_id);
	bad = vt_check(buf, op.len, 0, (uint32_t)k);
	vt_assert(bad < 0, "flow %u: receive %llu (%u bytes, slot %llu): byte %ld wrong",
		  f, (unsigned long long)k, op.len, (unsigned long long)slot, bad);
	fl->received++;
}

/*
 * Done: every SEND received; or, the sender killed, nothing more for
 * 300 ms after the test said it is dead; or, on UC, nothing more for
 * 300 ms after the sender finished.
 */
static bool all_received(const struct stream *st, long last)
{
	unsigned int f;

	if (st->sender_dies)
		return st->sender_dead && vt_now_ms() - last > 300;
	if (!__atomic_load_n(&st->sender_done, __ATOMIC_ACQUIRE))
		return false;
	/* UC: the last ones may have been dropped too */
	if (st->uc && vt_now_ms() - last > 300)
		return true;
	for (f = 0; f < st->nflows; f++)
		if (st->flow[f].received != st->flow[f].sends)
			return false;
	return true;
}

/* One receive completion through the extended CQ API. */
static int poll_ex(struct ibv_cq_ex *cq, struct ibv_wc *wc)
{
	struct ibv_poll_cq_attr attr = { 0 };
	int ret = ibv_start_poll(cq, &attr);

	if (ret == ENOENT)
		return 0;
	vt_assert(ret == 0, "ibv_start_poll: %d", ret);
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = cq->wr_id;
	wc->status = cq->status;
	wc->byte_len = ibv_wc_read_byte_len(cq);
	wc->qp_num = ibv_wc_read_qp_num(cq);
	wc->opcode = ibv_wc_read_opcode(cq);
	wc->wc_flags = ibv_wc_read_wc_flags(cq);
	if (wc->wc_flags & IBV_WC_WITH_IMM)
		wc->imm_data = ibv_wc_read_imm_data(cq);
	ibv_end_poll(cq);
	return 1;
}

static int poll_recv(struct stream *st, struct ibv_wc *wc)
{
	int got = st->rcq_ex ? poll_ex(st->rcq_ex, wc) :
			       ibv_poll_cq(st->rcq, 1, wc);

	vt_assert(got >= 0, "poll the receive CQ");
	return got;
}

/*
 * Nothing to poll, with events: arm, and poll once more before sleeping
 * (what came between the last poll and the arm raises no event); then
 * sleep on the channel, 100 ms at most (the sender may be done).
 */
/* Is a SEND posted that the receiver has not taken yet? */
static bool recv_due(const struct stream *st)
{
	unsigned int f;

	if (st->side == RECV_SIDE || st->uc)
		return false;	/* not ours to read; or UC, which may drop */
	for (f = 0; f < st->nflows; f++)
		if (st->flow[f].received !=
		    __atomic_load_n(&st->flow[f].sends, __ATOMIC_ACQUIRE))
			return true;
	return false;
}

static void sleep_for_event(struct stream *st)
{
	const struct sleeper s = { st->rcq, st->channel, &st->armed,
				   &st->events, "receive CQ" };

	sleep_on(&s, recv_due(st));
}

static void *receiver(void *arg)
{
	struct stream *st = arg;
	unsigned int rs = st->seed ^ 0xa11ce, f;
	long last = vt_now_ms();
	struct ibv_wc wc;
	uint64_t slot;

	for (f = 0; f < st->nflows; f++)
		for (slot = 0; slot < ST_RECVS; slot++)
			post_slot(st, f, slot);
	while (!all_received(st, last)) {
		if (poll_recv(st, &wc) == 0) {
			vt_assert(st->sender_dead || vt_now_ms() - last < vt_tmo_ms(),
				  "receives: nothing for %d ms", vt_tmo_ms());
			if (st->channel)
				sleep_for_event(st);
			if (st->sender_dies)
				st->sender_dead = vt_exists(st->dir, "send-dead");
			else if (st->side == RECV_SIDE)
				get_sends(st);
			continue;
		}
		last = vt_now_ms();
		f = recv_flow(st, &wc);
		if (flushed(st, &st->flow[f], f, &wc))
			continue;
		check_recv(st, &st->flow[f], f, &wc);
		stall(&rs, 200);
		post_slot(st, wr_flow(wc.wr_id), wr_num(wc.wr_id));
	}
	return NULL;
}

/* The sending end waits for the receiving end's QPs (the file comment). */
static void ends_ready(const struct stream *st)
{
	char buf[8];

	if (st->side == RECV_SIDE)
		vt_put(st->dir, "recv-ready", "1\n");
	else if (st->side == SEND_SIDE && !st->peer_dies)
		vt_assert(vt_get(st->dir, "recv-ready", buf, sizeof(buf), vt_tmo_ms()),
			  "the receiving end's QPs were never connected");
}

static void flows_open(struct stream *st)
{
	enum ibv_qp_type type = st->uc ? IBV_QPT_UC : IBV_QPT_RC;
	struct vt_qp_opts o[2] = {
		/* retries as librdmacm's, for a lossy wire (roce-stream.sh) */
		{ .type = type, .max_send_wr = ST_WINDOW, .max_inline = 64,
		  .retry_cnt = 7, .timeout = env_int("DIRECT_STREAM_TIMEOUT") },
		{ .type = type, .max_recv_wr = ST_RECVS, .retry_cnt = 7 },
	};
	struct vt_addr a[2][ST_MAX_FLOWS];
	unsigned int f, i;

	if (env_on("DIRECT_STREAM_EVENTS")) {
		st->channel = ibv_create_comp_channel(st->dev.ctx);
		st->schannel = ibv_create_comp_channel(st->dev.ctx);
		vt_assert(st->channel && st->schannel, "ibv_create_comp_channel");
	}
	st->scq = ibv_create_cq(st->dev.ctx, 1024, NULL, st->schannel, 0);
	if (env_on("DIRECT_STREAM_CQ_EX")) {
		struct ibv_cq_init_attr_ex attr = {
			.cqe = 1024,
			.channel = st->channel,
			.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM |
				    IBV_WC_EX_WITH_QP_NUM,
		};

		st->rcq_ex = ibv_create_cq_ex(st->dev.ctx, &attr);
		vt_assert(st->rcq_ex, "ibv_create_cq_ex");
		st->rcq = ibv_cq_ex_to_cq(st->rcq_ex);
	} else {
		st->rcq = ibv_create_cq(st->dev.ctx, 1024, NULL, st->channel, 0);
	}
	vt_assert(st->scq && st->rcq, "ibv_create_cq");
	if (env_on("DIRECT_STREAM_SRQ") && st->side != SEND_SIDE) {
		struct ibv_srq_init_attr attr = {
			.attr = { .max_wr = ST_RECVS * st->nflows, .max_sge = 1 },
		};

		st->srq = ibv_create_srq(st->dev.pd, &attr);
		vt_assert(st->srq, "ibv_create_srq");
		o[1].srq = st->srq;
	}
	for (f = 0; f < st->nflows; f++) {
		struct flow *fl = &st->flow[f];

		fl->seed = st->seed + f * 7919u;
		for (i = 0; i < 2; i++) {
			if (st->side == (i ? SEND_SIDE : RECV_SIDE))
				continue;
			fl->qp[i] = vt_qp(&st->dev, st->scq, st->rcq, &o[i]);
			vt_qp_addr(&st->dev, fl->qp[i], &o[i], &a[i][f]);
		}
		if (st->side != RECV_SIDE)
			fl->src = vt_reg(st->dev.pd, (size_t)ST_WINDOW * ST_SLOT,
					 VT_ACCESS_ALL);
		if (st->side == SEND_SIDE)
			continue;
		fl->dst = vt_reg(st->dev.pd, (size_t)ST_RECVS * ST_SLOT,
				 VT_ACCESS_ALL);
		fl->wdst = st->granted ?
			   vt_reg_memfd(st->dev.pd, ST_SLOT, VT_ACCESS_ALL, ST_MEMFD) :
			   vt_reg(st->dev.pd, ST_SLOT, VT_ACCESS_ALL);
		fl->waddr = (uint64_t)(uintptr_t)fl->wdst->addr;
		fl->wrkey = fl->wdst->rkey;
		fl->wimm = vt_reg(st->dev.pd, (size_t)ST_WIMM_SLOTS * ST_WIMM_SLOT,
				  VT_ACCESS_ALL);
		fl->iaddr = (uint64_t)(uintptr_t)fl->wimm->addr;
		fl->irkey = fl->wimm->rkey;
	}
	if (st->side != BOTH) {
		unsigned int ours = st->side == SEND_SIDE ? 0 : 1;

		put_addrs(st, a[ours]);
		get_addrs(st, a[!ours]);
	}
	if (st->side == RECV_SIDE && env_int("DIRECT_STREAM_RECV_LATE_MS"))
		usleep((useconds_t)env_int("DIRECT_STREAM_RECV_LATE_MS") * 1000);
	for (f = 0; f < st->nflows; f++)
		for (i = 0; i < 2; i++)
			if (st->flow[f].qp[i])
				vt_connect(&st->dev, st->flow[f].qp[i], &a[!i][f],
					   &o[i]);
	ends_ready(st);
}

static void flows_close(struct stream *st)
{
	unsigned int f, i;

	for (f = 0; f < st->nflows; f++) {
		struct flow *fl = &st->flow[f];

		for (i = 0; i < 2; i++)
			vt_assert(!fl->qp[i] || ibv_destroy_qp(fl->qp[i]) == 0,
				  "ibv_destroy_qp");
		if (fl->src)
			vt_dereg(fl->src);
		if (!fl->dst)
			continue;
		vt_dereg(fl->dst);
		vt_dereg(fl->wimm);
		if (st->granted)
			vt_dereg_memfd(fl->wdst);
		else
			vt_dereg(fl->wdst);
	}
	vt_assert(!st->srq || ibv_destroy_srq(st->srq) == 0, "ibv_destroy_srq");
	vt_assert(ibv_destroy_cq(st->scq) == 0 && ibv_destroy_cq(st->rcq) == 0,
		  "ibv_destroy_cq");
	if (st->channel)
		vt_assert(ibv_destroy_comp_channel(st->channel) == 0 &&
			  ibv_destroy_comp_channel(st->schannel) == 0,
			  "ibv_destroy_comp_channel");
}

/* The receiving end was killed: every flow must have seen it. */
static void report_failed(const struct stream *st)
{
	unsigned int f;

	printf("stream: every flow failed after the peer died (");
	for (f = 0; f < st->nflows; f++) {
		vt_assert(st->flow[f].failed,
			  "flow %u: no error completion after the peer died", f);
		printf("%sflow %u: %s", f ? ", " : "", f,
		       vt_status(st->flow[f].failed));
	}
	printf(")\n");
}

/* DIRECT_STREAM_SIDE=send|recv with DIRECT_STREAM_DIR: one end only. */
static void stream_side(struct stream *st)
{
	const char *side = getenv("DIRECT_STREAM_SIDE");

	st->side = BOTH;
	if (!side)
		return;
	st->dir = getenv("DIRECT_STREAM_DIR");
	vt_assert(st->dir && (strcmp(side, "send") == 0 || strcmp(side, "recv") == 0),
		  "DIRECT_STREAM_SIDE=send|recv needs DIRECT_STREAM_DIR");
	st->side = strcmp(side, "send") == 0 ? SEND_SIDE : RECV_SIDE;
	st->peer_dies = st->side == SEND_SIDE && env_on("DIRECT_STREAM_PEER_DIES");
	st->sender_dies = st->side == RECV_SIDE && env_on("DIRECT_STREAM_PEER_DIES");
	vt_put(st->dir, st->side == RECV_SIDE ? "recv-pid" : "send-pid", "%d\n",
	       (int)getpid());
}

int direct_stream(unsigned int seconds, uint32_t seed, unsigned int nflows)
{
	static struct stream st;	/* large; one per process */
	uint64_t sends = 0, writes = 0, reads = 0, received = 0, dropped = 0;
	pthread_t t[3];
	unsigned int f;

	vt_assert(nflows >= 1 && nflows <= ST_MAX_FLOWS, "1 to %d flows",
		  ST_MAX_FLOWS);
	printf("stream: seed %u, %u flows\n", seed, nflows);
	st.seed = seed;
	st.nflows = nflows;
	st.granted = env_on("DIRECT_STREAM_GRANTED");
	st.uc = st_uc = env_on("DIRECT_STREAM_UC");
	/* both ends: the sending one has no SRQ of its own to look at */
	st_write_imm = !st_uc && !env_on("DIRECT_STREAM_SRQ");
	stream_side(&st);
	vt_open(&st.dev);
	flows_open(&st);
	st.deadline_ms = vt_now_ms() + (long)seconds * 1000;
	vt_assert((st.side == SEND_SIDE ||
		   pthread_create(&t[1], NULL, receiver, &st) == 0) &&
		  (st.side == RECV_SIDE ||
		   (pthread_create(&t[2], NULL, crowd, &st) == 0 &&
		    pthread_create(&t[0], NULL, sender, &st) == 0)), "threads");
	if (st.side != RECV_SIDE) {
		pthread_join(t[0], NULL);
		pthread_join(t[2], NULL);
	}
	if (st.side != SEND_SIDE)
		pthread_join(t[1], NULL);
	/* the ends part when the receiver has taken everything */
	if (st.side == RECV_SIDE)
		vt_put(st.dir, "received", "1\n");
	if (st.peer_dies)
		report_failed(&st);
	else if (st.side == SEND_SIDE)
		vt_assert(vt_get(st.dir, "received", (char[8]){ 0 }, 8, vt_tmo_ms()),
			  "the receiving end did not finish");
	for (f = 0; f < nflows; f++) {
		sends += st.flow[f].sends;
		writes += st.flow[f].writes;
		reads += st.flow[f].reads;
		received += st.flow[f].received;
		dropped += st.flow[f].dropped;
	}
	/*
	 * DIRECT_RINGS=0: the daemon pairs no QPs ("direct": false).  Two
	 * processes map the rings at a post or poll once both QPs are ready;
	 * a dead sender's go with it.  A receiver killed as the pairs form
	 * (peer_dies) may be gone before its QPs were ready, or before this
	 * library's next post: then there was never a ring to map.
	 */
	vt_assert(st.sender_dies ||
		  (getenv("DIRECT_RINGS") ? vt_transit_maps() == 0 :
		   st.peer_dies || vt_transit_maps() > 0),
		  "the pairs have %d transit ring maps", vt_transit_maps());
	/* a grant maps the peer's file a second time in this process */
	if (st.granted && st.side == BOTH)
		vt_assert(vt_memfd_maps(ST_MEMFD, NULL, NULL) > (int)nflows,
			  "no grant was made");
	if (st.channel)
		printf("stream: %llu completion events\n",
		       (unsigned long long)(st.events + st.sevents));
	if (st.sender_dies)
		printf("stream: %llu received before the sender died (seed %u)\n",
		       (unsigned long long)received, seed);
	else if (st.side == RECV_SIDE)
		printf("stream: %llu received (seed %u)\n",
		       (unsigned long long)sends, seed);
	else
		printf("stream: %llu sends, %llu writes, %llu reads (seed %u)\n",
		       (unsigned long long)sends, (unsigned long long)writes,
		       (unsigned long long)reads, seed);
	if (st.uc)
		printf("stream: UC, %llu received, %llu dropped\n",
		       (unsigned long long)received, (unsigned long long)dropped);
	flows_close(&st);
	vt_close(&st.dev);
	return 0;
}
