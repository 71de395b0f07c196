/*
 * Device contexts: ibv_open_device() opens one daemon connection per
 * context (DESIGN.md §3.3); the daemon answers OPEN_DEVICE with four fds:
 * the async event socket, the context page (doorbells, ring.h), the
 * eventfd that wakes a sleeping engine and the ring arena.
 * ibv_import_device() gets a connection of its own to an existing context
 * and the same four fds (PROTOCOL.md, IMPORT_DEVICE).
 *
 * The context is laid out as rdma-core does it (abi.md §2.3): our private
 * struct starts with struct verbs_context, whose last member is the public
 * struct ibv_context we hand out, so the header inlines find the extended
 * ops immediately before it.
 */
#include "config.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "ibverbsd.pb-c.h"
#include "ibvd_verbs.h"

/* OPEN_DEVICE's reply fds, in this order. */
enum {
	OPEN_FD_ASYNC,
	OPEN_FD_CTX_PAGE,
	OPEN_FD_KICK,
	OPEN_FD_RINGS,
	OPEN_NFDS,
};

/* Debian's binaries hard-code these offsets and sizes (abi.md §0.6). */
_Static_assert(sizeof(struct ibv_context) == 328, "ibv_context size");
_Static_assert(offsetof(struct verbs_context, context) == 320,
	       "verbs_context.context offset");
_Static_assert(sizeof(struct verbs_context) == 648, "verbs_context size");
_Static_assert(sizeof(struct ibv_device) == 664, "ibv_device size");
_Static_assert(offsetof(struct ibvc_context, vctx) == 0,
	       "verbs_context must start our context");
_Static_assert(offsetof(struct ibvc_device, device) == 0,
	       "ibv_device must start our device");

/*
 * Every op a context offers.  Hot-path ops are called by header inlines
 * without a NULL check, so each is set; so is close_xrcd (ibv_close_xrcd
 * calls it unchecked).
 * Extended ops left NULL make their inline return EOPNOTSUPP.
 */
static const struct verbs_context context_template = {
	.query_port = ibvc_query_port_op,
	.query_device_ex = ibvc_query_device_ex_op,
	.create_cq_ex = ibvc_create_cq_ex_op,
	.create_qp_ex = ibvc_create_qp_ex_op,
	.create_srq_ex = ibvc_create_srq_ex_op,
	.advise_mr = ibvc_advise_mr_op,
	.query_rt_values = ibvc_query_rt_values_op,
	.alloc_td = ibvc_alloc_td_op,
	.dealloc_td = ibvc_dealloc_td_op,
	.alloc_parent_domain = ibvc_alloc_parent_domain_op,
	.alloc_dm = ibvc_alloc_dm_op,
	.free_dm = ibvc_free_dm_op,
	.reg_dm_mr = ibvc_reg_dm_mr_op,
	.open_xrcd = ibvc_open_xrcd_op,
	.close_xrcd = ibvc_close_xrcd_op,
	.get_srq_num = ibvc_get_srq_num_op,
	.open_qp = ibvc_open_qp_op,
	.sz = sizeof(struct verbs_context),
	.context = {
		.ops = {
			._compat_query_device = ibv_query_device,
			._compat_query_port = ibv_query_port,
			.alloc_mw = ibvc_alloc_mw_op,
			.bind_mw = ibvc_bind_mw_op,
			.dealloc_mw = ibvc_dealloc_mw_op,
			.poll_cq = ibvc_poll_cq_op,
			.req_notify_cq = ibvc_req_notify_cq_op,
			.post_srq_recv = ibvc_post_srq_recv_op,
			.post_send = ibvc_post_send_op,
			.post_recv = ibvc_post_recv_op,
		},
		.cmd_fd = -1,
		.async_fd = -1,
		.abi_compat = __VERBS_ABI_IS_EXTENDED,
	},
};

static struct ibvc_context *context_new(struct ibvc_device *dev)
{
	struct ibvc_context *ictx = calloc(1, sizeof(*ictx));

