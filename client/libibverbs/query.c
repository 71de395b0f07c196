/*
 * Device, port, GID and P_Key queries: one RPC each, translated from the
 * daemon's messages into the public structs; a GID table is kept until the
 * daemon says it changed.
 *
 * Entry points that carry a size (abi.md §2.4) write only what the caller
 * declared; the exported ibv_query_port takes the 48-byte compat struct of
 * old binaries.
 */
#include "config.h"

#include <endian.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "ibverbsd.pb-c.h"
#include "ibvd_verbs.h"

/* verbs.h turns ibv_query_port into a macro; we define the real symbol. */
#undef ibv_query_port

/* struct ibv_port_attr without port_cap_flags2, as libibverbs < 1.5 had it. */
struct _compat_ibv_port_attr {
	enum ibv_port_state state;
	enum ibv_mtu max_mtu;
	enum ibv_mtu active_mtu;
	int gid_tbl_len;
	uint32_t port_cap_flags;
	uint32_t max_msg_sz;
	uint32_t bad_pkey_cntr;
	uint32_t qkey_viol_cntr;
	uint16_t pkey_tbl_len;
	uint16_t lid;
	uint16_t sm_lid;
	uint8_t lmc;
	uint8_t max_vl_num;
	uint8_t sm_sl;
	uint8_t subnet_timeout;
	uint8_t init_type_reply;
	uint8_t active_width;
	uint8_t active_speed;
	uint8_t phys_state;
	uint8_t link_layer;
	uint8_t flags;
};

/* The compat struct is a prefix of the current one (abi.md §2.4). */
_Static_assert(sizeof(struct _compat_ibv_port_attr) == 48, "compat port attr");
_Static_assert(offsetof(struct ibv_port_attr, port_cap_flags2) ==
	       sizeof(struct _compat_ibv_port_attr), "compat port attr prefix");
_Static_assert(sizeof(struct ibv_device_attr) == 232, "device attr size");
_Static_assert(sizeof(struct ibv_gid_entry) == 32, "gid entry size");

/* rdma-core's private enum (driver.h, not installed): sysfs GID types. */
enum ibv_gid_type_sysfs {
	IBV_GID_TYPE_SYSFS_IB_ROCE_V1,
	IBV_GID_TYPE_SYSFS_ROCE_V2,
};

int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
		       unsigned int index, enum ibv_gid_type_sysfs *type);

static int call(struct ibv_context *ctx, uint16_t type,
		const ProtobufCMessage *req,
		const ProtobufCMessageDescriptor *reply_desc,
		ProtobufCMessage **reply)
{
	return ibvd_conn_call(&to_ibvc_context(ctx)->conn, type, req,
			      reply_desc, reply, NULL, NULL);
}

/* Ports are numbered from 1; the device knows how many it has. */
static int check_port(struct ibv_context *ctx, uint32_t port_num)
{
	uint32_t count = to_ibvc_context(ctx)->dev->phys_port_cnt;

	return port_num >= 1 && port_num <= count ? 0 : -EINVAL;
}

/* ---- device ------------------------------------------------------------ */

