/*
 * A RoCE device's rules (daemon/core/roce.c): the default GID and node
 * GUID from the MAC, the port MTU for an interface MTU, speed and width,
 * peer CIDRs, and a GID table that keeps its indexes while addresses come
 * and go.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "daemon/core/roce.h"
#include "tests/common/check_run.h"

static const uint8_t mac[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };

/* text as an address in GID form (IPv4 as ::ffff:a.b.c.d). */
static void gid_of(const char *text, uint8_t out[16])
{
	memset(out, 0, 16);
	if (inet_pton(AF_INET, text, out + 12) == 1) {
		out[10] = out[11] = 0xff;
		return;
	}
	ck_assert_int_eq(inet_pton(AF_INET6, text, out), 1);
}

static const char *gid_text(const struct ibvd_gid *g, char *buf)
{
	return inet_ntop(AF_INET6, g->raw, buf, INET6_ADDRSTRLEN);
}

START_TEST(default_gid_is_modified_eui64)
{
	uint8_t gid[16], want[16];

	ibvd_roce_gid0(mac, gid);
	gid_of("fe80::5054:ff:fe12:3456", want);
	ck_assert_mem_eq(gid, want, 16);
	ck_assert_uint_eq(ibvd_roce_guid(mac), 0x505400fffe123456ull);
}
END_TEST

START_TEST(locally_administered_mac_flips_back)
{
	static const uint8_t veth[6] = { 0x02, 0x11, 0x22, 0x33, 0x44, 0x55 };
	uint8_t gid[16], want[16];

	ibvd_roce_gid0(veth, gid);
	gid_of("fe80::11:22ff:fe33:4455", want);
	ck_assert_mem_eq(gid, want, 16);
}
END_TEST

START_TEST(mtu_fits_headers)
{
	ck_assert_uint_eq(ibvd_roce_mtu(1500), IBV_MTU_1024);
	ck_assert_uint_eq(ibvd_roce_mtu(9000), IBV_MTU_4096);
	ck_assert_uint_eq(ibvd_roce_mtu(4096 + 80), IBV_MTU_4096);
	ck_assert_uint_eq(ibvd_roce_mtu(4096 + 79), IBV_MTU_2048);
	ck_assert_uint_eq(ibvd_roce_mtu(2048 + 80), IBV_MTU_2048);
	ck_assert_uint_eq(ibvd_roce_mtu(1280), IBV_MTU_1024);
	ck_assert_uint_eq(ibvd_roce_mtu(1024 + 79), IBV_MTU_512);
	ck_assert_uint_eq(ibvd_roce_mtu(576), IBV_MTU_256);
	/* an interface too small for any IB MTU still reports the least */
	ck_assert_uint_eq(ibvd_roce_mtu(68), IBV_MTU_256);
	ck_assert_uint_eq(ibvd_roce_mtu(0), IBV_MTU_256);
	ck_assert_uint_eq(ibvd_roce_mtu(65536), IBV_MTU_4096);
}
END_TEST

START_TEST(speed_and_width)
{
	static const struct { unsigned int mbps; uint8_t speed, width; } t[] = {
		{ 0, 1, 1 }, { 100, 1, 1 }, { 1000, 1, 1 }, { 2500, 8, 1 },
		{ 10000, 8, 1 }, { 20000, 2, 2 }, { 25000, 32, 1 },
		{ 40000, 8, 2 }, { 50000, 32, 16 }, { 100000, 32, 2 },
		{ 200000, 64, 2 }, { 400000, 128, 2 },
	};
	uint8_t speed, width;
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		ibvd_roce_speed(t[i].mbps, &speed, &width);
		ck_assert_msg(speed == t[i].speed && width == t[i].width,
			      "%u Mb/s: speed %u width %u, want %u %u", t[i].mbps,
			      speed, width, t[i].speed, t[i].width);
	}
}
END_TEST

START_TEST(cidr_good)
{
	static const struct { const char *in, *out; uint8_t len; } t[] = {
		{ "10.0.0.0/8", "10.0.0.0/8", 104 },
		{ "192.168.1.0/24", "192.168.1.0/24", 120 },
		{ "10.1.2.3", "10.1.2.3/32", 128 },
		{ "0.0.0.0/0", "0.0.0.0/0", 96 },
		{ "fd00::/64", "fd00::/64", 64 },
		{ "fd00:1::5", "fd00:1::5/128", 128 },
		{ "::/0", "::/0", 0 },
		{ "10.0.0.0/08", "10.0.0.0/8", 104 },
	};
	struct ibvd_cidr c;
	char buf[64];
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		ck_assert_msg(ibvd_cidr_parse(t[i].in, &c) == 0, "%s rejected", t[i].in);
		ck_assert_uint_eq(c.prefix_len, t[i].len);
		ck_assert_str_eq(ibvd_cidr_str(&c, buf, sizeof(buf)), t[i].out);
	}
}
END_TEST

