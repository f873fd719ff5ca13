/* broadcast, collect, fcollect, alltoall and alltoalls on the world team,
 * several types and sizes (0, 1, odd, 100000 elements), against values
 * every PE computes locally; the element after each result must stay
 * untouched. */
#include "shmem_test.h"

#include <stdint.h>
#include <string.h>

/* The value PE p holds at index i (block b for alltoall) */
#define VAL(p, b, i) ((long)(p) * 1000003L + (long)(b) * 7919L + (long)(i) * 7L + 1)
#define SENT 0x5a

static const size_t sizes[] = {0, 1, 7, 100000};
static int me, npes;

/* Elements contributed by PE p to collect (variable, some zero). */
static size_t ccount(int p, size_t n)
{
    return n == 0 ? 0 : (p % 3 == 1 ? 0 : n / (size_t)(p + 1) + (size_t)p);
}

#define CHECK_AT(T, arr, idx, want, what)                                                      \
    do {                                                                                       \
        if ((arr)[idx] != (T)(want))                                                           \
            ST_FAIL("%s: [%zu] is %Lg, expected %Lg", what, (size_t)(idx),                     \
                    (long double)(arr)[idx], (long double)(T)(want));                          \
    } while (0)

#define CHECK_SENT(buf, nbytes, what)                                                          \
    do {                                                                                       \
        if (((unsigned char *)(buf))[nbytes] != SENT)                                          \
            ST_FAIL("%s: the byte after the result was overwritten", what);                    \
    } while (0)

