/* One-sided communication through MPI windows: MPI_Put, MPI_Get,
 * MPI_Accumulate, MPI_Get_accumulate, MPI_Fetch_and_op and
 * MPI_Compare_and_swap, synchronised by fences and by passive-target
 * lock/unlock, with every rank targeting every other. Results are exact. */
#include "mpit.h"

#define WIN_INTS 4096

static void fence_epochs(int rank, int size, int *base, MPI_Win win)
{
    /* Put: rank r writes its block into slot r of every other rank. */
    int blk = WIN_INTS / 64;
    int *src = mpit_alloc(sizeof(int) * (size_t)blk);
    for (int i = 0; i < blk; i++)
        src[i] = rank * 100000 + i;
    for (int i = 0; i < WIN_INTS; i++)
        base[i] = -1;
    MPIT(MPI_Win_fence(0, win));
    for (int p = 0; p < size; p++)
        if (p != rank)
            MPIT(MPI_Put(src, blk, MPI_INT, p, (MPI_Aint)rank * blk, blk, MPI_INT, win));
    MPIT(MPI_Win_fence(0, win));
    for (int p = 0; p < size; p++)
        for (int i = 0; i < blk; i++) {
            int want = p == rank ? -1 : p * 100000 + i;
            if (base[p * blk + i] != want)
                MPIT_FAIL("after MPI_Put + fence: slot %d [%d] = %d, expected %d", p, i,
                          base[p * blk + i], want);
        }
    /* Get: read the right neighbour's slot of its left neighbour. */
    int right = (rank + 1) % size;
    int *got = mpit_alloc(sizeof(int) * (size_t)blk);
    memset(got, 0, sizeof(int) * (size_t)blk);
    MPIT(MPI_Get(got, blk, MPI_INT, right, (MPI_Aint)rank * blk, blk, MPI_INT, win));
    MPIT(MPI_Win_fence(0, win));
    for (int i = 0; i < blk; i++)
        if (got[i] != rank * 100000 + i)
            MPIT_FAIL("MPI_Get from %d [%d] = %d, expected %d", right, i, got[i], rank * 100000 + i);
    /* Accumulate: everyone adds (rank + 1) * i into the last block of rank 0 */
    for (int i = 0; i < blk; i++)
        src[i] = (rank + 1) * i;
    if (rank == 0)
        for (int i = 0; i < blk; i++)
            base[WIN_INTS - blk + i] = 0;
    MPIT(MPI_Win_fence(0, win));
    MPIT(MPI_Accumulate(src, blk, MPI_INT, 0, WIN_INTS - blk, blk, MPI_INT, MPI_SUM, win));
    MPIT(MPI_Win_fence(0, win));
    if (rank == 0)
        for (int i = 0; i < blk; i++) {
            int want = i * size * (size + 1) / 2;
            if (base[WIN_INTS - blk + i] != want)
                MPIT_FAIL("MPI_Accumulate(SUM) [%d] = %d, expected %d", i,
                          base[WIN_INTS - blk + i], want);
        }
    free(src);
    free(got);
}

