/*
 * The parts of our client libraries' export tables that are final as they
 * are: the hidden 1.0 compat twins, the provider interface that Debian's
 * libmlx5/libefa call at load time, fork and sysfs helpers, the kernel
 * struct conversions, and librdmacm's device list and addrinfo freeing.
 * (Verbs that are stubs today are not tested here: they will change.)
 */
#include <config.h>

#include <check.h>
#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "client/libibverbs/exports.h"
#include "tests/common/check_run.h"

/* IBVERBS_PRIVATE_34, which no installed header declares. */
void verbs_register_driver_34(const void *ops);
int ibv_cmd_create_qp(void);
int ibv_cmd_poll_cq(void);
int execute_ioctl(void);
void *verbs_open_device(void);
unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void *link);
extern bool verbs_allow_disassociate_destroy;

/* A hidden versioned symbol of our libibverbs, e.g. name@IBVERBS_1.0. */
static void *versioned(const char *name, const char *version)
{
	void *sym = dlvsym(RTLD_DEFAULT, name, version);

	ck_assert_msg(sym, "%s@%s: %s", name, version, dlerror());
	return sym;
}

START_TEST(compat_twins_fail)
{
	void *(*get_list)(int *) =
		versioned("ibv_get_device_list", "IBVERBS_1.0");
	int (*dealloc)(void *) = versioned("ibv_dealloc_pd", "IBVERBS_1.0");
	int (*get_cq_event)(void *, void *, void *) =
		versioned("ibv_get_cq_event", "IBVERBS_1.0");
	void (*ack)(void *, unsigned int) =
		versioned("ibv_ack_cq_events", "IBVERBS_1.0");
	int n = 7;

	errno = 0;
	ck_assert_ptr_null(get_list(&n));
	ck_assert_int_eq(errno, ENOSYS);
	ck_assert_int_eq(n, 7);
	ck_assert_int_eq(dealloc((void *)1), ENOSYS);
	ck_assert_int_eq(get_cq_event(NULL, NULL, NULL), -1);
	ck_assert_int_eq(errno, ENOSYS);
	ack((void *)1, 3);
	/* The twin is not the default: plain lookup finds the 1.1 verb. */
	ck_assert_ptr_ne(dlsym(RTLD_DEFAULT, "ibv_get_device_list"),
			 (void *)get_list);
}
END_TEST

START_TEST(register_driver_ignored)
{
	void (*reg)(const char *, void *) =
		versioned("ibv_register_driver", "IBVERBS_1.1");

	reg("mlx4", (void *)1);
	reg(NULL, NULL);
}
END_TEST

/* Provider constructors call this with their ops before main(). */
START_TEST(provider_interface)
{
	verbs_register_driver_34((const void *)1);
	verbs_register_driver_34(NULL);
	ck_assert(!verbs_allow_disassociate_destroy);
	ck_assert_int_eq(ibv_cmd_create_qp(), EOPNOTSUPP);
	ck_assert_int_eq(execute_ioctl(), EOPNOTSUPP);
	ck_assert_int_eq(ibv_cmd_poll_cq(), -1);
	ck_assert_int_eq(errno, EOPNOTSUPP);
	ck_assert_ptr_null(verbs_open_device());
	ck_assert_int_eq(__ioctl_final_num_attrs(5, NULL), 5);
}
END_TEST

