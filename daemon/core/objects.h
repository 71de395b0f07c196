/*
 * The verbs objects a device context owns (PD, MR, completion channel, CQ,
 * QP, SRQ, AH), as the control thread and the engine threads both see them.
 *
 * Who writes what:
 * - The control thread creates, modifies and destroys objects (pd.c, mr.c,
 *   cq.c, qp.c, srq.c, ah.c, mcast.c).  It does so holding
 *   ibvd_objects_lock for writing whenever it touches anything an engine
 *   thread may read: object lifetime, the registries below, QP state and
 *   attributes, device LIDs on reload.
 * - Engine threads (engine/) hold ibvd_objects_lock for reading during a
 *   work pass (bounded, so the control thread never waits long), and
 *   never free or create objects.  Within a pass they write only:
 *     - fields marked "engine" below, of QPs their own thread serves;
 *     - the shared rings (ring.h), and the locked fields of CQs, SRQs and
 *       receive queues, under that object's own lock, because a SEND from
 *       a QP on one engine thread lands on a QP served by another.
 * - Nothing here is ever read from shared memory: geometry and counters the
 *   engine relies on are private copies (ring.h).
 *
 * Lifetime: an object's handle (handle.h) is its only name on the wire; a
 * context's objects die with it (context.c), children before parents.
 *
 * Layer core/ (daemon/README.md), the bottom of the daemon: the object
 * model (this file), its registries (registry.c), handle tables
 * (handle.h), devices and ports (device.h), tenants' token buckets
 * (rate.h).  It calls nothing else in daemon/, only common/.
 */
#ifndef IBVD_OBJECTS_H
#define IBVD_OBJECTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include <infiniband/verbs.h>

#include "handle.h"
#include "keyed.h"
#include "random.h"
#include "ring.h"
#include "transit.h"

struct ibvd_context;
struct ibvd_device;
struct ibvd_ectx;
struct ibvd_engine;
struct ibvd_mcast_group;
struct ibvd_session;
struct ibvd_memlock;
struct ibvd_tenant;
struct ibvd_tenant_dev;

/* Held for reading by engine passes, for writing by control-path changes. */
extern pthread_rwlock_t ibvd_objects_lock;

void ibvd_objects_write_lock(void);
void ibvd_objects_write_unlock(void);

/* ---- client memory --------------------------------------------------- */

/*
 * A client's address space, reached through the /proc/self/mem fd the
 * client attached (ATTACH_MEMORY): bound to that process's mm, so PID
 * reuse cannot redirect it, and usable while the client is stopped.
 * Shared by the context and its MRs; the last reference closes the fd.
 */
struct ibvd_mem {
	int fd;				/* /proc/PID/mem, read-write */
	int maps_fd;			/* /proc/PID/maps (control thread) */
	pid_t pid;
	unsigned int refs;		/* atomic */
	/* control thread only (mem.c): */
	unsigned long long start_time;	/* /proc/PID/stat: detects PID reuse */
	struct ibvd_memlock *memlock;	/* the process's RLIMIT_MEMLOCK account */
	struct ibvd_tenant_dev *account; /* its uid's memlock quota on the
					 * context's device (tenant.h); the
					 * session outlives its memory */
};

/* ---- protection domains and memory regions ---------------------------- */

struct ibvd_pd {
	struct ibvd_context *ctx;
	uint32_t handle;
	unsigned int users;		/* MRs, QPs, SRQs, AHs: dealloc is EBUSY */
};

/* How the engine reaches an MR's bytes (DESIGN §3.5). */
enum ibvd_mr_tier {
	IBVD_MR_TIER_MAPPED = 1,	/* shareable fd mapped into the daemon */
	IBVD_MR_TIER_MEMFD,		/* the client's /proc/self/mem fd */
};

/*
 * Keys: lkey == rkey, one random 32-bit value (never 0) unique in the
 * daemon, so one registry answers both lookups.  Knowing an MR's lkey gives
 * nothing beyond its rkey: both work only through a QP of the MR's PD, and
 * remote use is checked against `access`.
 */
