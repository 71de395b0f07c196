/*
 * Small helpers shared by every part of ibverbsd.
 */
#ifndef IBVD_UTIL_H
#define IBVD_UTIL_H

#include <stddef.h>

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

#ifndef container_of
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#endif

#define IBVD_UNUSED	__attribute__((unused))

#endif /* IBVD_UTIL_H */
