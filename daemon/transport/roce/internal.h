/*
 * The RoCEv2 transport's files (transport/roce/): what they share.
 *
 *   roce.c     the transport's operations (engine/transport.h), UD, and
 *              the per-device state
 *   rc.c       RC and UC requesters: packets of a message, ACK waits
 *   rc_resp.c  RC and UC responders: PSNs, SENDs, WRITEs, READs, atomics
 *   packet.c   one packet put together and sent
 *   io.c       the device's sockets, drained by an engine thread
 *   rx.c       what an arriving packet is for, and handing it on
 *   mcast.c    the IP multicast groups the device's netdev takes
 *   wire.c, ip.c, icrc.c, crc32.c   the packet codec (wire.h)
 *
 * A RoCE device sends IPv4 and IPv6 packets it builds whole (IP, UDP,
 * BTH, ICRC) through raw sockets, because the ICRC covers the IP header,
 * the IPv4 ID included, which only the sender of the whole header knows;
 * and it receives through raw UDP sockets filtered to port 4791, because
 * checking the ICRC of an arriving packet needs its IP header as well
 * (io.c: how an IPv6 one gets its header back).  All are bound to the
 * device's netdev.  The family of a QP's source GID is the family of its
 * packets; a destination GID of the other family goes nowhere.
 *
 * Done today: UD, RC and UC (SEND, WRITE, READ, atomics) in both
 * directions, and to QPs of the same device without the wire, over IPv4
 * and IPv6 GIDs.  An RC requester keeps a window of messages in flight
 * per QP (struct roce_txm).  QP1 carries the IB CM's MADs between the CM
 * and other hosts (transport/gsi.h), over either family.
 *
 * Locking: a QP's wire state (struct roce_qp, qp->wire) is shared by its
 * serving engine thread (the requester) and the draining thread, the
 * engine thread that takes the device's packets (io.c: ACKs and responses
 * for it, requests to it; the same thread unless several engines run),
 * under its own mutex; both hold ibvd_objects_lock for reading, so the
 * QP cannot go meanwhile.  It is made when the QP enters RTR
 * (roce_rc_prepare) and freed by qp_forget (write lock held both times).
 */
#ifndef IBVD_ROCE_INTERNAL_H
#define IBVD_ROCE_INTERNAL_H

#include <net/if.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include "engine/transport.h"
#include "wire.h"

struct ibvd_device;
struct ibvd_qp;

/* Longest IP packet a RoCE device sends or takes: a 9000-byte MTU. */
#define ROCE_MAX_PACKET		9216u
/* The largest payload of one packet: IB MTU 4096. */
#define ROCE_MAX_PAYLOAD	4096u

/*
 * Where a QP's packets go: addresses (IPv4 in the first 4 bytes, the rest
 * zero) and the IP/UDP header values.  Family 0: nowhere.
 */
struct roce_path {
	int family;
	uint8_t src[16];
	uint8_t dst[16];
	uint8_t tclass;
	uint8_t hop_limit;
	uint16_t sport;
	/*
	 * A full send buffer loses the packet at once instead of holding the
	 * sender a moment: QP1's MADs, which the control thread sends (every
	 * tenant's requests wait behind it) and the CM sends again.
	 */
	bool no_wait;
};

/*
 * Payloads the draining thread has taken but not yet written (rc_resp.c):
 * a responder's WRITE or SEND packets, or a requester's READ responses,
 * of one QP that land one after the other go to its memory in one system
 * call, before anything else is done for that QP (an ACK, a NAK, a
 * completion, another request) and before the batch they arrived in ends.
 */
#define ROCE_WRUN_MAX		64u

enum roce_wrun_kind {
	ROCE_WRUN_WRITE,
	ROCE_WRUN_SEND,
	ROCE_WRUN_READ,			/* responses, at the requester */
};

struct roce_wrun {
	struct ibvd_qp *qp;		/* NULL: empty */
	enum roce_wrun_kind kind;
	struct roce_path reply;		/* WRITE: a NAK's way back, should it fail */
	uint32_t psn;			/* WRITE: its first packet's; READ: the READ's */
	int fd;
	uint64_t addr;			/* where it lands */
	uint64_t len;
	unsigned int n;
	struct iovec iov[ROCE_WRUN_MAX];
};