struct ibvd_mr {
	struct ibvd_context *ctx;
	struct ibvd_pd *pd;
	uint32_t handle;
	uint32_t lkey;
	uint32_t rkey;			/* random, unique daemon-wide */
	uint32_t access;		/* enum ibv_access_flags */
	uint64_t addr;			/* in the client's address space */
	uint64_t length;
	uint64_t iova;			/* what remote peers address */
	uint64_t pinned;		/* bytes charged to the client */
	enum ibvd_mr_tier tier;
	struct ibvd_mem *mem;		/* holds a reference */
	/*
	 * IBVD_MR_TIER_MAPPED: the MR's own MAP_SHARED mapping of the file
	 * behind the client's range (verbs/mr/map.c), made at registration
	 * and unmapped by dereg or rereg under the write lock, so an engine
	 * pass (read lock) never sees it go.  The byte at addr is at
	 * map_base.  A truncated file makes its missing pages SIGBUS: the
	 * engine copies under a recovery point (engine/memory.c).
	 */
	void *map;
	size_t map_len;
	uint8_t *map_base;
	bool map_writable;
	struct ibvd_tenant *map_counted;	/* whose mapped MRs count it */
	/*
	 * One-sided direct access (common/lease.h): the file and where map
	 * starts in it, kept while the MR allows remote access (map_fd_kept),
	 * and whether a peer's library was ever granted it, so that dereg
	 * and rereg revoke first.
	 */
	uint64_t map_file_offset;
	int map_fd;
	bool map_fd_kept;
	/* the uid of the process that passed map_fd: only it is granted it */
	uid_t map_fd_uid;
	bool granted;
	/* windows bound to it (atomic: engine threads bind and invalidate
	 * under the read lock); DEREG_MR and REREG_MR are EBUSY meanwhile */
	unsigned int mw_binds;
	struct ibvd_keyed key_node;	/* in the key registry */
};

/*
 * A memory window: remote access to part of an MR, granted and revoked on
 * the data path (engine/mw.c: BIND_MW, LOCAL_INV, SEND_WITH_INV).  Its key
 * is index << 8 | key byte: the index is unique daemon-wide, shared with no
 * MR key, and fixed for the window's life, so it names the window in WQEs;
 * the byte changes with each bind, so old keys stop working.
 *
 * The control thread creates and frees windows under the write lock.
 * Engine threads change the binding under `lock` while holding the objects
 * lock for reading: a type-2 window may be invalidated by a SEND on
 * another thread while its owner's thread binds or reads it.  The bound MR
 * cannot go away: it stays registered while mw_binds counts the window.
 */
struct ibvd_mw {
	struct ibvd_context *ctx;
	struct ibvd_pd *pd;
	uint32_t handle;
	uint32_t type;			/* IBV_MW_TYPE_1 or _2 */
	struct ibvd_keyed key_node;	/* in the window registry */
	pthread_mutex_t lock;
	uint32_t rkey;			/* lock: the current key */
	struct ibvd_mr *mr;		/* lock: NULL when unbound */
	uint32_t access;		/* lock: IBV_ACCESS_REMOTE_* */
	uint64_t addr;			/* lock: in the MR's iova space */
	uint64_t length;		/* lock */
	uint32_t qp_num;		/* lock: type 2, the QP bound through */
	/* lock: type 2, addressed by offset from addr (IBV_ACCESS_ZERO_BASED) */
	bool zero_based;
};

/* ---- rings as the daemon keeps them ----------------------------------- */

/* One shared queue (ring.h) and the engine's private view of it. */
struct ibvd_arena;

/*
 * One shared queue (ring.h) and the engine's private view of it: three
 * blocks of a context's ring arena (verbs/rings/arena.h).  arena is NULL when
 * the queue does not exist (a QP on an SRQ has no RQ).
 */
