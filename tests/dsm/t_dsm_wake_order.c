/* A handler sends what it posted before the threads it woke run.
 *
 * Each rank's threads share one processor here (the test binds itself
 * before the DSM starts its service thread), so a woken application
 * thread may take the processor from the service thread that woke it.
 * If that thread had woken it before sending what the answer's handler
 * posted (a barrier's release of the other ranks, a minipage's DONE to
 * its home), those messages would wait while the application computes.
 * So when rank 0's fault or barrier returns, its outbox is empty
 * (vmmc_dsm_stats().outbox), and the releases of the others have been sent
 * (messages_sent). Only rank 0 looks: the other ranks are quiet then (they
 * wait in the barrier, or sleep before it), while rank 0's read fault
 * keeps rank 1's service thread busy when rank 1 leaves its barrier. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <unistd.h>

#include "dsm_test.h"

#define ROUNDS 200

static void outbox_empty(const char *after, int round)
{
    vmmc_dsm_stats_t s;
    DT_OK(vmmc_dsm_stats(&s));
    if (s.outbox != 0)
        DT_FAIL("round %d: %llu messages still unsent when %s returned", round,
                (unsigned long long)s.outbox, after);
}

int main(void)
{
    int cpu = sched_getcpu();
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu < 0 ? 0 : cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0)
        perror("sched_setaffinity (the test runs unbound)");
    DT_OK(vmmc_dsm_init(NULL));
    int me = vmmc_dsm_rank(), n = vmmc_dsm_size();
    long **obj = NULL;
    if (me == 0) {
        /* a page each, so that their homes differ (and DONE goes away) */
        obj = vmmc_dsm_malloc(ROUNDS * sizeof *obj);
        if (!obj)
            DT_FAIL("malloc: %s", vmmc_dsm_last_error());
        for (int k = 0; k < ROUNDS; k++)
            if (!(obj[k] = vmmc_dsm_malloc(4096)))
                DT_FAIL("malloc: %s", vmmc_dsm_last_error());
    }
    DT_OK(vmmc_dsm_bcast_ptr((void **)&obj, 0));
    for (int k = 0; k < ROUNDS; k++) {
        if (me == 1)
            obj[k][0] = k + 1; /* rank 1 owns it, nobody else has a copy */
        if (me != 0)
            usleep(200); /* rank 0 waits in the barrier: its service thread releases */
        vmmc_dsm_stats_t s0, s1;
        DT_OK(vmmc_dsm_stats(&s0));
        DT_OK(vmmc_dsm_barrier());
        DT_OK(vmmc_dsm_stats(&s1));
        if (me == 0 && s1.outbox != 0)
            DT_FAIL("round %d: %llu messages still unsent when the barrier returned", k,
                    (unsigned long long)s1.outbox);
        if (me == 0 && s1.messages_sent - s0.messages_sent < (uint64_t)(n - 1))
            DT_FAIL("round %d: the barrier returned on rank 0 before the release of the %d "
                    "others was sent (%llu messages sent)",
                    k, n - 1, (unsigned long long)(s1.messages_sent - s0.messages_sent));
        if (me == 0) {
            DT_EQ(obj[k][0], k + 1); /* a read fault */
            outbox_empty("a read fault", k);
        }
        DT_OK(vmmc_dsm_barrier());
    }
    DT_PASS("every release and DONE sent before the woken thread ran");
    DT_OK(vmmc_dsm_finalize());
    return 0;
}
