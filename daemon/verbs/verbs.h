/*
 * The control path of the verbs objects (PD, MR, completion channel, CQ,
 * QP, SRQ, AH, multicast): request handlers for the 0x04xx messages and
 * what their files share.  The object model itself, and the locking rules
 * the engine relies on, are in objects.h.
 *
 * Every handler runs on the control thread, on a device-context session
 * (request.c's table), and returns 0 or a negative errno.  Objects are
 * found by handle in the context's table, so a handle of another
 * connection, a stale one or one of the wrong kind is simply not found
 * (EINVAL, as the kernel answers an unknown uverbs handle).
 *
 * Layer verbs/: it calls server/ (call.h, its session), engine/ (engine.h),
 * tenant/, core/, common/ and the protocol; never cm/ or admin/, which
 * build on it.
 */
#ifndef IBVD_VERBS_H
#define IBVD_VERBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/handle.h"
#include "core/objects.h"
#include "ibverbsd.pb-c.h"

struct ibvd_call;
struct ibvd_context;

/*
 * Limits on what one context may hold, so that no client can exhaust the
 * daemon's memory or fds.  Object counts per kind are the device's
 * max_* attributes (query.c), applied per context; these are the rest.
 */
#define IBVD_CTX_MAX_RING_BYTES	(256ull << 20)	/* all its rings together */
/*
 * And all the contexts of one uid together: sixteen contexts' worth.  The
 * rings are the daemon's memory (CQ slots it writes, its pages); without
 * this, a uid's 1,024 sessions could hold 256 GiB of them.
 */
#define IBVD_UID_MAX_RING_BYTES	(16 * IBVD_CTX_MAX_RING_BYTES)
/* of which its QPs' staging blocks (rings/staging.c) at most */
#define IBVD_CTX_MAX_STAGING_BYTES (64ull << 20)
/* Same-host direct pairs made by one uid's QPs (rings/direct.c) */
#define IBVD_UID_MAX_DIRECT_PAIRS	256u
/* MRs of one uid that the daemon maps to copy them, and their bytes (mr/map.c) */
#define IBVD_UID_MAX_MAPPED_MRS	1024u
#define IBVD_UID_MAX_MAPPED_BYTES	(2ull << 40)
/* Shared XRC domains one uid made, each holding its file (xrc/xrcd.c) */
#define IBVD_UID_MAX_SHARED_XRCDS	1024u
/*
 * Each channel holds a daemon fd; librdmacm makes two per QP it creates
 * CQs for (cmtime opens hundreds of connections in one context).
 */
#define IBVD_CTX_MAX_CHANNELS	4096
#define IBVD_CTX_MAX_MCAST	1024		/* multicast attachments */
/* Device memory: one allocation's most (max_dm_size), and a context's. */
#define IBVD_MAX_DM_SIZE	(256u * 1024u)
/* each keeps a memfd open in the daemon (mr/dm.c): few, as on a NIC */
#define IBVD_CTX_MAX_DMS	32
#define IBVD_MAX_INLINE		1024		/* max_inline_data of a QP */

/* ---- context.c: what every handler asks of its context ------------------ */

/*
 * The context of the calling session (the table admits only contexts).
 * NULL after a reply failed to go out: the session closed and left its
 * context, which, if it was the last member, freed every object in it; so
 * the handler must not touch them.  (An object whose reply was lost in a
 * context that other processes share stays until the context goes.)
 */
struct ibvd_context *ibvd_call_ctx(const struct ibvd_call *call);

/*
 * The memory the calling process attached (ATTACH_MEMORY), or NULL: each
 * process sharing a context attaches its own, and its MRs are in it.
 */
struct ibvd_mem *ibvd_call_mem(const struct ibvd_call *call);
void ibvd_call_set_mem(const struct ibvd_call *call, struct ibvd_mem *mem);

/*
 * Give obj a handle of the given kind in ctx, unless the context already
 * holds the device's maximum of that kind (-ENOMEM).
 */
int ibvd_obj_add(struct ibvd_context *ctx, enum ibvd_obj_kind kind,
		 void *obj, uint32_t *ret_handle);

