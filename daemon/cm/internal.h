/*
 * The daemon side of the RDMA connection manager: what its files share.
 *
 * proto/CM.md is the design.  Its pieces:
 *   cm.c        CM sessions (CM_OPEN, teardown, migration), ids, options
 *   addr.c      addresses, local-address check, port spaces, resolution
 *   conn.c      listen/connect/accept/reject/establish/disconnect, the
 *               connection state of id pairs, CM_INIT_QP_ATTR
 *   event.c     CmEvent frames on the event sockets, timers
 *   mcast.c     multicast joins
 *   info.c      snapshots of ids for ibvctl (admin/cm_id.c lists them)
 *   remote.c    the IB CM on the wire: ids whose peer is on another
 *               host, their MADs, retransmissions and arrivals
 *   mad.c       the IB CM's MADs, for peers on other hosts (mad.h)
 *   cma_hdr.c   rdma_cm's header, service IDs, flow labels in them
 *
 * Everything runs on the control thread; nothing here is seen by the
 * engine.  An id is reachable from the wire only through the handle table
 * of the CM session that owns it; ids point at each other (peer, listener)
 * across sessions, and every such link is cut when either end dies.
 */
#ifndef IBVD_CM_INTERNAL_H
#define IBVD_CM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <rdma/rdma_cma.h>

#include "cm.h"
#include "core/handle.h"
#include "core/keyed.h"
#include "frame.h"
#include "ibverbsd.pb-c.h"

struct event;
struct event_base;
struct ibvd_call;
struct ibvd_device;
struct ibvd_session;

/* ---- limits and protocol constants ---------------------------------- */

#define CM_TOKEN_LEN		16
/* ids one CM session may hold (ENOMEM beyond, or REJECTED for a request) */
#define CM_MAX_IDS_PER_SESSION	65536
/* connection requests waiting for accept/reject per listener */
#define CM_MAX_BACKLOG		1024
/* multicast groups one id may join, and groups in the daemon */
#define CM_MAX_JOINS_PER_ID	64
#define CM_MAX_GROUPS		8192
/* From a disconnect to TIMEWAIT_EXIT, as an IB CM's time-wait. */
#define CM_TIMEWAIT_MS		1000
/*
 * Our end of an event socket, once its session listens: room for a
 * backlog of requests and their REJs (the kernel doubles it; without
 * CAP_NET_ADMIN net.core.wmem_max caps it, 208 KiB by default).  Before,
 * a session's events are its own ids' and come a few at a time: what
 * does not fit waits in the session's queue (event.c), and each of the
 * thousand sessions a uid may open holds 64 KiB of kernel memory at
 * most, not 416 KiB.
 */
#define CM_EVENT_SNDBUF		(2 << 20)
#define CM_EVENT_SNDBUF_IDLE	(32 << 10)
/*
 * Sessions of one uid that may have the listener's room at once: any
 * session may listen, and 1,024 of them at 4 MiB would be 4 GiB of
 * kernel memory nothing else counts.  The ones after keep the small
 * buffer, which takes fewer requests in a burst (the rest are refused).
 */
#define CM_GROWN_PER_UID	64
/*
 * What one event takes of it (the kernel counts a datagram's buffer, not
 * its bytes: about 1,280 measured), and what is kept for the events of
 * a session's own ids when requests from others are admitted.
 */
#define CM_EVENT_COST		1536
#define CM_EVENT_RESERVE	(32 * CM_EVENT_COST)

/* Private data an app may send, and a receiver sees zero-padded (IB CM
 * message sizes minus the 36-byte RDMA CM header in REQ and SIDR REQ). */
#define CM_PDATA_REQ		56
#define CM_PDATA_REP		196
#define CM_PDATA_REJ		148
#define CM_PDATA_DREQ		220
#define CM_PDATA_SIDR_REQ	180
#define CM_PDATA_SIDR_REP	136
/* An AF_IB id's REQ and SIDR REQ carry no RDMA CM header: all of theirs. */
#define CM_PDATA_REQ_IB		92
#define CM_PDATA_SIDR_REQ_IB	216

