/*
 * The IB CM's MADs (mad.h): the header and each message, field by field.
 * Offsets below are from the start of the CM message, 24 bytes into the
 * MAD, as the IBTA's tables give them; masks are within the byte.
 */
#include <config.h>

#include <errno.h>
#include <string.h>

#include "mad.h"
#include "transport/roce/be.h"

/* ---- bit fields --------------------------------------------------------- */

/* The value under mask in byte b, shifted down to bit 0 */
static uint8_t bits(uint8_t b, uint8_t mask)
{
	return (uint8_t)((b & mask) >> __builtin_ctz(mask));
}

/* v placed under mask; what does not fit is dropped, as the wire would */
static uint8_t field(unsigned int v, uint8_t mask)
{
	return (uint8_t)((v << __builtin_ctz(mask)) & mask);
}

/* ---- the MAD header ------------------------------------------------------- */

void ibcm_hdr_decode(const uint8_t mad[IBCM_MAD_LEN], struct ibcm_mad_hdr *h)
{
	h->base_version = mad[0];
	h->mgmt_class = mad[1];
	h->class_version = mad[2];
	h->method = mad[3];
	h->status = get_be16(mad + 4);
	h->class_specific = get_be16(mad + 6);
	h->tid = get_be64(mad + 8);
	h->attr_id = get_be16(mad + 16);
	h->attr_mod = get_be32(mad + 20);
}

void ibcm_hdr_encode(const struct ibcm_mad_hdr *h, uint8_t mad[IBCM_MAD_LEN])
{
	mad[0] = h->base_version;
	mad[1] = h->mgmt_class;
	mad[2] = h->class_version;
	mad[3] = h->method;
	put_be16(mad + 4, h->status);
	put_be16(mad + 6, h->class_specific);
	put_be64(mad + 8, h->tid);
	put_be16(mad + 16, h->attr_id);
	put_be16(mad + 18, 0);
	put_be32(mad + 20, h->attr_mod);
}

void ibcm_hdr_init(struct ibcm_mad_hdr *h, uint16_t attr_id, uint64_t tid)
{
	memset(h, 0, sizeof(*h));
	h->base_version = IBCM_BASE_VERSION;
	h->mgmt_class = IBCM_MGMT_CLASS;
	h->class_version = IBCM_CLASS_VERSION;
	h->method = IBCM_METHOD_SEND;
	h->attr_id = attr_id;
	h->tid = tid;
}

/* The CM message of a MAD; encoders clear it first, so reserved is 0 */
static const uint8_t *msg_in(const uint8_t mad[IBCM_MAD_LEN])
{
	return mad + IBCM_HDR_LEN;
}

static uint8_t *msg_out(uint8_t mad[IBCM_MAD_LEN])
{
	memset(mad + IBCM_HDR_LEN, 0, IBCM_MAD_LEN - IBCM_HDR_LEN);
	return mad + IBCM_HDR_LEN;
}

/* ---- REQ -------------------------------------------------------------- */

#define REQ_PRIMARY		52
#define REQ_ALT			96
#define REQ_PDATA		140

/* Path byte 94: SL, subnet local; 95: local ACK timeout (alt: + SAP) */
#define PATH_SL			0xF0
#define PATH_SUBNET_LOCAL	0x08
#define PATH_ACK_TIMEOUT	0xF8
#define REQ_SAP_SUPPORTED	0x04
/* The u32 at 36 into a path: flow label above, packet rate below */
#define PATH_FLOW_SHIFT		12
#define PATH_RATE		0x3F

static void path_decode(const uint8_t *p, struct ibcm_path *path)
{
	uint32_t flow = get_be32(p + 36);

	path->local_lid = get_be16(p);
	path->remote_lid = get_be16(p + 2);
	memcpy(path->local_gid, p + 4, 16);
	memcpy(path->remote_gid, p + 20, 16);
	path->flow_label = flow >> PATH_FLOW_SHIFT;
	path->packet_rate = flow & PATH_RATE;
	path->traffic_class = p[40];
	path->hop_limit = p[41];
	path->sl = bits(p[42], PATH_SL);
	path->subnet_local = p[42] & PATH_SUBNET_LOCAL;
	path->local_ack_timeout = bits(p[43], PATH_ACK_TIMEOUT);
}

