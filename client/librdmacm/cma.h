/*
 * Our librdmacm.so.1: rdma-core's connection manager API (rdma_cma.h; the
 * export table is Debian's, librdmacm.map) with ibverbsd in place of the
 * kernel's rdma_cm.  proto/CM.md is the design.  The daemon runs the CM:
 * port spaces, address and route resolution, the IB CM handshake between
 * ids, multicast groups.  This library turns the calls into requests on a
 * CM session, turns the daemon's CmEvent frames into struct rdma_cm_event,
 * and creates and moves the QPs of ids through libibverbs' public API
 * only.  There is no data path here: apps post and poll with libibverbs
 * directly.
 *
 * An event channel is a CM session of the daemon: its own connection for
 * requests and replies, and the event socket the daemon writes CmEvent
 * frames to (channel->fd).  Every rdma_cm_id belongs to one channel and is
 * named there by the daemon's handle.
 *
 * The files, lowest first; each calls only files listed before it (to
 * check: nm on the objects; no file may leave undefined a symbol that a
 * file listed after it defines).  The declarations below keep this order.
 *   msg.c          wire conversions: socket addresses (sizes, from the
 *                  daemon's raw bytes)
 *   channel.c      event channels: the CM session (CM_OPEN), the event
 *                  socket, migrated events queued locally, the fd apps poll
 *   devices.c      the verbs devices, opened once per process for the CM
 *                  (rdma_get_devices), with their default PD and limits
 *   mcast_joins.c  an id's multicast joins and its QP's group attachments
 *   cma.c          ids: a channel's id table, the events counted on ids and
 *                  their acks, cma_call(), the daemon's view of an id
 *                  (id->route, id->verbs), create/destroy/migrate,
 *                  options, ports
 *   qp.c           QPs and SRQs on an id (default PD and CQs) and the QP's
 *                  state moves with the daemon's attributes
 *   events.c       CmEvent frames into rdma_cm_events (a request's new id,
 *                  the active side's RTU), rdma_get/ack_cm_event,
 *                  rdma_event_str, and synchronous mode (cma_sync_wait)
 *   addr.c         bind, resolve address, resolve route
 *   conn.c         listen, connect, accept, reject, establish, disconnect,
 *                  rdma_init_qp_attr, rdma_notify, ECE
 *   mcast.c        rdma_join_multicast(_ex), rdma_leave_multicast
 *   ep.c           the endpoint API: rdma_create_ep, rdma_get_request
 *   addrinfo.c     rdma_getaddrinfo over getaddrinfo(3); no daemon needed
 *   rsocket/       the rsockets, on the public calls above only (rsocket/rs.h)
 * So events.c, which creates ids for connection requests and finishes the
 * active side's QP, sits above ids and QPs; everything that waits for an
 * event (the calls of synchronous ids) sits above events.c; and what both
 * sides touch (an event's ack, an id's joins) lives below both.
 *
 * Who talks to the daemon: requests go through cma_call() (cma.c) on the
 * connection of the id's channel, or straight on a channel's connection
 * where no id of that channel is involved yet: CM_OPEN (channel.c), create
 * and migrate (cma.c), refusing a request (events.c).  Events arrive only
 * through channel.c.  devices.c and qp.c reach the daemon only through
 * libibverbs, whose device contexts have connections of their own.
 *
 * Error convention: internal functions return 0 or a negative errno; the
 * exported functions convert once, with cma_ret()/cma_null_ret(), to the
 * -1 (or NULL) + errno that librdmacm promises.
 *
 * Lock order: channel ids_lock, then an id's mut.  A connection's own lock
 * (struct ibvd_conn) is innermost: no other lock is taken while a call is
 * in flight, except an id's op_lock, which keeps its multicast joins and
 * their attachments of the id's QP consistent.
 */
#ifndef IBVD_CMA_H
#define IBVD_CMA_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "conn.h"
#include "frame.h"
#include "verbs_msg.h"
#include "ibverbsd.pb-c.h"
#include "util.h"


