/*
 * Fuzz harness: the shared rings as the engine reads them.  The input is
 * what a hostile client can write into the memory it shares with the
 * daemon: send and receive WQEs (any opcode, SGE count, length, key,
 * inline data), producer indices, doorbell bits, CQ heads and arming
 * words, and the headers of the arena's engine half, which the client
 * maps read-only by convention only (it holds the same memfd).
 *
 * Set up once, as a client would, through a real session (socketpair,
 * the request table, the verbs handlers): a context on a software device
 * (its context page and ring arena mapped here), its memory attached
 * through our own /proc/self/mem and maps, two PDs, three MRs over our
 * own buffers, two memory windows, a send and a receive CQ, an SRQ, and
 * six QPs in RTS: RC and UC pairs connected to each other and two UD QPs,
 * one of each kind on the SRQ; QPs 0 (RC) and 2 (UC) have staging blocks,
 * whose WQEs name a range in them (ring.h, "Staging").  The engine has no thread
 * (ibvd_engine_start_unthreaded): the harness runs its passes itself,
 * so what the engine did to the rings is over when they return.
 *
 * Between inputs: a QP that is not idle in RTS (in error, waiting, in the
 * middle of a message, its headers written raw) goes RESET -> RTS again
 * through MODIFY_QP, which rewinds its rings; the queues of the others,
 * the SRQ and the CQs are emptied as a client may (tails back to the
 * engine's heads, CQ heads to its tails); the windows are allocated again
 * if a WQE may have bound them, and the registered memory is refilled.
 * A CQ overrun, which nothing undoes, makes a new session.
 *
 * After each input, beyond what ASan and UBSan see: the guard pages
 * around the registered buffers are untouched (the engine reaches them
 * through /proc/self/mem, where ASan does not look), no queue's head
 * moved further than the input could have posted, each engine header
 * agrees with the engine's private head, and every new CQE is whole: its
 * sequence number, a QP of ours, a known status.
 *
 * Input: records of u8 command, u8 target, u8 len, len bytes:
 *   0 post send:  WQE bytes into the next SQ slot of QP target % 6,
 *                 tail + 1, doorbell rung (as ibv_post_send does)
 *   1 post recv:  the same into the RQ of QP 0, 2, 4 or the SRQ
 *                 (target % 4), no doorbell
 *   2 tail:       queue target % 10 (6 SQs, 3 RQs, the SRQ): tail + the
 *                 first byte, or with 4 bytes, tail = that u32
 *   3 doorbell:   the u16 bit of the bytes, any bit
 *   4 CQ:         CQ target % 2's client header: u32s, as many as given,
 *                 for head (the engine's tail less it, within the ring),
 *                 arm_seq and arm_flags
 *   5 raw:        header target % 32 (0-9 the queues' client headers,
 *                 10-11 the CQs'; 16 more: their engine headers): the
 *                 bytes after the first at offset bytes[0]
 *   6 run:        the engine's passes until idle
 * In a WQE, a key (lkey, rkey, mw_key, mr_lkey) below 8 names one of ours
 * (MR lkeys and rkeys, windows) and a remote_qpn below 8 one of the QPs,
 * so that seeds hold on whatever numbers the daemon gives.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <event2/event.h>
#include <infiniband/verbs.h>

#include "cm/cm.h"
#include "config/config.h"
#include "core/objects.h"
#include "devices.h"
#include "engine/engine.h"
#include "fake_daemon.h"
#include "frame.h"
#include "ibverbsd.pb-c.h"
#include "log.h"
#include "request.h"
#include "ring.h"
#include "server/call.h"
#include "server/session.h"
#include "verbs/async.h"
#include "verbs/context.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define CHECK(cond)	do { if (!(cond)) abort(); } while (0)

#define NQPS		6
#define NCQS		2
#define NWQS		(NQPS + 3 + 1)	/* SQs, own RQs, the SRQ */
#define MAX_RECORDS	48
#define MAX_PASSES	256
#define GUARD_BYTE	0xa5
#define FILL_BYTE	0x3c
#define QKEY		0x11111111u
#define WR		16	/* slots asked for each queue */
#define SGES		4
#define INLINE		128
#define CQ_ENTRIES	4096

/* Our memory: guard page, MR0 (256 KiB, > a chunk with SGEs), guard, MR1
 * (4 KiB, no write access), guard.  MR2, in the second PD, is MR0 again. */
#define PAGE		4096u
#define MR0_PAGES	64u
#define MR0_OFF		PAGE
#define MR1_OFF		(MR0_OFF + MR0_PAGES * PAGE + PAGE)
#define MEM_BYTES	(MR1_OFF + 2 * PAGE)
#define MR0_IOVA	0x100000ull
#define MR1_IOVA	0x200000ull
#define MR2_IOVA	0x300000ull

