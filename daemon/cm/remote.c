/*
 * The IB CM on the wire: connections whose other end is on another host,
 * reached through a RoCE device.  The state machine is conn.c's; this
 * file speaks it in MADs on QP1 (mad.h, with rdma_cm's header of
 * cma_hdr.h), as Linux's ib_cm and rdma_cm do, so that the other end may
 * be another ibverbsd or a kernel's rdma_cm:
 *
 *   active   REQ ->            passive   (SIDR REQ -> for UD)
 *            <- REP (or MRA)             (<- SIDR REP)
 *            RTU ->
 *   either   DREQ ->  <- DREP, or REJ instead of any answer
 *
 * An id with a far peer has a struct cm_wire: the two comm IDs that name
 * the connection on the wire, the path (its device and GIDs), and the
 * last MAD that waits for an answer with its retry budget.  Arrivals find
 * their id by our comm ID (an answer's remote comm ID) from the GID we
 * talk to, or, for a retransmitted REQ, by the sender's comm ID and GID.
 * Anything else is dropped: QP1 is open to the network, and an answer to
 * garbage would make the daemon an amplifier.
 */
#include <config.h>

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/event.h>

#include "cma_hdr.h"
#include "core/device.h"
#include "core/objects.h"
#include "internal.h"
#include "log.h"
#include "mad.h"
#include "server/daemon.h"
#include "server/session.h"
#include "transport/gsi.h"

/* What we announce and use, as rdma_cm does. */
#define WIRE_RESPONSE_TIMEOUT	20	/* CM response timeout: 4.3 s */
#define WIRE_MAX_RETRIES	15	/* resends of an unanswered MAD */
#define WIRE_MRA_TIMEOUT	24	/* ~67 s: "the user has not answered yet" */
#define WIRE_TARGET_ACK_DELAY	15	/* rxe's ca_ack_delay */
#define WIRE_TID_REQ		1u	/* TID high word of a connection's MADs */
#define WIRE_PKEY		0xFFFF
#define WIRE_PERMISSIVE_LID	0xFFFF
/* MADs taken from the mailbox per loop turn: client requests go on. */
#define WIRE_BATCH		64
/* Buckets of wires by comm ID: each MAD looks in one, not at all wires. */
#define WIRE_HASH_BITS		12
#define WIRE_BUCKETS		(1u << WIRE_HASH_BITS)

struct cm_wire {
	/*
	 * NULL once the id is gone with its DREQ unanswered: the wire lives
	 * on alone, resending the DREQ until the DREP, so that the peer hears
	 * of the end even if the program destroys its id at once.
	 */
	struct ibvd_cm_id *id;
	LIST_ENTRY(cm_wire) link;
	LIST_ENTRY(cm_wire) by_local;	/* in its local comm ID's bucket */
	LIST_ENTRY(cm_wire) by_remote;	/* in the peer's comm ID's, once named */
	uint32_t local_comm_id;		/* ours: the request ID for SIDR */
	uint32_t remote_comm_id;	/* 0 until the peer named its end */
	bool remote_named;		/* it did (0 is an ID too): by_remote */
	uint64_t tid;			/* the REQ's: REP, RTU, MRA, REJ reuse it */
	uint64_t service_id;		/* SIDR: echoed in the SIDR REP */
	uint8_t path_mtu;		/* passive: what the REQ allowed */
	uint8_t peer_response_timeout;	/* the peer's CM response timeout,
					 * at most IBCM_PEER_TIMEOUT_MAX */
	/*
	 * The path (dev, GIDs, the peer's QP1) and the last MAD sent: while
	 * waiting, the one to resend; after, the one a duplicate gets again.
	 */
	struct ibvd_mad out;
	bool have_out;
	bool waiting;
	bool dreq_out;			/* our DREQ waits for its DREP */
	bool drep_owed;			/* the peer's DREQ waits for our app */
	uint64_t drep_tid;		/* ... whose TID our DREP echoes */
	bool orphan;			/* its id is gone (wire_orphan) */
	bool mraed;			/* the peer asked this wait to last */
	unsigned int retries;		/* resends left while waiting */
	uint32_t wait_ms;
	struct event *timer;
};

LIST_HEAD(wire_list, cm_wire);

static struct {
	struct wire_list all;
	/*
	 * By comm ID, ours and the peer's.  A peer picks its own IDs: the
	 * buckets are keyed with a secret, so that it cannot pile them into
	 * one (all zero: a LIST_HEAD's initial state).
	 */
	struct wire_list local[WIRE_BUCKETS], remote[WIRE_BUCKETS];
	uint32_t hash_key;
	uint32_t dreq_seq;
	struct event *inbox;
	uint64_t dropped;		/* MADs that fit no connection */
} wires = { .all = LIST_HEAD_INITIALIZER(wires.all) };

/* ---- wires ---------------------------------------------------------- */

static unsigned int wire_bucket(uint32_t cid)
{
	return (unsigned int)(((cid ^ wires.hash_key) * 0x9E3779B1u) >>
			      (32 - WIRE_HASH_BITS));
}

static struct wire_list *by_local(uint32_t cid)
{
	return &wires.local[wire_bucket(cid)];
}

static struct wire_list *by_remote(uint32_t cid)
{
	return &wires.remote[wire_bucket(cid)];
}

static bool comm_id_used(uint32_t cid)
{
	struct cm_wire *w;

	LIST_FOREACH(w, by_local(cid), by_local)
		if (w->local_comm_id == cid)
			return true;
	return false;
}

/* The peer named its end of w: cid, which may be 0. */
static void wire_set_remote(struct cm_wire *w, uint32_t cid)
{
	if (w->remote_named)
		LIST_REMOVE(w, by_remote);
	w->remote_comm_id = cid;
	LIST_INSERT_HEAD(by_remote(cid), w, by_remote);
	w->remote_named = true;
}

static uint32_t comm_id_new(void)
{
	uint32_t cid;

	/*
	 * Random, not a counter: a peer that saw one of ours (in a REP or an
	 * MRA) could otherwise guess the next connection's, and answer its
	 * REQ with a REJ or a REP of its own.
	 */
	do
		cid = ibvd_random32();
	while (cid == 0 || comm_id_used(cid));
	return cid;
}

static void wire_timer_cb(evutil_socket_t fd, short what, void *arg);

