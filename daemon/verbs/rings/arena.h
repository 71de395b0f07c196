/*
 * A context's ring arena (common/ring.h): one sealed memfd, mapped once,
 * from which every queue's headers and slots are carved.
 *
 * Blocks are powers of two from IBVD_ARENA_MIN_BLOCK to IBVD_ARENA_MAX_BLOCK
 * bytes, aligned to their size (a page at most), each taken from one half.
 * Freed blocks go on a free list per half and size and are reused first;
 * blocks of a page or more give their memory back to the kernel when
 * freed.  The free lists live in the daemon's own memory: nothing about
 * the arena's bookkeeping is in the shared file, which the client can
 * write (its half).
 *
 * An arena counts its references: its context's, plus one per live block,
 * so that no block outlives the memory it sits in.  An XRC target whose
 * creator closes moves its rings to the context that takes it over
 * (xrc/qp.c), so the arena still goes with its context.
 */
#ifndef IBVD_VERBS_ARENA_H
#define IBVD_VERBS_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ring.h"

#define IBVD_ARENA_MIN_BLOCK	64u
#define IBVD_ARENA_MAX_BLOCK	(256u << 20)
/* log2(MAX / MIN) + 1 */
#define IBVD_ARENA_ORDERS	23

enum ibvd_arena_half {
	IBVD_HALF_ENGINE,		/* mapped read-only by the client */
	IBVD_HALF_CLIENT,		/* mapped read-write by the client */
};

struct ibvd_arena_free {
	uint64_t *off;			/* offsets of free blocks, a stack */
	uint32_t n, cap;
};

struct ibvd_arena {
	uint8_t *base;			/* IBVD_ARENA_BYTES, read-write */
	unsigned int refs;
	bool closing;			/* ibvd_arena_closing */
	uint64_t top[2];		/* first never-used offset in each half */
	struct ibvd_arena_free free[2][IBVD_ARENA_ORDERS];
};

/* A memfd that may be sealed, close-on-exec: its fd or a negative errno. */
int ibvd_memfd_new(const char *name);
/* A memfd of size bytes, sealed against resizing: its fd, or -errno. */
int ibvd_memfd_sealed(const char *name, uint64_t size);

/*
 * A new arena, mapped; *ret_fd is the memfd for the client (the caller
 * closes it once sent).  0 or a negative errno.
 */
int ibvd_arena_new(struct ibvd_arena **ret, int *ret_fd);

/* Drop a reference (the context's, when it goes); the last one frees. */
void ibvd_arena_put(struct ibvd_arena *a);

/*
 * Its context is going: blocks freed from now on are neither given back
 * one by one nor kept for reuse (the whole mapping goes with the last
 * reference, at once, and outside the objects lock).
 */
void ibvd_arena_closing(struct ibvd_arena *a);

/* The block size for len bytes, or 0 if len is above IBVD_ARENA_MAX_BLOCK. */
size_t ibvd_arena_block(size_t len);

/*
 * A zeroed block of at least len bytes in half h: *off is its offset from
 * the arena's start.  -ENOMEM when the half is full, -EINVAL for a len of
 * 0 or above IBVD_ARENA_MAX_BLOCK.  Takes a reference.
 */
int ibvd_arena_alloc(struct ibvd_arena *a, enum ibvd_arena_half h,
		     size_t len, uint64_t *off);

/* Give back the block at off that ibvd_arena_alloc(len) returned. */
void ibvd_arena_free(struct ibvd_arena *a, uint64_t off, size_t len);

static inline void *ibvd_arena_ptr(const struct ibvd_arena *a, uint64_t off)
{
	return a->base + off;
}

#endif /* IBVD_VERBS_ARENA_H */
