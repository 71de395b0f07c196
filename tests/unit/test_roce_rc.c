/*
 * RC over RoCE, requester and responder (transport/roce/rc.c, rc_resp.c,
 * packet.c), with the engine and the sockets stubbed out: the IP packets
 * a QP sends, one by one or in batches, are kept here, and the test hands
 * each one to the other QP as the draining thread would (parsed, ICRC
 * checked, WRITE payloads landing in runs), or loses it.
 *
 * What is checked: a READ whose responses come with a hole asks again at
 * once, from the first missing response, for the rest of its bytes, and
 * the responder replays exactly those; a READ that timed out after part
 * of its responses arrived asks for the rest only; a READ whose request
 * was lost asks for all of it again; and with two WRITEs in flight, the
 * first's last packet lost, everything from it goes again (go-back-N) at
 * the responder's NAK, and both complete, in order, their data whole.
 * And a reply's receive completion never comes before the completion of
 * the SEND it answers: held while the SEND's ACK is in but the engine has
 * not yet completed it, written when the engine's turn ends.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "engine/internal.h"
#include "engine/transport.h"
#include "transport/roce/internal.h"
#include "tests/common/check_run.h"

/* ---- the stubbed world ----------------------------------------------------- */

#define REMOTE_VA	0x10000ull
#define REMOTE_RKEY	0x77u
#define READ_LEN	4000u		/* 4 responses at MTU 1024 */
#define WRITE_LEN	3000u		/* 3 packets at MTU 1024 */
/* XRC's SRQs, and their PDs (fake addresses, never looked into) */
#define GOOD_SRQN	0xABCDEFu	/* of PD_A, which holds REMOTE_RKEY */
#define OTHER_SRQN	0xABCDF0u	/* of PD_B */
#define PD_A		((struct ibvd_pd *)(uintptr_t)0x1000)
#define PD_B		((struct ibvd_pd *)(uintptr_t)0x2000)
/*
 * Both QPs' buffers are "client memory" behind this fd (their addresses
 * ours): the requester keeps only a pointer to them for a step in flight,
 * and WRITEs land at the responder in runs.
 */
#define CLIENT_FD	1000

static uint8_t remote_mem[8192];	/* the responder's MR */
static uint8_t local_mem[8192];		/* the requester's buffers */

/* An IP packet a QP sent. */
struct sent {
	size_t len;
	uint8_t buf[ROCE_MAX_PACKET];
};

static struct sent sent[48];
static unsigned int nsent;
static unsigned int send_calls;		/* system calls the packets took */
static unsigned int answered;
static unsigned int writevs;		/* runs landed (WRITEs, READ responses) */
static bool writev_fails;		/* a run's memory gone */
static bool recv_via_fd;		/* receive WQEs in client memory */
static unsigned int fail_at_peek;	/* at that peek, another thread
					 * fails the QP (0: never) */
static uint64_t counters[64];

/* The requester's send queue, as ibvd_eng_send_ahead sees it. */
static struct eng_req sq[10];
static unsigned int sq_posted;

static struct roce_dev rd;
static struct ibvd_device dev;
static struct ibvd_context ctx;
static struct ibvd_qp req_qp, resp_qp;	/* requester 0x11, responder 0x22 */

static const uint8_t ip_req[4] = { 10, 0, 0, 1 };
static const uint8_t ip_resp[4] = { 10, 0, 0, 2 };

pthread_mutex_t ibvd_eng_atomic_lock = PTHREAD_MUTEX_INITIALIZER;
__thread struct roce_dev *roce_rx_self;

void roce_qp_path(const struct ibvd_qp *qp, struct roce_path *path)
{
	bool is_req = qp == &req_qp;

	memset(path, 0, sizeof(*path));
	path->family = AF_INET;
	memcpy(path->src, is_req ? ip_req : ip_resp, 4);
	memcpy(path->dst, is_req ? ip_resp : ip_req, 4);
	path->hop_limit = 64;
	path->sport = 0xC000;
}

static void keep(const uint8_t *pkt, size_t len)
{
	ck_assert_uint_lt(nsent, sizeof(sent) / sizeof(sent[0]));
	ck_assert_uint_le(len, ROCE_MAX_PACKET);
	sent[nsent].len = len;
	memcpy(sent[nsent].buf, pkt, len);
	nsent++;
}

int roce_io_send(struct roce_dev *r, const uint8_t *pkt, size_t len,
		 const uint8_t *dst)
{
	ck_assert_ptr_eq(r, &rd);
	(void)dst;
	keep(pkt, len);
	send_calls++;
	return 0;
}

/* A path that may not wait (QP1's): counted apart, kept the same. */
static unsigned int send_now_calls;

int roce_io_send_now(struct roce_dev *r, const uint8_t *pkt, size_t len,
		     const uint8_t *dst)
{
	ck_assert_ptr_eq(r, &rd);
	(void)dst;
	keep(pkt, len);
	send_now_calls++;
	return 0;
}

void roce_io_send_batch(struct roce_dev *r, const uint8_t *const *pkts,
			const size_t *lens, unsigned int n, int family,
			const uint8_t *dst)
{
	unsigned int i;

	ck_assert_ptr_eq(r, &rd);
	ck_assert_int_eq(family, AF_INET);
	(void)dst;
	for (i = 0; i < n; i++)
		keep(pkts[i], lens[i]);
	send_calls++;
}

/*
 * A run goes out as the link would cut it: its packets, each with the
 * identification and ICRC its segment gets (gso.c).
 */
static unsigned int runs, run_pkts;

int roce_io_send_run(struct roce_dev *r, const struct roce_path *path,
		     uint8_t *const *pkts, const size_t *lens, unsigned int n)
{
	unsigned int i;

	ck_assert_ptr_eq(r, &rd);
	(void)path;
	ck_assert_uint_ge(n, 2);
	for (i = 0; i < n; i++) {
		ck_assert_uint_eq(pkts[i][4] << 8 | pkts[i][5], i);
		keep(pkts[i], lens[i]);
	}
	runs++;
	run_pkts += n;
	send_calls++;
	return 0;
}

bool roce_is_local(const struct roce_dev *r, int family, const uint8_t *addr)
{
	(void)r;
	(void)family;
	(void)addr;
	return false;
}

void roce_rx_local(struct roce_dev *r, const uint8_t *pkt, size_t len)
{
	(void)r;
	(void)pkt;
	(void)len;
	ck_abort_msg("no packet goes to the device's own address here");
}

/* Segments with fd < 0 are plain pointers (transport.h allows it); so are
 * CLIENT_FD's. */
static void sgl_move(const struct eng_sgl *sgl, uint64_t off, uint8_t *buf,
		     uint64_t len, bool in)
{
	unsigned int i;

	for (i = 0; i < sgl->n && len; i++) {
		const struct eng_seg *s = &sgl->seg[i];
		uint64_t n;

		if (off >= s->len) {
			off -= s->len;
			continue;
		}
		n = s->len - off < len ? s->len - off : len;
		ck_assert(s->fd < 0 || s->fd == CLIENT_FD);
		if (in)
			memcpy((uint8_t *)(uintptr_t)s->addr + off, buf, n);
		else
			memcpy(buf, (const uint8_t *)(uintptr_t)s->addr + off, n);
		buf += n;
		len -= n;
		off = 0;
	}
	ck_assert_uint_eq(len, 0);
}

/* The requester's first 4 KiB: a pattern to find again at the responder. */
static void fill_local(void)
{
	unsigned int i;

	for (i = 0; i < 4096; i++)
		local_mem[i] = (uint8_t)(i * 13 + 5);
}

/* A one-segment list over our own buffer. */
static void sgl_over(struct eng_sgl *sgl, uint8_t *buf,
				      uint64_t len)
{
	sgl->seg[0].fd = -1;
	sgl->seg[0].addr = (uintptr_t)buf;
	sgl->seg[0].len = len;
	sgl->seg[0].map = NULL;
	sgl->n = 1;
	sgl->total = len;
}

int ibvd_eng_copy_in(const struct eng_sgl *dst, uint64_t off, const void *buf,
		     uint64_t len)
{
	sgl_move(dst, off, (uint8_t *)(uintptr_t)buf, len, true);
	return 0;
}

int ibvd_eng_copy_out(const struct eng_sgl *src, uint64_t off, void *buf,
		      uint64_t len)
{
	sgl_move(src, off, buf, len, false);
	return 0;
}

int ibvd_eng_rkey_resolve(const struct ibvd_qp *target, uint32_t rkey,
			  uint64_t raddr, uint64_t len, uint32_t access,
			  struct eng_sgl *out)
{
	ck_assert_ptr_eq(target, &resp_qp);
	if (target->qp_type == IBV_QPT_XRC_RECV && target->pd != PD_A)
		return -EACCES;
	if (rkey != REMOTE_RKEY || raddr < REMOTE_VA ||
	    raddr + len > REMOTE_VA + sizeof(remote_mem) ||
	    !(target->attr.access & access))
		return -EACCES;
	out->seg[out->n].fd = CLIENT_FD;
	out->seg[out->n].addr = (uintptr_t)(remote_mem + (raddr - REMOTE_VA));
	out->seg[out->n].len = len;
	out->seg[out->n].map = NULL;
	out->n++;
	out->total += len;
	return 0;
}

/* Bytes the transport sent again (ibvd_eng_charge_copies). */
static uint64_t charged;

void ibvd_eng_charge_copies(struct ibvd_engine *eng, uint64_t bytes)
{
	(void)eng;
	charged += bytes;
}

/* The earliest time the transport asked to be asked again by (0: none). */
static uint64_t asked_by;

void ibvd_eng_ask_again_by(struct ibvd_engine *eng, uint64_t when_ns)
{
	(void)eng;
	if (!asked_by || when_ns < asked_by)
		asked_by = when_ns;
}

void ibvd_eng_answered(struct ibvd_qp *qp)
{
	ck_assert_ptr_eq(qp, &req_qp);
	answered++;
}

bool ibvd_eng_send_ahead(struct ibvd_engine *eng, struct ibvd_qp *src,
			 uint32_t counter, struct eng_req *req)
{
	(void)eng;
	if (src != &req_qp)
		return false;
	ck_assert_uint_gt(counter, src->sq_head);
	if (counter >= sq_posted)
		return false;
	*req = sq[counter];
	return true;
}

/* The inline data the requester's SQ slots hold (ibvd_eng_send_inline). */
#define INLINE_SLOTS	4
static uint8_t sq_inline[INLINE_SLOTS][64];

const uint8_t *ibvd_eng_send_inline(const struct ibvd_qp *qp, uint32_t counter)
{
	ck_assert_ptr_eq(qp, &req_qp);
	return sq_inline[counter % INLINE_SLOTS];
}

void ibvd_eng_port_count(const struct ibvd_qp *qp, enum ibvd_port_counter c,
			 uint64_t n)
{
	(void)qp;
	ck_assert_uint_lt((unsigned int)c, 64);
	counters[c] += n;
}

uint64_t ibvd_eng_timeout_ns(uint8_t timeout)
{
	return timeout ? 4096ull << timeout : ENG_RETRY_FOREVER_NS;
}

/*
 * Each QP's receive queue: how many WQEs are posted (wr_ids from 100 on,
 * each 2048 bytes at local_mem + 4096), and the receive completions
 * written, in order.  With use_srq the responder's queue is an SRQ, whose
 * WQE a SEND holds in the engine's responder state (chunk.c, linked in):
 * its SGE is resolved again for each packet, and fails once the MR under
 * it is gone (mr_gone).
 */
#define RECV_LKEY	0x55u
static pthread_mutex_t rq_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned int rq_posted[2], rq_taken[2];
static struct { const struct ibvd_qp *qp; uint64_t wr_id; } recvs_done[8];
static unsigned int nrecvs_done, turns_asked;
static bool use_srq, mr_gone;
static unsigned int resolves;
/* error completions of receives (only where a test expects them) */
static bool recv_errs_expected;
static struct { uint64_t wr_id; enum ibv_wc_status status; } recv_errs[4];
static unsigned int nrecv_errs;

static unsigned int rq_index(const struct ibvd_qp *qp)
{
	return qp == &req_qp ? 0 : 1;
}

void ibvd_eng_rq_of(struct ibvd_qp *qp, struct eng_rq *rq)
{
	memset(rq, 0, sizeof(*rq));
	rq->qp = qp;
	rq->lock = &rq_lock;
	rq->pd = PD_A;
	if (use_srq && qp == &resp_qp)
		rq->srq = qp->srq;
}

enum ibv_wc_status ibvd_eng_sges_resolve(const struct ibvd_sge *sge,
					 unsigned int nsge,
					 const struct ibvd_pd *pd, bool write,
					 struct eng_sgl *out)
{
	ck_assert_uint_eq(nsge, 1);
	ck_assert_ptr_eq(pd, PD_A);
	ck_assert(write);
	ck_assert_uint_eq(sge[0].lkey, RECV_LKEY);
	resolves++;
	if (mr_gone)
		return IBV_WC_LOC_PROT_ERR;
	sgl_over(out, (uint8_t *)(uintptr_t)sge[0].addr, sge[0].length);
	return IBV_WC_SUCCESS;
}

/* As the engine's: a WQE a cut UC message left comes first. */
int ibvd_eng_rq_peek(const struct eng_rq *rq, struct eng_recv *out)
{
	unsigned int q = rq_index(rq->qp);

	if (ibvd_eng_kept_peek(rq->qp, rq->pd, out))
		return 1;
	if (rq_taken[q] == rq_posted[q])
		return 0;
	if (fail_at_peek && --fail_at_peek == 0)
		rq->qp->state = IBV_QPS_ERR;
	memset(out, 0, sizeof(*out));
	out->wr_id = 100 + rq_taken[q];
	out->nsge = 1;
	out->sge[0].addr = (uintptr_t)(local_mem + 4096);
	out->sge[0].length = 2048;
	out->sge[0].lkey = RECV_LKEY;
	sgl_over(&out->sgl, local_mem + 4096, 2048);
	if (recv_via_fd)
		out->sgl.seg[0].fd = CLIENT_FD;
	return 1;
}

void ibvd_eng_rq_consume(const struct eng_rq *rq)
{
	if (ibvd_eng_kept_take(rq->qp))
		return;
	rq_taken[rq_index(rq->qp)]++;
}

