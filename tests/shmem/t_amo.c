/* Every OpenSHMEM atomic on every type of its table, checked against plain C
 * on the same type: fetch, set, swap (+ nbi) on the standard and extended
 * types (float and double bit for bit: NaN payloads, -0.0, denormals),
 * compare_swap, fetch_inc, inc, fetch_add, add (+ fetching nbi) on the
 * standard ones, and/or/xor (+ fetch, + nbi) on the bitwise ones, each in its
 * default and context form, and the deprecated names.
 *
 * Each PE works on its own word on a target PE (itself, its neighbour, and
 * with 4 PEs the one two places on, which is on the same host when the job
 * spans two hosts), framed by guard words the owner checks at the end: an
 * atomic of the wrong size or at the wrong place changes a guard. Values
 * are the edge values of tests/atomic_ref.h cast to each type. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "atomic_ref.h"
#include "shmem_test.h"

#define SLOT 4 /* T per PE: guard, word, guard, guard */
#define GUARD 0xa5

static shmem_ctx_t ctx;
static int me, npes;

/* Values of an integer type T: every edge value, and a partner for each. */
static int int_values(uint64_t *v)
{
    return ref_values(8, v);
}

/* Equal as bits (floats: NaN == NaN of the same payload, -0.0 != +0.0). */
#define SAME(T, a, b) (memcmp(&(T){a}, &(T){b}, sizeof(T)) == 0)

#define CHECK_SAME(T, what, got, want, i)                                                      \
    do {                                                                                       \
        T g_ = (got), w_ = (want);                                                             \
        if (!SAME(T, g_, w_)) {                                                                \
            uint64_t gb_ = 0, wb_ = 0;                                                         \
            memcpy(&gb_, &g_, sizeof(T));                                                      \
            memcpy(&wb_, &w_, sizeof(T));                                                      \
            ST_FAIL("%s %s (value #%d, target %d): got bits 0x%llx, expected 0x%llx", #T,      \
                    what, i, tgt, (unsigned long long)gb_, (unsigned long long)wb_);           \
        }                                                                                      \
    } while (0)

