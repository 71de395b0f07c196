/*
 * rtnetlink answers as daemon/core/rtnl.c reads them, written by hand
 * into one end of a datagram socket pair that stands for the kernel: a
 * reply, the error the kernel sends, a late answer to an earlier request,
 * a cut message, a datagram too big for the buffer, and silence.
 */
#include <config.h>

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <linux/rtnetlink.h>

#include "core/rtnl.h"
#include "tests/common/check_run.h"

static struct ibvd_rtnl nl;
static int kernel_fd;
static unsigned int seen;	/* messages handed to count_msg */

static void setup(void)
{
	struct timeval tv = { .tv_sec = 0, .tv_usec = 200000 };
	int sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
	ck_assert_int_eq(setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv,
				    sizeof(tv)), 0);
	nl.fd = sv[0];
	nl.seq = 7;		/* the request just sent */
	kernel_fd = sv[1];
	seen = 0;
}

static void teardown(void)
{
	ibvd_rtnl_close(&nl);
	close(kernel_fd);
}

static int count_msg(const struct nlmsghdr *h, void *arg)
{
	(void)arg;
	ck_assert_uint_eq(h->nlmsg_type, RTM_NEWROUTE);
	seen++;
	return 0;
}

/* A message of type with seq and len bytes of zeroed payload into buf. */
static size_t put_msg(uint8_t *buf, uint16_t type, uint32_t seq, size_t len)
{
	struct nlmsghdr *h = (struct nlmsghdr *)buf;

	memset(buf, 0, NLMSG_SPACE(len));
	h->nlmsg_len = (uint32_t)NLMSG_LENGTH(len);
	h->nlmsg_type = type;
	h->nlmsg_seq = seq;
	return NLMSG_SPACE(len);
}

static void kernel_sends(const void *buf, size_t len)
{
	ck_assert_int_eq(send(kernel_fd, buf, len, 0), (ssize_t)len);
}

START_TEST(an_answer_is_read)
{
	uint8_t buf[256];

	kernel_sends(buf, put_msg(buf, RTM_NEWROUTE, 7, sizeof(struct rtmsg)));
	ck_assert_int_eq(ibvd_rtnl_recv(&nl, false, count_msg, NULL), 0);
	ck_assert_uint_eq(seen, 1);
}
END_TEST

/* An answer to an earlier request that timed out is passed over. */
START_TEST(a_late_answer_is_skipped)
{
	uint8_t buf[256];
	size_t n;

	n = put_msg(buf, RTM_NEWROUTE, 6, sizeof(struct rtmsg));
	n += put_msg(buf + n, RTM_NEWROUTE, 7, sizeof(struct rtmsg));
	kernel_sends(buf, n);
	ck_assert_int_eq(ibvd_rtnl_recv(&nl, false, count_msg, NULL), 0);
	ck_assert_uint_eq(seen, 1);
}
END_TEST

START_TEST(the_kernels_error_is_returned)
{
	uint8_t buf[256];
	struct nlmsgerr *e = NLMSG_DATA((struct nlmsghdr *)buf);

	put_msg(buf, NLMSG_ERROR, 7, sizeof(*e));
	e->error = -ENETUNREACH;
	kernel_sends(buf, NLMSG_SPACE(sizeof(*e)));
	ck_assert_int_eq(ibvd_rtnl_recv(&nl, false, count_msg, NULL), -ENETUNREACH);
	ck_assert_uint_eq(seen, 0);
}
END_TEST

/* A message that claims more than the datagram holds ends the read. */
START_TEST(a_cut_message_is_refused)
{
	uint8_t buf[256];
	struct nlmsghdr *h = (struct nlmsghdr *)buf;

	put_msg(buf, RTM_NEWROUTE, 7, sizeof(struct rtmsg));
	h->nlmsg_len += 64;
	kernel_sends(buf, NLMSG_SPACE(sizeof(struct rtmsg)));
	ck_assert_int_eq(ibvd_rtnl_recv(&nl, true, count_msg, NULL), -EPROTO);
	ck_assert_uint_eq(seen, 0);
}
END_TEST

/* A datagram longer than the buffer is not read as if it were whole. */
START_TEST(a_datagram_too_big_is_refused)
{
	size_t len = 65536;
	uint8_t *buf = calloc(1, len);
	int sz = (int)(4 * len);

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(setsockopt(kernel_fd, SOL_SOCKET, SO_SNDBUF, &sz,
				    sizeof(sz)), 0);
	put_msg(buf, RTM_NEWROUTE, 7, len - NLMSG_HDRLEN);
	kernel_sends(buf, len);
	ck_assert_int_eq(ibvd_rtnl_recv(&nl, true, count_msg, NULL), -EMSGSIZE);
	free(buf);
}
END_TEST

START_TEST(silence_is_a_timeout)
{
	ck_assert_int_eq(ibvd_rtnl_recv(&nl, false, count_msg, NULL), -ETIMEDOUT);
}
END_TEST

/* Attributes are padded with zeros, and refused past the buffer. */
START_TEST(attributes_fit_or_are_refused)
{
	struct {
		struct nlmsghdr h;
		struct rtmsg rtm;
		uint8_t attrs[8];
	} req;
	const uint8_t five[5] = { 1, 2, 3, 4, 5 };

	memset(&req, 0xa5, sizeof(req));
	req.h.nlmsg_len = NLMSG_LENGTH(sizeof(req.rtm));
	ck_assert_int_eq(ibvd_rtnl_put(&req.h, sizeof(req), RTA_DST, five, 4), 0);
	ck_assert_uint_eq(req.h.nlmsg_len, NLMSG_LENGTH(sizeof(req.rtm)) + 8);
	req.h.nlmsg_len = NLMSG_LENGTH(sizeof(req.rtm));
	ck_assert_int_eq(ibvd_rtnl_put(&req.h, sizeof(req), RTA_DST, five, 5),
			 -EMSGSIZE);
	ck_assert_int_eq(ibvd_rtnl_put(&req.h, sizeof(req), RTA_DST, five, 3), 0);
	ck_assert_uint_eq(req.attrs[7], 0);	/* the pad, not 0xa5 */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rtnl");
	TCase *tc = tcase_create("answers");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, an_answer_is_read);
	tcase_add_test(tc, a_late_answer_is_skipped);
	tcase_add_test(tc, the_kernels_error_is_returned);
	tcase_add_test(tc, a_cut_message_is_refused);
	tcase_add_test(tc, a_datagram_too_big_is_refused);
	tcase_add_test(tc, silence_is_a_timeout);
	tcase_add_test(tc, attributes_fit_or_are_refused);
	suite_add_tcase(s, tc);
	return check_run(s, CK_NORMAL);
}
