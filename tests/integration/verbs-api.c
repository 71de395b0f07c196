/*
 * verbs-api-helper: every libibverbs entry point implemented so far,
 * exercised against a real daemon (verbs-api.sh).
 *
 * Built like any application, against the system <infiniband/verbs.h> and
 * -libverbs; the test runs it through ibverbsd-run so it loads our library.
 * The daemon must have the configuration verbs-api.sh writes:
 *	ibvd0: 1 port, LID 1
 *	ibvd1: 2 ports, LIDs 10 and 11
 *
 * usage: verbs-api-helper			the API suite
 *	  verbs-api-helper death READY_FILE	open both devices, create
 *		READY_FILE, then expect the daemon to be killed
 */
#include "config.h"

#include <check.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "tests/common/check_run.h"

/* IBVERBS_PRIVATE_34: no installed header declares it (pyverbs uses it). */
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
		       unsigned int index, int *type);
/* IBVERBS_1.0, declared by rdma-core's uninstalled driver.h (ibv_devinfo). */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
			size_t size);

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

/* Debian 44's layout, which our library must match (abi.md §2.3). */
#define VERBS_CONTEXT_SIZE	648
_Static_assert(sizeof(struct verbs_context) == VERBS_CONTEXT_SIZE,
	       "verbs_context size");
_Static_assert(offsetof(struct verbs_context, context) == 320,
	       "verbs_context.context offset");
_Static_assert(sizeof(struct ibv_port_attr) == 52, "ibv_port_attr size");
_Static_assert(sizeof(struct ibv_device_attr_ex) == 400, "ibv_device_attr_ex size");

/* The exported ibv_query_port writes the 48-byte pre-1.5 struct. */
#define COMPAT_PORT_ATTR_SIZE	48

#define CANARY		0xa5
#define PKEY_DEFAULT	0xffff
/* Every call that fails because the daemon is gone must fail this fast. */
#define PROMPT_MS	1000

/* ---- the configuration verbs-api.sh gives the daemon -------------------- */

struct expected_device {
	const char *name;
	unsigned int nports;
};

static const struct expected_device devices[] = {
	{ "ibvd0", 1 },
	{ "ibvd1", 2 },
};

struct expected_port {
	const char *dev;
	unsigned int nports;
	uint8_t port;
	uint16_t lid;
};

static const struct expected_port ports[] = {
	{ "ibvd0", 1, 1, 1 },
	{ "ibvd1", 2, 1, 10 },
	{ "ibvd1", 2, 2, 11 },
};

/* ---- helpers -------------------------------------------------------------- */

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static struct ibv_device *find_device(struct ibv_device **list,
				      const char *name)
{
	size_t i;

	for (i = 0; list[i]; i++)
		if (strcmp(ibv_get_device_name(list[i]), name) == 0)
			return list[i];
	return NULL;
}

/* Open NAME; the device list is freed at once (the context holds it). */
static struct ibv_context *open_device(const char *name)
{
	struct ibv_device **list, *dev;
	struct ibv_context *ctx;

	list = ibv_get_device_list(NULL);
	ck_assert_msg(list, "ibv_get_device_list: %s", strerror(errno));
	dev = find_device(list, name);
	ck_assert_msg(dev, "no device %s", name);
	ctx = ibv_open_device(dev);
	ck_assert_msg(ctx, "ibv_open_device(%s): %s", name, strerror(errno));
	ibv_free_device_list(list);
	return ctx;
}

static void close_device(struct ibv_context *ctx)
{
	ck_assert_int_eq(ibv_close_device(ctx), 0);
}

/* Bytes [from, to) of buf all equal c. */
static void assert_bytes(const void *buf, size_t from, size_t to, int c,
			 const char *what)
{
	const unsigned char *p = buf;
	size_t i;

	for (i = from; i < to; i++)
		ck_assert_msg(p[i] == (unsigned char)c,
			      "%s: byte %zu is 0x%02x, want 0x%02x",
			      what, i, p[i], (unsigned char)c);
}

static int gid_is_zero(const union ibv_gid *gid)
{
	static const union ibv_gid zero;

	return memcmp(gid, &zero, sizeof(zero)) == 0;
}

/* ::ffff:127.0.0.1, the IPv4-mapped GID of the loopback address. */
static void loopback_gid(union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	gid->raw[10] = 0xff;
	gid->raw[11] = 0xff;
	gid->raw[12] = 127;
	gid->raw[15] = 1;
}

static int port_gid_tbl_len(struct ibv_context *ctx, uint8_t port)
{
	struct ibv_port_attr attr;

	ck_assert_int_eq(ibv_query_port(ctx, port, &attr), 0);
	ck_assert_int_ge(attr.gid_tbl_len, 1);
	return attr.gid_tbl_len;
}

/* The context still answers queries. */
static void assert_usable(struct ibv_context *ctx, uint8_t port)
{
	struct ibv_port_attr attr;

	ck_assert_int_eq(ibv_query_port(ctx, port, &attr), 0);
	ck_assert_int_eq(attr.state, IBV_PORT_ACTIVE);
}

/*
 * The non-empty entries of one port's GID table, read one index at a time
 * with ibv_query_gid_ex (which must agree with ibv_query_gid); stored in
 * out (if not NULL), counted in the return value.
 */
static int port_gid_entries(struct ibv_context *ctx, uint8_t port,
			    struct ibv_gid_entry *out, int max)
{
	int len = port_gid_tbl_len(ctx, port), idx, n = 0;

	for (idx = 0; idx < len; idx++) {
		struct ibv_gid_entry e;
		union ibv_gid gid;
		int ret;

		memset(&e, CANARY, sizeof(e));
		ret = ibv_query_gid_ex(ctx, port, (uint32_t)idx, &e, 0);
		ck_assert_int_eq(ibv_query_gid(ctx, port, idx, &gid), 0);
		if (ret == ENODATA) {
			ck_assert_msg(gid_is_zero(&gid),
				      "port %u GID[%d]: ENODATA from ibv_query_gid_ex but ibv_query_gid has a GID",
				      port, idx);
			continue;
		}
		ck_assert_msg(ret == 0, "port %u GID[%d]: ibv_query_gid_ex: %d",
			      port, idx, ret);
		ck_assert_msg(!gid_is_zero(&e.gid), "port %u GID[%d] is zero",
			      port, idx);
		ck_assert_mem_eq(&e.gid, &gid, sizeof(gid));
		ck_assert_uint_eq(e.gid_index, (uint32_t)idx);
		ck_assert_uint_eq(e.port_num, port);
		ck_assert_uint_eq(e.gid_type, IBV_GID_TYPE_IB);
		if (out) {
			ck_assert_int_lt(n, max);
			out[n] = e;
		}
		n++;
	}
	return n;
}

/* ---- devices ------------------------------------------------------------ */

START_TEST(device_list)
{
	struct ibv_device **l1, **l2, **l3;
	int n1 = -1, i, j;

	l1 = ibv_get_device_list(&n1);
	ck_assert_msg(l1, "ibv_get_device_list: %s", strerror(errno));
	ck_assert_int_eq(n1, (int)ARRAY_SIZE(devices));
	ck_assert_ptr_null(l1[n1]);

	/* num_devices may be NULL. */
	l2 = ibv_get_device_list(NULL);
	ck_assert_ptr_nonnull(l2);
	for (i = 0; i < n1; i++) {
		ck_assert_ptr_nonnull(l1[i]);
		/* The same daemon device is the same struct ibv_device. */
		ck_assert_ptr_eq(l1[i], l2[i]);
		for (j = 0; j < i; j++)
			ck_assert_ptr_ne(l1[i], l1[j]);
	}
	ck_assert_ptr_null(l2[n1]);

	for (i = 0; i < (int)ARRAY_SIZE(devices); i++) {
		struct ibv_device *dev = find_device(l1, devices[i].name);

		ck_assert_msg(dev, "%s not listed", devices[i].name);
		ck_assert_str_eq(ibv_get_device_name(dev), devices[i].name);
		/* The name apps read directly (pyverbs) is the same. */
		ck_assert_ptr_eq(ibv_get_device_name(dev), dev->name);
		ck_assert_int_eq(dev->node_type, IBV_NODE_CA);
		ck_assert_int_eq(dev->transport_type, IBV_TRANSPORT_IB);
		ck_assert_ptr_nonnull(strstr(dev->ibdev_path, devices[i].name));
	}

	/* A freed list does not invalidate the devices of a later one. */
	ibv_free_device_list(l1);
	l3 = ibv_get_device_list(&n1);
	ck_assert_ptr_nonnull(l3);
	ck_assert_int_eq(n1, (int)ARRAY_SIZE(devices));
	for (i = 0; i < n1; i++)
		ck_assert_ptr_eq(l3[i], l2[i]);
	ibv_free_device_list(l2);
	ibv_free_device_list(l3);
}
END_TEST