START_TEST(cidr_bad)
{
	static const struct { const char *in; int err; } t[] = {
		{ "", -EINVAL }, { "/8", -EINVAL }, { "10.0.0.0/", -EINVAL },
		{ "10.0.0/8", -EINVAL }, { "10.0.0.0/-1", -EINVAL },
		{ "10.0.0.0/+8", -EINVAL }, { "10.0.0.0/8/8", -EINVAL },
		{ "10.0.0.0/1000", -EINVAL }, { "eth0", -EINVAL },
		{ "10.0.0.0 /8", -EINVAL }, { "fd00::/64x", -EINVAL },
		{ "10.0.0.0/33", -ERANGE }, { "fd00::/129", -ERANGE },
		{ "10.0.0.1/8", -EDOM }, { "fd00::1/64", -EDOM },
	};
	struct ibvd_cidr c;
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		ck_assert_msg(ibvd_cidr_parse(t[i].in, &c) == t[i].err,
			      "'%s': %d, want %d", t[i].in, ibvd_cidr_parse(t[i].in, &c),
			      t[i].err);
}
END_TEST

START_TEST(cidr_contains)
{
	struct ibvd_cidr c;
	uint8_t a[16];

	ck_assert_int_eq(ibvd_cidr_parse("10.64.0.0/10", &c), 0);
	gid_of("10.127.255.255", a);
	ck_assert(ibvd_cidr_contains(&c, a));
	gid_of("10.128.0.0", a);
	ck_assert(!ibvd_cidr_contains(&c, a));
	gid_of("::a40:1", a);	/* 10.64.0.1 but not IPv4-mapped */
	ck_assert(!ibvd_cidr_contains(&c, a));
	ck_assert_int_eq(ibvd_cidr_parse("fd00:1::/33", &c), 0);
	gid_of("fd00:1:7fff::1", a);
	ck_assert(ibvd_cidr_contains(&c, a));
	gid_of("fd00:1:8000::1", a);
	ck_assert(!ibvd_cidr_contains(&c, a));
	ck_assert_int_eq(ibvd_cidr_parse("::/0", &c), 0);
	ck_assert(ibvd_cidr_contains(&c, a));
}
END_TEST

/* ---- the GID table ------------------------------------------------------ */

static struct ibvd_roce roce;
static struct ibvd_netdev nd;

static void table_setup(void)
{
	memset(&roce, 0, sizeof(roce));
	roce.gids = calloc(IBVD_ROCE_GID_TBL_LEN, sizeof(*roce.gids));
	ck_assert_ptr_nonnull(roce.gids);
	roce.gid_holds = calloc(IBVD_ROCE_GID_TBL_LEN, sizeof(*roce.gid_holds));
	ck_assert_ptr_nonnull(roce.gid_holds);
	memset(&nd, 0, sizeof(nd));
	strcpy(nd.ifname, "eth0");
	nd.ifindex = 7;
	memcpy(nd.mac, mac, 6);
	nd.mtu = 1500;
	nd.admin_up = nd.up = true;
}

static void table_teardown(void)
{
	free(roce.gids);
	free(roce.gid_holds);
}

/* addrs: "a/len" strings; returns what ibvd_roce_update() says. */
static unsigned int update(const char *const *addrs, size_t n)
{
	struct ibvd_cidr c[8];
	size_t i;

	ck_assert_uint_le(n, 8);
	for (i = 0; i < n; i++) {
		const char *slash = strchr(addrs[i], '/');
		char host[64];

		snprintf(host, sizeof(host), "%.*s", (int)(slash - addrs[i]), addrs[i]);
		gid_of(host, c[i].addr);
		c[i].prefix_len = (uint8_t)atoi(slash + 1);
		if (strchr(host, '.'))
			c[i].prefix_len += 96;
	}
	return ibvd_roce_update(&roce, &nd, c, n);
}

/* The table as "0=fe80::... 1=::ffff:..." for comparisons. */
static const char *table(void)
{
	static char out[1024];
	char g[INET6_ADDRSTRLEN];
	size_t used = 0;
	unsigned int i;

	out[0] = '\0';
	for (i = 0; i < IBVD_ROCE_GID_TBL_LEN; i++) {
		if (ibvd_gid_empty(&roce.gids[i]))
			continue;
		ck_assert_uint_eq(roce.gids[i].type, IBV_GID_TYPE_ROCE_V2);
		used += (size_t)snprintf(out + used, sizeof(out) - used, "%s%u=%s",
					 used ? " " : "", i, gid_text(&roce.gids[i], g));
	}
	return out;
}

