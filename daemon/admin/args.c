/*
 * Arguments several ibvctl objects share, parsed one way for all of them.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "server/call.h"

int ibvd_admin_parse_link(struct ibvd_call *call, char *value,
			  const char **dev, long *port)
{
	char *slash = strchr(value, '/'), *end;

	*dev = value;
	if (!slash)
		return 0;
	*slash = '\0';
	*port = strtol(slash + 1, &end, 10);
	if (end == slash + 1 || *end || *port < 1)
		return ibvd_call_error(call, -EINVAL, "invalid port %.64s/%.64s",
				       value, slash + 1);
	return 0;
}
