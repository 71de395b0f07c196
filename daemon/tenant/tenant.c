/*
 * Tenants: identity from /proc (the files are small and a peer cannot
 * make them block, so plain stdio), and the per-uid quota accounting.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rate.h"
#include "log.h"
#include "tenant.h"
#include "util.h"

/*
 * Field 22 of /proc/PID/stat.  Field 2 (comm) is in parentheses and may
 * itself hold spaces and ')', so counting starts after the last ')'.
 */
static unsigned long long read_starttime(pid_t pid, const char *proc)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	size_t n;
	FILE *f;
	int field;

	snprintf(path, sizeof(path), "%s/%d/stat", proc, (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p)
		return 0;
	/* p + 1 begins " S ..." : field 3 is the first after ')' */
	for (field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	if (p && sscanf(p, " %llu", &start) != 1)
		start = 0;
	return start;
}

/* The cgroup v2 line "0::/path"; hybrid hosts list v1 hierarchies too. */
static void read_cgroup(pid_t pid, const char *proc, char *out, size_t len)
{
	char path[64], line[IBVD_CGROUP_MAX + 8];
	size_t n;
	FILE *f;

	out[0] = '\0';
	snprintf(path, sizeof(path), "%s/%d/cgroup", proc, (int)pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "0::", 3) != 0)
			continue;
		n = strcspn(line + 3, "\n");
		/* a cut path could match a wrong prefix: treat it as unknown */
		if (n < len && line[3 + n] == '\n') {
			memcpy(out, line + 3, n);
			out[n] = '\0';
		}
		break;
	}
	fclose(f);
}

/* "Groups:\t10 27 1001" of /proc/PID/status: the supplementary groups. */
static void read_groups(pid_t pid, const char *proc,
			struct ibvd_peer_identity *id)
{
	char path[64], line[4096], *p, *end;
	unsigned long g;
	FILE *f;

	id->ngroups = 0;
	snprintf(path, sizeof(path), "%s/%d/status", proc, (int)pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "Groups:", 7) != 0)
			continue;
		for (p = line + 7; id->ngroups < IBVD_PEER_GROUPS_MAX; p = end) {
			g = strtoul(p, &end, 10);
			if (end == p)
				break;
			id->groups[id->ngroups++] = (gid_t)g;
		}
		break;
	}
	fclose(f);
}

void ibvd_peer_identity_forget(struct ibvd_peer_identity *id)
{
	id->starttime = 0;
	id->cgroup[0] = '\0';
	id->ngroups = 0;
}

void ibvd_peer_identity_read(struct ibvd_peer_identity *id, const char *proc)
{
	ibvd_peer_identity_forget(id);
	if (id->pid <= 0)
		return;
	id->starttime = read_starttime(id->pid, proc);
	if (!id->starttime)
		return;
	read_cgroup(id->pid, proc, id->cgroup, sizeof(id->cgroup));
	read_groups(id->pid, proc, id);
	/* the peer died and its pid was reused meanwhile: trust none of it */
	if (read_starttime(id->pid, proc) != id->starttime)
		ibvd_peer_identity_forget(id);
}

void ibvd_peer_identity_who(const struct ibvd_peer_identity *id,
			    struct ibvd_limit_who *who)
{
	who->uid = id->uid;
	who->gid = id->gid;
	who->groups = id->groups;
	who->ngroups = id->ngroups;
	who->cgroup = id->cgroup[0] ? id->cgroup : NULL;
}

int ibvd_peer_identity_alive(const struct ibvd_peer_identity *id,
			     const char *proc)
{
	if (id->pid <= 0 || !id->starttime)
		return 0;
	return read_starttime(id->pid, proc) == id->starttime;
}

/* ---- the tenant registry ------------------------------------------- */

/* A handful of uids per host: a list is plenty. */
static struct ibvd_tenant *tenants;

static const struct ibvd_config_limit_rule *
rule_of(const struct ibvd_config *cfg, const struct ibvd_tenant *t)
{
	struct ibvd_limit_who who;

	ibvd_peer_identity_who(&t->ident, &who);
	return ibvd_config_limit_rule_for(cfg, &who);
}