/*
 * A flow's UDP socket (io.c): bound to its source address and port, so
 * that a run's segments carry them.
 */
#define ROCE_FLOWS		256u

struct roce_flow {
	uint8_t src[4];
	uint16_t sport;
	int fd;				/* -1: none could be made */
	bool refused;			/* the kernel refused a run */
};

/* A RoCE device's own state (dev->transport_priv). */
struct rx_batch;
/*
 * An ACK the draining thread owes (rc_resp.c): one QP's, sent when the
 * batch its request came in ends, or before anything else that QP is
 * answered.  ACKs are cumulative, so a batch of messages to a QP costs
 * one ACK, not one each.
 */
struct roce_ack_due {
	struct ibvd_qp *qp;		/* NULL: none */
	struct roce_path path;
	uint32_t psn;
	uint32_t msn;			/* as it was at psn */
};

struct roce_mgroup;
struct roce_joinsock;

struct roce_dev {
	struct ibvd_device *dev;
	char ifname[IF_NAMESIZE];
	int tx_fd;			/* raw IPv4, IP_HDRINCL */
	int rx_fd;			/* raw IPv4/UDP, filtered to port 4791 */
	int sink_fd;			/* UDP :4791, so no ICMP answers */
	int tx6_fd, rx6_fd, sink6_fd;	/* the same for IPv6; -1 without it */
	struct ibvd_eng_rx rx;		/* drained by an engine thread (io.c) */
	struct rx_batch *rx_batch;	/* its buffers */
	bool rx_attached;
	uint16_t ip_id;			/* atomic: the next IPv4 ID */
	uint32_t gsi_psn;		/* atomic: QP1's next PSN */
	struct roce_wrun wrun;		/* the draining thread's only */
	struct roce_ack_due ack_due;	/* the draining thread's only */
	/* the QP whose receive queue's lock rx_send holds now (rc_resp.c) */
	const struct ibvd_qp *rq_held;	/* the draining thread's only */
	/* bytes of new READs this drain may still answer (rc_resp.c) */
	uint64_t read_budget;		/* the draining thread's only */
	/* UDP sockets runs go out through, one per flow (io.c) */
	pthread_mutex_t flows_lock;
	struct roce_flow *flows;	/* ROCE_FLOWS, made at the first run */
	unsigned int nflows;
	/* multicast groups the netdev takes, and who holds them (mcast.c) */
	struct roce_mgroup *mgroups;
	struct roce_joinsock *joinsocks;
};

/*
 * Bytes of READ responses one drain of a device's sockets sends for new
 * requests at most, holding the objects lock: two of the largest READs.
 * A request past it is dropped, and its requester asks again.
 */
#define ROCE_READ_DRAIN_BYTES	(16ull << 20)

/* io.c: the device whose sockets this thread is draining now; else NULL. */
extern __thread struct roce_dev *roce_rx_self;

/*
 * READ and atomic results the responder keeps for duplicate requests: as
 * many as a requester may have outstanding (max_qp_rd_atom).
 */
#define ROCE_RESOURCES		128

struct roce_resource {
	bool valid;
	bool atomic;
	uint32_t psn;			/* the request's */
	uint32_t npsn;			/* PSNs its responses take */
	uint64_t va;
	uint32_t rkey;
	uint32_t len;
	uint64_t orig;			/* atomic: the value returned */
};

/*
 * An RC requester keeps up to ROCE_TX_SLOTS messages (steps, for a chunked
 * one; no more than its send queue holds) in flight per QP, spanning at
 * most ROCE_TX_WINDOW PSNs, as rxe
 * keeps a window of PSNs: the engine's WQE in front and those behind it
 * that it lets the transport send ahead (ibvd_eng_send_ahead).  A data
 * packet asks for an ACK at the end of its message and every
 * ROCE_ACK_EVERY packets of a long one, so the window moves on before a
 * long message ends.
 */
#define ROCE_TX_SLOTS		64u
#define ROCE_TX_WINDOW		512u
#define ROCE_ACK_EVERY		64u
/*
 * One message (or step of one) in flight, as sent: a retransmission sends
 * it again.  The engine's struct eng_req, but with its local segments in
 * room sized by the QP's max_send_sge rather than the device's (a slot is
 * then a few hundred bytes, not a KiB and more).
 */
