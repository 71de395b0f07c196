/*
 * The IB CM's MADs: the messages two connection managers exchange on QP1
 * (UD SEND_ONLY, Q_Key 0x80010000, one 256-byte MAD), decoded and encoded
 * without I/O, for the CM across hosts.  Offsets and bit fields are the
 * IBTA's (chapter 12), as Linux ib_cm sends them.
 *
 *   MAD header (24) | CM message (232): fields, then private data
 *
 * Structs are in host byte order; the functions convert.  Every field of
 * a message has a member, so decoding then encoding gives back the 256
 * bytes but for the reserved bits, which encode as zero.  Nothing here
 * allocates, logs or keeps state.  The codec checks syntax only: whether
 * a message makes sense for a connection (its comm IDs, its class
 * version, values in range) is the state machine's to judge.
 *
 * cma_hdr.h is what rdma_cm puts in these messages (its private-data
 * header, service IDs, flow labels).
 */
#ifndef IBVD_CM_MAD_H
#define IBVD_CM_MAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IBCM_MAD_LEN		256
#define IBCM_HDR_LEN		24

/* MAD header values of the CM class */
#define IBCM_BASE_VERSION	0x01
#define IBCM_MGMT_CLASS		0x07
#define IBCM_CLASS_VERSION	0x02
#define IBCM_METHOD_SEND	0x03

/* Attribute IDs */
enum ibcm_attr {
	IBCM_ATTR_CLASS_PORT_INFO = 0x0001,
	IBCM_ATTR_REQ = 0x0010,
	IBCM_ATTR_MRA = 0x0011,
	IBCM_ATTR_REJ = 0x0012,
	IBCM_ATTR_REP = 0x0013,
	IBCM_ATTR_RTU = 0x0014,
	IBCM_ATTR_DREQ = 0x0015,
	IBCM_ATTR_DREP = 0x0016,
	IBCM_ATTR_SIDR_REQ = 0x0017,
	IBCM_ATTR_SIDR_REP = 0x0018,
	IBCM_ATTR_LAP = 0x0019,
	IBCM_ATTR_APR = 0x001A,
};

/* Private data each message carries: what is left of its 232 bytes */
#define IBCM_REQ_PDATA		92
#define IBCM_MRA_PDATA		222
#define IBCM_REJ_PDATA		148
#define IBCM_REP_PDATA		196
#define IBCM_RTU_PDATA		224
#define IBCM_DREQ_PDATA		220
#define IBCM_DREP_PDATA		224
#define IBCM_SIDR_REQ_PDATA	216
#define IBCM_SIDR_REP_PDATA	136
/* REJ's Additional Rejection Information, SIDR REP's Additional Info */
#define IBCM_ARI_LEN		72

/* REQ transport service types */
enum ibcm_transport {
	IBCM_TRANSPORT_RC = 0,
	IBCM_TRANSPORT_UC = 1,
	IBCM_TRANSPORT_RD = 2,
	IBCM_TRANSPORT_XRC = 3,		/* with ext_transport 1 */
};
/* REQ extended transport types (with IBCM_TRANSPORT_XRC) */
#define IBCM_EXT_TRANSPORT_XRC	1

/* What an MRA or a REJ answers (MRA: REQ, REP, LAP; REJ: REQ, REP, other) */
enum ibcm_msg_kind {
	IBCM_MSG_REQ = 0,
	IBCM_MSG_REP = 1,
	IBCM_MSG_LAP = 2,
	IBCM_MSG_OTHER = 2,
};

