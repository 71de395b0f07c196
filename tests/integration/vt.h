/*
 * vt: small helpers for the data-path test programs (datapath.c, peers.c,
 * nosyscall.c, stress.c, hostile.c).  They are ordinary verbs applications:
 * built against the system <infiniband/verbs.h> and -libverbs, run through
 * ibverbsd-run so that they load our library.
 *
 * Every vt_* helper that can fail reports through vt_fail(), which prints
 * "FILE:LINE: message" and exits 1, unless a Check program installed its
 * own hook (vt_fail_hook) that turns the failure into a Check failure.
 */
#ifndef IBVD_TESTS_VT_H
#define IBVD_TESTS_VT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#define VT_ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

/* ---- failing ----------------------------------------------------------- */

extern void (*vt_fail_hook)(const char *msg);

void vt_fail_at(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));

#define vt_fail(...)	vt_fail_at(__FILE__, __LINE__, __VA_ARGS__)
#define vt_assert(cond, ...) \
	do { if (!(cond)) vt_fail_at(__FILE__, __LINE__, __VA_ARGS__); } while (0)

/* ---- time ----------------------------------------------------------------- */

/* Timeouts scale with VT_TMUL (the scripts pass TMUL: 3 in sanitizer builds). */
int vt_tmul(void);
/* The bound for anything that must happen: 10 s (times VT_TMUL). */
int vt_tmo_ms(void);
long vt_now_ms(void);
uint64_t vt_now_ns(void);
void vt_sleep_ms(long ms);

/* ---- data patterns ------------------------------------------------------ */

/* Byte `off` (an absolute offset in a region) of pattern `seed`. */
static inline uint8_t vt_pat(uint64_t off, uint32_t seed)
{
	uint64_t x = off * 0x9e3779b97f4a7c15ull + seed * 0xbf58476d1ce4e5b9ull;

	x ^= x >> 29;
	return (uint8_t)(x ^ (x >> 8) ^ seed);
}

void vt_fill(void *buf, size_t len, uint64_t base_off, uint32_t seed);
/* Index of the first byte that differs from the pattern, or -1. */
long vt_check(const void *buf, size_t len, uint64_t base_off, uint32_t seed);
/* vt_check, failing with a message naming what and the byte. */
void vt_expect_pat(const void *buf, size_t len, uint64_t base_off,
		   uint32_t seed, const char *what);
void vt_expect_byte(const void *buf, size_t len, uint8_t c, const char *what);

/* ---- devices ------------------------------------------------------------ */

struct vt_dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_device_attr attr;
	struct ibv_port_attr port;
	uint8_t port_num;
	union ibv_gid gid;		/* GID[gid_index] of the port */
	uint8_t gid_index;		/* $VT_GID_INDEX, default 0 */
	bool roce;			/* an Ethernet port: GRHs, no LIDs */
};

/*
 * Open the first device (or $VT_DEVICE), port 1, with one PD.  On a RoCE
 * device, connections are routed by GID ($VT_GID_INDEX: 1 is the IPv4
 * one of a veth's address).
 */
void vt_open(struct vt_dev *d);
void vt_close(struct vt_dev *d);

/* ---- memory --------------------------------------------------------------- */

#define VT_ACCESS_ALL	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/* A page-aligned, zeroed buffer of len bytes registered with access. */
struct ibv_mr *vt_reg(struct ibv_pd *pd, size_t len, int access);
/* Deregister and free a vt_reg() buffer. */
void vt_dereg(struct ibv_mr *mr);

/* ---- queue pairs ------------------------------------------------------ */

struct vt_qp_opts {
	enum ibv_qp_type type;		/* default (0): IBV_QPT_RC */
	uint32_t max_send_wr;		/* defaults: 64 64 4 4 0 */
	uint32_t max_recv_wr;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline;
	int sq_sig_all;
	struct ibv_srq *srq;
	/* modify_qp attributes */
	unsigned int access;		/* qp_access_flags; default all remote */
	int no_access;			/* use access = 0 */
	/* 0 means the default; VT_ZERO sets a real 0 */
	int min_rnr_timer;		/* default 1 (0.01 ms) */
	int rnr_retry;			/* default 7 (infinite) */
	int retry_cnt;			/* default 3 */
	int timeout;			/* default 12 (16.8 ms) */
	enum ibv_mtu mtu;		/* default IBV_MTU_4096 */
	int rd_atomic;			/* default 4 */
	uint32_t qkey;			/* UD; default VT_QKEY */
	uint32_t psn;			/* our send PSN */
};

