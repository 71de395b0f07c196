/*
 * roce-verbs-helper: what a RoCE device's address vectors and a few verbs
 * around them do, checked against the rules Linux applies to rxe's
 * (roce-device.sh runs it against roce0, on 10.77.0.1/24):
 *
 *   - an address vector needs a GRH; its DLID is ignored (rdma_ah_set_dlid
 *     does nothing on RoCE); source and destination GIDs of different
 *     families are refused (no route between them), an empty source GID
 *     slot with ENODATA;
 *   - a unicast destination's hop limit is the route's (the kernel's
 *     ib_resolve_eth_dmac), what ibv_query_qp shows;
 *   - IBV_QP_RATE_LIMIT is EOPNOTSUPP, as from rdma-core's
 *     ibv_cmd_modify_qp;
 *   - ibv_init_ah_from_wc reads an IPv4 datagram's header as rdma-core
 *     does (TTL and TOS, our GID it was sent to), and refuses one sent to
 *     a group;
 *   - rdma_resolve_route's path record is the kernel's for RoCE
 *     (cma_resolve_iboe_route): the route's hop limit, the ToS, the
 *     ports' flow label, the link's rate, packet lifetime 16 or one below
 *     the ACK timeout asked for, reversible;
 *   - no alternate path (APM is InfiniBand's);
 *   - RC receive completions say IBV_WC_GRH, as rxe's; UD ones say in
 *     their SL how the packet came, as mlx5's;
 *   - a GRH's flow label of any width is taken, as the kernel takes it.
 *
 * usage: roce-verbs-helper DEVICE [send]
 * (send: see send_three.)  Built against the system <infiniband/verbs.h>, run through
 * ibverbsd-run.  Exit status: Check's.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "tests/common/check_run.h"
#include "tests/common/open_device.h"

#define OUR_IPV4	"10.77.0.1"
#define PEER_IPV4	"10.77.0.2"
/* roce-device.sh routes it with a hoplimit metric of METRIC_HOP_LIMIT */
#define METRIC_IPV4	"10.77.0.3"
#define METRIC_HOP_LIMIT 9
/* ... and this one so only from OUR_IPV4 (a policy rule) */
#define SOURCE_RULE_IPV4 "10.77.0.4"
#define SOURCE_RULE_HOP_LIMIT 21
#define UD_QKEY		0x11
/*
 * The route's hop limit: net.ipv4.ip_default_ttl of the daemon's
 * namespace, which roce-device.sh sets (after the daemon started) and
 * passes in $ROCE_VERBS_HOP_LIMIT (not 64, the kernel's default).
 */
static unsigned int route_hop_limit(void)
{
	const char *v = getenv("ROCE_VERBS_HOP_LIMIT");

	return v ? (unsigned int)atoi(v) : 64;
}

static const char *dev_name;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static int v4_index = -1;	/* our IPv4 GID's */

/* addr: one of this file's constants, a valid IPv4 address */
static void v4_gid(const char *addr, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	gid->raw[10] = gid->raw[11] = 0xff;
	inet_pton(AF_INET, addr, gid->raw + 12);
}

/* The device, a PD, a CQ and our IPv4 GID's index; what failed, or NULL. */
static const char *open_all(void)
{
	union ibv_gid want, g;
	int i;

	ctx = open_device_named(dev_name);
	if (!ctx)
		return "no such device";
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!pd || !cq)
		return "ibv_alloc_pd or ibv_create_cq";
	v4_gid(OUR_IPV4, &want);
	for (i = 0; i < 16 && v4_index < 0; i++)
		if (ibv_query_gid(ctx, 1, i, &g) == 0 && !memcmp(g.raw, want.raw, 16))
			v4_index = i;
	return v4_index > 0 ? NULL : "no GID for " OUR_IPV4;
}

static void setup(void)
{
	const char *failed = open_all();

	ck_assert_msg(!failed, "%s: %s", dev_name, failed);
}

static void teardown(void)
{
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ctx = NULL;
	v4_index = -1;
}

/* A vector to the peer's IPv4 GID from ours. */
static struct ibv_ah_attr to_peer(void)
{
	struct ibv_ah_attr a = { .port_num = 1, .is_global = 1 };

	v4_gid(PEER_IPV4, &a.grh.dgid);
	a.grh.sgid_index = (uint8_t)v4_index;
	a.grh.hop_limit = 1;
	return a;
}

static void expect_ah_refused(struct ibv_ah_attr *a, const char *what)
{
	struct ibv_ah *ah;

	errno = 0;
	ah = ibv_create_ah(pd, a);
	ck_assert_msg(!ah, "ibv_create_ah took %s", what);
	ck_assert_msg(errno == EINVAL, "ibv_create_ah of %s: %s, not EINVAL",
		      what, strerror(errno));
}

START_TEST(ah_needs_grh)
{
	struct ibv_ah_attr a = { .port_num = 1, .dlid = 5 };

	expect_ah_refused(&a, "a vector without a GRH");
}
END_TEST

