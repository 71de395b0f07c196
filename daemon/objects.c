/*
 * The objects lock, the daemon-wide registries the engine looks objects up
 * in (MR keys, QP numbers, doorbells, multicast groups), and what the
 * object files share (limits, handles, teardown).  See objects.h for who
 * may read and write what.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>

#include "context.h"
#include "device.h"
#include "log.h"
#include "objects.h"
#include "query.h"
#include "request.h"
#include "session.h"
#include "verbs.h"

/*
 * Writer-preferring: engine threads take it for reading pass after pass,
 * so with the default (reader-preferring) lock a control-path change could
 * wait for ever.  Passes are bounded, so the writer waits at most one.
 */
pthread_rwlock_t ibvd_objects_lock =
	PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;

/* Only the control thread writes; this lets registry code check it. */
static bool write_held;

void ibvd_objects_write_lock(void)
{
	if (pthread_rwlock_wrlock(&ibvd_objects_lock) != 0)
		abort();	/* EDEADLK: a bug, never an input */
	write_held = true;
}

void ibvd_objects_write_unlock(void)
{
	write_held = false;
	pthread_rwlock_unlock(&ibvd_objects_lock);
}

#define ASSERT_WRITE_HELD()	do { if (!write_held) abort(); } while (0)

/* ---- shared helpers -------------------------------------------------- */

struct ibvd_context *ibvd_call_ctx(const struct ibvd_call *call)
{
	return call->session->ctx;
}

void ibvd_ctx_limits(const struct ibvd_context *ctx, struct ibvd_limits *lim)
{
	const struct ibvd_port *port = ibvd_device_port(ctx->dev, 1);
	Ibvd__DeviceAttr da;
	Ibvd__PortAttr pa;

	/* One source of truth: what QUERY_DEVICE/QUERY_PORT report. */
	ibvd_device_attr(ctx->dev, &da);
	lim->max_mr_size = da.max_mr_size;
	lim->max_qp_wr = (uint32_t)da.max_qp_wr;
	lim->max_sge = (uint32_t)da.max_sge;
	lim->max_cqe = (uint32_t)da.max_cqe;
	lim->max_srq_wr = (uint32_t)da.max_srq_wr;
	lim->max_srq_sge = (uint32_t)da.max_srq_sge;
	lim->max_qp_rd_atom = (uint32_t)da.max_qp_rd_atom;
	lim->max_qp_init_rd_atom = (uint32_t)da.max_qp_init_rd_atom;
	lim->max_mcast_grp = (uint32_t)da.max_mcast_grp;
	lim->max_mcast_qp_attach = (uint32_t)da.max_mcast_qp_attach;
	/* Every port of a device has the same attributes. */
	ibvd_port_attr(port, &pa);
	lim->max_mtu = pa.max_mtu;
	lim->pkey_tbl_len = pa.pkey_tbl_len;
	lim->gid_tbl_len = (uint32_t)pa.gid_tbl_len;
}

/* The most objects of a kind one context may hold. */
static uint32_t kind_max(const struct ibvd_context *ctx, enum ibvd_obj_kind kind)
{
	Ibvd__DeviceAttr da;

	ibvd_device_attr(ctx->dev, &da);
	switch (kind) {
	case IBVD_OBJ_PD:		return (uint32_t)da.max_pd;
	case IBVD_OBJ_MR:		return (uint32_t)da.max_mr;
	case IBVD_OBJ_MW:		return (uint32_t)da.max_mw;
	case IBVD_OBJ_CQ:		return (uint32_t)da.max_cq;
	case IBVD_OBJ_QP:		return (uint32_t)da.max_qp;
	case IBVD_OBJ_SRQ:		return (uint32_t)da.max_srq;
	case IBVD_OBJ_AH:		return (uint32_t)da.max_ah;
	case IBVD_OBJ_COMP_CHANNEL:	return IBVD_CTX_MAX_CHANNELS;
	default:			return 0;
	}
}

int ibvd_obj_add(struct ibvd_context *ctx, enum ibvd_obj_kind kind,
		 void *obj, uint32_t *ret_handle)
{
	if (ibvd_handle_count(&ctx->handles, kind) >= kind_max(ctx, kind))
		return -ENOMEM;
	return ibvd_handle_alloc(&ctx->handles, kind, obj, ret_handle);
}

uint32_t ibvd_random32(void)
{
	static unsigned int seed;
	uint32_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v))
		return v;
	/* Only before the kernel's pool is initialised (early boot). */
	if (!seed)
		seed = (unsigned int)time(NULL) ^ (unsigned int)getpid();
	return (uint32_t)rand_r(&seed) << 16 ^ (uint32_t)rand_r(&seed);
}

