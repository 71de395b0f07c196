/*
 * ibverbsd.conf: the daemon's JSON configuration (man ibverbsd.conf(5)).
 *
 * {
 *   "user": "ibverbsd",
 *   "admin_group": "ibverbsd-admin",
 *   "socket":  { "path": "/run/ibverbsd/ibverbsd.sock", "mode": "0666", "group": "" },
 *   "engine":  { "threads": "auto" },
 *   "log":     { "level": "info" },
 *   "rlimit_memlock": "enforce",
 *   "device_links": true,
 *   "devices": [ { "name": "ibvd0", "ports": 1, "lid": 1, "guid": "auto" },
 *                { "name": "roce0", "netdev": "eth0", "peers": [ "10.0.0.0/8" ] } ],
 *   "limits":  { "default": { "qp": 64, "bandwidth": 1048576,
 *                             "devices": { "ibvd0": { "qp": 16 } } },
 *                "uid": { "1001": { "memlock": "max" } },
 *                "group": { "rdma": {...} }, "cgroup": { "/user.slice/": {...} } }
 * }
 *
 * Every key is optional except that at least one device must exist; unknown
 * keys are errors.  A device's ports get LIDs lid, lid+1, ...; "lid" omitted
 * or 0 means "assign one"; "guid" is "auto" (derived from /etc/machine-id and
 * the device name, stable across restarts) or "xxxx:xxxx:xxxx:xxxx".  A
 * device without "name" is called ibvdN, N its index in the array.  Names,
 * explicit GUIDs and LIDs are unique across devices.  A device with
 * "netdev" is a RoCEv2 device on that network interface, which must exist
 * when the file is loaded: one port, no LID, "guid" "auto" meaning the
 * modified EUI-64 of the interface's MAC (as rxe's); no two devices share
 * an interface.  Its "peers" are the CIDRs packets may come from (default:
 * the interface's own subnets).
 *
 * "admin_group": members of this group, if it exists, administer the
 * daemon as root does (ibvctl limit set, daemon reload, every tenant's
 * objects); "" makes root the only administrator.
 * "user": started as root, the daemon becomes this user (a name, or a
 * numeric uid) once its socket is bound and its devices are open, and
 * keeps no capability (daemon/privilege.c); default: stay who it is.
 * "rlimit_memlock": "enforce" holds a client's registered memory to its
 * process's RLIMIT_MEMLOCK, as the kernel would although nothing is
 * pinned; "ignore" leaves only the tenant quotas ("limits").
 * "device_links": true makes /dev/infiniband/<device> exist for each
 * device (a link to /dev/null: UCX looks for a node there).
 *
 * In daemon/, "config/config.h" is this file; autoconf's is <config.h>.
 *
 * Layer config/: parses and checks this file.  It calls core/ (the limits
 * of the object model, device.h) and common/; only startup and reload
 * (main.c, reload.c) call its parsers, everyone else reads the result.
 */
#ifndef IBVD_CONFIG_H
#define IBVD_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/device.h"	/* the model's own limits */

#define IBVD_MAX_ENGINE_THREADS	64
/*
 * "admin_group" by default: a group of its own, never "rdma", the group
 * Debian gives RDMA users and this daemon's socket is often for.
 */
#define IBVD_ADMIN_GROUP_DEFAULT	"ibverbsd-admin"
/* engine.threads "auto" (the default): the CPUs we may run on, less one */
#define IBVD_ENGINE_THREADS_AUTO	0u
/* engine.staging: each QP's staging block (verbs/rings/staging.c) */
#define IBVD_STAGING_DEFAULT		(1u << 20)
#define IBVD_STAGING_MAX_KIB		65536
/* engine.stuck_copy_ms: a copy of client memory logged as stuck (copy_watch.h) */
#define IBVD_STUCK_COPY_DEFAULT_MS	5000u
#define IBVD_STUCK_COPY_MAX_MS		3600000
/*
 * cm.handshake_timeout_ms: a local rdma_cm handshake whose other side
 * does not answer (a REQ never accepted or rejected, a REP never
 * confirmed) fails after this long; about the kernel's (CM response
 * timeout 4.3 s, 15 retries: roughly a minute).
 */
