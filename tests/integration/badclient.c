/*
 * badclient-helper: a misbehaving ibverbsd client, one case per run.
 *
 * Frames are put together by hand here, not with common/frame.c, so that
 * every header field can be wrong on purpose.  Each case also keeps a
 * well-behaved "witness" connection (a device context, which the idle
 * timeout leaves alone) open across the misbehaviour and, when the case is
 * over, checks that the witness and a fresh connection are both still
 * served.
 *
 * usage: badclient-helper SOCKET CASE [DAEMON_PID]
 *	ping		one LIST_DEVICES round trip, silent (readiness probe)
 *	list		LIST_DEVICES, prints "NAME GUID PORTS" per device
 *	malformed	undecodable protobuf payloads -> EBADMSG, stays usable
 *	oversized	a frame above 64 KiB -> disconnected
 *	truncated	shorter than the header -> disconnected
 *	badmagic	wrong magic -> disconnected
 *	badversion	wrong protocol version -> disconnected
 *	badlen		header length disagrees with the frame -> disconnected
 *	unknowntype	unassigned message types -> EOPNOTSUPP, stays usable
 *	unknownflood MS	the same for MS ms (another uid's log lines still
 *			appear meanwhile: bad-input.sh)
 *	answers		Errors and replies sent to the daemon -> disconnect; an
 *			IMPORT_DEVICE of a socket connected to the daemon is
 *			refused: nothing comes on it
 *	reqid		replies echo whatever request id came, pipelined too
 *	fds		fds on a type that takes none -> error reply, and the
 *			daemon closes them (needs DAEMON_PID for /proc/PID/fd)
 *	attachfds	ATTACH_MEMORY with the wrong fds (one only, maps and
 *			mem swapped, /dev/null or /proc/self/status for the
 *			maps) -> EINVAL or a count error each, then the right
 *			two -> accepted, once (EBUSY after)
 *	sharedmr	REG_MR_SHARED without its fd -> error reply; with a
 *			pipe, a file shorter than the range, a read-only fd
 *			for a writable MR -> registered all the same, none
 *			mapped by the daemon; a good one mapped (needs
 *			DAEMON_PID for /proc/PID/maps)
 *	mappedcap	1,040 one-page MRs with remote access on a memfd:
 *			1,024 mapped by the daemon (their fds kept), the rest
 *			registered on the slower tier; one of the mapped
 *			deregistered makes room for the next (needs DAEMON_PID)
 *	cmqp		CREATE_QP's bundle (its CQs, channels and CM id)
 *			with a CQ both named and asked for, on an XRC QP, with
 *			a wrong token or an unbound id -> EINVAL, no daemon
 *			fd left; CM_ACCEPT and CM_ESTABLISH moving a QP the id
 *			did not make, CM_DISCONNECT likewise -> EINVAL, the
 *			ids accept, establish and disconnect after (needs
 *			DAEMON_PID)
 *	cmreset		a CM session's event socket closed with an event
 *			unread (the peer reads a reset): the session closes
 *			(bad-input.sh checks that the daemon logs no misbehaviour)
 *	direct		QP_DIRECT_LEAVE of no QP, of an RC QP -> EINVAL, of a
 *			UD QP without rings -> ENOENT; QP_DIRECT_UD of an RC
 *			QP -> EINVAL, of a UD QP in RESET, to an RC QP, to
 *			itself -> ENOENT; two UD QPs in RTS pair, then
 *			QP_DIRECT_UD and QP_DIRECT_LEAVE -> EBUSY while both
 *			are there; the peer destroyed, QP_DIRECT_LEAVE works
 *			once (ENOENT after)
 *	dm		ALLOC_DM of 0 bytes -> EINVAL, above max_dm_size ->
 *			ENOMEM; FREE_DM and IMPORT_DM of no allocation ->
 *			EINVAL; a good one's fd is a memfd of whole pages that
 *			nobody can resize; IMPORT_DM sends the same file; 32
 *			allocations, then ENOMEM; freed, it cannot be imported
 *	notopen		QUERY_* before OPEN_DEVICE, OPEN_DEVICE of an unknown
 *			device -> error replies, stays usable
 *	silent		a connection that never speaks does not hold up others
 *	idle SECONDS	a connection that never speaks, and one that went
 *			silent after a request, are dropped within SECONDS
 *			(+3) by the daemon's idle timeout; one that keeps
 *			talking and a device context that says nothing stay
 *	lingerfd	fds whose close() blocks (TCP sockets lingering on
 *			unsent data) passed with a request, with too many
 *			fds, with a malformed frame, and as OPEN_XRCD's and
 *			REG_MR_SHARED's fd: other clients are still answered
 *			within 1 s each time, and the daemon's close resets
 *			the connection rather than linger
 *	stuckfds PATH N	N fds of PATH, a file whose close blocks (stuck-close.sh),
 *			one per LIST_DEVICES, 600 ms apart: each answered
 *	stuckflood PATH [TMUL]
 *			four fds of PATH per LIST_DEVICES until one goes
 *			unanswered for 2 s (times TMUL: this uid's closes
 *			backed up), then its answer within 60 s (once the
 *			closes end)
 *	closeburst N [TMUL]
 *			N connections, each passing a memfd with a request:
 *			each answered within 1 s (times TMUL)
 *	connects N [TMUL]
 *			the same without the memfd
 *	peruid CAP	this uid holds connections (device contexts) until
 *			the daemon refuses one: it holds CAP (give or take
 *			2 of its own closing), the refused one gets an Error
 *			"too many clients" with request id 0; then prints
 *			"holding N" and keeps them until stdin closes
 *	flood		requests without reading replies -> disconnected,
 *			others served meanwhile
 *	fuzz N SEED	N random requests (random or mutated payloads for every
 *			type, random ADMIN argv, random port numbers, flipped
 *			header bytes), on fresh and on opened connections; each
 *			gets a reply echoing its id (a flipped header may get a
 *			disconnect instead); others served throughout
 *	admin ARG...	send one AdminRequest with argv ARG..., print
 *			"reply JSON" or "error ERRNUM MESSAGE" (no checks: for
 *			asserting what the daemon itself allows, whatever
 *			ibvctl checks on its side)
 * Exit status 0 when every check of the case held, 1 otherwise.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "frame.h"
#include "ibverbsd.pb-c.h"

#define TIMEOUT_MS	5000
/* The kernel's SCM_MAX_FD: the most fds one message can carry. */
#define MAX_SEND_FDS	253

static const char *sock_path;
static const char *case_name = "?";
static int failures;
static int quiet;
static uint32_t next_id = 1;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...)
{
	va_list ap;

	if (quiet)
		return;
	printf("badclient: %s: ", case_name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

static void bad(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "badclient: %s: FAIL: ", case_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	failures++;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* A new connection, or -1 (reported). */
static int conn_open(void)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(sock_path) >= sizeof(sun.sun_path)) {
		bad("socket path too long");
		return -1;
	}
	strcpy(sun.sun_path, sock_path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		bad("socket: %s", strerror(errno));
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		bad("connect %s: %s", sock_path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* ---- sending ------------------------------------------------------------ */

/* Send bytes as one message with optional fds; 0 or -errno. */
static int send_raw(int fd, const void *buf, size_t len, const int *fds,
		    unsigned int nfds, int flags)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * MAX_SEND_FDS)];
	} cmsg;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (nfds) {
		struct cmsghdr *c;

		if (nfds > MAX_SEND_FDS)
			return -EINVAL;
		memset(&cmsg, 0, sizeof(cmsg));
		mh.msg_control = cmsg.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	n = sendmsg(fd, &mh, MSG_NOSIGNAL | flags);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

/* A header followed by payload, every header field given by the caller. */
static int send_hdr(int fd, const struct ibvd_frame_hdr *h, const void *payload,
		    size_t plen, const int *fds, unsigned int nfds, int flags)
{
	static uint8_t buf[2 * IBVD_FRAME_MAX];
	size_t len = sizeof(*h) + plen;

	if (len > sizeof(buf))
		return -EMSGSIZE;
	memcpy(buf, h, sizeof(*h));
	if (plen)
		memcpy(buf + sizeof(*h), payload, plen);
	return send_raw(fd, buf, len, fds, nfds, flags);
}

static struct ibvd_frame_hdr good_hdr(uint16_t type, uint32_t req_id, size_t plen)
{
	struct ibvd_frame_hdr h = {
		.magic = IBVD_FRAME_MAGIC,
		.version = IBVD_PROTO_VERSION,
		.type = type,
		.req_id = req_id,
		.len = (uint32_t)plen,
	};
	return h;
}

/* A correct frame carrying msg (NULL: empty payload). */
static int send_msg(int fd, uint16_t type, uint32_t req_id,
		    const ProtobufCMessage *msg, const int *fds,
		    unsigned int nfds, int flags)
{
	static uint8_t payload[IBVD_FRAME_MAX];
	size_t plen = msg ? protobuf_c_message_get_packed_size(msg) : 0;
	struct ibvd_frame_hdr h;

	if (plen > sizeof(payload))
		return -EMSGSIZE;
	if (msg)
		protobuf_c_message_pack(msg, payload);
	h = good_hdr(type, req_id, plen);
	return send_hdr(fd, &h, payload, plen, fds, nfds, flags);
}

/* ---- receiving ------------------------------------------------------------ */

struct reply {
	struct ibvd_frame_hdr hdr;
	uint8_t payload[IBVD_FRAME_MAX];
	size_t len;
	unsigned int nfds;
	int fd;			/* with keep_fd: the first fd, else -1 */
};

/* recv_frame keeps the first fd that comes (rep.fd) instead of closing it. */
static bool keep_fd;

static struct reply rep;

/*
 * Receive one frame within timeout_ms: 1 frame in rep, 0 EOF (or reset),
 * -ETIMEDOUT, -EBADMSG for a reply that breaks the framing rules, -errno.
 * Received fds are closed (counted in rep.nfds).
 */
static int recv_frame(int fd, int timeout_ms)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * 16)];
	} cmsg;
	uint8_t buf[IBVD_FRAME_MAX + 1];
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cmsg.buf, .msg_controllen = sizeof(cmsg.buf),
	};
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	struct cmsghdr *c;
	ssize_t n;
	int r;

	do
		r = poll(&pfd, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	if (r == 0)
		return -ETIMEDOUT;
	n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0)
		return errno == ECONNRESET ? 0 : -errno;
	rep.nfds = 0;
	rep.fd = -1;
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		size_t i, k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < k; i++) {
			int rfd;

			memcpy(&rfd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (keep_fd && rep.fd < 0)
				rep.fd = rfd;
			else
				close(rfd);
			rep.nfds++;
		}
	}
	if (n == 0 && rep.nfds == 0)
		return 0;
	if ((size_t)n < sizeof(rep.hdr) || (size_t)n > IBVD_FRAME_MAX) {
		bad("daemon sent a %zd-byte frame", n);
		return -EBADMSG;
	}
	memcpy(&rep.hdr, buf, sizeof(rep.hdr));
	rep.len = (size_t)n - sizeof(rep.hdr);
	memcpy(rep.payload, buf + sizeof(rep.hdr), rep.len);
	if (rep.hdr.magic != IBVD_FRAME_MAGIC || rep.hdr.version != IBVD_PROTO_VERSION ||
	    rep.hdr.len != rep.len) {
		bad("daemon sent a bad header: magic 0x%08x version %u len %u (frame %zd)",
		    rep.hdr.magic, rep.hdr.version, rep.hdr.len, n);
		return -EBADMSG;
	}
	return 1;
}

/* The errnum of the Error reply in rep, or -1 if rep is not a valid one. */
static int rep_errnum(char *msg, size_t msglen)
{
	Ibvd__Error *e;
	int errnum;

	if (rep.hdr.type != IBVD_MSG_ERROR)
		return -1;
	e = ibvd__error__unpack(NULL, rep.len, rep.payload);
	if (!e)
		return -1;
	errnum = e->errnum;
	snprintf(msg, msglen, "%s", e->message ? e->message : "");
	ibvd__error__free_unpacked(e, NULL);
	return errnum;
}

/*
 * Expect an Error reply to req_id with errnum want (0: any positive).
 * Returns the errnum, or -1 (reported).
 */
static int expect_error(int fd, uint32_t req_id, int want, const char *what)
{
	char msg[256] = "";
	int r, errnum;

	r = recv_frame(fd, TIMEOUT_MS);
	if (r == 0) {
		bad("%s: disconnected instead of an error reply", what);
		return -1;
	}
	if (r < 0) {
		bad("%s: no error reply: %s", what, strerror(-r));
		return -1;
	}
	errnum = rep_errnum(msg, sizeof(msg));
	if (errnum < 0) {
		bad("%s: got type 0x%04x (%s), not an Error reply", what,
		    rep.hdr.type, ibvd_msg_type_name(rep.hdr.type));
		return -1;
	}
	if (rep.hdr.req_id != req_id) {
		bad("%s: error reply has request id %u, sent %u", what,
		    rep.hdr.req_id, req_id);
		return -1;
	}
	if (errnum <= 0 || (want && errnum != want)) {
		bad("%s: errnum %d (%s), want %s", what, errnum, strerror(errnum),
		    want ? strerror(want) : "a positive errno");
		return -1;
	}
	say("%s: error reply %d (%s) \"%s\"", what, errnum, strerror(errnum), msg);
	return errnum;
}

/*
 * Expect the daemon to drop the connection within TIMEOUT_MS; an Error reply
 * before that is tolerated (and shown).  Returns 0, or -1 (reported).
 */
static int expect_disconnect(int fd, const char *what)
{
	long t0 = now_ms();
	int frames = 0, r;

	for (;;) {
		long left = TIMEOUT_MS - (now_ms() - t0);

		r = recv_frame(fd, left > 0 ? (int)left : 0);
		if (r == 0) {
			say("%s: disconnected after %ld ms", what, now_ms() - t0);
			return 0;
		}
		if (r == -ETIMEDOUT) {
			bad("%s: still connected after %d ms", what, TIMEOUT_MS);
			return -1;
		}
		if (r < 0) {
			bad("%s: recv: %s", what, strerror(-r));
			return -1;
		}
		if (rep.hdr.type == IBVD_MSG_ERROR && ++frames <= 2) {
			char msg[256] = "";
			int e = rep_errnum(msg, sizeof(msg));

			say("%s: error reply %d (%s) \"%s\" before the disconnect",
			    what, e, e > 0 ? strerror(e) : "?", msg);
			continue;
		}
		bad("%s: got a type 0x%04x reply instead of a disconnect", what,
		    rep.hdr.type);
		return -1;
	}
}

