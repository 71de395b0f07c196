/*
 * Framing and fd passing (common/frame.c) over real SOCK_SEQPACKET pairs.
 * Malformed frames are written by hand with send()/sendmsg() so that every
 * header field can be wrong on purpose.  Also the common code around it:
 * the client's call timeouts (common/conn.c) and log escaping (common/log.c).
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "conn.h"
#include "frame.h"
#include "ibverbsd.pb-c.h"
#include "log.h"
#include "tests/common/check_run.h"

static int sv[2];
static uint8_t *buf;

static void setup(void)
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	buf = malloc(IBVD_FRAME_MAX);
	ck_assert_ptr_nonnull(buf);
}

static void teardown(void)
{
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	free(buf);
}

static int count_open_fds(void)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	ck_assert_ptr_nonnull(dir);
	while ((de = readdir(dir)))
		if (de->d_name[0] != '.')
			n++;
	closedir(dir);
	return n - 1;	/* the directory's own fd */
}

static int fd_is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

/* Send a hand-made header (+ payload bytes) with optional fds. */
static void send_raw(const struct ibvd_frame_hdr *hdr, size_t hdr_len,
		     const void *payload, size_t len, const int *fds, int nfds)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * 16)];
	} cmsg;
	struct iovec iov[2] = {
		{ .iov_base = (void *)hdr, .iov_len = hdr_len },
		{ .iov_base = (void *)payload, .iov_len = len },
	};
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };

	if (nfds) {
		struct cmsghdr *c;

		memset(&cmsg, 0, sizeof(cmsg));
		mh.msg_control = cmsg.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	ck_assert_int_eq(sendmsg(sv[0], &mh, 0), (ssize_t)(hdr_len + len));
}

static struct ibvd_frame_hdr good_hdr(uint16_t type, uint32_t len)
{
	struct ibvd_frame_hdr hdr = {
		.magic = IBVD_FRAME_MAGIC,
		.version = IBVD_PROTO_VERSION,
		.type = type,
		.req_id = 7,
		.len = len,
	};
	return hdr;
}

static int recv_frame(struct ibvd_frame *frame)
{
	return ibvd_frame_recv(sv[1], buf, IBVD_FRAME_MAX, frame, MSG_DONTWAIT);
}

/* ---- round trips ------------------------------------------------------ */

START_TEST(test_round_trip)
{
	Ibvd__OpenDevice req = IBVD__OPEN_DEVICE__INIT;
	Ibvd__OpenDevice *got;
	struct ibvd_frame frame;

	req.name = "ibvd0";
	ck_assert_int_eq(ibvd_frame_send(sv[0], IBVD_MSG_OPEN_DEVICE, 42,
					 &req.base, NULL, 0, 0), 0);
	ck_assert_int_eq(recv_frame(&frame), 1);
	ck_assert_uint_eq(frame.hdr.magic, IBVD_FRAME_MAGIC);
	ck_assert_uint_eq(frame.hdr.version, IBVD_PROTO_VERSION);
	ck_assert_uint_eq(frame.hdr.type, IBVD_MSG_OPEN_DEVICE);
	ck_assert_uint_eq(frame.hdr.req_id, 42);
	ck_assert_uint_eq(frame.hdr.len, protobuf_c_message_get_packed_size(&req.base));
	ck_assert_uint_eq(frame.nfds, 0);
	got = ibvd__open_device__unpack(NULL, frame.hdr.len, frame.payload);
	ck_assert_ptr_nonnull(got);
	ck_assert_str_eq(got->name, "ibvd0");
	ibvd__open_device__free_unpacked(got, NULL);
}
END_TEST

START_TEST(test_empty_payload)
{
	struct ibvd_frame frame;

	ck_assert_int_eq(ibvd_frame_send(sv[0], IBVD_MSG_LIST_DEVICES, 1,
					 NULL, NULL, 0, 0), 0);
	ck_assert_int_eq(recv_frame(&frame), 1);
	ck_assert_uint_eq(frame.hdr.type, IBVD_MSG_LIST_DEVICES);
	ck_assert_uint_eq(frame.hdr.len, 0);
}
END_TEST

