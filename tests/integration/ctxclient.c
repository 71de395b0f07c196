/*
 * ctxclient-helper: an ordinary verbs program that holds one device context
 * open and acts on commands, so a test can change the daemon under it.
 *
 * Built against the system <infiniband/verbs.h>, <rdma/rdma_cma.h>,
 * -libverbs and -lrdmacm like any application; tests run it through ibverbsd-run so it loads our library.
 *
 * usage: ctxclient-helper [-d DEVICE]
 *
 * Opens DEVICE (default: the first one), queries port 1, prints
 * "ready NAME", then reads commands from stdin, one per line, and answers
 * each with one line on stdout starting with "ok" or "error":
 *	query [PORT]	ibv_query_device + ibv_query_port
 *	fatal SECONDS	wait up to SECONDS for an async event on the async fd;
 *			"ok" only for IBV_EVENT_DEVICE_FATAL
 *	event SECONDS NAME
 *			wait up to SECONDS for the async event NAME
 *			(IBV_EVENT_GID_CHANGE, ...; "any": the next one),
 *			skipping others: "ok event NAME (N) port P ..."
 *	drain		ack the events already there: "ok drained N"
 *	gids [PORT]	the GID table through ibv_query_gid_table, each entry
 *			checked against ibv_query_gid_ex and ibv_query_gid:
 *			"ok gids INDEX=GID,TYPE ..." (TYPE ib, v1 or v2)
 *	regunmapped	ibv_reg_mr of two pages just unmapped: "ok regunmapped
 *			EFAULT" when refused with EFAULT (after the same
 *			registration succeeded while they were mapped)
 *	reopen		close the context, fetch the device list again and open
 *			the same device: "ok reopen NAME" (after a daemon
 *			restart: the same process works again)
 *	loopback	a message between two RC QPs of this context, data
 *			checked: "ok loopback 4096 bytes"
 *	unanswered, unanswered import
 *			creates (an import) the test stopped the daemon for:
 *			each must fail with ETIMEDOUT, within STALL_WAIT_MS
 *	hold		make objects of the context: a PD, an MR, a completion
 *			channel, a CQ on it and an RC QP: "ok hold"
 *	release		destroy them, the QP first: "ok release" when each
 *			destroy returned 0, else "error release qp=E cq=E
 *			ch=E mr=E pd=E" with each one's errno (0: it went);
 *			those that failed are kept for another release
 *	cm		through librdmacm, in this process: listen on
 *			127.0.0.1, connect an id to it with a QP on the
 *			device's default PD (rdma_create_qp with no PD),
 *			accept, both ends ESTABLISHED, disconnect: "ok cm"
 *			(after a daemon restart: librdmacm opens the device
 *			again instead of handing out the dead context)
 *	cmids N		N connection manager ids made through librdmacm (no
 *			address, no QP), kept until the process exits: "ok
 *			cmids N"
 *	nofd		ibv_alloc_dm and ibv_create_comp_channel with no fd
 *			number left (RLIMIT_NOFILE lowered for them): "ok
 *			nofd" when both failed with EMFILE
 *	quit		close the device and exit 0
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

static struct ibv_context *ctx;
static struct ibv_device **list;
static const char *want_device;	/* -d DEVICE, or NULL: the first */

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static const char *event_name(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_DEVICE_FATAL:	return "IBV_EVENT_DEVICE_FATAL";
	case IBV_EVENT_PORT_ACTIVE:	return "IBV_EVENT_PORT_ACTIVE";
	case IBV_EVENT_PORT_ERR:	return "IBV_EVENT_PORT_ERR";
	case IBV_EVENT_LID_CHANGE:	return "IBV_EVENT_LID_CHANGE";
	case IBV_EVENT_GID_CHANGE:	return "IBV_EVENT_GID_CHANGE";
	default:			return "other";
	}
}