struct roce_txm {
	struct ibvd_send_wqe w;		/* its WQE's header */
	uint64_t length;		/* the message's */
	uint64_t off;			/* the step's bytes: [off, off + step) */
	uint64_t step;
	struct eng_seg *seg;		/* its local segments (gather or scatter),
					 * in the room after it */
	unsigned int nseg;
	uint64_t total;			/* their bytes */
	uint32_t head;			/* its WQE's counter in the SQ */
	uint32_t first_psn;		/* its PSNs: first_psn .. + npsn - 1 */
	uint32_t npsn;
	int answer;			/* -1 none yet, else an enum eng_resp */
	uint64_t sent_ns;		/* when it last went out */
	uint64_t got;			/* READ bytes arrived, in order */
	uint64_t read_from;		/* READ: the byte its last request began at */
	bool read_again;		/* READ: a gap: ask for the rest at the next call */
	bool read_gap;			/* READ: asked again past a gap: wait for it */
};

/*
 * Receive completions the draining thread holds back while the engine has
 * an answered send of the same QP still to complete: a NIC completes a
 * SEND at its ACK, which comes before any reply the peer makes to it, and
 * programs count on it (perftest's latency tests with completion events
 * share one channel between the two CQs and take the first event after
 * posting for the send's).  Here the ACK reaches the draining thread but
 * the send completes on its QP's engine thread, so the reply behind it
 * waits for that (roce_rc_turn_done) rather than overtake it.
 */
#define ROCE_HELD_RECVS		32u

struct roce_held_recv {
	uint64_t wr_id;
	struct eng_rcv_done done;
};

/*
 * What the RoCE transport keeps for an RC, UC or XRC QP (qp->wire), from
 * its RTR to its reset or destroy: made on the control thread and charged
 * to its context's ring budget (roce_rc_prepare), since a tenant chooses
 * how many there are.
 */
struct roce_qp {
	pthread_mutex_t lock;
	struct roce_path path;		/* to the connected peer */
	/* requester: the messages in flight, oldest (the engine's front) first */
	struct {
		bool started;		/* next_psn set from sq_psn */
		uint32_t next_psn;	/* the next new PSN */
		uint32_t una_psn;	/* the oldest PSN not acknowledged */
		uint32_t nslots;	/* of m: 1 to ROCE_TX_SLOTS */
		/*
		 * Each slot is a struct roce_txm, then room for its
		 * segments: slot_bytes, written only when a message takes
		 * the slot (most QPs use few).
		 */
		size_t slot_bytes;
		uint32_t seg_room;	/* segments a slot holds */
		uint32_t first;		/* the oldest's index in m */
		uint32_t n;		/* how many are in flight */
		uint32_t rd_atomic;	/* READs and atomics among them */
		uint8_t rnr_timer;
		bool rnr_wait;		/* an RNR NAK's: PSN NAKs are its echo */
		bool resend;		/* go again at the next call */
		uint32_t resend_psn;	/* from this PSN */
		/* a PSN NAK's go-back-N, till an answer moves things on */
		bool nak_retried;
		/* an ACK came past a READ whose responses did not: up to here */
		bool acked_past;
		uint32_t acked_end;
		uint64_t heard_ns;	/* when an answer last moved things on */
		/* heard_ns as the last timeout found it (rc.c, front_step) */
		uint64_t heard_at_timeout_ns;
		/* the quiet (rc.c, quiet_since) a tail probe went in */
		uint64_t probed_quiet;
		bool retiring;		/* an answer taken, its completion not
					 * yet written: until the engine's turn
					 * ends (roce_rc_turn_done) */
	} tx;
	/* responder */
	struct {
		bool started;		/* epsn set from rq_psn */
		uint32_t epsn;		/* the PSN expected next */
		uint32_t msn;		/* messages completed */
		bool nak_sent;		/* a PSN NAK is out: quiet until epsn */
		bool in_msg;		/* inside a SEND or WRITE */
		bool msg_write;		/* that message is a WRITE */
		uint64_t done;		/* bytes of it so far */
		int land_err;		/* SEND: why a run of it could not land */
		uint32_t xrc_srqn;	/* XRC: the SRQ the message is for */
		uint64_t w_va;		/* WRITE: where it goes next */
		uint32_t w_rkey;
		uint64_t w_left;
		struct roce_resource res[ROCE_RESOURCES];
		unsigned int res_next;
		unsigned int res_aged;	/* the next one resource_age looks at */
		/* READs answered again: a budget of bytes (replay_allowed) */
		uint64_t replay_bytes;
		uint64_t replay_ns;	/* when replay_bytes was last topped up */
		/* completions held behind the requester's (ROCE_HELD_RECVS) */
		uint32_t nheld;
		struct roce_held_recv held[ROCE_HELD_RECVS];
	} rx;
	/* the requester's slots (tx.slot_bytes each) */
	uint64_t slots[];
};

