/*
 * ibvctl limit show and limit set.
 *
 * show prints, per tenant, one row for all devices and one per device:
 * the limits in force ("max", rdma.max's vocabulary), the usage
 * ("current", rdma.current's), or what was refused ("refused": charges
 * over each limit, then the events dropped, the sessions closed for not
 * reading, the log lines suppressed; every row has every key).  A uid asked for by number is shown even
 * without sessions: its rule is then chosen from its passwd entry (gid
 * and getgrouplist(3)), as a client of that uid would be matched, minus
 * the cgroup it cannot have yet.
 *
 * One reply holds what one frame does (a few dozen tenants with one
 * device, fewer with more): show fills it with whole tenants in uid
 * order and, when more are left, ends the list with {"more_after": UID};
 * ibvctl then asks again with "after UID" until none are, so an
 * administrator sees every tenant in one listing.
 *
 * set edits the daemon's in-memory configuration, the same entries the
 * file has, and applies it to every tenant at once.  The file is not
 * rewritten: a reload or restart returns to it.
 *
 * Control thread only, like the configuration and the tenants.
 */
#include <config.h>

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "args.h"
#include "core/device.h"
#include "core/rate.h"
#include "limit.h"
#include "res.h"
#include "log.h"
#include "server/call.h"
#include "server/clients.h"
#include "server/daemon.h"
#include "tenant/tenant.h"
#include "util.h"
#include "verbs/verbs.h"

/* Client words echoed in messages are cut short. */
#define ARG_FMT	"%.64s"

/* Whose limits a row shows. */
struct subject {
	uid_t uid;
	const struct ibvd_config_limit_rule *rule;
	const struct ibvd_tenant *t;		/* NULL: no session */
};

enum show_what {
	SHOW_MAX,
	SHOW_CURRENT,
	SHOW_REFUSED,
};

struct show_sel {
	enum show_what what;
	long long uid;			/* -1: every visible tenant */
	long long after;		/* only uids above it; -1: all */
	const char *dev;		/* NULL: all devices, then each */
};

/* ---- show --------------------------------------------------------------- */

/* A plain decimal uid (what "uid" takes in show and set). */
static int parse_uid(const char *s, uid_t *ret)
{
	unsigned long n;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	n = strtoul(s, &end, 10);
	if (errno || *end || n > (uid_t)-2)
		return -EINVAL;
	*ret = (uid_t)n;
	return 0;
}

/* What show shows, by its word (enum show_what's order). */
static const char *const show_names[] = { "max", "current", "refused" };

static int parse_show(struct ibvd_call *call, size_t argc, char **argv,
		      struct show_sel *sel)
{
	size_t i = 0, k;
	uid_t uid;

	sel->what = SHOW_MAX;
	sel->uid = -1;
	sel->after = -1;
	sel->dev = NULL;
	/* a prefix too, as ibvctl's commands and resource kinds take them */
	for (k = 0; argc && argv[0][0] && k < ARRAY_SIZE(show_names); k++) {
		if (!strncmp(argv[0], show_names[k], strlen(argv[0]))) {
			sel->what = (enum show_what)k;
			i = 1;
			break;
		}
	}
	for (; i < argc; i += 2) {
		if (strcmp(argv[i], "dev") && strcmp(argv[i], "uid") &&
		    strcmp(argv[i], "after"))
			return ibvd_call_error(call, -EINVAL,
					       "unknown filter " ARG_FMT " for limit show",
					       argv[i]);
		if (i + 1 == argc)
			return ibvd_call_error(call, -EINVAL, "%s needs a value",
					       argv[i]);
		if (!strcmp(argv[i], "dev")) {
			sel->dev = argv[i + 1];
		} else if (!strcmp(argv[i], "uid")) {
			if (parse_uid(argv[i + 1], &uid))
				return ibvd_call_error(call, -EINVAL,
						       "bad uid " ARG_FMT, argv[i + 1]);
			sel->uid = uid;
		} else {
			if (parse_uid(argv[i + 1], &uid))
				return ibvd_call_error(call, -EINVAL,
						       "bad uid " ARG_FMT, argv[i + 1]);
			sel->after = uid;
		}
	}
	return 0;
}

