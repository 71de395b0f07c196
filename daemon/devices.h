/*
 * The device set, built from the config at startup and made to match it
 * again on reload (reload.c).
 */
#ifndef IBVD_DEVICES_H
#define IBVD_DEVICES_H

#include <stddef.h>
#include <stdint.h>

#include "core/device.h"

struct ibvd_config;

/*
 * Make devs match cfg.  Devices that keep their identity stay in devs
 * (their contexts untouched; a port whose LID moved gets lid_changed set);
 * devices that disappear or change identity are moved to removed, which
 * the caller must drain (their contexts are still attached); new devices
 * get fresh indexes from *next_ifindex.  On error (-EINVAL, -ENOMEM) writes
 * a message to err and changes nothing.
 *
 * last (may be NULL): the caller's own step that may fail, run once every
 * step of ours that may fail has passed and before anything changes: its
 * error (0 or a negative errno, its message in err) is the call's.
 */
struct ibvd_devices_last_step {
	int (*run)(void *arg, char *err, size_t errlen);
	void *arg;
};

int ibvd_devices_apply(struct ibvd_device_list *devs, unsigned int *ndevs,
		       const struct ibvd_config *cfg, uint32_t *next_ifindex,
		       struct ibvd_device_list *removed,
		       const struct ibvd_devices_last_step *last,
		       char *err, size_t errlen);

/*
 * Free a device that no context refers to any more, its transport's
 * per-device state (sockets, threads) first.
 */
void ibvd_devices_drop(struct ibvd_device *dev);

/*
 * Node GUID of a device without a configured one: an FNV-1a hash of the
 * machine id (/etc/machine-id, /var/lib/dbus/machine-id, else the host
 * name) and the device name, marked as a locally administered EUI-64.
 * Stable across restarts on one host, different between hosts.
 */
uint64_t ibvd_guid_derive(const char *machine_id, const char *dev_name);

#endif /* IBVD_DEVICES_H */
