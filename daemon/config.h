/*
 * ibverbsd.conf: the daemon's JSON configuration (man ibverbsd.conf(5)).
 *
 * {
 *   "socket":  { "path": "/run/ibverbsd/ibverbsd.sock", "mode": "0666", "group": "" },
 *   "engine":  { "threads": 1 },
 *   "log":     { "level": "info" },
 *   "devices": [ { "name": "ibvd0", "ports": 1, "lid": 1, "guid": "auto" } ],
 *   "limits":  { "default": { "qp": 64 }, "uid": { "1001": { "memlock": "max" } },
 *                "group": { "rdma": {...} }, "cgroup": { "/user.slice/": {...} } }
 * }
 *
 * Every key is optional except that at least one device must exist; unknown
 * keys are errors.  A device's ports get LIDs lid, lid+1, ...; "lid" omitted
 * or 0 means "assign one"; "guid" is "auto" (derived from /etc/machine-id and
 * the device name, stable across restarts) or "xxxx:xxxx:xxxx:xxxx".  A
 * device without "name" is called ibvdN, N its index in the array.  Names,
 * explicit GUIDs and LIDs are unique across devices.
 *
 * In daemon/, "config.h" is this file; the generated one is <config.h>.
 */
#ifndef IBVD_CONFIG_H
#define IBVD_CONFIG_H

#include <stdint.h>
#include <sys/types.h>

#define IBVD_DEV_NAME_MAX	64	/* including NUL, like ibv_device.name */
#define IBVD_MAX_DEVICES	16
#define IBVD_MAX_PORTS		8
#define IBVD_MAX_ENGINE_THREADS	64
#define IBVD_MAX_LID		0xBFFF	/* last unicast LID */

struct ibvd_config_device {
	char name[IBVD_DEV_NAME_MAX];
	unsigned int ports;		/* 1..IBVD_MAX_PORTS */
	uint16_t lid;			/* base LID; 0 = assign; the ports'
					 * lid..lid+ports-1 of all devices are
					 * unique and <= IBVD_MAX_LID */
	uint64_t guid;			/* 0 = derive */
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
	IBVD_LIMIT_CM_ID,
	IBVD_LIMIT_NKINDS
};

#define IBVD_LIMIT_UNLIMITED	UINT64_MAX	/* "max" */

extern const char *const ibvd_limit_names[IBVD_LIMIT_NKINDS];

struct ibvd_quota {
	uint64_t max[IBVD_LIMIT_NKINDS];
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
	struct ibvd_quota limits;
};

struct ibvd_config {
	char *path;			/* file it was read from, or NULL */
	char *socket_path;
	mode_t socket_mode;		/* default 0666 */
	char *socket_group;		/* NULL = leave the group alone; a
					 * name that existed at load time */
	unsigned int engine_threads;	/* default 1 */
	int log_level;			/* enum ibvd_log_level, default info */
	unsigned int ndevices;
	struct ibvd_config_device devices[IBVD_MAX_DEVICES];
	struct ibvd_quota limit_default;	/* all "max" unless set */
	size_t nlimit_rules;
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

/*
 * The limits that apply to a peer: its uid's entry, else its (primary)
 * gid's group entry, else the entry with the longest cgroup prefix of
 * cgroup (may be NULL: none match), else the default.  Never NULL.
 */
const struct ibvd_quota *ibvd_config_limits_for(const struct ibvd_config *cfg,
						 uid_t uid, gid_t gid,
						 const char *cgroup);

#endif /* IBVD_CONFIG_H */
