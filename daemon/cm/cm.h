/*
 * The RDMA connection manager (proto/CM.md): what the rest of the daemon
 * sees of it.  A CM session is a connection that sent CM_OPEN; it owns
 * ids, named by handles of that connection, and an event socket.
 *
 * Layer cm/: it calls verbs/ (queries, devices), server/, tenant/, core/
 * and common/; never admin/.  ibvctl reads it through the snapshots below
 * (info.c); cm/internal.h stays inside the folder.
 */
#ifndef IBVD_CM_H
#define IBVD_CM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ibverbsd.pb-c.h"

struct ibvd_call;
struct ibvd_context;
struct ibvd_cm;
struct ibvd_daemon;
struct ibvd_device;
struct ibvd_qp;
struct ibvd_session;

/* Request handlers (request.c's table). */
int ibvd_req_cm_open(struct ibvd_call *call);
int ibvd_req_cm_create_id(struct ibvd_call *call);
int ibvd_req_cm_destroy_id(struct ibvd_call *call);
int ibvd_req_cm_bind_addr(struct ibvd_call *call);
int ibvd_req_cm_resolve_addr(struct ibvd_call *call);
int ibvd_req_cm_resolve_route(struct ibvd_call *call);
int ibvd_req_cm_listen(struct ibvd_call *call);
int ibvd_req_cm_connect(struct ibvd_call *call);
int ibvd_req_cm_accept(struct ibvd_call *call);
int ibvd_req_cm_reject(struct ibvd_call *call);
int ibvd_req_cm_establish(struct ibvd_call *call);
int ibvd_req_cm_disconnect(struct ibvd_call *call);
int ibvd_req_cm_init_qp_attr(struct ibvd_call *call);
int ibvd_req_cm_query(struct ibvd_call *call);
int ibvd_req_cm_set_option(struct ibvd_call *call);
int ibvd_req_cm_migrate_id(struct ibvd_call *call);
int ibvd_req_cm_join_mcast(struct ibvd_call *call);
int ibvd_req_cm_leave_mcast(struct ibvd_call *call);
int ibvd_req_cm_notify(struct ibvd_call *call);

/*
 * CREATE_QP naming a CM id (verbs.h, struct ibvd_verbs_cm): the id's INIT
 * attributes for qp, which it owns from then on.
 */
int ibvd_cm_qp_init(struct ibvd_call *call, const Ibvd__CmQpRef *ref,
		    const struct ibvd_qp *qp, Ibvd__QpAttr *attr, uint32_t *mask);

/*
 * The session is being destroyed: destroy its ids (connected peers get
 * DISCONNECTED, pending actives REJECTED) and close its event socket.
 */
void ibvd_cm_session_free(struct ibvd_session *s);
/* ctx and its QPs go: their ids' peers hear DISCONNECTED now (conn.c) */
void ibvd_cm_context_going(const struct ibvd_context *ctx);
/* The CM ids those teardowns looked at, ever (ibvctl daemon status). */
uint64_t ibvd_cm_going_looks(void);

/*
 * Start taking the IB CM's MADs from the devices' QP1s (connections with
 * other hosts), on d's event loop; stop before the loop goes.
 */
int ibvd_cm_start(struct ibvd_daemon *d);
void ibvd_cm_stop(void);

/* A reload removed dev: its ids get DEVICE_REMOVAL and lose the device. */
void ibvd_cm_device_removed(struct ibvd_device *dev);

/* ---- what ibvctl may read (info.c) ------------------------------------ */

#define IBVD_CM_ADDR_STR	64	/* "a.b.c.d:port", "[v6 addr]:port" */

/* A CM id as "resource show cm_id" lists it: a snapshot. */
struct ibvd_cm_id_info {
	const struct ibvd_session *owner;	/* its CM session */
	uint32_t idn;			/* daemon-wide, as rdma's cm-idn */
	uint32_t lqpn;			/* its QP, 0 if none */
	uint32_t qp_type;		/* enum ibv_qp_type */
	const char *state;		/* rdma(8)'s names */
	const char *ps;
	/*
	 * The device it is listed under: its own, else the one its wildcard
	 * address stands for (every local address is there); bound says
	 * which, and port_num counts only when it is its own.
	 */
	const struct ibvd_device *dev;
	bool bound;
	uint8_t port_num;
	/* addresses, "" when it has none yet */
	char src[IBVD_CM_ADDR_STR];
	char dst[IBVD_CM_ADDR_STR];
	uint16_t src_port, dst_port;
};

/*
 * Call fn for every CM id, oldest first, of sessions of *uid only if uid
 * is not NULL, until it returns non-zero; returns that value, or 0.
 */
int ibvd_cm_foreach_id(const uid_t *uid,
		       int (*fn)(const struct ibvd_cm_id_info *id, void *arg),
		       void *arg);
/* The ids those walks looked at, ever (ibvctl daemon status). */
uint64_t ibvd_cm_listing_looks(void);

/* The CM ids session s holds (0 if it is not a CM session). */
unsigned int ibvd_cm_session_ids(const struct ibvd_session *s);

#endif /* IBVD_CM_H */
