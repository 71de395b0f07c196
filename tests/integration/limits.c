/*
 * limits-helper: an ordinary verbs and rdma_cm application for limits.sh,
 * driving one of the daemon's allocations other than verbs objects.
 *
 *	limits-helper KIND N [hold]
 *
 * makes up to N of KIND, stops at the first refusal and prints
 *	created K errno E pid P
 * (E 0: all N made).  KIND is
 *	session		connections (rdma event channels, one each)
 *	comp_channel	completion channels on one context
 *	mcast_attach	attachments of one UD QP to N groups
 *	mcast_join	rdma_cm joins of one UD id to N groups
 *	group_attach	N UD QPs attached to one group
 *	group_join	N rdma_cm ids (no QPs) joined to one group, each
 *			answered (a MULTICAST_ERROR is a refusal)
 *	flood		comp_channel, but it keeps trying after a refusal:
 *			"created K refused R errno E pid P"
 *	noread		N multicast join/leave pairs on an event channel it
 *			never reads: "created K" is how many went through
 *			before the daemon hung up (E: how the next failed)
 *	compevents	N completion notifications (a UD send to itself
 *			each, the CQ armed before) on a completion channel it
 *			never reads: "created K" completions polled; with
 *			"hold", once stdin closes it reads the events the
 *			channel kept: "read K"
 *	cqevents	N CQs on one completion channel, each armed and
 *			completed once (a UD QP of its own sending to
 *			itself) before any event is read; then the events
 *			are read: "created K" events came (up to CQEVENTS_MAX)
 *	cqgone		cqevents, but the first 9N/10 CQs fire and are
 *			destroyed (their events unread) before the others
 *			fire: "created K" events of the N/10 left came
 *	rearm		two CQs on one channel: the first armed and
 *			completed N times with no event read, then the
 *			second once; "created K" events came, errno 0 if
 *			the second's was among them (else ENOENT)
 *	cm_ports	N rdma_cm ids on one event channel, each bound to
 *			0.0.0.0 port 0 (an ephemeral port of its own)
 *	imports		N imports of its own context (ibv_import_device
 *			of a dup of its cmd_fd), each closed at once
 *	objects		N objects over as many contexts as it takes (N up
 *			to OBJECTS_MAX_N), a PD then a memory window on it
 *			in turn (two ways of counting as hca_object)
 * With "hold" it then keeps everything until stdin closes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define MAX_N	100000
#define OBJECTS_MAX_N	(1L << 21)
/* PDs a context holds here, under the device's max_pd and its 65,536 objects */
#define PDS_PER_CTX	60000

static __attribute__((noreturn)) void die(const char *what)
{
	fprintf(stderr, "limits-helper: %s: %s\n", what, strerror(errno));
	exit(2);
}

static struct ibv_context *open_first(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *c;

	if (!list || !list[0])
		die("no device");
	c = ibv_open_device(list[0]);
	if (!c)
		die("ibv_open_device");
	ibv_free_device_list(list);
	return c;
}

struct result {
	long made, refused;
	int err;			/* the first refusal's errno */
};

static void refused(struct result *r, int err)
{
	if (!r->err)
		r->err = err ? err : EIO;
	r->refused++;
}

/* PDs and MWs, a new context each PDS_PER_CTX: the daemon's cap is per uid. */
static void objects(long n, struct result *r)
{
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd = NULL;
	long in_ctx = 0;

	while (r->made < n) {
		if (!ctx || in_ctx == PDS_PER_CTX) {
			ctx = open_first();
			in_ctx = 0;
			pd = NULL;
		}
		errno = 0;
		if (!pd || r->made % 2 == 0)
			pd = ibv_alloc_pd(ctx);
		else if (!ibv_alloc_mw(pd, IBV_MW_TYPE_1))
			pd = NULL;
		if (!pd) {
			refused(r, errno);
			return;
		}
		r->made++;
		in_ctx++;
	}
}

static void cm_ports(long n, struct result *r)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in any = { .sin_family = AF_INET };
	struct rdma_cm_id *id;

	if (!ch)
		die("rdma_create_event_channel");
	while (r->made < n) {
		errno = 0;
		if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
			refused(r, errno);
			return;
		}
		if (rdma_bind_addr(id, (struct sockaddr *)&any)) {
			refused(r, errno);
			rdma_destroy_id(id);
			return;
		}
		r->made++;
	}
}

static void sessions(long n, struct result *r)
{
	static struct rdma_event_channel *ch[MAX_N];

	while (r->made < n) {
		errno = 0;
		ch[r->made] = rdma_create_event_channel();
		if (!ch[r->made]) {
			refused(r, errno);
			return;
		}
		r->made++;
	}
}

