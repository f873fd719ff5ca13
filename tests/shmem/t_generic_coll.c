/* C11 generic collectives and reductions on teams (shmem_generic.h):
 * broadcast, collect, fcollect, alltoall, alltoalls and the seven
 * *_reduce names reach the routine of the destination's type. Values are
 * chosen so that a routine of another type would get them wrong: long
 * double sums that need more than a double's precision, char maxima that
 * a signed and an unsigned char order differently, complex products.
 */
#include "shmem_test.h"

#include <complex.h>
#include <float.h>
#include <stdint.h>
#include <string.h>

static int me, npes;

#define SAME(e, T) _Static_assert(_Generic((e), T: 1, default: 0), #e " has type " #T)
SAME(shmem_sum_reduce(SHMEM_TEAM_WORLD, (long double *)0, (const long double *)0, 1), int);

/* Data movement collectives on T: element i of PE p's source is VAL(p, i). */
#define VAL(T, p, i) ((T)((p) * 16 + (i) + 1) + (T)_Generic((T)0, double: 0.5, default: 0))
#define TEST_MOVE(T, NAME)                                                                     \
    static void test_move_##NAME(void)                                                         \
    {                                                                                          \
        enum { NE = 3 };                                                                       \
        T *src = shmem_malloc(NE * (size_t)npes * sizeof(T));                                  \
        T *dst = shmem_malloc((NE * (size_t)npes * 2 + 1) * sizeof(T));                        \
        ST_CHECK(src != NULL && dst != NULL);                                                  \
        for (int i = 0; i < NE * npes; i++)                                                    \
            src[i] = VAL(T, me, i);                                                            \
        for (int i = 0; i < NE * npes * 2 + 1; i++)                                            \
            dst[i] = (T)0;                                                                     \
        shmem_barrier_all();                                                                   \
        ST_EQ(shmem_broadcast(SHMEM_TEAM_WORLD, dst, src, NE, npes - 1), 0);                   \
        for (int i = 0; i < NE; i++)                                                           \
            ST_CHECK(dst[i] == VAL(T, npes - 1, i));                                           \
        ST_CHECK(dst[NE] == (T)0);                                                             \
        shmem_barrier_all();                                                                   \
        ST_EQ(shmem_fcollect(SHMEM_TEAM_WORLD, dst, src, NE), 0);                              \
        for (int p = 0; p < npes; p++)                                                         \
            for (int i = 0; i < NE; i++)                                                       \
                ST_CHECK(dst[p * NE + i] == VAL(T, p, i));                                     \
        ST_CHECK(dst[npes * NE] == (T)0);                                                      \
        shmem_barrier_all();                                                                   \
        /* collect: PE p gives p % NE + 1 elements */                                          \
        ST_EQ(shmem_collect(SHMEM_TEAM_WORLD, dst, src, (size_t)(me % NE + 1)), 0);            \
        for (int p = 0, k = 0; p < npes; p++)                                                  \
            for (int i = 0; i < p % NE + 1; i++, k++)                                          \
                ST_CHECK(dst[k] == VAL(T, p, i));                                              \
        shmem_barrier_all();                                                                   \
        ST_EQ(shmem_alltoall(SHMEM_TEAM_WORLD, dst, src, NE), 0);                              \
        for (int p = 0; p < npes; p++)                                                         \
            for (int i = 0; i < NE; i++)                                                       \
                ST_CHECK(dst[p * NE + i] == VAL(T, p, me * NE + i));                           \
        shmem_barrier_all();                                                                   \
        for (int i = 0; i < NE * npes * 2 + 1; i++)                                            \
            dst[i] = (T)0;                                                                     \
        shmem_barrier_all();                                                                   \
        ST_EQ(shmem_alltoalls(SHMEM_TEAM_WORLD, dst, src, 2, 1, NE), 0);                       \
        for (int p = 0; p < npes; p++)                                                         \
            for (int i = 0; i < NE; i++) {                                                     \
                ST_CHECK(dst[(p * NE + i) * 2] == VAL(T, p, me * NE + i));                     \
                ST_CHECK(dst[(p * NE + i) * 2 + 1] == (T)0);                                   \
            }                                                                                  \
        shmem_barrier_all();                                                                   \
        shmem_free(src);                                                                       \
        shmem_free(dst);                                                                       \
    }