/* REJ reasons and SIDR REP statuses of the IB CM (IB spec, chapter 12). */
#define CM_REJ_TIMEOUT			4
#define CM_REJ_INVALID_SERVICE_ID	8
#define CM_REJ_CONSUMER_DEFINED		28
#define CM_REJ_VENDOR_OPTION_NOT_SUPPORTED	35	/* rdma_reject_ece */
#define CM_SIDR_UNSUPPORTED		1
#define CM_SIDR_REJECT			2


/* Path values of a route between two ports of this daemon. */
#define CM_PACKET_LIFETIME	16	/* as RoCE's CM uses */
#define CM_DEFAULT_TIMEOUT	(CM_PACKET_LIFETIME + 1)
/* The devices' local_ca_ack_delay (verbs/query.c), as rxe's */
#define CM_CA_ACK_DELAY		15
/* 0.64 ms: a receiver on this host reposts in microseconds, so the IB
 * CM's 655 ms (0) would only slow RNR retries down. */
#define CM_MIN_RNR_TIMER	12
#define CM_GRH_HOP_LIMIT	64

#define CM_EPHEMERAL_LOW	32768	/* Linux's ip_local_port_range */
#define CM_EPHEMERAL_HIGH	60999
#define CM_PRIVILEGED_PORT	1024	/* below: root only, as for sockets */
/* Any port will do to look a route up; RoCEv2's own, for the record. */
#define CM_ROUTE_PROBE_PORT	4791

/* ---- ids ------------------------------------------------------------ */

/* rdma_cm_state, as rdma(8) names it. */
enum cm_state {
	CM_IDLE,
	CM_ADDR_QUERY,
	CM_ADDR_RESOLVED,
	CM_ROUTE_QUERY,
	CM_ROUTE_RESOLVED,
	CM_CONNECT,
	CM_DISCONNECT,
	CM_ADDR_BOUND,
	CM_LISTEN,
	CM_DEVICE_REMOVAL,
	CM_DESTROYING,
};

/*
 * Where an id stands in the IB CM exchange with its peer.  The two ends
 * of a pair move together: (REQ_SENT, REQ_RCVD) until the passive side
 * answers, (REP_RCVD, REP_SENT) until the RTU, then both ESTABLISHED.
 * CLOSED: rejected, disconnected or abandoned; nothing more will happen.
 */
enum cm_phase {
	CM_PH_NONE,
	CM_PH_REQ_SENT,
	CM_PH_REQ_RCVD,
	CM_PH_REP_RCVD,
	CM_PH_REP_SENT,
	CM_PH_ESTABLISHED,
	CM_PH_CLOSED,
};

/* One side's connection parameters, as its CmConnParam gave them. */
struct cm_conn_param {
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t flow_control;
	uint8_t retry_count;
	uint8_t rnr_retry_count;
	bool srq;
	uint32_t qp_num;
	uint32_t qkey;
	uint32_t psn;
};

enum cm_timer_kind {
	CM_TIMER_NONE,
	CM_TIMER_ADDR,		/* resolving an address that is not local,
				 * or looking at its neighbour entry */
	CM_TIMER_TIMEWAIT,	/* TIMEWAIT_EXIT after a disconnect */
	CM_TIMER_HANDSHAKE,	/* a local REQ or REP left unanswered */
	CM_TIMER_DREQ,		/* a local DREQ left unanswered */
};

struct cm_join;
struct cm_wire;

struct ibvd_cm_id {
	struct ibvd_cm *cm;		/* the session that owns it */
	uint32_t handle;		/* in cm->ids */
	uint32_t idn;			/* daemon-wide number (cm-idn) */
	uint64_t user;			/* echoed in its events */
	uint32_t ps;			/* enum rdma_port_space */
	uint32_t qp_type;		/* enum ibv_qp_type */
	enum cm_state state;