static void cmd_query(unsigned int port)
{
	struct ibv_device_attr dattr;
	struct ibv_port_attr pattr;
	long t0 = now_ms();
	int ret;

	ret = ibv_query_device(ctx, &dattr);
	if (ret) {
		printf("error query: ibv_query_device: %s (%d) after %ld ms\n",
		       strerror(ret), ret, now_ms() - t0);
		return;
	}
	ret = ibv_query_port(ctx, (uint8_t)port, &pattr);
	if (ret) {
		printf("error query: ibv_query_port: %s (%d) after %ld ms\n",
		       strerror(ret), ret, now_ms() - t0);
		return;
	}
	printf("ok query dev=%s ports=%u port=%u state=%d lid=%u\n",
	       ibv_get_device_name(ctx->device), dattr.phys_port_cnt, port,
	       (int)pattr.state, pattr.lid);
}

static void cmd_fatal(int seconds)
{
	struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;
	long t0 = now_ms();
	int n;

	do
		n = poll(&pfd, 1, seconds * 1000);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		printf("error fatal: poll on async fd %d: %s\n", ctx->async_fd,
		       strerror(errno));
		return;
	}
	if (n == 0) {
		printf("error fatal: no async event within %d s\n", seconds);
		return;
	}
	if (ibv_get_async_event(ctx, &ev)) {
		printf("error fatal: ibv_get_async_event: %s (revents 0x%x)\n",
		       strerror(errno), pfd.revents);
		return;
	}
	printf("%s event %s (%d) after %ld ms\n",
	       ev.event_type == IBV_EVENT_DEVICE_FATAL ? "ok" : "error",
	       event_name(ev.event_type), (int)ev.event_type, now_ms() - t0);
	ibv_ack_async_event(&ev);
}

/* Wait for the async fd to be readable until deadline (ms): 1, 0, -1. */
static int wait_async(long deadline)
{
	struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
	long left;
	int n;

	do {
		left = deadline - now_ms();
		n = poll(&pfd, 1, left > 0 ? (int)left : 0);
	} while (n < 0 && errno == EINTR);
	return n;
}

static void cmd_event(int seconds, const char *want)
{
	long t0 = now_ms(), deadline = t0 + seconds * 1000L;
	char skipped[512] = "";
	struct ibv_async_event ev;
	const char *name;
	size_t used = 0;
	int n;

	for (;;) {
		n = wait_async(deadline);
		if (n <= 0) {
			printf("error event: no %s within %d s%s%s\n", want, seconds,
			       used ? "; skipped" : "", skipped);
			return;
		}
		if (ibv_get_async_event(ctx, &ev)) {
			printf("error event: ibv_get_async_event: %s\n", strerror(errno));
			return;
		}
		name = event_name(ev.event_type);
		if (strcmp(want, "any") == 0 || strcmp(want, name) == 0)
			break;
		if (used < sizeof(skipped))
			used += (size_t)snprintf(skipped + used, sizeof(skipped) - used,
						 " %s", name);
		ibv_ack_async_event(&ev);
	}
	printf("ok event %s (%d) port %d after %ld ms%s%s\n", name,
	       (int)ev.event_type, ev.element.port_num, now_ms() - t0,
	       used ? "; skipped" : "", skipped);
	ibv_ack_async_event(&ev);
}

static void cmd_drain(void)
{
	struct ibv_async_event ev;
	unsigned int n = 0;

	while (wait_async(now_ms()) > 0 && ibv_get_async_event(ctx, &ev) == 0) {
		ibv_ack_async_event(&ev);
		n++;
	}
	printf("ok drained %u\n", n);
}

static const char *gid_type_name(uint32_t type)
{
	switch (type) {
	case IBV_GID_TYPE_IB:		return "ib";
	case IBV_GID_TYPE_ROCE_V1:	return "v1";
	case IBV_GID_TYPE_ROCE_V2:	return "v2";
	default:			return "?";
	}
}

