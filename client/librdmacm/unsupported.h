/*
 * How a librdmacm call that is not implemented fails (the rsockets,
 * rsocket.c): librdmacm reports errors as -1 (or NULL) with errno, here
 * ENOSYS.
 */
#ifndef IBVD_RDMACM_UNSUPPORTED_H
#define IBVD_RDMACM_UNSUPPORTED_H

#include <errno.h>
#include <stddef.h>

static inline int unsupported(void)
{
	errno = ENOSYS;
	return -1;
}

static inline void *unsupported_ptr(void)
{
	errno = ENOSYS;
	return NULL;
}

#endif /* IBVD_RDMACM_UNSUPPORTED_H */
