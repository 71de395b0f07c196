/*
 * The IB CM's MADs (daemon/cm/mad.h) and rdma_cm's private-data header
 * (daemon/cm/cma_hdr.h), against the CM traffic of two Linux rxe peers in
 * tests/data/rxe-pair.pcap (rping, ucmatose and rdma_client connect and
 * disconnect from 10.88.1.3 to 10.88.1.2, udaddy resolves a UDP service),
 * found with the RoCEv2 codec: every MAD decodes to what the tools did
 * and encodes back to its 256 bytes; the reserved bits are the IBTA's;
 * truncated and garbage input is refused without reading past it (run
 * under the sanitizer build to see that).
 */
#include <config.h>

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/cm/cma_hdr.h"
#include "daemon/cm/mad.h"
#include "daemon/transport/roce/wire.h"
#include "tests/unit/capture.h"
#include "tests/common/check_run.h"

/* ---- the capture's MADs ------------------------------------------------- */

/* A CM MAD of the capture: the packet's addresses, DETH, and its bytes */
struct cap_mad {
	struct roce_ip ip;
	struct roce_pkt pkt;
	const uint8_t *mad;
	struct ibcm_msg m;
};

#define CAP_MADS		18

static struct pcap pcap;
static struct cap_mad mads[CAP_MADS];
static size_t nmads;

/* Every UD SEND_ONLY to QP1 in the capture, read once per test process */
static void load_mads(void)
{
	size_t i, off, len;

	if (pcap.file)
		return;
	capture_load("rxe-pair.pcap", &pcap);
	for (i = 0; i < pcap.nip; i++) {
		struct cap_mad c;

		if (roce_parse_ip(pcap.ip[i].ip, pcap.ip[i].len, &c.ip, &off,
				  &len) || c.ip.dport != ROCE_UDP_PORT)
			continue;
		ck_assert_int_eq(roce_decode(pcap.ip[i].ip + off, len, &c.pkt), 0);
		if (c.pkt.opcode != ROCE_UD_SEND_ONLY || c.pkt.dest_qp != 1)
			continue;
		ck_assert_uint_lt(nmads, CAP_MADS);
		ck_assert_uint_eq(c.pkt.payload_len, IBCM_MAD_LEN);
		c.mad = c.pkt.payload;
		ck_assert_int_eq(ibcm_decode(c.mad, c.pkt.payload_len, &c.m), 0);
		mads[nmads++] = c;
	}
	ck_assert_uint_eq(nmads, CAP_MADS);
}

/* The n-th MAD (from 0) of attribute attr, in capture order */
static const struct cap_mad *nth(uint16_t attr, size_t n)
{
	size_t i;

	for (i = 0; i < nmads; i++)
		if (mads[i].m.hdr.attr_id == attr && n-- == 0)
			return &mads[i];
	ck_abort_msg("no MAD 0x%x number %zu", attr, n);
	return NULL;
}

static size_t count(uint16_t attr)
{
	size_t i, n = 0;

	for (i = 0; i < nmads; i++)
		n += mads[i].m.hdr.attr_id == attr;
	return n;
}

/* The RoCE GID of IPv4 10.88.1.<host> */
static void gid_v4(uint8_t host, uint8_t gid[16])
{
	const uint8_t v4[4] = { 10, 88, 1, host };

	roce_ip_to_gid(AF_INET, v4, gid);
}

/* The hosts' CA GUIDs: EUI-64 of their MACs 52:54:00:88:01:0x */
#define GUID_SERVER		0x505400fffe880102ull
#define GUID_CLIENT		0x505400fffe880103ull

START_TEST(capture_census)
{
	size_t i;

	load_mads();
	for (i = 0; i < nmads; i++) {
		const struct ibcm_mad_hdr *h = &mads[i].m.hdr;

		/* QP1 to QP1 with the GSI Q_Key */
		ck_assert_uint_eq(mads[i].pkt.deth.qkey, ROCE_GSI_QKEY);
		ck_assert_uint_eq(mads[i].pkt.deth.src_qp, 1);
		ck_assert_uint_eq(h->base_version, IBCM_BASE_VERSION);
		ck_assert_uint_eq(h->mgmt_class, IBCM_MGMT_CLASS);
		ck_assert_uint_eq(h->class_version, IBCM_CLASS_VERSION);
		ck_assert_uint_eq(h->method, IBCM_METHOD_SEND);
		ck_assert_uint_eq(h->status, 0);
		ck_assert_uint_eq(h->class_specific, 0);
		/* no ECE from rxe */
		ck_assert_uint_eq(h->attr_mod, 0);
		/* the MAD agent's half of the TID */
		ck_assert_uint_eq(h->tid >> 32, 2);
	}
	ck_assert_uint_eq(count(IBCM_ATTR_REQ), 3);
	ck_assert_uint_eq(count(IBCM_ATTR_REP), 3);
	ck_assert_uint_eq(count(IBCM_ATTR_RTU), 3);
	ck_assert_uint_eq(count(IBCM_ATTR_DREQ), 4);
	ck_assert_uint_eq(count(IBCM_ATTR_DREP), 3);
	ck_assert_uint_eq(count(IBCM_ATTR_SIDR_REQ), 1);
	ck_assert_uint_eq(count(IBCM_ATTR_SIDR_REP), 1);
}
END_TEST