void ibvd_eng_rq_broken(struct ibvd_qp *target, const struct eng_rq *rq)
{
	(void)target;
	(void)rq;
	ck_abort_msg("the receive queue is never broken here");
}

void ibvd_eng_recv_fail(struct ibvd_qp *target, const struct eng_rq *rq,
			const struct eng_recv *rwqe, enum ibv_wc_status status)
{
	(void)target;
	(void)rq;
	(void)rwqe;
	ck_abort_msg("receive failed: status %d", status);
}

void ibvd_eng_recv_err(struct ibvd_qp *target, uint64_t wr_id,
		       enum ibv_wc_status status)
{
	ck_assert_ptr_eq(target, &resp_qp);
	ck_assert_msg(recv_errs_expected, "receive %llu completed with status %d",
		      (unsigned long long)wr_id, status);
	ck_assert_uint_lt(nrecv_errs, sizeof(recv_errs) / sizeof(recv_errs[0]));
	recv_errs[nrecv_errs].wr_id = wr_id;
	recv_errs[nrecv_errs].status = status;
	nrecv_errs++;
}

/* What chunk.c needs besides: nothing here sends to a local QP. */
void ibvd_eng_recv_cqe(struct ibvd_qp *target, uint64_t wr_id,
		       const struct ibvd_qp *src, const struct eng_req *req,
		       const struct eng_rcv_info *info)
{
	(void)target;
	(void)src;
	(void)req;
	(void)info;
	ck_abort_msg("a local receive completion (%llu)", (unsigned long long)wr_id);
}

struct ibvd_qp *ibvd_qp_by_num(uint32_t qp_num)
{
	(void)qp_num;
	return NULL;
}

void ibvd_eng_recv_done(struct ibvd_qp *target, uint64_t wr_id,
			const struct eng_rcv_done *d)
{
	ck_assert_uint_eq(d->opcode, IBV_WC_RECV);
	ck_assert_uint_lt(nrecvs_done, sizeof(recvs_done) / sizeof(recvs_done[0]));
	recvs_done[nrecvs_done].qp = target;
	recvs_done[nrecvs_done].wr_id = wr_id;
	nrecvs_done++;
}

void ibvd_eng_turn_soon(struct ibvd_qp *qp)
{
	ck_assert_ptr_eq(qp, &req_qp);
	turns_asked++;
}

int ibvd_eng_remote_inv(const struct ibvd_qp *target, uint32_t key, bool commit)
{
	(void)target;
	(void)key;
	(void)commit;
	return -EINVAL;
}

/* A test that expects the responder's error says with which event
 * (0: none); -1: no error expected. */
static int64_t responder_error_expected;
static uint32_t responder_errors;

void ibvd_eng_responder_error(struct ibvd_qp *target, uint32_t event)
{
	ck_assert_ptr_eq(target, &resp_qp);
	/* the first decides; a second (the NAK's) changes nothing */
	ck_assert_msg(responder_errors || event == responder_error_expected,
		      "responder error %u", event);
	responder_errors++;
	/* as the engine's: the QP is in error from now on */
	target->state = IBV_QPS_ERR;
}

/* XRC: the target's domain holds GOOD_SRQN and OTHER_SRQN; the message's
 * SRQ gives the target its PD. */
static unsigned int xrc_taken;

bool ibvd_eng_xrc_take(struct ibvd_qp *target, uint32_t srqn)
{
	ck_assert_ptr_eq(target, &resp_qp);
	if (srqn != GOOD_SRQN && srqn != OTHER_SRQN)
		return false;
	target->pd = srqn == GOOD_SRQN ? PD_A : PD_B;
	xrc_taken++;
	return true;
}

/* The requester's MRs: all there, or (local_gone) deregistered. */
static bool local_gone;
static unsigned int local_checks;

bool ibvd_eng_sgl_current(const struct eng_sgl *sgl, const struct ibvd_pd *pd,
			  bool write)
{
	local_checks++;
	return !local_gone;
}

/* As memory.c's: one segment reached through CLIENT_FD holds the bytes. */
bool ibvd_eng_sgl_client_piece(const struct eng_sgl *sgl, uint64_t off,
			       uint64_t len, int *fd, uint64_t *addr)
{
	unsigned int i;

	for (i = 0; i < sgl->n && off >= sgl->seg[i].len; i++)
		off -= sgl->seg[i].len;
	if (!len || i == sgl->n || sgl->seg[i].fd < 0 || sgl->seg[i].map ||
	    sgl->seg[i].len - off < len)
		return false;
	*fd = sgl->seg[i].fd;
	*addr = sgl->seg[i].addr + off;
	return true;
}

/* Would a timeout now fail the front (the engine's retry count)? */
static bool retries_spent;

bool ibvd_eng_retry_spent(const struct ibvd_qp *qp)
{
	ck_assert_ptr_eq(qp, &req_qp);
	return retries_spent;
}

/* Budgets given back by progress after a timeout. */
static unsigned int refills;

void ibvd_eng_retry_refill(struct ibvd_qp *qp)
{
	ck_assert_ptr_eq(qp, &req_qp);
	refills++;
}

bool ibvd_eng_can_receive(uint32_t state)
{
	return state == IBV_QPS_RTR || state == IBV_QPS_RTS ||
	       state == IBV_QPS_SQD || state == IBV_QPS_SQE;
}

int ibvd_eng_mem_read(int fd, uint64_t addr, void *buf, size_t len)
{
	ck_assert_int_eq(fd, CLIENT_FD);
	memcpy(buf, (const void *)(uintptr_t)addr, len);
	return 0;
}

int ibvd_eng_mem_write(int fd, uint64_t addr, const void *buf, size_t len)
{
	ck_assert_int_eq(fd, CLIENT_FD);
	memcpy((void *)(uintptr_t)addr, buf, len);
	return 0;
}

int ibvd_eng_mem_writev(int fd, uint64_t addr, const struct iovec *iov,
			unsigned int n)
{
	unsigned int i;

	ck_assert_int_eq(fd, CLIENT_FD);
	if (writev_fails)
		return -EFAULT;
	for (i = 0; i < n; i++) {
		memcpy((void *)(uintptr_t)addr, iov[i].iov_base, iov[i].iov_len);
		addr += iov[i].iov_len;
	}
	writevs++;
	return 0;
}

/* ---- helpers ----------------------------------------------------------------- */

static void setup(void)
{
	size_t i;

	for (i = 0; i < sizeof(remote_mem); i++)
		remote_mem[i] = (uint8_t)(i * 7 + 3);
	memset(local_mem, 0, sizeof(local_mem));
	nsent = send_calls = send_now_calls = runs = run_pkts = 0;
	answered = 0;
	charged = 0;
	asked_by = 0;
	writevs = 0;
	writev_fails = recv_via_fd = false;
	fail_at_peek = 0;
	retries_spent = false;
	refills = 0;
	sq_posted = 0;
	memset(rq_posted, 0, sizeof(rq_posted));
	memset(rq_taken, 0, sizeof(rq_taken));
	nrecvs_done = turns_asked = 0;
	responder_error_expected = -1;
	responder_errors = xrc_taken = 0;
	use_srq = mr_gone = recv_errs_expected = local_gone = false;
	local_checks = 0;
	resolves = nrecv_errs = 0;
	memset(counters, 0, sizeof(counters));
	memset(&rd, 0, sizeof(rd));
	memset(&dev, 0, sizeof(dev));
	memset(&ctx, 0, sizeof(ctx));
	dev.transport_priv = &rd;
	ctx.dev = &dev;
	memset(&req_qp, 0, sizeof(req_qp));
	memset(&resp_qp, 0, sizeof(resp_qp));
	req_qp.ctx = resp_qp.ctx = &ctx;
	req_qp.qp_type = resp_qp.qp_type = IBV_QPT_RC;
	req_qp.qp_num = 0x11;
	resp_qp.qp_num = 0x22;
	req_qp.attr.dest_qp_num = 0x22;
	resp_qp.attr.dest_qp_num = 0x11;
	req_qp.attr.path_mtu = resp_qp.attr.path_mtu = IBV_MTU_1024;
	req_qp.attr.max_rd_atomic = 4;
	resp_qp.attr.max_dest_rd_atomic = 4;
	/* 4.3 s: nothing in a test waits that long unless it must */
	req_qp.attr.timeout = 20;
	req_qp.attr.sq_psn = resp_qp.attr.rq_psn = 0xFFFFFE;	/* wraps */
	resp_qp.attr.sq_psn = req_qp.attr.rq_psn = 0x100;
	req_qp.state = resp_qp.state = IBV_QPS_RTS;
	resp_qp.attr.access = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
	/* the send queue's size and inline data bound the requester's slots */
	req_qp.sq.nslots = resp_qp.sq.nslots = 256;
	req_qp.sq.stride = resp_qp.sq.stride = 256;
	req_qp.cap.max_inline_data = resp_qp.cap.max_inline_data = 1024;
	req_qp.cap.max_send_sge = resp_qp.cap.max_send_sge = ENG_MAX_SGE;
}

/*
 * qp's wire state, as its RTR makes it in the daemon: here at its first
 * use, once a test has set qp up (its type, its path).
 */
static struct ibvd_qp *wired(struct ibvd_qp *qp)
{
	size_t bytes;

	if (!qp->wire) {
		ck_assert_int_eq(roce_rc_prepare(qp, &bytes), 0);
		ck_assert_uint_gt(bytes, sizeof(struct roce_qp));
		roce_rc_av_changed(qp);
	}
	return qp;
}

static void teardown(void)
{
	roce_rx_self = NULL;
	roce_rc_forget(&req_qp);
	roce_rc_forget(&resp_qp);
	free(resp_qp.inbound);
	resp_qp.inbound = NULL;
}

/* A READ of READ_LEN bytes from REMOTE_VA into local_mem. */
static void read_req(struct eng_req *er)
{
	memset(er, 0, sizeof(*er));
	er->w.opcode = IBV_WR_RDMA_READ;
	er->w.remote_addr = REMOTE_VA;
	er->w.rkey = REMOTE_RKEY;
	er->length = er->step = READ_LEN;
	er->signaled = true;
	er->local.n = 1;
	er->local.seg[0].fd = CLIENT_FD;
	er->local.seg[0].addr = (uintptr_t)local_mem;
	er->local.seg[0].len = sizeof(local_mem);
	er->local.total = sizeof(local_mem);
}

/* A WRITE of WRITE_LEN bytes from local_mem + at to REMOTE_VA + at. */
static void write_req(struct eng_req *er, uint64_t at)
{
	memset(er, 0, sizeof(*er));
	er->w.opcode = IBV_WR_RDMA_WRITE;
	er->w.remote_addr = REMOTE_VA + at;
	er->w.rkey = REMOTE_RKEY;
	er->length = er->step = WRITE_LEN;
	er->signaled = true;
	er->local.n = 1;
	er->local.seg[0].fd = CLIENT_FD;
	er->local.seg[0].addr = (uintptr_t)(local_mem + at);
	er->local.seg[0].len = WRITE_LEN;
	er->local.total = WRITE_LEN;
}

/* A SEND of len bytes from local_mem + at. */
static void send_req(struct eng_req *er, uint64_t at, uint32_t len)
{
	memset(er, 0, sizeof(*er));
	er->w.opcode = IBV_WR_SEND;
	er->length = er->step = len;
	er->signaled = true;
	er->local.n = 1;
	er->local.seg[0].fd = CLIENT_FD;
	er->local.seg[0].addr = (uintptr_t)(local_mem + at);
	er->local.seg[0].len = len;
	er->local.total = len;
}

/* n SENDs of len bytes each posted, from local_mem on, none taken yet. */
static void post_sends(unsigned int n, uint32_t len)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		send_req(&sq[i], (uint64_t)len * i, len);
	sq_posted = n;
	req_qp.sq_head = 0;
}

/* Sent packet i, decoded (payload pointing into sent[i]). */
static void decode(unsigned int i, struct roce_ip *ip, struct roce_pkt *p)
{
	size_t off, len;

	ck_assert_uint_lt(i, nsent);
	ck_assert_int_eq(roce_parse_ip(sent[i].buf, sent[i].len, ip, &off, &len), 0);
	ck_assert(roce_icrc_ok(sent[i].buf, off + len));
	ck_assert_int_eq(roce_decode(sent[i].buf + off, len, p), 0);
}

/*
 * Hand sent packets idx[0..n-1] to the QPs they were for, as one batch of
 * the draining thread: payloads land in runs, and the ACKs owed go, by
 * the batch's end (io.c).
 */
static void deliver_batch(const unsigned int *idx, unsigned int n)
{
	unsigned int i;

	roce_rx_self = &rd;
	rd.read_budget = ROCE_READ_DRAIN_BYTES;
	for (i = 0; i < n; i++) {
		struct roce_ip ip;
		struct roce_pkt p;

		decode(idx[i], &ip, &p);
		roce_rc_rx(&rd, wired(p.dest_qp == req_qp.qp_num ?
					    &req_qp : &resp_qp), &ip, &p);
	}
	roce_wrun_flush(&rd);
	roce_ack_flush(&rd);
	roce_rx_self = NULL;
}

static void deliver(unsigned int i)
{
	deliver_batch(&i, 1);
}

/* The engine's call for the WQE in front of the requester's queue. */
static enum eng_resp call(const struct eng_req *er)
{
	uint8_t rnr = 0;

	return roce_rc_send(NULL, wired(&req_qp), er, &rnr);
}

static void expect_pkt(unsigned int i, uint8_t opcode, uint32_t psn)
{
	struct roce_ip ip;
	struct roce_pkt p;

	decode(i, &ip, &p);
	ck_assert_uint_eq(p.opcode, opcode);
	ck_assert_uint_eq(p.psn, psn);
}

static void expect_aeth(unsigned int i, uint8_t syndrome, uint32_t msn)
{
	struct roce_ip ip;
	struct roce_pkt p;

	decode(i, &ip, &p);
	ck_assert_uint_eq(p.aeth.syndrome, syndrome);
	ck_assert_uint_eq(p.aeth.msn, msn);
}

