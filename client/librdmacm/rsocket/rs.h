/*
 * rsockets: stream sockets over RC QPs, with rdma-core's wire protocol so
 * that our rsockets and rdma-core's can talk to each other.
 *
 * The protocol (rdma-core's librdmacm/rsocket.c, version 1):
 *  - The connection's private data (struct rs_conn_data) carries each
 *    side's receive credits, the first half of its receive buffer (where
 *    the peer may write first), and the address and key of its "target
 *    SGL": RS_SGL_SIZE entries (followed by the iomap table) that the peer
 *    writes fresh receive-buffer halves into.
 *  - Data moves by RDMA WRITE WITH IMM into the peer's receive buffer; the
 *    immediate's top three bits are the operation, the rest the length
 *    (rs_msg()).  Every message consumes one of the peer's receive WRs and
 *    one credit.
 *  - A receiver that consumed half of its credits, or has half of its
 *    buffer free again, writes the freed half into the sender's target SGL
 *    (RS_OP_SGL, the immediate carrying the new credit limit), or sends
 *    the credit limit alone in an empty write.
 *  - Control messages (RS_OP_CTRL): shutdown of one direction,
 *    disconnect, keepalive.  RS_QP_CTRL_SIZE send slots are kept for them.
 *  - riowrite() is a plain RDMA WRITE into a region the peer announced
 *    with RS_OP_IOMAP_SGL (riomap()).
 *
 * The files, lowest first; each calls only files listed before it:
 *   wire.c      the protocol's formats: messages, connection data, SGEs
 *   table.c     the fd -> rsocket map
 *   endpoint.c  an rsocket's QP, CQ, buffers and their registrations
 *   cm.c        the events of an rsocket's CM channel: the connection's
 *               steps, requests queued on a listener, disconnects
 *   cq.c        completions, credits, control messages, waiting
 *   iomap.c     riomap, riounmap, announcing maps to the peer
 *   connect.c   rsocket, rbind, rlisten, raccept, rconnect, rshutdown,
 *               rclose
 *   data.c      rsend/rrecv and their variants, riowrite
 *   poll.c      rpoll, rselect
 *   options.c   rsetsockopt, rgetsockopt, rfcntl, rgetpeername, ...
 *   dgram.c     datagram rsockets: a UD QP and a UDP socket (the calls
 *               above hand SOCK_DGRAM rsockets to it)
 *   keepalive.c the keepalive thread (SO_KEEPALIVE)
 *
 * An rsocket's fd is the fd of its own CM event channel: a real fd, unique
 * while the rsocket lives, that the app may pass to rpoll().  Datagram
 * rsockets (SOCK_DGRAM) are a file of their own, dgram.c, whose fd is
 * their UDP socket's; the calls above hand them over where they differ.
 *
 * Errors: internal functions return 0 (or a count) or a negative errno;
 * the exported calls convert once with rs_ret().  One mutex per rsocket
 * guards everything in it; a thread that must wait releases it in poll()
 * (rs_wait()), so a blocked rrecv() does not stop an rsend().
 */
#ifndef IBVD_RS_H
#define IBVD_RS_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

/* ---- wire.c: the protocol ------------------------------------------------ */

#define RS_PROTO_VERSION	1
#define RS_CONN_FLAG_NET	(1 << 0)	/* sender is big-endian */
#define RS_CONN_FLAG_IOMAP	(1 << 1)	/* an iomap table follows the SGL */
#define RS_SGL_SIZE		2		/* entries of a target SGL */
#define RS_QP_CTRL_SIZE		4		/* send slots kept for control */
#define RS_WR_ID_RECV		(1ULL << 63)	/* else the wr_id is the message */

/* The operation in an immediate's top three bits. */
enum rs_op {
	RS_OP_DATA = 0,
	RS_OP_WRITE = 2,	/* riowrite(): never on the wire, in wr_ids only */
	RS_OP_SGL = 4,
	RS_OP_IOMAP_SGL = 6,
	RS_OP_CTRL = 7,
};