#define IBVD_CM_HANDSHAKE_DEFAULT_MS	60000u
#define IBVD_CM_HANDSHAKE_MIN_MS	100
#define IBVD_CM_HANDSHAKE_MAX_MS	3600000

struct ibvd_config_device {
	char name[IBVD_DEV_NAME_MAX];
	unsigned int ports;		/* 1..IBVD_MAX_PORTS */
	uint16_t lid;			/* base LID; 0 = assign; the ports'
					 * lid..lid+ports-1 of all devices are
					 * unique and <= IBVD_MAX_LID */
	uint64_t guid;			/* 0 = derive */
	char netdev[IFNAMSIZ];		/* "": a software device; else a RoCE
					 * device on this interface */
	struct ibvd_cidr peers[IBVD_MAX_PEERS];	/* RoCE: "peers" */
	unsigned int npeers;		/* 0: the interface's own subnets */
};

/*
 * Per-tenant limits (the "limits" section; man ibverbsd.conf(5)).  The
 * names are the rdma cgroup's (hca_handle, hca_object) plus per-kind
 * counts; ibvd_limit_names[] spells them as the config and ibvctl do.
 */
enum ibvd_limit_kind {
	IBVD_LIMIT_MEMLOCK,		/* pinned bytes (REG_MR, pages spanned) */
	IBVD_LIMIT_HCA_HANDLE,		/* open device contexts */
	IBVD_LIMIT_HCA_OBJECT,		/* all verbs objects together */
	IBVD_LIMIT_QP,
	IBVD_LIMIT_CQ,
	IBVD_LIMIT_MR,
	IBVD_LIMIT_PD,
	IBVD_LIMIT_SRQ,
	IBVD_LIMIT_AH,
	IBVD_LIMIT_CM_ID,		/* built-in default 65536 */
	/*
	 * What a client makes the daemon hold besides verbs objects
	 * (daemon/LIMITS.md).  Like cm_id, unlike the rdma cgroup's kinds,
	 * these have a built-in default (ibvd_limit_builtin()), not "max".
	 */
	IBVD_LIMIT_SESSION,		/* connections to the daemon */
	IBVD_LIMIT_COMP_CHANNEL,	/* completion channels (a socket each) */
	IBVD_LIMIT_MCAST_ATTACH,	/* QP multicast attachments */
	IBVD_LIMIT_MCAST_JOIN,		/* CM multicast joins */
	IBVD_LIMIT_NKINDS
};

/*
 * "bandwidth" is a limit but nothing is counted against it here (the
 * engine's token bucket enforces it), so it is not a kind: this is its
 * bit in struct ibvd_limit_keys.given and what ibvd_limit_key() returns.
 */
#define IBVD_LIMIT_BANDWIDTH	IBVD_LIMIT_NKINDS

#define IBVD_LIMIT_UNLIMITED	UINT64_MAX	/* "max" */

extern const char *const ibvd_limit_names[IBVD_LIMIT_NKINDS];

/*
 * A kind's limit over all devices where no rule and no "default" key
 * sets it: "max" for the rdma cgroup's kinds (an administrator chooses
 * those), a number no honest program reaches for the rest, so that one
 * uid cannot take all of the daemon's ids, sockets, groups or
 * connections by default.
 */
uint64_t ibvd_limit_builtin(enum ibvd_limit_kind kind);

/*
 * 1 for what belongs to no device and is limited over all devices only
 * (cm_ids, connections, CM joins; bandwidth too, which is not a kind).
 */
int ibvd_limit_all_devices_only(int kind);

struct ibvd_quota {
	uint64_t max[IBVD_LIMIT_NKINDS];
	uint64_t bandwidth;		/* bytes/s over all devices, at least
					 * 1; UNLIMITED: "max" (the engine's
					 * rate bucket) */
};

