/*
 * Shared-memory queues between the client library and the daemon's engine.
 *
 * This header is the whole contract of the data path: the client library
 * (client/libibverbs/) produces send/receive work requests and consumes
 * completions here without any system call; the engine (daemon/engine/)
 * does the opposite.  Both sides include it; nothing else about the data
 * path is shared.
 *
 * Every queue (SQ, RQ, SRQ, CQ) lives in its device context's ring arena:
 * one sealed memfd of IBVD_ARENA_BYTES per context, which the daemon maps
 * once and passes to the client once (OPEN_DEVICE), so a queue costs no
 * file, no mapping and no system call on either side.  The arena has two
 * halves:
 *
 *	[0, IBVD_ARENA_HALF)	engine half: written by the engine; the
 *				client library maps it read-only
 *	[IBVD_ARENA_HALF, IBVD_ARENA_BYTES)
 *				client half: written by the client; the
 *				engine reads it and never trusts it
 *
 * The read-only mapping keeps an honest library from scribbling on the
 * engine half, not a hostile process: the memfd is the client's too, and
 * nothing stops it mapping the engine half writable.  So the engine half
 * is trusted for nothing that concerns anyone but its context: the words
 * the engine reads back from it (a queue's error word, a CQ's slots when
 * it purges them, the direct transport's counts) decide only what
 * happens to that context's own queues.
 *
 * A queue is three blocks, each given by its offset from the arena's start
 * (the daemon names them in the create reply, proto RingPlace):
 *
 *	engine header	IBVD_RING_HDR bytes in the engine half:
 *			struct ibvd_{wq,cq}_engine
 *	client header	IBVD_RING_HDR bytes in the client half:
 *			struct ibvd_{wq,cq}_client
 *	slots		nslots * stride bytes, both powers of two: work-queue
 *			slots in the client half (the client writes them),
 *			CQ slots in the engine half (read-only to the client)
 *
 * Blocks are aligned to their size (to a page at most), so a header or a
 * slot never straddles a cache line it shares with another queue's.  A
 * destroyed queue's blocks are reused for later queues of the same
 * context, zeroed first.
 *
 * Counters are free-running 32-bit values ("produced so far", "consumed so
 * far"); a slot index is counter & (nslots - 1), and the number of entries
 * in a queue is the unsigned difference, so no slot is wasted.  Each side
 * publishes its counter with a release store after writing the entries, and
 * reads the other side's with an acquire load (barrier.h).
 *
 * The engine never reads queue geometry (nslots, stride) from shared
 * memory: it keeps its own copy from creation time.  A counter the client
 * wrote that is impossible (more entries than slots) puts that queue's QP in
 * the error state; it never makes the engine touch memory outside the queue.
 */
#ifndef IBVD_RING_H
#define IBVD_RING_H

#include <stdint.h>

#define IBVD_PAGE_SIZE		4096u
#define IBVD_CACHELINE		64u

#define IBVD_ARENA_HALF		(1ull << 30)
#define IBVD_ARENA_BYTES	(2 * IBVD_ARENA_HALF)
#define IBVD_ARENA_ENGINE	0ull			/* engine half */
#define IBVD_ARENA_CLIENT	IBVD_ARENA_HALF		/* client half */
#define IBVD_RING_HDR		128u	/* an engine or a client header */

#define IBVD_RING_MAX_SLOTS	(1u << 16)
/*
 * CQs may be larger: middleware sizes one CQ for many peers (libfabric's
 * ofi_rxm asks for 262,144 entries), and a CQ's slots are read-only to the
 * client, so its unused part is never more than untouched file pages.
 * 4 Mi entries of 64 bytes, as large as common NICs allow.
 */
#define IBVD_CQ_MAX_SLOTS	(1u << 22)

/* ---- work queues: SQ, RQ, SRQ -------------------------------------- */

