/*
 * Our libibverbs.so.1: rdma-core's verbs API, with Debian 44's export table
 * (libibverbs.map, abi.md), for the devices ibverbsd provides.  The control
 * path is RPCs to the daemon; the data path is shared memory with the
 * daemon's engine (common/ring.h) and makes no system call while the
 * engine is awake.
 *
 * This header is the library's private state: the structs that wrap the
 * public ones (abi.md §2.3) and what the implementation files share.
 * ibvc_ names are this library's own; ibvd_ names come from common/ and
 * the protocol and mean the same in the daemon (ibvd_conn, the ring
 * structs, ibvd_av, the verbs_msg conversions).
 *
 * The files, lowest first; each calls only files listed before it (to
 * check: nm on the objects; no file may leave undefined a symbol that a
 * file listed after it defines).
 * The export table (abi.mk; they do not include this header):
 *   exports.h    prototypes Debian's headers lack (driver.h, marshall.h)
 *   stubs.c      exported verbs not implemented: EOPNOTSUPP
 *   compat_1_0.c the hidden IBVERBS_1.0 twins: ENOSYS
 *   private.c    IBVERBS_PRIVATE_34, the provider interface: inert
 *   strings.c    ibv_*_str: names of enums, worded as rdma-core's
 *   rate.c       static rate conversions
 *   fork.c       ibv_fork_init and the fork range calls
 *   sysfs.c      the 1.0 sysfs helpers
 *   marshall.c   kernel uverbs/SA structs to verbs structs and back
 * Shared by the verbs (impl.mk, like all below):
 *   device.c     ibv_get_device_list: the daemon's devices, cached
 *   handle.c     a context's daemon handle -> CQ/QP/SRQ map, for events
 *   queue.c      mapping the context page and ring arena; the doorbell
 *   pd.c         PDs, and ibvc_destroy_handle(), every object's destroy
 *   query.c      device, port, GID and P_Key queries
 * The data path:
 *   post.c       ibv_post_send/recv/srq_recv and memory window binds
 *   qp_ex.c      the ibv_wr_* posting API, on post.c's checks
 *   poll.c       ibv_poll_cq and ibv_req_notify_cq: the CQ ring's consumer
 * The verbs objects:
 *   mr.c         memory regions; the daemon gets the app's /proc/self/mem
 *   backing.c    the shared file behind a range, if any (for mr.c)
 *   mw.c         memory windows: allocation (binding is in post.c)
 *   ah.c         address handles, whose address vector UD WQEs carry
 *   mcast.c      ibv_attach/detach_mcast
 *   cq.c         CQs: the ring the daemon makes, mapped here
 *   cq_ex.c      ibv_create_cq_ex and its start/next/end poll API
 *   qp.c         QPs: SQ and RQ rings, modify, query, destroy
 *   srq.c        SRQs: one receive ring shared by QPs (XRC SRQs too)
 *   xrcd.c       XRC domains, shared through a file by the daemon
 *   channel.c    completion channels: ibv_get_cq_event
 * On top:
 *   context.c    ibv_open_device: the connection, the context page, and
 *                the ops table header inlines call (every file's *_op)
 *   async.c      ibv_get_async_event; a daemon gone is DEVICE_FATAL
 * So there is no loop between files.  Nothing calls context.c but
 * async.c, which marks a context dead: the object files reach their
 * context through the struct (to_ibvc_context), never its functions.
 *
 * What talks to the daemon: each context's connection (ibvc_conn_of)
 * carries the RPCs of query.c and of every object file; device.c lists
 * devices on a connection of its own; async.c and channel.c read the
 * sockets the daemon writes events to; queue.c's doorbell wakes a
 * sleeping engine through the context's eventfd.  post.c and poll.c only
 * read and write shared memory.
 *
 * Error convention: internal functions return 0 or a negative errno; the
 * exported verbs convert once, at the public boundary, to whatever their
 * man page promises (positive errno, -1 + errno, or NULL + errno).
 */
#ifndef IBVC_VERBS_H
#define IBVC_VERBS_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>
#include <sys/un.h>

#include <infiniband/verbs.h>

#include "conn.h"
#include "verbs_msg.h"
#include "ibverbsd.pb-c.h"
#include "ring.h"
#include "util.h"

/* ---- devices (device.c) ------------------------------------------------ */

/*
 * One device of one daemon.  The public part is what ibv_get_device_list()
 * hands out; everything after it is ours.
 */
struct ibvc_device {
	struct ibv_device device;	/* must be first: apps hold &device */
	char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	uint64_t node_guid;		/* host byte order */
	uint32_t index;			/* the daemon's device index */
	uint32_t phys_port_cnt;
	/*
	 * One reference per device list and per open context that holds the
	 * device, plus one from the cache while the daemon still lists it.
	 * Protected by the device cache lock.
	 */
	unsigned int refcount;
	bool cached;
	bool seen;			/* listed by the current listing */
	struct ibvc_device *next;	/* in the cache */
};

static inline struct ibvc_device *to_ibvc_device(struct ibv_device *device)
{
	return container_of(device, struct ibvc_device, device);
}

void ibvc_device_get(struct ibvc_device *dev);
void ibvc_device_put(struct ibvc_device *dev);
/*
 * The device info describes, as the daemon at socket_path lists it, with
 * a reference for the caller (ibv_import_device); NULL without memory.
 */
struct Ibvd__DeviceInfo;
struct ibvc_device *ibvc_device_for(const char *socket_path,
				    const struct Ibvd__DeviceInfo *info);

/* ---- contexts (context.c) ---------------------------------------------- */

/*
 * An open device context.  verbs_context must come first and ends with the
 * public ibv_context, so that the header inlines find the extended ops
 * right before the pointer we return (abi.md §2.2).
 */
/* A mapping of one memfd the daemon sent (context page, ring arena). */
struct ibvc_map {
	void *addr;
	size_t len;
};