/* ---- hash tables ------------------------------------------------------ */

#define HASH_MIN_BITS	10
#define HASH_MAX_BITS	22

static uint32_t hash32(uint32_t key, unsigned int bits)
{
	return (key * 0x9E3779B1u) >> (32 - bits);
}

/*
 * The two registries below are keyed by random numbers and grow by
 * doubling at two entries per bucket, so a lookup costs a couple of
 * compares however many objects the daemon holds.
 */
LIST_HEAD(mr_bucket, ibvd_mr);
LIST_HEAD(qp_bucket, ibvd_qp);

static struct {
	struct mr_bucket *b;
	unsigned int bits;
	uint32_t count;
} mrs;

static struct {
	struct qp_bucket *b;
	unsigned int bits;
	uint32_t count;
} qps;

static int mr_table_grow(void)
{
	unsigned int bits = mrs.b ? mrs.bits + 1 : HASH_MIN_BITS;
	struct mr_bucket *b;
	struct ibvd_mr *mr;
	uint32_t i;

	if (mrs.b && (mrs.bits >= HASH_MAX_BITS || mrs.count < 2u << mrs.bits))
		return 0;
	b = calloc((size_t)1 << bits, sizeof(*b));
	if (!b)
		return mrs.b ? 0 : -ENOMEM;	/* longer chains still work */
	for (i = 0; mrs.b && i < 1u << mrs.bits; i++)
		while ((mr = LIST_FIRST(&mrs.b[i]))) {
			LIST_REMOVE(mr, key_link);
			LIST_INSERT_HEAD(&b[hash32(mr->lkey, bits)], mr, key_link);
		}
	free(mrs.b);
	mrs.b = b;
	mrs.bits = bits;
	return 0;
}

static struct ibvd_mr *mr_lookup(uint32_t key)
{
	struct ibvd_mr *mr;

	if (!mrs.b || key == 0)
		return NULL;
	LIST_FOREACH(mr, &mrs.b[hash32(key, mrs.bits)], key_link)
		if (mr->lkey == key)
			return mr;
	return NULL;
}

struct ibvd_mr *ibvd_mr_by_lkey(uint32_t key)
{
	return mr_lookup(key);
}

struct ibvd_mr *ibvd_mr_by_rkey(uint32_t key)
{
	return mr_lookup(key);
}

int ibvd_mr_register(struct ibvd_mr *mr)
{
	uint32_t key;
	int ret;

	ASSERT_WRITE_HELD();
	ret = mr_table_grow();
	if (ret < 0)
		return ret;
	/*
	 * A 32-bit space with at most a few million keys: few retries.  A key
	 * in a window's range would make one rkey name two objects.
	 */
	do
		key = ibvd_random32();
	while (key == 0 || mr_lookup(key) || ibvd_mw_by_index(key));
	mr->lkey = key;
	mr->rkey = key;
	LIST_INSERT_HEAD(&mrs.b[hash32(key, mrs.bits)], mr, key_link);
	mrs.count++;
	return 0;
}

void ibvd_mr_unregister(struct ibvd_mr *mr)
{
	ASSERT_WRITE_HELD();
	LIST_REMOVE(mr, key_link);
	mrs.count--;
}

/*
 * Memory windows, by the upper 24 bits of their keys.  Few enough (max_mw
 * per context) that one fixed table of lists does.
 */
#define MW_BUCKETS	4096u
#define MW_INDEX(key)	((key) >> 8)

LIST_HEAD(mw_bucket, ibvd_mw);
static struct mw_bucket mw_table[MW_BUCKETS];

struct ibvd_mw *ibvd_mw_by_index(uint32_t rkey)
{
	uint32_t index = MW_INDEX(rkey);
	struct ibvd_mw *mw;

	LIST_FOREACH(mw, &mw_table[index % MW_BUCKETS], key_link)
		if (MW_INDEX(mw->rkey) == index)
			return mw;
	return NULL;
}

/* Some MR key falls in the 256 keys of window index `index`. */
static bool index_has_mr(uint32_t index)
{
	uint32_t b;

	for (b = 0; b < 256; b++)
		if (mr_lookup(index << 8 | b))
			return true;
	return false;
}

int ibvd_mw_register(struct ibvd_mw *mw)
{
	uint32_t index;

	ASSERT_WRITE_HELD();
	/* 16M indices against at most a few hundred thousand windows. */
	do
		index = ibvd_random32() & 0xFFFFFFu;
	while (index == 0 || ibvd_mw_by_index(index << 8) ||
	       index_has_mr(index));
	/* The first key byte is random too: a stale key rarely matches. */
	mw->rkey = index << 8 | (ibvd_random32() & 0xFFu);
	LIST_INSERT_HEAD(&mw_table[index % MW_BUCKETS], mw, key_link);
	return 0;
}