/* Engine header of a work queue. */
struct ibvd_wq_engine {
	uint32_t head;		/* WQEs the engine has taken (copied out) */
	uint32_t error;		/* non-zero: the engine stopped this queue */
	uint8_t pad[IBVD_CACHELINE - 8];
	/* SRQ only: the limit armed by ibv_modify_srq, as the engine sees it */
	uint32_t srq_limit;
	/*
	 * SQ of an RC or UC QP, the direct transport (transit.h): non-zero
	 * while the QP shares transit rings with its peer, a number the
	 * library passes to QP_DIRECT to map them; 0 once they are gone.
	 */
	uint32_t direct_gen;
	/* non-zero: the library may send SENDs on the ring (RTS, RC with
	 * rnr_retry 7 or UC, the peer still there) */
	uint32_t direct_send_ok;
	/* non-zero: the first direct SEND the peer has not taken failed with
	 * this ibv_wc_status, and the later ones were flushed */
	uint32_t direct_fail_status;
	/*
	 * SQ: WQEs whose completion the engine has written (head moves
	 * first, so that a client that sees a completion finds its slot
	 * free): a library completing SENDs of its own after them waits
	 * for this, not for head.
	 */
	uint32_t direct_retired;
	/*
	 * SQ of a paired RC or UC QP: non-zero while the QP's access flags
	 * let peers WRITE into its MRs, so that its library may place an
	 * RDMA WRITE with immediate that came on the ring (transit.h)
	 */
	uint32_t direct_remote_write;
	/*
	 * SQ of a paired UC or UD QP: the engine gave up waiting for the
	 * receiver (its library held its claim too long) with the ring
	 * filled up to this `produced` (counted as direct_produced is; 0:
	 * never): the library completes its sends up to here as taken,
	 * while what the ring holds stays the receiver's
	 */
	uint64_t direct_dropped;
	/*
	 * SQ of a paired QP: how far the engine itself took the QP's ring
	 * (the `consumed` it released there, counted as direct_produced
	 * is); the library counts its sends taken at least this far,
	 * whatever the ring's `consumed` says now
	 */
	uint64_t direct_taken;
};

/* Client header of a work queue. */
struct ibvd_wq_client {
	uint32_t tail;		/* WQEs the client has published */
	uint8_t pad[IBVD_CACHELINE - 4];
	/*
	 * RQ or SQ of a QP in direct mode, or a basic SRQ of a soft device
	 * (transit.h): who takes its WQEs now (IBVD_WQ_CLAIM_*), and how
	 * many have been taken, the claim's holder's to move.  An RQ's or
	 * SRQ's receives are placed by a receiver's library or the engine;
	 * an SQ's SENDs that the engine has not started may go to the ring
	 * after all, moved by the library.  The engine takes an SQ's claim
	 * whatever the mode, so that a WQE it started before the QP was
	 * paired is never moved, and such an SRQ's for every message.
	 */
	uint32_t claim;
	uint32_t direct_head;
	/*
	 * SQ of a paired QP: its library's own copy of what it says in its
	 * ring's `sender_waits` and `wake` (transit.h), the one the engine
	 * acts on, since the peer's library can write the ring's
	 */
	uint32_t direct_sender_waits;
	uint64_t direct_wake;
	/*
	 * SQ of a paired QP: the cells written into its ring, as a 64-bit
	 * count whose low half is the ring's `produced`, stored before the
	 * ring's (transit.h); and the pairing it counts for (stored after
	 * a new pairing's first count).  The engine and the library go by
	 * these, which the peer cannot rewrite.
	 */
	uint64_t direct_produced;
	uint32_t direct_produced_gen;
};

#define IBVD_WQ_CLAIM_FREE	0u
#define IBVD_WQ_CLAIM_LIBRARY	1u
#define IBVD_WQ_CLAIM_ENGINE	2u

/* The devices' max_sge: no WQE holds more SGEs. */
#define IBVD_MAX_SGE	32

struct ibvd_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

/* Address vector of a UD send: a copy of the AH's attributes. */
struct ibvd_av {
	uint8_t dgid[16];	/* network order; valid when is_global */
	uint32_t flow_label;
	uint16_t dlid;
	uint8_t is_global;
	uint8_t sgid_index;
	uint8_t hop_limit;
	uint8_t traffic_class;
	uint8_t sl;
	uint8_t port_num;
};

/*
 * A send WQE: the fixed header, then either num_sge SGEs or inline_len bytes
 * of inline data (IBV_SEND_INLINE), up to the queue's stride.
 */
struct ibvd_send_wqe {
	uint64_t wr_id;
	uint32_t opcode;	/* enum ibv_wr_opcode */
	uint32_t send_flags;	/* enum ibv_send_flags */
	uint32_t num_sge;
	uint32_t inline_len;
	uint32_t imm_data;	/* network order, as in ibv_send_wr */
	uint32_t rkey;		/* RDMA and atomic operations */
	uint64_t remote_addr;	/* RDMA and atomic operations */
	uint64_t compare_add;	/* atomics */
	uint64_t swap;		/* atomics */
	uint32_t remote_qpn;	/* UD */
	uint32_t remote_qkey;	/* UD */
	struct ibvd_av av;	/* UD */
	/*
	 * BIND_MW, which also uses rkey (the window's new key), remote_addr
	 * (the start of the window in the MR's iova space) and compare_add
	 * (its length; 0 unbinds a type-1 window).  LOCAL_INV uses rkey (the
	 * key to invalidate), SEND_WITH_INV imm_data (the same, host order,
	 * as ibv_send_wr's invalidate_rkey).
	 */
	uint32_t mw_key;	/* the window's key as the client knows it */
	uint32_t mr_lkey;	/* the MR the window is bound to */
	uint32_t mw_access;	/* IBV_ACCESS_REMOTE_* */
	uint32_t xrc_srqn;	/* XRC: the SRQ at the target it lands in */
	/* struct ibvd_sge sge[num_sge] or uint8_t inline_data[inline_len] */
};