/*
 * LIST_DEVICES on fd with req_id; expects a proper reply that lists at
 * least one device.  Returns the device count, or -1 (reported).
 */
static int list_devices(int fd, uint32_t req_id, int print, const char *what)
{
	Ibvd__ListDevicesReply *lr;
	int r, n;
	size_t i;

	r = send_msg(fd, IBVD_MSG_LIST_DEVICES, req_id, NULL, NULL, 0, 0);
	if (r < 0) {
		bad("%s: send LIST_DEVICES: %s", what, strerror(-r));
		return -1;
	}
	r = recv_frame(fd, TIMEOUT_MS);
	if (r <= 0) {
		bad("%s: LIST_DEVICES: %s", what, r == 0 ? "disconnected" : strerror(-r));
		return -1;
	}
	if (rep.hdr.type != (IBVD_MSG_LIST_DEVICES | IBVD_REPLY)) {
		char msg[256] = "";
		int e = rep_errnum(msg, sizeof(msg));

		bad("%s: LIST_DEVICES answered with type 0x%04x (errnum %d \"%s\")",
		    what, rep.hdr.type, e, msg);
		return -1;
	}
	if (rep.hdr.req_id != req_id) {
		bad("%s: LIST_DEVICES reply has request id %u, sent %u", what,
		    rep.hdr.req_id, req_id);
		return -1;
	}
	lr = ibvd__list_devices_reply__unpack(NULL, rep.len, rep.payload);
	if (!lr) {
		bad("%s: LIST_DEVICES reply does not decode", what);
		return -1;
	}
	n = (int)lr->n_devices;
	for (i = 0; print && i < lr->n_devices; i++)
		printf("%s %016llx %u\n", lr->devices[i]->name,
		       (unsigned long long)lr->devices[i]->node_guid,
		       lr->devices[i]->phys_port_cnt);
	ibvd__list_devices_reply__free_unpacked(lr, NULL);
	if (n < 1) {
		bad("%s: LIST_DEVICES lists no device", what);
		return -1;
	}
	return n;
}

/* The witness still works, and so does a fresh connection. */
static void check_others(int witness, const char *when)
{
	char what[128];
	int fd;

	snprintf(what, sizeof(what), "witness connection %s", when);
	if (witness >= 0 && list_devices(witness, next_id++, 0, what) < 0)
		return;
	snprintf(what, sizeof(what), "fresh connection %s", when);
	fd = conn_open();
	if (fd < 0)
		return;
	list_devices(fd, next_id++, 0, what);
	close(fd);
}

/* This connection is still served after the misbehaviour. */
static void check_usable(int fd, const char *what)
{
	char w[128];

	snprintf(w, sizeof(w), "same connection after %s", what);
	if (list_devices(fd, next_id++, 0, w) >= 0)
		say("%s: connection still usable", what);
}

/* Open ibvd0 on fd (its async fd is closed at once); 0 or -1 (reported). */
static int open_device(int fd)
{
	Ibvd__OpenDevice od = IBVD__OPEN_DEVICE__INIT;
	uint32_t id = next_id++;

	od.name = (char *)"ibvd0";
	if (send_msg(fd, IBVD_MSG_OPEN_DEVICE, id, &od.base, NULL, 0, 0) < 0 ||
	    recv_frame(fd, TIMEOUT_MS) <= 0 ||
	    rep.hdr.type != (IBVD_MSG_OPEN_DEVICE | IBVD_REPLY) || rep.hdr.req_id != id) {
		bad("could not open ibvd0");
		return -1;
	}
	return 0;
}

/* The witness and a fresh connection are each answered within limit_ms. */
static void check_others_within(int witness, long limit_ms, const char *when)
{
	long t0 = now_ms(), took;
	int fails = failures;

	check_others(witness, when);
	took = now_ms() - t0;
	if (failures == fails && took > 2 * limit_ms)
		bad("%s: two requests took %ld ms, want under %ld ms each", when,
		    took, limit_ms);
	else if (failures == fails)
		say("%s: witness and a fresh connection answered in %ld ms", when,
		    took);
}

/* ---- the cases ---------------------------------------------------------- */

static void case_malformed(void)
{
	/* OpenDevice.name claims 80 bytes, 3 follow */
	static const uint8_t short_string[] = { 0x0a, 0x50, 'a', 'b', 'c' };
	/* a varint field whose value never ends */
	static const uint8_t endless_varint[] = { 0x08, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	/* wire type 7 does not exist */
	static const uint8_t bad_wiretype[] = { 0x0f, 0x01 };
	static const struct {
		uint16_t type;
		const uint8_t *p;
		size_t len;
		const char *what;
	} t[] = {
		{ IBVD_MSG_OPEN_DEVICE, short_string, sizeof(short_string),
		  "OPEN_DEVICE with a string running past the payload" },
		{ IBVD_MSG_OPEN_DEVICE, endless_varint, sizeof(endless_varint),
		  "OPEN_DEVICE with an endless varint" },
		{ IBVD_MSG_ADMIN, bad_wiretype, sizeof(bad_wiretype),
		  "ADMIN with an invalid wire type" },
		{ IBVD_MSG_ADMIN, short_string, sizeof(short_string),
		  "ADMIN with a string running past the payload" },
	};
	int fd = conn_open();
	size_t i;

	if (fd < 0)
		return;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct ibvd_frame_hdr h = good_hdr(t[i].type, next_id, t[i].len);
		int r = send_hdr(fd, &h, t[i].p, t[i].len, NULL, 0, 0);

		if (r < 0) {
			bad("%s: send: %s", t[i].what, strerror(-r));
			break;
		}
		if (expect_error(fd, next_id++, EBADMSG, t[i].what) < 0)
			break;
		check_usable(fd, t[i].what);
	}
	close(fd);
}

/* Send one frame that breaks the framing rules; expect a disconnect. */
static void framing_violation(const struct ibvd_frame_hdr *h, const void *payload,
			      size_t plen, const char *what)
{
	int fd = conn_open(), r;

	if (fd < 0)
		return;
	/* a good request first: the connection is established in the daemon */
	if (list_devices(fd, next_id++, 0, "before the violation") < 0) {
		close(fd);
		return;
	}
	r = send_hdr(fd, h, payload, plen, NULL, 0, 0);
	if (r < 0)
		bad("%s: send: %s", what, strerror(-r));
	else
		expect_disconnect(fd, what);
	close(fd);
}

static void case_oversized(void)
{
	static uint8_t big[IBVD_FRAME_MAX + 4096];
	size_t plen = sizeof(big);
	struct ibvd_frame_hdr h = good_hdr(IBVD_MSG_LIST_DEVICES, next_id++, plen);
	int fd, r;

	memset(big, 0x41, sizeof(big));
	framing_violation(&h, big, plen, "frame of 69648 bytes (header says so too)");

	/* just one byte over the maximum */
	plen = IBVD_FRAME_MAX - sizeof(h) + 1;
	h = good_hdr(IBVD_MSG_LIST_DEVICES, next_id++, plen);
	framing_violation(&h, big, plen, "frame of IBVD_FRAME_MAX + 1 bytes");

	/* and the largest legal frame is not a framing violation */
	fd = conn_open();
	if (fd < 0)
		return;
	plen = IBVD_FRAME_MAX - sizeof(h);
	h = good_hdr(0x0777, next_id, plen);
	r = send_hdr(fd, &h, big, plen, NULL, 0, 0);
	if (r < 0)
		bad("frame of exactly IBVD_FRAME_MAX bytes: send: %s", strerror(-r));
	else if (expect_error(fd, next_id++, 0, "frame of exactly IBVD_FRAME_MAX bytes, unknown type") > 0)
		check_usable(fd, "a maximal frame");
	close(fd);
}

static void case_truncated(void)
{
	struct ibvd_frame_hdr h = good_hdr(IBVD_MSG_LIST_DEVICES, next_id++, 0);
	int fd, r;

	fd = conn_open();
	if (fd < 0)
		return;
	if (list_devices(fd, next_id++, 0, "before the violation") >= 0) {
		r = send_raw(fd, &h, 8, NULL, 0, 0);
		if (r < 0)
			bad("8-byte frame: send: %s", strerror(-r));
		else
			expect_disconnect(fd, "8-byte frame (half a header)");
	}
	close(fd);

	fd = conn_open();
	if (fd < 0)
		return;
	r = send_raw(fd, &h, sizeof(h) - 1, NULL, 0, 0);
	if (r < 0)
		bad("15-byte frame: send: %s", strerror(-r));
	else
		expect_disconnect(fd, "15-byte frame as the first message");
	close(fd);
}

static void case_badmagic(void)
{
	struct ibvd_frame_hdr h = good_hdr(IBVD_MSG_LIST_DEVICES, next_id++, 0);

	h.magic = 0x12345678;
	framing_violation(&h, NULL, 0, "magic 0x12345678");
	h.magic = __builtin_bswap32(IBVD_FRAME_MAGIC);
	framing_violation(&h, NULL, 0, "byte-swapped magic");
}

static void case_badversion(void)
{
	struct ibvd_frame_hdr h = good_hdr(IBVD_MSG_LIST_DEVICES, next_id++, 0);

	h.version = IBVD_PROTO_VERSION + 1;
	framing_violation(&h, NULL, 0, "protocol version + 1");
	h.version = 0;
	framing_violation(&h, NULL, 0, "protocol version 0");
}

static void case_badlen(void)
{
	static const uint8_t payload[8] = { 0 };
	struct ibvd_frame_hdr h = good_hdr(IBVD_MSG_LIST_DEVICES, next_id++, 0);

	h.len = 4;		/* says 4, carries 8 */
	framing_violation(&h, payload, sizeof(payload), "len 4 with 8 payload bytes");
	h.len = 12;		/* says 12, carries 8 */
	framing_violation(&h, payload, sizeof(payload), "len 12 with 8 payload bytes");
	h.len = 0xffffffffu;
	framing_violation(&h, payload, sizeof(payload), "len 0xffffffff with 8 payload bytes");
}

static void case_unknowntype(void)
{
	static const uint16_t types[] = { 0x0777, 0x0000, 0x7ffe, 0x01ff };
	int fd = conn_open();
	size_t i;

	if (fd < 0)
		return;
	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		char what[64];
		int r;

		snprintf(what, sizeof(what), "type 0x%04x", types[i]);
		r = send_msg(fd, types[i], next_id, NULL, NULL, 0, 0);
		if (r < 0) {
			bad("%s: send: %s", what, strerror(-r));
			break;
		}
		if (expect_error(fd, next_id++, EOPNOTSUPP, what) < 0)
			break;
		check_usable(fd, what);
	}
	close(fd);
}

/*
 * Unknown types for arg milliseconds, each answered EOPNOTSUPP: a flood
 * of rejections, each a log line of this uid's (bad-input.sh checks that
 * another uid's line meanwhile is not lost to it).
 */
static void case_unknownflood(const char *arg)
{
	long ms = arg ? atol(arg) : 1000, t0 = now_ms();
	unsigned long n = 0;
	int fd = conn_open();

	if (fd < 0)
		return;
	while (now_ms() - t0 < ms) {
		if (send_msg(fd, 0x0777, next_id, NULL, NULL, 0, 0) < 0 ||
		    expect_error(fd, next_id++, EOPNOTSUPP, "type 0x0777") < 0)
			break;
		n++;
	}
	say("%lu unknown types in %ld ms, each refused", n, ms);
	close(fd);
}

/*
 * Answers from a client: an Error or a reply is never a request; the
 * daemon hangs up rather than answer it.  And an IMPORT_DEVICE handing
 * over a socket connected to the daemon's own listener (whose
 * credentials are the daemon's) is refused, and nothing arrives at that
 * socket: before, the reply went to the daemon's session there, whose
 * Error went back, and so on for ever, as root.
 */
static void case_answers(void)
{
	static const uint16_t types[] = {
		IBVD_MSG_ERROR, IBVD_MSG_LIST_DEVICES | IBVD_REPLY,
		IBVD_MSG_IMPORT_DEVICE | IBVD_REPLY,
	};
	Ibvd__ImportDevice imp = IBVD__IMPORT_DEVICE__INIT;
	int fd, ctx, loop, r;
	size_t i;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		char what[64];

		snprintf(what, sizeof(what), "an answer of type 0x%04x", types[i]);
		fd = conn_open();
		if (fd < 0)
			return;
		if (send_msg(fd, types[i], next_id++, NULL, NULL, 0, 0) < 0)
			bad("%s: send failed", what);
		else
			expect_disconnect(fd, what);
		close(fd);
	}
	ctx = conn_open();
	loop = conn_open();
	if (ctx < 0 || loop < 0 || open_device(ctx) < 0)
		return;
	/* the importer hears on its socket, the context's owner nothing */
	if (send_msg(ctx, IBVD_MSG_IMPORT_DEVICE, next_id++, &imp.base, &loop,
		     1, 0) < 0)
		bad("IMPORT_DEVICE: send failed");
	r = recv_frame(loop, 300);
	if (r == 1)
		bad("the socket connected to the daemon got a frame (type 0x%04x)",
		    rep.hdr.type);
	else if (r != -ETIMEDOUT)
		bad("the socket connected to the daemon: %s",
		    r ? strerror(-r) : "disconnected");
	else
		say("the socket connected to the daemon got nothing");
	check_usable(ctx, "the refused import");
	check_usable(loop, "the refused import, on the daemon's own session");
	close(loop);
	close(ctx);
}