START_TEST(device_guid_index)
{
	struct ibv_device **list;
	__be64 guid[ARRAY_SIZE(devices)];
	int index[ARRAY_SIZE(devices)];
	size_t i;

	list = ibv_get_device_list(NULL);
	ck_assert_ptr_nonnull(list);
	for (i = 0; i < ARRAY_SIZE(devices); i++) {
		struct ibv_device *dev = find_device(list, devices[i].name);
		struct ibv_device_attr attr;
		struct ibv_context *ctx;
		unsigned char raw[8];

		ck_assert_ptr_nonnull(dev);
		guid[i] = ibv_get_device_guid(dev);
		ck_assert_uint_ne(guid[i], 0);
		/*
		 * Network byte order: a derived GUID is a locally administered
		 * unicast EUI-64, flagged in its first (most significant) octet.
		 */
		memcpy(raw, &guid[i], sizeof(raw));
		ck_assert_msg((raw[0] & 0x03) == 0x02,
			      "%s: GUID %016llx: first octet 0x%02x is not a local unicast EUI-64 octet (byte order?)",
			      devices[i].name,
			      (unsigned long long)be64toh(guid[i]), raw[0]);

		ctx = ibv_open_device(dev);
		ck_assert_ptr_nonnull(ctx);
		ck_assert_int_eq(ibv_query_device(ctx, &attr), 0);
		ck_assert_uint_eq(attr.node_guid, guid[i]);
		close_device(ctx);

		index[i] = ibv_get_device_index(dev);
		ck_assert_int_ge(index[i], 0);
	}
	ck_assert_uint_ne(guid[0], guid[1]);
	ck_assert_int_ne(index[0], index[1]);
	ibv_free_device_list(list);
}
END_TEST

/* A device stays valid while a context is open, whatever lists are freed. */
START_TEST(device_outlives_list)
{
	struct ibv_device **list, *dev;
	struct ibv_device_attr attr;
	struct ibv_context *ctx;
	__be64 guid;
	int i;

	list = ibv_get_device_list(NULL);
	ck_assert_ptr_nonnull(list);
	dev = find_device(list, "ibvd1");
	ck_assert_ptr_nonnull(dev);
	guid = ibv_get_device_guid(dev);
	ctx = ibv_open_device(dev);
	ck_assert_ptr_nonnull(ctx);
	ibv_free_device_list(list);
	for (i = 0; i < 3; i++) {
		list = ibv_get_device_list(NULL);
		ck_assert_ptr_nonnull(list);
		ibv_free_device_list(list);
	}

	ck_assert_ptr_eq(ctx->device, dev);
	ck_assert_str_eq(ibv_get_device_name(ctx->device), "ibvd1");
	ck_assert_uint_eq(ibv_get_device_guid(ctx->device), guid);
	ck_assert_int_ge(ibv_get_device_index(ctx->device), 0);
	ck_assert_int_eq(ibv_query_device(ctx, &attr), 0);
	ck_assert_uint_eq(attr.phys_port_cnt, 2);
	ck_assert_uint_eq(attr.node_guid, guid);
	close_device(ctx);
}
END_TEST

/* ---- contexts ----------------------------------------------------------- */

START_TEST(context_layout)
{
	const struct expected_device *want = &devices[_i];
	struct ibv_context *ctx = open_device(want->name), *ctx2;
	struct verbs_context *vctx;
	size_t sz;

	ck_assert_str_eq(ibv_get_device_name(ctx->device), want->name);
	ck_assert_ptr_eq(ctx->abi_compat, (void *)UINTPTR_MAX);
	vctx = verbs_get_ctx(ctx);
	ck_assert_ptr_nonnull(vctx);
	ck_assert_ptr_eq(&vctx->context, ctx);
	/* The size_t right before the context is verbs_context.sz. */
	memcpy(&sz, (const char *)ctx - sizeof(sz), sizeof(sz));
	ck_assert_uint_eq(sz, VERBS_CONTEXT_SIZE);
	ck_assert_uint_eq(vctx->sz, VERBS_CONTEXT_SIZE);

	ck_assert_int_ge(ctx->num_comp_vectors, 1);
	ck_assert_int_ge(ctx->async_fd, 0);
	ck_assert_int_ge(ctx->cmd_fd, 0);
	ck_assert_int_ne(ctx->async_fd, ctx->cmd_fd);
	ck_assert_int_ge(fcntl(ctx->async_fd, F_GETFD), 0);
	ck_assert_int_ge(fcntl(ctx->cmd_fd, F_GETFD), 0);

	/* Ops the header inlines call without a NULL check. */
	ck_assert_ptr_nonnull(ctx->ops.post_send);
	ck_assert_ptr_nonnull(ctx->ops.post_recv);
	ck_assert_ptr_nonnull(ctx->ops.post_srq_recv);
	ck_assert_ptr_nonnull(ctx->ops.poll_cq);
	ck_assert_ptr_nonnull(ctx->ops.req_notify_cq);
	ck_assert_ptr_nonnull(ctx->ops.bind_mw);
	ck_assert_ptr_nonnull(ctx->ops.dealloc_mw);
	ck_assert_ptr_nonnull(vctx->close_xrcd);
	/* The implemented extended ops are reachable through the size rule. */
	ck_assert_ptr_eq(verbs_get_ctx_op(ctx, query_port), vctx);
	ck_assert_ptr_eq(verbs_get_ctx_op(ctx, query_device_ex), vctx);
	ck_assert_ptr_eq(verbs_get_ctx_op(ctx, create_cq_ex), vctx);
	ck_assert_ptr_nonnull(ctx->ops._compat_query_port);
	ck_assert_ptr_nonnull(ctx->ops._compat_query_device);

	/* A second context on the same device is a separate one. */
	ctx2 = ibv_open_device(ctx->device);
	ck_assert_ptr_nonnull(ctx2);
	ck_assert_ptr_ne(ctx2, ctx);
	ck_assert_ptr_eq(ctx2->device, ctx->device);
	ck_assert_int_ne(ctx2->async_fd, ctx->async_fd);
	ck_assert_int_ne(ctx2->cmd_fd, ctx->cmd_fd);
	close_device(ctx2);
	close_device(ctx);
}
END_TEST

/*
 * Memory windows: allocation is a round trip, binding a work request the
 * data-path tests exercise ("mw" group of datapath.c).  (XRC domains, whose
 * close op the header inline calls without a NULL check, are xrc.c's.)
 */
/*
 * A controlled Q_Key (high bit set, as the GSI's 0x80010000) is root's
 * only: modify_qp refuses it with EPERM, as the kernel does without
 * CAP_NET_RAW, and the QP is left as it was.  Any other key goes.
 */
START_TEST(controlled_qkey)
{
	struct ibv_context *ctx = open_device("ibvd0");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				    .qkey = 0x80010000u };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
	struct ibv_qp_init_attr got_init;
	struct ibv_qp *qp;

	ck_assert_ptr_nonnull(pd);
	ck_assert_ptr_nonnull(cq);
	qp = ibv_create_qp(pd, &init);
	ck_assert_ptr_nonnull(qp);
	ck_assert_int_eq(ibv_modify_qp(qp, &attr, mask), geteuid() ? EPERM : 0);
	if (geteuid()) {
		ck_assert_int_eq(ibv_query_qp(qp, &attr, IBV_QP_STATE, &got_init), 0);
		ck_assert_int_eq(attr.qp_state, IBV_QPS_RESET);
	}
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_INIT;
	attr.port_num = 1;
	attr.qkey = 0x7fffffffu;
	ck_assert_int_eq(ibv_modify_qp(qp, &attr, geteuid() ? mask : IBV_QP_QKEY), 0);
	ck_assert_int_eq(ibv_query_qp(qp, &attr, IBV_QP_QKEY, &got_init), 0);
	ck_assert_uint_eq(attr.qkey, 0x7fffffffu);
	ck_assert_int_eq(ibv_destroy_qp(qp), 0);
	ck_assert_int_eq(ibv_destroy_cq(cq), 0);
	ck_assert_int_eq(ibv_dealloc_pd(pd), 0);
	ck_assert_int_eq(ibv_close_device(ctx), 0);
}
END_TEST