/* entry e as ibv_query_gid_ex and ibv_query_gid see it: 0, or prints why not. */
static int check_gid(unsigned int port, const struct ibv_gid_entry *e)
{
	struct ibv_gid_entry ex;
	union ibv_gid gid;

	if (ibv_query_gid_ex(ctx, port, e->gid_index, &ex, 0) ||
	    ibv_query_gid(ctx, (uint8_t)port, (int)e->gid_index, &gid)) {
		printf("error gids: GID %u: %s\n", e->gid_index, strerror(errno));
		return -1;
	}
	if (memcmp(&ex.gid, &e->gid, sizeof(gid)) || ex.gid_type != e->gid_type ||
	    memcmp(&gid, &e->gid, sizeof(gid)) || ex.port_num != port) {
		printf("error gids: GID %u differs between the table, _ex and ibv_query_gid\n",
		       e->gid_index);
		return -1;
	}
	return 0;
}

static void cmd_gids(unsigned int port)
{
	struct ibv_gid_entry entries[64];
	char line[4096], text[INET6_ADDRSTRLEN];
	size_t used = 0;
	ssize_t n, i;

	n = ibv_query_gid_table(ctx, entries, 64, 0);
	if (n < 0) {
		printf("error gids: ibv_query_gid_table: %s\n", strerror((int)-n));
		return;
	}
	line[0] = '\0';
	for (i = 0; i < n; i++) {
		if (entries[i].port_num != port)
			continue;
		if (check_gid(port, &entries[i]))
			return;
		inet_ntop(AF_INET6, entries[i].gid.raw, text, sizeof(text));
		used += (size_t)snprintf(line + used, sizeof(line) - used, " %u=%s,%s",
					 entries[i].gid_index, text,
					 gid_type_name(entries[i].gid_type));
		if (used >= sizeof(line))
			break;
	}
	printf("ok gids%s\n", line);
}

static void cmd_regunmapped(void)
{
	size_t len = 2 * 4096;
	struct ibv_mr *mr;
	struct ibv_pd *pd;
	void *p;

	pd = ibv_alloc_pd(ctx);
	if (!pd) {
		printf("error regunmapped: ibv_alloc_pd: %s\n", strerror(errno));
		return;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		printf("error regunmapped: mmap: %s\n", strerror(errno));
		goto out;
	}
	mr = ibv_reg_mr(pd, p, len, IBV_ACCESS_LOCAL_WRITE);
	if (!mr) {
		printf("error regunmapped: mapped pages refused: %s\n", strerror(errno));
		munmap(p, len);
		goto out;
	}
	ibv_dereg_mr(mr);
	munmap(p, len);
	mr = ibv_reg_mr(pd, p, len, IBV_ACCESS_LOCAL_WRITE);
	if (mr) {
		printf("error regunmapped: unmapped pages registered\n");
		ibv_dereg_mr(mr);
	} else {
		printf("%s regunmapped %s\n", errno == EFAULT ? "ok" : "error",
		       errno == EFAULT ? "EFAULT" : strerror(errno));
	}
out:
	ibv_dealloc_pd(pd);
}

/* Open want_device (NULL: the first) from a fresh device list. */
static int open_wanted(const char *what)
{
	int i, n;

	list = ibv_get_device_list(&n);
	if (!list) {
		printf("error %s: ibv_get_device_list: %s\n", what, strerror(errno));
		return -1;
	}
	for (i = 0; i < n; i++)
		if (!want_device ||
		    strcmp(ibv_get_device_name(list[i]), want_device) == 0)
			break;
	if (i == n) {
		printf("error %s: device %s not found among %d\n", what,
		       want_device ? want_device : "(any)", n);
		return -1;
	}
	ctx = ibv_open_device(list[i]);
	if (!ctx) {
		printf("error %s: ibv_open_device(%s): %s\n", what,
		       ibv_get_device_name(list[i]), strerror(errno));
		return -1;
	}
	return 0;
}

static void cmd_reopen(void)
{
	if (ctx && ibv_close_device(ctx))
		fprintf(stderr, "ibv_close_device: %s\n", strerror(errno));
	ctx = NULL;
	if (list)
		ibv_free_device_list(list);
	list = NULL;
	if (open_wanted("reopen") == 0)
		printf("ok reopen %s\n", ibv_get_device_name(ctx->device));
}

static struct {
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_dm *dm;
	uint8_t buf[4096];
} held;