struct ibvd_ring {
	struct ibvd_arena *arena;	/* the one it was carved from */
	uint64_t engine_off;		/* the blocks' offsets in it */
	uint64_t client_off;
	uint64_t slots_off;
	uint32_t nslots;		/* power of two */
	uint32_t stride;		/* bytes per slot, power of two */
	void *engine_page;		/* struct ibvd_{wq,cq}_engine header */
	void *client_page;		/* struct ibvd_{wq,cq}_client: untrusted */
	uint8_t *slots;
};

/* ---- completion channels and CQs --------------------------------------- */

struct ibvd_comp_channel {
	struct ibvd_context *ctx;
	uint32_t handle;
	int sock;			/* our end: CompEvent datagrams go here */
	int poke[2];			/* the wake-up pair, once made (-1);
					 * [0] only until its owner took it */
	unsigned int users;		/* CQs using it: destroy is EBUSY */
	unsigned int most_users;	/* the most at once: its buffer's size */
};

struct ibvd_cq {
	struct ibvd_context *ctx;
	uint32_t handle;
	uint32_t cqe;			/* usable entries, as reported */
	struct ibvd_comp_channel *channel;	/* NULL: no events */
	unsigned int users;		/* QPs using it: destroy is EBUSY */
	struct ibvd_ring ring;
	pthread_mutex_t lock;		/* CQE production from any engine thread */
	uint32_t tail;			/* locked: CQEs written (private copy;
					 * stored with release, for cq.c's
					 * precopy, which reads it unlocked) */
	bool overflowed;		/* locked */
};

/* ---- XRC domains ------------------------------------------------------ */

/*
 * An XRC domain (verbs/xrcd.c): groups XRC SRQs and XRC target QPs so that
 * a target QP may deliver into any SRQ of its domain.  A shared domain is
 * named by a file, (st_dev, st_ino) of an fd the client passed, on one
 * device; a private one by nothing.  Contexts hold it through handles of
 * kind IBVD_OBJ_XRCD (opens); its SRQs and target QPs use it (users).  It
 * is freed when both counts reach 0, so a target QP may outlive every
 * context that opened the domain only if another context holds the QP,
 * which needs the domain open.  Control thread only; the engine compares
 * pointers.
 */
struct ibvd_xrcd {
	struct ibvd_device *dev;
	bool shared;
	dev_t st_dev;
	ino_t st_ino;
	int pin_fd;			/* shared: an O_PATH fd of its file, -1 */
	struct ibvd_tenant *pin_payer;	/* shared: the uid that made it */
	uint32_t id;			/* daemon-wide, for logs and ibvctl */
	unsigned int opens;		/* handles in contexts */
	unsigned int users;		/* XRC SRQs and target QPs */
	LIST_HEAD(, ibvd_qp) tgts;	/* its target QPs, via xrc.link */
	struct ibvd_keyed node;		/* in the shared-domain registry */
};

/* ---- shared receive queues ------------------------------------------- */

struct ibvd_srq {
	struct ibvd_context *ctx;
	struct ibvd_pd *pd;
	uint32_t handle;
	uint32_t srq_num;		/* XRC: unique daemon-wide, else 0 */
	uint32_t srq_type;		/* enum ibv_srq_type */
	struct ibvd_xrcd *xrcd;		/* XRC only */
	struct ibvd_cq *cq;		/* XRC only: its receive completions */
	struct ibvd_keyed srqn_node;	/* XRC: in the SRQ-number registry */
	uint32_t max_wr;
	uint32_t max_sge;
	unsigned int users;		/* QPs attached */
	struct ibvd_ring ring;
	pthread_mutex_t lock;		/* WQE consumption from any engine thread */
	uint32_t head;			/* locked: WQEs taken (private copy) */
	uint32_t srq_limit;		/* locked: 0 = disarmed */
	/*
	 * Atomic: an engine thread holds the claim word.  The word is the
	 * client's to write too, so it alone cannot say so: one it set to
	 * ENGINE would have every delivery spin (direct.c).
	 */
	bool engine_claimed;
	bool ud_claim_held_out;		/* atomic: as a QP's (recv.c) */
};

/* ---- address handles ------------------------------------------------- */

