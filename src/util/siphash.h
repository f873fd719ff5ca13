/* SipHash-2-4 (Aumasson & Bernstein): a keyed 64-bit pseudo-random
 * function, used as the message authentication code of memory keys and of the UDP link's
 * datagram headers and to derive per-link keys. */
#ifndef VMMC_UTIL_SIPHASH_H
#define VMMC_UTIL_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* The tag of @len bytes at @data under the 128-bit key @k (k[0] = key bytes
 * 0..7, k[1] = bytes 8..15, little-endian). */
uint64_t vmmc_siphash(const uint64_t k[2], const void *data, size_t len);

#endif
