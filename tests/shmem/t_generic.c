/* C11 generic RMA interfaces (shmem_generic.h): shmem_put, get, p, g,
 * iput, iget, put_nbi, get_nbi, put_signal, put_signal_nbi, with and
 * without a ctx. Each call must reach the routine of the argument's type:
 * the compile-time checks fail if a selection returns another type, and
 * the run-time checks fail if a routine of another element size moved the
 * data (wrong values, or the element past the end written). long double
 * and double, char and signed char, long and long long are all told apart.
 */
#include "shmem_test.h"

#include <float.h>
#include <stdint.h>
#include <string.h>

#define N 9

static int me, npes, right, left;

/* The generic selection's result type is the type's own. */
#define SAME(e, T) _Static_assert(_Generic((e), T: 1, default: 0), #e " has type " #T)
static long double *g_ld;
static const long double *g_cld;
static signed char *g_sc;
static unsigned long long *g_ull;
SAME(shmem_g(g_ld, 0), long double);
SAME(shmem_g(g_cld, 0), long double);
SAME(shmem_g(SHMEM_CTX_DEFAULT, g_ld, 0), long double);
SAME(shmem_g(g_sc, 0), signed char);
SAME(shmem_g(SHMEM_CTX_DEFAULT, g_ull, 0), unsigned long long);
SAME(shmem_g((char *)0, 0), char);
SAME(shmem_g((float *)0, 0), float);
SAME(shmem_g((long *)0, 0), long);
SAME(shmem_g((long long *)0, 0), long long);

/* A value of element i from PE pe that every type holds exactly, with a
 * fraction for the floating types so a conversion to an integer type
 * would show; long double gets bits that a double cannot hold. */
#define VAL(T, pe, i)                                                                          \
    ((T)((pe) * 10 + (i) + 1) + (T)_Generic((T)0, float: 0.5, double: 0.25,                     \
                                             long double: 0.125 + 2 * LDBL_EPSILON,            \
                                             default: 0))