/*
 * ibv_query_qp takes the attributes before IBV_QP_RATE_LIMIT only, as
 * rdma-core's ibv_cmd_query_qp (EOPNOTSUPP from every kernel provider,
 * rxe's too): ibv_modify_qp already says so.
 */
START_TEST(query_qp_mask)
{
	struct ibv_context *ctx = open_device("ibvd0");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_init_attr got_init;
	struct ibv_qp_attr attr;
	struct ibv_qp *qp;

	ck_assert_ptr_nonnull(pd);
	ck_assert_ptr_nonnull(cq);
	qp = ibv_create_qp(pd, &init);
	ck_assert_ptr_nonnull(qp);
	ck_assert_int_eq(ibv_query_qp(qp, &attr, IBV_QP_RATE_LIMIT, &got_init),
			 EOPNOTSUPP);
	ck_assert_int_eq(ibv_query_qp(qp, &attr, ~0, &got_init), EOPNOTSUPP);
	ck_assert_int_eq(ibv_query_qp(qp, &attr, IBV_QP_RATE_LIMIT - 1,
				      &got_init), 0);
	ck_assert_int_eq(attr.qp_state, IBV_QPS_RESET);
	ck_assert_int_eq(ibv_destroy_qp(qp), 0);
	ck_assert_int_eq(ibv_destroy_cq(cq), 0);
	ck_assert_int_eq(ibv_dealloc_pd(pd), 0);
	ck_assert_int_eq(ibv_close_device(ctx), 0);
}
END_TEST

/*
 * ibv_modify_qp takes the attributes up to IBV_QP_DEST_QPN only, as
 * rdma-core's ibv_cmd_modify_qp: a bit past it, named (RATE_LIMIT) or
 * not (1 << 21 to 1 << 24, the kernel's own), is EOPNOTSUPP, not a bad
 * transition's EINVAL, and the QP stays where it was.
 */
START_TEST(modify_qp_mask)
{
	struct ibv_context *ctx = open_device("ibvd0");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		   IBV_QP_ACCESS_FLAGS;
	struct ibv_qp_init_attr got_init;
	struct ibv_qp *qp;
	int bit;

	ck_assert_ptr_nonnull(pd);
	ck_assert_ptr_nonnull(cq);
	qp = ibv_create_qp(pd, &init);
	ck_assert_ptr_nonnull(qp);
	for (bit = 21; bit <= 25; bit++)
		ck_assert_msg(ibv_modify_qp(qp, &attr, mask | 1 << bit) == EOPNOTSUPP,
			      "modify_qp with mask bit %d", bit);
	ck_assert_int_eq(ibv_query_qp(qp, &attr, IBV_QP_STATE, &got_init), 0);
	ck_assert_int_eq(attr.qp_state, IBV_QPS_RESET);
	/* the last of the old ones is a transition's to refuse */
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_INIT;
	attr.port_num = 1;
	ck_assert_int_eq(ibv_modify_qp(qp, &attr, mask | IBV_QP_DEST_QPN), EINVAL);
	ck_assert_int_eq(ibv_modify_qp(qp, &attr, mask), 0);
	ck_assert_int_eq(ibv_destroy_qp(qp), 0);
	ck_assert_int_eq(ibv_destroy_cq(cq), 0);
	ck_assert_int_eq(ibv_dealloc_pd(pd), 0);
	ck_assert_int_eq(ibv_close_device(ctx), 0);
}
END_TEST

START_TEST(unsupported_ops)
{
	struct ibv_context *ctx = open_device("ibvd0");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mw *mw1, *mw2;

	ck_assert_ptr_nonnull(ctx->ops.post_send);
	ck_assert_ptr_nonnull(ctx->ops.post_recv);
	ck_assert_ptr_nonnull(ctx->ops.post_srq_recv);
	ck_assert_ptr_nonnull(ctx->ops.poll_cq);
	ck_assert_ptr_nonnull(ctx->ops.req_notify_cq);
	ck_assert_ptr_nonnull(pd);

	mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	ck_assert_ptr_nonnull(mw1);
	ck_assert_ptr_nonnull(mw2);
	ck_assert_int_eq(mw1->type, IBV_MW_TYPE_1);
	ck_assert_ptr_eq(mw2->pd, pd);
	ck_assert_uint_ne(mw1->rkey >> 8, mw2->rkey >> 8);
	errno = 0;
	ck_assert_ptr_null(ibv_alloc_mw(pd, (enum ibv_mw_type)7));
	ck_assert_int_eq(errno, EINVAL);
	/* A PD with windows is in use. */
	ck_assert_int_eq(ibv_dealloc_pd(pd), EBUSY);
	ck_assert_int_eq(ibv_dealloc_mw(mw1), 0);
	ck_assert_int_eq(ibv_dealloc_mw(mw2), 0);
	ck_assert_int_eq(ibv_dealloc_pd(pd), 0);

	/* The context is unharmed. */
	assert_usable(ctx, 1);
	close_device(ctx);
}
END_TEST

