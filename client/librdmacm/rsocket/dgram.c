/*
 * Datagram rsockets (SOCK_DGRAM) on a UD QP, with rdma-core's protocol
 * (librdmacm/rsocket.c, "ds"), so that ours and rdma-core's talk:
 *
 *  - An rsocket is a kernel UDP socket (its fd, bound as the app binds)
 *    and a UD QP on the device of its source address (Q_Key
 *    RDMA_UDP_QKEY).
 *  - A datagram on the QP is a header (struct ds_hdr: IP version, header
 *    length, the sender's UDP port and IP address) and the data; receive
 *    buffers are RS_DS_SLOT bytes after the 40-byte GRH.
 *  - Until a sender knows a peer's QP number it sends over UDP, to the
 *    peer's UDP socket, with a struct ds_udp_hdr carrying its own QP
 *    number.  The receiver answers each such datagram with an empty
 *    control one (DS_OP_CTRL) over UDP, which carries its QP number back;
 *    each side then makes an address handle from the other's IP address
 *    (address and route resolution, as rdma-core does) and sends on the
 *    QP from then on.  The resolution runs beside the app's calls, on an
 *    event channel of the rsocket's own: a peer whose address does not
 *    resolve (any sender can name one) costs those calls nothing, and
 *    what we send it meanwhile goes over UDP.
 *  - A peer silent for a second gets our next datagram over UDP again
 *    (DS_REFRESH_NS), so that one restarted on its port, with a new QP,
 *    tells us its number.
 *
 * rdma-core forwards the data of UDP datagrams to its own QP from a
 * service thread; here they wait in a queue of their own (RS_DS_PENDING
 * at most; more are dropped, as a full socket buffer drops them) and are
 * read before what came on the QP.  The UDP socket is read when the app
 * sends, receives or polls, so a peer learns our QP number when we next
 * look, never from a thread of ours.
 *
 * Nothing received is trusted: a UDP datagram whose header does not
 * match its sender's address family, a QP datagram whose header is
 * malformed or shorter than it says, or names a source that is not a
 * peer we know from that QP (known_source()), are dropped.
 */
#include "config.h"

#include <endian.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/rsocket.h>

#include "rs.h"
#include "util.h"

#define DS_UDP_TAG		0x55555555u
#define DS_IPV4_HDR_LEN		8
#define DS_IPV6_HDR_LEN		24
#define DS_UDP_IPV4_HDR_LEN	16
#define DS_UDP_IPV6_HDR_LEN	28
#define DS_OP_DATA		0	/* rdma-core's RS_OP_DATA */
#define DS_OP_CTRL		7	/* RS_OP_CTRL */
#define DS_GRH			40	/* struct ibv_grh */
#define DS_MIN_SLOTS		64	/* send and receive slots, each */
#define DS_MAX_SLOTS		1024
#define RS_DS_PENDING		256	/* UDP datagrams waiting to be read */
#define DS_MAX_DESTS		4096	/* peers remembered; beyond, the oldest go */
#define DS_RESOLVE_MS		2000
/* after a failed resolution, a peer's next datagram tries again no sooner */
#define DS_RESOLVE_RETRY_NS	(2000ull * 1000 * 1000)
/* resolutions on their way at once, at most: more wait for a later datagram */
#define DS_MAX_RESOLVING	64
#define DS_WR_SEND		(1ull << 32)	/* in a send's wr_id, beside its slot */
/*
 * A peer silent this long gets our next datagram over UDP, which it
 * answers with its QP number: one that went away and came back on the
 * same port (a restarted server) has a new QP, and UD tells a sender
 * nothing of a QP that is gone.
 */
#define DS_REFRESH_NS		(1000ull * 1000 * 1000)

/* The header of a datagram on the QP (multi-byte fields big-endian). */
struct ds_hdr {
	uint8_t version;
	uint8_t length;
	uint16_t port;
	union {
		uint32_t ipv4;
		struct {
			uint32_t flowinfo;
			uint8_t addr[16];
		} ipv6;
	} addr;
} __attribute__((packed));

/* The header of a datagram over UDP. */
struct ds_udp_hdr {
	uint32_t tag;
	uint8_t version;
	uint8_t op;
	uint8_t length;
	uint8_t reserved;
	uint32_t qpn;		/* low 24 bits */
	union {
		uint32_t ipv4;
		uint8_t ipv6[16];
	} addr;
} __attribute__((packed));

_Static_assert(sizeof(struct ds_udp_hdr) == DS_UDP_IPV6_HDR_LEN, "udp hdr");
_Static_assert(sizeof(struct ds_hdr) == DS_IPV6_HDR_LEN, "ds hdr");

/* A peer we sent to or heard from. */
struct ds_dest {
	struct sockaddr_storage addr;	/* its UDP address */
	struct ds_hdr hdr;		/* ours towards it: source IP and port */
	struct ibv_ah *ah;		/* NULL until its QP number is known */
	uint32_t qpn;
	struct rdma_cm_id *resolving;	/* its path, on its way for want_qpn */
	uint32_t want_qpn;
	uint64_t retry_ns;		/* the last resolution failed: not before */
	uint64_t heard_ns;		/* when it last sent us anything */
	uint64_t asked_ns;		/* when we last sent it over UDP */
};

/* A datagram that came over UDP, waiting for rrecvfrom. */
struct ds_pending {
	struct ds_pending *next;
	struct sockaddr_storage from;
	size_t len;
	uint8_t data[];
};

