/* VMMC_DSM_WAIT_POLL: a thread that waits for a lock, the barrier, a
 * reply of the manager or a minipage it faulted on handles its answer
 * itself while the service thread sleeps. Every rank takes a lock the
 * other rank held last ROUNDS times and adds to a shared counter under it,
 * meets the others at a barrier in every round and allocates (a reply of
 * the manager) now and then; the counter must come out exact. Then the
 * ranks write, in turn, objects the others read (read faults, every value
 * checked) and write again (write faults). With the default some of those
 * waits are answered in the waiting thread (vmmc_dsm_stats polled_waits,
 * summed over the ranks), faults among them (polled_faults); with
 * VMMC_DSM_WAIT_POLL=0 or across udp hosts (--remote) none is, and with
 * VMMC_DSM_FAULT_POLL=n no fault is. */
#include <stdlib.h>
#include <string.h>

#include "dsm_test.h"

#define ROUNDS 200
#define LOCK_ID 3
#define FAULT_ROUNDS 60
#define OBJS 8

static int is_no(const char *v)
{
    return v && (!strcmp(v, "n") || !strcmp(v, "no") || !strcmp(v, "0") || !strcmp(v, "false"));
}

int main(int argc, char **argv)
{
    DT_OK(vmmc_dsm_init(NULL));
    int me = vmmc_dsm_rank(), n = vmmc_dsm_size();
    const char *poll = getenv("VMMC_DSM_WAIT_POLL");
    /* --remote: the ranks are on different hosts, where waiters do not poll */
    int off = (poll && (!strcmp(poll, "0") || !strcmp(poll, "0us"))) ||
              (argc > 1 && !strcmp(argv[1], "--remote"));
    int faults_off = off || is_no(getenv("VMMC_DSM_FAULT_POLL"));
    long *count = NULL, *polled = NULL, *polled_f = NULL;
    if (me == 0) {
        count = vmmc_dsm_malloc(sizeof *count);
        polled = vmmc_dsm_malloc((size_t)n * sizeof *polled);
        polled_f = vmmc_dsm_malloc((size_t)n * sizeof *polled_f);
        if (!count || !polled || !polled_f)
            DT_FAIL("malloc: %s", vmmc_dsm_last_error());
    }
    DT_OK(vmmc_dsm_bcast_ptr((void **)&count, 0));
    DT_OK(vmmc_dsm_bcast_ptr((void **)&polled, 0));
    DT_OK(vmmc_dsm_bcast_ptr((void **)&polled_f, 0));
    long *obj[OBJS];
    for (int i = 0; i < OBJS; i++) {
        obj[i] = NULL;
        if (me == 0 && !(obj[i] = vmmc_dsm_malloc(128)))
            DT_FAIL("malloc: %s", vmmc_dsm_last_error());
        DT_OK(vmmc_dsm_bcast_ptr((void **)&obj[i], 0));
    }
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
    /* Rank k % n writes every object, the others read them (read faults),
     * then each reader adds its rank to one of them (write faults). */
    for (int k = 0; k < FAULT_ROUNDS; k++) {
        int w = k % n;
        if (me == w)
            for (int i = 0; i < OBJS; i++)
                obj[i][0] = (long)k * 1000 + i;
        DT_OK(vmmc_dsm_barrier());
        if (me != w) {
            for (int i = 0; i < OBJS; i++)
                if (obj[i][0] != (long)k * 1000 + i)
                    DT_FAIL("round %d: object %d holds %ld, not %ld", k, i, obj[i][0],
                            (long)k * 1000 + i);
            obj[me % OBJS][1 + me] = k;
        }
        DT_OK(vmmc_dsm_barrier());
    }
    for (int r = 0; r < n; r++) /* the last write of every rank is there */
        if (r != (FAULT_ROUNDS - 1) % n && obj[r % OBJS][1 + r] != FAULT_ROUNDS - 1)
            DT_FAIL("rank %d's last write reads %ld, not %d", r, obj[r % OBJS][1 + r],
                    FAULT_ROUNDS - 1);
    DT_PASS("every value read after a fault is the last one written");
    vmmc_dsm_stats_t st;
    DT_OK(vmmc_dsm_stats(&st));
    printf("rank %d: %llu of its waits answered in the waiting thread, %llu of them faults "
           "(VMMC_DSM_WAIT_POLL=%s%s)\n",
           me, (unsigned long long)st.polled_waits, (unsigned long long)st.polled_faults,
           poll ? poll : "default", off && !poll ? ", ranks on other hosts" : "");
    polled[me] = (long)st.polled_waits;
    polled_f[me] = (long)st.polled_faults;
    DT_OK(vmmc_dsm_barrier());
    if (me == 0) {
        long all = 0, all_f = 0;
        for (int r = 0; r < n; r++) {
            all += polled[r];
            all_f += polled_f[r];
        }
        if (off && all)
            DT_FAIL("%ld waits polled with VMMC_DSM_WAIT_POLL=0 or across hosts", all);
        if (!off && !all)
            DT_FAIL("none of the ranks' waits for %d barriers and locks was answered in the "
                    "waiting thread", 2 * ROUNDS);
        DT_PASS(off ? "no wait polled" : "waits answered in the waiting thread");
        if (faults_off && all_f)
            DT_FAIL("%ld faults polled with VMMC_DSM_FAULT_POLL=n, VMMC_DSM_WAIT_POLL=0 or "
                    "across hosts", all_f);
        if (!faults_off && !all_f)
            DT_FAIL("none of the ranks' %d read faults was answered in the faulting thread",
                    FAULT_ROUNDS * OBJS * (n - 1));
        DT_PASS(faults_off ? "no fault polled" : "faults answered in the faulting thread");
    }
    DT_OK(vmmc_dsm_barrier());
    DT_OK(vmmc_dsm_finalize());
    return 0;
}
