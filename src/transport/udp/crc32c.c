#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sendmmsg, recvmmsg, ppoll */
#endif
#include "transport/udp/crc32c.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82F63B78u

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_init(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = table[0][n];
        for (int k = 1; k < 8; k++) {
            c = table[0][c & 0xff] ^ (c >> 8);
            table[k][n] = c;
        }
    }
}

uint32_t vmmc_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
    pthread_once(&table_once, table_init);
    const unsigned char *p = buf;
    uint32_t c = ~crc;
    while (len && ((uintptr_t)p & 7)) {
        c = table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
        len--;
    }
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8); /* little-endian host (x86-64, aarch64) */
        w ^= c;
        c = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^ table[5][(w >> 16) & 0xff] ^
            table[4][(w >> 24) & 0xff] ^ table[3][(w >> 32) & 0xff] ^
            table[2][(w >> 40) & 0xff] ^ table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
        p += 8;
        len -= 8;
    }
    while (len--)
        c = table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return ~c;
}

#if defined(__x86_64__)
#include <immintrin.h>

/* One crc32 instruction has a latency of about three cycles and a throughput
 * of one per cycle, so a single dependency chain runs at a third of the
 * instruction's speed. Long buffers are therefore cut into rounds of three
 * equal lanes computed as three independent chains, then combined:
 *
 *   crc(A || B || C) = shift(shift(crc(A), |B|) ^ crc0(B), |C|) ^ crc0(C)
 *
 * where crc0 starts from a zero register and shift(x, n) is the register x
 * advanced over n zero bytes, which is linear in x: four 256-entry tables per
 * lane length (one per byte of x) give it in four look-ups. The tables are
 * built once from the instruction itself (shift of each of the 32 bits). */
#define LANE_LONG 2048u
#define LANE_SHORT 128u

static uint32_t shift_long[4][256], shift_short[4][256];
static pthread_once_t shift_once = PTHREAD_ONCE_INIT;

__attribute__((target("sse4.2"))) static uint32_t zeros_hw(uint32_t c, size_t n)
{
    uint64_t r = c;
    for (; n >= 8; n -= 8)
        r = _mm_crc32_u64(r, 0);
    for (; n; n--)
        r = _mm_crc32_u8((uint32_t)r, 0);
    return (uint32_t)r;
}

static void shift_table(uint32_t t[4][256], size_t n)
{
    uint32_t bit[32];
    for (int i = 0; i < 32; i++)
        bit[i] = zeros_hw(1u << i, n);
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int i = 0; i < 8; i++)
                if (b & (1u << i))
                    v ^= bit[8 * k + i];
            t[k][b] = v;
        }
}

static void shift_init(void)
{
    shift_table(shift_long, LANE_LONG);
    shift_table(shift_short, LANE_SHORT);
}

static inline uint32_t shift_by(uint32_t t[4][256], uint32_t x)
{
    return t[0][x & 0xff] ^ t[1][(x >> 8) & 0xff] ^ t[2][(x >> 16) & 0xff] ^ t[3][x >> 24];
}

__attribute__((target("sse4.2"))) static inline uint32_t rounds3(uint32_t c, const unsigned char **pp,
                                                                 size_t *lenp, size_t lane,
                                                                 uint32_t t[4][256])
{
    const unsigned char *p = *pp;
    size_t len = *lenp;
    while (len >= 3 * lane) {
        uint64_t a = c, b = 0, d = 0;
        const unsigned char *q = p + lane, *r = p + 2 * lane;
        for (size_t i = 0; i < lane; i += 8) {
            uint64_t wa, wb, wd;
            memcpy(&wa, p + i, 8);
            memcpy(&wb, q + i, 8);
            memcpy(&wd, r + i, 8);
            a = _mm_crc32_u64(a, wa);
            b = _mm_crc32_u64(b, wb);
            d = _mm_crc32_u64(d, wd);
        }
        c = shift_by(t, shift_by(t, (uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)d;
        p += 3 * lane;
        len -= 3 * lane;
    }
    *pp = p;
    *lenp = len;
    return c;
}

/* With AVX-512 and VPCLMULQDQ, long buffers are folded instead: four 512-bit
 * accumulators (16 lanes of 128 bits) each move 256 bytes forward per step
 * by carry-less multiplication (x^2048 and x^1984 modulo the polynomial, bit
 * reflected), then fold into one 128-bit value that the crc32 instruction
 * reduces. About four times the throughput of the crc32 instruction. The
 * constants are x^(D+32) and x^(D-32) mod P, reflected, for a fold over D bits:
 * they satisfy crc(A followed by D/8 zero bytes) = crc(fold(A)), which the
 * tests check against the table implementation. @dst (may be NULL) gets a
 * copy of the bytes folded. Returns the CRC register after len - len % 256
 * bytes; *done says how many. */
#define K2048_LO 0xdcb17aa4ull
#define K2048_HI 0xb9e02b86ull
#define K512_LO 0x740eef02ull
#define K512_HI 0x9e4addf8ull
#define K128_LO 0xf20c0dfeull
#define K128_HI 0x493c7d27ull

__attribute__((target("sse4.2,pclmul,avx512f,avx512vl,vpclmulqdq"))) static uint32_t
fold512(uint32_t c, unsigned char *dst, const unsigned char *p, size_t len, size_t *done)
{
    size_t n = len & ~(size_t)255;
    *done = n;
    __m512i x0 = _mm512_loadu_si512((const void *)p), x1 = _mm512_loadu_si512((const void *)(p + 64));
    __m512i x2 = _mm512_loadu_si512((const void *)(p + 128)), x3 = _mm512_loadu_si512((const void *)(p + 192));
    if (dst) {
        _mm512_storeu_si512((void *)dst, x0);
        _mm512_storeu_si512((void *)(dst + 64), x1);
        _mm512_storeu_si512((void *)(dst + 128), x2);
        _mm512_storeu_si512((void *)(dst + 192), x3);
    }
    x0 = _mm512_xor_si512(x0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)c)));
    const __m512i k = _mm512_set_epi64((long long)K2048_HI, (long long)K2048_LO, (long long)K2048_HI,
                                       (long long)K2048_LO, (long long)K2048_HI, (long long)K2048_LO,
                                       (long long)K2048_HI, (long long)K2048_LO);
