/*
 * Framing and fd passing for the client <-> daemon protocol.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "frame.h"
#include "ibverbsd.pb-c.h"

/* Control buffer for the IBVD_FRAME_MAX_FDS descriptors we send. */
union fd_cmsg {
	struct cmsghdr align;
	char buf[CMSG_SPACE(sizeof(int) * IBVD_FRAME_MAX_FDS)];
};

/*
 * We receive with room for IBVD_KERNEL_SCM_MAX_FD fds: fds that do not
 * fit are dropped by the kernel inside recvmsg(), and dropping the last
 * reference to a client's file can block (see ibvd_frame_set_close_hook),
 * where we could not hand it elsewhere.  Plus the sender's credentials,
 * which come first when the socket has SO_PASSCRED: without their room a
 * full set of fds would be cut short.
 */
union fd_cmsg_rx {
	struct cmsghdr align;
	char buf[CMSG_SPACE(sizeof(struct ucred)) +
		 CMSG_SPACE(sizeof(int) * IBVD_KERNEL_SCM_MAX_FD)];
};

static void (*close_hook)(int fd);

void ibvd_frame_set_close_hook(void (*hook)(int fd))
{
	close_hook = hook;
}

void ibvd_frame_close_fd(int fd)
{
	if (fd < 0)
		return;		/* taken by its handler */
	if (close_hook)
		close_hook(fd);
	else
		close(fd);
}

static struct ibvd_frame_hdr frame_hdr(uint16_t type, uint32_t req_id)
{
	return (struct ibvd_frame_hdr){
		.magic = IBVD_FRAME_MAGIC,
		.version = IBVD_PROTO_VERSION,
		.type = type,
		.req_id = req_id,
	};
}

int ibvd_frame_send(int sock, uint16_t type, uint32_t req_id,
		    const ProtobufCMessage *msg, const int *fds,
		    unsigned int nfds, int extra_flags)
{
	uint8_t small[1024], *payload = small;
	struct ibvd_frame_hdr hdr = frame_hdr(type, req_id);
	size_t len = msg ? protobuf_c_message_get_packed_size(msg) : 0;
	union fd_cmsg cmsg;
	struct iovec iov[2];
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
	ssize_t n;
	int ret;

	if (len > IBVD_FRAME_PAYLOAD_MAX || nfds > IBVD_FRAME_MAX_FDS)
		return -EMSGSIZE;
	/* Client threads may have small stacks: big payloads go to the heap. */
	if (len > sizeof(small) && !(payload = malloc(len)))
		return -ENOMEM;
	hdr.len = (uint32_t)len;
	if (msg)
		protobuf_c_message_pack(msg, payload);
	iov[0].iov_base = &hdr;
	iov[0].iov_len = sizeof(hdr);
	iov[1].iov_base = payload;
	iov[1].iov_len = len;

	if (nfds) {
		struct cmsghdr *c;

		memset(&cmsg, 0, sizeof(cmsg));
		mh.msg_control = cmsg.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}

	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL | extra_flags);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		ret = -errno;
	else
		ret = n == (ssize_t)(sizeof(hdr) + len) ? 0 : -EIO;
	if (payload != small)
		free(payload);
	return ret;
}

int ibvd_frame_pack(uint16_t type, uint32_t req_id,
		    const ProtobufCMessage *msg, uint8_t **buf, size_t *len)
{
	struct ibvd_frame_hdr hdr = frame_hdr(type, req_id);
	size_t plen = msg ? protobuf_c_message_get_packed_size(msg) : 0;
	uint8_t *b;

	if (plen > IBVD_FRAME_PAYLOAD_MAX)
		return -EMSGSIZE;
	b = malloc(sizeof(hdr) + plen);
	if (!b)
		return -ENOMEM;
	hdr.len = (uint32_t)plen;
	memcpy(b, &hdr, sizeof(hdr));
	if (msg)
		protobuf_c_message_pack(msg, b + sizeof(hdr));
	*buf = b;
	*len = sizeof(hdr) + plen;
	return 0;
}

/* The sender's credentials, if the kernel attached them (SO_PASSCRED). */
static void collect_sender(const struct cmsghdr *c, struct ibvd_frame *frame)
{
	struct ucred cred;

	if (c->cmsg_len != CMSG_LEN(sizeof(cred)))
		return;
	memcpy(&cred, CMSG_DATA(c), sizeof(cred));
	frame->sender_known = true;
	frame->sender_pid = cred.pid;
	frame->sender_uid = cred.uid;
	frame->sender_gid = cred.gid;
}

/*
 * Collect SCM_RIGHTS fds (and SCM_CREDENTIALS) from mh into frame; returns
 * -EMSGSIZE on excess fds.
 */
