/* Atomics from every PE on the same words at once: the totals are exact and
 * every fetched value is handed out once.
 *  - fetch_inc on one long of PE 0: each value 0..npes*K-1 comes back to
 *    exactly one PE (each marks it in a table on PE 0), the final count is
 *    npes*K;
 *  - fetch_add of me+1 on a uint64 and add on an int32 of the last PE;
 *  - compare_swap elections: in each round exactly one PE swaps 0 for its
 *    number, which the word keeps, and every loser sees a winner's number;
 *  - fetch_or of one bit per PE: nobody sees its own bit before it sets it,
 *    and the word ends with every bit. */
#include <stdint.h>
#include <string.h>

#include "shmem_test.h"

#define K 1000
#define ROUNDS 64

int main(void)
{
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes(), last = npes - 1;
    long *ctr = shmem_calloc(1, sizeof(long));
    int *seen = shmem_calloc((size_t)npes * K, sizeof(int));
    uint64_t *sum = shmem_calloc(1, sizeof(uint64_t));
    int32_t *isum = shmem_calloc(1, sizeof(int32_t));
    long *elect = shmem_calloc(ROUNDS, sizeof(long));
    int *wins = shmem_calloc(ROUNDS, sizeof(int));
    uint64_t *bits = shmem_calloc(ROUNDS, sizeof(uint64_t));
    ST_CHECK(ctr && seen && sum && isum && elect && wins && bits);
    ST_CHECK(npes <= 64);
    shmem_barrier_all();

    for (int i = 0; i < K; i++) {
        long v = shmem_long_atomic_fetch_inc(ctr, 0);
        if (v < 0 || v >= (long)npes * K)
            ST_FAIL("fetch_inc returned %ld, outside 0..%ld", v, (long)npes * K - 1);
        shmem_int_atomic_inc(&seen[v], 0);
        shmem_uint64_atomic_fetch_add(sum, (uint64_t)me + 1, last);
        shmem_int32_atomic_add(isum, -(me + 1), last);
    }
    for (int r = 0; r < ROUNDS; r++) {
        long old = shmem_long_atomic_compare_swap(&elect[r], 0, me + 1, 0);
        if (old == 0)
            shmem_int_atomic_add(&wins[r], me + 1, 0); /* only one adds: it holds the winner */
        else if (old < 1 || old > npes || old == me + 1)
            ST_FAIL("round %d: compare_swap lost to %ld, not a PE's number", r, old);
        uint64_t was = shmem_uint64_atomic_fetch_or(&bits[r], 1ull << me, r % npes);
        if (was & (1ull << me))
            ST_FAIL("round %d: own bit set before fetch_or (0x%llx)", r,
                    (unsigned long long)was);
    }
    shmem_barrier_all();

    if (me == 0) {
        ST_EQ(*ctr, (long)npes * K);
        for (long v = 0; v < (long)npes * K; v++)
            if (seen[v] != 1)
                ST_FAIL("value %ld fetched %d times", v, seen[v]);
        for (int r = 0; r < ROUNDS; r++) {
            ST_CHECK(elect[r] >= 1 && elect[r] <= npes);
            ST_EQ(wins[r], elect[r]); /* one winner, and the word holds its number */
        }
    }
    if (me == last) {
        uint64_t want = (uint64_t)K * (uint64_t)npes * (uint64_t)(npes + 1) / 2;
        ST_EQ(*sum, want);
        ST_EQ(*isum, -(long long)want);
    }
    uint64_t all = npes == 64 ? ~0ull : (1ull << npes) - 1;
    for (int r = 0; r < ROUNDS; r++)
        if (r % npes == me && bits[r] != all)
            ST_FAIL("round %d: fetch_or left 0x%llx", r, (unsigned long long)bits[r]);
    ST_OK("concurrent fetch_inc/fetch_add/add exact, compare_swap elects one, fetch_or sets all");

    shmem_barrier_all();
    shmem_free(bits);
    shmem_free(wins);
    shmem_free(elect);
    shmem_free(isum);
    shmem_free(sum);
    shmem_free(seen);
    shmem_free(ctr);
    shmem_finalize();
    return 0;
}