static void expect_read_request(unsigned int i, uint32_t psn, uint64_t va,
				uint32_t len)
{
	struct roce_ip ip;
	struct roce_pkt p;

	decode(i, &ip, &p);
	ck_assert_uint_eq(p.opcode, ROCE_RC_RDMA_READ_REQUEST);
	ck_assert_uint_eq(p.dest_qp, 0x22);
	ck_assert_uint_eq(p.psn, psn);
	ck_assert_uint_eq(p.reth.va, va);
	ck_assert_uint_eq(p.reth.rkey, REMOTE_RKEY);
	ck_assert_uint_eq(p.reth.len, len);
}

/* ---- the tests ----------------------------------------------------------------- */

START_TEST(read_hole_retried_at_once_from_it)
{
	struct eng_req er;
	unsigned int first;

	read_req(&er);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	ck_assert_uint_eq(nsent, 1);
	expect_read_request(0, 0xFFFFFE, REMOTE_VA, READ_LEN);

	deliver(0);
	ck_assert_uint_eq(nsent, 5);		/* PSNs FFFFFE, FFFFFF, 0, 1 */
	expect_pkt(1, ROCE_RC_READ_RESPONSE_FIRST, 0xFFFFFE);
	expect_pkt(4, ROCE_RC_READ_RESPONSE_LAST, 1);

	/* the second response is lost; the third shows the hole at once */
	deliver(1);
	ck_assert_uint_eq(answered, 0);
	deliver(3);
	ck_assert_uint_eq(answered, 1);
	ck_assert_uint_eq(counters[IBVD_PC_COMPLETER_RETRY_ERR], 1);
	/* the last one, past the same hole, asks for nothing more */
	deliver(4);
	ck_assert_uint_eq(answered, 1);
	ck_assert_uint_eq(counters[IBVD_PC_COMPLETER_RETRY_ERR], 1);

	/* the engine's next call asks again, long before the timeout */
	first = nsent;
	ck_assert_int_eq(call(&er), RESP_PENDING);
	ck_assert_uint_eq(nsent, first + 1);
	expect_read_request(first, 0xFFFFFF, REMOTE_VA + 1024, READ_LEN - 1024);
	/* and only once */
	ck_assert_int_eq(call(&er), RESP_PENDING);
	ck_assert_uint_eq(nsent, first + 1);

	/* a duplicate to the responder: it replays responses 1..3 only */
	deliver(first);
	ck_assert_uint_eq(nsent, first + 4);
	ck_assert_uint_eq(counters[IBVD_PC_DUPLICATE_REQUEST], 1);
	expect_pkt(first + 1, ROCE_RC_READ_RESPONSE_MIDDLE, 0xFFFFFF);
	expect_pkt(first + 3, ROCE_RC_READ_RESPONSE_LAST, 1);

	deliver(first + 1);
	deliver(first + 2);
	deliver(first + 3);
	ck_assert_uint_eq(answered, 2);
	ck_assert_int_eq(call(&er), RESP_OK);
	ck_assert_mem_eq(local_mem, remote_mem, READ_LEN);
	ck_assert_uint_eq(local_mem[READ_LEN], 0);

	/* a late copy of the old last response starts nothing */
	deliver(4);
	ck_assert_uint_eq(answered, 2);
}
END_TEST

/* A READ sent and answered: its four responses are packets 1 to 4. */
static void read_answered(struct eng_req *er)
{
	read_req(er);
	ck_assert_int_eq(call(er), RESP_PENDING);
	deliver(0);
	ck_assert_uint_eq(nsent, 5);
}

/* A READ's responses in one batch land in one call, before its answer. */
START_TEST(read_responses_land_in_one_run)
{
	unsigned int resp[] = { 1, 2, 3, 4 };
	struct eng_req er;

	read_answered(&er);
	deliver_batch(resp, 4);
	ck_assert_uint_eq(writevs, 1);
	ck_assert_uint_eq(answered, 1);
	ck_assert_int_eq(call(&er), RESP_OK);
	ck_assert_mem_eq(local_mem, remote_mem, READ_LEN);
	ck_assert_uint_eq(local_mem[READ_LEN], 0);
}
END_TEST

/* A run that cannot land completes its READ with a local fault, not OK. */
START_TEST(read_run_that_cannot_land)
{
	unsigned int resp[] = { 1, 2, 3, 4 };
	struct eng_req er;

	read_answered(&er);
	writev_fails = true;
	deliver_batch(resp, 4);
	ck_assert_uint_eq(answered, 1);
	ck_assert_int_eq(call(&er), RESP_LOCAL_FAULT);
	ck_assert_uint_eq(local_mem[0], 0);
}
END_TEST

/*
 * The QP goes to error between the responses and the run's landing: the
 * READ is flushed, its buffer the application's again, and nothing lands.
 */
START_TEST(read_run_after_the_qp_failed)
{
	struct roce_ip ip;
	struct roce_pkt p;
	struct eng_req er;
	unsigned int i;

	read_answered(&er);
	roce_rx_self = &rd;
	rd.read_budget = ROCE_READ_DRAIN_BYTES;
	for (i = 1; i <= 3; i++) {
		decode(i, &ip, &p);
		roce_rc_rx(&rd, wired(&req_qp), &ip, &p);
	}
	ck_assert_uint_eq(writevs, 0);		/* taken, not landed yet */
	req_qp.state = IBV_QPS_ERR;
	decode(4, &ip, &p);			/* the last: no answer */
	roce_rc_rx(&rd, wired(&req_qp), &ip, &p);
	roce_wrun_flush(&rd);
	roce_rx_self = NULL;
	ck_assert_uint_eq(writevs, 0);
	ck_assert_uint_eq(answered, 0);
	ck_assert_uint_eq(local_mem[0], 0);
}
END_TEST

START_TEST(read_timeout_asks_for_the_rest_only)
{
	struct eng_req er;
	unsigned int first;

	read_req(&er);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	deliver(0);
	ck_assert_uint_eq(nsent, 5);

	/* the last two are lost: nothing shows it but the timeout */
	deliver(1);
	deliver(2);
	ck_assert_uint_eq(answered, 0);
	first = nsent;
	ck_assert_int_eq(call(&er), RESP_PENDING);
	ck_assert_uint_eq(nsent, first);

	req_qp.attr.timeout = 1;		/* 8 us */
	usleep(1000);
	ck_assert_int_eq(call(&er), RESP_NO_ACK);
	ck_assert_uint_eq(counters[IBVD_PC_COMPLETER_RETRY_ERR], 1);
	ck_assert_uint_eq(nsent, first + 1);
	expect_read_request(first, 0, REMOTE_VA + 2048, READ_LEN - 2048);

	req_qp.attr.timeout = 20;
	deliver(first);
	ck_assert_uint_eq(nsent, first + 3);
	deliver(first + 1);
	deliver(first + 2);
	ck_assert_uint_eq(answered, 1);
	ck_assert_int_eq(call(&er), RESP_OK);
	ck_assert_mem_eq(local_mem, remote_mem, READ_LEN);
}
END_TEST

/*
 * The timeout that fails a READ (its retries spent): nothing goes again,
 * and its responses, late, land nothing once the engine writes its error
 * completion (the QP is still in RTS until it has).
 */
START_TEST(read_failed_by_its_timeout_lands_nothing)
{
	struct eng_req er;
	unsigned int first;

	read_req(&er);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	deliver(0);			/* 4 responses, held back */
	ck_assert_uint_eq(nsent, 5);
	first = nsent;
	req_qp.attr.timeout = 1;
	retries_spent = true;
	usleep(1000);
	ck_assert_int_eq(call(&er), RESP_NO_ACK);
	ck_assert_uint_eq(nsent, first);	/* nothing asked again */
	ck_assert_uint_eq(counters[IBVD_PC_COMPLETER_RETRY_ERR], 1);
	deliver(1);
	deliver(2);
	deliver(3);
	deliver(4);
	ck_assert_uint_eq(answered, 0);
	ck_assert_uint_eq(writevs, 0);
	ck_assert_uint_eq(local_mem[0], 0);
	ck_assert_uint_eq(local_mem[READ_LEN - 1], 0);
}
END_TEST

START_TEST(read_whole_again_when_nothing_came)
{
	struct eng_req er;

	read_req(&er);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	/* the request itself is lost */
	req_qp.attr.timeout = 1;
	usleep(1000);
	ck_assert_int_eq(call(&er), RESP_NO_ACK);
	ck_assert_uint_eq(nsent, 2);
	expect_read_request(1, 0xFFFFFE, REMOTE_VA, READ_LEN);
	req_qp.attr.timeout = 20;
	deliver(1);
	ck_assert_uint_eq(nsent, 6);
	deliver(2);
	deliver(3);
	deliver(4);
	deliver(5);
	ck_assert_int_eq(call(&er), RESP_OK);
	ck_assert_mem_eq(local_mem, remote_mem, READ_LEN);
}
END_TEST

/* Hand over the packets sent from `from` on, and those they make sent. */
static void exchange(unsigned int from)
{
	while (from < nsent) {
		unsigned int end = nsent;

		for (; from < end; from++)
			deliver(from);
	}
}

/*
 * The retries count timeouts in a row (rxe's reset_retry_counters): a
 * timeout after responses that moved the READ on gives it its budget
 * again; a timeout after another, with nothing heard between, does not.
 */
START_TEST(progress_between_timeouts_refills_the_retries)
{
	struct eng_req er;
	unsigned int first;

	read_req(&er);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	deliver(0);
	ck_assert_uint_eq(nsent, 5);
	req_qp.attr.timeout = 1;		/* 8 us */

	/* nothing heard yet: the first timeout spends a retry */
	usleep(1000);
	ck_assert_int_eq(call(&er), RESP_NO_ACK);
	ck_assert_uint_eq(refills, 0);
	/* a response in order moves the READ on: the next timeout refills */
	deliver(1);
	usleep(1000);
	ck_assert_int_eq(call(&er), RESP_NO_ACK);
	ck_assert_uint_eq(refills, 1);
	/* then silence: timeouts in a row spend */
	usleep(1000);
	ck_assert_int_eq(call(&er), RESP_NO_ACK);
	usleep(1000);
	ck_assert_int_eq(call(&er), RESP_NO_ACK);
	ck_assert_uint_eq(refills, 1);

	/* and the READ still completes whole */
	req_qp.attr.timeout = 20;
	first = nsent - 1;
	exchange(first);
	ck_assert_int_eq(call(&er), RESP_OK);
	ck_assert_mem_eq(local_mem, remote_mem, READ_LEN);
}
END_TEST

/* er, a message of 4096 bytes, in two steps of 2048 as the engine gives them. */
static void two_steps(struct eng_req *er)
{
	unsigned int i, from;

	er->length = 4096;
	for (i = 0; i < 2; i++) {
		er->off = i * 2048;
		er->step = 2048;
		from = nsent;
		ck_assert_int_eq(call(er), RESP_PENDING);
		exchange(from);
		ck_assert_int_eq(call(er), RESP_OK);
	}
}

/*
 * A message longer than a chunk goes in steps (engine/chunk.c): each step
 * carries, or takes in, its own bytes of the local buffers.
 */
START_TEST(chunked_steps_move_their_own_bytes)
{
	struct eng_req er;
	unsigned int i;

	for (i = 0; i < 4096; i++)
		local_mem[i] = (uint8_t)(i * 13 + 5 + (i >= 2048 ? 0x40 : 0));
	write_req(&er, 0);
	er.local.seg[0].len = er.local.total = 4096;
	two_steps(&er);
	ck_assert_mem_eq(remote_mem, local_mem, 4096);

	memset(local_mem, 0, sizeof(local_mem));
	read_req(&er);
	two_steps(&er);
	ck_assert_mem_eq(local_mem, remote_mem, 4096);
}
END_TEST

/*
 * An inline SEND's data is in the engine's scratch buffer only while it
 * is taken: a retransmission reads it where the WQE's slot holds it (what
 * the client wrote there since is its own message's business).  Memory of
 * the engine's that is not a WQE's inline data is not kept at all.
 */
/* SQ WQE i: an inline SEND of 16 bytes, taken from scratch. */
static void inline_send(unsigned int i, uint8_t *scratch, char was)
{
	send_req(&sq[i], 0, 16);
	sgl_over(&sq[i].local, scratch, 16);
	sq[i].w.send_flags = IBV_SEND_INLINE;
	sq[i].w.inline_len = 16;
	memset(scratch, was, 16);
	memset(sq_inline[i], was, 16);
}

START_TEST(inline_send_again_from_its_slot)
{
	uint8_t scratch[2][16];
	struct roce_ip ip;
	struct roce_pkt p;
	unsigned int i;

	/* two WQEs, the second sent ahead of its turn */
	inline_send(0, scratch[0], 'A');
	inline_send(1, scratch[1], 'C');
	sq_posted = 2;
	req_qp.sq_head = 0;
	ck_assert_int_eq(call(&sq[0]), RESP_PENDING);
	ck_assert_uint_eq(nsent, 2);
	for (i = 0; i < 2; i++) {
		decode(i, &ip, &p);
		ck_assert_uint_eq(p.payload_len, 16);
		ck_assert_mem_eq(p.payload, scratch[i], 16);
	}

	/* the engine's next WQEs, and what the client wrote in the slots */
	memset(scratch, 'X', sizeof(scratch));
	memset(sq_inline[0], 'B', 16);
	memset(sq_inline[1], 'D', 16);
	req_qp.attr.timeout = 1;		/* 8 us */
	usleep(1000);
	ck_assert_int_eq(call(&sq[0]), RESP_NO_ACK);
	ck_assert_uint_eq(nsent, 4);
	for (i = 0; i < 2; i++) {
		decode(2 + i, &ip, &p);
		ck_assert_uint_eq(p.psn, roce_psn_add(0xFFFFFE, i));
		ck_assert_mem_eq(p.payload, sq_inline[i], 16);
	}
	roce_rc_forget(&req_qp);

	/* the engine's own memory, not flagged inline: not kept */
	send_req(&sq[0], 0, 16);
	sgl_over(&sq[0].local, scratch[0], 16);
	sq_posted = 1;
	ck_assert_int_eq(call(&sq[0]), RESP_LOCAL_FAULT);
	/* nor inline data longer than the WQE's slot holds */
	inline_send(0, scratch[0], 'E');
	sq[0].local.seg[0].len = sq[0].local.total = sq[0].w.inline_len =
		req_qp.sq.stride - IBVD_SEND_WQE_HDR + 1;
	ck_assert_int_eq(call(&sq[0]), RESP_LOCAL_FAULT);
	ck_assert_uint_eq(nsent, 4);
}
END_TEST

