/*
 * The direct transport's transit ring: messages from one local QP to its
 * connected peer that no engine thread carries (DESIGN.md §5, item 2).
 *
 * Today every message goes client -> engine -> client: the engine thread
 * reads the sender's memory and writes the receiver's, and on a host with
 * few CPUs it waits for a scheduler slice between two busy-polling
 * clients.  For a SEND between two QPs of this daemon there is a shorter
 * way: the sender's library copies the payload into a ring it shares with
 * the receiver only, and the receiver's library copies it out into its
 * posted receive buffer when it polls its CQ.  This header is that ring's
 * contract; what follows is the whole design it serves, so that each part
 * built on it keeps the verbs' rules.
 *
 * Who shares what.  When the two QPs of an RC pair (or a UC pair) are
 * both this daemon's and both past RTR, connected to each other, the
 * daemon makes one sealed memfd for the pair holding two rings (A to B,
 * B to A) and turns on "direct mode" for each direction whose sender,
 * on RC, has rnr_retry 7 (the verbs' "retry
 * for ever", what librdmacm, perftest, UCX and the pingpongs use; a
 * finite RNR budget needs a clock on the sender's side that no library
 * poll can promise, so those stay on the engine).  UC has no RNR: a
 * message that finds no receive posted when the receiver's library or
 * the engine takes it is dropped (it still counts as taken, and its SEND
 * completes), as is everything in a ring whose receiver is gone or in
 * error; UC's SENDs never fail for the receiver's sake.  Each library
 * learns it from its QP's engine header and fetches the fd once (one
 * call), lazily, at its next post or modify, or at a poll of the QP's
 * receive CQ, whose engine header counts its QPs' pairings
 * (direct_moves, ring.h): a receiver that posted all its receives first
 * and only polls gets the rings too.
 *
 * SRQs.  A receiver on a basic SRQ (UCX's rc_verbs has one) places into
 * the SRQ's WQEs, under the SRQ's claim word, which the engine takes for
 * every message it delivers into a soft device's basic SRQ, paired QPs
 * or not: the libraries of the SRQ's direct QPs (each polling its own
 * CQ) and the engine threads delivering to any of its QPs take turns at
 * it.  A library that took the SRQ below the limit its owner armed rings
 * its QP's doorbell, and the engine raises the event.  Such a QP has no
 * RQ header to say it is in error: its library stops placing when its
 * SQ's says so.  While the SRQ is resized (its slots move), a library
 * that takes the claim lets go at once and rings its doorbell
 * (daemon/README.md, "Resizing an SRQ").  XRC SRQs stay on the engine.
 *
 * UD.  A UD QP has no peer until it sends, and may send to many; it
 * pairs with one: the first local UD QP it sends to that is free to pair
 * (its library asks, QP_DIRECT_UD, at that first send, which the engine
 * carries, if its AH could take a ring; it asks about a few peers at
 * most).  Datagrams to that peer through an address handle by its LID
 * go on the ring, with the Q_Key and the SL in the fragment, and, for an
 * address handle with a GRH, what the GRH is made of
 * (struct ibvd_transit_grh), from which the receiver's library makes the
 * GRH as the engine would, with the SGID from the sending port's GID
 * table that the daemon gave it with the rings; all others, and
 * datagrams from other senders, go through the engine, which takes the receiving RQ's claim
 * for each (waiting a moment for a library that holds it, then dropping
 * the datagram).  The receiver's library places a datagram after the
 * receive's 40-byte GRH slot, and drops one for another Q_Key or longer
 * than a port's MTU; one that finds no receive waits until its sender's
 * library asks the engine to take it (at most about 20 us), which drops
 * it: a NIC keeps a datagram about as long.  A receiver's library that
 * holds its claim for long (its process stopped mid-poll) keeps what the
 * ring holds: only the claim's holder moves `consumed`, since that
 * library may be copying out of the cells below it; the engine gives up
 * waiting instead, and the sender's library completes its sends up to
 * where it gave up (direct_dropped, ring.h).  UC's the same.  Sends complete when taken,
 * dropped or not.  Garbage in a ring does not fail a UD QP, whose peer
 * may have written it (either side can write both rings), and whose
 * other peers would lose it too: the pair stops carrying datagrams, and
 * what its ring held is lost.  A pair whose one side leaves (reset,
 * destroy) dies: the survivor's direct_gen goes back to 0, the engine
 * drops what it had sent on the ring, and once its library has
 * completed those sends it lets go of the pair (QP_DIRECT_LEAVE, at its
 * next post or modify) and may pair again, with the next QP it sends to
 * or that sends to it; a QP refused because the other held a pair
 * asks again at its next sends.
 *
 * Nothing in a transit ring is trusted by anyone.  Both clients can map
 * the whole memfd writable, so either can write any byte of it; the
 * design only has to make every lie hurt the liar's own traffic:
 *  - the receiver validates every fragment header it reads (a stale
 *    sequence word, a length past what was produced, a record that would
 *    wrap, an unknown kind: the ring is garbage, see below), copies the
 *    header once and uses only the copy, and copies payload only into the
 *    receive WQE it took from its own RQ, bounded by that WQE's SGEs.  A
 *    sender that rewrites a payload while it is copied changes only its
 *    own message; one that claims more bytes than the WQE holds gets what
 *    a real responder gives it (on RC a local length error at the
 *    receiver, remote invalid request at the sender, both QPs in error;
 *    on UC and UD the message dropped): the library hands it to the
 *    engine, which makes those errors;
 *  - the sender reads `consumed` only to complete its own sends: a
 *    receiver that lies about it loses its own messages;
 *  - what only the daemon may say (this direction failed from message N,
 *    with status S) it says in each QP's own engine header, in that
 *    client's own arena, never in the transit memory.
 * A ring found to be garbage is a protocol error of the sender: the
 * receiver's library reports it to the daemon, which moves both QPs to
 * the error state as for any fatal transport error.
 *
 * Producers.  Only the sender's library writes a ring, and only a SEND,
 * SEND_WITH_IMM, SEND_WITH_INV or (RC, UC) RDMA_WRITE_WITH_IMM posted
 * while its SQ holds nothing the
 * engine has not finished (the SQ's engine `direct_retired`, which the
 * engine publishes once a WQE's completion is written, equals the tail)
 * and that fits the ring's free space; a SEND that does not fit waits
 * for room while the receiver (or the engine, asked after a while) takes
 * messages.
 * An RDMA WRITE or READ into a peer's MR on shared file memory that the
 * daemon granted (lease.h) is the library's own memcpy under the same
 * conditions, and only when the ring is empty too (consumed ==
 * produced: a WRITE never lands before an earlier SEND); its completion
 * waits its turn with the SENDs'.  Everything else goes to the SQ as
 * today: SENDs behind one-sided operations the engine runs or larger
 * than the free space, WRITEs and READs to memory not granted, atomics.
 * The QP's lock keeps other posters out, and the engine never writes a
 * ring, so a ring has one producer.
 *
 * Back from the SQ.  A SEND that took the SQ (the ring was full, or it
 * queued behind one that did) would keep every later one there for as
 * long as the app keeps its SQ busy, as a streaming sender does.  So the
 * library moves SENDs the engine has not started from the SQ to the
 * ring, in order from the first one the engine has not taken, when it
 * posts or polls the send CQ.  It does so holding the SQ's claim word
 * (ring.h), which the engine holds while it runs the SQ and while a WQE
 * is started (for every QP, paired or not: a WQE started before the
 * pair was made keeps it), and only when the engine has written the
 * completion of every WQE it took; it says how far it went in the SQ's
 * `direct_head`, and the engine, taking the claim, goes on after that (a
 * count it could not have written, or one it has seen before, means
 * nothing).  The SENDs it moved are its own to
 * complete, as any it put on the ring.
 *
 * Consumers.  A message in the ring is placed by whoever holds the
 * receiving RQ's claim word: the receiver's library when it polls, or the
 * engine.  The claim word and the RQ's head while direct mode lasts live
 * in the RQ's client header, in the receiver's own arena (the sender
 * cannot touch them); the library and the engine take the claim with a
 * compare-and-swap and hand it back with a release store.  Whoever holds
 * it takes the next receive WQE, copies the fragment into it (the library
 * with memcpy, the engine as for any SEND), completes it and moves
 * `consumed` and the head, in that order.  The engine trusts neither word
 * (a receiver can only confuse its own receives) and never waits on the
 * claim: a claim it cannot take now it tries again on its next turn.
 * A SEND_INV the library leaves to the engine (it asks, as for a message
 * longer than its WQE): the invalidation is the daemon's, which owns the
 * keys; the messages behind it wait for it.
 * A WRITE_WITH_IMM carries its target (struct ibvd_transit_rdma) ahead of
 * its data.  The receiver polls for its completion anyway, so its
 * library places it then, into its own memory, checked as the engine's
 * responder checks it: the QP's access flags allow remote writes (the
 * daemon says so in the SQ's engine header, direct_remote_write), and
 * the key is an MR this process registered in the QP's PD, with remote
 * write access, holding the whole range.  It consumes the next receive
 * WQE without touching its buffers.  A key the library does not know (a
 * window's, or one that fails) it leaves to the engine, which places the
 * WRITE or fails it as a responder does.  So the sender can aim only
 * where the engine would have let it write.
 *
 * Ordering against one-sided operations.  RC places requests in order:
 * a SEND after a WRITE must not be seen before the WRITE's data, and a
 * WRITE after a SEND must not land before the SEND.  The first holds
 * because a SEND goes direct only when the engine has finished every
 * earlier request.  For the second, the engine executes a request of a
 * direct QP only when the ring is empty (consumed == produced), and if it
 * is not, it places what is there itself: a receiver that spins on the
 * WRITE's bytes without polling its CQ still gets them, after the SEND's.
 * A message with no receive WQE posted waits, as an RNR-NAKed one retries
 * for ever (rnr_retry 7).
 *
 * Completions.  The library makes the receive completions of what it
 * placed from its own WQE and the fragment headers; the engine's go to
 * the CQ ring as always.  The sender's library completes a direct SEND
 * once `consumed` has passed its last cell.  Each library
 * merges these with the engine's CQEs so that one QP's completions come
 * out in the order its requests were posted: a direct completion is
 * remembered with the CQ's engine tail when it was made (a receive: read
 * after taking the claim; a send: read when it was posted, after the SQ
 * was seen drained); it is handed out before any engine CQE at or after
 * that position and after every one before it, also those written after
 * the poll began (they were written before the tail was read).  The
 * completions waiting in a CQ are kept sorted by that position: those of
 * QPs sharing the CQ are made out of its order (a SEND taken late keeps
 * the position of its post).  (The engine writes the CQE of a request
 * that waited for the ring only after it saw the ring empty, and
 * publishes a CQE it made under the claim before handing the claim back;
 * a library that moves SENDs from the SQ to the ring publishes them
 * before it hands back the SQ's claim.)
 *
 * Blocking.  A process asleep on a completion channel is woken by its
 * peer's library, with no engine thread in between.  Each channel whose
 * CQs take from rings has a wake-up pair (a stream socket pair, which
 * the daemon makes on first use); the library watches its reading end
 * beside the daemon's event socket (channel->fd is an epoll instance),
 * and every QP's rings come with the writing ends of its peer's CQs'
 * channels (QP_DIRECT's `pokes`), except a UD pair's across uids, which
 * one side makes alone: there the engine wakes the peer, as it wakes
 * any sleeper without a pair.  A byte there only says "look": the
 * woken library drains them, places what its armed CQs' rings hold,
 * and fires the arm itself, by the compare-and-swap on the CQ's `fired`
 * that it shares with the engine (ring.h), so an arm fires once.
 *  - A receiver that arms its CQ writes a token of that arm and its kind
 *    (`arm_seq`, `arm_kind`) in the ring's consumer line, fences, and
 *    re-reads `produced`; a sender, after publishing `produced`, fences
 *    and reads the arm.  Whichever sees the other wakes the receiver:
 *    the receiver places what is there at once, the sender writes one
 *    byte per token, if what it sent fires it (any completion, or a
 *    solicited SEND).  What the receiver places after the arm fires
 *    it, also when the poll that places it takes it at once, as a
 *    NIC's CQE fires the arm whoever polls it (another thread may sleep
 *    on the channel: UCX's ud_verbs polls from its async thread while
 *    its worker sleeps).  An unsolicited SEND to a solicited-only arm is
 *    the engine's to place (its sender rings): only an error, which
 *    the receive makes, fires that arm.  A receiver with no receive
 *    posted when it armed says so (IBVD_TRANSIT_ARM_NO_RECV): its
 *    senders ring their own doorbells instead, and the engine waits as
 *    RNR says.
 *  - A sender whose send CQ is armed says so in `sender_waits`, with
 *    `wake`: the arm it sleeps on and the end of its first signalled
 *    SEND not taken yet, and in the same words of its SQ's client
 *    header, the copy that it and the engine go by (its peer can write
 *    the ring's).  Whoever moves `consumed` to that end (fences
 *    and) writes one byte for that `wake` (the library) or sends the
 *    event (the engine); the sender, after storing `wake`, fences and
 *    looks at `consumed` itself.  Only then: an event stands for a
 *    completion that happened after the arm, as on a NIC, never for one
 *    the sender could already see when it armed.  Apps that count events
 *    (one poll per event, as perftest's -e) depend on that, and on a
 *    SEND's event coming before the answer to it: ibv_get_cq_event looks
 *    at senders first, and once more, and at the daemon's socket, before
 *    it hands out an event of a CQ that only receives (the SEND's
 *    completion may have come while it looked); the engine pushes the
 *    receive CQE of an RC or UC message only after its sender's
 *    completion, into a QP's own RQ or a basic SRQ (whose claim it keeps
 *    meanwhile, so its CQEs keep the order of its WQEs; SRQs fed without
 *    a claim, XRC ones and those of RoCE devices, push at once).
 *  - The engine stays the fallback.  A sender rings its doorbell, as
 *    before, when its channel has no pair, or when its app sleeps
 *    elsewhere than in ibv_get_cq_event; when it sleeps there, the
 *    library looks every millisecond, and rings for a sender whose
 *    receiver took nothing since the last look (one that armed its CQ
 *    and then blocked on something else).  A failure of the direction
 *    wakes any sleeping sender.
 *
 * Mapping.  A library maps the rings when it sees direct_gen at a post or
 * a modify of the QP, and only then says `rx_ready`; a sender sends on
 * the ring only to a receiver that said so, so a receiver never has
 * messages waiting in a ring it does not know of.
 *
 * Errors, teardown and dead peers.  A QP destroyed while in RTS first
 * takes what its peer left in the ring into the receives it has posted
 * (a NIC took those on arrival, and its peer's sends succeeded), and its
 * own ring's SENDs and SQ go to the peer (engine/send.c,
 * ibvd_engine_qp_finish_sends).  When either QP leaves RTS/RTR (error,
 * reset, destroy, its process gone), the daemon turns direct mode off and
 * writes, in the sender's QP engine header, the first message that
 * failed (the receiver's `consumed` at that moment) and its status
 * (retry exceeded for a peer that is gone, flushed for a sender in
 * error).  The sender's library completes its direct sends before that
 * point as successful and the rest with that status then
 * IBV_WC_WR_FLUSH_ERR, which is correct whichever side of the line a
 * racing post landed on.  The engine, holding the claim, flushes the
 * receiver's RQ from the head in its client header.
 *
 * The ring.  A free-running 32-bit count of 64-byte cells written
 * (`produced`) and taken (`consumed`), in a power-of-two number of cells
 * that the daemon sets and each side keeps from the reply, never from
 * shared memory.  A message is one or more fragments (FIRST .. LAST, as
 * IB packets are), each a 32-byte header then its payload, rounded up to
 * whole cells, never wrapping: a fragment that would cross the ring's end
 * is preceded by a PAD record that fills the rest.  The header's `seq`
 * is the cell count at its first cell plus one, so a slot left from an
 * earlier lap never passes for a new one.
 *
 * Whose words to believe.  Both libraries map both rings writable, and a
 * UD pair's peer may be another uid: each side can rewrite the other's
 * counts.  So the sender says `produced`, and how it sleeps, first in its
 * SQ's client header (ring.h: direct_produced, a 64-bit count, with the
 * pairing's gen; direct_sender_waits, direct_wake), which only it writes;
 * the engine and the sender's own library go by those, and judge the
 * receiver's `consumed` against them (one past what was produced
 * completes nothing and wakes nobody).  The engine says in the sender's
 * engine header how far it took the ring itself (direct_taken, counted
 * the same way), which a `consumed` moved back does not undo.  The copies
 * in the ring are for the receiver's library, which can only hurt itself
 * by believing a lie.
 */
