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
 *
 * The daemon rings the same way (ibvd_eng_db_ring) but never writes the
 * client's eventfd at C3: the client holds that open file too, and its
 * flags are the client's to change.  Made blocking with its counter at
 * the maximum, a write of ours would wait for a read that never comes,
 * on the control thread or an engine thread, every tenant with it.  The
 * caller writes the engine's own eventfd instead, which the thread waits
 * on beside the pages' (ibvd_eng_wake).
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

/* Report bits of doorbell word w, lowest first. */
static unsigned int report(uint32_t w, uint64_t bits,
			   void (*fn)(uint32_t bit, void *arg), void *arg)
{
	unsigned int n = 0;

	while (bits) {
		unsigned int b = (unsigned int)__builtin_ctzll(bits);

		bits &= bits - 1;
		fn(w * 64 + b, arg);
		n++;
	}
	return n;
}

/* Take the doorbell words named by `words` of summary word s, report them. */
static unsigned int drain_words(struct eng_doorbell *db, uint32_t s,
				uint64_t words,
				void (*fn)(uint32_t bit, void *arg), void *arg)
{
	unsigned int n = 0;

	while (words) {
		uint32_t w = s * 64 + (uint32_t)__builtin_ctzll(words);

		words &= words - 1;
		/* Acquire: the tails published before the bit are visible now. */
		n += report(w, ibvd_take(&db->client_page->doorbell[w]), fn, arg);
	}
	return n;
}

/*
 * Summary before doorbells: the client sets the doorbell bit first, so a
 * summary bit we take always finds its doorbell bit (or a later pass
 * does, if the client is mid-way).
 */
static uint64_t take_summary(struct eng_doorbell *db, uint32_t s)
{
	/* Cheap test first: an idle context costs one load per word. */
	if (!ibvd_read_once(&db->client_page->summary[s]))
		return 0;
	return ibvd_take(&db->client_page->summary[s]);
}

/* The bits of a word from bit k up. */
static uint64_t from_bit(unsigned int k)
{
	return ~0ull << k;
}

/*
 * In order from db->resume round to the bit before it: the words taken
 * first, the bits of them below the start reported last (taken is taken:
 * a bit rung after its word's exchange waits for the next drain).
 */
unsigned int ibvd_eng_db_drain(struct eng_doorbell *db,
			       void (*fn)(uint32_t bit, void *arg), void *arg)
{
	uint32_t start = db->resume % IBVD_DOORBELL_BITS;
	uint32_t w0 = start / 64, s0 = w0 / 64;
	uint64_t at = 1ull << (w0 % 64), words, first = 0;
	unsigned int i, n = 0;

	words = take_summary(db, s0);
	if (words & at)
		first = ibvd_take(&db->client_page->doorbell[w0]);
	words &= ~at;
	n += report(w0, first & from_bit(start % 64), fn, arg);
	n += drain_words(db, s0, words & from_bit(w0 % 64), fn, arg);
	for (i = 1; i < IBVD_SUMMARY_WORDS; i++) {
		uint32_t s = (s0 + i) % IBVD_SUMMARY_WORDS;

		n += drain_words(db, s, take_summary(db, s), fn, arg);
	}
	n += drain_words(db, s0, words & ~from_bit(w0 % 64), fn, arg);
	n += report(w0, first & ~from_bit(start % 64), fn, arg);
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

bool ibvd_eng_db_ring(struct eng_doorbell *db, uint32_t bit)
{
	uint32_t word = (bit / 64) % IBVD_DOORBELL_WORDS;

	/* The client's protocol exactly (file comment, C1-C3). */
	ibvd_fetch_or(&db->client_page->doorbell[word], (uint64_t)1 << (bit % 64));
	ibvd_fetch_or(&db->client_page->summary[word / 64],
		      (uint64_t)1 << (word % 64));
	ibvd_full_fence();
	return ibvd_read_once(&db->engine_page->sleeping);
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
