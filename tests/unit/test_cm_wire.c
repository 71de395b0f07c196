/*
 * The IB CM's exchanges with a far peer (daemon/cm/remote.c): which MADs
 * end which waits.  A hostile peer may send any MAD naming the comm IDs
 * it knows; here each one goes to the CM as the GSI mailbox hands it
 * over, with the rest of the daemon stubbed out, and the test looks at
 * what the CM sends, the events its ids get, and whether their resends
 * still run.
 *
 * remote.c is compiled into this file: what ends a wait (a wire's
 * `waiting`, its timer) is the CM's own state, which no MAD shows
 * before the resend seconds later.
 */
#include "cm/remote.c"

#include <check.h>
#include <stdarg.h>

#include "tests/common/check_run.h"

/* ---- the stubbed daemon ------------------------------------------------ */

#define PEER_COMM_ID	0x77u

static const uint8_t us_gid[16] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1
};
static const uint8_t peer_gid[16] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2
};

static struct ibvd_daemon daemon_;
static struct ibvd_session session;
static struct ibvd_cm cm;
static struct ibvd_device dev;

/* MADs the CM sent (a DREQ and its 15 resends fit), and the events its
 * ids got, in order. */
#define SENT_MAX	32
static struct ibcm_msg sent[SENT_MAX];
static unsigned int nsent;
static uint32_t events[16];
static int32_t statuses[16];
static unsigned int nevents;

int ibvd_gsi_send(const struct ibvd_mad *m)
{
	ck_assert_uint_lt(nsent, SENT_MAX);
	ck_assert_int_eq(ibcm_decode(m->data, IBVD_MAD_LEN, &sent[nsent]), 0);
	nsent++;
	return 0;
}

int ibvd_gsi_fd(void)
{
	return -1;
}

bool ibvd_gsi_take(struct ibvd_mad *m)
{
	(void)m;
	return false;
}

enum ibvd_log_level ibvd_log_get_level(void)
{
	return IBVD_LOG_ERR;
}

void ibvd_log(enum ibvd_log_level level, const char *fmt, ...)
{
	(void)level;
	(void)fmt;
}

void ibvd_log_ratelimited(struct ibvd_ratelimit *rl, enum ibvd_log_level level,
			  const char *fmt, ...)
{
	(void)rl;
	(void)level;
	(void)fmt;
}

uint32_t ibvd_random32(void)
{
	static uint32_t next = 0x1000;

	return next++;
}

uint16_t cm_addr_port(const struct sockaddr_storage *ss)
{
	return ntohs(((const struct sockaddr_in *)ss)->sin_port);
}