/* comp_channel (stop: stop at the first refusal) and flood. */
static void comp_channels(long n, int stop, struct result *r)
{
	struct ibv_context *ctx = open_first();
	long i;

	for (i = 0; i < n; i++) {
		errno = 0;
		if (ibv_create_comp_channel(ctx)) {
			r->made++;
			continue;
		}
		refused(r, errno);
		if (stop)
			return;
	}
}

/* Each import is a session that shares the context, then leaves it. */
static void imports(long n, struct result *r)
{
	struct ibv_context *ctx = open_first(), *imp;
	int fd;

	while (r->made < n) {
		errno = 0;
		fd = dup(ctx->cmd_fd);
		if (fd < 0)
			die("dup");
		imp = ibv_import_device(fd);	/* fd is the import's */
		if (!imp) {
			refused(r, errno);
			close(fd);
			return;
		}
		ibv_close_device(imp);
		r->made++;
	}
}

/* A new UD QP to attach, on the first device (one PD and CQ for all). */
static struct ibv_qp *attach_qp(void)
{
	static struct ibv_pd *pd;
	static struct ibv_cq *cq;
	struct ibv_qp_init_attr a = {
		.qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp;

	if (!pd) {
		struct ibv_context *ctx = open_first();

		pd = ibv_alloc_pd(ctx);
		cq = pd ? ibv_create_cq(ctx, 4, NULL, NULL, 0) : NULL;
		if (!cq)
			die("a PD and a CQ");
	}
	a.send_cq = a.recv_cq = cq;
	qp = ibv_create_qp(pd, &a);
	if (!qp)
		die("a UD QP to attach");
	return qp;
}

static void mcast_attach(long n, struct result *r)
{
	struct ibv_qp *qp = attach_qp();
	union ibv_gid gid;
	int ret;

	memset(&gid, 0, sizeof(gid));
	gid.raw[0] = 0xff;
	gid.raw[1] = 0x12;
	while (r->made < n) {
		gid.raw[14] = (uint8_t)(r->made >> 8);
		gid.raw[15] = (uint8_t)r->made;
		ret = ibv_attach_mcast(qp, &gid, (uint16_t)(0xc001 + r->made));
		if (ret) {
			refused(r, ret);
			return;
		}
		r->made++;
	}
}

/* A UD QP of its own, in RTS, with its CQ on channel ch (may be NULL). */
static struct ibv_qp *ud_qp(struct ibv_context *ctx, struct ibv_pd *pd,
			    struct ibv_comp_channel *ch, struct ibv_cq **cq)
{
	struct ibv_qp_init_attr a = {
		.qp_type = IBV_QPT_UD,
		.sq_sig_all = 1,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1,
			 .max_inline_data = 16 },
	};
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x11111111,
	};
	struct ibv_qp *qp;

	*cq = ibv_create_cq(ctx, 4, NULL, ch, 0);
	a.send_cq = a.recv_cq = *cq;
	qp = *cq ? ibv_create_qp(pd, &a) : NULL;
	if (!qp ||
	    ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_QKEY))
		die("a UD QP");
	attr.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &attr, IBV_QP_STATE))
		die("UD QP to RTR");
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = 1;
	if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("UD QP to RTS");
	return qp;
}

/* An address vector to port 1 of ctx: a QP's datagrams to itself. */
static struct ibv_ah *self_ah(struct ibv_context *ctx, struct ibv_pd *pd)
{
	struct ibv_ah_attr ah_attr = { .port_num = 1 };
	struct ibv_port_attr port;
	struct ibv_ah *ah;

	if (ibv_query_port(ctx, 1, &port))
		die("ibv_query_port");
	ah_attr.dlid = port.lid;
	ah = ibv_create_ah(pd, &ah_attr);
	if (!ah)
		die("ibv_create_ah");
	return ah;
}

/* Send once from qp to itself through ah, and take the completion. */
static int send_to_self(struct ibv_qp *qp, struct ibv_cq *cq,
			struct ibv_ah *ah)
{
	char msg[8] = "event";
	struct ibv_sge sge = { .addr = (uintptr_t)msg, .length = sizeof(msg) };
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_INLINE,
	}, *bad;
	struct ibv_wc wc;
	int got;

	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qp->qp_num;
	wr.wr.ud.remote_qkey = 0x11111111;
	if (ibv_post_send(qp, &wr, &bad))
		return errno;
	do
		got = ibv_poll_cq(cq, 1, &wc);
	while (got == 0);
	return got < 0 ? EIO : wc.status != IBV_WC_SUCCESS ? (int)wc.status : 0;
}

/* compevents' channel, whose events are read after the hold. */
static struct ibv_comp_channel *compevents_ch;

