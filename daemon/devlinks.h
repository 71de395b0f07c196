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

/*
 * For a service manager that hides /dev from the daemon (systemd's
 * PrivateDevices=): make (make) or remove the links of the devices the
 * config names, in a separate privileged step, with no memory of which
 * were made.  Both also remove every other link to /dev/null in dir: one
 * a reload dropped would otherwise stay for good (the step before the
 * reload makes the new config's, the one after the stop removes the last
 * config's).  Only ibverbsd puts links to /dev/null there; what is not
 * one (a kernel's device node) is left alone.  Returns 0, or
 * -errno of the first failure (after trying every device).
 */
int ibvd_devlinks_oneshot(const char *dir, const struct ibvd_config *cfg,
			  bool make);

#endif /* IBVD_DEVLINKS_H */