/* A limit as ibvctl shows it: an integer, or "max". */
static json_t *limit_json(uint64_t v)
{
	if (v == IBVD_LIMIT_UNLIMITED)
		return json_string("max");
	return json_integer((json_int_t)v);
}

static int put_count(json_t *row, const char *key, uint64_t v)
{
	return json_object_set_new(row, key, json_integer((json_int_t)v)) ?
	       -ENOMEM : 0;
}

/* Engine threads add to events_dropped while we read. */
static uint64_t load(const uint64_t *v)
{
	return __atomic_load_n(v, __ATOMIC_RELAXED);
}

static int put_refused(json_t *row, const struct ibvd_tenant_counters *c)
{
	int k;

	for (k = 0; k < IBVD_LIMIT_NKINDS; k++)
		if (put_count(row, ibvd_limit_names[k], c->refused[k]) < 0)
			return -ENOMEM;
	if (put_count(row, "events_dropped", load(&c->events_dropped)) < 0 ||
	    put_count(row, "slow_reader", c->slow_reader) < 0 ||
	    put_count(row, "log_suppressed", load(&c->log_suppressed)) < 0)
		return -ENOMEM;
	return 0;
}

/*
 * What the daemon caps per uid, whatever the rules say: the daemon's own
 * memory and mappings a tenant's objects cost (verbs.h, tenant.h).  Held
 * over all devices: a device row says 0 (current) or max.
 */
static const char *const daemon_caps[] = {
	"ring_bytes", "direct_pairs", "mapped_mrs", "mapped_bytes", "objects",
	"cm_ports",
};
#define NDAEMON_CAPS	(sizeof(daemon_caps) / sizeof(daemon_caps[0]))

static bool daemon_cap(const char *key)
{
	size_t i;

	for (i = 0; i < NDAEMON_CAPS; i++)
		if (!strcmp(key, daemon_caps[i]))
			return true;
	return false;
}

static int put_daemon_caps(json_t *row, const struct show_sel *sel,
			   bool all_row, const struct ibvd_tenant *t)
{
	bool counted = all_row && t;
	uint64_t held[NDAEMON_CAPS] = { counted ? t->ring_bytes : 0,
					counted ? t->direct_pairs : 0,
					counted ? t->mapped_mrs : 0,
					counted ? t->mapped_bytes : 0,
					counted ? t->usage[IBVD_LIMIT_HCA_OBJECT] : 0,
					counted ? t->cm_ports : 0 };
	const uint64_t cap[NDAEMON_CAPS] = { IBVD_UID_MAX_RING_BYTES,
					     IBVD_UID_MAX_DIRECT_PAIRS,
					     IBVD_UID_MAX_MAPPED_MRS,
					     IBVD_UID_MAX_MAPPED_BYTES,
					     ibvd_uid_max_objects(),
					     ibvd_uid_max_cm_ports() };
	size_t i;
	json_t *v;

	for (i = 0; i < NDAEMON_CAPS; i++) {
		if (sel->what == SHOW_CURRENT)
			v = json_integer((json_int_t)held[i]);
		else
			v = all_row ? json_integer((json_int_t)cap[i]) :
				      json_string("max");
		if (json_object_set_new(row, daemon_caps[i], v))
			return -ENOMEM;
	}
	return 0;
}

/*
 * Every counted kind, then bandwidth (the limit, or the bytes it was
 * paid: `paced`); or the refusals.
 */
static int put_values(json_t *row, const struct show_sel *sel,
		      const struct ibvd_quota *q, const uint64_t *usage,
		      uint64_t paced, const struct ibvd_tenant_counters *c)
{
	int k;

	if (sel->what == SHOW_REFUSED)
		return put_refused(row, c);
	for (k = 0; k < IBVD_LIMIT_NKINDS; k++)
		if (json_object_set_new(row, ibvd_limit_names[k],
					sel->what == SHOW_CURRENT ?
					json_integer((json_int_t)usage[k]) :
					limit_json(q->max[k])))
			return -ENOMEM;
	if (json_object_set_new(row, "bandwidth",
				sel->what == SHOW_CURRENT ?
				json_integer((json_int_t)paced) :
				limit_json(q->bandwidth)))
		return -ENOMEM;
	return 0;
}

