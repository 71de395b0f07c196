/*
 * ibvctl client show: one row per client process (verbs contexts and CM
 * event channels of the same pid together), with its cgroup and what it
 * holds: contexts, verbs objects (what the rdma cgroup calls hca_object),
 * CM ids and the bytes its memory registrations pin, each count followed by
 * the limit of its uid's tenant (tenant.h) for all devices.  Non-admins see
 * only their own uid.
 *
 * A peer outside our pid namespace has pid 0: each of its connections is
 * its own row, since there is nothing to group them by.
 *
 * Control thread only: sessions, contexts and their objects are its own.
 */
#include <config.h>

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cm/cm.h"
#include "core/objects.h"
#include "res.h"
#include "server/call.h"
#include "server/clients.h"
#include "server/daemon.h"
#include "tenant/tenant.h"
#include "util.h"
#include "verbs/context.h"

/* The kinds that count as "objects": the rdma cgroup's hca_object. */
static const enum ibvd_obj_kind hca_objects[] = {
	IBVD_OBJ_PD, IBVD_OBJ_MR, IBVD_OBJ_MW, IBVD_OBJ_CQ, IBVD_OBJ_QP,
	IBVD_OBJ_SRQ, IBVD_OBJ_AH, IBVD_OBJ_XRCD, IBVD_OBJ_DM,
};

/* What one connection adds to its process's row. */
struct client_use {
	json_int_t contexts;
	json_int_t objects;
	json_int_t cm_ids;
	json_int_t pinned;
};

/*
 * Columns after pid uid gid comm cgroup, in order: a usage summed over the
 * process's connections or, for the .limit ones, its tenant's limit.
 */
static const struct {
	const char *key;
	bool limit;
	enum ibvd_limit_kind kind;
} columns[] = {
	{ "contexts", false, 0 },
	{ "hca_handle", true, IBVD_LIMIT_HCA_HANDLE },
	{ "objects", false, 0 },
	{ "hca_object", true, IBVD_LIMIT_HCA_OBJECT },
	{ "cm_id", false, 0 },
	{ "pinned", false, 0 },
	{ "memlock", true, IBVD_LIMIT_MEMLOCK },
};

struct client_sel {
	bool admin;
	uid_t caller;
	long long pid;			/* -1: any */
	long long uid;			/* -1: any */
	const char *cgroup;		/* a prefix of the cgroup path; NULL: any */
};

static int add_pinned(uint32_t handle, enum ibvd_obj_kind kind, void *obj,
		      void *arg)
{
	const struct ibvd_mr *mr = obj;

	(void)handle;
	(void)kind;
	*(json_int_t *)arg += (json_int_t)mr->pinned;
	return 0;
}

static void session_use(const struct ibvd_client_info *s,
			struct client_use *u)
{
	size_t i;

	memset(u, 0, sizeof(*u));
	if (s->ctx)
		u->contexts = 1;
	/*
	 * A context shared between processes (ibv_import_device) has its
	 * objects counted once, with the member that stands for it: one of
	 * the uid they are charged to, if any is left.
	 */
	if (s->ctx && ibvd_context_stand_in(s->ctx) == s->session) {
		for (i = 0; i < ARRAY_SIZE(hca_objects); i++)
			u->objects += ibvd_handle_count(&s->ctx->handles,
							hca_objects[i]);
		ibvd_handle_foreach(&s->ctx->handles, IBVD_OBJ_MR, add_pinned,
				    &u->pinned);
	}
	u->cm_ids = ibvd_cm_session_ids(s->session);
}

/* The row already made for pid (pid 0 never matches), or NULL. */
static json_t *row_of(json_t *out, pid_t pid)
{
	json_t *o;
	size_t i;

	if (!pid)
		return NULL;
	json_array_foreach(out, i, o)
		if (json_integer_value(json_object_get(o, "pid")) == pid)
			return o;
	return NULL;
}

/* A string that may not be UTF-8 (a comm, a cgroup path): "?" then. */
static json_t *text_value(const char *s)
{
	json_t *v = json_string(s);

	return v ? v : json_string("?");
}

/* A limit as the rdma cgroup's files show it: the number, or "max". */
static json_t *limit_value(uint64_t max)
{
	if (max == IBVD_LIMIT_UNLIMITED || max > (uint64_t)LLONG_MAX)
		return json_string("max");
	return json_integer((json_int_t)max);
}

static int new_row(json_t *out, const struct ibvd_client_info *s, json_t **ret)
{
	json_t *o = json_pack("{s:I, s:I, s:I}",
			      "pid", (json_int_t)s->pid,
			      "uid", (json_int_t)s->uid,
			      "gid", (json_int_t)s->gid);
	const char *cgroup = s->cgroup[0] ? s->cgroup : "-";
	json_t *v;
	size_t i;

	if (!o || json_object_set_new(o, "comm", text_value(s->comm)) ||
	    json_object_set_new(o, "cgroup", text_value(cgroup)))
		goto nomem;
	for (i = 0; i < ARRAY_SIZE(columns); i++) {
		v = columns[i].limit ?
		    limit_value(s->tenant->limits.max[columns[i].kind]) :
		    json_integer(0);
		if (json_object_set_new(o, columns[i].key, v))
			goto nomem;
	}
	if (json_array_append_new(out, o))
		return -ENOMEM;	/* took o */
	*ret = o;
	return 0;
nomem:
	json_decref(o);
	return -ENOMEM;
}

