/*
 * vt: helpers for the data-path test programs (vt.h).
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vt.h"

void (*vt_fail_hook)(const char *msg);

void vt_fail_at(const char *file, int line, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	int n;

	n = snprintf(msg, sizeof(msg), "%s:%d: ", file, line);
	va_start(ap, fmt);
	vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
	va_end(ap);
	if (vt_fail_hook)
		vt_fail_hook(msg);
	fprintf(stderr, "FAIL: %s\n", msg);
	fflush(NULL);
	exit(1);
}

/* ---- time ----------------------------------------------------------------- */

int vt_tmul(void)
{
	static int tmul;
	const char *s;

	if (!tmul) {
		s = getenv("VT_TMUL");
		tmul = s ? atoi(s) : 1;
		if (tmul < 1)
			tmul = 1;
	}
	return tmul;
}

int vt_tmo_ms(void)
{
	return 10000 * vt_tmul();
}

long vt_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

uint64_t vt_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void vt_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* ---- data patterns ------------------------------------------------------ */

void vt_fill(void *buf, size_t len, uint64_t base_off, uint32_t seed)
{
	uint8_t *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = vt_pat(base_off + i, seed);
}

long vt_check(const void *buf, size_t len, uint64_t base_off, uint32_t seed)
{
	const uint8_t *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != vt_pat(base_off + i, seed))
			return (long)i;
	return -1;
}

void vt_expect_pat(const void *buf, size_t len, uint64_t base_off,
		   uint32_t seed, const char *what)
{
	long i = vt_check(buf, len, base_off, seed);

	if (i >= 0)
		vt_fail("%s: byte %ld of %zu is 0x%02x, want 0x%02x (pattern %u)",
			what, i, len, ((const uint8_t *)buf)[i],
			vt_pat(base_off + (uint64_t)i, seed), seed);
}

void vt_expect_byte(const void *buf, size_t len, uint8_t c, const char *what)
{
	const uint8_t *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != c)
			vt_fail("%s: byte %zu of %zu is 0x%02x, want 0x%02x",
				what, i, len, p[i], c);
}

/* ---- devices ------------------------------------------------------------ */

void vt_open(struct vt_dev *d)
{
	struct ibv_device **list;
	const char *want = getenv("VT_DEVICE");
	int i, n;

	memset(d, 0, sizeof(*d));
	list = ibv_get_device_list(&n);
	vt_assert(list, "ibv_get_device_list: %s", strerror(errno));
	vt_assert(n > 0, "no RDMA device");
	for (i = 0; i < n; i++)
		if (!want || strcmp(ibv_get_device_name(list[i]), want) == 0)
			break;
	vt_assert(i < n, "no device %s", want);
	d->ctx = ibv_open_device(list[i]);
	vt_assert(d->ctx, "ibv_open_device(%s): %s",
		  ibv_get_device_name(list[i]), strerror(errno));
	ibv_free_device_list(list);
	d->port_num = 1;
	vt_assert(ibv_query_device(d->ctx, &d->attr) == 0, "ibv_query_device");
	vt_assert(ibv_query_port(d->ctx, d->port_num, &d->port) == 0,
		  "ibv_query_port");
	vt_assert(d->port.state == IBV_PORT_ACTIVE, "port state %d", d->port.state);
	d->roce = d->port.link_layer == IBV_LINK_LAYER_ETHERNET;
	vt_assert(d->roce || d->port.lid != 0, "port LID 0");
	if (getenv("VT_GID_INDEX"))
		d->gid_index = (uint8_t)atoi(getenv("VT_GID_INDEX"));
	vt_assert(ibv_query_gid(d->ctx, d->port_num, d->gid_index, &d->gid) == 0,
		  "ibv_query_gid %u", d->gid_index);
	d->pd = ibv_alloc_pd(d->ctx);
	vt_assert(d->pd, "ibv_alloc_pd: %s", strerror(errno));
}

void vt_close(struct vt_dev *d)
{
	int ret;

	if (d->pd) {
		ret = ibv_dealloc_pd(d->pd);
		vt_assert(ret == 0, "ibv_dealloc_pd: %s", strerror(ret));
	}
	ret = ibv_close_device(d->ctx);
	vt_assert(ret == 0, "ibv_close_device: %d", ret);
	memset(d, 0, sizeof(*d));
}

/* ---- memory --------------------------------------------------------------- */

