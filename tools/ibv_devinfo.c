/*
 * ibv_devinfo: print the attributes of RDMA devices and their ports.
 *
 * ibverbsd's own build of the classic tool.  It uses only the public verbs
 * API, so it also runs on Debian's libibverbs, and it prints the same lines
 * in the same layout as Debian's ibv_devinfo (rdma-core 44): people diff
 * the two and scripts grep them.  The layout is "key:" + TABs + value, the
 * TABs reaching a fixed column per level; flag names go on lines of their
 * own, five TABs in.
 *
 * Plain fields come from tables (struct field); the irregular blocks of
 * the extended attributes are small functions run in order.
 */
#include "config.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "util.h"

/* Columns where values start: device fields, port fields. */
#define DEV_COL		40
#define PORT_COL	48
#define FLAG_TABS	5	/* indentation of flag-name lines */

/* ---- output helpers -------------------------------------------------- */

/* Print indent TABs, "key:", then TABs until column col (at least one). */
static void key_to_col(int indent, const char *key, int col)
{
	int pos = indent * 8 + (int)strlen(key) + 1;

	printf("%.*s%s:", indent, "\t\t\t\t\t\t\t\t", key);
	do {
		putchar('\t');
		pos = (pos / 8 + 1) * 8;
	} while (pos < col);
}