/* Payloads above the 1 KiB stack buffer go through the heap path. */
START_TEST(test_large_payload)
{
	Ibvd__AdminReply reply = IBVD__ADMIN_REPLY__INIT;
	Ibvd__AdminReply *got;
	struct ibvd_frame frame;
	char *json = malloc(40000);

	memset(json, 'x', 39999);
	json[39999] = '\0';
	reply.json = json;
	ck_assert_int_eq(ibvd_frame_send(sv[0], IBVD_MSG_ADMIN | IBVD_REPLY, 3,
					 &reply.base, NULL, 0, 0), 0);
	ck_assert_int_eq(recv_frame(&frame), 1);
	ck_assert_uint_eq(frame.hdr.type, IBVD_MSG_ADMIN | IBVD_REPLY);
	got = ibvd__admin_reply__unpack(NULL, frame.hdr.len, frame.payload);
	ck_assert_ptr_nonnull(got);
	ck_assert_str_eq(got->json, json);
	ibvd__admin_reply__free_unpacked(got, NULL);
	free(json);
}
END_TEST

START_TEST(test_send_error)
{
	struct ibvd_frame frame;
	Ibvd__Error *err;

	ck_assert_int_eq(ibvd_frame_send_error(sv[0], 9, ENODEV,
					       "unknown device ibvd9", 0), 0);
	ck_assert_int_eq(recv_frame(&frame), 1);
	ck_assert_uint_eq(frame.hdr.type, IBVD_MSG_ERROR);
	ck_assert_uint_eq(frame.hdr.req_id, 9);
	err = ibvd__error__unpack(NULL, frame.hdr.len, frame.payload);
	ck_assert_ptr_nonnull(err);
	ck_assert_int_eq(err->errnum, ENODEV);
	ck_assert_str_eq(err->message, "unknown device ibvd9");
	ibvd__error__free_unpacked(err, NULL);
}
END_TEST

START_TEST(test_send_oversize)
{
	Ibvd__AdminReply reply = IBVD__ADMIN_REPLY__INIT;
	struct ibvd_frame frame;
	char *json = malloc(IBVD_FRAME_MAX);

	memset(json, 'x', IBVD_FRAME_MAX - 1);
	json[IBVD_FRAME_MAX - 1] = '\0';
	reply.json = json;
	ck_assert_int_eq(ibvd_frame_send(sv[0], IBVD_MSG_ADMIN | IBVD_REPLY, 3,
					 &reply.base, NULL, 0, 0), -EMSGSIZE);
	/* Nothing went out. */
	ck_assert_int_eq(recv_frame(&frame), -EAGAIN);
	free(json);
}
END_TEST

START_TEST(test_send_too_many_fds)
{
	int fds[IBVD_FRAME_MAX_FDS + 1] = { 0 };

	ck_assert_int_eq(ibvd_frame_send(sv[0], IBVD_MSG_LIST_DEVICES, 1, NULL,
					 fds, IBVD_FRAME_MAX_FDS + 1, 0), -EMSGSIZE);
}
END_TEST

START_TEST(test_type_names)
{
	ck_assert_str_eq(ibvd_msg_type_name(IBVD_MSG_LIST_DEVICES), "LIST_DEVICES");
	ck_assert_str_eq(ibvd_msg_type_name(IBVD_MSG_QUERY_PORT | IBVD_REPLY),
			 "QUERY_PORT");
	ck_assert_str_eq(ibvd_msg_type_name(0x7777), "UNKNOWN");
}
END_TEST

/* ---- malformed frames ------------------------------------------------- */

