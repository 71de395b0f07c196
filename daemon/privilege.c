/*
 * Least privilege (privilege.h).
 *
 * What the daemon needs once it runs, and why it needs no privilege for
 * it: clients hand it their own /proc/self/mem and /proc/self/maps
 * (ATTACH_MEMORY), so it reaches registered memory without ptrace rights;
 * it pins nothing, so it needs no CAP_IPC_LOCK; rings, doorbells and
 * eventfds are its own memfds; its socket is bound (or handed over by
 * systemd) before the drop; client identities come from SO_PEERCRED and
 * from /proc/PID files any user may read.  The exceptions are raw sockets
 * for RoCE devices (a broker keeps CAP_NET_RAW for them, netraw.c) and the
 * /dev/infiniband links, which are made as a separate, privileged step
 * (`ibverbsd --device-links`) or before the drop.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/capability.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "leftovers.h"
#include "log.h"
#include "netraw.h"
#include "privilege.h"

struct caps {
	struct __user_cap_header_struct hdr;
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
};

static int caps_get(struct caps *c)
{
	memset(c, 0, sizeof(*c));
	c->hdr.version = _LINUX_CAPABILITY_VERSION_3;
	return syscall(SYS_capget, &c->hdr, c->data) < 0 ? -errno : 0;
}

bool ibvd_privilege_holds(int cap)
{
	struct caps c;

	if (caps_get(&c) < 0)
		return false;
	return c.data[CAP_TO_INDEX(cap)].permitted & CAP_TO_MASK(cap);
}

int ibvd_privilege_lookup(const char *name, struct ibvd_identity *id)
{
	struct passwd *pw = getpwnam(name);
	char *end;
	unsigned long n;

	if (!pw) {
		errno = 0;
		n = strtoul(name, &end, 10);
		if (*name && !*end && !errno && n < (unsigned long)UINT_MAX)
			pw = getpwuid((uid_t)n);
		if (!pw && *name && !*end && !errno && n < (unsigned long)UINT_MAX) {
			/* A bare number without a passwd entry: gid = uid. */
			id->uid = (uid_t)n;
			id->gid = (gid_t)n;
			return 0;
		}
	}
	if (!pw)
		return -ENOENT;
	id->uid = pw->pw_uid;
	id->gid = pw->pw_gid;
	return 0;
}

/* Drop every capability but keep from the bounding set (needs CAP_SETPCAP). */
static int drop_bounding(int keep)
{
	int cap;

	for (cap = 0; cap <= CAP_LAST_CAP; cap++) {
		if (cap == keep)
			continue;
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return -errno;
	}
	return 0;
}

