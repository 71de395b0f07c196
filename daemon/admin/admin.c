/*
 * ibvctl commands: dev, link, resource, daemon.
 */
#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "admin.h"
#include "args.h"
#include "cm/cm.h"
#include "core/device.h"
#include "ibverbsd.pb-c.h"
#include "limit.h"
#include "log.h"
#include "res.h"
#include "server/call.h"
#include "server/clients.h"
#include "server/closer.h"
#include "server/daemon.h"
#include "server/server.h"
#include "stat.h"
#include "util.h"
#include "verbs/query.h"

/* What a command gets: the words after "OBJECT COMMAND", and -d. */
struct admin_args {
	size_t argc;
	char **argv;
	int details;
};

typedef int (*admin_fn)(struct ibvd_call *call, const struct admin_args *args,
			json_t *out);

struct admin_cmd {
	const char *object;
	const char *command;
	size_t max_args;	/* words after OBJECT COMMAND */
	int needs_admin;	/* root or the config's admin_group */
	admin_fn fn;
};

/* Client words echoed in messages are cut short; ibvctl prints them. */
#define ARG_FMT	"%.64s"

/*
 * json_pack() one object onto out.  A value JSON cannot hold (a path that
 * is not UTF-8) fails the command with EILSEQ and jansson's reason; only
 * running out of memory is ENOMEM.
 */
static int append(struct ibvd_call *call, json_t *out, const char *fmt, ...)
{
	json_error_t jerr;
	json_t *obj;
	va_list ap;

	va_start(ap, fmt);
	obj = json_vpack_ex(&jerr, 0, fmt, ap);
	va_end(ap);
	if (!obj && json_error_code(&jerr) == json_error_out_of_memory)
		return -ENOMEM;
	if (!obj)
		return ibvd_call_error(call, -EILSEQ, "cannot encode the reply: %s",
				       jerr.text);
	return json_array_append_new(out, obj) == 0 ? 0 : -ENOMEM;
}

typedef int (*device_fn)(struct ibvd_call *call, const struct ibvd_device *dev,
			 const char *filter, json_t *out);

