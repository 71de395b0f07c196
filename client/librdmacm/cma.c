/*
 * rdma_cm_ids: creation on a channel's session (or on a private channel of
 * their own: synchronous mode), destruction once the app acked their
 * events, migration between channels, options, and the daemon's view of
 * where an id is (addresses, device, path) copied into the public struct.
 */
#include "config.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <infiniband/ib.h>
#include <infiniband/sa.h>

#include "cma.h"

/* ---- the id table of a channel, and the events counted on ids ------------ */

static unsigned int bucket(uint32_t handle)
{
	return (handle ^ (handle >> 8) ^ (handle >> 16)) % CMA_ID_BUCKETS;
}

void cma_ids_add(struct cma_channel *ch, struct cma_id *cid)
{
	unsigned int b = bucket(cid->handle);

	pthread_mutex_lock(&ch->ids_lock);
	cid->hnext = ch->ids[b];
	ch->ids[b] = cid;
	pthread_mutex_unlock(&ch->ids_lock);
}

void cma_ids_remove(struct cma_channel *ch, struct cma_id *cid)
{
	struct cma_id **p;

	pthread_mutex_lock(&ch->ids_lock);
	for (p = &ch->ids[bucket(cid->handle)]; *p; p = &(*p)->hnext) {
		if (*p == cid) {
			*p = cid->hnext;
			break;
		}
	}
	cid->hnext = NULL;
	pthread_mutex_unlock(&ch->ids_lock);
}

void cma_id_hold(struct cma_id *cid)
{
	pthread_mutex_lock(&cid->mut);
	cid->events_delivered++;
	pthread_mutex_unlock(&cid->mut);
}

/*
 * The lookup and the count happen under the table lock, so that an id
 * being destroyed (removed from the table first, then waiting for its
 * counts to match) is either not found or waited for.
 */
struct cma_id *cma_ids_hold(struct cma_channel *ch, uint32_t handle)
{
	struct cma_id *cid;

	pthread_mutex_lock(&ch->ids_lock);
	for (cid = ch->ids[bucket(handle)]; cid; cid = cid->hnext)
		if (cid->handle == handle)
			break;
	if (cid)
		cma_id_hold(cid);
	pthread_mutex_unlock(&ch->ids_lock);
	return cid;
}

void cma_id_release(struct cma_id *cid)
{
	pthread_mutex_lock(&cid->mut);
	cid->events_acked++;
	pthread_cond_broadcast(&cid->cond);
	pthread_mutex_unlock(&cid->mut);
}

void cma_id_wait_acked(struct cma_id *cid)
{
	pthread_mutex_lock(&cid->mut);
	while (cid->events_acked != cid->events_delivered)
		pthread_cond_wait(&cid->cond, &cid->mut);
	pthread_mutex_unlock(&cid->mut);
}

/*
 * Acking an event gives its count back to the id it was counted on: here
 * and not with the events, because destroying or migrating an id acks the
 * event a synchronous id keeps.
 */
void cma_ack_event(struct cma_event *ev)
{
	if (ev->owner)
		cma_id_release(ev->owner);
	free(ev);
}

void cma_put_event(struct cma_id *cid)
{
	if (cid->id.event) {
		cma_ack_event((struct cma_event *)cid->id.event);
		cid->id.event = NULL;
	}
}

/* ---- requests and the daemon's view of an id ------------------------------ */

int cma_call(struct cma_id *cid, uint16_t type, const ProtobufCMessage *req,
	     const ProtobufCMessageDescriptor *reply_desc,
	     ProtobufCMessage **reply)
{
	return ibvd_conn_call(&cid->ch->conn, type, req, reply_desc, reply,
			      NULL, NULL);
}

bool cma_is_ud_ps(enum rdma_port_space ps)
{
	return ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB;
}

bool cma_is_ud(const struct cma_id *cid)
{
	return cid->id.qp_type == IBV_QPT_UD;
}

size_t cma_req_pdata(const struct cma_id *cid)
{
	bool ib = cid->id.route.addr.src_addr.sa_family == AF_IB;

	if (cma_is_ud(cid))
		return ib ? CMA_PDATA_SIDR_REQ_IB : CMA_PDATA_SIDR_REQ;
	return ib ? CMA_PDATA_REQ_IB : CMA_PDATA_REQ;
}

static void copy_gid(union ibv_gid *gid, const ProtobufCBinaryData *b)
{
	if (b->len == sizeof(gid->raw))
		memcpy(gid->raw, b->data, sizeof(gid->raw));
}

