/*
 * bench/tenant-costs.c: what one client, within its quotas, makes the
 * daemon's control thread spend (the control thread serves every
 * client; bench/tenant-costs runs this against one build or two).  The
 * daemon's time is read from its main thread's schedstat (run time in
 * ns), so the client's own time does not count.
 *
 * usage: tenant-costs DAEMON_PID reg_mr VMAS N
 *          N registrations of one page at the top of the address space,
 *          with VMAS mappings below it: µs per REG_MR + DEREG_MR
 *        tenant-costs DAEMON_PID close QPS MWS
 *          QPS RC QPs and MWS type-2 windows, then the device closed:
 *          ms for the close
 *        tenant-costs DAEMON_PID open_xrcd DOMAINS N
 *          DOMAINS shared XRC domains (a memfd each), then N opens of a
 *          domain that does not exist: µs per OPEN_XRCD
 *        tenant-costs DAEMON_PID query_port N WALL
 *          N ibv_query_port calls, the smallest request there is: µs
 *          per call of the daemon's time, or of the client's wall
 *          clock when WALL is 1
 * Prints the one figure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

static pid_t daemon_pid;

/* The daemon's control thread (its main thread): ns it has run. */
static unsigned long long daemon_ns(void)
{
	unsigned long long ns = 0;
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat",
		 (int)daemon_pid, (int)daemon_pid);
	f = fopen(path, "r");
	if (!f || fscanf(f, "%llu", &ns) != 1) {
		fprintf(stderr, "tenant-costs: cannot read %s\n", path);
		exit(2);
	}
	fclose(f);
	return ns;
}

static void die(const char *what)
{
	fprintf(stderr, "tenant-costs: %s: %s\n", what, strerror(errno));
	exit(2);
}

static struct ibv_context *open_first(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx;

	if (!list || !list[0])
		die("no device");
	ctx = ibv_open_device(list[0]);
	if (!ctx)
		die("ibv_open_device");
	ibv_free_device_list(list);
	return ctx;
}

static void reg_mr(unsigned long vmas, unsigned long n)
{
	struct ibv_context *ctx = open_first();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	long page = sysconf(_SC_PAGESIZE);
	char buf[2 * 4096] __attribute__((aligned(4096)));
	unsigned long long t0;
	unsigned long i;
	char *base;

	if (!pd)
		die("ibv_alloc_pd");
	base = mmap(NULL, vmas * page, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		die("mmap");
	/* every other page read-only: one mapping each */
	for (i = 0; i < vmas; i += 2)
		if (mprotect(base + i * page, page, PROT_READ))
			die("mprotect");
	buf[0] = 1;
	t0 = daemon_ns();
	for (i = 0; i < n; i++) {
		struct ibv_mr *mr = ibv_reg_mr(pd, buf, 4096,
					       IBV_ACCESS_LOCAL_WRITE);

		if (!mr)
			die("ibv_reg_mr");
		ibv_dereg_mr(mr);
	}
	printf("%.1f\n", (double)(daemon_ns() - t0) / n / 1e3);
}

static void close_many(unsigned long nqp, unsigned long nmw)
{
	struct ibv_context *ctx = open_first();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr a = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	unsigned long long t0;
	unsigned long i;

	if (!pd || !cq)
		die("ibv_alloc_pd / ibv_create_cq");
	a.send_cq = a.recv_cq = cq;
	for (i = 0; i < nqp; i++)
		if (!ibv_create_qp(pd, &a))
			die("ibv_create_qp");
	for (i = 0; i < nmw; i++)
		if (!ibv_alloc_mw(pd, IBV_MW_TYPE_2))
			die("ibv_alloc_mw");
	t0 = daemon_ns();
	if (ibv_close_device(ctx))
		die("ibv_close_device");
	/* the teardown may end after the close's reply */
	sleep(1);
	printf("%.1f\n", (double)(daemon_ns() - t0) / 1e6);
}

static struct ibv_xrcd *open_xrcd_fd(struct ibv_context *ctx, int fd,
				     int oflags)
{
	struct ibv_xrcd_init_attr a = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = fd, .oflags = oflags,
	};

	return ibv_open_xrcd(ctx, &a);
}

static void open_xrcd(unsigned long domains, unsigned long n)
{
	struct ibv_context *ctx = open_first();
	unsigned long long t0;
	unsigned long i;
	int fd, miss;

	for (i = 0; i < domains; i++) {
		fd = memfd_create("tenant-costs", MFD_CLOEXEC);
		if (fd < 0 || !open_xrcd_fd(ctx, fd, O_CREAT))
			die("a shared XRC domain");
		close(fd);
	}
	miss = memfd_create("tenant-costs-miss", MFD_CLOEXEC);
	if (miss < 0)
		die("memfd_create");
	t0 = daemon_ns();
	for (i = 0; i < n; i++)
		if (open_xrcd_fd(ctx, miss, 0) || errno != ENOENT)
			die("an open of no domain did not fail with ENOENT");
	printf("%.1f\n", (double)(daemon_ns() - t0) / n / 1e3);
}

static unsigned long long wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull +
	       (unsigned long long)ts.tv_nsec;
}

/* What each request costs whatever it asks: framing, dispatch, reply. */
static void query_port(unsigned long n, unsigned long wall)
{
	struct ibv_context *ctx = open_first();
	unsigned long long (*clock)(void) = wall ? wall_ns : daemon_ns;
	struct ibv_port_attr attr;
	unsigned long long t0;
	unsigned long i;

	t0 = clock();
	for (i = 0; i < n; i++)
		if (ibv_query_port(ctx, 1, &attr))
			die("ibv_query_port");
	printf("%.2f\n", (double)(clock() - t0) / n / 1e3);
}

int main(int argc, char **argv)
{
	unsigned long a, b;

	if (argc != 5) {
		fprintf(stderr, "usage: tenant-costs DAEMON_PID reg_mr|close|open_xrcd|query_port A B\n");
		return 2;
	}
	daemon_pid = (pid_t)atoi(argv[1]);
	a = strtoul(argv[3], NULL, 0);
	b = strtoul(argv[4], NULL, 0);
	if (!strcmp(argv[2], "reg_mr"))
		reg_mr(a, b);
	else if (!strcmp(argv[2], "close"))
		close_many(a, b);
	else if (!strcmp(argv[2], "open_xrcd"))
		open_xrcd(a, b);
	else if (!strcmp(argv[2], "query_port"))
		query_port(a, b);
	else
		return 2;
	return 0;
}
