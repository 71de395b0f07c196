/*
 * Fuzz harness: every request handler, in-process.  A daemon is set up
 * once as main.c does (config, two software devices, the engine's
 * threads, the closer, the CM), without a listener.  Each input is one or
 * more client connections: a socketpair per connection whose daemon end
 * becomes a session (ibvd_session_new, peer credentials ours), into whose
 * client end the input's frames are sent, fds included; the daemon's
 * event loop then reads and dispatches them as for a real client
 * (server/session.c, call.c, the request table), and the replies are
 * drained.  At the end of the input every session is closed, which tears
 * down all it made; ASan's leak check at exit finds what a teardown
 * forgot.
 *
 * Input: a first byte (bit 0: the session is privileged; bits 1-2: its
 * uid, 0/1001/1002/1003), then records:
 *   u16 type, u8 fds, u16 len (little endian), len payload bytes
 * Type 0xffff opens the next connection (at most MAX_SESSIONS).  fds 0
 * sends what the request's row wants, else (fds - 1) % 5: placeholders,
 * /dev/null but for ATTACH_MEMORY's two, which are this process's own
 * /proc/self/mem (read-write, as the daemon requires) and maps, as a
 * client sends its own, and IMPORT_DEVICE's first, one end of a fresh
 * socket pair (the daemon makes it a session sharing the context; ours
 * are closed with the input).  The others are opened once: a frame
 * carries copies.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "cm/cm.h"
#include "config/config.h"
#include "devices.h"
#include "engine/engine.h"
#include "fake_daemon.h"
#include "frame.h"
#include "log.h"
#include "request.h"
#include "server/session.h"
#include "verbs/async.h"
#include "verbs/context.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define CHECK(cond)	do { if (!(cond)) abort(); } while (0)
#define MAX_SESSIONS	4
#define MAX_RECORDS	64
#define NEW_SESSION	0xffff

static const char config_text[] =
	"{ \"socket\": { \"path\": \"/nonexistent/fuzz.sock\" },"
	"  \"rlimit_memlock\": \"ignore\", \"device_links\": false,"
	"  \"devices\": [ { \"name\": \"ibvd0\" }, { \"name\": \"ibvd1\", \"ports\": 2 } ],"
	"  \"limits\": { \"uid\": { \"1002\": { \"qp\": 2, \"hca_object\": 8 } } } }";

static struct ibvd_daemon daemon_state;
/* What frames carry as fds: /dev/null, /proc/self/mem, /proc/self/maps */
static int devnull_fd, mem_fd, maps_fd;
static uint8_t reply_buf[IBVD_FRAME_MAX];


int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	signal(SIGPIPE, SIG_IGN);
	devnull_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	mem_fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	maps_fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	CHECK(devnull_fd >= 0 && mem_fd >= 0 && maps_fd >= 0);
	fuzz_daemon_setup(&daemon_state, config_text, true);
	return 0;
}

/* Read and close whatever the daemon sent back */
static void drain(int sock)
{
	struct ibvd_frame frame;

	while (ibvd_frame_recv(sock, reply_buf, sizeof(reply_buf), &frame,
			       MSG_DONTWAIT) > 0)
		ibvd_frame_close_fds(&frame);
}

/*
 * Let the daemon's loop handle what is pending on its sockets: one turn
 * reads and answers every frame sent (session.c reads until EAGAIN); a
 * second runs what the first made active (deferred CM events, the
 * closer's retries).
 */
static void daemon_turn(struct ibvd_daemon *d)
{
	int i;

	for (i = 0; i < 2; i++)
		event_base_loop(d->base, EVLOOP_NONBLOCK);
}

static int open_session(struct ibvd_daemon *d, uint8_t flags, int *client)
{
	static const uid_t uids[] = { 0, 1001, 1002, 1003 };
	struct ucred cred = { .pid = getpid() };
	int sv[2];

	cred.uid = cred.gid = uids[(flags >> 1) & 3];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	CHECK(fcntl(sv[0], F_SETFL, O_NONBLOCK) == 0);
	if (ibvd_session_new(d, sv[0], &cred, flags & 1, NULL) < 0) {
		close(sv[1]);
		return -ENOMEM;
	}
	*client = sv[1];
	return 0;
}

