/*
 * MODIFY_QP: the InfiniBand QP state machine (IB spec vol. 1, ch. 10.3 and
 * 11.2.5: the transitions a consumer may request, with the attributes each
 * requires and allows, per QP type), and the attribute values.
 *
 * Everything happens under the objects lock held for writing, so the
 * engine sees the old QP or the new one, never a mix; the engine is then
 * kicked to act on the change (flush after ERR, drain in SQD, ...).
 */
#include <config.h>

#include <errno.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "barrier.h"
#include "context.h"
#include "core/device.h"
#include "engine/engine.h"
#include "ibverbsd.pb-c.h"
#include "server/call.h"
#include "server/session.h"
#include "verbs.h"

/* ---- the transition table -------------------------------------------- */

/* Column of a QP type in the table. */
enum { T_UD, T_UC, T_RC, T_NTYPES };

#define ALL	((1u << T_UD) | (1u << T_UC) | (1u << T_RC))
#define UNRELIABLE ((1u << T_UD) | (1u << T_UC))

struct transition {
	uint8_t types;			/* QP types that may make it */
	uint32_t req[T_NTYPES];		/* attributes it requires */
	uint32_t opt[T_NTYPES];		/* attributes it also accepts */
};

#define QP(x)	IBV_QP_##x
#define S(x)	IBV_QPS_##x
#define NSTATES	(IBV_QPS_ERR + 1)

/* RESET->INIT requires these, INIT->INIT allows them. */
#define INIT_UD		(QP(PKEY_INDEX) | QP(PORT) | QP(QKEY))
#define INIT_CONN	(QP(PKEY_INDEX) | QP(PORT) | QP(ACCESS_FLAGS))
/* What RTS->RTS (and SQD->RTS) may change. */
#define RTS_UD		(QP(CUR_STATE) | QP(QKEY))
#define RTS_UC		(QP(CUR_STATE) | QP(ACCESS_FLAGS) | QP(ALT_PATH) | \
			 QP(PATH_MIG_STATE))
#define RTS_RC		(RTS_UC | QP(MIN_RNR_TIMER))

static const struct transition table[NSTATES][NSTATES] = {
	[S(RESET)] = {
		[S(RESET)] = { .types = ALL },
		[S(INIT)] = { .types = ALL, .req = { INIT_UD, INIT_CONN, INIT_CONN } },
		/* no ERR: a QP never used has nothing to flush (the kernel's table) */
	},
	[S(INIT)] = {
		[S(RESET)] = { .types = ALL },
		[S(INIT)] = { .types = ALL, .opt = { INIT_UD, INIT_CONN, INIT_CONN } },
		[S(RTR)] = { .types = ALL,
			.req = { 0,
				 QP(AV) | QP(PATH_MTU) | QP(DEST_QPN) | QP(RQ_PSN),
				 QP(AV) | QP(PATH_MTU) | QP(DEST_QPN) | QP(RQ_PSN) |
				 QP(MAX_DEST_RD_ATOMIC) | QP(MIN_RNR_TIMER) },
			.opt = { QP(PKEY_INDEX) | QP(QKEY),
				 QP(ALT_PATH) | QP(ACCESS_FLAGS) | QP(PKEY_INDEX),
				 QP(ALT_PATH) | QP(ACCESS_FLAGS) | QP(PKEY_INDEX) } },
		[S(ERR)] = { .types = ALL },
	},
	[S(RTR)] = {
		[S(RESET)] = { .types = ALL },
		[S(RTS)] = { .types = ALL,
			.req = { QP(SQ_PSN), QP(SQ_PSN),
				 QP(SQ_PSN) | QP(TIMEOUT) | QP(RETRY_CNT) |
				 QP(RNR_RETRY) | QP(MAX_QP_RD_ATOMIC) },
			.opt = { RTS_UD, RTS_UC, RTS_RC } },
		[S(ERR)] = { .types = ALL },
	},
	[S(RTS)] = {
		[S(RESET)] = { .types = ALL },
		[S(RTS)] = { .types = ALL, .opt = { RTS_UD, RTS_UC, RTS_RC } },
		[S(SQD)] = { .types = ALL, .opt = { QP(EN_SQD_ASYNC_NOTIFY),
					   QP(EN_SQD_ASYNC_NOTIFY),
					   QP(EN_SQD_ASYNC_NOTIFY) } },
		[S(ERR)] = { .types = ALL },
	},
	[S(SQD)] = {
		[S(RESET)] = { .types = ALL },
		[S(RTS)] = { .types = ALL, .opt = { RTS_UD, RTS_UC, RTS_RC } },
		[S(SQD)] = { .types = ALL,
			.opt = { QP(PKEY_INDEX) | QP(QKEY),
				 QP(AV) | QP(ALT_PATH) | QP(ACCESS_FLAGS) |
				 QP(PKEY_INDEX) | QP(PATH_MIG_STATE),
				 QP(PORT) | QP(AV) | QP(TIMEOUT) | QP(RETRY_CNT) |
				 QP(RNR_RETRY) | QP(MAX_QP_RD_ATOMIC) |
				 QP(MAX_DEST_RD_ATOMIC) | QP(ALT_PATH) |
				 QP(ACCESS_FLAGS) | QP(PKEY_INDEX) |
				 QP(MIN_RNR_TIMER) | QP(PATH_MIG_STATE) } },
		[S(ERR)] = { .types = ALL },
	},
	/* Only unreliable QPs have SQE: RC send errors go to ERR. */
	[S(SQE)] = {
		[S(RESET)] = { .types = ALL },
		[S(RTS)] = { .types = UNRELIABLE, .opt = { RTS_UD, QP(CUR_STATE) |
						  QP(ACCESS_FLAGS), 0 } },
		[S(ERR)] = { .types = ALL },
	},
	[S(ERR)] = {
		[S(RESET)] = { .types = ALL },
		[S(ERR)] = { .types = ALL },
	},
};

