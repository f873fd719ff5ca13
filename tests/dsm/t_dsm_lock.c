/* Global locks: every rank adds to shared counters under a lock, many
 * times; the totals are exact and nobody ever finds the critical section
 * occupied. Misuse gets clear errors. */
#include <sched.h>
#include <string.h>

#include "dsm_test.h"

#define ITERS 300

/* The two fields are separate minipages, so a critical section faults
 * (and waits for the other ranks' service threads) between reading and
 * writing the count: without mutual exclusion updates get lost. */
typedef struct crit {
    long *inside; /* -1, or the rank in the critical section */
    long *count;
} crit_t;

int main(void)
{
    DT_OK(vmmc_dsm_init(NULL));
    int me = vmmc_dsm_rank(), n = vmmc_dsm_size();
    crit_t *c = NULL;
    long *other = NULL;
    if (me == 0) {
        c = vmmc_dsm_malloc(sizeof *c);
        other = vmmc_dsm_malloc(sizeof *other);
        if (!c || !other || !(c->inside = vmmc_dsm_malloc(sizeof(long))) ||
            !(c->count = vmmc_dsm_malloc(sizeof(long))))
            DT_FAIL("malloc: %s", vmmc_dsm_last_error());
        *c->inside = -1;
        *c->count = 0;
        *other = 0;
    }
    DT_OK(vmmc_dsm_bcast_ptr((void **)&c, 0));
    DT_OK(vmmc_dsm_bcast_ptr((void **)&other, 0));
    for (int i = 0; i < ITERS; i++) {
        DT_OK(vmmc_dsm_lock(3));
        if (*c->inside != -1)
            DT_FAIL("rank %ld is inside the critical section too", *c->inside);
        *c->inside = me;
        long v = *c->count;
        sched_yield();
        *c->count = v + 1;
        if (*c->inside != me)
            DT_FAIL("rank %ld entered the critical section of rank %d", *c->inside, me);
        *c->inside = -1;
        DT_OK(vmmc_dsm_unlock(3));
        if (i % 3 == 0) { /* a second lock, held across the first */
            DT_OK(vmmc_dsm_lock(VMMC_DSM_LOCKS - 1));
            DT_OK(vmmc_dsm_lock(0));
            ++*other;
            DT_OK(vmmc_dsm_unlock(0));
            DT_OK(vmmc_dsm_unlock(VMMC_DSM_LOCKS - 1));
        }
    }
    DT_OK(vmmc_dsm_barrier());
    DT_EQ(*c->count, (long)n * ITERS);
    DT_EQ(*other, (long)n * ((ITERS + 2) / 3));
    DT_PASS("counters under locks are exact");

    /* misuse */
    DT_EQ(vmmc_dsm_lock(-1), VMMC_ERR_INVALID);
    DT_EQ(vmmc_dsm_lock(VMMC_DSM_LOCKS), VMMC_ERR_INVALID);
    DT_EQ(vmmc_dsm_unlock(5), VMMC_ERR_INVALID);
    if (!strstr(vmmc_dsm_last_error(), "does not hold lock 5"))
        DT_FAIL("message: %s", vmmc_dsm_last_error());
    DT_OK(vmmc_dsm_lock(5));
    DT_EQ(vmmc_dsm_lock(5), VMMC_ERR_BUSY);
    DT_OK(vmmc_dsm_unlock(5));
    DT_OK(vmmc_dsm_barrier());
    DT_PASS("lock misuse refused");
    DT_OK(vmmc_dsm_finalize());
    return 0;
}