	/* addresses (family 0 while unset) */
	struct sockaddr_storage src, dst;
	bool bound;			/* holds src's port in its port space */
	struct ibvd_tenant *port_payer;	/* whose IBVD_UID_MAX_CM_PORTS it counts in */
	/*
	 * In its port's list; ids that listened lead it, so that finding a
	 * request's listener never walks the ids merely bound there (any
	 * number of REUSEADDR ones)
	 */
	LIST_ENTRY(ibvd_cm_id) bind_link;
	bool listened;

	/* device port, once bound to a local address or resolved */
	struct ibvd_device *dev;
	uint8_t port_num;
	bool route_valid;		/* the path below means something */
	uint16_t slid, dlid;
	uint8_t hop_limit;		/* RoCE: the route's, when it became
					 * valid (cm_route_found) */

	/* options */
	uint8_t tos;
	bool reuseaddr;
	bool afonly;
	bool afonly_set;		/* else the family's default at bind */
	bool timeout_set;
	uint8_t timeout;		/* RDMA_OPTION_ID_ACK_TIMEOUT */
	uint32_t qkey;			/* UD */

	/* the connection */
	enum cm_phase phase;
	bool timewait_owed;		/* the peer disconnected: TIMEWAIT_EXIT
					 * after our own rdma_disconnect */
	bool active;			/* it sent the request */
	bool confirm_reply;		/* moves own_qp and sends the RTU itself */
	struct ibvd_cm_id *peer;	/* the other end, while linked */
	/*
	 * A local disconnect whose DREP is still to come: the id that
	 * disconnected waits for the one it told (drep_from), which answers
	 * with its own rdma_disconnect or its end (drep_to, conn.c)
	 */
	struct ibvd_cm_id *drep_from, *drep_to;
	struct cm_conn_param local;	/* negotiated: what this side uses */
	struct cm_conn_param remote;	/* what the peer sent */
	bool remote_valid;		/* remote.qp_num/psn are known */
	uint32_t lqpn;			/* this side's QP (ibvctl) */
	struct {			/* the QP made with it (qp.c), 0s: none */
		uint32_t ctx;		/* its context's daemon-wide id */
		uint32_t handle;
		uint32_t num;
	} own_qp;

	/* listening, and requests pending on a listener */
	int backlog;
	unsigned int npending;
	TAILQ_HEAD(, ibvd_cm_id) pending;	/* children in REQ_RCVD */
	struct ibvd_cm_id *listener;	/* while this id is pending on it */
	TAILQ_ENTRY(ibvd_cm_id) pending_link;

	LIST_HEAD(, cm_join) joins;
	unsigned int njoins;

	unsigned int nqueued;		/* its events in its session's queue */

	struct event *timer;		/* made on first use */
	enum cm_timer_kind timer_kind;
	/*
	 * Resolving another host's address while its next hop's neighbour
	 * entry is not valid (addr.c): CM_TIMER_ADDR looks again after
	 * step_ms, until the deadline (CLOCK_MONOTONIC ms).
	 */
	struct {
		bool waiting;
		uint32_t step_ms;
		uint64_t deadline_ms;
	} neigh;

	/* The IB CM exchange with a peer on another host (remote.c). */
	struct cm_wire *wire;

	TAILQ_ENTRY(ibvd_cm_id) all_link;	/* cm_world.ids */
	/* in cm_world.by_qp_ctx under own_qp.ctx while that context lives */
	struct ibvd_keyed by_qp_ctx;
};

/* An event the session's socket had no room for (event.c). */
struct cm_queued_event {
	TAILQ_ENTRY(cm_queued_event) link;
	size_t len;
	uint8_t *frame;			/* ibvd_frame_pack's */
	/* whose handles it carries: a destroy or a migrate must know */
	struct ibvd_cm_id *id;
	struct ibvd_cm_id *listener;	/* a request's, or NULL */
};

