/*
 * The context page (ring.h): doorbells the client rings, the `sleeping`
 * word the engine publishes, and the eventfd that wakes a sleeping thread.
 *
 * Why no wakeup is lost.  A client posting work does
 *	C1 store doorbell bit, then summary bit	(fetch_or, release)
 *	C2 full fence
 *	C3 load sleeping; if set, write the eventfd
 * and an engine thread going to sleep does
 *	E1 store sleeping = 1 in each page it serves
 *	E2 full fence
 *	E3 load every summary word; any set: clear sleeping, go back to work
 *	E4 otherwise block in epoll on the pages' eventfds.
 * The two fences are seq_cst, so C1 precedes E3 or E1 precedes C3 in their
 * single total order: either the engine sees the bit at E3, or the client
 * sees sleeping at C3 and writes the eventfd.  An eventfd write is
 * remembered by epoll (edge-triggered; every write queues an event) until
 * the next epoll_wait returns it, even one made before E4 starts, so the
 * thread wakes.  The engine clears `sleeping` only while awake; a client
 * that then sees 0 rang a bit that the next pass drains.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>

#include "barrier.h"
#include "internal.h"

static int page_memfd(void)
{
	int fd, ret;

	fd = memfd_create("ibverbsd-context", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, IBVD_CTX_PAGE_SIZE) < 0)
		goto fail;
	/* Neither side can resize it under the other's mapping (SIGBUS). */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		goto fail;
	return fd;
fail:
	ret = -errno;
	close(fd);
	return ret;
}

int ibvd_eng_db_create(struct eng_doorbell *db, int *page_fd)
{
	void *map;
	int fd, ret;

	memset(db, 0, sizeof(*db));
	db->kick_fd = -1;
	fd = page_memfd();
	if (fd < 0)
		return fd;
	map = mmap(NULL, IBVD_CTX_PAGE_SIZE, PROT_READ | PROT_WRITE,
		   MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		ret = -errno;
		goto fail;
	}
	db->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (db->kick_fd < 0) {
		ret = -errno;
		munmap(map, IBVD_CTX_PAGE_SIZE);
		goto fail;
	}
	db->map = map;
	db->engine_page = map;
	db->client_page = (struct ibvd_ctx_client *)((uint8_t *)map + IBVD_PAGE_SIZE);
	*page_fd = fd;
	return 0;
fail:
	close(fd);
	return ret;
}

void ibvd_eng_db_destroy(struct eng_doorbell *db)
{
	if (db->map)
		munmap(db->map, IBVD_CTX_PAGE_SIZE);
	if (db->kick_fd >= 0)
		close(db->kick_fd);
	db->map = NULL;
	db->kick_fd = -1;
}

/* Take one doorbell word and report its bits. */
static unsigned int drain_word(struct eng_doorbell *db, uint32_t w,
			       void (*fn)(uint32_t bit, void *arg), void *arg)
{
	/* Acquire: the tails published before the bit are visible now. */
	uint64_t bits = ibvd_take(&db->client_page->doorbell[w]);
	unsigned int n = 0;

	while (bits) {
		unsigned int b = (unsigned int)__builtin_ctzll(bits);

		bits &= bits - 1;
		fn(w * 64 + b, arg);
		n++;
	}
	return n;
}

unsigned int ibvd_eng_db_drain(struct eng_doorbell *db,
			       void (*fn)(uint32_t bit, void *arg), void *arg)
{
	unsigned int s, n = 0;

	for (s = 0; s < IBVD_SUMMARY_WORDS; s++) {
		uint64_t words;

		/* Cheap test first: an idle context costs one load per word. */
		if (!ibvd_read_once(&db->client_page->summary[s]))
			continue;
		/*
		 * Summary before doorbells: the client sets the doorbell bit
		 * first, so a summary bit we take always finds its doorbell
		 * bit (or a later pass does, if the client is mid-way).
		 */
		words = ibvd_take(&db->client_page->summary[s]);
		while (words) {
			unsigned int b = (unsigned int)__builtin_ctzll(words);

			words &= words - 1;
			n += drain_word(db, s * 64 + b, fn, arg);
		}
	}
	return n;
}

static bool db_pending(const struct eng_doorbell *db)
{
	unsigned int s;

	for (s = 0; s < IBVD_SUMMARY_WORDS; s++)
		if (ibvd_read_once(&db->client_page->summary[s]))
			return true;
	return false;
}

static void kick(int fd)
{
	uint64_t one = 1;
	ssize_t n;

	do
		n = write(fd, &one, sizeof(one));
	while (n < 0 && errno == EINTR);
	/* EAGAIN: the counter is saturated, so a wakeup is queued anyway. */
}

void ibvd_eng_db_ring(struct eng_doorbell *db, uint32_t bit)
{
	uint32_t word = (bit / 64) % IBVD_DOORBELL_WORDS;

	/* The client's protocol exactly (file comment, C1-C3). */
	ibvd_fetch_or(&db->client_page->doorbell[word], (uint64_t)1 << (bit % 64));
	ibvd_fetch_or(&db->client_page->summary[word / 64],
		      (uint64_t)1 << (word % 64));
	ibvd_full_fence();
	if (ibvd_read_once(&db->engine_page->sleeping))
		kick(db->kick_fd);
}

bool ibvd_eng_db_arm(struct eng_doorbell *const *dbs, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		ibvd_write_once(&dbs[i]->engine_page->sleeping, 1);
	/* E2: store sleeping -> load doorbells (file comment). */
	ibvd_full_fence();
	for (i = 0; i < n; i++) {
		if (db_pending(dbs[i])) {
			ibvd_eng_db_disarm(dbs, n);
			return false;
		}
	}
	return true;
}

void ibvd_eng_db_disarm(struct eng_doorbell *const *dbs, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		ibvd_write_once(&dbs[i]->engine_page->sleeping, 0);
}
