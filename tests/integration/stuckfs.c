/*
 * stuckfs-helper DIR OWNER_UID HOLD_PID [read|getattr]: a FUSE file system with
 * one file, DIR/f, mounted for OWNER_UID, whose server never answers a
 * FLUSH sent by a thread of process HOLD_PID (the daemon); every other
 * request is answered.  The daemon's close of DIR/f then blocks until
 * this program exits: closing /dev/fuse aborts the connection, and the
 * held closes return.  With "read", the file holds FILE_BYTES of zeros,
 * and it is the READs of HOLD_PID's threads that are never answered: a
 * copy the daemon makes of a client's mapping of DIR/f stops in the
 * kernel until the connection ends (this program's exit, or an abort
 * through /sys/fs/fuse/connections).  With "getattr", no attributes are
 * ever valid past their reply (each stat asks again), the mount lets
 * other uids (the daemon's) use it (allow_other), and the GETATTRs of
 * HOLD_PID's threads are never answered: a stat that asks the file
 * system stops there ("held N tid T": T asked); FLUSHes are answered.
 *
 * Speaks the kernel's FUSE protocol on /dev/fuse directly (no library),
 * as root.  Prints "mounted" once DIR/f can be opened, and "held N" each
 * time it holds another FLUSH (or READ).  SIGTERM or SIGINT: unmount
 * lazily and exit.  Exit status 77 if FUSE cannot be mounted here.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <linux/fuse.h>

#define ROOT_NODE	FUSE_ROOT_ID
#define FILE_NODE	2
#define FILE_NAME	"f"
#define ATTR_VALID_S	3600
/* The kernel wants room for a whole request; ours never write. */
#define REQUEST_BUF	(FUSE_MIN_READ_BUFFER + 4096)
#define MAX_WRITE	4096
#define FILE_BYTES	(1u << 20)

static volatile sig_atomic_t stop;
static uid_t owner;
static pid_t hold_pid;
static int hold_reads;		/* "read": hold READs, not FLUSHes */
static int hold_getattrs;	/* "getattr": hold GETATTRs, cache nothing */
static int dev = -1;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void reply(uint64_t unique, int error, const void *body, size_t len)
{
	struct fuse_out_header h = {
		.len = (uint32_t)(sizeof(h) + (error ? 0 : len)),
		.error = error,
		.unique = unique,
	};
	char buf[sizeof(h) + 256];

	if (!error && len > sizeof(buf) - sizeof(h))
		abort();
	memcpy(buf, &h, sizeof(h));
	if (!error && len)
		memcpy(buf + sizeof(h), body, len);
	/* ENOENT: the request was interrupted meanwhile; nothing to do */
	if (write(dev, buf, h.len) < 0 && errno != ENOENT)
		fprintf(stderr, "stuckfs: reply: %s\n", strerror(errno));
}

static void node_attr(uint64_t node, struct fuse_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->ino = node;
	a->uid = owner;
	a->gid = owner;
	a->blksize = 4096;
	if (node == ROOT_NODE) {
		a->mode = S_IFDIR | 0755;
		a->nlink = 2;
	} else {
		a->mode = S_IFREG | 0644;
		a->nlink = 1;
		a->size = hold_reads ? FILE_BYTES : 0;
		a->blocks = a->size / 512;
	}
}

static void do_init(const struct fuse_in_header *in, const void *arg)
{
	const struct fuse_init_in *ii = arg;
	struct fuse_init_out out = {
		.major = FUSE_KERNEL_VERSION,
		.minor = FUSE_KERNEL_MINOR_VERSION,
		.max_readahead = ii->max_readahead,
		.max_background = 16,
		.congestion_threshold = 12,
		.max_write = MAX_WRITE,
		.time_gran = 1,
	};

	reply(in->unique, 0, &out, sizeof(out));
}

static void do_lookup(const struct fuse_in_header *in, const char *name)
{
	struct fuse_entry_out out = {
		.nodeid = FILE_NODE,
		.generation = 1,
		.entry_valid = ATTR_VALID_S,
		.attr_valid = hold_getattrs ? 0 : ATTR_VALID_S,
	};

	if (in->nodeid != ROOT_NODE || strcmp(name, FILE_NAME) != 0) {
		reply(in->unique, -ENOENT, NULL, 0);
		return;
	}
	node_attr(FILE_NODE, &out.attr);
	reply(in->unique, 0, &out, sizeof(out));
}

static int from_held_process(pid_t pid);

static void do_getattr(const struct fuse_in_header *in)
{
	struct fuse_attr_out out = {
		.attr_valid = hold_getattrs ? 0 : ATTR_VALID_S,
	};

	if (in->nodeid != ROOT_NODE && in->nodeid != FILE_NODE) {
		reply(in->unique, -ENOENT, NULL, 0);
		return;
	}
	if (hold_getattrs && from_held_process((pid_t)in->pid)) {
		static unsigned int held;

		printf("held %u tid %u\n", ++held, (unsigned int)in->pid);
		return;		/* never answered */
	}
	node_attr(in->nodeid, &out.attr);
	reply(in->unique, 0, &out, sizeof(out));
}

