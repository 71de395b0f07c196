/*
 * ibvctl resource show cm_id: the CM ids, with rdma-resource(8)'s keys and
 * filters.  A caller outside root and the admin group sees only the ids of
 * its own uid: addresses and peers of other users are theirs.
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
#include "res.h"
#include "server/call.h"
#include "server/clients.h"
#include "util.h"

#define MAX_FILTERS	8

enum filter_kind { F_NUM, F_STR, F_ADDR };

static const struct {
	const char *key;
	enum filter_kind kind;
} filter_keys[] = {
	{ "cm-idn", F_NUM }, { "lqpn", F_NUM }, { "pid", F_NUM },
	{ "src-port", F_NUM }, { "dst-port", F_NUM },
	{ "qp-type", F_STR }, { "state", F_STR }, { "ps", F_STR },
	{ "comm", F_STR },
	{ "src-addr", F_ADDR }, { "dst-addr", F_ADDR },
};

struct filter {
	const char *key;
	enum filter_kind kind;
	const char *value;
};

struct selection {
	struct ibvd_admin_place place;
	struct filter f[MAX_FILTERS];
	size_t n;
	bool all_users;
	uid_t uid;
};

/* ---- values as rdma(8) prints them ---------------------------------- */

/* rdma's names for them (XRC's halves by the kernel's names). */
static const char *qp_type_name(uint32_t t)
{
	switch (t) {
	case IBV_QPT_RC:	return "RC";
	case IBV_QPT_UC:	return "UC";
	case IBV_QPT_XRC_SEND:	return "XRC_INI";
	case IBV_QPT_XRC_RECV:	return "XRC_TGT";
	default:		return "UD";
	}
}

/* The address without ":port", for the src-addr/dst-addr filters. */
static void host_str(const char *addr, char *buf, size_t len)
{
	char *colon;

	snprintf(buf, len, "%s", addr);
	colon = strrchr(buf, ':');
	if (colon)
		*colon = '\0';
}

/* ---- filters -------------------------------------------------------- */

static int filter_add(struct ibvd_call *call, const char *key,
		      const char *value, void *arg)
{
	struct selection *sel = arg;
	bool dummy;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(filter_keys); i++)
		if (!strcmp(filter_keys[i].key, key))
			break;
	if (i == ARRAY_SIZE(filter_keys))
		return ibvd_call_error(call, -EINVAL, "unknown filter %.64s", key);
	if (filter_keys[i].kind == F_NUM && !ibvd_admin_num_spec(value, 0, &dummy))
		return ibvd_call_error(call, -EINVAL, "bad %s value %.64s", key,
				       value);
	if (sel->n == MAX_FILTERS)
		return ibvd_call_error(call, -EINVAL, "too many filters");
	sel->f[sel->n++] = (struct filter){ key, filter_keys[i].kind, value };
	return 0;
}

static int parse_selection(struct ibvd_call *call, size_t argc, char **argv,
			   struct selection *sel)
{
	struct ibvd_client_info caller;

	memset(sel, 0, sizeof(*sel));
	ibvd_client_info(call->session, &caller);
	sel->all_users = ibvd_call_privileged(call);
	sel->uid = caller.uid;
	return ibvd_admin_parse_pairs(call, argc, argv, &sel->place, filter_add,
				      sel);
}

/* An id with its owner, as the filters and the row read them. */
struct id_row {
	const struct ibvd_cm_id_info *id;
	struct ibvd_client_info owner;
};

static unsigned long num_of(const struct id_row *r, const char *key)
{
	if (!strcmp(key, "cm-idn"))
		return r->id->idn;
	if (!strcmp(key, "lqpn"))
		return r->id->lqpn;
	if (!strcmp(key, "pid"))
		return (unsigned long)r->owner.pid;
	if (!strcmp(key, "src-port"))
		return r->id->src_port;
	return r->id->dst_port;
}

static const char *str_of(const struct id_row *r, const char *key)
{
	if (!strcmp(key, "qp-type"))
		return qp_type_name(r->id->qp_type);
	if (!strcmp(key, "state"))
		return r->id->state;
	if (!strcmp(key, "ps"))
		return r->id->ps;
	return r->owner.comm;
}