/* A receive WQE (RQ or SRQ): the header, then num_sge SGEs. */
struct ibvd_recv_wqe {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t pad;
	/* struct ibvd_sge sge[num_sge] */
};

#define IBVD_SEND_WQE_HDR	((uint32_t)sizeof(struct ibvd_send_wqe))

/*
 * Staging: an RDMA WRITE's payload copied by the library at post time
 * into a block of the client half that the daemon granted its QP
 * (QP_STAGING), so the engine reads it from the arena it maps instead of
 * from the client's memory with a system call of its own (the copy it
 * then makes into the target is the only one through the kernel).  Such a
 * WQE has IBVD_SEND_STAGED in send_flags and a struct ibvd_staged as its
 * body, in place of SGEs.  The block is a byte ring private to the
 * library: it fills it in posting order and takes room back as the
 * engine's SQ head passes the WQEs that used it, since the engine reads
 * a WQE's data, every chunk and every retransmission of it, before its
 * head moves past.  The engine checks only that [offset, offset + length)
 * lies inside the block it granted; what the block holds is the client's
 * own data, which it may spoil only for itself.
 */
#define IBVD_SEND_STAGED	(1u << 31)

/*
 * UD: the address handle the work request named is of another protection
 * domain than the QP's.  The WQE carries a copy of the AH's vector, so
 * only the library, which holds the AH, can tell; the engine completes
 * such a WQE with IBV_WC_LOC_QP_OP_ERR and sends nothing, as rxe does (a
 * verbs consumer may not address through another PD's AH).
 */
#define IBVD_SEND_FOREIGN_AH	(1u << 30)

struct ibvd_staged {
	uint32_t offset;	/* from the start of the QP's staging block */
	uint32_t length;	/* the message's, all of it here */
};
#define IBVD_RECV_WQE_HDR	((uint32_t)sizeof(struct ibvd_recv_wqe))

/* ---- completion queues ---------------------------------------------- */

/*
 * Notification requests, one-shot: the client arms by writing arm_seq one
 * past `fired` (and the kind in arm_flags).  Whoever makes a completion
 * that satisfies an armed request fires it by moving `fired` to arm_seq
 * with a compare-and-swap, and the winner alone sends the one event: the
 * engine for its CQEs (on the CQ's completion channel), the library for
 * what it placed from a transit ring (transit.h, "Blocking").  `fired` is
 * the one word both write; a client that scribbles on it changes only
 * which of its own completions raise events, never more than one each.
 *
 * An event that does not fit the channel's socket (an app that armed
 * again and again without reading) is owed instead: the daemon sets
 * `owed`, and the library hands out an event for the CQ in its place.
 * Owed events of one CQ merge into one until the library takes it.
 */
#define IBVD_ARM_NEXT		1u	/* any completion */
#define IBVD_ARM_SOLICITED	2u	/* solicited or error completions only */

/* Engine header of a CQ. */
struct ibvd_cq_engine {
	uint32_t tail;		/* CQEs written so far */
	uint32_t overflow;	/* non-zero once the CQ overran (CQ error) */
	uint8_t pad[IBVD_CACHELINE - 8];
	/*
	 * The daemon's count of the times a QP receiving on this CQ joined
	 * or left a direct pair (transit.h): a library that only polls
	 * looks for its QPs' rings when it changes, not just at a post.
	 */
	uint32_t direct_moves;
};

/* Client header of a CQ. */
struct ibvd_cq_client {
	uint32_t head;		/* CQEs the client has consumed */
	uint8_t pad[IBVD_CACHELINE - 4];
	uint32_t arm_seq;
	uint32_t arm_flags;	/* IBVD_ARM_* */
	uint32_t fired;		/* last arm_seq an event was sent for */
	uint32_t owed;		/* non-zero: an event that did not fit */
};

/* A completion: the fields of struct ibv_wc, in a fixed 64-byte slot. */
struct ibvd_cqe {
	uint64_t wr_id;
	uint32_t status;	/* enum ibv_wc_status */
	uint32_t opcode;	/* enum ibv_wc_opcode */
	uint32_t vendor_err;
	uint32_t byte_len;
	uint32_t imm_data;	/* network order; or the invalidated rkey */
	uint32_t qp_num;
	uint32_t src_qp;
	uint32_t wc_flags;
	uint16_t pkey_index;
	uint16_t slid;
	uint8_t sl;
	uint8_t dlid_path_bits;
	uint8_t pad0[2];
	uint64_t timestamp;	/* CLOCK_MONOTONIC ns when the engine pushed it */
	uint32_t seq;		/* tail value when written, +1: never 0 in a used slot */
	uint32_t flags;		/* IBVD_CQE_*: 0 when written */
};