/* REJ reasons */
enum ibcm_rej_reason {
	IBCM_REJ_NO_QP = 1,
	IBCM_REJ_NO_EEC = 2,
	IBCM_REJ_NO_RESOURCES = 3,
	IBCM_REJ_TIMEOUT = 4,
	IBCM_REJ_UNSUPPORTED = 5,
	IBCM_REJ_INVALID_COMM_ID = 6,
	IBCM_REJ_INVALID_COMM_INSTANCE = 7,
	IBCM_REJ_INVALID_SERVICE_ID = 8,
	IBCM_REJ_INVALID_TRANSPORT_TYPE = 9,
	IBCM_REJ_STALE_CONN = 10,
	IBCM_REJ_RDC_NOT_EXIST = 11,
	IBCM_REJ_INVALID_GID = 12,
	IBCM_REJ_INVALID_LID = 13,
	IBCM_REJ_INVALID_SL = 14,
	IBCM_REJ_INVALID_TRAFFIC_CLASS = 15,
	IBCM_REJ_INVALID_HOP_LIMIT = 16,
	IBCM_REJ_INVALID_PACKET_RATE = 17,
	IBCM_REJ_INVALID_ALT_GID = 18,
	IBCM_REJ_INVALID_ALT_LID = 19,
	IBCM_REJ_INVALID_ALT_SL = 20,
	IBCM_REJ_INVALID_ALT_TRAFFIC_CLASS = 21,
	IBCM_REJ_INVALID_ALT_HOP_LIMIT = 22,
	IBCM_REJ_INVALID_ALT_PACKET_RATE = 23,
	IBCM_REJ_PORT_CM_REDIRECT = 24,
	IBCM_REJ_PORT_REDIRECT = 25,
	IBCM_REJ_INVALID_MTU = 26,
	IBCM_REJ_INSUFFICIENT_RESP_RESOURCES = 27,
	IBCM_REJ_CONSUMER_DEFINED = 28,
	IBCM_REJ_INVALID_RNR_RETRY = 29,
	IBCM_REJ_DUPLICATE_LOCAL_COMM_ID = 30,
	IBCM_REJ_INVALID_CLASS_VERSION = 31,
	IBCM_REJ_INVALID_FLOW_LABEL = 32,
	IBCM_REJ_INVALID_ALT_FLOW_LABEL = 33,
	IBCM_REJ_VENDOR_OPTION_UNSUPPORTED = 35,
};

/* SIDR REP statuses */
enum ibcm_sidr_status {
	IBCM_SIDR_SUCCESS = 0,
	IBCM_SIDR_UNSUPPORTED = 1,
	IBCM_SIDR_REJECT = 2,
	IBCM_SIDR_NO_QP = 3,
	IBCM_SIDR_REDIRECT = 4,
	IBCM_SIDR_UNSUPPORTED_VERSION = 5,
};

/* The common MAD header (the u16 at 18 is reserved) */
struct ibcm_mad_hdr {
	uint8_t base_version;
	uint8_t mgmt_class;
	uint8_t class_version;
	uint8_t method;
	uint16_t status;
	uint16_t class_specific;
	/* ib_cm: the agent's 32 bits, then the sender's comm ID's */
	uint64_t tid;
	uint16_t attr_id;
	/* newer kernels carry ECE options here in REQ and REP */
	uint32_t attr_mod;
};

/* A path as REQ carries it, primary or alternate (44 bytes) */
struct ibcm_path {
	uint16_t local_lid, remote_lid;	/* RoCE: 0xFFFF, or 0 */
	uint8_t local_gid[16], remote_gid[16];
	uint32_t flow_label;		/* 20 bits */
	uint8_t packet_rate;		/* 6 bits */
	uint8_t traffic_class;
	uint8_t hop_limit;
	uint8_t sl;			/* 4 bits */
	bool subnet_local;
	uint8_t local_ack_timeout;	/* 5 bits */
};

struct ibcm_req {
	uint32_t local_comm_id;
	uint32_t ece_vendor_id;		/* 24 bits; 0 without ECE */
	uint64_t service_id;
	uint64_t local_ca_guid;
	uint32_t local_qkey;
	uint32_t local_qpn;		/* 24 bits */
	uint8_t responder_resources;
	uint32_t local_eecn;		/* 24 bits */
	uint8_t initiator_depth;
	uint32_t remote_eecn;		/* 24 bits */
	uint8_t remote_cm_response_timeout;	/* 5 bits */
	uint8_t transport;		/* enum ibcm_transport, 2 bits */
	bool e2e_flow_control;
	uint32_t starting_psn;		/* 24 bits */
	uint8_t local_cm_response_timeout;	/* 5 bits */
	uint8_t retry_count;		/* 3 bits */
	uint16_t pkey;
	uint8_t path_mtu;		/* 4 bits: 1 = 256 .. 5 = 4096 */
	bool rdc_exists;
	uint8_t rnr_retry_count;	/* 3 bits */
	uint8_t max_cm_retries;		/* 4 bits */
	bool srq;
	uint8_t ext_transport;		/* 3 bits */
	struct ibcm_path primary;
	/* All zero when there is none: a receiver sees one by a non-zero
	 * local LID (ibcm_req_has_alt). */
	struct ibcm_path alt;
	bool sap_supported;
	uint8_t pdata[IBCM_REQ_PDATA];
};