/*
 * The requester's MR deregistered while its WQE is in flight: READ
 * responses and an atomic's answer are not written, a WRITE is not read
 * again for a retransmission; each completes LOC_PROT_ERR.
 */
START_TEST(local_mr_gone_in_flight)
{
	struct eng_req er;
	unsigned int from;

	read_req(&er);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	from = nsent;
	deliver(0);			/* the responses come back */
	ck_assert_uint_eq(nsent, from + 4);
	local_gone = true;
	deliver(from);
	ck_assert_int_eq(call(&er), RESP_LOCAL_FAULT);
	ck_assert_uint_gt(local_checks, 0);
	ck_assert_uint_eq(local_mem[0], 0);
	roce_rc_forget(&req_qp);

	local_gone = false;
	write_req(&er, 0);
	ck_assert_int_eq(call(&er), RESP_PENDING);	/* lost on the way */
	local_gone = true;
	req_qp.attr.timeout = 1;
	usleep(1000);
	from = nsent;
	ck_assert_int_eq(call(&er), RESP_LOCAL_FAULT);
	ck_assert_uint_eq(nsent, from);		/* nothing read, nothing sent */
}
END_TEST

/* Sent packet i to the requester, its payload cut to len bytes. */
static void deliver_cut(unsigned int i, uint32_t len)
{
	struct roce_ip ip;
	struct roce_pkt p;

	decode(i, &ip, &p);
	ck_assert_uint_le(len, p.payload_len);
	p.payload_len = len;
	roce_rx_self = &rd;
	roce_rc_rx(&rd, wired(&req_qp), &ip, &p);
	roce_rx_self = NULL;
}

/*
 * READ responses framed otherwise than a responder frames them (a short
 * FIRST or MIDDLE, a LAST too short) are dropped: the READ asks again
 * and completes with every byte, rather than wedge on bytes out of step
 * with their PSNs.
 */
START_TEST(read_response_of_the_wrong_length_dropped)
{
	struct eng_req er;
	unsigned int from;

	read_req(&er);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	deliver(0);			/* responses 1..4 */
	deliver_cut(1, 512);		/* a short FIRST */
	deliver(2);			/* past the gap: asks again */
	from = nsent;
	ck_assert_int_eq(call(&er), RESP_PENDING);
	ck_assert_uint_eq(nsent, from + 1);
	expect_read_request(from, 0xFFFFFE, REMOTE_VA, READ_LEN);
	deliver(from);
	ck_assert_uint_eq(nsent, from + 5);
	deliver(from + 1);
	deliver(from + 2);
	deliver(from + 3);
	deliver_cut(from + 4, READ_LEN % 1024 - 1);	/* a short LAST */
	ck_assert_int_eq(call(&er), RESP_PENDING);
	deliver(from + 4);
	ck_assert_int_eq(call(&er), RESP_OK);
	ck_assert_mem_eq(local_mem, remote_mem, READ_LEN);
}
END_TEST

/* The responder's PSN sequence NAK of psn, to the requester that sent ip. */
static void nak_at(uint32_t psn, const struct roce_ip *ip)
{
	struct roce_ip rip = *ip;
	struct roce_pkt nak;

	memcpy(rip.src, ip->dst, 16);
	memcpy(rip.dst, ip->src, 16);
	roce_pkt_init(&nak, ROCE_RC_ACKNOWLEDGE);
	nak.dest_qp = 0x11;
	nak.psn = psn;
	nak.aeth.syndrome = ROCE_AETH_NAK_PSN;
	roce_rc_rx(&rd, wired(&req_qp), &rip, &nak);
}

/*
 * PSN NAKs that move nothing on: one go-back-N until an answer moves the
 * window; the others are ignored, and the timeout spends retries (before,
 * each resent the whole window: a peer could keep a QP busy for ever, and
 * have a window's packets sent for each small NAK).
 */
START_TEST(psn_naks_go_back_once_per_progress)
{
	struct eng_req er;
	struct roce_ip ip;
	struct roce_pkt p;
	unsigned int i, from;

	write_req(&er, 0);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	ck_assert_uint_eq(nsent, 3);
	decode(0, &ip, &p);
	for (i = 0; i < 5; i++) {
		nak_at(0xFFFFFE, &ip);
		from = nsent;
		ck_assert_int_eq(call(&er), RESP_PENDING);
		ck_assert_uint_eq(nsent, from + (i ? 0 : 3));
	}
	/* nothing moves: the timeout goes again, and spends a retry */
	req_qp.attr.timeout = 1;
	usleep(1000);
	from = nsent;
	ck_assert_int_eq(call(&er), RESP_NO_ACK);
	ck_assert_uint_eq(nsent, from + 3);
	ck_assert_uint_eq(counters[IBVD_PC_COMPLETER_RETRY_ERR], 1);
	req_qp.attr.timeout = 20;
	/* the resent packets answered: done */
	from = nsent;
	deliver(from - 3);
	deliver(from - 2);
	deliver(from - 1);
	deliver(nsent - 1);
	ck_assert_int_eq(call(&er), RESP_OK);
}
END_TEST

/*
 * What goes again, on a NAK or a timeout, is charged to the sender's
 * turn and tenant (ibvd_eng_charge_copies) as what went first was: from
 * the NAK's PSN on, and nothing for what went once.
 */
START_TEST(resent_bytes_are_charged)
{
	struct eng_req er;
	struct roce_ip ip;
	struct roce_pkt p;

	write_req(&er, 0);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	ck_assert_uint_eq(nsent, 3);
	ck_assert_uint_eq(charged, 0);
	decode(1, &ip, &p);
	/* the first packet came: its 1024 bytes do not go again */
	nak_at(p.psn, &ip);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	ck_assert_uint_eq(nsent, 5);
	ck_assert_uint_eq(charged, WRITE_LEN - 1024);
	/* the timeout sends the rest again, and pays for it again */
	req_qp.attr.timeout = 1;
	usleep(1000);
	ck_assert_int_eq(call(&er), RESP_NO_ACK);
	ck_assert_uint_eq(nsent, 7);
	ck_assert_uint_eq(charged, 2 * (WRITE_LEN - 1024));
}
END_TEST

/*
 * Probes here run at timeout 16 (268 ms): a sixteenth of it, 16.8 ms, is
 * the quiet a probe waits for, long enough that a test's own steps are
 * not taken for one (and where they might be, on a stalled host, the
 * check is left out rather than made to fail).
 */
#define PROBE_TIMEOUT	16
#define PROBE_DELAY	(ibvd_eng_timeout_ns(PROBE_TIMEOUT) / 16)

static void wait_for_probe(void)
{
	usleep(PROBE_DELAY / 1000 + 1000);
}

/*
 * A WRITE of 3 packets sent at timeout PROBE_TIMEOUT, between *t0 and
 * *t1: when it went, as far as a test can tell.
 */
static void write_timed(struct eng_req *er, uint64_t *t0, uint64_t *t1)
{
	req_qp.attr.timeout = PROBE_TIMEOUT;
	write_req(er, 0);
	*t0 = roce_now_ns();
	ck_assert_int_eq(call(er), RESP_PENDING);
	*t1 = roce_now_ns();
	ck_assert_uint_eq(nsent, 3);
}

/*
 * The last packet of the window lost: nothing behind it makes the
 * responder NAK.  Once the window has been quiet a sixteenth of the ACK
 * timeout, that packet goes again, once, paid for, spending no retry and
 * leaving the front's timeout where it was; the responder takes it, and
 * its ACK completes the WRITE long before the timeout.
 */
START_TEST(lost_tail_probed_before_the_timeout)
{
	uint64_t timeout = ibvd_eng_timeout_ns(PROBE_TIMEOUT), t0, t1;
	unsigned int first_two[] = { 0, 1 };
	struct eng_req er;

	write_timed(&er, &t0, &t1);
	/* asked again by the probe's time, long before the timeout */
	ck_assert_uint_ge(asked_by, t0 + PROBE_DELAY);
	ck_assert_uint_le(asked_by, t1 + PROBE_DELAY);
	deliver_batch(first_two, 2);
	ck_assert_uint_eq(nsent, 3);	/* no ACK asked for yet */
	asked_by = 0;
	ck_assert_int_eq(call(&er), RESP_PENDING);
	if (roce_now_ns() < t0 + PROBE_DELAY)
		ck_assert_uint_eq(nsent, 3);	/* not quiet long enough */

	wait_for_probe();
	asked_by = 0;
	ck_assert_int_eq(call(&er), RESP_PENDING);
	ck_assert_uint_eq(nsent, 4);
	expect_pkt(3, ROCE_RC_RDMA_WRITE_LAST, 0);
	ck_assert_uint_eq(charged, WRITE_LEN - 2048);
	ck_assert_uint_eq(counters[IBVD_PC_COMPLETER_RETRY_ERR], 1);
	/* once per quiet; the timeout runs from when the WRITE went, not
	 * from the probe */
	asked_by = 0;
	ck_assert_int_eq(call(&er), RESP_PENDING);
	ck_assert_uint_eq(nsent, 4);
	ck_assert_uint_ge(asked_by, t0 + timeout);
	ck_assert_uint_le(asked_by, t1 + timeout);

	deliver(3);
	ck_assert_uint_eq(nsent, 5);
	expect_pkt(4, ROCE_RC_ACKNOWLEDGE, 0);
	deliver(4);
	ck_assert_int_eq(call(&er), RESP_OK);
	ck_assert_mem_eq(remote_mem, local_mem, WRITE_LEN);
	ck_assert_uint_eq(counters[IBVD_PC_DUPLICATE_REQUEST], 0);
}
END_TEST

/*
 * The WRITE came whole and its ACK was lost: the probe is a duplicate,
 * which the responder ACKs again without writing anything.
 */
START_TEST(lost_ack_probed_before_the_timeout)
{
	struct eng_req er;

	req_qp.attr.timeout = PROBE_TIMEOUT;
	write_req(&er, 0);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	deliver(0);
	deliver(1);
	deliver(2);
	ck_assert_uint_eq(nsent, 4);	/* the ACK, lost */
	expect_pkt(3, ROCE_RC_ACKNOWLEDGE, 0);
	memset(remote_mem, 0, sizeof(remote_mem));
	wait_for_probe();
	ck_assert_int_eq(call(&er), RESP_PENDING);
	ck_assert_uint_eq(nsent, 5);
	expect_pkt(4, ROCE_RC_RDMA_WRITE_LAST, 0);
	deliver(4);
	ck_assert_uint_eq(nsent, 6);
	expect_pkt(5, ROCE_RC_ACKNOWLEDGE, 0);
	ck_assert_uint_eq(counters[IBVD_PC_DUPLICATE_REQUEST], 1);
	/* a duplicate is not executed again: its bytes stay unwritten */
	ck_assert_uint_eq(remote_mem[2048], 0);
	ck_assert_uint_eq(remote_mem[WRITE_LEN - 1], 0);
	deliver(5);
	ck_assert_int_eq(call(&er), RESP_OK);
}
END_TEST

/*
 * A probe that cannot read its bytes (the MR went) sends nothing and
 * leaves the timeout where it was: the timeout then reports the fault
 * (before, each such probe put the timeout a whole timeout further).
 */
START_TEST(probe_without_its_memory_keeps_the_timeout)
{
	uint64_t timeout = ibvd_eng_timeout_ns(PROBE_TIMEOUT), t0, t1;
	struct eng_req er;

	write_timed(&er, &t0, &t1);
	local_gone = true;
	wait_for_probe();
	asked_by = 0;
	ck_assert_int_eq(call(&er), RESP_PENDING);
	ck_assert_uint_eq(nsent, 3);
	ck_assert_uint_eq(charged, 0);
	ck_assert_uint_ge(asked_by, t0 + timeout);
	ck_assert_uint_le(asked_by, t1 + timeout);
	/* once per quiet, tried or not: only the timeout is waited for */
	asked_by = 0;
	ck_assert_int_eq(call(&er), RESP_PENDING);
	ck_assert_uint_ge(asked_by, t0 + timeout);
	ck_assert_uint_le(asked_by, t1 + timeout);
	req_qp.attr.timeout = 1;
	usleep(1000);
	ck_assert_int_eq(call(&er), RESP_LOCAL_FAULT);
	ck_assert_uint_eq(nsent, 3);
}
END_TEST

/*
 * A READ that asked again past a gap in its responses waits for the
 * timeout, as rc_resp.c's read_gap says: the old responses still coming
 * past the gap move nothing on, and a probe would ask for the rest a
 * third time.
 */
START_TEST(read_past_a_gap_not_probed)
{
	struct eng_req er;
	unsigned int first;

	req_qp.attr.timeout = PROBE_TIMEOUT;
	read_req(&er);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	deliver(0);
	ck_assert_uint_eq(nsent, 5);
	deliver(1);
	deliver(3);			/* the hole: ask again */
	first = nsent;
	ck_assert_int_eq(call(&er), RESP_PENDING);
	ck_assert_uint_eq(nsent, first + 1);
	deliver(4);			/* an old one past the hole */
	wait_for_probe();
	ck_assert_int_eq(call(&er), RESP_PENDING);
	ck_assert_uint_eq(nsent, first + 1);
	ck_assert_uint_eq(counters[IBVD_PC_COMPLETER_RETRY_ERR], 1);
}
END_TEST

/*
 * What a timeout sent again may lose its last packet too: the engine is
 * asked back for a probe of it, not a whole timeout later.  The probe's
 * quiet is short here (1.05 ms): a call that took that long (a stalled
 * host) may have probed already, and then the check is left out.
 */
START_TEST(timeout_resend_watched_for_a_probe)
{
	uint64_t delay = ibvd_eng_timeout_ns(12) / 16, t0, t1;
	struct eng_req er;

	req_qp.attr.timeout = 12;	/* 16.8 ms; probes after 1.05 ms */
	write_req(&er, 0);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	usleep(ibvd_eng_timeout_ns(12) / 1000 + 1000);
	asked_by = 0;
	t0 = roce_now_ns();
	ck_assert_int_eq(call(&er), RESP_NO_ACK);
	t1 = roce_now_ns();
	if (t1 - t0 >= delay)
		return;
	ck_assert_uint_eq(nsent, 6);
	ck_assert_uint_ge(asked_by, t0 + delay);
	ck_assert_uint_le(asked_by, t1 + delay);
}
END_TEST