struct rs_dgram {
	int udp;			/* the rsocket's fd */
	sa_family_t family;		/* its domain: every dest's family */
	struct rdma_cm_id *id;		/* bound to our source address */
	struct ibv_pd *pd;
	struct ibv_comp_channel *cch;
	struct ibv_cq *cq;
	bool cq_armed;
	unsigned int cq_unacked;
	uint32_t nslots;		/* of each queue: from SO_RCVBUF */
	uint32_t max_msg;		/* a datagram with its header: slot, path MTU */
	uint8_t *sbuf, *rbuf;		/* nslots slots each (+ a GRH) */
	struct ibv_mr *smr, *rmr;
	uint32_t *sfree;		/* free send slots, a stack */
	uint32_t nsfree;
	struct ds_done { uint32_t slot, len; } *rdone;	/* received, in order */
	uint32_t rhead, rcount;
	struct ds_pending *pend_head, *pend_tail;
	unsigned int npend;
	struct ds_dest *dests;
	unsigned int ndests, cap;
	unsigned int evict_next;	/* reuse_dest()'s turn */
	int conn;			/* rconnect()'s dest, or -1 */
	struct rdma_event_channel *rch;	/* the resolutions' (non-blocking) */
	unsigned int nresolving;
};

static socklen_t addr_len(const struct sockaddr_storage *a)
{
	return a->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
					  sizeof(struct sockaddr_in);
}

static bool same_addr(const struct sockaddr_storage *a,
		      const struct sockaddr_storage *b)
{
	const struct sockaddr_in *a4 = (const void *)a, *b4 = (const void *)b;
	const struct sockaddr_in6 *a6 = (const void *)a, *b6 = (const void *)b;

	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return a4->sin_port == b4->sin_port &&
		       a4->sin_addr.s_addr == b4->sin_addr.s_addr;
	return a6->sin6_port == b6->sin6_port &&
	       !memcmp(&a6->sin6_addr, &b6->sin6_addr, sizeof(a6->sin6_addr));
}

static bool v4_mapped(const struct sockaddr_storage *a)
{
	return a->ss_family == AF_INET6 &&
	       IN6_IS_ADDR_V4MAPPED(&((const struct sockaddr_in6 *)a)->sin6_addr);
}

/*
 * a as the CM and the protocol's headers name it: an IPv4-mapped address
 * (a dual-stack rsocket's IPv4 peer, or its source towards one) as IPv4.
 */
static void plain_addr(const struct sockaddr_storage *a, struct sockaddr_storage *out)
{
	const struct sockaddr_in6 *s6 = (const void *)a;
	struct sockaddr_in *s4 = (void *)out;

	if (!v4_mapped(a)) {
		*out = *a;
		return;
	}
	memset(out, 0, sizeof(*out));
	s4->sin_family = AF_INET;
	s4->sin_port = s6->sin6_port;
	memcpy(&s4->sin_addr, &s6->sin6_addr.s6_addr[12], 4);
}

/* ---- the endpoint: UDP socket, then QP on first need --------------------- */

int rs_dgram_open(struct rsocket *rs, int type)
{
	struct rs_dgram *dg = calloc(1, sizeof(*dg));
	int flags = SOCK_DGRAM | (type & SOCK_CLOEXEC);

	if (!dg)
		return -ENOMEM;
	dg->conn = -1;
	dg->family = (sa_family_t)rs->domain;
	dg->udp = socket(rs->domain, flags | SOCK_NONBLOCK, 0);
	if (dg->udp < 0) {
		int ret = -errno;

		free(dg);
		return ret;
	}
	rs->dg = dg;
	rs->fd = dg->udp;
	return 0;
}

static void free_bufs(struct rs_dgram *dg)
{
	if (dg->smr)
		ibv_dereg_mr(dg->smr);
	if (dg->rmr)
		ibv_dereg_mr(dg->rmr);
	free(dg->sbuf);
	free(dg->rbuf);
	free(dg->sfree);
	free(dg->rdone);
}

/* The QP and all that serves it, made or half made: none left after. */
static void drop_qp(struct rs_dgram *dg)
{
	if (dg->id && dg->id->qp)
		rdma_destroy_qp(dg->id);
	free_bufs(dg);
	dg->sbuf = dg->rbuf = NULL;
	dg->sfree = NULL;
	dg->rdone = NULL;
	dg->smr = dg->rmr = NULL;
	dg->nsfree = 0;
	if (dg->cq && dg->cq_unacked)
		ibv_ack_cq_events(dg->cq, dg->cq_unacked);
	dg->cq_unacked = 0;
	if (dg->cq)
		ibv_destroy_cq(dg->cq);
	if (dg->cch)
		ibv_destroy_comp_channel(dg->cch);
	if (dg->pd)
		ibv_dealloc_pd(dg->pd);
	if (dg->id)
		rdma_destroy_id(dg->id);
	dg->cq = NULL;
	dg->cch = NULL;
	dg->pd = NULL;
	dg->id = NULL;
}

/* Its address handle and the resolution on its way, gone. */
static void forget_dest(struct rs_dgram *dg, struct ds_dest *d)
{
	if (d->ah)
		ibv_destroy_ah(d->ah);
	d->ah = NULL;
	if (d->resolving) {
		rdma_destroy_id(d->resolving);
		d->resolving = NULL;
		dg->nresolving--;
	}
}

void rs_dgram_close(struct rsocket *rs)
{
	struct rs_dgram *dg = rs->dg;
	struct ds_pending *p;
	unsigned int i;

	if (!dg)
		return;
	for (i = 0; i < dg->ndests; i++)
		forget_dest(dg, &dg->dests[i]);
	free(dg->dests);
	if (dg->rch)
		rdma_destroy_event_channel(dg->rch);
	while ((p = dg->pend_head)) {
		dg->pend_head = p->next;
		free(p);
	}
	drop_qp(dg);
	close(dg->udp);
	free(dg);
	rs->dg = NULL;
}

/* Receive slot i: a GRH scratch area, then RS_DS_SLOT bytes. */
static int post_recv(struct rs_dgram *dg, uint32_t slot)
{
	struct ibv_sge sge[2] = {
		{ (uintptr_t)dg->rbuf, DS_GRH, dg->rmr->lkey },
		{ (uintptr_t)(dg->rbuf + DS_GRH + (size_t)slot * RS_DS_SLOT),
		  RS_DS_SLOT, dg->rmr->lkey },
	};
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = sge, .num_sge = 2 };
	struct ibv_recv_wr *bad;

	return -ibv_post_recv(dg->id->qp, &wr, &bad);
}

