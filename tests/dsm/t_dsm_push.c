/* push and prefetch: after rank 0 pushes a minipage, every rank reads it
 * without a fault; after a prefetch for writing, the write does not fault;
 * after a prefetch for reading, the read does not fault. */
#include "dsm_test.h"

int main(void)
{
    DT_OK(vmmc_dsm_init(NULL));
    int me = vmmc_dsm_rank(), n = vmmc_dsm_size();
    long *a = NULL, *b = NULL;
    if (me == 0) {
        a = vmmc_dsm_malloc(100 * sizeof *a);
        b = vmmc_dsm_malloc(n * sizeof *b);
        if (!a || !b)
            DT_FAIL("malloc: %s", vmmc_dsm_last_error());
        for (int i = 0; i < 100; i++)
            a[i] = 7 * i;
        DT_OK(vmmc_dsm_push(a));
    }
    DT_OK(vmmc_dsm_bcast_ptr((void **)&a, 0));
    DT_OK(vmmc_dsm_bcast_ptr((void **)&b, 0));
    vmmc_dsm_stats_t s0, s1;
    DT_OK(vmmc_dsm_stats(&s0));
    long sum = 0;
    for (int i = 0; i < 100; i++)
        sum += a[i];
    DT_OK(vmmc_dsm_stats(&s1));
    DT_EQ(sum, 7L * 99 * 100 / 2);
    DT_EQ(s1.read_faults - s0.read_faults, 0);
    DT_OK(vmmc_dsm_barrier());
    DT_PASS("pushed minipage read without faults");

    /* each rank in turn: prefetch for writing, write, no fault */
    for (int r = 0; r < n; r++) {
        if (r == me) {
            DT_OK(vmmc_dsm_prefetch(b, 1));
            DT_OK(vmmc_dsm_stats(&s0));
            b[me] = 100 + me;
            DT_OK(vmmc_dsm_stats(&s1));
            DT_EQ(s1.write_faults - s0.write_faults, 0);
        }
        DT_OK(vmmc_dsm_barrier());
    }
    DT_OK(vmmc_dsm_prefetch(b, 0));
    DT_OK(vmmc_dsm_stats(&s0));
    for (int r = 0; r < n; r++)
        DT_EQ(b[r], 100 + r);
    DT_OK(vmmc_dsm_stats(&s1));
    DT_EQ(s1.read_faults - s0.read_faults, 0);
    DT_OK(vmmc_dsm_barrier());
    DT_PASS("prefetch for writing and for reading");

    /* a push by a rank that does not own the minipage; every copy is right */
    if (me == n - 1) {
        b[0] = 4242;
        DT_OK(vmmc_dsm_push(b));
    }
    DT_OK(vmmc_dsm_barrier());
    DT_OK(vmmc_dsm_stats(&s0));
    DT_EQ(b[0], 4242);
    DT_OK(vmmc_dsm_stats(&s1));
    DT_EQ(s1.read_faults - s0.read_faults, 0);
    DT_EQ(vmmc_dsm_push(&sum), VMMC_ERR_INVALID);
    DT_OK(vmmc_dsm_barrier());
    DT_PASS("push after a write elsewhere");
    DT_OK(vmmc_dsm_finalize());
    return 0;
}