START_TEST(test_bad_magic)
{
	struct ibvd_frame_hdr hdr = good_hdr(IBVD_MSG_LIST_DEVICES, 0);
	struct ibvd_frame frame;

	hdr.magic = 0x12345678;
	send_raw(&hdr, sizeof(hdr), NULL, 0, NULL, 0);
	ck_assert_int_eq(recv_frame(&frame), -EBADMSG);
}
END_TEST

START_TEST(test_bad_version)
{
	struct ibvd_frame_hdr hdr = good_hdr(IBVD_MSG_LIST_DEVICES, 0);
	struct ibvd_frame frame;

	hdr.version = IBVD_PROTO_VERSION + 1;
	send_raw(&hdr, sizeof(hdr), NULL, 0, NULL, 0);
	ck_assert_int_eq(recv_frame(&frame), -EPROTO);
	/* The header is still there, so the caller can answer req_id. */
	ck_assert_uint_eq(frame.hdr.req_id, 7);
}
END_TEST

START_TEST(test_len_too_long)
{
	struct ibvd_frame_hdr hdr = good_hdr(IBVD_MSG_QUERY_PORT, 10);
	struct ibvd_frame frame;
	uint8_t payload[4] = { 0x08, 0x01, 0, 0 };

	send_raw(&hdr, sizeof(hdr), payload, sizeof(payload), NULL, 0);
	ck_assert_int_eq(recv_frame(&frame), -EBADMSG);
}
END_TEST

START_TEST(test_len_too_short)
{
	struct ibvd_frame_hdr hdr = good_hdr(IBVD_MSG_QUERY_PORT, 1);
	struct ibvd_frame frame;
	uint8_t payload[2] = { 0x08, 0x01 };

	send_raw(&hdr, sizeof(hdr), payload, sizeof(payload), NULL, 0);
	ck_assert_int_eq(recv_frame(&frame), -EBADMSG);
}
END_TEST

START_TEST(test_truncated_header)
{
	struct ibvd_frame_hdr hdr = good_hdr(IBVD_MSG_LIST_DEVICES, 0);
	struct ibvd_frame frame;

	send_raw(&hdr, sizeof(hdr) - 1, NULL, 0, NULL, 0);
	ck_assert_int_eq(recv_frame(&frame), -EBADMSG);
}
END_TEST

START_TEST(test_oversize_frame)
{
	size_t len = IBVD_FRAME_MAX;	/* header + this > the maximum */
	struct ibvd_frame_hdr hdr = good_hdr(IBVD_MSG_ADMIN, (uint32_t)len);
	struct ibvd_frame frame;
	int sndbuf = 4 * IBVD_FRAME_MAX;
	uint8_t *payload = calloc(1, len);

	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	send_raw(&hdr, sizeof(hdr), payload, len, NULL, 0);
	ck_assert_int_eq(recv_frame(&frame), -EMSGSIZE);
	/* The rest of the oversize message is gone, not read as a frame. */
	ck_assert_int_eq(recv_frame(&frame), -EAGAIN);
	free(payload);
}
END_TEST

START_TEST(test_small_buffer)
{
	struct ibvd_frame frame;

	ck_assert_int_eq(ibvd_frame_recv(sv[1], buf, IBVD_FRAME_MAX - 1, &frame,
					 MSG_DONTWAIT), -EINVAL);
}
END_TEST

START_TEST(test_nothing_to_read)
{
	struct ibvd_frame frame;

	ck_assert_int_eq(recv_frame(&frame), -EAGAIN);
}
END_TEST

START_TEST(test_eof)
{
	struct ibvd_frame frame;

	close(sv[0]);
	sv[0] = -1;
	ck_assert_int_eq(recv_frame(&frame), 0);
}
END_TEST

/* ---- fd passing ------------------------------------------------------- */