static void case_reqid(void)
{
	static const uint32_t ids[] = { 0, 1, 0xffffffffu, 0x80000000u, 7, 7, 3 };
	uint32_t seen[5] = { 0 };
	int fd = conn_open(), i, r;

	if (fd < 0)
		return;
	for (i = 0; i < (int)(sizeof(ids) / sizeof(ids[0])); i++) {
		char what[64];

		snprintf(what, sizeof(what), "request id %u", ids[i]);
		if (list_devices(fd, ids[i], 0, what) < 0)
			goto out;
	}
	say("replies echoed ids 0, 1, 0xffffffff, 0x80000000, 7, 7, 3");

	/* an error reply echoes the id too */
	r = send_msg(fd, 0x0777, 0xdeadbeef, NULL, NULL, 0, 0);
	if (r < 0 || expect_error(fd, 0xdeadbeef, 0, "unknown type with id 0xdeadbeef") < 0)
		goto out;

	/* five requests in flight before reading any reply */
	for (i = 0; i < 5; i++) {
		r = send_msg(fd, IBVD_MSG_LIST_DEVICES, 500 + i * 11, NULL, NULL, 0, 0);
		if (r < 0) {
			bad("pipelined send: %s", strerror(-r));
			goto out;
		}
	}
	for (i = 0; i < 5; i++) {
		int j;

		r = recv_frame(fd, TIMEOUT_MS);
		if (r <= 0) {
			bad("pipelined reply %d: %s", i, r == 0 ? "disconnected" : strerror(-r));
			goto out;
		}
		if (rep.hdr.type != (IBVD_MSG_LIST_DEVICES | IBVD_REPLY)) {
			bad("pipelined reply %d has type 0x%04x", i, rep.hdr.type);
			goto out;
		}
		for (j = 0; j < 5; j++)
			if (rep.hdr.req_id == (uint32_t)(500 + j * 11) && !seen[j])
				break;
		if (j == 5) {
			bad("pipelined reply %d has request id %u: not sent or twice",
			    i, rep.hdr.req_id);
			goto out;
		}
		seen[j] = 1;
	}
	say("5 pipelined requests: 5 replies, ids 500, 511, 522, 533, 544 each once");
out:
	close(fd);
}

