/* Shared helpers for the FM tests: set-up, deterministic data, checksums. */
#ifndef VMMC_TESTS_FM_TEST_H
#define VMMC_TESTS_FM_TEST_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vmmc/fm.h"
#include "vtest.h"

/* Byte i of the message (sender, seq): reproducible on both sides. */
static inline uint8_t ft_byte(int sender, uint64_t seq, size_t i)
{
    uint64_t x = (uint64_t)sender * 0x9E3779B97F4A7C15ull ^ seq * 0xC2B2AE3D27D4EB4Full ^ (i >> 3);
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    return (uint8_t)(x >> ((i & 7) * 8));
}

static inline void ft_fill(uint8_t *b, size_t n, int sender, uint64_t seq)
{
    for (size_t i = 0; i < n; i++)
        b[i] = ft_byte(sender, seq, i);
}

/* Index of the first wrong byte, or (size_t)-1 if all match. */
static inline size_t ft_check(const uint8_t *b, size_t n, int sender, uint64_t seq, size_t from)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != ft_byte(sender, seq, from + i))
            return i;
    return (size_t)-1;
}

/* FNV-1a, for checksums carried inside messages. */
static inline uint64_t ft_fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001B3ull;
    }
    return h;
}
#define FT_FNV0 0xCBF29CE484222325ull

static inline void ft_open(vmmc_ep_t **ep, fm_t **fm, const fm_params_t *pa)
{
    VT_OK(vmmc_init(NULL, ep));
    VT_OK(fm_init(*ep, pa, fm));
}

static inline void ft_close(vmmc_ep_t *ep, fm_t *fm)
{
    VT_OK(vmmc_barrier(ep));
    VT_OK(fm_finalize(fm));
    VT_OK(vmmc_finalize(ep));
}

#endif
