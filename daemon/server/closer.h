/*
 * Closing the fds clients pass us, off the control thread.
 *
 * The last close of a client's file can block: a TCP socket lingering on
 * unsent data, a FUSE file whose server never answers FLUSH (the kernel
 * waits for that answer uninterruptibly).  So closer threads close them,
 * from queues per uid (its files; its connections): a uid whose closes
 * never return stops only its own queue, and its own sessions once that
 * queue is long (ibvd_closer_backed_up), never another uid's.
 *
 * Control thread only, unless said otherwise.
 */
#ifndef IBVD_CLOSER_H
#define IBVD_CLOSER_H

#include <stdbool.h>
#include <sys/types.h>

struct event_base;

/* Start the first closer thread; frame.c's close hook comes here. */
int ibvd_closer_start(struct event_base *base);

/* Let the threads finish what is queued, briefly (shutdown). */
void ibvd_closer_stop(void);

/* fd is uid's file: its close goes to uid's queue. */
void ibvd_closer_own(int fd, uid_t uid);

/* A handler took fd to close it itself: its record goes. */
void ibvd_closer_forget(int fd);

/*
 * While the control thread serves uid's request, fds whose owner was not
 * recorded are taken as uid's (ibvd_closer_serving_none() when done).
 */
void ibvd_closer_serving(uid_t uid);
void ibvd_closer_serving_none(void);

/*
 * Around a session's recvmsg(): fds the kernel hands over and frame.c
 * closes at once (too many, a malformed frame) are the served uid's,
 * whatever an earlier fd of the same number left recorded.
 */
void ibvd_closer_receiving(bool receiving);

/* Close fd without blocking this thread. */
void ibvd_close_client_fd(int fd);

/*
 * Hang up on a client's connection and close it the same way: its queue
 * may still hold frames with fds, which the close releases.
 */
void ibvd_close_client_socket(int fd);

/*
 * Close a connection whose client hung up before it was served: at once
 * if it holds no message (none of its fds queued can block the close),
 * its fds in flight to its uid's queue; else as ibvd_close_client_socket.
 */
void ibvd_close_gone_socket(int fd);

/*
 * For ibvctl daemon status: threads, fds waiting, fds ever queued,
 * closes stuck (500 ms).
 */
struct ibvd_closer_status {
	unsigned int threads;
	unsigned long long waiting;
	unsigned long long queued;
	unsigned int stuck;
};

void ibvd_closer_status(struct ibvd_closer_status *st);

/* uid's queue is long (its closes are stuck): do not read its sessions. */
bool ibvd_closer_backed_up(uid_t uid);

#endif /* IBVD_CLOSER_H */
