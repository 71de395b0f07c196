/*
 * CRC-32, eight bytes a step ("slicing by 8"): table k holds the CRC of a
 * byte followed by k zero bytes, so the eight lookups of a step are
 * independent and the register feeds back once per 8 bytes instead of
 * once per byte.  On 4 KiB packets that is 4.4 times the speed of one
 * table (1.9 against 0.43 GB/s on the build machine).  zlib's crc32 (in
 * Debian 12) runs five words side by side and reaches 5.2 GB/s; we keep
 * our own to spare the build a dependency, and should the ICRC show in
 * profiles, the step beyond both is folding with carry-less multiplies
 * (PCLMULQDQ).  The tables (8 KiB) are built before main.
 */
#include <config.h>

#include <endian.h>
#include <string.h>

#include "crc32.h"

#define POLY		0xEDB88320u

static uint32_t table[8][256];

__attribute__((constructor))
static void crc32_tables(void)
{
	unsigned int b, k, bit;
	uint32_t c;

	for (b = 0; b < 256; b++) {
		c = b;
		for (bit = 0; bit < 8; bit++)
			c = c >> 1 ^ (c & 1 ? POLY : 0);
		table[0][b] = c;
	}
	for (k = 1; k < 8; k++)
		for (b = 0; b < 256; b++)
			table[k][b] = table[k - 1][b] >> 8 ^
				      table[0][table[k - 1][b] & 0xFF];
}

static uint32_t crc32_byte(uint32_t reg, uint8_t byte)
{
	return reg >> 8 ^ table[0][(reg ^ byte) & 0xFF];
}

/* The register enters as the first four bytes of the word it is xored into. */
static uint32_t crc32_word(uint32_t reg, const uint8_t *p)
{
	uint64_t w;

	memcpy(&w, p, sizeof(w));
	w = le64toh(w) ^ reg;
	return table[7][w & 0xFF] ^ table[6][w >> 8 & 0xFF] ^
	       table[5][w >> 16 & 0xFF] ^ table[4][w >> 24 & 0xFF] ^
	       table[3][w >> 32 & 0xFF] ^ table[2][w >> 40 & 0xFF] ^
	       table[1][w >> 48 & 0xFF] ^ table[0][w >> 56];
}

uint32_t roce_crc32_update(uint32_t reg, const uint8_t *buf, size_t len)
{
	for (; len >= 8; buf += 8, len -= 8)
		reg = crc32_word(reg, buf);
	for (; len; buf++, len--)
		reg = crc32_byte(reg, *buf);
	return reg;
}