/* An empty slot of the GID table: ENODATA, as rdma_get_gid_attr says. */
START_TEST(ah_empty_gid)
{
	struct ibv_ah_attr a = to_peer();

	a.grh.sgid_index = 200;
	errno = 0;
	ck_assert_ptr_null(ibv_create_ah(pd, &a));
	ck_assert_msg(errno == ENODATA, "ibv_create_ah from an empty GID slot: %s",
		      strerror(errno));
}
END_TEST

START_TEST(ah_dlid_ignored)
{
	static const uint16_t dlids[] = { 0, 5, 0xc001, 0xffff };
	struct ibv_ah_attr a = to_peer();
	struct ibv_ah *ah;
	unsigned int i;

	for (i = 0; i < sizeof(dlids) / sizeof(dlids[0]); i++) {
		a.dlid = dlids[i];
		ah = ibv_create_ah(pd, &a);
		ck_assert_msg(ah, "ibv_create_ah with DLID %#x: %s", dlids[i],
			      strerror(errno));
		ck_assert_int_eq(ibv_destroy_ah(ah), 0);
	}
}
END_TEST

START_TEST(ah_families_differ)
{
	struct ibv_ah_attr a = to_peer();

	/* GID 0 is the interface's IPv6 link-local one */
	a.grh.sgid_index = 0;
	expect_ah_refused(&a, "an IPv6 source and an IPv4 destination");
	a = to_peer();
	inet_pton(AF_INET6, "fd77::2", a.grh.dgid.raw);
	expect_ah_refused(&a, "an IPv4 source and an IPv6 destination");
}
END_TEST

static struct ibv_qp *rc_qp(void)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	ck_assert_msg(qp, "ibv_create_qp: %s", strerror(errno));
	ck_assert_int_eq(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				       IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
	return qp;
}

static int to_rtr(struct ibv_qp *qp, const struct ibv_ah_attr *av)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
		.dest_qp_num = 0x123, .rq_psn = 0, .max_dest_rd_atomic = 1,
		.min_rnr_timer = 12, .ah_attr = *av,
	};

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

/*
 * What the daemon keeps for a RoCE QP's transport, from its RTR on, is
 * charged to the context's ring memory like the QP's rings: a context
 * that fills that budget with QPs at INIT, then lets 8 of them go, moves
 * only a few of the others to RTR; the next is ENOMEM and stays at INIT.  A QP at RTR gone,
 * or reset, gives its share back.
 */
#define WIRE_FREED	8
#define WIRE_QPS_MAX	65536

static struct ibv_qp *wire_qps[WIRE_QPS_MAX];

static struct ibv_qp *mid_sq_qp(void)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 512, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1,
			 .max_inline_data = 64 },
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	if (qp && ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
		ibv_destroy_qp(qp);
		return NULL;
	}
	return qp;
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr q;

	ck_assert_int_eq(ibv_query_qp(qp, &q, IBV_QP_STATE, &ia), 0);
	return q.qp_state;
}

/* Move QPs *at on to RTR until one is refused: it must be for memory. */
static void rtr_till_full(int *at, int n)
{
	struct ibv_ah_attr av = to_peer();
	int ret = 0;

	while (*at < n && (ret = to_rtr(wire_qps[*at], &av)) == 0)
		(*at)++;
	ck_assert_msg(ret == ENOMEM, "%d of %d QPs at RTR, then %s", *at, n,
		      strerror(ret));
	ck_assert_int_eq(qp_state(wire_qps[*at]), IBV_QPS_INIT);
}

START_TEST(wire_state_charged)
{
	struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	struct ibv_ah_attr av = to_peer();
	int n = 0, at_rtr = 0, i;

	while (n < WIRE_QPS_MAX && (wire_qps[n] = mid_sq_qp()))
		n++;
	ck_assert_msg(n < WIRE_QPS_MAX && errno == ENOMEM,
		      "%d QPs, then %s", n, strerror(errno));
	ck_assert_int_gt(n, 2 * WIRE_FREED);
	for (i = 0; i < WIRE_FREED; i++)
		ck_assert_int_eq(ibv_destroy_qp(wire_qps[--n]), 0);
	rtr_till_full(&at_rtr, n);
	ck_assert_int_lt(at_rtr, n / 2);
	/*
	 * The budget is full (less than a QP's transport is left).  A QP at
	 * RTR gone gives back its rings' share and its transport's: a new
	 * one takes both.
	 */
	ck_assert_int_eq(ibv_destroy_qp(wire_qps[0]), 0);
	wire_qps[0] = mid_sq_qp();
	ck_assert_msg(wire_qps[0], "a QP after one gone: %s", strerror(errno));
	ck_assert_int_eq(to_rtr(wire_qps[0], &av), 0);
	/* and a reset that kept its share would fail this */
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(ibv_modify_qp(wire_qps[1], &reset,
					       IBV_QP_STATE), 0);
		ck_assert_int_eq(ibv_modify_qp(wire_qps[1], &init, IBV_QP_STATE |
					       IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					       IBV_QP_ACCESS_FLAGS), 0);
		ck_assert_int_eq(to_rtr(wire_qps[1], &av), 0);
	}
	for (i = 0; i < n; i++)
		ck_assert_int_eq(ibv_destroy_qp(wire_qps[i]), 0);
}
END_TEST

