/* Barriers order puts: in every round each PE puts the round number into
 * its word on every other PE, then synchronises (barrier_all, quiet +
 * sync_all, quiet + team_sync, and the active-set shmem_barrier); after it
 * every word must hold this round's number. A PE that left a barrier before
 * the others arrived would read the previous round's number. Words
 * alternate between two banks so that a PE already in the next round never
 * overwrites a word still being checked. */
#include "shmem_test.h"

#include <string.h>

#define ROUNDS 400

static long pSync[SHMEM_BARRIER_SYNC_SIZE];

static void round_trip(long *bank, int me, int n, long r, int how)
{
    long *b = bank + (r & 1) * n;
    for (int pe = 0; pe < n; pe++) {
        if (pe != me)
            shmem_long_p(&b[me], r, pe);
    }
    switch (how) {
    case 0:
        shmem_barrier_all();
        break;
    case 1:
        shmem_quiet();
        shmem_sync_all();
        break;
    case 2:
        shmem_quiet();
        ST_EQ(shmem_team_sync(SHMEM_TEAM_WORLD), 0);
        break;
    default:
        shmem_barrier(0, 0, n, pSync);
        break;
    }
    for (int pe = 0; pe < n; pe++) {
        if (pe != me && b[pe] != r)
            ST_FAIL("round %ld (sync %d): word of PE %d holds %ld", r, how, pe, b[pe]);
    }
}

int main(void)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    for (int i = 0; i < SHMEM_BARRIER_SYNC_SIZE; i++)
        pSync[i] = SHMEM_SYNC_VALUE;
    long *bank = shmem_calloc(2 * (size_t)n, sizeof(long));
    ST_CHECK(bank != NULL);
    shmem_barrier_all();

    static const char *names[] = {"barrier_all orders puts", "quiet + sync_all orders puts",
                                  "quiet + team_sync orders puts",
                                  "shmem_barrier (active set) orders puts"};
    long r = 1;
    for (int how = 0; how < 4; how++) {
        for (int i = 0; i < ROUNDS; i++, r++)
            round_trip(bank, me, n, r, how);
        ST_OK(names[how]);
    }
    /* the four kinds interleaved: one sequence of signals per team */
    for (int i = 0; i < ROUNDS; i++, r++)
        round_trip(bank, me, n, r, i % 4);
    ST_OK("the four kinds interleaved");
    for (int i = 0; i < SHMEM_BARRIER_SYNC_SIZE; i++)
        ST_EQ(pSync[i], SHMEM_SYNC_VALUE);
    ST_OK("pSync left as SHMEM_SYNC_VALUE");

    shmem_free(bank);
    shmem_finalize();
    return 0;
}
