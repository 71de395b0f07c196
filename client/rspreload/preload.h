/*
 * What the preload library's files share: preload.c's fd marks and
 * rpoll, epoll.c's bookkeeping of the rsockets in epoll instances.
 */
#ifndef IBVD_PRELOAD_H
#define IBVD_PRELOAD_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define PRELOAD_MAX_FD	65536	/* rsocket fds above are given back */
#define EXPORT		__attribute__((visibility("default")))

/* ---- preload.c ----------------------------------------------------------- */

/* Is fd one of the program's rsockets (and not our libraries' own call)? */
bool preload_is_rsocket(int fd);
/* rpoll, run as our libraries' call: its own poll() goes to the C library. */
int preload_rpoll(struct pollfd *fds, nfds_t n, int timeout);
/* The C library's fdopen(3), for an fd that is not an rsocket. */
FILE *preload_real_fdopen(int fd, const char *mode);

/* ---- epoll.c ------------------------------------------------------------- */

/* The program read from (EPOLLIN) or wrote to (EPOLLOUT) rsocket fd. */
void ep_rs_io(int fd, uint32_t dir);
/* Rsocket fd goes: out of every epoll instance it is in. */
void ep_rs_closing(int fd);
/* fd (any) goes: if an epoll instance, its rsockets' bookkeeping too. */
void ep_fd_closing(int fd);

#endif /* IBVD_PRELOAD_H */