static int collect_fds(struct msghdr *mh, struct ibvd_frame *frame)
{
	struct cmsghdr *c;
	int ret = 0;

	for (c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		size_t n, i;
		int fd;

		if (c->cmsg_level == SOL_SOCKET &&
		    c->cmsg_type == SCM_CREDENTIALS) {
			collect_sender(c, frame);
			continue;
		}
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (frame->nfds < IBVD_FRAME_MAX_FDS) {
				frame->fds[frame->nfds++] = fd;
			} else {
				ibvd_frame_close_fd(fd);
				ret = -EMSGSIZE;
			}
		}
	}
	/*
	 * The buffer holds the kernel's maximum (IBVD_KERNEL_SCM_MAX_FD), so a
	 * truncation means this process had no fd number left for the rest
	 * (RLIMIT_NOFILE): the frame itself is whole.
	 */
	if ((mh->msg_flags & MSG_CTRUNC) && ret == 0)
		ret = -EMFILE;
	return ret;
}

int ibvd_frame_parse(const void *buf, size_t size, struct ibvd_frame *frame)
{
	struct ibvd_frame_hdr *hdr = &frame->hdr;

	if (size < sizeof(*hdr))
		return -EBADMSG;
	memcpy(hdr, buf, sizeof(*hdr));
	if (hdr->magic != IBVD_FRAME_MAGIC)
		return -EBADMSG;
	if (hdr->version != IBVD_PROTO_VERSION)
		return -EPROTO;
	if (hdr->len != size - sizeof(*hdr))
		return -EBADMSG;
	frame->payload = (const uint8_t *)buf + sizeof(*hdr);
	return 0;
}

int ibvd_frame_recv(int sock, void *buf, size_t bufsize,
		    struct ibvd_frame *frame, int extra_flags)
{
	union fd_cmsg_rx cmsg;
	struct iovec iov = { .iov_base = buf, .iov_len = bufsize };
	struct msghdr mh = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = cmsg.buf,
		.msg_controllen = sizeof(cmsg.buf),
	};
	ssize_t n;
	int ret;

	memset(frame, 0, sizeof(*frame));
	if (bufsize < IBVD_FRAME_MAX)
		return -EINVAL;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | extra_flags);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;

	ret = collect_fds(&mh, frame);
	if (ret == 0 && (mh.msg_flags & MSG_TRUNC))
		ret = -EMSGSIZE;
	if (ret == 0 && n == 0 && frame->nfds == 0)
		return 0;		/* orderly shutdown */
	/* short of fds only: parsed, so that the caller can tell what it was */
	if (ret == 0 || ret == -EMFILE) {
		int err = ibvd_frame_parse(buf, (size_t)n, frame);

		if (err < 0)
			ret = err;
	}
	if (ret < 0) {
		ibvd_frame_close_fds(frame);
		return ret;
	}
	return 1;
}

void ibvd_frame_close_fds(struct ibvd_frame *frame)
{
	while (frame->nfds)
		ibvd_frame_close_fd(frame->fds[--frame->nfds]);
}

int ibvd_frame_send_error(int sock, uint32_t req_id, int errnum,
			  const char *message, int extra_flags)
{
	Ibvd__Error err = IBVD__ERROR__INIT;

	err.errnum = errnum;
	err.message = (char *)(message ? message : "");
	return ibvd_frame_send(sock, IBVD_MSG_ERROR, req_id, &err.base,
			       NULL, 0, extra_flags);
}

/* A blocking recv that peeks: restarted under SA_RESTART, as poll is not. */
static int wait_socket(int fd)
{
	char byte;

	if (recv(fd, &byte, 1, MSG_PEEK) < 0)
		return -errno;
	return 0;
}

int ibvd_wait_readable(int fd, bool socket)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int flags = fcntl(fd, F_GETFL);
	int n;

	if (flags < 0)
		return -errno;
	if (socket && !(flags & O_NONBLOCK))
		return wait_socket(fd);
	n = poll(&pfd, 1, (flags & O_NONBLOCK) ? 0 : -1);
	if (n < 0)
		return -errno;
	return n == 0 ? -EAGAIN : 0;
}