/*
 * The one path (CM.md "Addresses"), as an SA would give it, or for RoCE
 * the kernel's rdma_cm.
 */
static void fill_path(struct cma_id *cid, const Ibvd__CmIdInfo *info)
{
	struct ibv_sa_path_rec *p = &cid->path;

	memset(p, 0, sizeof(*p));
	copy_gid(&p->dgid, &info->dgid);
	copy_gid(&p->sgid, &info->sgid);
	p->dlid = htobe16((uint16_t)info->dlid);
	p->slid = htobe16((uint16_t)info->slid);
	p->flow_label = htobe32(info->flow_label);
	p->hop_limit = (uint8_t)info->hop_limit;
	p->traffic_class = (uint8_t)info->traffic_class;
	p->reversible = 1;
	p->numb_path = 1;
	p->pkey = htobe16((uint16_t)(info->pkey ? info->pkey : 0xffff));
	p->mtu_selector = 2;		/* exactly this MTU */
	p->mtu = (uint8_t)info->mtu;
	p->rate_selector = 2;
	p->rate = (uint8_t)info->rate;
	p->packet_life_time_selector = 2;
	p->packet_life_time = (uint8_t)info->packet_life_time;
	cid->id.route.path_rec = p;
	cid->id.route.num_paths = 1;
}

static bool pd_stays(const struct cma_id *cid, const struct ibv_context *ctx)
{
	if (!cid->id.pd)
		return false;
	/*
	 * Once the id has a device, id->pd is not looked into: the app may
	 * have deallocated the PD it gave rdma_create_qp() since (rping
	 * does, before its last events).
	 */
	if (cid->id.verbs)
		return cid->id.verbs == ctx;
	return cid->id.pd->context == ctx;
}

/*
 * cid is on ctx's device (port port_num) now.  As under rdma-core's
 * librdmacm, it names that device's PD from then on unless it names one
 * of the device already: programs make their objects on id->pd (UCX's
 * rdmacm makes a QP on it before any QP of the id's exists).  The id
 * holds the device's PD until it is destroyed (cma_id_free).
 */
int cma_id_set_device(struct cma_id *cid, struct ibv_context *ctx,
		      uint8_t port_num)
{
	struct ibv_pd *pd;
	bool stays = pd_stays(cid, ctx);
	int ret;

	if (cid->held != ctx) {
		ret = cma_device_hold(ctx, &pd);
		if (ret < 0)
			return ret;
		if (cid->held)
			cma_device_drop(cid->held);
		cid->held = ctx;
		if (!stays)
			cid->id.pd = pd;
	}
	cid->id.verbs = ctx;
	cid->id.port_num = port_num;
	return 0;
}

int cma_apply_info(struct cma_id *cid, const Ibvd__CmIdInfo *info)
{
	struct rdma_addr *addr = &cid->id.route.addr;
	struct sockaddr_storage ss;
	struct ibv_context *ctx;
	int ret;

	if (!info)
		return 0;
	if (cma_sockaddr_from_msg(&info->src, &ss))
		memcpy(&addr->src_storage, &ss, sizeof(ss));
	if (cma_sockaddr_from_msg(&info->dst, &ss))
		memcpy(&addr->dst_storage, &ss, sizeof(ss));
	if (info->device && info->device[0]) {
		ret = cma_device_open(info->device, &ctx);
		if (ret == 0)
			ret = cma_id_set_device(cid, ctx, (uint8_t)info->port_num);
		if (ret < 0)
			return ret;
	}
	copy_gid(&addr->addr.ibaddr.sgid, &info->sgid);
	copy_gid(&addr->addr.ibaddr.dgid, &info->dgid);
	if (info->pkey)
		addr->addr.ibaddr.pkey = htobe16((uint16_t)info->pkey);
	if (info->num_paths)
		fill_path(cid, info);
	return 0;
}

int cma_query(struct cma_id *cid)
{
	Ibvd__CmId req = IBVD__CM_ID__INIT;
	Ibvd__CmIdInfo *info = NULL;
	int ret;

	req.id = cid->handle;
	ret = cma_call(cid, IBVD_MSG_CM_QUERY, &req.base,
		       &ibvd__cm_id_info__descriptor, (ProtobufCMessage **)&info);
	if (ret < 0)
		return ret;
	ret = cma_apply_info(cid, info);
	ibvd__cm_id_info__free_unpacked(info, NULL);
	return ret;
}

/* ---- creation ----------------------------------------------------------------- */

int cma_id_alloc(struct cma_channel *ch, void *context,
		 enum rdma_port_space ps, enum ibv_qp_type qp_type,
		 struct cma_id **ret_id)
{
	struct cma_id *cid;

