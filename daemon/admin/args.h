/*
 * The argument layer of ibvctl's objects (args.c): values several
 * commands take, parsed one way.
 */
#ifndef IBVD_ADMIN_ARGS_H
#define IBVD_ADMIN_ARGS_H

struct ibvd_call;

/*
 * A "link DEV[/PORT]" value: *dev points into value (cut at the '/'),
 * *port is set only when a port is given.  0, or -EINVAL recorded on call.
 */
int ibvd_admin_parse_link(struct ibvd_call *call, char *value,
			  const char **dev, long *port);

#endif /* IBVD_ADMIN_ARGS_H */