/* The wire of id, on dev between our lgid and the peer's rgid. */
static struct cm_wire *wire_new(struct ibvd_cm_id *id, struct ibvd_device *dev,
				const uint8_t lgid[16], const uint8_t rgid[16],
				uint32_t remote_qpn)
{
	struct cm_wire *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	w->timer = evtimer_new(id->cm->session->daemon->base, wire_timer_cb, w);
	if (!w->timer) {
		free(w);
		return NULL;
	}
	w->id = id;
	w->local_comm_id = comm_id_new();
	w->out.dev = dev;
	memcpy(w->out.local_gid, lgid, 16);
	memcpy(w->out.remote_gid, rgid, 16);
	w->out.remote_qpn = remote_qpn;
	w->out.traffic_class = id->tos;
	w->out.hop_limit = CM_GRH_HOP_LIMIT;
	LIST_INSERT_HEAD(&wires.all, w, link);
	LIST_INSERT_HEAD(by_local(w->local_comm_id), w, by_local);
	id->wire = w;
	return w;
}

/*
 * Wires whose id is gone and whose DREQ waits for its DREP, resent for a
 * minute or more.  Nothing charges them to their tenant (its cm_id went
 * back at the destroy), and a peer that never answers DREQs would let a
 * client that connects and destroys in a loop pile them up; past the
 * cap, a destroyed connection's DREQ goes out once.
 */
#define ORPHANS_MAX	4096u

static unsigned int norphans;

static void wire_free(struct cm_wire *w)
{
	if (w->orphan)
		norphans--;
	event_free(w->timer);
	LIST_REMOVE(w, link);
	LIST_REMOVE(w, by_local);
	if (w->remote_named)
		LIST_REMOVE(w, by_remote);
	if (w->id)
		w->id->wire = NULL;
	free(w);
}

void cm_wire_forget(struct ibvd_cm_id *id)
{
	if (id->wire)
		wire_free(id->wire);
}

/* The id goes, its DREQ still unanswered: the wire carries on alone. */
static void wire_orphan(struct cm_wire *w)
{
	w->id->wire = NULL;
	w->id = NULL;
	w->orphan = true;
	norphans++;
}

uint32_t cm_wire_mtu(const struct ibvd_cm_id *id)
{
	return id->wire ? id->wire->path_mtu : 0;
}

/* ---- sending ---------------------------------------------------------- */

static const char *attr_name(uint16_t attr)
{
	switch (attr) {
	case IBCM_ATTR_REQ:		return "REQ";
	case IBCM_ATTR_MRA:		return "MRA";
	case IBCM_ATTR_REJ:		return "REJ";
	case IBCM_ATTR_REP:		return "REP";
	case IBCM_ATTR_RTU:		return "RTU";
	case IBCM_ATTR_DREQ:		return "DREQ";
	case IBCM_ATTR_DREP:		return "DREP";
	case IBCM_ATTR_SIDR_REQ:	return "SIDR REQ";
	case IBCM_ATTR_SIDR_REP:	return "SIDR REP";
	}
	return "MAD";
}

/*
 * What crosses QP1, at debug level: "roce0: CM REQ out, TID ...".  At
 * most 50 lines a second: any host on the network can send MADs.
 */
static void log_mad(const struct ibvd_mad *mad, const char *dir)
{
	static struct ibvd_ratelimit rl = IBVD_RATELIMIT_INIT(50);
	struct ibcm_mad_hdr h;

	if (ibvd_log_get_level() < IBVD_LOG_DEBUG)
		return;
	ibcm_hdr_decode(mad->data, &h);
	ibvd_log_ratelimited(&rl, IBVD_LOG_DEBUG, "%s: CM %s %s, TID %#llx",
			     mad->dev->name, attr_name(h.attr_id), dir,
			     (unsigned long long)h.tid);
}

static int mad_send(const struct ibvd_mad *mad)
{
	log_mad(mad, "out");
	return ibvd_gsi_send(mad);
}

static void msg_init(struct ibcm_msg *m, uint16_t attr, uint64_t tid)
{
	memset(m, 0, sizeof(*m));
	ibcm_hdr_init(&m->hdr, attr, tid);
}

static void wire_arm(struct cm_wire *w, uint32_t ms)
{
	struct timeval tv = {
		.tv_sec = ms / 1000,
		.tv_usec = (ms % 1000) * 1000,
	};

	w->wait_ms = ms;
	evtimer_add(w->timer, &tv);
}

static void wire_settle(struct cm_wire *w)
{
	w->waiting = false;
	w->mraed = false;
	evtimer_del(w->timer);
}

/*
 * MADs not sent: every connection of every client sends them, so a full
 * socket buffer would log one line each; a few a second say enough.
 */
static struct ibvd_ratelimit unsent_rl = IBVD_RATELIMIT_INIT(5);

/*
 * Send m on w's path; kept for duplicates, and resent every wait_ms
 * until an answer settles it when wait_ms is not 0.
 */
static int wire_send(struct cm_wire *w, const struct ibcm_msg *m,
		     uint32_t wait_ms)
{
	int ret = ibcm_encode(m, w->out.data);

	if (ret < 0)
		return ret;
	w->have_out = true;
	wire_settle(w);
	ret = mad_send(&w->out);
	/* not sent: as a MAD lost on the way, resent until the retries end */
	if (ret < 0)
		ibvd_log_ratelimited(&unsent_rl, IBVD_LOG_WARNING,
				     "%s: CM MAD %#x not sent: %s",
				     w->out.dev->name, m->hdr.attr_id,
				     strerror(-ret));
	if (wait_ms) {
		w->waiting = true;
		w->retries = WIRE_MAX_RETRIES;
		wire_arm(w, wait_ms);
	}
	return ret;
}

/* The last MAD again, for a duplicate of what it answered. */
static void wire_resend(struct cm_wire *w)
{
	if (w->have_out)
		mad_send(&w->out);
}

/* A MAD on the path an arrival came from, for a sender we keep no wire of. */
static void answer_stranger(const struct ibvd_mad *in, const struct ibcm_msg *m)
{
	struct ibvd_mad out = *in;

	out.hop_limit = CM_GRH_HOP_LIMIT;
	if (ibcm_encode(m, out.data) == 0)
		mad_send(&out);
}