#define TEST_GENERIC(T, NAME)                                                                  \
    static void test_##NAME(shmem_ctx_t ctx)                                                   \
    {                                                                                          \
        T *dst = shmem_malloc(4 * (N + 1) * sizeof(T));                                        \
        uint64_t *sig = shmem_malloc(sizeof(uint64_t));                                        \
        T src[2 * N + 1], back[2 * N + 1];                                                     \
        const T fill = (T)77;                                                                  \
        ST_CHECK(dst != NULL && sig != NULL);                                                  \
        for (int i = 0; i < 2 * N + 1; i++)                                                    \
            src[i] = VAL(T, me, i);                                                            \
        for (int i = 0; i < 4 * (N + 1); i++)                                                  \
            dst[i] = fill;                                                                     \
        *sig = 0;                                                                              \
        shmem_barrier_all();                                                                   \
        T *a = dst, *b = dst + (N + 1), *c = dst + 2 * (N + 1), *d = dst + 3 * (N + 1);        \
        shmem_put(a, src, N, right);                                                           \
        shmem_put(ctx, b, src, N, right);                                                      \
        shmem_put_nbi(c, src, 1, right);                                                       \
        shmem_put_nbi(ctx, c + 1, src + 1, 1, right);                                          \
        shmem_p(c + 2, src[2], right);                                                         \
        shmem_p(ctx, c + 3, src[3], right);                                                    \
        shmem_iput(c + 4, src + 4, 1, 2, 2, right);                                            \
        shmem_iput(ctx, c + 6, src + 8, 1, 1, 1, right);                                       \
        shmem_put_signal(d, src, 3, sig, 1, SHMEM_SIGNAL_ADD, right);                          \
        shmem_put_signal(ctx, d + 3, src + 3, 2, sig, 1, SHMEM_SIGNAL_ADD, right);             \
        shmem_put_signal_nbi(d + 5, src + 5, 2, sig, 1, SHMEM_SIGNAL_ADD, right);              \
        shmem_put_signal_nbi(ctx, d + 7, src + 7, 2, sig, 1, SHMEM_SIGNAL_ADD, right);         \
        shmem_quiet();                                                                         \
        shmem_ctx_quiet(ctx);                                                                  \
        shmem_barrier_all();                                                                   \
        ST_EQ(*sig, 4);                                                                        \
        for (int i = 0; i < N; i++) {                                                          \
            int j = i < 4 ? i : i < 6 ? 4 + 2 * (i - 4) : i == 6 ? 8 : -1;                     \
            ST_CHECK(a[i] == VAL(T, left, i));                                                 \
            ST_CHECK(b[i] == VAL(T, left, i));                                                 \
            ST_CHECK(d[i] == VAL(T, left, i));                                                 \
            ST_CHECK(c[i] == (j < 0 ? fill : VAL(T, left, j)));                                \
        }                                                                                      \
        ST_CHECK(a[N] == fill && b[N] == fill && c[N] == fill && d[N] == fill);                \
        /* read back what I wrote to the right */                                              \
        for (int i = 0; i < 2 * N + 1; i++)                                                    \
            back[i] = fill;                                                                    \
        shmem_get(back, a, N, right);                                                          \
        for (int i = 0; i < N; i++)                                                            \
            ST_CHECK(back[i] == src[i]);                                                       \
        ST_CHECK(back[N] == fill);                                                             \
        shmem_get(ctx, back, b, 2, right);                                                     \
        shmem_get_nbi(back + 2, b + 2, 1, right);                                              \
        shmem_get_nbi(ctx, back + 3, b + 3, 1, right);                                         \
        shmem_quiet();                                                                         \
        shmem_ctx_quiet(ctx);                                                                  \
        back[4] = shmem_g(b + 4, right);                                                       \
        back[5] = shmem_g(ctx, (const T *)b + 5, right);                                       \
        shmem_iget(back + 6, b + 6, 2, 2, 2, right);                                           \
        shmem_iget(ctx, back + 7, b + 7, 1, 1, 1, right);                                      \
        for (int i = 0; i < N; i++)                                                            \
            ST_CHECK(back[i] == src[i]);                                                       \
        ST_CHECK(back[N] == fill && back[N + 1] == fill);                                      \
        shmem_barrier_all();                                                                   \
        shmem_free(dst);                                                                       \
        shmem_free(sig);                                                                       \
    }

#define TYPES(X)                                                                               \
    X(float, float)                                                                            \
    X(double, double)                                                                          \
    X(long double, longdouble)                                                                 \
    X(char, char)                                                                              \
    X(signed char, schar)                                                                      \
    X(short, short)                                                                            \
    X(int, int)                                                                                \
    X(long, long)                                                                              \
    X(long long, longlong)                                                                     \
    X(unsigned char, uchar)                                                                    \
    X(unsigned short, ushort)                                                                  \
    X(unsigned int, uint)                                                                      \
    X(unsigned long, ulong)                                                                    \
    X(unsigned long long, ulonglong)                                                           \
    X(int8_t, int8)                                                                            \
    X(uint32_t, uint32)                                                                        \
    X(size_t, size)                                                                            \
    X(ptrdiff_t, ptrdiff)
TYPES(TEST_GENERIC)

int main(void)
{
    shmem_init();
    me = shmem_my_pe();
    npes = shmem_n_pes();
    right = (me + 1) % npes;
    left = (me + npes - 1) % npes;
    shmem_ctx_t ctx;
    ST_EQ(shmem_ctx_create(0, &ctx), 0);
#define RUN(T, NAME)                                                                           \
    test_##NAME(SHMEM_CTX_DEFAULT);                                                            \
    test_##NAME(ctx);
    TYPES(RUN)
    shmem_ctx_destroy(ctx);
    ST_OK("generic put/get/p/g/iput/iget/nbi/put_signal on 18 types, with and without ctx");
    shmem_finalize();
    return 0;
}
