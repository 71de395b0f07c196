/*
 * quota-helper KIND N [hold]: an ordinary verbs (and rdma_cm) application
 * for quota.sh.  It creates up to N objects of KIND on the first device
 * and prints one line
 *	created K errno E pid P
 * K how many it made, E the errno of the first refusal (0: all N made).
 * $QUOTA_DEV names the device to use instead of the first.
 * KIND is hca_handle, pd, mr, mw, cq, qp, srq, ah, cm_id, listener (a
 * CM id listening on a port of its own, on an event channel of its own),
 * or memlock (one MR of N pages).  Objects KIND needs (a PD, a CQ) are made first and not
 * counted.  With "hold" it then keeps everything until stdin closes, so
 * that the test can run two uids at once or kill it.
 *
 * quota-helper churn N SEED [hold]: N random creations and destructions
 * of PDs, CQs, MRs (of 1 to 4 pages), SRQs, AHs and QPs, refusals at a
 * limit included, then it exits (or holds) with what is left; prints
 * "churned N refused R pid P".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "tests/common/open_device.h"

#define MAX_OBJS	4096

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;

static void die(const char *what)
{
	fprintf(stderr, "quota-helper: %s: %s\n", what, strerror(errno));
	exit(2);
}

/*
 * The first device, or the one $QUOTA_DEV names; NULL with errno when
 * the open is refused.
 */
static struct ibv_context *open_first(void)
{
	const char *want = getenv("QUOTA_DEV");
	struct ibv_context *c = open_device_named(want);

	if (!c && errno == ENODEV)
		die(want ? want : "no device");
	return c;
}

/* One object of kind; NULL with errno set when refused. */
static void *make_one(const char *kind, void *buf, size_t pages)
{
	long psz = sysconf(_SC_PAGESIZE);

	if (!strcmp(kind, "hca_handle"))
		return open_first();
	if (!strcmp(kind, "pd"))
		return ibv_alloc_pd(ctx);
	if (!strcmp(kind, "cq"))
		return ibv_create_cq(ctx, 4, NULL, NULL, 0);
	if (!strcmp(kind, "mr"))
		return ibv_reg_mr(pd, buf, (size_t)psz, IBV_ACCESS_LOCAL_WRITE);
	if (!strcmp(kind, "memlock"))
		return ibv_reg_mr(pd, buf, pages * (size_t)psz,
				  IBV_ACCESS_LOCAL_WRITE);
	if (!strcmp(kind, "qp")) {
		struct ibv_qp_init_attr a = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 1, .max_recv_wr = 1,
				 .max_send_sge = 1, .max_recv_sge = 1 },
		};
		return ibv_create_qp(pd, &a);
	}
	if (!strcmp(kind, "mw"))
		return ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	if (!strcmp(kind, "xrcd")) {
		struct ibv_xrcd_init_attr a = {
			.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
			.fd = -1,
			.oflags = O_CREAT,
		};

		return ibv_open_xrcd(ctx, &a);
	}
	if (!strcmp(kind, "srq")) {
		struct ibv_srq_init_attr a = { .attr = { .max_wr = 1, .max_sge = 1 } };
		return ibv_create_srq(pd, &a);
	}
	if (!strcmp(kind, "ah")) {
		struct ibv_ah_attr a = { .dlid = 1, .port_num = 1 };
		return ibv_create_ah(pd, &a);
	}
	if (!strcmp(kind, "cm_id")) {
		static struct rdma_event_channel *ch;
		struct rdma_cm_id *id;

		if (!ch && !(ch = rdma_create_event_channel()))
			return NULL;
		return rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ? NULL : id;
	}
	if (!strcmp(kind, "listener")) {
		struct rdma_event_channel *ch = rdma_create_event_channel();
		struct rdma_cm_id *id;

		if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
			return NULL;
		return rdma_listen(id, 1) ? NULL : id;
	}
	errno = EINVAL;
	return NULL;
}

struct held {
	const char *kind;
	void *obj;
};

static void destroy(struct held *h)
{
	if (!strcmp(h->kind, "pd"))
		ibv_dealloc_pd(h->obj);
	else if (!strcmp(h->kind, "cq"))
		ibv_destroy_cq(h->obj);
	else if (!strcmp(h->kind, "memlock"))
		ibv_dereg_mr(h->obj);
	else if (!strcmp(h->kind, "srq"))
		ibv_destroy_srq(h->obj);
	else if (!strcmp(h->kind, "ah"))
		ibv_destroy_ah(h->obj);
	else if (!strcmp(h->kind, "qp"))
		ibv_destroy_qp(h->obj);
}

