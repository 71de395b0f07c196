/*
 * The rsocket protocol's formats (rs.h): the connection data's sizes and
 * the SGEs and iomap entries one side writes into the other's memory.
 * The writer puts them in the reader's byte order (it swaps when the
 * peer's RS_CONN_FLAG_NET differs from its own), so readers never swap.
 */
#include "config.h"

#include <assert.h>
#include <byteswap.h>
#include <netinet/in.h>
#include <string.h>

#include <infiniband/ib.h>

#include "rs.h"

static_assert(sizeof(struct rs_sge) == 16, "rs_sge is 16 bytes on the wire");
static_assert(sizeof(struct rs_iomap) == 24, "rs_iomap is 24 bytes on the wire");
static_assert(sizeof(struct rs_conn_data) == 40, "rs_conn_data is 40 bytes");

/*
 * An 8-bit field for a 16-bit size: values up to 128 as they are, larger
 * ones in units of 256 with the top bit set (rdma-core's scale).
 */
uint8_t rs_scale_encode(uint16_t value)
{
	return value <= 128 ? (uint8_t)value : (uint8_t)(0x80 | (value >> 8));
}

uint16_t rs_scale_decode(uint8_t scaled)
{
	return scaled <= 128 ? scaled : (uint16_t)((scaled & 0x7F) << 8);
}

static void sge_swap(struct rs_sge *dst, const struct rs_sge *src, bool swap)
{
	dst->addr = swap ? bswap_64(src->addr) : src->addr;
	dst->key = swap ? bswap_32(src->key) : src->key;
	dst->length = swap ? bswap_32(src->length) : src->length;
}

void rs_sge_to_peer(struct rs_sge *dst, const struct rs_sge *src, bool swap)
{
	sge_swap(dst, src, swap);
}

void rs_iomap_to_peer(struct rs_iomap *dst, const struct rs_iomap *src,
		      bool swap)
{
	dst->offset = swap ? bswap_64(src->offset) : src->offset;
	sge_swap(&dst->sge, &src->sge, swap);
}

socklen_t rs_copy_sockaddr(struct sockaddr *dst, socklen_t dst_len,
			   const struct sockaddr *src)
{
	socklen_t len = src->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
			src->sa_family == AF_IB ? sizeof(struct sockaddr_ib) :
						  sizeof(struct sockaddr_in);

	memcpy(dst, src, dst_len < len ? dst_len : len);
	return len;
}
