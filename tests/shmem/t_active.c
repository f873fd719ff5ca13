/* The deprecated active-set collectives (PE_start, logPE_stride, PE_size,
 * pSync) on sets with a non-zero start and a stride: broadcast, collect,
 * fcollect, alltoall(s) in 32 and 64 bits, barrier/sync and the *_to_all
 * reductions, back to back with the same pSync (left as SHMEM_SYNC_VALUE).
 * With the argument "bad" PE 0 names a set that does not fit the job, which
 * must end the job with a message. */
#include "shmem_test.h"

#include <complex.h>
#include <string.h>

static long pSync[SHMEM_REDUCE_SYNC_SIZE];
static long pWrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE + 64];
static int me, npes;

#define N 9

static void check_psync(void)
{
    for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++)
        ST_EQ(pSync[i], SHMEM_SYNC_VALUE);
}

/* World PE of index i of the set */
#define AS_PE(i) (start + (i) * (1 << logs))

static void test_set(int start, int logs, int size, int64_t *s64, int64_t *d64, int32_t *s32,
                     int32_t *d32)
{
    int idx = (me - start) >> logs;
    if (me < start || ((me - start) & ((1 << logs) - 1)) || idx >= size)
        return; /* not in the set */
    int root = size - 1;
    /* broadcast: the root's dest is not written (active-set semantics) */
    for (int i = 0; i < N; i++) {
        s64[i] = me * 100 + i;
        s32[i] = me * 1000 + i;
        d64[i] = -7;
        d32[i] = -7;
    }
    shmem_barrier(start, logs, size, pSync);
    shmem_broadcast64(d64, s64, N, root, start, logs, size, pSync);
    shmem_broadcast32(d32, s32, N, root, start, logs, size, pSync);
    for (int i = 0; i < N; i++) {
        ST_EQ(d64[i], idx == root ? -7 : AS_PE(root) * 100 + i);
        ST_EQ(d32[i], idx == root ? -7 : AS_PE(root) * 1000 + i);
    }
    /* fcollect and collect (PE of index k brings k + 1 elements) */
    shmem_fcollect64(d64, s64, N, start, logs, size, pSync);
    shmem_fcollect32(d32, s32, N, start, logs, size, pSync);
    for (int k = 0; k < size; k++)
        for (int i = 0; i < N; i++) {
            ST_EQ(d64[k * N + i], AS_PE(k) * 100 + i);
            ST_EQ(d32[k * N + i], AS_PE(k) * 1000 + i);
        }
    shmem_collect64(d64, s64, (size_t)idx + 1, start, logs, size, pSync);
    shmem_collect32(d32, s32, (size_t)idx + 1, start, logs, size, pSync);
    for (int k = 0, at = 0; k < size; at += k + 1, k++)
        for (int i = 0; i <= k; i++) {
            ST_EQ(d64[at + i], AS_PE(k) * 100 + i);
            ST_EQ(d32[at + i], AS_PE(k) * 1000 + i);
        }
    /* alltoall: block k of the source goes to index k */
    shmem_barrier(start, logs, size, pSync);
    for (int k = 0; k < size; k++)
        for (int i = 0; i < N; i++) {
            s64[k * N + i] = me * 100 + k * 10 + i;
            s32[k * N + i] = me * 1000 + k * 10 + i;
        }
    shmem_barrier(start, logs, size, pSync);
    shmem_alltoall64(d64, s64, N, start, logs, size, pSync);
    shmem_alltoall32(d32, s32, N, start, logs, size, pSync);
    for (int k = 0; k < size; k++)
        for (int i = 0; i < N; i++) {
            ST_EQ(d64[k * N + i], AS_PE(k) * 100 + idx * 10 + i);
            ST_EQ(d32[k * N + i], AS_PE(k) * 1000 + idx * 10 + i);
        }
    shmem_alltoalls64(d64, s64, 2, 1, N, start, logs, size, pSync);
    shmem_alltoalls32(d32, s32, 1, 1, N, start, logs, size, pSync);
    for (int k = 0; k < size; k++)
        for (int i = 0; i < N; i++) {
            ST_EQ(d64[(k * N + i) * 2], AS_PE(k) * 100 + idx * 10 + i);
            ST_EQ(d32[k * N + i], AS_PE(k) * 1000 + idx * 10 + i);
        }
    shmem_sync(start, logs, size, pSync);
    check_psync();
}

static int isrc[N], idst[N];
static long lsrc[N], ldst[N];
static double dsrc[N], ddst[N];
static long long xsrc[N], xdst[N];
static short hsrc[N], hdst[N];
static double _Complex csrc[N], cdst[N];

