/*
 * ibvctl statistic show (stat.c): the engine's counters per device
 * port, as rdma statistic show prints rxe's, and per engine thread.
 */
#ifndef IBVD_STAT_ADMIN_H
#define IBVD_STAT_ADMIN_H

#include <stddef.h>

#include <jansson.h>

struct ibvd_call;

/*
 * "statistic show [link DEV[/PORT] | engine]": append one row per port
 * (every port, a device's or one) or per engine thread to out.
 */
int ibvd_stat_admin_show(struct ibvd_call *call, size_t argc, char **argv,
			 json_t *out);

#endif /* IBVD_STAT_ADMIN_H */
