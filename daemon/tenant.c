/*
 * Tenants: identity from /proc (both files are small and a peer cannot
 * make them block, so plain stdio), and the per-uid quota accounting.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/rate.h"
#include "log.h"
#include "tenant.h"

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

void ibvd_peer_identity_read(struct ibvd_peer_identity *id, const char *proc)
{
	id->starttime = 0;
	id->cgroup[0] = '\0';
	if (id->pid <= 0)
		return;
	id->starttime = read_starttime(id->pid, proc);
	read_cgroup(id->pid, proc, id->cgroup, sizeof(id->cgroup));
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
static struct ibvd_ratelimit quota_rl = IBVD_RATELIMIT_INIT(5);

struct ibvd_tenant *ibvd_tenant_get(const struct ibvd_config *cfg,
				    const struct ibvd_peer_identity *id)
{
	struct ibvd_tenant *t;

	for (t = tenants; t; t = t->next)
		if (t->uid == id->uid) {
			t->refs++;
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
	t->limits = *ibvd_config_limits_for(cfg, id->uid, id->gid,
					    id->cgroup[0] ? id->cgroup : NULL);
	t->refs = 1;
	t->next = tenants;
	tenants = t;
	return t;
}

void ibvd_tenant_ref(struct ibvd_tenant *t)
{
	t->refs++;
}

void ibvd_tenant_put(struct ibvd_tenant *t)
{
	struct ibvd_tenant **pp;
	int k;

	if (--t->refs)
		return;
	for (k = 0; k < IBVD_LIMIT_NKINDS; k++)
		if (t->usage[k])
			log_err("uid %u: %" PRIu64 " %s still charged at the end",
				(unsigned int)t->uid, t->usage[k],
				ibvd_limit_names[k]);
	for (pp = &tenants; *pp != t; pp = &(*pp)->next)
		;
	*pp = t->next;
	ibvd_eng_rate_put(t->rate);
	free(t);
}

static int over(struct ibvd_tenant *t, enum ibvd_limit_kind kind, uint64_t n,
		const char *what)
{
	int err = kind == IBVD_LIMIT_MEMLOCK ? -ENOMEM : -EAGAIN;

	ibvd_log_ratelimited(&quota_rl, IBVD_LOG_NOTICE,
			     "uid %u: %s refused: %s limit %" PRIu64
			     ", in use %" PRIu64 ", asked %" PRIu64 ": %s",
			     (unsigned int)t->uid, what, ibvd_limit_names[kind],
			     t->limits.max[kind], t->usage[kind], n,
			     err == -ENOMEM ? "ENOMEM" : "EAGAIN");
	return err;
}

static bool fits(const struct ibvd_tenant *t, enum ibvd_limit_kind kind,
		 uint64_t n)
{
	uint64_t max = t->limits.max[kind];

	return max == IBVD_LIMIT_UNLIMITED ||
	       (n <= max && t->usage[kind] <= max - n);
}

static bool is_object(enum ibvd_limit_kind kind)
{
	return kind >= IBVD_LIMIT_QP && kind != IBVD_LIMIT_CM_ID;
}

int ibvd_tenant_charge(struct ibvd_tenant *t, enum ibvd_limit_kind kind,
		       uint64_t n, const char *what)
{
	if (!fits(t, kind, n))
		return over(t, kind, n, what);
	if (is_object(kind) && !fits(t, IBVD_LIMIT_HCA_OBJECT, n))
		return over(t, IBVD_LIMIT_HCA_OBJECT, n, what);
	t->usage[kind] += n;
	if (is_object(kind))
		t->usage[IBVD_LIMIT_HCA_OBJECT] += n;
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

void ibvd_tenant_uncharge(struct ibvd_tenant *t, enum ibvd_limit_kind kind,
			  uint64_t n)
{
	take_back(&t->usage[kind], n, t->uid, ibvd_limit_names[kind]);
	if (is_object(kind))
		take_back(&t->usage[IBVD_LIMIT_HCA_OBJECT], n, t->uid,
			  ibvd_limit_names[IBVD_LIMIT_HCA_OBJECT]);
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
	default:		return -1;
	}
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
	snprintf(what, sizeof(what), "creating a %s", ibvd_limit_names[limit]);
	return ibvd_tenant_charge(owner, (enum ibvd_limit_kind)limit, 1, what);
}

void ibvd_tenants_apply(const struct ibvd_config *cfg)
{
	const struct ibvd_peer_identity *id;
	struct ibvd_tenant *t;

	for (t = tenants; t; t = t->next) {
		id = &t->ident;
		t->limits = *ibvd_config_limits_for(cfg, id->uid, id->gid,
						    id->cgroup[0] ? id->cgroup : NULL);
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
