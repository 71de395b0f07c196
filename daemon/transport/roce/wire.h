/*
 * The RoCEv2 wire: packets as Linux rxe sends and accepts them, decoded
 * and encoded without I/O, for the RoCEv2 transport.
 *
 *   IPv4 (20) or IPv6 (40) | UDP (8, port 4791) | BTH (12) | extension
 *   headers | payload | pad (0-3) | ICRC (4)
 *
 * Structs are in host byte order; the functions convert.  Nothing here
 * allocates, logs or keeps state, so any thread may call anything.  The
 * codec checks syntax only (lengths, versions, opcodes we speak); what a
 * packet means for a QP (PSN, MTU, payload allowed for the opcode) is the
 * transport's to judge.
 *
 * Files: wire.c (BTH and extension headers), ip.c (IP and UDP headers,
 * GIDs), icrc.c (the invariant CRC), crc32.c (the CRC-32 under it).
 */
#ifndef IBVD_ROCE_WIRE_H
#define IBVD_ROCE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ROCE_UDP_PORT		4791
#define ROCE_BTH_LEN		12
#define ROCE_ICRC_LEN		4
/* BTH and the longest extension headers of an opcode we speak (XRCETH
 * and AtomicETH) */
#define ROCE_MAX_HDRS		(ROCE_BTH_LEN + 4 + 28)
/* IPv6 + UDP: the most roce_build_ip writes */
#define ROCE_MAX_IP_HDRS	48

/* Q_Key of QP1 (the CM's MADs), and the P_Key rxe sends */
#define ROCE_GSI_QKEY		0x80010000u
#define ROCE_DEFAULT_PKEY	0xFFFF
#define ROCE_PKEY_MASK		0x7FFF	/* without the membership bit */
#define ROCE_GSI_QPN		1u

/*
 * Opcodes: transport (RC 0x00, UC 0x20, UD 0x60, XRC 0xA0) + operation.
 * Names are the IBTA's with WITH_IMMEDIATE and WITH_INVALIDATE cut to IMM
 * and INV.  XRC speaks every operation of RC, 0xA0 up; its requests carry
 * an XRCETH, its answers do not.
 */
enum roce_opcode {
	ROCE_RC_SEND_FIRST = 0x00,
	ROCE_RC_SEND_MIDDLE = 0x01,
	ROCE_RC_SEND_LAST = 0x02,
	ROCE_RC_SEND_LAST_IMM = 0x03,
	ROCE_RC_SEND_ONLY = 0x04,
	ROCE_RC_SEND_ONLY_IMM = 0x05,
	ROCE_RC_RDMA_WRITE_FIRST = 0x06,
	ROCE_RC_RDMA_WRITE_MIDDLE = 0x07,
	ROCE_RC_RDMA_WRITE_LAST = 0x08,
	ROCE_RC_RDMA_WRITE_LAST_IMM = 0x09,
	ROCE_RC_RDMA_WRITE_ONLY = 0x0A,
	ROCE_RC_RDMA_WRITE_ONLY_IMM = 0x0B,
	ROCE_RC_RDMA_READ_REQUEST = 0x0C,
	ROCE_RC_READ_RESPONSE_FIRST = 0x0D,
	ROCE_RC_READ_RESPONSE_MIDDLE = 0x0E,
	ROCE_RC_READ_RESPONSE_LAST = 0x0F,
	ROCE_RC_READ_RESPONSE_ONLY = 0x10,
	ROCE_RC_ACKNOWLEDGE = 0x11,
	ROCE_RC_ATOMIC_ACKNOWLEDGE = 0x12,
	ROCE_RC_COMPARE_SWAP = 0x13,
	ROCE_RC_FETCH_ADD = 0x14,
	ROCE_RC_SEND_LAST_INV = 0x16,
	ROCE_RC_SEND_ONLY_INV = 0x17,

	/* UC: the SEND and RDMA WRITE opcodes of RC, 0x20 up */
	ROCE_UC_SEND_FIRST = 0x20,
	ROCE_UC_SEND_MIDDLE = 0x21,
	ROCE_UC_SEND_LAST = 0x22,
	ROCE_UC_SEND_LAST_IMM = 0x23,
	ROCE_UC_SEND_ONLY = 0x24,
	ROCE_UC_SEND_ONLY_IMM = 0x25,
	ROCE_UC_RDMA_WRITE_FIRST = 0x26,
	ROCE_UC_RDMA_WRITE_MIDDLE = 0x27,
	ROCE_UC_RDMA_WRITE_LAST = 0x28,
	ROCE_UC_RDMA_WRITE_LAST_IMM = 0x29,
	ROCE_UC_RDMA_WRITE_ONLY = 0x2A,
	ROCE_UC_RDMA_WRITE_ONLY_IMM = 0x2B,

	ROCE_UD_SEND_ONLY = 0x64,
	ROCE_UD_SEND_ONLY_IMM = 0x65,
};