static const char config_text[] =
	"{ \"socket\": { \"path\": \"/nonexistent/fuzz.sock\" },"
	"  \"rlimit_memlock\": \"ignore\", \"device_links\": false,"
	"  \"devices\": [ { \"name\": \"ibvd0\", \"lid\": 1 } ] }";

static unsigned long n_requests, n_sessions, n_inputs;
static struct ibvd_daemon daemon_state;
static bool verbose;		/* FUZZ_VERBOSE: the daemon's log, every CQE */
static uint8_t reply_buf[IBVD_FRAME_MAX];
static uint8_t mem[MEM_BYTES] __attribute__((aligned(4096)));

/* A queue as the client sees it */
struct wq {
	struct ibvd_wq_engine *eng;
	struct ibvd_wq_client *cli;
	uint8_t *slots;
	uint32_t nslots, stride;
	uint32_t tail;			/* what we published */
};

struct cq {
	uint32_t handle;
	struct ibvd_cq_engine *eng;
	struct ibvd_cq_client *cli;
	struct ibvd_cqe *slots;
	uint32_t nslots;
};

/* Everything one session holds */
static struct world {
	int client;			/* our end of the session */
	int async_fd;
	uint32_t req_id;
	uint8_t *page;			/* context page, IBVD_CTX_PAGE_SIZE */
	uint8_t *arena;			/* IBVD_ARENA_BYTES */
	uint32_t pd, pd2, srq;
	uint32_t keys[8];		/* lkey0 rkey0 lkey1 rkey1 lkey2 rkey2 mw1 mw2 */
	uint32_t mw[2];			/* handles */
	struct cq cq[NCQS];
	uint32_t qp_handle[NQPS], doorbell[NQPS];
	uint32_t qpn[NQPS + 2];		/* then 0 and the multicast QPN */
	struct ibvd_qp *qp[NQPS];
	struct ibvd_srq *srq_obj;
	struct wq wq[NWQS];		/* SQ i, RQ of QP 0/2/4, SRQ */
	uint16_t lid;
	bool up;
} w;

static const uint32_t qp_types[NQPS] = {
	IBV_QPT_RC, IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_UD,
};

/* ---- the session --------------------------------------------------------- */


/*
 * One request and its reply, unpacked with desc (NULL: none wanted).
 * Setup requests must succeed: a failure is the harness's bug.
 */
static void *call(uint16_t type, const ProtobufCMessage *msg, const int *fds,
		  unsigned int nfds, const ProtobufCMessageDescriptor *desc,
		  int *reply_fds, unsigned int nreply_fds)
{
	struct ibvd_frame frame;
	unsigned int i;
	void *out = NULL;
	int r = -EAGAIN;

	n_requests++;
	CHECK(ibvd_frame_send(w.client, type, ++w.req_id, msg, fds, nfds, 0) == 0);
	for (i = 0; i < 16 && r == -EAGAIN; i++) {
		event_base_loop(daemon_state.base, EVLOOP_NONBLOCK);
		r = ibvd_frame_recv(w.client, reply_buf, sizeof(reply_buf),
				    &frame, MSG_DONTWAIT);
	}
	CHECK(r == 1);
	if (frame.hdr.type != (type | IBVD_REPLY)) {
		fprintf(stderr, "rings: request 0x%x failed\n", type);
		abort();
	}
	CHECK(frame.nfds == nreply_fds);
	for (i = 0; i < nreply_fds; i++)
		reply_fds[i] = frame.fds[i];
	if (desc) {
		out = protobuf_c_message_unpack(desc, NULL, frame.hdr.len,
						frame.payload);
		CHECK(out);
	}
	return out;
}

static uint32_t call_handle(uint16_t type, const ProtobufCMessage *msg)
{
	Ibvd__Handle *h = call(type, msg, NULL, 0, &ibvd__handle__descriptor,
			       NULL, 0);
	uint32_t handle = h->handle;

	ibvd__handle__free_unpacked(h, NULL);
	return handle;
}

static void *map_fd(int fd, size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	CHECK(p != MAP_FAILED);
	close(fd);
	return p;
}