	if (!ictx)
		return NULL;
	ictx->vctx = context_template;
	ictx->vctx.context.device = &dev->device;
	ictx->conn.sock = -1;
	ictx->kick_fd = -1;
	ictx->imported_fd = -1;
	pthread_mutex_init(&ictx->vctx.context.mutex, NULL);
	pthread_mutex_init(&ictx->async_lock, NULL);
	pthread_mutex_init(&ictx->obj_lock, NULL);
	pthread_mutex_init(&ictx->mrs.lock, NULL);
	pthread_mutex_init(&ictx->gids.lock, NULL);
	LIST_INIT(&ictx->channels);
	ictx->dev = dev;
	ibvc_device_get(dev);
	return ictx;
}

pid_t ibvc_pid;

static void forked_child(void)
{
	ibvc_pid = getpid();
}

/* glibc drops the fork handler when the library is unloaded. */
__attribute__((constructor)) static void pid_init(void)
{
	ibvc_pid = getpid();
	pthread_atfork(NULL, NULL, forked_child);
}

static void context_free(struct ibvc_context *ictx)
{
	bool mapped = !ibvc_forked(ictx);

	ibvd_conn_close(&ictx->conn);
	if (ictx->vctx.context.async_fd >= 0)
		close(ictx->vctx.context.async_fd);
	if (ictx->ctx_page && mapped)
		munmap(ictx->ctx_page, IBVD_CTX_PAGE_SIZE);
	if (ictx->kick_fd >= 0)
		close(ictx->kick_fd);
	if (ictx->imported_fd >= 0)
		close(ictx->imported_fd);
	ibvc_obj_free_all(ictx);
	/* after the objects: nothing polls or posts into the arena now */
	if (mapped)
		ibvc_unmap(&ictx->rings);
	pthread_mutex_destroy(&ictx->obj_lock);
	ibvc_mrtab_fini(ictx);
	pthread_mutex_destroy(&ictx->async_lock);
	pthread_mutex_destroy(&ictx->gids.lock);
	free(ictx->gids.entries);
	pthread_mutex_destroy(&ictx->vctx.context.mutex);
	ibvc_device_put(ictx->dev);
	free(ictx);
}

/* errno of a failed open: a vanished daemon means the device is gone. */
static int open_errno(int err)
{
	return err == -ENOENT || err == -ECONNREFUSED ? -ENODEV : err;
}

/* Apps size event queues by it; perftest -e requires at least one. */
static int comp_vectors(uint32_t from_daemon)
{
	if (from_daemon == 0)
		return 1;
	return from_daemon > INT_MAX ? INT_MAX : (int)from_daemon;
}

/*
 * Map the context page: the engine's half read-only (nothing the client
 * writes there can mislead us about the engine sleeping), our half, the
 * doorbells, read-write.
 */
static int map_ctx_page(struct ibvc_context *ictx, int fd)
{
	struct ibvc_map map;
	int ret;

	ret = ibvc_map_fd(fd, IBVD_CTX_PAGE_SIZE, &map);
	if (ret < 0)
		return ret;
	ret = ibvc_map_writable(&map, fd, IBVD_PAGE_SIZE, IBVD_PAGE_SIZE);
	if (ret < 0) {
		ibvc_unmap(&map);
		return ret;
	}
	ictx->ctx_page = map.addr;
	ictx->db_engine = map.addr;
	ictx->db_client = (struct ibvd_ctx_client *)
		((uint8_t *)map.addr + IBVD_PAGE_SIZE);
	return 0;
}

