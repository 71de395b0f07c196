/*
 * Client sessions: reading frames, fairness, timeouts, disconnects.
 */
#include <config.h>

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "call.h"
#include "closer.h"
#include "frame.h"
#include "log.h"
#include "notify.h"
#include "session.h"
#include "util.h"

/* ---- sessions whose uid's closes are stuck ---------------------------- */

/* How often paused sessions look whether their uid's queue went down. */
#define PAUSE_RETRY_MS		100

static struct event *resume_ev;

static void session_arm_idle(struct ibvd_session *s);

/* Not read, nor idle: its frames wait, unread. */
static void session_pause(struct ibvd_session *s)
{
	struct timeval tv = { 0, PAUSE_RETRY_MS * 1000 };

	s->paused = 1;
	event_del(s->read_ev);
	evtimer_del(s->idle_ev);
	if (!evtimer_pending(resume_ev, NULL))
		evtimer_add(resume_ev, &tv);
}

static void sessions_resume_cb(evutil_socket_t unused, short what, void *arg)
{
	struct ibvd_daemon *d = arg;
	struct ibvd_session *s;
	bool still_paused = false;

	TAILQ_FOREACH(s, &d->sessions, link) {
		if (!s->paused || s->closing)
			continue;
		if (ibvd_closer_backed_up(s->cred.uid)) {
			still_paused = true;
			continue;
		}
		s->paused = 0;
		event_add(s->read_ev, NULL);
		session_arm_idle(s);
	}
	if (still_paused) {
		struct timeval tv = { 0, PAUSE_RETRY_MS * 1000 };

		evtimer_add(resume_ev, &tv);
	}
}

int ibvd_sessions_start(struct ibvd_daemon *d)
{
	int ret;

	resume_ev = evtimer_new(d->base, sessions_resume_cb, d);
	if (!resume_ev)
		return -ENOMEM;
	ret = ibvd_closer_start(d->base);
	if (ret < 0) {
		event_free(resume_ev);
		resume_ev = NULL;
	}
	return ret;
}

unsigned int ibvd_session_idle_timeout(void)
{
	/* Read once: it is re-armed after every busy wakeup. */
	static unsigned int secs;

	if (!secs)
		secs = (unsigned int)ibvd_env_or("IBVERBSD_IDLE_TIMEOUT",
						 IBVD_SESSION_IDLE_TIMEOUT, 1,
						 86400);
	return secs;
}

/* The peer names itself; keep its name printable before it reaches a log. */
static void read_comm(pid_t pid, char *comm, size_t len)
{
	char path[64];
	FILE *f;
	size_t n = 0;

	snprintf(comm, len, "?");
	if (pid <= 0)
		return;
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(comm, (int)len, f))
		n = strcspn(comm, "\n");
	fclose(f);
	comm[n] = '\0';
	for (char *p = comm; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			*p = '?';
	if (!n)
		snprintf(comm, len, "?");
}

/* ---- sessions ---------------------------------------------------------- */

/* Its uid's log budget: one uid's broken clients cannot hide another's. */
static void log_drop(const struct ibvd_session *s, const char *why)
{
	ibvd_tenant_log(s->tenant, IBVD_LOG_NOTICE,
			"client %llu (pid %d uid %u %s): %s; disconnecting",
			(unsigned long long)s->id, (int)s->cred.pid,
			(unsigned int)s->cred.uid, s->comm, why);
}

static void session_destroy(struct ibvd_session *s)
{
	struct ibvd_daemon *d = s->daemon;

	if (s->ctx)
		s->daemon->up.context_leave(s);
	/*
	 * CM ids go here, not in ibvd_session_close(): a handler of this
	 * session may still hold one, and the session's own events stop as
	 * soon as it is closing.
	 */
	d->up.cm_free(s);
	event_free(s->read_ev);
	event_free(s->idle_ev);
	ibvd_close_client_socket(s->fd);
	TAILQ_REMOVE(&d->sessions, s, link);
	d->nsessions--;
	log_debug("client %llu: closed", (unsigned long long)s->id);
	ibvd_tenant_uncharge(s->tenant, IBVD_LIMIT_SESSION, 1);
	ibvd_tenant_put(s->tenant);
	free(s);
	ibvd_notify_status(d->notify);
}