static const char *const state_names[NSTATES] = {
	"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR",
};

/* XRC QPs are RC halves: the RC column, less what their half lacks. */
static unsigned int type_col(uint32_t qp_type)
{
	if (qp_type == IBV_QPT_RC || qp_type == IBV_QPT_XRC_SEND ||
	    qp_type == IBV_QPT_XRC_RECV)
		return T_RC;
	return qp_type == IBV_QPT_UC ? T_UC : T_UD;
}

/*
 * What an XRC half need not give of RC's required attributes (as Linux
 * asks of XRC_INI and XRC_TGT): an initiator receives nothing (no access
 * flags, responder resources or RNR timer), a target sends nothing (no
 * retry counts or initiator depth).  Still accepted when given.
 */
static uint32_t xrc_not_required(uint32_t qp_type, uint32_t next)
{
	if (qp_type == IBV_QPT_XRC_SEND)
		return next == S(INIT) ? QP(ACCESS_FLAGS) :
		       next == S(RTR) ? QP(MAX_DEST_RD_ATOMIC) | QP(MIN_RNR_TIMER) : 0;
	if (qp_type == IBV_QPT_XRC_RECV && next == S(RTS))
		return QP(RETRY_CNT) | QP(RNR_RETRY) | QP(MAX_QP_RD_ATOMIC);
	return 0;
}

static int check_transition(struct ibvd_call *call, const struct ibvd_qp *qp,
			    uint32_t cur, uint32_t next, uint32_t mask)
{
	unsigned int col = type_col(qp->qp_type);
	const struct transition *t = &table[cur][next];
	uint32_t req = t->req[col], allowed = req | t->opt[col] | QP(STATE);

	req &= ~xrc_not_required(qp->qp_type, next);

	if (!(t->types & 1u << col))
		return ibvd_call_error(call, -EINVAL, "%s -> %s is not a valid transition",
				       state_names[cur], state_names[next]);
	if ((mask & req) != req)
		return ibvd_call_error(call, -EINVAL,
				       "%s -> %s requires attributes %#x",
				       state_names[cur], state_names[next],
				       req & ~mask);
	if (mask & ~allowed)
		return ibvd_call_error(call, -EINVAL,
				       "%s -> %s does not take attributes %#x",
				       state_names[cur], state_names[next],
				       mask & ~allowed);
	return 0;
}

/* ---- attribute values -------------------------------------------------- */

/* The QP as it will be if the request is valid. */
struct qp_next {
	const struct ibvd_device *dev;	/* the QP's (a CM call has no context) */
	struct ibvd_qp_attr attr;
	__typeof__(((struct ibvd_qp *)0)->ctl) ctl;
};

