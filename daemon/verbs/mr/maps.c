/*
 * Whether a client's range is mapped (maps.h), read from the /proc/PID/maps
 * fd the client attached.
 *
 * Reading the file renders every mapping of the process as text up to
 * the range, and a client chooses how many it has (up to
 * vm.max_map_count, 65,530 by default): 64,000 of them made each
 * registration cost the control thread 30 ms, which every other client
 * waited for.  Since Linux 6.11 the file answers an ioctl, PROCMAP_QUERY,
 * with the one mapping that holds an address, found in the process's
 * tree of mappings: a registration then costs one call per mapping of
 * its own range.  Older kernels (Debian 12's 6.1) read the text.
 *
 * Either way the fd is bound to the client's mm, as its mem fd is: it
 * shows the mappings as they are now, and none once the client exited.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>

#include "maps.h"

/* linux/fs.h of Linux 6.11, which Debian 12's headers predate. */
struct maps_query {
	uint64_t size;
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start;
	uint64_t vma_end;
	uint64_t vma_flags;
	uint64_t vma_page_size;
	uint64_t vma_offset;
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t vma_name_size;
	uint32_t build_id_size;
	uint64_t vma_name_addr;
	uint64_t build_id_addr;
};

#define MAPS_QUERY		_IOWR('f', 17, struct maps_query)
#define MAPS_VMA_READABLE	0x01u
#define MAPS_VMA_WRITABLE	0x02u

/* Kernel pages that no pin would accept, by their mapping's name. */
static bool kernel_pages(const char *name)
{
	return !strncmp(name, "[vvar", 5) || !strcmp(name, "[vsyscall]");
}

/* The mapping that holds addr, with its name in name if size allows. */
static int query(int fd, uint64_t addr, char *name, uint32_t size,
		 struct maps_query *q)
{
	memset(q, 0, sizeof(*q));
	q->size = sizeof(*q);
	q->query_addr = addr;
	q->vma_name_addr = (uint64_t)(uintptr_t)name;
	q->vma_name_size = size;
	return ioctl(fd, MAPS_QUERY, q) < 0 ? -errno : 0;
}

int ibvd_maps_cover_query(int fd, uint64_t addr, uint64_t end, bool writable)
{
	static char name[PATH_MAX];
	struct maps_query q;
	uint64_t cur = addr;
	int ret;

	while (cur < end) {
		ret = query(fd, cur, name, sizeof(name), &q);
		/* a name longer than a path is a file's, not the kernel's */
		if (ret == -ENAMETOOLONG)
			ret = query(fd, cur, NULL, 0, &q);
		/* no mapping there, or no process: else the ioctl is refused */
		if (ret == -ENOENT || ret == -ESRCH)
			return -EFAULT;
		if (ret < 0)
			return -ENOTTY;
		if (q.vma_start > cur || q.vma_end <= cur ||
		    !(q.vma_flags & MAPS_VMA_READABLE) ||
		    (writable && !(q.vma_flags & MAPS_VMA_WRITABLE)) ||
		    (q.vma_name_size && kernel_pages(name)))
			return -EFAULT;
		cur = q.vma_end;
	}
	return 0;
}

/* One line's mapping: fit for registration? */
static bool line_ok(const char *perms, const char *line, bool writable)
{
	const char *name = strchr(line, '[');

	if (perms[0] != 'r' || (writable && perms[1] != 'w'))
		return false;
	return !name || !kernel_pages(name);
}

int ibvd_maps_cover_text(int fd, uint64_t addr, uint64_t end, bool writable)
{
	char *line = NULL, perms[5];
	uint64_t vstart, vend, cur = addr;
	int ret = -EFAULT, dupfd;
	size_t cap = 0;
	FILE *f;

	/* a FILE of our own, rewound (only the control thread reads by offset) */
	dupfd = dup(fd);
	if (dupfd < 0)
		return -errno;
	f = fdopen(dupfd, "re");
	if (!f) {
		close(dupfd);
		return -ENOMEM;
	}
	rewind(f);
	while (getline(&line, &cap, f) > 0) {
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s", &vstart, &vend,
			   perms) != 3)
			break;
		if (vend <= cur)
			continue;
		if (vstart > cur || !line_ok(perms, line, writable))
			break;		/* a hole, or the wrong permissions */
		cur = vend;
		if (cur >= end) {
			ret = 0;
			break;
		}
	}
	free(line);
	fclose(f);
	return ret;
}

int ibvd_maps_cover(int fd, uint64_t addr, uint64_t end, bool writable)
{
	int ret = ibvd_maps_cover_query(fd, addr, end, writable);

	return ret == -ENOTTY ? ibvd_maps_cover_text(fd, addr, end, writable)
			      : ret;
}