/*
 * The keys one limits object sets, as written: a value where the bit
 * (1u << kind, 1u << IBVD_LIMIT_BANDWIDTH) is in given, "max" elsewhere.
 * Keys left out are resolved when the limits are asked for, so that a
 * change to "default" (ibvctl limit set) reaches every rule that omits it.
 */
struct ibvd_limit_keys {
	struct ibvd_quota q;
	unsigned int given;
};

/*
 * "default" or one rule: keys that limit the sum over all devices, and
 * a "devices" object whose keys limit one device each (never bandwidth).
 */
struct ibvd_limit_entry {
	struct ibvd_limit_keys all;
	struct ibvd_limit_keys dev[IBVD_MAX_DEVICES];	/* by cfg->devices index */
	int runtime;			/* changed by "ibvctl limit set" */
};

enum ibvd_limit_match {
	IBVD_LIMIT_MATCH_UID,
	IBVD_LIMIT_MATCH_GROUP,
	IBVD_LIMIT_MATCH_CGROUP,
};

/* One "uid", "group" or "cgroup" entry; keys it omits come from "default". */
struct ibvd_config_limit_rule {
	enum ibvd_limit_match match;
	uid_t uid;			/* MATCH_UID */
	gid_t gid;			/* MATCH_GROUP: resolved at load */
	char *cgroup;			/* MATCH_CGROUP: a path prefix */
	char *name;			/* the key as written: "1001", "rdma" */
	struct ibvd_limit_entry limits;
};

struct ibvd_config {
	char *path;			/* file it was read from, or NULL */
	char *user;			/* "user", or NULL */
	char *socket_path;
	mode_t socket_mode;		/* default 0666 */
	char *socket_group;		/* NULL = leave the group alone; a
					 * name that existed at load time */
	char *admin_group;		/* "admin_group", default
					 * IBVD_ADMIN_GROUP_DEFAULT; NULL: root
					 * only */
	unsigned int engine_threads;	/* default IBVD_ENGINE_THREADS_AUTO */
	uint32_t engine_staging;	/* "staging" (KiB in the file): bytes
					 * of each QP's staging block, 0 none */
	bool engine_direct;		/* "direct": transit rings between
					 * local RC QPs (default false) */
	uint32_t engine_stuck_copy_ms;	/* "stuck_copy_ms": log a copy of
					 * client memory that has not returned
					 * after this long; 0 never */
	int log_level;			/* enum ibvd_log_level, default info */
	uint32_t cm_handshake_ms;	/* "cm": {"handshake_timeout_ms"}: how
					 * long a local rdma_cm handshake waits
					 * for the other side's answer */
	bool rlimit_memlock_enforce;	/* "rlimit_memlock": hold clients to
					 * their RLIMIT_MEMLOCK (default) */
	bool device_links;		/* /dev/infiniband/<device> links
					 * (devlinks.h), default true */
	unsigned int ndevices;
	struct ibvd_config_device devices[IBVD_MAX_DEVICES];
	struct ibvd_limit_entry limit_default;	/* nothing set: all "max" */
	size_t nlimit_rules;		/* in file order, then those
					 * ibvctl limit set added */
	struct ibvd_config_limit_rule *limit_rules;
};

/*
 * Parse the file at path into a new config.  On failure returns NULL and, if
 * err is non-NULL, writes a one-line message that names the file, line,
 * column and key, e.g.
 *   "/etc/ibverbsd/ibverbsd.conf:7:12: devices[0].lid: expected an integer 0..49151, got \"x\""
 * (line and column of the key, or of the array element, that is wrong).
 * A file that cannot be read gives "PATH: cannot open: <strerror>" (or
 * "cannot read: ..."), without line and column.
 */
struct ibvd_config *ibvd_config_load(const char *path, char *err, size_t errlen);

/*
 * Same, over running (the configuration in use, or NULL): a device's
 * "netdev" may then name a missing interface that running names too, as
 * its RoCE device waits for one of that name.
 */
struct ibvd_config *ibvd_config_load_over(const char *path,
					  const struct ibvd_config *running,
					  char *err, size_t errlen);