/* One aligned "key: value" line. */
static void __attribute__((format(printf, 4, 5)))
kv(int indent, int col, const char *key, const char *fmt, ...)
{
	va_list ap;

	key_to_col(indent, key, col);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* A line whose TABs are not aligned to a column (Debian's layout has some). */
static void __attribute__((format(printf, 1, 2))) line(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* ---- value names --------------------------------------------------- */

struct name {
	int value;
	const char *name;
};

struct names {
	const struct name *v;
	size_t n;
	const char *unknown;
};

#define NAMES(table, unknown_str) \
	{ .v = table, .n = ARRAY_SIZE(table), .unknown = unknown_str }

static const char *name_of(const struct names *names, int value)
{
	size_t i;

	for (i = 0; i < names->n; i++)
		if (names->v[i].value == value)
			return names->v[i].name;
	return names->unknown;
}

static const struct name transport_v[] = {
	{ IBV_TRANSPORT_IB, "InfiniBand" },
	{ IBV_TRANSPORT_IWARP, "iWARP" },
	{ IBV_TRANSPORT_USNIC, "usNIC" },
	{ IBV_TRANSPORT_USNIC_UDP, "usNIC UDP" },
	{ IBV_TRANSPORT_UNSPECIFIED, "unspecified" },
};
static const struct names transport_names = NAMES(transport_v, "invalid transport");

static const struct name atomic_v[] = {
	{ IBV_ATOMIC_NONE, "ATOMIC_NONE" },
	{ IBV_ATOMIC_HCA, "ATOMIC_HCA" },
	{ IBV_ATOMIC_GLOB, "ATOMIC_GLOB" },
};
static const struct names atomic_names = NAMES(atomic_v, "invalid atomic capability");

static const struct name port_state_v[] = {
	{ IBV_PORT_DOWN, "PORT_DOWN" },
	{ IBV_PORT_INIT, "PORT_INIT" },
	{ IBV_PORT_ARMED, "PORT_ARMED" },
	{ IBV_PORT_ACTIVE, "PORT_ACTIVE" },
};
static const struct names port_state_names = NAMES(port_state_v, "invalid state");

static const struct name mtu_v[] = {
	{ IBV_MTU_256, "256" },
	{ IBV_MTU_512, "512" },
	{ IBV_MTU_1024, "1024" },
	{ IBV_MTU_2048, "2048" },
	{ IBV_MTU_4096, "4096" },
};
static const struct names mtu_names = NAMES(mtu_v, "invalid MTU");

static const struct name link_layer_v[] = {
	{ IBV_LINK_LAYER_UNSPECIFIED, "Unspecified" },
	{ IBV_LINK_LAYER_INFINIBAND, "InfiniBand" },
	{ IBV_LINK_LAYER_ETHERNET, "Ethernet" },
};
static const struct names link_layer_names = NAMES(link_layer_v, "Unknown");

/* IBA's VLCap encoding: 1 -> VL0 only, ..., 5 -> VL0-14. */
static const struct name vl_v[] = {
	{ 1, "1" }, { 2, "2" }, { 3, "4" }, { 4, "8" }, { 5, "15" },
};
static const struct names vl_names = NAMES(vl_v, "invalid value");

/* IBA's LinkWidthActive encoding: the lane count, printed with an "X". */
static const struct name width_v[] = {
	{ 1, "1" }, { 2, "4" }, { 4, "8" }, { 8, "12" }, { 16, "2" },
};
static const struct names width_names = NAMES(width_v, "invalid width");

/* LinkSpeedActive (and its extended codes): per-lane signalling rate. */
static const struct name speed_v[] = {
	{ 1, "2.5 Gbps" }, { 2, "5.0 Gbps" }, { 4, "10.0 Gbps" },
	{ 8, "10.0 Gbps" }, { 16, "14.0 Gbps" }, { 32, "25.0 Gbps" },
	{ 64, "50.0 Gbps" }, { 128, "100.0 Gbps" },
};
static const struct names speed_names = NAMES(speed_v, "invalid speed");

static const struct name phys_state_v[] = {
	{ 1, "SLEEP" }, { 2, "POLLING" }, { 3, "DISABLED" },
	{ 4, "PORT_CONFIGURATION TRAINNING" },	/* sic, as Debian prints it */
	{ 5, "LINK_UP" }, { 6, "LINK_ERROR_RECOVERY" }, { 7, "PHY TEST" },
};
static const struct names phys_state_names = NAMES(phys_state_v, "invalid physical state");

/* ---- flag names ---------------------------------------------------- */

struct flag {
	uint64_t bit;
	const char *name;
};

struct flags {
	const struct flag *v;
	size_t n;
	const char *none;	/* line printed when no bit is set, or NULL */
};

#define FLAGS(table, none_str) \
	{ .v = table, .n = ARRAY_SIZE(table), .none = none_str }

/* One line per known bit set in value, then the unknown bits in hex. */
static void print_flags(const struct flags *flags, uint64_t value)
{
	uint64_t known = 0;
	size_t i;

	if (!value && flags->none) {
		printf("\t\t\t\t\t%s\n", flags->none);
		return;
	}
	for (i = 0; i < flags->n; i++) {
		known |= flags->v[i].bit;
		if (value & flags->v[i].bit)
			printf("\t\t\t\t\t%s\n", flags->v[i].name);
	}
	if (value & ~known)
		printf("\t\t\t\t\tUnknown flags: 0x%" PRIX64 "\n", value & ~known);
}

static const struct flag device_cap_v[] = {
	{ IBV_DEVICE_RESIZE_MAX_WR, "RESIZE_MAX_WR" },
	{ IBV_DEVICE_BAD_PKEY_CNTR, "BAD_PKEY_CNTR" },
	{ IBV_DEVICE_BAD_QKEY_CNTR, "BAD_QKEY_CNTR" },
	{ IBV_DEVICE_RAW_MULTI, "RAW_MULTI" },
	{ IBV_DEVICE_AUTO_PATH_MIG, "AUTO_PATH_MIG" },
	{ IBV_DEVICE_CHANGE_PHY_PORT, "CHANGE_PHY_PORT" },
	{ IBV_DEVICE_UD_AV_PORT_ENFORCE, "UD_AV_PORT_ENFORCE" },
	{ IBV_DEVICE_CURR_QP_STATE_MOD, "CURR_QP_STATE_MOD" },
	{ IBV_DEVICE_SHUTDOWN_PORT, "SHUTDOWN_PORT" },
	{ IBV_DEVICE_INIT_TYPE, "INIT_TYPE" },
	{ IBV_DEVICE_PORT_ACTIVE_EVENT, "PORT_ACTIVE_EVENT" },
	{ IBV_DEVICE_SYS_IMAGE_GUID, "SYS_IMAGE_GUID" },
	{ IBV_DEVICE_RC_RNR_NAK_GEN, "RC_RNR_NAK_GEN" },
	{ IBV_DEVICE_SRQ_RESIZE, "SRQ_RESIZE" },
	{ IBV_DEVICE_N_NOTIFY_CQ, "N_NOTIFY_CQ" },
	{ IBV_DEVICE_MEM_WINDOW, "MEM_WINDOW" },
	{ IBV_DEVICE_UD_IP_CSUM, "UD_IP_CSUM" },
	{ IBV_DEVICE_XRC, "XRC" },
	{ IBV_DEVICE_MEM_MGT_EXTENSIONS, "MEM_MGT_EXTENSIONS" },
	{ IBV_DEVICE_MEM_WINDOW_TYPE_2A, "MEM_WINDOW_TYPE_2A" },
	{ IBV_DEVICE_MEM_WINDOW_TYPE_2B, "MEM_WINDOW_TYPE_2B" },
	{ IBV_DEVICE_RC_IP_CSUM, "RC_IP_CSUM" },
	{ IBV_DEVICE_RAW_IP_CSUM, "RAW_IP_CSUM" },
	{ IBV_DEVICE_MANAGED_FLOW_STEERING, "MANAGED_FLOW_STEERING" },
};
static const struct flags device_cap_flags = FLAGS(device_cap_v, NULL);

/* Only the upper half of device_cap_flags_ex is new; the lower repeats
 * device_cap_flags. */
static const struct flag device_cap_ex_v[] = {
	{ IBV_DEVICE_RAW_SCATTER_FCS, "RAW_SCATTER_FCS" },
	{ IBV_DEVICE_PCI_WRITE_END_PADDING, "PCI_WRITE_END_PADDING" },
};
static const struct flags device_cap_ex_flags = FLAGS(device_cap_ex_v, NULL);

static const struct flag odp_general_v[] = {
	{ IBV_ODP_SUPPORT, "ODP_SUPPORT" },
	{ IBV_ODP_SUPPORT_IMPLICIT, "ODP_SUPPORT_IMPLICIT" },
};
static const struct flags odp_general_flags = FLAGS(odp_general_v, NULL);

static const struct flag odp_transport_v[] = {
	{ IBV_ODP_SUPPORT_SEND, "SUPPORT_SEND" },
	{ IBV_ODP_SUPPORT_RECV, "SUPPORT_RECV" },
	{ IBV_ODP_SUPPORT_WRITE, "SUPPORT_WRITE" },
	{ IBV_ODP_SUPPORT_READ, "SUPPORT_READ" },
	{ IBV_ODP_SUPPORT_ATOMIC, "SUPPORT_ATOMIC" },
	{ IBV_ODP_SUPPORT_SRQ_RECV, "SUPPORT_SRQ" },
};
static const struct flags odp_transport_flags = FLAGS(odp_transport_v, "NO SUPPORT");

/* No unknown-bits line here: Debian lists only the known capabilities. */
static void print_raw_packet_caps(uint32_t caps)
{
	static const struct flag v[] = {
		{ IBV_RAW_PACKET_CAP_CVLAN_STRIPPING, "C-VLAN stripping offload" },
		{ IBV_RAW_PACKET_CAP_SCATTER_FCS, "Scatter FCS offload" },
		{ IBV_RAW_PACKET_CAP_IP_CSUM, "IP csum offload" },
		{ IBV_RAW_PACKET_CAP_DELAY_DROP, "Delay drop" },
	};
	static const struct flags f = FLAGS(v, NULL);

	print_flags(&f, caps & (IBV_RAW_PACKET_CAP_CVLAN_STRIPPING |
				IBV_RAW_PACKET_CAP_SCATTER_FCS |
				IBV_RAW_PACKET_CAP_IP_CSUM |
				IBV_RAW_PACKET_CAP_DELAY_DROP));
}

/* QP types supported by TSO, RSS, packet pacing: a bit per enum ibv_qp_type. */
static const struct flag qpt_v[] = {
	{ 1u << IBV_QPT_RAW_PACKET, "SUPPORT_RAW_PACKET" },
	{ 1u << IBV_QPT_UD, "SUPPORT_UD" },
};
static const struct flags qpt_flags = FLAGS(qpt_v, NULL);

/* ---- table-driven plain fields -------------------------------------- */

enum fmt {
	FMT_DEC,	/* %d */
	FMT_HEX,	/* 0x%x */
	FMT_HEX02,	/* 0x%02x */
	FMT_HEX04,	/* 0x%04x */
	FMT_HEX08,	/* 0x%08x */
	FMT_HEXUP,	/* 0x%X */
	FMT_HEX64,	/* 0x%llx */
	FMT_NAMED,	/* NAME (value) */
	FMT_NAME,	/* NAME */
	FMT_WIDTH,	/* NAMEX (value) */
};

/* What a field's condition may look at. */
struct view {
	const struct ibv_device *dev;
	const struct ibv_device_attr *attr;
	const struct ibv_port_attr *port;
};

struct field {
	const char *key;
	size_t off;		/* in the struct the table describes */
	unsigned char size;	/* 1, 2, 4 or 8 bytes */
	enum fmt fmt;
	const struct names *names;	/* FMT_NAMED, FMT_NAME, FMT_WIDTH */
	const struct flags *flags;	/* flag lines below the value */
	bool (*shown)(const struct view *v);	/* NULL: always */
};

#define MEMBER(type, m) \
	.off = offsetof(type, m), .size = sizeof(((type *)0)->m)
#define DEV(m)	MEMBER(struct ibv_device_attr, m)
#define PORT(m)	MEMBER(struct ibv_port_attr, m)

/*
 * The field's bits, zero-extended.  Signedness does not matter: narrow
 * fields are unsigned, and 32-bit ones are printed through (int) or
 * (unsigned int), which gives back the same bits.
 */
static uint64_t field_raw(const void *base, const struct field *f)
{
	const unsigned char *p = (const unsigned char *)base + f->off;
	union { uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64; } u;

	memcpy(&u, p, f->size);
	switch (f->size) {
	case 1: return u.u8;
	case 2: return u.u16;
	case 4: return u.u32;
	default: return u.u64;
	}
}

static void print_field(const void *base, const struct field *f, int indent,
			int col)
{
	uint64_t raw = field_raw(base, f);
	int v = (int)raw;	/* Debian prints every narrow field with %d */

	switch (f->fmt) {
	case FMT_DEC:	kv(indent, col, f->key, "%d", v); break;
	case FMT_HEX:	kv(indent, col, f->key, "0x%x", (unsigned int)raw); break;
	case FMT_HEX02:	kv(indent, col, f->key, "0x%02x", (unsigned int)raw); break;
	case FMT_HEX04:	kv(indent, col, f->key, "0x%04x", (unsigned int)raw); break;
	case FMT_HEX08:	kv(indent, col, f->key, "0x%08x", (unsigned int)raw); break;
	case FMT_HEXUP:	kv(indent, col, f->key, "0x%X", (unsigned int)raw); break;
	case FMT_HEX64:	kv(indent, col, f->key, "0x%llx", (unsigned long long)raw); break;
	case FMT_NAMED:	kv(indent, col, f->key, "%s (%d)", name_of(f->names, v), v); break;
	case FMT_NAME:	kv(indent, col, f->key, "%s", name_of(f->names, v)); break;
	case FMT_WIDTH:	kv(indent, col, f->key, "%sX (%d)", name_of(f->names, v), v); break;
	}
	if (f->flags)
		print_flags(f->flags, raw);
}

static void print_fields(const struct view *view, const void *base,
			 const struct field *fields, size_t n, int indent,
			 int col)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!fields[i].shown || fields[i].shown(view))
			print_field(base, &fields[i], indent, col);
}

static bool has_fmr(const struct view *v) { return v->attr->max_fmr != 0; }
static bool has_srq(const struct view *v) { return v->attr->max_srq != 0; }
/* The physical state is an InfiniBand notion; iWARP ports have none. */
static bool is_ib(const struct view *v)
{
	return v->dev->transport_type == IBV_TRANSPORT_IB;
}

/* Device identity after the GUIDs, always shown. */
static const struct field ident_fields[] = {
	{ "vendor_id", DEV(vendor_id), FMT_HEX04 },
	{ "vendor_part_id", DEV(vendor_part_id), FMT_DEC },
	{ "hw_ver", DEV(hw_ver), FMT_HEXUP },
};

/* ibv_device_attr with -v, in Debian's order. */
static const struct field limit_fields[] = {
	{ "max_mr_size", DEV(max_mr_size), FMT_HEX64 },
	{ "page_size_cap", DEV(page_size_cap), FMT_HEX64 },
	{ "max_qp", DEV(max_qp), FMT_DEC },
	{ "max_qp_wr", DEV(max_qp_wr), FMT_DEC },
	{ "device_cap_flags", DEV(device_cap_flags), FMT_HEX08,
	  .flags = &device_cap_flags },
	{ "max_sge", DEV(max_sge), FMT_DEC },
	{ "max_sge_rd", DEV(max_sge_rd), FMT_DEC },
	{ "max_cq", DEV(max_cq), FMT_DEC },
	{ "max_cqe", DEV(max_cqe), FMT_DEC },
	{ "max_mr", DEV(max_mr), FMT_DEC },
	{ "max_pd", DEV(max_pd), FMT_DEC },
	{ "max_qp_rd_atom", DEV(max_qp_rd_atom), FMT_DEC },
	{ "max_ee_rd_atom", DEV(max_ee_rd_atom), FMT_DEC },
	{ "max_res_rd_atom", DEV(max_res_rd_atom), FMT_DEC },
	{ "max_qp_init_rd_atom", DEV(max_qp_init_rd_atom), FMT_DEC },
	{ "max_ee_init_rd_atom", DEV(max_ee_init_rd_atom), FMT_DEC },
	{ "atomic_cap", DEV(atomic_cap), FMT_NAMED, .names = &atomic_names },
	{ "max_ee", DEV(max_ee), FMT_DEC },
	{ "max_rdd", DEV(max_rdd), FMT_DEC },
	{ "max_mw", DEV(max_mw), FMT_DEC },
	{ "max_raw_ipv6_qp", DEV(max_raw_ipv6_qp), FMT_DEC },
	{ "max_raw_ethy_qp", DEV(max_raw_ethy_qp), FMT_DEC },
	{ "max_mcast_grp", DEV(max_mcast_grp), FMT_DEC },
	{ "max_mcast_qp_attach", DEV(max_mcast_qp_attach), FMT_DEC },
	{ "max_total_mcast_qp_attach", DEV(max_total_mcast_qp_attach), FMT_DEC },
	{ "max_ah", DEV(max_ah), FMT_DEC },
	{ "max_fmr", DEV(max_fmr), FMT_DEC },
	{ "max_map_per_fmr", DEV(max_map_per_fmr), FMT_DEC, .shown = has_fmr },
	{ "max_srq", DEV(max_srq), FMT_DEC },
	{ "max_srq_wr", DEV(max_srq_wr), FMT_DEC, .shown = has_srq },
	{ "max_srq_sge", DEV(max_srq_sge), FMT_DEC, .shown = has_srq },
	{ "max_pkeys", DEV(max_pkeys), FMT_DEC },
	{ "local_ca_ack_delay", DEV(local_ca_ack_delay), FMT_DEC },
};

static const struct field port_fields[] = {
	{ "state", PORT(state), FMT_NAMED, .names = &port_state_names },
	{ "max_mtu", PORT(max_mtu), FMT_NAMED, .names = &mtu_names },
	{ "active_mtu", PORT(active_mtu), FMT_NAMED, .names = &mtu_names },
	{ "sm_lid", PORT(sm_lid), FMT_DEC },
	{ "port_lid", PORT(lid), FMT_DEC },
	{ "port_lmc", PORT(lmc), FMT_HEX02 },
	{ "link_layer", PORT(link_layer), FMT_NAME, .names = &link_layer_names },
};

static const struct field port_verbose_fields[] = {
	{ "max_msg_sz", PORT(max_msg_sz), FMT_HEX },
	{ "port_cap_flags", PORT(port_cap_flags), FMT_HEX08 },
	{ "port_cap_flags2", PORT(port_cap_flags2), FMT_HEX04 },
	{ "max_vl_num", PORT(max_vl_num), FMT_NAMED, .names = &vl_names },
	{ "bad_pkey_cntr", PORT(bad_pkey_cntr), FMT_HEX },
	{ "qkey_viol_cntr", PORT(qkey_viol_cntr), FMT_HEX },
	{ "sm_sl", PORT(sm_sl), FMT_DEC },
	{ "pkey_tbl_len", PORT(pkey_tbl_len), FMT_DEC },
	{ "gid_tbl_len", PORT(gid_tbl_len), FMT_DEC },
	{ "subnet_timeout", PORT(subnet_timeout), FMT_DEC },
	{ "init_type_reply", PORT(init_type_reply), FMT_DEC },
	{ "active_width", PORT(active_width), FMT_WIDTH, .names = &width_names },
	{ "active_speed", PORT(active_speed), FMT_NAMED, .names = &speed_names },
	{ "phys_state", PORT(phys_state), FMT_NAMED, .names = &phys_state_names,
	  .shown = is_ib },
};

/* ---- extended device attributes (-v) --------------------------------- */

static void print_odp(const struct ibv_device_attr_ex *a)
{
	const struct ibv_odp_caps *odp = &a->odp_caps;

	line("\tgeneral_odp_caps:");
	print_flags(&odp_general_flags, odp->general_caps);
	line("\trc_odp_caps:");
	print_flags(&odp_transport_flags, odp->per_transport_caps.rc_odp_caps);
	line("\tuc_odp_caps:");
	print_flags(&odp_transport_flags, odp->per_transport_caps.uc_odp_caps);
	line("\tud_odp_caps:");
	print_flags(&odp_transport_flags, odp->per_transport_caps.ud_odp_caps);
	line("\txrc_odp_caps:");
	print_flags(&odp_transport_flags, a->xrc_odp_caps);
}

static void print_clocks(const struct ibv_device_attr_ex *a)
{
	if (a->completion_timestamp_mask)
		line("\tcompletion timestamp_mask:\t\t\t0x%016" PRIx64,
		     a->completion_timestamp_mask);
	else
		line("\tcompletion_timestamp_mask not supported");
	if (a->hca_core_clock)
		kv(1, DEV_COL, "hca_core_clock", "%" PRIu64 "kHZ", a->hca_core_clock);
	else
		line("\tcore clock not supported");
}

static void print_offloads(const struct ibv_device_attr_ex *a)
{
	if (a->raw_packet_caps) {
		line("\traw packet caps:");
		print_raw_packet_caps(a->raw_packet_caps);
	}
	kv(1, DEV_COL, "device_cap_flags_ex", "0x%" PRIX64, a->device_cap_flags_ex);
	print_flags(&device_cap_ex_flags,
		    a->device_cap_flags_ex & 0xffffffff00000000ULL);
}

static void print_tso(const struct ibv_device_attr_ex *a)
{
	line("\ttso_caps:");
	line("\t\tmax_tso:\t\t\t%d", (int)a->tso_caps.max_tso);
	if (a->tso_caps.max_tso) {
		line("\t\tsupported_qp:");
		print_flags(&qpt_flags, a->tso_caps.supported_qpts);
	}
}

static void print_rss(const struct ibv_device_attr_ex *a)
{
	const struct ibv_rss_caps *rss = &a->rss_caps;

	line("\trss_caps:");
	line("\t\tmax_rwq_indirection_tables:\t\t\t%u",
	     rss->max_rwq_indirection_tables);
	line("\t\tmax_rwq_indirection_table_size:\t\t\t%u",
	     rss->max_rwq_indirection_table_size);
	line("\t\trx_hash_function:\t\t\t\t0x%x", rss->rx_hash_function);
	line("\t\trx_hash_fields_mask:\t\t\t\t0x%" PRIX64,
	     rss->rx_hash_fields_mask);
	if (rss->supported_qpts) {
		line("\t\tsupported_qp:");
		print_flags(&qpt_flags, rss->supported_qpts);
	}
	kv(1, DEV_COL, "max_wq_type_rq", "%u", a->max_wq_type_rq);
}

static void print_pacing(const struct ibv_device_attr_ex *a)
{
	const struct ibv_packet_pacing_caps *pp = &a->packet_pacing_caps;

	line("\tpacket_pacing_caps:");
	line("\t\tqp_rate_limit_min:\t%ukbps", pp->qp_rate_limit_min);
	line("\t\tqp_rate_limit_max:\t%ukbps", pp->qp_rate_limit_max);
	if (pp->qp_rate_limit_max) {
		line("\t\tsupported_qp:");
		print_flags(&qpt_flags, pp->supported_qpts);
	}
}

static void print_tag_matching(const struct ibv_device_attr_ex *a)
{
	const struct ibv_tm_caps *tm = &a->tm_caps;

	if (!tm->max_num_tags) {
		line("\ttag matching not supported");
		return;
	}
	kv(1, DEV_COL, "max_rndv_hdr_size", "%u", tm->max_rndv_hdr_size);
	kv(1, DEV_COL, "max_num_tags", "%u", tm->max_num_tags);
	kv(1, DEV_COL, "max_ops", "%u", tm->max_ops);
	kv(1, DEV_COL, "max_sge", "%u", tm->max_sge);
	line("\tflags:");
	if (tm->flags & IBV_TM_CAP_RC)
		line("\t\t\t\t\tIBV_TM_CAP_RC");
}

static void print_cq_moderation(const struct ibv_device_attr_ex *a)
{
	const struct ibv_cq_moderation_caps *m = &a->cq_mod_caps;

	if (!m->max_cq_count || !m->max_cq_period)
		return;
	line("\n\tcq moderation caps:");
	line("\t\tmax_cq_count:\t%u", m->max_cq_count);
	line("\t\tmax_cq_period:\t%u us\n", m->max_cq_period);
}

static void print_device_memory(const struct ibv_device_attr_ex *a)
{
	if (a->max_dm_size)
		line("\tmaximum available device memory:\t%" PRIu64 "Bytes\n",
		     a->max_dm_size);
}

static void (*const ex_blocks[])(const struct ibv_device_attr_ex *) = {
	print_odp, print_clocks, print_offloads, print_tso, print_rss,
	print_pacing, print_tag_matching, print_cq_moderation,
	print_device_memory,
};

/* ---- one device ---------------------------------------------------- */

static void guid_str(__be64 be, char *buf, size_t len)
{
	uint64_t g = be64toh(be);

	snprintf(buf, len, "%04x:%04x:%04x:%04x", (unsigned int)(g >> 48) & 0xffff,
		 (unsigned int)(g >> 32) & 0xffff, (unsigned int)(g >> 16) & 0xffff,
		 (unsigned int)g & 0xffff);
}

/*
 * The board id comes from the kernel device's sysfs directory; devices of
 * ibverbsd have none, so the line is simply absent for them.
 */
static void print_board_id(const struct ibv_device *dev)
{
	char path[PATH_MAX], buf[256];
	FILE *f;
	size_t n;

	if (!dev->ibdev_path[0] ||
	    snprintf(path, sizeof(path), "%s/board_id", dev->ibdev_path) >= (int)sizeof(path))
		return;
	f = fopen(path, "re");
	if (!f)
		return;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (buf[0])
		kv(1, DEV_COL, "board_id", "%s", buf);
}

static void print_identity(const struct ibv_device *dev,
			   const struct ibv_device_attr *attr,
			   const struct view *view)
{
	char guid[32];

	printf("hca_id:\t%s\n", ibv_get_device_name((struct ibv_device *)dev));
	kv(1, DEV_COL, "transport", "%s (%d)",
	   name_of(&transport_names, dev->transport_type), dev->transport_type);
	if (attr->fw_ver[0])
		kv(1, DEV_COL, "fw_ver", "%s", attr->fw_ver);
	guid_str(attr->node_guid, guid, sizeof(guid));
	kv(1, DEV_COL, "node_guid", "%s", guid);
	guid_str(attr->sys_image_guid, guid, sizeof(guid));
	kv(1, DEV_COL, "sys_image_guid", "%s", guid);
	print_fields(view, attr, ident_fields, ARRAY_SIZE(ident_fields), 1, DEV_COL);
	print_board_id(dev);
	kv(1, DEV_COL, "phys_port_cnt", "%d", attr->phys_port_cnt);
}

static void print_device_verbose(struct ibv_context *ctx,
				 const struct ibv_device_attr_ex *ax,
				 const struct view *view)
{
	size_t i;

	print_fields(view, &ax->orig_attr, limit_fields, ARRAY_SIZE(limit_fields),
		     1, DEV_COL);
	for (i = 0; i < ARRAY_SIZE(ex_blocks); i++)
		ex_blocks[i](ax);
	kv(1, DEV_COL, "num_comp_vectors", "%d", ctx->num_comp_vectors);
}

/* The interface-id half of a GID is never zero for a valid entry. */
static bool gid_is_empty(const union ibv_gid *gid)
{
	static const uint8_t zero[8];

	return !memcmp(gid->raw + 8, zero, sizeof(zero));
}

static void print_gid(int index, const union ibv_gid *gid, uint32_t type,
		      uint8_t link_layer)
{
	char text[INET6_ADDRSTRLEN];
	const char *suffix = "";
	const uint8_t *r = gid->raw;

	/* Only Ethernet (RoCE) ports say which GID flavour an entry is. */
	if (link_layer == IBV_LINK_LAYER_ETHERNET)
		suffix = type == IBV_GID_TYPE_ROCE_V2 ? ", RoCE v2" : ", RoCE v1";
	if (type == IBV_GID_TYPE_ROCE_V2) {
		inet_ntop(AF_INET6, r, text, sizeof(text));
		printf("\t\t\tGID[%3d]:\t\t%s%s\n", index, text, suffix);
		return;
	}
	printf("\t\t\tGID[%3d]:\t\t%02x%02x:%02x%02x:%02x%02x:%02x%02x:"
	       "%02x%02x:%02x%02x:%02x%02x:%02x%02x%s\n", index,
	       r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9],
	       r[10], r[11], r[12], r[13], r[14], r[15], suffix);
}

