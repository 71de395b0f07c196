/*
 * The daemon's own threads (engine, closers, the copy watch): they take
 * no signals, which are the control thread's (its loop handles them), and
 * carry a name that ps and top show.
 */
#ifndef IBVD_THREAD_H
#define IBVD_THREAD_H

#include <pthread.h>

/* 0 or a negative errno; name at most 15 characters (NULL: none). */
int ibvd_thread_spawn(pthread_t *thread, const pthread_attr_t *attr,
		      void *(*fn)(void *), void *arg, const char *name);

#endif /* IBVD_THREAD_H */