/* The transport bits of an opcode, and their values */
#define ROCE_OP_TRANSPORT(op)	((op) & 0xE0)
#define ROCE_OP_RC		0x00
#define ROCE_OP_UC		0x20
#define ROCE_OP_UD		0x60
#define ROCE_OP_XRC		0xA0
/* The operation bits: the RC opcode of the same operation */
#define ROCE_OP_OPERATION(op)	((op) & 0x1F)

/*
 * Extension headers.  On the wire they follow the BTH in the order
 * XRCETH, DETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH (an
 * opcode has three at most: XRCETH + RETH + ImmDt).
 */
enum roce_hdr {
	ROCE_HDR_RETH = 1,		/* 16: VA, R_Key, DMA length */
	ROCE_HDR_AETH = 2,		/* 4: syndrome, MSN */
	ROCE_HDR_ATOMIC = 4,		/* 28: VA, R_Key, swap/add, compare */
	ROCE_HDR_ATOMIC_ACK = 8,	/* 8: the original remote value */
	ROCE_HDR_IMM = 16,		/* 4: immediate data */
	ROCE_HDR_IETH = 32,		/* 4: R_Key to invalidate */
	ROCE_HDR_DETH = 64,		/* 8: Q_Key, source QP */
	ROCE_HDR_XRCETH = 128,		/* 4: the XRC SRQ number */
};

/* AETH syndromes: bits 7..5 the kind, 4..0 credits or the RNR timer */
#define ROCE_AETH_KIND(s)	((s) & 0xE0)
#define ROCE_AETH_ACK		0x1F	/* ACK, credits unlimited (rxe's only) */
#define ROCE_AETH_RNR_NAK	0x20	/* | the RNR timer code */
#define ROCE_AETH_NAK_PSN	0x60	/* PSN sequence error */
#define ROCE_AETH_NAK_INV	0x61	/* invalid request */
#define ROCE_AETH_NAK_ACCESS	0x62	/* remote access error */
#define ROCE_AETH_NAK_OP	0x63	/* remote operational error */

/*
 * The headers an opcode carries (a mask of enum roce_hdr), or -1 for an
 * opcode we don't speak (RD, CNP, vendor, FLUSH, ATOMIC_WRITE).
 */
int roce_opcode_hdrs(uint8_t opcode);

/* The bytes of the BTH and the headers an opcode carries, or -1 (above). */
int roce_opcode_hdrs_len(uint8_t opcode);

/* BTH flags and fields plus the extension headers of one packet */
struct roce_pkt {
	uint8_t opcode;
	bool se, mig_req, ack_req;
	uint8_t pad;			/* PadCnt */
	uint16_t pkey;
	uint32_t dest_qp;		/* 24 bits */
	uint32_t psn;			/* 24 bits */
	unsigned int hdrs;		/* enum roce_hdr mask, from the opcode */
	struct {
		uint64_t va;
		uint32_t rkey;
		uint32_t len;
	} reth;
	struct {
		uint8_t syndrome;
		uint32_t msn;		/* 24 bits */
	} aeth;
	struct {
		uint64_t va;
		uint32_t rkey;
		uint64_t swap_add;
		uint64_t compare;
	} atomic;
	uint64_t atomic_ack;		/* original remote value */
	uint32_t imm;			/* the big-endian word, in host order */
	uint32_t ieth;			/* R_Key to invalidate */
	uint32_t xrc_srqn;		/* XRCETH: 24 bits */
	struct {
		uint32_t qkey;
		uint32_t src_qp;	/* 24 bits */
	} deth;
	const uint8_t *payload;		/* points into the buffer decoded */
	uint32_t payload_len;		/* without pad and ICRC */
};

/*
 * p zeroed for opcode (which we must speak): its hdrs, P_Key 0xFFFF;
 * the caller fills the rest.
 */
void roce_pkt_init(struct roce_pkt *p, uint8_t opcode);

/*
 * Decode a UDP payload (BTH ... payload, pad, ICRC) of len bytes: 0, or
 * -EBADMSG for anything malformed (too short for its headers, TVer != 0,
 * an opcode we don't speak, pad larger than the payload); never reads past
 * len.  Does not check the ICRC (that needs the IP header).  FECN, BECN
 * and the reserved bits are ignored.
 */
int roce_decode(const uint8_t *buf, size_t len, struct roce_pkt *out);

/*
 * Encode the BTH and the extension headers p->hdrs names (which must be
 * roce_opcode_hdrs(p->opcode)) into buf, room for ROCE_MAX_HDRS bytes;
 * returns the bytes written.  The caller appends the payload, the pad
 * ((-len) & 3 zero bytes, matching p->pad) and room for the ICRC.
 */
size_t roce_encode(const struct roce_pkt *p, uint8_t *buf);

/* The IP and UDP headers of a packet, host order */
struct roce_ip {
	int family;			/* AF_INET or AF_INET6 */
	uint8_t src[16], dst[16];	/* IPv4 in the first 4 bytes */
	uint8_t tclass;			/* IPv4 TOS, IPv6 traffic class */
	uint8_t hop_limit;		/* IPv4 TTL */
	uint32_t flow_label;		/* IPv6 only, 20 bits */
	uint16_t ip_id;			/* IPv4 only */
	uint16_t sport, dport;
};

