/* VMMC_DSM_THREADS=funneled: a fault opens its page while the request
 * travels. The ranks write, in turn, small objects (each its own minipage,
 * several to a page) and a large one (a minipage of several pages) that
 * the others then read (read faults) and write a slot of (write faults);
 * every value read is checked, and after the last round every rank's last
 * write is there. Prefetches go the usual way. With funneled some faults
 * were opened early (vmmc_dsm_stats opened_early, summed over the ranks);
 * with the default (multiple), and across udp hosts (--remote: faults do
 * not poll there), none was. t_dsm_threads_funneled checks that
 * a fault of a second thread ends the process with a message. */
#include <string.h>

#include "dsm_test.h"

#define ROUNDS 40
#define OBJS 12
#define BIG_LONGS (3 * 4096 / 8 + 40) /* four pages */

int main(int argc, char **argv)
{
    DT_OK(vmmc_dsm_init(NULL));
    int me = vmmc_dsm_rank(), n = vmmc_dsm_size();
    const char *th = getenv("VMMC_DSM_THREADS");
    int remote = argc > 1 && !strcmp(argv[1], "--remote");
    int funneled = th && !strcmp(th, "funneled") && !remote;
    long *obj[OBJS], *big = NULL, *early = NULL;
    for (int i = 0; i < OBJS; i++) {
        obj[i] = NULL;
        if (me == 0 && !(obj[i] = vmmc_dsm_malloc(128)))
            DT_FAIL("malloc: %s", vmmc_dsm_last_error());
        DT_OK(vmmc_dsm_bcast_ptr((void **)&obj[i], 0));
    }
    if (me == 0 && (!(big = vmmc_dsm_malloc(BIG_LONGS * sizeof *big)) ||
                    !(early = vmmc_dsm_malloc((size_t)n * sizeof *early))))
        DT_FAIL("malloc: %s", vmmc_dsm_last_error());
    DT_OK(vmmc_dsm_bcast_ptr((void **)&big, 0));
    DT_OK(vmmc_dsm_bcast_ptr((void **)&early, 0));
    for (int k = 0; k < ROUNDS; k++) {
        int w = k % n;
        if (me == w) {
            for (int i = 0; i < OBJS; i++)
                obj[i][0] = (long)k * 1000 + i;
            for (int j = 0; j < BIG_LONGS; j += 97)
                big[j] = (long)k * 100000 + j;
        }
        DT_OK(vmmc_dsm_barrier());
        if (me != w) {
            if (k % 4 == 1) /* the way of vmmc_dsm_prefetch() */
                DT_OK(vmmc_dsm_prefetch(obj[OBJS - 1], 0));
            for (int i = OBJS - 1; i >= 0; i--)
                if (obj[i][0] != (long)k * 1000 + i)
                    DT_FAIL("round %d: object %d holds %ld, not %ld", k, i, obj[i][0],
                            (long)k * 1000 + i);
            for (int j = (BIG_LONGS - 1) / 97 * 97; j >= 0; j -= 97) /* last page first */
                if (big[j] != (long)k * 100000 + j)
                    DT_FAIL("round %d: big[%d] holds %ld, not %ld", k, j, big[j],
                            (long)k * 100000 + j);
            obj[me % OBJS][1 + me] = k;
        }
        DT_OK(vmmc_dsm_barrier());
    }
    for (int r = 0; r < n; r++)
        if (r != (ROUNDS - 1) % n && obj[r % OBJS][1 + r] != ROUNDS - 1)
            DT_FAIL("rank %d's last write reads %ld, not %d", r, obj[r % OBJS][1 + r], ROUNDS - 1);
    DT_PASS("every value read after a fault is the last one written");
    vmmc_dsm_stats_t st;
    DT_OK(vmmc_dsm_stats(&st));
    printf("rank %d: %llu of %llu faults opened while the request travelled (VMMC_DSM_THREADS=%s)\n",
           me, (unsigned long long)st.opened_early,
           (unsigned long long)(st.read_faults + st.write_faults), th ? th : "default");
    early[me] = (long)st.opened_early;
    DT_OK(vmmc_dsm_barrier());
    if (me == 0) {
        long all = 0;
        for (int r = 0; r < n; r++)
            all += early[r];
        if (funneled && !all)
            DT_FAIL("VMMC_DSM_THREADS=funneled, and no fault opened its page early");
        if (!funneled && all)
            DT_FAIL("%ld faults opened their page early without VMMC_DSM_THREADS=funneled or "
                    "across udp hosts", all);
        DT_PASS(funneled ? "faults opened early" : "no fault opened early");
    }
    DT_OK(vmmc_dsm_barrier());
    DT_OK(vmmc_dsm_finalize());
    return 0;
}
