/*
 * Is a range of a client's address space mapped, readable (and writable)?
 * Asked of its /proc/PID/maps fd at each registration (maps.c).
 *
 * Layer verbs/: used by mem.c only; the unit test calls both ways.
 */
#ifndef IBVD_VERBS_MR_MAPS_H
#define IBVD_VERBS_MR_MAPS_H

#include <stdbool.h>
#include <stdint.h>

/*
 * 0 if mappings fit for registration cover [addr, end) in the maps file
 * fd, -EFAULT if not (a hole, the wrong permissions, a kernel page).
 * Asks the kernel for the mappings of the range only where it can
 * (PROCMAP_QUERY), else reads the file from its start.
 */
int ibvd_maps_cover(int fd, uint64_t addr, uint64_t end, bool writable);

/*
 * The two ways: -ENOTTY from the first where the kernel lacks it or
 * refuses it (a seccomp filter, a security module).
 */
int ibvd_maps_cover_query(int fd, uint64_t addr, uint64_t end, bool writable);
int ibvd_maps_cover_text(int fd, uint64_t addr, uint64_t end, bool writable);

#endif /* IBVD_VERBS_MR_MAPS_H */