/*
 * An XRC target at RTR, made in one context and held in another through
 * a shared domain: when its maker closes, the holder takes it over with
 * its transport's charge.  Before, the maker kept the charge and the
 * holder gave back what it never had (its count went below zero, and
 * its next ring, a CQ here, was ENOMEM).
 */
static struct ibv_context *another_context(void)
{
	struct ibv_context *c = open_device_named(dev_name);

	ck_assert_msg(c, "a second context: %s", strerror(errno));
	return c;
}

static struct ibv_xrcd *shared_xrcd(struct ibv_context *c, int fd)
{
	struct ibv_xrcd_init_attr a = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = fd, .oflags = O_CREAT,
	};
	struct ibv_xrcd *x = ibv_open_xrcd(c, &a);

	ck_assert_msg(x, "ibv_open_xrcd: %s", strerror(errno));
	return x;
}

START_TEST(xrc_target_moves_with_its_charge)
{
	char path[64];
	struct ibv_context *maker = another_context(), *holder = ctx;
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_XRCD,
	};
	struct ibv_qp_open_attr oa = {
		.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
			     IBV_QP_OPEN_ATTR_TYPE,
		.qp_type = IBV_QPT_XRC_RECV,
	};
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	struct ibv_ah_attr av = to_peer();
	struct ibv_xrcd *xm, *xh;
	struct ibv_qp *made, *held;
	struct ibv_cq *after;
	int fd;

	snprintf(path, sizeof(path), "/tmp/roce-verbs-xrc-%d", (int)getpid());
	fd = open(path, O_RDONLY | O_CREAT, 0444);
	ck_assert_int_ge(fd, 0);
	xm = shared_xrcd(maker, fd);
	xh = shared_xrcd(holder, fd);
	ia.xrcd = xm;
	made = ibv_create_qp_ex(maker, &ia);
	ck_assert_msg(made, "XRC_RECV QP: %s", strerror(errno));
	ck_assert_int_eq(ibv_modify_qp(made, &init, IBV_QP_STATE |
				       IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				       IBV_QP_ACCESS_FLAGS), 0);
	ck_assert_int_eq(to_rtr(made, &av), 0);
	oa.qp_num = made->qp_num;
	oa.xrcd = xh;
	held = ibv_open_qp(holder, &oa);
	ck_assert_msg(held, "ibv_open_qp: %s", strerror(errno));
	/* the maker goes: the holder owns the target, at RTR */
	ck_assert_int_eq(ibv_destroy_qp(made), 0);
	ck_assert_int_eq(ibv_close_xrcd(xm), 0);
	ck_assert_int_eq(ibv_close_device(maker), 0);
	ck_assert_int_eq(qp_state(held), IBV_QPS_RTR);
	ck_assert_int_eq(ibv_destroy_qp(held), 0);
	after = ibv_create_cq(holder, 16, NULL, NULL, 0);
	ck_assert_msg(after, "a CQ after the target went: %s", strerror(errno));
	ck_assert_int_eq(ibv_destroy_cq(after), 0);
	ck_assert_int_eq(ibv_close_xrcd(xh), 0);
	close(fd);
	unlink(path);
}
END_TEST

START_TEST(rtr_address_rules)
{
	struct ibv_qp_init_attr ia;
	struct ibv_ah_attr av = to_peer();
	struct ibv_qp_attr q;
	struct ibv_qp *qp = rc_qp();

	av.is_global = 0;
	av.dlid = 5;
	ck_assert_int_eq(to_rtr(qp, &av), EINVAL);
	av = to_peer();
	av.grh.sgid_index = 0;
	ck_assert_int_eq(to_rtr(qp, &av), EINVAL);
	/* a DLID, even a multicast one, changes nothing on Ethernet */
	av = to_peer();
	av.dlid = 0xc001;
	ck_assert_int_eq(to_rtr(qp, &av), 0);
	ck_assert_int_eq(ibv_query_qp(qp, &q, IBV_QP_AV, &ia), 0);
	ck_assert_uint_eq(q.ah_attr.is_global, 1);
	ck_assert_uint_eq(q.ah_attr.dlid, 0);
	ck_assert_uint_eq(q.ah_attr.grh.sgid_index, (unsigned int)v4_index);
	/* the route's hop limit, not the 1 asked for */
	ck_assert_uint_eq(q.ah_attr.grh.hop_limit, route_hop_limit());
	ck_assert_int_eq(ibv_destroy_qp(qp), 0);
}
END_TEST

/*
 * IPv6, from the link-local GID (index 0): the interface's default,
 * net.ipv6.conf.IF.hop_limit, which roce-device.sh sets after the daemon
 * started and passes in $ROCE_VERBS_HOP_LIMIT6.
 */