/* Device memory: the memfd every process of the context maps. */
struct ibvd_dm {
	struct ibvd_context *ctx;
	uint32_t handle;
	int fd;
	uint64_t length;		/* as asked for */
};

struct ibvd_ah {
	struct ibvd_context *ctx;
	struct ibvd_pd *pd;
	uint32_t handle;
	struct ibvd_av av;
	/* the RoCE GID slot it holds (struct ibvd_gid_hold), or NULL */
	struct ibvd_gid_hold *gid_hold;
};

/* ---- queue pairs ----------------------------------------------------- */

/* The attributes ibv_modify_qp sets, as the engine uses them. */
struct ibvd_qp_attr {
	uint8_t port_num;
	uint16_t pkey_index;
	uint32_t qkey;
	uint32_t dest_qp_num;
	uint32_t access;		/* qp_access_flags */
	uint32_t path_mtu;		/* enum ibv_mtu */
	uint32_t rq_psn;
	uint32_t sq_psn;
	struct ibvd_av av;		/* primary path: dlid/dgid of the peer */
	uint8_t min_rnr_timer;
	uint8_t rnr_retry;		/* 7 = infinite */
	uint8_t retry_cnt;
	uint8_t timeout;
	uint8_t max_rd_atomic;
	uint8_t max_dest_rd_atomic;
	uint8_t en_sqd_async_notify;
};

/* A context's handle on an XRC target QP (creator or ibv_open_qp). */
struct ibvd_xrc_hold {
	struct ibvd_context *ctx;
	uint32_t handle;
	LIST_ENTRY(ibvd_xrc_hold) link;
	struct ibvd_keyed node;		/* in the QP's index, by handle */
};

/*
 * XRC QPs.  An initiator (XRC_SEND) is an RC requester without a receive
 * side: pd and send_cq, recv_cq and srq NULL; each send names the SRQ it
 * lands in (the WQE's xrc_srqn).  A target (XRC_RECV) belongs to its
 * domain, not to a context: it has no PD, CQs or SRQ of its own and its
 * owner `ctx` is only the context whose engine thread serves it (a one-slot
 * SQ that nothing posts to, so it flushes like any QP) and gets its events.
 * Every context holding a handle on it is in `holds`; when the owner lets
 * go, another holder's context becomes the owner, and the QP dies with
 * the last hold.
 *
 * A target's pd, recv_cq and srq are those of the SRQ the message in
 * progress named: set by the engine thread delivering to it (only the
 * requester connected to it sends, so only that thread) under the objects
 * lock held for reading, cleared by the control thread under the write
 * lock when that SRQ goes.  The control thread never reads them otherwise.
 */
struct ibvd_qp_xrc {
	struct ibvd_xrcd *xrcd;		/* XRC_RECV */
	LIST_HEAD(, ibvd_xrc_hold) holds;
	/*
	 * The same holds by handle: a context may open one target any
	 * number of times, and releasing a hold must not walk them all.
	 */
	struct ibvd_keyed_table hold_index;
	LIST_ENTRY(ibvd_qp) link;	/* in xrcd->tgts */
};

/*
 * Two local RC (or UC) QPs connected to each other share transit rings
 * (the direct transport, common/transit.h): made by verbs/direct.c, held
 * by both QPs, freed when the second one lets go.  Changed only under
 * the objects lock held for writing.
 */