/* Every field and every bit kept: encoding gives back the 256 bytes */
START_TEST(capture_reencoded)
{
	uint8_t buf[IBCM_MAD_LEN];
	size_t i;

	load_mads();
	for (i = 0; i < nmads; i++) {
		memset(buf, 0xA5, sizeof(buf));
		ck_assert_int_eq(ibcm_encode(&mads[i].m, buf), 0);
		ck_assert_msg(memcmp(buf, mads[i].mad, IBCM_MAD_LEN) == 0,
			      "MAD %zu (attr 0x%x)", i, mads[i].m.hdr.attr_id);
	}
}
END_TEST

/*
 * The REQs: rping to port 7174, ucmatose and rdma_client to 7471, all RC
 * from 10.88.1.3 with rdma_cm's timers (CM response timeout 20, 15
 * retries, packet life time 18 so an ACK timeout of 19) and its header.
 */
static const struct {
	uint64_t service_id;
	uint32_t qpn;
	uint8_t resources;	/* responder resources = initiator depth */
	uint8_t retry, rnr_retry;
} want_req[3] = {
	{ 0x0000000001061c06, 17, 1, 7, 7 },	/* rping */
	{ 0x0000000001061d2f, 18, 1, 5, 0 },	/* ucmatose */
	{ 0x0000000001061d2f, 20, 128, 7, 7 },	/* rdma_client */
};

static void check_req_path(const struct ibcm_path *p)
{
	uint8_t gid[16];

	ck_assert_uint_eq(p->local_lid, 0xFFFF);
	ck_assert_uint_eq(p->remote_lid, 0xFFFF);
	gid_v4(3, gid);
	ck_assert_mem_eq(p->local_gid, gid, 16);
	gid_v4(2, gid);
	ck_assert_mem_eq(p->remote_gid, gid, 16);
	ck_assert_uint_eq(p->packet_rate, 0);
	ck_assert_uint_eq(p->traffic_class, 0);
	ck_assert_uint_eq(p->hop_limit, 64);
	ck_assert_uint_eq(p->sl, 0);
	ck_assert(!p->subnet_local);
	ck_assert_uint_eq(p->local_ack_timeout, 19);
}

START_TEST(capture_req)
{
	size_t i;

	load_mads();
	for (i = 0; i < 3; i++) {
		const struct ibcm_req *r = &nth(IBCM_ATTR_REQ, i)->m.req;

		ck_assert_uint_eq(r->service_id, want_req[i].service_id);
		ck_assert_uint_eq(r->local_ca_guid, GUID_CLIENT);
		ck_assert_uint_eq(r->local_qkey, 0);	/* RC */
		ck_assert_uint_eq(r->local_qpn, want_req[i].qpn);
		ck_assert_uint_eq(r->responder_resources, want_req[i].resources);
		ck_assert_uint_eq(r->initiator_depth, want_req[i].resources);
		ck_assert_uint_eq(r->transport, IBCM_TRANSPORT_RC);
		ck_assert(!r->e2e_flow_control);
		ck_assert_uint_eq(r->remote_cm_response_timeout, 20);
		ck_assert_uint_eq(r->local_cm_response_timeout, 20);
		ck_assert_uint_eq(r->retry_count, want_req[i].retry);
		ck_assert_uint_eq(r->rnr_retry_count, want_req[i].rnr_retry);
		ck_assert_uint_eq(r->max_cm_retries, 15);
		ck_assert_uint_eq(r->pkey, 0xFFFF);
		ck_assert_uint_eq(r->path_mtu, 3);	/* 1024 for MTU 1500 */
		ck_assert(!r->srq && !r->rdc_exists);
		ck_assert_uint_eq(r->ece_vendor_id, 0);
		ck_assert_uint_ne(r->starting_psn, 0);
		check_req_path(&r->primary);
		ck_assert(!ibcm_req_has_alt(r));
		ck_assert(!r->sap_supported);
	}
}
END_TEST

/*
 * rdma_cm's header in each REQ: from the active side, 10.88.1.3, which
 * sent the packet, to the port of the service ID at 10.88.1.2; the flow
 * label of the path is made of both ports.
 */
