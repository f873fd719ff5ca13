/* A waiting PE is released by the update it waits for, not by the end of
 * its bounded sleep: run with no spinning (VMMC_SHMEM_SPIN=0, VMMC_SPIN=0)
 * and sleeps of VMMC_SHMEM_SLEEP=1s (t_p2p.cmake), 150 round trips of each kind, each side
 * napping 2 ms before it acts so that the other is asleep, finish in about
 * a second when every wake-up works, and take 150 s (past the test's time
 * limit) when one kind of wake-up is lost:
 *  - put + fence: a store (one host) or a deliberate update (another host),
 *    whose landing wakes the sleeper; across hosts its condition is then
 *    reported by the progress hook of the wait, else vmmc_wait sleeps on;
 *  - atomic add: the target's memory changes by an atomic (across hosts
 *    the target executes it and wakes itself; the ring behind it sends
 *    nothing);
 *  - barrier_all: one flag write per round. */
#include <stdlib.h>
#include <time.h>

#include "shmem_test.h"

#define ROUNDS 150

/* 2 ms, so that the peer waits asleep rather than in its spin (the spin
 * runs at least 256 polls whatever VMMC_SHMEM_SPIN says). */
static void nap(void)
{
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
}

int main(void)
{
    shmem_init();
    int me = shmem_my_pe();
    ST_CHECK(shmem_n_pes() == 2);
    long *ping = shmem_calloc(1, sizeof(long));
    long *ctr = shmem_calloc(1, sizeof(long));
    ST_CHECK(ping && ctr);
    shmem_barrier_all();

    for (long i = 1; i <= ROUNDS; i++) {
        if (me == (int)(i & 1)) {
            shmem_long_wait_until(ping, SHMEM_CMP_EQ, i);
        } else {
            nap(); /* the other PE is asleep by now */
            shmem_long_p(ping, i, 1 - me);
            shmem_fence();
        }
    }
    shmem_barrier_all();
    ST_OK("put + fence wakes the waiting PE");

    for (long i = 1; i <= ROUNDS; i++) {
        if (me == 1) {
            shmem_long_wait_until(ctr, SHMEM_CMP_GE, 2 * i);
            nap();
            shmem_long_atomic_add(ctr, 1, 0); /* back to PE 0 */
        } else {
            nap();
            shmem_long_atomic_add(ctr, 2, 1);
            shmem_long_wait_until(ctr, SHMEM_CMP_GE, i);
        }
    }
    ST_EQ(*ctr, me == 1 ? 2 * ROUNDS : ROUNDS);
    shmem_barrier_all();
    ST_OK("an atomic wakes the waiting PE");

    for (int i = 0; i < ROUNDS; i++) {
        if (me == i % 2)
            nap();
        shmem_barrier_all();
    }
    ST_OK("barriers");
    shmem_free(ping);
    shmem_free(ctr);
    shmem_finalize();
    return 0;
}
