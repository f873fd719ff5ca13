/* Reductions on the world team: every operation on several types and sizes
 * (0, 1, odd, 100000), in place (dest == source) and not, against values
 * every PE computes locally; the element after the result stays untouched. */
#include "shmem_test.h"

#include <complex.h>
#include <string.h>

static const size_t sizes[] = {0, 1, 7, 100000};
static int me, npes;

/* Inputs of PE p at index i, small enough for sum and prod of 4 PEs in
 * every type. */
#define IN_BIT(p, i) ((((i) * 13 + (p) * 5) & 0x3f) | (1 << ((p) % 7)))
#define IN_CMP(p, i) ((((i) * 7 + (p) * 29) % 101) - ((i) % 2 ? 0 : 23))
#define IN_SUM(p, i) (((i) + (p)) % 9 + 1)
#define IN_PROD(p, i) (((i) + (p)) % 3 == 0 ? 2 : 1)

#define EXP_LOOP(T, INIT, OPEXPR)                                                              \
    T e = (T)(INIT(0, i));                                                                     \
    for (int p = 1; p < npes; p++) {                                                           \
        T v = (T)(INIT(p, i));                                                                 \
        OPEXPR;                                                                                \
    }

#define RUN(T, N, OP, INIT, OPEXPR, INPLACE)                                                   \
    do {                                                                                       \
        for (size_t i = 0; i < n; i++)                                                         \
            src[i] = (T)(INIT(me, i));                                                         \
        T *d = INPLACE ? src : dst;                                                            \
        memset((char *)d + n * sizeof(T), 0x5a, sizeof(T));                                   \
        if (!INPLACE)                                                                          \
            memset(dst, 0x5a, n * sizeof(T));                                                  \
        shmem_barrier_all();                                                                   \
        ST_EQ(shmem_##N##_##OP##_reduce(SHMEM_TEAM_WORLD, d, src, n), 0);                      \
        for (size_t i = 0; i < n; i++) {                                                       \
            EXP_LOOP(T, INIT, OPEXPR)                                                          \
            if (d[i] != e)                                                                     \
                ST_FAIL(#N " " #OP "_reduce%s of %zu: [%zu] wrong", INPLACE ? " in place" : "", \
                        n, i);                                                                 \
        }                                                                                      \
        if (((unsigned char *)d)[n * sizeof(T)] != 0x5a)                                       \
            ST_FAIL(#N " " #OP "_reduce wrote past the result");                               \
        shmem_barrier_all();                                                                   \
    } while (0)

#define ALLOC(T)                                                                               \
    T *src = shmem_malloc((n + 1) * sizeof(T));                                                \
    T *dst = shmem_malloc((n + 1) * sizeof(T));                                                \
    ST_CHECK(src && dst)

#define FREE()                                                                                 \
    shmem_free(dst);                                                                           \
    shmem_free(src)

#define BIT_TEST(T, N)                                                                         \
    static void bit_##N(size_t n, int inplace)                                                 \
    {                                                                                          \
        ALLOC(T);                                                                              \
        if (inplace) {                                                                         \
            RUN(T, N, and, IN_BIT, e &= v, 1);                                                 \
            RUN(T, N, or, IN_BIT, e |= v, 1);                                                  \
            RUN(T, N, xor, IN_BIT, e ^= v, 1);                                                 \
        } else {                                                                               \
            RUN(T, N, and, IN_BIT, e &= v, 0);                                                 \
            RUN(T, N, or, IN_BIT, e |= v, 0);                                                  \
            RUN(T, N, xor, IN_BIT, e ^= v, 0);                                                 \
        }                                                                                      \
        FREE();                                                                                \
    }
#define CMP_TEST(T, N)                                                                         \
    static void cmp_##N(size_t n, int inplace)                                                 \
    {                                                                                          \
        ALLOC(T);                                                                              \
        if (inplace) {                                                                         \
            RUN(T, N, max, IN_CMP, if (v > e) e = v, 1);                                       \
            RUN(T, N, min, IN_CMP, if (v < e) e = v, 1);                                       \
            RUN(T, N, sum, IN_SUM, e += v, 1);                                                 \
            RUN(T, N, prod, IN_PROD, e *= v, 1);                                               \
        } else {                                                                               \
            RUN(T, N, max, IN_CMP, if (v > e) e = v, 0);                                       \
            RUN(T, N, min, IN_CMP, if (v < e) e = v, 0);                                       \
            RUN(T, N, sum, IN_SUM, e += v, 0);                                                 \
            RUN(T, N, prod, IN_PROD, e *= v, 0);                                               \
        }                                                                                      \
        FREE();                                                                                \
    }

BIT_TEST(unsigned char, uchar)
BIT_TEST(uint32_t, uint32)
BIT_TEST(unsigned long long, ulonglong)
BIT_TEST(size_t, size)
CMP_TEST(int, int)
CMP_TEST(long, long)
CMP_TEST(short, short)
CMP_TEST(signed char, schar)
CMP_TEST(uint64_t, uint64)
CMP_TEST(float, float)
CMP_TEST(double, double)
CMP_TEST(long double, longdouble)

#define IN_CPLX(p, i) ((double)(((i) + (p)) % 3) + 1.0 + ((double)((p) % 2) + 0.5) * I)

#define CPLX_TEST(T, N)                                                                        \
    static void cplx_##N(size_t n)                                                             \
    {                                                                                          \
        ALLOC(T);                                                                              \
        RUN(T, N, sum, IN_CPLX, e += v, 0);                                                    \
        RUN(T, N, prod, IN_CPLX, e *= v, 0);                                                   \
        RUN(T, N, sum, IN_CPLX, e += v, 1);                                                    \
        FREE();                                                                                \
    }
CPLX_TEST(double _Complex, complexd)
CPLX_TEST(float _Complex, complexf)

int main(void)
{
    shmem_init();
    me = shmem_my_pe();
    npes = shmem_n_pes();
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t n = sizes[k];
        for (int inplace = 0; inplace < 2; inplace++) {
            bit_uchar(n, inplace);
            bit_uint32(n, inplace);
            bit_ulonglong(n, inplace);
            bit_size(n, inplace);
            cmp_int(n, inplace);
            cmp_long(n, inplace);
            cmp_short(n, inplace);
            cmp_schar(n, inplace);
            cmp_uint64(n, inplace);
            cmp_float(n, inplace);
            cmp_double(n, inplace);
            cmp_longdouble(n, inplace);
        }
        cplx_complexd(n);
        cplx_complexf(n);
        char what[80];
        snprintf(what, sizeof(what), "and/or/xor/max/min/sum/prod_reduce of %zu elements", n);
        ST_OK(what);
    }
    shmem_finalize();
    return 0;
}
