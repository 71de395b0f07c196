/*
 * ibvctl commands: dev, link, daemon.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "admin.h"
#include "device.h"
#include "ibverbsd.pb-c.h"
#include "log.h"
#include "request.h"
#include "session.h"
#include "util.h"

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
	int needs_root;
	admin_fn fn;
};

/* Client words echoed in messages are cut short; ibvctl prints them. */
#define ARG_FMT	"%.64s"

static int append(json_t *out, json_t *obj)
{
	return obj && json_array_append_new(out, obj) == 0 ? 0 : -ENOMEM;
}

static int too_many_args(struct ibvd_call *call, const struct admin_args *args,
			 size_t allowed)
{
	if (args->argc <= allowed)
		return 0;
	return ibvd_call_error(call, -EINVAL, "unexpected argument " ARG_FMT,
			       args->argv[allowed]);
}

static struct ibvd_device *find_device(struct ibvd_call *call, const char *name)
{
	struct ibvd_device *dev = ibvd_device_find(&ibvd_call_daemon(call)->devices,
						   name);

	if (!dev)
		ibvd_call_error(call, -ENODEV, "unknown device " ARG_FMT, name);
	return dev;
}

/* ---- dev -------------------------------------------------------------- */

static json_t *dev_json(const struct ibvd_device *dev)
{
	char node_guid[20], sys_guid[20];

	return json_pack("{s:I, s:s, s:s, s:s, s:s, s:s}",
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
	struct ibvd_daemon *d = ibvd_call_daemon(call);
	struct ibvd_device *dev;
	int ret;

	ret = too_many_args(call, args, 1);
	if (ret < 0)
		return ret;
	if (args->argc == 1) {
		dev = find_device(call, args->argv[0]);
		return dev ? append(out, dev_json(dev)) : -ENODEV;
	}
	TAILQ_FOREACH(dev, &d->devices, link) {
		ret = append(out, dev_json(dev));
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* ---- link ------------------------------------------------------------- */

static const char subnet_prefix[] = "fe80:0000:0000:0000";

static json_t *link_json(const struct ibvd_device *dev,
			 const struct ibvd_port *port)
{
	return json_pack("{s:I, s:s, s:I, s:s, s:I, s:I, s:I, s:s, s:s}",
			 "ifindex", (json_int_t)dev->ifindex,
			 "ifname", dev->name,
			 "port", (json_int_t)port->num,
			 "subnet_prefix", subnet_prefix,
			 "lid", (json_int_t)port->lid,
			 "sm_lid", (json_int_t)0,
			 "lmc", (json_int_t)0,
			 "state", "ACTIVE",
			 "physical_state", "LINK_UP");
}

static int link_device(json_t *out, const struct ibvd_device *dev)
{
	unsigned int p;
	int ret;

	for (p = 0; p < dev->nports; p++) {
		ret = append(out, link_json(dev, &dev->ports[p]));
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* "DEV" or "DEV/PORT". */
static int link_one(struct ibvd_call *call, const char *arg, json_t *out)
{
	char name[IBVD_DEV_NAME_MAX];
	const char *slash = strchr(arg, '/');
	const struct ibvd_port *port;
	struct ibvd_device *dev;
	unsigned long num;
	char *end;

	if (!slash)
		return (dev = find_device(call, arg)) ? link_device(out, dev) : -ENODEV;
	if ((size_t)(slash - arg) >= sizeof(name))
		return ibvd_call_error(call, -ENODEV, "unknown device " ARG_FMT, arg);
	memcpy(name, arg, (size_t)(slash - arg));
	name[slash - arg] = '\0';
	dev = find_device(call, name);
	if (!dev)
		return -ENODEV;
	num = strtoul(slash + 1, &end, 10);
	if (*end || end == slash + 1 || num > UINT32_MAX)
		port = NULL;
	else
		port = ibvd_device_port(dev, (uint32_t)num);
	if (!port)
		return ibvd_call_error(call, -EINVAL, "invalid port " ARG_FMT, arg);
	return append(out, link_json(dev, port));
}

static int link_show(struct ibvd_call *call, const struct admin_args *args,
		     json_t *out)
{
	struct ibvd_daemon *d = ibvd_call_daemon(call);
	struct ibvd_device *dev;
	int ret;

	ret = too_many_args(call, args, 1);
	if (ret < 0)
		return ret;
	if (args->argc == 1)
		return link_one(call, args->argv[0], out);
	TAILQ_FOREACH(dev, &d->devices, link) {
		ret = link_device(out, dev);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* ---- daemon ----------------------------------------------------------- */

static int daemon_status(struct ibvd_call *call, const struct admin_args *args,
			 json_t *out)
{
	struct ibvd_daemon *d = ibvd_call_daemon(call);
	int ret = too_many_args(call, args, 0);

	if (ret < 0)
		return ret;
	return append(out, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:s, s:s}",
				     "version", PACKAGE_VERSION,
				     "pid", (json_int_t)getpid(),
				     "uptime", (json_int_t)ibvd_daemon_uptime(d),
				     "clients", (json_int_t)d->nsessions,
				     "contexts", (json_int_t)d->ncontexts,
				     "devices", (json_int_t)d->ndevices,
				     "socket", d->socket_path,
				     "config", ibvd_daemon_config_name(d)));
}

static int daemon_version(struct ibvd_call *call, const struct admin_args *args,
			  json_t *out)
{
	int ret = too_many_args(call, args, 0);

	if (ret < 0)
		return ret;
	return append(out, json_pack("{s:s, s:i}", "version", PACKAGE_VERSION,
				     "protocol", IBVD_PROTO_VERSION));
}

static int daemon_reload(struct ibvd_call *call, const struct admin_args *args,
			 json_t *out)
{
	char err[512];
	int ret = too_many_args(call, args, 0);

	if (ret < 0)
		return ret;
	log_info("reload requested by client %llu (uid %u)",
		 (unsigned long long)call->session->id,
		 (unsigned int)call->session->cred.uid);
	ret = ibvd_daemon_reload(ibvd_call_daemon(call), err, sizeof(err));
	return ret < 0 ? ibvd_call_error(call, ret, "%s", err) : 0;
}

/* ---- table and dispatch ----------------------------------------------- */

static const struct admin_cmd admin_cmds[] = {
	{ "dev",	"show",		0, dev_show },
	{ "link",	"show",		0, link_show },
	{ "daemon",	"status",	0, daemon_status },
	{ "daemon",	"version",	0, daemon_version },
	{ "daemon",	"reload",	1, daemon_reload },
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
	struct ibvd_session *s = call->session;
	const struct admin_cmd *cmd;
	struct admin_args args;

	s->state = IBVD_SESSION_ADMIN;
	if (req->n_argv == 0)
		return ibvd_call_error(call, -EINVAL, "missing object");
	/* ibvctl always sends the command; "show" is rdma(8)'s default. */
	cmd = admin_find(call, req->argv[0], req->n_argv > 1 ? req->argv[1] : "show");
	if (!cmd)
		return -EINVAL;
	if (cmd->needs_root && s->cred.uid != 0)
		return ibvd_call_error(call, -EPERM, "%s %s requires root",
				       cmd->object, cmd->command);
	args.argc = req->n_argv > 2 ? req->n_argv - 2 : 0;
	args.argv = req->n_argv > 2 ? req->argv + 2 : NULL;
	args.details = req->details;
	return admin_run(call, cmd, &args);
}
