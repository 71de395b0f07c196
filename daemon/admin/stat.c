/*
 * ibvctl statistic show: the engine's counters (engine/counters.c).
 *
 *	statistic show			every port of every device
 *	statistic show link DEV[/PORT]	the ports of one device, or one port
 *	statistic show engine		one row per engine thread
 *
 * A port row is {"ifindex", "ifname", "port", then rxe's counter names in
 * rxe's order}, so it reads like rdma statistic show; a RoCE port's then
 * has "dropped_not_peer", "dropped_bad_pkey" and "dropped_too_long", the
 * packets its transport dropped from outside its peers, of another
 * partition, or longer than any packet.  Anyone may look,
 * as with rdma: the counters are device-wide and name no one's objects.
 *
 * Control thread only: devices and contexts are its own; the engine's
 * counters are read with relaxed loads while engine threads add to them.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "args.h"
#include "core/device.h"
#include "engine/engine.h"
#include "server/call.h"
#include "server/daemon.h"
#include "stat.h"

/* Client words echoed in messages are cut short, as in admin.c. */
#define ARG_FMT	"%.64s"

static int set_int(json_t *row, const char *key, uint64_t v)
{
	return json_object_set_new(row, key, json_integer((json_int_t)v)) ? -ENOMEM : 0;
}

/* Add n counters named names[] to row, then row to out (consumed). */
static int append_counters(json_t *out, json_t *row, const char *const *names,
			   const uint64_t *v, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		if (set_int(row, names[i], v[i]) < 0)
			goto fail;
	if (json_array_append_new(out, row) == 0)
		return 0;
	return -ENOMEM;	/* append_new consumed row */
fail:
	json_decref(row);
	return -ENOMEM;
}

/* A RoCE port's rows go on with its drops before any QP (rxe has none). */
#define ROCE_PORT_COUNTERS	(IBVD_PC_MAX + 3)

static int port_row(const struct ibvd_device *dev, const struct ibvd_port *port,
		    json_t *out)
{
	uint64_t ctr[IBVD_PC_MAX], all[ROCE_PORT_COUNTERS];
	const char *names[ROCE_PORT_COUNTERS];
	json_t *row = json_object();

	if (!row)
		return -ENOMEM;
	if (set_int(row, "ifindex", dev->ifindex) < 0 ||
	    json_object_set_new(row, "ifname", json_string(dev->name)) ||
	    set_int(row, "port", port->num) < 0) {
		json_decref(row);
		return -ENOMEM;
	}
	ibvd_engine_port_counters(dev, port->num, ctr);
	if (dev->kind != IBVD_DEV_ROCE)
		return append_counters(out, row, ibvd_port_counter_names, ctr,
				       IBVD_PC_MAX);
	memcpy(names, ibvd_port_counter_names, sizeof(ibvd_port_counter_names));
	names[IBVD_PC_MAX] = "dropped_not_peer";
	names[IBVD_PC_MAX + 1] = "dropped_bad_pkey";
	names[IBVD_PC_MAX + 2] = "dropped_too_long";
	memcpy(all, ctr, sizeof(ctr));
	all[IBVD_PC_MAX] = __atomic_load_n(&dev->roce.dropped_not_peer,
					   __ATOMIC_RELAXED);
	all[IBVD_PC_MAX + 1] = __atomic_load_n(&dev->roce.dropped_bad_pkey,
					       __ATOMIC_RELAXED);
	all[IBVD_PC_MAX + 2] = __atomic_load_n(&dev->roce.dropped_too_long,
					       __ATOMIC_RELAXED);
	return append_counters(out, row, names, all, ROCE_PORT_COUNTERS);
}

static int device_rows(const struct ibvd_device *dev, json_t *out)
{
	unsigned int p;
	int ret;

	for (p = 0; p < dev->nports; p++) {
		ret = port_row(dev, &dev->ports[p], out);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* "link DEV" or "link DEV/PORT". */
static int link_rows(struct ibvd_call *call, const char *arg, json_t *out)
{
	struct ibvd_daemon *d = ibvd_call_daemon(call);
	const char *slash = strchr(arg, '/');
	char name[IBVD_DEV_NAME_MAX];
	const struct ibvd_device *dev;
	const struct ibvd_port *port;
	size_t len = slash ? (size_t)(slash - arg) : strlen(arg);

	if (len >= sizeof(name))
		return ibvd_call_error(call, -ENODEV, "unknown device " ARG_FMT, arg);
	memcpy(name, arg, len);
	name[len] = '\0';
	dev = ibvd_device_find(&d->devices, name);
	if (!dev)
		return ibvd_call_error(call, -ENODEV, "unknown device " ARG_FMT, name);
	if (!slash)
		return device_rows(dev, out);
	port = ibvd_admin_port_named(dev, slash + 1);
	if (!port)
		return ibvd_call_error(call, -EINVAL, "invalid port %s/" ARG_FMT,
				       dev->name, slash + 1);
	return port_row(dev, port, out);
}

static int all_rows(struct ibvd_call *call, json_t *out)
{
	const struct ibvd_device *dev;
	int ret;

	TAILQ_FOREACH(dev, &ibvd_call_daemon(call)->devices, link) {
		ret = device_rows(dev, out);
		if (ret < 0)
			return ret;
	}
	return 0;
}

static int engine_rows(json_t *out)
{
	uint64_t ctr[IBVD_EC_MAX];
	unsigned int i, n = ibvd_engine_threads(), contexts;
	json_t *row;

	for (i = 0; i < n; i++) {
		ibvd_engine_thread_counters(i, ctr, &contexts);
		row = json_object();
		if (!row || set_int(row, "engine", i) < 0 ||
		    set_int(row, "contexts", contexts) < 0) {
			json_decref(row);
			return -ENOMEM;
		}
		if (append_counters(out, row, ibvd_engine_counter_names, ctr,
				    IBVD_EC_MAX) < 0)
			return -ENOMEM;
	}
	return 0;
}

int ibvd_stat_admin_show(struct ibvd_call *call, size_t argc, char **argv,
			 json_t *out)
{
	if (!argc)
		return all_rows(call, out);
	if (!strcmp(argv[0], "link")) {
		if (argc != 2)
			return ibvd_call_error(call, -EINVAL,
					       "link takes one DEV or DEV/PORT");
		return link_rows(call, argv[1], out);
	}
	if (!strcmp(argv[0], "engine")) {
		if (argc != 1)
			return ibvd_call_error(call, -EINVAL,
					       "engine takes no arguments");
		return engine_rows(out);
	}
	return ibvd_call_error(call, -EINVAL,
			       "unknown statistic filter " ARG_FMT
			       " (link DEV[/PORT] or engine)", argv[0]);
}