static int add_to(json_t *o, const char *key, json_int_t n)
{
	json_int_t v = json_integer_value(json_object_get(o, key));

	return json_object_set_new(o, key, json_integer(v + n)) ? -ENOMEM : 0;
}

static bool client_selected(const struct ibvd_client_info *s,
			    const struct client_sel *sel)
{
	/* ibvctl's own connection and half-open ones are not clients */
	if (s->state != IBVD_SESSION_CONTEXT && s->state != IBVD_SESSION_CM)
		return false;
	if (!sel->admin && s->uid != sel->caller)
		return false;
	if (sel->pid >= 0 && s->pid != sel->pid)
		return false;
	if (sel->uid >= 0 && s->uid != sel->uid)
		return false;
	/* an unknown cgroup ("") matches no prefix, which starts with '/' */
	return !sel->cgroup ||
	       !strncmp(s->cgroup, sel->cgroup, strlen(sel->cgroup));
}

static int add_session(json_t *out, const struct ibvd_client_info *s)
{
	struct client_use u;
	json_t *o = row_of(out, s->pid);
	int ret;

	if (!o) {
		ret = new_row(out, s, &o);
		if (ret < 0)
			return ret;
	}
	session_use(s, &u);
	return add_to(o, "contexts", u.contexts) | add_to(o, "objects", u.objects) |
	       add_to(o, "cm_id", u.cm_ids) | add_to(o, "pinned", u.pinned);
}

/* "pid N" / "uid N": a plain decimal number. */
static int parse_id(struct ibvd_call *call, const char *key, const char *value,
		    long long *ret)
{
	char *end;

	if (*value < '0' || *value > '9')
		goto bad;
	*ret = strtoll(value, &end, 10);
	if (!*end && *ret <= 0x7fffffff)
		return 0;
bad:
	return ibvd_call_error(call, -EINVAL, "bad %s value %.64s", key, value);
}

/* "cgroup PREFIX": a path prefix, "/" first as in ibverbsd.conf's rules. */
static int parse_cgroup(struct ibvd_call *call, const char *value,
			const char **ret)
{
	if (value[0] != '/')
		return ibvd_call_error(call, -EINVAL,
				       "bad cgroup value %.64s: a path starting with /",
				       value);
	*ret = value;
	return 0;
}

static int parse_client_sel(struct ibvd_call *call, size_t argc, char **argv,
			    struct client_sel *sel)
{
	struct ibvd_client_info caller;
	size_t i;
	int ret;

	ibvd_client_info(call->session, &caller);
	sel->admin = ibvd_call_privileged(call);
	sel->caller = caller.uid;
	sel->pid = sel->uid = -1;
	sel->cgroup = NULL;
	for (i = 0; i < argc; i += 2) {
		bool known = !strcmp(argv[i], "pid") || !strcmp(argv[i], "uid") ||
			     !strcmp(argv[i], "cgroup");

		if (known && i + 1 == argc)
			return ibvd_call_error(call, -EINVAL, "%.64s needs a value",
					       argv[i]);
		if (!known)
			ret = ibvd_call_error(call, -EINVAL,
					      "unknown filter %.64s for client",
					      argv[i]);
		else if (!strcmp(argv[i], "pid"))
			ret = parse_id(call, "pid", argv[i + 1], &sel->pid);
		else if (!strcmp(argv[i], "uid"))
			ret = parse_id(call, "uid", argv[i + 1], &sel->uid);
		else
			ret = parse_cgroup(call, argv[i + 1], &sel->cgroup);
		if (ret < 0)
			return ret;
	}
	return 0;
}

struct client_walk {
	const struct client_sel *sel;
	json_t *out;
};

static int add_selected(const struct ibvd_client_info *c, void *arg)
{
	const struct client_walk *w = arg;

	if (!client_selected(c, w->sel))
		return 0;
	return add_session(w->out, c) ? -ENOMEM : 0;
}

/*
 * How many of out's rows one reply holds, if not all: rows grow as a
 * process's sessions are added to them, so the listing is measured once
 * it is whole.  0 when it fits.
 */
static size_t rows_that_fit(const json_t *out)
{
	size_t i, len = 1;

	if (json_dumpb(out, NULL, 0, JSON_COMPACT) <= IBVD_RES_MAX_JSON)
		return 0;
	for (i = 0; i < json_array_size(out); i++) {
		len += json_dumpb(json_array_get(out, i), NULL, 0, JSON_COMPACT) + 1;
		if (len > IBVD_RES_MAX_JSON)
			break;
	}
	return i;
}

int ibvd_client_admin_show(struct ibvd_call *call, size_t argc, char **argv,
			   json_t *out)
{
	struct client_sel sel;
	struct client_walk w = { &sel, out };
	size_t fit;
	int ret;

	ret = parse_client_sel(call, argc, argv, &sel);
	if (ret < 0)
		return ret;
	ret = ibvd_clients_foreach(ibvd_call_daemon(call), add_selected, &w);
	if (ret == 0 && (fit = rows_that_fit(out)))
		return ibvd_res_too_large(call, fit);
	return ret;
}