/* fetch/set/swap (+nbi, + ctx) with value pair (a, b) on word @w of PE tgt. */
#define TEST_EXT(T, N)                                                                         \
    static void ext_##N(T *w, int tgt, T a, T b, int i)                                        \
    {                                                                                          \
        T f;                                                                                   \
        shmem_##N##_atomic_set(w, a, tgt);                                                     \
        CHECK_SAME(T, "set/fetch", shmem_##N##_atomic_fetch(w, tgt), a, i);                    \
        CHECK_SAME(T, "swap", shmem_##N##_atomic_swap(w, b, tgt), a, i);                       \
        CHECK_SAME(T, "ctx_fetch", shmem_ctx_##N##_atomic_fetch(ctx, w, tgt), b, i);           \
        shmem_ctx_##N##_atomic_set(ctx, w, a, tgt);                                            \
        CHECK_SAME(T, "ctx_swap", shmem_ctx_##N##_atomic_swap(ctx, w, b, tgt), a, i);          \
        shmem_##N##_atomic_swap_nbi(&f, w, a, tgt);                                            \
        shmem_quiet();                                                                         \
        CHECK_SAME(T, "swap_nbi", f, b, i);                                                    \
        shmem_##N##_atomic_fetch_nbi(&f, w, tgt);                                              \
        shmem_quiet();                                                                         \
        CHECK_SAME(T, "fetch_nbi", f, a, i);                                                   \
        shmem_ctx_##N##_atomic_swap_nbi(ctx, &f, w, b, tgt);                                   \
        shmem_ctx_quiet(ctx);                                                                  \
        CHECK_SAME(T, "ctx_swap_nbi", f, a, i);                                                \
        shmem_ctx_##N##_atomic_fetch_nbi(ctx, &f, w, tgt);                                     \
        shmem_ctx_quiet(ctx);                                                                  \
        CHECK_SAME(T, "ctx_fetch_nbi", f, b, i);                                               \
    }
VSHMEM_AMO_TYPES(TEST_EXT)
VSHMEM_AMO_EXT_TYPES(TEST_EXT)

/* Plain C on T, wrapping as the standard's atomics do. */
#define ADD(T, a, b) ((T)((uint64_t)(a) + (uint64_t)(b)))

#define TEST_STD(T, N)                                                                         \
    static void std_##N(T *w, int tgt, T a, T b, int i)                                        \
    {                                                                                          \
        T f, cur = a;                                                                          \
        shmem_##N##_atomic_set(w, a, tgt);                                                     \
        /* compare_swap: a failing one changes nothing; a matching one swaps. */              \
        if (a != b) {                                                                          \
            CHECK_SAME(T, "cswap miss", shmem_##N##_atomic_compare_swap(w, b, b, tgt), a, i);  \
            CHECK_SAME(T, "cswap miss left", shmem_##N##_atomic_fetch(w, tgt), a, i);          \
        }                                                                                      \
        CHECK_SAME(T, "cswap hit", shmem_##N##_atomic_compare_swap(w, a, b, tgt), a, i);       \
        cur = b;                                                                               \
        CHECK_SAME(T, "ctx cswap", shmem_ctx_##N##_atomic_compare_swap(ctx, w, b, a, tgt),     \
                   cur, i);                                                                    \
        cur = a;                                                                               \
        shmem_##N##_atomic_compare_swap_nbi(&f, w, a, b, tgt);                                 \
        shmem_quiet();                                                                         \
        CHECK_SAME(T, "cswap_nbi", f, cur, i);                                                 \
        cur = b;                                                                               \
        shmem_ctx_##N##_atomic_compare_swap_nbi(ctx, &f, w, b, a, tgt);                        \
        shmem_ctx_quiet(ctx);                                                                  \
        CHECK_SAME(T, "ctx cswap_nbi", f, cur, i);                                             \
        cur = a;                                                                               \
        /* fetch_add, add, fetch_inc, inc and their ctx and nbi forms. */                     \
        CHECK_SAME(T, "fetch_add", shmem_##N##_atomic_fetch_add(w, b, tgt), cur, i);           \
        cur = ADD(T, cur, b);                                                                  \
        shmem_##N##_atomic_add(w, b, tgt);                                                     \
        cur = ADD(T, cur, b);                                                                  \
        CHECK_SAME(T, "add", shmem_##N##_atomic_fetch(w, tgt), cur, i);                        \
        CHECK_SAME(T, "ctx fetch_add", shmem_ctx_##N##_atomic_fetch_add(ctx, w, a, tgt), cur,  \
                   i);                                                                         \
        cur = ADD(T, cur, a);                                                                  \
        shmem_ctx_##N##_atomic_add(ctx, w, a, tgt);                                            \
        cur = ADD(T, cur, a);                                                                  \
        CHECK_SAME(T, "fetch_inc", shmem_##N##_atomic_fetch_inc(w, tgt), cur, i);              \
        cur = ADD(T, cur, 1);                                                                  \
        shmem_##N##_atomic_inc(w, tgt);                                                        \
        cur = ADD(T, cur, 1);                                                                  \
        CHECK_SAME(T, "ctx fetch_inc", shmem_ctx_##N##_atomic_fetch_inc(ctx, w, tgt), cur, i); \
        cur = ADD(T, cur, 1);                                                                  \
        shmem_ctx_##N##_atomic_inc(ctx, w, tgt);                                               \
        cur = ADD(T, cur, 1);                                                                  \
        shmem_##N##_atomic_fetch_inc_nbi(&f, w, tgt);                                          \
        shmem_quiet();                                                                         \
        CHECK_SAME(T, "fetch_inc_nbi", f, cur, i);                                             \
        cur = ADD(T, cur, 1);                                                                  \
        shmem_ctx_##N##_atomic_fetch_inc_nbi(ctx, &f, w, tgt);                                 \
        shmem_ctx_quiet(ctx);                                                                  \
        CHECK_SAME(T, "ctx fetch_inc_nbi", f, cur, i);                                         \
        cur = ADD(T, cur, 1);                                                                  \
        shmem_##N##_atomic_fetch_add_nbi(&f, w, b, tgt);                                       \
        shmem_quiet();                                                                         \
        CHECK_SAME(T, "fetch_add_nbi", f, cur, i);                                             \
        cur = ADD(T, cur, b);                                                                  \
        shmem_ctx_##N##_atomic_fetch_add_nbi(ctx, &f, w, a, tgt);                              \
        shmem_ctx_quiet(ctx);                                                                  \
        CHECK_SAME(T, "ctx fetch_add_nbi", f, cur, i);                                         \
        cur = ADD(T, cur, a);                                                                  \
        CHECK_SAME(T, "final", shmem_##N##_atomic_fetch(w, tgt), cur, i);                      \
    }
VSHMEM_AMO_TYPES(TEST_STD)

#define TEST_BIT1(T, N, OP, C_OP)                                                              \
    shmem_##N##_atomic_set(w, a, tgt);                                                         \
    CHECK_SAME(T, "fetch_" #OP, shmem_##N##_atomic_fetch_##OP(w, b, tgt), a, i);               \
    cur = (T)(a C_OP b);                                                                       \
    CHECK_SAME(T, #OP " result", shmem_##N##_atomic_fetch(w, tgt), cur, i);                    \
    shmem_##N##_atomic_##OP(w, (T)~b, tgt);                                                    \
    cur = (T)(cur C_OP(T) ~b);                                                                 \
    CHECK_SAME(T, #OP, shmem_##N##_atomic_fetch(w, tgt), cur, i);                              \
    CHECK_SAME(T, "ctx fetch_" #OP, shmem_ctx_##N##_atomic_fetch_##OP(ctx, w, a, tgt), cur,    \
               i);                                                                             \
    cur = (T)(cur C_OP a);                                                                     \
    shmem_ctx_##N##_atomic_##OP(ctx, w, b, tgt);                                               \
    cur = (T)(cur C_OP b);                                                                     \
    shmem_##N##_atomic_fetch_##OP##_nbi(&f, w, a, tgt);                                        \
    shmem_quiet();                                                                             \
    CHECK_SAME(T, "fetch_" #OP "_nbi", f, cur, i);                                             \
    cur = (T)(cur C_OP a);                                                                     \
    shmem_ctx_##N##_atomic_fetch_##OP##_nbi(ctx, &f, w, (T)~a, tgt);                           \
    shmem_ctx_quiet(ctx);                                                                      \
    CHECK_SAME(T, "ctx fetch_" #OP "_nbi", f, cur, i);                                         \
    cur = (T)(cur C_OP(T) ~a);                                                                 \
    CHECK_SAME(T, #OP " final", shmem_##N##_atomic_fetch(w, tgt), cur, i);

#define TEST_BIT(T, N)                                                                         \
    static void bit_##N(T *w, int tgt, T a, T b, int i)                                        \
    {                                                                                          \
        T f, cur;                                                                              \
        TEST_BIT1(T, N, and, &)                                                                \
        TEST_BIT1(T, N, or, |)                                                                 \
        TEST_BIT1(T, N, xor, ^)                                                                \
    }
VSHMEM_AMO_BIT_TYPES(TEST_BIT)

/* The 1.3 names on int, long, long long (and swap/fetch/set on float and double). */
#define TEST_OLD(T, N)                                                                         \
    static void old_##N(T *w, int tgt, T a, T b, int i)                                        \
    {                                                                                          \
        shmem_##N##_set(w, a, tgt);                                                            \
        CHECK_SAME(T, "old fetch", shmem_##N##_fetch(w, tgt), a, i);                           \
        CHECK_SAME(T, "old swap", shmem_##N##_swap(w, b, tgt), a, i);                          \
        CHECK_SAME(T, "old cswap", shmem_##N##_cswap(w, b, a, tgt), b, i);                     \
        CHECK_SAME(T, "old fadd", shmem_##N##_fadd(w, b, tgt), a, i);                          \
        T cur = ADD(T, a, b);                                                                  \
        shmem_##N##_add(w, b, tgt);                                                            \
        cur = ADD(T, cur, b);                                                                  \
        CHECK_SAME(T, "old finc", shmem_##N##_finc(w, tgt), cur, i);                           \
        cur = ADD(T, cur, 1);                                                                  \
        shmem_##N##_inc(w, tgt);                                                               \
        cur = ADD(T, cur, 1);                                                                  \
        CHECK_SAME(T, "old add/inc", shmem_##N##_fetch(w, tgt), cur, i);                       \
    }
VSHMEM_OLD_AMO_TYPES(TEST_OLD)

#define TEST_OLD_FP(T, N)                                                                      \
    static void oldfp_##N(T *w, int tgt, T a, T b, int i)                                      \
    {                                                                                          \
        shmem_##N##_set(w, a, tgt);                                                            \
        CHECK_SAME(T, "old fetch", shmem_##N##_fetch(w, tgt), a, i);                           \
        CHECK_SAME(T, "old swap", shmem_##N##_swap(w, b, tgt), a, i);                          \
        CHECK_SAME(T, "old swap'", shmem_##N##_fetch(w, tgt), b, i);                           \
    }
VSHMEM_AMO_EXT_TYPES(TEST_OLD_FP)

/* Run @body for every value pair of an integer type on its slot on @tgt. */
#define RUN_INT(T, N, FN)                                                                      \
    do {                                                                                       \
        T *buf = shmem_malloc(sizeof(T) * SLOT * (size_t)npes);                                \
        ST_CHECK(buf != NULL);                                                                 \
        memset(buf, GUARD, sizeof(T) * SLOT * (size_t)npes);                                   \
        shmem_barrier_all();                                                                   \
        for (int i = 0; i < nv; i++)                                                           \
            for (int k = 0; k < 2; k++)                                                        \
                FN##_##N(&buf[SLOT * me + 1], tgt, (T)v[i], (T)v[(i + 5 * k) % nv], i);        \
        shmem_barrier_all();                                                                   \
        check_guards(buf, sizeof(T), #T);                                                      \
        shmem_free(buf);                                                                       \
    } while (0)

static void check_guards(const void *buf, size_t size, const char *type)
{
    const unsigned char *b = buf;
    for (int p = 0; p < npes; p++)
        for (int s = 0; s < SLOT; s++) {
            if (s == 1)
                continue;
            for (size_t j = 0; j < size; j++)
                if (b[(size_t)(p * SLOT + s) * size + j] != GUARD)
                    ST_FAIL("%s: guard %d of PE %d's word changed (byte %zu = 0x%02x)", type,
                            s, p, j, b[(size_t)(p * SLOT + s) * size + j]);
        }
}

static void run_target(int tgt)
{
    uint64_t v[32];
    int nv = int_values(v);
#define INT_ALL(T, N) RUN_INT(T, N, ext); RUN_INT(T, N, std);
    VSHMEM_AMO_TYPES(INT_ALL)
#define BIT_ALL(T, N) RUN_INT(T, N, bit);
    VSHMEM_AMO_BIT_TYPES(BIT_ALL)
#define OLD_ALL(T, N) RUN_INT(T, N, old);
    VSHMEM_OLD_AMO_TYPES(OLD_ALL)
    {
        /* Long, via the untyped deprecated swap. */
        long *w = shmem_malloc(sizeof(long) * (size_t)npes);
        w[me] = 0;
        shmem_barrier_all();
        shmem_long_atomic_set(&w[me], -5, tgt);
        ST_EQ(shmem_swap(&w[me], 77, tgt), -5);
        ST_EQ(shmem_long_atomic_fetch(&w[me], tgt), 77);
        shmem_barrier_all();
        shmem_free(w);
    }
    /* float and double: the bits of every edge value, plus NaN payloads and
     * denormals that arithmetic would not keep. */
    uint64_t d[32];
    int nd = ref_values(8 | VMMC_ATOMIC_FLOAT, d);
    d[nd++] = 0x7ff0000000000001ull; /* signalling NaN */
    d[nd++] = 0xfff8dead0000beefull; /* negative quiet NaN with payload */
    d[nd++] = 0x0000000000000001ull; /* smallest denormal */
    d[nd++] = 0x8000000000000000ull; /* -0.0 */
    {
        double *buf = shmem_malloc(sizeof(double) * SLOT * (size_t)npes);
        memset(buf, GUARD, sizeof(double) * SLOT * (size_t)npes);
        shmem_barrier_all();
        for (int i = 0; i < nd; i++) {
            double a, b;
            memcpy(&a, &d[i], 8);
            memcpy(&b, &d[(i + 3) % nd], 8);
            ext_double(&buf[SLOT * me + 1], tgt, a, b, i);
            oldfp_double(&buf[SLOT * me + 1], tgt, a, b, i);
        }
        shmem_barrier_all();
        check_guards(buf, sizeof(double), "double");
        shmem_free(buf);
    }
    {
        uint32_t fb[] = {0x7f800001u, 0xffc0beefu, 0x00000001u, 0x80000000u, 0x7f800000u,
                         0x3f800000u, 0xbfc00000u, 0x7fc00000u};
        int nf = (int)(sizeof fb / sizeof fb[0]);
        float *buf = shmem_malloc(sizeof(float) * SLOT * (size_t)npes);
        memset(buf, GUARD, sizeof(float) * SLOT * (size_t)npes);
        shmem_barrier_all();
        for (int i = 0; i < nf; i++) {
            float a, b;
            memcpy(&a, &fb[i], 4);
            memcpy(&b, &fb[(i + 3) % nf], 4);
            ext_float(&buf[SLOT * me + 1], tgt, a, b, i);
            oldfp_float(&buf[SLOT * me + 1], tgt, a, b, i);
        }
        shmem_barrier_all();
        check_guards(buf, sizeof(float), "float");
        shmem_free(buf);
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    shmem_init();
    me = shmem_my_pe();
    npes = shmem_n_pes();
    if (!strcmp(mode, "nullfetch")) {
        long *x = shmem_calloc(1, sizeof(long));
        shmem_long_atomic_fetch_add_nbi(NULL, x, 1, 0); /* "fetch is NULL" */
        return 0;
    }
    if (shmem_ctx_create(SHMEM_CTX_PRIVATE, &ctx) != 0)
        ST_FAIL("shmem_ctx_create failed");

    /* Every PE agrees on the order of targets, so barriers inside match. */
    run_target(me);
    ST_OK("atomics on every type, on this PE");
    run_target((me + 1) % npes);
    ST_OK("atomics on every type, on the next PE");
    if (npes >= 4) {
        run_target((me + 2) % npes);
        ST_OK("atomics on every type, two PEs on");
    }

    /* Atomics on static (non-heap) symmetric data. */
    static long sdata[SLOT * 64];
    ST_CHECK(npes <= 64);
    memset(sdata, GUARD, sizeof sdata);
    shmem_barrier_all();
    int tgt = (me + 1) % npes;
    long *w = &sdata[SLOT * me + 1];
    shmem_long_atomic_set(w, 40, tgt);
    ST_EQ(shmem_long_atomic_fetch_add(w, 2, tgt), 40);
    ST_EQ(shmem_long_atomic_compare_swap(w, 42, -1, tgt), 42);
    ST_EQ(shmem_long_atomic_fetch(w, tgt), -1);
    shmem_barrier_all();
    check_guards(sdata, sizeof(long), "static long");
    ST_OK("atomics on static data");

    /* The invalid context: nothing happens, nothing is fetched. */
    shmem_long_atomic_set(w, 9, tgt);
    ST_EQ(shmem_ctx_long_atomic_fetch_add(SHMEM_CTX_INVALID, w, 5, tgt), 0);
    shmem_ctx_long_atomic_set(SHMEM_CTX_INVALID, w, 5, tgt);
    long f = -3;
    shmem_ctx_long_atomic_fetch_nbi(SHMEM_CTX_INVALID, &f, w, tgt);
    shmem_ctx_long_atomic_swap_nbi(SHMEM_CTX_INVALID, &f, w, 5, tgt);
    shmem_ctx_quiet(SHMEM_CTX_INVALID);
    ST_EQ(f, -3);
    ST_EQ(shmem_long_atomic_fetch(w, tgt), 9);
    ST_OK("SHMEM_CTX_INVALID: atomics do nothing");

    shmem_ctx_destroy(ctx);
    shmem_finalize();
    return 0;
}
