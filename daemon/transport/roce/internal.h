/*
 * The RoCEv2 transport's files (transport/roce/): what they share.
 *
 *   roce.c     the transport's operations (engine/transport.h), UD, and
 *              the per-device state
 *   rc.c       RC and UC requesters: packets of a message, ACK waits
 *   rc_resp.c  RC and UC responders: PSNs, SENDs, WRITEs, READs, atomics
 *   packet.c   one packet put together and sent
 *   io.c       the device's sockets and its receive thread
 *   rx.c       what an arriving packet is for, and handing it on
 *   wire.c, ip.c, icrc.c, crc32.c   the packet codec (wire.h)
 *
 * A RoCE device sends IPv4 packets it builds whole (IP, UDP, BTH, ICRC)
 * through a raw socket, because the ICRC covers the IP header, the IP ID
 * included, which only the sender of the whole header knows; and it
 * receives through a raw UDP socket filtered to port 4791, because
 * checking the ICRC of an arriving packet needs its IP header as well.
 * Both sockets are bound to the device's netdev.
 *
 * Done today: UD, RC and UC (SEND, WRITE, READ, atomics) in both
 * directions, and to QPs of the same device without the wire.  An RC
 * requester keeps one message in flight per QP (its packets pipelined,
 * the next message after its ACK).  QP1 carries the IB CM's
 * MADs between the CM and other hosts (transport/gsi.h).  Not yet: IPv6
 * GIDs.
 *
 * Locking: a QP's wire state (struct roce_qp, qp->wire) is shared by its
 * serving engine thread (the requester) and the receive thread (ACKs and
 * responses for it, requests to it), under its own mutex; both hold
 * ibvd_objects_lock for reading, so the QP cannot go meanwhile.  It is
 * made on first use and freed by qp_forget (write lock held).
 */
#ifndef IBVD_ROCE_INTERNAL_H
#define IBVD_ROCE_INTERNAL_H

#include <net/if.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/transport.h"
#include "wire.h"

struct ibvd_device;
struct ibvd_qp;

/* Longest IP packet a RoCE device sends or takes: a 9000-byte MTU. */
#define ROCE_MAX_PACKET		9216u
/* The largest payload of one packet: IB MTU 4096. */
#define ROCE_MAX_PAYLOAD	4096u

/* A RoCE device's own state (dev->transport_priv). */
struct roce_dev {
	struct ibvd_device *dev;
	char ifname[IF_NAMESIZE];
	int tx_fd;			/* raw IPv4, IP_HDRINCL */
	int rx_fd;			/* raw IPv4/UDP, filtered to port 4791 */
	int sink_fd;			/* UDP :4791, so no ICMP answers */
	int stop_fd;			/* eventfd: the receive thread ends */
	pthread_t rx_thread;
	bool rx_running;
	uint16_t ip_id;			/* atomic: the next IPv4 ID */
	uint32_t gsi_psn;		/* atomic: QP1's next PSN */
};

/* Where a QP's packets go: IPv4 addresses and the IP/UDP header values. */
struct roce_path {
	uint8_t src[4];
	uint8_t dst[4];
	uint8_t tclass;
	uint8_t hop_limit;
	uint16_t sport;
};

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

/* What the RoCE transport keeps for an RC or UC QP (qp->wire). */
struct roce_qp {
	pthread_mutex_t lock;
	struct roce_path path;		/* to the connected peer */
	/* requester: the step of the message in front that is in flight */
	struct {
		bool started;		/* next_psn set from sq_psn */
		uint32_t next_psn;	/* the next new PSN */
		bool active;
		uint32_t head;		/* its WQE: qp->sq_head then */
		uint64_t off;		/* its offset in the message */
		uint32_t first_psn;	/* its PSNs: first_psn .. + npsn - 1 */
		uint32_t npsn;
		uint64_t sent_ns;	/* when it last went out */
		int answer;		/* -1 none yet, else an enum eng_resp */
		uint8_t rnr_timer;
		bool resend;		/* go again at the next call */
		uint32_t resend_psn;	/* from this PSN */
		/* READ and atomics: where the data that comes back goes */
		uint32_t opcode;
		uint64_t length;	/* bytes of this step */
		uint64_t got;		/* READ bytes arrived, in order */
		struct eng_sgl *local;
	} tx;
	/* responder */
	struct {
		bool started;		/* epsn set from rq_psn */
		uint32_t epsn;		/* the PSN expected next */
		uint32_t msn;		/* messages completed */
		bool nak_sent;		/* a PSN NAK is out: quiet until epsn */
		bool in_msg;		/* inside a SEND or WRITE */
		uint64_t done;		/* bytes of it so far */
		bool wqe_held;		/* SRQ: the WQE consumed at FIRST */
		struct eng_recv *wqe;	/* SRQ: that WQE */
		uint64_t w_va;		/* WRITE: where it goes next */
		uint32_t w_rkey;
		uint64_t w_left;
		struct roce_resource res[ROCE_RESOURCES];
		unsigned int res_next;
	} rx;
};

/* roce.c: the path of a connected QP (its AV), to fill struct roce_qp. */
void roce_qp_path(const struct ibvd_qp *qp, struct roce_path *path);

/* rc.c: qp's wire state, made on first use; NULL only without memory. */
struct roce_qp *roce_qp_of(struct ibvd_qp *qp);

/* rc.c: the transport's operations for RC and UC. */
enum eng_resp roce_rc_send(struct ibvd_engine *eng, struct ibvd_qp *src,
			   const struct eng_req *req, uint8_t *rnr_timer);
void roce_rc_forget(struct ibvd_qp *qp);

/* rc_resp.c: a request or response that arrived for qp (RC or UC). */
void roce_rc_rx(struct roce_dev *rd, struct ibvd_qp *qp,
		const struct roce_ip *ip, const struct roce_pkt *p);

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

/* io.c: sockets and the receive thread of rd (rd->ifname set). */
int roce_io_open(struct roce_dev *rd);
void roce_io_close(struct roce_dev *rd);

/* io.c: put one IP packet on the wire (any thread); 0 or a negative errno. */
int roce_io_send(struct roce_dev *rd, const uint8_t *pkt, size_t len,
		 const uint8_t dst[4]);

/*
 * rx.c: one IP packet arrived at rd (or was sent to one of rd's own
 * addresses); ibvd_objects_lock is held for reading.
 */
void roce_rx_packet(struct roce_dev *rd, const uint8_t *pkt, size_t len);

/* roce.c: is addr (IPv4, 4 bytes) one of rd's own addresses? */
bool roce_is_local(const struct roce_dev *rd, const uint8_t addr[4]);

#endif /* IBVD_ROCE_INTERNAL_H */
