/*
 * Big-endian fields at any alignment: wire headers are packed (AtomicETH
 * puts a u64 at offset 12), so every access goes through memcpy, which
 * compilers turn into one load or store and a byte swap.
 */
#ifndef IBVD_ROCE_BE_H
#define IBVD_ROCE_BE_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t get_be16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return be16toh(v);
}

static inline uint32_t get_be32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return be32toh(v);
}

static inline uint64_t get_be64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return be64toh(v);
}

/* A 24-bit field at p: QPNs, PSNs, MSNs */
static inline uint32_t get_be24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static inline void put_be16(uint8_t *p, uint16_t v)
{
	v = htobe16(v);
	memcpy(p, &v, sizeof(v));
}

static inline void put_be32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void put_be64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, sizeof(v));
}

static inline void put_be24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16);
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)v;
}

#endif /* IBVD_ROCE_BE_H */