START_TEST(test_fd_passing)
{
	struct ibvd_frame frame;
	struct stat a, b;
	int p[2], i;

	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(ibvd_frame_send(sv[0], IBVD_MSG_OPEN_DEVICE | IBVD_REPLY,
					 5, NULL, p, 2, 0), 0);
	ck_assert_int_eq(recv_frame(&frame), 1);
	ck_assert_uint_eq(frame.nfds, 2);
	for (i = 0; i < 2; i++) {
		ck_assert_int_ne(frame.fds[i], p[i]);
		ck_assert_int_eq(fstat(frame.fds[i], &a), 0);
		ck_assert_int_eq(fstat(p[i], &b), 0);
		ck_assert(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
		/* MSG_CMSG_CLOEXEC: nothing leaks into exec'd children. */
		ck_assert_int_eq(fcntl(frame.fds[i], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	}
	ibvd_frame_close_fds(&frame);
	close(p[0]);
	close(p[1]);
}
END_TEST

/* The frame carries fds its type does not take: the caller closes them. */
START_TEST(test_unexpected_fds_closed_by_caller)
{
	struct ibvd_frame frame;
	int p[2], got0, got1;

	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(ibvd_frame_send(sv[0], IBVD_MSG_QUERY_DEVICE, 5, NULL,
					 p, 2, 0), 0);
	close(p[0]);
	close(p[1]);
	ck_assert_int_eq(recv_frame(&frame), 1);
	ck_assert_uint_eq(frame.nfds, 2);
	got0 = frame.fds[0];
	got1 = frame.fds[1];
	ibvd_frame_close_fds(&frame);
	ck_assert_uint_eq(frame.nfds, 0);
	ck_assert(!fd_is_open(got0));
	ck_assert(!fd_is_open(got1));
}
END_TEST

/* More fds than a frame may carry: all closed, frame refused. */
START_TEST(test_surplus_fds_closed)
{
	struct ibvd_frame_hdr hdr = good_hdr(IBVD_MSG_LIST_DEVICES, 0);
	int fds[IBVD_FRAME_MAX_FDS + 2];
	struct ibvd_frame frame;
	int before, i, fd;

	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	for (i = 0; i < IBVD_FRAME_MAX_FDS + 2; i++)
		fds[i] = fd;
	send_raw(&hdr, sizeof(hdr), NULL, 0, fds, IBVD_FRAME_MAX_FDS + 2);
	close(fd);
	before = count_open_fds();
	ck_assert_int_eq(recv_frame(&frame), -EMSGSIZE);
	ck_assert_uint_eq(frame.nfds, 0);
	ck_assert_int_eq(count_open_fds(), before);
}
END_TEST

/* A malformed frame that carries fds must not leak them either. */
START_TEST(test_fds_on_bad_frame_closed)
{
	struct ibvd_frame_hdr hdr = good_hdr(IBVD_MSG_LIST_DEVICES, 0);
	struct ibvd_frame frame;
	int before, fd;

	hdr.magic = 0;
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	send_raw(&hdr, sizeof(hdr), NULL, 0, &fd, 1);
	close(fd);
	before = count_open_fds();
	ck_assert_int_eq(recv_frame(&frame), -EBADMSG);
	ck_assert_int_eq(count_open_fds(), before);
}
END_TEST

/* fds with an empty message are not an orderly EOF. */
START_TEST(test_fds_without_data)
{
	struct ibvd_frame frame;
	int before, fd;

	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	send_raw(NULL, 0, NULL, 0, &fd, 1);
	close(fd);
	before = count_open_fds();
	ck_assert_int_eq(recv_frame(&frame), -EBADMSG);
	ck_assert_int_eq(count_open_fds(), before);
}
END_TEST

/* ---- the close hook -------------------------------------------------- */

static int hook_calls;

static void counting_close(int fd)
{
	hook_calls++;
	close(fd);
}

/* fds refused with a frame go through the hook (the daemon defers them). */
START_TEST(test_close_hook_surplus)
{
	struct ibvd_frame_hdr hdr = good_hdr(IBVD_MSG_LIST_DEVICES, 0);
	int fds[IBVD_FRAME_MAX_FDS + 2];
	struct ibvd_frame frame;
	int before, i, fd;

	ibvd_frame_set_close_hook(counting_close);
	hook_calls = 0;
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	for (i = 0; i < IBVD_FRAME_MAX_FDS + 2; i++)
		fds[i] = fd;
	send_raw(&hdr, sizeof(hdr), NULL, 0, fds, IBVD_FRAME_MAX_FDS + 2);
	close(fd);
	before = count_open_fds();
	ck_assert_int_eq(recv_frame(&frame), -EMSGSIZE);
	ck_assert_int_eq(hook_calls, IBVD_FRAME_MAX_FDS + 2);
	ck_assert_int_eq(count_open_fds(), before);
	ibvd_frame_set_close_hook(NULL);
}
END_TEST

/*
 * The most one message can carry (the kernel's SCM_MAX_FD, 253) all reach
 * the hook: none is dropped inside recvmsg() for want of buffer space,
 * where closing it could block the receiver.
 */
START_TEST(test_close_hook_max_fds)
{
	enum { MAX_FDS = 253 };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
	} cmsg;
	struct ibvd_frame_hdr hdr = good_hdr(IBVD_MSG_LIST_DEVICES, 0);
	struct iovec iov = { .iov_base = &hdr, .iov_len = sizeof(hdr) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cmsg.buf, .msg_controllen = sizeof(cmsg.buf),
	};
	struct ibvd_frame frame;
	struct cmsghdr *c;
	int fds[MAX_FDS], before, i, fd;

	ibvd_frame_set_close_hook(counting_close);
	hook_calls = 0;
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	for (i = 0; i < MAX_FDS; i++)
		fds[i] = fd;
	memset(&cmsg, 0, sizeof(cmsg));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	ck_assert_int_eq(sendmsg(sv[0], &mh, 0), (ssize_t)sizeof(hdr));
	close(fd);
	before = count_open_fds();
	ck_assert_int_eq(recv_frame(&frame), -EMSGSIZE);
	ck_assert_int_eq(hook_calls, MAX_FDS);
	ck_assert_int_eq(count_open_fds(), before);
	ibvd_frame_set_close_hook(NULL);
}
END_TEST

/* A malformed frame's fds, and the frame's own, go through the hook too. */
START_TEST(test_close_hook_bad_frame)
{
	struct ibvd_frame_hdr hdr = good_hdr(IBVD_MSG_LIST_DEVICES, 0);
	struct ibvd_frame frame;
	int p[2];

	ibvd_frame_set_close_hook(counting_close);
	hook_calls = 0;
	ck_assert_int_eq(pipe(p), 0);
	hdr.magic = 0;
	send_raw(&hdr, sizeof(hdr), NULL, 0, p, 2);
	ck_assert_int_eq(recv_frame(&frame), -EBADMSG);
	ck_assert_int_eq(hook_calls, 2);

	ck_assert_int_eq(ibvd_frame_send(sv[0], IBVD_MSG_QUERY_DEVICE, 5, NULL,
					 p, 2, 0), 0);
	ck_assert_int_eq(recv_frame(&frame), 1);
	frame.fds[0] = -1;		/* taken by a handler: not closed here */
	ibvd_frame_close_fds(&frame);
	ck_assert_int_eq(hook_calls, 3);
	close(p[0]);
	close(p[1]);
	ibvd_frame_set_close_hook(NULL);
}
END_TEST

/* ---- client timeouts (conn.c) ----------------------------------------- */

#define CALL_TIMEOUT_MS	300

static char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];

static long ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000L + (t.tv_nsec - t0->tv_nsec) / 1000000L;
}