START_TEST(capture_req_cma_hdr)
{
	struct sockaddr_storage src, dst;
	size_t i;

	load_mads();
	for (i = 0; i < 3; i++) {
		const struct cap_mad *c = nth(IBCM_ATTR_REQ, i);
		const struct ibcm_req *r = &c->m.req;
		uint16_t dport = cma_service_port(r->service_id);
		struct sockaddr_in *sin = (struct sockaddr_in *)&src;
		struct cma_hdr h;
		uint8_t raw[CMA_HDR_LEN];

		ck_assert_int_eq(cma_hdr_decode(r->pdata, sizeof(r->pdata), &h), 0);
		ck_assert_uint_eq(h.version, 0);
		ck_assert_uint_eq(h.ip_version, 4);
		ck_assert_uint_eq(r->pdata[1], 0x40);
		ck_assert(cma_service_id_ok(r->service_id));
		ck_assert_uint_eq(cma_service_ps(r->service_id), RDMA_PS_TCP);
		cma_hdr_to_addrs(&h, dport, &src, &dst);
		ck_assert_uint_eq(src.ss_family, AF_INET);
		ck_assert_mem_eq(&sin->sin_addr, c->ip.src, 4);
		ck_assert_uint_eq(ntohs(sin->sin_port), h.src_port);
		sin = (struct sockaddr_in *)&dst;
		ck_assert_mem_eq(&sin->sin_addr, c->ip.dst, 4);
		ck_assert_uint_eq(ntohs(sin->sin_port), dport);
		ck_assert_uint_eq(c->ip.src[3], 3);
		/* IPv4 after twelve zero bytes, not ::ffff */
		ck_assert_uint_eq(r->pdata[15], 0);
		ck_assert_uint_eq(r->pdata[31], 0);
		/* the active side's port: an ephemeral one, and the label's */
		ck_assert_uint_ge(h.src_port, 32768);
		ck_assert_uint_eq(r->primary.flow_label,
				  cma_flow_label(h.src_port, dport));
		/* and back to the same bytes */
		ck_assert_int_eq(cma_hdr_from_addrs(&h, (struct sockaddr *)&src,
						    (struct sockaddr *)&dst), 0);
		cma_hdr_encode(&h, raw);
		ck_assert_mem_eq(raw, r->pdata, CMA_HDR_LEN);
	}
	/* rping's, worked out by hand: (0xC63A * 31 + 7174) & 0xFFFFF */
	ck_assert_uint_eq(nth(IBCM_ATTR_REQ, 0)->m.req.primary.flow_label, 0x81D0C);
}
END_TEST

/* Each REP answers its REQ, each RTU its REP, with the REQ's TID */
START_TEST(capture_rep_rtu)
{
	size_t i;

	load_mads();
	for (i = 0; i < 3; i++) {
		const struct cap_mad *req = nth(IBCM_ATTR_REQ, i);
		const struct cap_mad *rep = nth(IBCM_ATTR_REP, i);
		const struct cap_mad *rtu = nth(IBCM_ATTR_RTU, i);
		const struct ibcm_rep *p = &rep->m.rep;

		ck_assert_uint_eq(rep->m.hdr.tid, req->m.hdr.tid);
		ck_assert_uint_eq(rtu->m.hdr.tid, req->m.hdr.tid);
		/* ib_cm's TID ends in its comm ID, byte-swapped on x86 */
		ck_assert_uint_eq((uint32_t)req->m.hdr.tid,
				  __builtin_bswap32(req->m.req.local_comm_id));
		ck_assert_uint_eq(p->remote_comm_id, req->m.req.local_comm_id);
		ck_assert_uint_ne(p->local_comm_id, 0);
		ck_assert_uint_eq(rep->ip.src[3], 2);
		ck_assert_uint_eq(p->local_ca_guid, GUID_SERVER);
		ck_assert_uint_eq(p->local_qkey, 0);
		/* both ends of each connection got the same QPN */
		ck_assert_uint_eq(p->local_qpn, req->m.req.local_qpn);
		ck_assert_uint_eq(p->responder_resources, want_req[i].resources);
		ck_assert_uint_eq(p->initiator_depth, want_req[i].resources);
		ck_assert_uint_eq(p->target_ack_delay, 15);	/* rxe's */
		ck_assert_uint_eq(p->failover, 0);
		ck_assert_uint_eq(p->rnr_retry_count, 7);
		ck_assert(!p->srq && !p->e2e_flow_control);
		ck_assert_uint_eq(p->ece_vendor_id, 0);
		ck_assert_uint_eq(rtu->m.rtu.local_comm_id, req->m.req.local_comm_id);
		ck_assert_uint_eq(rtu->m.rtu.remote_comm_id, p->local_comm_id);
	}
}
END_TEST

/* Whether a and b are the comm IDs of one of the capture's connections */
static bool connection(uint32_t a, uint32_t b)
{
	size_t i;

	for (i = 0; i < 3; i++) {
		uint32_t act = nth(IBCM_ATTR_REQ, i)->m.req.local_comm_id;
		uint32_t pas = nth(IBCM_ATTR_REP, i)->m.rep.local_comm_id;

		if ((a == act && b == pas) || (a == pas && b == act))
			return true;
	}
	return false;
}

/*
 * Disconnects: rping's from the client, ucmatose's from the server,
 * rdma_client's from both at once (so one DREQ goes unanswered).  Each
 * DREQ names a connection and its peer's QP; each DREP echoes its DREQ's
 * IDs, swapped, and its TID.
 */
START_TEST(capture_disconnect)
{
	size_t i, k;

	load_mads();
	for (i = 0; i < 4; i++) {
		const struct ibcm_dreq *d = &nth(IBCM_ATTR_DREQ, i)->m.dreq;

		ck_assert(connection(d->local_comm_id, d->remote_comm_id));
		ck_assert(d->remote_qpn == 17 || d->remote_qpn == 18 ||
			  d->remote_qpn == 20);
	}
	for (i = 0; i < 3; i++) {
		const struct cap_mad *drep = nth(IBCM_ATTR_DREP, i);
		bool answered = false;

		for (k = 0; k < 4; k++) {
			const struct cap_mad *dreq = nth(IBCM_ATTR_DREQ, k);

			if (dreq->m.dreq.local_comm_id != drep->m.drep.remote_comm_id)
				continue;
			ck_assert_uint_eq(dreq->m.dreq.remote_comm_id,
					  drep->m.drep.local_comm_id);
			ck_assert_uint_eq(dreq->m.hdr.tid, drep->m.hdr.tid);
			ck_assert(dreq < drep);
			answered = true;
		}
		ck_assert(answered);
	}
}
END_TEST