static void reject_stranger(const struct ibvd_mad *in, uint64_t tid,
			    uint32_t remote_comm_id, uint16_t reason)
{
	struct ibcm_msg m;

	msg_init(&m, IBCM_ATTR_REJ, tid);
	m.rej.remote_comm_id = remote_comm_id;
	m.rej.msg_rejected = IBCM_MSG_REQ;
	m.rej.reason = reason;
	answer_stranger(in, &m);
}

static void sidr_answer_stranger(const struct ibvd_mad *in,
				 const struct ibcm_msg *req, uint8_t status)
{
	struct ibcm_msg m;

	msg_init(&m, IBCM_ATTR_SIDR_REP, req->hdr.tid);
	m.sidr_rep.request_id = req->sidr_req.request_id;
	m.sidr_rep.status = status;
	m.sidr_rep.service_id = req->sidr_req.service_id;
	answer_stranger(in, &m);
}

/* The user's private data into a message's field of room bytes. */
static void pdata_copy(uint8_t *field, size_t room, const uint8_t *pdata,
		       size_t len)
{
	if (len > room)
		len = room;
	/* memcpy's source may not be NULL, even for no bytes */
	if (len)
		memcpy(field, pdata, len);
}

/* A REQ's or SIDR REQ's private data: rdma_cm's header, then the user's. */
static size_t request_pdata(const struct ibvd_cm_id *a, const uint8_t *pdata,
			    size_t len, uint8_t *out, size_t room)
{
	struct cma_hdr h;

	if (cma_hdr_from_addrs(&h, (const struct sockaddr *)&a->src,
			       (const struct sockaddr *)&a->dst) < 0)
		return 0;
	cma_hdr_encode(&h, out);
	pdata_copy(out + CMA_HDR_LEN, room - CMA_HDR_LEN, pdata, len);
	return room;
}

/*
 * The local ACK timeout a REQ announces for a path's packet lifetime, as
 * the kernel's IB CM computes it (cm_ack_timeout): the lifetime's round
 * trip and the CA's ACK delay, the larger plus one when they are close;
 * at most 31.
 */
static uint8_t ack_timeout(unsigned int ca_ack_delay, unsigned int life)
{
	unsigned int t = life + 1;

	if (t >= ca_ack_delay)
		t += ca_ack_delay >= t - 1;
	else
		t = ca_ack_delay + (t >= ca_ack_delay - 1);
	return (uint8_t)(t < 31 ? t : 31);
}

uint8_t cm_req_ack_timeout(const struct ibvd_cm_id *id)
{
	return ack_timeout(CM_CA_ACK_DELAY, id->timeout_set && id->timeout ?
					    id->timeout - 1u : CM_PACKET_LIFETIME);
}

/*
 * The REQ's transport service type: RC, UC, or XRC's (an initiator's:
 * type 3, extended type 1, as the kernel's CM says it).
 */
static void req_transport(uint32_t qp_type, struct ibcm_req *r)
{
	switch (qp_type) {
	case IBV_QPT_UC:
		r->transport = IBCM_TRANSPORT_UC;
		break;
	case IBV_QPT_XRC_SEND:
		r->transport = IBCM_TRANSPORT_XRC;
		r->ext_transport = IBCM_EXT_TRANSPORT_XRC;
		break;
	default:
		r->transport = IBCM_TRANSPORT_RC;
	}
}

/* The QP type a REQ asks of its listener, or 0 for one we don't take. */
static uint32_t req_qp_type(const struct ibcm_req *r)
{
	switch (r->transport) {
	case IBCM_TRANSPORT_RC:
		return IBV_QPT_RC;
	case IBCM_TRANSPORT_UC:
		return IBV_QPT_UC;
	case IBCM_TRANSPORT_XRC:
		return r->ext_transport == IBCM_EXT_TRANSPORT_XRC ?
		       IBV_QPT_XRC_SEND : 0;
	default:
		return 0;
	}
}

static void req_fill(const struct ibvd_cm_id *a, const struct cm_wire *w,
		     struct ibcm_req *r)
{
	const struct cm_conn_param *p = &a->local;

	r->local_comm_id = w->local_comm_id;
	r->service_id = cma_service_id(a->ps, cm_addr_port(&a->dst));
	r->local_ca_guid = a->dev->node_guid;
	r->local_qpn = p->qp_num;
	r->responder_resources = p->responder_resources;
	r->initiator_depth = p->initiator_depth;
	r->remote_cm_response_timeout = WIRE_RESPONSE_TIMEOUT;
	req_transport(a->qp_type, r);
	r->e2e_flow_control = p->flow_control;
	r->starting_psn = p->psn;
	r->local_cm_response_timeout = WIRE_RESPONSE_TIMEOUT;
	r->retry_count = p->retry_count;
	r->pkey = WIRE_PKEY;
	r->path_mtu = (uint8_t)cm_port_mtu(a);
	r->rnr_retry_count = p->rnr_retry_count;
	r->max_cm_retries = WIRE_MAX_RETRIES;
	r->srq = p->srq;
	/* RoCE: permissive LIDs, the path is the GIDs */
	r->primary.local_lid = WIRE_PERMISSIVE_LID;
	r->primary.remote_lid = WIRE_PERMISSIVE_LID;
	memcpy(r->primary.local_gid, w->out.local_gid, 16);
	memcpy(r->primary.remote_gid, w->out.remote_gid, 16);
	r->primary.flow_label = cma_flow_label(cm_addr_port(&a->src),
					       cm_addr_port(&a->dst));
	r->primary.traffic_class = a->tos;
	r->primary.hop_limit = cm_route_hop_limit(a);
	r->primary.local_ack_timeout = cm_req_ack_timeout(a);
}

static uint32_t request_wait_ms(void)
{
	return ibcm_req_wait_ms(CM_PACKET_LIFETIME, WIRE_RESPONSE_TIMEOUT);
}

