/* The core's data movement, on the heap and on static data, to every PE
 * (mapped on this host, deliberate update across hosts): blocking, nbi and
 * strided puts and gets, atomics with vmmc_atomic()'s exact semantics
 * (signed, unsigned, float), and shm_wait woken by shm_amo and shm_ring. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "shmem/shmem_int.h"
#include "shmem_test.h"

#define N 256
static long gdata[N];              /* .bss */
static int gstride[64] = {7};      /* .data */
static uint64_t gword[8];
static double gdbl;

static int flag_ready(void *arg)
{
    return __atomic_load_n((volatile uint64_t *)arg, __ATOMIC_ACQUIRE) != 0;
}

static void movement(int me, int n, long *heap)
{
    int to = (me + 1) % n, from = (me + n - 1) % n;
    long src[N];
    for (int i = 0; i < N; i++)
        src[i] = me * 100000 + i;
    /* blocking puts into the heap and into static data of the next PE */
    shm_put_bytes("t", SHMEM_CTX_DEFAULT, heap, src, sizeof src, to);
    shm_put_bytes("t", SHMEM_CTX_DEFAULT, gdata, src, sizeof src, to);
    shm_quiet(SHMEM_CTX_DEFAULT);
    shmem_barrier_all();
    for (int i = 0; i < N; i++) {
        ST_EQ(heap[i], from * 100000 + i);
        ST_EQ(gdata[i], from * 100000 + i);
    }
    ST_OK("put into a peer's heap and static data");

    /* gets of a peer's heap and data */
    long got[N], got2[N];
    shm_get_bytes("t", SHMEM_CTX_DEFAULT, got, heap, sizeof got, to);
    shm_get_bytes("t", SHMEM_CTX_DEFAULT, got2, gdata, sizeof got2, to);
    for (int i = 0; i < N; i++) {
        ST_EQ(got[i], me * 100000 + i);
        ST_EQ(got2[i], me * 100000 + i);
    }
    ST_OK("get from a peer's heap and static data");
    shmem_barrier_all();

    /* nbi on a created context, completed by its quiet */
    shmem_ctx_t ctx;
    ST_EQ(shmem_ctx_create(SHMEM_CTX_PRIVATE, &ctx), 0);
    long big[4 * N];
    for (int i = 0; i < 4 * N; i++)
        big[i] = -(long)i - me;
    for (int k = 0; k < 4; k++)
        shm_put_nbi_bytes("t", ctx, heap + N + k * N, big + k * N, N * sizeof(long), to);
    shm_quiet(ctx);
    shmem_barrier_all();
    for (int i = 0; i < 4 * N; i++)
        ST_EQ(heap[N + i], -(long)i - from);
    long back[4 * N];
    memset(back, 0, sizeof back);
    shm_get_nbi_bytes("t", ctx, back, heap + N, sizeof back, to);
    shm_quiet(ctx);
    for (int i = 0; i < 4 * N; i++)
        ST_EQ(back[i], -(long)i - me);
    shmem_ctx_destroy(ctx);
    ST_OK("nbi puts and gets complete at quiet of their context");
    shmem_barrier_all();

    /* strided: every third int of the source into every second of the target */
    int s[30], d[40];
    for (int i = 0; i < 30; i++)
        s[i] = me * 1000 + i;
    shm_iput_bytes("t", SHMEM_CTX_DEFAULT, gstride, s, 2, 3, sizeof(int), 10, to);
    shm_quiet(SHMEM_CTX_DEFAULT);
    shmem_barrier_all();
    for (int i = 0; i < 10; i++) {
        ST_EQ(gstride[2 * i], from * 1000 + 3 * i);
        if (i < 9)
            ST_EQ(gstride[2 * i + 1], i == 0 ? 0 : 0);
    }
    memset(d, 0, sizeof d);
    shm_iget_bytes("t", SHMEM_CTX_DEFAULT, d, gstride, 4, 2, sizeof(int), 10, to);
    for (int i = 0; i < 10; i++)
        ST_EQ(d[4 * i], me * 1000 + 3 * i);
    ST_OK("iput and iget with strides");
    shmem_barrier_all();
}

