/* Puts, atomics and point-to-point waits from every PE to several others at
 * once, in a pattern whose final memory is computable; after a barrier
 * every PE checks the final state of every PE's symmetric arrays exactly.
 *
 * Each of ROUNDS rounds, every PE:
 *  - waits until every other PE consumed its previous block (acks, a
 *    counter the others increment with shmem_long_atomic_inc);
 *  - sends every other PE a block (shmem_long_put into the heap), then after
 *    shmem_fence the round number into a static array (shmem_long_p into
 *    .bss), and a second block with shmem_long_put_signal (SIGNAL_ADD 1);
 *  - on every PE (itself included) adds me + 1 to a counter with
 *    shmem_long_atomic_fetch_add, logging the old value, and claims one slot
 *    of a table with shmem_long_atomic_compare_swap (-1 -> me), logging the
 *    slot it won;
 *  - waits for every other PE's round (shmem_long_wait_until_all on the
 *    static array, shmem_signal_wait_until on the signals), checks both
 *    blocks exactly and acknowledges them.
 * Then every PE reads every PE's arrays and checks: the last round's blocks,
 * round numbers, signal counts, acks, counter, the fetch-add logs forming
 * one chain 0 -> final per counter (each add seen exactly once), and the
 * slot tables holding exactly the slots each PE's log says it won.
 *
 *   t_mixed [rounds]      (default 40) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shmem_test.h"

#define MAXPE 64
#define BLK 64 /* longs per put block */
#define SB 8   /* longs per put_signal block */
#define UNTOUCHED (-7L)

static long flags[MAXPE]; /* static symmetric data: flags[src] = src's last round */
static int me, n, rounds;

static long val(int src, int dst, int r, int j, int kind)
{
    return ((long)kind << 50) | ((long)src << 40) | ((long)dst << 32) | ((long)r << 16) | j;
}

typedef struct fa_entry {
    long old, inc;
} fa_entry_t;