void cm_wire_connect(struct ibvd_cm_id *a, const uint8_t *pdata, size_t len)
{
	uint8_t lgid[16], rgid[16];
	struct ibcm_msg m;
	struct cm_wire *w;
	int ret = -ENOMEM;

	cm_path_gids(a, lgid, rgid);
	w = wire_new(a, a->dev, lgid, rgid, 1);
	if (!w)
		goto fail;
	w->tid = (uint64_t)WIRE_TID_REQ << 32 | w->local_comm_id;
	if (cm_is_ud(a)) {
		msg_init(&m, IBCM_ATTR_SIDR_REQ, w->tid);
		m.sidr_req.request_id = w->local_comm_id;
		m.sidr_req.pkey = WIRE_PKEY;
		m.sidr_req.service_id = cma_service_id(a->ps,
						       cm_addr_port(&a->dst));
		request_pdata(a, pdata, len, m.sidr_req.pdata,
			      IBCM_SIDR_REQ_PDATA);
	} else {
		msg_init(&m, IBCM_ATTR_REQ, w->tid);
		req_fill(a, w, &m.req);
		request_pdata(a, pdata, len, m.req.pdata, IBCM_REQ_PDATA);
	}
	ret = wire_send(w, &m, request_wait_ms());
	if (ret == 0)
		return;
	/* the app hears UNREACHABLE now: no resends behind its back */
	wire_settle(w);
fail:
	a->phase = CM_PH_CLOSED;
	cm_event_simple(a, RDMA_CM_EVENT_UNREACHABLE, ret);
}

void cm_wire_accept(struct ibvd_cm_id *c, const uint8_t *pdata, size_t len)
{
	struct cm_wire *w = c->wire;
	const struct cm_conn_param *p = &c->local;
	struct ibcm_msg m;

	if (cm_is_ud(c)) {
		msg_init(&m, IBCM_ATTR_SIDR_REP, w->tid);
		m.sidr_rep.request_id = w->remote_comm_id;
		m.sidr_rep.status = IBCM_SIDR_SUCCESS;
		m.sidr_rep.qpn = p->qp_num;
		m.sidr_rep.service_id = w->service_id;
		m.sidr_rep.qkey = p->qkey;
		pdata_copy(m.sidr_rep.pdata, IBCM_SIDR_REP_PDATA, pdata, len);
		/* SIDR is one exchange: the REP is kept for duplicates only. */
		c->phase = CM_PH_CLOSED;
		wire_send(w, &m, 0);
		return;
	}
	msg_init(&m, IBCM_ATTR_REP, w->tid);
	m.rep.local_comm_id = w->local_comm_id;
	m.rep.remote_comm_id = w->remote_comm_id;
	m.rep.local_qkey = p->qkey;
	/* an XRC target's QP number goes where an EE context's would */
	if (c->qp_type == IBV_QPT_XRC_RECV)
		m.rep.local_eecn = p->qp_num;
	else
		m.rep.local_qpn = p->qp_num;
	m.rep.starting_psn = p->psn;
	m.rep.responder_resources = p->responder_resources;
	m.rep.initiator_depth = p->initiator_depth;
	m.rep.target_ack_delay = WIRE_TARGET_ACK_DELAY;
	m.rep.e2e_flow_control = p->flow_control;
	m.rep.rnr_retry_count = p->rnr_retry_count;
	m.rep.srq = p->srq || c->qp_type == IBV_QPT_XRC_RECV;
	m.rep.local_ca_guid = c->dev ? c->dev->node_guid : 0;
	pdata_copy(m.rep.pdata, IBCM_REP_PDATA, pdata, len);
	wire_send(w, &m, ibcm_req_wait_ms(CM_PACKET_LIFETIME,
					  w->peer_response_timeout));
}

/* A REJ for w's connection: of its REQ, its REP, or later. */
static void send_rej(struct cm_wire *w, uint8_t msg, uint16_t reason,
		     const uint8_t *pdata, size_t len)
{
	struct ibcm_msg m;

	msg_init(&m, IBCM_ATTR_REJ, w->tid);
	m.rej.local_comm_id = w->local_comm_id;
	m.rej.remote_comm_id = w->remote_comm_id;
	m.rej.msg_rejected = msg;
	m.rej.reason = reason;
	/* a TIMEOUT says whose: our CA GUID, by which a peer that has not
	 * heard our comm ID yet (REQ_SENT) finds its end (IBTA 12.6.7) */
	if (reason == IBCM_REJ_TIMEOUT && w->id && w->id->dev) {
		uint64_t guid = htobe64(w->id->dev->node_guid);

		memcpy(m.rej.ari, &guid, sizeof(guid));
		m.rej.ari_len = sizeof(guid);
	}
	pdata_copy(m.rej.pdata, IBCM_REJ_PDATA, pdata, len);
	wire_send(w, &m, 0);
}

static void send_sidr_refusal(struct cm_wire *w, uint8_t status,
			      const uint8_t *pdata, size_t len)
{
	struct ibcm_msg m;

	msg_init(&m, IBCM_ATTR_SIDR_REP, w->tid);
	m.sidr_rep.request_id = w->remote_comm_id;
	m.sidr_rep.status = status;
	m.sidr_rep.service_id = w->service_id;
	pdata_copy(m.sidr_rep.pdata, IBCM_SIDR_REP_PDATA, pdata, len);
	wire_send(w, &m, 0);
}

void cm_wire_reject(struct ibvd_cm_id *id, uint16_t reason,
		    const uint8_t *pdata, size_t len)
{
	struct cm_wire *w = id->wire;
	uint8_t msg = IBCM_MSG_OTHER;	/* our REP, answered by no RTU yet */

	if (id->phase == CM_PH_REQ_RCVD)
		msg = IBCM_MSG_REQ;
	else if (id->phase == CM_PH_REP_RCVD)
		msg = IBCM_MSG_REP;
	if (cm_is_ud(id))
		send_sidr_refusal(w, IBCM_SIDR_REJECT, pdata, len);
	else
		send_rej(w, msg, reason, pdata, len);
}

void cm_wire_establish(struct ibvd_cm_id *a)
{
	struct cm_wire *w = a->wire;
	struct ibcm_msg m;

	msg_init(&m, IBCM_ATTR_RTU, w->tid);
	m.rtu.local_comm_id = w->local_comm_id;
	m.rtu.remote_comm_id = w->remote_comm_id;
	wire_send(w, &m, 0);
}

/*
 * Traffic established the passive side before the RTU (rdma_notify with
 * IBV_EVENT_COMM_EST): our REP needs no more resends, as the kernel's CM
 * stops them at COMM_EST.
 */
void cm_wire_comm_est(struct ibvd_cm_id *c)
{
	if (c->wire)
		wire_settle(c->wire);
}

