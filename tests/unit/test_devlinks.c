/*
 * /dev/infiniband links (daemon/devlinks.c), in a temporary directory:
 * made for each device, removed when the device goes or links are turned
 * off, other people's paths never touched, the directory removed with the
 * last link if we made it; and the one-shot make/remove of the unit.
 */
#include <config.h>

#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "daemon/config/config.h"
#include "daemon/devlinks.h"
#include "tests/common/check_run.h"

static char base[64];	/* a fresh temporary directory */
static char dir[128];	/* base/infiniband, not there at first */
static struct ibvd_device devs[3];

static void setup(void)
{
	snprintf(base, sizeof(base), "/tmp/ibvd-devlinks.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(base));
	snprintf(dir, sizeof(dir), "%s/infiniband", base);
	memset(devs, 0, sizeof(devs));
	snprintf(devs[0].name, sizeof(devs[0].name), "ibvd0");
	snprintf(devs[1].name, sizeof(devs[1].name), "roce0");
	snprintf(devs[2].name, sizeof(devs[2].name), "ibvd1");
}

static void teardown(void)
{
	char cmd[128];

	ibvd_devlinks_remove_all();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	ck_assert_int_eq(system(cmd), 0);
}

/* A list of the first n of devs. */
static void list_of(struct ibvd_device_list *l, unsigned int n)
{
	unsigned int i;

	TAILQ_INIT(l);
	for (i = 0; i < n; i++)
		TAILQ_INSERT_TAIL(l, &devs[i], link);
}

/* 1 a link to /dev/null, 0 nothing there, -1 something else. */
static int link_state(const char *name)
{
	char path[256], target[64];
	struct stat st;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (lstat(path, &st) < 0)
		return 0;
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return -1;
	target[n] = '\0';
	return strcmp(target, "/dev/null") == 0 ? 1 : -1;
}

static bool dir_exists(void)
{
	struct stat st;

	return stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
}

START_TEST(made_and_removed)
{
	struct ibvd_device_list l;
	struct stat st;
	char path[256];
	mode_t was;

	list_of(&l, 2);
	/* the unit's UMask=0077: the directory is for everyone all the same */
	was = umask(077);
	ibvd_devlinks_sync(dir, &l, true);
	umask(was);
	ck_assert_int_eq(stat(dir, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0755);
	ck_assert_int_eq(link_state("ibvd0"), 1);
	ck_assert_int_eq(link_state("roce0"), 1);
	/* what UCX checks: a character device, through the link */
	snprintf(path, sizeof(path), "%s/ibvd0", dir);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert(S_ISCHR(st.st_mode));

	/* a reload drops roce0 and adds ibvd1 */
	TAILQ_REMOVE(&l, &devs[1], link);
	TAILQ_INSERT_TAIL(&l, &devs[2], link);
	ibvd_devlinks_sync(dir, &l, true);
	ck_assert_int_eq(link_state("ibvd0"), 1);
	ck_assert_int_eq(link_state("roce0"), 0);
	ck_assert_int_eq(link_state("ibvd1"), 1);

	/* turned off: all ours go, and the directory we made with them */
	ibvd_devlinks_sync(dir, &l, false);
	ck_assert_int_eq(link_state("ibvd0"), 0);
	ck_assert_int_eq(link_state("ibvd1"), 0);
	ck_assert(!dir_exists());
}
END_TEST

START_TEST(others_left_alone)
{
	struct ibvd_device_list l;
	char path[256];
	FILE *f;

	ck_assert_int_eq(mkdir(dir, 0755), 0);
	/* another daemon's link to the same name, and a file of someone's */
	snprintf(path, sizeof(path), "%s/ibvd0", dir);
	ck_assert_int_eq(symlink("/dev/null", path), 0);
	snprintf(path, sizeof(path), "%s/roce0", dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);

	list_of(&l, 3);
	ibvd_devlinks_sync(dir, &l, true);
	ck_assert_int_eq(link_state("ibvd1"), 1);
	ibvd_devlinks_remove_all();
	/* ours gone; theirs, and the directory we did not make, stay */
	ck_assert_int_eq(link_state("ibvd1"), 0);
	ck_assert_int_eq(link_state("ibvd0"), 1);
	ck_assert_int_eq(link_state("roce0"), -1);
	ck_assert(dir_exists());
}
END_TEST

START_TEST(no_permission_is_not_fatal)
{
	struct ibvd_device_list l;
	char ro[256];

	/* a directory that cannot be made (its parent is a file) */
	snprintf(ro, sizeof(ro), "%s/file", base);
	fclose(fopen(ro, "w"));
	strncat(ro, "/infiniband", sizeof(ro) - strlen(ro) - 1);
	list_of(&l, 1);
	ibvd_devlinks_sync(ro, &l, true);
	ibvd_devlinks_remove_all();
}
END_TEST

START_TEST(oneshot_for_the_unit)
{
	char cfgerr[256];
	struct ibvd_config *cfg = ibvd_config_parse(
		"{\"devices\": [{\"name\": \"ibvd0\"}, {\"name\": \"ibvd1\"}]}",
		"t.conf", cfgerr, sizeof(cfgerr));
	char path[256];
	FILE *f;

	ck_assert_msg(cfg != NULL, "%s", cfgerr);
	ck_assert_int_eq(ibvd_devlinks_oneshot(dir, cfg, IBVD_DEVLINKS_MAKE), 0);
	ck_assert_int_eq(link_state("ibvd0"), 1);
	ck_assert_int_eq(link_state("ibvd1"), 1);
	/* making again is fine */
	ck_assert_int_eq(ibvd_devlinks_oneshot(dir, cfg, IBVD_DEVLINKS_MAKE), 0);
	/* removing leaves what is not a link to /dev/null */
	snprintf(path, sizeof(path), "%s/ibvd1", dir);
	ck_assert_int_eq(unlink(path), 0);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	ck_assert_int_eq(ibvd_devlinks_oneshot(dir, cfg, IBVD_DEVLINKS_REMOVE), 0);
	ck_assert_int_eq(link_state("ibvd0"), 0);
	ck_assert_int_eq(link_state("ibvd1"), -1);
	/* "device_links": false makes nothing */
	cfg->device_links = false;
	ck_assert_int_eq(ibvd_devlinks_oneshot(dir, cfg, IBVD_DEVLINKS_MAKE), 0);
	ck_assert_int_eq(link_state("ibvd0"), 0);
	ibvd_config_free(cfg);
}
END_TEST

/*
 * Under the unit, a start is "make", a reload "add" with the new config
 * then SIGHUP, and a stop "remove" with the config of the moment.  A
 * reload the daemon refuses must not cost a served device its link; a
 * device a reload dropped loses its link at the stop or the next start.
 */
START_TEST(oneshot_after_reload)
{
	char cfgerr[256];
	struct ibvd_config *two = ibvd_config_parse(
		"{\"devices\": [{\"name\": \"ibvd0\"}, {\"name\": \"ibvd1\"}]}",
		"t.conf", cfgerr, sizeof(cfgerr));
	struct ibvd_config *one = ibvd_config_parse(
		"{\"devices\": [{\"name\": \"ibvd0\"}]}", "t.conf", cfgerr,
		sizeof(cfgerr));
	struct ibvd_config *other = ibvd_config_parse(
		"{\"devices\": [{\"name\": \"ibvd2\"}]}", "t.conf", cfgerr,
		sizeof(cfgerr));
	char path[256];

	ck_assert_msg(two && one && other, "%s", cfgerr);
	ck_assert_int_eq(ibvd_devlinks_oneshot(dir, two, IBVD_DEVLINKS_MAKE), 0);
	ck_assert_int_eq(link_state("ibvd1"), 1);
	/* not ours: a kernel's node, or anything but a link to /dev/null */
	snprintf(path, sizeof(path), "%s/uverbs0", dir);
	ck_assert_int_eq(symlink("/dev/zero", path), 0);
	/* a reload to "one" (or one refused): ibvd1 may still be served */
	ck_assert_int_eq(ibvd_devlinks_oneshot(dir, one, IBVD_DEVLINKS_ADD), 0);
	ck_assert_int_eq(link_state("ibvd0"), 1);
	ck_assert_int_eq(link_state("ibvd1"), 1);
	ck_assert_int_eq(ibvd_devlinks_oneshot(dir, other, IBVD_DEVLINKS_ADD), 0);
	ck_assert_int_eq(link_state("ibvd2"), 1);
	/* a start drops what the config no longer names */
	ck_assert_int_eq(ibvd_devlinks_oneshot(dir, one, IBVD_DEVLINKS_MAKE), 0);
	ck_assert_int_eq(link_state("ibvd0"), 1);
	ck_assert_int_eq(link_state("ibvd1"), 0);
	ck_assert_int_eq(link_state("ibvd2"), 0);
	ck_assert_int_eq(link_state("uverbs0"), -1);
	/* the reload back, then a stop with the first config */
	ck_assert_int_eq(ibvd_devlinks_oneshot(dir, two, IBVD_DEVLINKS_ADD), 0);
	ck_assert_int_eq(ibvd_devlinks_oneshot(dir, one, IBVD_DEVLINKS_REMOVE), 0);
	ck_assert_int_eq(link_state("ibvd0"), 0);
	ck_assert_int_eq(link_state("ibvd1"), 0);
	ck_assert_int_eq(link_state("uverbs0"), -1);
	ibvd_config_free(two);
	ibvd_config_free(one);
	ibvd_config_free(other);
}
END_TEST

static Suite *devlinks_suite(void)
{
	Suite *s = suite_create("devlinks");
	TCase *tc = tcase_create("links");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, made_and_removed);
	tcase_add_test(tc, others_left_alone);
	tcase_add_test(tc, no_permission_is_not_fatal);
	tcase_add_test(tc, oneshot_for_the_unit);
	tcase_add_test(tc, oneshot_after_reload);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(devlinks_suite(), CK_NORMAL);
}
