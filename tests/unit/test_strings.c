/*
 * The string and rate helpers of our libibverbs and librdmacm.  Programs
 * print these strings and scripts match on them, so every value is checked
 * against rdma-core 44's exact wording (taken from Debian's libraries), and
 * every value just outside each enum must read "unknown".
 */
#include <config.h>

#include <check.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "tests/common/check_run.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

START_TEST(node_types)
{
	static const char *const want[] = {
		[IBV_NODE_CA] = "InfiniBand channel adapter",
		[IBV_NODE_SWITCH] = "InfiniBand switch",
		[IBV_NODE_ROUTER] = "InfiniBand router",
		[IBV_NODE_RNIC] = "iWARP NIC",
		[IBV_NODE_USNIC] = "usNIC",
		[IBV_NODE_USNIC_UDP] = "usNIC UDP",
		[IBV_NODE_UNSPECIFIED] = "unspecified",
	};
	int i;

	ck_assert_int_eq(IBV_NODE_UNSPECIFIED + 1, N(want));
	for (i = IBV_NODE_CA; i <= IBV_NODE_UNSPECIFIED; i++)
		ck_assert_str_eq(ibv_node_type_str(i), want[i]);
	ck_assert_str_eq(ibv_node_type_str(IBV_NODE_UNKNOWN), "unknown");
	ck_assert_str_eq(ibv_node_type_str(0), "unknown");
	ck_assert_str_eq(ibv_node_type_str(IBV_NODE_UNSPECIFIED + 1), "unknown");
}
END_TEST

/* The library's words, not ibv_devinfo's own "PORT_ACTIVE". */
START_TEST(port_states)
{
	static const char *const want[] = {
		[IBV_PORT_NOP] = "no state change (NOP)",
		[IBV_PORT_DOWN] = "down",
		[IBV_PORT_INIT] = "init",
		[IBV_PORT_ARMED] = "armed",
		[IBV_PORT_ACTIVE] = "active",
		[IBV_PORT_ACTIVE_DEFER] = "active defer",
	};
	int i;

	ck_assert_int_eq(IBV_PORT_ACTIVE_DEFER + 1, N(want));
	for (i = IBV_PORT_NOP; i <= IBV_PORT_ACTIVE_DEFER; i++)
		ck_assert_str_eq(ibv_port_state_str(i), want[i]);
	ck_assert_str_eq(ibv_port_state_str(-1), "unknown");
	ck_assert_str_eq(ibv_port_state_str(IBV_PORT_ACTIVE_DEFER + 1), "unknown");
}
END_TEST

START_TEST(event_types)
{
	static const char *const want[] = {
		"CQ error",
		"local work queue catastrophic error",
		"invalid request local work queue error",
		"local access violation work queue error",
		"communication established",
		"send queue drained",
		"path migrated",
		"path migration request error",
		"local catastrophic error",
		"port active",
		"port error",
		"LID change",
		"P_Key change",
		"SM change",
		"SRQ catastrophic error",
		"SRQ limit reached",
		"last WQE reached",
		"client reregistration",
		"GID table change",
		"WQ fatal",
	};
	int i;

	ck_assert_int_eq(IBV_EVENT_WQ_FATAL + 1, N(want));
	for (i = IBV_EVENT_CQ_ERR; i <= IBV_EVENT_WQ_FATAL; i++)
		ck_assert_str_eq(ibv_event_type_str(i), want[i]);
	ck_assert_str_eq(ibv_event_type_str(-1), "unknown");
	ck_assert_str_eq(ibv_event_type_str(IBV_EVENT_WQ_FATAL + 1), "unknown");
}
END_TEST

START_TEST(wc_statuses)
{
	static const char *const want[] = {
		"success",
		"local length error",
		"local QP operation error",
		"local EE context operation error",
		"local protection error",
		"Work Request Flushed Error",
		"memory management operation error",
		"bad response error",
		"local access error",
		"remote invalid request error",
		"remote access error",
		"remote operation error",
		"transport retry counter exceeded",
		"RNR retry counter exceeded",
		"local RDD violation error",
		"remote invalid RD request",
		"aborted error",
		"invalid EE context number",
		"invalid EE context state",
		"fatal error",
		"response timeout error",
		"general error",
		"TM error",
		"TM software rendezvous",
	};
	int i;

	ck_assert_int_eq(IBV_WC_TM_RNDV_INCOMPLETE + 1, N(want));
	for (i = IBV_WC_SUCCESS; i <= IBV_WC_TM_RNDV_INCOMPLETE; i++)
		ck_assert_str_eq(ibv_wc_status_str(i), want[i]);
	ck_assert_str_eq(ibv_wc_status_str(-1), "unknown");
	ck_assert_str_eq(ibv_wc_status_str(IBV_WC_TM_RNDV_INCOMPLETE + 1),
			 "unknown");
}
END_TEST