/* Limits and the engine's bucket change together, never one alone. */
static void set_limits(struct ibvd_tenant *t, const struct ibvd_config *cfg)
{
	const struct ibvd_config_limit_rule *rule = rule_of(cfg, t);
	struct ibvd_tenant_dev *td;

	ibvd_config_limits_all(cfg, rule, &t->limits);
	ibvd_eng_rate_set(t->rate, t->limits.bandwidth == IBVD_LIMIT_UNLIMITED ?
			  IBVD_RATE_UNLIMITED : t->limits.bandwidth);
	for (td = t->devs; td; td = td->next)
		ibvd_config_limits_dev(cfg, rule, td->name, &td->limits);
}

struct ibvd_tenant *ibvd_tenant_find(uid_t uid)
{
	struct ibvd_tenant *t;

	for (t = tenants; t; t = t->next)
		if (t->uid == uid)
			return t;
	return NULL;
}

bool ibvd_tenant_cgroup_known(uid_t uid)
{
	const struct ibvd_tenant *t = ibvd_tenant_find(uid);

	return t && t->ident.cgroup[0] != '\0';
}

struct ibvd_tenant *ibvd_tenant_get(const struct ibvd_config *cfg,
				    const struct ibvd_peer_identity *id)
{
	struct ibvd_tenant *t;

	for (t = tenants; t; t = t->next)
		if (t->uid == id->uid) {
			t->refs++;
			/*
			 * Made while its cgroup could not be read: the first
			 * session that shows it gives the tenant its rule.
			 */
			if (!t->ident.cgroup[0] && id->cgroup[0]) {
				memcpy(t->ident.cgroup, id->cgroup,
				       sizeof(t->ident.cgroup));
				set_limits(t, cfg);
			}
			return t;
		}
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->rate = ibvd_eng_rate_new();
	if (!t->rate) {
		free(t);
		return NULL;
	}
	t->uid = id->uid;
	t->ident = *id;
	t->log_rl.burst = IBVD_TENANT_LOG_BURST;
	set_limits(t, cfg);
	t->refs = 1;
	t->next = tenants;
	tenants = t;
	return t;
}

void ibvd_tenant_ref(struct ibvd_tenant *t)
{
	t->refs++;
}

static void check_released(const struct ibvd_tenant *t, const uint64_t *usage,
			   const char *dev)
{
	int k;

	for (k = 0; k < IBVD_LIMIT_NKINDS; k++)
		if (usage[k])
			log_err("uid %u: %" PRIu64 " %s still charged at the end%s%s",
				(unsigned int)t->uid, usage[k],
				ibvd_limit_names[k], dev ? " on " : "",
				dev ? dev : "");
}

void ibvd_tenant_put(struct ibvd_tenant *t)
{
	struct ibvd_tenant **pp;
	struct ibvd_tenant_dev *td;

	if (--t->refs)
		return;
	check_released(t, t->usage, NULL);
	while ((td = t->devs)) {
		check_released(t, td->usage, td->name);
		t->devs = td->next;
		free(td);
	}
	for (pp = &tenants; *pp != t; pp = &(*pp)->next)
		;
	*pp = t->next;
	ibvd_eng_rate_put(t->rate);
	free(t);
}

struct ibvd_tenant_dev *ibvd_tenant_dev_get(struct ibvd_tenant *t,
					    const struct ibvd_config *cfg,
					    const char *dev)
{
	struct ibvd_tenant_dev *td;

	for (td = t->devs; td; td = td->next)
		if (strcmp(td->name, dev) == 0)
			return td;
	td = calloc(1, sizeof(*td));
	if (!td)
		return NULL;
	td->tenant = t;
	snprintf(td->name, sizeof(td->name), "%s", dev);
	ibvd_config_limits_dev(cfg, rule_of(cfg, t), dev, &td->limits);
	td->next = t->devs;
	t->devs = td;
	return td;
}

