/* A PE waiting for its own condition while a peer sends it a stream of
 * atomics keeps spinning, and answers them itself, rather than sleeping
 * between two of them (each of which would then wait for the target's
 * link thread to be woken, and wake the waiter for nothing).
 *
 * Run with VMMC_SPIN=0 (vmmc_wait does not spin by itself), a spin of
 * VMMC_SHMEM_SPIN=100ms and sleeps of VMMC_SHMEM_SLEEP=1s (t_p2p.cmake).
 * PE 1 waits for a flag; PE 0 lets it fall asleep (300 ms), then sends it
 * 200 fetch-adds 2 ms apart (a stream that outlasts the spin), then sets
 * the flag. The waiting thread's voluntary context switches during the
 * stream (/proc/thread-self/status: it blocked) must stay well under one
 * per atomic: across hosts, a waiter that slept again after each atomic
 * woke it makes about 200; on one host the atomics are the target's own
 * instructions and the ring after each one ends a sleep, which spins again
 * for 100 ms. The fetched values and the final count are checked too. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "shmem_test.h"

#define N 200

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* This thread's voluntary context switches so far, or -1. */
static long vcsw(void)
{
    FILE *f = fopen("/proc/thread-self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long v = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1)
            break;
    fclose(f);
    return v;
}

int main(void)
{
    shmem_init();
    int me = shmem_my_pe();
    ST_CHECK(shmem_n_pes() == 2);
    long *flag = shmem_calloc(1, sizeof(long));
    long *ctr = shmem_calloc(1, sizeof(long));
    ST_CHECK(flag && ctr);
    shmem_barrier_all();
    if (me == 0) {
        nap_ms(300); /* PE 1 is asleep by now */
        for (long i = 0; i < N; i++) {
            ST_EQ(shmem_long_atomic_fetch_add(ctr, 1, 1), i);
            nap_ms(2);
        }
        shmem_long_atomic_set(flag, 1, 1);
    } else {
        long v0 = vcsw();
        shmem_long_wait_until(flag, SHMEM_CMP_EQ, 1);
        long v1 = vcsw();
        ST_EQ(*ctr, N);
        if (v0 >= 0 && v1 >= 0) {
            printf("waiter blocked %ld times during %d atomics\n", v1 - v0, N);
            if (v1 - v0 >= N / 4)
                ST_FAIL("the waiter blocked %ld times during %d atomics (at most %d expected)",
                        v1 - v0, N, N / 4 - 1);
        }
    }
    shmem_barrier_all();
    ST_OK("a waiter serving a stream of atomics keeps spinning");
    shmem_free(flag);
    shmem_free(ctr);
    shmem_finalize();
    return 0;
}