static void atomics(int me, int n)
{
    int to = (me + 1) % n;
    /* every PE adds to PE 0's words: integers wrap, signed min/max compare signed */
    uint64_t r = shm_amo("t", SHMEM_CTX_DEFAULT, &gword[0], 0, VMMC_ATOMIC_ADD, 8, 5, 0, 1);
    (void)r;
    shm_amo("t", SHMEM_CTX_DEFAULT, &gword[1], 0, VMMC_ATOMIC_MIN, 4 | VMMC_ATOMIC_SIGNED,
            (uint32_t)(-10 - me), 0, 0);
    shm_amo("t", SHMEM_CTX_DEFAULT, &gword[2], 0, VMMC_ATOMIC_MAX, 4, (uint32_t)(-1 - me), 0, 0);
    shm_amo("t", SHMEM_CTX_DEFAULT, &gword[3], 0, VMMC_ATOMIC_OR, 8, 1ull << me, 0, 0);
    shmem_barrier_all();
    if (me == 0) {
        ST_EQ(gword[0], 5ull * (uint64_t)n);
        ST_EQ((int32_t)(uint32_t)gword[1], -10 - (n - 1)); /* signed: most negative */
        ST_EQ((uint32_t)gword[2], (uint32_t)-1);           /* unsigned: largest */
        ST_EQ(gword[3], (1ull << n) - 1);
    }
    ST_OK("integer atomics: add, signed min, unsigned max, or");
    shmem_barrier_all();

    /* one writer per word: a sequence whose results differ between signed,
     * unsigned and float, on this PE's own word (processor atomics) and on
     * the next PE's (mapped, or vmmc_atomic across hosts) */
    for (int k = 0; k < 2; k++) {
        int t = k ? to : me;
        void *w = &gword[6 + k];
        const int S4 = 4 | VMMC_ATOMIC_SIGNED;
#define AMO(op, size, v, c) shm_amo("t", SHMEM_CTX_DEFAULT, w, t, op, size, (uint64_t)(v), c, 1)
#define READ4() (uint32_t)AMO(VMMC_ATOMIC_READ, 4, 0, 0)
        AMO(VMMC_ATOMIC_SWAP, S4, 3, 0);
        AMO(VMMC_ATOMIC_MIN, S4, (uint32_t)-1, 0);
        ST_EQ((int32_t)READ4(), -1);
        AMO(VMMC_ATOMIC_MAX, S4, 5, 0);
        ST_EQ(READ4(), 5);
        AMO(VMMC_ATOMIC_MIN, 4, 0xffffffffu, 0);
        ST_EQ(READ4(), 5);
        AMO(VMMC_ATOMIC_MAX, 4, 0xffffffffu, 0);
        ST_EQ(READ4(), 0xffffffffu);
        AMO(VMMC_ATOMIC_PROD, S4, (uint32_t)-2, 0);
        ST_EQ(READ4(), 2);
        AMO(VMMC_ATOMIC_ADD, S4, 0x7fffffff, 0);
        ST_EQ(READ4(), 0x80000001u); /* wraps */
        AMO(VMMC_ATOMIC_CSWAP_GT, S4, 9, 0); /* 0 > INT32_MIN+1: replaced */
        ST_EQ(READ4(), 9);
        AMO(VMMC_ATOMIC_CSWAP_GT, 4, 1, 10); /* 10 > 9: replaced */
        ST_EQ(READ4(), 1);
        AMO(VMMC_ATOMIC_MSWAP, 4, 0xf0, 0x30); /* (0xf0 & 0x30) | (1 & ~0x30) */
        ST_EQ(READ4(), 0x31);
        AMO(VMMC_ATOMIC_LXOR, 4, 5, 0);
        ST_EQ(READ4(), 0);
        AMO(VMMC_ATOMIC_SWAP, 4 | VMMC_ATOMIC_FLOAT, vmmc_atomic_from_float(1.5f), 0);
        AMO(VMMC_ATOMIC_MIN, 4 | VMMC_ATOMIC_FLOAT, vmmc_atomic_from_float(NAN), 0);
        AMO(VMMC_ATOMIC_ADD, 4 | VMMC_ATOMIC_FLOAT, vmmc_atomic_from_float(0.25f), 0);
        ST_CHECK(vmmc_atomic_to_float(READ4()) == 1.75f);
        AMO(VMMC_ATOMIC_MAX, 4 | VMMC_ATOMIC_FLOAT, vmmc_atomic_from_float(-3.0f), 0);
        ST_CHECK(vmmc_atomic_to_float(READ4()) == 1.75f);
#undef AMO
#undef READ4
    }
    ST_OK("atomic semantics by type: signed, unsigned, float, wrap, NaN, mswap, lxor");
    shmem_barrier_all();

    /* float: every PE adds 0.5 to PE 0's double; CSWAP on float compares
     * as floats (-0.0 == +0.0) */
    shm_amo("t", SHMEM_CTX_DEFAULT, &gdbl, 0, VMMC_ATOMIC_ADD, 8 | VMMC_ATOMIC_FLOAT,
            vmmc_atomic_from_double(0.5), 0, 0);
    shmem_barrier_all();
    if (me == 0)
        ST_CHECK(gdbl == 0.5 * n);
    shmem_barrier_all();
    if (me == 0)
        gdbl = -0.0;
    shmem_barrier_all();
    if (me == n - 1) {
        uint64_t old = shm_amo("t", SHMEM_CTX_DEFAULT, &gdbl, 0, VMMC_ATOMIC_CSWAP,
                               8 | VMMC_ATOMIC_FLOAT, vmmc_atomic_from_double(2.0),
                               vmmc_atomic_from_double(0.0), 1);
        ST_CHECK(signbit(vmmc_atomic_to_double(old)));
        old = shm_amo("t", SHMEM_CTX_DEFAULT, &gdbl, 0, VMMC_ATOMIC_READ, 8 | VMMC_ATOMIC_FLOAT,
                      0, 0, 1);
        ST_CHECK(vmmc_atomic_to_double(old) == 2.0);
    }
    ST_OK("float atomics: add, cswap with -0.0, read");
    shmem_barrier_all();

    /* fetching compare-and-swap: exactly one PE wins */
    uint64_t old = shm_amo("t", SHMEM_CTX_DEFAULT, &gword[4], 0, VMMC_ATOMIC_CSWAP, 8,
                           (uint64_t)me + 1, 0, 1);
    uint64_t won = old == 0, total = 0;
    shm_amo("t", SHMEM_CTX_DEFAULT, &gword[5], to, VMMC_ATOMIC_ADD, 8, won, 0, 0);
    shmem_barrier_all();
    for (int pe = 0; pe < n; pe++) {
        uint64_t v;
        shm_get_bytes("t", SHMEM_CTX_DEFAULT, &v, &gword[5], 8, pe);
        total += v;
    }
    ST_EQ(total, 1);
    ST_OK("fetching compare-and-swap: one winner");
    shmem_barrier_all();
}