/* Take the reply's fds; close every one that is not kept. */
static int take_open_fds(struct ibvc_context *ictx, int *fds, unsigned int nfds)
{
	unsigned int i;
	int ret = -EPROTO;

	if (nfds != OPEN_NFDS)
		goto out;
	ret = map_ctx_page(ictx, fds[OPEN_FD_CTX_PAGE]);
	if (ret < 0)
		goto out;
	ret = ibvc_map_rings(ictx, fds[OPEN_FD_RINGS]);
	if (ret < 0)
		goto out;
	ictx->vctx.context.async_fd = fds[OPEN_FD_ASYNC];
	ictx->kick_fd = fds[OPEN_FD_KICK];
	fds[OPEN_FD_ASYNC] = fds[OPEN_FD_KICK] = -1;
out:
	for (i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return ret;
}

/* Take an OPEN_DEVICE or IMPORT_DEVICE reply: its fds and what it says. */
static int take_open_reply(struct ibvc_context *ictx,
			   const Ibvd__OpenDeviceReply *reply, int *fds,
			   unsigned int nfds)
{
	struct ibv_context *ctx = &ictx->vctx.context;
	int ret;

	ret = take_open_fds(ictx, fds, nfds);
	if (ret < 0)
		return ret;
	ctx->cmd_fd = ictx->conn.sock;
	ctx->num_comp_vectors = comp_vectors(reply->num_comp_vectors);
	return 0;
}

/* Connect, send OPEN_DEVICE and take the fds of the reply. */
static int open_on_daemon(struct ibvc_context *ictx)
{
	Ibvd__OpenDevice req = IBVD__OPEN_DEVICE__INIT;
	Ibvd__OpenDeviceReply *reply = NULL;
	int fds[OPEN_NFDS];
	unsigned int nfds = OPEN_NFDS;
	int ret;

	ret = ibvd_conn_open(&ictx->conn, ictx->dev->socket_path);
	if (ret < 0)
		return open_errno(ret);
	req.name = ictx->dev->device.name;
	ret = ibvd_conn_call(&ictx->conn, IBVD_MSG_OPEN_DEVICE, &req.base,
			     &ibvd__open_device_reply__descriptor,
			     (ProtobufCMessage **)&reply, fds, &nfds);
	if (ret < 0)
		return ret;
	ret = take_open_reply(ictx, reply, fds, nfds);
	ibvd__open_device_reply__free_unpacked(reply, NULL);
	return ret;
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct ibvc_context *ictx;
	int ret;

	if (!device)
		return ibvc_null_ret(-EINVAL);
	ictx = context_new(to_ibvc_device(device));
	if (!ictx)
		return ibvc_null_ret(-ENOMEM);
	ret = open_on_daemon(ictx);
	if (ret < 0) {
		context_free(ictx);
		return ibvc_null_ret(ret);
	}
	return &ictx->vctx.context;
}

/* ---- ibv_import_device ------------------------------------------------ */

/*
 * The daemon socket cmd_fd is connected to, for the device struct (later
 * opens of it); a context that was itself imported has an unnamed peer,
 * and then it is the one this process would use anyway.
 */
static void daemon_path_of(int cmd_fd, char *path, size_t len)
{
	struct sockaddr_un sun;
	socklen_t slen = sizeof(sun);

	memset(&sun, 0, sizeof(sun));
	if (getpeername(cmd_fd, (struct sockaddr *)&sun, &slen) == 0 &&
	    sun.sun_family == AF_UNIX && slen > offsetof(struct sockaddr_un, sun_path) &&
	    sun.sun_path[0])
		snprintf(path, len, "%.*s", (int)sizeof(sun.sun_path), sun.sun_path);
	else
		snprintf(path, len, "%s", ibvd_socket_path());
}

/*
 * Ask, on cmd_fd, for a connection of our own to its context: IMPORT_DEVICE
 * carries one end of a new socket pair and the reply comes on the other
 * (conn).  Our copy of the end we send is closed before waiting, so a
 * daemon that drops it ends the wait at once.
 */
static int import_request(int cmd_fd, struct ibvd_conn *conn,
			  Ibvd__OpenDeviceReply **reply, int *fds,
			  unsigned int *nfds)
{
	Ibvd__ImportDevice req = IBVD__IMPORT_DEVICE__INIT;
	const uint32_t req_id = 1;
	int sv[2], ret;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	ret = ibvd_conn_adopt(conn, sv[0]);
	if (ret < 0) {
		close(sv[0]);
		close(sv[1]);
		return ret;
	}
	ret = ibvd_frame_send(cmd_fd, IBVD_MSG_IMPORT_DEVICE, req_id, &req.base,
			      &sv[1], 1, MSG_DONTWAIT);
	close(sv[1]);
	if (ret == -ENOTSOCK || ret == -EDESTADDRREQ || ret == -ENOTCONN)
		ret = -EINVAL;
	if (ret == 0)
		ret = ibvd_conn_await(conn, req_id, IBVD_MSG_IMPORT_DEVICE,
				      &ibvd__open_device_reply__descriptor,
				      (ProtobufCMessage **)reply, fds, nfds);
	if (ret < 0)
		ibvd_conn_close(conn);
	return ret;
}

struct ibv_context *ibv_import_device(int cmd_fd)
{
	Ibvd__OpenDeviceReply *reply = NULL;
	struct ibvc_context *ictx = NULL;
	struct ibvc_device *dev;
	struct ibvd_conn conn;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
	int fds[OPEN_NFDS], ret;
	unsigned int nfds = OPEN_NFDS, i;

	if (cmd_fd < 0)
		return ibvc_null_ret(-EBADF);
	/* a process that only imports never listed the devices */
	ibvc_library_init();
	daemon_path_of(cmd_fd, path, sizeof(path));
	ret = import_request(cmd_fd, &conn, &reply, fds, &nfds);
	if (ret < 0)
		return ibvc_null_ret(ret == -EIO ? -EINVAL : ret);
	dev = reply->device ? ibvc_device_for(path, reply->device) : NULL;
	if (dev) {
		ictx = context_new(dev);
		ibvc_device_put(dev);
	}
	if (!ictx) {
		ret = reply->device ? -ENOMEM : -EPROTO;
		for (i = 0; i < nfds; i++)
			close(fds[i]);
		ibvd_conn_close(&conn);
		ibvd__open_device_reply__free_unpacked(reply, NULL);
		return ibvc_null_ret(ret);
	}
	ibvd_conn_move(&ictx->conn, &conn);
	ret = take_open_reply(ictx, reply, fds, nfds);
	ibvd__open_device_reply__free_unpacked(reply, NULL);
	if (ret < 0) {
		context_free(ictx);
		return ibvc_null_ret(ret);
	}
	/* Ours now, as rdma-core's import takes it: closed with the context. */
	ictx->imported_fd = cmd_fd;
	return &ictx->vctx.context;
}

/*
 * Closing the connection makes the daemon destroy everything the context
 * created; nothing needs the daemon's cooperation, so this also works
 * after it died.
 */
bool ibvc_context_enter(struct ibvc_context *ictx)
{
	/* Store (waiters) -> load (closing), mirrored by wake_waiters. */
	__atomic_add_fetch(&ictx->waiters, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&ictx->closing, __ATOMIC_SEQ_CST))
		return true;
	ibvc_context_leave(ictx);
	return false;
}

