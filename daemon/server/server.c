/*
 * The listener: socket activation or our own bind, and accept.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>

#include "daemon.h"
#include "frame.h"
#include "log.h"
#include "server.h"
#include "session.h"

/* Connections accepted per wakeup before others get a turn. */
#define ACCEPT_BURST		64
/* Out of fds: stop accepting this long, or the loop would spin. */
#define ACCEPT_PAUSE_MS		100
/* The name the .socket unit gives our fd (FileDescriptorName=). */
#define LISTEN_FD_NAME		"control"

struct ibvd_server {
	struct ibvd_daemon *d;
	int fd;
	int activated;			/* from systemd: not ours to unlink */
	char *path;
	dev_t file_dev;			/* the socket file we created */
	ino_t file_ino;
	gid_t made_gid;			/* its group as bind() made it */
	int have_admin_gid;		/* the config's admin_group exists */
	gid_t admin_gid;
	struct event *accept_ev;
	struct event *resume_ev;
	struct ibvd_ratelimit refuse_rl;
	uint64_t hung_up;		/* peers gone before they were served */
};

/* ---- socket activation ------------------------------------------------ */

/* Which of the n inherited fds to serve: "control", else the only one. */
static int pick_listen_fd(int n, char **names)
{
	int i;

	for (i = 0; names && i < n; i++)
		if (names[i] && strcmp(names[i], LISTEN_FD_NAME) == 0)
			return SD_LISTEN_FDS_START + i;
	return n == 1 ? SD_LISTEN_FDS_START : -1;
}

static void free_names(char **names)
{
	char **p;

	for (p = names; p && *p; p++)
		free(*p);
	free(names);
}

/* 1 and the fd in *ret_fd if systemd passed one, 0 if none, or -errno. */
static int inherit_fd(int *ret_fd, char *err, size_t errlen)
{
	char **names = NULL;
	int n, fd, i;

	n = sd_listen_fds_with_names(1, &names);
	if (n <= 0) {
		free_names(names);
		if (n < 0)
			snprintf(err, errlen, "socket activation: %s", strerror(-n));
		return n;
	}
	fd = pick_listen_fd(n, names);
	free_names(names);
	for (i = SD_LISTEN_FDS_START; i < SD_LISTEN_FDS_START + n; i++)
		if (i != fd) {
			log_warn("socket activation: ignoring extra fd %d", i);
			close(i);
		}
	if (fd < 0) {
		snprintf(err, errlen, "socket activation: %d fds and none named \"%s\"",
			 n, LISTEN_FD_NAME);
		return -EINVAL;
	}
	if (sd_is_socket_unix(fd, SOCK_SEQPACKET, 1, NULL, 0) <= 0) {
		snprintf(err, errlen, "socket activation: fd %d is not a listening "
			 "SOCK_SEQPACKET Unix socket", fd);
		close(fd);
		return -EINVAL;
	}
	*ret_fd = fd;
	return 1;
}

/* ---- our own socket --------------------------------------------------- */

static int fill_sun(struct sockaddr_un *sun, const char *path,
		    char *err, size_t errlen)
{
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	if (!*path || strlen(path) >= sizeof(sun->sun_path)) {
		snprintf(err, errlen, "socket path \"%s\" is empty or too long", path);
		return -ENAMETOOLONG;
	}
	strcpy(sun->sun_path, path);
	return 0;
}

/*
 * A directory on the way to our socket must be ours or root's, and
 * nobody else may rename or replace what it holds: else another user
 * could put a socket of theirs where clients look for ours (made before
 * we start, or swapped in after), and clients hand the daemon their
 * memory.  Group- or world-writable is fine with the sticky bit (/tmp).
 */
static int dir_trusted(const char *dir, char *err, size_t errlen)
{
	struct stat st;

	if (lstat(dir, &st) < 0) {
		int ret = -errno;

		snprintf(err, errlen, "cannot look at %s: %s", dir, strerror(-ret));
		return ret;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s is not a directory (a symbolic link?)", dir);
		return -ENOTDIR;
	}
	if (st.st_uid != 0 && st.st_uid != geteuid()) {
		snprintf(err, errlen, "%s belongs to uid %u, neither root nor us: another user could replace our socket",
			 dir, (unsigned int)st.st_uid);
		return -EPERM;
	}
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
		snprintf(err, errlen, "%s is writable by others without the sticky bit: another user could replace our socket",
			 dir);
		return -EPERM;
	}
	return 0;
}

/*
 * mkdir -p of the directory that holds path, each directory on the way
 * trusted (dir_trusted); one made here is 0755 whatever the umask.
 */