#define IBVD_CQE_SIZE		64u

/*
 * Set by the daemon on the CQEs the client has not polled yet of a QP that
 * went back to RESET: the library skips them, so completions of the QP's
 * previous life never reach the app after it was reset (NIC providers
 * clean the CQ there likewise).
 */
#define IBVD_CQE_PURGED		1u
/*
 * Set by the engine on a CQE that fires a solicited-only arm (a solicited
 * SEND's, or an error): an arm the app makes with it still unpolled looks
 * for those (the library's ibvc_cq_missed).
 */
#define IBVD_CQE_SOLICITED	2u

/* ---- the context page: per device context --------------------------- */

/*
 * One page per context, shared like a queue: [0, 4096) engine page,
 * [4096, 8192) client page.
 *
 * Doorbells: the client publishes a queue's tail (release), then sets the
 * queue's bit in the client page's doorbell bitmap (and the summary bit of
 * that bitmap word), so the engine looks only at queues that have work and
 * never scans idle ones.  The engine clears a summary word and the bitmap
 * words it names with atomic exchanges before reading the queues, so a post
 * that races with the scan leaves its bit set for the next round.
 *
 * Sleeping: an engine thread with nothing to do for its idle budget sets
 * `sleeping` in every engine page it serves, issues a full fence, re-checks
 * the doorbells, and only then blocks on its eventfd.  A client, after
 * setting a doorbell bit, issues a full fence and reads `sleeping`; if set it
 * writes the context's kick eventfd.  Either the engine sees the bit or the
 * client sees `sleeping`: no wakeup is lost (ibvd_full_fence in barrier.h).
 */
#define IBVD_DOORBELL_BITS	16384u		/* doorbell slots per context */
#define IBVD_DOORBELL_WORDS	(IBVD_DOORBELL_BITS / 64u)
#define IBVD_SUMMARY_WORDS	(IBVD_DOORBELL_WORDS / 64u)

struct ibvd_ctx_engine {
	uint32_t sleeping;	/* the engine serving this context may sleep */
	uint8_t pad[IBVD_CACHELINE - 4];
	/*
	 * Bumped (release) by the daemon whenever its device's GID table may
	 * have changed, before the contexts hear GID_CHANGE: a library's copy
	 * of the table, fetched after it read a value, is good while the
	 * value stays.
	 */
	uint32_t gid_gen;
};

struct ibvd_ctx_client {
	uint64_t summary[IBVD_SUMMARY_WORDS];	/* bit w: doorbell word w is non-zero */
	uint8_t pad[IBVD_CACHELINE - 8 * IBVD_SUMMARY_WORDS % IBVD_CACHELINE];
	uint64_t doorbell[IBVD_DOORBELL_WORDS];	/* bit n: doorbell slot n rang */
};

#define IBVD_CTX_PAGE_SIZE	(2u * IBVD_PAGE_SIZE)

/* ---- helpers both sides use ------------------------------------------ */

static inline uint32_t ibvd_roundup_pow2(uint32_t v)
{
	uint32_t p = 1;

	while (p < v && p < 0x80000000u)
		p <<= 1;
	return p;
}

_Static_assert(sizeof(struct ibvd_send_wqe) == 112, "send WQE header layout");
_Static_assert(sizeof(struct ibvd_recv_wqe) == 16, "recv WQE header layout");
_Static_assert(sizeof(struct ibvd_sge) == 16, "SGE layout");
_Static_assert(sizeof(struct ibvd_staged) <= sizeof(struct ibvd_sge), "staged body fits one SGE");
_Static_assert(sizeof(struct ibvd_cqe) == IBVD_CQE_SIZE, "CQE layout");
_Static_assert(sizeof(struct ibvd_ctx_client) <= IBVD_PAGE_SIZE, "doorbells fit a page");
_Static_assert(sizeof(struct ibvd_wq_engine) <= IBVD_RING_HDR, "WQ engine header");
_Static_assert(sizeof(struct ibvd_wq_client) <= IBVD_RING_HDR, "WQ client header");
_Static_assert(sizeof(struct ibvd_cq_engine) <= IBVD_RING_HDR, "CQ engine header");
_Static_assert(sizeof(struct ibvd_cq_client) <= IBVD_RING_HDR, "CQ client header");

#endif /* IBVD_RING_H */