static void open_context(void)
{
	Ibvd__OpenDevice od = IBVD__OPEN_DEVICE__INIT;
	Ibvd__QueryPort qp = IBVD__QUERY_PORT__INIT;
	Ibvd__AttachMemory am = IBVD__ATTACH_MEMORY__INIT;
	Ibvd__OpenDeviceReply *odr;
	Ibvd__PortAttr *pa;
	int fds[4];

	od.name = "ibvd0";
	odr = call(IBVD_MSG_OPEN_DEVICE, &od.base, NULL, 0,
		   &ibvd__open_device_reply__descriptor, fds, 4);
	ibvd__open_device_reply__free_unpacked(odr, NULL);
	w.async_fd = fds[0];
	CHECK(fcntl(w.async_fd, F_SETFL, O_NONBLOCK) == 0);
	w.page = map_fd(fds[1], IBVD_CTX_PAGE_SIZE);
	close(fds[2]);			/* no engine thread to kick */
	w.arena = map_fd(fds[3], IBVD_ARENA_BYTES);

	qp.port_num = 1;
	pa = call(IBVD_MSG_QUERY_PORT, &qp.base, NULL, 0,
		  &ibvd__port_attr__descriptor, NULL, 0);
	w.lid = (uint16_t)pa->lid;
	ibvd__port_attr__free_unpacked(pa, NULL);

	fds[0] = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	fds[1] = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	CHECK(fds[0] >= 0 && fds[1] >= 0);
	am.pid = (uint32_t)getpid();
	call(IBVD_MSG_ATTACH_MEMORY, &am.base, fds, 2, NULL, NULL, 0);
	close(fds[0]);
	close(fds[1]);
}

static void reg_mr(unsigned int i, uint32_t pd, size_t off, size_t len,
		   uint64_t iova, uint32_t access)
{
	Ibvd__RegMr m = IBVD__REG_MR__INIT;
	Ibvd__RegMrReply *r;

	m.pd = pd;
	m.addr = (uintptr_t)(mem + off);
	m.length = len;
	m.iova = iova;
	m.access = access;
	r = call(IBVD_MSG_REG_MR, &m.base, NULL, 0,
		 &ibvd__reg_mr_reply__descriptor, NULL, 0);
	w.keys[2 * i] = r->lkey;
	w.keys[2 * i + 1] = r->rkey;
	ibvd__reg_mr_reply__free_unpacked(r, NULL);
}

static void alloc_mws(void)
{
	Ibvd__AllocMw m = IBVD__ALLOC_MW__INIT;
	Ibvd__AllocMwReply *r;
	unsigned int i;

	m.pd = w.pd;
	for (i = 0; i < 2; i++) {
		m.type = i ? IBV_MW_TYPE_2 : IBV_MW_TYPE_1;
		r = call(IBVD_MSG_ALLOC_MW, &m.base, NULL, 0,
			 &ibvd__alloc_mw_reply__descriptor, NULL, 0);
		w.mw[i] = r->handle;
		w.keys[6 + i] = r->rkey;
		ibvd__alloc_mw_reply__free_unpacked(r, NULL);
	}
}

static void dealloc_mws(void)
{
	Ibvd__Handle h = IBVD__HANDLE__INIT;
	unsigned int i;

	for (i = 0; i < 2; i++) {
		h.handle = w.mw[i];
		call(IBVD_MSG_DEALLOC_MW, &h.base, NULL, 0, NULL, NULL, 0);
	}
}

static void place_wq(struct wq *q, const Ibvd__RingPlace *p, uint32_t nslots,
		     uint32_t stride)
{
	CHECK(p);
	q->eng = (struct ibvd_wq_engine *)(w.arena + p->engine);
	q->cli = (struct ibvd_wq_client *)(w.arena + p->client);
	q->slots = w.arena + p->slots;
	q->nslots = nslots;
	q->stride = stride;
	q->tail = 0;
}

static void create_cq(struct cq *c)
{
	Ibvd__CreateCq m = IBVD__CREATE_CQ__INIT;
	Ibvd__CreateCqReply *r;

	m.cqe = CQ_ENTRIES;
	r = call(IBVD_MSG_CREATE_CQ, &m.base, NULL, 0,
		 &ibvd__create_cq_reply__descriptor, NULL, 0);
	CHECK(r->ring);
	c->handle = r->handle;
	c->eng = (struct ibvd_cq_engine *)(w.arena + r->ring->engine);
	c->cli = (struct ibvd_cq_client *)(w.arena + r->ring->client);
	c->slots = (struct ibvd_cqe *)(w.arena + r->ring->slots);
	c->nslots = r->nslots;
	ibvd__create_cq_reply__free_unpacked(r, NULL);
}

static void create_srq(void)
{
	Ibvd__CreateSrq m = IBVD__CREATE_SRQ__INIT;
	Ibvd__CreateSrqReply *r;

	m.pd = w.pd;
	m.max_wr = WR;
	m.max_sge = SGES;
	m.srq_type = IBV_SRQT_BASIC;
	r = call(IBVD_MSG_CREATE_SRQ, &m.base, NULL, 0,
		 &ibvd__create_srq_reply__descriptor, NULL, 0);
	w.srq = r->handle;
	place_wq(&w.wq[NWQS - 1], r->ring, r->nslots, r->stride);
	ibvd__create_srq_reply__free_unpacked(r, NULL);
}