static void send_dreq(struct cm_wire *w, uint32_t wait_ms)
{
	struct ibcm_msg m;

	/* A DREQ is an exchange of its own: a fresh TID, echoed by DREP. */
	msg_init(&m, IBCM_ATTR_DREQ,
		 (uint64_t)(WIRE_TID_REQ + 1 + ++wires.dreq_seq) << 32 |
		 w->local_comm_id);
	m.dreq.local_comm_id = w->local_comm_id;
	m.dreq.remote_comm_id = w->remote_comm_id;
	m.dreq.remote_qpn = w->id->remote.qp_num;
	wire_send(w, &m, wait_ms);
}

/*
 * Our DREQ, resent until the DREP: only then (or when the retries run
 * out) does our side hear DISCONNECTED, as from the kernel's rdma_cm, so
 * that a program which destroys its id at DISCONNECTED does not take the
 * DREQ's retransmissions with it.
 */
void cm_wire_disconnect(struct ibvd_cm_id *id)
{
	struct cm_wire *w = id->wire;

	send_dreq(w, request_wait_ms());
	w->dreq_out = true;
}

/*
 * The DREQ exchange is over: DREP, a crossing DREQ or a REJ (status 0),
 * or no answer (-ETIMEDOUT, as the kernel's IB_CM_DREQ_ERROR).
 */
static void dreq_end(struct cm_wire *w, int status)
{
	/* no DREQ of ours: what waits (a REQ, a REP) is not this exchange's */
	if (!w->dreq_out)
		return;
	wire_settle(w);
	w->dreq_out = false;
	if (w->id)
		cm_send_disconnected(w->id, status);
	else
		wire_free(w);
}

static void dreq_done(struct cm_wire *w)
{
	dreq_end(w, 0);
}

/*
 * The peer's DREQ is answered when our app says so (rdma_disconnect, or
 * the id's end), as the kernel's CM answers it (ib_send_cm_drep, or
 * cm_destroy_id in DREQ_RCVD): the peer's DISCONNECTED waits for it.
 */
void cm_wire_drep(struct ibvd_cm_id *id)
{
	struct cm_wire *w = id->wire;
	struct ibcm_msg m;

	if (!w || !w->drep_owed)
		return;
	w->drep_owed = false;
	msg_init(&m, IBCM_ATTR_DREP, w->drep_tid);
	m.drep.local_comm_id = w->local_comm_id;
	m.drep.remote_comm_id = w->remote_comm_id;
	wire_send(w, &m, 0);
}

void cm_wire_abandon(struct ibvd_cm_id *id)
{
	struct cm_wire *w = id->wire;

	if (!w)
		return;
	/* the peer's DREQ is answered when the id goes, as ib_cm's */
	cm_wire_drep(id);
	switch (id->phase) {
	case CM_PH_REQ_SENT:
		if (!cm_is_ud(id))
			send_rej(w, IBCM_MSG_REQ, IBCM_REJ_TIMEOUT, NULL, 0);
		break;
	case CM_PH_REQ_RCVD:
		if (cm_is_ud(id))
			send_sidr_refusal(w, IBCM_SIDR_REJECT, NULL, 0);
		else
			send_rej(w, IBCM_MSG_REQ, IBCM_REJ_CONSUMER_DEFINED,
				 NULL, 0);
		break;
	case CM_PH_REP_RCVD:
		send_rej(w, IBCM_MSG_REP, IBCM_REJ_CONSUMER_DEFINED, NULL, 0);
		break;
	case CM_PH_REP_SENT:
		send_rej(w, IBCM_MSG_OTHER, IBCM_REJ_CONSUMER_DEFINED, NULL, 0);
		break;
	case CM_PH_ESTABLISHED:
		send_dreq(w, request_wait_ms());
		w->dreq_out = true;
		break;
	case CM_PH_NONE:
	case CM_PH_CLOSED:
		break;
	}
	if (w->dreq_out && w->waiting && norphans < ORPHANS_MAX)
		wire_orphan(w);
	else
		wire_free(w);
}

/* ---- no answer -------------------------------------------------------- */