const struct ibvd_tenant_dev *ibvd_tenant_dev_find(const struct ibvd_tenant *t,
						   const char *dev)
{
	const struct ibvd_tenant_dev *td;

	for (td = t->devs; td; td = td->next)
		if (strcmp(td->name, dev) == 0)
			return td;
	return NULL;
}

/* ---- charging -------------------------------------------------------- */

/* Where a charge is counted and limited: all devices, or one device. */
struct account {
	const struct ibvd_quota *limits;
	uint64_t *usage;
	uint64_t *refused;
	const char *dev;		/* NULL: all devices */
};

void ibvd_tenant_log(struct ibvd_tenant *t, enum ibvd_log_level level,
		     const char *fmt, ...)
{
	va_list ap;
	int logged;

	va_start(ap, fmt);
	logged = ibvd_vlog_ratelimited(&t->log_rl, level, fmt, ap);
	va_end(ap);
	if (!logged)
		__atomic_add_fetch(&t->counters.log_suppressed, 1,
				   __ATOMIC_RELAXED);
}

/* Every account of the charge counts the refusal: the device's and all. */
static int over(struct ibvd_tenant *t, struct account *accounts,
		size_t naccounts, const struct account *a,
		enum ibvd_limit_kind kind, uint64_t n, const char *what)
{
	int err = kind == IBVD_LIMIT_MEMLOCK ? -ENOMEM : -EAGAIN;
	size_t i;

	for (i = 0; i < naccounts; i++)
		accounts[i].refused[kind]++;
	ibvd_tenant_log(t, IBVD_LOG_NOTICE,
			"uid %u: %s refused: %s limit %" PRIu64
			"%s%s, in use %" PRIu64 ", asked %" PRIu64 ": %s",
			(unsigned int)t->uid, what, ibvd_limit_names[kind],
			a->limits->max[kind], a->dev ? " on " : "",
			a->dev ? a->dev : "", a->usage[kind], n,
			err == -ENOMEM ? "ENOMEM" : "EAGAIN");
	return err;
}

static bool fits(const struct account *a, enum ibvd_limit_kind kind,
		 uint64_t n)
{
	uint64_t max = a->limits->max[kind];

	return max == IBVD_LIMIT_UNLIMITED ||
	       (n <= max && a->usage[kind] <= max - n);
}

/* The verbs objects of the rdma cgroup, which hca_object sums. */
static bool is_object(enum ibvd_limit_kind kind)
{
	return kind >= IBVD_LIMIT_QP && kind <= IBVD_LIMIT_AH;
}

unsigned int ibvd_uid_max_objects(void)
{
	/* Read once, on the control thread, the only one that charges. */
	static unsigned int cap;

	if (!cap)
		cap = (unsigned int)ibvd_env_or("IBVERBSD_UID_MAX_OBJECTS",
						IBVD_UID_MAX_OBJECTS, 1,
						IBVD_UID_MAX_OBJECTS - 1);
	return cap;
}

unsigned int ibvd_uid_max_cm_ports(void)
{
	/* Read once, on the control thread, the only one that binds. */
	static unsigned int cap;

	if (!cap)
		cap = (unsigned int)ibvd_env_or("IBVERBSD_UID_MAX_CM_PORTS",
						IBVD_UID_MAX_CM_PORTS, 1,
						IBVD_UID_MAX_CM_PORTS - 1);
	return cap;
}

/* The daemon's cap on a uid's objects: room for n more? */
static bool under_object_cap(const struct ibvd_tenant *t,
			     enum ibvd_limit_kind kind, uint64_t n)
{
	uint64_t held = t->usage[IBVD_LIMIT_HCA_OBJECT];
	uint64_t cap = ibvd_uid_max_objects();

	/* MWs, XRC domains and DM are charged as hca_object itself */
	if (!is_object(kind) && kind != IBVD_LIMIT_HCA_OBJECT)
		return true;
	return n <= cap && held <= cap - n;
}

