/* VMMC_SEND_HEAD_LAST's store order at @d (8-byte aligned, len >= 16): every
 * byte but the first 16, then word 0, then word 1 with release. The mapped
 * send path, the shm transport and the udp receiver all store this way, so
 * a receiver that polls word 1 sees the whole message once it changes. */
#ifndef VMMC_UTIL_STORE_H
#define VMMC_UTIL_STORE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void vmmc_store_head_last(char *d, const void *src, size_t len)
{
    uint64_t w[2];
    memcpy(d + 16, (const char *)src + 16, len - 16);
    memcpy(w, src, sizeof w);
    atomic_store_explicit((_Atomic uint64_t *)(void *)d, w[0], memory_order_release);
    atomic_store_explicit((_Atomic uint64_t *)(void *)(d + 8), w[1], memory_order_release);
}

#endif
