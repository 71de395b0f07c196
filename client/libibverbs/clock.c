/*
 * The device clock: the engine stamps each CQE with CLOCK_MONOTONIC in
 * nanoseconds (common/ring.h), which query_device_ex announces as a 64-bit
 * clock of 1 GHz (hca_core_clock 1,000,000 kHz).  Here: its current value
 * (ibv_query_rt_values_ex) and its conversion to wall-clock time
 * (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK).
 */
#include "config.h"

#include <errno.h>
#include <time.h>

#include "ibvd_verbs.h"

static uint64_t ns_of(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t ibvc_now_ns(void)
{
	return ns_of(CLOCK_MONOTONIC);
}

uint64_t ibvc_clock_to_wallclock_ns(uint64_t stamp)
{
	/* both clocks tick at the same rate; only their origins differ */
	uint64_t mono = ns_of(CLOCK_MONOTONIC);
	uint64_t real = ns_of(CLOCK_REALTIME);

	return real - (mono - stamp);
}

/*
 * verbs_context op behind ibv_query_rt_values_ex().  As other providers
 * report a raw cycle counter, the raw clock is all in tv_nsec.
 */
int ibvc_query_rt_values_op(struct ibv_context *ctx, struct ibv_values_ex *values)
{
	if (!ctx || !values)
		return EINVAL;
	if (values->comp_mask & ~(uint32_t)IBV_VALUES_MASK_RAW_CLOCK)
		return EINVAL;
	if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
		values->raw_clock.tv_sec = 0;
		values->raw_clock.tv_nsec = (long)ns_of(CLOCK_MONOTONIC);
	}
	return 0;
}