START_TEST(rtr_ipv6_hop_limit)
{
	const char *want = getenv("ROCE_VERBS_HOP_LIMIT6");
	struct ibv_qp_init_attr ia;
	struct ibv_ah_attr av = to_peer();
	struct ibv_qp_attr q;
	struct ibv_qp *qp = rc_qp();

	av.grh.sgid_index = 0;
	ck_assert_int_eq(inet_pton(AF_INET6, "fe80::2", av.grh.dgid.raw), 1);
	ck_assert_int_eq(to_rtr(qp, &av), 0);
	ck_assert_int_eq(ibv_query_qp(qp, &q, IBV_QP_AV, &ia), 0);
	ck_assert_uint_eq(q.ah_attr.grh.hop_limit, want ? (unsigned int)atoi(want) : 64);
	ck_assert_int_eq(ibv_destroy_qp(qp), 0);
}
END_TEST

/* A route's hoplimit metric wins over the namespace's default. */
START_TEST(rtr_route_metric)
{
	struct ibv_qp_init_attr ia;
	struct ibv_ah_attr av = to_peer();
	struct ibv_qp_attr q;
	struct ibv_qp *qp = rc_qp();

	v4_gid(METRIC_IPV4, &av.grh.dgid);
	ck_assert_int_eq(to_rtr(qp, &av), 0);
	ck_assert_int_eq(ibv_query_qp(qp, &q, IBV_QP_AV, &ia), 0);
	ck_assert_uint_eq(q.ah_attr.grh.hop_limit, METRIC_HOP_LIMIT);
	ck_assert_int_eq(ibv_destroy_qp(qp), 0);

	/* the route is looked up from the source GID's address */
	qp = rc_qp();
	v4_gid(SOURCE_RULE_IPV4, &av.grh.dgid);
	ck_assert_int_eq(to_rtr(qp, &av), 0);
	ck_assert_int_eq(ibv_query_qp(qp, &q, IBV_QP_AV, &ia), 0);
	ck_assert_uint_eq(q.ah_attr.grh.hop_limit, SOURCE_RULE_HOP_LIMIT);
	ck_assert_int_eq(ibv_destroy_qp(qp), 0);
}
END_TEST

/*
 * ibv_global_route's flow label is 32 bits and the kernel takes any value
 * (UCX passes 0xffffffff); a GRH holds the low 20.
 */
START_TEST(flow_label_any_width)
{
	static const uint32_t labels[] = { 0xfffff, 0x100000, 0xffffffff };
	struct ibv_ah_attr a = to_peer();
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr q;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	unsigned int i;

	for (i = 0; i < sizeof(labels) / sizeof(labels[0]); i++) {
		a.grh.flow_label = labels[i];
		ah = ibv_create_ah(pd, &a);
		ck_assert_msg(ah, "ibv_create_ah with flow label %#x: %s",
			      labels[i], strerror(errno));
		ck_assert_int_eq(ibv_destroy_ah(ah), 0);
	}
	qp = rc_qp();
	ck_assert_int_eq(to_rtr(qp, &a), 0);
	ck_assert_int_eq(ibv_query_qp(qp, &q, IBV_QP_AV, &ia), 0);
	ck_assert_uint_eq(q.ah_attr.grh.flow_label, 0xfffff);
	ck_assert_int_eq(ibv_destroy_qp(qp), 0);
}
END_TEST

START_TEST(rate_limit_unsupported)
{
	struct ibv_qp_attr a = { .rate_limit = 1000, .qp_state = IBV_QPS_INIT };
	struct ibv_qp *qp = rc_qp();

	ck_assert_int_eq(ibv_modify_qp(qp, &a, IBV_QP_RATE_LIMIT), EOPNOTSUPP);
	ck_assert_int_eq(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_RATE_LIMIT),
			 EOPNOTSUPP);
	ck_assert_int_eq(ibv_destroy_qp(qp), 0);
}
END_TEST

/* As the kernel's _ib_modify_qp: no alternate path on RoCE (APM is IB's). */
START_TEST(no_alt_path)
{
	struct ibv_qp_attr a = { .alt_ah_attr = to_peer(), .alt_port_num = 1,
				 .alt_timeout = 14 };
	struct ibv_qp *qp = rc_qp();

	ck_assert_int_eq(to_rtr(qp, &a.alt_ah_attr), 0);
	ck_assert_int_eq(ibv_modify_qp(qp, &a, IBV_QP_ALT_PATH), EINVAL);
	ck_assert_int_eq(ibv_destroy_qp(qp), 0);
}
END_TEST

/* qp to RTS, connected to dest_qpn at our own IPv4 address. */
static void rc_to_self(struct ibv_qp *qp, uint32_t dest_qpn)
{
	struct ibv_ah_attr av = to_peer();
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
		.dest_qp_num = dest_qpn, .max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
	};

	v4_gid(OUR_IPV4, &av.grh.dgid);
	a.ah_attr = av;
	ck_assert_int_eq(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV |
				       IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				       IBV_QP_MIN_RNR_TIMER), 0);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	ck_assert_int_eq(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
				       IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				       IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC), 0);
}

