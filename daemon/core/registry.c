/*
 * The objects lock and the daemon-wide registries the engine looks objects
 * up in (MR keys, window indexes, QP numbers, doorbells, multicast
 * groups).  See objects.h for who may read and write what.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "objects.h"
#include "util.h"

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

/* ---- the registries ---------------------------------------------------- */

/*
 * All keyed by random numbers the daemon draws (keyed.h), so no tenant
 * can guess another's or pile its own into one bucket.
 */
static struct ibvd_keyed_table mrs, qps, mws, srqs;

static struct ibvd_mr *mr_lookup(uint32_t key)
{
	struct ibvd_keyed *n = key ? ibvd_keyed_find(&mrs, key) : NULL;

	return n ? container_of(n, struct ibvd_mr, key_node) : NULL;
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

	ASSERT_WRITE_HELD();
	/*
	 * A 32-bit space with at most a few million keys: few retries.  A key
	 * in a window's range would make one rkey name two objects.
	 */
	do
		key = ibvd_random32();
	while (key == 0 || mr_lookup(key) || ibvd_mw_by_index(key));
	mr->lkey = key;
	mr->rkey = key;
	return ibvd_keyed_insert(&mrs, &mr->key_node, key);
}

void ibvd_mr_unregister(struct ibvd_mr *mr)
{
	ASSERT_WRITE_HELD();
	ibvd_keyed_remove(&mrs, &mr->key_node);
}

/*
 * Memory windows, by the upper 24 bits of their keys, which name the
 * window for its life; the low byte changes with each bind.
 */
#define MW_INDEX(key)	((key) >> 8)

struct ibvd_mw *ibvd_mw_by_index(uint32_t rkey)
{
	struct ibvd_keyed *n = ibvd_keyed_find(&mws, MW_INDEX(rkey));

	return n ? container_of(n, struct ibvd_mw, key_node) : NULL;
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
	return ibvd_keyed_insert(&mws, &mw->key_node, index);
}

void ibvd_mw_unregister(struct ibvd_mw *mw)
{
	ASSERT_WRITE_HELD();
	ibvd_keyed_remove(&mws, &mw->key_node);
}

struct ibvd_qp *ibvd_qp_by_num(uint32_t qp_num)
{
	struct ibvd_keyed *n = ibvd_keyed_find(&qps, qp_num);

	return n ? container_of(n, struct ibvd_qp, qpn_node) : NULL;
}

/* Numbers 0 and 1 are the special QPs, 0xFFFFFF the multicast QPN. */
#define QPN_MASK	0xFFFFFFu

int ibvd_qp_register(struct ibvd_qp *qp)
{
	uint32_t qpn;

	ASSERT_WRITE_HELD();
	/*
	 * Random rather than sequential, so that a tenant cannot predict
	 * another's QP numbers; 16M values against at most a few hundred
	 * thousand live QPs.
	 */
	do
		qpn = ibvd_random32() & QPN_MASK;
	while (qpn < 2 || qpn == IBVD_MCAST_QPN || ibvd_qp_by_num(qpn));
	qp->qp_num = qpn;
	return ibvd_keyed_insert(&qps, &qp->qpn_node, qpn);
}

void ibvd_qp_unregister(struct ibvd_qp *qp)
{
	ASSERT_WRITE_HELD();
	ibvd_keyed_remove(&qps, &qp->qpn_node);
}

/* XRC SRQs, by random 24-bit numbers like QPs'. */
#define SRQN_MASK	0xFFFFFFu

struct ibvd_srq *ibvd_srq_by_num(uint32_t srq_num)
{
	struct ibvd_keyed *n = ibvd_keyed_find(&srqs, srq_num);

	return n ? container_of(n, struct ibvd_srq, srqn_node) : NULL;
}

int ibvd_srq_register(struct ibvd_srq *srq)
{
	uint32_t n;

	ASSERT_WRITE_HELD();
	do
		n = ibvd_random32() & SRQN_MASK;
	while (n == 0 || ibvd_srq_by_num(n));
	srq->srq_num = n;
	return ibvd_keyed_insert(&srqs, &srq->srqn_node, n);
}

void ibvd_srq_unregister(struct ibvd_srq *srq)
{
	ASSERT_WRITE_HELD();
	ibvd_keyed_remove(&srqs, &srq->srqn_node);
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

/*
 * The doorbell words a context's QPs may take: the page's all, or fewer
 * (IBVERBSD_CTX_DOORBELLS, in bits, whole words) for a test that fills a
 * context in a moment rather than in 16,384 requests.  The page and the
 * library are the same either way.  Read once, by the control thread.
 */
static uint32_t doorbell_words(void)
{
	static uint32_t words;

	if (!words)
		words = (uint32_t)ibvd_env_or("IBVERBSD_CTX_DOORBELLS",
					      IBVD_DOORBELL_BITS, 64,
					      IBVD_DOORBELL_BITS) / 64;
	return words;
}

int ibvd_doorbell_alloc(struct ibvd_context *ctx, struct ibvd_qp *qp)
{
	struct ibvd_ctx_objs *o = &ctx->objs;
	uint32_t i, w, bit, nwords = doorbell_words();
	int ret;

	ASSERT_WRITE_HELD();
	for (i = 0; i < nwords; i++) {
		w = (o->db_next / 64 + i) % nwords;
		if (o->db_used[w] != UINT64_MAX)
			break;
	}
	if (i == nwords)
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
