/*
 * ibvctl: inspect and administer a running ibverbsd (see ibvctl(8)).
 *
 * Options, then one IBVD_MSG_ADMIN call carrying the canonical command line;
 * the daemon decides what is allowed and answers with JSON.  Exit status is
 * 0 on success (help, -h and -V included) and 1 on any failure, as rdma(8)
 * does: a bad command line, no daemon, a refusal or error from the daemon,
 * a reply that is not JSON, or output that cannot be written.  Every
 * failure is one "ibvctl: ..." line on stderr, followed by the usage when
 * the command line was at fault.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "conn.h"
#include "frame.h"
#include "ibverbsd.pb-c.h"
#include "ibvctl.h"

struct options {
	struct ibvctl_output out;
	bool details;		/* -d */
	const char *socket;	/* -s, NULL: $IBVERBSD_SOCKET or the default */
};

static void version(void)
{
	printf("ibvctl utility, %s-%s\n", PACKAGE_NAME, PACKAGE_VERSION);
}

/*
 * getopt_long_only() gives rdma's spellings too: -json, -pretty, -details,
 * -socket, -Version, -help; bundles like -jp still work as short options.
 * Returns 1 to go on, 0 to exit successfully, -1 on a usage error.
 */
static int parse_options(int argc, char *argv[], struct options *o)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "pretty", no_argument, NULL, 'p' },
		{ "details", no_argument, NULL, 'd' },
		{ "socket", required_argument, NULL, 's' },
		{ "Version", no_argument, NULL, 'V' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	int c;

	argv[0] = (char *)"ibvctl";	/* getopt's messages name argv[0] */
	/* "+": stop at OBJECT, the rest (filters, names) is the daemon's */
	while ((c = getopt_long_only(argc, argv, "+jpds:Vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'j': o->out.json = true; break;
		case 'p': o->out.pretty = true; break;
		case 'd': o->details = true; break;
		case 's': o->socket = optarg; break;
		case 'V': version(); return 0;
		case 'h': ibvctl_usage(stdout, NULL); return 0;
		default:
			ibvctl_usage(stderr, NULL);
			return -1;
		}
	}
	return 1;
}

static void report_connect_error(const char *path, int err)
{
	const char *hint = "";

	if (err == -ENOENT || err == -ECONNREFUSED)
		hint = " (is ibverbsd running?)";
	fprintf(stderr, "ibvctl: cannot connect to ibverbsd at %s: %s%s\n",
		path, strerror(-err), hint);
}

/*
 * The daemon's errors carry a message ("unknown device ibvd7", "daemon
 * reload requires root or group ibverbsd-admin"); EINVAL means it did not accept the
 * arguments, so the object's usage follows, as for ibvctl's own checks.
 */
static void report_call_error(const struct ibvd_conn *conn, const char *path,
			      const struct ibvctl_cmd *cmd, int err)
{
	if (err == -EIO)
		fprintf(stderr, "ibvctl: ibverbsd at %s closed the connection\n", path);
	else if (err == -ETIMEDOUT)
		fprintf(stderr, "ibvctl: no reply from ibverbsd at %s\n", path);
	else if (conn->err_msg[0])
		fprintf(stderr, "ibvctl: %s\n", conn->err_msg);
	else
		fprintf(stderr, "ibvctl: %s\n", strerror(-err));
	if (err == -EINVAL)
		ibvctl_usage(stderr, cmd->obj);
}

/* The request's argv: OBJECT COMMAND ARGS..., all full words but ARGS. */
static char **request_argv(const struct ibvctl_cmd *cmd, size_t *n)
{
	char **argv = calloc((size_t)cmd->nargs + 2, sizeof(*argv));
	int i;

	if (!argv)
		return NULL;
	argv[0] = (char *)ibvctl_object_name(cmd->obj);
	argv[1] = (char *)cmd->command;
	for (i = 0; i < cmd->nargs; i++)
		argv[i + 2] = cmd->args[i];
	*n = (size_t)cmd->nargs + 2;
	return argv;
}

/*
 * Ask the daemon; on success *json is the reply's JSON (caller frees).
 * Every failure is reported here, once.
 */
static int admin_call(const struct options *o, const struct ibvctl_cmd *cmd,
		      char **json)
{
	Ibvd__AdminRequest req = IBVD__ADMIN_REQUEST__INIT;
	Ibvd__AdminReply *reply = NULL;
	const char *path = o->socket ? o->socket : ibvd_socket_path();
	struct ibvd_conn conn;
	int ret;

	req.argv = request_argv(cmd, &req.n_argv);
	if (!req.argv) {
		fprintf(stderr, "ibvctl: %s\n", strerror(ENOMEM));
		return -ENOMEM;
	}
	req.details = o->details;

	ret = ibvd_conn_open(&conn, path);
	if (ret < 0) {
		report_connect_error(path, ret);
		goto out;
	}
	ret = ibvd_conn_call(&conn, IBVD_MSG_ADMIN, &req.base,
			     &ibvd__admin_reply__descriptor,
			     (ProtobufCMessage **)&reply, NULL, NULL);
	if (ret < 0) {
		report_call_error(&conn, path, cmd, ret);
		goto out_close;
	}
	*json = strdup(reply->json ? reply->json : "");
	if (!*json) {
		fprintf(stderr, "ibvctl: %s\n", strerror(ENOMEM));
		ret = -ENOMEM;
	}
	ibvd__admin_reply__free_unpacked(reply, NULL);
out_close:
	ibvd_conn_close(&conn);
out:
	free(req.argv);
	return ret;
}

/* The {"more_after": UID} a page of limit show ends with when more follow. */
static bool more_after(json_t *list, json_int_t *uid)
{
	json_t *last = json_array_get(list, json_array_size(list) - 1);
	json_t *v = json_object_get(last, "more_after");

	if (!json_is_integer(v))
		return false;
	*uid = json_integer_value(v);
	return true;
}

/*
 * limit show answers in pages of whole tenants (one frame each, a few
 * dozen tenants): ask "after UID" until the list is whole, so that the
 * output is one list, as if one reply had held it.
 */
static int limit_pages(const struct options *o, const struct ibvctl_cmd *cmd,
		       char **json)
{
	struct ibvctl_cmd next = *cmd;
	json_t *all, *page = NULL;
	char after[24], **args;
	json_int_t uid, prev = -1;
	int ret = 0;

	all = json_loads(*json, 0, NULL);
	if (!json_is_array(all) || !more_after(all, &uid)) {
		json_decref(all);
		return 0;		/* one page: as it came */
	}
	args = calloc((size_t)cmd->nargs + 2, sizeof(*args));
	if (!args) {
		fprintf(stderr, "ibvctl: %s\n", strerror(ENOMEM));
		ret = -ENOMEM;
		goto out;
	}
	if (cmd->nargs)		/* args is NULL without any */
		memcpy(args, cmd->args, (size_t)cmd->nargs * sizeof(*args));
	args[cmd->nargs] = "after";
	args[cmd->nargs + 1] = after;
	next.args = args;
	next.nargs = cmd->nargs + 2;
	do {
		json_array_remove(all, json_array_size(all) - 1);
		/* a page that does not move on would be asked for for ever */
		if (uid <= prev) {
			fprintf(stderr, "ibvctl: limit show: a page did not move past uid %lld\n",
				(long long)prev);
			ret = -EPROTO;
			goto out;
		}
		prev = uid;
		snprintf(after, sizeof(after), "%lld", (long long)uid);
		free(*json);
		*json = NULL;
		ret = admin_call(o, &next, json);
		if (ret < 0)
			goto out;
		page = json_loads(*json, 0, NULL);
		if (!json_is_array(page) || json_array_extend(all, page)) {
			fprintf(stderr, "ibvctl: a bad page of limit show\n");
			ret = -EPROTO;
			goto out;
		}
		json_decref(page);
		page = NULL;
	} while (more_after(all, &uid));
	free(*json);
	*json = json_dumps(all, JSON_COMPACT);
	if (!*json) {
		fprintf(stderr, "ibvctl: %s\n", strerror(ENOMEM));
		ret = -ENOMEM;
	}
out:
	json_decref(page);
	json_decref(all);
	free(args);
	return ret;
}

/* A full disk or a closed pipe must not look like success. */
static int flush_stdout(void)
{
	if (fflush(stdout) == 0 && !ferror(stdout))
		return 0;
	fprintf(stderr, "ibvctl: cannot write the output: %s\n", strerror(errno));
	return -EIO;
}

int main(int argc, char *argv[])
{
	struct options o = { .out = { false, false } };
	struct ibvctl_cmd cmd;
	char *json = NULL;
	int ret;

	ret = parse_options(argc, argv, &o);
	if (ret <= 0)
		return ret < 0 || flush_stdout() < 0 ? 1 : 0;
	if (o.socket && !*o.socket) {
		fprintf(stderr, "ibvctl: empty socket path\n");
		ibvctl_usage(stderr, NULL);
		return 1;
	}
	if (ibvctl_parse(argc - optind, argv + optind, &cmd) < 0)
		return 1;
	if (cmd.help) {
		ibvctl_usage(stdout, cmd.obj);
		return flush_stdout() < 0 ? 1 : 0;
	}
	/* -p only means something with -j; alone it is ignored, as in rdma */
	o.out.pretty = o.out.pretty && o.out.json;

	ret = admin_call(&o, &cmd, &json);
	if (ret == 0 && !strcmp(ibvctl_object_name(cmd.obj), "limit") &&
	    !strcmp(cmd.command, "show"))
		ret = limit_pages(&o, &cmd, &json);
	if (ret == 0)
		ret = ibvctl_print(&cmd, json, &o.out);
	if (ret == 0)
		ret = flush_stdout();
	free(json);
	return ret < 0 ? 1 : 0;
}
