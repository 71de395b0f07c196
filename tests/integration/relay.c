/*
 * relay-helper: a bad link layer between two network namespaces.
 *
 *   relay-helper [-s SEED] [-r PCT] [-k N] [-w MS] [-d PCT] [-l PCT]
 *                [-t rc,uc,ud] NS_A TAP_A NS_B TAP_B
 *
 * Makes a tap device TAP_A in network namespace NS_A (a name under
 * /run/netns, or "-" for our own) and TAP_B in NS_B, and forwards every
 * Ethernet frame that one side's kernel sends out of its tap to the other
 * side, byte for byte: IP headers and the RoCE ICRC stay as they were, and
 * ARP and neighbour discovery pass as on a cable.  RoCEv2 frames (UDP
 * port 4791, over IPv4 or IPv6) are the ones it mistreats, each on its
 * own dice roll from a seeded PRNG, so that a run can be repeated:
 *
 *   -r PCT  reorder: hold the frame back until N later frames of the same
 *           direction have passed it (-k, default 2), or until MS
 *           milliseconds have gone by without them (-w, default 5)
 *   -d PCT  duplicate: send the frame twice
 *   -l PCT  drop the frame
 *   -t LIST the BTH transports that may be duplicated or dropped (default
 *           rc,uc,ud): a datagram sent twice is two datagrams to a UD QP,
 *           and UC and UD never resend what is lost, so a test of RC and UC
 *           recovery leaves UD alone there.  Every transport is reordered.
 *
 * The relay runs until SIGTERM or SIGINT; SIGUSR1 prints the counts so far.
 * At exit it prints, per direction and in total:
 *
 *   relay: total frames N roce N forwarded N dropped N duplicated N
 *          reordered N delayed N acks N
 *
 * (one line; "reordered" frames were overtaken by a later one, "delayed"
 * ones were held but released by the clock before anything passed them).
 * Exit: 0, 1 on a failure, 77 if tap devices cannot be made here.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sys/ioctl.h>

#define FRAME_MAX	65536
#define ROCE_PORT	4791
#define ETH_HLEN	14

struct stats {
	unsigned long frames, roce, forwarded, dropped, duplicated;
	unsigned long reordered, delayed;
	unsigned long acks;		/* ACK/NAK frames dropped, held or doubled */
};

/* One direction: frames read from `in` go out on `out`. */
struct dir {
	const char *name;
	int in, out;
	bool held;
	uint8_t hold[FRAME_MAX];
	size_t hold_len;
	unsigned int hold_left;		/* frames to pass it before release */
	unsigned int passed;		/* frames that did */
	uint64_t hold_since_ms;
	struct stats st;
};

static struct {
	double reorder, dup, loss;	/* percent */
	unsigned int k, wait_ms;
	unsigned int transports;	/* bit per BTH transport (opcode >> 5) */
	uint64_t rng;
} opt = { .k = 2, .wait_ms = 5, .transports = 0x0b };

static volatile sig_atomic_t stop, report;

/* ---- small things ---------------------------------------------------------- */