enum rs_ctrl {
	RS_CTRL_DISCONNECT = 0,
	RS_CTRL_KEEPALIVE = 1,
	RS_CTRL_SHUTDOWN = 2,
	/*
	 * Ours, not rdma-core's (whose rsockets ignore it and take the
	 * disconnect that follows for a close): SO_LINGER 0's abort, which
	 * the peer reports as TCP reports a reset.
	 */
	RS_CTRL_RESET = 3,
};

/* A region the peer may write: in the reader's byte order (wire.c). */
struct rs_sge {
	uint64_t addr;
	uint32_t key;
	uint32_t length;
};

/* An iomap table entry: the peer's offset for a region. */
struct rs_iomap {
	uint64_t offset;
	struct rs_sge sge;
};

/* Connection private data; multi-byte fields big-endian. */
struct rs_conn_data {
	uint8_t version;
	uint8_t flags;
	uint16_t credits;
	uint8_t reserved[3];
	uint8_t target_iomap_size;	/* entries, in rs_scale_encode() form */
	struct rs_sge target_sgl;	/* address of the target SGL, RS_SGL_SIZE */
	struct rs_sge data_buf;		/* the first half of the receive buffer */
};

static inline uint32_t rs_msg(enum rs_op op, uint32_t data)
{
	return ((uint32_t)op << 29) | (data & 0x1FFFFFFF);
}

static inline enum rs_op rs_msg_op(uint32_t msg)
{
	return (enum rs_op)(msg >> 29);
}

static inline uint32_t rs_msg_data(uint32_t msg)
{
	return msg & 0x1FFFFFFF;
}

uint8_t rs_scale_encode(uint16_t value);
uint16_t rs_scale_decode(uint8_t scaled);
/*
 * An AF_INET or AF_INET6 address into a caller's buffer of dst_len bytes,
 * truncated as getsockname(2) does; returns its full length.
 */
socklen_t rs_copy_sockaddr(struct sockaddr *dst, socklen_t dst_len,
			   const struct sockaddr *src);
/* An SGE or iomap entry we write into the peer's memory, in its order. */
void rs_sge_to_peer(struct rs_sge *dst, const struct rs_sge *src, bool swap);
void rs_iomap_to_peer(struct rs_iomap *dst, const struct rs_iomap *src,
		      bool swap);

/* ---- the rsocket --------------------------------------------------------- */

/* States, ordered as rdma-core's: passive, opening, connected, ended. */
enum {
	RS_INIT = 0,
	RS_BOUND = 0x0001,
	RS_LISTENING = 0x0002,
	RS_OPENING = 0x0004,
	RS_RESOLVING_ADDR = RS_OPENING | 0x0010,
	RS_RESOLVING_ROUTE = RS_OPENING | 0x0020,
	RS_CONNECTING = RS_OPENING | 0x0040,
	RS_ACCEPTING = RS_OPENING | 0x0080,
	RS_CONNECTED = 0x0100,
	RS_WRITABLE = 0x0200,
	RS_READABLE = 0x0400,
	RS_CONNECT_RDWR = RS_CONNECTED | RS_READABLE | RS_WRITABLE,
	RS_CONNECT_ERROR = 0x0800,
	RS_DISCONNECTED = 0x1000,
	RS_ERROR = 0x2000,
};

/* One message the peer wrote into the receive buffer, not yet read. */
struct rs_rmsg {
	uint32_t op;
	uint32_t len;		/* bytes left of it */
};

/* A connection request a listener has taken from its channel. */
struct rs_request {
	struct rs_request *next;
	struct rdma_cm_id *id;
	struct rdma_conn_param param;
	struct rs_conn_data data;
	bool data_ok;		/* long enough and our version */
};