#define PSN_MASK	0xFFFFFFu
#define QPN_MAX		0xFFFFFFu

static int bad(struct ibvd_call *call, const char *what, uint32_t v)
{
	return ibvd_call_error(call, -EINVAL, "bad %s: %u", what, v);
}

/* PORT, PKEY_INDEX, QKEY, ACCESS_FLAGS. */
static int set_local(struct ibvd_call *call, const Ibvd__QpAttr *m,
		     uint32_t mask, const struct ibvd_limits *lim,
		     struct qp_next *n)
{
	if (mask & QP(PORT)) {
		if (!ibvd_device_port(n->dev, m->port_num))
			return bad(call, "port", m->port_num);
		n->attr.port_num = (uint8_t)m->port_num;
	}
	if (mask & QP(PKEY_INDEX)) {
		if (m->pkey_index >= lim->pkey_tbl_len)
			return bad(call, "pkey_index", m->pkey_index);
		n->attr.pkey_index = (uint16_t)m->pkey_index;
	}
	if (mask & QP(QKEY)) {
		/*
		 * A controlled Q_Key (high bit: the GSI's 0x80010000 among
		 * them) lets a UD QP speak as the host's own management
		 * agents; as the kernel, only for the privileged.
		 */
		if ((m->qkey & IBVD_QKEY_CONTROLLED) && !ibvd_call_privileged(call))
			return ibvd_call_error(call, -EPERM,
					       "Q_Key %#x is a controlled one: root only",
					       m->qkey);
		n->attr.qkey = m->qkey;
	}
	/*
	 * Any bits, kept as given: only the remote ones mean anything to a
	 * QP, and rxe and mlx5 take the rest (pyverbs' ODP tests pass
	 * IBV_ACCESS_ON_DEMAND here) and report them back.
	 */
	if (mask & QP(ACCESS_FLAGS))
		n->attr.access = m->qp_access_flags;
	return 0;
}

/* AV, PATH_MTU, DEST_QPN, RQ_PSN, SQ_PSN. */
static int set_path(struct ibvd_call *call, const Ibvd__QpAttr *m,
		    uint32_t mask, const struct ibvd_limits *lim,
		    struct qp_next *n)
{
	int ret;

	if (mask & QP(AV)) {
		ret = ibvd_av_from_msg(call, n->dev, m->ah_attr, true, &n->attr.av);
		if (ret < 0)
			return ret;
		n->ctl.static_rate = (uint8_t)m->ah_attr->static_rate;
		n->ctl.src_path_bits = (uint8_t)m->ah_attr->src_path_bits;
	}
	if (mask & QP(PATH_MTU)) {
		if (m->path_mtu < IBV_MTU_256 || m->path_mtu > lim->max_mtu)
			return bad(call, "path_mtu", m->path_mtu);
		n->attr.path_mtu = m->path_mtu;
	}
	if (mask & QP(DEST_QPN)) {
		if (m->dest_qp_num > QPN_MAX)
			return bad(call, "dest_qp_num", m->dest_qp_num);
		n->attr.dest_qp_num = m->dest_qp_num;
	}
	/* PSNs are 24 bits; apps pass lrand48() results, the kernel masks. */
	if (mask & QP(RQ_PSN))
		n->attr.rq_psn = m->rq_psn & PSN_MASK;
	if (mask & QP(SQ_PSN))
		n->attr.sq_psn = m->sq_psn & PSN_MASK;
	return 0;
}

/* A field of `bits` bits. */
static int set_bits(struct ibvd_call *call, const char *what, uint32_t v,
		    unsigned int bits, uint8_t *out)
{
	if (v >> bits)
		return bad(call, what, v);
	*out = (uint8_t)v;
	return 0;
}

/* TIMEOUT, RETRY_CNT, RNR_RETRY, MIN_RNR_TIMER, the RD atomics, SQD. */
static int set_transport(struct ibvd_call *call, const Ibvd__QpAttr *m,
			 uint32_t mask, const struct ibvd_limits *lim,
			 struct qp_next *n)
{
	struct ibvd_qp_attr *a = &n->attr;
	int ret = 0;