void ibvd_mw_unregister(struct ibvd_mw *mw)
{
	ASSERT_WRITE_HELD();
	LIST_REMOVE(mw, key_link);
}

static int qp_table_grow(void)
{
	unsigned int bits = qps.b ? qps.bits + 1 : HASH_MIN_BITS;
	struct qp_bucket *b;
	struct ibvd_qp *qp;
	uint32_t i;

	if (qps.b && (qps.bits >= HASH_MAX_BITS || qps.count < 2u << qps.bits))
		return 0;
	b = calloc((size_t)1 << bits, sizeof(*b));
	if (!b)
		return qps.b ? 0 : -ENOMEM;
	for (i = 0; qps.b && i < 1u << qps.bits; i++)
		while ((qp = LIST_FIRST(&qps.b[i]))) {
			LIST_REMOVE(qp, qpn_link);
			LIST_INSERT_HEAD(&b[hash32(qp->qp_num, bits)], qp, qpn_link);
		}
	free(qps.b);
	qps.b = b;
	qps.bits = bits;
	return 0;
}

struct ibvd_qp *ibvd_qp_by_num(uint32_t qp_num)
{
	struct ibvd_qp *qp;

	if (!qps.b)
		return NULL;
	LIST_FOREACH(qp, &qps.b[hash32(qp_num, qps.bits)], qpn_link)
		if (qp->qp_num == qp_num)
			return qp;
	return NULL;
}

/* Numbers 0 and 1 are the special QPs, 0xFFFFFF the multicast QPN. */
#define QPN_MASK	0xFFFFFFu

int ibvd_qp_register(struct ibvd_qp *qp)
{
	uint32_t qpn;
	int ret;

	ASSERT_WRITE_HELD();
	ret = qp_table_grow();
	if (ret < 0)
		return ret;
	/*
	 * Random rather than sequential, so that a tenant cannot predict
	 * another's QP numbers; 16M values against at most a few hundred
	 * thousand live QPs.
	 */
	do
		qpn = ibvd_random32() & QPN_MASK;
	while (qpn < 2 || qpn == IBVD_MCAST_QPN || ibvd_qp_by_num(qpn));
	qp->qp_num = qpn;
	LIST_INSERT_HEAD(&qps.b[hash32(qpn, qps.bits)], qp, qpn_link);
	qps.count++;
	return 0;
}

void ibvd_qp_unregister(struct ibvd_qp *qp)
{
	ASSERT_WRITE_HELD();
	LIST_REMOVE(qp, qpn_link);
	qps.count--;
}

/* ---- doorbells -------------------------------------------------------- */

struct ibvd_qp *ibvd_qp_by_doorbell(const struct ibvd_context *ctx,
				    uint32_t bit)
{
	const struct ibvd_ctx_objs *o = &ctx->objs;

	return bit < o->db_qp_len ? o->db_qp[bit] : NULL;
}

/* Make db_qp cover bit; it grows by doubling, bits go lowest first. */
static int db_map_cover(struct ibvd_ctx_objs *o, uint32_t bit)
{
	uint32_t len = o->db_qp_len ? o->db_qp_len : 64;
	struct ibvd_qp **map;

	if (bit < o->db_qp_len)
		return 0;
	while (len <= bit)
		len *= 2;
	map = realloc(o->db_qp, len * sizeof(*map));
	if (!map)
		return -ENOMEM;
	memset(map + o->db_qp_len, 0, (len - o->db_qp_len) * sizeof(*map));
	o->db_qp = map;
	o->db_qp_len = len;
	return 0;
}

int ibvd_doorbell_alloc(struct ibvd_context *ctx, struct ibvd_qp *qp)
{
	struct ibvd_ctx_objs *o = &ctx->objs;
	uint32_t i, w, bit;
	int ret;

	ASSERT_WRITE_HELD();
	for (i = 0; i < IBVD_DOORBELL_WORDS; i++) {
		w = (o->db_next / 64 + i) % IBVD_DOORBELL_WORDS;
		if (o->db_used[w] != UINT64_MAX)
			break;
	}
	if (i == IBVD_DOORBELL_WORDS)
		return -ENOMEM;		/* as a NIC out of doorbell resources */
	bit = w * 64 + (uint32_t)__builtin_ctzll(~o->db_used[w]);
	ret = db_map_cover(o, bit);
	if (ret < 0)
		return ret;
	o->db_used[w] |= 1ull << (bit % 64);
	o->db_qp[bit] = qp;
	o->db_next = bit;
	qp->doorbell = bit;
	return 0;
}