/* udaddy: service 7174 of the UDP port space; QP 19 with rdma_cm's Q_Key */
START_TEST(capture_sidr)
{
	const struct cap_mad *req, *rep;
	const struct ibcm_sidr_rep *r;
	struct cma_hdr h;

	load_mads();
	req = nth(IBCM_ATTR_SIDR_REQ, 0);
	rep = nth(IBCM_ATTR_SIDR_REP, 0);
	ck_assert_uint_eq(req->m.sidr_req.service_id,
			  cma_service_id(RDMA_PS_UDP, 7174));
	ck_assert_uint_eq(req->m.sidr_req.service_id, 0x0000000001111c06);
	ck_assert_uint_eq(req->m.sidr_req.pkey, 0xFFFF);
	ck_assert_int_eq(cma_hdr_decode(req->m.sidr_req.pdata,
					sizeof(req->m.sidr_req.pdata), &h), 0);
	ck_assert_uint_eq(h.ip_version, 4);
	ck_assert_mem_eq(h.src_ip + 12, req->ip.src, 4);
	ck_assert_mem_eq(h.dst_ip + 12, req->ip.dst, 4);

	r = &rep->m.sidr_rep;
	ck_assert_uint_eq(rep->m.hdr.tid, req->m.hdr.tid);
	ck_assert_uint_eq(r->request_id, req->m.sidr_req.request_id);
	ck_assert_uint_eq(r->status, IBCM_SIDR_SUCCESS);
	ck_assert_uint_eq(r->info_len, 0);
	ck_assert_uint_eq(r->qpn, 19);
	ck_assert_uint_eq(r->qkey, RDMA_UDP_QKEY);
	ck_assert_uint_eq(r->qkey, 0x01234567);
	ck_assert_uint_eq(r->service_id, req->m.sidr_req.service_id);
}
END_TEST

/* ---- reserved bits ------------------------------------------------------ */

/* Reserved bits of a message: at CM offset off (after the MAD header) */
struct rsvd {
	uint8_t off, mask;
};

#define RSVD_MAX		16
/*
 * Written from the IBTA's tables, apart from the codec: what is left
 * over from every field.  A path's u32 at 36 has 6 reserved bits between
 * the flow label and the packet rate; bytes 42 and 43 have 3 each, but
 * the alternate path's last byte carries SAP (0x04).
 */
static const struct {
	uint16_t attr;
	struct rsvd r[RSVD_MAX];
} reserved[] = {
	{ IBCM_ATTR_REQ, { { 4, 0xFF }, { 24, 0xFF }, { 25, 0xFF }, { 26, 0xFF },
			   { 27, 0xFF }, { 52 + 38, 0x0F }, { 52 + 39, 0xC0 },
			   { 52 + 42, 0x07 }, { 52 + 43, 0x07 },
			   { 96 + 38, 0x0F }, { 96 + 39, 0xC0 },
			   { 96 + 42, 0x07 }, { 96 + 43, 0x03 } } },
	{ IBCM_ATTR_MRA, { { 8, 0x3F }, { 9, 0x07 } } },
	{ IBCM_ATTR_REJ, { { 8, 0x3F }, { 9, 0x01 } } },
	{ IBCM_ATTR_REP, { { 27, 0x0F } } },
	{ IBCM_ATTR_RTU, { { 0, 0 } } },
	{ IBCM_ATTR_DREQ, { { 11, 0xFF } } },
	{ IBCM_ATTR_DREP, { { 0, 0 } } },
	{ IBCM_ATTR_SIDR_REQ, { { 6, 0xFF }, { 7, 0xFF } } },
	{ IBCM_ATTR_SIDR_REP, { { 6, 0xFF }, { 7, 0xFF }, { 11, 0xFF } } },
};

#define NATTRS	(sizeof(reserved) / sizeof(reserved[0]))

/* The bits of a MAD of attribute reserved[a] that encoding keeps */
static void kept_bits(size_t a, uint8_t map[IBCM_MAD_LEN])
{
	size_t i;

	memset(map, 0xFF, IBCM_MAD_LEN);
	map[18] = map[19] = 0;			/* the header's reserved u16 */
	for (i = 0; i < RSVD_MAX; i++)
		map[IBCM_HDR_LEN + reserved[a].r[i].off] &= ~reserved[a].r[i].mask;
}

/* A MAD of attribute attr, its other bytes from fill (advanced) */
static void some_mad(uint16_t attr, uint32_t *seed, uint8_t mad[IBCM_MAD_LEN])
{
	size_t i;

	for (i = 0; i < IBCM_MAD_LEN; i++) {
		*seed = *seed * 1103515245 + 12345;
		mad[i] = (uint8_t)(*seed >> 16);
	}
	mad[0] = IBCM_BASE_VERSION;
	mad[1] = IBCM_MGMT_CLASS;
	mad[16] = (uint8_t)(attr >> 8);
	mad[17] = (uint8_t)attr;
}

