/* A rank that computes still serves: rank 1 owns a minipage and then
 * computes in a loop that calls nothing (it only reads a word of its own
 * copy of another minipage, which does not fault while the copy is
 * valid). Rank 0 reads rank 1's minipage (served by rank 1's service
 * thread while its application thread computes), then writes the word
 * rank 1 is reading (its copy must be invalidated, again by the service
 * thread); only then does rank 1's loop see the change and stop. Without
 * service during computation rank 0 would wait for ever (and the test time
 * out). Other ranks only meet at the barriers. Both sides' delay counters
 * must add up, and rank 1 must have recorded how long those two requests
 * waited for it (vmmc_dsm_stats serve_*). */
#include "dsm_test.h"

int main(void)
{
    DT_OK(vmmc_dsm_init(NULL));
    int me = vmmc_dsm_rank();
    long *a = NULL;
    volatile long *stop = NULL;
    if (me == 1) {
        a = vmmc_dsm_malloc(512 * sizeof *a);
        stop = vmmc_dsm_malloc(sizeof *stop);
        if (!a || !stop)
            DT_FAIL("malloc: %s", vmmc_dsm_last_error());
        for (int i = 0; i < 512; i++)
            a[i] = i * 3;
        *stop = 0;
    }
    DT_OK(vmmc_dsm_bcast_ptr((void **)&a, 1));
    DT_OK(vmmc_dsm_bcast_ptr((void **)&stop, 1));
    DT_OK(vmmc_dsm_barrier());
    if (me == 1) {
        unsigned long x = 1, spins = 0;
        while (*stop == 0) { /* compute: no call, no fault while the copy is valid */
            for (int k = 0; k < 1000; k++)
                x = x * 6364136223846793005ul + 1442695040888963407ul;
            spins++;
        }
        DT_EQ(*stop, 77);
        printf("rank 1 computed %lu rounds (x=%lx) while serving\n", spins, x & 0xff);
    } else if (me == 0) {
        long sum = 0;
        for (int i = 0; i < 512; i++)
            sum += a[i];
        DT_EQ(sum, 3L * 511 * 512 / 2);
        *stop = 77;
    }
    DT_OK(vmmc_dsm_barrier());
    vmmc_dsm_stats_t s;
    DT_OK(vmmc_dsm_stats(&s));
    if (me == 1 && s.requests_served < 2)
        DT_FAIL("rank 1 served %llu requests", (unsigned long long)s.requests_served);
    uint64_t h = 0;
    for (int i = 0; i < 16; i++)
        h += s.delay_hist[i];
    DT_EQ(h, s.delay_count);
    if (s.delay_count && s.delay_ns_max * s.delay_count < s.delay_ns_sum)
        DT_FAIL("delay max %llu below the mean", (unsigned long long)s.delay_ns_max);
    /* the serving side: rank 1 served rank 0's read and invalidation while
     * computing (both ranks run on one kernel, here and in the netns run,
     * so rank 0's stamps are comparable) */
    if (me == 1 && s.serve_count < 2)
        DT_FAIL("rank 1 recorded the serving delay of %llu requests",
                (unsigned long long)s.serve_count);
    h = 0;
    for (int i = 0; i < 16; i++)
        h += s.serve_hist[i];
    DT_EQ(h, s.serve_count);
    if (s.serve_count && s.serve_ns_max * s.serve_count < s.serve_ns_sum)
        DT_FAIL("serve max %llu below the mean", (unsigned long long)s.serve_ns_max);
    if (s.serve_wait_ns_sum > s.serve_ns_sum || s.serve_wait_ns_max > s.serve_ns_max)
        DT_FAIL("waiting for the service thread (%llu ns, max %llu) longer than the whole "
                "serving delay (%llu ns, max %llu)",
                (unsigned long long)s.serve_wait_ns_sum, (unsigned long long)s.serve_wait_ns_max,
                (unsigned long long)s.serve_ns_sum, (unsigned long long)s.serve_ns_max);
    if (me == 1)
        printf("rank 1 served %llu requests, %.1f us each on average (%.1f us before its handler "
               "ran), at most %.1f us\n",
               (unsigned long long)s.serve_count, s.serve_ns_sum / 1e3 / (double)s.serve_count,
               s.serve_wait_ns_sum / 1e3 / (double)s.serve_count, s.serve_ns_max / 1e3);
    DT_PASS("a computing rank served its minipages");
    DT_OK(vmmc_dsm_finalize());
    return 0;
}