/* One CM session: an rdma_event_channel of some process. */
struct ibvd_cm {
	struct ibvd_session *session;
	int event_fd;			/* our end, non-blocking: events out,
					 * CM_TAKEN in (taken_ev) */
	struct event *taken_ev;
	bool event_grown;		/* its buffer sized for a listener */
	uint32_t event_seq;		/* req_id of the last CmEvent */
	/* what waits for room in it, oldest first, and the event that
	 * sends it when there is (event.c) */
	TAILQ_HEAD(cm_queue, cm_queued_event) queued;
	unsigned int nqueued;
	struct event *write_ev;
	uint8_t token[CM_TOKEN_LEN];
	struct ibvd_handle_table ids;
	bool dead;			/* being closed: send it nothing more */
	unsigned int npending;		/* its listeners' requests, summed */
	struct event *close_ev;		/* closes it from the event loop */
	TAILQ_ENTRY(ibvd_cm) link;	/* cm_world.sessions */
};

TAILQ_HEAD(cm_session_list, ibvd_cm);
TAILQ_HEAD(cm_id_list, ibvd_cm_id);

/* ---- daemon-wide state (cm.c) --------------------------------------- */

#define CM_NPS			4	/* IPoIB, TCP, UDP, IB */

/*
 * The ids bound to each port, one list a port (512 KiB a space, touched
 * as ports are used): a bind, a listen or a connection request walks only
 * the ids of its own port, and a search for a free one looks at a list
 * head each, however many ids one tenant piles on other ports.
 */
struct cm_port_space {
	LIST_HEAD(, ibvd_cm_id) ports[65536];
};

struct cm_world {
	struct cm_session_list sessions;
	struct cm_id_list ids;		/* every id, oldest first */
	/* ids with a QP, by its context (qp.c): a context's teardown looks
	 * at its own ids, not at every id of the daemon */
	struct ibvd_keyed_table by_qp_ctx;
	uint64_t going_looks;		/* ids those teardowns looked at */
	uint64_t listing_looks;		/* ids ibvctl's listings looked at */
	uint32_t next_idn;
	struct cm_port_space ps[CM_NPS];
	LIST_HEAD(, cm_group) groups;
	unsigned int ngroups;
};

extern struct cm_world cm_world;

/* ---- cm.c ----------------------------------------------------------- */

/* The CM session of the calling connection. */
struct ibvd_cm *cm_of(const struct ibvd_call *call);
/* The caller's id named handle, or NULL with EINVAL recorded. */
struct ibvd_cm_id *cm_id_get(struct ibvd_call *call, uint32_t handle);
/* A new id on cm (state IDLE), or NULL (ENOMEM / table full). */
struct ibvd_cm_id *cm_id_new(struct ibvd_cm *cm, uint32_t ps, uint32_t qp_type,
			     uint64_t user, int *err);
/* Destroy an id: its connection, joins, binding, timers, handle. */
void cm_id_destroy(struct ibvd_cm_id *id);
/* Move id to session `to` (a new handle there): 0 or -ENOMEM. */
int cm_id_move(struct ibvd_cm_id *id, struct ibvd_cm *to);
bool cm_is_ud(const struct ibvd_cm_id *id);
bool cm_is_reliable(const struct ibvd_cm_id *id);
bool cm_listener_type_takes(const struct ibvd_cm_id *l, uint32_t asked);
/* Index of a port space in cm_world.ps, or -1. */
int cm_ps_index(uint32_t ps);
const char *cm_ps_name(uint32_t ps);
const char *cm_state_name(enum cm_state state);
/* The device all local addresses belong to (the first one), or NULL. */
struct ibvd_device *cm_default_device(const struct ibvd_cm *cm);
/* The live session with that token (CM_TOKEN_LEN bytes), or NULL. */
struct ibvd_cm *cm_session_by_token(const uint8_t *token);

/* ---- addr.c --------------------------------------------------------- */

/* Parse a raw sockaddr of the wire into ss (AF_INET or AF_INET6). */
int cm_addr_parse(struct ibvd_call *call, const ProtobufCBinaryData *b,
		  const char *what, struct sockaddr_storage *ss);
uint16_t cm_addr_port(const struct sockaddr_storage *ss);
void cm_addr_set_port(struct sockaddr_storage *ss, uint16_t port);
socklen_t cm_addr_len(const struct sockaddr_storage *ss);
bool cm_addr_is_any(const struct sockaddr_storage *ss);
bool cm_addr_is_wild(const struct sockaddr_storage *ss);
bool cm_addr_is_multicast(const struct sockaddr_storage *ss);
/* Same family and address (ports ignored). */
bool cm_addr_equal(const struct sockaddr_storage *a,
		   const struct sockaddr_storage *b);