/*
 * An ACK past a READ whose responses were lost: the READ asks again at
 * once, and once it has its bytes the WRITE behind it is done by that
 * same ACK, without a timeout or a second ACK.
 */
START_TEST(ack_past_a_read_asks_again_at_once)
{
	unsigned int from;

	read_req(&sq[0]);
	write_req(&sq[1], 4096);
	sq_posted = 2;
	req_qp.sq_head = 0;
	ck_assert_int_eq(call(&sq[0]), RESP_PENDING);
	ck_assert_uint_eq(nsent, 4);	/* the READ request, the WRITE's 3 */
	deliver(0);			/* 4 responses, all lost */
	deliver(1);
	deliver(2);
	deliver(3);			/* the WRITE's ACK */
	ck_assert_uint_eq(nsent, 9);
	expect_pkt(8, ROCE_RC_ACKNOWLEDGE, 4);
	deliver(8);
	from = nsent;
	ck_assert_int_eq(call(&sq[0]), RESP_PENDING);
	ck_assert_uint_eq(nsent, from + 1);
	expect_read_request(from, 0xFFFFFE, REMOTE_VA, READ_LEN);
	deliver(from);			/* answered again from its resource */
	exchange(from + 1);
	ck_assert_int_eq(call(&sq[0]), RESP_OK);
	ck_assert_mem_eq(local_mem, remote_mem, READ_LEN);
	req_qp.sq_head = 1;
	from = nsent;
	ck_assert_int_eq(call(&sq[1]), RESP_OK);
	ck_assert_uint_eq(nsent, from);
}
END_TEST

/*
 * What one call of the engine puts in flight goes to the kernel in one
 * system call, in PSN order: the front's packets and those of the WQEs
 * sent ahead behind it, READ requests among them.
 */
START_TEST(a_turn_goes_in_one_call)
{
	read_req(&sq[0]);
	write_req(&sq[1], 4096);
	send_req(&sq[2], 0, 8);
	send_req(&sq[3], 8, 8);
	sq_posted = 4;
	req_qp.sq_head = 0;
	ck_assert_int_eq(call(&sq[0]), RESP_PENDING);
	ck_assert_uint_eq(nsent, 6);
	ck_assert_uint_eq(send_calls, 1);
	expect_read_request(0, 0xFFFFFE, REMOTE_VA, READ_LEN);
	expect_pkt(1, ROCE_RC_RDMA_WRITE_FIRST, 2);	/* the READ took 4 PSNs */
	expect_pkt(3, ROCE_RC_RDMA_WRITE_LAST, 4);
	expect_pkt(4, ROCE_RC_SEND_ONLY, 5);
	expect_pkt(5, ROCE_RC_SEND_ONLY, 6);
}
END_TEST

/*
 * Eight short SENDs, one packet each, PSNs in a row: one run, one call;
 * the responder takes them all.  (A turn of a few
 * packets, as a_turn_goes_in_one_call's, makes none: one sendmmsg.)
 */
START_TEST(short_messages_make_one_run)
{
	unsigned int i;

	rq_posted[1] = 8;
	post_sends(8, 8);
	ck_assert_int_eq(call(&sq[0]), RESP_PENDING);
	ck_assert_uint_eq(nsent, 8);
	ck_assert_uint_eq(send_calls, 1);
	ck_assert_uint_eq(runs, 1);
	ck_assert_uint_eq(run_pkts, 8);
	for (i = 0; i < 8; i++)
		expect_pkt(i, ROCE_RC_SEND_ONLY, roce_psn_add(0xFFFFFE, i));
	exchange(0);				/* one by one, as cut */
	ck_assert_uint_eq(nrecvs_done, 8);
	ck_assert_uint_eq(nsent, 16);		/* an ACK each */
	expect_pkt(15, ROCE_RC_ACKNOWLEDGE, roce_psn_add(0xFFFFFE, 7));
}
END_TEST

/*
 * A requester keeps no more in flight than its send queue holds, and
 * what the daemon keeps for it (charged to its context) is sized so:
 * a queue of 4 sends 4 of 8 posted SENDs at first.
 */
START_TEST(in_flight_bounded_by_the_send_queue)
{
	struct ibvd_qp wide = req_qp;
	size_t small, large;
	unsigned int i;

	req_qp.sq.nslots = 4;
	ck_assert_int_eq(roce_rc_prepare(&req_qp, &small), 0);
	roce_rc_av_changed(&req_qp);
	wide.wire = NULL;
	ck_assert_int_eq(roce_rc_prepare(&wide, &large), 0);
	roce_rc_forget(&wide);
	/* 64 slots, each with room for the QP's max_send_sge segments */
	ck_assert_uint_eq(large - small, 60 * (sizeof(struct roce_txm) +
					       ENG_MAX_SGE *
					       sizeof(struct eng_seg)));
	rq_posted[1] = 8;
	post_sends(8, 8);
	ck_assert_int_eq(call(&sq[0]), RESP_PENDING);
	ck_assert_uint_eq(nsent, 4);
	for (i = 0; i < 4; i++)
		expect_pkt(i, ROCE_RC_SEND_ONLY, roce_psn_add(0xFFFFFE, i));
}
END_TEST

/* A READ request between SENDs (its responses take PSNs) ends a run. */
START_TEST(a_read_request_ends_a_run)
{
	unsigned int i;

	for (i = 0; i < 4; i++)
		send_req(&sq[i], 8 * i, 8);
	read_req(&sq[4]);
	for (i = 5; i < 9; i++)
		send_req(&sq[i], 8 * i, 8);
	sq_posted = 9;
	req_qp.sq_head = 0;
	ck_assert_int_eq(call(&sq[0]), RESP_PENDING);
	ck_assert_uint_eq(nsent, 9);
	ck_assert_uint_eq(send_calls, 3);	/* run, the READ, run */
	ck_assert_uint_eq(runs, 2);
	ck_assert_uint_eq(run_pkts, 8);
	expect_read_request(4, 2, REMOTE_VA, READ_LEN);
	expect_pkt(5, ROCE_RC_SEND_ONLY, 6);	/* the READ took 4 PSNs */
}
END_TEST

/*
 * A packet from the QP's peer to another address of this host than the
 * QP's own is not the QP's (rxe's check_addr): dropped.
 */
START_TEST(packet_to_another_address_dropped)
{
	struct eng_req er;
	struct roce_ip ip;
	struct roce_pkt p;

	write_req(&er, 0);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	decode(0, &ip, &p);
	ip.dst[3] = 9;			/* 10.0.0.9, not the responder's .2 */
	roce_rx_self = &rd;
	roce_rc_rx(&rd, wired(&resp_qp), &ip, &p);
	roce_rx_self = NULL;
	ck_assert_uint_eq(nsent, 3);	/* no ACK, no NAK */
	ck_assert_uint_eq(counters[IBVD_PC_RCVD_PKTS], 0);
	deliver(0);			/* the same packet, to .2 */
	ck_assert_uint_eq(counters[IBVD_PC_RCVD_PKTS], 1);
}
END_TEST

START_TEST(window_go_back_n_from_the_lost_packet)
{
	unsigned int burst[] = { 0, 1, 3, 4, 5 };
	unsigned int again[] = { 7, 8, 9, 10 };
	size_t i;

	/* two WRITEs posted: 3000 B each, to REMOTE_VA and REMOTE_VA + 4096 */
	for (i = 0; i < sizeof(local_mem); i++)
		local_mem[i] = (uint8_t)(i * 13 + 1);
	write_req(&sq[0], 0);
	write_req(&sq[1], 4096);
	sq_posted = 2;
	req_qp.sq_head = 0;

	/* the front goes, and the second behind it: six packets in flight */
	ck_assert_int_eq(call(&sq[0]), RESP_PENDING);
	ck_assert_uint_eq(nsent, 6);
	expect_pkt(0, ROCE_RC_RDMA_WRITE_FIRST, 0xFFFFFE);
	expect_pkt(2, ROCE_RC_RDMA_WRITE_LAST, 0);
	expect_pkt(3, ROCE_RC_RDMA_WRITE_FIRST, 1);
	expect_pkt(5, ROCE_RC_RDMA_WRITE_LAST, 3);

	/* the first's last packet is lost: the responder NAKs the gap once */
	deliver_batch(burst, 5);
	ck_assert_uint_eq(nsent, 7);
	expect_pkt(6, ROCE_RC_ACKNOWLEDGE, 0);
	ck_assert_uint_eq(counters[IBVD_PC_OUT_OF_SEQ_REQUEST], 1);
	/* what came in order landed, in one run, before the NAK went */
	ck_assert_uint_eq(writevs, 1);
	ck_assert_mem_eq(remote_mem, local_mem, 2048);

	deliver(6);
	ck_assert_uint_eq(counters[IBVD_PC_RCVD_SEQ_ERR], 1);
	ck_assert_uint_eq(answered, 1);

	/* everything from PSN 0 goes again at once, spending no retry */
	ck_assert_int_eq(call(&sq[0]), RESP_PENDING);
	ck_assert_uint_eq(nsent, 11);
	ck_assert_uint_eq(counters[IBVD_PC_COMPLETER_RETRY_ERR], 0);
	expect_pkt(7, ROCE_RC_RDMA_WRITE_LAST, 0);
	expect_pkt(8, ROCE_RC_RDMA_WRITE_FIRST, 1);
	expect_pkt(9, ROCE_RC_RDMA_WRITE_MIDDLE, 2);
	expect_pkt(10, ROCE_RC_RDMA_WRITE_LAST, 3);

	/* both messages' ends asked for an ACK, in one batch: one ACK, of
	 * the second's PSN, says both are done (MSN 2) */
	deliver_batch(again, 4);
	ck_assert_uint_eq(nsent, 12);
	expect_pkt(11, ROCE_RC_ACKNOWLEDGE, 3);
	expect_aeth(11, ROCE_AETH_ACK, 2);
	deliver(11);

	/* both done, in order: the front first, then the one behind it */
	ck_assert_int_eq(call(&sq[0]), RESP_OK);
	req_qp.sq_head = 1;
	ck_assert_int_eq(call(&sq[1]), RESP_OK);
	ck_assert_uint_eq(nsent, 12);
	ck_assert_mem_eq(remote_mem, local_mem, WRITE_LEN);
	ck_assert_mem_eq(remote_mem + 4096, local_mem + 4096, WRITE_LEN);
	/* the bytes between them untouched */
	ck_assert_uint_eq(remote_mem[WRITE_LEN], (uint8_t)(WRITE_LEN * 7 + 3));
	ck_assert_uint_eq(counters[IBVD_PC_DUPLICATE_REQUEST], 0);
}
END_TEST

static struct eng_req ping, pong;

/*
 * A's SEND (ping) goes; B takes it, its receive completes at once, and it
 * ACKs; B replies at once (pong); A's draining thread has the ACK, then
 * the reply, whose completion is held for the engine.
 */
static void ping_answered_then_pong(void)
{
	uint8_t rnr = 0;

	rq_posted[0] = rq_posted[1] = 1;
	send_req(&ping, 0, 16);
	send_req(&pong, 64, 16);
	ck_assert_int_eq(call(&ping), RESP_PENDING);
	ck_assert_uint_eq(nsent, 1);
	expect_pkt(0, ROCE_RC_SEND_ONLY, 0xFFFFFE);
	deliver(0);
	ck_assert_uint_eq(nrecvs_done, 1);
	ck_assert_ptr_eq(recvs_done[0].qp, &resp_qp);
	ck_assert_uint_eq(nsent, 2);
	expect_pkt(1, ROCE_RC_ACKNOWLEDGE, 0xFFFFFE);

	ck_assert_int_eq(roce_rc_send(NULL, wired(&resp_qp), &pong, &rnr), RESP_PENDING);
	ck_assert_uint_eq(nsent, 3);
	expect_pkt(2, ROCE_RC_SEND_ONLY, 0x100);
	deliver(1);
	ck_assert_uint_eq(answered, 1);
	deliver(2);
	/* the reply landed and was ACKed, its completion waits for the SEND's */
	ck_assert_uint_eq(nsent, 4);
	expect_pkt(3, ROCE_RC_ACKNOWLEDGE, 0x100);
	ck_assert_mem_eq(local_mem + 4096, local_mem + 64, 16);
	ck_assert_uint_eq(nrecvs_done, 1);
	ck_assert_uint_eq(turns_asked, 1);
}

START_TEST(reply_completes_after_the_send_it_answers)
{
	ping_answered_then_pong();
	/* A's engine takes the answer; the reply still waits for its CQE ... */
	ck_assert_int_eq(call(&ping), RESP_OK);
	ck_assert_uint_eq(nrecvs_done, 1);
	/* ... written when the turn ends, after the SEND's completion */
	roce_rc_turn_done(&req_qp);
	ck_assert_uint_eq(nrecvs_done, 2);
	ck_assert_ptr_eq(recvs_done[1].qp, &req_qp);
	ck_assert_uint_eq(recvs_done[1].wr_id, 100);
	roce_rc_turn_done(&req_qp);
	ck_assert_uint_eq(nrecvs_done, 2);
}
END_TEST

START_TEST(held_receives_complete_before_the_flush)
{
	ping_answered_then_pong();
	/* A went to ERR before its engine took the answer: the turn that
	 * finds it so writes what was held (then the engine flushes) */
	req_qp.state = IBV_QPS_ERR;
	roce_rc_turn_done(&req_qp);
	ck_assert_uint_eq(nrecvs_done, 2);
	ck_assert_uint_eq(recvs_done[1].wr_id, 100);
}
END_TEST

/* An XRC initiator (req_qp) and target (resp_qp). */
static void xrc_pair(void)
{
	req_qp.qp_type = IBV_QPT_XRC_SEND;
	resp_qp.qp_type = IBV_QPT_XRC_RECV;
	rq_posted[0] = rq_posted[1] = 1;
}

/*
 * XRC: each request carries the XRCETH of the WQE's SRQ number, in XRC's
 * opcodes (0xA0 up); the target takes it into that SRQ and answers with
 * XRC's ACK, which has no XRCETH.
 */
