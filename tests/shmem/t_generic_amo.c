/* C11 generic atomics and point-to-point names (shmem_generic.h): each
 * reaches the routine of its argument's type, with and without a ctx.
 * Every PE works on its own slot of its right neighbour's words, with
 * values that a routine of another width or kind would get wrong (carries
 * past 32 bits, fractions); _Static_asserts check the result types.
 */
#include "shmem_test.h"

#include <stdint.h>
#include <string.h>

static int me, npes, right, left;

#define SAME(e, T) _Static_assert(_Generic((e), T: 1, default: 0), #e " has type " #T)
static long long *g_ll;
static const double *g_cd;
static unsigned int *g_u;
SAME(shmem_atomic_fetch(g_ll, 0), long long);
SAME(shmem_atomic_fetch(SHMEM_CTX_DEFAULT, g_cd, 0), double);
SAME(shmem_atomic_fetch_add(g_ll, 1, 0), long long);
SAME(shmem_atomic_fetch_and(SHMEM_CTX_DEFAULT, g_u, 1u, 0), unsigned int);
SAME(shmem_atomic_swap((float *)0, 1.0f, 0), float);
SAME(shmem_atomic_compare_swap((unsigned long *)0, 1ul, 2ul, 0), unsigned long);

/* Standard AMOs on T: a start value near the top of 32 bits for the wide
 * types, so that a 32-bit routine would wrap. */
#define TEST_AMO(T, NAME)                                                                      \
    static void test_##NAME(shmem_ctx_t ctx)                                                   \
    {                                                                                          \
        T *w = shmem_malloc((size_t)npes * sizeof(T));                                         \
        ST_CHECK(w != NULL);                                                                   \
        const T base = sizeof(T) > 4 ? (T)0xfffffff0ull : (T)0x7ff0;                           \
        w[left] = 0; /* my slot on this PE is written by the left PE */                        \
        shmem_barrier_all();                                                                   \
        T *x = &w[me];                                                                         \
        shmem_atomic_set(x, base, right);                                                      \
        ST_CHECK(shmem_atomic_fetch(x, right) == base);                                        \
        ST_CHECK(shmem_atomic_fetch_add(ctx, x, (T)0x20, right) == base);                      \
        shmem_atomic_add(x, (T)0x20, right);                                                   \
        shmem_atomic_inc(ctx, x, right);                                                       \
        ST_CHECK(shmem_atomic_fetch_inc(x, right) == (T)(base + 0x41));                        \
        ST_CHECK(shmem_atomic_compare_swap(ctx, x, (T)(base + 0x42), (T)7, right) ==           \
                 (T)(base + 0x42));                                                            \
        ST_CHECK(shmem_atomic_swap(x, (T)9, right) == (T)7);                                   \
        T f1 = 0, f2 = 0, f3 = 0, f4 = 0;                                                      \
        shmem_atomic_fetch_nbi(ctx, &f1, x, right);                                            \
        shmem_ctx_quiet(ctx);                                                                  \
        shmem_atomic_fetch_add_nbi(&f2, x, base, right);                                       \
        shmem_quiet();                                                                         \
        shmem_atomic_fetch_inc_nbi(ctx, &f3, x, right);                                        \
        shmem_ctx_quiet(ctx);                                                                  \
        shmem_atomic_compare_swap_nbi(&f4, x, (T)(base + 10), (T)1, right);                    \
        shmem_quiet();                                                                         \
        ST_CHECK(f1 == (T)9 && f2 == (T)9 && f3 == (T)(base + 9) && f4 == (T)(base + 10));     \
        T f5 = 0;                                                                              \
        shmem_atomic_swap_nbi(ctx, &f5, x, (T)(base + base), right);                           \
        shmem_ctx_quiet(ctx);                                                                  \
        ST_CHECK(f5 == (T)1);                                                                  \
        shmem_barrier_all();                                                                   \
        ST_CHECK(w[left] == (T)(base + base));                                                 \
        shmem_barrier_all();                                                                   \
        shmem_free(w);                                                                         \
    }
TEST_AMO(int, int)
TEST_AMO(long, long)
TEST_AMO(long long, longlong)
TEST_AMO(unsigned int, uint)
TEST_AMO(unsigned long, ulong)
TEST_AMO(unsigned long long, ulonglong)
TEST_AMO(size_t, size)
TEST_AMO(int64_t, int64)

/* Extended AMOs on float and double: fractions that an integer routine
 * would lose. */