#define ASSERT_NULL_EOPNOTSUPP(call) do {				\
		errno = 0;						\
		ck_assert_msg((call) == NULL, "%s: not NULL", #call);	\
		ck_assert_msg(errno == EOPNOTSUPP, "%s: errno %d (%s)",	\
			      #call, errno, strerror(errno));		\
	} while (0)

#define ASSERT_EOPNOTSUPP(call) do {					\
		int ret_ = (call);					\
		ck_assert_msg(ret_ == EOPNOTSUPP, "%s returned %d",	\
			      #call, ret_);				\
	} while (0)

/* Extended verbs without an op: their header inlines say EOPNOTSUPP. */
START_TEST(extended_ops_unsupported)
{
	struct ibv_context *ctx = open_device("ibvd1");
	struct ibv_pd pd = { .context = ctx };
	struct ibv_qp qp = { .context = ctx, .pd = &pd, .qp_type = IBV_QPT_RC };
	struct ibv_srq srq = { .context = ctx, .pd = &pd };
	struct ibv_cq cq = { .context = ctx };
	struct ibv_flow flow = { .context = ctx };
	struct ibv_flow_action action = { .context = ctx };
	struct ibv_wq wq = { .context = ctx };
	struct ibv_rwq_ind_table ind = { .context = ctx };
	struct ibv_counters counters = { .context = ctx };
	struct ibv_xrcd_init_attr xrcd_attr = { 0 };
	/* Has an op, but our CQEs carry no timestamp (datapath.c cq_ex_attrs). */
	struct ibv_cq_init_attr_ex cq_attr = {
		.cqe = 16,
		.wc_flags = IBV_WC_EX_WITH_FLOW_TAG,
	};
	struct ibv_modify_cq_attr modify_cq = { 0 };
	/* Tag matching: not something our SRQs do (XRC is, xrc.c). */
	struct ibv_srq_init_attr_ex srq_attr = {
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD,
		.srq_type = IBV_SRQT_TM,
		.pd = &pd,
	};
	/* An RSS QP: receive hashing is not something our devices do. */
	struct ibv_qp_init_attr_ex qp_attr = {
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_IND_TABLE |
			     IBV_QP_INIT_ATTR_RX_HASH,
		.pd = &pd,
		.qp_type = IBV_QPT_RAW_PACKET,
	};
	/* Our libraries' private bit (common/cm_qp.h) on an ordinary struct. */
	struct ibv_qp_init_attr_ex cm_bit = {
		.comp_mask = IBV_QP_INIT_ATTR_PD | (1u << 31),
		.pd = &pd,
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp_open_attr open_attr = { 0 };
	struct ibv_flow_attr flow_attr = { .size = sizeof(flow_attr) };
	struct ibv_flow_action_esp_attr esp = { 0 };
	struct ibv_wq_init_attr wq_attr = { .wq_type = IBV_WQT_RQ, .pd = &pd, .cq = &cq };
	struct ibv_wq_attr wq_mod = { 0 };
	struct ibv_rwq_ind_table_init_attr ind_attr = { 0 };
	struct ibv_counters_init_attr counters_attr = { 0 };
	struct ibv_counter_attach_attr attach = { 0 };
	struct ibv_qp_rate_limit_attr rate = { 0 };
	struct ibv_ops_wr op = { 0 }, *bad_op = NULL;
	uint64_t counter_values[1];

	/* XRC has ops now: without the attributes they need, EINVAL. */
	errno = 0;
	ck_assert_ptr_null(ibv_open_xrcd(ctx, &xrcd_attr));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(ibv_open_qp(ctx, &open_attr));
	ck_assert_int_eq(errno, EINVAL);
	ASSERT_NULL_EOPNOTSUPP(ibv_create_cq_ex(ctx, &cq_attr));
	ASSERT_EOPNOTSUPP(ibv_modify_cq(&cq, &modify_cq));
	ASSERT_NULL_EOPNOTSUPP(ibv_create_srq_ex(ctx, &srq_attr));
	ASSERT_EOPNOTSUPP(ibv_post_srq_ops(&srq, &op, &bad_op));
	ck_assert_ptr_eq(bad_op, &op);
	ASSERT_NULL_EOPNOTSUPP(ibv_create_qp_ex(ctx, &qp_attr));
	ASSERT_NULL_EOPNOTSUPP(ibv_create_qp_ex(ctx, &cm_bit));
	ASSERT_EOPNOTSUPP(ibv_modify_qp_rate_limit(&qp, &rate));
	ASSERT_NULL_EOPNOTSUPP(ibv_create_flow(&qp, &flow_attr));
	ASSERT_EOPNOTSUPP(ibv_destroy_flow(&flow));
	ASSERT_NULL_EOPNOTSUPP(ibv_create_flow_action_esp(ctx, &esp));
	ASSERT_EOPNOTSUPP(ibv_modify_flow_action_esp(&action, &esp));
	ASSERT_EOPNOTSUPP(ibv_destroy_flow_action(&action));
	ASSERT_NULL_EOPNOTSUPP(ibv_create_wq(ctx, &wq_attr));
	ASSERT_EOPNOTSUPP(ibv_modify_wq(&wq, &wq_mod));
	ASSERT_EOPNOTSUPP(ibv_destroy_wq(&wq));
	ASSERT_NULL_EOPNOTSUPP(ibv_create_rwq_ind_table(ctx, &ind_attr));
	ASSERT_EOPNOTSUPP(ibv_destroy_rwq_ind_table(&ind));
	ASSERT_NULL_EOPNOTSUPP(ibv_alloc_null_mr(&pd));
	ASSERT_NULL_EOPNOTSUPP(ibv_create_counters(ctx, &counters_attr));
	ASSERT_EOPNOTSUPP(ibv_destroy_counters(&counters));
	ASSERT_EOPNOTSUPP(ibv_attach_counters_point_flow(&counters, &attach, &flow));
	ASSERT_EOPNOTSUPP(ibv_read_counters(&counters, counter_values, 1, 0));

	assert_usable(ctx, 2);
	close_device(ctx);
}
END_TEST

/* ---- device queries ----------------------------------------------------- */

START_TEST(query_device)
{
	const struct expected_device *want = &devices[_i];
	struct ibv_context *ctx = open_device(want->name);
	struct ibv_device_attr a;

	memset(&a, CANARY, sizeof(a));
	ck_assert_int_eq(ibv_query_device(ctx, &a), 0);
	ck_assert_uint_eq(a.phys_port_cnt, want->nports);
	ck_assert_uint_eq(a.vendor_id, 0xffffff);
	ck_assert_uint_eq(a.vendor_part_id, 0);
	ck_assert_uint_eq(a.node_guid, ibv_get_device_guid(ctx->device));
	ck_assert_ptr_nonnull(memchr(a.fw_ver, '\0', sizeof(a.fw_ver)));
	ck_assert_uint_gt(strlen(a.fw_ver), 0);
	ck_assert_int_gt(a.max_qp, 0);
	ck_assert_int_gt(a.max_qp_wr, 0);
	ck_assert_int_ge(a.max_sge, 1);
	ck_assert_int_gt(a.max_cq, 0);
	ck_assert_int_gt(a.max_cqe, 0);
	ck_assert_int_gt(a.max_mr, 0);
	ck_assert_int_gt(a.max_pd, 0);
	ck_assert_uint_gt(a.max_mr_size, 0);
	ck_assert_uint_ne(a.page_size_cap & 4096, 0);
	ck_assert_int_ge(a.max_qp_rd_atom, 1);
	ck_assert_int_ge(a.max_qp_init_rd_atom, 1);
	ck_assert_int_ge(a.max_pkeys, 1);
	ck_assert_int_le(a.local_ca_ack_delay, 31);
	close_device(ctx);
}
END_TEST

/* A fresh context makes a CQ of max_cqe entries, and resizes one to it. */
START_TEST(cq_of_max_cqe)
{
	struct ibv_context *ctx = open_device(devices[0].name);
	struct ibv_device_attr a;
	struct ibv_cq *cq;

	ck_assert_int_eq(ibv_query_device(ctx, &a), 0);
	ck_assert_ptr_null(ibv_create_cq(ctx, a.max_cqe + 1, NULL, NULL, 0));
	ck_assert_int_eq(errno, EINVAL);
	cq = ibv_create_cq(ctx, a.max_cqe, NULL, NULL, 0);
	ck_assert_msg(cq, "ibv_create_cq(max_cqe %d): %s", a.max_cqe,
		      strerror(errno));
	ck_assert_int_ge(cq->cqe, a.max_cqe);
	ck_assert_int_eq(ibv_destroy_cq(cq), 0);
	cq = ibv_create_cq(ctx, 1, NULL, NULL, 0);
	ck_assert_ptr_nonnull(cq);
	/* a budget below 0 polls nothing (rxe's and mlx5's loops) */
	ck_assert_int_eq(ibv_poll_cq(cq, -1, NULL), 0);
	ck_assert_int_eq(ibv_resize_cq(cq, a.max_cqe), 0);
	ck_assert_int_eq(ibv_destroy_cq(cq), 0);
	close_device(ctx);
}
END_TEST

START_TEST(query_device_ex)
{
	const struct expected_device *want = &devices[_i];
	struct ibv_context *ctx = open_device(want->name);
	struct verbs_context *vctx = verbs_get_ctx(ctx);
	struct ibv_query_device_ex_input in = { .comp_mask = 1 };
	struct ibv_device_attr_ex ex, full;
	struct ibv_device_attr a;
	/* An attr with room past its end, for callers of other sizes. */
	union {
		struct ibv_device_attr_ex attr;
		unsigned char b[sizeof(struct ibv_device_attr_ex) + 64];
	} u;
	static const size_t sizes[] = {
		sizeof(struct ibv_device_attr),		/* orig_attr only */
		offsetof(struct ibv_device_attr_ex, odp_caps),
		sizeof(struct ibv_device_attr_ex) - 1,
		sizeof(struct ibv_device_attr_ex),
		sizeof(struct ibv_device_attr_ex) + 16,	/* newer headers */
	};
	size_t i;

	ck_assert_int_eq(ibv_query_device(ctx, &a), 0);
	memset(&ex, CANARY, sizeof(ex));
	ck_assert_int_eq(ibv_query_device_ex(ctx, NULL, &ex), 0);
	ck_assert_uint_eq(ex.orig_attr.node_guid, a.node_guid);
	ck_assert_uint_eq(ex.orig_attr.sys_image_guid, a.sys_image_guid);
	ck_assert_str_eq(ex.orig_attr.fw_ver, a.fw_ver);
	ck_assert_int_eq(ex.orig_attr.max_qp, a.max_qp);
	ck_assert_int_eq(ex.orig_attr.max_qp_rd_atom, a.max_qp_rd_atom);
	ck_assert_uint_eq(ex.orig_attr.vendor_id, a.vendor_id);
	ck_assert_uint_eq(ex.orig_attr.device_cap_flags, a.device_cap_flags);
	ck_assert_uint_eq(ex.orig_attr.phys_port_cnt, want->nports);
	ck_assert_uint_eq(ex.phys_port_cnt_ex, want->nports);
	ck_assert_uint_eq(ex.comp_mask, 0);
	/* CQEs carry a 64-bit timestamp in ns (1,000,000 kHz). */
	ck_assert_uint_eq(ex.completion_timestamp_mask, UINT64_MAX);
	ck_assert_uint_eq(ex.hca_core_clock, 1000000);
	/* The extended flags include the legacy ones. */
	ck_assert_uint_eq(ex.device_cap_flags_ex & a.device_cap_flags,
			  a.device_cap_flags);

	/* Unknown input comp_mask bits: EINVAL, from the inline and the op. */
	ck_assert_int_eq(ibv_query_device_ex(ctx, &in, &ex), EINVAL);
	ck_assert_int_eq(vctx->query_device_ex(ctx, &in, &ex, sizeof(ex)), EINVAL);
	in.comp_mask = 0;
	ck_assert_int_eq(ibv_query_device_ex(ctx, &in, &ex), 0);

	/* The op writes exactly attr_size bytes: a prefix of the full answer. */
	memset(&full, CANARY, sizeof(full));
	ck_assert_int_eq(vctx->query_device_ex(ctx, NULL, &full, sizeof(full)), 0);
	ck_assert_uint_eq(full.orig_attr.node_guid, a.node_guid);
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		size_t size = sizes[i], common;

		memset(&u, CANARY, sizeof(u));
		ck_assert_int_eq(vctx->query_device_ex(ctx, NULL, &u.attr, size), 0);
		common = size < sizeof(full) ? size : sizeof(full);
		ck_assert_mem_eq(u.b, &full, common);
		assert_bytes(u.b, common, size, 0, "query_device_ex tail");
		assert_bytes(u.b, size, sizeof(u), CANARY, "past attr_size");
	}
	/* Too small for even the legacy attributes: refused, nothing written. */
	memset(&u, CANARY, sizeof(u));
	ck_assert_int_eq(vctx->query_device_ex(ctx, NULL, &u.attr, 100), EINVAL);
	assert_bytes(u.b, 0, sizeof(u), CANARY, "refused query_device_ex");
	close_device(ctx);
}
END_TEST

/* ---- ports (through the macro, i.e. the verbs_context op) -------------- */

START_TEST(query_port)
{
	const struct expected_port *want = &ports[_i];
	struct ibv_context *ctx = open_device(want->dev);
	struct verbs_context *vctx = verbs_get_ctx(ctx);
	struct ibv_port_attr p, full;
	union {
		struct ibv_port_attr attr;
		unsigned char b[sizeof(struct ibv_port_attr) + 32];
	} u;
	static const size_t sizes[] = {
		40, COMPAT_PORT_ATTR_SIZE, sizeof(struct ibv_port_attr),
		sizeof(struct ibv_port_attr) + 4,	/* rdma-core >= 50 headers */
	};
	size_t i;

	memset(&p, CANARY, sizeof(p));
	ck_assert_int_eq(ibv_query_port(ctx, want->port, &p), 0);
	ck_assert_int_eq(p.state, IBV_PORT_ACTIVE);
	ck_assert_uint_eq(p.link_layer, IBV_LINK_LAYER_INFINIBAND);
	ck_assert_uint_eq(p.lid, want->lid);
	ck_assert_int_ge(p.active_mtu, IBV_MTU_256);
	ck_assert_int_le(p.active_mtu, p.max_mtu);
	ck_assert_int_le(p.max_mtu, IBV_MTU_4096);
	ck_assert_int_ge(p.gid_tbl_len, 1);
	ck_assert_uint_ge(p.pkey_tbl_len, 1);
	ck_assert_uint_gt(p.max_msg_sz, 0);
	ck_assert_uint_eq(p.lmc, 0);
	ck_assert_uint_eq(p.phys_state, 5);	/* LinkUp */

	/* Ports that do not exist. */
	ck_assert_int_ne(ibv_query_port(ctx, 0, &p), 0);
	ck_assert_int_ne(ibv_query_port(ctx, (uint8_t)(want->nports + 1), &p), 0);
	ck_assert_int_ne(ibv_query_port(ctx, 255, &p), 0);

	/* The op writes exactly attr_len bytes, zero past what it knows. */
	memset(&full, CANARY, sizeof(full));
	ck_assert_int_eq(vctx->query_port(ctx, want->port, &full, sizeof(full)), 0);
	ck_assert_uint_eq(full.lid, want->lid);
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		size_t size = sizes[i], common;

		memset(&u, CANARY, sizeof(u));
		ck_assert_int_eq(vctx->query_port(ctx, want->port, &u.attr, size), 0);
		common = size < sizeof(full) ? size : sizeof(full);
		ck_assert_mem_eq(u.b, &full, common);
		assert_bytes(u.b, common, size, 0, "query_port tail");
		assert_bytes(u.b, size, sizeof(u), CANARY, "past attr_len");
	}
	close_device(ctx);
}
END_TEST