/*
 * Private data limits of the IB CM messages (CM.md step 9): longer is
 * EINVAL, and a receiver sees the data zero-padded to the full length.
 */
enum {
	CMA_PDATA_REQ = 56,
	CMA_PDATA_REP = 196,
	CMA_PDATA_REJ = 148,
	CMA_PDATA_DREQ = 220,
	CMA_PDATA_SIDR_REQ = 180,	/* 216 less the RDMA CM header, as the kernel */
	CMA_PDATA_SIDR_REP = 136,
	/* an AF_IB id's REQ and SIDR REQ: no RDMA CM header, all theirs */
	CMA_PDATA_REQ_IB = 92,
	CMA_PDATA_SIDR_REQ_IB = 216,
	CMA_PDATA_MAX = 256,	/* room in an event for any of them */
};

/* rdma_reject_ece's REJ reason: the IB CM's "vendor option not supported" */
#define CMA_REJ_ECE		35

#define CMA_TOKEN_LEN		16
#define CMA_ID_BUCKETS		64	/* handle hash of a channel */

struct cma_id;

struct cma_queued;

struct cma_channel {
	struct rdma_event_channel channel;	/* must be first; fd: epoll over
						   sock and efd (channel.c) */
	struct ibvd_conn conn;			/* requests and replies */
	int sock;				/* the daemon's event socket */
	int efd;				/* readable while qhead != NULL */
	uint8_t token[CMA_TOKEN_LEN];		/* names the session (migrate) */
	size_t token_len;

	/*
	 * Held for reading from taking a frame until its id is looked up
	 * (cma_channel_next, cma_channel_done), for writing while an id
	 * moves to another channel: an event taken just before is either
	 * found on its id here or moved with it, never lost in between.
	 */
	pthread_rwlock_t take_lock;
	pthread_mutex_t recv_lock;		/* one reader, and all below */
	uint8_t *buf;				/* IBVD_FRAME_MAX bytes */
	struct cma_queued *qhead, *qtail;	/* events moved here by migrate */
	bool dead;				/* event socket EOF: daemon gone */
	unsigned int waiters;			/* threads in rdma_get_cm_event */
	bool closing;				/* destroyed: the last waiter frees */

	pthread_mutex_t ids_lock;		/* the table below */
	struct cma_id *ids[CMA_ID_BUCKETS];
};

static inline struct cma_channel *to_cma_channel(struct rdma_event_channel *c)
{
	return container_of(c, struct cma_channel, channel);
}

struct cma_mcast {
	struct cma_mcast *next;
	uint64_t user;				/* names the join to the daemon */
	void *context;				/* the app's, back in private_data */
	struct sockaddr_storage addr;
	socklen_t addr_len;
	uint32_t join_flags;
	bool attached;				/* the id's QP is attached */
	union ibv_gid mgid;
	uint16_t mlid;
};

struct cma_id {
	struct rdma_cm_id id;			/* must be first: apps hold &id */
	uint32_t magic;				/* CMA_ID_MAGIC while it lives */
	struct cma_channel *ch;			/* == to_cma_channel(id.channel) */
	uint32_t handle;			/* the daemon's, on ch's session */
	struct cma_id *hnext;			/* in ch->ids */
	bool sync;				/* ch is this id's private channel */

	pthread_mutex_t mut;			/* everything below */
	pthread_cond_t cond;
	uint32_t events_delivered;		/* handed to the app ... */
	uint32_t events_acked;			/* ... and acked (destroy waits) */
	bool removal_reported;			/* DEVICE_REMOVAL went out */
	bool established;			/* ESTABLISHED went out */
	bool disconnected;			/* DISCONNECTED went out */

	/* the QP's multicast attachments: joins, their events, QP destroy */
	pthread_mutex_t op_lock;
	struct cma_mcast *mcast;
	uint64_t mcast_seq;