	/*
	 * Any u8, as Linux and rxe take it (perftest -u 40, rdma_cm's
	 * ACK_TIMEOUT); the engine waits 4.096 us << 31 at most.
	 */
	if (mask & QP(TIMEOUT))
		ret = set_bits(call, "timeout", m->timeout, 8, &a->timeout);
	if (!ret && (mask & QP(RETRY_CNT)))
		ret = set_bits(call, "retry_cnt", m->retry_cnt, 3, &a->retry_cnt);
	if (!ret && (mask & QP(RNR_RETRY)))
		ret = set_bits(call, "rnr_retry", m->rnr_retry, 3, &a->rnr_retry);
	if (!ret && (mask & QP(MIN_RNR_TIMER)))
		ret = set_bits(call, "min_rnr_timer", m->min_rnr_timer, 5,
			       &a->min_rnr_timer);
	if (ret)
		return ret;
	if (mask & QP(MAX_QP_RD_ATOMIC)) {
		if (m->max_rd_atomic > lim->max_qp_init_rd_atom)
			return bad(call, "max_rd_atomic", m->max_rd_atomic);
		a->max_rd_atomic = (uint8_t)m->max_rd_atomic;
	}
	if (mask & QP(MAX_DEST_RD_ATOMIC)) {
		if (m->max_dest_rd_atomic > lim->max_qp_rd_atom)
			return bad(call, "max_dest_rd_atomic", m->max_dest_rd_atomic);
		a->max_dest_rd_atomic = (uint8_t)m->max_dest_rd_atomic;
	}
	if (mask & QP(EN_SQD_ASYNC_NOTIFY))
		a->en_sqd_async_notify = m->en_sqd_async_notify != 0;
	return 0;
}

/* ALT_PATH, PATH_MIG_STATE: kept and reported; there is no migration. */
static int set_alt(struct ibvd_call *call, const Ibvd__QpAttr *m,
		   uint32_t mask, const struct ibvd_limits *lim,
		   struct qp_next *n)
{
	int ret;

	if (mask & QP(PATH_MIG_STATE)) {
		if (m->path_mig_state > IBV_MIG_ARMED)
			return bad(call, "path_mig_state", m->path_mig_state);
		n->ctl.path_mig_state = (uint8_t)m->path_mig_state;
	}
	if (!(mask & QP(ALT_PATH)))
		return 0;
	/* As the kernel's _ib_modify_qp: APM is InfiniBand's, not RoCE's. */
	if (n->dev->kind == IBVD_DEV_ROCE)
		return ibvd_call_error(call, -EINVAL,
				       "no alternate path on a RoCE device");
	ret = ibvd_av_from_msg(call, n->dev, m->alt_ah_attr, true, &n->ctl.alt_av);
	if (ret < 0)
		return ret;
	if (!ibvd_device_port(n->dev, m->alt_port_num))
		return bad(call, "alt_port_num", m->alt_port_num);
	if (m->alt_pkey_index >= lim->pkey_tbl_len)
		return bad(call, "alt_pkey_index", m->alt_pkey_index);
	ret = set_bits(call, "alt_timeout", m->alt_timeout, 5, &n->ctl.alt_timeout);
	if (ret)
		return ret;
	n->ctl.alt_port_num = (uint8_t)m->alt_port_num;
	n->ctl.alt_pkey_index = (uint16_t)m->alt_pkey_index;
	n->ctl.alt_static_rate = (uint8_t)m->alt_ah_attr->static_rate;
	n->ctl.alt_src_path_bits = (uint8_t)m->alt_ah_attr->src_path_bits;
	return 0;
}

static int build_next(struct ibvd_call *call, const struct ibvd_qp *qp,
		      const Ibvd__QpAttr *m, uint32_t mask, struct qp_next *n)
{
	struct ibvd_limits lim;
	int ret;

	ibvd_ctx_limits(qp->ctx, &lim);
	n->dev = qp->ctx->dev;
	n->attr = qp->attr;
	n->ctl = qp->ctl;
	ret = set_local(call, m, mask, &lim, n);
	if (!ret)
		ret = set_path(call, m, mask, &lim, n);
	if (!ret)
		ret = set_transport(call, m, mask, &lim, n);
	if (!ret)
		ret = set_alt(call, m, mask, &lim, n);
	return ret;
}

/* ---- applying --------------------------------------------------------- */

