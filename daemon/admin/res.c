/*
 * ibvctl resource show: the summary and the per-kind listings of the verbs
 * objects (qp, cq, mr, pd, ctx, srq), with rdma-resource(8)'s keys, in its
 * order, and its filters (ranges included).
 *
 * Every row is built as JSON first and the filters are matched against
 * that row, so a filter can only ever select on what the caller is allowed
 * to see.  A caller outside root and the admin group sees only the objects
 * of contexts opened by its own uid; lkey/rkey go to admins only (rdma
 * gives them to CAP_NET_ADMIN only).
 *
 * Runs on the control thread, which alone creates and destroys objects, so
 * walking the contexts needs no lock; only QP state, which engine threads
 * also store, is read with an atomic load.
 *
 * Object numbers: lqpn and srqn are the daemon-wide numbers clients see;
 * pdn, cqn and mrn are the object's handle, unique within its context
 * (ctxn), since the daemon has no device-wide numbering for them.
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <infiniband/verbs.h>
#include <jansson.h>

#include "args.h"
#include "cm/cm.h"
#include "core/device.h"
#include "core/objects.h"
#include "res.h"
#include "server/call.h"
#include "server/clients.h"
#include "server/daemon.h"
#include "util.h"
#include "verbs/context.h"

#define MAX_FILTERS	8

struct res_filter {
	const char *key;
	const char *value;
};

struct res_sel {
	struct ibvd_admin_place place;
	const struct res_kind *kind;
	struct res_filter f[MAX_FILTERS];
	size_t n;
	bool admin;			/* sees every uid, and keys */
	uid_t uid;
	int details;
};

struct res_kind;

/* One walk over the objects of a kind. */
struct res_walk {
	size_t looks;			/* objects looked at so far */
	struct ibvd_call *call;
	const struct res_sel *sel;
	const struct res_kind *kind;
	const struct ibvd_context *ctx;
	struct ibvd_client_info owner;	/* of ctx */
	json_t *out;
	size_t json_len;		/* of out so far */
	json_t *srq_qps;		/* SRQs: each one's QPs, by handle */
};

typedef int (*res_fill_fn)(json_t *o, const struct res_walk *w,
			   uint32_t handle, const void *obj);

struct res_kind {
	const char *name;
	enum ibvd_obj_kind obj;		/* IBVD_OBJ_ANY: the contexts */
	res_fill_fn fill;
	const char *const *filters;	/* keys accepted as filters */
};

/* ---- JSON helpers ---------------------------------------------------- */

static int set_int(json_t *o, const char *key, json_int_t v)
{
	return json_object_set_new(o, key, json_integer(v));
}

static int set_str(json_t *o, const char *key, const char *v)
{
	json_t *s = json_string(v);

	/* A comm that is not UTF-8 must not fail the listing. */
	return json_object_set_new(o, key, s ? s : json_string("?"));
}

/* rdma's hex values: JSON strings without 0x; ibvctl adds it in text. */
static int set_hex(json_t *o, const char *key, uint64_t v)
{
	char buf[20];

	snprintf(buf, sizeof(buf), "%llx", (unsigned long long)v);
	return set_str(o, key, buf);
}

static int set_dev(json_t *o, const struct ibvd_context *ctx)
{
	return set_int(o, "ifindex", ctx->dev->ifindex) |
	       set_str(o, "ifname", ctx->dev->name);
}

/* The keys every row ends with: rdma's pid and comm, then -d extras. */
static int set_owner(json_t *o, const struct res_walk *w)
{
	const struct ibvd_client_info *s = &w->owner;
	int ret;

	ret = set_int(o, "pid", s->pid) | set_str(o, "comm", s->comm);
	if (w->sel->details)
		ret |= set_int(o, "uid", s->uid) |
		       set_str(o, "cgroup", s->cgroup[0] ? s->cgroup : "-");
	return ret;
}

/* ---- values as rdma(8) prints them ----------------------------------- */

static const char *qp_type_name(uint32_t t)
{
	switch (t) {
	case IBV_QPT_RC: return "RC";
	case IBV_QPT_UC: return "UC";
	case IBV_QPT_UD: return "UD";
	case IBV_QPT_RAW_PACKET: return "RAW_PACKET";
	case IBV_QPT_XRC_SEND: return "XRC_INI";
	case IBV_QPT_XRC_RECV: return "XRC_TGT";
	default: return "DRIVER";
	}
}