/* An address of this host (or a wildcard or loopback address). */
bool cm_addr_is_local(const struct ibvd_cm *cm,
		      const struct sockaddr_storage *ss);
uint8_t cm_addr_port_num(const struct ibvd_cm *cm,
			 const struct sockaddr_storage *ss);
/* "a.b.c.d:port" / "addr:port", as rdma(8) prints them. */
void cm_addr_str(const struct sockaddr_storage *ss, char *buf, size_t len);

/* Bind id to addr (port 0: an ephemeral port); id must be IDLE. */
int cm_bind(struct ibvd_call *call, struct ibvd_cm_id *id,
	    const struct sockaddr_storage *addr);
void cm_unbind(struct ibvd_cm_id *id);
/* Could id listen on its port (no overlapping id, reuseaddr or not)? */
int cm_check_listen(struct ibvd_call *call, struct ibvd_cm_id *id);
/* id listens now: it moves to the head of its port's list. */
void cm_port_lead(struct ibvd_cm_id *id);
/* The id listening for dst in port space ps, or NULL. */
struct ibvd_cm_id *cm_find_listener(uint32_t ps,
				    const struct sockaddr_storage *dst);
/* Bind id to its device's port (ADDR_RESOLVED, children). */
void cm_attach_device(struct ibvd_cm_id *id, struct ibvd_device *dev,
		      uint8_t port_num);
/* Fill info (pointing into id and the buffers given) from id. */
struct cm_info_buf {
	uint8_t sgid[16], dgid[16];
	char devname[64];
};
void cm_fill_info(const struct ibvd_cm_id *id, Ibvd__CmIdInfo *info,
		  struct cm_info_buf *buf);
/* LID of id's port now (0 without a device). */
uint16_t cm_port_lid(const struct ibvd_cm_id *id);
/* Active MTU of id's port (enum ibv_mtu). */
uint32_t cm_port_mtu(const struct ibvd_cm_id *id);
/* GID[0] of id's port. */
void cm_port_gid0(const struct ibvd_cm_id *id, uint8_t gid[16]);
/*
 * The address-resolution timer fired: a look at the neighbour entry
 * waited for (ADDR_RESOLVED, or ADDR_ERROR ETIMEDOUT at the deadline),
 * else ADDR_ERROR EHOSTUNREACH.
 */
void cm_addr_timeout(struct ibvd_cm_id *id);

/*
 * The path to id's peer is known (its device, both addresses): the route
 * is valid, and on RoCE its hop limit is asked of the kernel now, as
 * rdma_cm resolves it with the address (addr4_resolve, addr6_resolve).
 */
void cm_route_found(struct ibvd_cm_id *id);
/* The hop limit of the route to id's peer that cm_route_found() read. */
uint8_t cm_route_hop_limit(const struct ibvd_cm_id *id);
/*
 * The local ACK timeout a REQ from id announces (cm_ack_timeout of its
 * path's packet lifetime and the CA's ACK delay), which the passive side
 * takes for its QP unless its listener set one.
 */
uint8_t cm_req_ack_timeout(const struct ibvd_cm_id *id);
/* Is dev a RoCE device (its ids' paths carry GIDs made of addresses)? */
bool cm_dev_is_roce(const struct ibvd_device *dev);
/* The device of this daemon that owns a local address (else the first). */
struct ibvd_device *cm_addr_device(const struct ibvd_cm *cm,
				   const struct sockaddr_storage *ss);
/* ss as a GID: IPv4 as ::ffff:a.b.c.d, IPv6 as it is. */
void cm_addr_to_gid(const struct sockaddr_storage *ss, uint8_t gid[16]);
/* Index of gid in the GID table of id's port, or -1. */
int cm_gid_index(const struct ibvd_cm_id *id, const uint8_t gid[16]);
/* AF_INET for an IPv4 GID (::ffff:a.b.c.d), else AF_INET6. */
int cm_gid_family(const uint8_t gid[16]);
/* Index of the first GID of family in the table of id's device, or -1. */
int cm_gid_index_of_family(const struct ibvd_cm_id *id, int family);
/*
 * The GIDs of id's path: on a RoCE device, its addresses as GIDs; on a
 * software device, its port's GID[0] both.
 */
