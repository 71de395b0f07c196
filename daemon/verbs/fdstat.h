/*
 * Looking at a file a client passed us, on the control thread.
 *
 * fstat() asks the file's filesystem for fresh attributes: on NFS it
 * writes the file's dirty pages back first and asks the server, which
 * takes as long as the client's writes (or the server) take, with every
 * tenant waiting.  What the kernel has cached is enough where only the
 * file's type, mode, inode or size are needed: the type, mode and inode
 * of an open file do not change under us, and a size is only ever what
 * it was at one moment (a file may be truncated right after any stat).
 */
#ifndef IBVD_VERBS_FDSTAT_H
#define IBVD_VERBS_FDSTAT_H

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

/*
 * fd's attributes in mask (STATX_TYPE, STATX_MODE, STATX_INO,
 * STATX_SIZE; stx_dev_* and stx_blksize always), as the kernel has them
 * cached.  0, or a negative errno: -EINVAL if the filesystem leaves one
 * of them out.
 */
static inline int ibvd_fd_stat_cached(int fd, unsigned int mask,
				      struct statx *stx)
{
	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, mask, stx) < 0)
		return -errno;
	return (stx->stx_mask & mask) == mask ? 0 : -EINVAL;
}

#endif /* IBVD_VERBS_FDSTAT_H */
