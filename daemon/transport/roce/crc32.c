/*
 * CRC-32 (reflected, polynomial 0xEDB88320), three ways, all giving the
 * same register:
 *
 * - a byte a step from one table: the reference the others are tested
 *   against, and the way for the last few bytes;
 * - eight bytes a step ("slicing by 8"), the portable way: table k holds
 *   the CRC of a byte followed by k zero bytes, so the eight lookups of a
 *   step are independent and the register feeds back once per 8 bytes
 *   instead of once per byte (4.4 times one table's speed).  Slicing by
 *   16 was tried and measured no faster here (bench/crc32, within the
 *   noise of a shared machine) for twice the tables; zlib's crc32
 *   (Debian 12, five words side by side) is about twice as fast.
 * - folding with carry-less multiplies (PCLMULQDQ, x86-64), after Intel's
 *   "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ
 *   Instruction" (Gopal et al., 2009): 2 to 5 times zlib's speed from
 *   1 KiB on (bench/RESULTS-roce.md), chosen at run time and compiled
 *   with a target attribute, so the build needs no -m flags.
 *
 * Folding.  Read the message as a polynomial over GF(2), its first bit
 * (bit 0 of byte 0, as the CRC is reflected) the highest power of x.
 * From a register of 0 the CRC is M(x)·x^32 mod P, so any M' with
 * M' ≡ M (mod P) has the same CRC, whatever its length: a 16-byte
 * block A followed by D more bits can be replaced by A·x^D mod P, reduced
 * only as far as 128 bits, and xored into the block D bits on.  With
 * A = A_hi·x^64 + A_lo (A_hi the first eight bytes), A·x^D ≡
 * A_hi·(x^(D+64) mod P) + A_lo·(x^D mod P), two 64 × 32-bit carry-less
 * products of at most 96 bits.  Loaded little endian into an XMM
 * register, the block is bit reversed (x^127 in bit 0), and a carry-less
 * multiply of two bit-reversed 64-bit values is the bit-reversed 128-bit
 * product times x; hence the constants are x^(D+63) and x^(D-1) mod P,
 * bit reversed into the high half of a 64-bit lane (crc32_xpow below
 * computes them when the tables are built: no magic numbers).  Four
 * blocks are folded side by side, each over the 512 bits to its
 * successor, so four multiplies' latencies overlap; then the four fold
 * into one over 128 bits a step, so does each further whole block, and
 * the remaining 16 bytes and the tail go through the tables from a
 * register of 0.  A register other than 0 is xored into the first four
 * bytes, as the tables do.  tests/unit/test_roce_wire.c checks all three
 * against one bit at a time.
 */
#include <config.h>

#include <endian.h>
#include <stdbool.h>
#include <string.h>

#include "crc32.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CRC32_CLMUL		1
#include <cpuid.h>
#include <immintrin.h>
#endif

#define POLY		0xEDB88320u

/*
 * Below this the set-up and the 16 bytes through the tables at the end
 * cost more than folding saves; the ICRC's masked headers (40 or 60 bytes)
 * stay on the tables.
 */
#define CLMUL_MIN	64

static uint32_t table[8][256];

/* x^n mod P, bit reversed as the register is (x^0 in bit 31) */
static uint32_t crc32_xpow(unsigned int n)
{
	uint32_t v = 0x80000000u;

	while (n--)
		v = v >> 1 ^ (v & 1 ? POLY : 0);
	return v;
}

#ifdef CRC32_CLMUL
static bool clmul_usable;
/* Low lane multiplies a block's first eight bytes, high lane its last */
static uint64_t fold512[2], fold128[2];
#endif

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
#ifdef CRC32_CLMUL
	{
		unsigned int eax, ebx, ecx, edx;

		clmul_usable = __get_cpuid(1, &eax, &ebx, &ecx, &edx) &&
			       (ecx & bit_PCLMUL);
	}
	fold512[0] = (uint64_t)crc32_xpow(512 + 63) << 32;
	fold512[1] = (uint64_t)crc32_xpow(512 - 1) << 32;
	fold128[0] = (uint64_t)crc32_xpow(128 + 63) << 32;
	fold128[1] = (uint64_t)crc32_xpow(128 - 1) << 32;