/* All ones in, all ones out but for the reserved bits */
START_TEST(reserved_bits)
{
	uint8_t in[IBCM_MAD_LEN], out[IBCM_MAD_LEN], map[IBCM_MAD_LEN];
	struct ibcm_msg m;
	size_t a, i;

	for (a = 0; a < NATTRS; a++) {
		memset(in, 0xFF, sizeof(in));
		in[0] = IBCM_BASE_VERSION;
		in[1] = IBCM_MGMT_CLASS;
		in[16] = (uint8_t)(reserved[a].attr >> 8);
		in[17] = (uint8_t)reserved[a].attr;
		ck_assert_int_eq(ibcm_decode(in, sizeof(in), &m), 0);
		memset(out, 0x5A, sizeof(out));
		ck_assert_int_eq(ibcm_encode(&m, out), 0);
		kept_bits(a, map);
		for (i = 0; i < IBCM_MAD_LEN; i++)
			ck_assert_msg(out[i] == (in[i] & map[i]),
				      "attr 0x%x byte %zu: 0x%02x, want 0x%02x",
				      reserved[a].attr, i, out[i], in[i] & map[i]);
	}
}
END_TEST

/* Random messages: decoded and encoded again, only reserved bits change */
START_TEST(random_reencoded)
{
	uint8_t in[IBCM_MAD_LEN], out[IBCM_MAD_LEN], map[IBCM_MAD_LEN];
	uint32_t seed = 1;
	struct ibcm_msg m, again;
	size_t a, n, i;

	/* the header's padding compares equal */
	memset(&m, 0, sizeof(m));
	memset(&again, 0, sizeof(again));
	for (a = 0; a < NATTRS; a++) {
		kept_bits(a, map);
		for (n = 0; n < 200; n++) {
			some_mad(reserved[a].attr, &seed, in);
			ck_assert_int_eq(ibcm_decode(in, sizeof(in), &m), 0);
			ck_assert_int_eq(ibcm_encode(&m, out), 0);
			for (i = 0; i < IBCM_MAD_LEN; i++)
				ck_assert_uint_eq(out[i], in[i] & map[i]);
			ck_assert_int_eq(ibcm_decode(out, sizeof(out), &again), 0);
			ck_assert_mem_eq(&again.hdr, &m.hdr, sizeof(m.hdr));
		}
	}
}
END_TEST

/* ---- encoding what we make ------------------------------------------------ */

/* Fields land where the IBTA puts them, bit fields under their masks */
START_TEST(req_encoded)
{
	struct ibcm_msg m;
	uint8_t mad[IBCM_MAD_LEN];
	const uint8_t *c = mad + IBCM_HDR_LEN;
	size_t i;

	memset(&m, 0, sizeof(m));
	ibcm_hdr_init(&m.hdr, IBCM_ATTR_REQ, 0x0000000211223344ull);
	m.req.local_comm_id = 0x44332211;
	m.req.ece_vendor_id = 0x123456;
	m.req.service_id = cma_service_id(RDMA_PS_TCP, 7471);
	m.req.local_qpn = 0xABCDEF;
	m.req.remote_cm_response_timeout = 20;
	m.req.transport = IBCM_TRANSPORT_UC;
	m.req.e2e_flow_control = true;
	m.req.starting_psn = 0x39907E;
	m.req.local_cm_response_timeout = 18;
	m.req.retry_count = 9;			/* 3 bits: 1 on the wire */
	m.req.path_mtu = 5;
	m.req.rnr_retry_count = 7;
	m.req.max_cm_retries = 15;
	m.req.srq = true;
	m.req.primary.flow_label = 0x81D0C;
	m.req.primary.packet_rate = 0x2A;
	m.req.primary.sl = 0x1F;		/* 4 bits: 0xF */
	m.req.primary.subnet_local = true;
	m.req.primary.local_ack_timeout = 19;
	m.req.pdata[0] = 0x77;
	m.req.pdata[IBCM_REQ_PDATA - 1] = 0x88;
	ck_assert_int_eq(ibcm_encode(&m, mad), 0);

	ck_assert_uint_eq(mad[0], 1);
	ck_assert_uint_eq(mad[1], 7);
	ck_assert_uint_eq(mad[2], 2);
	ck_assert_uint_eq(mad[3], 3);
	ck_assert_uint_eq(mad[11], 0x02);
	ck_assert_uint_eq(mad[15], 0x44);
	ck_assert_uint_eq(mad[17], 0x10);
	ck_assert_uint_eq(c[0], 0x44);
	ck_assert_uint_eq(c[4], 0);
	ck_assert_uint_eq(c[5], 0x12);
	ck_assert_uint_eq(c[7], 0x56);
	ck_assert_uint_eq(c[13], 0x06);
	ck_assert_uint_eq(c[14], 0x1D);
	ck_assert_uint_eq(c[15], 0x2F);
	ck_assert_uint_eq(c[32], 0xAB);
	ck_assert_uint_eq(c[34], 0xEF);
	ck_assert_uint_eq(c[43], 20 << 3 | 1 << 1 | 1);
	ck_assert_uint_eq(c[44], 0x39);
	ck_assert_uint_eq(c[47], 18 << 3 | 1);
	ck_assert_uint_eq(c[50], 0x57);
	ck_assert_uint_eq(c[51], 0xF8);
	ck_assert_uint_eq(c[88], 0x81);
	ck_assert_uint_eq(c[89], 0xD0);
	ck_assert_uint_eq(c[90], 0xC0);
	ck_assert_uint_eq(c[91], 0x2A);
	ck_assert_uint_eq(c[94], 0xF8);
	ck_assert_uint_eq(c[95], 19 << 3);
	/* no alternate path: all zero, which is how a receiver tells */
	for (i = 96; i < 140; i++)
		ck_assert_uint_eq(c[i], 0);
	ck_assert(!ibcm_req_has_alt(&m.req));
	ck_assert_uint_eq(c[140], 0x77);
	ck_assert_uint_eq(mad[255], 0x88);
}
END_TEST