static void wq_rewind(struct ibvd_ring *r)
{
	struct ibvd_wq_engine *e = r->engine_page;
	struct ibvd_wq_client *c = r->client_page;

	if (!r->arena)
		return;
	ibvd_write_once(&e->error, 0);
	ibvd_write_once(&e->head, 0);
	ibvd_write_once(&e->direct_retired, 0);
	/* The client library resyncs its tail from here after RESET. */
	ibvd_write_once(&c->tail, 0);
	ibvd_write_once(&c->claim, IBVD_WQ_CLAIM_FREE);
	ibvd_write_once(&c->direct_head, 0);
}

/*
 * Back to RESET: both queues empty, every counter at 0, no engine progress
 * left, so that the QP can be used again from INIT.  No engine pass runs
 * (write lock).
 */
static void qp_rewind(struct ibvd_qp *qp)
{
	/* First, while the engine's state is intact: chunked messages end. */
	ibvd_engine_qp_reset(qp);
	ibvd_qp_wire_uncharge(qp);
	wq_rewind(&qp->sq);
	wq_rewind(&qp->rq);
	qp->sq_head = 0;
	qp->sq_claimed = false;
	qp->sq_direct_seen = 0;
	qp->rq_head = 0;
	qp->rnr_deadline_ns = 0;
	qp->unanswered_ns = 0;
	qp->awaiting = false;
	qp->rnr_left = 0;
	qp->retry_left = 0;
	qp->wqe_started = false;
	qp->flush_pending = false;
	qp->last_wqe_sent = false;
	qp->drained_sent = false;
	qp->peer_gone = false;
}

/* Enter `next`; the write lock is held. */
static void qp_enter(struct ibvd_qp *qp, uint32_t cur, uint32_t next)
{
	if (next == IBV_QPS_RESET && cur != IBV_QPS_RESET) {
		ibvd_direct_leave(qp);
		qp_rewind(qp);
	}
	if (next == IBV_QPS_ERR)
		qp->flush_pending = true;	/* the engine flushes both queues */
	/* The engine finishes what it started, then sets drained_sent. */
	if (next == IBV_QPS_SQD && cur != IBV_QPS_SQD)
		qp->drained_sent = false;
	__atomic_store_n(&qp->state, next, __ATOMIC_RELEASE);
	if (next == IBV_QPS_RTR || next == IBV_QPS_RTS)
		ibvd_direct_pair_try(qp);
	ibvd_direct_update(qp);
}

/*
 * Has the engine anything to do for qp now that it went from `cur` to
 * `next`?  Not for INIT: nothing runs there, and a wakeup of an engine
 * thread costs a CPU for its spin, which a client setting up many QPs
 * needs (3,000 QPs to INIT: 0.56 s instead of 1.0, bench/scale).  From RTR
 * to RTS on this daemon's own devices, only if something waited for RTS:
 * the wakeup was most of the CM's RTS move (cmtime).  Every other state it
 * looks at (flush, drain, a RoCE transport's connection).  Called under
 * the write lock, the state stored.
 */
static bool engine_has_work(const struct ibvd_qp *qp, uint32_t cur,
			    uint32_t next)
{
	if (next == IBV_QPS_INIT)
		return false;
	if (cur == IBV_QPS_RTR && next == IBV_QPS_RTS &&
	    qp->ctx->dev->kind == IBVD_DEV_SOFT)
		return ibvd_engine_qp_rts_work(qp);
	return true;
}

static const Ibvd__QpAttr no_attr = IBVD__QP_ATTR__INIT;

/* Under the write lock: is the transition valid from the current state? */
static int check_state(struct ibvd_call *call, const struct ibvd_qp *qp,
		       const Ibvd__QpAttr *m, uint32_t mask, uint32_t *cur,
		       uint32_t *next)
{
	/* The engine may have moved it to ERR or SQE meanwhile: read it here. */
	*cur = __atomic_load_n(&qp->state, __ATOMIC_ACQUIRE);
	*next = mask & QP(STATE) ? m->qp_state : *cur;
	if (*next >= NSTATES)
		return bad(call, "qp_state", *next);
	if ((mask & QP(CUR_STATE)) && m->cur_qp_state != *cur)
		return ibvd_call_error(call, -EINVAL, "the QP is in %s, not %s",
				       state_names[*cur],
				       m->cur_qp_state < NSTATES ?
				       state_names[m->cur_qp_state] : "?");
	return check_transition(call, qp, *cur, *next, mask);
}