START_TEST(xrc_into_the_named_srq)
{
	struct roce_ip ip;
	struct roce_pkt p;
	struct eng_req er;

	xrc_pair();
	for (unsigned int i = 0; i < 2000; i++)
		local_mem[i] = (uint8_t)(i * 5 + 1);
	send_req(&er, 0, 2000);
	er.w.xrc_srqn = GOOD_SRQN;
	ck_assert_int_eq(call(&er), RESP_PENDING);
	ck_assert_uint_eq(nsent, 2);
	expect_pkt(0, ROCE_OP_XRC | ROCE_RC_SEND_FIRST, 0xFFFFFE);
	expect_pkt(1, ROCE_OP_XRC | ROCE_RC_SEND_LAST, 0xFFFFFF);
	decode(1, &ip, &p);
	ck_assert(p.hdrs & ROCE_HDR_XRCETH);
	ck_assert_uint_eq(p.xrc_srqn, GOOD_SRQN);
	deliver(0);
	deliver(1);
	ck_assert_uint_eq(xrc_taken, 2);
	ck_assert_uint_eq(nrecvs_done, 1);
	ck_assert_ptr_eq(recvs_done[0].qp, &resp_qp);
	ck_assert_mem_eq(local_mem + 4096, local_mem, 2000);
	ck_assert_uint_eq(nsent, 3);
	expect_pkt(2, ROCE_OP_XRC | ROCE_RC_ACKNOWLEDGE, 0xFFFFFF);
	decode(2, &ip, &p);
	ck_assert(!(p.hdrs & ROCE_HDR_XRCETH));
	deliver(2);
	ck_assert_int_eq(call(&er), RESP_OK);
}
END_TEST

/*
 * An SRQ the target's domain does not hold: NAK invalid request, the
 * target in error, the initiator's SEND failed as a remote invalid
 * request; nothing received.
 */
START_TEST(xrc_srq_of_another_domain)
{
	struct roce_ip ip;
	struct roce_pkt p;
	struct eng_req er;

	xrc_pair();
	responder_error_expected = IBV_EVENT_QP_REQ_ERR;
	send_req(&er, 0, 16);
	er.w.xrc_srqn = 0x123456;	/* no SRQ of the domain */
	ck_assert_int_eq(call(&er), RESP_PENDING);
	expect_pkt(0, ROCE_OP_XRC | ROCE_RC_SEND_ONLY, 0xFFFFFE);
	deliver(0);
	ck_assert_uint_eq(nrecvs_done, 0);
	ck_assert_uint_eq(responder_errors, 1);
	ck_assert_uint_eq(nsent, 2);
	expect_pkt(1, ROCE_OP_XRC | ROCE_RC_ACKNOWLEDGE, 0xFFFFFE);
	decode(1, &ip, &p);
	ck_assert_uint_eq(p.aeth.syndrome, ROCE_AETH_NAK_INV);
	deliver(1);
	ck_assert_int_eq(call(&er), RESP_INV_REQ);
}
END_TEST

/*
 * XRC: a READ's duplicate, after a SEND into an SRQ of another PD, is
 * replayed in the PD of its own SRQ (its XRCETH's), not the last one's.
 */
START_TEST(xrc_duplicate_read_in_its_own_pd)
{
	unsigned int responses[] = { 1, 2, 3, 4 };
	struct eng_req rd_req, snd;

	xrc_pair();
	read_req(&rd_req);
	rd_req.w.xrc_srqn = GOOD_SRQN;
	ck_assert_int_eq(call(&rd_req), RESP_PENDING);
	expect_pkt(0, ROCE_OP_XRC | ROCE_RC_RDMA_READ_REQUEST, 0xFFFFFE);
	deliver(0);
	ck_assert_uint_eq(nsent, 5);
	expect_pkt(1, ROCE_OP_XRC | ROCE_RC_READ_RESPONSE_FIRST, 0xFFFFFE);
	deliver_batch(responses, 4);
	ck_assert_int_eq(call(&rd_req), RESP_OK);
	ck_assert_mem_eq(local_mem, remote_mem, READ_LEN);

	send_req(&snd, 0, 16);
	snd.w.xrc_srqn = OTHER_SRQN;
	ck_assert_int_eq(call(&snd), RESP_PENDING);
	deliver(5);
	ck_assert_ptr_eq(resp_qp.pd, PD_B);
	deliver(6);
	ck_assert_int_eq(call(&snd), RESP_OK);

	/* the READ request again: four responses again */
	deliver(0);
	ck_assert_uint_eq(counters[IBVD_PC_DUPLICATE_REQUEST], 1);
	ck_assert_uint_eq(nsent, 11);
	expect_pkt(7, ROCE_OP_XRC | ROCE_RC_READ_RESPONSE_FIRST, 0xFFFFFE);
	expect_pkt(10, ROCE_OP_XRC | ROCE_RC_READ_RESPONSE_LAST, 0x1);
}
END_TEST

/* The last packet sent is an RC ACK or NAK: its syndrome. */
static uint8_t last_syndrome(void)
{
	struct roce_ip ip;
	struct roce_pkt p;

	decode(nsent - 1, &ip, &p);
	ck_assert_uint_eq(p.opcode, ROCE_RC_ACKNOWLEDGE);
	return p.aeth.syndrome;
}

/* ---- duplicate READs: which answer is replayed ------------------------- */

/* Hand the responder packet p again, as the wire would. */
static void rx_again(const struct roce_pkt *p)
{
	struct roce_ip ip;
	struct roce_pkt q;

	decode(0, &ip, &q);			/* the request's addresses */
	roce_rx_self = &rd;
	rd.read_budget = ROCE_READ_DRAIN_BYTES;
	roce_rc_rx(&rd, wired(&resp_qp), &ip, p);
	roce_rx_self = NULL;
}

/*
 * A READ at a PSN an older READ had, 2^24 PSNs before (its resource not
 * yet retired here): its duplicate replays the newer READ's bytes; one
 * that does not lie within the READ answered (another rkey, past its
 * end) is dropped, as rxe drops it.
 */
START_TEST(duplicate_read_answers_the_newest)
{
	struct roce_ip ip;
	struct roce_pkt again, p;
	struct eng_req er;
	unsigned int first;

	read_req(&er);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	deliver(0);				/* READ 1 from REMOTE_VA */
	ck_assert_uint_eq(nsent, 5);
	((struct roce_qp *)resp_qp.wire)->rx.epsn = 0xFFFFFE;	/* 2^24 PSNs on */
	decode(0, &ip, &again);
	again.reth.va = REMOTE_VA + 100;	/* READ 2, same PSN, elsewhere */
	rx_again(&again);
	ck_assert_uint_eq(nsent, 9);
	decode(5, &ip, &p);
	ck_assert_mem_eq(p.payload, remote_mem + 100, 64);

	first = nsent;
	rx_again(&again);			/* READ 2's duplicate */
	ck_assert_uint_eq(nsent, first + 4);
	decode(first, &ip, &p);
	ck_assert_mem_eq(p.payload, remote_mem + 100, 64);

	again.reth.rkey = REMOTE_RKEY + 1;
	rx_again(&again);
	again.reth.rkey = REMOTE_RKEY;
	again.reth.len = READ_LEN + 1;
	rx_again(&again);
	ck_assert_uint_eq(nsent, first + 4);
	ck_assert_uint_eq(counters[IBVD_PC_DUPLICATE_REQUEST], 3);
}
END_TEST

/*
 * A READ asked again pays for the bytes that go again, whatever length
 * its request names: one of length 0 is no cheaper than the READ (else a
 * 60-byte packet could have 8 MiB sent again and again, unpaid).
 */
START_TEST(replayed_read_pays_for_what_goes_again)
{
	struct roce_ip ip;
	struct roce_pkt again;
	struct eng_req er;
	struct roce_qp *w;
	unsigned int first;

	read_req(&er);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	deliver(0);				/* answered: 4 responses */
	ck_assert_uint_eq(nsent, 5);
	w = resp_qp.wire;
	decode(0, &ip, &again);
	again.reth.len = 0;
	/* an empty budget that nothing tops up for the next minute */
	w->rx.replay_bytes = 0;
	w->rx.replay_ns = roce_now_ns() + 60000000000ull;
	first = nsent;
	rx_again(&again);
	ck_assert_uint_eq(nsent, first);
	/* with room, the same request is answered: all 4 responses */
	w->rx.replay_bytes = 1u << 20;
	rx_again(&again);
	ck_assert_uint_eq(nsent, first + 4);
	/* from its third response on: 2 responses */
	again.psn = roce_psn_add(again.psn, 2);
	rx_again(&again);
	ck_assert_uint_eq(nsent, first + 6);
}
END_TEST

/*
 * A packet on a path that may not wait (QP1's MADs, which the control
 * thread sends) goes through the call that never waits for room; others
 * through the one that does.
 */
START_TEST(qp1_path_never_waits)
{
	struct roce_path path = { .family = AF_INET, .hop_limit = 64 };
	static const uint8_t mad[256];
	struct roce_pkt p;

	roce_pkt_init(&p, ROCE_UD_SEND_ONLY);
	p.dest_qp = 1;
	p.deth.qkey = 0x80010000u;
	p.deth.src_qp = 1;
	roce_send_pkt(&rd, &path, &p, mad, sizeof(mad));
	ck_assert_uint_eq(send_calls, 1);
	ck_assert_uint_eq(send_now_calls, 0);
	path.no_wait = true;
	roce_send_pkt(&rd, &path, &p, mad, sizeof(mad));
	ck_assert_uint_eq(send_calls, 1);
	ck_assert_uint_eq(send_now_calls, 1);
	ck_assert_uint_eq(nsent, 2);
}
END_TEST

/*
 * A READ asked again is paid from the drain's budget too: with the QP's
 * own bucket full but the drain's spent, it is dropped (its requester
 * asks again), and what it replays leaves that much less for the drain.
 */
START_TEST(replayed_read_pays_the_drain_budget)
{
	struct roce_ip ip;
	struct roce_pkt again;
	struct eng_req er;
	unsigned int first;

	read_req(&er);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	deliver(0);				/* answered: 4 responses */
	decode(0, &ip, &again);
	first = nsent;
	roce_rx_self = &rd;
	rd.read_budget = READ_LEN - 1;		/* less than it replays */
	roce_rc_rx(&rd, wired(&resp_qp), &ip, &again);
	ck_assert_uint_eq(nsent, first);
	rd.read_budget = READ_LEN + 100;
	roce_rc_rx(&rd, wired(&resp_qp), &ip, &again);
	ck_assert_uint_eq(nsent, first + 4);
	ck_assert_uint_eq(rd.read_budget, 100);
	roce_rx_self = NULL;
}
END_TEST

/*
 * One drain answers ROCE_READ_DRAIN_BYTES of new READs: one asked for
 * past it is dropped unanswered (its PSN still expected), and answered
 * when asked again in a later drain.
 */
START_TEST(read_past_the_drain_budget_waits)
{
	struct roce_qp *w;
	struct roce_ip ip;
	struct roce_pkt p;
	struct eng_req er;
	uint32_t epsn;

	read_req(&er);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	decode(0, &ip, &p);
	roce_rx_self = &rd;
	rd.read_budget = READ_LEN - 1;
	roce_rc_rx(&rd, wired(&resp_qp), &ip, &p);
	roce_rx_self = NULL;
	ck_assert_uint_eq(nsent, 1);		/* no response */
	w = resp_qp.wire;
	epsn = w->rx.epsn;
	ck_assert_uint_eq(epsn, p.psn);
	deliver(0);				/* the next drain */
	ck_assert_uint_eq(nsent, 5);
	exchange(1);
	ck_assert_int_eq(call(&er), RESP_OK);
	ck_assert_mem_eq(local_mem, remote_mem, READ_LEN);
}
END_TEST

/*
 * An ACK of a PSN the requester has not sent (a blind guess lands there
 * half the time) completes nothing: the WRITE in flight waits for its
 * real ACK.
 */
START_TEST(ack_of_a_psn_not_sent_dropped)
{
	struct roce_ip ip, rip;
	struct roce_pkt ack;
	struct eng_req er;
	struct roce_qp *w;

	write_req(&er, 0);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	ck_assert_uint_eq(nsent, 3);
	w = req_qp.wire;
	decode(0, &ip, &ack);
	rip = ip;
	memcpy(rip.src, ip.dst, 16);
	memcpy(rip.dst, ip.src, 16);
	roce_pkt_init(&ack, ROCE_RC_ACKNOWLEDGE);
	ack.dest_qp = 0x11;
	ack.psn = roce_psn_add(w->tx.next_psn, 1u << 22);
	ack.aeth.syndrome = ROCE_AETH_ACK;
	roce_rc_rx(&rd, wired(&req_qp), &rip, &ack);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	exchange(0);
	ck_assert_int_eq(call(&er), RESP_OK);
}
END_TEST

/*
 * A READ's resource is retired once the expected PSN is 2^21 past it:
 * its duplicate then gets no answer (the requester, whose window is 512
 * PSNs, never asks that far back).
 */
START_TEST(old_read_resources_retire)
{
	struct roce_ip ip;
	struct roce_pkt rd_again, snd;
	uint8_t payload[16] = { 0 };
	struct eng_req er;
	struct roce_qp *w;
	unsigned int before;

	read_req(&er);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	deliver(0);
	ck_assert_uint_eq(nsent, 5);
	w = resp_qp.wire;
	w->rx.epsn = roce_psn_add(0xFFFFFE, (1u << 21) + 8);
	w->rx.res_aged = 0;			/* its turn comes next */
	rq_posted[1] = 1;
	decode(0, &ip, &snd);			/* the next request in order: */
	snd.opcode = ROCE_RC_SEND_ONLY;		/* a SEND of 16 bytes */
	snd.hdrs = (unsigned int)roce_opcode_hdrs(snd.opcode);
	snd.payload = payload;
	snd.payload_len = sizeof(payload);
	snd.psn = w->rx.epsn;
	rx_again(&snd);
	ck_assert_uint_eq(nrecvs_done, 1);
	before = nsent;
	decode(0, &ip, &rd_again);
	rx_again(&rd_again);
	ck_assert_uint_eq(nsent, before);
	ck_assert_uint_eq(counters[IBVD_PC_DUPLICATE_REQUEST], 1);
}
END_TEST

/*
 * A duplicate SEND packet is ACKed again though it asks for no ACK (a
 * FIRST): its requester may have lost the ACK that covered it (C9-105).
 */
