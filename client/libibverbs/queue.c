/*
 * The client's side of the shared queues (common/ring.h): mapping the
 * daemon's memfds with the protections the contract asks for, finding a
 * queue in the context's ring arena, and the doorbell.
 *
 * A memfd is mapped read-only as a whole first, then the range the client
 * writes (the context page's client half, the ring arena's client half)
 * is mapped again read-write on top with MAP_FIXED.  So a stray store by
 * the app into an engine header or a CQE faults instead of confusing the
 * library, and the mapping is one range to unmap.  The arena is mapped
 * once per context: a queue costs no mapping.
 */
#include "config.h"

#include <sched.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "barrier.h"
#include "ibvd_verbs.h"

/* Largest WQE slot we accept from the daemon: guards our size arithmetic. */
#define MAX_STRIDE	(1u << 20)

int ibvc_map_fd(int fd, size_t len, struct ibvc_map *map)
{
	struct stat st;
	void *addr;

	map->addr = NULL;
	map->len = 0;
	if (fstat(fd, &st) < 0)
		return -errno;
	/* Touching a page past the end of a memfd would be SIGBUS, not EIO. */
	if (st.st_size < 0 || (uint64_t)st.st_size < len || len == 0)
		return -EPROTO;
	addr = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	if (addr == MAP_FAILED)
		return -errno;
	/*
	 * A forked child must not inherit the queues: it would share them with
	 * us (MAP_SHARED) and could post into our QPs.  As with a NIC's queues,
	 * they simply are not there in the child.
	 */
	madvise(addr, len, MADV_DONTFORK);
	map->addr = addr;
	map->len = len;
	return 0;
}

int ibvc_map_writable(struct ibvc_map *map, int fd, size_t off, size_t len)
{
	void *want = (uint8_t *)map->addr + off;
	void *got;

	if (off % IBVD_PAGE_SIZE || off > map->len || len > map->len - off)
		return -EPROTO;
	got = mmap(want, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		   fd, (off_t)off);
	if (got == MAP_FAILED)
		return -errno;
	/* A new mapping: it does not inherit the range's MADV_DONTFORK. */
	madvise(got, len, MADV_DONTFORK);
	return 0;
}

void ibvc_unmap(struct ibvc_map *map)
{
	if (map->addr)
		munmap(map->addr, map->len);
	map->addr = NULL;
	map->len = 0;
}

static bool is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

bool ibvc_wq_geometry_ok(uint32_t nslots, uint32_t stride, uint32_t hdr)
{
	return is_pow2(nslots) && nslots <= IBVD_RING_MAX_SLOTS &&
	       is_pow2(stride) && stride >= hdr && stride <= MAX_STRIDE;
}

int ibvc_map_rings(struct ibvc_context *ictx, int fd)
{
	int ret;

	ret = ibvc_map_fd(fd, IBVD_ARENA_BYTES, &ictx->rings);
	if (ret < 0)
		return ret;
	ret = ibvc_map_writable(&ictx->rings, fd, IBVD_ARENA_CLIENT,
				IBVD_ARENA_HALF);
	if (ret < 0)
		ibvc_unmap(&ictx->rings);
	return ret;
}

/* Is [off, off + len) inside the half that starts at half, aligned? */
static bool in_half(uint64_t off, uint64_t len, uint64_t half)
{
	return off >= half && off - half <= IBVD_ARENA_HALF &&
	       len <= IBVD_ARENA_HALF - (off - half) &&
	       off % IBVD_CACHELINE == 0;
}

/* Does the daemon's place fit the arena, each block in its half? */
static bool place_ok(const struct ibvc_context *ictx,
		     const Ibvd__RingPlace *p, uint64_t slots_len,
		     uint64_t slots_half)
{
	return ictx->rings.addr && p &&
	       in_half(p->engine, IBVD_RING_HDR, IBVD_ARENA_ENGINE) &&
	       in_half(p->client, IBVD_RING_HDR, IBVD_ARENA_CLIENT) &&
	       in_half(p->slots, slots_len, slots_half);
}

static uint8_t *arena_at(const struct ibvc_context *ictx, uint64_t off)
{
	return (uint8_t *)ictx->rings.addr + off;
}

uint8_t *ibvc_arena_client_block(const struct ibvc_context *ictx, uint64_t off,
				 uint64_t len)
{
	if (!ictx->rings.addr || !in_half(off, len, IBVD_ARENA_CLIENT))
		return NULL;
	return arena_at(ictx, off);
}