static void path_encode(const struct ibcm_path *path, uint8_t *p)
{
	put_be16(p, path->local_lid);
	put_be16(p + 2, path->remote_lid);
	memcpy(p + 4, path->local_gid, 16);
	memcpy(p + 20, path->remote_gid, 16);
	put_be32(p + 36, path->flow_label << PATH_FLOW_SHIFT |
			 (path->packet_rate & PATH_RATE));
	p[40] = path->traffic_class;
	p[41] = path->hop_limit;
	p[42] = field(path->sl, PATH_SL) |
		(path->subnet_local ? PATH_SUBNET_LOCAL : 0);
	p[43] = field(path->local_ack_timeout, PATH_ACK_TIMEOUT);
}

/* Byte 43: remote CM response timeout, transport, end-to-end flow control */
#define REQ_REMOTE_CM_TIMEOUT	0xF8
#define REQ_TRANSPORT		0x06
#define REQ_E2E			0x01
/* Byte 47 */
#define REQ_LOCAL_CM_TIMEOUT	0xF8
#define REQ_RETRY_COUNT		0x07
/* Byte 50 */
#define REQ_PATH_MTU		0xF0
#define REQ_RDC_EXISTS		0x08
#define REQ_RNR_RETRY		0x07
/* Byte 51 */
#define REQ_MAX_CM_RETRIES	0xF0
#define REQ_SRQ			0x08
#define REQ_EXT_TRANSPORT	0x07

/* Bytes 0-31: comm ID, ECE vendor, service, CA GUID, Q_Key */
static void req_ids_decode(const uint8_t *c, struct ibcm_req *r)
{
	r->local_comm_id = get_be32(c);
	r->ece_vendor_id = get_be24(c + 5);
	r->service_id = get_be64(c + 8);
	r->local_ca_guid = get_be64(c + 16);
	r->local_qkey = get_be32(c + 28);
}

/* Bytes 32-51: QP, EEC, PSN and what goes with each, then the link */
static void req_qp_decode(const uint8_t *c, struct ibcm_req *r)
{
	r->local_qpn = get_be24(c + 32);
	r->responder_resources = c[35];
	r->local_eecn = get_be24(c + 36);
	r->initiator_depth = c[39];
	r->remote_eecn = get_be24(c + 40);
	r->remote_cm_response_timeout = bits(c[43], REQ_REMOTE_CM_TIMEOUT);
	r->transport = bits(c[43], REQ_TRANSPORT);
	r->e2e_flow_control = c[43] & REQ_E2E;
	r->starting_psn = get_be24(c + 44);
	r->local_cm_response_timeout = bits(c[47], REQ_LOCAL_CM_TIMEOUT);
	r->retry_count = bits(c[47], REQ_RETRY_COUNT);
	r->pkey = get_be16(c + 48);
	r->path_mtu = bits(c[50], REQ_PATH_MTU);
	r->rdc_exists = c[50] & REQ_RDC_EXISTS;
	r->rnr_retry_count = bits(c[50], REQ_RNR_RETRY);
	r->max_cm_retries = bits(c[51], REQ_MAX_CM_RETRIES);
	r->srq = c[51] & REQ_SRQ;
	r->ext_transport = bits(c[51], REQ_EXT_TRANSPORT);
}

void ibcm_req_decode(const uint8_t mad[IBCM_MAD_LEN], struct ibcm_req *r)
{
	const uint8_t *c = msg_in(mad);

	req_ids_decode(c, r);
	req_qp_decode(c, r);
	path_decode(c + REQ_PRIMARY, &r->primary);
	path_decode(c + REQ_ALT, &r->alt);
	/* SAP shares the alternate path's last byte */
	r->sap_supported = c[REQ_ALT + 43] & REQ_SAP_SUPPORTED;
	memcpy(r->pdata, c + REQ_PDATA, sizeof(r->pdata));
}

