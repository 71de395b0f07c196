/*
 * The BTH and the extension headers (wire.h): which headers an opcode
 * carries, and their decoding and encoding.  Offsets and opcodes are the
 * IBTA's, as Linux rxe uses them.
 */
#include <config.h>

#include <errno.h>
#include <string.h>

#include "be.h"
#include "wire.h"

/* BTH byte 1: solicited event, migration request, pad count, version */
#define BTH_SE			0x80
#define BTH_MIG_REQ		0x40
#define BTH_PAD_SHIFT		4
#define BTH_TVER		0x0F
/* BTH byte 8 */
#define BTH_ACK_REQ		0x80

#define RETH_LEN		16
#define AETH_LEN		4
#define ATOMIC_LEN		28
#define ATOMIC_ACK_LEN		8
#define IMM_LEN			4
#define IETH_LEN		4
#define DETH_LEN		8
#define XRCETH_LEN		4

/* A UDP datagram carries less than 64 KiB; payload_len fits with room. */
#define MAX_UDP_PAYLOAD		65535u

/*
 * Each opcode's headers, or'ed with SPOKEN so that SEND_MIDDLE, which
 * has none, differs from an opcode we don't speak (0).
 */
#define SPOKEN			0x100
#define RETH			ROCE_HDR_RETH
#define AETH			ROCE_HDR_AETH
#define IMM			ROCE_HDR_IMM
#define XRC_OP(op)		(ROCE_OP_XRC | ROCE_RC_##op)
/* a request UC and XRC share with RC; XRC's carry an XRCETH */
#define RC_UC(op, hdrs)		[ROCE_RC_##op] = SPOKEN | (hdrs), \
				[ROCE_UC_##op] = SPOKEN | (hdrs), \
				[XRC_OP(op)] = SPOKEN | ROCE_HDR_XRCETH | (hdrs)
#define RC_REQ(op, hdrs)	[ROCE_RC_##op] = SPOKEN | (hdrs), \
				[XRC_OP(op)] = SPOKEN | ROCE_HDR_XRCETH | (hdrs)
/* an answer, which XRC's carry as RC's do */
#define RC_ANS(op, hdrs)	[ROCE_RC_##op] = SPOKEN | (hdrs), \
				[XRC_OP(op)] = SPOKEN | (hdrs)

static const uint16_t op_hdrs[256] = {
	RC_UC(SEND_FIRST, 0),
	RC_UC(SEND_MIDDLE, 0),
	RC_UC(SEND_LAST, 0),
	RC_UC(SEND_LAST_IMM, IMM),
	RC_UC(SEND_ONLY, 0),
	RC_UC(SEND_ONLY_IMM, IMM),
	RC_UC(RDMA_WRITE_FIRST, RETH),
	RC_UC(RDMA_WRITE_MIDDLE, 0),
	RC_UC(RDMA_WRITE_LAST, 0),
	RC_UC(RDMA_WRITE_LAST_IMM, IMM),
	RC_UC(RDMA_WRITE_ONLY, RETH),
	RC_UC(RDMA_WRITE_ONLY_IMM, RETH | IMM),
	RC_REQ(RDMA_READ_REQUEST, RETH),
	RC_ANS(READ_RESPONSE_FIRST, AETH),
	RC_ANS(READ_RESPONSE_MIDDLE, 0),
	RC_ANS(READ_RESPONSE_LAST, AETH),
	RC_ANS(READ_RESPONSE_ONLY, AETH),
	RC_ANS(ACKNOWLEDGE, AETH),
	RC_ANS(ATOMIC_ACKNOWLEDGE, AETH | ROCE_HDR_ATOMIC_ACK),
	RC_REQ(COMPARE_SWAP, ROCE_HDR_ATOMIC),
	RC_REQ(FETCH_ADD, ROCE_HDR_ATOMIC),
	RC_REQ(SEND_LAST_INV, ROCE_HDR_IETH),
	RC_REQ(SEND_ONLY_INV, ROCE_HDR_IETH),
	[ROCE_UD_SEND_ONLY] = SPOKEN | ROCE_HDR_DETH,
	[ROCE_UD_SEND_ONLY_IMM] = SPOKEN | ROCE_HDR_DETH | IMM,
};

int roce_opcode_hdrs(uint8_t opcode)
{
	unsigned int h = op_hdrs[opcode];

	return h & SPOKEN ? (int)(h & ~SPOKEN) : -1;
}

/* The bytes of the extension headers in mask hdrs */
static size_t hdrs_len(unsigned int hdrs)
{
	return (hdrs & ROCE_HDR_XRCETH ? XRCETH_LEN : 0) +
	       (hdrs & ROCE_HDR_DETH ? DETH_LEN : 0) +
	       (hdrs & ROCE_HDR_RETH ? RETH_LEN : 0) +
	       (hdrs & ROCE_HDR_ATOMIC ? ATOMIC_LEN : 0) +
	       (hdrs & ROCE_HDR_AETH ? AETH_LEN : 0) +
	       (hdrs & ROCE_HDR_ATOMIC_ACK ? ATOMIC_ACK_LEN : 0) +
	       (hdrs & ROCE_HDR_IMM ? IMM_LEN : 0) +
	       (hdrs & ROCE_HDR_IETH ? IETH_LEN : 0);
}

int roce_opcode_hdrs_len(uint8_t opcode)
{
	int hdrs = roce_opcode_hdrs(opcode);

	return hdrs < 0 ? -1 : (int)(ROCE_BTH_LEN + hdrs_len((unsigned int)hdrs));
}

void roce_pkt_init(struct roce_pkt *p, uint8_t opcode)
{
	memset(p, 0, sizeof(*p));
	p->opcode = opcode;
	p->hdrs = op_hdrs[opcode] & ~SPOKEN;
	p->pkey = ROCE_DEFAULT_PKEY;
}

/* ---- decoding -------------------------------------------------------------- */

static void decode_bth(const uint8_t *b, struct roce_pkt *p)
{
	p->opcode = b[0];
	p->se = b[1] & BTH_SE;
	p->mig_req = b[1] & BTH_MIG_REQ;
	p->pad = (b[1] >> BTH_PAD_SHIFT) & 3;
	p->pkey = get_be16(b + 2);
	p->dest_qp = get_be24(b + 5);
	p->ack_req = b[8] & BTH_ACK_REQ;
	p->psn = get_be24(b + 9);
}

static const uint8_t *decode_xrc_deth_reth(const uint8_t *h, struct roce_pkt *p)
{
	if (p->hdrs & ROCE_HDR_XRCETH) {
		p->xrc_srqn = get_be24(h + 1);
		h += XRCETH_LEN;
	}
	if (p->hdrs & ROCE_HDR_DETH) {
		p->deth.qkey = get_be32(h);
		p->deth.src_qp = get_be24(h + 5);
		h += DETH_LEN;
	}
	if (p->hdrs & ROCE_HDR_RETH) {
		p->reth.va = get_be64(h);
		p->reth.rkey = get_be32(h + 8);
		p->reth.len = get_be32(h + 12);
		h += RETH_LEN;
	}
	return h;
}

static const uint8_t *decode_atomic_aeth(const uint8_t *h, struct roce_pkt *p)
{
	if (p->hdrs & ROCE_HDR_ATOMIC) {
		p->atomic.va = get_be64(h);
		p->atomic.rkey = get_be32(h + 8);
		p->atomic.swap_add = get_be64(h + 12);
		p->atomic.compare = get_be64(h + 20);
		h += ATOMIC_LEN;
	}
	if (p->hdrs & ROCE_HDR_AETH) {
		p->aeth.syndrome = h[0];
		p->aeth.msn = get_be24(h + 1);
		h += AETH_LEN;
	}
	if (p->hdrs & ROCE_HDR_ATOMIC_ACK) {
		p->atomic_ack = get_be64(h);
		h += ATOMIC_ACK_LEN;
	}
	return h;
}

static void decode_imm_ieth(const uint8_t *h, struct roce_pkt *p)
{
	if (p->hdrs & ROCE_HDR_IMM) {
		p->imm = get_be32(h);
		h += IMM_LEN;
	}
	if (p->hdrs & ROCE_HDR_IETH)
		p->ieth = get_be32(h);
}

/*
 * Every length is checked before out is touched: a rejected packet leaves
 * it as it was, and nothing is read past len.
 */
int roce_decode(const uint8_t *buf, size_t len, struct roce_pkt *out)
{
	const uint8_t *h;
	unsigned int hdrs, pad;
	size_t hl, body;

	if (len < ROCE_BTH_LEN + ROCE_ICRC_LEN || len > MAX_UDP_PAYLOAD)
		return -EBADMSG;
	if ((buf[1] & BTH_TVER) || !(op_hdrs[buf[0]] & SPOKEN))
		return -EBADMSG;
	hdrs = op_hdrs[buf[0]] & ~SPOKEN;
	hl = ROCE_BTH_LEN + hdrs_len(hdrs);
	if (len < hl + ROCE_ICRC_LEN)
		return -EBADMSG;
	body = len - hl - ROCE_ICRC_LEN;
	pad = (buf[1] >> BTH_PAD_SHIFT) & 3;
	if (pad > body)
		return -EBADMSG;

	memset(out, 0, sizeof(*out));
	decode_bth(buf, out);
	out->hdrs = hdrs;
	h = decode_xrc_deth_reth(buf + ROCE_BTH_LEN, out);
	h = decode_atomic_aeth(h, out);
	decode_imm_ieth(h, out);
	out->payload = buf + hl;
	out->payload_len = (uint32_t)(body - pad);
	return 0;
}

/* ---- encoding -------------------------------------------------------------- */

static void encode_bth(const struct roce_pkt *p, uint8_t *b)
{
	b[0] = p->opcode;
	b[1] = (p->se ? BTH_SE : 0) | (p->mig_req ? BTH_MIG_REQ : 0) |
	       (uint8_t)((p->pad & 3) << BTH_PAD_SHIFT);
	put_be16(b + 2, p->pkey);
	put_be32(b + 4, p->dest_qp & 0xFFFFFF);	/* byte 4: FECN, BECN 0 */
	put_be32(b + 8, (p->ack_req ? (uint32_t)BTH_ACK_REQ << 24 : 0) |
		 (p->psn & 0xFFFFFF));
}

static uint8_t *encode_xrc_deth_reth(const struct roce_pkt *p, uint8_t *h)
{
	if (p->hdrs & ROCE_HDR_XRCETH) {
		put_be32(h, p->xrc_srqn & 0xFFFFFF);
		h += XRCETH_LEN;
	}
	if (p->hdrs & ROCE_HDR_DETH) {
		put_be32(h, p->deth.qkey);
		put_be32(h + 4, p->deth.src_qp & 0xFFFFFF);
		h += DETH_LEN;
	}
	if (p->hdrs & ROCE_HDR_RETH) {
		put_be64(h, p->reth.va);
		put_be32(h + 8, p->reth.rkey);
		put_be32(h + 12, p->reth.len);
		h += RETH_LEN;
	}
	return h;
}

static uint8_t *encode_atomic_aeth(const struct roce_pkt *p, uint8_t *h)
{
	if (p->hdrs & ROCE_HDR_ATOMIC) {
		put_be64(h, p->atomic.va);
		put_be32(h + 8, p->atomic.rkey);
		put_be64(h + 12, p->atomic.swap_add);
		put_be64(h + 20, p->atomic.compare);
		h += ATOMIC_LEN;
	}
	if (p->hdrs & ROCE_HDR_AETH) {
		put_be32(h, (uint32_t)p->aeth.syndrome << 24 |
			 (p->aeth.msn & 0xFFFFFF));
		h += AETH_LEN;
	}
	if (p->hdrs & ROCE_HDR_ATOMIC_ACK) {
		put_be64(h, p->atomic_ack);
		h += ATOMIC_ACK_LEN;
	}
	return h;
}

static uint8_t *encode_imm_ieth(const struct roce_pkt *p, uint8_t *h)
{
	if (p->hdrs & ROCE_HDR_IMM) {
		put_be32(h, p->imm);
		h += IMM_LEN;
	}
	if (p->hdrs & ROCE_HDR_IETH) {
		put_be32(h, p->ieth);
		h += IETH_LEN;
	}
	return h;
}

size_t roce_encode(const struct roce_pkt *p, uint8_t *buf)
{
	uint8_t *h;

	encode_bth(p, buf);
	h = encode_xrc_deth_reth(p, buf + ROCE_BTH_LEN);
	h = encode_atomic_aeth(p, h);
	h = encode_imm_ieth(p, h);
	return (size_t)(h - buf);
}