struct ibvd_direct {
	int fd;				/* the sealed memfd both libraries map,
					 * -1 once both have it */
	unsigned int fetched;		/* bit i: side i took the fd */
	void *map;			/* the daemon's mapping of all of it,
					 * NULL until a library asks for it */
	size_t map_len;
	void *ctl;			/* the rings' and leases' block: map,
					 * or a zeroed one of the daemon's */
	uint32_t ncells;
	uint32_t gen;			/* never 0; QP_DIRECT names it */
	struct ibvd_transit ring[2];	/* ring[i]: from qp[i] to qp[!i] */
	struct ibvd_qp *qp[2];		/* NULL once that side let go */
	/* side i's library held its lease past a revocation's wait: it
	 * gets no more grants, and is not waited for again (lease.c) */
	bool lease_broken[2];
	/* side i's library got a grant since its lease was last revoked:
	 * without one it copies nothing, and a revocation does not wait */
	bool granted[2];
	/* side i's grants are voided and its copies not yet waited for */
	bool revoking[2];
	/* the uid of the library side i's last grant went to */
	uid_t grantee_uid[2];
	/* UD: a ring held garbage, which either side may have written; its
	 * datagrams go through the engine from then on (atomic) */
	bool ud_broken;
	struct ibvd_tenant *payer;	/* whose pairs count it (a reference) */
	LIST_ENTRY(ibvd_direct) link;	/* among the pairs alive */
};

struct ibvd_qp {
	struct ibvd_context *ctx;
	struct ibvd_pd *pd;
	struct ibvd_cq *send_cq;
	struct ibvd_cq *recv_cq;
	struct ibvd_srq *srq;		/* NULL: the QP has its own RQ */
	struct ibvd_qp_xrc xrc;		/* XRC_RECV only */
	uint32_t handle;
	uint32_t qp_num;		/* unique daemon-wide, never 0 or 1 */
	uint32_t qp_type;		/* enum ibv_qp_type */
	uint32_t state;			/* enum ibv_qp_state */
	bool sq_sig_all;
	bool block_self_mcast;		/* IBV_QP_CREATE_BLOCK_SELF_MCAST_LB */
	struct ibv_qp_cap cap;		/* as granted at create */
	struct ibvd_qp_attr attr;
	uint32_t doorbell;		/* bit in the context's doorbells */
	/*
	 * engine (atomic, its own thread's binds): non-zero once a type-2
	 * window was bound through this QP, so that a QP that never bound
	 * one is destroyed without a look at the context's windows
	 */
	uint32_t mw2_bound;
	/*
	 * The counters of the CQEs pushed for it since its last purge,
	 * [lo, hi) of cq, in its send CQ ([0]) and its receive CQ ([1],
	 * when another; an XRC target's changes with the SRQ a message
	 * names): a purge walks those, not all the client's head says
	 * (engine/completion.c; under that CQ's lock)
	 */
	struct ibvd_cqe_span {
		const struct ibvd_cq *cq;	/* NULL: none since */
		uint32_t lo, hi;
	} cqe_span[2];

	struct ibvd_ring sq;
	struct ibvd_ring rq;		/* unused with an SRQ */
	pthread_mutex_t recv_lock;	/* RQ consumption from any engine thread */
	uint32_t rq_head;		/* recv_lock: WQEs taken (private copy) */
	/* engine, any thread (atomic): receive CQEs of WQEs taken, not yet
	 * pushed (recv.c, "deferred"); the RQ is not flushed meanwhile */
	uint32_t recv_cqes_deferred;