static void device_attr_from_msg(const Ibvd__DeviceAttr *m,
				 struct ibv_device_attr *a)
{
	snprintf(a->fw_ver, sizeof(a->fw_ver), "%s", m->fw_ver);
	/* The daemon sends GUIDs in host order; the struct holds them as __be64. */
	a->node_guid = htobe64(m->node_guid);
	a->sys_image_guid = htobe64(m->sys_image_guid);
	a->max_mr_size = m->max_mr_size;
	a->page_size_cap = m->page_size_cap;
	a->vendor_id = m->vendor_id;
	a->vendor_part_id = m->vendor_part_id;
	a->hw_ver = m->hw_ver;
	a->max_qp = m->max_qp;
	a->max_qp_wr = m->max_qp_wr;
	a->device_cap_flags = m->device_cap_flags;
	a->max_sge = m->max_sge;
	a->max_sge_rd = m->max_sge_rd;
	a->max_cq = m->max_cq;
	a->max_cqe = m->max_cqe;
	a->max_mr = m->max_mr;
	a->max_pd = m->max_pd;
	a->max_qp_rd_atom = m->max_qp_rd_atom;
	a->max_ee_rd_atom = m->max_ee_rd_atom;
	a->max_res_rd_atom = m->max_res_rd_atom;
	a->max_qp_init_rd_atom = m->max_qp_init_rd_atom;
	a->max_ee_init_rd_atom = m->max_ee_init_rd_atom;
	a->atomic_cap = (enum ibv_atomic_cap)m->atomic_cap;
	a->max_ee = m->max_ee;
	a->max_rdd = m->max_rdd;
	a->max_mw = m->max_mw;
	a->max_raw_ipv6_qp = m->max_raw_ipv6_qp;
	a->max_raw_ethy_qp = m->max_raw_ethy_qp;
	a->max_mcast_grp = m->max_mcast_grp;
	a->max_mcast_qp_attach = m->max_mcast_qp_attach;
	a->max_total_mcast_qp_attach = m->max_total_mcast_qp_attach;
	a->max_ah = m->max_ah;
	a->max_fmr = m->max_fmr;
	a->max_map_per_fmr = m->max_map_per_fmr;
	a->max_srq = m->max_srq;
	a->max_srq_wr = m->max_srq_wr;
	a->max_srq_sge = m->max_srq_sge;
	a->max_pkeys = (uint16_t)m->max_pkeys;
	a->local_ca_ack_delay = (uint8_t)m->local_ca_ack_delay;
	a->phys_port_cnt = (uint8_t)m->phys_port_cnt;
}

static void device_attr_ex_from_msg(const Ibvd__DeviceAttr *m,
				    struct ibv_device_attr_ex *ex)
{
	memset(ex, 0, sizeof(*ex));
	device_attr_from_msg(m, &ex->orig_attr);
	ex->completion_timestamp_mask = m->completion_timestamp_mask;
	ex->hca_core_clock = m->hca_core_clock;
	/* The 64-bit flags include the legacy 32 bits, as the kernel reports. */
	ex->device_cap_flags_ex = m->device_cap_flags_ex | m->device_cap_flags;
	ex->max_wq_type_rq = m->max_wq_type_rq;
	ex->raw_packet_caps = m->raw_packet_caps;
	ex->max_dm_size = m->max_dm_size;
	ex->phys_port_cnt_ex = m->phys_port_cnt;
	ex->odp_caps.general_caps = m->odp_general_caps;
	ex->odp_caps.per_transport_caps.rc_odp_caps = m->odp_rc_caps;
	ex->odp_caps.per_transport_caps.uc_odp_caps = m->odp_uc_caps;
	ex->odp_caps.per_transport_caps.ud_odp_caps = m->odp_ud_caps;
	ex->xrc_odp_caps = m->odp_xrc_caps;
}

static int fetch_device_attr(struct ibv_context *ctx,
			     struct ibv_device_attr_ex *ex)
{
	Ibvd__DeviceAttr *m = NULL;
	int ret;

	ret = call(ctx, IBVD_MSG_QUERY_DEVICE, NULL,
		   &ibvd__device_attr__descriptor, (ProtobufCMessage **)&m);
	if (ret < 0)
		return ret;
	device_attr_ex_from_msg(m, ex);
	ibvd__device_attr__free_unpacked(m, NULL);
	return 0;
}

static int query_device_ex(struct ibv_context *ctx,
			   const struct ibv_query_device_ex_input *input,
			   struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ibv_device_attr_ex ex;
	int ret;

	if ((input && input->comp_mask) || !attr ||
	    attr_size < sizeof(attr->orig_attr))
		return -EINVAL;
	ret = fetch_device_attr(ctx, &ex);
	if (ret < 0)
		return ret;
	/* An app built with newer headers gets zeros in what we do not know. */
	memset(attr, 0, attr_size);
	memcpy(attr, &ex, attr_size < sizeof(ex) ? attr_size : sizeof(ex));
	return 0;
}