/* The context's own MRs by lkey (mrtab.c). */
struct ibvc_mrtab_entry {
	bool used;
	uint32_t lkey;
	const struct ibv_pd *pd;
	uint64_t addr;
	uint64_t length;
	unsigned int access;
};

struct ibvc_mrtab {
	pthread_mutex_t lock;
	struct ibvc_mrtab_entry *slots;
	uint32_t cap, n;		/* cap: 0 or a power of two */
};

struct ibvc_context {
	struct verbs_context vctx;	/* must be first; ends with .context */
	struct ibvd_conn conn;		/* the RPC connection; cmd_fd is its socket */
	struct ibvc_device *dev;	/* holds a reference */
	int imported_fd;		/* ibv_import_device's cmd_fd, or -1 */

	/* async events (async.c) */
	pthread_mutex_t async_lock;
	bool fatal_delivered;		/* IBV_EVENT_DEVICE_FATAL went out */

	/*
	 * Threads blocked in ibv_get_async_event or ibv_get_cq_event on the
	 * context (atomic): ibv_close_device wakes them (closing) and frees
	 * the context only once they left.
	 */
	unsigned int waiters;
	bool closing;			/* atomic */
	LIST_HEAD(, ibvc_comp_channel) channels; /* its own, under obj_lock */

	/* the context page (ring.h): doorbells and the engine's sleep flag */
	void *ctx_page;			/* IBVD_CTX_PAGE_SIZE bytes */
	const struct ibvd_ctx_engine *db_engine;	/* read-only mapping */
	struct ibvd_ctx_client *db_client;
	int kick_fd;			/* eventfd that wakes a sleeping engine */
	uint32_t kicked;		/* woke the engine; it has not run yet */

	/* the ring arena (ring.h): every CQ, QP and SRQ ring of the context */
	struct ibvc_map rings;

	/* reg_mr: /proc/self/mem went to the daemon (under vctx.context.mutex) */
	bool mem_attached;

	/* handle -> CQ/QP/SRQ, for completion and async events (handle.c) */
	pthread_mutex_t obj_lock;
	struct ibvc_obj_ref *objs;	/* indexed by the handle's slot bits */
	uint32_t nobjs;

	/* this process's MRs, for the direct transport's checks (mrtab.c) */
	struct ibvc_mrtab mrs;

	/* the last GID table fetched (query.c), good while db_engine->gid_gen is */
	struct {
		pthread_mutex_t lock;
		bool valid;
		uint32_t gen, port_num, tbl_len;
		size_t n;
		struct ibv_gid_entry *entries;
	} gids;
};

/*
 * context.c: a thread about to wait for an event of ictx (false: the
 * context is closing; fail with EIO), and done waiting.
 */
bool ibvc_context_enter(struct ibvc_context *ictx);
void ibvc_context_leave(struct ibvc_context *ictx);
bool ibvc_context_closing(struct ibvc_context *ictx);
/* Until *count (atomic: threads inside a call) is 0, woken ones leaving. */
void ibvc_wait_none_inside(const unsigned int *count);
/* channel.c: ictx is closing: its channels fail from now on, waiters wake. */
void ibvc_channels_orphan(struct ibvc_context *ictx);

/* mrtab.c: remember an MR of this process (ibvc_reg_mr, rereg), forget it. */
void ibvc_mrtab_add(struct ibvc_context *ictx, const struct ibv_mr *mr,
		    unsigned int access);
void ibvc_mrtab_remove(struct ibvc_context *ictx, uint32_t lkey);
/* What ibvc_mrtab_covers asks of an MR besides the range. */
enum {
	IBVC_MRTAB_WRITE = 1u << 0,	/* local write access */
	/*
	 * The library copies it now, in this thread: never where the thread
	 * cannot recover from a fault (guard.c).  Memory the app unmapped or
	 * a file it truncated under its MR would fault there; the engine
	 * reaches it through the kernel or its own mapping, and fails the
	 * request instead.
	 */
	IBVC_MRTAB_COPY = 1u << 1,
};
/* Is [addr, addr + len) inside an MR of pd with key lkey, as need asks? */
bool ibvc_mrtab_covers(struct ibvc_context *ictx, const struct ibv_pd *pd,
		       uint32_t lkey, uint64_t addr, uint64_t len,
		       unsigned int need);
/*
 * May the library copy from these buffers of a send WR of qp itself, at
 * post (post.c, staging.c)?  They lie in MRs this process registered on
 * qp's PD, and are private where a fault cannot be recovered from.
 */
struct ibvc_qp;
bool ibvc_copyable_sges(struct ibvc_qp *qp, const struct ibv_sge *sge,
			int num_sge);
/*
 * A peer's RDMA WRITE of len bytes from src to addr, by rkey: copied, if
 * that is an MR of pd this process registered with remote write access
 * and the range lies inside it (and, where a fault cannot be recovered
 * from, private); false otherwise, or if the copy faulted.
 */
bool ibvc_mrtab_write_in(struct ibvc_context *ictx, const struct ibv_pd *pd,
			 uint32_t rkey, uint64_t addr, const void *src,
			 uint64_t len);
void ibvc_mrtab_fini(struct ibvc_context *ictx);

static inline struct ibvc_context *to_ibvc_context(struct ibv_context *ctx)
{
	return container_of(ctx, struct ibvc_context, vctx.context);
}

/* This process's pid, kept across fork() (context.c): read per call. */
extern pid_t ibvc_pid;

/*
 * A forked child's copy of a context: its queues and context page were
 * not inherited (MADV_DONTFORK), its socket is the parent's.  Every verb
 * on it fails with EIO (ibverbsd(7)) before it touches either.
 */
static inline bool ibvc_forked(const struct ibvc_context *ictx)
{
	return ictx->conn.owner != ibvc_pid;
}

/* The daemon went away: make every later RPC of ctx fail fast with EIO. */
void ibvc_context_mark_dead(struct ibvc_context *ictx);

static inline struct ibvd_conn *ibvc_conn_of(struct ibv_context *ctx)
{
	return &to_ibvc_context(ctx)->conn;
}

/* ---- the handle -> object map (handle.c) -------------------------------- */