static const char *qp_state_name(uint32_t s)
{
	static const char *const names[] = {
		[IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT",
		[IBV_QPS_RTR] = "RTR", [IBV_QPS_RTS] = "RTS",
		[IBV_QPS_SQD] = "SQD", [IBV_QPS_SQE] = "SQE",
		[IBV_QPS_ERR] = "ERR",
	};

	return s < ARRAY_SIZE(names) && names[s] ? names[s] : "UNKNOWN";
}

static const char *mig_state_name(uint8_t m)
{
	return m == IBV_MIG_MIGRATED ? "MIGRATED" :
	       m == IBV_MIG_REARM ? "REARM" : "ARMED";
}

static bool qp_connected(const struct ibvd_qp *qp, uint32_t state)
{
	return (qp->qp_type == IBV_QPT_RC || qp->qp_type == IBV_QPT_UC) &&
	       state != IBV_QPS_RESET && state != IBV_QPS_INIT;
}

/* ---- one row per kind ------------------------------------------------ */

static int fill_qp(json_t *o, const struct res_walk *w, uint32_t handle,
		   const void *obj)
{
	const struct ibvd_qp *qp = obj;
	/* engine threads may move it to ERR/SQE on their own */
	uint32_t state = __atomic_load_n(&qp->state, __ATOMIC_ACQUIRE);
	bool conn = qp_connected(qp, state);
	int ret = set_dev(o, w->ctx);

	(void)handle;
	/* a QP gets its port at INIT; before that rdma prints DEV/- */
	if (state != IBV_QPS_RESET && qp->attr.port_num)
		ret |= set_int(o, "port", qp->attr.port_num);
	ret |= set_int(o, "lqpn", qp->qp_num);
	if (conn)
		ret |= set_int(o, "rqpn", qp->attr.dest_qp_num);
	ret |= set_str(o, "type", qp_type_name(qp->qp_type));
	ret |= set_str(o, "state", qp_state_name(state));
	if (conn)
		ret |= set_int(o, "rq-psn", qp->attr.rq_psn);
	ret |= set_int(o, "sq-psn", qp->attr.sq_psn);
	if (conn)
		ret |= set_str(o, "path-mig-state",
			       mig_state_name(qp->ctl.path_mig_state));
	/* an XRC target's pd is the engine's (objects.h): it has none */
	if (qp->qp_type != IBV_QPT_XRC_RECV)
		ret |= set_int(o, "pdn", qp->pd ? qp->pd->handle : 0);
	return ret | set_owner(o, w);
}

static int fill_cq(json_t *o, const struct res_walk *w, uint32_t handle,
		   const void *obj)
{
	const struct ibvd_cq *cq = obj;
	int ret = set_dev(o, w->ctx);

	ret |= set_int(o, "cqn", handle);
	ret |= set_int(o, "cqe", cq->cqe);
	ret |= set_int(o, "users", cq->users);
	ret |= set_int(o, "ctxn", w->ctx->id);
	return ret | set_owner(o, w);
}

static int fill_mr(json_t *o, const struct res_walk *w, uint32_t handle,
		   const void *obj)
{
	const struct ibvd_mr *mr = obj;
	int ret = set_dev(o, w->ctx);

	ret |= set_int(o, "mrn", handle);
	if (w->sel->admin) {
		ret |= set_hex(o, "rkey", mr->rkey);
		ret |= set_hex(o, "lkey", mr->lkey);
		ret |= set_hex(o, "iova", mr->iova);
	}
	ret |= set_int(o, "mrlen", (json_int_t)mr->length);
	ret |= set_int(o, "pdn", mr->pd->handle);
	ret |= set_owner(o, w);
	if (w->sel->details)
		ret |= set_str(o, "tier", mr->tier == IBVD_MR_TIER_MAPPED ?
			       "mapped" : "memfd");
	return ret;
}

static int fill_pd(json_t *o, const struct res_walk *w, uint32_t handle,
		   const void *obj)
{
	const struct ibvd_pd *pd = obj;
	int ret = set_dev(o, w->ctx);

	ret |= set_int(o, "pdn", handle);
	ret |= set_int(o, "users", pd->users);
	ret |= set_int(o, "ctxn", w->ctx->id);
	return ret | set_owner(o, w);
}

static int fill_ctx(json_t *o, const struct res_walk *w, uint32_t handle,
		    const void *obj)
{
	(void)handle;
	(void)obj;
	return set_dev(o, w->ctx) | set_int(o, "ctxn", w->ctx->id) |
	       set_owner(o, w);
}

/* Collects the QPs attached to one SRQ (rdma's "lqpn" list). */
/*
 * An SRQ's key in srq_qps: the SRQ itself, since an XRC target QP of the
 * context may receive into an SRQ of another context, whose handle
 * number may be one of this context's too.
 */
#define SRQ_KEY_LEN	24

static void srq_key(char key[SRQ_KEY_LEN], const struct ibvd_srq *srq)
{
	snprintf(key, SRQ_KEY_LEN, "%p", (const void *)srq);
}

/* Add qp to its SRQ's list in arg (a JSON object of lists). */
static int srq_qp_cb(uint32_t handle, enum ibvd_obj_kind kind, void *obj,
		     void *arg)
{
	const struct ibvd_qp *qp = obj;
	json_t *map = arg, *list;
	char key[SRQ_KEY_LEN];

	(void)handle;
	(void)kind;
	/* an XRC target's srq is the engine's, of the message in progress */
	if (qp->qp_type == IBV_QPT_XRC_RECV || !qp->srq)
		return 0;
	srq_key(key, qp->srq);
	list = json_object_get(map, key);
	if (!list) {
		list = json_array();
		if (!list || json_object_set_new(map, key, list))
			return -ENOMEM;
	}
	return json_array_append_new(list, json_integer(qp->qp_num)) ?
	       -ENOMEM : 0;
}

/* The QPs of ctx by the SRQ each receives into: one walk, not one per SRQ. */
static json_t *srq_qps_of(const struct ibvd_context *ctx)
{
	json_t *map = json_object();

	/* the walk does not change the table: dropping const is safe */
	if (map && ibvd_handle_foreach((struct ibvd_handle_table *)&ctx->handles,
				       IBVD_OBJ_QP, srq_qp_cb, map)) {
		json_decref(map);
		map = NULL;
	}
	return map;
}

static int fill_srq(json_t *o, const struct res_walk *w, uint32_t handle,
		    const void *obj)
{
	const struct ibvd_srq *srq = obj;
	int ret = set_dev(o, w->ctx);
	json_t *list;
	char key[SRQ_KEY_LEN];

	(void)handle;
	ret |= set_int(o, "srqn", srq->srq_num);
	ret |= set_str(o, "type", srq->srq_type == IBV_SRQT_XRC ? "XRC" : "BASIC");
	srq_key(key, srq);
	list = json_object_get(w->srq_qps, key);
	if (list)
		ret |= json_object_set(o, "lqpn", list);
	ret |= set_int(o, "pdn", srq->pd->handle);
	/* rdma's: an SRQ that completes on a CQ of its own (XRC) names it */
	if (srq->srq_type == IBV_SRQT_XRC)
		ret |= set_int(o, "cqn", srq->cq->handle);
	return ret | set_owner(o, w);
}

static const char *const qp_filters[] = {
	"lqpn", "rqpn", "pid", "sq-psn", "rq-psn", "type", "path-mig-state",
	"state", "pdn", "comm", "uid", NULL
};
static const char *const cq_filters[] = {
	"cqn", "cqe", "users", "ctxn", "pid", "comm", "uid", NULL
};
static const char *const mr_filters[] = {
	"mrn", "mrlen", "pdn", "pid", "comm", "uid", NULL
};
static const char *const pd_filters[] = {
	"pdn", "users", "ctxn", "pid", "comm", "uid", NULL
};
static const char *const ctx_filters[] = {
	"ctxn", "pid", "comm", "uid", NULL
};
static const char *const srq_filters[] = {
	"srqn", "type", "pdn", "cqn", "pid", "comm", "uid", NULL
};

static const struct res_kind res_kinds[] = {
	{ "qp", IBVD_OBJ_QP, fill_qp, qp_filters },
	{ "cq", IBVD_OBJ_CQ, fill_cq, cq_filters },
	{ "mr", IBVD_OBJ_MR, fill_mr, mr_filters },
	{ "pd", IBVD_OBJ_PD, fill_pd, pd_filters },
	{ "ctx", IBVD_OBJ_ANY, fill_ctx, ctx_filters },
	{ "srq", IBVD_OBJ_SRQ, fill_srq, srq_filters },
};

/* ---- filters ----------------------------------------------------------- */

static bool key_allowed(const struct res_kind *k, const char *key)
{
	const char *const *f;

	for (f = k->filters; *f; f++)
		if (!strcmp(*f, key))
			return true;
	return false;
}

static int add_filter(struct ibvd_call *call, const char *key,
		      const char *value, void *arg)
{
	struct res_sel *sel = arg;
	const struct res_kind *k = sel->kind;
	bool dummy;

	if (!key_allowed(k, key))
		return ibvd_call_error(call, -EINVAL,
				       "unknown filter %.64s for resource %s",
				       key, k->name);
	/* numbers are checked now, so a typo is an error, not "no match" */
	if (strcmp(key, "type") && strcmp(key, "state") && strcmp(key, "comm") &&
	    strcmp(key, "path-mig-state") && !ibvd_admin_num_spec(value, 0, &dummy))
		return ibvd_call_error(call, -EINVAL, "bad %s value %.64s", key,
				       value);
	if (sel->n == MAX_FILTERS)
		return ibvd_call_error(call, -EINVAL, "too many filters");
	sel->f[sel->n++] = (struct res_filter){ key, value };
	return 0;
}

static int parse_sel(struct ibvd_call *call, const struct res_kind *k,
		     size_t argc, char **argv, int details, struct res_sel *sel)
{
	struct ibvd_client_info caller;

	memset(sel, 0, sizeof(*sel));
	ibvd_client_info(call->session, &caller);
	sel->kind = k;
	sel->admin = ibvd_call_privileged(call);
	sel->uid = caller.uid;
	sel->details = details;
	return ibvd_admin_parse_pairs(call, argc, argv, &sel->place, add_filter,
				      sel);
}

/*
 * Filters match the row as shown: an absent key matches nothing.  uid is
 * the one exception, since it is shown only with -d.
 */
static bool row_matches(const json_t *o, const struct res_sel *sel,
			uid_t uid)
{
	const json_t *v;
	bool match;
	size_t i;

	if (sel->place.port >= 0) {
		v = json_object_get(o, "port");
		if (!json_is_integer(v) || json_integer_value(v) != sel->place.port)
			return false;
	}
	for (i = 0; i < sel->n; i++) {
		v = json_object_get(o, sel->f[i].key);
		if (!strcmp(sel->f[i].key, "uid"))
			ibvd_admin_num_spec(sel->f[i].value, uid, &match);
		else if (json_is_integer(v))
			ibvd_admin_num_spec(sel->f[i].value,
				 (unsigned long long)json_integer_value(v), &match);
		else if (json_is_string(v))
			match = !strcasecmp(sel->f[i].value, json_string_value(v));
		else
			match = false;
		if (!match)
			return false;
	}
	return true;
}

/* ---- walking ----------------------------------------------------------- */

static bool ctx_visible(const struct ibvd_client_info *owner,
			const struct res_sel *sel)
{
	return sel->admin || owner->uid == sel->uid;
}

/* Is v, as set_str shows it ("?" if not UTF-8), want (any case)? */
static bool shown_as(const char *v, const char *want)
{
	json_t *s = v ? json_string(v) : NULL;
	bool eq = !strcasecmp(want, s ? json_string_value(s) : "?");

	json_decref(s);
	return eq;
}

/*
 * Could any row of this context match?  Every row of a context shows its
 * owner's pid and comm (set_owner) and is judged by its uid, so filters
 * on those decide for the whole context before a row is built: a
 * listing by pid costs the objects of that process, not of the daemon.
 */
static bool owner_matches(const struct ibvd_client_info *owner,
			  const struct res_sel *sel)
{
	bool match = true;
	size_t i;

	for (i = 0; i < sel->n && match; i++) {
		const struct res_filter *f = &sel->f[i];

		if (!strcmp(f->key, "pid"))
			ibvd_admin_num_spec(f->value,
					    (unsigned long long)owner->pid, &match);
		else if (!strcmp(f->key, "uid"))
			ibvd_admin_num_spec(f->value, owner->uid, &match);
		else if (!strcmp(f->key, "comm"))
			match = shown_as(owner->comm, f->value);
	}
	return match;
}

static int emit(struct res_walk *w, uint32_t handle, const void *obj)
{
	json_t *o = json_object();

	if (!o)
		return -ENOMEM;
	if (w->kind->fill(o, w, handle, obj)) {
		json_decref(o);
		return -ENOMEM;
	}
	if (!row_matches(o, w->sel, w->owner.uid)) {
		json_decref(o);
		return 0;
	}
	return ibvd_res_append(w->out, o, &w->json_len);
}

int ibvd_res_append(json_t *out, json_t *row, size_t *json_len)
{
	/* the row, and the comma or bracket before it */
	size_t len = json_dumpb(row, NULL, 0, JSON_COMPACT) + 1;

	if (*json_len + len + 1 > IBVD_RES_MAX_JSON) {
		json_decref(row);
		return -EMSGSIZE;
	}
	*json_len += len;
	return json_array_append_new(out, row) ? -ENOMEM : 0;
}

int ibvd_res_too_large(struct ibvd_call *call, size_t rows)
{
	return ibvd_call_error(call, -EMSGSIZE,
			       "more rows than one reply holds (%zu fit): filter by dev, pid, ...",
			       rows);
}

static int emit_cb(uint32_t handle, enum ibvd_obj_kind kind, void *obj,
		   void *arg)
{
	(void)kind;
	return emit(arg, handle, obj);
}

static int walk_ctx(struct res_walk *w, struct ibvd_context *ctx)
{
	int ret;

	if (w->kind->obj == IBVD_OBJ_ANY)
		return emit(w, 0, ctx);
	if (w->kind->obj == IBVD_OBJ_SRQ &&
	    ibvd_handle_count(&ctx->handles, IBVD_OBJ_SRQ)) {
		w->srq_qps = srq_qps_of(ctx);
		if (!w->srq_qps)
			return -ENOMEM;
	}
	ret = ibvd_handle_foreach(&ctx->handles, w->kind->obj, emit_cb, w);
	json_decref(w->srq_qps);
	w->srq_qps = NULL;
	return ret;
}

/*
 * What one listing of a caller outside root and the admin group may look
 * at: every object of its kind in the visible contexts has its row built
 * to be matched, about a microsecond each on the control thread, which
 * every tenant waits for.  A uid holds a million objects (16 contexts of
 * 65,536 PDs), and a filter that matches none of them cost each request
 * a second; requests in a loop kept every other tenant's calls waiting
 * that long.  Admins are trusted with their own requests.
 */
#define RES_MAX_LOOKS	16384u

/* Objects a walk of ctx looks at: its rows, and an SRQ listing's QPs. */
static size_t ctx_looks(const struct res_kind *k, const struct ibvd_context *ctx)
{
	size_t n;

	if (k->obj == IBVD_OBJ_ANY)
		return 1;
	n = ibvd_handle_count(&ctx->handles, k->obj);
	if (k->obj == IBVD_OBJ_SRQ && n)
		n += ibvd_handle_count(&ctx->handles, IBVD_OBJ_QP);
	return n;
}

/* Room left in the caller's budget for ctx's objects (or an error). */
static int looks_take(struct res_walk *w, const struct ibvd_context *ctx)
{
	size_t n = ctx_looks(w->kind, ctx);

	if (w->sel->admin)
		return 0;
	if (n > RES_MAX_LOOKS - w->looks)
		return ibvd_call_error(w->call, -E2BIG,
				       "more than %u objects to look through for one "
				       "listing: filter by dev, pid, ...",
				       RES_MAX_LOOKS);
	w->looks += n;
	return 0;
}

static int walk(struct ibvd_call *call, const struct res_kind *k,
		const struct res_sel *sel, json_t *out)
{
	struct ibvd_daemon *d = ibvd_call_daemon(call);
	struct res_walk w = { .call = call, .sel = sel, .kind = k, .out = out };
	struct ibvd_device *dev;
	struct ibvd_context *ctx;
	int ret;

	TAILQ_FOREACH(dev, &d->devices, link) {
		if (sel->place.dev && strcmp(sel->place.dev, dev->name))
			continue;
		TAILQ_FOREACH(ctx, &dev->contexts, dev_link) {
			w.ctx = ctx;
			ibvd_client_info(ctx->session, &w.owner);
			if (!ctx_visible(&w.owner, sel) ||
			    !owner_matches(&w.owner, sel))
				continue;
			ret = looks_take(&w, ctx);
			if (ret < 0)
				return ret;
			ret = walk_ctx(&w, ctx);
			if (ret == -EMSGSIZE)
				return ibvd_res_too_large(call,
							  json_array_size(out));
			if (ret)
				return ret < 0 ? ret : -ENOMEM;
		}
	}
	return 0;
}

static const struct res_kind *kind_by_name(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(res_kinds); i++)
		if (!strcmp(res_kinds[i].name, name))
			return &res_kinds[i];
	return NULL;
}

