/*
 * CRC-32 as Ethernet and zlib compute it (reflected, polynomial
 * 0xEDB88320), for the ICRC of RoCEv2 packets.
 */
#ifndef IBVD_ROCE_CRC32_H
#define IBVD_ROCE_CRC32_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The CRC register after len more bytes.  The register only: zlib's
 * crc32(0, buf, len) is ~roce_crc32_update(0xFFFFFFFF, buf, len).  Takes
 * the fastest of the ways below the CPU can run.
 */
uint32_t roce_crc32_update(uint32_t reg, const uint8_t *buf, size_t len);

/*
 * The ways themselves, each with roce_crc32_update's result, so that the
 * unit tests and bench/crc32 can reach every one on any CPU: a byte a
 * step, eight bytes a step, and folding with carry-less multiplies,
 * which only x86-64 with PCLMULQDQ runs (roce_crc32_clmul_usable());
 * elsewhere, and below 64 bytes, roce_crc32_clmul is roce_crc32_sliced.
 */
#define ROCE_CRC32_PATHS	1
uint32_t roce_crc32_bytewise(uint32_t reg, const uint8_t *buf, size_t len);
uint32_t roce_crc32_sliced(uint32_t reg, const uint8_t *buf, size_t len);
uint32_t roce_crc32_clmul(uint32_t reg, const uint8_t *buf, size_t len);
bool roce_crc32_clmul_usable(void);

#endif /* IBVD_ROCE_CRC32_H */