struct ibv_mr *vt_reg(struct ibv_pd *pd, size_t len, int access)
{
	struct ibv_mr *mr;
	void *buf;
	int ret;

	ret = posix_memalign(&buf, 4096, len ? len : 1);
	vt_assert(ret == 0, "posix_memalign(%zu): %s", len, strerror(ret));
	memset(buf, 0, len ? len : 1);
	mr = ibv_reg_mr(pd, buf, len, access);
	vt_assert(mr, "ibv_reg_mr(%zu bytes, access 0x%x): %s", len,
		  (unsigned int)access, strerror(errno));
	vt_assert(mr->addr == buf && mr->length == len && mr->pd == pd,
		  "ibv_reg_mr: mr fields addr %p length %zu pd %p", mr->addr,
		  mr->length, (void *)mr->pd);
	return mr;
}

void vt_dereg(struct ibv_mr *mr)
{
	void *buf = mr->addr;
	int ret = ibv_dereg_mr(mr);

	vt_assert(ret == 0, "ibv_dereg_mr: %s", strerror(ret));
	free(buf);
}

/* ---- queue pairs ------------------------------------------------------ */

static int def(int v, int dflt)
{
	if (v == VT_ZERO)
		return 0;
	return v ? v : dflt;
}

struct ibv_qp *vt_qp(struct vt_dev *d, struct ibv_cq *scq, struct ibv_cq *rcq,
		     const struct vt_qp_opts *o)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = scq;
	ia.recv_cq = rcq;
	ia.srq = o->srq;
	ia.qp_type = o->type ? o->type : IBV_QPT_RC;
	ia.sq_sig_all = o->sq_sig_all;
	ia.cap.max_send_wr = (uint32_t)def((int)o->max_send_wr, 64);
	ia.cap.max_recv_wr = o->srq ? 0 : (uint32_t)def((int)o->max_recv_wr, 64);
	ia.cap.max_send_sge = (uint32_t)def((int)o->max_send_sge, 4);
	ia.cap.max_recv_sge = o->srq ? 0 : (uint32_t)def((int)o->max_recv_sge, 4);
	ia.cap.max_inline_data = o->max_inline;
	qp = ibv_create_qp(d->pd, &ia);
	vt_assert(qp, "ibv_create_qp(type %d): %s", ia.qp_type, strerror(errno));
	vt_assert(qp->qp_num > 1 && qp->qp_num <= 0xffffff,
		  "qp_num %u out of range", qp->qp_num);
	vt_assert(qp->state == IBV_QPS_RESET, "new QP in state %d", qp->state);
	return qp;
}

void vt_qp_addr(struct vt_dev *d, struct ibv_qp *qp, const struct vt_qp_opts *o,
		struct vt_addr *a)
{
	memset(a, 0, sizeof(*a));
	a->lid = d->port.lid;
	a->qpn = qp->qp_num;
	a->psn = o ? o->psn & 0xffffff : 0;
	a->gid = d->gid;
}

