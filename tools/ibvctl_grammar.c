/*
 * ibvctl's grammar: objects, their commands, abbreviations and usage.
 *
 * Like rdma(8), any unambiguous prefix names an object or a command and a
 * missing command means the object's default (the first in its list).
 * Unlike rdma, which takes the first match in table order, an ambiguous
 * prefix is an error: "ibvctl d s" could be "dev show" or "daemon status".
 * A new object or command is one line in a table here; the daemon does the
 * work.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ibvctl.h"
#include "util.h"

struct ibvctl_object {
	const char *name;
	const char *const *commands;	/* NULL-terminated; [0] is the default */
	const char *usage;
};

static const char *const show_cmds[] = { "show", "help", NULL };
static const char *const limit_cmds[] = { "show", "set", "help", NULL };
static const char *const daemon_cmds[] = {
	"status", "version", "reload", "help", NULL
};

/* Objects in rdma's order, then ours; "help" stands for the top usage. */
static const struct ibvctl_object objects[] = {
	{ "dev", show_cmds,
	  "Usage: ibvctl dev [ show [ DEV ] ]\n"
	  "       ibvctl dev help\n" },
	{ "link", show_cmds,
	  "Usage: ibvctl link [ show [ DEV[/PORT] ] ]\n"
	  "       ibvctl link help\n" },
	{ "resource", show_cmds,
	  "Usage: ibvctl resource [ show [ DEV ] ]\n"
	  "       ibvctl resource show { qp | cq | mr | pd | cm_id | ctx | srq }\n"
	  "                            [ link DEV/PORT | dev DEV ] [ FILTER VALUE ]...\n"
	  "       ibvctl resource help\n"
	  "where  FILTER (VALUE: N, A-B or a comma list of them; names without case):\n"
	  "       qp     lqpn rqpn pid sq-psn rq-psn type path-mig-state state pdn comm uid\n"
	  "       cq     cqn cqe users ctxn pid comm uid\n"
	  "       mr     mrn mrlen pdn pid comm uid\n"
	  "       pd     pdn users ctxn pid comm uid\n"
	  "       ctx    ctxn pid comm uid\n"
	  "       srq    srqn type pdn cqn pid comm uid\n"
	  "       cm_id  cm-idn lqpn pid src-port dst-port qp-type state ps comm\n"
	  "              src-addr dst-addr\n"
	  "Non-admins see only their own uid's objects; rkey/lkey/iova are for admins.\n"
	  "-d adds uid and cgroup (and an MR's memory tier) after rdma's columns\n"
	  "(not for cm_id).\n" },
	{ "statistic", show_cmds,
	  "Usage: ibvctl statistic [ show [ link DEV[/PORT] | engine ] ]\n"
	  "       ibvctl statistic help\n"
	  "Port counters are rdma's rxe counters; engine shows one line per engine\n"
	  "thread.  See ibvctl-statistic(8) for what each counter counts.\n" },
	{ "client", show_cmds,
	  "Usage: ibvctl client [ show [ pid PID ] [ uid UID ] [ cgroup PREFIX ] ]\n"
	  "       ibvctl client help\n"
	  "Columns: pid uid gid comm cgroup contexts hca_handle objects hca_object\n"
	  "         cm_id pinned memlock (hca_handle, hca_object, memlock: the\n"
	  "         limits of the client's uid, a number or max).\n"
	  "Non-admins see only their own uid's processes.\n" },
	{ "limit", limit_cmds,
	  "Usage: ibvctl limit [ show [ max | current | refused ] [ uid UID ] [ dev DEV ] ]\n"
	  "       ibvctl limit set { default | uid UID | group NAME | cgroup PREFIX }\n"
	  "                        [ dev DEV ] KEY=VALUE...\n"
	  "       ibvctl limit help\n"
	  "where  KEY := { memlock | hca_handle | hca_object | qp | cq | mr | pd | srq |\n"
	  "                ah | cm_id | session | comp_channel | mcast_attach |\n"
	  "                mcast_join | bandwidth }\n"
	  "       VALUE := { N | max }; memlock and bandwidth (bytes/s) also N[k|m|g]\n"
	  "refused counts what each limit refused, then events_dropped,\n"
	  "slow_reader and log_suppressed (see ibvctl-limit(8)); max and current\n"
	  "end with the daemon's fixed caps: ring_bytes, direct_pairs, mapped_mrs,\n"
	  "mapped_bytes, objects, cm_ports.\n"
	  "limit set changes the running daemon only: a reload or restart returns\n"
	  "to the configuration file.\n" },
	{ "daemon", daemon_cmds,
	  "Usage: ibvctl daemon [ status | version | reload ]\n"
	  "       ibvctl daemon help\n" },
	{ "help", NULL, NULL },
};