START_TEST(table_first_look)
{
	const char *a[] = { "10.0.0.1/24", "fe80::5054:ff:fe12:3456/64",
			    "fd00::1/64" };

	ck_assert_uint_eq(update(a, 3), IBVD_ROCE_GIDS_CHANGED | IBVD_ROCE_PORT_UP);
	/* the link-local address is GID[0] already */
	ck_assert_str_eq(table(), "0=fe80::5054:ff:fe12:3456 1=::ffff:10.0.0.1 2=fd00::1");
	ck_assert_uint_eq(roce.gids[1].prefix_len, 120);
	ck_assert_uint_eq(roce.gids[1].ifindex, 7);
	ck_assert_uint_eq(roce.gids[0].prefix_len, 64);
	/* the same again changes nothing */
	ck_assert_uint_eq(update(a, 3), 0);
}
END_TEST

START_TEST(table_keeps_indexes)
{
	const char *a[] = { "10.0.0.1/24", "10.1.0.1/24", "fd00::1/64" };
	const char *b[] = { "10.1.0.1/24", "fd00::1/64" };
	const char *c[] = { "10.1.0.1/24", "fd00::1/64", "10.2.0.1/16", "10.3.0.1/8" };

	update(a, 3);
	ck_assert_str_eq(table(), "0=fe80::5054:ff:fe12:3456 1=::ffff:10.0.0.1 "
			 "2=::ffff:10.1.0.1 3=fd00::1");
	ck_assert_uint_eq(update(b, 2), IBVD_ROCE_GIDS_CHANGED);
	ck_assert_str_eq(table(), "0=fe80::5054:ff:fe12:3456 2=::ffff:10.1.0.1 3=fd00::1");
	/* the hole is filled first */
	ck_assert_uint_eq(update(c, 4), IBVD_ROCE_GIDS_CHANGED);
	ck_assert_str_eq(table(), "0=fe80::5054:ff:fe12:3456 1=::ffff:10.2.0.1 "
			 "2=::ffff:10.1.0.1 3=fd00::1 4=::ffff:10.3.0.1");
}
END_TEST

/*
 * A slot an AH names is not given to another address when its own goes
 * (the AH would send from that one), only to its own when it comes back;
 * once the last such AH is gone, it is free again.
 */
START_TEST(table_keeps_named_slots)
{
	const char *a[] = { "10.0.0.1/24", "10.1.0.1/24" };
	const char *b[] = { "10.1.0.1/24", "10.2.0.1/24" };
	const char *c[] = { "10.1.0.1/24", "10.2.0.1/24", "10.0.0.1/24" };
	const char *d[] = { "10.1.0.1/24", "10.2.0.1/24", "10.3.0.1/24" };

	update(a, 2);
	roce.gid_holds[1].ahs = 1;		/* an AH from 10.0.0.1 */
	update(b, 2);
	ck_assert_str_eq(table(), "0=fe80::5054:ff:fe12:3456 2=::ffff:10.1.0.1 "
			 "3=::ffff:10.2.0.1");
	update(c, 3);
	ck_assert_str_eq(table(), "0=fe80::5054:ff:fe12:3456 1=::ffff:10.0.0.1 "
			 "2=::ffff:10.1.0.1 3=::ffff:10.2.0.1");
	update(b, 2);
	roce.gid_holds[1].ahs = 0;		/* the AH went */
	update(d, 3);
	ck_assert_str_eq(table(), "0=fe80::5054:ff:fe12:3456 1=::ffff:10.3.0.1 "
			 "2=::ffff:10.1.0.1 3=::ffff:10.2.0.1");
}
END_TEST

START_TEST(table_follows_mac)
{
	const char *a[] = { "10.0.0.1/24" };

	update(a, 1);
	nd.mac[5] = 0x57;
	ck_assert_uint_eq(update(a, 1), IBVD_ROCE_GIDS_CHANGED);
	ck_assert_str_eq(table(), "0=fe80::5054:ff:fe12:3457 1=::ffff:10.0.0.1");
}
END_TEST

START_TEST(link_down_and_up)
{
	const char *a[] = { "10.0.0.1/24" };

	update(a, 1);
	nd.up = false;
	ck_assert_uint_eq(update(a, 1), IBVD_ROCE_PORT_DOWN);
	nd.up = true;
	ck_assert_uint_eq(update(a, 1), IBVD_ROCE_PORT_UP);
	/* a new MTU is no event, only an attribute */
	nd.mtu = 9000;
	ck_assert_uint_eq(update(a, 1), 0);
	ck_assert_uint_eq(roce.netdev.mtu, 9000);
}
END_TEST

