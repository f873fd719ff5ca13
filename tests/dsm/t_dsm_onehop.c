/* One-hop reads: rank 1 owns a minipage and writes it every round; rank 2
 * reads it after each write. After its first read (through the manager,
 * rank 0) rank 2 knows the owner and asks it directly: the manager forwards
 * nothing more, and rank 1 takes rank 2's copy back itself before each
 * write. Values checked every round; with VMMC_DSM_ONEHOP=n the same run
 * goes through the manager every time. Needs 3 ranks. */
#include <string.h>

#include "dsm_test.h"

#define ROUNDS 50

int main(void)
{
    DT_OK(vmmc_dsm_init(NULL));
    int me = vmmc_dsm_rank(), n = vmmc_dsm_size();
    if (n < 3)
        DT_FAIL("needs 3 ranks, has %d", n);
    const char *oh = getenv("VMMC_DSM_ONEHOP");
    int onehop = !(oh && (strcmp(oh, "n") == 0 || strcmp(oh, "no") == 0 || strcmp(oh, "0") == 0));
    long *cell = NULL;
    if (me == 1 && !(cell = vmmc_dsm_malloc(64 * sizeof *cell)))
        DT_FAIL("malloc: %s", vmmc_dsm_last_error());
    DT_OK(vmmc_dsm_bcast_ptr((void **)&cell, 1));
    vmmc_dsm_stats_t s0, s1;
    DT_OK(vmmc_dsm_stats(&s0));
    for (long i = 1; i <= ROUNDS; i++) {
        if (me == 1)
            for (int k = 0; k < 64; k++)
                cell[k] = i * 100 + k;
        DT_OK(vmmc_dsm_barrier());
        if (me == 2)
            for (int k = 0; k < 64; k++)
                DT_EQ(cell[k], i * 100 + k);
        DT_OK(vmmc_dsm_barrier());
    }
    DT_OK(vmmc_dsm_stats(&s1));
    uint64_t fw = s1.forwards - s0.forwards;
    if (me == 0) {
        if (onehop && fw > 2)
            DT_FAIL("the manager forwarded %llu requests in %d rounds: reads did not go "
                    "straight to the owner",
                    (unsigned long long)fw, ROUNDS);
        if (!onehop && fw < ROUNDS)
            DT_FAIL("the manager forwarded only %llu requests in %d rounds without one-hop",
                    (unsigned long long)fw, ROUNDS);
    }
    if (me == 1 && s1.requests_served - s0.requests_served < ROUNDS)
        DT_FAIL("the owner served %llu reads in %d rounds",
                (unsigned long long)(s1.requests_served - s0.requests_served), ROUNDS);
    DT_OK(vmmc_dsm_barrier());
    DT_PASS(onehop ? "reads straight from the owner, every value right"
                   : "reads through the manager, every value right");
    DT_OK(vmmc_dsm_finalize());
    return 0;
}
