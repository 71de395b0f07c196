/*
 * What the files of the library's direct transport share, and nothing
 * else includes; the rest of the library goes by its entry points in
 * ibvd_verbs.h.  direct_map.c maps the rings and lets go of them,
 * direct_send.c sends on them, direct_cqe.c makes the completions of
 * what went that way, direct_recv.c places what comes in, direct_events.c
 * fires the CQs' arms for those and wakes the peers, and direct_poll.c
 * polls and arms a CQ with direct QPs.
 *
 * The direct transport, the library's side (common/transit.h has the
 * design): SENDs between two RC QPs of the same daemon go through transit
 * rings the two libraries share, with no engine thread in between.
 *
 * - Sending (ibv_post_send, SQ lock): a SEND (with immediate or
 *   invalidate) or an RDMA WRITE with immediate goes on the ring when
 *   the engine has finished every earlier WQE of the QP, the receiver
 *   has the rings mapped, the message fits the free space and its SGEs
 *   are this process's MRs; anything else takes the SQ.  It is
 *   remembered until the receiver has taken it, then completed here.
 * - Receiving (ibv_poll_cq, CQ lock): under the RQ's claim (ring.h), the
 *   next message goes into the next receive WQE (a WRITE with immediate
 *   into the MR its key names, taking the WQE), checked as the engine
 *   would; whatever this side will not place (an unknown key, a message
 *   longer than its WQE, a ring that makes no sense) is left for the
 *   engine, which fails it properly, and so is everything of a QP in
 *   error.
 * - Completions made here wait in the CQ's small FIFO, each with the
 *   engine tail it follows, and come out merged with the engine's CQEs so
 *   that one QP's completions keep their order.  While a CQ has direct
 *   QPs, a poll takes engine CQEs only up to the tail it saw first, so a
 *   CQE the engine wrote after a ring moved never passes a completion
 *   made from that move.
 *
 * Locks: the SQ lock for what posters touch, the CQ lock for what pollers
 * touch; the sends in flight are a single-producer single-consumer ring
 * between the two.  Mapping and unmapping take the QP's direct_lock, then
 * its queue locks and both CQ locks, so nobody sees rings half there.
 */
#ifndef IBVC_DIRECT_INTERNAL_H
#define IBVC_DIRECT_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "barrier.h"
#include "ibvd_verbs.h"
#include "transit.h"

#define DIRECT_MAX_SGE	16u
/* A Q_Key with this bit set means the sending QP's own (verbs.h) */
#define DIRECT_QKEY_OWN	0x80000000u
/* UD: the entries of the peer's port GID table kept (a soft port's all) */
#define DIRECT_PEER_GIDS	16u

/*
 * A SEND on the ring, not completed yet, or a WRITE or READ done under a
 * grant (direct_rdma.c), whose completion waits its turn here.
 */
struct ibvc_direct_send {
	uint64_t wr_id;
	uint32_t end;			/* `consumed` once it was taken */
	uint32_t byte_len;
	uint32_t mark;			/* its send CQ's engine tail at posting */
	uint8_t opcode;			/* enum ibv_wc_opcode */
	bool signaled;
};

struct ibvc_direct {
	uint32_t gen;
	struct ibvc_map map;
	struct ibvd_transit out;	/* we send on it */
	uint64_t *own_produced;		/* its cells, in our SQ's header */
	uint64_t published;		/* ... as we last said it there */
	struct ibvd_transit in;		/* we receive from it */
	uint32_t peer_qpn;
	uint16_t peer_slid;
	uint8_t peer_sl;
	/* UD: the SGIDs of the peer's GRHs, by index (zero where none) */
	uint8_t peer_gids[DIRECT_PEER_GIDS][16];
	uint32_t peer_gids_gen;		/* the gid_gen they are current for */
	bool peer_gids_known;		/* ... once read (fresh_peer_gids) */
	unsigned int side;		/* ours in the pair */
	/* posters (SQ lock) */
	uint64_t room_quiet_until;	/* no waiting for room before this */
	uint64_t room_quiet_ns;		/* ... the last such quiet's length */
	uint32_t produced;
	bool produced_now;		/* this post_send list used the ring */
	struct ibvc_grants *grants;	/* the peer's MRs we copy to and from */
	bool done_now;			/* and completed a signalled one so */
	uint32_t done_end;		/* `produced` then */
	/* the sends in flight: posters add at tail, pollers take at head */
	struct ibvc_direct_send *sends;
	uint32_t sends_cap;		/* a power of two */
	uint32_t sends_tail;
	uint32_t sends_head;
	bool fail_reported;		/* pollers: the first failure went out */
	/* what a sender asleep on its send CQ waits for
	 * (ibvc_direct_update_wake) */
	pthread_mutex_t wake_lock;
	uint32_t arm_since;		/* send CQ lock: `consumed` before an arm */
	/* pollers: since when the oldest send waits, and the engine knows */
	uint64_t stall_ns;
	bool stall_rung;
	/* pollers of the receive CQ: the engine must place the next message,
	 * at `consumed` handed_at (a flag: any count may be that one) */
	bool handed;
	uint32_t handed_at;
	/* wake the peer asleep on its receive CQ, on its send CQ (-1: the
	 * engine does) */
	int peer_poke;
	int peer_send_poke;
	/* send CQ lock: `consumed` at the fallback timer's last look */
	uint32_t fallback_seen;
	bool fallback_looked;
	/* one byte per arm that the peer sleeps on: the last we woke */
	uint32_t poked_arm;		/* posters: its receive CQ's */
	uint64_t poked_wake;		/* pollers: its send CQ's `wake` */
	bool solicited_now;		/* this post_send list had one */
};

