/*
 * The file behind a range of the process's memory, if it shares one.
 *
 * At ibv_reg_mr the library looks in /proc/self/maps: a range that lies
 * in a MAP_SHARED mapping of a file (a regular file, a /dev/shm or
 * hugetlbfs file, a memfd) can be reached by the daemon through a mapping
 * of its own, with one memcpy per byte instead of the page-by-page
 * bounces of /proc/self/mem (daemon/verbs/mr/map.c).  The file is
 * reopened by its path when it still has one, else found among the fds
 * the process holds (a memfd, an unlinked file), matched by device and
 * inode either way; the fd goes to the daemon with REG_MR_SHARED.
 *
 * Private memory is never remapped or copied elsewhere: only what the
 * application itself maps shared qualifies.  Anything unexpected means
 * "not shared" and the registration goes the ordinary way.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "ibvd_verbs.h"

/* One line of /proc/self/maps. */
struct vma {
	uint64_t start, end, offset;
	char perms[5];
	unsigned int major, minor;
	uint64_t inode;
	char path[4096];
};

static bool vma_parse(const char *line, struct vma *v)
{
	int pos = 0;

	v->path[0] = '\0';
	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %x:%x %" SCNu64 " %n",
		   &v->start, &v->end, v->perms, &v->offset, &v->major,
		   &v->minor, &v->inode, &pos) < 7)
		return false;
	if (pos > 0) {
		snprintf(v->path, sizeof(v->path), "%s", line + pos);
		v->path[strcspn(v->path, "\n")] = '\0';
	}
	return true;
}

/* Does the next mapping continue the same file where v ends? */
static bool vma_continues(const struct vma *v, const struct vma *next)
{
	return next->start == v->end && next->inode == v->inode &&
	       next->major == v->major && next->minor == v->minor &&
	       next->offset == v->offset + (v->end - v->start) &&
	       next->perms[3] == 's';
}

/*
 * The shared file mapping that holds [addr, end): its first line in *v
 * (with v->end extended over mappings that continue it).  -ENOENT if the
 * range is not all one shared file mapping.
 */
static int find_vma(uint64_t addr, uint64_t end, struct vma *v)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[4200];
	struct vma next;
	bool found = false;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (!found) {
			if (!vma_parse(line, v) || addr < v->start || addr >= v->end)
				continue;
			if (v->perms[3] != 's' || !v->inode)
				break;
			found = true;
		} else if (!vma_parse(line, &next) || !vma_continues(v, &next)) {
			break;
		} else {
			v->end = next.end;
		}
		if (end <= v->end)
			break;
	}
	fclose(f);
	return found && end <= v->end ? 0 : -ENOENT;
}

static bool same_file(int fd, const struct vma *v)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	       st.st_ino == v->inode && st.st_dev == makedev(v->major, v->minor);
}

/* Reopen the file by its path, if it still has that path. */
static int open_path(const struct vma *v, int flags)
{
	struct stat st;
	int fd;

	if (v->path[0] != '/' || strstr(v->path, " (deleted)"))
		return -ENOENT;
	/* Never open a device or a fifo: opening one may do things. */
	if (stat(v->path, &st) < 0 || !S_ISREG(st.st_mode))
		return -ENOENT;
	fd = open(v->path, flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (!same_file(fd, v)) {
		close(fd);
		return -ENOENT;
	}
	return fd;
}

/* An fd of the file among those the process holds (memfd, unlinked). */
static int open_held(const struct vma *v, int flags)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char path[64];
	int fd = -ENOENT, n;

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		n = atoi(e->d_name);
		if (e->d_name[0] < '0' || e->d_name[0] > '9' || n == dirfd(d) ||
		    !same_file(n, v))
			continue;
		/* A new open file description, with the mode we need. */
		snprintf(path, sizeof(path), "/proc/self/fd/%d", n);
		fd = open(path, flags | O_CLOEXEC);
		if (fd < 0)
			fd = fcntl(n, F_DUPFD_CLOEXEC, 0);
		if (fd < 0)
			fd = -errno;
		break;
	}
	closedir(d);
	return fd;
}

int ibvc_backing_file(const void *addr, size_t len, bool writable, int *fd,
		      uint64_t *offset)
{
	uint64_t start = (uintptr_t)addr;
	int flags = writable ? O_RDWR : O_RDONLY;
	struct vma v;
	int ret;

	if (!len || start + len < start)
		return -ENOENT;
	ret = find_vma(start, start + len, &v);
	if (ret < 0)
		return ret;
	ret = open_path(&v, flags);
	if (ret < 0)
		ret = open_held(&v, flags);
	if (ret < 0)
		return ret;
	*fd = ret;
	*offset = v.offset + (start - v.start);
	return 0;
}
