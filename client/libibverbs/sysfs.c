/*
 * The sysfs helpers of the 1.0 ABI.  ibv_devinfo reads "board_id" from
 * each device's ibdev_path with ibv_read_sysfs_file() and prints it only on
 * success.  Our devices have no sysfs directory, so that read must fail
 * cleanly whatever the path holds; reads of genuine sysfs files (which
 * other programs may make) still work.
 *
 * ibv_get_sysfs_path() honours SYSFS_PATH as rdma-core's does: Open MPI's
 * openib BTL gives up unless "<sysfs path>/class/infiniband" is a
 * directory, which no kernel makes for our devices, and SYSFS_PATH is how
 * a user shows it one (ibverbsd(7), "ENVIRONMENT").
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "exports.h"

#ifndef SYSFS_MAGIC
#define SYSFS_MAGIC	0x62656572
#endif

static const char *sysfs_root = "/sys";
static pthread_once_t sysfs_root_once = PTHREAD_ONCE_INIT;

/*
 * SYSFS_PATH without its trailing slashes, at most IBV_SYSFS_PATH_MAX
 * bytes of it, as rdma-core keeps it; not in a set-uid or otherwise
 * secure process (secure_getenv), where rdma-core's getuid() == geteuid()
 * test would refuse it too.  Unset, empty or all slashes: /sys.
 */
static void sysfs_root_init(void)
{
	const char *env = secure_getenv("SYSFS_PATH");
	char *root;
	size_t len;

	if (!env)
		return;
	root = strndup(env, IBV_SYSFS_PATH_MAX);
	if (!root)
		return;
	len = strlen(root);
	while (len > 0 && root[len - 1] == '/')
		root[--len] = '\0';
	if (len == 0) {
		free(root);
		return;
	}
	sysfs_root = root;	/* for the life of the process, as callers keep it */
}

/* Read once: callers keep the pointer, and ibdev_path is built from it. */
const char *ibv_get_sysfs_path(void)
{
	pthread_once(&sysfs_root_once, sysfs_root_init);
	return sysfs_root;
}

/* Open DIR/FILE for reading, but only if it lives on a sysfs mount. */
static int open_sysfs_file(const char *dir, const char *file)
{
	char path[4096];
	struct statfs fs;
	int n, fd;

	n = snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstatfs(fd, &fs) < 0 || fs.f_type != SYSFS_MAGIC) {
		close(fd);
		errno = ENOENT;
		return -1;
	}
	return fd;
}

/*
 * Read a sysfs attribute into BUF (always NUL-terminated), dropping the
 * trailing newline.  Returns the length, or -1 with errno.
 */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
			size_t size)
{
	ssize_t len;
	int fd, saved;

	if (!dir || !file || !buf || size == 0) {
		errno = EINVAL;
		return -1;
	}
	fd = open_sysfs_file(dir, file);
	if (fd < 0)
		return -1;
	len = read(fd, buf, size - 1);
	saved = errno;
	close(fd);
	if (len < 0) {
		errno = saved;
		return -1;
	}
	if (len > 0 && buf[len - 1] == '\n')
		len--;
	buf[len] = '\0';
	return (int)len;
}