/* Refused by that cap: counted as hca_object's refusals, since it is one. */
static int over_object_cap(struct ibvd_tenant *t, struct account *accounts,
			   size_t naccounts, const char *what)
{
	size_t i;

	for (i = 0; i < naccounts; i++)
		accounts[i].refused[IBVD_LIMIT_HCA_OBJECT]++;
	ibvd_tenant_log(t, IBVD_LOG_NOTICE,
			"uid %u: %s refused: the daemon's cap of %u objects a uid, in use %" PRIu64 ": EAGAIN",
			(unsigned int)t->uid, what, ibvd_uid_max_objects(),
			t->usage[IBVD_LIMIT_HCA_OBJECT]);
	return -EAGAIN;
}

/* All of accounts take n, or none does (then the first refusal says why). */
static int charge(struct ibvd_tenant *t, struct account *accounts,
		  size_t naccounts, enum ibvd_limit_kind kind, uint64_t n,
		  const char *what)
{
	struct account *a;
	size_t i;

	if (!under_object_cap(t, kind, n))
		return over_object_cap(t, accounts, naccounts, what);
	for (i = 0; i < naccounts; i++) {
		a = &accounts[i];
		if (!fits(a, kind, n))
			return over(t, accounts, naccounts, a, kind, n, what);
		if (is_object(kind) && !fits(a, IBVD_LIMIT_HCA_OBJECT, n))
			return over(t, accounts, naccounts, a,
				    IBVD_LIMIT_HCA_OBJECT, n, what);
	}
	for (i = 0; i < naccounts; i++) {
		accounts[i].usage[kind] += n;
		if (is_object(kind))
			accounts[i].usage[IBVD_LIMIT_HCA_OBJECT] += n;
	}
	return 0;
}

/* Never below zero: a bug here must not turn into a huge allowance. */
static void take_back(uint64_t *usage, uint64_t n, uid_t uid, const char *name)
{
	if (*usage >= n) {
		*usage -= n;
		return;
	}
	log_err("uid %u: releasing %" PRIu64 " %s, only %" PRIu64 " charged",
		(unsigned int)uid, n, name, *usage);
	*usage = 0;
}

static void uncharge(uint64_t *usage, uid_t uid, enum ibvd_limit_kind kind,
		     uint64_t n)
{
	take_back(&usage[kind], n, uid, ibvd_limit_names[kind]);
	if (is_object(kind))
		take_back(&usage[IBVD_LIMIT_HCA_OBJECT], n, uid,
			  ibvd_limit_names[IBVD_LIMIT_HCA_OBJECT]);
}

int ibvd_tenant_charge(struct ibvd_tenant *t, enum ibvd_limit_kind kind,
		       uint64_t n, const char *what)
{
	struct account all = { .limits = &t->limits, .usage = t->usage,
			       .refused = t->counters.refused };

	return charge(t, &all, 1, kind, n, what);
}

void ibvd_tenant_charge_always(struct ibvd_tenant *t, enum ibvd_limit_kind kind,
			       uint64_t n)
{
	t->usage[kind] += n;
	if (is_object(kind))
		t->usage[IBVD_LIMIT_HCA_OBJECT] += n;
}

void ibvd_tenant_uncharge(struct ibvd_tenant *t, enum ibvd_limit_kind kind,
			  uint64_t n)
{
	uncharge(t->usage, t->uid, kind, n);
}

/* The device first: its limit is the narrower one to name in the log. */
int ibvd_tenant_dev_charge(struct ibvd_tenant_dev *td,
			   enum ibvd_limit_kind kind, uint64_t n,
			   const char *what)
{
	struct ibvd_tenant *t = td->tenant;
	struct account accounts[] = {
		{ .limits = &td->limits, .usage = td->usage,
		  .refused = td->counters.refused, .dev = td->name },
		{ .limits = &t->limits, .usage = t->usage,
		  .refused = t->counters.refused },
	};

	return charge(t, accounts, ARRAY_SIZE(accounts), kind, n, what);
}

void ibvd_tenant_dev_uncharge(struct ibvd_tenant_dev *td,
			      enum ibvd_limit_kind kind, uint64_t n)
{
	uncharge(td->usage, td->tenant->uid, kind, n);
	uncharge(td->tenant->usage, td->tenant->uid, kind, n);
}