static void lock_epochs(int rank, int size, int *base, MPI_Win win)
{
    /* Counter at index 0 of rank 0: every rank fetch-and-adds 1, 50 times,
     * under a shared lock; the values fetched are all distinct. */
    const int rounds = 50;
    if (rank == 0)
        base[0] = 0, base[1] = -1, base[2] = 0, base[3] = 0;
    MPIT(MPI_Barrier(MPI_COMM_WORLD));
    int *seen = mpit_alloc(sizeof(int) * (size_t)rounds);
    for (int i = 0; i < rounds; i++) {
        int one = 1, old = -1;
        MPIT(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        MPIT(MPI_Fetch_and_op(&one, &old, MPI_INT, 0, 0, MPI_SUM, win));
        MPIT(MPI_Win_unlock(0, win));
        if (old < 0 || old >= rounds * size)
            MPIT_FAIL("MPI_Fetch_and_op fetched %d", old);
        if (i && old <= seen[i - 1])
            MPIT_FAIL("MPI_Fetch_and_op fetched %d after %d", old, seen[i - 1]);
        seen[i] = old;
    }
    /* every value 0 .. rounds*size-1 was fetched exactly once */
    int total = rounds * size;
    int *all = mpit_alloc(sizeof(int) * (size_t)total);
    MPIT(MPI_Allgather(seen, rounds, MPI_INT, all, rounds, MPI_INT, MPI_COMM_WORLD));
    unsigned char *hit = calloc((size_t)total, 1);
    for (int i = 0; i < total; i++) {
        if (all[i] < 0 || all[i] >= total || hit[all[i]])
            MPIT_FAIL("MPI_Fetch_and_op: value %d fetched twice or out of range", all[i]);
        hit[all[i]] = 1;
    }
    free(hit);
    free(all);
    free(seen);
    /* Compare-and-swap: each rank tries to claim index 1 (from -1 to its
     * rank); exactly one succeeds, and every rank learns who. */
    int cmp = -1, me = rank, old = -2;
    MPIT(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    MPIT(MPI_Compare_and_swap(&me, &cmp, &old, MPI_INT, 0, 1, win));
    MPIT(MPI_Win_unlock(0, win));
    int won = old == -1, winners = 0;
    MPIT(MPI_Allreduce(&won, &winners, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    MPIT_EQ(winners, 1);
    if (!won && (old < 0 || old >= size))
        MPIT_FAIL("MPI_Compare_and_swap returned %d", old);
    MPIT(MPI_Barrier(MPI_COMM_WORLD));
    /* Exclusive lock: Get, modify, Put as one critical section. */
    for (int i = 0; i < 10; i++) {
        int v = 0;
        MPIT(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        MPIT(MPI_Get(&v, 1, MPI_INT, 0, 2, 1, MPI_INT, win));
        MPIT(MPI_Win_flush(0, win));
        v += 1;
        MPIT(MPI_Put(&v, 1, MPI_INT, 0, 2, 1, MPI_INT, win));
        MPIT(MPI_Win_unlock(0, win));
    }
    MPIT(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        MPIT(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        int v = base[2];
        MPIT(MPI_Win_unlock(0, win));
        MPIT_EQ(v, 10 * size);
    }
    /* Get_accumulate: fetch rank 0's index 3, then add; sums exact */
    MPIT(MPI_Barrier(MPI_COMM_WORLD));
    int add = rank + 1, prev = -1;
    MPIT(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    MPIT(MPI_Get_accumulate(&add, 1, MPI_INT, &prev, 1, MPI_INT, 0, 3, 1, MPI_INT, MPI_SUM, win));
    MPIT(MPI_Win_unlock(0, win));
    MPIT(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        MPIT(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        int v = base[3];
        MPIT(MPI_Win_unlock(0, win));
        MPIT_EQ(v, size * (size + 1) / 2);
    }
}

int main(int argc, char **argv)
{
    int rank, size;
    mpit_init(&argc, &argv, &rank, &size, 2);
    if (size > 64)
        MPIT_FAIL("at most 64 ranks");
    int *base, *mem;
    MPI_Win win;
    MPIT(MPI_Alloc_mem(sizeof(int) * WIN_INTS, MPI_INFO_NULL, &mem));
    base = mem;
    memset(base, 0, sizeof(int) * WIN_INTS);
    MPIT(MPI_Win_create(base, sizeof(int) * WIN_INTS, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD,
                        &win));
    fence_epochs(rank, size, base, win);
    MPIT(MPI_Win_fence(0, win));
    lock_epochs(rank, size, base, win);
    MPIT(MPI_Win_free(&win));
    /* A window made by MPI (MPI_Win_allocate) works the same way. */
    MPIT(MPI_Win_allocate(sizeof(int) * WIN_INTS, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD,
                          &base, &win));
    fence_epochs(rank, size, base, win);
    MPIT(MPI_Win_free(&win));
    MPIT(MPI_Free_mem(mem));
    mpit_finish("mpi_rma");
    return 0;
}
