/*
 * The host's own addresses (host_addrs.h): a sorted array, looked up by
 * binary search for every packet from the wire.
 */
#include <config.h>

#include <errno.h>
#include <ifaddrs.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "host_addrs.h"
#include "objects.h"

struct gid {
	uint8_t raw[16];
};

/* Under ibvd_objects_lock: replaced whole, never changed in place. */
static struct gid *addrs;
static size_t naddrs;

static int gid_cmp(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct gid));
}

/* sa's address as a GID; false if it is neither IPv4 nor IPv6. */
static bool to_gid(const struct sockaddr *sa, struct gid *g)
{
	memset(g, 0, sizeof(*g));
	if (sa->sa_family == AF_INET6) {
		memcpy(g->raw, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
		return true;
	}
	if (sa->sa_family == AF_INET) {
		g->raw[10] = 0xff;
		g->raw[11] = 0xff;
		memcpy(g->raw + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return true;
	}
	return false;
}

int ibvd_host_addrs_refresh(void)
{
	struct ifaddrs *all, *a;
	struct gid *fresh, *old;
	size_t n = 0, cap = 0;

	if (getifaddrs(&all) < 0)
		return -errno;
	for (a = all; a; a = a->ifa_next)
		cap += a->ifa_addr != NULL;
	fresh = calloc(cap ? cap : 1, sizeof(*fresh));
	if (!fresh) {
		freeifaddrs(all);
		return -ENOMEM;
	}
	for (a = all; a; a = a->ifa_next)
		if (a->ifa_addr && to_gid(a->ifa_addr, &fresh[n]))
			n++;
	freeifaddrs(all);
	qsort(fresh, n, sizeof(*fresh), gid_cmp);
	ibvd_objects_write_lock();
	old = addrs;
	addrs = fresh;
	naddrs = n;
	ibvd_objects_write_unlock();
	free(old);
	return 0;
}

bool ibvd_host_addrs_has(const uint8_t gid[16])
{
	return naddrs &&
	       bsearch(gid, addrs, naddrs, sizeof(*addrs), gid_cmp) != NULL;
}

void ibvd_host_addrs_free(void)
{
	free(addrs);
	addrs = NULL;
	naddrs = 0;
}
