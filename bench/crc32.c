/*
 * The CRC-32 under the RoCE ICRC (daemon/transport/roce/crc32.c) against
 * zlib's crc32(), the anchor, in GB/s (10^9 B/s) on 64 B, 1 KiB, 4 KiB
 * and 64 KiB buffers.  Built and run by bench/crc32, which links zlib
 * here only; the daemon has no zlib.  Each call takes the register the
 * previous one returned, so calls form one dependency chain as a packet's
 * do, and the compiler cannot drop any of them.  Every figure is the
 * best of several timed rounds: on a shared machine the slow rounds are
 * other load, not the code.  With the paths of crc32.h
 * (ROCE_CRC32_PATHS) each path is measured as well, and all of them are
 * checked against zlib before any timing.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "crc32.h"

#define ROUNDS		7
#define ROUND_NS	40000000.0	/* 40 ms a round */

typedef uint32_t (*crc_fn)(uint32_t reg, const uint8_t *buf, size_t len);

static uint32_t zlib_update(uint32_t reg, const uint8_t *buf, size_t len)
{
	/* zlib takes and returns the finished CRC, the register inverted */
	return ~(uint32_t)crc32(~reg, buf, (uInt)len);
}

static const struct impl {
	const char *name;
	crc_fn fn;
} impls[] = {
	{ "zlib", zlib_update },
	{ "roce_crc32_update", roce_crc32_update },
#ifdef ROCE_CRC32_PATHS
	{ "  bytewise", roce_crc32_bytewise },
	{ "  sliced", roce_crc32_sliced },
	{ "  clmul", roce_crc32_clmul },
#endif
};

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Where the last register goes, so that no call is dead code */
volatile uint32_t crc32_bench_sink;

static double gbps(crc_fn fn, const uint8_t *buf, size_t len)
{
	double best = 0, t0, t;
	size_t calls, i;
	uint32_t reg = ~0u;
	int r;

	for (r = 0; r < ROUNDS; r++) {
		calls = 0;
		t0 = now_ns();
		do {
			for (i = 0; i < 64; i++)
				reg = fn(reg, buf, len);
			calls += 64;
			t = now_ns() - t0;
		} while (t < ROUND_NS);
		if (calls * len / t > best)
			best = calls * len / t;
	}
	crc32_bench_sink = reg;
	return best;
}

static int usable(const struct impl *im)
{
#ifdef ROCE_CRC32_PATHS
	if (im->fn == roce_crc32_clmul)
		return roce_crc32_clmul_usable();
#endif
	(void)im;
	return 1;
}

int main(void)
{
	static const size_t sizes[] = { 64, 1024, 4096, 65536 };
	const size_t n_impls = sizeof(impls) / sizeof(impls[0]);
	uint8_t *buf = malloc(65536 + 16);
	double zlib_gbps, g;
	size_t i, s, k;

	if (!buf)
		return 1;
	for (i = 0; i < 65536 + 16; i++)
		buf[i] = (uint8_t)(rand() >> 7);
	/* Wrong answers fast are worth nothing: check first */
	for (k = 0; k < n_impls; k++) {
		if (!usable(&impls[k]))
			continue;
		for (i = 0; i <= 4096; i += 61)
			if (impls[k].fn(~0u, buf + i % 16, i) !=
			    zlib_update(~0u, buf + i % 16, i)) {
				fprintf(stderr, "%s disagrees with zlib at %zu bytes\n",
					impls[k].name, i);
				return 1;
			}
	}
	printf("| implementation | 64 B | 1 KiB | 4 KiB | 64 KiB |\n");
	printf("|---|---|---|---|---|\n");
	for (k = 0; k < n_impls; k++) {
		if (!usable(&impls[k]))
			continue;
		printf("| %s |", impls[k].name);
		for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			/*
			 * zlib again beside each figure, so that a ratio
			 * never spans a change in the machine's load
			 */
			zlib_gbps = gbps(zlib_update, buf, sizes[s]);
			g = k ? gbps(impls[k].fn, buf, sizes[s]) : zlib_gbps;
			printf(" %.2f (%.2f x) |", g, g / zlib_gbps);
		}
		printf("\n");
		fflush(stdout);
	}
	free(buf);
	return 0;
}