static int count_fds(const char *pid)
{
	char path[64];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%s/fd", pid);
	d = opendir(path);
	if (!d) {
		bad("cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/*
 * The daemon's fd count once it stopped moving: after requests its control
 * thread makes spare channel socket pairs while idle (verbs/channel.c),
 * up to a fixed number, so the count settles within a millisecond or so.
 * With want >= 0, wait (up to 2 s) for the count to come back to want.
 */
static int settled_fds(const char *pid, int want)
{
	int last = count_fds(pid), n, i;

	for (i = 0; i < 100 && last >= 0; i++) {
		usleep(20000);
		n = count_fds(pid);
		if (n == last && (want < 0 || n == want))
			break;
		last = n;
	}
	return last;
}

/* ---- sharedmr ------------------------------------------------------------ */

/* Send type with msg (and fds) and expect its reply: 0, or -1 (reported). */
static int call_ok(int fd, uint16_t type, const ProtobufCMessage *msg,
		   const int *fds, unsigned int nfds, const char *what)
{
	uint32_t id = next_id++;

	if (send_msg(fd, type, id, msg, fds, nfds, 0) < 0 ||
	    recv_frame(fd, TIMEOUT_MS) <= 0 || rep.hdr.req_id != id ||
	    rep.hdr.type != (type | IBVD_REPLY)) {
		bad("%s: no reply (type %#x)", what, rep.hdr.type);
		return -1;
	}
	return 0;
}

/* ---- cmqp ------------------------------------------------------------------ */

/* call_ok, then the reply unpacked as desc (NULL reported). */
static void *call_unpack(int fd, uint16_t type, const ProtobufCMessage *msg,
			 const ProtobufCMessageDescriptor *desc, const char *what)
{
	void *m;

	if (call_ok(fd, type, msg, NULL, 0, what) < 0)
		return NULL;
	m = protobuf_c_message_unpack(desc, NULL, rep.len, rep.payload);
	if (!m)
		bad("%s: undecodable reply", what);
	return m;
}

/* Send msg and expect Error want to it: 0, or -1 (reported). */
static int refused(int fd, uint16_t type, const ProtobufCMessage *msg,
		   int want, const char *what)
{
	uint32_t id = next_id++;

	if (send_msg(fd, type, id, msg, NULL, 0, 0) < 0) {
		bad("%s: send failed", what);
		return -1;
	}
	return expect_error(fd, id, want, what) == want ? 0 : -1;
}

/* The next CM event on the event socket, of type want: its id, or 0. */
static uint32_t cm_event(int evfd, uint32_t want, const char *what)
{
	Ibvd__CmEvent *ev;
	uint32_t id = 0;

	if (recv_frame(evfd, TIMEOUT_MS) <= 0 || rep.hdr.type != IBVD_MSG_CM_EVENT) {
		bad("%s: no CM event", what);
		return 0;
	}
	ev = ibvd__cm_event__unpack(NULL, rep.len, rep.payload);
	if (!ev || ev->event != want || ev->status != 0)
		bad("%s: event %u status %d, not %u", what, ev ? ev->event : 0,
		    ev ? ev->status : 0, want);
	else
		id = ev->id;
	if (ev)
		ibvd__cm_event__free_unpacked(ev, NULL);
	return id;
}

/* A new RC id of the TCP port space on the CM connection: its handle, or 0. */
static uint32_t cm_new_id(int cm)
{
	Ibvd__CmCreateId req = IBVD__CM_CREATE_ID__INIT;
	Ibvd__CmId *reply;
	uint32_t id;

	req.ps = 0x0106;		/* RDMA_PS_TCP */
	req.qp_type = IBV_QPT_RC;
	reply = call_unpack(cm, IBVD_MSG_CM_CREATE_ID, &req.base,
			    &ibvd__cm_id__descriptor, "CM_CREATE_ID");
	if (!reply)
		return 0;
	id = reply->id;
	ibvd__cm_id__free_unpacked(reply, NULL);
	return id;
}

/* Bind id to 127.0.0.1:port (0: any) and return the port it got, or 0. */
static uint16_t cm_bind(int cm, uint32_t id, uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	Ibvd__CmAddr req = IBVD__CM_ADDR__INIT;
	Ibvd__CmIdInfo *info;
	struct sockaddr_in got;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	req.id = id;
	req.src.data = (uint8_t *)&sin;
	req.src.len = sizeof(sin);
	info = call_unpack(cm, IBVD_MSG_CM_BIND_ADDR, &req.base,
			   &ibvd__cm_id_info__descriptor, "CM_BIND_ADDR");
	if (!info)
		return 0;
	memset(&got, 0, sizeof(got));
	if (info->src.len >= sizeof(got))
		memcpy(&got, info->src.data, sizeof(got));
	ibvd__cm_id_info__free_unpacked(info, NULL);
	return ntohs(got.sin_port);
}

/* A CREATE_QP of an RC QP on pd, CQs to be made (each with a channel). */
static void bundle_req(Ibvd__CreateQp *req, Ibvd__QpCap *cap, Ibvd__NewCq *cq,
		       uint32_t pd)
{
	cap->max_send_wr = cap->max_recv_wr = 4;
	cap->max_send_sge = cap->max_recv_sge = 1;
	cq->cqe = 4;
	cq->channel = true;
	req->pd = pd;
	req->qp_type = IBV_QPT_RC;
	req->cap = cap;
	req->new_send_cq = cq;
	req->new_recv_cq = cq;
}

/* A bundle refused with EINVAL, and no daemon fd (a channel) left behind. */
static void bundle_refused(int ctx, const char *pid, Ibvd__CreateQp *req,
			   const char *what)
{
	int before = settled_fds(pid, -1), after;

	if (refused(ctx, IBVD_MSG_CREATE_QP, &req->base, EINVAL, what) < 0)
		return;
	after = settled_fds(pid, before);
	if (after != before)
		bad("%s: the daemon has %d fds, %d before", what, after, before);
	else
		say("%s: EINVAL, nothing left", what);
}

static void cmqp_bundles(int ctx, const char *pid, uint32_t pd,
			 const Ibvd__CmOpenReply *open, uint32_t unbound)
{
	Ibvd__CreateQp req = IBVD__CREATE_QP__INIT;
	Ibvd__QpCap cap = IBVD__QP_CAP__INIT;
	Ibvd__NewCq cq = IBVD__NEW_CQ__INIT;
	Ibvd__CmQpRef ref = IBVD__CM_QP_REF__INIT;
	uint8_t zeros[16] = { 0 };

	bundle_req(&req, &cap, &cq, pd);
	req.send_cq = 1;
	bundle_refused(ctx, pid, &req, "a send CQ named and asked for");
	req.send_cq = 0;
	req.qp_type = IBV_QPT_XRC_SEND;
	req.new_recv_cq = NULL;
	bundle_refused(ctx, pid, &req, "CQs asked for an XRC QP");
	bundle_req(&req, &cap, &cq, pd);
	ref.token.data = zeros;
	ref.token.len = sizeof(zeros);
	ref.id = unbound;
	req.cm = &ref;
	bundle_refused(ctx, pid, &req, "a CM id under a wrong token");
	ref.token = open->token;
	ref.id = unbound + 1000;
	bundle_refused(ctx, pid, &req, "a CM id that does not exist");
	ref.id = unbound;
	bundle_refused(ctx, pid, &req, "a CM id on no device");
}

/*
 * L listens on cm, A connects to it from the same session: the passive
 * id (returned) has a request to accept; *active is A.
 */
static uint32_t cmqp_request(int cm, int evfd, uint32_t *active)
{
	struct sockaddr_in dst = { .sin_family = AF_INET };
	Ibvd__CmConnParam param = IBVD__CM_CONN_PARAM__INIT;
	Ibvd__CmConnect conn = IBVD__CM_CONNECT__INIT;
	Ibvd__CmListen listen = IBVD__CM_LISTEN__INIT;
	Ibvd__CmAddr addr = IBVD__CM_ADDR__INIT;
	uint32_t l = cm_new_id(cm), a = cm_new_id(cm);
	uint16_t port;

	port = l ? cm_bind(cm, l, 0) : 0;
	listen.id = l;
	listen.backlog = 4;
	if (!port || !a || call_ok(cm, IBVD_MSG_CM_LISTEN, &listen.base, NULL, 0,
				   "CM_LISTEN") < 0)
		return 0;
	dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	dst.sin_port = htons(port);
	addr.id = a;
	addr.dst.data = (uint8_t *)&dst;
	addr.dst.len = sizeof(dst);
	addr.timeout_ms = 1000;
	if (call_ok(cm, IBVD_MSG_CM_RESOLVE_ADDR, &addr.base, NULL, 0,
		    "CM_RESOLVE_ADDR") < 0 ||
	    !cm_event(evfd, RDMA_CM_EVENT_ADDR_RESOLVED, "ADDR_RESOLVED") ||
	    call_ok(cm, IBVD_MSG_CM_RESOLVE_ROUTE, &addr.base, NULL, 0,
		    "CM_RESOLVE_ROUTE") < 0 ||
	    !cm_event(evfd, RDMA_CM_EVENT_ROUTE_RESOLVED, "ROUTE_RESOLVED"))
		return 0;
	param.qp_num = 0x1234;
	param.retry_count = 7;
	conn.id = a;
	conn.param = &param;
	if (call_ok(cm, IBVD_MSG_CM_CONNECT, &conn.base, NULL, 0, "CM_CONNECT") < 0)
		return 0;
	*active = a;
	return cm_event(evfd, RDMA_CM_EVENT_CONNECT_REQUEST, "CONNECT_REQUEST");
}

/*
 * Moves of a QP the ids did not make (CM_ACCEPT, CM_ESTABLISH and
 * CM_DISCONNECT) are refused; the ids go on without.
 */
static void cmqp_moves(int cm, int evfd)
{
	Ibvd__CmConnParam param = IBVD__CM_CONN_PARAM__INIT;
	Ibvd__CmEstablish est = IBVD__CM_ESTABLISH__INIT;
	Ibvd__CmDisconnect dis = IBVD__CM_DISCONNECT__INIT;
	Ibvd__CmConnect acc = IBVD__CM_CONNECT__INIT;
	uint32_t a = 0, p = cmqp_request(cm, evfd, &a);

	if (!p)
		return;
	param.qp_num = 0x5678;
	acc.id = p;
	acc.param = &param;
	acc.move_qp = true;
	if (refused(cm, IBVD_MSG_CM_ACCEPT, &acc.base, EINVAL,
		    "CM_ACCEPT moving a QP the id did not make") == 0)
		say("CM_ACCEPT moving a QP the id did not make: EINVAL");
	acc.move_qp = false;
	if (call_ok(cm, IBVD_MSG_CM_ACCEPT, &acc.base, NULL, 0,
		    "CM_ACCEPT after the refused one") < 0 ||
	    !cm_event(evfd, 0x100, "CONNECT_REPLY"))
		return;
	est.id = a;
	est.move_qp = true;
	if (refused(cm, IBVD_MSG_CM_ESTABLISH, &est.base, EINVAL,
		    "CM_ESTABLISH moving a QP the id did not make") == 0)
		say("CM_ESTABLISH moving a QP the id did not make: EINVAL");
	est.move_qp = false;
	if (call_ok(cm, IBVD_MSG_CM_ESTABLISH, &est.base, NULL, 0,
		    "CM_ESTABLISH after the refused one") < 0 ||
	    !cm_event(evfd, RDMA_CM_EVENT_ESTABLISHED, "ESTABLISHED"))
		return;
	dis.id = a;
	dis.move_qp = true;
	if (refused(cm, IBVD_MSG_CM_DISCONNECT, &dis.base, EINVAL,
		    "CM_DISCONNECT moving a QP the id did not make") == 0)
		say("CM_DISCONNECT moving a QP the id did not make: EINVAL");
	dis.move_qp = false;
	if (call_ok(cm, IBVD_MSG_CM_DISCONNECT, &dis.base, NULL, 0,
		    "CM_DISCONNECT after the refused one") == 0 &&
	    cm_event(evfd, RDMA_CM_EVENT_DISCONNECTED, "DISCONNECTED"))
		say("the ids accepted, established and disconnected after the refusals");
}

/* A good bundle: the QP, its CQs, two channel fds and the INIT attributes. */
static void cmqp_good(int ctx, int cm, uint32_t pd, const Ibvd__CmOpenReply *open)
{
	Ibvd__CreateQp req = IBVD__CREATE_QP__INIT;
	Ibvd__QpCap cap = IBVD__QP_CAP__INIT;
	Ibvd__NewCq cq = IBVD__NEW_CQ__INIT;
	Ibvd__CmQpRef ref = IBVD__CM_QP_REF__INIT;
	Ibvd__CreateQpReply *r;
	uint32_t id = cm_new_id(cm);

	if (!id || !cm_bind(cm, id, 0))
		return;
	bundle_req(&req, &cap, &cq, pd);
	ref.token = open->token;
	ref.id = id;
	req.cm = &ref;
	r = call_unpack(ctx, IBVD_MSG_CREATE_QP, &req.base,
			&ibvd__create_qp_reply__descriptor, "a good bundle");
	if (!r)
		return;
	if (rep.nfds != 2 || !r->new_send_cq || !r->new_recv_cq ||
	    !r->new_send_cq->channel || !r->cm_init || !r->cm_init->attr ||
	    r->cm_init->attr->qp_state != IBV_QPS_INIT)
		bad("a good bundle: %u fds, CQs %p %p, INIT %p", rep.nfds,
		    (void *)r->new_send_cq, (void *)r->new_recv_cq,
		    (void *)r->cm_init);
	else
		say("a good bundle: QP, two CQs, two channels, INIT");
	ibvd__create_qp_reply__free_unpacked(r, NULL);
}

/*
 * A process of another uid (1001) that learned this CM session's token
 * names one of its bound ids in CREATE_QP: refused, as a migration would
 * be (the token alone does not make the id its own).
 */
static void cmqp_other_uid(int cm, const Ibvd__CmOpenReply *open)
{
	Ibvd__CreateQp req = IBVD__CREATE_QP__INIT;
	Ibvd__QpCap cap = IBVD__QP_CAP__INIT;
	Ibvd__NewCq cq = IBVD__NEW_CQ__INIT;
	Ibvd__CmQpRef ref = IBVD__CM_QP_REF__INIT;
	uint32_t id = cm_new_id(cm);
	Ibvd__Handle *pd;
	int status, ctx;
	pid_t child;

	if (!id || !cm_bind(cm, id, 0))
		return;
	child = fork();
	if (child == 0) {
		if (setgroups(0, NULL) < 0 || setgid(1001) < 0 || setuid(1001) < 0)
			_exit(3);
		ctx = conn_open();
		if (ctx < 0 || open_device(ctx) < 0)
			_exit(4);
		pd = call_unpack(ctx, IBVD_MSG_ALLOC_PD, NULL,
				 &ibvd__handle__descriptor, "ALLOC_PD as 1001");
		if (!pd)
			_exit(5);
		bundle_req(&req, &cap, &cq, pd->handle);
		ref.token = open->token;
		ref.id = id;
		req.cm = &ref;
		_exit(refused(ctx, IBVD_MSG_CREATE_QP, &req.base, EINVAL,
			      "another uid's CM id, by its token") < 0 ? 1 : 0);
	}
	if (child < 0 || waitpid(child, &status, 0) != child ||
	    !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		bad("another uid's CM id, by its token: not refused (child status %#x)",
		    child < 0 ? -1 : status);
	else
		say("another uid's CM id, by its token: EINVAL");
}

/* CM_OPEN on cm: the reply (*open, NULL on failure) and its event socket. */
static int cm_session(int cm, Ibvd__CmOpenReply **open)
{
	keep_fd = true;
	*open = call_unpack(cm, IBVD_MSG_CM_OPEN, NULL,
			    &ibvd__cm_open_reply__descriptor, "CM_OPEN");
	keep_fd = false;
	return *open ? rep.fd : -1;
}

/* Frame h (with fds) on a CM session's event socket closes the session. */
static void cm_closed_by(int cm, int evfd, const struct ibvd_frame_hdr *h,
			 const int *fds, unsigned int nfds, const char *what)
{
	int r;

	if (send_hdr(evfd, h, NULL, 0, fds, nfds, 0) < 0) {
		bad("%s: not sent", what);
		return;
	}
	r = recv_frame(cm, TIMEOUT_MS);
	if (r != 0)
		bad("%s on the event socket: the CM session is still open (%d)",
		    what, r);
	else
		say("%s on the event socket: the CM session closed", what);
}

/*
 * The CM event socket takes CM_TAKEN frames only: one naming no id of the
 * session is ignored; any other frame there closes the CM session.
 */
static void cm_event_socket_input(int cm, int evfd)
{
	struct ibvd_frame_hdr h = good_hdr(IBVD_MSG_CM_TAKEN, 0x7fffffffu, 0);

	if (send_hdr(evfd, &h, NULL, 0, NULL, 0, 0) < 0) {
		bad("CM_TAKEN on the event socket: not sent: %s", strerror(errno));
		return;
	}
	if (!cm_new_id(cm)) {
		bad("CM_TAKEN naming no id: the session stopped answering");
		return;
	}
	say("CM_TAKEN naming no id: ignored, the session answers");
	h = good_hdr(IBVD_MSG_CM_EVENT, 1, 0);
	cm_closed_by(cm, evfd, &h, NULL, 0, "a CM_EVENT frame");
}

/* A CM_TAKEN frame that brings an fd along: the CM session closes too. */
static void cm_event_socket_fd(void)
{
	struct ibvd_frame_hdr h = good_hdr(IBVD_MSG_CM_TAKEN, 1, 0);
	Ibvd__CmOpenReply *reply;
	int cm = conn_open(), evfd;
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);

	if (cm < 0 || devnull < 0)
		return;
	evfd = cm_session(cm, &reply);
	if (!reply || evfd < 0)
		return;
	cm_closed_by(cm, evfd, &h, &devnull, 1, "CM_TAKEN with an fd");
	ibvd__cm_open_reply__free_unpacked(reply, NULL);
	close(devnull);
	close(evfd);
	close(cm);
}

/*
 * An app that exits with a CM event unread closes its end of the event
 * socket with data in it, so the daemon's read of that socket fails with
 * ECONNRESET: a close like any other, not a misbehaving client.
 */
static void case_cmreset(void)
{
	struct sockaddr_in dst = { .sin_family = AF_INET };
	Ibvd__CmAddr addr = IBVD__CM_ADDR__INIT;
	Ibvd__CmOpenReply *open;
	int cm = conn_open(), evfd, r;
	struct pollfd pfd;
	uint32_t id;

	if (cm < 0)
		return;
	evfd = cm_session(cm, &open);
	id = open ? cm_new_id(cm) : 0;
	if (!open || evfd < 0 || !id)
		return;
	dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	addr.id = id;
	addr.dst.data = (uint8_t *)&dst;
	addr.dst.len = sizeof(dst);
	addr.timeout_ms = 1000;
	if (call_ok(cm, IBVD_MSG_CM_RESOLVE_ADDR, &addr.base, NULL, 0,
		    "CM_RESOLVE_ADDR") < 0)
		return;
	pfd = (struct pollfd){ .fd = evfd, .events = POLLIN };
	if (poll(&pfd, 1, TIMEOUT_MS) != 1) {
		bad("CM_RESOLVE_ADDR: no event came");
		return;
	}
	close(evfd);		/* the event unread */
	r = recv_frame(cm, TIMEOUT_MS);
	if (r != 0)
		bad("event socket closed with an event unread: the CM session is still open (%d)",
		    r);
	else
		say("event socket closed with an event unread: the CM session closed");
	ibvd__cm_open_reply__free_unpacked(open, NULL);
	close(cm);
}

static void case_cmqp(const char *pid)
{
	Ibvd__CmOpenReply *open;
	Ibvd__Handle *pd;
	int ctx = conn_open(), cm = conn_open(), evfd;
	uint32_t unbound;

	if (!pid) {
		bad("cmqp needs the daemon's pid");
		return;
	}
	if (ctx < 0 || cm < 0 || open_device(ctx) < 0)
		return;
	pd = call_unpack(ctx, IBVD_MSG_ALLOC_PD, NULL, &ibvd__handle__descriptor,
			 "ALLOC_PD");
	evfd = cm_session(cm, &open);
	unbound = open ? cm_new_id(cm) : 0;
	if (!pd || !open || evfd < 0 || !unbound)
		return;
	cmqp_bundles(ctx, pid, pd->handle, open, unbound);
	cmqp_good(ctx, cm, pd->handle, open);
	cmqp_other_uid(cm, open);
	cmqp_moves(cm, evfd);
	check_usable(ctx, "the refused bundles");
	cm_event_socket_input(cm, evfd);
	cm_event_socket_fd();
	ibvd__cm_open_reply__free_unpacked(open, NULL);
	ibvd__handle__free_unpacked(pd, NULL);
	close(evfd);
	close(cm);
	close(ctx);
}

/* ---- direct ---------------------------------------------------------------- */

/* A QP of type on pd with two CQs of its own: its handle and number, or 0. */
static uint32_t direct_qp(int ctx, uint32_t pd, uint32_t type, uint32_t *qpn)
{
	Ibvd__CreateQp req = IBVD__CREATE_QP__INIT;
	Ibvd__QpCap cap = IBVD__QP_CAP__INIT;
	Ibvd__NewCq cq = IBVD__NEW_CQ__INIT;
	Ibvd__CreateQpReply *r;
	uint32_t handle;

	bundle_req(&req, &cap, &cq, pd);
	cq.channel = false;
	req.qp_type = type;
	r = call_unpack(ctx, IBVD_MSG_CREATE_QP, &req.base,
			&ibvd__create_qp_reply__descriptor, "CREATE_QP");
	if (!r)
		return 0;
	handle = r->handle;
	*qpn = r->qp_num;
	ibvd__create_qp_reply__free_unpacked(r, NULL);
	return handle;
}

/* A UD QP through INIT and RTR to RTS: 0, or -1 (reported). */
static int direct_ud_rts(int ctx, uint32_t qp)
{
	static const uint32_t states[] = { IBV_QPS_INIT, IBV_QPS_RTR,
					   IBV_QPS_RTS };
	Ibvd__ModifyQp m = IBVD__MODIFY_QP__INIT;
	Ibvd__QpAttr a = IBVD__QP_ATTR__INIT;
	unsigned int i;

	m.handle = qp;
	m.attr = &a;
	a.port_num = 1;
	a.qkey = 0x11111111;
	for (i = 0; i < 3; i++) {
		a.qp_state = states[i];
		m.attr_mask = IBV_QP_STATE;
		if (states[i] == IBV_QPS_INIT)
			m.attr_mask |= IBV_QP_PORT | IBV_QP_PKEY_INDEX |
				       IBV_QP_QKEY;
		if (states[i] == IBV_QPS_RTS)
			m.attr_mask |= IBV_QP_SQ_PSN;
		if (call_ok(ctx, IBVD_MSG_MODIFY_QP, &m.base, NULL, 0,
			    "MODIFY_QP") < 0)
			return -1;
	}
	return 0;
}

static void direct_refused(int ctx, uint16_t type, uint32_t handle,
			   uint32_t remote_qpn, int want, const char *what)
{
	Ibvd__QpDirectUd ud = IBVD__QP_DIRECT_UD__INIT;
	Ibvd__Handle h = IBVD__HANDLE__INIT;
	const ProtobufCMessage *msg = &h.base;

	h.handle = handle;
	ud.handle = handle;
	ud.remote_qpn = remote_qpn;
	if (type == IBVD_MSG_QP_DIRECT_UD)
		msg = &ud.base;
	if (refused(ctx, type, msg, want, what) == 0)
		say("%s: %s", what, strerror(want));
}

/*
 * The direct transport's requests on QPs they do not fit; a UD pair
 * whose peer is still there cannot be left; once the peer is destroyed
 * it can, once.
 */
static void case_direct(void)
{
	uint32_t rc, a, b, rcn, an, bn;
	Ibvd__QpDirectUd ud = IBVD__QP_DIRECT_UD__INIT;
	Ibvd__Handle h = IBVD__HANDLE__INIT;
	Ibvd__Handle *pd;
	int ctx = conn_open();

	if (ctx < 0 || open_device(ctx) < 0)
		return;
	pd = call_unpack(ctx, IBVD_MSG_ALLOC_PD, NULL, &ibvd__handle__descriptor,
			 "ALLOC_PD");
	if (!pd)
		return;
	rc = direct_qp(ctx, pd->handle, IBV_QPT_RC, &rcn);
	a = direct_qp(ctx, pd->handle, IBV_QPT_UD, &an);
	b = direct_qp(ctx, pd->handle, IBV_QPT_UD, &bn);
	ibvd__handle__free_unpacked(pd, NULL);
	if (!rc || !a || !b)
		return;
	direct_refused(ctx, IBVD_MSG_QP_DIRECT_LEAVE, 999999, 0, EINVAL,
		       "QP_DIRECT_LEAVE of no QP");
	direct_refused(ctx, IBVD_MSG_QP_DIRECT_LEAVE, rc, 0, EINVAL,
		       "QP_DIRECT_LEAVE of an RC QP");
	direct_refused(ctx, IBVD_MSG_QP_DIRECT_LEAVE, a, 0, ENOENT,
		       "QP_DIRECT_LEAVE of a UD QP without rings");
	direct_refused(ctx, IBVD_MSG_QP_DIRECT, a, 0, ENOENT,
		       "QP_DIRECT of a UD QP without rings");
	direct_refused(ctx, IBVD_MSG_QP_DIRECT_UD, rc, bn, EINVAL,
		       "QP_DIRECT_UD of an RC QP");
	direct_refused(ctx, IBVD_MSG_QP_DIRECT_UD, a, bn, ENOENT,
		       "QP_DIRECT_UD of a UD QP in RESET");
	if (direct_ud_rts(ctx, a) < 0 || direct_ud_rts(ctx, b) < 0)
		return;
	direct_refused(ctx, IBVD_MSG_QP_DIRECT_UD, a, rcn, ENOENT,
		       "QP_DIRECT_UD to an RC QP");
	direct_refused(ctx, IBVD_MSG_QP_DIRECT_UD, a, an, ENOENT,
		       "QP_DIRECT_UD to itself");
	ud.handle = a;
	ud.remote_qpn = bn;
	if (call_ok(ctx, IBVD_MSG_QP_DIRECT_UD, &ud.base, NULL, 0,
		    "QP_DIRECT_UD of two UD QPs in RTS") < 0)
		return;
	direct_refused(ctx, IBVD_MSG_QP_DIRECT_UD, a, bn, EBUSY,
		       "QP_DIRECT_UD of a paired QP");
	direct_refused(ctx, IBVD_MSG_QP_DIRECT_LEAVE, a, 0, EBUSY,
		       "QP_DIRECT_LEAVE while the peer is there");
	h.handle = b;
	if (call_ok(ctx, IBVD_MSG_DESTROY_QP, &h.base, NULL, 0,
		    "DESTROY_QP of the peer") < 0)
		return;
	h.handle = a;
	if (call_ok(ctx, IBVD_MSG_QP_DIRECT_LEAVE, &h.base, NULL, 0,
		    "QP_DIRECT_LEAVE once the peer is gone") == 0)
		say("QP_DIRECT_LEAVE once the peer is gone: left");
	direct_refused(ctx, IBVD_MSG_QP_DIRECT_LEAVE, a, 0, ENOENT,
		       "QP_DIRECT_LEAVE again");
	check_usable(ctx, "the refused direct requests");
	close(ctx);
}

/* ---- dm ------------------------------------------------------------------ */

/*
 * ALLOC_DM or IMPORT_DM and its reply: the handle (0 reported) and, in
 * *ino, the inode of the one fd that came, which must be a sealed memfd
 * of whole pages.
 */
static uint32_t dm_call(int ctx, uint16_t type, const ProtobufCMessage *msg,
			ino_t *ino, const char *what)
{
	const int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
	Ibvd__DmReply *r;
	uint32_t handle = 0;
	struct stat st;

	keep_fd = true;
	r = call_unpack(ctx, type, msg, &ibvd__dm_reply__descriptor, what);
	keep_fd = false;
	if (!r)
		goto out;
	if (rep.nfds != 1 || fstat(rep.fd, &st) < 0)
		bad("%s: %u fds", what, rep.nfds);
	else if ((fcntl(rep.fd, F_GET_SEALS) & seals) != seals ||
		 (uint64_t)st.st_size != ((r->length + 4095) & ~4095ull))
		bad("%s: seals %#x, %lld bytes for %llu", what,
		    (unsigned int)fcntl(rep.fd, F_GET_SEALS), (long long)st.st_size,
		    (unsigned long long)r->length);
	else {
		handle = r->handle;
		*ino = st.st_ino;
	}
	ibvd__dm_reply__free_unpacked(r, NULL);
out:
	if (rep.fd >= 0)
		close(rep.fd);
	return handle;
}

static void case_dm(void)
{
	Ibvd__AllocDm a = IBVD__ALLOC_DM__INIT;
	Ibvd__Handle h = IBVD__HANDLE__INIT;
	ino_t ino = 0, ino2 = 0;
	uint32_t handle;
	int ctx = conn_open(), n;

	if (ctx < 0 || open_device(ctx) < 0)
		return;
	a.length = 0;
	if (refused(ctx, IBVD_MSG_ALLOC_DM, &a.base, EINVAL, "ALLOC_DM of 0 bytes") == 0)
		say("ALLOC_DM of 0 bytes: EINVAL");
	a.length = 256 * 1024 + 1;
	if (refused(ctx, IBVD_MSG_ALLOC_DM, &a.base, ENOMEM,
		    "ALLOC_DM above max_dm_size") == 0)
		say("ALLOC_DM above max_dm_size: ENOMEM");
	h.handle = 12345;
	if (refused(ctx, IBVD_MSG_FREE_DM, &h.base, EINVAL, "FREE_DM of nothing") == 0 &&
	    refused(ctx, IBVD_MSG_IMPORT_DM, &h.base, EINVAL, "IMPORT_DM of nothing") == 0)
		say("FREE_DM and IMPORT_DM of no allocation: EINVAL");

	a.length = 100;
	handle = dm_call(ctx, IBVD_MSG_ALLOC_DM, &a.base, &ino, "ALLOC_DM of 100 bytes");
	h.handle = handle;
	if (!handle ||
	    !dm_call(ctx, IBVD_MSG_IMPORT_DM, &h.base, &ino2, "IMPORT_DM"))
		return;
	if (ino != ino2)
		bad("IMPORT_DM sent another file (inode %lu, not %lu)",
		    (unsigned long)ino2, (unsigned long)ino);
	else
		say("ALLOC_DM: a sealed memfd of one page; IMPORT_DM: the same file");

	/* the context's 32 allocations (this one included), then no more */
	for (n = 1; n < 40; n++) {
		uint32_t id = next_id++;

		if (send_msg(ctx, IBVD_MSG_ALLOC_DM, id, &a.base, NULL, 0, 0) < 0 ||
		    recv_frame(ctx, TIMEOUT_MS) <= 0 || rep.hdr.req_id != id)
			break;
		if (rep.hdr.type != (IBVD_MSG_ALLOC_DM | IBVD_REPLY))
			break;
	}
	if (n != 32 || rep.hdr.type != IBVD_MSG_ERROR)
		bad("ALLOC_DM refused at %d allocations (type %#x), not 32", n,
		    rep.hdr.type);
	else
		say("ALLOC_DM: 32 allocations, then an error");

	if (call_ok(ctx, IBVD_MSG_FREE_DM, &h.base, NULL, 0, "FREE_DM") < 0 ||
	    refused(ctx, IBVD_MSG_IMPORT_DM, &h.base, EINVAL, "IMPORT_DM once freed") < 0 ||
	    refused(ctx, IBVD_MSG_FREE_DM, &h.base, EINVAL, "FREE_DM again") < 0)
		return;
	say("FREE_DM, then IMPORT_DM or FREE_DM of it: EINVAL");
	check_usable(ctx, "the device memory requests");
	close(ctx);
}

/* Lines of the daemon's /proc/PID/maps naming inode ino. */
static int maps_with_inode(const char *pid, ino_t ino)
{
	char path[64], line[512];
	unsigned long long i;
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%s/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%*s %*s %*s %*s %llu", &i) == 1 && i == ino)
			n++;
	fclose(f);
	return n;
}

static ino_t inode_of(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

/* A memfd of len bytes, and an fd of it reopened with flags. */
static int memfd_reopened(size_t len, int flags, int *memfd)
{
	char path[64];

	*memfd = memfd_create("badclient", MFD_CLOEXEC);
	if (*memfd < 0 || ftruncate(*memfd, (off_t)len) < 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", *memfd);
	return open(path, flags | O_CLOEXEC);
}

/*
 * Register buf (mapped and writable here, whatever the fd says) with fd
 * as its shared backing: the daemon must accept it and map the file
 * exactly when want_mapped.
 */
static void reg_shared(int conn, const char *pid, uint32_t pd, void *buf,
		       uint64_t len, int fd, bool want_mapped, const char *what)
{
	Ibvd__RegMr r = IBVD__REG_MR__INIT;
	int n;

	r.pd = pd;
	r.addr = (uintptr_t)buf;
	r.length = len;
	r.iova = (uintptr_t)buf;
	r.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	if (call_ok(conn, IBVD_MSG_REG_MR_SHARED, &r.base, &fd, 1, what) < 0)
		return;
	n = maps_with_inode(pid, inode_of(fd));
	if (n != (want_mapped ? 1 : 0))
		bad("%s: the daemon maps the file %d times, want %d", what, n,
		    want_mapped ? 1 : 0);
	else
		say("%s: registered, %s", what, want_mapped ? "mapped" : "not mapped");
}

/*
 * This process's memory attached to conn's context (mem: the fds sent,
 * the caller's to close) and a PD allocated: its handle, or -1 (reported).
 */
static int64_t attach_and_pd(int conn, int mem[2])
{
	Ibvd__AttachMemory am = IBVD__ATTACH_MEMORY__INIT;
	Ibvd__Handle *h;
	uint32_t pd;

	mem[0] = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	mem[1] = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	am.pid = (uint32_t)getpid();
	if (call_ok(conn, IBVD_MSG_ATTACH_MEMORY, &am.base, mem, 2, "ATTACH_MEMORY") < 0 ||
	    call_ok(conn, IBVD_MSG_ALLOC_PD, NULL, NULL, 0, "ALLOC_PD") < 0)
		return -1;
	h = ibvd__handle__unpack(NULL, rep.len, rep.payload);
	if (!h) {
		bad("ALLOC_PD: bad reply");
		return -1;
	}
	pd = h->handle;
	ibvd__handle__free_unpacked(h, NULL);
	return pd;
}

/*
 * For a case that looks at the daemon's /proc/PID: a connection with a
 * device open, this process's memory attached (mem, as attach_and_pd) and
 * a PD, its handle in *pd (-1 if none); the connection, or -1 (reported).
 */
static int attached_conn(const char *pid, int mem[2], int64_t *pd)
{
	int conn;

	if (!pid) {
		bad("needs the daemon's pid");
		return -1;
	}
	conn = conn_open();
	if (conn < 0 || open_device(conn) < 0)
		return -1;
	*pd = attach_and_pd(conn, mem);
	return conn;
}

static void case_sharedmr(const char *pid)
{
	static uint8_t buf[2 * 4096] __attribute__((aligned(4096)));
	Ibvd__RegMr r = IBVD__REG_MR__INIT;
	int conn, mem[2], p[2], memfd, fd;
	int64_t pd64;
	uint32_t pd;

	conn = attached_conn(pid, mem, &pd64);
	if (conn < 0)
		return;
	if (pd64 < 0)
		goto out;
	pd = (uint32_t)pd64;
	memset(buf, 1, sizeof(buf));

	r.pd = pd;
	r.addr = (uintptr_t)buf;
	r.length = 4096;
	r.iova = (uintptr_t)buf;
	r.access = IBV_ACCESS_LOCAL_WRITE;
	if (send_msg(conn, IBVD_MSG_REG_MR_SHARED, next_id, &r.base, NULL, 0, 0) == 0)
		expect_error(conn, next_id++, EBADF, "REG_MR_SHARED without its fd");

	if (pipe2(p, O_CLOEXEC) == 0) {
		reg_shared(conn, pid, pd, buf, 4096, p[0], false,
			   "REG_MR_SHARED with a pipe");
		close(p[0]);
		close(p[1]);
	}
	fd = memfd_reopened(4096, O_RDWR, &memfd);
	reg_shared(conn, pid, pd, buf, 8192, fd, false,
		   "REG_MR_SHARED of 8 KiB on a 4 KiB file");
	close(fd);
	close(memfd);
	fd = memfd_reopened(8192, O_RDONLY, &memfd);
	reg_shared(conn, pid, pd, buf, 8192, fd, false,
		   "REG_MR_SHARED, writable, with a read-only fd");
	close(fd);
	close(memfd);
	fd = memfd_reopened(8192, O_RDWR, &memfd);
	reg_shared(conn, pid, pd, buf, 8192, fd, true,
		   "REG_MR_SHARED with a good fd");
	close(fd);
	close(memfd);
	check_usable(conn, "REG_MR_SHARED with bad fds");
out:
	close(mem[0]);
	close(mem[1]);
	close(conn);
}

/* ---- mappedcap ----------------------------------------------------------- */

/* The daemon's cap on one uid's MRs with a mapping (verbs/mr/map.c). */
#define MAPPED_CAP	1024
#define MAPPED_TRIES	(MAPPED_CAP + 16)

/* REG_MR_SHARED of page i's first byte, with remote access: its handle, or 0. */
static uint32_t reg_page(int conn, uint32_t pd, uint8_t *buf, uint32_t i,
			 int memfd)
{
	Ibvd__RegMr r = IBVD__REG_MR__INIT;
	Ibvd__RegMrReply *rep_mr;
	uint32_t handle;

	r.pd = pd;
	r.addr = (uintptr_t)(buf + (size_t)i * 4096);
	r.length = 1;
	r.iova = r.addr;
	r.file_offset = (uint64_t)i * 4096;
	r.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	if (call_ok(conn, IBVD_MSG_REG_MR_SHARED, &r.base, &memfd, 1,
		    "REG_MR_SHARED of a page") < 0)
		return 0;
	rep_mr = ibvd__reg_mr_reply__unpack(NULL, rep.len, rep.payload);
	if (!rep_mr) {
		bad("REG_MR_SHARED: bad reply");
		return 0;
	}
	handle = rep_mr->handle;
	ibvd__reg_mr_reply__free_unpacked(rep_mr, NULL);
	return handle;
}

/*
 * 1,040 one-byte MRs with remote access, each on a page of its own of one
 * memfd: the daemon maps 1,024 (each keeps its file, an fd of the
 * daemon's), the rest take the /proc/PID/mem tier and are registered all
 * the same; one of the mapped deregistered, the next is mapped in its
 * place.  Needs DAEMON_PID.
 */
static void case_mappedcap(const char *pid)
{
	uint32_t handle[MAPPED_TRIES + 1], i;
	Ibvd__Handle h = IBVD__HANDLE__INIT;
	int conn, mem[2] = { -1, -1 }, memfd, before, after;
	size_t len = (size_t)(MAPPED_TRIES + 1) * 4096;
	uint8_t *buf = MAP_FAILED;
	int64_t pd64;

	conn = attached_conn(pid, mem, &pd64);
	if (conn < 0)
		return;
	memfd = memfd_create("badclient-mappedcap", MFD_CLOEXEC);
	if (pd64 < 0 || memfd < 0 || ftruncate(memfd, (off_t)len) < 0 ||
	    (buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd,
			0)) == MAP_FAILED) {
		bad("mappedcap: setup: %s", strerror(errno));
		goto out;
	}
	before = settled_fds(pid, -1);
	for (i = 0; i < MAPPED_TRIES; i++)
		if (!(handle[i] = reg_page(conn, (uint32_t)pd64, buf, i, memfd)))
			goto out;
	after = settled_fds(pid, -1);
	if (after - before != MAPPED_CAP)
		bad("%u MRs with remote access on shared memory: the daemon keeps %d more fds, want %d",
		    MAPPED_TRIES, after - before, MAPPED_CAP);
	h.handle = handle[0];
	if (call_ok(conn, IBVD_MSG_DEREG_MR, &h.base, NULL, 0, "DEREG_MR") < 0 ||
	    !(handle[MAPPED_TRIES] = reg_page(conn, (uint32_t)pd64, buf,
					      MAPPED_TRIES, memfd)))
		goto out;
	if (settled_fds(pid, -1) != after)
		bad("one mapped MR for another: the daemon's fds went from %d to %d",
		    after, settled_fds(pid, -1));
	else
		say("mappedcap: %d of %u MRs mapped, %d mappings of the file",
		    after - before, MAPPED_TRIES,
		    maps_with_inode(pid, inode_of(memfd)));
	check_usable(conn, "as many MRs as may be mapped");
out:
	if (buf != MAP_FAILED)
		munmap(buf, len);
	if (memfd >= 0)
		close(memfd);
	close(mem[0]);
	close(mem[1]);
	close(conn);
}

static void case_fds(const char *pid)
{
	int fd, before, after, i, r;

	if (!pid) {
		bad("needs the daemon's pid");
		return;
	}
	fd = conn_open();
	if (fd < 0)
		return;
	if (list_devices(fd, next_id++, 0, "before sending fds") < 0)
		goto out;
	before = settled_fds(pid, -1);
	if (before < 0)
		goto out;
	for (i = 0; i < 100; i++) {
		int p[2], pass[2], hup;
		struct pollfd pfd;

		/* the write end of a pipe, plus /dev/null */
		if (pipe2(p, O_CLOEXEC) < 0) {
			bad("pipe2: %s", strerror(errno));
			goto out;
		}
		pass[0] = p[1];
		pass[1] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		r = send_msg(fd, IBVD_MSG_LIST_DEVICES, next_id, NULL, pass, 2, 0);
		close(p[1]);
		close(pass[1]);
		if (r < 0) {
			bad("request %d with 2 fds: send: %s", i, strerror(-r));
			close(p[0]);
			goto out;
		}
		quiet = i > 0;
		r = expect_error(fd, next_id++, 0, "LIST_DEVICES carrying 2 fds");
		quiet = 0;
		if (r < 0) {
			close(p[0]);
			goto out;
		}
		/* once the daemon closed its copy of the write end: EOF */
		pfd.fd = p[0];
		pfd.events = POLLIN;
		hup = poll(&pfd, 1, 2000);
		close(p[0]);
		if (hup != 1 || !(pfd.revents & POLLHUP)) {
			bad("request %d: the daemon still holds the pipe we passed it", i);
			goto out;
		}
	}
	say("100 requests carrying 2 fds each: 100 error replies, every passed pipe closed");
	after = settled_fds(pid, before);
	if (after < 0)
		goto out;
	say("daemon fds: %d before, %d after", before, after);
	if (after > before + 2)
		bad("the daemon's fd count grew from %d to %d", before, after);
	check_usable(fd, "fds on LIST_DEVICES");
out:
	close(fd);
}

/* ATTACH_MEMORY carrying fds[0..n); its reply's errno (0: accepted) or -1. */
static int attach_with(int fd, const int *fds, unsigned int n)
{
	Ibvd__AttachMemory am = IBVD__ATTACH_MEMORY__INIT;
	uint32_t id = next_id++;
	char msg[256];
	int r;

	am.pid = (uint32_t)getpid();
	if (send_msg(fd, IBVD_MSG_ATTACH_MEMORY, id, &am.base, fds, n, 0) < 0) {
		bad("ATTACH_MEMORY: send failed");
		return -1;
	}
	r = recv_frame(fd, TIMEOUT_MS);
	if (r <= 0 || rep.hdr.req_id != id) {
		bad("ATTACH_MEMORY: no reply");
		return -1;
	}
	if (rep.hdr.type == (IBVD_MSG_ATTACH_MEMORY | IBVD_REPLY))
		return 0;
	return rep_errnum(msg, sizeof(msg));
}

static void case_attachfds(void)
{
	static const struct {
		const char *what, *first, *second;
		int flags0, flags1;
		int want;		/* errno; -1: any error */
	} bad_sets[] = {
		{ "mem alone", "/proc/self/mem", NULL, O_RDWR, 0, -1 },
		{ "maps then mem", "/proc/self/maps", "/proc/self/mem", O_RDONLY, O_RDWR, EINVAL },
		{ "mem and /dev/null", "/proc/self/mem", "/dev/null", O_RDWR, O_RDONLY, EINVAL },
		{ "mem and status", "/proc/self/mem", "/proc/self/status", O_RDWR, O_RDONLY, EINVAL },
		{ "read-only mem and maps", "/proc/self/mem", "/proc/self/maps", O_RDONLY, O_RDONLY, EINVAL },
	};
	int fd, fds[2], r;
	unsigned int i, n;

	fd = conn_open();
	if (fd < 0 || open_device(fd) < 0)
		goto out;
	for (i = 0; i < sizeof(bad_sets) / sizeof(bad_sets[0]); i++) {
		n = bad_sets[i].second ? 2 : 1;
		fds[0] = open(bad_sets[i].first, bad_sets[i].flags0 | O_CLOEXEC);
		fds[1] = n > 1 ? open(bad_sets[i].second, bad_sets[i].flags1 | O_CLOEXEC) : -1;
		r = fds[0] < 0 || (n > 1 && fds[1] < 0) ? -1 : attach_with(fd, fds, n);
		close(fds[0]);
		if (n > 1)
			close(fds[1]);
		if (r == 0)
			bad("ATTACH_MEMORY with %s was accepted", bad_sets[i].what);
		else if (r > 0 && bad_sets[i].want > 0 && r != bad_sets[i].want)
			bad("ATTACH_MEMORY with %s: errno %d, expected %d",
			    bad_sets[i].what, r, bad_sets[i].want);
		else if (r > 0)
			say("ATTACH_MEMORY with %s: refused (%s)", bad_sets[i].what,
			    strerror(r));
	}
	fds[0] = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	fds[1] = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	r = attach_with(fd, fds, 2);
	if (r != 0)
		bad("ATTACH_MEMORY with mem and maps: errno %d", r);
	else if ((r = attach_with(fd, fds, 2)) != EBUSY)
		bad("a second ATTACH_MEMORY: errno %d, expected EBUSY", r);
	else
		say("mem and maps accepted, a second attach refused (EBUSY)");
	close(fds[0]);
	close(fds[1]);
	check_usable(fd, "ATTACH_MEMORY with wrong fds");
out:
	if (fd >= 0)
		close(fd);
}

static void case_notopen(void)
{
	Ibvd__QueryPort qp = IBVD__QUERY_PORT__INIT;
	Ibvd__QueryPkey qk = IBVD__QUERY_PKEY__INIT;
	Ibvd__QueryGidTable qg = IBVD__QUERY_GID_TABLE__INIT;
	Ibvd__OpenDevice od = IBVD__OPEN_DEVICE__INIT;
	static const struct {
		uint16_t type;
		const char *what;
	} t[] = {
		{ IBVD_MSG_QUERY_PORT, "QUERY_PORT before OPEN_DEVICE" },
		{ IBVD_MSG_QUERY_DEVICE, "QUERY_DEVICE before OPEN_DEVICE" },
		{ IBVD_MSG_QUERY_GID_TABLE, "QUERY_GID_TABLE before OPEN_DEVICE" },
		{ IBVD_MSG_QUERY_PKEY, "QUERY_PKEY before OPEN_DEVICE" },
		{ IBVD_MSG_OPEN_DEVICE, "OPEN_DEVICE of device 'nosuchdev'" },
		{ IBVD_MSG_OPEN_DEVICE, "OPEN_DEVICE without a name" },
	};
	const ProtobufCMessage *msgs[6];
	int fd = conn_open(), i, r;

	if (fd < 0)
		return;
	qp.port_num = 1;
	qk.port_num = 1;
	qg.port_num = 1;
	msgs[0] = &qp.base;
	msgs[1] = NULL;
	msgs[2] = &qg.base;
	msgs[3] = &qk.base;
	od.name = (char *)"nosuchdev";
	msgs[4] = &od.base;
	msgs[5] = NULL;
	for (i = 0; i < 6; i++) {
		Ibvd__OpenDevice empty = IBVD__OPEN_DEVICE__INIT;

		if (i == 5)
			msgs[5] = &empty.base;
		r = send_msg(fd, t[i].type, next_id, msgs[i], NULL, 0, 0);
		if (r < 0) {
			bad("%s: send: %s", t[i].what, strerror(-r));
			break;
		}
		if (expect_error(fd, next_id++, 0, t[i].what) < 0)
			break;
		check_usable(fd, t[i].what);
	}
	close(fd);
}

static void case_silent(int witness)
{
	int silent = conn_open(), i;

	if (silent < 0)
		return;
	for (i = 0; i < 20 && !failures; i++)
		check_others(witness, "while a connection stays silent");
	if (!failures)
		say("20 rounds on the witness and on fresh connections served meanwhile");
	close(silent);
}

/* If fd was dropped by the daemon and *when is unset, set it (ms since t0). */
static void note_drop(int fd, short revents, long t0, long *when)
{
	if (*when < 0 && (revents & (POLLHUP | POLLIN)) && recv_frame(fd, 0) == 0)
		*when = now_ms() - t0;
}

/* A drop at when (-1: none) came within [min_ms, max_ms]. */
static void check_drop(long when, long min_ms, long max_ms, const char *what)
{
	if (when < 0)
		bad("%s: still open after %ld ms", what, max_ms);
	else if (when < min_ms || when > max_ms)
		bad("%s: dropped after %ld ms, want %ld..%ld ms", what, when,
		    min_ms, max_ms);
	else
		say("%s: dropped after %ld ms", what, when);
}

static void case_idle(int witness, int seconds)
{
	long limit = seconds * 1000L + 3000, step = seconds * 500L;
	long t0, t1, next, silent_drop = -1, spoke_drop = -1;
	int silent = conn_open(), spoke = conn_open(), talker = conn_open();
	int ctx = conn_open();

	if (silent < 0 || spoke < 0 || talker < 0 || ctx < 0)
		goto out;
	t0 = now_ms();
	/* a fresh connection after a request (and an admin one) is no context */
	if (open_device(ctx) < 0 ||
	    list_devices(spoke, next_id++, 0, "the connection that goes silent") < 0)
		goto out;
	t1 = now_ms();
	/* one request every half timeout keeps a connection; watch the others */
	for (next = t1; now_ms() - t1 < limit && !failures; next += step) {
		if (list_devices(talker, next_id++, 0, "the connection that keeps talking") < 0)
			goto out;
		while (now_ms() < next + step) {
			struct pollfd pfd[2] = {
				{ .fd = silent, .events = POLLIN },
				{ .fd = spoke, .events = POLLIN },
			};

			poll(pfd, 2, 10);
			note_drop(silent, pfd[0].revents, t0, &silent_drop);
			note_drop(spoke, pfd[1].revents, t1, &spoke_drop);
		}
	}
	if (failures)
		goto out;
	say("a connection talking every %ld ms is still served after %ld ms",
	    step, now_ms() - t1);
	/* the timer runs from the last frame, not from the connect */
	check_drop(silent_drop, seconds * 1000L - 100, limit, "the silent connection");
	check_drop(spoke_drop, seconds * 1000L - 100, limit,
		   "the connection silent after a request");
	/* the device context (and the witness, another one) sat idle throughout */
	if (list_devices(ctx, next_id++, 0, "the silent device context") >= 0)
		say("a device context silent for %ld ms is still served", now_ms() - t1);
out:
	close(silent);
	close(spoke);
	close(talker);
	close(ctx);
	check_others(witness, "after the idle drops");
}

/*
 * A TCP socket on 127.0.0.1 whose last close() lingers: data it cannot send
 * (its peer never reads, and the peer's window is shut) and SO_LINGER 10 s.
 * Returns it, with *peer (to keep open while it should linger: closing the
 * peer resets the connection and ends the linger), or -1 (reported).
 */
static int lingering_socket(int *peer)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	struct linger lg = { .l_onoff = 1, .l_linger = 10 };
	int small = 4096, l, c = -1, a = -1;
	static char junk[65536];

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)) < 0 ||
	    bind(l, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(l, 1) < 0 ||
	    getsockname(l, (struct sockaddr *)&sin, &len) < 0)
		goto fail;
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c < 0 || setsockopt(c, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)) < 0 ||
	    connect(c, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		goto fail;
	a = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	if (a < 0)
		goto fail;
	close(l);
	l = -1;
	/* fill everything between us and the peer that never reads */
	while (send(c, junk, sizeof(junk), MSG_DONTWAIT | MSG_NOSIGNAL) > 0)
		;
	if (errno != EAGAIN ||
	    setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) < 0)
		goto fail;
	*peer = a;
	return c;
fail:
	bad("lingering TCP socket: %s", strerror(errno));
	if (l >= 0)
		close(l);
	if (c >= 0)
		close(c);
	if (a >= 0)
		close(a);
	return -1;
}

