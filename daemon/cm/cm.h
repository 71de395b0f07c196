/*
 * The RDMA connection manager (proto/CM.md): what the rest of the daemon
 * sees of it.  A CM session is a connection that sent CM_OPEN; it owns
 * ids, named by handles of that connection, and an event socket.
 */
#ifndef IBVD_CM_H
#define IBVD_CM_H

#include <stddef.h>

struct ibvd_call;
struct ibvd_cm;
struct ibvd_daemon;
struct ibvd_device;
struct ibvd_session;
struct json_t;

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
 * The session is being destroyed: destroy its ids (connected peers get
 * DISCONNECTED, pending actives REJECTED) and close its event socket.
 */
void ibvd_cm_session_free(struct ibvd_session *s);

/* A reload removed dev: its ids get DEVICE_REMOVAL and lose the device. */
void ibvd_cm_device_removed(struct ibvd_device *dev);

/*
 * "resource show cm_id [link DEV/PORT | dev DEV] [FILTER VALUE]...":
 * append one object per id the caller may see to out (admin.c).
 */
int ibvd_cm_admin_show(struct ibvd_call *call, size_t argc, char **argv,
		       struct json_t *out);

#endif /* IBVD_CM_H */