#define FOLD(x, kk, y) \
    _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, kk, 0x00), _mm512_clmulepi64_epi128(x, kk, 0x11), y, 0x96)
    for (size_t i = 256; i < n; i += 256) {
        __m512i y0 = _mm512_loadu_si512((const void *)(p + i)), y1 = _mm512_loadu_si512((const void *)(p + i + 64));
        __m512i y2 = _mm512_loadu_si512((const void *)(p + i + 128)), y3 = _mm512_loadu_si512((const void *)(p + i + 192));
        if (dst) {
            _mm512_storeu_si512((void *)(dst + i), y0);
            _mm512_storeu_si512((void *)(dst + i + 64), y1);
            _mm512_storeu_si512((void *)(dst + i + 128), y2);
            _mm512_storeu_si512((void *)(dst + i + 192), y3);
        }
        x0 = FOLD(x0, k, y0);
        x1 = FOLD(x1, k, y1);
        x2 = FOLD(x2, k, y2);
        x3 = FOLD(x3, k, y3);
    }
    const __m512i k5 = _mm512_set_epi64((long long)K512_HI, (long long)K512_LO, (long long)K512_HI,
                                        (long long)K512_LO, (long long)K512_HI, (long long)K512_LO,
                                        (long long)K512_HI, (long long)K512_LO);
    x0 = FOLD(x0, k5, x1);
    x0 = FOLD(x0, k5, x2);
    x0 = FOLD(x0, k5, x3);
#undef FOLD
    const __m128i k1 = _mm_set_epi64x((long long)K128_HI, (long long)K128_LO);
    __m128i a = _mm512_extracti32x4_epi32(x0, 0);
    for (int lane = 1; lane < 4; lane++) {
        __m128i b = lane == 1 ? _mm512_extracti32x4_epi32(x0, 1)
                  : lane == 2 ? _mm512_extracti32x4_epi32(x0, 2)
                              : _mm512_extracti32x4_epi32(x0, 3);
        a = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(a, k1, 0x00),
                                        _mm_clmulepi64_si128(a, k1, 0x11)),
                          b);
    }
    uint64_t r = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(a));
    return (uint32_t)_mm_crc32_u64(r, (uint64_t)_mm_extract_epi64(a, 1));
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const void *buf,
                                                             size_t len, int wide)
{
    const unsigned char *p = buf;
    uint32_t c32 = ~crc;
    while (len && ((uintptr_t)p & 7)) {
        c32 = _mm_crc32_u8(c32, *p++);
        len--;
    }
    if (len >= 3 * LANE_SHORT) {
        pthread_once(&shift_once, shift_init);
        if (wide && len >= 512) {
            size_t done;
            c32 = fold512(c32, NULL, p, len, &done);
            p += done;
            len -= done;
        }
        c32 = rounds3(c32, &p, &len, LANE_LONG, shift_long);
        c32 = rounds3(c32, &p, &len, LANE_SHORT, shift_short);
    }
    uint64_t c = c32;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
        p += 8;
        len -= 8;
    }
    while (len--)
        c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}

/* The same, copying @len bytes from @src to @dst on the way: each word is
 * loaded once, fed to the CRC and stored, so the data crosses the caches
 * once instead of twice (memcpy, then the CRC reading the copy). */