/* ---- GIDs ---------------------------------------------------------------- */

START_TEST(query_gid)
{
	const struct expected_port *want = &ports[_i];
	struct ibv_context *ctx = open_device(want->dev);
	struct ibv_device_attr attr;
	union ibv_gid gid, lo, any;
	uint64_t node_guid, port_guid;
	int len, idx, found_lo = 0, empty = 0;

	ck_assert_int_eq(ibv_query_device(ctx, &attr), 0);
	node_guid = be64toh(attr.node_guid);
	/* ibverbsd.conf(5): the GUID of port p is the node GUID + p - 1. */
	port_guid = node_guid + want->port - 1;

	memset(&gid, CANARY, sizeof(gid));
	ck_assert_int_eq(ibv_query_gid(ctx, want->port, 0, &gid), 0);
	ck_assert_uint_eq(be64toh(gid.global.subnet_prefix), 0xfe80000000000000ull);
	ck_assert_msg(be64toh(gid.global.interface_id) == port_guid,
		      "%s port %u: GID[0] interface id %016llx, want %016llx",
		      want->dev, want->port,
		      (unsigned long long)be64toh(gid.global.interface_id),
		      (unsigned long long)port_guid);
	if (want->port == 1)	/* the same bytes as the device GUID */
		ck_assert_mem_eq(gid.raw + 8, &attr.node_guid, 8);

	/* The IP-derived GIDs include the loopback address. */
	loopback_gid(&lo);
	len = port_gid_tbl_len(ctx, want->port);
	for (idx = 0; idx < len; idx++) {
		memset(&any, CANARY, sizeof(any));
		ck_assert_int_eq(ibv_query_gid(ctx, want->port, idx, &any), 0);
		if (memcmp(&any, &lo, sizeof(lo)) == 0)
			found_lo++;
		if (gid_is_zero(&any))
			empty++;
	}
	ck_assert_msg(found_lo == 1, "%s port %u: ::ffff:127.0.0.1 found %d times",
		      want->dev, want->port, found_lo);
	if (!empty)
		fprintf(stderr, "note: %s port %u: all %d GIDs in use, no empty slot\n",
			want->dev, want->port, len);

	/* Outside the table, or no such port: -1. */
	ck_assert_int_eq(ibv_query_gid(ctx, want->port, len, &gid), -1);
	ck_assert_int_eq(ibv_query_gid(ctx, want->port, -1, &gid), -1);
	ck_assert_int_eq(ibv_query_gid(ctx, 0, 0, &gid), -1);
	ck_assert_int_eq(ibv_query_gid(ctx, (uint8_t)(want->nports + 1), 0, &gid), -1);
	close_device(ctx);
}
END_TEST