/* verbs_context op behind ibv_query_device_ex(). */
int ibvc_query_device_ex_op(struct ibv_context *ctx,
			    const struct ibv_query_device_ex_input *input,
			    struct ibv_device_attr_ex *attr, size_t attr_size)
{
	return ibvc_errno_ret(query_device_ex(ctx, input, attr, attr_size));
}

int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	struct ibv_device_attr_ex ex;
	int ret;

	ret = ctx && attr ? fetch_device_attr(ctx, &ex) : -EINVAL;
	if (ret == 0)
		*attr = ex.orig_attr;
	return ibvc_errno_ret(ret);
}

/* ---- port -------------------------------------------------------------- */

static void port_attr_from_msg(const Ibvd__PortAttr *m,
			       struct ibv_port_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->state = (enum ibv_port_state)m->state;
	a->max_mtu = (enum ibv_mtu)m->max_mtu;
	a->active_mtu = (enum ibv_mtu)m->active_mtu;
	a->gid_tbl_len = m->gid_tbl_len;
	a->port_cap_flags = m->port_cap_flags;
	a->max_msg_sz = m->max_msg_sz;
	a->bad_pkey_cntr = m->bad_pkey_cntr;
	a->qkey_viol_cntr = m->qkey_viol_cntr;
	a->pkey_tbl_len = (uint16_t)m->pkey_tbl_len;
	a->lid = (uint16_t)m->lid;
	a->sm_lid = (uint16_t)m->sm_lid;
	a->lmc = (uint8_t)m->lmc;
	a->max_vl_num = (uint8_t)m->max_vl_num;
	a->sm_sl = (uint8_t)m->sm_sl;
	a->subnet_timeout = (uint8_t)m->subnet_timeout;
	a->init_type_reply = (uint8_t)m->init_type_reply;
	a->active_width = (uint8_t)m->active_width;
	a->active_speed = (uint8_t)m->active_speed;
	a->phys_state = (uint8_t)m->phys_state;
	a->link_layer = (uint8_t)m->link_layer;
	a->flags = (uint8_t)m->flags;
	a->port_cap_flags2 = (uint16_t)m->port_cap_flags2;
}

static int fetch_port_attr(struct ibv_context *ctx, uint8_t port_num,
			   struct ibv_port_attr *attr)
{
	Ibvd__QueryPort req = IBVD__QUERY_PORT__INIT;
	Ibvd__PortAttr *m = NULL;
	int ret;

	ret = check_port(ctx, port_num);
	if (ret < 0)
		return ret;
	req.port_num = port_num;
	ret = call(ctx, IBVD_MSG_QUERY_PORT, &req.base,
		   &ibvd__port_attr__descriptor, (ProtobufCMessage **)&m);
	if (ret < 0)
		return ret;
	port_attr_from_msg(m, attr);
	ibvd__port_attr__free_unpacked(m, NULL);
	return 0;
}

/*
 * The first attr_len bytes of a struct ibv_port_attr: zeroed before the
 * call (as rdma-core does, so a failure leaves no stale data), then filled
 * with what we know.
 */
static int query_port(struct ibv_context *ctx, uint8_t port_num, void *attr,
		      size_t attr_len)
{
	struct ibv_port_attr full;
	int ret;

	if (!ctx || !attr)
		return -EINVAL;
	memset(attr, 0, attr_len);
	ret = fetch_port_attr(ctx, port_num, &full);
	if (ret < 0)
		return ret;
	memcpy(attr, &full, attr_len < sizeof(full) ? attr_len : sizeof(full));
	return 0;
}

/*
 * verbs_context op behind the ibv_query_port() macro: v44 apps pass 52
 * bytes, newer headers pass more.
 */
int ibvc_query_port_op(struct ibv_context *ctx, uint8_t port_num,
		       struct ibv_port_attr *attr, size_t attr_len)
{
	return ibvc_errno_ret(query_port(ctx, port_num, attr, attr_len));
}

/* The exported symbol: old binaries call it with a 48-byte struct. */
int ibv_query_port(struct ibv_context *ctx, uint8_t port_num,
		   struct _compat_ibv_port_attr *attr)
{
	return ibvc_errno_ret(query_port(ctx, port_num, attr, sizeof(*attr)));
}

