/*
 * Client sessions: reading frames, fairness, timeouts, disconnects.
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "context.h"
#include "frame.h"
#include "log.h"
#include "notify.h"
#include "request.h"
#include "session.h"

/* Framing violations and slow readers: one line each, but not a flood. */
static struct ibvd_ratelimit drop_rl = IBVD_RATELIMIT_INIT(10);

unsigned int ibvd_session_idle_timeout(void)
{
	const char *env = getenv("IBVERBSD_IDLE_TIMEOUT");
	char *end;
	unsigned long secs;

	if (!env || !*env)
		return IBVD_SESSION_IDLE_TIMEOUT;
	secs = strtoul(env, &end, 10);
	if (*end || secs == 0 || secs > 86400)
		return IBVD_SESSION_IDLE_TIMEOUT;
	return (unsigned int)secs;
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

static void log_drop(const struct ibvd_session *s, const char *why)
{
	unsigned int missed;

	if (!ibvd_ratelimit_ok(&drop_rl, &missed))
		return;
	log_notice("client %llu (pid %d uid %u %s): %s; disconnecting%s",
		   (unsigned long long)s->id, (int)s->cred.pid,
		   (unsigned int)s->cred.uid, s->comm, why,
		   missed ? " (similar messages suppressed)" : "");
}

static void session_destroy(struct ibvd_session *s)
{
	struct ibvd_daemon *d = s->daemon;

	if (s->ctx)
		ibvd_context_free(s->ctx);
	event_free(s->read_ev);
	event_free(s->idle_ev);
	close(s->fd);
	TAILQ_REMOVE(&d->sessions, s, link);
	d->nsessions--;
	log_debug("client %llu: closed", (unsigned long long)s->id);
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
		ibvd_context_free(s->ctx);
	if (s->in_callback) {
		s->closing = 1;
		event_del(s->read_ev);
		return;
	}
	session_destroy(s);
}

void ibvd_session_close_all(struct ibvd_daemon *d)
{
	struct ibvd_session *s;

	while ((s = TAILQ_FIRST(&d->sessions)))
		session_destroy(s);
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

static void session_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ibvd_session *s = arg;
	struct ibvd_frame frame;
	unsigned int i;
	int ret;

	s->in_callback = 1;
	/* At most a burst per wakeup; the event fires again if more wait. */
	for (i = 0; i < IBVD_SESSION_BURST && !s->closing; i++) {
		ret = ibvd_frame_recv(s->fd, s->daemon->rxbuf, IBVD_FRAME_MAX,
				      &frame, MSG_DONTWAIT);
		if (ret == -EAGAIN)
			break;
		if (ret <= 0) {
			session_lost(s, ret, &frame);
			break;
		}
		evtimer_del(s->idle_ev);
		ibvd_request_dispatch(s, &frame);
	}
	s->in_callback = 0;
	if (s->closing)
		session_destroy(s);
}

static void session_idle_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ibvd_session *s = arg;

	log_drop(s, "sent nothing since it connected");
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

int ibvd_session_new(struct ibvd_daemon *d, int fd)
{
	struct ibvd_session *s = calloc(1, sizeof(*s));
	socklen_t len = sizeof(s->cred);
	int ret;

	if (!s) {
		close(fd);
		return -ENOMEM;
	}
	s->daemon = d;
	s->fd = fd;
	s->id = ++d->next_session_id;
	s->state = IBVD_SESSION_FRESH;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &s->cred, &len) < 0) {
		ret = -errno;
		goto fail;
	}
	read_comm(s->cred.pid, s->comm, sizeof(s->comm));
	ret = session_events(s);
	if (ret < 0)
		goto fail;
	TAILQ_INSERT_TAIL(&d->sessions, s, link);
	d->nsessions++;
	log_debug("client %llu: connected: pid %d uid %u gid %u comm %s",
		  (unsigned long long)s->id, (int)s->cred.pid,
		  (unsigned int)s->cred.uid, (unsigned int)s->cred.gid, s->comm);
	ibvd_notify_status(d->notify);
	return 0;
fail:
	if (s->read_ev)
		event_free(s->read_ev);
	if (s->idle_ev)
		event_free(s->idle_ev);
	close(fd);
	free(s);
	return ret;
}
