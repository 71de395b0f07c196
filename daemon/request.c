/*
 * The request table: every message type a client may send, its payload,
 * its fds, the session states that may send it, and its handler.  The
 * only file that names the handlers of every layer; the server's
 * dispatcher (server/call.c) finds rows through ibvd_request_type_find.
 */
#include <config.h>

#include "admin/admin.h"
#include "cm/cm.h"
#include "ibverbsd.pb-c.h"
#include "request.h"
#include "server/session.h"
#include "util.h"
#include "verbs/context.h"
#include "verbs/query.h"
#include "verbs/verbs.h"

/*
 * Who may send what.  A fresh connection may list devices, open one (and
 * become its context), open a CM session or start administering; queries
 * and verbs objects need a context, CM requests a CM session.
 * Keep the table short and flat: a row is all the dispatcher needs.
 */
static const struct ibvd_request_type request_types[] = {
	{ IBVD_MSG_LIST_DEVICES, "LIST_DEVICES", NULL, 0,
	  IBVD_SESSION_ANY, ibvd_req_list_devices },
	{ IBVD_MSG_OPEN_DEVICE, "OPEN_DEVICE", &ibvd__open_device__descriptor, 0,
	  IBVD_SESSION_FRESH, ibvd_req_open_device },
	{ IBVD_MSG_QUERY_DEVICE, "QUERY_DEVICE", NULL, 0,
	  IBVD_SESSION_CONTEXT, ibvd_req_query_device },
	{ IBVD_MSG_QUERY_PORT, "QUERY_PORT", &ibvd__query_port__descriptor, 0,
	  IBVD_SESSION_CONTEXT, ibvd_req_query_port },
	{ IBVD_MSG_QUERY_GID_TABLE, "QUERY_GID_TABLE",
	  &ibvd__query_gid_table__descriptor, 0,
	  IBVD_SESSION_CONTEXT, ibvd_req_query_gid_table },
	{ IBVD_MSG_QUERY_PKEY, "QUERY_PKEY", &ibvd__query_pkey__descriptor, 0,
	  IBVD_SESSION_CONTEXT, ibvd_req_query_pkey },
	{ IBVD_MSG_ADMIN, "ADMIN", &ibvd__admin_request__descriptor, 0,
	  IBVD_SESSION_FRESH | IBVD_SESSION_ADMIN, ibvd_req_admin },

	/* verbs objects (verbs.h): only on a device context */
#define CTX IBVD_SESSION_CONTEXT
	{ IBVD_MSG_ATTACH_MEMORY, "ATTACH_MEMORY",
	  &ibvd__attach_memory__descriptor, 2, CTX, ibvd_req_attach_memory },
	{ IBVD_MSG_IMPORT_DEVICE, "IMPORT_DEVICE",
	  &ibvd__import_device__descriptor, 1, CTX, ibvd_req_import_device },
	{ IBVD_MSG_ALLOC_PD, "ALLOC_PD", NULL, 0, CTX, ibvd_req_alloc_pd },
	{ IBVD_MSG_DEALLOC_PD, "DEALLOC_PD", &ibvd__handle__descriptor, 0,
	  CTX, ibvd_req_dealloc_pd },
	{ IBVD_MSG_IMPORT_PD, "IMPORT_PD", &ibvd__handle__descriptor, 0,
	  CTX, ibvd_req_import_pd },
	{ IBVD_MSG_IMPORT_MR, "IMPORT_MR", &ibvd__import_mr__descriptor, 0,
	  CTX, ibvd_req_import_mr },
	{ IBVD_MSG_ALLOC_DM, "ALLOC_DM", &ibvd__alloc_dm__descriptor, 0,
	  CTX, ibvd_req_alloc_dm },
	{ IBVD_MSG_FREE_DM, "FREE_DM", &ibvd__handle__descriptor, 0,
	  CTX, ibvd_req_free_dm },
	{ IBVD_MSG_IMPORT_DM, "IMPORT_DM", &ibvd__handle__descriptor, 0,
	  CTX, ibvd_req_import_dm },
	{ IBVD_MSG_REG_MR, "REG_MR", &ibvd__reg_mr__descriptor, 0,
	  CTX, ibvd_req_reg_mr },
	{ IBVD_MSG_REREG_MR, "REREG_MR", &ibvd__rereg_mr__descriptor, 0,
	  CTX, ibvd_req_rereg_mr },
	{ IBVD_MSG_REG_MR_SHARED, "REG_MR_SHARED", &ibvd__reg_mr__descriptor,
	  1, CTX, ibvd_req_reg_mr_shared },
	{ IBVD_MSG_REREG_MR_SHARED, "REREG_MR_SHARED",
	  &ibvd__rereg_mr__descriptor, 1, CTX, ibvd_req_rereg_mr_shared },
	{ IBVD_MSG_DEREG_MR, "DEREG_MR", &ibvd__handle__descriptor, 0,
	  CTX, ibvd_req_dereg_mr },
	{ IBVD_MSG_ADVISE_MR, "ADVISE_MR", &ibvd__advise_mr__descriptor, 0,
	  CTX, ibvd_req_advise_mr },
	{ IBVD_MSG_ALLOC_MW, "ALLOC_MW", &ibvd__alloc_mw__descriptor, 0,
	  CTX, ibvd_req_alloc_mw },
	{ IBVD_MSG_DEALLOC_MW, "DEALLOC_MW", &ibvd__handle__descriptor, 0,
	  CTX, ibvd_req_dealloc_mw },
	{ IBVD_MSG_CREATE_COMP_CHANNEL, "CREATE_COMP_CHANNEL", NULL, 0,
	  CTX, ibvd_req_create_comp_channel },
	{ IBVD_MSG_DESTROY_COMP_CHANNEL, "DESTROY_COMP_CHANNEL",
	  &ibvd__handle__descriptor, 0, CTX, ibvd_req_destroy_comp_channel },
	{ IBVD_MSG_CHANNEL_POKE, "CHANNEL_POKE", &ibvd__handle__descriptor, 0,
	  CTX, ibvd_req_channel_poke },
	{ IBVD_MSG_CREATE_CQ, "CREATE_CQ", &ibvd__create_cq__descriptor, 0,
	  CTX, ibvd_req_create_cq },
	{ IBVD_MSG_RESIZE_CQ, "RESIZE_CQ", &ibvd__resize_cq__descriptor, 0,
	  CTX, ibvd_req_resize_cq },
	{ IBVD_MSG_DESTROY_CQ, "DESTROY_CQ", &ibvd__handle__descriptor, 0,
	  CTX, ibvd_req_destroy_cq },
	{ IBVD_MSG_CREATE_QP, "CREATE_QP", &ibvd__create_qp__descriptor, 0,
	  CTX, ibvd_req_create_qp },
	{ IBVD_MSG_MODIFY_QP, "MODIFY_QP", &ibvd__modify_qp__descriptor, 0,
	  CTX, ibvd_req_modify_qp },
	{ IBVD_MSG_QUERY_QP, "QUERY_QP", &ibvd__query_qp__descriptor, 0,
	  CTX, ibvd_req_query_qp },
	{ IBVD_MSG_DESTROY_QP, "DESTROY_QP", &ibvd__handle__descriptor, 0,
	  CTX, ibvd_req_destroy_qp },
	{ IBVD_MSG_QP_DIRECT, "QP_DIRECT", &ibvd__handle__descriptor, 0,
	  CTX, ibvd_req_qp_direct },
	{ IBVD_MSG_QP_REMOTE_MR, "QP_REMOTE_MR", &ibvd__qp_remote_mr__descriptor,
	  0, CTX, ibvd_req_qp_remote_mr },
	{ IBVD_MSG_QP_DIRECT_UD, "QP_DIRECT_UD", &ibvd__qp_direct_ud__descriptor,
	  0, CTX, ibvd_req_qp_direct_ud },
	{ IBVD_MSG_QP_DIRECT_LEAVE, "QP_DIRECT_LEAVE", &ibvd__handle__descriptor,
	  0, CTX, ibvd_req_qp_direct_leave },
	{ IBVD_MSG_QP_STAGING, "QP_STAGING", &ibvd__handle__descriptor,
	  0, CTX, ibvd_req_qp_staging },
	{ IBVD_MSG_OPEN_QP, "OPEN_QP", &ibvd__open_qp__descriptor, 0,
	  CTX, ibvd_req_open_qp },
	{ IBVD_MSG_CREATE_SRQ, "CREATE_SRQ", &ibvd__create_srq__descriptor, 0,
	  CTX, ibvd_req_create_srq },
	{ IBVD_MSG_MODIFY_SRQ, "MODIFY_SRQ", &ibvd__modify_srq__descriptor, 0,
	  CTX, ibvd_req_modify_srq },
	{ IBVD_MSG_QUERY_SRQ, "QUERY_SRQ", &ibvd__handle__descriptor, 0,
	  CTX, ibvd_req_query_srq },
	{ IBVD_MSG_DESTROY_SRQ, "DESTROY_SRQ", &ibvd__handle__descriptor, 0,
	  CTX, ibvd_req_destroy_srq },
	{ IBVD_MSG_CREATE_AH, "CREATE_AH", &ibvd__create_ah__descriptor, 0,
	  CTX, ibvd_req_create_ah },
	{ IBVD_MSG_DESTROY_AH, "DESTROY_AH", &ibvd__handle__descriptor, 0,
	  CTX, ibvd_req_destroy_ah },
	{ IBVD_MSG_ALLOC_XRCD, "ALLOC_XRCD", NULL, 0, CTX, ibvd_req_alloc_xrcd },
	{ IBVD_MSG_OPEN_XRCD, "OPEN_XRCD", &ibvd__open_xrcd__descriptor, 1,
	  CTX, ibvd_req_open_xrcd },
	{ IBVD_MSG_CLOSE_XRCD, "CLOSE_XRCD", &ibvd__handle__descriptor, 0,
	  CTX, ibvd_req_close_xrcd },
	{ IBVD_MSG_ATTACH_MCAST, "ATTACH_MCAST", &ibvd__mcast__descriptor, 0,
	  CTX, ibvd_req_attach_mcast },
	{ IBVD_MSG_DETACH_MCAST, "DETACH_MCAST", &ibvd__mcast__descriptor, 0,
	  CTX, ibvd_req_detach_mcast },
#undef CTX

	/* the connection manager (cm.h): CM_OPEN makes a CM session */
	{ IBVD_MSG_CM_OPEN, "CM_OPEN", NULL, 0,
	  IBVD_SESSION_FRESH, ibvd_req_cm_open },
#define CM IBVD_SESSION_CM
	{ IBVD_MSG_CM_CREATE_ID, "CM_CREATE_ID", &ibvd__cm_create_id__descriptor,
	  0, CM, ibvd_req_cm_create_id },
	{ IBVD_MSG_CM_DESTROY_ID, "CM_DESTROY_ID", &ibvd__cm_id__descriptor, 0,
	  CM, ibvd_req_cm_destroy_id },
	{ IBVD_MSG_CM_BIND_ADDR, "CM_BIND_ADDR", &ibvd__cm_addr__descriptor, 0,
	  CM, ibvd_req_cm_bind_addr },
	{ IBVD_MSG_CM_RESOLVE_ADDR, "CM_RESOLVE_ADDR", &ibvd__cm_addr__descriptor,
	  0, CM, ibvd_req_cm_resolve_addr },
	{ IBVD_MSG_CM_RESOLVE_ROUTE, "CM_RESOLVE_ROUTE",
	  &ibvd__cm_addr__descriptor, 0, CM, ibvd_req_cm_resolve_route },
	{ IBVD_MSG_CM_LISTEN, "CM_LISTEN", &ibvd__cm_listen__descriptor, 0,
	  CM, ibvd_req_cm_listen },
	{ IBVD_MSG_CM_CONNECT, "CM_CONNECT", &ibvd__cm_connect__descriptor, 0,
	  CM, ibvd_req_cm_connect },
	{ IBVD_MSG_CM_ACCEPT, "CM_ACCEPT", &ibvd__cm_connect__descriptor, 0,
	  CM, ibvd_req_cm_accept },
	{ IBVD_MSG_CM_REJECT, "CM_REJECT", &ibvd__cm_reject__descriptor, 0,
	  CM, ibvd_req_cm_reject },
	{ IBVD_MSG_CM_ESTABLISH, "CM_ESTABLISH", &ibvd__cm_establish__descriptor, 0,
	  CM, ibvd_req_cm_establish },
	{ IBVD_MSG_CM_DISCONNECT, "CM_DISCONNECT", &ibvd__cm_disconnect__descriptor, 0,
	  CM, ibvd_req_cm_disconnect },
	{ IBVD_MSG_CM_INIT_QP_ATTR, "CM_INIT_QP_ATTR",
	  &ibvd__cm_init_qp_attr__descriptor, 0, CM, ibvd_req_cm_init_qp_attr },
	{ IBVD_MSG_CM_QUERY, "CM_QUERY", &ibvd__cm_id__descriptor, 0,
	  CM, ibvd_req_cm_query },
	{ IBVD_MSG_CM_SET_OPTION, "CM_SET_OPTION", &ibvd__cm_set_option__descriptor,
	  0, CM, ibvd_req_cm_set_option },
	{ IBVD_MSG_CM_MIGRATE_ID, "CM_MIGRATE_ID", &ibvd__cm_migrate__descriptor,
	  0, CM, ibvd_req_cm_migrate_id },
	{ IBVD_MSG_CM_JOIN_MCAST, "CM_JOIN_MCAST", &ibvd__cm_mcast__descriptor, 0,
	  CM, ibvd_req_cm_join_mcast },
	{ IBVD_MSG_CM_LEAVE_MCAST, "CM_LEAVE_MCAST", &ibvd__cm_mcast__descriptor,
	  0, CM, ibvd_req_cm_leave_mcast },
	{ IBVD_MSG_CM_NOTIFY, "CM_NOTIFY", &ibvd__cm_notify__descriptor, 0,
	  CM, ibvd_req_cm_notify },
#undef CM
};

const struct ibvd_request_type *ibvd_request_type_find(uint16_t type)
{
	size_t i;

	/* A handful of rows: a linear scan beats anything cleverer. */
	for (i = 0; i < ARRAY_SIZE(request_types); i++)
		if (request_types[i].type == type)
			return &request_types[i];
	return NULL;
}