/* ---- GIDs -------------------------------------------------------------- */

static int fetch_gid_table(struct ibv_context *ctx, uint32_t port_num,
			   Ibvd__GidTable **table)
{
	Ibvd__QueryGidTable req = IBVD__QUERY_GID_TABLE__INIT;
	int ret;

	ret = check_port(ctx, port_num);
	if (ret < 0)
		return ret;
	req.port_num = port_num;
	return call(ctx, IBVD_MSG_QUERY_GID_TABLE, &req.base,
		    &ibvd__gid_table__descriptor, (ProtobufCMessage **)table);
}

/* A daemon entry we can trust: a 16-byte GID inside the table. */
static bool gid_msg_valid(const Ibvd__GidTable *table, const Ibvd__GidEntry *m)
{
	return m->index < table->gid_tbl_len && m->gid.len == sizeof(union ibv_gid);
}

static void gid_entry_from_msg(const Ibvd__GidEntry *m, uint32_t port_num,
			       struct ibv_gid_entry *entry)
{
	memset(entry, 0, sizeof(*entry));
	memcpy(entry->gid.raw, m->gid.data, sizeof(entry->gid.raw));
	entry->gid_index = m->index;
	entry->port_num = port_num;
	entry->gid_type = m->gid_type;
	entry->ndev_ifindex = m->ndev_ifindex;
}

/* Keep port_num's table as the daemon sent it, stamped with gen. */
static int gids_keep(struct ibvc_context *ictx, uint32_t port_num,
		     uint32_t gen, const Ibvd__GidTable *table)
{
	struct ibv_gid_entry *entries = NULL;
	size_t i;

	for (i = 0; i < table->n_entries; i++)
		if (!gid_msg_valid(table, table->entries[i]))
			return -EPROTO;
	if (table->n_entries) {
		entries = calloc(table->n_entries, sizeof(*entries));
		if (!entries)
			return -ENOMEM;
	}
	for (i = 0; i < table->n_entries; i++)
		gid_entry_from_msg(table->entries[i], port_num, &entries[i]);
	free(ictx->gids.entries);
	ictx->gids.entries = entries;
	ictx->gids.n = table->n_entries;
	ictx->gids.tbl_len = table->gid_tbl_len;
	ictx->gids.port_num = port_num;
	ictx->gids.gen = gen;
	ictx->gids.valid = true;
	return 0;
}

/*
 * Lock ictx's copy of port_num's GID table, fetched again unless the
 * daemon's gid_gen (ring.h) is the one it was fetched under: ibv_devinfo
 * -v asks twice for each of a RoCE port's 1,024 slots.  On success the
 * caller reads ictx->gids and unlocks.
 */
static int gids_lock(struct ibv_context *ctx, uint32_t port_num)
{
	struct ibvc_context *ictx = to_ibvc_context(ctx);
	Ibvd__GidTable *table = NULL;
	uint32_t gen;
	int ret;

	pthread_mutex_lock(&ictx->gids.lock);
	/* Acquire: a table changed before this value is the one we fetch. */
	gen = __atomic_load_n(&ictx->db_engine->gid_gen, __ATOMIC_ACQUIRE);
	/* a context whose daemon is gone fails its queries, kept or not */
	if (ictx->gids.valid && ictx->gids.gen == gen &&
	    ictx->gids.port_num == port_num &&
	    !__atomic_load_n(&ictx->conn.dead, __ATOMIC_RELAXED))
		return 0;
	ret = fetch_gid_table(ctx, port_num, &table);
	if (ret == 0) {
		ret = gids_keep(ictx, port_num, gen, table);
		ibvd__gid_table__free_unpacked(table, NULL);
	}
	if (ret < 0)
		pthread_mutex_unlock(&ictx->gids.lock);
	return ret;
}

static void gids_unlock(struct ibv_context *ctx)
{
	pthread_mutex_unlock(&to_ibvc_context(ctx)->gids.lock);
}

/*
 * One GID table entry.  -EINVAL for an index outside the table, -ENODATA
 * for an empty slot inside it (the daemon leaves empty slots out).
 */
