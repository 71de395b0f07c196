# The implemented verbs: devices, contexts, queries, async events, and the
# verbs objects with their shared-memory data path.
LIBIBVERBS_IMPL_SOURCES += \
	client/libibverbs/ibvd_verbs.h \
	client/libibverbs/device.c \
	client/libibverbs/context.c \
	client/libibverbs/query.c \
	client/libibverbs/async.c \
	client/libibverbs/handle.c \
	client/libibverbs/queue.c \
	client/libibverbs/pd.c \
	client/libibverbs/mr.c \
	client/libibverbs/mrtab.c \
	client/libibverbs/direct_internal.h \
	client/libibverbs/direct_map.c \
	client/libibverbs/direct_send.c \
	client/libibverbs/direct_cqe.c \
	client/libibverbs/direct_recv.c \
	client/libibverbs/direct_events.c \
	client/libibverbs/direct_poll.c \
	client/libibverbs/direct_rdma.c \
	client/libibverbs/guard.c \
	client/libibverbs/backing.c \
	client/libibverbs/mw.c \
	client/libibverbs/channel.c \
	client/libibverbs/poke.c \
	client/libibverbs/cq.c \
	client/libibverbs/clock.c \
	client/libibverbs/cq_ex.c \
	client/libibverbs/dm.c \
	client/libibverbs/domain.c \
	client/libibverbs/qp.c \
	client/libibverbs/qp_bundle.c \
	client/libibverbs/qp_ex.c \
	client/libibverbs/srq.c \
	client/libibverbs/xrcd.c \
	client/libibverbs/ah.c \
	client/libibverbs/mcast.c \
	client/libibverbs/post.c \
	client/libibverbs/staging.c \
	client/libibverbs/poll.c
