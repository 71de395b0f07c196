/*
 * Tenants: who a client is and what it may hold.
 *
 * A client's identity is read once, at accept: SO_PEERCRED's uid, gid and
 * pid, the pid's start time (so a recycled pid is not mistaken for the
 * peer), its supplementary groups and its cgroup v2 path.  The identity
 * picks the rule that applies (ibvd_config_limit_rule_for(): uid, else
 * group, else longest cgroup prefix, else default).  The accounting key
 * is the uid: usage is summed over all of a uid's sessions.
 *
 * Usage is kept twice: over all devices (struct ibvd_tenant) and per
 * device (struct ibvd_tenant_dev).  A charge made for a device context
 * must fit both; cm_ids belong to no device and count over all only.
 *
 * Stable API for readers (ibvctl's client/limit commands): struct
 * ibvd_tenant, struct ibvd_tenant_dev, ibvd_tenant_foreach(),
 * ibvd_limit_names[] (config.h).
 *
 * Layer tenant/: tenants, their limits and their charges.  It calls
 * config/ (the limit rules), core/ (the bandwidth bucket) and common/;
 * what is charged (verbs objects, memory, cm_ids) is not its business.
 */
#ifndef IBVD_TENANT_H
#define IBVD_TENANT_H

#include <stdarg.h>
#include <stdint.h>
#include <sys/types.h>

#include "config/config.h"
#include "core/handle.h"
#include "log.h"

struct ibvd_eng_rate;

#define IBVD_CGROUP_MAX	256	/* a longer path counts as unknown */
/*
 * Supplementary groups kept per peer; a process in more is matched on
 * the first ones only (the kernel lists them sorted by gid).
 */
#define IBVD_PEER_GROUPS_MAX	64

struct ibvd_peer_identity {
	pid_t pid;			/* 0: not in our pid namespace */
	uid_t uid;
	gid_t gid;
	unsigned long long starttime;	/* /proc/PID/stat field 22; 0 unknown */
	char cgroup[IBVD_CGROUP_MAX];	/* "0::" line of /proc/PID/cgroup; ""
					 * unknown */
	unsigned int ngroups;		/* SO_PEERGROUPS at connect(), else
					 * "Groups:" of /proc/PID/status */
	gid_t groups[IBVD_PEER_GROUPS_MAX];
};

/*
 * Fill id->starttime, id->cgroup and id->groups for id->pid from /proc
 * (proc is the /proc mount, "/proc" in the daemon; tests may point
 * elsewhere).  Missing files leave the fields unknown, and so does a pid
 * that changed hands while they were read: a peer in another pid
 * namespace still gets uid/gid limits.
 */
void ibvd_peer_identity_read(struct ibvd_peer_identity *id, const char *proc);
/* Forget what ibvd_peer_identity_read() found: the fields are unknown. */
void ibvd_peer_identity_forget(struct ibvd_peer_identity *id);

/* who (config.h) for id; points into id. */
void ibvd_peer_identity_who(const struct ibvd_peer_identity *id,
			    struct ibvd_limit_who *who);

/* 1 if the process id names is still the same one (pid not recycled). */
int ibvd_peer_identity_alive(const struct ibvd_peer_identity *id,
			     const char *proc);

struct ibvd_tenant;

/*
 * What a tenant was refused or lost, for "ibvctl limit show refused".
 * refused[] counts charges over a limit, by the kind that refused; the
 * others count what a client made happen that is not a charge.  Engine
 * threads add to events_dropped: atomics.
 */
struct ibvd_tenant_counters {
	uint64_t refused[IBVD_LIMIT_NKINDS];
	uint64_t events_dropped;	/* async and completion events that did
					 * not fit in a socket the client
					 * does not read */
	uint64_t slow_reader;		/* sessions closed: it did not read its
					 * replies or CM events */
	uint64_t log_suppressed;	/* its log lines over the per-uid rate */
};

/* Log lines a uid's clients may cause per second; more are counted. */
#define IBVD_TENANT_LOG_BURST	10