/* A listening socket nobody serves, at sock_path. */
static int listen_at(int backlog)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd;

	snprintf(sock_path, sizeof(sock_path), "/tmp/ibvd-test-frame.%d.sock",
		 (int)getpid());
	unlink(sock_path);
	strcpy(sun.sun_path, sock_path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	ck_assert_int_eq(listen(fd, backlog), 0);
	setenv("IBVERBSD_TIMEOUT_MS", "300", 1);
	return fd;
}

/* A daemon that does not accept: connect() times out. */
START_TEST(test_conn_connect_timeout)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct ibvd_conn conn;
	struct timespec t0;
	int l = listen_at(0), filler[8], n = 0, ret;
	long ms;

	/* fill the backlog */
	strcpy(sun.sun_path, sock_path);
	for (n = 0; n < 8; n++) {
		filler[n] = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0);
		ck_assert_int_ge(filler[n], 0);
		if (connect(filler[n], (struct sockaddr *)&sun, sizeof(sun)) < 0) {
			ck_assert_int_eq(errno, EAGAIN);
			break;
		}
	}
	ck_assert_int_lt(n, 8);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = ibvd_conn_open(&conn, sock_path);
	ms = ms_since(&t0);
	ck_assert_int_eq(ret, -ETIMEDOUT);
	ck_assert_int_ge(ms, CALL_TIMEOUT_MS - 50);
	ck_assert_int_le(ms, 2 * CALL_TIMEOUT_MS);
	ibvd_conn_close(&conn);
	while (n >= 0)
		close(filler[n--]);
	close(l);
	unlink(sock_path);
}
END_TEST