/* A region of ours registered by riomap(). */
struct rs_iomap_mr {
	struct rs_iomap_mr *next;
	struct ibv_mr *mr;
	uint64_t offset;
	int index;		/* in the peer's table; -1: local (PROT_NONE) */
	bool sent;		/* announced to the peer */
};

struct rs_dgram;

struct rsocket {
	int fd;				/* the app's name: ch->fd (dg: its UDP socket) */
	pid_t owner;			/* the process that made it (rs_table_pid) */
	unsigned int refs;		/* the fd table's + calls running (atomic) */
	int domain;
	struct rs_dgram *dg;		/* SOCK_DGRAM (dgram.c); NULL for a stream */
	pthread_mutex_t lock;		/* everything below */
	unsigned int state;
	bool closed;			/* rclose()d: blocked calls give up */
	/* rclose() under way on thread `closer`: the others' calls give up
	 * at once (rs_gone), not when its shutdown has ended the stream */
	bool closing;
	pthread_t closer;
	int err;			/* SO_ERROR, cleared when read */
	/* a failed connect's error went to rconnect: unconnected, not ended */
	bool connect_told;
	int fl_flags;			/* O_NONBLOCK from rfcntl() */
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct sockaddr_storage dst;	/* rconnect()'s, while opening */

	/* listener: requests taken from the channel, not yet raccept()ed */
	struct rs_request *req_head, *req_tail;
	int backlog;
	/*
	 * A listener whose daemon went: no request comes any more and its
	 * channel's fd, hung up, is no longer slept on; raccept() and
	 * poll report the loss once (err), then nothing, as a quiet port.
	 */
	bool orphaned;

	/* options, fixed once the endpoint exists */
	uint32_t sq_size, rq_size, sq_inline, sbuf_size, rbuf_size;
	uint16_t target_iomap_size;	/* our table the peer writes */
	bool nodelay, keepalive, reuseaddr, reuseport, oobinline;
	bool cork;			/* TCP_CORK: reported, sends go at once */
	int keepidle;			/* TCP_KEEPIDLE, seconds */
	/* kept for rgetsockopt only: a reliable connection needs neither */
	int keepcnt, keepintvl;		/* TCP_KEEPCNT, TCP_KEEPINTVL */
	int v6only;			/* IPV6_V6ONLY as set */
	/* RDMA_ROUTE's paths, taken in place of resolving the route */
	void *route_opt;
	socklen_t route_optlen;
	struct linger linger;

	/* endpoint (endpoint.c) */
	struct ibv_comp_channel *cch;
	struct ibv_cq *cq;
	bool cq_armed;
	unsigned int cq_unacked;
	uint8_t *sbuf, *rbuf;
	void *tbuf;			/* target SGL + iomap table: peer writes */
	struct rs_sge *target_sgl;	/* in tbuf */
	struct rs_iomap *target_iomap;	/* in tbuf, after the SGL */
	struct ibv_mr *smr, *rmr, *tmr;
	bool swap;			/* the peer's byte order differs */

	/* sending */
	uint32_t sqe_avail;		/* data send slots */
	uint32_t sbuf_bytes_avail;
	uint32_t sbuf_head;		/* next copy goes to sbuf + sbuf_head */
	uint16_t sseq_no, sseq_comp;	/* messages sent, and allowed */
	int target_sge;			/* current entry of target_sgl */
	uint32_t ctrl_seqno, ctrl_max_seqno;
	struct rs_sge remote_sgl;	/* the peer's target SGL */
	int remote_sge;			/* its entry we write next */
	struct rs_sge remote_iomap;	/* the peer's iomap table */

	/* receiving */
	struct rs_rmsg *rmsg;		/* rq_size + 1 entries */
	uint32_t rmsg_head, rmsg_tail;
	uint16_t rseq_no, rseq_comp;	/* messages consumed; next credit */
	uint32_t rbuf_offset;		/* next byte to read */
	uint32_t rbuf_queued;		/* bytes arrived, not yet read */
	uint32_t rbuf_bytes_avail;	/* free, not yet given to the peer */
	uint32_t rbuf_free_offset;	/* the half we give next */