static bool filter_match(const struct id_row *r, const struct filter *f)
{
	const char *addr;
	char host[IBVD_CM_ADDR_STR];
	bool match;

	switch (f->kind) {
	case F_NUM:
		ibvd_admin_num_spec(f->value, num_of(r, f->key), &match);
		return match;
	case F_STR:
		return !strcasecmp(f->value, str_of(r, f->key));
	case F_ADDR:
		addr = !strcmp(f->key, "src-addr") ? r->id->src : r->id->dst;
		if (!addr[0])
			return false;
		host_str(addr, host, sizeof(host));
		return !strcmp(f->value, host);
	}
	return false;
}

static bool selected(const struct id_row *r, const struct selection *sel)
{
	const struct ibvd_cm_id_info *id = r->id;
	size_t i;

	if (!sel->all_users && r->owner.uid != sel->uid)
		return false;
	if (sel->place.dev && (!id->dev || strcmp(sel->place.dev, id->dev->name)))
		return false;
	if (sel->place.port >= 0 &&
	    (!id->bound || id->port_num != sel->place.port))
		return false;
	for (i = 0; i < sel->n; i++)
		if (!filter_match(r, &sel->f[i]))
			return false;
	return true;
}

/* ---- output --------------------------------------------------------- */

static int set_int(json_t *o, const char *key, json_int_t v)
{
	return json_object_set_new(o, key, json_integer(v));
}

static int set_str(json_t *o, const char *key, const char *v)
{
	json_t *s = json_string(v);

	/* A name that is not UTF-8 (a comm) must not fail the listing. */
	return json_object_set_new(o, key, s ? s : json_string("?"));
}

static int set_addr(json_t *o, const char *key, const char *addr)
{
	return addr[0] ? set_str(o, key, addr) : 0;
}

/* Keys in rdma's order; those it omits for an id are omitted here too. */
static int fill_id(json_t *o, const struct id_row *r)
{
	const struct ibvd_cm_id_info *id = r->id;
	int ret = 0;

	if (id->dev) {
		ret |= set_int(o, "ifindex", id->dev->ifindex);
		ret |= set_str(o, "ifname", id->dev->name);
	}
	if (id->bound)
		ret |= set_int(o, "port", id->port_num);
	ret |= set_int(o, "cm-idn", id->idn);
	if (id->lqpn)
		ret |= set_int(o, "lqpn", id->lqpn);
	ret |= set_str(o, "qp-type", qp_type_name(id->qp_type));
	ret |= set_str(o, "state", id->state);
	ret |= set_str(o, "ps", id->ps);
	ret |= set_int(o, "pid", r->owner.pid);
	ret |= set_str(o, "comm", r->owner.comm);
	ret |= set_addr(o, "src-addr", id->src);
	ret |= set_addr(o, "dst-addr", id->dst);
	return ret ? -ENOMEM : 0;
}

struct listing {
	const struct selection *sel;
	json_t *out;			/* NULL: only count */
	size_t n;
	size_t json_len;		/* of out so far */
};

static int list_one(const struct ibvd_cm_id_info *id, void *arg)
{
	struct listing *l = arg;
	struct id_row r = { .id = id };
	json_t *o;

	ibvd_client_info(id->owner, &r.owner);
	if (!selected(&r, l->sel))
		return 0;
	l->n++;
	if (!l->out)
		return 0;
	o = json_object();
	if (!o)
		return -ENOMEM;
	if (fill_id(o, &r) < 0) {
		json_decref(o);
		return -ENOMEM;
	}
	/* Takes o, even when it fails. */
	return ibvd_res_append(l->out, o, &l->json_len);
}

int ibvd_cm_admin_show(struct ibvd_call *call, size_t argc, char **argv,
		       json_t *out)
{
	struct selection sel;
	struct listing l = { .sel = &sel, .out = out };
	int ret;

	ret = parse_selection(call, argc, argv, &sel);
	if (ret < 0)
		return ret;
	ret = ibvd_cm_foreach_id(sel.all_users ? NULL : &sel.uid, list_one, &l);
	if (ret == -EMSGSIZE)
		return ibvd_res_too_large(call, json_array_size(out));
	return ret;
}

int ibvd_cm_admin_count(struct ibvd_call *call, size_t argc, char **argv,
			size_t *n)
{
	struct selection sel;
	struct listing l = { .sel = &sel };
	int ret;

	ret = parse_selection(call, argc, argv, &sel);
	if (ret < 0)
		return ret;
	ret = ibvd_cm_foreach_id(sel.all_users ? NULL : &sel.uid, list_one, &l);
	*n = l.n;
	return ret;
}