struct ibcm_mra {
	uint32_t local_comm_id, remote_comm_id;
	uint8_t msg_mraed;		/* enum ibcm_msg_kind, 2 bits */
	uint8_t service_timeout;	/* 5 bits */
	uint8_t pdata[IBCM_MRA_PDATA];
};

struct ibcm_rej {
	uint32_t local_comm_id;		/* 0: a REQ rejected before an ID */
	uint32_t remote_comm_id;
	uint8_t msg_rejected;		/* enum ibcm_msg_kind, 2 bits */
	uint8_t ari_len;		/* 7 bits */
	uint16_t reason;		/* enum ibcm_rej_reason */
	uint8_t ari[IBCM_ARI_LEN];
	uint8_t pdata[IBCM_REJ_PDATA];
};

struct ibcm_rep {
	uint32_t local_comm_id, remote_comm_id;
	uint32_t local_qkey;
	uint32_t local_qpn;		/* 24 bits */
	uint32_t local_eecn;		/* 24 bits */
	uint32_t starting_psn;		/* 24 bits */
	/* 24 bits: one byte after each of the three fields above */
	uint32_t ece_vendor_id;
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t target_ack_delay;	/* 5 bits */
	uint8_t failover;		/* 2 bits */
	bool e2e_flow_control;
	uint8_t rnr_retry_count;	/* 3 bits */
	bool srq;
	uint64_t local_ca_guid;
	uint8_t pdata[IBCM_REP_PDATA];
};

/* RTU and DREP */
struct ibcm_rtu {
	uint32_t local_comm_id, remote_comm_id;
	uint8_t pdata[IBCM_RTU_PDATA];
};

struct ibcm_dreq {
	uint32_t local_comm_id, remote_comm_id;
	uint32_t remote_qpn;		/* 24 bits: QPN or EECN */
	uint8_t pdata[IBCM_DREQ_PDATA];
};

struct ibcm_sidr_req {
	uint32_t request_id;
	uint16_t pkey;
	uint64_t service_id;
	uint8_t pdata[IBCM_SIDR_REQ_PDATA];
};

struct ibcm_sidr_rep {
	uint32_t request_id;
	uint8_t status;			/* enum ibcm_sidr_status */
	uint8_t info_len;
	uint32_t qpn;			/* 24 bits */
	uint64_t service_id;
	uint32_t qkey;
	uint8_t info[IBCM_ARI_LEN];
	uint8_t pdata[IBCM_SIDR_REP_PDATA];
};

/* One MAD: its header, and the message hdr.attr_id names */
struct ibcm_msg {
	struct ibcm_mad_hdr hdr;
	union {
		struct ibcm_req req;
		struct ibcm_mra mra;
		struct ibcm_rej rej;
		struct ibcm_rep rep;
		struct ibcm_rtu rtu;
		struct ibcm_rtu drep;
		struct ibcm_dreq dreq;
		struct ibcm_sidr_req sidr_req;
		struct ibcm_sidr_rep sidr_rep;
	};
};

/*
 * Decode a MAD of len bytes: 0; -EBADMSG when it is not a CM MAD (len not
 * 256, base version not 1, class not CM); -EOPNOTSUPP for a CM attribute
 * without a struct here (ClassPortInfo, LAP, APR, unknown), with m->hdr
 * filled so that the caller may still answer it.  Reads len bytes at most.
 */
int ibcm_decode(const uint8_t *buf, size_t len, struct ibcm_msg *m);

/*
 * Encode m: the header, and the message of m->hdr.attr_id, which must be
 * one ibcm_decode knows (returns -EOPNOTSUPP otherwise, writing nothing).
 */
int ibcm_encode(const struct ibcm_msg *m, uint8_t mad[IBCM_MAD_LEN]);

/*
 * A header for a message of ours: CM class, version 2, method Send,
 * status 0, the attribute and the TID given.
 */
void ibcm_hdr_init(struct ibcm_mad_hdr *h, uint16_t attr_id, uint64_t tid);