void ibvd_session_close(struct ibvd_session *s)
{
	/*
	 * Release the device context now, so nothing outlives its device
	 * (reload frees removed devices right after closing their sessions);
	 * only the session itself waits for its callback to return.
	 */
	if (s->ctx)
		s->daemon->up.context_leave(s);
	if (s->in_callback) {
		/* No request may find a context session without its context. */
		s->state = IBVD_SESSION_CLOSED;
		s->closing = 1;
		event_del(s->read_ev);
		event_del(s->idle_ev);
		return;
	}
	session_destroy(s);
}

void ibvd_session_close_all(struct ibvd_daemon *d)
{
	struct ibvd_session *s;

	while ((s = TAILQ_FIRST(&d->sessions)))
		session_destroy(s);
	ibvd_closer_stop();
	if (resume_ev) {
		event_free(resume_ev);
		resume_ev = NULL;
	}
}

int ibvd_session_send(struct ibvd_session *s, uint16_t type, uint32_t req_id,
		      const ProtobufCMessage *msg, const int *fds,
		      unsigned int nfds)
{
	char why[128];
	int ret;

	if (s->closing)
		return -EPIPE;
	ret = ibvd_frame_send(s->fd, type, req_id, msg, fds, nfds, MSG_DONTWAIT);
	if (ret == 0)
		return 0;
	if (ret == -EMSGSIZE) {
		log_warn("client %llu: %s reply does not fit in a frame",
			 (unsigned long long)s->id, ibvd_msg_type_name(type));
		return ret;
	}
	if (ret == -EAGAIN) {
		ibvd_tenant_slow_reader(s->tenant);
		log_drop(s, "not reading its replies (socket full)");
	} else if (ret != -EPIPE && ret != -ECONNRESET) {
		snprintf(why, sizeof(why), "send failed: %s", strerror(-ret));
		log_drop(s, why);
	}
	ibvd_session_close(s);
	return ret;
}

/* recv failed or EOF: say why (unless it is a plain goodbye) and close. */
static void session_lost(struct ibvd_session *s, int ret,
			 const struct ibvd_frame *frame)
{
	if (ret == 0 || ret == -ECONNRESET) {
		log_debug("client %llu: disconnected", (unsigned long long)s->id);
	} else if (ret == -EPROTO) {
		/* A newer or older client: tell it why before hanging up. */
		ibvd_frame_send_error(s->fd, frame->hdr.req_id, EPROTO,
				      "unsupported protocol version",
				      MSG_DONTWAIT);
		log_drop(s, "unsupported protocol version");
	} else if (ret == -EBADMSG) {
		log_drop(s, "malformed frame (short header, bad magic or length)");
	} else if (ret == -EMSGSIZE) {
		log_drop(s, "frame too large or too many fds");
	} else {
		log_drop(s, strerror(-ret));
	}
	ibvd_session_close(s);
}

/*
 * A fresh or admin connection holds nothing worth keeping: it is dropped
 * once silent for the idle timeout (counted from its last frame), so that
 * idle connections cannot pile up to the connection caps.  A device
 * context or a CM session (a server waiting for connections) is the
 * client's to keep.
 */
static void session_arm_idle(struct ibvd_session *s)
{
	struct timeval idle = { .tv_sec = ibvd_session_idle_timeout() };

	if (s->state == IBVD_SESSION_CONTEXT || s->state == IBVD_SESSION_CM)
		evtimer_del(s->idle_ev);
	else
		evtimer_add(s->idle_ev, &idle);
}

/* The fds of a frame are its sender's: their closes go to its uid's queue. */
static void frame_fds_own(const struct ibvd_frame *frame, uid_t uid)
{
	unsigned int i;

	for (i = 0; i < frame->nfds; i++)
		ibvd_closer_own(frame->fds[i], uid);
}

