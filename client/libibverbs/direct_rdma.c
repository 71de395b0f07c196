/*
 * One-sided direct access, the library's side (common/lease.h): an RDMA
 * WRITE or READ on a QP with transit rings whose target MR the daemon
 * granted us (its peer's memory, shared with a file, same uid) is one
 * memcpy into or out of our own mapping of that file, under the pair's
 * lease.  direct_send.c decides when a request may go this way (RC order) and
 * completes it; this file keeps the grants and does the copy.
 *
 * Grants are asked for once per rkey (QP_REMOTE_MR), kept per pair, and
 * all dropped when the lease says they were revoked; a refusal is kept
 * too, so an MR that cannot be granted costs one call, not one per post.
 *
 * A file the target shrinks under its MR makes our copy fault (SIGBUS),
 * as it makes the engine's (engine/memory.c): the copy runs guarded
 * (guard.c), and a request that faulted goes to the engine, which fails
 * it as a NIC would; a thread that cannot recover from the fault copies
 * nothing itself.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "ibvd_verbs.h"
#include "lease.h"
#include "util.h"

#define GRANTS_MAX	16u
#define GRANT_MAX_SGE	16u
/*
 * Larger requests take the engine: a revocation waits for a copy under
 * the lease, and this bounds how long (1 MiB is well under a millisecond).
 */
#define GRANT_MAX_BYTES	(1u << 20)

struct grant {
	uint32_t rkey;
	uint32_t epoch;			/* the lease's when granted */
	uint32_t access;		/* the MR's; 0: refused */
	uint64_t iova;
	uint64_t length;
	uint8_t *at_iova;		/* the byte at iova in map */
	void *map;
	size_t map_len;
	uint64_t used;			/* for eviction */
};

struct ibvc_grants {
	struct ibvd_lease *lease;
	uint64_t clock;
	unsigned int n;
	struct grant g[GRANTS_MAX];
};

struct ibvc_grants *ibvc_grants_new(struct ibvd_lease *lease)
{
	struct ibvc_grants *gs = calloc(1, sizeof(*gs));

	if (gs)
		gs->lease = lease;
	return gs;
}

static void grant_drop(struct grant *g)
{
	if (g->map)
		munmap(g->map, g->map_len);
	memset(g, 0, sizeof(*g));
}

static void drop_all(struct ibvc_grants *gs)
{
	unsigned int i;

	for (i = 0; i < gs->n; i++)
		grant_drop(&gs->g[i]);
	gs->n = 0;
}

void ibvc_grants_free(struct ibvc_grants *gs)
{
	if (!gs)
		return;
	drop_all(gs);
	free(gs);
}

/* A free entry: a new one, or the least recently used one dropped. */
static struct grant *grant_slot(struct ibvc_grants *gs)
{
	struct grant *old;
	unsigned int i;

	if (gs->n < GRANTS_MAX)
		return &gs->g[gs->n++];
	old = &gs->g[0];
	for (i = 1; i < GRANTS_MAX; i++)
		if (gs->g[i].used < old->used)
			old = &gs->g[i];
	grant_drop(old);
	return old;
}

static int grant_map(struct grant *g, const Ibvd__QpRemoteMrReply *r, int fd)
{
	int prot = PROT_READ;
	void *p;

	if (r->map_len > SIZE_MAX || r->length > r->map_len ||
	    r->delta > r->map_len - r->length || r->file_offset > INT64_MAX)
		return -EPROTO;
	if (r->access & IBV_ACCESS_REMOTE_WRITE)
		prot |= PROT_WRITE;
	p = mmap(NULL, (size_t)r->map_len, prot, MAP_SHARED, fd,
		 (off_t)r->file_offset);
	if (p == MAP_FAILED)
		return -errno;
	/* a forked child has no grants: nothing would revoke its mapping */
	madvise(p, (size_t)r->map_len, MADV_DONTFORK);
	g->map = p;
	g->map_len = (size_t)r->map_len;
	g->at_iova = (uint8_t *)p + r->delta;
	g->iova = r->iova;
	g->length = r->length;
	g->access = r->access;
	g->epoch = r->epoch;
	return 0;
}

/*
 * Ask the daemon for the peer's MR of rkey, for the pair of generation
 * gen: *g holds it, or (access 0) a refusal.  Any failure is one: the
 * engine does what this rkey asks from then on (the grants go with the
 * pair, and all of them when the lease is revoked), and a daemon that
 * does not know the request costs one call, not one per post.
 */
static void grant_fetch(struct ibvc_qp *qp, uint32_t gen, uint32_t rkey,
			struct grant *g)
{
	Ibvd__QpRemoteMr req = IBVD__QP_REMOTE_MR__INIT;
	Ibvd__QpRemoteMrReply *reply = NULL;
	unsigned int nfds = 1;
	int fd = -1, err;