	struct ibv_context *held;		/* the device this id holds */
	struct ibv_sa_path_rec path;		/* id.route.path_rec points here */
	/* from the connection request, for rdma_accept() without params */
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint32_t qkey;				/* our UD QP's, for rdma_accept() */
	/* id.qp was made with the id (qp.c): the daemon moves it to RTS */
	bool qp_bundled;
	struct ibv_ece local_ece;		/* rdma_set_local_ece(): kept only */

	/* rdma_create_ep(RAI_PASSIVE): what rdma_get_request() gives new ids */
	struct ibv_pd *ep_pd;
	struct ibv_qp_init_attr *ep_qp_attr;
	/* rdma_create_ep(): res->ai_connect, for the first rdma_connect() */
	void *ep_connect;
	size_t ep_connect_len;
};

static inline struct cma_id *to_cma_id(struct rdma_cm_id *id)
{
	return container_of(id, struct cma_id, id);
}

#define CMA_ID_MAGIC	0x6964636du	/* "mcdi" */

/*
 * An id the app may use: not NULL, nor one it destroyed already.  An app
 * that reuses a destroyed id (perftest -R retries a failed connect on
 * the ids it has just destroyed) reads memory the allocator took back;
 * rdma-core's calls then fail on the closed channel fd, ours would lock
 * a mutex that is no longer one.  So they fail with EINVAL first.
 */
static inline bool cma_id_live(struct rdma_cm_id *id)
{
	return id && to_cma_id(id)->magic == CMA_ID_MAGIC;
}

struct cma_event {
	struct rdma_cm_event event;		/* must be first */
	struct cma_id *owner;			/* counted on (the listener for
						   CONNECT_REQUEST) */
	uint8_t private_data[CMA_PDATA_MAX];
};

/* ---- public-boundary conversion ---------------------------------------- */

static inline int cma_ret(int ret)
{
	if (ret >= 0)
		return 0;
	errno = -ret;
	return -1;
}

static inline void *cma_null_ret(int ret)
{
	errno = -ret;
	return NULL;
}

/* ---- wire conversions (msg.c) -------------------------------------------- */

/* The size of an address of a family we handle, else 0. */
socklen_t cma_addr_len(const struct sockaddr *addr);
/* Copy a raw sockaddr from the wire; false if it is not one we know. */
bool cma_sockaddr_from_msg(const ProtobufCBinaryData *b,
			   struct sockaddr_storage *ss);

/* ---- channels (channel.c) ---------------------------------------------- */

int cma_channel_create(struct cma_channel **ret_ch);
void cma_channel_destroy(struct cma_channel *ch);
/* A thread waits on ch (-EBADF if destroyed) ... */
int cma_channel_enter(struct cma_channel *ch);
/* ... and is done with it: true if ch was destroyed meanwhile (and is gone). */
bool cma_channel_leave(struct cma_channel *ch);
/*
 * rdma_get_cm_event's cancellation: none between hold and release but in
 * cma_blocked_wait, which waits for fd to be readable (for ever if fd < 0)
 * as the caller's own setting allows.
 */
void cma_cancel_hold(void);
void cma_cancel_release(void);
int cma_blocked_wait(int fd);
/* The channel fd's F_GETFL flags, or a negative errno (channel.c). */
int cma_channel_flags(const struct cma_channel *ch);
/*
 * The next CmEvent of ch (blocking unless the fd is O_NONBLOCK: -EAGAIN;
 * a signal: -EINTR); -EIO when the daemon is gone, -EBADF if destroyed.
 * With an event (1), ch's take_lock is held until cma_channel_done.
 */
int cma_channel_next(struct cma_channel *ch, Ibvd__CmEvent **ret_m);
/* The event cma_channel_next gave is looked up (or dropped). */
void cma_channel_done(struct cma_channel *ch);
bool cma_channel_dead(struct cma_channel *ch);
/* rdma_migrate_id(3): move the id's pending events to its new channel. */
/* Tell the daemon we will not take a request it made an id for. */
void cma_refuse_request(struct cma_channel *ch, uint32_t handle);
/*
 * The id handle is destroyed: the events the daemon sent it before are
 * taken out of ch (its socket and its queue), as the kernel drops a
 * destroyed id's, so that the fd is never readable for nothing (an app
 * that poll()s, then reads, would block).  Connection requests to it (a
 * listener), whose ids the app never saw, go to refuse().
 */