/* A row of who's; all_row: of all devices together, else of device dev. */
static int add_row(struct ibvd_call *call, json_t *out,
		   const struct subject *who, bool all_row, const char *dev,
		   const struct show_sel *sel, const struct ibvd_quota *q,
		   const uint64_t *usage, const struct ibvd_tenant_counters *c)
{
	const struct ibvd_config *cfg = ibvd_call_daemon(call)->cfg;
	/* bandwidth limits all devices together: device rows paid nothing */
	uint64_t paced = all_row && who->t ? ibvd_eng_rate_paid(who->t->rate) : 0;
	char rule[IBVD_CGROUP_MAX + 32];
	json_t *row, *rule_json;

	ibvd_config_rule_name(cfg, who->rule, rule, sizeof(rule));
	rule_json = json_string(rule);
	/* a cgroup prefix that is not UTF-8 must not fail the listing */
	if (!rule_json)
		rule_json = json_string("?");
	row = json_pack("{s:I, s:s, s:o}", "uid", (json_int_t)who->uid,
			"dev", all_row ? "all" : dev, "rule", rule_json);
	if (!row || put_values(row, sel, q, usage, paced, c) ||
	    (sel->what != SHOW_REFUSED &&
	     put_daemon_caps(row, sel, all_row, who->t))) {
		json_decref(row);
		return -ENOMEM;
	}
	return json_array_append_new(out, row) ? -ENOMEM : 0;
}

static int device_row(struct ibvd_call *call, json_t *out,
		      const struct subject *who, const char *dev,
		      const struct show_sel *sel)
{
	static const uint64_t none[IBVD_LIMIT_NKINDS];
	static const struct ibvd_tenant_counters nothing;
	const struct ibvd_config *cfg = ibvd_call_daemon(call)->cfg;
	const struct ibvd_tenant_dev *td = NULL;
	struct ibvd_quota q;

	if (who->t)
		td = ibvd_tenant_dev_find(who->t, dev);
	ibvd_config_limits_dev(cfg, who->rule, dev, &q);
	return add_row(call, out, who, false, dev, sel, &q, td ? td->usage : none,
		       td ? &td->counters : &nothing);
}

/* "all", then the selected device or every device. */
static int subject_rows(struct ibvd_call *call, json_t *out,
			const struct subject *who, const struct show_sel *sel)
{
	static const uint64_t none[IBVD_LIMIT_NKINDS];
	static const struct ibvd_tenant_counters nothing;
	struct ibvd_daemon *d = ibvd_call_daemon(call);
	struct ibvd_device *dev;
	struct ibvd_quota q;
	int ret;

	if (sel->dev)
		return device_row(call, out, who, sel->dev, sel);
	if (who->t)
		q = who->t->limits;	/* exactly what charges are checked against */
	else
		ibvd_config_limits_all(d->cfg, who->rule, &q);
	ret = add_row(call, out, who, true, NULL, sel, &q,
		      who->t ? who->t->usage : none,
		      who->t ? &who->t->counters : &nothing);
	TAILQ_FOREACH(dev, &d->devices, link) {
		if (ret < 0)
			break;
		ret = device_row(call, out, who, dev->name, sel);
	}
	return ret;
}

static int tenant_rows(struct ibvd_call *call, json_t *out,
		       const struct ibvd_tenant *t, const struct show_sel *sel)
{
	struct subject who = { .uid = t->uid, .t = t };
	struct ibvd_limit_who lw;

	ibvd_peer_identity_who(&t->ident, &lw);
	who.rule = ibvd_config_limit_rule_for(ibvd_call_daemon(call)->cfg, &lw);
	return subject_rows(call, out, &who, sel);
}

/*
 * A uid without sessions, matched as its clients would be: passwd's gid
 * and the groups getgrouplist(3) gives; no cgroup.  A uid without a
 * passwd entry matches uid rules and the cgroup-less default only.
 */