#else
	(void)crc32_xpow;
#endif
}

uint32_t roce_crc32_bytewise(uint32_t reg, const uint8_t *buf, size_t len)
{
	for (; len; buf++, len--)
		reg = reg >> 8 ^ table[0][(reg ^ *buf) & 0xFF];
	return reg;
}

static uint64_t load_le64(const uint8_t *p)
{
	uint64_t w;

	memcpy(&w, p, sizeof(w));
	return le64toh(w);
}

/* The register enters as the first four bytes of the word it is xored into. */
uint32_t roce_crc32_sliced(uint32_t reg, const uint8_t *buf, size_t len)
{
	uint64_t w;

	for (; len >= 8; buf += 8, len -= 8) {
		w = load_le64(buf) ^ reg;
		reg = table[7][w & 0xFF] ^ table[6][w >> 8 & 0xFF] ^
		      table[5][w >> 16 & 0xFF] ^ table[4][w >> 24 & 0xFF] ^
		      table[3][w >> 32 & 0xFF] ^ table[2][w >> 40 & 0xFF] ^
		      table[1][w >> 48 & 0xFF] ^ table[0][w >> 56];
	}
	return roce_crc32_bytewise(reg, buf, len);
}

#ifdef CRC32_CLMUL
/* a·x^D, reduced to 128 bits, for the D of constants k */
__attribute__((target("pclmul")))
static inline __m128i fold(__m128i a, __m128i k)
{
	return _mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00),
			     _mm_clmulepi64_si128(a, k, 0x11));
}

/* len >= 64 */
__attribute__((target("pclmul")))
static uint32_t crc32_fold(uint32_t reg, const uint8_t *buf, size_t len)
{
	const __m128i k512 = _mm_loadu_si128((const __m128i *)fold512);
	const __m128i k128 = _mm_loadu_si128((const __m128i *)fold128);
	__m128i x0, x1, x2, x3;
	uint8_t last[16];

	x0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)buf),
			   _mm_cvtsi32_si128((int)reg));
	x1 = _mm_loadu_si128((const __m128i *)(buf + 16));
	x2 = _mm_loadu_si128((const __m128i *)(buf + 32));
	x3 = _mm_loadu_si128((const __m128i *)(buf + 48));
	for (buf += 64, len -= 64; len >= 64; buf += 64, len -= 64) {
		x0 = _mm_xor_si128(fold(x0, k512),
				   _mm_loadu_si128((const __m128i *)buf));
		x1 = _mm_xor_si128(fold(x1, k512),
				   _mm_loadu_si128((const __m128i *)(buf + 16)));
		x2 = _mm_xor_si128(fold(x2, k512),
				   _mm_loadu_si128((const __m128i *)(buf + 32)));
		x3 = _mm_xor_si128(fold(x3, k512),
				   _mm_loadu_si128((const __m128i *)(buf + 48)));
	}
	x0 = _mm_xor_si128(fold(x0, k128), x1);
	x0 = _mm_xor_si128(fold(x0, k128), x2);
	x0 = _mm_xor_si128(fold(x0, k128), x3);
	for (; len >= 16; buf += 16, len -= 16)
		x0 = _mm_xor_si128(fold(x0, k128),
				   _mm_loadu_si128((const __m128i *)buf));
	_mm_storeu_si128((__m128i *)last, x0);
	return roce_crc32_sliced(roce_crc32_sliced(0, last, 16), buf, len);
}
#endif

bool roce_crc32_clmul_usable(void)
{
#ifdef CRC32_CLMUL
	return clmul_usable;
#else
	return false;
#endif
}

uint32_t roce_crc32_clmul(uint32_t reg, const uint8_t *buf, size_t len)
{
#ifdef CRC32_CLMUL
	if (clmul_usable && len >= CLMUL_MIN)
		return crc32_fold(reg, buf, len);
#endif
	return roce_crc32_sliced(reg, buf, len);
}

uint32_t roce_crc32_update(uint32_t reg, const uint8_t *buf, size_t len)
{
#ifdef CRC32_CLMUL
	if (len >= CLMUL_MIN && clmul_usable)
		return crc32_fold(reg, buf, len);
#endif
	return roce_crc32_sliced(reg, buf, len);
}