/* Device limits, as QUERY_DEVICE/QUERY_PORT report them. */
struct ibvd_limits {
	uint64_t max_mr_size;
	uint32_t max_qp_wr;
	uint32_t max_sge;
	uint32_t max_cqe;
	uint32_t max_srq_wr;
	uint32_t max_srq_sge;
	uint32_t max_qp_rd_atom;
	uint32_t max_qp_init_rd_atom;
	uint32_t max_mcast_grp;
	uint32_t max_mcast_qp_attach;
	uint32_t max_mtu;		/* enum ibv_mtu */
	uint32_t pkey_tbl_len;
	uint32_t gid_tbl_len;
};
void ibvd_ctx_limits(const struct ibvd_context *ctx, struct ibvd_limits *lim);

/* ---- rings/: queue memory (the ring arena, rings carved from it) ---- */

/*
 * Bytes a ring of nslots slots of stride bytes charges to its context's
 * ring budget (SIZE_MAX if it could never fit).
 */
size_t ibvd_ring_charge(uint32_t nslots, uint32_t stride);
/*
 * Bytes of ctx's arena taken by a ring or a staging block: within the
 * context's IBVD_CTX_MAX_RING_BYTES and its uid's IBVD_UID_MAX_RING_BYTES,
 * or -ENOMEM.  Given back by ibvd_ctx_ring_uncharge.
 */
int ibvd_ctx_ring_charge(struct ibvd_context *ctx, uint64_t bytes);
void ibvd_ctx_ring_uncharge(struct ibvd_context *ctx, uint64_t bytes);
/* Undo an uncharge, whatever the caps: the bytes were counted before. */
void ibvd_ctx_ring_recharge(struct ibvd_context *ctx, uint64_t bytes);
/*
 * Carve a ring of nslots x stride from ctx's arena, its slots in the
 * engine half (CQs) or the client half (work queues), zeroed, charged to
 * ctx's ring budget: 0, or -ENOMEM past the budget or the arena.
 */
int ibvd_ring_alloc(struct ibvd_context *ctx, struct ibvd_ring *r,
		    uint32_t nslots, uint32_t stride, bool engine_slots);
/* Give r's blocks back to its arena and its bytes to ctx's budget. */
void ibvd_ring_free(struct ibvd_context *ctx, struct ibvd_ring *r);
/*
 * A copy of r, headers, slots and all, in to's arena and charged to to's
 * budget (a zeroed ring if r has none): an XRC target's rings go with its
 * new owner, so that the arena of the context that made it can go with
 * that context.  Under the objects write lock (no engine pass reads r
 * meanwhile).  0 or -ENOMEM; the caller frees whichever of the two it
 * does not keep.
 */
int ibvd_ring_copy(struct ibvd_context *to, const struct ibvd_ring *r,
		   struct ibvd_ring *copy);
/*
 * Resizing a ring moves only its slots: its headers, whose words the
 * client and the engine hold on to, stay.  ibvd_ring_new_slots makes *to
 * a copy of r with nslots new zeroed slots in the same half, their bytes
 * charged to ctx; whichever of the two is left over goes with
 * ibvd_ring_free_slots (its slots and their charge, never the headers).
 */
int ibvd_ring_new_slots(struct ibvd_context *ctx, const struct ibvd_ring *r,
			uint32_t nslots, struct ibvd_ring *to);
void ibvd_ring_free_slots(struct ibvd_context *ctx, struct ibvd_ring *r);
/* Counters [lo, hi) of a ring being resized, copied from `from` to `to`. */
struct ibvd_ring_copied {
	uint32_t lo, hi;
};
/*
 * The bulk of a resize, without the objects lock (a full ring is up to
 * 64 MiB, and under the lock every engine thread would wait for it):
 * copy from `from` to `to` each slot from done->lo (done->hi = done->lo
 * on entry) to the tail at `tail_word` (read first as `tail`), at the
 * same counter values, in rounds while new ones keep coming, until what
 * is left for the caller's copy under the lock is small or would not
 * fit, or the tail went back (a client that writes it).  The caller
 * knows that what it copies here stays valid.
 */
void ibvd_ring_precopy(const struct ibvd_ring *from, const struct ibvd_ring *to,
		       const uint32_t *tail_word, uint32_t tail,
		       struct ibvd_ring_copied *done);
/* At most this many slots are left for the copy under the lock. */
#define IBVD_RING_PRECOPY_LEFT	1024u
/* Slots of counters [lo, hi) from `from` to `to`, each at its place. */
void ibvd_ring_slots_copy(const struct ibvd_ring *from,
			  const struct ibvd_ring *to, uint32_t lo, uint32_t hi);