/*
 * Same, from a string (name is used in messages in place of the path;
 * cfg->path stays NULL).
 */
struct ibvd_config *ibvd_config_parse(const char *text, const char *name,
				      char *err, size_t errlen);

/*
 * The built-in defaults, the same as parsing "{}": socket
 * IBVERBSD_DEFAULT_SOCKET mode 0666, one engine thread, level info, one
 * device "ibvd0" with one port, LID and GUID assigned.  NULL: no memory.
 */
struct ibvd_config *ibvd_config_default(void);

void ibvd_config_free(struct ibvd_config *cfg);

/* Who asks, for choosing the rule that applies (tenant.h fills it). */
struct ibvd_limit_who {
	uid_t uid;
	gid_t gid;			/* primary */
	const gid_t *groups;		/* supplementary; may include gid */
	size_t ngroups;
	const char *cgroup;		/* NULL: unknown */
};

/*
 * The rule that applies to who, or NULL for "default": its uid's entry,
 * else the first group entry (in file order, then runtime ones in the
 * order ibvctl limit set added them) whose group is any of who's, primary
 * or supplementary alike, else the entry with the longest cgroup prefix
 * of who->cgroup.
 */
const struct ibvd_config_limit_rule *
ibvd_config_limit_rule_for(const struct ibvd_config *cfg,
			   const struct ibvd_limit_who *who);

/* Has cfg a "cgroup" rule (from the file, or added by ibvctl limit set)? */
bool ibvd_config_has_cgroup_rules(const struct ibvd_config *cfg);

/* rule's (NULL: default's) limits on the sum over all devices. */
void ibvd_config_limits_all(const struct ibvd_config *cfg,
			    const struct ibvd_config_limit_rule *rule,
			    struct ibvd_quota *out);

/*
 * rule's (NULL: default's) limits on the device named dev: its key, else
 * the default's for that device, else "max" (also for a device the
 * config does not name).  bandwidth is always "max" here.
 */
void ibvd_config_limits_dev(const struct ibvd_config *cfg,
			    const struct ibvd_config_limit_rule *rule,
			    const char *dev, struct ibvd_quota *out);

/* "uid 1001", "group rdma", "cgroup /user.slice/", "default" (with
 * "runtime " before it once ibvctl limit set changed it). */
void ibvd_config_rule_name(const struct ibvd_config *cfg,
			   const struct ibvd_config_limit_rule *rule,
			   char *buf, size_t len);

/* The index of device name in cfg->devices, or -1. */
int ibvd_config_device_index(const struct ibvd_config *cfg, const char *name);

/* The gid of a group name or decimal gid, as rules and admin_group take
 * them; -ENOENT when there is no such group, -EIO when it cannot be
 * looked up (why says which). */
int ibvd_config_lookup_group(const char *name, gid_t *gid, char *why,
			     size_t len);

/* The kind a limit key names, IBVD_LIMIT_BANDWIDTH, or -1. */
int ibvd_limit_key(const char *name);

/*
 * A limit of kind as text: "max" (IBVD_LIMIT_UNLIMITED), or decimal
 * digits with, for byte counts (memlock, bandwidth), a 1024-based k/m/g
 * suffix.  At most INT64_MAX: every limit must fit a JSON integer.
 * 0 or -EINVAL.
 */
int ibvd_limit_parse_value(int kind, const char *s, uint64_t *ret);

/*
 * The entry "ibvctl limit set" changes: the rule matching key (a decimal
 * uid, a group name or decimal gid, a cgroup prefix), added with no key
 * of its own if there is none.  0, -EINVAL with a message in err, or
 * -ENOMEM.  Adding a rule moves the others: pointers into
 * cfg->limit_rules are stale afterwards.
 */
int ibvd_config_limit_rule_get(struct ibvd_config *cfg,
			       enum ibvd_limit_match match, const char *key,
			       struct ibvd_limit_entry **ret,
			       char *err, size_t errlen);

#endif /* IBVD_CONFIG_H */