/* The peer of a lingering socket the daemon closed: reset within limit_ms. */
static void expect_reset(int peer, long limit_ms, const char *what)
{
	struct pollfd p = { .fd = peer, .events = POLLIN };
	long t0 = now_ms();
	char c;

	while (now_ms() - t0 < limit_ms) {
		if (poll(&p, 1, 50) > 0 && recv(peer, &c, 1, MSG_DONTWAIT) < 0 &&
		    errno == ECONNRESET) {
			say("%s: its peer was reset after %ld ms", what,
			    now_ms() - t0);
			return;
		}
	}
	bad("%s: its peer not reset within %ld ms (the daemon's close lingered)",
	    what, limit_ms);
}

/*
 * A lingering socket as the fd of a request that takes one and closes it
 * when it fails (OPEN_XRCD: a socket is no domain's file; REG_MR_SHARED:
 * not a regular file): the control thread must not close it itself.
 */
static void linger_in_requests(int witness, int *peers)
{
	static uint8_t buf[4096] __attribute__((aligned(4096)));
	Ibvd__OpenXrcd ox = IBVD__OPEN_XRCD__INIT;
	Ibvd__RegMr r = IBVD__REG_MR__INIT;
	int conn, mem[2] = { -1, -1 }, lfd, ret;
	int64_t pd;

	conn = conn_open();
	if (conn < 0 || open_device(conn) < 0)
		goto out;
	lfd = lingering_socket(&peers[0]);
	if (lfd < 0)
		goto out;
	/* ours closed at once: the daemon's close is the last, as a rule */
	ret = send_msg(conn, IBVD_MSG_OPEN_XRCD, next_id++, &ox.base, &lfd, 1, 0);
	close(lfd);
	if (ret == 0)
		recv_frame(conn, TIMEOUT_MS);	/* its answer matters not */
	check_others_within(witness, 1000, "after OPEN_XRCD with a lingering socket");

	pd = attach_and_pd(conn, mem);
	if (pd < 0)
		goto out;
	r.pd = (uint32_t)pd;
	r.addr = r.iova = (uintptr_t)buf;
	r.length = sizeof(buf);
	r.access = IBV_ACCESS_LOCAL_WRITE;
	lfd = lingering_socket(&peers[1]);
	if (lfd < 0)
		goto out;
	ret = send_msg(conn, IBVD_MSG_REG_MR_SHARED, next_id++, &r.base, &lfd, 1, 0);
	close(lfd);
	if (ret == 0)
		recv_frame(conn, TIMEOUT_MS);
	check_others_within(witness, 1000, "after REG_MR_SHARED with a lingering socket");
	expect_reset(peers[1], 2000, "REG_MR_SHARED's lingering socket");
out:
	if (mem[0] >= 0)
		close(mem[0]);
	if (mem[1] >= 0)
		close(mem[1]);
	if (conn >= 0)
		close(conn);
}