static int passwd_rows(struct ibvd_call *call, json_t *out, uid_t uid,
		       const struct show_sel *sel)
{
	struct ibvd_limit_who lw = { .uid = uid, .gid = (gid_t)-1 };
	gid_t groups[IBVD_PEER_GROUPS_MAX];
	struct passwd pw, *res = NULL;
	struct subject who = { .uid = uid };
	int ngroups = IBVD_PEER_GROUPS_MAX;
	char buf[4096];

	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 && res) {
		lw.gid = pw.pw_gid;
		/* -1: more groups than fit; the first ones were stored */
		if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &ngroups) < 0)
			ngroups = IBVD_PEER_GROUPS_MAX;
		lw.groups = groups;
		lw.ngroups = (size_t)ngroups;
	}
	who.rule = ibvd_config_limit_rule_for(ibvd_call_daemon(call)->cfg, &lw);
	return subject_rows(call, out, &who, sel);
}

/*
 * Every tenant there is (one outlives its sessions while its objects
 * do): paging with "after" must see the lowest uids above it, not the
 * first it happened on.
 */
struct tenant_list {
	const struct ibvd_tenant **t;
	size_t n, room;
	long long only_uid;		/* -1: all */
	long long after;		/* only uids above it; -1: all */
};

static int collect(const struct ibvd_tenant *t, void *arg)
{
	struct tenant_list *l = arg;

	if (l->only_uid >= 0 && t->uid != l->only_uid)
		return 0;
	if (l->after >= 0 && t->uid <= l->after)
		return 0;
	if (l->n == l->room) {
		size_t room = l->room ? 2 * l->room : 64;
		const struct ibvd_tenant **more = realloc(l->t, room * sizeof(*more));

		if (!more)
			return -ENOMEM;
		l->t = more;
		l->room = room;
	}
	l->t[l->n++] = t;
	return 0;
}

static int by_uid(const void *a, const void *b)
{
	uid_t x = (*(const struct ibvd_tenant *const *)a)->uid;
	uid_t y = (*(const struct ibvd_tenant *const *)b)->uid;

	return x < y ? -1 : x > y;
}

/* Room kept for the {"more_after": UID} that ends a partial list. */
#define MORE_AFTER_ROOM	40

/* t's rows into out if they fit in the reply with room for the marker. */
static int tenant_fits(struct ibvd_call *call, json_t *out,
		       const struct ibvd_tenant *t, const struct show_sel *sel,
		       size_t *json_len)
{
	json_t *rows = json_array();
	size_t len;
	int ret;

	if (!rows)
		return -ENOMEM;
	ret = tenant_rows(call, rows, t, sel);
	if (ret < 0)
		goto out;
	/* its rows, and the comma before them */
	len = json_dumpb(rows, NULL, 0, JSON_COMPACT) - 1;
	if (*json_len + len + MORE_AFTER_ROOM > IBVD_RES_MAX_JSON) {
		ret = -EMSGSIZE;
		goto out;
	}
	*json_len += len;
	ret = json_array_extend(out, rows) ? -ENOMEM : 0;
out:
	json_decref(rows);
	return ret;
}

/* The end of a list that goes on past the last uid it holds. */
static int more_after(json_t *out, uid_t last)
{
	json_t *mark = json_pack("{s:I}", "more_after", (json_int_t)last);

	return mark && !json_array_append_new(out, mark) ? 0 : -ENOMEM;
}

/* Non-admins see their own uid only, as with every ibvctl listing. */
static int visible_uid(struct ibvd_call *call, const struct show_sel *sel,
		       long long *only)
{
	struct ibvd_client_info me;

	ibvd_client_info(call->session, &me);
	*only = sel->uid;
	if (ibvd_call_privileged(call))
		return 0;
	if (sel->uid >= 0 && sel->uid != me.uid)
		return ibvd_call_error(call, -EPERM,
				       "limits of uid %lld are for %s only",
				       sel->uid, ibvd_admin_who(call));
	*only = me.uid;
	return 0;
}