void ibvd_tenant_dev_restore(struct ibvd_tenant_dev *td,
			     enum ibvd_limit_kind kind, uint64_t n)
{
	td->usage[kind] += n;
	td->tenant->usage[kind] += n;
	if (is_object(kind)) {
		td->usage[IBVD_LIMIT_HCA_OBJECT] += n;
		td->tenant->usage[IBVD_LIMIT_HCA_OBJECT] += n;
	}
}

static int limit_of_obj(enum ibvd_obj_kind kind)
{
	switch (kind) {
	case IBVD_OBJ_PD:	return IBVD_LIMIT_PD;
	case IBVD_OBJ_MR:	return IBVD_LIMIT_MR;
	case IBVD_OBJ_CQ:	return IBVD_LIMIT_CQ;
	case IBVD_OBJ_QP:	return IBVD_LIMIT_QP;
	case IBVD_OBJ_SRQ:	return IBVD_LIMIT_SRQ;
	case IBVD_OBJ_AH:	return IBVD_LIMIT_AH;
	case IBVD_OBJ_CM_ID:	return IBVD_LIMIT_CM_ID;
	case IBVD_OBJ_COMP_CHANNEL:	return IBVD_LIMIT_COMP_CHANNEL;
	/* No limit of their own (as in the rdma cgroup): objects only. */
	case IBVD_OBJ_MW:
	case IBVD_OBJ_XRCD:
	case IBVD_OBJ_DM:	return IBVD_LIMIT_HCA_OBJECT;
	default:		return -1;
	}
}

static void describe_creation(char *buf, size_t len, int limit)
{
	snprintf(buf, len, "creating a %s", ibvd_limit_names[limit]);
}

int ibvd_tenant_charge_obj(void *owner, enum ibvd_obj_kind kind, int delta)
{
	int limit = limit_of_obj(kind);
	char what[32];

	if (limit < 0)
		return 0;
	if (delta < 0) {
		ibvd_tenant_uncharge(owner, (enum ibvd_limit_kind)limit, 1);
		return 0;
	}
	describe_creation(what, sizeof(what), limit);
	return ibvd_tenant_charge(owner, (enum ibvd_limit_kind)limit, 1, what);
}

int ibvd_tenant_dev_charge_obj(void *owner, enum ibvd_obj_kind kind, int delta)
{
	int limit = limit_of_obj(kind);
	char what[32];

	if (limit < 0)
		return 0;
	if (delta < 0) {
		ibvd_tenant_dev_uncharge(owner, (enum ibvd_limit_kind)limit, 1);
		return 0;
	}
	describe_creation(what, sizeof(what), limit);
	return ibvd_tenant_dev_charge(owner, (enum ibvd_limit_kind)limit, 1, what);
}

void ibvd_tenant_dev_event_dropped(struct ibvd_tenant_dev *td)
{
	__atomic_add_fetch(&td->counters.events_dropped, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&td->tenant->counters.events_dropped, 1,
			   __ATOMIC_RELAXED);
}

void ibvd_tenant_slow_reader(struct ibvd_tenant *t)
{
	t->counters.slow_reader++;
}

void ibvd_tenants_apply(const struct ibvd_config *cfg)
{
	struct ibvd_tenant *t;
	struct ibvd_limit_who who;

	for (t = tenants; t; t = t->next) {
		set_limits(t, cfg);
		ibvd_peer_identity_who(&t->ident, &who);
		/* its sessions go on; new ones are refused (server/session.c) */
		if (!t->ident.cgroup[0] && ibvd_config_has_cgroup_rules(cfg) &&
		    !ibvd_config_limit_rule_for(cfg, &who))
			log_warn("uid %u: its cgroup is unknown, so its cgroup rule too: its sessions keep the default limits, and new sessions are refused while its cgroup cannot be read",
				 (unsigned int)t->uid);
	}
}

int ibvd_tenant_foreach(int (*fn)(const struct ibvd_tenant *t, void *arg),
			void *arg)
{
	struct ibvd_tenant *t;
	int ret;

	for (t = tenants; t; t = t->next) {
		ret = fn(t, arg);
		if (ret)
			return ret;
	}
	return 0;
}