static void test_to_all(int start, int logs, int size)
{
    int idx = (me - start) >> logs;
    if (me < start || ((me - start) & ((1 << logs) - 1)) || idx >= size)
        return;
    for (int i = 0; i < N; i++) {
        isrc[i] = me + i;
        lsrc[i] = (me * 37 + i * 11) % 50;
        dsrc[i] = me * 0.5 + i;
        xsrc[i] = 1ll << (me + i % 3);
        hsrc[i] = (short)(me - i);
        csrc[i] = (me % 2 + 1) + 1.0 * I;
    }
    shmem_barrier(start, logs, size, pSync);
    shmem_int_sum_to_all(idst, isrc, N, start, logs, size, (int *)pWrk, pSync);
    shmem_long_max_to_all(ldst, lsrc, N, start, logs, size, pWrk, pSync);
    shmem_double_sum_to_all(ddst, dsrc, N, start, logs, size, (double *)pWrk, pSync);
    shmem_longlong_xor_to_all(xdst, xsrc, N, start, logs, size, (long long *)pWrk, pSync);
    shmem_short_min_to_all(hdst, hsrc, N, start, logs, size, (short *)pWrk, pSync);
    shmem_complexd_prod_to_all(cdst, csrc, N, start, logs, size, (double _Complex *)pWrk, pSync);
    /* in place */
    shmem_int_sum_to_all(isrc, isrc, N, start, logs, size, (int *)pWrk, pSync);
    for (int i = 0; i < N; i++) {
        int es = 0;
        long em = -1;
        double ed = 0;
        long long ex = 0;
        short eh = 0;
        double _Complex ec = 1;
        for (int k = 0; k < size; k++) {
            int p = AS_PE(k);
            es += p + i;
            long lv = (p * 37 + i * 11) % 50;
            em = lv > em ? lv : em;
            ed += p * 0.5 + i;
            ex ^= 1ll << (p + i % 3);
            short hv = (short)(p - i);
            eh = k == 0 || hv < eh ? hv : eh;
            ec *= (p % 2 + 1) + 1.0 * I;
        }
        ST_EQ(idst[i], es);
        ST_EQ(isrc[i], es);
        ST_EQ(ldst[i], em);
        ST_CHECK(ddst[i] == ed);
        ST_EQ(xdst[i], ex);
        ST_EQ(hdst[i], eh);
        ST_CHECK(cdst[i] == ec);
    }
    check_psync();
}

int main(int argc, char **argv)
{
    shmem_init();
    me = shmem_my_pe();
    npes = shmem_n_pes();
    for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++)
        pSync[i] = SHMEM_SYNC_VALUE;
    shmem_barrier_all();
    if (argc > 1 && strcmp(argv[1], "bad") == 0) {
        if (me == 0)
            shmem_barrier(1, 1, npes, pSync); /* ends past the last PE */
        shmem_barrier_all();
        ST_FAIL("a malformed active set was accepted");
    }
    size_t cap = (size_t)npes * N * 2;
    int64_t *s64 = shmem_malloc(cap * 8), *d64 = shmem_malloc(cap * 8);
    int32_t *s32 = shmem_malloc(cap * 4), *d32 = shmem_malloc(cap * 4);
    ST_CHECK(s64 && d64 && s32 && d32);
    /* (start, logPE_stride, size): whole world, from PE 1, every other PE,
     * from PE 1 every other PE */
    int sets[][3] = {{0, 0, npes}, {1, 0, npes - 1}, {0, 1, (npes + 1) / 2}, {1, 1, npes / 2}};
    for (int s = 0; s < 4; s++) {
        if (sets[s][2] < 1)
            continue;
        for (int rep = 0; rep < 3; rep++) {
            test_set(sets[s][0], sets[s][1], sets[s][2], s64, d64, s32, d32);
            test_to_all(sets[s][0], sets[s][1], sets[s][2]);
        }
        shmem_barrier_all();
    }
    ST_OK("active-set broadcast/collect/fcollect/alltoall(s)/to_all, start 0/1, stride 1/2");
    /* two overlapping sets in turn, back to back */
    for (int rep = 0; rep < 50; rep++) {
        if (me >= 1)
            shmem_barrier(1, 0, npes - 1, pSync);
        shmem_barrier(0, 0, npes, pSync);
    }
    check_psync();
    ST_OK("overlapping active sets back to back");
    shmem_free(d32);
    shmem_free(s32);
    shmem_free(d64);
    shmem_free(s64);
    shmem_finalize();
    return 0;
}
