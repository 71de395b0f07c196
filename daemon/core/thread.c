/*
 * Starting the daemon's own threads (thread.h).
 */
#include <config.h>

#include <signal.h>

#include "thread.h"

int ibvd_thread_spawn(pthread_t *thread, const pthread_attr_t *attr,
		      void *(*fn)(void *), void *arg, const char *name)
{
	sigset_t all, old;
	int ret;

	/* the new thread inherits the mask: all blocked from its start */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = -pthread_create(thread, attr, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret == 0 && name)
		pthread_setname_np(*thread, name);
	return ret;
}