static int by_old(const void *a, const void *b)
{
    long x = ((const fa_entry_t *)a)->old, y = ((const fa_entry_t *)b)->old;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    shmem_init();
    me = shmem_my_pe();
    n = shmem_n_pes();
    rounds = argc > 1 ? atoi(argv[1]) : 40;
    ST_CHECK(n >= 2 && n <= MAXPE);
    ST_CHECK(rounds >= 1 && rounds < 1000);
    size_t nslots = (size_t)n * (size_t)rounds;

    long *inbox = shmem_malloc(sizeof(long) * BLK * n);
    long *sigbox = shmem_malloc(sizeof(long) * SB * n);
    uint64_t *sig = shmem_calloc((size_t)n, sizeof(uint64_t));
    long *acks = shmem_calloc(1, sizeof(long));
    long *cnt = shmem_calloc(1, sizeof(long));
    long *slots = shmem_malloc(sizeof(long) * nslots);
    long *fa_log = shmem_malloc(sizeof(long) * nslots); /* [target][round]: old value */
    long *cs_log = shmem_malloc(sizeof(long) * nslots); /* [target][round]: slot won */
    ST_CHECK(inbox && sigbox && sig && acks && cnt && slots && fa_log && cs_log);
    for (int i = 0; i < BLK * n; i++)
        inbox[i] = UNTOUCHED;
    for (int i = 0; i < SB * n; i++)
        sigbox[i] = UNTOUCHED;
    for (size_t i = 0; i < nslots; i++)
        slots[i] = -1;
    long *hint = calloc((size_t)n, sizeof(long)); /* per target: every slot below is taken */
    int *status = calloc((size_t)n, sizeof(int));
    long buf[BLK], sbuf[SB];
    ST_CHECK(hint && status);
    status[me] = 1; /* wait_until_all skips our own flag */
    shmem_barrier_all();

    for (int r = 1; r <= rounds; r++) {
        shmem_long_wait_until(acks, SHMEM_CMP_GE, (long)(n - 1) * (r - 1));
        for (int k = 1; k < n; k++) {
            int dst = (me + k) % n;
            for (int j = 0; j < BLK; j++)
                buf[j] = val(me, dst, r, j, 1);
            for (int j = 0; j < SB; j++)
                sbuf[j] = val(me, dst, r, j, 2);
            shmem_long_put(inbox + (size_t)me * BLK, buf, BLK, dst);
            shmem_fence();
            shmem_long_p(&flags[me], r, dst);
            shmem_long_put_signal(sigbox + (size_t)me * SB, sbuf, SB, sig + me, 1,
                                  SHMEM_SIGNAL_ADD, dst);
        }
        for (int k = 0; k < n; k++) {
            int t = (me + k) % n;
            fa_log[t * rounds + r - 1] = shmem_long_atomic_fetch_add(cnt, me + 1, t);
            for (;;) {
                long i = hint[t]++;
                if (i >= (long)nslots)
                    ST_FAIL("no free slot left on PE %d in round %d", t, r);
                long old = shmem_long_atomic_compare_swap(slots + i, -1, me, t);
                if (old == -1) {
                    cs_log[t * rounds + r - 1] = i;
                    break;
                }
                if (old < 0 || old >= n)
                    ST_FAIL("slot %ld of PE %d holds %ld", i, t, old);
            }
        }
        shmem_long_wait_until_all(flags, (size_t)n, status, SHMEM_CMP_GE, r);
        for (int k = 1; k < n; k++) {
            int src = (me + k) % n;
            ST_EQ(flags[src], r); /* a sender waits for our ack: never ahead */
            shmem_signal_wait_until(sig + src, SHMEM_CMP_GE, (uint64_t)r);
            for (int j = 0; j < BLK; j++)
                ST_EQ(inbox[(size_t)src * BLK + j], val(src, me, r, j, 1));
            for (int j = 0; j < SB; j++)
                ST_EQ(sigbox[(size_t)src * SB + j], val(src, me, r, j, 2));
            shmem_long_atomic_inc(acks, src);
        }
    }
    shmem_barrier_all();
    ST_OK("rounds of puts, put_signal, fetch_add, compare_swap, wait_until");

    /* Every PE checks every PE's final memory. */
    long *rin = malloc(sizeof(long) * BLK * n), *rsb = malloc(sizeof(long) * SB * n);
    long *rslots = malloc(sizeof(long) * nslots), *rflags = malloc(sizeof(long) * n);
    uint64_t *rsig = malloc(sizeof(uint64_t) * n);
    fa_entry_t *chain = malloc(sizeof(fa_entry_t) * nslots);
    long *owner = malloc(sizeof(long) * nslots);
    ST_CHECK(rin && rsb && rslots && rflags && rsig && chain && owner);
    for (int q = 0; q < n; q++) {
        shmem_long_get(rin, inbox, (size_t)BLK * n, q);
        shmem_long_get(rsb, sigbox, (size_t)SB * n, q);
        shmem_long_get(rflags, flags, (size_t)n, q);
        shmem_uint64_get(rsig, sig, (size_t)n, q);
        for (int src = 0; src < n; src++) {
            for (int j = 0; j < BLK; j++)
                ST_EQ(rin[src * BLK + j], src == q ? UNTOUCHED : val(src, q, rounds, j, 1));
            for (int j = 0; j < SB; j++)
                ST_EQ(rsb[src * SB + j], src == q ? UNTOUCHED : val(src, q, rounds, j, 2));
            ST_EQ(rflags[src], src == q ? 0 : rounds);
            ST_EQ(rsig[src], src == q ? 0 : rounds);
        }
        ST_EQ(shmem_long_g(acks, q), (long)(n - 1) * rounds);
        long total = shmem_long_atomic_fetch(cnt, q);
        ST_EQ(total, (long)rounds * n * (n + 1) / 2);

        /* The fetch-add chain on q: each PE p's adds of p + 1. */
        size_t m = 0;
        for (int p = 0; p < n; p++) {
            shmem_long_get(owner, fa_log + (size_t)q * rounds, (size_t)rounds, p);
            for (int r = 0; r < rounds; r++)
                chain[m++] = (fa_entry_t){owner[r], p + 1};
        }
        qsort(chain, m, sizeof *chain, by_old);
        long at = 0;
        for (size_t i = 0; i < m; i++) {
            if (chain[i].old != at)
                ST_FAIL("PE %d's counter: an add saw %ld where %ld was due", q, chain[i].old, at);
            at += chain[i].inc;
        }
        ST_EQ(at, total);

        /* The slot table on q holds exactly what the logs say each PE won. */
        shmem_long_get(rslots, slots, nslots, q);
        for (size_t i = 0; i < nslots; i++)
            owner[i] = -1;
        for (int p = 0; p < n; p++) {
            long won[1000];
            shmem_long_get(won, cs_log + (size_t)q * rounds, (size_t)rounds, p);
            for (int r = 0; r < rounds; r++) {
                ST_CHECK(won[r] >= 0 && won[r] < (long)nslots);
                if (owner[won[r]] != -1)
                    ST_FAIL("slot %ld of PE %d won by PEs %ld and %d", won[r], q,
                            owner[won[r]], p);
                owner[won[r]] = p;
            }
        }
        for (size_t i = 0; i < nslots; i++)
            ST_EQ(rslots[i], owner[i]); /* every slot claimed, by its winner */
    }
    ST_OK("final memory of every PE, exactly");
    shmem_barrier_all();

    free(owner);
    free(chain);
    free(rsig);
    free(rflags);
    free(rslots);
    free(rsb);
    free(rin);
    free(status);
    free(hint);
    shmem_free(cs_log);
    shmem_free(fa_log);
    shmem_free(slots);
    shmem_free(cnt);
    shmem_free(acks);
    shmem_free(sig);
    shmem_free(sigbox);
    shmem_free(inbox);
    shmem_finalize();
    return 0;
}
