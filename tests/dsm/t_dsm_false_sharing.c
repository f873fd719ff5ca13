/* The false-sharing case: every rank writes its own objects, and objects of
 * different ranks lie side by side in the same pages. All ranks write at
 * once, many rounds; then every value is checked everywhere. In minipage
 * mode each object is its own minipage, so a rank faults once per object it
 * writes (its first write) however long the others write next to it; in
 * page mode (VMMC_DSM_PAGE=1) the values must still all be right. */
#include <stdint.h>
#include <string.h>

#include "dsm_test.h"

#define PER_RANK 24
#define ROUNDS 200
#define WORDS 5 /* 40-byte objects: many per page */

typedef struct obj {
    long w[WORDS];
} obj_t;

static long value(int r, int i, int round, int k)
{
    return (long)r * 1000000 + i * 1000 + round * 10 + k;
}

int main(void)
{
    vmmc_dsm_params_t p = {0, 8}; /* 8 views: pages spill to the next one */
    DT_OK(vmmc_dsm_init(&p));
    int me = vmmc_dsm_rank(), n = vmmc_dsm_size();
    int nobj = PER_RANK * n;
    obj_t **tab = NULL;
    if (me == 0) {
        tab = vmmc_dsm_malloc((size_t)nobj * sizeof *tab);
        if (!tab)
            DT_FAIL("malloc table: %s", vmmc_dsm_last_error());
        for (int i = 0; i < nobj; i++)
            if (!(tab[i] = vmmc_dsm_malloc(sizeof(obj_t))))
                DT_FAIL("malloc object %d: %s", i, vmmc_dsm_last_error());
        /* objects of different ranks share pages: object 1 is object 0's page
         * seen through the next view (the area is 64M: the default size) */
        if (strcmp(vmmc_dsm_mode(), "minipage") == 0) {
            uintptr_t d = (uintptr_t)tab[1] - (uintptr_t)tab[0];
            if (d % (64u << 20) >= 4096)
                DT_FAIL("objects 0 and 1 are not in one page (%p, %p)", (void *)tab[0],
                        (void *)tab[1]);
        } else if (((uintptr_t)tab[1] ^ (uintptr_t)tab[0]) >= 4096) {
            DT_FAIL("objects 0 and 1 are not in one page (%p, %p)", (void *)tab[0], (void *)tab[1]);
        }
    }
    DT_OK(vmmc_dsm_bcast_ptr((void **)&tab, 0));
    vmmc_dsm_stats_t s0, s1;
    DT_OK(vmmc_dsm_stats(&s0));
    obj_t *mine[PER_RANK];
    for (int j = 0; j < PER_RANK; j++)
        mine[j] = tab[j * n + me]; /* a read of the table, before the writes */
    DT_OK(vmmc_dsm_stats(&s0));
    for (int round = 0; round < ROUNDS; round++)
        for (int j = 0; j < PER_RANK; j++)
            for (int k = 0; k < WORDS; k++)
                mine[j]->w[k] = value(me, j * n + me, round, k);
    DT_OK(vmmc_dsm_stats(&s1));
    DT_OK(vmmc_dsm_barrier());
    for (int i = 0; i < nobj; i++)
        for (int k = 0; k < WORDS; k++)
            DT_EQ(tab[i]->w[k], value(i % n, i, ROUNDS - 1, k));
    DT_OK(vmmc_dsm_barrier());
    if (strcmp(vmmc_dsm_mode(), "minipage") == 0) {
        uint64_t wf = s1.write_faults - s0.write_faults;
        if (wf > PER_RANK)
            DT_FAIL("%llu write faults for %d objects: neighbours' writes took this rank's "
                    "objects away",
                    (unsigned long long)wf, PER_RANK);
    }
    DT_PASS("adjacent minipages written by every rank at once, all values right");
    DT_OK(vmmc_dsm_finalize());
    return 0;
}