/*
 * The objects that events name by handle.  Handles are unique per
 * connection across kinds and never reused (daemon/handle.h), so a stale
 * handle in a queued event simply finds nothing.
 */
enum ibvc_obj_kind {
	IBVC_OBJ_NONE,
	IBVC_OBJ_CQ,
	IBVC_OBJ_QP,
	IBVC_OBJ_SRQ,
};

struct ibvc_obj_ref {
	uint32_t handle;		/* 0: free */
	enum ibvc_obj_kind kind;
	void *obj;
};

int ibvc_obj_add(struct ibvc_context *ictx, uint32_t handle,
		 enum ibvc_obj_kind kind, void *obj);
void ibvc_obj_remove(struct ibvc_context *ictx, uint32_t handle);
/* Under obj_lock: the live object of that kind named by handle, or NULL. */
void *ibvc_obj_lookup_locked(struct ibvc_context *ictx, uint32_t handle,
			     enum ibvc_obj_kind kind);
void ibvc_obj_free_all(struct ibvc_context *ictx);

/* ---- shared queues (queue.c) -------------------------------------------- */

/* The client's side of one work queue (SQ, RQ or SRQ ring, ring.h). */
struct ibvc_wq {
	const struct ibvd_wq_engine *engine;	/* read-only mapping */
	struct ibvd_wq_client *client;
	uint8_t *slots;
	uint32_t nslots;
	uint32_t stride;
	uint32_t limit;			/* usable depth: the reported max_wr */
	uint32_t tail;			/* private copy of client->tail */
	pthread_mutex_t lock;		/* serialises posters */
};

/* The client's side of a CQ ring. */
struct ibvc_cq_ring {
	const struct ibvd_cq_engine *engine;	/* read-only mapping */
	struct ibvd_cq_client *client;
	const struct ibvd_cqe *slots;		/* read-only mapping */
	uint32_t nslots;
	uint32_t head;			/* private copy of client->head */
};

int ibvc_map_fd(int fd, size_t len, struct ibvc_map *map);
int ibvc_map_writable(struct ibvc_map *map, int fd, size_t off, size_t len);
void ibvc_unmap(struct ibvc_map *map);
/* The context's ring arena: read-only but for its client half. */
int ibvc_map_rings(struct ibvc_context *ictx, int fd);
bool ibvc_wq_geometry_ok(uint32_t nslots, uint32_t stride, uint32_t hdr);
/*
 * Point wq at the work-queue ring the daemon placed in ictx's arena:
 * 0, or -EPROTO if the place is not one.
 */
/* The block [off, off + len) of ictx's arena, if in its client half. */
uint8_t *ibvc_arena_client_block(const struct ibvc_context *ictx, uint64_t off,
				 uint64_t len);
int ibvc_wq_setup(struct ibvc_wq *wq, struct ibvc_context *ictx,
		  const Ibvd__RingPlace *place, uint32_t nslots,
		  uint32_t stride, uint32_t limit);
/*
 * A resized receive queue (an SRQ): its new slots, at place, whose headers
 * must be where they were.  The caller holds wq->lock and keeps the
 * placers out (srq.c).
 */
int ibvc_wq_move_slots(struct ibvc_wq *wq, struct ibvc_context *ictx,
		       const Ibvd__RingPlace *place, uint32_t nslots,
		       uint32_t stride, uint32_t limit);
void ibvc_wq_destroy(struct ibvc_wq *wq);
/* After a reset the daemon may have rewound the counters: follow them. */
void ibvc_wq_resync(struct ibvc_wq *wq);
/* The same for a CQ ring of nslots CQEs. */
int ibvc_cq_ring_setup(struct ibvc_cq_ring *ring, struct ibvc_context *ictx,
		       const Ibvd__RingPlace *place, uint32_t nslots);
/* Tell the engine that queue slot `bit` of ictx has work (ring.h). */
void ibvc_ring_doorbell(struct ibvc_context *ictx, uint32_t bit);
/*
 * An empty poll: yield once if we woke the engine and it has not run;
 * true if it did (the poll is worth doing again).
 */
bool ibvc_yield_to_woken_engine(struct ibvc_context *ictx);

static inline void *ibvc_wq_slot(const struct ibvc_wq *wq, uint32_t counter)
{
	return wq->slots + (size_t)(counter & (wq->nslots - 1)) * wq->stride;
}

/* ---- verbs objects ------------------------------------------------------ */

/* ibv_pd and ibv_mr need nothing private: apps see all there is. */

/* private.c: the app lets destroys succeed on a dead device */
extern bool verbs_allow_disassociate_destroy;
/*
 * device.c: what the library does once, at the first device list or
 * import (the memlock warning, RDMAV_ALLOW_DISASSOC_DESTROY).
 */
void ibvc_library_init(void);

/* pd.c: send a destroying request (DEALLOC_PD, DESTROY_*) for handle */
int ibvc_destroy_handle(struct ibv_context *ctx, uint16_t type,
			uint32_t handle);

struct ibvc_comp_channel {
	struct ibv_comp_channel channel;	/* must be first; fd: epoll */
	uint32_t handle;
	int sock;				/* the daemon's events */
	int poke[2];				/* the wake-up pair, once had:
						 * read (watched), write */
	/* one reader of buf at a time; the pair's fetch; cqs */
	pthread_mutex_t recv_lock;
	uint8_t *buf;				/* IBVD_FRAME_MAX bytes, from the
						 * first event on (channel.c) */
	struct ibvc_cq *cqs;			/* those using the channel */
	bool poke_dead;				/* atomic: a sender shut it */
	/* atomic: the app sleeps in ibv_get_cq_event (channel.c, fallback) */
	bool sleeps_here;
	bool watching;				/* atomic: ... for sleepers */
	bool rescan;				/* atomic: a ring to look at again */
	unsigned int waiters;			/* atomic: threads in wait_channel */
	LIST_ENTRY(ibvc_comp_channel) ctx_link;	/* the context's obj_lock */
	/*
	 * Under recv_lock: its context was closed, so the channel only
	 * fails (EIO) and can be destroyed; the app's struct stays valid.
	 */
	bool orphaned;
	/* Under recv_lock: being destroyed; new waits fail (EIO). */
	bool closing;
	/* atomic, raised under recv_lock: threads in ibv_get_cq_event */
	unsigned int users;
};

