/*
 * The argument layer of ibvctl's objects (args.c): values several
 * commands take, parsed one way.
 */
#ifndef IBVD_ADMIN_ARGS_H
#define IBVD_ADMIN_ARGS_H

#include <stdbool.h>

struct ibvd_call;
struct ibvd_device;
struct ibvd_port;

/* Where a listing looks: "dev DEV" or "link DEV[/PORT]". */
struct ibvd_admin_place {
	const char *dev;		/* NULL: every device */
	long port;			/* -1: every port */
};

/* A filter pair ("KEY VALUE") of a listing: 0 or -EINVAL recorded on call. */
typedef int (*ibvd_admin_filter_fn)(struct ibvd_call *call, const char *key,
				    const char *value, void *arg);

/*
 * A listing's "KEY VALUE" pairs: "link" and "dev" set *place (which starts
 * as everywhere), every other pair goes to filter.  0, or -EINVAL recorded
 * on call (a key without a value, a bad link, what filter refused).
 */
int ibvd_admin_parse_pairs(struct ibvd_call *call, size_t argc, char **argv,
			   struct ibvd_admin_place *place,
			   ibvd_admin_filter_fn filter, void *arg);

/*
 * A numeric filter's value: "N", "A-B" or a comma-separated list of them.
 * False if malformed (a number out of range too); else *match says
 * whether v is in it.
 */
/* The port of dev numbered by text (digits only), or NULL. */
const struct ibvd_port *ibvd_admin_port_named(const struct ibvd_device *dev,
					      const char *text);

bool ibvd_admin_num_spec(const char *spec, unsigned long long v, bool *match);

/*
 * Who may administer, for messages: "root or group NAME" (the config's
 * admin_group), or "root".
 */
const char *ibvd_admin_who(struct ibvd_call *call);

#endif /* IBVD_ADMIN_ARGS_H */
