/* CRC32C (Castagnoli, iSCSI polynomial 0x1EDC6F41, reflected 0x82F63B78).
 *
 * Used by the UDP link to check every datagram. The hardware paths (chosen
 * once at run time) fold long buffers with AVX-512 VPCLMULQDQ when the CPU
 * has it, else run three interleaved chains of the SSE4.2 crc32 instruction;
 * otherwise a slicing-by-8 table computes the same value. */
#ifndef VMMC_UDP_CRC32C_H
#define VMMC_UDP_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continue a CRC: start with crc = 0 for a fresh buffer; feeding a buffer in
 * pieces gives the same result as feeding it whole. */
uint32_t vmmc_crc32c(uint32_t crc, const void *buf, size_t len);

/* The same CRC of @src, copying it to @dst (no overlap) in the same pass. */
uint32_t vmmc_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len);

/* The portable implementation (always available; exposed for tests). */
uint32_t vmmc_crc32c_sw(uint32_t crc, const void *buf, size_t len);
/* The SSE4.2 implementation; only call it if vmmc_crc32c_hw_available(). */
uint32_t vmmc_crc32c_hw(uint32_t crc, const void *buf, size_t len);
int vmmc_crc32c_hw_available(void);
/* SSE4.2 plus AVX-512 VPCLMULQDQ folding of long buffers; only call it if
 * vmmc_crc32c_wide_available(). vmmc_crc32c() uses the fastest available. */
uint32_t vmmc_crc32c_wide(uint32_t crc, const void *buf, size_t len);
int vmmc_crc32c_wide_available(void);
/* The copying CRC of the hardware paths, narrow (crc32 only) or wide; for
 * tests, with the same availability rules. */
uint32_t vmmc_crc32c_copy_hw(uint32_t crc, void *dst, const void *src, size_t len, int wide);

#endif
