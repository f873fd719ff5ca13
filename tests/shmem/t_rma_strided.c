/* Strided and single-element RMA: iput/iget (typed, sized, ctx) with
 * strides 1 and > 1 on each side, and p/g on several types, heap and
 * static. Each PE writes to its right neighbour; elements between the
 * strided ones must stay untouched.
 */
#include "shmem_test.h"

#include <float.h>
#include <stdint.h>
#include <string.h>

#define N 50
#define SPAN (N * 4 + 4)

static int me, npes, right, left;
static long double s_ld[4];
static int8_t s_i8[SPAN];

#define VAL(T, pe, i) ((T)(((pe) * 13 + (i) * 3) % 100 + 1))

/* iput with (dst stride, src stride), then iget back with the strides
 * swapped: the data lands where the strides say, nothing between. */
#define TEST_STRIDED(T, NAME)                                                                  \
    static void test_strided_##NAME(T *heap, ptrdiff_t dst_st, ptrdiff_t src_st, int ctxform)  \
    {                                                                                          \
        T src[SPAN], back[SPAN];                                                               \
        const T fill = (T)111;                                                                 \
        for (size_t i = 0; i < SPAN; i++) {                                                    \
            src[i] = VAL(T, me, i);                                                            \
            heap[i] = fill;                                                                    \
            back[i] = fill;                                                                    \
        }                                                                                      \
        shmem_barrier_all();                                                                   \
        if (ctxform)                                                                           \
            shmem_ctx_##NAME##_iput(SHMEM_CTX_DEFAULT, heap, src, dst_st, src_st, N, right);  \
        else                                                                                   \
            shmem_##NAME##_iput(heap, src, dst_st, src_st, N, right);                          \
        shmem_barrier_all();                                                                   \
        for (size_t i = 0; i < SPAN; i++) {                                                    \
            int hit = i % (size_t)dst_st == 0 && i / (size_t)dst_st < N;                       \
            T want = hit ? VAL(T, left, (i / (size_t)dst_st) * (size_t)src_st) : fill;         \
            if (heap[i] != want)                                                               \
                ST_FAIL(#NAME " iput strides %td %td: element %zu wrong", dst_st, src_st, i);  \
        }                                                                                      \
        /* read the right PE's strided elements (my src values) back dense-ish */              \
        if (ctxform)                                                                           \
            shmem_ctx_##NAME##_iget(SHMEM_CTX_DEFAULT, back, heap, src_st, dst_st, N, right);  \
        else                                                                                   \
            shmem_##NAME##_iget(back, heap, src_st, dst_st, N, right);                         \
        for (size_t i = 0; i < SPAN; i++) {                                                    \
            int hit = i % (size_t)src_st == 0 && i / (size_t)src_st < N;                       \
            T want = hit ? src[i] : fill;                                                      \
            if (back[i] != want)                                                               \
                ST_FAIL(#NAME " iget strides %td %td: element %zu wrong", src_st, dst_st, i);  \
        }                                                                                      \
        shmem_barrier_all();                                                                   \
    }
TEST_STRIDED(int, int)
TEST_STRIDED(long double, longdouble)
TEST_STRIDED(size_t, size)
TEST_STRIDED(int8_t, int8)

static void test_strided(void)
{
    static const ptrdiff_t st[][2] = {{1, 1}, {1, 3}, {4, 1}, {2, 3}};
    void *heap = shmem_malloc(SPAN * sizeof(long double));
    ST_CHECK(heap != NULL);
    for (int k = 0; k < 4; k++)
        for (int c = 0; c < 2; c++) {
            test_strided_int(heap, st[k][0], st[k][1], c);
            test_strided_longdouble(heap, st[k][0], st[k][1], c);
            test_strided_size(heap, st[k][0], st[k][1], c);
            test_strided_int8(heap, st[k][0], st[k][1], c);
            test_strided_int8(s_i8, st[k][0], st[k][1], c);
        }
    shmem_free(heap);
    ST_OK("typed iput/iget, strides 1/1 1/3 4/1 2/3, heap and static, ctx forms");
}

/* Sized iput/iget: 16-byte elements with stride 2 carry all 16 bytes. */
static void test_strided_sized(void)
{
    unsigned char *heap = shmem_malloc(16 * 2 * 8 + 16);
    unsigned char src[16 * 8], back[16 * 2 * 8 + 16];
    ST_CHECK(heap != NULL);
#define SZ(B)                                                                                  \
    do {                                                                                       \
        size_t e = (B) / 8;                                                                    \
        for (size_t i = 0; i < sizeof src; i++)                                                \
            src[i] = (unsigned char)(me * 17 + i);                                             \
        memset(heap, 0xcc, 16 * 2 * 8 + 16);                                                   \
        shmem_barrier_all();                                                                   \
        shmem_iput##B(heap, src, 2, 1, 8, right);                                              \
        shmem_barrier_all();                                                                   \
        for (size_t k = 0; k < 16; k++)                                                        \
            for (size_t b = 0; b < e; b++) {                                                   \
                unsigned char want = k % 2 == 0 && k / 2 < 8                                   \
                                         ? (unsigned char)(left * 17 + (k / 2) * e + b)        \
                                         : 0xcc;                                               \
                ST_EQ(heap[k * e + b], want);                                                  \
            }                                                                                  \
        memset(back, 0x33, sizeof back);                                                       \
        shmem_iget##B(back, heap, 1, 2, 8, right);                                             \
        ST_CHECK(memcmp(back, src, 8 * e) == 0);                                               \
        ST_EQ(back[8 * e], 0x33);                                                              \
        memset(back, 0x33, sizeof back);                                                       \
        shmem_ctx_iget##B(SHMEM_CTX_DEFAULT, back, heap, 1, 2, 8, right);                      \
        ST_CHECK(memcmp(back, src, 8 * e) == 0);                                               \
        shmem_barrier_all();                                                                   \
    } while (0)
    SZ(8);
    SZ(16);
    SZ(32);
    SZ(64);
    SZ(128);
#undef SZ
    shmem_free(heap);
    ST_OK("sized iput/iget 8 16 32 64 128");
}

/* p and g: single elements, typed, heap and static, ctx forms. */
static void test_pg(void)
{
    long double *ld = shmem_malloc(4 * sizeof(long double));
    int8_t *i8 = shmem_malloc(4);
    size_t *sz = shmem_malloc(4 * sizeof(size_t));
    double *d = shmem_malloc(4 * sizeof(double));
    ST_CHECK(ld && i8 && sz && d);
    for (int i = 0; i < 4; i++) {
        ld[i] = s_ld[i] = 0;
        i8[i] = 0;
        sz[i] = 0;
        d[i] = 0;
    }
    shmem_barrier_all();
    long double ldv = 1.0L + (long double)me * LDBL_EPSILON;
    shmem_longdouble_p(&ld[1], ldv, right);
    shmem_ctx_longdouble_p(SHMEM_CTX_DEFAULT, &s_ld[2], ldv * 2, right);
    shmem_int8_p(&i8[1], (int8_t)(-1 - me), right);
    shmem_size_p(&sz[1], (size_t)1 << 40 | (size_t)me, right);
    shmem_ctx_double_p(SHMEM_CTX_DEFAULT, &d[1], 0.5 + me, right);
    shmem_barrier_all();
    long double ldl = 1.0L + (long double)left * LDBL_EPSILON;
    ST_CHECK(ld[1] == ldl && ld[0] == 0 && ld[2] == 0);
    ST_CHECK(s_ld[2] == ldl * 2 && s_ld[1] == 0 && s_ld[3] == 0);
    ST_EQ(i8[1], -1 - left);
    ST_EQ(i8[0], 0);
    ST_EQ(i8[2], 0);
    ST_EQ(sz[1], (size_t)1 << 40 | (size_t)left);
    ST_EQ(sz[2], 0);
    ST_CHECK(d[1] == 0.5 + left && d[2] == 0);

    ST_CHECK(shmem_longdouble_g(&ld[1], right) == ldv);
    ST_CHECK(shmem_ctx_longdouble_g(SHMEM_CTX_DEFAULT, &s_ld[2], right) == ldv * 2);
    ST_EQ(shmem_int8_g(&i8[1], right), -1 - me);
    ST_EQ(shmem_size_g(&sz[1], right), (size_t)1 << 40 | (size_t)me);
    ST_CHECK(shmem_ctx_double_g(SHMEM_CTX_DEFAULT, &d[1], right) == 0.5 + me);
    ST_EQ(shmem_ctx_int8_g(SHMEM_CTX_INVALID, &i8[1], right), 0);
    shmem_ctx_int8_p(SHMEM_CTX_INVALID, &i8[2], 9, right);
    shmem_barrier_all();
    ST_EQ(i8[2], 0);
    shmem_barrier_all();
    shmem_free(ld);
    shmem_free(i8);
    shmem_free(sz);
    shmem_free(d);
    ST_OK("p/g long double int8 size double, heap and static, ctx forms");
}

int main(void)
{
    shmem_init();
    me = shmem_my_pe();
    npes = shmem_n_pes();
    right = (me + 1) % npes;
    left = (me + npes - 1) % npes;
    test_strided();
    test_strided_sized();
    test_pg();
    shmem_finalize();
    return 0;
}