/* The pieces: the 24-byte header, and each message after it */
void ibcm_hdr_decode(const uint8_t mad[IBCM_MAD_LEN], struct ibcm_mad_hdr *h);
void ibcm_hdr_encode(const struct ibcm_mad_hdr *h, uint8_t mad[IBCM_MAD_LEN]);

void ibcm_req_decode(const uint8_t mad[IBCM_MAD_LEN], struct ibcm_req *r);
void ibcm_req_encode(const struct ibcm_req *r, uint8_t mad[IBCM_MAD_LEN]);
void ibcm_mra_decode(const uint8_t mad[IBCM_MAD_LEN], struct ibcm_mra *r);
void ibcm_mra_encode(const struct ibcm_mra *r, uint8_t mad[IBCM_MAD_LEN]);
void ibcm_rej_decode(const uint8_t mad[IBCM_MAD_LEN], struct ibcm_rej *r);
void ibcm_rej_encode(const struct ibcm_rej *r, uint8_t mad[IBCM_MAD_LEN]);
void ibcm_rep_decode(const uint8_t mad[IBCM_MAD_LEN], struct ibcm_rep *r);
void ibcm_rep_encode(const struct ibcm_rep *r, uint8_t mad[IBCM_MAD_LEN]);
/* RTU and DREP share a layout */
void ibcm_rtu_decode(const uint8_t mad[IBCM_MAD_LEN], struct ibcm_rtu *r);
void ibcm_rtu_encode(const struct ibcm_rtu *r, uint8_t mad[IBCM_MAD_LEN]);
void ibcm_dreq_decode(const uint8_t mad[IBCM_MAD_LEN], struct ibcm_dreq *r);
void ibcm_dreq_encode(const struct ibcm_dreq *r, uint8_t mad[IBCM_MAD_LEN]);
void ibcm_sidr_req_decode(const uint8_t mad[IBCM_MAD_LEN],
			  struct ibcm_sidr_req *r);
void ibcm_sidr_req_encode(const struct ibcm_sidr_req *r,
			  uint8_t mad[IBCM_MAD_LEN]);
void ibcm_sidr_rep_decode(const uint8_t mad[IBCM_MAD_LEN],
			  struct ibcm_sidr_rep *r);
void ibcm_sidr_rep_encode(const struct ibcm_sidr_rep *r,
			  uint8_t mad[IBCM_MAD_LEN]);

/* Whether a REQ offers an alternate path */
bool ibcm_req_has_alt(const struct ibcm_req *r);

/*
 * CM timers.  A timeout field t (5 bits) means 4.096 us * 2^t; ib_cm
 * rounds it to 2^(t-8) ms, at least 1 ms.
 */
uint32_t ibcm_timeout_ms(uint8_t t);

/*
 * How long the active side waits for an answer to its REQ before sending
 * it again: the path's round trip and the peer's announced response time,
 * 2 * ibcm_timeout_ms(packet_life_time) + ibcm_timeout_ms(remote CM
 * response timeout).  The passive side waits for RTU after REP
 * ibcm_timeout_ms(the REQ's local CM response timeout).
 */
uint32_t ibcm_req_wait_ms(uint8_t packet_life_time,
			  uint8_t remote_cm_response_timeout);

/*
 * A timeout field a peer set for us to wait by (a REQ's local CM response
 * timeout, an MRA's service timeout), at most IBCM_PEER_TIMEOUT_MAX
 * (about 67 s, our own MRAs' value): the field allows 2.4 hours a wait,
 * and with 15 resends a stranger could hold an id and its QP for days.
 */
#define IBCM_PEER_TIMEOUT_MAX	24
uint8_t ibcm_peer_timeout(uint8_t t);

/*
 * A REQ's local CM response timeout, how long to wait for the RTU after
 * each of our REPs: at most IBCM_PEER_REQ_TIMEOUT_MAX (about 4 s, the
 * kernel rdma_cm's own value).  Unlike an MRA's, nothing of the peer's
 * app stands behind it, and each REQ a stranger sends would otherwise hold
 * an accepted id and its QP for 16 tries of 67 s.
 */
#define IBCM_PEER_REQ_TIMEOUT_MAX	20
uint8_t ibcm_peer_req_timeout(uint8_t t);

#endif /* IBVD_CM_MAD_H */