/*
 * An RC receive completion on RoCE says IBV_WC_GRH, as rxe's do (every
 * RoCE packet has its IP header): SENDs with immediate between two QPs of
 * roce0 (the engine carries them: the libraries' direct transport pairs
 * QPs of software devices only).
 */
START_TEST(rc_recv_has_grh)
{
	static char buf[2][64];
	struct ibv_qp *a = rc_qp(), *b = rc_qp();
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_wc wc;
	int i, n, got;

	ck_assert_ptr_nonnull(mr);
	rc_to_self(a, b->qp_num);
	rc_to_self(b, a->qp_num);
	for (i = 0; i < 4; i++) {
		struct ibv_sge rs = { .addr = (uintptr_t)buf[1], .length = 64,
				      .lkey = mr->lkey };
		struct ibv_sge ss = { .addr = (uintptr_t)buf[0], .length = 16,
				      .lkey = mr->lkey };
		struct ibv_recv_wr rwr = { .wr_id = 100 + i, .sg_list = &rs,
					   .num_sge = 1 }, *rbad;
		struct ibv_send_wr swr = { .wr_id = i, .sg_list = &ss, .num_sge = 1,
					   .opcode = IBV_WR_SEND_WITH_IMM,
					   .imm_data = htobe32(0x1234),
					   .send_flags = IBV_SEND_SIGNALED }, *sbad;

		ck_assert_int_eq(ibv_post_recv(b, &rwr, &rbad), 0);
		ck_assert_int_eq(ibv_post_send(a, &swr, &sbad), 0);
		for (got = 0; got < 2;) {
			n = ibv_poll_cq(cq, 1, &wc);
			ck_assert_int_ge(n, 0);
			if (!n)
				continue;
			ck_assert_msg(wc.status == IBV_WC_SUCCESS, "%s",
				      ibv_wc_status_str(wc.status));
			got++;
			if (wc.opcode != IBV_WC_RECV)
				continue;
			ck_assert_uint_eq(wc.wr_id, 100 + i);
			ck_assert_msg(wc.wc_flags & IBV_WC_GRH,
				      "receive %d: no IBV_WC_GRH (flags %#x)", i,
				      wc.wc_flags);
			ck_assert(wc.wc_flags & IBV_WC_WITH_IMM);
		}
	}
	ck_assert_int_eq(ibv_destroy_qp(a), 0);
	ck_assert_int_eq(ibv_destroy_qp(b), 0);
	ck_assert_int_eq(ibv_dereg_mr(mr), 0);
}
END_TEST

/* A received datagram's first 40 bytes over IPv4: 20 zeros, then IPv4. */
static void ipv4_grh(struct ibv_grh *grh, const char *src, const char *dst,
		     uint8_t ttl, uint8_t tos)
{
	uint8_t *ip = (uint8_t *)grh + 20;

	memset(grh, 0, sizeof(*grh));
	ip[0] = 0x45;
	ip[1] = tos;
	ip[8] = ttl;
	ip[9] = 17;
	ck_assert_int_eq(inet_pton(AF_INET, src, ip + 12), 1);
	ck_assert_int_eq(inet_pton(AF_INET, dst, ip + 16), 1);
}

START_TEST(ah_from_ipv4_datagram)
{
	struct ibv_wc wc = { .wc_flags = IBV_WC_GRH, .src_qp = 0x42 };
	struct ibv_ah_attr a;
	union ibv_gid peer;
	struct ibv_grh grh;
	struct ibv_ah *ah;

	ipv4_grh(&grh, PEER_IPV4, OUR_IPV4, 5, 0x20);
	ck_assert_int_eq(ibv_init_ah_from_wc(ctx, 1, &wc, &grh, &a), 0);
	v4_gid(PEER_IPV4, &peer);
	ck_assert_uint_eq(a.is_global, 1);
	ck_assert_msg(!memcmp(a.grh.dgid.raw, peer.raw, 16), "dgid is not the sender's");
	ck_assert_uint_eq(a.grh.sgid_index, (unsigned int)v4_index);
	ck_assert_uint_eq(a.grh.hop_limit, 5);
	ck_assert_uint_eq(a.grh.traffic_class, 0x20);
	ah = ibv_create_ah_from_wc(pd, &wc, &grh, 1);
	ck_assert_msg(ah, "ibv_create_ah_from_wc: %s", strerror(errno));
	ck_assert_int_eq(ibv_destroy_ah(ah), 0);

	/* sent to a group: no GID of ours it came to */
	ipv4_grh(&grh, PEER_IPV4, "239.1.2.3", 5, 0);
	errno = 0;
	ck_assert_int_eq(ibv_init_ah_from_wc(ctx, 1, &wc, &grh, &a), -1);
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(ibv_create_ah_from_wc(pd, &wc, &grh, 1));
	ck_assert_int_eq(errno, EINVAL);
	/* sent to an address that is not ours */
	ipv4_grh(&grh, PEER_IPV4, "10.77.0.99", 5, 0);
	ck_assert_int_eq(ibv_init_ah_from_wc(ctx, 1, &wc, &grh, &a), -1);
	/* an IPv6 header carrying neither UDP nor a BTH, as rdma-core says */
	memset(&grh, 0, sizeof(grh));
	grh.version_tclass_flow = htobe32(6u << 28);
	grh.next_hdr = 6;
	grh.hop_limit = 9;
	inet_pton(AF_INET6, "fe80::1", grh.sgid.raw);
	ck_assert_int_eq(ibv_query_gid(ctx, 1, 0, &grh.dgid), 0);
	errno = 0;
	ck_assert_int_eq(ibv_init_ah_from_wc(ctx, 1, &wc, &grh, &a), -1);
	ck_assert_int_eq(errno, EPROTONOSUPPORT);
	grh.next_hdr = 17;	/* RoCEv2's UDP: our GID 0, its hop limit */
	ck_assert_int_eq(ibv_init_ah_from_wc(ctx, 1, &wc, &grh, &a), 0);
	ck_assert_uint_eq(a.grh.sgid_index, 0);
	ck_assert_uint_eq(a.grh.hop_limit, 9);
}
END_TEST

