/*
 * Synchronous calls to the daemon over one SOCK_SEQPACKET connection.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>

#include "conn.h"
#include "util.h"
#include "ibverbsd.pb-c.h"

#define IBVD_DEFAULT_TIMEOUT_MS	30000

/*
 * $IBVERBSD_SOCKET as the process started with it, for a program that
 * empties its environment once running: nginx keeps only TZ in its
 * workers, so its rsockets after that would look for the default daemon
 * and find none (a TCP socket under librspreload) or another one.
 */
static char *socket_at_start;

__attribute__((constructor)) static void remember_socket(void)
{
	const char *path = getenv("IBVERBSD_SOCKET");

	if (path && *path)
		socket_at_start = strdup(path);
}

const char *ibvd_socket_path(void)
{
	const char *path = getenv("IBVERBSD_SOCKET");

	if (!path)
		path = socket_at_start;	/* unset since: see above */
	return path && *path ? path : IBVERBSD_DEFAULT_SOCKET;
}

/*
 * IBVERBSD_TIMEOUT_MS: 0 or less waits for ever; anything that is not a
 * whole number ("1s", "abc") keeps the default, as the daemon's own
 * knobs do, rather than reading as 0 and waiting for ever.
 */
static int timeout_from_env(void)
{
	const char *s = getenv("IBVERBSD_TIMEOUT_MS");
	int saved = errno;
	char *end;
	long ms;

	if (!s || !*s)
		return IBVD_DEFAULT_TIMEOUT_MS;
	errno = 0;
	ms = strtol(s, &end, 10);
	if (*end || errno || ms > INT_MAX)
		ms = IBVD_DEFAULT_TIMEOUT_MS;
	errno = saved;
	return ms < 0 ? 0 : (int)ms;
}

/*
 * A timeout error for a blocking step.  On AF_UNIX, SO_SNDTIMEO bounds
 * connect() (a full backlog: the daemon is not accepting) and sendmsg() (a
 * full queue: the daemon is not reading), which then fail with EAGAIN.
 */
static int timeout_errno(int err)
{
	return err == -EAGAIN || err == -EWOULDBLOCK || err == -EINPROGRESS ?
		-ETIMEDOUT : err;
}

/*
 * Both directions: SO_RCVTIMEO bounds the wait for a reply, so a call is
 * one sendmsg() and, past a short poll (poll_reply), one blocking
 * recvmsg(), with no poll() between.
 */