/* Where r lies, for a create reply. */
void ibvd_ring_place(const struct ibvd_ring *r, Ibvd__RingPlace *place);
/*
 * ctx's ring arena, made at OPEN_DEVICE (*ret_fd for the reply) and
 * dropped at teardown; closing, from the start of the teardown, its
 * rings' blocks are no longer given back one by one (ibvd_arena_closing).
 */
int ibvd_ctx_rings_open(struct ibvd_context *ctx, int *ret_fd);
void ibvd_ctx_rings_closing(struct ibvd_context *ctx);
void ibvd_ctx_rings_close(struct ibvd_context *ctx);

/* ---- mem.c: client memory and RLIMIT_MEMLOCK -------------------------- */

int ibvd_req_attach_memory(struct ibvd_call *call);
void ibvd_mem_get(struct ibvd_mem *mem);
void ibvd_mem_put(struct ibvd_mem *mem);
/*
 * Check that [addr, addr + len) is mapped in the client with read (and,
 * if writable, write) permission: 0, -EFAULT, or -ESRCH if the process
 * is gone.
 */
int ibvd_mem_check_range(struct ibvd_call *call, struct ibvd_mem *mem,
			 uint64_t addr, uint64_t len, bool writable);
/* Pages spanned by [addr, addr + len). */
uint64_t ibvd_mem_pages(uint64_t addr, uint64_t len);
/*
 * Charge `pages` more to the client process's pinned total, releasing
 * `release` pages of a registration being replaced, under its
 * RLIMIT_MEMLOCK as the kernel would: -ENOMEM past it.
 */
int ibvd_mem_charge(struct ibvd_call *call, struct ibvd_mem *mem,
		    uint64_t pages, uint64_t release);
/*
 * Undo ibvd_mem_charge(call, mem, charged, pages): the process and tenant
 * hold pages again, without limit checks, so it cannot fail.
 */
void ibvd_mem_restore(struct ibvd_mem *mem, uint64_t pages, uint64_t charged);
void ibvd_mem_uncharge(struct ibvd_mem *mem, uint64_t pages);

/* ---- mr/map.c: an MR's mapping of the client's shared file ----------- */

/* A mapping made for an MR, not installed yet. */
struct ibvd_mr_mapping {
	void *map;			/* NULL: none */
	size_t map_len;
	uint8_t *base;			/* the byte at file offset `offset` */
	bool writable;
	uint64_t file_offset;		/* of map's first byte */
	/* the file itself, kept for grants (lease.h) of an MR with remote
	 * access; closed with the mapping */
	int fd;
	bool keeps_fd;
	uid_t fd_uid;			/* of the process that passed it */
	/* the tenant whose count of mapped MRs holds it (map.c) */
	struct ibvd_tenant *counted;
};

/*
 * Map [offset, offset + length) of the regular file fd, writable if asked
 * (which the fd's open mode must allow), counted as one of t's mapped
 * MRs: 0, or a negative errno and *m empty (-EMFILE: t, or the daemon,
 * has as many as it may).
 */
int ibvd_mr_map_file(struct ibvd_tenant *t, int fd, uint64_t offset,
		     uint64_t length, bool writable, struct ibvd_mr_mapping *m);
/* Unmap a mapping never installed. */
void ibvd_mr_mapping_drop(struct ibvd_mr_mapping *m);
/*
 * Give mr the mapping m (empty: none; m is emptied), unmapping its old
 * one, and set its tier.  Objects lock held for writing once mr is
 * registered.
 */
void ibvd_mr_mapping_install(struct ibvd_mr *mr, struct ibvd_mr_mapping *m);

/* ---- handlers and destructors, per object family ------------------- */

int ibvd_req_alloc_pd(struct ibvd_call *call);
int ibvd_req_dealloc_pd(struct ibvd_call *call);
void ibvd_pd_destroy(struct ibvd_pd *pd);

/* import.c: sharing a context between processes */
int ibvd_req_import_device(struct ibvd_call *call);
int ibvd_req_import_pd(struct ibvd_call *call);
int ibvd_req_import_mr(struct ibvd_call *call);

/* dm.c: device memory, shareable by the context's processes */
int ibvd_req_alloc_dm(struct ibvd_call *call);
int ibvd_req_free_dm(struct ibvd_call *call);
int ibvd_req_import_dm(struct ibvd_call *call);
void ibvd_dm_destroy(struct ibvd_dm *dm);