#define VT_QKEY		0x11111111u
#define VT_ZERO		(-1)

/* Where a QP is: what the pingpongs exchange. */
struct vt_addr {
	uint16_t lid;
	uint32_t qpn;
	uint32_t psn;
	union ibv_gid gid;
};

struct ibv_qp *vt_qp(struct vt_dev *d, struct ibv_cq *scq, struct ibv_cq *rcq,
		     const struct vt_qp_opts *o);
/* RESET -> INIT -> RTR -> RTS, towards remote (RC/UC); UD ignores remote. */
void vt_connect(struct vt_dev *d, struct ibv_qp *qp, const struct vt_addr *remote,
		const struct vt_qp_opts *o);
void vt_qp_addr(struct vt_dev *d, struct ibv_qp *qp, const struct vt_qp_opts *o,
		struct vt_addr *a);
int vt_qp_state(struct ibv_qp *qp);

/* Two QPs of one process connected to each other. */
struct vt_pair {
	struct vt_dev *d;
	struct vt_qp_opts o[2];
	struct ibv_cq *scq[2], *rcq[2];
	struct ibv_qp *qp[2];
};

/* opts: both sides (NULL: defaults); ncqe: size of each of the 4 CQs. */
void vt_pair(struct vt_pair *p, struct vt_dev *d, const struct vt_qp_opts *opts,
	     int ncqe);
/* The same with different options per side. */
void vt_pair2(struct vt_pair *p, struct vt_dev *d, const struct vt_qp_opts *o0,
	      const struct vt_qp_opts *o1, int ncqe);
void vt_pair_free(struct vt_pair *p);

/* ---- posting and polling ------------------------------------------------ */

/*
 * One-SGE send WR (len 0: no SGE). Returns ibv_post_send's value.  rkey
 * is the key to invalidate for SEND_WITH_INV, the target's otherwise.
 */
int vt_post(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op,
	    unsigned int flags, const void *addr, uint32_t len, uint32_t lkey,
	    uint64_t raddr, uint32_t rkey);
/* The same, failing unless it returns 0. */
void vt_send(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op,
	     unsigned int flags, const void *addr, uint32_t len, uint32_t lkey,
	     uint64_t raddr, uint32_t rkey);
void vt_atomic(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op,
	       void *result, uint32_t lkey, uint64_t raddr, uint32_t rkey,
	       uint64_t compare_add, uint64_t swap);
void vt_ud_send(struct ibv_qp *qp, uint64_t wr_id, struct ibv_ah *ah,
		uint32_t rqpn, uint32_t qkey, const void *addr, uint32_t len,
		uint32_t lkey, unsigned int flags);
void vt_recv(struct ibv_qp *qp, uint64_t wr_id, void *addr, uint32_t len,
	     uint32_t lkey);
void vt_srq_recv(struct ibv_srq *srq, uint64_t wr_id, void *addr, uint32_t len,
		 uint32_t lkey);

/* Poll until n completions arrived or ms passed; returns how many. */
int vt_poll(struct ibv_cq *cq, struct ibv_wc *wc, int n, int ms);
/* Exactly one completion (within vt_tmo_ms) with this wr_id and status. */
void vt_expect_wc(struct ibv_cq *cq, struct ibv_wc *wc, uint64_t wr_id,
		  enum ibv_wc_status status, const char *what);
/* The same, also checking the opcode (successful completions only). */
void vt_expect_ok(struct ibv_cq *cq, struct ibv_wc *wc, uint64_t wr_id,
		  enum ibv_wc_opcode opcode, const char *what);
/*
 * Two successful completions on one CQ in either order (a SEND's and its
 * receive's: the spec orders neither); got[0] is id_a's, got[1] id_b's.
 */
void vt_expect_ok_two(struct ibv_cq *cq, struct ibv_wc got[2],
		      uint64_t id_a, enum ibv_wc_opcode op_a,
		      uint64_t id_b, enum ibv_wc_opcode op_b, const char *what);