#define TEST_AMO_EXT(T, NAME)                                                                  \
    static void test_ext_##NAME(shmem_ctx_t ctx)                                               \
    {                                                                                          \
        T *w = shmem_malloc((size_t)npes * sizeof(T));                                         \
        ST_CHECK(w != NULL);                                                                   \
        shmem_barrier_all();                                                                   \
        T *x = &w[me];                                                                         \
        shmem_atomic_set(ctx, x, (T)2.5, right);                                               \
        ST_CHECK(shmem_atomic_fetch(x, right) == (T)2.5);                                      \
        ST_CHECK(shmem_atomic_swap(x, (T)-0.75, right) == (T)2.5);                             \
        T f = 0;                                                                               \
        shmem_atomic_swap_nbi(ctx, &f, x, (T)1.125, right);                                    \
        shmem_ctx_quiet(ctx);                                                                  \
        ST_CHECK(f == (T)-0.75);                                                               \
        shmem_atomic_fetch_nbi(&f, x, right);                                                  \
        shmem_quiet();                                                                         \
        ST_CHECK(f == (T)1.125);                                                               \
        shmem_barrier_all();                                                                   \
        ST_CHECK(w[left] == (T)1.125);                                                         \
        shmem_barrier_all();                                                                   \
        shmem_free(w);                                                                         \
    }
TEST_AMO_EXT(float, float)
TEST_AMO_EXT(double, double)

/* Bitwise AMOs: patterns in the upper half of 64-bit words. */
#define TEST_AMO_BIT(T, NAME)                                                                  \
    static void test_bit_##NAME(shmem_ctx_t ctx)                                               \
    {                                                                                          \
        T *w = shmem_malloc((size_t)npes * sizeof(T));                                         \
        ST_CHECK(w != NULL);                                                                   \
        shmem_barrier_all();                                                                   \
        T *x = &w[me];                                                                         \
        const T hi = sizeof(T) > 4 ? (T)(0xf0ull << 32) : (T)0x0f00;                           \
        shmem_atomic_set(x, (T)(hi | 0xff), right);                                            \
        ST_CHECK(shmem_atomic_fetch_and(x, (T)(hi | 0x0f), right) == (T)(hi | 0xff));          \
        shmem_atomic_and(ctx, x, (T)(hi | 0x0e), right);                                       \
        ST_CHECK(shmem_atomic_fetch_or(ctx, x, (T)0x30, right) == (T)(hi | 0x0e));             \
        shmem_atomic_or(x, (T)0x40, right);                                                    \
        ST_CHECK(shmem_atomic_fetch_xor(x, hi, right) == (T)(hi | 0x7e));                      \
        shmem_atomic_xor(ctx, x, (T)0x01, right);                                              \
        T f1 = 0, f2 = 0, f3 = 0;                                                              \
        shmem_atomic_fetch_and_nbi(&f1, x, (T)0xff, right);                                    \
        shmem_quiet();                                                                         \
        shmem_atomic_fetch_or_nbi(ctx, &f2, x, hi, right);                                     \
        shmem_ctx_quiet(ctx);                                                                  \
        shmem_atomic_fetch_xor_nbi(&f3, x, (T)0xff, right);                                    \
        shmem_quiet();                                                                         \
        ST_CHECK(f1 == (T)0x7f && f2 == (T)0x7f && f3 == (T)(hi | 0x7f));                      \
        shmem_barrier_all();                                                                   \
        ST_CHECK(w[left] == (T)(hi | 0x80));                                                   \
        shmem_barrier_all();                                                                   \
        shmem_free(w);                                                                         \
    }
TEST_AMO_BIT(unsigned int, uint)
TEST_AMO_BIT(unsigned long, ulong)
TEST_AMO_BIT(unsigned long long, ulonglong)
TEST_AMO_BIT(int32_t, int32)
TEST_AMO_BIT(int64_t, int64)
TEST_AMO_BIT(uint64_t, uint64)

/* wait_until and test on the types that differ in width: the left PE
 * writes its slot with shmem_p, this PE waits for the exact value. */