static int become(const struct ibvd_identity *to, int keep)
{
	if (setgroups(0, NULL) < 0 || setresgid(to->gid, to->gid, to->gid) < 0)
		return -errno;
	/* Without this, leaving uid 0 clears the permitted set too. */
	if (keep >= 0 && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
		return -errno;
	if (setresuid(to->uid, to->uid, to->uid) < 0)
		return -errno;
	if (keep >= 0 && prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0)
		return -errno;
	return 0;
}

/* Permitted and effective: keep alone (or nothing); inheritable: nothing. */
static int set_caps(int keep)
{
	struct caps c;
	unsigned int i;

	memset(&c, 0, sizeof(c));
	c.hdr.version = _LINUX_CAPABILITY_VERSION_3;
	if (keep >= 0) {
		c.data[CAP_TO_INDEX(keep)].permitted = CAP_TO_MASK(keep);
		c.data[CAP_TO_INDEX(keep)].effective = CAP_TO_MASK(keep);
	}
	for (i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
		c.data[i].inheritable = 0;
	if (syscall(SYS_capset, &c.hdr, c.data) < 0)
		return -errno;
	/* Ambient capabilities would survive an exec; there is none to do. */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 &&
	    errno != EINVAL)
		return -errno;
	return 0;
}

int ibvd_privilege_restrict(const struct ibvd_identity *to, int keep)
{
	int ret;

	if (ibvd_privilege_holds(CAP_SETPCAP)) {
		ret = drop_bounding(keep);
		if (ret < 0)
			return ret;
	}
	if (to) {
		ret = become(to, keep);
		if (ret < 0)
			return ret;
	}
	ret = set_caps(keep);
	if (ret < 0)
		return ret;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	return 0;
}

/* Nothing may be left: a drop that silently kept something is a failure. */
static int verify_dropped(const struct ibvd_identity *to)
{
	struct caps c;
	unsigned int i;
	int ret = caps_get(&c);

	if (ret < 0)
		return ret;
	for (i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
		if (c.data[i].permitted || c.data[i].effective)
			return -EPERM;
	if (to && (getuid() != to->uid || geteuid() != to->uid ||
		   getgid() != to->gid))
		return -EPERM;
	return 0;
}

/*
 * A daemon run in the foreground from root's terminal has it as its
 * controlling terminal; once it is another user, it could push input
 * into root's shell (TIOCSTI).  It lets the terminal go, keeping its fds
 * for the log.  A session leader would hang up its own session doing so:
 * it is told to start otherwise instead.
 */
static void leave_terminal(void)
{
	int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);

	if (fd < 0)
		return;		/* no controlling terminal */
	if (getsid(0) == getpid())
		log_warn("the daemon leads a session with a terminal, which it keeps as another user: start it with setsid(1) or systemd");
	else if (ioctl(fd, TIOCNOTTY) < 0)
		log_warn("cannot leave the controlling terminal: %s", strerror(errno));
	close(fd);
}

/* The bound socket goes to the new user: a reload may chmod it. */
static void hand_over_socket(const char *path, const struct ibvd_identity *to)
{
	if (path && lchown(path, to->uid, (gid_t)-1) < 0)
		log_notice("cannot give %s to uid %u: %s (a reload cannot change its mode)",
			   path, (unsigned int)to->uid, strerror(errno));
}

int ibvd_privilege_drop(const char *user, const char *socket_path,
			char *err, size_t errlen)
{
	struct ibvd_identity id, *to = NULL;
	bool broker = false;
	int ret;

	if (user && *user) {
		if (ibvd_privilege_lookup(user, &id) < 0) {
			snprintf(err, errlen, "user %s: no such user", user);
			return -ENOENT;
		}
		if (id.uid == 0 && geteuid() == 0)
			log_warn("user %s is uid 0: root without capabilities still owns the system's files; name an unprivileged user",
				 user);
		if (getuid() == id.uid && geteuid() == id.uid) {
			to = NULL;	/* already that user */
		} else if (geteuid() != 0) {
			snprintf(err, errlen, "cannot become user %s: not started as root",
				 user);
			return -EPERM;
		} else {
			to = &id;
		}
	} else if (geteuid() == 0) {
		log_warn("running as root: set \"user\" in the configuration (or --user) to run as an unprivileged user");
	}
	if (to)
		leave_terminal();
	if (ibvd_privilege_holds(CAP_NET_RAW)) {
		ret = ibvd_netraw_start(to);
		if (ret < 0) {
			snprintf(err, errlen, "cannot start the raw-socket broker: %s",
				 strerror(-ret));
			return ret;
		}
		broker = true;
	}
	if (to) {
		ret = ibvd_leftovers_start(socket_path);
		if (ret < 0) {
			snprintf(err, errlen, "cannot start the leftovers process: %s",
				 strerror(-ret));
			return ret;
		}
		hand_over_socket(socket_path, to);
	}
	ret = ibvd_privilege_restrict(to, -1);
	if (ret == 0)
		ret = verify_dropped(to);
	if (ret < 0) {
		snprintf(err, errlen, "cannot drop privileges: %s", strerror(-ret));
		return ret;
	}
	log_info("running as uid %u gid %u without capabilities%s",
		 (unsigned int)getuid(), (unsigned int)getgid(),
		 broker ? "; raw sockets through the broker" : "");
	return 0;
}
