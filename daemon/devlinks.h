/*
 * /dev/infiniband/<device>: a path some programs require before they use a
 * device.  UCX lists an IB device only if /dev/infiniband/<dev_name> is a
 * character device the user may read and write (its uverbs node on a
 * kernel stack); it never opens it.  Ours are symbolic links to /dev/null:
 * a character device everyone may open, harmless if opened.
 *
 * The daemon makes one per device when "device_links" is true (the
 * default) and removes, on reload and exit, only links it made itself and
 * that still point at /dev/null; a path that exists already (another
 * daemon's link, a kernel device node) is left alone.  Failing to make one
 * (an unprivileged daemon, a read-only /dev) is logged, never fatal.
 */
#ifndef IBVD_DEVLINKS_H
#define IBVD_DEVLINKS_H

#include <stdbool.h>

#include "config/config.h"
#include "core/device.h"

#define IBVD_DEVLINKS_DIR	"/dev/infiniband"

/*
 * Make the links of devs exist (enabled) and remove those of ours whose
 * device is gone or all of ours (!enabled).  dir is IBVD_DEVLINKS_DIR
 * except in tests.
 */
void ibvd_devlinks_sync(const char *dir, const struct ibvd_device_list *devs,
			bool enabled);

/* Remove every link this process made (at exit). */
void ibvd_devlinks_remove_all(void);

/* The steps of a service manager's (ibvd_devlinks_oneshot). */
enum ibvd_devlinks_step {
	/* before a start: the config's links, and no other */
	IBVD_DEVLINKS_MAKE,
	/*
	 * before a reload: the new config's links, the others kept.  The
	 * daemon may refuse the reload and go on serving every device it
	 * has; a device the reload drops keeps its link until the stop.
	 */
	IBVD_DEVLINKS_ADD,
	/* after a stop: none */
	IBVD_DEVLINKS_REMOVE,
};

/*
 * For a service manager that hides /dev from the daemon (systemd's
 * PrivateDevices=): the links of the devices the config names, made or
 * removed in a separate privileged step with no memory of which were
 * made.  MAKE and REMOVE also remove every other link to /dev/null in
 * dir: one a reload dropped would otherwise stay for good.  Only ibverbsd
 * puts links to /dev/null there; what is not one (a kernel's device node)
 * is left alone.  Returns 0, or -errno of the first failure (after trying
 * every device).
 */
int ibvd_devlinks_oneshot(const char *dir, const struct ibvd_config *cfg,
			  enum ibvd_devlinks_step step);

#endif /* IBVD_DEVLINKS_H */