TEST_MOVE(long double, longdouble)
TEST_MOVE(double, double)
TEST_MOVE(signed char, schar)
TEST_MOVE(unsigned short, ushort)
TEST_MOVE(long long, longlong)

static void test_reduce(void)
{
    long double *ld = shmem_malloc(2 * sizeof(long double));
    char *c = shmem_malloc(2);
    unsigned char *uc = shmem_malloc(2);
    signed char *sc = shmem_malloc(2);
    double _Complex *z = shmem_malloc(2 * sizeof(double _Complex));
    unsigned long *ul = shmem_malloc(2 * sizeof(unsigned long));
    ST_CHECK(ld && c && uc && sc && z && ul);

    /* sum: 1 + npes tiny steps that a double would round away */
    ld[0] = (me == 0 ? 1.0L : 0.0L) + LDBL_EPSILON;
    shmem_barrier_all();
    ST_EQ(shmem_sum_reduce(SHMEM_TEAM_WORLD, ld + 1, ld, 1), 0);
    ST_CHECK(ld[1] == 1.0L + (long double)npes * LDBL_EPSILON);

    /* max of 0x90 and small values: as unsigned char 0x90 wins, as signed
     * char (-112) it loses */
    uc[0] = (unsigned char)(me == 0 ? 0x90 : me);
    sc[0] = (signed char)(me == 0 ? -112 : me);
    shmem_barrier_all();
    ST_EQ(shmem_max_reduce(SHMEM_TEAM_WORLD, uc + 1, uc, 1), 0);
    ST_EQ(uc[1], 0x90);
    ST_EQ(shmem_max_reduce(SHMEM_TEAM_WORLD, sc + 1, sc, 1), 0);
    ST_EQ(sc[1], npes - 1 > 0 ? npes - 1 : -112);
    ST_EQ(shmem_min_reduce(SHMEM_TEAM_WORLD, sc + 1, sc, 1), 0);
    ST_EQ(sc[1], -112);
    c[0] = (char)('a' + me);
    shmem_barrier_all();
    ST_EQ(shmem_max_reduce(SHMEM_TEAM_WORLD, c + 1, c, 1), 0);
    ST_EQ(c[1], 'a' + npes - 1);

    /* bitwise on unsigned long: bits above 32 */
    ul[0] = (1ul << (40 + me)) | 0xff;
    shmem_barrier_all();
    ST_EQ(shmem_or_reduce(SHMEM_TEAM_WORLD, ul + 1, ul, 1), 0);
    ST_CHECK(ul[1] == ((((1ul << npes) - 1) << 40) | 0xff));
    ST_EQ(shmem_and_reduce(SHMEM_TEAM_WORLD, ul + 1, ul, 1), 0);
    ST_CHECK(ul[1] == (npes == 1 ? (1ul << 40) | 0xff : 0xfful));
    ST_EQ(shmem_xor_reduce(SHMEM_TEAM_WORLD, ul + 1, ul, 1), 0);
    ST_CHECK(ul[1] == ((((1ul << npes) - 1) << 40) | (npes % 2 ? 0xfful : 0)));

    /* complex product: i^npes */
    z[0] = I;
    shmem_barrier_all();
    ST_EQ(shmem_prod_reduce(SHMEM_TEAM_WORLD, z + 1, z, 1), 0);
    double _Complex want = 1;
    for (int p = 0; p < npes; p++)
        want *= I;
    ST_CHECK(z[1] == want);
    ST_EQ(shmem_sum_reduce(SHMEM_TEAM_WORLD, z + 1, z, 1), 0);
    ST_CHECK(z[1] == npes * I);

    shmem_barrier_all();
    shmem_free(ld);
    shmem_free(c);
    shmem_free(uc);
    shmem_free(sc);
    shmem_free(z);
    shmem_free(ul);
}

int main(void)
{
    shmem_init();
    me = shmem_my_pe();
    npes = shmem_n_pes();
    test_move_longdouble();
    test_move_double();
    test_move_schar();
    test_move_ushort();
    test_move_longlong();
    ST_OK("generic broadcast/collect/fcollect/alltoall/alltoalls on 5 types");
    test_reduce();
    ST_OK("generic sum/prod/max/min/and/or/xor reductions, long double, chars, complex");
    shmem_finalize();
    return 0;
}