void vt_connect(struct vt_dev *d, struct ibv_qp *qp, const struct vt_addr *remote,
		const struct vt_qp_opts *o)
{
	enum ibv_qp_type type = o->type ? o->type : IBV_QPT_RC;
	struct ibv_qp_attr a;
	int mask, ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = d->port_num;
	mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (type == IBV_QPT_UD) {
		a.qkey = o->qkey ? o->qkey : VT_QKEY;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = o->no_access ? 0 :
			o->access ? o->access :
			(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			 IBV_ACCESS_REMOTE_ATOMIC);
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	ret = ibv_modify_qp(qp, &a, mask);
	vt_assert(ret == 0, "modify QP %u to INIT: %s", qp->qp_num, strerror(ret));

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (type != IBV_QPT_UD) {
		a.path_mtu = o->mtu ? o->mtu : IBV_MTU_4096;
		/* a wire's MTU is the link's */
		if (d->roce && a.path_mtu > d->port.active_mtu)
			a.path_mtu = d->port.active_mtu;
		a.dest_qp_num = remote->qpn;
		a.rq_psn = remote->psn;
		a.ah_attr.dlid = remote->lid;
		a.ah_attr.port_num = d->port_num;
		if (d->roce) {
			a.ah_attr.is_global = 1;
			a.ah_attr.grh.dgid = remote->gid;
			a.ah_attr.grh.sgid_index = d->gid_index;
			a.ah_attr.grh.hop_limit = 64;
		}
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (type == IBV_QPT_RC) {
			a.max_dest_rd_atomic = (uint8_t)def(o->rd_atomic, 4);
			a.min_rnr_timer = (uint8_t)def(o->min_rnr_timer, 1);
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
	}
	ret = ibv_modify_qp(qp, &a, mask);
	vt_assert(ret == 0, "modify QP %u to RTR: %s", qp->qp_num, strerror(ret));

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = o->psn & 0xffffff;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (type == IBV_QPT_RC) {
		a.timeout = (uint8_t)def(o->timeout, 12);
		a.retry_cnt = (uint8_t)def(o->retry_cnt, 3);
		a.rnr_retry = (uint8_t)def(o->rnr_retry, 7);
		a.max_rd_atomic = (uint8_t)def(o->rd_atomic, 4);
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	}
	ret = ibv_modify_qp(qp, &a, mask);
	vt_assert(ret == 0, "modify QP %u to RTS: %s", qp->qp_num, strerror(ret));
	vt_assert(qp->state == IBV_QPS_RTS, "qp->state %d after RTS", qp->state);
}

int vt_qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	int ret;

	memset(&a, 0, sizeof(a));
	ret = ibv_query_qp(qp, &a, IBV_QP_STATE, &ia);
	vt_assert(ret == 0, "ibv_query_qp: %s", strerror(ret));
	return a.qp_state;
}

void vt_pair2(struct vt_pair *p, struct vt_dev *d, const struct vt_qp_opts *o0,
	      const struct vt_qp_opts *o1, int ncqe)
{
	static const struct vt_qp_opts dflt;
	struct vt_addr a[2];
	int i;

	memset(p, 0, sizeof(*p));
	p->d = d;
	p->o[0] = o0 ? *o0 : dflt;
	p->o[1] = o1 ? *o1 : dflt;
	if (!p->o[0].psn)
		p->o[0].psn = 0x1234;
	if (!p->o[1].psn)
		p->o[1].psn = 0xabcde;
	for (i = 0; i < 2; i++) {
		p->scq[i] = ibv_create_cq(d->ctx, ncqe ? ncqe : 256, NULL, NULL, 0);
		vt_assert(p->scq[i], "ibv_create_cq: %s", strerror(errno));
		p->rcq[i] = ibv_create_cq(d->ctx, ncqe ? ncqe : 256, NULL, NULL, 0);
		vt_assert(p->rcq[i], "ibv_create_cq: %s", strerror(errno));
		p->qp[i] = vt_qp(d, p->scq[i], p->rcq[i], &p->o[i]);
		vt_qp_addr(d, p->qp[i], &p->o[i], &a[i]);
	}
	vt_connect(d, p->qp[0], &a[1], &p->o[0]);
	vt_connect(d, p->qp[1], &a[0], &p->o[1]);
}

void vt_pair(struct vt_pair *p, struct vt_dev *d, const struct vt_qp_opts *opts,
	     int ncqe)
{
	vt_pair2(p, d, opts, opts, ncqe);
}

void vt_pair_free(struct vt_pair *p)
{
	int i, ret;

	for (i = 0; i < 2; i++) {
		if (p->qp[i]) {
			ret = ibv_destroy_qp(p->qp[i]);
			vt_assert(ret == 0, "ibv_destroy_qp: %s", strerror(ret));
		}
		if (p->scq[i]) {
			ret = ibv_destroy_cq(p->scq[i]);
			vt_assert(ret == 0, "ibv_destroy_cq: %s", strerror(ret));
		}
		if (p->rcq[i]) {
			ret = ibv_destroy_cq(p->rcq[i]);
			vt_assert(ret == 0, "ibv_destroy_cq: %s", strerror(ret));
		}
	}
	memset(p, 0, sizeof(*p));
}

/* ---- posting and polling ------------------------------------------------ */

int vt_post(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op,
	    unsigned int flags, const void *addr, uint32_t len, uint32_t lkey,
	    uint64_t raddr, uint32_t rkey)
{
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_sge sge;
	int ret;

	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)addr;
	sge.length = len;
	sge.lkey = lkey;
	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.send_flags = flags;
	wr.sg_list = &sge;
	wr.num_sge = len ? 1 : 0;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM)
		wr.imm_data = htobe32((uint32_t)wr_id ^ 0x5a5a0000u);
	if (op == IBV_WR_SEND_WITH_INV)
		wr.invalidate_rkey = rkey;
	ret = ibv_post_send(qp, &wr, &bad);
	if (ret)
		vt_assert(bad == &wr, "ibv_post_send failed (%d) with bad_wr %p, not the WR %p",
			  ret, (void *)bad, (void *)&wr);
	return ret;
}