static void case_lingerfd(int witness)
{
	struct ibvd_frame_hdr h;
	int peers[5] = { -1, -1, -1, -1, -1 }, lfd, fd = -1, fds[6], i, r;

	/* 1: with a request that takes no fds: an error reply, then closed */
	lfd = lingering_socket(&peers[0]);
	fd = conn_open();
	if (lfd < 0 || fd < 0)
		goto out;
	r = send_msg(fd, IBVD_MSG_LIST_DEVICES, next_id, NULL, &lfd, 1, 0);
	close(lfd);		/* the daemon holds the last reference now */
	if (r < 0) {
		bad("LIST_DEVICES with a lingering socket: send: %s", strerror(-r));
		goto out;
	}
	if (expect_error(fd, next_id++, EBADF, "LIST_DEVICES with a lingering socket") < 0)
		goto out;
	check_others_within(witness, 1000, "after the daemon dropped a lingering socket");
	/* its last close resets the connection rather than linger */
	expect_reset(peers[0], 2000, "LIST_DEVICES's lingering socket");
	close(fd);
	fd = -1;

	/* 2: six times in one frame: more than a frame may carry */
	lfd = lingering_socket(&peers[1]);
	fd = conn_open();
	if (lfd < 0 || fd < 0)
		goto out;
	for (i = 0; i < 6; i++)
		fds[i] = lfd;
	r = send_msg(fd, IBVD_MSG_LIST_DEVICES, next_id++, NULL, fds, 6, 0);
	close(lfd);
	if (r < 0) {
		bad("6 lingering fds: send: %s", strerror(-r));
		goto out;
	}
	expect_disconnect(fd, "a frame with 6 fds (one lingering socket)");
	check_others_within(witness, 1000, "after a frame with too many lingering fds");
	close(fd);
	fd = -1;

	/* 3: with a frame that breaks the framing rules */
	lfd = lingering_socket(&peers[2]);
	fd = conn_open();
	if (lfd < 0 || fd < 0)
		goto out;
	h = good_hdr(IBVD_MSG_LIST_DEVICES, next_id++, 0);
	h.magic = 0;
	r = send_hdr(fd, &h, NULL, 0, &lfd, 1, 0);
	close(lfd);
	if (r < 0) {
		bad("bad magic with a lingering socket: send: %s", strerror(-r));
		goto out;
	}
	expect_disconnect(fd, "bad magic with a lingering socket");
	check_others_within(witness, 1000, "after a malformed frame with a lingering socket");
	close(fd);
	fd = -1;

	/* 4: as the fd of requests whose handlers close it when they fail */
	linger_in_requests(witness, &peers[3]);
out:
	if (fd >= 0)
		close(fd);
	/* resetting the connections ends the lingering in the daemon */
	for (i = 0; i < 5; i++)
		if (peers[i] >= 0)
			close(peers[i]);
}

