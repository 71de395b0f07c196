/*
 * Arguments several ibvctl objects share, parsed one way for all of them.
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "config/config.h"
#include "server/call.h"
#include "server/daemon.h"

/*
 * A "link DEV[/PORT]" value: *dev points into value (cut at the '/'),
 * *port is set only when a port is given.  0, or -EINVAL recorded on call.
 */
static int parse_link(struct ibvd_call *call, char *value, const char **dev,
		      long *port)
{
	char *slash = strchr(value, '/'), *end;

	*dev = value;
	if (!slash)
		return 0;
	*slash = '\0';
	errno = 0;
	*port = strtol(slash + 1, &end, 10);
	/* port numbers are 8 bits (ibv_port_attr's), in digits only ("+2") */
	if (slash[1] < '0' || slash[1] > '9' || *end || errno || *port < 1 ||
	    *port > 255)
		return ibvd_call_error(call, -EINVAL, "invalid port %.64s/%.64s",
				       value, slash + 1);
	return 0;
}

const struct ibvd_port *ibvd_admin_port_named(const struct ibvd_device *dev,
					      const char *text)
{
	unsigned long num;
	char *end;

	if (text[0] < '0' || text[0] > '9')
		return NULL;
	errno = 0;
	num = strtoul(text, &end, 10);
	if (*end || errno || num > UINT32_MAX)
		return NULL;
	return ibvd_device_port(dev, (uint32_t)num);
}

/* A dev or link filter names a device, and a port, the daemon has. */
static int check_place(struct ibvd_call *call,
		       const struct ibvd_admin_place *place)
{
	const struct ibvd_device *dev;

	if (!place->dev)
		return 0;
	dev = ibvd_device_find(&ibvd_call_daemon(call)->devices, place->dev);
	if (!dev)
		return ibvd_call_error(call, -ENODEV, "unknown device %.64s",
				       place->dev);
	if (place->port > (long)dev->nports)
		return ibvd_call_error(call, -EINVAL, "invalid port %s/%ld",
				       dev->name, place->port);
	return 0;
}

int ibvd_admin_parse_pairs(struct ibvd_call *call, size_t argc, char **argv,
			   struct ibvd_admin_place *place,
			   ibvd_admin_filter_fn filter, void *arg)
{
	size_t i;
	int ret;

	place->dev = NULL;
	place->port = -1;
	for (i = 0; i < argc; i += 2) {
		if (i + 1 == argc)
			return ibvd_call_error(call, -EINVAL, "%.64s needs a value",
					       argv[i]);
		if (!strcmp(argv[i], "link"))
			ret = parse_link(call, argv[i + 1], &place->dev,
					 &place->port);
		else if (!strcmp(argv[i], "dev"))
			ret = (place->dev = argv[i + 1], 0);
		else
			ret = filter(call, argv[i], argv[i + 1], arg);
		if (ret < 0)
			return ret;
	}
	return check_place(call, place);
}

/* One number of a spec: digits only, in range. */
static bool spec_number(const char *p, unsigned long long *n, char **end)
{
	if (*p < '0' || *p > '9')
		return false;
	errno = 0;
	*n = strtoull(p, end, 10);
	return errno == 0;
}

bool ibvd_admin_num_spec(const char *spec, unsigned long long v, bool *match)
{
	unsigned long long a, b;
	char *end;

	*match = false;
	for (;;) {
		if (!spec_number(spec, &a, &end))
			return false;
		b = a;
		if (*end == '-' && (!spec_number(end + 1, &b, &end) || b < a))
			return false;
		if (v >= a && v <= b)
			*match = true;
		if (*end == '\0')
			return true;
		if (*end != ',')
			return false;
		spec = end + 1;
	}
}

const char *ibvd_admin_who(struct ibvd_call *call)
{
	static char who[64];
	const struct ibvd_daemon *d = ibvd_call_daemon(call);
	const char *group = d->cfg ? d->cfg->admin_group : NULL;

	if (!group)
		return "root";
	snprintf(who, sizeof(who), "root or group %.40s", group);
	return who;
}
