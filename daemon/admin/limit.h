/*
 * ibvctl limit show / limit set (limit.c).
 *
 * show: one row per tenant and scope ("all", then each device), with the
 * limits in force ("max") or what the tenant holds ("current").
 * set: changes the daemon's in-memory configuration and applies it to
 * every tenant at once.  Not written to the file: a reload or restart
 * returns to it (man ibvctl-limit(8)).
 */
#ifndef IBVD_LIMIT_ADMIN_H
#define IBVD_LIMIT_ADMIN_H

#include <stddef.h>

#include <jansson.h>

struct ibvd_call;

/* "[max|current] [uid UID] [dev DEV]": rows appended to out. */
int ibvd_limit_admin_show(struct ibvd_call *call, size_t argc, char **argv,
			  json_t *out);

/* "{default|uid UID|group NAME|cgroup PREFIX} [dev DEV] KEY=VALUE...". */
int ibvd_limit_admin_set(struct ibvd_call *call, size_t argc, char **argv);

#endif /* IBVD_LIMIT_ADMIN_H */