int ibvd_limit_admin_show(struct ibvd_call *call, size_t argc, char **argv,
			  json_t *out)
{
	struct ibvd_daemon *d = ibvd_call_daemon(call);
	struct tenant_list *l;
	struct show_sel sel;
	size_t i, json_len = 1;		/* the list's brackets */
	int ret;

	ret = parse_show(call, argc, argv, &sel);
	if (ret < 0)
		return ret;
	if (sel.dev && !ibvd_device_find(&d->devices, sel.dev))
		return ibvd_call_error(call, -ENODEV, "unknown device " ARG_FMT,
				       sel.dev);
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	ret = visible_uid(call, &sel, &l->only_uid);
	if (ret < 0)
		goto out;
	l->after = sel.after;
	ret = ibvd_tenant_foreach(collect, l);
	if (ret < 0)
		goto out;
	if (l->n)
		qsort(l->t, l->n, sizeof(l->t[0]), by_uid);
	for (i = 0; i < l->n && ret == 0; i++)
		ret = tenant_fits(call, out, l->t[i], &sel, &json_len);
	if (ret == -EMSGSIZE && i > 1)
		ret = more_after(out, l->t[i - 2]->uid);
	else if (ret == -EMSGSIZE)
		ret = ibvd_call_error(call, -EMSGSIZE,
				      "one tenant's rows do not fit in a reply: filter by dev");
	if (ret == 0 && !l->n && sel.uid >= 0 && sel.after < 0)
		ret = passwd_rows(call, out, (uid_t)sel.uid, &sel);
out:
	free(l->t);
	free(l);
	return ret;
}

/* ---- set ---------------------------------------------------------------- */

/* What one "limit set" asks for, checked before anything changes. */
struct set_req {
	enum ibvd_limit_match match;
	bool is_default;
	const char *key;		/* uid, group or cgroup prefix */
	const char *dev;		/* NULL: the all-devices keys */
	int dev_index;
	struct ibvd_limit_keys keys;	/* the KEY=VALUEs */
};

static int parse_key_value(struct ibvd_call *call, const char *word,
			   struct set_req *req)
{
	const char *eq = strchr(word, '=');
	char key[32];
	uint64_t v;
	int kind;

	if (!eq || eq == word || (size_t)(eq - word) >= sizeof(key))
		return ibvd_call_error(call, -EINVAL,
				       "expected KEY=VALUE, got " ARG_FMT, word);
	memcpy(key, word, (size_t)(eq - word));
	key[eq - word] = '\0';
	kind = ibvd_limit_key(key);
	if (kind < 0 && daemon_cap(key))
		return ibvd_call_error(call, -EINVAL,
				       "%s is a fixed cap of the daemon, not a limit",
				       key);
	if (kind < 0)
		return ibvd_call_error(call, -EINVAL, "unknown key " ARG_FMT, key);
	/* a CM id or a connection has no device: nothing to count there */
	if (req->dev && ibvd_limit_all_devices_only(kind))
		return ibvd_call_error(call, -EINVAL,
				       "%s limits all devices together, not one", key);
	if (ibvd_limit_parse_value(kind, eq + 1, &v) < 0)
		return ibvd_call_error(call, -EINVAL,
				       "bad value " ARG_FMT " for %s: expected a number%s or max",
				       eq + 1, key,
				       kind == IBVD_LIMIT_MEMLOCK ||
				       kind == IBVD_LIMIT_BANDWIDTH ?
				       " (suffix k, m or g)" : "");
	/* the engine would run "0 bytes/s" at 1: say so rather than do it */
	if (kind == IBVD_LIMIT_BANDWIDTH && v == 0)
		return ibvd_call_error(call, -EINVAL,
				       "bandwidth must be at least 1, or max");
	if (kind == IBVD_LIMIT_BANDWIDTH)
		req->keys.q.bandwidth = v;
	else
		req->keys.q.max[kind] = v;
	req->keys.given |= 1u << kind;
	return 0;
}

/* "default" | "uid UID" | "group NAME" | "cgroup PREFIX": words used. */
static int parse_scope(struct ibvd_call *call, size_t argc, char **argv,
		       struct set_req *req)
{
	static const char *const names[] = {
		[IBVD_LIMIT_MATCH_UID] = "uid",
		[IBVD_LIMIT_MATCH_GROUP] = "group",
		[IBVD_LIMIT_MATCH_CGROUP] = "cgroup",
	};
	size_t i;

	if (argc && !strcmp(argv[0], "default")) {
		req->is_default = true;
		return 1;
	}
	for (i = 0; argc && i < ARRAY_SIZE(names); i++) {
		if (strcmp(argv[0], names[i]))
			continue;
		if (argc < 2)
			return ibvd_call_error(call, -EINVAL, "%s needs a value",
					       names[i]);
		req->match = (enum ibvd_limit_match)i;
		req->key = argv[1];
		return 2;
	}
	return ibvd_call_error(call, -EINVAL,
			       "expected default, uid UID, group NAME or cgroup PREFIX%s" ARG_FMT,
			       argc ? ", got " : "", argc ? argv[0] : "");
}