void vt_send(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op,
	     unsigned int flags, const void *addr, uint32_t len, uint32_t lkey,
	     uint64_t raddr, uint32_t rkey)
{
	int ret = vt_post(qp, wr_id, op, flags, addr, len, lkey, raddr, rkey);

	vt_assert(ret == 0, "ibv_post_send(opcode %d, %u bytes): %s", op, len,
		  strerror(ret));
}

void vt_atomic(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op,
	       void *result, uint32_t lkey, uint64_t raddr, uint32_t rkey,
	       uint64_t compare_add, uint64_t swap)
{
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_sge sge;
	int ret;

	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)result;
	sge.length = 8;
	sge.lkey = lkey;
	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = compare_add;
	wr.wr.atomic.swap = swap;
	ret = ibv_post_send(qp, &wr, &bad);
	vt_assert(ret == 0, "ibv_post_send(atomic %d): %s", op, strerror(ret));
}

void vt_ud_send(struct ibv_qp *qp, uint64_t wr_id, struct ibv_ah *ah,
		uint32_t rqpn, uint32_t qkey, const void *addr, uint32_t len,
		uint32_t lkey, unsigned int flags)
{
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_sge sge;
	int ret;

	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)addr;
	sge.length = len;
	sge.lkey = lkey;
	wr.wr_id = wr_id;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = flags;
	wr.sg_list = &sge;
	wr.num_sge = len ? 1 : 0;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = rqpn;
	wr.wr.ud.remote_qkey = qkey;
	ret = ibv_post_send(qp, &wr, &bad);
	vt_assert(ret == 0, "ibv_post_send(UD, %u bytes): %s", len, strerror(ret));
}

void vt_recv(struct ibv_qp *qp, uint64_t wr_id, void *addr, uint32_t len,
	     uint32_t lkey)
{
	struct ibv_recv_wr wr, *bad = NULL;
	struct ibv_sge sge;
	int ret;

	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)addr;
	sge.length = len;
	sge.lkey = lkey;
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	ret = ibv_post_recv(qp, &wr, &bad);
	vt_assert(ret == 0, "ibv_post_recv(%u bytes): %s", len, strerror(ret));
}

void vt_srq_recv(struct ibv_srq *srq, uint64_t wr_id, void *addr, uint32_t len,
		 uint32_t lkey)
{
	struct ibv_recv_wr wr, *bad = NULL;
	struct ibv_sge sge;
	int ret;

	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)addr;
	sge.length = len;
	sge.lkey = lkey;
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	ret = ibv_post_srq_recv(srq, &wr, &bad);
	vt_assert(ret == 0, "ibv_post_srq_recv(%u bytes): %s", len, strerror(ret));
}

int vt_poll(struct ibv_cq *cq, struct ibv_wc *wc, int n, int ms)
{
	long deadline = vt_now_ms() + ms;
	int got = 0, r;
	unsigned int spins = 0;

	while (got < n) {
		r = ibv_poll_cq(cq, n - got, wc + got);
		vt_assert(r >= 0, "ibv_poll_cq: %d", r);
		got += r;
		if (got >= n)
			break;
		if ((++spins & 1023) == 0) {
			if (vt_now_ms() > deadline)
				break;
			/* a polling app, but let the engine run on a busy machine */
			if ((spins & 65535) == 0)
				vt_sleep_ms(0);
		}
	}
	return got;
}

const char *vt_status(int status)
{
	return ibv_wc_status_str((enum ibv_wc_status)status);
}

void vt_expect_wc(struct ibv_cq *cq, struct ibv_wc *wc, uint64_t wr_id,
		  enum ibv_wc_status status, const char *what)
{
	struct ibv_wc tmp;

	if (!wc)
		wc = &tmp;
	memset(wc, 0, sizeof(*wc));
	vt_assert(vt_poll(cq, wc, 1, vt_tmo_ms()) == 1,
		  "%s: no completion within %d ms (want wr_id %llu, %s)", what,
		  vt_tmo_ms(), (unsigned long long)wr_id, vt_status(status));
	vt_assert(wc->wr_id == wr_id && wc->status == status,
		  "%s: completion wr_id %llu status %s (%d) vendor_err %u, want wr_id %llu status %s",
		  what, (unsigned long long)wc->wr_id, vt_status(wc->status),
		  wc->status, wc->vendor_err, (unsigned long long)wr_id,
		  vt_status(status));
}

