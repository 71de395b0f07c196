/*
 * ibvctl resource show cm_id: the CM ids, with rdma-resource(8)'s keys and
 * filters.  A caller outside root and the admin group sees only the ids of
 * its own uid: addresses and peers of other users are theirs.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "cm/internal.h"
#include "core/device.h"
#include "server/call.h"
#include "res.h"
#include "server/session.h"
#include "util.h"

#define MAX_FILTERS	8
#define ADDR_STR_LEN	64

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
	const char *dev;		/* NULL: every device */
	long port;			/* -1: every port */
	struct filter f[MAX_FILTERS];
	size_t n;
	bool all_users;
	uid_t uid;
};

/* ---- values as rdma(8) prints them ---------------------------------- */

static const char *qp_type_name(uint32_t t)
{
	return t == IBV_QPT_RC ? "RC" : t == IBV_QPT_UC ? "UC" : "UD";
}

/* The address without ":port", for the src-addr/dst-addr filters. */
static void host_str(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char *colon;

	cm_addr_str(ss, buf, len);
	colon = strrchr(buf, ':');
	if (colon)
		*colon = '\0';
}

/*
 * The device an id is listed under: its own, else the one its wildcard
 * address stands for (the first: every local address is there), shown
 * without a port as rdma(8) shows a listener on every device.
 */
static const struct ibvd_device *shown_dev(const struct ibvd_cm_id *id)
{
	return id->dev ? id->dev : cm_default_device(id->cm);
}

/* ---- filters -------------------------------------------------------- */

/* "N", "A-B" or a comma-separated list of them; false if malformed. */
static bool num_spec_ok(const char *spec, unsigned long v, bool *match)
{
	char *end;
	unsigned long a, b;

	*match = false;
	for (;;) {
		a = strtoul(spec, &end, 10);
		if (end == spec)
			return false;
		b = a;
		if (*end == '-') {
			spec = end + 1;
			b = strtoul(spec, &end, 10);
			if (end == spec || b < a)
				return false;
		}
		if (v >= a && v <= b)
			*match = true;
		if (*end == '\0')
			return true;
		if (*end != ',')
			return false;
		spec = end + 1;
	}
}

static int filter_add(struct ibvd_call *call, struct selection *sel,
		      const char *key, const char *value)
{
	bool dummy;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(filter_keys); i++)
		if (!strcmp(filter_keys[i].key, key))
			break;
	if (i == ARRAY_SIZE(filter_keys))
		return ibvd_call_error(call, -EINVAL, "unknown filter %.64s", key);
	if (filter_keys[i].kind == F_NUM && !num_spec_ok(value, 0, &dummy))
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
	size_t i;
	int ret;

	memset(sel, 0, sizeof(*sel));
	sel->port = -1;
	sel->all_users = call->session->privileged;
	sel->uid = call->session->cred.uid;
	for (i = 0; i < argc; i += 2) {
		if (i + 1 == argc)
			return ibvd_call_error(call, -EINVAL, "%.64s needs a value",
					       argv[i]);
		if (!strcmp(argv[i], "link"))
			ret = ibvd_admin_parse_link(call, argv[i + 1], &sel->dev,
						    &sel->port);
		else if (!strcmp(argv[i], "dev"))
			ret = (sel->dev = argv[i + 1], 0);
		else
			ret = filter_add(call, sel, argv[i], argv[i + 1]);
		if (ret < 0)
			return ret;
	}
	return 0;
}

static unsigned long num_of(const struct ibvd_cm_id *id, const char *key)
{
	if (!strcmp(key, "cm-idn"))
		return id->idn;
	if (!strcmp(key, "lqpn"))
		return id->lqpn;
	if (!strcmp(key, "pid"))
		return (unsigned long)id->cm->session->cred.pid;
	if (!strcmp(key, "src-port"))
		return cm_addr_port(&id->src);
	return cm_addr_port(&id->dst);
}

static const char *str_of(const struct ibvd_cm_id *id, const char *key)
{
	if (!strcmp(key, "qp-type"))
		return qp_type_name(id->qp_type);
	if (!strcmp(key, "state"))
		return cm_state_name(id->state);
	if (!strcmp(key, "ps"))
		return cm_ps_name(id->ps);
	return id->cm->session->comm;
}

static bool filter_match(const struct ibvd_cm_id *id, const struct filter *f)
{
	const struct sockaddr_storage *ss;
	char host[ADDR_STR_LEN];
	bool match;

	switch (f->kind) {
	case F_NUM:
		num_spec_ok(f->value, num_of(id, f->key), &match);
		return match;
	case F_STR:
		return !strcasecmp(f->value, str_of(id, f->key));
	case F_ADDR:
		ss = !strcmp(f->key, "src-addr") ? &id->src : &id->dst;
		if (!ss->ss_family)
			return false;
		host_str(ss, host, sizeof(host));
		return !strcmp(f->value, host);
	}
	return false;
}

static bool selected(const struct ibvd_cm_id *id, const struct selection *sel)
{
	size_t i;

	if (!sel->all_users && id->cm->session->cred.uid != sel->uid)
		return false;
	if (sel->dev && (!shown_dev(id) ||
			 strcmp(sel->dev, shown_dev(id)->name)))
		return false;
	if (sel->port >= 0 && (!id->dev || id->port_num != sel->port))
		return false;
	for (i = 0; i < sel->n; i++)
		if (!filter_match(id, &sel->f[i]))
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

static int set_addr(json_t *o, const char *key,
		    const struct sockaddr_storage *ss)
{
	char buf[ADDR_STR_LEN];

	if (!ss->ss_family)
		return 0;
	cm_addr_str(ss, buf, sizeof(buf));
	return set_str(o, key, buf);
}

/* Keys in rdma's order; those it omits for an id are omitted here too. */
static int fill_id(json_t *o, const struct ibvd_cm_id *id)
{
	const struct ibvd_session *s = id->cm->session;
	const struct ibvd_device *dev = shown_dev(id);
	int ret = 0;

	if (dev) {
		ret |= set_int(o, "ifindex", dev->ifindex);
		ret |= set_str(o, "ifname", dev->name);
	}
	if (id->dev)
		ret |= set_int(o, "port", id->port_num);
	ret |= set_int(o, "cm-idn", id->idn);
	if (id->lqpn)
		ret |= set_int(o, "lqpn", id->lqpn);
	ret |= set_str(o, "qp-type", qp_type_name(id->qp_type));
	ret |= set_str(o, "state", cm_state_name(id->state));
	ret |= set_str(o, "ps", cm_ps_name(id->ps));
	ret |= set_int(o, "pid", s->cred.pid);
	ret |= set_str(o, "comm", s->comm);
	ret |= set_addr(o, "src-addr", &id->src);
	ret |= set_addr(o, "dst-addr", &id->dst);
	return ret ? -ENOMEM : 0;
}

int ibvd_cm_admin_show(struct ibvd_call *call, size_t argc, char **argv,
		       struct json_t *out)
{
	const struct ibvd_cm_id *id;
	struct selection sel;
	json_t *o;
	int ret;

	ret = parse_selection(call, argc, argv, &sel);
	if (ret < 0)
		return ret;
	TAILQ_FOREACH(id, &cm_world.ids, all_link) {
		if (!selected(id, &sel))
			continue;
		o = json_object();
		if (!o)
			return -ENOMEM;
		if (fill_id(o, id) < 0) {
			json_decref(o);
			return -ENOMEM;
		}
		/* Takes o, even when it fails. */
		if (json_array_append_new(out, o) < 0)
			return -ENOMEM;
	}
	return 0;
}