int ibvd_req_reg_mr(struct ibvd_call *call);
int ibvd_req_reg_mr_shared(struct ibvd_call *call);
int ibvd_req_rereg_mr(struct ibvd_call *call);
int ibvd_req_rereg_mr_shared(struct ibvd_call *call);
int ibvd_req_advise_mr(struct ibvd_call *call);
int ibvd_req_dereg_mr(struct ibvd_call *call);
void ibvd_mr_destroy(struct ibvd_mr *mr);
int ibvd_req_alloc_mw(struct ibvd_call *call);
int ibvd_req_dealloc_mw(struct ibvd_call *call);
void ibvd_mw_destroy(struct ibvd_mw *mw);
void ibvd_mw_qp_gone(struct ibvd_qp *qp);

int ibvd_req_create_comp_channel(struct ibvd_call *call);
int ibvd_req_destroy_comp_channel(struct ibvd_call *call);
void ibvd_channel_destroy(struct ibvd_comp_channel *ch);
/* delta CQs more (or fewer) use ch: the events its socket holds follow. */
void ibvd_channel_cqs(struct ibvd_comp_channel *ch, int delta);
int ibvd_req_channel_poke(struct ibvd_call *call);
/* ch's wake-up pair's writing end, made on first use (or -errno) */
int ibvd_channel_poke(struct ibvd_comp_channel *ch);
/*
 * Make one spare channel socket pair ahead of need, on the control
 * thread's idle time (server/loop.c): false when the spares are all made
 * or one cannot be.  ibvd_channel_spares_free closes them (shutdown).
 */
bool ibvd_channel_spare_make(void);
void ibvd_channel_spares_free(void);
/* A new channel in the caller's context; *theirs is the client's end. */
int ibvd_channel_new(struct ibvd_call *call, struct ibvd_comp_channel **ret_ch,
		     int *theirs);
/*
 * Undo ibvd_channel_new before `theirs` went anywhere: the socket pair
 * goes back to the spares, so a refused request leaves the daemon as it
 * found it.
 */
void ibvd_channel_unmake(struct ibvd_comp_channel *ch, int theirs);

int ibvd_req_create_cq(struct ibvd_call *call);
int ibvd_req_resize_cq(struct ibvd_call *call);
int ibvd_req_destroy_cq(struct ibvd_call *call);
void ibvd_cq_destroy(struct ibvd_cq *cq);
/*
 * A new CQ in the caller's context as req asks; ch, if not NULL, is its
 * channel instead of req->channel.
 */
int ibvd_cq_new(struct ibvd_call *call, const Ibvd__CreateCq *req,
		struct ibvd_comp_channel *ch, struct ibvd_cq **ret_cq);
/* What CREATE_CQ answers about cq; place is filled and linked. */
void ibvd_cq_to_msg(const struct ibvd_cq *cq, Ibvd__CreateCqReply *m,
		    Ibvd__RingPlace *place);

/* The QP a handle names in the caller's context, or NULL (EINVAL noted). */
struct ibvd_qp *ibvd_call_qp(struct ibvd_call *call, uint32_t handle);
int ibvd_req_create_qp(struct ibvd_call *call);
int ibvd_req_modify_qp(struct ibvd_call *call);
/* MODIFY_QP's work on qp (m NULL: no attributes); errors noted on call. */
int ibvd_qp_modify(struct ibvd_call *call, struct ibvd_qp *qp,
		   const Ibvd__QpAttr *m, uint32_t mask);
/*
 * The same, for a caller that moves qp again at once (the CM's RTR before
 * RTS): the engine is not woken for this move, only for the next one.  A
 * wakeup of its thread takes a CPU that the caller's client needs.
 */
int ibvd_qp_modify_first(struct ibvd_call *call, struct ibvd_qp *qp,
			 const Ibvd__QpAttr *m, uint32_t mask);
int ibvd_req_query_qp(struct ibvd_call *call);
int ibvd_req_destroy_qp(struct ibvd_call *call);
/* qp's reset or destroy gave back its wire state: so does its charge. */
void ibvd_qp_wire_uncharge(struct ibvd_qp *qp);

/* ---- direct.c: the direct transport's transit rings --------------------- */

/* The config's "engine": { "direct": ... }: pair QPs from now on or not. */
void ibvd_direct_configure(bool enabled);
/*
 * qp entered RTR or RTS (write lock held): if its peer is a QP of this
 * daemon connected back to it, give both transit rings.
 */
void ibvd_direct_pair_try(struct ibvd_qp *qp);
/* qp's state or attributes changed (write lock held): may it send direct? */
void ibvd_direct_update(struct ibvd_qp *qp);
/*
 * Tenants' limits changed (control thread): a QP whose tenant has a
 * bandwidth limit now sends every SEND through the engine, which charges
 * it; one whose limit was lifted may use its rings again.
 */
