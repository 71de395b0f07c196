/*
 * Opening a device by name, for the test and bench programs that take one
 * on their command line or from the environment.
 */
#ifndef IBVERBSD_TESTS_OPEN_DEVICE_H
#define IBVERBSD_TESTS_OPEN_DEVICE_H

#include <errno.h>
#include <string.h>

#include <infiniband/verbs.h>

/*
 * A new context on the device called name (the first device if name is
 * NULL), or NULL with errno: ENODEV when there is no such device.  The
 * device list is freed at once: the context holds its device.
 */
static inline struct ibv_context *open_device_named(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int i, err = ENODEV;

	if (!list)
		return NULL;
	for (i = 0; list[i]; i++) {
		if (name && strcmp(ibv_get_device_name(list[i]), name))
			continue;
		ctx = ibv_open_device(list[i]);
		err = errno;
		break;
	}
	ibv_free_device_list(list);
	if (!ctx)
		errno = err;
	return ctx;
}

#endif