/*
 * The verbs objects (hca_object's kinds) one uid may hold in all, whatever
 * the rules say: each is daemon memory (an MR about 200 bytes, a QP more),
 * and a uid's 1,024 sessions could otherwise hold a device's per-context
 * maxima each, hundreds of millions of them.  A million is sixteen
 * contexts' worth of 65,536 QPs with their CQs, and 200 MB of MRs.
 */
#define IBVD_UID_MAX_OBJECTS	(1u << 20)
/* That cap in force: IBVERBSD_UID_MAX_OBJECTS may lower it, for tests. */
unsigned int ibvd_uid_max_objects(void);

/*
 * RDMA CM ids one uid may have bound to a port (each port space, as the
 * kernel's, is the host's: 28,232 ephemeral ports, 64,512 in all), root's
 * not refused: a uid holding them all would leave the others no port to
 * connect from or listen on.  At 16,384 one uid leaves the others 11,848
 * ephemeral ports at least, and makes the 8,128 connections of a
 * 128-rank job on one host, each rank to every other.
 */
#define IBVD_UID_MAX_CM_PORTS	16384u
/* That cap in force: IBVERBSD_UID_MAX_CM_PORTS may lower it, for tests. */
unsigned int ibvd_uid_max_cm_ports(void);

/*
 * One tenant's use of one device (by name: it outlives a reload that
 * renumbers devices).  Made on the tenant's first context on the device,
 * kept as long as the tenant.  cm_id usage stays 0 here.
 */
struct ibvd_tenant_dev {
	struct ibvd_tenant *tenant;
	char name[IBVD_DEV_NAME_MAX];
	struct ibvd_quota limits;		/* this device's, in force */
	uint64_t usage[IBVD_LIMIT_NKINDS];	/* memlock in bytes */
	struct ibvd_tenant_counters counters;	/* on this device */
	struct ibvd_tenant_dev *next;
};

/*
 * A tenant: every live session of one uid.  Control thread only.
 * usage[] counts what its sessions hold now on all devices together;
 * limits are those of the identity of the session that created the
 * tenant (ident), recomputed from it on reload and "ibvctl limit set",
 * until the uid's last session ends: later sessions' groups and cgroups
 * do not count.  (The uid's passwd groups would not depend on the
 * session, but getgrouplist(3) may wait on NSS, and a connect must not
 * hold the control thread on that.)
 * hca_object is the sum of pd, mr, cq, qp, srq, ah and memory windows
 * (completion channels and cm_ids are not verbs objects of the rdma
 * cgroup and are not in it).
 */
struct ibvd_tenant {
	uid_t uid;
	struct ibvd_peer_identity ident;
	struct ibvd_quota limits;		/* in force now, all devices */
	uint64_t usage[IBVD_LIMIT_NKINDS];	/* memlock in bytes */
	unsigned int refs;			/* sessions, contexts, memory */
	struct ibvd_eng_rate *rate;		/* its bandwidth bucket (core/rate.h),
						 * kept at limits' bandwidth */
	struct ibvd_tenant_dev *devs;		/* devices it has used */
	struct ibvd_tenant_counters counters;	/* all devices */
	struct ibvd_ratelimit log_rl;		/* IBVD_TENANT_LOG_BURST */
	unsigned int mapped_mrs;		/* verbs/mr/map.c */
	unsigned int shared_xrcds;		/* verbs/xrc/xrcd.c: made, held */
	uint64_t mapped_bytes;			/* their mappings' bytes */
	unsigned int direct_pairs;		/* verbs/rings/direct.c */
	unsigned int cm_grown;			/* cm/conn.c: listeners' sockets */
	unsigned int cm_ports;			/* cm/addr.c: its ids holding a port */
	uint64_t ring_bytes;			/* verbs/rings/rings.c */
	struct ibvd_tenant *next;
};

/*
 * Has uid a tenant (a session, a context, memory of its own) whose rule
 * was chosen knowing its cgroup?
 */
bool ibvd_tenant_cgroup_known(uid_t uid);

/* uid's tenant if it has one (no reference taken), else NULL. */
struct ibvd_tenant *ibvd_tenant_find(uid_t uid);

