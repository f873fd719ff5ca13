/* vmmc's spin yields its core while the rank waits in the DSM, and only
 * then, and only when asked to (VMMC_DSM_SPIN_YIELD=y) or, by default
 * (auto), when another rank's affinity mask meets this rank's (the test
 * works that out itself from the masks the ranks write into shared memory;
 * it runs bound to one processor, with a processor per rank, and free),
 * and only in the first VMMC_DSM_YIELD_WINDOW of a wait (0: never). Run with a long
 * VMMC_SPIN, so that the service thread spins through every wait.
 *
 * Phase 1: rank 0 reads minipages rank 1 has just written, with barriers
 * in between: its application thread waits in the DSM again and again while
 * its service thread spins, so the spin yielded (spin_yields grows; when
 * it should not yield, it must stay 0 in every rank).
 * Phase 2: rank 1 computes in a loop that calls nothing but
 * vmmc_dsm_stats() while rank 0 reads its minipages (requests rank 1's
 * service thread serves, then spins on): from the start of the loop until
 * it has served one (or its first fault, which ends the window), its spin
 * must not have yielded once (yielding then would hand the core to the
 * computation and leave requests waiting). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <string.h>

#include "dsm_test.h"

#define N 40

int main(void)
{
    DT_OK(vmmc_dsm_init(NULL));
    int me = vmmc_dsm_rank();
    int np = vmmc_dsm_size();
    const char *y = getenv("VMMC_DSM_SPIN_YIELD");
    /* auto: may another rank run on this rank's processors? */
    volatile unsigned char *masks = NULL; /* np masks of CPU_SETSIZE bits */
    size_t mb = CPU_SETSIZE / 8;
    if (me == 0 && !(masks = vmmc_dsm_malloc((size_t)np * mb)))
        DT_FAIL("malloc: %s", vmmc_dsm_last_error());
    DT_OK(vmmc_dsm_bcast_ptr((void **)&masks, 0));
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        DT_FAIL("sched_getaffinity");
    DT_OK(vmmc_dsm_lock(1)); /* (the masks share a page; one writer at a time) */
    for (size_t b = 0; b < mb; b++)
        masks[(size_t)me * mb + b] = ((unsigned char *)&set)[b];
    DT_OK(vmmc_dsm_unlock(1));
    DT_OK(vmmc_dsm_barrier());
    int ranks = 0, cpus = 0;
    unsigned char all[CPU_SETSIZE / 8] = {0};
    for (int r = 0; r < np; r++) {
        int meet = 0;
        for (size_t b = 0; b < mb; b++)
            meet |= masks[(size_t)r * mb + b] & ((unsigned char *)&set)[b];
        if (!meet)
            continue;
        ranks++;
        for (size_t b = 0; b < mb; b++)
            all[b] |= masks[(size_t)r * mb + b];
    }
    for (size_t b = 0; b < mb; b++)
        cpus += __builtin_popcount(all[b]);
    int want_yield = y && !strcmp(y, "y") ? 1 : y && !strcmp(y, "n") ? 0 : ranks > 1;
    const char *win = getenv("VMMC_DSM_YIELD_WINDOW");
    if (win && !strcmp(win, "0"))
        want_yield = 0; /* no time into a wait to yield in */
    if (me == 0)
        printf("%d ranks may run on rank 0's %d processors: the spin should %syield\n", ranks, cpus,
               want_yield ? "" : "not ");
    DT_OK(vmmc_dsm_barrier());
    volatile long **o = NULL;
    if (me == 1) {
        o = vmmc_dsm_malloc(N * sizeof *o);
        if (!o)
            DT_FAIL("malloc: %s", vmmc_dsm_last_error());
        for (int i = 0; i < N; i++)
            if (!(o[i] = vmmc_dsm_malloc(128)))
                DT_FAIL("malloc: %s", vmmc_dsm_last_error());
    }
    DT_OK(vmmc_dsm_bcast_ptr((void **)&o, 1));
    DT_OK(vmmc_dsm_barrier());
    volatile long *obj[N];
    for (int i = 0; i < N; i++)
        obj[i] = o[i];
    vmmc_dsm_stats_t s0, s1;
    DT_OK(vmmc_dsm_stats(&s0));
    for (int k = 0; k < N; k++) {
        if (me == 1)
            obj[k][0] = 1000 + k;
        DT_OK(vmmc_dsm_barrier());
        if (me == 0)
            DT_EQ(obj[k][0], 1000 + k);
        DT_OK(vmmc_dsm_barrier());
    }
    DT_OK(vmmc_dsm_stats(&s1));
    uint64_t yields = s1.spin_yields - s0.spin_yields;
    if (me == 0 && want_yield && yields == 0)
        DT_FAIL("rank 0 waited %d times in faults and barriers, and its spin never yielded",
                2 * N);
    if (!want_yield)
        DT_EQ(yields, 0); /* (every rank) */

    volatile long *stop = obj[0];
    if (me == 1) { /* rank 1 owns every object again, rank 0 has no copy */
        for (int i = 0; i < N; i++)
            obj[i][0] = 2000 + i;
        stop[0] = 0;
    }
    DT_OK(vmmc_dsm_barrier());
    if (me == 1) {
        vmmc_dsm_stats_t a, cur, last;
        DT_OK(vmmc_dsm_stats(&a));
        last = a;
        unsigned long x = 1;
        for (;;) { /* until it served a request, or a fault ends the window */
            for (int k = 0; k < 1000; k++)
                x = x * 6364136223846793005ul + 1442695040888963407ul;
            DT_OK(vmmc_dsm_stats(&cur));
            if (cur.read_faults + cur.write_faults != a.read_faults + a.write_faults)
                break; /* it waited in the DSM since the last look */
            last = cur;
            if (cur.requests_served != a.requests_served || stop[0] == 77)
                break;
        }
        while (stop[0] != 77) /* (faults once rank 0 has written it) */
            ;
        DT_EQ(last.spin_yields - a.spin_yields, 0);
        printf("rank 1 served %llu requests while computing (x=%lx)\n",
               (unsigned long long)(last.requests_served - a.requests_served), x & 0xff);
    } else if (me == 0) {
        for (int i = 1; i < N; i++)
            DT_EQ(obj[i][0], 2000 + i);
        stop[0] = 77;
    }
    DT_OK(vmmc_dsm_barrier());
    DT_PASS("t_dsm_yield");
    DT_OK(vmmc_dsm_finalize());
    return 0;
}