	/* engine: send-side progress, touched only by the serving thread */
	uint32_t sq_head;		/* WQEs taken (private copy) */
	uint64_t rnr_deadline_ns;	/* CLOCK_MONOTONIC; 0 = not waiting */
	uint8_t rnr_left;		/* retries left for the WQE in front */
	bool flush_pending;		/* moved to ERR: flush both queues */
	uint8_t retry_left;		/* transport retries left for it */
	bool wqe_started;		/* rnr_left/retry_left count for it */
	bool last_wqe_sent;		/* LAST_WQE_REACHED sent since ERR */
	bool drained_sent;		/* SQ_DRAINED sent since SQD */
	uint64_t wqe_done;		/* bytes of it moved (chunked, while started) */
	/* the wait is for the transport's answer only (RESP_PENDING): a
	 * doorbell lets the transport send what was posted since */
	bool awaiting;
	/* bytes of the step at wqe_done charged to the tenant's bandwidth:
	 * asked again, or tried again after an RNR wait or a timeout, it
	 * pays only what it grew by (the client may rewrite the WQE; what
	 * the transport sends again, it charges) */
	uint64_t step_paid;
	uint32_t wire_psn;		/* next PSN a wire transport sends UD */
	/*
	 * Atomic, set from any thread: the transport has the answer to the
	 * message in front (engine/transport.h, ibvd_eng_answered), so a
	 * wait for it ends now.
	 */
	uint32_t answered;
	/* what a wire transport keeps for this QP (transport/roce/) */
	void *wire;
	size_t wire_bytes;		/* its size, charged as ring memory */
	struct {			/* that message, fixed at its first step */
		uint64_t length;
		uint32_t opcode;
		uint32_t imm_data;	/* or the key SEND_WITH_INV invalidates */
		uint32_t xrc_srqn;	/* the SRQ it names (XRC) */
		uint32_t seq;		/* its number, among the QP's messages */
		/* its responder, compared only, and that QP's incarnation */
		const struct ibvd_qp *target;
		uint32_t target_qpn;
		uint32_t target_gen;
		bool holds_recv;	/* it took a receive WQE there */
	} chunked;			/* engine/chunk.c */
	unsigned int timer_slot;	/* 1 + index in its thread's timer heap,
					 * 0: none (engine/timer.c) */
	/* write lock: RESETs so far; messages begun before one never land */
	uint32_t incarnation;
	/*
	 * Responder side, under the lock of the QP's receive queue (recv_lock
	 * or its SRQ's lock): the receive WQE of a chunked message arriving
	 * here, allocated at the first one and freed with the QP.
	 */
	struct eng_inbound *inbound;
	/* set by the control thread (write lock) when the RC peer's
	 * context died: the engine breaks the connection */
	bool peer_gone;
	/*
	 * write lock: where its library copies WRITE payloads at post
	 * (common/ring.h, "Staging"), granted on its first ask; bytes 0:
	 * none, and a staged WQE is refused
	 */
	struct {
		const uint8_t *base;	/* in the daemon's map of the arena */
		uint64_t off;		/* from the arena's start */
		uint32_t bytes;
	} staging;
	/* write lock: the transit rings shared with the peer, or NULL, and
	 * which side of them this QP is */
	struct ibvd_direct *direct;
	unsigned int direct_side;
	/* engine, serving thread: waits in a row for a busy RQ or SQ claim */
	uint8_t claim_waits;
	/* engine, any thread (atomic): UD, a datagram waited out its RQ
	 * claim; until the claim is next found free (recv.c) */
	bool ud_claim_held_out;
	/* engine: when the receiver's RQ claim last held up the WQE in front
	 * for a whole ACK timeout (or first did; UD: first did, recv.c);
	 * 0: it does not */
	uint64_t busy_since_ns;
	/* engine, serving thread: the local transport, when the front's
	 * current ACK timeout began with nobody answering (0: it has an
	 * answer); a timeout spends a retry only once it has run out */
	uint64_t no_answer_since_ns;
	/*
	 * engine: when the SENDs this QP's library left in its ring fail if
	 * still nobody takes them (its target QP went away or cannot
	 * receive; engine/direct/direct.c); 0 = not counting.  Set by the
	 * pass that finds it so, this QP's or its peer's: two engine threads
	 * that race only move it by a pass.
	 */
	uint64_t unanswered_ns;
	/*
	 * engine, serving thread: it holds the SQ's claim, and the SQ's
	 * direct_head as it last read it (the library moves it when it takes
	 * SENDs to the ring)
	 */
	bool sq_claimed;
	uint32_t sq_direct_seen;
	/*
	 * The engine also moves `state` to ERR (or RTS to SQE) on its own,
	 * from any engine thread, with an atomic store while holding the
	 * objects lock for reading; the control thread reads `state` under
	 * the write lock (or with an atomic load).
	 */

	struct ibvd_keyed qpn_node;	/* in the QP-number registry */
	LIST_HEAD(, ibvd_mcast_member) mcast;	/* groups this QP joined */