/* Wait until a fresh connection is served again (the daemon catches up). */
static void wait_served(const char *when)
{
	long t0 = now_ms();
	int fd, ok = 0;

	while (!ok && now_ms() - t0 < TIMEOUT_MS) {
		fd = conn_open();
		if (fd < 0)
			return;
		quiet = 1;
		ok = send_msg(fd, IBVD_MSG_LIST_DEVICES, next_id, NULL, NULL, 0, 0) == 0 &&
		     recv_frame(fd, TIMEOUT_MS) == 1 &&
		     rep.hdr.type == (IBVD_MSG_LIST_DEVICES | IBVD_REPLY) &&
		     rep.hdr.req_id == next_id;
		quiet = 0;
		next_id++;
		close(fd);
		if (!ok)
			usleep(50000);
	}
	if (ok)
		say("%s: a fresh connection is served after %ld ms", when, now_ms() - t0);
	else
		bad("%s: no fresh connection served within %d ms", when, TIMEOUT_MS);
}

/*
 * The fds of a file whose close blocks for good (stuck-close.sh: a FUSE
 * file whose server holds the daemon's FLUSH), one per LIST_DEVICES,
 * STUCK_SPACING_MS apart so that the daemon sees each one stuck before
 * the next arrives.  Each request still gets its error reply.
 */
#define STUCK_SPACING_MS	600

static int open_stuck(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		bad("open %s: %s", path, strerror(errno));
	return fd;
}

static void case_stuckfds(const char *path, unsigned int n)
{
	unsigned int i;
	int fd, f, r;

	fd = conn_open();
	if (fd < 0 || !path)
		return;
	for (i = 0; i < n && !failures; i++) {
		f = open_stuck(path);
		if (f < 0)
			break;
		r = send_msg(fd, IBVD_MSG_LIST_DEVICES, next_id, NULL, &f, 1, 0);
		close(f);	/* ours is answered: the daemon's last one is not */
		if (r < 0) {
			bad("LIST_DEVICES with %s: send: %s", path, strerror(-r));
			break;
		}
		expect_error(fd, next_id++, EBADF, "LIST_DEVICES with a stuck file");
		usleep(STUCK_SPACING_MS * 1000);
	}
	say("sent %u fds of %s", i, path);
	close(fd);
}

/*
 * Four fds of the stuck file a frame until a request goes unanswered
 * (the daemon stopped reading this uid: its closes are backed up); then
 * wait for that answer, which comes once the stuck closes end.
 */
#define STUCK_FLOOD_FRAMES	1000
#define STUCK_PAUSE_MS		2000
#define STUCK_RESUME_MS		60000

static void case_stuckflood(const char *path, unsigned int tmul)
{
	unsigned int frames = 0, nfds = 0, i;
	int fd, fds[IBVD_FRAME_MAX_FDS], r = 0;
	long t0;

	fd = conn_open();
	if (fd < 0 || !path)
		return;
	while (frames < STUCK_FLOOD_FRAMES && !failures) {
		for (i = 0; i < IBVD_FRAME_MAX_FDS; i++)
			fds[i] = open_stuck(path);
		r = send_msg(fd, IBVD_MSG_LIST_DEVICES, next_id, NULL, fds,
			     IBVD_FRAME_MAX_FDS, 0);
		for (i = 0; i < IBVD_FRAME_MAX_FDS; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		if (failures)
			break;
		if (r < 0) {
			bad("frame %u: send: %s", frames, strerror(-r));
			break;
		}
		frames++;
		nfds += IBVD_FRAME_MAX_FDS;
		r = recv_frame(fd, STUCK_PAUSE_MS * (int)tmul);
		if (r == -ETIMEDOUT)
			break;
		if (r <= 0 || rep.hdr.req_id != next_id) {
			bad("frame %u: no error reply (%d)", frames, r);
			break;
		}
		next_id++;
	}
	if (failures)
		goto out;
	if (r != -ETIMEDOUT) {
		bad("all %u frames (%u fds) answered: never paused", frames, nfds);
		goto out;
	}
	say("paused: frame %u (%u fds sent) not answered within %u ms",
	    frames, nfds, STUCK_PAUSE_MS * tmul);
	t0 = now_ms();
	r = recv_frame(fd, STUCK_RESUME_MS);
	if (r == 1 && rep.hdr.req_id == next_id && rep.hdr.type == IBVD_MSG_ERROR)
		say("frame %u answered %ld ms after the pause", frames, now_ms() - t0);
	else
		bad("frame %u: no answer within %d ms of the pause (%d)", frames,
		    STUCK_RESUME_MS, r);
	next_id++;
out:
	close(fd);
}

/*
 * N connections, each with a LIST_DEVICES (passing a memfd if with_fd):
 * all answered within a second (times tmul).
 */
static void case_closeburst(unsigned int n, bool with_fd, unsigned int tmul)
{
	long worst = 0, t0, dt;
	unsigned int i;
	int fd, m = -1, r;

	for (i = 0; i < n && !failures; i++) {
		if (with_fd)
			m = memfd_create("closeburst", MFD_CLOEXEC);
		fd = conn_open();
		if ((with_fd && m < 0) || fd < 0) {
			bad("memfd or connection %u: %s", i, strerror(errno));
			break;
		}
		t0 = now_ms();
		r = send_msg(fd, IBVD_MSG_LIST_DEVICES, next_id, NULL, &m,
			     with_fd ? 1 : 0, 0);
		if (with_fd)
			close(m);
		quiet = 1;
		if (r == 0 && with_fd)
			expect_error(fd, next_id, EBADF, "LIST_DEVICES with a memfd");
		else if (r == 0)
			list_devices(fd, next_id, 0, "LIST_DEVICES");
		quiet = 0;
		next_id++;
		dt = now_ms() - t0;
		if (dt > worst)
			worst = dt;
		close(fd);
		if (r < 0)
			bad("connection %u: send: %s", i, strerror(-r));
	}
	if (worst > 1000 * (long)tmul)
		bad("a connection waited %ld ms for its answer", worst);
	say("%u connections%s, answered within %ld ms", i,
	    with_fd ? " with a memfd each" : "", worst);
}

static void case_peruid(int witness, unsigned int cap)
{
	struct rlimit rl;
	char msg[256] = "", line[64];
	unsigned int n = 0, held, i;
	int *fds, fd = -1, r = 0, e;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < cap + 64) {
		bad("RLIMIT_NOFILE is %llu, need %u: raise it (ulimit -n)",
		    (unsigned long long)rl.rlim_cur, cap + 64);
		return;
	}
	fds = calloc(cap + 8, sizeof(*fds));
	if (!fds) {
		bad("out of memory");
		return;
	}
	/*
	 * Device contexts, which the idle timeout leaves alone, until one is
	 * refused.  If the daemon closes a connection with our request
	 * unread, the kernel reports a reset (recv_frame: 0) or a broken pipe
	 * before the Error it sent: read on.
	 */
	for (n = 0; n < cap + 8; n++) {
		Ibvd__OpenDevice od = IBVD__OPEN_DEVICE__INIT;
		uint32_t id = next_id++;

		fd = conn_open();
		if (fd < 0)
			break;
		od.name = (char *)"ibvd0";
		r = send_msg(fd, IBVD_MSG_OPEN_DEVICE, id, &od.base, NULL, 0, 0);
		r = r < 0 && r != -EPIPE ? r : recv_frame(fd, r < 0 ? 0 : TIMEOUT_MS);
		if (r == 0)
			r = recv_frame(fd, 0);
		if (r != 1 || rep.hdr.type != (IBVD_MSG_OPEN_DEVICE | IBVD_REPLY) ||
		    rep.hdr.req_id != id)
			break;
		fds[n] = fd;
		fd = -1;
	}
	held = n + 1;		/* and the witness */
	if (fd < 0) {
		bad("connection %u: no connection to refuse", held + 1);
		goto out;
	}
	e = r == 1 ? rep_errnum(msg, sizeof(msg)) : -1;
	if (r != 1 || e < 0 || rep.hdr.req_id != 0) {
		bad("connection %u of this uid: %s, not an Error with request id 0",
		    held + 1, r == 1 ? "another reply" : r == 0 ? "closed" : strerror(-r));
		goto out;
	}
	if (e != EAGAIN || !strstr(msg, "too many clients")) {
		bad("connection %u refused with %d \"%s\", want EAGAIN \"too many clients...\"",
		    held + 1, e, msg);
		goto out;
	}
	r = recv_frame(fd, TIMEOUT_MS);
	if (r != 0)
		bad("refused connection: %s after the Error, not closed",
		    r > 0 ? "a frame" : strerror(-r));
	if (held > cap || held + 2 < cap)
		bad("this uid held %u connections when refused, want %u", held, cap);
	else
		say("this uid holds %u connections (cap %u); the next one: error %d \"%s\", then closed",
		    held, cap, e, msg);
	if (failures)
		goto out;
	printf("holding %u\n", held);
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		;
out:
	if (fd >= 0)
		close(fd);
	for (i = 0; i < n; i++)
		close(fds[i]);
	free(fds);
	wait_served("after letting go");
}