/*
 * The importers' ends of the socket pairs IMPORT_DEVICE frames carried:
 * the daemon makes the other ends sessions; closed with the input.
 */
static int import_ends[MAX_RECORDS];
static unsigned int nimport_ends;

/* A fresh pair for IMPORT_DEVICE: ours kept, the other end to send. */
static int import_pair(void)
{
	int sv[2];

	if (nimport_ends == MAX_RECORDS ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return dup(devnull_fd);
	CHECK(fcntl(sv[0], F_SETFL, O_NONBLOCK) == 0);
	import_ends[nimport_ends++] = sv[0];
	return sv[1];
}

/*
 * The fds one request carries: placeholders, our own memory for ATTACH,
 * a socket pair's end for IMPORT_DEVICE (the caller closes those, n_own
 * of them, first in fds).
 */
static unsigned int pick_fds(uint16_t type, uint8_t sel, int *fds,
			     unsigned int *n_own)
{
	const struct ibvd_request_type *rt = ibvd_request_type_find(type);
	unsigned int n, i;

	n = sel ? (sel - 1u) % (IBVD_FRAME_MAX_FDS + 1) : rt ? rt->nfds : 0;
	*n_own = 0;
	for (i = 0; i < n; i++) {
		if (type == IBVD_MSG_ATTACH_MEMORY && i < 2)
			fds[i] = i ? maps_fd : mem_fd;
		else if (type == IBVD_MSG_IMPORT_DEVICE && i == 0)
			fds[(*n_own)++] = import_pair();
		else
			fds[i] = devnull_fd;
	}
	return n;
}

/* One record as a frame on the client's socket */
static void send_record(int client, uint16_t type, uint8_t sel,
			const uint8_t *payload, uint16_t len, uint32_t req_id)
{
	struct ibvd_frame_hdr hdr = {
		.magic = IBVD_FRAME_MAGIC, .version = IBVD_PROTO_VERSION,
		.type = type, .req_id = req_id, .len = len,
	};
	uint8_t buf[sizeof(hdr) + 65535];
	int fds[IBVD_FRAME_MAX_FDS];
	unsigned int n_own, nfds = pick_fds(type, sel, fds, &n_own), i;
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(fds))];
	} cmsg;
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(hdr) + len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *c;

	memcpy(buf, &hdr, sizeof(hdr));
	memcpy(buf + sizeof(hdr), payload, len);
	if (nfds) {
		memset(&cmsg, 0, sizeof(cmsg));
		mh.msg_control = cmsg.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	/* The daemon may have hung up: that is an answer too */
	(void)!sendmsg(client, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	for (i = 0; i < n_own; i++)
		close(fds[i]);
}

static void close_sessions(struct ibvd_daemon *d, int *clients, int n)
{
	struct ibvd_session *s;
	int i;

	for (i = 0; i < n; i++)
		close(clients[i]);
	for (i = 0; i < (int)nimport_ends; i++)
		close(import_ends[i]);
	nimport_ends = 0;
	/* Hang-ups are seen by the loop; close whatever is left */
	daemon_turn(d);
	while ((s = TAILQ_FIRST(&d->sessions)))
		ibvd_session_close(s);
	daemon_turn(d);
	CHECK(d->nsessions == 0 && d->ncontexts == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ibvd_daemon *d = &daemon_state;
	int clients[MAX_SESSIONS], nclients = 0, records = 0;
	size_t off = 1;
	uint16_t type, len;

	if (size < 1 || open_session(d, data[0], &clients[0]) < 0)
		return 0;
	nclients = 1;
	while (off + 5 <= size && records++ < MAX_RECORDS) {
		memcpy(&type, data + off, 2);
		memcpy(&len, data + off + 3, 2);
		if (type == NEW_SESSION) {
			off += 5;
			if (nclients == MAX_SESSIONS ||
			    open_session(d, data[off - 3], &clients[nclients]) < 0)
				break;
			nclients++;
			continue;
		}
		if (len > size - off - 5)
			len = (uint16_t)(size - off - 5);
		send_record(clients[nclients - 1], type, data[off + 2],
			    data + off + 5, len, (uint32_t)records);
		off += 5 + (size_t)len;
		daemon_turn(d);
		drain(clients[nclients - 1]);
	}
	close_sessions(d, clients, nclients);
	return 0;
}