static void die(const char *what)
{
	fprintf(stderr, "relay: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* xorshift64*: the same seed, the same fate for the same frames */
static uint64_t rng_next(void)
{
	opt.rng ^= opt.rng >> 12;
	opt.rng ^= opt.rng << 25;
	opt.rng ^= opt.rng >> 27;
	return opt.rng * 0x2545F4914F6CDD1Dull;
}

static bool roll(double pct)
{
	return pct > 0 && (double)(rng_next() >> 11) / (double)(1ull << 53) * 100.0 < pct;
}

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/*
 * The BTH opcode of a RoCEv2 frame (its transport, 0 RC, 1 UC, 3 UD, ...,
 * in the top 3 bits), or -1 if the frame is something else: IPv4 or IPv6
 * (no extension headers), UDP to port 4791, room for the BTH's first
 * byte.  The shortest RoCE frame, an IPv4 ACK, is 62 bytes: each family
 * is measured by its own header, not IPv6's.
 */
static int roce_opcode(const uint8_t *f, size_t len)
{
	size_t udp;

	if (len < ETH_HLEN + 20)
		return -1;
	switch (be16(f + 12)) {
	case 0x0800:
		if (f[ETH_HLEN + 9] != 17)
			return -1;
		udp = ETH_HLEN + (size_t)(f[ETH_HLEN] & 0x0F) * 4;
		break;
	case 0x86DD:
		if (len < ETH_HLEN + 40 || f[ETH_HLEN + 6] != 17)
			return -1;
		udp = ETH_HLEN + 40;
		break;
	default:
		return -1;
	}
	if (udp + 9 > len || be16(f + udp + 2) != ROCE_PORT)
		return -1;
	return f[udp + 8];
}

/* An ACK or NAK (of RC or XRC): what a requester hears of its SENDs. */
static bool is_ack(int op)
{
	return (op & 0x1F) == 0x11;
}

/* ---- the taps ---------------------------------------------------------------- */

/* Tap `name` made in namespace ns ("-": ours); we come back to ours after. */
static int tap_open(const char *ns, const char *name)
{
	char path[PATH_MAX];
	struct ifreq ifr;
	int self = -1, fd;

	if (strcmp(ns, "-")) {
		self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
		snprintf(path, sizeof(path), "/run/netns/%s", ns);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (self < 0 || fd < 0 || setns(fd, CLONE_NEWNET) < 0)
			die(path);
		close(fd);
	}
	fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "relay: /dev/net/tun: %s\n", strerror(errno));
		exit(77);
	}
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		fprintf(stderr, "relay: tap %s: %s\n", name, strerror(errno));
		exit(errno == EPERM || errno == ENODEV ? 77 : 1);
	}
	if (self >= 0) {
		if (setns(self, CLONE_NEWNET) < 0)
			die("back to our namespace");
		close(self);
	}
	return fd;
}

static void put(struct dir *d, const uint8_t *f, size_t len)
{
	/* A full tap queue drops the frame, as a full wire would. */
	if (write(d->out, f, len) < 0 && errno != EAGAIN && errno != ENOBUFS &&
	    errno != EIO)
		die("write to a tap");
	d->st.forwarded++;
}

static void release(struct dir *d)
{
	put(d, d->hold, d->hold_len);
	if (d->passed)
		d->st.reordered++;
	else
		d->st.delayed++;
	d->held = false;
}

/* Another frame went out past the held one. */
static void passed(struct dir *d)
{
	if (!d->held)
		return;
	d->passed++;
	if (--d->hold_left == 0)
		release(d);
}

static void relay_frame(struct dir *d, const uint8_t *f, size_t len)
{
	int op = roce_opcode(f, len), t = op < 0 ? -1 : op >> 5;
	bool harm = t >= 0 && (opt.transports & (1u << t));

	d->st.frames++;
	if (t < 0) {
		put(d, f, len);
		passed(d);
		return;
	}
	d->st.roce++;
	if (harm && roll(opt.loss)) {
		d->st.dropped++;
		d->st.acks += is_ack(op);
		return;
	}
	if (!d->held && roll(opt.reorder)) {
		d->st.acks += is_ack(op);
		memcpy(d->hold, f, len);
		d->hold_len = len;
		d->hold_left = opt.k;
		d->passed = 0;
		d->hold_since_ms = now_ms();
		d->held = true;
		return;
	}
	put(d, f, len);
	if (harm && roll(opt.dup)) {
		put(d, f, len);
		d->st.duplicated++;
		d->st.acks += is_ack(op);
	}
	passed(d);
}

static void relay_read(struct dir *d)
{
	static uint8_t f[FRAME_MAX];
	ssize_t n = read(d->in, f, sizeof(f));

	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR || errno == EIO)
			return;
		die("read from a tap");
	}
	relay_frame(d, f, (size_t)n);
}

/* ---- counts -------------------------------------------------------------------- */

static void print_stats(const char *name, const struct stats *s)
{
	printf("relay: %s frames %lu roce %lu forwarded %lu dropped %lu "
	       "duplicated %lu reordered %lu delayed %lu acks %lu\n", name,
	       s->frames, s->roce, s->forwarded, s->dropped, s->duplicated,
	       s->reordered, s->delayed, s->acks);
}