static inline struct ibvc_comp_channel *
to_ibvc_channel(struct ibv_comp_channel *channel)
{
	return container_of(channel, struct ibvc_comp_channel, channel);
}

/* A completion the library made itself (direct_cqe.c), waiting in its CQ. */
struct ibvc_local_cqe {
	struct ibvd_cqe cqe;
	uint32_t mark;			/* the CQ's engine tail it follows */
	bool solicited;			/* fires a solicited-only arm */
};

struct ibvc_qp;

struct ibvc_cq {
	union {
		struct ibv_cq cq;		/* must be first */
		struct ibv_cq_ex cq_ex;		/* ibv_create_cq_ex()'s CQs */
	};
	pthread_mutex_t lock;			/* pollers, arming, resize */
	struct ibvc_cq_ring ring;
	/* under cq.mutex: events handed to the app, for destroy's wait */
	uint32_t comp_delivered;
	struct ibvc_cq *next_on_channel;	/* its channel's recv_lock */
	uint32_t async_delivered;
	/* the ibv_cq_ex poll API (cq_ex.c), from start_poll to end_poll */
	bool single_threaded;			/* IBV_CREATE_CQ_ATTR_SINGLE_THREADED */
	bool timestamps;			/* asked for: the library's own CQEs
						 * are stamped too (direct_cqe.c) */
	uintptr_t batch_thread;			/* its thread (0: none); atomic */
	uint32_t seen_tail;			/* the engine's tail, last read */
	struct ibvd_cqe cur;			/* what the read_* ops report */
	struct ibv_pd *parent_domain;		/* held, or NULL */
	/* the direct transport (direct_*.c), under lock */
	struct {
		struct ibvc_qp *senders;	/* direct QPs sending on this CQ */
		struct ibvc_qp *receivers;	/* ... receiving on it */
		struct ibvc_local_cqe *fifo;	/* power-of-two slots */
		uint32_t cap, head, tail;
		uint32_t limit;			/* engine CQEs this poll may take */
		bool polling;			/* limit applies */
		uint32_t arm_token;		/* the last ibvc_direct_rx_armed
						 * published; atomic */
		uint32_t moves_seen;		/* engine->direct_moves; atomic */
		bool refresh_owed;		/* a QP's, till end_poll; atomic */
		uint32_t events;		/* fired here, not handed out */
	} direct;
	/*
	 * Under lock: the app's last poll is over (not a batch of
	 * ibv_start_poll in progress), begun when `fired` was polled_fired
	 * (ibvc_cq_missed); look_fired: `fired` when the poll in progress
	 * began.
	 */
	bool polled;
	uint32_t polled_fired;
	uint32_t look_fired;
};

static inline struct ibvc_cq *to_ibvc_cq(struct ibv_cq *cq)
{
	return container_of(cq, struct ibvc_cq, cq);
}

/*
 * An XRC domain, laid out as rdma-core's struct verbs_xrcd (ibv_xrcd,
 * comp_mask, handle).
 */
struct ibvc_xrcd {
	struct ibv_xrcd xrcd;			/* must be first */
	uint32_t comp_mask;
	uint32_t handle;			/* the daemon's */
};

static inline struct ibvc_xrcd *to_ibvc_xrcd(struct ibv_xrcd *xrcd)
{
	return container_of(xrcd, struct ibvc_xrcd, xrcd);
}

/*
 * The head is rdma-core's struct verbs_qp (the QP, room for ibv_qp_ex,
 * comp_mask, the XRC domain of a target QP).  An XRC target has no queues
 * the app may use; one opened with ibv_open_qp has no rings mapped at all.
 */
/* A QP's staging block (common/ring.h, "Staging"), as its library fills it. */
struct ibvc_staging {
	uint8_t *base;			/* NULL: none (yet) */
	uint32_t bytes;			/* a power of two */
	uint32_t produced;		/* bytes handed out, free-running */
	uint32_t released;		/* of which the engine is done with */
	uint32_t seen_head;		/* the SQ's engine head at `released` */
	uint32_t *ends;			/* per SQ counter, mod 2 x slots:
					 * `produced` after its WQE */
	bool asked;			/* QP_STAGING is asked once */
	bool unpublished;		/* this post staged a WQE already */
	bool stalled;			/* a wait for room ran out at seen_head */
	/* a READ or atomic may still write local memory: the SQ's WQEs
	 * below reads_until are not all retired */
	bool reads_pending;
	uint32_t reads_until;
};

struct ibvc_qp {
	union {
		struct ibv_qp qp;		/* must be first */
		struct ibv_qp_ex qp_ex;		/* room for ibv_qp_to_qp_ex() */
	};
	uint32_t comp_mask;
	struct ibvc_xrcd *xrcd;			/* XRC_RECV */
	uint32_t create_flags;			/* IBV_QP_CREATE_*, at create */
	struct ibvc_wq sq;
	struct ibvc_wq rq;			/* unused with an SRQ */
	struct ibv_qp_cap cap;			/* actual, as the daemon reported */
	uint32_t doorbell;			/* the QP's bit in the context page */
	uint32_t async_delivered;		/* under qp.mutex */
	bool sq_sig_all;
	/* on a parent domain with a thread domain: posts take no lock */
	bool single_threaded;
	/* the ibv_qp_ex API (qp_ex.c); the batch runs under sq.lock */
	bool has_qp_ex;
	struct {
		struct ibvd_send_wqe *cur;	/* the WQE wr_set_* complete */
		uint32_t tail;			/* after the batch's last WQE */
		uint32_t head;			/* engine's head, last seen */
		int err;			/* first error: the batch fails */
	} batch;
	/* the direct transport's rings, once mapped (direct_map.c) */
	pthread_mutex_t direct_lock;		/* mapping and unmapping */
	struct ibvc_direct *direct;		/* NULL: everything via the engine */
	uint32_t direct_gen;			/* atomic: direct's gen, 0 none; read
						 * where direct may be freed */
	struct ibvc_qp *next_sender;		/* in send_cq's direct.senders */
	struct ibvc_qp *next_receiver;		/* in recv_cq's direct.receivers */
	/* UD: its Q_Key as last set, and the peers it asked rings for */
	uint32_t qkey;				/* atomic */
	uint32_t ud_asked_qpn;			/* SQ lock */
	unsigned int ud_asks;			/* SQ lock */
	struct ibvc_staging staging;		/* SQ lock (staging.c) */
};