static int make_parent_dirs(const char *path, char *err, size_t errlen)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *p;
	int ret;

	snprintf(dir, sizeof(dir), "%s", path);
	p = strrchr(dir, '/');
	if (!p || p == dir)
		return 0;
	*p = '\0';
	for (p = dir + 1; ; p++) {
		char c = *p;

		if (c != '/' && c != '\0')
			continue;
		*p = '\0';
		if (mkdir(dir, 0755) == 0) {
			chmod(dir, 0755);
		} else if (errno != EEXIST) {
			ret = -errno;
			snprintf(err, errlen, "cannot create %s: %s", dir, strerror(-ret));
			return ret;
		}
		ret = dir_trusted(dir, err, errlen);
		if (ret < 0)
			return ret;
		*p = c;
		if (!c)
			return 0;
	}
}

/*
 * A socket file already at path is either a live daemon (refuse) or left
 * over from one that died (remove).  Only a refused connection proves it
 * dead; anything else is left for the admin to look at.
 */
static int clear_stale_socket(const struct sockaddr_un *sun,
			      char *err, size_t errlen)
{
	struct stat st;
	int fd, ret;

	if (lstat(sun->sun_path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen, "%s exists and is not a socket", sun->sun_path);
		return -EEXIST;
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	ret = connect(fd, (const struct sockaddr *)sun, sizeof(*sun)) < 0 ? -errno : 0;
	close(fd);
	if (ret == -ECONNREFUSED) {
		if (unlink(sun->sun_path) < 0 && errno != ENOENT)
			ret = -errno;
		else
			ret = 0;
		if (ret == 0)
			log_info("removed stale socket %s", sun->sun_path);
		else
			snprintf(err, errlen, "cannot remove stale socket %s: %s",
				 sun->sun_path, strerror(-ret));
		return ret;
	}
	if (ret == 0 || ret == -EAGAIN || ret == -EPROTOTYPE)
		snprintf(err, errlen, "another daemon is listening on %s", sun->sun_path);
	else
		snprintf(err, errlen, "%s is in the way: %s", sun->sun_path,
			 strerror(-ret));
	return -EADDRINUSE;
}

static int lookup_group(const char *group, gid_t *gid)
{
	struct group *gr = getgrnam(group);
	char *end;
	unsigned long n;

	if (gr) {
		*gid = gr->gr_gid;
		return 0;
	}
	n = strtoul(group, &end, 10);
	if (*group && !*end && n < (gid_t)-1) {
		*gid = (gid_t)n;
		return 0;
	}
	return -ENOENT;
}

/* chmod through an O_PATH fd: fchmod() refuses one, its /proc link not. */
static int chmod_fd(int fd, mode_t mode)
{
	char proc_path[64];

	snprintf(proc_path, sizeof(proc_path), "/proc/self/fd/%d", fd);
	return chmod(proc_path, mode) < 0 ? -errno : 0;
}

/*
 * Give the socket (fd, now st) to gid (group its name, or NULL) and mode.
 * While the group changes, the mode is what both the old and the new one
 * allow: neither group holds, even for a moment, a right that only the
 * other was to have.  A step that fails undoes the others (a daemon that
 * dropped its privileges may not give the socket to another group).
 */
static int change_access(int fd, const struct stat *st, mode_t mode, gid_t gid,
			 const char *group, const char *path, char *err,
			 size_t errlen)
{
	bool regroup = gid != (gid_t)-1 && gid != st->st_gid;
	mode_t old_mode = st->st_mode & 07777;
	char gid_name[16];
	int ret = 0;

	if (regroup) {
		ret = chmod_fd(fd, old_mode & mode);
		if (ret < 0) {
			snprintf(err, errlen, "chmod %04o %s: %s",
				 (unsigned int)(old_mode & mode), path,
				 strerror(-ret));
			return ret;
		}
		if (fchownat(fd, "", (uid_t)-1, gid, AT_EMPTY_PATH) < 0) {
			ret = -errno;
			snprintf(gid_name, sizeof(gid_name), "%u", (unsigned int)gid);
			snprintf(err, errlen, "chgrp %s %s: %s",
				 group ? group : gid_name, path, strerror(-ret));
			(void)chmod_fd(fd, old_mode);
			return ret;
		}
	}
	ret = chmod_fd(fd, mode);
	if (ret < 0) {
		snprintf(err, errlen, "chmod %04o %s: %s", (unsigned int)mode, path,
			 strerror(-ret));
		if (regroup)
			(void)fchownat(fd, "", (uid_t)-1, st->st_gid, AT_EMPTY_PATH);
		(void)chmod_fd(fd, old_mode);
	}
	return ret;
}

/*
 * chmod and chgrp (gid -1: keep) the socket file we bound, never what a
 * symlink put in its place points to: open the path itself (O_PATH |
 * O_NOFOLLOW), check that it is still our socket, and change that inode
 * through the fd.
 */
static int apply_access(const struct ibvd_server *srv, mode_t mode, gid_t gid,
			const char *group, char *err, size_t errlen)
{
	const char *path = srv->path;
	struct stat st;
	int fd, ret;

	fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		goto out;
	}
	if (!S_ISSOCK(st.st_mode) || st.st_dev != srv->file_dev ||
	    st.st_ino != srv->file_ino) {
		snprintf(err, errlen, "%s is no longer the socket the daemon bound",
			 path);
		ret = -ESTALE;
		goto out;
	}
	ret = change_access(fd, &st, mode, gid, group, path, err, errlen);
out:
	if (fd >= 0)
		close(fd);
	return ret;
}

