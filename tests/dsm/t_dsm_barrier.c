/* The barrier: in round k every rank writes k into its own slot, meets the
 * others, and must then see k in every slot; then meets them again before
 * anybody writes k+1. */
#include "dsm_test.h"

#define ROUNDS 60

int main(void)
{
    DT_OK(vmmc_dsm_init(NULL));
    int me = vmmc_dsm_rank(), n = vmmc_dsm_size();
    long **slot = NULL;
    if (me == 0) {
        slot = vmmc_dsm_malloc((size_t)n * sizeof *slot);
        if (!slot)
            DT_FAIL("malloc: %s", vmmc_dsm_last_error());
        for (int r = 0; r < n; r++)
            if (!(slot[r] = vmmc_dsm_malloc(sizeof(long))))
                DT_FAIL("malloc: %s", vmmc_dsm_last_error());
    }
    DT_OK(vmmc_dsm_bcast_ptr((void **)&slot, 0));
    long *mine = slot[me];
    for (long k = 1; k <= ROUNDS; k++) {
        *mine = k;
        DT_OK(vmmc_dsm_barrier());
        for (int r = 0; r < n; r++)
            DT_EQ(*slot[r], k);
        DT_OK(vmmc_dsm_barrier());
    }
    DT_PASS("every round's writes seen after the barrier");
    /* Every answer wakes its waiter at once: a lost wake-up shows as a wait
     * that ran into the 100 ms death check (every one of the 2 * ROUNDS
     * barriers, and the faults: 344 when the wake-ups were lost). On a
     * loaded machine a few do anyway (a rank off its processor that long):
     * up to half of the barriers pass. */
    vmmc_dsm_stats_t st;
    DT_OK(vmmc_dsm_stats(&st));
    if (st.wait_timeouts > ROUNDS)
        DT_FAIL("%llu waits ended at the 100 ms check, not woken by their answer (%d barriers)",
                (unsigned long long)st.wait_timeouts, 2 * ROUNDS);
    DT_PASS("every barrier wait woken by its answer");
    DT_OK(vmmc_dsm_finalize());
    return 0;
}