/*
 * staging.c, SQ lock held: copy an RDMA WRITE's payload into the QP's
 * staging block and make wqe (its header written) a staged one, if it
 * can go that way now.  false: post its SGEs.
 */
bool ibvc_stage(struct ibvc_qp *qp, struct ibvd_send_wqe *wqe,
		const struct ibv_sge *sge, int num_sge);
/* After a WQE of opcode went into the SQ at sq_counter, staged or not. */
void ibvc_stage_mark(struct ibvc_qp *qp, uint32_t sq_counter, uint32_t opcode);
/*
 * SQ lock held: may a payload posted now be read at once (copied into
 * the WQE or the staging block)?  Not while a READ or atomic posted
 * before it may still write the buffer.
 */
bool ibvc_early_read_ok(struct ibvc_qp *qp);
/* The post is over: the engine may see its WQEs (or they were dropped). */
void ibvc_stage_published(struct ibvc_qp *qp);
/* The QP is back in RESET: its block is all free. */
void ibvc_stage_reset(struct ibvc_qp *qp);
void ibvc_stage_free(struct ibvc_qp *qp);

/*
 * direct_*.c: the library's side of the direct transport (common/
 * transit.h; direct_internal.h has what those files share).  Every entry
 * point is cheap for a QP that has no rings.
 */
void ibvc_direct_qp_init(struct ibvc_qp *qp);
/* Drop the rings (QP reset or destroyed); the QP's queues are quiet. */
void ibvc_direct_detach(struct ibvc_qp *qp);
/* Map the rings if the daemon made some since (no QP or CQ lock held). */
void ibvc_direct_refresh(struct ibvc_qp *qp);
/*
 * post_send of a UD QP without rings, SQ lock held: ask the daemon for
 * rings with the QP wr sends to, if it has not asked for that one.
 */
void ibvc_direct_ud_ask(struct ibvc_qp *qp, const struct ibv_send_wr *wr);
/*
 * post_send, under the SQ lock: send wr through the ring if it can go
 * that way now.  1 sent, 0 not for the ring (post it to the SQ).
 */
int ibvc_direct_send(struct ibvc_qp *qp, const struct ibv_send_wr *wr,
		     uint32_t sq_tail);
/*
 * post_send, under the SQ lock, first: SENDs still in the SQ that the
 * engine has not started go to the ring if they can now.
 */
void ibvc_direct_take_back(struct ibvc_qp *qp, uint32_t sq_tail);
/* After a post_send list put something in the ring: publish it. */
void ibvc_direct_send_done(struct ibvc_qp *qp);

/* After post_recv published: a waiting message may have its WQE now. */
void ibvc_direct_recv_posted(struct ibvc_qp *qp);
/*
 * A QP receiving on cq joined or left a pair since we last looked: map
 * or let go of the rings of cq's QPs (no QP or CQ lock held).
 */
void ibvc_direct_cq_moved(struct ibvc_cq *cq);
/*
 * An ibv_start_poll batch of cq ended (its lock let go): map the rings a
 * post inside it could not (refresh_owed), with no QP or CQ lock held.
 */
void ibvc_direct_batch_ended(struct ibvc_cq *cq);

/* Before a poll takes cq's lock: one load while no pair changes. */
static inline void ibvc_direct_cq_check(struct ibvc_cq *cq)
{
	if (__atomic_load_n(&cq->ring.engine->direct_moves, __ATOMIC_RELAXED) !=
	    __atomic_load_n(&cq->direct.moves_seen, __ATOMIC_RELAXED))
		ibvc_direct_cq_moved(cq);
}

/*
 * A poll (CQ lock held) begins: make the library's completions, firing
 * the CQ's arm for those that came after it, taken by this poll or not.
 */
void ibvc_direct_poll_begin(struct ibvc_cq *cq, uint32_t *seen);
/* The next completion, the library's and the engine's in order. */
bool ibvc_direct_next(struct ibvc_cq *cq, uint32_t *seen,
		      struct ibvd_cqe *cqe);
/*
 * Around arming the CQ (CQ lock held): place what its receivers' rings
 * hold and note where its senders' are before, and tell them of the arm
 * after.
 */
void ibvc_direct_arming(struct ibvc_cq *cq);
void ibvc_direct_armed(struct ibvc_cq *cq);
void ibvc_cq_look(struct ibvc_cq *cq);
void ibvc_cq_polled(struct ibvc_cq *cq, bool over);
bool ibvc_cq_missed(struct ibvc_cq *cq);
void ibvc_direct_fire_missed(struct ibvc_cq *cq);
bool ibvc_direct_solicited_unpolled(const struct ibvc_cq *cq);
/*
 * ibv_get_cq_event's looks at cq (its channel's recv_lock): true for an
 * event this library fired, after looking, if cq is armed, at the sends
 * its sleeping sender waits for, or at what its receivers' rings hold
 * (common/transit.h, "Blocking").  The passes go over all of a channel's
 * CQs in this order: as on a NIC, a SEND's completion comes before the
 * answer its receiver sent after taking it.  take false: only look (and
 * fire), say whether cq has an event.
 */
