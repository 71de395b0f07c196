/*
 * QP1's mailbox (gsi.h): a bounded FIFO under a mutex, and an eventfd
 * that counts what waits, so that the control thread's event loop wakes
 * for arrivals the way it wakes for client requests.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/queue.h>

#include "core/device.h"
#include "gsi.h"

struct gsi_entry {
	struct ibvd_mad mad;
	STAILQ_ENTRY(gsi_entry) link;
};

static struct {
	pthread_mutex_t lock;
	STAILQ_HEAD(, gsi_entry) queue;
	unsigned int count;
	uint64_t dropped;
	int fd;				/* -1 until made */
} inbox = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.queue = STAILQ_HEAD_INITIALIZER(inbox.queue),
	.fd = -1,
};

int ibvd_gsi_fd(void)
{
	int fd;

	pthread_mutex_lock(&inbox.lock);
	if (inbox.fd < 0)
		inbox.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	fd = inbox.fd < 0 ? -errno : inbox.fd;
	pthread_mutex_unlock(&inbox.lock);
	return fd;
}

/* Has the sender of mad as many MADs waiting as it may?  Inbox locked. */
static bool source_full(const struct ibvd_mad *mad)
{
	const struct gsi_entry *e;
	unsigned int n = 0;

	STAILQ_FOREACH(e, &inbox.queue, link)
		if (!memcmp(e->mad.remote_gid, mad->remote_gid, 16) &&
		    ++n >= IBVD_GSI_SOURCE_MAX)
			return true;
	return false;
}

void ibvd_gsi_deliver(const struct ibvd_mad *mad)
{
	uint64_t one = 1;
	struct gsi_entry *e;

	pthread_mutex_lock(&inbox.lock);
	/* Nobody listens before the CM has asked for the fd. */
	if (inbox.fd < 0 || inbox.count >= IBVD_GSI_INBOX_MAX ||
	    source_full(mad) || !(e = malloc(sizeof(*e)))) {
		inbox.dropped++;
		pthread_mutex_unlock(&inbox.lock);
		return;
	}
	e->mad = *mad;
	STAILQ_INSERT_TAIL(&inbox.queue, e, link);
	inbox.count++;
	/* An eventfd write fails only at 2^64 - 1 unread: never here. */
	if (write(inbox.fd, &one, sizeof(one)) != sizeof(one))
		abort();
	pthread_mutex_unlock(&inbox.lock);
}

bool ibvd_gsi_take(struct ibvd_mad *mad)
{
	struct gsi_entry *e;
	uint64_t n;

	pthread_mutex_lock(&inbox.lock);
	e = STAILQ_FIRST(&inbox.queue);
	if (e) {
		STAILQ_REMOVE_HEAD(&inbox.queue, link);
		inbox.count--;
	} else if (inbox.fd >= 0) {
		/* Drained: clear the count (EAGAIN if it already was). */
		if (read(inbox.fd, &n, sizeof(n)) < 0)
			n = 0;
	}
	pthread_mutex_unlock(&inbox.lock);
	if (!e)
		return false;
	*mad = e->mad;
	free(e);
	return true;
}

void ibvd_gsi_purge(const struct ibvd_device *dev)
{
	struct gsi_entry *e, *next;

	pthread_mutex_lock(&inbox.lock);
	for (e = STAILQ_FIRST(&inbox.queue); e; e = next) {
		next = STAILQ_NEXT(e, link);
		if (e->mad.dev != dev)
			continue;
		STAILQ_REMOVE(&inbox.queue, e, gsi_entry, link);
		inbox.count--;
		free(e);
	}
	pthread_mutex_unlock(&inbox.lock);
}

uint64_t ibvd_gsi_dropped(void)
{
	uint64_t n;

	pthread_mutex_lock(&inbox.lock);
	n = inbox.dropped;
	pthread_mutex_unlock(&inbox.lock);
	return n;
}

int ibvd_gsi_send(const struct ibvd_mad *mad)
{
	const struct ibvd_transport *t = mad->dev->transport;

	if (!t || !t->send_mad)
		return -EOPNOTSUPP;
	return t->send_mad(mad);
}