#ifndef IBVD_TRANSIT_H
#define IBVD_TRANSIT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "lease.h"

#define IBVD_TRANSIT_CELL	64u
/*
 * Where a pair's ring counts begin (the daemon's word, in QP_DIRECT's
 * reply): just short of 2^32, so that every pair's 32-bit counts wrap
 * within its first 4 KiB, and what reads them goes through the wrap all
 * the time, not once in 256 GiB.  As a 64-bit count (ring.h), nothing is
 * before it.
 */
#define IBVD_TRANSIT_START	(0u - 64u)
#define IBVD_TRANSIT_MIN_CELLS	64u		/* 4 KiB */
#define IBVD_TRANSIT_MAX_CELLS	(1u << 20)	/* 64 MiB */

/* The control block of one direction: two cache lines, one per writer. */
struct ibvd_transit_ctl {
	/* written by the producer: the sender's library */
	uint32_t produced;	/* cells written so far */
	uint32_t sender_waits;	/* IBVD_TRANSIT_WAKE_*: its send CQ is armed */
	uint64_t wake;		/* WAKE_AT: the arm << 32 | `consumed` due */
	uint8_t pad0[48];
	/* written by the claim's holder: the receiver's library or the engine */
	uint32_t consumed;	/* cells taken so far */
	/* written by the receiver's library */
	uint32_t arm_seq;	/* non-zero: a token of its receive CQ's arm (armed) */
	uint32_t rx_ready;	/* non-zero: it has the rings mapped */
	uint32_t arm_kind;	/* IBVD_ARM_*, stored before arm_seq */
	uint8_t pad1[48];
};

