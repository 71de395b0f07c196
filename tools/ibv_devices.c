/*
 * ibv_devices: list RDMA devices and their node GUIDs.
 *
 * ibverbsd's own build of the classic tool.  It uses only the public verbs
 * API, so it runs on Debian's libibverbs as well as ours, and its output is
 * byte-for-byte what Debian's ibv_devices prints (scripts parse it).
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

static void usage(FILE *out)
{
	fprintf(out, "Usage: ibv_devices\n"
		"List the RDMA devices available from user space and their "
		"node GUIDs.\n");
}

static void print_devices(struct ibv_device **list)
{
	printf("    %-16s\t   node GUID\n", "device");
	printf("    %-16s\t----------------\n", "------");
	for (; *list; list++)
		printf("    %-16s\t%016llx\n", ibv_get_device_name(*list),
		       (unsigned long long)be64toh(ibv_get_device_guid(*list)));
}

int main(int argc, char *argv[])
{
	struct ibv_device **list;

	/* Debian's takes no options and ignores its arguments: so do we,
	 * but for a request for help. */
	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		usage(stdout);
		return 0;
	}

	list = ibv_get_device_list(NULL);
	if (!list) {
		fprintf(stderr, "Failed to get IB devices list: %s\n",
			strerror(errno));
		return 1;
	}
	print_devices(list);
	ibv_free_device_list(list);
	return 0;
}
