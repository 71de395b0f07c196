/*
 * Small helpers shared by every part of ibverbsd.
 */
#ifndef IBVD_UTIL_H
#define IBVD_UTIL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

#ifndef container_of
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#endif

#define IBVD_UNUSED	__attribute__((unused))

/* [addr, addr + len) lies in [base, base + size), with no overflow. */
static inline bool ibvd_in_range(uint64_t base, uint64_t size, uint64_t addr,
				 uint64_t len)
{
	return addr >= base && len <= size && addr - base <= size - len;
}

/* CLOCK_MONOTONIC in ns (the vDSO's: no system call). */
static inline uint64_t ibvd_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * A knob for tests and benchmarks: *value, and true, if the environment
 * variable name holds a decimal number in [min, max]; false if it is
 * unset, empty or anything else.
 */
static inline bool ibvd_env_number(const char *name, unsigned long min,
				   unsigned long max, unsigned long *value)
{
	const char *v = getenv(name);
	unsigned long n;
	char *end;

	if (!v || !*v)
		return false;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (*end || errno || n < min || n > max)
		return false;
	*value = n;
	return true;
}

/* The same knob's number, or dflt when it holds none in [min, max]. */
static inline unsigned long ibvd_env_or(const char *name, unsigned long dflt,
					unsigned long min, unsigned long max)
{
	unsigned long n;

	return ibvd_env_number(name, min, max, &n) ? n : dflt;
}

#endif /* IBVD_UTIL_H */