static void req_qp_encode(const struct ibcm_req *r, uint8_t *c)
{
	put_be24(c + 32, r->local_qpn);
	c[35] = r->responder_resources;
	put_be24(c + 36, r->local_eecn);
	c[39] = r->initiator_depth;
	put_be24(c + 40, r->remote_eecn);
	c[43] = field(r->remote_cm_response_timeout, REQ_REMOTE_CM_TIMEOUT) |
		field(r->transport, REQ_TRANSPORT) |
		(r->e2e_flow_control ? REQ_E2E : 0);
	put_be24(c + 44, r->starting_psn);
	c[47] = field(r->local_cm_response_timeout, REQ_LOCAL_CM_TIMEOUT) |
		field(r->retry_count, REQ_RETRY_COUNT);
	put_be16(c + 48, r->pkey);
	c[50] = field(r->path_mtu, REQ_PATH_MTU) |
		(r->rdc_exists ? REQ_RDC_EXISTS : 0) |
		field(r->rnr_retry_count, REQ_RNR_RETRY);
	c[51] = field(r->max_cm_retries, REQ_MAX_CM_RETRIES) |
		(r->srq ? REQ_SRQ : 0) |
		field(r->ext_transport, REQ_EXT_TRANSPORT);
}

void ibcm_req_encode(const struct ibcm_req *r, uint8_t mad[IBCM_MAD_LEN])
{
	uint8_t *c = msg_out(mad);

	put_be32(c, r->local_comm_id);
	put_be24(c + 5, r->ece_vendor_id);
	put_be64(c + 8, r->service_id);
	put_be64(c + 16, r->local_ca_guid);
	put_be32(c + 28, r->local_qkey);
	req_qp_encode(r, c);
	path_encode(&r->primary, c + REQ_PRIMARY);
	path_encode(&r->alt, c + REQ_ALT);
	if (r->sap_supported)
		c[REQ_ALT + 43] |= REQ_SAP_SUPPORTED;
	memcpy(c + REQ_PDATA, r->pdata, sizeof(r->pdata));
}

bool ibcm_req_has_alt(const struct ibcm_req *r)
{
	return r->alt.local_lid != 0;
}

/* ---- MRA and REJ -------------------------------------------------------- */

/* Byte 8: which message is answered; byte 9 below */
#define MSG_KIND		0xC0
#define MRA_SERVICE_TIMEOUT	0xF8
#define MRA_PDATA		10
#define REJ_ARI_LEN		0xFE
#define REJ_ARI			12
#define REJ_PDATA		84

void ibcm_mra_decode(const uint8_t mad[IBCM_MAD_LEN], struct ibcm_mra *r)
{
	const uint8_t *c = msg_in(mad);

	r->local_comm_id = get_be32(c);
	r->remote_comm_id = get_be32(c + 4);
	r->msg_mraed = bits(c[8], MSG_KIND);
	r->service_timeout = bits(c[9], MRA_SERVICE_TIMEOUT);
	memcpy(r->pdata, c + MRA_PDATA, sizeof(r->pdata));
}

void ibcm_mra_encode(const struct ibcm_mra *r, uint8_t mad[IBCM_MAD_LEN])
{
	uint8_t *c = msg_out(mad);

	put_be32(c, r->local_comm_id);
	put_be32(c + 4, r->remote_comm_id);
	c[8] = field(r->msg_mraed, MSG_KIND);
	c[9] = field(r->service_timeout, MRA_SERVICE_TIMEOUT);
	memcpy(c + MRA_PDATA, r->pdata, sizeof(r->pdata));
}

void ibcm_rej_decode(const uint8_t mad[IBCM_MAD_LEN], struct ibcm_rej *r)
{
	const uint8_t *c = msg_in(mad);

	r->local_comm_id = get_be32(c);
	r->remote_comm_id = get_be32(c + 4);
	r->msg_rejected = bits(c[8], MSG_KIND);
	r->ari_len = bits(c[9], REJ_ARI_LEN);
	r->reason = get_be16(c + 10);
	memcpy(r->ari, c + REJ_ARI, sizeof(r->ari));
	memcpy(r->pdata, c + REJ_PDATA, sizeof(r->pdata));
}

