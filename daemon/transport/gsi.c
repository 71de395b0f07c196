/*
 * QP1's mailbox (gsi.h): a bounded FIFO under a mutex, and an eventfd
 * that counts what waits, so that the control thread's event loop wakes
 * for arrivals the way it wakes for client requests.
 *
 * Each sender's share is counted in a record of its own, found by its GID
 * in one bucket (core/keyed.h): an arrival costs the same whether 1 or
 * 1,024 MADs wait.  A peer picks the GIDs it sends from (within its
 * peers' subnets), so the key mixes the GID with a secret taken when the
 * mailbox opens.
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
#include "core/keyed.h"
#include "core/random.h"
#include "gsi.h"
#include "util.h"

/* One remote GID with MADs waiting: how many. */
struct gsi_source {
	uint8_t gid[16];
	unsigned int waiting;
	struct ibvd_keyed node;
};

struct gsi_entry {
	struct ibvd_mad mad;
	struct gsi_source *source;
	STAILQ_ENTRY(gsi_entry) link;
};

static struct {
	pthread_mutex_t lock;
	STAILQ_HEAD(, gsi_entry) queue;
	unsigned int count;
	uint64_t dropped;
	int fd;				/* -1 until made */
	uint32_t hash_key;
	struct ibvd_keyed_table sources;
} inbox = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.queue = STAILQ_HEAD_INITIALIZER(inbox.queue),
	.fd = -1,
};

int ibvd_gsi_fd(void)
{
	int fd;

	pthread_mutex_lock(&inbox.lock);
	if (inbox.fd < 0) {
		inbox.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		inbox.hash_key = ibvd_random32();
	}
	fd = inbox.fd < 0 ? -errno : inbox.fd;
	pthread_mutex_unlock(&inbox.lock);
	return fd;
}

/* ---- senders' shares ------------------------------------------------ */

static uint32_t source_key(const uint8_t gid[16])
{
	uint32_t h = inbox.hash_key, w;
	unsigned int i;

	for (i = 0; i < 16; i += 4) {
		memcpy(&w, gid + i, sizeof(w));
		h = ((h ^ w) * 0x9E3779B1u);
		h ^= h >> 15;
	}
	return h;
}

/*
 * The record of gid's share, made if it has none; NULL when its share is
 * full or no record can be made.  Inbox locked.
 */
static struct gsi_source *source_take_share(const uint8_t gid[16])
{
	uint32_t key = source_key(gid);
	struct gsi_source *src = NULL;
	struct ibvd_keyed *n;

	for (n = ibvd_keyed_find(&inbox.sources, key); n && !src;
	     n = ibvd_keyed_next(n))
		if (!memcmp(container_of(n, struct gsi_source, node)->gid, gid, 16))
			src = container_of(n, struct gsi_source, node);
	if (!src) {
		src = calloc(1, sizeof(*src));
		if (!src)
			return NULL;
		memcpy(src->gid, gid, 16);
		if (ibvd_keyed_insert(&inbox.sources, &src->node, key) < 0) {
			free(src);
			return NULL;
		}
	}
	if (src->waiting >= IBVD_GSI_SOURCE_MAX)
		return NULL;
	src->waiting++;
	return src;
}

/* e leaves the mailbox: give back its sender's share.  Inbox locked. */
static void entry_leaves(struct gsi_entry *e)
{
	struct gsi_source *src = e->source;

	inbox.count--;
	if (--src->waiting == 0) {
		ibvd_keyed_remove(&inbox.sources, &src->node);
		free(src);
	}
}

void ibvd_gsi_deliver(const struct ibvd_mad *mad)
{
	struct gsi_entry *e = NULL;
	uint64_t one = 1;

	pthread_mutex_lock(&inbox.lock);
	/* Nobody listens before the CM has asked for the fd. */
	if (inbox.fd < 0 || inbox.count >= IBVD_GSI_INBOX_MAX ||
	    !(e = malloc(sizeof(*e))) ||
	    !(e->source = source_take_share(mad->remote_gid))) {
		inbox.dropped++;
		pthread_mutex_unlock(&inbox.lock);
		free(e);
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
		entry_leaves(e);
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
		entry_leaves(e);
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