static void cmd_hold(void)
{
	struct ibv_qp_init_attr qa;

	held.pd = ibv_alloc_pd(ctx);
	held.mr = held.pd ? ibv_reg_mr(held.pd, held.buf, sizeof(held.buf),
				       IBV_ACCESS_LOCAL_WRITE) : NULL;
	held.ch = held.mr ? ibv_create_comp_channel(ctx) : NULL;
	held.cq = held.ch ? ibv_create_cq(ctx, 16, NULL, held.ch, 0) : NULL;
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = held.cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	held.qp = held.cq ? ibv_create_qp(held.pd, &qa) : NULL;
	if (!held.qp) {
		printf("error hold: %s\n", strerror(errno));
		return;
	}
	printf("ok hold\n");
}

/* Destroy *obj with fn; its errno, 0 once it went (or was never there). */
#define RELEASE(obj, fn)						\
	({								\
		int err_ = (obj) ? fn(obj) : 0;				\
		if (!err_)						\
			(obj) = NULL;					\
		err_;							\
	})

static void cmd_release(void)
{
	int qp = RELEASE(held.qp, ibv_destroy_qp);
	int cq = RELEASE(held.cq, ibv_destroy_cq);
	int ch = RELEASE(held.ch, ibv_destroy_comp_channel);
	int mr = RELEASE(held.mr, ibv_dereg_mr);
	int pd = RELEASE(held.pd, ibv_dealloc_pd);

	if (qp || cq || ch || mr || pd)
		printf("error release qp=%d cq=%d ch=%d mr=%d pd=%d\n",
		       qp, cq, ch, mr, pd);
	else
		printf("ok release\n");
}

/*
 * How long a call waits for a daemon the test stopped.  The library waits
 * for a reply on cmd_fd with SO_RCVTIMEO (IBVERBSD_TIMEOUT_MS when it
 * connected, 30 s by default): shortened for those calls alone, and put
 * back after them, so that no other call fails for a reply a loaded
 * machine was slow with.
 */
#define STALL_WAIT_MS	300

static struct timeval waited;	/* the library's own, while shortened */

