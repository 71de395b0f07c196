/*
 * ibvctl resource show: the per-device summary and the qp, cq, mr, pd, ctx
 * and srq listings (res.c), the cm_id listing (cm_id.c, from what the CM
 * lets us read); and ibvctl client show (client.c).
 */
#ifndef IBVD_RES_ADMIN_H
#define IBVD_RES_ADMIN_H

#include <stddef.h>

#include <jansson.h>

#include "frame.h"

struct ibvd_call;

/*
 * A listing's JSON at most: what a reply frame holds, less room for the
 * reply's header and fields.  A listing stops there rather than build (on
 * the control thread, every tenant waiting) one that cannot be sent.
 */
#define IBVD_RES_MAX_JSON	(IBVD_FRAME_MAX - 1024)

/*
 * Append row (taken) to the listing out, whose JSON is *json_len bytes
 * so far; -EMSGSIZE once the listing would outgrow IBVD_RES_MAX_JSON.
 */
int ibvd_res_append(json_t *out, json_t *row, size_t *json_len);

/* The error a listing that outgrew one frame answers with. */
int ibvd_res_too_large(struct ibvd_call *call, size_t rows);

/*
 * Append one row per visible object of kind ("qp", "cq", "mr", "pd",
 * "ctx", "srq") that matches the filters in argv ("KEY VALUE" pairs,
 * "link DEV/PORT", "dev DEV"); details adds our extra columns.
 */
int ibvd_res_admin_show(struct ibvd_call *call, const char *kind,
			size_t argc, char **argv, int details, json_t *out);

/* Append rdma's summary row for dev_name, or for every device if NULL. */
int ibvd_res_admin_summary(struct ibvd_call *call, const char *dev_name,
			   json_t *out);

/*
 * "client show [pid PID] [uid UID] [cgroup PREFIX]": one row per client
 * process with its cgroup, what it holds and its tenant's limits
 * (client.c).
 */
int ibvd_client_admin_show(struct ibvd_call *call, size_t argc, char **argv,
			   json_t *out);

/*
 * "resource show cm_id [link DEV/PORT | dev DEV] [FILTER VALUE]...":
 * append one object per id the caller may see to out (cm_id.c).
 */
int ibvd_cm_admin_show(struct ibvd_call *call, size_t argc, char **argv,
		       json_t *out);

/* How many rows ibvd_cm_admin_show would append, without making them. */
int ibvd_cm_admin_count(struct ibvd_call *call, size_t argc, char **argv,
			size_t *n);

#endif /* IBVD_RES_ADMIN_H */
