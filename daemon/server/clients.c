/*
 * Snapshots of sessions for the layers above the server (clients.h).
 */
#include <config.h>

#include <string.h>

#include "clients.h"
#include "session.h"

void ibvd_client_info(const struct ibvd_session *s,
		      struct ibvd_client_info *out)
{
	memset(out, 0, sizeof(*out));
	out->session = s;
	out->id = s->id;
	out->pid = s->cred.pid;
	out->uid = s->cred.uid;
	out->gid = s->cred.gid;
	out->comm = s->comm;
	out->cgroup = s->ident.cgroup;
	out->state = s->state;
	out->privileged = s->privileged;
	out->tenant = s->tenant;
	out->ctx = s->state == IBVD_SESSION_CONTEXT ? s->ctx : NULL;
}

int ibvd_clients_foreach(const struct ibvd_daemon *d,
			 int (*fn)(const struct ibvd_client_info *c, void *arg),
			 void *arg)
{
	const struct ibvd_session *s;
	struct ibvd_client_info info;
	int ret;

	TAILQ_FOREACH(s, &d->sessions, link) {
		ibvd_client_info(s, &info);
		ret = fn(&info, arg);
		if (ret)
			return ret;
	}
	return 0;
}

void ibvd_client_become_admin(struct ibvd_session *s)
{
	s->state = IBVD_SESSION_ADMIN;
}