	req.handle = qp->qp.handle;
	req.rkey = rkey;
	err = ibvd_conn_call(ibvc_conn_of(qp->qp.context), IBVD_MSG_QP_REMOTE_MR,
			     &req.base, &ibvd__qp_remote_mr_reply__descriptor,
			     (ProtobufCMessage **)&reply, &fd, &nfds);
	memset(g, 0, sizeof(*g));
	g->rkey = rkey;
	if (err < 0)
		return;
	/* grant_map fills g only once the file is mapped */
	if (nfds == 1 && reply->gen == gen)
		grant_map(g, reply, fd);
	if (nfds == 1)
		close(fd);
	ibvd__qp_remote_mr_reply__free_unpacked(reply, NULL);
}

static struct grant *grant_find(struct ibvc_qp *qp, struct ibvc_grants *gs,
				uint32_t gen, uint32_t rkey)
{
	struct grant *g;
	unsigned int i;

	for (i = 0; i < gs->n; i++)
		if (gs->g[i].rkey == rkey) {
			g = &gs->g[i];
			goto found;
		}
	g = grant_slot(gs);
	grant_fetch(qp, gen, rkey, g);
found:
	g->used = ++gs->clock;
	return g->access ? g : NULL;
}

/* The local side of wr: registered memory we may read (or write, READ). */
static bool local_ok(struct ibvc_qp *qp, const struct ibv_send_wr *wr,
		     bool write, uint64_t *len)
{
	bool keyless = !write && (wr->send_flags & IBV_SEND_INLINE);
	int i;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > GRANT_MAX_SGE)
		return false;
	*len = 0;
	for (i = 0; i < wr->num_sge; i++) {
		const struct ibv_sge *s = &wr->sg_list[i];

		if (s->length && !keyless &&
		    !ibvc_mrtab_covers(to_ibvc_context(qp->qp.context),
				       qp->qp.pd, s->lkey, s->addr, s->length,
				       write ? IBVC_MRTAB_WRITE : 0))
			return false;
		*len += s->length;
	}
	return *len <= GRANT_MAX_BYTES;
}

static bool remote_ok(const struct grant *g, uint32_t need, uint64_t addr,
		      uint64_t len)
{
	return (g->access & need) && ibvd_in_range(g->iova, g->length, addr, len);
}

struct rdma_copy {
	const struct ibv_send_wr *wr;
	uint8_t *remote;
	bool read;
};

/* Between wr's SGEs and the peer's memory at remote (ibvc_guarded). */
static void copy(void *arg)
{
	const struct rdma_copy *c = arg;
	uint8_t *remote = c->remote;
	int i;

	for (i = 0; i < c->wr->num_sge; i++) {
		void *local = (void *)(uintptr_t)c->wr->sg_list[i].addr;
		uint32_t n = c->wr->sg_list[i].length;

		if (c->read)
			ibvc_copy(local, remote, n);
		else
			ibvc_copy(remote, local, n);
		remote += n;
	}
}

bool ibvc_grants_rdma(struct ibvc_qp *qp, struct ibvc_grants *gs, uint32_t gen,
		      const struct ibv_send_wr *wr, uint32_t *byte_len)
{
	bool read = wr->opcode == IBV_WR_RDMA_READ;
	uint64_t addr = wr->wr.rdma.remote_addr, len;
	struct rdma_copy c;
	struct grant *g;
	int tries = 0;

	if ((!read && wr->opcode != IBV_WR_RDMA_WRITE) ||
	    !ibvc_guard_ready() || !local_ok(qp, wr, read, &len))
		return false;
	do {
		g = grant_find(qp, gs, gen, wr->wr.rdma.rkey);
		if (!g || !remote_ok(g, read ? IBV_ACCESS_REMOTE_READ :
					       IBV_ACCESS_REMOTE_WRITE,
				     addr, len))
			return false;
		if (ibvd_lease_begin(gs->lease, g->epoch))
			break;
		/* revoked since: ask again, once (the MR may have changed) */
		drop_all(gs);
		g = NULL;
	} while (++tries < 2);
	if (!g)
		return false;
	c.wr = wr;
	c.remote = g->at_iova + (addr - g->iova);
	c.read = read;
	if (!ibvc_guarded(copy, &c)) {
		/* the engine fails it properly; the grant is asked again */
		ibvd_lease_end(gs->lease);
		drop_all(gs);
		return false;
	}
	ibvd_lease_end(gs->lease);
	*byte_len = (uint32_t)len;
	return true;
}