START_TEST(interface_gone_and_back)
{
	const char *a[] = { "10.0.0.1/24" };

	update(a, 1);
	nd.ifindex = 0;
	ck_assert_uint_eq(update(a, 1), IBVD_ROCE_GIDS_CHANGED | IBVD_ROCE_PORT_DOWN);
	ck_assert_str_eq(table(), "");
	ck_assert_int_eq(roce.netdev.ifindex, 0);
	/* the port keeps an MTU and a name */
	ck_assert_uint_eq(roce.netdev.mtu, 1500);
	ck_assert_str_eq(roce.netdev.ifname, "eth0");
	nd.ifindex = 9;
	ck_assert_uint_eq(update(a, 1), IBVD_ROCE_GIDS_CHANGED | IBVD_ROCE_PORT_UP);
	ck_assert_str_eq(table(), "0=fe80::5054:ff:fe12:3456 1=::ffff:10.0.0.1");
	ck_assert_uint_eq(roce.gids[1].ifindex, 9);
}
END_TEST

START_TEST(table_full)
{
	struct ibvd_cidr *many;
	unsigned int i, ret;

	many = calloc(IBVD_ROCE_GID_TBL_LEN + 5, sizeof(*many));
	ck_assert_ptr_nonnull(many);
	for (i = 0; i < IBVD_ROCE_GID_TBL_LEN + 5; i++) {
		many[i].addr[0] = 0xfd;
		many[i].addr[14] = (uint8_t)(i >> 8);
		many[i].addr[15] = (uint8_t)i;
		many[i].prefix_len = 128;
	}
	ret = ibvd_roce_update(&roce, &nd, many, IBVD_ROCE_GID_TBL_LEN + 5);
	ck_assert_uint_eq(ret, IBVD_ROCE_GIDS_CHANGED | IBVD_ROCE_PORT_UP |
			  IBVD_ROCE_GIDS_FULL);
	ck_assert(!ibvd_gid_empty(&roce.gids[IBVD_ROCE_GID_TBL_LEN - 1]));
	free(many);
}
END_TEST

START_TEST(peers)
{
	const char *a[] = { "10.0.0.1/24", "fd00::1/64" };
	uint8_t ip[16];

	update(a, 2);
	/* no "peers": the interface's own subnets */
	gid_of("10.0.0.200", ip);
	ck_assert(ibvd_roce_peer_allowed(&roce, ip));
	gid_of("fd00::99", ip);
	ck_assert(ibvd_roce_peer_allowed(&roce, ip));
	gid_of("fe80::1", ip);
	ck_assert(ibvd_roce_peer_allowed(&roce, ip));
	gid_of("10.0.1.1", ip);
	ck_assert(!ibvd_roce_peer_allowed(&roce, ip));
	/* configured peers replace them */
	ck_assert_int_eq(ibvd_cidr_parse("10.9.0.0/16", &roce.peers[0]), 0);
	roce.npeers = 1;
	gid_of("10.9.200.1", ip);
	ck_assert(ibvd_roce_peer_allowed(&roce, ip));
	gid_of("10.0.0.200", ip);
	ck_assert(!ibvd_roce_peer_allowed(&roce, ip));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("roce");
	TCase *rules = tcase_create("rules");
	TCase *tbl = tcase_create("gid table");

	tcase_add_test(rules, default_gid_is_modified_eui64);
	tcase_add_test(rules, locally_administered_mac_flips_back);
	tcase_add_test(rules, mtu_fits_headers);
	tcase_add_test(rules, speed_and_width);
	tcase_add_test(rules, cidr_good);
	tcase_add_test(rules, cidr_bad);
	tcase_add_test(rules, cidr_contains);
	suite_add_tcase(s, rules);
	tcase_add_checked_fixture(tbl, table_setup, table_teardown);
	tcase_add_test(tbl, table_first_look);
	tcase_add_test(tbl, table_keeps_indexes);
	tcase_add_test(tbl, table_keeps_named_slots);
	tcase_add_test(tbl, table_follows_mac);
	tcase_add_test(tbl, link_down_and_up);
	tcase_add_test(tbl, interface_gone_and_back);
	tcase_add_test(tbl, table_full);
	tcase_add_test(tbl, peers);
	suite_add_tcase(s, tbl);
	return check_run(s, CK_NORMAL);
}
