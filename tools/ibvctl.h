/*
 * ibvctl: inspect and administer a running ibverbsd.
 *
 * The command line follows iproute2's rdma(8): OPTIONS OBJECT COMMAND ARGS.
 * ibvctl itself only canonicalises OBJECT and COMMAND (abbreviations,
 * defaults, help); the daemon parses the rest and answers with a JSON array
 * of flat objects, which ibvctl prints as JSON or as rdma-style text.
 */
#ifndef IBVCTL_H
#define IBVCTL_H

#include <stdbool.h>
#include <stdio.h>

struct ibvctl_object;

/* The command line after the options, with full words. */
struct ibvctl_cmd {
	const struct ibvctl_object *obj;	/* NULL with help: top-level help */
	const char *command;	/* canonical COMMAND */
	char **args;		/* what follows COMMAND, passed through */
	int nargs;
	bool help;		/* print obj's usage on stdout and exit 0 */
};

/*
 * Canonicalise argv (OBJECT first).  Returns 0, or -EINVAL for a bad command
 * line after printing the reason and the relevant usage on stderr.
 */
int ibvctl_parse(int argc, char **argv, struct ibvctl_cmd *cmd);

/* OBJECT's full name, e.g. "resource". */
const char *ibvctl_object_name(const struct ibvctl_object *obj);

/* The usage of obj, or the top-level usage when obj is NULL. */
void ibvctl_usage(FILE *out, const struct ibvctl_object *obj);

struct ibvctl_output {
	bool json;	/* -j */
	bool pretty;	/* -p, only with -j */
};

/*
 * Print the daemon's answer (a JSON array of flat objects) on stdout.
 * Returns 0, or -EPROTO if json is not such an array.
 */
int ibvctl_print(const struct ibvctl_cmd *cmd, const char *json,
		 const struct ibvctl_output *out);

#endif /* IBVCTL_H */