void vt_expect_ok(struct ibv_cq *cq, struct ibv_wc *wc, uint64_t wr_id,
		  enum ibv_wc_opcode opcode, const char *what)
{
	struct ibv_wc tmp;

	if (!wc)
		wc = &tmp;
	vt_expect_wc(cq, wc, wr_id, IBV_WC_SUCCESS, what);
	vt_assert(wc->opcode == opcode, "%s: completion opcode %d, want %d",
		  what, wc->opcode, opcode);
}

void vt_expect_ok_two(struct ibv_cq *cq, struct ibv_wc got[2],
		      uint64_t id_a, enum ibv_wc_opcode op_a,
		      uint64_t id_b, enum ibv_wc_opcode op_b, const char *what)
{
	struct ibv_wc wc[2];
	int i;

	memset(wc, 0, sizeof(wc));
	vt_assert(vt_poll(cq, wc, 2, vt_tmo_ms()) == 2,
		  "%s: not two completions within %d ms", what, vt_tmo_ms());
	i = wc[0].wr_id == id_a ? 0 : 1;
	vt_assert(wc[i].wr_id == id_a && wc[i].status == IBV_WC_SUCCESS &&
		  wc[i].opcode == op_a && wc[!i].wr_id == id_b &&
		  wc[!i].status == IBV_WC_SUCCESS && wc[!i].opcode == op_b,
		  "%s: completions wr_id %llu %s opcode %d and wr_id %llu %s opcode %d, want wr_ids %llu and %llu",
		  what, (unsigned long long)wc[0].wr_id, vt_status(wc[0].status),
		  wc[0].opcode, (unsigned long long)wc[1].wr_id,
		  vt_status(wc[1].status), wc[1].opcode,
		  (unsigned long long)id_a, (unsigned long long)id_b);
	if (got) {
		got[0] = wc[i];
		got[1] = wc[!i];
	}
}

void vt_expect_none(struct ibv_cq *cq, int ms, const char *what)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	if (vt_poll(cq, &wc, 1, ms) != 0)
		vt_fail("%s: unexpected completion wr_id %llu status %s opcode %d byte_len %u",
			what, (unsigned long long)wc.wr_id, vt_status(wc.status),
			wc.opcode, wc.byte_len);
}

uint32_t vt_qkey_viol(struct ibv_context *ctx, uint8_t port)
{
	struct ibv_port_attr pa;

	vt_assert(ibv_query_port(ctx, port, &pa) == 0, "ibv_query_port: %s",
		  strerror(errno));
	return pa.qkey_viol_cntr;
}

void vt_expect_qkey_viol(struct ibv_context *ctx, uint8_t port, uint32_t want)
{
	long deadline = vt_now_ms() + vt_tmo_ms();
	uint32_t got;

	while ((got = vt_qkey_viol(ctx, port)) != want && vt_now_ms() < deadline)
		vt_sleep_ms(5);
	vt_assert(got == want, "qkey_viol_cntr %u, want %u", got, want);
}

/* ---- async events ------------------------------------------------------- */

int vt_async(struct ibv_context *ctx, struct ibv_async_event *ev, int ms)
{
	struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
	int r;

	memset(ev, 0, sizeof(*ev));
	r = poll(&pfd, 1, ms);
	vt_assert(r >= 0, "poll(async_fd): %s", strerror(errno));
	if (r == 0)
		return 0;
	vt_assert(ibv_get_async_event(ctx, ev) == 0, "ibv_get_async_event: %s",
		  strerror(errno));
	ibv_ack_async_event(ev);
	return 1;
}

const char *vt_event_name(int type)
{
	return ibv_event_type_str((enum ibv_event_type)type);
}

/* ---- files ---------------------------------------------------------------- */

void vt_put(const char *dir, const char *name, const char *fmt, ...)
{
	char path[4096], tmp[4200];
	va_list ap;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	f = fopen(tmp, "w");
	vt_assert(f, "fopen %s: %s", tmp, strerror(errno));
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	vt_assert(fclose(f) == 0, "fclose %s", tmp);
	chmod(tmp, 0644);
	vt_assert(rename(tmp, path) == 0, "rename %s: %s", path, strerror(errno));
}