/* Each send completes and fires the armed CQ's channel, never read. */
static void compevents(long n, struct result *r)
{
	struct ibv_context *ctx = open_first();
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct ibv_ah *ah;
	int err;

	if (!ch || !pd)
		die("a channel and a PD");
	ah = self_ah(ctx, pd);
	qp = ud_qp(ctx, pd, ch, &cq);
	compevents_ch = ch;
	while (r->made < n) {
		if (ibv_req_notify_cq(cq, 0)) {
			refused(r, errno);
			return;
		}
		err = send_to_self(qp, cq, ah);
		if (err) {
			refused(r, err);
			return;
		}
		r->made++;
	}
}

#define CQEVENTS_MAX	2048

/*
 * Read ch's events until none comes within 2 s, or `want` came: how many,
 * and whether one was cq's (may be NULL).  Non-blocking: what is readable
 * may be only events of CQs gone, which the library skips.
 */
static long read_events(struct ibv_comp_channel *ch, long want,
			struct ibv_cq *cq, bool *seen)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	long got = 0;

	if (fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) < 0)
		die("O_NONBLOCK");
	while (got < want && poll(&pfd, 1, 2000) == 1) {
		struct ibv_cq *ev_cq;
		void *cq_ctx;

		if (ibv_get_cq_event(ch, &ev_cq, &cq_ctx)) {
			if (errno == EAGAIN)
				continue;
			die("ibv_get_cq_event");
		}
		ibv_ack_cq_events(ev_cq, 1);
		if (ev_cq == cq)
			*seen = true;
		got++;
	}
	return got;
}

/* cq (qp's) armed, then completed once: 0 or why not. */
static int fire(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_ah *ah)
{
	if (ibv_req_notify_cq(cq, 0))
		return errno;
	return send_to_self(qp, cq, ah);
}

/* gone: the first 9n/10 fire and are destroyed before the others fire. */
static void cqevents(long n, bool gone, struct result *r)
{
	static struct ibv_cq *cqs[CQEVENTS_MAX];
	static struct ibv_qp *qps[CQEVENTS_MAX];
	struct ibv_context *ctx = open_first();
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	long i, first = gone ? 9 * n / 10 : 0;
	struct ibv_ah *ah;
	bool seen = false;
	int err;

	if (n > CQEVENTS_MAX || !ch || !pd)
		die("a channel and a PD");
	ah = self_ah(ctx, pd);
	for (i = 0; i < n; i++)
		qps[i] = ud_qp(ctx, pd, ch, &cqs[i]);
	for (i = 0; i < n; i++) {
		if (gone && i == first) {
			long k;

			for (k = 0; k < first; k++)
				if (ibv_destroy_qp(qps[k]) || ibv_destroy_cq(cqs[k]))
					die("destroying the first CQs");
		}
		err = fire(qps[i], cqs[i], ah);
		if (err) {
			refused(r, err);
			return;
		}
	}
	/* the last events may still be on their way: wait a little for each */
	r->made = read_events(ch, n - first, NULL, &seen);
}

static void rearm(long n, struct result *r)
{
	struct ibv_context *ctx = open_first();
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_qp *qa, *qb;
	struct ibv_cq *a, *b;
	struct ibv_ah *ah;
	bool seen = false;
	int err = 0;
	long i;

	if (!ch || !pd)
		die("a channel and a PD");
	ah = self_ah(ctx, pd);
	qa = ud_qp(ctx, pd, ch, &a);
	qb = ud_qp(ctx, pd, ch, &b);
	for (i = 0; i < n && !err; i++)
		err = fire(qa, a, ah);
	if (!err)
		err = fire(qb, b, ah);
	if (err) {
		refused(r, err);
		return;
	}
	r->made = read_events(ch, n + 1, b, &seen);
	if (!seen)
		r->err = ENOENT;
}

static struct sockaddr_in ipv4(const char *addr)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };

	inet_pton(AF_INET, addr, &sin.sin_addr);
	return sin;
}

/* A UD id on 127.0.0.1 resolved towards 239.1.0.1: ready to join. */
static struct rdma_cm_id *ud_id(struct rdma_event_channel **ch)
{
	struct sockaddr_in src = ipv4("127.0.0.1"), mc = ipv4("239.1.0.1");
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	*ch = rdma_create_event_channel();
	if (!*ch || rdma_create_id(*ch, &id, NULL, RDMA_PS_UDP) ||
	    rdma_bind_addr(id, (struct sockaddr *)&src) ||
	    rdma_resolve_addr(id, (struct sockaddr *)&src,
			      (struct sockaddr *)&mc, 2000))
		die("a UD id to join with");
	if (rdma_get_cm_event(*ch, &ev))
		die("rdma_get_cm_event");
	if (ev->event != RDMA_CM_EVENT_ADDR_RESOLVED) {
		errno = EPROTO;
		die(rdma_event_str(ev->event));
	}
	rdma_ack_cm_event(ev);
	return id;
}