/*
 * The wake-up pairs that come with a QP's rings (QP_DIRECT's `pokes`):
 * its peer's receive CQ's channel's, to wake the peer asleep on what we
 * send, and its peer's send CQ's, to wake it asleep on the completion of
 * what we take.  None for a UD peer of another uid.
 */
#define IBVD_DIRECT_POKE_RECV	1u
#define IBVD_DIRECT_POKE_SEND	2u

/*
 * In arm_kind beside IBVD_ARM_*: the receiver had no receive posted when
 * it armed, so a SEND now would only wait for one; its sender leaves it
 * to the engine, which waits as RNR says, rather than wake it for nothing.
 */
#define IBVD_TRANSIT_ARM_NO_RECV	0x100u
/* ... or it has no wake-up pair to watch (it could not get one) */
#define IBVD_TRANSIT_ARM_UNWATCHED	0x200u

/*
 * A 32-bit count `c` of a ring (a `consumed`, as someone says) as the
 * 64-bit count it stands for next to the producer's 64-bit `produced`:
 * false if it cannot be one (ahead of produced, more than a lap behind,
 * or before the ring began).  64-bit counts never wrap, so one kept from
 * long ago never passes for a new one.
 */
static inline bool ibvd_transit_widen(uint64_t produced, uint32_t c,
				      uint32_t ncells, uint64_t *wide)
{
	uint32_t behind = (uint32_t)produced - c;

	if (behind > ncells || produced < IBVD_TRANSIT_START ||
	    behind > produced - IBVD_TRANSIT_START)
		return false;
	*wide = produced - behind;
	return true;
}