static const char top_usage[] =
	"Usage: ibvctl [ OPTIONS ] OBJECT { COMMAND | help }\n"
	"       ibvctl help [ OBJECT ]\n"
	"where  OBJECT := { dev | link | resource | statistic | client | limit | daemon }\n"
	"       OPTIONS := { -V[ersion] | -h[elp] | -j[son] | -p[retty] | -d[etails] |\n"
	"                    -s[ocket] PATH }\n";

const char *ibvctl_object_name(const struct ibvctl_object *obj)
{
	return obj->name;
}

void ibvctl_usage(FILE *out, const struct ibvctl_object *obj)
{
	fputs(obj && obj->usage ? obj->usage : top_usage, out);
}

/* The i-th name of a table whose entries start with a name pointer. */
static const char *name_at(const void *table, size_t stride, size_t i)
{
	return *(const char *const *)((const char *)table + i * stride);
}

/*
 * Find word in a table of n names: an exact match, else the only name it is
 * a prefix of.  Returns the index, -ENOENT, or -EEXIST when ambiguous (then
 * the candidates are listed in amb).
 */
static int match_word(const char *word, const void *table, size_t stride,
		      size_t n, char *amb, size_t amb_len)
{
	size_t i, len = strlen(word), used = 0;
	int found = -ENOENT, count = 0;

	amb[0] = '\0';
	for (i = 0; i < n; i++) {
		const char *name = name_at(table, stride, i);

		if (!strcmp(word, name))
			return (int)i;
		if (!len || strncmp(word, name, len))
			continue;
		found = (int)i;
		count++;
		/* snprintf returns what it wanted to write: stay inside amb. */
		if (used < amb_len)
			used += (size_t)snprintf(amb + used, amb_len - used, "%s%s",
						 count > 1 ? ", " : "", name);
	}
	return count > 1 ? -EEXIST : found;
}

static size_t count_names(const char *const *names)
{
	size_t n = 0;

	while (names[n])
		n++;
	return n;
}

static int bad_word(const char *what, const char *word, int err,
		    const char *amb, const struct ibvctl_object *obj)
{
	if (err == -EEXIST)
		fprintf(stderr, "ibvctl: %s \"%s\" is ambiguous: %s\n", what, word, amb);
	else
		fprintf(stderr, "ibvctl: unknown %s \"%s\"\n", what, word);
	ibvctl_usage(stderr, obj);
	return -EINVAL;
}

/* "help [OBJECT]": the usage of OBJECT, or the top-level one. */
static int parse_help(int argc, char **argv, struct ibvctl_cmd *cmd)
{
	char amb[256];
	int i;

	cmd->help = true;
	if (argc < 1)
		return 0;
	if (argc > 1) {
		fprintf(stderr, "ibvctl: unexpected argument \"%s\" after help %s\n",
			argv[1], argv[0]);
		ibvctl_usage(stderr, NULL);
		return -EINVAL;
	}
	i = match_word(argv[0], objects, sizeof(objects[0]), ARRAY_SIZE(objects),
		       amb, sizeof(amb));
	if (i < 0)
		return bad_word("object", argv[0], i, amb, NULL);
	/* "help help" is the top-level usage too */
	cmd->obj = objects[i].commands ? &objects[i] : NULL;
	return 0;
}

int ibvctl_parse(int argc, char **argv, struct ibvctl_cmd *cmd)
{
	const struct ibvctl_object *obj;
	char amb[256];
	int i;

	memset(cmd, 0, sizeof(*cmd));
	if (argc < 1) {		/* rdma prints its help when given nothing */
		cmd->help = true;
		return 0;
	}
	i = match_word(argv[0], objects, sizeof(objects[0]), ARRAY_SIZE(objects),
		       amb, sizeof(amb));
	if (i < 0)
		return bad_word("object", argv[0], i, amb, NULL);
	obj = &objects[i];
	if (!obj->commands)
		return parse_help(argc - 1, argv + 1, cmd);
	cmd->obj = obj;
	cmd->command = obj->commands[0];
	if (argc >= 2) {
		i = match_word(argv[1], obj->commands, sizeof(obj->commands[0]),
			       count_names(obj->commands), amb, sizeof(amb));
		if (i < 0) {
			char what[64];

			snprintf(what, sizeof(what), "%s command", obj->name);
			return bad_word(what, argv[1], i, amb, obj);
		}
		cmd->command = obj->commands[i];
	}
	cmd->help = !strcmp(cmd->command, "help");
	cmd->args = argc > 2 ? argv + 2 : NULL;
	cmd->nargs = argc > 2 ? argc - 2 : 0;
	return 0;
}