/* The tenant of id->uid, made with cfg's limits for id if new; NULL: ENOMEM. */
struct ibvd_tenant *ibvd_tenant_get(const struct ibvd_config *cfg,
				    const struct ibvd_peer_identity *id);
void ibvd_tenant_ref(struct ibvd_tenant *t);
void ibvd_tenant_put(struct ibvd_tenant *t);

/*
 * Take n of kind (bytes for memlock) from t's allowance over all devices;
 * objects also take one hca_object.  Over a limit: -ENOMEM for memlock,
 * else -EAGAIN, as the rdma cgroup; nothing is charged then and one
 * rate-limited line names tenant, limit and request.  what names the
 * request for that line.  For what belongs to no device (cm_ids).
 */
int ibvd_tenant_charge(struct ibvd_tenant *t, enum ibvd_limit_kind kind,
		       uint64_t n, const char *what);
void ibvd_tenant_uncharge(struct ibvd_tenant *t, enum ibvd_limit_kind kind,
			  uint64_t n);

/*
 * t's account on device dev, made (with cfg's limits for t) on first use;
 * NULL: ENOMEM.  Valid as long as t.
 */
struct ibvd_tenant_dev *ibvd_tenant_dev_get(struct ibvd_tenant *t,
					    const struct ibvd_config *cfg,
					    const char *dev);

/* t's account on dev if it has one, else NULL (nothing used there). */
const struct ibvd_tenant_dev *ibvd_tenant_dev_find(const struct ibvd_tenant *t,
						   const char *dev);

/* The same as ibvd_tenant_charge(), against td's device and all devices. */
int ibvd_tenant_dev_charge(struct ibvd_tenant_dev *td,
			   enum ibvd_limit_kind kind, uint64_t n,
			   const char *what);
void ibvd_tenant_dev_uncharge(struct ibvd_tenant_dev *td,
			      enum ibvd_limit_kind kind, uint64_t n);
/* Give back n that an uncharge took, past any limit: it cannot fail. */
void ibvd_tenant_dev_restore(struct ibvd_tenant_dev *td,
			     enum ibvd_limit_kind kind, uint64_t n);

/*
 * Handle-table hooks (handle.h).  ibvd_tenant_charge_obj: owner is a
 * struct ibvd_tenant (CM sessions); ibvd_tenant_dev_charge_obj: owner is
 * a struct ibvd_tenant_dev (device contexts).  Memory windows count as
 * hca_object only, completion channels as comp_channel only.
 */
int ibvd_tenant_charge_obj(void *owner, enum ibvd_obj_kind kind, int delta);
int ibvd_tenant_dev_charge_obj(void *owner, enum ibvd_obj_kind kind, int delta);

/*
 * Charge what no limit may refuse (root's connections, which the session
 * limit does not apply to): counted in usage all the same.
 */
void ibvd_tenant_charge_always(struct ibvd_tenant *t, enum ibvd_limit_kind kind,
			       uint64_t n);

/*
 * A log line a client of t caused: at most IBVD_TENANT_LOG_BURST a second
 * per uid, so that one uid can neither flood the journal nor use up a
 * shared budget and silence the lines about others.  Suppressed lines are
 * counted (counters.log_suppressed).  Any thread.
 */
void ibvd_tenant_log(struct ibvd_tenant *t, enum ibvd_log_level level,
		     const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* An event for a context of td's dropped (socket full).  Any thread. */
void ibvd_tenant_dev_event_dropped(struct ibvd_tenant_dev *td);

/* A session of t closed for not reading what the daemon sent it. */
void ibvd_tenant_slow_reader(struct ibvd_tenant *t);

/*
 * Reload or ibvctl limit set: every tenant (and each of its devices) gets
 * cfg's limits for its identity; what it holds stays.
 */
void ibvd_tenants_apply(const struct ibvd_config *cfg);

/* Call fn for each tenant until it returns non-zero (which is returned). */
int ibvd_tenant_foreach(int (*fn)(const struct ibvd_tenant *t, void *arg),
			void *arg);

#endif /* IBVD_TENANT_H */