	cid = calloc(1, sizeof(*cid));
	if (!cid)
		return -ENOMEM;
	pthread_mutex_init(&cid->mut, NULL);
	pthread_cond_init(&cid->cond, NULL);
	pthread_mutex_init(&cid->op_lock, NULL);
	cid->magic = CMA_ID_MAGIC;
	cid->ch = ch;
	cid->id.channel = &ch->channel;
	cid->id.context = context;
	cid->id.ps = ps;
	cid->id.qp_type = qp_type;
	*ret_id = cid;
	return 0;
}

void cma_id_free(struct cma_id *cid)
{
	cid->magic = 0;
	cma_mcast_free_all(cid);
	if (cid->held)
		cma_device_drop(cid->held);
	free(cid->ep_qp_attr);
	free(cid->ep_connect);
	pthread_mutex_destroy(&cid->op_lock);
	pthread_cond_destroy(&cid->cond);
	pthread_mutex_destroy(&cid->mut);
	free(cid);
}

/* The QP type a port space stands for (rdma_create_id(3)). */
int cma_ps_qp_type(enum rdma_port_space ps, enum ibv_qp_type *type)
{
	switch (ps) {
	case RDMA_PS_TCP:
	case RDMA_PS_IB:
		*type = IBV_QPT_RC;
		return 0;
	case RDMA_PS_UDP:
	case RDMA_PS_IPOIB:
		*type = IBV_QPT_UD;
		return 0;
	default:
		return -EPROTONOSUPPORT;
	}
}

int cma_create_id(struct rdma_event_channel *channel, void *context,
		  enum rdma_port_space ps, enum ibv_qp_type qp_type,
		  struct cma_id **ret_id)
{
	Ibvd__CmCreateId req = IBVD__CM_CREATE_ID__INIT;
	struct cma_channel *ch, *priv = NULL;
	Ibvd__CmId *reply = NULL;
	struct cma_id *cid;
	int ret;

	if (channel) {
		ch = to_cma_channel(channel);
	} else {
		/* Synchronous mode: a private channel, as librdmacm does. */
		ret = cma_channel_create(&priv);
		if (ret < 0)
			return ret;
		ch = priv;
	}
	ret = cma_id_alloc(ch, context, ps, qp_type, &cid);
	if (ret < 0)
		goto fail_channel;
	req.ps = ps;
	req.qp_type = qp_type;
	req.user = (uint64_t)(uintptr_t)cid;
	ret = ibvd_conn_call(&ch->conn, IBVD_MSG_CM_CREATE_ID, &req.base,
			     &ibvd__cm_id__descriptor,
			     (ProtobufCMessage **)&reply, NULL, NULL);
	if (ret < 0)
		goto fail_id;
	cid->handle = reply->id;
	ibvd__cm_id__free_unpacked(reply, NULL);
	cid->sync = priv != NULL;
	cma_ids_add(ch, cid);
	*ret_id = cid;
	return 0;
fail_id:
	cma_id_free(cid);
fail_channel:
	if (priv)
		cma_channel_destroy(priv);
	return ret;
}

int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
		   void *context, enum rdma_port_space ps)
{
	enum ibv_qp_type qp_type;
	struct cma_id *cid;
	int ret;

	if (!id)
		return cma_ret(-EINVAL);
	ret = cma_ps_qp_type(ps, &qp_type);
	if (ret == 0)
		ret = cma_create_id(channel, context, ps, qp_type, &cid);
	if (ret < 0)
		return cma_ret(ret);
	*id = &cid->id;
	return 0;
}

/* ---- destruction and migration --------------------------------------------- */

int cma_destroy_id(struct cma_id *cid)
{
	Ibvd__CmId req = IBVD__CM_ID__INIT;
	struct cma_channel *ch = cid->ch;

	/* A synchronous id keeps its last event: that one is ours to ack. */
	cma_put_event(cid);
	/* No event finds the id from now on; wait for those the app holds. */
	cma_ids_remove(ch, cid);
	cma_id_wait_acked(cid);
	/*
	 * The daemon's failure cannot keep the id alive on our side: the app
	 * may not use it again.  Whatever the daemon still holds goes with
	 * the session (a dead daemon holds nothing).
	 */
	req.id = cid->handle;
	(void)cma_call(cid, IBVD_MSG_CM_DESTROY_ID, &req.base, NULL, NULL);
	if (cid->sync)
		cma_channel_destroy(ch);
	else
		cma_channel_forget_id(ch, cid->handle, cma_refuse_request);
	cma_id_free(cid);
	return 0;
}