/* QPs 1, 3, 5 receive on the SRQ; 0, 2, 4 have RQs 6, 7, 8. */
static void create_qp(unsigned int i)
{
	Ibvd__CreateQp m = IBVD__CREATE_QP__INIT;
	Ibvd__QpCap cap = IBVD__QP_CAP__INIT;
	Ibvd__CreateQpReply *r;

	cap.max_send_wr = cap.max_recv_wr = WR;
	cap.max_send_sge = cap.max_recv_sge = SGES;
	cap.max_inline_data = INLINE;
	m.pd = w.pd;
	m.send_cq = w.cq[0].handle;
	m.recv_cq = w.cq[1].handle;
	m.srq = i & 1 ? w.srq : 0;
	m.qp_type = qp_types[i];
	m.cap = &cap;
	r = call(IBVD_MSG_CREATE_QP, &m.base, NULL, 0,
		 &ibvd__create_qp_reply__descriptor, NULL, 0);
	w.qp_handle[i] = r->handle;
	w.qpn[i] = r->qp_num;
	w.doorbell[i] = r->doorbell;
	place_wq(&w.wq[i], r->sq, r->sq_nslots, r->sq_stride);
	if (!(i & 1))
		place_wq(&w.wq[NQPS + i / 2], r->rq, r->rq_nslots, r->rq_stride);
	ibvd__create_qp_reply__free_unpacked(r, NULL);
	w.qp[i] = ibvd_qp_by_num(w.qpn[i]);
	CHECK(w.qp[i]);
}

/* A staging block (ring.h, "Staging") for QP i, as its library asks. */
static void give_staging(unsigned int i)
{
	Ibvd__Handle m = IBVD__HANDLE__INIT;
	Ibvd__QpStagingReply *r;

	m.handle = w.qp_handle[i];
	r = call(IBVD_MSG_QP_STAGING, &m.base, NULL, 0,
		 &ibvd__qp_staging_reply__descriptor, NULL, 0);
	CHECK(r->bytes && w.qp[i]->staging.bytes == r->bytes);
	ibvd__qp_staging_reply__free_unpacked(r, NULL);
}

/*
 * MODIFY_QP, the most frequent request here (reset()), handed to the
 * dispatcher as the session's read callback would, which saves three
 * system calls of the six a request costs; the reply still comes back
 * on the socket.
 */
static void modify_qp(unsigned int i, uint32_t mask, Ibvd__QpAttr *a)
{
	static uint8_t payload[1024];
	Ibvd__ModifyQp m = IBVD__MODIFY_QP__INIT;
	struct ibvd_frame frame, reply;

	m.handle = w.qp_handle[i];
	m.attr_mask = mask;
	m.attr = a;
	CHECK(protobuf_c_message_get_packed_size(&m.base) <= sizeof(payload));
	memset(&frame, 0, sizeof(frame));
	frame.hdr.magic = IBVD_FRAME_MAGIC;
	frame.hdr.version = IBVD_PROTO_VERSION;
	frame.hdr.type = IBVD_MSG_MODIFY_QP;
	frame.hdr.req_id = ++w.req_id;
	frame.hdr.len = (uint32_t)protobuf_c_message_pack(&m.base, payload);
	frame.payload = payload;
	n_requests++;
	ibvd_call_dispatch(TAILQ_FIRST(&daemon_state.sessions), &frame);
	CHECK(ibvd_frame_recv(w.client, reply_buf, sizeof(reply_buf), &reply,
			      MSG_DONTWAIT) == 1);
	if (reply.hdr.type != (IBVD_MSG_MODIFY_QP | IBVD_REPLY)) {
		fprintf(stderr, "rings: MODIFY_QP failed\n");
		abort();
	}
}

/* RESET -> INIT -> RTR -> RTS, connected to its pair (0-1, 2-3) */
static void bring_up(unsigned int i)
{
	Ibvd__QpAttr a = IBVD__QP_ATTR__INIT;
	Ibvd__AhAttr ah = IBVD__AH_ATTR__INIT;
	uint32_t type = qp_types[i];

	a.qp_state = IBV_QPS_RESET;
	modify_qp(i, IBV_QP_STATE, &a);
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = QKEY;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    (type == IBV_QPT_RC ? IBV_ACCESS_REMOTE_READ |
			     IBV_ACCESS_REMOTE_ATOMIC : 0);
	modify_qp(i, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		  (type == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS), &a);
	a.qp_state = IBV_QPS_RTR;
	if (type == IBV_QPT_UD) {
		modify_qp(i, IBV_QP_STATE, &a);
	} else {
		ah.dlid = w.lid;
		ah.port_num = 1;
		a.ah_attr = &ah;
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = w.qpn[i ^ 1];
		a.rq_psn = 0;
		a.max_dest_rd_atomic = 4;
		a.min_rnr_timer = 1;
		modify_qp(i, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  (type == IBV_QPT_RC ? IBV_QP_MAX_DEST_RD_ATOMIC |
			   IBV_QP_MIN_RNR_TIMER : 0), &a);
	}
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	a.timeout = 1;
	a.retry_cnt = 1;
	a.rnr_retry = 1;
	a.max_rd_atomic = 4;
	modify_qp(i, IBV_QP_STATE | IBV_QP_SQ_PSN |
		  (type == IBV_QPT_RC ? IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		   IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC : 0), &a);
	w.wq[i].tail = 0;
	if (!(i & 1))
		w.wq[NQPS + i / 2].tail = 0;
}