static int make_bufs(struct rs_dgram *dg)
{
	uint32_t i;
	int ret;

	dg->sbuf = calloc(dg->nslots, RS_DS_SLOT);
	dg->rbuf = calloc(1, DS_GRH + (size_t)dg->nslots * RS_DS_SLOT);
	dg->sfree = calloc(dg->nslots, sizeof(*dg->sfree));
	dg->rdone = calloc(dg->nslots, sizeof(*dg->rdone));
	if (!dg->sfree || !dg->rdone)
		return -ENOMEM;
	if (!dg->sbuf || !dg->rbuf)
		return -ENOMEM;
	dg->smr = ibv_reg_mr(dg->pd, dg->sbuf, (size_t)dg->nslots * RS_DS_SLOT, 0);
	dg->rmr = ibv_reg_mr(dg->pd, dg->rbuf, DS_GRH + (size_t)dg->nslots * RS_DS_SLOT,
			     IBV_ACCESS_LOCAL_WRITE);
	if (!dg->smr || !dg->rmr)
		return -errno;
	for (i = 0; i < dg->nslots; i++)
		dg->sfree[dg->nsfree++] = i;
	for (i = 0; i < dg->nslots; i++) {
		ret = post_recv(dg, i);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * Slots of each queue: what SO_RCVBUF holds of RS_DS_SLOT datagrams, as
 * rdma-core sizes them (udpong asks for 512 KiB: 256), within bounds.
 */
static uint32_t queue_slots(int udp)
{
	socklen_t len = sizeof(int);
	uint32_t n = DS_MIN_SLOTS;
	int rcvbuf = 0;

	/* the kernel reports twice what was set */
	if (getsockopt(udp, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len) == 0 && rcvbuf > 0)
		n = (uint32_t)rcvbuf / 2 / RS_DS_SLOT;
	return n < DS_MIN_SLOTS ? DS_MIN_SLOTS : n > DS_MAX_SLOTS ? DS_MAX_SLOTS : n;
}

/* The QP, on the device of src (our address, port ignored). */
static int build_qp(struct rsocket *rs, const struct sockaddr_storage *src)
{
	struct rs_dgram *dg = rs->dg;
	struct ibv_qp_init_attr attr = { .qp_type = IBV_QPT_UD };
	struct sockaddr_storage bind_to;
	struct ibv_port_attr pa;
	int ret;

	plain_addr(src, &bind_to);
	((struct sockaddr_in *)&bind_to)->sin_port = 0;	/* same place in v6 */
	if (rdma_create_id(NULL, &dg->id, rs, RDMA_PS_UDP) ||
	    rdma_bind_addr(dg->id, (struct sockaddr *)&bind_to))
		return -errno;
	if (!dg->id->verbs)
		return -ENODEV;
	dg->pd = ibv_alloc_pd(dg->id->verbs);
	dg->cch = dg->pd ? ibv_create_comp_channel(dg->id->verbs) : NULL;
	if (!dg->cch)
		return -errno;
	dg->nslots = queue_slots(dg->udp);
	dg->cq = ibv_create_cq(dg->id->verbs, 2 * (int)dg->nslots, NULL, dg->cch, 0);
	if (!dg->cq)
		return -errno;
	attr.send_cq = attr.recv_cq = dg->cq;
	attr.cap.max_send_wr = attr.cap.max_recv_wr = dg->nslots;
	attr.cap.max_send_sge = 1;
	attr.cap.max_recv_sge = 2;
	if (rdma_create_qp(dg->id, dg->pd, &attr))
		return -errno;
	dg->max_msg = RS_DS_SLOT;
	if (!ibv_query_port(dg->id->verbs, dg->id->port_num, &pa) &&
	    pa.active_mtu >= IBV_MTU_256 && pa.active_mtu <= IBV_MTU_4096 &&
	    (128u << pa.active_mtu) < dg->max_msg)
		dg->max_msg = 128u << pa.active_mtu;	/* one UD packet */
	ret = make_bufs(dg);
	if (ret == 0 && fcntl(dg->cch->fd, F_SETFL,
			      fcntl(dg->cch->fd, F_GETFL) | O_NONBLOCK) < 0)
		ret = -errno;
	return ret;
}

static int make_qp(struct rsocket *rs, const struct sockaddr_storage *src)
{
	int ret = build_qp(rs, src);

	if (ret)
		drop_qp(rs->dg);
	return ret;
}

static bool any_addr(const struct sockaddr_storage *a)
{
	return a->ss_family == AF_INET ?
	       ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_ANY) :
	       IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)a)->sin6_addr);
}

/*
 * Our address towards dst, as the peer sees our UDP datagrams come from:
 * the address our UDP socket is bound to, or when it is bound to any, the
 * kernel's choice of source; our UDP port.  The peer reports it as the
 * source of what we send on the QP and answers there.
 */
static int source_for(struct rsocket *rs, const struct sockaddr_storage *dst,
		      struct sockaddr_storage *src)
{
	struct sockaddr_storage mine;
	socklen_t len = sizeof(mine);
	int probe, ret = 0;