/* Every word printable: they end up in the log and in ibvctl's rows. */
static int check_words(struct ibvd_call *call, size_t argc, char **argv)
{
	size_t i;
	const char *c;

	for (i = 0; i < argc; i++)
		for (c = argv[i]; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				return ibvd_call_error(call, -EINVAL,
						       "control character in argument %zu",
						       i + 1);
	return 0;
}

static int parse_set(struct ibvd_call *call, size_t argc, char **argv,
		     struct set_req *req)
{
	const struct ibvd_config *cfg = ibvd_call_daemon(call)->cfg;
	size_t i;
	int ret;

	memset(req, 0, sizeof(*req));
	req->dev_index = -1;
	ret = check_words(call, argc, argv);
	if (ret == 0)
		ret = parse_scope(call, argc, argv, req);
	if (ret < 0)
		return ret;
	i = (size_t)ret;
	if (i < argc && !strcmp(argv[i], "dev")) {
		if (i + 1 == argc)
			return ibvd_call_error(call, -EINVAL, "dev needs a value");
		req->dev = argv[i + 1];
		req->dev_index = ibvd_config_device_index(cfg, req->dev);
		if (req->dev_index < 0)
			return ibvd_call_error(call, -ENODEV, "unknown device " ARG_FMT,
					       req->dev);
		i += 2;
	}
	if (i == argc)
		return ibvd_call_error(call, -EINVAL, "no KEY=VALUE to set");
	for (; i < argc; i++) {
		ret = parse_key_value(call, argv[i], req);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* Copy the keys req gives into the entry, leaving the others as they are. */
static void set_keys(struct ibvd_limit_entry *e, const struct set_req *req)
{
	struct ibvd_limit_keys *ks = req->dev ? &e->dev[req->dev_index] : &e->all;
	int k;

	for (k = 0; k < IBVD_LIMIT_NKINDS; k++)
		if (req->keys.given & (1u << k))
			ks->q.max[k] = req->keys.q.max[k];
	if (req->keys.given & (1u << IBVD_LIMIT_BANDWIDTH))
		ks->q.bandwidth = req->keys.q.bandwidth;
	ks->given |= req->keys.given;
	e->runtime = 1;
}

/* The command's words after "set", for the log line. */
static void join_words(size_t argc, char **argv, char *buf, size_t len)
{
	size_t i, used = 0;
	int n;

	buf[0] = '\0';
	for (i = 0; i < argc && used < len; i++) {
		n = snprintf(buf + used, len - used, "%s%s", i ? " " : "", argv[i]);
		if (n < 0)
			break;
		used += (size_t)n;
	}
}

int ibvd_limit_admin_set(struct ibvd_call *call, size_t argc, char **argv)
{
	struct ibvd_daemon *d = ibvd_call_daemon(call);
	struct ibvd_limit_entry *e = &d->cfg->limit_default;
	struct ibvd_client_info me;
	char err[256], words[512];
	struct set_req req;
	int ret;

	ret = parse_set(call, argc, argv, &req);
	if (ret < 0)
		return ret;
	if (!req.is_default) {
		ret = ibvd_config_limit_rule_get(d->cfg, req.match, req.key, &e,
						 err, sizeof(err));
		if (ret == -EINVAL)
			return ibvd_call_error(call, ret, "%s " ARG_FMT ": %s",
					       argv[0], req.key, err);
		if (ret < 0)
			return ret;
	}
	set_keys(e, &req);
	/* existing objects stay; every tenant's next request sees these */
	ibvd_tenants_apply(d->cfg);
	/* but a bandwidth limit holds at once: no SENDs past the engine */
	ibvd_direct_limits_changed();
	join_words(argc, argv, words, sizeof(words));
	ibvd_client_info(call->session, &me);
	log_info("limit set by uid %u (client %llu): %s; runtime only, a reload "
		 "or restart returns to %s", (unsigned int)me.uid,
		 (unsigned long long)me.id, words,
		 ibvd_daemon_config_name(d));
	return 0;
}