/*
 * What a wire transport keeps for qp from its RTR on costs the daemon as
 * much as its rings, and the client chooses how many QPs there are: it is
 * charged to the same budget.
 */
static int wire_prepare(struct ibvd_call *call, struct ibvd_qp *qp)
{
	size_t bytes;
	int ret;

	ret = ibvd_engine_qp_prepare(qp, &bytes);
	if (ret < 0)
		return ibvd_call_error(call, ret, "no memory for the QP's "
				       "transport state");
	if (!bytes)
		return 0;	/* a device whose transport keeps nothing */
	ret = ibvd_ctx_ring_charge(qp->ctx, bytes);
	if (ret < 0) {
		ibvd_engine_qp_unprepare(qp);
		return ibvd_call_error(call, ret, "the QP's transport state "
				       "(%zu bytes) is over its context's or "
				       "uid's ring memory", bytes);
	}
	qp->wire_bytes = bytes;
	return 0;
}

void ibvd_qp_wire_uncharge(struct ibvd_qp *qp)
{
	ibvd_ctx_ring_uncharge(qp->ctx, qp->wire_bytes);
	qp->wire_bytes = 0;
}

/*
 * Would a grant into a QP of attributes `now` give other rights than one
 * into `before`?  Its access flags, and whether it has responder
 * resources (none: no READs), decide (rings/lease.c, grant_check).
 */
static bool grant_rights_change(const struct ibvd_qp_attr *before,
				const struct ibvd_qp_attr *now)
{
	return before->access != now->access ||
	       !before->max_dest_rd_atomic != !now->max_dest_rd_atomic;
}

static int modify(struct ibvd_call *call, struct ibvd_qp *qp,
		  const Ibvd__QpAttr *m, uint32_t mask, bool tell_engine)
{
	uint32_t cur, next;
	struct qp_next n;
	bool kick = false;
	int ret;

	if (!m)
		m = &no_attr;
	/*
	 * Values first, outside the lock: only this thread writes what they
	 * are built on, and checking a GID reads the host's addresses.
	 */
	ret = build_next(call, qp, m, mask, &n);
	if (ret < 0)
		return ret;
	ibvd_objects_write_lock();
	ret = check_state(call, qp, m, mask, &cur, &next);
	if (ret == 0 && next == IBV_QPS_RTR && cur != next)
		ret = wire_prepare(call, qp);
	/* EN_SQD_ASYNC_NOTIFY asks for the event of this RTS -> SQD only */
	if (ret == 0 && next == IBV_QPS_SQD && cur != IBV_QPS_SQD &&
	    !(mask & QP(EN_SQD_ASYNC_NOTIFY)))
		n.attr.en_sqd_async_notify = 0;
	if (ret == 0) {
		/* a peer's grants into us gave our old rights (rings/lease.c) */
		if (qp->direct && grant_rights_change(&qp->attr, &n.attr))
			ibvd_direct_lease_revoke(qp->direct, !qp->direct_side);
		qp->attr = n.attr;
		qp->ctl = n.ctl;
		/* the path at RTR, or a new one for a connection that goes
		 * on (SQD to SQD) */
		if (mask & IBV_QP_AV)
			ibvd_engine_qp_av_changed(qp);
		qp_enter(qp, cur, next);
		kick = tell_engine && engine_has_work(qp, cur, next);
	}
	ibvd_objects_write_unlock();
	if (kick)
		ibvd_engine_qp_kick(qp);
	return ret;
}

int ibvd_qp_modify(struct ibvd_call *call, struct ibvd_qp *qp,
		   const Ibvd__QpAttr *m, uint32_t mask)
{
	return modify(call, qp, m, mask, true);
}

int ibvd_qp_modify_first(struct ibvd_call *call, struct ibvd_qp *qp,
			 const Ibvd__QpAttr *m, uint32_t mask)
{
	return modify(call, qp, m, mask, false);
}

int ibvd_req_modify_qp(struct ibvd_call *call)
{
	const Ibvd__ModifyQp *req = (const Ibvd__ModifyQp *)call->msg;
	struct ibvd_qp *qp = ibvd_call_qp(call, req->handle);

	if (!qp)
		return -EINVAL;
	return ibvd_qp_modify(call, qp, req->attr, req->attr_mask);
}