int vt_exists(const char *dir, const char *name)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

int vt_get(const char *dir, const char *name, char *buf, size_t len, int ms)
{
	char path[4096];
	long deadline = vt_now_ms() + ms;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	for (;;) {
		fd = open(path, O_RDONLY);
		if (fd >= 0)
			break;
		if (vt_now_ms() > deadline)
			return 0;
		vt_sleep_ms(5);
	}
	n = read(fd, buf, len - 1);
	close(fd);
	vt_assert(n >= 0, "read %s: %s", path, strerror(errno));
	buf[n] = '\0';
	return 1;
}

void vt_addr_str(const struct vt_addr *a, char *buf, size_t len)
{
	size_t i, n;

	n = (size_t)snprintf(buf, len, "%u %u %u ", a->lid, a->qpn, a->psn);
	for (i = 0; i < 16 && n + 2 < len; i++, n += 2)
		snprintf(buf + n, len - n, "%02x", a->gid.raw[i]);
}

int vt_addr_parse(const char *s, struct vt_addr *a)
{
	unsigned int lid, qpn, psn, b;
	char hex[33];
	int i;

	memset(a, 0, sizeof(*a));
	if (sscanf(s, "%u %u %u %32s", &lid, &qpn, &psn, hex) != 4 ||
	    strlen(hex) != 32)
		return -1;
	a->lid = (uint16_t)lid;
	a->qpn = qpn;
	a->psn = psn;
	for (i = 0; i < 16; i++) {
		if (sscanf(hex + 2 * i, "%2x", &b) != 1)
			return -1;
		a->gid.raw[i] = (uint8_t)b;
	}
	return 0;
}

/* ---- added with datapath.c and peers.c ---------------------------------- */

void vt_pair_on(struct vt_pair *p, struct vt_dev *d, const struct vt_qp_opts *o0,
		const struct vt_qp_opts *o1, struct ibv_cq *cq0, struct ibv_cq *cq1)
{
	static const struct vt_qp_opts dflt;
	struct ibv_cq *cq[2] = { cq0, cq1 };
	struct vt_addr a[2];
	int i;

	memset(p, 0, sizeof(*p));
	p->d = d;
	p->o[0] = o0 ? *o0 : dflt;
	p->o[1] = o1 ? *o1 : dflt;
	if (!p->o[0].psn)
		p->o[0].psn = 0x1234;
	if (!p->o[1].psn)
		p->o[1].psn = 0xabcde;
	for (i = 0; i < 2; i++) {
		p->qp[i] = vt_qp(d, cq[i], cq[i], &p->o[i]);
		vt_qp_addr(d, p->qp[i], &p->o[i], &a[i]);
	}
	vt_connect(d, p->qp[0], &a[1], &p->o[0]);
	vt_connect(d, p->qp[1], &a[0], &p->o[1]);
}

int vt_memfd_maps(const char *name, int *writable, void **first)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512], want[128], perms[5];
	unsigned long start;
	int n = 0;

	vt_assert(f, "/proc/self/maps: %s", strerror(errno));
	snprintf(want, sizeof(want), "/memfd:%s ", name);
	if (writable)
		*writable = 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strstr(line, want) ||
		    sscanf(line, "%lx-%*x %4s", &start, perms) != 2)
			continue;
		if (first && n == 0)
			*first = (void *)start;
		if (writable && perms[1] == 'w')
			(*writable)++;
		n++;
	}
	fclose(f);
	return n;
}

int vt_transit_maps(void)
{
	return vt_memfd_maps("ibvd-transit", NULL, NULL);
}

struct ibv_mr *vt_reg_memfd(struct ibv_pd *pd, size_t len, int access,
			    const char *name)
{
	struct ibv_mr *mr;
	void *buf;
	int fd;

	fd = memfd_create(name, MFD_CLOEXEC);
	vt_assert(fd >= 0, "memfd_create: %s", strerror(errno));
	vt_assert(ftruncate(fd, (off_t)len) == 0, "ftruncate: %s", strerror(errno));
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	vt_assert(buf != MAP_FAILED, "mmap: %s", strerror(errno));
	mr = ibv_reg_mr(pd, buf, len, access);
	vt_assert(mr, "ibv_reg_mr(memfd %s): %s", name, strerror(errno));
	/* the library passed the daemon a copy of the fd: ours may go */
	close(fd);
	return mr;
}