/* The gid of the configured group (-1 for none) into *gid. */
static int group_gid(const char *group, gid_t *gid, char *err, size_t errlen)
{
	*gid = (gid_t)-1;
	if (group && *group && lookup_group(group, gid) < 0) {
		snprintf(err, errlen, "socket group \"%s\" does not exist", group);
		return -ENOENT;
	}
	return 0;
}

static int bind_socket(struct ibvd_server *srv, const char *path, mode_t mode,
		       const char *group, char *err, size_t errlen)
{
	struct sockaddr_un sun;
	struct stat st;
	gid_t gid;
	int ret;

	ret = fill_sun(&sun, path, err, errlen);
	if (ret == 0)
		ret = make_parent_dirs(path, err, errlen);
	if (ret == 0)
		ret = clear_stale_socket(&sun, err, errlen);
	if (ret < 0)
		return ret;
	srv->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (srv->fd < 0 ||
	    bind(srv->fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		ret = -errno;
		snprintf(err, errlen, "bind %s: %s", path, strerror(-ret));
		return ret;
	}
	/* From here on the file is ours to remove, whatever fails next. */
	srv->path = strdup(path);
	ret = !srv->path ? -ENOMEM : stat(path, &st) < 0 ? -errno : 0;
	if (ret < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		unlink(path);
		return ret;
	}
	srv->file_dev = st.st_dev;
	srv->file_ino = st.st_ino;
	srv->made_gid = st.st_gid;
	ret = group_gid(group, &gid, err, errlen);
	if (ret == 0)
		ret = apply_access(srv, mode, gid, group, err, errlen);
	if (ret == 0 && listen(srv->fd, SOMAXCONN) < 0) {
		ret = -errno;
		snprintf(err, errlen, "listen %s: %s", path, strerror(-ret));
	}
	return ret;
}

static int set_nonblock_cloexec(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	fl = fcntl(fd, F_GETFD);
	if (fl < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0)
		return -errno;
	return 0;
}

/* The path an inherited socket is bound to, for logs and ibvctl. */
static char *bound_path(int fd)
{
	struct sockaddr_un sun;
	socklen_t len = sizeof(sun);

	memset(&sun, 0, sizeof(sun));
	if (getsockname(fd, (struct sockaddr *)&sun, &len) < 0 || !sun.sun_path[0])
		return strdup("(inherited)");
	sun.sun_path[sizeof(sun.sun_path) - 1] = '\0';
	return strdup(sun.sun_path);
}

/*
 * Every message a client sends then carries the kernel's word on who sent
 * it (SCM_CREDENTIALS): privileges are the sender's at each request, not
 * only at connect (ibvd_call_privileged).  Set on the listener, so that
 * an accepted socket has it from its first message: set after accept(),
 * a message sent meanwhile would come without (the kernel adds them to
 * those sent before accept() anyway).
 */
static int pass_credentials(int fd, char *err, size_t errlen)
{
	int on = 1, ret;

	if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) == 0)
		return 0;
	ret = -errno;
	snprintf(err, errlen, "SO_PASSCRED: %s", strerror(-ret));
	return ret;
}

