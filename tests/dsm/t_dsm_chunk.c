/* Chunking: allocations with one chunk id share a minipage, so one fault
 * brings them all; the chunk stops growing once another rank holds a copy
 * (a new minipage starts); freeing a chunk's allocations one by one frees
 * the minipage with the last. */
#include <stdint.h>
#include <string.h>

#include "dsm_test.h"

int main(void)
{
    DT_OK(vmmc_dsm_init(NULL));
    int me = vmmc_dsm_rank(), n = vmmc_dsm_size();
    int page = getenv("VMMC_DSM_PAGE") && atoi(getenv("VMMC_DSM_PAGE"));
    long *part[4] = {0};
    if (me == 0) {
        for (int i = 0; i < 4; i++) {
            if (!(part[i] = vmmc_dsm_malloc_chunk(3 * sizeof(long), 7)))
                DT_FAIL("malloc_chunk: %s", vmmc_dsm_last_error());
            for (int k = 0; k < 3; k++)
                part[i][k] = 10 * i + k;
        }
        /* one minipage: consecutive, in the same view */
        for (int i = 1; i < 4; i++)
            if ((char *)part[i] != (char *)part[i - 1] + 3 * sizeof(long) + 8)
                DT_FAIL("chunk allocations %d and %d not adjacent (%p, %p)", i - 1, i,
                        (void *)part[i - 1], (void *)part[i]);
    }
    for (int i = 0; i < 4; i++)
        DT_OK(vmmc_dsm_bcast_ptr((void **)&part[i], 0));
    vmmc_dsm_stats_t s0, s1;
    DT_OK(vmmc_dsm_stats(&s0));
    long sum = 0;
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 3; k++)
            sum += part[i][k];
    DT_OK(vmmc_dsm_stats(&s1));
    DT_EQ(sum, 10 * (0 + 1 + 2 + 3) * 3 + 4 * (0 + 1 + 2));
    if (me != 0 && !page)
        DT_EQ(s1.read_faults - s0.read_faults, 1);
    DT_OK(vmmc_dsm_barrier());
    DT_PASS("a chunk's allocations come in one fault");

    /* others hold copies now: the next allocation of chunk 7 starts anew */
    if (me == 0) {
        long *more = vmmc_dsm_malloc_chunk(sizeof(long), 7);
        if (!more)
            DT_FAIL("malloc_chunk: %s", vmmc_dsm_last_error());
        if (!page && (char *)more == (char *)part[3] + 32)
            DT_FAIL("the chunk grew while rank 1 holds a copy");
        *more = 5;
        vmmc_dsm_free(more);
        for (int i = 0; i < 4; i++)
            vmmc_dsm_free(part[i]);
        vmmc_dsm_free(part[0]); /* all gone: a second free is refused */
        if (!page && !strstr(vmmc_dsm_last_error(), "not an allocation"))
            DT_FAIL("double free of a chunk allocation not seen: %s", vmmc_dsm_last_error());
    }
    DT_OK(vmmc_dsm_barrier());
    (void)n;
    DT_PASS("chunk growth stops at shared copies; frees");
    DT_OK(vmmc_dsm_finalize());
    return 0;
}