void ibcm_rej_encode(const struct ibcm_rej *r, uint8_t mad[IBCM_MAD_LEN])
{
	uint8_t *c = msg_out(mad);

	put_be32(c, r->local_comm_id);
	put_be32(c + 4, r->remote_comm_id);
	c[8] = field(r->msg_rejected, MSG_KIND);
	c[9] = field(r->ari_len, REJ_ARI_LEN);
	put_be16(c + 10, r->reason);
	memcpy(c + REJ_ARI, r->ari, sizeof(r->ari));
	memcpy(c + REJ_PDATA, r->pdata, sizeof(r->pdata));
}

/* ---- REP ---------------------------------------------------------------- */

/* Byte 26: target ACK delay, failover, end-to-end flow control; 27 */
#define REP_TARGET_ACK_DELAY	0xF8
#define REP_FAILOVER		0x06
#define REP_E2E			0x01
#define REP_RNR_RETRY		0xE0
#define REP_SRQ			0x10
#define REP_PDATA		36

/*
 * ECE's vendor ID is spread over the byte after each 24-bit field at 12,
 * 16 and 20, high byte first: older peers left those bytes reserved.
 */
static void rep_ids_decode(const uint8_t *c, struct ibcm_rep *r)
{
	r->local_comm_id = get_be32(c);
	r->remote_comm_id = get_be32(c + 4);
	r->local_qkey = get_be32(c + 8);
	r->local_qpn = get_be24(c + 12);
	r->local_eecn = get_be24(c + 16);
	r->starting_psn = get_be24(c + 20);
	r->ece_vendor_id = (uint32_t)c[15] << 16 | (uint32_t)c[19] << 8 | c[23];
}

void ibcm_rep_decode(const uint8_t mad[IBCM_MAD_LEN], struct ibcm_rep *r)
{
	const uint8_t *c = msg_in(mad);

	rep_ids_decode(c, r);
	r->responder_resources = c[24];
	r->initiator_depth = c[25];
	r->target_ack_delay = bits(c[26], REP_TARGET_ACK_DELAY);
	r->failover = bits(c[26], REP_FAILOVER);
	r->e2e_flow_control = c[26] & REP_E2E;
	r->rnr_retry_count = bits(c[27], REP_RNR_RETRY);
	r->srq = c[27] & REP_SRQ;
	r->local_ca_guid = get_be64(c + 28);
	memcpy(r->pdata, c + REP_PDATA, sizeof(r->pdata));
}

static void rep_ids_encode(const struct ibcm_rep *r, uint8_t *c)
{
	put_be32(c, r->local_comm_id);
	put_be32(c + 4, r->remote_comm_id);
	put_be32(c + 8, r->local_qkey);
	put_be24(c + 12, r->local_qpn);
	c[15] = (uint8_t)(r->ece_vendor_id >> 16);
	put_be24(c + 16, r->local_eecn);
	c[19] = (uint8_t)(r->ece_vendor_id >> 8);
	put_be24(c + 20, r->starting_psn);
	c[23] = (uint8_t)r->ece_vendor_id;
}

void ibcm_rep_encode(const struct ibcm_rep *r, uint8_t mad[IBCM_MAD_LEN])
{
	uint8_t *c = msg_out(mad);

	rep_ids_encode(r, c);
	c[24] = r->responder_resources;
	c[25] = r->initiator_depth;
	c[26] = field(r->target_ack_delay, REP_TARGET_ACK_DELAY) |
		field(r->failover, REP_FAILOVER) |
		(r->e2e_flow_control ? REP_E2E : 0);
	c[27] = field(r->rnr_retry_count, REP_RNR_RETRY) |
		(r->srq ? REP_SRQ : 0);
	put_be64(c + 28, r->local_ca_guid);
	memcpy(c + REP_PDATA, r->pdata, sizeof(r->pdata));
}

/* ---- RTU, DREP, DREQ ------------------------------------------------------ */

#define RTU_PDATA		8
#define DREQ_PDATA		12