enum ibvc_event_pass {
	IBVC_EVENTS_FIRED,
	IBVC_EVENTS_OF_SENDS,
	IBVC_EVENTS_OF_RECEIVES,
};
bool ibvc_direct_take_event(struct ibvc_cq *cq, enum ibvc_event_pass pass,
			    bool take);
/* Does cq complete SENDs of QPs with rings?  (Its sends' events go first.) */
bool ibvc_direct_has_senders(struct ibvc_cq *cq);
/* An event taken from the daemon, kept for a later ibv_get_cq_event. */
void ibvc_direct_keep_event(struct ibvc_cq *cq);
/*
 * Fire cq's arm with no completion to show for it, and take that event:
 * for a blocking ibv_get_cq_event whose channel was readable for nothing
 * (channel.c, unseen_poke).  False if cq is not armed.
 */
bool ibvc_direct_fire_armed(struct ibvc_cq *cq);
/*
 * The channel's fallback timer went off: the engine watches cq's sleepers
 * whose receivers took nothing since the last time; true to look again.
 */
bool ibvc_direct_fallback(struct ibvc_cq *cq);
/*
 * Under cq's lock: nothing of its direct QPs would come out of a poll
 * now (a message on a receive ring counts, placeable or not).
 */
bool ibvc_direct_cq_idle(struct ibvc_cq *cq);
/* One byte into a wake-up pair (fd < 0: none); false if it cannot go. */
bool ibvc_poke(int fd);
/*
 * poke.c: a wake-up pair's writing end received (taken), as the one fd
 * this process keeps for that pair; let go of it with ibvc_poke_release.
 */
int ibvc_poke_hold(int fd);
void ibvc_poke_release(int fd);
void ibvc_direct_cq_fini(struct ibvc_cq *cq);
/* A QP of cq was destroyed: its completions made here go with it. */
void ibvc_direct_cq_forget(struct ibvc_cq *cq, uint32_t qp_num);

/*
 * direct_rdma.c: one-sided direct access to the peer's MRs (common/
 * lease.h), the grants of one pair under its lease.
 */
struct ibvd_lease;
struct ibvc_grants;
struct ibvc_grants *ibvc_grants_new(struct ibvd_lease *lease);
void ibvc_grants_free(struct ibvc_grants *gs);
/*
 * Do wr, an RDMA WRITE or READ, by copying under a grant of the pair of
 * generation gen (SQ lock held): true, with its bytes in *byte_len, if it
 * is done (its completion is the caller's); false if it must take the SQ.
 */
bool ibvc_grants_rdma(struct ibvc_qp *qp, struct ibvc_grants *gs, uint32_t gen,
		      const struct ibv_send_wr *wr, uint32_t *byte_len);

/*
 * guard.c: copies that survive memory gone under a mapping (a truncated
 * file, an unmapped or protected range).  ibvc_guarded runs fn(arg) and
 * says false if a copy of fn's faulted (SIGBUS, SIGSEGV); in a thread
 * that cannot recover (!ibvc_guard_ready) it runs fn unguarded, and its
 * callers give it none of the app's memory there (IBVC_MRTAB_COPY
 * refuses).  fn copies the app's memory with ibvc_copy only: a fault
 * outside the memory ibvc_copy is copying (fn's own, or one of a signal
 * handler that interrupted it) is not taken for the copy's.
 */
bool ibvc_guard_ready(void);
bool ibvc_guarded(void (*fn)(void *arg), void *arg);
bool ibvc_guarded_copy(void *dst, const void *src, size_t len);
void *ibvc_copy(void *dst, const void *src, size_t len);

static inline struct ibvc_qp *to_ibvc_qp(struct ibv_qp *qp)
{
	return container_of(qp, struct ibvc_qp, qp);
}

/*
 * The head is rdma-core's struct verbs_srq (the SRQ, its type, XRC domain,
 * CQ and number).
 */
struct ibvc_srq {
	struct ibv_srq srq;			/* must be first */
	enum ibv_srq_type srq_type;
	struct ibvc_xrcd *xrcd;			/* XRC only */
	struct ibv_cq *cq;			/* XRC only */
	uint32_t srq_num;			/* XRC only */
	struct ibvc_wq rq;
	uint32_t max_sge;
	uint32_t async_delivered;		/* under srq.mutex */
	/*
	 * Atomic: its slots are moving (ibv_modify_srq, srq.c); a placer
	 * that took the claim lets go at once (direct_recv.c).
	 */
	bool resizing;
};

static inline struct ibvc_srq *to_ibvc_srq(struct ibv_srq *srq)
{
	return container_of(srq, struct ibvc_srq, srq);
}

struct ibvc_ah {
	struct ibv_ah ah;			/* must be first */
	struct ibvd_av av;			/* copied into every UD send WQE */
};

static inline struct ibvc_ah *to_ibvc_ah(struct ibv_ah *ah)
{
	return container_of(ah, struct ibvc_ah, ah);
}

/*
 * Destroying a CQ, QP or SRQ waits until the app acknowledged every event
 * it was handed (ibv_destroy_cq(3)); the counters are compared under the
 * object's public mutex, which the acks take too.
 */
void ibvc_wait_acked(pthread_mutex_t *mutex, pthread_cond_t *cond,
		     const uint32_t *completed, const uint32_t *delivered);

/* cq.c: a CQ made by the daemon, registered for its events */
int ibvc_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
		   struct ibv_comp_channel *channel, int comp_vector,
		   struct ibvc_cq **ret_cq);
/* The same for a CQ the daemon made with a QP (qp_bundle.c). */
int ibvc_cq_adopt(struct ibv_context *ctx, void *cq_context,
		  struct ibv_comp_channel *channel,
		  const Ibvd__CreateCqReply *reply, struct ibvc_cq **ret_cq);
/* qp_bundle.c: rdma_create_qp in one request (common/cm_qp.h) */
struct ibvd_cm_qp_init;
struct ibvc_bundle_msgs {
	Ibvd__NewCq send, recv;
	Ibvd__CmQpRef cm;
};
/* attr's bundle, if it carries one (IBVD_QP_INIT_ATTR_CM and the magic). */
struct ibvd_cm_qp_init *ibvc_bundle_of(struct ibv_qp_init_attr_ex *attr);
/* The bundle's asks into req (m holds them). */
void ibvc_bundle_req(const struct ibvd_cm_qp_init *ci,
		     struct ibvc_bundle_msgs *m, Ibvd__CreateQp *req);
