/*
 * fstatat(2) with AT_EMPTY_PATH and statx(2) of an rsocket: its mode a
 * socket's, as fstat(2) says (preload.c).  The rsocket's fd is the CM
 * channel's epoll instance, whose mode has no file type; a program that
 * asks these (glibc's statx, Rust's File::metadata, a C program's
 * fstatat(fd, "", ...)) would take it for something that is neither a
 * socket nor a file.  Paths are left alone: /proc/self/fd/N names the
 * epoll instance, which no preload can change.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/stat.h>

#include "preload.h"

#define SOCK_MODE	(S_IFSOCK | 0777)

static struct {
	int (*fstatat)(int, const char *, struct stat *, int);
	int (*fstatat64)(int, const char *, struct stat64 *, int);
	int (*statx)(int, const char *, int, unsigned int, struct statx *);
} real;

static pthread_once_t stat_once = PTHREAD_ONCE_INIT;

static void stat_init_real(void)
{
	real.fstatat = dlsym(RTLD_NEXT, "fstatat");
	real.fstatat64 = dlsym(RTLD_NEXT, "fstatat64");
	real.statx = dlsym(RTLD_NEXT, "statx");
}

static void stat_init(void)
{
	pthread_once(&stat_once, stat_init_real);
}

/* The call asks of fd itself, and fd is one of the program's rsockets. */
static bool of_rsocket(int fd, const char *path, int flags)
{
	return path && !*path && (flags & AT_EMPTY_PATH) && preload_is_rsocket(fd);
}

static int no_call(void)
{
	errno = ENOSYS;
	return -1;
}

EXPORT int fstatat(int fd, const char *path, struct stat *st, int flags)
{
	int ret;

	stat_init();
	if (!real.fstatat)
		return no_call();
	ret = real.fstatat(fd, path, st, flags);
	if (ret == 0 && of_rsocket(fd, path, flags))
		st->st_mode = SOCK_MODE;
	return ret;
}

EXPORT int fstatat64(int fd, const char *path, struct stat64 *st, int flags)
{
	int ret;

	stat_init();
	if (!real.fstatat64)
		return no_call();
	ret = real.fstatat64(fd, path, st, flags);
	if (ret == 0 && of_rsocket(fd, path, flags))
		st->st_mode = SOCK_MODE;
	return ret;
}

EXPORT int statx(int fd, const char *path, int flags, unsigned int mask,
		 struct statx *stx)
{
	int ret;

	stat_init();
	if (!real.statx)
		return no_call();
	ret = real.statx(fd, path, flags, mask, stx);
	if (ret == 0 && of_rsocket(fd, path, flags)) {
		stx->stx_mode = SOCK_MODE;
		stx->stx_mask |= STATX_TYPE | STATX_MODE;
	}
	return ret;
}