static int short_wait(void)
{
	struct timeval tv = { .tv_usec = STALL_WAIT_MS * 1000 };
	socklen_t len = sizeof(waited);

	if (getsockopt(ctx->cmd_fd, SOL_SOCKET, SO_RCVTIMEO, &waited, &len) ||
	    setsockopt(ctx->cmd_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv))) {
		printf("error: SO_RCVTIMEO of cmd_fd: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static void full_wait(void)
{
	setsockopt(ctx->cmd_fd, SOL_SOCKET, SO_RCVTIMEO, &waited,
		   sizeof(waited));
}

/*
 * Creates the daemon cannot answer in time (the test stopped it): each
 * must fail with ETIMEDOUT; what it made later is the library's to undo.
 * Needs hold's PD and CQ.
 */
static void cmd_unanswered(void)
{
	struct ibv_qp_init_attr qa;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	int pd_err, cq_err, qp_err;

	if (!held.cq) {
		printf("error unanswered: hold first\n");
		return;
	}
	if (short_wait())
		return;
	pd = ibv_alloc_pd(ctx);
	pd_err = pd ? 0 : errno;
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	cq_err = cq ? 0 : errno;
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = held.cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qp = ibv_create_qp(held.pd, &qa);
	qp_err = qp ? 0 : errno;
	full_wait();
	if (pd_err == ETIMEDOUT && cq_err == ETIMEDOUT && qp_err == ETIMEDOUT)
		printf("ok unanswered\n");
	else
		printf("error unanswered pd=%d cq=%d qp=%d\n", pd_err, cq_err,
		       qp_err);
}

/* Device memory to hold (dm), and its import while the daemon is stopped. */
static void cmd_dm(void)
{
	struct ibv_alloc_dm_attr a = { .length = 4096 };

	held.dm = ibv_alloc_dm(ctx, &a);
	if (held.dm)
		printf("ok dm\n");
	else
		printf("error dm: %s\n", strerror(errno));
}

/*
 * Creates whose replies carry an fd, from a process with no fd number
 * left (RLIMIT_NOFILE at its lowest free one): each must fail with
 * EMFILE, and the daemon must not keep what it made for them.
 */
static void cmd_nofd(void)
{
	struct ibv_alloc_dm_attr a = { .length = 4096 };
	struct ibv_comp_channel *ch;
	struct rlimit old, low;
	struct ibv_dm *dm;
	int dm_err, ch_err, fd;

	fd = dup(0);
	if (fd < 0 || getrlimit(RLIMIT_NOFILE, &old) < 0) {
		printf("error nofd: %s\n", strerror(errno));
		return;
	}
	close(fd);
	low = old;
	low.rlim_cur = (rlim_t)fd;	/* every number below it is taken */
	if (setrlimit(RLIMIT_NOFILE, &low) < 0) {
		printf("error nofd: setrlimit: %s\n", strerror(errno));
		return;
	}
	dm = ibv_alloc_dm(ctx, &a);
	dm_err = dm ? 0 : errno;
	ch = ibv_create_comp_channel(ctx);
	ch_err = ch ? 0 : errno;
	setrlimit(RLIMIT_NOFILE, &old);
	if (dm)
		ibv_free_dm(dm);
	if (ch)
		ibv_destroy_comp_channel(ch);
	if (dm_err == EMFILE && ch_err == EMFILE)
		printf("ok nofd\n");
	else
		printf("error nofd: ibv_alloc_dm %s, ibv_create_comp_channel %s\n",
		       strerror(dm_err), strerror(ch_err));
}

static void cmd_unanswered_import(void)
{
	struct ibv_dm *dm;

	if (short_wait())
		return;
	dm = held.dm ? ibv_import_dm(ctx, held.dm->handle) : NULL;
	full_wait();

	if (!dm && errno == ETIMEDOUT)
		printf("ok unanswered import\n");
	else
		printf("error unanswered import: %s\n",
		       dm ? "imported" : strerror(errno));
}

static void cmd_dmfree(void)
{
	int ret = held.dm ? ibv_free_dm(held.dm) : EINVAL;

	if (ret == 0) {
		held.dm = NULL;
		printf("ok dmfree\n");
	} else {
		printf("error dmfree: %s\n", strerror(ret));
	}
}

/* The next CM event on ch, of type want, within 5 s (acked): 0 or -1. */
static int cm_expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want,
		     struct rdma_cm_id **id)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	int n;

	do
		n = poll(&pfd, 1, 5000);
	while (n < 0 && errno == EINTR);
	if (n != 1 || rdma_get_cm_event(ch, &ev)) {
		printf("error cm: no %s\n", rdma_event_str(want));
		return -1;
	}
	if (ev->event != want) {
		printf("error cm: %s (status %d), want %s\n",
		       rdma_event_str(ev->event), ev->status, rdma_event_str(want));
		rdma_ack_cm_event(ev);
		return -1;
	}
	if (id)
		*id = ev->id;
	rdma_ack_cm_event(ev);
	return 0;
}

