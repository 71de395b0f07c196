/*
 * Private state of our libibverbs: the structs that wrap the public ones
 * (abi.md §2.3), and what the implementation files share.
 *
 * Error convention: internal functions return 0 or a negative errno; the
 * exported verbs convert once, at the public boundary, to whatever their
 * man page promises (positive errno, -1 + errno, or NULL + errno).
 */
#ifndef IBVD_VERBS_H
#define IBVD_VERBS_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#include <infiniband/verbs.h>

#include "conn.h"
#include "util.h"

/* ---- devices (device.c) ------------------------------------------------ */

/*
 * One device of one daemon.  The public part is what ibv_get_device_list()
 * hands out; everything after it is ours.
 */
struct ibvd_device {
	struct ibv_device device;	/* must be first: apps hold &device */
	char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	uint64_t node_guid;		/* host byte order */
	uint32_t index;			/* the daemon's device index */
	uint32_t phys_port_cnt;
	/*
	 * One reference per device list and per open context that holds the
	 * device, plus one from the cache while the daemon still lists it.
	 * Protected by the device cache lock.
	 */
	unsigned int refcount;
	bool cached;
	bool seen;			/* listed by the current listing */
	struct ibvd_device *next;	/* in the cache */
};

static inline struct ibvd_device *to_ibvd_device(struct ibv_device *device)
{
	return container_of(device, struct ibvd_device, device);
}

void ibvd_device_get(struct ibvd_device *dev);
void ibvd_device_put(struct ibvd_device *dev);

/* ---- contexts (context.c) ---------------------------------------------- */

/*
 * An open device context.  verbs_context must come first and ends with the
 * public ibv_context, so that the header inlines find the extended ops
 * right before the pointer we return (abi.md §2.2).
 */
struct ibvd_context {
	struct verbs_context vctx;	/* must be first; ends with .context */
	struct ibvd_conn conn;		/* the RPC connection; cmd_fd is its socket */
	struct ibvd_device *dev;	/* holds a reference */

	/* async events (async.c) */
	pthread_mutex_t async_lock;
	bool fatal_delivered;		/* IBV_EVENT_DEVICE_FATAL went out */
};

static inline struct ibvd_context *to_ibvd_context(struct ibv_context *ctx)
{
	return container_of(ctx, struct ibvd_context, vctx.context);
}

/* The daemon went away: make every later RPC of ctx fail fast with EIO. */
void ibvd_context_mark_dead(struct ibvd_context *ictx);

/* ---- queries (query.c) ------------------------------------------------- */

/* verbs_context ops (size-aware). */
int ibvd_query_port_op(struct ibv_context *ctx, uint8_t port_num,
		       struct ibv_port_attr *attr, size_t attr_len);
int ibvd_query_device_ex_op(struct ibv_context *ctx,
			    const struct ibv_query_device_ex_input *input,
			    struct ibv_device_attr_ex *attr, size_t attr_size);

/* ---- operations not implemented yet (dummy_ops.c) ---------------------- */

int ibvd_post_send_unsupported(struct ibv_qp *qp, struct ibv_send_wr *wr,
			       struct ibv_send_wr **bad_wr);
int ibvd_post_recv_unsupported(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			       struct ibv_recv_wr **bad_wr);
int ibvd_post_srq_recv_unsupported(struct ibv_srq *srq,
				   struct ibv_recv_wr *wr,
				   struct ibv_recv_wr **bad_wr);
int ibvd_poll_cq_unsupported(struct ibv_cq *cq, int num_entries,
			     struct ibv_wc *wc);
int ibvd_req_notify_cq_unsupported(struct ibv_cq *cq, int solicited_only);
struct ibv_mw *ibvd_alloc_mw_unsupported(struct ibv_pd *pd,
					 enum ibv_mw_type type);
int ibvd_bind_mw_unsupported(struct ibv_qp *qp, struct ibv_mw *mw,
			     struct ibv_mw_bind *mw_bind);
int ibvd_dealloc_mw_unsupported(struct ibv_mw *mw);
int ibvd_close_xrcd_unsupported(struct ibv_xrcd *xrcd);

/* ---- public-boundary error conversion ---------------------------------- */

/* For verbs that return a positive errno ("int" verbs, abi.md §5.8). */
static inline int ibvd_errno_ret(int ret)
{
	return ret < 0 ? -ret : ret;
}

/* For verbs that return -1 and set errno. */
static inline int ibvd_minus_one_ret(int ret)
{
	if (ret >= 0)
		return ret;
	errno = -ret;
	return -1;
}

/* For creators: NULL with errno set from a negative errno. */
static inline void *ibvd_null_ret(int ret)
{
	errno = -ret;
	return NULL;
}

#endif /* IBVD_VERBS_H */