/* The transport bits of qp's opcodes: RC's, UC's or XRC's. */
/* The QP's path MTU in bytes (enum ibv_mtu 1..5 is 256..4096). */
static inline uint32_t roce_path_mtu(const struct ibvd_qp *qp)
{
	uint32_t mtu = qp->attr.path_mtu;

	return 128u << (mtu >= 1 && mtu <= 5 ? mtu : 1);
}

static inline uint8_t roce_op_base(const struct ibvd_qp *qp)
{
	switch (qp->qp_type) {
	case IBV_QPT_UC:
		return ROCE_OP_UC;
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		return ROCE_OP_XRC;
	default:
		return ROCE_OP_RC;
	}
}

/* rc.c: CLOCK_MONOTONIC in nanoseconds, the requester's timer's clock. */
uint64_t roce_now_ns(void);

/* roce.c: the path of a connected QP (its AV), to fill struct roce_qp. */
void roce_qp_path(const struct ibvd_qp *qp, struct roce_path *path);

/* qp's wire state: NULL before its RTR or after its reset. */
static inline struct roce_qp *roce_qp_of(const struct ibvd_qp *qp)
{
	return __atomic_load_n(&qp->wire, __ATOMIC_ACQUIRE);
}

/* rc.c: the step in flight i places behind the oldest. */
static inline struct roce_txm *roce_txm_at(struct roce_qp *w, uint32_t i)
{
	uint32_t at = (w->tx.first + i) % w->tx.nslots;

	return (struct roce_txm *)((uint8_t *)w->slots + at * w->tx.slot_bytes);
}

/* Step m's local segments as the engine's functions take them. */
static inline void roce_txm_sgl(const struct roce_txm *m, struct eng_sgl *sgl)
{
	sgl->n = m->nseg;
	sgl->total = m->total;
	memcpy(sgl->seg, m->seg, m->nseg * sizeof(m->seg[0]));
}

/* rc.c: the transport's operations for RC and UC. */
int roce_rc_prepare(struct ibvd_qp *qp, size_t *bytes);
enum eng_resp roce_rc_send(struct ibvd_engine *eng, struct ibvd_qp *src,
			   const struct eng_req *req, uint8_t *rnr_timer);
void roce_rc_forget(struct ibvd_qp *qp);
void roce_rc_av_changed(struct ibvd_qp *qp);
void roce_rc_psns(const struct ibvd_qp *qp, uint32_t *sq_psn,
		  uint32_t *rq_psn);

/*
 * rc.c: the engine ended a turn of qp's send queue, its completions
 * written (engine/transport.h's turn_done): what was held behind them
 * goes now.
 */
void roce_rc_turn_done(struct ibvd_qp *qp);

/*
 * rc_resp.c: write the receive completions held for qp (w->lock held),
 * in the order they were made.
 */
void roce_rc_held_flush(struct ibvd_qp *qp, struct roce_qp *w);

/*
 * rc_resp.c: a request or response that arrived for qp (RC, UC, or XRC:
 * requests for a target, answers for an initiator).
 */
void roce_rc_rx(struct roce_dev *rd, struct ibvd_qp *qp,
		const struct roce_ip *ip, const struct roce_pkt *p);
/* Is opcode a READ response or an ACK, a responder's to a requester? */
bool roce_is_answer(uint8_t opcode);

/* 24-bit PSN arithmetic: b - a as a signed distance. */
static inline int32_t roce_psn_diff(uint32_t b, uint32_t a)
{
	return (int32_t)((b - a) << 8) >> 8;
}

static inline uint32_t roce_psn_add(uint32_t psn, uint32_t n)
{
	return (psn + n) & 0xFFFFFFu;
}

/* packet.c: build and send p with len payload bytes from data, or from sgl
 * at off; 0, or -EFAULT if sgl's memory failed. */