void cm_path_gids(const struct ibvd_cm_id *id, uint8_t sgid[16],
		  uint8_t dgid[16]);
/* Is id's destination on another host (a RoCE path off this daemon)? */
bool cm_dst_is_far(const struct ibvd_cm_id *id);

/* ---- conn.c --------------------------------------------------------- */

/* id is going away: tell its peer, leave its listener, free its children. */
void cm_conn_abandon(struct ibvd_cm_id *id);

/* What remote.c shares with conn.c: the steps of the state machine. */
void cm_refuse_active(struct ibvd_cm_id *a, int32_t rej_reason,
		      int32_t sidr_status, const uint8_t *pdata, size_t len);
void cm_send_refusal(struct ibvd_cm_id *id, uint32_t event, int32_t status,
		     const uint8_t *pdata, size_t len, size_t full);
void cm_send_disconnected(struct ibvd_cm_id *id, int status);
void cm_peer_disconnected(struct ibvd_cm_id *id);
void cm_pending_leave(struct ibvd_cm_id *id);
/* The event socket's reader: CM_TAKEN frees a request's backlog slot. */
void cm_taken_cb(int fd, short what, void *arg);
/* A passive id on l for a request from src to dst on dev (REQ_RCVD). */
struct ibvd_cm_id *cm_child_new(struct ibvd_cm_id *l, struct ibvd_device *dev,
				const struct sockaddr_storage *src,
				const struct sockaddr_storage *dst,
				const struct cm_conn_param *req);
/* The CONNECT_REQUEST event of child c of listener l. */
void cm_send_request(struct ibvd_cm_id *c, const struct ibvd_cm_id *l,
		     const uint8_t *pdata, size_t len);
/* The active side got the passive side's REP (rep: its values). */
void cm_reply_received(struct ibvd_cm_id *a, const struct cm_conn_param *rep,
		       const uint8_t *pdata, size_t len);
/* conn.c: the event socket of a session that listens, made larger */
void cm_event_room_for_requests(struct ibvd_cm *cm);
/* Does a listener take this request (its kind, its backlog)? */
bool cm_listener_takes(const struct ibvd_cm_id *l, bool ud);
uint32_t cm_max_rd_atom(const struct ibvd_cm_id *id);
/* The GRH of id's path on a RoCE device into ah (dgid: its buffer). */
void cm_path_grh(const struct ibvd_cm_id *id, Ibvd__AhAttr *ah,
		 uint8_t dgid[16]);

/* ---- qp.c ----------------------------------------------------------- */

/*
 * Move the QP made with id (verbs/qp_bundle.c) to RTR and RTS with the
 * connection's attributes, and for the passive side the resources its
 * accept grants; 0 or a negative errno noted on call.
 */
int cm_qp_move(struct ibvd_call *call, const struct ibvd_cm_id *id,
	       const struct cm_conn_param *accept);
/* Move it to ERR (CM_DISCONNECT); 0 or a negative errno noted on call. */
int cm_qp_to_err(struct ibvd_call *call, const struct ibvd_cm_id *id);
/* The number of the QP made with id, 0 if none. */
uint32_t cm_own_qp_num(const struct ibvd_cm_id *id);
/* Is the QP made with id still there? */
bool cm_own_qp_alive(const struct ibvd_cm_id *id);
/* id goes: out of cm_world.by_qp_ctx. */
void cm_own_qp_forget(struct ibvd_cm_id *id);

/* ---- remote.c ------------------------------------------------------- */

/*
 * Active side, after the reply to CM_CONNECT: send the REQ (SIDR REQ for
 * UD) of a to its peer's host, with the user's private data.  Failing,
 * a hears it as a refusal.
 */