int ibvc_wq_setup(struct ibvc_wq *wq, struct ibvc_context *ictx,
		  const Ibvd__RingPlace *place, uint32_t nslots,
		  uint32_t stride, uint32_t limit)
{
	/* The client header and the slots are ours to write; the rest is not. */
	if (!place_ok(ictx, place, (uint64_t)nslots * stride, IBVD_ARENA_CLIENT))
		return -EPROTO;
	wq->engine = (const struct ibvd_wq_engine *)arena_at(ictx, place->engine);
	wq->client = (struct ibvd_wq_client *)arena_at(ictx, place->client);
	wq->slots = arena_at(ictx, place->slots);
	wq->nslots = nslots;
	wq->stride = stride;
	wq->limit = limit < nslots ? limit : nslots;
	wq->tail = ibvd_read_once(&wq->client->tail);
	pthread_mutex_init(&wq->lock, NULL);
	return 0;
}

int ibvc_wq_move_slots(struct ibvc_wq *wq, struct ibvc_context *ictx,
		       const Ibvd__RingPlace *place, uint32_t nslots,
		       uint32_t stride, uint32_t limit)
{
	if (!ibvc_wq_geometry_ok(nslots, stride, IBVD_RECV_WQE_HDR) ||
	    stride != wq->stride ||
	    !place_ok(ictx, place, (uint64_t)nslots * stride, IBVD_ARENA_CLIENT) ||
	    arena_at(ictx, place->engine) != (const uint8_t *)wq->engine ||
	    arena_at(ictx, place->client) != (uint8_t *)wq->client)
		return -EPROTO;
	wq->slots = arena_at(ictx, place->slots);
	wq->nslots = nslots;
	wq->limit = limit < nslots ? limit : nslots;
	return 0;
}

void ibvc_wq_destroy(struct ibvc_wq *wq)
{
	if (wq->slots)
		pthread_mutex_destroy(&wq->lock);
	wq->slots = NULL;
}

void ibvc_wq_resync(struct ibvc_wq *wq)
{
	if (!wq->slots)
		return;
	pthread_mutex_lock(&wq->lock);
	wq->tail = ibvd_read_once(&wq->client->tail);
	pthread_mutex_unlock(&wq->lock);
}

int ibvc_cq_ring_setup(struct ibvc_cq_ring *ring, struct ibvc_context *ictx,
		       const Ibvd__RingPlace *place, uint32_t nslots)
{
	if (!place_ok(ictx, place, (uint64_t)nslots * IBVD_CQE_SIZE,
		      IBVD_ARENA_ENGINE))
		return -EPROTO;
	ring->engine = (const struct ibvd_cq_engine *)arena_at(ictx, place->engine);
	ring->client = (struct ibvd_cq_client *)arena_at(ictx, place->client);
	ring->slots = (const struct ibvd_cqe *)arena_at(ictx, place->slots);
	ring->nslots = nslots;
	/* A fresh ring starts at 0; a resized one wherever the daemon left it. */
	ring->head = ibvd_read_once(&ring->client->head);
	return 0;
}

/* A system call of the data path, made only while the engine sleeps. */
static void kick(struct ibvc_context *ictx)
{
	uint64_t one = 1;
	ssize_t n;

	do
		n = write(ictx->kick_fd, &one, sizeof(one));
	while (n < 0 && errno == EINTR);
	ibvd_write_once(&ictx->kicked, 1);
	/* EAGAIN: the counter is saturated: the engine is being woken anyway. */
}

/*
 * An empty poll after this context woke its sleeping engine, which has not
 * run yet: give it our CPU, once.  Where every CPU is taken by a
 * busy-polling client, the woken thread otherwise waits for the end of a
 * poller's slice (tens of microseconds, bench/RESULTS.md) for the very
 * work the poller waits for.  Only after a kick, itself a system call: an
 * awake engine costs the data path none.
 */
bool ibvc_yield_to_woken_engine(struct ibvc_context *ictx)
{
	if (!ibvd_read_once(&ictx->kicked))
		return false;
	ibvd_write_once(&ictx->kicked, 0);
	if (!ibvd_read_once(&ictx->db_engine->sleeping))
		return false;
	sched_yield();
	return true;
}

void ibvc_ring_doorbell(struct ibvc_context *ictx, uint32_t bit)
{
	struct ibvd_ctx_client *db = ictx->db_client;
	uint32_t word = bit / 64;

	/*
	 * The queue's bit before the summary bit: the engine takes a summary
	 * word and then the doorbell words it names, so a summary bit is never
	 * visible without the doorbell bit it stands for.  fetch_or is a
	 * release, so the tail the caller published is visible to whoever sees
	 * either bit.
	 */
	ibvd_fetch_or(&db->doorbell[word], (uint64_t)1 << (bit % 64));
	ibvd_fetch_or(&db->summary[word / 64], (uint64_t)1 << (word % 64));
	/*
	 * Store (doorbell) -> load (sleeping) needs a full fence: the engine
	 * does the mirror image (store sleeping, fence, load doorbells), so at
	 * least one of us sees the other and no wakeup is lost.
	 */
	ibvd_full_fence();
	if (ibvd_read_once(&ictx->db_engine->sleeping))
		kick(ictx);
}