static int cm_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr qa;

	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(id, NULL, &qa)) {
		printf("error cm: rdma_create_qp: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

/* The ids cmids holds until the client exits (reachable: no leak). */
static struct rdma_event_channel *cmids_channel;
static struct rdma_cm_id **cmids_held;

static void cmd_cmids(unsigned int n)
{
	unsigned int i;

	cmids_channel = rdma_create_event_channel();
	cmids_held = calloc(n ? n : 1, sizeof(*cmids_held));
	if (!cmids_channel || !cmids_held) {
		printf("error cmids: rdma_create_event_channel: %s\n", strerror(errno));
		return;
	}
	for (i = 0; i < n; i++)
		if (rdma_create_id(cmids_channel, &cmids_held[i], NULL, RDMA_PS_TCP)) {
			printf("error cmids: id %u: %s\n", i, strerror(errno));
			return;
		}
	printf("ok cmids %u\n", n);
}

static void cmd_cm(void)
{
	struct rdma_cm_id *listen_id = NULL, *client = NULL, *server = NULL;
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp;
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	memset(&cp, 0, sizeof(cp));
	if (!ch || rdma_create_id(ch, &listen_id, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(listen_id, (struct sockaddr *)&sin) ||
	    rdma_listen(listen_id, 1)) {
		printf("error cm: listen: %s\n", strerror(errno));
		goto out;
	}
	sin.sin_port = rdma_get_src_port(listen_id);
	if (rdma_create_id(ch, &client, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(client, NULL, (struct sockaddr *)&sin, 2000)) {
		printf("error cm: resolve: %s\n", strerror(errno));
		goto out;
	}
	if (cm_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, NULL) ||
	    rdma_resolve_route(client, 2000) ||
	    cm_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL) || cm_qp(client))
		goto out;
	if (rdma_connect(client, &cp)) {
		printf("error cm: rdma_connect: %s\n", strerror(errno));
		goto out;
	}
	if (cm_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, &server) ||
	    cm_qp(server))
		goto out;
	if (rdma_accept(server, &cp)) {
		printf("error cm: rdma_accept: %s\n", strerror(errno));
		goto out;
	}
	/* both ends, in either order */
	if (cm_expect(ch, RDMA_CM_EVENT_ESTABLISHED, NULL) ||
	    cm_expect(ch, RDMA_CM_EVENT_ESTABLISHED, NULL))
		goto out;
	/* The server hears it first; its own disconnect answers the client. */
	rdma_disconnect(client);
	if (cm_expect(ch, RDMA_CM_EVENT_DISCONNECTED, NULL) ||
	    rdma_disconnect(server) ||
	    cm_expect(ch, RDMA_CM_EVENT_DISCONNECTED, NULL))
		goto out;
	printf("ok cm\n");
out:
	if (server) {
		if (server->qp)
			rdma_destroy_qp(server);
		rdma_destroy_id(server);
	}
	if (client) {
		if (client->qp)
			rdma_destroy_qp(client);
		rdma_destroy_id(client);
	}
	if (listen_id)
		rdma_destroy_id(listen_id);
	if (ch)
		rdma_destroy_event_channel(ch);
}

struct lb {
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp[2];
	struct ibv_mr *mr;
	uint8_t *buf;
};

static int lb_connect(struct ibv_qp *qp, uint32_t dqpn, uint16_t dlid)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.dlid = dlid;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) ? -1 : 0;
}

/* One 4096-byte SEND from qp[0] into qp[1]'s receive: "" or what failed. */
static const char *lb_run(struct lb *l)
{
	struct ibv_sge rs = { (uintptr_t)l->buf + 4096, 4096, l->mr->lkey };
	struct ibv_sge ss = { (uintptr_t)l->buf, 4096, l->mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 2, .sg_list = &rs, .num_sge = 1 }, *rbad;
	struct ibv_send_wr swr = { .wr_id = 1, .sg_list = &ss, .num_sge = 1,
				   .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED }, *sbad;
	struct ibv_port_attr pa;
	struct ibv_wc wc;
	long deadline = now_ms() + 10000;
	int got = 0, i, n;

	if (ibv_query_port(ctx, 1, &pa))
		return "ibv_query_port";
	if (lb_connect(l->qp[0], l->qp[1]->qp_num, pa.lid) ||
	    lb_connect(l->qp[1], l->qp[0]->qp_num, pa.lid))
		return "ibv_modify_qp";
	for (i = 0; i < 4096; i++) {
		l->buf[i] = (uint8_t)(i * 7 + 3);
		l->buf[4096 + i] = 0;
	}
	if (ibv_post_recv(l->qp[1], &rwr, &rbad) || ibv_post_send(l->qp[0], &swr, &sbad))
		return "post";
	while (got < 2 && now_ms() < deadline) {
		n = ibv_poll_cq(l->cq, 1, &wc);
		if (n < 0)
			return "ibv_poll_cq";
		if (n && wc.status != IBV_WC_SUCCESS)
			return ibv_wc_status_str(wc.status);
		got += n;
	}
	if (got < 2)
		return "no completion within 10 s";
	return memcmp(l->buf, l->buf + 4096, 4096) ? "data differs" : "";
}