static void case_flood(int witness)
{
	long t0 = now_ms(), stall = 0;
	unsigned long sent = 0;
	int fd = conn_open(), r;

	if (fd < 0)
		return;
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };

		r = send_msg(fd, IBVD_MSG_LIST_DEVICES, next_id++, NULL, NULL, 0, MSG_DONTWAIT);
		if (r == 0) {
			sent++;
			stall = 0;
			if (sent % 20000 == 0)
				check_others(witness, "during the flood");
			continue;
		}
		if (r == -EPIPE || r == -ECONNRESET || r == -ENOTCONN) {
			say("disconnected after %lu requests, %ld ms (send: %s)",
			    sent, now_ms() - t0, strerror(-r));
			break;
		}
		if (r != -EAGAIN) {
			bad("send: %s", strerror(-r));
			break;
		}
		/* our send buffer is full: the daemon is not reading */
		if (!stall) {
			stall = now_ms();
			check_others(witness, "while the flooder is blocked");
		}
		poll(&pfd, 1, 100);
		if (pfd.revents & (POLLHUP | POLLERR)) {
			say("disconnected after %lu requests, %ld ms", sent, now_ms() - t0);
			break;
		}
		if (now_ms() - stall > TIMEOUT_MS) {
			bad("not disconnected: sends blocked for %d ms after %lu requests"
			    " that the daemon answered into a full socket", TIMEOUT_MS, sent);
			break;
		}
		if (now_ms() - t0 > 30000) {
			bad("not disconnected after %lu unread requests in 30 s", sent);
			break;
		}
	}
	close(fd);
	check_others(witness, "after the flood");
}

/* ---- fuzzing --------------------------------------------------------------- */

static uint32_t rng_state = 1;

static uint32_t rnd(void)
{
	/* xorshift32: deterministic per seed, so a failure can be replayed */
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 17;
	rng_state ^= rng_state << 5;
	return rng_state;
}

static void rnd_bytes(uint8_t *p, size_t n)
{
	while (n--)
		*p++ = (uint8_t)rnd();
}

/* A random string: a word ibvctl would send, or printable junk. */
static const char *rnd_word(char *buf, size_t size)
{
	static const char *const words[] = {
		"dev", "link", "show", "daemon", "status", "reload", "version",
		"resource", "client", "limit", "help", "ibvd0", "ibvd0/1",
		"ibvd0/0", "ibvd0/65536", "ibvd0/-1", "/", "", "-j", "-d", "%s%n",
	};
	size_t i, n;

	if (rnd() % 4) {
		snprintf(buf, size, "%s", words[rnd() % (sizeof(words) / sizeof(words[0]))]);
		return buf;
	}
	n = rnd() % (size - 1);
	for (i = 0; i < n; i++)
		buf[i] = (char)(0x20 + rnd() % 0x5f);
	buf[n] = '\0';
	return buf;
}


static void case_fuzz(int witness, unsigned int n, unsigned int seed)
{
	static const uint16_t types[] = {
		IBVD_MSG_LIST_DEVICES, IBVD_MSG_OPEN_DEVICE, IBVD_MSG_QUERY_DEVICE,
		IBVD_MSG_QUERY_PORT, IBVD_MSG_QUERY_GID_TABLE, IBVD_MSG_QUERY_PKEY,
		IBVD_MSG_ADMIN, IBVD_MSG_ASYNC_EVENT, IBVD_MSG_ERROR,
		IBVD_MSG_LIST_DEVICES | IBVD_REPLY,
	};
	static uint8_t payload[IBVD_FRAME_MAX];
	unsigned int i, replies = 0, drops = 0, opened = 0;
	int fd = -1;

	rng_state = seed ? seed : 1;
	for (i = 0; i < n && !failures; i++) {
		Ibvd__QueryPort qp = IBVD__QUERY_PORT__INIT;
		Ibvd__QueryPkey qk = IBVD__QUERY_PKEY__INIT;
		Ibvd__QueryGidTable qg = IBVD__QUERY_GID_TABLE__INIT;
		Ibvd__OpenDevice od = IBVD__OPEN_DEVICE__INIT;
		Ibvd__AdminRequest ar = IBVD__ADMIN_REQUEST__INIT;
		char words[6][80], *argv[6], name[300];
		const ProtobufCMessage *msg = NULL;
		struct ibvd_frame_hdr h;
		uint16_t type = types[rnd() % (sizeof(types) / sizeof(types[0]))];
		uint32_t id = rnd();
		unsigned int kind = rnd() % 8, k;
		size_t plen = 0;
		int r, may_drop = 0;
		bool answer;

		if (fd < 0) {
			fd = conn_open();
			if (fd < 0)
				break;
			if (rnd() % 2) {
				if (open_device(fd) < 0)
					break;
				opened++;
			}
		}
		switch (kind) {
		case 0:		/* random bytes as the payload of a known type */
			plen = rnd() % 256;
			rnd_bytes(payload, plen);
			break;
		case 1:
			type = IBVD_MSG_QUERY_PORT;
			qp.port_num = rnd() % 4 ? rnd() % 10 : rnd();
			msg = &qp.base;
			break;
		case 2:
			type = IBVD_MSG_QUERY_PKEY;
			qk.port_num = rnd() % 3;
			qk.index = rnd() % 2 ? rnd() % 4 : rnd();
			msg = &qk.base;
			break;
		case 3:
			type = IBVD_MSG_ADMIN;
			ar.n_argv = rnd() % 6;
			for (k = 0; k < ar.n_argv; k++)
				argv[k] = (char *)rnd_word(words[k], sizeof(words[k]));
			ar.argv = argv;
			ar.details = rnd() % 2;
			msg = &ar.base;
			break;
		case 4:
			type = IBVD_MSG_OPEN_DEVICE;
			rnd_word(name, rnd() % 2 ? sizeof(name) : 16);
			od.name = name;
			msg = &od.base;
			break;
		case 5:
			type = IBVD_MSG_QUERY_GID_TABLE;
			qg.port_num = rnd() % 4 ? rnd() % 4 : rnd();
			msg = &qg.base;
			break;
		case 6:		/* a valid frame with one header byte flipped */
			may_drop = 1;
			break;
		default:	/* a valid message, truncated or with a byte changed */
			type = IBVD_MSG_ADMIN;
			argv[0] = (char *)"dev";
			argv[1] = (char *)"show";
			ar.n_argv = 2;
			ar.argv = argv;
			plen = protobuf_c_message_get_packed_size(&ar.base);
			protobuf_c_message_pack(&ar.base, payload);
			if (rnd() % 2)
				plen = rnd() % plen;
			else
				payload[rnd() % plen] = (uint8_t)rnd();
			break;
		}
		if (msg) {
			plen = protobuf_c_message_get_packed_size(msg);
			protobuf_c_message_pack(msg, payload);
		}
		h = good_hdr(type, id, plen);
		if (kind == 6)
			((uint8_t *)&h)[rnd() % sizeof(h)] ^= (uint8_t)(1u << (rnd() % 8));
		if (getenv("BADCLIENT_TRACE"))
			fprintf(stderr, "fuzz %u: fd %d kind %u type 0x%04x id %u len %zu%s\n",
				i, fd, kind, h.type, h.req_id, plen, msg ? " (valid message)" : "");
		r = send_hdr(fd, &h, payload, plen, NULL, 0, 0);
		if (r < 0) {
			bad("fuzz %u (seed %u, kind %u): send: %s", i, seed, kind, strerror(-r));
			break;
		}
		/* an Error or a reply sent to the daemon is hung up on */
		answer = h.type == IBVD_MSG_ERROR || (h.type & IBVD_REPLY);
		r = recv_frame(fd, TIMEOUT_MS);
		if (r == 0 && (may_drop || answer)) {
			drops++;
			close(fd);
			fd = -1;
		} else if (r > 0 && answer && !may_drop) {
			bad("fuzz %u (seed %u): type 0x%04x answered, not hung up on",
			    i, seed, h.type);
			break;
		} else if (r <= 0) {
			bad("fuzz %u (seed %u, kind %u, type 0x%04x, %zu bytes): %s", i, seed,
			    kind, type, plen, r == 0 ? "disconnected" : strerror(-r));
			break;
		} else if (rep.hdr.req_id != h.req_id) {
			bad("fuzz %u (seed %u): reply id %u, request id %u", i, seed,
			    rep.hdr.req_id, h.req_id);
			break;
		} else if (rep.hdr.type != IBVD_MSG_ERROR &&
			   rep.hdr.type != (h.type | IBVD_REPLY)) {
			bad("fuzz %u (seed %u): reply type 0x%04x to type 0x%04x", i, seed,
			    rep.hdr.type, h.type);
			break;
		} else {
			replies++;
			/*
			 * After a flipped header the daemon may answer and
			 * then disconnect (a bad version does): start afresh.
			 * Otherwise sometimes too: states matter.
			 */
			if (may_drop || rnd() % 50 == 0) {
				close(fd);
				fd = -1;
			}
		}
		if (i % 250 == 249)
			check_others(witness, "during the fuzzing");
	}
	if (fd >= 0)
		close(fd);
	say("%u requests (seed %u): %u replies, %u disconnects (a flipped header, an answer sent), %u opened connections",
	    i, seed, replies, drops, opened);
}

static int do_admin(int argc, char **argv)
{
	Ibvd__AdminRequest req = IBVD__ADMIN_REQUEST__INIT;
	char msg[256] = "";
	int fd, r, e;

	req.n_argv = (size_t)argc;
	req.argv = argv;
	fd = conn_open();
	if (fd < 0)
		return 1;
	r = send_msg(fd, IBVD_MSG_ADMIN, next_id, &req.base, NULL, 0, 0);
	if (r == 0)
		r = recv_frame(fd, TIMEOUT_MS);
	close(fd);
	if (r <= 0) {
		bad("ADMIN: %s", r == 0 ? "disconnected" : strerror(-r));
		return 1;
	}
	if (rep.hdr.req_id != next_id) {
		bad("ADMIN reply has request id %u, sent %u", rep.hdr.req_id, next_id);
		return 1;
	}
	if (rep.hdr.type == (IBVD_MSG_ADMIN | IBVD_REPLY)) {
		Ibvd__AdminReply *ar = ibvd__admin_reply__unpack(NULL, rep.len, rep.payload);

		if (!ar) {
			bad("ADMIN reply does not decode");
			return 1;
		}
		printf("reply %s\n", ar->json);
		ibvd__admin_reply__free_unpacked(ar, NULL);
		return 0;
	}
	e = rep_errnum(msg, sizeof(msg));
	if (e < 0) {
		bad("ADMIN answered with type 0x%04x", rep.hdr.type);
		return 1;
	}
	printf("error %d %s\n", e, msg);
	return 0;
}

int main(int argc, char **argv)
{
	const char *arg;
	int witness = -1;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 3) {
		fprintf(stderr, "usage: %s SOCKET CASE [DAEMON_PID|SECONDS|CAP]\n", argv[0]);
		return 2;
	}
	sock_path = argv[1];
	case_name = argv[2];
	arg = argc > 3 ? argv[3] : NULL;

	if (strcmp(case_name, "ping") == 0 || strcmp(case_name, "list") == 0) {
		int fd;

		quiet = strcmp(case_name, "ping") == 0;
		fd = conn_open();
		if (fd < 0)
			return 1;
		list_devices(fd, next_id++, !quiet, "LIST_DEVICES");
		close(fd);
		return failures ? 1 : 0;
	}

	if (strcmp(case_name, "admin") == 0)
		return do_admin(argc - 3, argv + 3);

	witness = conn_open();
	if (witness < 0 || open_device(witness) < 0 ||
	    list_devices(witness, next_id++, 0, "witness connection") < 0)
		return 1;

	if (strcmp(case_name, "malformed") == 0)
		case_malformed();
	else if (strcmp(case_name, "oversized") == 0)
		case_oversized();
	else if (strcmp(case_name, "truncated") == 0)
		case_truncated();
	else if (strcmp(case_name, "badmagic") == 0)
		case_badmagic();
	else if (strcmp(case_name, "badversion") == 0)
		case_badversion();
	else if (strcmp(case_name, "badlen") == 0)
		case_badlen();
	else if (strcmp(case_name, "unknowntype") == 0)
		case_unknowntype();
	else if (strcmp(case_name, "answers") == 0)
		case_answers();
	else if (strcmp(case_name, "unknownflood") == 0)
		case_unknownflood(arg);
	else if (strcmp(case_name, "reqid") == 0)
		case_reqid();
	else if (strcmp(case_name, "fds") == 0)
		case_fds(arg);
	else if (strcmp(case_name, "sharedmr") == 0)
		case_sharedmr(arg);
	else if (strcmp(case_name, "mappedcap") == 0)
		case_mappedcap(arg);
	else if (strcmp(case_name, "notopen") == 0)
		case_notopen();
	else if (strcmp(case_name, "cmqp") == 0)
		case_cmqp(arg);
	else if (strcmp(case_name, "cmreset") == 0)
		case_cmreset();
	else if (strcmp(case_name, "direct") == 0)
		case_direct();
	else if (strcmp(case_name, "dm") == 0)
		case_dm();
	else if (strcmp(case_name, "attachfds") == 0)
		case_attachfds();
	else if (strcmp(case_name, "silent") == 0)
		case_silent(witness);
	else if (strcmp(case_name, "idle") == 0)
		case_idle(witness, arg ? atoi(arg) : 30);
	else if (strcmp(case_name, "flood") == 0)
		case_flood(witness);
	else if (strcmp(case_name, "lingerfd") == 0)
		case_lingerfd(witness);
	else if (strcmp(case_name, "stuckfds") == 0)
		case_stuckfds(arg, argc > 4 ? (unsigned int)atoi(argv[4]) : 1);
	else if (strcmp(case_name, "stuckflood") == 0)
		case_stuckflood(arg, argc > 4 ? (unsigned int)atoi(argv[4]) : 1);
	else if (strcmp(case_name, "closeburst") == 0 ||
		 strcmp(case_name, "connects") == 0)
		case_closeburst(arg ? (unsigned int)atoi(arg) : 100,
				strcmp(case_name, "closeburst") == 0,
				argc > 4 ? (unsigned int)atoi(argv[4]) : 1);
	else if (strcmp(case_name, "peruid") == 0)
		case_peruid(witness, arg ? (unsigned int)atoi(arg) : 1024);
	else if (strcmp(case_name, "fuzz") == 0)
		case_fuzz(witness, arg ? (unsigned int)atoi(arg) : 1000,
			  argc > 4 ? (unsigned int)strtoul(argv[4], NULL, 0) : 1);
	else {
		fprintf(stderr, "badclient: unknown case %s\n", case_name);
		return 2;
	}

	check_others(witness, "after the case");
	close(witness);
	if (failures)
		return 1;
	say("passed");
	return 0;
}