/* The reply's fds (got) as fds[0] send channel, fds[1] receive, or -1. */
void ibvc_bundle_fds(const Ibvd__CreateQpReply *r, const int *got,
		     unsigned int ngot, int fds[2]);
/* The reply's CQs and channels become objects in ci; fds taken. */
int ibvc_bundle_take(struct ibv_context *ctx, struct ibvd_cm_qp_init *ci,
		     const Ibvd__CreateQpReply *r, int fds[2]);
/* Destroy what the reply made (the QP is gone already). */
void ibvc_bundle_drop(struct ibv_context *ctx, struct ibvd_cm_qp_init *ci,
		      const Ibvd__CreateQpReply *r, int fds[2]);
/* channel.c: a channel the daemon made with a QP, fd its socket. */
int ibvc_channel_adopt(struct ibv_context *ctx, uint32_t handle, int fd,
		       struct ibvc_comp_channel **ret_ch);
/* channel.c: the wake-up pair (ibvc_comp_channel), its writing end */
void ibvc_channel_poke_fetch(struct ibv_comp_channel *channel);
int ibvc_channel_poke_fd(struct ibv_comp_channel *channel);
/*
 * A sender asleep on the channel counts on its receiver's library to
 * wake it: ibv_get_cq_event rings the engine after all if that takes
 * long (0; -1: the app does not sleep there, ring the engine now).
 */
int ibvc_channel_fallback(struct ibv_comp_channel *channel);
void ibvc_channel_link(struct ibv_comp_channel *channel, struct ibvc_cq *cq,
		       bool add);

/* cq_ex.c, qp.c, srq.c: extended creators (verbs_context ops) */
struct ibv_cq_ex *ibvc_create_cq_ex_op(struct ibv_context *ctx,
				       struct ibv_cq_init_attr_ex *attr);
struct ibv_qp *ibvc_create_qp_ex_op(struct ibv_context *ctx,
				    struct ibv_qp_init_attr_ex *attr);
struct ibv_srq *ibvc_create_srq_ex_op(struct ibv_context *ctx,
				      struct ibv_srq_init_attr_ex *attr);
int ibvc_get_srq_num_op(struct ibv_srq *srq, uint32_t *srq_num);
struct ibv_qp *ibvc_open_qp_op(struct ibv_context *ctx,
			       struct ibv_qp_open_attr *attr);

/* xrcd.c: XRC domains */
struct ibv_xrcd *ibvc_open_xrcd_op(struct ibv_context *ctx,
				   struct ibv_xrcd_init_attr *attr);
int ibvc_close_xrcd_op(struct ibv_xrcd *xrcd);

/* query.c: the index of gid in port_num's GID table, or a negative errno */
int ibvc_find_gid_index(struct ibv_context *ctx, uint8_t port_num,
			const union ibv_gid *gid);

/* ah.c: address attributes on the wire (AhAttr's dgid points into a) */

/* ---- the data path (post.c, poll.c) ------------------------------------- */

/* The posting checks the ibv_qp_ex API shares (post.c, qp_ex.c). */
bool ibvc_wq_has_room(struct ibvc_wq *wq, uint32_t *head, uint32_t tail);
/* the same, waiting for the flush of a queue the engine stopped (ERR) */
bool ibvc_wq_room(struct ibvc_qp *qp, struct ibvc_wq *wq, uint32_t *head,
		  uint32_t tail);
bool ibvc_send_opcode_valid(enum ibv_qp_type type, enum ibv_wr_opcode op);
bool ibvc_sq_state_ok(const struct ibvc_qp *qp);
/*
 * qp_ex.c: may a QP of type have the ibv_qp_ex operations in flags
 * (IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)?  Then give one created so its API.
 */
bool ibvc_send_ops_supported(enum ibv_qp_type type, uint64_t flags);
void ibvc_qp_ex_init(struct ibvc_qp *qp);