	if (getsockname(rs->dg->udp, (struct sockaddr *)&mine, &len) < 0)
		return -errno;
	if (!any_addr(&mine)) {
		*src = mine;
		return 0;
	}
	len = sizeof(*src);
	probe = socket(dst->ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (probe < 0)
		return -errno;
	if (connect(probe, (const struct sockaddr *)dst, addr_len(dst)) < 0 ||
	    getsockname(probe, (struct sockaddr *)src, &len) < 0)
		ret = -errno;
	close(probe);
	if (ret == 0)	/* sin_port and sin6_port share their place */
		((struct sockaddr_in *)src)->sin_port =
			((struct sockaddr_in *)&mine)->sin_port;
	return ret;
}

static void fill_hdr(struct ds_hdr *h, const struct sockaddr_storage *mine)
{
	struct sockaddr_storage plain, *src = &plain;

	plain_addr(mine, &plain);	/* an IPv4 peer reads IPv4 headers only */
	memset(h, 0, sizeof(*h));
	if (src->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)src;

		h->version = 4;
		h->length = DS_IPV4_HDR_LEN;
		h->port = s->sin_port;
		h->addr.ipv4 = s->sin_addr.s_addr;
	} else {
		const struct sockaddr_in6 *s = (const void *)src;

		h->version = 6;
		h->length = DS_IPV6_HDR_LEN;
		h->port = s->sin6_port;
		h->addr.ipv6.flowinfo = s->sin6_flowinfo;
		memcpy(h->addr.ipv6.addr, &s->sin6_addr, 16);
	}
}

