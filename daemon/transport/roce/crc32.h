/*
 * CRC-32 as Ethernet and zlib compute it (reflected, polynomial
 * 0xEDB88320), for the ICRC of RoCEv2 packets.
 */
#ifndef IBVD_ROCE_CRC32_H
#define IBVD_ROCE_CRC32_H

#include <stddef.h>
#include <stdint.h>

/*
 * The CRC register after len more bytes.  The register only: zlib's
 * crc32(0, buf, len) is ~roce_crc32_update(0xFFFFFFFF, buf, len).
 */
uint32_t roce_crc32_update(uint32_t reg, const uint8_t *buf, size_t len);

#endif /* IBVD_ROCE_CRC32_H */