/*
 * One frame per wakeup: the event fires again while more wait (it is
 * level-triggered), so one busy client cannot starve the rest; and the
 * client waiting for its reply has sent nothing more, so reading on would
 * cost a receive that finds nothing, one per request.  Returns whether a
 * request was handled.
 */
static bool session_read_one(struct ibvd_session *s)
{
	struct ibvd_frame frame;
	int ret;

	if (ibvd_closer_backed_up(s->cred.uid)) {
		session_pause(s);
		return false;
	}
	ibvd_closer_receiving(true);
	ret = ibvd_frame_recv(s->fd, s->daemon->rxbuf, IBVD_FRAME_MAX, &frame,
			      MSG_DONTWAIT);
	ibvd_closer_receiving(false);
	if (ret == -EAGAIN)
		return false;
	if (ret <= 0) {
		session_lost(s, ret, &frame);
		return false;
	}
	frame_fds_own(&frame, s->cred.uid);
	ibvd_call_dispatch(s, &frame);
	return true;
}

static void session_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ibvd_session *s = arg;
	bool handled;

	s->in_callback = 1;
	ibvd_closer_serving(s->cred.uid);
	handled = session_read_one(s);
	if (handled && !s->closing && !s->paused)
		session_arm_idle(s);
	s->in_callback = 0;
	if (s->closing)
		session_destroy(s);
	ibvd_closer_serving_none();
}

static void session_idle_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ibvd_session *s = arg;
	char why[64];

	snprintf(why, sizeof(why), "silent for %u s",
		 ibvd_session_idle_timeout());
	log_drop(s, why);
	ibvd_session_close(s);
}

static int session_events(struct ibvd_session *s)
{
	struct timeval idle = { .tv_sec = ibvd_session_idle_timeout() };
	struct event_base *base = s->daemon->base;

	s->read_ev = event_new(base, s->fd, EV_READ | EV_PERSIST,
			       session_read_cb, s);
	s->idle_ev = evtimer_new(base, session_idle_cb, s);
	if (!s->read_ev || !s->idle_ev)
		return -ENOMEM;
	if (event_add(s->read_ev, NULL) < 0 || evtimer_add(s->idle_ev, &idle) < 0)
		return -ENOMEM;
	return 0;
}

/*
 * One of its uid's "session" limit; root and the admin group are counted
 * but never refused, so that they can always look at what is going on.
 * Over the limit the client is told why (EAGAIN, as the server's own
 * "too many clients") before the connection closes.
 */
static int charge_session(struct ibvd_session *s)
{
	const struct ibvd_daemon *d = s->daemon;
	int ret;

	/*
	 * The daemon's own cap, its last slots kept for root and the admin
	 * group, as accept applies it (server.c): also for a session made
	 * otherwise (IMPORT_DEVICE's socket).
	 */
	if (d->nsessions >= IBVD_MAX_SESSIONS ||
	    (!s->privileged &&
	     d->nsessions >= IBVD_MAX_SESSIONS - IBVD_SESSIONS_RESERVED)) {
		ibvd_frame_send_error(s->fd, 0, EAGAIN, "too many clients",
				      MSG_DONTWAIT);
		return -EAGAIN;
	}
	if (s->privileged) {
		ibvd_tenant_charge_always(s->tenant, IBVD_LIMIT_SESSION, 1);
		return 0;
	}
	ret = ibvd_tenant_charge(s->tenant, IBVD_LIMIT_SESSION, 1, "connecting");
	if (ret < 0)
		ibvd_frame_send_error(s->fd, 0, EAGAIN,
				      "too many clients of this uid",
				      MSG_DONTWAIT);
	return ret;
}

