/*
 * The engine's copies (daemon/engine/memory.c) between the tiers: segments
 * reached through a /proc/PID/mem fd (here our own), through an MR's own
 * mapping of a shared file (a second mapping of a memfd), and private
 * buffers, in every pairing and across segment boundaries; and the
 * recovery from a file truncated under a mapping: the side that faulted is
 * named, the process lives, and a SIGBUS outside a copy still kills.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "daemon/engine/internal.h"
#include "tests/common/check_run.h"

#define LEN	(3 * 4096)

static struct ibvd_engine eng;
static int mem_fd;

/* A memfd of LEN bytes: `client` is the client's view, `map` the MR's. */
struct shared {
	int fd;
	uint8_t *client, *map;
};

static void shared_new(struct shared *s)
{
	s->fd = memfd_create("test-memory", MFD_CLOEXEC);
	ck_assert_int_ge(s->fd, 0);
	ck_assert_int_eq(ftruncate(s->fd, LEN), 0);
	s->client = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	s->map = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	ck_assert_ptr_ne(s->client, MAP_FAILED);
	ck_assert_ptr_ne(s->map, MAP_FAILED);
}

static void shared_free(struct shared *s)
{
	munmap(s->client, LEN);
	munmap(s->map, LEN);
	close(s->fd);
}

/* Append [p + off, p + off + len) as a tier-2 segment, mapped at map + off. */
static void seg(struct eng_sgl *l, const void *p, uint8_t *map, uint64_t off,
		uint64_t len)
{
	struct eng_seg *s = &l->seg[l->n++];

	s->fd = mem_fd;
	s->addr = (uint64_t)(uintptr_t)p + off;
	s->len = len;
	s->map = map ? map + off : NULL;
	l->total += len;
}

