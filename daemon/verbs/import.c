/*
 * Sharing a context between processes (ibv_import_device(3),
 * ibv_import_pd(3), ibv_import_mr(3)).
 *
 * In rdma-core a context's cmd_fd is the kernel's handle of it: a process
 * given that fd (by fork, or over SCM_RIGHTS) may import the context and
 * then use every object in it by handle.  Here the cmd_fd is the context's
 * connection to us.  Two processes cannot share one connection (each would
 * read the other's replies), so IMPORT_DEVICE comes on it carrying the
 * importer's end of a fresh socket pair, and that socket becomes a second
 * connection of the same context: a member (context.c), with its own
 * async socket and its own attached memory.  Nothing is sent back on the
 * connection the request came on; its owner may be in a call of its own.
 *
 * Holding the fd is the permission, as with the kernel's: a process that
 * was given a context's connection could do anything on it already.  The
 * importer is a session of its own uid (its connection counts against its
 * "session" limit); the objects stay the context's, charged to the account
 * that opened it.
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "context.h"
#include "frame.h"
#include "ibverbsd.pb-c.h"
#include "log.h"
#include "server/call.h"
#include "server/session.h"
#include "tenant/tenant.h"
#include "verbs.h"

/*
 * Is fd a connected Unix SEQPACKET socket, the end of a pair whose other
 * end the importer holds?  0 with its creator's credentials, or -EINVAL.
 * Not a socket connected to a listener (its peer has the listener's
 * name): its credentials would be the listener's, ours when it is our
 * own socket, and our session at its other end would take the reply.
 */
static int import_socket_check(int fd, struct ucred *cred)
{
	struct sockaddr_un peer;
	socklen_t len = sizeof(int);
	int domain = 0, type = 0;

	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0 ||
	    domain != AF_UNIX)
		return -EINVAL;
	len = sizeof(int);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 ||
	    type != SOCK_SEQPACKET)
		return -EINVAL;
	len = sizeof(*cred);
	/* an unconnected socket has no peer: uid -1 */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cred, &len) < 0 ||
	    cred->uid == (uid_t)-1 || cred->pid == getpid())
		return -EINVAL;
	/* a socketpair's ends have no name */
	len = sizeof(peer);
	if (getpeername(fd, (struct sockaddr *)&peer, &len) < 0 ||
	    len > sizeof(sa_family_t))
		return -EINVAL;
	return 0;
}

/* An Error for the importer, on its own socket. */
static void import_error(int fd, const struct ibvd_call *call, int err,
			 const char *why)
{
	Ibvd__Error msg = IBVD__ERROR__INIT;

	msg.errnum = (uint32_t)-err;
	msg.message = (char *)why;
	(void)ibvd_frame_send(fd, IBVD_MSG_ERROR, call->req_id, &msg.base,
			      NULL, 0, MSG_DONTWAIT);
}

/* Make the importer's socket a member of ctx and answer it there. */
static int import_join(struct ibvd_call *call, struct ibvd_context *ctx,
		       int fd, const struct ucred *cred)
{
	Ibvd__OpenDeviceReply reply = IBVD__OPEN_DEVICE_REPLY__INIT;
	Ibvd__DeviceInfo info;
	struct ibvd_session *s;
	int fds[IBVD_OPEN_NFDS], ret;

	/*
	 * Takes fd; on -EAGAIN the importer was told why.  Privileged only if
	 * both are: the pair's creator, and this request, sent by the
	 * importer on the context's connection (a root-made pair handed to
	 * another uid lends it nothing, nor does a connection handed to one).
	 */
	ret = ibvd_session_new(call->session->daemon, fd, cred,
			       cred->uid == 0 && ibvd_call_privileged(call), &s);
	if (ret < 0)
		return ret;
	ret = ibvd_context_join(ctx, s, fds);
	if (ret < 0) {
		import_error(s->fd, call, ret, ret == -EMFILE ?
			     "too many processes share this context" :
			     strerror(-ret));
		return ret;
	}
	ibvd_context_reply_info(ctx, &reply, &info);
	/* A failed send closes s, which leaves the context again. */
	ret = ibvd_session_send(s, IBVD_MSG_IMPORT_DEVICE | IBVD_REPLY,
				call->req_id, &reply.base, fds, IBVD_OPEN_NFDS);
	close(fds[IBVD_OPEN_FD_ASYNC]);
	/*
	 * The importer's uid's log budget: an import costs a client one round
	 * trip, and a loop of them wrote thousands of lines a second.
	 */
	if (ret == 0)
		ibvd_tenant_log(s->tenant, IBVD_LOG_INFO,
				"client %llu (pid %d uid %u) shares context %u of client %llu",
				(unsigned long long)s->id, (int)cred->pid,
				(unsigned int)cred->uid, ctx->id,
				(unsigned long long)call->session->id);
	return ret;
}

int ibvd_req_import_device(struct ibvd_call *call)
{
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	int fd = call->frame->fds[0];
	struct ucred cred;
	int ret;

	/* Whatever happens, this connection's owner hears nothing of it. */
	call->replied = 1;
	ret = import_socket_check(fd, &cred);
	if (ret < 0) {
		/* Not a socket pair's end: nobody to tell but the log. */
		return ibvd_call_error(call, ret, "IMPORT_DEVICE needs a connected "
				       "Unix SEQPACKET socket");
	}
	return import_join(call, ctx, ibvd_call_take_fd(call, 0), &cred);
}

int ibvd_req_import_pd(struct ibvd_call *call)
{
	const Ibvd__Handle *req = (const Ibvd__Handle *)call->msg;
	struct ibvd_context *ctx = ibvd_call_ctx(call);

	if (!ibvd_handle_lookup(&ctx->handles, req->handle, IBVD_OBJ_PD))
		return ibvd_call_error(call, -EINVAL, "no PD %#x", req->handle);
	return 0;
}

int ibvd_req_import_mr(struct ibvd_call *call)
{
	const Ibvd__ImportMr *req = (const Ibvd__ImportMr *)call->msg;
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	Ibvd__ImportMrReply reply = IBVD__IMPORT_MR_REPLY__INIT;
	struct ibvd_mr *mr;

	mr = ibvd_handle_lookup(&ctx->handles, req->handle, IBVD_OBJ_MR);
	if (!mr)
		return ibvd_call_error(call, -EINVAL, "no MR %#x", req->handle);
	if (mr->pd->handle != req->pd)
		return ibvd_call_error(call, -EINVAL, "MR %#x is not on PD %#x",
				       req->handle, req->pd);
	reply.lkey = mr->lkey;
	reply.rkey = mr->rkey;
	reply.length = mr->length;
	reply.iova = mr->iova;
	reply.access = mr->access;
	return ibvd_call_reply(call, &reply.base, NULL, 0);
}