/* sender_waits: on failures only, or also once `consumed` reaches wake */
#define IBVD_TRANSIT_WAKE_ON_FAIL	1u
#define IBVD_TRANSIT_WAKE_AT		2u

/*
 * Does a sleeping sender that says `waits` and `wake` want its event now
 * that `consumed` is this?  *arm: the send CQ arm it wants it on (a later
 * arm is not woken).
 */
static inline bool ibvd_wake_due(const uint32_t *waits, const uint64_t *wake,
				 uint32_t consumed, uint32_t *arm)
{
	uint64_t w;

	/* Acquire: `wake` was stored before the mode that says to read it. */
	if (__atomic_load_n(waits, __ATOMIC_ACQUIRE) != IBVD_TRANSIT_WAKE_AT)
		return false;
	w = __atomic_load_n(wake, __ATOMIC_RELAXED);
	*arm = (uint32_t)(w >> 32);
	return (int32_t)(consumed - (uint32_t)w) >= 0;
}

/*
 * ... as the ring's producer line says: only the peer's library asks
 * that.  The sender's library and the engine read the sender's own copy
 * (its SQ's client header), which no peer can write: both ends of a UD
 * pair map its rings, and may be of different uids.
 */
static inline bool ibvd_transit_wake_due(const struct ibvd_transit_ctl *ctl,
					 uint32_t consumed, uint32_t *arm)
{
	return ibvd_wake_due(&ctl->sender_waits, &ctl->wake, consumed, arm);
}