static struct sockaddr_in group(long i)
{
	struct sockaddr_in g = ipv4("239.1.0.0");

	g.sin_addr.s_addr = htonl(ntohl(g.sin_addr.s_addr) + 1 + (uint32_t)i);
	return g;
}

static void mcast_join(long n, struct result *r)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id = ud_id(&ch);
	struct sockaddr_in g;

	while (r->made < n) {
		g = group(r->made);
		errno = 0;
		if (rdma_join_multicast(id, (struct sockaddr *)&g, NULL)) {
			refused(r, errno);
			return;
		}
		r->made++;
	}
}

/* One group, N of ours in it: UD QPs attached to ff12::2:1. */
static void group_attach(long n, struct result *r)
{
	union ibv_gid gid = { .raw = { 0xff, 0x12 } };
	int ret;

	gid.raw[13] = 2;
	gid.raw[15] = 1;
	while (r->made < n) {
		ret = ibv_attach_mcast(attach_qp(), &gid, 0xc002);
		if (ret) {
			refused(r, ret);
			return;
		}
		r->made++;
	}
}

/* One group, N of ours in it: ids (no QPs) joining 239.2.0.1, answered. */
static void group_join(long n, struct result *r)
{
	struct sockaddr_in g = ipv4("239.2.0.1");
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	while (r->made < n) {
		id = ud_id(&ch);
		errno = 0;
		if (rdma_join_multicast(id, (struct sockaddr *)&g, NULL)) {
			refused(r, errno);
			return;
		}
		if (rdma_get_cm_event(ch, &ev))
			die("rdma_get_cm_event");
		if (ev->event != RDMA_CM_EVENT_MULTICAST_JOIN) {
			refused(r, ev->status < 0 ? -ev->status : EPROTO);
			rdma_ack_cm_event(ev);
			return;
		}
		rdma_ack_cm_event(ev);
		r->made++;
	}
}

/* Its events pile up in the daemon's socket until it hangs up on us. */
static void noread(long n, struct result *r)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id = ud_id(&ch);
	struct sockaddr_in g = group(0);

	while (r->made < n) {
		errno = 0;
		if (rdma_join_multicast(id, (struct sockaddr *)&g, NULL) ||
		    rdma_leave_multicast(id, (struct sockaddr *)&g)) {
			refused(r, errno);
			return;
		}
		r->made++;
	}
}

int main(int argc, char **argv)
{
	struct result r = { 0 };
	const char *kind;
	long n;
	char c;

	if (argc < 3 || (n = atol(argv[2])) < 0 ||
	    n > (strcmp(argv[1], "objects") ? MAX_N : OBJECTS_MAX_N)) {
		fprintf(stderr, "usage: limits-helper KIND N [hold]\n");
		return 2;
	}
	kind = argv[1];
	if (!strcmp(kind, "session"))
		sessions(n, &r);
	else if (!strcmp(kind, "comp_channel"))
		comp_channels(n, 1, &r);
	else if (!strcmp(kind, "flood"))
		comp_channels(n, 0, &r);
	else if (!strcmp(kind, "mcast_attach"))
		mcast_attach(n, &r);
	else if (!strcmp(kind, "mcast_join"))
		mcast_join(n, &r);
	else if (!strcmp(kind, "group_attach"))
		group_attach(n, &r);
	else if (!strcmp(kind, "group_join"))
		group_join(n, &r);
	else if (!strcmp(kind, "noread"))
		noread(n, &r);
	else if (!strcmp(kind, "compevents"))
		compevents(n, &r);
	else if (!strcmp(kind, "cqevents"))
		cqevents(n, false, &r);
	else if (!strcmp(kind, "cqgone"))
		cqevents(n, true, &r);
	else if (!strcmp(kind, "rearm"))
		rearm(n, &r);
	else if (!strcmp(kind, "objects"))
		objects(n, &r);
	else if (!strcmp(kind, "imports"))
		imports(n, &r);
	else if (!strcmp(kind, "cm_ports"))
		cm_ports(n, &r);
	else {
		fprintf(stderr, "limits-helper: unknown kind %s\n", kind);
		return 2;
	}
	if (!strcmp(kind, "flood"))
		printf("created %ld refused %ld errno %d pid %d\n", r.made,
		       r.refused, r.err, (int)getpid());
	else
		printf("created %ld errno %d pid %d\n", r.made, r.err,
		       (int)getpid());
	fflush(stdout);
	if (argc > 3 && !strcmp(argv[3], "hold")) {
		while (read(0, &c, 1) > 0)
			;
		if (compevents_ch) {
			bool seen = false;

			printf("read %ld\n", read_events(compevents_ch, n, NULL,
							 &seen));
			fflush(stdout);
		}
	}
	return 0;
}