/* A UDP socket not yet bound gets an ephemeral port, as sendto(2) does. */
static int bind_any(struct rsocket *rs)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(rs->dg->udp, (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	if (((struct sockaddr_in *)&ss)->sin_port)
		return 0;
	memset(&ss, 0, sizeof(ss));
	ss.ss_family = (sa_family_t)rs->domain;
	if (bind(rs->dg->udp, (struct sockaddr *)&ss, addr_len(&ss)) < 0)
		return -errno;
	return 0;
}

/*
 * A dest slot for addr when all are taken: the next in turn (never
 * rconnect()'s), its address handle dropped; that peer, if it comes back,
 * is learnt again over UDP.
 */
static int reuse_dest(struct rs_dgram *dg, const struct sockaddr_storage *addr,
		      const struct sockaddr_storage *src)
{
	unsigned int i = dg->evict_next++ % DS_MAX_DESTS;
	struct ds_dest *d;

	if ((int)i == dg->conn)
		i = dg->evict_next++ % DS_MAX_DESTS;
	d = &dg->dests[i];
	forget_dest(dg, d);
	memset(d, 0, sizeof(*d));
	d->addr = *addr;
	fill_hdr(&d->hdr, src);
	return (int)i;
}

/* The dest entry for addr, made (with our QP, if we had none) if new. */
static int get_dest(struct rsocket *rs, const struct sockaddr_storage *addr)
{
	struct rs_dgram *dg = rs->dg;
	struct sockaddr_storage src;
	struct ds_dest *d;
	unsigned int i;
	int ret;

	for (i = 0; i < dg->ndests; i++)
		if (same_addr(&dg->dests[i].addr, addr))
			return (int)i;
	ret = bind_any(rs);
	if (ret == 0)
		ret = source_for(rs, addr, &src);
	if (ret == 0 && !dg->id)
		ret = make_qp(rs, &src);
	if (ret)
		return ret;
	/* Anyone may send to a UDP port: past the bound, reuse a slot. */
	if (dg->ndests == DS_MAX_DESTS)
		return reuse_dest(dg, addr, &src);
	if (dg->ndests == dg->cap) {
		unsigned int cap = dg->cap ? 2 * dg->cap : 8;

		d = realloc(dg->dests, cap * sizeof(*d));
		if (!d)
			return -ENOMEM;
		dg->dests = d;
		dg->cap = cap;
	}
	d = &dg->dests[dg->ndests];
	memset(d, 0, sizeof(*d));
	d->addr = *addr;
	fill_hdr(&d->hdr, &src);
	return (int)dg->ndests++;
}

/* ---- address handles -------------------------------------------------- */

static int gid_index(struct ibv_context *ctx, uint8_t port, const union ibv_gid *gid)
{
	struct ibv_port_attr pa;
	union ibv_gid g;
	int i;

	if (ibv_query_port(ctx, port, &pa))
		return 0;
	for (i = 0; i < pa.gid_tbl_len; i++)
		if (!ibv_query_gid(ctx, port, i, &g) && !memcmp(&g, gid, sizeof(g)))
			return i;
	return 0;
}

/* d's address handle from the path id resolved; 0 or -errno. */
static int make_ah(struct rs_dgram *dg, struct ds_dest *d, struct rdma_cm_id *id)
{
	struct ibv_ah_attr attr = { 0 };
	struct ibv_port_attr pa;
	struct ibv_ah *ah;

	if (!id->route.path_rec)
		return -EHOSTUNREACH;
	attr.dlid = be16toh(id->route.path_rec->dlid);
	attr.sl = id->route.path_rec->sl;
	attr.port_num = dg->id->port_num;
	if (!ibv_query_port(dg->id->verbs, attr.port_num, &pa) &&
	    (pa.link_layer == IBV_LINK_LAYER_ETHERNET || !attr.dlid)) {
		attr.is_global = 1;
		attr.grh.dgid = id->route.path_rec->dgid;
		attr.grh.sgid_index = (uint8_t)gid_index(dg->id->verbs, attr.port_num,
							 &id->route.path_rec->sgid);
		attr.grh.hop_limit = 64;
	}
	ah = ibv_create_ah(dg->pd, &attr);
	if (!ah)
		return -errno;
	if (d->ah)
		ibv_destroy_ah(d->ah);
	d->ah = ah;
	d->qpn = d->want_qpn;
	return 0;
}

static int open_resolutions(struct rs_dgram *dg)
{
	dg->rch = rdma_create_event_channel();
	if (!dg->rch)
		return -errno;
	if (fcntl(dg->rch->fd, F_SETFL, fcntl(dg->rch->fd, F_GETFL) | O_NONBLOCK) < 0) {
		rdma_destroy_event_channel(dg->rch);
		dg->rch = NULL;
		return -errno;
	}
	return 0;
}

/*
 * Start resolving the path to d, whose QP is qpn, as a connection's would
 * be: its events come to progress().  One already on its way just takes
 * the new QP number.
 */
static void resolve_dest(struct rs_dgram *dg, struct ds_dest *d, uint32_t qpn)
{
	struct sockaddr *local = rdma_get_local_addr(dg->id);
	struct sockaddr_storage src, dst;
	struct rdma_cm_id *id;

	d->want_qpn = qpn;
	if (d->resolving || dg->nresolving >= DS_MAX_RESOLVING ||
	    ibvd_mono_ns() < d->retry_ns)
		return;
	if (!dg->rch && open_resolutions(dg))
		return;
	memset(&src, 0, sizeof(src));
	memcpy(&src, local, local->sa_family == AF_INET6 ?
	       sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
	((struct sockaddr_in *)&src)->sin_port = 0;
	if (rdma_create_id(dg->rch, &id, NULL, RDMA_PS_UDP))
		return;
	plain_addr(&d->addr, &dst);
	if (rdma_resolve_addr(id, (struct sockaddr *)&src,
			      (struct sockaddr *)&dst, DS_RESOLVE_MS)) {
		rdma_destroy_id(id);
		d->retry_ns = ibvd_mono_ns() + DS_RESOLVE_RETRY_NS;
		return;
	}
	d->resolving = id;
	dg->nresolving++;
}

static struct ds_dest *resolving_dest(struct rs_dgram *dg,
				      const struct rdma_cm_id *id)
{
	unsigned int i;

	for (i = 0; i < dg->ndests; i++)
		if (dg->dests[i].resolving == id)
			return &dg->dests[i];
	return NULL;
}

/* One resolution event, acked: the next step, or the end of it. */
static void resolution_step(struct rs_dgram *dg, struct rdma_cm_event *ev)
{
	struct ds_dest *d = resolving_dest(dg, ev->id);
	enum rdma_cm_event_type type = ev->event;
	int ret = -EHOSTUNREACH;

	rdma_ack_cm_event(ev);
	if (!d)
		return;
	if (type == RDMA_CM_EVENT_ADDR_RESOLVED &&
	    rdma_resolve_route(d->resolving, DS_RESOLVE_MS) == 0)
		return;
	if (type == RDMA_CM_EVENT_ROUTE_RESOLVED)
		ret = make_ah(dg, d, d->resolving);
	rdma_destroy_id(d->resolving);
	d->resolving = NULL;
	dg->nresolving--;
	if (ret)
		d->retry_ns = ibvd_mono_ns() + DS_RESOLVE_RETRY_NS;
}

static void take_resolutions(struct rs_dgram *dg)
{
	struct rdma_cm_event *ev;

	while (dg->nresolving && rdma_get_cm_event(dg->rch, &ev) == 0)
		resolution_step(dg, ev);
}

/* ---- the UDP side ------------------------------------------------------- */

/*
 * A datagram over UDP: our header, then the data, gathered here (at most
 * a slot's worth, as on the QP, and from as many pieces).
 */
static ssize_t send_udp(struct rs_dgram *dg, const struct ds_dest *d, uint8_t op,
			const struct iovec *iov, int cnt, int flags)
{
	struct ds_udp_hdr h = { .tag = htobe32(DS_UDP_TAG), .op = op,
				.version = d->hdr.version };
	uint8_t data[RS_DS_SLOT];
	struct iovec v[2] = { { &h, 0 }, { data, 0 } };
	struct msghdr mh = { .msg_name = (void *)&d->addr,
			     .msg_namelen = addr_len(&d->addr), .msg_iov = v,
			     .msg_iovlen = 2 };
	ssize_t n;
	int k;

	for (k = 0; k < cnt; k++) {
		if (iov[k].iov_len > sizeof(data) - v[1].iov_len)
			return -EMSGSIZE;
		if (iov[k].iov_len)	/* an empty piece may have no buffer */
			memcpy(data + v[1].iov_len, iov[k].iov_base, iov[k].iov_len);
		v[1].iov_len += iov[k].iov_len;
	}
	h.qpn = htobe32(dg->id->qp->qp_num & 0xFFFFFF);
	if (h.version == 4) {
		h.length = DS_UDP_IPV4_HDR_LEN;
		h.addr.ipv4 = d->hdr.addr.ipv4;
	} else {
		h.length = DS_UDP_IPV6_HDR_LEN;
		memcpy(h.addr.ipv6, d->hdr.addr.ipv6.addr, 16);
	}
	v[0].iov_len = h.length;
	/* only what changes nothing of the datagram (not MSG_MORE: the
	 * kernel would hold it to join the next, whatever its peer) */
	n = sendmsg(dg->udp, &mh, (flags & (MSG_CONFIRM | MSG_DONTROUTE)) |
		    MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0)
		return -errno;
	return n - h.length;
}

/* from: its sender, an IPv4 one (IPv4-mapped to a dual-stack rsocket) or not */
static bool udp_hdr_ok(const struct ds_udp_hdr *h, size_t len,
		       const struct sockaddr_storage *from)
{
	bool v4 = from->ss_family == AF_INET || v4_mapped(from);

	if (len < DS_UDP_IPV4_HDR_LEN || be32toh(h->tag) != DS_UDP_TAG)
		return false;
	if (h->version == 4)
		return v4 && h->length == DS_UDP_IPV4_HDR_LEN;
	return h->version == 6 && !v4 &&
	       h->length == DS_UDP_IPV6_HDR_LEN && len >= DS_UDP_IPV6_HDR_LEN;
}

static void queue_pending(struct rs_dgram *dg, const struct sockaddr_storage *from,
			  const uint8_t *data, size_t len)
{
	struct ds_pending *p;

	if (dg->npend >= RS_DS_PENDING)
		return;		/* a full socket buffer drops it */
	p = malloc(sizeof(*p) + len);
	if (!p)
		return;
	p->next = NULL;
	p->from = *from;
	p->len = len;
	memcpy(p->data, data, len);
	if (dg->pend_tail)
		dg->pend_tail->next = p;
	else
		dg->pend_head = p;
	dg->pend_tail = p;
	dg->npend++;
}

/* One datagram from the UDP socket: 1 if there was one, 0 if none. */
static int udp_one(struct rsocket *rs)
{
	struct rs_dgram *dg = rs->dg;
	uint8_t buf[DS_UDP_IPV6_HDR_LEN + RS_DS_SLOT];
	struct sockaddr_storage from;
	socklen_t flen = sizeof(from);
	const struct ds_udp_hdr *h = (const void *)buf;
	struct ds_dest *d;
	ssize_t n;
	int i;

	n = recvfrom(dg->udp, buf, sizeof(buf), MSG_DONTWAIT,
		     (struct sockaddr *)&from, &flen);
	if (n < 0)
		return 0;
	if (!udp_hdr_ok(h, (size_t)n, &from))
		return 1;	/* not ours to read */
	i = get_dest(rs, &from);
	if (i < 0)
		return 1;
	d = &dg->dests[i];
	d->heard_ns = ibvd_mono_ns();
	if (h->op == DS_OP_DATA)
		(void)send_udp(dg, d, DS_OP_CTRL, NULL, 0, 0);
	if (!d->ah || d->qpn != (be32toh(h->qpn) & 0xFFFFFF))
		resolve_dest(dg, d, be32toh(h->qpn) & 0xFFFFFF);
	if (h->op == DS_OP_DATA)
		queue_pending(dg, &from, buf + h->length, (size_t)n - h->length);
	return 1;
}

/* ---- the QP side -------------------------------------------------------- */

/*
 * The source address a QP datagram's header names, in the rsocket's
 * family (an IPv4 sender seen by an IPv6 rsocket as IPv4-mapped, as a
 * dual-stack UDP socket sees it); false for one an IPv4 rsocket cannot
 * have heard from (an IPv6 header).
 */
static bool hdr_source(const struct ds_hdr *h, sa_family_t family,
		       struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (h->version == 4 && family == AF_INET) {
		struct sockaddr_in *s = (void *)ss;

		s->sin_family = AF_INET;
		s->sin_port = h->port;
		s->sin_addr.s_addr = h->addr.ipv4;
	} else if (h->version == 4) {
		struct sockaddr_in6 *s = (void *)ss;

		s->sin6_family = AF_INET6;
		s->sin6_port = h->port;
		s->sin6_addr.s6_addr[10] = 0xff;
		s->sin6_addr.s6_addr[11] = 0xff;
		memcpy(&s->sin6_addr.s6_addr[12], &h->addr.ipv4, 4);
	} else if (family == AF_INET6) {
		struct sockaddr_in6 *s = (void *)ss;

		s->sin6_family = AF_INET6;
		s->sin6_port = h->port;
		s->sin6_flowinfo = h->addr.ipv6.flowinfo;
		memcpy(&s->sin6_addr, h->addr.ipv6.addr, 16);
	} else {
		return false;
	}
	return true;
}

/*
 * The peer a QP datagram from QP qpn that names src as its source comes
 * from, or NULL if we know none there: one whose UDP datagrams came from
 * src (the kernel's word for the address) carrying qpn (or one we sent to
 * that answered so).  The header is the sender's to write: anyone with a UD
 * QP and our QP number (any UDP datagram to our port brings it back)
 * could otherwise name any address, another peer's included.
 */
static struct ds_dest *known_source(struct rs_dgram *dg,
				     const struct sockaddr_storage *src, uint32_t qpn)
{
	unsigned int i;

	for (i = 0; i < dg->ndests; i++)
		if (dg->dests[i].want_qpn == qpn && same_addr(&dg->dests[i].addr, src))
			return &dg->dests[i];
	return NULL;
}

static bool ds_hdr_ok(const struct ds_hdr *h, uint32_t len)
{
	if (len < DS_IPV4_HDR_LEN)
		return false;
	if (h->version == 4)
		return h->length == DS_IPV4_HDR_LEN;
	return h->version == 6 && h->length == DS_IPV6_HDR_LEN &&
	       len >= DS_IPV6_HDR_LEN;
}

static void take_wc(struct rs_dgram *dg, const struct ibv_wc *wc)
{
	uint32_t slot = (uint32_t)wc->wr_id, len;
	struct sockaddr_storage src;
	const struct ds_hdr *h;
	struct ds_done *done;
	struct ds_dest *d = NULL;

	/* wr_id, not opcode: an error completion's opcode means nothing */
	if (slot >= dg->nslots)
		return;
	if (wc->wr_id & DS_WR_SEND) {
		if (dg->nsfree < dg->nslots)
			dg->sfree[dg->nsfree++] = slot;
		return;
	}
	if (wc->status != IBV_WC_SUCCESS)
		return;		/* flushed: the QP is going away */
	h = (const void *)(dg->rbuf + DS_GRH + (size_t)slot * RS_DS_SLOT);
	len = wc->byte_len > DS_GRH ? wc->byte_len - DS_GRH : 0;
	if (!ds_hdr_ok(h, len) || dg->rcount == dg->nslots ||
	    !hdr_source(h, dg->family, &src) ||
	    !(d = known_source(dg, &src, wc->src_qp & 0xFFFFFF))) {
		(void)post_recv(dg, slot);
		return;
	}
	d->heard_ns = ibvd_mono_ns();
	done = &dg->rdone[(dg->rhead + dg->rcount++) % dg->nslots];
	done->slot = slot;
	done->len = len;
}

/*
 * UDP datagrams one progress() takes at most: anyone may send to the
 * port, and a flood must not keep the app's call in here (the rest stays
 * readable for the next look).
 */
#define DS_UDP_BUDGET	64

/* Take what the UDP socket and the CQ hold, without waiting. */
static void progress(struct rsocket *rs)
{
	struct rs_dgram *dg = rs->dg;
	struct ibv_cq *cq;
	struct ibv_wc wc[16];
	void *ctx;
	int n, i;

	for (n = 0; n < DS_UDP_BUDGET && udp_one(rs); n++)
		;
	take_resolutions(dg);
	if (!dg->cq)
		return;
	while (ibv_get_cq_event(dg->cch, &cq, &ctx) == 0) {
		dg->cq_unacked++;
		dg->cq_armed = false;
	}
	if (dg->cq_unacked >= 64) {
		ibv_ack_cq_events(dg->cq, dg->cq_unacked);
		dg->cq_unacked = 0;
	}
	while ((n = ibv_poll_cq(dg->cq, 16, wc)) > 0)
		for (i = 0; i < n; i++)
			take_wc(dg, &wc[i]);
}

static bool have_data(const struct rs_dgram *dg)
{
	return dg->pend_head || dg->rcount;
}

static bool can_send(const struct rs_dgram *dg)
{
	return !dg->cq || dg->nsfree > 0;
}

/* Sleep until the UDP socket or the CQ has news (or a slice passes). */
static int sleep_once(struct rsocket *rs)
{
	struct rs_dgram *dg = rs->dg;
	struct pollfd fds[3] = { { dg->udp, POLLIN, 0 } };
	nfds_t n = 1;
	int ret;

	if (dg->cq) {
		if (!dg->cq_armed) {
			ibv_req_notify_cq(dg->cq, 0);
			dg->cq_armed = true;
			return 0;	/* look again before sleeping */
		}
		fds[n].fd = dg->cch->fd;
		fds[n++].events = POLLIN;
	}
	if (dg->nresolving) {
		fds[n].fd = dg->rch->fd;
		fds[n++].events = POLLIN;
	}
	pthread_mutex_unlock(&rs->lock);
	ret = poll(fds, n, 100);
	pthread_mutex_lock(&rs->lock);
	return ret < 0 && errno == EINTR && !rs_restart_after_signal() ? -EINTR : 0;
}

static int wait_for(struct rsocket *rs, bool (*test)(const struct rs_dgram *),
		    bool nonblock)
{
	int ret;

	for (;;) {
		if (rs_gone(rs))
			return -EBADF;	/* rclose()d by another thread */
		progress(rs);
		if (test(rs->dg))
			return 0;
		if (nonblock)
			return -EAGAIN;
		ret = sleep_once(rs);
		if (ret)
			return ret;
	}
}

/* ---- the calls ---------------------------------------------------------- */

int rs_dgram_bind(struct rsocket *rs, const struct sockaddr *addr,
		  socklen_t len)
{
	const struct sockaddr_in *sin = (const void *)addr;
	const struct sockaddr_in6 *sin6 = (const void *)addr;
	struct sockaddr_storage ss;

	if (bind(rs->dg->udp, addr, len) < 0)
		return -errno;
	memset(&ss, 0, sizeof(ss));
	memcpy(&ss, addr, addr->sa_family == AF_INET ? sizeof(*sin) : sizeof(*sin6));
	if (any_addr(&ss) || rs->dg->id)
		return 0;
	/* A specific address names the device: the QP is made there now. */
	return make_qp(rs, &ss);
}

int rs_dgram_connect(struct rsocket *rs, const struct sockaddr *addr,
		     socklen_t len)
{
	struct sockaddr_storage ss;
	int i;

	memset(&ss, 0, sizeof(ss));
	memcpy(&ss, addr, len < sizeof(ss) ? len : sizeof(ss));
	i = get_dest(rs, &ss);
	if (i < 0)
		return i;
	rs->dg->conn = i;
	return 0;
}

static size_t iov_len(const struct iovec *iov, int cnt)
{
	size_t n = 0;
	int i;

	for (i = 0; i < cnt; i++)
		n += iov[i].iov_len;
	return n;
}

/*
 * The dest entry of the datagram being sent: to's (made if new), or the
 * connected peer's.  Looked up again after anything that may have run
 * progress(): a datagram from a new UDP source may have moved the table
 * (realloc) or, when it is full, given a slot to another address.
 */
static int send_dest(struct rsocket *rs, const struct sockaddr_storage *to)
{
	return to ? get_dest(rs, to) : rs->dg->conn;
}

/* Whether d has been silent long enough that this datagram goes over UDP. */
static bool ask_again(struct ds_dest *d)
{
	uint64_t now = ibvd_mono_ns();

	if (now - d->heard_ns < DS_REFRESH_NS || now - d->asked_ns < DS_REFRESH_NS)
		return false;
	d->asked_ns = now;
	return true;
}

/* A datagram of len bytes to dest i on our QP, into a free slot. */
static ssize_t post_qp(struct rsocket *rs, int i, const struct iovec *iov,
		       int cnt, size_t len)
{
	struct rs_dgram *dg = rs->dg;
	struct ds_dest *d = &dg->dests[i];
	struct ibv_sge sge;
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	uint8_t *p;
	uint32_t slot;
	int ret, k;

	slot = dg->sfree[--dg->nsfree];
	p = dg->sbuf + (size_t)slot * RS_DS_SLOT;
	memcpy(p, &d->hdr, d->hdr.length);
	sge.addr = (uintptr_t)p;
	sge.length = d->hdr.length + (uint32_t)len;
	sge.lkey = dg->smr->lkey;
	p += d->hdr.length;
	for (k = 0; k < cnt; p += iov[k].iov_len, k++)
		if (iov[k].iov_len)	/* an empty piece may have no buffer */
			memcpy(p, iov[k].iov_base, iov[k].iov_len);
	wr.wr_id = slot | DS_WR_SEND;
	wr.wr.ud.ah = d->ah;
	wr.wr.ud.remote_qpn = d->qpn;
	wr.wr.ud.remote_qkey = RDMA_UDP_QKEY;
	ret = ibv_post_send(dg->id->qp, &wr, &bad);
	if (ret) {
		dg->sfree[dg->nsfree++] = slot;
		return -ret;
	}
	return (ssize_t)len;
}

ssize_t rs_dgram_sendv(struct rsocket *rs, const struct iovec *iov, int cnt,
		       int flags, const struct sockaddr *to, socklen_t tolen)
{
	struct rs_dgram *dg = rs->dg;
	struct sockaddr_storage ss, *dest = NULL;
	size_t len = iov_len(iov, cnt);
	int i, ret, pass;

	/*
	 * A datagram of several calls (UDP's MSG_MORE) cannot be: what we
	 * send on the QP is a datagram each call; better refused than cut.
	 */
	if (flags & MSG_MORE)
		return -EOPNOTSUPP;
	if (to) {
		if (tolen < sizeof(struct sockaddr_in) || to->sa_family != rs->domain)
			return -EINVAL;
		memset(&ss, 0, sizeof(ss));
		memcpy(&ss, to, tolen < sizeof(ss) ? tolen : sizeof(ss));
		dest = &ss;
	} else if (dg->conn < 0) {
		return -EDESTADDRREQ;
	}
	i = send_dest(rs, dest);	/* made now if new, our QP with it */
	if (i < 0)
		return i;
	progress(rs);
	/* looked up after progress(), and again after the wait for a slot */
	for (pass = 0;; pass++) {
		i = send_dest(rs, dest);
		if (i < 0)
			return i;
		if (len > (size_t)(dg->max_msg - dg->dests[i].hdr.length))
			return -EMSGSIZE;
		if (!dg->dests[i].ah || ask_again(&dg->dests[i]))
			return send_udp(dg, &dg->dests[i], DS_OP_DATA, iov, cnt, flags);
		if (pass)
			return post_qp(rs, i, iov, cnt, len);
		ret = wait_for(rs, can_send, rs_nonblocking(rs, flags));
		if (ret)
			return ret;
	}
}

static void set_from(struct sockaddr *from, socklen_t *fromlen,
		     const struct sockaddr_storage *src)
{
	if (fromlen)
		*fromlen = rs_copy_sockaddr(from, from ? *fromlen : 0,
					    (const struct sockaddr *)src);
}

static size_t copy_to_iov(const struct iovec *iov, int cnt, const uint8_t *src,
			  size_t len)
{
	size_t done = 0, n;
	int i;

	for (i = 0; i < cnt && done < len; i++) {
		n = iov[i].iov_len < len - done ? iov[i].iov_len : len - done;
		if (n)		/* an empty piece may have no buffer */
			memcpy(iov[i].iov_base, src + done, n);
		done += n;
	}
	return done;
}

/*
 * What a receive of a datagram of len bytes, n of them copied, returns,
 * as UDP's: with MSG_TRUNC asked, the datagram's whole length; a datagram
 * cut short says so in *msg_flags (rrecvmsg's msg_flags).
 */
static ssize_t recv_result(size_t n, size_t len, int flags, int *msg_flags)
{
	if (msg_flags && n < len)
		*msg_flags |= MSG_TRUNC;
	return (ssize_t)(flags & MSG_TRUNC ? len : n);
}

ssize_t rs_dgram_recvv(struct rsocket *rs, const struct iovec *iov, int cnt,
		       int flags, struct sockaddr *from, socklen_t *fromlen,
		       int *msg_flags)
{
	struct rs_dgram *dg = rs->dg;
	struct sockaddr_storage src;
	struct ds_pending *p;
	const struct ds_hdr *h;
	uint32_t slot, len;
	size_t n;
	int ret;

	ret = wait_for(rs, have_data, rs_nonblocking(rs, flags));
	if (ret)
		return ret;
	if ((p = dg->pend_head)) {
		n = copy_to_iov(iov, cnt, p->data, p->len);
		set_from(from, fromlen, &p->from);
		len = (uint32_t)p->len;
		if (flags & MSG_PEEK)
			return recv_result(n, len, flags, msg_flags);
		dg->pend_head = p->next;
		if (!dg->pend_head)
			dg->pend_tail = NULL;
		dg->npend--;
		free(p);
		return recv_result(n, len, flags, msg_flags);
	}
	slot = dg->rdone[dg->rhead].slot;
	h = (const void *)(dg->rbuf + DS_GRH + (size_t)slot * RS_DS_SLOT);
	len = dg->rdone[dg->rhead].len - h->length;
	n = copy_to_iov(iov, cnt, (const uint8_t *)h + h->length, len);
	(void)hdr_source(h, dg->family, &src);	/* checked by take_wc() */
	set_from(from, fromlen, &src);
	if (flags & MSG_PEEK)
		return recv_result(n, len, flags, msg_flags);
	dg->rhead = (dg->rhead + 1) % dg->nslots;
	dg->rcount--;
	(void)post_recv(dg, slot);
	return recv_result(n, len, flags, msg_flags);
}

short rs_dgram_revents(struct rsocket *rs, short events, bool arm, int fds[2],
		       int *nfds)
{
	struct rs_dgram *dg = rs->dg;
	short rev = 0;

	progress(rs);
	if ((events & POLLIN) && have_data(dg))
		rev |= POLLIN;
	if ((events & POLLOUT) && can_send(dg))
		rev |= POLLOUT;
	*nfds = 0;
	if (!arm)
		return rev;
	if (!rev && dg->cq && !dg->cq_armed) {
		ibv_req_notify_cq(dg->cq, 0);
		dg->cq_armed = true;
		progress(rs);
		if ((events & POLLIN) && have_data(dg))
			rev |= POLLIN;
	}
	fds[(*nfds)++] = dg->udp;
	if (dg->cq)
		fds[(*nfds)++] = dg->cch->fd;
	return rev;
}

int rs_dgram_getsockname(struct rsocket *rs, struct sockaddr *addr,
			 socklen_t *len)
{
	return getsockname(rs->dg->udp, addr, len) < 0 ? -errno : 0;
}

int rs_dgram_getpeername(struct rsocket *rs, struct sockaddr *addr,
			 socklen_t *len)
{
	if (rs->dg->conn < 0)
		return -ENOTCONN;
	*len = rs_copy_sockaddr(addr, *len, (const struct sockaddr *)
				&rs->dg->dests[rs->dg->conn].addr);
	return 0;
}