/* REP spreads ECE's vendor ID over three otherwise reserved bytes */
START_TEST(rep_encoded)
{
	struct ibcm_rep r;
	uint8_t mad[IBCM_MAD_LEN];
	const uint8_t *c = mad + IBCM_HDR_LEN;

	memset(&r, 0, sizeof(r));
	r.local_qpn = 0x000011;
	r.local_eecn = 0x222222;
	r.starting_psn = 0xC8BFCF;
	r.ece_vendor_id = 0xABCDEF;
	r.target_ack_delay = 15;
	r.failover = 3;
	r.rnr_retry_count = 7;
	r.srq = true;
	r.local_ca_guid = GUID_SERVER;
	ibcm_rep_encode(&r, mad);
	ck_assert_uint_eq(c[14], 0x11);
	ck_assert_uint_eq(c[15], 0xAB);
	ck_assert_uint_eq(c[19], 0xCD);
	ck_assert_uint_eq(c[22], 0xCF);
	ck_assert_uint_eq(c[23], 0xEF);
	ck_assert_uint_eq(c[26], 0x7E);
	ck_assert_uint_eq(c[27], 0xF0);
	ck_assert_uint_eq(c[28], 0x50);
	ck_assert_uint_eq(c[35], 0x02);
}
END_TEST

/* REJ: the reason after the kind and the ARI length; ARI and pdata after */
START_TEST(rej_mra_encoded)
{
	struct ibcm_msg m;
	uint8_t mad[IBCM_MAD_LEN];
	const uint8_t *c = mad + IBCM_HDR_LEN;

	memset(&m, 0, sizeof(m));
	ibcm_hdr_init(&m.hdr, IBCM_ATTR_REJ, 1);
	m.rej.remote_comm_id = 0x9CEF12D1;
	m.rej.msg_rejected = IBCM_MSG_REQ;
	m.rej.ari_len = 72;
	m.rej.reason = IBCM_REJ_CONSUMER_DEFINED;
	m.rej.ari[0] = 0xA1;
	m.rej.pdata[0] = 0xB2;
	ck_assert_int_eq(ibcm_encode(&m, mad), 0);
	ck_assert_uint_eq(c[4], 0x9C);
	ck_assert_uint_eq(c[8], 0);
	ck_assert_uint_eq(c[9], 72 << 1);
	ck_assert_uint_eq(c[11], 28);
	ck_assert_uint_eq(c[12], 0xA1);
	ck_assert_uint_eq(c[84], 0xB2);

	memset(&m, 0, sizeof(m));
	ibcm_hdr_init(&m.hdr, IBCM_ATTR_MRA, 1);
	m.mra.msg_mraed = IBCM_MSG_REP;
	m.mra.service_timeout = 24;
	m.mra.pdata[0] = 0xC3;
	ck_assert_int_eq(ibcm_encode(&m, mad), 0);
	ck_assert_uint_eq(c[8], 0x40);
	ck_assert_uint_eq(c[9], 24 << 3);
	ck_assert_uint_eq(c[10], 0xC3);
}
END_TEST

/* ---- malformed input ---------------------------------------------------- */

START_TEST(truncated)
{
	struct ibcm_msg m;
	struct cma_hdr h;
	size_t i, n;

	load_mads();
	for (i = 0; i < nmads; i++) {
		for (n = 0; n < IBCM_MAD_LEN; n++) {
			uint8_t *b = exact_copy(mads[i].mad, n);

			ck_assert_int_eq(ibcm_decode(b, n, &m), -EBADMSG);
			free(b);
		}
	}
	for (i = 0; i < 3; i++) {
		const uint8_t *pdata = nth(IBCM_ATTR_REQ, i)->m.req.pdata;

		for (n = 0; n < CMA_HDR_LEN; n++) {
			uint8_t *b = exact_copy(pdata, n);

			ck_assert_int_eq(cma_hdr_decode(b, n, &h), -EBADMSG);
			free(b);
		}
		ck_assert_int_eq(cma_hdr_decode(pdata, CMA_HDR_LEN, &h), 0);
	}
}
END_TEST

