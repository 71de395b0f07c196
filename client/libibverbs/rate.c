/*
 * Static rate conversions: enum ibv_rate <-> multiple of 2.5 Gb/s <-> Mb/s.
 * The values are rdma-core 44's (checked against Debian's library for every
 * enum value and every multiple/Mb/s input): rates that are not a whole
 * multiple of 2.5 Gb/s have no multiple, and the Mb/s figures are the
 * effective data rates after line encoding (e.g. 25 Gb/s -> 25781).
 */
#include "config.h"

#include <infiniband/verbs.h>

#include "util.h"

#define NO_MULT	(-1)

struct rate_info {
	enum ibv_rate rate;
	int mult;
	int mbps;
};

static const struct rate_info rates[] = {
	{ IBV_RATE_2_5_GBPS,	1,	2500 },
	{ IBV_RATE_5_GBPS,	2,	5000 },
	{ IBV_RATE_10_GBPS,	4,	10000 },
	{ IBV_RATE_20_GBPS,	8,	20000 },
	{ IBV_RATE_30_GBPS,	12,	30000 },
	{ IBV_RATE_40_GBPS,	16,	40000 },
	{ IBV_RATE_60_GBPS,	24,	60000 },
	{ IBV_RATE_80_GBPS,	32,	80000 },
	{ IBV_RATE_120_GBPS,	48,	120000 },
	{ IBV_RATE_14_GBPS,	NO_MULT, 14062 },
	{ IBV_RATE_56_GBPS,	NO_MULT, 56250 },
	{ IBV_RATE_112_GBPS,	NO_MULT, 112500 },
	{ IBV_RATE_168_GBPS,	NO_MULT, 168750 },
	{ IBV_RATE_25_GBPS,	NO_MULT, 25781 },
	{ IBV_RATE_100_GBPS,	NO_MULT, 103125 },
	{ IBV_RATE_200_GBPS,	NO_MULT, 206250 },
	{ IBV_RATE_300_GBPS,	NO_MULT, 309375 },
	{ IBV_RATE_28_GBPS,	11,	28125 },
	{ IBV_RATE_50_GBPS,	20,	53125 },
	{ IBV_RATE_400_GBPS,	160,	425000 },
	{ IBV_RATE_600_GBPS,	240,	637500 },
	{ IBV_RATE_800_GBPS,	320,	850000 },
	{ IBV_RATE_1200_GBPS,	480,	1275000 },
};

static const struct rate_info *by_rate(enum ibv_rate rate)
{
	for (size_t i = 0; i < ARRAY_SIZE(rates); i++)
		if (rates[i].rate == rate)
			return &rates[i];
	return NULL;
}

int ibv_rate_to_mult(enum ibv_rate rate)
{
	const struct rate_info *info = by_rate(rate);

	return info ? info->mult : -1;
}

int ibv_rate_to_mbps(enum ibv_rate rate)
{
	const struct rate_info *info = by_rate(rate);

	return info ? info->mbps : -1;
}

/* Unknown inputs map to IBV_RATE_MAX (0), "no limit", like rdma-core. */
enum ibv_rate mult_to_ibv_rate(int mult)
{
	for (size_t i = 0; i < ARRAY_SIZE(rates); i++)
		if (mult > 0 && rates[i].mult == mult)
			return rates[i].rate;
	return IBV_RATE_MAX;
}

enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	for (size_t i = 0; i < ARRAY_SIZE(rates); i++)
		if (rates[i].mbps == mbps)
			return rates[i].rate;
	return IBV_RATE_MAX;
}