static void cmd_loopback(void)
{
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct lb l = { 0 };
	const char *err = "allocation";

	l.buf = calloc(1, 8192);
	l.pd = l.buf ? ibv_alloc_pd(ctx) : NULL;
	l.cq = l.pd ? ibv_create_cq(ctx, 8, NULL, NULL, 0) : NULL;
	l.mr = l.cq ? ibv_reg_mr(l.pd, l.buf, 8192, IBV_ACCESS_LOCAL_WRITE) : NULL;
	qa.send_cq = qa.recv_cq = l.cq;
	l.qp[0] = l.mr ? ibv_create_qp(l.pd, &qa) : NULL;
	l.qp[1] = l.qp[0] ? ibv_create_qp(l.pd, &qa) : NULL;
	if (l.qp[1])
		err = lb_run(&l);
	if (*err)
		printf("error loopback: %s (errno %s)\n", err, strerror(errno));
	else
		printf("ok loopback 4096 bytes\n");
	if (l.qp[1])
		ibv_destroy_qp(l.qp[1]);
	if (l.qp[0])
		ibv_destroy_qp(l.qp[0]);
	if (l.mr)
		ibv_dereg_mr(l.mr);
	if (l.cq)
		ibv_destroy_cq(l.cq);
	if (l.pd)
		ibv_dealloc_pd(l.pd);
	free(l.buf);
}

int main(int argc, char **argv)
{
	char line[256];

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && strcmp(argv[1], "-d") == 0) {
		want_device = argv[2];
	} else if (argc != 1) {
		fprintf(stderr, "usage: %s [-d DEVICE]\n", argv[0]);
		return 2;
	}

	if (open_wanted("open") < 0)
		return 1;
	printf("ready %s\n", ibv_get_device_name(ctx->device));

	while (fgets(line, sizeof(line), stdin)) {
		unsigned int port = 1;
		int seconds = 10;

		if (strncmp(line, "query", 5) == 0) {
			sscanf(line + 5, "%u", &port);
			cmd_query(port);
		} else if (strncmp(line, "fatal", 5) == 0) {
			sscanf(line + 5, "%d", &seconds);
			cmd_fatal(seconds);
		} else if (strncmp(line, "event", 5) == 0) {
			char name[64] = "any";

			sscanf(line + 5, "%d %63s", &seconds, name);
			cmd_event(seconds, name);
		} else if (strncmp(line, "drain", 5) == 0) {
			cmd_drain();
		} else if (strncmp(line, "gids", 4) == 0) {
			sscanf(line + 4, "%u", &port);
			cmd_gids(port);
		} else if (strncmp(line, "reopen", 6) == 0) {
			cmd_reopen();
		} else if (strncmp(line, "loopback", 8) == 0) {
			cmd_loopback();
		} else if (strncmp(line, "regunmapped", 11) == 0) {
			cmd_regunmapped();
		} else if (strncmp(line, "cmids", 5) == 0) {
			unsigned int n = 0;

			sscanf(line + 5, "%u", &n);
			cmd_cmids(n);
		} else if (strncmp(line, "cm", 2) == 0) {
			cmd_cm();
		} else if (strncmp(line, "hold", 4) == 0) {
			cmd_hold();
		} else if (strncmp(line, "release", 7) == 0) {
			cmd_release();
		} else if (strncmp(line, "unanswered import", 17) == 0) {
			cmd_unanswered_import();
		} else if (strncmp(line, "unanswered", 10) == 0) {
			cmd_unanswered();
		} else if (strncmp(line, "nofd", 4) == 0) {
			cmd_nofd();
		} else if (strncmp(line, "dmfree", 6) == 0) {
			cmd_dmfree();
		} else if (strncmp(line, "dm", 2) == 0) {
			cmd_dm();
		} else if (strncmp(line, "quit", 4) == 0) {
			break;
		} else {
			printf("error unknown command: %s", line);
		}
	}
	if (ctx && ibv_close_device(ctx))
		fprintf(stderr, "ibv_close_device: %s\n", strerror(errno));
	if (list)
		ibv_free_device_list(list);
	return 0;
}