/*
 * The peer's supplementary groups as the kernel says they were at
 * connect() (SO_PEERGROUPS), not as /proc says later: a client whose
 * process is gone by then would have none there, and match no group rule.
 * More than IBVD_PEER_GROUPS_MAX: the kernel refuses a short buffer
 * (ERANGE) rather than fill it, so they are all read and the first ones
 * kept; else such a client would match no group rule whenever /proc
 * cannot tell.  Only if that fails too do /proc's first ones stay.
 */
static void peer_groups(int fd, struct ibvd_peer_identity *id)
{
	gid_t small[IBVD_PEER_GROUPS_MAX], *groups = small;
	socklen_t len = sizeof(small);
	size_t n;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0) {
		/* ERANGE: len now says how much room they take */
		if (errno != ERANGE || !(groups = malloc(len)))
			return;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
			goto out;
	}
	n = len / sizeof(groups[0]);
	if (n > IBVD_PEER_GROUPS_MAX)
		n = IBVD_PEER_GROUPS_MAX;
	id->ngroups = n;
	memcpy(id->groups, groups, n * sizeof(groups[0]));
out:
	if (groups != small)
		free(groups);
}

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD	77	/* Linux 6.5; older kernels: ENOPROTOOPT */
#endif

/*
 * Whether the process that connected fd has exited.  /proc names it by
 * pid, and a process that took the pid of an exited client answers for
 * it there; ibvd_peer_identity_read() catches only a pid changing hands
 * between its own reads.  A pidfd of the socket's peer that shows it
 * still running after those reads shows that the pid was the client's
 * all along (a pid is not reused before its process is reaped).  An
 * exited or zombie peer reads as exited; a kernel without SO_PEERPIDFD
 * as running, as before.
 */
static bool peer_exited(int fd)
{
	struct pollfd pfd = { .events = POLLIN };
	socklen_t len = sizeof(pfd.fd);
	int n;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pfd.fd, &len) < 0)
		/* ESRCH or EINVAL: no such process any more */
		return errno == ESRCH || errno == EINVAL;
	n = poll(&pfd, 1, 0);
	close(pfd.fd);
	return n != 0;
}

/*
 * The limits' cgroup rules need the client's cgroup, which only /proc
 * tells.  Unknown (its process exited before we looked, or it is outside
 * our pid namespace), a uid's first session would give its tenant the
 * default rule, perhaps a looser one than its cgroup's, and the tenant
 * keeps it: refused then, unless a rule of its uid or groups applies
 * (those win over cgroups).  A uid whose tenant knows its cgroup has its
 * rule; one whose tenant does not (made before the limits had cgroup
 * rules) is refused too, or it could open sessions at the default limits
 * for as long as one of them stays.
 */
static bool cgroup_wanted(const struct ibvd_session *s)
{
	const struct ibvd_config *cfg = s->daemon->cfg;
	struct ibvd_limit_who who;

	if (s->privileged || s->ident.cgroup[0] ||
	    !ibvd_config_has_cgroup_rules(cfg) ||
	    ibvd_tenant_cgroup_known(s->ident.uid))
		return false;
	/* a rule of its uid or groups wins over any cgroup's */
	ibvd_peer_identity_who(&s->ident, &who);
	return !ibvd_config_limit_rule_for(cfg, &who);
}

/*
 * A uid at its session limit is refused before the peer's /proc reads,
 * which cost the control thread more than all the rest of a connection:
 * else a uid holding its limit and connecting in a loop made every other
 * uid wait on them.  Only where the new session cannot change its
 * tenant's limits (ibvd_tenant_get): the tenant's rule was chosen knowing
 * its cgroup, or no rule names a cgroup.  The charge is the one
 * charge_session() makes later, taken back at once: the same refusal,
 * counted and logged alike.
 */
static int refuse_early(struct ibvd_session *s)
{
	struct ibvd_tenant *t;
	int ret;

	if (s->privileged)
		return 0;
	t = ibvd_tenant_find(s->cred.uid);
	if (!t || (!t->ident.cgroup[0] &&
		   ibvd_config_has_cgroup_rules(s->daemon->cfg)))
		return 0;
	ret = ibvd_tenant_charge(t, IBVD_LIMIT_SESSION, 1, "connecting");
	if (ret < 0) {
		ibvd_frame_send_error(s->fd, 0, EAGAIN,
				      "too many clients of this uid",
				      MSG_DONTWAIT);
		return ret;
	}
	ibvd_tenant_uncharge(t, IBVD_LIMIT_SESSION, 1);
	return 0;
}