static void fill(uint8_t *p, size_t len, uint8_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

static void setup(void)
{
	eng.bounce = malloc(ENG_BOUNCE_BYTES);
	ck_assert_ptr_nonnull(eng.bounce);
	mem_fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	ck_assert_int_ge(mem_fd, 0);
}

static void teardown(void)
{
	free(eng.bounce);
	close(mem_fd);
}

/*
 * Each pairing of tiers, the source in two segments and the destination
 * in three of other sizes, so pieces end at every kind of boundary.
 */
static void pairing(bool src_mapped, bool dst_mapped)
{
	static uint8_t priv_src[LEN], priv_dst[LEN];
	struct eng_sgl src = { 0 }, dst = { 0 };
	struct shared a, b;
	uint8_t *from, *to;

	shared_new(&a);
	shared_new(&b);
	from = src_mapped ? a.client : priv_src;
	to = dst_mapped ? b.client : priv_dst;
	fill(from, LEN, 3);
	memset(to, 0, LEN);
	seg(&src, from, src_mapped ? a.map : NULL, 0, 5000);
	seg(&src, from, src_mapped ? a.map : NULL, 5000, LEN - 5000);
	seg(&dst, to, dst_mapped ? b.map : NULL, 0, 100);
	seg(&dst, to, dst_mapped ? b.map : NULL, 100, 8000);
	seg(&dst, to, dst_mapped ? b.map : NULL, 8100, LEN - 8100);
	ck_assert_int_eq(ibvd_eng_copy_at(&eng, &dst, 10, &src, 10, LEN - 10),
			 ENG_COPY_OK);
	ck_assert_int_eq(to[9], 0);
	ck_assert_mem_eq(to + 10, from + 10, LEN - 10);
	shared_free(&a);
	shared_free(&b);
}

START_TEST(tiers)
{
	pairing(false, false);
	pairing(false, true);
	pairing(true, false);
	pairing(true, true);
}
END_TEST

/* A private source (inline data) into both tiers, and copy_in/copy_out. */
START_TEST(private_buffers)
{
	uint8_t inl[300], out[300];
	struct eng_sgl src = { 0 }, dst = { 0 };
	struct shared b;

	shared_new(&b);
	fill(inl, sizeof(inl), 9);
	ibvd_eng_sgl_private(&src, inl, sizeof(inl));
	seg(&dst, b.client, b.map, 0, LEN);
	ck_assert_int_eq(ibvd_eng_copy(&eng, &dst, 4000, &src, sizeof(inl)),
			 ENG_COPY_OK);
	ck_assert_mem_eq(b.client + 4000, inl, sizeof(inl));
	ck_assert_int_eq(ibvd_eng_copy_out(&dst, 4000, out, sizeof(out)), 0);
	ck_assert_mem_eq(out, inl, sizeof(out));
	memset(out, 0x44, sizeof(out));
	ck_assert_int_eq(ibvd_eng_copy_in(&dst, 1, out, sizeof(out)), 0);
	ck_assert_mem_eq(b.client + 1, out, sizeof(out));
	shared_free(&b);
}
END_TEST

/* Truncated under the mapping: the faulting side is named, we live on. */
START_TEST(truncated)
{
	static uint8_t priv[LEN];
	struct eng_sgl l_map = { 0 }, l_priv = { 0 }, l_both = { 0 };
	struct shared a, b;

	shared_new(&a);
	shared_new(&b);
	seg(&l_map, a.client, a.map, 0, LEN);
	seg(&l_priv, priv, NULL, 0, LEN);
	seg(&l_both, b.client, b.map, 0, LEN);
	ck_assert_int_eq(ftruncate(a.fd, 4096), 0);
	/* into it: through pread (fd source) and through memcpy (mapped) */
	ck_assert_int_eq(ibvd_eng_copy(&eng, &l_map, 0, &l_priv, LEN),
			 ENG_COPY_DST_FAULT);
	ck_assert_int_eq(ibvd_eng_copy(&eng, &l_map, 0, &l_both, LEN),
			 ENG_COPY_DST_FAULT);
	/* out of it */
	ck_assert_int_eq(ibvd_eng_copy(&eng, &l_priv, 0, &l_map, LEN),
			 ENG_COPY_SRC_FAULT);
	ck_assert_int_eq(ibvd_eng_copy(&eng, &l_both, 0, &l_map, LEN),
			 ENG_COPY_SRC_FAULT);
	/* the page still in the file works */
	ck_assert_int_eq(ibvd_eng_copy(&eng, &l_both, 0, &l_map, 4096),
			 ENG_COPY_OK);
	ck_assert_int_ne(ibvd_eng_copy_out(&l_map, 0, priv, LEN), 0);
	shared_free(&a);
	shared_free(&b);
}
END_TEST

static uint64_t add_one(const void *arg, uint64_t old)
{
	(void)arg;
	return old + 1;
}

START_TEST(word_rmw)
{
	struct eng_sgl l = { 0 };
	struct shared a;
	uint64_t old;

	shared_new(&a);
	memcpy(a.client + 4096, &(uint64_t){ 41 }, 8);
	seg(&l, a.client, a.map, 4096, 8);
	ck_assert_int_eq(ibvd_eng_word_rmw(&l.seg[0], add_one, NULL, &old), 0);
	ck_assert_uint_eq(old, 41);
	ck_assert_uint_eq(*(uint64_t *)(void *)(a.client + 4096), 42);
	ck_assert_int_eq(ftruncate(a.fd, 0), 0);
	ck_assert_int_eq(ibvd_eng_word_rmw(&l.seg[0], add_one, NULL, &old), -EFAULT);
	shared_free(&a);
}
END_TEST

/* Once copies set the handler up, a fault elsewhere still kills. */
START_TEST(foreign_sigbus_kills)
{
	struct eng_sgl l = { 0 }, p = { 0 };
	uint8_t buf[16];
	struct shared a;
	int status;
	pid_t pid;

	shared_new(&a);
	seg(&l, a.client, a.map, 0, LEN);
	ibvd_eng_sgl_private(&p, buf, sizeof(buf));
	ck_assert_int_eq(ibvd_eng_copy(&eng, &p, 0, &l, sizeof(buf)), ENG_COPY_OK);
	ck_assert_int_eq(ftruncate(a.fd, 0), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		volatile uint8_t *q = a.map;

		q[0] = 1;	/* not in a copy */
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status));
	ck_assert_int_eq(WTERMSIG(status), SIGBUS);
	shared_free(&a);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("memory");
	TCase *tc = tcase_create("copies");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, tiers);
	tcase_add_test(tc, private_buffers);
	tcase_add_test(tc, truncated);
	tcase_add_test(tc, word_rmw);
	tcase_add_test(tc, foreign_sigbus_kills);
	suite_add_tcase(s, tc);
	return check_run(s, CK_NORMAL);
}