/* fn on the device named name (with filter), or on every device if NULL. */
static int each_device(struct ibvd_call *call, const char *name,
		       const char *filter, device_fn fn, json_t *out)
{
	struct ibvd_daemon *d = ibvd_call_daemon(call);
	struct ibvd_device *dev;
	int ret;

	if (name) {
		dev = ibvd_device_find(&d->devices, name);
		if (!dev)
			return ibvd_call_error(call, -ENODEV, "unknown device " ARG_FMT,
					       name);
		return fn(call, dev, filter, out);
	}
	TAILQ_FOREACH(dev, &d->devices, link) {
		ret = fn(call, dev, NULL, out);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* ---- dev -------------------------------------------------------------- */

static int dev_json(struct ibvd_call *call, const struct ibvd_device *dev,
		    const char *filter, json_t *out)
{
	char node_guid[20], sys_guid[20];

	return append(call, out, "{s:I, s:s, s:s, s:s, s:s, s:s}",
		      "ifindex", (json_int_t)dev->ifindex,
		      "ifname", dev->name,
		      "node_type", "ca",
		      "fw", PACKAGE_VERSION,
		      "node_guid", ibvd_guid_str(dev->node_guid, node_guid,
						 sizeof(node_guid)),
		      "sys_image_guid", ibvd_guid_str(dev->sys_image_guid,
						      sys_guid, sizeof(sys_guid)));
}

static int dev_show(struct ibvd_call *call, const struct admin_args *args,
		    json_t *out)
{
	return each_device(call, args->argc ? args->argv[0] : NULL, NULL,
			   dev_json, out);
}

/* ---- link ------------------------------------------------------------- */

static const char subnet_prefix[] = "fe80:0000:0000:0000";

/* rdma(8)'s words for enum ibv_port_state and the physical states. */
static const char *const port_states[] = {
	"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER",
};
static const char *const phys_states[] = {
	"NOP", "SLEEP", "POLLING", "DISABLED", "ARMED", "LINK_UP",
	"LINK_ERROR_RECOVER", "PHY_TEST",
};

static const char *state_name(const char *const *names, size_t n, uint32_t v)
{
	return v < n ? names[v] : "UNKNOWN";
}

/* What "link show" asks: one port ("DEV/PORT") or all, and -d. */
struct link_req {
	const char *port_arg;
	int details;
};

/*
 * A RoCE port as rdma shows rxe's: no subnet prefix nor LIDs, its
 * interface as "netdev", and with -d its index (absent while there is no
 * interface of that name).
 */
static int roce_link_json(struct ibvd_call *call, const struct ibvd_device *dev,
			  const struct ibvd_port *port, const Ibvd__PortAttr *pa,
			  const struct link_req *req, json_t *out)
{
	const struct ibvd_netdev *nd = &dev->roce.netdev;

	if (req->details && nd->ifindex)
		return append(call, out, "{s:I, s:s, s:I, s:s, s:s, s:s, s:I}",
			      "ifindex", (json_int_t)dev->ifindex,
			      "ifname", dev->name,
			      "port", (json_int_t)port->num,
			      "state", state_name(port_states, ARRAY_SIZE(port_states), pa->state),
			      "physical_state", state_name(phys_states, ARRAY_SIZE(phys_states),
							   pa->phys_state),
			      "netdev", nd->ifname,
			      "netdev_index", (json_int_t)nd->ifindex);
	return append(call, out, "{s:I, s:s, s:I, s:s, s:s, s:s}",
		      "ifindex", (json_int_t)dev->ifindex,
		      "ifname", dev->name,
		      "port", (json_int_t)port->num,
		      "state", state_name(port_states, ARRAY_SIZE(port_states), pa->state),
		      "physical_state", state_name(phys_states, ARRAY_SIZE(phys_states),
						   pa->phys_state),
		      "netdev", nd->ifname);
}

static int link_json(struct ibvd_call *call, const struct ibvd_device *dev,
		     const struct ibvd_port *port, const struct link_req *req,
		     json_t *out)
{
	Ibvd__PortAttr pa;

	/* one source of truth: what QUERY_PORT reports */
	ibvd_port_attr(dev, port, &pa);
	if (dev->kind == IBVD_DEV_ROCE)
		return roce_link_json(call, dev, port, &pa, req, out);
	return append(call, out, "{s:I, s:s, s:I, s:s, s:I, s:I, s:I, s:s, s:s}",
		      "ifindex", (json_int_t)dev->ifindex,
		      "ifname", dev->name,
		      "port", (json_int_t)port->num,
		      "subnet_prefix", subnet_prefix,
		      "lid", (json_int_t)port->lid,
		      "sm_lid", (json_int_t)0,
		      "lmc", (json_int_t)0,
		      "state", state_name(port_states, ARRAY_SIZE(port_states), pa.state),
		      "physical_state", state_name(phys_states, ARRAY_SIZE(phys_states),
						   pa.phys_state));
}

/* Every port of dev, or the one req names. */
static int link_ports(struct ibvd_call *call, const struct ibvd_device *dev,
		      const struct link_req *req, json_t *out)
{
	const struct ibvd_port *port;
	unsigned int p;
	int ret;

	if (!req->port_arg) {
		for (p = 0; p < dev->nports; p++) {
			ret = link_json(call, dev, &dev->ports[p], req, out);
			if (ret < 0)
				return ret;
		}
		return 0;
	}
	port = ibvd_admin_port_named(dev, req->port_arg);
	if (!port)
		return ibvd_call_error(call, -EINVAL, "invalid port %s/" ARG_FMT,
				       dev->name, req->port_arg);
	return link_json(call, dev, port, req, out);
}

static int link_show(struct ibvd_call *call, const struct admin_args *args,
		     json_t *out)
{
	struct ibvd_daemon *d = ibvd_call_daemon(call);
	struct link_req req = { .details = args->details };
	char name[IBVD_DEV_NAME_MAX];
	const struct ibvd_device *dev;
	const char *arg, *slash;
	size_t len;
	int ret;

	if (!args->argc) {
		TAILQ_FOREACH(dev, &d->devices, link) {
			ret = link_ports(call, dev, &req, out);
			if (ret < 0)
				return ret;
		}
		return 0;
	}
	/* "DEV" or "DEV/PORT" */
	arg = args->argv[0];
	slash = strchr(arg, '/');
	len = slash ? (size_t)(slash - arg) : strlen(arg);
	if (len >= sizeof(name))
		return ibvd_call_error(call, -ENODEV, "unknown device " ARG_FMT, arg);
	memcpy(name, arg, len);
	name[len] = '\0';
	dev = ibvd_device_find(&d->devices, name);
	if (!dev)
		return ibvd_call_error(call, -ENODEV, "unknown device " ARG_FMT, name);
	req.port_arg = slash ? slash + 1 : NULL;
	return link_ports(call, dev, &req, out);
}

/* ---- resource --------------------------------------------------------- */

/*
 * "resource show [DEV]" is the summary, "resource show KIND [FILTERS]" a
 * listing: KIND by any unambiguous prefix.  cm ids are the CM's; the verbs
 * objects are res.c's.
 */
static const char *const resource_kinds[] = {
	"qp", "cq", "mr", "pd", "cm_id", "ctx", "srq",
};

/* The kind word names, or ARRAY_SIZE(resource_kinds) (*matches says why). */
static size_t resource_kind(const char *word, size_t *matches)
{
	size_t i, len = strlen(word), found = ARRAY_SIZE(resource_kinds);

	*matches = 0;
	for (i = 0; i < ARRAY_SIZE(resource_kinds) && len; i++) {
		if (strncmp(word, resource_kinds[i], len))
			continue;
		found = i;
		(*matches)++;
		if (resource_kinds[i][len] == '\0') {
			*matches = 1;	/* an exact name is never ambiguous */
			break;
		}
	}
	return *matches == 1 ? found : ARRAY_SIZE(resource_kinds);
}

static int resource_show(struct ibvd_call *call, const struct admin_args *args,
			 json_t *out)
{
	const char *kind;
	size_t found, matches;

	if (!args->argc)
		return ibvd_res_admin_summary(call, NULL, out);
	found = resource_kind(args->argv[0], &matches);
	/* not a kind: a device name, as in rdma's "res show DEV" */
	if (!matches && args->argc == 1)
		return ibvd_res_admin_summary(call, args->argv[0], out);
	if (found == ARRAY_SIZE(resource_kinds))
		return ibvd_call_error(call, -EINVAL, "%s resource " ARG_FMT,
				       matches ? "ambiguous" : "unknown",
				       args->argv[0]);
	kind = resource_kinds[found];
	if (!strcmp(kind, "cm_id"))
		return ibvd_cm_admin_show(call, args->argc - 1, args->argv + 1,
					  out);
	return ibvd_res_admin_show(call, kind, args->argc - 1, args->argv + 1,
				   args->details, out);
}

static int client_show(struct ibvd_call *call, const struct admin_args *args,
		       json_t *out)
{
	return ibvd_client_admin_show(call, args->argc, args->argv, out);
}

static int limit_show(struct ibvd_call *call, const struct admin_args *args,
		      json_t *out)
{
	return ibvd_limit_admin_show(call, args->argc, args->argv, out);
}

static int limit_set(struct ibvd_call *call, const struct admin_args *args,
		     json_t *out)
{
	(void)out;	/* the reply is an empty array */
	return ibvd_limit_admin_set(call, args->argc, args->argv);
}

static int statistic_show(struct ibvd_call *call, const struct admin_args *args,
			  json_t *out)
{
	return ibvd_stat_admin_show(call, args->argc, args->argv, out);
}

/* ---- daemon ----------------------------------------------------------- */

static int daemon_status(struct ibvd_call *call, const struct admin_args *args,
			 json_t *out)
{
	struct ibvd_daemon *d = ibvd_call_daemon(call);
	struct ibvd_closer_status closes;

	ibvd_closer_status(&closes);
	return append(call, out, "{s:s, s:I, s:I, s:I, s:I, s:I, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
		      "version", PACKAGE_VERSION,
		      "pid", (json_int_t)getpid(),
		      "uptime", (json_int_t)ibvd_daemon_uptime(d),
		      "clients", (json_int_t)d->nsessions,
		      "contexts", (json_int_t)d->ncontexts,
		      "devices", (json_int_t)d->ndevices,
		      "socket", d->socket_path,
		      "config", ibvd_daemon_config_name(d),
		      "closer_threads", (json_int_t)closes.threads,
		      "closes_waiting", (json_int_t)closes.waiting,
		      "closes_queued", (json_int_t)closes.queued,
		      "closes_stuck", (json_int_t)closes.stuck,
		      "hung_up", (json_int_t)ibvd_server_hung_up(d->server),
		      "cm_going_looks", (json_int_t)ibvd_cm_going_looks(),
		      "cm_listing_looks", (json_int_t)ibvd_cm_listing_looks());
}

static int daemon_version(struct ibvd_call *call, const struct admin_args *args,
			  json_t *out)
{
	return append(call, out, "{s:s, s:i}", "version", PACKAGE_VERSION,
		      "protocol", IBVD_PROTO_VERSION);
}

static int daemon_reload(struct ibvd_call *call, const struct admin_args *args,
			 json_t *out)
{
	struct ibvd_daemon *d = ibvd_call_daemon(call);
	struct ibvd_client_info me;
	char err[512];
	int ret;

	ibvd_client_info(call->session, &me);
	log_info("reload requested by client %llu (uid %u)",
		 (unsigned long long)me.id, (unsigned int)me.uid);
	ret = d->up.reload(d, err, sizeof(err));
	/* EINVAL tells ibvctl its arguments were wrong; the file was */
	if (ret == -EINVAL)
		ret = -EBADMSG;
	return ret < 0 ? ibvd_call_error(call, ret, "%s", err) : 0;
}

/* ---- table and dispatch ----------------------------------------------- */

static const struct admin_cmd admin_cmds[] = {
	{ "dev",	"show",		1, 0, dev_show },
	{ "link",	"show",		1, 0, link_show },
	/* KIND, then up to 8 filters and a link or dev */
	{ "resource",	"show",		19, 0, resource_show },
	{ "statistic",	"show",		2, 0, statistic_show },
	{ "client",	"show",		6, 0, client_show },
	/* [max|current|refused] [uid UID] [dev DEV] [after UID] */
	{ "limit",	"show",		7, 0, limit_show },
	/* SCOPE [dev DEV] KEY=VALUE...: every key, and a few repeated */
	{ "limit",	"set",		32, 1, limit_set },
	{ "daemon",	"status",	0, 0, daemon_status },
	{ "daemon",	"version",	0, 0, daemon_version },
	{ "daemon",	"reload",	0, 1, daemon_reload },
};

/* The row for object/command, or NULL after recording the error. */
static const struct admin_cmd *admin_find(struct ibvd_call *call,
					  const char *object, const char *command)
{
	int known_object = 0;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(admin_cmds); i++) {
		if (strcmp(admin_cmds[i].object, object) != 0)
			continue;
		known_object = 1;
		if (strcmp(admin_cmds[i].command, command) == 0)
			return &admin_cmds[i];
	}
	if (known_object)
		ibvd_call_error(call, -EINVAL, "unknown command " ARG_FMT " for object %s",
				command, object);
	else
		ibvd_call_error(call, -EINVAL, "unknown object " ARG_FMT, object);
	return NULL;
}

/* Run the command, send its JSON; 0 or a negative errno. */
static int admin_run(struct ibvd_call *call, const struct admin_cmd *cmd,
		     const struct admin_args *args)
{
	Ibvd__AdminReply reply = IBVD__ADMIN_REPLY__INIT;
	json_t *out = json_array();
	char *text = NULL;
	int ret = -ENOMEM;

	if (!out)
		return -ENOMEM;
	ret = cmd->fn(call, args, out);
	if (ret < 0)
		goto out;
	text = json_dumps(out, JSON_COMPACT);
	if (!text) {
		ret = -ENOMEM;
		goto out;
	}
	reply.json = text;
	ret = ibvd_call_reply(call, &reply.base, NULL, 0);
	if (ret == -EMSGSIZE)
		ibvd_call_error(call, ret, "reply too large for one frame");
out:
	free(text);
	json_decref(out);
	return ret;
}

int ibvd_req_admin(struct ibvd_call *call)
{
	const Ibvd__AdminRequest *req = (const Ibvd__AdminRequest *)call->msg;
	const struct admin_cmd *cmd;
	struct admin_args args;

	ibvd_client_become_admin(call->session);
	if (req->n_argv == 0)
		return ibvd_call_error(call, -EINVAL, "missing object");
	/* ibvctl always sends the command; "show" is rdma(8)'s default. */
	cmd = admin_find(call, req->argv[0], req->n_argv > 1 ? req->argv[1] : "show");
	if (!cmd)
		return -EINVAL;
	if (cmd->needs_admin && !ibvd_call_privileged(call))
		return ibvd_call_error(call, -EPERM,
				       "%s %s requires %s", cmd->object,
				       cmd->command, ibvd_admin_who(call));
	args.argc = req->n_argv > 2 ? req->n_argv - 2 : 0;
	args.argv = req->n_argv > 2 ? req->argv + 2 : NULL;
	args.details = req->details;
	if (args.argc > cmd->max_args)
		return ibvd_call_error(call, -EINVAL,
				       "unexpected argument " ARG_FMT " (%s %s takes at most %d)",
				       args.argv[cmd->max_args], cmd->object,
				       cmd->command, (int)cmd->max_args);
	return admin_run(call, cmd, &args);
}