int ibvd_res_admin_show(struct ibvd_call *call, const char *kind,
			size_t argc, char **argv, int details, json_t *out)
{
	const struct res_kind *k = kind_by_name(kind);
	struct res_sel sel;
	int ret;

	if (!k)
		return ibvd_call_error(call, -EINVAL, "unknown resource %.64s",
				       kind);
	ret = parse_sel(call, k, argc, argv, details, &sel);
	if (ret < 0)
		return ret;
	return walk(call, k, &sel, out);
}

/* ---- summary ----------------------------------------------------------- */

/*
 * Visible objects of one kind on dev: as many as its listing has rows,
 * counted from the contexts' handle tables (no rows built: a tenant's
 * million PDs cost the control thread no JSON).
 */
static int count_kind(struct ibvd_call *call, const char *kind,
		      const struct ibvd_device *dev, json_int_t *n)
{
	char *argv[2] = { (char *)"dev", (char *)dev->name };
	const struct res_kind *k = kind_by_name(kind);
	struct ibvd_client_info caller, owner;
	const struct ibvd_context *ctx;
	size_t count;
	int ret;

	*n = 0;
	if (k) {
		ibvd_client_info(call->session, &caller);
		TAILQ_FOREACH(ctx, &dev->contexts, dev_link) {
			ibvd_client_info(ctx->session, &owner);
			if (!ibvd_call_privileged(call) && owner.uid != caller.uid)
				continue;
			*n += k->obj == IBVD_OBJ_ANY ? 1 :
			      ibvd_handle_count(&ctx->handles, k->obj);
		}
		return 0;
	}
	/* cm ids live in the CM's world, not in contexts: ask its listing */
	ret = ibvd_cm_admin_count(call, 2, argv, &count);
	*n = (json_int_t)count;
	return ret;
}