START_TEST(query_gid_ex)
{
	const struct expected_port *want = &ports[_i];
	struct ibv_context *ctx = open_device(want->dev);
	struct ibv_gid_entry e, entries[64];
	union ibv_gid gid0, lo;
	int len, n, i, found_lo = 0;

	ck_assert_int_eq(ibv_query_gid(ctx, want->port, 0, &gid0), 0);
	memset(&e, CANARY, sizeof(e));
	ck_assert_int_eq(ibv_query_gid_ex(ctx, want->port, 0, &e, 0), 0);
	ck_assert_mem_eq(&e.gid, &gid0, sizeof(gid0));
	ck_assert_uint_eq(e.gid_index, 0);
	ck_assert_uint_eq(e.port_num, want->port);
	ck_assert_uint_eq(e.gid_type, IBV_GID_TYPE_IB);
	ck_assert_uint_eq(e.ndev_ifindex, 0);

	/* Every index: an entry or ENODATA, in agreement with ibv_query_gid. */
	len = port_gid_tbl_len(ctx, want->port);
	n = port_gid_entries(ctx, want->port, entries, (int)ARRAY_SIZE(entries));
	ck_assert_int_ge(n, 2);		/* GID[0] and ::ffff:127.0.0.1 */
	ck_assert_int_le(n, len);
	loopback_gid(&lo);
	for (i = 0; i < n; i++)
		if (memcmp(&entries[i].gid, &lo, sizeof(lo)) == 0) {
			found_lo++;
			ck_assert_uint_eq(entries[i].ndev_ifindex, if_nametoindex("lo"));
		}
	ck_assert_int_eq(found_lo, 1);
	if (n < len) {
		/* The daemon packs its entries: the slots after them are empty. */
		memset(&e, CANARY, sizeof(e));
		ck_assert_int_eq(ibv_query_gid_ex(ctx, want->port, (uint32_t)n, &e, 0), ENODATA);
		ck_assert_int_eq(ibv_query_gid_ex(ctx, want->port, (uint32_t)len - 1, &e, 0), ENODATA);
	}

	ck_assert_int_eq(ibv_query_gid_ex(ctx, want->port, (uint32_t)len, &e, 0), EINVAL);
	ck_assert_int_eq(ibv_query_gid_ex(ctx, want->port, UINT32_MAX, &e, 0), EINVAL);
	/* a flag: EINVAL from the kernel's ioctl, as rxe answers */
	ck_assert_int_eq(ibv_query_gid_ex(ctx, want->port, 0, &e, 1), EINVAL);
	ck_assert_int_eq(ibv_query_gid_ex(ctx, 0, 0, &e, 0), EINVAL);
	ck_assert_int_eq(ibv_query_gid_ex(ctx, want->nports + 1, 0, &e, 0), EINVAL);
	close_device(ctx);
}
END_TEST

START_TEST(query_gid_table)
{
	const struct expected_device *want = &devices[_i];
	struct ibv_context *ctx = open_device(want->name);
	struct ibv_gid_entry expect[64], got[64 + 4];
	ssize_t n;
	int total = 0, i;
	uint8_t port;

	for (port = 1; port <= want->nports; port++)
		total += port_gid_entries(ctx, port, expect + total,
					  (int)ARRAY_SIZE(expect) - total);
	ck_assert_int_ge(total, 2 * (int)want->nports);

	memset(got, CANARY, sizeof(got));
	n = ibv_query_gid_table(ctx, got, ARRAY_SIZE(got), 0);
	ck_assert_int_eq(n, total);
	for (i = 0; i < total; i++)
		ck_assert_msg(memcmp(&got[i], &expect[i], sizeof(got[i])) == 0,
			      "%s: table entry %d (port %u index %u) differs from ibv_query_gid_ex's (port %u index %u)",
			      want->name, i, got[i].port_num, got[i].gid_index,
			      expect[i].port_num, expect[i].gid_index);
	assert_bytes(got, (size_t)total * sizeof(got[0]), sizeof(got), CANARY,
		     "past the entries returned");

	/* Exactly enough room works; one short fails as a whole. */
	ck_assert_int_eq(ibv_query_gid_table(ctx, got, (size_t)total, 0), total);
	ck_assert_int_lt(ibv_query_gid_table(ctx, got, (size_t)total - 1, 0), 0);
	ck_assert_int_eq(ibv_query_gid_table(ctx, got, ARRAY_SIZE(got), 1), -EINVAL);
	close_device(ctx);
}
END_TEST

START_TEST(query_gid_type)
{
	const struct expected_port *want = &ports[_i];
	struct ibv_context *ctx = open_device(want->dev);
	int len = port_gid_tbl_len(ctx, want->port), idx, type;

	for (idx = 0; idx < len; idx++) {
		type = -1;
		ck_assert_int_eq(ibv_query_gid_type(ctx, want->port, (unsigned int)idx, &type), 0);
		ck_assert_int_eq(type, 0);	/* IB / RoCE v1 */
	}
	ck_assert_int_eq(ibv_query_gid_type(ctx, want->port, (unsigned int)len, &type), -1);
	ck_assert_int_eq(ibv_query_gid_type(ctx, 0, 0, &type), -1);
	close_device(ctx);
}
END_TEST

/* ---- P_Keys ------------------------------------------------------------- */

START_TEST(query_pkey)
{
	const struct expected_port *want = &ports[_i];
	struct ibv_context *ctx = open_device(want->dev);
	struct ibv_port_attr p;
	__be16 pkey;

	ck_assert_int_eq(ibv_query_port(ctx, want->port, &p), 0);
	pkey = 0;
	ck_assert_int_eq(ibv_query_pkey(ctx, want->port, 0, &pkey), 0);
	ck_assert_uint_eq(pkey, htobe16(PKEY_DEFAULT));

	/* no sysfs file ports/N/pkeys/I to read: ENOENT, as rdma-core says */
	errno = 0;
	ck_assert_int_eq(ibv_query_pkey(ctx, want->port, p.pkey_tbl_len, &pkey), -1);
	ck_assert_int_eq(errno, ENOENT);
	errno = 0;
	ck_assert_int_eq(ibv_query_pkey(ctx, want->port, -1, &pkey), -1);
	ck_assert_int_eq(errno, ENOENT);
	errno = 0;
	ck_assert_int_eq(ibv_query_pkey(ctx, 0, 0, &pkey), -1);
	ck_assert_int_eq(errno, ENOENT);
	errno = 0;
	ck_assert_int_eq(ibv_query_pkey(ctx, (uint8_t)(want->nports + 1), 0, &pkey), -1);
	ck_assert_int_eq(errno, ENOENT);

	ck_assert_int_eq(ibv_get_pkey_index(ctx, want->port, htobe16(PKEY_DEFAULT)), 0);
	ck_assert_int_eq(ibv_get_pkey_index(ctx, want->port, htobe16(0x7fff)), -1);
	ck_assert_int_eq(ibv_get_pkey_index(ctx, want->port, htobe16(0x8001)), -1);
	ck_assert_int_eq(ibv_get_pkey_index(ctx, (uint8_t)(want->nports + 1),
					    htobe16(PKEY_DEFAULT)), -1);
	close_device(ctx);
}
END_TEST

/* ---- async events ------------------------------------------------------- */

START_TEST(async_nonblocking)
{
	struct ibv_context *ctx = open_device("ibvd0");
	struct ibv_async_event ev;
	int flags = fcntl(ctx->async_fd, F_GETFL);
	long t0;

	ck_assert_int_ge(flags, 0);
	ck_assert_int_eq(fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK), 0);
	t0 = now_ms();
	errno = 0;
	ck_assert_int_eq(ibv_get_async_event(ctx, &ev), -1);
	ck_assert_int_eq(errno, EAGAIN);
	ck_assert_int_lt(now_ms() - t0, PROMPT_MS);
	/* Again: nothing was consumed or broken. */
	errno = 0;
	ck_assert_int_eq(ibv_get_async_event(ctx, &ev), -1);
	ck_assert_int_eq(errno, EAGAIN);
	ck_assert_int_eq(fcntl(ctx->async_fd, F_SETFL, flags), 0);
	assert_usable(ctx, 1);
	close_device(ctx);
}
END_TEST

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	if (sig == SIGALRM)
		alarms++;
}

/* A QP of an SRQ, moved to ERR by a thread after a while: LAST_WQE_REACHED. */
struct later_event {
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	pthread_t thread;
};