	/* riomap(): ours, the ones still to announce first */
	struct rs_iomap_mr *iomaps;
	bool iomap_pending;
};

static inline int rs_ret(int ret)
{
	if (ret >= 0)
		return ret;
	errno = -ret;
	return -1;
}

/* ---- table.c ------------------------------------------------------------- */

int rs_table_insert(struct rsocket *rs);
bool rs_table_remove(struct rsocket *rs);
/* This process's id, kept across fork(): an rsocket's owner. */
pid_t rs_table_pid(void);
/* Is rs rclose()d, or being rclose()d by another thread?  Under rs->lock. */
static inline bool rs_gone(const struct rsocket *rs)
{
	return rs->closed ||
	       (rs->closing && !pthread_equal(rs->closer, pthread_self()));
}

/*
 * The rsocket named fd, held until rs_put(), or NULL: also for one a
 * forked child inherited, which is not the child's (its endpoint and
 * channel sockets are the parent's), so every call on it fails with
 * EBADF; rclose alone takes it (rs_get_inherited) to let its fds go.
 */
struct rsocket *rs_get(int fd);
struct rsocket *rs_get_inherited(int fd);
void rs_put(struct rsocket *rs);

/* ---- endpoint.c ---------------------------------------------------------- */

void rs_set_defaults(struct rsocket *rs);
/* The QP, CQ and buffers of rs->id, receives posted. */
int rs_create_ep(struct rsocket *rs);
void rs_destroy_ep(struct rsocket *rs);
int rs_post_recv(struct rsocket *rs);

/* A position in an iovec array (what rsend and riowrite copy from). */
struct iov_pos {
	const struct iovec *iov;
	int cnt;
	size_t off;
};

void iov_copy_out(struct iov_pos *p, uint8_t *dst, size_t len);
/* Copy len bytes into the sbuf ring: the SGEs (1, or 2 where it wraps). */
int rs_sbuf_stage(struct rsocket *rs, struct iov_pos *p, uint32_t len,
		  struct ibv_sge sgl[2]);
void rs_format_conn_data(struct rsocket *rs, struct rs_conn_data *conn);
void rs_save_conn_data(struct rsocket *rs, const struct rs_conn_data *conn);

/* ---- cm.c ---------------------------------------------------------------- */

#define RS_RESOLVE_MS		2000
/* rclose's wait for the peer to take what it sent last (connect.c) */
#define RS_CLOSE_WAIT_MS	5000
/* SO_LINGER 0's wait for its reset to reach the peer (connect.c) */
#define RS_RESET_WAIT_MS	1000

/* Handle the CM events queued on rs's channel (never blocks). */
void rs_cm_progress(struct rsocket *rs);
void rs_free_requests(struct rsocket *rs);

/* ---- cq.c ---------------------------------------------------------------- */

typedef bool (*rs_test_fn)(struct rsocket *rs);

int rs_post_msg(struct rsocket *rs, uint32_t msg);
int rs_post_write(struct rsocket *rs, struct ibv_sge *sgl, int nsge,
		  uint32_t wr_data, bool with_imm, int flags, uint64_t addr,
		  uint32_t rkey);
/* Take what completed and the CM's news; send credits that are due. */
void rs_progress(struct rsocket *rs);
/* Progress until test(rs) holds: -EAGAIN if nonblock, -EINTR on signal. */
int rs_wait(struct rsocket *rs, rs_test_fn test, bool nonblock);
/*
 * The same until deadline (CLOCK_MONOTONIC ns, rs_deadline_ms): then
 * -ETIMEDOUT.  Deadline 0 waits for ever, and a negative one not at all
 * (-EAGAIN).
 */