void vt_dereg_memfd(struct ibv_mr *mr)
{
	void *buf = mr->addr;
	size_t len = mr->length;
	int ret = ibv_dereg_mr(mr);

	vt_assert(ret == 0, "ibv_dereg_mr: %s", strerror(ret));
	munmap(buf, len);
}

struct ibv_ah *vt_ah(struct vt_dev *d, uint16_t dlid, const union ibv_gid *dgid)
{
	struct ibv_ah_attr a;
	struct ibv_ah *ah;

	memset(&a, 0, sizeof(a));
	a.dlid = dlid;
	a.port_num = d->port_num;
	if (dgid) {
		a.is_global = 1;
		a.grh.dgid = *dgid;
		a.grh.sgid_index = 0;
		a.grh.hop_limit = 64;
	}
	ah = ibv_create_ah(d->pd, &a);
	vt_assert(ah, "ibv_create_ah(dlid %u%s): %s", dlid, dgid ? ", global" : "",
		  strerror(errno));
	return ah;
}

void vt_ah_free(struct ibv_ah *ah)
{
	int ret = ibv_destroy_ah(ah);

	vt_assert(ret == 0, "ibv_destroy_ah: %s", strerror(ret));
}

int vt_post_sgl(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op,
		unsigned int flags, struct ibv_sge *sge, int n, uint64_t raddr,
		uint32_t rkey)
{
	struct ibv_send_wr wr, *bad = NULL;
	int ret;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.send_flags = flags;
	wr.sg_list = sge;
	wr.num_sge = n;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM)
		wr.imm_data = htobe32((uint32_t)wr_id ^ 0x5a5a0000u);
	if (op == IBV_WR_SEND_WITH_INV)
		wr.invalidate_rkey = rkey;
	ret = ibv_post_send(qp, &wr, &bad);
	if (ret)
		vt_assert(bad == &wr, "ibv_post_send failed (%d) with bad_wr %p, not the WR %p",
			  ret, (void *)bad, (void *)&wr);
	return ret;
}

void vt_recv_sgl(struct ibv_qp *qp, uint64_t wr_id, struct ibv_sge *sge, int n)
{
	struct ibv_recv_wr wr, *bad = NULL;
	int ret;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = sge;
	wr.num_sge = n;
	ret = ibv_post_recv(qp, &wr, &bad);
	vt_assert(ret == 0, "ibv_post_recv(%d SGEs): %s", n, strerror(ret));
}

void vt_expect_state(struct ibv_qp *qp, enum ibv_qp_state state, const char *what)
{
	int s = vt_qp_state(qp);

	vt_assert(s == (int)state, "%s: QP %u in state %d, want %d", what,
		  qp->qp_num, s, state);
}

static const void *event_obj(const struct ibv_async_event *ev)
{
	switch (ev->event_type) {
	case IBV_EVENT_CQ_ERR:
		return ev->element.cq;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		return ev->element.srq;
	case IBV_EVENT_WQ_FATAL:
		return ev->element.wq;
	case IBV_EVENT_DEVICE_FATAL:
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		return NULL;
	default:
		return ev->element.qp;
	}
}

int vt_async_wait(struct ibv_context *ctx, enum ibv_event_type type,
		  const void *obj, int ms)
{
	long deadline = vt_now_ms() + ms;
	struct ibv_async_event ev;
	long left;

	for (;;) {
		left = deadline - vt_now_ms();
		if (left < 0 || !vt_async(ctx, &ev, (int)left))
			return 0;
		if (ev.event_type == type && (!obj || event_obj(&ev) == obj))
			return 1;
		fprintf(stderr, "vt: skipping async event %s (%d) about %p\n",
			vt_event_name(ev.event_type), ev.event_type,
			event_obj(&ev));
	}
}

void vt_expect_async(struct ibv_context *ctx, enum ibv_event_type type,
		     const void *obj, const char *what)
{
	vt_assert(vt_async_wait(ctx, type, obj, vt_tmo_ms()),
		  "%s: no async event %s about %p within %d ms", what,
		  vt_event_name(type), obj, vt_tmo_ms());
}

void vt_expect_no_async(struct ibv_context *ctx, int ms, const char *what)
{
	struct ibv_async_event ev;

	if (vt_async(ctx, &ev, ms))
		vt_fail("%s: unexpected async event %s (%d) about %p", what,
			vt_event_name(ev.event_type), ev.event_type,
			event_obj(&ev));
}