/* FUZZ_VERBOSE: what the resets cost (bench/FUZZING.md) */
static void __attribute__((destructor)) print_stats(void)
{
	if (verbose)
		fprintf(stderr, "rings: %lu inputs, %lu requests, %lu sessions\n",
			n_inputs, n_requests, n_sessions);
}

static void world_up(void)
{
	n_sessions++;
	static const uid_t uid = 1001;
	struct ucred cred = { .pid = getpid(), .uid = uid, .gid = uid };
	Ibvd__Empty e = IBVD__EMPTY__INIT;
	unsigned int i;
	int sv[2];

	memset(&w, 0, sizeof(w));
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	CHECK(fcntl(sv[0], F_SETFL, O_NONBLOCK) == 0);
	CHECK(ibvd_session_new(&daemon_state, sv[0], &cred, false, NULL) == 0);
	w.client = sv[1];
	open_context();
	w.pd = call_handle(IBVD_MSG_ALLOC_PD, &e.base);
	w.pd2 = call_handle(IBVD_MSG_ALLOC_PD, &e.base);
	reg_mr(0, w.pd, MR0_OFF, MR0_PAGES * PAGE, MR0_IOVA,
	       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
	       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
	       IBV_ACCESS_MW_BIND);
	reg_mr(1, w.pd, MR1_OFF, PAGE, MR1_IOVA, IBV_ACCESS_REMOTE_READ);
	reg_mr(2, w.pd2, MR0_OFF, MR0_PAGES * PAGE, MR2_IOVA,
	       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
	       IBV_ACCESS_REMOTE_READ);
	alloc_mws();
	for (i = 0; i < NCQS; i++)
		create_cq(&w.cq[i]);
	create_srq();
	for (i = 0; i < NQPS; i++)
		create_qp(i);
	give_staging(0);
	give_staging(2);
	w.srq_obj = w.qp[1]->srq;
	w.qpn[NQPS] = 0;
	w.qpn[NQPS + 1] = 0xffffff;
	for (i = 0; i < NQPS; i++)
		bring_up(i);
	w.up = true;
}

/* Closing the session tears down all it made, as for a client that dies. */
static void world_down(void)
{
	close(w.client);
	close(w.async_fd);
	munmap(w.page, IBVD_CTX_PAGE_SIZE);
	munmap(w.arena, IBVD_ARENA_BYTES);
	event_base_loop(daemon_state.base, EVLOOP_NONBLOCK);
	while (!TAILQ_EMPTY(&daemon_state.sessions))
		ibvd_session_close(TAILQ_FIRST(&daemon_state.sessions));
	event_base_loop(daemon_state.base, EVLOOP_NONBLOCK);
	CHECK(daemon_state.ncontexts == 0);
	w.up = false;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	signal(SIGPIPE, SIG_IGN);
	verbose = getenv("FUZZ_VERBOSE") != NULL;
	fuzz_daemon_setup(&daemon_state, config_text, false);
	world_up();
	return 0;
}

/* ---- between inputs ------------------------------------------------------ */

/* Headers the last input wrote (write_raw): bit h as write_raw numbers them */
static uint32_t raw_written;

/*
 * How far past its start each SQ's `direct_head` was written (write_raw):
 * the count of SENDs its library says it moved to a transit ring.  The
 * engine has to believe any count that agrees with the tail (a library
 * may move any number of them between two of its looks), so an SQ may
 * have come that far without running a single WQE.
 */
static uint32_t sq_claim_reach[NQPS];
static uint32_t sq_start[NQPS];

/*
 * Must QP i go through RESET?  Not if it is in RTS with nothing under way:
 * then emptying its queues as a client may (tail back to the engine's
 * head) leaves it as good as new, and saves four requests.
 */
static bool qp_needs_reset(unsigned int i)
{
	const struct ibvd_qp *qp = w.qp[i];
	uint32_t mine = 1u << i | 1u << (16 + i);

	if (!(i & 1))
		mine |= 1u << (NQPS + i / 2) | 1u << (16 + NQPS + i / 2);
	return (raw_written & mine) ||
	       __atomic_load_n(&qp->state, __ATOMIC_ACQUIRE) != IBV_QPS_RTS ||
	       qp->rnr_deadline_ns || qp->wqe_started || qp->awaiting;
}