/* The retries ran out: what ib_cm reports, as rdma_cm turns it into events. */
static void wire_gave_up(struct cm_wire *w)
{
	struct ibvd_cm_id *id = w->id;

	switch (id->phase) {
	case CM_PH_REQ_SENT:
		id->phase = CM_PH_CLOSED;
		cm_event_simple(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
		break;
	case CM_PH_REP_SENT:
		send_rej(w, IBCM_MSG_REP, IBCM_REJ_TIMEOUT, NULL, 0);
		id->phase = CM_PH_CLOSED;
		cm_event_simple(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
		break;
	default:
		dreq_end(w, -ETIMEDOUT);
		break;
	}
}

static void wire_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cm_wire *w = arg;

	(void)fd;
	(void)what;
	if (!w->waiting)
		return;
	if (w->retries == 0) {
		w->waiting = false;
		if (w->id)
			wire_gave_up(w);
		else
			dreq_done(w);
		return;
	}
	w->retries--;
	wire_resend(w);
	wire_arm(w, w->wait_ms);
}

/* ---- arrivals --------------------------------------------------------- */

/*
 * The wire an answer is for: our comm ID, from the GID we talk to; one
 * without an id (a DREQ's own) only if orphans is true.
 */
static struct cm_wire *wire_find(const struct ibvd_mad *in, uint32_t cid,
				 bool orphans)
{
	struct cm_wire *w;

	LIST_FOREACH(w, by_local(cid), by_local)
		if (w->local_comm_id == cid && w->out.dev == in->dev &&
		    !memcmp(w->out.remote_gid, in->remote_gid, 16))
			return w->id || orphans ? w : NULL;
	return NULL;
}

static struct cm_wire *wire_answered(const struct ibvd_mad *in, uint32_t cid)
{
	return wire_find(in, cid, false);
}

/* The wire of a request already taken: the sender's comm ID and GID. */
static struct cm_wire *wire_requested(const struct ibvd_mad *in, uint32_t cid)
{
	struct cm_wire *w;

	LIST_FOREACH(w, by_remote(cid), by_remote)
		if (w->remote_comm_id == cid && w->id && !w->id->active &&
		    w->out.dev == in->dev &&
		    !memcmp(w->out.remote_gid, in->remote_gid, 16))
			return w;
	return NULL;
}

/*
 * The listener a request is for: the service ID's port space and port,
 * the header's addresses (the destination one of this device's).  0, or
 * the REJ reason / SIDR status to answer with.
 */
static int request_target(const struct ibvd_mad *in, uint64_t sid,
			  const uint8_t *pdata, size_t len, bool ud,
			  struct ibvd_cm_id **l, struct sockaddr_storage *src,
			  struct sockaddr_storage *dst)
{
	uint8_t gid[16];
	struct cma_hdr h;

	if (!cma_service_id_ok(sid) || cma_hdr_decode(pdata, len, &h) < 0)
		return -1;
	cma_hdr_to_addrs(&h, cma_service_port(sid), src, dst);
	cm_addr_to_gid(dst, gid);
	if (memcmp(gid, in->local_gid, 16))
		return -1;
	/*
	 * The source too is where the packet came from: the child's path
	 * and the app's rdma_get_peer_addr are made of it, so a header that
	 * named another address (a third host, a multicast group) would
	 * aim the connection's traffic there.
	 */
	cm_addr_to_gid(src, gid);
	if (memcmp(gid, in->remote_gid, 16))
		return -1;
	*l = cm_find_listener(cma_service_ps(sid), dst);
	if (!*l || cm_is_ud(*l) != ud)
		return -1;
	return cm_listener_takes(*l, ud) ? 0 : -2;
}

/* A new far request on l: its passive id and wire, or NULL. */
static struct ibvd_cm_id *request_take(const struct ibvd_mad *in,
				       struct ibvd_cm_id *l,
				       const struct sockaddr_storage *src,
				       const struct sockaddr_storage *dst,
				       const struct cm_conn_param *p,
				       uint32_t remote_cid, uint64_t tid)
{
	struct ibvd_cm_id *c = cm_child_new(l, in->dev, src, dst, p);
	struct cm_wire *w;

	if (!c)
		return NULL;
	w = wire_new(c, in->dev, in->local_gid, in->remote_gid, in->remote_qpn);
	if (!w) {
		cm_id_destroy(c);
		return NULL;
	}
	wire_set_remote(w, remote_cid);
	w->tid = tid;
	return c;
}

static void on_req(const struct ibvd_mad *in, const struct ibcm_msg *m)
{
	const struct ibcm_req *r = &m->req;
	struct sockaddr_storage src, dst;
	struct cm_conn_param p = {
		.responder_resources = r->responder_resources,
		.initiator_depth = r->initiator_depth,
		.flow_control = r->e2e_flow_control,
		.retry_count = r->retry_count,
		.rnr_retry_count = r->rnr_retry_count,
		.srq = r->srq,
		.qp_num = r->local_qpn,
		.qkey = r->local_qkey,
		.psn = r->starting_psn,
	};
	struct ibvd_cm_id *l, *c;
	struct cm_wire *w = wire_requested(in, r->local_comm_id);
	uint32_t qp_type = req_qp_type(r);
	struct ibcm_msg mra;
	int ret;

	if (w) {
		/* A resend: the REP again, or "wait, the user decides". */
		if (w->id->phase != CM_PH_REQ_RCVD) {
			wire_resend(w);
			return;
		}
		msg_init(&mra, IBCM_ATTR_MRA, w->tid);
		mra.mra.local_comm_id = w->local_comm_id;
		mra.mra.remote_comm_id = w->remote_comm_id;
		mra.mra.msg_mraed = IBCM_MSG_REQ;
		mra.mra.service_timeout = WIRE_MRA_TIMEOUT;
		answer_stranger(in, &mra);
		return;
	}
	if (!qp_type) {
		reject_stranger(in, m->hdr.tid, r->local_comm_id,
				IBCM_REJ_INVALID_TRANSPORT_TYPE);
		return;
	}
	ret = request_target(in, r->service_id, r->pdata, IBCM_REQ_PDATA, false,
			     &l, &src, &dst);
	if (ret == 0 && !cm_listener_type_takes(l, qp_type))
		ret = -1;
	if (ret < 0) {
		reject_stranger(in, m->hdr.tid, r->local_comm_id,
				ret == -1 ? IBCM_REJ_INVALID_SERVICE_ID :
					    IBCM_REJ_NO_RESOURCES);
		return;
	}
	c = request_take(in, l, &src, &dst, &p, r->local_comm_id, m->hdr.tid);
	if (!c) {
		reject_stranger(in, m->hdr.tid, r->local_comm_id,
				IBCM_REJ_NO_RESOURCES);
		return;
	}
	c->wire->peer_response_timeout =
		ibcm_peer_req_timeout(r->local_cm_response_timeout);
	c->wire->path_mtu = r->path_mtu < cm_port_mtu(c) ? r->path_mtu :
						       (uint8_t)cm_port_mtu(c);
	c->tos = r->primary.traffic_class;
	/*
	 * The QP's ACK timeout (and the path's lifetime, one less) is what
	 * the requester announced, unless the listener asked for its own.
	 */
	if (!c->timeout_set && r->primary.local_ack_timeout) {
		c->timeout = r->primary.local_ack_timeout;
		c->timeout_set = true;
	}
	cm_send_request(c, l, r->pdata + CMA_HDR_LEN,
			IBCM_REQ_PDATA - CMA_HDR_LEN);
}

static void on_sidr_req(const struct ibvd_mad *in, const struct ibcm_msg *m)
{
	const struct ibcm_sidr_req *r = &m->sidr_req;
	struct cm_conn_param p = { .qp_num = 0 };
	struct sockaddr_storage src, dst;
	struct ibvd_cm_id *l, *c;
	struct cm_wire *w = wire_requested(in, r->request_id);
	int ret;

	if (w) {
		/* Answered: the SIDR REP again; else the user still decides. */
		wire_resend(w);
		return;
	}
	ret = request_target(in, r->service_id, r->pdata, IBCM_SIDR_REQ_PDATA,
			     true, &l, &src, &dst);
	if (ret < 0) {
		sidr_answer_stranger(in, m, ret == -1 ? IBCM_SIDR_UNSUPPORTED :
							IBCM_SIDR_REJECT);
		return;
	}
	c = request_take(in, l, &src, &dst, &p, r->request_id, m->hdr.tid);
	if (!c) {
		sidr_answer_stranger(in, m, IBCM_SIDR_REJECT);
		return;
	}
	c->wire->service_id = r->service_id;
	cm_send_request(c, l, r->pdata + CMA_HDR_LEN,
			IBCM_SIDR_REQ_PDATA - CMA_HDR_LEN);
}

static void on_rep(const struct ibvd_mad *in, const struct ibcm_msg *m)
{
	const struct ibcm_rep *r = &m->rep;
	struct cm_wire *w = wire_answered(in, r->remote_comm_id);
	struct ibvd_cm_id *a;
	struct cm_conn_param rep;

	if (!w || !w->id->active)
		return;
	a = w->id;
	/* Our RTU was lost: the passive side resends its REP. */
	if (a->phase == CM_PH_ESTABLISHED && w->remote_comm_id == r->local_comm_id) {
		wire_resend(w);
		return;
	}
	if (a->phase != CM_PH_REQ_SENT || cm_is_ud(a))
		return;
	wire_settle(w);
	wire_set_remote(w, r->local_comm_id);
	memset(&rep, 0, sizeof(rep));
	rep.responder_resources = r->responder_resources;
	rep.initiator_depth = r->initiator_depth;
	rep.flow_control = r->e2e_flow_control;
	rep.retry_count = a->local.retry_count;
	rep.rnr_retry_count = r->rnr_retry_count;
	rep.srq = r->srq;
	rep.qp_num = a->qp_type == IBV_QPT_XRC_SEND ? r->local_eecn :
						      r->local_qpn;
	rep.qkey = r->local_qkey;
	rep.psn = r->starting_psn;
	cm_reply_received(a, &rep, r->pdata, IBCM_REP_PDATA);
}

static void on_sidr_rep(const struct ibvd_mad *in, const struct ibcm_msg *m)
{
	const struct ibcm_sidr_rep *r = &m->sidr_rep;
	struct cm_wire *w = wire_answered(in, r->request_id);
	Ibvd__CmUdParam ud = IBVD__CM_UD_PARAM__INIT;
	Ibvd__AhAttr ah = IBVD__AH_ATTR__INIT;
	struct ibvd_cm_id *a;
	uint8_t dgid[16];
	struct cm_event ev = {
		.event = RDMA_CM_EVENT_ESTABLISHED,
		.pdata = r->pdata,
		.pdata_len = IBCM_SIDR_REP_PDATA,
		.pdata_full = CM_PDATA_SIDR_REP,
		.ud = &ud,
	};

	if (!w || !w->id->active || w->id->phase != CM_PH_REQ_SENT ||
	    !cm_is_ud(w->id))
		return;
	a = w->id;
	wire_settle(w);
	if (r->status != IBCM_SIDR_SUCCESS) {
		cm_refuse_active(a, 0, r->status, r->pdata, IBCM_SIDR_REP_PDATA);
		return;
	}
	a->phase = CM_PH_CLOSED;
	ah.port_num = a->port_num;
	cm_path_grh(a, &ah, dgid);
	ud.ah_attr = &ah;
	ud.qp_num = r->qpn;
	ud.qkey = r->qkey;
	cm_event_send(a, &ev);
}

static void on_rtu(const struct ibvd_mad *in, const struct ibcm_msg *m)
{
	struct cm_wire *w = wire_answered(in, m->rtu.remote_comm_id);
	struct ibvd_cm_id *c;

	if (!w || w->id->active || w->remote_comm_id != m->rtu.local_comm_id)
		return;
	c = w->id;
	if (c->phase == CM_PH_REP_SENT) {
		wire_settle(w);
		c->phase = CM_PH_ESTABLISHED;
		cm_event_simple(c, RDMA_CM_EVENT_ESTABLISHED, 0);
	} else if (c->phase == CM_PH_ESTABLISHED) {
		/* established by traffic first (rdma_notify): the REP is done */
		wire_settle(w);
	}
}

/*
 * The wire a REJ is for.  By our comm ID; a requester that gave up
 * before it heard ours (TIMEOUT of its REQ, its CA GUID in the ARI) names
 * only its own, which a request we took carries.  Once the peer's comm ID
 * is known, the REJ must carry it too, as the kernel's CM requires.
 */
static struct cm_wire *rej_wire(const struct ibvd_mad *in,
				const struct ibcm_rej *r)
{
	struct cm_wire *w = wire_answered(in, r->remote_comm_id);

	if (!w && r->reason == IBCM_REJ_TIMEOUT &&
	    r->msg_rejected == IBCM_MSG_REQ)
		return wire_requested(in, r->local_comm_id);
	if (w && w->id->phase != CM_PH_REQ_SENT &&
	    w->remote_comm_id != r->local_comm_id)
		return NULL;
	return w;
}

/* w's connection refused by the peer after its request: REJECTED. */
static void rejected(struct cm_wire *w, const struct ibcm_rej *r)
{
	wire_settle(w);
	w->id->phase = CM_PH_CLOSED;
	cm_send_refusal(w->id, RDMA_CM_EVENT_REJECTED, r->reason, r->pdata,
			IBCM_REJ_PDATA, CM_PDATA_REJ);
}

static void on_rej(const struct ibvd_mad *in, const struct ibcm_msg *m)
{
	const struct ibcm_rej *r = &m->rej;
	struct cm_wire *w = rej_wire(in, r);
	struct ibvd_cm_id *id;

	/* SIDR has no REJ (the kernel's CM drops one) */
	if (!w || cm_is_ud(w->id))
		return;
	id = w->id;
	if (w->dreq_out) {
		/* the peer ends our disconnect with it, as the kernel's */
		dreq_done(w);
		return;
	}
	switch (id->phase) {
	case CM_PH_REQ_SENT:
		wire_settle(w);
		cm_refuse_active(id, r->reason, 0, r->pdata, IBCM_REJ_PDATA);
		break;
	case CM_PH_REQ_RCVD:
	case CM_PH_REP_SENT:
	case CM_PH_REP_RCVD:
		rejected(w, r);
		break;
	/*
	 * Established on our side, but the peer's id went before our RTU
	 * reached it: REJECTED, as the kernel's CM and rdma_cm report it,
	 * or the connection stays half open for as long as nothing is sent
	 * on it.  Only a REJ naming both comm IDs: a requester's TIMEOUT,
	 * found by its own comm ID alone (rej_wire), never saw our REP.
	 */
	case CM_PH_ESTABLISHED:
		if (r->remote_comm_id == w->local_comm_id)
			rejected(w, r);
		break;
	default:
		break;
	}
}

/*
 * The peer's user has not answered yet: wait as long as it says, once per
 * exchange, and only for our REQ (REQ_SENT) or our REP (REP_SENT, both
 * comm IDs named), as the kernel's CM; never for a DREQ.
 */
static bool mra_fits(const struct cm_wire *w, const struct ibcm_mra *r)
{
	/* SIDR has no MRA: the kernel's CM drops one too */
	if (!w->waiting || w->mraed || w->dreq_out || cm_is_ud(w->id))
		return false;
	if (w->id->phase == CM_PH_REQ_SENT)
		return r->msg_mraed == IBCM_MSG_REQ;
	return w->id->phase == CM_PH_REP_SENT && r->msg_mraed == IBCM_MSG_REP &&
	       w->remote_comm_id == r->local_comm_id;
}

static void on_mra(const struct ibvd_mad *in, const struct ibcm_msg *m)
{
	struct cm_wire *w = wire_answered(in, m->mra.remote_comm_id);

	if (!w || !mra_fits(w, &m->mra))
		return;
	w->mraed = true;
	evtimer_del(w->timer);
	wire_arm(w, ibcm_req_wait_ms(CM_PACKET_LIFETIME,
				     ibcm_peer_timeout(m->mra.service_timeout)));
	w->wait_ms = request_wait_ms();
}

/* Phases a DREQ ends (the kernel's CM ignores one before our RTU). */
static bool is_connected(enum cm_phase phase)
{
	return phase == CM_PH_REP_SENT || phase == CM_PH_ESTABLISHED;
}

static void on_dreq(const struct ibvd_mad *in, const struct ibcm_msg *m)
{
	const struct ibcm_dreq *r = &m->dreq;
	struct cm_wire *w = wire_find(in, r->remote_comm_id, true);
	struct ibcm_msg drep;

	/* both comm IDs, and the QP it names ours, or it is not for us */
	if (w && (w->remote_comm_id != r->local_comm_id ||
		  (w->id && (r->remote_qpn & 0xFFFFFFu) !=
			    (w->id->lqpn & 0xFFFFFFu))))
		return;
	/* Our app has not answered yet: a repeat waits too (DREQ_RCVD). */
	if (w && w->drep_owed)
		return;
	/* The first: our app hears DISCONNECTED, and answers (cm_wire_drep). */
	if (w && w->id && !w->dreq_out && is_connected(w->id->phase)) {
		wire_settle(w);
		w->drep_owed = true;
		w->drep_tid = m->hdr.tid;
		cm_peer_disconnected(w->id);
		return;
	}
	/*
	 * A DREP at once to a repeat of a DREQ answered already, for an id
	 * already gone, or crossing ours: our first one may have been lost,
	 * and the peer would wait out its retries.  It is no bigger than the
	 * DREQ, so it amplifies nothing.
	 */
	msg_init(&drep, IBCM_ATTR_DREP, m->hdr.tid);
	drep.drep.local_comm_id = r->remote_comm_id;
	drep.drep.remote_comm_id = r->local_comm_id;
	answer_stranger(in, &drep);
	/* Both sides disconnected at once: this ends ours too. */
	if (w && w->dreq_out)
		dreq_done(w);
}

/*
 * A DREP answers our DREQ and nothing else: one for a connection we are
 * still making would stop our REQ's or REP's resends, and the id would
 * wait for ever (as the kernel's CM, which takes one in DREQ_SENT only).
 */
static void on_drep(const struct ibvd_mad *in, const struct ibcm_msg *m)
{
	struct cm_wire *w = wire_find(in, m->drep.remote_comm_id, true);

	if (w && w->dreq_out && w->remote_named &&
	    w->remote_comm_id == m->drep.local_comm_id)
		dreq_done(w);
}

static void wire_receive(const struct ibvd_mad *in)
{
	struct ibcm_msg m;

	log_mad(in, "in");
	if (ibcm_decode(in->data, IBVD_MAD_LEN, &m) < 0 ||
	    m.hdr.class_version != IBCM_CLASS_VERSION ||
	    m.hdr.method != IBCM_METHOD_SEND) {
		wires.dropped++;
		return;
	}
	switch (m.hdr.attr_id) {
	case IBCM_ATTR_REQ:		on_req(in, &m); break;
	case IBCM_ATTR_REP:		on_rep(in, &m); break;
	case IBCM_ATTR_RTU:		on_rtu(in, &m); break;
	case IBCM_ATTR_REJ:		on_rej(in, &m); break;
	case IBCM_ATTR_MRA:		on_mra(in, &m); break;
	case IBCM_ATTR_DREQ:		on_dreq(in, &m); break;
	case IBCM_ATTR_DREP:		on_drep(in, &m); break;
	case IBCM_ATTR_SIDR_REQ:	on_sidr_req(in, &m); break;
	case IBCM_ATTR_SIDR_REP:	on_sidr_rep(in, &m); break;
	default:			wires.dropped++; break;
	}
}

static void inbox_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ibvd_mad mad;
	unsigned int n;

	(void)fd;
	(void)what;
	(void)arg;
	/* What is left keeps the eventfd readable: the loop comes back. */
	for (n = 0; n < WIRE_BATCH && ibvd_gsi_take(&mad); n++)
		wire_receive(&mad);
}

int cm_wire_start(struct event_base *base)
{
	int fd = ibvd_gsi_fd();

	if (fd < 0)
		return fd;
	/* before any wire: a new key would move them all */
	if (LIST_EMPTY(&wires.all))
		wires.hash_key = ibvd_random32();
	wires.inbox = event_new(base, fd, EV_READ | EV_PERSIST, inbox_cb, NULL);
	if (!wires.inbox || event_add(wires.inbox, NULL) < 0)
		return -ENOMEM;
	return 0;
}

void cm_wire_device_removed(const struct ibvd_device *dev)
{
	struct cm_wire *w, *next;

	for (w = LIST_FIRST(&wires.all); w; w = next) {
		next = LIST_NEXT(w, link);
		if (!w->id && w->out.dev == dev)
			wire_free(w);
	}
}

void cm_wire_stop(void)
{
	struct cm_wire *w;

	while ((w = LIST_FIRST(&wires.all)))
		wire_free(w);
	if (wires.inbox)
		event_free(wires.inbox);
	wires.inbox = NULL;
}