int roce_send_pkt(struct roce_dev *rd, const struct roce_path *path,
		  struct roce_pkt *p, const void *data, uint32_t len);
int roce_send_sgl(struct roce_dev *rd, const struct roce_path *path,
		  struct roce_pkt *p, const struct eng_sgl *sgl, uint64_t off,
		  uint32_t len);

/*
 * packet.c: a batch of packets to one path, built one by one and sent in
 * one system call when it is full or flushed.  Large: a sender keeps one
 * for the duration of a burst.
 */
#define ROCE_TXQ_PKTS		16u
/*
 * A built packet: headers (IP and UDP, then transport: at most 92 bytes
 * over IPv6), payload, pad and ICRC.
 */
#define ROCE_TXQ_SLOT		(ROCE_MAX_PAYLOAD + 128u)
_Static_assert(ROCE_MAX_IP_HDRS + ROCE_MAX_HDRS + ROCE_MAX_PAYLOAD + 3 +
	       ROCE_ICRC_LEN <= ROCE_TXQ_SLOT, "a packet fits its batch slot");

struct roce_txq {
	struct roce_dev *rd;
	const struct roce_path *path;
	unsigned int n;
	uint32_t qpn[ROCE_TXQ_PKTS];		/* each packet's BTH QP */
	uint32_t psn[ROCE_TXQ_PKTS];		/* and PSN */
	size_t len[ROCE_TXQ_PKTS];
	uint8_t buf[ROCE_TXQ_PKTS * ROCE_TXQ_SLOT];
};

void roce_txq_init(struct roce_txq *q, struct roce_dev *rd,
		   const struct roce_path *path);
/* Build p with len payload bytes from data (NULL: none) into q. */
void roce_txq_add(struct roce_txq *q, struct roce_pkt *p, const void *data,
		  uint32_t len);
void roce_txq_flush(struct roce_txq *q);

/*
 * packet.c: packets from..npkts - 1 of a message of len bytes at byte base
 * of sgl (a chunked message's step starts past its first byte), mtu bytes
 * of payload each (the last what is left), into q, behind what q holds
 * (they go when it fills or is flushed); headers fills in packet k's.
 * The payload of a batch is read in one piece.  0, -EFAULT if sgl's
 * memory failed or -ESRCH if its process is gone (what was before it
 * stays in q).
 */
int roce_send_message(struct roce_txq *q,
		      const struct eng_sgl *sgl, uint64_t base, uint64_t len,
		      uint32_t mtu, uint32_t from, uint32_t npkts,
		      void (*headers)(void *arg, uint32_t k, struct roce_pkt *p),
		      void *arg);

/*
 * gso.c: runs of packets as one UDP datagram (its comment): at most what
 * one IPv4 packet holds.
 */
#define ROCE_GSO_MAX		65535u
/* Fewer packets make a run only if together longer than any one. */
#define ROCE_GSO_MIN_PKTS	4u
/*
 * The most packets a run that arrives is cut into: Linux's own limit on
 * what one datagram it segments may hold (UDP_MAX_SEGMENTS); our senders
 * make runs of ROCE_TXQ_PKTS at most.  A datagram of 16-byte packets
 * would otherwise be 4,000 of them, each handled on the thread that every
 * QP of the device shares, for one datagram.
 */
#define ROCE_GSO_MAX_SEGS	64u

/*
 * The length of the run that starts the n IPv4 packets of lens (equal
 * lengths, the last maybe shorter; ROCE_GSO_MIN_PKTS of them or longer
 * than any packet in all, at most ROCE_GSO_MAX bytes as one), or 0 if they
 * start none.  The caller gives only packets of one QP with consecutive
 * PSNs.
 */
unsigned int roce_gso_run_len(const size_t *lens, unsigned int n);

/* Identification and ICRC of the n packets of a run, for their segments. */
void roce_gso_stamp_run(uint8_t *const *pkts, const size_t *lens,
			unsigned int n);

/*
 * Might the IPv4 datagram pkt (len bytes) be a run, to be cut rather than
 * taken as one packet (if roce_gso_split finds it is none, it is one)?
 */
bool roce_gso_maybe_run(const uint8_t *pkt, size_t len);