static int churn(long n, unsigned int seed, int hold)
{
	static const char *const kinds[] = { "pd", "cq", "memlock", "srq", "ah", "qp" };
	static struct held held[MAX_OBJS];
	long psz = sysconf(_SC_PAGESIZE), i, refused = 0;
	unsigned int nheld = 0, k;
	void *buf;
	char c;

	srand(seed);
	ctx = open_first();
	if (!ctx || !(pd = ibv_alloc_pd(ctx)) ||
	    !(cq = ibv_create_cq(ctx, 4, NULL, NULL, 0)))
		die("the context, PD and CQ to churn with");
	if (posix_memalign(&buf, (size_t)psz, 4 * (size_t)psz))
		die("posix_memalign");
	memset(buf, 0, 4 * (size_t)psz);
	for (i = 0; i < n; i++) {
		if (nheld && (rand() % 2 || nheld == MAX_OBJS)) {
			k = (unsigned int)rand() % nheld;
			destroy(&held[k]);
			held[k] = held[--nheld];
			continue;
		}
		held[nheld].kind = kinds[rand() % 6];
		held[nheld].obj = make_one(held[nheld].kind, buf,
					   1 + (size_t)(rand() % 4));
		if (held[nheld].obj)
			nheld++;
		else
			refused++;
	}
	printf("churned %ld refused %ld pid %d\n", n, refused, (int)getpid());
	fflush(stdout);
	while (hold && read(0, &c, 1) > 0)
		;
	return 0;
}

/*
 * quota-helper ringbytes: contexts, one after another, each given CQs of
 * 2^20 entries (64 MiB of ring) until it refuses one; the context that
 * refuses its first is past its uid's ring bytes (verbs.h), not its own.
 * Then one context closes, and the refused one gets a CQ.  Prints what
 * happened; exits 0 unless a call failed unexpectedly.
 */
#define RB_CONTEXTS	64
#define RB_CQS		8
#define RB_CQE		(1 << 20)

static int ring_bytes(void)
{
	static struct ibv_cq *cqs[RB_CONTEXTS][RB_CQS];
	static struct ibv_context *c[RB_CONTEXTS];
	int n, i, j, total = 0, refused = -1, why = 0;
	struct ibv_cq *again;

	for (n = 0; n < RB_CONTEXTS && refused < 0; n++) {
		c[n] = open_first();
		if (!c[n])
			die("ibv_open_device");
		for (j = 0; j < RB_CQS; j++) {
			cqs[n][j] = ibv_create_cq(c[n], RB_CQE, NULL, NULL, 0);
			if (!cqs[n][j])
				break;
			total++;
		}
		if (j == 0) {
			refused = n;
			why = errno;
		}
	}
	if (refused < 0) {
		printf("ringbytes: %d CQs in %d contexts, none refused its first\n",
		       total, n);
		return 0;
	}
	for (j = 0; j < RB_CQS && cqs[0][j]; j++)
		ibv_destroy_cq(cqs[0][j]);
	ibv_close_device(c[0]);
	c[0] = NULL;
	again = ibv_create_cq(c[refused], RB_CQE, NULL, NULL, 0);
	printf("ringbytes: %d CQs in %d contexts, context %d refused its first "
	       "(%s); after one closed: %s\n", total, refused, refused + 1,
	       strerror(why), again ? "a CQ" : strerror(errno));
	if (again)
		ibv_destroy_cq(again);
	for (i = 1; i < n; i++) {
		for (j = 0; j < RB_CQS && cqs[i][j]; j++)
			ibv_destroy_cq(cqs[i][j]);
		ibv_close_device(c[i]);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static void *objs[MAX_OBJS];
	long n, made = 0, psz = sysconf(_SC_PAGESIZE);
	const char *kind;
	void *buf = NULL;
	int err = 0;
	char c;

	if (argc == 2 && !strcmp(argv[1], "ringbytes"))
		return ring_bytes();
	if (argc > 3 && !strcmp(argv[1], "churn"))
		return churn(atol(argv[2]), (unsigned int)atol(argv[3]),
			     argc > 4 && !strcmp(argv[4], "hold"));
	if (argc < 3 || (n = atol(argv[2])) < 0 || n > MAX_OBJS) {
		fprintf(stderr, "usage: quota-helper KIND N [hold]\n");
		return 2;
	}
	kind = argv[1];
	if (strcmp(kind, "cm_id") && strcmp(kind, "listener") &&
	    strcmp(kind, "hca_handle")) {
		ctx = open_first();
		if (!ctx)
			die("ibv_open_device");
	}
	/* only what the kind needs, so that its own count is exact */
	if (strstr(" mr mw memlock qp srq ah ", kind) &&
	    !(pd = ibv_alloc_pd(ctx)))
		die("the PD the objects need");
	if (!strcmp(kind, "qp") && !(cq = ibv_create_cq(ctx, 4, NULL, NULL, 0)))
		die("the CQ the QPs need");
	if (posix_memalign(&buf, (size_t)psz, (size_t)(n + 1) * (size_t)psz))
		die("posix_memalign");
	memset(buf, 0, (size_t)(n + 1) * (size_t)psz);
	if (!strcmp(kind, "memlock")) {
		errno = 0;
		objs[0] = make_one(kind, buf, (size_t)n);
		made = objs[0] != NULL;
		err = made ? 0 : errno;
	}
	while (strcmp(kind, "memlock") && made < n) {
		errno = 0;
		objs[made] = make_one(kind, (char *)buf + made * psz, 1);
		if (!objs[made]) {
			err = errno ? errno : EIO;
			break;
		}
		made++;
	}
	printf("created %ld errno %d pid %d\n", made, err, (int)getpid());
	fflush(stdout);
	if (argc > 3 && !strcmp(argv[3], "hold"))
		while (read(0, &c, 1) > 0)
			;
	/* exit releases everything: the daemon sees the connections close */
	return 0;
}