enum ibvd_transit_kind {
	IBVD_TRANSIT_PAD = 1,		/* fills to the ring's end; no payload */
	IBVD_TRANSIT_SEND,
	IBVD_TRANSIT_SEND_IMM,
	IBVD_TRANSIT_SEND_INV,		/* imm: the rkey to invalidate */
	/* RC, UC: a struct ibvd_transit_rdma ahead of the data (len counts
	 * it), which lands in the receiver's MR there */
	IBVD_TRANSIT_WRITE_IMM,
};

#define IBVD_TRANSIT_FIRST	1u
#define IBVD_TRANSIT_LAST	2u
#define IBVD_TRANSIT_SOLICITED	4u
/* UD: the largest datagram a ring carries (a soft port's MTU) */
#define IBVD_TRANSIT_UD_MAX	4096u
/* UD: the service level of the sender's address handle */
#define IBVD_TRANSIT_SL_SHIFT	8u
#define IBVD_TRANSIT_SL_MASK	0xF00u
/* UD: the payload starts with a struct ibvd_transit_grh */
#define IBVD_TRANSIT_GRH	8u
#define IBVD_TRANSIT_FLAGS	(15u | IBVD_TRANSIT_SL_MASK)

/*
 * UD through an address handle with a GRH: what of it the sender's work
 * request named, ahead of the datagram's bytes in the fragment (its len
 * counts it).  The receiver builds the GRH from it as the engine does,
 * taking the SGID from the sending port's GID table as the daemon gave
 * it (QP_DIRECT), never from the sender.
 */