void cm_wire_connect(struct ibvd_cm_id *a, const uint8_t *pdata, size_t len);
/* Passive side: the REP (SIDR REP) of an accepted far request. */
void cm_wire_accept(struct ibvd_cm_id *c, const uint8_t *pdata, size_t len);
/* REJ of a far request or reply (SIDR REP "rejected" for UD). */
void cm_wire_reject(struct ibvd_cm_id *id, uint16_t reason,
		    const uint8_t *pdata, size_t len);
/* Active side: the RTU. */
void cm_wire_establish(struct ibvd_cm_id *a);
/* The passive side established by traffic first: its REP is done. */
void cm_wire_comm_est(struct ibvd_cm_id *c);
/* DREQ (retransmitted until the DREP). */
void cm_wire_disconnect(struct ibvd_cm_id *id);
/* The DREP the far end's DREQ waits for, if it still does. */
void cm_wire_drep(struct ibvd_cm_id *id);
/* id goes away: tell the far end what the IB CM would, then forget it. */
void cm_wire_abandon(struct ibvd_cm_id *id);
/* The device went away: forget the far end without a word. */
void cm_wire_forget(struct ibvd_cm_id *id);
/* ... and the DREQs still resent for ids already gone on dev. */
void cm_wire_device_removed(const struct ibvd_device *dev);
/* The path MTU a far connection settled on (enum ibv_mtu), or 0. */
uint32_t cm_wire_mtu(const struct ibvd_cm_id *id);
/* Start and stop taking MADs from the devices' QP1s. */
int cm_wire_start(struct event_base *base);
void cm_wire_stop(void);

/* ---- event.c -------------------------------------------------------- */

/* An event for id; fields the sender fills, others default. */
struct cm_event {
	uint32_t event;
	int32_t status;
	uint32_t listen_id;
	uint64_t user;			/* 0: id->user */
	const struct cm_conn_param *conn;
	const uint8_t *pdata;		/* private data, pdata_len bytes ... */
	size_t pdata_len;
	size_t pdata_full;		/* ... zero-padded to this length */
	const Ibvd__CmUdParam *ud;
	uint64_t mcast_user;
	bool established;		/* CONNECT_REPLY: confirmed already */
};

/* Send ev about id on id's event socket (nothing if its session is dying). */
void cm_event_send(struct ibvd_cm_id *id, const struct cm_event *ev);
/* The common case: an event with just a type and a status. */
void cm_event_simple(struct ibvd_cm_id *id, uint32_t event, int32_t status);
/* (Re)arm id's timer. */
int cm_timer_arm(struct ibvd_cm_id *id, enum cm_timer_kind kind,
		 uint32_t ms);
void cm_timer_free(struct ibvd_cm_id *id);
/* The armed timer, if any, will not fire. */
void cm_timer_stop(struct ibvd_cm_id *id);
/* conn.c: id's local REQ or REP went unanswered for too long. */
void cm_handshake_expired(struct ibvd_cm_id *id);
/* A local DREQ's peer neither disconnected nor went in time. */
void cm_dreq_expired(struct ibvd_cm_id *id);
/* The id's device is gone: its disconnect waits end without a word. */
void cm_conn_device_removed(struct ibvd_cm_id *id);
/*
 * Stop sending to cm and close its session soon (from the event loop);
 * why (NULL: the client hung up, nothing to report) is logged.
 */
void cm_session_kill(struct ibvd_cm *cm, const char *why);
/* Drop the events that still wait for room (the session is going). */
void cm_events_forget(struct ibvd_cm *cm);
/* id goes: the events of its that wait go too, and requests to it as a
 * listener with their ids (refused, as the client would). */
void cm_events_drop(struct ibvd_cm_id *id);
/* id moved from `from` to its session now: so do the events of its that
 * wait, with its new handle, and requests to it with their ids. */
void cm_events_move(struct ibvd_cm *from, struct ibvd_cm_id *id);

/* ---- mcast.c -------------------------------------------------------- */

/* Leave every group id joined. */
void cm_mcast_leave_all(struct ibvd_cm_id *id);

#endif /* IBVD_CM_INTERNAL_H */