int rs_wait_until(struct rsocket *rs, rs_test_fn test, int64_t deadline);
/*
 * A blocking call's sleep that a signal handler interrupted: true if it
 * sleeps on, as the kernel restarts a socket call (recv, send, accept,
 * connect) whose handler has SA_RESTART.  poll() says EINTR whatever the
 * handler's flags and not which signal came, so it sleeps on only when
 * no handler that could have come lacks SA_RESTART (glibc's signal()
 * sets it), else the call fails with EINTR as before.
 */
bool rs_restart_after_signal(void);
int64_t rs_deadline_ms(int64_t ms);
/* For a sleep in poll(): take the channel's events, arm the CQ (true if it
 * was not armed: progress again before sleeping), the fds to watch. */
void rs_drain_cq_events(struct rsocket *rs);
bool rs_arm_cq(struct rsocket *rs);
int rs_wait_fds(struct rsocket *rs, int fds[2]);
void rs_update_credits(struct rsocket *rs);
bool rs_can_send(struct rsocket *rs);
bool rs_conn_can_send(struct rsocket *rs);
bool rs_have_rdata(struct rsocket *rs);
bool rs_conn_have_rdata(struct rsocket *rs);
bool rs_all_sends_done(struct rsocket *rs);
bool rs_ctrl_avail(struct rsocket *rs);
bool rs_nonblocking(struct rsocket *rs, int flags);

/* ---- iomap.c ------------------------------------------------------------- */

int rs_send_iomaps(struct rsocket *rs, bool nonblock);
void rs_free_iomaps(struct rsocket *rs);

/* ---- connect.c ----------------------------------------------------------- */

/* Everything of rs; the last rs_put() calls it. */
void rs_free(struct rsocket *rs);

/* Finish an opening rsocket: 0 once it opened or failed, -EAGAIN if nonblock. */
int rs_finish_connect(struct rsocket *rs, bool nonblock);

/* ---- keepalive.c ------------------------------------------------------------ */

/* rs->keepalive and rs->keepidle changed: (un)schedule its keepalives. */
int rs_keepalive_update(struct rsocket *rs);
/* rs goes away: its keepalives stop (before it is freed). */
void rs_keepalive_forget(struct rsocket *rs);

/* ---- dgram.c --------------------------------------------------------------- */

#define RS_DS_SLOT		2048	/* a datagram with its header, at most */

/* rs->dg and its UDP socket, which becomes rs->fd (type: socket(2)'s). */
int rs_dgram_open(struct rsocket *rs, int type);
void rs_dgram_close(struct rsocket *rs);
int rs_dgram_bind(struct rsocket *rs, const struct sockaddr *addr,
		  socklen_t len);
/* Sets the destination of rsend() (connect(2) on a UDP socket). */
int rs_dgram_connect(struct rsocket *rs, const struct sockaddr *addr,
		     socklen_t len);
/* One datagram out (to: NULL for rconnect()'s), or in; under rs->lock. */
ssize_t rs_dgram_sendv(struct rsocket *rs, const struct iovec *iov, int cnt,
		       int flags, const struct sockaddr *to, socklen_t tolen);
/* msg_flags (may be NULL) gets MSG_TRUNC for a datagram cut short. */
ssize_t rs_dgram_recvv(struct rsocket *rs, const struct iovec *iov, int cnt,
		       int flags, struct sockaddr *from, socklen_t *fromlen,
		       int *msg_flags);
/* rpoll's view (poll.c's check()): revents, and with arm the fds to sleep on. */
short rs_dgram_revents(struct rsocket *rs, short events, bool arm, int fds[2],
		       int *nfds);
int rs_dgram_getsockname(struct rsocket *rs, struct sockaddr *addr,
			 socklen_t *len);
int rs_dgram_getpeername(struct rsocket *rs, struct sockaddr *addr,
			 socklen_t *len);

#endif /* IBVD_RS_H */