static int read_gid(struct ibv_context *ctx, uint32_t port_num,
		    uint32_t index, struct ibv_gid_entry *entry)
{
	struct ibvc_context *ictx = to_ibvc_context(ctx);
	size_t i;
	int ret;

	ret = gids_lock(ctx, port_num);
	if (ret < 0)
		return ret;
	ret = index < ictx->gids.tbl_len ? -ENODATA : -EINVAL;
	for (i = 0; i < ictx->gids.n && ret == -ENODATA; i++)
		if (ictx->gids.entries[i].gid_index == index) {
			*entry = ictx->gids.entries[i];
			ret = 0;
		}
	gids_unlock(ctx);
	return ret;
}

/* The index of gid in the port's table: -ENOENT if it is not ours. */
int ibvc_find_gid_index(struct ibv_context *ctx, uint8_t port_num,
			const union ibv_gid *gid)
{
	struct ibvc_context *ictx = to_ibvc_context(ctx);
	size_t i;
	int ret;

	ret = gids_lock(ctx, port_num);
	if (ret < 0)
		return ret;
	ret = -ENOENT;
	for (i = 0; i < ictx->gids.n && ret == -ENOENT; i++) {
		const struct ibv_gid_entry *e = &ictx->gids.entries[i];

		if (e->gid_index <= UINT8_MAX &&
		    !memcmp(e->gid.raw, gid->raw, sizeof(gid->raw)))
			ret = (int)e->gid_index;
	}
	gids_unlock(ctx);
	return ret;
}

int ibv_query_gid(struct ibv_context *ctx, uint8_t port_num, int index,
		  union ibv_gid *gid)
{
	struct ibv_gid_entry entry;
	int ret;

	if (!ctx || !gid || index < 0)
		return ibvc_minus_one_ret(-EINVAL);
	ret = read_gid(ctx, port_num, (uint32_t)index, &entry);
	if (ret == -ENODATA) {
		/* An empty slot reads as the zero GID, as from sysfs. */
		memset(gid, 0, sizeof(*gid));
		return 0;
	}
	if (ret < 0)
		return ibvc_minus_one_ret(ret);
	*gid = entry.gid;
	return 0;
}

/*
 * Store e in a caller's entry of entry_size bytes (checked by the caller to
 * hold at least ours); what lies beyond our struct is cleared.
 */
static void store_gid_entry(void *slot, size_t entry_size,
			    const struct ibv_gid_entry *e)
{
	memset(slot, 0, entry_size);
	memcpy(slot, e, sizeof(*e));
}

static int query_gid_ex(struct ibv_context *context, uint32_t port_num,
			uint32_t gid_index, struct ibv_gid_entry *entry,
			uint32_t flags, size_t entry_size)
{
	struct ibv_gid_entry found;
	int ret;

	/*
	 * EINVAL, as the kernel's QUERY_GID_ENTRY ioctl says to a flag it
	 * lacks (rdma-core's EOPNOTSUPP is for kernels without the ioctl).
	 */
	if (flags)
		return -EINVAL;
	if (!context || !entry || entry_size < sizeof(*entry))
		return -EINVAL;
	ret = read_gid(context, port_num, gid_index, &found);
	if (ret < 0)
		return ret;
	store_gid_entry(entry, entry_size, &found);
	return 0;
}

int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num,
		      uint32_t gid_index, struct ibv_gid_entry *entry,
		      uint32_t flags, size_t entry_size)
{
	return ibvc_errno_ret(query_gid_ex(context, port_num, gid_index, entry,
					   flags, entry_size));
}

/* Append port_num's entries at entries[*count]; -EINVAL if full. */
static int append_port_gids(struct ibv_context *ctx, uint32_t port_num,
			    char *entries, size_t max_entries,
			    size_t entry_size, size_t *count)
{
	struct ibvc_context *ictx = to_ibvc_context(ctx);
	size_t i;
	int ret;

	ret = gids_lock(ctx, port_num);
	if (ret < 0)
		return ret;
	for (i = 0; i < ictx->gids.n; i++) {
		/* The man page: too small an array fails the whole call. */
		if (*count >= max_entries) {
			ret = -EINVAL;
			break;
		}
		store_gid_entry(entries + *count * entry_size, entry_size,
				&ictx->gids.entries[i]);
		(*count)++;
	}
	gids_unlock(ctx);
	return ret;
}