/*
 * ACKs are cumulative: those a batch's requests ask for become one, of
 * the last PSN, when the batch ends; it completes every message.
 */
START_TEST(a_batch_gets_one_ack)
{
	unsigned int pkts[] = { 0, 1, 2 };
	unsigned int i;

	rq_posted[1] = 3;
	fill_local();
	post_sends(3, 16);
	ck_assert_int_eq(call(&sq[0]), RESP_PENDING);
	ck_assert_uint_eq(nsent, 3);
	deliver_batch(pkts, 3);
	ck_assert_uint_eq(nrecvs_done, 3);
	ck_assert_uint_eq(nsent, 4);
	expect_pkt(3, ROCE_RC_ACKNOWLEDGE, 0);
	expect_aeth(3, ROCE_AETH_ACK, 3);
	deliver(3);
	for (i = 0; i < 3; i++) {
		req_qp.sq_head = i;
		ck_assert_int_eq(call(&sq[i]), RESP_OK);
	}
}
END_TEST

/*
 * An RNR NAK read in one batch with a later ACK past the PSN it refused
 * (the responder took that packet again once a receive was posted): the
 * NAK is stale, and the ACK completes the messages.  Taken as an RNR
 * instead, the front waited for nothing, and the window's unacknowledged
 * PSN had moved past it: a timeout then sent nothing again, and spent
 * every retry in a row.
 */
START_TEST(rnr_nak_overtaken_by_an_ack)
{
	unsigned int first[] = { 0 }, again[] = { 0, 1, 2 }, answers[2];
	unsigned int i;

	fill_local();
	post_sends(3, 16);
	ck_assert_int_eq(call(&sq[0]), RESP_PENDING);
	ck_assert_uint_eq(nsent, 3);
	/* the first SEND finds no receive: an RNR NAK */
	deliver_batch(first, 1);
	ck_assert_uint_eq(nsent, 4);
	ck_assert_uint_eq(ROCE_AETH_KIND(last_syndrome()), ROCE_AETH_RNR_NAK);
	answers[0] = 3;
	/* receives posted; the three SENDs come again and are ACKed */
	rq_posted[1] = 3;
	deliver_batch(again, 3);
	ck_assert_uint_eq(nrecvs_done, 3);
	ck_assert_uint_eq(nsent, 5);
	expect_aeth(4, ROCE_AETH_ACK, 3);
	answers[1] = 4;
	/* the requester reads the NAK and the ACK at once */
	deliver_batch(answers, 2);
	for (i = 0; i < 3; i++) {
		req_qp.sq_head = i;
		ck_assert_int_eq(call(&sq[i]), RESP_OK);
	}
	ck_assert_uint_eq(nsent, 5);
}
END_TEST

/* The ACK a batch owes goes before a NAK the same QP sends in it. */
START_TEST(owed_ack_goes_before_a_nak)
{
	unsigned int pkts[] = { 0, 1 };
	struct roce_ip ip;
	struct roce_pkt p;

	rq_posted[1] = 1;			/* the second SEND finds none */
	post_sends(2, 16);
	ck_assert_int_eq(call(&sq[0]), RESP_PENDING);
	deliver_batch(pkts, 2);
	ck_assert_uint_eq(nsent, 4);
	expect_pkt(2, ROCE_RC_ACKNOWLEDGE, 0xFFFFFE);
	expect_aeth(2, ROCE_AETH_ACK, 1);
	decode(3, &ip, &p);
	ck_assert_uint_eq(p.opcode, ROCE_RC_ACKNOWLEDGE);
	ck_assert_uint_eq(p.psn, 0xFFFFFF);
	ck_assert_uint_eq(ROCE_AETH_KIND(p.aeth.syndrome),
			  ROCE_AETH_KIND(ROCE_AETH_RNR_NAK));
	ck_assert_uint_eq(counters[IBVD_PC_SEND_RNR_ERR], 1);
}
END_TEST

/*
 * A 3-packet WRITE whose packets come as pkts in one batch, its run
 * unable to land: one answer, the NAK of its first PSN.
 */
static void write_batch_cannot_land(const unsigned int *pkts)
{
	struct eng_req er;

	responder_error_expected = IBV_EVENT_QP_ACCESS_ERR;
	write_req(&er, 0);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	ck_assert_uint_eq(nsent, 3);
	writev_fails = true;
	deliver_batch(pkts, 3);
	ck_assert_uint_eq(nsent, 4);
	expect_pkt(3, ROCE_RC_ACKNOWLEDGE, 0xFFFFFE);
	ck_assert_uint_eq(last_syndrome(), ROCE_AETH_NAK_ACCESS);
}

/* A WRITE run that cannot land is NAKed, never ACKed. */
START_TEST(write_run_that_cannot_land_is_not_acked)
{
	unsigned int pkts[] = { 0, 1, 2 };

	write_batch_cannot_land(pkts);
}
END_TEST

/*
 * A duplicate of a WRITE's first packet behind the run of that WRITE
 * (it goes on with the run by its opcode): the run lands before the
 * duplicate is answered, cannot, and NAKs; the QP, failed by that, sends
 * no ACK for the duplicate after it.
 */
START_TEST(duplicate_behind_a_run_that_cannot_land)
{
	unsigned int pkts[] = { 0, 1, 0 };

	write_batch_cannot_land(pkts);
	ck_assert_uint_eq(counters[IBVD_PC_DUPLICATE_REQUEST], 1);
}
END_TEST

/*
 * A WRITE's run, taken, and its QP failed (by another thread) before the
 * batch ends: nothing lands, and the ACK it owed does not go.
 */
START_TEST(write_run_after_the_qp_failed)
{
	struct roce_ip ip;
	struct roce_pkt p;
	struct eng_req er;
	unsigned int i;

	write_req(&er, 0);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	roce_rx_self = &rd;
	for (i = 0; i < 3; i++) {
		decode(i, &ip, &p);
		roce_rc_rx(&rd, wired(&resp_qp), &ip, &p);
	}
	ck_assert_uint_eq(writevs, 0);		/* taken, not landed yet */
	resp_qp.state = IBV_QPS_ERR;
	roce_wrun_flush(&rd);
	roce_ack_flush(&rd);
	roce_rx_self = NULL;
	ck_assert_uint_eq(writevs, 0);
	ck_assert_uint_eq(remote_mem[0], 3);	/* as setup left it */
	ck_assert_uint_eq(nsent, 3);		/* no ACK, no NAK */
}
END_TEST

START_TEST(duplicate_send_acked_again)
{
	struct eng_req er;
	struct roce_ip ip;
	struct roce_pkt p;

	rq_posted[1] = 1;
	send_req(&er, 0, 2000);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	deliver(0);
	deliver(1);
	ck_assert_uint_eq(nsent, 3);		/* the ACK of the LAST */
	decode(0, &ip, &p);
	ck_assert(!p.ack_req);
	deliver(0);
	ck_assert_uint_eq(nsent, 4);
	ck_assert_uint_eq(last_syndrome(), ROCE_AETH_ACK);
	decode(3, &ip, &p);
	ck_assert_uint_eq(p.psn, 0xFFFFFF);	/* the last PSN taken */
	ck_assert_uint_eq(counters[IBVD_PC_DUPLICATE_REQUEST], 1);
	/* duplicates in one batch: one ACK for them all */
	{
		static const unsigned int again[] = { 0, 1, 0, 1 };

		deliver_batch(again, 4);
	}
	ck_assert_uint_eq(nsent, 5);
	ck_assert_uint_eq(last_syndrome(), ROCE_AETH_ACK);
	ck_assert_uint_eq(counters[IBVD_PC_DUPLICATE_REQUEST], 5);
}
END_TEST

/*
 * Packets the path MTU does not allow are invalid requests (rxe's
 * check_length): a FIRST shorter than the MTU, an ONLY longer.
 */
static void mtu_violation(uint8_t opcode, uint32_t len)
{
	static uint8_t payload[2048];
	struct eng_req er;
	struct roce_ip ip;
	struct roce_pkt p;

	setup();
	rq_posted[1] = 1;
	responder_error_expected = IBV_EVENT_QP_REQ_ERR;
	send_req(&er, 0, 16);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	decode(0, &ip, &p);
	p.opcode = opcode;
	p.hdrs = (unsigned int)roce_opcode_hdrs(opcode);
	p.payload = payload;
	p.payload_len = len;
	roce_rx_self = &rd;
	roce_rc_rx(&rd, wired(&resp_qp), &ip, &p);
	roce_rx_self = NULL;
	ck_assert_uint_eq(nrecvs_done, 0);
	ck_assert_uint_eq(last_syndrome(), ROCE_AETH_NAK_INV);
	teardown();
}

START_TEST(packet_longer_or_shorter_than_the_mtu)
{
	mtu_violation(ROCE_RC_SEND_FIRST, 1000);
	mtu_violation(ROCE_RC_SEND_ONLY, 1025);
	mtu_violation(ROCE_RC_SEND_ONLY, 2048);
}
END_TEST

/* ---- receives from an SRQ: the WQE a SEND holds ------------------------- */

/* The responder's receives come from an SRQ with `posted` WQEs. */
static void srq_setup(unsigned int posted)
{
	use_srq = true;
	resp_qp.srq = (struct ibvd_srq *)(uintptr_t)0x3000;
	rq_posted[1] = posted;
}

/*
 * The SRQ's first WQE (100) completed with status, none with success,
 * the responder went to ERR, and its NAK said syndrome.
 */
static void expect_recv_failed(enum ibv_wc_status status, uint8_t syndrome)
{
	ck_assert_uint_eq(nrecvs_done, 0);
	ck_assert_uint_eq(nrecv_errs, 1);
	ck_assert_uint_eq(recv_errs[0].wr_id, 100);
	ck_assert_int_eq(recv_errs[0].status, status);
	ck_assert_uint_ge(responder_errors, 1);
	ck_assert_uint_eq(last_syndrome(), syndrome);
}

/*
 * A SEND of 2000 bytes (FIRST and LAST) on its way to a receive WQE in
 * client memory; fail: its runs cannot land.
 */
static void send_to_client_memory(struct eng_req *er, bool fail)
{
	rq_posted[1] = 1;
	recv_via_fd = true;
	writev_fails = fail;
	recv_errs_expected = fail;
	if (fail)
		responder_error_expected = 0;
	fill_local();
	send_req(er, 0, 2000);
	ck_assert_int_eq(call(er), RESP_PENDING);
}

/* A SEND's packets in one batch land in one call, before its completion. */
START_TEST(send_lands_in_one_run)
{
	unsigned int pkts[] = { 0, 1 };
	struct eng_req er;

	send_to_client_memory(&er, false);
	deliver_batch(pkts, 2);
	ck_assert_uint_eq(writevs, 1);
	ck_assert_uint_eq(nrecvs_done, 1);
	ck_assert_mem_eq(local_mem + 4096, local_mem, 2000);
}
END_TEST

/* A run that cannot land at the message's end fails the receive. */
START_TEST(send_run_that_cannot_land)
{
	unsigned int pkts[] = { 0, 1 };
	struct eng_req er;

	send_to_client_memory(&er, true);
	deliver_batch(pkts, 2);
	expect_recv_failed(IBV_WC_LOC_PROT_ERR, ROCE_AETH_NAK_OP);
}
END_TEST

/*
 * A run of the message's first packet fails at the batch's end: the next
 * packet fails the receive, and lands nothing itself.
 */
START_TEST(send_run_failed_before_the_next_packet)
{
	static const uint8_t zero[1024];
	struct eng_req er;

	send_to_client_memory(&er, true);
	deliver(0);
	ck_assert_uint_eq(nrecv_errs, 0);
	writev_fails = false;
	deliver(1);
	expect_recv_failed(IBV_WC_LOC_PROT_ERR, ROCE_AETH_NAK_OP);
	ck_assert_uint_eq(writevs, 0);
	ck_assert_mem_eq(local_mem + 4096 + 1024, zero, sizeof(zero));
}
END_TEST

/* The QP fails between a SEND packet and its run's landing: nothing lands. */
START_TEST(send_run_after_the_qp_failed)
{
	static const uint8_t zero[1024];
	struct roce_ip ip;
	struct roce_pkt p;
	struct eng_req er;

	send_to_client_memory(&er, false);
	roce_rx_self = &rd;
	decode(0, &ip, &p);
	roce_rc_rx(&rd, wired(&resp_qp), &ip, &p);
	resp_qp.state = IBV_QPS_ERR;
	decode(1, &ip, &p);			/* the last: no completion */
	roce_rc_rx(&rd, wired(&resp_qp), &ip, &p);
	roce_wrun_flush(&rd);
	roce_ack_flush(&rd);
	roce_rx_self = NULL;
	ck_assert_uint_eq(writevs, 0);
	ck_assert_uint_eq(nrecvs_done + nrecv_errs, 0);
	ck_assert_uint_eq(nsent, 2);		/* no ACK either */
	ck_assert_mem_eq(local_mem + 4096, zero, sizeof(zero));
}
END_TEST

/*
 * The QP fails while its SEND's last packet is handled (another engine
 * thread): the run does not land and the receive does not complete; the
 * QP's flush completes it.
 */
START_TEST(send_last_packet_as_the_qp_fails)
{
	unsigned int pkts[] = { 0, 1 };
	struct eng_req er;

	send_to_client_memory(&er, false);
	fail_at_peek = 2;			/* the LAST's */
	deliver_batch(pkts, 2);
	ck_assert_uint_eq(writevs, 0);
	ck_assert_uint_eq(nrecvs_done + nrecv_errs, 0);
	ck_assert_uint_eq(nsent, 2);		/* no ACK */
}
END_TEST

/*
 * An ACK owed for a SEND's packet whose run then cannot land is not sent
 * (the next packet's NAK fails the message); one owed for a message
 * before the run still is.
 */
START_TEST(owed_ack_of_a_run_that_cannot_land)
{
	struct roce_ip ip;
	struct roce_pkt p;
	struct eng_req er;

	send_to_client_memory(&er, false);	/* packets 0 and 1 */
	roce_rx_self = &rd;
	decode(0, &ip, &p);
	p.ack_req = true;			/* as every 64th packet asks */
	roce_rc_rx(&rd, wired(&resp_qp), &ip, &p);
	writev_fails = true;
	roce_wrun_flush(&rd);
	roce_ack_flush(&rd);
	roce_rx_self = NULL;
	ck_assert_uint_eq(nsent, 2);		/* no ACK */
}
END_TEST

