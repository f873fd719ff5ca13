/* Contiguous RMA: typed, sized and mem put/get and their _nbi and ctx
 * forms, on heap and static (global) memory, with 0, 1, some and 1 MiB of
 * elements. Every PE writes to its right neighbour and reads from it, so
 * each PE is written by exactly one PE whose data it can predict; each
 * check also looks one element past the end, which a move of the wrong
 * length would have written.
 */
#include "shmem_test.h"

#include <float.h>
#include <stdint.h>
#include <string.h>

#define NMAX 1000
#define BIG (1u << 20)

static int me, npes, right, left;

/* Static symmetric memory: written by another PE, never by shmem_malloc. */
static long long s_dst[NMAX + 1];
static unsigned char s_big[BIG + 64];

/* The value element i written by PE pe holds, for each type family. */
#define VAL(T, pe, i) ((T)(((pe) * 37 + (i) * 11 + 5) % 120 + 1))
#define VALLD(pe, i) (1.0L + (long double)((pe) * 1000 + (i)) * LDBL_EPSILON * 3)

/* Put n elements of T to the right, get them back from there, check both,
 * for blocking, nbi and ctx forms. */
#define TEST_TYPED(T, N, VALF)                                                                 \
    static void test_##N(size_t n, shmem_ctx_t ctx)                                            \
    {                                                                                          \
        T *dst = shmem_malloc((NMAX + 1) * sizeof(T));                                         \
        T src[NMAX + 1], back[NMAX + 1];                                                       \
        ST_CHECK(dst != NULL);                                                                 \
        for (size_t i = 0; i <= NMAX; i++) {                                                   \
            src[i] = VALF(T, me, i);                                                           \
            dst[i] = (T)0;                                                                     \
        }                                                                                      \
        shmem_barrier_all();                                                                   \
        for (int form = 0; form < 3; form++) {                                                 \
            T fill = (T)(form + 121);                                                          \
            for (size_t i = 0; i <= NMAX; i++) {                                               \
                dst[i] = fill;                                                                 \
                back[i] = fill;                                                                \
            }                                                                                  \
            shmem_barrier_all();                                                               \
            if (form == 0) {                                                                   \
                shmem_##N##_put(dst, src, n, right);                                           \
            } else if (form == 1) {                                                            \
                shmem_##N##_put_nbi(dst, src, n, right);                                       \
                shmem_quiet();                                                                 \
            } else {                                                                           \
                shmem_ctx_##N##_put(ctx, dst, src, n, right);                                  \
                shmem_ctx_quiet(ctx);                                                          \
            }                                                                                  \
            shmem_barrier_all();                                                               \
            for (size_t i = 0; i < n; i++)                                                     \
                if (dst[i] != VALF(T, left, i))                                                \
                    ST_FAIL(#N " put form %d n %zu: element %zu wrong", form, n, i);           \
            if (dst[n] != fill)                                                                 \
                ST_FAIL(#N " put form %d n %zu wrote past the end", form, n);                  \
            if (form == 0) {                                                                   \
                shmem_##N##_get(back, dst, n, right);                                          \
            } else if (form == 1) {                                                            \
                shmem_##N##_get_nbi(back, dst, n, right);                                      \
                shmem_quiet();                                                                 \
            } else {                                                                           \
                shmem_ctx_##N##_get_nbi(ctx, back, dst, n, right);                             \
                shmem_ctx_quiet(ctx);                                                          \
            }                                                                                  \
            for (size_t i = 0; i < n; i++)                                                     \
                if (back[i] != src[i])                                                         \
                    ST_FAIL(#N " get form %d n %zu: element %zu wrong", form, n, i);           \
            if (back[n] != fill)                                                                \
                ST_FAIL(#N " get form %d n %zu read past the end", form, n);                   \
            shmem_barrier_all(); /* the right PE refills dst only after my get */              \
        }                                                                                      \
        shmem_barrier_all();                                                                   \
        shmem_free(dst);                                                                       \
    }

#define VALT(T, pe, i) VAL(T, pe, i)
#define VALL(T, pe, i) VALLD(pe, i)
TEST_TYPED(int8_t, int8, VALT)
TEST_TYPED(size_t, size, VALT)
TEST_TYPED(char, char, VALT)
TEST_TYPED(int, int, VALT)
TEST_TYPED(double, double, VALT)
TEST_TYPED(uint16_t, uint16, VALT)
TEST_TYPED(ptrdiff_t, ptrdiff, VALT)
TEST_TYPED(long double, longdouble, VALL)

static void test_types(shmem_ctx_t ctx)
{
    static const size_t ns[] = {0, 1, 7, NMAX};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        test_int8(ns[k], ctx);
        test_size(ns[k], ctx);
        test_char(ns[k], ctx);
        test_int(ns[k], ctx);
        test_double(ns[k], ctx);
        test_uint16(ns[k], ctx);
        test_ptrdiff(ns[k], ctx);
        test_longdouble(ns[k], ctx);
    }
    ST_OK("typed put/get/nbi/ctx, int8 size char int double uint16 ptrdiff long double, n 0 1 7 1000");
}

/* Sized forms: shmem_putB moves nelems elements of B/8 bytes. */
static void test_sized(void)
{
    unsigned char *dst = shmem_malloc(2 * 16 * 64);
    unsigned char src[16 * 64], back[16 * 64 + 16];
    ST_CHECK(dst != NULL);
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (unsigned char)(me * 31 + i * 7);
#define SIZED(B)                                                                               \
    do {                                                                                       \
        size_t n = 64 - (B) / 8, bytes = n * (B) / 8;                                          \
        memset(dst, 0xee, 2 * 16 * 64);                                                        \
        memset(back, 0xdd, sizeof back);                                                       \
        shmem_barrier_all();                                                                   \
        shmem_put##B(dst, src, n, right);                                                      \
        shmem_put##B##_nbi(dst + 16 * 64, src, n, right);                                      \
        shmem_quiet();                                                                         \
        shmem_barrier_all();                                                                   \
        for (size_t i = 0; i < bytes; i++) {                                                   \
            ST_EQ(dst[i], (unsigned char)(left * 31 + i * 7));                                 \
            ST_EQ(dst[16 * 64 + i], (unsigned char)(left * 31 + i * 7));                       \
        }                                                                                      \
        ST_EQ(dst[bytes], 0xee);                                                               \
        ST_EQ(dst[16 * 64 + bytes], 0xee);                                                     \
        shmem_get##B(back, dst, n, right);                                                     \
        ST_CHECK(memcmp(back, src, bytes) == 0);                                               \
        ST_EQ(back[bytes], 0xdd);                                                              \
        memset(back, 0xdd, sizeof back);                                                       \
        shmem_get##B##_nbi(back, dst + 16 * 64, n, right);                                     \
        shmem_quiet();                                                                         \
        ST_CHECK(memcmp(back, src, bytes) == 0);                                               \
        ST_EQ(back[bytes], 0xdd);                                                              \
        shmem_barrier_all(); /* every PE checked its dst: rewrite it */                        \
        shmem_ctx_put##B(SHMEM_CTX_DEFAULT, dst, src + 1, 1, right);                           \
        shmem_barrier_all();                                                                   \
        for (size_t i = 0; i < (B) / 8; i++)                                                   \
            ST_EQ(dst[i], (unsigned char)(left * 31 + (i + 1) * 7));                           \
        ST_EQ(dst[(B) / 8], (unsigned char)(left * 31 + ((B) / 8) * 7));                       \
        shmem_barrier_all();                                                                   \
    } while (0)
    SIZED(8);
    SIZED(16);
    SIZED(32);
    SIZED(64);
    SIZED(128);
#undef SIZED
    shmem_free(dst);
    ST_OK("sized put/get 8 16 32 64 128 and nbi");
}

/* 1 MiB with putmem/getmem and their nbi forms, into the heap and into
 * static data. */
static void test_big(void)
{
    unsigned char *dst = shmem_malloc(BIG + 64);
    unsigned char *src = malloc(BIG), *back = malloc(BIG + 1);
    ST_CHECK(dst != NULL && src != NULL && back != NULL);
    for (size_t i = 0; i < BIG; i++)
        src[i] = (unsigned char)((i * 2654435761u) >> 13) ^ (unsigned char)me;
    for (int where = 0; where < 2; where++) {
        unsigned char *d = where ? s_big : dst;
        for (int nbi = 0; nbi < 2; nbi++) {
            memset(d, 0x5a, BIG + 64);
            shmem_barrier_all();
            if (nbi) {
                shmem_putmem_nbi(d, src, BIG, right);
                shmem_quiet();
            } else {
                shmem_putmem(d, src, BIG, right);
            }
            shmem_barrier_all();
            for (size_t i = 0; i < BIG; i++)
                if (d[i] != ((unsigned char)((i * 2654435761u) >> 13) ^ (unsigned char)left))
                    ST_FAIL("1 MiB put (%s, nbi %d): byte %zu wrong", where ? "static" : "heap",
                            nbi, i);
            ST_EQ(d[BIG], 0x5a);
            memset(back, 0x11, BIG + 1);
            if (nbi) {
                shmem_getmem_nbi(back, d, BIG, right);
                shmem_quiet();
            } else {
                shmem_getmem(back, d, BIG, right);
            }
            ST_CHECK(memcmp(back, src, BIG) == 0);
            ST_EQ(back[BIG], 0x11);
            shmem_barrier_all();
        }
    }
    free(src);
    free(back);
    shmem_free(dst);
    ST_OK("1 MiB putmem/getmem and nbi, heap and static");
}

/* Static (global) destination through the typed calls. */
static void test_static(void)
{
    long long src[NMAX];
    for (int i = 0; i < NMAX; i++)
        src[i] = (long long)me << 40 | i;
    for (int i = 0; i <= NMAX; i++)
        s_dst[i] = -1;
    shmem_barrier_all();
    shmem_longlong_put(s_dst, src, NMAX, right);
    shmem_barrier_all();
    for (int i = 0; i < NMAX; i++)
        ST_EQ(s_dst[i], (long long)left << 40 | i);
    ST_EQ(s_dst[NMAX], -1);
    long long back[3] = {0, 0, 7};
    shmem_longlong_get(back, s_dst + 10, 2, right);
    ST_EQ(back[0], (long long)me << 40 | 10);
    ST_EQ(back[1], (long long)me << 40 | 11);
    ST_EQ(back[2], 7);
    shmem_barrier_all();
    ST_OK("typed put/get into static data");
}

/* Every PE writes its own slot on every other PE at once (nbi, then one
 * quiet), and PE 0 alone fans out to all others. */
static void test_all_to_all(void)
{
    enum { SLOT = 4096 };
    int *dst = shmem_malloc((size_t)npes * SLOT * sizeof(int));
    int *src = malloc(SLOT * sizeof(int));
    ST_CHECK(dst != NULL && src != NULL);
    for (int i = 0; i < SLOT; i++)
        src[i] = me * 100000 + i;
    memset(dst, 0, (size_t)npes * SLOT * sizeof(int));
    shmem_barrier_all();
    for (int k = 1; k < npes; k++)
        shmem_int_put_nbi(dst + me * SLOT, src, SLOT, (me + k) % npes);
    shmem_quiet();
    shmem_barrier_all();
    for (int pe = 0; pe < npes; pe++)
        for (int i = 0; i < SLOT; i++)
            ST_EQ(dst[pe * SLOT + i], pe == me ? 0 : pe * 100000 + i);
    shmem_barrier_all();
    if (me == 0)
        for (int pe = 1; pe < npes; pe++)
            shmem_int_put(dst, src + pe, SLOT - pe, pe);
    shmem_barrier_all();
    if (me != 0)
        for (int i = 0; i < SLOT - me; i++)
            ST_EQ(dst[i], i + me);
    shmem_barrier_all();
    free(src);
    shmem_free(dst);
    ST_OK("puts from every PE to every other at once; one PE to all");
}

/* A put on SHMEM_CTX_INVALID does nothing (the standard's no-op). */
static void test_invalid_ctx(void)
{
    long *dst = shmem_malloc(sizeof(long));
    long one = 1;
    *dst = 42;
    shmem_barrier_all();
    shmem_ctx_long_put(SHMEM_CTX_INVALID, dst, &one, 1, right);
    shmem_ctx_putmem(SHMEM_CTX_INVALID, dst, &one, sizeof one, right);
    shmem_barrier_all();
    ST_EQ(*dst, 42);
    shmem_barrier_all();
    shmem_free(dst);
    ST_OK("puts on SHMEM_CTX_INVALID are no-ops");
}

int main(void)
{
    shmem_init();
    me = shmem_my_pe();
    npes = shmem_n_pes();
    right = (me + 1) % npes;
    left = (me + npes - 1) % npes;

    test_types(SHMEM_CTX_DEFAULT);
    shmem_ctx_t ctx;
    ST_EQ(shmem_ctx_create(SHMEM_CTX_PRIVATE, &ctx), 0);
    test_types(ctx);
    shmem_ctx_destroy(ctx);
    test_sized();
    test_big();
    test_static();
    test_all_to_all();
    test_invalid_ctx();
    shmem_finalize();
    return 0;
}