static void *raise_later(void *arg)
{
	struct later_event *l = arg;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	usleep(400 * 1000);
	if (ibv_modify_qp(l->qp, &a, IBV_QP_STATE))
		abort();
	return NULL;
}

static void later_event_start(struct ibv_context *ctx, struct later_event *l)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_qp_init_attr qa;
	struct ibv_qp_attr a;

	l->pd = ibv_alloc_pd(ctx);
	ck_assert_ptr_nonnull(l->pd);
	l->cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	ck_assert_ptr_nonnull(l->cq);
	l->srq = ibv_create_srq(l->pd, &sa);
	ck_assert_ptr_nonnull(l->srq);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = l->cq;
	qa.srq = l->srq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_send_sge = 1;
	l->qp = ibv_create_qp(l->pd, &qa);
	ck_assert_ptr_nonnull(l->qp);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	ck_assert_int_eq(ibv_modify_qp(l->qp, &a, IBV_QP_STATE |
				       IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				       IBV_QP_ACCESS_FLAGS), 0);
	ck_assert_int_eq(pthread_create(&l->thread, NULL, raise_later, l), 0);
}

static void later_event_free(struct later_event *l)
{
	ck_assert_int_eq(pthread_join(l->thread, NULL), 0);
	ck_assert_int_eq(ibv_destroy_qp(l->qp), 0);
	ck_assert_int_eq(ibv_destroy_srq(l->srq), 0);
	ck_assert_int_eq(ibv_destroy_cq(l->cq), 0);
	ck_assert_int_eq(ibv_dealloc_pd(l->pd), 0);
}

/*
 * A signal at 200 ms while ibv_get_async_event waits, as a blocking read
 * of rdma-core's event file would take it: a handler without SA_RESTART
 * (qperf's) ends the wait with EINTR; with SA_RESTART (loop 1) the wait
 * goes on, to the event another thread raises at 400 ms.
 */