void ibvc_context_leave(struct ibvc_context *ictx)
{
	__atomic_sub_fetch(&ictx->waiters, 1, __ATOMIC_RELEASE);
}

bool ibvc_context_closing(struct ibvc_context *ictx)
{
	return __atomic_load_n(&ictx->closing, __ATOMIC_ACQUIRE);
}

/*
 * Threads blocked on the context's events (rdma-core's only read their
 * fds, which close makes fail): woken by shutting their sockets, and
 * waited for, since they look at the context once they wake.
 */
void ibvc_wait_none_inside(const unsigned int *count)
{
	const struct timespec pause = { .tv_nsec = 100000 };

	while (__atomic_load_n(count, __ATOMIC_SEQ_CST))
		nanosleep(&pause, NULL);
}

static void wake_waiters(struct ibvc_context *ictx)
{
	__atomic_store_n(&ictx->closing, true, __ATOMIC_SEQ_CST);
	ibvc_channels_orphan(ictx);
	if (ictx->vctx.context.async_fd >= 0)
		shutdown(ictx->vctx.context.async_fd, SHUT_RDWR);
	ibvc_wait_none_inside(&ictx->waiters);
}

int ibv_close_device(struct ibv_context *ctx)
{
	struct ibvc_context *ictx;

	if (!ctx)
		return 0;
	ictx = to_ibvc_context(ctx);
	/* a child's copy: no thread of its waits (its count is the parent's) */
	if (!ibvc_forked(ictx))
		wake_waiters(ictx);
	context_free(ictx);
	return 0;
}

void ibvc_context_mark_dead(struct ibvc_context *ictx)
{
	/*
	 * shutdown() first: a call blocked waiting for a reply wakes up with
	 * EOF (and marks the connection dead itself), so taking the lock
	 * below cannot wait for the full RPC timeout.
	 */
	if (ictx->conn.sock >= 0)
		shutdown(ictx->conn.sock, SHUT_RDWR);
	pthread_mutex_lock(&ictx->conn.lock);
	ictx->conn.dead = 1;
	pthread_mutex_unlock(&ictx->conn.lock);
}