#define COLL_TEST(T, N)                                                                        \
    static void test_##N(size_t n)                                                             \
    {                                                                                          \
        size_t cap = (n ? n : 1) * (size_t)npes * 2;                                           \
        T *src = shmem_malloc(cap * sizeof(T));                                                \
        T *dst = shmem_malloc(cap * sizeof(T) + 1);                                            \
        ST_CHECK(src && dst);                                                                  \
        /* broadcast from the first and the last PE */                                         \
        for (int root = 0; root < npes; root += (npes > 1 ? npes - 1 : 1)) {                   \
            for (size_t i = 0; i < cap; i++) /* collect reads past n */                        \
                src[i] = (T)VAL(me, 0, i);                                                     \
            memset(dst, SENT, n * sizeof(T) + 1);                                              \
            shmem_barrier_all();                                                               \
            ST_EQ(shmem_##N##_broadcast(SHMEM_TEAM_WORLD, dst, src, n, root), 0);              \
            for (size_t i = 0; i < n; i++)                                                     \
                CHECK_AT(T, dst, i, VAL(root, 0, i), #N " broadcast");                         \
            CHECK_SENT(dst, n * sizeof(T), #N " broadcast");                                   \
            if (npes == 1)                                                                     \
                break;                                                                         \
        }                                                                                      \
        /* fcollect */                                                                         \
        memset(dst, SENT, n * (size_t)npes * sizeof(T) + 1);                                   \
        shmem_barrier_all();                                                                   \
        ST_EQ(shmem_##N##_fcollect(SHMEM_TEAM_WORLD, dst, src, n), 0);                         \
        for (int p = 0; p < npes; p++)                                                         \
            for (size_t i = 0; i < n; i++)                                                     \
                CHECK_AT(T, dst, (size_t)p * n + i, VAL(p, 0, i), #N " fcollect");             \
        CHECK_SENT(dst, n * (size_t)npes * sizeof(T), #N " fcollect");                         \
        /* collect: PE p brings ccount(p, n) elements */                                       \
        size_t tot = 0;                                                                        \
        for (int p = 0; p < npes; p++)                                                         \
            tot += ccount(p, n);                                                               \
        memset(dst, SENT, tot * sizeof(T) + 1);                                                \
        shmem_barrier_all();                                                                   \
        ST_EQ(shmem_##N##_collect(SHMEM_TEAM_WORLD, dst, src, ccount(me, n)), 0);              \
        for (size_t p = 0, at = 0; p < (size_t)npes; at += ccount((int)p, n), p++)             \
            for (size_t i = 0; i < ccount((int)p, n); i++)                                     \
                CHECK_AT(T, dst, at + i, VAL(p, 0, i), #N " collect");                         \
        CHECK_SENT(dst, tot * sizeof(T), #N " collect");                                       \
        /* alltoall: block b of PE p's source goes to block p of PE b's dest */                \
        for (int b = 0; b < npes; b++)                                                         \
            for (size_t i = 0; i < n; i++)                                                     \
                src[(size_t)b * n + i] = (T)VAL(me, b, i);                                     \
        memset(dst, SENT, n * (size_t)npes * sizeof(T) + 1);                                   \
        shmem_barrier_all();                                                                   \
        ST_EQ(shmem_##N##_alltoall(SHMEM_TEAM_WORLD, dst, src, n), 0);                         \
        for (int p = 0; p < npes; p++)                                                         \
            for (size_t i = 0; i < n; i++)                                                     \
                CHECK_AT(T, dst, (size_t)p * n + i, VAL(p, me, i), #N " alltoall");            \
        CHECK_SENT(dst, n * (size_t)npes * sizeof(T), #N " alltoall");                         \
        /* alltoalls, dest stride 2 and source stride 1 (sizes that fit) */                    \
        if (n <= 7) {                                                                          \
            memset(dst, SENT, cap * sizeof(T) + 1);                                            \
            shmem_barrier_all();                                                               \
            ST_EQ(shmem_##N##_alltoalls(SHMEM_TEAM_WORLD, dst, src, 2, 1, n), 0);              \
            for (int p = 0; p < npes; p++)                                                     \
                for (size_t i = 0; i < n; i++)                                                 \
                    CHECK_AT(T, dst, ((size_t)p * n + i) * 2, VAL(p, me, i), #N " alltoalls"); \
            for (size_t i = 0; i + 1 < (size_t)npes * n * 2; i += 2)                           \
                if (((unsigned char *)&dst[i + 1])[0] != SENT)                                 \
                    ST_FAIL(#N " alltoalls wrote between strided elements (%zu)", i + 1);      \
        }                                                                                      \
        shmem_barrier_all();                                                                   \
        shmem_free(dst);                                                                       \
        shmem_free(src);                                                                       \
    }

COLL_TEST(int, int)
COLL_TEST(long, long)
COLL_TEST(double, double)
COLL_TEST(long double, longdouble)
COLL_TEST(char, char)
COLL_TEST(uint16_t, uint16)
COLL_TEST(size_t, size)

/* alltoalls with a source stride: PE p's element i of block b sits at
 * source[(b * n + i) * 3]. */
static void test_alltoalls_sst(void)
{
    size_t n = 5;
    long *src = shmem_malloc((size_t)npes * n * 3 * sizeof(long));
    long *dst = shmem_malloc((size_t)npes * n * sizeof(long));
    for (int b = 0; b < npes; b++)
        for (size_t i = 0; i < n; i++)
            src[((size_t)b * n + i) * 3] = VAL(me, b, i);
    shmem_barrier_all();
    ST_EQ(shmem_long_alltoalls(SHMEM_TEAM_WORLD, dst, src, 1, 3, n), 0);
    for (int p = 0; p < npes; p++)
        for (size_t i = 0; i < n; i++)
            CHECK_AT(long, dst, (size_t)p * n + i, VAL(p, me, i), "long alltoalls sst 3");
    shmem_barrier_all();
    shmem_free(dst);
    shmem_free(src);
}

/* The *mem forms count bytes. */
static void test_mem(void)
{
    size_t n = 13;
    unsigned char *src = shmem_malloc(n * (size_t)npes);
    unsigned char *dst = shmem_malloc(n * (size_t)npes + 1);
    for (size_t i = 0; i < n * (size_t)npes; i++)
        src[i] = (unsigned char)(me * 31 + (int)i);
    memset(dst, SENT, n * (size_t)npes + 1);
    shmem_barrier_all();
    ST_EQ(shmem_broadcastmem(SHMEM_TEAM_WORLD, dst, src, n, npes - 1), 0);
    for (size_t i = 0; i < n; i++)
        ST_EQ(dst[i], (unsigned char)((npes - 1) * 31 + (int)i));
    ST_EQ(dst[n], SENT);
    ST_EQ(shmem_fcollectmem(SHMEM_TEAM_WORLD, dst, src, n), 0);
    for (int p = 0; p < npes; p++)
        for (size_t i = 0; i < n; i++)
            ST_EQ(dst[(size_t)p * n + i], (unsigned char)(p * 31 + (int)i));
    ST_EQ(shmem_collectmem(SHMEM_TEAM_WORLD, dst, src, n), 0);
    for (int p = 0; p < npes; p++)
        for (size_t i = 0; i < n; i++)
            ST_EQ(dst[(size_t)p * n + i], (unsigned char)(p * 31 + (int)i));
    ST_EQ(shmem_alltoallmem(SHMEM_TEAM_WORLD, dst, src, n), 0);
    for (int p = 0; p < npes; p++)
        for (size_t i = 0; i < n; i++)
            ST_EQ(dst[(size_t)p * n + i], (unsigned char)(p * 31 + me * (int)n + (int)i));
    ST_EQ(shmem_alltoallsmem(SHMEM_TEAM_WORLD, dst, src, 1, 1, n), 0);
    for (int p = 0; p < npes; p++)
        for (size_t i = 0; i < n; i++)
            ST_EQ(dst[(size_t)p * n + i], (unsigned char)(p * 31 + me * (int)n + (int)i));
    shmem_barrier_all();
    shmem_free(dst);
    shmem_free(src);
}

/* Static (non-heap) symmetric data is reached as well. */
static long sdst[64], ssrc[16];

static void test_static(void)
{
    for (int i = 0; i < 16; i++)
        ssrc[i] = VAL(me, 0, i);
    shmem_barrier_all();
    ST_EQ(shmem_long_fcollect(SHMEM_TEAM_WORLD, sdst, ssrc, 16 / (size_t)npes), 0);
    for (int p = 0; p < npes; p++)
        for (size_t i = 0; i < 16 / (size_t)npes; i++)
            CHECK_AT(long, sdst, (size_t)p * (16 / (size_t)npes) + i, VAL(p, 0, i),
                     "fcollect of static data");
}

int main(void)
{
    shmem_init();
    me = shmem_my_pe();
    npes = shmem_n_pes();
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t n = sizes[k];
        test_int(n);
        test_long(n);
        test_double(n);
        test_longdouble(n);
        test_char(n);
        test_uint16(n);
        test_size(n);
        char what[80];
        snprintf(what, sizeof(what), "broadcast/collect/fcollect/alltoall(s) of %zu elements", n);
        ST_OK(what);
    }
    test_alltoalls_sst();
    ST_OK("alltoalls with a source stride");
    test_mem();
    ST_OK("the *mem forms");
    test_static();
    ST_OK("collectives on static data");
    shmem_finalize();
    return 0;
}
