/*
 * peers-helper: the data-path tests that need more than one process or a
 * process limit (peers.sh), each role a separate run through ibverbsd-run.
 * Processes meet through files in DIR (vt_put/vt_get).
 *
 *   victim DIR / attacker DIR	(two uids) the attacker holds the keys of
 *	one MR it was given and the keys of one it was not: the given ones
 *	work, every forged lkey/rkey gets LOC_PROT_ERR/REM_ACCESS_ERR and
 *	never a byte of the victim's; the victim checks its memory after.
 *   target DIR / initiator DIR	the target stops itself (SIGSTOP); the
 *	initiator's WRITE, READ and atomics into its memory complete anyway;
 *	peers.sh sends SIGCONT and the target checks the result.
 *   uc_rx DIR [srq] / uc_tx DIR	a UC message too long for its receive
 *	is dropped and the receiving QP goes on (peers.sh; roce-stream.sh
 *	runs it across the wire).
 *   big_rx DIR / big_tx DIR	a SEND, a WRITE and a READ of ~1 MB each,
 *	longer than the engine's chunk, every byte checked (roce-stream.sh
 *	runs them across the wire).
 *   memlock limited|unlimited	registration against RLIMIT_MEMLOCK
 *	(peers.sh runs it under prlimit --memlock=65536 or unlimited).
 *
 * Exit: 0 pass, 1 fail, 77 skip.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "vt.h"

#define CANARY		0xee
#define PRIV_LEN	65536u
#define PUB_LEN		4096u
#define NCONN		3

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

/* Within run_ours's limit (20 s), so that a late peer is said, not killed. */
static void get(const char *name, char *buf, size_t len)
{
	vt_assert(vt_get(dir, name, buf, len, vt_tmo_ms() * 3 / 2),
		  "no %s/%s within %d ms", dir, name, vt_tmo_ms() * 3 / 2);
}

/* ==== tenancy ================================================================ */

/*
 * What the victim publishes: its LID, NCONN QP numbers (in PD "pub"), the
 * MR it gives out (pub, in that PD) and the one it does not (priv, in its
 * other PD).
 */
struct victim_info {
	unsigned int lid;
	unsigned int qpn[NCONN];
	unsigned long long pub_addr, priv_addr;
	unsigned int pub_rkey, pub_lkey, priv_rkey, priv_lkey;
};