static int set_timeouts(int sock, int timeout_ms)
{
	struct timeval tv = {
		.tv_sec = timeout_ms / 1000,
		.tv_usec = (timeout_ms % 1000) * 1000,
	};

	if (timeout_ms <= 0)
		return 0;
	if (setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
		return -errno;
	return 0;
}

/* A connection's state around no socket yet: its buffer and timeout. */
static int conn_init(struct ibvd_conn *conn)
{
	memset(conn, 0, sizeof(*conn));
	conn->sock = -1;
	conn->buf = malloc(IBVD_FRAME_MAX);
	if (!conn->buf)
		return -ENOMEM;
	conn->timeout_ms = timeout_from_env();
	conn->next_req_id = 1;
	conn->owner = getpid();
	return 0;
}

/* A connection this process inherited (fork) is its parent's to use. */
static int owned(struct ibvd_conn *conn)
{
	if (conn->owner == getpid())
		return 0;
	snprintf(conn->err_msg, sizeof(conn->err_msg),
		 "the connection is process %d's, inherited through fork()",
		 (int)conn->owner);
	return -EIO;
}

static void conn_fail(struct ibvd_conn *conn)
{
	if (conn->sock >= 0)
		close(conn->sock);
	conn->sock = -1;
	free(conn->buf);
	conn->buf = NULL;
}

int ibvd_conn_open(struct ibvd_conn *conn, const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int ret;

	if (!path)
		path = ibvd_socket_path();
	if (strlen(path) >= sizeof(sun.sun_path)) {
		memset(conn, 0, sizeof(*conn));
		conn->sock = -1;
		return -ENAMETOOLONG;
	}
	strcpy(sun.sun_path, path);
	ret = conn_init(conn);
	if (ret < 0)
		return ret;
	conn->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (conn->sock < 0) {
		ret = -errno;
		goto fail;
	}
	ret = set_timeouts(conn->sock, conn->timeout_ms);
	if (ret < 0)
		goto fail;
	if (connect(conn->sock, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		ret = timeout_errno(-errno);
		goto fail;
	}
	pthread_mutex_init(&conn->lock, NULL);
	return 0;
fail:
	conn_fail(conn);
	return ret;
}

int ibvd_conn_adopt(struct ibvd_conn *conn, int sock)
{
	int ret = conn_init(conn);

	if (ret < 0)
		return ret;
	ret = set_timeouts(sock, conn->timeout_ms);
	if (ret < 0) {
		conn_fail(conn);
		return ret;
	}
	conn->sock = sock;
	pthread_mutex_init(&conn->lock, NULL);
	return 0;
}

void ibvd_conn_close(struct ibvd_conn *conn)
{
	if (conn->sock < 0)
		return;
	close(conn->sock);
	conn->sock = -1;
	pthread_mutex_destroy(&conn->lock);
	free(conn->buf);
	conn->buf = NULL;
}

/*
 * The daemon closed the connection.  If it refused us, its Error (req_id 0)
 * may still be queued behind the ECONNRESET or EPIPE we got (the kernel
 * reports those first): 0 with that Error in frame, else -EIO.
 */
static int parting_error(struct ibvd_conn *conn, struct ibvd_frame *frame)
{
	int ret = ibvd_frame_recv(conn->sock, conn->buf, IBVD_FRAME_MAX, frame,
				  MSG_DONTWAIT);

	if (ret == 1 && frame->hdr.req_id == 0 &&
	    frame->hdr.type == IBVD_MSG_ERROR)
		return 0;
	if (ret == 1)
		ibvd_frame_close_fds(frame);
	return -EIO;
}

/*
 * Most replies come within tens of microseconds, and a thread that sleeps
 * in recvmsg() pays a wakeup for each (two context switches, expensive in
 * a virtual machine): creating 3,000 CQs and QPs took 0.55 s sleeping and
 * 0.38 s polling first (bench/scale).  So the reply is polled for for a
 * while before the blocking receive, yielding the CPU between polls, so
 * that the daemon (or anyone else runnable) gets it on a crowded machine.
 */
#define REPLY_POLL_NS	50000u

/* A frame if one comes within REPLY_POLL_NS, else -EAGAIN. */
static int poll_reply(struct ibvd_conn *conn, struct ibvd_frame *frame)
{
	uint64_t start = ibvd_mono_ns();
	int ret;

	for (;;) {
		ret = ibvd_frame_recv(conn->sock, conn->buf, IBVD_FRAME_MAX,
				      frame, MSG_DONTWAIT);
		if ((ret != -EAGAIN && ret != -EWOULDBLOCK) ||
		    ibvd_mono_ns() - start > REPLY_POLL_NS)
			return ret;
		sched_yield();
	}
}

/* Receive the reply to req_id, skipping stale replies to abandoned calls. */
static int recv_reply(struct ibvd_conn *conn, uint32_t req_id,
		      struct ibvd_frame *frame)
{
	int ret;

	for (;;) {
		ret = poll_reply(conn, frame);
		/* Blocks up to the timeout (SO_RCVTIMEO), then EAGAIN. */
		if (ret == -EAGAIN || ret == -EWOULDBLOCK)
			ret = ibvd_frame_recv(conn->sock, conn->buf,
					      IBVD_FRAME_MAX, frame, 0);
		if (ret == -EAGAIN || ret == -EWOULDBLOCK)
			return -ETIMEDOUT;
		if (ret == -ECONNRESET)
			return parting_error(conn, frame);
		if (ret == 0)
			return -EIO;
		/* out of fds: the frame is whole, and says whose it was */
		if (ret == -EMFILE && frame->hdr.req_id == req_id)
			return ret;
		if (ret < 0 && ret != -EMFILE)
			return ret == -EMSGSIZE || ret == -EBADMSG ? -EPROTO : ret;
		if (ret > 0 && frame->hdr.req_id == req_id)
			return 0;
		/* The daemon refuses the connection ("too many clients"). */
		if (frame->hdr.req_id == 0 && frame->hdr.type == IBVD_MSG_ERROR)
			return 0;
		ibvd_abandoned_undo(conn, frame);
		ibvd_frame_close_fds(frame);
	}
}

static int unpack_reply(struct ibvd_conn *conn, struct ibvd_frame *frame,
			uint16_t type,
			const ProtobufCMessageDescriptor *reply_desc,
			ProtobufCMessage **reply)
{
	if (frame->hdr.type == IBVD_MSG_ERROR) {
		Ibvd__Error *err = ibvd__error__unpack(NULL, frame->hdr.len,
						       frame->payload);
		int errnum = err && err->errnum > 0 ? err->errnum : EPROTO;

		if (err && err->message)
			snprintf(conn->err_msg, sizeof(conn->err_msg), "%s",
				 err->message);
		if (err)
			ibvd__error__free_unpacked(err, NULL);
		return -errnum;
	}
	if (frame->hdr.type != (type | IBVD_REPLY))
		return -EPROTO;
	if (!reply)
		return 0;
	*reply = protobuf_c_message_unpack(reply_desc, NULL, frame->hdr.len,
					   frame->payload);
	return *reply ? 0 : -EPROTO;
}

static void hand_over_fds(struct ibvd_frame *frame, int *fds, unsigned int *nfds)
{
	unsigned int cap = nfds ? *nfds : 0, i;

	for (i = 0; i < frame->nfds && i < cap && fds; i++)
		fds[i] = frame->fds[i];
	if (nfds)
		*nfds = i;
	/* close what the caller did not take */
	while (frame->nfds > i)
		close(frame->fds[--frame->nfds]);
	frame->nfds = 0;
}

/*
 * What a call got back (ret: 0 with the reply in frame, or an error):
 * the reply unpacked and its fds handed over.  conn->lock held.
 */
static int finish_locked(struct ibvd_conn *conn, int ret,
			 struct ibvd_frame *frame, uint16_t type,
			 const ProtobufCMessageDescriptor *reply_desc,
			 ProtobufCMessage **reply, int *fds, unsigned int *nfds)
{
	if (ret == -EIO)
		conn->dead = 1;
	/* The daemon made what it answers, but it cannot be ours: undone. */
	if (ret == -EMFILE)
		ibvd_abandoned_undo_now(conn, type, frame);
	if (ret < 0)
		return ret;
	ret = unpack_reply(conn, frame, type, reply_desc, reply);
	if (ret == 0) {
		hand_over_fds(frame, fds, nfds);
		return 0;
	}
	if (frame->hdr.type == (type | IBVD_REPLY))
		ibvd_abandoned_undo_now(conn, type, frame);
	ibvd_frame_close_fds(frame);
	return ret;
}

uint32_t ibvd_conn_next_req_id(struct ibvd_conn *conn)
{
	/* 0 stays unused: an Error with req_id 0 is about the connection. */
	if (!conn->next_req_id)
		conn->next_req_id = 1;
	return conn->next_req_id++;
}

int ibvd_conn_call(struct ibvd_conn *conn, uint16_t type,
		   const ProtobufCMessage *req,
		   const ProtobufCMessageDescriptor *reply_desc,
		   ProtobufCMessage **reply, int *fds, unsigned int *nfds)
{
	return ibvd_conn_call_fds(conn, type, req, NULL, 0, reply_desc, reply,
				  fds, nfds);
}

int ibvd_conn_call_fds(struct ibvd_conn *conn, uint16_t type,
		       const ProtobufCMessage *req, const int *req_fds,
		       unsigned int nreq_fds,
		       const ProtobufCMessageDescriptor *reply_desc,
		       ProtobufCMessage **reply, int *fds, unsigned int *nfds)
{
	struct ibvd_frame frame;
	uint32_t req_id;
	int ret;

	if (reply)
		*reply = NULL;
	if (conn->sock < 0)
		return -EBADF;
	pthread_mutex_lock(&conn->lock);
	ret = conn->dead ? -EIO : owned(conn);
	if (ret < 0)
		goto out;
	conn->err_msg[0] = '\0';
	req_id = ibvd_conn_next_req_id(conn);
	ret = timeout_errno(ibvd_frame_send(conn->sock, type, req_id, req,
					    req_fds, nreq_fds, 0));
	if (ret == 0) {
		ret = recv_reply(conn, req_id, &frame);
		if (ret == -ETIMEDOUT)
			ibvd_abandoned_add(conn, req_id, type);
	} else if (ret == -EPIPE || ret == -ECONNRESET || ret == -ENOTCONN)
		ret = parting_error(conn, &frame);
	ret = finish_locked(conn, ret, &frame, type, reply_desc, reply, fds,
			    nfds);
out:
	if (ret < 0 && nfds)
		*nfds = 0;
	pthread_mutex_unlock(&conn->lock);
	return ret;
}

int ibvd_conn_await(struct ibvd_conn *conn, uint32_t req_id, uint16_t type,
		    const ProtobufCMessageDescriptor *reply_desc,
		    ProtobufCMessage **reply, int *fds, unsigned int *nfds)
{
	struct ibvd_frame frame;
	int ret;

	if (reply)
		*reply = NULL;
	pthread_mutex_lock(&conn->lock);
	conn->err_msg[0] = '\0';
	ret = owned(conn);
	if (ret < 0) {
		if (nfds)
			*nfds = 0;
		pthread_mutex_unlock(&conn->lock);
		return ret;
	}
	ret = recv_reply(conn, req_id, &frame);
	ret = finish_locked(conn, ret, &frame, type, reply_desc, reply, fds,
			    nfds);
	if (ret < 0 && nfds)
		*nfds = 0;
	pthread_mutex_unlock(&conn->lock);
	return ret;
}

void ibvd_conn_move(struct ibvd_conn *to, struct ibvd_conn *from)
{
	pthread_mutex_destroy(&from->lock);
	*to = *from;
	pthread_mutex_init(&to->lock, NULL);
	memset(from, 0, sizeof(*from));
	from->sock = -1;
}