START_TEST(fork_state)
{
	setenv("IBV_FORK_SAFE", "1", 1);
	ck_assert_int_eq(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
	unsetenv("IBV_FORK_SAFE");
	ck_assert_int_eq(ibv_fork_init(), 0);
	ck_assert_int_eq(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
	ck_assert_int_eq(ibv_dontfork_range(NULL, 4096), 0);
	ck_assert_int_eq(ibv_dofork_range(NULL, 4096), 0);
}
END_TEST

START_TEST(sysfs_rejects)
{
	char buf[64];
	size_t n = sizeof(buf);

	ck_assert_str_eq(ibv_get_sysfs_path(), "/sys");
	errno = 0;
	ck_assert_int_eq(ibv_read_sysfs_file(NULL, "x", buf, n), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(ibv_read_sysfs_file("/sys", NULL, buf, n), -1);
	ck_assert_int_eq(ibv_read_sysfs_file("/sys", "x", NULL, 1), -1);
	ck_assert_int_eq(ibv_read_sysfs_file("/sys", "x", buf, 0), -1);
	/* What ibv_devinfo asks of a device with no sysfs directory. */
	ck_assert_int_eq(ibv_read_sysfs_file("/nonexistent/ibverbsd/dev",
					     "board_id", buf, n), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(ibv_read_sysfs_file("", "board_id", buf, n), -1);
	/* Readable, but not sysfs. */
	ck_assert_int_eq(ibv_read_sysfs_file("/proc/self", "stat", buf, n), -1);
	ck_assert_int_eq(errno, ENOENT);
	/* A directory. */
	ck_assert_int_eq(ibv_read_sysfs_file("/sys", "kernel", buf, n), -1);
}
END_TEST

/*
 * ibv_get_sysfs_path() with SYSFS_PATH set to env, in a child of its own:
 * the library reads the variable once per process.  True when it gives
 * want, the same pointer twice.
 */
static bool sysfs_path_with(const char *env, const char *want)
{
	int status;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		const char *got;

		setenv("SYSFS_PATH", env, 1);
		got = ibv_get_sysfs_path();
		_exit(got && strcmp(got, want) == 0 && ibv_get_sysfs_path() == got ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* rdma-core's SYSFS_PATH: Open MPI's openib BTL looks there */
START_TEST(sysfs_path_env)
{
	char longer[IBV_SYSFS_PATH_MAX + 40], cut[IBV_SYSFS_PATH_MAX + 1];

	ck_assert(sysfs_path_with("/run/ibvd-sys", "/run/ibvd-sys"));
	ck_assert(sysfs_path_with("/run/ibvd-sys//", "/run/ibvd-sys"));
	ck_assert(sysfs_path_with("relative/", "relative"));
	/* nothing left of it: the default */
	ck_assert(sysfs_path_with("", "/sys"));
	ck_assert(sysfs_path_with("///", "/sys"));
	/* at most IBV_SYSFS_PATH_MAX bytes of it, as rdma-core keeps */
	memset(longer, 'd', sizeof(longer) - 1);
	longer[0] = '/';
	longer[sizeof(longer) - 1] = '\0';
	memcpy(cut, longer, IBV_SYSFS_PATH_MAX);
	cut[IBV_SYSFS_PATH_MAX] = '\0';
	ck_assert(sysfs_path_with(longer, cut));
}
END_TEST

/* A real attribute, if this machine exposes one we know. */
START_TEST(sysfs_reads)
{
	static const char *const files[][2] = {
		{ "/sys/kernel", "profiling" },
		{ "/sys/devices/system/cpu", "online" },
		{ "/sys/kernel/mm/transparent_hugepage", "enabled" },
	};
	char path[256], buf[4096];
	size_t i;
	int len;

	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", files[i][0], files[i][1]);
		if (access(path, R_OK) == 0)
			break;
	}
	if (i == sizeof(files) / sizeof(files[0]))
		return;	/* no sysfs here: nothing to compare */
	len = ibv_read_sysfs_file(files[i][0], files[i][1], buf, sizeof(buf));
	ck_assert_int_gt(len, 0);
	ck_assert_uint_eq(strlen(buf), (size_t)len);
	ck_assert(buf[len - 1] != '\n');
	/* A short buffer truncates, still terminated. */
	len = ibv_read_sysfs_file(files[i][0], files[i][1], buf, 2);
	ck_assert_int_le(len, 1);
	ck_assert_uint_eq(strlen(buf), (size_t)len);
}
END_TEST

START_TEST(kernel_structs)
{
	struct ib_uverbs_qp_attr kqp;
	struct ibv_qp_attr qp;
	struct ibv_sa_path_rec rec, back;
	struct ib_user_path_rec krec;

	memset(&kqp, 0, sizeof(kqp));
	kqp.qp_state = IBV_QPS_RTS;
	kqp.dest_qp_num = 0x123456;
	kqp.max_inline_data = 64;
	kqp.ah_attr.dlid = 7;
	kqp.ah_attr.grh.dgid[15] = 0xab;
	kqp.alt_ah_attr.port_num = 2;
	kqp.rnr_retry = 6;
	memset(&qp, 0xff, sizeof(qp));
	ibv_copy_qp_attr_from_kern(&qp, &kqp);
	ck_assert_int_eq(qp.qp_state, IBV_QPS_RTS);
	ck_assert_uint_eq(qp.dest_qp_num, 0x123456);
	ck_assert_uint_eq(qp.cap.max_inline_data, 64);
	ck_assert_uint_eq(qp.ah_attr.dlid, 7);
	ck_assert_uint_eq(qp.ah_attr.grh.dgid.raw[15], 0xab);
	ck_assert_uint_eq(qp.alt_ah_attr.port_num, 2);
	ck_assert_uint_eq(qp.rnr_retry, 6);
	ck_assert_uint_eq(qp.max_rd_atomic, 0);

	memset(&rec, 0, sizeof(rec));
	rec.dgid.raw[0] = 0xfe;
	rec.sgid.raw[15] = 1;
	rec.dlid = htobe16(3);
	rec.pkey = 0xffff;
	rec.mtu = IBV_MTU_4096;
	rec.preference = 9;
	ibv_copy_path_rec_to_kern(&krec, &rec);
	memset(&back, 0x5a, sizeof(back));
	ibv_copy_path_rec_from_kern(&back, &krec);
	ck_assert_mem_eq(back.dgid.raw, rec.dgid.raw, 16);
	ck_assert_mem_eq(back.sgid.raw, rec.sgid.raw, 16);
	ck_assert_uint_eq(back.dlid, rec.dlid);
	ck_assert_uint_eq(back.pkey, rec.pkey);
	ck_assert_uint_eq(back.mtu, rec.mtu);
	ck_assert_uint_eq(back.preference, 9);

	/* NULL on either side is ignored, not dereferenced. */
	ibv_copy_qp_attr_from_kern(NULL, &kqp);
	ibv_copy_ah_attr_from_kern(&qp.ah_attr, NULL);
	ibv_copy_path_rec_to_kern(NULL, NULL);
}
END_TEST

START_TEST(rdmacm_devices_without_daemon)
{
	int n = 7;

	setenv("IBVERBSD_SOCKET", "/nonexistent/ibverbsd.sock", 1);
	ck_assert_ptr_null(rdma_get_devices(&n));
	ck_assert_int_eq(n, 0);
	ck_assert_ptr_null(rdma_get_devices(NULL));
	rdma_free_devices(NULL);
}
END_TEST

/* Every member is its own allocation (ASan builds see any leak). */
static struct rdma_addrinfo *addrinfo_node(struct rdma_addrinfo *next)
{
	struct rdma_addrinfo *ai = calloc(1, sizeof(*ai));

	ck_assert_ptr_nonnull(ai);
	ai->ai_src_addr = calloc(1, sizeof(struct sockaddr_in));
	ai->ai_dst_addr = calloc(1, sizeof(struct sockaddr_in));
	ai->ai_dst_canonname = strdup("peer");
	ai->ai_route = malloc(16);
	ai->ai_next = next;
	return ai;
}

START_TEST(rdmacm_freeaddrinfo)
{
	rdma_freeaddrinfo(NULL);
	rdma_freeaddrinfo(addrinfo_node(addrinfo_node(NULL)));
}
END_TEST

static Suite *abi_suite(void)
{
	Suite *s = suite_create("abi");
	TCase *verbs = tcase_create("libibverbs");
	TCase *cm = tcase_create("librdmacm");

	tcase_add_test(verbs, compat_twins_fail);
	tcase_add_test(verbs, register_driver_ignored);
	tcase_add_test(verbs, provider_interface);
	tcase_add_test(verbs, fork_state);
	tcase_add_test(verbs, sysfs_rejects);
	tcase_add_test(verbs, sysfs_reads);
	tcase_add_test(verbs, sysfs_path_env);
	tcase_add_test(verbs, kernel_structs);
	suite_add_tcase(s, verbs);
	tcase_add_test(cm, rdmacm_devices_without_daemon);
	tcase_add_test(cm, rdmacm_freeaddrinfo);
	suite_add_tcase(s, cm);
	return s;
}

int main(void)
{
	return check_run(abi_suite(), CK_NORMAL);
}