	/* control thread only: attributes the engine has no use for, kept
	 * so that QUERY_QP returns what MODIFY_QP set */
	struct {
		uint8_t path_mig_state;
		uint8_t static_rate;
		uint8_t src_path_bits;
		uint8_t alt_port_num;
		uint8_t alt_timeout;
		uint8_t alt_static_rate;
		uint8_t alt_src_path_bits;
		uint16_t alt_pkey_index;
		struct ibvd_av alt_av;
	} ctl;
};

/* ---- registries (registry.c), under ibvd_objects_lock --------------- */

/* Registration; the caller holds the objects lock for writing. */
int ibvd_mr_register(struct ibvd_mr *mr);	/* picks the keys */
void ibvd_mr_unregister(struct ibvd_mr *mr);
int ibvd_mw_register(struct ibvd_mw *mw);	/* picks the key's index */
void ibvd_mw_unregister(struct ibvd_mw *mw);
int ibvd_qp_register(struct ibvd_qp *qp);	/* picks qp_num */
void ibvd_qp_unregister(struct ibvd_qp *qp);
int ibvd_doorbell_alloc(struct ibvd_context *ctx, struct ibvd_qp *qp);
void ibvd_doorbell_free(struct ibvd_context *ctx, struct ibvd_qp *qp);
/* Find or make (up to max_groups daemon-wide, else -ENOMEM) a group. */
int ibvd_mcast_group_get(const uint8_t mgid[16], uint32_t max_groups,
			 struct ibvd_mcast_group **ret);
/* Free the group if it has no members left. */
void ibvd_mcast_group_put(struct ibvd_mcast_group *grp);

/* Lookups, under the objects lock (either way). */

/* The MR whose lkey (or rkey) is key, or NULL. */
struct ibvd_mr *ibvd_mr_by_lkey(uint32_t key);
struct ibvd_mr *ibvd_mr_by_rkey(uint32_t key);

/* The window whose key has rkey's index (upper 24 bits), or NULL. */
struct ibvd_mw *ibvd_mw_by_index(uint32_t rkey);

/* The QP with that number, or NULL. */
struct ibvd_qp *ibvd_qp_by_num(uint32_t qp_num);

/* XRC SRQs by number: register picks srq_num; under the write lock. */
int ibvd_srq_register(struct ibvd_srq *srq);
void ibvd_srq_unregister(struct ibvd_srq *srq);
/* The XRC SRQ with that number, or NULL. */
struct ibvd_srq *ibvd_srq_by_num(uint32_t srq_num);

/*
 * The QP that owns doorbell bit `bit` of ctx (ring.h), or NULL: bits of
 * destroyed QPs are reused, and a client may ring any bit it likes.
 */
struct ibvd_qp *ibvd_qp_by_doorbell(const struct ibvd_context *ctx,
				    uint32_t bit);

/*
 * Multicast: a group is (MGID); members are UD QPs that attached to it.
 * UD sends to remote_qpn 0xFFFFFF with a GRH whose dgid is the MGID reach
 * every member.
 */
struct ibvd_mcast_member {
	struct ibvd_qp *qp;
	uint8_t mgid[16];
	/* each an attachment (MGID, MLID) of the QP; detach names one */
	uint16_t *mlids;
	unsigned int nmlids;
	LIST_ENTRY(ibvd_mcast_member) group_link;
	LIST_ENTRY(ibvd_mcast_member) qp_link;
	struct ibvd_mcast_group *group;
};

/* A multicast group: exists while it has members, daemon-wide by MGID. */
struct ibvd_mcast_group {
	uint8_t mgid[16];
	unsigned int nmembers;
	LIST_HEAD(, ibvd_mcast_member) members;	/* via group_link */
	LIST_ENTRY(ibvd_mcast_group) link;	/* in the group registry */
};

#define IBVD_MCAST_QPN	0xFFFFFFu

/* Q_Keys with the high bit set are controlled (IBTA 10.2.4): root's only. */
#define IBVD_QKEY_CONTROLLED	0x80000000u

/* The group with that MGID (16 bytes, network order), or NULL. */
struct ibvd_mcast_group *ibvd_mcast_group_find(const uint8_t mgid[16]);

