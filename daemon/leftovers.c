/*
 * The daemon's leftovers in root's directories.
 *
 * Started as root with a "user", the daemon binds its socket and makes the
 * /dev/infiniband links as root, then becomes that user (privilege.c), who
 * may write neither the socket's directory nor /dev/infiniband.  So before
 * the drop a child is forked that keeps uid 0 but no capability, closes
 * every fd but the read end of a pipe whose write end only the daemon
 * holds, and waits.  End of file on the pipe means the daemon is gone
 * (stopped, crashed or killed); the child then removes the socket, if it
 * is still the one bound, and the links still pointing at /dev/null, and
 * exits.  It reads nothing from the daemon but that end of file, so a
 * daemon taken over cannot make it do anything else.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "devlinks.h"
#include "leftovers.h"
#include "log.h"
#include "privilege.h"

#define WAIT_FD		3

static int daemon_end = -1;	/* the pipe's write end */
static pid_t leftovers_pid;

struct bound {
	char *path;		/* NULL: no socket of ours */
	dev_t dev;
	ino_t ino;
};

static void wait_for_eof(int fd)
{
	char c;
	ssize_t n;

	do
		n = read(fd, &c, 1);
	while (n > 0 || (n < 0 && errno == EINTR));
}

static void remove_socket(const struct bound *b)
{
	struct stat st;

	if (!b->path || lstat(b->path, &st) < 0)
		return;
	/* A daemon started since may have bound the path again. */
	if (S_ISSOCK(st.st_mode) && st.st_dev == b->dev && st.st_ino == b->ino)
		unlink(b->path);
}

static void __attribute__((noreturn)) leftovers_main(int fd, const struct bound *b)
{
	sigset_t none;

	prctl(PR_SET_NAME, "ibvd-leftovers", 0, 0, 0);
	/* Signals meant for the daemon's process group are not for us. */
	signal(SIGHUP, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if ((fd != WAIT_FD && (dup2(fd, WAIT_FD) < 0 || close(fd) < 0)) ||
	    syscall(SYS_close_range, WAIT_FD + 1, ~0U, 0) < 0 ||
	    ibvd_privilege_restrict(NULL, -1) < 0) {
		log_err("leftovers: cannot set up: %s", strerror(errno));
		_exit(1);
	}
	wait_for_eof(WAIT_FD);
	remove_socket(b);
	ibvd_devlinks_remove_all();
	_exit(0);
}

int ibvd_leftovers_start(const char *socket_path)
{
	struct bound b = { .path = NULL };
	struct stat st;
	int p[2];
	pid_t pid;

	if (socket_path && lstat(socket_path, &st) == 0 && S_ISSOCK(st.st_mode)) {
		b.path = (char *)socket_path;
		b.dev = st.st_dev;
		b.ino = st.st_ino;
	}
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -errno;
	}
	if (pid == 0) {
		close(p[1]);
		leftovers_main(p[0], &b);
	}
	/* The write end stays open, unwritten, until the daemon ends. */
	close(p[0]);
	daemon_end = p[1];
	leftovers_pid = pid;
	return 0;
}

void ibvd_leftovers_finish(void)
{
	int status;

	if (daemon_end < 0)
		return;
	close(daemon_end);
	daemon_end = -1;
	while (waitpid(leftovers_pid, &status, 0) < 0 && errno == EINTR)
		;
}