START_TEST(owed_ack_before_a_run_that_cannot_land)
{
	struct roce_ip ip;
	struct roce_pkt p;
	unsigned int i;

	rq_posted[1] = 2;
	recv_via_fd = true;
	fill_local();
	send_req(&sq[0], 0, 16);		/* packet 0: lands */
	send_req(&sq[1], 16, 2000);		/* packets 1 and 2 */
	sq_posted = 2;
	req_qp.sq_head = 0;
	ck_assert_int_eq(call(&sq[0]), RESP_PENDING);
	ck_assert_uint_eq(nsent, 3);
	roce_rx_self = &rd;
	for (i = 0; i < 2; i++) {
		decode(i, &ip, &p);
		roce_rc_rx(&rd, wired(&resp_qp), &ip, &p);
		writev_fails = true;		/* from the second's run on */
	}
	roce_wrun_flush(&rd);
	roce_ack_flush(&rd);
	roce_rx_self = NULL;
	ck_assert_uint_eq(nrecvs_done, 1);
	ck_assert_uint_eq(nsent, 4);
	expect_pkt(3, ROCE_RC_ACKNOWLEDGE, 0xFFFFFE);
	expect_aeth(3, ROCE_AETH_ACK, 1);
}
END_TEST

/*
 * A SEND that fails (longer than its WQE) after packets in the run: the
 * receive completes in error and the run lands nothing after it.
 */
START_TEST(send_failed_drops_its_run)
{
	unsigned int pkts[] = { 0, 1, 2 };
	struct eng_req er;

	rq_posted[1] = 1;
	recv_via_fd = true;
	recv_errs_expected = true;
	responder_error_expected = IBV_EVENT_QP_REQ_ERR;
	fill_local();
	send_req(&er, 0, 3000);			/* 3 packets, 2048-byte WQE */
	ck_assert_int_eq(call(&er), RESP_PENDING);
	deliver_batch(pkts, 3);
	expect_recv_failed(IBV_WC_LOC_LEN_ERR, ROCE_AETH_NAK_INV);
	ck_assert_uint_eq(writevs, 0);
}
END_TEST

/*
 * Each packet of a SEND into an SRQ WQE resolves its SGE again: once the
 * MR under it is deregistered after the first packet, the last writes
 * nothing, and the WQE completes with LOC_PROT_ERR (NAK remote operational
 * error, the QP in ERR).
 */
START_TEST(srq_send_resolves_each_packet)
{
	struct eng_req er;
	static const uint8_t zero[1024];

	srq_setup(1);
	recv_errs_expected = true;
	responder_error_expected = 0;
	fill_local();
	send_req(&er, 0, 2000);			/* FIRST and LAST at MTU 1024 */
	ck_assert_int_eq(call(&er), RESP_PENDING);
	ck_assert_uint_eq(nsent, 2);
	deliver(0);
	ck_assert_uint_eq(rq_taken[1], 1);
	ck_assert_uint_eq(resolves, 0);		/* the peek resolved it */
	ck_assert_mem_eq(local_mem + 4096, local_mem, 1024);
	mr_gone = true;
	deliver(1);
	ck_assert_uint_eq(resolves, 1);
	ck_assert_mem_eq(local_mem + 4096 + 1024, zero, sizeof(zero));
	expect_recv_failed(IBV_WC_LOC_PROT_ERR, ROCE_AETH_NAK_OP);
}
END_TEST

/*
 * A SEND longer than the SRQ WQE it took: the WQE completes with
 * LOC_LEN_ERR and the sender hears invalid request (as from rxe), with
 * the responder's QP_REQ_ERR event.
 */
START_TEST(srq_send_too_long)
{
	struct eng_req er;

	srq_setup(1);
	recv_errs_expected = true;
	responder_error_expected = IBV_EVENT_QP_REQ_ERR;
	send_req(&er, 0, 3000);			/* 3 packets, 2048-byte WQE */
	ck_assert_int_eq(call(&er), RESP_PENDING);
	ck_assert_uint_eq(nsent, 3);
	deliver(0);
	deliver(1);
	ck_assert_uint_eq(nrecv_errs, 0);
	deliver(2);
	expect_recv_failed(IBV_WC_LOC_LEN_ERR, ROCE_AETH_NAK_INV);
}
END_TEST

/*
 * The WQE held between a SEND's packets is the engine's to flush: a
 * RESET (or destroy) mid-message completes it with WR_FLUSH_ERR, and
 * nothing is held afterwards.
 */
START_TEST(srq_wqe_flushed_at_reset)
{
	struct eng_req er;
	struct eng_recv rwqe;

	srq_setup(2);
	recv_errs_expected = true;
	send_req(&er, 0, 2000);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	deliver(0);
	ck_assert_uint_eq(rq_taken[1], 1);
	ck_assert(ibvd_eng_wire_held(&resp_qp, PD_A, &rwqe));
	ck_assert_uint_eq(rwqe.wr_id, 100);
	ibvd_eng_chunk_forget(&resp_qp);	/* what RESET and destroy do */
	ck_assert_uint_eq(nrecv_errs, 1);
	ck_assert_uint_eq(recv_errs[0].wr_id, 100);
	ck_assert_int_eq(recv_errs[0].status, IBV_WC_WR_FLUSH_ERR);
	ck_assert(!ibvd_eng_wire_held(&resp_qp, PD_A, &rwqe));
	ck_assert_uint_eq(rq_taken[1], 1);
}
END_TEST

/*
 * UC: a message that lost its last packet gives the SRQ WQE it took to
 * the next message, which completes in it; the SRQ's next WQE stays.
 */
START_TEST(uc_cut_message_leaves_srq_wqe_to_the_next)
{
	struct eng_req a, b;

	req_qp.qp_type = resp_qp.qp_type = IBV_QPT_UC;
	srq_setup(2);
	fill_local();
	send_req(&a, 0, 2000);			/* packets 0 and 1 */
	call(&a);
	send_req(&b, 2000, 2000);		/* packets 2 and 3 */
	call(&b);
	ck_assert_uint_eq(nsent, 4);
	deliver(0);
	ck_assert_uint_eq(rq_taken[1], 1);
	deliver(2);				/* 1 lost: a PSN gap */
	ck_assert_uint_eq(rq_taken[1], 1);
	deliver(3);
	ck_assert_uint_eq(nrecvs_done, 1);
	ck_assert_uint_eq(recvs_done[0].wr_id, 100);
	ck_assert_uint_eq(rq_taken[1], 1);
	ck_assert_mem_eq(local_mem + 4096, local_mem + 2000, 2000);
}
END_TEST

/*
 * UC: a message far behind the expected PSN (a sender that started again
 * lower) is taken, as rxe takes it, not dropped until the PSN climbs past
 * where it was; a copy of a packet just taken (a link that duplicates) is
 * dropped, so that no message arrives twice.
 */
START_TEST(uc_message_behind_the_psn_taken)
{
	struct eng_req a;

	req_qp.qp_type = resp_qp.qp_type = IBV_QPT_UC;
	srq_setup(2);
	fill_local();
	resp_qp.attr.rq_psn = 100000;		/* far ahead of the sender */
	send_req(&a, 0, 2000);			/* packets 0 and 1 */
	call(&a);
	ck_assert_uint_eq(nsent, 2);
	deliver(0);
	deliver(1);
	ck_assert_uint_eq(nrecvs_done, 1);
	ck_assert_mem_eq(local_mem + 4096, local_mem, 2000);
	deliver(0);				/* copies: dropped */
	deliver(1);
	ck_assert_uint_eq(nrecvs_done, 1);
}
END_TEST

/*
 * A packet that does not continue the message in progress is an invalid
 * request: a SEND_LAST inside a WRITE, a WRITE_MIDDLE inside a SEND, a
 * READ inside either.  Nothing of it is executed.
 */
static void out_of_place(bool in_write, uint8_t opcode)
{
	struct eng_req er;
	struct roce_ip ip;
	struct roce_pkt p;
	uint8_t payload[1024];

	setup();
	rq_posted[1] = 1;
	responder_error_expected = IBV_EVENT_QP_REQ_ERR;
	if (in_write)
		write_req(&er, 0);		/* FIRST, MIDDLE, LAST */
	else
		send_req(&er, 0, 3000);
	ck_assert_int_eq(call(&er), RESP_PENDING);
	deliver(0);
	decode(1, &ip, &p);			/* the MIDDLE, as another packet */
	memset(payload, 0x5A, sizeof(payload));
	p.opcode = opcode;
	p.hdrs = (unsigned int)roce_opcode_hdrs(opcode);
	p.payload = payload;
	/* as long as the MTU wants: only its place in the message is wrong */
	p.payload_len = opcode == ROCE_RC_RDMA_READ_REQUEST ? 0 :
			opcode == ROCE_RC_SEND_MIDDLE ||
			opcode == ROCE_RC_RDMA_WRITE_MIDDLE ? sizeof(payload) : 100;
	p.reth.va = REMOTE_VA;
	p.reth.rkey = REMOTE_RKEY;
	p.reth.len = 64;
	roce_rx_self = &rd;
	roce_rc_rx(&rd, wired(&resp_qp), &ip, &p);
	roce_rx_self = NULL;
	ck_assert_uint_eq(nrecvs_done, 0);
	ck_assert_uint_eq(responder_errors, 1);
	ck_assert_uint_eq(last_syndrome(), ROCE_AETH_NAK_INV);
	teardown();
}

START_TEST(packet_out_of_its_message)
{
	out_of_place(true, ROCE_RC_SEND_LAST);
	out_of_place(true, ROCE_RC_SEND_MIDDLE);
	out_of_place(false, ROCE_RC_RDMA_WRITE_MIDDLE);
	out_of_place(false, ROCE_RC_RDMA_WRITE_LAST);
	out_of_place(true, ROCE_RC_RDMA_READ_REQUEST);
	out_of_place(false, ROCE_RC_RDMA_READ_REQUEST);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("roce_rc");
	TCase *tc = tcase_create("loss");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, read_hole_retried_at_once_from_it);
	tcase_add_test(tc, read_responses_land_in_one_run);
	tcase_add_test(tc, read_run_that_cannot_land);
	tcase_add_test(tc, read_run_after_the_qp_failed);
	tcase_add_test(tc, read_timeout_asks_for_the_rest_only);
	tcase_add_test(tc, read_whole_again_when_nothing_came);
	tcase_add_test(tc, progress_between_timeouts_refills_the_retries);
	tcase_add_test(tc, rnr_nak_overtaken_by_an_ack);
	tcase_add_test(tc, window_go_back_n_from_the_lost_packet);
	tcase_add_test(tc, chunked_steps_move_their_own_bytes);
	tcase_add_test(tc, local_mr_gone_in_flight);
	tcase_add_test(tc, read_response_of_the_wrong_length_dropped);
	tcase_add_test(tc, psn_naks_go_back_once_per_progress);
	tcase_add_test(tc, resent_bytes_are_charged);
	tcase_add_test(tc, lost_tail_probed_before_the_timeout);
	tcase_add_test(tc, lost_ack_probed_before_the_timeout);
	tcase_add_test(tc, probe_without_its_memory_keeps_the_timeout);
	tcase_add_test(tc, read_past_a_gap_not_probed);
	tcase_add_test(tc, timeout_resend_watched_for_a_probe);
	tcase_add_test(tc, ack_past_a_read_asks_again_at_once);
	tcase_add_test(tc, packet_to_another_address_dropped);
	suite_add_tcase(s, tc);
	tc = tcase_create("order");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, reply_completes_after_the_send_it_answers);
	tcase_add_test(tc, held_receives_complete_before_the_flush);
	tcase_add_test(tc, xrc_into_the_named_srq);
	tcase_add_test(tc, xrc_srq_of_another_domain);
	tcase_add_test(tc, xrc_duplicate_read_in_its_own_pd);
	tcase_add_test(tc, duplicate_read_answers_the_newest);
	tcase_add_test(tc, duplicate_send_acked_again);
	tcase_add_test(tc, packet_longer_or_shorter_than_the_mtu);
	tcase_add_test(tc, old_read_resources_retire);
	tcase_add_test(tc, a_batch_gets_one_ack);
	tcase_add_test(tc, owed_ack_goes_before_a_nak);
	tcase_add_test(tc, write_run_that_cannot_land_is_not_acked);
	tcase_add_test(tc, send_lands_in_one_run);
	tcase_add_test(tc, send_run_that_cannot_land);
	tcase_add_test(tc, send_run_failed_before_the_next_packet);
	tcase_add_test(tc, send_run_after_the_qp_failed);
	tcase_add_test(tc, send_failed_drops_its_run);
	tcase_add_test(tc, send_last_packet_as_the_qp_fails);
	tcase_add_test(tc, owed_ack_of_a_run_that_cannot_land);
	tcase_add_test(tc, owed_ack_before_a_run_that_cannot_land);
	tcase_add_test(tc, srq_send_resolves_each_packet);
	tcase_add_test(tc, srq_send_too_long);
	tcase_add_test(tc, srq_wqe_flushed_at_reset);
	tcase_add_test(tc, uc_cut_message_leaves_srq_wqe_to_the_next);
	tcase_add_test(tc, uc_message_behind_the_psn_taken);
	tcase_add_test(tc, packet_out_of_its_message);
	tcase_add_test(tc, replayed_read_pays_for_what_goes_again);
	tcase_add_test(tc, replayed_read_pays_the_drain_budget);
	tcase_add_test(tc, qp1_path_never_waits);
	tcase_add_test(tc, read_past_the_drain_budget_waits);
	tcase_add_test(tc, ack_of_a_psn_not_sent_dropped);
	tcase_add_test(tc, a_turn_goes_in_one_call);
	tcase_add_test(tc, read_failed_by_its_timeout_lands_nothing);
	tcase_add_test(tc, duplicate_behind_a_run_that_cannot_land);
	tcase_add_test(tc, write_run_after_the_qp_failed);
	tcase_add_test(tc, short_messages_make_one_run);
	tcase_add_test(tc, in_flight_bounded_by_the_send_queue);
	tcase_add_test(tc, inline_send_again_from_its_slot);
	tcase_add_test(tc, a_read_request_ends_a_run);
	suite_add_tcase(s, tc);
	return check_run(s, CK_NORMAL);
}