int rdma_destroy_id(struct rdma_cm_id *id)
{
	if (!cma_id_live(id))
		return cma_ret(-EINVAL);
	return cma_ret(cma_destroy_id(to_cma_id(id)));
}

/* The daemon moves the id handle of old's session to ch's: its new handle. */
static int migrate_call(struct cma_channel *old, uint32_t handle,
			struct cma_channel *ch, uint32_t *new_handle)
{
	Ibvd__CmMigrate req = IBVD__CM_MIGRATE__INIT;
	Ibvd__CmId *reply = NULL;
	int ret;

	req.token.data = old->token;
	req.token.len = old->token_len;
	req.id = handle;
	ret = ibvd_conn_call(&ch->conn, IBVD_MSG_CM_MIGRATE_ID, &req.base,
			     &ibvd__cm_id__descriptor,
			     (ProtobufCMessage **)&reply, NULL, NULL);
	if (ret < 0)
		return ret;
	*new_handle = reply->id;
	ibvd__cm_id__free_unpacked(reply, NULL);
	return 0;
}

/*
 * A listener's requests not yet taken go with it, as the kernel's: the
 * ids the daemon made for them (in old's session) move to ch's too, so
 * that the app, which sees them on ch, can accept them there.  One that
 * cannot move is refused.
 */
static void migrate_requests(struct cma_channel *old, uint32_t old_listener,
			     struct cma_channel *ch, uint32_t new_listener)
{
	Ibvd__CmEvent *m;
	uint32_t child;

	while ((m = cma_channel_take_request(old, old_listener))) {
		if (migrate_call(old, m->id, ch, &child) < 0) {
			cma_refuse_request(old, m->id);
			ibvd__cm_event__free_unpacked(m, NULL);
			continue;
		}
		m->id = child;
		m->listen_id = new_listener;
		if (cma_channel_put(ch, m) < 0) {
			cma_refuse_request(ch, child);
			ibvd__cm_event__free_unpacked(m, NULL);
		}
	}
}

/* Both channels' take_locks for writing, in address order: no deadlock. */
static void lock_takers(struct cma_channel *a, struct cma_channel *b)
{
	if ((uintptr_t)a > (uintptr_t)b) {
		struct cma_channel *t = a;

		a = b;
		b = t;
	}
	pthread_rwlock_wrlock(&a->take_lock);
	pthread_rwlock_wrlock(&b->take_lock);
}

static void unlock_takers(struct cma_channel *a, struct cma_channel *b)
{
	pthread_rwlock_unlock(&a->take_lock);
	pthread_rwlock_unlock(&b->take_lock);
}

/*
 * Take old's and ch's take_locks once every event on cid is acked.  Old's
 * so that no event of cid's is handed out meanwhile; ch's because the
 * daemon sends cid's next events to ch as soon as it moved it, and a
 * thread reading ch before cid is among ch's ids would drop them.  Not
 * waiting with the locks held: a thread holding an event of cid's may
 * read the channel again before it acks (rdma-core lets it), and would
 * wait for the lock while we wait for its ack.
 */
static void lock_acked(struct cma_channel *old, struct cma_channel *ch,
		       struct cma_id *cid)
{
	bool acked;

	for (;;) {
		lock_takers(old, ch);
		pthread_mutex_lock(&cid->mut);
		acked = cid->events_acked == cid->events_delivered;
		pthread_mutex_unlock(&cid->mut);
		if (acked)
			return;
		unlock_takers(old, ch);
		cma_id_wait_acked(cid);
	}
}

int cma_migrate(struct cma_id *cid, struct rdma_event_channel *channel,
		bool in_event)
{
	struct cma_channel *old = cid->ch, *ch, *priv = NULL;
	uint32_t handle;
	int ret;

	if (channel) {
		ch = to_cma_channel(channel);
		if (ch == old)
			return 0;
	} else {
		ret = cma_channel_create(&priv);
		if (ret < 0)
			return ret;
		ch = priv;
	}
	cma_put_event(cid);
	/*
	 * rdma_migrate_id(3): blocks while events on the id are unacked,
	 * those handed out meanwhile too (no thread is between taking one
	 * and finding its id while we hold take_lock).  An id an event is
	 * making has had no event of its own: its taker holds the lock.
	 */
	if (in_event)
		cma_id_wait_acked(cid);
	else
		lock_acked(old, ch, cid);
	ret = migrate_call(old, cid->handle, ch, &handle);
	if (ret < 0) {
		if (!in_event)
			unlock_takers(old, ch);
		goto fail;
	}
	/*
	 * Events the old session queued for the id before the move go with
	 * it (rdma_migrate_id(3)); the daemon sends later ones to ch.
	 */
	cma_ids_remove(old, cid);
	cma_channel_move_events(old, cid->handle, ch, handle);
	migrate_requests(old, cid->handle, ch, handle);
	cid->handle = handle;
	cid->ch = ch;
	cid->id.channel = &ch->channel;
	cma_ids_add(ch, cid);
	if (!in_event)
		unlock_takers(old, ch);
	/* A private channel goes with its id; a shared one stays. */
	if (cid->sync)
		cma_channel_destroy(old);
	cid->sync = priv != NULL;
	return 0;
fail:
	if (priv)
		cma_channel_destroy(priv);
	return ret;
}