/*
 * The GID's type comes from ibv_query_gid_ex(); a library without it
 * (it is optional for providers) gets the IB/RoCE v1 text form.
 */
static int print_gids(struct ibv_context *ctx, uint8_t port,
		      const struct ibv_port_attr *pa)
{
	struct ibv_gid_entry entry;
	union ibv_gid gid;
	uint32_t type;
	int i;

	for (i = 0; i < pa->gid_tbl_len; i++) {
		if (ibv_query_gid(ctx, port, i, &gid)) {
			fprintf(stderr, "Failed to query gid to port %u, index %d\n",
				port, i);
			return -1;
		}
		if (gid_is_empty(&gid))
			continue;
		type = IBV_GID_TYPE_IB;
		if (!ibv_query_gid_ex(ctx, port, i, &entry, 0))
			type = entry.gid_type;
		print_gid(i, &gid, type, pa->link_layer);
	}
	return 0;
}

static int print_port(struct ibv_context *ctx, uint8_t port, bool verbose,
		      struct view *view)
{
	struct ibv_port_attr pa;

	if (ibv_query_port(ctx, port, &pa)) {
		fprintf(stderr, "Failed to query port %u props\n", port);
		return -1;
	}
	view->port = &pa;
	printf("\t\tport:\t%u\n", port);
	print_fields(view, &pa, port_fields, ARRAY_SIZE(port_fields), 3, PORT_COL);
	if (verbose) {
		print_fields(view, &pa, port_verbose_fields,
			     ARRAY_SIZE(port_verbose_fields), 3, PORT_COL);
		if (print_gids(ctx, port, &pa))
			return -1;
	}
	putchar('\n');
	return 0;
}

