/*
 * The wake-up pairs' writing ends this process holds (common/transit.h,
 * "Blocking"), one fd per pair however many QPs send to it: every QP's
 * rings come with its peers' ends, and a process with many QPs towards
 * one peer would otherwise spend two descriptors on each of them.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/stat.h>

#include "ibvd_verbs.h"

struct poke_ref {
	dev_t dev;
	ino_t ino;
	int fd;
	unsigned int refs;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct poke_ref *refs;
static size_t nrefs, cap;

static struct poke_ref *find(dev_t dev, ino_t ino)
{
	size_t i;

	for (i = 0; i < nrefs; i++)
		if (refs[i].dev == dev && refs[i].ino == ino)
			return &refs[i];
	return NULL;
}

static struct poke_ref *add(dev_t dev, ino_t ino, int fd)
{
	if (nrefs == cap) {
		size_t n = cap ? 2 * cap : 16;
		struct poke_ref *grown = realloc(refs, n * sizeof(*refs));

		if (!grown)
			return NULL;
		refs = grown;
		cap = n;
	}
	refs[nrefs] = (struct poke_ref){ dev, ino, fd, 0 };
	return &refs[nrefs++];
}

int ibvc_poke_hold(int fd)
{
	struct poke_ref *r;
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0)
		return fd;	/* kept as it is: released by a close */
	pthread_mutex_lock(&lock);
	r = find(st.st_dev, st.st_ino);
	if (r) {
		close(fd);
	} else if (!(r = add(st.st_dev, st.st_ino, fd))) {
		pthread_mutex_unlock(&lock);
		return fd;
	}
	r->refs++;
	fd = r->fd;
	pthread_mutex_unlock(&lock);
	return fd;
}

void ibvc_poke_release(int fd)
{
	size_t i;

	if (fd < 0)
		return;
	pthread_mutex_lock(&lock);
	for (i = 0; i < nrefs && refs[i].fd != fd; i++)
		;
	if (i == nrefs) {
		close(fd);
	} else if (--refs[i].refs == 0) {
		close(fd);
		refs[i] = refs[--nrefs];
	}
	pthread_mutex_unlock(&lock);
}
