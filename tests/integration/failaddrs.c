/*
 * A preload for the daemon (roce-device.sh): while the file named by
 * IBVD_TEST_FAIL_ADDRS exists, getifaddrs() fails with EMFILE, as it
 * does for a daemon out of file descriptors.  Otherwise it is libc's.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <ifaddrs.h>
#include <stdlib.h>
#include <unistd.h>

int getifaddrs(struct ifaddrs **ifap)
{
	int (*real)(struct ifaddrs **) =
		(int (*)(struct ifaddrs **))dlsym(RTLD_NEXT, "getifaddrs");
	const char *flag = getenv("IBVD_TEST_FAIL_ADDRS");

	if (flag && access(flag, F_OK) == 0) {
		errno = EMFILE;
		return -1;
	}
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	return real(ifap);
}