/* A UD QP on cq and rcq with Q_Key qkey, in RTS; NULL if a step failed. */
static struct ibv_qp *ud_qp(struct ibv_cq *rcq, uint32_t qkey)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = rcq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = 64 },
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qkey = qkey };
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	if (!qp)
		return NULL;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_QKEY))
		goto fail;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		goto fail;
	a.qp_state = IBV_QPS_RTS;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		goto fail;
	return qp;
fail:
	ibv_destroy_qp(qp);
	return NULL;
}

/*
 * One inline UD SEND of len bytes from tx to qpn through ah, completed
 * (tx's send CQ is cq).
 */
static int ud_send(struct ibv_qp *tx, struct ibv_ah *ah, uint32_t qpn,
		   const void *payload, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)payload, .length = len };
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE,
	}, *bad;
	struct ibv_wc wc;
	int n;

	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = UD_QKEY;
	if (ibv_post_send(tx, &wr, &bad))
		return -1;
	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
		;
	return n < 0 || wc.status != IBV_WC_SUCCESS ? -1 : 0;
}

/*
 * A UD receive completion's SL says how the packet came, as a RoCE NIC's
 * (mlx5's) does and UCX's UD transport reads to find the destination in
 * the GRH slot: RoCEv2 over IPv4 0xa, over IPv6 0x9.  Between two UD QPs
 * of roce0, to its IPv4 GID, then to its IPv6 link-local one (GID 0).
 */
START_TEST(ud_recv_packet_type)
{
	static uint8_t buf[128];
	const struct { int gid; uint8_t sl; } ways[] = {
		{ v4_index, 0xa }, { 0, 0x9 },
	};
	struct ibv_cq *rcq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp *tx = ud_qp(cq, UD_QKEY), *rx = ud_qp(rcq, UD_QKEY);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_ah_attr av = to_peer();
	struct ibv_sge rs = { .addr = (uintptr_t)buf, .length = sizeof(buf) };
	struct ibv_recv_wr rwr = { .sg_list = &rs, .num_sge = 1 }, *rbad;
	struct in_addr our;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	unsigned int i;
	int n;

	ck_assert_ptr_nonnull(rcq);
	ck_assert_ptr_nonnull(tx);
	ck_assert_ptr_nonnull(rx);
	ck_assert_ptr_nonnull(mr);
	rs.lkey = mr->lkey;
	inet_pton(AF_INET, OUR_IPV4, &our);
	for (i = 0; i < sizeof(ways) / sizeof(ways[0]); i++) {
		memset(buf, 0, sizeof(buf));
		ck_assert_int_eq(ibv_post_recv(rx, &rwr, &rbad), 0);
		av.grh.sgid_index = (uint8_t)ways[i].gid;
		ck_assert_int_eq(ibv_query_gid(ctx, 1, ways[i].gid, &av.grh.dgid), 0);
		ah = ibv_create_ah(pd, &av);
		ck_assert_msg(ah, "ibv_create_ah to GID %d: %s", ways[i].gid,
			      strerror(errno));
		ck_assert_int_eq(ud_send(tx, ah, rx->qp_num, "sl", 3), 0);
		while ((n = ibv_poll_cq(rcq, 1, &wc)) == 0)
			;
		ck_assert_int_eq(n, 1);
		ck_assert_msg(wc.status == IBV_WC_SUCCESS, "%s",
			      ibv_wc_status_str(wc.status));
		ck_assert_uint_eq(wc.byte_len, 40 + 3);
		ck_assert(wc.wc_flags & IBV_WC_GRH);
		ck_assert_uint_eq(wc.sl, ways[i].sl);
		/* over IPv4, the slot's last 4 bytes: the address it came to */
		if (ways[i].gid == v4_index)
			ck_assert_msg(!memcmp(buf + 36, &our, 4),
				      "GRH slot without " OUR_IPV4);
		ck_assert_int_eq(ibv_destroy_ah(ah), 0);
	}
	ck_assert_int_eq(ibv_destroy_qp(tx), 0);
	ck_assert_int_eq(ibv_destroy_qp(rx), 0);
	ck_assert_int_eq(ibv_destroy_cq(rcq), 0);
	ck_assert_int_eq(ibv_dereg_mr(mr), 0);
}
END_TEST