/*
 * Exit statuses are Debian's ibv_devinfo's, so scripts that test them keep
 * working: 255 for usage errors and missing devices, 1 for a bad port
 * number, 4 for a port the device does not have.
 */
enum {
	EXIT_BAD_PORT_ARG = 1,
	EXIT_NO_SUCH_PORT = 4,
	EXIT_FAILED = 255,
};

/* Returns 0, or the status to exit with. */
static int print_device(struct ibv_device *dev, int only_port, bool verbose)
{
	struct ibv_device_attr_ex ax;
	struct view view = { .dev = dev };
	struct ibv_context *ctx;
	int port, ret = EXIT_FAILED;

	ctx = ibv_open_device(dev);
	if (!ctx) {
		fprintf(stderr, "Failed to open device %s: %s\n",
			ibv_get_device_name(dev), strerror(errno));
		return EXIT_FAILED;
	}
	/* The inline wrapper falls back to ibv_query_device() and zeroes
	 * the extended part when the library lacks the extended verb. */
	memset(&ax, 0, sizeof(ax));
	if (ibv_query_device_ex(ctx, NULL, &ax)) {
		fprintf(stderr, "Failed to query device props\n");
		goto out;
	}
	if (only_port > ax.orig_attr.phys_port_cnt) {
		fprintf(stderr, "Invalid port requested for device\n");
		ret = EXIT_NO_SUCH_PORT;
		goto out;
	}
	view.attr = &ax.orig_attr;
	print_identity(dev, &ax.orig_attr, &view);
	if (verbose)
		print_device_verbose(ctx, &ax, &view);
	for (port = 1; port <= ax.orig_attr.phys_port_cnt; port++)
		if ((!only_port || port == only_port) &&
		    print_port(ctx, (uint8_t)port, verbose, &view))
			goto out;
	ret = 0;
out:
	if (ibv_close_device(ctx)) {
		fprintf(stderr, "Failed to close device\n");
		ret = EXIT_FAILED;
	}
	return ret;
}