ssize_t _ibv_query_gid_table(struct ibv_context *context,
			     struct ibv_gid_entry *entries, size_t max_entries,
			     uint32_t flags, size_t entry_size)
{
	uint32_t port, port_cnt;
	size_t count = 0;

	/* as query_gid_ex: the kernel's QUERY_GID_TABLE ioctl says EINVAL */
	if (flags)
		return -EINVAL;
	if (!context || !entries || !max_entries ||
	    entry_size < sizeof(*entries))
		return -EINVAL;
	port_cnt = to_ibvc_context(context)->dev->phys_port_cnt;
	for (port = 1; port <= port_cnt; port++) {
		int ret = append_port_gids(context, port, (char *)entries,
					   max_entries, entry_size, &count);
		if (ret < 0)
			return ret;
	}
	return (ssize_t)count;
}

/*
 * Private (IBVERBS_PRIVATE_34); ibv_devinfo -v and pyverbs call it for every
 * index below gid_tbl_len, so an empty slot succeeds too.
 */
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
		       unsigned int index, enum ibv_gid_type_sysfs *type)
{
	struct ibv_gid_entry entry;
	int ret;

	if (!context || !type)
		return ibvc_minus_one_ret(-EINVAL);
	ret = read_gid(context, port_num, index, &entry);
	if (ret == -ENODATA) {
		*type = IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
		return 0;
	}
	if (ret < 0)
		return ibvc_minus_one_ret(ret);
	*type = entry.gid_type == IBV_GID_TYPE_ROCE_V2 ?
		IBV_GID_TYPE_SYSFS_ROCE_V2 : IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
	return 0;
}

/* ---- P_Keys ------------------------------------------------------------ */

static int fetch_pkey(struct ibv_context *ctx, uint8_t port_num, int index,
		      __be16 *pkey)
{
	Ibvd__QueryPkey req = IBVD__QUERY_PKEY__INIT;
	Ibvd__Pkey *m = NULL;
	int ret;

	if (index < 0)
		return -EINVAL;
	ret = check_port(ctx, port_num);
	if (ret < 0)
		return ret;
	req.port_num = port_num;
	req.index = (uint32_t)index;
	ret = call(ctx, IBVD_MSG_QUERY_PKEY, &req.base,
		   &ibvd__pkey__descriptor, (ProtobufCMessage **)&m);
	if (ret < 0)
		return ret;
	*pkey = htobe16((uint16_t)m->pkey);
	ibvd__pkey__free_unpacked(m, NULL);
	return 0;
}

/*
 * ibv_query_pkey(3): 0 on success, -1 (and errno) on error.  rdma-core
 * reads the entry from sysfs (ports/N/pkeys/I): a port or an index out
 * of range is a file that is not there, ENOENT.
 */
int ibv_query_pkey(struct ibv_context *ctx, uint8_t port_num, int index,
		   __be16 *pkey)
{
	int ret;

	if (!ctx || !pkey)
		return ibvc_minus_one_ret(-EINVAL);
	ret = fetch_pkey(ctx, port_num, index, pkey);
	return ibvc_minus_one_ret(ret == -EINVAL ? -ENOENT : ret);
}

/* ibv_get_pkey_index(3): the index holding pkey, or -1. */
int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num,
		       __be16 pkey)
{
	struct ibv_port_attr port;
	__be16 entry;
	int index, ret;

	if (!context)
		return ibvc_minus_one_ret(-EINVAL);
	ret = fetch_port_attr(context, port_num, &port);
	if (ret < 0)
		return ibvc_minus_one_ret(ret);
	for (index = 0; index < port.pkey_tbl_len; index++) {
		ret = fetch_pkey(context, port_num, index, &entry);
		if (ret < 0)
			return ibvc_minus_one_ret(ret);
		if (entry == pkey)
			return index;
	}
	return ibvc_minus_one_ret(-ENOENT);
}
