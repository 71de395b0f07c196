/*
 * ibvctl resource show for the verbs objects (res_admin.c): the per-device
 * summary and the qp, cq, mr, pd, ctx and srq listings.  cm_id is the CM's
 * (cm_admin.c).  Also ibvctl client show (client_admin.c).
 */
#ifndef IBVD_RES_ADMIN_H
#define IBVD_RES_ADMIN_H

#include <stddef.h>

#include <jansson.h>

struct ibvd_call;

/*
 * Append one row per visible object of kind ("qp", "cq", "mr", "pd",
 * "ctx", "srq") that matches the filters in argv ("KEY VALUE" pairs,
 * "link DEV/PORT", "dev DEV"); details adds our extra columns.
 */
/*
 * A "link DEV[/PORT]" value: *dev points into value (cut at the '/'),
 * *port is set only when a port is given.  0, or -EINVAL recorded on call.
 */
int ibvd_admin_parse_link(struct ibvd_call *call, char *value,
			  const char **dev, long *port);

int ibvd_res_admin_show(struct ibvd_call *call, const char *kind,
			size_t argc, char **argv, int details, json_t *out);

/* Append rdma's summary row for dev_name, or for every device if NULL. */
int ibvd_res_admin_summary(struct ibvd_call *call, const char *dev_name,
			   json_t *out);

/*
 * "client show [pid PID] [uid UID] [cgroup PREFIX]": one row per client
 * process with its cgroup, what it holds and its tenant's limits
 * (client_admin.c).
 */
int ibvd_client_admin_show(struct ibvd_call *call, size_t argc, char **argv,
			   json_t *out);

#endif /* IBVD_RES_ADMIN_H */