void cma_channel_forget_id(struct cma_channel *ch, uint32_t handle,
			   void (*refuse)(struct cma_channel *, uint32_t));
/*
 * The oldest connection request to the listener listen_handle in ch (its
 * socket read into its queue for that), taken out; NULL if none.
 */
Ibvd__CmEvent *cma_channel_take_request(struct cma_channel *ch,
					 uint32_t listen_handle);
/* Queue m on ch as if it had come there (ch takes it); -ENOMEM. */
int cma_channel_put(struct cma_channel *ch, Ibvd__CmEvent *m);
void cma_channel_move_events(struct cma_channel *from, uint32_t old_handle,
			     struct cma_channel *to, uint32_t new_handle);

/* ---- devices (devices.c) ----------------------------------------------- */

/* The process-wide context of the device named name. */
int cma_device_open(const char *name, struct ibv_context **ret_ctx);
/* The device's default PD (one per device, made on first use). */
int cma_device_pd(struct ibv_context *ctx, struct ibv_pd **ret_pd);
int cma_device_hold(struct ibv_context *ctx, struct ibv_pd **ret_pd);
void cma_device_drop(struct ibv_context *ctx);
int cma_device_xrcd(struct ibv_context *ctx, struct ibv_xrcd **ret_xrcd);
/* max_qp_rd_atom / max_qp_init_rd_atom of ctx's device. */
int cma_device_rd_atom(struct ibv_context *ctx, uint8_t *max_resp,
		       uint8_t *max_init);

/* ---- an id's multicast joins (mcast_joins.c) ---------------------------- */

/*
 * All under cid->op_lock, except cma_mcast_free_all() on an id that nobody
 * holds any more.
 */

/* List mc on cid, numbering it for the daemon (mc->user). */
void cma_mcast_add(struct cma_id *cid, struct cma_mcast *mc);
/* The join an event's user value names, or NULL. */
struct cma_mcast *cma_mcast_find(struct cma_id *cid, uint64_t user);
/* The join of the group at addr, or NULL. */
struct cma_mcast *cma_mcast_find_addr(struct cma_id *cid,
				      const struct sockaddr *addr,
				      socklen_t len);
void cma_mcast_unlink(struct cma_id *cid, struct cma_mcast *mc);
/* The join's group is known (group: its address vector): attach the QP. */
int cma_mcast_attach(struct cma_id *cid, struct cma_mcast *mc,
		     const struct ibv_ah_attr *group);
/* Detach the id's QP from mc's group, if it was attached. */
int cma_mcast_detach(struct cma_id *cid, struct cma_mcast *mc);
/* The id's QP is being destroyed, which detaches it from every group. */
void cma_mcast_qp_gone(struct cma_id *cid);
void cma_mcast_free_all(struct cma_id *cid);

/* ---- ids (cma.c) --------------------------------------------------------- */

int cma_id_alloc(struct cma_channel *ch, void *context,
		 enum rdma_port_space ps, enum ibv_qp_type qp_type,
		 struct cma_id **ret_id);
void cma_id_free(struct cma_id *cid);
int cma_create_id(struct rdma_event_channel *channel, void *context,
		  enum rdma_port_space ps, enum ibv_qp_type qp_type,
		  struct cma_id **ret_id);
int cma_destroy_id(struct cma_id *cid);
/*
 * rdma_migrate_id; in_event: called while taking an event of cid's
 * channel (its take_lock held), for an id that event is making.
 */
int cma_migrate(struct cma_id *cid, struct rdma_event_channel *channel,
		bool in_event);