static void print_all(const struct dir *d)
{
	struct stats t = { 0 };
	int i;

	for (i = 0; i < 2; i++) {
		print_stats(d[i].name, &d[i].st);
		t.frames += d[i].st.frames;
		t.roce += d[i].st.roce;
		t.forwarded += d[i].st.forwarded;
		t.dropped += d[i].st.dropped;
		t.duplicated += d[i].st.duplicated;
		t.reordered += d[i].st.reordered;
		t.delayed += d[i].st.delayed;
		t.acks += d[i].st.acks;
	}
	print_stats("total", &t);
	fflush(stdout);
}

/* ---- main ------------------------------------------------------------------------ */

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		report = 1;
	else
		stop = 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: relay-helper [-s SEED] [-r PCT] [-k N] [-w MS] "
		"[-d PCT] [-l PCT] [-t rc,uc,ud] NS_A TAP_A NS_B TAP_B\n");
	exit(1);
}

static unsigned int parse_transports(const char *s)
{
	char buf[64], *tok, *save = NULL;
	unsigned int mask = 0;

	snprintf(buf, sizeof(buf), "%s", s);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "rc"))
			mask |= 1u << 0;
		else if (!strcmp(tok, "uc"))
			mask |= 1u << 1;
		else if (!strcmp(tok, "ud"))
			mask |= 1u << 3;
		else
			usage();
	}
	return mask;
}

static void parse_args(int argc, char **argv)
{
	uint64_t seed = 1;
	int c;

	while ((c = getopt(argc, argv, "s:r:k:w:d:l:t:")) != -1) {
		switch (c) {
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'r': opt.reorder = atof(optarg); break;
		case 'k': opt.k = (unsigned int)atoi(optarg); break;
		case 'w': opt.wait_ms = (unsigned int)atoi(optarg); break;
		case 'd': opt.dup = atof(optarg); break;
		case 'l': opt.loss = atof(optarg); break;
		case 't': opt.transports = parse_transports(optarg); break;
		default: usage();
		}
	}
	if (argc - optind != 4 || opt.k < 1)
		usage();
	/* splitmix64 of the seed: never the all-zero state */
	seed += 0x9E3779B97F4A7C15ull;
	seed = (seed ^ seed >> 30) * 0xBF58476D1CE4E5B9ull;
	seed = (seed ^ seed >> 27) * 0x94D049BB133111EBull;
	opt.rng = (seed ^ seed >> 31) | 1;
}

/* Milliseconds poll may sleep: until the first held frame is due. */
static int poll_timeout(const struct dir *d)
{
	uint64_t now = now_ms(), due;
	int i, t = -1;

	for (i = 0; i < 2; i++) {
		if (!d[i].held)
			continue;
		due = d[i].hold_since_ms + opt.wait_ms;
		if (due <= now)
			return 0;
		if (t < 0 || due - now < (uint64_t)t)
			t = (int)(due - now);
	}
	return t;
}

int main(int argc, char **argv)
{
	static struct dir d[2];
	struct sigaction sa;
	struct pollfd pfd[2];
	int a, b, i;

	parse_args(argc, argv);
	a = tap_open(argv[optind], argv[optind + 1]);
	b = tap_open(argv[optind + 2], argv[optind + 3]);
	d[0] = (struct dir){ .name = "a->b", .in = a, .out = b };
	d[1] = (struct dir){ .name = "b->a", .in = b, .out = a };
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;	/* no SA_RESTART: poll returns */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	printf("relay: ready\n");
	fflush(stdout);
	pfd[0] = (struct pollfd){ .fd = a, .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = b, .events = POLLIN };
	while (!stop) {
		if (report) {
			report = 0;
			print_all(d);
		}
		if (poll(pfd, 2, poll_timeout(d)) < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		for (i = 0; i < 2; i++)
			if (pfd[i].revents & POLLIN)
				relay_read(&d[i]);
		for (i = 0; i < 2; i++)
			if (d[i].held && now_ms() >= d[i].hold_since_ms + opt.wait_ms)
				release(&d[i]);
	}
	for (i = 0; i < 2; i++)
		if (d[i].held)
			release(&d[i]);
	print_all(d);
	return 0;
}