int ibvd_server_open(struct ibvd_server **ret_srv, const char *path,
		     mode_t mode, const char *group, char *err, size_t errlen)
{
	struct ibvd_server *srv = calloc(1, sizeof(*srv));
	int fd, ret;

	if (!srv)
		return -ENOMEM;
	srv->fd = -1;
	srv->refuse_rl.burst = 1;
	ret = inherit_fd(&fd, err, errlen);
	if (ret > 0) {
		srv->activated = 1;
		srv->fd = fd;
		srv->path = bound_path(fd);
		ret = srv->path ? set_nonblock_cloexec(fd) : -ENOMEM;
		if (ret < 0)
			snprintf(err, errlen, "inherited socket: %s", strerror(-ret));
	} else if (ret == 0) {
		ret = bind_socket(srv, path, mode, group, err, errlen);
	}
	if (ret == 0)
		ret = pass_credentials(srv->fd, err, errlen);
	if (ret < 0) {
		ibvd_server_free(srv);
		return ret;
	}
	*ret_srv = srv;
	return 0;
}

/* ---- accept ----------------------------------------------------------- */

/*
 * Look up the config's admin group now, not at every accept (NSS may be
 * slow): at start, and at each reload (it may exist only since).
 */
void ibvd_server_lookup_admin(struct ibvd_server *srv)
{
	const char *name = srv->d->cfg ? srv->d->cfg->admin_group : NULL;
	char why[128];
	gid_t gid = 0;
	int ret = name ? ibvd_config_lookup_group(name, &gid, why, sizeof(why)) :
			 -ENOENT;

	/* A name or a decimal gid, as the limits' group rules take; one that
	 * does not exist is usual (the default's), one NSS fails on is not. */
	srv->have_admin_gid = ret == 0;
	srv->admin_gid = srv->have_admin_gid ? gid : 0;
	if (ret == -EIO)
		log_warn("admin_group: %s: only root administers", why);
}

/*
 * Whether the peer had gid among its supplementary groups when it
 * connected: SO_PEERGROUPS, like SO_PEERCRED, reports the credentials of
 * connect() time, whatever the process became since.
 */
static int peer_in_group(int fd, gid_t gid)
{
	gid_t small[64], *groups = small;
	socklen_t len = sizeof(small);
	size_t i, n;
	int found = 0;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0) {
		/* ERANGE: len now says how much room it takes. */
		if (errno != ERANGE || !(groups = malloc(len)))
			return 0;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
			len = 0;
	}
	n = len / sizeof(*groups);
	for (i = 0; i < n && !found; i++)
		found = groups[i] == gid;
	if (groups != small)
		free(groups);
	return found;
}

/* Root, or a member of the admin group: may administer, and is not capped. */
static int peer_privileged(const struct ibvd_server *srv, int fd,
			   const struct ucred *cred)
{
	if (cred->uid == 0)
		return 1;
	if (!srv->have_admin_gid)
		return 0;
	return cred->gid == srv->admin_gid || peer_in_group(fd, srv->admin_gid);
}

/* Why a new connection from cred cannot be served, or NULL if it can. */
static const char *over_limit(const struct ibvd_daemon *d,
			      const struct ucred *cred, int privileged)
{
	if (d->nsessions >= IBVD_MAX_SESSIONS)
		return "too many clients";
	if (privileged)
		return NULL;
	/* The last slots stay free for root to look at what is going on. */
	if (d->nsessions >= IBVD_MAX_SESSIONS - IBVD_SESSIONS_RESERVED)
		return "too many clients";
	/* a uid's own share is its "session" limit (ibvd_session_new) */
	return NULL;
}

/*
 * Tell the client why before closing, so that it reports more than a
 * closed connection.  req_id 0 is never a request's: the Error is about
 * the connection.
 */
static void refuse(struct ibvd_server *srv, int fd, const struct ucred *cred,
		   const char *why)
{
	ibvd_frame_send_error(fd, 0, EAGAIN, why, MSG_DONTWAIT);
	ibvd_close_client_socket(fd);
	ibvd_log_ratelimited(&srv->refuse_rl, IBVD_LOG_WARNING,
			     "refusing a connection from pid %d uid %u: %s",
			     (int)cred->pid, (unsigned int)cred->uid, why);
}

static void pause_accepting(struct ibvd_server *srv, int err)
{
	struct timeval tv = { 0, ACCEPT_PAUSE_MS * 1000 };

	ibvd_log_ratelimited(&srv->refuse_rl, IBVD_LOG_WARNING,
			     "accept: %s; pausing for %d ms", strerror(err),
			     ACCEPT_PAUSE_MS);
	event_del(srv->accept_ev);
	evtimer_add(srv->resume_ev, &tv);
}

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ibvd_server *srv = arg;

	event_add(srv->accept_ev, NULL);
}

