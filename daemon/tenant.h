/*
 * Tenants: who a client is and what it may hold.
 *
 * A client's identity is read once, at accept: SO_PEERCRED's uid, gid and
 * pid, the pid's start time (so a recycled pid is not mistaken for the
 * peer) and its cgroup v2 path.  The identity picks the limits that apply
 * (ibvd_config_limits_for(): uid, else group, else longest cgroup prefix,
 * else default).  The accounting key is the uid: usage is summed over all
 * of a uid's sessions.
 *
 * Stable API for readers (ibvctl's client/limit commands): struct
 * ibvd_tenant, ibvd_tenant_foreach(), ibvd_limit_names[] (config.h).
 */
#ifndef IBVD_TENANT_H
#define IBVD_TENANT_H

#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "handle.h"

struct ibvd_eng_rate;

#define IBVD_CGROUP_MAX	256	/* a longer path counts as unknown */

struct ibvd_peer_identity {
	pid_t pid;			/* 0: not in our pid namespace */
	uid_t uid;
	gid_t gid;
	unsigned long long starttime;	/* /proc/PID/stat field 22; 0 unknown */
	char cgroup[IBVD_CGROUP_MAX];	/* "0::" line of /proc/PID/cgroup; ""
					 * unknown */
};

/*
 * Fill id->starttime and id->cgroup for id->pid from /proc (proc is the
 * /proc mount, "/proc" in the daemon; tests may point elsewhere).  Missing
 * files leave the fields unknown: a peer in another pid namespace still
 * gets uid/gid limits.
 */
void ibvd_peer_identity_read(struct ibvd_peer_identity *id, const char *proc);

/* 1 if the process id names is still the same one (pid not recycled). */
int ibvd_peer_identity_alive(const struct ibvd_peer_identity *id,
			     const char *proc);

/*
 * A tenant: every live session of one uid.  Control thread only.
 * usage[] counts what its sessions hold now; limits are those of the
 * identity of the session that created the tenant (ident), recomputed on
 * reload.  hca_object is the sum of pd, mr, cq, qp, srq, ah and memory
 * windows (completion channels and cm_ids are not verbs objects of the
 * rdma cgroup and are not in it).
 */
struct ibvd_tenant {
	uid_t uid;
	struct ibvd_peer_identity ident;
	struct ibvd_quota limits;		/* in force now */
	uint64_t usage[IBVD_LIMIT_NKINDS];	/* memlock in bytes */
	unsigned int refs;			/* sessions, contexts, memory */
	struct ibvd_eng_rate *rate;		/* its bandwidth bucket (engine/rate.h),
						 * kept at limits' bandwidth */
	struct ibvd_tenant *next;
};

/* The tenant of id->uid, made with cfg's limits for id if new; NULL: ENOMEM. */
struct ibvd_tenant *ibvd_tenant_get(const struct ibvd_config *cfg,
				    const struct ibvd_peer_identity *id);
void ibvd_tenant_ref(struct ibvd_tenant *t);
void ibvd_tenant_put(struct ibvd_tenant *t);

/*
 * Take n of kind (bytes for memlock) from t's allowance; objects also take
 * one hca_object.  Over a limit: -ENOMEM for memlock, else -EAGAIN, as
 * the rdma cgroup; nothing is charged then and one rate-limited line
 * names tenant, limit and request.  what names the request for that line.
 */
int ibvd_tenant_charge(struct ibvd_tenant *t, enum ibvd_limit_kind kind,
		       uint64_t n, const char *what);
void ibvd_tenant_uncharge(struct ibvd_tenant *t, enum ibvd_limit_kind kind,
			  uint64_t n);

/*
 * Handle-table hook (handle.h): owner is a struct ibvd_tenant.  Kinds
 * without a limit (completion channels) pass untouched.
 */
int ibvd_tenant_charge_obj(void *owner, enum ibvd_obj_kind kind, int delta);

/* Reload: every tenant gets cfg's limits for its identity. */
void ibvd_tenants_apply(const struct ibvd_config *cfg);

/* Call fn for each tenant until it returns non-zero (which is returned). */
int ibvd_tenant_foreach(int (*fn)(const struct ibvd_tenant *t, void *arg),
			void *arg);

#endif /* IBVD_TENANT_H */