static int victim(void)
{
	struct ibv_mr *priv, *pub;
	struct ibv_qp *qp[NCONN];
	struct vt_addr peer;
	struct vt_qp_opts o;
	struct ibv_cq *cq;
	struct vt_dev db;
	unsigned int aq[NCONN];
	unsigned int alid;
	char buf[512];
	int i, events;

	vt_open(&D);
	db = D;
	db.pd = ibv_alloc_pd(D.ctx);
	vt_assert(db.pd, "ibv_alloc_pd: %s", strerror(errno));
	priv = vt_reg(D.pd, PRIV_LEN, VT_ACCESS_ALL);
	pub = vt_reg(db.pd, PUB_LEN, VT_ACCESS_ALL);
	vt_fill(priv->addr, PRIV_LEN, 0, 0x51);
	vt_fill(pub->addr, PUB_LEN, 0, 0x52);
	cq = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	vt_assert(cq, "ibv_create_cq: %s", strerror(errno));
	memset(&o, 0, sizeof(o));
	for (i = 0; i < NCONN; i++)
		qp[i] = vt_qp(&db, cq, cq, &o);
	vt_put(dir, "victim", "%u %u %u %u %llu %u %u %llu %u %u\n", D.port.lid,
	       qp[0]->qp_num, qp[1]->qp_num, qp[2]->qp_num,
	       (unsigned long long)(uintptr_t)pub->addr, pub->rkey, pub->lkey,
	       (unsigned long long)(uintptr_t)priv->addr, priv->rkey, priv->lkey);

	get("attacker", buf, sizeof(buf));
	vt_assert(sscanf(buf, "%u %u %u %u", &alid, &aq[0], &aq[1], &aq[2]) == 4,
		  "bad attacker file: %s", buf);
	for (i = 0; i < NCONN; i++) {
		memset(&peer, 0, sizeof(peer));
		peer.lid = (uint16_t)alid;
		peer.qpn = aq[i];
		vt_connect(&db, qp[i], &peer, &o);
	}
	vt_put(dir, "victim.ready", "ready\n");
	say("victim: connected %d QPs, waiting for the attacker", NCONN);

	get("attacker.done", buf, sizeof(buf));
	vt_assert(strncmp(buf, "ok", 2) == 0, "the attacker failed: %s", buf);
	/* The attacker wrote what it was allowed to, nothing else. */
	vt_expect_pat(priv->addr, PRIV_LEN, 0, 0x51, "the victim's private MR");
	vt_expect_pat(pub->addr, 1024, 0, 0x61, "the given MR's first KiB (written)");
	vt_expect_pat((uint8_t *)pub->addr + 1024, PUB_LEN - 1024, 1024, 0x52,
		      "the rest of the given MR");
	/* Its two forged accesses on our QPs 1 and 2 were access errors here. */
	for (events = 0, i = 1; i < NCONN; i++)
		events += vt_async_wait(D.ctx, IBV_EVENT_QP_ACCESS_ERR, qp[i], vt_tmo_ms());
	vt_assert(events == 2, "%d IBV_EVENT_QP_ACCESS_ERR events for QPs 1 and 2, want 2",
		  events);
	vt_expect_state(qp[0], IBV_QPS_RTS, "the QP used with the given keys");
	for (i = 0; i < NCONN; i++)
		vt_assert(ibv_destroy_qp(qp[i]) == 0, "ibv_destroy_qp");
	vt_assert(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
	vt_dereg(priv);
	vt_dereg(pub);
	vt_assert(ibv_dealloc_pd(db.pd) == 0, "ibv_dealloc_pd");
	vt_close(&D);
	say("victim: private memory intact, given memory holds only the allowed write");
	return 0;
}

/* A fresh loopback pair of the attacker's own. */
static void own_pair(struct vt_pair *p)
{
	vt_pair(p, &D, NULL, 0);
}

static int attacker(void)
{
	struct victim_info v;
	struct ibv_qp *qp[NCONN];
	struct ibv_mr *mine;
	struct vt_qp_opts o;
	struct vt_addr peer;
	struct ibv_cq *cq;
	struct vt_pair p;
	char buf[512];
	int i;

	vt_open(&D);
	get("victim", buf, sizeof(buf));
	vt_assert(sscanf(buf, "%u %u %u %u %llu %u %u %llu %u %u", &v.lid, &v.qpn[0],
			 &v.qpn[1], &v.qpn[2], &v.pub_addr, &v.pub_rkey, &v.pub_lkey,
			 &v.priv_addr, &v.priv_rkey, &v.priv_lkey) == 10,
		  "bad victim file: %s", buf);
	mine = vt_reg(D.pd, 65536, VT_ACCESS_ALL);
	cq = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	vt_assert(cq, "ibv_create_cq: %s", strerror(errno));
	memset(&o, 0, sizeof(o));
	for (i = 0; i < NCONN; i++)
		qp[i] = vt_qp(&D, cq, cq, &o);
	vt_put(dir, "attacker", "%u %u %u %u\n", D.port.lid, qp[0]->qp_num,
	       qp[1]->qp_num, qp[2]->qp_num);
	for (i = 0; i < NCONN; i++) {
		memset(&peer, 0, sizeof(peer));
		peer.lid = (uint16_t)v.lid;
		peer.qpn = v.qpn[i];
		vt_connect(&D, qp[i], &peer, &o);
	}
	get("victim.ready", buf, sizeof(buf));

	/* 1. The keys it was given work. */
	vt_fill(mine->addr, 1024, 0, 0x61);
	vt_send(qp[0], 1, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, mine->addr, 1024,
		mine->lkey, v.pub_addr, v.pub_rkey);
	vt_expect_ok(cq, NULL, 1, IBV_WC_RDMA_WRITE, "WRITE with the given rkey");
	memset(mine->addr, CANARY, 65536);
	vt_send(qp[0], 2, IBV_WR_RDMA_READ, IBV_SEND_SIGNALED, mine->addr, 1024,
		mine->lkey, v.pub_addr + 1024, v.pub_rkey);
	vt_expect_ok(cq, NULL, 2, IBV_WC_RDMA_READ, "READ with the given rkey");
	vt_expect_pat(mine->addr, 1024, 1024, 0x52, "bytes read with the given rkey");
	say("attacker: the given rkey works (WRITE and READ)");

	/* 2. The victim's other MR, through the victim's QP: another PD. */
	memset(mine->addr, CANARY, 65536);
	vt_send(qp[1], 3, IBV_WR_RDMA_READ, IBV_SEND_SIGNALED, mine->addr, 4096,
		mine->lkey, v.priv_addr, v.priv_rkey);
	vt_expect_wc(cq, NULL, 3, IBV_WC_REM_ACCESS_ERR, "READ of an MR of another PD");
	vt_expect_byte(mine->addr, 65536, CANARY, "after the refused READ");
	vt_fill(mine->addr, 4096, 0, 0x62);
	vt_send(qp[2], 4, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, mine->addr, 4096,
		mine->lkey, v.priv_addr, v.priv_rkey);
	vt_expect_wc(cq, NULL, 4, IBV_WC_REM_ACCESS_ERR, "WRITE to an MR of another PD");
	say("attacker: the victim's private rkey: REM_ACCESS_ERR on the victim's QPs");

	/* 3. The victim's rkeys on our own QPs: not valid in our PD. */
	own_pair(&p);
	memset(mine->addr, CANARY, 65536);
	vt_send(p.qp[0], 5, IBV_WR_RDMA_READ, IBV_SEND_SIGNALED, mine->addr, 4096,
		mine->lkey, v.pub_addr, v.pub_rkey);
	vt_expect_wc(p.scq[0], NULL, 5, IBV_WC_REM_ACCESS_ERR, "READ with a foreign rkey");
	vt_expect_byte(mine->addr, 65536, CANARY, "after the foreign-rkey READ");
	vt_pair_free(&p);
	own_pair(&p);
	vt_send(p.qp[0], 6, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, mine->addr, 4096,
		mine->lkey, v.priv_addr, v.priv_rkey);
	vt_expect_wc(p.scq[0], NULL, 6, IBV_WC_REM_ACCESS_ERR, "WRITE with a foreign rkey");
	vt_pair_free(&p);
	own_pair(&p);
	vt_atomic(p.qp[0], 7, IBV_WR_ATOMIC_FETCH_AND_ADD, mine->addr, mine->lkey,
		  v.priv_addr, v.priv_rkey, 1, 0);
	vt_expect_wc(p.scq[0], NULL, 7, IBV_WC_REM_ACCESS_ERR, "atomic with a foreign rkey");
	vt_pair_free(&p);
	say("attacker: the victim's rkeys on its own QPs: REM_ACCESS_ERR");

	/* 4. The victim's lkeys as local keys: LOC_PROT_ERR, nothing moves. */
	own_pair(&p);
	memset(mine->addr, CANARY, 65536);
	vt_recv(p.qp[1], 8, mine->addr, 65536, mine->lkey);
	vt_send(p.qp[0], 9, IBV_WR_SEND, IBV_SEND_SIGNALED,
		(void *)(uintptr_t)v.priv_addr, 4096, v.priv_lkey, 0, 0);
	vt_expect_wc(p.scq[0], NULL, 9, IBV_WC_LOC_PROT_ERR, "SEND from a foreign lkey");
	vt_expect_none(p.rcq[1], 100, "receiver of the forged SEND");
	vt_expect_byte(mine->addr, 65536, CANARY, "receive buffer of the forged SEND");
	vt_pair_free(&p);
	own_pair(&p);
	vt_fill(mine->addr, 4096, 0, 0x63);
	vt_send(p.qp[0], 10, IBV_WR_RDMA_READ, IBV_SEND_SIGNALED,
		(void *)(uintptr_t)v.priv_addr, 4096, v.priv_lkey,
		(uintptr_t)mine->addr, mine->rkey);
	vt_expect_wc(p.scq[0], NULL, 10, IBV_WC_LOC_PROT_ERR, "READ into a foreign lkey");
	vt_pair_free(&p);
	own_pair(&p);
	vt_send(p.qp[0], 11, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED,
		(void *)(uintptr_t)v.pub_addr, 1024, v.pub_lkey,
		(uintptr_t)mine->addr, mine->rkey);
	vt_expect_wc(p.scq[0], NULL, 11, IBV_WC_LOC_PROT_ERR, "WRITE from a given MR's lkey");
	vt_pair_free(&p);
	say("attacker: the victim's lkeys: LOC_PROT_ERR, no byte moved");

	for (i = 0; i < NCONN; i++)
		vt_assert(ibv_destroy_qp(qp[i]) == 0, "ibv_destroy_qp");
	vt_assert(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
	vt_dereg(mine);
	vt_close(&D);
	vt_put(dir, "attacker.done", "ok\n");
	return 0;
}

/* ==== one-sided operations into a stopped process ========================== */

#define TGT_LEN		65536u
#define TGT_WORDS	32768u		/* offset of the atomics' words */

static int target(void)
{
	volatile uint64_t *w;
	struct vt_addr peer;
	struct vt_qp_opts o;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	unsigned int lid, qpn;
	char buf[256];

	vt_open(&D);
	mr = vt_reg(D.pd, TGT_LEN, VT_ACCESS_ALL);
	vt_fill(mr->addr, TGT_LEN, 0, 0x71);
	w = (volatile uint64_t *)((uint8_t *)mr->addr + TGT_WORDS);
	w[0] = 100;
	w[1] = 0x5555;
	cq = ibv_create_cq(D.ctx, 16, NULL, NULL, 0);
	vt_assert(cq, "ibv_create_cq: %s", strerror(errno));
	memset(&o, 0, sizeof(o));
	qp = vt_qp(&D, cq, cq, &o);
	vt_put(dir, "target", "%u %u %llu %u %d\n", D.port.lid, qp->qp_num,
	       (unsigned long long)(uintptr_t)mr->addr, mr->rkey, (int)getpid());
	get("initiator", buf, sizeof(buf));
	vt_assert(sscanf(buf, "%u %u", &lid, &qpn) == 2, "bad initiator file: %s", buf);
	memset(&peer, 0, sizeof(peer));
	peer.lid = (uint16_t)lid;
	peer.qpn = qpn;
	vt_connect(&D, qp, &peer, &o);
	vt_put(dir, "target.ready", "ready\n");
	say("target: stopping myself (pid %d)", (int)getpid());
	raise(SIGSTOP);

	say("target: continued");
	get("initiator.done", buf, sizeof(buf));
	vt_assert(strncmp(buf, "ok", 2) == 0, "the initiator failed: %s", buf);
	vt_expect_pat(mr->addr, 8192, 0, 0x72, "bytes written while stopped");
	vt_expect_pat((uint8_t *)mr->addr + 8192, TGT_WORDS - 8192, 8192, 0x71,
		      "bytes around them");
	vt_assert(w[0] == 105 && w[1] == 0x7777,
		  "atomic words %llu %#llx, want 105 0x7777",
		  (unsigned long long)w[0], (unsigned long long)w[1]);
	vt_expect_none(cq, 0, "the target's CQ");
	vt_assert(ibv_destroy_qp(qp) == 0, "ibv_destroy_qp");
	vt_assert(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
	vt_dereg(mr);
	vt_close(&D);
	say("target: WRITE and atomics landed while stopped");
	return 0;
}

/* The state letter of /proc/PID/stat ('T': stopped), or 0. */
static char proc_state(int pid)
{
	char path[64], line[512], *p;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	p = fgets(line, sizeof(line), f);
	fclose(f);
	if (!p || !(p = strrchr(line, ')')) || p[1] != ' ')
		return 0;
	return p[2];
}

static void expect_stopped(int pid, const char *when)
{
	char s = proc_state(pid);

	vt_assert(s == 'T', "the target (pid %d) is in state '%c' %s, want 'T'",
		  pid, s ? s : '?', when);
}

static int initiator(void)
{
	volatile uint64_t *res;
	unsigned long long addr;
	unsigned int lid, qpn, rkey;
	struct vt_addr peer;
	struct vt_qp_opts o;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	char buf[256];
	long deadline;
	int pid;

	vt_open(&D);
	get("target", buf, sizeof(buf));
	vt_assert(sscanf(buf, "%u %u %llu %u %d", &lid, &qpn, &addr, &rkey, &pid) == 5,
		  "bad target file: %s", buf);
	mr = vt_reg(D.pd, 2 * TGT_LEN, VT_ACCESS_ALL);
	cq = ibv_create_cq(D.ctx, 16, NULL, NULL, 0);
	vt_assert(cq, "ibv_create_cq: %s", strerror(errno));
	memset(&o, 0, sizeof(o));
	qp = vt_qp(&D, cq, cq, &o);
	vt_put(dir, "initiator", "%u %u\n", D.port.lid, qp->qp_num);
	memset(&peer, 0, sizeof(peer));
	peer.lid = (uint16_t)lid;
	peer.qpn = qpn;
	vt_connect(&D, qp, &peer, &o);
	get("target.ready", buf, sizeof(buf));
	deadline = vt_now_ms() + vt_tmo_ms();
	while (proc_state(pid) != 'T') {
		vt_assert(vt_now_ms() < deadline, "the target (pid %d) did not stop", pid);
		vt_sleep_ms(5);
	}
	say("initiator: the target (pid %d) is stopped", pid);

	vt_fill(mr->addr, 8192, 0, 0x72);
	vt_send(qp, 1, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, mr->addr, 8192,
		mr->lkey, addr, rkey);
	vt_expect_ok(cq, NULL, 1, IBV_WC_RDMA_WRITE, "WRITE into the stopped target");
	vt_send(qp, 2, IBV_WR_RDMA_READ, IBV_SEND_SIGNALED,
		(uint8_t *)mr->addr + TGT_LEN, 16384, mr->lkey, addr, rkey);
	vt_expect_ok(cq, &wc, 2, IBV_WC_RDMA_READ, "READ from the stopped target");
	vt_expect_pat((uint8_t *)mr->addr + TGT_LEN, 8192, 0, 0x72, "read back: the WRITE");
	vt_expect_pat((uint8_t *)mr->addr + TGT_LEN + 8192, 8192, 8192, 0x71,
		      "read back: the target's own bytes");
	res = (volatile uint64_t *)((uint8_t *)mr->addr + 8192);
	vt_atomic(qp, 3, IBV_WR_ATOMIC_FETCH_AND_ADD, (void *)&res[0], mr->lkey,
		  addr + TGT_WORDS, rkey, 5, 0);
	vt_expect_ok(cq, NULL, 3, IBV_WC_FETCH_ADD, "FETCH_AND_ADD on the stopped target");
	vt_assert(res[0] == 100, "FETCH_AND_ADD returned %llu, want 100",
		  (unsigned long long)res[0]);
	vt_atomic(qp, 4, IBV_WR_ATOMIC_CMP_AND_SWP, (void *)&res[1], mr->lkey,
		  addr + TGT_WORDS + 8, rkey, 0x5555, 0x7777);
	vt_expect_ok(cq, NULL, 4, IBV_WC_COMP_SWAP, "CMP_AND_SWP on the stopped target");
	vt_assert(res[1] == 0x5555, "CMP_AND_SWP returned %#llx, want 0x5555",
		  (unsigned long long)res[1]);
	vt_send(qp, 5, IBV_WR_RDMA_READ, IBV_SEND_SIGNALED, (void *)&res[2], 16,
		mr->lkey, addr + TGT_WORDS, rkey);
	vt_expect_ok(cq, NULL, 5, IBV_WC_RDMA_READ, "READ of the atomics' words");
	vt_assert(res[2] == 105 && res[3] == 0x7777, "words after the atomics: %llu %#llx",
		  (unsigned long long)res[2], (unsigned long long)res[3]);
	expect_stopped(pid, "after the operations");
	say("initiator: WRITE, READ, FETCH_AND_ADD, CMP_AND_SWP completed on a stopped target");

	vt_assert(ibv_destroy_qp(qp) == 0, "ibv_destroy_qp");
	vt_assert(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
	vt_dereg(mr);
	vt_close(&D);
	vt_put(dir, "initiator.done", "ok\n");
	return 0;
}

/* ==== RLIMIT_MEMLOCK ========================================================= */

/*
 * UC messages too long for their receive (uc_rx, uc_tx): dropped, as
 * rxe's responder drops them, and the QP goes on; UC has no ACKs, so the
 * sender's SENDs succeed.  The receiver posts one receive of UC_SMALL
 * bytes; the sender sends UC_LONG bytes (four packets at an MTU of
 * 1024), then UC_FITS.  Without an SRQ the receive stays posted and the
 * second message lands in it; taken from an SRQ it completes with
 * REM_INV_REQ_ERR, and the SRQ's next receive takes the second.
 */
#define UC_SMALL	256u
#define UC_LONG		4000u
#define UC_FITS		(UC_SMALL - 8)
#define UC_PAT		0x5d

/* A QP of D on cq (and srq), connected to the peer's `role` file. */
static struct ibv_qp *connected(enum ibv_qp_type type, struct ibv_cq *cq,
				struct ibv_srq *srq, const char *me,
				const char *peer_role)
{
	/*
	 * RC (big_rx, big_tx): 7 retries of 134 ms, as roce-stream.sh's
	 * streams: a daemon on a crowded machine may not run for half a
	 * second, and vt's 3 of 16.8 ms took that for a dead peer.
	 */
	struct vt_qp_opts o = { .type = type, .mtu = IBV_MTU_1024, .srq = srq,
				.timeout = type == IBV_QPT_RC ? 15 : 0,
				.retry_cnt = type == IBV_QPT_RC ? 7 : 0 };
	struct vt_addr mine, peer;
	struct ibv_qp *qp;
	char buf[256];

	qp = vt_qp(&D, cq, cq, &o);
	vt_qp_addr(&D, qp, &o, &mine);
	vt_addr_str(&mine, buf, sizeof(buf));
	vt_put(dir, me, "%s\n", buf);
	get(peer_role, buf, sizeof(buf));
	vt_assert(vt_addr_parse(buf, &peer) == 0, "bad %s file: %s", peer_role, buf);
	vt_connect(&D, qp, &peer, &o);
	return qp;
}

static void uc_close(struct ibv_qp *qp, struct ibv_srq *srq,
		     struct ibv_cq *cq, struct ibv_mr *mr)
{
	vt_assert(ibv_destroy_qp(qp) == 0, "ibv_destroy_qp");
	if (srq)
		vt_assert(ibv_destroy_srq(srq) == 0, "ibv_destroy_srq");
	vt_assert(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
	vt_dereg(mr);
	vt_close(&D);
}

/* D opened, with a CQ and an MR of len bytes. */
static struct ibv_cq *uc_open(size_t len, struct ibv_mr **mr)
{
	struct ibv_cq *cq;

	vt_open(&D);
	*mr = vt_reg(D.pd, len, VT_ACCESS_ALL);
	cq = ibv_create_cq(D.ctx, 16, NULL, NULL, 0);
	vt_assert(cq, "ibv_create_cq: %s", strerror(errno));
	return cq;
}

static int uc_rx(bool use_srq)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq *srq = NULL;
	uint64_t want = 1;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	char buf[64];

	cq = uc_open(2 * UC_SMALL, &mr);
	memset(mr->addr, CANARY, 2 * UC_SMALL);
	if (use_srq) {
		srq = ibv_create_srq(D.pd, &sa);
		vt_assert(srq, "ibv_create_srq: %s", strerror(errno));
	}
	qp = connected(IBV_QPT_UC, cq, srq, "uc_rx", "uc_tx");
	if (srq) {
		vt_srq_recv(srq, 1, mr->addr, UC_SMALL, mr->lkey);
		vt_srq_recv(srq, 2, (uint8_t *)mr->addr + UC_SMALL, UC_SMALL,
			    mr->lkey);
	} else {
		vt_recv(qp, 1, mr->addr, UC_SMALL, mr->lkey);
	}
	vt_put(dir, "uc_rx.ready", "ready\n");
	if (srq) {
		vt_expect_wc(cq, &wc, 1, IBV_WC_REM_INV_REQ_ERR,
			     "the SRQ's receive of a message too long");
		vt_assert(wc.qp_num == qp->qp_num, "qp_num %u, want %u",
			  wc.qp_num, qp->qp_num);
		want = 2;
	}
	vt_expect_ok(cq, &wc, want, IBV_WC_RECV, "the message after it");
	vt_assert(wc.byte_len == UC_FITS, "byte_len %u, want %u", wc.byte_len,
		  UC_FITS);
	vt_expect_pat((uint8_t *)mr->addr + (want - 1) * UC_SMALL, UC_FITS, 0,
		      UC_PAT, "the message after it");
	if (!srq)
		vt_expect_byte((uint8_t *)mr->addr + UC_SMALL, UC_SMALL, CANARY,
			       "past the receive");
	vt_expect_state(qp, IBV_QPS_RTS, "the receiver");
	vt_expect_none(cq, 100, "the receiver's CQ after them");
	vt_put(dir, "uc_rx.done", "ok\n");
	get("uc_tx.done", buf, sizeof(buf));
	uc_close(qp, srq, cq, mr);
	say("uc_rx: the message too long dropped%s, the next received",
	    srq ? " (its SRQ receive REM_INV_REQ_ERR)" : "");
	return 0;
}

static int uc_tx(void)
{
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	char buf[64];

	cq = uc_open(UC_LONG, &mr);
	vt_fill(mr->addr, UC_LONG, 0, UC_PAT);
	qp = connected(IBV_QPT_UC, cq, NULL, "uc_tx", "uc_rx");
	get("uc_rx.ready", buf, sizeof(buf));
	vt_send(qp, 1, IBV_WR_SEND, IBV_SEND_SIGNALED, mr->addr, UC_LONG,
		mr->lkey, 0, 0);
	vt_send(qp, 2, IBV_WR_SEND, IBV_SEND_SIGNALED, mr->addr, UC_FITS,
		mr->lkey, 0, 0);
	vt_expect_ok(cq, &wc, 1, IBV_WC_SEND, "the SEND too long");
	vt_expect_ok(cq, &wc, 2, IBV_WC_SEND, "the SEND that fits");
	get("uc_rx.done", buf, sizeof(buf));
	vt_put(dir, "uc_tx.done", "ok\n");
	vt_expect_state(qp, IBV_QPS_RTS, "the sender");
	uc_close(qp, NULL, cq, mr);
	say("uc_tx: both SENDs completed");
	return 0;
}

/*
 * Messages longer than the engine's chunk (big_rx, big_tx; roce-stream.sh
 * runs them across the wire): a SEND, an RDMA WRITE and an RDMA READ of
 * BIG_LEN bytes each on an RC pair, every byte checked where it lands
 * (vt_pat's pattern depends on the offset: a step carrying another's
 * bytes shows).  The receiver's MR: BIG_LEN for the SEND, BIG_LEN the
 * READ reads (seed BIG_READ_PAT), BIG_LEN the WRITE writes.
 */
#define BIG_LEN		1000003u	/* 8 chunks, the last short; 977 packets */
#define BIG_SEND_PAT	0x5e
#define BIG_READ_PAT	0x5f

static int big_rx(void)
{
	uint8_t *at;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	char buf[64];

	cq = uc_open(3 * (size_t)BIG_LEN, &mr);
	at = mr->addr;
	vt_fill(at + BIG_LEN, BIG_LEN, 0, BIG_READ_PAT);
	qp = connected(IBV_QPT_RC, cq, NULL, "big_rx", "big_tx");
	vt_recv(qp, 1, at, BIG_LEN, mr->lkey);
	vt_put(dir, "big_rx.mr", "%llx %x\n",
	       (unsigned long long)(uintptr_t)at, mr->rkey);
	vt_expect_ok(cq, &wc, 1, IBV_WC_RECV, "the long SEND");
	vt_assert(wc.byte_len == BIG_LEN, "byte_len %u, want %u", wc.byte_len,
		  BIG_LEN);
	vt_expect_pat(at, BIG_LEN, 0, BIG_SEND_PAT, "the long SEND");
	get("big_tx.done", buf, sizeof(buf));
	vt_expect_pat(at + 2 * (size_t)BIG_LEN, BIG_LEN, 0, BIG_SEND_PAT,
		      "the long WRITE");
	vt_put(dir, "big_rx.done", "ok\n");
	uc_close(qp, NULL, cq, mr);
	say("big_rx: a SEND and a WRITE of %u bytes, every byte in place",
	    BIG_LEN);
	return 0;
}

static int big_tx(void)
{
	unsigned long long raddr;
	unsigned int rkey;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	uint8_t *at;
	char buf[64];

	cq = uc_open(2 * (size_t)BIG_LEN, &mr);
	at = mr->addr;
	vt_fill(at, BIG_LEN, 0, BIG_SEND_PAT);
	qp = connected(IBV_QPT_RC, cq, NULL, "big_tx", "big_rx");
	get("big_rx.mr", buf, sizeof(buf));
	vt_assert(sscanf(buf, "%llx %x", &raddr, &rkey) == 2, "big_rx.mr: %s",
		  buf);
	vt_send(qp, 1, IBV_WR_SEND, IBV_SEND_SIGNALED, at, BIG_LEN, mr->lkey,
		0, 0);
	vt_send(qp, 2, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, at, BIG_LEN,
		mr->lkey, raddr + 2 * (uint64_t)BIG_LEN, rkey);
	vt_send(qp, 3, IBV_WR_RDMA_READ, IBV_SEND_SIGNALED, at + BIG_LEN,
		BIG_LEN, mr->lkey, raddr + BIG_LEN, rkey);
	vt_expect_ok(cq, &wc, 1, IBV_WC_SEND, "the long SEND");
	vt_expect_ok(cq, &wc, 2, IBV_WC_RDMA_WRITE, "the long WRITE");
	vt_expect_ok(cq, &wc, 3, IBV_WC_RDMA_READ, "the long READ");
	vt_expect_pat(at + BIG_LEN, BIG_LEN, 0, BIG_READ_PAT, "the long READ");
	vt_put(dir, "big_tx.done", "ok\n");
	get("big_rx.done", buf, sizeof(buf));
	uc_close(qp, NULL, cq, mr);
	say("big_tx: a READ of %u bytes, every byte in place", BIG_LEN);
	return 0;
}

static struct ibv_mr *try_reg(size_t len, void **buf)
{
	int ret = posix_memalign(buf, 4096, len);

	vt_assert(ret == 0, "posix_memalign: %s", strerror(ret));
	memset(*buf, 1, len);
	errno = 0;
	return ibv_reg_mr(D.pd, *buf, len, VT_ACCESS_ALL);
}

static void expect_reg(size_t len, int want_errno, struct ibv_mr **out)
{
	struct ibv_mr *mr;
	void *buf;

	mr = try_reg(len, &buf);
	if (want_errno) {
		vt_assert(!mr, "registering %zu KiB over the limit succeeded", len >> 10);
		vt_assert(errno == want_errno, "registering %zu KiB: errno %d (%s), want %d",
			  len >> 10, errno, strerror(errno), want_errno);
		free(buf);
		say("memlock: %zu KiB refused (%s)", len >> 10, strerror(errno));
		return;
	}
	vt_assert(mr, "registering %zu KiB: %s", len >> 10, strerror(errno));
	say("memlock: %zu KiB registered", len >> 10);
	if (out)
		*out = mr;
	else
		vt_dereg(mr);
}

static int memlock(const char *mode)
{
	struct ibv_mr *a = NULL, *b = NULL, *c = NULL;
	struct rlimit rl;

	vt_assert(getrlimit(RLIMIT_MEMLOCK, &rl) == 0, "getrlimit");
	vt_open(&D);
	if (strcmp(mode, "limited") == 0) {
		vt_assert(rl.rlim_cur == 65536,
			  "RLIMIT_MEMLOCK is %llu, want 65536 (prlimit --memlock=65536)",
			  (unsigned long long)rl.rlim_cur);
		/* As the kernel counts pinned pages: up to the limit, not past it. */
		expect_reg(128 * 1024, ENOMEM, NULL);
		expect_reg(32 * 1024, 0, &a);
		expect_reg(32 * 1024, 0, &b);
		expect_reg(4096, ENOMEM, NULL);
		vt_dereg(a);
		expect_reg(32 * 1024, 0, &c);
		vt_dereg(b);
		vt_dereg(c);
		/* Released when deregistered: the limit applies afresh. */
		expect_reg(64 * 1024, 0, NULL);
	} else {
		vt_assert(rl.rlim_cur == RLIM_INFINITY, "RLIMIT_MEMLOCK is %llu, want unlimited",
			  (unsigned long long)rl.rlim_cur);
		expect_reg(128 * 1024, 0, &a);
		expect_reg(8 << 20, 0, &b);
		vt_dereg(a);
		vt_dereg(b);
	}
	vt_close(&D);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && strcmp(argv[1], "memlock") == 0)
		return memlock(argv[2]);
	if (argc == 4 && strcmp(argv[1], "uc_rx") == 0 &&
	    strcmp(argv[3], "srq") == 0) {
		dir = argv[2];
		return uc_rx(true);
	}
	if (argc != 3) {
		fprintf(stderr, "usage: %s victim|attacker|target|initiator|uc_rx|uc_tx|big_rx|big_tx DIR\n"
			"       %s uc_rx DIR srq\n"
			"       %s memlock limited|unlimited\n", argv[0], argv[0],
			argv[0]);
		return 2;
	}
	dir = argv[2];
	if (strcmp(argv[1], "victim") == 0)
		return victim();
	if (strcmp(argv[1], "attacker") == 0)
		return attacker();
	if (strcmp(argv[1], "target") == 0)
		return target();
	if (strcmp(argv[1], "initiator") == 0)
		return initiator();
	if (strcmp(argv[1], "uc_rx") == 0)
		return uc_rx(false);
	if (strcmp(argv[1], "uc_tx") == 0)
		return uc_tx();
	if (strcmp(argv[1], "big_rx") == 0)
		return big_rx();
	if (strcmp(argv[1], "big_tx") == 0)
		return big_tx();
	fprintf(stderr, "%s: unknown role %s\n", argv[0], argv[1]);
	return 2;
}
