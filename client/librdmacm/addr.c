/*
 * Addresses and routes: binding an id to a local address (and so to the
 * daemon's device), resolving a destination and the path to it.  The
 * daemon owns the port spaces and decides which device an address is on;
 * what it answers (CmIdInfo) is copied into id->route, id->verbs and
 * id->port_num.  Resolution completes with an event, which synchronous ids
 * wait for here.
 */
#include "config.h"

#include <string.h>

#include "cma.h"

static void set_addr(ProtobufCBinaryData *b, const struct sockaddr *addr,
		     socklen_t len)
{
	b->data = (uint8_t *)addr;
	b->len = len;
}

int cma_bind_addr(struct cma_id *cid, struct sockaddr *addr)
{
	Ibvd__CmAddr req = IBVD__CM_ADDR__INIT;
	Ibvd__CmIdInfo *info = NULL;
	socklen_t len = cma_addr_len(addr);
	int ret;

	if (!len)
		return -EINVAL;
	req.id = cid->handle;
	set_addr(&req.src, addr, len);
	ret = cma_call(cid, IBVD_MSG_CM_BIND_ADDR, &req.base,
		       &ibvd__cm_id_info__descriptor, (ProtobufCMessage **)&info);
	if (ret < 0)
		return ret;
	/* What was asked for, then what the daemon made of it (the port). */
	memset(&cid->id.route.addr.src_storage, 0,
	       sizeof(cid->id.route.addr.src_storage));
	memcpy(&cid->id.route.addr.src_storage, addr, len);
	ret = cma_apply_info(cid, info);
	ibvd__cm_id_info__free_unpacked(info, NULL);
	return ret;
}

int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	if (!cma_id_live(id) || !addr)
		return cma_ret(-EINVAL);
	return cma_ret(cma_bind_addr(to_cma_id(id), addr));
}

static uint32_t timeout_of(int timeout_ms)
{
	return timeout_ms > 0 ? (uint32_t)timeout_ms : 0;
}

/*
 * A refused call puts back what it wrote in place of old, unless an event
 * of the id's earlier operation wrote there meanwhile.
 */
static void put_back(struct sockaddr_storage *cur,
		     const struct sockaddr_storage *wrote,
		     const struct sockaddr_storage *old)
{
	if (!memcmp(cur, wrote, sizeof(*cur)))
		memcpy(cur, old, sizeof(*cur));
}

int cma_resolve_addr(struct cma_id *cid, struct sockaddr *src,
		     struct sockaddr *dst, int timeout_ms)
{
	Ibvd__CmAddr req = IBVD__CM_ADDR__INIT;
	struct rdma_addr *ra = &cid->id.route.addr;
	socklen_t dst_len = cma_addr_len(dst), src_len = 0;
	struct sockaddr_storage old_src, old_dst;
	int ret;

	if (!dst_len)
		return -EINVAL;
	if (src) {
		src_len = cma_addr_len(src);
		if (!src_len)
			return -EINVAL;
		set_addr(&req.src, src, src_len);
	}
	req.id = cid->handle;
	set_addr(&req.dst, dst, dst_len);
	req.timeout_ms = timeout_of(timeout_ms);
	/*
	 * Apps read the peer's address back before the event (rping); the
	 * event may come, and fill in the rest, before the call returns.
	 */
	old_src = ra->src_storage;
	old_dst = ra->dst_storage;
	memset(&ra->dst_storage, 0, sizeof(ra->dst_storage));
	memcpy(&ra->dst_storage, dst, dst_len);
	if (src) {
		memset(&ra->src_storage, 0, sizeof(ra->src_storage));
		memcpy(&ra->src_storage, src, src_len);
	}
	ret = cma_call(cid, IBVD_MSG_CM_RESOLVE_ADDR, &req.base, NULL, NULL);
	if (ret < 0) {
		/*
		 * Refused (a listener, an id resolved already, a family
		 * unlike its own): the id is where it was, and so are the
		 * addresses the app reads back, as the kernel leaves them.
		 */
		struct sockaddr_storage wrote;

		memset(&wrote, 0, sizeof(wrote));
		memcpy(&wrote, dst, dst_len);
		put_back(&ra->dst_storage, &wrote, &old_dst);
		if (src) {
			memset(&wrote, 0, sizeof(wrote));
			memcpy(&wrote, src, src_len);
			put_back(&ra->src_storage, &wrote, &old_src);
		}
		return ret;
	}
	return cma_sync_wait(cid);
}

int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
		      struct sockaddr *dst_addr, int timeout_ms)
{
	if (!cma_id_live(id) || !dst_addr)
		return cma_ret(-EINVAL);
	return cma_ret(cma_resolve_addr(to_cma_id(id), src_addr, dst_addr,
				    timeout_ms));
}

int cma_resolve_route(struct cma_id *cid, int timeout_ms)
{
	Ibvd__CmAddr req = IBVD__CM_ADDR__INIT;
	int ret;

	req.id = cid->handle;
	req.timeout_ms = timeout_of(timeout_ms);
	ret = cma_call(cid, IBVD_MSG_CM_RESOLVE_ROUTE, &req.base, NULL, NULL);
	if (ret < 0)
		return ret;
	return cma_sync_wait(cid);
}

int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	if (!cma_id_live(id))
		return cma_ret(-EINVAL);
	return cma_ret(cma_resolve_route(to_cma_id(id), timeout_ms));
}