int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	if (!cma_id_live(id))
		return cma_ret(-EINVAL);
	/* NULL makes an id synchronous; one that is already has no use for it */
	if (!channel && to_cma_id(id)->sync)
		return cma_ret(-EINVAL);
	return cma_ret(cma_migrate(to_cma_id(id), channel, false));
}

/* ---- options --------------------------------------------------------------------- */

/* Validate as the kernel's rdma_cm does: the size each option expects. */
static int check_id_option(int optname, size_t optlen)
{
	switch (optname) {
	case RDMA_OPTION_ID_TOS:
	case RDMA_OPTION_ID_ACK_TIMEOUT:
		return optlen == sizeof(uint8_t) ? 0 : -EINVAL;
	case RDMA_OPTION_ID_REUSEADDR:
	case RDMA_OPTION_ID_AFONLY:
		return optlen == sizeof(int) ? 0 : -EINVAL;
	default:
		return -ENOSYS;
	}
}

/*
 * RDMA_OPTION_IB_PATH: paths the app resolved itself, for an id whose
 * address is resolved.  As the kernel asks, one of them must be the
 * primary bidirectional path; the id then goes to ROUTE_RESOLVED with its
 * event, as rdma_resolve_route makes it.  The record's contents name a
 * fabric's path; a peer here is reached through the daemon's one path
 * (PROTOCOL.md §10.7), which the route takes as rdma_resolve_route does.
 */
int cma_set_ib_path(struct cma_id *cid, const void *optval, size_t optlen)
{
	const uint32_t want = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY |
			      IBV_PATH_FLAG_BIDIRECTIONAL;
	const struct ibv_path_data *p = optval;
	size_t i;

	if (!p || !optlen || optlen % sizeof(*p))
		return -EINVAL;
	for (i = 0; i < optlen / sizeof(*p); i++)
		if (p[i].flags == want)
			return cma_resolve_route(cid, 0);
	return -EINVAL;
}

static int set_option(struct cma_id *cid, int level, int optname,
		      void *optval, size_t optlen)
{
	Ibvd__CmSetOption req = IBVD__CM_SET_OPTION__INIT;
	int ret;

	if (!optval)
		return -EINVAL;
	if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH)
		return cma_set_ib_path(cid, optval, optlen);
	if (level != RDMA_OPTION_ID)
		return -ENOSYS;
	ret = check_id_option(optname, optlen);
	if (ret < 0)
		return ret;
	req.id = cid->handle;
	req.level = level;
	req.optname = optname;
	req.value.data = optval;
	req.value.len = optlen;
	return cma_call(cid, IBVD_MSG_CM_SET_OPTION, &req.base, NULL, NULL);
}

int rdma_set_option(struct rdma_cm_id *id, int level, int optname,
		    void *optval, size_t optlen)
{
	if (!cma_id_live(id))
		return cma_ret(-EINVAL);
	return cma_ret(set_option(to_cma_id(id), level, optname, optval,
				  optlen));
}

/* ---- ports ------------------------------------------------------------------------ */

/* Ports cannot report failure: 0 is "no port". */
static __be16 port_of(const struct sockaddr *sa)
{
	switch (sa->sa_family) {
	case AF_INET:
		return ((const struct sockaddr_in *)sa)->sin_port;
	case AF_INET6:
		return ((const struct sockaddr_in6 *)sa)->sin6_port;
	case AF_IB:
		/* The port is the low 16 bits of the service id. */
		return htobe16((uint16_t)be64toh(
			((const struct sockaddr_ib *)sa)->sib_sid));
	default:
		return 0;
	}
}

__be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return id ? port_of(&id->route.addr.src_addr) : 0;
}

__be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return id ? port_of(&id->route.addr.dst_addr) : 0;
}
