# daemon/engine/: the threads that play the NIC, executing work requests
# against the object model (core/).
DAEMON_SOURCES += \
	daemon/engine/engine.h daemon/engine/internal.h \
	daemon/engine/transport.h \
	daemon/engine/engine.c \
	daemon/engine/attach.c \
	daemon/engine/doorbell.c \
	daemon/engine/timer.c \
	daemon/engine/load.c \
	daemon/engine/memory.c \
	daemon/engine/watch/copy_watch.h daemon/engine/watch/copy_watch.c \
	daemon/engine/watch/copy_describe.c \
	daemon/engine/wqe.c \
	daemon/engine/direct/direct.c \
	daemon/engine/direct/ud_park.c \
	daemon/engine/completion.c \
	daemon/engine/qp_state.c \
	daemon/engine/send.c \
	daemon/engine/chunk.c \
	daemon/engine/recv.c \
	daemon/engine/rdma.c \
	daemon/engine/mw.c \
	daemon/engine/counters.c