/* Not CM MADs, CM MADs we don't decode, and bad rdma_cm headers */
START_TEST(garbage)
{
	uint8_t mad[IBCM_MAD_LEN + 1], out[IBCM_MAD_LEN];
	uint8_t pdata[CMA_HDR_LEN];
	struct ibcm_msg m;
	struct cma_hdr h;

	load_mads();
	memcpy(mad, mads[0].mad, IBCM_MAD_LEN);
	mad[IBCM_MAD_LEN] = 0;
	ck_assert_int_eq(ibcm_decode(mad, IBCM_MAD_LEN + 1, &m), -EBADMSG);
	mad[0] = 0x82;			/* OPA */
	ck_assert_int_eq(ibcm_decode(mad, IBCM_MAD_LEN, &m), -EBADMSG);
	mad[0] = IBCM_BASE_VERSION;
	mad[1] = 0x04;			/* the Performance class */
	ck_assert_int_eq(ibcm_decode(mad, IBCM_MAD_LEN, &m), -EBADMSG);
	mad[1] = IBCM_MGMT_CLASS;
	mad[17] = IBCM_ATTR_LAP;
	ck_assert_int_eq(ibcm_decode(mad, IBCM_MAD_LEN, &m), -EOPNOTSUPP);
	ck_assert_uint_eq(m.hdr.attr_id, IBCM_ATTR_LAP);
	ck_assert_uint_eq(m.hdr.tid, mads[0].m.hdr.tid);
	memset(out, 0x5A, sizeof(out));
	ck_assert_int_eq(ibcm_encode(&m, out), -EOPNOTSUPP);
	ck_assert_uint_eq(out[0], 0x5A);
	ck_assert_uint_eq(out[IBCM_MAD_LEN - 1], 0x5A);

	memcpy(pdata, nth(IBCM_ATTR_REQ, 0)->m.req.pdata, CMA_HDR_LEN);
	pdata[1] = 0x4F;		/* the low nibble is reserved */
	ck_assert_int_eq(cma_hdr_decode(pdata, sizeof(pdata), &h), 0);
	ck_assert_uint_eq(h.ip_version, 4);
	pdata[1] = 0x50;
	ck_assert_int_eq(cma_hdr_decode(pdata, sizeof(pdata), &h), -EBADMSG);
	pdata[1] = 0x00;
	ck_assert_int_eq(cma_hdr_decode(pdata, sizeof(pdata), &h), -EBADMSG);
	pdata[1] = 0x60;
	ck_assert_int_eq(cma_hdr_decode(pdata, sizeof(pdata), &h), 0);
	pdata[0] = 1;
	ck_assert_int_eq(cma_hdr_decode(pdata, sizeof(pdata), &h), -EBADMSG);
}
END_TEST

/* ---- rdma_cm: service IDs, addresses, flow labels ---------------------------- */

START_TEST(service_ids)
{
	ck_assert_uint_eq(cma_service_id(RDMA_PS_TCP, 7174), 0x0000000001061c06);
	ck_assert_uint_eq(cma_service_id(RDMA_PS_UDP, 0xFFFF), 0x000000000111FFFF);
	ck_assert_uint_eq(cma_service_id(RDMA_PS_IPOIB, 1), 0x0000000000020001);
	ck_assert_uint_eq(cma_service_id(RDMA_PS_IB, 0), 0x00000000013F0000);
	ck_assert_uint_eq(cma_service_ps(0x0000000001061d2f), RDMA_PS_TCP);
	ck_assert_uint_eq(cma_service_port(0x0000000001061d2f), 7471);
	ck_assert(cma_service_id_ok(0x0000000001111c06));
	ck_assert(cma_service_id_ok(0x00000000013F0000));
	ck_assert(cma_service_id_ok(0x0000000000020000));
	ck_assert(!cma_service_id_ok(0x0000000001071c06));
	ck_assert(!cma_service_id_ok(0x0000000101061c06));
	ck_assert(!cma_service_id_ok(0));
}
END_TEST