void ibcm_rtu_decode(const uint8_t mad[IBCM_MAD_LEN], struct ibcm_rtu *r)
{
	const uint8_t *c = msg_in(mad);

	r->local_comm_id = get_be32(c);
	r->remote_comm_id = get_be32(c + 4);
	memcpy(r->pdata, c + RTU_PDATA, sizeof(r->pdata));
}

void ibcm_rtu_encode(const struct ibcm_rtu *r, uint8_t mad[IBCM_MAD_LEN])
{
	uint8_t *c = msg_out(mad);

	put_be32(c, r->local_comm_id);
	put_be32(c + 4, r->remote_comm_id);
	memcpy(c + RTU_PDATA, r->pdata, sizeof(r->pdata));
}

void ibcm_dreq_decode(const uint8_t mad[IBCM_MAD_LEN], struct ibcm_dreq *r)
{
	const uint8_t *c = msg_in(mad);

	r->local_comm_id = get_be32(c);
	r->remote_comm_id = get_be32(c + 4);
	r->remote_qpn = get_be24(c + 8);
	memcpy(r->pdata, c + DREQ_PDATA, sizeof(r->pdata));
}

void ibcm_dreq_encode(const struct ibcm_dreq *r, uint8_t mad[IBCM_MAD_LEN])
{
	uint8_t *c = msg_out(mad);

	put_be32(c, r->local_comm_id);
	put_be32(c + 4, r->remote_comm_id);
	put_be24(c + 8, r->remote_qpn);
	memcpy(c + DREQ_PDATA, r->pdata, sizeof(r->pdata));
}

/* ---- SIDR --------------------------------------------------------------- */

#define SIDR_REQ_PDATA		16
#define SIDR_REP_INFO		24
#define SIDR_REP_PDATA		96

void ibcm_sidr_req_decode(const uint8_t mad[IBCM_MAD_LEN],
			  struct ibcm_sidr_req *r)
{
	const uint8_t *c = msg_in(mad);

	r->request_id = get_be32(c);
	r->pkey = get_be16(c + 4);
	r->service_id = get_be64(c + 8);
	memcpy(r->pdata, c + SIDR_REQ_PDATA, sizeof(r->pdata));
}

void ibcm_sidr_req_encode(const struct ibcm_sidr_req *r,
			  uint8_t mad[IBCM_MAD_LEN])
{
	uint8_t *c = msg_out(mad);

	put_be32(c, r->request_id);
	put_be16(c + 4, r->pkey);
	put_be64(c + 8, r->service_id);
	memcpy(c + SIDR_REQ_PDATA, r->pdata, sizeof(r->pdata));
}

void ibcm_sidr_rep_decode(const uint8_t mad[IBCM_MAD_LEN],
			  struct ibcm_sidr_rep *r)
{
	const uint8_t *c = msg_in(mad);

	r->request_id = get_be32(c);
	r->status = c[4];
	r->info_len = c[5];
	r->qpn = get_be24(c + 8);
	r->service_id = get_be64(c + 12);
	r->qkey = get_be32(c + 20);
	memcpy(r->info, c + SIDR_REP_INFO, sizeof(r->info));
	memcpy(r->pdata, c + SIDR_REP_PDATA, sizeof(r->pdata));
}

void ibcm_sidr_rep_encode(const struct ibcm_sidr_rep *r,
			  uint8_t mad[IBCM_MAD_LEN])
{
	uint8_t *c = msg_out(mad);

	put_be32(c, r->request_id);
	c[4] = r->status;
	c[5] = r->info_len;
	put_be24(c + 8, r->qpn);
	put_be64(c + 12, r->service_id);
	put_be32(c + 20, r->qkey);
	memcpy(c + SIDR_REP_INFO, r->info, sizeof(r->info));
	memcpy(c + SIDR_REP_PDATA, r->pdata, sizeof(r->pdata));
}

/* ---- a whole MAD ---------------------------------------------------------- */