/*
 * Only a privileged session needs each message's sender
 * (ibvd_call_privileged): accepted sockets have SO_PASSCRED from the
 * listener (server.c), an imported one must get it before it carries a
 * request.  Others lose it: the credentials cost every request of theirs
 * a little of the control thread's time (bench/tenant-costs) for nothing.
 */
static void pass_credentials(const struct ibvd_session *s)
{
	int on = s->privileged;

	(void)setsockopt(s->fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on));
}

static struct ibvd_ratelimit unknown_rl = IBVD_RATELIMIT_INIT(1);

int ibvd_session_new(struct ibvd_daemon *d, int fd, const struct ucred *cred,
		     int privileged, struct ibvd_session **ret_s)
{
	struct ibvd_session *s = calloc(1, sizeof(*s));
	int ret;

	if (!s) {
		ibvd_close_client_socket(fd);
		return -ENOMEM;
	}
	s->daemon = d;
	s->fd = fd;
	ibvd_closer_own(fd, cred->uid);	/* an imported one is its peer's */
	s->id = ++d->next_session_id;
	s->state = IBVD_SESSION_FRESH;
	s->cred = *cred;
	s->privileged = privileged;
	pass_credentials(s);
	ret = refuse_early(s);
	if (ret < 0)
		goto fail;
	read_comm(s->cred.pid, s->comm, sizeof(s->comm));
	s->ident.pid = cred->pid;
	s->ident.uid = cred->uid;
	s->ident.gid = cred->gid;
	ibvd_peer_identity_read(&s->ident, "/proc");
	if (peer_exited(fd))
		ibvd_peer_identity_forget(&s->ident);
	peer_groups(fd, &s->ident);
	if (cgroup_wanted(s)) {
		ibvd_frame_send_error(fd, 0, EAGAIN,
				      "the daemon cannot read this client's cgroup, "
				      "which its limits need", MSG_DONTWAIT);
		ibvd_log_ratelimited(&unknown_rl, IBVD_LOG_WARNING,
				     "refusing a connection from pid %d uid %u: "
				     "its cgroup is unknown (exited, or outside "
				     "our pid namespace) and limits have cgroup "
				     "rules", (int)cred->pid,
				     (unsigned int)cred->uid);
		ret = -EAGAIN;
		goto fail;
	}
	s->tenant = ibvd_tenant_get(d->cfg, &s->ident);
	if (!s->tenant) {
		ret = -ENOMEM;
		goto fail;
	}
	ret = charge_session(s);
	if (ret < 0)
		goto fail;
	ret = session_events(s);
	if (ret < 0)
		goto fail_charged;
	TAILQ_INSERT_TAIL(&d->sessions, s, link);
	d->nsessions++;
	log_debug("client %llu: connected: pid %d uid %u gid %u comm %s cgroup %s%s",
		  (unsigned long long)s->id, (int)s->cred.pid,
		  (unsigned int)s->cred.uid, (unsigned int)s->cred.gid, s->comm,
		  s->ident.cgroup[0] ? s->ident.cgroup : "?",
		  privileged ? " (admin)" : "");
	ibvd_notify_status(d->notify);
	if (ret_s)
		*ret_s = s;
	return 0;
fail_charged:
	ibvd_tenant_uncharge(s->tenant, IBVD_LIMIT_SESSION, 1);
fail:
	if (s->read_ev)
		event_free(s->read_ev);
	if (s->idle_ev)
		event_free(s->idle_ev);
	ibvd_close_client_socket(fd);
	if (s->tenant)
		ibvd_tenant_put(s->tenant);
	free(s);
	return ret;
}
