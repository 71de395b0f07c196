/*
 * Ring arenas (daemon/verbs/rings/arena.c): blocks carved from the two halves,
 * aligned and zeroed, reused after free, refused past a half or above the
 * largest size, and the arena freed with its last reference; once its
 * context is closing, freed blocks only drop their reference.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "daemon/verbs/rings/arena.h"
#include "tests/common/check_run.h"

static struct ibvd_arena *a;
static int fd;

/* Is the page at off resident in the mapping? */
static bool resident(uint64_t off)
{
	unsigned char v = 0;

	ck_assert_int_eq(mincore(a->base + off, IBVD_PAGE_SIZE, &v), 0);
	return v & 1;
}

static void setup(void)
{
	ck_assert_int_eq(ibvd_arena_new(&a, &fd), 0);
	ck_assert_int_eq(a->refs, 1);
}

static void teardown(void)
{
	close(fd);
	ibvd_arena_put(a);
}

static bool all_zero(const uint8_t *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

START_TEST(file_is_sealed_and_whole)
{
	ck_assert_int_eq(lseek(fd, 0, SEEK_END), (off_t)IBVD_ARENA_BYTES);
	/* The client may neither shrink nor grow it under our mapping. */
	ck_assert_int_ne(ftruncate(fd, IBVD_PAGE_SIZE), 0);
	ck_assert_int_ne(ftruncate(fd, 2 * IBVD_ARENA_BYTES), 0);
}
END_TEST

START_TEST(blocks_in_their_half_aligned)
{
	uint64_t e, c, s;

	ck_assert_int_eq(ibvd_arena_alloc(a, IBVD_HALF_ENGINE, 100, &e), 0);
	ck_assert_int_eq(ibvd_arena_alloc(a, IBVD_HALF_CLIENT, 128, &c), 0);
	ck_assert_int_eq(ibvd_arena_alloc(a, IBVD_HALF_CLIENT, 8192, &s), 0);
	ck_assert_uint_lt(e, IBVD_ARENA_HALF);
	ck_assert_uint_ge(c, IBVD_ARENA_CLIENT);
	ck_assert_uint_ge(s, IBVD_ARENA_CLIENT);
	ck_assert_uint_eq(e % 128, 0);
	ck_assert_uint_eq(c % 128, 0);
	/* above a page, a page is alignment enough */
	ck_assert_uint_eq(s % IBVD_PAGE_SIZE, 0);
	ck_assert(s >= c + 128 || s + 8192 <= c);
	ck_assert_int_eq(a->refs, 4);
	ibvd_arena_free(a, s, 8192);
	ibvd_arena_free(a, c, 128);
	ibvd_arena_free(a, e, 100);
	ck_assert_int_eq(a->refs, 1);
}
END_TEST

/*
 * A closing arena (its context in teardown, the objects lock held) does
 * not give a freed block's pages back one by one, nor keep the block for
 * reuse: the whole mapping goes with the last reference.
 */
START_TEST(closing_frees_nothing_one_by_one)
{
	uint64_t big, again;

	ck_assert_int_eq(ibvd_arena_alloc(a, IBVD_HALF_ENGINE, 1 << 20, &big), 0);
	memset(a->base + big, 0xa5, 1 << 20);
	ibvd_arena_closing(a);
	ibvd_arena_free(a, big, 1 << 20);
	ck_assert_int_eq(a->refs, 1);
	ck_assert(resident(big));
	ck_assert_uint_eq(a->base[big + (1 << 20) - 1], 0xa5);
	/* not reused, so never handed out unzeroed */
	ck_assert_int_eq(ibvd_arena_alloc(a, IBVD_HALF_ENGINE, 1 << 20, &again), 0);
	ck_assert_uint_ne(again, big);
	ck_assert(all_zero(a->base + again, 1 << 20));
	ibvd_arena_free(a, again, 1 << 20);
}
END_TEST

START_TEST(block_sizes)
{
	ck_assert_uint_eq(ibvd_arena_block(1), IBVD_ARENA_MIN_BLOCK);
	ck_assert_uint_eq(ibvd_arena_block(65), 128);
	ck_assert_uint_eq(ibvd_arena_block(4096), 4096);
	ck_assert_uint_eq(ibvd_arena_block(IBVD_ARENA_MAX_BLOCK), IBVD_ARENA_MAX_BLOCK);
	ck_assert_uint_eq(ibvd_arena_block(IBVD_ARENA_MAX_BLOCK + 1), 0);
	ck_assert_uint_eq(ibvd_arena_block(0), 0);
}
END_TEST

START_TEST(bad_sizes_refused)
{
	uint64_t off = 7;

	ck_assert_int_eq(ibvd_arena_alloc(a, IBVD_HALF_ENGINE, 0, &off), -EINVAL);
	ck_assert_int_eq(ibvd_arena_alloc(a, IBVD_HALF_CLIENT,
					  (size_t)IBVD_ARENA_MAX_BLOCK + 1, &off), -EINVAL);
	ck_assert_uint_eq(off, 7);
	ck_assert_int_eq(a->refs, 1);
}
END_TEST

/* Freed blocks come back first, zeroed, whatever was written in them. */
static void reuse(enum ibvd_arena_half h, size_t len)
{
	uint64_t first, again;
	uint8_t *p;

	ck_assert_int_eq(ibvd_arena_alloc(a, h, len, &first), 0);
	p = ibvd_arena_ptr(a, first);
	ck_assert(all_zero(p, len));
	memset(p, 0xa5, len);
	ibvd_arena_free(a, first, len);
	ck_assert_int_eq(ibvd_arena_alloc(a, h, len, &again), 0);
	ck_assert_uint_eq(again, first);
	ck_assert(all_zero(ibvd_arena_ptr(a, again), len));
	ibvd_arena_free(a, again, len);
}

START_TEST(freed_blocks_reused_zeroed)
{
	reuse(IBVD_HALF_ENGINE, 128);		/* shares its page: memset */
	reuse(IBVD_HALF_CLIENT, 2048);
	reuse(IBVD_HALF_ENGINE, 8192);		/* a page or more: given back */
	reuse(IBVD_HALF_CLIENT, 1u << 20);
}
END_TEST

/* A half holds IBVD_ARENA_HALF bytes of blocks, then says ENOMEM. */
START_TEST(half_full)
{
	uint64_t off[IBVD_ARENA_HALF / IBVD_ARENA_MAX_BLOCK], extra;
	size_t i, n = sizeof(off) / sizeof(off[0]);

	for (i = 0; i < n; i++)
		ck_assert_int_eq(ibvd_arena_alloc(a, IBVD_HALF_CLIENT,
						  IBVD_ARENA_MAX_BLOCK, &off[i]), 0);
	ck_assert_int_eq(ibvd_arena_alloc(a, IBVD_HALF_CLIENT, 64, &extra), -ENOMEM);
	/* the other half is not affected */
	ck_assert_int_eq(ibvd_arena_alloc(a, IBVD_HALF_ENGINE, 64, &extra), 0);
	ibvd_arena_free(a, extra, 64);
	/* a freed block of that size fits again; smaller ones still not */
	ibvd_arena_free(a, off[0], IBVD_ARENA_MAX_BLOCK);
	ck_assert_int_eq(ibvd_arena_alloc(a, IBVD_HALF_CLIENT, 64, &extra), -ENOMEM);
	ck_assert_int_eq(ibvd_arena_alloc(a, IBVD_HALF_CLIENT,
					  IBVD_ARENA_MAX_BLOCK, &off[0]), 0);
	for (i = 0; i < n; i++)
		ibvd_arena_free(a, off[i], IBVD_ARENA_MAX_BLOCK);
	ck_assert_int_eq(a->refs, 1);
}
END_TEST

/* A block that outlives its context's reference keeps the arena. */
START_TEST(last_reference_frees)
{
	struct ibvd_arena *b;
	uint64_t off;
	int bfd;

	ck_assert_int_eq(ibvd_arena_new(&b, &bfd), 0);
	close(bfd);
	ck_assert_int_eq(ibvd_arena_alloc(b, IBVD_HALF_ENGINE, 128, &off), 0);
	ibvd_arena_put(b);			/* the context goes */
	ck_assert_int_eq(b->refs, 1);
	memset(ibvd_arena_ptr(b, off), 1, 128);	/* still mapped */
	ibvd_arena_free(b, off, 128);		/* the last one: freed (ASan) */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("arena");
	TCase *tc = tcase_create("arena");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, file_is_sealed_and_whole);
	tcase_add_test(tc, blocks_in_their_half_aligned);
	tcase_add_test(tc, block_sizes);
	tcase_add_test(tc, bad_sizes_refused);
	tcase_add_test(tc, freed_blocks_reused_zeroed);
	tcase_add_test(tc, half_full);
	tcase_add_test(tc, last_reference_frees);
	tcase_add_test(tc, closing_frees_nothing_one_by_one);
	suite_add_tcase(s, tc);
	return check_run(s, CK_NORMAL);
}