void ibvd_direct_limits_changed(void);
/*
 * ctx got a second member (ibv_import_device; control thread): its QPs'
 * libraries no longer place WRITEs with immediate themselves.
 */
void ibvd_direct_ctx_shared(struct ibvd_context *ctx);
/* qp is reset or destroyed (write lock held): it lets go of its rings. */
void ibvd_direct_leave(struct ibvd_qp *qp);
int ibvd_req_qp_direct(struct ibvd_call *call);
int ibvd_req_qp_direct_ud(struct ibvd_call *call);
int ibvd_req_qp_direct_leave(struct ibvd_call *call);

/* ---- rings/staging.c: WRITE payloads copied at post ---------------------- */

/* Bytes of each QP's block from now on (engine.staging), 0 for none. */
void ibvd_staging_configure(uint32_t bytes);
int ibvd_req_qp_staging(struct ibvd_call *call);
/* qp is destroyed (write lock held): its block goes back to the arena. */
void ibvd_staging_free(struct ibvd_qp *qp);
/*
 * The QP of handle and its peer in a direct pair, for a request about
 * them: 0, or the request's error (no such QP, no pair).
 */
int ibvd_direct_call_pair(struct ibvd_call *call, uint32_t handle,
			  struct ibvd_qp **qp, struct ibvd_qp **peer);
/*
 * Revoke every grant (common/lease.h) into ctx's memory and wait for
 * copies under them to end: before a granted MR of ctx changes or goes.
 */
void ibvd_direct_revoke_into(const struct ibvd_context *ctx);

/* ---- lease.c: one-sided direct access to a peer's MR ------------------ */

struct ibvd_lease *ibvd_direct_lease(const struct ibvd_direct *d,
				     unsigned int side);
/*
 * A revocation in two steps, so that all the sides one request revokes
 * wait together: void each side's grants (ibvd_direct_lease_void), then
 * wait for the copies under them, each at most its window from `since`,
 * the time of the first void (ibvd_direct_lease_settle).  An honest copy
 * anywhere gets the whole window, however many libraries hold their
 * leases, and the control thread waits about one window in all.
 */
void ibvd_direct_lease_void(struct ibvd_direct *d, unsigned int side);
void ibvd_direct_lease_settle(struct ibvd_direct *d, unsigned int side,
			      uint64_t since);
/* Both steps for one side. */
void ibvd_direct_lease_revoke(struct ibvd_direct *d, unsigned int side);
int ibvd_req_qp_remote_mr(struct ibvd_call *call);

void ibvd_qp_destroy(struct ibvd_qp *qp);
/*
 * ctx lets go of its handle on qp (DESTROY_QP, teardown), objects lock
 * held for writing: qp is destroyed, unless it is an XRC target another
 * context still holds.
 */
void ibvd_qp_release(struct ibvd_context *ctx, uint32_t handle,
		     struct ibvd_qp *qp);

/* ---- qp_bundle.c: rdma_create_qp in one CREATE_QP --------------------- */

/*
 * What cm/, which builds on verbs/, does for CREATE_QP (main.c fills it):
 * the INIT attributes (attr, *mask) of the CM id ref names, if it is the
 * caller's (its session's token) and on qp's device; the id then owns qp
 * (CM_ACCEPT, CM_ESTABLISH may move it).  0 or a negative errno noted on
 * call.
 */
struct ibvd_verbs_cm {
	int (*qp_init)(struct ibvd_call *call, const Ibvd__CmQpRef *ref,
		       const struct ibvd_qp *qp, Ibvd__QpAttr *attr,
		       uint32_t *mask);
};
extern struct ibvd_verbs_cm ibvd_verbs_cm;

/* A CQ made with the QP, and its channel (theirs: the client's end). */
struct ibvd_qp_bundle_side {
	struct ibvd_cq *cq;
	struct ibvd_comp_channel *channel;
	int theirs;
};

struct ibvd_qp_bundle {
	struct ibvd_qp_bundle_side send, recv;
	bool has_init;
	uint32_t init_mask;
	Ibvd__QpAttr init_attr;
	/* the reply's parts */
	Ibvd__NewCqReply send_msg, recv_msg;
	Ibvd__CreateCqReply send_cq, recv_cq;
	Ibvd__RingPlace send_place, recv_place;
	Ibvd__CmInitQpAttrReply init_msg;
	int fds[2];
	unsigned int nfds;
};