/* rdma's summary keys, in its order */
static const char *const summary_keys[] = {
	"pd", "cq", "qp", "cm_id", "mr", "ctx", "srq",
};

static int summary_dev(struct ibvd_call *call, const struct ibvd_device *dev,
		       json_t *out)
{
	json_t *o = json_object();
	json_int_t n;
	size_t i;
	int ret = -ENOMEM;

	if (!o)
		return -ENOMEM;
	if (set_int(o, "ifindex", dev->ifindex) || set_str(o, "ifname", dev->name))
		goto fail;
	for (i = 0; i < ARRAY_SIZE(summary_keys); i++) {
		ret = count_kind(call, summary_keys[i], dev, &n);
		if (ret < 0)
			goto fail;
		ret = -ENOMEM;
		if (set_int(o, summary_keys[i], n))
			goto fail;
	}
	return json_array_append_new(out, o) ? -ENOMEM : 0;
fail:
	json_decref(o);
	return ret;
}

int ibvd_res_admin_summary(struct ibvd_call *call, const char *dev_name,
			   json_t *out)
{
	struct ibvd_daemon *d = ibvd_call_daemon(call);
	struct ibvd_device *dev;
	int ret;

	if (dev_name && !ibvd_device_find(&d->devices, dev_name))
		return ibvd_call_error(call, -ENODEV,
				       "unknown resource or device %.64s",
				       dev_name);
	TAILQ_FOREACH(dev, &d->devices, link) {
		if (dev_name && strcmp(dev_name, dev->name))
			continue;
		ret = summary_dev(call, dev, out);
		if (ret < 0)
			return ret;
	}
	return 0;
}