struct ibvd_transit_grh {
	uint8_t dgid[16];
	uint32_t flow_label;	/* the low 20 bits */
	uint8_t sgid_index;
	uint8_t hop_limit;
	uint8_t traffic_class;
	uint8_t pad;
};

#define IBVD_TRANSIT_GRH_INFO	((uint32_t)sizeof(struct ibvd_transit_grh))

/*
 * The PayLen of the GRH a datagram of len bytes gets (IBTA 8.3.3): the
 * bytes a sender puts on the wire after the GRH up to the ICRC's last,
 * BTH (12), DETH (8), ImmDt (4, with immediate data), the payload, its
 * pad to 4 bytes and the ICRC (4), as a NIC's receiver finds it.  The
 * engine and the receiving library write the same (UD_MTU at most: 4124).
 */
static inline uint16_t ibvd_ud_grh_paylen(uint32_t len, bool imm)
{
	return (uint16_t)(12u + 8u + (imm ? 4u : 0u) + len + (-len & 3u) + 4u);
}

/*
 * RDMA WRITE with immediate: where its data goes, as the sender's work
 * request named it.  Whoever places it checks the key against the
 * receiver's MRs as a responder does; the sender can aim only where it
 * could with the engine carrying it.
 */
struct ibvd_transit_rdma {
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t pad;
};

#define IBVD_TRANSIT_RDMA_INFO	((uint32_t)sizeof(struct ibvd_transit_rdma))

/* A fragment's header; its payload follows in the same cells. */
struct ibvd_transit_frag {
	uint32_t seq;		/* cell count at this header + 1 */
	uint16_t kind;		/* enum ibvd_transit_kind */
	uint16_t flags;		/* IBVD_TRANSIT_* */
	uint32_t len;		/* payload bytes of this fragment */
	uint32_t imm;		/* network order; SEND_INV: host-order rkey */
	uint64_t wr_id;		/* the sender's, for its own bookkeeping */
	uint32_t msg_len;	/* FIRST: the whole message's bytes */
	uint32_t qkey;		/* UD: the Q_Key the sender gave; else 0 */
};