/* ---- per-context object state ---------------------------------------- */

/*
 * What a context keeps about its objects beyond the handle table
 * (embedded in struct ibvd_context as `objs`).  Control thread only,
 * except db_qp, which the engine reads through ibvd_qp_by_doorbell()
 * under ibvd_objects_lock.
 */
struct ibvd_ctx_objs {
	struct ibvd_arena *arena;	/* its rings' memory (verbs/rings/arena.h) */
	uint64_t ring_bytes;		/* arena bytes of all its rings */
	uint64_t staging_bytes;		/* of which its QPs' staging blocks */
	unsigned int mcast_members;	/* multicast attachments of its QPs */
	uint32_t db_next;		/* where the next free-bit search starts */
	uint64_t db_used[IBVD_DOORBELL_WORDS];	/* doorbell bits owned by QPs */
	struct ibvd_qp **db_qp;		/* bit -> QP, db_qp_len entries */
	uint32_t db_qp_len;
};

/* ---- device contexts ----------------------------------------------------- */

/* Completion vectors a context reports (the engine wakes through one). */
#define IBVD_NUM_COMP_VECTORS	1

TAILQ_HEAD(ibvd_context_list, ibvd_context);

/*
 * A device context: what OPEN_DEVICE makes of a connection (verbs/
 * context.c).  It belongs to one device and to its members: the session
 * that opened it and those that imported it (IMPORT_DEVICE), each with its
 * own async socket and attached memory; it owns the handle table of every
 * object made through any of them, and goes, destroying them all, when the
 * last member leaves.  Sessions are opaque here: only the layers above
 * look into them.
 */
/*
 * A process using a context: the one that opened it, and each one that
 * imported it (ibv_import_device), each through its own connection.
 */
struct ibvd_async_pending;
struct event;

struct ibvd_ctx_member {
	struct ibvd_session *session;
	int async_fd;			/* our end of its async socket */
	struct ibvd_mem *mem;		/* its ATTACH_MEMORY; NULL before */
	/*
	 * async_lock: the events its socket had no room for, oldest first
	 * (verbs/async.c); no list head that points into the member, which
	 * moves in the array
	 */
	struct ibvd_async_pending *pending_first, *pending_last;
	unsigned int npending;
	struct event *write_ev;		/* control thread: sends them */
};

/* Processes that may share one context: the opener and 15 importers. */
#define IBVD_CTX_MAX_MEMBERS	16

struct ibvd_context {
	TAILQ_ENTRY(ibvd_context) dev_link;	/* in dev->contexts */
	struct ibvd_device *dev;
	struct ibvd_session *session;	/* members[0]'s: logs, ibvctl, reload */
	uint32_t id;			/* daemon-wide, for logs and ibvctl */
	/*
	 * The members: control thread; engine threads read the async fds
	 * (events go to every member) under async_lock, which the control
	 * thread takes to change the list.
	 */
	pthread_mutex_t async_lock;
	struct ibvd_ctx_member members[IBVD_CTX_MAX_MEMBERS];
	unsigned int nmembers;
	uint32_t async_seq;		/* req_id of the last AsyncEvent */
	/* verbs/async.c's lock: in its list of contexts whose members have
	 * events waiting for room */
	TAILQ_ENTRY(ibvd_context) async_waiting_link;
	bool async_waiting;
	/* what an importer maps: context page and ring arena memfds, ours */
	int page_fd;
	int rings_fd;
	int kick_fd;			/* the engine's: not ours to close */
	struct ibvd_handle_table handles;
	struct ibvd_ctx_objs objs;	/* rings, doorbells (below) */
	struct ibvd_ectx *engine;	/* engine/: doorbells, serving thread */
	/* a library of ours held a lease past a revocation: no more grants
	 * to this context, in any pair (lease.c) */
	bool lease_broken;
	/* its objects are being freed, CQs last: a QP's CQEs need no purge
	 * (control thread, objects lock held for writing) */
	bool tearing_down;
};

#endif /* IBVD_OBJECTS_H */
