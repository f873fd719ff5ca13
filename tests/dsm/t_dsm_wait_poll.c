/* VMMC_DSM_WAIT_POLL: a thread that waits for a lock, the barrier or a
 * reply of the manager handles its answer itself while the service thread
 * sleeps. Every rank takes a lock the other rank held last ROUNDS times
 * and adds to a shared counter under it, meets the others at a barrier in
 * every round and allocates (a reply of the manager) now and then; the
 * counter must come out exact. With the default some of those waits are
 * answered in the waiting thread (vmmc_dsm_stats polled_waits, summed over
 * the ranks), with VMMC_DSM_WAIT_POLL=0 or across udp hosts (--remote)
 * none is. */
#include <stdlib.h>
#include <string.h>

#include "dsm_test.h"

#define ROUNDS 200
#define LOCK_ID 3

int main(int argc, char **argv)
{
    DT_OK(vmmc_dsm_init(NULL));
    int me = vmmc_dsm_rank(), n = vmmc_dsm_size();
    const char *poll = getenv("VMMC_DSM_WAIT_POLL");
    /* --remote: the ranks are on different hosts, where waiters do not poll */
    int off = (poll && (!strcmp(poll, "0") || !strcmp(poll, "0us"))) ||
              (argc > 1 && !strcmp(argv[1], "--remote"));
    long *count = NULL, *polled = NULL;
    if (me == 0) {
        count = vmmc_dsm_malloc(sizeof *count);
        polled = vmmc_dsm_malloc((size_t)n * sizeof *polled);
        if (!count || !polled)
            DT_FAIL("malloc: %s", vmmc_dsm_last_error());
    }
    DT_OK(vmmc_dsm_bcast_ptr((void **)&count, 0));
    DT_OK(vmmc_dsm_bcast_ptr((void **)&polled, 0));
    for (int k = 0; k < ROUNDS; k++) {
        DT_OK(vmmc_dsm_lock(LOCK_ID));
        *count += 1;
        DT_OK(vmmc_dsm_unlock(LOCK_ID));
        if (k % 20 == 0) {
            void *p = vmmc_dsm_malloc(64);
            if (!p)
                DT_FAIL("malloc: %s", vmmc_dsm_last_error());
            vmmc_dsm_free(p);
        }
        DT_OK(vmmc_dsm_barrier());
    }
    DT_EQ(*count, (long)n * ROUNDS);
    DT_PASS("the counter under the lock is exact");
    vmmc_dsm_stats_t st;
    DT_OK(vmmc_dsm_stats(&st));
    printf("rank %d: %llu of its waits answered in the waiting thread (VMMC_DSM_WAIT_POLL=%s%s)\n",
           me, (unsigned long long)st.polled_waits, poll ? poll : "default",
           off && !poll ? ", ranks on other hosts" : "");
    polled[me] = (long)st.polled_waits;
    DT_OK(vmmc_dsm_barrier());
    if (me == 0) {
        long all = 0;
        for (int r = 0; r < n; r++)
            all += polled[r];
        if (off && all)
            DT_FAIL("%ld waits polled with VMMC_DSM_WAIT_POLL=0 or across hosts", all);
        if (!off && !all)
            DT_FAIL("none of the ranks' waits for %d barriers and locks was answered in the "
                    "waiting thread", 2 * ROUNDS);
        DT_PASS(off ? "no wait polled" : "waits answered in the waiting thread");
    }
    DT_OK(vmmc_dsm_barrier());
    DT_OK(vmmc_dsm_finalize());
    return 0;
}