#define IBVD_TRANSIT_HDR	((uint32_t)sizeof(struct ibvd_transit_frag))

/* One direction as one side sees it. */
struct ibvd_transit {
	struct ibvd_transit_ctl *ctl;
	uint8_t *cells;
	uint32_t ncells;	/* a power of two, kept from the daemon's reply */
	/*
	 * What copies a payload in (ibvd_transit_write), memcpy unless set:
	 * the library's, whose faults on the app's memory it recovers from.
	 */
	void *(*copy_in)(void *dst, const void *src, size_t len);
};

/*
 * The pair's memfd: both control blocks in its first page, then ring 0
 * (from the QP on side 0 to its peer) and ring 1.
 */
#define IBVD_TRANSIT_CTL_BYTES	4096u

/*
 * The pair's leases on one-sided direct access (lease.h), in the same
 * first page: side i's, for what side i's library does to side !i's
 * memory, at IBVD_TRANSIT_LEASE_OFF + i * sizeof(struct ibvd_lease).
 */
#define IBVD_TRANSIT_LEASE_OFF	1024u

static inline struct ibvd_lease *ibvd_transit_lease(void *base,
						     unsigned int side)
{
	return (struct ibvd_lease *)((uint8_t *)base + IBVD_TRANSIT_LEASE_OFF) +
	       (side & 1);
}

static inline uint64_t ibvd_transit_pair_bytes(uint32_t ncells)
{
	return IBVD_TRANSIT_CTL_BYTES + 2ull * ncells * IBVD_TRANSIT_CELL;
}

/* Cells a fragment of len payload bytes takes. */
static inline uint32_t ibvd_transit_frag_cells(uint32_t len)
{
	return (IBVD_TRANSIT_HDR + len + IBVD_TRANSIT_CELL - 1) /
	       IBVD_TRANSIT_CELL;
}

bool ibvd_transit_geometry_ok(uint32_t ncells);
void ibvd_transit_init(struct ibvd_transit *t, void *ctl, void *cells,
		       uint32_t ncells);
/* The two rings of a pair mapped at base, as side `side` (0 or 1) sees them. */
void ibvd_transit_pair(void *base, uint32_t ncells, unsigned int side,
		       struct ibvd_transit *out, struct ibvd_transit *in);

/*
 * Producer: the largest payload one fragment can carry now, given
 * `consumed` as read, counting a PAD it would need first; 0 when not even
 * an empty fragment fits (one cell carries 32 bytes).
 */
uint32_t ibvd_transit_room(const struct ibvd_transit *t, uint32_t produced,
			   uint32_t consumed);
/*
 * Producer: write one fragment (header *f, its payload gathered from iov)
 * at *produced and advance *produced; nothing is visible until
 * ibvd_transit_publish.  -EAGAIN if it does not fit now, -EINVAL for a
 * header the ring cannot carry.
 */
int ibvd_transit_write(const struct ibvd_transit *t, uint32_t *produced,
		       uint32_t consumed, const struct ibvd_transit_frag *f,
		       const struct iovec *iov, int iovcnt);
void ibvd_transit_publish(const struct ibvd_transit *t, uint32_t produced);

/*
 * Consumer: the next fragment after `consumed`.  1: *f holds a checked
 * copy of its header, *payload points at its f->len bytes in the ring and
 * *next is `consumed` past it (and past a PAD before it); 0: nothing yet;
 * -EPROTO: what the producer wrote is not a ring.
 */
int ibvd_transit_next(const struct ibvd_transit *t, uint32_t consumed,
		      struct ibvd_transit_frag *f, const uint8_t **payload,
		      uint32_t *next);
/* ... with `produced` as the producer says elsewhere (read with acquire). */
int ibvd_transit_next_upto(const struct ibvd_transit *t, uint32_t produced,
			   uint32_t consumed, struct ibvd_transit_frag *f,
			   const uint8_t **payload, uint32_t *next);
/* Consumer: hand the cells up to `consumed` back to the producer. */
void ibvd_transit_release(const struct ibvd_transit *t, uint32_t consumed);

#endif /* IBVD_TRANSIT_H */