/* The id table of a channel. */
void cma_ids_add(struct cma_channel *ch, struct cma_id *cid);
void cma_ids_remove(struct cma_channel *ch, struct cma_id *cid);
/* Find handle's id and count one event on it (cma_ack_event gives it back). */
struct cma_id *cma_ids_hold(struct cma_channel *ch, uint32_t handle);
void cma_id_hold(struct cma_id *cid);
void cma_id_release(struct cma_id *cid);
/* Wait until the app acked every event it was handed on cid. */
void cma_id_wait_acked(struct cma_id *cid);
/* Free an event and give its count back to its id. */
void cma_ack_event(struct cma_event *ev);
/* Ack the event a synchronous id keeps in id->event, if any. */
void cma_put_event(struct cma_id *cid);
/* A request of the id's session. */
int cma_call(struct cma_id *cid, uint16_t type, const ProtobufCMessage *req,
	     const ProtobufCMessageDescriptor *reply_desc,
	     ProtobufCMessage **reply);
/* Take the daemon's view of where an id is (addresses, device, path). */
int cma_apply_info(struct cma_id *cid, const Ibvd__CmIdInfo *info);
/* cid is on ctx's device: id->verbs, port_num and the device's PD. */
int cma_id_set_device(struct cma_id *cid, struct ibv_context *ctx,
		      uint8_t port_num);
int cma_query(struct cma_id *cid);
bool cma_is_ud_ps(enum rdma_port_space ps);
/*
 * Does cid connect by SIDR (a UD QP)?  By its QP type, as the kernel
 * decides: RDMA_PS_IB takes both kinds (rdma_create_ep's ai_qp_type).
 */
bool cma_is_ud(const struct cma_id *cid);
/* The private data of cid's request: less the RDMA CM header, unless AF_IB. */
size_t cma_req_pdata(const struct cma_id *cid);
int cma_ps_qp_type(enum rdma_port_space ps, enum ibv_qp_type *type);

/* ---- QPs (qp.c) ---------------------------------------------------------- */

/* Move cid's QP to state with the daemon's attributes (CM_INIT_QP_ATTR);
 * rd_atomic, if not 0xFF, overrides the negotiated max_(dest_)rd_atomic. */
int cma_qp_to(struct cma_id *cid, enum ibv_qp_state state, uint8_t rd_atomic);
int cma_qp_to_err(struct cma_id *cid);
/* The daemon moved the id's QP to RTS (CM_ACCEPT, CM_ESTABLISH move_qp). */
void cma_qp_at_rts(struct cma_id *cid);
/* RTS, as the daemon moved it, unless the app moved it on meanwhile. */
void cma_qp_reached_rts(struct cma_id *cid);
/* ... or to ERR (CM_DISCONNECT move_qp). */
void cma_qp_at_err(struct cma_id *cid);
int cma_init_qp_attr(struct cma_id *cid, enum ibv_qp_state state,
		     struct ibv_qp_attr *attr, int *mask);
int cma_create_qp(struct cma_id *cid, struct ibv_pd *pd,
		  struct ibv_qp_init_attr *attr);

/* ---- events (events.c) -------------------------------------------------- */

/* Next event of ch for the app (blocking unless the fd is O_NONBLOCK). */
int cma_get_event(struct cma_channel *ch, struct cma_event **ret_ev);
/*
 * Synchronous mode: wait on a sync id's private channel for the event its
 * operation produces and keep it in id->event; its failure as an errno.
 */
int cma_sync_wait(struct cma_id *cid);

/* ---- addresses (addr.c) ------------------------------------------------- */

int cma_bind_addr(struct cma_id *cid, struct sockaddr *addr);
int cma_resolve_addr(struct cma_id *cid, struct sockaddr *src,
		     struct sockaddr *dst, int timeout_ms);
int cma_resolve_route(struct cma_id *cid, int timeout_ms);
/* RDMA_OPTION_IB_PATH: the route from the app's own path records. */
int cma_set_ib_path(struct cma_id *cid, const void *optval, size_t optlen);

#endif /* IBVD_CMA_H */