static void empty_wq(struct wq *q, uint32_t head)
{
	memset(q->cli, 0, IBVD_RING_HDR);
	q->tail = head;
	__atomic_store_n(&q->cli->tail, head, __ATOMIC_RELEASE);
}

/*
 * A CQ that overran stays in error: a new session.  (An SRQ the engine
 * stopped is only a word in its engine header, which reset() clears as a
 * client with a writable mapping could.)
 */
static bool world_broken(void)
{
	return w.qp[0]->send_cq->overflowed || w.qp[0]->recv_cq->overflowed;
}

static void drain_async(void)
{
	struct ibvd_frame frame;

	while (ibvd_frame_recv(w.async_fd, reply_buf, sizeof(reply_buf), &frame,
			       MSG_DONTWAIT) > 0)
		ibvd_frame_close_fds(&frame);
}

/* Both CQs polled to the end, unarmed, their engine headers as they were */
static void empty_cqs(void)
{
	unsigned int i;

	for (i = 0; i < NCQS; i++) {
		struct ibvd_cq *cq = i ? w.qp[0]->recv_cq : w.qp[0]->send_cq;

		memset(w.cq[i].cli, 0, IBVD_RING_HDR);
		w.cq[i].cli->head = cq->tail;
		memset(w.cq[i].eng, 0, IBVD_RING_HDR);
		w.cq[i].eng->tail = cq->tail;
	}
}

static void reset(bool mws_used)
{
	struct ibvd_ctx_client *cp;
	struct wq *srq;
	unsigned int i;

	if (world_broken()) {
		world_down();
		world_up();
	} else {
		/* First, so that a RESET's purge of its QP's CQEs finds none */
		empty_cqs();
		for (i = 0; i < NQPS; i++) {
			if (qp_needs_reset(i)) {
				bring_up(i);
				continue;
			}
			empty_wq(&w.wq[i], w.qp[i]->sq_head);
			if (!(i & 1))
				empty_wq(&w.wq[NQPS + i / 2], w.qp[i]->rq_head);
		}
		if (mws_used) {
			dealloc_mws();
			alloc_mws();
		}
	}
	/* The SRQ: empty, from where the engine is, its headers as it left them */
	srq = &w.wq[NWQS - 1];
	empty_wq(srq, w.srq_obj->head);
	memset(srq->eng, 0, IBVD_RING_HDR);
	srq->eng->head = w.srq_obj->head;
	srq->eng->srq_limit = w.srq_obj->srq_limit;
	/* Again: a RESET aborts a message it held a receive for (an error CQE) */
	empty_cqs();
	raw_written = 0;
	cp = (struct ibvd_ctx_client *)(w.page + IBVD_PAGE_SIZE);
	memset(cp, 0, sizeof(*cp));
	memset(mem, GUARD_BYTE, sizeof(mem));
	memset(mem + MR0_OFF, FILL_BYTE, MR0_PAGES * PAGE);
	memset(mem + MR1_OFF, FILL_BYTE, PAGE);
	drain_async();
}

/* ---- the input ----------------------------------------------------------- */

static uint32_t key_of(uint32_t k)
{
	return k < 8 ? w.keys[k] : k;
}

/* Our names for keys and QP numbers (file comment) */
static void translate_send(uint8_t *slot, uint32_t len, bool *mws_used)
{
	struct ibvd_send_wqe h;
	uint32_t i, n;

	if (len < IBVD_SEND_WQE_HDR)
		return;
	memcpy(&h, slot, sizeof(h));
	h.rkey = key_of(h.rkey);
	h.mw_key = key_of(h.mw_key);
	h.mr_lkey = key_of(h.mr_lkey);
	if (h.remote_qpn < 8)
		h.remote_qpn = w.qpn[h.remote_qpn];
	if (h.opcode == IBV_WR_BIND_MW || h.opcode == IBV_WR_LOCAL_INV ||
	    h.opcode == IBV_WR_SEND_WITH_INV)
		*mws_used = true;
	if (h.opcode == IBV_WR_SEND_WITH_INV && h.imm_data < 8)
		h.imm_data = w.keys[h.imm_data];
	memcpy(slot, &h, sizeof(h));
	if (h.send_flags & IBV_SEND_INLINE)
		return;
	n = (len - IBVD_SEND_WQE_HDR) / sizeof(struct ibvd_sge);
	for (i = 0; i < n; i++) {
		struct ibvd_sge s;
		uint8_t *p = slot + IBVD_SEND_WQE_HDR + i * sizeof(s);

		memcpy(&s, p, sizeof(s));
		s.lkey = key_of(s.lkey);
		memcpy(p, &s, sizeof(s));
	}
}

