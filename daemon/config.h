/*
 * ibverbsd.conf: the daemon's JSON configuration (man ibverbsd.conf(5)).
 *
 * {
 *   "socket":  { "path": "/run/ibverbsd/ibverbsd.sock", "mode": "0666", "group": "" },
 *   "engine":  { "threads": 1 },
 *   "log":     { "level": "info" },
 *   "devices": [ { "name": "ibvd0", "ports": 1, "lid": 1, "guid": "auto" } ]
 * }
 *
 * Every key is optional except that at least one device must exist; unknown
 * keys are errors.  A device's ports get LIDs lid, lid+1, ...; "lid" omitted
 * or 0 means "assign one"; "guid" is "auto" (derived from /etc/machine-id and
 * the device name, stable across restarts) or "xxxx:xxxx:xxxx:xxxx".
 */
#ifndef IBVD_CONFIG_H
#define IBVD_CONFIG_H

#include <stdint.h>
#include <sys/types.h>

#define IBVD_DEV_NAME_MAX	64	/* including NUL, like ibv_device.name */
#define IBVD_MAX_DEVICES	16
#define IBVD_MAX_PORTS		8
#define IBVD_MAX_ENGINE_THREADS	64

struct ibvd_config_device {
	char name[IBVD_DEV_NAME_MAX];
	unsigned int ports;		/* 1..IBVD_MAX_PORTS */
	uint16_t lid;			/* base LID; 0 = assign */
	uint64_t guid;			/* 0 = derive */
};

struct ibvd_config {
	char *path;			/* file it was read from, or NULL */
	char *socket_path;
	mode_t socket_mode;		/* default 0666 */
	char *socket_group;		/* NULL or "" = leave the group alone */
	unsigned int engine_threads;	/* default 1 */
	int log_level;			/* enum ibvd_log_level, default info */
	unsigned int ndevices;
	struct ibvd_config_device devices[IBVD_MAX_DEVICES];
};

/*
 * Parse the file at path into a new config.  On failure returns NULL and, if
 * err is non-NULL, writes a one-line message that names the file, line,
 * column and key, e.g.
 *   "/etc/ibverbsd/ibverbsd.conf:7:12: devices[0].lid: expected an integer 1..49151"
 */
struct ibvd_config *ibvd_config_load(const char *path, char *err, size_t errlen);

/* Same, from a string (name is used in messages in place of the path). */
struct ibvd_config *ibvd_config_parse(const char *text, const char *name,
				      char *err, size_t errlen);

/* The built-in defaults: one device "ibvd0" with one port. */
struct ibvd_config *ibvd_config_default(void);

void ibvd_config_free(struct ibvd_config *cfg);

#endif /* IBVD_CONFIG_H */