const char *ibvd_msg_type_name(uint16_t type)
{
	switch (type & ~IBVD_REPLY) {
	case IBVD_MSG_ERROR:		return "ERROR";
	case IBVD_MSG_LIST_DEVICES:	return "LIST_DEVICES";
	case IBVD_MSG_OPEN_DEVICE:	return "OPEN_DEVICE";
	case IBVD_MSG_IMPORT_DEVICE:	return "IMPORT_DEVICE";
	case IBVD_MSG_QUERY_DEVICE:	return "QUERY_DEVICE";
	case IBVD_MSG_QUERY_PORT:	return "QUERY_PORT";
	case IBVD_MSG_QUERY_GID_TABLE:	return "QUERY_GID_TABLE";
	case IBVD_MSG_QUERY_PKEY:	return "QUERY_PKEY";
	case IBVD_MSG_ATTACH_MEMORY:	return "ATTACH_MEMORY";
	case IBVD_MSG_ALLOC_PD:		return "ALLOC_PD";
	case IBVD_MSG_DEALLOC_PD:	return "DEALLOC_PD";
	case IBVD_MSG_IMPORT_PD:	return "IMPORT_PD";
	case IBVD_MSG_REG_MR:		return "REG_MR";
	case IBVD_MSG_REREG_MR:		return "REREG_MR";
	case IBVD_MSG_DEREG_MR:		return "DEREG_MR";
	case IBVD_MSG_REG_MR_SHARED:	return "REG_MR_SHARED";
	case IBVD_MSG_REREG_MR_SHARED:	return "REREG_MR_SHARED";
	case IBVD_MSG_IMPORT_MR:	return "IMPORT_MR";
	case IBVD_MSG_CREATE_COMP_CHANNEL: return "CREATE_COMP_CHANNEL";
	case IBVD_MSG_DESTROY_COMP_CHANNEL: return "DESTROY_COMP_CHANNEL";
	case IBVD_MSG_CHANNEL_POKE:	return "CHANNEL_POKE";
	case IBVD_MSG_CREATE_CQ:	return "CREATE_CQ";
	case IBVD_MSG_RESIZE_CQ:	return "RESIZE_CQ";
	case IBVD_MSG_DESTROY_CQ:	return "DESTROY_CQ";
	case IBVD_MSG_CREATE_QP:	return "CREATE_QP";
	case IBVD_MSG_MODIFY_QP:	return "MODIFY_QP";
	case IBVD_MSG_QUERY_QP:		return "QUERY_QP";
	case IBVD_MSG_DESTROY_QP:	return "DESTROY_QP";
	case IBVD_MSG_QP_DIRECT:	return "QP_DIRECT";
	case IBVD_MSG_QP_DIRECT_UD:	return "QP_DIRECT_UD";
	case IBVD_MSG_QP_DIRECT_LEAVE:	return "QP_DIRECT_LEAVE";
	case IBVD_MSG_QP_STAGING:	return "QP_STAGING";
	case IBVD_MSG_QP_REMOTE_MR:	return "QP_REMOTE_MR";
	case IBVD_MSG_CREATE_SRQ:	return "CREATE_SRQ";
	case IBVD_MSG_MODIFY_SRQ:	return "MODIFY_SRQ";
	case IBVD_MSG_QUERY_SRQ:	return "QUERY_SRQ";
	case IBVD_MSG_DESTROY_SRQ:	return "DESTROY_SRQ";
	case IBVD_MSG_CREATE_AH:	return "CREATE_AH";
	case IBVD_MSG_DESTROY_AH:	return "DESTROY_AH";
	case IBVD_MSG_ALLOC_DM:		return "ALLOC_DM";
	case IBVD_MSG_FREE_DM:		return "FREE_DM";
	case IBVD_MSG_IMPORT_DM:	return "IMPORT_DM";
	case IBVD_MSG_ATTACH_MCAST:	return "ATTACH_MCAST";
	case IBVD_MSG_DETACH_MCAST:	return "DETACH_MCAST";
	case IBVD_MSG_CM_OPEN:		return "CM_OPEN";
	case IBVD_MSG_CM_CREATE_ID:	return "CM_CREATE_ID";
	case IBVD_MSG_CM_DESTROY_ID:	return "CM_DESTROY_ID";
	case IBVD_MSG_CM_BIND_ADDR:	return "CM_BIND_ADDR";
	case IBVD_MSG_CM_RESOLVE_ADDR:	return "CM_RESOLVE_ADDR";
	case IBVD_MSG_CM_RESOLVE_ROUTE:	return "CM_RESOLVE_ROUTE";
	case IBVD_MSG_CM_LISTEN:	return "CM_LISTEN";
	case IBVD_MSG_CM_CONNECT:	return "CM_CONNECT";
	case IBVD_MSG_CM_ACCEPT:	return "CM_ACCEPT";
	case IBVD_MSG_CM_REJECT:	return "CM_REJECT";
	case IBVD_MSG_CM_ESTABLISH:	return "CM_ESTABLISH";
	case IBVD_MSG_CM_DISCONNECT:	return "CM_DISCONNECT";
	case IBVD_MSG_CM_INIT_QP_ATTR:	return "CM_INIT_QP_ATTR";
	case IBVD_MSG_CM_QUERY:		return "CM_QUERY";
	case IBVD_MSG_CM_SET_OPTION:	return "CM_SET_OPTION";
	case IBVD_MSG_CM_MIGRATE_ID:	return "CM_MIGRATE_ID";
	case IBVD_MSG_CM_JOIN_MCAST:	return "CM_JOIN_MCAST";
	case IBVD_MSG_CM_LEAVE_MCAST:	return "CM_LEAVE_MCAST";
	case IBVD_MSG_CM_NOTIFY:	return "CM_NOTIFY";
	case IBVD_MSG_CM_EVENT:		return "CM_EVENT";
	case IBVD_MSG_ASYNC_EVENT:	return "ASYNC_EVENT";
	case IBVD_MSG_COMP_EVENT:	return "COMP_EVENT";
	case IBVD_MSG_ADMIN:		return "ADMIN";
	}
	return "UNKNOWN";
}