void cm_addr_to_gid(const struct sockaddr_storage *ss, uint8_t gid[16])
{
	memset(gid, 0, 16);
	gid[10] = gid[11] = 0xff;
	memcpy(gid + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
}

struct ibvd_cm_id *cm_child_new(struct ibvd_cm_id *listener,
				struct ibvd_device *d,
				const struct sockaddr_storage *src,
				const struct sockaddr_storage *dst,
				const struct cm_conn_param *param)
{
	(void)listener;
	(void)d;
	(void)src;
	(void)dst;
	(void)param;
	return NULL;
}

void cm_event_send(struct ibvd_cm_id *id, const struct cm_event *ev)
{
	(void)id;
	ck_assert_uint_lt(nevents, 16);
	statuses[nevents] = ev->status;
	events[nevents++] = ev->event;
}

void cm_event_simple(struct ibvd_cm_id *id, uint32_t event, int32_t status)
{
	struct cm_event ev = { .event = event, .status = status };

	cm_event_send(id, &ev);
}

struct ibvd_cm_id *cm_find_listener(uint32_t ps,
				    const struct sockaddr_storage *dst)
{
	(void)ps;
	(void)dst;
	return NULL;
}

void cm_id_destroy(struct ibvd_cm_id *id)
{
	(void)id;
}

bool cm_is_ud(const struct ibvd_cm_id *id)
{
	return id->qp_type == IBV_QPT_UD;
}

bool cm_listener_takes(const struct ibvd_cm_id *listener, bool ud)
{
	(void)listener;
	(void)ud;
	return true;
}

bool cm_listener_type_takes(const struct ibvd_cm_id *listener, uint32_t type)
{
	(void)listener;
	(void)type;
	return true;
}

void cm_path_gids(const struct ibvd_cm_id *id, uint8_t sgid[16],
		  uint8_t dgid[16])
{
	(void)id;
	memcpy(sgid, us_gid, 16);
	memcpy(dgid, peer_gid, 16);
}

void cm_path_grh(const struct ibvd_cm_id *id, Ibvd__AhAttr *ah,
		 uint8_t dgid[16])
{
	(void)id;
	(void)ah;
	(void)dgid;
}

uint32_t cm_port_mtu(const struct ibvd_cm_id *id)
{
	(void)id;
	return IBV_MTU_1024;
}

void cm_refuse_active(struct ibvd_cm_id *a, int32_t rej_reason,
		      int32_t sidr_status, const uint8_t *pdata, size_t len)
{
	(void)rej_reason;
	(void)sidr_status;
	(void)pdata;
	(void)len;
	a->phase = CM_PH_CLOSED;
	cm_event_simple(a, RDMA_CM_EVENT_REJECTED, 0);
}

void cm_reply_received(struct ibvd_cm_id *a, const struct cm_conn_param *rep,
		       const uint8_t *pdata, size_t len)
{
	(void)rep;
	(void)pdata;
	(void)len;
	a->phase = CM_PH_REP_RCVD;
	cm_event_simple(a, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
}

uint8_t cm_route_hop_limit(const struct ibvd_cm_id *id)
{
	(void)id;
	return 64;
}

void cm_send_disconnected(struct ibvd_cm_id *id, int status)
{
	id->phase = CM_PH_CLOSED;
	cm_event_simple(id, RDMA_CM_EVENT_DISCONNECTED, status);
}

void cm_peer_disconnected(struct ibvd_cm_id *id)
{
	id->phase = CM_PH_CLOSED;
	id->timewait_owed = true;
	cm_event_simple(id, RDMA_CM_EVENT_DISCONNECTED, 0);
}

void cm_send_refusal(struct ibvd_cm_id *id, uint32_t event, int32_t status,
		     const uint8_t *pdata, size_t len, size_t full)
{
	(void)pdata;
	(void)len;
	(void)full;
	cm_event_simple(id, event, status);
}

void cm_send_request(struct ibvd_cm_id *c, const struct ibvd_cm_id *listener,
		     const uint8_t *pdata, size_t len)
{
	(void)c;
	(void)listener;
	(void)pdata;
	(void)len;
}

/* ---- helpers ------------------------------------------------------------ */

static void setup(void)
{
	/* each case starts from nothing, forked or not */
	memset(&wires, 0, sizeof(wires));
	nsent = nevents = 0;
	daemon_.base = event_base_new();
	ck_assert_ptr_nonnull(daemon_.base);
	session.daemon = &daemon_;
	cm.session = &session;
}

/* Every id a case made has a wire: both go, and the event base. */
static void teardown(void)
{
	struct cm_wire *w;

	while ((w = LIST_FIRST(&wires.all))) {
		LIST_REMOVE(w, link);
		event_free(w->timer);
		free(w->id);
		free(w);
	}
	event_base_free(daemon_.base);
}

static struct ibvd_cm_id *new_id(bool active, uint32_t qp_type)
{
	struct ibvd_cm_id *id = calloc(1, sizeof(*id));

	ck_assert_ptr_nonnull(id);
	id->cm = &cm;
	id->dev = &dev;
	id->active = active;
	id->qp_type = qp_type;
	id->ps = qp_type == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP;
	id->src.ss_family = id->dst.ss_family = AF_INET;
	id->lqpn = id->local.qp_num = 0x11;
	id->remote.qp_num = 0x22;
	return id;
}

/* Our REQ (SIDR REQ for UD) out, the id waiting for its answer. */
static struct ibvd_cm_id *requesting(uint32_t qp_type)
{
	struct ibvd_cm_id *a = new_id(true, qp_type);
	unsigned int before = nsent;

	a->phase = CM_PH_REQ_SENT;
	cm_wire_connect(a, NULL, 0);
	ck_assert_ptr_nonnull(a->wire);
	ck_assert_uint_eq(nsent, before + 1);
	ck_assert_uint_eq(sent[before].hdr.attr_id, qp_type == IBV_QPT_UD ?
			  IBCM_ATTR_SIDR_REQ : IBCM_ATTR_REQ);
	return a;
}

/* An active id past its RTU: the peer's comm ID is PEER_COMM_ID. */
static struct ibvd_cm_id *established(void)
{
	struct ibvd_cm_id *a = requesting(IBV_QPT_RC);

	wire_settle(a->wire);
	wire_set_remote(a->wire, PEER_COMM_ID);
	a->phase = CM_PH_ESTABLISHED;
	return a;
}

/* A far request we accepted: our REP out, waiting for the RTU. */
static struct ibvd_cm_id *replying_to(uint32_t peer_comm_id)
{
	struct ibvd_cm_id *c = new_id(false, IBV_QPT_RC);
	struct cm_wire *w = wire_new(c, &dev, us_gid, peer_gid, 1);
	unsigned int before = nsent;

	ck_assert_ptr_nonnull(w);
	wire_set_remote(w, peer_comm_id);
	w->tid = 5;
	w->peer_response_timeout = 20;
	c->phase = CM_PH_REP_SENT;
	cm_wire_accept(c, NULL, 0);
	ck_assert_uint_eq(nsent, before + 1);
	ck_assert_uint_eq(sent[before].hdr.attr_id, IBCM_ATTR_REP);
	return c;
}

static struct ibvd_cm_id *replying(void)
{
	return replying_to(PEER_COMM_ID);
}

/* Is id's wire still waiting, its resend timer set? */
static bool resending(const struct ibvd_cm_id *id)
{
	struct cm_wire *w = id->wire;

	return w->waiting && event_pending(w->timer, EV_TIMEOUT, NULL);
}

/* A MAD from the peer's QP1, as the GSI mailbox hands it over. */
static void from_peer(struct ibcm_msg *m)
{
	struct ibvd_mad in;

	memset(&in, 0, sizeof(in));
	in.dev = &dev;
	memcpy(in.local_gid, us_gid, 16);
	memcpy(in.remote_gid, peer_gid, 16);
	in.remote_qpn = 1;
	ck_assert_int_eq(ibcm_encode(m, in.data), 0);
	wire_receive(&in);
}

static void drep(uint32_t local_comm_id, uint32_t remote_comm_id)
{
	struct ibcm_msg m;

	msg_init(&m, IBCM_ATTR_DREP, 0x1234);
	m.drep.local_comm_id = local_comm_id;
	m.drep.remote_comm_id = remote_comm_id;
	from_peer(&m);
}

/* The peer's DREQ of our connection (our QP named), with TID tid. */
static void dreq(uint32_t remote_comm_id, uint32_t qpn, uint64_t tid)
{
	struct ibcm_msg m;

	msg_init(&m, IBCM_ATTR_DREQ, tid);
	m.dreq.local_comm_id = PEER_COMM_ID;
	m.dreq.remote_comm_id = remote_comm_id;
	m.dreq.remote_qpn = qpn;
	from_peer(&m);
}

/* sent[i] is a DREP of a's connection that echoes tid. */
static void ck_drep(unsigned int i, const struct ibvd_cm_id *a, uint64_t tid)
{
	ck_assert_uint_eq(sent[i].hdr.attr_id, IBCM_ATTR_DREP);
	ck_assert_uint_eq(sent[i].hdr.tid, tid);
	ck_assert_uint_eq(sent[i].drep.local_comm_id, a->wire->local_comm_id);
	ck_assert_uint_eq(sent[i].drep.remote_comm_id, PEER_COMM_ID);
}

static void rej_for(uint32_t local_comm_id, uint32_t remote_comm_id,
		    uint8_t msg, uint16_t reason)
{
	struct ibcm_msg m;

	msg_init(&m, IBCM_ATTR_REJ, 0x1234);
	m.rej.local_comm_id = local_comm_id;
	m.rej.remote_comm_id = remote_comm_id;
	m.rej.msg_rejected = msg;
	m.rej.reason = reason;
	from_peer(&m);
}

static void rej(uint32_t local_comm_id, uint32_t remote_comm_id, uint8_t msg)
{
	rej_for(local_comm_id, remote_comm_id, msg, IBCM_REJ_CONSUMER_DEFINED);
}

static void mra(uint32_t remote_comm_id)
{
	struct ibcm_msg m;

	msg_init(&m, IBCM_ATTR_MRA, 0x1234);
	m.mra.local_comm_id = PEER_COMM_ID;
	m.mra.remote_comm_id = remote_comm_id;
	m.mra.msg_mraed = IBCM_MSG_REQ;
	m.mra.service_timeout = 31;
	from_peer(&m);
}

/* ---- the tests ------------------------------------------------------------ */

/*
 * A DREP answers our DREQ only.  One naming our REQ's comm ID (and 0 for
 * the peer's, which an id that heard no REP has) stopped the REQ's
 * resends: rdma_connect waited for ever, with neither REP nor
 * UNREACHABLE.  The same for a SIDR REQ.
 */
START_TEST(drep_does_not_end_a_request)
{
	struct ibvd_cm_id *a = requesting(IBV_QPT_RC);
	struct ibvd_cm_id *u = requesting(IBV_QPT_UD);

	drep(0, a->wire->local_comm_id);
	drep(0, u->wire->local_comm_id);
	ck_assert(resending(a));
	ck_assert(resending(u));
	ck_assert_int_eq(a->phase, CM_PH_REQ_SENT);
	ck_assert_uint_eq(nevents, 0);
}
END_TEST

/*
 * A DREP naming both comm IDs of a request we accepted: our REP goes on
 * until the RTU or its retries run out (UNREACHABLE), or a peer could
 * hold a listener's ids, and their QPs, for ever with one DREP each.
 */
START_TEST(drep_does_not_end_a_reply)
{
	struct ibvd_cm_id *c = replying();

	drep(PEER_COMM_ID, c->wire->local_comm_id);
	ck_assert(resending(c));
	ck_assert_int_eq(c->phase, CM_PH_REP_SENT);
	ck_assert_uint_eq(nevents, 0);
}
END_TEST

/* Our DREQ's DREP, with both comm IDs: DISCONNECTED, no more resends. */
START_TEST(drep_ends_our_disconnect)
{
	struct ibvd_cm_id *a = established();

	cm_wire_disconnect(a);
	ck_assert_uint_eq(nsent, 2);
	ck_assert_uint_eq(sent[1].hdr.attr_id, IBCM_ATTR_DREQ);
	ck_assert(resending(a));
	/* another peer comm ID: not ours to end */
	drep(PEER_COMM_ID + 1, a->wire->local_comm_id);
	ck_assert(resending(a));
	ck_assert_uint_eq(nevents, 0);
	drep(PEER_COMM_ID, a->wire->local_comm_id);
	ck_assert(!resending(a));
	ck_assert_uint_eq(nevents, 1);
	ck_assert_uint_eq(events[0], RDMA_CM_EVENT_DISCONNECTED);
}
END_TEST

/*
 * The peer's DREQ: our app hears DISCONNECTED at once, and the DREP goes
 * when it answers (its rdma_disconnect: cm_wire_drep), with the DREQ's
 * TID, as the kernel's CM sends it; not before, or the peer's
 * DISCONNECTED would not wait for our app.  A repeat meanwhile gets
 * nothing (the kernel's DREQ_RCVD); one after the answer gets the DREP
 * again, as ours may have been lost.
 */
START_TEST(dreq_answered_by_our_disconnect)
{
	struct ibvd_cm_id *a = established();
	unsigned int before = nsent;

	dreq(a->wire->local_comm_id, a->lqpn, 0x55);
	ck_assert_uint_eq(nevents, 1);
	ck_assert_uint_eq(events[0], RDMA_CM_EVENT_DISCONNECTED);
	ck_assert_uint_eq(nsent, before);
	dreq(a->wire->local_comm_id, a->lqpn, 0x55);
	ck_assert_uint_eq(nsent, before);
	ck_assert_uint_eq(nevents, 1);
	cm_wire_drep(a);
	ck_assert_uint_eq(nsent, before + 1);
	ck_drep(before, a, 0x55);
	cm_wire_drep(a);
	ck_assert_uint_eq(nsent, before + 1);
	dreq(a->wire->local_comm_id, a->lqpn, 0x55);
	ck_assert_uint_eq(nsent, before + 2);
	ck_drep(before + 1, a, 0x55);
	ck_assert_uint_eq(nevents, 1);
}
END_TEST

/*
 * A peer that never answers our DREQ (its host gone): resent until the
 * retries run out, then DISCONNECTED with -ETIMEDOUT, the kernel's
 * IB_CM_DREQ_ERROR.  The resend timer is fired by hand.
 */
START_TEST(dreq_unanswered_times_out)
{
	struct ibvd_cm_id *a = established();
	unsigned int i;

	cm_wire_disconnect(a);
	for (i = 0; i < WIRE_MAX_RETRIES; i++) {
		ck_assert(resending(a));
		wire_timer_cb(-1, EV_TIMEOUT, a->wire);
	}
	ck_assert_uint_eq(nevents, 0);
	ck_assert(resending(a));
	wire_timer_cb(-1, EV_TIMEOUT, a->wire);
	ck_assert(!resending(a));
	ck_assert_uint_eq(nevents, 1);
	ck_assert_uint_eq(events[0], RDMA_CM_EVENT_DISCONNECTED);
	ck_assert_int_eq(statuses[0], -ETIMEDOUT);
}
END_TEST

/* An id that heard the DREQ and goes without answering answers by going. */
START_TEST(dreq_answered_when_the_id_goes)
{
	struct ibvd_cm_id *a = established();
	unsigned int before = nsent;

	dreq(a->wire->local_comm_id, a->lqpn, 0x66);
	ck_assert_uint_eq(nsent, before);
	cm_wire_abandon(a);
	ck_assert_uint_eq(nsent, before + 1);
	ck_assert_ptr_null(a->wire);
	ck_assert_uint_eq(sent[before].hdr.attr_id, IBCM_ATTR_DREP);
	ck_assert_uint_eq(sent[before].hdr.tid, 0x66);
	/* teardown frees ids through their wires, and its wire is gone */
	free(a);
}
END_TEST

/*
 * Established on our side, and the peer's id went before our RTU reached
 * it: its REJ (both comm IDs) is REJECTED, as rdma_cm reports it; before,
 * it was dropped and the connection stayed half open.
 */
START_TEST(rej_after_our_rtu_is_rejected)
{
	struct ibvd_cm_id *a = established();

	rej(PEER_COMM_ID + 1, a->wire->local_comm_id, IBCM_MSG_OTHER);
	ck_assert_int_eq(a->phase, CM_PH_ESTABLISHED);
	ck_assert_uint_eq(nevents, 0);
	rej(PEER_COMM_ID, a->wire->local_comm_id, IBCM_MSG_OTHER);
	ck_assert_int_eq(a->phase, CM_PH_CLOSED);
	ck_assert_uint_eq(nevents, 1);
	ck_assert_uint_eq(events[0], RDMA_CM_EVENT_REJECTED);
}
END_TEST

/*
 * A requester's REJ (TIMEOUT of its REQ) names only its own comm ID, and
 * finds the request it made here by that alone: it ends a request or a
 * reply, never a connection past its RTU, which that requester never
 * saw (a peer that guessed the requester's comm ID could end any).
 */
START_TEST(requester_timeout_does_not_end_a_connection)
{
	struct ibvd_cm_id *c = replying();
	struct ibcm_msg m;

	msg_init(&m, IBCM_ATTR_RTU, 5);
	m.rtu.local_comm_id = PEER_COMM_ID;
	m.rtu.remote_comm_id = c->wire->local_comm_id;
	from_peer(&m);
	ck_assert_int_eq(c->phase, CM_PH_ESTABLISHED);
	ck_assert_uint_eq(nevents, 1);
	ck_assert_uint_eq(events[0], RDMA_CM_EVENT_ESTABLISHED);
	rej_for(PEER_COMM_ID, 0, IBCM_MSG_REQ, IBCM_REJ_TIMEOUT);
	ck_assert_int_eq(c->phase, CM_PH_ESTABLISHED);
	ck_assert_uint_eq(nevents, 1);
	/* before the RTU, the same REJ ends the reply */
	c = replying_to(PEER_COMM_ID + 1);
	rej_for(PEER_COMM_ID + 1, 0, IBCM_MSG_REQ, IBCM_REJ_TIMEOUT);
	ck_assert_int_eq(c->phase, CM_PH_CLOSED);
	ck_assert_uint_eq(nevents, 2);
	ck_assert_uint_eq(events[1], RDMA_CM_EVENT_REJECTED);
}
END_TEST

/*
 * SIDR has no MRA: one for our SIDR REQ does not stretch its wait to a
 * minute (the kernel's CM drops it too).  An RC REQ's MRA does.
 */
START_TEST(sidr_takes_no_mra)
{
	struct ibvd_cm_id *u = requesting(IBV_QPT_UD);
	struct ibvd_cm_id *a = requesting(IBV_QPT_RC);

	mra(u->wire->local_comm_id);
	ck_assert(!u->wire->mraed);
	ck_assert(resending(u));
	mra(a->wire->local_comm_id);
	ck_assert(a->wire->mraed);
	ck_assert(resending(a));
}
END_TEST

/*
 * Traffic established the passive side first (rdma_notify): its REP is
 * not sent again, as the kernel's CM stops it at COMM_EST; a late RTU
 * changes nothing.
 */
START_TEST(comm_est_ends_the_reply)
{
	struct ibvd_cm_id *c = replying();
	struct ibcm_msg m;

	c->phase = CM_PH_ESTABLISHED;
	cm_wire_comm_est(c);
	ck_assert(!resending(c));
	msg_init(&m, IBCM_ATTR_RTU, 5);
	m.rtu.local_comm_id = PEER_COMM_ID;
	m.rtu.remote_comm_id = c->wire->local_comm_id;
	from_peer(&m);
	ck_assert(!resending(c));
	ck_assert_uint_eq(nevents, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cm_wire");
	TCase *tc = tcase_create("wire");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, drep_does_not_end_a_request);
	tcase_add_test(tc, drep_does_not_end_a_reply);
	tcase_add_test(tc, drep_ends_our_disconnect);
	tcase_add_test(tc, dreq_answered_by_our_disconnect);
	tcase_add_test(tc, dreq_answered_when_the_id_goes);
	tcase_add_test(tc, dreq_unanswered_times_out);
	tcase_add_test(tc, rej_after_our_rtu_is_rejected);
	tcase_add_test(tc, requester_timeout_does_not_end_a_connection);
	tcase_add_test(tc, sidr_takes_no_mra);
	tcase_add_test(tc, comm_est_ends_the_reply);
	suite_add_tcase(s, tc);
	return check_run(s, CK_NORMAL);
}
