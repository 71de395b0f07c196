# The implemented verbs: devices, contexts, queries, async events.
LIBIBVERBS_IMPL_SOURCES += \
	client/libibverbs/ibvd_verbs.h \
	client/libibverbs/device.c \
	client/libibverbs/context.c \
	client/libibverbs/dummy_ops.c \
	client/libibverbs/query.c \
	client/libibverbs/async.c