/*
 * Whether the peer closed its end before saying anything: nothing to
 * serve, nobody to answer.  A client that connects and closes as fast as
 * it can fills the listen backlog with such connections, which everyone
 * else's connect waits behind; a session for each (its /proc reads, its
 * events, a wakeup to find the EOF) made that wait about a second.  A
 * peer that sent a frame before closing still gets its session.  (A
 * zero-length message reads as gone too: a session takes it for the end,
 * or with fds for a malformed frame, and hangs up as well.)
 */
static bool peer_gone(int fd)
{
	char c;

	return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/*
 * Close a connection found gone.  Not simply: a zero-length message
 * reads as the end too, and one may carry fds (or others wait behind it)
 * whose close blocks.  Those go to the uid's queue; the connection,
 * emptied, is closed at once (ibvd_close_gone_socket): queued, a uid
 * connecting and closing in a loop faster than the closer threads get
 * the CPU filled the daemon's fd table.
 */
static void hang_up(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
		ibvd_closer_own(fd, cred.uid);
	ibvd_close_gone_socket(fd);
}

/* Serve an accepted connection, or refuse it. */
static void accept_client(struct ibvd_server *srv, int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	const char *why;
	int privileged, ret;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		ret = -errno;
		log_warn("cannot set up a client: SO_PEERCRED: %s", strerror(-ret));
		ibvd_close_client_socket(fd);
		return;
	}
	ibvd_closer_own(fd, cred.uid);
	privileged = peer_privileged(srv, fd, &cred);
	why = over_limit(srv->d, &cred, privileged);
	if (why) {
		refuse(srv, fd, &cred, why);
		return;
	}
	ret = ibvd_session_new(srv->d, fd, &cred, privileged, NULL);
	/* over its uid's session limit: the tenant's log line says so */
	if (ret < 0 && ret != -EAGAIN)
		log_warn("cannot set up a client: %s", strerror(-ret));
}

static void accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	struct ibvd_server *srv = arg;
	int i, fd;

	for (i = 0; i < ACCEPT_BURST; i++) {
		fd = accept4(srv->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM)
				pause_accepting(srv, errno);
			else if (errno != EAGAIN)
				log_warn("accept: %s", strerror(errno));
			return;
		}
		if (peer_gone(fd)) {
			srv->hung_up++;
			hang_up(fd);
			continue;
		}
		accept_client(srv, fd);
	}
}

int ibvd_server_start(struct ibvd_server *srv, struct ibvd_daemon *d)
{
	int ret;

	srv->d = d;
	ibvd_server_lookup_admin(srv);
	ret = ibvd_sessions_start(d);
	if (ret < 0)
		return ret;
	srv->accept_ev = event_new(d->base, srv->fd, EV_READ | EV_PERSIST,
				   accept_cb, srv);
	srv->resume_ev = evtimer_new(d->base, resume_cb, srv);
	if (!srv->accept_ev || !srv->resume_ev)
		return -ENOMEM;
	return event_add(srv->accept_ev, NULL) < 0 ? -ENOMEM : 0;
}

uint64_t ibvd_server_hung_up(const struct ibvd_server *srv)
{
	return srv ? srv->hung_up : 0;	/* none before it listens */
}

const char *ibvd_server_path(const struct ibvd_server *srv)
{
	return srv->path;
}

int ibvd_server_activated(const struct ibvd_server *srv)
{
	return srv->activated;
}

int ibvd_server_set_access(struct ibvd_server *srv, mode_t mode,
			   const char *group, char *err, size_t errlen)
{
	gid_t gid;
	int ret;

	if (srv->activated)
		return 0;
	ret = group_gid(group, &gid, err, errlen);
	/* none after one: back to the group it was made with */
	if (ret == 0 && gid == (gid_t)-1)
		gid = srv->made_gid;
	return ret < 0 ? ret : apply_access(srv, mode, gid, group, err, errlen);
}

/* Remove the socket file, unless someone replaced it since we bound it. */
static void remove_socket_file(const struct ibvd_server *srv)
{
	struct stat st;

	if (stat(srv->path, &st) < 0)
		return;
	if (st.st_dev == srv->file_dev && st.st_ino == srv->file_ino)
		unlink(srv->path);
}

void ibvd_server_free(struct ibvd_server *srv)
{
	if (!srv)
		return;
	if (srv->accept_ev)
		event_free(srv->accept_ev);
	if (srv->resume_ev)
		event_free(srv->resume_ev);
	if (srv->fd >= 0)
		close(srv->fd);
	if (!srv->activated && srv->path && srv->file_ino)
		remove_socket_file(srv);
	free(srv->path);
	free(srv);
}
