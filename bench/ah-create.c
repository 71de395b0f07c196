/*
 * bench/ah-create.c: what making an address handle costs on a RoCE
 * device, where the daemon asks the kernel for the route's hop limit
 * each time (daemon/core/route.c): N ibv_create_ah + ibv_destroy_ah from
 * the device's IPv4 GID to a destination on its subnet, timed.
 *
 * usage: ah-create DEVICE SRC_IPV4 DST_IPV4 N   (prints µs per pair)
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "../tests/common/open_device.h"

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void v4_gid(const char *addr, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	gid->raw[10] = gid->raw[11] = 0xff;
	inet_pton(AF_INET, addr, gid->raw + 12);
}

int main(int argc, char **argv)
{
	struct ibv_ah_attr a = { .is_global = 1, .port_num = 1 };
	struct ibv_context *ctx;
	union ibv_gid want, g;
	struct ibv_pd *pd;
	double t0;
	int i, n;

	if (argc != 5 || (n = atoi(argv[4])) < 1) {
		fprintf(stderr, "usage: ah-create DEVICE SRC_IPV4 DST_IPV4 N\n");
		return 2;
	}
	ctx = open_device_named(argv[1]);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (!pd) {
		fprintf(stderr, "ah-create: cannot open %s\n", argv[1]);
		return 1;
	}
	v4_gid(argv[2], &want);
	for (i = 0; i < 16; i++)
		if (!ibv_query_gid(ctx, 1, i, &g) && !memcmp(g.raw, want.raw, 16))
			break;
	if (i == 16) {
		fprintf(stderr, "ah-create: no GID for %s\n", argv[2]);
		return 1;
	}
	a.grh.sgid_index = (uint8_t)i;
	v4_gid(argv[3], &a.grh.dgid);
	t0 = now_us();
	for (i = 0; i < n; i++) {
		struct ibv_ah *ah = ibv_create_ah(pd, &a);

		if (!ah || ibv_destroy_ah(ah)) {
			perror("ah-create: ibv_create_ah");
			return 1;
		}
	}
	printf("%.1f\n", (now_us() - t0) / n);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}