/*
 * The CQs (and channels) req asks for; named is req with their handles
 * in send_cq/recv_cq, for the QP to find.
 */
int ibvd_qp_bundle_make(struct ibvd_call *call, const Ibvd__CreateQp *req,
			struct ibvd_qp_bundle *b, Ibvd__CreateQp *named);
/* The new qp to INIT with its CM id's attributes, if req names one. */
int ibvd_qp_bundle_init(struct ibvd_call *call, const Ibvd__CreateQp *req,
			struct ibvd_qp *qp, struct ibvd_qp_bundle *b);
/* The bundle's parts in the reply, its fds in b->fds. */
void ibvd_qp_bundle_to_msg(struct ibvd_qp_bundle *b, Ibvd__CreateQpReply *m);
/* After the reply: close our copies of the client's channel ends. */
void ibvd_qp_bundle_sent(struct ibvd_qp_bundle *b);
/* Destroy what was made (no QP uses the CQs any more). */
void ibvd_qp_bundle_undo(struct ibvd_qp_bundle *b);

int ibvd_req_create_srq(struct ibvd_call *call);
int ibvd_req_modify_srq(struct ibvd_call *call);
int ibvd_req_query_srq(struct ibvd_call *call);
int ibvd_req_destroy_srq(struct ibvd_call *call);
void ibvd_srq_destroy(struct ibvd_srq *srq);

int ibvd_req_alloc_xrcd(struct ibvd_call *call);
int ibvd_req_open_xrcd(struct ibvd_call *call);
int ibvd_req_close_xrcd(struct ibvd_call *call);
/* The XRC domain a handle names in the caller's context, or NULL (EINVAL). */
struct ibvd_xrcd *ibvd_call_xrcd(struct ibvd_call *call, uint32_t handle);
/* ctx lets go of handle on x (CLOSE_XRCD, teardown); x may be freed. */
void ibvd_xrcd_close(struct ibvd_context *ctx, uint32_t handle,
		     struct ibvd_xrcd *x);
/* An SRQ or target QP of x comes (+1) or goes (-1); x may be freed. */
void ibvd_xrcd_use(struct ibvd_xrcd *x, int d);

/* xrc/qp.c: XRC target QPs, shared by the contexts that hold them. */
int ibvd_req_open_qp(struct ibvd_call *call);
/* Join a new target QP to its domain, held by its creator. */
int ibvd_xrc_tgt_init(struct ibvd_qp *qp, struct ibvd_xrcd *x);
/* The target leaves its domain, its holds freed (ibvd_qp_destroy). */
void ibvd_xrc_tgt_fini(struct ibvd_qp *qp);
/*
 * ctx lets go of its handle on target qp (DESTROY_QP, teardown); objects
 * lock held for writing.  True if qp lives on (another context holds it:
 * it may have a new owner), false if this was the last hold and the
 * caller destroys it.
 */
bool ibvd_xrc_tgt_release(struct ibvd_qp *qp, struct ibvd_context *ctx,
			  uint32_t handle);
/* The SRQ goes: no target QP of its domain points at it any more. */
void ibvd_xrc_srq_gone(struct ibvd_srq *srq);

int ibvd_req_create_ah(struct ibvd_call *call);
int ibvd_req_destroy_ah(struct ibvd_call *call);
void ibvd_ah_destroy(struct ibvd_ah *ah);
/*
 * Check an address vector against dev and fill av: -EINVAL with a
 * message on call if it is not one the device can reach.  `connected`:
 * an RC/UC path, which must name one unicast destination.
 */
int ibvd_av_from_msg(struct ibvd_call *call, const struct ibvd_device *dev,
		     const Ibvd__AhAttr *msg, bool connected, struct ibvd_av *av);

int ibvd_req_attach_mcast(struct ibvd_call *call);
int ibvd_req_detach_mcast(struct ibvd_call *call);
/* Leave every group qp joined (QP destruction); objects lock held. */
void ibvd_mcast_detach_all(struct ibvd_qp *qp);
/*
 * Every QP of ctx leaves its groups, the devices' memberships on their
 * networks ended outside the objects lock (context teardown, first).
 */
void ibvd_mcast_detach_ctx(struct ibvd_context *ctx);

/* Destroy every object of ctx, children first (context teardown). */
void ibvd_objects_free_all(struct ibvd_context *ctx);

#endif /* IBVD_VERBS_H */
