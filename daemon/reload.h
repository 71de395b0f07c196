/*
 * The daemon's configuration over its life: loaded at startup (main.c),
 * re-read and applied on SIGHUP and "ibvctl daemon reload" (reload.c).
 * Only these functions parse the config file.
 */
#ifndef IBVD_RELOAD_H
#define IBVD_RELOAD_H

#include <stddef.h>

#include "log.h"

/* Where the daemon looks for its config when -c is not given. */
#define IBVD_DEFAULT_CONFIG	SYSCONFDIR "/ibverbsd/ibverbsd.conf"

struct ibvd_config;
struct ibvd_daemon;

/* The log level of a config's level raised by -v verbosity times. */
enum ibvd_log_level ibvd_log_level_for(int base, unsigned int verbosity);

/* Recompute the log level from the config and -v. */
void ibvd_daemon_apply_log_level(const struct ibvd_daemon *d);

/*
 * Load the configuration the way startup does (-c FILE, else the default
 * file if it exists, else the built-in defaults).  NULL on error, with a
 * one-line message in err.
 */
struct ibvd_config *ibvd_daemon_load_config(const struct ibvd_daemon *d,
					    char *err, size_t errlen);

/*
 * Re-read the configuration and apply it (SIGHUP, "daemon reload"; the
 * admin layer reaches it through d->reload).  Returns 0, or a negative
 * errno with a message in err; on error the old configuration stays in
 * force.
 */
int ibvd_daemon_reload(struct ibvd_daemon *d, char *err, size_t errlen);

#endif /* IBVD_RELOAD_H */