/* No completion at all within ms. */
void vt_expect_none(struct ibv_cq *cq, int ms, const char *what);

const char *vt_status(int status);
/* The port's qkey_viol_cntr. */
uint32_t vt_qkey_viol(struct ibv_context *ctx, uint8_t port);
/* Wait (up to vt_tmo_ms) until it is want; fail if it is not then. */
void vt_expect_qkey_viol(struct ibv_context *ctx, uint8_t port, uint32_t want);

/* ---- async events ------------------------------------------------------- */

/* Wait up to ms for one async event; 1 with *ev filled (acked), 0 if none. */
int vt_async(struct ibv_context *ctx, struct ibv_async_event *ev, int ms);
const char *vt_event_name(int type);

/* ---- files (two-process tests) --------------------------------------- */

/* Write text to DIR/NAME atomically (tmp file + rename), world-readable. */
void vt_put(const char *dir, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Wait (up to ms) until DIR/NAME exists; read it into buf. 0 on timeout. */
int vt_get(const char *dir, const char *name, char *buf, size_t len, int ms);
int vt_exists(const char *dir, const char *name);

/* The text form of a vt_addr ("lid qpn psn gid-hex") and back. */
void vt_addr_str(const struct vt_addr *a, char *buf, size_t len);
int vt_addr_parse(const char *s, struct vt_addr *a);

/* ---- added with datapath.c and peers.c ---------------------------------- */

/*
 * Two QPs connected to each other like vt_pair2, each using cq0/cq1 for
 * both its send and receive completions.  The CQs stay the caller's:
 * p->scq and p->rcq are NULL, so vt_pair_free destroys only the QPs.
 */
void vt_pair_on(struct vt_pair *p, struct vt_dev *d, const struct vt_qp_opts *o0,
		const struct vt_qp_opts *o1, struct ibv_cq *cq0, struct ibv_cq *cq1);

/*
 * How many transit ring mappings (the direct transport's, "ibvd-transit"
 * in /proc/self/maps) this process has: its connected local RC pairs.
 */
int vt_transit_maps(void);
/*
 * Mappings of memfds named `name` in this process; *writable (if not
 * NULL): how many of them are writable, *first (if not NULL): where the
 * first starts.
 */
int vt_memfd_maps(const char *name, int *writable, void **first);

/* An MR on len bytes of a new memfd `name`, mapped shared (the daemon and
 * a peer's library may map it too); vt_dereg_memfd unmaps it. */
struct ibv_mr *vt_reg_memfd(struct ibv_pd *pd, size_t len, int access,
			    const char *name);
void vt_dereg_memfd(struct ibv_mr *mr);

/* An address handle on d's port: LID-only if dgid is NULL, else global
 * (sgid_index 0, hop_limit 64); dlid may be 0 with a dgid. */
struct ibv_ah *vt_ah(struct vt_dev *d, uint16_t dlid, const union ibv_gid *dgid);
void vt_ah_free(struct ibv_ah *ah);

/* Post a send WR with an SGE list (n may be 0). Returns ibv_post_send's
 * value; bad_wr must be the WR when it fails. */
int vt_post_sgl(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op,
		unsigned int flags, struct ibv_sge *sge, int n, uint64_t raddr,
		uint32_t rkey);
/* Post a receive WR with an SGE list, failing unless it returns 0. */
void vt_recv_sgl(struct ibv_qp *qp, uint64_t wr_id, struct ibv_sge *sge, int n);

/* The QP's state (ibv_query_qp) must be state. */
void vt_expect_state(struct ibv_qp *qp, enum ibv_qp_state state, const char *what);

/*
 * Wait up to ms for an async event of this type about obj (the element's
 * CQ, QP, SRQ or WQ pointer; NULL: any).  Other events are printed to
 * stderr and skipped.  1 when it came (acked), 0 otherwise.
 */
int vt_async_wait(struct ibv_context *ctx, enum ibv_event_type type,
		  const void *obj, int ms);
/* The same, failing unless it comes within vt_tmo_ms. */
void vt_expect_async(struct ibv_context *ctx, enum ibv_event_type type,
		     const void *obj, const char *what);
/* No async event at all within ms. */
void vt_expect_no_async(struct ibv_context *ctx, int ms, const char *what);

#endif /* IBVD_TESTS_VT_H */