/* A ring of waits: each PE waits for its predecessor's atomic on its
 * heap word (shm_amo rings), then sets its successor's. */
static void waits(int me, int n, uint64_t *heap_words)
{
    for (int round = 1; round <= 20; round++) {
        if (!(me == 0)) {
            shm_wait(flag_ready, &heap_words[0]);
            __atomic_store_n(&heap_words[0], 0, __ATOMIC_RELAXED);
        }
        shm_amo("t", SHMEM_CTX_DEFAULT, &heap_words[0], (me + 1) % n, VMMC_ATOMIC_SWAP, 8,
                (uint64_t)round, 0, 0);
        if (me == 0) {
            shm_wait(flag_ready, &heap_words[0]);
            ST_EQ(heap_words[0], round);
            __atomic_store_n(&heap_words[0], 0, __ATOMIC_RELAXED);
        }
    }
    ST_OK("a token passed 20 times around the ring through shm_amo and shm_wait");
    shmem_barrier_all();
    /* a plain put with shm_ring wakes too, and a plain put alone is seen */
    if (me == 0) {
        for (int pe = 1; pe < n; pe++) {
            uint64_t one = 1;
            shm_put_bytes("t", SHMEM_CTX_DEFAULT, &heap_words[1], &one, 8, pe);
            if (pe % 2)
                shm_ring(pe);
            else
                shm_quiet(SHMEM_CTX_DEFAULT);
        }
    } else {
        shm_wait(flag_ready, &heap_words[1]);
    }
    ST_OK("shm_wait sees a put followed by shm_ring or shm_quiet");
    shmem_barrier_all();
}

int main(void)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    long *heap = shmem_calloc(6 * N, sizeof(long));
    ST_CHECK(heap != NULL);
    movement(me, n, heap);
    atomics(me, n);
    uint64_t *w = shmem_calloc(8, sizeof(uint64_t));
    waits(me, n, w);
    shmem_free(w);
    shmem_free(heap);
    shmem_finalize();
    return 0;
}