/* ---- command line -------------------------------------------------- */

struct options {
	const char *dev;	/* -d, NULL: every device */
	int port;		/* -i, 0: every port */
	bool list;		/* -l */
	bool verbose;		/* -v */
};

static void usage(FILE *out, const char *argv0)
{
	fprintf(out,
		"Usage: %s             print the ca attributes\n"
		"\n"
		"Options:\n"
		"  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)\n"
		"  -i, --ib-port=<port>   use port <port> of IB device (default all ports)\n"
		"  -l, --list             print only the IB devices names\n"
		"  -v, --verbose          print all the attributes of the IB device(s)\n"
		"  -h, --help             print this help\n", argv0);
}

/* Returns -1 to go on, else the status to exit with (0 after --help). */
static int parse_options(int argc, char *argv[], struct options *o)
{
	static const struct option longopts[] = {
		{ "ib-dev", required_argument, NULL, 'd' },
		{ "ib-port", required_argument, NULL, 'i' },
		{ "list", no_argument, NULL, 'l' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	char *end;
	long port;
	int c;

	while ((c = getopt_long(argc, argv, "d:i:lvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'd': o->dev = optarg; break;
		case 'l': o->list = true; break;
		case 'v': o->verbose = true; break;
		case 'h': usage(stdout, argv[0]); return 0;
		case 'i':
			errno = 0;
			port = strtol(optarg, &end, 0);
			/* A number past the device's ports is the device's
			 * "Invalid port" (4), as Debian's, not a usage error. */
			if (errno || end == optarg || *end || port <= 0 ||
			    port > INT_MAX) {
				usage(stderr, argv[0]);
				return EXIT_BAD_PORT_ARG;
			}
			o->port = (int)port;
			break;
		default:
			usage(stderr, argv[0]);
			return EXIT_FAILED;
		}
	}
	/* Like Debian's, stray arguments are ignored. */
	return -1;
}

static void print_list(struct ibv_device **list, int n)
{
	printf("%d HCA%s found:\n", n, n == 1 ? "" : "s");
	for (; *list; list++)
		printf("\t%s\n", ibv_get_device_name(*list));
	putchar('\n');
}

static struct ibv_device *find_device(struct ibv_device **list, const char *name)
{
	for (; *list; list++)
		if (!strcmp(ibv_get_device_name(*list), name))
			return *list;
	return NULL;
}

/* Returns 0, or the status to exit with (the last device's failure). */
static int print_devices(struct ibv_device **list, const struct options *o)
{
	struct ibv_device *dev;
	int ret = 0, dev_ret;

	if (o->dev) {
		dev = find_device(list, o->dev);
		if (!dev) {
			fprintf(stderr, "IB device '%s' wasn't found\n", o->dev);
			return EXIT_FAILED;
		}
		return print_device(dev, o->port, o->verbose);
	}
	if (!*list) {
		fprintf(stderr, "No IB devices found\n");
		return EXIT_FAILED;
	}
	for (; *list; list++) {
		dev_ret = print_device(*list, o->port, o->verbose);
		if (dev_ret)
			ret = dev_ret;
	}
	return ret;
}

int main(int argc, char *argv[])
{
	struct options o = { 0 };
	struct ibv_device **list;
	int n, ret;

	ret = parse_options(argc, argv, &o);
	if (ret >= 0)
		return ret;

	list = ibv_get_device_list(&n);
	if (!list) {
		fprintf(stderr, "Failed to get IB devices list: %s\n", strerror(errno));
		return EXIT_FAILED;
	}
	ret = 0;
	if (o.list)
		print_list(list, n);
	else
		ret = print_devices(list, &o);
	ibv_free_device_list(list);
	return ret;
}