START_TEST(addrs)
{
	struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons(50746) };
	struct sockaddr_in b4 = { .sin_family = AF_INET, .sin_port = htons(7174) };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6,
				   .sin6_port = htons(40000) };
	struct sockaddr_in6 b6 = { .sin6_family = AF_INET6 };
	struct sockaddr_storage src, dst;
	uint8_t raw[CMA_HDR_LEN];
	struct cma_hdr h;
	size_t i;

	inet_pton(AF_INET, "10.88.1.3", &a4.sin_addr);
	inet_pton(AF_INET, "10.88.1.2", &b4.sin_addr);
	ck_assert_int_eq(cma_hdr_from_addrs(&h, (struct sockaddr *)&a4,
					    (struct sockaddr *)&b4), 0);
	cma_hdr_encode(&h, raw);
	ck_assert_uint_eq(raw[0], 0);
	ck_assert_uint_eq(raw[1], 0x40);
	ck_assert_uint_eq(raw[2], 0xC6);
	ck_assert_uint_eq(raw[3], 0x3A);
	for (i = 4; i < 16; i++)
		ck_assert_uint_eq(raw[i], 0);
	ck_assert_uint_eq(raw[19], 3);
	for (i = 20; i < 32; i++)
		ck_assert_uint_eq(raw[i], 0);
	ck_assert_uint_eq(raw[35], 2);
	cma_hdr_to_addrs(&h, 7174, &src, &dst);
	ck_assert_mem_eq(&src, &a4, sizeof(a4));
	ck_assert_mem_eq(&dst, &b4, sizeof(b4));

	inet_pton(AF_INET6, "fd00::3", &a6.sin6_addr);
	inet_pton(AF_INET6, "fd00::2", &b6.sin6_addr);
	ck_assert_int_eq(cma_hdr_from_addrs(&h, (struct sockaddr *)&a6,
					    (struct sockaddr *)&b6), 0);
	cma_hdr_encode(&h, raw);
	ck_assert_uint_eq(raw[1], 0x60);
	ck_assert_uint_eq(raw[4], 0xFD);
	ck_assert_uint_eq(raw[19], 3);
	ck_assert_uint_eq(raw[35], 2);
	ck_assert_int_eq(cma_hdr_decode(raw, sizeof(raw), &h), 0);
	cma_hdr_to_addrs(&h, 0, &src, &dst);
	ck_assert_mem_eq(&src, &a6, sizeof(a6));
	ck_assert_mem_eq(&dst, &b6, sizeof(b6));

	ck_assert_int_eq(cma_hdr_from_addrs(&h, (struct sockaddr *)&a4,
					    (struct sockaddr *)&b6), -EAFNOSUPPORT);
	a4.sin_family = AF_UNIX;
	b4.sin_family = AF_UNIX;
	ck_assert_int_eq(cma_hdr_from_addrs(&h, (struct sockaddr *)&a4,
					    (struct sockaddr *)&b4), -EAFNOSUPPORT);
}
END_TEST

START_TEST(flow_labels)
{
	ck_assert_uint_eq(cma_flow_label(0xC63A, 7174), 0x81D0C);
	/* 0xFFFF * 32 = 0x1FFFE0: the top bit is cut */
	ck_assert_uint_eq(cma_flow_label(0xFFFF, 0xFFFF), 0xFFFE0);
	ck_assert_uint_eq(cma_flow_label(0, 0), 0);
}
END_TEST

/* ---- timers --------------------------------------------------------------- */

START_TEST(timers)
{
	ck_assert_uint_eq(ibcm_timeout_ms(0), 1);
	ck_assert_uint_eq(ibcm_timeout_ms(8), 1);
	ck_assert_uint_eq(ibcm_timeout_ms(9), 2);
	ck_assert_uint_eq(ibcm_timeout_ms(18), 1024);
	ck_assert_uint_eq(ibcm_timeout_ms(20), 4096);	/* rdma_cm's 4.3 s */
	ck_assert_uint_eq(ibcm_timeout_ms(24), 65536);	/* its MRAs' */
	ck_assert_uint_eq(ibcm_timeout_ms(31), 1u << 23);
	ck_assert_uint_eq(ibcm_timeout_ms(255), 1u << 23);
	/* rdma_cm on RoCE: life time 18, the peer's response timeout 20 */
	ck_assert_uint_eq(ibcm_req_wait_ms(18, 20), 2 * 1024 + 4096);
	ck_assert_uint_eq(ibcm_req_wait_ms(0, 0), 3);
	ck_assert_uint_eq(ibcm_req_wait_ms(31, 31), 3u << 23);
	/* what a peer asks us to wait: at most our own MRAs' 67 s */
	ck_assert_uint_eq(ibcm_peer_timeout(20), 20);
	ck_assert_uint_eq(ibcm_peer_timeout(24), 24);
	ck_assert_uint_eq(ibcm_peer_timeout(31), IBCM_PEER_TIMEOUT_MAX);
	ck_assert_uint_eq(ibcm_timeout_ms(ibcm_peer_timeout(255)), 65536);
	/* a REQ's: at most the kernel rdma_cm's 20 (4 s a try) */
	ck_assert_uint_eq(ibcm_peer_req_timeout(18), 18);
	ck_assert_uint_eq(ibcm_peer_req_timeout(31), IBCM_PEER_REQ_TIMEOUT_MAX);
	ck_assert_uint_eq(ibcm_timeout_ms(ibcm_peer_req_timeout(255)), 4096);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cm_mad");
	TCase *cap = tcase_create("rxe-pair");
	TCase *codec = tcase_create("codec");
	TCase *cma = tcase_create("rdma_cm");

	tcase_add_test(cap, capture_census);
	tcase_add_test(cap, capture_reencoded);
	tcase_add_test(cap, capture_req);
	tcase_add_test(cap, capture_req_cma_hdr);
	tcase_add_test(cap, capture_rep_rtu);
	tcase_add_test(cap, capture_disconnect);
	tcase_add_test(cap, capture_sidr);
	tcase_add_test(cap, truncated);
	tcase_add_test(cap, garbage);
	tcase_add_test(codec, reserved_bits);
	tcase_add_test(codec, random_reencoded);
	tcase_add_test(codec, req_encoded);
	tcase_add_test(codec, rep_encoded);
	tcase_add_test(codec, rej_mra_encoded);
	tcase_add_test(codec, timers);
	tcase_add_test(cma, service_ids);
	tcase_add_test(cma, addrs);
	tcase_add_test(cma, flow_labels);
	suite_add_tcase(s, cap);
	suite_add_tcase(s, codec);
	suite_add_tcase(s, cma);
	return check_run(s, CK_NORMAL);
}