__attribute__((target("sse4.2"))) static uint32_t rounds3_copy(uint32_t c, unsigned char **dp,
                                                               const unsigned char **pp,
                                                               size_t *lenp, size_t lane,
                                                               uint32_t t[4][256])
{
    const unsigned char *p = *pp;
    unsigned char *o = *dp;
    size_t len = *lenp;
    while (len >= 3 * lane) {
        uint64_t a = c, b = 0, d = 0;
        for (size_t i = 0; i < lane; i += 8) {
            uint64_t wa, wb, wd;
            memcpy(&wa, p + i, 8);
            memcpy(&wb, p + lane + i, 8);
            memcpy(&wd, p + 2 * lane + i, 8);
            a = _mm_crc32_u64(a, wa);
            b = _mm_crc32_u64(b, wb);
            d = _mm_crc32_u64(d, wd);
            memcpy(o + i, &wa, 8);
            memcpy(o + lane + i, &wb, 8);
            memcpy(o + 2 * lane + i, &wd, 8);
        }
        c = shift_by(t, shift_by(t, (uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)d;
        p += 3 * lane;
        o += 3 * lane;
        len -= 3 * lane;
    }
    *pp = p;
    *dp = o;
    *lenp = len;
    return c;
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_copy_x86(uint32_t crc, void *dst,
                                                                  const void *src, size_t len,
                                                                  int wide)
{
    const unsigned char *p = src;
    unsigned char *o = dst;
    uint32_t c32 = ~crc;
    if (len >= 3 * LANE_SHORT) {
        pthread_once(&shift_once, shift_init);
        if (wide && len >= 512) {
            size_t done;
            c32 = fold512(c32, o, p, len, &done);
            p += done;
            o += done;
            len -= done;
        }
        c32 = rounds3_copy(c32, &o, &p, &len, LANE_LONG, shift_long);
        c32 = rounds3_copy(c32, &o, &p, &len, LANE_SHORT, shift_short);
    }
    uint64_t c = c32;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
        memcpy(o, &w, 8);
        p += 8;
        o += 8;
        len -= 8;
    }
    while (len--) {
        c = _mm_crc32_u8((uint32_t)c, *p);
        *o++ = *p++;
    }
    return ~(uint32_t)c;
}

uint32_t vmmc_crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
    return crc32c_hw(crc, buf, len, 0);
}

uint32_t vmmc_crc32c_wide(uint32_t crc, const void *buf, size_t len)
{
    return crc32c_hw(crc, buf, len, 1);
}

uint32_t vmmc_crc32c_copy_hw(uint32_t crc, void *dst, const void *src, size_t len, int wide)
{
    return crc32c_copy_x86(crc, dst, src, len, wide);
}

static uint32_t copy_narrow(uint32_t crc, void *dst, const void *src, size_t len)
{
    return crc32c_copy_x86(crc, dst, src, len, 0);
}

static uint32_t copy_wide(uint32_t crc, void *dst, const void *src, size_t len)
{
    return crc32c_copy_x86(crc, dst, src, len, 1);
}

int vmmc_crc32c_hw_available(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2");
}

int vmmc_crc32c_wide_available(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("vpclmulqdq") &&
           __builtin_cpu_supports("pclmul");
}
#else
uint32_t vmmc_crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
    return vmmc_crc32c_sw(crc, buf, len);
}

uint32_t vmmc_crc32c_wide(uint32_t crc, const void *buf, size_t len)
{
    return vmmc_crc32c_sw(crc, buf, len);
}

int vmmc_crc32c_hw_available(void)
{
    return 0;
}

int vmmc_crc32c_wide_available(void)
{
    return 0;
}

static uint32_t crc32c_copy_sw(uint32_t crc, void *dst, const void *src, size_t len);

uint32_t vmmc_crc32c_copy_hw(uint32_t crc, void *dst, const void *src, size_t len, int wide)
{
    (void)wide;
    return crc32c_copy_sw(crc, dst, src, len);
}
#define copy_narrow crc32c_copy_sw
#define copy_wide crc32c_copy_sw
#endif

static uint32_t crc32c_copy_sw(uint32_t crc, void *dst, const void *src, size_t len)
{
    if (len)
        memcpy(dst, src, len);
    return vmmc_crc32c_sw(crc, dst, len);
}

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);
typedef uint32_t (*crc_copy_fn)(uint32_t, void *, const void *, size_t);
static crc_fn crc_impl;
static crc_copy_fn crc_copy_impl;
static pthread_once_t impl_once = PTHREAD_ONCE_INIT;

static void impl_init(void)
{
    int hw = vmmc_crc32c_hw_available(), wide = vmmc_crc32c_wide_available();
    crc_impl = wide ? vmmc_crc32c_wide : hw ? vmmc_crc32c_hw : vmmc_crc32c_sw;
    crc_copy_impl = wide ? copy_wide : hw ? copy_narrow : crc32c_copy_sw;
}

uint32_t vmmc_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len)
{
    pthread_once(&impl_once, impl_init);
    return crc_copy_impl(crc, dst, src, len);
}

uint32_t vmmc_crc32c(uint32_t crc, const void *buf, size_t len)
{
    pthread_once(&impl_once, impl_init);
    return crc_impl(crc, buf, len);
}