#define TEST_P2P(T, NAME, V)                                                                   \
    static void test_p2p_##NAME(void)                                                          \
    {                                                                                          \
        T *w = shmem_malloc(4 * sizeof(T));                                                    \
        int status[4] = {0, 0, 0, 0};                                                          \
        size_t idx[4];                                                                         \
        T cmps[4];                                                                             \
        ST_CHECK(w != NULL);                                                                   \
        for (int i = 0; i < 4; i++)                                                            \
            w[i] = 0;                                                                          \
        ST_EQ(shmem_test(&w[0], SHMEM_CMP_EQ, (T)(V)), 0);                                     \
        shmem_barrier_all();                                                                   \
        for (int i = 0; i < 4; i++)                                                            \
            shmem_p(&w[i], (T)((V) + i), right);                                               \
        shmem_quiet();                                                                         \
        shmem_wait_until(&w[3], SHMEM_CMP_EQ, (T)((V) + 3));                                   \
        shmem_wait_until_all(w, 4, status, SHMEM_CMP_GE, (T)(V));                              \
        ST_CHECK(shmem_wait_until_any(w, 4, status, SHMEM_CMP_EQ, (T)((V) + 2)) == 2);         \
        ST_CHECK(shmem_wait_until_some(w, 4, idx, status, SHMEM_CMP_GT, (T)((V) + 1)) == 2);   \
        ST_CHECK(idx[0] == 2 && idx[1] == 3);                                                  \
        for (int i = 0; i < 4; i++)                                                            \
            cmps[i] = (T)((V) + i);                                                            \
        shmem_wait_until_all_vector(w, 4, status, SHMEM_CMP_EQ, cmps);                         \
        ST_CHECK(shmem_wait_until_any_vector(w, 4, status, SHMEM_CMP_EQ, cmps) < 4);           \
        ST_CHECK(shmem_wait_until_some_vector(w, 4, idx, status, SHMEM_CMP_EQ, cmps) == 4);    \
        ST_EQ(shmem_test(&w[1], SHMEM_CMP_EQ, (T)((V) + 1)), 1);                               \
        ST_EQ(shmem_test(&w[1], SHMEM_CMP_EQ, (T)(V)), 0);                                     \
        ST_EQ(shmem_test_all(w, 4, status, SHMEM_CMP_GE, (T)(V)), 1);                          \
        ST_CHECK(shmem_test_any(w, 4, status, SHMEM_CMP_EQ, (T)((V) + 3)) == 3);               \
        ST_CHECK(shmem_test_some(w, 4, idx, status, SHMEM_CMP_LT, (T)((V) + 1)) == 1);         \
        ST_EQ(shmem_test_all_vector(w, 4, status, SHMEM_CMP_EQ, cmps), 1);                     \
        ST_CHECK(shmem_test_any_vector(w, 4, status, SHMEM_CMP_NE, cmps) == SIZE_MAX);         \
        ST_CHECK(shmem_test_some_vector(w, 4, idx, status, SHMEM_CMP_EQ, cmps) == 4);          \
        shmem_barrier_all();                                                                   \
        shmem_free(w);                                                                         \
    }
TEST_P2P(short, short, 0x4000)
TEST_P2P(int, int, 0x40000000)
TEST_P2P(long long, longlong, 0x400000000ll)
TEST_P2P(unsigned long, ulong, 0x8000000000ul)
TEST_P2P(unsigned short, ushort, 0x8000)

int main(void)
{
    shmem_init();
    me = shmem_my_pe();
    npes = shmem_n_pes();
    right = (me + 1) % npes;
    left = (me + npes - 1) % npes;
    shmem_ctx_t ctx;
    ST_EQ(shmem_ctx_create(0, &ctx), 0);
    shmem_ctx_t ctxs[2] = {SHMEM_CTX_DEFAULT, ctx};
    for (int c = 0; c < 2; c++) {
        test_int(ctxs[c]);
        test_long(ctxs[c]);
        test_longlong(ctxs[c]);
        test_uint(ctxs[c]);
        test_ulong(ctxs[c]);
        test_ulonglong(ctxs[c]);
        test_size(ctxs[c]);
        test_int64(ctxs[c]);
        test_ext_float(ctxs[c]);
        test_ext_double(ctxs[c]);
        test_bit_uint(ctxs[c]);
        test_bit_ulong(ctxs[c]);
        test_bit_ulonglong(ctxs[c]);
        test_bit_int32(ctxs[c]);
        test_bit_int64(ctxs[c]);
        test_bit_uint64(ctxs[c]);
    }
    ST_OK("generic atomics (standard, extended, bitwise, nbi) with and without ctx");
    test_p2p_short();
    test_p2p_int();
    test_p2p_longlong();
    test_p2p_ulong();
    test_p2p_ushort();
    ST_OK("generic wait_until/test families on short int long long unsigned long/short");
    shmem_ctx_destroy(ctx);
    shmem_finalize();
    return 0;
}
