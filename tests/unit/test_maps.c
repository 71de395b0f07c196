/*
 * Whether a client's range is mapped (daemon/verbs/mr/maps.c), asked of
 * this process's own /proc/self/maps both ways: the kernel's PROCMAP_QUERY
 * (where it has one) and the text.  They must agree on holes,
 * permissions, ranges across mappings, kernel pages and names longer
 * than a path.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "verbs/mr/maps.h"
#include "tests/common/check_run.h"

static int maps_fd;
static long page;

static void setup(void)
{
	maps_fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(maps_fd, 0);
	page = sysconf(_SC_PAGESIZE);
}

static void teardown(void)
{
	close(maps_fd);
}

/* Both ways give want (the query's ENOTTY aside: an older kernel). */
static void expect(const void *addr, size_t len, bool writable, int want)
{
	uint64_t a = (uint64_t)(uintptr_t)addr;
	int q = ibvd_maps_cover_query(maps_fd, a, a + len, writable);

	ck_assert_int_eq(ibvd_maps_cover_text(maps_fd, a, a + len, writable), want);
	if (q != -ENOTTY)
		ck_assert_int_eq(q, want);
	ck_assert_int_eq(ibvd_maps_cover(maps_fd, a, a + len, writable), want);
}

/* Pages: 0 read-write, 1 read-only, 2 a hole, 3 read-write, 4 no access. */
START_TEST(holes_and_permissions)
{
	uint8_t *p = mmap(NULL, 5 * page, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(p, MAP_FAILED);
	ck_assert_int_eq(mprotect(p + page, page, PROT_READ), 0);
	ck_assert_int_eq(munmap(p + 2 * page, page), 0);
	ck_assert_int_eq(mprotect(p + 4 * page, page, PROT_NONE), 0);

	expect(p, page, true, 0);
	expect(p + 8, 16, true, 0);
	expect(p, 2 * page, false, 0);		/* across two mappings */
	expect(p, 2 * page, true, -EFAULT);	/* the second is read-only */
	expect(p, 3 * page, false, -EFAULT);	/* into the hole */
	expect(p + 2 * page, 8, false, -EFAULT);
	expect(p + 3 * page, page, true, 0);
	expect(p + 3 * page, 2 * page, false, -EFAULT); /* no access */
	expect(p + 4 * page, 1, false, -EFAULT);
	munmap(p, 2 * page);
	munmap(p + 3 * page, 2 * page);
}
END_TEST

/* The vDSO's data pages, which no pin takes, by their name. */
START_TEST(kernel_pages_refused)
{
	char line[512];
	unsigned long start = 0, end;
	FILE *f = fopen("/proc/self/maps", "re");

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "[vvar") &&
		    sscanf(line, "%lx-%lx", &start, &end) == 2)
			break;
	fclose(f);
	if (!start)
		return;		/* no vDSO data here */
	expect((void *)start, 8, false, -EFAULT);
}
END_TEST

/*
 * A file whose name, once deleted, is longer than a path: the query's
 * name buffer cannot hold it, and the mapping is still fine.
 */
START_TEST(names_longer_than_a_path)
{
	char path[PATH_MAX], part[201];
	size_t len;
	void *p;
	int fd;

	memset(part, 'd', 200);
	part[200] = '\0';
	len = (size_t)snprintf(path, sizeof(path), "/tmp/ibvd-maps-%d", (int)getpid());
	ck_assert_int_eq(mkdir(path, 0700), 0);
	while (len + 201 < PATH_MAX - 100) {
		len += (size_t)snprintf(path + len, sizeof(path) - len, "/%s", part);
		ck_assert_int_eq(mkdir(path, 0700), 0);
	}
	/* a file name that brings the path to PATH_MAX - 5 */
	path[len++] = '/';
	while (len < PATH_MAX - 5)
		path[len++] = 'f';
	path[len] = '\0';
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, page), 0);
	p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
	close(fd);
	expect(p, page, true, 0);
	/* " (deleted)" makes it longer than PATH_MAX */
	ck_assert_int_eq(unlink(path), 0);
	expect(p, page, true, 0);
	munmap(p, page);
	while (strrchr(path, '/') > path + 5) {
		*strrchr(path, '/') = '\0';
		rmdir(path);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("maps");
	TCase *tc = tcase_create("cover");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, holes_and_permissions);
	tcase_add_test(tc, kernel_pages_refused);
	tcase_add_test(tc, names_longer_than_a_path);
	suite_add_tcase(s, tc);
	return check_run(s, CK_NORMAL);
}
