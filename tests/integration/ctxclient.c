/*
 * ctxclient-helper: an ordinary verbs program that holds one device context
 * open and acts on commands, so a test can change the daemon under it.
 *
 * Built against the system <infiniband/verbs.h> and -libverbs like any
 * application; tests run it through ibverbsd-run so it loads our library.
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

#include <infiniband/verbs.h>

static struct ibv_context *ctx;

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

int main(int argc, char **argv)
{
	struct ibv_device **list;
	const char *want = NULL;
	char line[256];
	int i, n;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && strcmp(argv[1], "-d") == 0) {
		want = argv[2];
	} else if (argc != 1) {
		fprintf(stderr, "usage: %s [-d DEVICE]\n", argv[0]);
		return 2;
	}

	list = ibv_get_device_list(&n);
	if (!list) {
		printf("error open: ibv_get_device_list: %s\n", strerror(errno));
		return 1;
	}
	for (i = 0; i < n; i++)
		if (!want || strcmp(ibv_get_device_name(list[i]), want) == 0)
			break;
	if (i == n) {
		printf("error open: device %s not found among %d\n",
		       want ? want : "(any)", n);
		return 1;
	}
	ctx = ibv_open_device(list[i]);
	if (!ctx) {
		printf("error open: ibv_open_device(%s): %s\n",
		       ibv_get_device_name(list[i]), strerror(errno));
		return 1;
	}
	printf("ready %s\n", ibv_get_device_name(list[i]));

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
		} else if (strncmp(line, "regunmapped", 11) == 0) {
			cmd_regunmapped();
		} else if (strncmp(line, "quit", 4) == 0) {
			break;
		} else {
			printf("error unknown command: %s", line);
		}
	}
	if (ibv_close_device(ctx))
		fprintf(stderr, "ibv_close_device: %s\n", strerror(errno));
	ibv_free_device_list(list);
	return 0;
}