/*
 * Parse an IP packet of len bytes (IPv4 without options and unfragmented,
 * with a valid header checksum, or IPv6 without extension headers,
 * carrying UDP): fills ip, sets *udp_payload (the BTH's offset) and
 * *udp_payload_len; 0 or -EBADMSG.  The IP and UDP length fields must
 * agree with each other and fit in len; bytes past the IP length (an
 * Ethernet frame's padding) are ignored.  The UDP checksum is not checked
 * (rxe sends 0; the ICRC covers the datagram).  The IP packet, for
 * roce_icrc_ok, is the first *udp_payload + *udp_payload_len bytes.
 */
int roce_parse_ip(const uint8_t *pkt, size_t len, struct roce_ip *ip,
		  size_t *udp_payload, size_t *udp_payload_len);

/*
 * Could a peer's packet carry these addresses?  Not a source that is
 * unspecified, loopback, multicast or broadcast (a reply would go there),
 * nor, over IPv6, an IPv4-mapped or -compatible address at either end: its
 * GID is an IPv4 peer's, which a "peers" list of IPv4 subnets would let in.
 */
bool roce_ip_addrs_plausible(const struct roce_ip *ip);

/*
 * Write the IPv4 (20 bytes: DF set, protocol 17, header checksum
 * computed) or, for any other family, IPv6 (40) header and the UDP
 * header (8, checksum 0) for udp_payload_len bytes of UDP payload (at
 * most 65507); returns the header bytes written.
 */
size_t roce_build_ip(const struct roce_ip *ip, size_t udp_payload_len,
		     uint8_t *buf);

/*
 * An IPv4 packet's identification, or its total and UDP lengths for
 * udp_payload_len bytes of UDP payload, changed in place (pkt: its IPv4
 * header, then the UDP header); the header checksum follows.
 */
void roce_ipv4_set_id(uint8_t *pkt, uint16_t id);
void roce_ipv4_set_lengths(uint8_t *pkt, size_t udp_payload_len);

/* The bytes roce_build_ip writes for family: 28 for AF_INET, else 48. */
size_t roce_ip_hdrs_len(int family);

/*
 * The 40-byte IPv6 header alone of a datagram of datagram bytes (next
 * header UDP) from ip: what a raw IPv6 socket, which hands over only the
 * datagram, leaves a receiver to put back in front of it.
 */
void roce_build_ipv6_hdr(const struct roce_ip *ip, size_t datagram,
			 uint8_t *h);

/*
 * The ICRC of a whole IP packet (IP header first) of len bytes whose last
 * 4 are the ICRC or room for it: the CRC-32 of eight 0xFF bytes, the IP,
 * UDP and BTH headers with their variant fields set to ones, and the rest
 * up to the ICRC.  A packet too short to hold the headers gives 0.
 * roce_icrc_set stores it (least significant byte first); roce_icrc_ok
 * checks it (false for a packet too short).
 */
uint32_t roce_icrc(const uint8_t *ip_pkt, size_t len);
void roce_icrc_set(uint8_t *ip_pkt, size_t len);
bool roce_icrc_ok(const uint8_t *ip_pkt, size_t len);

/*
 * rxe's UDP source port of a QP when it is made, kept by UD QPs and QP1:
 * 0xC000 + (hash_32(qpn, 14) & 0x3FFF).
 */
uint16_t roce_udp_sport(uint32_t qpn);

/*
 * rxe's UDP source port of an RC or UC QP once it is given its path
 * (modify to RTR with a GRH): from the path's flow label, or, when that
 * is 0, from a flow label made of both QP numbers.  rdma_cm gives RoCEv2
 * paths the label (source port * 31 + destination port) & 0xFFFFF, which
 * its REQ carries; QPs set up without it have label 0.
 */
uint16_t roce_udp_sport_connected(uint32_t flow_label, uint32_t qpn,
				  uint32_t dest_qpn);

/* GIDs of RoCEv2: ::ffff:a.b.c.d is IPv4 a.b.c.d, anything else IPv6 */
int roce_gid_family(const uint8_t gid[16]);
/* The address of gid, as struct roce_ip holds it (IPv4 in bytes 0-3) */
void roce_gid_to_ip(const uint8_t gid[16], uint8_t addr[16]);
/* The GID of an address of family (AF_INET: 4 bytes, else 16) */
void roce_ip_to_gid(int family, const uint8_t *addr, uint8_t gid[16]);
/*
 * Is the address of family (as struct roce_ip holds it) an IP multicast
 * one: IPv4 224/4, IPv6 ff00::/8?  A GID names a multicast group when its
 * address is one (rdma_is_multicast_addr's rule).
 */
bool roce_ip_is_multicast(int family, const uint8_t *addr);
bool roce_gid_is_multicast(const uint8_t gid[16]);

#endif /* IBVD_ROCE_WIRE_H */