/* The requester is a thread of hold_pid (request pids are thread ids). */
static int from_held_process(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)hold_pid, (int)pid);
	return access(path, F_OK) == 0;
}

/* A READ: zeros, as many as asked within the file. */
static void do_read(const struct fuse_in_header *in, const void *arg)
{
	static const uint8_t zeros[FILE_BYTES];
	const struct fuse_read_in *ri = arg;
	uint64_t len = ri->offset < FILE_BYTES ? FILE_BYTES - ri->offset : 0;
	struct fuse_out_header h = { .unique = in->unique };
	struct iovec iov[2];

	if (len > ri->size)
		len = ri->size;
	h.len = (uint32_t)(sizeof(h) + len);
	iov[0] = (struct iovec){ &h, sizeof(h) };
	iov[1] = (struct iovec){ (void *)zeros, len };
	if (writev(dev, iov, 2) < 0 && errno != ENOENT)
		fprintf(stderr, "stuckfs: read reply: %s\n", strerror(errno));
}

static void serve(const struct fuse_in_header *in, const void *arg)
{
	static unsigned int held;
	struct fuse_open_out open_out = { .fh = 1 };
	struct fuse_statfs_out statfs_out = { .st = { .bsize = 4096, .namelen = 255 } };

	switch (in->opcode) {
	case FUSE_INIT:
		do_init(in, arg);
		break;
	case FUSE_LOOKUP:
		do_lookup(in, arg);
		break;
	case FUSE_GETATTR:
		do_getattr(in);
		break;
	case FUSE_OPEN:
	case FUSE_OPENDIR:
		reply(in->unique, 0, &open_out, sizeof(open_out));
		break;
	case FUSE_FLUSH:
		if (!hold_reads && !hold_getattrs &&
		    from_held_process((pid_t)in->pid)) {
			printf("held %u\n", ++held);
			break;		/* never answered */
		}
		reply(in->unique, 0, NULL, 0);
		break;
	case FUSE_READ:
		if (hold_reads && from_held_process((pid_t)in->pid)) {
			printf("held %u\n", ++held);
			break;		/* never answered */
		}
		do_read(in, arg);
		break;
	case FUSE_STATFS:
		reply(in->unique, 0, &statfs_out, sizeof(statfs_out));
		break;
	case FUSE_READDIR:
	case FUSE_RELEASE:
	case FUSE_RELEASEDIR:
	case FUSE_ACCESS:
	case FUSE_DESTROY:
		reply(in->unique, 0, NULL, 0);
		break;
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
	case FUSE_INTERRUPT:
		break;			/* these take no answer */
	default:
		reply(in->unique, -ENOSYS, NULL, 0);
		break;
	}
}

static int mount_fs(const char *dir)
{
	char opts[128];

	dev = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (dev < 0) {
		fprintf(stderr, "stuckfs: /dev/fuse: %s\n", strerror(errno));
		return -1;
	}
	/*
	 * "getattr" is about a file system that answers the daemon at all:
	 * without allow_other the kernel refuses the daemon's questions to
	 * it at once (another uid's mount).
	 */
	snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=%u,group_id=%u%s",
		 dev, (unsigned int)owner, (unsigned int)owner,
		 hold_getattrs ? ",allow_other" : "");
	if (mount("stuckfs", dir, "fuse.stuckfs", MS_NOSUID | MS_NODEV, opts) < 0) {
		fprintf(stderr, "stuckfs: mount on %s: %s\n", dir, strerror(errno));
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };	/* no SA_RESTART */
	static char buf[REQUEST_BUF];
	const struct fuse_in_header *in = (const void *)buf;
	int announced = 0;
	ssize_t n;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 4 || argc > 5 ||
	    (argc == 5 && strcmp(argv[4], "read") && strcmp(argv[4], "getattr"))) {
		fprintf(stderr, "usage: %s DIR OWNER_UID HOLD_PID [read|getattr]\n",
			argv[0]);
		return 2;
	}
	hold_reads = argc == 5 && !strcmp(argv[4], "read");
	hold_getattrs = argc == 5 && !strcmp(argv[4], "getattr");
	owner = (uid_t)strtoul(argv[2], NULL, 10);
	hold_pid = (pid_t)strtol(argv[3], NULL, 10);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (mount_fs(argv[1]) < 0)
		return 77;
	while (!stop) {
		n = read(dev, buf, sizeof(buf));
		if (n < 0) {
			if (errno == EINTR || errno == ENOENT)
				continue;
			if (errno != ENODEV)	/* ENODEV: unmounted */
				fprintf(stderr, "stuckfs: read: %s\n", strerror(errno));
			break;
		}
		if ((size_t)n < sizeof(*in) || in->len != (uint32_t)n) {
			fprintf(stderr, "stuckfs: a short request\n");
			break;
		}
		serve(in, in + 1);
		if (in->opcode == FUSE_INIT && !announced++)
			printf("mounted\n");
	}
	umount2(argv[1], MNT_DETACH);
	close(dev);		/* aborts the connection: held closes return */
	return 0;
}