static void translate_recv(uint8_t *slot, uint32_t len)
{
	uint32_t i, n;

	if (len < IBVD_RECV_WQE_HDR)
		return;
	n = (len - IBVD_RECV_WQE_HDR) / sizeof(struct ibvd_sge);
	for (i = 0; i < n; i++) {
		struct ibvd_sge s;
		uint8_t *p = slot + IBVD_RECV_WQE_HDR + i * sizeof(s);

		memcpy(&s, p, sizeof(s));
		s.lkey = key_of(s.lkey);
		memcpy(p, &s, sizeof(s));
	}
}

static void ring_bit(uint32_t bit)
{
	struct ibvd_ctx_client *cp =
		(struct ibvd_ctx_client *)(w.page + IBVD_PAGE_SIZE);
	uint32_t word = (bit / 64) % IBVD_DOORBELL_WORDS;

	cp->doorbell[word] |= 1ull << (bit % 64);
	cp->summary[word / 64] |= 1ull << (word % 64);
}

/* The next slot of q gets the bytes (zeroed past them), and is published. */
static uint8_t *post(struct wq *q, const uint8_t *b, uint32_t len)
{
	uint8_t *slot = q->slots + (size_t)(q->tail & (q->nslots - 1)) * q->stride;

	if (len > q->stride)
		len = q->stride;
	memset(slot, 0, q->stride);
	memcpy(slot, b, len);
	q->tail++;
	__atomic_store_n(&q->cli->tail, q->tail, __ATOMIC_RELEASE);
	return slot;
}

static void set_tail(struct wq *q, const uint8_t *b, uint32_t len)
{
	if (len >= 4)
		memcpy(&q->tail, b, 4);
	else if (len)
		q->tail += b[0];
	__atomic_store_n(&q->cli->tail, q->tail, __ATOMIC_RELEASE);
}

/*
 * A CQ's client header as a client polls and arms it: head moves back
 * from the engine's tail by v[0] (within the ring: a head past it, an
 * overrun, is a raw write, command 5, because an overrun costs a new
 * session), arm_seq and arm_flags as given.
 */
static void write_cq(unsigned int i, const uint8_t *b, uint32_t len)
{
	const struct ibvd_cq *cq = i ? w.qp[0]->recv_cq : w.qp[0]->send_cq;
	struct ibvd_cq_client *cli = w.cq[i].cli;
	uint32_t v[3];

	memset(v, 0, sizeof(v));
	memcpy(v, b, len < sizeof(v) ? len : sizeof(v));
	if (len >= 4)
		cli->head = cq->tail - (v[0] & (w.cq[i].nslots - 1));
	if (len >= 8)
		cli->arm_seq = v[1];
	if (len >= 12)
		cli->arm_flags = v[2];
}

static void note_sq_claim(unsigned int h)
{
	uint32_t reach = w.wq[h].cli->direct_head - sq_start[h];

	if (reach > sq_claim_reach[h])
		sq_claim_reach[h] = reach;
}

/* Header h: the client headers of the 10 WQs and 2 CQs, then the engines' */
static void write_raw(uint8_t h, const uint8_t *b, uint32_t len)
{
	bool engine = h & 16;
	uint8_t *hdr;
	uint32_t off;

	h &= 15;
	if (h < NWQS)
		hdr = engine ? (uint8_t *)w.wq[h].eng : (uint8_t *)w.wq[h].cli;
	else if (h < NWQS + NCQS)
		hdr = engine ? (uint8_t *)w.cq[h - NWQS].eng :
			       (uint8_t *)w.cq[h - NWQS].cli;
	else
		return;
	if (!len)
		return;
	raw_written |= 1u << (h | (engine ? 16 : 0));
	off = b[0] % IBVD_RING_HDR;
	b++;
	len--;
	if (len > IBVD_RING_HDR - off)
		len = IBVD_RING_HDR - off;
	memcpy(hdr + off, b, len);
	if (!engine && h < NQPS)
		note_sq_claim(h);
}

static void run_record(uint8_t cmd, uint8_t target, const uint8_t *b,
		       uint32_t len, bool *mws_used)
{
	static const unsigned int rqs[4] = { NQPS, NQPS + 1, NQPS + 2, NWQS - 1 };
	uint16_t bit;
	uint8_t *slot;

	switch (cmd % 7) {
	case 0:
		slot = post(&w.wq[target % NQPS], b, len);
		translate_send(slot, len, mws_used);
		ring_bit(w.doorbell[target % NQPS]);
		break;
	case 1:
		slot = post(&w.wq[rqs[target % 4]], b, len);
		translate_recv(slot, len);
		break;
	case 2:
		set_tail(&w.wq[target % NWQS], b, len);
		break;
	case 3:
		bit = 0;
		memcpy(&bit, b, len < 2 ? len : 2);
		ring_bit(bit);
		break;
	case 4:
		write_cq(target % NCQS, b, len);
		break;
	case 5:
		write_raw(target % 32, b, len);
		break;
	case 6:
		ibvd_engine_run_passes(MAX_PASSES);
		break;
	}
}

