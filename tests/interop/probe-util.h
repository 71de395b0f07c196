/*
 * probe-util.h: what the interop probes (verbs-probe.c, datapath-probe.c,
 * wire-probe.c, cm-probe.c, cm-wire.c) share: opening the device they
 * are given, names for the values they print, a clock.  Header only, so
 * that each probe still builds from its one .c file and links against
 * libibverbs.so.1 (or librdmacm.so.1) alone, to run in rxe's guest as
 * well as on ibverbsd; every function is static inline, so a probe pays
 * nothing (and -Wunused-function says nothing) for what it does not use.
 */
#ifndef IBVD_PROBE_UTIL_H
#define IBVD_PROBE_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

/*
 * A call and what it returned, one line: the result and, when it is
 * negative, errno's name (strerrorname_np: build with -D_GNU_SOURCE).
 * WIDTH is the column the arrow stands at.
 */
#define PROBE_STEP(width, name, expr)                                   \
	do {                                                            \
		errno = 0;                                              \
		long r_ = (long)(expr);                                 \
		int e_ = errno;                                         \
		printf("  %-" #width "s -> %ld errno=%s\n", name, r_,   \
		       r_ < 0 ? strerrorname_np(e_) ?: "?" : "-");      \
		errno = e_;                                             \
	} while (0)

static inline long probe_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

static inline const char *probe_qp_type_name(enum ibv_qp_type t)
{
	return t == IBV_QPT_RC ? "RC" : t == IBV_QPT_UC ? "UC" : "UD";
}

/* a QP state (an int, so that a failed query's -1 has a name too) */
static inline const char *probe_qp_state_name(int s)
{
	static const char *names[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };

	return s >= 0 && s <= IBV_QPS_ERR ? names[s] : "?";
}

/* a successful completion's opcode */
static inline const char *probe_wc_opcode_name(enum ibv_wc_opcode op)
{
	switch (op) {
	case IBV_WC_SEND: return "SEND";
	case IBV_WC_RDMA_WRITE: return "WRITE";
	case IBV_WC_RDMA_READ: return "READ";
	case IBV_WC_COMP_SWAP: return "CSWAP";
	case IBV_WC_FETCH_ADD: return "FADD";
	case IBV_WC_BIND_MW: return "BIND_MW";
	case IBV_WC_LOCAL_INV: return "LOCAL_INV";
	case IBV_WC_RECV: return "RECV";
	case IBV_WC_RECV_RDMA_WITH_IMM: return "RECV_RDMA_WITH_IMM";
	default: return "OTHER";
	}
}

/* the first of PORT_NUM's GIDs that is an IPv4 address (RoCE v2), or 0 */
static inline int probe_ipv4_gid(struct ibv_context *ctx, uint8_t port_num,
				 const struct ibv_port_attr *port)
{
	static const uint8_t v4[12] = { [10] = 0xff, [11] = 0xff };
	union ibv_gid g;
	int i;

	for (i = 0; i < port->gid_tbl_len && i < 16; i++) {
		if (ibv_query_gid(ctx, port_num, i, &g) == 0 && !memcmp(g.raw, v4, 12))
			return i;
	}
	return 0;
}

/* an address vector to the port itself: its GID on RoCE, its LID on IB */
static inline void probe_ah_self(struct ibv_context *ctx, uint8_t port_num,
				 const struct ibv_port_attr *port, int gid_index,
				 struct ibv_ah_attr *ah)
{
	memset(ah, 0, sizeof(*ah));
	ah->port_num = port_num;
	if (port->link_layer == IBV_LINK_LAYER_ETHERNET) {
		ah->is_global = 1;
		ah->grh.sgid_index = gid_index;
		ah->grh.hop_limit = 64;
		ibv_query_gid(ctx, port_num, gid_index, &ah->grh.dgid);
	} else {
		ah->dlid = port->lid;
	}
}

/*
 * Moves a QP from RESET to INIT on PORT_NUM, with QKEY on UD and the
 * remote rights its type has on RC and UC.
 */
static inline int probe_qp_to_init(struct ibv_qp *qp, uint8_t port_num, uint32_t qkey)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = port_num, .qkey = qkey };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC;
	if (qp->qp_type == IBV_QPT_UC)
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	mask |= qp->qp_type == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS;
	return ibv_modify_qp(qp, &a, mask);
}

/*
 * Moves a QP from INIT to RTR: on RC and UC towards DEST_QPN through AH,
 * its receive PSN 0x100; MIN_RNR_TIMER on RC.
 */
static inline int probe_qp_to_rtr(struct ibv_qp *qp, const struct ibv_ah_attr *ah,
				  uint32_t dest_qpn, uint8_t min_rnr_timer)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .ah_attr = *ah, .path_mtu = IBV_MTU_1024,
		.dest_qp_num = dest_qpn, .rq_psn = 0x100, .max_dest_rd_atomic = 4,
		.min_rnr_timer = min_rnr_timer,
	};
	int mask = IBV_QP_STATE;

	if (qp->qp_type != IBV_QPT_UD)
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	if (qp->qp_type == IBV_QPT_RC)
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	return ibv_modify_qp(qp, &a, mask);
}

/*
 * Moves a QP from RTR to RTS with the send PSN both ends of a probe's
 * QPs start at (0x100), TIMEOUT and RNR_RETRY (RC's alone).
 */
static inline int probe_qp_to_rts(struct ibv_qp *qp, uint8_t timeout, uint8_t rnr_retry)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS, .sq_psn = 0x100, .timeout = timeout, .retry_cnt = 2,
		.rnr_retry = rnr_retry, .max_rd_atomic = 4,
	};
	int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;

	if (qp->qp_type == IBV_QPT_RC)
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	return ibv_modify_qp(qp, &a, mask);
}

/* a QP, its MR, its CQ and the MR's buffer, those there are, in that order */
static inline void probe_release(struct ibv_qp *qp, struct ibv_mr *mr, struct ibv_cq *cq,
				 void *buf)
{
	if (qp)
		ibv_destroy_qp(qp);
	if (mr)
		ibv_dereg_mr(mr);
	if (cq)
		ibv_destroy_cq(cq);
	free(buf);
}

/*
 * Opens the device called NAME (NULL: the first one) and queries its
 * port PORT_NUM into *PORT; *LIST is the device list, for the caller to
 * free after closing.  NULL, said on stderr as PROG, if it cannot.
 */
static inline struct ibv_context *probe_open(const char *prog, const char *name,
					     uint8_t port_num, struct ibv_port_attr *port,
					     struct ibv_device ***list)
{
	struct ibv_context *ctx;
	int i, n;

	*list = ibv_get_device_list(&n);
	for (i = 0; *list && i < n; i++)
		if (!name || !strcmp(ibv_get_device_name((*list)[i]), name))
			break;
	if (!*list || i == n) {
		fprintf(stderr, "%s: no device %s\n", prog, name ? name : "");
		return NULL;
	}
	ctx = ibv_open_device((*list)[i]);
	if (!ctx || ibv_query_port(ctx, port_num, port)) {
		fprintf(stderr, "%s: cannot open %s\n", prog, ibv_get_device_name((*list)[i]));
		return NULL;
	}
	return ctx;
}

#endif