int ibvc_post_send_op(struct ibv_qp *qp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr);
int ibvc_post_recv_op(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr);
int ibvc_post_srq_recv_op(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad_wr);
int ibvc_poll_cq_op(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
/* pd.c, domain.c: protection, thread and parent domains */
struct ibvc_td;
struct ibvc_pd {
	struct ibv_pd pd;			/* must be first */
	atomic_uint users;			/* parent domains and objects on it,
						 * | IBVC_PD_UNIMPORTED */
	/* a parent domain: */
	struct ibvc_pd *parent;			/* its PD, or NULL for a PD */
	struct ibvc_td *td;
	void *(*alloc)(struct ibv_pd *pd, void *pd_context, size_t size,
		       size_t alignment, uint64_t resource_type);
	void (*free)(struct ibv_pd *pd, void *pd_context, void *ptr,
		     uint64_t resource_type);
	void *pd_context;
};

static inline struct ibvc_pd *to_ibvc_pd(struct ibv_pd *pd)
{
	return container_of(pd, struct ibvc_pd, pd);
}

/*
 * In ibvc_pd.users: ibv_unimport_pd let go of the PD while objects of ours
 * still held it; the last of them to let go frees it.
 */
#define IBVC_PD_UNIMPORTED	(1u << 31)

void ibvc_pd_hold(struct ibv_pd *pd);
void ibvc_pd_release(struct ibv_pd *pd);
bool ibvc_pd_single_threaded(struct ibv_pd *pd);
/* ah.c: may qp address through ah (one protection domain)? */
bool ibvc_ah_pd_ok(const struct ibvc_qp *qp, struct ibv_ah *ah);

/*
 * The CQ lock, unless this thread holds it already for an ibv_start_poll
 * batch of that CQ (cq_ex.c): an app may arm the CQ, reset or destroy a
 * QP from inside one, as a NIC's library lets it.
 */
static inline bool ibvc_cq_batch_held(struct ibvc_cq *cq)
{
	return __atomic_load_n(&cq->batch_thread, __ATOMIC_RELAXED) ==
	       (uintptr_t)pthread_self();
}

static inline void ibvc_cq_lock(struct ibvc_cq *cq)
{
	if (!ibvc_cq_batch_held(cq))
		pthread_mutex_lock(&cq->lock);
}

static inline void ibvc_cq_unlock(struct ibvc_cq *cq)
{
	if (!ibvc_cq_batch_held(cq))
		pthread_mutex_unlock(&cq->lock);
}
int ibvc_dealloc_parent_domain(struct ibvc_pd *pd);
struct ibv_td *ibvc_alloc_td_op(struct ibv_context *ctx,
				struct ibv_td_init_attr *attr);
int ibvc_dealloc_td_op(struct ibv_td *td);
struct ibv_pd *ibvc_alloc_parent_domain_op(struct ibv_context *ctx,
					   struct ibv_parent_domain_init_attr *attr);

/* mr.c, dm.c: memory regions, device memory */
struct ibvc_dm {
	struct ibv_dm dm;			/* must be first */
	void *base;				/* our own mapping */
	size_t len;
	unsigned int nmrs;			/* MRs on it, under dm_lock */
	bool let_go;				/* unimported: unmapped with
						 * its last MR, under dm_lock */
};

struct ibvc_mr {
	struct ibv_mr mr;			/* must be first */
	struct ibvc_dm *dm;			/* the device memory it is on */
	unsigned int access;			/* as registered (rereg needs it) */
	bool tabled;				/* its iova is its address: in
						 * the context's mrtab */
	bool imported;				/* ibv_import_mr's: another
						 * context's, not to rereg */
};

/*
 * backing.c: if [addr, addr + len) lies in one MAP_SHARED mapping of a
 * file: a new fd of that file (read-write if `writable`, the caller
 * closes it) and the file offset of addr.  Else a negative errno
 * (-ENOENT: not such a range).
 */
int ibvc_backing_file(const void *addr, size_t len, bool writable, int *fd,
		      uint64_t *offset);

int ibvc_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
		unsigned int access, struct ibv_mr **ret_mr);
void ibvc_dm_put(struct ibvc_dm *dm);
struct ibv_dm *ibvc_alloc_dm_op(struct ibv_context *ctx,
				struct ibv_alloc_dm_attr *attr);
int ibvc_free_dm_op(struct ibv_dm *dm);
struct ibv_mr *ibvc_reg_dm_mr_op(struct ibv_pd *pd, struct ibv_dm *dm,
				 uint64_t dm_offset, size_t length,
				 unsigned int access);

/* clock.c: the device clock of CQE timestamps (CLOCK_MONOTONIC, ns) */
uint64_t ibvc_now_ns(void);
uint64_t ibvc_clock_to_wallclock_ns(uint64_t stamp);
int ibvc_query_rt_values_op(struct ibv_context *ctx, struct ibv_values_ex *values);
int ibvc_advise_mr_op(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
		      uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge);
/*
 * The CQ consumer both poll APIs share (poll.c), under the CQ lock: take
 * the next CQE into *cqe (false: none), reading the engine's tail into
 * *seen only once all CQEs below it were taken; then release the taken
 * slots to the engine once per batch.  Purged CQEs (ring.h) are skipped.
 */
bool ibvc_cq_ring_take(struct ibvc_cq_ring *ring, uint32_t *seen,
		       struct ibvd_cqe *cqe);
/* The same, stopping at `end`, a position the engine has published. */
bool ibvc_cq_ring_take_below(struct ibvc_cq_ring *ring, uint32_t end,
			     struct ibvd_cqe *cqe);
void ibvc_cq_ring_release(struct ibvc_cq_ring *ring);
/* Under the CQ lock: would a poll of cq find nothing? */
bool ibvc_cq_idle(struct ibvc_cq *cq);
int ibvc_req_notify_cq_op(struct ibv_cq *cq, int solicited_only);

/* ---- queries (query.c) ------------------------------------------------- */

/* verbs_context ops (size-aware). */
int ibvc_query_port_op(struct ibv_context *ctx, uint8_t port_num,
		       struct ibv_port_attr *attr, size_t attr_len);
int ibvc_query_device_ex_op(struct ibv_context *ctx,
			    const struct ibv_query_device_ex_input *input,
			    struct ibv_device_attr_ex *attr, size_t attr_size);

/* ---- memory windows (mw.c; binding in post.c) ---------------------------- */

struct ibv_mw *ibvc_alloc_mw_op(struct ibv_pd *pd, enum ibv_mw_type type);
int ibvc_dealloc_mw_op(struct ibv_mw *mw);
int ibvc_bind_mw_op(struct ibv_qp *qp, struct ibv_mw *mw,
		    struct ibv_mw_bind *mw_bind);
/* The BIND_MW fields of a send WQE header. */
void ibvc_fill_bind(struct ibvd_send_wqe *h, const struct ibv_mw *mw,
		    uint32_t rkey, const struct ibv_mw_bind_info *info);

/* ---- public-boundary error conversion ---------------------------------- */

/*
 * For verbs that return a positive errno ("int" verbs, abi.md §5.8).  A
 * failure sets errno too: under rdma-core the failed system call beneath
 * the verb leaves it so, and programs print strerror(errno) (qperf).
 */
static inline int ibvc_errno_ret(int ret)
{
	if (ret < 0)
		ret = -ret;
	if (ret)
		errno = ret;
	return ret;
}

/* For verbs that return -1 and set errno. */
static inline int ibvc_minus_one_ret(int ret)
{
	if (ret >= 0)
		return ret;
	errno = -ret;
	return -1;
}

/* For creators: NULL with errno set from a negative errno. */
static inline void *ibvc_null_ret(int ret)
{
	errno = -ret;
	return NULL;
}

#endif /* IBVC_VERBS_H */