/* ---- after it ------------------------------------------------------------ */

static void check_guards(void)
{
	static const size_t guards[3] = { 0, MR0_OFF + MR0_PAGES * PAGE,
					  MR1_OFF + PAGE };
	static uint8_t guard[PAGE];
	unsigned int i;

	if (!guard[0])
		memset(guard, GUARD_BYTE, sizeof(guard));
	for (i = 0; i < 3; i++)
		if (memcmp(mem + guards[i], guard, PAGE) != 0) {
			fprintf(stderr, "rings: guard page %u written\n", i);
			abort();
		}
}

/*
 * A queue's head moved by no more than the input could make available (a
 * post makes one WQE, a tail at most a ringful, a library's count of moved
 * SENDs what it says), and its engine header says what the engine holds
 * privately, unless the input wrote it.
 */
static void check_queue(const char *name, unsigned int h, uint32_t head,
			uint32_t start, unsigned int records, uint32_t claimed)
{
	const struct wq *q = &w.wq[h];

	if (head - start > claimed + (uint64_t)(records + 1) * q->nslots) {
		fprintf(stderr, "rings: %s %u consumed %u WQEs of %u records\n",
			name, h, head - start, records);
		abort();
	}
	if (!(raw_written & 1u << (16 + h)) &&
	    __atomic_load_n(&q->eng->head, __ATOMIC_ACQUIRE) != head) {
		fprintf(stderr, "rings: %s %u engine head %u, private %u\n",
			name, h, q->eng->head, head);
		abort();
	}
}

static bool is_our_qpn(uint32_t qpn)
{
	unsigned int i;

	for (i = 0; i < NQPS; i++)
		if (w.qpn[i] == qpn)
			return true;
	return false;
}

static void check_cq(unsigned int i, uint32_t from)
{
	struct ibvd_cq *cq = i ? w.qp[0]->recv_cq : w.qp[0]->send_cq;
	uint32_t c;

	if (cq->tail - from > w.cq[i].nslots)
		from = cq->tail - w.cq[i].nslots;
	for (c = from; c != cq->tail; c++) {
		const struct ibvd_cqe *e = &w.cq[i].slots[c & (w.cq[i].nslots - 1)];

		if (verbose)
			fprintf(stderr, "rings: CQ %u: qp %u wr_id %#llx status %u "
				"opcode %u byte_len %u\n", i, e->qp_num,
				(unsigned long long)e->wr_id, e->status,
				e->opcode, e->byte_len);
		if (e->seq != c + 1 || !is_our_qpn(e->qp_num) ||
		    e->status > IBV_WC_TM_RNDV_INCOMPLETE) {
			fprintf(stderr, "rings: CQ %u entry %u: seq %u qp %u status %u\n",
				i, c, e->seq, e->qp_num, e->status);
			abort();
		}
	}
}

/* Where the queues and CQs were when the input began */
struct start {
	uint32_t sq[NQPS], rq[NQPS], srq, cq[NCQS];
};

static void note_start(struct start *st)
{
	unsigned int i;

	for (i = 0; i < NQPS; i++) {
		st->sq[i] = w.qp[i]->sq_head;
		st->rq[i] = w.qp[i]->rq_head;
		sq_start[i] = st->sq[i];
		sq_claim_reach[i] = 0;
	}
	st->srq = w.srq_obj->head;
	st->cq[0] = w.qp[0]->send_cq->tail;
	st->cq[1] = w.qp[0]->recv_cq->tail;
}

static void check_world(const struct start *st, unsigned int records)
{
	unsigned int i;

	check_guards();
	for (i = 0; i < NQPS; i++) {
		check_queue("SQ", i, w.qp[i]->sq_head, st->sq[i], records,
			    sq_claim_reach[i]);
		if (!(i & 1))
			check_queue("RQ", NQPS + i / 2, w.qp[i]->rq_head,
				    st->rq[i], records, 0);
	}
	check_queue("SRQ", NWQS - 1, w.srq_obj->head, st->srq, records, 0);
	for (i = 0; i < NCQS; i++)
		check_cq(i, st->cq[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool mws_used;
	struct start st;
	size_t off = 0;
	unsigned int records = 0;

	n_inputs++;
	reset(mws_used);
	mws_used = false;
	note_start(&st);
	while (off + 3 <= size && records++ < MAX_RECORDS) {
		uint32_t len = data[off + 2];

		if (len > size - off - 3)
			len = (uint32_t)(size - off - 3);
		run_record(data[off], data[off + 1], data + off + 3, len,
			   &mws_used);
		off += 3 + len;
	}
	/* What the client rang is run to the end */
	ibvd_engine_run_passes(MAX_PASSES);
	check_world(&st, records);
	drain_async();
	return 0;
}
