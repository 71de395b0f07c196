/*
 * What ibvctl may read of the connection manager (cm.h): snapshots of ids,
 * so that the admin layer never walks the CM's own structures.
 */
#include <config.h>

#include <string.h>

#include "core/handle.h"
#include "internal.h"
#include "server/session.h"

static void fill(const struct ibvd_cm_id *id, struct ibvd_cm_id_info *out)
{
	memset(out, 0, sizeof(*out));
	out->owner = id->cm->session;
	out->idn = id->idn;
	out->lqpn = id->lqpn;
	out->qp_type = id->qp_type;
	out->state = cm_state_name(id->state);
	out->ps = cm_ps_name(id->ps);
	out->bound = id->dev != NULL;
	out->dev = id->dev ? id->dev : cm_default_device(id->cm);
	out->port_num = id->dev ? id->port_num : 0;
	if (id->src.ss_family) {
		cm_addr_str(&id->src, out->src, sizeof(out->src));
		out->src_port = cm_addr_port(&id->src);
	}
	if (id->dst.ss_family) {
		cm_addr_str(&id->dst, out->dst, sizeof(out->dst));
		out->dst_port = cm_addr_port(&id->dst);
	}
}

/*
 * A non-admin's listing (and every summary, ibvctl's default command)
 * passes its uid: other uids' ids are skipped before their snapshot,
 * whose addresses are formatted, so that a uid holding its 65,536 ids
 * does not make every other uid's `ibvctl resource show` look at them
 * all (about 30 ms of the control thread a request).
 */
int ibvd_cm_foreach_id(const uid_t *uid,
		       int (*fn)(const struct ibvd_cm_id_info *id, void *arg),
		       void *arg)
{
	const struct ibvd_cm_id *id;
	struct ibvd_cm_id_info info;
	int ret;

	TAILQ_FOREACH(id, &cm_world.ids, all_link) {
		if (uid && id->cm->session->cred.uid != *uid)
			continue;
		cm_world.listing_looks++;
		fill(id, &info);
		ret = fn(&info, arg);
		if (ret)
			return ret;
	}
	return 0;
}

uint64_t ibvd_cm_listing_looks(void)
{
	return cm_world.listing_looks;
}

unsigned int ibvd_cm_session_ids(const struct ibvd_session *s)
{
	if (s->state != IBVD_SESSION_CM || !s->cm)
		return 0;
	return ibvd_handle_count(&s->cm->ids, IBVD_OBJ_CM_ID);
}