void ibvd_doorbell_free(struct ibvd_context *ctx, struct ibvd_qp *qp)
{
	struct ibvd_ctx_objs *o = &ctx->objs;
	uint32_t bit = qp->doorbell;

	ASSERT_WRITE_HELD();
	o->db_used[bit / 64] &= ~(1ull << (bit % 64));
	o->db_qp[bit] = NULL;
	/* Reuse low bits first: keeps db_qp and the engine's scan short. */
	if (bit < o->db_next)
		o->db_next = bit;
}

/* ---- multicast groups ------------------------------------------------- */

#define MCAST_BUCKETS	256u

static LIST_HEAD(, ibvd_mcast_group) groups[MCAST_BUCKETS];
static uint32_t ngroups;

static unsigned int mgid_hash(const uint8_t mgid[16])
{
	uint32_t h = 2166136261u;	/* FNV-1a over the 16 bytes */
	unsigned int i;

	for (i = 0; i < 16; i++)
		h = (h ^ mgid[i]) * 16777619u;
	return h % MCAST_BUCKETS;
}

struct ibvd_mcast_group *ibvd_mcast_group_find(const uint8_t mgid[16])
{
	struct ibvd_mcast_group *grp;

	LIST_FOREACH(grp, &groups[mgid_hash(mgid)], link)
		if (!memcmp(grp->mgid, mgid, 16))
			return grp;
	return NULL;
}

int ibvd_mcast_group_get(const uint8_t mgid[16], uint32_t max_groups,
			 struct ibvd_mcast_group **ret)
{
	struct ibvd_mcast_group *grp = ibvd_mcast_group_find(mgid);

	ASSERT_WRITE_HELD();
	if (grp) {
		*ret = grp;
		return 0;
	}
	/* max_mcast_grp counts daemon-wide: groups are not per tenant. */
	if (ngroups >= max_groups)
		return -ENOMEM;
	grp = calloc(1, sizeof(*grp));
	if (!grp)
		return -ENOMEM;
	memcpy(grp->mgid, mgid, 16);
	LIST_INIT(&grp->members);
	LIST_INSERT_HEAD(&groups[mgid_hash(mgid)], grp, link);
	ngroups++;
	*ret = grp;
	return 0;
}

void ibvd_mcast_group_put(struct ibvd_mcast_group *grp)
{
	ASSERT_WRITE_HELD();
	if (grp->nmembers)
		return;
	LIST_REMOVE(grp, link);
	ngroups--;
	free(grp);
}

/* ---- context teardown ------------------------------------------------- */

static int destroy_one(uint32_t handle, enum ibvd_obj_kind kind, void *obj,
		       void *arg)
{
	switch (kind) {
	case IBVD_OBJ_QP:		ibvd_qp_destroy(obj); break;
	case IBVD_OBJ_SRQ:		ibvd_srq_destroy(obj); break;
	case IBVD_OBJ_AH:		ibvd_ah_destroy(obj); break;
	case IBVD_OBJ_MW:		ibvd_mw_destroy(obj); break;
	case IBVD_OBJ_MR:		ibvd_mr_destroy(obj); break;
	case IBVD_OBJ_CQ:		ibvd_cq_destroy(obj); break;
	case IBVD_OBJ_COMP_CHANNEL:	ibvd_channel_destroy(obj); break;
	case IBVD_OBJ_PD:		ibvd_pd_destroy(obj); break;
	default:			break;
	}
	return 0;
}

void ibvd_objects_free_all(struct ibvd_context *ctx)
{
	/* Children before parents, so every users count is 0 in its turn. */
	static const enum ibvd_obj_kind order[] = {
		IBVD_OBJ_QP, IBVD_OBJ_SRQ, IBVD_OBJ_AH, IBVD_OBJ_MW,
		IBVD_OBJ_MR, IBVD_OBJ_CQ, IBVD_OBJ_COMP_CHANNEL, IBVD_OBJ_PD,
	};
	size_t i;

	/*
	 * One write-locked section for the whole context: the engine waits
	 * once, and never sees a half-destroyed family.
	 */
	ibvd_objects_write_lock();
	for (i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		ibvd_handle_foreach(&ctx->handles, order[i], destroy_one, NULL);
	ibvd_objects_write_unlock();
	if (ctx->objs.mem) {
		ibvd_mem_put(ctx->objs.mem);
		ctx->objs.mem = NULL;
	}
	free(ctx->objs.db_qp);
	ctx->objs.db_qp = NULL;
	ctx->objs.db_qp_len = 0;
	if (ctx->objs.ring_bytes)
		log_err("context %u: %llu ring bytes unaccounted at teardown",
			ctx->id, (unsigned long long)ctx->objs.ring_bytes);
}