START_TEST(cm_events)
{
	ck_assert_str_eq(rdma_event_str(RDMA_CM_EVENT_ADDR_RESOLVED),
			 "RDMA_CM_EVENT_ADDR_RESOLVED");
	ck_assert_str_eq(rdma_event_str(RDMA_CM_EVENT_CONNECT_REQUEST),
			 "RDMA_CM_EVENT_CONNECT_REQUEST");
	ck_assert_str_eq(rdma_event_str(RDMA_CM_EVENT_ESTABLISHED),
			 "RDMA_CM_EVENT_ESTABLISHED");
	ck_assert_str_eq(rdma_event_str(RDMA_CM_EVENT_TIMEWAIT_EXIT),
			 "RDMA_CM_EVENT_TIMEWAIT_EXIT");
	ck_assert_str_eq(rdma_event_str(RDMA_CM_EVENT_TIMEWAIT_EXIT + 1),
			 "UNKNOWN EVENT");
	ck_assert_str_eq(rdma_event_str(-1), "UNKNOWN EVENT");
}
END_TEST

/* Every rate: its multiple of 2.5 Gb/s (or none) and its Mb/s. */
static const struct {
	enum ibv_rate rate;
	int mult;
	int mbps;
} rates[] = {
	{ IBV_RATE_2_5_GBPS, 1, 2500 },
	{ IBV_RATE_5_GBPS, 2, 5000 },
	{ IBV_RATE_10_GBPS, 4, 10000 },
	{ IBV_RATE_20_GBPS, 8, 20000 },
	{ IBV_RATE_30_GBPS, 12, 30000 },
	{ IBV_RATE_40_GBPS, 16, 40000 },
	{ IBV_RATE_60_GBPS, 24, 60000 },
	{ IBV_RATE_80_GBPS, 32, 80000 },
	{ IBV_RATE_120_GBPS, 48, 120000 },
	{ IBV_RATE_14_GBPS, -1, 14062 },
	{ IBV_RATE_56_GBPS, -1, 56250 },
	{ IBV_RATE_112_GBPS, -1, 112500 },
	{ IBV_RATE_168_GBPS, -1, 168750 },
	{ IBV_RATE_25_GBPS, -1, 25781 },
	{ IBV_RATE_100_GBPS, -1, 103125 },
	{ IBV_RATE_200_GBPS, -1, 206250 },
	{ IBV_RATE_300_GBPS, -1, 309375 },
	{ IBV_RATE_28_GBPS, 11, 28125 },
	{ IBV_RATE_50_GBPS, 20, 53125 },
	{ IBV_RATE_400_GBPS, 160, 425000 },
	{ IBV_RATE_600_GBPS, 240, 637500 },
	{ IBV_RATE_800_GBPS, 320, 850000 },
	{ IBV_RATE_1200_GBPS, 480, 1275000 },
};

START_TEST(rate_table)
{
	size_t i = (size_t)_i;

	ck_assert_int_eq(ibv_rate_to_mult(rates[i].rate), rates[i].mult);
	ck_assert_int_eq(ibv_rate_to_mbps(rates[i].rate), rates[i].mbps);
	ck_assert_int_eq(mbps_to_ibv_rate(rates[i].mbps), rates[i].rate);
	if (rates[i].mult > 0)
		ck_assert_int_eq(mult_to_ibv_rate(rates[i].mult), rates[i].rate);
}
END_TEST

/* IBV_RATE_MAX (0) and anything unlisted: -1 one way, IBV_RATE_MAX back. */
START_TEST(rate_unknown)
{
	ck_assert_int_eq(ibv_rate_to_mult(IBV_RATE_MAX), -1);
	ck_assert_int_eq(ibv_rate_to_mbps(IBV_RATE_MAX), -1);
	ck_assert_int_eq(ibv_rate_to_mult(1), -1);
	ck_assert_int_eq(ibv_rate_to_mbps(IBV_RATE_1200_GBPS + 1), -1);
	ck_assert_int_eq(ibv_rate_to_mult(-1), -1);
	ck_assert_int_eq(mult_to_ibv_rate(0), IBV_RATE_MAX);
	ck_assert_int_eq(mult_to_ibv_rate(-1), IBV_RATE_MAX);
	ck_assert_int_eq(mult_to_ibv_rate(3), IBV_RATE_MAX);
	ck_assert_int_eq(mbps_to_ibv_rate(0), IBV_RATE_MAX);
	ck_assert_int_eq(mbps_to_ibv_rate(-1), IBV_RATE_MAX);
	ck_assert_int_eq(mbps_to_ibv_rate(25000), IBV_RATE_MAX);
}
END_TEST

static Suite *strings_suite(void)
{
	Suite *s = suite_create("strings");
	TCase *names = tcase_create("names");
	TCase *rate = tcase_create("rates");

	tcase_add_test(names, node_types);
	tcase_add_test(names, port_states);
	tcase_add_test(names, event_types);
	tcase_add_test(names, wc_statuses);
	tcase_add_test(names, cm_events);
	suite_add_tcase(s, names);
	tcase_add_loop_test(rate, rate_table, 0, N(rates));
	tcase_add_test(rate, rate_unknown);
	suite_add_tcase(s, rate);
	return s;
}

int main(void)
{
	return check_run(strings_suite(), CK_NORMAL);
}
