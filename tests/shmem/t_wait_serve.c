/* A PE waiting for its own condition while a peer on another host sends
 * it a stream of requests keeps spinning, and answers them itself, rather
 * than sleeping between two of them (each would then wait for the
 * target's udp link thread to be woken; an atomic also woke the waiter for
 * nothing, and a timed-out sleep stopped the link thread's spin).
 *
 *   t_wait_serve amo   run with VMMC_SPIN=0 (vmmc_wait does not spin by
 *                      itself), VMMC_SHMEM_SPIN=100ms, VMMC_SHMEM_SLEEP=1s
 *   t_wait_serve get   the same with sleeps of 1 ms (t_p2p.cmake)
 *
 * amo: PE 1 waits for a flag; PE 0 lets it fall asleep (300 ms), then
 * sends it 200 fetch-adds 2 ms apart, a stream that outlasts the spin,
 * then sets the flag: the atomic that wakes the sleeper must send it back
 * to its spin. get: PE 0 sets the flag to 1 after 300 ms, then sends 200
 * 8-byte gets 2 ms apart, then sets it to 2; PE 1 counts from 1 to 2: the
 * gets (which wake nobody) must keep it spinning, where it slept again
 * after its spin and then every 1 ms. The waiting thread's voluntary
 * context switches (/proc/thread-self/status: it blocked) must stay well
 * under one per request across hosts: without the rule, ~200 (amo) and
 * ~150 (get). On one host (shm: loads and atomic instructions, nothing to
 * serve) the count is printed, not checked. The fetched values and the
 * final count are checked too. */
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

int main(int argc, char **argv)
{
    int get = argc > 1 && !strcmp(argv[1], "get");
    if (argc < 2 || (!get && strcmp(argv[1], "amo"))) {
        fprintf(stderr, "usage: t_wait_serve amo|get\n");
        return 2;
    }
    shmem_init();
    int me = shmem_my_pe();
    ST_CHECK(shmem_n_pes() == 2);
    long *flag = shmem_calloc(1, sizeof(long));
    long *ctr = shmem_calloc(1, sizeof(long));
    long *val = shmem_calloc(1, sizeof(long));
    ST_CHECK(flag && ctr && val);
    *val = 1000 + me;
    /* across hosts: the other PE's heap is not mapped here */
    int remote = shmem_ptr(val, 1 - me) == NULL;
    shmem_barrier_all();
    if (me == 0) {
        nap_ms(300); /* PE 1 is asleep by now */
        if (get)
            shmem_long_atomic_set(flag, 1, 1);
        for (long i = 0; i < N; i++) {
            if (get) {
                long v = 0;
                shmem_getmem(&v, val, sizeof v, 1);
                ST_EQ(v, 1001);
            } else {
                ST_EQ(shmem_long_atomic_fetch_add(ctr, 1, 1), i);
            }
            nap_ms(2);
        }
        shmem_long_atomic_set(flag, 2, 1);
    } else {
        if (get)
            shmem_long_wait_until(flag, SHMEM_CMP_EQ, 1);
        long v0 = vcsw();
        shmem_long_wait_until(flag, SHMEM_CMP_EQ, 2);
        long v1 = vcsw();
        ST_EQ(*ctr, get ? 0 : N);
        if (v0 >= 0 && v1 >= 0) {
            printf("waiter blocked %ld times during %d %s (%s)\n", v1 - v0, N,
                   get ? "gets" : "atomics", remote ? "across hosts" : "one host: not checked");
            if (remote && v1 - v0 >= N / 4)
                ST_FAIL("the waiter blocked %ld times during %d requests (at most %d expected)",
                        v1 - v0, N, N / 4 - 1);
        }
    }
    shmem_barrier_all();
    ST_OK(get ? "a waiter serving a stream of gets keeps spinning"
              : "a waiter serving a stream of atomics keeps spinning");
    shmem_free(flag);
    shmem_free(ctr);
    shmem_free(val);
    shmem_finalize();
    return 0;
}