/* The wake-up pair of cq's channel, if we fire its events (or -1). */
static inline int cq_poke_fd(const struct ibvc_cq *cq)
{
	return cq->cq.channel ? ibvc_channel_poke_fd(cq->cq.channel) : -1;
}

static inline struct ibvc_direct *direct_of(const struct ibvc_qp *qp)
{
	return __atomic_load_n(&qp->direct, __ATOMIC_ACQUIRE);
}

static inline struct ibvc_context *ctx_of(const struct ibvc_qp *qp)
{
	return to_ibvc_context(qp->qp.context);
}

static inline void ring_own(const struct ibvc_qp *qp)
{
	ibvc_ring_doorbell(ctx_of(qp), qp->doorbell);
}

static inline bool cq_armed(const struct ibvc_cq *cq)
{
	return ibvd_read_once(&cq->ring.client->arm_seq) ==
	       __atomic_load_n(&cq->ring.client->fired, __ATOMIC_ACQUIRE) + 1;
}

/* Does any completion fire cq's arm, or only a solicited one (or an error)? */
static inline bool arm_any(const struct ibvc_cq *cq)
{
	return ibvd_read_once(&cq->ring.client->arm_flags) & IBVD_ARM_NEXT;
}

enum wake_kind { WAKE_NONE, WAKE_ON_FAIL, WAKE_AT };

/* What a placing did (ibvc_direct_place_received), for the arm it fires */
#define PLACED_ANY		1u
#define PLACED_SOLICITED	2u
#define PLACED_NO_WQE		4u	/* RC: one waits for a receive */
#define PLACED_BUSY		8u	/* the engine holds the claim */

/* direct_send.c */
bool ibvc_direct_taken(const struct ibvc_direct *d, uint32_t consumed,
		       uint32_t end);
uint32_t ibvc_direct_sent_taken(const struct ibvc_qp *qp,
				const struct ibvc_direct *d);
uint32_t ibvc_direct_sent_done(const struct ibvc_qp *qp,
			       const struct ibvc_direct *d);
void ibvc_direct_say_wake(struct ibvc_qp *qp, struct ibvc_direct *d,
			  uint32_t waits, uint64_t wake);
bool ibvc_direct_own_wake_due(const struct ibvc_qp *qp, uint32_t consumed,
			      uint32_t *arm);
enum wake_kind ibvc_direct_update_wake(struct ibvc_qp *qp,
				       struct ibvc_direct *d, bool done,
				       uint32_t since);
bool ibvc_direct_peer_wakes_us(struct ibvc_cq *cq);

/* direct_cqe.c */
bool ibvc_direct_fifo_full(const struct ibvc_cq *cq);
struct ibvc_local_cqe *ibvc_direct_fifo_push(struct ibvc_cq *cq,
					     const struct ibvd_cqe *cqe,
					     uint32_t mark);
void ibvc_direct_harvest_sends(struct ibvc_cq *cq, struct ibvc_qp *qp);
void ibvc_direct_take_back_polling(struct ibvc_qp *qp);

/* direct_recv.c */
unsigned int ibvc_direct_place_received(struct ibvc_cq *cq,
					struct ibvc_qp *qp);

/* direct_events.c */
void ibvc_direct_rx_armed(struct ibvc_qp *qp, struct ibvc_direct *d,
			  bool armed, uint32_t kind);
void ibvc_direct_disarm(struct ibvc_cq *cq);
bool ibvc_direct_fire_arm(struct ibvc_cq *cq, uint32_t arm, bool wake);
void ibvc_direct_fire(struct ibvc_cq *cq, unsigned int placed, bool wake);
bool ibvc_direct_fire_senders(struct ibvc_cq *cq, bool wake);
void ibvc_direct_place_all(struct ibvc_cq *cq, bool wake, bool asleep);
void ibvc_direct_leave_to_engine(struct ibvc_cq *cq);

#endif /* IBVC_DIRECT_INTERNAL_H */