START_TEST(async_eintr)
{
	struct ibv_context *ctx = open_device("ibvd1");
	struct sigaction sa, old_sa;
	struct itimerval it = { .it_value = { .tv_usec = 200000 } }, off = { 0 };
	struct ibv_async_event ev;
	struct later_event l;
	long t0, ms;
	int ret, err;

	if (_i)
		later_event_start(ctx, &l);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = _i ? SA_RESTART : 0;
	sigemptyset(&sa.sa_mask);
	ck_assert_int_eq(sigaction(SIGALRM, &sa, &old_sa), 0);
	alarms = 0;
	t0 = now_ms();
	ck_assert_int_eq(setitimer(ITIMER_REAL, &it, NULL), 0);
	errno = 0;
	ret = ibv_get_async_event(ctx, &ev);
	err = errno;
	ms = now_ms() - t0;
	setitimer(ITIMER_REAL, &off, NULL);
	sigaction(SIGALRM, &old_sa, NULL);

	ck_assert_int_eq(alarms, 1);
	if (_i) {
		ck_assert_msg(ret == 0, "under SA_RESTART: %s", strerror(err));
		ck_assert_int_eq(ev.event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
		ck_assert_ptr_eq(ev.element.qp, l.qp);
		ibv_ack_async_event(&ev);
		ck_assert_int_ge(ms, 350);
		later_event_free(&l);
	} else {
		ck_assert_int_eq(ret, -1);
		ck_assert_int_eq(err, EINTR);
		ck_assert_int_ge(ms, 150);
		ck_assert_int_lt(ms, 150 + PROMPT_MS);
	}
	/* The context still works. */
	assert_usable(ctx, 2);
	close_device(ctx);
}
END_TEST

/* ---- process-wide helpers ----------------------------------------------- */

START_TEST(fork_init)
{
	/*
	 * Ours (fork.c): UNNEEDED, as rdma-core says on kernels that copy
	 * pinned pages at fork, whatever the environment asks.
	 */
	ck_assert_int_eq(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
	setenv("RDMAV_FORK_SAFE", "1", 1);
	ck_assert_int_eq(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
	unsetenv("RDMAV_FORK_SAFE");
	ck_assert_int_eq(ibv_fork_init(), 0);
	ck_assert_int_eq(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
}
END_TEST

START_TEST(read_sysfs_file)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	char buf[64];
	int i, n;

	ck_assert_ptr_nonnull(list);
	for (i = 0; list[i]; i++) {
		memset(buf, CANARY, sizeof(buf));
		ck_assert_int_eq(ibv_read_sysfs_file(list[i]->ibdev_path, "board_id",
						     buf, sizeof(buf)), -1);
	}
	ibv_free_device_list(list);
	/* A genuine sysfs attribute still reads, without its newline. */
	if (access("/sys/devices/system/cpu/online", R_OK) == 0) {
		n = ibv_read_sysfs_file("/sys/devices/system/cpu", "online",
					buf, sizeof(buf));
		ck_assert_int_gt(n, 0);
		ck_assert_uint_eq(strlen(buf), (size_t)n);
		ck_assert_int_ne(buf[n - 1], '\n');
	}
}
END_TEST

START_TEST(no_daemon)
{
	const char *sock = getenv("IBVERBSD_SOCKET");
	struct ibv_device **list;
	char *saved, path[256];
	int n = -7;

	ck_assert_msg(sock && *sock, "IBVERBSD_SOCKET is not set");
	saved = strdup(sock);
	ck_assert_ptr_nonnull(saved);
	ck_assert_int_lt(snprintf(path, sizeof(path), "%s.nonexistent", sock),
			 (int)sizeof(path));
	setenv("IBVERBSD_SOCKET", path, 1);
	errno = 0;
	ck_assert_ptr_null(ibv_get_device_list(&n));
	ck_assert_int_eq(errno, ENOSYS);
	setenv("IBVERBSD_SOCKET", saved, 1);
	free(saved);
	/* The real daemon is found again afterwards. */
	list = ibv_get_device_list(&n);
	ck_assert_ptr_nonnull(list);
	ck_assert_int_eq(n, (int)ARRAY_SIZE(devices));
	ibv_free_device_list(list);
}
END_TEST

/* ---- the daemon dies under open contexts (verbs-api.sh kills it) ------- */

static const char *ready_file;

/* Every query of a context whose daemon is gone fails, promptly. */
static void assert_queries_fail(struct ibv_context *ctx, const char *what)
{
	struct ibv_device_attr_ex ex;
	struct ibv_device_attr attr;
	struct ibv_port_attr port;
	struct ibv_gid_entry entries[4];
	union ibv_gid gid;
	__be16 pkey;
	int type;
	long t0 = now_ms(), ms;

	ck_assert_int_ne(ibv_query_device(ctx, &attr), 0);
	ms = now_ms() - t0;
	ck_assert_msg(ms < PROMPT_MS, "%s: ibv_query_device took %ld ms", what, ms);
	ck_assert_int_ne(ibv_query_device_ex(ctx, NULL, &ex), 0);
	ck_assert_int_ne(ibv_query_port(ctx, 1, &port), 0);
	ck_assert_int_eq(ibv_query_gid(ctx, 1, 0, &gid), -1);
	ck_assert_int_ne(ibv_query_gid_ex(ctx, 1, 0, &entries[0], 0), 0);
	ck_assert_int_lt(ibv_query_gid_table(ctx, entries, ARRAY_SIZE(entries), 0), 0);
	ck_assert_int_eq(ibv_query_gid_type(ctx, 1, 0, &type), -1);
	ck_assert_int_eq(ibv_query_pkey(ctx, 1, 0, &pkey), -1);
	ck_assert_int_eq(ibv_get_pkey_index(ctx, 1, htobe16(PKEY_DEFAULT)), -1);
	ms = now_ms() - t0;
	ck_assert_msg(ms < PROMPT_MS, "%s: the failing queries took %ld ms", what, ms);
}

/* After the one fatal event, only EIO, blocking or not, and at once. */
static void assert_eio_after_fatal(struct ibv_context *ctx)
{
	struct ibv_async_event ev;
	int flags;
	long t0 = now_ms();

	errno = 0;
	ck_assert_int_eq(ibv_get_async_event(ctx, &ev), -1);
	ck_assert_int_eq(errno, EIO);
	flags = fcntl(ctx->async_fd, F_GETFL);
	ck_assert_int_ge(flags, 0);
	ck_assert_int_eq(fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK), 0);
	errno = 0;
	ck_assert_int_eq(ibv_get_async_event(ctx, &ev), -1);
	ck_assert_int_eq(errno, EIO);
	ck_assert_int_lt(now_ms() - t0, PROMPT_MS);
}

START_TEST(daemon_death)
{
	struct ibv_device **list;
	struct ibv_context *ctx0, *ctx1;
	struct ibv_async_event ev;
	struct ibv_device_attr attr;
	struct pollfd pfd;
	long t0;
	int fd, n = -7;

	list = ibv_get_device_list(NULL);
	ck_assert_ptr_nonnull(list);
	ctx0 = ibv_open_device(find_device(list, "ibvd0"));
	ctx1 = ibv_open_device(find_device(list, "ibvd1"));
	ck_assert_ptr_nonnull(ctx0);
	ck_assert_ptr_nonnull(ctx1);
	ibv_free_device_list(list);
	ck_assert_int_eq(ibv_query_device(ctx0, &attr), 0);
	ck_assert_int_eq(ibv_query_device(ctx1, &attr), 0);

	/* Tell the script to kill the daemon, and wait for it to happen. */
	fd = open(ready_file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	ck_assert_msg(fd >= 0, "%s: %s", ready_file, strerror(errno));
	close(fd);
	memset(&ev, 0, sizeof(ev));
	ck_assert_int_eq(ibv_get_async_event(ctx0, &ev), 0);
	ck_assert_int_eq(ev.event_type, IBV_EVENT_DEVICE_FATAL);
	ibv_ack_async_event(&ev);
	assert_eio_after_fatal(ctx0);
	assert_queries_fail(ctx0, "ibvd0 after its fatal event");

	/* The other context: queries fail before its event is read, too. */
	assert_queries_fail(ctx1, "ibvd1 before reading its event");
	pfd.fd = ctx1->async_fd;
	pfd.events = POLLIN;
	t0 = now_ms();
	ck_assert_int_eq(poll(&pfd, 1, PROMPT_MS), 1);
	ck_assert_int_lt(now_ms() - t0, PROMPT_MS);
	memset(&ev, 0, sizeof(ev));
	ck_assert_int_eq(ibv_get_async_event(ctx1, &ev), 0);
	ck_assert_int_eq(ev.event_type, IBV_EVENT_DEVICE_FATAL);
	ibv_ack_async_event(&ev);
	assert_eio_after_fatal(ctx1);

	/* The devices stay readable; a new listing finds no daemon. */
	ck_assert_str_eq(ibv_get_device_name(ctx0->device), "ibvd0");
	ck_assert_str_eq(ibv_get_device_name(ctx1->device), "ibvd1");
	errno = 0;
	ck_assert_ptr_null(ibv_get_device_list(&n));
	ck_assert_int_eq(errno, ENOSYS);

	close_device(ctx0);
	close_device(ctx1);
}
END_TEST

/*
 * ---- the exported ibv_query_port (old binaries' entry) ------------------
 * From here on ibv_query_port is the function, not the header's macro.
 */
#undef ibv_query_port

START_TEST(query_port_compat)
{
	const struct expected_port *want = &ports[_i];
	struct ibv_context *ctx = open_device(want->dev);
	struct verbs_context *vctx = verbs_get_ctx(ctx);
	struct ibv_port_attr full;
	union {
		struct ibv_port_attr attr;
		unsigned char b[128];
	} u;

	memset(&full, CANARY, sizeof(full));
	ck_assert_int_eq(vctx->query_port(ctx, want->port, &full, sizeof(full)), 0);

	memset(&u, CANARY, sizeof(u));
	ck_assert_int_eq(ibv_query_port(ctx, want->port,
					(struct _compat_ibv_port_attr *)u.b), 0);
	ck_assert_mem_eq(u.b, &full, COMPAT_PORT_ATTR_SIZE);
	assert_bytes(u.b, COMPAT_PORT_ATTR_SIZE, sizeof(u), CANARY,
		     "past the 48-byte compat struct");
	ck_assert_int_eq(u.attr.state, IBV_PORT_ACTIVE);
	ck_assert_uint_eq(u.attr.lid, want->lid);
	ck_assert_uint_eq(u.attr.link_layer, IBV_LINK_LAYER_INFINIBAND);

	/* The same through the ops table (verbs_get_ctx_op's fallback). */
	memset(&u, CANARY, sizeof(u));
	ck_assert_int_eq(ctx->ops._compat_query_port(ctx, want->port,
			 (struct _compat_ibv_port_attr *)u.b), 0);
	ck_assert_mem_eq(u.b, &full, COMPAT_PORT_ATTR_SIZE);
	assert_bytes(u.b, COMPAT_PORT_ATTR_SIZE, sizeof(u), CANARY,
		     "past the 48-byte compat struct (ops)");

	ck_assert_int_ne(ibv_query_port(ctx, 0, (struct _compat_ibv_port_attr *)u.b), 0);
	ck_assert_int_ne(ibv_query_port(ctx, (uint8_t)(want->nports + 1),
					(struct _compat_ibv_port_attr *)u.b), 0);
	close_device(ctx);
}
END_TEST

/* ---- suites ------------------------------------------------------------- */

/* Generous: a sanitizer build is slow; verbs-api.sh bounds the whole run. */
#define CASE_TIMEOUT	30

static TCase *new_case(Suite *s, const char *name)
{
	TCase *tc = tcase_create(name);

	tcase_set_timeout(tc, CASE_TIMEOUT);
	suite_add_tcase(s, tc);
	return tc;
}

static Suite *api_suite(void)
{
	Suite *s = suite_create("verbs-api");
	int ndev = (int)ARRAY_SIZE(devices), nport = (int)ARRAY_SIZE(ports);
	TCase *tc;

	tc = new_case(s, "devices");
	tcase_add_test(tc, device_list);
	tcase_add_test(tc, cq_of_max_cqe);
	tcase_add_test(tc, device_guid_index);
	tcase_add_test(tc, device_outlives_list);
	tcase_add_test(tc, no_daemon);

	tc = new_case(s, "context");
	tcase_add_loop_test(tc, context_layout, 0, ndev);
	tcase_add_test(tc, unsupported_ops);
	tcase_add_test(tc, extended_ops_unsupported);
	tcase_add_test(tc, controlled_qkey);
	tcase_add_test(tc, query_qp_mask);
	tcase_add_test(tc, modify_qp_mask);

	tc = new_case(s, "query");
	tcase_add_loop_test(tc, query_device, 0, ndev);
	tcase_add_loop_test(tc, query_device_ex, 0, ndev);
	tcase_add_loop_test(tc, query_port, 0, nport);
	tcase_add_loop_test(tc, query_port_compat, 0, nport);

	tc = new_case(s, "gid");
	tcase_add_loop_test(tc, query_gid, 0, nport);
	tcase_add_loop_test(tc, query_gid_ex, 0, nport);
	tcase_add_loop_test(tc, query_gid_table, 0, ndev);
	tcase_add_loop_test(tc, query_gid_type, 0, nport);

	tc = new_case(s, "pkey");
	tcase_add_loop_test(tc, query_pkey, 0, nport);

	tc = new_case(s, "async");
	tcase_add_test(tc, async_nonblocking);
	tcase_add_loop_test(tc, async_eintr, 0, 2);

	tc = new_case(s, "process");
	tcase_add_test(tc, fork_init);
	tcase_add_test(tc, read_sysfs_file);
	return s;
}

static Suite *death_suite(void)
{
	Suite *s = suite_create("verbs-api-death");
	TCase *tc = new_case(s, "death");

	tcase_add_test(tc, daemon_death);
	return s;
}

int main(int argc, char **argv)
{
	Suite *suite;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 1) {
		suite = api_suite();
	} else if (argc == 3 && strcmp(argv[1], "death") == 0) {
		ready_file = argv[2];
		suite = death_suite();
	} else {
		fprintf(stderr, "usage: %s [death READY_FILE]\n", argv[0]);
		return 2;
	}
	return check_run(suite, CK_VERBOSE);
}