/* A daemon that does not read: the call still ends, even on a full queue. */
START_TEST(test_conn_call_timeout)
{
	struct ibvd_conn conn;
	struct timespec t0;
	int l = listen_at(8), i, ret;
	long ms;

	ck_assert_int_eq(ibvd_conn_open(&conn, sock_path), 0);
	/* not full yet: the wait for the reply times out */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = ibvd_conn_call(&conn, IBVD_MSG_LIST_DEVICES, NULL, NULL, NULL,
			     NULL, NULL);
	ms = ms_since(&t0);
	ck_assert_int_eq(ret, -ETIMEDOUT);
	ck_assert_int_ge(ms, CALL_TIMEOUT_MS - 50);
	ck_assert_int_le(ms, 2 * CALL_TIMEOUT_MS);
	/* fill the queue the daemon would read */
	for (i = 0; i < 100000; i++)
		if (ibvd_frame_send(conn.sock, IBVD_MSG_LIST_DEVICES, 0, NULL,
				    NULL, 0, MSG_DONTWAIT) < 0)
			break;
	ck_assert_int_lt(i, 100000);
	for (i = 0; i < 3; i++) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		ret = ibvd_conn_call(&conn, IBVD_MSG_LIST_DEVICES, NULL, NULL,
				     NULL, NULL, NULL);
		ms = ms_since(&t0);
		ck_assert_int_eq(ret, -ETIMEDOUT);
		ck_assert_int_le(ms, 2 * CALL_TIMEOUT_MS);
	}
	ibvd_conn_close(&conn);
	close(l);
	unlink(sock_path);
}
END_TEST

/*
 * A daemon refusing the connection sends an Error with request id 0 and
 * closes.  The call reports it whether the close beat our request (EPIPE)
 * or not (ECONNRESET before the queued Error).
 */