/* Where the packets cut from a run go (roce_gso_split). */
struct roce_gso_sink {
	void (*packet)(void *arg, const uint8_t *pkt, size_t len);
	/* the packets handed over so far are about to be overwritten */
	void (*reuse)(void *arg);
	void *arg;
};

/*
 * Cut the IPv4 packet pkt (len bytes), a run, into the packets it was
 * made of, built in out (out_len bytes, at least one whole packet), each
 * handed to sink; -EBADMSG if it is no run we can cut (then sink was
 * given nothing).
 */
int roce_gso_split(const uint8_t *pkt, size_t len, uint8_t *out,
		   size_t out_len, const struct roce_gso_sink *sink);

/*
 * io.c: send the n IPv4 packets of a run (built, roce_gso_stamp_run'ed)
 * as one datagram through path's flow socket; 0, or a negative errno when
 * they must go as packets (no socket for the flow, or the kernel would
 * not: that flow sends packets from then on).
 */
int roce_io_send_run(struct roce_dev *rd, const struct roce_path *path,
		     uint8_t *const *pkts, const size_t *lens, unsigned int n);

/* io.c: rd's sockets, given to an engine thread to drain (rd->ifname set). */
int roce_io_open(struct roce_dev *rd);
void roce_io_close(struct roce_dev *rd);
/*
 * The interface was made again: new sockets bound to it take the old
 * ones' places (control thread, objects lock not held).  0, or a
 * negative errno: the old ones kept, or the new ones in place but not
 * watched by the engine (netdev_watch.c tries again).
 */
int roce_io_rebind(struct roce_dev *rd);

/*
 * io.c: put one IP packet on the wire (any thread) to dst (4 or 16 bytes,
 * as the packet's IP version says); 0 or a negative errno.
 */
int roce_io_send(struct roce_dev *rd, const uint8_t *pkt, size_t len,
		 const uint8_t *dst);
/* The same without waiting for room: -EAGAIN when the buffer is full. */
int roce_io_send_now(struct roce_dev *rd, const uint8_t *pkt, size_t len,
		     const uint8_t *dst);

/*
 * io.c: put n IP packets of family to dst (4 or 16 bytes) on the wire in
 * one call where it can.
 */
void roce_io_send_batch(struct roce_dev *rd, const uint8_t *const *pkts,
			const size_t *lens, unsigned int n, int family,
			const uint8_t *dst);

/*
 * rx.c: one IP packet arrived at rd (or was sent to one of rd's own
 * addresses); ibvd_objects_lock is held for reading.
 */
void roce_rx_packet(struct roce_dev *rd, const uint8_t *pkt, size_t len);
/* The same for one rd sent to one of its own addresses: no "peers" check. */
void roce_rx_local(struct roce_dev *rd, const uint8_t *pkt, size_t len);
/*
 * Whether a datagram from the wire is RoCE to one of rd's addresses (or
 * a group) from a peer, by its own headers: a run's outer ones (io.c).
 * A refused source is counted as for a packet.
 */
bool roce_rx_addressed(struct roce_dev *rd, const uint8_t *pkt, size_t len);

/* rc_resp.c: write rd's deferred payloads out (draining thread, no QP
 * lock held). */
void roce_wrun_flush(struct roce_dev *rd);
/* rc_resp.c: send the ACK rd owes, its run landed first (draining thread,
 * no QP lock held): when a batch ends. */
void roce_ack_flush(struct roce_dev *rd);

/* roce.c: is addr (of family: 4 or 16 bytes) one of rd's own addresses? */
bool roce_is_local(const struct roce_dev *rd, int family, const uint8_t *addr);

/*
 * mcast.c: a QP of dev attached to (join) or detached from (leave) the
 * group mgid; the netdev takes the group's packets while any is.  Join:
 * 0, -EINVAL for an MGID that is no IP multicast address, -EAFNOSUPPORT
 * for IPv6 without it, or what the kernel said.  Close: rd goes.
 */
int roce_mcast_join(struct ibvd_device *dev, const uint8_t mgid[16]);
void roce_mcast_leave(struct ibvd_device *dev, const uint8_t mgid[16]);
void roce_mcast_close(struct roce_dev *rd);
/* The groups joined again on the interface's new index (roce_io_rebind). */
void roce_mcast_rebind(struct roce_dev *rd, int ifindex);

#endif /* IBVD_ROCE_INTERNAL_H */