/*
 * A UD SEND longer than the port's MTU (1024 for roce0's 1500) leaves no
 * packet and no error either (IBTA C10-93.1.1), as rxe and the software
 * devices complete it: whatever its length, above RoCE's largest payload
 * (4096) too.  The QP stays in RTS: a datagram that fits still arrives.
 */
START_TEST(ud_above_port_mtu)
{
	static uint8_t out[8192], in[128];
	static const uint32_t lens[] = { 1025, 4096, 4097, 8192 };
	struct ibv_cq *rcq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_qp *tx = ud_qp(cq, UD_QKEY), *rx = ud_qp(rcq, UD_QKEY);
	struct ibv_mr *omr = ibv_reg_mr(pd, out, sizeof(out), 0);
	struct ibv_mr *imr = ibv_reg_mr(pd, in, sizeof(in), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_ah_attr av = to_peer();
	struct ibv_sge rs = { .addr = (uintptr_t)in, .length = sizeof(in) };
	struct ibv_recv_wr rwr = { .sg_list = &rs, .num_sge = 1 }, *rbad;
	struct ibv_sge ss = { .addr = (uintptr_t)out };
	struct ibv_send_wr wr = {
		.sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	unsigned int i;
	int n;

	ck_assert_ptr_nonnull(rcq);
	ck_assert_ptr_nonnull(tx);
	ck_assert_ptr_nonnull(rx);
	ck_assert_ptr_nonnull(omr);
	ck_assert_ptr_nonnull(imr);
	ss.lkey = omr->lkey;
	rs.lkey = imr->lkey;
	ck_assert_int_eq(ibv_post_recv(rx, &rwr, &rbad), 0);
	av.grh.sgid_index = (uint8_t)v4_index;
	ck_assert_int_eq(ibv_query_gid(ctx, 1, v4_index, &av.grh.dgid), 0);
	ah = ibv_create_ah(pd, &av);
	ck_assert_msg(ah, "ibv_create_ah: %s", strerror(errno));
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = rx->qp_num;
	wr.wr.ud.remote_qkey = UD_QKEY;
	for (i = 0; i <= sizeof(lens) / sizeof(lens[0]); i++) {
		/* the last one fits */
		ss.length = i < sizeof(lens) / sizeof(lens[0]) ? lens[i] : 16;
		ck_assert_int_eq(ibv_post_send(tx, &wr, &bad), 0);
		while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
			;
		ck_assert_int_eq(n, 1);
		ck_assert_msg(wc.status == IBV_WC_SUCCESS, "a UD SEND of %u bytes: %s",
			      ss.length, ibv_wc_status_str(wc.status));
	}
	while ((n = ibv_poll_cq(rcq, 1, &wc)) == 0)
		;
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(wc.status, IBV_WC_SUCCESS);
	ck_assert_uint_eq(wc.byte_len, 40 + 16);
	ck_assert_int_eq(ibv_destroy_ah(ah), 0);
	ck_assert_int_eq(ibv_destroy_qp(tx), 0);
	ck_assert_int_eq(ibv_destroy_qp(rx), 0);
	ck_assert_int_eq(ibv_destroy_cq(rcq), 0);
	ck_assert_int_eq(ibv_dereg_mr(omr), 0);
	ck_assert_int_eq(ibv_dereg_mr(imr), 0);
}
END_TEST

/*
 * `send`: UD datagrams (to QPN 0x123) with hop limit 1 to PEER_IPV4 and
 * to METRIC_IPV4, then one to the group 239.1.2.5 with hop limit 3, for
 * roce-device.sh to read their TTLs on the wire: the namespace's, the
 * route's metric, then the AH's.
 */
static int send_three(void)
{
	struct ibv_ah_attr av[3] = { to_peer(), to_peer(), to_peer() };
	static char payload[32] = "roce-verbs";
	struct ibv_ah *ah[3] = { NULL, NULL, NULL };
	struct ibv_qp *qp = ud_qp(cq, UD_QKEY);
	int i, ret = 1;

	if (!qp)
		return 1;
	v4_gid(METRIC_IPV4, &av[1].grh.dgid);
	v4_gid("239.1.2.5", &av[2].grh.dgid);
	av[2].grh.hop_limit = 3;
	for (i = 0; i < 3; i++) {
		ah[i] = ibv_create_ah(pd, &av[i]);
		if (!ah[i] || ud_send(qp, ah[i], i == 2 ? 0xFFFFFF : 0x123,
				      payload, sizeof(payload)))
			goto out;
	}
	printf("sent 3\n");
	ret = 0;
out:
	for (i = 0; i < 3; i++)
		if (ah[i])
			ibv_destroy_ah(ah[i]);
	ibv_destroy_qp(qp);
	return ret;
}

/* A synchronous id resolved from OUR_IPV4 to peer:7471. */
static struct rdma_cm_id *resolved_id(const char *peer, uint8_t tos,
				      uint8_t ack_timeout)
{
	struct sockaddr_in src = { .sin_family = AF_INET };
	struct sockaddr_in dst = { .sin_family = AF_INET,
				   .sin_port = htons(7471) };
	struct rdma_cm_id *id;

	inet_pton(AF_INET, OUR_IPV4, &src.sin_addr);
	inet_pton(AF_INET, peer, &dst.sin_addr);
	ck_assert_int_eq(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
	ck_assert_int_eq(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS,
					 &tos, sizeof(tos)), 0);
	if (ack_timeout)
		ck_assert_int_eq(rdma_set_option(id, RDMA_OPTION_ID,
						 RDMA_OPTION_ID_ACK_TIMEOUT,
						 &ack_timeout, sizeof(ack_timeout)), 0);
	ck_assert_msg(rdma_resolve_addr(id, (struct sockaddr *)&src,
					(struct sockaddr *)&dst, 2000) == 0,
		      "rdma_resolve_addr: %s", strerror(errno));
	ck_assert_msg(rdma_resolve_route(id, 2000) == 0, "rdma_resolve_route: %s",
		      strerror(errno));
	ck_assert_int_eq(id->route.num_paths, 1);
	ck_assert_ptr_nonnull(id->route.path_rec);
	return id;
}

START_TEST(cm_path_record)
{
	struct rdma_cm_id *id = resolved_id(PEER_IPV4, 32, 0);
	const struct ibv_sa_path_rec *p = id->route.path_rec;
	uint32_t label = ((uint32_t)be16toh(rdma_get_src_port(id)) * 31 + 7471) &
			 0xFFFFF;
	union ibv_gid peer;

	v4_gid(PEER_IPV4, &peer);
	ck_assert_msg(!memcmp(p->dgid.raw, peer.raw, 16), "dgid is not the peer's");
	ck_assert_uint_eq(p->hop_limit, route_hop_limit());
	ck_assert_uint_eq(p->traffic_class, 32);
	ck_assert_uint_eq(be32toh(p->flow_label), label);
	/* a veth says 10000 Mb/s */
	ck_assert_uint_eq(p->rate, IBV_RATE_10_GBPS);
	ck_assert_uint_eq(p->packet_life_time, 16);
	ck_assert_int_eq(p->reversible, 1);
	ck_assert_int_eq(rdma_destroy_id(id), 0);

	id = resolved_id(METRIC_IPV4, 0, 0);
	ck_assert_uint_eq(id->route.path_rec->hop_limit, METRIC_HOP_LIMIT);
	ck_assert_int_eq(rdma_destroy_id(id), 0);

	id = resolved_id(PEER_IPV4, 0, 14);
	ck_assert_uint_eq(id->route.path_rec->packet_life_time, 13);
	ck_assert_uint_eq(id->route.path_rec->traffic_class, 0);
	ck_assert_int_eq(rdma_destroy_id(id), 0);
}
END_TEST

int main(int argc, char **argv)
{
	TCase *tc;
	Suite *s;
	int failed;

	if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "send"))) {
		fprintf(stderr, "usage: roce-verbs-helper DEVICE [send]\n");
		return 2;
	}
	dev_name = argv[1];
	if (argc == 3) {
		const char *why = open_all();

		if (why) {
			fprintf(stderr, "%s: %s\n", dev_name, why);
			return 1;
		}
		failed = send_three();
		teardown();
		return failed;
	}
	s = suite_create("roce-verbs");
	tc = tcase_create("roce");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, ah_needs_grh);
	tcase_add_test(tc, ah_empty_gid);
	tcase_add_test(tc, ah_dlid_ignored);
	tcase_add_test(tc, ah_families_differ);
	tcase_add_test(tc, rtr_address_rules);
	tcase_add_test(tc, rtr_route_metric);
	tcase_add_test(tc, rtr_ipv6_hop_limit);
	tcase_add_test(tc, flow_label_any_width);
	tcase_add_test(tc, rate_limit_unsupported);
	tcase_add_test(tc, no_alt_path);
	tcase_add_test(tc, rc_recv_has_grh);
	tcase_add_test(tc, ah_from_ipv4_datagram);
	tcase_add_test(tc, ud_recv_packet_type);
	tcase_add_test(tc, ud_above_port_mtu);
	tcase_add_test(tc, cm_path_record);
	tcase_add_test(tc, wire_state_charged);
	tcase_add_test(tc, xrc_target_moves_with_its_charge);
	suite_add_tcase(s, tc);
	return check_run(s, CK_VERBOSE);
}