/* The message of one attribute: m's union member, by attribute ID */
static int body_decode(const uint8_t *mad, struct ibcm_msg *m)
{
	switch (m->hdr.attr_id) {
	case IBCM_ATTR_REQ:	 ibcm_req_decode(mad, &m->req); break;
	case IBCM_ATTR_MRA:	 ibcm_mra_decode(mad, &m->mra); break;
	case IBCM_ATTR_REJ:	 ibcm_rej_decode(mad, &m->rej); break;
	case IBCM_ATTR_REP:	 ibcm_rep_decode(mad, &m->rep); break;
	case IBCM_ATTR_RTU:	 ibcm_rtu_decode(mad, &m->rtu); break;
	case IBCM_ATTR_DREQ:	 ibcm_dreq_decode(mad, &m->dreq); break;
	case IBCM_ATTR_DREP:	 ibcm_rtu_decode(mad, &m->drep); break;
	case IBCM_ATTR_SIDR_REQ: ibcm_sidr_req_decode(mad, &m->sidr_req); break;
	case IBCM_ATTR_SIDR_REP: ibcm_sidr_rep_decode(mad, &m->sidr_rep); break;
	default:		 return -EOPNOTSUPP;
	}
	return 0;
}

static int body_encode(const struct ibcm_msg *m, uint8_t *mad)
{
	switch (m->hdr.attr_id) {
	case IBCM_ATTR_REQ:	 ibcm_req_encode(&m->req, mad); break;
	case IBCM_ATTR_MRA:	 ibcm_mra_encode(&m->mra, mad); break;
	case IBCM_ATTR_REJ:	 ibcm_rej_encode(&m->rej, mad); break;
	case IBCM_ATTR_REP:	 ibcm_rep_encode(&m->rep, mad); break;
	case IBCM_ATTR_RTU:	 ibcm_rtu_encode(&m->rtu, mad); break;
	case IBCM_ATTR_DREQ:	 ibcm_dreq_encode(&m->dreq, mad); break;
	case IBCM_ATTR_DREP:	 ibcm_rtu_encode(&m->drep, mad); break;
	case IBCM_ATTR_SIDR_REQ: ibcm_sidr_req_encode(&m->sidr_req, mad); break;
	case IBCM_ATTR_SIDR_REP: ibcm_sidr_rep_encode(&m->sidr_rep, mad); break;
	default:		 return -EOPNOTSUPP;
	}
	return 0;
}

int ibcm_decode(const uint8_t *buf, size_t len, struct ibcm_msg *m)
{
	/* Other base versions (OPA's 0x82) have other sizes and layouts */
	if (len != IBCM_MAD_LEN || buf[0] != IBCM_BASE_VERSION ||
	    buf[1] != IBCM_MGMT_CLASS)
		return -EBADMSG;
	ibcm_hdr_decode(buf, &m->hdr);
	return body_decode(buf, m);
}

int ibcm_encode(const struct ibcm_msg *m, uint8_t mad[IBCM_MAD_LEN])
{
	int err = body_encode(m, mad);

	if (err)
		return err;
	ibcm_hdr_encode(&m->hdr, mad);
	return 0;
}

/* ---- timers --------------------------------------------------------------- */

#define IBCM_TIMEOUT_MAX	31	/* the fields have 5 bits */

uint32_t ibcm_timeout_ms(uint8_t t)
{
	if (t > IBCM_TIMEOUT_MAX)
		t = IBCM_TIMEOUT_MAX;
	/* 4.096 us * 2^t is about 2^(t-8) ms */
	return t > 8 ? UINT32_C(1) << (t - 8) : 1;
}

uint8_t ibcm_peer_timeout(uint8_t t)
{
	return t < IBCM_PEER_TIMEOUT_MAX ? t : IBCM_PEER_TIMEOUT_MAX;
}

uint8_t ibcm_peer_req_timeout(uint8_t t)
{
	return t < IBCM_PEER_REQ_TIMEOUT_MAX ? t : IBCM_PEER_REQ_TIMEOUT_MAX;
}

uint32_t ibcm_req_wait_ms(uint8_t packet_life_time,
			  uint8_t remote_cm_response_timeout)
{
	return 2 * ibcm_timeout_ms(packet_life_time) +
	       ibcm_timeout_ms(remote_cm_response_timeout);
}