static void refused_call(int close_before_request)
{
	struct ibvd_conn conn;
	int l = listen_at(8), status, ret;
	pid_t pid;

	ck_assert_int_eq(ibvd_conn_open(&conn, sock_path), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct pollfd pfd = { .events = POLLIN };

		pfd.fd = accept(l, NULL, NULL);
		if (pfd.fd < 0)
			_exit(1);
		/* leave the request unread: the close resets the connection */
		if (!close_before_request && poll(&pfd, 1, 5000) != 1)
			_exit(1);
		if (ibvd_frame_send_error(pfd.fd, 0, EAGAIN, "too many clients", 0) < 0)
			_exit(1);
		_exit(0);
	}
	if (close_before_request)
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ret = ibvd_conn_call(&conn, IBVD_MSG_LIST_DEVICES, NULL, NULL, NULL,
			     NULL, NULL);
	ck_assert_int_eq(ret, -EAGAIN);
	ck_assert_str_eq(conn.err_msg, "too many clients");
	if (!close_before_request)
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* and from then on the daemon is gone */
	ck_assert_int_eq(ibvd_conn_call(&conn, IBVD_MSG_LIST_DEVICES, NULL, NULL,
					NULL, NULL, NULL), -EIO);
	ibvd_conn_close(&conn);
	close(l);
	unlink(sock_path);
}

START_TEST(test_conn_refused_after_request)
{
	refused_call(0);
}
END_TEST

START_TEST(test_conn_refused_before_request)
{
	refused_call(1);
}
END_TEST

/* ---- log lines ---------------------------------------------------------- */

/* Control characters in a logged word cannot make a line of their own. */
START_TEST(test_log_escapes_controls)
{
	char out[512];
	int p[2], saved;
	ssize_t n;

	unsetenv("JOURNAL_STREAM");
	ibvd_log_init("test", IBVD_LOG_DEBUG);
	ck_assert_int_eq(pipe(p), 0);
	saved = dup(2);
	ck_assert_int_eq(dup2(p[1], 2), 2);
	log_notice("unknown device %s", "x\n<3>forged\r\x1b[31m\t.");
	dup2(saved, 2);
	close(saved);
	close(p[1]);
	n = read(p[0], out, sizeof(out) - 1);
	close(p[0]);
	ck_assert_int_gt(n, 0);
	out[n] = '\0';
	ck_assert_str_eq(out, "test: notice: unknown device "
			 "x\\x0a<3>forged\\x0d\\x1b[31m\\x09.\n");
}
END_TEST

static Suite *frame_suite(void)
{
	Suite *s = suite_create("frame");
	TCase *tc;

	tc = tcase_create("round trip");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_empty_payload);
	tcase_add_test(tc, test_large_payload);
	tcase_add_test(tc, test_send_error);
	tcase_add_test(tc, test_send_oversize);
	tcase_add_test(tc, test_send_too_many_fds);
	tcase_add_test(tc, test_type_names);
	suite_add_tcase(s, tc);

	tc = tcase_create("malformed");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_bad_magic);
	tcase_add_test(tc, test_bad_version);
	tcase_add_test(tc, test_len_too_long);
	tcase_add_test(tc, test_len_too_short);
	tcase_add_test(tc, test_truncated_header);
	tcase_add_test(tc, test_oversize_frame);
	tcase_add_test(tc, test_small_buffer);
	tcase_add_test(tc, test_nothing_to_read);
	tcase_add_test(tc, test_eof);
	suite_add_tcase(s, tc);

	tc = tcase_create("fds");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_fd_passing);
	tcase_add_test(tc, test_unexpected_fds_closed_by_caller);
	tcase_add_test(tc, test_surplus_fds_closed);
	tcase_add_test(tc, test_fds_on_bad_frame_closed);
	tcase_add_test(tc, test_fds_without_data);
	tcase_add_test(tc, test_close_hook_surplus);
	tcase_add_test(tc, test_close_hook_max_fds);
	tcase_add_test(tc, test_close_hook_bad_frame);
	suite_add_tcase(s, tc);

	tc = tcase_create("client timeouts");
	tcase_add_test(tc, test_conn_connect_timeout);
	tcase_add_test(tc, test_conn_call_timeout);
	tcase_add_test(tc, test_conn_refused_after_request);
	tcase_add_test(tc, test_conn_refused_before_request);
	suite_add_tcase(s, tc);

	tc = tcase_create("log");
	tcase_add_test(tc, test_log_escapes_controls);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(frame_suite(), CK_NORMAL);
}
