/*
 * The raw-socket broker (daemon/netraw.c) and the drop (privilege.c), in
 * forked children of this test so that the test keeps its own rights:
 * the broker opens the four raw socket kinds RoCE uses and refuses every
 * other family or protocol with EPERM; it exits when the pair closes; a
 * process that kept CAP_NET_RAW alone can open raw sockets, one that kept
 * nothing cannot.  Needs root (CAP_NET_RAW, CAP_SETPCAP): skipped without.
 */
#include <config.h>

#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "daemon/core/rawsock.h"
#include "daemon/netraw.h"
#include "daemon/privilege.h"
#include "tests/common/check_run.h"

static void expect_open(int family, int protocol)
{
	int fd = ibvd_rawsock_open(family, protocol);

	ck_assert_msg(fd >= 0, "family %d protocol %d: %d", family, protocol, fd);
	close(fd);
}

START_TEST(broker_opens_roce_kinds)
{
	ck_assert_int_eq(ibvd_netraw_start(NULL), 0);
	expect_open(AF_INET, IPPROTO_RAW);
	expect_open(AF_INET, IPPROTO_UDP);
	expect_open(AF_INET6, IPPROTO_RAW);
	expect_open(AF_INET6, IPPROTO_UDP);
	ibvd_netraw_stop();
}
END_TEST

START_TEST(broker_refuses_others)
{
	static const int bad[][2] = {
		{ AF_PACKET, 0 }, { AF_INET, IPPROTO_TCP }, { AF_INET, IPPROTO_ICMP },
		{ AF_INET6, IPPROTO_ICMPV6 }, { AF_UNIX, 0 }, { AF_NETLINK, 0 },
		{ -1, -1 }, { AF_INET, 1 << 20 },
	};
	unsigned int i;

	ck_assert_int_eq(ibvd_netraw_start(NULL), 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_int_eq(ibvd_rawsock_open(bad[i][0], bad[i][1]), -EPERM);
	/* still serving after the refusals */
	expect_open(AF_INET, IPPROTO_UDP);
	ibvd_netraw_stop();
}
END_TEST

/* A filter on fd: SO_GET_FILTER says how many instructions (0: none). */
static int filter_len(int fd)
{
	socklen_t len = 0;

	ck_assert_int_eq(getsockopt(fd, SOL_SOCKET, SO_GET_FILTER, NULL, &len), 0);
	return (int)len;
}

/*
 * A receiving socket comes filtered, from the broker locked: the daemon
 * cannot take the filter off (or put another on) to read the namespace's
 * other UDP traffic.  Opened directly (a daemon that keeps CAP_NET_RAW),
 * it is filtered too.
 */
START_TEST(receiving_sockets_filtered)
{
	static const int families[] = { AF_INET, AF_INET6 };
	struct sock_fprog none = { 0 };
	unsigned int i;
	int fd;

	for (i = 0; i < 2; i++) {
		fd = ibvd_rawsock_open(families[i], IPPROTO_UDP);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_gt(filter_len(fd), 0);
		ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_DETACH_FILTER, &none,
					    sizeof(none)), 0);
		close(fd);
	}
	ck_assert_int_eq(ibvd_netraw_start(NULL), 0);
	for (i = 0; i < 2; i++) {
		fd = ibvd_rawsock_open(families[i], IPPROTO_UDP);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_gt(filter_len(fd), 0);
		ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_DETACH_FILTER, &none,
					    sizeof(none)), -1);
		ck_assert_int_eq(errno, EPERM);
		ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &none,
					    sizeof(none)), -1);
		close(fd);
	}
	ibvd_netraw_stop();
}
END_TEST

/* In a child: keep (or not) CAP_NET_RAW as uid 65534, then try a raw socket. */
static int child_raw(int keep)
{
	struct ibvd_identity nobody = { .uid = 65534, .gid = 65534 };
	pid_t pid = fork();
	int status, fd;

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (ibvd_privilege_restrict(&nobody, keep) < 0)
			_exit(2);
		if (ibvd_privilege_holds(CAP_SYS_ADMIN) || getuid() != 65534)
			_exit(3);
		fd = socket(AF_INET, SOCK_RAW, IPPROTO_UDP);
		_exit(fd >= 0 ? 0 : errno == EPERM ? 1 : 4);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

START_TEST(restrict_keeps_only_what_is_asked)
{
	ck_assert_int_eq(child_raw(CAP_NET_RAW), 0);
	ck_assert_int_eq(child_raw(-1), 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("netraw");
	TCase *tc = tcase_create("broker");

	if (geteuid() != 0 || !ibvd_privilege_holds(CAP_NET_RAW))
		return 77;
	tcase_add_test(tc, broker_opens_roce_kinds);
	tcase_add_test(tc, broker_refuses_others);
	tcase_add_test(tc, receiving_sockets_filtered);
	tcase_add_test(tc, restrict_keeps_only_what_is_asked);
	suite_add_tcase(s, tc);
	return check_run(s, CK_NORMAL);
}
